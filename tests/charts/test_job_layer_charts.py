"""The EKS job layer through the real pinned charts: Kueue and Kubeflow Trainer (with JobSet) render with our
values, and every object they make, and every queue object we apply, is valid for the cluster's Kubernetes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from training_clusters.catalog import lookup
from training_clusters.constructs.eks.cluster import SYSTEM_NODE_LABELS
from training_clusters.constructs.eks.scheduling import (
    kubeflow_trainer_values,
    kueue_configuration,
    kueue_values,
)
from training_clusters.model.options import QueuePreemption
from training_clusters.model.releases import (
    DEFAULT_NCCL_TESTS_IMAGE,
    JOBSET_IMAGE,
    KUBEFLOW_TRAINER_CHART,
    KUBEFLOW_TRAINER_IMAGE,
    KUEUE_CHART,
    KUEUE_IMAGE,
    PYTORCH_EFA_IMAGE,
)
from training_clusters.workloads.scheduling import (
    KUEUE_MANAGED_LABEL,
    NODEGROUP_LABEL,
    FlavorCapacity,
    QueuePolicy,
    Taint,
    queue_manifests,
    runtime_manifests,
)

from .helm import crd_schemas, objects, render, validation_problems

pytestmark = pytest.mark.integration


def _kinds(rendered: list[dict[str, Any]]) -> set[str]:
    return {doc["spec"]["names"]["kind"] for doc in rendered if doc["kind"] == "CustomResourceDefinition"}


def test_kueue_chart_renders_our_configuration_image_and_placement(tmp_path: Path) -> None:
    rendered = render(KUEUE_CHART, kueue_values(pods_ready_timeout_minutes=15), tmp_path, include_crds=True)
    assert validation_problems(rendered, crd_schemas(rendered)) == []
    (deployment,) = objects(rendered, "Deployment").values()
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == dict(SYSTEM_NODE_LABELS)
    (container,) = pod["containers"]
    assert (container["image"], container["imagePullPolicy"]) == (KUEUE_IMAGE.reference, "IfNotPresent")
    assert container["image"] == "registry.k8s.io/kueue/kueue:v0.19.2"
    config_map = objects(rendered, "ConfigMap")["kueue-manager-config"]
    config = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    # the chart adds Kueue's own webhook certificates to what we give, and nothing else
    assert config == {
        **kueue_configuration(pods_ready_timeout_minutes=15),
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": "kueue-webhook-service",
            "webhookSecretName": "kueue-webhook-server-cert",
        },
    }
    # the webhook the queue objects meet is served by that deployment
    service = objects(rendered, "Service")["kueue-webhook-service"]
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "Cohort"} <= _kinds(rendered)


def _webhooks(rendered: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every admission webhook of the chart, by name (``mjob.kb.io``, ``vjob.kb.io`` ...)."""
    return {
        hook["name"]: hook
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for configuration in objects(rendered, kind).values()
        for hook in configuration["webhooks"]
    }


#: The webhooks of the kinds Kueue manages here (KUEUE_INTEGRATIONS): they fail closed.
_JOB_WEBHOOKS = {f"{side}{kind}.kb.io" for side in "mv" for kind in ("job", "mpijob", "jobset", "trainjob")}


def test_kueues_job_webhooks_act_only_in_the_namespaces_it_manages(tmp_path: Path) -> None:
    """With Kueue down, a Job is refused only in a namespace labelled for Kueue (the team namespaces)."""
    hooks = _webhooks(render(KUEUE_CHART, kueue_values(), tmp_path))
    assert set(hooks) >= _JOB_WEBHOOKS
    for name in _JOB_WEBHOOKS:
        assert hooks[name]["failurePolicy"] == "Fail"
        assert hooks[name]["namespaceSelector"] == {"matchLabels": {KUEUE_MANAGED_LABEL: "true"}}, name
    # every webhook of a namespaced kind Kueue may touch takes the same selector; the rest check Kueue's
    # own cluster-wide objects (ClusterQueue, ResourceFlavor, ...) or its Workloads, which only Kueue makes
    selected = {name for name, hook in hooks.items() if "namespaceSelector" in hook}
    assert {hooks[name]["namespaceSelector"]["matchLabels"][KUEUE_MANAGED_LABEL] for name in selected} == {
        "true"
    }
    for name in set(hooks) - selected:
        assert {group for rule in hooks[name]["rules"] for group in rule["apiGroups"]} == {"kueue.x-k8s.io"}


