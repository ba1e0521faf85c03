"""Instance type offerings per Availability Zone, and EFA support."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
)

from training_clusters.config import EnvironmentConfig
from training_clusters.preflight.demands import InstanceDemand, Service
from training_clusters.preflight.results import AwsClients, Check, _failed_call


def _offering_checks(
    config: EnvironmentConfig, demands: Sequence[InstanceDemand], clients: AwsClients
) -> list[Check]:
    groups = [d for d in demands if d.service is Service.EC2]
    if not groups:
        return []
    types = list(dict.fromkeys(d.instance_type for d in groups))
    try:
        offered = _offered_azs(clients.ec2, types)
    except (ClientError, BotoCoreError) as error:
        needed = "; ".join(f"{d.instance_type} in {', '.join(d.availability_zones)}" for d in groups)
        return [_failed_call("EC2 instance-type offerings", needed, error, clients.ec2)]
    return [_offering_check(config, d, offered.get(d.instance_type, set()), clients.region) for d in groups]


def _offered_azs(ec2: Any, instance_types: list[str]) -> dict[str, set[str]]:
    offered: dict[str, set[str]] = {}
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": instance_types}]
    )
    for page in pages:
        for offering in page.get("InstanceTypeOfferings", []):
            offered.setdefault(offering["InstanceType"], set()).add(offering["Location"])
    return offered


def _offering_check(
    config: EnvironmentConfig, demand: InstanceDemand, offered: set[str], region: str
) -> Check:
    missing = [az for az in demand.availability_zones if az not in offered]
    zones = ", ".join(sorted(offered))
    return Check(
        check=f"EC2 offering {demand.instance_type}",
        needed=f"{', '.join(demand.availability_zones)} ({demand.where})",
        available=f"offered in {zones}" if offered else f"not offered in {region}",
        passed=not missing,
        remedy=_offering_remedy(config, demand, offered, missing, region) if missing else "",
    )


def _offering_remedy(
    config: EnvironmentConfig, demand: InstanceDemand, offered: set[str], missing: list[str], region: str
) -> str:
    instance_type = demand.instance_type
    other_type = f"or choose another instance type for {demand.where}"
    if not offered:
        return f"{instance_type} is not offered in {region}: choose another instance type for {demand.where}"
    not_here = f"{instance_type} is not offered in {', '.join(missing)}"
    if demand.in_placement_az:
        candidates = [az for az in config.availability_zones if az in offered]
        if candidates:
            return f"{not_here}: set network.placement_availability_zone to {candidates[0]}, {other_type}"
        return (
            f"{not_here}: add one of {', '.join(sorted(offered))} to availability_zones and make it "
            f"network.placement_availability_zone, {other_type}"
        )
    return f"{not_here}: pick availability_zones where it is ({', '.join(sorted(offered))}), {other_type}"


def _efa_checks(demands: Sequence[InstanceDemand], clients: AwsClients) -> list[Check]:
    groups = [d for d in demands if d.efa and d.service is Service.EC2]
    if not groups:
        return []
    types = list(dict.fromkeys(d.instance_type for d in groups))
    try:
        described = clients.ec2.describe_instance_types(InstanceTypes=types)["InstanceTypes"]
    except (ClientError, BotoCoreError) as error:
        return [_failed_call("EFA support", f"EFA on {', '.join(types)}", error, clients.ec2)]
    supported = {t["InstanceType"]: bool(t.get("NetworkInfo", {}).get("EfaSupported")) for t in described}
    return [_efa_check(d, supported.get(d.instance_type)) for d in groups]


def _efa_check(demand: InstanceDemand, supported: bool | None) -> Check:
    if supported is None:
        available = "not described by EC2 in this region"
    else:
        available = f"EfaSupported: {str(supported).lower()}"
    if demand.where.startswith("eks."):
        drop_efa = "move the group to eks.gpu_nodegroups"
    else:
        drop_efa = "set efa: false on it"
    return Check(
        check=f"EFA on {demand.instance_type}",
        needed=f"EFA ({demand.where})",
        available=available,
        passed=bool(supported),
        remedy="" if supported else f"choose an EFA-capable instance type for {demand.where}, or {drop_efa}",
    )
