"""How wide a line of a drawing is, in points, in the font the PNG is rasterized with (DejaVu Sans).

Graphviz sizes a box from its own estimate of Helvetica, which is narrower than DejaVu Sans: a label that fits
Graphviz's box spills out of it in the PNG. :mod:`.dot` therefore sizes every label itself, from the advance
widths in ``font_widths.json`` (read from the font's files by ``scripts/font_widths.py``); DejaVu Sans is wider
than the Helvetica or Arial a browser draws the SVG with, so the same box holds the text there too. A line
longer than :data:`MAX_LINE_PT` is wrapped onto the next lines (:func:`wrap`), never cut.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

__all__ = ["MAX_LINE_PT", "width_pt", "wrap"]

MAX_LINE_PT = 250.0
"""The widest a line of a box may be (at its font size) before it is wrapped."""
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


def wrap(text: str, size: float, *, bold: bool = False, limit: float = MAX_LINE_PT) -> list[str]:
    """``text`` as lines none wider than ``limit`` points, broken at spaces (a word wider than ``limit`` on
    its own is broken inside it); every character is kept, in order."""
    lines: list[str] = []
    current = ""
    for word in text.split(" "):
        candidate = f"{current} {word}" if current else word
        if width_pt(candidate, size, bold=bold) <= limit:
            current = candidate
            continue
        if current:
            lines.append(current)
        current = ""
        for character in word:
            if current and width_pt(current + character, size, bold=bold) > limit:
                lines.append(current)
                current = ""
            current += character
    lines.append(current)
    return lines
