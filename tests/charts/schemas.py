"""Every Kubernetes object we apply, judged by the schema that will judge it on the cluster, offline.

* Built-in kinds: the target Kubernetes version's OpenAPI, strict (an unknown field fails), through
  ``kubernetes-validate`` (which carries Kubernetes' own schemas per minor version; the nearest version it has at
  or below the cluster's when it has not the cluster's own, which :func:`kubernetes_schema_version` says).
* Custom resources: the CRDs of the exact chart (or release manifest) versions :mod:`training_clusters.model.releases`
  pins, read from the chart folder :mod:`tests.charts.helm` uses (templated CRDs rendered by the real helm), and
  checked as the API server checks a structural schema (Kubernetes "Extend the Kubernetes API with
  CustomResourceDefinitions": pruning, defaulting, validation, validation rules): nulls dropped and defaults
  applied first, then types, enums, formats' bounds, required fields, list types, and unknown fields refused
  (the API server's strict field validation, ``kubectl``'s default) except under
  ``x-kubernetes-preserve-unknown-fields``, in ``additionalProperties`` maps and, in an
  ``x-kubernetes-embedded-resource``, ``apiVersion``/``kind``/``metadata``; the root ``metadata`` against
  Kubernetes' ``ObjectMeta``.
* The CRDs' ``x-kubernetes-validations`` CEL rules, by cel-python (cloud-custodian/cel-python: CEL's standard
  definitions and macros; ``matches`` with RE2, as Kubernetes' cel-go). Transition rules (those
  reading ``oldSelf``) are not evaluated on create, as on the API server. Kubernetes adds library functions a
  plain CEL runtime lacks (``isSorted``, ``quantity``, ``url``, ``ip``, ``cidr``, ``format`` ...): every rule of a
  loaded CRD calling one must be in :data:`NOT_EVALUABLE`, with its reason, or the check fails.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from training_clusters.model.releases import (
    GPU_OPERATOR_CHART,
    KUBEFLOW_TRAINER_CHART,
    KUEUE_CHART,
    MPI_OPERATOR_SHA256,
    MPI_OPERATOR_VERSION,
    HelmChartSpec,
)

from ..conftest import ROOT
from . import helm as _helm
from .helm import as_the_api_server_stores

#: Parsed CRD files, by the hash of their bytes.
SCHEMA_CACHE = ROOT / ".cache" / "crd-schemas"

# --------------------------------------------------------------------------------------------------
# Where the CRDs come from


@dataclass(frozen=True)
class CrdSource:
    """The CRD files of one pinned chart or release manifest, and whether helm must render them first."""

    name: str
    version: str
    folder: str
    """The folder in the chart folder (``<chart>-<version>``)."""
    files: tuple[str, ...]
    """Paths in ``folder`` of the files holding the CRDs of the kinds we apply (others are not loaded)."""
    templated: bool = False
    """The files are chart templates: ``helm template --show-only`` renders them, as the chart installs."""
    spec: HelmChartSpec | None = None
    sha256: str | None = None
    """The digest the single file must have (a release manifest's, as its handler checks it)."""

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


def _chart(spec: HelmChartSpec, files: tuple[str, ...], *, templated: bool) -> CrdSource:
    return CrdSource(
        spec.chart, spec.version, f"{spec.chart}-{spec.version}", files, templated=templated, spec=spec
    )


#: The pinned versions whose CRDs judge our custom resources.
CRD_SOURCES = (
    _chart(
        KUBEFLOW_TRAINER_CHART,
        (
            "templates/crd/trainer.kubeflow.org_clustertrainingruntimes.yaml",
            "templates/crd/trainer.kubeflow.org_trainjobs.yaml",
        ),
        templated=True,
    ),
    _chart(
        KUEUE_CHART,
        tuple(
            f"templates/crd/kueue.x-k8s.io_{plural}.yaml"
            for plural in ("clusterqueues", "localqueues", "resourceflavors", "topologies", "cohorts")
        ),
        templated=True,
    ),
    CrdSource(
        "mpi-operator",
        MPI_OPERATOR_VERSION,
        f"mpi-operator-{MPI_OPERATOR_VERSION}",
        ("mpi-operator.yaml",),
        sha256=MPI_OPERATOR_SHA256[MPI_OPERATOR_VERSION],
    ),
    _chart(GPU_OPERATOR_CHART, ("crds/nvidia.com_clusterpolicies.yaml",), templated=False),
)


def release_manifest(version: str = MPI_OPERATOR_VERSION) -> Path:
    """The MPI Operator's release manifest (what :class:`MpiOperator`'s handler downloads), its bytes checked
    against the digest the construct pins; a skip when this clone has no chart folder."""
    path = _helm.CHARTS / f"mpi-operator-{version}" / "mpi-operator.yaml"
    if not path.is_file():
        pytest.skip(f"release manifest mpi-operator {version} not at hand: {path} is missing")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == MPI_OPERATOR_SHA256[version]
    return path


@functools.cache
def _release_manifest_objects(version: str) -> tuple[dict[str, Any], ...]:
    return tuple(load_manifest_text(release_manifest(version).read_text()))


def release_manifest_objects(version: str = MPI_OPERATOR_VERSION) -> list[dict[str, Any]]:
    """The objects of the MPI Operator's release manifest (parsed once per process; copies)."""
    return copy.deepcopy(list(_release_manifest_objects(version)))


def load_manifest_text(text: str) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML text (C parser when PyYAML has it: the CRDs are megabytes)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [doc for doc in yaml.load_all(text, Loader=loader) if doc]


def _source_documents(source: CrdSource) -> list[dict[str, Any]]:
    """The documents of ``source``'s files (rendered by helm when templated), read from a cache folder keyed
    by the files' bytes once parsed: parsing the megabytes of CRD YAML costs about a second per run."""
    folder = _helm.CHARTS / source.folder
    if not folder.is_dir():
        pytest.skip(f"{source.label} not at hand: {folder} is missing")
    digest = hashlib.sha256(json.dumps([source.folder, source.files, source.templated]).encode())
    for file in source.files:
        content = (folder / file).read_bytes()
        if source.sha256 is not None:
            assert hashlib.sha256(content).hexdigest() == source.sha256, (
                f"{folder / file} is not the pinned one"
            )
        digest.update(content)
    cached = SCHEMA_CACHE / f"{source.folder}-{digest.hexdigest()[:20]}.json"
    if cached.is_file():
        documents: list[dict[str, Any]] = json.loads(cached.read_text())
        return documents
    documents = _parse_documents(source, folder)
    SCHEMA_CACHE.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps(documents))
    partial.rename(cached)
    return documents


