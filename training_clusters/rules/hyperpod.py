"""SageMaker HyperPod: names the CreateCluster API accepts.

The patterns are the API's own (botocore's ``sagemaker`` model: ``ClusterName``, ``ClusterInstanceGroupName``
and ``ClusterPartitionName`` all use ``[a-zA-Z0-9](-*[a-zA-Z0-9])*``; see
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateCluster.html). Checked here so a bad
name fails at synth time instead of half-way through a deployment.
"""

from __future__ import annotations

import re

from training_clusters.rules.common import SYSTEM_MOUNT_DIRS, pattern_problem

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
