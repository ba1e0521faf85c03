"""The device plugins' real charts, rendered by the real helm with the values HyperPod's nodes get, schedule
their DaemonSets onto an ``ml.`` node that carries HyperPod's health taint (and not onto an EC2-named node, nor
past a taint they do not tolerate). helm and the pinned charts as :mod:`tests.charts.helm` finds them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from training_clusters.constructs.hyperpod_eks import (
    hyperpod_efa_device_plugin_values,
    hyperpod_nvidia_device_plugin_values,
)
from training_clusters.releases import EFA_DEVICE_PLUGIN_CHART, NVIDIA_DEVICE_PLUGIN_CHART

from .helm import render

pytestmark = pytest.mark.integration

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
HEALTH_TAINT = {
    "key": "sagemaker.amazonaws.com/node-health-status",
    "value": "Unschedulable",
    "effect": "NoSchedule",
}
EFA_REPOSITORY = "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"


def schedulable(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    """Whether the scheduler may place ``pod`` (a pod spec) on ``node``: its nodeSelector, required node affinity
    (In, NotIn, Exists, DoesNotExist), and a toleration for each NoSchedule / NoExecute taint."""
    labels: dict[str, str] = node["labels"]
    if any(labels.get(k) != v for k, v in (pod.get("nodeSelector") or {}).items()):
        return False
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required and not any(_term_matches(term, labels) for term in required["nodeSelectorTerms"]):
        return False
    tolerations = pod.get("tolerations") or []
    return all(
        any(_tolerates(t, taint) for t in tolerations)
        for taint in node["taints"]
        if taint["effect"] in ("NoSchedule", "NoExecute")
    )


def _term_matches(term: dict[str, Any], labels: dict[str, str]) -> bool:
    for expression in term.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _tolerates(toleration: dict[str, Any], taint: dict[str, str]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return toleration.get("key") in (None, "", taint["key"])
    return toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get("value", "")


def _node(instance_type: str, *taints: dict[str, str]) -> dict[str, Any]:
    return {"labels": {INSTANCE_TYPE: instance_type, "kubernetes.io/os": "linux"}, "taints": list(taints)}


def _daemon_sets(documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in documents if d["kind"] == "DaemonSet"
    }


UNHEALTHY_ML = _node("ml.g5.8xlarge", HEALTH_TAINT)
HEALTHY_ML = _node("ml.g5.8xlarge")
EC2_NAMED = _node("g5.8xlarge")
OTHER_TAINT = _node("ml.g5.8xlarge", {"key": "dedicated", "value": "x", "effect": "NoSchedule"})


def test_the_nvidia_device_plugin_lands_on_an_ml_node_with_the_health_taint(tmp_path: Path) -> None:
    documents = render(
        NVIDIA_DEVICE_PLUGIN_CHART, hyperpod_nvidia_device_plugin_values(["ml.g5.8xlarge"]), tmp_path
    )
    plugin = _daemon_sets(documents)["nvidia-device-plugin"]
    assert schedulable(plugin, UNHEALTHY_ML)
    assert schedulable(plugin, HEALTHY_ML)
    assert not schedulable(plugin, EC2_NAMED)  # the ml. name is what HyperPod's nodes carry
    assert not schedulable(plugin, OTHER_TAINT)  # only the tolerated taints


def test_without_the_health_toleration_the_unhealthy_node_is_skipped(tmp_path: Path) -> None:
    """The negative: the plugin's EKS values (no HyperPod toleration) do not reach the tainted node."""
    values = hyperpod_nvidia_device_plugin_values(["ml.g5.8xlarge"])
    values["tolerations"] = values["tolerations"][:-1]
    plugin = _daemon_sets(render(NVIDIA_DEVICE_PLUGIN_CHART, values, tmp_path))["nvidia-device-plugin"]
    assert not schedulable(plugin, UNHEALTHY_ML)
    assert schedulable(plugin, HEALTHY_ML)


def test_the_efa_device_plugin_lands_on_an_ml_node_with_the_health_taint(tmp_path: Path) -> None:
    documents = render(
        EFA_DEVICE_PLUGIN_CHART,
        hyperpod_efa_device_plugin_values(["ml.g5.8xlarge"], EFA_REPOSITORY),
        tmp_path,
    )
    (plugin,) = _daemon_sets(documents).values()
    assert schedulable(plugin, UNHEALTHY_ML)
    assert not schedulable(plugin, EC2_NAMED)
    assert not schedulable(plugin, OTHER_TAINT)
