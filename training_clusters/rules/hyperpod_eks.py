"""SageMaker HyperPod on Amazon EKS: what HyperPod requires of the EKS cluster and of its instance groups.

Shared by :mod:`training_clusters.constructs.hyperpod_eks.cluster` and the environment file's ``hyperpod_eks``
section, so both refuse the same values with the same words. Facts from "Getting started with Amazon EKS
support in SageMaker HyperPod"
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html): the
Kubernetes versions, the two authentication modes, the VPC CNI version.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from training_clusters.model.errors import excerpt
from training_clusters.model.releases import HYPERPOD_KUBERNETES_VERSIONS as HYPERPOD_KUBERNETES_VERSIONS
from training_clusters.model.releases import KUBECTL_LAYER_VERSION


def _minor_neighbours(version: str) -> tuple[str, ...]:
    major, minor = (int(part) for part in version.split("."))
    return tuple(f"{major}.{minor + step}" for step in (-1, 0, 1))


#: The versions CDK's kubectl layer (:data:`~training_clusters.model.releases.KUBECTL_LAYER_VERSION`) drives: kubectl
#: supports one minor version either side of its own (https://kubernetes.io/releases/version-skew-policy/#kubectl).
KUBECTL_LAYER_KUBERNETES_VERSIONS = _minor_neighbours(KUBECTL_LAYER_VERSION)
#: The oldest Amazon VPC CNI HyperPod supports.
MIN_VPC_CNI_VERSION = (1, 18, 3)
#: The taint HyperPod puts on a node its health checks found faulty, and the label it keeps on every node
#: (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html).
HEALTH_STATUS_KEY = "sagemaker.amazonaws.com/node-health-status"
#: Kubernetes taint effects (``KubernetesConfig.Taints[].Effect``).
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: Label and taint key prefixes HyperPod sets and reserves for itself.
RESERVED_KEY_PREFIXES = ("sagemaker.amazonaws.com/",)
#: VPC addresses a HyperPod node may take in its subnet: its own and up to 250 for its pods (the most pods
#: EKS recommends per node, https://docs.aws.amazon.com/eks/latest/best-practices/ip-opt.html); the VPC CNI
#: takes pod addresses from the node's subnet, and HyperPod's nodes share the placement subnet.
ADDRESSES_PER_NODE = 251
#: The biggest EBS volume HyperPod attaches (``VolumeSizeInGB``).
MAX_VOLUME_GIB = 16384
_ADDON_VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)-eksbuild\.\d+$")
_TAINT_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_TAINT_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def supported_kubernetes_versions() -> tuple[str, ...]:
    """The versions both HyperPod supports and our kubectl layer drives."""
    return tuple(v for v in HYPERPOD_KUBERNETES_VERSIONS if v in KUBECTL_LAYER_KUBERNETES_VERSIONS)


def kubernetes_version_problem(version: str) -> str | None:
    """A Kubernetes version HyperPod does not support, or that this library's kubectl layer cannot drive."""
    if version in supported_kubernetes_versions():
        return None
    if version not in HYPERPOD_KUBERNETES_VERSIONS:
        why = f"SageMaker HyperPod supports {', '.join(HYPERPOD_KUBERNETES_VERSIONS)}"
    else:
        why = f"the kubectl layer (v{KUBECTL_LAYER_VERSION}) drives {', '.join(KUBECTL_LAYER_KUBERNETES_VERSIONS)}"
    return f"must be one of {', '.join(supported_kubernetes_versions())} ({why}), got {excerpt(version)}"


def vpc_cni_version_problem(version: str) -> str | None:
    """A ``vpc-cni`` add-on version older than the one HyperPod needs, or not shaped like one."""
    found = _ADDON_VERSION.fullmatch(version)
    if found is None:
        return f"must look like v1.20.1-eksbuild.3 (aws eks describe-addon-versions), got {excerpt(version)}"
    if tuple(int(part) for part in found.groups()) < MIN_VPC_CNI_VERSION:
        oldest = ".".join(str(part) for part in MIN_VPC_CNI_VERSION)
        return f"must be v{oldest} or newer (the oldest VPC CNI SageMaker HyperPod supports), got {version}"
    return None


def volume_problem(volume_gib: int | None) -> str | None:
    """Every HyperPod EKS instance group needs its EBS volume: the lifecycle moves containerd's and the
    kubelet's data onto it (``/opt/sagemaker``), off the root volume."""
    if volume_gib is None:
        return (
            "is required on HyperPod with EKS: the lifecycle script moves containerd's and the kubelet's data "
            "(container images, pod volumes) onto that volume at /opt/sagemaker; give e.g. 500"
        )
    if not 1 <= volume_gib <= MAX_VOLUME_GIB:
        return f"must be between 1 and {MAX_VOLUME_GIB}, got {volume_gib}"
    return None