def _parse_documents(source: CrdSource, folder: Path) -> list[dict[str, Any]]:
    if not source.templated:
        return [doc for file in source.files for doc in load_manifest_text((folder / file).read_text())]
    assert source.spec is not None
    command = [
        str(_helm.helm()),
        "template",
        source.spec.release,
        str(folder),
        "--namespace",
        source.spec.namespace,
    ]
    for file in source.files:
        command += ["--show-only", file]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return load_manifest_text(done.stdout)


@dataclass(frozen=True)
class CrdSchema:
    """One served version of a CRD: its ``openAPIV3Schema`` and where it comes from."""

    api_version: str
    kind: str
    schema: dict[str, Any]
    source: str
    """``chart version`` of the CRD."""


@functools.cache
def crd_schemas() -> dict[tuple[str, str], CrdSchema]:
    """``(apiVersion, kind)`` -> the schema of every served version of every CRD in :data:`CRD_SOURCES`,
    loaded once per process."""
    schemas: dict[tuple[str, str], CrdSchema] = {}
    for source in CRD_SOURCES:
        for crd in _source_documents(source):
            if crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd["spec"]
            for version in spec["versions"]:
                if version.get("served", True):
                    key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                    schemas[key] = CrdSchema(
                        *key,
                        version["schema"]["openAPIV3Schema"],
                        source.label,
                    )
    return schemas


# --------------------------------------------------------------------------------------------------
# Kubernetes' own schemas (kubernetes-validate)


def kubernetes_schema_versions() -> list[str]:
    """The Kubernetes minor versions whose OpenAPI ``kubernetes-validate`` carries (``1.25`` ...)."""
    kubernetes_validate = pytest.importorskip(
        "kubernetes_validate", reason="pip install -e '.[dev]' (kubernetes-validate)"
    )
    versions = {".".join(v.split(".")[:2]) for v in kubernetes_validate.utils.all_versions()}
    return sorted(versions, key=lambda v: tuple(map(int, v.split("."))))


def kubernetes_schema_version(cluster_version: str) -> str:
    """The version whose OpenAPI judges built-in kinds for a ``cluster_version`` cluster: its own, or the
    nearest one below it that ``kubernetes-validate`` carries."""
    wanted = tuple(map(int, cluster_version.split(".")[:2]))
    at_or_below = [v for v in kubernetes_schema_versions() if tuple(map(int, v.split("."))) <= wanted]
    assert at_or_below, f"kubernetes-validate has no schema at or below Kubernetes {cluster_version}"
    return at_or_below[-1]


