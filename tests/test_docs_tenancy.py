"""``docs/tenancy.md`` ("What a team user can reach") says only what tests show: every line that claims something
names the test that shows it, as ``tests/<path>.py::test_<name>``, and each named test exists (a ``def`` of that
name in that file, collected by pytest: a module-level function). A renamed or deleted test fails here until
the page follows."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from .conftest import ROOT

PAGE = ROOT / "docs" / "tenancy.md"
CITATION = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")
#: A named case of a parametrized test: ``(tests/x.py::test_y`, case `name`)``.
CASE = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`, case `([\w-]+)`")


def _bullets(text: str) -> list[str]:
    """Each list item of the page, joined across its wrapped lines."""
    items: list[str] = []
    for line in text.splitlines():
        if line.startswith("- "):
            items.append(line[2:])
        elif line.startswith("  ") and items:
            items[-1] += " " + line.strip()
        elif not line.strip():
            continue
        elif items and not line.startswith("#"):
            items.append("")  # a paragraph ends the item before it
    return [item for item in items if item]


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
    }


def test_every_claim_on_the_page_names_a_test() -> None:
    items = _bullets(PAGE.read_text(encoding="utf-8"))
    assert len(items) >= 25
    uncited = [item for item in items if not CITATION.search(item) and not item.startswith(_UNCITED)]
    assert uncited == []


#: The lines that claim no protection and so cite no test: what stays a team's ("Still theirs"), and what PCS
#: leaves to the AMI.
_UNCITED = ("**Still theirs:**", "PCS creates no team users")


@pytest.mark.parametrize(
    ("path", "name"),
    sorted(set(CITATION.findall(PAGE.read_text(encoding="utf-8")))),
    ids=lambda value: str(value),
)
def test_each_test_the_page_names_exists(path: str, name: str) -> None:
    file = ROOT / path
    assert file.is_file(), f"docs/tenancy.md names {path}, which does not exist"
    assert name in _test_functions(file), f"docs/tenancy.md names {path}::{name}, which does not exist"


def test_each_named_case_exists() -> None:
    cases = CASE.findall(PAGE.read_text(encoding="utf-8"))
    assert cases == [
        ("tests/test_bad_inputs.py", "test_bad_file_is_refused_with_our_message", "privileged-group-docker")
    ]
    for _, _, case in cases:
        assert (ROOT / "tests" / "bad_inputs" / f"{case}.yaml").is_file()


def test_a_missing_test_is_found(tmp_path: Path) -> None:
    """Both sides: the check does refuse a name that is not a test function of the file."""
    module = tmp_path / "test_x.py"
    module.write_text(
        "def test_here():\n    pass\n\ndef helper():\n    pass\n\nclass C:\n    def test_in_class(self): pass\n"
    )
    assert _test_functions(module) == {"test_here"}
