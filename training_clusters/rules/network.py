"""The training VPC: how private subnets reach AWS."""

from __future__ import annotations


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
