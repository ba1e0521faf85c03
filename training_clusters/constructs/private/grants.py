"""Grants to a role a caller passes in: a policy of the construct's own, or, for a role CDK may not change,
a warning saying exactly what the role must already carry."""

from __future__ import annotations

import json
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from training_clusters.gates.compliance import accept_inline_policy

#: The id of the warning a construct gives when it cannot grant an immutable role what it needs.
IMMUTABLE_ROLE_WARNING = "training-clusters:immutable-role"


def is_immutable(role: iam.IRole) -> bool:
    """True for aws-cdk-lib's immutable role (``iam.Role.from_role_arn(..., mutable=False)``, a role of another
    account, ``role.without_policy_updates()``). It swallows every statement and attachment without a word
    (``aws-iam/lib/private/immutable-role.ts``: ``addToPrincipalPolicy`` answers "added", ``attachInlinePolicy``
    does nothing) and is no public class: aws-cdk-lib builds it beside the imported role it wraps, named
    ``MutableRole<id>`` (``Role.fromRoleArn``), or names it ``ImmutableRole<id>`` (``withoutPolicyUpdates``)."""
    node = role.node
    if node.id.startswith("ImmutableRole"):
        return True
    parent = node.scope
    return parent is not None and parent.node.try_find_child(f"MutableRole{node.id}") is not None


def grant_passed_role(
    scope: Construct,
    id: str,
    role: iam.IRole,
    statements: Sequence[iam.PolicyStatement],
    reason: str,
) -> iam.Policy | None:
    """``statements`` for a role ``scope`` did not make, in a policy of ``scope``'s attached to it: the role may
    belong to another stack, which must not come to depend on this one (a grant through the role's own policy
    would). A policy attached by name would still change an immutable role at deploy; such a role gets
    nothing, and a warning lists the statements it must carry. ``reason`` explains the inline policy (NIST)."""
    if is_immutable(role):
        needed = json.dumps([cdk.Stack.of(scope).resolve(s.to_statement_json()) for s in statements])
        cdk.Annotations.of(scope).add_warning_v2(
            IMMUTABLE_ROLE_WARNING,
            f"{id}: the role {role.node.path} is immutable, so this construct grants it nothing; give it these "
            f"statements yourself: {needed}",
        )
        return None
    policy = iam.Policy(scope, id, roles=[role], statements=list(statements))
    accept_inline_policy(policy, reason)
    return policy
