"""Every chart the EKS stacks install, rendered by the real helm with the values the stacks give it: every
object it makes is valid for the cluster's Kubernetes version (built-in kinds by ``kubernetes-validate``,
custom kinds by the CRDs the charts carry)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from training_clusters.constructs.eks.addons import (
    efa_device_plugin_values,
    gpu_operator_values,
    kube_prometheus_stack_values,
    neuron_device_plugin_values,
    nvidia_device_plugin_values,
)
from training_clusters.constructs.eks.scheduling import kubeflow_trainer_values, kueue_values
from training_clusters.model.options import TimeSlicing
from training_clusters.model.releases import (
    EFA_DEVICE_PLUGIN_CHART,
    EFA_DEVICE_PLUGIN_REPOSITORY,
    GPU_OPERATOR_CHART,
    KUBE_PROMETHEUS_STACK_CHART,
    KUBEFLOW_TRAINER_CHART,
    KUEUE_CHART,
    NEURON_HELM_CHART,
    NVIDIA_DEVICE_PLUGIN_CHART,
    HelmChartSpec,
    eks_registry,
)

from .helm import as_the_api_server_stores, crd_schemas, render, validation_problems

pytestmark = pytest.mark.integration

CHARTS: dict[str, tuple[HelmChartSpec, Callable[[], dict[str, Any]]]] = {
    "nvidia-device-plugin": (
        NVIDIA_DEVICE_PLUGIN_CHART,
        lambda: nvidia_device_plugin_values(
            instance_types=["g5.2xlarge"], time_slicing=TimeSlicing(replicas=10)
        ),
    ),
    "aws-efa-k8s-device-plugin": (
        EFA_DEVICE_PLUGIN_CHART,
        lambda: efa_device_plugin_values(
            instance_types=["p5.48xlarge"],
            image_repository=f"{eks_registry('us-east-1')}/{EFA_DEVICE_PLUGIN_REPOSITORY}",
        ),
    ),
    "neuron-helm-chart": (
        NEURON_HELM_CHART,
        lambda: neuron_device_plugin_values(instance_types=["trn1.32xlarge"]),
    ),
    "gpu-operator": (GPU_OPERATOR_CHART, lambda: gpu_operator_values(service_monitor=True)),
    "kube-prometheus-stack": (
        KUBE_PROMETHEUS_STACK_CHART,
        lambda: kube_prometheus_stack_values(grafana=True, storage_class="gp3"),
    ),
    "kueue": (KUEUE_CHART, kueue_values),
    "kubeflow-trainer": (KUBEFLOW_TRAINER_CHART, kubeflow_trainer_values),
}


@pytest.mark.parametrize("chart", list(CHARTS))
def test_every_object_the_chart_renders_is_valid_for_the_clusters_kubernetes(
    chart: str, tmp_path: Path
) -> None:
    spec, values = CHARTS[chart]
    rendered = render(spec, values(), tmp_path, include_crds=True)
    assert rendered
    assert validation_problems(rendered, crd_schemas(rendered)) == []


def test_custom_resources_are_checked_as_the_api_server_stores_them() -> None:
    """Nulls of non-nullable fields dropped and defaults applied before the schema's ``required``."""
    schema = {
        "type": "object",
        "required": ["mode"],
        "properties": {
            "mode": {"type": "string", "default": "auto"},
            "name": {"type": "string"},
            "note": {"type": "string", "nullable": True},
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}},
            },
        },
    }
    stored = as_the_api_server_stores({"name": None, "note": None, "items": [{}]}, schema)
    assert stored == {"note": None, "items": [{"n": 1}], "mode": "auto"}
