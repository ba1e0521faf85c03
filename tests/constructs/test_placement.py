from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.common.placement import (
    PlacementStrategy,
    SpreadLevel,
    TrainingPlacementGroup,
)
from training_clusters.model.errors import ConfigurationError

from ..conftest import AZS


def test_cluster_strategy_by_default(stack: cdk.Stack) -> None:
    TrainingPlacementGroup(stack, "Pg")
    Template.from_stack(stack).has_resource_properties("AWS::EC2::PlacementGroup", {"Strategy": "cluster"})


def test_partition_strategy_defaults_to_two_partitions(stack: cdk.Stack) -> None:
    TrainingPlacementGroup(stack, "Pg", strategy=PlacementStrategy.PARTITION)
    Template.from_stack(stack).has_resource_properties(
        "AWS::EC2::PlacementGroup", {"Strategy": "partition", "PartitionCount": 2}
    )


def test_spread_strategy_defaults_to_rack(stack: cdk.Stack) -> None:
    TrainingPlacementGroup(stack, "Pg", strategy=PlacementStrategy.SPREAD)
    Template.from_stack(stack).has_resource_properties(
        "AWS::EC2::PlacementGroup", {"Strategy": "spread", "SpreadLevel": "rack"}
    )


def test_cluster_group_in_one_subnet_is_fine(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    TrainingPlacementGroup(stack, "Pg", subnets=[network.placement_subnet()])


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"strategy": PlacementStrategy.PARTITION, "partitions": 8},
            "Test/Pg: partitions must be between 1 and 7 per AZ, got 8",
        ),
        ({"partitions": 3}, "Test/Pg: partitions applies to the PARTITION strategy only, got 3 with CLUSTER"),
        (
            {"spread_level": SpreadLevel.HOST},
            "Test/Pg: spread_level applies to the SPREAD strategy only, got HOST with CLUSTER",
        ),
    ],
)
def test_bad_props_are_clear_errors(stack: cdk.Stack, props: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        TrainingPlacementGroup(stack, "Pg", **props)  # type: ignore[arg-type]
    assert str(error.value) == message


def test_cluster_group_spanning_two_azs_is_a_clear_error(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    with pytest.raises(ConfigurationError) as error:
        TrainingPlacementGroup(stack, "Pg", subnets=network.private_subnets)
    assert str(error.value) == (
        "Test/Pg: subnets span 2 Availability Zones (us-east-1a, us-east-1b); a CLUSTER placement group keeps "
        "its instances in one AZ, so give subnets of a single AZ"
    )


def test_spread_group_may_span_azs(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    TrainingPlacementGroup(stack, "Pg", strategy=PlacementStrategy.SPREAD, subnets=network.private_subnets)
