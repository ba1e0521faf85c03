"""How wide a line of a drawing is, in points, in the font the PNG is rasterized with (DejaVu Sans).

Graphviz sizes a box from its own estimate of Helvetica, which is narrower than DejaVu Sans: a label that fits
Graphviz's box spills out of it in the PNG. :mod:`.dot` therefore sizes every label itself, from the advance
widths in ``font_widths.json`` (read from the font's files by ``scripts/font_widths.py``); DejaVu Sans is wider
than the Helvetica or Arial a browser draws the SVG with, so the same box holds the text there too. A line
longer than :data:`MAX_LINE_PT` is shortened with an ellipsis; the full text stays in the box's tooltip (the
SVG ``title`` of its link).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

__all__ = ["ELLIPSIS", "MAX_LINE_PT", "fit", "width_pt"]

MAX_LINE_PT = 250.0
"""The widest a line of a box may be (at its font size) before it is shortened."""
ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"
#: A character the table does not hold is measured as the widest one it does (never narrower than drawn).
_FALLBACK = "W"


@cache
def _widths(bold: bool) -> dict[str, float]:
    table = json.loads(
        resources.files("training_clusters.diagram").joinpath("font_widths.json").read_text("utf-8")
    )
    widths: dict[str, float] = table["bold" if bold else "regular"]
    return widths


def width_pt(text: str, size: float, *, bold: bool = False) -> float:
    """The advance width of ``text`` at ``size`` points."""
    widths = _widths(bold)
    return sum(widths.get(c, widths[_FALLBACK]) for c in text) * size


def fit(text: str, size: float, *, bold: bool = False, limit: float = MAX_LINE_PT) -> str:
    """``text``, or as much of it as fits ``limit`` points followed by an ellipsis."""
    if width_pt(text, size, bold=bold) <= limit:
        return text
    while text and width_pt(text + ELLIPSIS, size, bold=bold) > limit:
        text = text[:-1]
    return text.rstrip() + ELLIPSIS
