"""cdk-nag (3.x validation plugins), cfn-lint and checkov: the offline gates every template must pass.

Users gate their own CI the same way::

    app = cdk.App()
    ...
    add_compliance_checks(app)   # synth fails on any unacknowledged AwsSolutions finding

Every accepted finding is explained on the resource that causes it, in one of three ways that all live here:
:func:`acknowledge` (cdk-nag AwsSolutions, the gate), :func:`acknowledge_nist` (cdk-nag's NIST 800-53 R5 pack,
reported for information) and :func:`skip_checkov` (checkov, the third gate, run on the synthesized
templates). :func:`acknowledge_cdk_made` applies all three to what aws-cdk-lib builds for itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import IConstruct

# The linter lives in a CDK-free module; re-exported for existing callers.
from training_clusters.gates.cfn_lint import CFN_LINT_IGNORED as CFN_LINT_IGNORED
from training_clusters.gates.cfn_lint import LintMatch as LintMatch
from training_clusters.gates.cfn_lint import cfn_lint as cfn_lint

AWS_SOLUTIONS = "AwsSolutions"
NIST_800_53_R5 = "NIST.800.53.R5"
#: The template metadata key checkov reads its per-resource skips from.
CHECKOV_METADATA = "checkov"


def add_compliance_checks(app: cdk.App, *, nist: bool = True) -> None:
    """Run the AwsSolutions cdk-nag pack on every stack of ``app`` at synth time.

    :param nist: Also run cdk-nag's NIST 800-53 R5 pack, for information: its findings are recorded in the
        assembly's ``validation-report.json`` (``make synth`` shows them in its own column) but never stop
        the synth. Default: True.
    """
    from cdk_nag import AwsSolutionsChecks, NIST80053R5Checks  # loaded by the apps that check, only

    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    if nist:
        cdk.Validations.of(app).add_plugins(InformativePack(NIST80053R5Checks(app), app))


@jsii.implements(cdk.IPolicyValidationPlugin)
class InformativePack:
    """A cdk-nag pack whose findings are reported but never fail the synth.

    cdk-nag 3 marks a report failed whenever it has a finding, and CDK fails a report holding an
    ``error``-severity finding once acknowledgements are applied; this wrapper passes every finding on as a
    ``warning``, so CDK writes them into ``validation-report.json`` without refusing the assembly.
    """

    def __init__(self, pack: Any, app: IConstruct) -> None:
        self._pack = pack
        self._app = app

    @property
    def name(self) -> str:
        return str(self._pack.name)

    @property
    def version(self) -> str | None:
        return self._pack.version  # type: ignore[no-any-return]

    @property
    def rule_ids(self) -> list[str] | None:
        return self._pack.rule_ids  # type: ignore[no-any-return]

    def validate(self, context: Any) -> cdk.PolicyValidationPluginReport:
        report = self._pack.validate_scope(self._app)
        violations = [
            cdk.PolicyViolation(
                rule_name=v.rule_name,
                description=v.description,
                violating_resources=v.violating_resources,
                severity="warning",
                fix=v.fix,
                rule_metadata=v.rule_metadata,
            )
            for v in report.violations
        ]
        return cdk.PolicyValidationPluginReport(success=True, violations=violations)


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one AwsSolutions finding on the construct that causes it.

    ``rule`` is the finding as cdk-nag reports it, with its detail when it has one, e.g.
    ``"AwsSolutions-IAM5[Resource::*]"``, or exactly as its failure hint prints it
    (``"AwsSolutions::AwsSolutions-IAM5[Resource::*]"``); ``reason`` must say why this resource is acceptable.
    """
    if not reason.strip():
        raise ValueError(f"acknowledging {rule} needs a specific reason")
    rule = rule.removeprefix(f"{AWS_SOLUTIONS}::")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"{AWS_SOLUTIONS}::{rule}", reason=reason))


