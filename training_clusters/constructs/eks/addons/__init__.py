"""Cluster add-ons for GPU training, as helm charts with pinned versions and typed values.

Each chart is installed at deploy time from its publisher's repository by CDK's kubectl handler: no
third-party manifest is copied into this repository. Values are built by plain functions from typed
options (tested as dicts) and validated when the construct is created.

Example::

    NvidiaDevicePlugin(self, "DevicePlugin", cluster=cluster, instance_types=["g5.2xlarge"],
                       time_slicing=TimeSlicing(replicas=10))
    EfaDevicePlugin(self, "EfaPlugin", cluster=cluster, instance_types=["p5.48xlarge"])
    FsxCsiDriver(self, "FsxCsi", cluster=cluster, storage=shared_lustre, capacity_gib=1200)
    GpuMonitoring(self, "Monitoring", cluster=cluster)   # Prometheus and Grafana on gp3 volumes

Every add-on that calls AWS has its own role through EKS Pod Identity (the cluster installs the agent):
the FSx for Lustre CSI controller (:class:`FsxCsiDriver`), the EBS CSI controller (:class:`EbsCsiDriver`) and,
given a Lustre file system, Grafana (:class:`GpuMonitoring`: CloudWatch metric reads for the FSx dashboard).
The device plugins, the GPU Operator's DCGM exporter and Prometheus call no AWS API.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import aws_cdk as cdk
import jsii
import yaml
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from training_clusters.catalog import InstanceType
from training_clusters.constructs.common.lustre import SharedLustre
from training_clusters.constructs.common.session_manager import AcknowledgeWildcards
from training_clusters.constructs.eks.cluster import (
    GPU_TAINT_KEY,
    NEURON_TAINT_KEY,
    DevicePluginKind,
    GpuEksCluster,
    pod_identity_principal,
)
from training_clusters.constructs.private.validation import (
    catalog_entry,
    checked_props,
    fail,
    is_unresolved,
    option,
    refuse,
    to_removal_policy,
)
from training_clusters.gates.compliance import accept_inline_policy, acknowledge
from training_clusters.model.options import MigStrategy, Mps, RemovalPolicy, TimeSlicing
from training_clusters.model.releases import (
    BUSYBOX_IMAGE,
    EFA_DEVICE_PLUGIN_CHART,
    EFA_DEVICE_PLUGIN_IMAGE_TAG,
    EFA_DEVICE_PLUGIN_REPOSITORY,
    EKS_ADDON_REGISTRIES,
    GPU_OPERATOR_CHART,
    KUBE_PROMETHEUS_STACK_CHART,
    NEURON_HELM_CHART,
    NVIDIA_DEVICE_PLUGIN_CHART,
    HelmChartSpec,
    eks_registry,
)
from training_clusters.monitoring.cloudwatch import (
    CLOUDWATCH_READ_ACTIONS,
    GRAFANA_SERVICE_ACCOUNT,
    cloudwatch_datasource,
)
from training_clusters.monitoring.dashboards import dashboard_configmaps
from training_clusters.monitoring.dcgm import DCGM_METRICS_CONFIGMAP, NODE_RELABELINGS, dcgm_metrics_csv
from training_clusters.monitoring.efa import node_exporter_values
from training_clusters.rules.eks import (
    gpu_sharing_problem,
    mig_problem,
    mps_replicas_problem,
)
from training_clusters.rules.eks_queues import kubernetes_name_problem, unique_names_problem
from training_clusters.workloads.mig import (
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_CONFIGMAP,
    MIG_DISABLED,
    mig_parted_config,
)
from training_clusters.workloads.tenancy import monitoring_ingress, system_placement

__all__ = [
    "EFA_DEVICE_PLUGIN_CHART",
    "EFA_DEVICE_PLUGIN_IMAGE_TAG",
    "GPU_OPERATOR_CHART",
    "KUBE_PROMETHEUS_STACK_CHART",
    "MPS_CAPABLE_LABEL",
    "NEURON_DEVICE_PLUGIN_TOLERATIONS",
    "NEURON_HELM_CHART",
    "NVIDIA_DEVICE_PLUGIN_CHART",
    "EbsCsiDriver",
    "EfaDevicePlugin",
    "FsxCsiDriver",
    "GpuMonitoring",
    "HelmChartSpec",
    "MigStrategy",
    "Mps",
    "NeuronDevicePlugin",
    "NvidiaDevicePlugin",
    "TimeSlicing",
    "device_plugin_config",
    "device_plugin_node_labels",
    "efa_device_plugin_repository",
    "efa_device_plugin_values",
    "gp3_storage_class_manifest",
    "gpu_operator_values",
    "kube_prometheus_stack_values",
    "lustre_volume_manifests",
    "neuron_device_plugin_values",
    "nvidia_device_plugin_values",
]

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


#: EKS add-on name and the service account of the FSx for Lustre CSI driver's controller.
FSX_CSI_ADDON = "aws-fsx-csi-driver"
FSX_CSI_SERVICE_ACCOUNT = "fsx-csi-controller-sa"
FSX_CSI_PROVISIONER = "fsx.csi.aws.com"
#: EKS add-on name, controller service account, provisioner and AWS-managed policy of the EBS CSI driver.
EBS_CSI_ADDON = "aws-ebs-csi-driver"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
#: The CSI add-ons' configuration (``aws eks describe-addon-configuration``; the keys of the drivers' charts,
#: ``charts/*/values.yaml`` in kubernetes-sigs/aws-fsx-csi-driver and aws-ebs-csi-driver): the controller on the
#: system nodes. Its default tolerations (``CriticalAddonsOnly``) let it run there but do not keep it there: on
#: HyperPod's untainted instance groups it would run beside the teams' pods, with its Pod Identity token.
CSI_CONTROLLER_CONFIGURATION: Mapping[str, Any] = {"controller": system_placement()}
#: Where EKS add-ons run their controllers (and so their service accounts).
ADDON_NAMESPACE = "kube-system"
EBS_CSI_PROVISIONER = "ebs.csi.aws.com"
#: AWS's scoped policy (2026-04): the driver creates, attaches, snapshots and deletes only volumes and snapshots
#: tagged ``ebs.csi.aws.com/cluster: "true"`` (which it tags itself), not every volume of the account as
#: ``service-role/AmazonEBSCSIDriverPolicy`` allows (https://docs.aws.amazon.com/aws-managed-policy/latest/
#: reference/AmazonEBSCSIDriverPolicyV2.html).
EBS_CSI_POLICY = "AmazonEBSCSIDriverPolicyV2"
#: Node label that chart 0.19.0's MPS control daemon DaemonSet selects (its ``nodeSelector``,
#: ``templates/daemonset-mps-control-daemon.yml``). Only GPU Feature Discovery sets it by itself; we turn
#: GFD off and put the label on the nodegroups instead (:func:`device_plugin_node_labels`).
MPS_CAPABLE_LABEL = "nvidia.com/mps.capable"
#: kube-prometheus-stack's components for the control plane EKS runs out of the cluster's reach.
EKS_MANAGED_CONTROL_PLANE = ("kubeControllerManager", "kubeScheduler", "kubeEtcd")
#: kube-prometheus-stack's components that run on EKS nodes but serve their metrics on loopback only:
#: kube-proxy binds ``metricsBindAddress`` to its default, ``127.0.0.1:10249`` (kube-proxy's configuration
#: reference, ``KubeProxyConfiguration``), and EKS's kube-proxy add-on reconciles its ConfigMap back to it
#: (github.com/aws/containers-roadmap issue 657).
EKS_LOOPBACK_ONLY = ("kubeProxy",)
_EKS_ADDON_VERSION = re.compile(r"v\d+\.\d+\.\d+-eksbuild\.\d+")

_ACCELERATOR_TOLERATIONS: list[dict[str, str]] = [
    {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
    {"key": NEURON_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
]


# --------------------------------------------------------------------------------------------------
# NVIDIA device plugin: GPU sharing


def device_plugin_config(
    *,
    time_slicing: TimeSlicing | None = None,
    mps: Mps | None = None,
    mig_strategy: MigStrategy = MigStrategy.NONE,
) -> dict[str, Any]:
    """The device plugin's configuration file (``version: v1``) for one sharing mode."""
    config: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": mig_strategy.value}}
    if time_slicing is not None:
        config["sharing"] = {
            "timeSlicing": {
                "renameByDefault": time_slicing.rename_by_default,
                "failRequestsGreaterThanOne": time_slicing.fail_requests_greater_than_one,
                "resources": [{"name": GPU_TAINT_KEY, "replicas": time_slicing.replicas}],
            }
        }
    if mps is not None:
        config["sharing"] = {"mps": {"resources": [{"name": GPU_TAINT_KEY, "replicas": mps.replicas}]}}
    return config


