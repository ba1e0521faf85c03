"""The training VPC: its address range and how private subnets reach AWS."""

from __future__ import annotations

import ipaddress

from training_clusters.errors import excerpt

#: Prefix length of each public subnet (the NAT gateway's); private ones default to /18.
PUBLIC_SUBNET_MASK = 24
PRIVATE_SUBNET_MASK = 18
MAX_NAT_GATEWAYS_PER_AZ = 1


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
