"""A real Prometheus over a synthetic GPU cluster with one slow node, to evaluate our dashboards' queries.

Four p4d.24xlarge nodes (8 A100 GPUs, 4 EFA devices each) train data-parallel for an hour, scraped every 15 s.
At :20 the GPUs of :data:`SLOW_NODE` start throttling on heat: their SM activity falls to about half, the other
nodes wait for it at every all-reduce (their SM activity falls less), EFA traffic falls on every node, and one
of its GPUs reports XID 94 (a contained ECC error).

The series are written as dcgm-exporter and node-exporter write them, then labelled as kube-prometheus-stack's
scrape labels them:

* DCGM (github.com/NVIDIA/dcgm-exporter, tag 4.3.1-4.4.0, the version GPU Operator v25.3.4 runs):
  ``internal/pkg/rendermetrics/render_metrics.go`` writes every GPU series with ``gpu``, ``UUID``,
  ``pci_bus_id``, ``device`` (``nvidia<N>``), ``modelName`` and ``Hostname``, the pod using the GPU as
  ``namespace``/``pod``/``container`` (Kubernetes pod mapping), and each ``label`` field of the CSV as a label
  (``DCGM_FI_DRIVER_VERSION``); ``# TYPE`` is the CSV's type. The metric names and types are exactly
  :data:`training_clusters.monitoring.dcgm.DCGM_METRICS`, the list we mount into the exporter. Scraped through
  the operator's ServiceMonitor (``honorLabels`` false), the pod-mapping labels become ``exported_namespace``,
  ``exported_pod`` and ``exported_container`` beside the target's ``namespace``/``pod``/``container``/``service``/
  ``endpoint``/``job``; :data:`training_clusters.monitoring.dcgm.NODE_RELABELINGS` adds ``node`` and sets
  ``instance`` to the node's name.
* EFA: :data:`training_clusters.monitoring.efa.EFA_COUNTERS_SCRIPT` writes ``node_efa_<counter>_total{device,
  port}`` counters (``# TYPE node_efa_<counter>_total counter``) into node-exporter's textfile directory;
  node-exporter (github.com/prometheus/node_exporter ``collector/textfile.go``) serves them with
  ``node_textfile_mtime_seconds{file}`` and ``node_textfile_scrape_error``; kube-prometheus-stack's
  node-exporter ServiceMonitor scrapes them (``job="node-exporter"``) and our relabelling adds ``node``.

OpenMetrics needs a counter family's samples to end in ``_total``; dcgm-exporter's counters do not (it writes the
Prometheus text format), and Prometheus's OpenMetrics parser takes them as written, so the names here are the
exporter's own.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training_clusters.monitoring.dcgm import DCGM_METRICS
from training_clusters.monitoring.efa import EFA_COUNTERS, TEXTFILE_DIRECTORY

NODES = (
    "ip-10-0-1-21.ec2.internal",
    "ip-10-0-1-37.ec2.internal",
    "ip-10-0-1-54.ec2.internal",
    "ip-10-0-1-88.ec2.internal",
)
#: The node whose GPUs throttle from :data:`SLOW_FROM` on.
SLOW_NODE = NODES[2]
#: Its GPU that reports XID 94 when the throttling starts.
XID_GPU, XID = 5, 94
GPUS_PER_NODE = 8
EFA_DEVICES = ("rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27")
MODEL = "NVIDIA A100-SXM4-40GB"
DRIVER = "570.172.08"
#: 2026-01-01T00:00:00Z: the hour of samples starts here.
START = 1767225600
SCRAPE = 15
DURATION = 3600
SLOW_FROM = START + 20 * 60
#: What the dashboards are evaluated over (the first 5 minutes give rate()'s 5m windows their samples).
QUERY_START, QUERY_END, QUERY_STEP = START + 300, START + DURATION - SCRAPE, 60


def _wobble(*seeds: float) -> float:
    """A deterministic value in [-1, 1]: the same data every run, different per series and sample."""
    return math.sin(sum(s * (i + 1) * 12.9898 for i, s in enumerate(seeds)) * 43758.5453 % (2 * math.pi))


@dataclass(frozen=True)
class _Gpu:
    node: str
    index: int

    @property
    def node_number(self) -> int:
        return NODES.index(self.node)

    def labels(self) -> dict[str, str]:
        n = self.node_number
        return {
            "gpu": str(self.index),
            "UUID": f"GPU-{n:02x}{self.index:02x}a3f1-6c1e-4b2d-9e7a-5d0c8b1f{n:02d}{self.index:02d}",
            "pci_bus_id": f"00000000:{(0x10, 0x20, 0x90, 0xA0, 0x10, 0x20, 0x90, 0xA0)[self.index]:02X}:"
            f"{'1C' if self.index < 4 else '1D'}.0",
            "device": f"nvidia{self.index}",
            "modelName": MODEL,
            "Hostname": self.node,
            "DCGM_FI_DRIVER_VERSION": DRIVER,
            "exported_namespace": "team-a",
            "exported_pod": f"train-worker-{n}",
            "exported_container": "pytorch",
            "container": "nvidia-dcgm-exporter",
            "endpoint": "gpu-metrics",
            "job": "nvidia-dcgm-exporter",
            "namespace": "gpu-operator",
            "pod": f"nvidia-dcgm-exporter-{('b7x2q', 'k9d4m', 'p3v8z', 'w5r1c')[n]}",
            "service": "nvidia-dcgm-exporter",
            "instance": self.node,
            "node": self.node,
        }

    def slow_at(self, t: int) -> bool:
        return t >= SLOW_FROM

    def gauges(self, t: int) -> dict[str, float]:
        """Every DCGM gauge of this GPU at ``t``."""
        w = _wobble(self.node_number, self.index, t)
        slowed = self.slow_at(t)
        mine = self.node == SLOW_NODE
        sm = 0.93 + 0.02 * w
        if slowed:
            sm = (0.47 if mine else 0.71) + 0.02 * w
        temp = 64 + 3 * w + (22 if slowed and mine else 0)
        power = 330 * sm + 40 + 5 * w
        fb_used = 36500 + 200 * _wobble(self.node_number, self.index)
        return {
            "DCGM_FI_DEV_SM_CLOCK": 1410 - (420 if slowed and mine else 0),
            "DCGM_FI_DEV_MEM_CLOCK": 1215,
            "DCGM_FI_DEV_MEMORY_TEMP": temp + 4,
            "DCGM_FI_DEV_GPU_TEMP": temp,
            "DCGM_FI_DEV_POWER_USAGE": power,
            "DCGM_FI_DEV_GPU_UTIL": min(100.0, round(100 * sm + 5)),
            "DCGM_FI_DEV_MEM_COPY_UTIL": round(45 * sm),
            "DCGM_FI_DEV_ENC_UTIL": 0,
            "DCGM_FI_DEV_DEC_UTIL": 0,
            "DCGM_FI_DEV_XID_ERRORS": XID if slowed and mine and self.index == XID_GPU else 0,
            "DCGM_FI_DEV_FB_FREE": 40536 - fb_used - 512,
            "DCGM_FI_DEV_FB_USED": fb_used,
            "DCGM_FI_DEV_FB_RESERVED": 512,
            "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": min(1.0, sm + 0.04),
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.62 * sm,
            "DCGM_FI_PROF_DRAM_ACTIVE": 0.41 * sm + 0.05,
            "DCGM_FI_PROF_PCIE_TX_BYTES": 1.1e9 * sm,
            "DCGM_FI_PROF_PCIE_RX_BYTES": 1.6e9 * sm,
            "DCGM_FI_PROF_SM_ACTIVE": sm,
            "DCGM_FI_PROF_SM_OCCUPANCY": 0.55 * sm,
            "DCGM_FI_PROF_NVLINK_TX_BYTES": 38e9 * sm,
            "DCGM_FI_PROF_NVLINK_RX_BYTES": 38e9 * sm,
        }

    def counter_rates(self, t: int) -> dict[str, float]:
        """How fast each DCGM counter of this GPU grows at ``t`` (per second)."""
        throttled = self.slow_at(t) and self.node == SLOW_NODE
        return {
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 1000 * self.gauges(t)["DCGM_FI_DEV_POWER_USAGE"],
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 2 * 38e9 * self.gauges(t)["DCGM_FI_PROF_SM_ACTIVE"],
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
            # microseconds of throttling per second: 45% of the time on heat, none on power
            "DCGM_FI_DEV_POWER_VIOLATION": 0,
            "DCGM_FI_DEV_THERMAL_VIOLATION": 0.45e6 if throttled else 0,
        }


def _efa_rates(node: str, t: int) -> dict[str, float]:
    """Bytes per second through each EFA device of ``node``: the all-reduce runs at the slow node's pace."""
    pace = 0.52 if t >= SLOW_FROM else 1.0
    w = 1 + 0.03 * _wobble(NODES.index(node), t)
    return {
        "tx_bytes": 5.8e9 * pace * w,
        "rx_bytes": 5.8e9 * pace * w,
        "rdma_read_bytes": 2.1e9 * pace * w,
        "rdma_write_bytes": 3.4e9 * pace * w,
    }


