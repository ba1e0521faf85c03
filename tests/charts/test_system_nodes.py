"""The system nodes are for add-ons only: every controller lands there, no team pod does.

The system nodegroup carries ``CriticalAddonsOnly=true:NoSchedule``. A controller that does not tolerate it has no
node at all (the GPU nodes carry their own taint), so ``helm --wait`` would never see it ready and the deployment
would fail: each chart is rendered here with the real, pinned chart and the real helm, and every pod template it
renders is judged against a system node and a GPU node as the Kubernetes scheduler judges them (node selector,
required node affinity, taints and tolerations:
https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/,
https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/). Each chart's table names every
pod-carrying object the render holds, so a controller a chart adds (or one our values forget) fails here.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from training_clusters.acceptance.plan import acceptance_jobs
from training_clusters.catalog import lookup
from training_clusters.config import load_environment
from training_clusters.constructs.eks.addons import (
    MPS_CAPABLE_LABEL,
    efa_device_plugin_values,
    gpu_operator_values,
    kube_prometheus_stack_values,
    neuron_device_plugin_values,
    nvidia_device_plugin_values,
)
from training_clusters.constructs.eks.cluster import GPU_TAINT_KEY, NEURON_TAINT_KEY
from training_clusters.constructs.eks.release_manifest import MPI_OPERATOR_DEPLOYMENT, mpi_operator_placement
from training_clusters.constructs.eks.scheduling import kubeflow_trainer_values, kueue_values
from training_clusters.environments import environment_files
from training_clusters.model.releases import (
    EFA_DEVICE_PLUGIN_CHART,
    GPU_OPERATOR_CHART,
    KUBE_PROMETHEUS_STACK_CHART,
    KUBEFLOW_TRAINER_CHART,
    KUEUE_CHART,
    NEURON_HELM_CHART,
    NVIDIA_DEVICE_PLUGIN_CHART,
)
from training_clusters.workloads.tenancy import (
    SYSTEM_NODE_LABELS,
    SYSTEM_NODE_TAINT,
    SYSTEM_TOLERATION,
    tolerates,
)

from . import schemas
from .helm import kubectl, render

INSTANCE_TYPE = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class NodeFacts:
    """What the scheduler reads of a node: its labels and its taints."""

    labels: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...]


#: A system node as the system nodegroup makes it (EC2: no ``eks.amazonaws.com/compute-type`` label).
SYSTEM_NODE = NodeFacts(
    {
        **SYSTEM_NODE_LABELS,
        INSTANCE_TYPE: "t3.large",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    },
    (dict(SYSTEM_NODE_TAINT),),
)
#: A GPU node of an EfaNodegroup / GpuNodegroup (one sharing its GPUs through MPS: the label the nodegroup sets
#: for the device plugin's MPS control daemon).
GPU_NODE = NodeFacts(
    {
        INSTANCE_TYPE: "p5.48xlarge",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        MPS_CAPABLE_LABEL: "true",
    },
    ({"key": GPU_TAINT_KEY, "value": "true", "effect": "NoSchedule"},),
)
#: A Trainium node.
NEURON_NODE = NodeFacts(
    {INSTANCE_TYPE: "trn1.32xlarge", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
    ({"key": NEURON_TAINT_KEY, "value": "true", "effect": "NoSchedule"},),
)


# --------------------------------------------------------------------------------------------------
# the scheduler's rules, exactly


def _expression_holds(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = expression["key"], expression["operator"]
    values = expression.get("values") or []
    match operator:
        case "In":
            return key in labels and labels[key] in values
        case "NotIn":
            return key not in labels or labels[key] not in values
        case "Exists":
            return key in labels
        case "DoesNotExist":
            return key not in labels
    raise AssertionError(f"operator {operator} is not read by this check")  # Gt/Lt: none of ours use them


def lands_on(pod: Mapping[str, Any], node: NodeFacts) -> bool:
    """Whether the scheduler may place ``pod`` (a pod spec) on ``node``: every ``nodeSelector`` label equal, one
    required node-affinity term whose expressions all hold (terms are ORed, expressions ANDed), and every
    ``NoSchedule``/``NoExecute`` taint tolerated (``PreferNoSchedule`` only discourages)."""
    if any(node.labels.get(k) != v for k, v in (pod.get("nodeSelector") or {}).items()):
        return False
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(
        all(_expression_holds(e, node.labels) for e in term.get("matchExpressions") or []) for term in terms
    ):
        return False
    return all(
        any(tolerates(t, taint) for t in pod.get("tolerations") or [])
        for taint in node.taints
        if taint["effect"] in ("NoSchedule", "NoExecute")
    )


# The toleration rules, both sides of each (the taint-and-toleration page's "Concepts").
@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            SYSTEM_NODE_TAINT,
            True,
        ),  # no effect: all effects
        (
            {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"},
            SYSTEM_NODE_TAINT,
            True,
        ),
        (
            {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoExecute"},
            SYSTEM_NODE_TAINT,
            False,
        ),
        ({"operator": "Exists"}, SYSTEM_NODE_TAINT, True),  # empty key with Exists matches everything
        ({"operator": "Exists", "effect": "NoSchedule"}, SYSTEM_NODE_TAINT, True),
        ({"operator": "Exists", "effect": "NoExecute"}, SYSTEM_NODE_TAINT, False),
        ({"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true"}, SYSTEM_NODE_TAINT, True),
        ({"key": "CriticalAddonsOnly", "value": "true"}, SYSTEM_NODE_TAINT, True),  # Equal is the default
        ({"key": "CriticalAddonsOnly", "operator": "Equal", "value": "false"}, SYSTEM_NODE_TAINT, False),
        ({"key": "CriticalAddonsOnly", "operator": "Equal"}, SYSTEM_NODE_TAINT, False),  # value "" != "true"
        ({"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}, SYSTEM_NODE_TAINT, False),
        ({"key": "criticaladdonsonly", "operator": "Exists"}, SYSTEM_NODE_TAINT, False),  # keys are exact
    ],
)
def test_a_toleration_matches_a_taint_as_the_scheduler_decides(
    toleration: dict[str, str], taint: Mapping[str, str], expected: bool
) -> None:
    assert tolerates(toleration, taint) is expected


def test_a_pod_lands_only_where_selector_affinity_and_taints_all_allow() -> None:
    system = {"nodeSelector": dict(SYSTEM_NODE_LABELS), "tolerations": [dict(SYSTEM_TOLERATION)]}
    assert lands_on(system, SYSTEM_NODE) and not lands_on(system, GPU_NODE)
    assert not lands_on(
        {"nodeSelector": dict(SYSTEM_NODE_LABELS)}, SYSTEM_NODE
    )  # the taint alone keeps it off
    assert not lands_on({"tolerations": [dict(SYSTEM_TOLERATION)], "nodeSelector": {"x": "y"}}, SYSTEM_NODE)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": INSTANCE_TYPE, "operator": "In", "values": ["p5.48xlarge"]}
                        ]
                    }
                ]
            }
        }
    }
    everything = [{"operator": "Exists"}]
    assert lands_on({"affinity": affinity, "tolerations": everything}, GPU_NODE)
    assert not lands_on({"affinity": affinity, "tolerations": everything}, SYSTEM_NODE)
    prefer = {"key": "k", "value": "v", "effect": "PreferNoSchedule"}
    assert lands_on({}, NodeFacts({}, (prefer,)))


# --------------------------------------------------------------------------------------------------
# every pod template our charts render


_WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
#: Custom resources whose pods an operator creates from the spec's own scheduling fields.
_POD_SPEC_RESOURCES = ("Prometheus", "Alertmanager")


def pod_specs(rendered: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """``(kind, name)`` -> the pod spec of every workload (and every Prometheus/Alertmanager) rendered."""
    found = {}
    for doc in rendered:
        key = (doc["kind"], doc["metadata"]["name"])
        if doc["kind"] in _WORKLOADS:
            found[key] = doc["spec"]["template"]["spec"]
        elif doc["kind"] in _POD_SPEC_RESOURCES:
            found[key] = doc["spec"]
    return found


SYSTEM = "system nodes only"
GPU = "GPU nodes only"
NEURON = "Trainium nodes only"
EVERY = "every node"
_WHERE = {
    SYSTEM: (True, False, False),
    GPU: (False, True, False),
    NEURON: (False, False, True),
    EVERY: (True, True, True),
}


def _charts() -> Iterator[Any]:
    p5 = lookup("p5.48xlarge")
    yield pytest.param(
        KUBE_PROMETHEUS_STACK_CHART,
        kube_prometheus_stack_values(grafana=True, storage_class="gp3"),
        {
            ("Deployment", "kube-prometheus-stack-operator"): SYSTEM,
            ("Deployment", "kube-prometheus-stack-grafana"): SYSTEM,
            ("Deployment", "kube-prometheus-stack-kube-state-metrics"): SYSTEM,
            ("Prometheus", "kube-prometheus-stack-prometheus"): SYSTEM,
            ("Alertmanager", "kube-prometheus-stack-alertmanager"): SYSTEM,
            ("Job", "kube-prometheus-stack-admission-create"): SYSTEM,  # helm hooks: install waits for them
            ("Job", "kube-prometheus-stack-admission-patch"): SYSTEM,
            # the chart's own toleration of every NoSchedule taint: node metrics from every node
            ("DaemonSet", "kube-prometheus-stack-prometheus-node-exporter"): EVERY,
        },
        id="kube-prometheus-stack",
    )
    yield pytest.param(
        GPU_OPERATOR_CHART,
        gpu_operator_values(service_monitor=True, mig_layouts={"all-1g.10gb": {"1g.10gb": 7}}),
        {
            ("Deployment", "gpu-operator"): SYSTEM,
            ("Deployment", "gpu-operator-node-feature-discovery-master"): SYSTEM,
            ("Deployment", "gpu-operator-node-feature-discovery-gc"): SYSTEM,
            ("Job", "gpu-operator-upgrade-crd"): SYSTEM,  # a pre-upgrade hook, on the operator's tolerations
            # a post-delete hook on NFD master's placement: helm uninstall waits for it
            ("Job", "gpu-operator-node-feature-discovery-prune"): SYSTEM,
            # labels GPU nodes (the chart tolerates their taint); the system nodes carry no GPU to discover
            ("DaemonSet", "gpu-operator-node-feature-discovery-worker"): GPU,
        },
        id="gpu-operator",
    )
    yield pytest.param(
        KUEUE_CHART,
        kueue_values(),
        {("Deployment", "kueue-controller-manager"): SYSTEM},
        id="kueue",
    )
    yield pytest.param(
        KUBEFLOW_TRAINER_CHART,
        kubeflow_trainer_values(),
        {
            ("Deployment", "kubeflow-trainer-controller-manager"): SYSTEM,
            ("Deployment", "jobset-controller"): SYSTEM,
        },
        id="kubeflow-trainer",
    )
    yield pytest.param(
        NVIDIA_DEVICE_PLUGIN_CHART,
        nvidia_device_plugin_values(instance_types=[p5.name]),
        {
            ("DaemonSet", "nvidia-device-plugin"): GPU,
            ("DaemonSet", "nvidia-device-plugin-mps-control-daemon"): GPU,
        },
        id="nvidia-device-plugin",
    )
    yield pytest.param(
        EFA_DEVICE_PLUGIN_CHART,
        efa_device_plugin_values(
            instance_types=[p5.name], image_repository="example.com/eks/aws-efa-k8s-device-plugin"
        ),
        {("DaemonSet", "aws-efa-k8s-device-plugin"): GPU},
        id="efa-device-plugin",
    )
    yield pytest.param(
        NEURON_HELM_CHART,
        neuron_device_plugin_values(instance_types=["trn1.32xlarge"]),
        {("DaemonSet", "neuron-device-plugin"): NEURON},
        id="neuron-device-plugin",
    )


@pytest.mark.integration
@pytest.mark.parametrize(("spec", "values", "expected"), list(_charts()))
def test_every_pod_of_our_charts_lands_where_it_belongs(
    spec: Any, values: dict[str, Any], expected: dict[tuple[str, str], str], tmp_path: Path
) -> None:
    """Controllers on the system nodes (and nowhere else), device plugins on their accelerator nodes (and never on
    a system node), node-exporter everywhere; the table names every pod the chart renders."""
    pods = pod_specs(render(spec, values, tmp_path))
    assert set(pods) == set(expected)
    where = {
        name: (lands_on(pod, SYSTEM_NODE), lands_on(pod, GPU_NODE), lands_on(pod, NEURON_NODE))
        for name, pod in pods.items()
    }
    assert where == {name: _WHERE[expected[name]] for name in expected}


@pytest.mark.integration
@pytest.mark.parametrize(
    ("spec", "values", "controller"),
    [
        (KUEUE_CHART, kueue_values(), ("Deployment", "kueue-controller-manager")),
        (KUBEFLOW_TRAINER_CHART, kubeflow_trainer_values(), ("Deployment", "jobset-controller")),
        (GPU_OPERATOR_CHART, gpu_operator_values(service_monitor=False), ("Deployment", "gpu-operator")),
        (
            KUBE_PROMETHEUS_STACK_CHART,
            kube_prometheus_stack_values(grafana=True),
            ("Prometheus", "kube-prometheus-stack-prometheus"),
        ),
    ],
    ids=["kueue", "jobset", "gpu-operator", "prometheus"],
)
def test_without_our_toleration_a_controller_has_no_node(
    spec: Any, values: dict[str, Any], controller: tuple[str, str], tmp_path: Path
) -> None:
    """The check fails the way the cluster would: the values' toleration removed, the controller fits neither
    the system node (its taint) nor a GPU node (theirs)."""
    stripped = json.loads(
        json.dumps(values).replace(
            json.dumps(dict(SYSTEM_TOLERATION)), '{"key": "unused", "operator": "Exists"}'
        )
    )
    pod = pod_specs(render(spec, stripped, tmp_path))[controller]
    assert not lands_on(pod, SYSTEM_NODE) and not lands_on(pod, GPU_NODE)
    assert lands_on(pod_specs(render(spec, values, tmp_path))[controller], SYSTEM_NODE)


def test_the_gpu_operator_operands_keep_the_gpu_toleration_only() -> None:
    """The DaemonSets the operator makes (DCGM exporter, MIG manager, validator) follow ``daemonsets``: the GPU
    nodes' taint, not the system nodes'."""
    values = gpu_operator_values(service_monitor=True)
    assert values["daemonsets"]["tolerations"] == [
        {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
    ]


# --------------------------------------------------------------------------------------------------
# the MPI Operator's release manifest, patched as the handler patches it


@pytest.mark.integration
def test_the_mpi_operator_patched_as_the_handler_patches_it_lands_on_the_system_nodes(tmp_path: Path) -> None:
    """The pinned release manifest's one Deployment is the patch's target; kubectl's own strategic merge
    (``patch --local``, offline) of our patch onto it gives a pod that lands on the system nodes only, where the
    manifest alone lands nowhere."""
    manifest = [d for d in yaml.safe_load_all(schemas.release_manifest().read_text()) if d]
    workloads = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in manifest
        if d["kind"] in _WORKLOADS
    }
    namespace, name = MPI_OPERATOR_DEPLOYMENT
    assert set(workloads) == {("Deployment", namespace, name)}
    deployment = workloads["Deployment", namespace, name]
    assert not lands_on(deployment["spec"]["template"]["spec"], SYSTEM_NODE)
    source = tmp_path / "deployment.json"
    source.write_text(json.dumps(deployment))
    patch = mpi_operator_placement()
    assert (patch.namespace, patch.name) == (namespace, name)
    done = subprocess.run(
        [
            str(kubectl()),
            "patch",
            "--local",
            "-f",
            str(source),
            "--type=strategic",
            "--patch",
            json.dumps(dict(patch.patch)),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    pod = json.loads(done.stdout)["spec"]["template"]["spec"]
    assert lands_on(pod, SYSTEM_NODE) and not lands_on(pod, GPU_NODE)
    assert pod["containers"] == deployment["spec"]["template"]["spec"]["containers"]  # nothing else changed


# --------------------------------------------------------------------------------------------------
# a team's pods never land on a system node


def _pod_templates(value: Any) -> Iterator[Mapping[str, Any]]:
    """Every pod spec (a mapping with ``containers``) anywhere in a manifest."""
    if isinstance(value, dict):
        if "containers" in value:
            yield value
        for item in value.values():
            yield from _pod_templates(item)
    elif isinstance(value, list):
        for item in value:
            yield from _pod_templates(item)


_KUBERNETES_ENVIRONMENTS = [path for path in environment_files() if "eks" in path.stem]


@pytest.mark.parametrize("path", _KUBERNETES_ENVIRONMENTS, ids=lambda p: p.stem)
def test_no_acceptance_job_pod_tolerates_the_system_nodes(path: Path) -> None:
    """The NCCL MPIJob and TrainJob, the DCGM and MIG jobs and the gang test run in team namespaces: none
    tolerates the system nodes' taint, so none can share a node with the add-ons."""
    config = load_environment(path)
    pods = [
        pod
        for job in acceptance_jobs(config, path.stem)
        if job.filename.endswith((".yaml", ".yml"))
        for doc in yaml.safe_load_all(job.content)
        for pod in _pod_templates(doc)
    ]
    assert pods, "an EKS environment has acceptance jobs"
    assert [pod for pod in pods if lands_on(pod, SYSTEM_NODE)] == []
    assert not any(tolerates(t, SYSTEM_NODE_TAINT) for pod in pods for t in pod.get("tolerations") or [])
