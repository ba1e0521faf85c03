"""HyperPod's API-driven Slurm mode, emulated on the real-Slurm bed (see slurm_bed.py for the bed itself).

In API-driven mode the cluster's ``CreateCluster`` / ``AWS::SageMaker::Cluster`` request says, per instance
group, ``SlurmConfig {NodeType: Controller | Login | Compute, PartitionNames: [one name]}``, and HyperPod's
agent, not the lifecycle scripts, writes Slurm's configuration and mounts FSx. What this module's agent does,
and the AWS page each item comes from (SageMaker developer guide, https://docs.aws.amazon.com/sagemaker/
latest/dg/<page>.html):

- ``sagemaker-hyperpod-ref`` ("SageMaker HyperPod Slurm configuration") and the API reference
  (``API_ClusterSlurmConfig``): exactly one Controller group, at most one Login group, Compute groups with
  one partition name each; every compute node is also in a ``dev`` partition. The agent writes the node and
  partition sections of the controller's ``slurm.conf`` from those (:func:`api_slurm_conf`): one NodeName
  line per compute instance, one PartitionName per partition name, ``dev`` with them all. Which partition is
  the default the pages do not say: here ``dev``, as on legacy HyperPod clusters. The settings around them
  are the bed's (:func:`slurm_bed.hyperpod_slurm_conf`).
- ``sagemaker-hyperpod-slurm-api-config-migration``: the lifecycle scripts keep "user creation, package
  installation, and environment configuration"; no ``provisioning_parameters.json``; FSx for Lustre is
  mounted by HyperPod from the groups' ``FsxLustreConfig`` (``MountPath`` ``/fsx``) before the scripts run:
  here one host folder bound at ``/fsx`` into every node (:attr:`ApiCluster.fsx`), already there at boot.
  ``OnInitComplete`` "runs on the node after the AMI-based initialization is complete" (API reference,
  ``API_ClusterLifeCycleConfig``), so the agent's files are in place when the lifecycle script starts (no
  racing agent, unlike the legacy bed's :meth:`slurm_bed.Bed.agent_writes_slurm_conf`).
- ``sagemaker-hyperpod-topology``: HyperPod sets ``TopologyPlugin=topology/tree`` for ml.p5, ml.p5e and
  ml.p5en, ``topology/flat`` (no plugin line) as soon as one compute group is of another type, and writes
  ``topology.conf`` beside ``slurm.conf`` on Slurm 24.x (the bed's version); it recomputes it on scale-up,
  scale-down and node replacement (:meth:`ApiCluster.agent_places`). How HyperPod learns where an instance
  sits is not published (its nodes are not in the customer's account, so the customer's
  ``DescribeInstanceTopology`` does not see them): the emulation writes the file with
  :func:`training_clusters.node_scripts.parallelcluster.topology.topology_conf` from entries shaped as ``DescribeInstanceTopology``'s.

Not emulated, because the pages do not say it: which Slurm daemons HyperPod starts before the lifecycle
script (today's ``on_create.sh`` starts them itself, so the agent leaves them stopped), who distributes
munge's key (the bed's nodes share the root's), and HyperPod's own accounting database
(``Orchestrator.Slurm.AccountingDatabase``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.hyperpod_bed import CONTROLLER_IP, LOGIN_IP, SCRIPT_ENV, Cluster
from tests.integration.slurm_bed import Bed, Node, hyperpod_slurm_conf, node_name, resource_config

from .agent_topology import topology_conf

#: Instance types HyperPod configures topology/tree for (sagemaker-hyperpod-topology).
TREE_TYPES = ("ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge")
#: The partition every compute node is in besides its group's (sagemaker-hyperpod-ref).
DEV_PARTITION = "dev"
#: Where HyperPod mounts FSx for Lustre (FsxLustreConfig.MountPath).
FSX_MOUNT_PATH = "/fsx"

#: The lifecycle run under test, in one place: today's on_create.sh (run as LifeCycleConfig.OnCreate),
#: which reads the legacy provisioning_parameters.json (:func:`legacy_parameters`). The reduced script of
#: API-driven mode (OnInitComplete, no provisioning_parameters.json) changes these two lines only.
LIFECYCLE_SCRIPT = "on_create.sh"
LIFECYCLE_READS_PROVISIONING_PARAMETERS = True


@dataclass(frozen=True)
class InstanceGroup:
    """One instance group of the cluster request, with the addresses the bed gives its instances."""

    name: str
    node_type: str  # Controller | Login | Compute
    ips: tuple[str, ...]
    partition: str | None = None
    instance_type: str = "ml.p5.48xlarge"

    def slurm_config(self) -> dict[str, Any]:
        """The group's ``SlurmConfig`` as CreateCluster takes it."""
        config: dict[str, Any] = {"NodeType": self.node_type}
        if self.partition is not None:
            config["PartitionNames"] = [self.partition]
        return config


