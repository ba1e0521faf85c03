"""Every shipped environment file synthesizes with 0 cdk-nag findings and 0 cfn-lint errors."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from training_clusters.config import load_environment
from training_clusters.environments import environment_files, stack_class
from training_clusters.stacks.base import TrainingEnvironmentStack
from training_clusters.stacks.eks import EksTrainingEnvironment
from training_clusters.stacks.hyperpod_eks import HyperPodEksEnvironment
from training_clusters.stacks.parallelcluster import ParallelClusterEnvironment

from ..assertions import manifest_objects, text, values_of
from ..conftest import ROOT, EnvironmentGates, GateResult

ENVIRONMENTS = environment_files(ROOT / "environments")
EKS = [p for p in ENVIRONMENTS if p.stem.startswith("eks-")]
PARALLELCLUSTER = [p for p in ENVIRONMENTS if p.stem.startswith("parallelcluster-")]
HYPERPOD_EKS = [p for p in ENVIRONMENTS if p.stem.startswith("hyperpod-eks-")]
#: The HyperPod-on-EKS files under SageMaker HyperPod task governance (its Kueue, not ours).
GOVERNED = [p for p in HYPERPOD_EKS if load_environment(p).hyperpod_eks.task_governance is not None]  # type: ignore[union-attr]
QUEUED_HYPERPOD_EKS = [p for p in HYPERPOD_EKS if p not in GOVERNED]


def test_the_network_and_hyperpod_environments_are_shipped() -> None:
    names = {p.stem for p in ENVIRONMENTS}
    assert {"network-storage", "hyperpod-slurm", "hyperpod-p5"} <= names


@pytest.fixture
def gated(
    environment_gates: EnvironmentGates,
) -> Callable[[Path], tuple[TrainingEnvironmentStack, GateResult]]:
    """Each environment synthesized once per session with the gates (see conftest.EnvironmentGates)."""
    return environment_gates.get


def template_of(stack: TrainingEnvironmentStack, result: GateResult) -> dict[str, Any]:
    assert result.assembly is not None
    template: dict[str, Any] = json.loads((Path(result.assembly.directory) / stack.template_file).read_text())
    return template


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=[p.stem for p in ENVIRONMENTS])
def test_environment_passes_the_gates(gated, path: Path) -> None:  # type: ignore[no-untyped-def]
    stack, result = gated(path)
    result.assert_clean()
    _assert_secure_by_default(template_of(stack, result))
    assert stack.stack_name == f"training-{path.stem}"
    assert type(stack) is stack_class(load_environment(path))


@pytest.mark.parametrize("path", EKS, ids=[p.stem for p in EKS])
def test_eks_environment_says_how_to_reach_the_cluster(gated, path: Path) -> None:  # type: ignore[no-untyped-def]
    stack, result = gated(path)
    assert isinstance(stack, EksTrainingEnvironment)
    command = text(template_of(stack, result)["Outputs"]["UpdateKubeconfigCommand"]["Value"])
    config = load_environment(path)
    assert re.fullmatch(
        rf"aws eks update-kubeconfig --name \$\{{\w+\}} --region {config.region} --role-arn \S+", command
    ), command


#: What each GPU instance group of the shipped HyperPod-on-EKS files provides, from its file and the catalogue:
#: flavor -> (instance type the nodes report, their labels, taints, quota).
HYPERPOD_EKS_QUOTAS: dict[
    str, dict[str, tuple[str, dict[str, str], list[dict[str, str]], dict[str, Any]]]
] = {
    "hyperpod-eks-g5": {
        "g5": (
            "ml.g5.8xlarge",
            {"training-clusters/pool": "g5", "training-clusters/nodegroup": "g5"},
            [],
            # 2 nodes x 1 A10G, x 1 EFA interface, x 1761 2 MiB huge pages (32 vCPUs x 110 MiB / 2 MiB + 1)
            {"nvidia.com/gpu": 2, "vpc.amazonaws.com/efa": 2, "hugepages-2Mi": "7044Mi"},
        )
    },
    "hyperpod-eks-autoscaling": {
        "g5": (
            "ml.g5.8xlarge",
            {"training-clusters/pool": "g5", "training-clusters/nodegroup": "g5"},
            [],
            # up to 4 nodes (max_count) x 1 A10G, x 1 EFA interface, x 1761 2 MiB huge pages
            {"nvidia.com/gpu": 4, "vpc.amazonaws.com/efa": 4, "hugepages-2Mi": "14088Mi"},
        ),
        "p4d": (
            "ml.p4d.24xlarge",
            {"training-clusters/pool": "p4d", "training-clusters/nodegroup": "p4d"},
            [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
            # up to 2 nodes x 8 A100, x 4 EFA interfaces, x 5281 2 MiB huge pages (96 vCPUs x 110 MiB / 2 MiB + 1)
            {"nvidia.com/gpu": 16, "vpc.amazonaws.com/efa": 8, "hugepages-2Mi": "21124Mi"},
        ),
    },
    "hyperpod-eks-p5": {
        "p5": (
            "ml.p5.48xlarge",
            {"training-clusters/pool": "p5", "training-clusters/nodegroup": "p5"},
            [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
            # 2 nodes x 8 H100, x 32 EFA interfaces, x 10561 2 MiB huge pages (192 vCPUs x 110 MiB / 2 MiB + 1)
            {"nvidia.com/gpu": 16, "vpc.amazonaws.com/efa": 64, "hugepages-2Mi": "42244Mi"},
        )
    },
}


#: The shipped HyperPod-on-EKS files whose groups HyperPod's Karpenter scales (their quota: max_count nodes).
AUTOSCALED = {"hyperpod-eks-autoscaling"}


@pytest.mark.parametrize("path", QUEUED_HYPERPOD_EKS, ids=[p.stem for p in QUEUED_HYPERPOD_EKS])
def test_hyperpod_eks_queues_hold_what_the_instance_groups_provide(gated, path: Path) -> None:  # type: ignore[no-untyped-def]
    stack, result = gated(path)
    assert isinstance(stack, HyperPodEksEnvironment) and stack.queues is not None
    objects = {(m["kind"], m["metadata"]["name"]): m for m in stack.queues.manifests}
    ((_, flavors),) = [(k, v) for k, v in HYPERPOD_EKS_QUOTAS.items() if k == path.stem]
    (group,) = stack.queues.cluster_queue["spec"]["resourceGroups"]
    assert {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]} == {
        name: quota for name, (_, _, _, quota) in flavors.items()
    }
    for name, (reported, labels, taints, _) in flavors.items():
        spec = objects[("ResourceFlavor", name)]["spec"]
        # the group's nodes (its name label, from KubernetesConfig), only while HyperPod has them Schedulable;
        # Karpenter's nodes get that label after they start, so autoscaled groups' pods do not select it
        schedulable = (
            {} if path.stem in AUTOSCALED else {"sagemaker.amazonaws.com/node-health-status": "Schedulable"}
        )
        assert spec["nodeLabels"] == {"node.kubernetes.io/instance-type": reported, **labels, **schedulable}
        assert spec.get("nodeTaints", []) == taints
        assert spec.get("tolerations", []) == [{**t, "operator": "Equal"} for t in taints]
    # the queues are in the template, applied after Kueue, which is installed before the SageMaker cluster
    resources = template_of(stack, result)["Resources"]
    (kueue,) = [i for i, r in resources.items() if r.get("Properties", {}).get("Chart") == "kueue"]
    (queues,) = [
        i
        for i, r in resources.items()
        if "Manifest" in r.get("Properties", {})
        and "ClusterQueue" in {o["kind"] for o in manifest_objects(r)}
    ]
    (cluster,) = [i for i, r in resources.items() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert kueue in resources[cluster]["DependsOn"]
    assert kueue in resources[queues]["DependsOn"]
    assert queues not in resources[cluster]["DependsOn"]


def test_a_governed_hyperpod_eks_file_is_shipped_and_the_others_queue() -> None:
    assert [p.stem for p in GOVERNED] == ["hyperpod-eks-governance"]
    assert QUEUED_HYPERPOD_EKS


@pytest.mark.parametrize("path", GOVERNED, ids=[p.stem for p in GOVERNED])
def test_task_governance_replaces_our_kueue_and_comes_after_the_cluster(gated, path: Path) -> None:  # type: ignore[no-untyped-def]
    """No Kueue chart, ClusterQueue or LocalQueue of ours; the add-on after the system nodes, the policy after
    the add-on and the SageMaker cluster, each team's quota after the policy, its namespace's labels after it."""
    stack, result = gated(path)
    assert isinstance(stack, HyperPodEksEnvironment)
    assert stack.queues is None and stack.hyperpod.dependencies.kueue is None
    resources = template_of(stack, result)["Resources"]
    assert not [i for i, r in resources.items() if r.get("Properties", {}).get("Chart") == "kueue"]
    kinds = {
        o["kind"]
        for r in resources.values()
        if "Manifest" in r.get("Properties", {})
        for o in manifest_objects(r)
    }
    assert not kinds & {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology"}

    def of_type(kind: str) -> dict[str, Any]:
        return {i: r for i, r in resources.items() if r["Type"] == kind}

    (addon,) = [
        i
        for i, r in of_type("AWS::EKS::Addon").items()
        if r["Properties"]["AddonName"].endswith("taskgovernance")
    ]
    (nodegroup,) = of_type("AWS::EKS::Nodegroup")
    (cluster,) = of_type("AWS::SageMaker::Cluster")
    (policy,) = of_type("AWS::SageMaker::ClusterSchedulerConfig")
    quotas = of_type("AWS::SageMaker::ComputeQuota")
    assert resources[addon]["DependsOn"] == [nodegroup]
    assert sorted(resources[policy]["DependsOn"]) == sorted([cluster, addon])
    teams = load_environment(path).hyperpod_eks.task_governance.teams  # type: ignore[union-attr]
    assert sorted(q["Properties"]["ComputeQuotaTarget"]["TeamName"] for q in quotas.values()) == sorted(
        t.name for t in teams
    )
    patches = {
        r["Properties"]["ResourceName"]: r for r in of_type("Custom::AWSCDK-EKS-KubernetesPatch").values()
    }
    for quota_id, quota in quotas.items():
        assert quota["DependsOn"] == [policy]
        namespace = f"hyperpod-ns-{quota['Properties']['ComputeQuotaTarget']['TeamName']}"
        assert quota_id in patches[f"namespace/{namespace}"]["DependsOn"]
    # the TrainJob runtimes ask for no Topology (HyperPod's Kueue has none of ours)
    runtimes = [
        o for r in resources.values() if "Manifest" in r.get("Properties", {}) for o in manifest_objects(r)
    ]
    runtimes = [o for o in runtimes if o["kind"] == "ClusterTrainingRuntime"]
    assert runtimes and "kueue.x-k8s.io/podset-preferred-topology" not in json.dumps(runtimes)
    steps = text(template_of(stack, result)["Outputs"]["NextSteps"]["Value"])
    assert (
        "Train: a team's jobs go in its namespace hyperpod-ns-<team> (hyperpod-ns-research, hyperpod-ns-inference) "
        "labelled kueue.x-k8s.io/queue-name: hyperpod-ns-<team>-localqueue (e.g. hyperpod-ns-research-localqueue) "
        "and kueue.x-k8s.io/priority-class: one of inference-priority, training-priority, experiment-priority; "
        "HyperPod's Kueue starts a job when its team's quota, or idle compute it may borrow, holds it"
    ) in steps


@pytest.mark.parametrize("path", PARALLELCLUSTER, ids=[p.stem for p in PARALLELCLUSTER])
def test_parallelcluster_environment_builds_its_stack_class(gated, path: Path) -> None:  # type: ignore[no-untyped-def]
    stack, _ = gated(path)
    assert isinstance(stack, ParallelClusterEnvironment)


#: Output that says how to connect, per orchestrator section.
_CONNECT = {
    "eks": "UpdateKubeconfigCommand",
    "parallelcluster": "HeadNodeSsmCommand",
    "hyperpod": "ControllerSsmCommand",
    "hyperpod_eks": "UpdateKubeconfigCommand",
}
_LOGS = {
    "eks": "ControlPlaneLogGroup",
    "parallelcluster": "ClusterLogGroups",
    "hyperpod": "LifecycleLogGroup",
    "hyperpod_eks": "LifecycleLogGroup",
}


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=[p.stem for p in ENVIRONMENTS])
def test_environment_outputs_how_to_connect_where_logs_are_and_the_mount_point(gated, path: Path) -> None:  # type: ignore[no-untyped-def]
    stack, result = gated(path)
    outputs = template_of(stack, result)["Outputs"]
    config = load_environment(path)
    section = next((name for name in _CONNECT if getattr(config, name) is not None), None)
    assert "FlowLogGroup" in outputs
    if section is not None:
        assert {_CONNECT[section], _LOGS[section]} <= set(outputs), sorted(outputs)
    if config.storage.lustre is not None:
        mount_target = text(stack.resolve(stack.shared_storage.mount_target()))
        assert text(outputs["SharedStorageMount"]["Value"]) == (
            f"{mount_target} mounted at {config.storage.lustre.mount_dir}"
        )
        assert "SharedStorageMountCommand" in outputs
        if section in ("eks", "hyperpod_eks"):
            assert "claimName: fsx-lustre" in outputs["SharedStorageClaim"]["Value"]


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=[p.stem for p in ENVIRONMENTS])
def test_every_resource_is_tagged_with_project_environment_and_cost_centre(gated, path: Path) -> None:  # type: ignore[no-untyped-def]
    stack, result = gated(path)
    expected = load_environment(path).resource_tags(path.stem)
    assert {"project", "environment", "cost-centre"} <= set(expected)
    assert result.assembly is not None
    # stack tags: `cdk deploy` passes them to CloudFormation, which tags every resource it creates with them
    artifact = result.assembly.get_stack_artifact(stack.artifact_id)
    assert expected.items() <= artifact.tags.items()
    template = template_of(stack, result)
    for logical_id, resource in template["Resources"].items():
        # explicit tags never contradict them
        tags = (resource.get("Properties") or {}).get("Tags")
        if isinstance(tags, list):
            found = {t["Key"]: t["Value"] for t in tags if isinstance(t, dict) and "Key" in t}
            assert all(found.get(k, v) == v for k, v in expected.items()), logical_id
        # instances, volumes and interfaces that nodegroups launch get them from the launch template
        if resource["Type"] == "AWS::EC2::LaunchTemplate":
            specs = resource["Properties"]["LaunchTemplateData"]["TagSpecifications"]
            assert {s["ResourceType"] for s in specs} == {"instance", "volume", "network-interface"}
            for spec in specs:
                assert expected.items() <= {t["Key"]: t["Value"] for t in spec["Tags"]}.items()
    if isinstance(stack, ParallelClusterEnvironment):
        # ParallelCluster creates its own stack: its config's Tags go on everything it makes
        pcluster_tags = {t["Key"]: t["Value"] for t in stack.cluster.concrete_configuration()["Tags"]}
        assert expected.items() <= pcluster_tags.items()


def _assert_secure_by_default(template: dict[str, object]) -> None:
    resources = template["Resources"]
    assert isinstance(resources, dict)
    for logical_id, resource in resources.items():
        props = resource.get("Properties", {})
        kind = resource["Type"]
        if kind == "AWS::EC2::SecurityGroup":
            for rule in props.get("SecurityGroupIngress", []):
                assert rule.get("CidrIp") != "0.0.0.0/0", logical_id
                assert rule.get("CidrIpv6") != "::/0", logical_id
        if kind == "AWS::EC2::SecurityGroupIngress":
            assert props.get("CidrIp") != "0.0.0.0/0", logical_id
            assert props.get("CidrIpv6") != "::/0", logical_id
        if kind == "AWS::EC2::Subnet":
            assert props.get("MapPublicIpOnLaunch") is False, logical_id
        if kind in ("AWS::FSx::FileSystem", "AWS::S3::Bucket"):
            assert resource.get("DeletionPolicy") == "Retain", logical_id
    # every interface that says anything says False: not True, nor "true", nor a condition that may be true
    assert all(value is False for value in values_of(template, "AssociatePublicIpAddress"))
