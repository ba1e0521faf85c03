"""Grafana dashboards shipped with the EKS stacks, as code: built here, provisioned as ConfigMaps.

kube-prometheus-stack's Grafana runs the dashboard sidecar (``grafana.sidecar.dashboards``: label
``grafana_dashboard``, value ``"1"``, every namespace), which loads the JSON of each ConfigMap so labelled; the
stack applies :func:`dashboard_configmaps` beside the chart, so a dashboard changes with the stack's version,
never downloaded at run time. The GPU and EFA panels query Prometheus (the chart's data source, picked by the
``datasource`` variable) for metrics this library collects: DCGM's (:mod:`training_clusters.monitoring.dcgm`,
labelled ``node``) and the EFA counters (:mod:`training_clusters.monitoring.efa`).

* ``gpu-overview``: utilisation, memory, power, temperature and XID errors of every GPU.
* ``gpu-stragglers``: SM activity by node and its spread (max - min across nodes), tensor and DRAM activity:
  in a data-parallel job every node should look alike; the low one is the straggler.
* ``efa-throughput``: EFA bytes sent and received per node (and RDMA reads/writes).
* ``fsx-throughput`` (with a Lustre file system): read, write and total throughput of the stack's FSx for Lustre
  file system, its data and metadata operations and its free capacity, from CloudWatch (``AWS/FSx``, where FSx
  publishes them) through the CloudWatch data source (:mod:`training_clusters.monitoring.cloudwatch`).

Every Prometheus query is evaluated by a real Prometheus on a synthetic cluster with a slow node in ``make
integration`` (``tests/integration/test_dashboards_prometheus.py``): each returns data, rates read counters, the
legend's labels survive the aggregation, ratios stay ratios, and the straggler panels name the slow node. A stat
or a table asks for an instant query (the value now), a time series for the range.

The dashboards are EKS-only, and why: they rely on what kube-prometheus-stack brings there, a Prometheus that
discovers every exporter, a Grafana whose sidecar loads the ConfigMaps, and the ``node`` label taken from
Kubernetes service discovery. Slurm clusters have none of it. HyperPod's opt-in lifecycle step
(``enable_observability``) runs a node exporter and DCGM's exporter with DCGM's default metric list (no SM
activity: the straggler panels would stay empty) for a Prometheus the user runs; ParallelCluster and PCS run no
exporters, and no Slurm node exports EFA counters.
"""

from __future__ import annotations

import json
import re
from typing import Any

from training_clusters.monitoring.cloudwatch import CLOUDWATCH_DATASOURCE_UID

#: Grafana's dashboard JSON schema version the dashboards are written in (Grafana 11/12 read it as is).
SCHEMA_VERSION = 39
#: What the Grafana sidecar looks for (kube-prometheus-stack 82.6.0's ``grafana.sidecar.dashboards``).
DASHBOARD_LABEL = ("grafana_dashboard", "1")
_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_GRID_WIDTH = 24


def _panel(
    title: str,
    exprs: list[tuple[str, str]],
    *,
    unit: str,
    kind: str = "timeseries",
    width: int = 12,
    height: int = 8,
    description: str = "",
) -> dict[str, Any]:
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": dict(_DATASOURCE),
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": [
            {
                "refId": chr(ord("A") + i),
                "expr": expr,
                "legendFormat": legend,
                "datasource": dict(_DATASOURCE),
                # a stat or a table shows each series' value now: over a range, bottomk(1, ...) would return
                # every node that was lowest at some step, one stat each
                "instant": kind != "timeseries",
                "range": kind == "timeseries",
            }
            for i, (expr, legend) in enumerate(exprs)
        ],
        "gridPos": {"w": width, "h": height},
    }


