"""What a synthesized template builds, as a graph of typed nodes and edges (pure Python, no CDK).

:func:`graph_from_template` reads a CloudFormation template (the JSON ``cdk synth`` writes) and returns an
:class:`EnvironmentGraph`: the VPC with its availability zones and subnets, NAT gateways, the internet
gateway and VPC endpoints, placement groups, file systems, clusters (EKS, ParallelCluster, HyperPod, AWS PCS) with
their node groups and add-ons, and every resource kept when the stack is deleted. The renderers
(:mod:`.dot`, :mod:`.mermaid`) only draw what this module found, so the picture cannot drift from what
deploys.

>>> template = {"Resources": {"Pg": {"Type": "AWS::EC2::PlacementGroup", "Properties": {"Strategy": "cluster"}}}}
>>> graph = graph_from_template(template, title="example")
>>> [(n.kind.value, n.title, n.details) for n in graph.nodes]
[('region', 'AWS Region', ('placement group (strategy cluster): no node group is placed in it',))]

(A placement group no node group launches into is a line of its VPC's box, not a box joined to nothing.)

Values that are only known at deploy time (``Ref``, ``Fn::GetAtt`` ...) are shown as such, never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import yaml

from training_clusters.catalog import CATALOG, HYPERPOD_PREFIX
from training_clusters.diagram.scheduling import (
    INSTANCE_TYPE_LABEL,
    NodeGroupLabels,
    PodScope,
    Taint,
    may_schedule,
    scopes_in,
)

__all__ = [
    "Edge",
    "EdgeKind",
    "EnvironmentGraph",
    "Node",
    "NodeKind",
    "NodeRole",
    "graph_from_template",
    "retained_logical_ids",
]

LIFECYCLE_FILES = ("provisioning_parameters.json", "training_clusters.json")
"""The settings HyperPod lifecycle scripts read: node roles (HyperPod's reference keys) and the mount point."""


class NodeKind(StrEnum):
    """What a node of the drawing stands for."""

    STACK = "stack"
    """One stack of a multi-stack app, in the drawing of the whole app (:mod:`.app`)."""
    REGION = "region"
    """The AWS Region: the VPC, and the services outside it (clusters' control planes, buckets, log groups)."""
    VPC = "vpc"
    AVAILABILITY_ZONE = "availability-zone"
    SUBNET = "subnet"
    INTERNET_GATEWAY = "internet-gateway"
    NAT_GATEWAY = "nat-gateway"
    VPC_ENDPOINT = "vpc-endpoint"
    PLACEMENT_GROUP = "placement-group"
    FILE_SYSTEM = "file-system"
    DATABASE = "database"
    """An RDS or Aurora DB cluster (its writer instance in its details), in the subnets of its subnet group."""
    BUCKET = "bucket"
    """An S3 bucket the stack makes (outside the VPC)."""
    CLUSTER = "cluster"
    """EKS, ParallelCluster, HyperPod or AWS PCS. EKS is a box in the region around its control plane and
    add-ons (its nodegroups sit in their subnets); ParallelCluster, HyperPod and PCS are boxes around the node
    groups they manage (and PCS's controller), in the innermost subnet, zone or VPC box that holds them all."""
    CONTROL_PLANE = "control-plane"
    NODE_GROUP = "node-group"
    """Instances of one type: an EKS nodegroup, a Slurm head node or queue, a HyperPod instance group."""
    ADDON_SET = "add-on set"
    """The add-ons of a cluster (and the workloads that run pods) that may run on the same node groups (drawn as
    a box in the cluster's box, with a ``runs on`` edge to each of those groups)."""
    ADDON = "add-on"
    WORKLOAD = "workload"
    """Kubernetes objects the stack applies (an NCCL test job ...), other than the shared-storage claim."""
    RETAINED_RESOURCE = "retained-resource"
    """A resource kept on delete that is not drawn otherwise and belongs to no drawn resource (a log group)."""


#: Kinds drawn as a box around other nodes.
CONTAINER_KINDS = frozenset(
    {
        NodeKind.REGION,
        NodeKind.VPC,
        NodeKind.AVAILABILITY_ZONE,
        NodeKind.SUBNET,
        NodeKind.CLUSTER,
        NodeKind.ADDON_SET,
        NodeKind.STACK,
    }
)

REGION_ID = "region"
"""The id of the :attr:`NodeKind.REGION` node every drawing has."""


class NodeRole(StrEnum):
    """What a node group does in its cluster."""

    HEAD = "head node"
    CONTROLLER = "controller"
    LOGIN = "login"
    WORKER = "worker"
    COMPUTE = "compute"
    SYSTEM = "system"


class EdgeKind(StrEnum):
    """How two nodes are related."""

    RUNS_IN = "runs in"
    """A resource has network interfaces in a subnet."""
    ROUTES_THROUGH = "routes through"
    """A subnet's default route goes through a NAT or internet gateway."""
    SERVES = "serves"
    """A VPC endpoint is reachable from a subnet (its route table, or its interface)."""
    PLACED_IN = "placed in"
    """A node group launches into a placement group."""
    MOUNTS = "mounts"
    """A node group mounts a file system (the label says where: a mount point, or the claim its pods use)."""
    MANAGED_BY = "managed by"
    """A node group belongs to a cluster: its EKS control plane, HyperPod, the PCS controller, ParallelCluster."""
    DATABASE = "accounting"
    """A Slurm controller (HyperPod's controller group, ParallelCluster's head node) keeps accounting in a
    database (slurmdbd)."""
    FETCHES = "fetches"
    """A node group fetches its lifecycle scripts or custom actions from a bucket when it starts."""
    RUNS_ON = "runs on"
    """A set of add-ons may schedule its pods on a node group (:mod:`.scheduling`)."""
    IMPORTS = "imports"
    """A stack uses a resource of another stack (an export it imports, an SSM parameter it reads)."""
    EFA = "EFA"
    """The members of a node group with EFA interfaces talk to each other over them (an edge from the group to
    itself, labelled with the interfaces per node)."""


@dataclass(frozen=True)
class Node:
    """One thing in the drawing.

    ``logical_id`` is the template resource it comes from (``None`` for availability zones, which are not
    resources, and for parts of one resource such as a queue of a ParallelCluster). ``parent`` is where it is
    drawn: a node group, file system or database in (the first of) its subnets, or in its ParallelCluster,
    HyperPod or PCS cluster's box, which is in that subnet; EKS in the region. ``retained`` says the resource outlives the stack; ``retained_by`` says which policy keeps it;
    ``kept_with`` names the retained resources that belong to it and are not drawn on their own (its security
    group, log groups, keys), as (logical id, what it is).
    """

    id: str
    kind: NodeKind
    title: str
    details: tuple[str, ...] = ()
    parent: str | None = None
    logical_id: str | None = None
    retained_by: str | None = None
    role: NodeRole | None = None
    instance_type: str | None = None
    count: str | None = None
    efa_interfaces: int | None = None
    """EFA interfaces per instance (0: none); ``None`` when the template does not say and the type is not
    in the catalogue."""
    cluster: str | None = None
    """The cluster a node group belongs to (its id), wherever the group is drawn."""
    capacity: str | None = None
    """How a node group gets its instances: ``on-demand``, ``spot``, ``Capacity Block cr-...``, ``On-Demand
    Capacity Reservation cr-...``, ``training plan NAME`` (also one of its detail lines)."""
    gpu_sharing: str | None = None
    """How its GPUs are sliced or shared (a MIG layout, time-slicing or MPS replicas), also a detail line."""
    gpu_slices: int | None = None
    """What the GPUs of one node offer the scheduler once sliced (MIG devices, or replicas)."""
    kept_with: tuple[tuple[str, str], ...] = ()

    @property
    def retained(self) -> bool:
        return self.retained_by is not None

    @property
    def badges(self) -> tuple[str, ...]:
        """The retention notes: ``kept on delete`` and what else is kept with it."""
        notes = ["kept on delete"] if self.retained_by else []
        if self.kept_with:
            notes.append(
                f"{'also kept' if self.retained_by else 'kept on delete'}: {_kept_summary(self.kept_with)}"
            )
        return tuple(notes)

    @property
    def lines(self) -> tuple[str, ...]:
        """Title, details, and the retention notes: the text every renderer shows."""
        return (self.title, *self.details, *self.badges)


@dataclass(frozen=True, order=True)
class Edge:
    """``source`` relates to ``target`` as ``kind`` says; ``label`` adds what is specific (a mount point)."""

    source: str
    target: str
    kind: EdgeKind
    label: str = ""


@dataclass(frozen=True)
class EnvironmentGraph:
    """Nodes (parents before children, otherwise sorted by id) and edges (sorted)."""

    title: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]

    def node(self, node_id: str) -> Node:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def of_kind(self, kind: NodeKind) -> list[Node]:
        return [n for n in self.nodes if n.kind is kind]

    def children(self, parent: str | None) -> list[Node]:
        return [n for n in self.nodes if n.parent == parent]

    def is_box(self, node: Node) -> bool:
        """Whether ``node`` is drawn as a box around others (a container kind that has children)."""
        return node.kind in CONTAINER_KINDS and any(n.parent == node.id for n in self.nodes)

    def kind_counts(self) -> dict[NodeKind, int]:
        """How many nodes of each kind (kinds with none are left out)."""
        counts: dict[NodeKind, int] = {}
        for node in self.nodes:
            counts[node.kind] = counts.get(node.kind, 0) + 1
        return counts

    @property
    def retained(self) -> list[Node]:
        return [n for n in self.nodes if n.retained]

    def kept_on_delete(self) -> dict[str, str]:
        """Every resource kept on delete, drawn or folded into the node it belongs to: id -> the policy."""
        kept = {n.logical_id or n.id: n.retained_by for n in self.nodes if n.retained_by is not None}
        for node in self.nodes:
            kept.update({logical_id: "DeletionPolicy Retain" for logical_id, _ in node.kept_with})
        return dict(sorted(kept.items()))

    def subnets_of(self, node_id: str) -> list[str]:
        """The subnets ``node_id`` runs in (its ``runs in`` edges), in the template's order of them."""
        return [e.target for e in self.edges if e.source == node_id and e.kind is EdgeKind.RUNS_IN]

    def shown_by_its_box(self, edge: Edge) -> bool:
        """Whether ``edge`` is a ``managed by`` edge its source's box already shows (the group is drawn in its
        cluster's box, which holds the control plane it points at): renderers leave it out."""
        if edge.kind is not EdgeKind.MANAGED_BY:
            return False
        ancestors = self.ancestors(edge.source)
        target = self.node(edge.target)
        return target.id in ancestors or (
            target.kind is NodeKind.CONTROL_PLANE and target.parent in ancestors
        )

    def ancestors(self, node_id: str) -> list[str]:
        """The boxes ``node_id`` is drawn in, innermost first."""
        found: list[str] = []
        parent = self.node(node_id).parent
        while parent is not None:
            found.append(parent)
            parent = self.node(parent).parent
        return found


