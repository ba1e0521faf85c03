"""The NodePools Karpenter autoscaling applies, judged by Karpenter's own ``karpenter.sh/v1`` NodePool CRD, with its
CEL rules (:func:`tests.charts.schemas.custom_resource_problems`), at the first v1 release and a recent one.

HyperPod runs Karpenter itself and does not say which release, so the NodePool must pass both. The CRD is
aws/karpenter-provider-aws's ``pkg/apis/crds/karpenter.sh_nodepools.yaml`` at the tag, which the ``karpenter``
chart ships as ``crds/karpenter.sh_nodepools.yaml`` (oci://public.ecr.aws/karpenter/karpenter). No chart of
ours installs Karpenter (HyperPod runs it), so the two files are kept here as test data, unchanged
(``tests/charts/crds/karpenter-<version>/``, aws/karpenter-provider-aws, Apache License 2.0), their bytes
checked against the digests below.

The ``HyperpodNodeClass`` kind (``karpenter.sagemaker.amazonaws.com/v1``) has no published CRD: HyperPod installs
it. Its objects are checked against AWS's documented examples instead
(tests/constructs/test_hyperpod_eks_autoscaling.py).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from training_clusters.config import load_environment
from training_clusters.constructs.eks.cluster import KUBERNETES_VERSION
from training_clusters.constructs.hyperpod_eks.autoscaling import node_pool_manifest
from training_clusters.constructs.hyperpod_eks.cluster import karpenter_node_pool
from training_clusters.stacks.hyperpod_eks import _instance_group

from ..conftest import ROOT
from . import helm, schemas

#: Karpenter releases -> SHA-256 of their NodePool CRD file.
NODE_POOL_CRDS = {
    "1.0.0": "e2ef55b720c13f6ff10abe6e8374524553df02b46e49c18330d67ac5e3431f8f",
    "1.14.1": "3bb64a20c80776b77aa19a699ebdaf34480a7b2e7ec4ef890b43225b3517f878",
}
ENVIRONMENT = ROOT / "environments" / "hyperpod-eks-autoscaling.yaml"


def node_pool_crd(version: str) -> schemas.CrdSchema:
    path: Path = Path(__file__).parent / "crds" / f"karpenter-{version}" / "karpenter.sh_nodepools.yaml"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == NODE_POOL_CRDS[version]
    (crd,) = [d for d in yaml.load_all(path.read_text(), Loader=helm._ManifestLoader) if d]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return schemas.CrdSchema(
        "karpenter.sh/v1", "NodePool", served["schema"]["openAPIV3Schema"], f"karpenter {version}"
    )


def _find(value: Any, pattern: Any) -> Any:
    """Kubernetes' CEL regex library ``find``: the first match of ``pattern`` in ``value``, or ``""``
    (k8s.io/apiserver/pkg/cel/library/regex.go); the NodePool CRD's label-domain rules call it."""
    import celpy

    found = re.search(str(pattern), str(value))
    return celpy.celtypes.StringType(found.group(0) if found else "")


@pytest.fixture(autouse=True)
def with_find(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared CEL evaluation, with ``find`` added (the one Kubernetes function these CRDs call)."""
    standard = schemas.non_standard_functions

    @functools.cache
    def compiled(rule: str) -> Any:
        environment = schemas._cel_environment()
        return environment.program(environment.compile(rule), functions={"find": _find})

    def non_standard(rule: str) -> set[str]:
        return standard(rule) - {"find"}

    monkeypatch.setattr(schemas, "compiled", compiled)
    monkeypatch.setattr(schemas, "non_standard_functions", non_standard)


def shipped_node_pools() -> list[dict[str, Any]]:
    spec = load_environment(ENVIRONMENT).hyperpod_eks
    assert spec is not None
    return [karpenter_node_pool(_instance_group(g)) for g in spec.instance_groups]


@pytest.mark.parametrize("version", sorted(NODE_POOL_CRDS))
def test_the_shipped_node_pools_pass_karpenters_crd(version: str) -> None:
    crd = node_pool_crd(version)
    pools = shipped_node_pools()
    assert [p["metadata"]["name"] for p in pools] == ["g5", "p4d"]
    for pool in pools:
        assert schemas.custom_resource_problems(pool, crd, KUBERNETES_VERSION) == []


@pytest.mark.parametrize("version", sorted(NODE_POOL_CRDS))
def test_the_crd_would_refuse_a_broken_node_pool(version: str) -> None:
    """The judge can fail: a requirement operator Karpenter does not know, and a limit that is no quantity."""
    crd = node_pool_crd(version)
    pool = node_pool_manifest("g5", instance_type="ml.g5.8xlarge", max_nodes=1, vcpus=32, labels={})
    pool["spec"]["template"]["spec"]["requirements"][0]["operator"] = "Among"
    pool["spec"]["limits"]["cpu"] = "many"
    found = schemas.custom_resource_problems(pool, crd, KUBERNETES_VERSION)
    assert any("operator" in p for p in found), found
    assert any("limits" in p for p in found), found


@pytest.mark.parametrize("version", sorted(NODE_POOL_CRDS))
def test_the_crd_refuses_a_label_in_karpenters_own_domain(version: str) -> None:
    """The label-domain rules (which call ``find``) are evaluated, not skipped: ours pass, Karpenter's own fail."""
    crd = node_pool_crd(version)
    make: Callable[[dict[str, str]], dict[str, Any]] = lambda labels: node_pool_manifest(  # noqa: E731
        "g5", instance_type="ml.g5.8xlarge", max_nodes=1, vcpus=32, labels=labels
    )
    assert (
        schemas.custom_resource_problems(make({"training-clusters/pool": "g5"}), crd, KUBERNETES_VERSION)
        == []
    )
    found = schemas.custom_resource_problems(make({"karpenter.sh/pool": "g5"}), crd, KUBERNETES_VERSION)
    assert [p for p in found if p.startswith("spec.template.metadata.labels")], found
