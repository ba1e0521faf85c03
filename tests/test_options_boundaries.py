"""Options (training_clusters/model/options.py) and the capacity model (training_clusters/model/capacity.py), asserted
exactly where ``make mutation`` found one-line changes that no other test noticed: every spelling a choice
accepts, every documented default, every message whole. Free of CDK."""

from __future__ import annotations

from typing import Any

import pytest

from training_clusters.model.capacity import Capacity, Orchestrator
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import (
    ALL_CHOICES,
    CapacityKind,
    DeepHealthCheck,
    EfaInterfaceType,
    LustreDeploymentType,
    MigLayout,
    NodeRecovery,
    PodSecurityLevel,
    QueuePreemption,
    SlurmTopology,
    SpreadLevel,
    TopologyPlacement,
)

# --------------------------------------------------------------------------------------------------
# Choice


@pytest.mark.parametrize(
    ("given", "member"),
    [
        (NodeRecovery.AUTOMATIC, NodeRecovery.AUTOMATIC),
        ("Automatic", NodeRecovery.AUTOMATIC),  # the value
        ("automatic", NodeRecovery.AUTOMATIC),  # in any case
        ("AUTOMATIC", NodeRecovery.AUTOMATIC),  # the name
        ("  none ", NodeRecovery.NONE),  # surrounding blanks
        ("efa-only", EfaInterfaceType.EFA_ONLY),
        ("EFA_ONLY", EfaInterfaceType.EFA_ONLY),  # '-' and '_' alike
        ("efa_only", EfaInterfaceType.EFA_ONLY),
        ("persistent-2", LustreDeploymentType.PERSISTENT_2),
        ("lower_or_newer_equal_priority", QueuePreemption.LOWER_OR_NEWER_EQUAL_PRIORITY),  # the name, folded
        ("LowerOrNewerEqualPriority", QueuePreemption.LOWER_OR_NEWER_EQUAL_PRIORITY),
    ],
)
def test_a_choice_is_parsed_from_its_member_value_or_name(given: Any, member: Any) -> None:
    assert type(member).parse(given) is member


