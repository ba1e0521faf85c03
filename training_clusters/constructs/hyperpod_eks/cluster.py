"""HyperPodEksCluster: a SageMaker HyperPod cluster orchestrated by one of our EKS clusters.

HyperPod joins its ``ml.`` instances to an existing EKS cluster as nodes. What must be in that cluster before
``AWS::SageMaker::Cluster`` is created (AWS ships it as an unpublished Helm chart, ``helm_chart/
HyperPodHelmChart`` in github.com/aws/sagemaker-hyperpod-cli, which its reference CloudFormation clones at
deploy time) is declared here from the facts of that chart, pinned, and applied through the cluster's
kubectl provider (:class:`HyperPodEksDependencies`):

- HyperPod's health-monitoring agent (the DaemonSet that reports GPU and Neuron faults HyperPod recovers
  from), its image from the regional registry AWS publishes it in (:data:`HEALTH_MONITORING_AGENT_REGISTRIES`)
  and its RBAC; the deep health checks' service account and RBAC;
- the NVIDIA and EFA device plugins (and Neuron on Trainium), scheduled on the groups' ``ml.`` instance types
  (the label HyperPod's nodes carry) and tolerating HyperPod's health taint
  (``sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule``);
- the Amazon VPC CNI add-on at a version HyperPod supports, the MPI Operator, Kubeflow Trainer (with JobSet)
  and Kueue, their controllers on the EKS cluster's system nodes.

Each instance group's nodes carry ``training-clusters/nodegroup: <group>`` (set in its ``KubernetesConfig``,
which HyperPod applies to the group's nodes and keeps through replacement), so queues and training runtimes
select a group's nodes as they select an EKS nodegroup's; they also select
``sagemaker.amazonaws.com/node-health-status: Schedulable`` (:data:`SCHEDULABLE`), and tolerate neither that
label's other values nor HyperPod's health taint: a node under deep health checks, or awaiting reboot or
replacement, takes no training pod (the health taint is for the device plugins and the agent).

The SageMaker cluster depends on every one of them, so CloudFormation creates them first and deletes them
after it.

Example::

    eks = GpuEksCluster(self, "Eks", vpc=network.vpc, access_mode="API_AND_CONFIG_MAP")
    HyperPodEksCluster(self, "HyperPod", cluster_name="ml-cluster", eks_cluster=eks, vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[EksInstanceGroup(name="gpu", instance_type="ml.g5.8xlarge", instance_count=2,
                                          volume_gib=500)])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from training_clusters.catalog import InstanceType, lookup_hyperpod
from training_clusters.constructs.eks.addons.base import helm_chart, instance_type_affinity
from training_clusters.constructs.eks.addons.efa_device_plugin import (
    efa_device_plugin_repository,
    efa_device_plugin_values,
)
from training_clusters.constructs.eks.addons.neuron_device_plugin import neuron_device_plugin_values
from training_clusters.constructs.eks.addons.nvidia_device_plugin import nvidia_device_plugin_values
from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.constructs.eks.release_manifest import MpiOperator
from training_clusters.constructs.eks.scheduling import (
    DEFAULT_PODS_READY_TIMEOUT_MINUTES,
    KubeflowTrainer,
    Kueue,
)
from training_clusters.constructs.hyperpod.cluster import (
    HyperPodCluster,
    InstanceGroup,
    LustreMount,
    Orchestrator,
    lifecycle_scripts_path,
)
from training_clusters.constructs.hyperpod_eks.autoscaling import (
    HyperPodAutoscaling,
    node_class_manifest,
    node_pool_manifest,
)
from training_clusters.constructs.private.validation import (
    checked_props,
    is_unresolved,
    parse_option,
    prop_error,
    raise_if_problem,
)
from training_clusters.gates.compliance import accept_inline_policy, acknowledge
from training_clusters.model.capacity import Capacity
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import (
    AutoScaler,
    DeepHealthCheck,
    EfaInterfaceType,
    NodeProvisioningMode,
    NodeRecovery,
)
from training_clusters.model.releases import (
    EFA_DEVICE_PLUGIN_CHART,
    HEALTH_MONITORING_AGENT_REGISTRIES,
    HEALTH_MONITORING_AGENT_REPOSITORY,
    HEALTH_MONITORING_AGENT_TAG,
    HYPERPOD_VPC_CNI_VERSION,
    NEURON_HELM_CHART,
    NVIDIA_DEVICE_PLUGIN_CHART,
    PYTORCH_EFA_IMAGE,
    eks_registry,
)
from training_clusters.rules.eks import kubernetes_labels
from training_clusters.rules.hyperpod import MAX_INSTANCE_COUNT, groups_problem
from training_clusters.rules.hyperpod_eks import (
    HEALTH_STATUS_KEY,
    autoscaled_capacity_problem,
    autoscaled_count_problem,
    autoscaled_groups_problem,
    autoscaled_health_checks_problem,
    autoscaled_max_count_problem,
    autoscaling_provisioning_problem,
    autoscaling_recovery_problem,
    efa_only_problem,
    fixed_count_problem,
    instance_types_problem,
    kubernetes_version_problem,
    max_count_without_autoscaling_problem,
    node_resource_names_problem,
    reserved_key_problem,
    taint_problem,
    volume_problem,
    vpc_cni_version_problem,
)
from training_clusters.workloads.scheduling import NODEGROUP_LABEL, NodePool, Taint

#: The namespace HyperPod's own components live in (its docs: "The aws-hyperpod namespace name cannot be
#: modified").
HYPERPOD_NAMESPACE = "aws-hyperpod"
HEALTH_MONITORING_AGENT = "health-monitoring-agent"
#: The service account HyperPod's deep health check pods run as.
DEEP_HEALTH_CHECK_SERVICE_ACCOUNT = "deep-health-check-service-account"
#: Tolerating HyperPod's taint on a node its checks found faulty, as AWS's chart has its device plugins do:
#: a plugin keeps advertising the node's devices while HyperPod decides to reboot or replace it.
HEALTH_TOLERATION: dict[str, str] = {
    "key": HEALTH_STATUS_KEY,
    "operator": "Equal",
    "value": "Unschedulable",
    "effect": "NoSchedule",
}
#: The label value a HyperPod node carries while it may take work (AWS's "Resilience-related Kubernetes labels by
#: SageMaker HyperPod": ``Unschedulable`` during deep health checks, ``UnschedulablePendingReboot`` /
#: ``UnschedulablePendingReplacement`` after a fault). Training pods select it, as AWS's HyperPod CLI does.
SCHEDULABLE: dict[str, str] = {HEALTH_STATUS_KEY: "Schedulable"}
#: The ECR actions nodes pull images with (the kubelet's credential provider, on the execution role).
IMAGE_PULL_ACTIONS = (
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
)


def ecr_repository_arn(registry_path: str, partition: str = "aws") -> str:
    """``<account>.dkr.ecr.<region>.amazonaws.com/<repository>`` (``*`` allowed) as a repository ARN."""
    host, repository = registry_path.split("/", 1)
    account, _, _, region = host.split(".")[:4]
    return f"arn:{partition}:ecr:{region}:{account}:repository/{repository}"


def node_image_repositories(region: str, partition: str, account: str) -> list[str]:
    """The ECR repositories a HyperPod EKS node pulls from: EKS's add-on registry of ``region`` (VPC CNI, Pod
    Identity agent, EFA device plugin), HyperPod's health-monitoring agent, the PyTorch Deep Learning Container
    of the training runtimes, and the account's own repositories (the teams' images); not every registry of
    every account, as ``*`` would."""
    repositories = []
    registry = eks_registry(region)
    if registry is not None:
        repositories.append(ecr_repository_arn(f"{registry}/*", partition))
    agent = HEALTH_MONITORING_AGENT_REGISTRIES.get(region)
    if agent is not None:
        repositories.append(
            ecr_repository_arn(
                f"{agent}.dkr.ecr.{region}.amazonaws.com/{HEALTH_MONITORING_AGENT_REPOSITORY}", partition
            )
        )
    repositories.append(ecr_repository_arn(PYTORCH_EFA_IMAGE.repository, partition))
    repositories.append(f"arn:{partition}:ecr:*:{account}:repository/*")
    return repositories


def health_monitoring_agent_image(region: str) -> str:
    """The agent's image in ``region``'s registry, or ValueError naming the regions AWS publishes it in."""
    account = HEALTH_MONITORING_AGENT_REGISTRIES.get(region)
    if account is None:
        raise ValueError(
            f"{region} has no health-monitoring agent image published by SageMaker HyperPod; regions with one: "
            f"{', '.join(sorted(HEALTH_MONITORING_AGENT_REGISTRIES))}"
        )
    return f"{account}.dkr.ecr.{region}.amazonaws.com/{HEALTH_MONITORING_AGENT_REPOSITORY}:{HEALTH_MONITORING_AGENT_TAG}"


@dataclass(frozen=True)
class KubernetesTaint:
    """A taint HyperPod puts on every node of an instance group (``KubernetesConfig.Taints``).

    :param key: ``[dns-prefix/]name``; not in ``sagemaker.amazonaws.com/``.
    :param value: Default: none.
    :param effect: NoSchedule, PreferNoSchedule or NoExecute. Default: NoSchedule.
    """

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class EksInstanceGroup:
    """One instance group of a HyperPod cluster on EKS: its nodes join the EKS cluster.

    :param name: Instance group name, e.g. ``gpu``.
    :param instance_type: HyperPod type with the ``ml.`` prefix, e.g. ``ml.p5.48xlarge``.
    :param volume_gib: The EBS volume every instance gets at ``/opt/sagemaker``; the lifecycle script moves
        containerd's and the kubelet's data onto it. Required.
    :param instance_count: Default: 1.
    :param threads_per_core: 1 or 2. Default: 1.
    :param deep_health_checks: Default: both checks on GPU and Trainium groups, none on CPU groups.
    :param capacity: ``Capacity.on_demand()`` or ``Capacity.training_plan(arn)``; Spot, reservations and
        Capacity Blocks are refused. Default: On-Demand.
    :param image_id: A custom AMI built from HyperPod's EKS AMI. Default: HyperPod's.
    :param root_volume_gib: Default: HyperPod's root volume size.
    :param labels: Kubernetes labels on every node (``KubernetesConfig.Labels``). Default: none.
    :param taints: Kubernetes taints on every node (``KubernetesConfig.Taints``). Default: none.
    :param max_instance_count: With the cluster's ``autoscaling``: the most nodes Karpenter may start in the
        group (``instance_count`` is then 0); its NodePool's limit and the queues' quota. Required then, refused
        otherwise.
    :param efa_interface_type: ``NetworkInterface.InterfaceType`` of the group's EFA interfaces: ``efa-only``
        gives the secondary ones no IP address (types with 2 or more EFA interfaces; VPC CNI v1.18.5 or newer).
        Default: HyperPod's (``efa``, the property left out).
    """

    name: str
    instance_type: str
    volume_gib: int | None = None
    instance_count: int = 1
    threads_per_core: int = 1
    deep_health_checks: Sequence[DeepHealthCheck | str] | None = None
    capacity: Capacity | None = None
    image_id: str | None = None
    root_volume_gib: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[KubernetesTaint] = ()
    max_instance_count: int | None = None
    efa_interface_type: EfaInterfaceType | str | None = None


# --------------------------------------------------------------------------------------------------
# what HyperPod needs in the cluster, as values and manifests (plain data, tested as dicts)


def hyperpod_nvidia_device_plugin_values(instance_types: Sequence[str]) -> dict[str, Any]:
    """The NVIDIA device plugin's values on HyperPod's ``ml.`` GPU types, tolerating the health taint."""
    values = nvidia_device_plugin_values(instance_types=instance_types)
    values["tolerations"] = [*values["tolerations"], dict(HEALTH_TOLERATION)]
    return values


def hyperpod_efa_device_plugin_values(instance_types: Sequence[str], image_repository: str) -> dict[str, Any]:
    """The EFA device plugin's values on HyperPod's ``ml.`` EFA types, tolerating the health taint; the image
    from ``image_repository`` (:func:`~training_clusters.constructs.eks.addons.efa_device_plugin.efa_device_plugin_repository`)."""
    values = efa_device_plugin_values(instance_types=instance_types, image_repository=image_repository)
    values["tolerations"] = [*values["tolerations"], dict(HEALTH_TOLERATION)]
    return values


def hyperpod_neuron_device_plugin_values(instance_types: Sequence[str]) -> dict[str, Any]:
    """AWS Neuron's device plugin values on HyperPod's ``ml.`` Trainium types, tolerating the health taint."""
    values = neuron_device_plugin_values(instance_types=instance_types)
    plugin = values["devicePlugin"]
    plugin["tolerations"] = [*plugin["tolerations"], dict(HEALTH_TOLERATION)]
    return values


def _cluster_role_binding(name: str, service_account: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": HYPERPOD_NAMESPACE}],
    }


def _service_account(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": HYPERPOD_NAMESPACE},
    }


def _agent_daemon_set(name: str, image: str, instance_types: Sequence[str], neuron: bool) -> dict[str, Any]:
    """One DaemonSet of the agent: NVIDIA nodes run it as it comes; Neuron nodes with the system-log monitor
    only and no NVIDIA devices (as AWS's chart runs ``health-monitoring-agent-non-nvidia``)."""
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {
            "requests": {"cpu": "500m", "memory": "512Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        },
        "securityContext": {"runAsUser": 1000, "runAsGroup": 2000, "allowPrivilegeEscalation": False},
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
        ],
        "volumeMounts": [
            {"name": "log", "mountPath": "/var/log"},
            {"name": "kmsg", "mountPath": "/dev/kmsg", "readOnly": True},
            {"name": "localtime", "mountPath": "/etc/localtime", "readOnly": True},
        ],
    }
    if neuron:
        container["args"] = [
            "--enable-k8s-exporter=false",
            "--config.system-log-monitor=/config/system-message-monitor.json",
        ]
        container["env"] += [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": HYPERPOD_NAMESPACE, "labels": {"app": name}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "serviceAccountName": HEALTH_MONITORING_AGENT,
                    "affinity": instance_type_affinity(instance_types),
                    "containers": [container],
                    "volumes": [
                        {"name": "log", "hostPath": {"path": "/var/log/"}},
                        {"name": "kmsg", "hostPath": {"path": "/dev/kmsg"}},
                        {"name": "localtime", "hostPath": {"path": "/etc/localtime"}},
                    ],
                    # it reports on the node whatever taints it carries, HyperPod's health taint included
                    "tolerations": [
                        {"operator": "Exists", "effect": "NoSchedule"},
                        {"operator": "Exists", "effect": "NoExecute"},
                    ],
                },
            },
        },
    }


