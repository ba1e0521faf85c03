"""Amazon EKS add-ons: pinned versions, the nodes a device plugin serves, CSI driver volumes and GPU monitoring.

Shared by the add-on constructs (``constructs/eks/addons``) and the environment file's ``eks.addons`` and
``hyperpod_eks.addons`` sections, so both refuse the same values with the same words.

Sources: EKS add-on versions as ``aws eks describe-addon-versions`` lists them
(https://docs.aws.amazon.com/eks/latest/userguide/updating-an-add-on.html); EC2's tag limits
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions) and the EBS CSI
driver's ``extraVolumeTags`` ``key=value`` form
(https://github.com/kubernetes-sigs/aws-ebs-csi-driver/blob/master/docs/tagging.md); the EKS add-on image
registries (https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from training_clusters.model.errors import excerpt
from training_clusters.model.options import MigStrategy

#: EKS's form of an add-on version (``aws eks describe-addon-versions``), also the environment schema's pattern.
EKS_ADDON_VERSION_PATTERN = r"^v\d+\.\d+\.\d+-eksbuild\.\d+$"
EKS_ADDON_VERSION = re.compile(EKS_ADDON_VERSION_PATTERN)
#: EC2 tag keys are 1-128 characters, values at most 256.
MAX_VOLUME_TAG_KEY = 128
MAX_VOLUME_TAG_VALUE = 256


def addon_version_problem(addon_version: str) -> str | None:
    """A pinned add-on version in EKS's form (:data:`EKS_ADDON_VERSION`)."""
    if EKS_ADDON_VERSION.fullmatch(addon_version):
        return None
    return f"must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), got {excerpt(addon_version)}"


def addon_instance_types_problem(kind: str, instance_types: Sequence[str]) -> str | None:
    """A device plugin serves at least one instance type."""
    return None if instance_types else f"must name at least one {kind} instance type, got none"


def addon_instance_type_problem(name: str, kind: str, feature: str, *, has_feature: bool) -> str | None:
    """Each instance type a device plugin serves has the ``feature`` it advertises."""
    if has_feature:
        return None
    return f"'{name}' has no {feature}; give {kind} instance types (`training-clusters catalog` lists them)"


def volume_tag_problem(key: str, value: str) -> str | None:
    """An EBS CSI driver volume tag: EC2's limits (keys 1-128 characters not under ``aws:``, values at most
    256) and the driver's ``key=value,...`` form, which ``=`` or ``,`` would split."""
    if not key or len(key) > MAX_VOLUME_TAG_KEY or key.lower().startswith("aws:") or "=" in key or "," in key:
        return f"keys must be 1-128 characters without '=' or ',' and not start with 'aws:', got {key!r}"
    if len(value) > MAX_VOLUME_TAG_VALUE or "=" in value or "," in value:
        return f"values must be at most 256 characters without '=' or ',', got {key!r}: {value!r}"
    return None


def efa_registry_problem(region: str, registry: str | None) -> str | None:
    """The EFA device plugin's image comes from the region's EKS add-on registry, which must be known."""
    if registry is not None:
        return None
    return (
        f"is required in {region}, a region without an EKS add-on registry in this library's table; "
        "give the EFA device plugin's repository in your region's EKS registry "
        "(https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html)"
    )


def fsx_volume_capacity_problem(capacity_gib: int | None, known_gib: int | None) -> str | None:
    """The shared volume's capacity: the file system's own, given or not, and required when it is unknown."""
    if capacity_gib is None:
        if known_gib is None:
            return "is required for an adopted file system whose ExistingLustre gives no storage_capacity_gib"
        return None
    if known_gib is not None and capacity_gib != known_gib:
        return f"must match the file system's storage_capacity_gib ({known_gib}) or be omitted, got {capacity_gib}"
    return None


def grafana_problem(*, grafana: bool, prometheus: bool) -> str | None:
    """Grafana shows what Prometheus collects: no Grafana without Prometheus."""
    if grafana and not prometheus:
        return "needs prometheus (Grafana's data source), got prometheus=False"
    return None


def monitoring_mig_strategy_problem(strategy: MigStrategy, *, has_layouts: bool) -> str | None:
    """MIG layouts need a device plugin strategy that advertises MIG devices."""
    if has_layouts and strategy is MigStrategy.NONE:
        return "must be SINGLE or MIXED with mig_layouts, got NONE"
    return None


def monitoring_lustre_problem(*, lustre: bool, grafana: bool) -> str | None:
    """A file system is given to monitoring only for Grafana's FSx dashboard."""
    if lustre and not grafana:
        return "is shown on Grafana's FSx dashboard and needs grafana=True, got grafana=False"
    return None


def monitoring_ebs_csi_driver_problem(*, ebs_csi_driver: bool, persistent_storage: bool) -> str | None:
    """An EBS CSI driver is given to monitoring only to make its persistent volumes."""
    if ebs_csi_driver and not persistent_storage:
        return "is only used to persist metrics; got one with persistent_storage=False"
    return None


def monitoring_volume_problem(size_gib: int) -> str | None:
    """A Prometheus or Grafana volume of 1 GiB or more."""
    return None if size_gib >= 1 else f"must be 1 or more, got {size_gib}"