def graph_from_template(
    template: Mapping[str, Any],
    *,
    title: str,
    uploads: Mapping[str, Mapping[str, Any]] | None = None,
    borrowed: Mapping[str, str] | None = None,
) -> EnvironmentGraph:
    """Read what ``template`` builds.

    :param title: What the drawing is called (the stack name).
    :param uploads: The settings (:data:`LIFECYCLE_FILES`, merged) of each file asset the template uploads,
        keyed by its S3 object key (``<hash>.zip``), as :mod:`.sources` reads them. HyperPod instance groups
        take their role (controller, login, worker) and mount point from them. Default: none (roles and
        mount points are then not shown).
    :param borrowed: Resources of the template that are copies of another stack's (logical id -> that stack),
        put there by :func:`.app.with_imports` where the stack imports them: drawn with ``from stack NAME``,
        a borrowed subnet without a tier (its route table is the other stack's). Default: none.
    """
    return _GraphBuilder(template, uploads or {}, borrowed or {}).build(title)


def retained_logical_ids(template: Mapping[str, Any]) -> set[str]:
    """Resources whose ``DeletionPolicy`` is ``Retain`` (or ``RetainExceptOnCreate``)."""
    return {
        logical_id
        for logical_id, resource in _resources(template).items()
        if resource.get("DeletionPolicy") in _RETAIN_POLICIES
    }


# --------------------------------------------------------------------------------------------------
# reading template values

TIMES = "\N{MULTIPLICATION SIGN}"
"""Between an instance type and its count: ``p5.48xlarge x 2`` with the multiplication sign."""
_RETAIN_POLICIES = ("Retain", "RetainExceptOnCreate")
_DEPLOY_TIME = "(deploy time)"
_CDK_HASH = re.compile(r"[0-9A-F]{8}$")


def _resources(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The template's resources by logical id; what is not a JSON object is no resource and is passed over
    (CloudFormation would refuse the template)."""
    resources = template.get("Resources", {})
    if not isinstance(resources, dict):
        return {}
    return {logical_id: resource for logical_id, resource in resources.items() if isinstance(resource, dict)}


def _target(value: Any) -> str | None:
    """The logical id a ``Ref`` or ``Fn::GetAtt`` points at."""
    if isinstance(value, dict) and len(value) == 1:
        if "Ref" in value and isinstance(value["Ref"], str):
            return value["Ref"]
        attribute = value.get("Fn::GetAtt")
        if isinstance(attribute, list) and attribute and isinstance(attribute[0], str):
            return attribute[0]
        if isinstance(attribute, str):
            return attribute.split(".", 1)[0]
    return None


def _targets(value: Any) -> Iterator[str]:
    """Every logical id referenced anywhere inside ``value``."""
    target = _target(value)
    if target is not None:
        yield target
    elif isinstance(value, dict):
        for item in value.values():
            yield from _targets(item)
    elif isinstance(value, list):
        for item in value:
            yield from _targets(item)


def _literal(value: Any) -> str | None:
    """``value`` as text when the template holds it literally."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _text(value: Any, placeholder: str = _DEPLOY_TIME) -> str:
    """``value`` as text: literals as they are, ``Fn::Join`` with its tokens as ``placeholder``."""
    literal = _literal(value)
    if literal is not None:
        return literal
    join = _list(_dict(value).get("Fn::Join"))
    separator, parts = (join[0], join[1]) if len(join) == 2 else (None, None)
    if isinstance(separator, str) and isinstance(parts, list):
        return separator.join(_text(part, placeholder) for part in parts)
    return placeholder


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _readable(logical_id: str) -> str:
    """A CDK logical id without its hash suffix: ``SharedStorageA8297BFB`` -> ``SharedStorage``."""
    stripped = _CDK_HASH.sub("", logical_id)
    return stripped or logical_id


def _count(desired: Any, low: Any, high: Any) -> str:
    """``2`` when fixed, ``0-4`` for a range, ``2 (1-4)`` when a desired size sits inside a range."""
    low_text, high_text = _literal(low), _literal(high)
    desired_text = _literal(desired)
    if low_text is not None and high_text is not None and low_text != high_text:
        span = f"{low_text}-{high_text}"
        return f"{desired_text} ({span})" if desired_text is not None else span
    return desired_text or high_text or low_text or _DEPLOY_TIME


def _catalog_efa(instance_type: str | None) -> int | None:
    if instance_type is None:
        return None
    found = CATALOG.get(instance_type.removeprefix(HYPERPOD_PREFIX))
    return found.max_efa_interfaces if found is not None else None


def _instance_facts(instance_type: str | None) -> list[str]:
    """The accelerators of a catalogued type: ``8 x H100`` (multiplication sign)."""
    found = CATALOG.get((instance_type or "").removeprefix(HYPERPOD_PREFIX))
    if found is None or found.accelerators is None:
        return []
    return [f"{found.accelerators.count} {TIMES} {found.accelerators.model}"]


def _efa_line(efa: int | None) -> list[str]:
    if efa is None:
        return ["EFA: not in the catalogue"]
    if efa == 0:
        return []
    return [f"{efa} EFA interface{'s' if efa != 1 else ''} per node"]


def _group_details(instance_type: str | None, count: str, efa: int | None) -> list[str]:
    """The first lines of a node group's box: ``p5.48xlarge x 2``, its accelerators, its EFA interfaces."""
    return [
        f"{instance_type or _DEPLOY_TIME} {TIMES} {count}",
        *_instance_facts(instance_type),
        *_efa_line(efa),
    ]


def _efa_interfaces(launch_template_data: Mapping[str, Any]) -> int:
    """How many EFA (or EFA-only) interfaces a launch template gives each instance."""
    interfaces = _list(launch_template_data.get("NetworkInterfaces"))
    return sum(1 for i in interfaces if _dict(i).get("InterfaceType") in ("efa", "efa-only"))


#: EKS's spelling of taint effects (``AWS::EKS::Nodegroup`` ``Taints``) -> Kubernetes'.
_EKS_TAINT_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}


def _taint(value: Any, effects: Mapping[str, str] | None = None) -> Taint:
    """A taint as a template writes it (``Key``, ``Value``, ``Effect``); an effect not known is kept as it is."""
    taint = _dict(value)
    effect = _text(taint.get("Effect"), "NoSchedule")
    return Taint(
        _text(taint.get("Key"), ""), _text(taint.get("Value"), ""), (effects or {}).get(effect, effect)
    )


def _node_labels(
    labels: Mapping[str, Any], instance_types: list[str | None], taints: list[Taint]
) -> NodeGroupLabels:
    """A node group's labels (the template's, and the instance type label the kubelet sets) and taints."""
    found: dict[str, tuple[str, ...]] = {str(key): (_text(value),) for key, value in labels.items()}
    types = tuple(t for t in instance_types if t is not None)
    if types:
        found[INSTANCE_TYPE_LABEL] = types
    return NodeGroupLabels(found, tuple(taints))


def _json_values(value: Any) -> Any:
    """Helm values or EKS configuration values: an object, or JSON text of one (deploy-time values left as
    placeholders)."""
    if isinstance(value, dict):
        return value
    try:
        return json.loads(_text(value, "TOKEN")) if value is not None else None
    except ValueError:
        return None


def _set_order(key: tuple[str, tuple[str, ...] | None]) -> tuple[str, int, tuple[str, ...]]:
    """Sets of add-ons by cluster: those on some node groups, on none, then those placed by their defaults."""
    cluster, runs_on = key
    return cluster, 0 if runs_on else 1 if runs_on is not None else 2, runs_on or ()


ON_DEMAND = "on-demand"


