"""FSx for Lustre: storage capacity steps, per-unit throughput and automatic backups.

Sources: the ``StorageCapacity``, ``PerUnitStorageThroughput``, ``AutomaticBackupRetentionDays`` and
``DailyAutomaticBackupStartTime`` properties of ``AWS::FSx::FileSystem`` LustreConfiguration
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-fsx-filesystem-lustreconfiguration.html)
and FSx for Lustre backups (https://docs.aws.amazon.com/fsx/latest/LustreGuide/using-backups-fsx.html):
scratch file systems cannot be backed up.

A file system's DNS and mount names end up in root shell scripts (PCS user data, HyperPod lifecycle
settings, fstab lines): they are checked against the shapes FSx gives them, so a crafted name cannot run a
command on every node. ``MountName`` follows the API's own pattern ``[A-Za-z0-9_-]{1,8}`` (SageMaker's
``ClusterFsxLustreConfig``, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterFsxLustreConfig.html);
a DNS name is any host name (FSx's are ``fs-<hex>.fsx.<region>.amazonaws.com``, ``.com.cn`` in China).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from training_clusters.model.errors import excerpt
from training_clusters.rules.common import pattern_problem

LUSTRE_FIRST_STEP_GIB = 1200
LUSTRE_STEP_GIB = 2400
PERSISTENT_2_THROUGHPUTS_MBPS = (125, 250, 500, 1000)

#: Automatic backups of a PERSISTENT_2 file system are kept this many days unless told otherwise.
DEFAULT_BACKUP_RETENTION_DAYS = 7
#: FSx keeps automatic backups 0 (off) to 90 days.
MAX_BACKUP_RETENTION_DAYS = 90
#: The daily automatic backup starts at this UTC time (``HH:MM``) and may take 30 minutes.
DAILY_BACKUP_START_UTC = (5, 0)
#: Weekly maintenance (ISO weekday 7 = Sunday, hour, minute, UTC), pinned so that FSx's randomly assigned
#: 30-minute maintenance window can never overlap the daily backup window.
WEEKLY_MAINTENANCE_START_UTC = (7, 2, 0)


def lustre_capacity_problem(deployment_type: str, capacity_gib: int) -> str | None:
    """FSx for Lustre SSD capacity: 1200 GiB, or a multiple of 2400 GiB."""
    if capacity_gib == LUSTRE_FIRST_STEP_GIB or (capacity_gib > 0 and capacity_gib % LUSTRE_STEP_GIB == 0):
        return None
    return (
        f"must be {LUSTRE_FIRST_STEP_GIB} or a multiple of {LUSTRE_STEP_GIB} for {deployment_type}, "
        f"got {capacity_gib}"
    )


def lustre_throughput_problem(deployment_type: str, throughput_mbps: int | None) -> str | None:
    """Per-unit throughput: required (125/250/500/1000) for PERSISTENT_2, absent for SCRATCH_2."""
    allowed = ", ".join(str(v) for v in PERSISTENT_2_THROUGHPUTS_MBPS)
    if deployment_type == "PERSISTENT_2":
        if throughput_mbps is None:
            return f"is required for PERSISTENT_2; allowed: {allowed}"
        if throughput_mbps not in PERSISTENT_2_THROUGHPUTS_MBPS:
            return f"must be one of {allowed} for PERSISTENT_2, got {throughput_mbps}"
        return None
    if throughput_mbps is not None:
        return (
            f"applies to PERSISTENT_2 only; {deployment_type} has a fixed throughput, got {throughput_mbps}"
        )
    return None


def lustre_backup_retention_problem(deployment_type: str, days: int | None) -> str | None:
    """Automatic backups: 0 (off) to 90 days on PERSISTENT_2; SCRATCH_2 cannot be backed up at all."""
    if days is None:
        return None
    if deployment_type != "PERSISTENT_2":
        return f"applies to PERSISTENT_2 only; FSx cannot back up a {deployment_type} file system, got {days}"
    if not 0 <= days <= MAX_BACKUP_RETENTION_DAYS:
        return f"must be between 0 (no automatic backups) and {MAX_BACKUP_RETENTION_DAYS} days, got {days}"
    return None


def lustre_backup_retention_days(deployment_type: str, days: int | None) -> int | None:
    """The retention a file system gets: ``days``, else 7 for PERSISTENT_2, else none (SCRATCH_2)."""
    if days is not None:
        return days
    return DEFAULT_BACKUP_RETENTION_DAYS if deployment_type == "PERSISTENT_2" else None


def file_system_path_problem(path: str) -> str | None:
    """A data repository association's ``FileSystemPath``: an absolute path in the file system."""
    if path.startswith("/"):
        return None
    return f"must be an absolute path such as /datasets, got {excerpt(path)}"


