"""Slurm's ``topology.conf`` (``TopologyPlugin=topology/tree``) from EC2 instance topology.

EC2's ``DescribeInstanceTopology`` tells, for each running instance of a type it describes (p5, p5e, p5en,
p6, trn2 and the others of "Prerequisites for Amazon EC2 topology",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html), the network nodes
above it, read top-down: ``NetworkNodes[0]`` is the farthest, the last one the instance's own (three nodes, four
on p6-b200/b300; https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTopology.html).
:func:`topology_conf` turns that answer into Slurm's tree: one ``SwitchName`` per network node, its children
below it, the Slurm nodes under their instance's last network node
(https://slurm.schedmd.com/topology.conf.html), and one switch above every top-level network node
(:data:`ROOT_SWITCH`) so that a job may still span the whole cluster. The file always has that switch: Slurm's
tree plugin stops slurmctld on a file without one.

Slurm's tree plugin schedules only on nodes a switch reaches, so every node is in the file: a node whose instance
EC2 does not place (not running yet: a powered-down dynamic node; of a partition whose types EC2 does not
describe; or not yet in EC2's eventually consistent answer) sits under :data:`UNPLACED_SWITCH`, a leaf of its own
below the root, until a later refresh places it.

The rest of this module runs on a ParallelCluster head node (shipped beside the custom action
``node_scripts/parallelcluster/topology.sh``, run by the Python of ParallelCluster's node virtual environment, which
has boto3): it imports nothing but the standard library and, in :func:`main`, boto3. Subcommands:

- ``initial --conf FILE --nodes EXPR ...`` (OnNodeStart, before slurmctld first starts): a file with every node
  unplaced, written only when none exists;
- ``refresh --conf FILE --cluster-name NAME --region REGION --partition P ...``: the running compute instances of
  the cluster (``DescribeInstances`` by ParallelCluster's tags), their Slurm nodes (``scontrol -o show nodes``,
  matched by ``NodeAddr``, the instance's private address), the topology of the nodes of the partitions named,
  the file rewritten (staged and renamed) and ``scontrol reconfigure`` run when its content changed;
- ``install --conf FILE ... --python PYTHON --module PATH``: a systemd service that runs ``refresh`` and a timer
  that starts it every 30 seconds (nodes come and go; ParallelCluster's resume and suspend programs are its own),
  then one ``refresh``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The switch above every top-level network node (and the unplaced leaf).
ROOT_SWITCH = "ec2-network"
#: The leaf holding the Slurm nodes EC2 does not place (yet).
UNPLACED_SWITCH = "unplaced"
#: Slurm reads a configuration line, continuations included, into a buffer of this many bytes
#: (``BUFFER_SIZE`` of src/common/parse_config.c, https://github.com/SchedMD/slurm).
MAX_LINE = 4096
#: ``DescribeInstanceTopology`` takes at most 100 instance ids per request.
MAX_INSTANCE_IDS = 100
HEADER = (
    "# Slurm topology/tree from EC2 DescribeInstanceTopology, written by training-clusters (topology.py):\n"
    "# rewritten when nodes come and go; edits are lost.\n"
)
#: Where ParallelCluster installs Slurm (the cookbook's node['cluster']['slurm']['install_dir']).
SCONTROL = "/opt/slurm/bin/scontrol"
#: The head node's own folder for the last file written and a reconfigure owed (/opt/slurm/etc is shared).
STATE = "/var/lib/training-clusters/topology"
SERVICE = "training-clusters-topology"
#: How often the timer refreshes: within the 60 s slurmctld waits for a missing file.
REFRESH_SECONDS = 30


class TopologyError(Exception):
    """The topology could not be read or written; the file in place is left as it was."""


def topology_conf(
    instances: Iterable[Mapping[str, Any]],
    node_names: Mapping[str, str],
    *,
    unplaced: Iterable[str] = (),
) -> str:
    """``topology.conf`` for the Slurm nodes ``node_names`` names, placed as ``instances`` says.

    :param instances: ``Instances`` of ``DescribeInstanceTopology`` answers (``InstanceId``, ``NetworkNodes``
        top-down); instances ``node_names`` does not name are left out.
    :param node_names: ``{instance id: Slurm node name}``; a node whose instance ``instances`` does not place
        (absent, or with no ``NetworkNodes``) goes under :data:`UNPLACED_SWITCH`.
    :param unplaced: More Slurm nodes to put under :data:`UNPLACED_SWITCH` (nodes with no instance).
    :raises TopologyError: the network nodes do not form a tree (one node under two parents, or a leaf of one
        instance above another), or a switch's line would be longer than Slurm reads (:data:`MAX_LINE`).
    """
    children: dict[str, set[str]] = {}
    parent: dict[str, str] = {}
    leaves: dict[str, list[str]] = {}
    placed: set[str] = set()
    for instance in instances:
        name = node_names.get(instance.get("InstanceId", ""))
        path = list(instance.get("NetworkNodes") or [])
        if name is None or not path:
            continue
        above = ROOT_SWITCH
        for network_node in path:
            if parent.setdefault(network_node, above) != above:
                raise TopologyError(
                    f"network node {network_node} is under both {parent[network_node]} and {above} "
                    f"(instance {instance['InstanceId']}): EC2's answer is not a tree"
                )
            children.setdefault(above, set()).add(network_node)
            above = network_node
        leaves.setdefault(path[-1], []).append(name)
        placed.add(name)
    rest = sorted({*(n for n in node_names.values() if n not in placed), *unplaced} - placed, key=_natural)
    if rest:
        children.setdefault(ROOT_SWITCH, set()).add(UNPLACED_SWITCH)
        leaves[UNPLACED_SWITCH] = rest
    for switch in leaves:
        if switch in children:
            raise TopologyError(
                f"network node {switch} holds instances and network nodes: EC2's answer is not a tree"
            )
    lines = []
    if ROOT_SWITCH not in children:  # no node at all: an empty leaf, as Slurm refuses a file without a switch
        leaves[ROOT_SWITCH] = []
    level = [ROOT_SWITCH]
    while level:
        below = []
        for switch in level:
            if switch in leaves:
                nodes = hostlist(leaves[switch])
                lines.append(f"SwitchName={switch} Nodes={nodes}" if nodes else f"SwitchName={switch}")
            else:
                kids = sorted(children[switch])
                lines.append(f"SwitchName={switch} Switches={','.join(kids)}")
                below += kids
        level = below
    for line in lines:
        if len(line) > MAX_LINE - 2:  # fgets into the buffer keeps the newline and a NUL
            raise TopologyError(
                f"{line.split()[0]} would be a line of {len(line)} characters; Slurm reads at most {MAX_LINE - 2} "
                "(parse_config.c's buffer), so the file is not written"
            )
    return HEADER + "".join(f"{line}\n" for line in lines)


def hostlist(names: Iterable[str]) -> str:
    """Slurm's compressed form of node names: ``gpu-st-p5-[1-3,5],login`` (numbers without leading zeros only)."""
    groups: dict[str, list[int]] = {}
    single: list[str] = []
    for name in sorted(set(names), key=_natural):
        match = re.fullmatch(r"(.*?\D)?([1-9]\d*)", name)
        if match is None:
            single.append(name)
        else:
            groups.setdefault(match.group(1) or "", []).append(int(match.group(2)))
    parts = [_ranges(prefix, numbers) for prefix, numbers in groups.items()]
    return ",".join(sorted([*parts, *single], key=_natural))


