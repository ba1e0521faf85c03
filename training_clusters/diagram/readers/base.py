"""What every reader shares: the template's resources, the nodes and edges found so far, and the plumbing."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from training_clusters.diagram.graph import REGION_ID, Edge, EdgeKind, Node, NodeKind, NodeRole
from training_clusters.diagram.scheduling import (
    NodeGroupLabels,
    PodScope,
)
from training_clusters.diagram.template import _dict, _resources, _targets, retained_logical_ids


@dataclass
class GraphReader:
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
