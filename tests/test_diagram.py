"""``training-clusters diagram``: the drawing matches the template, and docs/environments is fresh.

Every shipped environment's template comes from the session's gated synth (``environment_gates``); the
drawing's nodes, edges, EFA counts and kept-on-delete resources are checked against that template, and
its SVG and Markdown against the files ``make diagrams`` checked in. The rest uses small hand-written
templates and a hand-made cloud assembly: no synth.
"""

from __future__ import annotations

import io
import json
import random
import re
import struct
import tomllib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from tests.text_tables import unwrapped
from training_clusters import cli
from training_clusters.catalog import CATALOG, lookup
from training_clusters.config import load_environment
from training_clusters.constructs.eks.cluster import GPU_TAINT_KEY
from training_clusters.diagram import (
    PNG_WIDTH_PX,
    EdgeKind,
    EnvironmentGraph,
    NodeKind,
    NodeRole,
    graph_from_template,
    read_stack,
    render,
    retained_logical_ids,
    to_dot,
    to_markdown,
    to_mermaid,
    to_png,
    to_svg,
    to_svgs,
)
from training_clusters.diagram.scheduling import (
    INSTANCE_TYPE_LABEL,
    NodeGroupLabels,
    PodScope,
    Taint,
    may_schedule,
    scopes_in,
)
from training_clusters.diagram.sources import StackSource, source_of
from training_clusters.diagram.text import MAX_LINE_PT, width_pt, wrap
from training_clusters.environments import environment_files
from training_clusters.model.errors import ConfigurationError

from .conftest import ROOT, EnvironmentGates

ENVIRONMENTS = environment_files(ROOT / "environments")
DOCS = ROOT / "docs" / "environments"
IDS = [p.stem for p in ENVIRONMENTS]

#: EFA interfaces per node of each node group, by instance type: what the picture must say.
EXPECTED_EFA = {
    "eks-g5-efa": {"g5.8xlarge": 1, "t3.large": 0},
    "eks-gpu-monitoring": {"g4dn.xlarge": 0, "t3.large": 0},
    "eks-gpu-sharing": {"g5.2xlarge": 0, "t3.large": 0},
    "eks-mig": {"p4d.24xlarge": 0, "t3.large": 0},
    "eks-p5-capacity-block": {"p5.48xlarge": 32, "t3.large": 0},
    "eks-p5-efa": {"p5.48xlarge": 32, "t3.large": 0},
    "hyperpod-eks-autoscaling": {"ml.g5.8xlarge": 1, "ml.p4d.24xlarge": 4, "t3.large": 0},
    "hyperpod-eks-g5": {"ml.g5.8xlarge": 1, "t3.large": 0},
    "hyperpod-eks-governance": {"ml.p4d.24xlarge": 4, "t3.large": 0},
    "hyperpod-eks-p5": {"ml.p5.48xlarge": 32, "t3.large": 0},
    "hyperpod-p5": {"ml.m5.2xlarge": 0, "ml.p5.48xlarge": 32},
    "hyperpod-p5-training-plan": {"ml.m5.2xlarge": 0, "ml.p5.48xlarge": 32},
    "hyperpod-slurm": {"ml.c5.xlarge": 0},
    "hyperpod-team": {"ml.m5.2xlarge": 0, "ml.m5.xlarge": 0, "ml.g5.8xlarge": 1},
    "network-storage": {},
    "parallelcluster-c5n": {"t3.medium": 0, "c5n.9xlarge": 1},
    "parallelcluster-p5": {"m5.2xlarge": 0, "p5.48xlarge": 32},
    "parallelcluster-p5-capacity-block": {"m5.2xlarge": 0, "p5.48xlarge": 32},
    "parallelcluster-team": {"t3.large": 0, "c5n.9xlarge": 1},
    "pcs-c5n": {"t3.medium": 0, "c5n.9xlarge": 1},
    "pcs-p5": {"m5.2xlarge": 0, "p5.48xlarge": 32},
    "training-any": {"m5.xlarge": 0, "g5.8xlarge": 1},
}


@pytest.fixture
def shipped(environment_gates: EnvironmentGates) -> Any:
    """The shipped environment's template and drawing, from the session's synth (no second synth)."""

    def source(path: Path) -> tuple[dict[str, Any], EnvironmentGraph]:
        stack, _ = environment_gates.get(path)
        template = environment_gates.template(path)
        return template, source_of(stack, template).graph()

    return source


# --------------------------------------------------------------------------------------------------
# every shipped environment


def test_every_shipped_environment_has_an_expectation_and_a_drawing() -> None:
    assert set(EXPECTED_EFA) == set(IDS)
    drawn = {p.stem for p in DOCS.glob("*.svg")}
    assert drawn == set(IDS), "run make diagrams"
    assert {p.stem for p in DOCS.glob("*.md")} == set(IDS), "run make diagrams"


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_the_drawing_has_a_node_for_each_thing_the_template_builds(shipped: Any, path: Path) -> None:
    template, graph = shipped(path)
    types = Counter(r["Type"] for r in template["Resources"].values())
    resources = template["Resources"].values()
    clusters = [r["Properties"] for r in resources if r["Type"] == "Custom::PclusterCluster"]
    compute = sum(
        len(q["ComputeResources"])
        for c in clusters
        for q in c["ClusterConfiguration"]["Scheduling"]["SlurmQueues"]
    )
    hyperpod_groups = sum(
        len(r["Properties"]["InstanceGroups"]) for r in resources if r["Type"] == "AWS::SageMaker::Cluster"
    )
    zones = {r["Properties"]["AvailabilityZone"] for r in resources if r["Type"] == "AWS::EC2::Subnet"}
    login_pools = sum(len(c["ClusterConfiguration"].get("LoginNodes", {}).get("Pools", [])) for c in clusters)
    unplaced = sum(
        1 for n in graph.nodes for d in n.details if d.endswith("): no node group is placed in it")
    )  # a placement group nothing launches into is a line of the VPC's box
    access_log_buckets = len(
        {
            json.dumps(r["Properties"]["LoggingConfiguration"]["DestinationBucketName"])
            for r in resources
            if r["Type"] == "AWS::S3::Bucket" and "LoggingConfiguration" in r.get("Properties", {})
        }
    )
    expected = {
        NodeKind.VPC: types["AWS::EC2::VPC"],
        NodeKind.AVAILABILITY_ZONE: len(zones),
        NodeKind.SUBNET: types["AWS::EC2::Subnet"],
        NodeKind.INTERNET_GATEWAY: types["AWS::EC2::InternetGateway"],
        NodeKind.NAT_GATEWAY: types["AWS::EC2::NatGateway"],
        NodeKind.VPC_ENDPOINT: types["AWS::EC2::VPCEndpoint"],
        NodeKind.PLACEMENT_GROUP: types["AWS::EC2::PlacementGroup"] - unplaced,
        NodeKind.FILE_SYSTEM: types["AWS::FSx::FileSystem"],
        NodeKind.REGION: 1,
        NodeKind.DATABASE: types["AWS::RDS::DBCluster"],
        NodeKind.BUCKET: types["AWS::S3::Bucket"] - access_log_buckets,
        NodeKind.CLUSTER: types["AWS::EKS::Cluster"]
        + len(clusters)
        + types["AWS::SageMaker::Cluster"]
        + types["AWS::PCS::Cluster"],
        NodeKind.CONTROL_PLANE: types["AWS::EKS::Cluster"] + types["AWS::PCS::Cluster"],
        NodeKind.NODE_GROUP: types["AWS::EKS::Nodegroup"]
        + len(clusters)
        + login_pools
        + compute
        + hyperpod_groups
        + types["AWS::PCS::ComputeNodeGroup"],
        NodeKind.ADDON: types["AWS::EKS::Addon"]
        + types["Custom::AWSCDK-EKS-HelmChart"]
        + types["Custom::ReleaseManifest"],
    }
    counts = graph.kind_counts()
    assert {kind: counts.get(kind, 0) for kind in expected} == expected
    assert counts[NodeKind.VPC] == 1 and counts[NodeKind.SUBNET] == 4  # what every shipped network has
    for node in graph.nodes:  # a node that names the resource it comes from names one of the template
        if node.logical_id is not None:
            assert node.logical_id in template["Resources"], node


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_the_drawing_shows_the_efa_interfaces_of_every_node_group(shipped: Any, path: Path) -> None:
    template, graph = shipped(path)
    groups = graph.of_kind(NodeKind.NODE_GROUP)
    assert {g.instance_type: g.efa_interfaces for g in groups} == EXPECTED_EFA[path.stem]
    launch_templates = {
        logical_id: r["Properties"]["LaunchTemplateData"]
        for logical_id, r in template["Resources"].items()
        if r["Type"] == "AWS::EC2::LaunchTemplate"
    }
    for group in groups:
        line = f"{group.efa_interfaces} EFA interface"
        assert (line in " ".join(group.details)) is (group.efa_interfaces > 0), group
        if group.logical_id is not None:  # an EKS or PCS node group: its launch template's EFA interfaces
            nodegroup = template["Resources"][group.logical_id]["Properties"]
            launch_template = (
                nodegroup.get("LaunchTemplate", {}).get("Id")
                or nodegroup["CustomLaunchTemplate"]["TemplateId"]
            )
            data = launch_templates[launch_template["Ref"]]
            interfaces = [
                i for i in data.get("NetworkInterfaces", []) if i.get("InterfaceType") in ("efa", "efa-only")
            ]
            assert group.efa_interfaces == len(interfaces)


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_the_drawing_marks_every_resource_kept_on_delete(shipped: Any, path: Path) -> None:
    template, graph = shipped(path)
    by_deletion_policy = {
        logical_id for logical_id, r in template["Resources"].items() if r.get("DeletionPolicy") == "Retain"
    }
    assert by_deletion_policy, "every shipped environment keeps its flow logs"
    kept = graph.kept_on_delete()
    assert {i for i, by in kept.items() if by == "DeletionPolicy Retain"} == by_deletion_policy
    for logical_id in by_deletion_policy:  # badged on itself, or on the drawn resource it belongs to
        [holder] = [n for n in graph.nodes if n.logical_id == logical_id or logical_id in dict(n.kept_with)]
        assert holder.badges and holder.kind is not NodeKind.REGION, holder
    assert len(graph.of_kind(NodeKind.RETAINED_RESOURCE)) <= 2, (
        "most retained resources belong to a drawn one"
    )
    clusters_kept = {
        logical_id
        for logical_id, r in template["Resources"].items()
        if r["Type"] == "Custom::PclusterCluster" and r["Properties"].get("DeletionPolicy") == "Retain"
    }
    assert {
        n.logical_id for n in graph.retained if n.retained_by.startswith("ParallelCluster")
    } == clusters_kept
    svg = (DOCS / f"{path.stem}.svg").read_text()
    assert svg.count(">KEPT ON DELETE</text>") == len(graph.retained)
    assert svg.count(">also kept: ") + svg.count(">kept on delete: ") == sum(
        1 for n in graph.nodes if n.kept_with
    )
    assert "also kept when the stack is deleted" not in svg


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_the_drawing_connects_compute_to_its_subnets_placement_and_storage(shipped: Any, path: Path) -> None:
    _, graph = shipped(path)
    ids = {n.id for n in graph.nodes}
    assert all(e.source in ids and e.target in ids for e in graph.edges)
    runs_in = {e.source for e in graph.edges if e.kind is EdgeKind.RUNS_IN}
    for node in graph.of_kind(NodeKind.NODE_GROUP) + graph.of_kind(NodeKind.FILE_SYSTEM):
        assert node.id in runs_in, f"{node.title} is drawn in no subnet"
    private = [n for n in graph.of_kind(NodeKind.SUBNET) if n.title == "private subnet"]
    assert len(private) == 2 and all(
        any(e.source == s.id and e.kind is EdgeKind.ROUTES_THROUGH for e in graph.edges) for s in private
    )
    placed = {e.source for e in graph.edges if e.kind is EdgeKind.PLACED_IN}
    hyperpod = {n.id for n in graph.of_kind(NodeKind.CLUSTER) if n.title.startswith("SageMaker HyperPod")}
    efa_groups = {
        g.id for g in graph.of_kind(NodeKind.NODE_GROUP) if g.efa_interfaces and g.cluster not in hyperpod
    }
    if _on_reserved_capacity(path):
        efa_groups = (
            set()
        )  # a Capacity Block or reservation places its nodes (Capacity.keeps_placement_group)
    assert efa_groups <= placed, "EFA node groups launch into the placement group (HyperPod places its own)"
    mounted = {e.target for e in graph.edges if e.kind is EdgeKind.MOUNTS}
    if graph.of_kind(NodeKind.CLUSTER):
        assert mounted == {n.id for n in graph.of_kind(NodeKind.FILE_SYSTEM)}, (
            "the cluster mounts its storage"
        )
    for edge in graph.edges:  # compute mounts the file system, never a control plane (pods on nodes do)
        if edge.kind is EdgeKind.MOUNTS:
            assert graph.node(edge.source).kind is NodeKind.NODE_GROUP, edge
    groups = graph.of_kind(NodeKind.NODE_GROUP)
    managed = {e.source for e in graph.edges if e.kind is EdgeKind.MANAGED_BY}
    assert managed == {g.id for g in groups if g.cluster is not None} == {g.id for g in groups}
    accounting = graph.of_kind(NodeKind.DATABASE)
    clients = {e.source for e in graph.edges if e.kind is EdgeKind.DATABASE}
    assert {graph.node(c).role for c in clients} == (
        {NodeRole.CONTROLLER, NodeRole.HEAD} & {g.role for g in groups} if accounting else set()
    )
    hyperpod_groups = {g.id for g in groups if g.cluster in hyperpod}
    assert hyperpod_groups <= {e.source for e in graph.edges if e.kind is EdgeKind.FETCHES}


