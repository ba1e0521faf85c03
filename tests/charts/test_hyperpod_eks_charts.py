"""The device plugins' real charts, rendered by the real helm with the values HyperPod's nodes get, schedule
their DaemonSets onto an ``ml.`` node that carries HyperPod's health taint (and not onto an EC2-named node, nor
past a taint they do not tolerate). helm and the pinned charts as :mod:`tests.charts.helm` finds them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from training_clusters.constructs.eks.scheduling import kubeflow_trainer_values, nodegroup_capacity
from training_clusters.constructs.hyperpod_eks.cluster import (
    EksInstanceGroup,
    KubernetesTaint,
    hyperpod_efa_device_plugin_values,
    hyperpod_neuron_device_plugin_values,
    hyperpod_nvidia_device_plugin_values,
    kubernetes_config,
    node_pool,
)
from training_clusters.model.releases import (
    DEFAULT_NCCL_TESTS_IMAGE,
    EFA_DEVICE_PLUGIN_CHART,
    KUBEFLOW_TRAINER_CHART,
    NEURON_HELM_CHART,
    NVIDIA_DEVICE_PLUGIN_CHART,
    PYTORCH_EFA_IMAGE,
)
from training_clusters.workloads.scheduling import runtime_manifests

from .helm import crd_schemas, objects, render, validation_problems

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


def test_the_neuron_device_plugin_lands_on_an_ml_trainium_node_with_the_health_taint(tmp_path: Path) -> None:
    trn = "ml.trn1.32xlarge"
    documents = render(NEURON_HELM_CHART, hyperpod_neuron_device_plugin_values([trn]), tmp_path)
    plugin = _daemon_sets(documents)["neuron-device-plugin"]
    assert schedulable(plugin, _node(trn, HEALTH_TAINT))
    assert schedulable(
        plugin, _node(trn, {"key": "aws.amazon.com/neuron", "value": "", "effect": "NoSchedule"})
    )
    assert not schedulable(plugin, _node("trn1.32xlarge"))
    assert not schedulable(plugin, _node(trn, {"key": "dedicated", "value": "x", "effect": "NoSchedule"}))


# --------------------------------------------------------------------------------------------------
# Kubeflow Trainer on HyperPod's nodes: its runtimes select a group's Schedulable nodes

HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
P5 = EksInstanceGroup(
    name="p5",
    instance_type="ml.p5.48xlarge",
    instance_count=2,
    volume_gib=1000,
    taints=[KubernetesTaint(key="nvidia.com/gpu", value="true")],
)


def _hyperpod_node(group: EksInstanceGroup, health: str, *taints: dict[str, str]) -> dict[str, Any]:
    """A node of ``group`` as HyperPod makes it: its ``KubernetesConfig`` labels and taints, the ``ml.`` type,
    the health label."""
    config = kubernetes_config(group)
    group_taints = [
        {"key": t["Key"], "value": t.get("Value", ""), "effect": t["Effect"]}
        for t in config.get("Taints", [])
    ]
    labels = {**config["Labels"], INSTANCE_TYPE: group.instance_type, HEALTH_LABEL: health}
    return {"labels": labels, "taints": [*group_taints, *taints]}


def _node_pods(runtimes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        job["template"]["spec"]["template"]["spec"]
        for runtime in runtimes
        for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]
        if job["name"] == "node"
    ]


def _runtimes(pool_ready: bool = True) -> list[dict[str, Any]]:
    pool = node_pool(P5)
    capacity = nodegroup_capacity("p5", pool if pool_ready else replace(pool, ready_labels={}))
    return runtime_manifests(
        [capacity], torchrun_image=PYTORCH_EFA_IMAGE.reference, mpi_image=DEFAULT_NCCL_TESTS_IMAGE
    )


def test_trainer_renders_and_its_runtimes_for_a_hyperpod_group_are_valid(tmp_path: Path) -> None:
    rendered = render(KUBEFLOW_TRAINER_CHART, kubeflow_trainer_values(), tmp_path, include_crds=True)
    assert validation_problems(rendered, crd_schemas(rendered)) == []
    assert set(objects(rendered, "Deployment")) == {
        "kubeflow-trainer-controller-manager",
        "jobset-controller",
    }
    runtimes = _runtimes()
    assert [r["metadata"]["name"] for r in runtimes] == ["torchrun-efa-p5", "mpi-efa-p5"]
    assert validation_problems(runtimes, crd_schemas(rendered)) == []


def test_runtimes_land_only_on_the_groups_schedulable_nodes() -> None:
    healthy = _hyperpod_node(P5, "Schedulable")
    checking = _hyperpod_node(P5, "Unschedulable", HEALTH_TAINT)  # deep health checks running
    rebooting = _hyperpod_node(P5, "UnschedulablePendingReboot")
    replacing = _hyperpod_node(P5, "UnschedulablePendingReplacement")
    other = _hyperpod_node(replace(P5, name="p5-spare"), "Schedulable")
    for pod in _node_pods(_runtimes()):
        assert schedulable(pod, healthy)
        assert not schedulable(pod, checking)
        assert not schedulable(pod, rebooting)
        assert not schedulable(pod, replacing)
        assert not schedulable(pod, other)  # another group of the same type: its own name label
        assert not schedulable(pod, _node("ml.p5.48xlarge"))  # an ml. node without the group's label


def test_without_the_ready_label_a_node_awaiting_repair_would_take_training_pods() -> None:
    """The negative: the health label, not a taint, is what keeps them off a node HyperPod will reboot."""
    rebooting = _hyperpod_node(P5, "UnschedulablePendingReboot")
    for pod in _node_pods(_runtimes(pool_ready=False)):
        assert schedulable(pod, rebooting)