def _schema_folder(version: str) -> Path:
    import kubernetes_validate

    return Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{version}.0-local-strict"


@functools.cache
def _registry(version: str) -> Any:
    """Kubernetes ``version``'s definitions (1.4 MB of JSON), read once per process."""
    import referencing

    definitions = json.loads((_schema_folder(version) / "_definitions.json").read_text())
    return referencing.Resource.from_contents(definitions) @ referencing.Registry()


@functools.cache
def _builtin_validator(version: str, api_version: str, kind: str) -> Any:
    """The strict validator of one built-in kind, found as ``kubernetes-validate`` finds it (``apps/v1`` ->
    ``apps-v1``, ``rbac.authorization.k8s.io/v1`` -> ``rbac-v1``), or ``None`` when it has no such kind."""
    import jsonschema

    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = _schema_folder(version) / f"{kind.lower()}-{group_version}.json"
    if not path.is_file():
        return None
    return jsonschema.Draft202012Validator(json.loads(path.read_text()), registry=_registry(version))


def _object_meta_validator(version: str) -> Any:
    """ObjectMeta of Kubernetes ``version``, strict: the root ``metadata`` of a custom resource."""
    return _builtin_validator(version, "meta/v1", "ObjectMeta")


def builtin_problems(doc: dict[str, Any], name: str, version: str) -> list[str]:
    validator = _builtin_validator(version, doc.get("apiVersion", ""), doc.get("kind", ""))
    if validator is None:
        return [f"{name}: no schema for {doc.get('apiVersion')} {doc.get('kind')} in Kubernetes {version}"]
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.path)))
    return [f"{name}: {'.'.join(map(str, e.path))}: {e.message}" for e in errors]


# --------------------------------------------------------------------------------------------------
# CEL rules

#: Rules of the loaded CRDs a plain CEL runtime cannot evaluate, each with the reason (rule text -> why).
#: Kubernetes' CEL environment adds libraries (lists ``isSorted``/``sum``/``indexOf``, ``quantity``, ``url``,
#: ``ip``/``cidr``, ``format``, the strings extension ...) that cel-python does not have; a rule calling one is
#: left to the API server. A rule calling such a function and missing here fails :func:`problems`.
NOT_EVALUABLE: dict[str, str] = {}

#: Functions and macros of CEL itself (the CEL specification's standard definitions), which cel-python has.
_STANDARD_CEL = frozenset(
    {
        "has", "all", "exists", "exists_one", "map", "filter", "size", "matches", "startsWith", "endsWith",
        "contains", "int", "uint", "double", "string", "bytes", "bool", "duration", "timestamp", "type", "dyn",
        "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getMonth", "getHours",
        "getMilliseconds", "getMinutes", "getSeconds",
    }
)  # fmt: skip
_CALL = re.compile(r"(?<![\w'\"])\.?([A-Za-z_]\w*)\s*\(")
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def non_standard_functions(rule: str) -> set[str]:
    """The functions ``rule`` calls that are not CEL's own (string literals ignored)."""
    return {name for name in _CALL.findall(_STRING.sub("''", rule)) if name not in _STANDARD_CEL}


def _is_transition_rule(rule: dict[str, Any]) -> bool:
    return re.search(r"\boldSelf\b", _STRING.sub("''", rule["rule"])) is not None


@functools.cache
def _cel_environment() -> Any:
    """cel-python's environment, its parser's LALR tables kept in the cache folder.

    cel-python builds its Lark parser (one per process) from the grammar it ships, which takes about a second;
    Lark's own ``cache`` keeps the tables, keyed by the grammar and these options. The options are cel-python
    0.5.0's (``celpy/celparser.py``, ``CELParser.__init__``): with another version, its own parser is used.
    """
    celpy = pytest.importorskip("celpy", reason="pip install -e '.[dev]' (cel-python)")
    from celpy import celparser

    if celparser.CELParser.CEL_PARSER is None and importlib.metadata.version("cel-python") == "0.5.0":
        import lark

        SCHEMA_CACHE.mkdir(parents=True, exist_ok=True)
        celparser.CELParser.CEL_PARSER = lark.Lark(
            (Path(celparser.__file__).parent / "cel.lark").read_text(),
            parser="lalr",
            start="expr",
            debug=True,
            g_regex_flags=re.M,
            lexer_callbacks={"IDENT": celparser.CELParser.ambiguous_literals},
            propagate_positions=True,
            maybe_placeholders=False,
            priority="invert",
            tree_class=lark.Tree,
            cache=str(SCHEMA_CACHE / f"cel-python-lark-{lark.__version__}.tables"),
        )
    return celpy.Environment()


