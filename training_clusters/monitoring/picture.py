"""A picture of each shipped dashboard as Grafana draws it, with the data a real Prometheus gave its queries.

``python -m training_clusters.monitoring.picture DIR`` writes ``DIR/<dashboard>.svg`` (``make diagrams`` does,
into ``docs/dashboards``; a test fails when one is stale). Each panel sits at its ``gridPos`` (24 columns, rows
of 30 pixels) and shows what its queries return on a synthetic cluster of 4 nodes x 8 GPUs in which one node
slows down at minute 20: a time series as one line per series with its legend (Grafana's names, from
``legendFormat``) and its last value, a stat as its number with the series it names, a table as its rows.

The answers come from :data:`PANEL_RESULTS`, written by ``python -m tests.integration.prometheus_bed`` from
Debian's Prometheus evaluating every query (``make integration`` checks that the file is what Prometheus
answers, and ``tests/monitoring`` that it holds every query the dashboards ship): drawing needs no Prometheus,
so ``make diagrams`` and the pictures' freshness test run anywhere. The FSx dashboard queries CloudWatch, which
nothing here can answer: its panels show their layout and the metrics they read, drawn for
:data:`PICTURE_FILE_SYSTEM_ID`, an example id the picture does not show.
"""

from __future__ import annotations

import json
import math
import re
import sys
from html import escape
from pathlib import Path
from typing import Any

from training_clusters.monitoring.dashboards import dashboards, queried_metrics

#: Each Prometheus query's answer on a synthetic cluster with a slow node, as a real Prometheus gave it.
PANEL_RESULTS = Path(__file__).with_name("panel_results.json")
_COLUMN = 40
_ROW = 30
_MARGIN = 16
_HEADER = 48
#: The file system the FSx dashboard's picture is drawn for (its id appears in queries only, not in the picture).
PICTURE_FILE_SYSTEM_ID = "fs-0123456789abcdef0"
_KIND_COLOUR = {"timeseries": "#e8f1fb", "stat": "#eaf7ec", "table": "#fdf3e4"}
#: Grafana's classic palette, in its order.
PALETTE = ("#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1", "#ba43a9", "#705da0")
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")
#: The width of a legend character at 10 px (DejaVu Sans averages under 5.6 px): what a legend column needs.
_LEGEND_CHAR_PX = 5.6
_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def load_results(path: Path = PANEL_RESULTS) -> dict[str, Any]:
    """The checked-in query results (see the module's docstring)."""
    results: dict[str, Any] = json.loads(path.read_text())
    return results


def _si(value: float, unit: str) -> str:
    for factor, prefix in _SI:
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def format_value(value: float | None, unit: str) -> str:
    """``value`` as Grafana shows it in ``unit`` (the units our panels use)."""
    if value is None:
        return "No data"
    if unit == "percentunit":
        return f"{100 * value:.3g}%"
    if unit == "percent":
        return f"{value:.3g}%"
    if unit == "celsius":
        return f"{value:.0f} °C"
    if unit == "watt":
        return _si(value, "W")
    if unit == "Bps":
        return _si(value, "B/s")
    return f"{value:g}"


def legend(fmt: str, labels: dict[str, str]) -> str:
    """Grafana's series name: ``legendFormat`` with each ``{{label}}`` replaced (empty when the label is absent)."""
    return _LEGEND.sub(lambda m: labels.get(m.group(1), ""), fmt).strip()


def _nice_max(value: float) -> float:
    """The axis top Grafana would pick: the next 1, 2, 2.5 or 5 times a power of ten at or above ``value``."""
    if value <= 0:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    return next(step * scale for step in (1, 2, 2.5, 5, 10) if value <= step * scale * (1 + 1e-9))


