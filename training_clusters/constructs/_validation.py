"""Small helpers shared by the constructs' validation methods."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk

from training_clusters.errors import ConfigurationError


def is_unresolved(value: Any) -> bool:
    """True for CDK tokens, which are only known at deploy time and so cannot be checked here."""
    return isinstance(value, str | int | float) and cdk.Token.is_unresolved(value)


def fail(construct_path: str, field: str, message: str) -> ConfigurationError:
    """Build the error for a bad prop: ``<construct path>: <field> <message>``."""
    return ConfigurationError(f"{construct_path}: {field} {message}")
