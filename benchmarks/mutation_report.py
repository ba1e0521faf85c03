"""The kill rate of the last ``mutmut run`` (make mutation), per module, from mutmut's own result files.

mutmut 3 keeps one ``mutants/<module>.py.meta`` per mutated file: each mutant's exit code (1 or 3: a test
failed, the mutant is killed; 0: every covering test passed, it survived; 33: no selected test calls the
function; 36: a test ran past its timeout, counted as killed as mutmut counts it). The rate is
``(killed + timeout) / (every mutant checked)``: a mutant no test reaches is a survivor, not left out.

    python benchmarks/mutation_report.py [--minimum 90] [--survivors]

Exits 1 when the rate over all modules is below ``--minimum`` (percent), or when a mutant was not checked.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

#: mutmut 3.8's exit codes (``mutmut.stats.status_by_exit_code``), folded into what the report counts.
KILLED_CODES = {1, 3, 36, 24, -24, 152, 255}
SURVIVED_CODES = {0}
NO_TESTS_CODES = {5, 33}


def outcome(exit_code: int | None) -> str:
    if exit_code is None:
        return "not checked"
    if exit_code in KILLED_CODES:
        return "killed"
    if exit_code in SURVIVED_CODES:
        return "survived"
    if exit_code in NO_TESTS_CODES:
        return "no tests"
    return "other"


def module_results(mutants: Path) -> dict[str, dict[str, str]]:
    """``{module file: {mutant name: outcome}}`` for every ``.meta`` file under ``mutants``."""
    results: dict[str, dict[str, str]] = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        module = meta.relative_to(mutants).as_posix().removesuffix(".meta")
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        if codes:
            results[module] = {name: outcome(code) for name, code in codes.items()}
    return results


def rate(outcomes: Counter[str]) -> float:
    checked = sum(outcomes.values()) - outcomes["not checked"]
    return 100.0 * outcomes["killed"] / checked if checked else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=Path("mutants"))
    parser.add_argument("--minimum", type=float, default=90.0, help="the least kill rate, percent")
    parser.add_argument("--survivors", action="store_true", help="list every mutant that was not killed")
    args = parser.parse_args(argv)

    results = module_results(args.mutants)
    if not results:
        print(f"no mutmut results under {args.mutants}: run `make mutation` first", file=sys.stderr)
        return 1
    total: Counter[str] = Counter()
    print(f"{'module':<44} {'mutants':>7} {'killed':>6} {'survived':>8} {'no tests':>8} {'rate':>6}")
    for module, outcomes in results.items():
        counts = Counter(outcomes.values())
        total.update(counts)
        print(
            f"{module:<44} {sum(counts.values()):>7} {counts['killed']:>6} {counts['survived']:>8} "
            f"{counts['no tests']:>8} {rate(counts):>5.1f}%"
        )
    print(
        f"{'all':<44} {sum(total.values()):>7} {total['killed']:>6} {total['survived']:>8} "
        f"{total['no tests']:>8} {rate(total):>5.1f}%"
    )
    if args.survivors:
        for outcomes in results.values():
            for name, result in outcomes.items():
                if result != "killed":
                    print(f"{result}: {name}")
    if total["not checked"]:
        print(f"{total['not checked']} mutants were not checked: the run did not finish", file=sys.stderr)
        return 1
    if rate(total) < args.minimum:
        print(f"kill rate {rate(total):.1f}% is below {args.minimum:g}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
