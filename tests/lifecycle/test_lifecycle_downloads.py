"""What the lifecycle scripts download and run as root (enroot's packages, pyxis' and Slurm's sources) is
checked against training_clusters.json's ``download_sha256`` when pinned there: other bytes fail the step
with one line and are deleted; an unpinned download goes on with a warning saying nothing verified it."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest

from tests.lifecycle.sandbox import SCRIPTS, Sandbox
from training_clusters.model.releases import (
    BOOT_DOWNLOADS,
    ENROOT_VERSION,
    HYPERPOD_DCGM_EXPORTER_IMAGE,
    PYXIS_VERSION,
)

ENROOT = "https://github.com/NVIDIA/enroot/releases/download/v3.5.0/enroot_3.5.0-1_amd64.deb"
ENROOT_CAPS = "https://github.com/NVIDIA/enroot/releases/download/v3.5.0/enroot+caps_3.5.0-1_amd64.deb"


def served(url: str) -> str:
    """The SHA-256 of what the sandbox's curl serves for URL (its stub writes one line naming it)."""
    return hashlib.sha256(f"downloaded from {url}\n".encode()).hexdigest()


def test_pinned_downloads_are_verified(sandbox: Sandbox) -> None:
    sandbox.write_params(download_sha256={ENROOT: served(ENROOT), ENROOT_CAPS: served(ENROOT_CAPS).upper()})

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert f"verified {ENROOT} (sha256 {served(ENROOT)})" in run.log
    assert f"verified {ENROOT_CAPS} (sha256 {served(ENROOT_CAPS)})" in run.log
    assert f"{ENROOT} is not verified" not in run.log


def test_a_download_with_other_bytes_fails_the_step_and_is_deleted(sandbox: Sandbox) -> None:
    wrong = "0" * 64
    sandbox.write_params(download_sha256={ENROOT: wrong})

    run = sandbox.run()

    assert run.returncode != 0
    assert run.output.count("FAILED step") == 1
    assert run.output.rstrip().splitlines()[-1].endswith("FAILED step 'enroot-pyxis' (exit 1)")
    assert (
        f"{ENROOT} has sha256 {served(ENROOT)}, expected {wrong} (download_sha256): refusing to use it"
        in (run.output)
    )
    assert not list(sandbox.path("").rglob("enroot_3.5.0-1_amd64.deb"))
    assert not [call for call in run.calls_to("apt-get") if any(a.endswith(".deb") for a in call)]


def test_an_unpinned_download_says_nothing_verified_it(sandbox: Sandbox) -> None:
    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert f"{ENROOT} is not verified: no download_sha256 entry pins it" in run.log


@pytest.mark.parametrize(
    ("pins", "message"),
    [
        (["x"], "download_sha256 must map https:// URLs to SHA-256 digests, got ['x']"),
        ({"http://example.com/a.deb": "0" * 64}, "download_sha256 keys must be https:// URLs without spaces"),
        ({ENROOT: "abc"}, f"download_sha256[{ENROOT!r}] must be 64 hexadecimal digits, got 'abc'"),
    ],
)
def test_bad_pins_fail_preflight(sandbox: Sandbox, pins: Any, message: str) -> None:
    sandbox.write_params(download_sha256=pins)

    run = sandbox.run()

    assert run.returncode != 0
    assert message in run.output
    assert "step 'apt-update' started" not in run.log


def _table_unpinned_urls() -> set[str]:
    """The URLs releases.BOOT_DOWNLOADS (docs/downloads.md) says tc_download fetches unpinned by default
    (placeholders filled in as the sandbox's node has them: amd64, Slurm 24.11.1)."""
    urls = set()
    for row in BOOT_DOWNLOADS:
        if "tc_download" not in row.call:
            continue
        url = row.url.replace("<arch>", "amd64").replace("<installed version>", "24.11.1")
        urls |= {url.replace("enroot[+caps]_", "enroot_"), url.replace("enroot[+caps]_", "enroot+caps_")}
    return urls


def test_the_table_names_every_download_left_unpinned(sandbox: Sandbox) -> None:
    """Every download of a worker with everything on (enroot, pyxis, pam_slurm_adopt built from source, a GPU
    without nvidia-container-cli) warns that nothing verified it, and the table lists exactly those."""
    sandbox.write_params(enable_pam_slurm_adopt=True)
    sandbox.remove_command("nvidia-container-cli")

    run = sandbox.run(STUB_GPU="1")

    assert run.returncode == 0, run.output
    import re

    unverified = set(re.findall(r"(https://\S+) is not verified: no download_sha256 entry pins it", run.log))
    assert unverified == _table_unpinned_urls()


@pytest.mark.parametrize(
    ("script", "variable", "pinned"),
    [
        ("lib/enroot_pyxis.sh", "TC_ENROOT_VERSION", ENROOT_VERSION),
        ("lib/enroot_pyxis.sh", "TC_PYXIS_VERSION", PYXIS_VERSION),
        ("lib/observability.sh", "TC_DCGM_EXPORTER_IMAGE", HYPERPOD_DCGM_EXPORTER_IMAGE),
    ],
)
def test_the_scripts_install_what_releases_pins(script: str, variable: str, pinned: str) -> None:
    """One place names what the nodes install: a version changed in the script or in releases.py alone fails."""
    text = (SCRIPTS / script).read_text()
    (default,) = re.findall(rf'^{variable}="\$\{{{variable}:-([^}}]*)\}}"$', text, flags=re.MULTILINE)
    assert default == pinned