def _node_exporter_labels(node: str) -> dict[str, str]:
    n = NODES.index(node)
    return {
        "container": "node-exporter",
        "endpoint": "http-metrics",
        "job": "node-exporter",
        "namespace": "monitoring",
        "pod": f"kube-prometheus-stack-prometheus-node-exporter-{('q7wm2', 'rz5tx', 'h4nc8', 'j2kf6')[n]}",
        "service": "kube-prometheus-stack-prometheus-node-exporter",
        "instance": f"10.0.1.{(21, 37, 54, 88)[n]}:9100",
        "node": node,
    }


def _selector(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def openmetrics() -> str:
    """The hour of samples, as OpenMetrics text with each family's ``# TYPE`` (timestamps in seconds)."""
    gpus = [_Gpu(node, i) for node in NODES for i in range(GPUS_PER_NODE)]
    times = range(START, START + DURATION, SCRAPE)
    lines: list[str] = []
    for metric in DCGM_METRICS:
        if metric.prometheus_type == "label":
            continue
        lines += [f"# HELP {metric.field} {metric.help}", f"# TYPE {metric.field} {metric.prometheus_type}"]
        for gpu in gpus:
            selector = _selector(gpu.labels())
            total = 0.0
            for t in times:
                if metric.prometheus_type == "counter":
                    total += gpu.counter_rates(t)[metric.field] * SCRAPE
                    value = total
                else:
                    value = gpu.gauges(t)[metric.field]
                lines.append(f"{metric.field}{selector} {value:.15g} {t}")
    for counter in EFA_COUNTERS:
        name = f"node_efa_{counter}_total"
        lines += [f"# HELP {name} EFA {counter} from hw_counters.", f"# TYPE {name} counter"]
        for node in NODES:
            for device in EFA_DEVICES:
                selector = _selector({**_node_exporter_labels(node), "device": device, "port": "1"})
                total = 0.0
                for t in times:
                    total += _efa_rates(node, t)[counter] * SCRAPE / len(EFA_DEVICES)
                    lines.append(f"{name}{selector} {total:.15g} {t}")
    lines += [
        "# HELP node_textfile_mtime_seconds Unixtime mtime of textfiles successfully read.",
        "# TYPE node_textfile_mtime_seconds gauge",
    ]
    for node in NODES:
        selector = _selector({**_node_exporter_labels(node), "file": f"{TEXTFILE_DIRECTORY}/efa.prom"})
        lines += [f"node_textfile_mtime_seconds{selector} {t - t % 15} {t}" for t in times]
    lines += [
        "# HELP node_textfile_scrape_error 1 if there was an error opening or reading a file, 0 otherwise",
        "# TYPE node_textfile_scrape_error gauge",
    ]
    for node in NODES:
        selector = _selector(_node_exporter_labels(node))
        lines += [f"node_textfile_scrape_error{selector} 0 {t}" for t in times]
    return "\n".join(lines) + "\n# EOF\n"


def metric_types(text: str) -> dict[str, str]:
    """Each family's ``# TYPE`` in ``text``."""
    return {
        parts[2]: parts[3]
        for line in text.splitlines()
        if line.startswith("# TYPE ") and len(parts := line.split()) == 4
    }


def missing_tools() -> list[str]:
    return [tool for tool in ("promtool", "prometheus") if not shutil.which(tool)]


class Prometheus:
    """``prometheus`` serving the blocks ``promtool tsdb create-blocks-from openmetrics`` made, on loopback."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self, text: str) -> None:
        data, source = self.work / "data", self.work / "series.om"
        source.write_text(text)
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
            check=True,
            capture_output=True,
        )
        config = self.work / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 15s\n")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=100y",
                f"--query.lookback-delta={SCRAPE * 2}s",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(self.work / "prometheus.log").open("wb"),
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as ready:
                    if ready.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(
            f"prometheus did not get ready: {(self.work / 'prometheus.log').read_text()[-2000:]}"
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def version(self) -> str:
        return self._get("/api/v1/status/buildinfo")["version"]

    def query_range(self, expr: str) -> list[dict[str, Any]]:
        """``expr`` over the evaluation window: ``[{"metric": labels, "values": [[t, "v"], ...]}]``."""
        return self._get(
            "/api/v1/query_range",
            query=expr,
            start=str(QUERY_START),
            end=str(QUERY_END),
            step=str(QUERY_STEP),
        )["result"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """``expr`` at the window's end: ``[{"metric": labels, "value": [t, "v"]}]``."""
        return self._get("/api/v1/query", query=expr, time=str(QUERY_END))["result"]

    def _get(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=30) as response:
            body = json.load(response)
        if body["status"] != "success":
            raise RuntimeError(f"{path} {params}: {body}")
        return body["data"]


#: Grafana's value for ``$node`` with "All" selected (the variable's ``allValue``).
ALL_NODES = ".*"


def grafana_expr(expr: str) -> str:
    """``expr`` as Grafana sends it with every node selected."""
    return expr.replace("$node", ALL_NODES)


def _round(value: str) -> float | None:
    number = float(value)
    return None if math.isnan(number) else float(f"{number:.4g}")


def evaluate(prometheus: Prometheus, targets: list[tuple[str, bool]]) -> dict[str, Any]:
    """Every ``(expr, instant)`` as Grafana asks for it (over the window, or at its end when ``instant``), as the
    checked-in results file holds them: series sorted by labels, values on the step grid (None where the series
    has no sample; one value for an instant query), 4 significant digits."""
    steps = list(range(QUERY_START, QUERY_END + 1, QUERY_STEP))
    results: dict[str, Any] = {}
    for expr, instant in sorted(set(targets)):
        series = []
        if instant:
            for result in prometheus.query(grafana_expr(expr)):
                series.append({"labels": result["metric"], "values": [_round(result["value"][1])]})
        else:
            for result in prometheus.query_range(grafana_expr(expr)):
                by_time = {int(t): _round(v) for t, v in result["values"]}
                series.append({"labels": result["metric"], "values": [by_time.get(t) for t in steps]})
        series.sort(key=lambda s: sorted(s["labels"].items()))
        results[expr] = {"instant": instant, "series": series}
    return {
        "about": (
            f"Our dashboards' Prometheus queries evaluated by Prometheus {prometheus.version()} on a synthetic "
            f"cluster ({len(NODES)} nodes x {GPUS_PER_NODE} GPUs, {SLOW_NODE} slow from minute 20): written by "
            "python -m tests.integration.prometheus_bed, checked by tests/integration/test_dashboards_prometheus.py"
        ),
        "slow_node": SLOW_NODE,
        "start": QUERY_START,
        "step": QUERY_STEP,
        "points": len(steps),
        "results": results,
    }


def shipped_targets() -> list[tuple[str, bool]]:
    """Every Prometheus query of the shipped dashboards, with whether Grafana asks for it as an instant query."""
    from training_clusters.monitoring.dashboards import dashboards

    return [
        (target["expr"], target["instant"])
        for dashboard in dashboards().values()
        for panel in dashboard["panels"]
        for target in panel["targets"]
        if "expr" in target
    ]


def main(destination: Path) -> None:  # pragma: no cover - the integration test runs the same steps
    """Evaluate the shipped queries and write the results file the dashboard pictures are drawn from."""
    if missing := missing_tools():
        sys.exit(f"needs {' and '.join(missing)}: apt-get install prometheus")
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"tc-prometheus-{os.getpid()}"
    work.mkdir(parents=True)
    prometheus = Prometheus(work)
    try:
        prometheus.start(openmetrics())
        destination.write_text(
            json.dumps(evaluate(prometheus, shipped_targets()), indent=1, sort_keys=True) + "\n"
        )
    finally:
        prometheus.stop()
        shutil.rmtree(work)
    print(f"wrote {destination}")


if __name__ == "__main__":  # pragma: no cover
    main(Path(sys.argv[1]))
