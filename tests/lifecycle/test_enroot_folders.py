"""enroot's and Pyxis' folders hold no state one user can write for another (issue 40, High 2), in the sandbox.

``node_scripts/shared/training-clusters-enroot.sh`` is the one implementation HyperPod's on_create.sh and ParallelCluster's
custom action share. What enroot reads is taken from its own code (github.com/NVIDIA/enroot, v3.5.0):
``enroot.in`` loads enroot.conf, expands each value (``config::load``) and ``mkdir -p``s the cache, data and
runtime paths, which succeeds on a folder someone else made; ``src/docker.sh`` ``docker::_download_extract``
trusts a cached layer by its file name; ``src/runtime.sh`` runs ``$ENROOT_CONFIG_PATH/hooks.d``. Pyxis 0.20
(github.com/NVIDIA/pyxis, ``pyxis_slurmstepd.c`` ``enroot_create_user_runtime_dir``) accepts an existing
``<runtime_path>/<uid>``. Ownership cannot change in the sandbox (it may run unprivileged; chown is recorded):
folders other users made, and what bob can and cannot do to alice's, are shown as root on the real Slurm bed
(``tests/integration/test_enroot_real.py``).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from tests.lifecycle.sandbox import SHARED, Sandbox

SCRIPT = SHARED / "training-clusters-enroot.sh"
USERS = [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002, "gid": 2100}]
KINDS = ("runtime", "data", "cache", "tmp")
NVME = "/opt/dlami/nvme/enroot"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _worker_with_users(sandbox: Sandbox) -> Sandbox:
    sandbox.write_params(users=USERS)
    sandbox.state.joinpath("mounts").write_text(str(sandbox.path("opt/dlami/nvme")) + "\n")
    return sandbox


def test_a_worker_gets_one_folder_per_user_and_kind_and_a_conf_that_names_them(sandbox: Sandbox) -> None:
    _worker_with_users(sandbox)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    conf = sandbox.path("etc/enroot/enroot.conf").read_text().splitlines()
    paths = [line for line in conf if re.match(r"ENROOT_\w+_PATH", line)]
    assert paths == [
        f"ENROOT_RUNTIME_PATH    {NVME}/runtime/user-$(id -u)",
        f"ENROOT_DATA_PATH       {NVME}/data/user-$(id -u)",
        f"ENROOT_CACHE_PATH      {NVME}/cache/user-$(id -u)",
        f"ENROOT_TEMP_PATH       {NVME}/tmp/user-$(id -u)",
    ]  # no ENROOT_CONFIG_PATH: enroot's default, ~/.config/enroot, is in the user's own home
    assert "ENROOT_RESTRICT_DEV    no" in conf
    me = os.geteuid()
    expected = [
        "# Written by training-clusters-enroot: enroot's and Pyxis' folders, made again at every boot.",
        f"d {NVME} 0755 {me} 0 -",
    ]
    for kind in KINDS:
        expected.append(f"d {NVME}/{kind} 0755 {me} 0 -")
    expected.append(f"d /run/pyxis 0755 {me} 0 -")
    for kind in KINDS:
        # the cluster user (ubuntu: the sandbox's id answers 1000 for it, as on HyperPod's AMI) first, then the team
        expected += [
            f"d {NVME}/{kind}/user-1000 0700 1000 1000 -",
            f"d {NVME}/{kind}/user-2001 0700 2001 2001 -",
            f"d {NVME}/{kind}/user-2002 0700 2002 2100 -",
        ]
    tmpfiles = sandbox.path("etc/tmpfiles.d/training-clusters-enroot.conf")
    assert tmpfiles.read_text().splitlines() == expected
    assert _mode(tmpfiles) == 0o644
    for kind in KINDS:
        assert _mode(sandbox.path(f"{NVME}/{kind}")) == 0o755
        for uid, gid in (("2001", "2001"), ("2002", "2100")):
            folder = f"{NVME}/{kind}/user-{uid}"
            assert _mode(sandbox.path(folder)) == 0o700
            assert ["-u", "--", "alice"] in run.calls_to("id")
            assert [f"{uid}:{gid}", "--", str(sandbox.path(folder))] in run.calls_to("chown")
    assert _mode(sandbox.path("run/pyxis")) == 0o755
    assert not [
        p for p in sandbox.path("").rglob("*") if p.is_dir() and _mode(p) & 0o002 and "enroot" in str(p)
    ]


def test_a_second_run_changes_nothing(sandbox: Sandbox) -> None:
    _worker_with_users(sandbox)
    first = sandbox.run()
    before = sandbox.snapshot()

    second = sandbox.run()

    assert first.returncode == 0 and second.returncode == 0, second.output
    assert sandbox.snapshot() == before
    assert "wrote /etc/enroot/enroot.conf" in first.output
    assert "wrote /etc/enroot/enroot.conf" not in second.output


def test_the_old_world_writable_layout_is_closed(sandbox: Sandbox) -> None:
    """A node set up by the old scripts: every enroot folder 1777. The step makes them root's 0755 again."""
    _worker_with_users(sandbox)
    for kind in KINDS:
        sandbox.path(f"{NVME}/{kind}").mkdir(parents=True)
        sandbox.path(f"{NVME}/{kind}").chmod(0o1777)
    sandbox.path("run/pyxis").mkdir(parents=True)
    sandbox.path("run/pyxis").chmod(0o1777)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    for kind in KINDS:
        assert _mode(sandbox.path(f"{NVME}/{kind}")) == 0o755
    assert _mode(sandbox.path("run/pyxis")) == 0o755


