"""Cluster add-ons for GPU training, as helm charts with pinned versions and typed values.

Each chart is installed at deploy time from its publisher's repository by CDK's kubectl handler: no
third-party manifest is copied into this repository. Values are built by plain functions from typed
options (tested as dicts) and validated when the construct is created.

Example::

    NvidiaDevicePlugin(self, "DevicePlugin", cluster=cluster, instance_types=["g5.2xlarge"],
                       time_slicing=TimeSlicing(replicas=10))
    EfaDevicePlugin(self, "EfaPlugin", cluster=cluster, instance_types=["p5.48xlarge"])
    FsxCsiDriver(self, "FsxCsi", cluster=cluster, storage=shared_lustre, capacity_gib=1200)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from training_clusters.catalog import InstanceType
from training_clusters.compliance import acknowledge
from training_clusters.constructs._validation import fail
from training_clusters.constructs.eks_gpu import GPU_TAINT_KEY, NEURON_TAINT_KEY, GpuEksCluster, catalog_entry
from training_clusters.constructs.eks_sharing import (
    MigStrategy,
    Mps,
    TimeSlicing,
    gpu_sharing_problem,
    mig_problem,
)
from training_clusters.constructs.lustre import SharedLustre

__all__ = [
    "EFA_DEVICE_PLUGIN_CHART",
    "GPU_OPERATOR_CHART",
    "KUBE_PROMETHEUS_STACK_CHART",
    "NEURON_HELM_CHART",
    "NVIDIA_DEVICE_PLUGIN_CHART",
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
    "efa_device_plugin_values",
    "gpu_operator_values",
    "kube_prometheus_stack_values",
    "lustre_volume_manifests",
    "neuron_device_plugin_values",
    "nvidia_device_plugin_values",
]

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class HelmChartSpec:
    """Where a chart comes from and which version we install."""

    chart: str
    repository: str
    version: str
    namespace: str
    release: str


#: NVIDIA's device plugin (advertises ``nvidia.com/gpu``): https://github.com/NVIDIA/k8s-device-plugin
NVIDIA_DEVICE_PLUGIN_CHART = HelmChartSpec(
    chart="nvidia-device-plugin",
    repository="https://nvidia.github.io/k8s-device-plugin",
    version="0.19.0",
    namespace="nvidia-device-plugin",
    release="nvidia-device-plugin",
)
#: AWS's EFA device plugin (advertises ``vpc.amazonaws.com/efa``), from the eks-charts repository.
EFA_DEVICE_PLUGIN_CHART = HelmChartSpec(
    chart="aws-efa-k8s-device-plugin",
    repository="https://aws.github.io/eks-charts",
    version="v0.5.20",
    namespace="kube-system",
    release="aws-efa-k8s-device-plugin",
)
#: AWS Neuron's chart (device plugin advertising ``aws.amazon.com/neuron`` / ``neuroncore``), published as an
#: OCI artifact on ECR Public: https://github.com/aws-neuron/neuron-helm-charts (1.9.0 = Neuron SDK 2.31).
NEURON_HELM_CHART = HelmChartSpec(
    chart="neuron-helm-chart",
    repository="oci://public.ecr.aws/neuron/neuron-helm-chart",
    version="1.9.0",
    namespace="kube-system",
    release="neuron-helm-chart",
)
#: NVIDIA GPU Operator, used here for DCGM metrics only (the EKS AMI carries driver and toolkit).
GPU_OPERATOR_CHART = HelmChartSpec(
    chart="gpu-operator",
    repository="https://helm.ngc.nvidia.com/nvidia",
    version="v25.3.4",
    namespace="gpu-operator",
    release="gpu-operator",
)
#: Prometheus Operator, Prometheus, Alertmanager and Grafana.
KUBE_PROMETHEUS_STACK_CHART = HelmChartSpec(
    chart="kube-prometheus-stack",
    repository="https://prometheus-community.github.io/helm-charts",
    version="82.6.0",
    namespace="monitoring",
    release="kube-prometheus-stack",
)

#: EKS add-on name and the service account of the FSx for Lustre CSI driver's controller.
FSX_CSI_ADDON = "aws-fsx-csi-driver"
FSX_CSI_SERVICE_ACCOUNT = "fsx-csi-controller-sa"
FSX_CSI_PROVISIONER = "fsx.csi.aws.com"
POD_IDENTITY_AGENT_ADDON = "eks-pod-identity-agent"

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


def nvidia_device_plugin_values(
    *,
    instance_types: Sequence[str],
    time_slicing: TimeSlicing | None = None,
    mps: Mps | None = None,
    mig_strategy: MigStrategy = MigStrategy.NONE,
) -> dict[str, Any]:
    """Helm values of the NVIDIA device plugin chart.

    The chart's default affinity waits for Node Feature Discovery labels that EKS nodes do not have;
    we schedule on our GPU nodegroups' instance types instead.
    """
    config = device_plugin_config(time_slicing=time_slicing, mps=mps, mig_strategy=mig_strategy)
    return {
        "config": {"map": {"default": yaml.safe_dump(config, sort_keys=False)}, "default": "default"},
        "affinity": instance_type_affinity(instance_types),
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, _ACCELERATOR_TOLERATIONS[0]],
    }


class NvidiaDevicePlugin(Construct):
    """NVIDIA's device plugin on the given GPU instance types, with optional GPU sharing.

    Example::

        NvidiaDevicePlugin(self, "DevicePlugin", cluster=cluster, instance_types=["g5.2xlarge"],
                           time_slicing=TimeSlicing(replicas=10))

    Time-slicing, MPS and MIG are mutually exclusive; MIG needs MIG-capable GPUs (A100, H100, H200, B200).
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
        mig_strategy: MigStrategy = MigStrategy.NONE,
        chart: HelmChartSpec = NVIDIA_DEVICE_PLUGIN_CHART,
    ) -> None:
        """Install the chart.

        :param cluster: The cluster.
        :param instance_types: The GPU instance types of the cluster's nodegroups; the plugin runs there only.
        :param time_slicing: Share GPUs by time-slicing. Default: no sharing.
        :param mps: Share GPUs through MPS. Default: no sharing.
        :param mig_strategy: Default: NONE.
        :param chart: Default: :data:`NVIDIA_DEVICE_PLUGIN_CHART`.
        """
        super().__init__(scope, id)
        types = _check_instance_types(self, instance_types, "GPU", "NVIDIA GPU", lambda entry: entry.is_gpu)
        self._check_sharing(time_slicing, mps, mig_strategy)
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

    def _check_mig_capable(self, types: Sequence[InstanceType], mig_strategy: MigStrategy) -> None:
        for found in types:
            problem = mig_problem(found, mig_strategy)
            if problem:
                raise fail(self.node.path, "mig_strategy", problem)


