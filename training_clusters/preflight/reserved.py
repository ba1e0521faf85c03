"""Reserved capacity: On-Demand Capacity Reservations, Capacity Blocks and SageMaker training plans."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
)

from training_clusters.model import capacity as capacity_model
from training_clusters.model.options import CapacityKind
from training_clusters.preflight.demands import InstanceDemand
from training_clusters.preflight.results import AwsClients, Check, _error_code, _failed_call

#: A reservation ending sooner than this after preflight runs is a warning: jobs may not finish in it.
ENDING_SOON = timedelta(hours=24)


_USABLE_RESERVATION_STATES = ("active", "scheduled")


_RESERVATION_NOT_FOUND = {"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed"}


_USABLE_PLAN_STATES = ("Active", "Scheduled")


_HYPERPOD_TARGET = "hyperpod-cluster"


@dataclass(frozen=True)
class _Held:
    """What a reservation or plan holds, in the terms the checks compare (from either API)."""

    label: str
    state: str
    usable: bool
    instance_types: tuple[str, ...]
    availability_zones: tuple[str, ...]
    available: int | None
    total: int | None
    start: datetime | None
    end: datetime | None


def _reserved_capacity_checks(
    demands: Sequence[InstanceDemand], clients: AwsClients, now: datetime
) -> list[Check]:
    by_target: dict[capacity_model.Capacity, list[InstanceDemand]] = {}
    for demand in demands:
        if demand.reserved is not None:
            by_target.setdefault(demand.reserved, []).append(demand)
    checks: list[Check] = []
    for reserved, members in by_target.items():
        if reserved.kind is CapacityKind.TRAINING_PLAN:
            checks.extend(_training_plan_checks(reserved, members, clients, now))
        elif reserved.reservation_id is not None:
            checks.extend(_reservation_checks(reserved, members, clients, now))
        else:
            checks.append(_not_verified_group(reserved, members))
    return checks


def _needed(members: Sequence[InstanceDemand]) -> str:
    return " + ".join(f"{m.description} in {', '.join(m.availability_zones)}" for m in members)


def _fields(members: Sequence[InstanceDemand]) -> str:
    return " / ".join(f"{m.where}.capacity" for m in members)


def _not_verified_group(reserved: capacity_model.Capacity, members: Sequence[InstanceDemand]) -> Check:
    return Check(
        check=f"Reserved capacity {reserved.described}",
        needed=_needed(members),
        available="not verified: preflight does not list a resource group's reservations",
        passed=True,
        remedy="",
    )


def _reservation_checks(
    reserved: capacity_model.Capacity, members: Sequence[InstanceDemand], clients: AwsClients, now: datetime
) -> list[Check]:
    reservation_id = reserved.reservation_id
    label = reserved.described
    try:
        found = clients.ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    except ClientError as error:
        if _error_code(error) in _RESERVATION_NOT_FOUND:
            return [_missing(label, members, f"no capacity reservation {reservation_id} in {clients.region}")]
        return [_failed_call(label, _needed(members), error, clients.ec2)]
    except BotoCoreError as error:
        return [_failed_call(label, _needed(members), error, clients.ec2)]
    raw = (found.get("CapacityReservations") or [{}])[0]
    state = str(raw.get("State", "unknown"))
    held = _Held(
        label=label,
        state=state,
        usable=state in _USABLE_RESERVATION_STATES,
        instance_types=(str(raw.get("InstanceType", "")),),
        availability_zones=(str(raw.get("AvailabilityZone", "")),),
        available=raw.get("AvailableInstanceCount"),
        total=raw.get("TotalInstanceCount"),
        start=raw.get("StartDate"),
        end=raw.get("EndDate"),
    )
    return _held_checks(held, members, now)


def _training_plan_checks(
    reserved: capacity_model.Capacity, members: Sequence[InstanceDemand], clients: AwsClients, now: datetime
) -> list[Check]:
    arn = reserved.training_plan_arn
    label = reserved.described
    try:
        plan = clients.sagemaker.describe_training_plan(TrainingPlanName=arn)
    except ClientError as error:
        if _error_code(error) in ("ResourceNotFound", "ValidationException"):
            return [_missing(label, members, f"no training plan {arn} in {clients.region}")]
        return [_failed_call(label, _needed(members), error, clients.sagemaker)]
    except BotoCoreError as error:
        return [_failed_call(label, _needed(members), error, clients.sagemaker)]
    summaries = plan.get("ReservedCapacitySummaries", [])
    state = str(plan.get("Status", "unknown"))
    held = _Held(
        label=label,
        state=state,
        usable=state in _USABLE_PLAN_STATES,
        instance_types=tuple(dict.fromkeys(str(s.get("InstanceType", "")) for s in summaries)),
        availability_zones=tuple(
            dict.fromkeys(str(s["AvailabilityZone"]) for s in summaries if s.get("AvailabilityZone"))
        ),
        available=plan.get("AvailableInstanceCount"),
        total=plan.get("TotalInstanceCount"),
        start=plan.get("StartTime"),
        end=plan.get("EndTime"),
    )
    checks = _held_checks(held, members, now)
    targets = [str(t) for t in plan.get("TargetResources", [])]
    if _HYPERPOD_TARGET not in targets:
        checks.append(
            Check(
                check=f"{label}: target",
                needed=f"{_HYPERPOD_TARGET} ({_fields(members)})",
                available=", ".join(targets) or "no target resources",
                passed=False,
                remedy=f"reserve a training plan for {_HYPERPOD_TARGET} and set its ARN in {_fields(members)}",
            )
        )
    return checks


def _missing(label: str, members: Sequence[InstanceDemand], available: str) -> Check:
    return Check(
        check=f"{label}: exists",
        needed=_needed(members),
        available=available,
        passed=False,
        remedy=f"check the id and the region, then set it in {_fields(members)}",
    )


def _held_checks(held: _Held, members: Sequence[InstanceDemand], now: datetime) -> list[Check]:
    return [
        _state_check(held, members),
        _match_check(held, members),
        _size_check(held, members),
        _end_check(held, members, now),
    ]


def _when(moment: datetime | None) -> str:
    return "an unknown time" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _state_check(held: _Held, members: Sequence[InstanceDemand]) -> Check:
    available = held.state
    if held.state.lower() == "scheduled":
        available = f"{held.state}, starts {_when(held.start)} (nodes launch from then on)"
    return Check(
        check=f"{held.label}: state",
        needed=f"active or scheduled ({_fields(members)})",
        available=available,
        passed=held.usable,
        remedy=""
        if held.usable
        else f"it cannot take instances in state {held.state}: buy or create a new one and set it in "
        f"{_fields(members)}",
    )


def _match_check(held: _Held, members: Sequence[InstanceDemand]) -> Check:
    problems: list[str] = []
    for member in members:
        if member.instance_type not in held.instance_types:  # both spell HyperPod's with the ml. prefix
            problems.append(f"{member.where} runs {member.instance_type}")
        zones = held.availability_zones
        elsewhere = [az for az in member.availability_zones if zones and az not in zones]
        if elsewhere:
            problems.append(f"{member.where} launches in {', '.join(elsewhere)}")
    types = ", ".join(held.instance_types) or "no instance type"
    holds = f"{types} in {', '.join(held.availability_zones) or 'an unknown AZ'}"
    remedy = ""
    if problems:
        remedy = (
            f"{'; '.join(problems)}: use a reservation of that type in that AZ, or set "
            "network.placement_availability_zone (and the instance type) to the reservation's"
        )
    return Check(
        check=f"{held.label}: instance type and AZ",
        needed=_needed(members),
        available=holds,
        passed=not problems,
        remedy=remedy,
    )


def _size_check(held: _Held, members: Sequence[InstanceDemand]) -> Check:
    wanted = sum(m.count for m in members)
    fields = " / ".join(m.count_field for m in members)
    if held.available is None:
        return Check(
            check=f"{held.label}: free instances",
            needed=f"{wanted} instances ({fields})",
            available="not reported: not verified",
            passed=True,
            remedy="",
        )
    passed = wanted <= held.available
    return Check(
        check=f"{held.label}: free instances",
        needed=f"{wanted} instances ({fields})",
        available=f"{held.available} free of {held.total if held.total is not None else '?'}",
        passed=passed,
        remedy="" if passed else f"lower {fields} to {held.available}, or reserve more instances",
    )


def _end_check(held: _Held, members: Sequence[InstanceDemand], now: datetime) -> Check:
    check = f"{held.label}: end"
    if held.end is None:
        return Check(check=check, needed="time to run", available="no end date", passed=True, remedy="")
    left = held.end - now
    if left <= timedelta(0):
        return Check(
            check=check,
            needed="time to run",
            available=f"ended {_when(held.end)}",
            passed=False,
            remedy=f"it has ended: buy or create a new one and set it in {_fields(members)}",
        )
    soon = left < ENDING_SOON
    return Check(
        check=check,
        needed="time to run",
        available=f"ends {_when(held.end)}"
        + (f", in {left.total_seconds() / 3600:.1f} h: instances are terminated then" if soon else ""),
        passed=True,
        remedy="",
        warning=soon,
    )
