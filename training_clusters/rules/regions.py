"""AWS regions and availability zones, checked against the partitions botocore ships (no network).

botocore's ``partitions.json`` lists each partition's regions and the regular expression its region names
follow (``aws``: ``^(us|eu|ap|sa|ca|me|af|il|mx)\\-\\w+\\-\\d+$``). A region newer than the installed
botocore matches its partition's expression without being listed; an environment file accepts it only
when it says so (``allow_unknown_region: true``), so a typo such as ``us-central-1`` is caught before
synth rather than at deploy.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from typing import Any

from training_clusters.model.errors import excerpt

#: An availability zone: its region's name and one letter (Local and Wavelength Zones are not used).
_ZONE_SUFFIX = re.compile(r"[a-z]")


@cache
def _partitions() -> tuple[tuple[re.Pattern[str], frozenset[str]], ...]:
    """(region name expression, listed regions) of every partition botocore knows."""
    from botocore.loaders import create_loader

    data: dict[str, Any] = create_loader().load_data("partitions")
    partitions = []
    for partition in data["partitions"]:
        shape = re.compile(partition["regionRegex"], re.ASCII)
        # the listing also holds pseudo-regions such as aws-global, which are no place to deploy
        listed = frozenset(name for name in partition["regions"] if shape.fullmatch(name))
        partitions.append((shape, listed))
    return tuple(partitions)


def known_regions() -> frozenset[str]:
    """Every region of every partition in the installed botocore."""
    return frozenset().union(*(listed for _, listed in _partitions()))


def region_shape_problem(region: str) -> str | None:
    """A region name must have the shape of some partition's region names."""
    if any(shape.fullmatch(region) for shape, _ in _partitions()):
        return None
    return f"must be an AWS region such as us-east-1, got {excerpt(region)}"


def unknown_region_problem(region: str) -> str | None:
    """A region must be one the installed botocore lists (the escape hatch is the caller's)."""
    known = known_regions()
    if region in known:
        return None
    import botocore

    close = difflib.get_close_matches(region, sorted(known), n=3, cutoff=0.8)
    hint = ""
    if close:
        hint = f"did you mean {close[0] if len(close) == 1 else 'one of ' + ', '.join(close)}? "
    return (
        f"{excerpt(region)} is not a region botocore {botocore.__version__} knows; {hint}"
        "for a region newer than botocore, set allow_unknown_region: true"
    )


def availability_zone_problem(zone: str, region: str) -> str | None:
    """An availability zone is its region's name and one letter, e.g. us-east-1a."""
    if zone.startswith(region) and _ZONE_SUFFIX.fullmatch(zone[len(region) :]):
        return None
    return f"{excerpt(zone)} is not an AZ of region {region} (expected e.g. {region}a)"