def reserved_key_problem(key: str) -> str | None:
    """A label or taint key in a prefix HyperPod keeps for itself."""
    for prefix in RESERVED_KEY_PREFIXES:
        if key.startswith(prefix):
            return f"key {excerpt(key)} is in {prefix}, which SageMaker HyperPod sets itself; use a key of your own"
    return None


def taint_problem(key: str, value: str, effect: str) -> str | None:
    """A Kubernetes taint that is not well formed (``key[=value]:effect``)."""
    if not _TAINT_KEY.fullmatch(key) or len(key) > 316:
        return (
            f"key {excerpt(key)} is not a Kubernetes taint key ([dns-prefix/]name, name up to 63 characters)"
        )
    if not _TAINT_VALUE.fullmatch(value):
        return (
            f"value {excerpt(value)} of {excerpt(key)} is not a Kubernetes taint value (up to 63 characters)"
        )
    if effect not in TAINT_EFFECTS:
        return f"effect of {excerpt(key)} must be one of {', '.join(TAINT_EFFECTS)}, got {excerpt(effect)}"
    return reserved_key_problem(key)


def pod_addresses_problem(nodes: int, addresses_per_node: int, usable: int) -> str | None:
    """Nodes whose pods (each takes a VPC address through the VPC CNI) would not fit the subnet."""
    needed = nodes * addresses_per_node
    if needed <= usable:
        return None
    return (
        f"adds up to {nodes} HyperPod nodes, whose pods take VPC addresses from the placement subnet (up to "
        f"{addresses_per_node} per node: the node and the VPC CNI's pool), {needed:,} in all, but the subnet has "
        f"{usable:,} usable addresses; lower the counts"
    )


# --------------------------------------------------------------------------------------------------
# Karpenter autoscaling ("Autoscaling on SageMaker HyperPod EKS",
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html, and its pages "Create a
# NodeClass" (sagemaker-hyperpod-eks-autoscaling-nodeclass) and "Create a NodePool"
# (sagemaker-hyperpod-eks-autoscaling-nodepool)). What the service refuses, refused before a deployment.

#: "You can specify up to 10 instance groups in a NodeClass."
MAX_NODE_CLASS_GROUPS = 10
#: The status ``DescribeCluster`` reports in ``AutoScaling.Status`` once HyperPod's Karpenter runs; the
#: ``HyperpodNodeClass`` is not Ready before it.
AUTOSCALING_IN_SERVICE = "InService"


def autoscaling_provisioning_problem(node_provisioning_mode: str | None) -> str | None:
    """Karpenter autoscaling is built on continuous provisioning (the page's first prerequisite)."""
    if node_provisioning_mode == "Continuous":
        return None
    got = (
        "none (all-or-nothing provisioning)"
        if node_provisioning_mode is None
        else excerpt(node_provisioning_mode)
    )
    return (
        f"must be Continuous with autoscaling: karpenter (HyperPod's Karpenter autoscaling is built on "
        f"continuous provisioning), got {got}"
    )


def autoscaling_recovery_problem(node_recovery: str) -> str | None:
    """Karpenter autoscaling needs automatic node recovery (the page's prerequisites: ``NodeRecovery`` Automatic)."""
    if node_recovery == "Automatic":
        return None
    return (
        f"must be Automatic with autoscaling: karpenter (HyperPod's Karpenter autoscaling replaces faulty "
        f"nodes itself), got {excerpt(node_recovery)}"
    )


def autoscaled_count_problem(count: int) -> str | None:
    """An autoscaled instance group starts with no node: Karpenter adds them as pods wait, and scales a group
    that starts above 0 down to 0 ("Create a NodeClass": "You must start with 0 nodes in your instance group")."""
    if count == 0:
        return None
    return (
        f"must be 0 with autoscaling: karpenter (Karpenter adds the nodes as pods wait for them, and would "
        f"scale the group down to 0 anyway); bound the group with max_count instead, got {count}"
    )


def autoscaled_max_count_problem(max_count: int | None, limit: int) -> str | None:
    """How many nodes Karpenter may bring up in an autoscaled group: its NodePool's limit and Kueue's quota."""
    if max_count is None:
        return (
            "is required with autoscaling: karpenter: the most nodes Karpenter may start in the group (its "
            "NodePool's limit and the queues' quota); give e.g. 2"
        )
    if not 1 <= max_count <= limit:
        return f"must be between 1 and {limit}, got {max_count}"
    return None


