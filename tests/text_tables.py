"""Reading a text table back: its columns' headers, and whether it fits a 120-column terminal."""

from __future__ import annotations

import re

from training_clusters.model.tables import TABLE_WIDTH


def column_headers(table: str) -> list[str]:
    """Each column's header text (its lines above the rule joined), the columns read off the rule's dashes."""
    lines = table.splitlines()
    rule = next(n for n, line in enumerate(lines) if line and set(line) <= {"-", " "})
    spans = [match.span() for match in re.finditer(r"-+", lines[rule])]
    return [" ".join(line[start:end].strip() for line in lines[:rule]).strip() for start, end in spans]


def assert_fits(table: str) -> None:
    too_wide = [line for line in table.splitlines() if len(line) > TABLE_WIDTH]
    assert too_wide == [], f"{len(too_wide)} line(s) wider than {TABLE_WIDTH}: {too_wide[0]!r}"
    headers = column_headers(table)
    assert "" not in headers, f"a column without a header: {headers}"


def unwrapped(printed: str) -> str:
    """What the CLI printed with its wrapping undone: a line indented four spaces or more continues the line
    before it (the CLI wraps each line wider than 120 columns so, keeping every word whole)."""
    return re.sub(r"\n {4,}", " ", printed)