# --------------------------------------------------------------------------------------------------
# EFA device plugin


def efa_device_plugin_values(*, instance_types: Sequence[str]) -> dict[str, Any]:
    """Helm values of the EFA device plugin: run on exactly these instance types.

    The chart's own allow-list lags new hardware (p5en, p6-*): without this its DaemonSet runs zero pods
    there and NCCL silently falls back to TCP.
    """
    return {
        "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": sorted(set(instance_types))},
        "tolerations": list(_ACCELERATOR_TOLERATIONS),
    }


class EfaDevicePlugin(Construct):
    """AWS's EFA device plugin, scheduled on exactly the given EFA instance types.

    Example::

        EfaDevicePlugin(self, "EfaPlugin", cluster=cluster, instance_types=["p5en.48xlarge"])

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
    ) -> None:
        """Install the chart.

        :param cluster: The cluster.
        :param instance_types: The instance types of the EFA nodegroups.
        :param chart: Default: :data:`EFA_DEVICE_PLUGIN_CHART`.
        """
        super().__init__(scope, id)
        _check_instance_types(self, instance_types, "EFA", "EFA", lambda entry: entry.efa_supported)
        self.values = efa_device_plugin_values(instance_types=instance_types)
        self.chart = _helm_chart(self, cluster, chart, self.values)


# --------------------------------------------------------------------------------------------------
# Neuron device plugin (Trainium)


def neuron_device_plugin_values(*, instance_types: Sequence[str]) -> dict[str, Any]:
    """Helm values of AWS Neuron's chart: the device plugin only, on exactly these instance types.

    The chart's ``neuronInstances`` list feeds its node affinity; like the EFA plugin's, a built-in list
    lags new hardware, so it names our types. Its node problem detector is off (EKS node auto-repair,
    which our nodegroups turn on, already replaces unhealthy nodes, and it runs privileged) and so is the
    optional scheduler extension (whole-device requests need none).
    """
    return {
        "neuronInstances": sorted(set(instance_types)),
        "npd": {"enabled": False},
        "scheduler": {"enabled": False},
    }


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
        self.values = neuron_device_plugin_values(instance_types=instance_types)
        self.chart = _helm_chart(self, cluster, chart, self.values)


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


def lustre_volume_manifests(
    *,
    file_system_id: str,
    dns_name: str,
    mount_name: str,
    capacity_gib: int,
    name: str = "fsx-lustre",
    namespace: str = "default",
) -> list[dict[str, Any]]:
    """StorageClass, PersistentVolume and PersistentVolumeClaim for an existing FSx for Lustre file system.

    Static provisioning: the PV names the file system; the PVC (``<name>``) binds to exactly that PV.
    """
    storage_class = f"{name}-static"
    capacity = f"{capacity_gib}Gi"
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
            "metadata": {"name": f"{name}-pv"},
            "spec": {
                "capacity": {"storage": capacity},
                "volumeMode": "Filesystem",
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": storage_class,
                "mountOptions": ["flock"],
                "csi": {
                    "driver": FSX_CSI_PROVISIONER,
                    "volumeHandle": file_system_id,
                    "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name},
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
                "volumeName": f"{name}-pv",
                "resources": {"requests": {"storage": capacity}},
            },
        },
    ]


class FsxCsiDriver(Construct):
    """The FSx for Lustre CSI driver (EKS add-on, EKS Pod Identity) and a PVC bound to a SharedLustre.

    Example::

        FsxCsiDriver(self, "FsxCsi", cluster=cluster, storage=shared_lustre, capacity_gib=1200)
        # pods mount it with: volumes: [{name: data, persistentVolumeClaim: {claimName: fsx-lustre}}]

    Installs the ``eks-pod-identity-agent`` add-on too. The driver's role may only describe file systems:
    static provisioning needs nothing more. The nodes must reach the file system (the stack allows the
    cluster security group on the Lustre ports).

    Attributes: ``addon``, ``pod_identity_agent``, ``role``, ``manifest``, ``claim_name``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        storage: SharedLustre,
        capacity_gib: int,
        claim_name: str = "fsx-lustre",
        namespace: str = "default",
        addon_version: str | None = None,
    ) -> None:
        """Install the add-ons and the volume.

        :param cluster: The cluster.
        :param storage: The file system to bind.
        :param capacity_gib: Its storage capacity (what the PV and PVC advertise).
        :param claim_name: Name of the PVC pods mount. Default: ``fsx-lustre``.
        :param namespace: Namespace of the PVC. Default: ``default``.
        :param addon_version: Pin the ``aws-fsx-csi-driver`` add-on, e.g. ``v1.6.0-eksbuild.1`` (list them with
            ``aws eks describe-addon-versions --addon-name aws-fsx-csi-driver``). Default: the version EKS
            picks as default for the cluster's Kubernetes version when the add-on is created.
        """
        super().__init__(scope, id)
        if addon_version is not None and not re.fullmatch(r"v\d+\.\d+\.\d+-eksbuild\.\d+", addon_version):
            raise fail(
                self.node.path,
                "addon_version",
                f"must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), got '{addon_version}'",
            )
        self.claim_name = claim_name
        self.pod_identity_agent = eks.CfnAddon(
            self,
            "PodIdentityAgent",
            addon_name=POD_IDENTITY_AGENT_ADDON,
            cluster_name=cluster.cluster_name,
            resolve_conflicts="OVERWRITE",
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.SessionTagsPrincipal(iam.ServicePrincipal("pods.eks.amazonaws.com")),
            description="FSx for Lustre CSI driver controller (EKS Pod Identity)",
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
        self.addon = eks.CfnAddon(
            self,
            "Resource",
            addon_name=FSX_CSI_ADDON,
            addon_version=addon_version,
            cluster_name=cluster.cluster_name,
            resolve_conflicts="OVERWRITE",
            pod_identity_associations=[
                eks.CfnAddon.PodIdentityAssociationProperty(
                    service_account=FSX_CSI_SERVICE_ACCOUNT, role_arn=self.role.role_arn
                )
            ],
        )
        self.addon.node.add_dependency(self.pod_identity_agent)
        # The add-on turns ACTIVE only once its pods can run: on the system nodes.
        self.addon.node.add_dependency(cluster.system_nodegroup)
        self.manifest = eks.KubernetesManifest(
            self,
            "Volume",
            cluster=cluster.cluster,
            manifest=lustre_volume_manifests(
                file_system_id=storage.file_system_id,
                dns_name=storage.dns_name,
                mount_name=storage.mount_name,
                capacity_gib=capacity_gib,
                name=claim_name,
                namespace=namespace,
            ),
        )
        self.manifest.node.add_dependency(self.addon)


# --------------------------------------------------------------------------------------------------
# GPU Operator (DCGM) and kube-prometheus-stack


def gpu_operator_values(*, service_monitor: bool) -> dict[str, Any]:
    """GPU Operator for DCGM metrics only: driver, container toolkit and device plugin come from elsewhere.

    The EKS AL2023 NVIDIA AMI carries the driver and the toolkit; :class:`NvidiaDevicePlugin` runs the
    device plugin.
    """
    return {
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        "devicePlugin": {"enabled": False},
        "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": service_monitor}},
        "daemonsets": {"tolerations": list(_ACCELERATOR_TOLERATIONS[:1])},
    }