def _dashboard(
    uid: str,
    title: str,
    description: str,
    panels: list[dict[str, Any]],
    *,
    variables: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Lay ``panels`` out left to right, wrapping at Grafana's 24 columns, and number them. Default variables:
    the Prometheus data source and the node (from DCGM's ``node`` label)."""
    x = y = row_height = 0
    for number, panel in enumerate(panels, start=1):
        grid = panel["gridPos"]
        if x + grid["w"] > _GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        grid.update(x=x, y=y)
        x += grid["w"]
        row_height = max(row_height, grid["h"])
        panel["id"] = number
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["training-clusters"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": False,
        "time": {"from": "now-3h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": _prometheus_variables() if variables is None else variables},
        "panels": panels,
    }


def _prometheus_variables() -> list[dict[str, Any]]:
    return [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
        {
            "name": "node",
            "type": "query",
            "label": "Node",
            "datasource": dict(_DATASOURCE),
            "query": {"query": "label_values(DCGM_FI_DEV_GPU_UTIL, node)", "refId": "nodes"},
            "definition": "label_values(DCGM_FI_DEV_GPU_UTIL, node)",
            "includeAll": True,
            "multi": True,
            "allValue": ".*",
            "refresh": 2,
        },
    ]


_NODE = 'node=~"$node"'


def gpu_overview() -> dict[str, Any]:
    """Every GPU's utilisation, memory, power, temperature, and the XID errors that mean a sick GPU."""
    return _dashboard(
        "tc-gpu-overview",
        "GPU overview",
        "Utilisation, memory, power, temperature and XID errors of every GPU (DCGM exporter).",
        [
            _panel(
                "GPU utilisation by node",
                [(f"avg by (node) (DCGM_FI_DEV_GPU_UTIL{{{_NODE}}})", "{{node}}")],
                unit="percent",
            ),
            _panel(
                "GPU memory used by node",
                [
                    (
                        f"sum by (node) (DCGM_FI_DEV_FB_USED{{{_NODE}}}) / sum by (node) "
                        f"(DCGM_FI_DEV_FB_USED{{{_NODE}}} + DCGM_FI_DEV_FB_FREE{{{_NODE}}})",
                        "{{node}}",
                    )
                ],
                unit="percentunit",
            ),
            _panel(
                "Power draw by node",
                [(f"sum by (node) (DCGM_FI_DEV_POWER_USAGE{{{_NODE}}})", "{{node}}")],
                unit="watt",
            ),
            _panel(
                "Hottest GPU by node",
                [(f"max by (node) (DCGM_FI_DEV_GPU_TEMP{{{_NODE}}})", "{{node}}")],
                unit="celsius",
            ),
            _panel(
                "Last XID error by GPU (non-zero: look at the node)",
                [(f"max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS{{{_NODE}}}) > 0", "{{node}} GPU {{gpu}}")],
                unit="none",
                kind="table",
                width=24,
                description="XID codes are listed in NVIDIA's XID Errors guide; 79 (fallen off the bus), 48 and 94/95 "
                "(ECC) call for replacing the node.",
            ),
        ],
    )


def gpu_stragglers() -> dict[str, Any]:
    """SM activity by node and its spread: in a data-parallel job the low node is the straggler."""
    return _dashboard(
        "tc-gpu-stragglers",
        "GPU stragglers",
        "SM activity by node and its spread across nodes: in a data-parallel job every node should look alike.",
        [
            _panel(
                "SM active by node",
                [(f"avg by (node) (DCGM_FI_PROF_SM_ACTIVE{{{_NODE}}})", "{{node}}")],
                unit="percentunit",
                width=24,
                description="avg by (node) (DCGM_FI_PROF_SM_ACTIVE): the node well below the others is slow.",
            ),
            _panel(
                "SM active spread (max - min across nodes)",
                [
                    (
                        f"max(avg by (node) (DCGM_FI_PROF_SM_ACTIVE{{{_NODE}}})) - "
                        f"min(avg by (node) (DCGM_FI_PROF_SM_ACTIVE{{{_NODE}}}))",
                        "spread",
                    )
                ],
                unit="percentunit",
            ),
            _panel(
                "Slowest node now",
                [(f"bottomk(1, avg by (node) (DCGM_FI_PROF_SM_ACTIVE{{{_NODE}}}))", "{{node}}")],
                unit="percentunit",
                kind="stat",
            ),
            _panel(
                "Tensor core active by node",
                [(f"avg by (node) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{_NODE}}})", "{{node}}")],
                unit="percentunit",
            ),
            _panel(
                "DRAM active by node",
                [(f"avg by (node) (DCGM_FI_PROF_DRAM_ACTIVE{{{_NODE}}})", "{{node}}")],
                unit="percentunit",
            ),
            _panel(
                "NVLink bytes by node",
                [
                    (f"sum by (node) (DCGM_FI_PROF_NVLINK_TX_BYTES{{{_NODE}}})", "{{node}} tx"),
                    (f"sum by (node) (DCGM_FI_PROF_NVLINK_RX_BYTES{{{_NODE}}})", "{{node}} rx"),
                ],
                unit="Bps",
            ),
            _panel(
                "PCIe bytes by node",
                [
                    (f"sum by (node) (DCGM_FI_PROF_PCIE_TX_BYTES{{{_NODE}}})", "{{node}} tx"),
                    (f"sum by (node) (DCGM_FI_PROF_PCIE_RX_BYTES{{{_NODE}}})", "{{node}} rx"),
                ],
                unit="Bps",
            ),
            _panel(
                "Throttled by power or heat (share of time)",
                [
                    (
                        f"avg by (node) (rate(DCGM_FI_DEV_POWER_VIOLATION{{{_NODE}}}[5m])) / 1e6",
                        "{{node}} power",
                    ),
                    (
                        f"avg by (node) (rate(DCGM_FI_DEV_THERMAL_VIOLATION{{{_NODE}}}[5m])) / 1e6",
                        "{{node}} thermal",
                    ),
                ],
                unit="percentunit",
                width=24,
                description="Microseconds of throttling per second (DCGM's violation counters) / 1e6, averaged over "
                "the node's GPUs: 1 is every GPU throttled all the time.",
            ),
        ],
    )


def efa_throughput() -> dict[str, Any]:
    """EFA bytes per node, from the EFA counter sidecar."""
    return _dashboard(
        "tc-efa-throughput",
        "EFA throughput",
        "Bytes sent and received over EFA per node (all devices), from the EFA hw_counters.",
        [
            _panel(
                "EFA sent by node",
                [(f"sum by (node) (rate(node_efa_tx_bytes_total{{{_NODE}}}[1m]))", "{{node}}")],
                unit="Bps",
            ),
            _panel(
                "EFA received by node",
                [(f"sum by (node) (rate(node_efa_rx_bytes_total{{{_NODE}}}[1m]))", "{{node}}")],
                unit="Bps",
            ),
            _panel(
                "RDMA read and write by node",
                [
                    (f"sum by (node) (rate(node_efa_rdma_read_bytes_total{{{_NODE}}}[1m]))", "{{node}} read"),
                    (
                        f"sum by (node) (rate(node_efa_rdma_write_bytes_total{{{_NODE}}}[1m]))",
                        "{{node}} write",
                    ),
                ],
                unit="Bps",
                width=24,
            ),
        ],
    )


# --------------------------------------------------------------------------------------------------
# FSx for Lustre, from CloudWatch

#: The CloudWatch namespace FSx publishes in ("Amazon FSx for Lustre metrics and dimensions", FSx for Lustre
#: User Guide); every metric below takes the one dimension ``FileSystemId``.
FSX_NAMESPACE = "AWS/FSx"
_CLOUDWATCH = {"type": "cloudwatch", "uid": CLOUDWATCH_DATASOURCE_UID}


def _fsx_metric(
    ref_id: str, query_id: str, metric: str, file_system_id: str, *, hide: bool
) -> dict[str, Any]:
    """A CloudWatch metric query (Grafana's "Metric search" in builder mode): ``metric``'s ``Sum`` per period,
    named ``query_id`` so metric math can use it; ``hide`` keeps it off the panel (Grafana still sends a hidden
    CloudWatch query that has an id, for the expressions that read it)."""
    return {
        "refId": ref_id,
        "datasource": dict(_CLOUDWATCH),
        "queryMode": "Metrics",
        "region": "default",
        "namespace": FSX_NAMESPACE,
        "metricName": metric,
        "dimensions": {"FileSystemId": file_system_id},
        "statistic": "Sum",
        "period": "",
        "matchExact": True,
        "metricQueryType": 0,
        "metricEditorMode": 0,
        "id": query_id,
        "label": query_id,
        "hide": hide,
    }


def _math(ref_id: str, expression: str, label: str) -> dict[str, Any]:
    """A CloudWatch metric math query over the panel's named metric queries."""
    return {
        "refId": ref_id,
        "datasource": dict(_CLOUDWATCH),
        "queryMode": "Metrics",
        "region": "default",
        "namespace": "",
        "metricName": "",
        "dimensions": {},
        "statistic": "Sum",
        "period": "",
        "metricQueryType": 0,
        "metricEditorMode": 1,
        "expression": expression,
        "id": "",
        "label": label,
        "hide": False,
    }


def _per_second(file_system_id: str, metrics: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """For each ``(id, metric)``: the metric's Sum per period, hidden, and ``id / PERIOD(id)`` shown as ``id``
    (FSx's own recipe for a rate: "divide the Sum statistic by the number of seconds in the period")."""
    hidden = [
        _fsx_metric(chr(ord("A") + i), q, m, file_system_id, hide=True) for i, (q, m) in enumerate(metrics)
    ]
    shown = [
        _math(chr(ord("A") + len(metrics) + i), f"{q}/PERIOD({q})", q) for i, (q, _) in enumerate(metrics)
    ]
    return hidden + shown


def _cloudwatch_panel(
    title: str, targets: list[dict[str, Any]], *, unit: str, width: int = 12, description: str = ""
) -> dict[str, Any]:
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": dict(_CLOUDWATCH),
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": targets,
        "gridPos": {"w": width, "h": 8},
    }


def fsx_throughput(file_system_id: str) -> dict[str, Any]:
    """The FSx for Lustre file system ``file_system_id``: throughput, operations and free capacity (CloudWatch)."""
    throughput = _per_second(file_system_id, [("read", "DataReadBytes"), ("write", "DataWriteBytes")])
    throughput.append(_math("E", "(read+write)/PERIOD(read)", "total"))
    return _dashboard(
        "tc-fsx-throughput",
        "FSx for Lustre throughput",
        "Client throughput, operations and free capacity of the environment's FSx for Lustre file system "
        "(CloudWatch, AWS/FSx).",
        [
            _cloudwatch_panel(
                "Throughput (read, write, total)",
                throughput,
                unit="Bps",
                width=24,
                description="DataReadBytes and DataWriteBytes summed per period, divided by the period.",
            ),
            _cloudwatch_panel(
                "Data operations per second",
                _per_second(
                    file_system_id, [("reads", "DataReadOperations"), ("writes", "DataWriteOperations")]
                ),
                unit="ops",
            ),
            _cloudwatch_panel(
                "Metadata operations per second",
                _per_second(file_system_id, [("metadata", "MetadataOperations")]),
                unit="ops",
                description="Opens, stats, creates and deletes: many small files show here before throughput.",
            ),
            _cloudwatch_panel(
                "Free capacity",
                [_fsx_metric("A", "free", "FreeDataStorageCapacity", file_system_id, hide=False)],
                unit="bytes",
                width=24,
                description="FreeDataStorageCapacity, summed over the file system's storage targets.",
            ),
        ],
        variables=[],
    )


def dashboards(lustre_file_system_id: str | None = None) -> dict[str, dict[str, Any]]:
    """Every shipped dashboard, by file name (``<uid without tc->.json``); the FSx one with a file system."""
    shipped = [gpu_overview(), gpu_stragglers(), efa_throughput()]
    if lustre_file_system_id is not None:
        shipped.append(fsx_throughput(lustre_file_system_id))
    return {f"{d['uid'].removeprefix('tc-')}.json": d for d in shipped}


def dashboard_configmaps(namespace: str, lustre_file_system_id: str | None = None) -> list[dict[str, Any]]:
    """One ConfigMap per dashboard, labelled for Grafana's dashboard sidecar."""
    key, value = DASHBOARD_LABEL
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"training-clusters-dashboard-{name.removesuffix('.json')}",
                "namespace": namespace,
                "labels": {key: value},
            },
            "data": {name: json.dumps(dashboard, indent=2, sort_keys=True)},
        }
        for name, dashboard in dashboards(lustre_file_system_id).items()
    ]


_METRIC = re.compile(r"\b((?:DCGM_FI|node)_[A-Za-z0-9_]+)\b")


def queried_metrics(dashboard: dict[str, Any]) -> set[str]:
    """The metric names the dashboard's panel queries and variables name: PromQL's by name, CloudWatch's as
    ``<namespace>:<metric>``."""
    targets = [target for panel in dashboard["panels"] for target in panel["targets"]]
    exprs = [target["expr"] for target in targets if "expr" in target]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    cloudwatch = {f"{t['namespace']}:{t['metricName']}" for t in targets if t.get("metricName")}
    return {name for expr in exprs for name in _METRIC.findall(expr)} | cloudwatch
