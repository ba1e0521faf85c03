"""Every Kubernetes object we apply passes the schema that will judge it (:mod:`tests.charts.schemas`): built-in
kinds the cluster's Kubernetes OpenAPI (strict), custom resources the CRDs of the chart versions we pin, with
their CEL rules. For every shipped environment (its template's manifests, the release manifest its handler
applies, the jobs ``training-clusters acceptance`` writes) and for every object a construct can emit with its
options."""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from training_clusters.acceptance import acceptance_plan
from training_clusters.acceptance.dcgm import dcgm_eks_jobs
from training_clusters.acceptance.mig import mig_eks_jobs
from training_clusters.catalog import lookup, lookup_hyperpod
from training_clusters.config import environment_name, load_environment
from training_clusters.constructs.eks.addons.gpu_operator import gpu_operator_values
from training_clusters.constructs.eks.cluster import KUBERNETES_VERSION
from training_clusters.constructs.hyperpod_eks.cluster import health_monitoring_agent_manifests
from training_clusters.environments import environment_files
from training_clusters.model.options import (
    MigLayout,
    MigStrategy,
    PodSecurityLevel,
    QueuePreemption,
    TopologyPlacement,
)
from training_clusters.model.releases import (
    DEFAULT_NCCL_TESTS_IMAGE,
    GPU_OPERATOR_CHART,
    PYTORCH_EFA_IMAGE,
    mpi_operator_manifest_url,
)
from training_clusters.monitoring.dashboards import dashboard_configmaps
from training_clusters.workloads.mig import mig_config_name, mig_devices, mig_resource
from training_clusters.workloads.nccl import nccl_test_mpijob
from training_clusters.workloads.scheduling import (
    DEFAULT_LOCAL_QUEUE,
    NODEGROUP_LABEL,
    SHARED_GPU_RESOURCE,
    FlavorCapacity,
    QueuePolicy,
    QueueRoute,
    Taint,
    gang_job,
    namespace_manifest,
    nccl_test_trainjob,
    queue_manifests,
    queue_mpijob,
    runtime_manifests,
)
from training_clusters.workloads.storage import (
    gp3_storage_class_manifest,
    lustre_volume_manifests,
    team_directory_manifests,
    team_volume_manifests,
)
from training_clusters.workloads.tenancy import (
    monitoring_ingress,
    pod_security_labels,
    same_namespace_ingress,
    team_namespace_objects,
    team_role_binding,
)

from ..assertions import manifest_objects
from ..conftest import ROOT, EnvironmentGates
from . import schemas
from .helm import render

ENVIRONMENTS = environment_files(ROOT / "environments")
KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"
#: Kinds judged by their own test rather than the pinned charts' CRDs, and where.
JUDGED_ELSEWHERE = {
    (
        "karpenter.sh/v1",
        "NodePool",
    ): "Karpenter's own CRD at two releases: tests/charts/test_karpenter_objects.py",
    ("karpenter.sagemaker.amazonaws.com/v1", "HyperpodNodeClass"): (
        "no published CRD (HyperPod installs it): AWS's documented examples, "
        "tests/constructs/test_hyperpod_eks_autoscaling.py"
    ),
}
RELEASE_MANIFEST = "Custom::ReleaseManifest"


