"""Every option a construct prop or an environment-file field chooses from, defined once, free of CDK.

Each option is a :class:`Choice`: a ``StrEnum`` whose value is the spelling the AWS service (or CDK) uses.
The constructs take these members; the environment file is typed with the same classes. Either may be given
as a string instead, in any case and with ``-`` or ``_`` alike (``"persistent_2"``, ``"Automatic"``,
``"efa_only"``); :meth:`Choice.parse` is the one place that conversion happens::

    >>> NodeRecovery.parse("automatic")
    <NodeRecovery.AUTOMATIC: 'Automatic'>
    >>> LustreDeploymentType.parse("scratch-1")
    Traceback (most recent call last):
    ...
    training_clusters.model.errors.ConfigurationError: must be one of SCRATCH_2, PERSISTENT_2, got 'scratch-1'
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

from training_clusters.model.errors import ConfigurationError, shown


class Choice(StrEnum):
    """An option with a fixed set of values; members compare equal to their service spelling."""

    @classmethod
    def parse(cls, value: Any) -> Self:
        """The member ``value`` names: a member, its value or its name, in any case, ``-`` and ``_`` alike.

        :raises ConfigurationError: naming the allowed values and the value received (the caller adds the
            field it came from).
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            wanted = _fold(value)
            for member in cls:
                if wanted in (_fold(member.value), _fold(member.name)):
                    return member
        raise ConfigurationError(f"must be one of {cls.allowed()}, got {shown(value)}")

    @classmethod
    def allowed(cls) -> str:
        """The values, comma-separated, for messages."""
        return ", ".join(member.value for member in cls)

    @classmethod
    def spellings(cls) -> list[str]:
        """What an environment file may write: each value as AWS spells it and in lower case."""
        spellings: list[str] = []
        for member in cls:
            for spelling in (member.value, member.value.lower()):
                if spelling not in spellings:
                    spellings.append(spelling)
        return spellings


def _fold(text: str) -> str:
    return text.strip().lower().replace("-", "_")


# --- network and storage ---


class RemovalPolicy(Choice):
    """What happens to a stateful resource (file system, bucket) when it leaves the stack."""

    RETAIN = "retain"
    """Kept, with its data; delete it yourself when you no longer need it. The default everywhere."""
    DESTROY = "destroy"
    """Deleted with the stack, data included. For tests and throw-away environments."""


class PlacementStrategy(Choice):
    """How EC2 places a placement group's instances."""

    CLUSTER = "cluster"
    """Packed into one low-latency network segment in one AZ: what EFA training wants."""
    PARTITION = "partition"
    """Spread over up to 7 partitions that share no racks; for large fault-isolated fleets."""
    SPREAD = "spread"
    """Each instance on distinct hardware (at most 7 per AZ); for small critical groups such as controllers."""


class SpreadLevel(Choice):
    """Granularity of a spread placement group."""

    RACK = "rack"
    HOST = "host"


class LustreDeploymentType(Choice):
    """FSx for Lustre deployment types we support."""

    SCRATCH_2 = "SCRATCH_2"
    """Temporary storage, no replication; cheapest per GiB. For datasets re-importable from S3."""
    PERSISTENT_2 = "PERSISTENT_2"
    """Replicated within the AZ, servers replaced on failure, customer KMS keys; for checkpoints."""


# --- SageMaker HyperPod ---


class NodeRole(Choice):
    """What a HyperPod Slurm instance group does."""

    CONTROLLER = "controller"
    """Runs slurmctld; exactly one group, of one instance."""
    LOGIN = "login"
    """Where users log in and submit jobs; at most one group."""
    WORKER = "worker"
    """Runs slurmd in its partition."""


class DeepHealthCheck(Choice):
    """HyperPod's on-start deep health checks for accelerated instances."""

    INSTANCE_STRESS = "InstanceStress"
    INSTANCE_CONNECTIVITY = "InstanceConnectivity"


