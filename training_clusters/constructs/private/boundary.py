"""The IAM permissions boundary CDK applies to the roles of a scope, for roles a service makes for us.

aws-cdk-lib keeps a boundary nowhere it can be read back: ``iam.PermissionsBoundary.of(scope).apply(policy)``
(``aws-iam/lib/permissions-boundary.ts``) and a stack's or stage's ``permissions_boundary``
(``core/lib/stack.ts``, ``addPermissionsBoundaryAspect``) each add an aspect that, when the app is
synthesized, calls ``addPropertyOverride("PermissionsBoundary", arn)`` on every ``AWS::IAM::Role`` and
``AWS::IAM::User`` below the scope (``clear()`` deletes the override). A role that a service creates from
our configuration (ParallelCluster's head node, queue and login node roles) is no resource of our templates,
so no aspect reaches it. :func:`applied_boundary` finds what those aspects would set on a role in a given
construct's place: it runs the aspects of the construct and its scopes up to the nearest stage (CDK invokes
a stage's aspects on its own), in CDK's order (outermost scope first, then by priority), on a stand-in role in
an app of its own that records the override.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import IConstruct

_PROPERTY = "PermissionsBoundary"


class _BoundaryProbe(iam.CfnRole):
    """A role no template holds: it records the boundary the aspects set on it."""

    def __init__(self, scope: cdk.Stack) -> None:
        super().__init__(scope, "Probe", assume_role_policy_document={})
        self.boundary: Any = None

    def add_property_override(self, property_path: str, value: Any) -> None:
        if property_path == _PROPERTY:
            self.boundary = value
        super().add_property_override(property_path, value)

    def add_property_deletion_override(self, property_path: str) -> None:
        if property_path == _PROPERTY:
            self.boundary = None
        super().add_property_deletion_override(property_path)


def applied_boundary(construct: IConstruct) -> str | None:
    """The boundary ARN (a token where CDK made one) the aspects of ``construct`` and its scopes would put on a
    role made at ``construct``'s place, or None. Aspects added after the call are not seen: call it when the
    app is synthesized (from a ``Lazy``)."""
    scopes = construct.node.scopes
    # CDK invokes each stage's aspects on its own: an app's aspects stop at a stage inside it
    stages = [index for index, scope in enumerate(scopes) if cdk.Stage.is_stage(scope)]
    scopes = scopes[stages[-1] if stages else 0 :]
    applications = [application for scope in scopes for application in cdk.Aspects.of(scope).applied]
    applications.sort(key=lambda application: application.priority)  # stable: scopes root first
    probe = _BoundaryProbe(cdk.Stack(cdk.App(), "BoundaryProbe"))
    for application in applications:
        application.aspect.visit(probe)
    return probe.boundary if probe.boundary is None else str(probe.boundary)
