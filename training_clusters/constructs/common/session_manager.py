"""SessionManagerPolicy: what a node's SSM Agent needs for Session Manager, and no parameter reads.

Our cluster nodes have no key pair and no SSH from outside the VPC: SSM Session Manager is the way in. AWS's
managed ``AmazonSSMManagedInstanceCore`` grants that, and far more, on ``*``: ``ssm:GetParameter`` /
``ssm:GetParameters`` (every parameter of the account the caller can decrypt), ``ssm:GetDocument``, inventory,
patching, State Manager and Run Command (``ec2messages:*``)
(https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonSSMManagedInstanceCore.html). A node's
role is reachable by every user with a shell on the node, so this policy holds only what AWS lists for
Session Manager in "Create a custom IAM role for Session Manager"
(https://docs.aws.amazon.com/systems-manager/latest/userguide/getting-started-create-iam-instance-profile.html,
referred to by "Step 2: Verify or add instance permissions for Session Manager",
https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-getting-started-instance-profile.html):

* ``ssm:UpdateInstanceInformation``: the agent registers the node and sends its heartbeat. Scoped to EC2
  instances of the stack's account and region: the Service Authorization Reference lists ``instance``
  (``arn:${Partition}:ec2:${Region}:${Account}:instance/${InstanceId}``) among its resource types
  (https://docs.aws.amazon.com/service-authorization/latest/reference/list_awssystemsmanager.html); AWS's
  page grants it on ``*``.
* ``ssmmessages:CreateControlChannel`` / ``CreateDataChannel`` / ``OpenControlChannel`` /
  ``OpenDataChannel``: the session's channels. They support no resource-level permissions (no resource
  types in the Service Authorization Reference,
  https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonmessagegatewayservice.html),
  so they are granted on ``*``.

Left out on purpose: ``kms:Decrypt`` (only for sessions encrypted with a KMS key, which our clusters do not
configure), ``s3:GetEncryptionConfiguration`` and CloudWatch Logs actions (only for session logging to S3 or
CloudWatch Logs, not configured), and ``ec2messages:*`` (Run Command, not Session Manager). Give a node role
those yourself if you turn on session encryption or logging in your account's Session Manager preferences.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from training_clusters.gates.compliance import acknowledge, nag_detail

#: The agent's registration and heartbeat; scoped to EC2 instances of the stack's account and region.
AGENT_ACTIONS: tuple[str, ...] = ("ssm:UpdateInstanceInformation",)
#: The session's channels (Amazon Message Gateway Service): no resource-level permissions, granted on ``*``.
CHANNEL_ACTIONS: tuple[str, ...] = (
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
)
#: Every action the policy grants.
SESSION_MANAGER_ACTIONS: tuple[str, ...] = AGENT_ACTIONS + CHANNEL_ACTIONS

_CHANNELS_ON_EVERYTHING = (
    "the ssmmessages channel actions of SSM Session Manager (CreateControlChannel, CreateDataChannel, "
    "OpenControlChannel, OpenDataChannel) support no resource-level permissions: the Service Authorization "
    "Reference lists no resource types for them (list_amazonmessagegatewayservice.html)"
)
_AGENT_ON_INSTANCES = (
    "ssm:UpdateInstanceInformation, the SSM Agent's registration and heartbeat, on EC2 instances of this "
    "account and region: the nodes' instance ids are known only once EC2 launches them"
)


class SessionManagerPolicy(iam.ManagedPolicy):
    """A customer managed policy for a node role: SSM Session Manager and nothing else (see the module).

    Example::

        policy = SessionManagerPolicy(self, "SessionManager")
        role.add_managed_policy(policy)

    Its two wildcard findings (AwsSolutions-IAM5) are acknowledged when the app is synthesized, each only
    while the policy holds no more than its own statements grant there: a statement added later that puts
    another action on ``*``, or on the instances, brings the finding back.
    """

    def __init__(
        self, scope: Construct, id: str, *, path: str | None = None, description: str | None = None
    ) -> None:
        """Build the policy.

        :param path: The policy's IAM path, e.g. ``/parallelcluster/`` (ParallelCluster's provider attaches only
            policies under that path or named ``parallelcluster*``). Default: ``/``.
        :param description: Default: "SSM Session Manager only: agent registration and session channels (no
            parameter reads)".
        """
        instances = f"arn:{cdk.Aws.PARTITION}:ec2:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:instance/*"
        super().__init__(
            scope,
            id,
            path=path,
            description=description
            or "SSM Session Manager only: agent registration and session channels (no parameter reads)",
            statements=[
                iam.PolicyStatement(
                    sid="SessionManagerAgent", actions=list(AGENT_ACTIONS), resources=[instances]
                ),
                iam.PolicyStatement(
                    sid="SessionManagerChannels", actions=list(CHANNEL_ACTIONS), resources=["*"]
                ),
            ],
        )
        cdk.Aspects.of(self).add(
            AcknowledgeWildcards(
                self,
                {
                    "*": (CHANNEL_ACTIONS, _CHANNELS_ON_EVERYTHING),
                    instances: (AGENT_ACTIONS, _AGENT_ON_INSTANCES),
                },
            )
        )


@jsii.implements(cdk.IAspect)
class AcknowledgeWildcards:
    """At synth, acknowledge each wildcard resource of ``policy`` whose statements hold only the allowed actions.

    ``allowed`` maps a resource (possibly a token) to the actions that may be granted on it and the reason.
    Read from the final document, so a statement added after construction is judged too.
    """

    def __init__(
        self, policy: iam.ManagedPolicy | iam.Policy, allowed: dict[str, tuple[Sequence[str], str]]
    ) -> None:
        self._policy = policy
        self._allowed = allowed

    def visit(self, node: IConstruct) -> None:
        if node.node.path != self._policy.node.path:
            return
        stack = cdk.Stack.of(self._policy)
        document = stack.resolve(self._policy.document) or {}
        granted = _actions_by_resource(document.get("Statement", []))
        for resource, (actions, reason) in self._allowed.items():
            detail = nag_detail(stack.resolve(resource))
            if detail in granted and granted[detail] <= set(actions):
                acknowledge(self._policy, f"AwsSolutions-IAM5[Resource::{detail}]", reason)


def _actions_by_resource(statements: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """Each resource of the allowing statements (as cdk-nag prints it) -> the actions granted on it."""
    result: dict[str, set[str]] = {}
    for statement in statements:
        if statement.get("Effect") != "Allow":
            continue
        actions = _as_list(statement.get("Action", []))
        for resource in _as_list(statement.get("Resource", [])):
            result.setdefault(nag_detail(resource), set()).update(actions)
    return result


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