def _yaml_objects(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def environment_objects(template: dict[str, Any], path: Path) -> tuple[str | None, list[dict[str, Any]]]:
    """The cluster's Kubernetes version and every object the environment applies: its template's manifests,
    the objects of each release manifest its handler applies, and the acceptance jobs' YAML."""
    resources = template["Resources"].values()
    versions = {r["Properties"]["Version"] for r in resources if r["Type"] == "AWS::EKS::Cluster"}
    objects = [
        obj
        for r in resources
        if r["Type"] == KUBERNETES_RESOURCE
        for obj in manifest_objects(r)
        if (obj.get("apiVersion"), obj.get("kind")) not in JUDGED_ELSEWHERE
    ]
    for release in (r for r in resources if r["Type"] == RELEASE_MANIFEST):
        assert release["Properties"]["ManifestUrl"] == mpi_operator_manifest_url()
        objects += schemas.release_manifest_objects()
    config = load_environment(path)
    plan = acceptance_plan(config, environment_name(config, path))
    objects += [
        obj for job in plan.jobs if job.filename.endswith(".yaml") for obj in _yaml_objects(job.content)
    ]
    assert len(versions) <= 1
    return (versions.pop() if versions else None), objects


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=[p.stem for p in ENVIRONMENTS])
def test_every_object_an_environment_applies_is_valid_for_what_judges_it(
    path: Path, environment_gates: EnvironmentGates
) -> None:
    version, objects = environment_objects(environment_gates.template(path), path)
    if version is None:  # no Kubernetes cluster: nothing may be applied to one
        assert objects == []
        return
    assert objects
    found, judged = schemas.problems(objects, version)
    assert found == [], "\n".join(found)
    assert len(judged) == len(objects)


# --------------------------------------------------------------------------------------------------
# every object a construct can emit, with its options

P5 = FlavorCapacity(
    name="p5",
    instance_type=lookup("p5.48xlarge"),
    nodes=2,
    efa_interfaces=32,
    labels={NODEGROUP_LABEL: "p5"},
    taints=(Taint("nvidia.com/gpu", "true", "NoSchedule"),),
)
G5 = FlavorCapacity(
    name="g5", instance_type=lookup("g5.8xlarge"), nodes=2, efa_interfaces=1, labels={NODEGROUP_LABEL: "g5"}
)
SHARED = FlavorCapacity(
    name="shared",
    instance_type=lookup("g5.2xlarge"),
    nodes=1,
    labels={NODEGROUP_LABEL: "shared"},
    gpu_replicas=4,
    gpu_resource=SHARED_GPU_RESOURCE,
)
MIG = FlavorCapacity(
    name="mig",
    instance_type=lookup("p4d.24xlarge"),
    nodes=1,
    efa_interfaces=4,
    labels={NODEGROUP_LABEL: "mig"},
    mig_devices={"nvidia.com/mig-1g.5gb": 7},
)
HYPERPOD = FlavorCapacity(
    name="hp",
    instance_type=lookup_hyperpod("ml.p5.48xlarge"),
    nodes=2,
    efa_interfaces=32,
    labels={"sagemaker.amazonaws.com/instance-group-name": "hp"},
    reported_instance_type="ml.p5.48xlarge",
    ready_labels={"sagemaker.amazonaws.com/node-health-status": "Schedulable"},
)
EVERY_POLICY = QueuePolicy(
    cohort="research",
    within_cluster_queue=QueuePreemption.LOWER_OR_NEWER_EQUAL_PRIORITY,
    reclaim_within_cohort=QueuePreemption.ANY,
    borrow_within_cohort=QueuePreemption.LOWER_PRIORITY,
    lending_limit_percent=50,
    borrowing_limit_percent=100,
)
ROUTE = QueueRoute(namespace="vision", local_queue=DEFAULT_LOCAL_QUEUE)
#: SageMaker HyperPod task governance's queue of team ``a``, at a priority class.
GOVERNED = QueueRoute(
    namespace="hyperpod-ns-a", local_queue="hyperpod-ns-a-localqueue", priority_class="training-priority"
)


