"""The environment-file model applies the rules the constructs apply (``training_clusters/rules/``), so a
mistake the constructs would refuse at build time is refused while the file loads, at its own field: each
rule here on both sides of its boundary, as a file writes it."""

from __future__ import annotations

from typing import Any

import pytest

from training_clusters.config import parse_environment
from training_clusters.model.errors import ConfigurationError

MINIMAL: dict[str, Any] = {"region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"]}


def problem(document: dict[str, Any]) -> str:
    """The one problem of ``document``: ``field: message``."""
    with pytest.raises(ConfigurationError) as raised:
        parse_environment(document)
    first, *rest = str(raised.value).splitlines()
    assert first == "<environment>: 1 problem(s)", str(raised.value)
    return rest[0].strip()


# --------------------------------------------------------------------------------------------------
# network.placement_group


@pytest.mark.parametrize(
    ("group", "partitions"),
    [({"strategy": "partition", "partitions": 7}, 7), ({"strategy": "cluster"}, None), ({}, None)],
)
def test_partitions_are_accepted_with_the_partition_strategy(
    group: dict[str, Any], partitions: int | None
) -> None:
    environment = parse_environment({**MINIMAL, "network": {"placement_group": group}})
    assert environment.network.placement_group.partitions == partitions


@pytest.mark.parametrize("strategy", ["cluster", "spread"])
def test_partitions_with_another_strategy_are_refused_at_the_field(strategy: str) -> None:
    group = {"strategy": strategy, "partitions": 2}
    assert problem({**MINIMAL, "network": {"placement_group": group}}) == (
        "network.placement_group.partitions: applies to the PARTITION strategy only, "
        f"got 2 with {strategy.upper()}"
    )
