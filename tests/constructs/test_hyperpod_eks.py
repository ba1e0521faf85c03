"""HyperPodEksCluster: HyperPod's dependencies in the EKS cluster before the SageMaker cluster, the instance groups
(volume, labels, taints, training plans), the nodes' groups and role, and every refusal with its message."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.constructs.eks.scheduling import (
    TrainingQueues,
    TrainingRuntimes,
    kubeflow_trainer_values,
    nodegroup_capacity,
)
from training_clusters.constructs.hyperpod.cluster import LustreMount
from training_clusters.constructs.hyperpod_eks.cluster import (
    HEALTH_TOLERATION,
    EksInstanceGroup,
    HyperPodEksCluster,
    KubernetesTaint,
    health_monitoring_agent_image,
    health_monitoring_agent_manifests,
    hyperpod_efa_device_plugin_values,
    hyperpod_neuron_device_plugin_values,
    hyperpod_nvidia_device_plugin_values,
)
from training_clusters.model.capacity import Capacity
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.releases import (
    HEALTH_MONITORING_AGENT_REGISTRIES,
    HEALTH_MONITORING_AGENT_REPOSITORY,
    HEALTH_MONITORING_AGENT_TAG,
    HYPERPOD_VPC_CNI_VERSION,
)
from training_clusters.rules.hyperpod_eks import ADDRESSES_PER_NODE, pod_addresses_problem
from training_clusters.workloads.scheduling import NodePool, Taint

from ..assertions import manifest_objects
from ..conftest import AZS, PinnedStack

G5 = EksInstanceGroup(name="g5", instance_type="ml.g5.8xlarge", instance_count=2, volume_gib=500)
PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"


def build(
    stack: cdk.Stack,
    groups: list[EksInstanceGroup] | None = None,
    *,
    kubernetes_version: str = "1.35",
    **props: Any,
) -> HyperPodEksCluster:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    eks = GpuEksCluster(
        stack,
        "Eks",
        vpc=network.vpc,
        access_mode="API_AND_CONFIG_MAP",
        system_node_count=1,
        kubernetes_version=kubernetes_version,
    )
    return HyperPodEksCluster(
        stack,
        "HyperPod",
        cluster_name="ml-cluster",
        eks_cluster=eks,
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=groups if groups is not None else [G5],
        additional_security_groups=[network.efa_security_group],
        **props,
    )


def resources(stack: cdk.Stack, kind: str) -> dict[str, Any]:
    found: dict[str, Any] = Template.from_stack(stack).find_resources(kind)
    return found


def the_cluster(stack: cdk.Stack) -> tuple[str, dict[str, Any]]:
    ((logical_id, cluster),) = resources(stack, "AWS::SageMaker::Cluster").items()
    return logical_id, cluster


def depends_on(resource: dict[str, Any]) -> set[str]:
    value = resource.get("DependsOn", [])
    return {value} if isinstance(value, str) else set(value)


# --------------------------------------------------------------------------------------------------
# the order: HyperPod's dependencies exist before the SageMaker cluster (and go after it on delete)


def test_the_cluster_depends_on_agent_plugins_vpc_cni_and_mpi_operator(stack: cdk.Stack) -> None:
    cluster = build(stack)
    _, resource = the_cluster(stack)
    expected = {
        stack.get_logical_id(c.node.default_child)  # type: ignore[arg-type]
        for c in cluster.dependencies.resources
        if isinstance(c.node.default_child, cdk.CfnElement)
    } | {stack.get_logical_id(cluster.dependencies.vpc_cni)}
    assert expected <= depends_on(resource)
    kinds = {
        logical_id: r["Type"]
        for logical_id, r in Template.from_stack(stack).to_json()["Resources"].items()
        if logical_id in depends_on(resource)
    }
    helm = sorted(
        Template.from_stack(stack).to_json()["Resources"][i]["Properties"]["Chart"]
        for i, kind in kinds.items()
        if kind == "Custom::AWSCDK-EKS-HelmChart"
    )
    assert helm == ["aws-efa-k8s-device-plugin", "kubeflow-trainer", "kueue", "nvidia-device-plugin"]
    assert "AWS::EKS::Addon" in kinds.values()
    assert sum(kind == "Custom::AWSCDK-EKS-KubernetesResource" for kind in kinds.values()) >= 1


def test_the_agent_manifest_and_the_mpi_operator_come_before_the_cluster(stack: cdk.Stack) -> None:
    cluster = build(stack)
    _, resource = the_cluster(stack)
    agent = stack.get_logical_id(cluster.dependencies.agent.node.default_child)  # type: ignore[arg-type]
    assert agent in depends_on(resource)
    objects = manifest_objects(Template.from_stack(stack).to_json()["Resources"][agent])
    (daemon_set,) = [o for o in objects if o["kind"] == "DaemonSet"]
    images = [c["image"] for c in daemon_set["spec"]["template"]["spec"]["containers"]]
    assert images == [
        f"767398015722.dkr.ecr.us-east-1.amazonaws.com/{HEALTH_MONITORING_AGENT_REPOSITORY}:{HEALTH_MONITORING_AGENT_TAG}"
    ]  # the agent's account in us-east-1 (AWS's dependency chart's per-region images)
    assert cluster.dependencies.mpi_operator is not None


def _chart_id(stack: cdk.Stack, chart: str) -> str:
    (found,) = [
        i
        for i, r in resources(stack, "Custom::AWSCDK-EKS-HelmChart").items()
        if r["Properties"]["Chart"] == chart
    ]
    return found


def test_kueue_is_installed_on_the_system_nodes_after_the_mpi_operator_and_before_the_cluster(
    stack: cdk.Stack,
) -> None:
    cluster = build(stack)
    _, resource = the_cluster(stack)
    kueue = _chart_id(stack, "kueue")
    assert kueue in depends_on(resource)
    assert (
        cluster.dependencies.kueue is not None
        and cluster.dependencies.kueue.chart in cluster.dependencies.resources
    )
    assert cluster.dependencies.kueue.values["controllerManager"]["nodeSelector"] == {
        "training-clusters/role": "system"
    }
    mpi = stack.get_logical_id(cluster.dependencies.mpi_operator.resource.node.default_child)  # type: ignore[union-attr,arg-type]
    assert mpi in depends_on(Template.from_stack(stack).to_json()["Resources"][kueue])


def test_kubeflow_trainer_is_installed_on_the_system_nodes_before_kueue_and_the_cluster(
    stack: cdk.Stack,
) -> None:
    cluster = build(stack)
    _, resource = the_cluster(stack)
    trainer = _chart_id(stack, "kubeflow-trainer")
    assert trainer in depends_on(resource)
    assert cluster.dependencies.trainer is not None
    assert cluster.dependencies.trainer.chart in cluster.dependencies.resources
    assert (
        cluster.dependencies.trainer.values == kubeflow_trainer_values()
    )  # Trainer and JobSet, system nodes
    # Kueue manages TrainJobs and JobSets: it comes after their kinds exist
    assert trainer in depends_on(Template.from_stack(stack).to_json()["Resources"][_chart_id(stack, "kueue")])


def test_without_kubeflow_trainer_nothing_of_it_is_made(stack: cdk.Stack) -> None:
    cluster = build(stack, kubeflow_trainer=False)
    assert cluster.dependencies.trainer is None
    assert not any("KubeflowTrainer" in c.node.path for c in stack.node.find_all())
    assert cluster.dependencies.kueue is not None  # Kueue stays, after the MPI Operator only


def test_a_label_of_the_groups_name_cannot_be_taken_over(stack: cdk.Stack) -> None:
    """The name the queues and runtimes select by wins over a user label of the same key."""
    group = EksInstanceGroup(
        name="g5",
        instance_type="ml.g5.8xlarge",
        volume_gib=500,
        labels={"training-clusters/nodegroup": "other"},
    )
    cluster = build(stack, [group])
    _, resource = the_cluster(stack)
    (props,) = resource["Properties"]["InstanceGroups"]
    assert props["KubernetesConfig"]["Labels"] == {"training-clusters/nodegroup": "g5"}
    assert cluster.node_pools["g5"].labels == {"training-clusters/nodegroup": "g5"}


def test_kueue_takes_the_pods_ready_timeout(stack: cdk.Stack) -> None:
    cluster = build(stack, pods_ready_timeout_minutes=25)
    assert cluster.dependencies.kueue is not None
    assert "timeout: 25m" in cluster.dependencies.kueue.values["managerConfig"]["controllerManagerConfigYaml"]


def test_without_kueue_nothing_of_it_is_made(stack: cdk.Stack) -> None:
    cluster = build(stack, kueue=False)
    assert cluster.dependencies.kueue is None
    assert not any("Kueue" in c.node.path for c in stack.node.find_all())


def test_node_pools_say_what_each_group_provides_as_its_nodes_report_it(stack: cdk.Stack) -> None:
    p5 = EksInstanceGroup(
        name="p5",
        instance_type="ml.p5.48xlarge",
        instance_count=2,
        volume_gib=500,
        labels={"team": "research"},
        taints=[KubernetesTaint(key="nvidia.com/gpu", value="true")],
    )
    cpu = EksInstanceGroup(name="cpu", instance_type="ml.m5.2xlarge", instance_count=3, volume_gib=100)
    pools = build(stack, [p5, cpu]).node_pools
    assert {name: (p.nodes, p.efa_interfaces, p.reported_instance_type) for name, p in pools.items()} == {
        "p5": (2, 32, "ml.p5.48xlarge"),
        "cpu": (3, 0, "ml.m5.2xlarge"),
    }
    assert pools["p5"].instance_type.gpu_count == 8
    assert pools["p5"].labels == {"team": "research", "training-clusters/nodegroup": "p5"}
    assert pools["p5"].taints == (Taint("nvidia.com/gpu", "true", "NoSchedule"),)
    assert pools["p5"].ready_labels == {"sagemaker.amazonaws.com/node-health-status": "Schedulable"}
    capacity = nodegroup_capacity("p5", pools["p5"])
    # the flavor: the group's own nodes, only while HyperPod has them Schedulable
    assert capacity.node_labels() == {
        "node.kubernetes.io/instance-type": "ml.p5.48xlarge",
        "team": "research",
        "training-clusters/nodegroup": "p5",
        "sagemaker.amazonaws.com/node-health-status": "Schedulable",
    }
    assert capacity.quota() == {"nvidia.com/gpu": 16, "vpc.amazonaws.com/efa": 64, "hugepages-2Mi": "42244Mi"}


def test_without_the_mpi_operator_nothing_of_it_is_made(stack: cdk.Stack) -> None:
    cluster = build(stack, mpi_operator=False)
    assert cluster.dependencies.mpi_operator is None
    assert not any("MpiOperator" in c.node.path for c in stack.node.find_all())


def test_the_vpc_cni_add_on_is_pinned_at_a_version_hyperpod_supports(stack: cdk.Stack) -> None:
    build(stack)
    addons = {
        r["Properties"]["AddonName"]: r["Properties"] for r in resources(stack, "AWS::EKS::Addon").values()
    }
    assert addons["vpc-cni"]["AddonVersion"] == HYPERPOD_VPC_CNI_VERSION == "v1.20.1-eksbuild.3"
    assert addons["vpc-cni"]["ResolveConflicts"] == "OVERWRITE"
    # its network policy agent enforces the team namespaces' and the monitoring stack's NetworkPolicies
    assert json.loads(addons["vpc-cni"]["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}


# --------------------------------------------------------------------------------------------------
# the SageMaker cluster


def test_eks_orchestrator_continuous_provisioning_automatic_recovery(stack: cdk.Stack) -> None:
    build(stack)
    _, resource = the_cluster(stack)
    props = resource["Properties"]
    assert props["NodeRecovery"] == "Automatic"
    assert props["NodeProvisioningMode"] == "Continuous"
    assert props["Orchestrator"] == {"Eks": {"ClusterArn": {"Fn::GetAtt": [_eks_id(stack), "Arn"]}}}


def _eks_id(stack: cdk.Stack) -> str:
    (logical_id,) = resources(stack, "AWS::EKS::Cluster")
    return str(logical_id)


def test_each_group_has_its_volume_and_deep_health_checks_by_default(stack: cdk.Stack) -> None:
    build(stack)
    _, resource = the_cluster(stack)
    (group,) = resource["Properties"]["InstanceGroups"]
    assert group["InstanceType"] == "ml.g5.8xlarge" and group["InstanceCount"] == 2
    assert group["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
    assert group["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert group["LifeCycleConfig"]["OnCreate"] == "on_create.sh"
    # its name, on every node of it: what queues and runtimes select
    assert group["KubernetesConfig"] == {"Labels": {"training-clusters/nodegroup": "g5"}}


def test_labels_and_taints_reach_kubernetes_config(stack: cdk.Stack) -> None:
    group = EksInstanceGroup(
        name="p5",
        instance_type="ml.p5.48xlarge",
        volume_gib=2000,
        labels={"training-clusters/pool": "p5"},
        taints=[KubernetesTaint("nvidia.com/gpu", "true"), KubernetesTaint("dedicated", effect="NoExecute")],
        capacity=Capacity.training_plan(PLAN),
    )
    build(stack, [group])
    _, resource = the_cluster(stack)
    (props,) = resource["Properties"]["InstanceGroups"]
    assert props["KubernetesConfig"] == {
        "Labels": {"training-clusters/pool": "p5", "training-clusters/nodegroup": "p5"},
        "Taints": [
            {"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NoSchedule"},
            {"Key": "dedicated", "Effect": "NoExecute"},
        ],
    }
    assert props["TrainingPlanArn"] == PLAN


def test_the_l1_holds_each_groups_kubernetes_config_as_built(stack: cdk.Stack) -> None:
    """The instance groups are built whole, each with its KubernetesConfig and NetworkInterface: the exposed L1
    (``cluster``) says what the template says, with no override patched in by index afterwards."""
    groups = [
        EksInstanceGroup(
            name="p5",
            instance_type="ml.p5.48xlarge",
            volume_gib=2000,
            taints=[KubernetesTaint("nvidia.com/gpu", "true")],
            efa_interface_type="efa",
        ),
        EksInstanceGroup(name="g5", instance_type="ml.g5.8xlarge", volume_gib=500),
    ]
    cluster = build(stack, groups)
    built: list[Any] = list(cluster.cluster.instance_groups)
    assert [(g.instance_group_name, g.kubernetes_config.labels) for g in built] == [
        ("p5", {"training-clusters/nodegroup": "p5"}),
        ("g5", {"training-clusters/nodegroup": "g5"}),
    ]
    (taint,) = built[0].kubernetes_config.taints
    assert (taint.key, taint.value, taint.effect) == ("nvidia.com/gpu", "true", "NoSchedule")
    assert built[1].kubernetes_config.taints is None
    assert [g.network_interface and g.network_interface.interface_type for g in built] == ["efa", None]
    _, resource = the_cluster(stack)
    assert [g.get("NetworkInterface") for g in resource["Properties"]["InstanceGroups"]] == [
        {"InterfaceType": "efa"},
        None,
    ]


def test_nodes_carry_the_eks_cluster_group_hyperpods_own_and_the_efa_group(stack: cdk.Stack) -> None:
    cluster = build(stack)
    _, resource = the_cluster(stack)
    groups = resource["Properties"]["VpcConfig"]["SecurityGroupIds"]
    assert groups == [
        stack.resolve(cluster.hyperpod.security_group.security_group_id),
        {"Fn::GetAtt": [_eks_id(stack), "ClusterSecurityGroupId"]},
        stack.resolve(stack.node.find_child("Network").efa_security_group.security_group_id),  # type: ignore[attr-defined]
    ]


def test_provisioning_parameters_say_eks_and_name_the_file_system(stack: cdk.Stack) -> None:
    cluster = build(
        stack, lustre=LustreMount(dns_name="fs-1.fsx.us-east-1.amazonaws.com", mount_name="abcdefgh")
    )
    assert cluster.hyperpod.provisioning_parameters == {
        "version": "1.0.0",
        "workload_manager": "eks",
        "fsx_dns_name": "fs-1.fsx.us-east-1.amazonaws.com",
        "fsx_mountname": "abcdefgh",
    }


def test_the_node_role_pulls_images_and_assumes_pod_identity_on_this_cluster_only(stack: cdk.Stack) -> None:
    cluster = build(stack)
    policy = stack.resolve(cluster.node.find_child("NodePolicy").node.default_child.policy_document)  # type: ignore[union-attr]
    statements = {
        s["Sid"]: (frozenset(_list(s["Action"])), sorted(_list(s["Resource"]), key=str))
        for s in policy["Statement"]
    }
    assert statements == {
        "EcrAuth": (frozenset({"ecr:GetAuthorizationToken"}), ["*"]),
        # EKS's add-on registry of the region, HyperPod's agent, the PyTorch DLC, this account's own images
        "ImagePulls": (
            frozenset({"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"}),
            sorted(
                [
                    "arn:aws:ecr:us-east-1:602401143452:repository/*",
                    f"arn:aws:ecr:us-east-1:{HEALTH_MONITORING_AGENT_REGISTRIES['us-east-1']}:repository/"
                    "hyperpod-health-monitoring-agent",
                    "arn:aws:ecr:us-east-1:763104351884:repository/pytorch-training",
                    {"Fn::Join": ["", ["arn:aws:ecr:*:", {"Ref": "AWS::AccountId"}, ":repository/*"]]},
                ],
                key=str,
            ),
        ),
        "PodIdentity": (
            frozenset({"eks-auth:AssumeRoleForPodIdentity"}),
            [{"Fn::GetAtt": [_eks_id(stack), "Arn"]}],
        ),
    }
    _, resource = the_cluster(stack)
    assert stack.get_logical_id(cluster.node.find_child("NodePolicy").node.default_child) in depends_on(
        resource
    )  # type: ignore[arg-type]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# --------------------------------------------------------------------------------------------------
# what goes into the cluster, as data


def test_agent_image_per_region_and_a_region_without_one_refused() -> None:
    assert health_monitoring_agent_image("us-east-1") == (
        "767398015722.dkr.ecr.us-east-1.amazonaws.com/hyperpod-health-monitoring-agent:1.0.1892.0_1.0.424.0"
    )
    assert health_monitoring_agent_image("eu-west-2").startswith("011528288831.dkr.ecr.eu-west-2.")
    assert len(HEALTH_MONITORING_AGENT_REGISTRIES) == 17
    with pytest.raises(
        ValueError, match="me-south-1 has no health-monitoring agent image published by SageMaker HyperPod"
    ):
        health_monitoring_agent_image("me-south-1")


def test_agent_manifests_rbac_and_one_daemon_set_per_accelerator_kind() -> None:
    manifests = health_monitoring_agent_manifests(
        image="img", gpu_types=["ml.g5.8xlarge"], neuron_types=["ml.trn1.32xlarge"]
    )
    assert [(m["kind"], m["metadata"]["name"]) for m in manifests] == [
        ("Namespace", "aws-hyperpod"),
        ("ServiceAccount", "health-monitoring-agent"),
        ("ClusterRole", "health-monitoring-agent"),
        ("ClusterRoleBinding", "health-monitoring-agent"),
        ("ServiceAccount", "deep-health-check-service-account"),
        ("ClusterRole", "deep-health-check-service-account"),
        ("ClusterRoleBinding", "deep-health-check-service-account"),
        ("DaemonSet", "health-monitoring-agent"),
        ("DaemonSet", "health-monitoring-agent-non-nvidia"),
    ]
    agent_role = manifests[2]["rules"]
    assert agent_role == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": ["patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
    ]
    gpu, neuron = manifests[7], manifests[8]
    for daemon_set, types in ((gpu, ["ml.g5.8xlarge"]), (neuron, ["ml.trn1.32xlarge"])):
        spec = daemon_set["spec"]["template"]["spec"]
        (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert term == {
            "matchExpressions": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types}
            ]
        }
        assert spec["serviceAccountName"] == "health-monitoring-agent"
        assert spec["containers"][0]["securityContext"] == {
            "runAsUser": 1000,
            "runAsGroup": 2000,
            "allowPrivilegeEscalation": False,
        }
    assert "args" not in gpu["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in neuron["spec"]["template"]["spec"][
        "containers"
    ][0]["env"]


def test_without_accelerators_no_agent_daemon_set() -> None:
    manifests = health_monitoring_agent_manifests(image="img", gpu_types=[], neuron_types=[])
    assert "DaemonSet" not in {m["kind"] for m in manifests}


def test_device_plugins_select_ml_types_and_tolerate_the_health_taint() -> None:
    nvidia = hyperpod_nvidia_device_plugin_values(["ml.p5.48xlarge", "ml.g5.8xlarge"])
    (term,) = nvidia["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"][0]["values"] == ["ml.g5.8xlarge", "ml.p5.48xlarge"]
    assert (
        nvidia["tolerations"][-1]
        == HEALTH_TOLERATION
        == {
            "key": "sagemaker.amazonaws.com/node-health-status",
            "operator": "Equal",
            "value": "Unschedulable",
            "effect": "NoSchedule",
        }
    )
    efa = hyperpod_efa_device_plugin_values(
        ["ml.g5.8xlarge"], "602401143452.dkr.ecr.us-east-1.amazonaws.com/x"
    )
    assert efa["supportedInstanceLabels"] == {
        "keys": ["node.kubernetes.io/instance-type"],
        "values": ["ml.g5.8xlarge"],
    }
    assert HEALTH_TOLERATION in efa["tolerations"]


def test_the_neuron_plugin_keeps_its_chart_tolerations_and_adds_the_health_taint() -> None:
    """Helm replaces ``devicePlugin.tolerations`` whole: the chart's own two must still be there."""
    neuron = hyperpod_neuron_device_plugin_values(["ml.trn1.32xlarge"])
    assert neuron["neuronInstances"] == ["ml.trn1.32xlarge"]
    assert neuron["devicePlugin"]["tolerations"] == [
        {"key": "CriticalAddonsOnly", "operator": "Exists"},
        {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"},
        HEALTH_TOLERATION,
    ]


def test_a_trainium_group_gets_the_neuron_plugin_with_the_health_toleration_before_the_cluster(
    stack: cdk.Stack,
) -> None:
    trn = EksInstanceGroup(name="trn", instance_type="ml.trn1.32xlarge", volume_gib=500)
    cluster = build(stack, [trn])
    deps = cluster.dependencies
    assert (deps.nvidia_device_plugin, deps.neuron_values) == (
        None,
        hyperpod_neuron_device_plugin_values(["ml.trn1.32xlarge"]),
    )
    template = Template.from_stack(stack).to_json()["Resources"]
    (neuron,) = [
        i for i, r in template.items() if r.get("Properties", {}).get("Chart") == "neuron-helm-chart"
    ]
    (sagemaker,) = [r for r in template.values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert neuron in depends_on(sagemaker)
    values = json.loads(template[neuron]["Properties"]["Values"])
    assert values["devicePlugin"]["tolerations"][-1] == HEALTH_TOLERATION


def test_a_cpu_group_without_efa_gets_no_device_plugin(stack: cdk.Stack) -> None:
    cluster = build(stack, [EksInstanceGroup(name="cpu", instance_type="ml.m5.xlarge", volume_gib=100)])
    deps = cluster.dependencies
    assert (deps.nvidia_device_plugin, deps.efa_device_plugin, deps.neuron_device_plugin) == (
        None,
        None,
        None,
    )


# --------------------------------------------------------------------------------------------------
# refusals, each with its message


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        (
            [EksInstanceGroup(name="g5", instance_type="ml.g5.8xlarge")],
            "Test/HyperPod: instance_groups[0].volume_gib is required on HyperPod with EKS: the lifecycle script "
            "moves containerd's and the kubelet's data",
        ),
        (
            [EksInstanceGroup(name="g5", instance_type="ml.g5.8xlarge", volume_gib=16385)],
            "instance_groups[0].volume_gib must be between 1 and 16384, got 16385",
        ),
        (
            [
                EksInstanceGroup(
                    name="g5", instance_type="ml.g5.8xlarge", volume_gib=500, capacity=Capacity.spot()
                )
            ],
            "instance_groups[0].capacity spot is not supported by SageMaker HyperPod",
        ),
        (
            [
                EksInstanceGroup(
                    name="g5",
                    instance_type="ml.g5.8xlarge",
                    volume_gib=500,
                    labels={"sagemaker.amazonaws.com/x": "y"},
                )
            ],
            "instance_groups[0].labels key 'sagemaker.amazonaws.com/x' is in sagemaker.amazonaws.com/, which "
            "SageMaker HyperPod sets itself",
        ),
        (
            [
                EksInstanceGroup(
                    name="g5", instance_type="ml.g5.8xlarge", volume_gib=500, labels={"bad key": "y"}
                )
            ],
            "instance_groups[0].labels label key 'bad key' is not a Kubernetes label key",
        ),
        (
            [
                EksInstanceGroup(
                    name="g5",
                    instance_type="ml.g5.8xlarge",
                    volume_gib=500,
                    taints=[KubernetesTaint("a", effect="Never")],
                )
            ],
            "instance_groups[0].taints[0] effect of 'a' must be one of NoSchedule, PreferNoSchedule, NoExecute, got 'Never'",
        ),
        ([], "instance_groups must hold at least one group, got none"),
    ],
    ids=["no-volume", "volume-too-big", "spot", "reserved-label", "bad-label", "bad-taint", "no-groups"],
)
def test_bad_groups_are_refused(stack: cdk.Stack, groups: list[EksInstanceGroup], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        build(stack, groups)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (
            "1.36",
            "must be one of 1.34, 1.35 (SageMaker HyperPod supports 1.30, 1.31, 1.32, 1.33, 1.34, 1.35), got '1.36'",
        ),
        ("1.33", "must be one of 1.34, 1.35 (the kubectl layer (v1.35) drives 1.34, 1.35, 1.36), got '1.33'"),
    ],
)
def test_a_kubernetes_version_hyperpod_does_not_support_is_refused(
    stack: cdk.Stack, version: str, message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        build(stack, kubernetes_version=version)
    assert f"Test/HyperPod: eks_cluster.kubernetes_version {message}" in str(error.value)


@pytest.mark.parametrize("version", ["1.34", "1.35"])
def test_the_supported_versions_are_accepted(stack: cdk.Stack, version: str) -> None:
    build(stack, kubernetes_version=version)
    (eks,) = resources(stack, "AWS::EKS::Cluster").values()
    assert eks["Properties"]["Version"] == version


def test_a_region_without_the_agent_image_is_refused(app: cdk.App) -> None:
    stack = PinnedStack(app, "Elsewhere", env=cdk.Environment(region="me-south-1"))
    with pytest.raises(ConfigurationError) as error:
        build(stack)
    assert (
        "Elsewhere/HyperPod/Dependencies: region me-south-1 has no health-monitoring agent image published by "
        "SageMaker HyperPod; regions with one: ap-northeast-1," in str(error.value)
    )


def test_an_old_vpc_cni_is_refused(stack: cdk.Stack) -> None:
    with pytest.raises(ConfigurationError) as error:
        build(stack, vpc_cni_version="v1.18.2-eksbuild.1")
    assert (
        "vpc_cni_version must be v1.18.3 or newer (the oldest VPC CNI SageMaker HyperPod supports), got "
        "v1.18.2-eksbuild.1" in str(error.value)
    )


def test_the_oldest_supported_vpc_cni_is_accepted(stack: cdk.Stack) -> None:
    build(stack, vpc_cni_version="v1.18.3-eksbuild.1")


def test_pod_addresses_boundary() -> None:
    usable = 16379
    fits = usable // ADDRESSES_PER_NODE
    assert pod_addresses_problem(fits, ADDRESSES_PER_NODE, usable) is None
    problem = pod_addresses_problem(fits + 1, ADDRESSES_PER_NODE, usable)
    assert problem is not None and f"adds up to {fits + 1} HyperPod nodes" in problem


def test_runtimes_over_the_node_pools_run_on_the_groups_schedulable_nodes(stack: cdk.Stack) -> None:
    """A runtime's pods select the group's name label HyperPod applies, and Schedulable; they tolerate the group's
    taints and not HyperPod's health taint (a node under deep health checks takes no training pod)."""
    p5 = EksInstanceGroup(
        name="p5",
        instance_type="ml.p5.48xlarge",
        instance_count=2,
        volume_gib=500,
        taints=[KubernetesTaint(key="nvidia.com/gpu", value="true")],
    )
    cpu = EksInstanceGroup(name="cpu", instance_type="ml.m5.2xlarge", instance_count=1, volume_gib=100)
    cluster = build(stack, [p5, cpu])
    eks = stack.node.find_child("Eks")
    assert isinstance(eks, GpuEksCluster) and cluster.dependencies.trainer is not None
    runtimes = TrainingRuntimes(
        stack, "Runtimes", cluster=eks, trainer=cluster.dependencies.trainer, nodegroups=cluster.node_pools
    )
    assert runtimes.names == {"p5": ("torchrun-efa-p5", "mpi-efa-p5")}  # no EFA, no GPU: no runtime
    for runtime in runtimes.manifests:
        (node,) = [j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node"]
        pod = node["template"]["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {
            "training-clusters/nodegroup": "p5",
            "sagemaker.amazonaws.com/node-health-status": "Schedulable",
        }
        assert pod["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        ]
        assert pod["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == 32


def test_queues_over_the_node_pools_take_catalogue_types_and_refuse_a_name(stack: cdk.Stack) -> None:
    """A pool's instance type is the catalogue's (its architecture a str enum, accepted); a bare name is refused."""
    cluster = build(stack)
    eks = stack.node.find_child("Eks")
    assert isinstance(eks, GpuEksCluster) and cluster.dependencies.kueue is not None
    queues = TrainingQueues(
        stack, "Queues", cluster=eks, kueue=cluster.dependencies.kueue, nodegroups=cluster.node_pools
    )
    assert [f["name"] for f in queues.cluster_queue["spec"]["resourceGroups"][0]["flavors"]] == ["g5"]
    with pytest.raises(ConfigurationError) as raised:
        TrainingQueues(
            stack,
            "Named",
            cluster=eks,
            kueue=cluster.dependencies.kueue,
            nodegroups={"p5": NodePool(instance_type="p5.48xlarge", nodes=1)},  # type: ignore[arg-type]
        )
    assert str(raised.value) == (
        "Test/Named: nodegroups['p5'].instance_type must be an InstanceType, got str 'p5.48xlarge'"
    )
