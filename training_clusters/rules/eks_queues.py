"""The EKS job layer (Kueue queues, Kubeflow Trainer): shared by the constructs and the environment file's
``eks.queues`` section, so both refuse the same values with the same words."""

from __future__ import annotations

import re
from collections.abc import Sequence

from training_clusters.model.errors import excerpt
from training_clusters.model.options import QueuePreemption, TopologyPlacement
from training_clusters.workloads.scheduling import UNMANAGED_NAMESPACES

#: Kueue's waitForPodsReady timeout bounds, in minutes: at least one image pull, at most a day.
MIN_PODS_READY_TIMEOUT_MINUTES = 1
MAX_PODS_READY_TIMEOUT_MINUTES = 1440


def pods_ready_timeout_problem(minutes: int) -> str | None:
    """Why ``minutes`` cannot be Kueue's waitForPodsReady timeout, or None."""
    if MIN_PODS_READY_TIMEOUT_MINUTES <= minutes <= MAX_PODS_READY_TIMEOUT_MINUTES:
        return None
    return (
        f"must be between {MIN_PODS_READY_TIMEOUT_MINUTES} and {MAX_PODS_READY_TIMEOUT_MINUTES} minutes "
        f"(how long an admitted job may take to have all its pods running), got {minutes}"
    )


#: What each of a ClusterQueue's preemption fields accepts (Kueue's ClusterQueue CRD, v1beta2).
PREEMPTION_CHOICES: dict[str, tuple[QueuePreemption, ...]] = {
    "within_cluster_queue": (
        QueuePreemption.NEVER,
        QueuePreemption.LOWER_PRIORITY,
        QueuePreemption.LOWER_OR_NEWER_EQUAL_PRIORITY,
    ),
    "reclaim_within_cohort": (QueuePreemption.NEVER, QueuePreemption.LOWER_PRIORITY, QueuePreemption.ANY),
    "borrow_within_cohort": (QueuePreemption.NEVER, QueuePreemption.LOWER_PRIORITY),
}
#: A ResourceFlavor selects nodes by at most this many labels (its CRD's ``maxProperties``).
MAX_FLAVOR_NODE_LABELS = 8
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def kubernetes_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a namespace or a queue (a DNS-1123 label), or None."""
    if len(name) <= 63 and _DNS_LABEL.fullmatch(name):
        return None
    return (
        "must be 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit "
        f"(a Kubernetes name), got {excerpt(name)}"
    )


def cohort_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a Kueue cohort (a DNS-1123 subdomain), or None."""
    if len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name):
        return None
    return (
        "must be lower-case letters, digits, '-' and '.', up to 253 characters, starting and ending with a "
        f"letter or digit, got {excerpt(name)}"
    )


def preemption_problem(field: str, value: QueuePreemption) -> str | None:
    """Why ``value`` cannot be the ClusterQueue's preemption ``field``, or None."""
    allowed = PREEMPTION_CHOICES[field]
    if value in allowed:
        return None
    return f"must be one of {', '.join(a.value for a in allowed)}, got {value.value}"


def cohort_needed_problem(
    cohort: str | None,
    *,
    reclaim_within_cohort: QueuePreemption,
    borrow_within_cohort: QueuePreemption,
    lending_limit_percent: int | None,
    borrowing_limit_percent: int | None,
) -> tuple[str, str] | None:
    """``(field, sentence)`` when an option that acts between queues of a cohort is set without one, or None."""
    if cohort is not None:
        return None
    given = {
        "reclaim_within_cohort": reclaim_within_cohort is not QueuePreemption.NEVER,
        "borrow_within_cohort": borrow_within_cohort is not QueuePreemption.NEVER,
        "lending_limit_percent": lending_limit_percent is not None,
        "borrowing_limit_percent": borrowing_limit_percent is not None,
    }
    for field, set_ in given.items():
        if set_:
            return field, "acts between the ClusterQueues of a cohort; set cohort too, or leave it out"
    return None


def borrow_needs_reclaim_problem(
    reclaim_within_cohort: QueuePreemption, borrow_within_cohort: QueuePreemption
) -> str | None:
    """Kueue's own rule: a queue that preempts to borrow must also preempt to reclaim. The message, or None."""
    if borrow_within_cohort is QueuePreemption.NEVER or reclaim_within_cohort is not QueuePreemption.NEVER:
        return None
    return (
        f"{borrow_within_cohort.value} needs reclaim_within_cohort other than Never (Kueue refuses a queue that "
        "preempts to borrow but not to reclaim)"
    )