@functools.cache
def compiled(rule: str) -> Any:
    """The cel-python program of ``rule`` (compiled once per process)."""
    environment = _cel_environment()
    return environment.program(environment.compile(rule))


def _cel_problem(rule: dict[str, Any], value: Any, where: str) -> str | None:
    """Why ``rule`` refuses ``value`` (the rule's message, or the evaluation error), or ``None``."""
    import celpy

    text = rule["rule"]
    if text in NOT_EVALUABLE:
        return None
    calls = non_standard_functions(text)
    if calls:
        return f"{where}: rule {text!r} calls {sorted(calls)}, which plain CEL lacks, and is not in NOT_EVALUABLE"
    try:
        result = compiled(text).evaluate({"self": celpy.json_to_cel(value)})
    except celpy.CELEvalError as error:
        return f"{where}: rule {text!r} errs: {error.args[0]}"
    if isinstance(result, celpy.CELEvalError):
        return f"{where}: rule {text!r} errs: {result.args[0]}"
    if result is not True and result != celpy.celtypes.BoolType(True):
        return f"{where}: {rule.get('message') or f'failed rule: {text}'}"
    return None


def loaded_rules() -> set[str]:
    """The text of every ``x-kubernetes-validations`` rule of the loaded CRDs."""
    found: set[str] = set()

    def walk(schema: Any) -> None:
        if not isinstance(schema, dict):
            return
        found.update(rule["rule"] for rule in schema.get("x-kubernetes-validations", ()))
        for sub in schema.get("properties", {}).values():
            walk(sub)
        walk(schema.get("items"))
        walk(schema.get("additionalProperties"))

    for crd in crd_schemas().values():
        walk(crd.schema)
    return found


# --------------------------------------------------------------------------------------------------
# The structural-schema check


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
_INT_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _type_problem(value: Any, schema: Mapping[str, Any]) -> str | None:
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
        return None if ok else f"must be an integer or a string, got {value!r}"
    wanted = schema.get("type")
    if wanted is None:
        return None
    ok = isinstance(value, _TYPES[wanted]) and (wanted == "boolean" or not isinstance(value, bool))
    return None if ok else f"must be of type {wanted}, got {type(value).__name__} {value!r}"


