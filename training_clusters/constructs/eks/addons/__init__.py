"""Cluster add-ons for GPU training: one module per add-on, on a shared base.

Each Helm add-on (:class:`~training_clusters.constructs.eks.addons.base.HelmAddon`) installs its chart at deploy
time from its publisher's repository by CDK's kubectl handler, at the version pinned in
:mod:`training_clusters.model.releases`: no third-party manifest is copied into this repository. Values are built by
plain functions from typed options (tested as dicts) and validated when the construct is created.

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

The modules: :mod:`.base` (the Helm add-on base: the chart, its values, placement on instance types),
:mod:`.managed_addon` (the EKS-managed add-ons' base: a Pod Identity role, the controller on the system nodes),
one per add-on (:mod:`.nvidia_device_plugin`, :mod:`.efa_device_plugin`, :mod:`.neuron_device_plugin`,
:mod:`.fsx_csi_driver`, :mod:`.ebs_csi_driver`, :mod:`.gpu_operator`, :mod:`.gpu_monitoring`) and
:mod:`.cluster_device_plugins` (the device plugins :class:`~training_clusters.constructs.eks.cluster.GpuEksCluster`
installs itself). The add-ons' constructs, values functions and constants are importable from here (``__all__``),
and so are the Kubernetes objects the CSI drivers apply, which live with the other objects as data in
:mod:`training_clusters.workloads.storage`; the bases' helpers are imported from their modules.
"""

from __future__ import annotations

from training_clusters.constructs.eks.addons.base import (
    INSTANCE_TYPE_LABEL,
    HelmAddon,
    instance_type_affinity,
)
from training_clusters.constructs.eks.addons.cluster_device_plugins import (
    CLUSTER_DEVICE_PLUGINS,
    cluster_device_plugin,
)
from training_clusters.constructs.eks.addons.ebs_csi_driver import (
    EBS_CSI_ADDON,
    EBS_CSI_POLICY,
    EBS_CSI_SERVICE_ACCOUNT,
    EbsCsiDriver,
)
from training_clusters.constructs.eks.addons.efa_device_plugin import (
    EfaDevicePlugin,
    efa_device_plugin_repository,
    efa_device_plugin_values,
)
from training_clusters.constructs.eks.addons.fsx_csi_driver import (
    FSX_CSI_ADDON,
    FSX_CSI_SERVICE_ACCOUNT,
    FsxCsiDriver,
)
from training_clusters.constructs.eks.addons.gpu_monitoring import (
    EKS_LOOPBACK_ONLY,
    EKS_MANAGED_CONTROL_PLANE,
    GpuMonitoring,
    kube_prometheus_stack_values,
)
from training_clusters.constructs.eks.addons.gpu_operator import (
    gpu_operator_values,
)
from training_clusters.constructs.eks.addons.managed_addon import (
    ADDON_NAMESPACE,
    CSI_CONTROLLER_CONFIGURATION,
)
from training_clusters.constructs.eks.addons.neuron_device_plugin import (
    NEURON_DEVICE_PLUGIN_TOLERATIONS,
    NeuronDevicePlugin,
    neuron_device_plugin_values,
)
from training_clusters.constructs.eks.addons.nvidia_device_plugin import (
    MPS_CAPABLE_LABEL,
    NvidiaDevicePlugin,
    device_plugin_config,
    device_plugin_node_labels,
    mig_aware_affinity,
    nvidia_device_plugin_values,
)
from training_clusters.model.options import (
    MigStrategy,
    Mps,
    TimeSlicing,
)
from training_clusters.model.releases import (
    EFA_DEVICE_PLUGIN_CHART,
    EFA_DEVICE_PLUGIN_IMAGE_TAG,
    GPU_OPERATOR_CHART,
    KUBE_PROMETHEUS_STACK_CHART,
    NEURON_HELM_CHART,
    NVIDIA_DEVICE_PLUGIN_CHART,
    HelmChartSpec,
)
from training_clusters.workloads.storage import (
    EBS_CSI_PROVISIONER,
    FSX_CSI_PROVISIONER,
    TEAM_DIRECTORY_GID,
    TEAM_DIRECTORY_JOB,
    TEAM_DIRECTORY_MODE,
    TEAM_DIRECTORY_NAMESPACE,
    TEAM_DIRECTORY_PARENT,
    gp3_storage_class_manifest,
    lustre_volume_manifests,
    team_directory,
    team_directory_commands,
    team_directory_manifests,
    team_directory_script,
    team_volume_manifests,
)

__all__ = [
    "ADDON_NAMESPACE",
    "CLUSTER_DEVICE_PLUGINS",
    "CSI_CONTROLLER_CONFIGURATION",
    "EBS_CSI_ADDON",
    "EBS_CSI_POLICY",
    "EBS_CSI_PROVISIONER",
    "EBS_CSI_SERVICE_ACCOUNT",
    "EFA_DEVICE_PLUGIN_CHART",
    "EFA_DEVICE_PLUGIN_IMAGE_TAG",
    "EKS_LOOPBACK_ONLY",
    "EKS_MANAGED_CONTROL_PLANE",
    "FSX_CSI_ADDON",
    "FSX_CSI_PROVISIONER",
    "FSX_CSI_SERVICE_ACCOUNT",
    "GPU_OPERATOR_CHART",
    "INSTANCE_TYPE_LABEL",
    "KUBE_PROMETHEUS_STACK_CHART",
    "MPS_CAPABLE_LABEL",
    "NEURON_DEVICE_PLUGIN_TOLERATIONS",
    "NEURON_HELM_CHART",
    "NVIDIA_DEVICE_PLUGIN_CHART",
    "TEAM_DIRECTORY_GID",
    "TEAM_DIRECTORY_JOB",
    "TEAM_DIRECTORY_MODE",
    "TEAM_DIRECTORY_NAMESPACE",
    "TEAM_DIRECTORY_PARENT",
    "EbsCsiDriver",
    "EfaDevicePlugin",
    "FsxCsiDriver",
    "GpuMonitoring",
    "HelmAddon",
    "HelmChartSpec",
    "MigStrategy",
    "Mps",
    "NeuronDevicePlugin",
    "NvidiaDevicePlugin",
    "TimeSlicing",
    "cluster_device_plugin",
    "device_plugin_config",
    "device_plugin_node_labels",
    "efa_device_plugin_repository",
    "efa_device_plugin_values",
    "gp3_storage_class_manifest",
    "gpu_operator_values",
    "instance_type_affinity",
    "kube_prometheus_stack_values",
    "lustre_volume_manifests",
    "mig_aware_affinity",
    "neuron_device_plugin_values",
    "nvidia_device_plugin_values",
    "team_directory",
    "team_directory_commands",
    "team_directory_manifests",
    "team_directory_script",
    "team_volume_manifests",
]
