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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from training_clusters.diagram.graph import (
    REGION_ID,
    Edge,
    EdgeKind,
    EnvironmentGraph,
    Node,
    NodeKind,
    NodeRole,
)
from training_clusters.diagram.readers.eks import EksReader
from training_clusters.diagram.readers.hyperpod import HyperPodReader
from training_clusters.diagram.readers.network import NetworkReader
from training_clusters.diagram.readers.parallelcluster import ParallelClusterReader
from training_clusters.diagram.readers.pcs import PcsReader
from training_clusters.diagram.readers.retained import RetainedReader
from training_clusters.diagram.readers.storage import StorageReader
from training_clusters.diagram.template import LIFECYCLE_FILES, retained_logical_ids
from training_clusters.orchestrators import ORCHESTRATORS

__all__ = [
    "LIFECYCLE_FILES",
    "Edge",
    "EdgeKind",
    "EnvironmentGraph",
    "Node",
    "NodeKind",
    "NodeRole",
    "graph_from_template",
    "retained_logical_ids",
]


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


@dataclass
class _GraphBuilder(
    NetworkReader, StorageReader, EksReader, ParallelClusterReader, HyperPodReader, PcsReader, RetainedReader
):
    """Every reader, run in the order the drawing needs: the network and storage first, the clusters, then what
    joins them."""

    def build(self, title: str) -> EnvironmentGraph:
        self.add(Node(REGION_ID, NodeKind.REGION, "AWS Region"))
        self.network()
        self.placement_groups()
        self.file_systems()
        self.databases()
        self.buckets()
        readers = dict.fromkeys(entry.load("diagram") for entry in ORCHESTRATORS.values())
        for reader in readers:
            reader(self)
        self.schedule_addons()
        self.gpu_sharing()
        self.claimed_mounts()
        self.mount_hints()
        self.retained_resources()
        self.settle()
        return EnvironmentGraph(title=title, nodes=self.ordered_nodes(), edges=tuple(sorted(self.edges)))
