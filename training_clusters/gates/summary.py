"""Summarize a cloud assembly: per template, resources, cdk-nag findings, cfn-lint and checkov results.

``python -m training_clusters.gates.summary cdk.out`` prints the table ``make synth`` shows (``--output json``: every
count and finding as one JSON document) and exits non-zero when any template has an unacknowledged
AwsSolutions finding, a cfn-lint error or a checkov finding that is neither fixed nor skipped with a reason. cdk-nag's NIST 800-53 R5 pack is shown for information (open and
acknowledged findings) and never fails the gate.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training_clusters.config.yaml_file import read_json
from training_clusters.diagram.sources import STACK, assembly_artifacts, read_template
from training_clusters.gates.checkov import CHECKOV_ENV_VAR, CheckovResult, CheckovUnavailable, checkov_scan
from training_clusters.gates.compliance import (
    AWS_SOLUTIONS,
    NIST_800_53_R5,
    Finding,
    LintMatch,
    cfn_lint,
    read_validation_report,
)
from training_clusters.model.errors import ConfigurationError, displayable, excerpt
from training_clusters.model.tables import text_table


@dataclass(frozen=True)
class TemplateSummary:
    """What the gates found in one synthesized template."""

    stack: str
    region: str
    resources: int
    nag_findings: list[Finding]
    nag_acknowledged: int
    lint: list[LintMatch]
    checkov: list[CheckovResult] = field(default_factory=list)
    nist_findings: list[Finding] = field(default_factory=list)
    nist_acknowledged: int = 0

    @property
    def lint_errors(self) -> int:
        return sum(1 for m in self.lint if m.level == "error")

    @property
    def lint_warnings(self) -> int:
        return sum(1 for m in self.lint if m.level == "warning")

    @property
    def checkov_open(self) -> list[CheckovResult]:
        """checkov findings neither fixed nor skipped with a reason."""
        return [r for r in self.checkov if r.failed]

    @property
    def checkov_skipped(self) -> int:
        return sum(1 for r in self.checkov if not r.failed)

    @property
    def passed(self) -> bool:
        """The gate: no open AwsSolutions finding, no cfn-lint error, no open checkov finding (NIST informs)."""
        return not self.nag_findings and self.lint_errors == 0 and not self.checkov_open

    def as_dict(self) -> dict[str, Any]:
        """Every count of the table on its own, with the findings behind them (for ``--output json``)."""
        return {
            "stack": self.stack,
            "region": self.region,
            "resources": self.resources,
            "nag_open": len(self.nag_findings),
            "nag_acknowledged": self.nag_acknowledged,
            "lint_errors": self.lint_errors,
            "lint_warnings": self.lint_warnings,
            "checkov_open": len(self.checkov_open),
            "checkov_skipped": self.checkov_skipped,
            "nist_open": len(self.nist_findings),
            "nist_acknowledged": self.nist_acknowledged,
            "passed": self.passed,
            "nag_findings": [str(f) for f in self.nag_findings],
            "lint": [str(m) for m in self.lint],
            "checkov_findings": [str(r) for r in self.checkov_open],
            "nist_findings": [str(f) for f in self.nist_findings],
        }


#: How a template is linted: cfn-lint in this process unless the caller hands the work elsewhere.
Linter = Callable[[Path, list[str]], list[LintMatch]]
#: How templates are scanned with checkov: all at once (one process start), results naming their template.
Scanner = Callable[[list[Path]], list[CheckovResult]]


def summarize(
    assembly_dir: str | Path, *, lint: Linter = cfn_lint, scan: Scanner = checkov_scan
) -> list[TemplateSummary]:
    """Run the gates over every stack of a cloud assembly (``lint``: see :data:`Linter`; ``scan``:
    :data:`Scanner`).

    :raises ConfigurationError: a file of the assembly is missing, not what it should be, or broken.
    """
    directory = Path(assembly_dir)
    artifacts = assembly_artifacts(directory)
    findings = _validation_findings(directory)
    stacks = [
        (name, artifact, directory / artifact["properties"]["templateFile"])
        for name, artifact in sorted(artifacts.items())
        if artifact.get("type") == STACK
    ]
    templates = [read_template(template_file) for _, _, template_file in stacks]
    scanned = scan([template_file for _, _, template_file in stacks]) if stacks else []
    summaries = []
    for (name, artifact, template_file), template in zip(stacks, templates, strict=True):
        region = _region(artifact.get("environment", ""))
        metadata = stack_metadata(directory, artifact)
        resources = template.get("Resources", {})
        summaries.append(
            TemplateSummary(
                stack=name,
                region=region,
                resources=sum(isinstance(r, dict) for r in resources.values())
                if isinstance(resources, dict)
                else 0,
                nag_findings=[
                    f for f in findings if f.plugin.startswith(AWS_SOLUTIONS) and _in_stack(f, name)
                ],
                nag_acknowledged=_acknowledged(metadata, AWS_SOLUTIONS),
                lint=lint(template_file, [region]),
                checkov=[r for r in scanned if Path(r.template).name == template_file.name],
                nist_findings=[
                    f for f in findings if f.plugin.startswith(NIST_800_53_R5) and _in_stack(f, name)
                ],
                nist_acknowledged=_acknowledged(metadata, NIST_800_53_R5),
            )
        )
    return summaries


def _validation_findings(directory: Path) -> list[Finding]:
    """cdk-nag's findings, from the assembly's validation report when there is one (bounded, checked)."""
    path = directory / "validation-report.json"
    if not (path.exists() or path.is_symlink()):
        return []
    read_json(path, what="a validation report")  # a regular file of bounded size holding JSON
    try:
        return read_validation_report(directory)
    except (AttributeError, KeyError, TypeError) as error:
        raise ConfigurationError(
            f"{path}: not a validation report as CDK writes it ({type(error).__name__}: {excerpt(str(error))})"
        ) from None


def _region(environment: str) -> str:
    region = environment.rsplit("/", 1)[-1]
    return region if region and region != "unknown-region" else "us-east-1"


def _in_stack(finding: Finding, stack: str) -> bool:
    return finding.construct_path.split("/", 1)[0] == stack


def stack_metadata(directory: Path, artifact: dict[str, Any]) -> dict[str, list[dict[str, object]]]:
    """A stack's construct metadata: inline in the manifest, or in its ``additionalMetadataFile``."""
    metadata: dict[str, list[dict[str, object]]] = dict(artifact.get("metadata", {}))
    extra = artifact.get("additionalMetadataFile")
    if isinstance(extra, str) and extra and (directory / extra).exists():
        path = directory / extra
        document = read_json(path, what="a stack's metadata file")
        if not isinstance(document, dict):
            raise ConfigurationError(f"{path}: must be a JSON object, got {type(document).__name__}")
        metadata.update(document)
    return metadata