def _capacity(market: Any, reservation: str | None = None) -> str:
    """How a group buys its instances, from its market (EKS ``CapacityType``, ParallelCluster ``CapacityType``,
    PCS ``PurchaseOption``) and the capacity reservation it targets: ``on-demand``, ``spot``, ``Capacity Block
    cr-...``, ``On-Demand Capacity Reservation cr-...``."""
    bought = (_literal(market) or "ONDEMAND").upper().replace("_", "").replace("-", "")
    if bought == "CAPACITYBLOCK":
        return f"Capacity Block {reservation}" if reservation else "Capacity Block"
    if bought == "SPOT":
        return "spot"
    if reservation:
        return f"On-Demand Capacity Reservation {reservation}"
    if bought == "ONDEMAND":
        return ON_DEMAND
    return bought.lower()


def _reservation(target: Any) -> str | None:
    """The reservation a ``CapacityReservationTarget`` names: its id, or its resource group's name."""
    target = _dict(target)
    if "CapacityReservationId" in target:
        return _text(target["CapacityReservationId"])
    if "CapacityReservationResourceGroupArn" in target:
        return "group " + _text(target["CapacityReservationResourceGroupArn"]).rsplit("/", 1)[-1]
    return None


def _launch_template_capacity(data: Mapping[str, Any], market: Any) -> str:
    """The capacity of a group launched from ``data`` (a launch template's data) in ``market``; a launch
    template's ``capacity-block`` market type makes a Capacity Block whatever ``market`` says."""
    reservation = _reservation(
        _dict(data.get("CapacityReservationSpecification")).get("CapacityReservationTarget")
    )
    if _dict(data.get("InstanceMarketOptions")).get("MarketType") == "capacity-block":
        market = "CAPACITY_BLOCK"
    return _capacity(market, reservation)


def _training_plan(arn: Any) -> str:
    """``training plan p5-plan, runs in the plan's reserved window`` (the window is the plan's, not the
    template's)."""
    name = _text(arn).rsplit("/", 1)[-1]
    return f"training plan {name}, runs in the plan's reserved window"


def _yaml(text: Any) -> dict[str, Any]:
    """A YAML document the template holds as text (a mig-parted or device-plugin configuration); ``{}`` when
    it is not one."""
    if not isinstance(text, str):
        return {}
    try:
        return _dict(yaml.safe_load(text))
    except yaml.YAMLError:
        return {}


def _gpu_count(instance_type: str | None) -> int:
    found = CATALOG.get((instance_type or "").removeprefix(HYPERPOD_PREFIX))
    return found.accelerators.count if found is not None and found.accelerators is not None else 0


def _mig(name: str, layout: Any, gpus: int) -> tuple[str, int | None]:
    """The MIG line of a group whose GPUs take the mig-parted layout ``name`` (``layout``: its entries, as
    the GPU operator's configuration writes them) and the slices one node yields."""
    if not isinstance(layout, list):
        return f"MIG {name} (the GPU operator's own layout)", None
    profiles: dict[str, int] = {}
    slices = 0
    for entry in layout:
        entry = _dict(entry)
        if entry.get("mig-enabled") is not True:
            continue
        devices = entry.get("devices")
        count = gpus if devices == "all" else len(devices) if isinstance(devices, list) else 0
        for profile, per_gpu in _dict(entry.get("mig-devices")).items():
            if isinstance(per_gpu, int):
                profiles[str(profile)] = profiles.get(str(profile), 0) + per_gpu
                slices += count * per_gpu
    per_gpu_text = " + ".join(f"{n} {TIMES} {profile}" for profile, n in profiles.items())
    return f"MIG {name}: {per_gpu_text} per GPU, {slices} slices per node", slices


def _sliced(node: Node, line: str, slices: int | None) -> Node:
    """``node`` with its GPU sharing ``line`` before its capacity line (after its GPUs and EFA)."""
    details = list(node.details)
    at = next((i for i, d in enumerate(details) if d.startswith("capacity: ")), len(details))
    details.insert(at, line)
    return replace(node, details=tuple(details), gpu_sharing=line, gpu_slices=slices)


# --------------------------------------------------------------------------------------------------
# the builder