class NodeRecovery(Choice):
    """What HyperPod does with a node that fails its health checks."""

    AUTOMATIC = "Automatic"
    NONE = "None"


class NodeProvisioningMode(Choice):
    """How HyperPod provisions an instance group's nodes (``NodeProvisioningMode``)."""

    CONTINUOUS = "Continuous"
    """Nodes join as they become available, and the cluster is usable before every node is; HyperPod keeps
    trying for the missing ones. Without it, creation or scaling succeeds or fails as a whole."""


class SlurmConfigMode(Choice):
    """Who configures Slurm on a HyperPod Slurm cluster ("SageMaker HyperPod Slurm configuration",
    https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ref.html)."""

    API = "api"
    """API-driven: every instance group carries ``SlurmConfig`` (Controller, Login, or Compute with its
    partition) and FSx goes in its ``InstanceStorageConfigs``; HyperPod writes the node and partition lines
    of slurm.conf, starts the daemons and mounts FSx, then runs our reduced lifecycle script
    (``OnInitComplete``). No ``provisioning_parameters.json``. AWS recommends it for new clusters."""
    LEGACY = "legacy"
    """``provisioning_parameters.json`` read by our ``on_create.sh`` (``OnCreate``), which mounts FSx,
    starts the Slurm daemons and runs accounting on the controller. For clusters deployed by an earlier
    version of this library: HyperPod refuses ``SlurmConfig`` beside that file."""


class SlurmConfigStrategy(Choice):
    """``Orchestrator.Slurm.SlurmConfigStrategy``: what HyperPod does with slurm.conf edits made on the
    controller when the API's configuration changes (``sagemaker-hyperpod-ref``)."""

    MANAGED = "Managed"
    """The API is the truth: an update finding slurm.conf edited fails and rolls back."""
    OVERWRITE = "Overwrite"
    """The API's configuration is forced: edits made on the controller are lost."""
    MERGE = "Merge"
    """Edits made on the controller are kept beside the API's configuration."""


class AutoScaler(Choice):
    """Who scales a HyperPod EKS cluster's instance groups (``AutoScaling.AutoScalerType``)."""

    KARPENTER = "karpenter"
    """HyperPod's managed Karpenter: it adds and removes nodes of the instance groups a ``HyperpodNodeClass``
    names as pods wait for them ("Autoscaling on SageMaker HyperPod EKS")."""


class HyperPodAccounting(Choice):
    """Where slurmdbd on a HyperPod controller keeps Slurm's accounting (``sacct``, fair share)."""

    NONE = "none"
    """No accounting (slurmdbd is not run)."""
    EXTERNAL = "external"
    """A :class:`~training_clusters.constructs.SlurmAccountingDatabase` (Aurora MySQL): survives the
    controller, shared by clusters."""
    LOCAL = "local"
    """MariaDB on the controller: for small clusters; its data is lost when the controller is replaced."""


# --- capacity (every orchestrator) ---


class CapacityKind(Choice):
    """How instances are obtained: see :class:`training_clusters.model.capacity.Capacity`."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    RESERVATION = "reservation"
    """An On-Demand Capacity Reservation (``cr-...``) or a resource group of them."""
    CAPACITY_BLOCK = "capacity-block"
    """An EC2 Capacity Block for ML (``cr-...``): a fixed window of co-located GPU instances."""
    TRAINING_PLAN = "training-plan"
    """A SageMaker training plan (HyperPod only)."""


# --- AWS ParallelCluster ---


class OperatingSystem(Choice):
    """``Image.Os``: the operating systems ParallelCluster 3.16 supports."""

    ALINUX2023 = "alinux2023"
    UBUNTU2204 = "ubuntu2204"
    UBUNTU2404 = "ubuntu2404"
    RHEL8 = "rhel8"
    RHEL9 = "rhel9"
    ROCKY8 = "rocky8"
    ROCKY9 = "rocky9"


class QueueUpdateStrategy(Choice):
    """What happens to running compute nodes when a queue's settings change."""

    DRAIN = "DRAIN"
    """Nodes finish their jobs, then are replaced."""
    COMPUTE_FLEET_STOP = "COMPUTE_FLEET_STOP"
    """The update waits until the compute fleet is stopped."""
    TERMINATE = "TERMINATE"
    """Nodes are replaced at once; their jobs are requeued."""


