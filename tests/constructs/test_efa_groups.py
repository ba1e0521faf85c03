"""One EFA security group per cluster (issue 40, Medium 10): an EFA group admits all traffic between its members,
so one shared by two clusters opens every port between their nodes. A cluster given an EFA group another
cluster uses is refused; ``TrainingNetwork.add_efa_security_group`` makes each cluster its own."""

from __future__ import annotations

import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from training_clusters.constructs import (
    ComputeResource,
    EfaNodegroup,
    GpuEksCluster,
    HyperPodCluster,
    InstanceGroup,
    ParallelCluster,
    SlurmQueue,
    TrainingNetwork,
    TrainingPlacementGroup,
)
from training_clusters.model.errors import ConfigurationError

from ..assertions import all_traffic, logical_id, security_group_rules
from ..conftest import AZS

ADMIN = "arn:aws:iam::111122223333:role/Admin"
C5N = ComputeResource(name="c5n", instance_type="c5n.18xlarge", max_count=2)
CONTROLLER = InstanceGroup(name="controller", instance_type="ml.c5.xlarge", role="controller")
WORKERS = InstanceGroup(name="workers", instance_type="ml.g5.8xlarge", partition="gpu")


def _refusal(construct: str, prop: str, group: str, other: str) -> str:
    return (
        f"{construct}: {prop} must be a group of this cluster's own, got {group}, already the EFA group of "
        f"{other}: an EFA group admits all traffic between its members, so one shared by two clusters opens "
        "every port between their nodes; give each cluster its own (network.add_efa_security_group(id))"
    )


class Layer:
    def __init__(self, stack: cdk.Stack) -> None:
        self.stack = stack
        self.network = TrainingNetwork(stack, "Network", availability_zones=AZS)
        self.placement = TrainingPlacementGroup(stack, "PlacementGroup")

    def pcluster(self, id: str, group: ec2.ISecurityGroup) -> ParallelCluster:
        return ParallelCluster(
            self.stack,
            id,
            cluster_name=id.lower(),
            vpc=self.network.vpc,
            subnet=self.network.placement_subnet(),
            queues=[SlurmQueue(name="efa", compute_resources=[C5N])],
            placement_group=self.placement,
            efa_security_group=group,
        )

    def hyperpod(self, id: str, groups: list[ec2.ISecurityGroup]) -> HyperPodCluster:
        return HyperPodCluster(
            self.stack,
            id,
            cluster_name=id.lower(),
            vpc=self.network.vpc,
            subnet=self.network.placement_subnet(),
            instance_groups=[CONTROLLER, WORKERS],
            additional_security_groups=groups,
        )

    def eks(self, id: str) -> GpuEksCluster:
        return GpuEksCluster(self.stack, id, vpc=self.network.vpc, admin_role_arn=ADMIN)

    def efa_nodegroup(self, id: str, cluster: GpuEksCluster, group: ec2.ISecurityGroup) -> EfaNodegroup:
        return EfaNodegroup(
            self.stack,
            id,
            cluster=cluster,
            instance_type="g5.8xlarge",
            subnet=self.network.placement_subnet(),
            placement_group=self.placement,
            efa_security_group=group,
            desired_size=1,
        )


@pytest.fixture
def layer(stack: cdk.Stack) -> Layer:
    return Layer(stack)


def test_a_second_parallelcluster_on_the_networks_efa_group_is_refused(layer: Layer) -> None:
    layer.pcluster("First", layer.network.efa_security_group)
    with pytest.raises(ConfigurationError) as raised:
        layer.pcluster("Second", layer.network.efa_security_group)
    assert str(raised.value) == _refusal(
        "Test/Second", "efa_security_group", "Test/Network/EfaSecurityGroup", "Test/First"
    )


def test_a_hyperpod_cluster_after_a_parallelcluster_on_the_same_efa_group_is_refused(layer: Layer) -> None:
    layer.pcluster("First", layer.network.efa_security_group)
    with pytest.raises(ConfigurationError) as raised:
        layer.hyperpod("Second", [layer.network.efa_security_group])
    assert str(raised.value) == _refusal(
        "Test/Second", "additional_security_groups", "Test/Network/EfaSecurityGroup", "Test/First"
    )


def test_an_efa_nodegroup_of_another_eks_cluster_is_refused_and_of_the_same_one_accepted(
    layer: Layer,
) -> None:
    first = layer.eks("First")
    group = layer.network.efa_security_group
    layer.efa_nodegroup("FirstA", first, group)
    layer.efa_nodegroup("FirstB", first, group)  # one cluster's nodegroups share its group
    second = layer.eks("Second")
    with pytest.raises(ConfigurationError) as raised:
        layer.efa_nodegroup("SecondA", second, group)
    assert str(raised.value) == _refusal(
        "Test/SecondA", "efa_security_group", "Test/Network/EfaSecurityGroup", "Test/First"
    )


def test_a_group_that_is_not_an_efa_group_may_be_shared_as_an_additional_group(layer: Layer) -> None:
    """HyperPod's additional_security_groups takes any group; only EFA groups (all traffic between members)
    are claimed by one cluster."""
    common = ec2.SecurityGroup(layer.stack, "Common", vpc=layer.network.vpc, allow_all_outbound=False)
    layer.hyperpod("First", [common])
    layer.hyperpod("Second", [common])


def test_each_cluster_its_own_efa_group_admits_its_own_members_only(layer: Layer) -> None:
    """The README's multi-cluster example: the network's group for HyperPod, one more each for the others."""
    own = layer.network.add_efa_security_group("PclusterEfa")
    layer.hyperpod("HyperPod", [layer.network.efa_security_group])
    layer.pcluster("Pcluster", own)
    eks = layer.eks("Eks")
    eks_group = layer.network.add_efa_security_group("EksEfa")
    layer.efa_nodegroup("P5", eks, eks_group)
    template = Template.from_stack(layer.stack).to_json()
    groups = [layer.network.efa_security_group, own, eks_group]
    ids = [logical_id(g) for g in groups]
    assert len(set(ids)) == 3
    for id in ids:
        assert security_group_rules(template, id) == {all_traffic("ingress", id), all_traffic("egress", id)}
        description = template["Resources"][id]["Properties"]["GroupDescription"]
        assert (
            description == "EFA: all traffic in and out between members (EFA OS-bypass needs both directions)"
        )
    assert [g.node.path for g in groups] == [
        "Test/Network/EfaSecurityGroup",
        "Test/Network/PclusterEfa",
        "Test/Network/EksEfa",
    ]
    assert re.fullmatch(r"NetworkPclusterEfa[0-9A-F]{8}", ids[1])