COMPUTE_IPS = ("10.1.1.11", "10.1.1.12", "10.1.1.13", "10.1.1.14")
GROUPS = (
    InstanceGroup("controller-machine", "Controller", (CONTROLLER_IP,), instance_type="ml.m5.2xlarge"),
    InstanceGroup("login-group", "Login", (LOGIN_IP,), instance_type="ml.m5.2xlarge"),
    InstanceGroup("gpu-a", "Compute", COMPUTE_IPS[:2], partition="train"),
    InstanceGroup("gpu-b", "Compute", COMPUTE_IPS[2:], partition="batch"),
)
#: Where EC2 placed the compute instances (NetworkNodes, top-down): two leaf switches under one spine,
#: interleaved with the groups and the node names, so that neither the node order nor the group gives a
#: leaf's nodes by chance.
LEAF_A, LEAF_B = "nn-leaf-a0123456789", "nn-leaf-b0123456789"
NETWORK_NODES = {
    COMPUTE_IPS[0]: ["nn-spine-0123456789", "nn-agg-0123456789", LEAF_A],
    COMPUTE_IPS[1]: ["nn-spine-0123456789", "nn-agg-0123456789", LEAF_B],
    COMPUTE_IPS[2]: ["nn-spine-0123456789", "nn-agg-0123456789", LEAF_A],
    COMPUTE_IPS[3]: ["nn-spine-0123456789", "nn-agg-0123456789", LEAF_B],
}


def api_resource_config(groups: tuple[InstanceGroup, ...]) -> dict[str, Any]:
    """resource_config.json as on the legacy bed, each group also carrying its type and ``SlurmConfig``."""
    config = resource_config({group.name: list(group.ips) for group in groups})
    for entry, group in zip(config["InstanceGroups"], groups, strict=True):  # type: ignore[call-overload]
        entry["InstanceType"] = group.instance_type
        entry["SlurmConfig"] = group.slurm_config()
    return config


def _groups_of(config: dict[str, Any], node_type: str) -> list[dict[str, Any]]:
    return [group for group in config["InstanceGroups"] if group["SlurmConfig"]["NodeType"] == node_type]


def _ips(group: dict[str, Any]) -> list[str]:
    return [instance["CustomerIpAddress"] for instance in group["Instances"]]


def tree_topology(config: dict[str, Any]) -> bool:
    """True when HyperPod configures topology/tree: every compute group is of a type it places."""
    return all(group["InstanceType"] in TREE_TYPES for group in _groups_of(config, "Compute"))


def api_slurm_conf(config: dict[str, Any]) -> str:
    """The controller's slurm.conf as the API-driven agent writes it from the groups' SlurmConfig."""
    (controller,) = _groups_of(config, "Controller")
    partitions: dict[str, list[str]] = {DEV_PARTITION: []}
    for group in _groups_of(config, "Compute"):
        partitions[DEV_PARTITION] += _ips(group)
        (name,) = group["SlurmConfig"]["PartitionNames"]
        partitions.setdefault(name, []).extend(_ips(group))
    extra = "TopologyPlugin=topology/tree\n" if tree_topology(config) else ""
    return hyperpod_slurm_conf(_ips(controller)[0], partitions, extra=extra)


def instance_topology(config: dict[str, Any], network_nodes: dict[str, list[str]]) -> list[dict[str, Any]]:
    """``DescribeInstanceTopology`` ``Instances`` entries for the compute instances."""
    return [
        {
            "InstanceId": instance["InstanceId"],
            "InstanceType": group["InstanceType"].removeprefix("ml."),
            "NetworkNodes": list(network_nodes[instance["CustomerIpAddress"]]),
            "AvailabilityZone": "us-east-1a",
            "ZoneId": "use1-az1",
        }
        for group in _groups_of(config, "Compute")
        for instance in group["Instances"]
    ]


