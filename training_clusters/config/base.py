"""What every section of the environment file shares: the strict model base, choices as file values, and the
errors that name a field (``_FieldProblem``) with FILE:LINE."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationInfo,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from training_clusters.catalog import (
    hyperpod_offer_problem,
    instance_type_problem,
    lookup_hyperpod,
)
from training_clusters.model.errors import ConfigurationError, exact_number_problem
from training_clusters.model.options import (
    Choice,
)
from training_clusters.rules.instance_types import (
    hyperpod_instance_type_name_problem,
    instance_type_name_problem,
    undeclared_type_problem,
)
from training_clusters.rules.network import (
    nodes_fit_problem,
)

_ACCOUNT = re.compile(r"^\d{12}$")


_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]{0,62}$")


_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


PROJECT_TAG = "cdk-training-clusters"


COST_CENTRE_TAG = "cost-centre"


class _Model(BaseModel):
    """Strict base: unknown keys are errors, enum values are kept as enums, ``true`` is not a number, and a
    number is finite and exact in CloudFormation's JSON (``.nan``, ``.inf`` and 10**30 are refused)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_enum_values=False, str_strip_whitespace=True, allow_inf_nan=False
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads YAML's true/false as 1/0 in a number field; `size: true` is a mistake, not a count
        field = cls.model_fields.get(info.field_name or "")
        if field is None or not _is_number(field.annotation):
            return value
        if isinstance(value, bool):
            raise ValueError(f"must be a number, got {str(value).lower()}")
        problem = exact_number_problem(value)
        if problem:
            raise ValueError(problem)
        return value


@dataclass(frozen=True)
class _FileChoice:
    """A field holding a :class:`~training_clusters.model.options.Choice`: parsed by its one conversion, and listed
    in the JSON Schema with the spellings a file may use."""

    choice: type[Choice]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # parsed by the option's one conversion; written back (model_dump, schema defaults) as its value
        return core_schema.no_info_plain_validator_function(
            self.choice.parse, serialization=core_schema.to_string_ser_schema()
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "enum": self.choice.spellings()}


def _follows(rule: Callable[[Any], str | None]) -> Callable[[Any], Any]:
    """A field validator applying ``rule`` (a ``rules.*_problem`` function) to a field's value, if given."""

    def check(value: Any) -> Any:
        if value is not None:
            problem = rule(value)
            if problem:
                raise ValueError(problem)
        return value

    return check


def _hyperpod_instance_type(value: str) -> str:
    """An ``instance_type`` field validator: a HyperPod (``ml.*``) type the catalogue knows (or the file
    declares)."""
    _raise_if(hyperpod_instance_type_name_problem(value))
    if instance_type_problem(value.removeprefix("ml.")):
        raise ValueError(_undeclared(value))
    try:
        lookup_hyperpod(value, field="instance_type")
    except ConfigurationError as error:
        raise ValueError(str(error).removeprefix("instance_type: ")) from None
    return value


def _hyperpod_any_type(value: str) -> str:
    """An ``instance_type`` field validator of a HyperPod group that may be any type (a controller or login
    group): spelt as SageMaker spells it; workers are checked against the catalogue by their section."""
    _raise_if(hyperpod_instance_type_name_problem(value) or hyperpod_offer_problem(value))
    return value


def _is_number(annotation: Any) -> bool:
    """Whether a field's type is int or float (possibly Optional or Annotated)."""
    if annotation in (int, float):
        return True
    return any(_is_number(argument) for argument in get_args(annotation) if argument is not type(None))


def _raise_if(problem: str | None, field: str = "") -> None:
    if problem:
        raise ValueError(f"{field} {problem}" if field else problem)


class _FieldProblem(ValueError):
    """A model validator's problem with one field of its model (``network.cidr``): reported at that field's
    path and line, not at the model's."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = tuple(int(part) if part.isdigit() else part for part in field.split("."))


def _raise_at(field: str, problem: str | None) -> None:
    if problem:
        raise _FieldProblem(field, problem)


def _raise_if_crowded(counts: list[tuple[str, int]], *, subnets: int = 1) -> None:
    """Refuse node counts (``(field, count)``, all in the same subnets) that need more addresses than
    ``subnets`` of the environment's private subnets have, naming the largest."""
    if counts:
        field, count = max(counts, key=lambda item: item[1])
        others = sum(n for _, n in counts) - count
        _raise_at(field, nodes_fit_problem(count, others, subnets=subnets))


def _catalogued(value: str) -> str:
    """An ``instance_type`` field validator for nodes whose accelerators or EFA the library configures: a type
    the catalogue knows, or one the file declares under ``instance_types``."""
    _raise_if(instance_type_name_problem(value) or (instance_type_problem(value) and _undeclared(value)))
    return value


def _undeclared(name: str) -> str:
    return undeclared_type_problem(name)


def _any_type(value: str) -> str:
    """An ``instance_type`` field validator for controller, login, head and system nodes: any type EC2 sells,
    spelt as EC2 spells it (no facts needed)."""
    _raise_if(instance_type_name_problem(value))
    return value
