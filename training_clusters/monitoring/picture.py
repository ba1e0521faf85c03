"""A picture of each shipped dashboard, drawn from its JSON: the panels where Grafana puts them.

``python -m training_clusters.monitoring.picture DIR`` writes ``DIR/<dashboard>.svg`` (``make diagrams`` does,
into ``docs/dashboards``; a test fails when one is stale). Each panel is a box at its ``gridPos`` (24 columns,
rows of 30 pixels) with its title, its kind and the metrics its queries read: a static layout, no data. The FSx
dashboard is drawn for :data:`PICTURE_FILE_SYSTEM_ID`, an example id the picture does not show.
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path
from typing import Any

from training_clusters.monitoring.dashboards import dashboards, queried_metrics

_COLUMN = 40
_ROW = 30
_MARGIN = 16
_HEADER = 48
#: The file system the FSx dashboard's picture is drawn for (its id appears in queries only, not in the picture).
PICTURE_FILE_SYSTEM_ID = "fs-0123456789abcdef0"
_KIND_COLOUR = {"timeseries": "#e8f1fb", "stat": "#eaf7ec", "table": "#fdf3e4"}


def dashboard_svg(dashboard: dict[str, Any]) -> str:
    """The SVG of ``dashboard``'s layout."""
    panels = dashboard["panels"]
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    width = 24 * _COLUMN + 2 * _MARGIN
    height = _HEADER + bottom * _ROW + _MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{_MARGIN}" y="30" font-size="20" font-weight="bold">{escape(dashboard["title"])}</text>',
    ]
    for panel in panels:
        grid = panel["gridPos"]
        x = _MARGIN + grid["x"] * _COLUMN + 3
        y = _HEADER + grid["y"] * _ROW + 3
        w, h = grid["w"] * _COLUMN - 6, grid["h"] * _ROW - 6
        metrics = sorted(queried_metrics({"panels": [panel], "templating": {"list": []}}))
        parts += [
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="4" fill="{_KIND_COLOUR[panel["type"]]}" '
            'stroke="#8aa4c2"/>',
            f'<text x="{x + 10}" y="{y + 22}" font-size="14" font-weight="bold">{escape(panel["title"])}</text>',
            f'<text x="{x + 10}" y="{y + 42}" font-size="12" fill="#555555">{escape(panel["type"])}</text>',
        ]
        for line, metric in enumerate(metrics):
            parts.append(
                f'<text x="{x + 10}" y="{y + 64 + 16 * line}" font-size="11" font-family="monospace" '
                f'fill="#333333">{escape(metric)}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_pictures(directory: Path) -> list[Path]:
    """``<directory>/<dashboard>.svg`` for every shipped dashboard; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, dashboard in dashboards(PICTURE_FILE_SYSTEM_ID).items():
        path = directory / f"{name.removesuffix('.json')}.svg"
        path.write_text(dashboard_svg(dashboard))
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover - exercised through make diagrams
    for written_path in write_pictures(Path(sys.argv[1])):
        print(f"wrote {written_path}")
