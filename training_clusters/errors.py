"""The one exception type users see for bad input.

Every validation in this library raises :class:`ConfigurationError` with a message that names the field,
the value received and what is allowed, so a mistake surfaces at synth time as one readable line rather
than a jsii stack trace from deep inside CDK.
"""

from __future__ import annotations

from enum import StrEnum


class ConfigurationError(ValueError):
    """Bad input: the message names the field, the value received and what is allowed."""


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
