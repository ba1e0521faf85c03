"""Each environment picture shows what its file is for: every node group the template makes (ParallelCluster's
login pools too), how it gets its capacity (on demand, a Capacity Block, a training plan), how its GPUs are
sliced (MIG, time-slicing), its placement group and EFA, the clusters drawn around the groups they manage, and
no label cut short.

Every test reads the drawing's model (:class:`EnvironmentGraph`, and the label lines :mod:`.dot` draws), and
compares it with the synthesized template of the shipped environment file it names.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from training_clusters.diagram.dot import label_lines, label_table, to_dot
from training_clusters.diagram.model import (
    EdgeKind,
    EnvironmentGraph,
    NodeKind,
    NodeRole,
    graph_from_template,
)
from training_clusters.diagram.sources import source_of
from training_clusters.diagram.text import MAX_LINE_PT, width_pt, wrap
from training_clusters.environments import environment_files

from .conftest import ROOT, EnvironmentGates

ENVIRONMENTS = environment_files(ROOT / "environments")
IDS = [p.stem for p in ENVIRONMENTS]


@pytest.fixture
def shipped(environment_gates: EnvironmentGates) -> Any:
    """The named environment's template and drawing, from the session's synth."""

    def source(name: str) -> tuple[dict[str, Any], EnvironmentGraph]:
        path = ROOT / "environments" / f"{name}.yaml"
        stack, _ = environment_gates.get(path)
        template = environment_gates.template(path)
        return template, source_of(stack, template).graph()

    return source


def _of_type(template: dict[str, Any], resource_type: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (logical_id, resource.get("Properties", {}))
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
    ]


def _groups(graph: EnvironmentGraph) -> dict[str, Any]:
    return {n.id: n for n in graph.of_kind(NodeKind.NODE_GROUP)}


# --------------------------------------------------------------------------------------------------
# ParallelCluster: head node, login pools, queues


@pytest.mark.parametrize("name", ["training-any", "parallelcluster-team"])
def test_a_parallelcluster_shows_its_login_pool_and_its_head_node_as_the_controller(
    shipped: Any, name: str
) -> None:
    template, graph = shipped(name)
    [(cluster_id, props)] = _of_type(template, "Custom::PclusterCluster")
    pools = props["ClusterConfiguration"]["LoginNodes"]["Pools"]
    assert pools, "the file deploys a login pool"
    groups = _groups(graph)
    for pool in pools:
        login = groups[f"{cluster_id}/login/{pool['Name']}"]
        assert (login.role, login.title) == (NodeRole.LOGIN, f"login pool {pool['Name']}")
        assert (login.instance_type, login.count) == (pool["InstanceType"], str(pool["Count"]))
        assert login.details[:2] == (
            f"{pool['InstanceType']} \N{MULTIPLICATION SIGN} {pool['Count']}",
            "Slurm login: users log in and submit here",
        )
        assert login.capacity == "on-demand" and login.efa_interfaces == 0
        assert graph.subnets_of(login.id) == [s["Ref"] for s in pool["Networking"]["SubnetIds"]]
        mounted = {e.label for e in graph.edges if e.source == login.id and e.kind is EdgeKind.MOUNTS}
        assert mounted == {s["MountDir"] for s in props["ClusterConfiguration"]["SharedStorage"]}
    head = groups[f"{cluster_id}/head-node"]
    assert head.role is NodeRole.HEAD
    assert "Slurm controller (users log in on the login pool)" in head.details
    assert "Slurm controller and login" not in head.details
    queues = props["ClusterConfiguration"]["Scheduling"]["SlurmQueues"]
    compute = [g for g in groups.values() if g.role is NodeRole.COMPUTE]
    assert len(compute) == sum(len(q["ComputeResources"]) for q in queues)
    assert {g.role for g in groups.values()} == {NodeRole.HEAD, NodeRole.LOGIN, NodeRole.COMPUTE}


def test_a_parallelcluster_without_login_pools_logs_in_on_its_head_node() -> None:
    template = {
        "Resources": {
            "Pc": {
                "Type": "Custom::PclusterCluster",
                "Properties": {
                    "ClusterName": "c",
                    "ClusterConfiguration": {
                        "HeadNode": {"InstanceType": "m5.xlarge", "Networking": {"SubnetId": "subnet-1"}},
                        "Scheduling": {"Scheduler": "slurm", "SlurmQueues": []},
                    },
                },
            }
        }
    }
    graph = graph_from_template(template, title="t")
    [head] = graph.of_kind(NodeKind.NODE_GROUP)
    assert head.details == (
        "m5.xlarge \N{MULTIPLICATION SIGN} 1",
        "Slurm controller and login",
        "capacity: on-demand",
    )


# --------------------------------------------------------------------------------------------------
# capacity


def test_hyperpod_eks_p5_shows_its_training_plan(shipped: Any) -> None:
    template, graph = shipped("hyperpod-eks-p5")
    [(cluster_id, props)] = _of_type(template, "AWS::SageMaker::Cluster")
    [group] = props["InstanceGroups"]
    plan = group["TrainingPlanArn"].rsplit("/", 1)[-1]
    node = graph.node(f"{cluster_id}/group/{group['InstanceGroupName']}")
    assert plan == "p5-plan"
    assert node.capacity == f"training plan {plan}, runs in the plan's reserved window"
    assert f"capacity: {node.capacity}" in node.details
    others = [g for g in graph.of_kind(NodeKind.NODE_GROUP) if g.id != node.id]
    assert others and {g.capacity for g in others} == {"on-demand"}  # the system nodegroup


@pytest.mark.parametrize(
    "name, resource_type",
    [("eks-p5-capacity-block", "AWS::EKS::Nodegroup"), ("parallelcluster-p5-capacity-block", "Custom::PclusterCluster")],
)  # fmt: skip
def test_the_capacity_block_files_show_the_block_their_gpu_group_runs_on(
    shipped: Any, name: str, resource_type: str
) -> None:
    template, graph = shipped(name)
    text = str(template["Resources"])
    blocks = [g for g in graph.of_kind(NodeKind.NODE_GROUP) if g.capacity and "Capacity Block" in g.capacity]
    assert len(blocks) == 1
    [block] = blocks
    reservation = block.capacity.removeprefix("Capacity Block ")  # type: ignore[union-attr]
    assert reservation == "cr-0123456789abcdef0" and f"'CapacityReservationId': '{reservation}'" in text
    assert block.instance_type == "p5.48xlarge" and f"capacity: Capacity Block {reservation}" in block.details
    assert "CAPACITY_BLOCK" in text
    others = [g for g in graph.of_kind(NodeKind.NODE_GROUP) if g is not block]
    assert others and {g.capacity for g in others} == {"on-demand"}


@pytest.mark.parametrize(
    "market, target, capacity",
    [
        ("ON_DEMAND", {}, "on-demand"),
        ("SPOT", {}, "spot"),
        ("CAPACITY_BLOCK", {"CapacityReservationId": "cr-1"}, "Capacity Block cr-1"),
        ("ON_DEMAND", {"CapacityReservationId": "cr-2"}, "On-Demand Capacity Reservation cr-2"),
        (
            "ON_DEMAND",
            {"CapacityReservationResourceGroupArn": "arn:aws:resource-groups:us-east-1:1:group/odcrs"},
            "On-Demand Capacity Reservation group odcrs",
        ),
    ],
)
def test_an_eks_nodegroup_s_capacity_comes_from_its_type_and_launch_template(
    market: str, target: dict[str, str], capacity: str
) -> None:
    data: dict[str, Any] = {"InstanceType": "p5.48xlarge"}
    if target:
        data["CapacityReservationSpecification"] = {"CapacityReservationTarget": target}
    template = {
        "Resources": {
            "Lt": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": data}},
            "Ng": {
                "Type": "AWS::EKS::Nodegroup",
                "Properties": {"CapacityType": market, "LaunchTemplate": {"Id": {"Ref": "Lt"}}},
            },
        }
    }
    [group] = graph_from_template(template, title="t").of_kind(NodeKind.NODE_GROUP)
    assert group.capacity == capacity and f"capacity: {capacity}" in group.details


# --------------------------------------------------------------------------------------------------
# GPU slicing


def test_eks_mig_shows_its_layout_and_the_32_slices_it_yields(shipped: Any) -> None:
    template, graph = shipped("eks-mig")
    [(group_id, props)] = [
        (i, p) for i, p in _of_type(template, "AWS::EKS::Nodegroup") if "nvidia.com/mig.config" in p["Labels"]
    ]
    layout = props["Labels"]["nvidia.com/mig.config"]
    node = graph.node(group_id)
    assert layout == "all-1g.10gb" and node.instance_type == "p4d.24xlarge"
    assert node.gpu_slices == 32  # 8 A100 of a p4d.24xlarge, 4 x 1g.10gb each
    assert (
        node.gpu_sharing == "MIG all-1g.10gb: 4 \N{MULTIPLICATION SIGN} 1g.10gb per GPU, 32 slices per node"
    )
    assert node.gpu_sharing in node.details
    system = [g for g in graph.of_kind(NodeKind.NODE_GROUP) if g.role is NodeRole.SYSTEM]
    assert system and all(g.gpu_sharing is None and g.gpu_slices is None for g in system)


def test_eks_gpu_sharing_shows_the_time_slicing_replicas(shipped: Any) -> None:
    _, graph = shipped("eks-gpu-sharing")
    [gpu] = [g for g in graph.of_kind(NodeKind.NODE_GROUP) if g.role is NodeRole.WORKER]
    assert gpu.instance_type == "g5.2xlarge"
    assert gpu.gpu_sharing == "time-slicing: 10 replicas per GPU, 10 nvidia.com/gpu per node"
    assert gpu.gpu_slices == 10 and gpu.gpu_sharing in gpu.details


def test_a_mig_layout_the_template_does_not_hold_is_named_as_the_operator_s_own() -> None:
    template = {
        "Resources": {
            "Ng": {
                "Type": "AWS::EKS::Nodegroup",
                "Properties": {"InstanceTypes": ["p4d.24xlarge"], "Labels": {"nvidia.com/mig.config": "all-3g.20gb"}},
            }
        }
    }  # fmt: skip
    [group] = graph_from_template(template, title="t").of_kind(NodeKind.NODE_GROUP)
    assert group.gpu_sharing == "MIG all-3g.20gb (the GPU operator's own layout)" and group.gpu_slices is None


# --------------------------------------------------------------------------------------------------
# clusters drawn around their groups, inside the VPC


@pytest.mark.parametrize("name", ["hyperpod-eks-p5", "hyperpod-p5", "pcs-p5", "parallelcluster-team"])
def test_hyperpod_pcs_and_parallelcluster_are_drawn_around_their_groups_in_the_vpc(
    shipped: Any, name: str
) -> None:
    _, graph = shipped(name)
    clusters = [c for c in graph.of_kind(NodeKind.CLUSTER) if not c.title.startswith("Amazon EKS")]
    assert len(clusters) == 1
    [cluster] = clusters
    kinds = [graph.node(a).kind for a in graph.ancestors(cluster.id)]
    assert kinds == [NodeKind.SUBNET, NodeKind.AVAILABILITY_ZONE, NodeKind.VPC, NodeKind.REGION]
    members = [g for g in graph.of_kind(NodeKind.NODE_GROUP) if g.cluster == cluster.id]
    assert members and all(g.parent == cluster.id for g in members)
    assert all(graph.subnets_of(g.id)[0] == cluster.parent for g in members)
    dot = to_dot(graph)
    for group in members:  # the box says it; no dotted line to the cluster is drawn
        edges = [line for line in dot.splitlines() if line.strip().startswith(f'"{group.id}" -> ')]
        assert not [line for line in edges if 'style="dotted"' in line], edges
        assert any(e.kind is EdgeKind.MANAGED_BY and e.source == group.id for e in graph.edges)


def test_a_cluster_whose_groups_span_zones_is_drawn_in_the_vpc_naming_each_group_s_subnet() -> None:
    def subnet(zone: str, cidr: str) -> dict[str, Any]:
        properties = {"VpcId": {"Ref": "Vpc"}, "AvailabilityZone": zone, "CidrBlock": cidr}
        return {"Type": "AWS::EC2::Subnet", "Properties": properties}

    def group(name: str, subnet_id: str) -> dict[str, Any]:
        return {"InstanceGroupName": name, "InstanceType": "ml.c5.xlarge", "InstanceCount": 1,
                "OverrideVpcConfig": {"Subnets": [{"Ref": subnet_id}]}}  # fmt: skip

    template = {
        "Resources": {
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
            "A": subnet("us-east-1a", "10.0.0.0/24"),
            "B": subnet("us-east-1b", "10.0.1.0/24"),
            "Hp": {
                "Type": "AWS::SageMaker::Cluster",
                "Properties": {
                    "ClusterName": "h",
                    "VpcConfig": {"Subnets": [{"Ref": "A"}]},
                    "InstanceGroups": [group("one", "A"), group("two", "B")],
                },
            },
        }
    }
    graph = graph_from_template(template, title="t")
    assert graph.node("Hp").parent == "Vpc"
    one, two = graph.node("Hp/group/one"), graph.node("Hp/group/two")
    assert one.parent == two.parent == "Hp"
    assert one.details[-1] == "in isolated subnet 10.0.0.0/24 (us-east-1a)"
    assert two.details[-1] == "in isolated subnet 10.0.1.0/24 (us-east-1b)"


# --------------------------------------------------------------------------------------------------
# every shipped picture


@pytest.mark.parametrize("name", IDS)
def test_no_label_is_cut_and_no_placement_group_is_joined_to_nothing(shipped: Any, name: str) -> None:
    template, graph = shipped(name)
    for node in graph.nodes:
        drawn = label_lines(node, box=graph.is_box(node))
        for text, size, bold in drawn:
            assert not text.endswith("\N{HORIZONTAL ELLIPSIS}"), (node.id, text)
            assert width_pt(text, size, bold=bold) <= MAX_LINE_PT, (node.id, text)
        shown = " ".join(text for text, _, _ in drawn)
        for line in node.details:  # every word of every line is drawn, in order
            assert " ".join(wrap(line, 10)) in shown, (node.id, line)
    placed = {e.target for e in graph.edges if e.kind is EdgeKind.PLACED_IN}
    groups = graph.of_kind(NodeKind.PLACEMENT_GROUP)
    assert {g.id for g in groups} == placed
    unused = len(_of_type(template, "AWS::EC2::PlacementGroup")) - len(groups)
    noted = [d for n in graph.nodes for d in n.details if d.endswith("no node group is placed in it")]
    assert len(noted) == unused
    for group in graph.of_kind(NodeKind.NODE_GROUP):  # capacity and EFA on every group
        assert group.capacity and f"capacity: {group.capacity}" in group.details, group.id
        assert group.efa_interfaces is not None
        efa = f"{group.efa_interfaces} EFA interface{'s' if group.efa_interfaces != 1 else ''} per node"
        assert (efa in group.details) is (group.efa_interfaces > 0), group.id


def test_a_long_line_is_wrapped_whole_at_spaces_and_a_long_word_inside_it() -> None:
    line = "deep health checks: " + ", ".join(["InstanceStress", "InstanceConnectivity"] * 4)
    lines = wrap(line, 10)
    assert len(lines) > 1 and " ".join(lines) == line
    assert all(width_pt(part, 10) <= MAX_LINE_PT for part in lines)
    assert wrap("short", 10) == ["short"]
    word = "x" * 200
    parts = wrap(word, 10, bold=True)
    assert "".join(parts) == word and all(width_pt(p, 10, bold=True) <= MAX_LINE_PT for p in parts)
    assert len(parts) > 1 and all(width_pt(p + "x", 10, bold=True) > MAX_LINE_PT for p in parts[:-1])


def test_a_placement_group_nothing_is_placed_in_is_noted_on_the_vpc_not_drawn() -> None:
    template = {
        "Resources": {
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
            "Pg": {"Type": "AWS::EC2::PlacementGroup", "Properties": {"Strategy": "cluster"}},
        }
    }
    graph = graph_from_template(template, title="t")
    assert graph.of_kind(NodeKind.PLACEMENT_GROUP) == []
    assert graph.node("Vpc").details == (
        "10.0.0.0/16",
        "placement group (strategy cluster): no node group is placed in it",
    )


def test_dot_draws_a_kept_on_delete_note_red_on_every_line_it_wraps_onto() -> None:
    kept = tuple((f"LogGroup{i}", "log group") for i in range(3)) + tuple(
        (f"Key{i}", what)
        for i, what in enumerate(["KMS key", "DB parameter group", "secret", "DB subnet group"])
    )
    template = {"Resources": {"Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}}}
    graph = graph_from_template(template, title="t")
    node = replace(graph.node("Vpc"), kept_with=kept)
    badge = node.badges[-1]
    parts = wrap(badge, 10)
    assert len(parts) > 1
    table = label_table(node)
    for part in parts:
        assert f'<FONT COLOR="#b0084d">{part.replace("&", "&amp;")}</FONT>' in table


@pytest.mark.parametrize("name, shown", [("pcs-p5", False), ("eks-mig", True)])
def test_the_legend_names_the_managed_by_line_only_where_one_is_drawn(
    shipped: Any, name: str, shown: bool
) -> None:
    """PCS draws its groups in its box (no line); EKS joins its nodegroups to the control plane by a line."""
    _, graph = shipped(name)
    dot = to_dot(graph)
    legend = dot.split('"legend"')[1].split("];")[0]
    drawn = [line for line in dot.splitlines() if 'style="dotted"' in line and " -> " in line]
    assert ("managed by its cluster" in legend) is shown and bool(drawn) is shown


def test_the_gpu_sharing_line_follows_the_gpus_and_comes_before_the_capacity(shipped: Any) -> None:
    _, graph = shipped("eks-mig")
    [node] = [g for g in graph.of_kind(NodeKind.NODE_GROUP) if g.gpu_sharing]
    assert node.details == (
        "p4d.24xlarge \N{MULTIPLICATION SIGN} 1",
        "8 \N{MULTIPLICATION SIGN} A100",
        node.gpu_sharing,
        "capacity: on-demand",
        "also in us-east-1b",
    )