def health_monitoring_agent_manifests(
    *, image: str, gpu_types: Sequence[str], neuron_types: Sequence[str]
) -> list[dict[str, Any]]:
    """The ``aws-hyperpod`` namespace, the agent's RBAC and its DaemonSets (one per kind of accelerator
    present), and the deep health checks' service account and RBAC, in the order they must be applied.

    The agent patches the status of its node and records events (its ClusterRole); the deep health checks read
    nodes and pods and patch pods. What each needs is what AWS's chart grants them, nothing more.
    """
    manifests: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HYPERPOD_NAMESPACE}},
        _service_account(HEALTH_MONITORING_AGENT),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": HEALTH_MONITORING_AGENT},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": ["patch"]},
                {
                    "apiGroups": ["", "events.k8s.io"],
                    "resources": ["events"],
                    "verbs": ["create", "patch", "update"],
                },
            ],
        },
        _cluster_role_binding(HEALTH_MONITORING_AGENT, HEALTH_MONITORING_AGENT),
        _service_account(DEEP_HEALTH_CHECK_SERVICE_ACCOUNT),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": DEEP_HEALTH_CHECK_SERVICE_ACCOUNT},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch"]},
            ],
        },
        _cluster_role_binding(DEEP_HEALTH_CHECK_SERVICE_ACCOUNT, DEEP_HEALTH_CHECK_SERVICE_ACCOUNT),
    ]
    if gpu_types:
        manifests.append(_agent_daemon_set(HEALTH_MONITORING_AGENT, image, gpu_types, neuron=False))
    if neuron_types:
        manifests.append(
            _agent_daemon_set(f"{HEALTH_MONITORING_AGENT}-non-nvidia", image, neuron_types, neuron=True)
        )
    return manifests


