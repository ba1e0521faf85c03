"""Amazon EKS: GPU sharing, MIG, EFA nodegroups and Kubernetes labels.

Shared by the EKS constructs and the environment file's ``eks`` section, so both refuse the same values with
the same words.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

from training_clusters.catalog import InstanceType
from training_clusters.model.errors import excerpt
from training_clusters.model.options import MigLayout, MigStrategy, Mps, TimeSlicing
from training_clusters.rules.network import internet_wide_problem
from training_clusters.workloads.mig import COMPUTE_SLICES, MEMORY_SLICES, layout_fits, profile_slices

MIN_SHARING_REPLICAS = 2


def gpu_sharing_problem(
    time_slicing: TimeSlicing | None, mps: Mps | None, mig_strategy: MigStrategy
) -> tuple[str, str] | None:
    """``(field, sentence)`` explaining a bad sharing combination, or None when it is fine."""
    if time_slicing is not None and mps is not None:
        return "mps", "cannot be combined with time_slicing; choose one way of sharing GPUs"
    if mig_strategy is not MigStrategy.NONE and (time_slicing is not None or mps is not None):
        chosen = "time_slicing" if time_slicing is not None else "mps"
        return "mig_strategy", f"must be NONE when {chosen} is set, got {mig_strategy.name}"
    for field, sharing in (("time_slicing", time_slicing), ("mps", mps)):
        if sharing is not None and sharing.replicas < MIN_SHARING_REPLICAS:
            return (
                f"{field}.replicas",
                f"must be {MIN_SHARING_REPLICAS} or more (pods per GPU), got {sharing.replicas}",
            )
    return None


def mig_problem(instance_type: InstanceType, mig_strategy: MigStrategy) -> str | None:
    """Why ``mig_strategy`` cannot apply to ``instance_type``'s GPUs, or None."""
    if mig_strategy is MigStrategy.NONE:
        return None
    accelerators = instance_type.accelerators
    if accelerators is not None and accelerators.mig_capable:
        return None
    model = accelerators.model if accelerators is not None else "no GPU"
    return (
        f"{mig_strategy.name} needs MIG-capable GPUs (A100, H100, H200, B200); "
        f"'{instance_type.name}' has {model}"
    )


_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
#: Hops a node's IMDSv2 response may travel: 1 keeps pods (one hop further) away from the node's credentials.
MAX_IMDS_HOP_LIMIT = 64
#: The EKS-optimized AMI's own root volume: a nodegroup's may be larger, not smaller.
MIN_ROOT_VOLUME_GIB = 20


def admin_role_arn_problem(arn: str) -> str | None:
    """The role made cluster admin through an access entry: an IAM role ARN (a user's is refused)."""
    if _ROLE_ARN.fullmatch(arn):
        return None
    return f"must be an IAM role ARN such as arn:aws:iam::111122223333:role/Admin, got '{arn}'"


def accelerated_nodegroup_problem(instance_type: InstanceType) -> str | None:
    """A GPU (or EFA) nodegroup's type carries a GPU or Trainium accelerator."""
    if instance_type.accelerators is not None:
        return None
    return f"'{instance_type.name}' has no GPU or Trainium accelerator; use a type such as g5.2xlarge"


def system_node_count_problem(count: int) -> str | None:
    """The system nodegroup runs CoreDNS and the controllers: 1 node or more."""
    return None if count >= 1 else f"must be 1 or more, got {count}"


def imds_hop_limit_problem(hop_limit: int) -> str | None:
    """The nodes' IMDSv2 hop limit: 1 to 64."""
    if 1 <= hop_limit <= MAX_IMDS_HOP_LIMIT:
        return None
    return (
        f"must be between 1 and {MAX_IMDS_HOP_LIMIT} (1 keeps pods away from the node's credentials), "
        f"got {hop_limit}"
    )


def root_volume_size_problem(size_gib: int) -> str | None:
    """A nodegroup's root volume: at least the EKS AMI's own 20 GiB."""
    if size_gib >= MIN_ROOT_VOLUME_GIB:
        return None
    return f"must be at least {MIN_ROOT_VOLUME_GIB} (the EKS AMI's own size), got {size_gib}"


def nodegroup_sizes_problem(desired: int, minimum: int, maximum: int) -> tuple[str, str] | None:
    """(field, problem) of a managed nodegroup's sizes: desired 0 or more, within min..max, max 1 or more."""
    if desired < 0:
        return "desired_size", f"must be 0 or more, got {desired}"
    if not minimum <= desired <= maximum:
        return "desired_size", f"must lie between min_size and max_size ({minimum}..{maximum}), got {desired}"
    if maximum < 1:
        return "max_size", f"must be 1 or more, got {maximum}"
    return None


def reserved_subnets_problem(reserved: str | None, subnets: int | None) -> str | None:
    """Reserved capacity (``reserved`` describes it; None when the nodes are not reserved) lives in one AZ:
    its nodegroup takes exactly one subnet (``subnets`` given, None for the VPC's private subnets)."""
    if reserved is None or subnets == 1:
        return None
    got = "the VPC's private subnets" if subnets is None else f"{subnets} subnets"
    return f"must be one subnet in the AZ of {reserved} (reserved capacity lives in one AZ), got {got}"


def efa_nodegroup_problem(instance_type: InstanceType) -> str | None:
    """Why ``instance_type`` cannot host an EFA nodegroup, or None."""
    if instance_type.efa_supported:
        return None
    return (
        f"'{instance_type.name}' has no EFA; use an EFA-capable type such as g5.8xlarge or p5.48xlarge, "
        "or a GPU nodegroup for nodes without EFA"
    )


