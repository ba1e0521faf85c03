"""SageMaker HyperPod task governance as data (build side, free of CDK): teams, quotas and priority classes, and
the CloudFormation properties of ``AWS::SageMaker::ClusterSchedulerConfig`` and ``AWS::SageMaker::ComputeQuota``
they become.

Task governance is an EKS add-on (``amazon-sagemaker-hyperpod-taskgovernance``) that runs HyperPod's own Kueue
and turns the cluster policy (one ``ClusterSchedulerConfig``: priority classes with weights, fair share, idle
resource sharing) and each team's ``ComputeQuota`` into Kueue objects. A team ``<team>`` gets the namespace
``hyperpod-ns-<team>`` with the LocalQueue ``hyperpod-ns-<team>-localqueue``; a job joins it with the labels
``kueue.x-k8s.io/queue-name: hyperpod-ns-<team>-localqueue`` and
``kueue.x-k8s.io/priority-class: <class>-priority`` ("SageMaker HyperPod task governance",
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance.html; the
CloudFormation reference of both resources; the API reference's ``ComputeQuotaConfig`` and ``SchedulerConfig``).

>>> team_namespace("vision"), team_local_queue("vision"), priority_class_label("training")
('hyperpod-ns-vision', 'hyperpod-ns-vision-localqueue', 'training-priority')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from training_clusters.model.options import ResourceSharingStrategy, TeamPreemption

#: The label that names a job's Kueue priority class (a ``WorkloadPriorityClass`` task governance makes from each
#: of the cluster policy's priority classes, named ``<class>-priority``).
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
#: What HyperPod puts before a team's name to name its namespace, and after the namespace to name its LocalQueue.
TEAM_NAMESPACE_PREFIX = "hyperpod-ns-"
LOCAL_QUEUE_SUFFIX = "-localqueue"
PRIORITY_CLASS_SUFFIX = "-priority"


def team_namespace(team: str) -> str:
    """The namespace HyperPod makes for ``team`` (``ComputeQuotaTarget.TeamName``)."""
    return f"{TEAM_NAMESPACE_PREFIX}{team}"


def team_local_queue(team: str) -> str:
    """The LocalQueue HyperPod makes in :func:`team_namespace`: a job's ``kueue.x-k8s.io/queue-name``."""
    return f"{team_namespace(team)}{LOCAL_QUEUE_SUFFIX}"


def priority_class_label(name: str) -> str:
    """A job's ``kueue.x-k8s.io/priority-class`` for the cluster policy's priority class ``name``."""
    return f"{name}{PRIORITY_CLASS_SUFFIX}"


@dataclass(frozen=True)
class PriorityClass:
    """One priority class of the cluster policy: tasks of a higher ``weight`` (0-100) are admitted first and may
    preempt lower ones.

    :param name: Lower-case letters, digits and '-'; jobs name it as ``<name>-priority``.
    :param weight: 0 to 100.
    """

    name: str
    weight: int


@dataclass(frozen=True)
class QuotaResource:
    """What a team is allotted of one instance type (``ComputeQuotaResourceConfig``). Give instances, or any of
    accelerators, vCPUs and memory (HyperPod fills in the others in the type's proportions), or a MIG partition.

    :param instance_type: An ``ml.`` type of the cluster's instance groups.
    :param count: Whole instances. Default: none.
    :param accelerators: GPUs or Trainium devices. Default: none.
    :param vcpu: vCPUs. Default: none.
    :param memory_gib: Memory in GiB. Default: none.
    :param partition_type: A MIG profile the type's GPUs have, as ``mig-<profile>`` (``mig-1g.10gb``).
        Default: none.
    :param partition_count: How many partitions of ``partition_type``. Required with it.
    """

    instance_type: str
    count: int | None = None
    accelerators: int | None = None
    vcpu: float | None = None
    memory_gib: float | None = None
    partition_type: str | None = None
    partition_count: int | None = None


@dataclass(frozen=True)
class Team:
    """A team of task governance: its quota, how it shares idle compute, and whom its tasks preempt.

    :param name: Lower-case letters, digits and '-'; HyperPod makes the namespace ``hyperpod-ns-<name>``.
    :param resources: Its quota by instance type (at most 15). Default: none (it only borrows).
    :param fair_share_weight: 0 to 100: its share of idle compute under fair share. Default: the service's (0).
    :param sharing: Default: LEND_AND_BORROW (the service's default).
    :param borrow_limit_percent: 1 to 500: how much idle compute it may borrow, as a percentage of its quota;
        only with LEND_AND_BORROW. Default: the service's (50).
    :param preempt_team_tasks: Default: LOWER_PRIORITY (the service's default).
    """

    name: str
    resources: Sequence[QuotaResource] = ()
    fair_share_weight: int | None = None
    sharing: ResourceSharingStrategy = ResourceSharingStrategy.LEND_AND_BORROW
    borrow_limit_percent: int | None = None
    preempt_team_tasks: TeamPreemption = TeamPreemption.LOWER_PRIORITY

    @property
    def namespace(self) -> str:
        return team_namespace(self.name)

    @property
    def local_queue(self) -> str:
        return team_local_queue(self.name)


def _enabled(on: bool) -> str:
    return "Enabled" if on else "Disabled"


def scheduler_config(
    priority_classes: Sequence[PriorityClass], *, fair_share: bool, idle_resource_sharing: bool
) -> dict[str, Any]:
    """``AWS::SageMaker::ClusterSchedulerConfig`` ``SchedulerConfig``."""
    return {
        "PriorityClasses": [{"Name": p.name, "Weight": p.weight} for p in priority_classes],
        "FairShare": _enabled(fair_share),
        "IdleResourceSharing": _enabled(idle_resource_sharing),
    }


def quota_resource(resource: QuotaResource) -> dict[str, Any]:
    """One ``ComputeQuotaResourceConfig``: only the amounts given."""
    config: dict[str, Any] = {"InstanceType": resource.instance_type}
    for key, value in (
        ("Count", resource.count),
        ("Accelerators", resource.accelerators),
        ("VCpu", resource.vcpu),
        ("MemoryInGiB", resource.memory_gib),
    ):
        if value is not None:
            config[key] = value
    if resource.partition_type is not None:
        config["AcceleratorPartition"] = {"Type": resource.partition_type, "Count": resource.partition_count}
    return config


def compute_quota_config(team: Team) -> dict[str, Any]:
    """``AWS::SageMaker::ComputeQuota`` ``ComputeQuotaConfig``: the strategy and the preemption always stated (the
    service's defaults are what a reader of the template would have to know); the borrow limit when given."""
    sharing: dict[str, Any] = {"Strategy": team.sharing.value}
    if team.borrow_limit_percent is not None:
        sharing["BorrowLimit"] = team.borrow_limit_percent
    return {
        "ComputeQuotaResources": [quota_resource(r) for r in team.resources],
        "ResourceSharingConfig": sharing,
        "PreemptTeamTasks": team.preempt_team_tasks.value,
    }


def compute_quota_target(team: Team) -> dict[str, Any]:
    """``AWS::SageMaker::ComputeQuota`` ``ComputeQuotaTarget``."""
    target: dict[str, Any] = {"TeamName": team.name}
    if team.fair_share_weight is not None:
        target["FairShareWeight"] = team.fair_share_weight
    return target
