"""The graph a template is read into: typed nodes (region, VPC, subnets, clusters, node groups ...) and edges."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


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


TIMES = "\N{MULTIPLICATION SIGN}"
"""Between an instance type and its count: ``p5.48xlarge x 2`` with the multiplication sign."""


def _kept_summary(kept: Iterable[tuple[str, str]]) -> str:
    """``log group x 4, secret x 2, KMS key`` (multiplication sign), in first-seen order."""
    counts: dict[str, int] = {}
    for _, what in kept:
        counts[what] = counts.get(what, 0) + 1
    return ", ".join(what if n == 1 else f"{what} {TIMES} {n}" for what, n in counts.items())
