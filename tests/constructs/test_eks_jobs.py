"""The EKS job layer: Kueue and Kubeflow Trainer, their values through the real charts, and the stacks' wiring."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from training_clusters.acceptance import acceptance_plan
from training_clusters.catalog import CATALOG, lookup, lookup_hyperpod
from training_clusters.config import load_environment
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.common.placement import TrainingPlacementGroup
from training_clusters.constructs.eks.cluster import EfaNodegroup, GpuEksCluster, GpuNodegroup
from training_clusters.constructs.eks.scheduling import (
    KubeflowTrainer,
    Kueue,
    TrainingQueues,
    TrainingRuntimes,
    kubeflow_trainer_values,
    kueue_configuration,
    kueue_values,
)
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import PodSecurityLevel
from training_clusters.model.releases import (
    EKS_KUBERNETES_VERSION,
    KUBEFLOW_TRAINER_CHART,
    KUEUE_CHART,
)
from training_clusters.rules.eks_queues import pods_ready_timeout_problem
from training_clusters.workloads.mig import mig_devices, mig_resource
from training_clusters.workloads.scheduling import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    HUGEPAGES_RESOURCE,
    KUEUE_MANAGED_LABEL,
    KUEUE_QUEUE_LABEL,
    NODEGROUP_LABEL,
    NodePool,
)
from training_clusters.workloads.tenancy import (
    no_instance_metadata_egress,
    pod_security_labels,
    same_namespace_ingress,
    team_role_binding,
)

from ..assertions import numbered_steps
from ..conftest import AZS, ROOT, EnvironmentGates, PinnedStack

EKS_FILES = sorted((ROOT / "environments").glob("eks-*.yaml"))

# --------------------------------------------------------------------------------------------------
# values


def test_kueue_admits_all_or_nothing_and_manages_the_training_kinds() -> None:
    config = kueue_configuration(pods_ready_timeout_minutes=15)
    assert config["waitForPodsReady"] == {
        "timeout": "15m",
        "blockAdmission": False,
        "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
    }
    assert config["integrations"] == {
        "frameworks": [
            "batch/job",
            "kubeflow.org/mpijob",
            "jobset.x-k8s.io/jobset",
            "trainer.kubeflow.org/trainjob",
        ]
    }
    assert config["manageJobsWithoutQueueName"] is False
    # only the team namespaces: Kueue's job webhooks fail closed, so elsewhere no Job waits on Kueue
    assert config["managedJobsNamespaceSelector"] == {
        "matchLabels": {"training-clusters/kueue-managed": "true"}
    }
    assert config["resources"] == {"quotaCheckStrategy": "IgnoreUndeclared"}
    assert kueue_configuration()["waitForPodsReady"]["timeout"] == "10m"  # the default


@pytest.mark.parametrize(
    ("minutes", "problem"),
    [
        (1, None),
        (1440, None),
        (
            0,
            "must be between 1 and 1440 minutes (how long an admitted job may take to have all its pods running), got 0",
        ),
        (
            1441,
            "must be between 1 and 1440 minutes (how long an admitted job may take to have all its pods running), got 1441",
        ),
    ],
)
def test_pods_ready_timeout_bounds(minutes: int, problem: str | None) -> None:
    assert pods_ready_timeout_problem(minutes) == problem


# --------------------------------------------------------------------------------------------------
# constructs


class _Built:
    def __init__(self, template: dict[str, Any], queues: TrainingQueues, runtimes: TrainingRuntimes) -> None:
        self.template = template
        self.queues = queues
        self.runtimes = runtimes


def _cluster(stack: cdk.Stack) -> tuple[TrainingNetwork, GpuEksCluster]:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    return network, GpuEksCluster(stack, "Eks", vpc=network.vpc)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> _Built:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("jobs")))
    stack = PinnedStack(app, "Test", env=cdk.Environment(region="us-east-1"))
    network, cluster = _cluster(stack)
    trainer = KubeflowTrainer(stack, "Trainer", cluster=cluster)
    kueue = Kueue(stack, "Kueue", cluster=cluster, pods_ready_timeout_minutes=20)
    kueue.node.add_dependency(trainer)
    p5 = EfaNodegroup(
        stack,
        "P5",
        cluster=cluster,
        instance_type="p5.48xlarge",
        desired_size=4,
        subnet=network.placement_subnet(),
        placement_group=TrainingPlacementGroup(stack, "Placement"),
        efa_security_group=network.efa_security_group,
        labels={NODEGROUP_LABEL: "p5"},
    )
    g5 = GpuNodegroup(
        stack, "G5", cluster=cluster, instance_type="g5.12xlarge", desired_size=3, gpu_taint=False
    )
    trn = GpuNodegroup(stack, "Trn", cluster=cluster, instance_type="trn1.32xlarge", desired_size=1)
    queues = TrainingQueues(
        stack,
        "Queues",
        cluster=cluster,
        kueue=kueue,
        nodegroups={"p5": p5, "g5": g5, "trn": trn},
        namespaces=["vision", "speech"],
        cohort="research",
        within_cluster_queue="LowerPriority",
        reclaim_within_cohort="any",
        borrow_within_cohort="LOWER_PRIORITY",
        lending_limit_percent=50,
    )
    runtimes = TrainingRuntimes(stack, "Runtimes", cluster=cluster, trainer=trainer, nodegroups={"p5": p5})
    return _Built(Template.from_stack(stack).to_json(), queues, runtimes)


@pytest.fixture(scope="module")
def job_layer(built: _Built) -> dict[str, Any]:
    return built.template


def _charts(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        v["Properties"]["Chart"]: v
        for v in template["Resources"].values()
        if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }


def test_charts_come_pinned_from_their_oci_registries_and_wait_for_ready(job_layer: dict[str, Any]) -> None:
    charts = _charts(job_layer)
    # the cluster's own device plugins (GpuEksCluster installs them for its GPU, EFA and Neuron nodegroups)
    # beside the job layer's two charts
    assert set(charts) == {
        "kueue",
        "kubeflow-trainer",
        "nvidia-device-plugin",
        "aws-efa-k8s-device-plugin",
        "neuron-helm-chart",
    }
    for spec in (KUEUE_CHART, KUBEFLOW_TRAINER_CHART):
        props = charts[spec.chart]["Properties"]
        assert (props["Repository"], props["Version"], props["Namespace"], props["Release"]) == (
            spec.repository,
            spec.version,
            spec.namespace,
            spec.release,
        )
        # helm --wait: complete only once the controllers, and so their webhooks, are ready
        assert (props["Wait"], props["Timeout"], props["CreateNamespace"]) == (True, "600s", True)
    assert KUEUE_CHART.repository == "oci://registry.k8s.io/kueue/charts/kueue"
    assert KUBEFLOW_TRAINER_CHART.repository == "oci://ghcr.io/kubeflow/charts/kubeflow-trainer"
    assert json.loads(charts["kueue"]["Properties"]["Values"]) == kueue_values(pods_ready_timeout_minutes=20)
    assert json.loads(charts["kubeflow-trainer"]["Properties"]["Values"]) == kubeflow_trainer_values()


def test_kueue_installs_after_what_it_manages(job_layer: dict[str, Any]) -> None:
    resources = job_layer["Resources"]
    trainer_id = next(
        k for k, v in resources.items() if v.get("Properties", {}).get("Chart") == "kubeflow-trainer"
    )
    assert trainer_id in _charts(job_layer)["kueue"]["DependsOn"]


@pytest.mark.parametrize("minutes", [0, 1441])
def test_a_bad_pods_ready_timeout_is_a_clear_error(stack: cdk.Stack, minutes: int) -> None:
    cluster = GpuEksCluster(stack, "Eks", vpc=TrainingNetwork(stack, "Network", availability_zones=AZS).vpc)
    with pytest.raises(ConfigurationError) as error:
        Kueue(stack, "Kueue", cluster=cluster, pods_ready_timeout_minutes=minutes)
    assert str(error.value) == (
        "Test/Kueue: pods_ready_timeout_minutes must be between 1 and 1440 minutes (how long an admitted job "
        f"may take to have all its pods running), got {minutes}"
    )


# --------------------------------------------------------------------------------------------------
# every shipped EKS environment


@pytest.mark.parametrize("path", EKS_FILES, ids=[p.stem for p in EKS_FILES])
def test_eks_environments_install_kueue_after_trainer_and_the_mpi_operator(
    environment_gates: EnvironmentGates, path: Path
) -> None:
    template = environment_gates.template(path)
    resources = template["Resources"]
    charts = _charts(template)
    assert {"kueue", "kubeflow-trainer"} <= set(charts)
    depends = set(charts["kueue"]["DependsOn"])
    trainer_id = next(
        k for k, v in resources.items() if v.get("Properties", {}).get("Chart") == "kubeflow-trainer"
    )
    (operator_id,) = [k for k, v in resources.items() if v["Type"] == "Custom::ReleaseManifest"]
    assert {trainer_id, operator_id} <= depends


# --------------------------------------------------------------------------------------------------
# queues


def _manifests(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The KubernetesManifests whose objects are known at synth (no tokens: their JSON is a plain string)."""
    return {
        k: v
        for k, v in template["Resources"].items()
        if v["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
        and isinstance(v["Properties"]["Manifest"], str)
    }


def _applied_namespaces(template: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The manifest holding the team namespaces: its logical id and objects."""
    ((logical_id, resource),) = [
        (i, r)
        for i, r in _manifests(template).items()
        if any(o["kind"] == "Namespace" for o in json.loads(r["Properties"]["Manifest"]))
    ]
    return logical_id, json.loads(resource["Properties"]["Manifest"])


def test_a_team_namespace_that_leaves_the_list_is_not_deleted(built: _Built) -> None:
    """Deleting a namespace deletes all in it: the namespaces are applied without kubectl's --prune."""
    namespaces_id, namespaces = _applied_namespaces(built.template)
    resource = built.template["Resources"][namespaces_id]
    assert "PruneLabel" not in resource["Properties"]
    assert [set(n["metadata"]["labels"]) for n in namespaces] == [  # no prune label
        {KUEUE_MANAGED_LABEL, *pod_security_labels("baseline", EKS_KUBERNETES_VERSION)}
    ] * 2
    queues_id, _ = _applied_queue_objects(built.template)
    queues = built.template["Resources"][queues_id]
    assert queues["Properties"]["PruneLabel"].startswith("aws.cdk.eks/prune-")  # a LocalQueue let go goes


def _applied_queue_objects(template: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The manifest holding the ClusterQueue: its logical id and objects (without CDK's prune label)."""
    for logical_id, resource in _manifests(template).items():
        objects = json.loads(resource["Properties"]["Manifest"])
        if any(o["kind"] == "ClusterQueue" for o in objects):
            for obj in objects:
                labels = obj["metadata"]["labels"]
                (prune,) = [key for key in labels if key.startswith("aws.cdk.eks/prune-")]
                del labels[prune]
                if not labels:
                    del obj["metadata"]["labels"]
            return logical_id, objects
    raise AssertionError("no ClusterQueue applied")


def test_queues_cover_the_gpu_nodegroups_with_what_their_nodes_advertise(built: _Built) -> None:
    _, objects = _applied_queue_objects(built.template)
    assert objects == [m for m in built.queues.manifests if m["kind"] != "Namespace"]
    assert set(built.queues.capacities) == {"p5", "g5"}  # Trainium has no nvidia.com/gpu to queue for
    (queue,) = [o for o in objects if o["kind"] == "ClusterQueue"]
    flavors = {
        f["name"]: {r["name"]: r for r in f["resources"]}
        for f in queue["spec"]["resourceGroups"][0]["flavors"]
    }
    assert flavors["p5"][GPU_RESOURCE] == {"name": GPU_RESOURCE, "nominalQuota": 32, "lendingLimit": 16}
    assert flavors["p5"][EFA_RESOURCE]["nominalQuota"] == 4 * 32
    assert flavors["g5"][GPU_RESOURCE]["nominalQuota"] == 3 * 4
    assert flavors["g5"][EFA_RESOURCE]["nominalQuota"] == 0
    assert queue["spec"]["cohortName"] == "research"
    assert queue["spec"]["preemption"] == {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority"},
    }
    specs = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "ResourceFlavor"}
    assert specs["p5"]["nodeTaints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert "nodeTaints" not in specs["g5"]  # gpu_taint=False: nothing to tolerate
    assert [o["metadata"]["namespace"] for o in objects if o["kind"] == "LocalQueue"] == ["vision", "speech"]


def test_the_team_namespaces_the_queues_make_are_opted_in_to_kueue(built: _Built) -> None:
    namespaces_id, namespaces = _applied_namespaces(built.template)
    assert namespaces == [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "labels": {
                    KUEUE_MANAGED_LABEL: "true",
                    "pod-security.kubernetes.io/enforce": "baseline",
                    "pod-security.kubernetes.io/enforce-version": f"v{EKS_KUBERNETES_VERSION}",
                    "pod-security.kubernetes.io/warn": "restricted",
                    "pod-security.kubernetes.io/warn-version": f"v{EKS_KUBERNETES_VERSION}",
                    "pod-security.kubernetes.io/audit": "restricted",
                    "pod-security.kubernetes.io/audit-version": f"v{EKS_KUBERNETES_VERSION}",
                },
            },
        }
        for name in ("vision", "speech")
    ]
    queues_id, _ = _applied_queue_objects(built.template)
    assert (
        namespaces_id in built.template["Resources"][queues_id]["DependsOn"]
    )  # a LocalQueue needs its namespace
    assert built.queues.default_namespace_label is None  # default is not one of them: left alone
    assert not [
        v for v in built.template["Resources"].values() if v["Type"] == "Custom::AWSCDK-EKS-KubernetesPatch"
    ]


def test_the_default_namespace_is_labelled_before_its_queue_and_unlabelled_on_delete(
    stack: cdk.Stack,
) -> None:
    queues = _queues(stack, namespaces=["default", "vision"])
    assert queues.default_namespace_label is not None
    template = Template.from_stack(stack).to_json()
    patches = {
        k: v["Properties"]
        for k, v in template["Resources"].items()
        if v["Type"] == "Custom::AWSCDK-EKS-KubernetesPatch"
    }
    ((patch_id, patch),) = patches.items()
    assert (patch["ResourceName"], patch["PatchType"]) == ("namespace/default", "strategic")
    security = pod_security_labels("baseline", EKS_KUBERNETES_VERSION)
    assert json.loads(patch["ApplyPatchJson"]) == {
        "metadata": {"labels": {KUEUE_MANAGED_LABEL: "true", **security}}
    }
    # deleted: back to what a namespace without the labels admits (Pod Security's privileged, latest)
    assert json.loads(patch["RestorePatchJson"]) == {
        "metadata": {
            "labels": {
                KUEUE_MANAGED_LABEL: "false",
                "pod-security.kubernetes.io/enforce": "privileged",
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/warn": "privileged",
                "pod-security.kubernetes.io/warn-version": "latest",
                "pod-security.kubernetes.io/audit": "privileged",
                "pod-security.kubernetes.io/audit-version": "latest",
            }
        }
    }
    queues_id, objects = _applied_queue_objects(template)
    assert patch_id in template["Resources"][queues_id]["DependsOn"]
    # default exists: labelled, never created (nor deleted with the stack)
    assert [o["metadata"]["name"] for o in _applied_namespaces(template)[1]] == ["vision"]
    assert "Namespace" not in {o["kind"] for o in objects}


def test_queues_are_applied_once_kueues_webhook_is_ready(built: _Built) -> None:
    logical_id, _ = _applied_queue_objects(built.template)
    kueue_id = next(
        k for k, v in built.template["Resources"].items() if v.get("Properties", {}).get("Chart") == "kueue"
    )
    assert kueue_id in built.template["Resources"][logical_id]["DependsOn"]


def _queues(stack: cdk.Stack, **props: Any) -> TrainingQueues:
    _, cluster = _cluster(stack)
    gpu = GpuNodegroup(
        stack,
        "Gpu",
        cluster=cluster,
        instance_type="g5.2xlarge",
        desired_size=1,
        labels=props.pop("labels", None),
    )
    kueue = Kueue(stack, "Kueue", cluster=cluster)
    nodegroups = props.pop("nodegroups", {"gpu": gpu})
    return TrainingQueues(stack, "Queues", cluster=cluster, kueue=kueue, nodegroups=nodegroups, **props)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"nodegroups": {}}, "nodegroups must include a nodegroup with NVIDIA GPUs to queue for, got none"),
        (
            {"namespaces": ["vision", "kube-system"]},
            "namespaces must not be kube-system, kueue-system (the cluster's own and Kueue's: their jobs must "
            "never wait on Kueue), got 'kube-system'",
        ),
        ({"namespaces": []}, "namespaces must name at least one namespace, got none"),
        ({"namespaces": ["a", "a"]}, "namespaces must each be given once, got a more than once"),
        (
            {"cluster_queue_name": "GPUs"},
            "cluster_queue_name must be 1 to 63 lower-case letters, digits and '-', starting and ending with a "
            "letter or digit (a Kubernetes name), got 'GPUs'",
        ),
        (
            {"within_cluster_queue": "Any"},
            "within_cluster_queue must be one of Never, LowerPriority, LowerOrNewerEqualPriority, got Any",
        ),
        (
            {"cohort": "research", "borrow_within_cohort": "LowerPriority"},
            "borrow_within_cohort LowerPriority needs reclaim_within_cohort other than Never (Kueue refuses a "
            "queue that preempts to borrow but not to reclaim)",
        ),
        (
            {"lending_limit_percent": 50},
            "lending_limit_percent acts between the ClusterQueues of a cohort; set cohort too, or leave it out",
        ),
        (
            {"cohort": "research", "borrowing_limit_percent": 101},
            "borrowing_limit_percent must be between 0 and 100 (percent of the queue's nominal quota), got 101",
        ),
        (
            {"topology": "required"},
            "topology must be preferred or off when no GPU node group's instance type reports EC2 network "
            "topology (p5, p5e, p5en, p6, trn2 and the like do; see DescribeInstanceTopology's supported types), "
            "got required",
        ),
        ({"topology": "rack"}, "topology must be one of preferred, required, off, got 'rack'"),
        (
            {"labels": {f"k{i}": "v" for i in range(8)}},
            "nodegroups.gpu.labels are 9 with the ones the stack adds; a Kueue ResourceFlavor selects nodes by at "
            "most 8: k0, k1, k2, k3, k4, k5, k6, k7, node.kubernetes.io/instance-type",
        ),
    ],
)
def test_bad_queue_props_are_clear_errors(stack: cdk.Stack, props: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        _queues(stack, **props)
    assert str(error.value) == f"Test/Queues: {message}"


@pytest.mark.parametrize("topology", ["preferred", "off"])
def test_g5_queues_take_preferred_or_off_and_name_no_topology(stack: cdk.Stack, topology: str) -> None:
    queues = _queues(stack, topology=topology)
    assert queues.topology == topology
    assert [m["kind"] for m in queues.manifests] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]


