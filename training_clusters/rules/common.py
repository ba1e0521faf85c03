"""Rules more than one service shares."""

from __future__ import annotations

import re
from collections.abc import Iterable


def pattern_problem(
    value: str, pattern: re.Pattern[str], requirement: str, *, max_length: int | None = None
) -> str | None:
    """None when ``value`` matches ``pattern`` whole (and is at most ``max_length`` characters long), else
    ``"<requirement>, got '<value>'"``: names, ids and paths a service spells one way."""
    if pattern.fullmatch(value) and (max_length is None or len(value) <= max_length):
        return None
    return f"{requirement}, got '{value}'"


def duplicates_problem(names: Iterable[str]) -> str | None:
    """Names that must be unique (queues, compute resources, node groups)."""
    seen: set[str] = set()
    repeated: list[str] = []
    for name in names:
        if name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    if not repeated:
        return None
    return f"must be unique, got {', '.join(repr(n) for n in repeated)} more than once"