#: The label our system nodegroups carry, and the label the kubelet gives every node its instance type by.
SYSTEM_LABEL, INSTANCE_TYPE = "training-clusters/role", "node.kubernetes.io/instance-type"


def _placement_in_values(values: Any) -> tuple[set[str], set[str]]:
    """The system-role node selectors and the instance types a chart's values name, found by walking them."""
    roles: set[str] = set()
    types: set[str] = set()
    if isinstance(values, dict):
        selector = values.get("nodeSelector")
        if isinstance(selector, dict) and SYSTEM_LABEL in selector:
            roles.add(selector[SYSTEM_LABEL])
        supported = values.get("supportedInstanceLabels")
        if isinstance(supported, dict) and INSTANCE_TYPE in supported.get("keys", []):
            types.update(supported["values"])
        if values.get("key") == INSTANCE_TYPE and values.get("operator") == "In":
            types.update(values["values"])
        items: list[Any] = list(values.values())
    else:
        items = values if isinstance(values, list) else []
    for item in items:
        more_roles, more_types = _placement_in_values(item)
        roles |= more_roles
        types |= more_types
    return roles, types


def _tolerates_gpu_taint(values: Any) -> bool:
    """Whether some toleration in a chart's values names the NVIDIA GPU nodes' taint key."""
    if isinstance(values, dict):
        if values.get("key") == GPU_TAINT_KEY and "operator" in values:
            return True
        return any(_tolerates_gpu_taint(v) for v in values.values())
    return isinstance(values, list) and any(_tolerates_gpu_taint(v) for v in values)


@pytest.mark.parametrize("path", [p for p in ENVIRONMENTS if "eks" in p.stem], ids=lambda p: p.stem)
def test_every_helm_chart_is_drawn_over_the_node_groups_its_values_schedule_it_on(
    shipped: Any, path: Path
) -> None:
    """The system-role node selector puts a chart over the system nodegroup alone; an instance-type affinity
    (or the EFA plugin's allow-list) over the groups of those types alone, as the template's values say."""
    template, graph = shipped(path)
    groups = {g.id: g for g in graph.of_kind(NodeKind.NODE_GROUP)}
    system = {g.id for g in groups.values() if g.role is NodeRole.SYSTEM}
    assert len(system) == 1
    runs_on = {
        s.id: {e.target for e in graph.edges if e.source == s.id and e.kind is EdgeKind.RUNS_ON}
        for s in graph.of_kind(NodeKind.ADDON_SET)
    }
    assert all(targets <= set(groups) for targets in runs_on.values())
    assert "on no node group" not in {s.title for s in graph.of_kind(NodeKind.ADDON_SET)}
    checked = 0
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "Custom::AWSCDK-EKS-HelmChart":
            continue
        values = json.loads(resource["Properties"]["Values"])
        roles, types = _placement_in_values(values)
        drawn_on = runs_on[graph.node(logical_id).parent]
        if roles == {"system"} and not _tolerates_gpu_taint(values):
            assert drawn_on == system, resource["Properties"]["Chart"]
            checked += 1
        elif roles == {"system"}:
            # controllers on the system nodes, operand DaemonSets (the GPU Operator's) on the GPU nodes
            gpu = {g for g in groups if (t := CATALOG.get(groups[g].instance_type or "")) and t.is_gpu}
            assert drawn_on == system | gpu and gpu, resource["Properties"]["Chart"]
            checked += 1
        elif types:
            assert drawn_on == {g for g in groups if groups[g].instance_type in types} != set()
            checked += 1
    assert checked >= 2  # Kueue on the system nodes, the device plugins on the GPU nodes
    for addon in graph.of_kind(NodeKind.ADDON):
        if template["Resources"][addon.logical_id]["Type"] == "Custom::ReleaseManifest":
            assert graph.node(addon.parent).title == "placed by their own defaults"


#: Environments without an EFA node group.
NO_EFA = {"network-storage", "hyperpod-slurm", "eks-gpu-sharing", "eks-gpu-monitoring", "eks-mig"}


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_each_efa_node_group_has_one_efa_edge_between_its_members(
    shipped: Any, redrawn: dict[str, tuple[str, str]], path: Path
) -> None:
    _, graph = shipped(path)
    efa = [e for e in graph.edges if e.kind is EdgeKind.EFA]
    expected = {
        (g.id, g.id, f"EFA, {g.efa_interfaces} interface{'s' if g.efa_interfaces > 1 else ''}/node")
        for g in graph.of_kind(NodeKind.NODE_GROUP)
        if g.efa_interfaces
    }
    assert {(e.source, e.target, e.label) for e in efa} == expected
    assert bool(expected) is (path.stem not in NO_EFA)
    svg, page = redrawn[path.stem]
    for _, _, label in expected:
        count = sum(1 for e in expected if e[2] == label)
        assert svg.count(f">{label}</text>") == count and page.count(f'<==>|"{label}"|') == count


def _on_reserved_capacity(path: Path) -> bool:
    config = load_environment(path)
    capacities = [g.node_capacity() for g in config.eks.efa_nodegroups] if config.eks else []
    for queue in config.parallelcluster.queues if config.parallelcluster else []:
        capacities += [r.resource_capacity() or queue.queue_capacity() for r in queue.compute_resources]
    return any(not c.keeps_placement_group() for c in capacities)


def _manifest_kinds(manifest: Any) -> set[str]:
    """The ``kind`` of each object of a Kubernetes manifest as the template holds it (text, or Fn::Join)."""
    parts = manifest["Fn::Join"][1] if isinstance(manifest, dict) else [manifest]
    text = "".join(part if isinstance(part, str) else "TOKEN" for part in parts)
    return set(re.findall(r'"kind":\s*"(\w+)"', text))