def acknowledge_nist(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one NIST 800-53 R5 finding (e.g. ``"NIST.800.53.R5-IAMNoInlinePolicy"``) where it arises.

    The pack is informative (see :func:`add_compliance_checks`); acknowledging says why the control does not
    apply here, so the summary's open NIST column lists only what nobody has looked at.
    """
    if not reason.strip():
        raise ValueError(f"acknowledging {rule} needs a specific reason")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"{NIST_800_53_R5}::{rule}", reason=reason))


def skip_checkov(resource: IConstruct, check_id: str, reason: str) -> None:
    """Skip one checkov check (e.g. ``"CKV_AWS_158"``) on one CloudFormation resource, saying why.

    ``resource`` is the L1 resource, or an L2 construct whose default child is one. The skip is written into
    the resource's template metadata (``Metadata.checkov.skip``), where checkov reads it; checkov then lists
    the check as skipped with ``reason``.
    """
    if not reason.strip():
        raise ValueError(f"skipping {check_id} needs a specific reason")
    cfn = resource if isinstance(resource, cdk.CfnResource) else resource.node.default_child
    if not isinstance(cfn, cdk.CfnResource):
        raise TypeError(f"{resource.node.path} is not a CloudFormation resource and has no default one")
    existing = cfn.get_metadata(CHECKOV_METADATA) or {}
    skips = [skip for skip in existing.get("skip", []) if skip["id"] != check_id]
    cfn.add_metadata(CHECKOV_METADATA, {"skip": [*skips, {"id": check_id, "comment": reason}]})


#: What checkov and cdk-nag's NIST pack ask of every Lambda function, and why a custom-resource handler
#: (CloudFormation's, invoked once per deployment event) is fine without it.
_HANDLER_CONCURRENCY = (
    "runs only while CloudFormation deploys this stack, once per custom-resource event; reserving "
    "concurrency would take it from the account's unreserved pool (and fails in accounts with the minimum)"
)
_HANDLER_DLQ = (
    "invoked synchronously by CloudFormation or CDK's Provider framework, which report a failure to the "
    "deployment; a dead-letter queue only receives failed asynchronous invocations"
)
_HANDLER_OUTSIDE_VPC = (
    "calls only AWS APIs over HTTPS with its role's credentials and reaches nothing inside the VPC; running "
    "it in the VPC would add ENIs and a NAT dependency for no isolation"
)
_HANDLER_ENVIRONMENT = (
    "its environment variables hold configuration, no secrets; Lambda encrypts them at rest with an "
    "AWS-managed key"
)
_INLINE_POLICY = (
    "CDK writes a role's least-privilege statements into a policy attached to that role alone; a customer "
    "managed policy would hold the same statements in an object no other principal needs"
)


def accept_handler_findings(
    function: IConstruct, reason: str, *, in_vpc: bool, has_environment: bool
) -> None:
    """Explain the Lambda findings of a custom-resource handler (checkov and NIST), for ``reason``.

    For functions aws-cdk-lib builds for itself (provider frameworks, CDK's own handlers) and our own
    deploy-time handlers: reserved concurrency, dead-letter queue, VPC (when outside one) and environment
    encryption (when it has variables) do not apply to code run once per deployment event.
    """
    explain: list[tuple[str, str, str]] = [
        ("CKV_AWS_115", "NIST.800.53.R5-LambdaConcurrency", _HANDLER_CONCURRENCY),
        ("CKV_AWS_116", "NIST.800.53.R5-LambdaDLQ", _HANDLER_DLQ),
    ]
    if not in_vpc:
        explain.append(("CKV_AWS_117", "NIST.800.53.R5-LambdaInsideVPC", _HANDLER_OUTSIDE_VPC))
    if has_environment:
        explain.append(("CKV_AWS_173", "", _HANDLER_ENVIRONMENT))
    for check_id, nist_rule, why in explain:
        skip_checkov(function, check_id, f"{reason}: {why}")
        if nist_rule and _is_cfn_function(function):  # the NIST pack checks only CfnFunction
            acknowledge_nist(function, nist_rule, f"{reason}: {why}")


def _is_cfn_function(construct: IConstruct) -> bool:
    """``isinstance(construct, aws_lambda.CfnFunction)`` without importing aws_lambda (a network has no
    function of its own): jsii classes name their JavaScript type."""
    return any(getattr(k, "__jsii_type__", None) == _CFN_FUNCTION for k in type(construct).__mro__)


_CFN_FUNCTION = "aws-cdk-lib.aws_lambda.CfnFunction"


def accept_inline_policy(policy: IConstruct, reason: str) -> None:
    """Explain NIST's IAMNoInlinePolicy on a role's own policy (CDK's grants write one per role)."""
    acknowledge_nist(policy, "NIST.800.53.R5-IAMNoInlinePolicy", f"{reason}: {_INLINE_POLICY}")


def accept_log_group_without_key(log_group: IConstruct, reason: str) -> None:
    """Explain a CloudWatch log group without a customer KMS key (checkov CKV_AWS_158, NIST)."""
    why = (
        f"{reason}; CloudWatch Logs encrypts every log group at rest with a service key, and a customer key "
        "is an opt-in prop (it costs a key per environment and a key policy for CloudWatch Logs)"
    )
    skip_checkov(log_group, "CKV_AWS_158", why)
    acknowledge_nist(log_group, "NIST.800.53.R5-CloudWatchLogGroupEncrypted", why)


def accept_all_traffic_between_members(group: ec2.SecurityGroup, reason: str) -> None:
    """Explain NIST's EC2RestrictedCommonPorts on ``group``'s rule admitting all traffic from itself.

    Only the group's own all-traffic ingress rule from itself is acknowledged, so a rule opening a port to
    anything else still shows. The group's children also hold other groups' rules whose peer it is (CDK puts
    a rule between two stacks in its peer's stack): another group's all-traffic rule from this one keeps its
    finding. Ids are compared as tokens, so groups with the same logical id in two stacks stay apart.
    """
    own_id = group.security_group_id
    for child in group.node.children:
        if (
            isinstance(child, ec2.CfnSecurityGroupIngress)
            and child.ip_protocol == "-1"
            and child.group_id == own_id
            and child.source_security_group_id == own_id
        ):
            acknowledge_nist(child, "NIST.800.53.R5-EC2RestrictedCommonPorts", reason)


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

    Provider Lambdas (L1: aws-cdk-lib chooses their runtime; checkov and NIST: see
    :func:`accept_handler_findings`), their roles' AWS-managed policies (IAM4, ``managed_policy_reasons`` by
    policy name, else ``reason``), their policies' wildcards (IAM5; NIST: inline policy) and waiter state
    machines (SF1, SF2). ``reason`` says what the resources are for; ``skip`` leaves out our own resources
    under ``scope``, which must pass on their own.
    """
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_stepfunctions as sfn

    kinds = (lambda_.CfnFunction, sfn.CfnStateMachine, iam.CfnRole, iam.CfnPolicy)
    for construct in scope.node.find_all():
        # Type first: each path lookup in ``skip`` is a round trip to jsii, and most constructs are none of these.
        if not isinstance(construct, kinds) or (skip is not None and skip(construct)):
            continue
        if isinstance(construct, lambda_.CfnFunction):
            acknowledge(construct, "AwsSolutions-L1", f"{reason}; aws-cdk-lib chooses its runtime")
            accept_handler_findings(
                construct,
                reason,
                in_vpc=construct.vpc_config is not None,
                has_environment=construct.environment is not None,
            )
        elif isinstance(construct, sfn.CfnStateMachine):
            acknowledge(construct, "AwsSolutions-SF1", reason)
            acknowledge(construct, "AwsSolutions-SF2", reason)
        elif isinstance(construct, iam.CfnRole):
            reasons = {name: f"{why}; {reason}" for name, why in (managed_policy_reasons or {}).items()}
            acknowledge_managed_policies(construct, reasons, default=reason)
        else:
            acknowledge_wildcards(construct, {}, default=reason)
            accept_inline_policy(construct, reason)


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
