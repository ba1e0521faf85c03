"""AWS ParallelCluster 3.16 rules that its config schema does not check, free of CDK imports.

The limits and patterns are ParallelCluster's own (``pcluster/constants.py`` and
``pcluster/validators/cluster_validators.py`` of aws-parallelcluster 3.16.1): its validators apply them only
when a cluster is created, with AWS credentials; here they fail at synth time or when an environment file is
loaded. Each ``*_problem`` function returns ``None`` when the value is fine, else the sentence that explains
what is allowed; the caller prefixes the field (a construct prop or an environment-file path).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence

from training_clusters.catalog import CATALOG, InstanceType
from training_clusters.model.capacity import Capacity
from training_clusters.model.options import CapacityKind
from training_clusters.model.releases import PARALLELCLUSTER_VERSION
from training_clusters.rules.common import SYSTEM_MOUNT_DIRS, pattern_problem
from training_clusters.rules.common import duplicates_problem as duplicates_problem
from training_clusters.rules.common import mount_dir_problem as common_mount_dir_problem
from training_clusters.rules.network import internet_wide_problem
from training_clusters.rules.tags import tag_key_problem, tag_value_problem

#: The ParallelCluster release whose CloudFormation provider and schema this library targets.
PCLUSTER_VERSION = PARALLELCLUSTER_VERSION

#: ``Image.Os`` values ParallelCluster 3.16 accepts.
SUPPORTED_OSES = ("alinux2023", "ubuntu2204", "ubuntu2404", "rhel8", "rhel9", "rocky8", "rocky9")
#: Operating systems earlier releases accepted, with why they are gone.
RETIRED_OSES = {
    "alinux2": "Amazon Linux 2 is no longer supported by ParallelCluster 3.16",
    "ubuntu2004": "Ubuntu 20.04 is no longer supported by ParallelCluster 3.16",
    "centos7": "CentOS 7 is no longer supported by ParallelCluster 3.16",
}

CLUSTER_NAME_MAX_LENGTH = 60
_CLUSTER_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]*$")
#: Queue and compute-resource names (ParallelCluster's ``NameValidator`` applies to both).
NAME_MAX_LENGTH = 25
_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
MAX_QUEUES = 50
MAX_COMPUTE_RESOURCES_PER_QUEUE = 50
MAX_COMPUTE_RESOURCES_PER_CLUSTER = 50

#: ``Monitoring.Logs.CloudWatch.RetentionInDays`` values ParallelCluster accepts (a subset of CloudWatch's).
PCLUSTER_LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653)

#: Directories ParallelCluster refuses as shared-storage mount points (with the system's, which every
#: service refuses: :data:`~training_clusters.rules.common.SYSTEM_MOUNT_DIRS`).
RESERVED_MOUNT_DIRS = SYSTEM_MOUNT_DIRS | frozenset(
    ("/media", "/mnt", "/opt/parallelcluster", "/opt/parallelcluster/shared",
     "/opt/parallelcluster/shared_login_nodes", "/opt/intel", "/srv")
)  # fmt: skip
_PREFIX_LIST = re.compile(r"^pl-[a-zA-Z0-9]+$")


def os_problem(os: str) -> str | None:
    """``Image.Os``: one of :data:`SUPPORTED_OSES`."""
    if os in SUPPORTED_OSES:
        return None
    allowed = ", ".join(SUPPORTED_OSES)
    if os in RETIRED_OSES:
        return f"'{os}' is not allowed: {RETIRED_OSES[os]}; use one of {allowed}"
    return f"must be one of {allowed}, got '{os}'"


def cluster_name_problem(name: str) -> str | None:
    """``ClusterName``: a letter, then letters, digits and hyphens; at most 60 characters."""
    requirement = (
        "must start with a letter and hold only letters, digits and hyphens, "
        f"at most {CLUSTER_NAME_MAX_LENGTH} characters"
    )
    return pattern_problem(name, _CLUSTER_NAME, requirement, max_length=CLUSTER_NAME_MAX_LENGTH)


def accounting_database_name(cluster_name: str) -> str:
    """The database ParallelCluster's slurmdbd keeps accounting in when ``Database.DatabaseName`` is not set:
    the cluster's name with ``-`` as ``_`` (its cookbook's
    cookbooks/aws-parallelcluster-slurm/files/default/head_node_slurm/slurm/templates/
    slurm_parallelcluster_slurmdbd.conf, ``StorageLoc``)."""
    return cluster_name.replace("-", "_")


def slurm_name_problem(name: str) -> str | None:
    """Queue and compute-resource names: ``^[a-z][a-z0-9-]*$``, at most 25 characters, not ``default``."""
    lowercase = "must start with a lowercase letter and hold only lowercase letters, digits and hyphens"
    if problem := pattern_problem(name, _NAME, lowercase):
        return problem
    if len(name) > NAME_MAX_LENGTH:
        return f"must be at most {NAME_MAX_LENGTH} characters, got '{name}' ({len(name)})"
    if name == "default":
        return "must not be 'default' (reserved by Slurm)"
    return None


def count_problem(count: int, maximum: int) -> str | None:
    """How many queues / compute resources: at least one, at most ``maximum``."""
    if 1 <= count <= maximum:
        return None
    return f"must hold between 1 and {maximum} entries, got {count}"


def min_count_problem(min_count: int, max_count: int) -> str | None:
    """``MinCount``: 0 or more and not above ``MaxCount`` (the caller prefixes ``min_count``)."""
    if min_count < 0:
        return f"must be 0 or more, got {min_count}"
    if min_count > max_count:
        return f"{min_count} is greater than max_count {max_count}"
    return None


def max_count_problem(max_count: int) -> str | None:
    """``MaxCount``: 1 or more."""
    if max_count < 1:
        return f"must be 1 or more, got {max_count}"
    return None


def head_node_memory_problem(head_node: InstanceType, compute_nodes: int) -> str | None:
    """The head node's memory for ``compute_nodes`` (every compute resource's ``MaxCount`` added up).

    ParallelCluster's ``HeadNodeMemorySizeValidator`` refuses, when the cluster is created, a head node with
    less than ``compute_nodes / 25 + 0.6`` GiB (0.6 for the system), asking at most 16 GiB.
    """
    required = min(compute_nodes / 25 + 0.6, 16)
    if head_node.memory_gib >= required:
        return None
    return (
        f"{head_node.name} has {head_node.memory_gib:g} GiB of memory, and ParallelCluster refuses a head node "
        f"of less than {round(required, 2):g} GiB for {compute_nodes:,} compute nodes (max_count added up: "
        "1 GiB per 25 nodes and 0.6 for the system, at most 16); choose a larger head node or lower max_count"
    )


def efa_enabled_problem(instance: InstanceType) -> str | None:
    """``Efa.Enabled`` on an instance type without EFA."""
    if instance.efa_supported:
        return None
    capable = ", ".join(name for name, it in CATALOG.items() if it.efa_supported)
    return (
        f"is enabled, but {instance.name} has no EFA interface; EFA-capable types in the catalogue: {capable}"
    )


def gdr_problem(instance: InstanceType, efa_enabled: bool) -> str | None:
    """``Efa.GdrSupport`` where GPUDirect RDMA does not exist, or without EFA."""
    if not efa_enabled:
        return "requires efa to be enabled"
    if instance.gpudirect_rdma:
        return None
    capable = ", ".join(name for name, it in CATALOG.items() if it.gpudirect_rdma)
    return f"is enabled, but {instance.name} has no GPUDirect RDMA; types with it in the catalogue: {capable}"


def ssh_allowed_ips_problem(allowed: str) -> str | None:
    """``HeadNode.Ssh.AllowedIps``: an IPv4 CIDR narrower than the internet, or a prefix list id."""
    if _PREFIX_LIST.fullmatch(allowed):
        return None
    try:
        ipaddress.IPv4Network(allowed, strict=False)
    except ValueError:
        return f"must be an IPv4 CIDR such as 10.0.0.0/16 or a prefix list id (pl-...), got '{allowed}'"
    if wide := internet_wide_problem([allowed]):
        return f"must not open SSH to the whole internet, {wide}; give the VPC CIDR or a prefix list"
    return None


def ssh_key_problem(key_name: str | None, key_field: str = "key_name") -> str | None:
    """``ssh_allowed_ips`` opens SSH, which needs a key pair (``key_field`` names it as the caller writes it)."""
    if key_name is not None:
        return None
    return f"applies only with {key_field} (without a key pair, use SSM)"


def cluster_compute_resources_problem(total: int) -> str | None:
    """``Scheduling.SlurmQueues[].ComputeResources``: at most 50 in the whole cluster."""
    if total <= MAX_COMPUTE_RESOURCES_PER_CLUSTER:
        return None
    return (
        f"hold {total} compute resources in all; ParallelCluster allows at most "
        f"{MAX_COMPUTE_RESOURCES_PER_CLUSTER} per cluster"
    )


def efa_placement_problem(placement: str, efa_resources: Sequence[str]) -> str | None:
    """A queue with EFA compute resources (``efa_resources``, by name) needs a placement group: ``placement``
    (shared, managed or none) is not none."""
    if not efa_resources or placement != "none":
        return None
    return (
        f"is none, but compute resource '{efa_resources[0]}' uses EFA, which needs a placement group; "
        "use shared or managed"
    )


def shared_placement_problem(placement: str, has_group: bool) -> str | None:
    """``shared`` places the queue in the cluster's own placement group, so there must be one."""
    if placement != "shared" or has_group:
        return None
    return "is shared, but the cluster has no placement_group; give one or use managed"


