"""Our add-on values through the real pinned charts and the real helm: what the cluster would receive."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from training_clusters.constructs.eks_addons import efa_device_plugin_values, kube_prometheus_stack_values
from training_clusters.releases import (
    EFA_DEVICE_PLUGIN_CHART,
    EFA_DEVICE_PLUGIN_IMAGE_TAG,
    KUBE_PROMETHEUS_STACK_CHART,
)

from .helm import objects, render

pytestmark = pytest.mark.integration

_CONTROL_PLANE = ("kube-controller-manager", "kube-scheduler", "kube-etcd", "etcd")


def test_kube_prometheus_stack_leaves_the_eks_control_plane_alone(tmp_path: Path) -> None:
    """No ServiceMonitor, Service or rule group for components EKS runs out of the cluster's reach."""
    ours = render(KUBE_PROMETHEUS_STACK_CHART, kube_prometheus_stack_values(grafana=True), tmp_path)
    names = {(doc["kind"], doc["metadata"]["name"]) for doc in ours}
    touching = sorted(name for name in names if any(part in name[1] for part in _CONTROL_PLANE))
    assert touching == []
    rules = objects(ours, "PrometheusRule")
    assert "kube-prometheus-stack-kubernetes-system-kubelet" in rules  # the nodes' own: kept
    # the chart's defaults would alert on all of them: the test sees what it claims to remove
    defaults = render(KUBE_PROMETHEUS_STACK_CHART, {}, tmp_path)
    default_names = {doc["metadata"]["name"] for doc in defaults}
    assert {
        "kube-prometheus-stack-kube-controller-manager",
        "kube-prometheus-stack-kube-scheduler",
        "kube-prometheus-stack-kube-etcd",
        "kube-prometheus-stack-kubernetes-system-controller-manager",
        "kube-prometheus-stack-kubernetes-system-scheduler",
        "kube-prometheus-stack-etcd",
    } <= default_names


def test_grafana_admin_password_is_generated(tmp_path: Path) -> None:
    rendered = render(KUBE_PROMETHEUS_STACK_CHART, kube_prometheus_stack_values(grafana=True), tmp_path)
    secret = objects(rendered, "Secret")["kube-prometheus-stack-grafana"]
    password = base64.b64decode(secret["data"]["admin-password"]).decode()
    assert len(password) >= 20 and password not in ("prom-operator", "admin", "strongpassword")


def test_efa_device_plugin_runs_our_image_from_our_region_on_our_types(tmp_path: Path) -> None:
    repository = "877085696533.dkr.ecr.af-south-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"
    values = efa_device_plugin_values(instance_types=["p5en.48xlarge"], image_repository=repository)
    daemonset = objects(render(EFA_DEVICE_PLUGIN_CHART, values, tmp_path), "DaemonSet")[
        "aws-efa-k8s-device-plugin"
    ]
    pod = daemonset["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["containers"]] == [f"{repository}:{EFA_DEVICE_PLUGIN_IMAGE_TAG}"]
    required = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5en.48xlarge"]},
                # the chart's own: EKS Auto Mode nodes bring their own plugin
                {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["auto"]},
            ]
        }
    ]
