"""Shared fixtures: a fresh CDK app per test, synth with the gates, cfn-lint on the result."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import aws_cdk as cdk
import pytest

from training_clusters.compliance import (
    Finding,
    LintMatch,
    add_compliance_checks,
    cfn_lint,
    synth_with_checks,
)

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = Path(__file__).resolve().parent.parent
CDK_CONTEXT = json.loads((ROOT / "cdk.json").read_text())["context"]
REGION = "us-east-1"
AZS = ["us-east-1a", "us-east-1b"]


@pytest.fixture
def app(tmp_path: Path) -> cdk.App:
    """A fresh app with the project's feature flags, writing into a per-test folder."""
    return cdk.App(outdir=str(tmp_path / "cdk.out"), context=dict(CDK_CONTEXT))


class PinnedStack(cdk.Stack):
    """A stack in us-east-1 whose AZs are known without credentials."""

    @property
    def availability_zones(self) -> list[str]:
        return list(AZS)


@pytest.fixture
def stack(app: cdk.App) -> cdk.Stack:
    return PinnedStack(app, "Test", env=cdk.Environment(region=REGION))


class GateResult:
    """The outcome of synthesizing an app with cdk-nag, plus cfn-lint over every template."""

    def __init__(self, app: cdk.App) -> None:
        add_compliance_checks(app)
        assembly, self.findings = synth_with_checks(app)
        self.assembly = assembly
        self.lint: list[LintMatch] = []
        if assembly is not None:
            for stack in assembly.stacks:
                region = stack.environment.region
                lint_region = region if region and region != "unknown-region" else REGION
                self.lint.extend(cfn_lint(Path(assembly.directory) / stack.template_file, [lint_region]))

    @property
    def nag(self) -> list[Finding]:
        return [f for f in self.findings if f.plugin.startswith("AwsSolutions")]

    @property
    def lint_errors(self) -> list[LintMatch]:
        return [m for m in self.lint if m.level == "error"]

    def assert_clean(self) -> None:
        assert self.assembly is not None, "synth refused: " + "\n".join(map(str, self.findings))
        assert self.nag == [], "\n".join(map(str, self.nag))
        assert self.lint_errors == [], "\n".join(map(str, self.lint_errors))


@pytest.fixture
def gates() -> Callable[[cdk.App], GateResult]:
    return GateResult


def template_of(stack: cdk.Stack) -> dict[str, object]:
    """The synthesized template as a dict (without the gates)."""
    from aws_cdk.assertions import Template

    result: dict[str, object] = Template.from_stack(stack).to_json()
    return result


@pytest.fixture
def environments_dir() -> Iterator[Path]:
    yield ROOT / "environments"