#: Clients one MPS control daemon serves per GPU on Volta and later ("Client-Server Connection Limits" in
#: NVIDIA's Multi-Process Service documentation, https://docs.nvidia.com/deploy/mps/): an MPS replica more
#: would be a pod whose CUDA context cannot be created.
MAX_MPS_REPLICAS = 48


def mps_replicas_problem(mps: Mps | None) -> tuple[str, str] | None:
    """``(field, sentence)`` when ``mps`` asks for more pods per GPU than the MPS daemon serves, or None."""
    if mps is None or mps.replicas <= MAX_MPS_REPLICAS:
        return None
    return (
        "mps.replicas",
        f"must be at most {MAX_MPS_REPLICAS} (the clients one MPS control daemon serves per GPU), "
        f"got {mps.replicas}",
    )


def mig_layout_problem(instance_type: InstanceType, layout: MigLayout) -> str | None:
    """Why ``layout`` cannot partition ``instance_type``'s GPUs, or None."""
    accelerators = instance_type.accelerators
    if accelerators is None or not accelerators.mig_capable:
        model = accelerators.model if accelerators is not None else "no GPU"
        return f"needs MIG-capable GPUs (A100, H100, H200, B200); '{instance_type.name}' has {model}"
    profiles = accelerators.mig_profiles
    if not profiles:
        return f"needs the MIG profiles of '{instance_type.name}' in the catalogue; it lists none"
    offered = ", ".join(profiles)
    if layout.name == MigLayout.BALANCED:
        return None
    asked = [layout.uniform_profile] if layout.uniform_profile else [p for p, _ in layout.devices]
    unknown = [p for p in asked if p not in profiles]
    if unknown:
        label = layout.name if layout.name else ", ".join(unknown)
        return (
            f"'{label}' is not a MIG profile of {accelerators.model} {accelerators.memory_gib_each} GB "
            f"({instance_type.name}); it offers {offered} (and all-balanced)"
        )
    if layout.name is None and not layout_fits(instance_type, dict(layout.devices)):
        taken = [profile_slices(instance_type, p) for p, n in layout.devices for _ in range(n)]
        return (
            f"{dict(layout.devices)} does not fit one {accelerators.model} GPU: it takes "
            f"{sum(c for c, _ in taken)} of {COMPUTE_SLICES} compute and {sum(m for _, m in taken)} of "
            f"{MEMORY_SLICES} memory slices"
        )
    return None


def mig_strategy_problem(strategy: MigStrategy, layouts: Mapping[str, MigLayout]) -> str | None:
    """Why the device plugin's ``strategy`` does not match the nodegroups' ``layouts`` (by nodegroup), or None."""
    if strategy is MigStrategy.NONE:
        if layouts:
            return (
                f"must be SINGLE or MIXED when a nodegroup sets mig (got NONE; nodegroups with mig: "
                f"{', '.join(sorted(layouts))}): MIXED advertises nvidia.com/mig-<profile>, SINGLE nvidia.com/gpu"
            )
        return None
    if not layouts:
        return (
            f"must be NONE unless a GPU nodegroup sets mig (got {strategy.name}): nothing would partition the "
            "GPUs, and the device plugin would advertise whole GPUs without an error"
        )
    if strategy is MigStrategy.SINGLE:
        mixed = sorted(name for name, layout in layouts.items() if layout.uniform_profile is None)
        if mixed:
            return (
                f"SINGLE needs every GPU of a node split one way (mig: all-<profile>); nodegroups "
                f"{', '.join(mixed)} mix profiles: use MIXED"
            )
    return None


_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def kubernetes_labels(labels: dict[str, str]) -> dict[str, str]:
    """``labels`` when each key and value has Kubernetes label syntax (``[prefix/]name``, at most 63 characters
    each), else ValueError naming the first bad one (the environment file's validator)."""
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (
            not name
            or not _LABEL_NAME.fullmatch(name)
            or (prefix and not (len(prefix) <= 253 and _LABEL_PREFIX.fullmatch(prefix)))
        ):
            raise ValueError(
                f"label key {excerpt(key)} is not a Kubernetes label key ([dns-prefix/]name, name up to 63 letters, "
                "digits, '-', '_', '.', starting and ending with a letter or digit)"
            )
        if not _LABEL_NAME.fullmatch(str(value)):
            raise ValueError(
                f"label value {excerpt(value)} of {excerpt(key)} is not a Kubernetes label value (up to 63 letters, digits, "
                "'-', '_', '.', starting and ending with a letter or digit)"
            )
    return labels


def public_access_cidrs_problem(cidrs: list[str]) -> str | None:
    """Ranges allowed to reach the cluster's public API endpoint: at least one, each IPv4, together narrower
    than the internet (:func:`~training_clusters.rules.network.internet_wide_problem`; ranges that are
    deploy-time tokens are the caller's to skip)."""
    if not cidrs:
        return "must list at least one IPv4 range when given; omit it for a private endpoint"
    for cidr in cidrs:
        try:
            ipaddress.IPv4Network(cidr)
        except ValueError:
            return f"must hold IPv4 ranges such as 203.0.113.0/24, got {excerpt(cidr)}"
    if wide := internet_wide_problem(cidrs):
        return f"must not open the API endpoint to the whole internet, {wide}; list your own ranges"
    return None