def limit_percent_problem(percent: int | None) -> str | None:
    """Why ``percent`` cannot be a lending or borrowing limit (a share of the queue's quota), or None."""
    if percent is None or 0 <= percent <= 100:
        return None
    return f"must be between 0 and 100 (percent of the queue's nominal quota), got {percent}"


def unique_names_problem(names: list[str]) -> str | None:
    """Why ``names`` (namespaces of LocalQueues) are not each given once, or None."""
    repeated = sorted({name for name in names if names.count(name) > 1})
    if not repeated:
        return None
    return f"must each be given once, got {', '.join(repeated)} more than once"


def flavor_labels_problem(labels: dict[str, str]) -> str | None:
    """Why a nodegroup's ``labels`` cannot all select its ResourceFlavor's nodes, or None."""
    if len(labels) <= MAX_FLAVOR_NODE_LABELS:
        return None
    return (
        f"are {len(labels)} with the ones the stack adds; a Kueue ResourceFlavor selects nodes by at most "
        f"{MAX_FLAVOR_NODE_LABELS}: {', '.join(sorted(labels))}"
    )


def team_namespace_problem(namespace: str) -> str | None:
    """Why ``namespace`` cannot be a team's (opted in to Kueue, whose job webhooks fail closed), or None."""
    if namespace not in UNMANAGED_NAMESPACES:
        return None
    return (
        f"must not be {', '.join(UNMANAGED_NAMESPACES)} (the cluster's own and Kueue's: their jobs must never "
        f"wait on Kueue), got {namespace!r}"
    )


#: An IAM role's ARN (a path allowed), as an EKS access entry names its principal.
IAM_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")


def team_role_problem(namespace: str, role_arn: str, namespaces: list[str]) -> tuple[str, str] | None:
    """``(field, why)`` when ``role_arn`` cannot be the team role of ``namespace``, or None."""
    if namespace not in namespaces:
        return (
            f"team_roles.{namespace}",
            f"must name one of the team namespaces ({', '.join(namespaces)}), got {namespace!r}",
        )
    if not IAM_ROLE_ARN.fullmatch(role_arn):
        return (
            f"team_roles.{namespace}",
            "must be an IAM role ARN such as arn:aws:iam::111122223333:role/VisionTeam (the role whose "
            f"sessions act as the team), got {excerpt(role_arn)}",
        )
    return None


def required_topology_problem(placement: TopologyPlacement, reporting_types: list[str]) -> str | None:
    """Why ``placement`` cannot be asked of queues whose GPU instance types include ``reporting_types``
    (those EC2 instance topology describes), or None: ``required`` with none of them asks for what no node
    can give."""
    if placement is not TopologyPlacement.REQUIRED or reporting_types:
        return None
    return (
        "must be preferred or off when no GPU node group's instance type reports EC2 network topology "
        "(p5, p5e, p5en, p6, trn2 and the like do; see DescribeInstanceTopology's supported types), got required"
    )


def namespaces_problem(count: int) -> str | None:
    """The team namespaces the queues serve: at least one."""
    return None if count >= 1 else "must name at least one namespace, got none"


def team_role_namespace_problem(namespace: str, namespaces: Sequence[str]) -> str | None:
    """A team role is given for one of the team ``namespaces``."""
    if namespace in namespaces:
        return None
    return f"must name one of the team namespaces ({', '.join(namespaces)}), got {namespace!r}"


def gpu_nodegroups_problem(gpu: bool, nodegroups: Sequence[str]) -> str | None:
    """The queues need a nodegroup with NVIDIA GPUs to queue for (``gpu``: one of ``nodegroups`` has them)."""
    if gpu:
        return None
    return f"must include a nodegroup with NVIDIA GPUs to queue for, got {', '.join(nodegroups) or 'none'}"


def efa_gpu_nodegroups_problem(found: bool, nodegroups: Sequence[str]) -> str | None:
    """Training runtimes run over EFA: an EFA nodegroup with NVIDIA GPUs (``found``: one of ``nodegroups`` is)."""
    if found:
        return None
    return f"must include an EFA nodegroup with NVIDIA GPUs, got {', '.join(nodegroups) or 'none'}"
