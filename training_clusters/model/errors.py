"""The one exception type users see for bad input.

Every validation in this library raises :class:`ConfigurationError` with a message that names the field,
the value received and what is allowed, so a mistake surfaces at synth time as one readable line rather
than a jsii stack trace from deep inside CDK.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum

#: Each line of an error message is at most this long (its middle cut), and a message at most this many
#: lines: a value pasted from a log, or a file of ten thousand mistakes, still gives a short report.
MESSAGE_LINE_CHARACTERS, MESSAGE_LINES = 1000, 12

#: Characters a terminal acts on instead of showing (control characters, bidirectional overrides): an
#: error message shows them escaped. Tab and the line breaks between a report's lines are kept.
_UNSHOWABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class ConfigurationError(ValueError):
    """Bad input: the message names the field, the value received and what is allowed.

    The message is made safe to print when the error is made (:func:`displayable`), whatever value it
    quotes.
    """

    def __init__(self, message: object = "") -> None:
        super().__init__(displayable(str(message)))


#: The largest whole number a JSON number holds exactly in JavaScript (jsii, CDK) and CloudFormation: 2**53.
LARGEST_EXACT_INTEGER = 2**53


def exact_number_problem(value: object) -> str | None:
    """A number a template cannot carry as given: not finite (NaN, infinity), or a whole number beyond
    :data:`LARGEST_EXACT_INTEGER`, which JavaScript would round; None for anything else."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > LARGEST_EXACT_INTEGER:
        return f"must be at most {LARGEST_EXACT_INTEGER} in size, got {excerpt(value, 40)}"
    return None


def displayable(text: str) -> str:
    """``text`` safe for a terminal or a log: control and bidirectional-override characters escaped
    (``\\x1b``), each line at most :data:`MESSAGE_LINE_CHARACTERS`, at most :data:`MESSAGE_LINES` lines."""
    lines = [
        bounded(_UNSHOWABLE.sub(lambda m: repr(m.group())[1:-1], line), MESSAGE_LINE_CHARACTERS)
        for line in text.split("\n")
    ]
    if len(lines) > MESSAGE_LINES:
        lines = [*lines[: MESSAGE_LINES - 1], f"... and {len(lines) - MESSAGE_LINES + 1} more lines"]
    return "\n".join(lines)


def bounded(text: str, limit: int) -> str:
    """``text`` on one line, its middle cut when longer than ``limit`` (its start and end stay)."""
    text = " ".join(text.splitlines())
    if len(text) <= limit:
        return text
    head = (limit - 40) * 3 // 4
    tail = limit - 40 - head
    return f"{text[:head]} ...({len(text) - head - tail} characters cut)... {text[len(text) - tail :]}"


#: The most characters of a received value a message repeats: enough to recognise it, never a pasted log.
EXCERPT_CHARACTERS = 100


def excerpt(value: object, limit: int = EXCERPT_CHARACTERS) -> str:
    """``repr(value)`` for a message, cut to ``limit`` characters with the length left out said."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str) else len(text)
    return f"{text[: limit - 3]}... ({size} characters)"


def shown(value: object, limit: int = 60) -> str:
    """A received value as an error message shows it: a string as its excerpt, anything else named by its
    type before its excerpt (``got str '1200'`` reads wrong, ``got int 5`` reads right), an option of
    another kind by its class."""
    if isinstance(value, StrEnum):
        return f"{type(value).__name__}.{value.name} (an option of another kind)"
    if isinstance(value, str):
        return excerpt(value, limit)
    return typed(value, limit)


def typed(value: object, limit: int = 60) -> str:
    """A value of the wrong type, named by its type: ``str '1200'``, ``InstanceGroup InstanceGroup(...)``."""
    return f"{type(value).__name__} {excerpt(value, limit)}"
