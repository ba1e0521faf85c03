"""Each shipped dashboard is a Grafana JSON model whose every query names a metric this library collects (or, for
FSx, one FSx publishes to CloudWatch, as aws-cdk-lib's generated FSx metrics list them)."""

from __future__ import annotations

import functools
import json
import re
import tarfile
from importlib import resources
from typing import Any

import pytest

from training_clusters.monitoring.cloudwatch import CLOUDWATCH_DATASOURCE_UID
from training_clusters.monitoring.dashboards import (
    FSX_NAMESPACE,
    dashboard_configmaps,
    dashboards,
    queried_metrics,
)
from training_clusters.monitoring.dcgm import collected_metrics
from training_clusters.monitoring.efa import EFA_METRICS

FILE_SYSTEM = "fs-0123456789abcdef0"
DASHBOARDS = dashboards()
EVERY = dashboards(FILE_SYSTEM)
FSX = EVERY["fsx-throughput.json"]
COLLECTED = collected_metrics() | EFA_METRICS
PANEL_TYPES = {"timeseries", "stat", "table"}
#: GetMetricData's query Id: "must start with a lowercase letter", then letters, digits, underscores
#: (CloudWatch API Reference, MetricDataQuery).
METRIC_QUERY_ID = re.compile(r"[a-z][a-zA-Z0-9_]*")


def test_the_three_dashboards() -> None:
    assert set(DASHBOARDS) == {"gpu-overview.json", "gpu-stragglers.json", "efa-throughput.json"}


def test_a_lustre_file_system_adds_the_fsx_dashboard() -> None:
    assert set(EVERY) == set(DASHBOARDS) | {"fsx-throughput.json"}
    assert EVERY["gpu-overview.json"] == DASHBOARDS["gpu-overview.json"]


@pytest.mark.parametrize("name", sorted(EVERY))
def test_dashboard_is_a_grafana_json_model(name: str) -> None:
    dashboard = json.loads(json.dumps(EVERY[name]))  # what the ConfigMap carries
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
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)) and all(ref_ids)
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
            if target["datasource"]["type"] == "prometheus":
                assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
                _balanced(target["expr"])
                # a stat or table shows the value now (an instant query), a time series the range
                assert (target["instant"], target["range"]) == (
                    (False, True) if panel["type"] == "timeseries" else (True, False)
                )
            else:
                assert target["datasource"] == {"type": "cloudwatch", "uid": CLOUDWATCH_DATASOURCE_UID}
                _balanced(target.get("expression", ""))


def _balanced(expr: str) -> None:
    pairs, stack = {")": "(", "}": "{", "]": "["}, []
    for char in expr:
        if char in "({[":
            stack.append(char)
        elif char in pairs:
            assert stack and stack.pop() == pairs[char], expr
    assert not stack, expr


@pytest.mark.parametrize("name", sorted(DASHBOARDS))  # the Prometheus ones
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


@functools.cache
def _cdk_fsx_metrics() -> frozenset[tuple[str, str, frozenset[str]]]:
    """(metric, statistic, dimension names) of every FSx metric aws-cdk-lib generates from CloudWatch's metric
    metadata (``aws-fsx/lib/fsx-canned-metrics.generated.js`` and ``.d.ts`` in its jsii bundle)."""
    bundle = next(e for e in (resources.files("aws_cdk") / "_jsii").iterdir() if e.name.endswith(".jsii.tgz"))
    with bundle.open("rb") as raw, tarfile.open(fileobj=raw, mode="r:gz") as tar:
        member = tar.extractfile("package/aws-fsx/lib/fsx-canned-metrics.generated.js")
        declarations = tar.extractfile("package/aws-fsx/lib/fsx-canned-metrics.generated.d.ts")
        assert member is not None and declarations is not None
        code, types = member.read().decode(), declarations.read().decode()
    found = re.findall(
        r'static (\w+)\(dimensions\)\{return\{namespace:"AWS/FSx",metricName:"(\w+)",'
        r'dimensionsMap:dimensions,statistic:"(\w+)"',
        code,
    )
    dimensions = {
        name: frozenset(re.findall(r"(\w+): string;", body))
        for name, body in re.findall(r"static (\w+)\(this: void, dimensions: \{(.*?)\}\)", types, re.S)
    }
    assert found and dimensions
    return frozenset((metric, statistic, dimensions[method]) for method, metric, statistic in found)


