"""What a user's ``cdk synth`` of network-storage costs next to the same app written by hand: paired runs.

Each run is a fresh process, as ``cdk synth`` starts one: Python, the imports, jsii's Node process, the synth
and the cdk-nag packs. One round runs ``app.py`` on ``environments/network-storage.yaml`` (for each source
tree given with ``--tree``) and ``benchmarks/handwritten.py`` (the same resources with aws-cdk-lib alone),
in an order that rotates from round to round, so a change in the machine's load falls on all sides alike.
It prints the median CPU time (user + system, Node included) and wall time of each, and the median of the
per-round ratios of CPU time to the hand-written app's (goal: at most 1.10). CPU time is the figure to read
on a shared machine: wall time moves with everyone else's work, CPU time much less.

``--imports`` also times, in the same rotation, a process that only imports ``training_clusters.constructs``
and one that runs ``from training_clusters.constructs import TrainingNetwork``.

    .venv/bin/python benchmarks/paired.py --rounds 9
    .venv/bin/python benchmarks/paired.py --tree before=/tmp/main-copy --tree after=. --imports
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENVIRONMENT = "environments/network-storage.yaml"
IMPORTS = {
    "import-package": "import training_clusters.constructs",
    "import-network": "from training_clusters.constructs import TrainingNetwork",
}


@dataclass
class Samples:
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)


def context(environment: str | None) -> str:
    values = json.loads((ROOT / "cdk.json").read_text())["context"]
    if environment is not None:
        values["environment"] = environment
    return json.dumps(values)


def run(command: list[str], tree: Path, environment: str | None) -> tuple[float, float]:
    """CPU seconds (user + system of the process and the Node process it waits for) and wall seconds."""
    with tempfile.TemporaryDirectory(prefix="paired-") as outdir:
        env = {
            **os.environ,
            "CDK_OUTDIR": outdir,
            "CDK_CONTEXT_JSON": context(environment),
            "PYTHONPATH": str(tree),  # ahead of the editable install: this tree's package is the one imported
        }
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            command, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        help="NAME=PATH of a source tree to run app.py from (default: .)",
    )
    parser.add_argument("--imports", action="store_true", help="also time the package's imports")
    args = parser.parse_args()

    trees = dict(item.split("=", 1) for item in args.tree) or {"current": str(ROOT)}
    python = sys.executable
    sides: dict[str, tuple[list[str], Path, str | None]] = {
        "handwritten": ([python, str(ROOT / "benchmarks" / "handwritten.py")], ROOT, None),
    }
    for name, tree in trees.items():
        sides[f"network-storage[{name}]"] = ([python, "app.py"], Path(tree).resolve(), ENVIRONMENT)
        if args.imports:
            for label, statement in IMPORTS.items():
                sides[f"{label}[{name}]"] = ([python, "-c", statement], Path(tree).resolve(), None)
    samples = {name: Samples() for name in sides}
    names = list(sides)
    for round_ in range(args.rounds + 1):  # round 0 warms the disk cache, untimed
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            cpu, wall = run(*sides[name])
            if round_:
                samples[name].cpu.append(cpu)
                samples[name].wall.append(wall)
    print(f"{args.rounds} rounds, each side once per round in rotating order; medians:")
    print(f"{'side':36} {'CPU s':>7} {'wall s':>7} {'CPU ratio to handwritten':>25}")
    yardstick = samples["handwritten"].cpu
    for name, sample in samples.items():
        ratio = statistics.median(c / h for c, h in zip(sample.cpu, yardstick, strict=True))
        print(
            f"{name:36} {statistics.median(sample.cpu):7.2f} {statistics.median(sample.wall):7.2f} {ratio:25.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