def instance_type_affinity(instance_types: Sequence[str]) -> dict[str, Any]:
    """Node affinity requiring one of ``instance_types`` (the label every EKS node carries)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": INSTANCE_TYPE_LABEL,
                                "operator": "In",
                                "values": sorted(set(instance_types)),
                            }
                        ]
                    }
                ]
            }
        }
    }


def mig_aware_affinity(affinity: dict[str, Any]) -> dict[str, Any]:
    """``affinity`` split in two: nodes without ``nvidia.com/mig.config``, and nodes with it once the MIG
    manager has partitioned them (``nvidia.com/mig.config.state=success``); the terms are ORed."""
    required = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (term,) = required["nodeSelectorTerms"]
    whole = {"key": MIG_CONFIG_LABEL, "operator": "DoesNotExist"}
    partitioned = {"key": MIG_CONFIG_STATE_LABEL, "operator": "In", "values": ["success"]}
    terms = [{"matchExpressions": [*term["matchExpressions"], extra]} for extra in (whole, partitioned)]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def nvidia_device_plugin_values(
    *,
    instance_types: Sequence[str],
    time_slicing: TimeSlicing | None = None,
    mps: Mps | None = None,
    mig_strategy: MigStrategy = MigStrategy.NONE,
) -> dict[str, Any]:
    """Helm values of the NVIDIA device plugin chart.

    The chart's default affinity waits for Node Feature Discovery labels that EKS nodes do not have;
    we schedule on our GPU nodegroups' instance types instead. The chart's MPS control daemon uses the same
    ``affinity`` and ``tolerations``, plus its own ``nvidia.com/mps.capable=true`` node selector. GPU Feature
    Discovery (and the Node Feature Discovery it brings) stays off: with MPS the nodegroups carry that
    label themselves (:func:`device_plugin_node_labels`).
    """
    config = device_plugin_config(time_slicing=time_slicing, mps=mps, mig_strategy=mig_strategy)
    affinity = instance_type_affinity(instance_types)
    if mig_strategy is not MigStrategy.NONE:
        affinity = mig_aware_affinity(affinity)
    return {
        "config": {"map": {"default": yaml.safe_dump(config, sort_keys=False)}, "default": "default"},
        "affinity": affinity,
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, _ACCELERATOR_TOLERATIONS[0]],
        "gfd": {"enabled": False},
    }


def device_plugin_node_labels(instance_type: InstanceType, *, mps: Mps | None) -> dict[str, str]:
    """Node labels an NVIDIA GPU nodegroup needs for the device plugin's sharing mode.

    With MPS, chart 0.19.0 runs its MPS control daemon only on nodes labelled
    ``nvidia.com/mps.capable=true``; without the daemon the plugin's health check fails and the node
    advertises no ``nvidia.com/gpu`` at all. Without MPS, and on nodes without NVIDIA GPUs, no labels.
    """
    if mps is None or not instance_type.is_gpu:
        return {}
    return {MPS_CAPABLE_LABEL: "true"}


@checked_props
class NvidiaDevicePlugin(Construct):
    """NVIDIA's device plugin on the given GPU instance types, with optional GPU sharing.

    Example::

        NvidiaDevicePlugin(self, "DevicePlugin", cluster=cluster, instance_types=["g5.2xlarge"],
                           time_slicing=TimeSlicing(replicas=10))

    :class:`GpuEksCluster` installs this plugin itself, without sharing, for its GPU nodegroups; creating one for
    the cluster replaces that (as the EFA and Neuron plugins below do theirs).

    Time-slicing and MPS are mutually exclusive. With MPS, every node the plugin runs on must carry the
    label :func:`device_plugin_node_labels` gives (``nvidia.com/mps.capable=true``: the chart's MPS control
    daemon runs only there, and without it the node advertises no GPUs); put it on the nodegroups, as
    :class:`~training_clusters.stacks.eks.EksTrainingEnvironment` does. MPS serves at most 48 pods per GPU.

    A MIG strategy (SINGLE, MIXED) only says how to advertise partitions the GPU Operator's MIG manager
    made: give :class:`GpuMonitoring` the layouts (``mig_layouts``) and label the nodegroups
    (:func:`~training_clusters.workloads.mig.mig_node_labels`), as the stack does. The plugin then starts on a
    MIG-labelled node only once the MIG manager reports ``nvidia.com/mig.config.state=success``, so it never
    advertises the whole GPUs it found before partitioning.

    Attributes: ``chart``, ``values``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        instance_types: Sequence[str],
        time_slicing: TimeSlicing | None = None,
        mps: Mps | None = None,
        mig_strategy: MigStrategy | str = MigStrategy.NONE,
        chart: HelmChartSpec = NVIDIA_DEVICE_PLUGIN_CHART,
    ) -> None:
        """Install the chart.

        :param cluster: The cluster.
        :param instance_types: The GPU instance types of the cluster's nodegroups; the plugin runs there only.
        :param time_slicing: Share GPUs by time-slicing. Default: no sharing.
        :param mps: Share GPUs through MPS, 2 to 48 pods per GPU. Default: no sharing.
        :param mig_strategy: How MIG instances are advertised (needs a MIG-capable type among
            ``instance_types``). Default: NONE.
        :param chart: Default: :data:`NVIDIA_DEVICE_PLUGIN_CHART`.
        """
        super().__init__(scope, id)
        mig_strategy = option(self, "mig_strategy", MigStrategy, mig_strategy)
        types = _check_instance_types(self, instance_types, "GPU", "NVIDIA GPU", lambda entry: entry.is_gpu)
        cluster.device_plugin_given(DevicePluginKind.NVIDIA)
        self._check_sharing(time_slicing, mps, mig_strategy)
        self._check_mps_replicas(mps)
        self._check_mig_capable(types, mig_strategy)
        self.values = nvidia_device_plugin_values(
            instance_types=[t.name for t in types],
            time_slicing=time_slicing,
            mps=mps,
            mig_strategy=mig_strategy,
        )
        self.chart = _helm_chart(self, cluster, chart, self.values)

    def _check_sharing(self, time_slicing: TimeSlicing | None, mps: Mps | None, mig: MigStrategy) -> None:
        problem = gpu_sharing_problem(time_slicing, mps, mig)
        if problem:
            raise fail(self.node.path, *problem)

    def _check_mps_replicas(self, mps: Mps | None) -> None:
        problem = mps_replicas_problem(mps)
        if problem:
            raise fail(self.node.path, *problem)

    def _check_mig_capable(self, types: Sequence[InstanceType], mig_strategy: MigStrategy) -> None:
        problems = [mig_problem(found, mig_strategy) for found in types]
        if problems and all(problems):
            refuse(self, "mig_strategy", problems[0])


# --------------------------------------------------------------------------------------------------
# EFA device plugin


def efa_device_plugin_values(
    *,
    instance_types: Sequence[str],
    image_repository: str,
    image_tag: str = EFA_DEVICE_PLUGIN_IMAGE_TAG,
) -> dict[str, Any]:
    """Helm values of the EFA device plugin: run on exactly these instance types, with a pinned image.

    The chart's own allow-list (``supportedInstanceLabels``, its DaemonSet's node affinity) lags new
    hardware (chart v0.5.20's has no p6-b300, for one): without this override its DaemonSet runs zero pods
    there and NCCL silently falls back to TCP. The image is set explicitly, repository and tag, so what runs
    and where it is pulled from is stated here rather than inherited from the chart (whose values name the
    us-west-2 registry).
    """
    return {
        "image": {"repository": image_repository, "tag": image_tag},
        "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": sorted(set(instance_types))},
        "tolerations": list(_ACCELERATOR_TOLERATIONS),
    }


