"""An unknown key in an environment file: what it was probably meant to be, among the keys allowed there.

Both sections of a file that pydantic checks (the whole environment, and ``compute`` of an intent) say it
the same way::

    parallelcluster.queues.0.compute_resources.0.max_cont: unknown key (got value 2); did you mean max_count?
    storage.nat_gateways: unknown key (got value 1); allowed here: lustre
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from typing import Any, get_args

from pydantic import BaseModel

from training_clusters.model.errors import excerpt

#: A key longer than this is no misspelling of a field (the longest field name is 35 characters), so it
#: is not compared: difflib's cost grows with the key, and a file may hold thousands of unknown keys.
LONGEST_KEY_COMPARED = 64

#: The longest list of allowed keys a message spells out (a section's, e.g. a queue's 132 characters; the
#: top level's 167 are left to the schema): a report of ten unknown keys stays readable.
LONGEST_LISTING = 150


def allowed_keys(model: type[BaseModel], path: Sequence[str | int]) -> list[str]:
    """The keys of the section at field path ``path`` inside ``model`` (``("parallelcluster", "queues", 0)``
    is a queue's), in the order the model declares them; empty when ``path`` leads to no section."""
    section = model
    for part in path:
        if isinstance(part, int):
            continue  # an item of a list of sections: the list's section
        field = section.model_fields.get(part)
        found = None if field is None else next(_models_in(field.annotation), None)
        if found is None:
            return []
        section = found
    return list(section.model_fields)


#: A value shown as it is in a suggested replacement (a reservation id); anything else is shown as ``cr-...``.
_PLAIN_ID = re.compile(r"[A-Za-z0-9-]{1,40}")

#: Keys of the capacity form before ``capacity`` (removed in 0.x), in the sections that now take ``capacity``.
RETIRED_CAPACITY_KEYS = ("capacity_type", "purchase_option", "capacity_reservation_id")


def retired_capacity_key_problem(key: object, value: object) -> str | None:
    """What to write instead of a key of the older capacity form (said after the key's path), or None for
    any other key.

    >>> retired_capacity_key_problem("capacity_type", "spot")
    'was replaced by capacity; write capacity: {type: spot} instead'
    """
    if key not in RETIRED_CAPACITY_KEYS:
        return None
    if key == "capacity_reservation_id":
        reservation = value if isinstance(value, str) and _PLAIN_ID.fullmatch(value) else "cr-..."
        replacement = (
            f"{{type: reservation, reservation_id: {reservation}}} "
            "({type: capacity-block, ...} for a Capacity Block)"
        )
    else:
        kind = str(value).strip().lower().replace("_", "-").replace("ondemand", "on-demand")
        replacement = {
            "on-demand": "{type: on-demand}",
            "spot": "{type: spot}",
            "capacity-block": "{type: capacity-block, reservation_id: cr-...}",
        }.get(kind, "{type: on-demand | spot | reservation | capacity-block, ...}")
    return f"was replaced by capacity; write capacity: {replacement} instead"


def unknown_key_problem(key: object, value: object, allowed: Sequence[str]) -> str:
    """What to say about ``key: value`` in a section that allows only ``allowed``.

    A key of the older capacity form, where the section takes ``capacity``, gets what to write instead
    (:func:`retired_capacity_key_problem`). Otherwise the closest allowed key when one is close (difflib's ratio of 0.6 or more, as
    :func:`difflib.get_close_matches` has it), else the keys the section allows when they fit
    :data:`LONGEST_LISTING` characters, else the schema that lists them.
    """
    retired = retired_capacity_key_problem(key, value) if "capacity" in allowed else None
    if retired:
        return retired
    problem = f"unknown key (got value {excerpt(value)})"
    close = []
    if isinstance(key, str) and len(key) <= LONGEST_KEY_COMPARED:
        close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f"{problem}; did you mean {close[0]}?"
    listed = ", ".join(allowed)
    if allowed and len(listed) <= LONGEST_LISTING:
        return f"{problem}; allowed here: {listed}"
    return f"{problem}; check the spelling against environments/schema.json"


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """The section models in a field's annotation: ``X``, ``X | None``, ``list[X]``, ``Annotated[X, ...]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for argument in get_args(annotation):
        yield from _models_in(argument)