def _ranges(prefix: str, numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"{prefix}{numbers[0]}"
    spans: list[list[int]] = []
    for number in sorted(numbers):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    inner = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
    return f"{prefix}[{inner}]"


def _natural(name: str) -> list[Any]:
    return [
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name) if part
    ]


# ------------------------------------------------------------------------------------------------
# reading EC2 and Slurm


@dataclass(frozen=True)
class SlurmNode:
    """A node of ``scontrol -o show nodes``: its name, ``NodeAddr`` and partitions."""

    name: str
    address: str
    partitions: tuple[str, ...]


def slurm_nodes(scontrol_output: str) -> list[SlurmNode]:
    """The nodes of ``scontrol -o show nodes`` (one line per node, ``Key=Value`` fields)."""
    nodes = []
    for line in scontrol_output.splitlines():
        fields = dict(re.findall(r"(?:^|\s)(NodeName|NodeAddr|Partitions)=(\S*)", line))
        if "NodeName" in fields:
            partitions = tuple(p for p in fields.get("Partitions", "").split(",") if p)
            nodes.append(SlurmNode(fields["NodeName"], fields.get("NodeAddr", ""), partitions))
    return nodes


def cluster_instances(ec2: Any, cluster_name: str) -> dict[str, str]:
    """``{private IPv4 address: instance id}`` of the cluster's running compute instances.

    ParallelCluster tags each one ``parallelcluster:cluster-name`` and ``parallelcluster:node-type=Compute`` (the
    filters AWS's own sample uses, github.com/aws-samples/ec2-topology-aware-for-slurm, ``ec2-topology.py``).
    """
    found: dict[str, str] = {}
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": "tag:parallelcluster:cluster-name", "Values": [cluster_name]},
            {"Name": "tag:parallelcluster:node-type", "Values": ["Compute"]},
            {"Name": "instance-state-name", "Values": ["running"]},
        ]
    )
    for page in pages:
        for reservation in page.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                if instance.get("PrivateIpAddress"):
                    found[instance["PrivateIpAddress"]] = instance["InstanceId"]
    return found


