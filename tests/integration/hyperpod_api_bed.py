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
- API reference ``API_ClusterLifeCycleConfig``: ``OnInitComplete`` "runs on the node after the AMI-based
  initialization is complete". So everything the agent does here is done before our script starts, and the
  script is the one the construct names (:data:`LIFECYCLE_SCRIPT`, ``on_init_complete.sh``), run as root with
  no arguments from the lifecycle folder, beside it the ``training_clusters.json`` the real construct writes
  for these groups in API-driven mode (:func:`construct_settings`: ``slurm_config`` api, the groups, no
  ``accounting``).
- ``sagemaker-hyperpod-ref`` with the pages above: HyperPod, not the lifecycle script, runs Slurm in this
  mode, so the agent starts the daemons before ``OnInitComplete`` (:meth:`ApiCluster.agent_starts_slurm`):
  slurmctld on the controller, then configless slurmd (``--conf-server``, the AMI's unit, which removes the
  AMI's placeholder ``slurm.conf`` itself) on every compute node.
- ``sagemaker-hyperpod-external-accounting-db-slurm``: "By default, SageMaker HyperPod deploys MariaDB on your
  cluster's controller instance" (an external ``AccountingDatabase`` needs continuous provisioning): the agent
  starts MariaDB and slurmdbd on the controller, writes ``slurmdbd.conf``, registers the cluster and puts
  ``AccountingStorageType=accounting_storage/slurmdbd`` with the controller as ``AccountingStorageHost`` in
  ``slurm.conf`` before slurmctld starts (:meth:`ApiCluster.agent_runs_accounting`). The bed's root has
  MariaDB (Debian's), so this is the real database and the real slurmdbd.
- ``sagemaker-hyperpod-topology``: HyperPod sets ``TopologyPlugin=topology/tree`` for ml.p5, ml.p5e and
  ml.p5en, ``topology/flat`` (no plugin line) as soon as one compute group is of another type, and writes
  ``topology.conf`` beside ``slurm.conf`` on Slurm 24.x (the bed's version); it recomputes it on scale-up,
  scale-down and node replacement (:meth:`ApiCluster.agent_places`). How HyperPod learns where an instance
  sits is not published (its nodes are not in the customer's account, so the customer's
  ``DescribeInstanceTopology`` does not see them): the emulation writes the file with
  :func:`training_clusters.node_scripts.parallelcluster.topology.topology_conf` from entries shaped as
  ``DescribeInstanceTopology``'s.

Not in the pages, so chosen here and said so: which daemon a login node runs (here sackd ``--conf-server``,
Slurm's login-node daemon since 23.11, https://slurm.schedmd.com/sackd.html, from a unit of the agent's, with
the AMI's placeholder ``slurm.conf`` moved aside so client commands read sackd's copy); the agent's own
slurmdbd and database credentials (a generated password in a 0600 ``slurmdbd.conf``); and who distributes
munge's key (the bed's nodes share the root's).
"""

from __future__ import annotations

import copy
import functools
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from tests.integration.hyperpod_bed import ALICE, CONTROLLER_IP, LOGIN_IP, SCRIPT_ENV, Cluster
from tests.integration.slurm_bed import Bed, Node, hyperpod_slurm_conf, node_name, resource_config, wait_until
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.hyperpod import cluster as construct
from training_clusters.constructs.slurm.users import TeamUser

from .agent_topology import topology_conf

#: Instance types HyperPod configures topology/tree for (sagemaker-hyperpod-topology).
TREE_TYPES = ("ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge")
#: The partition every compute node is in besides its group's (sagemaker-hyperpod-ref).
DEV_PARTITION = "dev"
#: Where HyperPod mounts FSx for Lustre (FsxLustreConfig.MountPath).
FSX_MOUNT_PATH = "/fsx"

#: The lifecycle script of API-driven mode (LifeCycleConfig.OnInitComplete), as the construct names it.
LIFECYCLE_SCRIPT = construct.ON_INIT_COMPLETE_SCRIPT
#: slurmdbd's port (Slurm's default), on the controller.
SLURMDBD_PORT = 6819
#: The unit the agent runs sackd from on the login node (the AMI's units are slurmd, slurmctld, slurmdbd).
AGENT_SACKD_UNIT = f"""\
[Unit]
Description=Slurm auth and cred kiosk daemon (HyperPod's agent, emulated)
After=network-online.target munge.service remote-fs.target
Wants=network-online.target

[Service]
Type=notify
User=slurm
Group=slurm
RuntimeDirectory=slurm
RuntimeDirectoryMode=0755
ExecStart=/opt/slurm/sbin/sackd --systemd --conf-server {CONTROLLER_IP}
KillMode=process

[Install]
WantedBy=multi-user.target
"""


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

    def construct_group(self) -> construct.InstanceGroup:
        """The group as the construct takes it."""
        role = {value: key for key, value in construct.SLURM_NODE_TYPES.items()}[self.node_type]
        return construct.InstanceGroup(
            name=self.name,
            instance_type=self.instance_type,
            instance_count=len(self.ips),
            role=role,
            partition=self.partition,
        )


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
    controller_ip = _ips(controller)[0]
    extra = (
        "AccountingStorageType=accounting_storage/slurmdbd\n"
        f"AccountingStorageHost={controller_ip}\n"
        f"AccountingStoragePort={SLURMDBD_PORT}\n"
    )
    if tree_topology(config):
        extra += "TopologyPlugin=topology/tree\n"
    return hyperpod_slurm_conf(controller_ip, partitions, extra=extra)


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


@functools.cache
def construct_settings(groups: tuple[InstanceGroup, ...]) -> dict[str, Any]:
    """``training_clusters.json`` as :class:`~training_clusters.constructs.hyperpod.cluster.HyperPodCluster`
    writes it for GROUPS in API-driven mode (``slurm_config`` api), with the FSx of ``/fsx``, the team user
    ALICE and no Enroot/Pyxis (the bed has no network to download them)."""
    zones = ["us-east-1a", "us-east-1b"]

    class BedStack(cdk.Stack):
        @property
        def availability_zones(self) -> list[str]:
            return zones

    stack = BedStack(cdk.App(), "Bed", env=cdk.Environment(region="us-east-1"))
    network = TrainingNetwork(stack, "Network", availability_zones=zones)
    cluster = construct.HyperPodCluster(
        stack,
        "HyperPod",
        cluster_name="ml-cluster",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[group.construct_group() for group in groups],
        lustre=construct.LustreMount(
            dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            mount_name="abcdefgh",
            mount_dir=FSX_MOUNT_PATH,
        ),
        additional_security_groups=[network.efa_security_group],
        users=[TeamUser(name=ALICE["name"], uid=ALICE["uid"])],
        slurm_config="api",
        lifecycle=construct.LifecycleOptions(enable_enroot_pyxis=False),
    )
    assert cluster.entry_script == LIFECYCLE_SCRIPT and cluster.provisioning_parameters is None
    return cluster.lifecycle_settings


@dataclass
class ApiCluster(Cluster):
    """A cluster of GROUPS in API-driven mode: the agent writes Slurm's files, runs its daemons and accounting,
    and FSx is mounted, before our ``on_init_complete.sh`` runs."""

    groups: tuple[InstanceGroup, ...] = GROUPS
    network_nodes: dict[str, list[str]] = field(default_factory=lambda: copy.deepcopy(NETWORK_NODES))
    fsx: Path = Path()
    #: systemd's InvocationID of each daemon's unit (:meth:`daemon_units`) once the agent had started Slurm,
    #: before the lifecycle script ran: a unit started again gets a new one.
    invocations_before_lifecycle: dict[str, str] = field(default_factory=dict)
    #: How long the agent took, from the nodes booted to every daemon running (accounting included).
    agent_seconds: float = 0.0

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

    def controller_daemons(self) -> tuple[str, ...]:
        """The agent's accounting runs on the controller beside slurmctld."""
        return ("slurmctld", "slurmdbd", "mariadb")

    def slurm_conf(self) -> str:
        return api_slurm_conf(self.config)

    def topology(self) -> str:
        return api_topology_conf(self.config, self.network_nodes)

    def prepare(self, ip: str, *, generation: int = 0) -> Node:
        """A node as HyperPod hands it over before the agent starts: the AMI, FSx mounted, our lifecycle
        folder with the construct's ``training_clusters.json`` (no ``provisioning_parameters.json``)."""
        node = self.bed.prepare(ip, generation=generation)
        node.lay_out_hyperpod_ami(self.config)
        node.binds[FSX_MOUNT_PATH] = self.fsx
        self.settings = construct_settings(self.groups)
        node.upload_lifecycle(None, self.settings)
        if ip == CONTROLLER_IP:
            self.agent_writes_configuration(node)
        return node

    def agent_writes_configuration(self, controller: Node) -> None:
        """The agent's slurm.conf and (for topology/tree) topology.conf on the controller."""
        controller.write("/opt/slurm/etc/slurm.conf", self.slurm_conf())
        if tree_topology(self.config):
            controller.write("/opt/slurm/etc/topology.conf", self.topology())

    def agent_runs_accounting(self, controller: Node) -> None:
        """HyperPod's default accounting: MariaDB and slurmdbd on the controller, the cluster registered."""
        password = secrets.token_hex(16)
        controller.sh("systemctl enable --now mariadb")
        controller.sh(
            "mysql --protocol=socket -u root <<'EOF'\n"
            "CREATE DATABASE IF NOT EXISTS slurm_acct_db;\n"
            f"CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '{password}';\n"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';\n"
            "EOF"
        )
        controller.write(
            "/opt/slurm/etc/slurmdbd.conf",
            "AuthType=auth/munge\nDbdHost=localhost\n"
            f"DbdPort={SLURMDBD_PORT}\nSlurmUser=slurm\nLogFile=/var/log/slurmdbd.log\nPidFile=/run/slurmdbd.pid\n"
            "StorageType=accounting_storage/mysql\nStorageHost=localhost\nStoragePort=3306\n"
            f"StorageUser=slurm\nStoragePass={password}\nStorageLoc=slurm_acct_db\n",
            0o600,
        )
        controller.sh("chown slurm:slurm /opt/slurm/etc/slurmdbd.conf && systemctl enable --now slurmdbd")
        wait_until(
            "slurmdbd answering",
            lambda: controller.sh("/opt/slurm/bin/sacctmgr -n -P show cluster", check=False).returncode == 0,
            timeout=60,
        )
        controller.sh("/opt/slurm/bin/sacctmgr -i add cluster ml-cluster")

    def agent_starts_slurm(self, node: Node) -> None:
        """The node's Slurm daemon, as the agent starts it before OnInitComplete: accounting and slurmctld on
        the controller, configless slurmd on a compute node, sackd on the login node."""
        if node.ip == CONTROLLER_IP:
            self.agent_runs_accounting(node)
            node.sh("systemctl enable --now slurmctld")
            wait_until(
                "slurmctld answering",
                lambda: "is UP" in node.sh("/opt/slurm/bin/scontrol ping", check=False).stdout,
                timeout=60,
            )
        elif node.ip == LOGIN_IP:
            node.sh("rm -f /opt/slurm/etc/slurm.conf")
            node.write("/etc/systemd/system/sackd.service", AGENT_SACKD_UNIT)
            node.sh("systemctl daemon-reload && systemctl enable --now sackd")
        else:
            node.write("/etc/default/slurmd", f"SLURMD_OPTIONS='--conf-server {CONTROLLER_IP}'\n")
            node.sh("systemctl enable --now slurmd")

    def agent_places(self, ip: str, network_nodes: list[str]) -> None:
        """An instance (a replacement) under NETWORK_NODES: the agent recomputes topology.conf and has
        slurmctld read it."""
        self.network_nodes[ip] = list(network_nodes)
        self.controller.write("/opt/slurm/etc/topology.conf", self.topology())
        self.controller.sh("/opt/slurm/bin/scontrol reconfigure")

    def agent_scales_up(self, group: InstanceGroup) -> list[Node]:
        """A new compute group: the agent's slurm.conf for the groups, read by slurmctld, then each new node
        booted with its slurmd running."""
        self.groups = (*self.groups, group)
        nodes = [self.prepare(ip) for ip in group.ips]
        self.controller.write("/opt/slurm/etc/slurm.conf", self.slurm_conf())
        self.controller.sh("/opt/slurm/bin/scontrol reconfigure")
        for node in nodes:
            node.boot()
            self.agent_starts_slurm(node)
        return nodes


def boot_api_cluster(work: Path) -> ApiCluster:
    """Boots every node of GROUPS as HyperPod hands it over in API-driven mode (the agent's configuration and
    daemons, the controller's first), then runs ``on_init_complete.sh`` on all of them at once."""
    bed = Bed(work)
    bed.script_env = dict(SCRIPT_ENV)
    bed.__enter__()
    try:
        cluster = ApiCluster(bed, {})
        nodes = [cluster.prepare(ip) for group in cluster.groups for ip in group.ips]
        for node in nodes:
            node.boot()
        started = time.monotonic()
        for node in nodes:
            cluster.agent_starts_slurm(node)
        cluster.agent_seconds = time.monotonic() - started
        cluster.invocations_before_lifecycle = cluster.daemon_units("InvocationID")
        cluster.provision(nodes, agent_writes=False)
    except BaseException:
        bed.__exit__(None, None, None)
        raise
    return cluster