#: Kinds drawn in the subnet they have network interfaces in.
IN_A_SUBNET = (NodeKind.NODE_GROUP, NodeKind.FILE_SYSTEM, NodeKind.DATABASE, NodeKind.NAT_GATEWAY)
#: Kinds drawn outside the VPC, at the region's edge.
AT_THE_EDGE = (NodeKind.CLUSTER, NodeKind.BUCKET, NodeKind.RETAINED_RESOURCE)


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_every_resource_is_drawn_inside_the_subnet_it_lives_in(shipped: Any, path: Path) -> None:
    """Region, VPC, availability zone, subnet: each node group, file system, database and NAT gateway in (the
    first of) its subnets as the template says (a ParallelCluster, HyperPod or PCS group in its cluster's box,
    in that subnet); EKS, buckets and log groups outside the VPC."""
    template, graph = shipped(path)
    resources = template["Resources"]
    in_the_vpc = {n.id for n in graph.of_kind(NodeKind.CLUSTER) if not n.title.startswith("Amazon EKS")}
    for node in graph.nodes:
        if node.kind in IN_A_SUBNET:
            subnets = graph.subnets_of(node.id)
            boxed = node.parent in in_the_vpc
            home = graph.node(node.parent).parent if boxed else node.parent
            assert home in subnets, f"{node.title} is drawn in {node.parent}, runs in {subnets}"
            kinds = [graph.node(a).kind for a in graph.ancestors(node.id)]
            around = [NodeKind.CLUSTER] if boxed else []
            assert kinds == [
                *around,
                NodeKind.SUBNET,
                NodeKind.AVAILABILITY_ZONE,
                NodeKind.VPC,
                NodeKind.REGION,
            ]
        if node.kind in AT_THE_EDGE and node.id not in in_the_vpc:
            assert node.parent == "region", node
        if node.id in in_the_vpc:  # around the groups it manages, in their subnet
            assert graph.node(node.parent).kind is NodeKind.SUBNET, node
        if node.kind is NodeKind.CONTROL_PLANE or node.kind is NodeKind.ADDON_SET:
            cluster = graph.node(node.parent)
            assert cluster.kind is NodeKind.CLUSTER
            assert cluster.parent == "region" or (
                cluster.id in in_the_vpc and node.title == "managed Slurm controller"
            )
        if node.kind is NodeKind.ADDON:  # in the box of the node groups it runs on, in its cluster's box
            assert graph.node(node.parent).kind is NodeKind.ADDON_SET, node
        if node.kind is NodeKind.WORKLOAD:  # there too when it runs pods, else in its cluster's box
            kinds = _manifest_kinds(resources[node.logical_id]["Properties"]["Manifest"])
            runs = bool(kinds & {"MPIJob", "Job", "DaemonSet", "Deployment", "StatefulSet", "PyTorchJob"})
            assert graph.node(node.parent).kind is (NodeKind.ADDON_SET if runs else NodeKind.CLUSTER), node
    for group in graph.of_kind(NodeKind.NODE_GROUP):  # the subnets read from the template, not guessed
        if group.logical_id is not None:
            props = resources[group.logical_id]["Properties"]
            named = props.get("Subnets") or props.get("SubnetIds")
            assert graph.subnets_of(group.id) and {s["Ref"] for s in named} == set(graph.subnets_of(group.id))
    for db in graph.of_kind(NodeKind.DATABASE):
        group = resources[db.logical_id]["Properties"]["DBSubnetGroupName"]["Ref"]
        assert db.parent == resources[group]["Properties"]["SubnetIds"][0]["Ref"]


_SVG = "{http://www.w3.org/2000/svg}"
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _x_range(shape: Any) -> tuple[float, float]:
    """The left and right of a Graphviz path or polygon (every other number of its points is an x)."""
    numbers = [float(n) for n in _NUMBER.findall(shape.get("d") or shape.get("points"))]
    xs = numbers[0::2]
    return min(xs), max(xs)


def _boxes_and_texts(svg: str) -> list[tuple[str, tuple[float, float], list[tuple[str, float, float, bool]]]]:
    """Each node and cluster of the SVG: its title, its outline's left and right, and its texts as (text,
    x where it starts, font size, bold)."""
    found = []
    for group in ElementTree.fromstring(svg).iter(f"{_SVG}g"):
        if group.get("class") not in ("node", "cluster"):
            continue
        shapes = [e for e in group.iter() if e.tag in (f"{_SVG}path", f"{_SVG}polygon")]
        title = group.find(f"{_SVG}title")
        if not shapes or title is None or title.text == "legend":
            continue
        texts = []
        for text in group.iter(f"{_SVG}text"):
            size = float(text.get("font-size"))
            bold = text.get("font-weight") == "bold"
            x = float(text.get("x"))
            if text.get("text-anchor") == "middle":
                x -= width_pt(text.text or "", size, bold=bold) / 2
            texts.append((text.text or "", x, size, bold))
        found.append((title.text or "", _x_range(shapes[0]), texts))
    return found


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_no_label_is_wider_than_its_box_in_the_font_the_png_is_drawn_with(
    redrawn: dict[str, tuple[str, str]], path: Path
) -> None:
    svg, _ = redrawn[path.stem]
    boxes = _boxes_and_texts(svg)
    assert len(boxes) >= 10 and sum(len(texts) for _, _, texts in boxes) >= 20  # what is read, is read
    for title, (left, right), texts in boxes:
        for text, x, size, bold in texts:
            end = x + width_pt(text, size, bold=bold)
            assert left <= x and end <= right, (
                f"{title}: {text!r} spans {x:.1f}-{end:.1f}, box {left:.1f}-{right:.1f}"
            )


def test_the_width_table_is_the_fonts_and_a_long_line_is_wrapped_whole_inside_its_box() -> None:
    regular = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
    if not regular.is_file():
        pytest.skip("DejaVu Sans is not installed (fonts-dejavu-core): the table cannot be compared")
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "font_widths.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert width_pt("W", 10) == pytest.approx(9.888) and width_pt("i", 10) < width_pt("W", 10)
    assert width_pt("a", 10, bold=True) > width_pt("a", 10)
    long = "deep health checks: " + ", ".join(["InstanceStress", "InstanceConnectivity"] * 4)
    wrapped = wrap(long, 10)
    assert len(wrapped) == 5 and " ".join(wrapped) == long
    assert all(width_pt(line, 10) <= MAX_LINE_PT for line in wrapped)
    assert wrap(long[:20], 10) == [long[:20]]  # what fits is left as it is
    graph = _graph(
        {"Hp": {"Type": "AWS::SageMaker::Cluster", "Properties": {"ClusterName": long, "VpcConfig": {"Subnets": [{"Ref": "Private"}]}, "InstanceGroups": []}}}
    )  # fmt: skip
    dot = to_dot(graph)
    assert f"SageMaker HyperPod {long}" in dot  # in the tooltip, whole
    title = wrap(f"SageMaker HyperPod {long}", 10, bold=True)
    assert len(title) > 1 and all(f"<B>{line}</B>" in dot for line in title)  # in the box, wrapped
    svg = to_svg(dot)
    assert f'xlink:title="SageMaker HyperPod {long}&#10;orchestrator Slurm' in svg
    drawn = [text for _, _, texts in _boxes_and_texts(svg) for text, _, _, _ in texts]
    assert [line for line in drawn if line in title] == title
    for title, (left, right), texts in _boxes_and_texts(svg):
        for text, x, size, bold in texts:
            assert left <= x and x + width_pt(text, size, bold=bold) <= right, (title, text)


def _spills(svg: str) -> list[str]:
    return [
        f"{title}: {text}"
        for title, (left, right), texts in _boxes_and_texts(svg)
        for text, x, size, bold in texts
        if x < left or x + width_pt(text, size, bold=bold) > right
    ]


def test_boxes_sized_by_graphviz_alone_would_spill_in_dejavu_sans() -> None:
    """The measured widths are what keeps the text inside: without them Graphviz sizes for Helvetica."""
    dot = to_dot(_graph({**EKS, **PCLUSTER, **DATABASE}))
    assert _spills(to_svg(dot)) == []
    assert _spills(to_svg(re.sub(r' WIDTH="\d+"', "", dot)))


@pytest.fixture(scope="module")
def redrawn(environment_gates: EnvironmentGates) -> dict[str, tuple[str, str]]:
    """Every shipped environment drawn again (SVG, Markdown page), Graphviz started once for them all."""
    graphs = []
    for path in ENVIRONMENTS:
        stack, _ = environment_gates.get(path)
        graphs.append(source_of(stack, environment_gates.template(path)).graph())
    svgs = to_svgs([to_dot(graph) for graph in graphs])
    return {
        path.stem: (svg, render(graph, ".md", image_name=f"{path.stem}.svg"))
        for path, graph, svg in zip(ENVIRONMENTS, graphs, svgs, strict=True)
    }


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_docs_environments_is_what_make_diagrams_draws_today(
    redrawn: dict[str, tuple[str, str]], path: Path, checked_in: Callable[[str], str]
) -> None:
    svg, page = redrawn[path.stem]
    assert svg == checked_in(f"docs/environments/{path.stem}.svg"), (
        f"docs/environments/{path.stem}.svg is stale: run make diagrams"
    )
    assert page == checked_in(f"docs/environments/{path.stem}.md"), (
        f"docs/environments/{path.stem}.md is stale: run make diagrams"
    )


def test_the_cli_draws_an_environment_file_as_make_diagrams_does(tmp_path: Path) -> None:
    """The one synth here: the command line's path from a file, for the cheapest environment with roles."""
    target = tmp_path / "hyperpod-slurm.svg"
    status, text = run("diagram", str(ROOT / "environments" / "hyperpod-slurm.yaml"), "-o", str(target))
    assert status == 0 and f"wrote {target} and {target.with_suffix('.md')}" in text
    assert target.read_text() == (DOCS / "hyperpod-slurm.svg").read_text()
    assert "controller group controller-machine" in target.with_suffix(".md").read_text()