def test_seven_labels_of_a_nodegroup_still_fit_its_flavor(stack: cdk.Stack) -> None:
    queues = _queues(stack, labels={f"k{i}": "v" for i in range(7)})
    assert len(queues.capacities["gpu"].node_labels()) == 8


# --------------------------------------------------------------------------------------------------
# every shipped EKS environment: its ClusterQueue holds what its nodegroups provide


def _expected_quota(path: Path) -> dict[str, dict[str, int | str]]:
    """Flavor -> resource -> nodes x what one node advertises, from the environment file and the catalogue."""
    settings = load_environment(path).eks
    assert settings is not None
    sharing = settings.addons.nvidia_device_plugin
    replicas = (
        sharing.time_slicing.replicas if sharing.time_slicing else sharing.mps.replicas if sharing.mps else 1
    )
    expected: dict[str, dict[str, int | str]] = {}
    for group in [*settings.efa_nodegroups, *settings.gpu_nodegroups]:
        instance = CATALOG[group.instance_type]
        layout = getattr(group, "mig_layout", None)
        if instance.is_gpu and layout is not None:  # MIG: each instance of each GPU, as the plugin names it
            strategy = settings.addons.nvidia_device_plugin.mig_strategy
            expected[group.name] = {
                mig_resource(strategy, profile): group.size * instance.gpu_count * count
                for profile, count in mig_devices(instance, layout).items()
            }
        elif instance.is_gpu:
            expected[group.name] = {GPU_RESOURCE: group.size * instance.gpu_count * replicas}
    for efa_group in settings.efa_nodegroups:
        if efa_group.name in expected:
            interfaces = efa_group.efa_interfaces or CATALOG[efa_group.instance_type].max_efa_interfaces
            expected[efa_group.name][EFA_RESOURCE] = efa_group.size * interfaces
            # what efa-config reserves on each node: vCPUs x 110 MiB of 2 MiB pages, plus one page
            pages = CATALOG[efa_group.instance_type].vcpus * 110 * 1024 // 2048 + 1
            expected[efa_group.name][HUGEPAGES_RESOURCE] = f"{efa_group.size * pages * 2}Mi"
    return expected