def stack_name_problem(cluster_name: str, stack_name: str) -> str | None:
    """ParallelCluster creates a CloudFormation stack named after the cluster: not the name of ours."""
    if cluster_name != stack_name:
        return None
    return f"'{cluster_name}' must differ from the stack's name: ParallelCluster creates a stack of that name"


def action_key_problem(key: str) -> str | None:
    """A custom action's script: an S3 object key (relative, not empty)."""
    if key and not key.startswith("/"):
        return None
    return f"must be an object key such as scripts/on-node-configured.sh, got '{key}'"


def login_count_problem(count: int) -> str | None:
    """A login node pool: 1 node or more."""
    return None if count >= 1 else f"must be 1 or more, got {count}"


def pcluster_log_retention_problem(days: int) -> str | None:
    """``RetentionInDays``: one of :data:`PCLUSTER_LOG_RETENTION_DAYS`."""
    if days in PCLUSTER_LOG_RETENTION_DAYS:
        return None
    return f"must be one of {', '.join(str(d) for d in PCLUSTER_LOG_RETENTION_DAYS)}, got {days}"


def scaledown_idletime_problem(minutes: int) -> str | None:
    """``ScaledownIdletime``: whole minutes, 1 or more."""
    if minutes >= 1:
        return None
    return f"must be 1 or more minutes, got {minutes}"


