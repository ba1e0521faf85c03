"""Random environment documents: either a stack, or our ConfigurationError — never another exception.

Each example starts from a shipped environment file and applies a few mutations: drop a key or list item,
replace a value with a random JSON-ish value of any type, null it, insert an unknown (often misspelt) key,
put a random but plausible int or string (instance types, zones, CIDRs, enum-like words) into a field, or
add a field the file leaves out (its type read from the pydantic model of that section), so optional
settings such as ``efa_interfaces``, ``data_repository`` or ``public_access_cidrs`` get exercised too.

Budget (derandomized, so CI runs the same examples every time; no example database is written). Measured
on the 2-core development machine: about 1-2 s and 5-8 s, well inside 15 s together.

- ``test_mutated_documents_parse_or_fail_clearly``: 300 examples of up to 4 mutations of any kind,
  parsing only (pydantic: milliseconds each). Most are refused by the parser, which is the point.
- ``test_mutated_documents_build_or_fail_clearly``: 60 examples of 1-2 well-typed mutations (new known
  keys, same-type values, dropped keys), so about half get past the parser; each of those is constructed
  in a fresh ``App`` (0.05-0.6 s each once jsii is up; construction alone, no synth, no cdk-nag). The
  files are weighted toward the cheaper environments — each non-EKS file three times, each EKS file once —
  since an EKS stack costs 3-5x a ParallelCluster one; EKS is still about a fifth of the examples.
"""

from __future__ import annotations

import copy
import tempfile
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

import aws_cdk as cdk
import pytest
import yaml
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from training_clusters.config import EnvironmentConfig, environment_name, parse_environment
from training_clusters.environments import add_environment_config
from training_clusters.model.errors import ConfigurationError

from .conftest import CDK_CONTEXT, ROOT

BASE_DOCUMENTS: dict[str, dict[str, Any]] = {
    p.stem: yaml.safe_load(p.read_text()) for p in sorted((ROOT / "environments").glob("*.yaml"))
}
WEIGHTED = [name for name in BASE_DOCUMENTS for _ in range(1 if name.startswith("eks-") else 3)]

Path_ = tuple[str | int, ...]

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
PLAUSIBLE_INTS = st.sampled_from([-1, 0, 1, 2, 3, 7, 8, 33, 1000, 1200, 2400, 4800, 10**6]) | st.integers()
PLAUSIBLE_STRINGS = st.sampled_from(
    [
        "",
        " ",
        "p5.48xlarge",
        "ml.p5.48xlarge",
        "g5.2xlarge",
        "g5.8xlarge",
        "trn1.32xlarge",
        "t3.medium",
        "m5.xlarge",
        "us-east-1",
        "us-east-1c",
        "us-west-2a",
        "0.0.0.0/0",
        "10.0.0.0/8",
        "10.0.0.0/28",
        "not-a-cidr",
        "SCRATCH_2",
        "PERSISTENT_2",
        "efa-only",
        "capacity_block",
        "spot",
        "controller",
        "login",
        "worker",
        "mixed",
        "/",
        "/opt/slurm",
        "fsx",
        "s3://bucket/key.sh",
        "arn:aws:iam::111122223333:role/Admin",
        "cr-0123456789abcdef0",
        "training-fuzz",
        "Bad_Name",
        "a" * 70,
    ]
) | st.text(max_size=20)


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside a field's type (``X``, ``X | None``, ``list[X]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):
        found = model_in(argument)
        if found is not None:
            return found
    return None


def model_at(path: Path_) -> type[BaseModel] | None:
    """The model that validates the mapping at ``path`` (list indices skipped), or None off the schema."""
    model: type[BaseModel] | None = EnvironmentConfig
    for part in path:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if model is not None else None
        model = model_in(field.annotation) if field is not None else None
    return model


def enum_in(annotation: Any) -> type[Enum] | None:
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return annotation
    return next((e for e in map(enum_in, get_args(annotation)) if e is not None), None)


def scalar_like(annotation: Any) -> st.SearchStrategy[Any]:
    """Values of the scalar type in ``annotation``: enum members (or near misses), ints, strings, flags."""
    enum = enum_in(annotation)
    if enum is not None:
        return st.sampled_from([m.value for m in enum]) | PLAUSIBLE_STRINGS
    types = set(get_args(annotation)) | {annotation}
    if bool in types:
        return st.booleans()
    if int in types:
        return PLAUSIBLE_INTS
    if str in types:
        return PLAUSIBLE_STRINGS
    return PLAUSIBLE_INTS | PLAUSIBLE_STRINGS | st.booleans() | st.none()


def plausible(field: FieldInfo, data: st.DataObject, depth: int = 0) -> Any:
    """A value of the type ``field`` expects, often outside what is allowed; sections get their required
    fields plus a few optional ones, two levels deep at most."""
    annotation = field.annotation
    model = model_in(annotation)
    if model is not None and depth < 2:
        fields = model.model_fields
        optional = sorted(name for name, f in fields.items() if not f.is_required())
        names = [name for name, f in fields.items() if f.is_required()]
        names += data.draw(st.lists(st.sampled_from(optional), max_size=2, unique=True)) if optional else []
        section = {name: plausible(fields[name], data, depth + 1) for name in names}
        return [section] if get_origin(annotation) is list else section
    if get_origin(annotation) is list:
        return data.draw(st.lists(scalar_like(get_args(annotation)[0]), max_size=3))
    if get_origin(annotation) is dict:
        return data.draw(st.dictionaries(PLAUSIBLE_STRINGS, PLAUSIBLE_STRINGS, max_size=2))
    return data.draw(scalar_like(annotation))


