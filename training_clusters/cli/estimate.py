"""What an environment costs an hour while it runs, read from its synthesized template (README's figures).

On-demand list prices in us-east-1 (:data:`~training_clusters.catalog.prices.PRICES_AS_OF`), per hour: the instances of
every node group at their desired (or least) count, NAT gateways, the EKS control plane, and the Lustre file
system's storage (its monthly price over 730 hours). Not counted: data processed and transferred, logs,
volumes, a PCS cluster's controller fee (:attr:`HourlyEstimate.unpriced` says which parts lack a price).
Sources: EC2 https://aws.amazon.com/ec2/pricing/on-demand/ (Linux), SageMaker HyperPod
https://aws.amazon.com/sagemaker/ai/pricing/ (HyperPod instances), NAT gateways
https://aws.amazon.com/vpc/pricing/, EKS https://aws.amazon.com/eks/pricing/ (standard support), AWS PCS
https://aws.amazon.com/pcs/pricing/. As with :mod:`training_clusters.catalog.prices`, the figures were taken from AWS's
pages as published then, not re-read here: check them before quoting one as a bill.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from training_clusters.catalog.prices import HOURS_PER_MONTH, PRICES_REGION, lustre_monthly_usd

#: USD per instance-hour, on demand, us-east-1: EC2 names, and HyperPod's ``ml.`` names.
INSTANCE_USD_PER_HOUR: Mapping[str, float] = {
    "t3.large": 0.0832,
    "m5.xlarge": 0.192,
    "g5.8xlarge": 2.448,
    "ml.m5.xlarge": 0.23,
    "ml.g5.8xlarge": 3.06,
}
NAT_GATEWAY_USD_PER_HOUR = 0.045
EKS_CLUSTER_USD_PER_HOUR = 0.10


@dataclass(frozen=True)
class HourlyEstimate:
    usd_per_hour: float
    parts: tuple[tuple[str, float], ...]
    """What each priced part costs an hour (``g5.8xlarge x 2``, ``NAT gateway``, ...)."""
    unpriced: tuple[str, ...] = field(default=())
    """What runs but has no price here (an instance type not in the table, a PCS cluster)."""


def hourly_estimate(template: Mapping[str, Any], region: str = PRICES_REGION) -> HourlyEstimate:
    """The environment's hourly cost while it runs, from ``template``."""
    from training_clusters.diagram.model import NodeKind, graph_from_template

    parts: list[tuple[str, float]] = []
    unpriced: list[str] = []
    graph = graph_from_template(template, title="estimate")
    for node in graph.nodes:
        if node.kind is not NodeKind.NODE_GROUP or node.instance_type is None:
            continue
        count = _running(node.count)
        price = INSTANCE_USD_PER_HOUR.get(node.instance_type)
        if price is None:
            unpriced.append(node.instance_type)
        elif count:
            login = " (login)" if node.title.startswith("login pool ") else ""  # a ParallelCluster login pool
            parts.append((f"{node.instance_type} x {count}{login}", price * count))
    resources = template.get("Resources", {})
    for resource in resources.values():
        kind = resource.get("Type")
        properties = resource.get("Properties", {}) or {}
        if kind == "AWS::EC2::NatGateway":
            parts.append(("NAT gateway", NAT_GATEWAY_USD_PER_HOUR))
        elif kind == "AWS::EKS::Cluster":
            parts.append(("EKS control plane", EKS_CLUSTER_USD_PER_HOUR))
        elif kind == "AWS::PCS::Cluster":
            unpriced.append("AWS PCS cluster")
        elif kind == "AWS::FSx::FileSystem":
            lustre = properties.get("LustreConfiguration", {}) or {}
            monthly = lustre_monthly_usd(
                region,
                str(lustre.get("DeploymentType", "")),
                lustre.get("PerUnitStorageThroughput"),
                int(properties.get("StorageCapacity", 0)),
            )
            if monthly is None:
                unpriced.append("FSx for Lustre")
            else:
                parts.append(("FSx for Lustre storage", monthly / HOURS_PER_MONTH))
    if region != PRICES_REGION:
        return HourlyEstimate(0.0, (), tuple(p for p, _ in parts) + tuple(unpriced))
    return HourlyEstimate(round(sum(usd for _, usd in parts), 4), tuple(parts), tuple(unpriced))


def _running(count: str | None) -> int:
    """Instances running: the desired count (``2 (1-4)``), else the least of a range (``0-2``: idle)."""
    match = re.match(r"(\d+)", count or "")
    return int(match.group(1)) if match else 0
