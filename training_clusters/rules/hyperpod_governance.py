"""SageMaker HyperPod task governance: what the service accepts of a cluster policy and of a team's quota.

Shared by :mod:`training_clusters.constructs.hyperpod_eks.governance` and the environment file's
``hyperpod_eks.task_governance`` section, so both refuse the same values with the same words. Facts from the API
reference (``SchedulerConfig``, ``PriorityClass``, ``ComputeQuotaTarget``, ``ComputeQuotaConfig``,
``ComputeQuotaResourceConfig``, ``AcceleratorPartitionConfig``, ``ResourceSharingConfig``:
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceSharingConfig.html and its neighbours), the
same limits as the CloudFormation schemas cfn-lint checks (``AWS::SageMaker::ClusterSchedulerConfig``,
``AWS::SageMaker::ComputeQuota``), and Kubernetes' name limits for what HyperPod names after a team or a class.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from training_clusters.catalog import InstanceType
from training_clusters.model.errors import excerpt
from training_clusters.model.options import ResourceSharingStrategy
from training_clusters.rules.eks_addons import (
    addon_version_problem as addon_version_problem,  # the add-on's version is any EKS add-on's
)
from training_clusters.workloads.task_governance import PRIORITY_CLASS_SUFFIX, TEAM_NAMESPACE_PREFIX

#: The service's pattern for a team name and a priority class name (``[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?``).
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: A Kubernetes namespace and a label value hold at most 63 characters.
KUBERNETES_NAME_LENGTH = 63
#: The longest team name whose namespace ``hyperpod-ns-<team>`` is still a Kubernetes name.
MAX_TEAM_NAME_LENGTH = KUBERNETES_NAME_LENGTH - len(TEAM_NAMESPACE_PREFIX)
#: The longest priority class name whose label value ``<class>-priority`` is still a Kubernetes label value.
MAX_PRIORITY_CLASS_NAME_LENGTH = KUBERNETES_NAME_LENGTH - len(PRIORITY_CLASS_SUFFIX)
#: ``SchedulerConfig.PriorityClasses``: 0 to 10 items.
MAX_PRIORITY_CLASSES = 10
#: ``PriorityClass.Weight`` and ``ComputeQuotaTarget.FairShareWeight``.
MAX_WEIGHT = 100
#: ``ComputeQuotaConfig.ComputeQuotaResources``: 0 to 15 items.
MAX_QUOTA_RESOURCES = 15
#: ``ResourceSharingConfig.BorrowLimit`` as the API reference documents it: "1 - 500 percent".
MIN_BORROW_LIMIT_PERCENT = 1
MAX_BORROW_LIMIT_PERCENT = 500
#: Every amount of a ``ComputeQuotaResourceConfig`` (instances, accelerators, vCPUs, GiB, partitions).
MAX_AMOUNT = 10_000_000
#: What an ``AcceleratorPartition.Type`` puts before the MIG profile's name.
MIG_TYPE_PREFIX = "mig-"


def _name_problem(name: str, longest: int, what: str) -> str | None:
    if len(name) <= longest and _NAME.fullmatch(name):
        return None
    return (
        f"must be 1 to {longest} lower-case letters, digits and '-', starting and ending with a letter or digit "
        f"({what}), got {excerpt(name)}"
    )


def team_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a team (``ComputeQuotaTarget.TeamName``), or None."""
    return _name_problem(
        name,
        MAX_TEAM_NAME_LENGTH,
        f"HyperPod names the team's namespace {TEAM_NAMESPACE_PREFIX}<team>, a Kubernetes name of at most "
        f"{KUBERNETES_NAME_LENGTH}",
    )


def priority_class_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a priority class (``PriorityClass.Name``), or None."""
    return _name_problem(
        name,
        MAX_PRIORITY_CLASS_NAME_LENGTH,
        f"jobs name it in the label value <class>{PRIORITY_CLASS_SUFFIX}, at most {KUBERNETES_NAME_LENGTH} "
        "characters",
    )


def weight_problem(weight: int | None) -> str | None:
    """Why ``weight`` cannot be a priority class's weight or a team's fair-share weight, or None."""
    if weight is None or 0 <= weight <= MAX_WEIGHT:
        return None
    return f"must be between 0 and {MAX_WEIGHT}, got {weight}"


def priority_classes_count_problem(count: int) -> str | None:
    """Why a cluster policy cannot hold ``count`` priority classes, or None."""
    if count <= MAX_PRIORITY_CLASSES:
        return None
    return (
        f"must hold at most {MAX_PRIORITY_CLASSES} priority classes (the cluster policy's limit), got {count}"
    )


def unique_problem(names: Sequence[str]) -> str | None:
    """Why ``names`` (of teams or priority classes) are not each given once, or None."""
    repeated = sorted({name for name in names if list(names).count(name) > 1})
    if not repeated:
        return None
    return f"must each have a name of their own, got {', '.join(repeated)} more than once"


def quota_resources_count_problem(count: int) -> str | None:
    """Why a team's quota cannot hold ``count`` resources, or None."""
    if count <= MAX_QUOTA_RESOURCES:
        return None
    return f"must hold at most {MAX_QUOTA_RESOURCES} resources (a compute quota's limit), got {count}"


