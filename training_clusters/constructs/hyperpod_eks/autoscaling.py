"""Karpenter autoscaling of a HyperPod EKS cluster: the cluster role, the wait for the autoscaler, the NodeClasses
and NodePools (used by :class:`~training_clusters.constructs.hyperpod_eks.cluster.HyperPodEksCluster` with
``autoscaling=AutoScaler.KARPENTER``).

From AWS's "Autoscaling on SageMaker HyperPod EKS"
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html) and its pages:

- "Create an IAM role for HyperPod autoscaling with Karpenter" (``sagemaker-hyperpod-eks-autoscaling-iam``): the
  role HyperPod assumes (``hyperpod.sagemaker.amazonaws.com``) to add and remove nodes
  (``sagemaker:BatchAddClusterNodes``, ``sagemaker:BatchDeleteClusterNodes``) and to let SageMaker create grants
  on the EBS keys of the nodes it starts (:func:`cluster_role_statements`);
- "Create a NodeClass" (``-nodeclass``): a ``HyperpodNodeClass`` (``karpenter.sagemaker.amazonaws.com/v1``)
  names up to 10 existing instance groups; they start at 0 nodes; On-Demand only; no deep health checks;
- "Create a NodePool" (``-nodepool``): a ``karpenter.sh/v1`` NodePool refers to it; HyperPod's provider
  honours the requirements ``node.kubernetes.io/instance-type``, ``topology.kubernetes.io/zone`` and
  ``kubernetes.io/arch`` (amd64).

One NodeClass and one NodePool per instance group (:func:`node_class_manifest`, :func:`node_pool_manifest`): a
pod that selects a group (``training-clusters/nodegroup``) gets a node of that group, and each group is bounded
on its own (``limits``: its ``max_instance_count`` nodes). They are applied once
:class:`HyperPodAutoscaling`'s waiter (``handlers/autoscaling_status``) has seen ``AutoScaling.Status``
``InService``: HyperPod installs Karpenter and these kinds after the cluster is created.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.gates.compliance import (
    accept_handler_findings,
    accept_inline_policy,
    accept_log_group_without_key,
    acknowledge_cdk_made,
    acknowledge_wildcards,
    nag_detail,
)

HANDLER_DIR = Path(__file__).resolve().parents[2] / "node_scripts" / "handlers" / "autoscaling_status"
#: The principal HyperPod's autoscaler assumes the cluster role as.
HYPERPOD_SERVICE_PRINCIPAL = "hyperpod.sagemaker.amazonaws.com"
NODE_CLASS_API_VERSION = "karpenter.sagemaker.amazonaws.com/v1"
NODE_CLASS_KIND = "HyperpodNodeClass"
NODE_POOL_API_VERSION = "karpenter.sh/v1"
#: What the autoscaling IAM page lets the grants SageMaker creates on an EBS key allow.
KMS_GRANT_OPERATIONS = (
    "CreateGrant",
    "Decrypt",
    "DescribeKey",
    "GenerateDataKeyWithoutPlaintext",
    "ReEncryptTo",
    "ReEncryptFrom",
    "RetireGrant",
)
#: How long a node Karpenter started stays once no pod runs on it: back-to-back jobs reuse it, an idle one is
#: released. Karpenter never moves a running pod to repack nodes (``WhenEmpty``): a training pod moved is a job
#: restarted.
CONSOLIDATE_AFTER = "5m"


def node_resource_name(group: str) -> str:
    """The NodeClass and NodePool name of an instance group: its name in lower case (a Kubernetes name)."""
    return group.lower()


def node_class_manifest(group: str) -> dict[str, Any]:
    """The ``HyperpodNodeClass`` of one instance group."""
    return {
        "apiVersion": NODE_CLASS_API_VERSION,
        "kind": NODE_CLASS_KIND,
        "metadata": {"name": node_resource_name(group)},
        "spec": {"instanceGroups": [group]},
    }


def node_pool_manifest(
    group: str,
    *,
    instance_type: str,
    max_nodes: int,
    vcpus: int,
    labels: Mapping[str, str],
    taints: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """The NodePool of one instance group: its NodeClass, its ``ml.`` type, the labels and taints HyperPod gives
    its nodes (so Karpenter starts a node only for a pod that selects and tolerates what the node will have),
    at most ``max_nodes`` nodes, never expiring, released when empty (:data:`CONSOLIDATE_AFTER`).

    The bound is given twice: ``limits.nodes`` (Karpenter releases that count nodes in a NodePool's limits; an
    older one finds no such resource on its nodes and ignores it) and ``limits.cpu``, ``max_nodes`` times the
    type's vCPUs (every Karpenter release; a node reporting fewer CPUs, with hyper-threading off, lets ``nodes``
    bind first)."""
    template_spec: dict[str, Any] = {
        "nodeClassRef": {
            "group": NODE_CLASS_API_VERSION.split("/")[0],
            "kind": NODE_CLASS_KIND,
            "name": node_resource_name(group),
        },
        "expireAfter": "Never",
        "requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]}
        ],
    }
    if taints:
        template_spec["taints"] = [dict(t) for t in taints]
    return {
        "apiVersion": NODE_POOL_API_VERSION,
        "kind": "NodePool",
        "metadata": {"name": node_resource_name(group)},
        "spec": {
            "template": {"metadata": {"labels": dict(labels)}, "spec": template_spec},
            "limits": {"cpu": str(max_nodes * vcpus), "nodes": str(max_nodes)},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": CONSOLIDATE_AFTER},
        },
    }


def cluster_role_statements(stack: cdk.Stack) -> list[iam.PolicyStatement]:
    """The autoscaling IAM page's policy, its resources narrowed to this account and region: add and remove
    nodes of this account's clusters; create grants on this account's keys only through SageMaker, for AWS
    resources, with the page's grant operations."""
    return [
        iam.PolicyStatement(
            sid="ScaleClusterNodes",
            actions=["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"],
            resources=[stack.format_arn(service="sagemaker", resource="cluster", resource_name="*")],
            conditions={"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}},
        ),
        iam.PolicyStatement(
            sid="NodeVolumeKeys",
            actions=["kms:CreateGrant", "kms:DescribeKey"],
            resources=[stack.format_arn(service="kms", resource="key", resource_name="*")],
            conditions={
                "StringLike": {"kms:ViaService": f"sagemaker.{stack.region}.amazonaws.com"},
                "Bool": {"kms:GrantIsForAWSResource": "true"},
                "ForAllValues:StringEquals": {"kms:GrantOperations": list(KMS_GRANT_OPERATIONS)},
            },
        ),
    ]


class HyperPodAutoscaling(Construct):
    """The cluster role (``role``); after the cluster exists, the waiter (``status``) and then the NodeClass and
    NodePool of each autoscaled group (``manifests``: one per group).

    Created by :class:`~training_clusters.constructs.hyperpod_eks.cluster.HyperPodEksCluster`: make the role, pass its ARN
    to the cluster, then call :meth:`apply` with the cluster.
    """

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        self.role = iam.Role(
            self,
            "ClusterRole",
            assumed_by=iam.ServicePrincipal(HYPERPOD_SERVICE_PRINCIPAL),
            description="SageMaker HyperPod's Karpenter adds and removes this cluster's nodes",
        )
        self.policy = iam.Policy(
            self, "ClusterRolePolicy", roles=[self.role], statements=cluster_role_statements(stack)
        )
        accept_inline_policy(self.policy, "HyperPod's autoscaler role (the autoscaling IAM page's policy)")
        clusters, keys = (statement.resources[0] for statement in cluster_role_statements(stack))
        acknowledge_wildcards(
            self.policy.node.default_child,
            {
                f"AwsSolutions-IAM5[Resource::{nag_detail(stack.resolve(clusters))}]": (
                    "the cluster's id is made with it, after its ClusterRole is given: this account's and region's "
                    "HyperPod clusters (the page's aws:ResourceAccount condition)"
                ),
                f"AwsSolutions-IAM5[Resource::{nag_detail(stack.resolve(keys))}]": (
                    "the nodes' EBS keys are chosen per instance group; grants only through SageMaker of this "
                    "region, for AWS resources, with the page's operations (its conditions)"
                ),
            },
        )
        self.status: cdk.CustomResource | None = None
        self.manifests: list[Any] = []

    def apply(
        self,
        *,
        cluster_name: str,
        cluster_arn: str,
        cluster: cdk.CfnResource,
        eks_cluster: GpuEksCluster,
        node_pools: Sequence[tuple[dict[str, Any], dict[str, Any]]],
    ) -> None:
        """The waiter, after ``cluster`` and the role's policy; each (NodeClass, NodePool) after the waiter."""
        log_group = logs.LogGroup(self, "StatusLogs", retention=logs.RetentionDays.ONE_YEAR)
        role = iam.Role(
            self,
            "StatusHandlerRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Reads the HyperPod cluster's autoscaling status",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["sagemaker:DescribeCluster"], resources=[cluster_arn])
        )
        handler = lambda_.Function(
            self,
            "StatusHandler",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.on_event",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            role=role,
            log_group=log_group,
            timeout=cdk.Duration.minutes(15),
            description="Waits until the HyperPod cluster's Karpenter autoscaling is InService",
        )
        provider = cr.Provider(self, "StatusProvider", on_event_handler=handler)
        self.status = cdk.CustomResource(
            self,
            "Status",
            service_token=provider.service_token,
            resource_type="Custom::HyperPodAutoscalingStatus",
            properties={"ClusterName": cluster_name},
        )
        self.status.node.add_dependency(cluster)
        self.status.node.add_dependency(self.policy)
        for node_class, node_pool in node_pools:
            manifest = eks_cluster.cluster.add_manifest(
                f"Karpenter-{node_class['metadata']['name']}", node_class, node_pool
            )
            manifest.node.add_dependency(self.status)
            self.manifests.append(manifest)
        acknowledge_cdk_made(
            provider,
            "aws-cdk-lib's custom-resource Provider framework (its design): it invokes our autoscaling-status "
            "handler and reports back to CloudFormation",
            managed_policy_reasons={
                "AWSLambdaBasicExecutionRole": "the framework Lambda writes its own logs"
            },
        )
        reason = "the autoscaling-status handler reads one HyperPod cluster's status at deploy time"
        accept_handler_findings(handler.node.default_child, reason, in_vpc=False, has_environment=False)
        accept_inline_policy(role.node.find_child("DefaultPolicy").node.default_child, reason)
        accept_log_group_without_key(log_group, "the handler's own log (the statuses it read)")
