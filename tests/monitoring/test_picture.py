"""The pictures in docs/dashboards are drawn from the dashboards as shipped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from training_clusters.monitoring.dashboards import dashboards
from training_clusters.monitoring.picture import (
    PALETTE,
    PANEL_RESULTS,
    PICTURE_FILE_SYSTEM_ID,
    dashboard_svg,
    format_value,
    legend,
    load_results,
    panel_series,
    write_pictures,
)

from ..conftest import ROOT

DOCS = ROOT / "docs" / "dashboards"
SHIPPED = dashboards(PICTURE_FILE_SYSTEM_ID)
RESULTS = load_results()
SVG = "{http://www.w3.org/2000/svg}"
NODES = [f"ip-10-0-1-{n}.ec2.internal" for n in (21, 37, 54, 88)]
SLOW = "ip-10-0-1-54.ec2.internal"


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_picture_in_docs_is_fresh(name: str, checked_in: Callable[[str], str]) -> None:
    picture = f"docs/dashboards/{name.removesuffix('.json')}.svg"
    assert checked_in(picture) == dashboard_svg(SHIPPED[name]), f"{picture} is stale: run make diagrams"


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_panel_is_drawn_with_its_title(name: str) -> None:
    svg = ET.fromstring(dashboard_svg(SHIPPED[name]))
    texts = {t.text for t in svg.iter(f"{SVG}text")}
    assert {p["title"] for p in SHIPPED[name]["panels"]} <= texts
    assert "AWS/FSx:DataReadBytes" in texts or name != "fsx-throughput.json"


def test_the_results_file_holds_every_shipped_prometheus_query_and_nothing_else() -> None:
    """The pictures' data is stale when a query changes: make integration's Prometheus must answer it again."""
    shipped = {
        (t["expr"], t["instant"])
        for d in SHIPPED.values()
        for p in d["panels"]
        for t in p["targets"]
        if "expr" in t
    }
    assert {(e, a["instant"]) for e, a in RESULTS["results"].items()} == shipped, (
        f"stale: run python -m tests.integration.prometheus_bed {PANEL_RESULTS.relative_to(ROOT)}"
    )
    assert RESULTS["slow_node"] == SLOW
    for answer in RESULTS["results"].values():
        assert answer["series"], "every query returned data"
        assert all(
            len(s["values"]) == (1 if answer["instant"] else RESULTS["points"]) for s in answer["series"]
        )


def _panel(name: str, title: str) -> dict[str, object]:
    (panel,) = [p for p in SHIPPED[name]["panels"] if p["title"] == title]
    return panel


def test_a_time_series_is_a_line_per_node_named_in_its_legend() -> None:
    svg = ET.fromstring(dashboard_svg(SHIPPED["gpu-stragglers.json"]))
    lines = list(svg.iter(f"{SVG}polyline"))
    # SM active, spread, tensor, DRAM: 4 + 1 + 4 + 4; NVLink, PCIe, throttling: 8 each
    assert len(lines) == 4 + 1 + 4 + 4 + 8 + 8 + 8
    sm_active = lines[:4]
    assert [line.get("stroke") for line in sm_active] == list(PALETTE[:4])
    assert all(len(line.get("points", "").split()) == RESULTS["points"] for line in sm_active)
    legends = [name for t in svg.iter(f"{SVG}text") if (name := (t.text or "").strip()) in NODES]
    assert legends[:4] == NODES  # the SM active panel's legend, a node per line
    # the slow node's line runs lowest at the end (the largest y)
    last_y = [float(line.get("points", "").split()[-1].split(",")[1]) for line in sm_active]
    assert max(range(4), key=last_y.__getitem__) == NODES.index(SLOW)


def test_the_slowest_node_stat_is_its_number_and_name() -> None:
    svg = ET.fromstring(dashboard_svg(SHIPPED["gpu-stragglers.json"]))
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    at = texts.index("Slowest node now")
    assert texts[at + 1 : at + 3] == ["47.9%", SLOW]


def test_the_xid_table_lists_the_gpu() -> None:
    svg = ET.fromstring(dashboard_svg(SHIPPED["gpu-overview.json"]))
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    at = texts.index("Last XID error by GPU (non-zero: look at the node)")
    assert texts[at + 1 : at + 5] == ["Series", "Value", f"{SLOW} GPU 5", "94"]


def test_a_query_missing_from_the_results_is_named() -> None:
    panel = _panel("gpu-stragglers.json", "SM active by node")
    with pytest.raises(
        ValueError, match=r"panel_results.json lacks 'avg by \(node\) \(DCGM_FI_PROF_SM_ACTIVE"
    ):
        panel_series(panel, {**RESULTS, "results": {}})
    flipped = {e: {**a, "instant": not a["instant"]} for e, a in RESULTS["results"].items()}
    with pytest.raises(ValueError, match=r"\(instant=False\)"):
        panel_series(panel, {**RESULTS, "results": flipped})


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (0.4786, "percentunit", "47.9%"),
        (74.25, "percent", "74.2%"),
        (85.09, "celsius", "85 °C"),
        (2115.0, "watt", "2.12 kW"),
        (412.0, "watt", "412 W"),
        (3.015e9, "Bps", "3.02 GB/s"),
        (2.106e11, "Bps", "211 GB/s"),
        (94.0, "none", "94"),
        (None, "Bps", "No data"),
    ],
)
def test_values_are_shown_in_their_unit(value: float | None, unit: str, shown: str) -> None:
    assert format_value(value, unit) == shown


def test_legend_replaces_labels_as_grafana_does() -> None:
    assert legend("{{node}} GPU {{gpu}}", {"node": SLOW, "gpu": "5"}) == f"{SLOW} GPU 5"
    assert legend("{{ node }} tx", {"node": SLOW}) == f"{SLOW} tx"
    assert legend("{{node}}", {}) == ""


def test_write_pictures_writes_one_per_dashboard(tmp_path: Path) -> None:
    assert sorted(p.name for p in write_pictures(tmp_path)) == [
        "efa-throughput.svg",
        "fsx-throughput.svg",
        "gpu-overview.svg",
        "gpu-stragglers.svg",
    ]
