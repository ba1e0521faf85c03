"""``network`` and ``placement``: the private VPC and the cluster placement group."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from training_clusters.config.base import _FileChoice, _Model, _raise_at
from training_clusters.model.options import (
    PlacementStrategy,
)
from training_clusters.rules.logs import cloudwatch_retention_problem
from training_clusters.rules.network import (
    nat_gateways_problem,
)
from training_clusters.rules.placement import MAX_PARTITIONS, placement_partitions_problem


class PlacementGroupConfig(_Model):
    """``network.placement_group``: the group compute instances share."""

    strategy: Annotated[PlacementStrategy, _FileChoice(PlacementStrategy)] = PlacementStrategy.CLUSTER
    partitions: Annotated[int, Field(ge=1, le=MAX_PARTITIONS)] | None = None

    @model_validator(mode="after")
    def _partitions_need_their_strategy(self) -> PlacementGroupConfig:
        _raise_at("partitions", placement_partitions_problem(self.strategy.name, self.partitions))
        return self


class NetworkConfig(_Model):
    """``network``: the VPC."""

    cidr: str = "10.0.0.0/16"
    nat_gateways: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="NAT gateways (one per AZ at most). Default: 1, or 0 with endpoint_only."
    )
    endpoint_only: bool = Field(default=False, description="No NAT: reach AWS through VPC endpoints only.")
    placement_availability_zone: str | None = Field(
        default=None,
        description="AZ of the compute placement group and FSx. Default: the first of availability_zones.",
    )
    flow_logs_retention_days: int = 365
    placement_group: PlacementGroupConfig = PlacementGroupConfig()

    @field_validator("flow_logs_retention_days")
    @classmethod
    def _retention_period(cls, value: int) -> int:
        problem = cloudwatch_retention_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _nat_needs_a_way_out(self) -> NetworkConfig:
        problem = nat_gateways_problem(self.nat_gateways, self.endpoint_only)
        if problem:
            raise ValueError(f"nat_gateways {problem}")
        return self
