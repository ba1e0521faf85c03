"""SageMaker HyperPod: names the CreateCluster API accepts.

The patterns are the API's own (botocore's ``sagemaker`` model: ``ClusterName``, ``ClusterInstanceGroupName``
and ``ClusterPartitionName`` all use ``[a-zA-Z0-9](-*[a-zA-Z0-9])*``; see
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateCluster.html). Checked here so a bad
name fails at synth time instead of half-way through a deployment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from training_clusters.catalog import CATALOG
from training_clusters.rules.common import SYSTEM_MOUNT_DIRS, pattern_problem
from training_clusters.rules.instance_types import HYPERPOD_PREFIX

#: Folders a shared file system must not hide: the system's and HyperPod's own (the instance groups' extra
#: EBS volume is mounted at ``/opt/sagemaker``).
RESERVED_MOUNT_DIRS = SYSTEM_MOUNT_DIRS | frozenset(("/opt/sagemaker",))

_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
NAME_MAX_LENGTH = 63
PARTITION_NAME_MAX_LENGTH = 1024
#: ``InstanceCount`` of an instance group: "Valid Range: Minimum value of 0. Maximum value of 6758" (SageMaker
#: API Reference, ClusterInstanceGroupSpecification:
#: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterInstanceGroupSpecification.html).
MAX_INSTANCE_COUNT = 6758


def _name_problem(name: str, maximum: int) -> str | None:
    requirement = f"must be 1-{maximum} letters, digits and hyphens, starting and ending with a letter or digit (no '_' or '.')"
    return pattern_problem(name, _NAME, requirement, max_length=maximum)


def cluster_name_problem(name: str) -> str | None:
    """``ClusterName``: 1-63 letters, digits and hyphens, starting and ending with a letter or digit."""
    return _name_problem(name, NAME_MAX_LENGTH)


def instance_group_name_problem(name: str) -> str | None:
    """``InstanceGroupName``: the same pattern as cluster names."""
    return _name_problem(name, NAME_MAX_LENGTH)


def partition_name_problem(name: str) -> str | None:
    """A Slurm partition (``SlurmConfig.PartitionNames``): the same pattern, so no ``_``."""
    return _name_problem(name, PARTITION_NAME_MAX_LENGTH)


def instance_count_problem(count: int) -> str | None:
    """``InstanceCount``: at most :data:`MAX_INSTANCE_COUNT` instances in one group."""
    if count <= MAX_INSTANCE_COUNT:
        return None
    return (
        f"must be at most {MAX_INSTANCE_COUNT} (the most instances HyperPod's API takes in one instance "
        f"group), got {count}"
    )


#: An EBS volume of an instance group: at most 16 TiB (``ClusterEbsVolumeConfig.VolumeSizeInGB``, 1-16384).
MAX_EBS_GIB = 16384
#: HyperPod's own root volume size: a group's ``root_volume_gib`` may grow it, not shrink it.
MIN_ROOT_VOLUME_GIB = 100


def threads_per_core_problem(threads: int) -> str | None:
    """``ThreadsPerCore``: 1 (hyper-threading off) or 2."""
    return None if threads in (1, 2) else f"must be 1 or 2, got {threads}"


def extra_volume_problem(gib: int | None) -> str | None:
    """The extra EBS volume at ``/opt/sagemaker``: 1 to 16384 GiB."""
    if gib is None or 1 <= gib <= MAX_EBS_GIB:
        return None
    return f"must be between 1 and {MAX_EBS_GIB}, got {gib}"


def root_volume_problem(gib: int | None) -> str | None:
    """The root volume: HyperPod's 100 GiB up to 16384 GiB."""
    if gib is None or MIN_ROOT_VOLUME_GIB <= gib <= MAX_EBS_GIB:
        return None
    return f"must be between {MIN_ROOT_VOLUME_GIB} (HyperPod's root volume) and {MAX_EBS_GIB}, got {gib}"


