"""SageMaker HyperPod on Amazon EKS: what HyperPod requires of the EKS cluster and of its instance groups.

Shared by :mod:`training_clusters.constructs.hyperpod_eks.cluster` and the environment file's ``hyperpod_eks``
section, so both refuse the same values with the same words. Facts from "Getting started with Amazon EKS
support in SageMaker HyperPod"
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html): the
Kubernetes versions, the two authentication modes, the VPC CNI version.
"""

from __future__ import annotations

import re

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