class QueuePlacement(Choice):
    """The placement group of a ParallelCluster queue's compute nodes."""

    SHARED = "shared"
    """The cluster's ``placement_group`` (a :class:`TrainingPlacementGroup` made by this library)."""
    MANAGED = "managed"
    """ParallelCluster creates one per compute resource."""
    NONE = "none"
    """No placement group; not allowed with EFA."""


class DeletionPolicy(Choice):
    """What ParallelCluster does with a cluster when the stack lets go of it."""

    RETAIN = "Retain"
    DELETE = "Delete"


# --- Amazon EKS ---


class AccessMode(Choice):
    """How an EKS cluster authenticates IAM principals. Access entries need one of these two."""

    API = "API"
    """Access entries only (the EKS API); the ``aws-auth`` ConfigMap is ignored."""
    API_AND_CONFIG_MAP = "API_AND_CONFIG_MAP"
    """Access entries and the legacy ``aws-auth`` ConfigMap."""


class EfaInterfaceType(Choice):
    """Interface type of the EFA interfaces after the primary one (the primary is always ``efa``)."""

    EFA = "efa"
    """EFA with an IP address (ENA + EFA): works with every VPC CNI version, uses one VPC IP per card."""
    EFA_ONLY = "efa-only"
    """EFA without an IP address: saves VPC IPs; needs VPC CNI 1.18.5 or later on EKS."""


class MigStrategy(Choice):
    """How the NVIDIA device plugin exposes MIG partitions (A100, H100, H200, B200 only)."""

    NONE = "none"
    """Whole GPUs only."""
    SINGLE = "single"
    """Every GPU of a node split the same way; partitions appear as ``nvidia.com/gpu``."""
    MIXED = "mixed"
    """Partitions appear as ``nvidia.com/mig-<profile>`` resources."""