def extra_volume_key_problem(extra_volume_gib: int | None) -> str | None:
    """A KMS key for the extra volume needs that volume."""
    return None if extra_volume_gib else "encrypts the extra volume, so it needs extra_volume_gib"


def group_count_problem(count: int, least: int) -> str | None:
    """An instance group's count: ``least`` or more (1 under Slurm; 0 on EKS, which may autoscale from none)."""
    return None if count >= least else f"must be {least} or more, got {count}"


def is_accelerated(instance_type: str) -> bool:
    """Whether the catalogue knows the HyperPod type (``ml.`` prefix or not) to carry accelerators (a controller
    or login group of a type it does not know is taken as CPU-only)."""
    known = CATALOG.get(instance_type.removeprefix(HYPERPOD_PREFIX))
    return known is not None and known.accelerators is not None


def deep_health_checks_problem(checks: Sequence[str], instance_type: str) -> str | None:
    """Deep health checks (``OnStartDeepHealthChecks``) test accelerators: GPU and Trainium groups only."""
    if checks and not is_accelerated(instance_type):
        return f"run on GPU and Trainium instances only, got {instance_type}"
    return None


def group_names_problem(names: Sequence[str]) -> tuple[int, str] | None:
    """(index, problem) of the first instance group whose name an earlier group already has."""
    seen: set[str] = set()
    for index, name in enumerate(names):
        if name in seen:
            return index, f"'{name}' is used twice"
        seen.add(name)
    return None


def slurm_roles_problem(roles: Sequence[tuple[str, str]]) -> str | None:
    """The groups (``(name, role)``, role CONTROLLER, LOGIN or WORKER) of a Slurm cluster: exactly one
    controller and at most one login group."""
    controllers = [name for name, role in roles if role == "CONTROLLER"]
    if len(controllers) != 1:
        found = ", ".join(controllers) if controllers else "none"
        return f"need exactly one CONTROLLER group under Slurm, got {len(controllers)} ({found})"
    logins = [name for name, role in roles if role == "LOGIN"]
    if len(logins) > 1:
        return f"allow at most one LOGIN group, got {len(logins)} ({', '.join(logins)})"
    return None


def slurm_workers_problem(roles: Sequence[str]) -> str | None:
    """A Slurm cluster runs its jobs on WORKER groups: at least one."""
    return None if "WORKER" in roles else "need at least one WORKER group to run jobs, got none"


def controller_count_problem(role: str, count: int) -> str | None:
    """A Slurm CONTROLLER group holds one instance."""
    if role == "CONTROLLER" and count != 1:
        return f"of the CONTROLLER group must be 1, got {count}"
    return None


def slurm_partition_problem(role: str, partition: str | None, group: str) -> str | None:
    """A Slurm WORKER group names its partition; CONTROLLER and LOGIN groups have none."""
    if role == "WORKER" and not partition:
        return f"is required for WORKER group '{group}'"
    if role != "WORKER" and partition:
        return f"applies to WORKER groups only, got '{partition}' on {role} group '{group}'"
    return None


_AMI_ID = re.compile(r"^ami-[0-9a-f]{8,17}$")


def image_id_problem(image_id: str) -> str | None:
    """``ImageId`` of an instance group: a custom AMI's id."""
    return pattern_problem(image_id, _AMI_ID, "must be an AMI id such as 'ami-0123456789abcdef0'")


# --- API-driven Slurm configuration -----------------------------------------------------------------------
# "SageMaker HyperPod Slurm configuration" (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ref.html),
# the migration guide (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-slurm-api-config-migration.html),
# continuous provisioning (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-scaling-slurm.html),
# the external accounting database (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html)
# and the API's shapes (ClusterSlurmConfig, ClusterFsxLustreConfig, ClusterAccountingDatabase in
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/).

#: ``ClusterFsxLustreConfig.DnsName``: "((fs|fc)i?-[0-9a-f]{8,}\..{4,253})", 16-275 characters.
_FSX_LUSTRE_DNS_NAME = re.compile(r"^((fs|fc)i?-[0-9a-f]{8,}\..{4,253})$")
#: ``ClusterAccountingDatabase.Name``: 1-64 letters, digits, ``$`` or ``_``.
_ACCOUNTING_DATABASE_NAME = re.compile(r"^[a-zA-Z0-9$_]{1,64}$")


