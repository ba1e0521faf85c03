"""Service Quotas: EC2's vCPU quotas, SageMaker's HyperPod quotas and FSx for Lustre's storage quota."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
)

from training_clusters.catalog import CATALOG, quota_family_of
from training_clusters.config import EnvironmentConfig
from training_clusters.model.options import LustreDeploymentType
from training_clusters.preflight.demands import (
    Capacity,
    InstanceDemand,
    Service,
    _hyperpod_section,
    _HyperPodGroup,
)
from training_clusters.preflight.results import (
    _PAGE_SIZE,
    AwsClients,
    Check,
    _compare,
    _error_code,
    _failed_call,
    _not_found,
    _Quota,
)

LUSTRE_STORAGE_QUOTAS: Mapping[LustreDeploymentType, tuple[str, tuple[str, ...]]] = MappingProxyType(
    {
        LustreDeploymentType.SCRATCH_2: ("L-AD2FC696", ("Lustre Scratch storage capacity",)),
        LustreDeploymentType.PERSISTENT_2: (
            "L-8F1B9C74",
            ("Lustre Persistent_2 storage capacity", "Lustre Persistent_2 file storage capacity"),
        ),
    }
)
"""Code and names of the account-wide FSx for Lustre storage quota (GiB, service code ``fsx``) per type.

