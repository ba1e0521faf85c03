"""Small helpers shared by the constructs' validation methods: the one boundary where props are checked."""

from __future__ import annotations

from typing import Any, TypeVar

import aws_cdk as cdk
from constructs import IConstruct

from training_clusters.errors import ConfigurationError
from training_clusters.options import Choice, RemovalPolicy

C = TypeVar("C", bound=Choice)


def is_unresolved(value: Any) -> bool:
    """True for CDK tokens, which are only known at deploy time and so cannot be checked here."""
    return isinstance(value, str | int | float) and cdk.Token.is_unresolved(value)


def fail(construct_path: str, field: str, message: str) -> ConfigurationError:
    """Build the error for a bad prop: ``<construct path>: <field> <message>``."""
    return ConfigurationError(f"{construct_path}: {field} {message}")


def option(scope: IConstruct | str, field: str, choice: type[C], value: Any) -> C:
    """``value`` as a member of ``choice``: the member itself, or its value or name as a string (any case).

    The constructs' one conversion point; the environment file uses the same :meth:`Choice.parse`.
    """
    try:
        return choice.parse(value)
    except ConfigurationError as error:
        raise fail(_path(scope), field, str(error)) from None


def to_removal_policy(scope: IConstruct | str, field: str, value: Any) -> cdk.RemovalPolicy:
    """A ``cdk.RemovalPolicy``, a :class:`~training_clusters.options.RemovalPolicy` or its spelling."""
    if isinstance(value, cdk.RemovalPolicy):
        return value
    return cdk.RemovalPolicy[option(scope, field, RemovalPolicy, value).name]


def _path(scope: IConstruct | str) -> str:
    return scope if isinstance(scope, str) else scope.node.path