def efa_device_plugin_repository(scope: Construct) -> str:
    """The EFA device plugin's image repository in the registry of ``scope``'s own region.

    A stack with a concrete region gets its region's registry; an environment-agnostic one a
    ``Fn::FindInMap`` over :data:`~training_clusters.model.releases.EKS_ADDON_REGISTRIES` keyed on ``AWS::Region``.

    :raises ConfigurationError: for a concrete region without a known registry.
    """
    stack = cdk.Stack.of(scope)
    region = stack.region
    if not cdk.Token.is_unresolved(region):
        registry = eks_registry(region)
        if registry is None:
            raise fail(
                scope.node.path,
                "image_repository",
                f"is required in {region}, a region without an EKS add-on registry in this library's table; "
                "give the EFA device plugin's repository in your region's EKS registry "
                "(https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html)",
            )
        return f"{registry}/{EFA_DEVICE_PLUGIN_REPOSITORY}"
    mapping = stack.node.try_find_child(_REGISTRY_MAPPING_ID)
    if not isinstance(mapping, cdk.CfnMapping):
        mapping = cdk.CfnMapping(
            stack,
            _REGISTRY_MAPPING_ID,
            mapping={region: {"Registry": host} for region, host in sorted(EKS_ADDON_REGISTRIES.items())},
        )
    return f"{mapping.find_in_map(cdk.Aws.REGION, 'Registry')}/{EFA_DEVICE_PLUGIN_REPOSITORY}"


_REGISTRY_MAPPING_ID = "TrainingClustersEksAddonRegistries"


@checked_props
class EfaDevicePlugin(Construct):
    """AWS's EFA device plugin, scheduled on exactly the given EFA instance types.

    Example::

        EfaDevicePlugin(self, "EfaPlugin", cluster=cluster, instance_types=["p5en.48xlarge"])

    Installs chart ``aws-efa-k8s-device-plugin`` v0.5.20 running plugin image v0.5.13 (the chart's version
    is not the plugin's; see :data:`~training_clusters.model.releases.EFA_DEVICE_PLUGIN_CHART`), pulled from the
    EKS registry of the stack's own region (:func:`efa_device_plugin_repository`).

    Attributes: ``chart``, ``values``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        instance_types: Sequence[str],
        chart: HelmChartSpec = EFA_DEVICE_PLUGIN_CHART,
        image_tag: str = EFA_DEVICE_PLUGIN_IMAGE_TAG,
        image_repository: str | None = None,
    ) -> None:
        """Install the chart.

        :param cluster: The cluster.
        :param instance_types: The instance types of the EFA nodegroups.
        :param chart: Default: :data:`~training_clusters.model.releases.EFA_DEVICE_PLUGIN_CHART`.
        :param image_tag: The plugin image to run; change it together with ``chart``.
            Default: :data:`~training_clusters.model.releases.EFA_DEVICE_PLUGIN_IMAGE_TAG` (v0.5.13, what chart
            v0.5.20 ships).
        :param image_repository: Where the image is pulled from. Default: ``eks/aws-efa-k8s-device-plugin`` in
            the EKS add-on registry of the stack's region; required in a region that table does not list.
        """
        super().__init__(scope, id)
        _check_instance_types(self, instance_types, "EFA", "EFA", lambda entry: entry.efa_supported)
        cluster.device_plugin_given(DevicePluginKind.EFA)
        self.values = efa_device_plugin_values(
            instance_types=instance_types,
            image_repository=image_repository or efa_device_plugin_repository(self),
            image_tag=image_tag,
        )
        self.chart = _helm_chart(self, cluster, chart, self.values)


# --------------------------------------------------------------------------------------------------
# Neuron device plugin (Trainium)


#: The device plugin's tolerations as AWS Neuron's chart sets them (``devicePlugin.tolerations`` in its
#: ``values.yaml``, github.com/aws-neuron/neuron-helm-charts): written out because Helm replaces a list value
#: whole, so a caller adding one (HyperPod's health taint) must repeat these.
NEURON_DEVICE_PLUGIN_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": NEURON_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
)


def neuron_device_plugin_values(*, instance_types: Sequence[str]) -> dict[str, Any]:
    """Helm values of AWS Neuron's chart: the device plugin only, on exactly these instance types.

    The chart's ``neuronInstances`` list feeds its node affinity; like the EFA plugin's, a built-in list
    lags new hardware, so it names our types. The plugin tolerates :data:`NEURON_DEVICE_PLUGIN_TOLERATIONS`.
    Its node problem detector is off (EKS node auto-repair, which our nodegroups turn on, already replaces
    unhealthy nodes, and it runs privileged) and so is the optional scheduler extension (whole-device
    requests need none).
    """
    return {
        "neuronInstances": sorted(set(instance_types)),
        "devicePlugin": {"tolerations": [dict(t) for t in NEURON_DEVICE_PLUGIN_TOLERATIONS]},
        "npd": {"enabled": False},
        "scheduler": {"enabled": False},
    }


@checked_props
class NeuronDevicePlugin(Construct):
    """AWS Neuron's device plugin on the given Trainium instance types (``aws.amazon.com/neuron`` resources).

    Example::

        NeuronDevicePlugin(self, "NeuronPlugin", cluster=cluster, instance_types=["trn1.32xlarge"])

    Attributes: ``chart``, ``values``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        instance_types: Sequence[str],
        chart: HelmChartSpec = NEURON_HELM_CHART,
    ) -> None:
        """Install the chart.

        :param cluster: The cluster.
        :param instance_types: The Trainium instance types of the nodegroups.
        :param chart: Default: :data:`NEURON_HELM_CHART`.
        """
        super().__init__(scope, id)
        _check_instance_types(
            self, instance_types, "Trainium", "Trainium (Neuron) devices", lambda entry: entry.is_trainium
        )
        cluster.device_plugin_given(DevicePluginKind.NEURON)
        self.values = neuron_device_plugin_values(instance_types=instance_types)
        self.chart = _helm_chart(self, cluster, chart, self.values)


# --------------------------------------------------------------------------------------------------
# the device plugins GpuEksCluster installs itself

#: Construct id and chart of each device plugin :class:`GpuEksCluster` installs (under the cluster).
CLUSTER_DEVICE_PLUGINS: Mapping[DevicePluginKind, tuple[str, HelmChartSpec]] = {
    DevicePluginKind.NVIDIA: ("NvidiaDevicePlugin", NVIDIA_DEVICE_PLUGIN_CHART),
    DevicePluginKind.EFA: ("EfaDevicePlugin", EFA_DEVICE_PLUGIN_CHART),
    DevicePluginKind.NEURON: ("NeuronDevicePlugin", NEURON_HELM_CHART),
}


def cluster_device_plugin(
    cluster: GpuEksCluster, kind: DevicePluginKind, instance_types: Callable[[], list[str]]
) -> eks.HelmChart:
    """The ``kind`` device plugin of ``cluster`` (``device_plugins=True``), with the values
    :class:`NvidiaDevicePlugin`, :class:`EfaDevicePlugin` or :class:`NeuronDevicePlugin` give, scheduled on
    ``instance_types()`` as it is when the template is written, so nodegroups added later are covered (the way
    CDK's own ``aws-auth`` ConfigMap collects roles, aws-cdk ``aws-eks/lib/aws-auth.ts``)."""
    build: Callable[[], dict[str, Any]]
    if kind is DevicePluginKind.NVIDIA:
        build = lambda: nvidia_device_plugin_values(instance_types=instance_types())  # noqa: E731
    elif kind is DevicePluginKind.EFA:
        repository = efa_device_plugin_repository(cluster)
        build = lambda: efa_device_plugin_values(  # noqa: E731
            instance_types=instance_types(), image_repository=repository
        )
    else:
        build = lambda: neuron_device_plugin_values(instance_types=instance_types())  # noqa: E731
    id, spec = CLUSTER_DEVICE_PLUGINS[kind]
    return _helm_chart(cluster, cluster, spec, _lazy_values(build), id=id)


