"""``ubuntu``'s home stays off FSx, with the real ``useradd``, ``usermod`` and ``getent`` (``make integration``).

A copy-on-write overlay of the Debian root ``build_slurm_root.sh`` builds, entered with ``chroot``: the lifecycle
scripts' ``admin-home`` step (``lib/shared_home.sh``) runs there as on a node (``TC_ROOT`` empty), against the
real shadow tools, on a node set up fresh and on one an earlier version left with ubuntu's home on FSx.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.slurm_bed import slurm_root
from training_clusters.node_scripts import lifecycle_bundle

pytestmark = pytest.mark.integration

LIFECYCLE = lifecycle_bundle()
STEP = (
    "set -euo pipefail; cd /opt/lifecycle; source lib/common.sh; source lib/shared_home.sh; "
    "TC_FSX_MOUNT_DIR=/fsx; TC_CURRENT_STEP=admin-home; tc_setup_admin_home"
)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Path]:
    root = slurm_root()
    if os.geteuid() != 0 or shutil.which("chroot") is None:
        pytest.skip("needs root and chroot")
    if not (root / ".tc-slurm-root-ready").is_file():
        pytest.skip(
            f"no Slurm root at {root}: run `make integration` (tests/integration/build_slurm_root.sh)"
        )
    parts = {name: tmp_path / name for name in ("upper", "work", "merged")}
    for folder in parts.values():
        folder.mkdir()
    options = f"lowerdir={root},upperdir={parts['upper']},workdir={parts['work']}"
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", options, str(parts["merged"])], check=True)
    try:
        merged = parts["merged"]
        shutil.copytree(LIFECYCLE, merged / "opt" / "lifecycle")
        (merged / "fsx").mkdir()
        yield merged
    finally:
        subprocess.run(["umount", str(parts["merged"])], check=True)


def _in(node: Path, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["chroot", str(node), "/bin/bash", "-c", command],
        capture_output=True,
        text=True,
        check=False,
        env={
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "TC_LOG_FILE": "/dev/null",
        },
    )


def _home(node: Path) -> str:
    return _in(node, "getent passwd ubuntu | cut -d: -f6").stdout.strip()


def test_a_fresh_node_keeps_ubuntu_on_its_own_disk(node: Path) -> None:
    made = _in(node, "useradd --create-home --home-dir /home/ubuntu --shell /bin/bash ubuntu")
    assert made.returncode == 0, made.stderr

    run = _in(node, STEP)

    assert run.returncode == 0, run.stdout + run.stderr
    assert (
        "home of ubuntu stays /home/ubuntu on this node's disk (nothing of ubuntu's is on FSx)" in run.stdout
    )
    assert _home(node) == "/home/ubuntu"
    assert list((node / "fsx").iterdir()) == []


def test_a_node_an_earlier_version_left_on_fsx_is_brought_back(node: Path) -> None:
    made = _in(
        node,
        "useradd --create-home --home-dir /fsx/ubuntu --shell /bin/bash ubuntu && "
        "install -d -o ubuntu -m 700 /fsx/ubuntu/.ssh && echo key > /fsx/ubuntu/.ssh/id_ed25519",
    )
    assert made.returncode == 0, made.stderr
    assert _home(node) == "/fsx/ubuntu"

    first = _in(node, STEP)
    second = _in(node, STEP)

    assert first.returncode == second.returncode == 0, first.stdout + first.stderr + second.stderr
    assert _home(node) == "/home/ubuntu"
    home = node / "home" / "ubuntu"
    uid = int(_in(node, "id -u ubuntu").stdout)
    assert (home.stat().st_uid, oct(home.stat().st_mode & 0o777)) == (uid, "0o750")
    assert "it is /home/ubuntu on this node's disk now. /fsx/ubuntu is left in place" in first.stdout
    assert (node / "fsx" / "ubuntu" / ".ssh" / "id_ed25519").read_text() == "key\n"  # kept, named
    assert "stays /home/ubuntu" in second.stdout  # the second run changes nothing