def _value_problems(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """The value validations of one node (no recursion): enum, bounds, lengths, pattern, list types."""
    found = []
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"must be one of {schema['enum']}, got {value!r}")
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            found.append(f"must be at most {schema['maxLength']} characters, got {len(value)}")
        if "minLength" in schema and len(value) < schema["minLength"]:
            found.append(f"must be at least {schema['minLength']} characters, got {len(value)}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(f"must match {schema['pattern']!r}, got {value!r}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = _INT_BOUNDS.get(schema.get("format", ""), (None, None))
        low = schema.get("minimum", low)
        high = schema.get("maximum", high)
        if low is not None and (value < low or (schema.get("exclusiveMinimum") and value == low)):
            found.append(
                f"must be {'above' if schema.get('exclusiveMinimum') else 'at least'} {low}, got {value}"
            )
        if high is not None and (value > high or (schema.get("exclusiveMaximum") and value == high)):
            found.append(
                f"must be {'below' if schema.get('exclusiveMaximum') else 'at most'} {high}, got {value}"
            )
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            found.append(f"must have at most {schema['maxItems']} items, got {len(value)}")
        if "minItems" in schema and len(value) < schema["minItems"]:
            found.append(f"must have at least {schema['minItems']} items, got {len(value)}")
        list_type = schema.get("x-kubernetes-list-type")
        keys = (
            [json.dumps(v, sort_keys=True) for v in value]
            if list_type == "set"
            else [
                json.dumps([item.get(k) for k in schema.get("x-kubernetes-list-map-keys", ())])
                for item in value
            ]
            if list_type == "map" and all(isinstance(item, dict) for item in value)
            else []
        )
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            found.append(f"{list_type} list has duplicate entries {repeated}")
    if isinstance(value, dict):
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            found.append(f"must have at most {schema['maxProperties']} entries, got {len(value)}")
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            found.append(f"must have at least {schema['minProperties']} entries, got {len(value)}")
        missing = [name for name in schema.get("required", ()) if name not in value]
        if missing:
            found.append(f"required field(s) missing: {', '.join(missing)}")
    for branch in schema.get("allOf", ()):
        found += _value_problems(value, branch)
    if schema.get("anyOf") and all(_branch_problems(value, b) for b in schema["anyOf"]):
        found.append(f"must match one of {schema['anyOf']}, got {value!r}")
    if schema.get("oneOf") and sum(not _branch_problems(value, b) for b in schema["oneOf"]) != 1:
        found.append(f"must match exactly one of {schema['oneOf']}, got {value!r}")
    if "not" in schema and not _branch_problems(value, schema["not"]):
        found.append(f"must not match {schema['not']}, got {value!r}")
    return found


def _branch_problems(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """A value-validation branch (allOf/anyOf/oneOf/not): no unknown-field checks, as in structural schemas."""
    problem = _type_problem(value, schema)
    return [problem] if problem else _value_problems(value, schema)


def _keeps_unknown(schema: Mapping[str, Any], name: str) -> bool:
    """Whether the API server keeps the field ``name`` that ``schema`` does not declare (else: unknown)."""
    if schema.get("additionalProperties") is True or schema.get("x-kubernetes-preserve-unknown-fields"):
        return True
    return bool(schema.get("x-kubernetes-embedded-resource")) and name in ("apiVersion", "kind", "metadata")


def _walk(value: Any, schema: Mapping[str, Any], path: str, found: list[str]) -> None:
    where = path or "<root>"
    if value is None and schema.get("nullable"):
        return
    problem = _type_problem(value, schema)
    if problem:
        found.append(f"{where}: {problem}")
        return
    found.extend(f"{where}: {p}" for p in _value_problems(value, schema))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            child = f"{path}.{name}" if path else name
            if name in properties:
                _walk(item, properties[name], child, found)
            elif isinstance(extra, dict):
                _walk(item, extra, child, found)
            elif not _keeps_unknown(schema, name):
                found.append(f"{child}: unknown field {name!r}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(item, schema["items"], f"{path}[{index}]", found)
    for rule in schema.get("x-kubernetes-validations", ()):
        if _is_transition_rule(rule) and not rule.get("optionalOldSelf"):
            continue  # judged on update only (Kubernetes "Transition rules")
        cel = _cel_problem(rule, value, where)
        if cel:
            found.append(cel)


def custom_resource_problems(doc: Mapping[str, Any], crd: CrdSchema, version: str) -> list[str]:
    """Why the API server would refuse ``doc`` (a custom resource of ``crd``) on create, or ``[]``."""
    stored = as_the_api_server_stores(dict(doc), crd.schema)
    metadata = stored.get("metadata", {})
    found = [
        f"{'.'.join(['metadata', *map(str, e.path)])}: {e.message}"
        for e in _object_meta_validator(version).iter_errors(metadata)
    ]
    # the API server validates the root with ObjectMeta; the CRD's rules see only name and generateName there
    root = {**stored, "metadata": {k: v for k, v in metadata.items() if k in ("name", "generateName")}}
    own_metadata = crd.schema.get("properties", {}).get("metadata", {"type": "object"})
    metadata_schema = {**own_metadata, "x-kubernetes-preserve-unknown-fields": True}
    schema = {
        **crd.schema,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            **crd.schema.get("properties", {}),
            "metadata": metadata_schema,
        },
    }
    _walk(root, schema, "", found)
    return found


# --------------------------------------------------------------------------------------------------
# The entry point


@dataclass(frozen=True)
class Judged:
    """What judged one object: ``Kubernetes 1.33`` or ``kueue 0.19.2``."""

    name: str
    schema: str


def problems(docs: Iterable[Mapping[str, Any]], cluster_version: str) -> tuple[list[str], list[Judged]]:
    """``kind/name: where: why`` for each object the cluster's API server would refuse (or whose kind has no
    schema here), and what judged each object."""
    version = kubernetes_schema_version(cluster_version)
    crds = crd_schemas()
    found: list[str] = []
    judged: list[Judged] = []
    for doc in docs:
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        key = (doc.get("apiVersion", ""), doc.get("kind", ""))
        if key in crds:
            found += [f"{name}: {p}" for p in custom_resource_problems(doc, crds[key], version)]
            judged.append(Judged(name, f"{crds[key].source} ({key[0]})"))
        else:
            found += builtin_problems(dict(doc), name, version)
            judged.append(Judged(name, f"Kubernetes {version}"))
    return found, judged
