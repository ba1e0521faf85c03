"""NVIDIA's device plugin (chart ``nvidia-device-plugin``): each GPU a ``nvidia.com/gpu``, optionally shared
(time-slicing, MPS) or advertised as the MIG partitions the GPU Operator's MIG manager made."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml
from constructs import Construct

from training_clusters.catalog import InstanceType
from training_clusters.constructs.eks.addons.base import (
    ACCELERATOR_TOLERATIONS,
    HelmAddon,
    check_instance_types,
    instance_type_affinity,
)
from training_clusters.constructs.eks.cluster import GPU_TAINT_KEY, DevicePluginKind, GpuEksCluster
from training_clusters.constructs.private.validation import (
    checked_props,
    parse_option,
    prop_error,
    raise_if_problem,
)
from training_clusters.model.options import MigStrategy, Mps, TimeSlicing
from training_clusters.model.releases import NVIDIA_DEVICE_PLUGIN_CHART, HelmChartSpec
from training_clusters.rules.eks import gpu_sharing_problem, mig_problem, mps_replicas_problem
from training_clusters.workloads.mig import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL

#: Node label that chart 0.19.0's MPS control daemon DaemonSet selects (its ``nodeSelector``,
#: ``templates/daemonset-mps-control-daemon.yml``). Only GPU Feature Discovery sets it by itself; we turn
#: GFD off and put the label on the nodegroups instead (:func:`device_plugin_node_labels`).
MPS_CAPABLE_LABEL = "nvidia.com/mps.capable"


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
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, ACCELERATOR_TOLERATIONS[0]],
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
class NvidiaDevicePlugin(HelmAddon):
    """NVIDIA's device plugin on the given GPU instance types, with optional GPU sharing.

    Example::

        NvidiaDevicePlugin(self, "DevicePlugin", cluster=cluster, instance_types=["g5.2xlarge"],
                           time_slicing=TimeSlicing(replicas=10))

    :class:`GpuEksCluster` installs this plugin itself, without sharing, for its GPU nodegroups; creating one for
    the cluster replaces that (as the EFA and Neuron plugins do theirs).

    Time-slicing and MPS are mutually exclusive. With MPS, every node the plugin runs on must carry the
    label :func:`device_plugin_node_labels` gives (``nvidia.com/mps.capable=true``: the chart's MPS control
    daemon runs only there, and without it the node advertises no GPUs); put it on the nodegroups, as
    :class:`~training_clusters.stacks.eks.EksTrainingEnvironment` does. MPS serves at most 48 pods per GPU.

    A MIG strategy (SINGLE, MIXED) only says how to advertise partitions the GPU Operator's MIG manager
    made: give :class:`~training_clusters.constructs.eks.addons.gpu_monitoring.GpuMonitoring` the layouts (``mig_layouts``) and label the nodegroups
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
        mig_strategy = parse_option(self, "mig_strategy", MigStrategy, mig_strategy)
        types = check_instance_types(self, instance_types, "GPU", "NVIDIA GPU", lambda entry: entry.is_gpu)
        cluster.device_plugin_given(DevicePluginKind.NVIDIA)
        self._check_sharing(time_slicing, mps, mig_strategy)
        self._check_mps_replicas(mps)
        self._check_mig_capable(types, mig_strategy)
        self._install(
            cluster,
            chart,
            nvidia_device_plugin_values(
                instance_types=[t.name for t in types],
                time_slicing=time_slicing,
                mps=mps,
                mig_strategy=mig_strategy,
            ),
        )

    def _check_sharing(self, time_slicing: TimeSlicing | None, mps: Mps | None, mig: MigStrategy) -> None:
        problem = gpu_sharing_problem(time_slicing, mps, mig)
        if problem:
            raise prop_error(self.node.path, *problem)

    def _check_mps_replicas(self, mps: Mps | None) -> None:
        problem = mps_replicas_problem(mps)
        if problem:
            raise prop_error(self.node.path, *problem)

    def _check_mig_capable(self, types: Sequence[InstanceType], mig_strategy: MigStrategy) -> None:
        problems = [mig_problem(found, mig_strategy) for found in types]
        if problems and all(problems):
            raise_if_problem(self, "mig_strategy", problems[0])