@dataclass(frozen=True)
class MigLayout:
    """How the GPU Operator's MIG manager partitions every GPU of a nodegroup (see :meth:`parse`).

    ``all-<profile>`` (``all-1g.10gb``) splits each GPU into as many instances of one profile as fit;
    ``all-balanced`` into two of the smallest 1g profile, one 2g and one 3g (mig-parted's ``all-balanced``);
    a custom layout names the instances of each GPU (``{"3g.40gb": 1, "4g.40gb": 1}``). Whether the profiles
    exist on the nodegroup's GPU is checked against the catalogue (:mod:`training_clusters.workloads.mig`).

    :param name: ``all-<profile>`` or ``all-balanced``; None for a custom layout.
    :param devices: A custom layout's instances per GPU, ``(profile, count)`` pairs; empty otherwise.
    """

    name: str | None = None
    devices: tuple[tuple[str, int], ...] = ()

    BALANCED = "all-balanced"

    @classmethod
    def parse(cls, value: Any) -> MigLayout:
        """A layout from its file spelling: ``"all-<profile>"``, ``"all-balanced"`` or ``{profile: count}``.

        :raises ConfigurationError: naming the allowed forms and the value received.
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, str) and value.startswith("all-") and len(value) > len("all-"):
            return cls(name=value)
        if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
            counts = tuple(value.items())
            if all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for _, n in counts):
                return cls(devices=tuple(sorted(counts)))
        raise ConfigurationError(
            "must be 'all-<profile>' (e.g. all-1g.10gb), 'all-balanced' or a mapping of MIG profiles to "
            f"instances per GPU (e.g. {{3g.40gb: 1, 4g.40gb: 1}}), got {shown(value)}"
        )

    @property
    def uniform_profile(self) -> str | None:
        """The one profile of an ``all-<profile>`` layout, else None."""
        if self.name is None or self.name == self.BALANCED:
            return None
        return self.name.removeprefix("all-")

    def spelling(self) -> str | dict[str, int]:
        """The layout as the environment file writes it."""
        return self.name if self.name is not None else dict(self.devices)


@dataclass(frozen=True)
class TimeSlicing:
    """Share each GPU between ``replicas`` pods by CUDA time-slicing (no memory isolation).

    Taken by :class:`~training_clusters.constructs.eks.addons.nvidia_device_plugin.NvidiaDevicePlugin` and built from the
    environment file's ``eks.addons.nvidia_device_plugin`` section; its rules live in
    :mod:`training_clusters.rules.eks`.

    :param replicas: Pods per GPU, 2 or more.
    :param rename_by_default: Advertise shared GPUs as ``nvidia.com/gpu.shared``. Default: False.
    :param fail_requests_greater_than_one: Refuse pods asking for more than one shared GPU (which would
        not get more compute). Default: True.
    """

    replicas: int
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = True


@dataclass(frozen=True)
class Mps:
    """Share each GPU between ``replicas`` pods through CUDA MPS (memory and compute split evenly).

    :param replicas: Pods per GPU, 2 to 48.
    """

    replicas: int


#: Every option, for tests and the schema.
ALL_CHOICES: tuple[type[Choice], ...] = (
    RemovalPolicy,
    PlacementStrategy,
    SpreadLevel,
    LustreDeploymentType,
    NodeRole,
    DeepHealthCheck,
    NodeRecovery,
    OperatingSystem,
    QueueUpdateStrategy,
    QueuePlacement,
    DeletionPolicy,
    AccessMode,
    EfaInterfaceType,
    MigStrategy,
    CapacityKind,
)


# --- AWS Parallel Computing Service (PCS) ---


class SlurmVersion(Choice):
    """The Slurm versions AWS PCS runs (``Scheduler.Version``; botocore's ``pcs`` model lists the valid values).

    See https://docs.aws.amazon.com/pcs/latest/userguide/slurm-versions.html for each version's end of support.
    """

    V24_11 = "24.11"
    V25_05 = "25.05"
    V25_11 = "25.11"
    V26_05 = "26.05"


class PcsClusterSize(Choice):
    """How large a PCS cluster's managed controller is (``Size``): it caps compute nodes and jobs."""

    SMALL = "SMALL"
    """Up to 32 compute nodes and 256 jobs."""
    MEDIUM = "MEDIUM"
    """Up to 512 compute nodes and 8,192 jobs."""
    LARGE = "LARGE"
    """Up to 2,048 compute nodes and 16,384 jobs."""


class SlurmAccounting(Choice):
    """Slurm accounting on a PCS cluster (``SlurmConfiguration.Accounting.Mode``)."""

    NONE = "NONE"
    """No accounting database."""
    STANDARD = "STANDARD"
    """PCS runs slurmdbd for the cluster (``sacct``, fair share); PCS bills it by the hour."""


ALL_CHOICES = (*ALL_CHOICES, SlurmVersion, PcsClusterSize, SlurmAccounting)
ALL_CHOICES = (*ALL_CHOICES, NodeProvisioningMode, HyperPodAccounting)


# --- EKS job layer (Kueue) ---


class QueuePreemption(Choice):
    """Which admitted jobs a pending job of a Kueue ClusterQueue may evict (``spec.preemption``): within the
    queue (``withinClusterQueue``), or to take back its lent quota (``reclaimWithinCohort``), or to borrow
    (``borrowWithinCohort.policy``). Evicted jobs are requeued whole."""

    NEVER = "Never"
    """Never evict: a job waits until quota frees up. Kueue's default."""
    LOWER_PRIORITY = "LowerPriority"
    """Evict jobs of lower priority (their ``WorkloadPriorityClass`` or pod priority)."""
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
    """Also evict jobs of equal priority admitted after this one was created (within the queue only)."""
    ANY = "Any"
    """Evict any job that borrowed this queue's quota, whatever its priority (reclaiming only)."""


ALL_CHOICES = (*ALL_CHOICES, QueuePreemption)


class PodSecurityLevel(Choice):
    """The Pod Security Standards level a team namespace enforces (its ``pod-security.kubernetes.io/enforce``
    label; https://kubernetes.io/docs/concepts/security/pod-security-standards/)."""

    BASELINE = "baseline"
    """No privileged containers, host namespaces, hostPath volumes, host ports or added capabilities beyond
    the default set: what a pod needs to reach its node. Our acceptance jobs and runtimes run under it."""
    RESTRICTED = "restricted"
    """Baseline, and every container non-root with ALL capabilities dropped, no privilege escalation, a
    seccomp profile and only ephemeral or claimed volumes. Images that run as root (the NCCL tests image, the
    MPI launcher's sshd) are refused."""


ALL_CHOICES = (*ALL_CHOICES, PodSecurityLevel)


class TopologyPlacement(Choice):
    """How a job's GPU pods ask Kueue to place them by EC2 network topology, on the nodegroups whose instance
    type reports it (EKS labels their nodes ``topology.k8s.aws/network-node-layer-1..3``): the pod-set
    annotations of Kueue's topology-aware scheduling, naming the instance's own network node (layer 3)."""

    PREFERRED = "preferred"
    """``kueue.x-k8s.io/podset-preferred-topology``: all pods under one layer-3 network node if they fit,
    else under the fewest nodes one layer up, and so on; never waits for a closer placement. The default."""
    REQUIRED = "required"
    """``kueue.x-k8s.io/podset-required-topology``: all pods under one layer-3 network node, or the job waits."""
    OFF = "off"
    """No Topology, no annotation: the scheduler places pods anywhere on the nodegroup."""


ALL_CHOICES = (*ALL_CHOICES, TopologyPlacement)


# --- SageMaker HyperPod task governance ---


class ResourceSharingStrategy(Choice):
    """How a team of HyperPod task governance shares idle compute (``ComputeQuota``
    ``ResourceSharingConfig.Strategy``; https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceSharingConfig.html)."""

    LEND = "Lend"
    """The team's idle quota may be lent to teams that borrow; the team borrows none."""
    DONT_LEND = "DontLend"
    """The team neither lends its idle quota nor borrows."""
    LEND_AND_BORROW = "LendAndBorrow"
    """The team lends its idle quota and borrows others', up to its borrow limit. The service's default."""


class TeamPreemption(Choice):
    """Whether a team's pending task may evict the team's own running tasks of lower priority (``ComputeQuota``
    ``PreemptTeamTasks``)."""

    NEVER = "Never"
    """A pending task waits for the team's quota to free up."""
    LOWER_PRIORITY = "LowerPriority"
    """A pending task evicts the team's running tasks of a lower priority class. The service's default."""


ALL_CHOICES = (*ALL_CHOICES, ResourceSharingStrategy, TeamPreemption)


class SlurmTopology(Choice):
    """Whether a Slurm cluster (ParallelCluster, PCS) places multi-node jobs by EC2 network topology: Slurm's
    ``topology/tree`` over the network nodes EC2 instance topology reports, on the queues whose every instance
    type it describes (p5, p5e, p5en, p6, trn2 and the like); a queue that mixes in another type stays flat."""

    TREE = "tree"
    """``TopologyPlugin=topology/tree`` where the queues' types allow it; jobs ask with ``--switches``. The default."""
    OFF = "off"
    """No topology plugin: Slurm treats the nodes as one flat network."""


ALL_CHOICES = (*ALL_CHOICES, SlurmTopology)
