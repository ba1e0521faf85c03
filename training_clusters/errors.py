"""The one exception type users see for bad input.

Every validation in this library raises :class:`ConfigurationError` with a message that names the field,
the value received and what is allowed, so a mistake surfaces at synth time as one readable line rather
than a jsii stack trace from deep inside CDK.
"""

from __future__ import annotations


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