def same_type(value: Any) -> st.SearchStrategy[Any]:
    """Values of ``value``'s own type: a well-typed document that may still break a rule."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return PLAUSIBLE_INTS
    if isinstance(value, str):
        return PLAUSIBLE_STRINGS
    return st.just(value)  # a section or list: its leaves get their own turn


def locations(node: Any, path: Path_ = ()) -> list[Path_]:
    """Every key path and list index in the document, depth first."""
    found: list[Path_] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        found.append((*path, key))
        found.extend(locations(child, (*path, key)))
    return found


def sections(node: Any, path: Path_ = ()) -> list[Path_]:
    """Every mapping in the document (the root included): where an unknown key can go."""
    found: list[Path_] = [path] if isinstance(node, dict) else []
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    keys = node.keys() if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else []
    for key, child in zip(keys, children, strict=True):
        found.extend(sections(child, (*path, key)))
    return found


def at(document: Any, path: Path_) -> Any:
    for part in path:
        document = document[part]
    return document


def misspelt(key: str, data: st.DataObject) -> str:
    """``key`` with one character dropped, doubled or replaced."""
    if not key:
        return "x"
    i = data.draw(st.integers(0, len(key) - 1))
    how = data.draw(st.sampled_from(["drop", "double", "replace"]))
    if how == "drop":
        return key[:i] + key[i + 1 :] or "x"
    if how == "double":
        return key[:i] + key[i] + key[i:]
    return key[:i] + data.draw(st.sampled_from("aeiosnt_-")) + key[i + 1 :]


#: Every mutation; the type-breaking ones are mostly refused by the parser, cheaply.
ALL_MUTATIONS = ("drop", "replace", "unknown_key", "known_key", "same_type", "int", "string", "null")
#: Mutations that keep the document well-typed, so more examples get past the parser to the constructs.
WELL_TYPED_MUTATIONS = ("known_key", "known_key", "same_type", "same_type", "drop")


def mutate(document: dict[str, Any], data: st.DataObject, kinds: tuple[str, ...] = ALL_MUTATIONS) -> None:
    """Apply one random mutation of one of ``kinds`` to ``document`` in place."""
    kind = data.draw(st.sampled_from(kinds))
    if kind == "known_key":
        path = data.draw(st.sampled_from(sections(document)))
        model = model_at(path)
        if model is not None:
            name = data.draw(st.sampled_from(sorted(model.model_fields)))
            at(document, path)[name] = plausible(model.model_fields[name], data)
        return
    if kind == "unknown_key":
        section = at(document, data.draw(st.sampled_from(sections(document))))
        existing = [k for k in section if isinstance(k, str)]
        if data.draw(st.booleans()) and existing:
            name = misspelt(data.draw(st.sampled_from(existing)), data)
        else:
            name = data.draw(st.text(min_size=1, max_size=10))
        section[name] = data.draw(JSON_VALUES)
        return
    paths = locations(document)
    if not paths:
        return
    path = data.draw(st.sampled_from(paths))
    parent, key = at(document, path[:-1]), path[-1]
    if kind == "drop":
        del parent[key]
    elif kind == "replace":
        parent[key] = data.draw(JSON_VALUES)
    elif kind == "same_type":
        parent[key] = data.draw(same_type(parent[key]))
    elif kind == "int":
        parent[key] = data.draw(PLAUSIBLE_INTS)
    elif kind == "string":
        parent[key] = data.draw(PLAUSIBLE_STRINGS)
    else:
        parent[key] = None


def mutated_document(
    data: st.DataObject, max_mutations: int, kinds: tuple[str, ...] = ALL_MUTATIONS
) -> dict[str, Any]:
    base = data.draw(st.sampled_from(WEIGHTED), label="base")
    document = copy.deepcopy(BASE_DOCUMENTS[base])
    for _ in range(data.draw(st.integers(1, max_mutations), label="mutations")):
        mutate(document, data, kinds)
    note(f"document: {document!r}")
    return document


def build(document: dict[str, Any]) -> None:
    """Parse and construct: success or ConfigurationError; anything else propagates and fails the test."""
    config = parse_environment(document, source="fuzz.yaml")
    name = environment_name(config, Path("fuzz.yaml"))
    with tempfile.TemporaryDirectory() as outdir:
        add_environment_config(cdk.App(outdir=outdir, context=dict(CDK_CONTEXT)), config, name)


def assert_ours(error: ConfigurationError) -> None:
    message = str(error)
    assert message.strip()
    for leaked in ("Traceback", "jsii", "pydantic", "For further information visit"):
        assert leaked not in message


FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(FUZZ, max_examples=300)
@given(st.data())
def test_mutated_documents_parse_or_fail_clearly(data: st.DataObject) -> None:
    document = mutated_document(data, max_mutations=4)
    try:
        parse_environment(document, source="fuzz.yaml")
    except ConfigurationError as error:
        assert_ours(error)


@settings(FUZZ, max_examples=60)
@given(st.data())
def test_mutated_documents_build_or_fail_clearly(data: st.DataObject) -> None:
    document = mutated_document(data, max_mutations=2, kinds=WELL_TYPED_MUTATIONS)
    try:
        build(document)
    except ConfigurationError as error:
        assert_ours(error)


@pytest.mark.parametrize("name", sorted(BASE_DOCUMENTS))
def test_every_base_document_parses(name: str) -> None:
    """The mutations start from valid documents, so a refusal is always the mutation's doing."""
    parse_environment(copy.deepcopy(BASE_DOCUMENTS[name]), source=f"{name}.yaml")
