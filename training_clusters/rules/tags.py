"""Resource tags: the characters and lengths every service the environment tags accepts.

CloudFormation propagates stack tags to each resource that takes tags, and each service checks them
against its own pattern. The strictest of the services an environment tags — IAM (``tagKeyType``,
``tagValueType``), SageMaker, FSx and CloudWatch Logs (``TagKey``, ``TagValue``) in botocore's service
models — is :data:`TAG_CHARACTERS`, so a tag that passes here passes everywhere; one that fails would
stop the deploy half-way, at the first IAM role or log group (``R&D`` synthesizes, then IAM refuses it).
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

#: The character class of the tag patterns in botocore's models, verbatim (the test compares them).
TAG_CHARACTERS = r"[\p{L}\p{Z}\p{N}_.:/=+\-@]"
#: What :data:`TAG_CHARACTERS` allows, in words, for messages.
TAG_CHARACTERS_ALLOWED = "letters, numbers, spaces and _ . : / = + - @"
MAX_TAG_KEY, MAX_TAG_VALUE = 128, 256
#: Tag keys AWS keeps for itself (case-insensitive).
RESERVED_TAG_PREFIX = "aws:"
_STRICTEST = "IAM, SageMaker, FSx and CloudWatch Logs"


@cache
def unicode_character_class(pattern: str) -> tuple[frozenset[str], frozenset[str]]:
    r"""``[...]`` with ``\p{X}`` categories and literal characters, as (category initials, literals).

    Python's ``re`` has no ``\p{..}``; ``unicodedata`` has the categories (``\p{L}`` is every category
    starting with ``L``: ``Lu``, ``Ll``, ``Lt``, ``Lm``, ``Lo``). Ranges, two-letter categories and
    shorthands such as ``\w`` are not supported (no tag pattern uses them), so such a pattern is refused
    rather than read wrongly.
    """
    match = re.fullmatch(r"\[((?:\\p\{[A-Z]\}|\\[^A-Za-z0-9]|[^\\\]-])*)\]", pattern)
    if match is None:
        raise ValueError(f"not a character class of \\p{{X}}, escaped and literal characters: {pattern}")
    body = match.group(1)
    categories = frozenset(re.findall(r"\\p\{([A-Z])\}", body))
    literals = frozenset(re.sub(r"\\(.)", r"\1", re.sub(r"\\p\{[A-Z]\}", "", body)))
    return categories, literals


def refused_characters(text: str, pattern: str = TAG_CHARACTERS) -> list[str]:
    """The distinct characters of ``text`` outside ``pattern``'s class, in order of appearance."""
    categories, literals = unicode_character_class(pattern)
    refused: list[str] = []
    for character in text:
        allowed = character in literals or unicodedata.category(character)[0] in categories
        if not allowed and character not in refused:
            refused.append(character)
    return refused


def _characters_problem(text: str) -> str | None:
    refused = refused_characters(text)
    if not refused:
        return None
    listed = " ".join(repr(character) for character in refused[:5])
    return f"holds {listed}, which {_STRICTEST} refuse in tags; allowed: {TAG_CHARACTERS_ALLOWED}"


def tag_key_problem(key: str) -> str | None:
    """A tag key: 1-128 allowed characters, not starting with ``aws:``."""
    if not 1 <= len(key) <= MAX_TAG_KEY:
        return f"must be 1-{MAX_TAG_KEY} characters, got {len(key)}"
    if key.lower().startswith(RESERVED_TAG_PREFIX):
        return f"must not start with '{RESERVED_TAG_PREFIX}' (reserved for AWS)"
    return _characters_problem(key)


def tag_value_problem(value: str) -> str | None:
    """A tag value: at most 256 allowed characters (empty is allowed)."""
    if len(value) > MAX_TAG_VALUE:
        return f"must be at most {MAX_TAG_VALUE} characters, got {len(value)}"
    return _characters_problem(value)