def slurm_config_strategy_problem(strategy: str | None, api: bool, continuous: bool) -> str | None:
    """``slurm_config_strategy``: only with API-driven configuration, never with continuous provisioning
    (HyperPod rejects any ``SlurmConfigStrategy`` value there and merges)."""
    if strategy is None:
        return None
    if not api:
        return (
            "applies to slurm_config api only (it governs the instance groups' SlurmConfig, which legacy "
            f"clusters do not have), got {strategy} with slurm_config legacy"
        )
    if continuous:
        return (
            "must be left out with node_provisioning_mode Continuous: HyperPod rejects any "
            f"SlurmConfigStrategy there and merges edits made on the controller, got {strategy}"
        )
    return None


def continuous_slurm_problem(api: bool, continuous: bool) -> str | None:
    """``node_provisioning_mode: Continuous`` on Slurm needs the instance groups' ``SlurmConfig``."""
    if continuous and not api:
        return (
            "Continuous needs slurm_config api: HyperPod's continuous provisioning on Slurm requires each "
            "instance group's SlurmConfig and cannot read provisioning_parameters.json, got slurm_config legacy"
        )
    return None


def api_accounting_problem(accounting: str, api: bool, continuous: bool) -> str | None:
    """An external accounting database with API-driven Slurm: HyperPod's own ``AccountingDatabase``, which it
    supports with continuous provisioning only (our slurmdbd beside HyperPod's would contend for the
    controller's slurmdbd)."""
    if api and accounting == "external" and not continuous:
        return (
            "external with slurm_config api needs node_provisioning_mode continuous: HyperPod connects its "
            "slurmdbd to an external database (AccountingDatabase) only under continuous provisioning; set "
            "slurm_config legacy to keep the lifecycle scripts' slurmdbd on the controller, got external "
            "without continuous provisioning"
        )
    return None


def fsx_lustre_dns_name_problem(dns_name: str) -> str | None:
    """``InstanceStorageConfigs[].FsxLustreConfig.DnsName``: an FSx for Lustre DNS name as the API takes it."""
    return pattern_problem(
        dns_name,
        _FSX_LUSTRE_DNS_NAME,
        "must be an FSx for Lustre DNS name such as fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com "
        "(HyperPod's FsxLustreConfig.DnsName)",
        max_length=275,
    )


def accounting_database_name_problem(name: str) -> str | None:
    """``Orchestrator.Slurm.AccountingDatabase.Name``: 1-64 letters, digits, ``$`` or ``_``."""
    return pattern_problem(
        name,
        _ACCOUNTING_DATABASE_NAME,
        "must be 1-64 letters, digits, '$' or '_' (HyperPod's AccountingDatabase.Name)",
    )


# --- the cluster's groups, orchestrator and lifecycle scripts (the constructs' own props)

_STEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")


def groups_problem(count: int) -> str | None:
    """A HyperPod cluster has instance groups: at least one."""
    return None if count >= 1 else "must hold at least one group, got none"


def lifecycle_scripts_required_problem(slurm: bool, given: bool) -> str | None:
    """The shipped lifecycle scripts configure Slurm nodes: an EKS cluster brings its own folder."""
    if slurm or given:
        return None
    return "is required with the EKS orchestrator: the shipped lifecycle scripts configure Slurm nodes"


def scripts_folder_problem(folder: str, entry: str, state: str | None) -> str | None:
    """``lifecycle_scripts_dir``: a folder holding ``entry``. ``state`` says what ``folder`` is instead (None
    when it is such a folder): "missing", "file" or "no entry"."""
    wanted = f"a folder holding {entry}, the script HyperPod runs on every node"
    found = {"missing": "which does not exist", "file": "a file", "no entry": f"which has no {entry}"}
    return None if state is None else f"must be {wanted}, got '{folder}', {found[state]}"