@dataclass
class _GraphBuilder:
    template: Mapping[str, Any]
    uploads: Mapping[str, Mapping[str, Any]]
    borrowed: Mapping[str, str]
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: set[Edge] = field(default_factory=set)
    members: dict[str, list[str]] = field(default_factory=dict)
    """Each cluster's node groups (a HyperPod on EKS group is a member of the EKS cluster too)."""
    access_logs_of: dict[str, str] = field(default_factory=dict)
    """A bucket that receives another's access logs (not drawn) -> that bucket."""
    claims: list[tuple[str, str, str]] = field(default_factory=list)
    """(cluster, file system, claim) of each persistent volume claim a Kubernetes manifest makes."""
    scheduling: dict[str, NodeGroupLabels] = field(default_factory=dict)
    """The labels and taints of each Kubernetes node group (EKS nodegroups, HyperPod instance groups on EKS)."""
    addon_scopes: dict[str, list[PodScope] | None] = field(default_factory=dict)
    """How each add-on places its pods (``None``: its template sets nothing, so its own defaults do)."""
    around: list[str] = field(default_factory=list)
    """The clusters drawn as a box around their node groups, in the VPC (ParallelCluster, HyperPod, AWS PCS)."""

    def __post_init__(self) -> None:
        self.resources = _resources(self.template)
        self.retained = retained_logical_ids(self.template)

    # -- plumbing --------------------------------------------------------------------------------

    def of_type(self, *types: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for logical_id in sorted(self.resources):
            resource = self.resources[logical_id]
            if resource.get("Type") in types:
                yield logical_id, _dict(resource.get("Properties"))

    def type_of(self, logical_id: str | None) -> str | None:
        if logical_id is None or logical_id not in self.resources:
            return None
        kind = self.resources[logical_id].get("Type")
        return kind if isinstance(kind, str) else None

    def add(self, node: Node) -> Node:
        if node.logical_id in self.retained and node.retained_by is None:
            node = replace(node, retained_by="DeletionPolicy Retain")
        if node.logical_id is not None and node.logical_id in self.borrowed:
            node = replace(node, details=(*node.details, f"from stack {self.borrowed[node.logical_id]}"))
        self.nodes[node.id] = node
        return node

    def add_node_group(
        self,
        node_id: str,
        title: str,
        details: list[str],
        *,
        cluster: str | None,
        role: NodeRole | None,
        instance_type: str | None,
        count: str,
        efa: int | None,
        logical_id: str | None = None,
        subnets: list[str] = [],  # noqa: B006 (read, never changed)
        placement: str | None = None,
        capacity: str | None = None,
    ) -> None:
        """Add a node group in (the first of) its subnets, linked to its cluster, the subnets it runs in and the
        placement group it is placed in."""
        cluster = cluster if cluster in self.nodes else None
        self.add(
            Node(
                node_id,
                NodeKind.NODE_GROUP,
                title,
                (*details, *([f"capacity: {capacity}"] if capacity else []), *self.other_zones(subnets)),
                parent=self.home(subnets),
                logical_id=logical_id,
                role=role,
                instance_type=instance_type,
                count=count,
                efa_interfaces=efa,
                cluster=cluster,
                capacity=capacity,
            )
        )
        self.link(node_id, subnets, EdgeKind.RUNS_IN)
        self.link(node_id, [placement], EdgeKind.PLACED_IN)
        if efa:
            self.link(node_id, [node_id], EdgeKind.EFA, f"EFA, {efa} interface{'s' if efa != 1 else ''}/node")
        if cluster is not None:
            self.members.setdefault(cluster, []).append(node_id)
            anchor = f"{cluster}/control-plane"
            self.link(node_id, [anchor if anchor in self.nodes else cluster], EdgeKind.MANAGED_BY)

    def home(self, subnets: list[str]) -> str | None:
        """Where a resource in ``subnets`` is drawn: the first of them (``None``, the region, when none is
        drawn: an imported VPC)."""
        drawn = [s for s in subnets if s in self.nodes]
        return drawn[0] if drawn else None

    def other_zones(self, subnets: list[str]) -> list[str]:
        """A detail line naming the other availability zones a resource spans (it is drawn in the first)."""
        drawn = [s for s in subnets if s in self.nodes]
        if len(drawn) < 2:
            return []
        first = self.nodes[drawn[0]].parent
        zones = [
            self.nodes[z].title for s in drawn[1:] if (z := self.nodes[s].parent) in self.nodes and z != first
        ]
        return [f"also in {', '.join(dict.fromkeys(zones))}"] if zones else []

    def link(self, source: str, targets: Iterable[str | None], kind: EdgeKind, label: str = "") -> None:
        for target in targets:
            if target is not None and target in self.nodes and source in self.nodes:
                self.edges.add(Edge(source, target, kind, label))

    def of_kind_in(self, value: Any, resource_type: str) -> list[str]:
        """The resources of ``resource_type`` that ``value`` references."""
        return [t for t in _targets(value) if self.type_of(t) == resource_type]

    def subnet_targets(self, value: Any) -> list[str]:
        """The drawn subnets among the ids ``value`` references (imported subnets are not drawn)."""
        return [t for t in _targets(value) if self.type_of(t) == "AWS::EC2::Subnet"]

    def build(self, title: str) -> EnvironmentGraph:
        self.add(Node(REGION_ID, NodeKind.REGION, "AWS Region"))
        self.network()
        self.placement_groups()
        self.file_systems()
        self.databases()
        self.buckets()
        self.eks_clusters()
        self.parallelclusters()
        self.hyperpod_clusters()
        self.pcs_clusters()
        self.schedule_addons()
        self.gpu_sharing()
        self.claimed_mounts()
        self.mount_hints()
        self.retained_resources()
        self.settle()
        return EnvironmentGraph(title=title, nodes=self.ordered_nodes(), edges=tuple(sorted(self.edges)))

    def ordered_nodes(self) -> tuple[Node, ...]:
        ordered: list[Node] = []

        def visit(parent: str | None) -> None:
            for node in sorted(
                (n for n in self.nodes.values() if n.parent == parent), key=lambda n: (n.kind.value, n.id)
            ):
                ordered.append(node)
                visit(node.id)

        visit(None)
        return tuple(ordered)

    # -- network ---------------------------------------------------------------------------------

    def network(self) -> None:
        for vpc_id, props in self.of_type("AWS::EC2::VPC"):
            self.add(Node(vpc_id, NodeKind.VPC, "VPC", (_text(props.get("CidrBlock")),), logical_id=vpc_id))
        gateways = self.internet_gateways()
        tiers = self.subnet_tiers(gateways)
        for subnet_id, props in self.of_type("AWS::EC2::Subnet"):
            vpc = _target(props.get("VpcId"))
            zone = self.availability_zone(vpc if vpc in self.nodes else None, props.get("AvailabilityZone"))
            tier = tiers.get(subnet_id, ("isolated", None))[0]
            self.add(
                Node(
                    subnet_id,
                    NodeKind.SUBNET,
                    "subnet" if subnet_id in self.borrowed else f"{tier} subnet",
                    (_text(props.get("CidrBlock")),),
                    parent=zone,
                    logical_id=subnet_id,
                )
            )
        for nat_id, props in self.of_type("AWS::EC2::NatGateway"):
            subnet = _target(props.get("SubnetId"))
            parent = subnet if subnet in self.nodes else None
            private = props.get("ConnectivityType") == "private"
            detail = "private NAT" if private else "elastic IP"
            self.add(Node(nat_id, NodeKind.NAT_GATEWAY, "NAT gateway", (detail,), parent, nat_id))
            self.link(nat_id, [subnet], EdgeKind.RUNS_IN)
        for subnet_id, (_, via) in sorted(tiers.items()):
            if via is not None:
                self.link(subnet_id, [via], EdgeKind.ROUTES_THROUGH, "0.0.0.0/0")
        self.endpoints()

    def internet_gateways(self) -> set[str]:
        attached: dict[str, str] = {}
        for _, props in self.of_type("AWS::EC2::VPCGatewayAttachment"):
            gateway, vpc = _target(props.get("InternetGatewayId")), _target(props.get("VpcId"))
            if gateway is not None and vpc is not None:
                attached[gateway] = vpc
        gateways = set()
        for gateway_id, _ in self.of_type("AWS::EC2::InternetGateway"):
            gateways.add(gateway_id)
            vpc = attached.get(gateway_id)
            self.add(
                Node(
                    gateway_id,
                    NodeKind.INTERNET_GATEWAY,
                    "internet gateway",
                    parent=vpc if vpc in self.nodes else None,
                    logical_id=gateway_id,
                )
            )
        return gateways

    def subnet_tiers(self, internet_gateways: set[str]) -> dict[str, tuple[str, str | None]]:
        """Each subnet's tier (public, private, isolated) and the gateway its default route uses."""
        table_of = {subnet: table for table, subnet in self.route_table_associations()}
        default_route: dict[str, tuple[str, str]] = {}
        for _, props in self.of_type("AWS::EC2::Route"):
            if props.get("DestinationCidrBlock") != "0.0.0.0/0":
                continue
            table = _target(props.get("RouteTableId"))
            gateway, nat = _target(props.get("GatewayId")), _target(props.get("NatGatewayId"))
            if table is None:
                continue
            if gateway in internet_gateways and gateway is not None:
                default_route[table] = ("public", gateway)
            elif nat is not None:
                default_route[table] = ("private", nat)
        tiers: dict[str, tuple[str, str | None]] = {}
        for subnet_id, _ in self.of_type("AWS::EC2::Subnet"):
            table = table_of.get(subnet_id)
            tier, via = default_route.get(table or "", ("isolated", None))
            tiers[subnet_id] = (tier, via)
        return tiers

    def enclosing(self, subnets: list[str]) -> str | None:
        """The availability zone all ``subnets`` share, else their VPC (``None`` when not drawn)."""
        zones = {self.nodes[s].parent for s in subnets if s in self.nodes}
        if len(zones) == 1:
            return zones.pop()
        vpcs = {self.nodes[z].parent for z in zones if z is not None and z in self.nodes}
        return vpcs.pop() if len(vpcs) == 1 else None

    def availability_zone(self, vpc: str | None, value: Any) -> str:
        zone = _literal(value)
        if zone is None:
            select = _dict(value).get("Fn::Select")
            index = _literal(select[0]) if isinstance(select, list) and select else None
            zone = f"AZ #{int(index) + 1}" if index is not None and index.isdigit() else _DEPLOY_TIME
        zone_id = f"{vpc or 'imported-vpc'}/{zone}"
        if zone_id not in self.nodes:
            self.add(Node(zone_id, NodeKind.AVAILABILITY_ZONE, zone, parent=vpc))
        return zone_id

    def route_table_associations(self) -> Iterator[tuple[str, str]]:
        """(route table, subnet) of every association in the template."""
        for _, props in self.of_type("AWS::EC2::SubnetRouteTableAssociation"):
            subnet, table = _target(props.get("SubnetId")), _target(props.get("RouteTableId"))
            if subnet is not None and table is not None:
                yield table, subnet

    def endpoints(self) -> None:
        subnets_of_table: dict[str, list[str]] = {}
        for table, subnet in self.route_table_associations():
            subnets_of_table.setdefault(table, []).append(subnet)
        for endpoint_id, props in self.of_type("AWS::EC2::VPCEndpoint"):
            service = _text(props.get("ServiceName"), "{region}")
            match = re.fullmatch(r"com\.amazonaws\.[^.]+\.(.+)", service)
            name = match.group(1) if match else service
            kind = _literal(props.get("VpcEndpointType")) or "Gateway"
            vpc = _target(props.get("VpcId"))
            interfaces = self.subnet_targets(props.get("SubnetIds"))
            self.add(
                Node(
                    endpoint_id,
                    NodeKind.VPC_ENDPOINT,
                    f"{name} endpoint",
                    (kind.lower(), *self.other_zones(interfaces)),
                    parent=self.home(interfaces) or (vpc if vpc in self.nodes else None),
                    logical_id=endpoint_id,
                )
            )
            served = [
                s for table in _targets(props.get("RouteTableIds")) for s in subnets_of_table.get(table, [])
            ]
            served += self.subnet_targets(props.get("SubnetIds"))
            self.link(endpoint_id, served, EdgeKind.SERVES)

    # -- placement and storage -------------------------------------------------------------------

    def placement_groups(self) -> None:
        for group_id, props in self.of_type("AWS::EC2::PlacementGroup"):
            details = [f"strategy {_text(props.get('Strategy', 'cluster'))}"]
            if "PartitionCount" in props:
                details.append(f"{_text(props['PartitionCount'])} partitions")
            if "SpreadLevel" in props:
                details.append(f"spread level {_text(props['SpreadLevel'])}")
            self.add(
                Node(group_id, NodeKind.PLACEMENT_GROUP, "placement group", tuple(details), None, group_id)
            )

    def file_systems(self) -> None:
        for fs_id, props in self.of_type("AWS::FSx::FileSystem"):
            fs_type = _text(props.get("FileSystemType"))
            lustre = _dict(props.get("LustreConfiguration"))
            details = [f"{_text(props.get('StorageCapacity'))} GiB"]
            if lustre:
                details.insert(0, _text(lustre.get("DeploymentType", "SCRATCH_1")))
                if "PerUnitStorageThroughput" in lustre:
                    details.append(f"{_text(lustre['PerUnitStorageThroughput'])} MB/s/TiB")
            title = {"LUSTRE": "FSx for Lustre", "ONTAP": "FSx for ONTAP", "OPENZFS": "FSx for OpenZFS"}.get(
                fs_type, f"FSx ({fs_type})"
            )
            subnets = self.subnet_targets(props.get("SubnetIds"))
            details += self.other_zones(subnets)
            self.add(Node(fs_id, NodeKind.FILE_SYSTEM, title, tuple(details), self.home(subnets), fs_id))
            self.link(fs_id, subnets, EdgeKind.RUNS_IN)

    def mount_hints(self) -> None:
        """A file system no cluster mounts shows the mount point the stack's outputs suggest."""
        mounted = {e.target for e in self.edges if e.kind is EdgeKind.MOUNTS}
        for output in _dict(self.template.get("Outputs")).values():
            value = _dict(output).get("Value")
            text = _text(value, "")
            match = re.search(r" mounted at (\S+)$", text)
            targets = [t for t in _targets(value) if self.type_of(t) == "AWS::FSx::FileSystem"]
            for target in targets:
                if match and target not in mounted and target in self.nodes:
                    node = self.nodes[target]
                    self.nodes[target] = replace(node, details=(*node.details, f"mount {match.group(1)}"))
                    mounted.add(target)

    def databases(self) -> None:
        """RDS and Aurora DB clusters, drawn in (the first of) their subnet group's subnets."""
        writers: dict[str, list[str]] = {}
        for _, props in self.of_type("AWS::RDS::DBInstance"):
            cluster = _target(props.get("DBClusterIdentifier"))
            if cluster is not None:
                writers.setdefault(cluster, []).append(_text(props.get("DBInstanceClass")))
        for db_id, props in self.of_type("AWS::RDS::DBCluster"):
            group = _dict(self.resources.get(_target(props.get("DBSubnetGroupName")) or "", {}))
            subnets = self.subnet_targets(_dict(group.get("Properties")).get("SubnetIds"))
            engine = _text(props.get("Engine"))
            title = {"aurora-mysql": "Aurora MySQL", "aurora-postgresql": "Aurora PostgreSQL"}.get(
                engine, f"RDS {engine}"
            )
            details = [
                f"{'writer' if n == 0 else 'reader'} {kind}" for n, kind in enumerate(writers.get(db_id, []))
            ]
            scaling = _dict(props.get("ServerlessV2ScalingConfiguration"))
            if scaling:
                details.append(f"{_text(scaling.get('MinCapacity'))}-{_text(scaling.get('MaxCapacity'))} ACU")
            details += self.other_zones(subnets)
            self.add(Node(db_id, NodeKind.DATABASE, title, tuple(details), self.home(subnets), db_id))
            self.link(db_id, subnets, EdgeKind.RUNS_IN)

    def buckets(self) -> None:
        """S3 buckets, outside the VPC; a bucket that only receives another's access logs is folded into it."""
        logs_of: dict[str, str] = {}
        for bucket_id, props in self.of_type("AWS::S3::Bucket"):
            destination = _target(_dict(props.get("LoggingConfiguration")).get("DestinationBucketName"))
            if destination is not None and destination != bucket_id:
                logs_of[destination] = bucket_id
        for bucket_id, props in self.of_type("AWS::S3::Bucket"):
            if bucket_id in logs_of:
                self.access_logs_of[bucket_id] = logs_of[bucket_id]
                continue
            name = _literal(props.get("BucketName"))
            self.add(Node(bucket_id, NodeKind.BUCKET, "S3 bucket", (name,) if name else (), None, bucket_id))

    def claimed_mounts(self) -> None:
        """A persistent volume claim is mounted by the pods on a cluster's nodes: the file system is mounted
        from its worker node groups (all its node groups when it has only system ones), never its control
        plane."""
        for cluster, file_system, label in self.claims:
            members = self.members.get(cluster, [])
            workers = [m for m in members if self.nodes[m].role is not NodeRole.SYSTEM] or members
            for member in workers:
                self.link(member, [file_system], EdgeKind.MOUNTS, label)

    def settle(self) -> None:
        """A placement group in the availability zone of the groups placed in it (one no group is placed in is
        a line of its VPC's box, not a box joined to nothing); ParallelCluster, HyperPod and PCS clusters drawn
        around the groups they manage; what has no place in the VPC in the region."""
        for group_id in [n.id for n in self.nodes.values() if n.kind is NodeKind.PLACEMENT_GROUP]:
            placed = [e.source for e in self.edges if e.target == group_id and e.kind is EdgeKind.PLACED_IN]
            zones = {self.zone_of(p) for p in placed}
            if not placed:
                self.unplaced(self.nodes.pop(group_id))
            elif len(zones) == 1 and None not in zones:
                self.nodes[group_id] = replace(self.nodes[group_id], parent=zones.pop())
        for cluster_id in self.around:
            self.enclose(cluster_id)
        for bucket in [n for n in self.nodes.values() if n.kind is NodeKind.BUCKET]:
            uses = sorted(
                {e.label for e in self.edges if e.target == bucket.id and e.kind is EdgeKind.FETCHES}
            )
            self.nodes[bucket.id] = replace(bucket, details=(*bucket.details, *uses))
        for node_id, node in list(self.nodes.items()):
            if node.parent is None and node.kind is not NodeKind.REGION:
                self.nodes[node_id] = replace(node, parent=REGION_ID)

    def unplaced(self, group: Node) -> None:
        """Note a placement group no node group launches into on the VPC (the region when none is drawn)."""
        vpcs = [n for n in self.nodes.values() if n.kind is NodeKind.VPC]
        holder = vpcs[0] if len(vpcs) == 1 else self.nodes[REGION_ID]
        line = f"placement group ({', '.join(group.details)}): no node group is placed in it"
        self.nodes[holder.id] = replace(holder, details=(*holder.details, line))

    def enclose(self, cluster_id: str) -> None:
        """Draw a ParallelCluster, HyperPod or PCS cluster as a box around the node groups it manages, in the innermost box
        (subnet, zone, VPC) that holds all of them; a group then names its subnet unless it is the box's."""
        groups = [n for n in self.nodes.values() if n.kind is NodeKind.NODE_GROUP and n.cluster == cluster_id]
        homes = [g.parent for g in groups]
        if not groups or None in homes:
            return
        common = self.common_box([h for h in homes if h is not None])
        if common is None:
            return
        self.nodes[cluster_id] = replace(self.nodes[cluster_id], parent=common)
        for group in groups:
            details = group.details
            if group.parent != common and group.parent is not None:
                subnet = self.nodes[group.parent]
                zone = self.nodes[subnet.parent].title if subnet.parent in self.nodes else ""
                details = (*details, f"in {subnet.title} {' '.join(subnet.details)} ({zone})")
            self.nodes[group.id] = replace(group, parent=cluster_id, details=details)

    def common_box(self, homes: list[str]) -> str | None:
        """The innermost box that holds every one of ``homes`` (or is it)."""

        def chain(node_id: str) -> list[str]:
            found = [node_id]
            while (parent := self.nodes[found[-1]].parent) is not None:
                found.append(parent)
            return found

        chains = [chain(h) for h in homes]
        shared = [c for c in chains[0] if all(c in other for other in chains[1:])]
        return shared[0] if shared else None

    def zone_of(self, node_id: str) -> str | None:
        parent = self.nodes[node_id].parent
        while parent is not None and self.nodes[parent].kind is not NodeKind.AVAILABILITY_ZONE:
            parent = self.nodes[parent].parent
        return parent

    # -- EKS -------------------------------------------------------------------------------------

    def eks_clusters(self) -> None:
        for cluster_id, props in self.of_type("AWS::EKS::Cluster"):
            vpc_config = _dict(props.get("ResourcesVpcConfig"))
            name = _literal(props.get("Name"))
            self.add(
                Node(
                    cluster_id,
                    NodeKind.CLUSTER,
                    f"Amazon EKS {name}" if name else "Amazon EKS cluster",
                    (f"Kubernetes {_text(props.get('Version'))}",),
                    logical_id=cluster_id,
                )
            )
            public = vpc_config.get("EndpointPublicAccess", True) is not False
            private = vpc_config.get("EndpointPrivateAccess", False) is True
            endpoint = "public and private" if public and private else "public" if public else "private"
            details = [f"{endpoint} API endpoint"]
            if props.get("EncryptionConfig"):
                details.append("secrets encrypted with KMS")
            plane = f"{cluster_id}/control-plane"
            self.add(Node(plane, NodeKind.CONTROL_PLANE, "EKS control plane", tuple(details), cluster_id))
            self.link(plane, self.subnet_targets(vpc_config.get("SubnetIds")), EdgeKind.RUNS_IN)
        self.eks_nodegroups()
        self.eks_addons()
        self.kubernetes_manifests()

    def eks_nodegroups(self) -> None:
        for group_id, props in self.of_type("AWS::EKS::Nodegroup"):
            cluster = _target(props.get("ClusterName"))
            template = _dict(
                self.resources.get(_target(_dict(props.get("LaunchTemplate")).get("Id")) or "", {})
            )
            data = _dict(_dict(template.get("Properties")).get("LaunchTemplateData"))
            types = _list(props.get("InstanceTypes")) or [data.get("InstanceType")]
            instance_type = _literal(types[0]) if types else None
            efa = _efa_interfaces(data)
            scaling = _dict(props.get("ScalingConfig"))
            count = _count(scaling.get("DesiredSize"), scaling.get("MinSize"), scaling.get("MaxSize"))
            labels = _dict(props.get("Labels"))
            system = labels.get("training-clusters/role") == "system"
            name = _literal(props.get("NodegroupName")) or _literal(labels.get("training-clusters/nodegroup"))
            self.scheduling[group_id] = _node_labels(
                labels,
                [_literal(t) for t in types],
                [_taint(t, _EKS_TAINT_EFFECTS) for t in _list(props.get("Taints"))],
            )
            self.add_node_group(
                group_id,
                f"nodegroup {name}" if name else "system nodegroup" if system else "nodegroup",
                _group_details(instance_type, count, efa),
                cluster=cluster,
                logical_id=group_id,
                role=NodeRole.SYSTEM if system else NodeRole.WORKER,
                instance_type=instance_type,
                count=count,
                efa=efa,
                subnets=self.subnet_targets(props.get("Subnets")),
                placement=_target(_dict(data.get("Placement")).get("GroupName")),
                capacity=_launch_template_capacity(data, props.get("CapacityType")),
            )

    def eks_addons(self) -> None:
        for addon_id, props in self.of_type("AWS::EKS::Addon"):
            version = _literal(props.get("AddonVersion"))
            details = ("EKS add-on", *([version] if version else []))
            self.add_addon(addon_id, props, _text(props.get("AddonName")), details, "ConfigurationValues")
        for chart_id, props in self.of_type("Custom::AWSCDK-EKS-HelmChart"):
            chart = _text(props.get("Chart"))
            details = (
                f"Helm chart {_text(props.get('Version'), 'latest')}",
                f"namespace {_text(props.get('Namespace'), 'default')}",
            )
            self.add_addon(chart_id, props, chart, details, "Values")
        for manifest_id, props in self.of_type("Custom::ReleaseManifest"):
            url = _text(props.get("ManifestUrl"))
            match = re.search(r"githubusercontent\.com/[^/]+/([^/]+)/([^/]+)/", url)
            title = f"{match.group(1)} {match.group(2)}" if match else url.rsplit("/", 1)[-1]
            self.add_addon(manifest_id, props, title, ("release manifest",), None)

    def add_addon(
        self,
        addon_id: str,
        props: Mapping[str, Any],
        title: str,
        details: tuple[str, ...],
        values_property: str | None,
    ) -> None:
        """An add-on in its cluster's box, with the scheduling its ``values_property`` sets (Helm values, an EKS
        add-on's configuration values; a release manifest's pods are not in the template)."""
        cluster = _target(props.get("ClusterName"))
        parent = cluster if cluster in self.nodes else None
        self.add(Node(addon_id, NodeKind.ADDON, title, details, parent, addon_id))
        values = _json_values(props.get(values_property)) if values_property else None
        self.addon_scopes[addon_id] = scopes_in(values) or None

    def schedule_addons(self) -> None:
        """Each cluster's add-ons (and workloads that run pods) in boxes by the node groups they may run on (:mod:`.scheduling`), each box
        with a ``runs on`` edge to those groups: the system nodegroup, the GPU groups, every group, none (a
        selector that matches nothing: its pods stay pending), or the add-on's own defaults."""
        sets: dict[tuple[str, tuple[str, ...] | None], list[str]] = {}
        for addon_id, scopes in sorted(self.addon_scopes.items()):
            cluster = self.nodes[addon_id].parent
            groups = [m for m in self.members.get(cluster or "", []) if m in self.scheduling]
            if cluster is None or not groups:
                continue
            known = {INSTANCE_TYPE_LABEL, *(k for g in groups for k in self.scheduling[g].labels)}
            runs_on = (
                None
                if scopes is None
                else tuple(
                    g for g in groups if any(may_schedule(s, self.scheduling[g], known) for s in scopes)
                )
            )
            sets.setdefault((cluster, runs_on), []).append(addon_id)
        for (cluster, runs_on), addons in sorted(sets.items(), key=lambda item: _set_order(item[0])):
            groups = [m for m in self.members[cluster] if m in self.scheduling]
            title, details = self.addon_set_lines(groups, runs_on)
            set_id = f"{cluster}/add-ons/{'+'.join(runs_on) if runs_on else 'none' if runs_on == () else 'defaults'}"
            self.add(Node(set_id, NodeKind.ADDON_SET, title, details, cluster))
            for addon_id in addons:
                self.nodes[addon_id] = replace(self.nodes[addon_id], parent=set_id)
            self.link(set_id, runs_on or (), EdgeKind.RUNS_ON)

    def gpu_sharing(self) -> None:
        """How each Kubernetes GPU group's GPUs are offered: the MIG layout its ``nvidia.com/mig.config`` label
        names (read from the GPU operator's mig-parted configuration in the template) and the slices it yields,
        or the time-slicing or MPS replicas of the NVIDIA device plugin that runs on it."""
        layouts: dict[str, Any] = {}
        sharing: list[tuple[str, str, int]] = []
        for chart_id, props in self.of_type("Custom::AWSCDK-EKS-HelmChart"):
            values = _dict(_json_values(props.get("Values")))
            for text in _dict(_dict(_dict(values.get("migManager")).get("config")).get("data")).values():
                layouts.update(_dict(_yaml(text).get("mig-configs")))
            config = _dict(values.get("config"))
            chosen = _yaml(_dict(config.get("map")).get(_text(config.get("default"), "default")))
            for mode, name in (("timeSlicing", "time-slicing"), ("mps", "MPS")):
                for resource in _list(_dict(_dict(chosen.get("sharing")).get(mode)).get("resources")):
                    replicas = _dict(resource).get("replicas")
                    if isinstance(replicas, int) and chart_id in self.nodes:
                        sharing.append((chart_id, name, replicas))
        for group_id, labels in self.scheduling.items():
            node = self.nodes[group_id]
            gpus = _gpu_count(node.instance_type)
            layout = labels.labels.get("nvidia.com/mig.config", ("",))[0]
            if layout and gpus:
                self.nodes[group_id] = _sliced(node, *_mig(layout, layouts.get(layout), gpus))
                continue
            for chart_id, name, replicas in sharing:
                if gpus and self.runs_on(chart_id, group_id):
                    line = f"{name}: {replicas} replicas per GPU, {gpus * replicas} nvidia.com/gpu per node"
                    self.nodes[group_id] = _sliced(node, line, gpus * replicas)

    def runs_on(self, addon_id: str, group_id: str) -> bool:
        """Whether the add-on's pods may run on the group (its set's ``runs on`` edges; a set placed by the
        add-on's own defaults may run on any group of its cluster)."""
        addon_set = self.nodes[addon_id].parent or ""
        if addon_set.endswith("/add-ons/defaults"):
            return group_id in self.members.get(self.nodes[addon_set].parent or "", [])
        return Edge(addon_set, group_id, EdgeKind.RUNS_ON) in self.edges

    def addon_set_lines(
        self, groups: list[str], runs_on: tuple[str, ...] | None
    ) -> tuple[str, tuple[str, ...]]:
        if runs_on is None:
            return "placed by their own defaults", ("no node selector, affinity or toleration set",)
        if not runs_on:
            return "on no node group", ("their node selectors or tolerations match none: pods stay pending",)
        if len(runs_on) == len(groups) and len(groups) > 1:
            return "on every node group", ()
        return "on " + ", ".join(self.group_name(g) for g in runs_on), ()

    def group_name(self, group_id: str) -> str:
        """``nodegroup g5 (g5.8xlarge)``: a node group's title and instance type."""
        node = self.nodes[group_id]
        return f"{node.title} ({node.instance_type})" if node.instance_type else node.title

    def kubernetes_manifests(self) -> None:
        """A manifest that names a file system mounts it (a PersistentVolume and its claim); any other
        is a workload the stack applies, placed with the add-ons when it runs pods (a Job, a DaemonSet ...)."""
        for manifest_id, props in self.of_type("Custom::AWSCDK-EKS-KubernetesResource"):
            cluster = _target(props.get("ClusterName"))
            objects = _manifest_objects(props.get("Manifest"))
            file_systems = [
                t for t in _targets(props.get("Manifest")) if self.type_of(t) == "AWS::FSx::FileSystem"
            ]
            if file_systems and cluster in self.nodes:
                claims = [o for o in objects if o.get("kind") == "PersistentVolumeClaim"]
                label = ", ".join(f"PVC {_namespaced(c)}" for c in claims) or "persistent volume"
                self.claims += [(cluster, fs, label) for fs in file_systems]
                continue
            parent = cluster if cluster in self.nodes else None
            self.add(Node(manifest_id, NodeKind.WORKLOAD, *_workload_lines(objects), parent, manifest_id))
            running = [o for o in objects if o.get("kind") in _RUNNING_KINDS]
            if running:
                self.addon_scopes[manifest_id] = scopes_in(running) or None

    # -- ParallelCluster -------------------------------------------------------------------------

    def parallelclusters(self) -> None:
        for cluster_id, props in self.of_type("Custom::PclusterCluster"):
            config = _dict(props.get("ClusterConfiguration"))
            scheduling = _dict(config.get("Scheduling"))
            image = _dict(config.get("Image"))
            retained_by = (
                "ParallelCluster DeletionPolicy Retain" if props.get("DeletionPolicy") == "Retain" else None
            )
            self.add(
                Node(
                    cluster_id,
                    NodeKind.CLUSTER,
                    f"AWS ParallelCluster {_text(props.get('ClusterName'))}",
                    (f"{_text(scheduling.get('Scheduler'), 'slurm')} on {_text(image.get('Os'))}",),
                    logical_id=cluster_id,
                    retained_by=retained_by,
                )
            )
            self.around.append(cluster_id)
            head = _dict(config.get("HeadNode"))
            pools = [_dict(p) for p in _list(_dict(config.get("LoginNodes")).get("Pools"))]
            clients = [self.head_node(cluster_id, head, login=not pools)]
            logins = [self.login_pool(cluster_id, pool) for pool in pools]
            database = _dict(_dict(scheduling.get("SlurmSettings")).get("Database"))
            self.link(
                clients[0], self.of_kind_in(database, "AWS::RDS::DBCluster"), EdgeKind.DATABASE, "slurmdbd"
            )
            self.link(
                clients[0],
                self.of_kind_in(head.get("CustomActions"), "AWS::S3::Bucket"),
                EdgeKind.FETCHES,
                "custom actions",
            )
            for queue in _list(scheduling.get("SlurmQueues")):
                groups = self.slurm_queue(cluster_id, _dict(queue))
                buckets = self.of_kind_in(_dict(queue).get("CustomActions"), "AWS::S3::Bucket")
                for group in groups:
                    self.link(group, buckets, EdgeKind.FETCHES, "custom actions")
                clients += groups
            for pool, login in zip(pools, logins, strict=True):
                self.link(
                    login,
                    self.of_kind_in(pool.get("CustomActions"), "AWS::S3::Bucket"),
                    EdgeKind.FETCHES,
                    "custom actions",
                )
            clients += logins
            for index, storage in enumerate(_list(config.get("SharedStorage"))):
                self.shared_storage(cluster_id, index, _dict(storage), clients)

    def head_node(self, cluster_id: str, head: Mapping[str, Any], *, login: bool) -> str:
        """The head node: the Slurm controller, and where users log in unless the cluster has login pools."""
        node_id = f"{cluster_id}/head-node"
        instance_type = _literal(head.get("InstanceType"))
        self.add_node_group(
            node_id,
            "head node",
            [
                f"{instance_type or _DEPLOY_TIME} {TIMES} 1",
                "Slurm controller and login"
                if login
                else "Slurm controller (users log in on the login pool)",
            ],
            cluster=cluster_id,
            role=NodeRole.HEAD,
            instance_type=instance_type,
            count="1",
            efa=0,
            subnets=self.subnet_targets(_dict(head.get("Networking")).get("SubnetId")),
            capacity=ON_DEMAND,
        )
        return node_id

    def login_pool(self, cluster_id: str, pool: Mapping[str, Any]) -> str:
        """A pool of ParallelCluster login nodes (``LoginNodes`` ``Pools``): where users log in and submit."""
        name = _text(pool.get("Name"))
        node_id = f"{cluster_id}/login/{name}"
        instance_type = _literal(pool.get("InstanceType"))
        count = _count(pool.get("Count"), None, None)
        self.add_node_group(
            node_id,
            f"login pool {name}",
            [f"{instance_type or _DEPLOY_TIME} {TIMES} {count}", "Slurm login: users log in and submit here"],
            cluster=cluster_id,
            role=NodeRole.LOGIN,
            instance_type=instance_type,
            count=count,
            efa=0,
            subnets=self.subnet_targets(_dict(pool.get("Networking")).get("SubnetIds")),
            capacity=ON_DEMAND,
        )
        return node_id

    def slurm_queue(self, cluster_id: str, queue: Mapping[str, Any]) -> list[str]:
        name = _text(queue.get("Name"))
        networking = _dict(queue.get("Networking"))
        placement = _dict(networking.get("PlacementGroup"))
        placement_target = _target(placement.get("Name") or placement.get("Id"))
        managed_placement = placement.get("Enabled") is True and placement_target is None
        added = []
        for resource in _list(queue.get("ComputeResources")):
            resource = _dict(resource)
            node_id = f"{cluster_id}/queue/{name}/{_text(resource.get('Name'))}"
            instance_type = _literal(resource.get("InstanceType"))
            efa_settings = _dict(resource.get("Efa"))
            efa = _catalog_efa(instance_type) if efa_settings.get("Enabled") is True else 0
            count = _count(None, resource.get("MinCount", 0), resource.get("MaxCount", 10))
            details = _group_details(instance_type, count, efa)
            if efa_settings.get("GdrSupport") is True:
                details.append("GPUDirect RDMA")
            if managed_placement:
                details.append("placement group made by ParallelCluster")
            self.add_node_group(
                node_id,
                f"queue {name} / {_text(resource.get('Name'))}",
                details,
                cluster=cluster_id,
                role=NodeRole.COMPUTE,
                instance_type=instance_type,
                count=count,
                efa=efa,
                subnets=self.subnet_targets(networking.get("SubnetIds")),
                placement=placement_target if placement.get("Enabled", True) is not False else None,
                capacity=_capacity(
                    queue.get("CapacityType"),
                    _reservation(resource.get("CapacityReservationTarget"))
                    or _reservation(queue.get("CapacityReservationTarget")),
                ),
            )
            added.append(node_id)
        return added

    def shared_storage(
        self, cluster_id: str, index: int, storage: Mapping[str, Any], clients: list[str]
    ) -> None:
        mount = _text(storage.get("MountDir"))
        kind = _text(storage.get("StorageType"))
        settings = _dict(storage.get(f"{kind}Settings"))
        existing = [t for t in _targets(settings) if t in self.nodes]
        if existing:
            targets = existing
        else:
            node_id = f"{cluster_id}/storage/{index}"
            details = [_text(settings[key]) for key in ("DeploymentType",) if key in settings]
            if "StorageCapacity" in settings:
                details.append(f"{_text(settings['StorageCapacity'])} GiB")
            details.append("made by ParallelCluster")
            policy = _literal(settings.get("DeletionPolicy")) or "Delete"
            self.add(
                Node(
                    node_id,
                    NodeKind.FILE_SYSTEM,
                    {"FsxLustre": "FSx for Lustre"}.get(kind, kind),
                    tuple(details),
                    retained_by=f"ParallelCluster DeletionPolicy {policy}" if policy == "Retain" else None,
                )
            )
            targets = [node_id]
        for client in clients:
            self.link(client, targets, EdgeKind.MOUNTS, mount)

    # -- HyperPod --------------------------------------------------------------------------------

    def hyperpod_clusters(self) -> None:
        for cluster_id, props in self.of_type("AWS::SageMaker::Cluster"):
            orchestrator = "EKS" if "Eks" in _dict(props.get("Orchestrator")) else "Slurm"
            details = [f"orchestrator {orchestrator}"]
            if "NodeRecovery" in props:
                details.append(f"node recovery {_text(props['NodeRecovery']).lower()}")
            if _dict(props.get("AutoScaling")).get("Mode") == "Enable":
                # the groups' counts are where Karpenter starts them; their NodePools bound them
                details.append("Karpenter autoscaling: groups start at 0, NodePools set the most")
            self.add(
                Node(
                    cluster_id,
                    NodeKind.CLUSTER,
                    f"SageMaker HyperPod {_text(props.get('ClusterName'))}",
                    tuple(details),
                    logical_id=cluster_id,
                )
            )
            self.around.append(cluster_id)
            parameters, deployment = self.lifecycle_parameters(props)
            roles = _hyperpod_roles(parameters, orchestrator)
            subnets = self.subnet_targets(_dict(props.get("VpcConfig")).get("Subnets"))
            mount = _literal(parameters.get("fsx_mount_dir")) or ""
            file_systems = [
                t
                for t in _targets(_dict(self.resources.get(deployment or "", {})).get("Properties"))
                if self.type_of(t) == "AWS::FSx::FileSystem"
            ]
            eks = _target(_dict(_dict(props.get("Orchestrator")).get("Eks")).get("ClusterArn"))
            databases = [
                t
                for t in _targets(_dict(self.resources.get(deployment or "", {})).get("Properties"))
                if self.type_of(t) == "AWS::RDS::DBCluster"
            ]
            for group in _list(props.get("InstanceGroups")):
                group = _dict(group)
                override = _dict(group.get("OverrideVpcConfig")).get("Subnets")
                node_id = self.instance_group(
                    cluster_id, group, roles, self.subnet_targets(override) if override else subnets
                )
                if eks in self.nodes and eks is not None:
                    self.members.setdefault(eks, []).append(node_id)
                    kubernetes = _dict(group.get("KubernetesConfig"))
                    self.scheduling[node_id] = _node_labels(
                        _dict(kubernetes.get("Labels")),
                        [self.nodes[node_id].instance_type],
                        [_taint(t) for t in _list(kubernetes.get("Taints"))],
                    )
                else:
                    self.link(node_id, file_systems, EdgeKind.MOUNTS, mount)
                if self.nodes[node_id].role is NodeRole.CONTROLLER:
                    self.link(node_id, databases, EdgeKind.DATABASE, "slurmdbd")
                self.link(
                    node_id,
                    _targets(_dict(group.get("LifeCycleConfig")).get("SourceS3Uri")),
                    EdgeKind.FETCHES,
                    "lifecycle scripts",
                )

    def instance_group(
        self,
        cluster_id: str,
        group: Mapping[str, Any],
        roles: Mapping[str, tuple[NodeRole, str | None]],
        subnets: list[str],
    ) -> str:
        name = _text(group.get("InstanceGroupName"))
        instance_type = _literal(group.get("InstanceType"))
        count = _count(group.get("InstanceCount"), group.get("MinInstanceCount"), group.get("InstanceCount"))
        efa = _catalog_efa(instance_type)
        role, partition = roles.get(name, (None, None))
        details = _group_details(instance_type, count, efa)
        if partition is not None:
            details.append(f"Slurm partition {partition}")
        for config in _list(group.get("InstanceStorageConfigs")):
            volume = _dict(_dict(config).get("EbsVolumeConfig"))
            size = volume.get("VolumeSizeInGB")
            if size is not None:
                kind = "root volume" if volume.get("RootVolume") is True else "extra volume"
                details.append(f"{_text(size)} GiB {kind}")
        checks = [_text(c) for c in _list(group.get("OnStartDeepHealthChecks"))]
        if checks:
            details.append(f"deep health checks: {', '.join(checks)}")
        node_id = f"{cluster_id}/group/{name}"
        self.add_node_group(
            node_id,
            f"{role.value} group {name}" if role is not None else f"instance group {name}",
            details,
            cluster=cluster_id,
            role=role,
            instance_type=instance_type,
            count=count,
            efa=efa,
            subnets=subnets,
            capacity=_training_plan(group["TrainingPlanArn"]) if "TrainingPlanArn" in group else ON_DEMAND,
        )
        return node_id

    def lifecycle_parameters(self, cluster: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The settings uploaded where the cluster's lifecycle scripts come from (every file of the upload,
        merged), and the deployment that uploads them."""
        uris = {
            _text(_dict(_dict(g).get("LifeCycleConfig")).get("SourceS3Uri"), "{bucket}")
            for g in _list(cluster.get("InstanceGroups"))
        }
        buckets = {
            t
            for g in _list(cluster.get("InstanceGroups"))
            for t in _targets(_dict(_dict(g).get("LifeCycleConfig")).get("SourceS3Uri"))
        }
        for deployment_id, props in self.of_type("Custom::CDKBucketDeployment"):
            bucket = _target(props.get("DestinationBucketName"))
            prefix = _text(props.get("DestinationBucketKeyPrefix", ""))
            if bucket in buckets and f"s3://{{bucket}}/{prefix}" in uris:
                settings: dict[str, Any] = {}
                for key in _list(props.get("SourceObjectKeys")):
                    settings.update(self.uploads.get(_text(key), {}))
                return settings, deployment_id
        return {}, None

    # -- AWS PCS ---------------------------------------------------------------------------------

    def pcs_clusters(self) -> None:
        queued: dict[str, list[str]] = {}
        for _, props in self.of_type("AWS::PCS::Queue"):
            for configuration in _list(props.get("ComputeNodeGroupConfigurations")):
                group = _target(_dict(configuration).get("ComputeNodeGroupId"))
                if group is not None:
                    queued.setdefault(group, []).append(_text(props.get("Name")))
        for cluster_id, props in self.of_type("AWS::PCS::Cluster"):
            scheduler = _dict(props.get("Scheduler"))
            slurm = _dict(props.get("SlurmConfiguration"))
            details = [
                f"{_text(scheduler.get('Type'), 'SLURM').capitalize()} {_text(scheduler.get('Version'))}"
            ]
            details.append(f"size {_text(props.get('Size'))}")
            accounting = _literal(_dict(slurm.get("Accounting")).get("Mode"))
            if accounting and accounting != "NONE":
                details.append(f"accounting {accounting.lower()}")
            self.add(
                Node(
                    cluster_id,
                    NodeKind.CLUSTER,
                    f"AWS PCS {_text(props.get('Name'))}",
                    tuple(details),
                    logical_id=cluster_id,
                )
            )
            self.around.append(cluster_id)
            plane = f"{cluster_id}/control-plane"
            self.add(
                Node(
                    plane, NodeKind.CONTROL_PLANE, "managed Slurm controller", ("run by AWS PCS",), cluster_id
                )
            )
            self.link(
                plane, self.subnet_targets(_dict(props.get("Networking")).get("SubnetIds")), EdgeKind.RUNS_IN
            )
        for group_id, props in self.of_type("AWS::PCS::ComputeNodeGroup"):
            self.pcs_node_group(group_id, props, queued.get(group_id, []))

    def pcs_node_group(self, group_id: str, props: Mapping[str, Any], queues: list[str]) -> None:
        cluster = _target(props.get("ClusterId"))
        template_id = _target(_dict(props.get("CustomLaunchTemplate")).get("TemplateId"))
        data = _dict(
            _dict(_dict(self.resources.get(template_id or "", {})).get("Properties")).get(
                "LaunchTemplateData"
            )
        )
        configs = _list(props.get("InstanceConfigs"))
        instance_type = _literal(_dict(configs[0]).get("InstanceType")) if configs else None
        efa = _efa_interfaces(data)
        scaling = _dict(props.get("ScalingConfiguration"))
        count = _count(None, scaling.get("MinInstanceCount"), scaling.get("MaxInstanceCount"))
        name = _text(props.get("Name"))
        details = _group_details(instance_type, count, efa)
        details.append(f"queue {', '.join(queues)}" if queues else "login (in no queue)")
        self.add_node_group(
            group_id,
            f"node group {name}",
            details,
            cluster=cluster,
            logical_id=group_id,
            role=NodeRole.COMPUTE if queues else NodeRole.LOGIN,
            instance_type=instance_type,
            count=count,
            efa=efa,
            subnets=self.subnet_targets(props.get("SubnetIds")),
            placement=_target(_dict(data.get("Placement")).get("GroupName")),
            capacity=_launch_template_capacity(data, props.get("PurchaseOption")),
        )
        user_data = data.get("UserData")
        mount = re.search(r"mount_dir='([^']*)'", _text(_dict(user_data).get("Fn::Base64", user_data), ""))
        file_systems = [t for t in _targets(user_data) if self.type_of(t) == "AWS::FSx::FileSystem"]
        self.link(group_id, file_systems, EdgeKind.MOUNTS, mount.group(1) if mount else "")

    # -- what outlives the stack -----------------------------------------------------------------

    def retained_resources(self) -> None:
        """A retained resource that is not drawn is badged on the drawn resource it belongs to (a bucket's
        access-log bucket; else the one whose construct its logical id extends: ``AccountingWriter`` belongs
        to ``Accounting``); one that belongs to none is drawn in the region by what it is."""
        drawn = {n.logical_id: n.id for n in self.nodes.values() if n.logical_id is not None}
        owners = {_readable(logical_id): node_id for logical_id, node_id in drawn.items()}
        kept: dict[str, list[tuple[str, str]]] = {}
        for logical_id in sorted(self.retained - set(drawn)):
            kind = self.type_of(logical_id) or "?"
            owner = drawn.get(self.access_logs_of.get(logical_id, "")) or _owner(
                _readable(logical_id), owners
            )
            if owner is not None:
                kept.setdefault(owner, []).append((logical_id, _what(kind)))
                continue
            self.add(
                Node(
                    logical_id,
                    NodeKind.RETAINED_RESOURCE,
                    _what(kind),
                    (_readable(logical_id),),
                    logical_id=logical_id,
                )
            )
        for owner, resources in kept.items():
            self.nodes[owner] = replace(self.nodes[owner], kept_with=tuple(resources))


#: What a resource type is called in a drawing.
_WHAT = {
    "AWS::Logs::LogGroup": "log group",
    "AWS::KMS::Key": "KMS key",
    "AWS::SecretsManager::Secret": "secret",
    "AWS::EC2::SecurityGroup": "security group",
    "AWS::EC2::Subnet": "subnet",
    "AWS::RDS::DBInstance": "DB instance",
    "AWS::RDS::DBSubnetGroup": "DB subnet group",
    "AWS::RDS::DBClusterParameterGroup": "DB parameter group",
    "AWS::RDS::DBParameterGroup": "DB parameter group",
    "AWS::S3::Bucket": "access-log bucket",
}


def _what(resource_type: str) -> str:
    """``AWS::Logs::LogGroup`` -> ``log group``; a type not named here as ``Logs LogGroup``."""
    return _WHAT.get(resource_type, resource_type.removeprefix("AWS::").replace("::", " "))


def _owner(readable: str, owners: Mapping[str, str]) -> str | None:
    """The drawn node whose readable logical id is the longest proper prefix of ``readable``."""
    found = [name for name in owners if readable.startswith(name) and readable != name]
    return owners[max(found, key=len)] if found else None


def _kept_summary(kept: Iterable[tuple[str, str]]) -> str:
    """``log group x 4, secret x 2, KMS key`` (multiplication sign), in first-seen order."""
    counts: dict[str, int] = {}
    for _, what in kept:
        counts[what] = counts.get(what, 0) + 1
    return ", ".join(what if n == 1 else f"{what} {TIMES} {n}" for what, n in counts.items())


def _hyperpod_roles(
    parameters: Mapping[str, Any], orchestrator: str
) -> dict[str, tuple[NodeRole, str | None]]:
    """Instance group name -> (role, Slurm partition) from the provisioning parameters (none under EKS)."""
    roles: dict[str, tuple[NodeRole, str | None]] = {}
    if orchestrator == "EKS":
        return roles
    controller, login = parameters.get("controller_group"), parameters.get("login_group")
    if isinstance(controller, str):
        roles[controller] = (NodeRole.CONTROLLER, None)
    if isinstance(login, str):
        roles[login] = (NodeRole.LOGIN, None)
    for worker in _list(parameters.get("worker_groups")):
        name, partition = _dict(worker).get("instance_group_name"), _dict(worker).get("partition_name")
        if isinstance(name, str):
            roles[name] = (NodeRole.WORKER, partition if isinstance(partition, str) else None)
    return roles


def _manifest_objects(manifest: Any) -> list[dict[str, Any]]:
    """The Kubernetes objects of a manifest (its deploy-time values left as placeholders)."""
    try:
        document = json.loads(_text(manifest, "TOKEN"))
    except ValueError:
        return []
    return [_dict(o) for o in _list(document)]


#: Kubernetes kinds that run something: a manifest holding one is called by it.
_RUNNING_KINDS = ("MPIJob", "Job", "PyTorchJob", "DaemonSet", "Deployment", "StatefulSet", "CronJob", "Pod")


def _workload_lines(objects: list[dict[str, Any]]) -> tuple[str, tuple[str, ...]]:
    """A manifest's title (the object that runs something, else the first) and the rest counted by kind."""
    if not objects:
        return "manifest", ()
    kinds = [_text(o.get("kind"), "?") for o in objects]
    first = next((i for i, kind in enumerate(kinds) if kind in _RUNNING_KINDS), 0)
    rest: dict[str, int] = {}
    for index, kind in enumerate(kinds):
        if index != first:
            rest[kind] = rest.get(kind, 0) + 1
    summary = ", ".join(kind if n == 1 else f"{kind} {TIMES} {n}" for kind, n in rest.items())
    return f"{kinds[first]} {_namespaced(objects[first])}", (f"with {summary}",) if summary else ()


def _namespaced(kubernetes_object: Mapping[str, Any]) -> str:
    metadata = _dict(kubernetes_object.get("metadata"))
    name = _text(metadata.get("name"), "?")
    namespace = _literal(metadata.get("namespace"))
    return f"{namespace}/{name}" if namespace else name