def _fsx_metric_queries(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for panel in dashboard["panels"] for t in panel["targets"] if t.get("metricName")]


def test_every_fsx_query_is_a_metric_fsx_publishes_for_the_file_system() -> None:
    published = _cdk_fsx_metrics()
    queries = _fsx_metric_queries(FSX)
    assert {(q["metricName"], q["statistic"]) for q in queries} == {
        ("DataReadBytes", "Sum"),
        ("DataWriteBytes", "Sum"),
        ("DataReadOperations", "Sum"),
        ("DataWriteOperations", "Sum"),
        ("MetadataOperations", "Sum"),
        ("FreeDataStorageCapacity", "Sum"),
    }
    for query in queries:
        assert query["namespace"] == FSX_NAMESPACE
        assert (query["metricName"], query["statistic"], frozenset(query["dimensions"])) in published, query
        assert query["dimensions"] == {"FileSystemId": FILE_SYSTEM} and query["matchExact"] is True


def test_a_metric_fsx_does_not_publish_is_caught() -> None:
    """The check above can fail: a statistic or dimension CDK's metric list does not have."""
    published = _cdk_fsx_metrics()
    assert ("DataReadBytes", "Sum", frozenset({"FileSystemId"})) in published
    assert ("DataReadBytes", "Average", frozenset({"FileSystemId"})) not in published
    assert ("DataReadBytes", "Sum", frozenset({"FileSystemId", "StorageTargetId"})) not in published


def test_throughput_is_bytes_per_second_from_metric_math_over_named_hidden_queries() -> None:
    for panel in FSX["panels"]:
        named = {t["id"]: t for t in panel["targets"] if t.get("metricName")}
        assert all(METRIC_QUERY_ID.fullmatch(query_id) for query_id in named)
        for target in panel["targets"]:
            if target.get("expression"):
                assert target["metricEditorMode"] == 1 and target["id"] == ""
                used = set(METRIC_QUERY_ID.findall(target["expression"])) - {"PERIOD"}
                assert used and used <= set(named), target["expression"]
                # a hidden query reaches CloudWatch only with an id (Grafana's CloudWatch filterQuery)
                assert all(named[u]["hide"] and named[u]["id"] for u in used)
    (throughput,) = (p for p in FSX["panels"] if p["title"].startswith("Throughput"))
    assert throughput["fieldConfig"]["defaults"]["unit"] == "Bps"
    shown = {t["label"]: t["expression"] for t in throughput["targets"] if not t["hide"]}
    assert shown == {
        "read": "read/PERIOD(read)",
        "write": "write/PERIOD(write)",
        "total": "(read+write)/PERIOD(read)",
    }


def test_the_fsx_dashboard_reads_cloudwatch_only() -> None:
    assert FSX["templating"]["list"] == []  # no Prometheus data source or node variable
    assert queried_metrics(FSX) == {
        f"AWS/FSx:{m}"
        for m in (
            "DataReadBytes",
            "DataWriteBytes",
            "DataReadOperations",
            "DataWriteOperations",
            "MetadataOperations",
            "FreeDataStorageCapacity",
        )
    }


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


def test_the_fsx_configmap_comes_with_a_file_system() -> None:
    maps = {m["metadata"]["name"]: m for m in dashboard_configmaps("monitoring", FILE_SYSTEM)}
    fsx = maps["training-clusters-dashboard-fsx-throughput"]
    assert fsx["metadata"]["labels"] == {"grafana_dashboard": "1"}
    assert json.loads(fsx["data"]["fsx-throughput.json"]) == FSX
    assert len(maps) == 4