@jsii.implements(cdk.IStableAnyProducer)
class _Produce:
    def __init__(self, produce: Callable[[], Any]) -> None:
        self._produce = produce

    def produce(self) -> Any:
        return self._produce()


def _lazy_values(build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Helm values whose every top-level entry is computed by ``build()`` when the template is written (the
    chart's custom resource serializes its values with ``Stack.toJsonString``, which resolves tokens)."""

    def entry(key: str) -> Callable[[], Any]:
        return lambda: build()[key]

    return {key: cdk.Lazy.any(_Produce(entry(key))) for key in build()}


def _check_instance_types(
    scope: Construct,
    instance_types: Sequence[str],
    kind: str,
    feature: str,
    has: Callable[[InstanceType], bool],
) -> list[InstanceType]:
    """The catalogue entries of ``instance_types``: at least one, each with ``feature``."""
    if not instance_types:
        raise fail(
            scope.node.path, "instance_types", f"must name at least one {kind} instance type, got none"
        )
    entries = [catalog_entry(scope, name, "instance_types") for name in instance_types]
    for entry in entries:
        if not has(entry):
            raise fail(
                scope.node.path,
                "instance_types",
                f"'{entry.name}' has no {feature}; give {kind} instance types (`training-clusters catalog` lists them)",
            )
    return entries


# --------------------------------------------------------------------------------------------------
# FSx for Lustre CSI driver


#: Where each team's data lives on the file system: ``<TEAM_DIRECTORY_PARENT>/<namespace>``.
TEAM_DIRECTORY_PARENT = "teams"
#: The group that owns each team's directory (mode 2770, owner root): a pod running as root writes there (unless
#: the file system squashes root), any other pod joins the group (``securityContext.supplementalGroups: [1000]``
#: or ``runAsGroup: 1000``). The same number for every team is enough: a team mounts its own directory only.
TEAM_DIRECTORY_GID = 1000
TEAM_DIRECTORY_MODE = "2770"
#: Where the job that makes the team directories runs, with the claim of the file system's root it mounts.
TEAM_DIRECTORY_NAMESPACE = ADDON_NAMESPACE
TEAM_DIRECTORY_JOB = "fsx-lustre-team-directories"


def team_directory(namespace: str) -> str:
    """The directory of a team namespace's data, relative to the file system's root."""
    return f"{TEAM_DIRECTORY_PARENT}/{namespace}"


def lustre_volume_manifests(
    *,
    file_system_id: str,
    dns_name: str,
    mount_name: str,
    capacity_gib: int,
    name: str = "fsx-lustre",
    namespace: str = "default",
    subdirectory: str | None = None,
    volume_name: str | None = None,
) -> list[dict[str, Any]]:
    """StorageClass, PersistentVolume and PersistentVolumeClaim for an existing FSx for Lustre file system.

    Static provisioning: the PV names the file system; the PVC (``<name>`` in ``namespace``) binds to exactly
    that PV (``volume_name``, default ``<name>-pv``). With ``subdirectory`` the PV is that directory of the file
    system, never its root: the driver has no sub-directory field, and mounts
    ``<dnsname>@tcp:/<mountname>`` as given (kubernetes-sigs/aws-fsx-csi-driver ``pkg/driver/node.go``,
    ``NodePublishVolume``), so the PV's ``mountname`` is ``<mount name>/<subdirectory>``, the Lustre client's
    form for a sub-directory mount, as the driver's issue #247 describes (the directory must exist, or the mount
    fails and kubelet retries). Its ``volumeHandle`` names the directory too: one handle per volume.
    """
    storage_class = f"{name}-static"
    capacity = f"{capacity_gib}Gi"
    volume_name = volume_name or f"{name}-pv"
    mount = mount_name if subdirectory is None else f"{mount_name}/{subdirectory}"
    handle = file_system_id if subdirectory is None else f"{file_system_id}::{subdirectory}"
    return [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": storage_class},
            "provisioner": FSX_CSI_PROVISIONER,
            "reclaimPolicy": "Retain",
            "volumeBindingMode": "Immediate",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume_name},
            "spec": {
                "capacity": {"storage": capacity},
                "volumeMode": "Filesystem",
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": storage_class,
                "mountOptions": ["flock"],
                # only this namespace's claim of this name may bind it
                "claimRef": {"namespace": namespace, "name": name},
                "csi": {
                    "driver": FSX_CSI_PROVISIONER,
                    "volumeHandle": handle,
                    "volumeAttributes": {"dnsname": dns_name, "mountname": mount},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": storage_class,
                "volumeName": volume_name,
                "resources": {"requests": {"storage": capacity}},
            },
        },
    ]


def team_volume_manifests(
    *,
    file_system_id: str,
    dns_name: str,
    mount_name: str,
    capacity_gib: int,
    namespaces: Sequence[str],
    name: str = "fsx-lustre",
) -> list[dict[str, Any]]:
    """One StorageClass, then per team namespace a PV of its own directory (:func:`team_directory`) named
    ``<name>-<namespace>`` and the claim ``<name>`` in the namespace bound to it. No team's claim reaches the
    file system's root or another team's directory: a PV binds one claim (its ``claimRef``), and a namespace's
    users create claims in their namespace only."""
    objects: list[dict[str, Any]] = []
    for namespace in namespaces:
        storage_class, volume, claim = lustre_volume_manifests(
            file_system_id=file_system_id,
            dns_name=dns_name,
            mount_name=mount_name,
            capacity_gib=capacity_gib,
            name=name,
            namespace=namespace,
            subdirectory=team_directory(namespace),
            volume_name=f"{name}-{namespace}",
        )
        objects += [storage_class] if not objects else []
        objects += [volume, claim]
    return objects


def team_directory_script(namespaces: Sequence[str], *, root: str = "/fsx") -> str:
    """The shell (busybox ``sh``) that makes each team's directory under ``root``: owner root, group
    :data:`TEAM_DIRECTORY_GID`, mode 2770 (new files keep the group). Idempotent; it refuses, and fails, where a
    path is a symbolic link or not a directory (``chown`` and ``chmod`` would follow a link)."""
    lines = [
        "set -eu",
        "make() {",
        '  if [ -L "$1" ] || { [ -e "$1" ] && [ ! -d "$1" ]; }; then',
        '    echo "refusing $1: not a directory" >&2; exit 1',
        "  fi",
        '  mkdir -p "$1"',
        '  chown "$2" "$1"',
        '  chmod "$3" "$1"',
        "}",
        f"make {root}/{TEAM_DIRECTORY_PARENT} 0:0 0755",
    ]
    lines += [
        f"make {root}/{team_directory(ns)} 0:{TEAM_DIRECTORY_GID} {TEAM_DIRECTORY_MODE}" for ns in namespaces
    ]
    return "\n".join(lines) + "\n"


def team_directory_commands(namespaces: Sequence[str], *, root: str = "/fsx") -> str:
    """One line that makes the team directories as :func:`team_directory_script` does, to run by hand as root on
    a client that root squash exempts (where the directory job cannot run)."""
    paths = [f"{root}/{TEAM_DIRECTORY_PARENT}"] + [f"{root}/{team_directory(ns)}" for ns in namespaces]
    teams = " ".join(paths[1:])
    return (
        f"mkdir -p {' '.join(paths)} && chown 0:0 {paths[0]} && chmod 0755 {paths[0]} && "
        f"chown 0:{TEAM_DIRECTORY_GID} {teams} && chmod {TEAM_DIRECTORY_MODE} {teams}"
    )


def team_directory_manifests(
    *,
    file_system_id: str,
    dns_name: str,
    mount_name: str,
    capacity_gib: int,
    namespaces: Sequence[str],
    image: str = BUSYBOX_IMAGE,
) -> list[dict[str, Any]]:
    """A claim of the file system's root in ``kube-system`` (where a team has no rights), and a Job there that
    mounts it on a system node and runs :func:`team_directory_script`. The Job's name carries a digest of the
    namespaces: a Job's pod template cannot change, so a new list is a new Job (the old one is pruned)."""
    name = "fsx-lustre-root"
    digest = hashlib.sha256("\n".join(namespaces).encode()).hexdigest()[:8]
    _, volume, claim = lustre_volume_manifests(
        file_system_id=file_system_id,
        dns_name=dns_name,
        mount_name=mount_name,
        capacity_gib=capacity_gib,
        name=name,
        namespace=TEAM_DIRECTORY_NAMESPACE,
        volume_name=f"{name}-pv",
    )
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{TEAM_DIRECTORY_JOB}-{digest}", "namespace": TEAM_DIRECTORY_NAMESPACE},
        "spec": {
            "backoffLimit": 10,
            "template": {
                "spec": {
                    **system_placement(),
                    "restartPolicy": "OnFailure",
                    "containers": [
                        {
                            "name": "mkdir",
                            "image": image,
                            "command": ["sh", "-c", team_directory_script(namespaces)],
                            "securityContext": {
                                "runAsUser": 0,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
                            },
                            "volumeMounts": [{"name": "fsx", "mountPath": "/fsx"}],
                        }
                    ],
                    "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": name}}],
                }
            },
        },
    }
    return [volume, claim, job]


