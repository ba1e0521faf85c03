"""Every Prometheus query of our Grafana dashboards, evaluated by a real Prometheus on a cluster with a slow node.

Debian's ``prometheus`` package (``make integration`` installs it): ``promtool tsdb create-blocks-from
openmetrics`` turns the hour of series :mod:`tests.integration.prometheus_bed` writes (4 nodes x 8 GPUs, one node
throttling from minute 20; the series names, labels and types dcgm-exporter 4.3.1-4.4.0 and node-exporter emit
for the metric list we ship, sources cited there) into blocks, and ``prometheus`` serves them on loopback. Each
panel's query is sent as Grafana sends it (``$node`` = ``.*``, a range for time series, an instant query for
stats and tables), and :func:`problems` checks what comes back:

* it returns data (a query on a metric we do not collect, or a label the series do not carry, returns nothing);
* ``rate()``, ``irate()`` and ``increase()`` read counters, and no counter is shown raw (types from the
  OpenMetrics ``# TYPE`` lines, which are dcgm-exporter's CSV types and our EFA sidecar's);
* every label the panel's legend names is on every series (an aggregation that drops ``node`` fails);
* a ratio (``percentunit``) stays within 0-1 and a percentage within 0-100 (a ``sum`` where ``avg`` belongs
  fails).

Then the straggler panels must name the slow node, the spread panel must show the gap, and the results file the
dashboard pictures are drawn from (``training_clusters/monitoring/panel_results.json``) must be what Prometheus
answered. Deliberately wrong queries (a wrong label, a wrong aggregation, a rate over a gauge, a metric we do not
collect) are shown failing the same checks.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.integration import prometheus_bed as bed
from training_clusters.monitoring.dashboards import dashboards
from training_clusters.monitoring.dcgm import collected_metrics
from training_clusters.monitoring.efa import EFA_METRICS
from training_clusters.monitoring.picture import PANEL_RESULTS

pytestmark = pytest.mark.integration

COLLECTED = collected_metrics() | EFA_METRICS
SHIPPED = dashboards()
PROMETHEUS_PANELS = [
    (name, panel)
    for name, dashboard in sorted(SHIPPED.items())
    for panel in dashboard["panels"]
    if all("expr" in target for target in panel["targets"])
]
_RATE = re.compile(r"\b(rate|irate|increase)\(\s*([A-Za-z_:][A-Za-z0-9_:]*)")
_GROUPING = re.compile(r"\b(?:by|without)\s*\([^)]*\)|\{[^}]*\}|\[[^\]]*\]")
_NAME = re.compile(r"\b[A-Za-z_:][A-Za-z0-9_:]*\b(?!\s*\()")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "on", "ignoring", "group_left", "group_right"}
_LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_BOUNDS = {"percentunit": (0.0, 1.0), "percent": (0.0, 100.0)}


@pytest.fixture(scope="module")
def series_text() -> str:
    return bed.openmetrics()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory, series_text: str) -> Iterator[bed.Prometheus]:
    if missing := bed.missing_tools():
        pytest.skip(
            f"needs {' and '.join(missing)} from Debian's prometheus package (make integration installs it)"
        )
    server = bed.Prometheus(tmp_path_factory.mktemp("prometheus"))
    server.start(series_text)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def types(series_text: str) -> dict[str, str]:
    return bed.metric_types(series_text)


def fetch(prometheus: bed.Prometheus, expr: str, instant: bool) -> list[dict[str, Any]]:
    """What Grafana gets for ``expr``: ``[{"labels": ..., "values": [...]}]``."""
    return bed.evaluate(prometheus, [(expr, instant)])["results"][expr]["series"]


def problems(
    expr: str, series: list[dict[str, Any]], *, legend: str, unit: str, types: dict[str, str]
) -> list[str]:
    """What is wrong with ``expr``'s answer ``series`` on the panel (legend, unit); [] when nothing is."""
    found = []
    names = set(_NAME.findall(_GROUPING.sub(" ", expr))) - _KEYWORDS
    if uncollected := sorted(names - COLLECTED):
        found.append(f"queries {', '.join(uncollected)}, which we do not collect")
    rated = {name for _, name in _RATE.findall(expr)}
    found += [
        f"rate over {name}, a {types.get(name, 'missing')}"
        for name in sorted(rated)
        if types.get(name) != "counter"
    ]
    found += [
        f"counter {name} shown raw, not as a rate"
        for name in sorted(names - rated)
        if types.get(name) == "counter"
    ]
    values = [v for s in series for v in s["values"] if v is not None]
    if not values:
        return [*found, "returns no data"]
    for label in _LEGEND_LABEL.findall(legend):
        if lacking := [s["labels"] for s in series if label not in s["labels"]]:
            found.append(f"legend names {label}, missing from {len(lacking)} series (e.g. {lacking[0]})")
    if unit in _BOUNDS:
        low, high = _BOUNDS[unit]
        if not low <= min(values) <= max(values) <= high:
            found.append(f"values {min(values)}..{max(values)} outside {low}..{high} for unit {unit}")
    return found


