"""Grafana dashboards shipped with the EKS stacks, as code: built here, provisioned as ConfigMaps.

kube-prometheus-stack's Grafana runs the dashboard sidecar (``grafana.sidecar.dashboards``: label
``grafana_dashboard``, value ``"1"``, every namespace), which loads the JSON of each ConfigMap so labelled; the
stack applies :func:`dashboard_configmaps` beside the chart, so a dashboard changes with the stack's version,
never downloaded at run time. Every panel queries Prometheus (the chart's data source, picked by the
``datasource`` variable) for metrics this library collects: DCGM's (:mod:`training_clusters.monitoring.dcgm`,
labelled ``node``) and the EFA counters (:mod:`training_clusters.monitoring.efa`).

* ``gpu-overview``: utilisation, memory, power, temperature and XID errors of every GPU.
* ``gpu-stragglers``: SM activity by node and its spread (max - min across nodes), tensor and DRAM activity:
  in a data-parallel job every node should look alike; the low one is the straggler.
* ``efa-throughput``: EFA bytes sent and received per node (and RDMA reads/writes).

FSx for Lustre throughput is a CloudWatch metric (``AWS/FSx`` ``DataReadBytes``/``DataWriteBytes``), not one
Prometheus scrapes here: read it in the CloudWatch console. The same dashboards do not reach Slurm clusters
(HyperPod, ParallelCluster, PCS): they have no in-cluster Prometheus for the sidecar to feed.
"""

from __future__ import annotations

import json
import re
from typing import Any

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
            }
            for i, (expr, legend) in enumerate(exprs)
        ],
        "gridPos": {"w": width, "h": height},
    }


def _dashboard(uid: str, title: str, description: str, panels: list[dict[str, Any]]) -> dict[str, Any]:
    """Lay ``panels`` out left to right, wrapping at Grafana's 24 columns, and number them."""
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
        "templating": {
            "list": [
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
        },
        "panels": panels,
    }


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
                        f"sum by (node) (rate(DCGM_FI_DEV_POWER_VIOLATION{{{_NODE}}}[5m])) / 1e6",
                        "{{node}} power",
                    ),
                    (
                        f"sum by (node) (rate(DCGM_FI_DEV_THERMAL_VIOLATION{{{_NODE}}}[5m])) / 1e6",
                        "{{node}} thermal",
                    ),
                ],
                unit="percentunit",
                width=24,
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


def dashboards() -> dict[str, dict[str, Any]]:
    """Every shipped dashboard, by file name (``<uid without tc->.json``)."""
    return {
        f"{d['uid'].removeprefix('tc-')}.json": d
        for d in (gpu_overview(), gpu_stragglers(), efa_throughput())
    }


def dashboard_configmaps(namespace: str) -> list[dict[str, Any]]:
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
        for name, dashboard in dashboards().items()
    ]


_METRIC = re.compile(r"\b((?:DCGM_FI|node)_[A-Za-z0-9_]+)\b")


def queried_metrics(dashboard: dict[str, Any]) -> set[str]:
    """The metric names the dashboard's panel queries and variables name."""
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return {name for expr in exprs for name in _METRIC.findall(expr)}