@checked_props
class FsxCsiDriver(Construct):
    """The FSx for Lustre CSI driver (EKS add-on, EKS Pod Identity) and, in each team namespace, a PVC bound to
    that team's own directory of a SharedLustre.

    Example::

        FsxCsiDriver(self, "FsxCsi", cluster=cluster, storage=shared_lustre, namespaces=["vision", "nlp"])
        # pods of vision mount teams/vision of the file system with:
        #   volumes: [{name: data, persistentVolumeClaim: {claimName: fsx-lustre}}]

    A team's claim is its directory ``teams/<namespace>`` (:func:`team_volume_manifests`), never the file
    system's root: a root pod of one team neither reads nor writes another team's data or the nodes' shared
    homes. The directories are made by a Job in ``kube-system`` on a system node (:func:`team_directory_manifests`:
    owner root, group :data:`TEAM_DIRECTORY_GID`, mode 2770), through a claim of the root that only
    ``kube-system`` holds. With root squash (``storage.root_squash``) root cannot make them: there is no Job, and
    a warning names the commands to run once from a client exempt from root squash.

    The controller's role (EKS Pod Identity, through the cluster's agent) may only describe file systems:
    static provisioning needs nothing more. Its pods run on the system nodes (the add-on's
    ``controller.nodeSelector`` and ``controller.tolerations``). The nodes must reach the file system (the stack
    allows the cluster security group on the Lustre ports).

    Attributes: ``addon``, ``pod_identity_agent`` (the cluster's), ``role``, ``manifest`` (the team volumes and
    claims), ``directories`` (the root claim and the Job, or None with root squash), ``claim_name``,
    ``namespaces``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        storage: SharedLustre,
        capacity_gib: int | None = None,
        claim_name: str = "fsx-lustre",
        namespaces: Sequence[str] = ("default",),
        addon_version: str | None = None,
    ) -> None:
        """Install the add-on, the team directories and their volumes.

        :param cluster: The cluster.
        :param storage: The file system to bind.
        :param capacity_gib: The capacity the PVs and PVCs advertise. Default: the file system's own
            (``storage.storage_capacity_gib``); required only for an adopted file system whose capacity was
            not given, and then it must not differ from the file system's.
        :param claim_name: Name of the PVC pods mount, in each namespace. Default: ``fsx-lustre``.
        :param namespaces: The team namespaces: each gets its directory ``teams/<namespace>`` and a claim of it.
            They must exist (or be created in the same deployment, before the claims). Default: ``default``.
        :param addon_version: Pin the ``aws-fsx-csi-driver`` add-on, e.g. ``v1.6.0-eksbuild.1`` (list them with
            ``aws eks describe-addon-versions --addon-name aws-fsx-csi-driver``). Default: the version EKS
            picks as default for the cluster's Kubernetes version when the add-on is created.
        """
        super().__init__(scope, id)
        _check_addon_version(self, addon_version)
        capacity_gib = self._capacity(storage, capacity_gib)
        self._check_namespaces(namespaces)
        self.claim_name = claim_name
        self.namespaces = list(namespaces)
        self.pod_identity_agent = cluster.pod_identity_agent
        self.role = _pod_identity_role(
            self, cluster, FSX_CSI_SERVICE_ACCOUNT, "FSx for Lustre CSI driver controller (EKS Pod Identity)"
        )
        self.role.add_to_policy(iam.PolicyStatement(actions=["fsx:DescribeFileSystems"], resources=["*"]))
        policy = self.role.node.try_find_child("DefaultPolicy")
        assert policy is not None
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "fsx:DescribeFileSystems supports no resource-level permissions; it is the only action the "
            "CSI controller is granted (static provisioning creates and deletes nothing)",
        )
        accept_inline_policy(policy, "the FSx CSI controller's Pod Identity role")
        self.addon = _pod_identity_addon(
            self, cluster, FSX_CSI_ADDON, addon_version, FSX_CSI_SERVICE_ACCOUNT, self.role
        )
        volume: dict[str, Any] = {
            "file_system_id": storage.file_system_id,
            "dns_name": storage.dns_name,
            "mount_name": storage.mount_name,
            "capacity_gib": capacity_gib,
        }
        self.directories: eks.KubernetesManifest | None = None
        if storage.root_squash is None:
            self.directories = eks.KubernetesManifest(
                self,
                "TeamDirectories",
                cluster=cluster.cluster,
                manifest=team_directory_manifests(**volume, namespaces=self.namespaces),
            )
            self.directories.node.add_dependency(self.addon)
        else:
            cdk.Annotations.of(self).add_warning_v2(
                "training-clusters:fsx-team-directories",
                "root squash is on, so no job can make the team directories: from a client in "
                "root_squash_exempt_nids, with the file system mounted at /fsx, run once: "
                + team_directory_commands(self.namespaces),
            )
        self.manifest = eks.KubernetesManifest(
            self,
            "Volume",
            cluster=cluster.cluster,
            manifest=team_volume_manifests(**volume, namespaces=self.namespaces, name=claim_name),
        )
        self.manifest.node.add_dependency(self.addon)

    def _check_namespaces(self, namespaces: Sequence[str]) -> None:
        if not namespaces:
            raise fail(self.node.path, "namespaces", "must name at least one namespace, got none")
        for namespace in namespaces:  # each reaches the directory job's shell: DNS labels only
            refuse(self, "namespaces", kubernetes_name_problem(namespace))
        refuse(self, "namespaces", unique_names_problem(list(namespaces)))

    def _capacity(self, storage: SharedLustre, capacity_gib: int | None) -> int:
        known = storage.storage_capacity_gib
        if capacity_gib is None:
            if known is None:
                raise fail(
                    self.node.path,
                    "capacity_gib",
                    "is required for an adopted file system whose ExistingLustre gives no storage_capacity_gib",
                )
            return known
        if known is not None and capacity_gib != known:
            raise fail(
                self.node.path,
                "capacity_gib",
                f"must match the file system's storage_capacity_gib ({known}) or be omitted, got {capacity_gib}",
            )
        return capacity_gib


# --------------------------------------------------------------------------------------------------
# EBS CSI driver and a gp3 StorageClass


def gp3_storage_class_manifest(
    *, name: str = "gp3", reclaim_policy: str = "Retain", volume_tags: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A StorageClass of encrypted gp3 EBS volumes, provisioned in the AZ of the pod that first uses them.

    ``volume_tags`` go on every volume it makes, as the driver's ``tagSpecification_<n>: "key=value"``
    parameters (https://github.com/kubernetes-sigs/aws-ebs-csi-driver/blob/master/docs/tagging.md), in key order.
    """
    tags = sorted((volume_tags or {}).items())
    parameters = {"type": "gp3", "encrypted": "true"}
    parameters.update({f"tagSpecification_{n}": f"{key}={value}" for n, (key, value) in enumerate(tags, 1)})
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": EBS_CSI_PROVISIONER,
        "parameters": parameters,
        "reclaimPolicy": reclaim_policy,
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
    }