def extra_steps_problem(scripts_dir: str | None, entry: str) -> str | None:
    """Extra lifecycle steps are run by the shipped entry script: not with a folder of one's own."""
    if scripts_dir is None:
        return None
    return (
        f"are run by the shipped {entry}, so they cannot go with lifecycle_scripts_dir '{scripts_dir}': call your "
        f"scripts from your own {entry}, or leave lifecycle_scripts_dir out"
    )


def owned_keys_problem(owned: Sequence[tuple[str, str]]) -> str | None:
    """``lifecycle.extra`` keys (``(key, the prop that sets it)``) the construct writes itself."""
    if not owned:
        return None
    keys = ", ".join(f"{key} (set by {prop})" for key, prop in owned)
    return f"sets {keys}, which the construct writes itself from the props that check them; set those props instead"


def extra_key_problem(
    key: str, api_driven: bool, provisioning_keys: frozenset[str], known: frozenset[str]
) -> str | None:
    """A ``lifecycle.extra`` key the shipped scripts read (``known``); provisioning_parameters.json's own keys
    (``provisioning_keys``) only where that file is uploaded (legacy Slurm configuration)."""
    if key in provisioning_keys and api_driven:
        return (
            f"holds '{key}', a key of provisioning_parameters.json, which an API-driven cluster (slurm_config api) "
            "does not upload"
        )
    if key not in known:
        return f"holds '{key}', which the shipped lifecycle scripts do not read; allowed: {', '.join(sorted(known))}"
    return None


def step_name_problem(name: object) -> str | None:
    """A lifecycle step's name: 1-63 letters, digits, '-' or '_' starting with a letter or digit."""
    if isinstance(name, str) and _STEP_NAME.fullmatch(name):
        return None
    return f"must be 1-63 letters, digits, '-' or '_' starting with a letter or digit, got '{name}'"


def step_script_problem(script: str, state: str | None) -> str | None:
    """A step's script is a file: ``state`` is None for one, else "folder" or "missing"."""
    if state is None:
        return None
    found = "a folder" if state == "folder" else "which does not exist"
    return f"must be a script file, got '{script}', {found}"


def shipped_step_problem(script: str, shipped: bool, entry: str) -> str | None:
    """A step is a script of one's own (``shipped``: the entry script or another shipped lifecycle script)."""
    if not shipped:
        return None
    return (
        f"must be a script of your own, not {entry} or another shipped lifecycle script (the shipped {entry} runs "
        f"every step, so the step would run it again without end), got '{script}'"
    )


def step_roles_problem(roles: object, allowed: str) -> str | None:
    """A step's roles: left out (every role) or a non-empty list of ``allowed``."""
    if roles is not None and (isinstance(roles, str) or not roles):
        return f"must be a list of {allowed} (leave it out for every role), got {roles!r}"
    return None


def slurm_lifecycle_problem(given: str, own_scripts: bool, slurm: bool) -> str | None:
    """What the shipped Slurm lifecycle scripts set up (``given``, e.g. accounting): not with one's own scripts
    (``own_scripts``) or the EKS orchestrator."""
    if not own_scripts and slurm:
        return None
    return (
        "is set up by the shipped Slurm lifecycle scripts, so it cannot go with lifecycle_scripts_dir or the EKS "
        f"orchestrator, got {given}"
    )


def slurm_only_problem(value: object, slurm: bool) -> str | None:
    """A Slurm setting: not on an EKS cluster."""
    if slurm or value is None:
        return None
    return f"applies to the Slurm orchestrator only, got {value} with the EKS orchestrator"


def users_problem(own_scripts: bool, slurm: bool) -> str | None:
    """Team users are made by the shipped Slurm lifecycle scripts."""
    if not own_scripts and slurm:
        return None
    return (
        "are created by the shipped Slurm lifecycle scripts, so they cannot go with lifecycle_scripts_dir or the "
        "EKS orchestrator"
    )
