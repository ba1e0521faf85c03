"""EC2 placement groups: which options go with which strategy, and the one AZ of a cluster group.

Sources: ``AWS::EC2::PlacementGroup``
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-ec2-placementgroup.html) and
placement strategies (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html): a
partition group has up to seven partitions per Availability Zone, a spread group spreads by rack or host, a
cluster group packs its instances into one Availability Zone.
"""

from __future__ import annotations

from collections.abc import Iterable

#: A partition placement group has at most this many partitions per AZ.
MAX_PARTITIONS = 7


def placement_partitions_problem(strategy: str, partitions: int | None) -> str | None:
    """``partitions``: PARTITION strategy only (``strategy`` is the strategy's upper-case name), 1 to 7."""
    if partitions is None:
        return None
    if strategy != "PARTITION":
        return f"applies to the PARTITION strategy only, got {partitions} with {strategy}"
    if not 1 <= partitions <= MAX_PARTITIONS:
        return f"must be between 1 and {MAX_PARTITIONS} per AZ, got {partitions}"
    return None


def placement_spread_level_problem(strategy: str, spread_level: str | None) -> str | None:
    """``spread_level`` (RACK or HOST): SPREAD strategy only."""
    if spread_level is not None and strategy != "SPREAD":
        return f"applies to the SPREAD strategy only, got {spread_level} with {strategy}"
    return None


def placement_zones_problem(strategy: str, zones: Iterable[str]) -> str | None:
    """The subnets of a CLUSTER group's instances: one Availability Zone."""
    found = sorted(set(zones))
    if strategy != "CLUSTER" or len(found) <= 1:
        return None
    return (
        f"span {len(found)} Availability Zones ({', '.join(found)}); a CLUSTER placement group keeps its "
        "instances in one AZ, so give subnets of a single AZ"
    )
