"""Our add-on values through the real pinned charts and the real helm: what the cluster would receive."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from training_clusters.catalog import lookup
from training_clusters.constructs.eks.addons import (
    device_plugin_node_labels,
    efa_device_plugin_values,
    gpu_operator_values,
    kube_prometheus_stack_values,
    nvidia_device_plugin_values,
)
from training_clusters.model.options import MigStrategy, Mps
from training_clusters.model.releases import (
    BUSYBOX_IMAGE,
    DCGM_IMAGE,
    EFA_DEVICE_PLUGIN_CHART,
    EFA_DEVICE_PLUGIN_IMAGE_TAG,
    GPU_OPERATOR_CHART,
    KUBE_PROMETHEUS_STACK_CHART,
    NVIDIA_DEVICE_PLUGIN_CHART,
)
from training_clusters.monitoring.cloudwatch import CLOUDWATCH_DATASOURCE_UID, GRAFANA_SERVICE_ACCOUNT
from training_clusters.monitoring.dashboards import dashboard_configmaps, fsx_throughput
from training_clusters.workloads.tenancy import monitoring_ingress

from .helm import chart_dir, objects, render

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


def _alerts(rendered: list[dict[str, Any]]) -> set[str]:
    return {
        rule["alert"]
        for doc in objects(rendered, "PrometheusRule").values()
        for group in doc["spec"]["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }


def test_kube_prometheus_stack_neither_scrapes_nor_alerts_on_kube_proxy(tmp_path: Path) -> None:
    """EKS's kube-proxy serves metrics on 127.0.0.1:10249 only: no scrape, so no KubeProxyDown forever."""
    ours = render(KUBE_PROMETHEUS_STACK_CHART, kube_prometheus_stack_values(grafana=True), tmp_path)
    assert (
        sorted(
            (doc["kind"], doc["metadata"]["name"]) for doc in ours if "kube-proxy" in doc["metadata"]["name"]
        )
        == []
    )
    assert "KubeProxyDown" not in _alerts(ours)
    assert "KubeletDown" in _alerts(ours)  # the nodes' own alerts stay
    # the chart's defaults scrape it and alert: the test sees what it claims to remove
    defaults = render(KUBE_PROMETHEUS_STACK_CHART, {}, tmp_path)
    assert "KubeProxyDown" in _alerts(defaults)
    assert "kube-prometheus-stack-kube-proxy" in objects(defaults, "ServiceMonitor")
    assert "kube-prometheus-stack-kube-proxy" in objects(defaults, "Service")


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


def _cluster_policy(tmp_path: Path, values: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rendered = render(GPU_OPERATOR_CHART, values, tmp_path)
    policies = objects(rendered, "ClusterPolicy")
    assert list(policies) == ["cluster-policy"]
    return policies["cluster-policy"]["spec"], rendered


def test_dcgm_exporter_reads_our_metric_list_from_the_configmap_the_chart_makes(tmp_path: Path) -> None:
    spec, rendered = _cluster_policy(tmp_path, gpu_operator_values(service_monitor=True))
    assert spec["dcgmExporter"]["config"] == {"name": "training-clusters-dcgm-metrics"}
    configmap = objects(rendered, "ConfigMap")["training-clusters-dcgm-metrics"]
    assert configmap["metadata"]["namespace"] == "gpu-operator"
    csv_text = configmap["data"]["dcgm-metrics.csv"]
    active = [line.split(",")[0] for line in csv_text.splitlines() if line and not line.startswith("#")]
    assert "DCGM_FI_PROF_SM_ACTIVE" in active and "DCGM_FI_DEV_XID_ERRORS" in active


def test_dcgm_service_monitor_relabels_the_node_in_the_crds_spelling(tmp_path: Path) -> None:
    spec, _ = _cluster_policy(tmp_path, gpu_operator_values(service_monitor=True))
    monitor = spec["dcgmExporter"]["serviceMonitor"]
    assert monitor["enabled"] is True
    assert [(r["sourceLabels"], r["targetLabel"]) for r in monitor["relabelings"]] == [
        (["__meta_kubernetes_pod_node_name"], "node"),
        (["__meta_kubernetes_pod_node_name"], "instance"),
    ]
    # every key is one the ClusterPolicy CRD's RelabelConfig declares (the chart's comment spells them
    # snake_case, which the API server would prune)
    crd = yaml.safe_load(
        (chart_dir(GPU_OPERATOR_CHART) / "crds" / "nvidia.com_clusterpolicies.yaml").read_text()
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    relabel = schema["dcgmExporter"]["properties"]["serviceMonitor"]["properties"]["relabelings"]["items"]
    for rule in monitor["relabelings"]:
        assert set(rule) <= set(relabel["properties"])


def test_the_mig_manager_runs_only_when_a_nodegroup_asks(tmp_path: Path) -> None:
    spec, rendered = _cluster_policy(tmp_path, gpu_operator_values(service_monitor=True))
    assert spec["migManager"]["enabled"] is False
    assert "training-clusters-mig-parted-config" not in objects(rendered, "ConfigMap")
    # the chart's own default would run it: the test sees what it turns off
    default, _ = _cluster_policy(tmp_path, {"driver": {"enabled": False}})
    assert default["migManager"]["enabled"] is True


def test_each_nodegroup_layout_reaches_the_mig_manager_by_its_label_value(tmp_path: Path) -> None:
    layouts = {"all-1g.10gb": {"1g.10gb": 4}, "custom-mixed": {"3g.40gb": 1, "4g.40gb": 1}}
    values = gpu_operator_values(service_monitor=True, mig_layouts=layouts, mig_strategy=MigStrategy.MIXED)
    spec, rendered = _cluster_policy(tmp_path, values)
    assert spec["migManager"]["enabled"] is True
    assert spec["migManager"]["config"] == {
        "name": "training-clusters-mig-parted-config",
        "default": "all-disabled",
    }
    assert spec["mig"] == {"strategy": "mixed"}
    configmap = objects(rendered, "ConfigMap")["training-clusters-mig-parted-config"]
    configs = yaml.safe_load(configmap["data"]["config.yaml"])["mig-configs"]
    assert configs == {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 4}}],
        "custom-mixed": [
            {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "4g.40gb": 1}}
        ],
    }