# --------------------------------------------------------------------------------------------------
# the dependencies, in the cluster


@checked_props
class HyperPodEksDependencies(Construct):
    """What HyperPod needs in the EKS cluster before its nodes join: agent, device plugins, VPC CNI, MPI Operator,
    Kubeflow Trainer, Kueue.

    Example::

        deps = HyperPodEksDependencies(self, "HyperPodDependencies", cluster=eks,
                                       instance_types=["ml.g5.8xlarge"])

    ``resources`` lists what a ``AWS::SageMaker::Cluster`` must depend on. The region of the stack picks the
    agent's image; a region AWS publishes none in is refused.

    Attributes: ``resources``, ``agent`` (the manifest), ``agent_manifests``, ``vpc_cni`` (the add-on),
    ``nvidia_device_plugin``, ``efa_device_plugin``, ``neuron_device_plugin`` (charts, or None without such
    types), ``nvidia_values``, ``efa_values``, ``neuron_values``, ``mpi_operator``, ``trainer``, ``kueue``
    (each or None).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        instance_types: Sequence[str],
        vpc_cni_version: str = HYPERPOD_VPC_CNI_VERSION,
        mpi_operator: bool = True,
        kueue: bool = True,
        pods_ready_timeout_minutes: int = DEFAULT_PODS_READY_TIMEOUT_MINUTES,
        kubeflow_trainer: bool = True,
    ) -> None:
        """Install them.

        :param cluster: The EKS cluster HyperPod orchestrates with.
        :param instance_types: The ``ml.`` types of the HyperPod instance groups.
        :param vpc_cni_version: The ``vpc-cni`` add-on, v1.18.3 or newer. Default: :data:`HYPERPOD_VPC_CNI_VERSION`.
        :param mpi_operator: Install Kubeflow's MPI Operator (MPIJob). Default: True.
        :param kueue: Install Kueue (:class:`~training_clusters.constructs.eks.scheduling.Kueue`, on the system
            nodes), after the MPI Operator and Kubeflow Trainer, whose jobs it manages. Default: True.
        :param pods_ready_timeout_minutes: Kueue's ``waitForPodsReady`` timeout. Default: 10.
        :param kubeflow_trainer: Install Kubeflow Trainer and JobSet
            (:class:`~training_clusters.constructs.eks.scheduling.KubeflowTrainer`, on the system nodes). Default: True.
        """
        super().__init__(scope, id)
        raise_if_problem(self, "vpc_cni_version", vpc_cni_version_problem(vpc_cni_version))
        types = self._checked_types(instance_types)
        image = self._agent_image()
        gpu = sorted({t.hyperpod_name or "" for t in types if t.is_gpu})
        neuron = sorted({t.hyperpod_name or "" for t in types if t.is_trainium})
        efa = sorted({t.hyperpod_name or "" for t in types if t.efa_supported})
        # enforcing NetworkPolicy (the team namespaces' and the monitoring stack's)
        self.vpc_cni = cluster.add_vpc_cni(addon_version=vpc_cni_version, scope=self)
        self.agent_manifests = health_monitoring_agent_manifests(
            image=image, gpu_types=gpu, neuron_types=neuron
        )
        self.agent = cluster.cluster.add_manifest(f"{id}HealthMonitoringAgent", *self.agent_manifests)
        self.resources: list[Construct] = [self.vpc_cni, self.agent]
        self.nvidia_values = hyperpod_nvidia_device_plugin_values(gpu) if gpu else None
        self.nvidia_device_plugin = self._chart(
            "NvidiaDevicePlugin", cluster, NVIDIA_DEVICE_PLUGIN_CHART, self.nvidia_values
        )
        self.efa_values = (
            hyperpod_efa_device_plugin_values(efa, efa_device_plugin_repository(self)) if efa else None
        )
        self.efa_device_plugin = self._chart(
            "EfaDevicePlugin", cluster, EFA_DEVICE_PLUGIN_CHART, self.efa_values
        )
        self.neuron_values = hyperpod_neuron_device_plugin_values(neuron) if neuron else None
        self.neuron_device_plugin = self._chart(
            "NeuronDevicePlugin", cluster, NEURON_HELM_CHART, self.neuron_values
        )
        self.mpi_operator = MpiOperator(self, "MpiOperator", cluster=cluster) if mpi_operator else None
        if self.mpi_operator is not None:
            self.resources.append(self.mpi_operator.resource)
        self.trainer = KubeflowTrainer(self, "KubeflowTrainer", cluster=cluster) if kubeflow_trainer else None
        if self.trainer is not None:
            self.resources.append(self.trainer.chart)
        self.kueue = (
            Kueue(self, "Kueue", cluster=cluster, pods_ready_timeout_minutes=pods_ready_timeout_minutes)
            if kueue
            else None
        )
        if self.kueue is not None:
            for operator in (self.mpi_operator, self.trainer):
                if operator is not None:
                    self.kueue.node.add_dependency(operator)
            self.resources.append(self.kueue.chart)

    def _chart(
        self, id_: str, cluster: GpuEksCluster, spec: Any, values: dict[str, Any] | None
    ) -> eks.HelmChart | None:
        if values is None:
            return None
        chart = helm_chart(self, cluster, spec, values, id=id_)
        self.resources.append(chart)
        return chart

    def _checked_types(self, instance_types: Sequence[str]) -> list[InstanceType]:
        raise_if_problem(self, "instance_types", instance_types_problem(len(instance_types)))
        found = []
        for name in instance_types:
            try:
                found.append(lookup_hyperpod(name, field="instance_types"))
            except ConfigurationError as error:
                raise prop_error(
                    self.node.path, "instance_types", str(error).removeprefix("instance_types: ")
                ) from None
        return found

    def _agent_image(self) -> str:
        region = cdk.Stack.of(self).region
        if is_unresolved(region):
            raise prop_error(
                self.node.path,
                "region",
                "must be known at synth (cdk.Environment(region=...)): it picks the health-monitoring agent's "
                "regional image",
            )
        try:
            return health_monitoring_agent_image(region)
        except ValueError as error:
            raise prop_error(self.node.path, "region", str(error)) from None


# --------------------------------------------------------------------------------------------------
# the HyperPod cluster


@checked_props
@jsii.implements(ec2.IConnectable)
class HyperPodEksCluster(Construct):
    """A SageMaker HyperPod cluster whose nodes join ``eks_cluster``, created after what it needs there.

    Example::

        HyperPodEksCluster(self, "HyperPod", cluster_name="ml-cluster", eks_cluster=eks, vpc=network.vpc,
            subnet=network.placement_subnet(),
            instance_groups=[EksInstanceGroup(name="gpu", instance_type="ml.g5.8xlarge", instance_count=2,
                                              volume_gib=500, labels={"team": "research"})])

    The nodes carry the EKS cluster security group (the control plane reaches their kubelets, they reach the
    API server and each other) and ``additional_security_groups``; HyperPod's own group (``connections``) is
    the one to open file systems to. HyperPod creates the EKS access entries of its execution role and its
    service-linked role itself. The execution role may also pull images from ECR (the agent's and EKS's
    add-ons') and exchange its credentials for pods' roles through EKS Pod Identity on this cluster.

    Attributes: ``hyperpod`` (the :class:`HyperPodCluster`), ``cluster`` (the L1), ``cluster_name``,
    ``cluster_arn``, ``role``, ``dependencies``, ``instance_groups``, ``node_pools``, ``connections``,
    ``autoscaling`` (the :class:`~training_clusters.constructs.hyperpod_eks.autoscaling.HyperPodAutoscaling`:
    cluster role, waiter, NodeClasses and NodePools; None without ``autoscaling``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        eks_cluster: GpuEksCluster,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        instance_groups: Sequence[EksInstanceGroup],
        additional_security_groups: Sequence[ec2.ISecurityGroup] = (),
        lustre: LustreMount | None = None,
        node_recovery: NodeRecovery | str = NodeRecovery.AUTOMATIC,
        node_provisioning_mode: NodeProvisioningMode | str = NodeProvisioningMode.CONTINUOUS,
        mpi_operator: bool = True,
        vpc_cni_version: str = HYPERPOD_VPC_CNI_VERSION,
        kueue: bool = True,
        pods_ready_timeout_minutes: int = DEFAULT_PODS_READY_TIMEOUT_MINUTES,
        kubeflow_trainer: bool = True,
        autoscaling: AutoScaler | str | None = None,
    ) -> None:
        """Create the dependencies, then the cluster.

        :param cluster_name: 1-63 letters, digits and hyphens.
        :param eks_cluster: The EKS cluster (authentication mode API or API_AND_CONFIG_MAP).
        :param vpc: The VPC.
        :param subnet: The one private subnet of the nodes and their pods' addresses.
        :param instance_groups: The groups, each with its EBS volume.
        :param additional_security_groups: More groups on the nodes, e.g. the network's EFA group. Default: none.
        :param lustre: The FSx for Lustre file system pods mount (through the FSx CSI driver): the nodes load
            the Lustre client for it. Default: none.
        :param node_recovery: Default: AUTOMATIC.
        :param node_provisioning_mode: Default: CONTINUOUS (nodes join as they come).
        :param mpi_operator: Install the MPI Operator before the nodes. Default: True.
        :param kueue: Install Kueue before the nodes (queue over :attr:`node_pools` with
            :class:`~training_clusters.constructs.eks.scheduling.TrainingQueues`). Default: True.
        :param pods_ready_timeout_minutes: Kueue's ``waitForPodsReady`` timeout. Default: 10.
        :param kubeflow_trainer: Install Kubeflow Trainer and JobSet before the nodes (runtimes over
            :attr:`node_pools` with :class:`~training_clusters.constructs.eks.scheduling.TrainingRuntimes`).
            Default: True.
        :param vpc_cni_version: Default: :data:`HYPERPOD_VPC_CNI_VERSION`.
        :param autoscaling: ``karpenter``: HyperPod's managed Karpenter scales every instance group from 0 to its
            ``max_instance_count`` (:mod:`~training_clusters.constructs.hyperpod_eks.autoscaling`); needs
            continuous provisioning and automatic node recovery, On-Demand groups without deep health checks
            (their default is then none). Default: none (each group keeps ``instance_count`` nodes).
        """
        super().__init__(scope, id)
        self.autoscaler = (
            None if autoscaling is None else parse_option(self, "autoscaling", AutoScaler, autoscaling)
        )
        raise_if_problem(
            self, "eks_cluster.kubernetes_version", kubernetes_version_problem(eks_cluster.kubernetes_version)
        )
        groups = [self._checked_group(i, g, vpc_cni_version) for i, g in enumerate(instance_groups)]
        raise_if_problem(self, "instance_groups", groups_problem(len(groups)))
        self._check_autoscaling(groups, node_recovery, node_provisioning_mode)
        self.instance_groups = tuple(groups)
        self.autoscaling = HyperPodAutoscaling(self, "Autoscaling") if self.autoscaler is not None else None
        self.dependencies = HyperPodEksDependencies(
            self,
            "Dependencies",
            cluster=eks_cluster,
            instance_types=sorted({g.instance_type for g in groups}),
            vpc_cni_version=vpc_cni_version,
            mpi_operator=mpi_operator,
            kueue=kueue,
            pods_ready_timeout_minutes=pods_ready_timeout_minutes,
            kubeflow_trainer=kubeflow_trainer,
        )
        self.hyperpod = _HyperPodOnEks(
            self,
            "Resource",
            eks_groups=groups,
            cluster_name=cluster_name,
            vpc=vpc,
            subnet=subnet,
            instance_groups=[_instance_group(g) for g in groups],
            additional_security_groups=[eks_cluster.cluster_security_group, *additional_security_groups],
            lustre=lustre,
            orchestrator=Orchestrator.eks(eks_cluster.cluster.cluster_arn),
            node_recovery=node_recovery,
            lifecycle_scripts_dir=lifecycle_scripts_path(),
            node_provisioning_mode=parse_option(
                self, "node_provisioning_mode", NodeProvisioningMode, node_provisioning_mode
            ),
        )
        self.cluster = self.hyperpod.cluster
        self.cluster_name = cluster_name
        self.cluster_arn = self.hyperpod.cluster_arn
        self.role = self.hyperpod.role
        self._grant_node_permissions(eks_cluster)
        for resource in self.dependencies.resources:
            self.cluster.node.add_dependency(resource)
        self._set_autoscaling(groups, eks_cluster)

    @property
    def node_pools(self) -> dict[str, NodePool]:
        """What each instance group provides, by name (:func:`node_pool`)."""
        return {group.name: node_pool(group) for group in self.instance_groups}

    @property
    def connections(self) -> ec2.Connections:
        """HyperPod's own security group on every node."""
        return self.hyperpod.connections

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _checked_group(self, index: int, group: EksInstanceGroup, vpc_cni_version: str) -> EksInstanceGroup:
        where = f"instance_groups[{index}]"
        if not isinstance(group, EksInstanceGroup):
            raise prop_error(
                self.node.path, where, f"must be an EksInstanceGroup, got {type(group).__name__}"
            )
        if not is_unresolved(group.volume_gib):
            raise_if_problem(self, f"{where}.volume_gib", volume_problem(group.volume_gib))
        self._check_labels(f"{where}.labels", group.labels)
        self._check_taints(f"{where}.taints", group.taints)
        self._check_count(where, group)
        interface_type = self._checked_interface_type(where, group, vpc_cni_version)
        checks = group.deep_health_checks
        if checks is None and self.autoscaler is not None:
            checks = ()  # HyperPod refuses deep health checks on autoscaled groups
        return replace(
            group,
            labels=dict(group.labels),
            taints=tuple(group.taints),
            deep_health_checks=checks,
            efa_interface_type=interface_type,
        )

    def _check_count(self, where: str, group: EksInstanceGroup) -> None:
        """A fixed group has 1 or more nodes; an autoscaled one starts at 0 and has its ``max_instance_count``."""
        if self.autoscaler is None:
            raise_if_problem(self, f"{where}.instance_count", fixed_count_problem(group.instance_count))
            raise_if_problem(
                self,
                f"{where}.max_instance_count",
                max_count_without_autoscaling_problem(group.max_instance_count),
            )
            return
        raise_if_problem(self, f"{where}.instance_count", autoscaled_count_problem(group.instance_count))
        raise_if_problem(
            self,
            f"{where}.max_instance_count",
            autoscaled_max_count_problem(group.max_instance_count, MAX_INSTANCE_COUNT),
        )
        training_plan = group.capacity is not None and group.capacity.training_plan_arn is not None
        raise_if_problem(self, f"{where}.capacity", autoscaled_capacity_problem(training_plan))
        raise_if_problem(
            self,
            f"{where}.deep_health_checks",
            autoscaled_health_checks_problem(
                [
                    str(parse_option(self, f"{where}.deep_health_checks", DeepHealthCheck, c))
                    for c in group.deep_health_checks or ()
                ]
            ),
        )

    def _checked_interface_type(
        self, where: str, group: EksInstanceGroup, vpc_cni_version: str
    ) -> EfaInterfaceType | None:
        if group.efa_interface_type is None:
            return None
        chosen = parse_option(self, f"{where}.efa_interface_type", EfaInterfaceType, group.efa_interface_type)
        if chosen is EfaInterfaceType.EFA_ONLY:
            instance_type = lookup_hyperpod(group.instance_type, field=f"{where}.instance_type")
            raise_if_problem(
                self,
                f"{where}.efa_interface_type",
                efa_only_problem(group.instance_type, instance_type.max_efa_interfaces, vpc_cni_version),
            )
        return chosen

    def _check_autoscaling(
        self,
        groups: Sequence[EksInstanceGroup],
        node_recovery: NodeRecovery | str,
        node_provisioning_mode: NodeProvisioningMode | str | None,
    ) -> None:
        """What HyperPod's Karpenter autoscaling needs of the cluster (its prerequisites)."""
        if self.autoscaler is None:
            return
        mode = (
            None
            if node_provisioning_mode is None
            else parse_option(self, "node_provisioning_mode", NodeProvisioningMode, node_provisioning_mode)
        )
        raise_if_problem(
            self,
            "node_provisioning_mode",
            autoscaling_provisioning_problem(None if mode is None else mode.value),
        )
        recovery = parse_option(self, "node_recovery", NodeRecovery, node_recovery)
        raise_if_problem(self, "node_recovery", autoscaling_recovery_problem(recovery.value))
        raise_if_problem(self, "instance_groups", autoscaled_groups_problem(len(groups)))
        raise_if_problem(self, "instance_groups", node_resource_names_problem([g.name for g in groups]))

    def _check_labels(self, where: str, labels: Mapping[str, str]) -> None:
        try:
            kubernetes_labels(dict(labels))
        except ValueError as error:
            raise prop_error(self.node.path, where, str(error)) from None
        for key in labels:
            raise_if_problem(self, where, reserved_key_problem(key))

    def _check_taints(self, where: str, taints: Sequence[KubernetesTaint]) -> None:
        for index, taint in enumerate(taints):
            if not isinstance(taint, KubernetesTaint):
                raise prop_error(
                    self.node.path,
                    f"{where}[{index}]",
                    f"must be a KubernetesTaint, got {type(taint).__name__}",
                )
            raise_if_problem(self, f"{where}[{index}]", taint_problem(taint.key, taint.value, taint.effect))

    # ----------------------------------------------------------------------------------------------
    # building

    def _set_autoscaling(self, groups: Sequence[EksInstanceGroup], eks_cluster: GpuEksCluster) -> None:
        """``AutoScaling`` and ``ClusterRole`` on the L1, then the waiter and each group's NodeClass and NodePool."""
        if self.autoscaling is None:
            return
        self.cluster.auto_scaling = sagemaker.CfnCluster.ClusterAutoScalingConfigProperty(
            mode="Enable", auto_scaler_type="Karpenter"
        )
        self.cluster.cluster_role = self.autoscaling.role.role_arn
        self.autoscaling.apply(
            cluster_name=self.cluster_name,
            cluster_arn=self.cluster_arn,
            cluster=self.cluster,
            eks_cluster=eks_cluster,
            node_pools=[(node_class_manifest(g.name), karpenter_node_pool(g)) for g in groups],
        )

    def _grant_node_permissions(self, eks_cluster: GpuEksCluster) -> None:
        """What a HyperPod node of an EKS cluster does with its execution role beyond a Slurm node: pull
        images (the kubelet) and exchange credentials for pods' roles (the EKS Pod Identity agent)."""
        stack = cdk.Stack.of(self)
        repositories = node_image_repositories(stack.region, stack.partition, stack.account)
        policy = iam.Policy(
            self,
            "NodePolicy",
            roles=[self.role],
            statements=[
                iam.PolicyStatement(sid="EcrAuth", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
                iam.PolicyStatement(
                    sid="ImagePulls", actions=list(IMAGE_PULL_ACTIONS), resources=list(repositories)
                ),
                iam.PolicyStatement(
                    sid="PodIdentity",
                    actions=["eks-auth:AssumeRoleForPodIdentity"],
                    resources=[eks_cluster.cluster.cluster_arn],
                ),
            ],
        )
        accept_inline_policy(policy, "the HyperPod EKS nodes' image pulls and Pod Identity")
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken takes no resource (ECR's service authorization reference): it only "
            "returns a login token; what may be pulled is the ImagePulls statement's repositories",
        )
        for repository in repositories:
            if repository.endswith("/*"):
                acknowledge(
                    policy,
                    f"AwsSolutions-IAM5[Resource::{_nag_text(stack, repository)}]",
                    "read-only image pulls from one registry's repositories: EKS's add-on images of this "
                    "region, or this account's own (the teams' images); never another account's",
                )
        self.cluster.node.add_dependency(policy)


def _nag_text(stack: cdk.Stack, value: str) -> str:
    """``value`` as cdk-nag spells it in a finding: a pseudo parameter as ``<AWS::AccountId>``."""
    resolved = stack.resolve(value)
    if isinstance(resolved, str):
        return resolved
    parts = resolved["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else f"<{p['Ref']}>" for p in parts)


def node_labels(group: EksInstanceGroup) -> dict[str, str]:
    """The labels the group's nodes get: its own, and ``training-clusters/nodegroup`` with its name."""
    return {**group.labels, NODEGROUP_LABEL: group.name}


def node_pool(group: EksInstanceGroup) -> NodePool:
    """What an instance group provides: its nodes (``node.kubernetes.io/instance-type`` is the ``ml.`` name on
    HyperPod's nodes), every EFA interface of the type, its labels (:func:`node_labels`) and taints, and
    :data:`SCHEDULABLE` while a node may take work.

    An autoscaled group (``max_instance_count`` set) provides up to ``max_instance_count`` nodes and no
    :data:`SCHEDULABLE` selector: Karpenter starts a node only for a pod whose selectors the node will carry
    from the start, and HyperPod sets that label on a running node; a faulty node still takes no pod (HyperPod's
    health taint, which training pods do not tolerate)."""
    instance_type = lookup_hyperpod(group.instance_type)
    autoscaled = group.max_instance_count is not None
    return NodePool(
        instance_type=instance_type,
        nodes=group.max_instance_count if group.max_instance_count is not None else group.instance_count,
        efa_interfaces=instance_type.max_efa_interfaces,
        labels=node_labels(group),
        taints=tuple(Taint(t.key, t.value, t.effect) for t in group.taints),
        reported_instance_type=group.instance_type,
        ready_labels={} if autoscaled else dict(SCHEDULABLE),
    )


def karpenter_node_pool(group: EksInstanceGroup) -> dict[str, Any]:
    """The Karpenter NodePool of an autoscaled group (:func:`~training_clusters.constructs.hyperpod_eks.autoscaling.
    node_pool_manifest`): its type, :func:`node_labels`, its taints, at most ``max_instance_count`` nodes."""
    return node_pool_manifest(
        group.name,
        instance_type=group.instance_type,
        max_nodes=group.max_instance_count or 0,
        vcpus=lookup_hyperpod(group.instance_type).vcpus,
        labels=node_labels(group),
        taints=[
            {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
            for t in group.taints
        ],
    )


def kubernetes_config(group: EksInstanceGroup) -> dict[str, Any]:
    """``KubernetesConfig`` of an instance group: ``Labels`` (:func:`node_labels`) and its ``Taints``."""
    config: dict[str, Any] = {"Labels": node_labels(group)}
    if group.taints:
        config["Taints"] = [
            {"Key": t.key, **({"Value": t.value} if t.value else {}), "Effect": t.effect}
            for t in group.taints
        ]
    return config


def _kubernetes_config_property(
    group: EksInstanceGroup,
) -> sagemaker.CfnCluster.ClusterKubernetesConfigProperty:
    """:func:`kubernetes_config` as the L1's typed property."""
    config = kubernetes_config(group)
    taints = [
        sagemaker.CfnCluster.ClusterKubernetesTaintProperty(
            key=t["Key"], value=t.get("Value"), effect=t["Effect"]
        )
        for t in config.get("Taints", [])
    ]
    return sagemaker.CfnCluster.ClusterKubernetesConfigProperty(
        labels=config["Labels"], taints=taints or None
    )


class _HyperPodOnEks(HyperPodCluster):
    """The HyperPod cluster of :class:`HyperPodEksCluster`: each instance group's property is built whole, with
    its ``KubernetesConfig`` (:func:`kubernetes_config`) and, where the group chose its EFA interface type, its
    ``NetworkInterface``."""

    def __init__(
        self, scope: Construct, id: str, *, eks_groups: Sequence[EksInstanceGroup], **props: Any
    ) -> None:
        self._eks_groups = {group.name: group for group in eks_groups}  # read while the L1 is built
        super().__init__(scope, id, **props)

    def _orchestrator_group_settings(self, group: InstanceGroup) -> dict[str, Any]:
        eks_group = self._eks_groups[group.name]
        settings: dict[str, Any] = {"kubernetes_config": _kubernetes_config_property(eks_group)}
        if eks_group.efa_interface_type is not None:
            settings["network_interface"] = sagemaker.CfnCluster.ClusterNetworkInterfaceProperty(
                interface_type=EfaInterfaceType.parse(eks_group.efa_interface_type).value
            )
        return settings


def _instance_group(group: EksInstanceGroup) -> InstanceGroup:
    return InstanceGroup(
        name=group.name,
        instance_type=group.instance_type,
        instance_count=group.instance_count,
        threads_per_core=group.threads_per_core,
        extra_volume_gib=group.volume_gib,
        deep_health_checks=group.deep_health_checks,
        capacity=group.capacity,
        image_id=group.image_id,
        root_volume_gib=group.root_volume_gib,
    )