def test_without_our_selector_the_chart_gates_jobs_in_every_namespace(tmp_path: Path) -> None:
    """The test above can fail: the chart's own default selects all but kube-system and Kueue's namespace."""
    values = kueue_values()
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    del config["managedJobsNamespaceSelector"]
    values["managerConfig"]["controllerManagerConfigYaml"] = yaml.safe_dump(config)
    hooks = _webhooks(render(KUEUE_CHART, values, tmp_path))
    assert hooks["mjob.kb.io"]["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kueue-system"],
            }
        ]
    }


def test_trainer_chart_renders_trainer_and_jobset_on_the_system_nodes(tmp_path: Path) -> None:
    rendered = render(KUBEFLOW_TRAINER_CHART, kubeflow_trainer_values(), tmp_path, include_crds=True)
    assert validation_problems(rendered, crd_schemas(rendered)) == []
    deployments = objects(rendered, "Deployment")
    images = {
        name: [c["image"] for c in d["spec"]["template"]["spec"]["containers"]]
        for name, d in deployments.items()
    }
    assert images == {
        "kubeflow-trainer-controller-manager": [KUBEFLOW_TRAINER_IMAGE.reference],
        "jobset-controller": [JOBSET_IMAGE.reference],
    }
    assert images["jobset-controller"] == ["registry.k8s.io/jobset/jobset:v0.12.0"]
    for deployment in deployments.values():
        assert deployment["spec"]["template"]["spec"]["nodeSelector"] == dict(SYSTEM_NODE_LABELS)
    assert {"TrainJob", "ClusterTrainingRuntime", "TrainingRuntime", "JobSet"} <= _kinds(rendered)
    assert not objects(rendered, "ClusterTrainingRuntime")  # the chart's example runtimes stay off


def test_every_queue_object_is_valid_for_kueues_crds(tmp_path: Path) -> None:
    """Every field the queues can carry: two flavors (taints, topology), cohort, preemption, limits."""
    crds = crd_schemas(render(KUEUE_CHART, kueue_values(), tmp_path, include_crds=True))
    p5 = FlavorCapacity(
        name="p5",
        instance_type=lookup("p5.48xlarge"),
        nodes=2,
        efa_interfaces=32,
        labels={NODEGROUP_LABEL: "p5"},
        taints=(Taint("nvidia.com/gpu", "true", "NoSchedule"),),
    )
    g5 = FlavorCapacity(
        name="g5", instance_type=lookup("g5.2xlarge"), nodes=1, labels={NODEGROUP_LABEL: "g5"}
    )
    policy = QueuePolicy(
        cohort="research",
        within_cluster_queue=QueuePreemption.LOWER_OR_NEWER_EQUAL_PRIORITY,
        reclaim_within_cohort=QueuePreemption.ANY,
        borrow_within_cohort=QueuePreemption.LOWER_PRIORITY,
        lending_limit_percent=50,
        borrowing_limit_percent=100,
    )
    manifests = queue_manifests([p5, g5], namespaces=["default", "vision"], policy=policy)
    assert {m["kind"] for m in manifests} == {
        "Namespace",
        "Topology",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
    }
    assert validation_problems(manifests, crds) == []


def test_the_validator_refuses_what_the_schemas_refuse(tmp_path: Path) -> None:
    """The checks above can fail: a wrong field of a built-in kind and of a custom kind are both reported."""
    crds = crd_schemas(render(KUEUE_CHART, kueue_values(), tmp_path, include_crds=True))
    bad_flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "x"},
        "spec": {"nodeLabels": {f"k{i}": "v" for i in range(9)}},  # at most 8
    }
    bad_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}, "data": {"a": 1}}
    unknown = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "z"}}
    problems = validation_problems([bad_flavor, bad_map, unknown], crds)
    assert [p.split(":")[0] for p in problems] == ["ResourceFlavor/x", "ConfigMap/y", "Thing/z"]


def test_every_runtime_is_valid_for_trainers_crds(tmp_path: Path) -> None:
    crds = crd_schemas(render(KUBEFLOW_TRAINER_CHART, kubeflow_trainer_values(), tmp_path, include_crds=True))
    p5 = FlavorCapacity(
        name="p5",
        instance_type=lookup("p5.48xlarge"),
        nodes=2,
        efa_interfaces=32,
        labels={NODEGROUP_LABEL: "p5"},
        taints=(Taint("nvidia.com/gpu", "true", "NoSchedule"),),
    )
    runtimes = runtime_manifests(
        [p5], torchrun_image=PYTORCH_EFA_IMAGE.reference, mpi_image=DEFAULT_NCCL_TESTS_IMAGE
    )
    assert [r["kind"] for r in runtimes] == ["ClusterTrainingRuntime"] * 2
    assert validation_problems(runtimes, crds) == []