def panel_series(panel: dict[str, Any], results: dict[str, Any]) -> list[tuple[str, list[float | None]]]:
    """``(name, values)`` of every series the panel's queries return, in query order then label order."""
    drawn = []
    for target in panel["targets"]:
        answer = results["results"].get(target["expr"])
        if answer is None or answer["instant"] != target["instant"]:
            raise ValueError(
                f"{PANEL_RESULTS.name} lacks {target['expr']!r} (instant={target['instant']}): "
                "run python -m tests.integration.prometheus_bed training_clusters/monitoring/panel_results.json"
            )
        drawn += [(legend(target["legendFormat"], s["labels"]), s["values"]) for s in answer["series"]]
    return drawn


def _timeseries(panel: dict[str, Any], results: dict[str, Any], x: int, y: int, w: int, h: int) -> list[str]:
    unit = panel["fieldConfig"]["defaults"]["unit"]
    series = panel_series(panel, results)
    names = [
        f"{name} {format_value(next((v for v in reversed(vs) if v is not None), None), unit)}"
        for name, vs in series
    ]
    widest = 16 + _LEGEND_CHAR_PX * max(len(name) for name in names)
    columns = max(1, min(4, int((w - 24) // widest)))
    legend_rows = -(-len(series) // columns)
    plot_x, plot_y = x + 64, y + 34
    plot_w, plot_h = w - 64 - 12, h - 34 - 24 - 16 * legend_rows - 6
    values = [v for _, vs in series for v in vs if v is not None]
    top = _nice_max(max(values))
    points = results["points"]
    parts = [
        f'<rect x="{plot_x}" y="{plot_y}" width="{plot_w}" height="{plot_h}" fill="#ffffff" stroke="#d5dde8"/>'
    ]
    for fraction in (0, 0.5, 1):
        gy = plot_y + plot_h - fraction * plot_h
        parts += [
            f'<line x1="{plot_x}" y1="{gy:.1f}" x2="{plot_x + plot_w}" y2="{gy:.1f}" stroke="#e4e9f0"/>',
            f'<text x="{plot_x - 6}" y="{gy + 4:.1f}" font-size="10" fill="#555555" text-anchor="end">'
            f"{escape(format_value(top * fraction, unit))}</text>",
        ]
    for minute in range(10, 60, 10):
        index = (minute * 60 - results["start"] % 3600) / results["step"]
        gx = plot_x + plot_w * index / (points - 1)
        parts.append(
            f'<text x="{gx:.1f}" y="{plot_y + plot_h + 13}" font-size="10" fill="#555555" text-anchor="middle">'
            f"00:{minute:02d}</text>"
        )
    for number, (name, vs) in enumerate(series):
        colour = PALETTE[number % len(PALETTE)]
        path = " ".join(
            f"{plot_x + plot_w * i / (points - 1):.1f},{plot_y + plot_h - plot_h * v / top:.1f}"
            for i, v in enumerate(vs)
            if v is not None
        )
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.6"/>')
        lx = x + 12 + (number % columns) * (w - 24) // columns
        ly = plot_y + plot_h + 30 + 16 * (number // columns)
        last = next((v for v in reversed(vs) if v is not None), None)
        parts += [
            f'<rect x="{lx}" y="{ly - 8}" width="12" height="4" fill="{colour}"/>',
            f'<text x="{lx + 16}" y="{ly}" font-size="10" fill="#333333">{escape(name)} '
            f'<tspan fill="#777777">{escape(format_value(last, unit))}</tspan></text>',
        ]
    return parts


def _stat(panel: dict[str, Any], results: dict[str, Any], x: int, y: int, w: int, h: int) -> list[str]:
    unit = panel["fieldConfig"]["defaults"]["unit"]
    series = panel_series(panel, results)
    parts = []
    for number, (name, values) in enumerate(series):
        cx = x + w * (2 * number + 1) // (2 * len(series))
        parts += [
            f'<text x="{cx}" y="{y + h // 2 + 14}" font-size="40" font-weight="bold" fill="{PALETTE[number]}" '
            f'text-anchor="middle">{escape(format_value(values[-1], unit))}</text>',
            f'<text x="{cx}" y="{y + h // 2 + 42}" font-size="13" fill="#333333" text-anchor="middle">'
            f"{escape(name)}</text>",
        ]
    return parts


def _table(panel: dict[str, Any], results: dict[str, Any], x: int, y: int, w: int, h: int) -> list[str]:
    unit = panel["fieldConfig"]["defaults"]["unit"]
    header = ["Series", "Value"]
    rows = [(name, format_value(values[-1], unit)) for name, values in panel_series(panel, results)]
    parts = [f'<rect x="{x + 8}" y="{y + 34}" width="{w - 16}" height="20" fill="#f4f6f9"/>']
    for column, text in enumerate(header):
        parts.append(
            f'<text x="{x + 16 + column * (w - 32) // 2}" y="{y + 48}" font-size="11" font-weight="bold" '
            f'fill="#333333">{text}</text>'
        )
    for line, row in enumerate(rows):
        for column, text in enumerate(row):
            parts.append(
                f'<text x="{x + 16 + column * (w - 32) // 2}" y="{y + 70 + 18 * line}" font-size="11" '
                f'fill="#333333">{escape(text)}</text>'
            )
    return parts


def _layout_only(panel: dict[str, Any], x: int, y: int) -> list[str]:
    metrics = sorted(queried_metrics({"panels": [panel], "templating": {"list": []}}))
    parts = [
        f'<text x="{x + 10}" y="{y + 42}" font-size="12" fill="#555555">{escape(panel["type"])} '
        "(CloudWatch: drawn without data)</text>"
    ]
    for line, metric in enumerate(metrics):
        parts.append(
            f'<text x="{x + 10}" y="{y + 64 + 16 * line}" font-size="11" font-family="monospace" '
            f'fill="#333333">{escape(metric)}</text>'
        )
    return parts


_DRAW = {"timeseries": _timeseries, "stat": _stat, "table": _table}


def dashboard_svg(dashboard: dict[str, Any], results: dict[str, Any] | None = None) -> str:
    """The SVG of ``dashboard``, its Prometheus panels drawn with ``results`` (default: :data:`PANEL_RESULTS`)."""
    results = load_results() if results is None else results
    panels = dashboard["panels"]
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    width = 24 * _COLUMN + 2 * _MARGIN
    height = _HEADER + bottom * _ROW + _MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, DejaVu Sans, sans-serif">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{_MARGIN}" y="30" font-size="20" font-weight="bold">{escape(dashboard["title"])}</text>',
    ]
    if any("expr" in t for p in panels for t in p["targets"]):
        parts.append(
            f'<text x="{width - _MARGIN}" y="30" font-size="11" fill="#777777" text-anchor="end">'
            f"4 nodes x 8 GPUs, {escape(results['slow_node'])} slow from 00:20 (synthetic, evaluated by "
            "Prometheus)</text>"
        )
    for panel in panels:
        grid = panel["gridPos"]
        x = _MARGIN + grid["x"] * _COLUMN + 3
        y = _HEADER + grid["y"] * _ROW + 3
        w, h = grid["w"] * _COLUMN - 6, grid["h"] * _ROW - 6
        parts += [
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="4" fill="{_KIND_COLOUR[panel["type"]]}" '
            'stroke="#8aa4c2"/>',
            f'<text x="{x + 10}" y="{y + 22}" font-size="14" font-weight="bold">{escape(panel["title"])}</text>',
        ]
        if all("expr" in t for t in panel["targets"]):
            parts += _DRAW[panel["type"]](panel, results, x, y, w, h)
        else:
            parts += _layout_only(panel, x, y)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_pictures(directory: Path) -> list[Path]:
    """``<directory>/<dashboard>.svg`` for every shipped dashboard; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    results = load_results()
    written = []
    for name, dashboard in dashboards(PICTURE_FILE_SYSTEM_ID).items():
        path = directory / f"{name.removesuffix('.json')}.svg"
        path.write_text(dashboard_svg(dashboard, results))
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover - exercised through make diagrams
    for written_path in write_pictures(Path(sys.argv[1])):
        print(f"wrote {written_path}")