def mount_dir_problem(mount_dir: str) -> str | None:
    """Shared-storage ``MountDir``: an absolute directory ParallelCluster does not reserve."""
    return common_mount_dir_problem(
        mount_dir,
        reserved=RESERVED_MOUNT_DIRS,
        reserved_by="is reserved by the operating system or ParallelCluster",
        example="/shared",
    )


# --- capacity (see training_clusters.model.capacity) and health checks


def compute_resource_capacity_problem(capacity: Capacity) -> str | None:
    """A compute resource's own ``capacity``: a reservation or Capacity Block (``CapacityReservationTarget``).

    On-Demand and Spot are the queue's ``CapacityType``, so they belong on the queue.
    """
    if capacity.kind in (CapacityKind.RESERVATION, CapacityKind.CAPACITY_BLOCK):
        return None
    return (
        f"of a compute resource must be a reservation or a capacity-block, got {capacity.kind}; "
        "on-demand and spot are the queue's capacity"
    )


def queue_capacity_problem(
    queue: Capacity, resources: Sequence[tuple[str, Capacity | None, int, int]]
) -> str | None:
    """The queue's capacity and its compute resources' ``(name, capacity, min_count, max_count)`` together.

    ParallelCluster's ``CapacityType`` belongs to the queue: a Capacity Block on one compute resource makes
    the queue CAPACITY_BLOCK, so every compute resource needs a block; reservations hold On-Demand capacity, so
    a Spot queue takes none. Capacity Block nodes are all static: ``MinCount`` equals ``MaxCount`` and is 1 or
    more (https://docs.aws.amazon.com/parallelcluster/latest/ug/launch-instances-capacity-blocks.html).
    """
    own = {name: capacity for name, capacity, _, _ in resources if capacity is not None}
    if queue.kind is CapacityKind.SPOT and own:
        name = next(iter(own))
        return (
            f"capacity is spot, but compute resource '{name}' has {own[name].described}; reservations and "
            "Capacity Blocks hold On-Demand capacity: use an on-demand queue"
        )
    blocks = queue.kind is CapacityKind.CAPACITY_BLOCK or any(
        c.kind is CapacityKind.CAPACITY_BLOCK for c in own.values()
    )
    for name, capacity, min_count, max_count in resources:
        effective = capacity or queue
        if blocks and effective.kind is not CapacityKind.CAPACITY_BLOCK:
            return (
                f"mixes Capacity Blocks with {effective.described} (compute resource '{name}'); ParallelCluster's "
                "CapacityType is the queue's: put each Capacity Block in a queue of its own"
            )
        if effective.kind is CapacityKind.CAPACITY_BLOCK and not 0 < min_count == max_count:
            return (
                f"compute resource '{name}' uses {effective.described}, whose nodes are all static: min_count "
                f"must equal max_count and be 1 or more, got {min_count} and {max_count}"
            )
    return None


def placement_may_be_left_out(queue: Capacity, resources: Sequence[Capacity | None]) -> bool:
    """Whether the queue's capacity (or a compute resource's) asks to leave the placement group out.

    See :meth:`training_clusters.model.capacity.Capacity.keeps_placement_group` for the rule and its sources.
    """
    return any(not (capacity or queue).keeps_placement_group() for capacity in resources)