def _acknowledged(metadata: dict[str, list[dict[str, object]]], pack: str) -> int:
    count = 0
    for entries in metadata.values():
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            data = entry.get("data")
            if entry.get("type") == "aws:cdk:acknowledged-rules" and isinstance(data, dict):
                count += sum(1 for rule in data if str(rule).startswith(f"{pack}::"))
    return count


#: The summary's columns: (header, value of a template). Counts that belong together share a column ("open /
#: acknowledged"), so the table fits :data:`~training_clusters.model.tables.TABLE_WIDTH`; ``--output json`` gives
#: every count on its own (:meth:`TemplateSummary.as_dict`).
_COLUMNS: tuple[tuple[str, Callable[[TemplateSummary], str]], ...] = (
    ("stack", lambda s: s.stack),
    ("region", lambda s: s.region),
    ("resources", lambda s: str(s.resources)),
    ("AwsSolutions open / acknowledged", lambda s: f"{len(s.nag_findings)} / {s.nag_acknowledged}"),
    ("cfn-lint errors / warnings", lambda s: f"{s.lint_errors} / {s.lint_warnings}"),
    ("checkov open / skipped", lambda s: f"{len(s.checkov_open)} / {s.checkov_skipped}"),
    ("NIST (info) open / acknowledged", lambda s: f"{len(s.nist_findings)} / {s.nist_acknowledged}"),
    ("gates", lambda s: "ok" if s.passed else "FAIL"),
)


