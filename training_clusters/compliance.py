"""cdk-nag (3.x validation plugins) and cfn-lint: the offline gates every template must pass.

Users gate their own CI the same way::

    app = cdk.App()
    ...
    add_compliance_checks(app)   # synth fails on any unacknowledged AwsSolutions finding
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

# The linter lives in a CDK-free module; re-exported for existing callers.
from training_clusters.lint import CFN_LINT_IGNORED as CFN_LINT_IGNORED
from training_clusters.lint import LintMatch as LintMatch
from training_clusters.lint import cfn_lint as cfn_lint

AWS_SOLUTIONS = "AwsSolutions"


def add_compliance_checks(app: cdk.App) -> None:
    """Run the AwsSolutions cdk-nag pack on every stack of ``app`` at synth time."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one AwsSolutions finding on the construct that causes it.

    ``rule`` is the finding as cdk-nag reports it, with its detail when it has one, e.g.
    ``"AwsSolutions-IAM5[Resource::*]"``; ``reason`` must say why this resource is acceptable.
    """
    if not reason.strip():
        raise ValueError(f"acknowledging {rule} needs a specific reason")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"{AWS_SOLUTIONS}::{rule}", reason=reason))


def nag_detail(value: Any) -> str:
    """How cdk-nag prints a policy ARN or resource in a finding's detail.

    ``{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/X"]]}`` becomes
    ``arn:<AWS::Partition>:iam::aws:policy/X``; ``{"Fn::GetAtt": ["Fn", "Arn"]}`` becomes ``<Fn.Arn>``, ``${AWS::Region}`` inside ``Fn::Sub`` ``<AWS::Region>``;
    anything else (e.g. ``Fn::If``) is compact JSON. Pass values through ``Stack.resolve`` first.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((key, argument),) = value.items()
        if key == "Ref" and isinstance(argument, str):
            return f"<{argument}>"
        if key == "Fn::GetAtt" and isinstance(argument, list) and len(argument) == 2:
            return f"<{argument[0]}.{argument[1]}>"
        if key == "Fn::Sub" and isinstance(argument, str):
            return re.sub(r"\$\{([^}]+)\}", r"<\1>", argument)
        if key == "Fn::Join" and isinstance(argument, list) and argument[0] == "":
            parts = [nag_detail(part) for part in argument[1]]
            if all(not part.startswith("{") for part in parts):
                return "".join(parts)
    return json.dumps(value, separators=(",", ":"))


def wildcard_finding(scope: IConstruct, kind: str, value: Any) -> str:
    """The AwsSolutions-IAM5 finding id for ``value`` (an action or resource, possibly a token)."""
    return f"AwsSolutions-IAM5[{kind}::{nag_detail(cdk.Stack.of(scope).resolve(value))}]"


def acknowledge_wildcards(
    policy: iam.CfnPolicy, reasons: Mapping[str, str], default: str | None = None
) -> None:
    """Acknowledge each wildcard (IAM5) finding of ``policy``, read from its resolved document.

    ``reasons`` maps a finding id (see :func:`wildcard_finding`) to its reason; a wildcard without one gets
    ``default``, and with no default it stays unacknowledged, so a new wildcard fails the gate.
    """
    document = cdk.Stack.of(policy).resolve(policy.policy_document) or {}
    for statement in document.get("Statement", []):
        for kind in ("Resource", "Action"):
            values = statement.get(kind, [])
            for value in values if isinstance(values, list) else [values]:
                detail = nag_detail(value)
                if "*" not in detail:
                    continue
                rule = f"AwsSolutions-IAM5[{kind}::{detail}]"
                reason = reasons.get(rule, default)
                if reason is not None:
                    acknowledge(policy, rule, reason)


def acknowledge_managed_policies(
    role: iam.CfnRole, reasons: Mapping[str, str], default: str | None = None
) -> None:
    """Acknowledge each AWS-managed policy (IAM4) finding of ``role``.

    ``reasons`` maps a policy name (e.g. ``AWSLambdaBasicExecutionRole``) to its reason; a policy without
    one gets ``default``, and with no default it stays unacknowledged.
    """
    for arn in cdk.Stack.of(role).resolve(role.managed_policy_arns) or []:
        detail = nag_detail(arn)
        reason = next((r for name, r in reasons.items() if detail.endswith(f"/{name}")), default)
        if reason is not None:
            acknowledge(role, f"AwsSolutions-IAM4[Policy::{detail}]", reason)


def acknowledge_cdk_made(
    scope: IConstruct,
    reason: str,
    *,
    managed_policy_reasons: Mapping[str, str] | None = None,
    skip: Callable[[IConstruct], bool] | None = None,
) -> None:
    """Acknowledge what aws-cdk-lib builds for itself under ``scope``, on each resource that causes it.

    Provider Lambdas (L1: aws-cdk-lib chooses their runtime), their roles' AWS-managed policies (IAM4,
    ``managed_policy_reasons`` by policy name, else ``reason``), their policies' wildcards (IAM5) and waiter
    state machines (SF1, SF2). ``reason`` says what the resources are for; ``skip`` leaves out our own
    resources under ``scope``, which must pass on their own.
    """
    kinds = (lambda_.CfnFunction, sfn.CfnStateMachine, iam.CfnRole, iam.CfnPolicy)
    for construct in scope.node.find_all():
        # Type first: each path lookup in ``skip`` is a round trip to jsii, and most constructs are none of these.
        if not isinstance(construct, kinds) or (skip is not None and skip(construct)):
            continue
        if isinstance(construct, lambda_.CfnFunction):
            acknowledge(construct, "AwsSolutions-L1", f"{reason}; aws-cdk-lib chooses its runtime")
        elif isinstance(construct, sfn.CfnStateMachine):
            acknowledge(construct, "AwsSolutions-SF1", reason)
            acknowledge(construct, "AwsSolutions-SF2", reason)
        elif isinstance(construct, iam.CfnRole):
            reasons = {name: f"{why}; {reason}" for name, why in (managed_policy_reasons or {}).items()}
            acknowledge_managed_policies(construct, reasons, default=reason)
        else:
            acknowledge_wildcards(construct, {}, default=reason)


@dataclass(frozen=True)
class Finding:
    """One unacknowledged finding of a validation plugin (cdk-nag's AwsSolutions, CDK's own checks)."""

    plugin: str
    rule: str
    severity: str
    construct_path: str
    description: str

    def __str__(self) -> str:
        return f"[{self.plugin}] {self.rule} ({self.severity}) on {self.construct_path}: {self.description}"


def read_validation_report(assembly_dir: str | Path) -> list[Finding]:
    """Findings recorded in a cloud assembly's ``validation-report.json`` (absent when there are none)."""
    report_path = Path(assembly_dir) / "validation-report.json"
    if not report_path.exists():
        return []
    report = json.loads(report_path.read_text())
    return [
        Finding(
            plugin=plugin["pluginName"],
            rule=violation["ruleName"],
            severity=violation.get("severity", ""),
            construct_path=construct["constructPath"],
            description=violation.get("description", ""),
        )
        for plugin in report.get("pluginReports", [])
        for violation in plugin.get("violations", [])
        for construct in violation.get("violatingConstructs", [])
    ]


def nag_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Only the cdk-nag AwsSolutions findings."""
    return [f for f in findings if f.plugin.startswith(AWS_SOLUTIONS)]


def synth_with_checks(app: cdk.App) -> tuple[cdk.cx_api.CloudAssembly | None, list[Finding]]:
    """Synthesize ``app`` (already carrying :func:`add_compliance_checks`); return the assembly and findings.

    The assembly is None when a plugin reported errors (synth refuses to finish).
    """
    try:
        assembly = app.synth()
    except RuntimeError as error:
        if "ValidationFailed" not in str(error):
            raise
        return None, read_validation_report(app.outdir)
    return assembly, read_validation_report(assembly.directory)
