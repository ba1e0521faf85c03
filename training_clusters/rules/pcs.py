"""AWS Parallel Computing Service (PCS): what its API accepts and its user guide requires, free of CDK imports.

Names, limits and patterns are the API's own (botocore's ``pcs`` model, ``2023-02-10``: ``ClusterName``,
``ComputeNodeGroupName``, ``QueueName``, ``AmiId``, the ``ScaleDownIdleTimeInSeconds`` bounds; see
https://docs.aws.amazon.com/pcs/latest/APIReference/API_CreateCluster.html); the cluster sizes are
https://docs.aws.amazon.com/pcs/latest/userguide/working-with_clusters_size.html. CloudFormation checks
none of them before it creates the cluster, so a bad value would fail half-way through a deployment; here it
fails at synth time or when the environment file is loaded. Each ``*_problem`` function returns ``None`` when
the value is fine, else the sentence that explains what is allowed; the caller prefixes the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from training_clusters.catalog import InstanceType
from training_clusters.model.options import PcsClusterSize
from training_clusters.rules.common import SYSTEM_MOUNT_DIRS, mount_dir_problem, pattern_problem
from training_clusters.rules.common import duplicates_problem as duplicates_problem
from training_clusters.rules.instance_types import efa_interfaces_problem as efa_interfaces_problem

CLUSTER_NAME_MAX_LENGTH = 40
#: Compute node group and queue names.
NAME_MAX_LENGTH = 25
NAME_MIN_LENGTH = 3
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")

#: Compute nodes a cluster of each size manages (login nodes count too: they are a compute node group).
MAX_NODES = {PcsClusterSize.SMALL: 32, PcsClusterSize.MEDIUM: 512, PcsClusterSize.LARGE: 2048}

#: ``ScaleDownIdleTimeInSeconds`` bounds of the cluster's Slurm configuration.
MAX_SCALE_DOWN_IDLE_SECONDS = 10_000_000

_AMI_ID = re.compile(r"^ami-([0-9a-f]{8}|[0-9a-f]{17})$")
#: SSM parameter names: letters, digits and ``_.-/``; a path starts with ``/`` (SSM's own rule).
_SSM_PARAMETER = re.compile(r"^(/[A-Za-z0-9_.-]+)+$|^[A-Za-z0-9_.-]+$")
_SSM_PARAMETER_MAX_LENGTH = 2048
_SLURM_PARAMETER = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: gp3 volume sizes EBS accepts.
MIN_ROOT_VOLUME_GIB, MAX_ROOT_VOLUME_GIB = 8, 16_384


def _name_problem(name: str, maximum: int) -> str | None:
    if problem := pattern_problem(
        name, _NAME, "must start with a letter and hold only letters, digits and hyphens"
    ):
        return problem
    if not NAME_MIN_LENGTH <= len(name) <= maximum:
        return f"must be {NAME_MIN_LENGTH} to {maximum} characters long, got '{name}' ({len(name)})"
    return None


def pcs_cluster_name_problem(name: str) -> str | None:
    """``ClusterName``: a letter, then letters, digits and hyphens; 3 to 40 characters."""
    return _name_problem(name, CLUSTER_NAME_MAX_LENGTH)


def pcs_name_problem(name: str) -> str | None:
    """``ComputeNodeGroupName`` and ``QueueName``: a letter, then letters, digits and hyphens; 3 to 25."""
    return _name_problem(name, NAME_MAX_LENGTH)


def scale_down_idle_time_problem(seconds: int) -> str | None:
    """``ScaleDownIdleTimeInSeconds``: 1 to 10,000,000."""
    if 1 <= seconds <= MAX_SCALE_DOWN_IDLE_SECONDS:
        return None
    return f"must be between 1 and {MAX_SCALE_DOWN_IDLE_SECONDS:,} seconds, got {seconds}"


def slurm_custom_settings_problem(settings: Mapping[str, str]) -> str | None:
    """Custom Slurm settings: ``ParameterName`` is a slurm.conf key; neither part may break its line."""
    for name, value in settings.items():
        if not _SLURM_PARAMETER.fullmatch(name):
            return f"must name slurm.conf parameters (a letter, then letters, digits and _), got '{name}'"
        if not isinstance(value, str) or "\n" in value or not value.strip():
            return f"must give each parameter a one-line value, got {value!r} for '{name}'"
    return None


def node_counts_problem(min_count: int, max_count: int) -> str | None:
    """``ScalingConfiguration``: 0 <= min <= max, and max at least 1 (the caller prefixes ``min_count``)."""
    if max_count < 1:
        return f"max_count must be 1 or more, got {max_count}"
    if not 0 <= min_count <= max_count:
        return f"min_count must lie between 0 and max_count ({max_count}), got {min_count}"
    return None


def cluster_size_problem(size: PcsClusterSize, node_count: int) -> str | None:
    """The most nodes the node groups may run together must fit the cluster's size."""
    limit = MAX_NODES[size]
    if node_count <= limit:
        return None
    larger = [s.value for s in PcsClusterSize if MAX_NODES[s] >= node_count]
    hint = f"use size {larger[0]}" if larger else "split the fleet across clusters"
    return (
        f"is {size.value}, which manages at most {limit} nodes, but the node groups' max_count (login nodes "
        f"included) add up to {node_count}; {hint}"
    )