def max_count_without_autoscaling_problem(max_count: int | None) -> str | None:
    """``max_count`` bounds an autoscaled group; a fixed group has its count."""
    if max_count is None:
        return None
    return f"applies with autoscaling: karpenter only (a fixed group has count nodes), got {max_count}"


def autoscaled_capacity_problem(training_plan: bool) -> str | None:
    """ "Only on-demand capacity is supported at this time. Instance groups with Training plan or reserved
    capacity are not supported." ("Create a NodeClass")"""
    if not training_plan:
        return None
    return (
        "must be on-demand with autoscaling: karpenter (HyperPod's Karpenter scales On-Demand instance groups "
        "only, not groups on a training plan or reserved capacity), got training-plan"
    )


def autoscaled_health_checks_problem(checks: Sequence[str]) -> str | None:
    """ "Instance groups with DeepHealthChecks (DHC) are not supported": they take 60-90 minutes, during which
    the pods that asked for the node wait and Karpenter may start more ("Create a NodeClass")."""
    if not checks:
        return None
    return (
        f"must be empty with autoscaling: karpenter (a deep health check takes 60-90 minutes, while the pods "
        f"that asked for the node wait and Karpenter starts more; HyperPod refuses them on autoscaled groups), "
        f"got {', '.join(checks)}"
    )


def autoscaled_groups_problem(count: int) -> str | None:
    """A ``HyperpodNodeClass`` names at most :data:`MAX_NODE_CLASS_GROUPS` instance groups."""
    if count <= MAX_NODE_CLASS_GROUPS:
        return None
    return (
        f"must hold at most {MAX_NODE_CLASS_GROUPS} groups with autoscaling: karpenter (a HyperpodNodeClass "
        f"names up to {MAX_NODE_CLASS_GROUPS} instance groups), got {count}"
    )


# --------------------------------------------------------------------------------------------------
# EFA interface type (``InstanceGroups[].NetworkInterface.InterfaceType``, the API's
# ClusterNetworkInterface: ``efa`` "an EFA with ENA interface" or ``efa-only`` "only the EFA device capabilities
# without the ENA device"). EC2 ("Elastic Fabric Adapter", efa-only interfaces): an EFA-only interface has no IP
# address and cannot be an instance's primary interface; the Amazon VPC CNI handles EFA-only interfaces from
# v1.18.5.

#: The oldest VPC CNI that leaves EFA-only interfaces alone.
MIN_VPC_CNI_FOR_EFA_ONLY = (1, 18, 5)


def efa_only_problem(instance_type: str, max_efa_interfaces: int, vpc_cni_version: str) -> str | None:
    """``efa-only`` needs secondary EFA interfaces (an instance type with more than one) and a VPC CNI that
    knows them."""
    if max_efa_interfaces < 2:
        return (
            f"efa-only applies to secondary EFA interfaces, and {instance_type} has "
            f"{max_efa_interfaces or 'no'} EFA interface{'' if max_efa_interfaces == 1 else 's'} (its primary "
            f"interface is never EFA-only); use efa or leave it out"
        )
    found = _ADDON_VERSION.fullmatch(vpc_cni_version)
    if found is not None and tuple(int(part) for part in found.groups()) < MIN_VPC_CNI_FOR_EFA_ONLY:
        oldest = ".".join(str(part) for part in MIN_VPC_CNI_FOR_EFA_ONLY)
        return f"efa-only needs the VPC CNI v{oldest} or newer, got addons.vpc_cni_version {vpc_cni_version}"
    return None


def node_resource_names_problem(groups: Sequence[str]) -> str | None:
    """Each autoscaled group's NodeClass and NodePool take its name in lower case (Kubernetes names are): two
    names differing only in case would share them."""
    seen: dict[str, str] = {}
    for name in groups:
        other = seen.setdefault(name.lower(), name)
        if other != name:
            return (
                f"with autoscaling: karpenter must have names that differ in more than case (each group's "
                f"NodeClass and NodePool take its name in lower case), got {other} and {name}"
            )
    return None


def instance_types_problem(count: int) -> str | None:
    """The health-monitoring agent's instance types: at least one."""
    return None if count >= 1 else "must name at least one ml. instance type, got none"


def fixed_count_problem(count: int) -> str | None:
    """A group Karpenter does not scale has 1 node or more."""
    return None if count >= 1 else f"must be 1 or more, got {count}"
