"""Slurm accounting's Aurora MySQL Serverless v2 database: its master user, databases, capacity, backups and the
rotation of slurmdbd's password.

Sources: Aurora Serverless v2 capacity (0.5 to 256 ACU in steps of 0.5,
https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/aurora-serverless-v2.setting-capacity.html),
``BackupRetentionPeriod`` (1 to 35 days for Aurora,
https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_CreateDBCluster.html), MySQL's 16-character
master user name and 64-character database names, RDS's reserved ``rdsadmin`` user, and Secrets Manager's
``RotationRules.AutomaticallyAfterDays`` (1 to 1000).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: Secrets Manager rotates a secret every 1 to 1000 days (RotationRules.AutomaticallyAfterDays).
MIN_ROTATION_DAYS, MAX_ROTATION_DAYS = 1, 1000
#: Serverless v2 capacity bounds, in Aurora capacity units (ACU, about 2 GiB of memory each).
MIN_ACU, MAX_ACU = 0.5, 256.0
#: RDS keeps automated backups 1 to 35 days.
MIN_BACKUP_DAYS, MAX_BACKUP_DAYS = 1, 35
#: MySQL's limit for the master user name.
USERNAME_MAX = 16
#: The database user slurmdbd connects as (made by the slurmdbd-user handler, never the master user).
SLURMDBD_USERNAME = "slurmdbd"
DATABASE_NAME_MAX = 64
#: User names RDS keeps for itself.
RESERVED_USERNAMES = frozenset({"rdsadmin"})
_USERNAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_DATABASE_NAME = re.compile(r"[A-Za-z0-9_]+")


def master_username_problem(username: str) -> str | None:
    """The master user: 1 to 16 letters, digits or '_' starting with a letter; not RDS's, not slurmdbd's."""
    if not (len(username) <= USERNAME_MAX and _USERNAME.fullmatch(username)):
        return f"must be 1 to {USERNAME_MAX} letters, digits or '_', starting with a letter, got '{username}'"
    if username.lower() in RESERVED_USERNAMES:
        return f"is reserved by RDS, got '{username}'"
    if username.lower() == SLURMDBD_USERNAME:
        return f"is slurmdbd's own database user, got '{username}'"
    return None


def databases_problem(databases: Sequence[str] | str) -> str | None:
    """slurmdbd's databases: at least one, each 1 to 64 letters, digits or '_'."""
    if isinstance(databases, str) or not databases:
        return f"must name at least one database, got {databases!r}"
    for name in databases:
        if not (len(name) <= DATABASE_NAME_MAX and _DATABASE_NAME.fullmatch(name)):
            return f"must be 1 to {DATABASE_NAME_MAX} letters, digits or '_' each, got '{name}'"
    return None


def capacity_acu_problem(value: float) -> str | None:
    """One Serverless v2 capacity bound: 0.5 to 256 ACU in steps of 0.5."""
    if MIN_ACU <= value <= MAX_ACU and (value * 2) == int(value * 2):
        return None
    return f"must be {MIN_ACU:g} to {MAX_ACU:g} in steps of 0.5 ACU, got {value:g}"


def capacity_range_problem(low: float, high: float) -> str | None:
    """The least capacity does not exceed the most."""
    return None if low <= high else f"must not exceed max_capacity_acu ({high:g}), got {low:g}"


def backup_retention_problem(days: int) -> str | None:
    """Automated backups: 1 to 35 days."""
    if MIN_BACKUP_DAYS <= days <= MAX_BACKUP_DAYS:
        return None
    return f"must be {MIN_BACKUP_DAYS} to {MAX_BACKUP_DAYS} (RDS keeps automated backups at least a day), got {days}"


def rotation_days_problem(days: int) -> str | None:
    """The rotation of slurmdbd's password: every 1 to 1000 days."""
    if not isinstance(days, bool) and MIN_ROTATION_DAYS <= days <= MAX_ROTATION_DAYS:
        return None
    return (
        f"must be {MIN_ROTATION_DAYS} to {MAX_ROTATION_DAYS} days (Secrets Manager's rotation schedule), "
        f"got {days}"
    )
