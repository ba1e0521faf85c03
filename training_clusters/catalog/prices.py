"""What the resources an environment keeps after ``cdk destroy`` cost a month: a small list-price table.

US East (N. Virginia) on-demand list prices in USD, no free tier, no savings plans. Sources (the AWS pricing
pages, as of :data:`PRICES_AS_OF`):

* FSx for Lustre storage and backups: https://aws.amazon.com/fsx/lustre/pricing/ (SSD, per GB-month of
  provisioned capacity; the file system's capacity in GiB is what is billed);
* Aurora Serverless v2 capacity: https://aws.amazon.com/rds/aurora/pricing/ (Aurora Standard, per ACU-hour;
  storage and I/O are billed on top by use);
* KMS customer managed keys: https://aws.amazon.com/kms/pricing/ (per key-month);
* Secrets Manager secrets: https://aws.amazon.com/secrets-manager/pricing/ (per secret-month);
* EBS gp3 volumes: https://aws.amazon.com/ebs/pricing/ (per GB-month of provisioned storage, with the
  included 3,000 IOPS and 125 MB/s).

How they were checked: the AWS pages could not be fetched where this table was written (no network), so
the Lustre figures SCRATCH_2 $0.140 and PERSISTENT_2 125 MB/s/TiB $0.145 were checked against pages quoting
AWS's (and the issue's "1.2 TiB SCRATCH_2, about $170 a month": 1200 x 0.140 = $168); the other tiers and the
Aurora, KMS, Secrets Manager and EBS gp3 figures are AWS's list prices as published then, not re-read here. Prices
move: check the pages before quoting a figure as a bill.

Only us-east-1 is here: elsewhere each function returns None (not known), and the caller says so. Build-side
data with no imports of the operate side (``training-clusters cleanup`` reads it).
"""

from __future__ import annotations

#: The one region whose prices this table holds.
PRICES_REGION = "us-east-1"
#: When the prices were taken.
PRICES_AS_OF = "2026-12"
#: Hours in a month, as AWS's pricing examples count them.
HOURS_PER_MONTH = 730

#: FSx for Lustre SSD storage, USD per GB-month, by (deployment type, MB/s per TiB; None for scratch).
LUSTRE_USD_PER_GB_MONTH: dict[tuple[str, int | None], float] = {
    ("SCRATCH_1", None): 0.140,
    ("SCRATCH_2", None): 0.140,
    ("PERSISTENT_1", 50): 0.145,
    ("PERSISTENT_1", 100): 0.210,
    ("PERSISTENT_1", 200): 0.290,
    ("PERSISTENT_2", 125): 0.145,
    ("PERSISTENT_2", 250): 0.210,
    ("PERSISTENT_2", 500): 0.340,
    ("PERSISTENT_2", 1000): 0.600,
}
#: FSx backup storage, USD per GB-month of backed-up data.
LUSTRE_BACKUP_USD_PER_GB_MONTH = 0.050
#: Aurora Serverless v2 (Aurora Standard), USD per ACU-hour.
AURORA_SERVERLESS_V2_USD_PER_ACU_HOUR = 0.12
#: A KMS customer managed key, USD a month.
KMS_KEY_USD_PER_MONTH = 1.00
#: A Secrets Manager secret, USD a month.
SECRET_USD_PER_MONTH = 0.40
#: An EBS gp3 volume's storage, USD per GB-month (its baseline IOPS and throughput included).
EBS_GP3_USD_PER_GB_MONTH = 0.08

#: Where each price above is published (what ``training-clusters cleanup`` cites under its total).
PRICE_SOURCES = {
    "fsx": "FSx for Lustre https://aws.amazon.com/fsx/lustre/pricing/",
    "aurora": "Aurora Serverless v2 https://aws.amazon.com/rds/aurora/pricing/",
    "kms": "KMS keys https://aws.amazon.com/kms/pricing/",
    "secrets": "Secrets Manager https://aws.amazon.com/secrets-manager/pricing/",
    "ebs": "EBS gp3 https://aws.amazon.com/ebs/pricing/",
}


def lustre_monthly_usd(
    region: str, deployment_type: str, throughput_mbps_per_tib: int | None, capacity_gib: int
) -> float | None:
    """A Lustre file system's storage a month; None for a region or deployment type not in the table."""
    if region != PRICES_REGION:
        return None
    scratch = deployment_type.startswith("SCRATCH")
    price = LUSTRE_USD_PER_GB_MONTH.get((deployment_type, None if scratch else throughput_mbps_per_tib))
    return None if price is None else round(price * capacity_gib, 2)


def aurora_serverless_v2_monthly_usd(region: str, min_capacity_acu: float) -> float | None:
    """The least an Aurora Serverless v2 writer bills a month: ``min_capacity_acu`` every hour, connected or
    not (only a minimum of 0 lets it pause); storage comes on top. None outside :data:`PRICES_REGION`."""
    if region != PRICES_REGION:
        return None
    return round(min_capacity_acu * AURORA_SERVERLESS_V2_USD_PER_ACU_HOUR * HOURS_PER_MONTH, 2)


def flat_monthly_usd(region: str, usd: float) -> float | None:
    """A flat monthly price (a key, a secret) in :data:`PRICES_REGION`; None elsewhere."""
    return usd if region == PRICES_REGION else None
