"""The pictures in docs/dashboards are drawn from the dashboards as shipped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from training_clusters.monitoring.dashboards import dashboards
from training_clusters.monitoring.picture import PICTURE_FILE_SYSTEM_ID, dashboard_svg, write_pictures

from ..conftest import ROOT

DOCS = ROOT / "docs" / "dashboards"
SHIPPED = dashboards(PICTURE_FILE_SYSTEM_ID)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_picture_in_docs_is_fresh(name: str, checked_in: Callable[[str], str]) -> None:
    picture = f"docs/dashboards/{name.removesuffix('.json')}.svg"
    assert checked_in(picture) == dashboard_svg(SHIPPED[name]), f"{picture} is stale: run make diagrams"


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_panel_is_drawn_with_its_title(name: str) -> None:
    svg = ET.fromstring(dashboard_svg(SHIPPED[name]))
    texts = {t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")}
    assert {p["title"] for p in SHIPPED[name]["panels"]} <= texts
    assert "DCGM_FI_PROF_SM_ACTIVE" in texts or name != "gpu-stragglers.json"
    assert "AWS/FSx:DataReadBytes" in texts or name != "fsx-throughput.json"


def test_write_pictures_writes_one_per_dashboard(tmp_path: Path) -> None:
    assert sorted(p.name for p in write_pictures(tmp_path)) == [
        "efa-throughput.svg",
        "fsx-throughput.svg",
        "gpu-overview.svg",
        "gpu-stragglers.svg",
    ]
