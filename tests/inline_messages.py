"""Validation messages written inline in the constructs, instead of returned by a rule in ``rules/``.

A construct raises what a rule returns (``raise_if_problem(self, "field", rules.x_problem(...))``) so that the
environment-file model can apply the same rule and report the mistake at FILE:LINE. This scanner finds the
exceptions: a string literal with words in it passed as the message of ``prop_error(path, field, message)``,
``raise_if_problem(scope, field, problem)`` or ``ConfigurationError(message)`` inside ``training_clusters/constructs``.

``python -m tests.inline_messages`` prints the count per module (``-v``: every message, with its line).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CONSTRUCTS = Path(__file__).resolve().parent.parent / "training_clusters" / "constructs"
#: The calls whose message argument is looked at, and the position of that argument.
MESSAGE_ARGUMENT = {"prop_error": 2, "raise_if_problem": 2, "ConfigurationError": 0}
_WORD = re.compile(r"[A-Za-z]{2}")


@dataclass(frozen=True)
class InlineMessage:
    module: str  # relative to training_clusters/constructs, e.g. "common/placement.py"
    line: int
    text: str  # the literal as written (f-strings unparsed)


def _called(node: ast.Call) -> str | None:
    function = node.func
    if isinstance(function, ast.Name):
        return function.id
    return function.attr if isinstance(function, ast.Attribute) else None


def _words(node: ast.expr) -> bool:
    """Whether the expression spells out words of its own (a literal, an f-string or a concatenation with
    text in it); ``f"{path}: {error}"``, which only passes a rule's text on, has none."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and bool(_WORD.search(node.value))
    if isinstance(node, ast.JoinedStr):
        return any(_words(part) for part in node.values if isinstance(part, ast.Constant))
    if isinstance(node, ast.BinOp):
        return _words(node.left) or _words(node.right)
    return False


def inline_messages(root: Path = CONSTRUCTS) -> Iterator[InlineMessage]:
    """Every inline message under ``root``, module by module, in line order."""
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        found = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            position = MESSAGE_ARGUMENT.get(_called(node) or "")
            if position is None or len(node.args) <= position:
                continue
            message = node.args[position]
            if _words(message):
                found.append(InlineMessage(module, node.lineno, ast.unparse(message)))
        yield from sorted(found, key=lambda item: item.line)


def counts(root: Path = CONSTRUCTS) -> dict[str, int]:
    """How many inline messages each module holds (modules with none are left out)."""
    tally: dict[str, int] = {}
    for message in inline_messages(root):
        tally[message.module] = tally.get(message.module, 0) + 1
    return tally


def main(argv: list[str]) -> None:
    if "-v" in argv:
        for message in inline_messages():
            print(f"{message.module}:{message.line}: {message.text}")
    tally = counts()
    for module, count in sorted(tally.items()):
        print(f"{count:4} {module}")
    print(f"{sum(tally.values()):4} in all")


if __name__ == "__main__":
    main(sys.argv[1:])