def s3_prefix_problem(prefix: str) -> str | None:
    """A data repository association's S3 key prefix: relative to the bucket."""
    if prefix.startswith("/"):
        return f"is an S3 key prefix and must not start with '/', got {excerpt(prefix)}"
    return None


#: A host name: dot-separated labels of letters, digits and inner hyphens, at most 253 characters.
_DNS_NAME = re.compile(
    r"^(?!.{254})[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
_MOUNT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,8}$")


def lustre_dns_name_problem(dns_name: str) -> str | None:
    """A file system's DNS name: a host name such as ``fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com``."""
    requirement = (
        "must be the file system's DNS name, letters, digits, hyphens and dots such as "
        "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
    )
    return pattern_problem(dns_name, _DNS_NAME, requirement)


def lustre_mount_name_problem(mount_name: str) -> str | None:
    """A file system's Lustre mount name: 1-8 letters, digits, ``_`` or ``-`` (``fsx`` on PERSISTENT_1)."""
    requirement = "must be the file system's mount name, 1-8 letters, digits, '_' or '-' such as 'abcdefgh' (FSx's MountName)"
    return pattern_problem(mount_name, _MOUNT_NAME, requirement)


#: Root squash: root on every client acts as this uid:gid on the file system (nobody:nogroup), as FSx's own
#: example (LustreRootSquashConfiguration, https://docs.aws.amazon.com/fsx/latest/APIReference/API_LustreRootSquashConfiguration.html;
#: https://docs.aws.amazon.com/fsx/latest/LustreGuide/root-squash.html).
ROOT_SQUASH_IDS = "65534:65534"
#: What FSx reads as root squash off.
NO_ROOT_SQUASH_IDS = "0:0"
#: At most this many NoSquashNids entries, each a client's NID: an IPv4 address (or a range of one) at @tcp.
MAX_NO_SQUASH_NIDS = 64
_NID = re.compile(r"([0-9\[\]\-]*\.){3}([0-9\[\]\-]*)@tcp")
#: The orchestrators whose node scripts write on the shared file system as root at every node's start.
ROOT_WRITING_ORCHESTRATORS = ("hyperpod", "parallelcluster", "pcs")


def no_squash_nid_problem(nid: str) -> str | None:
    """One NoSquashNids entry: the API's pattern and length (11 to 43 characters)."""
    if 11 <= len(nid) <= 43 and _NID.fullmatch(nid):
        return None
    return f"must be a Lustre client NID such as 10.0.1.6@tcp or 10.0.[2-10].[1-255]@tcp, got {excerpt(nid)}"


def root_squash_orchestrator_problem(orchestrator: str) -> str | None:
    """Root squash with an orchestrator whose nodes write as root on the file system."""
    if orchestrator not in ROOT_WRITING_ORCHESTRATORS:
        return None
    return (
        f"must be off with {orchestrator}: its node scripts write on the file system as root on every new node "
        "(the shared homes and their ~/.ssh, the mount point's mode), which root squash refuses, and FSx exempts "
        "clients only by IP address (NoSquashNids), which replaced nodes do not keep"
    )


def exempt_nids_problem(root_squash: bool, nids: Sequence[str]) -> str | None:
    """``NoSquashNids``: only beside root squash, at most 64, each a Lustre NID."""
    if nids and not root_squash:
        return "applies only when root_squash is on"
    if len(nids) > MAX_NO_SQUASH_NIDS:
        return f"must hold at most {MAX_NO_SQUASH_NIDS} NIDs, got {len(nids)}"
    for nid in nids:
        problem = no_squash_nid_problem(nid)
        if problem:
            return problem
    return None


def lustre_kms_key_problem(deployment_type: str) -> str | None:
    """A customer-managed KMS key: PERSISTENT_2 only (a scratch file system uses an FSx-managed key)."""
    if deployment_type == "PERSISTENT_2":
        return None
    return f"applies to PERSISTENT_2 only; {deployment_type} is always encrypted with an FSx-managed key"


def adopted_root_squash_problem(adopted: bool) -> str | None:
    """Root squash is set where a file system is made: not on one adopted from elsewhere."""
    if not adopted:
        return None
    return "applies to a file system made here; set an adopted one's root squash where it is made"