def gpu_health_check_problem(instance: InstanceType) -> str | None:
    """``HealthChecks.Gpu.Enabled`` on an instance without NVIDIA GPUs (the check runs DCGM)."""
    if instance.is_gpu:
        return None
    return f"applies to NVIDIA GPU instance types (it runs DCGM diagnostics), got {instance.name}"


# --- team clusters: images, login nodes, custom actions, Slurm settings (ParallelCluster 3.16 schema) ---

_AMI_ID = re.compile(r"^ami-([0-9a-f]{8}|[0-9a-f]{17})$")
#: ``LoginNodes.Pools[].GracetimePeriod`` bounds, minutes.
LOGIN_GRACETIME_MINUTES = (3, 120)
#: ``DirectoryService.LdapTlsReqCert`` values.
LDAP_TLS_REQ_CERT = ("never", "allow", "try", "demand", "hard")
#: Slurm parameters ParallelCluster manages itself and refuses in ``CustomSlurmSettings`` (its deny list, cluster
#: level: https://docs.aws.amazon.com/parallelcluster/latest/ug/slurm-configuration-settings-v3.html).
DENIED_SLURM_SETTINGS = frozenset(
    {"SlurmctldHost", "ClusterName", "SlurmctldPort", "SlurmdPort", "SlurmUser", "ResumeProgram",
     "SuspendProgram", "ResumeFailProgram", "CommunicationParameters", "StateSaveLocation", "SlurmdSpoolDir",
     "AuthType", "AccountingStorageType", "AccountingStorageHost", "AccountingStoragePort",
     "AccountingStorageUser"}
)  # fmt: skip


def ami_problem(ami_id: str) -> str | None:
    return pattern_problem(ami_id, _AMI_ID, "must be an AMI id such as ami-0123456789abcdef0")


def login_gracetime_problem(minutes: int) -> str | None:
    low, high = LOGIN_GRACETIME_MINUTES
    if not low <= minutes <= high:
        return f"must be {low} to {high} minutes (ParallelCluster's bounds), got {minutes}"
    return None


def ldap_tls_req_cert_problem(value: str) -> str | None:
    if value not in LDAP_TLS_REQ_CERT:
        return f"must be one of {', '.join(LDAP_TLS_REQ_CERT)}, got '{value}'"
    return None


def topology_plugin_problem(names: Iterable[str]) -> str | None:
    """With ``topology`` on, the cluster's ``TopologyPlugin`` is ours (``topology/tree``, with the head node's
    ``topology.conf``): a custom setting of it would contradict the file."""
    if "TopologyPlugin" in names:
        return (
            "must not set TopologyPlugin while topology is tree (the head node writes topology.conf for "
            "topology/tree); set topology to off to choose your own plugin"
        )
    return None


def placed_by_topology(instances: Sequence[InstanceType]) -> bool:
    """Whether a queue of these types gets ``topology/tree``: EC2 instance topology describes every one
    (:attr:`InstanceType.network_node_layers`); one type it does not place keeps the queue flat."""
    return bool(instances) and all(instance.network_node_layers > 0 for instance in instances)


def custom_slurm_setting_problem(name: str) -> str | None:
    if name in DENIED_SLURM_SETTINGS:
        return (
            f"'{name}' is managed by ParallelCluster and refused in CustomSlurmSettings; set it through its own "
            "field (database, for accounting) or leave it"
        )
    return None


#: Tags a cluster may carry: ParallelCluster keeps 10 of EC2's 50 for its own (``MAX_TAGS_COUNT``,
#: ``ComputeResourceTagsValidator``).
MAX_CLUSTER_TAGS = 40
#: The tag key prefix ParallelCluster keeps for itself (``PCLUSTER_PREFIX``, ``validate_no_reserved_tag``).
RESERVED_PCLUSTER_TAG_PREFIX = "parallelcluster:"


def cluster_tags_problem(tags: Mapping[str, str]) -> str | None:
    """The cluster's ``Tags``: at most 40, none under ParallelCluster's own prefix, each a valid AWS tag."""
    if len(tags) > MAX_CLUSTER_TAGS:
        return (
            f"must be at most {MAX_CLUSTER_TAGS} tags (ParallelCluster keeps 10 of EC2's 50 for its own), got "
            f"{len(tags)}: {', '.join(sorted(tags))}"
        )
    for key, value in tags.items():
        if key.startswith(RESERVED_PCLUSTER_TAG_PREFIX):
            return f"key '{key}' starts with '{RESERVED_PCLUSTER_TAG_PREFIX}', which ParallelCluster keeps for itself"
        problem = tag_key_problem(key)
        if problem is not None:
            return f"key '{key}' {problem}"
        problem = tag_value_problem(value)
        if problem is not None:
            return f"value of '{key}' {problem}"
    return None
