"""cfn-lint, AWS's CloudFormation linter, on synthesized templates.

Free of CDK imports, so it runs in a process that never starts jsii (the test suite lints in a
background worker while the main process synthesizes).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CFN_LINT_IGNORED", "LintMatch", "cfn_lint"]

#: cfn-lint rules we ignore on every template, each with its reason.
CFN_LINT_IGNORED: dict[str, str] = {
    "W3005": "redundant DependsOn emitted by CDK's own providers (e.g. Custom::VpcRestrictDefaultSG); not ours",
    "W3010": "AZs are pinned on purpose: a cluster placement group, its subnet and FSx must share one known AZ",
}


@dataclass(frozen=True)
class LintMatch:
    """One cfn-lint finding."""

    rule: str
    level: str
    message: str
    path: str

    def __str__(self) -> str:
        return f"{self.rule} [{self.level}] {self.path}: {self.message}"


def cfn_lint(template_path: str | Path, regions: Iterable[str]) -> list[LintMatch]:
    """Run cfn-lint (AWS's CloudFormation linter) on one synthesized template."""
    from cfnlint.api import ManualArgs, lint

    wanted = tuple(regions)
    config = ManualArgs(regions=list(wanted), ignore_checks=list(CFN_LINT_IGNORED))
    matches = lint(Path(template_path).read_text(), rules=_cfn_lint_rules(wanted), config=config)
    return [
        LintMatch(
            rule=match.rule.id,
            level=_level(match.rule.id),
            message=match.message,
            path="/".join(str(part) for part in match.path),
        )
        for match in matches
    ]


@functools.cache
def _cfn_lint_rules(regions: tuple[str, ...]) -> Any:
    """cfn-lint's rule collection, loaded once per process (loading it costs more than linting a template)."""
    from cfnlint.config import ConfigMixIn
    from cfnlint.runner import Runner

    return Runner(ConfigMixIn(regions=list(regions), ignore_checks=list(CFN_LINT_IGNORED))).rules


def _level(rule_id: str) -> str:
    return {"E": "error", "W": "warning", "I": "info"}.get(rule_id[:1], "unknown")
