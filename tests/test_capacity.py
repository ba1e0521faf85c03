"""The capacity model: its constructors, every message, what each orchestrator accepts and how it renders.

No CDK here: the model is pure data.
"""

from __future__ import annotations

import pytest

from training_clusters.model.capacity import Capacity, Orchestrator
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import CapacityKind

CR = "cr-0123456789abcdef0"
GROUP = "arn:aws:resource-groups:us-east-1:111122223333:group/p5-reservations"
PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Capacity.reservation(), "reservation capacity needs reservation_id or resource_group_arn"),
        (
            lambda: Capacity.reservation(CR, resource_group_arn=GROUP),
            "reservation capacity takes one of reservation_id or resource_group_arn, got both; a resource "
            "group already names its reservations",
        ),
        (
            lambda: Capacity.reservation(resource_group_arn=GROUP, targeted=False),
            "targeted: false does not apply to a resource group: its reservations are always targeted",
        ),
        (
            lambda: Capacity.capacity_block("cr-123"),
            "reservation_id must look like cr-0123456789abcdef0, got 'cr-123'",
        ),
        (
            lambda: Capacity.reservation(resource_group_arn="my-group"),
            "resource_group_arn must look like arn:aws:resource-groups:us-east-1:111122223333:group/"
            "my-reservations, got 'my-group'",
        ),
        (
            lambda: Capacity.training_plan("arn:aws:sagemaker:us-east-1:111122223333:cluster/x"),
            "training_plan_arn must look like arn:aws:sagemaker:us-east-1:111122223333:training-plan/"
            "my-plan, got 'arn:aws:sagemaker:us-east-1:111122223333:cluster/x'",
        ),
        (
            lambda: Capacity(CapacityKind.SPOT, reservation_id=CR),
            "reservation_id does not apply to spot capacity, got 'cr-0123456789abcdef0'",
        ),
        (
            lambda: Capacity(CapacityKind.CAPACITY_BLOCK, reservation_id=CR, targeted=False),
            "targeted: false applies to reservation capacity only, got capacity-block",
        ),
        (
            lambda: Capacity(CapacityKind.ON_DEMAND, in_placement_group=True),
            "in_placement_group applies to reservation capacity only, got on-demand",
        ),
        (
            lambda: Capacity("reserved").described,
            "kind must be one of on-demand, spot, reservation, capacity-block, training-plan, got 'reserved'",
        ),
    ],
)
def test_bad_capacities_are_refused_with_a_message(build, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigurationError) as error:
        build()
    assert str(error.value).startswith(message)


def test_an_unresolved_token_is_not_shape_checked() -> None:
    assert Capacity.capacity_block("${Token[TOKEN.123]}").reservation_id == "${Token[TOKEN.123]}"


@pytest.mark.parametrize(
    ("capacity", "orchestrator", "message"),
    [
        (Capacity.training_plan(PLAN), Orchestrator.EKS, "training-plan is not supported by Amazon EKS"),
        (
            Capacity.training_plan(PLAN),
            Orchestrator.PARALLELCLUSTER,
            "training-plan is not supported by AWS ParallelCluster",
        ),
        (
            Capacity.spot(),
            Orchestrator.HYPERPOD,
            "spot is not supported by SageMaker HyperPod; use on-demand or training-plan",
        ),
        (
            Capacity.reservation(resource_group_arn=GROUP),
            Orchestrator.HYPERPOD,
            "reservation is not supported by SageMaker HyperPod",
        ),
        (Capacity.capacity_block(CR), Orchestrator.HYPERPOD, "capacity-block is not supported by SageMaker"),
        (
            Capacity.training_plan(PLAN),
            Orchestrator.PCS,
            "training-plan is not supported by AWS PCS; use on-demand or spot or reservation or capacity-block",
        ),
    ],
)
def test_each_orchestrator_refuses_what_it_does_not_support(
    capacity: Capacity, orchestrator: Orchestrator, message: str
) -> None:
    problem = capacity.problem_for(orchestrator)
    assert problem is not None and problem.startswith(message)
    with pytest.raises(ConfigurationError, match=r"^capacity "):
        capacity.check_for(orchestrator, "capacity")


@pytest.mark.parametrize(
    ("capacity", "orchestrator"),
    [
        (Capacity.capacity_block(CR), Orchestrator.EKS),
        (Capacity.reservation(resource_group_arn=GROUP), Orchestrator.PARALLELCLUSTER),
        (Capacity.training_plan(PLAN), Orchestrator.HYPERPOD),
        (Capacity.on_demand(), Orchestrator.HYPERPOD),
        (Capacity.spot(), Orchestrator.PCS),
        (Capacity.reservation(resource_group_arn=GROUP), Orchestrator.PCS),
        (Capacity.reservation(CR, targeted=False), Orchestrator.PCS),
        (Capacity.capacity_block(CR), Orchestrator.PCS),
    ],
)
def test_supported_forms_pass(capacity: Capacity, orchestrator: Orchestrator) -> None:
    assert capacity.problem_for(orchestrator) is None


@pytest.mark.parametrize(
    ("capacity", "target", "preference", "market", "pcluster", "eks", "pcs"),
    [
        (Capacity.on_demand(), None, None, None, "ONDEMAND", "ON_DEMAND", "ONDEMAND"),
        (Capacity.spot(), None, None, "spot", "SPOT", "SPOT", "SPOT"),
        (
            Capacity.reservation(CR),
            {"CapacityReservationId": CR},
            None,
            None,
            "ONDEMAND",
            "ON_DEMAND",
            "ONDEMAND",
        ),
        (Capacity.reservation(CR, targeted=False), None, "open", None, "ONDEMAND", "ON_DEMAND", "ONDEMAND"),
        (
            Capacity.reservation(resource_group_arn=GROUP),
            {"CapacityReservationResourceGroupArn": GROUP},
            None,
            None,
            "ONDEMAND",
            "ON_DEMAND",
            "ONDEMAND",
        ),
        (
            Capacity.capacity_block(CR),
            {"CapacityReservationId": CR},
            None,
            "capacity-block",
            "CAPACITY_BLOCK",
            "CAPACITY_BLOCK",
            "CAPACITY_BLOCK",
        ),
    ],
)
def test_renderings(
    capacity: Capacity,
    target: dict[str, str] | None,
    preference: str | None,
    market: str | None,
    pcluster: str,
    eks: str,
    pcs: str,
) -> None:
    assert capacity.reservation_target() == target
    assert capacity.reservation_preference() == preference
    assert capacity.market_type() == market
    assert capacity.pcluster_capacity_type() == pcluster
    assert capacity.eks_capacity_type() == eks
    assert capacity.pcs_purchase_option() == pcs


@pytest.mark.parametrize(
    ("capacity", "keeps"),
    [
        (Capacity.on_demand(), True),
        (Capacity.spot(), True),
        (Capacity.capacity_block(CR), False),
        (Capacity.reservation(CR), False),
        (Capacity.reservation(CR, in_placement_group=True), True),
        (Capacity.training_plan(PLAN), False),
    ],
)
def test_which_capacities_keep_the_placement_group(capacity: Capacity, keeps: bool) -> None:
    assert capacity.keeps_placement_group() is keeps


def test_described() -> None:
    assert Capacity.capacity_block(CR).described == f"Capacity Block {CR}"
    assert Capacity.reservation(CR, targeted=False).described == f"capacity reservation {CR} (open)"
    assert Capacity.training_plan(PLAN).described == f"training plan {PLAN}"
