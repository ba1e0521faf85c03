"""CONTRIBUTING.md's "Layout" section (the tree and "Where things go") names the repository as it is.

Every path the section names exists: each entry of its tree (a folder ends with ``/``; a glob must match a
file), and every repository path it writes in backquotes. The other way, every module and folder at the top
of ``training_clusters/`` is in the tree, so a new one cannot land without a place in the layout.

The section describes the package's folder layout (issue 37). While the package is being moved into it, the
paths not there yet are listed in :data:`AWAITING_THE_MOVE` and the modules not moved yet in
:data:`NOT_YET_MOVED`; each list must shrink as the moves land (a listed path that has arrived, or a listed
module that has gone, fails the test until it is taken off its list). Both lists end empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from .blocks import ROOT

CONTRIBUTING = ROOT / "CONTRIBUTING.md"
#: The top-level folders a backquoted path in the section may start with to be read as a repository path.
ROOTS = ("training_clusters/", "tests/", "docs/", "environments/", "scripts/", "examples/", "benchmarks/")
#: Not part of the layout: Python's own files and what running the code leaves behind.
NOT_LAYOUT = frozenset({"__init__.py", "__pycache__", "py.typed"})

#: Paths the section names that the package moves have not made yet (issue 37: the folder layout).
AWAITING_THE_MOVE: frozenset[str] = frozenset()
#: Modules and folders at the top of the package that are still to move into the layout's folders.
NOT_YET_MOVED: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Named:
    path: str
    """Relative to the repository; a folder ends with ``/``."""
    line: int


def layout_section(text: str) -> tuple[int, str]:
    """The "## Layout" section of a Markdown text (with its subsections) and the line it starts on."""
    start = text.index("\n## Layout\n") + 1
    end = text.find("\n## ", start)
    return text.count("\n", 0, start) + 1, text[start : end if end > 0 else None]


def tree_paths(section: str, first_line: int = 1) -> list[Named]:
    """The entries of the section's fenced tree: a line's names (before its ``#`` comment) sit in the folder of
    the nearest line above it that is less indented and names one folder alone."""
    lines = section.splitlines()
    opened = [n for n, line in enumerate(lines) if line.startswith("```")]
    assert len(opened) >= 2, "the Layout section has no fenced tree"
    found: list[Named] = []
    parents: list[tuple[int, str]] = []  # (indent, folder)
    for number in range(opened[0] + 1, opened[1]):
        code = lines[number].split("#", 1)[0].rstrip()
        if not code.strip():
            continue
        indent = len(code) - len(code.lstrip())
        while parents and parents[-1][0] >= indent:
            parents.pop()
        folder = parents[-1][1] if parents else ""
        names = code.split()
        found.extend(Named(folder + name, first_line + number) for name in names)
        if len(names) == 1 and names[0].endswith("/"):
            parents.append((indent, folder + names[0]))
    return found


def quoted_paths(section: str, first_line: int = 1) -> list[Named]:
    """The repository paths the section writes in backquotes, outside its fenced blocks."""
    found: list[Named] = []
    fenced = False
    for number, line in enumerate(section.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            found.extend(
                Named(path, first_line + number)
                for path in re.findall(r"`([\w./*-]+)`", line)
                if path.startswith(ROOTS)
            )
    return found


def exists(path: str, root: Path = ROOT) -> bool:
    if "*" in path:
        return any(root.glob(path))
    target = root / path
    return target.is_dir() if path.endswith("/") else target.exists()


TEXT = CONTRIBUTING.read_text(encoding="utf-8")
FIRST_LINE, SECTION = layout_section(TEXT)
NAMED = [*tree_paths(SECTION, FIRST_LINE), *quoted_paths(SECTION, FIRST_LINE)]


def test_every_path_the_layout_names_exists_or_awaits_the_move() -> None:
    missing = sorted(
        {
            f"CONTRIBUTING.md:{n.line}: {n.path}"
            for n in NAMED
            if n.path not in AWAITING_THE_MOVE and not exists(n.path)
        }
    )
    assert missing == []


def test_a_path_awaiting_the_move_is_still_named_and_still_missing() -> None:
    named = {n.path for n in NAMED}
    assert sorted(AWAITING_THE_MOVE - named) == [], "no longer in the layout: take it off AWAITING_THE_MOVE"
    arrived = sorted(p for p in AWAITING_THE_MOVE if exists(p))
    assert arrived == [], "it exists now: take it off AWAITING_THE_MOVE"


def test_every_module_at_the_top_of_the_package_is_in_the_layout() -> None:
    named = {n.path for n in tree_paths(SECTION)}
    present = {p.name for p in (ROOT / "training_clusters").iterdir()} - NOT_LAYOUT
    unnamed = sorted(
        name
        for name in present
        if f"training_clusters/{name}" not in named and f"training_clusters/{name}/" not in named
    )
    assert sorted(set(unnamed) - NOT_YET_MOVED) == [], "add it to CONTRIBUTING.md's layout"
    assert sorted(NOT_YET_MOVED - set(unnamed)) == [], "moved or named now: take it off NOT_YET_MOVED"


def test_where_things_go_names_each_kind_of_addition() -> None:
    table = SECTION[SECTION.index("### Where things go") :]
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")][1:]
    assert rows == [
        "an orchestrator",
        "an EKS add-on",
        'a rule ("must be ...")',
        "a pin (version, chart, image, URL, checksum)",
        "a node step",
        "a CLI command",
    ]


def test_the_tree_reader_nests_by_indentation() -> None:
    section = (
        "## Layout\n```\napp.py  cdk.json   # two files\npkg/\n  a/             # a folder\n    b.py\n"
        "                 #   a comment's continuation\n  c.py  d/\n    e.py\nother/*.yaml\n```\n"
        "`pkg/x.py` and `nowhere/y.py` and `tests/z.py`\n"
    )
    assert [n.path for n in tree_paths(section)] == [
        "app.py",
        "cdk.json",
        "pkg/",
        "pkg/a/",
        "pkg/a/b.py",
        "pkg/c.py",
        "pkg/d/",
        "pkg/e.py",  # d/ shares its line with c.py, so it opens no folder
        "other/*.yaml",
    ]
    assert [(n.path, n.line) for n in quoted_paths(section, 10)] == [("tests/z.py", 21)]


@pytest.mark.parametrize(
    ("path", "there"),
    [
        ("pkg/a/", True),
        ("pkg/a", True),
        ("pkg/b.py/", False),
        ("pkg/b.py", True),
        ("pkg/*.py", True),
        ("pkg/*.md", False),
    ],
)
def test_a_folder_must_be_a_folder_and_a_glob_must_match(tmp_path: Path, path: str, there: bool) -> None:
    (tmp_path / "pkg" / "a").mkdir(parents=True)
    (tmp_path / "pkg" / "b.py").write_text("")
    assert exists(path, tmp_path) is there
