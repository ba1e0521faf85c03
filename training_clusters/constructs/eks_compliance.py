"""Precise cdk-nag acknowledgements for what aws-cdk-lib's EKS module builds for itself.

``aws_eks.Cluster`` brings its own provider Lambdas, roles and a Step Functions waiter (the cluster
resource provider and the kubectl provider, nested stacks at the stack's root) plus the cluster's service
and creation roles. Their findings are CDK's design, not ours: each is acknowledged on the resource that
causes it, with the finding's exact detail read from the resource itself (never a blanket ``Resource::*``
for the stack).

The pass runs as an aspect at synth time, after every helm chart and manifest has been added (the kubectl
provider appears only with the first one).
"""

from __future__ import annotations

import aws_cdk as cdk
import jsii
from constructs import IConstruct

from training_clusters.compliance import acknowledge_cdk_made

#: The nested stacks aws-cdk-lib adds at a stack's root for ``aws_eks.Cluster``.
PROVIDER_STACK_IDS = ("@aws-cdk--aws-eks.ClusterResourceProvider", "@aws-cdk--aws-eks.KubectlProvider")

_PROVIDER_REASON = (
    "created by aws-cdk-lib's EKS module for its own cluster-resource / kubectl provider "
    "(Lambda handlers, Provider framework, waiter state machine); CDK scopes it and ships its updates"
)
_CLUSTER_ROLE_REASONS = {
    "AmazonEKSClusterPolicy": "the AWS-managed policy the EKS service role must carry",
    "AmazonEC2ContainerRegistryPullOnly": "lets CDK's kubectl handler pull its helm and kubectl images",
    "AmazonElasticContainerRegistryPublicReadOnly": "lets CDK's kubectl handler pull helm charts from ECR Public",
    "AWSLambdaBasicExecutionRole": "CDK's kubectl handler writes its own logs",
    "AWSLambdaVPCAccessExecutionRole": "CDK's kubectl handler runs inside the VPC to reach a private endpoint",
}


@jsii.implements(cdk.IAspect)
class EksProviderAcknowledgements:
    """Aspect: acknowledge the findings of CDK's EKS providers and roles, precisely, once per stack.

    Add it to a construct without children: it acts on its first visit, whichever node that is.
    """

    def __init__(self, cluster_scope: IConstruct) -> None:
        self._cluster_scope = cluster_scope
        self._done = False

    def visit(self, node: IConstruct) -> None:
        if self._done:
            return
        self._done = True
        stack = cdk.Stack.of(self._cluster_scope)
        scopes: list[IConstruct] = [self._cluster_scope]
        scopes.extend(
            child
            for child in (stack.node.try_find_child(name) for name in PROVIDER_STACK_IDS)
            if child is not None
        )
        for scope in scopes:
            acknowledge_cdk_made(
                scope, _PROVIDER_REASON, managed_policy_reasons=_CLUSTER_ROLE_REASONS, skip=_is_ours
            )


def _is_ours(construct: IConstruct) -> bool:
    """Our node role is built to pass the checks (its managed policies are acknowledged where it is made)."""
    return "/NodeRole/" in f"/{construct.node.path}/"
