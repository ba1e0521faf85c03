"""README.md stays a short front page, every guide page is reachable from it, and no link of the pages leads
nowhere.

The pages are README.md, CONTRIBUTING.md and every Markdown page under docs/ (the guide pages and the
environment pictures' pages). A relative link must name a file or folder of the repository; one with a
``#fragment`` into a Markdown page must name one of that page's headings, as GitHub makes its anchors.
Links inside code (fenced blocks, backquotes) are text, not links.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

from .blocks import ROOT, pages

#: The README is the front page: what it builds, the quick start, the environments, one construct example and
#: where to go next. Anything longer goes to a guide page under docs/ (one line and a link here).
README_MAX_LINES = 220
LINK = re.compile(
    r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]"  # [text], which may hold [brackets]
    r"\(\s*(?:<(?P<angled>[^>]*)>|(?P<bare>[^)\s]+))"  # (target or (<target with spaces>
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"  # an optional title)
)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto: ...


def checked_pages() -> list[Path]:
    return [*pages(), ROOT / "CONTRIBUTING.md"]


def prose(text: str) -> str:
    """``text`` without its fenced blocks and code spans (each line kept, so line numbers stay)."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if re.match(r"^\s*```", line):
            fenced = not fenced
            lines.append("")
            continue
        lines.append("" if fenced else re.sub(r"(`+).*?\1", "", line))
    return "\n".join(lines)


def links(text: str) -> list[tuple[int, str]]:
    """Every link target of a Markdown text, with its line."""
    return [
        (number, match.group("angled") if match.group("angled") is not None else match.group("bare"))
        for number, line in enumerate(prose(text).splitlines(), start=1)
        for match in LINK.finditer(line)
    ]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (not ``-`` or ``_``), spaces to ``-``."""
    text = re.sub(r"`|\*\*|__", "", heading.strip()).lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown page's headings; a repeated one gets ``-1``, ``-2`` ... as on GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in prose(text).splitlines():
        heading = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if heading is None:
            continue
        anchor = github_anchor(heading.group(1))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def broken(page: Path, root: Path = ROOT) -> list[str]:
    """The links of ``page`` that lead nowhere (or out of ``root``), as ``page:line target (why)``."""
    found: list[str] = []
    where = page.relative_to(root).as_posix()
    for number, target in links(page.read_text(encoding="utf-8")):
        if EXTERNAL.match(target):
            continue
        path_part, _, fragment = target.partition("#")
        destination = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not destination.exists():
            found.append(f"{where}:{number} {target} (no such file)")
        elif root.resolve() not in (destination, *destination.parents):
            found.append(f"{where}:{number} {target} (outside the repository)")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination.read_text()):
            found.append(f"{where}:{number} {target} (no heading with that anchor)")
    return found


@pytest.mark.parametrize("page", checked_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken(page) == []


def test_the_readme_stays_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES


def test_the_readme_links_every_guide_page_in_where_to_go_next() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("\n## Where to go next\n") :].split("\n## ")[1]
    listed = {target for _, target in links(section) if target.startswith("docs/")}
    guides = {path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md")}
    assert listed == guides


def test_the_link_reader_finds_links_and_skips_code() -> None:
    text = (
        "See [a](docs/a.md) and ![b](b.svg 'x') [c [d]](<e f.md>).\n"
        "`[not](a link)` ``[nor](this)``\n```\n[inside](a fence)\n```\n[g](h.md#i) <https://x>\n"
    )
    assert links(text) == [(1, "docs/a.md"), (1, "b.svg"), (1, "e f.md"), (6, "h.md#i")]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Quick start", "quick-start"),
        ("Console script: `training-clusters`", "console-script-training-clusters"),
        (
            "Getting GPUs: reservations, Capacity Blocks, training plans",
            "getting-gpus-reservations-capacity-blocks-training-plans",
        ),
        ("One file, five orchestrators", "one-file-five-orchestrators"),
        ("Gate your own app's CI on cdk-nag", "gate-your-own-apps-ci-on-cdk-nag"),
        ("Where things go", "where-things-go"),
        ("From deploy to a finished job", "from-deploy-to-a-finished-job"),
        ("**Bold** and snake_case", "bold-and-snake_case"),
    ],
)
def test_anchors_are_github_s(heading: str, anchor: str) -> None:
    assert github_anchor(heading) == anchor


def test_a_repeated_heading_gets_a_numbered_anchor() -> None:
    assert anchors("# A\n## B\n```\n# not a heading\n```\n## B\n") == {"a", "b", "b-1"}
    assert "a" not in anchors("```\n# a\n```\n")


def test_each_way_a_link_breaks_is_found(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "guide.md").write_text("# Guide\n## Step one\n")
    (tmp_path / "outside.md").write_text("# Outside\n")
    (root / "README.md").write_text(
        "[ok](docs/guide.md#step-one) [ok](docs/) [ok](#top) [ok](https://example.com/nowhere)\n"
        "[gone](docs/missing.md)\n[no anchor](docs/guide.md#step-two)\n[out](../outside.md)\n# Top\n"
    )
    assert broken(root / "README.md", root) == [
        "README.md:2 docs/missing.md (no such file)",
        "README.md:3 docs/guide.md#step-two (no heading with that anchor)",
        "README.md:4 ../outside.md (outside the repository)",
    ]
