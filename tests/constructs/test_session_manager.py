"""SessionManagerPolicy: exactly the actions AWS lists for Session Manager, each wildcard acknowledged only while
it holds what its reason says (widening a statement brings the finding back), checked against the Service
Authorization Reference as cfn-lint bundles it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import cfnlint
import pytest
from aws_cdk import aws_iam as iam

from training_clusters.constructs.common.session_manager import (
    AGENT_ACTIONS,
    CHANNEL_ACTIONS,
    SESSION_MANAGER_ACTIONS,
    SessionManagerPolicy,
)
from training_clusters.gates.compliance import add_compliance_checks, nag_findings, synth_with_checks

from ..assertions import allow, policy_statements
from ..conftest import CDK_CONTEXT, REGION, PinnedStack, template_of

#: ``arn:${Partition}:ec2:${Region}:${Account}:instance/*`` as the template holds it.
INSTANCES = {
    "Fn::Join": [
        "",
        [
            "arn:",
            {"Ref": "AWS::Partition"},
            ":ec2:",
            {"Ref": "AWS::Region"},
            ":",
            {"Ref": "AWS::AccountId"},
            ":instance/*",
        ],
    ]
}
INSTANCES_FINDING = (
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:instance/*]"
)
EVERYTHING_FINDING = "AwsSolutions-IAM5[Resource::*]"
#: The Service Authorization Reference as cfn-lint ships it (services by prefix: actions, resource types).
SERVICE_AUTHORIZATION = Path(cfnlint.__file__).parent / "data" / "AdditionalSpecs" / "Policies.json"


def acknowledged_rules(assembly_directory: Path, stack_name: str) -> dict[str, set[str]]:
    """Each construct path of the stack -> the AwsSolutions findings acknowledged on it (as cdk-nag names them)."""
    metadata = json.loads((assembly_directory / f"{stack_name}.metadata.json").read_text())
    result: dict[str, set[str]] = {}
    for path, entries in metadata.items():
        for entry in entries:
            if entry["type"] == "aws:cdk:acknowledged-rules":
                for rule in entry["data"]:
                    if rule.startswith("AwsSolutions::"):
                        result.setdefault(path, set()).add(rule.removeprefix("AwsSolutions::"))
    return result


#: What a SessionManagerPolicy holds, statement by statement.
EXPECTED = [
    allow(["ssm:UpdateInstanceInformation"], [INSTANCES]),
    allow(
        [
            "ssmmessages:CreateControlChannel",
            "ssmmessages:CreateDataChannel",
            "ssmmessages:OpenControlChannel",
            "ssmmessages:OpenDataChannel",
        ],
        ["*"],
    ),
]


def test_the_policy_grants_session_managers_actions_and_no_parameter_read(stack: cdk.Stack) -> None:
    policy = SessionManagerPolicy(stack, "SessionManager")
    template = template_of(stack)
    logical_id = stack.get_logical_id(policy.node.default_child)  # type: ignore[arg-type]
    statements = policy_statements(template, logical_id)
    assert statements == EXPECTED
    granted = {action for statement in statements for action in statement.actions}
    assert not {a for a in granted if a.startswith("ssm:Get") or a.startswith("ec2messages:")}
    assert template["Resources"][logical_id]["Properties"]["Path"] == "/"  # type: ignore[index]


def test_the_policy_takes_the_path_it_is_given(stack: cdk.Stack) -> None:
    policy = SessionManagerPolicy(stack, "SessionManager", path="/parallelcluster/")
    (resource,) = [r for r in template_of(stack)["Resources"].values()]  # type: ignore[attr-defined]
    assert resource["Properties"]["Path"] == "/parallelcluster/"
    assert stack.resolve(policy.managed_policy_arn) == {
        "Ref": stack.get_logical_id(policy.node.default_child)
    }  # type: ignore[arg-type]


def test_the_actions_are_the_ones_aws_lists_for_a_custom_session_manager_role() -> None:
    # https://docs.aws.amazon.com/systems-manager/latest/userguide/getting-started-create-iam-instance-profile.html
    # (the policy of "Creating an IAM role with minimal Session Manager permissions", without kms:Decrypt)
    assert sorted(SESSION_MANAGER_ACTIONS) == [
        "ssm:UpdateInstanceInformation",
        "ssmmessages:CreateControlChannel",
        "ssmmessages:CreateDataChannel",
        "ssmmessages:OpenControlChannel",
        "ssmmessages:OpenDataChannel",
    ]


def test_the_reasons_hold_in_the_service_authorization_reference() -> None:
    """The channel actions take no resource types (so ``*``); UpdateInstanceInformation takes EC2 instances."""
    services = json.loads(SERVICE_AUTHORIZATION.read_text())
    for action in CHANNEL_ACTIONS:
        prefix, name = action.split(":")
        assert services[prefix]["Actions"][name.lower()] == {}, action  # exists, no resource types
    assert services["ssmmessages"]["Resources"] == {}
    ((prefix, name),) = (a.split(":") for a in AGENT_ACTIONS)
    assert "instance" in services[prefix]["Actions"][name.lower()]["Resources"]
    assert services[prefix]["Resources"]["instance"]["ARNFormats"] == [
        "arn:${Partition}:ec2:${Region}:${Account}:instance/.*"
    ]


def _gate(tmp_path: Path, build: Any) -> set[str]:
    """The AwsSolutions findings of a stack holding a node role and what ``build(stack, role)`` adds."""
    app = cdk.App(outdir=str(tmp_path / "cdk.out"), context=dict(CDK_CONTEXT))
    stack = PinnedStack(app, "Test", env=cdk.Environment(region=REGION))
    role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    build(stack, role)
    add_compliance_checks(app, nist=False)
    _, findings = synth_with_checks(app)
    return {f.rule for f in nag_findings(findings)}


def test_the_policy_passes_the_gate_on_a_node_role(tmp_path: Path) -> None:
    assert (
        _gate(tmp_path, lambda stack, role: role.add_managed_policy(SessionManagerPolicy(stack, "P")))
        == set()
    )


def test_the_same_statements_without_its_acknowledgements_are_two_wildcard_findings(tmp_path: Path) -> None:
    def plain(stack: cdk.Stack, role: iam.Role) -> None:
        instances = f"arn:{cdk.Aws.PARTITION}:ec2:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:instance/*"
        statements = [
            iam.PolicyStatement(actions=list(AGENT_ACTIONS), resources=[instances]),
            iam.PolicyStatement(actions=list(CHANNEL_ACTIONS), resources=["*"]),
        ]
        role.add_managed_policy(iam.ManagedPolicy(stack, "P", statements=statements))

    assert _gate(tmp_path, plain) == {EVERYTHING_FINDING, INSTANCES_FINDING}


#: Statements that widen the policy beyond what a reason says, and the finding each brings back.
WIDENINGS = {
    # a parameter read on * (what AmazonSSMManagedInstanceCore gives) is not a channel action
    "parameters-on-everything": (["ssm:GetParameters"], "*", EVERYTHING_FINDING),
    # another action on the instances is more than the agent's registration and heartbeat
    "terminate-on-instances": (
        ["ec2:TerminateInstances"],
        "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:instance/*",
        INSTANCES_FINDING,
    ),
}


@pytest.mark.parametrize("widening", WIDENINGS)
def test_a_statement_added_to_the_policy_brings_its_wildcard_finding_back(
    tmp_path: Path, widening: str
) -> None:
    actions, resource, finding = WIDENINGS[widening]

    def widened(stack: cdk.Stack, role: iam.Role) -> None:
        policy = SessionManagerPolicy(stack, "P")
        arn = resource.replace("${AWS::Partition}", cdk.Aws.PARTITION).replace(
            "${AWS::Region}", cdk.Aws.REGION
        )
        arn = arn.replace("${AWS::AccountId}", cdk.Aws.ACCOUNT_ID)
        policy.add_statements(iam.PolicyStatement(actions=actions, resources=[arn]))
        role.add_managed_policy(policy)

    assert _gate(tmp_path, widened) == {finding}
