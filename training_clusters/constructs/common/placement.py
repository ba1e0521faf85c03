"""TrainingPlacementGroup: keep a training cluster's instances close together on the network."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from training_clusters.constructs.private.validation import (
    checked_props,
    is_unresolved,
    parse_option,
    raise_if_problem,
)
from training_clusters.model.options import PlacementStrategy, SpreadLevel
from training_clusters.rules.placement import (
    placement_partitions_problem,
    placement_spread_level_problem,
    placement_zones_problem,
)


@checked_props
class TrainingPlacementGroup(Construct):
    """An EC2 placement group, cluster strategy by default.

    Example::

        pg = TrainingPlacementGroup(self, "PlacementGroup", subnets=[network.placement_subnet()])
        pg.placement_group_name   # for launch templates, ParallelCluster queues, HyperPod

    A cluster group lives in one AZ: pass the subnets its instances use and a mix of AZs is refused.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        strategy: PlacementStrategy | str = PlacementStrategy.CLUSTER,
        partitions: int | None = None,
        spread_level: SpreadLevel | str | None = None,
        subnets: Sequence[ec2.ISubnet] | None = None,
    ) -> None:
        """Create the placement group.

        :param strategy: Default: CLUSTER.
        :param partitions: Number of partitions, 1-7, PARTITION only. Default: 2 for PARTITION.
        :param spread_level: RACK or HOST, SPREAD only. Default: RACK for SPREAD.
        :param subnets: The subnets the group's instances launch in; checked to share one AZ for CLUSTER.
            Default: not checked here (orchestrator constructs call :meth:`check_subnets`).
        """
        super().__init__(scope, id)
        self.strategy = strategy = parse_option(self, "strategy", PlacementStrategy, strategy)
        if spread_level is not None:
            spread_level = parse_option(self, "spread_level", SpreadLevel, spread_level)
        self._check_partitions(partitions)
        self._check_spread_level(spread_level)
        if subnets is not None:
            self.check_subnets(subnets, field="subnets")
        if strategy is PlacementStrategy.PARTITION and partitions is None:
            partitions = 2
        if strategy is PlacementStrategy.SPREAD and spread_level is None:
            spread_level = SpreadLevel.RACK
        self.placement_group = ec2.PlacementGroup(
            self,
            "Resource",
            strategy=ec2.PlacementGroupStrategy(strategy.name),
            partitions=partitions,
            spread_level=ec2.PlacementGroupSpreadLevel(spread_level.name) if spread_level else None,
        )
        self.placement_group_name: str = self.placement_group.placement_group_name

    def check_subnets(self, subnets: Sequence[ec2.ISubnet], *, field: str = "subnets") -> None:
        """Refuse subnets in more than one AZ for a CLUSTER group (EC2 would fail the launch)."""
        zones = [s.availability_zone for s in subnets if not is_unresolved(s.availability_zone)]
        raise_if_problem(self, field, placement_zones_problem(self.strategy.name, zones))

    def _check_partitions(self, partitions: int | None) -> None:
        raise_if_problem(self, "partitions", placement_partitions_problem(self.strategy.name, partitions))

    def _check_spread_level(self, spread_level: SpreadLevel | None) -> None:
        level = spread_level.name if spread_level is not None else None
        raise_if_problem(self, "spread_level", placement_spread_level_problem(self.strategy.name, level))