def _acceptance_objects() -> Iterator[dict[str, Any]]:
    for capacity in (P5, G5):
        for queue in (None, DEFAULT_LOCAL_QUEUE):
            yield nccl_test_trainjob(
                name=f"nccl-{capacity.name}",
                nodegroup=capacity.name,
                instance_type=capacity.instance_type,
                nodes=capacity.nodes,
                image=DEFAULT_NCCL_TESTS_IMAGE,
                queue=queue,
            )
        yield nccl_test_mpijob(
            name=f"nccl-tests-{capacity.name}",
            instance_type=capacity.instance_type,
            workers=capacity.nodes,
            efa_interfaces=capacity.efa_interfaces,
            node_instance_type="ml.p5.48xlarge" if capacity is P5 else None,
        )
        for topology in TopologyPlacement:  # queued: workers asking for each placement (none on g5)
            yield queue_mpijob(
                nccl_test_mpijob(
                    name=f"nccl-tests-{capacity.name}-{topology.value}",
                    instance_type=capacity.instance_type,
                    workers=capacity.nodes,
                    efa_interfaces=capacity.efa_interfaces,
                ),
                local_queue=DEFAULT_LOCAL_QUEUE,
                instance_type=capacity.instance_type,
                topology=topology,
            )
    for capacity in (P5, SHARED, HYPERPOD):
        for topology in TopologyPlacement:
            yield gang_job(
                name=f"gang-{capacity.name}-{topology.value}",
                capacity=capacity,
                image=DEFAULT_NCCL_TESTS_IMAGE,
                topology=topology,
            )
    # under task governance: in the team's namespace, its LocalQueue and a priority class on every job
    yield gang_job(
        name="gang-hp-governed",
        capacity=HYPERPOD,
        image=DEFAULT_NCCL_TESTS_IMAGE,
        namespace=GOVERNED.namespace,
        queue=GOVERNED.local_queue,
        topology=TopologyPlacement.OFF,
        priority_class=GOVERNED.priority_class,
    )
    yield nccl_test_trainjob(
        name="nccl-hp-governed",
        nodegroup="hp",
        instance_type=HYPERPOD.instance_type,
        nodes=HYPERPOD.nodes,
        image=DEFAULT_NCCL_TESTS_IMAGE,
        namespace=GOVERNED.namespace,
        queue=GOVERNED.local_queue,
        priority_class=GOVERNED.priority_class,
    )
    yield queue_mpijob(
        nccl_test_mpijob(
            name="nccl-tests-hp-governed",
            instance_type=HYPERPOD.instance_type,
            workers=HYPERPOD.nodes,
            efa_interfaces=HYPERPOD.efa_interfaces,
            namespace=GOVERNED.namespace,
            node_instance_type="ml.p5.48xlarge",
        ),
        local_queue=GOVERNED.local_queue,
        instance_type=HYPERPOD.instance_type,
        topology=TopologyPlacement.OFF,
        priority_class=GOVERNED.priority_class,
    )
    jobs = [
        *(
            job
            for queue in (None, ROUTE, GOVERNED)
            for job in dcgm_eks_jobs(
                nodegroup="p5",
                instance=P5.instance_type,
                nodes=2,
                labels=dict(P5.labels),
                level=3,
                environment="e",
                queue=queue,
            )
        ),
        *(
            job
            for strategy in (MigStrategy.SINGLE, MigStrategy.MIXED)
            for queue in (None, ROUTE)
            for job in mig_eks_jobs(
                nodegroup="mig",
                instance=MIG.instance_type,
                config_name=mig_config_name(MIG.instance_type, MigLayout.parse("all-1g.5gb"), "mig"),
                profile="1g.5gb",
                strategy=strategy,
                labels=dict(MIG.labels),
                environment="e",
                queue=queue,
            )
        ),
    ]
    for job in jobs:
        if job.filename.endswith(".yaml"):
            yield from _yaml_objects(job.content)