@pytest.mark.parametrize(
    ("choice", "given", "message"),
    [
        (LustreDeploymentType, "scratch-1", "must be one of SCRATCH_2, PERSISTENT_2, got 'scratch-1'"),
        (LustreDeploymentType, 2, "must be one of SCRATCH_2, PERSISTENT_2, got int 2"),
        (LustreDeploymentType, None, "must be one of SCRATCH_2, PERSISTENT_2, got NoneType None"),
        (
            SpreadLevel,
            NodeRecovery.NONE,
            "must be one of rack, host, got NodeRecovery.NONE (an option of another kind)",
        ),
        (SpreadLevel, "", "must be one of rack, host, got ''"),
        # any case of the same letters, but not a look-alike letter: a dotless i, a sharp s for "ss"
        pytest.param(
            NodeRecovery,
            "Automat\u0131c",
            "must be one of Automatic, None, got 'Automat\u0131c'",
            id="dotless-i",
        ),
        pytest.param(
            DeepHealthCheck,
            "InstanceStre\u00df",
            "must be one of InstanceStress, InstanceConnectivity, got 'InstanceStre\u00df'",
            id="sharp-s",
        ),
    ],
)
def test_a_choice_refuses_anything_else_naming_every_value(choice: Any, given: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        choice.parse(given)
    assert str(raised.value) == message


def test_topology_placement_spellings() -> None:
    assert TopologyPlacement.allowed() == "preferred, required, off"
    assert TopologyPlacement.parse("Required") is TopologyPlacement.REQUIRED
    assert TopologyPlacement.spellings() == ["preferred", "required", "off"]


def test_allowed_and_spellings() -> None:
    assert NodeRecovery.allowed() == "Automatic, None"
    assert NodeRecovery.spellings() == ["Automatic", "automatic", "None", "none"]
    assert SpreadLevel.spellings() == ["rack", "host"]  # a lower-case value is written once
    assert EfaInterfaceType.spellings() == ["efa", "efa-only"]


def test_every_option_is_listed_once() -> None:
    assert len(ALL_CHOICES) == len(set(ALL_CHOICES)) == 26
    assert {QueuePreemption, CapacityKind, PodSecurityLevel, TopologyPlacement, SlurmTopology} <= set(
        ALL_CHOICES
    )


def test_slurm_topology_spellings() -> None:
    assert SlurmTopology.allowed() == "tree, off"
    assert SlurmTopology.parse("Tree") is SlurmTopology.TREE
    assert SlurmTopology.parse("OFF") is SlurmTopology.OFF


# --------------------------------------------------------------------------------------------------
# MigLayout


@pytest.mark.parametrize(
    ("value", "layout"),
    [
        ("all-1g.10gb", MigLayout(name="all-1g.10gb")),
        ("all-balanced", MigLayout(name="all-balanced")),
        ({"4g.40gb": 1, "3g.40gb": 1}, MigLayout(devices=(("3g.40gb", 1), ("4g.40gb", 1)))),  # sorted
        ({"1g.10gb": 7}, MigLayout(devices=(("1g.10gb", 7),))),
    ],
)
def test_mig_layouts_from_their_file_spelling(value: Any, layout: MigLayout) -> None:
    assert MigLayout.parse(value) == layout
    assert MigLayout.parse(layout) is layout
    assert MigLayout.parse(value).spelling() == value


MIG_FORMS = (
    "must be 'all-<profile>' (e.g. all-1g.10gb), 'all-balanced' or a mapping of MIG profiles to instances per GPU "
    "(e.g. {3g.40gb: 1, 4g.40gb: 1}), got "
)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("all-", "'all-'"),
        ("1g.10gb", "'1g.10gb'"),
        ({}, "dict {}"),
        ({"1g.10gb": 0}, "dict {'1g.10gb': 0}"),
        ({"1g.10gb": True}, "dict {'1g.10gb': True}"),
        ({"1g.10gb": 1.0}, "dict {'1g.10gb': 1.0}"),
        ({1: 1}, "dict {1: 1}"),
        (["all-1g.10gb"], "list ['all-1g.10gb']"),
    ],
)
def test_other_mig_layouts_are_refused(value: Any, shown: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        MigLayout.parse(value)
    assert str(raised.value) == MIG_FORMS + shown


def test_a_mig_layouts_uniform_profile() -> None:
    assert MigLayout(name="all-1g.10gb").uniform_profile == "1g.10gb"
    assert MigLayout(name="all-balanced").uniform_profile is None
    assert MigLayout(devices=(("1g.10gb", 7),)).uniform_profile is None
    assert MigLayout.BALANCED == "all-balanced"


# --------------------------------------------------------------------------------------------------
# Capacity

CR = "cr-0123456789abcdef0"
GROUP = "arn:aws:resource-groups:us-east-1:111122223333:group/p5-reservations"
PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"


def test_capacity_defaults() -> None:
    """Capacity's documented defaults: a reservation is targeted and outside the placement group."""
    reservation = Capacity.reservation(CR)
    assert (reservation.targeted, reservation.in_placement_group) == (True, False)
    assert Capacity.on_demand() == Capacity(CapacityKind.ON_DEMAND)
    assert Capacity("spot").kind is CapacityKind.SPOT  # a string kind is converted
    assert Capacity.reservation(resource_group_arn=GROUP).resource_group_arn == GROUP
    assert Capacity.reservation(CR, targeted=False, in_placement_group=True) == Capacity(
        CapacityKind.RESERVATION, reservation_id=CR, targeted=False, in_placement_group=True
    )
    assert Capacity.training_plan(PLAN).training_plan_arn == PLAN


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Capacity.reservation(), "reservation capacity needs reservation_id or resource_group_arn"),
        (lambda: Capacity(CapacityKind.CAPACITY_BLOCK), "capacity-block capacity needs reservation_id"),
        (lambda: Capacity(CapacityKind.TRAINING_PLAN), "training-plan capacity needs training_plan_arn"),
        (
            lambda: Capacity(CapacityKind.TRAINING_PLAN, training_plan_arn=PLAN, reservation_id=CR),
            "reservation_id does not apply to training-plan capacity, got 'cr-0123456789abcdef0'",
        ),
        (
            lambda: Capacity(CapacityKind.ON_DEMAND, resource_group_arn=GROUP),
            f"resource_group_arn does not apply to on-demand capacity, got '{GROUP}'",
        ),
        (
            lambda: Capacity(CapacityKind.SPOT, training_plan_arn=PLAN),
            f"training_plan_arn does not apply to spot capacity, got '{PLAN}'",
        ),
        (
            lambda: Capacity(CapacityKind.SPOT, targeted=False),
            "targeted: false applies to reservation capacity only, got spot",
        ),
        (
            lambda: Capacity(CapacityKind.TRAINING_PLAN, training_plan_arn=PLAN, in_placement_group=True),
            "in_placement_group applies to reservation capacity only, got training-plan",
        ),
        (
            lambda: Capacity.capacity_block("cr-0123456"),
            "reservation_id must look like cr-0123456789abcdef0, got 'cr-0123456'",
        ),
        (
            lambda: Capacity.capacity_block("cr-0123456789abcdef01"),
            "reservation_id must look like cr-0123456789abcdef0, got 'cr-0123456789abcdef01'",
        ),
        (
            lambda: Capacity.reservation(123),  # type: ignore[arg-type]
            "reservation_id must look like cr-0123456789abcdef0, got 123",
        ),
        (
            lambda: Capacity("reserved").checked_kind,
            "kind must be one of on-demand, spot, reservation, capacity-block, training-plan, got 'reserved'",
        ),
    ],
)
def test_every_capacity_message_whole(build: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build()
    assert str(raised.value) == message


@pytest.mark.parametrize("reservation_id", ["cr-01234567", "cr-0123456789abcdef0"])
def test_reservation_ids_of_8_to_17_hex_digits(reservation_id: str) -> None:
    assert Capacity.capacity_block(reservation_id).reservation_id == reservation_id


@pytest.mark.parametrize(
    (
        "capacity",
        "described",
        "reserved",
        "keeps",
        "market",
        "target",
        "preference",
        "pcluster",
        "eks",
        "pcs",
    ),
    [
        (
            Capacity.on_demand(),
            "on-demand",
            False,
            True,
            None,
            None,
            None,
            "ONDEMAND",
            "ON_DEMAND",
            "ONDEMAND",
        ),
        (Capacity.spot(), "spot", False, True, "spot", None, None, "SPOT", "SPOT", "SPOT"),
        (
            Capacity.reservation(CR),
            f"capacity reservation {CR}",
            True,
            False,
            None,
            {"CapacityReservationId": CR},
            None,
            "ONDEMAND",
            "ON_DEMAND",
            "ONDEMAND",
        ),
        (
            Capacity.reservation(CR, targeted=False, in_placement_group=True),
            f"capacity reservation {CR} (open)",
            True,
            True,
            None,
            None,
            "open",
            "ONDEMAND",
            "ON_DEMAND",
            "ONDEMAND",
        ),
        (
            Capacity.reservation(resource_group_arn=GROUP),
            f"capacity reservation resource group {GROUP}",
            True,
            False,
            None,
            {"CapacityReservationResourceGroupArn": GROUP},
            None,
            "ONDEMAND",
            "ON_DEMAND",
            "ONDEMAND",
        ),
        (
            Capacity.capacity_block(CR),
            f"Capacity Block {CR}",
            True,
            False,
            "capacity-block",
            {"CapacityReservationId": CR},
            None,
            "CAPACITY_BLOCK",
            "CAPACITY_BLOCK",
            "CAPACITY_BLOCK",
        ),
        (
            Capacity.training_plan(PLAN),
            f"training plan {PLAN}",
            True,
            False,
            None,
            None,
            None,
            "ONDEMAND",
            "ON_DEMAND",
            "ONDEMAND",
        ),
    ],
)
def test_each_capacity_renders_in_every_orchestrators_terms(
    capacity: Capacity,
    described: str,
    reserved: bool,
    keeps: bool,
    market: str | None,
    target: dict[str, str] | None,
    preference: str | None,
    pcluster: str,
    eks: str,
    pcs: str,
) -> None:
    assert capacity.described == described
    assert capacity.is_reserved is reserved
    assert capacity.keeps_placement_group() is keeps
    assert capacity.market_type() == market
    assert capacity.reservation_target() == target
    assert capacity.reservation_preference() == preference
    assert capacity.pcluster_capacity_type() == pcluster
    assert capacity.eks_capacity_type() == eks
    assert capacity.pcs_purchase_option() == pcs


@pytest.mark.parametrize(
    ("orchestrator", "allowed"),
    [
        (Orchestrator.PARALLELCLUSTER, "on-demand or spot or reservation or capacity-block"),
        (Orchestrator.EKS, "on-demand or spot or reservation or capacity-block"),
        (Orchestrator.HYPERPOD, "on-demand or training-plan"),
        (Orchestrator.PCS, "on-demand or spot or reservation or capacity-block"),
    ],
)
def test_what_each_orchestrator_takes(orchestrator: Orchestrator, allowed: str) -> None:
    forms = {
        "on-demand": Capacity.on_demand(),
        "spot": Capacity.spot(),
        "reservation": Capacity.reservation(CR),
        "capacity-block": Capacity.capacity_block(CR),
        "training-plan": Capacity.training_plan(PLAN),
    }
    for kind, capacity in forms.items():
        problem = capacity.problem_for(orchestrator)
        if kind in allowed.split(" or "):
            assert problem is None
            assert capacity.check_for(orchestrator, "capacity") is capacity
        else:
            message = f"{kind} is not supported by {orchestrator.value}; use {allowed}"
            assert problem == message
            with pytest.raises(ConfigurationError) as raised:
                capacity.check_for(orchestrator, "queues[0].capacity")
            assert str(raised.value) == f"queues[0].capacity {message}"


# --------------------------------------------------------------------------------------------------
# the catalogue: what a refused registration says


def test_a_refused_registration_names_the_call_the_type_and_the_fact() -> None:
    from training_clusters import catalog

    row = {**catalog.to_row(catalog.lookup("p5.48xlarge")), "name": "p9.48xlarge", "hyperpod_name": None}
    with pytest.raises(ConfigurationError) as raised:
        catalog.register_instance_type({**row, "vcpus": 0})  # type: ignore[typeddict-item]
    assert (
        str(raised.value)
        == "register_instance_type('p9.48xlarge'): vcpus must be a positive whole number, got 0"
    )
    with pytest.raises(ConfigurationError) as raised:
        catalog.register_instance_type(["p9.48xlarge"])  # type: ignore[arg-type]
    assert str(raised.value) == (
        "register_instance_type('?'): expected an InstanceType or a mapping of its facts, got list"
    )
    assert "p9.48xlarge" not in catalog.CATALOG
