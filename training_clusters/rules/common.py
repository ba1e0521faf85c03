"""Rules more than one service shares."""

from __future__ import annotations

from collections.abc import Iterable


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
