"""What the emulated HyperPod agent writes as Slurm's ``topology.conf`` (``TopologyPlugin=topology/tree``) from EC2's
instance topology (``tests/integration/hyperpod_api_bed.py``). HyperPod's own agent writes the file on a real
cluster ("Topology-aware scheduling in SageMaker HyperPod",
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-topology.html); ours for ParallelCluster is
:mod:`training_clusters.node_scripts.parallelcluster.topology`.

EC2's ``DescribeInstanceTopology`` (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
API_DescribeInstanceTopology.html) answers, per instance, its ``NetworkNodes``: the network nodes above it,
read top-down, the last one the instance's own switch (three layers; four on p6-b200 and p6-b300; see
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html). Slurm's tree
plugin wants the same hierarchy as ``SwitchName=<switch> Switches=<children>`` lines for the upper layers
and ``SwitchName=<leaf> Nodes=<node names>`` lines for the switches instances hang from
(https://slurm.schedmd.com/topology.conf.html); a job asks to be placed under one switch with
``sbatch --switches=1`` (https://slurm.schedmd.com/topology.html).

Slurm places a job only inside one switch fabric ("jobs can only span nodes connected by the same switch
fabric", topology.conf's prerequisites): when the instances sit under more than one top-layer network
node, a switch named :data:`ROOT_SWITCH` joins them. Without it Slurm 24.11 refuses at submission any job
that would span two spines ("Requested topology configuration is not available"; shown on the real-Slurm
bed, tests/integration/test_hyperpod_api_real.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: The switch that joins the top-layer network nodes when there is more than one.
ROOT_SWITCH = "ec2-root"

#: What may reach topology.conf: a Slurm node or switch name is parsed as a hostlist (no spaces, commas,
#: brackets, '=' or '#').
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def topology_conf(instances: Iterable[Mapping[str, Any]], node_names: Mapping[str, str]) -> str:
    """The ``topology.conf`` placing every node of NODE_NAMES under its instance's network nodes.

    :param instances: ``Instances`` entries of ``DescribeInstanceTopology`` responses (``InstanceId``,
        ``NetworkNodes`` top-down); entries for instances not in NODE_NAMES are ignored.
    :param node_names: instance id -> Slurm node name, for every node the file must place.
    :returns: the file's text: a comment line, then one ``SwitchName=`` line per switch, top-down, each
        layer sorted by name, children sorted by name.
    :raises ValueError: an instance of NODE_NAMES is not among INSTANCES or has no network nodes (its type
        is not one EC2 places), a name is not a safe Slurm name, a network node appears under two parents
        or at two depths, a network node has both instances and network nodes below it, or a node is a
        switch's name too.
    """
    names = dict(node_names)
    if not names:
        raise ValueError("node_names must name at least one instance, got none")
    for instance_id, node in names.items():
        if not isinstance(node, str) or not _NAME.fullmatch(node):
            raise ValueError(
                f"node_names[{instance_id!r}] must be a Slurm node name (letters, digits, '.', '_', '-'), "
                f"got {node!r}"
            )
    paths: dict[str, list[str]] = {}
    for entry in instances:
        listed = entry.get("InstanceId")
        if isinstance(listed, str) and listed in names:
            paths[listed] = list(entry.get("NetworkNodes") or [])
    missing = sorted(set(names) - set(paths))
    if missing:
        raise ValueError(
            f"DescribeInstanceTopology did not list {', '.join(missing)}: every instance of node_names "
            "must be among the instances"
        )

    parent: dict[str, str | None] = {}
    depth: dict[str, int] = {}
    leaves: dict[str, list[str]] = {}
    for instance_id, path in sorted(paths.items()):
        node = names[instance_id]
        if not path:
            raise ValueError(
                f"{instance_id} ({node}) has no NetworkNodes: EC2 gives no topology for its instance "
                "type, so it cannot be placed in a topology/tree file"
            )
        for level, switch in enumerate(path):
            if not isinstance(switch, str) or not _NAME.fullmatch(switch):
                raise ValueError(
                    f"{instance_id} ({node}): network node {switch!r} is not a safe Slurm switch name"
                )
            above = path[level - 1] if level else None
            if parent.setdefault(switch, above) != above or depth.setdefault(switch, level) != level:
                raise ValueError(
                    f"network node {switch} is listed under {parent[switch] or 'no parent'} at layer "
                    f"{depth[switch] + 1} and under {above or 'no parent'} at layer {level + 1} "
                    f"({instance_id}): the answers do not form one tree"
                )
        leaves.setdefault(path[-1], []).append(node)

    nodes = set(names.values())
    clash = sorted(nodes & (set(parent) | {ROOT_SWITCH}))
    if clash:
        raise ValueError(f"{clash[0]} is the name of a node and of a switch: Slurm needs them apart")
    if len(nodes) != len(names):
        raise ValueError("node_names gives two instances the same node name")

    children: dict[str, list[str]] = {}
    for switch, above in parent.items():
        if above is not None:
            children.setdefault(above, []).append(switch)
    both = sorted(set(children) & set(leaves))
    if both:
        raise ValueError(
            f"network node {both[0]} has both instances and network nodes below it: Slurm's tree plugin "
            "takes a switch with either nodes or switches"
        )
    tops = sorted(switch for switch, above in parent.items() if above is None)

    lines = ["# Slurm topology/tree from EC2 DescribeInstanceTopology (written by training-clusters)"]
    if len(tops) > 1:
        lines.append(f"SwitchName={ROOT_SWITCH} Switches={','.join(tops)}")
    for level in range(max(depth.values()) + 1):
        for switch in sorted(s for s, d in depth.items() if d == level):
            if switch in children:
                lines.append(f"SwitchName={switch} Switches={','.join(sorted(children[switch]))}")
            else:
                lines.append(f"SwitchName={switch} Nodes={','.join(sorted(leaves[switch]))}")
    return "\n".join(lines) + "\n"
