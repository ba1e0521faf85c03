"""What ``cdk destroy`` leaves of an environment, read offline from its synthesized template, and its cost.

``training-clusters cleanup FILE --dry-run`` prints this without credentials; with credentials ``cleanup FILE``
lists what is really there (:mod:`training_clusters.cli.cleanup`). What stays:

* every resource whose ``DeletionPolicy`` is ``Retain`` or ``RetainExceptOnCreate`` (the file system, an
  accounting database with its key and secrets, buckets, log groups, the network they live in);
* a ParallelCluster cluster whose provider resource says ``DeletionPolicy: Retain`` (it keeps running);
* the EBS volumes of Kubernetes claims (Prometheus, Grafana): deleting the cluster deletes no volume
  (see :class:`~training_clusters.constructs.EbsCsiDriver`), so they stay whatever their reclaim policy.

CDK-free: the caller synthesizes the template.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from training_clusters.catalog.prices import (
    EBS_GP3_USD_PER_GB_MONTH,
    KMS_KEY_USD_PER_MONTH,
    PRICE_SOURCES,
    PRICES_AS_OF,
    PRICES_REGION,
    SECRET_USD_PER_MONTH,
    aurora_serverless_v2_monthly_usd,
    flat_monthly_usd,
    lustre_monthly_usd,
)

RETAINING_POLICIES = frozenset({"Retain", "RetainExceptOnCreate"})
HELM_CHART_TYPES = frozenset({"Custom::AWSCDK-EKS-HelmChart"})

#: How each retained CloudFormation type is called, and what prices it (a key of PRICE_SOURCES), if anything.
LABELS: Mapping[str, tuple[str, str | None]] = {
    "AWS::FSx::FileSystem": ("FSx for Lustre file system", "fsx"),
    "AWS::RDS::DBCluster": ("Aurora database cluster", "aurora"),
    "AWS::RDS::DBInstance": ("database instance", None),
    "AWS::RDS::DBSubnetGroup": ("database subnet group", None),
    "AWS::RDS::DBClusterParameterGroup": ("database parameter group", None),
    "AWS::S3::Bucket": ("S3 bucket", None),
    "AWS::Logs::LogGroup": ("log group", None),
    "AWS::SecretsManager::Secret": ("secret", "secrets"),
    "AWS::KMS::Key": ("KMS key", "kms"),
    "AWS::EC2::SecurityGroup": ("security group", None),
    "AWS::EC2::Subnet": ("subnet", None),
    "AWS::EC2::VPC": ("VPC", None),
}


@dataclass(frozen=True)
class Kept:
    """One thing that outlives ``cdk destroy``."""

    resource: str
    """What it is (``FSx for Lustre file system``)."""
    logical_id: str
    """Its logical id in the template (for a volume: the chart that claims it)."""
    detail: str = ""
    monthly_usd: float | None = None
    cost: str = "free"
    """As shown: ``$168.00``, ``free``, ``by use``, ``at least $43.80 + storage``, ``unknown``."""
    source: str | None = None
    """The key of :data:`~training_clusters.catalog.prices.PRICE_SOURCES` its price comes from."""

    def as_dict(self) -> dict[str, object]:
        return {
            "resource": self.resource,
            "logical_id": self.logical_id,
            "detail": self.detail,
            "monthly_usd": self.monthly_usd,
            "cost": self.cost,
        }


def kept_after_destroy(template: Mapping[str, Any], region: str) -> list[Kept]:
    """Everything of ``template`` that ``cdk destroy`` leaves in ``region``, in template order."""
    kept: list[Kept] = []
    for logical_id, resource in template.get("Resources", {}).items():
        kind = str(resource.get("Type", ""))
        properties = resource.get("Properties", {}) or {}
        if resource.get("DeletionPolicy") in RETAINING_POLICIES:
            kept.append(_retained(logical_id, kind, properties, region))
        elif kind == "Custom::PclusterCluster" and properties.get("DeletionPolicy") == "Retain":
            kept.append(Kept("ParallelCluster cluster (keeps running)", logical_id, cost="its instances"))
        if kind in HELM_CHART_TYPES:
            kept.extend(_volumes(logical_id, properties, region))
    return kept


def monthly_total(kept: list[Kept]) -> float:
    return round(sum(k.monthly_usd or 0 for k in kept), 2)


def summary(kept: list[Kept], region: str) -> list[str]:
    """The lines under the table: the total, what comes on top, and where each price used comes from."""
    if region != PRICES_REGION:
        return [f"monthly cost unknown: the price table holds {PRICES_REGION} only, not {region}"]
    by_use = any(k.monthly_usd is None and k.cost != "free" for k in kept)
    total = f"about ${monthly_total(kept):,.2f} a month ({PRICES_REGION} list prices of {PRICES_AS_OF})"
    lines = [total + (", plus what is billed by use" if by_use else "")]
    used = sorted({k.source for k in kept if k.source})
    lines.extend(f"price source: {PRICE_SOURCES[source]}" for source in used)
    return lines


def _retained(logical_id: str, kind: str, properties: Mapping[str, Any], region: str) -> Kept:
    label, source = LABELS.get(kind, (kind, None))
    if kind == "AWS::FSx::FileSystem":
        lustre = properties.get("LustreConfiguration", {}) or {}
        deployment = str(lustre.get("DeploymentType", "SCRATCH_1"))
        throughput = lustre.get("PerUnitStorageThroughput")
        capacity = properties.get("StorageCapacity")
        usd = (
            lustre_monthly_usd(region, deployment, _int(throughput), capacity)
            if isinstance(capacity, int)
            else None
        )
        per_tib = f", {throughput} MB/s/TiB" if isinstance(throughput, int) else ""
        detail = f"{deployment}{per_tib}, {capacity} GiB"
        return Kept(label, logical_id, detail, usd, _usd(usd, region), source)
    if kind == "AWS::RDS::DBCluster":
        minimum = (properties.get("ServerlessV2ScalingConfiguration", {}) or {}).get("MinCapacity")
        usd = (
            aurora_serverless_v2_monthly_usd(region, float(minimum))
            if isinstance(minimum, int | float)
            else None
        )
        cost = (
            f"at least {_usd(usd, region)} + storage" if usd is not None else _usd(None, region, by_use=True)
        )
        protected = ", deletion protection on" if properties.get("DeletionProtection") is True else ""
        minimum_shown = f", {minimum:g} ACU minimum" if _number(minimum) else ""
        detail = f"{properties.get('Engine', 'aurora')}{minimum_shown}{protected}"
        return Kept(label, logical_id, detail, usd, cost, source)
    flat = {"kms": KMS_KEY_USD_PER_MONTH, "secrets": SECRET_USD_PER_MONTH}
    if source in flat:
        usd = flat_monthly_usd(region, flat[source])
        return Kept(label, logical_id, "", usd, _usd(usd, region), source)
    if kind in ("AWS::S3::Bucket", "AWS::Logs::LogGroup"):
        detail = _retention(properties) if kind == "AWS::Logs::LogGroup" else ""
        return Kept(label, logical_id, detail, None, "by use")
    if kind == "AWS::RDS::DBInstance":
        return Kept(label, logical_id, str(properties.get("DBInstanceClass", "")), None, "with its cluster")
    return Kept(label, logical_id)


def _volumes(chart: str, properties: Mapping[str, Any], region: str) -> Iterator[Kept]:
    """The EBS volumes a chart's claims make (kube-prometheus-stack's Prometheus and Grafana)."""
    values = _values(properties.get("Values"))
    if not values:
        return
    prometheus = values.get("prometheus", {}).get("prometheusSpec", {}).get("storageSpec", {})
    claim = prometheus.get("volumeClaimTemplate", {}).get("spec", {})
    size = claim.get("resources", {}).get("requests", {}).get("storage")
    if size is not None:
        yield _volume(chart, "Prometheus", str(claim.get("storageClassName", "")), str(size), region)
    grafana = values.get("grafana", {})
    persistence = grafana.get("persistence", {}) if isinstance(grafana, dict) else {}
    if grafana.get("enabled") and persistence.get("enabled") and persistence.get("size"):
        yield _volume(
            chart, "Grafana", str(persistence.get("storageClassName", "")), str(persistence["size"]), region
        )


def _volume(chart: str, who: str, storage_class: str, size: str, region: str) -> Kept:
    gib = _gib(size)
    usd = round(gib * EBS_GP3_USD_PER_GB_MONTH, 2) if gib is not None and region == PRICES_REGION else None
    detail = f"{who}'s claim, {size}" + (f", StorageClass {storage_class}" if storage_class else "")
    return Kept("EBS volume (gp3)", chart, detail, usd, _usd(usd, region), "ebs")


def _values(value: Any) -> dict[str, Any]:
    """A Helm chart resource's values (a JSON string; one with tokens is joined with them left out)."""
    if isinstance(value, dict) and isinstance(value.get("Fn::Join"), list):
        separator, parts = value["Fn::Join"]
        value = str(separator).join(part if isinstance(part, str) else "" for part in parts)
    if not isinstance(value, str):
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _gib(size: str) -> int | None:
    match = re.fullmatch(r"(\d+)Gi", size)
    return int(match.group(1)) if match else None


def _retention(properties: Mapping[str, Any]) -> str:
    days = properties.get("RetentionInDays")
    return f"kept {days} days" if isinstance(days, int) else "kept forever"


def _usd(amount: float | None, region: str, *, by_use: bool = False) -> str:
    if amount is not None:
        return f"${amount:,.2f}"
    return "by use" if by_use and region == PRICES_REGION else "unknown"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