# --------------------------------------------------------------------------------------------------
# the model, on small templates


def _subnet(zone: Any, cidr: str) -> dict[str, Any]:
    return {
        "Type": "AWS::EC2::Subnet",
        "Properties": {"VpcId": {"Ref": "Vpc"}, "AvailabilityZone": zone, "CidrBlock": cidr},
    }


NETWORK: dict[str, Any] = {
    "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.1.0.0/16"}},
    "Igw": {"Type": "AWS::EC2::InternetGateway"},
    "Attach": {"Type": "AWS::EC2::VPCGatewayAttachment", "Properties": {"VpcId": {"Ref": "Vpc"}, "InternetGatewayId": {"Ref": "Igw"}}},
    "Public": _subnet({"Fn::Select": [0, {"Fn::GetAZs": ""}]}, "10.1.0.0/24"),
    "Private": _subnet({"Fn::Select": [0, {"Fn::GetAZs": ""}]}, "10.1.1.0/24"),
    "Isolated": _subnet("eu-west-1b", "10.1.2.0/24"),
    "PublicRt": {"Type": "AWS::EC2::RouteTable"},
    "PrivateRt": {"Type": "AWS::EC2::RouteTable"},
    "PublicAssoc": {"Type": "AWS::EC2::SubnetRouteTableAssociation", "Properties": {"SubnetId": {"Ref": "Public"}, "RouteTableId": {"Ref": "PublicRt"}}},
    "PrivateAssoc": {"Type": "AWS::EC2::SubnetRouteTableAssociation", "Properties": {"SubnetId": {"Ref": "Private"}, "RouteTableId": {"Ref": "PrivateRt"}}},
    "PublicRoute": {"Type": "AWS::EC2::Route", "Properties": {"RouteTableId": {"Ref": "PublicRt"}, "DestinationCidrBlock": "0.0.0.0/0", "GatewayId": {"Ref": "Igw"}}},
    "Nat": {"Type": "AWS::EC2::NatGateway", "Properties": {"SubnetId": {"Ref": "Public"}}},
    "PrivateRoute": {"Type": "AWS::EC2::Route", "Properties": {"RouteTableId": {"Ref": "PrivateRt"}, "DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": {"Ref": "Nat"}}},
    "S3": {"Type": "AWS::EC2::VPCEndpoint", "Properties": {"VpcId": {"Ref": "Vpc"}, "ServiceName": {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".s3"]]}, "RouteTableIds": [{"Ref": "PrivateRt"}]}},
    "Pg": {"Type": "AWS::EC2::PlacementGroup", "Properties": {"Strategy": "cluster"}},
    "Fs": {
        "Type": "AWS::FSx::FileSystem",
        "DeletionPolicy": "RetainExceptOnCreate",
        "Properties": {"FileSystemType": "LUSTRE", "StorageCapacity": 2400, "SubnetIds": [{"Ref": "Private"}], "LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125}},
    },
    "Logs": {"Type": "AWS::Logs::LogGroup", "DeletionPolicy": "Retain", "Properties": {}},
}  # fmt: skip


def _graph(extra: dict[str, Any] | None = None) -> EnvironmentGraph:
    return graph_from_template({"Resources": {**NETWORK, **(extra or {})}}, title="t")


def test_subnets_take_their_tier_from_their_default_route_and_their_zone_from_the_template() -> None:
    graph = _graph()
    tiers = {n.id: n.title for n in graph.of_kind(NodeKind.SUBNET)}
    assert tiers == {"Public": "public subnet", "Private": "private subnet", "Isolated": "isolated subnet"}
    assert {n.title for n in graph.of_kind(NodeKind.AVAILABILITY_ZONE)} == {"AZ #1", "eu-west-1b"}
    edges = {(e.source, e.target, e.kind) for e in graph.edges}
    assert ("Private", "Nat", EdgeKind.ROUTES_THROUGH) in edges
    assert ("Public", "Igw", EdgeKind.ROUTES_THROUGH) in edges
    assert ("S3", "Private", EdgeKind.SERVES) in edges and ("S3", "Public", EdgeKind.SERVES) not in edges
    assert graph.node("S3").title == "s3 endpoint" and graph.node("Vpc").details == (
        "10.1.0.0/16",
        "placement group (strategy cluster): no node group is placed in it",  # no group launches into Pg
    )
    assert graph.node("Fs").parent == "Private"  # drawn inside the subnet it lives in
    assert graph.ancestors("Private") == ["Vpc/AZ #1", "Vpc", "region"]
    assert graph.node("Nat").parent == "Public" and graph.node("Igw").parent == "Vpc"
    assert graph.node("S3").parent == "Vpc"  # a gateway endpoint has no interface in a subnet


def test_retained_resources_are_badged_where_they_live() -> None:
    graph = _graph()
    assert {n.id: n.retained_by for n in graph.retained} == {
        "Fs": "DeletionPolicy Retain",
        "Logs": "DeletionPolicy Retain",
    }
    assert graph.node("Fs").kind is NodeKind.FILE_SYSTEM
    logs = graph.node("Logs")  # belongs to no drawn resource: drawn in the region by what it is
    assert (logs.kind, logs.title, logs.details, logs.parent) == (
        NodeKind.RETAINED_RESOURCE,
        "log group",
        ("Logs",),
        "region",
    )
    assert graph.node("Fs").details == ("PERSISTENT_2", "2400 GiB", "125 MB/s/TiB")
    assert graph.node("Fs").badges == ("kept on delete",)


def test_a_retained_resource_that_belongs_to_a_drawn_one_is_badged_on_it() -> None:
    graph = _graph(
        {**DATABASE, "FsSecurityGroup": {"Type": "AWS::EC2::SecurityGroup", "DeletionPolicy": "Retain"}}
    )
    assert graph.node("Fs").kept_with == (("FsSecurityGroup", "security group"),)
    assert graph.node("Fs").badges == ("kept on delete", "also kept: security group")
    db = graph.node("Db")
    assert (db.kind, db.title, db.parent, db.retained_by) == (
        NodeKind.DATABASE,
        "Aurora MySQL",
        "Private",
        "DeletionPolicy Retain",
    )
    assert db.details == ("writer db.serverless", "0.5-4 ACU", "also in eu-west-1b")
    assert db.kept_with == (
        ("DbKey", "KMS key"),
        ("DbLogs", "log group"),
        ("DbSubnets", "DB subnet group"),
        ("DbWriter", "DB instance"),
    )
    assert "also kept: KMS key, log group, DB subnet group, DB instance" in db.badges
    assert set(graph.kept_on_delete()) == {
        "Fs",
        "Logs",
        "FsSecurityGroup",
        "Db",
        "DbKey",
        "DbLogs",
        "DbSubnets",
        "DbWriter",
    }
    assert "Fs" not in {n.id for n in graph.of_kind(NodeKind.RETAINED_RESOURCE)}
    assert {n.id for n in graph.of_kind(NodeKind.RETAINED_RESOURCE)} == {"Logs"}


DATABASE: dict[str, Any] = {
    "DbSubnets": {"Type": "AWS::RDS::DBSubnetGroup", "DeletionPolicy": "Retain", "Properties": {"SubnetIds": [{"Ref": "Private"}, {"Ref": "Isolated"}]}},
    "DbKey": {"Type": "AWS::KMS::Key", "DeletionPolicy": "Retain"},
    "DbLogs": {"Type": "AWS::Logs::LogGroup", "DeletionPolicy": "Retain"},
    "Db": {"Type": "AWS::RDS::DBCluster", "DeletionPolicy": "Retain", "Properties": {"Engine": "aurora-mysql", "DBSubnetGroupName": {"Ref": "DbSubnets"}, "ServerlessV2ScalingConfiguration": {"MinCapacity": 0.5, "MaxCapacity": 4}}},
    "DbWriter": {"Type": "AWS::RDS::DBInstance", "DeletionPolicy": "Retain", "Properties": {"DBClusterIdentifier": {"Ref": "Db"}, "DBInstanceClass": "db.serverless"}},
}  # fmt: skip


EKS: dict[str, Any] = {
    "Eks": {"Type": "AWS::EKS::Cluster", "Properties": {"Version": "1.33", "ResourcesVpcConfig": {"SubnetIds": [{"Ref": "Private"}], "EndpointPrivateAccess": True, "EndpointPublicAccess": False}}},
    "Lt": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": {
        "InstanceType": "p5.48xlarge",
        "Placement": {"GroupName": {"Fn::GetAtt": ["Pg", "GroupName"]}},
        "NetworkInterfaces": [{"InterfaceType": "efa"}] + [{"InterfaceType": "efa-only"}] * 3 + [{"InterfaceType": "interface"}],
    }}},
    "Ng": {"Type": "AWS::EKS::Nodegroup", "Properties": {"ClusterName": {"Ref": "Eks"}, "NodegroupName": "p5", "LaunchTemplate": {"Id": {"Ref": "Lt"}}, "Subnets": [{"Ref": "Private"}], "ScalingConfig": {"DesiredSize": 2, "MinSize": 1, "MaxSize": 4}, "CapacityType": "CAPACITY_BLOCK"}},
    "Chart": {"Type": "Custom::AWSCDK-EKS-HelmChart", "Properties": {"ClusterName": {"Ref": "Eks"}, "Chart": "gpu-operator", "Version": "v25", "Namespace": "gpu-operator"}},
    "Volume": {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {"ClusterName": {"Ref": "Eks"}, "Manifest": {"Fn::Join": ["", [
        '[{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv"},"spec":{"csi":{"volumeHandle":"', {"Ref": "Fs"},
        '"}}},{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"fsx","namespace":"ml"}}]',
    ]]}}},
    "Job": {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {"ClusterName": {"Ref": "Eks"}, "Manifest": '[{"kind":"MPIJob","metadata":{"name":"nccl","namespace":"default"}}]'}},
}  # fmt: skip


