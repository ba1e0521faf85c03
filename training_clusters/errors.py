"""The one exception type users see for bad input.

Every validation in this library raises :class:`ConfigurationError` with a message that names the field,
the value received and what is allowed, so a mistake surfaces at synth time as one readable line rather
than a jsii stack trace from deep inside CDK.
"""

from __future__ import annotations


class ConfigurationError(ValueError):
    """Bad input: the message names the field, the value received and what is allowed."""
