"""NVIDIA's GPU Operator for DCGM metrics and, given MIG layouts, its MIG manager: the chart's values
(:class:`~training_clusters.constructs.eks.addons.gpu_monitoring.GpuMonitoring` installs it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from training_clusters.constructs.eks.addons.base import ACCELERATOR_TOLERATIONS
from training_clusters.model.options import MigStrategy
from training_clusters.monitoring.dcgm import DCGM_METRICS_CONFIGMAP, NODE_RELABELINGS, dcgm_metrics_csv
from training_clusters.workloads.mig import MIG_CONFIGMAP, MIG_DISABLED, mig_parted_config
from training_clusters.workloads.tenancy import system_placement


def gpu_operator_values(
    *,
    service_monitor: bool,
    mig_layouts: Mapping[str, Mapping[str, int]] | None = None,
    mig_strategy: MigStrategy = MigStrategy.NONE,
) -> dict[str, Any]:
    """GPU Operator for DCGM metrics: driver, container toolkit and device plugin come from elsewhere.

    The EKS AL2023 NVIDIA AMI carries the driver and the toolkit; :class:`~training_clusters.constructs.eks.addons.nvidia_device_plugin.NvidiaDevicePlugin` runs the
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
        "daemonsets": {"tolerations": list(ACCELERATOR_TOLERATIONS[:1])},
        # the operator (and its CRD upgrade hook) and Node Feature Discovery's master and garbage collector on
        # the system nodes; NFD's worker DaemonSet keeps the chart's GPU toleration
        "operator": system_placement(),
        "node-feature-discovery": {"master": system_placement(), "gc": system_placement()},
    }
    if mig_layouts:
        values["mig"] = {"strategy": mig_strategy.value}
    return values
