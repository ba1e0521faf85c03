"""The DCGM exporter's metric list and scrape relabelling: the metrics that tell which node is slow.

The GPU Operator (chart v25.3.4) runs dcgm-exporter 4.3.1-4.4.0, whose built-in list
(``etc/dcp-metrics-included.csv`` at that tag of github.com/NVIDIA/dcgm-exporter) leaves
``DCGM_FI_PROF_SM_ACTIVE``, ``DCGM_FI_PROF_SM_OCCUPANCY`` and NVLink byte counters commented out: the straggler
query ``avg by (node) (DCGM_FI_PROF_SM_ACTIVE)`` finds nothing. :data:`DCGM_METRICS` is that list with them
turned on; the operator mounts it from a ConfigMap (``dcgmExporter.config``, key ``dcgm-metrics.csv``).

Every series then carries the node it was measured on as ``node`` (and ``instance``), from the scraped pod's
``__meta_kubernetes_pod_node_name`` (:data:`NODE_RELABELINGS`): without it ``instance`` is the exporter pod's
address, which changes whenever the pod restarts and names no node.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The ConfigMap (in the GPU Operator's namespace) holding :func:`dcgm_metrics_csv`.
DCGM_METRICS_CONFIGMAP = "training-clusters-dcgm-metrics"
#: The label every DCGM series carries the node name in (relabelled at scrape time).
NODE_LABEL = "node"


@dataclass(frozen=True)
class DcgmMetric:
    """One line of dcgm-exporter's CSV: DCGM field, Prometheus type, help text."""

    field: str
    prometheus_type: str
    help: str


#: dcgm-exporter 4.3.1-4.4.0's ``dcp-metrics-included.csv`` as shipped (its uncommented lines), then the
#: profiling metrics it leaves out, under "Added". Field names are DCGM's (``dcgm_fields.h``); the profiling
#: (``DCGM_FI_PROF_*``) fields are sampled by DCGM's profiling module on data-centre GPUs (T4 has a subset).
DCGM_METRICS: tuple[DcgmMetric, ...] = (
    # Clocks
    DcgmMetric("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    DcgmMetric("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    # Temperature
    DcgmMetric("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    DcgmMetric("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    # Power
    DcgmMetric("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    DcgmMetric(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."
    ),
    # PCIe
    DcgmMetric("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    # Utilisation
    DcgmMetric("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    DcgmMetric("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    DcgmMetric("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    DcgmMetric("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    # Errors
    DcgmMetric("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    # Memory
    DcgmMetric("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    DcgmMetric("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    DcgmMetric("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    # NVLink
    DcgmMetric(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
    ),
    # vGPU, remapped rows
    DcgmMetric("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    DcgmMetric(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    DcgmMetric(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"
    ),
    DcgmMetric("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    # Static configuration, a label on the other metrics
    DcgmMetric("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
    # Profiling (DCP)
    DcgmMetric("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    DcgmMetric(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."
    ),
    DcgmMetric(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    DcgmMetric(
        "DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus (bytes/s)."
    ),
    DcgmMetric(
        "DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus (bytes/s)."
    ),
    # Added: what the shipped list leaves commented out or lacks
    DcgmMetric("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    DcgmMetric("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM."),
    DcgmMetric(
        "DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge", "The rate of data transmitted over NVLink (bytes/s)."
    ),
    DcgmMetric("DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge", "The rate of data received over NVLink (bytes/s)."),
    DcgmMetric(
        "DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in us)."
    ),
    DcgmMetric(
        "DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in us)."
    ),
)


def dcgm_metrics_csv(metrics: tuple[DcgmMetric, ...] = DCGM_METRICS) -> str:
    """dcgm-exporter's CSV (``field, type, help`` per line) for ``metrics``."""
    header = (
        "# Metrics dcgm-exporter collects (written by training_clusters.monitoring.dcgm).\n"
        "# DCGM field, Prometheus metric type, help message\n"
    )
    return header + "".join(f"{m.field}, {m.prometheus_type}, {m.help}\n" for m in metrics)


def collected_metrics(metrics: tuple[DcgmMetric, ...] = DCGM_METRICS) -> frozenset[str]:
    """The Prometheus metric names the list produces (``label`` fields become labels, not series)."""
    return frozenset(m.field for m in metrics if m.prometheus_type != "label")


#: Scrape-time relabelling of the DCGM ServiceMonitor, in the ClusterPolicy's (Prometheus Operator's
#: ``RelabelConfig``) spelling: the exporter pod's node name as ``node`` and as ``instance``.
NODE_RELABELINGS: tuple[dict[str, object], ...] = (
    {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": NODE_LABEL, "action": "replace"},
    {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "instance", "action": "replace"},
)