def test_an_eks_nodegroup_shows_type_count_and_the_efa_interfaces_of_its_launch_template() -> None:
    graph = _graph(EKS)
    group = graph.node("Ng")
    assert (group.instance_type, group.count, group.efa_interfaces) == ("p5.48xlarge", "2 (1-4)", 4)
    assert group.title == "nodegroup p5" and group.role is NodeRole.WORKER
    assert (group.parent, group.cluster) == ("Private", "Eks")  # drawn in its subnet, a member of its cluster
    assert "4 EFA interfaces per node" in group.details and "capacity: Capacity Block" in group.details
    edges = {(e.source, e.target, e.kind, e.label) for e in graph.edges}
    assert ("Ng", "Pg", EdgeKind.PLACED_IN, "") in edges
    assert ("Ng", "Fs", EdgeKind.MOUNTS, "PVC ml/fsx") in edges  # the pods on the nodes mount the claim
    assert not {e for e in edges if e[0] == "Eks/control-plane" and e[2] is EdgeKind.MOUNTS}
    assert ("Ng", "Eks/control-plane", EdgeKind.MANAGED_BY, "") in edges
    assert graph.node("Eks").parent == "region" and graph.node("Eks/control-plane").parent == "Eks"
    more = _graph({**EKS, **{f"Addon{i}": {"Type": "AWS::EKS::Addon", "Properties": {"ClusterName": {"Ref": "Eks"}, "AddonName": f"a{i}"}} for i in range(5)}})  # fmt: skip
    dot = to_dot(more)  # 7 add-ons and workloads in rows of 3: 2 + 2 + 0 invisible edges between neighbours
    assert dot.count("[style=invis];") == 4 and '"Addon0" -> "Addon1" [style=invis];' in dot
    assert graph.node("Eks/control-plane").details == ("private API endpoint",)
    assert graph.node("Chart").kind is NodeKind.ADDON and graph.node("Chart").parent == "Eks/add-ons/defaults"
    assert graph.node("Job").kind is NodeKind.WORKLOAD and graph.node("Job").title == "MPIJob default/nccl"
    assert "Volume" not in {n.id for n in graph.nodes}  # the claim is the mount edge, not a node


GPU_TAINT = [{"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NO_SCHEDULE"}]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
P5_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}]},
]}}}  # fmt: skip


def _chart(name: str, values: Any) -> dict[str, Any]:
    return {"Type": "Custom::AWSCDK-EKS-HelmChart", "Properties": {"ClusterName": {"Ref": "Eks"}, "Chart": name, "Values": json.dumps(values)}}  # fmt: skip


def _with_taints(template: dict[str, Any], taints: list[dict[str, str]]) -> dict[str, Any]:
    group = template["Ng"]
    return {**template, "Ng": {**group, "Properties": {**group["Properties"], "Taints": taints}}}


SCHEDULED: dict[str, Any] = {
    **{k: v for k, v in EKS.items() if k not in ("Chart", "Job")},
    "Ng": {**EKS["Ng"], "Properties": {**EKS["Ng"]["Properties"], "Labels": {"pool": "p5"}, "Taints": GPU_TAINT}},
    "Sys": {"Type": "AWS::EKS::Nodegroup", "Properties": {"ClusterName": {"Ref": "Eks"}, "InstanceTypes": ["t3.large"], "Labels": {"training-clusters/role": "system"}, "Subnets": [{"Ref": "Private"}], "ScalingConfig": {"DesiredSize": 2}}},
    "Kueue": _chart("kueue", {"controllerManager": {"nodeSelector": {"training-clusters/role": "system"}}}),
    "Plugin": _chart("nvidia-device-plugin", {"affinity": P5_AFFINITY, "tolerations": [GPU_TOLERATION]}),
    "Efa": _chart("aws-efa-k8s-device-plugin", {"supportedInstanceLabels": {"keys": ["node.kubernetes.io/instance-type"], "values": ["p5.48xlarge"]}, "tolerations": [GPU_TOLERATION]}),
    "Untolerated": _chart("plugin-without-toleration", {"affinity": P5_AFFINITY}),
    "WrongValue": _chart("wrong-value", {"affinity": P5_AFFINITY, "tolerations": [{"key": "nvidia.com/gpu", "value": "false", "effect": "NoSchedule"}]}),
    "WrongEffect": _chart("wrong-effect", {"affinity": P5_AFFINITY, "tolerations": [{**GPU_TOLERATION, "effect": "NoExecute"}]}),
    "Operator": _chart("gpu-operator", {"daemonsets": {"tolerations": [{"operator": "Exists"}]}}),
    "RunTimeLabel": _chart("mig-aware", {"nodeSelector": {"nvidia.com/mig.config.state": "success"}, "tolerations": [GPU_TOLERATION]}),
    "Prometheus": _chart("kube-prometheus-stack", {"grafana": {"enabled": True}}),
    "Dns": {"Type": "AWS::EKS::Addon", "Properties": {"ClusterName": {"Ref": "Eks"}, "AddonName": "coredns", "ConfigurationValues": '{"nodeSelector": {"training-clusters/role": "system"}}'}},
    "Identity": {"Type": "AWS::EKS::Addon", "Properties": {"ClusterName": {"Ref": "Eks"}, "AddonName": "eks-pod-identity-agent"}},
    "Mpi": {"Type": "Custom::ReleaseManifest", "Properties": {"ClusterName": {"Ref": "Eks"}, "ManifestUrl": "https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.7.0/deploy/v2beta1/mpi-operator.yaml"}},
    "Nccl": {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {"ClusterName": {"Ref": "Eks"}, "Manifest": json.dumps([
        {"kind": "MPIJob", "metadata": {"name": "nccl"}, "spec": {"mpiReplicaSpecs": {
            "Launcher": {"template": {"spec": {"containers": []}}},
            "Worker": {"template": {"spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}, "tolerations": [GPU_TOLERATION]}}},
        }}},
    ])}},
    "Flavor": {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {"ClusterName": {"Ref": "Eks"}, "Manifest": json.dumps([
        {"kind": "ResourceFlavor", "metadata": {"name": "p5"}, "spec": {"nodeLabels": {"pool": "p5"}, "tolerations": [GPU_TOLERATION]}},
    ])}},
}  # fmt: skip


def _set_of(graph: EnvironmentGraph, addon: str) -> Any:
    return graph.node(graph.node(addon).parent)


def test_add_ons_are_grouped_under_the_node_groups_their_values_let_them_schedule_on() -> None:
    graph = _graph(SCHEDULED)
    sets = {
        s.title: (
            sorted(c.id for c in graph.children(s.id)),
            sorted(e.target for e in graph.edges if e.source == s.id and e.kind is EdgeKind.RUNS_ON),
        )
        for s in graph.of_kind(NodeKind.ADDON_SET)
    }
    assert sets == {
        "on system nodegroup (t3.large)": (["Dns", "Kueue"], ["Sys"]),
        "on nodegroup p5 (p5.48xlarge)": (["Efa", "Nccl", "Plugin"], ["Ng"]),  # the MPIJob's workers
        "on every node group": (
            ["Operator", "RunTimeLabel"],
            ["Ng", "Sys"],
        ),  # a run-time label decides nothing
        "on no node group": (["Untolerated", "WrongEffect", "WrongValue"], []),
        "placed by their own defaults": (["Identity", "Mpi", "Prometheus"], []),
    }
    assert {graph.node(s.parent).id for s in graph.of_kind(NodeKind.ADDON_SET)} == {"Eks"}
    assert graph.node("Flavor").parent == "Eks"  # a ResourceFlavor runs no pod: not placed
    assert graph.node("Eks/add-ons/none").details == (
        "their node selectors or tolerations match none: pods stay pending",
    )
    dot = to_dot(graph)
    unschedulable = dot.split('subgraph "cluster_Eks/add-ons/none" {')[1].split("\n")[1]
    assert 'style="rounded,filled,bold"; color="#b0084d"' in unschedulable
    assert (
        '"Dns" -> "Sys" [style="dashed", color="#545b64", ltail="cluster_Eks/add-ons/Sys", constraint=false];'
        in dot
    )
    untainted = _graph(_with_taints(SCHEDULED, []))
    assert _set_of(untainted, "Untolerated").title == "on nodegroup p5 (p5.48xlarge)"  # the taint kept it off
    assert _set_of(untainted, "Kueue").title == "on system nodegroup (t3.large)"  # the selector still holds
    soft = _graph(_with_taints(SCHEDULED, [{**GPU_TAINT[0], "Effect": "PREFER_NO_SCHEDULE"}]))
    assert _set_of(soft, "WrongValue").title == "on nodegroup p5 (p5.48xlarge)"  # only discouraged there
    allow_list = {"keys": ["node.kubernetes.io/instance-type"], "values": ["p4d.24xlarge"]}
    stale = _chart(
        "aws-efa-k8s-device-plugin", {"supportedInstanceLabels": allow_list, "tolerations": [GPU_TOLERATION]}
    )
    assert (
        _set_of(_graph({**SCHEDULED, "Efa": stale}), "Efa").title == "on no node group"
    )  # its DaemonSet runs no pod


def test_a_hyperpod_instance_group_on_eks_offers_its_kubernetes_labels_and_taints() -> None:
    ml_affinity = json.loads(json.dumps(P5_AFFINITY).replace('"p5.48xlarge"', '"ml.p5.48xlarge"'))
    group = {"InstanceGroupName": "p5", "InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "KubernetesConfig": {"Labels": {"pool": "p5"}, "Taints": [{"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NoSchedule"}]}}  # fmt: skip
    hyperpod = {
        "Sys": SCHEDULED["Sys"],
        "Eks": EKS["Eks"],
        "Hp": {"Type": "AWS::SageMaker::Cluster", "Properties": {"Orchestrator": {"Eks": {"ClusterArn": {"Fn::GetAtt": ["Eks", "Arn"]}}}, "VpcConfig": {"Subnets": [{"Ref": "Private"}]}, "InstanceGroups": [group]}},
        "Plugin": _chart("nvidia-device-plugin", {"affinity": ml_affinity, "tolerations": [GPU_TOLERATION]}),
        "Untolerated": _chart("plugin-without-toleration", {"affinity": ml_affinity}),
        "Pooled": _chart("pool-selector", {"nodeSelector": {"pool": "p5"}, "tolerations": [GPU_TOLERATION]}),
    }  # fmt: skip
    graph = _graph(hyperpod)
    assert _set_of(graph, "Plugin").title == "on instance group p5 (ml.p5.48xlarge)"
    assert _set_of(graph, "Pooled").title == "on instance group p5 (ml.p5.48xlarge)"  # its Kubernetes label
    assert _set_of(graph, "Untolerated").title == "on no node group"  # its Kubernetes taint
    assert [e.target for e in graph.edges if e.source == "Eks/add-ons/Hp/group/p5"] == ["Hp/group/p5"]


def test_a_hyperpod_cluster_under_task_governance_lists_its_policy_and_each_teams_quota() -> None:
    arn = {"Fn::GetAtt": ["Hp", "ClusterArn"]}
    template = {
        "Hp": {"Type": "AWS::SageMaker::Cluster", "Properties": {"ClusterName": "c", "Orchestrator": {"Eks": {"ClusterArn": "x"}}, "InstanceGroups": []}},
        "Other": {"Type": "AWS::SageMaker::Cluster", "Properties": {"ClusterName": "o", "Orchestrator": {"Eks": {"ClusterArn": "x"}}, "InstanceGroups": []}},
        "Policy": {"Type": "AWS::SageMaker::ClusterSchedulerConfig", "Properties": {"ClusterArn": arn, "SchedulerConfig": {"PriorityClasses": [{"Name": "high", "Weight": 100}, {"Name": "low", "Weight": 1}], "FairShare": "Disabled"}}},
        "A": {"Type": "AWS::SageMaker::ComputeQuota", "Properties": {"ClusterArn": arn, "ComputeQuotaTarget": {"TeamName": "a"}, "ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "ml.p4d.24xlarge", "Count": 1}, {"InstanceType": "ml.g5.8xlarge", "Accelerators": 2, "VCpu": 8, "MemoryInGiB": 64}], "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 100}}}},
        "B": {"Type": "AWS::SageMaker::ComputeQuota", "Properties": {"ClusterArn": arn, "ComputeQuotaTarget": {"TeamName": "b"}, "ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "ml.p4d.24xlarge", "AcceleratorPartition": {"Type": "mig-3g.20gb", "Count": 4}}], "ResourceSharingConfig": {"Strategy": "Lend"}}}},
        "C": {"Type": "AWS::SageMaker::ComputeQuota", "Properties": {"ClusterArn": arn, "ComputeQuotaTarget": {"TeamName": "c"}, "ComputeQuotaConfig": {}}},
    }  # fmt: skip
    graph = _graph(template)
    assert graph.node("Hp").details == (
        "orchestrator EKS",
        "task governance: priority classes high 100, low 1; fair share disabled; idle sharing enabled",
        "team a: 1 \N{MULTIPLICATION SIGN} ml.p4d.24xlarge; 2 accelerators of ml.g5.8xlarge, 8 vCPUs of "
        "ml.g5.8xlarge, 64 GiB of ml.g5.8xlarge, LendAndBorrow (borrows up to 100 %)",
        "team b: 4 \N{MULTIPLICATION SIGN} mig-3g.20gb of ml.p4d.24xlarge, Lend",
        "team c: no quota, LendAndBorrow",
    )
    assert graph.node("Other").details == ("orchestrator EKS",)


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),  # any effect
        ({"operator": "Exists"}, True),  # every taint
        ({"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}, True),  # Equal is the default
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "false", "effect": "NoSchedule"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "aws.amazon.com/neuron", "operator": "Exists"}, False),
        ({"key": "", "operator": "Equal", "value": "true"}, False),
    ],
)
def test_a_toleration_tolerates_the_gpu_taint_as_kubernetes_decides(toleration: Any, tolerated: bool) -> None:
    group = NodeGroupLabels({}, (Taint("nvidia.com/gpu", "true", "NoSchedule"),))
    assert may_schedule(PodScope(".", tolerations=(toleration,)), group, set()) is tolerated