def describe_topology(ec2: Any, instance_ids: Sequence[str]) -> list[dict[str, Any]]:
    """``Instances`` of ``DescribeInstanceTopology`` for ``instance_ids``: 100 ids a request, every page."""
    instances: list[dict[str, Any]] = []
    for start in range(0, len(instance_ids), MAX_INSTANCE_IDS):
        request: dict[str, Any] = {"InstanceIds": list(instance_ids[start : start + MAX_INSTANCE_IDS])}
        while True:
            answer = ec2.describe_instance_topology(**request)
            instances += answer.get("Instances", [])
            token = answer.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
    return instances


def current_conf(ec2: Any, *, cluster_name: str, partitions: Sequence[str], scontrol_output: str) -> str:
    """The ``topology.conf`` the cluster should have now: nodes of ``partitions`` placed where EC2 says."""
    addresses = cluster_instances(ec2, cluster_name)
    wanted = set(partitions)
    names: dict[str, str] = {}
    unplaced: list[str] = []
    for node in slurm_nodes(scontrol_output):
        instance = addresses.get(node.address)
        if instance is not None and wanted.intersection(node.partitions):
            names[instance] = node.name
        else:
            unplaced.append(node.name)
    return topology_conf(describe_topology(ec2, sorted(names)), names, unplaced=unplaced)


# ------------------------------------------------------------------------------------------------
# on the head node