def borrow_limit_problem(percent: int | None) -> str | None:
    """Why ``percent`` cannot be a team's borrow limit, or None."""
    if percent is None or MIN_BORROW_LIMIT_PERCENT <= percent <= MAX_BORROW_LIMIT_PERCENT:
        return None
    return (
        f"must be between {MIN_BORROW_LIMIT_PERCENT} and {MAX_BORROW_LIMIT_PERCENT} (percent of the team's quota "
        f"it may borrow in idle compute), got {percent}"
    )


def borrow_limit_needs_borrowing_problem(
    strategy: ResourceSharingStrategy, percent: int | None
) -> str | None:
    """Why a borrow limit is given to a team that does not borrow, or None."""
    if percent is None or strategy is ResourceSharingStrategy.LEND_AND_BORROW:
        return None
    return (
        f"limits borrowing, which only sharing: {ResourceSharingStrategy.LEND_AND_BORROW.value} does; "
        f"got sharing: {strategy.value}"
    )


def amount_problem(amount: float | None) -> str | None:
    """Why ``amount`` cannot be a quota amount (instances, accelerators, vCPUs, GiB, partitions), or None."""
    if amount is None or 0 <= amount <= MAX_AMOUNT:
        return None
    return f"must be between 0 and {MAX_AMOUNT:,}, got {amount}"


def quota_instance_type_problem(instance_type: str, cluster_types: Sequence[str]) -> str | None:
    """Why a quota cannot be of ``instance_type``: the cluster has no instance group of it. Or None."""
    if instance_type in cluster_types:
        return None
    return (
        f"must be the instance type of one of the cluster's instance groups ({', '.join(sorted(set(cluster_types)))}), "
        f"got {excerpt(instance_type)}"
    )


def quota_amount_given_problem(
    *,
    count: int | None,
    accelerators: int | None,
    vcpu: float | None,
    memory_gib: float | None,
    partition_type: str | None,
) -> str | None:
    """Why a quota resource allots nothing, or None."""
    if any(v is not None for v in (count, accelerators, vcpu, memory_gib, partition_type)):
        return None
    return (
        "must give count, accelerators, vcpu, memory_gib or accelerator_partition (what the team is allotted)"
    )


def accelerators_problem(instance_type: InstanceType, accelerators: int | None) -> str | None:
    """Why ``accelerators`` cannot be allotted of ``instance_type`` (it has none), or None."""
    if accelerators is None or instance_type.accelerators is not None:
        return None
    return f"must be left out: {instance_type.hyperpod_name} has no accelerators, got {accelerators}"


def accelerator_partition_problem(instance_type: InstanceType, partition_type: str) -> str | None:
    """Why ``partition_type`` is not a MIG profile the GPUs of ``instance_type`` have, or None."""
    profiles = instance_type.accelerators.mig_profiles if instance_type.accelerators else ()
    allowed = [f"{MIG_TYPE_PREFIX}{p}" for p in profiles]
    if partition_type in allowed:
        return None
    if not allowed:
        return (
            f"must be left out: the GPUs of {instance_type.hyperpod_name} have no MIG profiles, got "
            f"{excerpt(partition_type)}"
        )
    return (
        f"must be a MIG profile of {instance_type.hyperpod_name}'s GPUs ({', '.join(allowed)}), "
        f"got {excerpt(partition_type)}"
    )


def partition_count_problem(count: int) -> str | None:
    """Why ``count`` partitions cannot be allotted, or None."""
    if 1 <= count <= MAX_AMOUNT:
        return None
    return f"must be between 1 and {MAX_AMOUNT:,} partitions, got {count}"


def own_kueue_problem(*, kueue_set: bool, queues_set: bool) -> tuple[str, str] | None:
    """``(field, why)`` when the file asks for our Kueue or its queues beside task governance, or None: the
    add-on packages its own Kueue and requires that no other is installed."""
    why = (
        "cannot be set with task_governance: its add-on runs HyperPod's own Kueue and requires that no other "
        "Kueue is installed; each team's jobs use the LocalQueue hyperpod-ns-<team>-localqueue"
    )
    if kueue_set:
        return "addons.kueue", why
    if queues_set:
        return "queues", why
    return None


#: ``Name`` of a ``ClusterSchedulerConfig`` or ``ComputeQuota``: 1 to 63 letters, digits and '-'.
MAX_ENTITY_NAME_LENGTH = 63


def entity_name(*parts: str) -> str:
    """A SageMaker entity name from ``parts`` joined by '-', cut to 63 characters (never ending in '-')."""
    return "-".join(parts)[:MAX_ENTITY_NAME_LENGTH].rstrip("-")


def teams_problem(count: int) -> str | None:
    """Task governance shares a cluster between teams: at least one."""
    return None if count >= 1 else "must hold at least one team, got none"


def team_key_problem(name: str, teams: Sequence[str]) -> str | None:
    """A setting given per team (``name``) names one of the ``teams``."""
    return None if name in teams else f"must name one of the teams ({', '.join(teams)})"