def ami_problem(ami_id: str | None, ami_ssm_parameter: str | None) -> str | None:
    """Exactly one AMI source: an explicit id, or the SSM parameter CloudFormation resolves at deploy time."""
    if ami_id is not None and ami_ssm_parameter is not None:
        return f"and ami_ssm_parameter both name the AMI (got '{ami_id}' and '{ami_ssm_parameter}'); give one of them"
    if ami_id is None and ami_ssm_parameter is None:
        return (
            "or ami_ssm_parameter is required: PCS launches the AMI you give (one with the PCS agent, Slurm, "
            "the EFA software and the Lustre client, e.g. a PCS sample AMI or one built from it)"
        )
    if ami_id is None:
        return None
    return pattern_problem(ami_id, _AMI_ID, "must be an AMI id such as ami-0123456789abcdef0")


def ssm_parameter_name_problem(name: str) -> str | None:
    """An SSM parameter name: ``/path/to/name`` or ``name``, letters, digits and ``_.-``."""
    requirement = "must be an SSM parameter name such as /training-clusters/pcs/ami (letters, digits, _ . - and / separators)"
    return pattern_problem(name, _SSM_PARAMETER, requirement, max_length=_SSM_PARAMETER_MAX_LENGTH)


def efa_flag_problem(instance: InstanceType, efa: bool) -> str | None:
    """``efa: true`` on an instance type without EFA."""
    if not efa or instance.efa_supported:
        return None
    return f"is true, but {instance.name} has no EFA interface; use an EFA-capable type or efa: false"


def root_volume_problem(size_gib: int) -> str | None:
    """The gp3 root volume's size."""
    if MIN_ROOT_VOLUME_GIB <= size_gib <= MAX_ROOT_VOLUME_GIB:
        return None
    return f"must be between {MIN_ROOT_VOLUME_GIB} and {MAX_ROOT_VOLUME_GIB} GiB, got {size_gib}"


def queue_node_groups_problem(queue_groups: Iterable[str], known: Iterable[str]) -> str | None:
    """A queue lists at least one compute node group, each one of the cluster's (login nodes are not)."""
    groups = list(queue_groups)
    names = list(known)
    if not groups:
        return "must list at least one compute node group"
    unknown = [g for g in groups if g not in names]
    if unknown:
        return f"names '{unknown[0]}', which is not a compute node group of the cluster ({', '.join(names)})"
    return None


#: Directories of the operating system, Slurm and the PCS agent, never a shared file system's mount point.
RESERVED_MOUNT_DIRS = SYSTEM_MOUNT_DIRS | frozenset(("/opt/aws",))


def pcs_mount_dir_problem(mount_dir: str) -> str | None:
    """Where every node mounts the shared file system: an absolute directory the system does not own."""
    return mount_dir_problem(
        mount_dir,
        reserved=RESERVED_MOUNT_DIRS,
        reserved_by="belongs to the operating system, Slurm or the PCS agent",
        example="/fsx",
    )


def node_groups_problem(count: int) -> str | None:
    """A PCS cluster runs its jobs on compute node groups: at least one."""
    return None if count >= 1 else "must hold at least one compute node group"


def efa_interfaces_enabled_problem(efa: bool, instance_type: str, group: str) -> str | None:
    """``efa_interfaces`` counts EFA interfaces: only where the group's EFA is on."""
    return None if efa else f"applies only with EFA, but {instance_type} in '{group}' has EFA off"


def login_count_problem(count: int) -> str | None:
    """The static login node group: 0 (none) or more."""
    return None if count >= 0 else f"must be 0 or more, got {count}"


def queues_problem(count: int | None) -> str | None:
    """``queues`` when given (``count`` of them; None when omitted, one queue per group): at least one."""
    if count is None or count >= 1:
        return None
    return "must hold at least one queue when given; omit it for one per group"
