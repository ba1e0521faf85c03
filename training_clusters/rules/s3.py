"""Amazon S3: the name prefix of a bucket the library makes.

A bucket name is 3-63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html); the prefix is kept short
and without dots, leaving room for the unique suffix CloudFormation adds.
"""

from __future__ import annotations

import re

from training_clusters.rules.common import pattern_problem

BUCKET_NAME_PREFIX_MAX_LENGTH = 20
_PREFIX = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def bucket_name_prefix_problem(prefix: str) -> str | None:
    """A bucket name prefix: 1-20 lowercase letters, digits or hyphens, starting with a letter or digit."""
    return pattern_problem(
        prefix,
        _PREFIX,
        f"must be 1-{BUCKET_NAME_PREFIX_MAX_LENGTH} lowercase letters, digits or hyphens starting with a letter "
        "or digit",
        max_length=BUCKET_NAME_PREFIX_MAX_LENGTH,
    )