@pytest.mark.parametrize(
    ("operator", "values", "on_p5", "on_system"),
    [
        ("In", ["p5.48xlarge"], True, False),
        ("NotIn", ["p5.48xlarge"], False, True),
        ("Exists", [], True, True),
        ("DoesNotExist", [], False, False),
        ("Gt", ["1"], True, True),  # not read: held against no group
    ],
)
def test_an_affinity_expression_on_the_instance_type_label(
    operator: str, values: list[str], on_p5: bool, on_system: bool
) -> None:
    expression = {"key": INSTANCE_TYPE_LABEL, "operator": operator, "values": values}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}  # fmt: skip
    [scope] = scopes_in({"affinity": affinity})
    p5 = NodeGroupLabels({INSTANCE_TYPE_LABEL: ("p5.48xlarge",)}, ())
    system = NodeGroupLabels({INSTANCE_TYPE_LABEL: ("t3.large",)}, ())
    known = {INSTANCE_TYPE_LABEL}
    assert (may_schedule(scope, p5, known), may_schedule(scope, system, known)) == (on_p5, on_system)


def test_an_efa_node_group_has_an_efa_edge_to_itself_with_its_interfaces() -> None:
    graph = _graph(EKS)
    assert [(e.source, e.target, e.label) for e in graph.edges if e.kind is EdgeKind.EFA] == [
        ("Ng", "Ng", "EFA, 4 interfaces/node")
    ]
    dot = to_dot(graph)
    assert '"Ng" -> "Ng" [style="bold", color="#dd344c", label="EFA, 4 interfaces/node"' in dot
    assert "EFA between the nodes of a group" in dot.split('"legend"')[1].split("];")[0]
    assert '<==>|"EFA, 4 interfaces/node"|' in to_mermaid(graph)
    one = {"InstanceType": "p5.4xlarge", "NetworkInterfaces": [{"InterfaceType": "efa"}]}
    single = _graph(
        {**EKS, "Lt": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": one}}}
    )
    assert [e.label for e in single.edges if e.kind is EdgeKind.EFA] == ["EFA, 1 interface/node"]
    bare = {"InstanceType": "p5.48xlarge"}
    none = _graph(
        {**EKS, "Lt": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": bare}}}
    )
    assert not [e for e in none.edges if e.kind is EdgeKind.EFA]
    assert "EFA" not in to_dot(none).split('"legend"')[1].split("];")[0]


PCLUSTER: dict[str, Any] = {
    "Pc": {"Type": "Custom::PclusterCluster", "Properties": {"ClusterName": "c", "DeletionPolicy": "Delete", "ClusterConfiguration": {
        "Image": {"Os": "ubuntu2204"},
        "HeadNode": {"InstanceType": "c5.xlarge", "Networking": {"SubnetId": {"Ref": "Public"}}},
        "Scheduling": {"Scheduler": "slurm", "SlurmQueues": [{"Name": "q", "CapacityType": "SPOT", "Networking": {"SubnetIds": [{"Ref": "Private"}], "PlacementGroup": {"Enabled": True}}, "ComputeResources": [
            {"Name": "a", "InstanceType": "p4d.24xlarge", "MaxCount": 8, "Efa": {"Enabled": True, "GdrSupport": True}},
            {"Name": "b", "InstanceType": "c5n.18xlarge", "MinCount": 1, "MaxCount": 1, "Efa": {"Enabled": False}},
        ]}]},
        "SharedStorage": [{"MountDir": "/scratch", "Name": "s", "StorageType": "FsxLustre", "FsxLustreSettings": {"StorageCapacity": 1200, "DeploymentType": "SCRATCH_2", "DeletionPolicy": "Retain"}}],
    }}},
}  # fmt: skip


def test_a_parallelcluster_shows_its_head_node_queues_and_the_file_system_it_makes() -> None:
    graph = _graph(PCLUSTER)
    assert graph.node("Pc").retained_by is None and graph.node("Pc").details == ("slurm on ubuntu2204",)
    a, b = graph.node("Pc/queue/q/a"), graph.node("Pc/queue/q/b")
    assert (a.count, a.efa_interfaces, b.count, b.efa_interfaces) == (
        "0-8",
        lookup("p4d.24xlarge").max_efa_interfaces,
        "1",
        0,
    )
    assert "GPUDirect RDMA" in a.details and "placement group made by ParallelCluster" in a.details
    assert "capacity: spot" in a.details and a.capacity == "spot"
    head = graph.node("Pc/head-node")
    assert head.role is NodeRole.HEAD and head.count == "1"
    storage = graph.node("Pc/storage/0")
    assert (
        storage.kind is NodeKind.FILE_SYSTEM
        and storage.retained_by == "ParallelCluster DeletionPolicy Retain"
    )
    mounts = {
        (e.source, e.label) for e in graph.edges if e.kind is EdgeKind.MOUNTS and e.target == "Pc/storage/0"
    }
    assert mounts == {
        ("Pc/head-node", "/scratch"),
        ("Pc/queue/q/a", "/scratch"),
        ("Pc/queue/q/b", "/scratch"),
    }


HYPERPOD: dict[str, Any] = {
    "Bucket": {"Type": "AWS::S3::Bucket"},
    "Hp": {"Type": "AWS::SageMaker::Cluster", "Properties": {"ClusterName": "hp", "NodeRecovery": "Automatic", "VpcConfig": {"Subnets": [{"Ref": "Private"}]}, "InstanceGroups": [
        {"InstanceGroupName": name, "InstanceType": kind, "InstanceCount": count,
         "LifeCycleConfig": {"SourceS3Uri": {"Fn::Join": ["", ["s3://", {"Ref": "Bucket"}, "/lifecycle/hp/"]]}}}
        for name, kind, count in (("ctl", "ml.m5.xlarge", 1), ("gpu", "ml.p4d.24xlarge", 4))
    ]}},
    "Upload": {"Type": "Custom::CDKBucketDeployment", "Properties": {
        "DestinationBucketName": {"Ref": "Bucket"}, "DestinationBucketKeyPrefix": "lifecycle/hp/",
        "SourceObjectKeys": ["scripts.zip", "params.zip"], "SourceMarkers": [{}, {"m": {"Ref": "Fs"}}],
    }},
}  # fmt: skip
PARAMETERS = {
    "controller_group": "ctl",
    "worker_groups": [{"instance_group_name": "gpu", "partition_name": "train"}],
    "fsx_mount_dir": "/data",
}


def test_hyperpod_instance_groups_take_roles_and_the_mount_from_the_uploaded_parameters() -> None:
    graph = graph_from_template(
        {"Resources": {**NETWORK, **HYPERPOD}}, title="t", uploads={"params.zip": PARAMETERS}
    )
    ctl, gpu = graph.node("Hp/group/ctl"), graph.node("Hp/group/gpu")
    assert (ctl.role, ctl.title, gpu.role) == (NodeRole.CONTROLLER, "controller group ctl", NodeRole.WORKER)
    assert (
        gpu.efa_interfaces == lookup("p4d.24xlarge").max_efa_interfaces
        and "Slurm partition train" in gpu.details
    )
    assert {(e.source, e.label) for e in graph.edges if e.kind is EdgeKind.MOUNTS} == {
        ("Hp/group/ctl", "/data"),
        ("Hp/group/gpu", "/data"),
    }
    assert {(e.source, e.target, e.label) for e in graph.edges if e.kind is EdgeKind.FETCHES} == {
        ("Hp/group/ctl", "Bucket", "lifecycle scripts"),
        ("Hp/group/gpu", "Bucket", "lifecycle scripts"),
    }
    bucket = graph.node("Bucket")
    assert (bucket.kind, bucket.title, bucket.details, bucket.parent) == (
        NodeKind.BUCKET,
        "S3 bucket",
        ("lifecycle scripts",),
        "region",
    )
    assert (ctl.parent, graph.node("Hp").parent) == (
        "Hp",
        "Private",
    )  # drawn around its groups, in their subnet
    unknown = graph_from_template({"Resources": {**NETWORK, **HYPERPOD}}, title="t")
    assert (
        unknown.node("Hp/group/ctl").role is None
        and unknown.node("Hp/group/ctl").title == "instance group ctl"
    )
    assert {(e.source, e.label) for e in unknown.edges if e.kind is EdgeKind.MOUNTS} == {
        ("Hp/group/ctl", ""),  # the lifecycle upload names the file system: mounted, where is not known
        ("Hp/group/gpu", ""),
    }


def test_the_drawing_does_not_depend_on_the_order_of_the_template() -> None:
    resources = {**NETWORK, **EKS, **PCLUSTER}
    shuffled = list(resources.items())
    random.Random(7).shuffle(shuffled)
    first = graph_from_template({"Resources": resources}, title="t")
    second = graph_from_template({"Resources": dict(shuffled)}, title="t")
    assert first == second and to_dot(first) == to_dot(second) and to_mermaid(first) == to_mermaid(second)


def test_deploy_time_values_are_shown_as_such_and_dot_labels_are_escaped() -> None:
    template = {
        "Resources": {
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": {"Ref": "Cidr"}}},
            "Pc": {"Type": "Custom::PclusterCluster", "Properties": {"ClusterName": 'a"b<c>&', "ClusterConfiguration": {}}},
        }
    }  # fmt: skip
    graph = graph_from_template(template, title='x"y')
    assert graph.node("Vpc").details == ("(deploy time)",)
    dot = to_dot(graph)
    assert 'digraph "x\\"y"' in dot and "a&quot;b&lt;c&gt;&amp;" in dot
    assert "a#quot;b#lt;c#gt;#amp;" in to_mermaid(graph)


def test_graphviz_lays_out_the_dot_and_refuses_what_is_not_dot() -> None:
    svg = to_svg(to_dot(_graph()))
    assert svg.startswith("<?xml") and "<svg" in svg and "10.1.0.0/16" in svg
    both = to_svgs([to_dot(_graph()), "digraph { b }"])
    assert both[0] == svg and both[1].startswith("<?xml") and "<title>b</title>" in both[1]
    with pytest.raises(ConfigurationError, match=r"invalid DOT \(graph 1\)"):
        to_svgs(["digraph { a }", "digraph {"])
    with pytest.raises(ConfigurationError, match="Graphviz could not draw it: invalid DOT"):
        to_svg("digraph { a -> ")
    with pytest.raises(ConfigurationError, match="Graphviz could not draw it"):
        to_svg("digraph {}", node="false")


def _png_size(png: bytes) -> tuple[int, int]:
    """Width and height from the PNG's IHDR chunk, after checking the signature and the chunk's place."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", png[:8]
    length, kind, width, height = struct.unpack(">I4sII", png[8:24])
    assert (length, kind) == (13, b"IHDR")
    return width, height


def test_png_is_the_drawing_rasterized_the_same_every_time() -> None:
    first = to_png(to_dot(_graph()))
    width, height = _png_size(first)
    assert width == PNG_WIDTH_PX and height > 0
    assert to_png(to_dot(_graph())) == first
    other = to_png("digraph { a -> b }")
    assert _png_size(other)[0] == PNG_WIDTH_PX and other != first
    with pytest.raises(ConfigurationError, match="Graphviz could not draw it: invalid DOT"):
        to_png("digraph { a -> ")
    with pytest.raises(ConfigurationError, match="a PNG is not text"):
        render(_graph(), ".png")


def test_the_markdown_page_shows_the_svg_the_flowchart_and_what_is_kept() -> None:
    page = to_markdown(_graph(), image_name="t.svg")
    assert "![t](t.svg)" in page and "```mermaid\nflowchart LR\n" in page
    assert "- Logs: DeletionPolicy Retain\n" in page and "- Fs: DeletionPolicy Retain\n" in page
    assert "also kept when the stack is deleted" not in page  # no column of its own: badged where it lives
    assert "classDef retained" in page and ":::retained" in page


@pytest.mark.parametrize("name", ["@hpcc-js/wasm-graphviz", "@resvg/resvg-js"])
def test_graphviz_and_resvg_are_pinned_next_to_the_cdk_cli_and_the_script_ships_in_the_wheel(
    name: str,
) -> None:
    package = json.loads((ROOT / "package.json").read_text())["devDependencies"]
    lock = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", package[name])
    assert lock[f"node_modules/{name}"]["version"] == package[name]
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert {"diagram/graphviz.mjs", "diagram/font_widths.json"} <= set(data["training_clusters"])
    assert (ROOT / "training_clusters" / "diagram" / "graphviz.mjs").is_file()


# --------------------------------------------------------------------------------------------------
# the command line, on a hand-made cloud assembly


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = cli.main(list(argv), stdout=out)
    return status, out.getvalue()


@pytest.fixture
def assembly(tmp_path: Path) -> Path:
    """A cloud assembly as ``cdk synth`` leaves it: staged asset folders hold the lifecycle settings files."""
    directory = tmp_path / "cdk.out"
    (directory / "asset.abc").mkdir(parents=True)
    (directory / "asset.def").mkdir(parents=True)
    roles = {key: value for key, value in PARAMETERS.items() if key != "fsx_mount_dir"}
    parameters = json.dumps(roles).replace("{", '{"fsx_dns_name": <<marker:0xbaba:0>>, ', 1)
    (directory / "asset.abc" / "provisioning_parameters.json").write_text(parameters)
    (directory / "asset.def" / "training_clusters.json").write_text(json.dumps({"fsx_mount_dir": "/data"}))
    (directory / "hp.template.json").write_text(json.dumps({"Resources": {**NETWORK, **HYPERPOD}}))
    (directory / "other.template.json").write_text(json.dumps({"Resources": NETWORK}))
    assets = {
        "files": {
            "abc": {"source": {"path": "asset.abc"}, "destinations": {"d": {"objectKey": "params.zip"}}},
            "def": {"source": {"path": "asset.def"}, "destinations": {"d": {"objectKey": "scripts.zip"}}},
        }
    }
    (directory / "hp.assets.json").write_text(json.dumps(assets))
    manifest = {
        "artifacts": {
            "hp.assets": {"type": "cdk:asset-manifest", "properties": {"file": "hp.assets.json"}},
            "hp": {
                "type": "aws:cloudformation:stack",
                "properties": {"templateFile": "hp.template.json", "stackName": "my-hyperpod"},
                "dependencies": ["hp.assets"],
            },
            "other": {
                "type": "aws:cloudformation:stack",
                "properties": {"templateFile": "other.template.json"},
            },
        }
    }
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


def test_a_stack_of_a_users_assembly_is_drawn_with_its_uploaded_parameters(
    assembly: Path, tmp_path: Path
) -> None:
    source = read_stack(assembly, "my-hyperpod")
    assert isinstance(source, StackSource) and source.uploads["params.zip"]["controller_group"] == "ctl"
    target = tmp_path / "hp.svg"
    status, text = run("diagram", "--assembly", str(assembly), "--stack", "my-hyperpod", "-o", str(target))
    assert status == 0 and "my-hyperpod" in text and "2 kept on delete" in text
    assert "controller group ctl" in target.read_text() and "mounts /data" in target.read_text()
    assert target.with_suffix(".md").is_file()
    status, svg = run("diagram", "--assembly", str(assembly), "--stack", "other")
    assert status == 0 and svg.startswith("<?xml")
    status, document = run(
        "--output",
        "json",
        "diagram",
        "--assembly",
        str(assembly),
        "--stack",
        "my-hyperpod",
        "-o",
        str(tmp_path / "hp.dot"),
    )
    summary = json.loads(document)
    assert status == 0 and summary["files"] == [str(tmp_path / "hp.dot")]
    assert summary["nodes"]["node-group"] == 2 and (tmp_path / "hp.dot").read_text().startswith(
        'digraph "my-hyperpod"'
    )


def test_the_cli_writes_a_png_of_each_stack_with_its_markdown_page(assembly: Path, tmp_path: Path) -> None:
    pngs = {}
    for stack in ("my-hyperpod", "other"):
        target = tmp_path / f"{stack}.png"
        status, text = run("diagram", "--assembly", str(assembly), "--stack", stack, "-o", str(target))
        assert status == 0 and f"wrote {target} and {target.with_suffix('.md')}" in text
        assert f"![{stack}]({stack}.png)" in target.with_suffix(".md").read_text()
        pngs[stack] = target.read_bytes()
        assert _png_size(pngs[stack])[0] == PNG_WIDTH_PX
    assert pngs["my-hyperpod"] != pngs["other"]
    again = tmp_path / "again.png"
    assert run("diagram", "--assembly", str(assembly), "--stack", "other", "-o", str(again))[0] == 0
    assert again.read_bytes() == pngs["other"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["{tmp}/missing.yaml"], "missing.yaml': no such file"),
        (["{tmp}"], "is a directory; give a file"),
        (["--assembly", "{tmp}/nowhere"], "nowhere': no such directory"),
        (["--assembly", "{assembly}/manifest.json"], "manifest.json' is a file; give a directory"),
        (["--assembly", "{tmp}"], "not a cloud assembly (no manifest.json)"),
        (["--assembly", "{assembly}"], "holds 2 stacks (my-hyperpod, other); choose one with --stack"),
        (["--assembly", "{assembly}", "--stack", "nope"], "no stack 'nope'; stacks: my-hyperpod, other"),
        (
            ["{assembly}/manifest.json", "--assembly", "{assembly}"],
            "give an environment file or --assembly, not both",
        ),
        (["--stack", "s"], "--stack chooses a stack of --assembly"),
        ([], "give an environment file, or --assembly"),
        (
            ["--assembly", "{assembly}", "--stack", "other", "-o", "{tmp}/no/such/out.png"],
            "/no/such' does not exist; create it first",
        ),
        (
            ["--assembly", "{assembly}", "--stack", "other", "-o", "{tmp}/folder.png"],
            "folder.png' is a directory; give a file name to write",
        ),
        (
            ["--assembly", "{assembly}", "--stack", "other", "-o", "{tmp}/out.pdf"],
            "unsupported diagram format '.pdf'",
        ),
        (
            ["--assembly", "{assembly}", "--stack", "other", "-o", "{tmp}/no/such/out.svg"],
            "/no/such' does not exist; create it first",
        ),
        (
            ["--assembly", "{assembly}", "--stack", "other", "-o", "{assembly}/manifest.json/out.svg"],
            "manifest.json' is a file, not a directory",
        ),
        (
            ["--assembly", "{assembly}", "--stack", "other", "-o", "{tmp}/folder.svg"],
            "folder.svg' is a directory; give a file name to write",
        ),
    ],
)
def test_path_and_usage_errors_are_one_line_and_exit_2(
    arguments: list[str], message: str, assembly: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "folder.svg").mkdir()
    (tmp_path / "folder.png").mkdir()
    argv = [a.format(tmp=tmp_path, assembly=assembly) for a in arguments]
    status, text = run("diagram", *argv)
    err = unwrapped(capsys.readouterr().err)
    assert status == 2 and text == ""
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, err


# --------------------------------------------------------------------------------------------------
# a hostile or broken cloud assembly: one line naming the file, exit 2


def _edit_manifest(directory: Path, edit: Any) -> None:
    manifest = json.loads((directory / "manifest.json").read_text())
    edit(manifest)
    (directory / "manifest.json").write_text(json.dumps(manifest))


def _replace(path: Path, by: Any) -> None:
    path.unlink()
    by(path)


BROKEN_ASSEMBLIES: dict[str, tuple[Any, str]] = {
    "manifest-not-json": (
        lambda d: (d / "manifest.json").write_text("{not json"),
        "manifest.json: not valid JSON: Expecting property name enclosed in double quotes (line 1, column 2)",
    ),
    "manifest-a-list": (
        lambda d: (d / "manifest.json").write_text("[1, 2]"),
        "manifest.json: must be a JSON object (a cloud assembly manifest), got list",
    ),
    "artifacts-a-list": (
        lambda d: (d / "manifest.json").write_text('{"artifacts": [1]}'),
        "manifest.json: artifacts: must be a JSON object, got list",
    ),
    "artifact-a-number": (
        lambda d: _edit_manifest(d, lambda m: m["artifacts"].update(other=5)),
        "manifest.json: artifacts.other: must be a JSON object, got int",
    ),
    "no-template-file": (
        lambda d: _edit_manifest(d, lambda m: m["artifacts"]["other"]["properties"].pop("templateFile")),
        "manifest.json: artifacts.other.properties.templateFile: must name a file in the assembly, got None",
    ),
    "template-outside": (
        lambda d: _edit_manifest(
            d, lambda m: m["artifacts"]["other"]["properties"].update(templateFile="../../etc/passwd")
        ),
        "artifacts.other.properties.templateFile: must name a file in the assembly, got '../../etc/passwd'",
    ),
    "nested-assembly-is-itself": (
        lambda d: _edit_manifest(
            d,
            lambda m: m["artifacts"].update(
                nested={"type": "cdk:cloud-assembly", "properties": {"directoryName": "."}}
            ),
        ),
        "artifacts.nested.properties.directoryName: must name a file in the assembly, got '.'",
    ),
    "template-dev-zero": (
        lambda d: _replace(d / "other.template.json", lambda p: p.symlink_to("/dev/zero")),
        "other.template.json: is not a regular file",
    ),
    "template-loops": (
        lambda d: _replace(d / "other.template.json", lambda p: p.symlink_to(p)),
        "other.template.json: is a symbolic link that loops",
    ),
    "template-a-list": (
        lambda d: (d / "other.template.json").write_text("[]"),
        "other.template.json: must be a JSON object (a CloudFormation template), got list",
    ),
    "template-nested-too-deeply": (
        lambda d: (d / "other.template.json").write_text("[" * 100_000 + "]" * 100_000),
        "other.template.json: not valid JSON: nested too deeply",
    ),
    "asset-manifest-dev-zero": (
        lambda d: _replace(d / "hp.assets.json", lambda p: p.symlink_to("/dev/zero")),
        "hp.assets.json: is not a regular file",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_ASSEMBLIES))
def test_a_broken_assembly_is_one_line_naming_the_file(
    case: str, assembly: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    breaking, message = BROKEN_ASSEMBLIES[case]
    breaking(assembly)
    status, text = run(
        "diagram", "--assembly", str(assembly), "--stack", "other", "-o", str(tmp_path / "x.svg")
    )
    err = unwrapped(capsys.readouterr().err)
    assert (status, text) == (2, "")
    assert err.startswith("error: ") and err.count("\n") == 1 and len(err) < 1024, err[:2000]
    assert message in err
    assert not (tmp_path / "x.svg").exists()


def test_a_template_whose_resources_are_not_objects_draws_what_is(assembly: Path, tmp_path: Path) -> None:
    (assembly / "other.template.json").write_text(json.dumps({"Resources": {**NETWORK, "A": 1, "B": [2]}}))
    target = tmp_path / "x.dot"
    status, _ = run("diagram", "--assembly", str(assembly), "--stack", "other", "-o", str(target))
    assert status == 0 and target.read_text().startswith('digraph "other"')
    assert (
        graph_from_template({"Resources": {"A": 1}}, title="t").nodes
        == graph_from_template({"Resources": {}}, title="t").nodes
    )
    assert retained_logical_ids({"Resources": {"A": 1, "B": "Retain"}}) == set()


@pytest.mark.parametrize(
    "name", [{"Fn::Join": 5}, {"Fn::Join": ["", 5]}, {"Fn::Join": [1, ["a"]]}, {"Fn::Join": ["-"]}, ["x"], 7]
)
def test_a_name_of_any_shape_draws_as_text_or_the_deploy_time_placeholder(name: object) -> None:
    """A hand-edited template's intrinsic of the wrong shape is drawn, never a traceback."""
    cluster = {"Type": "AWS::PCS::Cluster", "Properties": {"Name": name, "Size": "SMALL"}}
    graph = graph_from_template({"Resources": {"Pcs": cluster}}, title="t")
    [title] = [node.title for node in graph.nodes if node.id == "Pcs"]
    assert title.startswith("AWS PCS ") and "Fn::Join" not in title


@pytest.mark.parametrize("under", ["", "sub"])
def test_make_diagrams_into_a_file_is_one_line(
    under: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from training_clusters.diagram.__main__ import main

    afile = tmp_path / "afile"
    afile.write_text("not a directory\n")
    assert main([str(afile / under)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {afile}") and err.count("\n") == 1, err
    assert "not a directory" in err