def write_if_changed(path: str, content: str) -> bool:
    """Write ``content`` to ``path`` (0644, staged beside it and renamed) unless it holds it already."""
    try:
        with open(path, encoding="utf-8") as current:
            if current.read() == content:
                return False
    except FileNotFoundError:
        pass
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    handle, staged = tempfile.mkstemp(dir=folder, prefix=".topology.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(content)
        os.chmod(staged, 0o644)
        os.replace(staged, path)
    except BaseException:
        if os.path.exists(staged):
            os.unlink(staged)
        raise
    return True


def _run(command: Sequence[str]) -> str:
    done = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        output = " ".join((done.stdout + done.stderr).split())
        raise TopologyError(f"{' '.join(command)} failed (exit {done.returncode}): {output}")
    return done.stdout


def refresh(
    ec2: Any, *, conf: str, cluster_name: str, partitions: Sequence[str], scontrol: str, state: str
) -> bool:
    """Rewrite ``conf`` from EC2 and Slurm, and reconfigure slurmctld, when the topology changed.

    ``state`` (a folder of the head node's own disk) keeps the last file written (``topology.conf``) and a
    reconfigure owed by an earlier run that failed (``reconfigure.pending``). A ``conf`` that has disappeared is
    put back from the last file first, without asking Slurm: slurmctld cannot start without it while
    ``TopologyPlugin=topology/tree`` (Slurm's ``topology/tree/switch_record.c``: ``fatal`` on a file it cannot
    read), and ParallelCluster deletes it when an update changes the queues of a cluster without p6e-gb200 blocks
    (aws-parallelcluster-cookbook, ``block_topology`` resource, ``--cleanup``).
    """
    last = os.path.join(state, "topology.conf")
    pending = os.path.join(state, "reconfigure.pending")
    restore(conf, state)
    try:
        wanted = current_conf(
            ec2,
            cluster_name=cluster_name,
            partitions=partitions,
            scontrol_output=_run([scontrol, "-o", "show", "nodes"]),
        )
    except Exception as error:
        if not type(error).__module__.startswith("botocore"):
            raise
        # botocore's ClientError (a denied or throttled call) and connection errors
        raise TopologyError(f"reading EC2 failed: {error}") from error
    if write_if_changed(conf, wanted):
        open(pending, "w").close()
    write_if_changed(last, wanted)
    if os.path.exists(pending):
        _run([scontrol, "reconfigure"])
        os.unlink(pending)
        return True
    return False


def restore(conf: str, state: str) -> bool:
    """Put ``conf`` back from the last file written (``state``/``topology.conf``) when it has disappeared, and
    owe a reconfigure; asks neither EC2 nor Slurm. Real slurmctld 24.11 waits 60 s for a missing file ("cannot
    stat file ... retrying in 1sec up to 60sec") before it stops: the timer comes back sooner."""
    last = os.path.join(state, "topology.conf")
    os.makedirs(state, exist_ok=True)
    if os.path.exists(conf) or not os.path.exists(last):
        return False
    with open(last, encoding="utf-8") as kept:
        write_if_changed(conf, kept.read())
    open(os.path.join(state, "reconfigure.pending"), "w").close()
    return True


def initial(conf: str, nodes: Sequence[str]) -> bool:
    """Every node unplaced, when no file exists yet (slurmctld reads the file as it starts)."""
    if os.path.exists(conf):
        return False
    lines = [
        f"SwitchName={ROOT_SWITCH} Switches={UNPLACED_SWITCH}",
        f"SwitchName={UNPLACED_SWITCH} Nodes={','.join(nodes)}",
    ]
    return write_if_changed(conf, HEADER + "".join(f"{line}\n" for line in lines))


def units(*, python: str, module: str, refresh_args: Sequence[str]) -> dict[str, str]:
    """The systemd service and timer that run ``refresh`` every :data:`REFRESH_SECONDS`."""
    command = " ".join([python, module, "refresh", *refresh_args])
    return {
        f"{SERVICE}.service": (
            "[Unit]\n"
            "Description=Slurm topology.conf from EC2 instance topology (training-clusters)\n"
            "After=slurmctld.service\n\n"
            "[Service]\n"
            "Type=oneshot\n"
            f"ExecStart={command}\n"
        ),
        f"{SERVICE}.timer": (
            "[Unit]\n"
            "Description=Refresh Slurm's topology.conf as nodes come and go (training-clusters)\n\n"
            "[Timer]\n"
            f"OnBootSec={REFRESH_SECONDS}\n"
            f"OnUnitActiveSec={REFRESH_SECONDS}\n\n"
            "[Install]\n"
            "WantedBy=timers.target\n"
        ),
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="topology.py", description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    first = commands.add_parser("initial")
    first.add_argument("--conf", required=True)
    first.add_argument("--nodes", required=True, nargs="+")
    for name in ("refresh", "install"):
        command = commands.add_parser(name)
        command.add_argument("--conf", required=True)
        command.add_argument("--cluster-name", required=True)
        command.add_argument("--region", required=True)
        command.add_argument("--partition", required=True, action="append")
        command.add_argument("--scontrol", default=SCONTROL)
        command.add_argument("--state", default=STATE)
        if name == "install":
            command.add_argument("--python", required=True)
            command.add_argument("--module", required=True)
            command.add_argument("--systemd", default="/etc/systemd/system")
    return parser


def main(argv: Sequence[str] | None = None, *, ec2: Any = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "initial":
            wrote = initial(args.conf, args.nodes)
            print(f"topology.py: {'wrote' if wrote else 'kept'} {args.conf}")
            return 0
        refresh_args = ["--conf", args.conf, "--cluster-name", args.cluster_name, "--region", args.region]
        refresh_args += [item for p in args.partition for item in ("--partition", p)]
        refresh_args += ["--scontrol", args.scontrol, "--state", args.state]
        if args.command == "install":
            for name, text in units(
                python=args.python, module=args.module, refresh_args=refresh_args
            ).items():
                write_if_changed(os.path.join(args.systemd, name), text)
            _run(["systemctl", "daemon-reload"])
            _run(["systemctl", "enable", "--now", f"{SERVICE}.timer"])
        if restore(args.conf, args.state):
            print(f"topology.py: put {args.conf} back from {args.state}")
        if ec2 is None:
            try:
                import boto3  # on the head node: ParallelCluster's node virtual environment has it
            except ImportError as error:
                raise TopologyError(f"{sys.executable} cannot import boto3 ({error})") from error
            ec2 = boto3.client("ec2", region_name=args.region)
        try:
            changed = refresh(
                ec2,
                conf=args.conf,
                cluster_name=args.cluster_name,
                partitions=args.partition,
                scontrol=args.scontrol,
                state=args.state,
            )
        except TopologyError as error:
            if args.command != "install":
                raise
            # a failed custom action fails the head node, hence the cluster: the timer runs in 30 s anyway
            print(
                f"topology.py: warning: {error} ({args.conf} left as it was; the timer tries again every "
                f"{REFRESH_SECONDS} s: journalctl -u {SERVICE})",
                file=sys.stderr,
            )
            return 0
        print(f"topology.py: {args.conf} {'rewritten, Slurm reconfigured' if changed else 'unchanged'}")
        return 0
    except (TopologyError, OSError) as error:
        print(f"topology.py: error: {error} ({args.conf} left as it was)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