def kube_prometheus_stack_values(*, grafana: bool) -> dict[str, Any]:
    """Prometheus that scrapes every ServiceMonitor (DCGM's included); Grafana with a generated password.

    An empty ``grafana.adminPassword`` makes the Grafana chart generate a random one in its secret instead
    of kube-prometheus-stack's well-known default.
    """
    values: dict[str, Any] = {
        "prometheus": {
            "prometheusSpec": {
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "retention": "15d",
            }
        },
        "grafana": {"enabled": grafana},
    }
    if grafana:
        values["grafana"]["adminPassword"] = ""
    return values


class GpuMonitoring(Construct):
    """NVIDIA GPU Operator (DCGM exporter) and, optionally, kube-prometheus-stack scraping it.

    Example::

        GpuMonitoring(self, "Monitoring", cluster=cluster, prometheus=True, grafana=True)

    Attributes: ``gpu_operator`` (chart), ``prometheus`` (chart or None), ``gpu_operator_values``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        prometheus: bool = True,
        grafana: bool = True,
        gpu_operator_chart: HelmChartSpec = GPU_OPERATOR_CHART,
        prometheus_chart: HelmChartSpec = KUBE_PROMETHEUS_STACK_CHART,
    ) -> None:
        """Install the charts.

        :param cluster: The cluster.
        :param prometheus: Install kube-prometheus-stack; DCGM gets a ServiceMonitor. Default: True.
        :param grafana: Include Grafana (needs ``prometheus``). Default: True.
        :param gpu_operator_chart: Default: :data:`GPU_OPERATOR_CHART`.
        :param prometheus_chart: Default: :data:`KUBE_PROMETHEUS_STACK_CHART`.
        """
        super().__init__(scope, id)
        if grafana and not prometheus:
            raise fail(
                self.node.path, "grafana", "needs prometheus (Grafana's data source), got prometheus=False"
            )
        self.prometheus: eks.HelmChart | None = None
        if prometheus:
            self.prometheus = _helm_chart(
                self,
                cluster,
                prometheus_chart,
                kube_prometheus_stack_values(grafana=grafana),
                id="Prometheus",
            )
        self.gpu_operator_values = gpu_operator_values(service_monitor=prometheus)
        self.gpu_operator = _helm_chart(
            self, cluster, gpu_operator_chart, self.gpu_operator_values, id="GpuOperator"
        )
        if self.prometheus is not None:
            # DCGM's ServiceMonitor needs the Prometheus Operator's CRDs.
            self.gpu_operator.node.add_dependency(self.prometheus)


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
