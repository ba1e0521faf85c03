"""Precise cdk-nag acknowledgements for what aws-cdk-lib's EKS module builds for itself.

``aws_eks_v2.Cluster`` brings the cluster's service role and, for helm charts and manifests, CDK's kubectl
provider (its handler Lambda, the custom-resource Provider framework and their roles), all under the
cluster construct. Their findings are CDK's design, not ours: each is acknowledged on the resource that
causes it, with the finding's exact detail read from the resource itself (never a blanket
``Resource::*`` for the stack). The provider exists as soon as the cluster does, so this runs once, when
the cluster is built.
"""

from __future__ import annotations

from constructs import IConstruct

from training_clusters.gates.compliance import acknowledge_cdk_made

_PROVIDER_REASON = (
    "created by aws-cdk-lib's EKS module for its own kubectl provider (handler Lambda, Provider "
    "framework) and cluster service role; CDK scopes it and ships its updates"
)
_CLUSTER_ROLE_REASONS = {
    "AmazonEKSClusterPolicy": "the AWS-managed policy the EKS service role must carry",
    "AmazonEC2ContainerRegistryReadOnly": "lets CDK's kubectl handler pull its helm and kubectl images",
    "AmazonElasticContainerRegistryPublicReadOnly": "lets CDK's kubectl handler pull helm charts from ECR Public",
    "AWSLambdaBasicExecutionRole": "CDK's kubectl handler writes its own logs",
    "AWSLambdaVPCAccessExecutionRole": "CDK's kubectl handler runs inside the VPC to reach a private endpoint",
}


def acknowledge_eks_made(cluster_scope: IConstruct) -> None:
    """Acknowledge the findings of CDK's EKS roles and kubectl provider under ``cluster_scope``, precisely."""
    acknowledge_cdk_made(
        cluster_scope, _PROVIDER_REASON, managed_policy_reasons=_CLUSTER_ROLE_REASONS, skip=_is_ours
    )


def _is_ours(construct: IConstruct) -> bool:
    """Our node role is built to pass the checks (its managed policies are acknowledged where it is made)."""
    return "/NodeRole/" in f"/{construct.node.path}/"
