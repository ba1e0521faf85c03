"""CloudWatch Logs retention periods (``RetentionInDays`` of ``AWS::Logs::LogGroup``)."""

from __future__ import annotations

#: CloudWatch Logs retention periods (days) and the matching ``aws_logs.RetentionDays`` member names.
CLOUDWATCH_RETENTION_DAYS: dict[int, str] = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS",
    1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}  # fmt: skip


def cloudwatch_retention_problem(days: int) -> str | None:
    """CloudWatch Logs accepts only the retention periods listed in :data:`CLOUDWATCH_RETENTION_DAYS`."""
    if days in CLOUDWATCH_RETENTION_DAYS:
        return None
    return f"must be one of {', '.join(str(d) for d in CLOUDWATCH_RETENTION_DAYS)}, got {days}"