@pytest.mark.parametrize("path", EKS_FILES, ids=[p.stem for p in EKS_FILES])
def test_cluster_queue_quota_is_what_the_nodegroups_provide(
    environment_gates: EnvironmentGates, path: Path
) -> None:
    template = environment_gates.template(path)
    _, objects = _applied_queue_objects(template)
    (queue,) = [o for o in objects if o["kind"] == "ClusterQueue"]
    (group,) = queue["spec"]["resourceGroups"]
    quota = {
        flavor["name"]: {
            r["name"]: r["nominalQuota"] for r in flavor["resources"] if r["nominalQuota"] not in (0, "0Mi")
        }
        for flavor in group["flavors"]
    }
    assert quota == _expected_quota(path)
    # each flavor selects exactly the nodes of its nodegroup, by the label the stack puts on them
    nodegroups = {
        v["Properties"]["Labels"][NODEGROUP_LABEL]: v["Properties"]
        for v in template["Resources"].values()
        if v["Type"] == "AWS::EKS::Nodegroup" and NODEGROUP_LABEL in v["Properties"].get("Labels", {})
    }
    for flavor in (o for o in objects if o["kind"] == "ResourceFlavor"):
        name = flavor["metadata"]["name"]
        assert flavor["spec"]["nodeLabels"][NODEGROUP_LABEL] == name
        assert flavor["spec"]["nodeLabels"].items() <= nodegroups[name]["Labels"].items() | {
            (
                "node.kubernetes.io/instance-type",
                flavor["spec"]["nodeLabels"]["node.kubernetes.io/instance-type"],
            )
        }