# -- the script alone: refusals -------------------------------------------------------------------


def _script(
    root: Path, *arguments: str, template: str = "ENROOT_RESTRICT_DEV no\n"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *arguments],
        input=template,
        capture_output=True,
        text=True,
        env={**os.environ, "TC_ROOT": str(root)},
        check=False,
        timeout=30,
    )


BASE = ("--template", "-", "--conf", "/etc/enroot/enroot.conf", "--runtime", "/scratch/enroot/runtime",
        "--data", "/scratch/enroot/data", "--cache", "/scratch/enroot/cache", "--temp", "/scratch/enroot/tmp",
        "--pyxis-runtime", "/run/pyxis")  # fmt: skip


def test_without_users_only_roots_folders_are_made(tmp_path: Path) -> None:
    done = _script(tmp_path, *BASE)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        "training-clusters-enroot: enroot folders for 0 users (none): /scratch/enroot/runtime "
        "/scratch/enroot/data /scratch/enroot/cache /scratch/enroot/tmp and Pyxis' /run/pyxis"
    )
    assert sorted(p.name for p in (tmp_path / "scratch" / "enroot").iterdir()) == [
        "cache",
        "data",
        "runtime",
        "tmp",
    ]
    assert not list((tmp_path / "scratch" / "enroot" / "cache").iterdir())


@pytest.mark.parametrize("kind", ["runtime", "cache"])
def test_a_link_where_an_enroot_folder_goes_is_refused(tmp_path: Path, kind: str) -> None:
    (tmp_path / "scratch" / "enroot").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "scratch" / "enroot" / kind).symlink_to(tmp_path / "elsewhere")

    done = _script(tmp_path, *BASE)

    assert done.returncode == 2
    assert done.stderr == (
        f"training-clusters-enroot: error: /scratch/enroot/{kind} is a symbolic link, not a folder: remove it\n"
    )
    assert not (tmp_path / "etc" / "tmpfiles.d").exists()  # checked before anything is made


def test_a_folder_above_that_others_may_write_is_refused_unless_sticky(tmp_path: Path) -> None:
    (tmp_path / "scratch").mkdir(mode=0o777)
    (tmp_path / "scratch").chmod(0o777)

    refused = _script(tmp_path, *BASE)
    (tmp_path / "scratch").chmod(0o1777)
    sticky = _script(tmp_path, *BASE)

    assert refused.returncode == 2
    assert refused.stderr == (
        "training-clusters-enroot: error: /scratch (above an enroot folder) is writable by others (mode 777) "
        "without the sticky bit\n"
    )
    assert sticky.returncode == 0, sticky.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--user", "nobody-here"), "--user names 'nobody-here', who is no user on this node"),
        (("--user", "Alice;id"), "--user names 'Alice;id', which is no user name"),
        (("--cache", "/scratch/../etc"), "'/scratch/../etc' is not an absolute path of letters, digits, '.', '_' and '-'"),
        (("--cache", "relative"), "'relative' is not an absolute path of letters, digits, '.', '_' and '-'"),
        (("--bogus",), "unknown argument '--bogus' (expected --template, --conf, --runtime, --data, --cache, --temp, "
         "--pyxis-runtime or --user)"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_with_one_line(
    tmp_path: Path, arguments: tuple[str, ...], message: str
) -> None:
    done = _script(tmp_path, *BASE, *arguments)

    assert done.returncode == 2
    assert done.stderr == f"training-clusters-enroot: error: {message}\n"


@pytest.mark.parametrize("missing", ["--template", "--conf", "--pyxis-runtime", "--temp"])
def test_every_folder_and_file_is_required(tmp_path: Path, missing: str) -> None:
    index = BASE.index(missing)
    done = _script(tmp_path, *BASE[:index], *BASE[index + 2 :])

    assert done.returncode == 2
    expected = (
        "--temp is required" if missing == "--temp" else "--template, --conf and --pyxis-runtime are required"
    )
    assert done.stderr == f"training-clusters-enroot: error: {expected}\n"


def test_the_templates_own_path_lines_are_replaced(tmp_path: Path) -> None:
    template = (
        "ENROOT_RUNTIME_PATH         /run/enroot/runtime/user-$(id -u)\n"
        "ENROOT_CONFIG_PATH          /var/enroot/config/user-$(id -u)\n"
        "ENROOT_CACHE_PATH           /var/enroot/cache/group-$(id -g)\n"
        "#ENROOT_TEMP_PATH           ${TMPDIR:-/tmp}\n"
        "ENROOT_RESTRICT_DEV        no\n"
    )

    done = _script(tmp_path, *BASE, template=template)

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "etc" / "enroot" / "enroot.conf").read_text().splitlines() == [
        "#ENROOT_TEMP_PATH           ${TMPDIR:-/tmp}",
        "ENROOT_RESTRICT_DEV        no",
        "# Written by training-clusters-enroot: one folder per user, made by root (0700, the user's);",
        "# ENROOT_CONFIG_PATH is enroot's default, ~/.config/enroot, in the user's own home.",
        "ENROOT_RUNTIME_PATH    /scratch/enroot/runtime/user-$(id -u)",
        "ENROOT_DATA_PATH       /scratch/enroot/data/user-$(id -u)",
        "ENROOT_CACHE_PATH      /scratch/enroot/cache/user-$(id -u)",
        "ENROOT_TEMP_PATH       /scratch/enroot/tmp/user-$(id -u)",
    ]
