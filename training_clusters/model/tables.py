"""Plain-text tables for the terminal: what ``make synth``'s summary and the console script print."""

from __future__ import annotations

import textwrap
from collections.abc import Collection, Sequence

#: How wide a table may be by default: a terminal of 120 columns shows every line whole.
TABLE_WIDTH = 120
#: Columns are separated by this many spaces.
_GAP = "  "
#: The narrowest a column gets when even the longest words of every column do not fit (words are then cut).
_NARROWEST = 8


def text_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    width: int | None = TABLE_WIDTH,
    whole: Collection[int] = (),
) -> str:
    """Left-aligned columns separated by two spaces, a rule under the header, no trailing blanks.

    A table wider than ``width`` characters wraps its widest cells at spaces, header cells included (a
    header may then take several lines above the rule); only when the longest word of every column is
    already all a column holds are words cut too, except in the columns ``whole`` numbers (identifiers a
    reader copies: the table is then wider than ``width`` rather than cut them). Default: 120 characters;
    ``None`` never wraps.
    """
    table = [[str(cell) for cell in row] for row in [header, *rows]]
    natural = [max(len(row[i]) for row in table) for i in range(len(header))]
    widths = natural
    if width is not None:
        widths = _fit(table, natural, width - len(_GAP) * (len(header) - 1), whole)
    head, *body = [_lines(row, widths) for row in table]
    rule = _GAP.join("-" * w for w in widths).rstrip()
    return "\n".join([*head, rule, *(line for row in body for line in row)])


def _fit(table: list[list[str]], natural: list[int], budget: int, whole: Collection[int]) -> list[int]:
    """Column widths summing to at most ``budget``: the widest column gives up a character at a time,
    first never below its longest word, then never below :data:`_NARROWEST` (or its natural width); a
    ``whole`` column never below its longest word."""
    widths = list(natural)
    longest_word = [
        max((len(word) for row in table for word in row[i].split()), default=0) for i in range(len(natural))
    ]
    cut = [longest_word[i] if i in whole else min(w, _NARROWEST) for i, w in enumerate(natural)]
    for floor in (longest_word, cut):
        while sum(widths) > budget:
            shrinkable = [i for i, w in enumerate(widths) if w > floor[i]]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1
    return widths


def _lines(row: list[str], widths: list[int]) -> list[str]:
    """One table row as the terminal lines it takes, each cell wrapped to its column's width."""
    cells = [
        textwrap.wrap(cell, width, break_on_hyphens=False) if len(cell) > width else [cell]
        for cell, width in zip(row, widths, strict=True)
    ]
    height = max(len(cell) for cell in cells)
    return [
        _GAP.join(
            (cell[n] if n < len(cell) else "").ljust(width) for cell, width in zip(cells, widths, strict=True)
        ).rstrip()
        for n in range(height)
    ]


def numbered_notes(notes: Sequence[str], *, width: int = TABLE_WIDTH) -> str:
    """``[1] note`` lines, one note each, wrapped to ``width`` under their text.

    A note that is an AWS CLI command (``aws ...``) is wrapped with shell line continuations (`` \\``), so it
    still runs when copied whole.
    """
    lines = []
    for number, note in enumerate(notes, start=1):
        label = f"[{number}] "
        indent = " " * len(label)
        if note.startswith("aws "):
            parts = textwrap.wrap(
                note, width - len(label) - 2, break_long_words=False, break_on_hyphens=False
            )
            continued = [f"{part} \\" for part in parts[:-1]] + parts[-1:]
            lines += [f"{label if n == 0 else indent}{part}" for n, part in enumerate(continued)]
        else:
            lines += textwrap.wrap(
                note, width, initial_indent=label, subsequent_indent=indent, break_on_hyphens=False
            )
    return "\n".join(lines)