@checked_props
class EbsCsiDriver(Construct):
    """The Amazon EBS CSI driver (EKS add-on, EKS Pod Identity) and a gp3 StorageClass.

    Example::

        ebs = EbsCsiDriver(self, "EbsCsi", cluster=cluster)
        # claims name it: storageClassName: gp3

    The controller's role carries ``AmazonEBSCSIDriverPolicyV2`` (it creates, attaches and deletes volumes
    for claims, and only those tagged ``ebs.csi.aws.com/cluster: "true"``, as it tags the ones it makes). Volumes are encrypted with the account's default EBS key. With the nodes' metadata hop
    limit of 1 the driver's pods read instance facts from the Kubernetes API instead, which does not count
    the ENIs attached: on instances with many EFA interfaces the attachment limit it reports can be too high,
    so keep EBS-backed pods on the system nodes (GPU nodes are tainted, so they land there by default).

    Attributes: ``addon``, ``role``, ``storage_class`` (the manifest), ``storage_class_name``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        storage_class_name: str = "gp3",
        addon_version: str | None = None,
        removal_policy: cdk.RemovalPolicy | RemovalPolicy | str = cdk.RemovalPolicy.RETAIN,
        volume_tags: Mapping[str, str] | None = None,
    ) -> None:
        """Install the add-on and the StorageClass.

        :param cluster: The cluster.
        :param storage_class_name: Name of the StorageClass. Default: ``gp3``.
        :param addon_version: Pin the ``aws-ebs-csi-driver`` add-on, e.g. ``v1.45.0-eksbuild.2`` (``aws eks
            describe-addon-versions --addon-name aws-ebs-csi-driver``). Default: EKS's default for the
            cluster's Kubernetes version when the add-on is created.
        :param removal_policy: What happens to a volume when its claim is deleted: RETAIN keeps it (the
            StorageClass's ``reclaimPolicy: Retain``), DESTROY deletes it. Deleting the cluster deletes no
            volume either way. Default: RETAIN.
        :param volume_tags: Tags for every volume the StorageClass makes (the driver makes them, not
            CloudFormation, so the stack's tags do not reach them), e.g. the environment's ``project`` and
            ``environment``, which ``training-clusters cleanup`` looks for. Keys must not start with ``aws:``
            and neither keys nor values may hold ``=`` or ``,``. Default: none (the driver's own tags only).
        """
        super().__init__(scope, id)
        removal_policy = to_removal_policy(self, "removal_policy", removal_policy)
        volume_tags = dict(volume_tags or {})
        _check_volume_tags(self, volume_tags)
        _check_addon_version(self, addon_version)
        self.storage_class_name = storage_class_name
        self.role = _pod_identity_role(
            self, cluster, EBS_CSI_SERVICE_ACCOUNT, "Amazon EBS CSI driver controller (EKS Pod Identity)"
        )
        self.role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(EBS_CSI_POLICY))
        role_resource = self.role.node.default_child
        assert isinstance(role_resource, iam.CfnRole)
        acknowledge(
            role_resource,
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{EBS_CSI_POLICY}]",
            f"{EBS_CSI_POLICY} is AWS's scoped policy for the EBS CSI driver (every volume and snapshot action "
            "conditioned on the driver's own ebs.csi.aws.com/cluster tag) and keeps current with it; only the driver's "
            "controller can assume this role",
        )
        self.addon = _pod_identity_addon(
            self, cluster, EBS_CSI_ADDON, addon_version, EBS_CSI_SERVICE_ACCOUNT, self.role
        )
        reclaim = "Delete" if removal_policy is cdk.RemovalPolicy.DESTROY else "Retain"
        self.storage_class = eks.KubernetesManifest(
            self,
            "StorageClass",
            cluster=cluster.cluster,
            manifest=[
                gp3_storage_class_manifest(
                    name=storage_class_name, reclaim_policy=reclaim, volume_tags=volume_tags
                )
            ],
        )
        self.storage_class.node.add_dependency(self.addon)


def _check_volume_tags(scope: Construct, volume_tags: Mapping[str, str]) -> None:
    """EC2's tag limits (keys up to 128 characters, values up to 256, none under ``aws:``) and the driver's
    ``key=value`` form (``=`` and ``,`` would split a pair)."""
    for key, value in volume_tags.items():
        if not key or len(key) > 128 or key.lower().startswith("aws:") or "=" in key or "," in key:
            raise fail(
                scope.node.path,
                "volume_tags",
                f"keys must be 1-128 characters without '=' or ',' and not start with 'aws:', got {key!r}",
            )
        if len(value) > 256 or "=" in value or "," in value:
            raise fail(
                scope.node.path,
                "volume_tags",
                f"values must be at most 256 characters without '=' or ',', got {key!r}: {value!r}",
            )


def _check_addon_version(scope: Construct, addon_version: str | None) -> None:
    if addon_version is not None and not _EKS_ADDON_VERSION.fullmatch(addon_version):
        raise fail(
            scope.node.path,
            "addon_version",
            f"must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), got '{addon_version}'",
        )


def _pod_identity_role(
    scope: Construct, cluster: GpuEksCluster, service_account: str, description: str
) -> iam.Role:
    """A role EKS Pod Identity may assume for the add-on's ``service_account`` (in kube-system) only."""
    return iam.Role(
        scope,
        "Role",
        assumed_by=pod_identity_principal(cluster.cluster.cluster_arn, ADDON_NAMESPACE, service_account),
        description=description,
    )


def _pod_identity_addon(
    scope: Construct,
    cluster: GpuEksCluster,
    name: str,
    version: str | None,
    service_account: str,
    role: iam.IRole,
) -> eks.CfnAddon:
    """An EKS add-on whose ``service_account`` gets ``role`` through the cluster's Pod Identity agent, and whose
    controller runs on the system nodes (:data:`CSI_CONTROLLER_CONFIGURATION`)."""
    addon = eks.CfnAddon(
        scope,
        "Resource",
        addon_name=name,
        addon_version=version,
        cluster_name=cluster.cluster_name,
        resolve_conflicts="OVERWRITE",
        configuration_values=json.dumps(CSI_CONTROLLER_CONFIGURATION),
        pod_identity_associations=[
            eks.CfnAddon.PodIdentityAssociationProperty(
                service_account=service_account, role_arn=role.role_arn
            )
        ],
    )
    addon.node.add_dependency(cluster.pod_identity_agent)
    # The add-on turns ACTIVE only once its pods can run: on the system nodes.
    addon.node.add_dependency(cluster.system_nodegroup)
    return addon


# --------------------------------------------------------------------------------------------------
# GPU Operator (DCGM) and kube-prometheus-stack


def gpu_operator_values(
    *,
    service_monitor: bool,
    mig_layouts: Mapping[str, Mapping[str, int]] | None = None,
    mig_strategy: MigStrategy = MigStrategy.NONE,
) -> dict[str, Any]:
    """GPU Operator for DCGM metrics: driver, container toolkit and device plugin come from elsewhere.

    The EKS AL2023 NVIDIA AMI carries the driver and the toolkit; :class:`NvidiaDevicePlugin` runs the
    device plugin. dcgm-exporter collects our metric list (:mod:`training_clusters.monitoring.dcgm`: the
    defaults plus SM activity and occupancy, NVLink bytes and throttling), from a ConfigMap the chart creates;
    its ServiceMonitor relabels every series with the node it came from (``node``, ``instance``).

    The MIG manager (which the chart enables by default) runs only with ``mig_layouts`` (config name to
    ``{profile: count}`` per GPU, :func:`~training_clusters.workloads.mig.mig_parted_config`), from a ConfigMap the
    chart creates; nodes apply the entry their ``nvidia.com/mig.config`` label names, ``all-disabled``
    otherwise. ``mig.strategy`` follows the device plugin's.
    """
    mig_manager: dict[str, Any] = {"enabled": bool(mig_layouts)}
    if mig_layouts:
        mig_manager["config"] = {
            "name": MIG_CONFIGMAP,
            "create": True,
            "default": MIG_DISABLED,
            "data": {"config.yaml": yaml.safe_dump(mig_parted_config(mig_layouts), sort_keys=False)},
        }
    values: dict[str, Any] = {
        "migManager": mig_manager,
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        "devicePlugin": {"enabled": False},
        "dcgmExporter": {
            "enabled": True,
            "config": {"name": DCGM_METRICS_CONFIGMAP, "create": True, "data": dcgm_metrics_csv()},
            "serviceMonitor": {
                "enabled": service_monitor,
                "relabelings": [dict(r) for r in NODE_RELABELINGS],
            },
        },
        "daemonsets": {"tolerations": list(_ACCELERATOR_TOLERATIONS[:1])},
        # the operator (and its CRD upgrade hook) and Node Feature Discovery's master and garbage collector on
        # the system nodes; NFD's worker DaemonSet keeps the chart's GPU toleration
        "operator": system_placement(),
        "node-feature-discovery": {"master": system_placement(), "gc": system_placement()},
    }
    if mig_layouts:
        values["mig"] = {"strategy": mig_strategy.value}
    return values


def kube_prometheus_stack_values(
    *,
    grafana: bool,
    storage_class: str | None = None,
    prometheus_volume_gib: int = 50,
    grafana_volume_gib: int = 10,
    cloudwatch_region: str | None = None,
) -> dict[str, Any]:
    """Prometheus that scrapes every ServiceMonitor (DCGM's included); Grafana with a generated password.

    Quiet on EKS: the control plane's kube-controller-manager, kube-scheduler and etcd run in AWS's account,
    not as pods Prometheus can scrape, so their ServiceMonitors would find nothing and their default rules
    (``KubeControllerManagerDown``, ``KubeSchedulerDown``, the etcd alerts) fire forever; all three are turned
    off (the chart renders their rules only when the component is enabled). So is kube-proxy's scrape
    (:data:`EKS_LOOPBACK_ONLY`): EKS's kube-proxy serves metrics on 127.0.0.1 only, so ``KubeProxyDown`` would
    fire on every healthy cluster; its rules, Service and ServiceMonitor go with it. Grafana's admin password: chart
    82.6.0 sets none (``adminPassword`` is commented out in its values), so the Grafana chart generates a
    random one into its secret. node-exporter gets the EFA counter sidecar
    (:func:`~training_clusters.monitoring.efa.node_exporter_values`) and labels its series with the node. With ``storage_class``, Prometheus keeps its TSDB on a
    ``prometheus_volume_gib`` volume (``retentionSize`` at 90% of it, so 15 days never overfill it) and
    Grafana its database on a ``grafana_volume_gib`` one, replaced by ``Recreate`` (a ReadWriteOnce volume
    cannot be mounted by the old and the new pod at once). Without it both keep data in the pod: lost on
    every restart. Grafana runs as the chart's own service account,
    :data:`~training_clusters.monitoring.cloudwatch.GRAFANA_SERVICE_ACCOUNT`, which a Pod Identity association
    names (setting ``grafana.serviceAccount.name`` to it would change no rendered object). With
    ``cloudwatch_region`` Grafana also gets the CloudWatch data source in that region
    (:func:`~training_clusters.monitoring.cloudwatch.cloudwatch_datasource`, AWS SDK default credentials).
    The operator (and its admission-webhook certificate Jobs), Prometheus, Alertmanager, Grafana and
    kube-state-metrics run on the system nodes (:func:`~training_clusters.workloads.tenancy.system_placement`);
    node-exporter keeps the chart's toleration of every ``NoSchedule`` taint, so it runs on every node.
    """
    spec: dict[str, Any] = {
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
        "retention": "15d",
        **system_placement(),
    }
    values: dict[str, Any] = {
        "prometheus": {"prometheusSpec": spec},
        "alertmanager": {"alertmanagerSpec": system_placement()},
        "prometheusOperator": {**system_placement(), "admissionWebhooks": {"patch": system_placement()}},
        "kube-state-metrics": system_placement(),
        "grafana": {"enabled": grafana, **(system_placement() if grafana else {})},
        **{component: {"enabled": False} for component in (*EKS_MANAGED_CONTROL_PLANE, *EKS_LOOPBACK_ONLY)},
        "prometheus-node-exporter": node_exporter_values(),
    }
    if storage_class is not None:
        spec["retentionSize"] = f"{prometheus_volume_gib * 1024 * 9 // 10}MB"
        spec["storageSpec"] = {
            "volumeClaimTemplate": {
                "spec": {
                    "storageClassName": storage_class,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": f"{prometheus_volume_gib}Gi"}},
                }
            }
        }
    if grafana and storage_class is not None:
        values["grafana"]["persistence"] = {
            "enabled": True,
            "storageClassName": storage_class,
            "accessModes": ["ReadWriteOnce"],
            "size": f"{grafana_volume_gib}Gi",
        }
        values["grafana"]["deploymentStrategy"] = {"type": "Recreate"}
    if grafana and cloudwatch_region is not None:
        values["grafana"]["additionalDataSources"] = [cloudwatch_datasource(cloudwatch_region)]
    return values


@checked_props
class GpuMonitoring(Construct):
    """NVIDIA GPU Operator (DCGM exporter) and, optionally, kube-prometheus-stack scraping it.

    Example::

        GpuMonitoring(self, "Monitoring", cluster=cluster, prometheus=True, grafana=True)

    Metrics persist by default: Prometheus keeps 15 days (capped at 90% of its volume) on an encrypted gp3
    EBS volume, and Grafana its users and dashboards on another, through the EBS CSI driver (an
    :class:`EbsCsiDriver` created here unless you pass yours). Volumes outlive pod restarts and, with the
    driver's default RETAIN, the release. Alertmanager's silences are not persisted. With
    ``persistent_storage=False`` everything is ephemeral: lost whenever a pod restarts or moves.

    With Grafana come our dashboards (:mod:`training_clusters.monitoring.dashboards`: GPU overview, GPU
    stragglers, EFA throughput), as ConfigMaps its sidecar loads. Given ``lustre``, also the FSx for Lustre
    dashboard, read from CloudWatch: Grafana gets a CloudWatch data source in the stack's region and, through
    EKS Pod Identity (an association on the chart's namespace and Grafana's service account), a role that may
    only read CloudWatch metrics (:data:`~training_clusters.monitoring.cloudwatch.CLOUDWATCH_READ_ACTIONS`; why
    Grafana 12.4's data source picks those credentials up: :mod:`training_clusters.monitoring.cloudwatch`).
    With ``mig_layouts`` the GPU Operator's MIG manager partitions the nodes labelled ``nvidia.com/mig.config``
    (:mod:`training_clusters.workloads.mig`).

    Attributes: ``gpu_operator`` (chart), ``prometheus`` (chart or None), ``gpu_operator_values``,
    ``prometheus_values`` (or None), ``dashboards`` (manifest or None), ``ebs_csi_driver`` (or None when
    nothing persists), ``grafana_role`` and ``grafana_pod_identity`` (the association; both None without
    ``lustre``), ``network_policy`` (the manifest admitting connections to Prometheus, Alertmanager and
    Grafana from their own namespace only; None without Prometheus: reach Grafana with ``kubectl
    port-forward``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        prometheus: bool = True,
        grafana: bool = True,
        persistent_storage: bool = True,
        ebs_csi_driver: EbsCsiDriver | None = None,
        prometheus_volume_gib: int = 50,
        grafana_volume_gib: int = 10,
        gpu_operator_chart: HelmChartSpec = GPU_OPERATOR_CHART,
        prometheus_chart: HelmChartSpec = KUBE_PROMETHEUS_STACK_CHART,
        mig_layouts: Mapping[str, Mapping[str, int]] | None = None,
        mig_strategy: MigStrategy | str = MigStrategy.MIXED,
        lustre: SharedLustre | None = None,
        volume_tags: Mapping[str, str] | None = None,
    ) -> None:
        """Install the charts.

        :param cluster: The cluster.
        :param prometheus: Install kube-prometheus-stack; DCGM gets a ServiceMonitor. Default: True.
        :param grafana: Include Grafana (needs ``prometheus``). Default: True.
        :param persistent_storage: Keep Prometheus's and Grafana's data on gp3 EBS volumes. Default: True;
            False keeps it in the pods (ephemeral).
        :param ebs_csi_driver: The cluster's EBS CSI driver, when you install it yourself. Default: one is
            created here when something persists (a cluster holds one ``aws-ebs-csi-driver`` add-on only).
        :param prometheus_volume_gib: Prometheus's volume. Default: 50.
        :param grafana_volume_gib: Grafana's volume. Default: 10.
        :param gpu_operator_chart: Default: :data:`GPU_OPERATOR_CHART`.
        :param prometheus_chart: Default: :data:`KUBE_PROMETHEUS_STACK_CHART`.
        :param mig_layouts: MIG layouts to offer, by config name (the ``nvidia.com/mig.config`` label value):
            ``{profile: count}`` per GPU (:func:`~training_clusters.workloads.mig.mig_devices`). Default: none, and
            the GPU Operator's MIG manager stays off.
        :param mig_strategy: The device plugin's MIG strategy (SINGLE or MIXED), used with ``mig_layouts``.
            Default: MIXED.
        :param lustre: The environment's FSx for Lustre file system, for the FSx dashboard (needs ``grafana``).
            Default: none, and Grafana gets no CloudWatch data source and no AWS role.
        :param volume_tags: Tags for the Prometheus and Grafana volumes, given to the EBS CSI driver created
            here (:class:`EbsCsiDriver`'s ``volume_tags``). Default: none.
        """
        super().__init__(scope, id)
        if grafana and not prometheus:
            raise fail(
                self.node.path, "grafana", "needs prometheus (Grafana's data source), got prometheus=False"
            )
        self._check_lustre(grafana, lustre)
        self._check_ebs_csi_driver(persistent_storage, ebs_csi_driver)
        self._check_volume("prometheus_volume_gib", prometheus_volume_gib)
        self._check_volume("grafana_volume_gib", grafana_volume_gib)
        self.ebs_csi_driver: EbsCsiDriver | None = None
        if prometheus and persistent_storage:
            self.ebs_csi_driver = ebs_csi_driver or EbsCsiDriver(
                self, "EbsCsiDriver", cluster=cluster, volume_tags=volume_tags
            )
        self.prometheus: eks.HelmChart | None = None
        self.dashboards: eks.KubernetesManifest | None = None
        self.prometheus_values: dict[str, Any] | None = None
        self.grafana_role: iam.Role | None = None
        self.grafana_pod_identity: eks.CfnPodIdentityAssociation | None = None
        self.network_policy: eks.KubernetesManifest | None = None
        if prometheus:
            self.prometheus_values = kube_prometheus_stack_values(
                grafana=grafana,
                storage_class=self.ebs_csi_driver.storage_class_name if self.ebs_csi_driver else None,
                prometheus_volume_gib=prometheus_volume_gib,
                grafana_volume_gib=grafana_volume_gib,
                cloudwatch_region=cdk.Stack.of(self).region if lustre is not None else None,
            )
            self.prometheus = _helm_chart(
                self, cluster, prometheus_chart, self.prometheus_values, id="Prometheus"
            )
            if self.ebs_csi_driver is not None:
                # The claims bind once the driver runs and its StorageClass exists.
                self.prometheus.node.add_dependency(self.ebs_csi_driver.storage_class)
            # Prometheus, Alertmanager and Grafana: reachable from their own namespace only
            self.network_policy = eks.KubernetesManifest(
                self,
                "NetworkPolicy",
                cluster=cluster.cluster,
                manifest=[monitoring_ingress(prometheus_chart.namespace)],
            )
            self.network_policy.node.add_dependency(self.prometheus)
            if lustre is not None:
                self._grant_grafana_cloudwatch(cluster, prometheus_chart.namespace)
            if grafana:
                # in the chart's namespace, once the chart has made it; Grafana's sidecar loads them
                self.dashboards = eks.KubernetesManifest(
                    self,
                    "Dashboards",
                    cluster=cluster.cluster,
                    manifest=dashboard_configmaps(
                        prometheus_chart.namespace, lustre.file_system_id if lustre is not None else None
                    ),
                )
                self.dashboards.node.add_dependency(self.prometheus)
        mig_strategy = option(self, "mig_strategy", MigStrategy, mig_strategy)
        if mig_layouts and mig_strategy is MigStrategy.NONE:
            raise fail(self.node.path, "mig_strategy", "must be SINGLE or MIXED with mig_layouts, got NONE")
        self.gpu_operator_values = gpu_operator_values(
            service_monitor=prometheus, mig_layouts=mig_layouts, mig_strategy=mig_strategy
        )
        self.gpu_operator = _helm_chart(
            self, cluster, gpu_operator_chart, self.gpu_operator_values, id="GpuOperator"
        )
        if self.prometheus is not None:
            # DCGM's ServiceMonitor needs the Prometheus Operator's CRDs.
            self.gpu_operator.node.add_dependency(self.prometheus)

    def _grant_grafana_cloudwatch(self, cluster: GpuEksCluster, namespace: str) -> None:
        """A role only Grafana's service account may assume (EKS Pod Identity), reading CloudWatch metrics."""
        self.grafana_role = iam.Role(
            self,
            "GrafanaRole",
            assumed_by=pod_identity_principal(
                cluster.cluster.cluster_arn, namespace, GRAFANA_SERVICE_ACCOUNT
            ),
            description="Grafana's CloudWatch data source: metric reads for the FSx dashboard (EKS Pod Identity)",
        )
        self.grafana_role.add_to_policy(
            iam.PolicyStatement(actions=list(CLOUDWATCH_READ_ACTIONS), resources=["*"])
        )
        policy = self.grafana_role.node.try_find_child("DefaultPolicy")
        assert isinstance(policy, iam.Policy)
        # acknowledged at synth only while * holds these reads alone (a statement added later is judged too)
        reason = (
            "cloudwatch:GetMetricData and cloudwatch:ListMetrics are granted on * as CloudWatch's permissions "
            "reference does: their only resource type, the optional CloudWatch dataset, has no documented ARN for "
            "queries of AWS-published metrics such as AWS/FSx. They are the role's only actions, metric reads, "
            "and only Grafana's service account in this cluster can assume it"
        )
        cdk.Aspects.of(policy).add(AcknowledgeWildcards(policy, {"*": (CLOUDWATCH_READ_ACTIONS, reason)}))
        accept_inline_policy(policy, "Grafana's Pod Identity role")
        self.grafana_pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "GrafanaPodIdentity",
            cluster_name=cluster.cluster_name,
            namespace=namespace,
            service_account=GRAFANA_SERVICE_ACCOUNT,
            role_arn=self.grafana_role.role_arn,
        )
        assert self.prometheus is not None
        # Pod Identity reaches only pods created after the association exists.
        self.prometheus.node.add_dependency(self.grafana_pod_identity)

    def _check_lustre(self, grafana: bool, lustre: SharedLustre | None) -> None:
        if lustre is not None and not grafana:
            raise fail(
                self.node.path,
                "lustre",
                "is shown on Grafana's FSx dashboard and needs grafana=True, got grafana=False",
            )

    def _check_ebs_csi_driver(self, persistent_storage: bool, ebs_csi_driver: EbsCsiDriver | None) -> None:
        if ebs_csi_driver is not None and not persistent_storage:
            raise fail(
                self.node.path,
                "ebs_csi_driver",
                "is only used to persist metrics; got one with persistent_storage=False",
            )

    def _check_volume(self, field: str, size_gib: int) -> None:
        if not is_unresolved(size_gib) and size_gib < 1:
            raise fail(self.node.path, field, f"must be 1 or more, got {size_gib}")


def _helm_chart(
    scope: Construct,
    cluster: GpuEksCluster,
    spec: HelmChartSpec,
    values: dict[str, Any],
    *,
    id: str = "Resource",
) -> eks.HelmChart:
    return eks.HelmChart(
        scope,
        id,
        cluster=cluster.cluster,
        chart=spec.chart,
        repository=spec.repository,
        version=spec.version,
        namespace=spec.namespace,
        release=spec.release,
        create_namespace=True,
        values=values,
    )