# --------------------------------------------------------------------------------------------------
# runtimes


def _applied_objects(template: dict[str, Any], kind: str) -> tuple[str, list[dict[str, Any]]]:
    for logical_id, resource in _manifests(template).items():
        objects = json.loads(resource["Properties"]["Manifest"])
        if any(o["kind"] == kind for o in objects):
            return logical_id, objects
    raise AssertionError(f"no {kind} applied")


def _chart_id(template: dict[str, Any], chart: str) -> str:
    return next(k for k, v in template["Resources"].items() if v.get("Properties", {}).get("Chart") == chart)


def test_runtimes_are_applied_once_trainers_webhook_is_ready(built: _Built) -> None:
    logical_id, objects = _applied_objects(built.template, "ClusterTrainingRuntime")
    assert [o["metadata"]["name"] for o in objects] == ["torchrun-efa-p5", "mpi-efa-p5"]
    assert built.runtimes.names == {"p5": ("torchrun-efa-p5", "mpi-efa-p5")}
    assert (
        _chart_id(built.template, "kubeflow-trainer") in built.template["Resources"][logical_id]["DependsOn"]
    )


def test_runtimes_need_an_efa_gpu_nodegroup(stack: cdk.Stack) -> None:
    _, cluster = _cluster(stack)
    trainer = KubeflowTrainer(stack, "Trainer", cluster=cluster)
    with pytest.raises(ConfigurationError) as error:
        TrainingRuntimes(stack, "Runtimes", cluster=cluster, trainer=trainer, nodegroups={})
    assert (
        str(error.value)
        == "Test/Runtimes: nodegroups must include an EFA nodegroup with NVIDIA GPUs, got none"
    )


