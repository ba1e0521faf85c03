"""``capacity``: where a queue's, nodegroup's or instance group's instances come from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import (
    Field,
    model_validator,
)

from training_clusters.config.base import _FileChoice, _Model, _raise_if
from training_clusters.model.capacity import Capacity
from training_clusters.model.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import (
    CapacityKind,
)


def _capacity_for(orchestrator: CapacityOrchestrator) -> Callable[[Any], Any]:
    """A ``capacity`` field validator: the section's form must be one ``orchestrator`` offers."""

    def check(value: CapacityConfig | None) -> CapacityConfig | None:
        return None if value is None else value.checked_for(orchestrator)

    return check


class CapacityConfig(_Model):
    """``capacity`` of a queue, compute resource, nodegroup or instance group: where its instances come from.

    ``type: capacity-block`` with ``reservation_id``, ``type: reservation`` with ``reservation_id`` or
    ``resource_group_arn``, ``type: training-plan`` with ``training_plan_arn`` (HyperPod), or ``on-demand``
    / ``spot``. See :class:`training_clusters.model.capacity.Capacity`.
    """

    type: Annotated[CapacityKind, _FileChoice(CapacityKind)]
    reservation_id: str | None = Field(default=None, description="cr-... of a reservation or Capacity Block.")
    resource_group_arn: str | None = Field(default=None, description="A resource group of reservations.")
    targeted: bool = Field(
        default=True, description="Reservation only: launch only into it (true) or use it as open (false)."
    )
    in_placement_group: bool = Field(
        default=False,
        description="Reservation only: it was created in the environment's cluster placement group, so "
        "instances keep using that group. Default: false (the placement group is left out).",
    )
    training_plan_arn: str | None = Field(default=None, description="A SageMaker training plan (HyperPod).")

    @model_validator(mode="after")
    def _a_capacity(self) -> CapacityConfig:
        self.to_capacity()  # its own rules, with their messages
        return self

    def to_capacity(self) -> Capacity:
        """The :class:`~training_clusters.model.capacity.Capacity` this section describes."""
        try:
            return Capacity(
                self.type,
                reservation_id=self.reservation_id,
                resource_group_arn=self.resource_group_arn,
                targeted=self.targeted,
                in_placement_group=self.in_placement_group,
                training_plan_arn=self.training_plan_arn,
            )
        except ConfigurationError as error:
            raise ValueError(str(error)) from None

    def checked_for(self, orchestrator: CapacityOrchestrator) -> CapacityConfig:
        """This section, when ``orchestrator`` supports its capacity (else a ValueError saying why)."""
        _raise_if(self.to_capacity().problem_for(orchestrator))
        return self


def stated_capacity(section: CapacityConfig | None) -> Capacity | None:
    """A ``capacity`` section as the :class:`~training_clusters.model.capacity.Capacity` model; None when not given."""
    return None if section is None else section.to_capacity()