@pytest.mark.parametrize(
    ("name", "panel"), PROMETHEUS_PANELS, ids=[f"{n}:{p['title']}" for n, p in PROMETHEUS_PANELS]
)
def test_every_panel_query_answers_as_the_panel_needs(
    prometheus: bed.Prometheus, types: dict[str, str], name: str, panel: dict[str, Any]
) -> None:
    for target in panel["targets"]:
        series = fetch(prometheus, target["expr"], target["instant"])
        unit = panel["fieldConfig"]["defaults"]["unit"]
        assert problems(target["expr"], series, legend=target["legendFormat"], unit=unit, types=types) == []


def test_every_query_of_every_prometheus_dashboard_is_checked() -> None:
    """No Prometheus panel escapes the test above (FSx's panels query CloudWatch, not Prometheus)."""
    checked = {id(panel) for _, panel in PROMETHEUS_PANELS}
    for name, dashboard in SHIPPED.items():
        for panel in dashboard["panels"]:
            assert id(panel) in checked or all(
                "metricName" in t or "expression" in t for t in panel["targets"]
            ), (
                name,
                panel["title"],
            )
    assert len(PROMETHEUS_PANELS) == 16


#: (what is wrong, the wrong query, its legend, its unit, instant, the problems found)
WRONG = [
    (
        "wrong label: dcgm-exporter spells it UUID",
        'avg by (node) (DCGM_FI_PROF_SM_ACTIVE{uuid!=""})',
        "{{node}}",
        "percentunit",
        False,
        ["returns no data"],
    ),
    (
        "wrong label: grouped by the exporter's Hostname, the legend names node",
        "avg by (Hostname) (DCGM_FI_PROF_SM_ACTIVE)",
        "{{node}}",
        "percentunit",
        False,
        ["legend names node, missing from 4 series (e.g. {'Hostname': 'ip-10-0-1-21.ec2.internal'})"],
    ),
    (
        "wrong aggregation: sum of 8 GPUs' ratios",
        "sum by (node) (DCGM_FI_PROF_SM_ACTIVE)",
        "{{node}}",
        "percentunit",
        False,
        ["values 3.628..7.581 outside 0.0..1.0 for unit percentunit"],
    ),
    (
        "wrong aggregation: throttling summed over a node's GPUs (what gpu-stragglers shipped before)",
        "sum by (node) (rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m])) / 1e6",
        "{{node}} thermal",
        "percentunit",
        False,
        ["values 0.0..3.6 outside 0.0..1.0 for unit percentunit"],
    ),
    (
        "wrong aggregation: the slowest node without by (node)",
        "bottomk(1, avg(DCGM_FI_PROF_SM_ACTIVE))",
        "{{node}}",
        "percentunit",
        True,
        ["legend names node, missing from 1 series (e.g. {})"],
    ),
    (
        "rate over a gauge",
        "sum by (node) (rate(DCGM_FI_DEV_POWER_USAGE[5m]))",
        "{{node}}",
        "watt",
        False,
        ["rate over DCGM_FI_DEV_POWER_USAGE, a gauge"],
    ),
    (
        "a counter shown raw",
        "sum by (node) (node_efa_tx_bytes_total)",
        "{{node}}",
        "Bps",
        False,
        ["counter node_efa_tx_bytes_total shown raw, not as a rate"],
    ),
    (
        "a metric we do not collect (left commented out in dcgm-exporter's list)",
        "avg by (node) (DCGM_FI_PROF_PIPE_FP64_ACTIVE)",
        "{{node}}",
        "percentunit",
        False,
        ["queries DCGM_FI_PROF_PIPE_FP64_ACTIVE, which we do not collect", "returns no data"],
    ),
]


