"""The one table of what node scripts download as root at boot (``releases.BOOT_DOWNLOADS``): the page it renders
is the page shipped, and every download line of every node script is a row of it."""

from __future__ import annotations

import re
from pathlib import Path

from training_clusters.model import releases
from training_clusters.model.releases import BOOT_DOWNLOADS, render_boot_downloads

PACKAGE = Path(releases.__file__).parents[1]
ROOT = PACKAGE.parent
#: Every file whose code runs on a node as root: HyperPod's lifecycle scripts, ParallelCluster's custom actions,
#: the scripts both run (users, the metadata guard, enroot's folders) and the PCS construct (its user data).
NODE_FILES = [
    *sorted((PACKAGE / "node_scripts" / "hyperpod").rglob("*.sh")),
    *sorted((PACKAGE / "node_scripts" / "parallelcluster").glob("*.sh")),
    *sorted((PACKAGE / "node_scripts" / "shared").glob("*.sh")),
    PACKAGE / "constructs" / "pcs" / "cluster.py",
]
#: A line that fetches something: our download helper, curl, wget, apt keys, gpg, a local .deb, an image pull.
DOWNLOAD = re.compile(r"\b(tc_download |curl |wget |apt-key|gpg |dpkg -i|docker (run|pull) |git clone)")


def download_lines() -> set[tuple[str, str]]:
    found = set()
    for path in NODE_FILES:
        for line in path.read_text().splitlines():
            text = line.strip()
            code = re.sub(r"\s#\s.*$", "", text)  # an inline comment is not a download
            if text.startswith("#") or not DOWNLOAD.search(code):
                continue
            if text.startswith("tc_download() {") or text.startswith("curl -fsSL --retry 5"):
                continue  # the helper itself (lib/common.sh), whose every call is a row
            found.add((path.relative_to(PACKAGE).as_posix(), text))
    return found


def test_the_shipped_page_is_the_table() -> None:
    assert (ROOT / "docs" / "downloads.md").read_text() == render_boot_downloads()


def test_every_download_line_of_the_node_scripts_is_a_row() -> None:
    rows = {(d.script, d.call) for d in BOOT_DOWNLOADS if d.call}
    assert download_lines() == rows


def test_the_download_helper_is_where_the_table_says_pins_are_checked() -> None:
    common = (PACKAGE / "node_scripts" / "hyperpod" / "lib" / "common.sh").read_text()
    assert 'curl -fsSL --retry 5 --retry-delay 5 --connect-timeout 20 -o "$dest" "$url"' in common
    assert "(download_sha256): refusing to use it" in common


def test_each_row_says_one_of_the_three_ways_and_defaults_match_the_scripts() -> None:
    assert {d.verified for d in BOOT_DOWNLOADS} == {releases.TRUSTED_ON_FIRST_USE, releases.SIGNED}
    enroot = (PACKAGE / "node_scripts" / "hyperpod" / "lib" / "enroot_pyxis.sh").read_text()
    assert f'TC_ENROOT_VERSION="${{TC_ENROOT_VERSION:-{releases.ENROOT_VERSION}}}"' in enroot
    assert f'TC_PYXIS_VERSION="${{TC_PYXIS_VERSION:-{releases.PYXIS_VERSION}}}"' in enroot
    for row in BOOT_DOWNLOADS:
        if row.url.startswith("https://") and "<" not in row.url and "[" not in row.url:
            assert (
                row.url.replace(releases.PYXIS_VERSION, "${TC_PYXIS_VERSION}")
                in (PACKAGE / row.script).read_text()
            ), row.what
