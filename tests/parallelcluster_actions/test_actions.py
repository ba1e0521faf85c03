"""The ParallelCluster custom actions run for real on a fake root, with faked account and Slurm commands.

`users.sh` and `pyxis.sh` run under bash with ``TC_ROOT`` pointing at a temporary folder and a PATH that holds
the stub (``stub.sh``, a fake getent/groupadd/useradd/usermod/chown/ssh-keygen/scontrol over the fake root's
``/etc/passwd`` and ``/etc/group``, a runuser that runs the command as the test but marked as the user's, and
recorded pass-throughs of the file tools that write) plus the real coreutils they use, so a second run sees
what the first did: idempotency is checked, not assumed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.lifecycle.sandbox import shellcheck_path
from training_clusters.parallelcluster_actions import ACTIONS_DIR

STUB = Path(__file__).resolve().parent / "stub.sh"
STUBBED = ("getent", "groupadd", "useradd", "usermod", "chown", "ssh-keygen", "scontrol", "runuser")
RECORDED = ("chmod", "cp", "mkdir", "mv", "tee")  # recorded by the stub, then run from TC_TOOLS
REAL = ("awk", "basename", "cat", "cmp", "cut", "head", "mktemp", "realpath", "rm", "sed", "test", "tr")
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAliceLaptop alice@laptop"
BASE_PASSWD = "root:x:0:0::/root:/bin/bash\nec2-user:x:1000:1000::/home/ec2-user:/bin/bash\n"
BASE_GROUP = "root:x:0:\nec2-user:x:1000:\n"
TEAM = [
    "--home-root", "/shared/home",
    "--user", "alice:2001:2001:ml=3000,ops=3001",
    "--user", "bob:2002:2100:ml=3000",
    "--key", f"alice:{KEY}",
]  # fmt: skip


class Node:
    """A fake node: its root folder, PATH of stubs and real tools, and the node type ParallelCluster gives."""

    def __init__(self, root: Path, node_type: str) -> None:
        self.root = root
        (root / "etc" / "parallelcluster").mkdir(parents=True)
        (root / "etc" / "parallelcluster" / "cfnconfig").write_text(f"cfn_node_type={node_type}\n")
        (root / "etc" / "passwd").write_text(BASE_PASSWD)
        (root / "etc" / "group").write_text(BASE_GROUP)
        (root / "etc" / "skel").mkdir()
        (root / "etc" / "skel" / ".bashrc").write_text("# from /etc/skel\n")
        (root / "shared" / "home").mkdir(parents=True)
        self.bin = root.parent / f"{root.name}-bin"
        self.tools = root.parent / f"{root.name}-tools"
        self.bin.mkdir()
        self.tools.mkdir()
        for name in (*STUBBED, *RECORDED):
            (self.bin / name).symlink_to(STUB)
        for name in (*REAL, *RECORDED):
            found = shutil.which(name)
            assert found, name
            (self.tools if name in RECORDED else self.bin).joinpath(name).symlink_to(found)
        self.homes = root / "shared" / "home"

    def run(self, script: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": str(self.bin),
            "TC_ROOT": str(self.root),
            "TC_TOOLS": str(self.tools),
            "HOME": str(self.root),
        }
        bash = shutil.which("bash")
        assert bash
        return subprocess.run(
            [bash, str(ACTIONS_DIR / script), *args], env=env, capture_output=True, text=True, check=False
        )

    def calls(self, *tools: str) -> list[str]:
        """The recorded calls, in order; only those of `tools` when given."""
        log = self.root / "calls.log"
        calls = log.read_text().splitlines() if log.exists() else []
        return [c for c in calls if not tools or _tool(c) in tools]

    def changes(self) -> list[str]:
        """The calls that write: all but look-ups and runuser itself (the command it runs is recorded too)."""
        return [c for c in self.calls() if _tool(c) not in ("getent", "runuser")]

    def by_root(self) -> list[str]:
        """The calls that write, made as root (not through runuser)."""
        return [c for c in self.changes() if not c.startswith("[")]

    def inside_a_home(self, call: str) -> bool:
        """Whether a call names a path inside one of the homes (the home itself is not inside it)."""
        paths = [Path(word) for word in call.split() if word.startswith("/")]
        return any(p.is_relative_to(self.homes) and len(p.relative_to(self.homes).parts) > 1 for p in paths)

    def snapshot(self) -> dict[str, str]:
        return {
            str(p.relative_to(self.root)): p.read_text()
            for p in sorted(self.root.rglob("*"))
            if p.is_file() and p.name != "calls.log"
        }


def _tool(call: str) -> str:
    """The command of a recorded call: its first word, after the user it ran as ("[alice] mkdir ...")."""
    words = call.split()
    return words[1] if words[0].startswith("[") else words[0]


@pytest.fixture
def head(tmp_path: Path) -> Node:
    return Node(tmp_path / "head", "HeadNode")


@pytest.fixture
def compute(tmp_path: Path) -> Node:
    return Node(tmp_path / "compute", "ComputeFleet")


def test_the_head_node_creates_groups_users_and_homes_with_the_given_ids(head: Node) -> None:
    result = head.run("users.sh", *TEAM)
    assert result.returncode == 0, result.stderr
    group = (head.root / "etc" / "group").read_text()
    assert "alice:x:2001:\n" in group and "bob:x:2100:\n" in group
    assert "ml:x:3000:alice,bob\n" in group and "ops:x:3001:alice\n" in group
    passwd = (head.root / "etc" / "passwd").read_text()
    assert "alice:x:2001:2001::/shared/home/alice:/bin/bash\n" in passwd
    assert "bob:x:2002:2100::/shared/home/bob:/bin/bash\n" in passwd
    home = head.root / "shared" / "home" / "alice"
    assert oct(home.stat().st_mode & 0o777) == "0o700"
    assert (home / ".bashrc").read_text() == "# from /etc/skel\n"
    assert oct((home / ".ssh").stat().st_mode & 0o777) == "0o700"
    keys = (home / ".ssh" / "authorized_keys").read_text().splitlines()
    assert keys == [
        "# BEGIN training-clusters managed keys",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIClusterKey generated",
        KEY,
        "# END training-clusters managed keys",
    ]
    assert oct((home / ".ssh" / "authorized_keys").stat().st_mode & 0o777) == "0o600"
    assert (head.root / "shared" / "home" / "bob" / ".ssh" / "id_ed25519").exists()


def test_a_second_run_changes_nothing(head: Node) -> None:
    assert head.run("users.sh", *TEAM).returncode == 0
    before, made = head.snapshot(), len(head.changes())
    again = head.run("users.sh", *TEAM)
    assert again.returncode == 0, again.stderr
    assert head.snapshot() == before
    assert len(head.changes()) == made, head.changes()[made:]


def test_compute_nodes_get_the_same_accounts_and_never_write_the_shared_homes(compute: Node) -> None:
    result = compute.run("users.sh", *TEAM)
    assert result.returncode == 0, result.stderr
    assert (
        "alice:x:2001:2001::/shared/home/alice:/bin/bash\n" in (compute.root / "etc" / "passwd").read_text()
    )
    assert list((compute.root / "shared" / "home").iterdir()) == []
    assert {_tool(c) for c in compute.changes()} == {"groupadd", "useradd", "usermod"}
    assert compute.calls("runuser") == []


def test_keys_added_by_the_user_survive_and_only_the_managed_block_changes(head: Node) -> None:
    assert head.run("users.sh", *TEAM).returncode == 0
    keys = head.root / "shared" / "home" / "alice" / ".ssh" / "authorized_keys"
    keys.write_text(keys.read_text() + "ssh-rsa AAAAB3Nza own@desk\n")
    new_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINewKey alice@new"
    args = [*TEAM[:-1], f"alice:{new_key}"]
    assert head.run("users.sh", *args).returncode == 0
    lines = keys.read_text().splitlines()
    assert "ssh-rsa AAAAB3Nza own@desk" in lines and new_key in lines and KEY not in lines


def test_root_creates_a_home_and_everything_inside_it_is_done_as_its_user(head: Node) -> None:
    assert head.run("users.sh", *TEAM).returncode == 0
    home = head.homes / "alice"
    ssh = home / ".ssh"
    assert [c for c in head.by_root() if str(head.homes) in c] == [
        f"mkdir -p {head.homes}",
        f"mkdir -m 0700 {home}",
        f"chown 2001:2001 {home}",
        f"mkdir -p {head.homes}",
        f"mkdir -m 0700 {head.homes / 'bob'}",
        f"chown 2002:2100 {head.homes / 'bob'}",
    ]
    assert not [c for c in head.by_root() if head.inside_a_home(c)]
    as_alice = [c.removeprefix("runuser -u alice -- ") for c in head.calls("runuser") if "-u alice" in c]
    assert f"cp -R {head.root}/etc/skel/. {home}" in as_alice
    assert f"mkdir -m 0700 {ssh}" in as_alice
    assert f"ssh-keygen -q -t ed25519 -N  -C alice@cluster -f {ssh}/id_ed25519" in as_alice
    assert f"[alice] ssh-keygen -q -t ed25519 -N  -C alice@cluster -f {ssh}/id_ed25519" in head.calls()
    staged = next(c.split()[1] for c in as_alice if c.startswith("tee "))
    assert staged.startswith(f"{ssh}/tmp.")
    assert as_alice[-2:] == [f"chmod 0600 {staged}", f"mv -fT {staged} {ssh}/authorized_keys"]


def test_a_planted_link_to_another_ssh_directory_fails_the_bootstrap_and_nothing_is_written_through_it(
    head: Node,
) -> None:
    # The audit's reproducer: alice's retained home, her ~/.ssh a link to root's. The stub's runuser refuses
    # what the kernel would refuse alice; the rest of the guarantee is that root writes nothing in a home.
    root_ssh = head.root / "root" / ".ssh"
    root_ssh.mkdir(parents=True)
    root_keys = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRoot admin@desk\n"
    (root_ssh / "authorized_keys").write_text(root_keys)
    (head.homes / "alice").mkdir(mode=0o700)
    (head.homes / "alice" / ".ssh").symlink_to(root_ssh)
    result = head.run("users.sh", *TEAM)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("users.sh")]
    assert errors == ["users.sh: error: could not create /shared/home/alice/.ssh as alice"]
    assert [p.name for p in root_ssh.iterdir()] == ["authorized_keys"]
    assert (root_ssh / "authorized_keys").read_text() == root_keys
    assert not [c for c in head.by_root() if head.inside_a_home(c)]


def test_a_home_that_is_a_symbolic_link_is_refused(head: Node) -> None:
    elsewhere = head.root / "root"
    elsewhere.mkdir()
    (head.homes / "alice").symlink_to(elsewhere)
    result = head.run("users.sh", *TEAM)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "users.sh: error: the home of alice, /shared/home/alice, is a symbolic link: refusing to use it"
    ]
    assert list(elsewhere.iterdir()) == []
    assert head.calls("runuser", "chown", "ssh-keygen") == []


@pytest.mark.parametrize(
    ("existing", "message"),
    [
        ("passwd", "users.sh: error: user alice exists with uid 1500, not 2001"),
        ("group", "users.sh: error: gid 3000 of group ml already belongs to group video"),
    ],
)
def test_ids_taken_differently_on_the_node_fail_the_bootstrap(
    head: Node, existing: str, message: str
) -> None:
    if existing == "passwd":
        with (head.root / "etc" / "passwd").open("a") as f:
            f.write("alice:x:1500:1500::/home/alice:/bin/bash\n")
        with (head.root / "etc" / "group").open("a") as f:
            f.write("alice:x:2001:\n")
    else:
        with (head.root / "etc" / "group").open("a") as f:
            f.write("video:x:3000:\n")
    result = head.run("users.sh", *TEAM)
    assert result.returncode == 1
    assert message in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--user", "alice:2001:2001"], "--home-root must be an absolute path, got ''"),
        (["--home-root", "/shared", "--user", "Alice:x:1"], "--user must be NAME:UID:GID[:GROUP=GID,...]"),
        (["--home-root", "/shared", "--frobnicate"], "unknown argument '--frobnicate'"),
    ],
)
def test_bad_arguments_are_clear_errors(head: Node, args: list[str], message: str) -> None:
    result = head.run("users.sh", *args)
    assert result.returncode == 1
    assert message in result.stderr


# --------------------------------------------------------------------------------------------------
# pyxis.sh

EXAMPLES = {
    "enroot/enroot.conf": "ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)\n",
    "spank/plugstack.conf": "include /opt/slurm/etc/plugstack.conf.d/*\n",
    "pyxis/pyxis.conf": "required /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis\n",
}


def _with_examples(node: Node) -> Node:
    for relative, text in EXAMPLES.items():
        path = node.root / "opt" / "parallelcluster" / "examples" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (node.root / "opt" / "slurm" / "etc").mkdir(parents=True)
    return node


def test_the_head_node_enables_pyxis_in_the_shared_slurm_configuration_once(head: Node) -> None:
    _with_examples(head)
    first = head.run("pyxis.sh")
    assert first.returncode == 0, first.stderr
    etc = head.root / "opt" / "slurm" / "etc"
    assert (etc / "plugstack.conf").read_text() == EXAMPLES["spank/plugstack.conf"]
    assert sorted(p.name for p in (etc / "plugstack.conf.d").iterdir()) == ["pyxis.conf"]
    assert not [p for p in etc.iterdir() if p.name.startswith("tmp.")]  # nothing staged is left behind
    assert (head.root / "etc" / "enroot" / "enroot.conf").read_text() == EXAMPLES["enroot/enroot.conf"]
    for runtime in ("run/enroot", "var/enroot", "run/pyxis"):
        assert oct((head.root / runtime).stat().st_mode & 0o7777) == "0o1777", runtime
    assert head.calls(*STUBBED) == ["scontrol reconfigure"]
    before = head.snapshot()
    second = head.run("pyxis.sh")
    assert second.returncode == 0 and head.snapshot() == before
    assert head.calls(*STUBBED) == ["scontrol reconfigure"]  # not again: nothing changed


def test_compute_nodes_configure_enroot_and_never_touch_the_shared_slurm_directory(compute: Node) -> None:
    _with_examples(compute)
    result = compute.run("pyxis.sh")
    assert result.returncode == 0, result.stderr
    assert list((compute.root / "opt" / "slurm" / "etc").iterdir()) == []  # the race of issue #6459
    assert (compute.root / "etc" / "enroot" / "enroot.conf").exists()
    assert compute.calls(*STUBBED) == []


def test_an_image_without_the_examples_fails_clearly(head: Node) -> None:
    result = head.run("pyxis.sh")
    assert result.returncode == 1
    assert "/opt/parallelcluster/examples/enroot/enroot.conf is missing" in result.stderr


def test_the_actions_are_shellcheck_clean() -> None:
    scripts = sorted(ACTIONS_DIR.glob("*.sh"))
    assert {p.name for p in scripts} == {"users.sh", "pyxis.sh"}
    result = subprocess.run(
        [shellcheck_path(), "-x", "--severity=style", *map(str, scripts), str(STUB)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout
    assert all(os.access(p, os.X_OK) for p in scripts)
