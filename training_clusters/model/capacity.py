"""Where a cluster's instances come from: one typed model for every orchestrator, free of CDK.

A :class:`Capacity` says how instances are obtained; each orchestrator renders it in its own terms
(ParallelCluster queue ``CapacityType`` and ``CapacityReservationTarget``, EKS nodegroup ``CapacityType``
and launch-template market options, AWS PCS node group ``PurchaseOption`` and the same launch-template
options, HyperPod ``TrainingPlanArn``) and refuses the forms it does not support
with a :class:`~training_clusters.model.errors.ConfigurationError`::

    >>> Capacity.capacity_block("cr-0123456789abcdef0").kind
    <CapacityKind.CAPACITY_BLOCK: 'capacity-block'>
    >>> Capacity.spot().problem_for(Orchestrator.HYPERPOD)
    'spot is not supported by SageMaker HyperPod; use on-demand or training-plan'

What each form costs and how long it is held:

- **On-Demand**: per second while running; nothing held, so large GPU types may be unavailable.
- **Spot**: spare capacity at a discount, reclaimed with two minutes' notice: poor for multi-node training.
- **On-Demand Capacity Reservation** (ODCR, ``cr-...``): billed at the On-Demand rate for every reserved
  instance, used or not, until you cancel it; no end date unless you set one.
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-reservations.html
- **Capacity Block for ML** (also ``cr-...``): paid up front for a fixed window (1 to 182 days, in
  UltraClusters, already co-located); instances are terminated when the block ends.
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html
- **SageMaker training plan** (HyperPod only): paid up front for a fixed window of ``ml.`` instances.
  https://docs.aws.amazon.com/sagemaker/latest/dg/reserve-capacity-with-training-plans.html
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from training_clusters.model.errors import ConfigurationError, excerpt
from training_clusters.model.options import CapacityKind

#: An EC2 capacity reservation id: On-Demand Capacity Reservations and Capacity Blocks alike.
RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8,17}$")
#: A resource group of capacity reservations (``CapacityReservationResourceGroupArn``).
RESOURCE_GROUP_ARN = re.compile(r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[\w.-]{1,128}$")
#: A SageMaker training plan (``TrainingPlanArn``).
TRAINING_PLAN_ARN = re.compile(r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/[\w-]{1,63}$")

#: Unresolved CDK tokens (``${Token[...]}``) are only known at deploy time: their shape is not checked.
_TOKEN = re.compile(r"\$\{Token\[")


class Orchestrator(StrEnum):
    """Who launches the instances: what decides which capacity forms are allowed."""

    PARALLELCLUSTER = "AWS ParallelCluster"
    EKS = "Amazon EKS managed nodegroups"
    HYPERPOD = "SageMaker HyperPod"
    PCS = "AWS PCS"


#: The forms each orchestrator supports. ParallelCluster 3.x: queue ``CapacityType`` ONDEMAND, SPOT,
#: CAPACITY_BLOCK and ``CapacityReservationTarget``; EKS managed nodegroups: ON_DEMAND, SPOT, CAPACITY_BLOCK
#: and the launch template's ``CapacityReservationSpecification``; HyperPod: On-Demand or a training plan; AWS
#: PCS compute node groups: ``PurchaseOption`` ONDEMAND, SPOT, CAPACITY_BLOCK (the CloudFormation schema's
#: enum; its INTERRUPTIBLE_CAPACITY_RESERVATION is not modelled) and the launch template's reservation.
SUPPORTED: dict[Orchestrator, tuple[CapacityKind, ...]] = {
    Orchestrator.PARALLELCLUSTER: (
        CapacityKind.ON_DEMAND,
        CapacityKind.SPOT,
        CapacityKind.RESERVATION,
        CapacityKind.CAPACITY_BLOCK,
    ),
    Orchestrator.EKS: (
        CapacityKind.ON_DEMAND,
        CapacityKind.SPOT,
        CapacityKind.RESERVATION,
        CapacityKind.CAPACITY_BLOCK,
    ),
    Orchestrator.HYPERPOD: (CapacityKind.ON_DEMAND, CapacityKind.TRAINING_PLAN),
    Orchestrator.PCS: (
        CapacityKind.ON_DEMAND,
        CapacityKind.SPOT,
        CapacityKind.RESERVATION,
        CapacityKind.CAPACITY_BLOCK,
    ),
}


@dataclass(frozen=True)
class Capacity:
    """How a group of instances is obtained. Build one with the constructors, not the fields.

    :param kind: The form.
    :param reservation_id: ``cr-...`` of an On-Demand Capacity Reservation or a Capacity Block.
    :param resource_group_arn: A resource group of reservations (ODCR only).
    :param targeted: ODCR only: launch only into this reservation (True) or let matching On-Demand launches
        use it as an ``open`` reservation (False).
    :param in_placement_group: ODCR only: the reservation was created in the environment's cluster placement
        group, so the instances keep using that group (see :meth:`keeps_placement_group`).
    :param training_plan_arn: A SageMaker training plan (HyperPod only).
    """

    kind: CapacityKind
    reservation_id: str | None = None
    resource_group_arn: str | None = None
    targeted: bool = True
    in_placement_group: bool = False
    training_plan_arn: str | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", CapacityKind.parse(self.kind))
        except ConfigurationError:
            # A kind given as a wrong string is refused where the capacity is used: by a construct's boundary
            # check (naming the construct and the prop) or by :attr:`checked_kind`.
            return
        self._check_fields_of_kind()
        self._check_shape("reservation_id", self.reservation_id, RESERVATION_ID, "cr-0123456789abcdef0")
        self._check_shape(
            "resource_group_arn",
            self.resource_group_arn,
            RESOURCE_GROUP_ARN,
            "arn:aws:resource-groups:us-east-1:111122223333:group/my-reservations",
        )
        self._check_shape(
            "training_plan_arn",
            self.training_plan_arn,
            TRAINING_PLAN_ARN,
            "arn:aws:sagemaker:us-east-1:111122223333:training-plan/my-plan",
        )

    # --- constructors

    @classmethod
    def on_demand(cls) -> Capacity:
        """On-Demand instances, nothing reserved (an ``open`` reservation matching them is still used)."""
        return cls(CapacityKind.ON_DEMAND)

    @classmethod
    def spot(cls) -> Capacity:
        """Spot instances: interruptible, for experiments rather than multi-node training."""
        return cls(CapacityKind.SPOT)

    @classmethod
    def reservation(
        cls,
        id: str | None = None,
        *,
        resource_group_arn: str | None = None,
        targeted: bool = True,
        in_placement_group: bool = False,
    ) -> Capacity:
        """An On-Demand Capacity Reservation (``id``) or a resource group of them (``resource_group_arn``).

        Exactly one of the two. A resource group is always targeted.
        """
        return cls(
            CapacityKind.RESERVATION,
            reservation_id=id,
            resource_group_arn=resource_group_arn,
            targeted=targeted,
            in_placement_group=in_placement_group,
        )

    @classmethod
    def capacity_block(cls, reservation_id: str) -> Capacity:
        """An EC2 Capacity Block for ML, by its reservation id (``cr-...``)."""
        return cls(CapacityKind.CAPACITY_BLOCK, reservation_id=reservation_id)

    @classmethod
    def training_plan(cls, arn: str) -> Capacity:
        """A SageMaker training plan (HyperPod instance groups only)."""
        return cls(CapacityKind.TRAINING_PLAN, training_plan_arn=arn)

    # --- what it means

    @property
    def checked_kind(self) -> CapacityKind:
        """``kind`` as a member; a ConfigurationError when it was given as a string naming no kind."""
        try:
            return CapacityKind.parse(self.kind)
        except ConfigurationError as error:
            raise ConfigurationError(f"kind {error}") from None

    @property
    def is_reserved(self) -> bool:
        """Whether instances launch into capacity held for them (a reservation, a block or a plan)."""
        return self.checked_kind in (
            CapacityKind.RESERVATION,
            CapacityKind.CAPACITY_BLOCK,
            CapacityKind.TRAINING_PLAN,
        )

    @property
    def described(self) -> str:
        """The capacity in a few words, for messages: ``Capacity Block cr-0123...``."""
        if self.checked_kind is CapacityKind.CAPACITY_BLOCK:
            return f"Capacity Block {self.reservation_id}"
        if self.checked_kind is CapacityKind.RESERVATION:
            target = self.reservation_id or f"resource group {self.resource_group_arn}"
            return f"capacity reservation {target}" + ("" if self.targeted else " (open)")
        if self.checked_kind is CapacityKind.TRAINING_PLAN:
            return f"training plan {self.training_plan_arn}"
        return str(self.checked_kind)

    def keeps_placement_group(self) -> bool:
        """Whether the instances launch into the environment's cluster placement group.

        - On-Demand and Spot: yes.
        - Capacity Block: no. Blocks are delivered co-located in EC2 UltraClusters, and ParallelCluster's
          ``PlacementGroupCapacityTypeValidator`` warns that a placement group with a Capacity Block "may
          cause insufficient capacity errors ... even if the capacity reservation has remaining capacity"
          (https://docs.aws.amazon.com/parallelcluster/latest/ug/launch-instances-capacity-blocks.html,
          https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html).
        - Capacity reservation: only when it was created in that placement group (``in_placement_group``).
          A reservation outside it leaves capacity unusable under the group's constraint (ParallelCluster's
          ``PlacementGroupCapacityReservationValidator``); EC2 lets you create an ODCR in a cluster
          placement group so both hold
          (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html,
          https://docs.aws.amazon.com/parallelcluster/latest/ug/launch-instances-odcr-v3.html).
        - Training plan: HyperPod places its instances itself; our placement group is never used.
        """
        if self.checked_kind is CapacityKind.RESERVATION:
            return self.in_placement_group
        return self.checked_kind in (CapacityKind.ON_DEMAND, CapacityKind.SPOT)

    def problem_for(self, orchestrator: Orchestrator) -> str | None:
        """Why ``orchestrator`` cannot use this capacity, or None."""
        allowed = SUPPORTED[orchestrator]
        if self.checked_kind in allowed:
            return None
        return f"{self.checked_kind} is not supported by {orchestrator}; use {' or '.join(allowed)}"

    def place_problem(self, region: str | None, account: str | None) -> tuple[str, str] | None:
        """(field, why) when an ARN this capacity names (``training_plan_arn``, ``resource_group_arn``) is in
        another region or account than the stack's, or None. A training plan and a group of reservations are
        used in their own region and account only (SageMaker ``CreateCluster`` and EC2 ``RunInstances`` look
        them up there), so such an ARN would fail at deploy. ``region`` / ``account``: the stack's; None, or an
        unresolved token (an environment-agnostic stack), skips that half. Reservation ids (``cr-...``, On-Demand
        Capacity Reservations and Capacity Blocks alike) name no region or account: preflight checks them."""
        for field, arn in (
            ("training_plan_arn", self.training_plan_arn),
            ("resource_group_arn", self.resource_group_arn),
        ):
            if arn is None or _TOKEN.search(arn):
                continue
            problem = arn_place_problem(arn, region, account)
            if problem:
                return field, problem
        return None

    def check_for(self, orchestrator: Orchestrator, field: str) -> Capacity:
        """This capacity, or a ConfigurationError naming ``field`` when ``orchestrator`` cannot use it."""
        problem = self.problem_for(orchestrator)
        if problem:
            raise ConfigurationError(f"{field} {problem}")
        return self

    # --- renderings

    def market_type(self) -> str | None:
        """EC2 launch template ``InstanceMarketOptions.MarketType``: ``spot``, ``capacity-block`` or None."""
        if self.checked_kind is CapacityKind.SPOT:
            return "spot"
        if self.checked_kind is CapacityKind.CAPACITY_BLOCK:
            return "capacity-block"
        return None

    def reservation_target(self) -> dict[str, str] | None:
        """``CapacityReservationTarget``: ``{"CapacityReservationId": ...}`` or the resource group's ARN.

        None when nothing is targeted (On-Demand, Spot, an open reservation, a training plan).
        """
        if self.checked_kind is CapacityKind.CAPACITY_BLOCK or (
            self.checked_kind is CapacityKind.RESERVATION and self.targeted
        ):
            if self.reservation_id is not None:
                return {"CapacityReservationId": self.reservation_id}
            if self.resource_group_arn is not None:
                return {"CapacityReservationResourceGroupArn": self.resource_group_arn}
        return None

    def reservation_preference(self) -> str | None:
        """``CapacityReservationPreference`` of a launch template: ``open`` for an open reservation."""
        if self.checked_kind is CapacityKind.RESERVATION and not self.targeted:
            return "open"
        return None

    def pcluster_capacity_type(self) -> str:
        """ParallelCluster's queue ``CapacityType``: ONDEMAND (reservations too), SPOT or CAPACITY_BLOCK."""
        return {CapacityKind.SPOT: "SPOT", CapacityKind.CAPACITY_BLOCK: "CAPACITY_BLOCK"}.get(
            self.checked_kind, "ONDEMAND"
        )

    def eks_capacity_type(self) -> str:
        """An EKS nodegroup's ``CapacityType``: ON_DEMAND (reservations too), SPOT or CAPACITY_BLOCK."""
        return {CapacityKind.SPOT: "SPOT", CapacityKind.CAPACITY_BLOCK: "CAPACITY_BLOCK"}.get(
            self.checked_kind, "ON_DEMAND"
        )

    def pcs_purchase_option(self) -> str:
        """An AWS PCS compute node group's ``PurchaseOption``: ONDEMAND (reservations too), SPOT or
        CAPACITY_BLOCK; the reservation or block itself is targeted by the launch template."""
        return {CapacityKind.SPOT: "SPOT", CapacityKind.CAPACITY_BLOCK: "CAPACITY_BLOCK"}.get(
            self.checked_kind, "ONDEMAND"
        )

    # --- validation, one rule per method

    def _check_fields_of_kind(self) -> None:
        kind = self.checked_kind
        given = {
            "reservation_id": self.reservation_id,
            "resource_group_arn": self.resource_group_arn,
            "training_plan_arn": self.training_plan_arn,
        }
        wanted = {
            CapacityKind.ON_DEMAND: (),
            CapacityKind.SPOT: (),
            CapacityKind.RESERVATION: ("reservation_id", "resource_group_arn"),
            CapacityKind.CAPACITY_BLOCK: ("reservation_id",),
            CapacityKind.TRAINING_PLAN: ("training_plan_arn",),
        }[kind]
        extra = [name for name, value in given.items() if value is not None and name not in wanted]
        if extra:
            raise ConfigurationError(
                f"{extra[0]} does not apply to {kind} capacity, got {excerpt(given[extra[0]])}"
            )
        present = [name for name in wanted if given[name] is not None]
        if wanted and not present:
            raise ConfigurationError(f"{kind} capacity needs {' or '.join(wanted)}")
        if len(present) > 1:
            raise ConfigurationError(
                f"{kind} capacity takes one of {' or '.join(wanted)}, got both; a resource group already "
                "names its reservations"
            )
        if kind is not CapacityKind.RESERVATION and (not self.targeted or self.in_placement_group):
            option = "targeted: false" if not self.targeted else "in_placement_group"
            raise ConfigurationError(f"{option} applies to reservation capacity only, got {kind}")
        if self.resource_group_arn is not None and not self.targeted:
            raise ConfigurationError(
                "targeted: false does not apply to a resource group: its reservations are always targeted"
            )

    @staticmethod
    def _check_shape(field: str, value: str | None, pattern: re.Pattern[str], example: str) -> None:
        if value is None or (isinstance(value, str) and _TOKEN.search(value)):
            return
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise ConfigurationError(f"{field} must look like {example}, got {excerpt(value)}")


def arn_place_problem(arn: str, region: str | None, account: str | None) -> str | None:
    """Why ``arn`` (``arn:PARTITION:SERVICE:REGION:ACCOUNT:...``) cannot be used from a stack in ``region`` and
    ``account``, or None; a ``region`` or ``account`` that is None or an unresolved token is not compared.

    >>> arn_place_problem("arn:aws:sagemaker:us-east-1:111122223333:training-plan/p", "us-west-2", None)
    'is in us-east-1, but the stack deploys to us-west-2; use one bought in us-west-2, or deploy to us-east-1'
    """
    parts = arn.split(":", 5)
    if len(parts) < 6:
        return None  # its shape is checked where it is given
    arn_region, arn_account = parts[3], parts[4]
    if region and not _TOKEN.search(region) and arn_region != region:
        return (
            f"is in {arn_region}, but the stack deploys to {region}; use one bought in {region}, or deploy to "
            f"{arn_region}"
        )
    if account and not _TOKEN.search(account) and arn_account != account:
        return (
            f"belongs to account {arn_account}, but the stack deploys to account {account}; use one of "
            f"{account}'s, or deploy to {arn_account}"
        )
    return None