def construct_objects() -> list[dict[str, Any]]:
    """Queues (every policy, flavor kind and topology), runtimes, namespaces, storage, monitoring, HyperPod's
    agent, and the acceptance jobs in each of their forms."""
    return [
        *queue_manifests([P5, G5, SHARED, MIG], namespaces=["default", "vision"], policy=EVERY_POLICY),
        *queue_manifests([G5], namespaces=["default"]),
        *queue_manifests([HYPERPOD], namespaces=["hyperpod-ns-a"], policy=QueuePolicy(cohort="c")),
        *(
            runtime
            for topology in TopologyPlacement  # node pods asking for each placement (none on g5)
            for runtime in runtime_manifests(
                [P5, G5, HYPERPOD],
                torchrun_image=PYTORCH_EFA_IMAGE.reference,
                mpi_image=DEFAULT_NCCL_TESTS_IMAGE,
                topology=topology,
            )
        ),
        *queue_manifests([P5, G5], namespaces=["default"], topology=TopologyPlacement.OFF),
        namespace_manifest("vision"),
        *(
            obj
            for level in PodSecurityLevel
            for namespace in ("default", "vision")
            for obj in team_namespace_objects(namespace, kubernetes_version=KUBERNETES_VERSION, level=level)
        ),
        *(  # a team namespace HyperPod made, as our patch leaves it, and its tenancy objects
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": GOVERNED.namespace,
                    "labels": pod_security_labels(level, KUBERNETES_VERSION),
                },
            }
            for level in PodSecurityLevel
        ),
        team_role_binding(GOVERNED.namespace),
        same_namespace_ingress(GOVERNED.namespace),
        monitoring_ingress("monitoring"),
        gp3_storage_class_manifest(),
        gp3_storage_class_manifest(name="gp3-scratch", reclaim_policy="Delete"),
        *lustre_volume_manifests(
            file_system_id="fs-0123456789abcdef0",
            dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            mount_name="abcdefgh",
            capacity_gib=1200,
        ),
        *team_volume_manifests(
            file_system_id="fs-0123456789abcdef0",
            dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            mount_name="abcdefgh",
            capacity_gib=1200,
            namespaces=["default", "vision"],
        ),
        *team_directory_manifests(
            file_system_id="fs-0123456789abcdef0",
            dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            mount_name="abcdefgh",
            capacity_gib=1200,
            namespaces=["default", "vision"],
        ),
        *dashboard_configmaps("monitoring"),
        *dashboard_configmaps("monitoring", lustre_file_system_id="fs-0123456789abcdef0"),
        *health_monitoring_agent_manifests(
            image="767398015722.dkr.ecr.us-east-1.amazonaws.com/hyperpod-health-monitoring-agent:1.0.0",
            gpu_types=["ml.p5.48xlarge"],
            neuron_types=["ml.trn1.32xlarge"],
        ),
        *_acceptance_objects(),
    ]


#: The Kubernetes versions the constructs' objects are checked for: the stacks' default and the newest HyperPod on
#: EKS documents (1.35, ``sagemaker-hyperpod-eks-prerequisites``).
CONSTRUCT_VERSIONS = tuple(dict.fromkeys((KUBERNETES_VERSION, "1.35")))


@pytest.mark.parametrize("version", CONSTRUCT_VERSIONS)
def test_every_object_a_construct_can_emit_is_valid(version: str) -> None:
    objects = construct_objects()
    found, judged = schemas.problems(objects, version)
    assert found == [], "\n".join(found)
    assert {obj["kind"] for obj in objects} >= {
        "ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "ClusterTrainingRuntime", "TrainJob",
        "MPIJob", "Job", "Namespace", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
        "ConfigMap", "DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "RoleBinding",
        "NetworkPolicy",
    }  # fmt: skip
    assert len(judged) == len(objects)