@pytest.mark.parametrize(
    ("what", "expr", "legend", "unit", "instant", "expected"), WRONG, ids=[w[0] for w in WRONG]
)
def test_a_wrong_query_fails_the_checks(
    prometheus: bed.Prometheus,
    types: dict[str, str],
    what: str,
    expr: str,
    legend: str,
    unit: str,
    instant: bool,
    expected: list[str],
) -> None:
    series = fetch(prometheus, expr, instant)
    assert problems(expr, series, legend=legend, unit=unit, types=types) == expected


def _panel(dashboard: str, title: str) -> dict[str, Any]:
    (panel,) = [p for p in SHIPPED[dashboard]["panels"] if p["title"] == title]
    return panel


def _by_node(prometheus: bed.Prometheus, target: dict[str, Any]) -> dict[str, list[float]]:
    return {
        s["labels"]["node"]: [v for v in s["values"] if v is not None]
        for s in fetch(prometheus, target["expr"], target["instant"])
    }


#: Steps of the evaluation window before the slow-down starts, and from 5 minutes after it (rates settled).
_STEPS = list(range(bed.QUERY_START, bed.QUERY_END + 1, bed.QUERY_STEP))
BEFORE = [i for i, t in enumerate(_STEPS) if t < bed.SLOW_FROM]
AFTER = [i for i, t in enumerate(_STEPS) if t >= bed.SLOW_FROM + 300]


def _mean(values: list[float], steps: list[int]) -> float:
    return statistics.fmean(values[i] for i in steps)


def test_sm_active_by_node_shows_the_slow_node_lowest(prometheus: bed.Prometheus) -> None:
    (target,) = _panel("gpu-stragglers.json", "SM active by node")["targets"]
    nodes = _by_node(prometheus, target)
    assert sorted(nodes) == sorted(bed.NODES)
    before = {node: _mean(values, BEFORE) for node, values in nodes.items()}
    after = {node: _mean(values, AFTER) for node, values in nodes.items()}
    assert max(before.values()) - min(before.values()) < 0.02  # alike while every node is healthy
    assert min(after, key=after.__getitem__) == bed.SLOW_NODE
    assert after[bed.SLOW_NODE] == pytest.approx(0.47, abs=0.01)
    assert all(after[node] == pytest.approx(0.71, abs=0.01) for node in nodes if node != bed.SLOW_NODE)


def test_slowest_node_now_names_the_slow_node(prometheus: bed.Prometheus) -> None:
    (target,) = _panel("gpu-stragglers.json", "Slowest node now")["targets"]
    (series,) = fetch(prometheus, target["expr"], target["instant"])
    assert series["labels"] == {"node": bed.SLOW_NODE}
    assert series["values"] == [pytest.approx(0.47, abs=0.02)]


def test_the_spread_panel_shows_the_gap(prometheus: bed.Prometheus) -> None:
    (target,) = _panel("gpu-stragglers.json", "SM active spread (max - min across nodes)")["targets"]
    (series,) = fetch(prometheus, target["expr"], target["instant"])
    assert series["labels"] == {}
    assert _mean(series["values"], BEFORE) < 0.03
    assert _mean(series["values"], AFTER) == pytest.approx(0.24, abs=0.02)