def format_table(summaries: list[TemplateSummary]) -> str:
    """The summary as a plain-text table, one row per template, at most 120 characters wide."""
    return text_table(
        [header for header, _ in _COLUMNS], [[value(s) for _, value in _COLUMNS] for s in summaries]
    )


def summary_document(summaries: list[TemplateSummary]) -> dict[str, Any]:
    """The summary as plain data: every count of every template, its findings, and the verdict."""
    return {
        "passed": all(s.passed for s in summaries),
        "templates": [s.as_dict() for s in summaries],
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m training_clusters.gates.summary",
        allow_abbrev=False,
        description="Gate a synthesized cloud assembly: cdk-nag findings (from its validation report), "
        "cfn-lint on every template and checkov; prints one row per stack and exits 1 when any fails.",
        epilog="cfn-lint comes with the 'gates' extra: pip install 'cdk-training-clusters[gates]'. checkov "
        "cannot share an environment with aws-cdk-lib: install it in its own virtual environment and point "
        f"{CHECKOV_ENV_VAR} at its checkov executable, or pass --no-checkov.",
    )
    parser.add_argument("assembly", nargs="?", default="cdk.out", help="the cloud assembly folder (cdk.out)")
    parser.add_argument("--no-lint", action="store_true", help="skip cfn-lint")
    parser.add_argument("--no-checkov", action="store_true", help="skip checkov")
    parser.add_argument(
        "--output",
        choices=("table", "json"),
        default="table",
        help="table (default: at most 120 characters wide, findings listed below it) or json (every count "
        "and finding of every template)",
    )
    return parser


def _no_lint(template: Path, regions: list[str]) -> list[LintMatch]:
    return []


def _no_scan(templates: list[Path]) -> list[CheckovResult]:
    return []


def main(argv: list[str] | None = None, *, lint: Linter = cfn_lint, scan: Scanner = checkov_scan) -> int:
    """``python -m training_clusters.gates.summary [ASSEMBLY] [--no-lint] [--no-checkov] [--output json]``: the
    gates' table (at most 120 characters wide, every finding listed below it), or one JSON document.

    Exit status: 0 every template passes, 1 one fails, 2 a gate cannot run (cfn-lint or checkov missing,
    no assembly, a broken one), with one line saying what is wrong.

    :param argv: Default: ``sys.argv[1:]``; the assembly folder defaults to ``cdk.out``.
    :param lint: Default: cfn-lint in this process (see :data:`Linter`).
    :param scan: Default: checkov from ``.venv-checkov`` (see :mod:`training_clusters.gates.checkov`).
    """
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return _report(Path(args.assembly), args, lint, scan)
    except ConfigurationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _report(directory: Path, args: argparse.Namespace, lint: Linter, scan: Scanner) -> int:
    if not (directory / "manifest.json").is_file():
        raise ConfigurationError(
            f"{directory} is not a cloud assembly (no manifest.json); run cdk synth first"
        )
    if args.no_lint:
        lint = _no_lint
    elif lint is cfn_lint and importlib.util.find_spec("cfnlint") is None:
        print(
            "error: cfn-lint is not installed: pip install 'cdk-training-clusters[gates]' (or pass --no-lint)",
            file=sys.stderr,
        )
        return 2
    try:
        summaries = summarize(directory, lint=lint, scan=_no_scan if args.no_checkov else scan)
    except CheckovUnavailable as error:
        print(f"error: {error}; or pass --no-checkov", file=sys.stderr)
        return 2
    if not summaries:
        print(displayable(f"no stack templates in {directory}"), file=sys.stderr)
        return 1
    failed = [s.stack for s in summaries if not s.passed]
    if args.output == "json":
        json.dump(summary_document(summaries), sys.stdout, indent=2)
        print()
        return 1 if failed else 0
    print(format_table(summaries))
    for summary in summaries:
        for finding in summary.nag_findings:
            print(f"  {summary.stack}: {finding}")
        for match in summary.lint:
            print(f"  {summary.stack}: {match}")
        for result in summary.checkov_open:
            print(f"  {summary.stack}: [checkov] {result}")
        for finding in summary.nist_findings:
            print(f"  {summary.stack}: (informative) {finding}")
    print(
        f"\n{len(summaries)} template(s); "
        + (f"FAILED: {', '.join(failed)}" if failed else "all gates passed")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
