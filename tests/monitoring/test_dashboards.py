"""Each shipped dashboard is a Grafana JSON model whose every query names a metric this library collects."""

from __future__ import annotations

import json
from typing import Any

import pytest

from training_clusters.monitoring.dashboards import dashboard_configmaps, dashboards, queried_metrics
from training_clusters.monitoring.dcgm import collected_metrics
from training_clusters.monitoring.efa import EFA_METRICS

DASHBOARDS = dashboards()
COLLECTED = collected_metrics() | EFA_METRICS
PANEL_TYPES = {"timeseries", "stat", "table"}


def test_the_three_dashboards() -> None:
    assert set(DASHBOARDS) == {"gpu-overview.json", "gpu-stragglers.json", "efa-throughput.json"}


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_dashboard_is_a_grafana_json_model(name: str) -> None:
    dashboard = json.loads(json.dumps(DASHBOARDS[name]))  # what the ConfigMap carries
    assert {"uid", "title", "schemaVersion", "panels", "templating", "time"} <= set(dashboard)
    assert isinstance(dashboard["schemaVersion"], int) and len(dashboard["uid"]) <= 40
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        assert panel["type"] in PANEL_TYPES and panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        taken = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not taken & cells, f"panel {panel['title']!r} overlaps another"
        cells |= taken
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["refId"] and target["expr"]
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            _balanced(target["expr"])


def _balanced(expr: str) -> None:
    pairs, stack = {")": "(", "}": "{", "]": "["}, []
    for char in expr:
        if char in "({[":
            stack.append(char)
        elif char in pairs:
            assert stack and stack.pop() == pairs[char], expr
    assert not stack, expr


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_query_names_a_metric_we_collect(name: str) -> None:
    metrics = queried_metrics(DASHBOARDS[name])
    assert metrics and metrics <= COLLECTED, sorted(metrics - COLLECTED)


def test_a_metric_we_do_not_collect_is_caught() -> None:
    """The check above can fail: a dashboard naming a metric outside the lists."""
    broken: dict[str, Any] = json.loads(json.dumps(DASHBOARDS["gpu-overview.json"]))
    broken["panels"][0]["targets"][0]["expr"] = "avg(DCGM_FI_PROF_PIPE_FP64_ACTIVE)"
    assert queried_metrics(broken) - COLLECTED == {"DCGM_FI_PROF_PIPE_FP64_ACTIVE"}


def test_the_straggler_view_asks_sm_active_by_node() -> None:
    exprs = [t["expr"] for p in DASHBOARDS["gpu-stragglers.json"]["panels"] for t in p["targets"]]
    assert 'avg by (node) (DCGM_FI_PROF_SM_ACTIVE{node=~"$node"})' in exprs


def test_configmaps_are_labelled_for_grafanas_sidecar() -> None:
    maps = dashboard_configmaps("monitoring")
    assert [m["metadata"]["name"] for m in maps] == [
        "training-clusters-dashboard-gpu-overview",
        "training-clusters-dashboard-gpu-stragglers",
        "training-clusters-dashboard-efa-throughput",
    ]
    for configmap in maps:
        assert configmap["metadata"]["labels"] == {"grafana_dashboard": "1"}
        assert configmap["metadata"]["namespace"] == "monitoring"
        ((name, text),) = configmap["data"].items()
        assert json.loads(text) == DASHBOARDS[name]