def test_throttling_shows_the_slow_node_held_back_by_heat(prometheus: bed.Prometheus) -> None:
    power, thermal = _panel("gpu-stragglers.json", "Throttled by power or heat (share of time)")["targets"]
    heat = _by_node(prometheus, thermal)
    assert _mean(heat[bed.SLOW_NODE], AFTER) == pytest.approx(0.45, abs=0.01)
    assert all(max(v) == 0 for node, v in heat.items() if node != bed.SLOW_NODE)
    assert all(max(v) == 0 for v in _by_node(prometheus, power).values())
    (hottest,) = _panel("gpu-overview.json", "Hottest GPU by node")["targets"]
    temperatures = {node: _mean(v, AFTER) for node, v in _by_node(prometheus, hottest).items()}
    assert max(temperatures, key=temperatures.__getitem__) == bed.SLOW_NODE


def test_the_xid_table_names_the_gpu_and_its_node(prometheus: bed.Prometheus) -> None:
    (target,) = _panel("gpu-overview.json", "Last XID error by GPU (non-zero: look at the node)")["targets"]
    assert fetch(prometheus, target["expr"], target["instant"]) == [
        {"labels": {"node": bed.SLOW_NODE, "gpu": str(bed.XID_GPU)}, "values": [float(bed.XID)]}
    ]


def test_efa_throughput_is_bytes_per_second_per_node(prometheus: bed.Prometheus) -> None:
    """The rate of the summed device counters: 4 devices x 5.8e9/4 B/s per node, halved while the slow node
    paces the all-reduce."""
    (target,) = _panel("efa-throughput.json", "EFA sent by node")["targets"]
    nodes = _by_node(prometheus, target)
    assert sorted(nodes) == sorted(bed.NODES)
    for values in nodes.values():
        assert _mean(values, BEFORE) == pytest.approx(5.8e9, rel=0.02)
        assert _mean(values, AFTER) == pytest.approx(5.8e9 * 0.52, rel=0.02)


def test_the_synthetic_series_are_exactly_what_we_collect(types: dict[str, str]) -> None:
    """Every metric the DCGM list and the EFA sidecar produce, plus node-exporter's textfile bookkeeping:
    a dashboard query on anything else finds nothing here, as it would in the cluster."""
    assert set(types) == COLLECTED | {"node_textfile_mtime_seconds", "node_textfile_scrape_error"}
    assert {name for name, kind in types.items() if kind == "counter"} == {
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_POWER_VIOLATION",
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        *EFA_METRICS,
    }


def test_dcgm_series_carry_the_exporters_labels(series_text: str) -> None:
    first = next(line for line in series_text.splitlines() if line.startswith("DCGM_FI_PROF_SM_ACTIVE{"))
    labels = dict(re.findall(r'(\w+)="([^"]*)"', first))
    assert set(labels) == {
        # dcgm-exporter's own (render_metrics.go), the label field, the pod mapping renamed at scrape
        *("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"),
        *("exported_namespace", "exported_pod", "exported_container"),
        # the ServiceMonitor's target labels and our relabelling
        *("container", "endpoint", "job", "namespace", "pod", "service", "instance", "node"),
    }
    assert labels["Hostname"] == labels["node"] == labels["instance"] == bed.NODES[0]


def test_the_checked_in_results_are_what_prometheus_answers(prometheus: bed.Prometheus) -> None:
    """The dashboard pictures are drawn from this file (no Prometheus needed to draw them); a change of query or
    of the synthetic cluster must rewrite it."""
    fresh = bed.evaluate(prometheus, bed.shipped_targets())
    checked_in = json.loads(PANEL_RESULTS.read_text())
    assert checked_in["results"] == fresh["results"], (
        f"stale: run python -m tests.integration.prometheus_bed {PANEL_RESULTS.relative_to(ROOT)}"
    )
    assert checked_in["slow_node"] == bed.SLOW_NODE
    assert (checked_in["start"], checked_in["step"], checked_in["points"]) == (
        bed.QUERY_START,
        bed.QUERY_STEP,
        len(_STEPS),
    )