def test_the_device_plugin_advertises_mig_by_its_strategy_once_nodes_are_partitioned(tmp_path: Path) -> None:
    values = nvidia_device_plugin_values(instance_types=["p4d.24xlarge"], mig_strategy=MigStrategy.MIXED)
    rendered = render(NVIDIA_DEVICE_PLUGIN_CHART, values, tmp_path)
    config = yaml.safe_load(objects(rendered, "ConfigMap")["nvidia-device-plugin-configs"]["data"]["default"])
    assert config["flags"]["migStrategy"] == "mixed"
    daemonset = objects(rendered, "DaemonSet")["nvidia-device-plugin"]
    terms = daemonset["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert [expression["key"] for term in terms for expression in term["matchExpressions"]] == [
        "node.kubernetes.io/instance-type",
        "nvidia.com/mig.config",
        "node.kubernetes.io/instance-type",
        "nvidia.com/mig.config.state",
    ]


def test_the_mps_control_daemon_runs_on_the_nodes_we_label_mps_capable(tmp_path: Path) -> None:
    """With MPS, the chart's control daemon runs where the nodegroups carry ``nvidia.com/mps.capable=true``
    (:func:`device_plugin_node_labels`), on our instance types, and shares the plugin's MPS config."""
    values = nvidia_device_plugin_values(instance_types=["g5.2xlarge"], mps=Mps(replicas=4))
    rendered = render(NVIDIA_DEVICE_PLUGIN_CHART, values, tmp_path)
    daemons = objects(rendered, "DaemonSet")
    pod = daemons["nvidia-device-plugin-mps-control-daemon"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == device_plugin_node_labels(lookup("g5.2xlarge"), mps=Mps(replicas=4))
    assert pod["affinity"] == daemons["nvidia-device-plugin"]["spec"]["template"]["spec"]["affinity"]
    config = yaml.safe_load(objects(rendered, "ConfigMap")["nvidia-device-plugin-configs"]["data"]["default"])
    assert config["sharing"] == {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}


def test_node_exporter_runs_the_efa_sidecar_and_reads_its_directory(tmp_path: Path) -> None:
    rendered = render(KUBE_PROMETHEUS_STACK_CHART, kube_prometheus_stack_values(grafana=True), tmp_path)
    pod = objects(rendered, "DaemonSet")["kube-prometheus-stack-prometheus-node-exporter"]["spec"][
        "template"
    ]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    exporter, sidecar = containers["node-exporter"], containers["efa-counters"]
    assert "--collector.textfile.directory=/run/efa-textfile" in exporter["args"]
    assert {"name": "efa-textfile", "mountPath": "/run/efa-textfile", "readOnly": True} in exporter[
        "volumeMounts"
    ]
    assert sidecar["image"] == BUSYBOX_IMAGE
    assert {(m["name"], m["mountPath"], m.get("readOnly")) for m in sidecar["volumeMounts"]} == {
        ("efa-textfile", "/run/efa-textfile", False),
        ("efa-host-sys", "/host/sys", True),
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["efa-textfile"] == {"name": "efa-textfile", "emptyDir": {"medium": "Memory"}}
    assert volumes["efa-host-sys"]["hostPath"] == {"path": "/sys"}
    monitor = objects(rendered, "ServiceMonitor")["kube-prometheus-stack-prometheus-node-exporter"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert {
        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
        "targetLabel": "node",
        "action": "replace",
    } in (endpoint["relabelings"])


def test_grafanas_sidecar_loads_configmaps_labelled_as_ours_from_every_namespace(tmp_path: Path) -> None:
    rendered = render(KUBE_PROMETHEUS_STACK_CHART, kube_prometheus_stack_values(grafana=True), tmp_path)
    pod = objects(rendered, "Deployment")["kube-prometheus-stack-grafana"]["spec"]["template"]["spec"]
    (sidecar,) = (c for c in pod["containers"] if c["name"] == "grafana-sc-dashboard")
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    (ours,) = {tuple(m["metadata"]["labels"].items()) for m in dashboard_configmaps("monitoring")}
    assert (env["LABEL"], env["LABEL_VALUE"]) == ours[0]
    assert env["NAMESPACE"] == "ALL" and env["RESOURCE"] == "both"


def test_the_dcgm_acceptance_image_is_the_one_the_pinned_operator_runs() -> None:
    values = yaml.safe_load((chart_dir(GPU_OPERATOR_CHART) / "values.yaml").read_text())["dcgm"]
    assert f"{values['repository']}/{values['image']}:{values['version']}" == DCGM_IMAGE


def test_grafana_runs_as_the_pod_identity_service_account_with_our_cloudwatch_data_source(
    tmp_path: Path,
) -> None:
    """The association names the namespace and service account the chart renders; the data source the chart
    provisions is ours, on the AWS SDK's default credentials, and is the one the FSx dashboard's panels name."""
    values = kube_prometheus_stack_values(grafana=True, cloudwatch_region="eu-west-1")
    rendered = render(KUBE_PROMETHEUS_STACK_CHART, values, tmp_path)
    (account,) = (
        doc
        for doc in objects(rendered, "ServiceAccount").values()
        if doc["metadata"]["name"].endswith("grafana")
    )
    assert (account["metadata"]["namespace"], account["metadata"]["name"]) == (
        KUBE_PROMETHEUS_STACK_CHART.namespace,
        GRAFANA_SERVICE_ACCOUNT,
    )
    deployment = objects(rendered, "Deployment")["kube-prometheus-stack-grafana"]
    assert deployment["metadata"]["namespace"] == KUBE_PROMETHEUS_STACK_CHART.namespace
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == GRAFANA_SERVICE_ACCOUNT
    provisioning = objects(rendered, "ConfigMap")["kube-prometheus-stack-grafana-datasource"]
    (text,) = provisioning["data"].values()
    sources = {d["uid"]: d for d in yaml.safe_load(text)["datasources"]}
    assert sources[CLOUDWATCH_DATASOURCE_UID] == {
        "name": "CloudWatch",
        "type": "cloudwatch",
        "uid": CLOUDWATCH_DATASOURCE_UID,
        "access": "proxy",
        "editable": False,
        "jsonData": {"authType": "default", "defaultRegion": "eu-west-1"},
    }
    assert sources["prometheus"]["type"] == "prometheus"  # the chart's own stays
    fsx = fsx_throughput("fs-0123456789abcdef0")
    assert {t["datasource"]["uid"] for p in fsx["panels"] for t in p["targets"]} == {
        CLOUDWATCH_DATASOURCE_UID
    }
    # without a file system: no CloudWatch data source
    plain = render(KUBE_PROMETHEUS_STACK_CHART, kube_prometheus_stack_values(grafana=True), tmp_path)
    (text,) = objects(plain, "ConfigMap")["kube-prometheus-stack-grafana-datasource"]["data"].values()
    assert [d["type"] for d in yaml.safe_load(text)["datasources"]] == ["prometheus", "alertmanager"]


def test_the_monitoring_policy_selects_prometheus_alertmanager_and_grafana_and_nothing_else(
    tmp_path: Path,
) -> None:
    """The pods behind the chart's Prometheus, Alertmanager and Grafana Services (the operator labels its
    StatefulSets' pods as the Services select them) accept their own namespace only; the operator (whose
    admission webhook the API server calls), kube-state-metrics and node-exporter are left alone."""
    rendered = render(KUBE_PROMETHEUS_STACK_CHART, kube_prometheus_stack_values(grafana=True), tmp_path)
    policy = monitoring_ingress(KUBE_PROMETHEUS_STACK_CHART.namespace)
    (expression,) = policy["spec"]["podSelector"]["matchExpressions"]
    assert (expression["key"], expression["operator"]) == ("app.kubernetes.io/name", "In")

    def selected(labels: dict[str, str]) -> bool:
        return labels.get(expression["key"]) in expression["values"]

    services = objects(rendered, "Service")
    served = {name for name, service in services.items() if selected(service["spec"]["selector"])}
    assert served == {
        "kube-prometheus-stack-prometheus",
        "kube-prometheus-stack-alertmanager",
        "kube-prometheus-stack-grafana",
    }
    pods = {
        name: workload["spec"]["template"]["metadata"]["labels"]
        for kind in ("Deployment", "DaemonSet", "Job")
        for name, workload in objects(rendered, kind).items()
    }
    assert {name for name, labels in pods.items() if selected(labels)} == {"kube-prometheus-stack-grafana"}
    assert policy["metadata"]["namespace"] == "monitoring"
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {}}]}]  # this namespace's pods only
