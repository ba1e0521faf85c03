"""HyperPodEksCluster with ``autoscaling="karpenter"``: the ``AutoScaling`` block and its cluster role (exactly the
autoscaling IAM page's policy), the waiter before the NodeClasses and NodePools, the groups at 0, what the queues
see; ``efa_interface_type`` on the groups; and every combination HyperPod refuses, refused with its message.

Sources: https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html and its pages
``-autoscaling-iam``, ``-autoscaling-nodeclass``, ``-autoscaling-nodepool``; the API reference's
ClusterNetworkInterface."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from training_clusters.constructs.hyperpod_eks.autoscaling import (
    CONSOLIDATE_AFTER,
    node_class_manifest,
    node_pool_manifest,
)
from training_clusters.constructs.hyperpod_eks.cluster import EksInstanceGroup, KubernetesTaint, node_pool
from training_clusters.model.capacity import Capacity
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import NodeRecovery

from .test_hyperpod_eks import build, depends_on, resources, the_cluster

PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"
G5 = EksInstanceGroup(
    name="g5", instance_type="ml.g5.8xlarge", instance_count=0, max_instance_count=4, volume_gib=500
)
P4D = EksInstanceGroup(
    name="p4d",
    instance_type="ml.p4d.24xlarge",
    instance_count=0,
    max_instance_count=2,
    volume_gib=1000,
    labels={"training-clusters/pool": "p4d"},
    taints=[KubernetesTaint("nvidia.com/gpu", "true")],
)


def autoscaled(stack: cdk.Stack, groups: list[EksInstanceGroup] | None = None, **props: Any) -> Any:
    return build(stack, groups if groups is not None else [G5, P4D], autoscaling="karpenter", **props)


def applied_objects(stack: cdk.Stack, manifest: Any) -> list[dict[str, Any]]:
    """The objects a KubernetesManifest applies, from the template."""
    resource = template(stack)[stack.get_logical_id(manifest.node.default_child)]
    objects: list[dict[str, Any]] = json.loads(resource["Properties"]["Manifest"])
    for found in objects:  # CDK's prune label
        found["metadata"].pop("labels", None)
    return objects


def template(stack: cdk.Stack) -> dict[str, Any]:
    found: dict[str, Any] = Template.from_stack(stack).to_json()["Resources"]
    return found


# --------------------------------------------------------------------------------------------------
# the cluster and its role


def test_the_cluster_enables_karpenter_with_its_role_and_groups_at_zero(stack: cdk.Stack) -> None:
    cluster = autoscaled(stack)
    _, resource = the_cluster(stack)
    properties = resource["Properties"]
    assert properties["AutoScaling"] == {"Mode": "Enable", "AutoScalerType": "Karpenter"}
    role_id = stack.get_logical_id(cluster.autoscaling.role.node.default_child)
    assert properties["ClusterRole"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert properties["NodeProvisioningMode"] == "Continuous"
    assert properties["NodeRecovery"] == "Automatic"
    groups = properties["InstanceGroups"]
    assert [(g["InstanceGroupName"], g["InstanceCount"]) for g in groups] == [("g5", 0), ("p4d", 0)]
    # GPU groups get no deep health checks by default once autoscaled (HyperPod refuses them there)
    assert [g.get("OnStartDeepHealthChecks") for g in groups] == [None, None]


def test_the_cluster_role_is_trusted_by_hyperpod_only(stack: cdk.Stack) -> None:
    cluster = autoscaled(stack)
    role = template(stack)[stack.get_logical_id(cluster.autoscaling.role.node.default_child)]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "hyperpod.sagemaker.amazonaws.com"},
        }
    ]
    assert "ManagedPolicyArns" not in role["Properties"]
    policies = [
        r
        for r in resources(stack, "AWS::IAM::Policy").values()
        if {"Ref": stack.get_logical_id(cluster.autoscaling.role.node.default_child)}
        in r["Properties"]["Roles"]
    ]
    assert len(policies) == 1


def test_the_cluster_role_has_exactly_the_pages_permissions_in_this_account_and_region(
    stack: cdk.Stack,
) -> None:
    cluster = autoscaled(stack)
    policy = template(stack)[stack.get_logical_id(cluster.autoscaling.policy.node.default_child)]
    account = {"Ref": "AWS::AccountId"}
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Sid": "ScaleClusterNodes",
            "Effect": "Allow",
            "Action": ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"],
            "Resource": {"Fn::Join": ["", ["arn:aws:sagemaker:us-east-1:", account, ":cluster/*"]]},
            "Condition": {"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}},
        },
        {
            "Sid": "NodeVolumeKeys",
            "Effect": "Allow",
            "Action": ["kms:CreateGrant", "kms:DescribeKey"],
            "Resource": {"Fn::Join": ["", ["arn:aws:kms:us-east-1:", account, ":key/*"]]},
            "Condition": {
                "StringLike": {"kms:ViaService": "sagemaker.us-east-1.amazonaws.com"},
                "Bool": {"kms:GrantIsForAWSResource": "true"},
                "ForAllValues:StringEquals": {
                    "kms:GrantOperations": [
                        "CreateGrant",
                        "Decrypt",
                        "DescribeKey",
                        "GenerateDataKeyWithoutPlaintext",
                        "ReEncryptTo",
                        "ReEncryptFrom",
                        "RetireGrant",
                    ]
                },
            },
        },
    ]


def test_without_autoscaling_there_is_no_block_role_or_waiter(stack: cdk.Stack) -> None:
    cluster = build(stack)
    _, resource = the_cluster(stack)
    assert "AutoScaling" not in resource["Properties"] and "ClusterRole" not in resource["Properties"]
    assert cluster.autoscaling is None
    assert resources(stack, "Custom::HyperPodAutoscalingStatus") == {}
    assert all(
        "Karpenter" not in logical_id
        for logical_id in resources(stack, "Custom::AWSCDK-EKS-KubernetesResource")
    )


# --------------------------------------------------------------------------------------------------
# the order: cluster and role policy -> waiter -> NodeClass and NodePool


def test_the_waiter_follows_the_cluster_and_the_role_policy(stack: cdk.Stack) -> None:
    cluster = autoscaled(stack)
    cluster_id, _ = the_cluster(stack)
    ((waiter_id, waiter),) = resources(stack, "Custom::HyperPodAutoscalingStatus").items()
    assert waiter["Properties"]["ClusterName"] == "ml-cluster"
    policy_id = stack.get_logical_id(cluster.autoscaling.policy.node.default_child)
    assert {cluster_id, policy_id} <= depends_on(waiter)
    assert waiter_id == stack.get_logical_id(cluster.autoscaling.status.node.default_child)


def test_the_waiter_may_only_describe_this_cluster(stack: cdk.Stack) -> None:
    cluster = autoscaled(stack)
    cluster_id, _ = the_cluster(stack)
    role = cluster.autoscaling.node.find_child("StatusHandlerRole")
    policy = template(stack)[stack.get_logical_id(role.node.find_child("DefaultPolicy").node.default_child)]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statements[1] == {
        "Action": "sagemaker:DescribeCluster",
        "Effect": "Allow",
        "Resource": {"Fn::GetAtt": [cluster_id, "ClusterArn"]},
    }
    assert statements[0]["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents"]
    assert len(statements) == 2
    (function,) = [
        r
        for r in resources(stack, "AWS::Lambda::Function").values()
        if r["Properties"].get("Handler") == "index.on_event"
        and r["Properties"]["Role"] == {"Fn::GetAtt": [stack.get_logical_id(role.node.default_child), "Arn"]}
    ]
    assert function["Properties"]["Timeout"] == 900
    assert "VpcConfig" not in function["Properties"]


def test_each_group_gets_its_node_class_and_node_pool_after_the_waiter(stack: cdk.Stack) -> None:
    cluster = autoscaled(stack)
    waiter_id = stack.get_logical_id(cluster.autoscaling.status.node.default_child)
    applied = {
        logical_id: r
        for logical_id, r in resources(stack, "Custom::AWSCDK-EKS-KubernetesResource").items()
        if "Karpenter" in logical_id
    }
    assert len(applied) == 2 == len(cluster.autoscaling.manifests)
    for resource in applied.values():
        assert waiter_id in depends_on(resource)
    kinds = sorted(
        (o["kind"], o["metadata"]["name"])
        for m in cluster.autoscaling.manifests
        for o in applied_objects(stack, m)
    )
    assert kinds == [
        ("HyperpodNodeClass", "g5"),
        ("HyperpodNodeClass", "p4d"),
        ("NodePool", "g5"),
        ("NodePool", "p4d"),
    ]


def test_the_node_class_names_its_one_group() -> None:
    # "Create a NodeClass": apiVersion karpenter.sagemaker.amazonaws.com/v1, spec.instanceGroups (MaxItems 10)
    assert node_class_manifest("p4d") == {
        "apiVersion": "karpenter.sagemaker.amazonaws.com/v1",
        "kind": "HyperpodNodeClass",
        "metadata": {"name": "p4d"},
        "spec": {"instanceGroups": ["p4d"]},
    }
    assert node_class_manifest("GPU-a")["metadata"] == {"name": "gpu-a"}
    assert node_class_manifest("GPU-a")["spec"] == {"instanceGroups": ["GPU-a"]}


def test_the_node_pool_of_a_tainted_gpu_group() -> None:
    assert node_pool_manifest(
        "p4d",
        instance_type="ml.p4d.24xlarge",
        max_nodes=2,
        vcpus=96,
        labels={"training-clusters/pool": "p4d", "training-clusters/nodegroup": "p4d"},
        taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
    ) == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p4d"},
        "spec": {
            "template": {
                "metadata": {
                    "labels": {"training-clusters/pool": "p4d", "training-clusters/nodegroup": "p4d"}
                },
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.sagemaker.amazonaws.com",
                        "kind": "HyperpodNodeClass",
                        "name": "p4d",
                    },
                    "expireAfter": "Never",
                    "requirements": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": ["ml.p4d.24xlarge"],
                        }
                    ],
                    "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
                },
            },
            "limits": {"cpu": "192", "nodes": "2"},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
        },
    }
    assert CONSOLIDATE_AFTER == "5m"


def test_a_group_without_taints_has_none_in_its_node_pool(stack: cdk.Stack) -> None:
    manifest = node_pool_manifest("g5", instance_type="ml.g5.8xlarge", max_nodes=4, vcpus=32, labels={})
    assert "taints" not in manifest["spec"]["template"]["spec"]
    assert manifest["spec"]["limits"] == {"cpu": "128", "nodes": "4"}


#: "Create a NodePool": the requirements HyperPod's provider supports.
SUPPORTED_REQUIREMENTS = {
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "kubernetes.io/arch",
}


def test_the_node_pools_use_only_what_hyperpods_provider_supports(stack: cdk.Stack) -> None:
    cluster = autoscaled(stack)
    for manifest in cluster.autoscaling.manifests:
        node_class, pool = applied_objects(stack, manifest)
        spec = pool["spec"]["template"]["spec"]
        assert {r["key"] for r in spec["requirements"]} <= SUPPORTED_REQUIREMENTS
        assert spec["nodeClassRef"] == {
            "group": "karpenter.sagemaker.amazonaws.com",
            "kind": "HyperpodNodeClass",
            "name": node_class["metadata"]["name"],
        }
        assert len(node_class["spec"]["instanceGroups"]) <= 10


# --------------------------------------------------------------------------------------------------
# what the queues and runtimes see


def test_an_autoscaled_group_offers_its_maximum_without_the_schedulable_selector() -> None:
    pool = node_pool(P4D)
    assert pool.nodes == 2
    assert dict(pool.ready_labels) == {}
    assert dict(pool.labels) == {"training-clusters/pool": "p4d", "training-clusters/nodegroup": "p4d"}
    fixed = node_pool(replace(P4D, instance_count=3, max_instance_count=None))
    assert fixed.nodes == 3
    assert dict(fixed.ready_labels) == {"sagemaker.amazonaws.com/node-health-status": "Schedulable"}


# --------------------------------------------------------------------------------------------------
# efa_interface_type


def test_efa_only_goes_on_the_group_and_efa_when_asked(stack: cdk.Stack) -> None:
    build(
        stack,
        [
            replace(P4D, instance_count=1, max_instance_count=None, efa_interface_type="efa-only"),
            EksInstanceGroup(
                name="g5", instance_type="ml.g5.8xlarge", volume_gib=500, efa_interface_type="efa"
            ),
            EksInstanceGroup(name="g5b", instance_type="ml.g5.8xlarge", volume_gib=500),
        ],
    )
    _, resource = the_cluster(stack)
    assert [g.get("NetworkInterface") for g in resource["Properties"]["InstanceGroups"]] == [
        {"InterfaceType": "efa-only"},
        {"InterfaceType": "efa"},
        None,
    ]


# --------------------------------------------------------------------------------------------------
# refusals, each with its message


@pytest.mark.parametrize(
    ("groups", "props", "message"),
    [
        (
            [replace(G5, instance_count=2)],
            {},
            "instance_groups[0].instance_count must be 0 with autoscaling: karpenter (Karpenter adds the nodes as "
            "pods wait for them, and would scale the group down to 0 anyway); bound the group with max_count "
            "instead, got 2",
        ),
        (
            [replace(G5, max_instance_count=None)],
            {},
            "instance_groups[0].max_instance_count is required with autoscaling: karpenter: the most nodes "
            "Karpenter may start in the group (its NodePool's limit and the queues' quota); give e.g. 2",
        ),
        (
            [replace(G5, max_instance_count=0)],
            {},
            "instance_groups[0].max_instance_count must be between 1 and 6758, got 0",
        ),
        (
            [replace(G5, max_instance_count=6759)],
            {},
            "instance_groups[0].max_instance_count must be between 1 and 6758, got 6759",
        ),
        (
            [replace(G5, capacity=Capacity.training_plan(PLAN))],
            {},
            "instance_groups[0].capacity must be on-demand with autoscaling: karpenter (HyperPod's Karpenter "
            "scales On-Demand instance groups only, not groups on a training plan or reserved capacity), got "
            "training-plan",
        ),
        (
            [replace(G5, deep_health_checks=["InstanceConnectivity"])],
            {},
            "instance_groups[0].deep_health_checks must be empty with autoscaling: karpenter (a deep health check "
            "takes 60-90 minutes, while the pods that asked for the node wait and Karpenter starts more; HyperPod "
            "refuses them on autoscaled groups), got InstanceConnectivity",
        ),
        (
            None,
            {"node_recovery": NodeRecovery.NONE},
            "node_recovery must be Automatic with autoscaling: karpenter (HyperPod's Karpenter autoscaling replaces "
            "faulty nodes itself), got 'None'",
        ),
        (
            [replace(G5, name=f"g{i}") for i in range(11)],
            {},
            "instance_groups must hold at most 10 groups with autoscaling: karpenter (a HyperpodNodeClass names up "
            "to 10 instance groups), got 11",
        ),
        (
            [replace(G5, name="gpu"), replace(G5, name="GPU")],
            {},
            "instance_groups with autoscaling: karpenter must have names that differ in more than case (each "
            "group's NodeClass and NodePool take its name in lower case), got gpu and GPU",
        ),
        (
            None,
            {"autoscaling": "cluster-autoscaler"},
            "autoscaling must be one of karpenter, got 'cluster-autoscaler'",
        ),
    ],
    ids=[
        "not-at-zero",
        "no-max",
        "max-zero",
        "max-above-hyperpods",
        "training-plan",
        "deep-health-checks",
        "no-recovery",
        "eleven-groups",
        "names-differ-in-case",
        "unknown-autoscaler",
    ],
)
def test_what_autoscaling_refuses(
    stack: cdk.Stack, groups: list[EksInstanceGroup] | None, props: dict[str, Any], message: str
) -> None:
    arguments = {"autoscaling": "karpenter", **props}
    with pytest.raises(ConfigurationError) as error:
        build(stack, groups if groups is not None else [G5], **arguments)
    assert str(error.value) == f"Test/HyperPod: {message}"


def test_ten_groups_are_accepted(stack: cdk.Stack) -> None:
    cluster = autoscaled(stack, [replace(G5, name=f"g{i}") for i in range(10)])
    assert len(cluster.autoscaling.manifests) == 10


@pytest.mark.parametrize(
    ("group", "props", "message"),
    [
        (
            replace(G5, instance_count=0, max_instance_count=None),
            {},
            "instance_groups[0].instance_count must be 1 or more, got 0",
        ),
        (
            replace(G5, instance_count=2, max_instance_count=4),
            {},
            "instance_groups[0].max_instance_count applies with autoscaling: karpenter only (a fixed group has "
            "count nodes), got 4",
        ),
        (
            replace(G5, instance_count=1, max_instance_count=None, efa_interface_type="efa-only"),
            {},
            "instance_groups[0].efa_interface_type efa-only applies to secondary EFA interfaces, and ml.g5.8xlarge "
            "has 1 EFA interface (its primary interface is never EFA-only); use efa or leave it out",
        ),
        (
            EksInstanceGroup(
                name="c5", instance_type="ml.c5.xlarge", volume_gib=100, efa_interface_type="efa-only"
            ),
            {},
            "instance_groups[0].efa_interface_type efa-only applies to secondary EFA interfaces, and ml.c5.xlarge "
            "has no EFA interfaces (its primary interface is never EFA-only); use efa or leave it out",
        ),
        (
            replace(P4D, instance_count=1, max_instance_count=None, efa_interface_type="efa-only"),
            {"vpc_cni_version": "v1.18.4-eksbuild.1"},
            "instance_groups[0].efa_interface_type efa-only needs the VPC CNI v1.18.5 or newer, got "
            "addons.vpc_cni_version v1.18.4-eksbuild.1",
        ),
        (
            replace(P4D, instance_count=1, max_instance_count=None, efa_interface_type="ena"),
            {},
            "instance_groups[0].efa_interface_type must be one of efa, efa-only, got 'ena'",
        ),
    ],
    ids=[
        "zero-fixed",
        "max-fixed",
        "efa-only-one-efa",
        "efa-only-no-efa",
        "efa-only-old-cni",
        "unknown-type",
    ],
)
def test_what_a_fixed_group_refuses(
    stack: cdk.Stack, group: EksInstanceGroup, props: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        build(stack, [group], **props)
    assert str(error.value) == f"Test/HyperPod: {message}"


def test_efa_only_at_the_oldest_vpc_cni_that_knows_it_is_accepted(stack: cdk.Stack) -> None:
    build(
        stack,
        [replace(P4D, instance_count=1, max_instance_count=None, efa_interface_type="efa-only")],
        vpc_cni_version="v1.18.5-eksbuild.1",
    )
    _, resource = the_cluster(stack)
    assert resource["Properties"]["InstanceGroups"][0]["NetworkInterface"] == {"InterfaceType": "efa-only"}
