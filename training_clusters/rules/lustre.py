"""Validation rules shared by the constructs and the environment file, free of CDK imports.

Each function returns ``None`` when the value is fine, else the sentence that explains what is allowed;
the caller prefixes the field (a construct prop or an environment-file path).
"""

from __future__ import annotations

LUSTRE_FIRST_STEP_GIB = 1200
LUSTRE_STEP_GIB = 2400
PERSISTENT_2_THROUGHPUTS_MBPS = (125, 250, 500, 1000)


def lustre_capacity_problem(deployment_type: str, capacity_gib: int) -> str | None:
    """FSx for Lustre SSD capacity: 1200 GiB, or a multiple of 2400 GiB."""
    if capacity_gib == LUSTRE_FIRST_STEP_GIB or (capacity_gib > 0 and capacity_gib % LUSTRE_STEP_GIB == 0):
        return None
    return (
        f"must be {LUSTRE_FIRST_STEP_GIB} or a multiple of {LUSTRE_STEP_GIB} for {deployment_type}, "
        f"got {capacity_gib}"
    )


def lustre_throughput_problem(deployment_type: str, throughput_mbps: int | None) -> str | None:
    """Per-unit throughput: required (125/250/500/1000) for PERSISTENT_2, absent for SCRATCH_2."""
    allowed = ", ".join(str(v) for v in PERSISTENT_2_THROUGHPUTS_MBPS)
    if deployment_type == "PERSISTENT_2":
        if throughput_mbps is None:
            return f"is required for PERSISTENT_2; allowed: {allowed}"
        if throughput_mbps not in PERSISTENT_2_THROUGHPUTS_MBPS:
            return f"must be one of {allowed} for PERSISTENT_2, got {throughput_mbps}"
        return None
    if throughput_mbps is not None:
        return (
            f"applies to PERSISTENT_2 only; {deployment_type} has a fixed throughput, got {throughput_mbps}"
        )
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


#: CloudWatch Logs retention periods (days) and the matching ``aws_logs.RetentionDays`` member names.
LOG_RETENTION_DAYS: dict[int, str] = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS",
    1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}  # fmt: skip


def log_retention_problem(days: int) -> str | None:
    """CloudWatch Logs accepts only the retention periods listed in :data:`LOG_RETENTION_DAYS`."""
    if days in LOG_RETENTION_DAYS:
        return None
    return f"must be one of {', '.join(str(d) for d in LOG_RETENTION_DAYS)}, got {days}"