def api_topology_conf(config: dict[str, Any], network_nodes: dict[str, list[str]]) -> str:
    names = {
        instance["InstanceId"]: node_name(instance["CustomerIpAddress"])
        for group in _groups_of(config, "Compute")
        for instance in group["Instances"]
    }
    return topology_conf(instance_topology(config, network_nodes), names)


def legacy_parameters(config: dict[str, Any]) -> dict[str, Any]:
    """What today's on_create.sh reads from provisioning_parameters.json, derived from the SlurmConfig."""
    (controller,) = _groups_of(config, "Controller")
    login = _groups_of(config, "Login")
    return {
        "version": "1.0.0",
        "workload_manager": "slurm",
        "controller_group": controller["Name"],
        **({"login_group": login[0]["Name"]} if login else {}),
        "worker_groups": [
            {
                "instance_group_name": group["Name"],
                "partition_name": group["SlurmConfig"]["PartitionNames"][0],
            }
            for group in _groups_of(config, "Compute")
        ],
    }


@dataclass
class ApiCluster(Cluster):
    """A cluster of GROUPS in API-driven mode: the agent has written Slurm's files and mounted FSx."""

    groups: tuple[InstanceGroup, ...] = GROUPS
    network_nodes: dict[str, list[str]] = field(default_factory=lambda: copy.deepcopy(NETWORK_NODES))
    fsx: Path = Path()

    def __post_init__(self) -> None:
        self.script = LIFECYCLE_SCRIPT
        self.fsx = self.bed.work / "fsx"
        self.fsx.mkdir(exist_ok=True)

    @property
    def config(self) -> dict[str, Any]:
        return api_resource_config(self.groups)

    @property
    def compute_ips(self) -> list[str]:
        return [ip for group in self.groups if group.node_type == "Compute" for ip in group.ips]

    @property
    def workers(self) -> list[Node]:
        return [self.bed.nodes[ip] for ip in self.compute_ips]

    def slurm_conf(self) -> str:
        return api_slurm_conf(self.config)

    def topology(self) -> str:
        return api_topology_conf(self.config, self.network_nodes)

    def prepare(self, ip: str, *, generation: int = 0) -> Node:
        """A node as HyperPod hands it to the lifecycle script: the AMI, FSx mounted, our lifecycle folder."""
        node = self.bed.prepare(ip, generation=generation)
        node.lay_out_hyperpod_ami(self.config)
        node.binds[FSX_MOUNT_PATH] = self.fsx
        params = legacy_parameters(self.config) if LIFECYCLE_READS_PROVISIONING_PARAMETERS else None
        node.upload_lifecycle(params, self.settings)
        if ip == CONTROLLER_IP:
            self.agent_writes_configuration(node)
        return node

    def agent_writes_configuration(self, controller: Node) -> None:
        """The agent's slurm.conf and (for topology/tree) topology.conf on the controller."""
        controller.write("/opt/slurm/etc/slurm.conf", self.slurm_conf())
        if tree_topology(self.config):
            controller.write("/opt/slurm/etc/topology.conf", self.topology())

    def agent_places(self, ip: str, network_nodes: list[str]) -> None:
        """An instance (a replacement) under NETWORK_NODES: the agent recomputes topology.conf and has
        slurmctld read it."""
        self.network_nodes[ip] = list(network_nodes)
        self.controller.write("/opt/slurm/etc/topology.conf", self.topology())
        self.controller.sh("/opt/slurm/bin/scontrol reconfigure")


def boot_api_cluster(work: Path, settings: dict[str, Any]) -> ApiCluster:
    """Boots every node of GROUPS as HyperPod hands it over in API-driven mode, then runs the lifecycle on
    all of them at once."""
    bed = Bed(work)
    bed.script_env = dict(SCRIPT_ENV)
    bed.__enter__()
    try:
        cluster = ApiCluster(bed, settings)
        nodes = [cluster.prepare(ip) for group in cluster.groups for ip in group.ips]
        for node in nodes:
            node.boot()
        cluster.provision(nodes, agent_writes=False)
    except BaseException:
        bed.__exit__(None, None, None)
        raise
    return cluster