def test_the_mig_manager_and_dcgm_objects_the_gpu_operator_makes_from_our_values_are_valid(
    tmp_path: Path,
) -> None:
    """MIG config and DCGM's metrics reach the cluster through the chart: its ClusterPolicy (from which the
    operator makes the MIG manager, dcgm-exporter and its ServiceMonitor) and config maps, rendered from our
    values, pass the pinned gpu-operator's CRD and Kubernetes' schemas."""
    layout = MigLayout.parse("all-1g.5gb")
    layouts = {mig_config_name(MIG.instance_type, layout, "mig"): mig_devices(MIG.instance_type, layout)}
    values = gpu_operator_values(service_monitor=True, mig_layouts=layouts, mig_strategy=MigStrategy.MIXED)
    rendered = render(GPU_OPERATOR_CHART, values, tmp_path)
    ours = [doc for doc in rendered if doc["kind"] in ("ClusterPolicy", "ConfigMap")]
    (policy,) = (doc for doc in ours if doc["kind"] == "ClusterPolicy")
    assert policy["spec"]["migManager"]["enabled"] is True
    assert policy["spec"]["mig"]["strategy"] == "mixed"
    assert policy["spec"]["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    assert mig_resource(MigStrategy.MIXED, "1g.5gb") in MIG.quota()
    found, judged = schemas.problems(ours, "1.33")
    assert found == [], "\n".join(found)
    assert {j.schema for j in judged} == {"gpu-operator v25.3.4 (nvidia.com/v1)", "Kubernetes 1.33"}


# --------------------------------------------------------------------------------------------------
# the validator fails on one wrong field, for each schema family


def _runtime() -> dict[str, Any]:
    (torch, _mpi) = runtime_manifests([G5], torchrun_image="i", mpi_image="i")
    return torch


def _mpi_runtime() -> dict[str, Any]:
    return runtime_manifests([G5], torchrun_image="i", mpi_image="i")[1]


def _trainjob() -> dict[str, Any]:
    return nccl_test_trainjob(
        name="nccl-g5",
        nodegroup="g5",
        instance_type=G5.instance_type,
        nodes=2,
        image=DEFAULT_NCCL_TESTS_IMAGE,
    )


def _queues(kind: str) -> dict[str, Any]:
    (obj,) = (
        m for m in queue_manifests([P5], namespaces=["default"], policy=EVERY_POLICY) if m["kind"] == kind
    )
    return obj


def _mpijob() -> dict[str, Any]:
    return nccl_test_mpijob(name="nccl", instance_type=G5.instance_type, workers=2, efa_interfaces=1)


def _cluster_policy() -> dict[str, Any]:
    """The ClusterPolicy the pinned gpu-operator chart renders from our values (MIG manager on)."""
    layout = MigLayout.parse("all-1g.5gb")
    layouts = {mig_config_name(MIG.instance_type, layout, "mig"): mig_devices(MIG.instance_type, layout)}
    values = gpu_operator_values(service_monitor=True, mig_layouts=layouts, mig_strategy=MigStrategy.SINGLE)
    with tempfile.TemporaryDirectory() as directory:
        rendered = render(GPU_OPERATOR_CHART, values, Path(directory))
    (policy,) = (doc for doc in rendered if doc["kind"] == "ClusterPolicy")
    return policy


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change of the field at ``path`` (dots; ``[i]`` for a list item) to ``value``."""

    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = obj
        for part in parents:
            name, _, index = part.partition("[")
            node = node[name] if not index else node[name][int(index[:-1])]
        node[last] = value

    return change


#: (schema family, a valid object, the one change, the problem reported) — unknown field, wrong type, enum and
#: CEL rule for each family that has them.
WRONG_FIELDS: list[tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None], str]] = [
    # built-in kinds, Kubernetes' OpenAPI (strict)
    # (its OpenAPI has no enums but apiVersion and kind, and no CEL rules: the API server's Go code checks
    # values such as a StorageClass's volumeBindingMode)
    (
        "kubernetes",
        lambda: namespace_manifest("a"),
        _set("spec", {"finalizer": []}),
        "Namespace/a: spec: Additional properties are not allowed ('finalizer' was unexpected)",
    ),
    (
        "kubernetes",
        gp3_storage_class_manifest,
        _set("allowVolumeExpansion", "true"),
        "StorageClass/gp3: allowVolumeExpansion: 'true' is not of type 'boolean', 'null'",
    ),
    # Kubeflow Trainer 2.3.0
    (
        "kubeflow-trainer",
        _runtime,
        _set("spec.mlPolicy.torch", {"numProcPerNode": 8}),
        "spec.mlPolicy.torch.numProcPerNode: unknown field 'numProcPerNode'",
    ),
    (
        "kubeflow-trainer",
        _runtime,
        _set("spec.mlPolicy.numNodes", "2"),
        "spec.mlPolicy.numNodes: must be of type integer, got str '2'",
    ),
    (
        "kubeflow-trainer",
        _mpi_runtime,
        _set("spec.mlPolicy.mpi.mpiImplementation", "MPICH"),
        "spec.mlPolicy.mpi.mpiImplementation: must be one of ['OpenMPI', ''], got 'MPICH'",
    ),
    (
        "kubeflow-trainer",
        _runtime,
        _set("spec.mlPolicy.mpi", {}),
        "spec.mlPolicy: Only one of the policy can be configured",
    ),
    (
        "kubeflow-trainer",
        _trainjob,
        _set("metadata.name", "Nccl-G5"),
        "<root>: metadata.name must match RFC 1035 DNS label format",
    ),
    (
        "kubeflow-trainer",
        _trainjob,
        _set("spec.trainer.numProcPerNode", "auto"),
        "spec.trainer.numProcPerNode: must be of type integer, got str 'auto'",
    ),
    (
        "kubeflow-trainer",
        _trainjob,
        _set("spec.runtimeRef", {}),
        "spec.runtimeRef: required field(s) missing: name",
    ),
    (
        "kubeflow-trainer",
        _trainjob,
        _set("metadata.labelz", {}),
        "metadata: Additional properties are not allowed ('labelz' was unexpected)",
    ),
    # Kueue 0.19.2
    (
        "kueue",
        lambda: _queues("ResourceFlavor"),
        _set("spec.tolerations", [{"operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]),
        "spec.tolerations: effect must be 'NoExecute' when 'tolerationSeconds' is set",
    ),
    (
        "kueue",
        lambda: _queues("ClusterQueue"),
        _set("spec.cohort", "x"),
        "spec.cohort: unknown field 'cohort'",
    ),
    (
        "kueue",
        lambda: _queues("ResourceFlavor"),
        _set("spec.nodeLabels", {"a": 1}),
        "spec.nodeLabels.a: must be of type string, got int 1",
    ),
    (
        "kueue",
        lambda: _queues("ClusterQueue"),
        _set("spec.queueingStrategy", "Fifo"),
        "spec.queueingStrategy: must be one of ['StrictFIFO', 'BestEffortFIFO'], got 'Fifo'",
    ),
    (
        "kueue",
        lambda: _queues("Topology"),
        _set("spec.levels", [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "a"}]),
        "spec.levels: the kubernetes.io/hostname label can only be used at the lowest level of topology",
    ),
    # MPI Operator v0.7.0 and gpu-operator v25.3.4: their CRDs carry no CEL rule
    # (test_the_crds_without_cel_rules_have_none)
    ("mpi-operator", _mpijob, _set("spec.slotsPerWorkers", 1), "spec.slotsPerWorkers: unknown field"),
    (
        "mpi-operator",
        _mpijob,
        _set("spec.slotsPerWorker", "8"),
        "spec.slotsPerWorker: must be of type integer, got str '8'",
    ),
    (
        "mpi-operator",
        _mpijob,
        _set("spec.mpiImplementation", "MVAPICH"),
        "spec.mpiImplementation: must be one of",
    ),
    (
        "gpu-operator",
        _cluster_policy,
        _set("spec.migManager.enabledd", True),
        "spec.migManager.enabledd: unknown field 'enabledd'",
    ),
    (
        "gpu-operator",
        _cluster_policy,
        _set("spec.migManager.enabled", "true"),
        "spec.migManager.enabled: must be of type boolean, got str 'true'",
    ),
    (
        "gpu-operator",
        _cluster_policy,
        _set("spec.mig.strategy", "both"),
        "spec.mig.strategy: must be one of ['none', 'single', 'mixed'], got 'both'",
    ),
]


@pytest.mark.parametrize(
    ("family", "valid", "change", "expected"),
    WRONG_FIELDS,
    ids=[f"{family}-{expected.split(':')[0]}" for family, _, _, expected in WRONG_FIELDS],
)
def test_the_validator_refuses_one_wrong_field(
    family: str,
    valid: Callable[[], dict[str, Any]],
    change: Callable[[dict[str, Any]], None],
    expected: str,
) -> None:
    obj = valid()
    assert schemas.problems([obj], "1.33")[0] == []
    wrong = copy.deepcopy(obj)
    change(wrong)
    found, judged = schemas.problems([wrong], "1.33")
    assert len(found) == 1, found
    assert expected in found[0]
    assert judged[0].schema.startswith("Kubernetes" if family == "kubernetes" else family)


def test_the_crds_without_cel_rules_have_none() -> None:
    """The families above without a CEL case: the MPIJob and ClusterPolicy CRDs carry no rule to break."""
    crds = schemas.crd_schemas()
    for key in (("kubeflow.org/v2beta1", "MPIJob"), ("nvidia.com/v1", "ClusterPolicy")):
        assert "x-kubernetes-validations" not in json.dumps(crds[key].schema), key


# --------------------------------------------------------------------------------------------------
# CEL rules a plain CEL runtime cannot evaluate


def test_every_rule_of_the_loaded_crds_is_evaluated_or_listed_with_its_reason() -> None:
    rules = schemas.loaded_rules()
    assert len(rules) == 28  # 2 Trainer, 5 Kueue CRDs (the MPIJob and ClusterPolicy CRDs have none)
    unlisted = {rule for rule in rules if schemas.non_standard_functions(rule)} - set(schemas.NOT_EVALUABLE)
    assert unlisted == set()
    for rule, reason in schemas.NOT_EVALUABLE.items():
        assert rule in rules, f"NOT_EVALUABLE lists a rule no loaded CRD has: {rule}"
        assert schemas.non_standard_functions(rule), f"cel-python evaluates {rule}: take it off the list"
        assert reason
    for rule in rules - set(schemas.NOT_EVALUABLE):
        schemas.compiled(rule)  # every other rule compiles with cel-python


def _with_rule(rule: str) -> schemas.CrdSchema:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"sizes": {"type": "array", "items": {"type": "integer"}}},
                "x-kubernetes-validations": [{"rule": rule, "message": "sizes must be sorted"}],
            }
        },
    }
    return schemas.CrdSchema("example.com/v1", "Thing", schema, "example 1.0")


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # a Kubernetes library function (lists): not plain CEL, not listed -> the check fails, saying so
        (
            "self.sizes.isSorted()",
            "spec: rule 'self.sizes.isSorted()' calls ['isSorted'], which plain CEL lacks, "
            "and is not in NOT_EVALUABLE",
        ),
        ("quantity(self.q).isGreaterThan(quantity('1'))", "calls ['isGreaterThan', 'quantity']"),
        # plain CEL: evaluated, and its message reported when false
        ("self.sizes.all(i, i > 0) && self.sizes[0] <= self.sizes[1]", "spec: sizes must be sorted"),
        # an error while evaluating (a missing field) refuses the object, as on the API server
        ("self.missing == 1", "spec: rule 'self.missing == 1' errs: no such member in mapping: 'missing'"),
    ],
)
def test_a_rule_is_evaluated_or_the_check_says_why_not(rule: str, expected: str) -> None:
    thing = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "a"},
        "spec": {"sizes": [2, 1]},
    }
    found = schemas.custom_resource_problems(thing, _with_rule(rule), "1.33")
    assert len(found) == 1, found
    assert expected in found[0]


def test_a_listed_rule_is_left_to_the_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(schemas.NOT_EVALUABLE, "self.sizes.isSorted()", "Kubernetes' lists library")
    thing = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "a"},
        "spec": {"sizes": [2, 1]},
    }
    assert schemas.custom_resource_problems(thing, _with_rule("self.sizes.isSorted()"), "1.33") == []


def test_transition_rules_are_not_evaluated_on_create() -> None:
    thing = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "a"},
        "spec": {"sizes": [1]},
    }
    assert schemas.custom_resource_problems(thing, _with_rule("self == oldSelf && false"), "1.33") == []