Names: FSx for Lustre User Guide, "Quotas" (https://docs.aws.amazon.com/fsx/latest/LustreGuide/limits.html),
"Quotas that you can increase" (default 100800 GiB for scratch). Codes: as ``ListServiceQuotas`` lists them
(not in the AWS docs), so the quota is matched by code or by any of its names.
"""


# "ml.<instance_type> for cluster usage" (instances), and the three below. Their codes are not documented.
_SAGEMAKER_PER_CLUSTER = re.compile(r"maximum number (of )?instances allowed per sagemaker hyperpod cluster")


_SAGEMAKER_ACROSS_CLUSTERS = re.compile(
    r"total number of instances allowed across sagemaker hyperpod clusters"
)


_SAGEMAKER_EBS = re.compile(r"maximum size of ebs volume in gb for a (sagemaker )?hyperpod cluster instance")


def _described(
    demands: tuple[InstanceDemand, ...], clients: AwsClients
) -> tuple[tuple[InstanceDemand, ...], list[Check]]:
    """``demands`` with the vCPUs EC2 describes for each type the catalogue does not know (a controller, login,
    head or system node may be any type), and a failed check when EC2 could not say."""
    unknown = list(
        dict.fromkeys(
            d.ec2_instance_type
            for d in demands
            if d.service is Service.EC2 and d.ec2_instance_type not in CATALOG
        )
    )
    if not unknown:
        return demands, []
    try:
        described = clients.ec2.describe_instance_types(InstanceTypes=unknown)["InstanceTypes"]
    except (ClientError, BotoCoreError) as error:
        failed = _failed_call("EC2 instance types", f"vCPUs of {', '.join(unknown)}", error, clients.ec2)
        return tuple(d for d in demands if d.ec2_instance_type not in unknown), [failed]
    vcpus = {t["InstanceType"]: t["VCpuInfo"]["DefaultVCpus"] for t in described}
    missing = [name for name in unknown if name not in vcpus]
    checks = [
        Check(
            check=f"EC2 instance type {name}",
            needed=f"{name} ({', '.join(d.where for d in demands if d.ec2_instance_type == name)})",
            available=f"not described by EC2 in {clients.region}",
            passed=False,
            remedy=f"check the spelling of {name}, or choose a type EC2 offers in {clients.region}",
        )
        for name in missing
    ]
    kept = tuple(
        replace(d, described_vcpus=vcpus[d.ec2_instance_type]) if d.ec2_instance_type in vcpus else d
        for d in demands
        if d.ec2_instance_type not in missing
    )
    return kept, checks


def _ec2_quota_checks(demands: Sequence[InstanceDemand], clients: AwsClients) -> list[Check]:
    groups: dict[tuple[str, str], list[InstanceDemand]] = {}
    reserved: list[Check] = []
    unquoted: list[Check] = []
    for demand in demands:
        if demand.service is not Service.EC2:
            continue
        if demand.capacity in (Capacity.CAPACITY_BLOCK, Capacity.CAPACITY_RESERVATION):
            reserved.append(_reserved_check(demand))
            continue
        quota = _ec2_quota(demand)
        if quota is None:
            unquoted.append(_unquoted_check(demand))
            continue
        groups.setdefault(quota, []).append(demand)
    checks = [_ec2_quota_check(code, name, members, clients) for (code, name), members in groups.items()]
    return checks + unquoted + reserved


def _unquoted_check(demand: InstanceDemand) -> Check:
    return Check(
        check=f"EC2 quota for {demand.where}",
        needed=f"{demand.vcpus} vCPUs ({demand.description})",
        available=(
            f"not verified: the {demand.ec2_instance_type.split('.')[0]} family counts against a vCPU quota of its "
            "own (not Standard, G and VT, P or Trn)"
        ),
        passed=True,
        remedy="",
    )


def _ec2_quota(demand: InstanceDemand) -> tuple[str, str] | None:
    family = quota_family_of(demand.ec2_instance_type)
    if family is None:
        return None
    if demand.capacity is Capacity.SPOT:
        return family.spot_quota_code, family.spot_quota_name
    return family.quota_code, family.quota_name


def _ec2_quota_check(code: str, name: str, members: Sequence[InstanceDemand], clients: AwsClients) -> Check:
    vcpus = sum(m.vcpus for m in members)
    needed = f"{vcpus} vCPUs ({' + '.join(m.description for m in members)})"
    try:
        quota = _get_quota(clients.service_quotas, "ec2", code)
    except (ClientError, BotoCoreError) as error:
        return _failed_call(f"EC2 quota {code} {name}", needed, error, clients.service_quotas)
    if quota is None:
        return _not_found(f"EC2 quota {code} {name}", needed, "ec2", clients.region)
    check = f"EC2 quota {code} {quota.name or name}"
    fields = " / ".join(m.count_field for m in members)
    return _compare(check, needed, vcpus, quota, "vCPUs", "ec2", clients.region, fields)


def _reserved_check(demand: InstanceDemand) -> Check:
    kind = "Capacity Block" if demand.capacity is Capacity.CAPACITY_BLOCK else "capacity reservation"
    target = demand.capacity_reservation_id or (demand.reserved.described if demand.reserved else "")
    return Check(
        check=f"EC2 quota for {demand.where}",
        needed=f"{demand.vcpus} vCPUs ({demand.description})",
        available=(
            f"skipped: instances launched into {kind} {target} need no further On-Demand vCPU quota (the "
            "reservation's state, size, instance type and AZ are checked on their own rows)"
        ),
        passed=True,
        remedy="",
    )


@dataclass(frozen=True)
class _Wanted:
    """One SageMaker quota to compare with what the file needs."""

    label: str
    matches: Callable[[_Quota], bool]
    amount: int
    detail: str
    unit: str
    field: str
    """The setting to lower when the quota cannot be raised."""

    @property
    def needed(self) -> str:
        return f"{self.amount} {self.unit} ({self.detail})"


def _sagemaker_quota_checks(
    config: EnvironmentConfig, demands: Sequence[InstanceDemand], clients: AwsClients
) -> list[Check]:
    found = _hyperpod_section(config)
    if found is None:
        return []
    wanted = _sagemaker_wanted(found, [d for d in demands if d.service is Service.SAGEMAKER])
    quotas = _QuotaList(clients.service_quotas, "sagemaker")
    checks: list[Check] = []
    for item in wanted:
        try:
            quota = quotas.find(item.matches)
        except (ClientError, BotoCoreError) as error:
            summary = "; ".join(f"{w.label}: {w.amount} {w.unit}" for w in wanted)
            return [*checks, _failed_call("SageMaker quotas for HyperPod", summary, error, quotas.client)]
        if quota is None:
            checks.append(
                _not_found(f"SageMaker quota {item.label}", item.needed, "sagemaker", clients.region)
            )
            continue
        check = f"SageMaker quota {quota.code} {quota.name}"
        checks.append(
            _compare(
                check, item.needed, item.amount, quota, item.unit, "sagemaker", clients.region, item.field
            )
        )
    return checks


def _sagemaker_wanted(
    found: tuple[str, str, list[_HyperPodGroup]], groups: Sequence[InstanceDemand]
) -> list[_Wanted]:
    section, cluster_name, instance_groups = found
    by_type: dict[str, list[InstanceDemand]] = {}
    for demand in groups:
        by_type.setdefault(demand.instance_type, []).append(demand)
    wanted = [
        _Wanted(
            label=f"{instance_type} for cluster usage",
            matches=_exactly(f"{instance_type} for cluster usage"),
            amount=sum(m.count for m in members),
            detail=" + ".join(m.description for m in members),
            unit="instances",
            field=" / ".join(m.count_field for m in members),
        )
        for instance_type, members in by_type.items()
    ]
    total = sum(d.count for d in groups)
    cluster = f"hyperpod cluster {cluster_name}"
    for label, quota, counted in (
        ("Maximum number instances allowed per SageMaker HyperPod cluster", _SAGEMAKER_PER_CLUSTER,
         f"all instance groups of {cluster}"),
        ("Total number of instances allowed across SageMaker HyperPod clusters", _SAGEMAKER_ACROSS_CLUSTERS,
         f"{cluster}; other clusters in the account not counted"),
    ):  # fmt: skip
        wanted.append(
            _Wanted(label=label, matches=_named(quota), amount=total, detail=counted, unit="instances",
                    field=f"{section}.instance_groups[].count")
        )  # fmt: skip
    volumes = [(g.name, g.volume_gib) for g in instance_groups if g.volume_gib]
    volume_key = "extra_volume_gib" if section == "hyperpod" else "volume_gib"
    if volumes:
        name, size = max(volumes, key=lambda item: item[1] or 0)
        wanted.append(
            _Wanted(
                label="Maximum size of EBS volume in GB for a SageMaker HyperPod cluster instance",
                matches=_named(_SAGEMAKER_EBS),
                amount=size or 0,
                detail=f"{section}.instance_groups[{name}].{volume_key}",
                unit="GB",
                field=f"{section}.instance_groups[{name}].{volume_key}",
            )
        )
    return wanted


def _lustre_quota_checks(config: EnvironmentConfig, clients: AwsClients) -> list[Check]:
    lustre = config.storage.lustre
    if lustre is None:
        return []
    code, names = LUSTRE_STORAGE_QUOTAS[lustre.deployment_type]
    capacity = lustre.storage_capacity_gib
    needed = f"{capacity} GiB (storage.lustre.storage_capacity_gib, {lustre.deployment_type.value})"
    label = f"FSx quota {code} {names[0]}"
    quotas = _QuotaList(clients.service_quotas, "fsx")
    try:
        quota = quotas.find(_coded(code, names))
    except (ClientError, BotoCoreError) as error:
        return [_failed_call(label, needed, error, quotas.client)]
    if quota is None:
        return [_not_found(label, needed, "fsx", clients.region)]
    check = f"FSx quota {quota.code} {quota.name}"
    return [
        _compare(
            check,
            needed,
            capacity,
            quota,
            "GiB",
            "fsx",
            clients.region,
            "storage.lustre.storage_capacity_gib",
        )
    ]


def _quota_from(raw: Mapping[str, Any], *, default_only: bool) -> _Quota | None:
    if raw.get("Value") is None:
        return None
    return _Quota(
        code=str(raw.get("QuotaCode", "")),
        name=str(raw.get("QuotaName", "")),
        value=float(raw["Value"]),
        adjustable=bool(raw.get("Adjustable", True)),
        default_only=default_only,
    )


def _get_quota(client: Any, service_code: str, quota_code: str) -> _Quota | None:
    """The applied value, else AWS's default (Service Quotas has only the default for some quotas)."""
    try:
        raw = client.get_service_quota(ServiceCode=service_code, QuotaCode=quota_code)["Quota"]
        applied = _quota_from(raw, default_only=False)
        if applied is not None:
            return applied
    except ClientError as error:
        if _error_code(error) != "NoSuchResourceException":
            raise
    try:
        raw = client.get_aws_default_service_quota(ServiceCode=service_code, QuotaCode=quota_code)["Quota"]
    except ClientError as error:
        if _error_code(error) == "NoSuchResourceException":
            return None
        raise
    return _quota_from(raw, default_only=True)


def _normal(name: str) -> str:
    return " ".join(name.lower().split())


def _named(pattern: re.Pattern[str]) -> Callable[[_Quota], bool]:
    return lambda quota: pattern.fullmatch(_normal(quota.name)) is not None


def _exactly(name: str) -> Callable[[_Quota], bool]:
    return lambda quota: _normal(quota.name) == _normal(name)


def _coded(code: str, names: Iterable[str]) -> Callable[[_Quota], bool]:
    wanted = {_normal(n) for n in names}
    return lambda quota: quota.code == code or _normal(quota.name) in wanted


class _QuotaList:
    """One service's quotas, listed once; AWS's defaults are listed too if a quota is missing."""

    def __init__(self, client: Any, service_code: str) -> None:
        self.client = client
        self._service_code = service_code
        self._applied: list[_Quota] | None = None
        self._defaults: list[_Quota] | None = None

    def find(self, matches: Callable[[_Quota], bool]) -> _Quota | None:
        """The first quota ``matches`` accepts, or None."""
        if self._applied is None:
            self._applied = self._list("list_service_quotas", default_only=False)
        found = next((q for q in self._applied if matches(q)), None)
        if found is not None:
            return found
        if self._defaults is None:
            self._defaults = self._list("list_aws_default_service_quotas", default_only=True)
        return next((q for q in self._defaults if matches(q)), None)

    def _list(self, operation: str, *, default_only: bool) -> list[_Quota]:
        pages = self.client.get_paginator(operation).paginate(
            ServiceCode=self._service_code, PaginationConfig={"PageSize": _PAGE_SIZE}
        )
        quotas = (
            _quota_from(raw, default_only=default_only) for page in pages for raw in page.get("Quotas", [])
        )
        return [q for q in quotas if q is not None]