def _runtime_node_templates(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        o["metadata"]["name"]: {j["name"]: j for j in o["spec"]["template"]["spec"]["replicatedJobs"]}[
            "node"
        ]["template"]["spec"]["template"]
        for resource in _manifests(template).values()
        for o in json.loads(resource["Properties"]["Manifest"])
        if o["kind"] == "ClusterTrainingRuntime"
    }


@pytest.mark.parametrize(
    ("stem", "annotations"),
    [
        ("eks-p5-efa", {"kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"}),
        (
            "eks-p5-capacity-block",
            {"kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"},
        ),
        ("eks-g5-efa", None),  # g5 reports no network topology: its flavor names none, its pods ask none
    ],
)
def test_runtime_node_pods_ask_kueue_for_the_network_node_where_the_type_reports_it(
    environment_gates: EnvironmentGates, stem: str, annotations: dict[str, str] | None
) -> None:
    templates = _runtime_node_templates(environment_gates.template(ROOT / "environments" / f"{stem}.yaml"))
    assert len(templates) == 2
    for template in templates.values():
        assert template.get("metadata", {}).get("annotations") == annotations


def test_runtimes_ask_for_the_placement_given(stack: cdk.Stack) -> None:
    _, cluster = _cluster(stack)
    trainer = KubeflowTrainer(stack, "Trainer", cluster=cluster)
    p5 = NodePool(instance_type=lookup("p5.48xlarge"), nodes=2, efa_interfaces=32)
    runtimes = TrainingRuntimes(stack, "Runtimes", cluster=cluster, trainer=trainer, nodegroups={"p5": p5})
    preferred = {"kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"}
    assert [
        m["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]
        for m in runtimes.manifests
    ] == [{"annotations": preferred}] * 2
    off = TrainingRuntimes(
        stack, "Off", cluster=cluster, trainer=trainer, nodegroups={"p5": p5}, topology="off"
    )
    assert all(
        "metadata" not in m["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        for m in off.manifests
    )


@pytest.mark.parametrize("path", EKS_FILES, ids=[p.stem for p in EKS_FILES])
def test_each_efa_gpu_nodegroup_gets_its_runtimes(environment_gates: EnvironmentGates, path: Path) -> None:
    settings = load_environment(path).eks
    assert settings is not None
    expected = [f"torchrun-efa-{g.name}" for g in settings.efa_nodegroups if CATALOG[g.instance_type].is_gpu]
    template = environment_gates.template(path)
    runtimes = [
        o["metadata"]["name"]
        for resource in _manifests(template).values()
        for o in json.loads(resource["Properties"]["Manifest"])
        if o["kind"] == "ClusterTrainingRuntime" and o["metadata"]["name"].startswith("torchrun-efa-")
    ]
    assert runtimes == expected


def test_the_applied_nccl_mpijob_waits_for_its_local_queue(environment_gates: EnvironmentGates) -> None:
    """eks-g5-efa applies its NCCL MPIJob itself: Kueue admits it through the default namespace's queue."""
    path = ROOT / "environments" / "eks-g5-efa.yaml"
    template = environment_gates.template(path)
    queues_id, _ = _applied_queue_objects(template)
    (job_id,) = [
        k
        for k, v in _manifests(template).items()
        if any(o["kind"] == "MPIJob" for o in json.loads(v["Properties"]["Manifest"]))
    ]
    (job,) = json.loads(template["Resources"][job_id]["Properties"]["Manifest"])
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    assert queues_id in template["Resources"][job_id]["DependsOn"]


HYPERPOD_EKS_FILES = sorted((ROOT / "environments").glob("hyperpod-eks-*.yaml"))
#: Those under SageMaker HyperPod task governance: HyperPod's Kueue makes the queues, not the stack.
GOVERNED_FILES = [p for p in HYPERPOD_EKS_FILES if "task_governance:" in p.read_text()]
QUEUED_FILES = [*EKS_FILES, *(p for p in HYPERPOD_EKS_FILES if p not in GOVERNED_FILES)]
#: What a pod asks for when it holds GPUs the queues count.
_QUEUED_RESOURCES = (GPU_RESOURCE, "nvidia.com/gpu.shared", "nvidia.com/mig-")


def _pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a Job or an MPIJob (a TrainJob's pods come from its runtime)."""
    if manifest["kind"] == "Job":
        return [manifest["spec"]["template"]["spec"]]
    if manifest["kind"] == "MPIJob":
        return [r["template"]["spec"] for r in manifest["spec"]["mpiReplicaSpecs"].values()]
    return []


def _holds_gpus(pod: dict[str, Any]) -> bool:
    limits = [k for c in pod["containers"] for k in c.get("resources", {}).get("limits", {})]
    return any(key.startswith(_QUEUED_RESOURCES) for key in limits)


@pytest.mark.parametrize("path", QUEUED_FILES, ids=[p.stem for p in QUEUED_FILES])
def test_every_acceptance_job_holding_gpus_joins_a_local_queue_the_stack_makes(
    environment_gates: EnvironmentGates, path: Path
) -> None:
    """DCGM, MIG, gang, NCCL (MPIJob and TrainJob): each names a LocalQueue the stack applies in the namespace
    it runs in, and its GPU pods fit exactly one flavor, so Kueue counts what it holds where it runs."""
    _, objects = _applied_queue_objects(environment_gates.template(path))
    local_queues = {
        (o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "LocalQueue"
    }
    flavors = {
        o["metadata"]["name"]: o["spec"]["nodeLabels"] for o in objects if o["kind"] == "ResourceFlavor"
    }
    queued = 0
    for job in acceptance_plan(load_environment(path), path.stem).jobs:
        if not job.filename.endswith(".yaml"):
            continue
        for manifest in (doc for doc in yaml.safe_load_all(job.content) if doc):
            pods = [pod for pod in _pod_specs(manifest) if _holds_gpus(pod)]
            if not pods and manifest["kind"] != "TrainJob":
                continue
            metadata = manifest["metadata"]
            route = (metadata.get("namespace", "default"), metadata.get("labels", {}).get(KUEUE_QUEUE_LABEL))
            assert route in local_queues, f"{job.filename}: {route}"
            for pod in pods:
                selector = pod["nodeSelector"]
                fits = [
                    name
                    for name, labels in flavors.items()
                    if all(selector[key] == value for key, value in labels.items() if key in selector)
                ]
                assert len(fits) == 1, f"{job.filename}: {selector} fits flavors {fits}"
            queued += 1
    assert queued >= 1  # at least the DCGM job (MIG pod on eks-mig)


@pytest.mark.parametrize("path", HYPERPOD_EKS_FILES, ids=[p.stem for p in HYPERPOD_EKS_FILES])
def test_hyperpod_eks_gets_trainer_before_kueue_and_the_cluster_and_runtimes_on_its_groups(
    environment_gates: EnvironmentGates, path: Path
) -> None:
    """Under task governance there is no Kueue of ours: Trainer still comes before the cluster."""
    template = environment_gates.template(path)
    resources = template["Resources"]
    trainer_id = _chart_id(template, "kubeflow-trainer")
    assert json.loads(resources[trainer_id]["Properties"]["Values"]) == kubeflow_trainer_values()
    ((_, hyperpod),) = [(k, v) for k, v in resources.items() if v["Type"] == "AWS::SageMaker::Cluster"]
    assert trainer_id in hyperpod["DependsOn"]
    charts = {
        v["Properties"]["Chart"] for v in resources.values() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }
    if path in GOVERNED_FILES:
        assert "kueue" not in charts
    else:
        kueue_id = _chart_id(template, "kueue")
        assert trainer_id in resources[kueue_id]["DependsOn"]
        assert kueue_id in hyperpod["DependsOn"]
    groups = {g["InstanceGroupName"]: g for g in hyperpod["Properties"]["InstanceGroups"]}
    runtimes_id, runtimes = _applied_objects(template, "ClusterTrainingRuntime")
    assert trainer_id in resources[runtimes_id]["DependsOn"]
    settings = load_environment(path).hyperpod_eks
    assert settings is not None
    types = {g.name: lookup_hyperpod(g.instance_type) for g in settings.instance_groups}
    efa_gpu = [name for name, t in types.items() if t.is_gpu and t.efa_supported]
    assert efa_gpu and [r["metadata"]["name"] for r in runtimes] == [
        *(f"torchrun-efa-{g}" for g in efa_gpu),
        *(f"mpi-efa-{g}" for g in efa_gpu),
    ]
    for runtime in runtimes:
        group = runtime["metadata"]["name"].split("-efa-", 1)[1]
        (node,) = [j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node"]
        pod = node["template"]["spec"]["template"]["spec"]
        labels = groups[group]["KubernetesConfig"]["Labels"]
        # the label HyperPod puts on the group's nodes, and Schedulable: never a node under checks or repair;
        # not on a group Karpenter scales (its new nodes get that label only once running: HyperPod's health
        # taint keeps pods off a faulty one)
        autoscaled = hyperpod["Properties"].get("AutoScaling", {}).get("Mode") == "Enable"
        schedulable = {} if autoscaled else {"sagemaker.amazonaws.com/node-health-status": "Schedulable"}
        assert pod["nodeSelector"] == {NODEGROUP_LABEL: group, **schedulable}
        assert labels[NODEGROUP_LABEL] == group
        taints = groups[group]["KubernetesConfig"].get("Taints", [])
        assert pod.get("tolerations", []) == [
            {"key": t["Key"], "operator": "Equal", "value": t.get("Value", ""), "effect": t["Effect"]}
            for t in taints
        ]


def test_next_steps_say_how_to_queue_a_job(environment_gates: EnvironmentGates) -> None:
    steps = environment_gates.template(ROOT / "environments" / "eks-p5-efa.yaml")["Outputs"]["NextSteps"][
        "Value"
    ]
    assert (
        "Train: label a job kueue.x-k8s.io/queue-name: training in namespace default; Kueue starts it when all "
        "of it fits (kubectl get workloads shows what waits); TrainJobs use the runtimes torchrun-efa-p5, "
        "mpi-efa-p5"
    ) in numbered_steps(steps)


def test_hyperpods_next_steps_say_how_to_queue_a_job_on_its_instance_groups(
    environment_gates: EnvironmentGates,
) -> None:
    steps = environment_gates.template(ROOT / "environments" / "hyperpod-eks-g5.yaml")["Outputs"][
        "NextSteps"
    ]["Value"]
    assert (
        "Train: label a job kueue.x-k8s.io/queue-name: training in namespace default; Kueue starts it when all "
        "of it fits on the instance groups (kubectl get workloads shows what waits); TrainJobs use the runtimes "
        "torchrun-efa-g5, mpi-efa-g5"
    ) in numbered_steps(steps)


# --------------------------------------------------------------------------------------------------
# tenancy: each team namespace a boundary


def test_each_team_namespace_gets_its_role_binding_and_network_policy_after_it_exists(
    stack: cdk.Stack,
) -> None:
    queues = _queues(stack, namespaces=["default", "vision"])
    template = Template.from_stack(stack).to_json()
    (access_id,) = [i for i in template["Resources"] if i.startswith("QueuesTeamAccess")]
    access = template["Resources"][access_id]
    objects = json.loads(access["Properties"]["Manifest"])
    for obj in objects:
        obj["metadata"].pop("labels")  # CDK's prune label
    assert objects == [
        team_role_binding("default"),
        same_namespace_ingress("default"),
        no_instance_metadata_egress("default"),
        team_role_binding("vision"),
        same_namespace_ingress("vision"),
        no_instance_metadata_egress("vision"),
    ]
    assert objects == queues.team_manifests
    namespaces_id, _ = _applied_namespaces(template)
    (patch_id,) = [
        i for i, r in template["Resources"].items() if r["Type"] == "Custom::AWSCDK-EKS-KubernetesPatch"
    ]
    assert {namespaces_id, patch_id} <= set(
        access["DependsOn"]
    )  # the namespaces exist and default is labelled


def test_a_team_role_gets_an_access_entry_in_its_team_s_group_and_nothing_else(stack: cdk.Stack) -> None:
    role = iam.Role.from_role_arn(
        stack, "Vision", "arn:aws:iam::111122223333:role/teams/Vision", mutable=False
    )
    queues = _queues(
        stack, namespaces=["vision", "speech"], team_roles={"vision": role}, pod_security="restricted"
    )
    assert queues.pod_security is PodSecurityLevel.RESTRICTED
    template = Template.from_stack(stack)
    entries = template.find_resources("AWS::EKS::AccessEntry")
    team = {i: r for i, r in entries.items() if i.startswith("QueuesTeamAccessEntry")}
    (entry,) = team.values()
    assert entry["Properties"] == {
        "ClusterName": {
            "Ref": next(
                i for i, r in template.to_json()["Resources"].items() if r["Type"] == "AWS::EKS::Cluster"
            )
        },
        "PrincipalArn": "arn:aws:iam::111122223333:role/teams/Vision",
        "KubernetesGroups": ["training-clusters:team:vision"],
        "Type": "STANDARD",
    }
    assert "AccessPolicies" not in entry["Properties"]  # what the group may do is the namespace's RoleBinding
    assert set(queues.team_access_entries) == {"vision"}
    _, namespaces = _applied_namespaces(template.to_json())
    assert {n["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] for n in namespaces} == {
        "restricted"
    }


def test_a_team_role_for_a_namespace_without_queues_is_refused(stack: cdk.Stack) -> None:
    role = iam.Role.from_role_arn(stack, "Speech", "arn:aws:iam::111122223333:role/Speech", mutable=False)
    with pytest.raises(ConfigurationError) as error:
        _queues(stack, namespaces=["vision"], team_roles={"speech": role})
    assert str(error.value) == (
        "Test/Queues: team_roles['speech'] must name one of the team namespaces (vision), got 'speech'"
    )


def test_a_pod_security_level_that_is_not_one_is_refused(stack: cdk.Stack) -> None:
    with pytest.raises(ConfigurationError) as error:
        _queues(stack, pod_security="privileged")
    assert str(error.value) == (
        "Test/Queues: pod_security must be one of baseline, restricted, got 'privileged'"
    )
