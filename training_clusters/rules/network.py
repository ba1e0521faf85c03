"""The training VPC: its address range and how private subnets reach AWS."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from fractions import Fraction

from training_clusters.model.errors import excerpt

#: Prefix length of each public subnet (the NAT gateway's); private ones default to /18.
PUBLIC_SUBNET_MASK = 24
PRIVATE_SUBNET_MASK = 18
MAX_NAT_GATEWAYS_PER_AZ = 1
#: Addresses AWS keeps in every subnet, "the first four IP addresses and the last IP address in each subnet
#: CIDR block" (Amazon VPC User Guide, "Subnet CIDR blocks":
#: https://docs.aws.amazon.com/vpc/latest/userguide/subnet-sizing.html).
RESERVED_SUBNET_ADDRESSES = 5
#: Ranges let in from outside the VPC (SSH to a head node, the Kubernetes API) are "the whole internet" when one
#: is wider than a /8 (16.8 million addresses, as wide as a single organisation's allocation gets) or when they
#: cover more than one sixteenth of the IPv4 addresses together (a /4's worth, 268 million): a list of ranges
#: is judged by what it covers, so ``[0.0.0.0/1, 128.0.0.0/1]`` is the internet as ``0.0.0.0/0`` is.
WIDEST_OPEN_PREFIX = 8
MAX_OPEN_SHARE = Fraction(1, 16)


def usable_addresses(mask: int = PRIVATE_SUBNET_MASK) -> int:
    """The addresses of a subnet of prefix ``mask`` that instances may take."""
    return (1 << (32 - mask)) - RESERVED_SUBNET_ADDRESSES


def nodes_fit_problem(
    count: int, others: int, *, subnets: int = 1, mask: int = PRIVATE_SUBNET_MASK
) -> str | None:
    """A node count (``max_count``, ``count``, ``size``) that, with the ``others`` nodes of the same subnets,
    needs more addresses than ``subnets`` private subnets of prefix ``mask`` have: every node takes at least
    one (its primary network interface's; EFA interfaces and pods may take more). The caller prefixes it."""
    usable = usable_addresses(mask)
    room = subnets * usable - others
    if count <= room:
        return None
    where = (
        f"the placement subnet, a private /{mask} of {usable:,} usable addresses"
        if subnets == 1
        else f"the {subnets} private subnets, /{mask}s of {usable:,} usable addresses each"
    )
    why = (
        f"each node takes an address in {where} (AWS reserves {RESERVED_SUBNET_ADDRESSES} of every subnet's "
        f"{1 << (32 - mask):,})"
    )
    if room < 1:
        return f"is {count}, but the nodes there add up to {count + others:,}: {why}; lower the counts"
    rest = f", and the other nodes there take {others:,}" if others else ""
    return f"must be at most {room:,}, got {count}: {why}{rest}"


def vpc_cidr_problem(cidr: str, az_count: int, private_mask: int = PRIVATE_SUBNET_MASK) -> str | None:
    """A new VPC's IPv4 range: /16 to /24 (VPC limits), room for a private and a public subnet per AZ."""
    try:
        network = ipaddress.IPv4Network(cidr)
    except ValueError:
        return f"must be an IPv4 range such as 10.0.0.0/16, got {excerpt(cidr)}"
    if not 16 <= network.prefixlen <= 24:
        return f"prefix must be between /16 and /24 (VPC limits), got {excerpt(cidr)}"
    needed = az_count * (2 ** (32 - private_mask) + 2 ** (32 - PUBLIC_SUBNET_MASK))
    if needed > network.num_addresses:
        return (
            f"{excerpt(cidr)} ({network.num_addresses} addresses) cannot hold {az_count} private /{private_mask} "
            f"and {az_count} public /{PUBLIC_SUBNET_MASK} subnets; use a larger range or a longer "
            "private_subnet_mask"
        )
    return None


def nat_gateways_fit_problem(nat_count: int, az_count: int) -> str | None:
    """At most one NAT gateway per AZ."""
    if nat_count > az_count * MAX_NAT_GATEWAYS_PER_AZ:
        return f"must be at most one per AZ ({az_count} AZs), got {nat_count}"
    return None


def nat_gateways_problem(nat_gateways: int | None, endpoint_only: bool) -> str | None:
    """NAT gateways 0 needs endpoint-only mode; endpoint-only mode needs no NAT gateways."""
    if nat_gateways is None:
        return None
    if nat_gateways < 0:
        return f"must be 0 or more, got {nat_gateways}"
    if nat_gateways == 0 and not endpoint_only:
        return (
            "is 0, which leaves private subnets without a way out; enable endpoint_only to reach AWS "
            "through VPC endpoints instead, or use 1 or more NAT gateways"
        )
    if nat_gateways > 0 and endpoint_only:
        return f"must be 0 (or omitted) when endpoint_only is enabled, got {nat_gateways}"
    return None


def internet_wide_problem(ranges: Iterable[str]) -> str | None:
    """``None`` when the IPv4 ``ranges`` (valid CIDRs, host bits allowed) are narrower than the whole internet
    (:data:`WIDEST_OPEN_PREFIX`, :data:`MAX_OPEN_SHARE`), else the end of a "must not open ... to the whole
    internet" sentence: ``"got '0.0.0.0/1', wider than a /8"``. The caller words the start and the advice."""
    networks = []
    for cidr in ranges:
        network = ipaddress.IPv4Network(cidr, strict=False)
        if network.prefixlen < WIDEST_OPEN_PREFIX:
            return f"got {excerpt(cidr)}, wider than a /{WIDEST_OPEN_PREFIX}"
        networks.append(network)
    covered = sum(network.num_addresses for network in ipaddress.collapse_addresses(networks))
    most = int((1 << 32) * MAX_OPEN_SHARE)
    if covered > most:
        return f"got ranges covering {covered:,} addresses together, more than one sixteenth of IPv4's ({most:,})"
    return None


def shared_efa_group_problem(group_path: str, other_cluster: str) -> str:
    """An EFA security group one cluster already uses, given to another: every port opens between them."""
    return (
        f"must be a group of this cluster's own, got {group_path}, already the EFA group of {other_cluster}: "
        "an EFA group admits all traffic between its members, so one shared by two clusters opens every "
        "port between their nodes; give each cluster its own (network.add_efa_security_group(id))"
    )


#: A private subnet's prefix length: /16 (the largest a VPC holds) to /28 (the smallest AWS makes).
PRIVATE_SUBNET_MASKS = (16, 28)


def private_subnet_mask_problem(mask: int) -> str | None:
    """The private subnets' prefix length: 16 to 28."""
    low, high = PRIVATE_SUBNET_MASKS
    return None if low <= mask <= high else f"must be between {low} and {high}, got {mask}"


def placement_zone_problem(zone: str, zones: Sequence[str], named: str) -> str | None:
    """The placement AZ (placement groups, FSx) is one of the VPC's zones (``named`` as the caller names them)."""
    if zone in zones:
        return None
    return f"'{zone}' must be one of {named} ({', '.join(zones)})"


def private_subnet_zone_problem(zone: str, zones: Sequence[str]) -> str | None:
    """A subnet asked for by AZ: the VPC has a private subnet there (``zones``: those of its private subnets)."""
    if zone in zones:
        return None
    return f"'{zone}' has no private subnet; available: {', '.join(zones)}"
