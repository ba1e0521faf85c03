"""The ParallelCluster custom actions run for real on a fake root, with faked account and Slurm commands.

`users.sh` runs under bash with ``TC_ROOT`` pointing at a temporary folder and a PATH that holds the stub
(``stub.sh``, a fake getent/groupadd/useradd/usermod/chown/ssh-keygen over the fake root's ``/etc/passwd`` and
``/etc/group``, a runuser that runs the command as the test but marked as the user's, and recorded pass-throughs
of the file tools that write) plus the real coreutils it uses. `pyxis.sh` runs with exactly the PATH
ParallelCluster gives custom actions (:data:`PARALLELCLUSTER_PATH`: the real coreutils, nothing of Slurm's) and
the stub as ``scontrol`` only where ParallelCluster installs it, ``/opt/slurm/bin`` of the fake root. A second
run sees what the first did: idempotency is checked, not assumed.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from training_clusters.node_scripts import SHARED_DIR
from training_clusters.node_scripts.parallelcluster import ACTIONS_DIR, ENROOT_FOLDERS, SHARED_SCRIPTS
from training_clusters.node_scripts.parallelcluster.topology import __file__ as _topology_file
from training_clusters.stacks.parallelcluster import enroot_args

STUB = Path(__file__).resolve().parent / "stub.sh"
#: Each script the stack uploads to the actions bucket, by its name there: this folder's and the ones shared with
#: HyperPod's lifecycle scripts (node_scripts/shared/: users.sh, the metadata guard, enroot's folders).
BUCKET = {
    **{path.name: path for path in ACTIONS_DIR.glob("*.sh")},
    **{name: SHARED_DIR / name for name in SHARED_SCRIPTS},
}
TOPOLOGY_MODULE = Path(_topology_file)
#: The PATH of every ParallelCluster custom action (OnNodeStart, OnNodeConfigured, OnNodeUpdated): the node's user
#: data exports it before cfn-init, whose commands run /opt/parallelcluster/scripts/fetch_and_run, and the
#: cookbook's custom_action_executor.py hands its own environment to the script. From github.com/aws/
#: aws-parallelcluster, cli/src/pcluster/resources/head_node/user_data.sh (the same line in compute_node/ and
#: login_node/user_data.sh). Slurm's /opt/slurm/bin is not on it: only login shells add it (/etc/profile.d/slurm.sh).
PARALLELCLUSTER_PATH = "/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin:/opt/aws/bin"
#: Where ParallelCluster installs Slurm's commands (the cookbook's node['cluster']['slurm']['install_dir'],
#: github.com/aws/aws-parallelcluster-cookbook cookbooks/aws-parallelcluster-environment/attributes/environment.rb).
SLURM_BIN = "opt/slurm/bin"
SLURM_COMMANDS = ("scontrol",)
STUBBED = ("getent", "id", "groupadd", "useradd", "usermod", "chown", "ssh-keygen", "runuser")
RECORDED = ("chmod", "cp", "mkdir", "mv", "tee")  # recorded by the stub, then run from TC_TOOLS
REAL = (
    "awk",
    "basename",
    "cat",
    "cmp",
    "cut",
    "grep",
    "head",
    "mktemp",
    "realpath",
    "rm",
    "sed",
    "stat",
    "test",
    "tr",
)
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
        # cfnconfig.erb (cookbook aws-parallelcluster-environment/templates/init/), the keys the actions read
        (root / "etc" / "parallelcluster" / "cfnconfig").write_text(
            f"cfn_node_type={node_type}\ncfn_cluster_user=ec2-user\n"
        )
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
        (root / SLURM_BIN).mkdir(parents=True)
        for name in SLURM_COMMANDS:
            (root / SLURM_BIN / name).symlink_to(STUB)
        for name in (*REAL, *RECORDED):
            found = shutil.which(name)
            assert found, name
            (self.tools if name in RECORDED else self.bin).joinpath(name).symlink_to(found)
        self.homes = root / "shared" / "home"

    def run(self, script: str, *args: str, **switches: str) -> subprocess.CompletedProcess[str]:
        """Run an action with the stubs first on PATH (for users.sh, whose account tools must be faked);
        ``switches`` are the stub's failure switches (``STUB_USERADD_FAIL="bob"``: see stub.sh)."""
        return self._run(script, args, path=str(self.bin), switches=switches)

    def run_as_parallelcluster(self, script: str, *args: str) -> subprocess.CompletedProcess[str]:
        """Run an action with exactly ParallelCluster's PATH; Slurm's commands only in the fake /opt/slurm/bin."""
        on_path = [c for c in SLURM_COMMANDS if shutil.which(c, path=PARALLELCLUSTER_PATH)]
        assert not on_path, f"{on_path} on ParallelCluster's PATH here: the test would prove nothing"
        return self._run(script, args, path=PARALLELCLUSTER_PATH)

    def _run(
        self, script: str, args: tuple[str, ...], *, path: str, switches: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": path,
            "TC_ROOT": str(self.root),
            "TC_TOOLS": str(self.tools),
            "HOME": str(self.root),
            **(switches or {}),
        }
        bash = shutil.which("bash")
        assert bash
        return subprocess.run(
            [bash, str(BUCKET[script]), *args], env=env, capture_output=True, text=True, check=False
        )

    def run_enroot_action(self, *names: str) -> subprocess.CompletedProcess[str]:
        """training-clusters-enroot.sh (shared with the lifecycle scripts) with the stack's arguments."""
        env = {
            "PATH": str(self.bin),
            "TC_ROOT": str(self.root),
            "TC_TOOLS": str(self.tools),
            "HOME": str(self.root),
        }
        return subprocess.run(
            [shutil.which("bash") or "bash", str(ENROOT_FOLDERS), *enroot_args(list(names))],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip

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
    assert f"ssh-keygen -q -t ed25519 -N  -C alice@training-clusters -f {ssh}/id_ed25519" in as_alice
    assert (
        f"[alice] ssh-keygen -q -t ed25519 -N  -C alice@training-clusters -f {ssh}/id_ed25519" in head.calls()
    )
    staged = next(c.split()[1] for c in as_alice if c.startswith("tee "))
    assert staged.startswith(f"{ssh}/tmp.")
    assert as_alice[-2:] == [f"chmod 0600 {staged}", f"mv -fT {staged} {ssh}/authorized_keys"]


def test_a_planted_link_to_another_ssh_directory_fails_the_bootstrap_and_nothing_is_written_through_it(
    head: Node,
) -> None:
    # The audit's reproducer: alice's retained home, her ~/.ssh a link to root's. users.sh refuses the link
    # outright (the stub's runuser would refuse, as the kernel would, what lies behind it; see the next test); the
    # rest of the guarantee is that root writes nothing in a home.
    root_ssh = head.root / "root" / ".ssh"
    root_ssh.mkdir(parents=True)
    root_keys = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRoot admin@desk\n"
    (root_ssh / "authorized_keys").write_text(root_keys)
    (head.homes / "alice").mkdir(mode=0o700)
    (head.homes / "alice" / ".ssh").symlink_to(root_ssh)
    result = head.run("users.sh", *TEAM)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("users.sh")]
    assert errors == [
        "users.sh: error: /shared/home/alice/.ssh of alice is a symbolic link: refusing to use it"
    ]
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
    ("passwd", "message"),
    [
        (
            "alice:x:2001:100::/shared/home/alice:/bin/bash",
            "users.sh: error: user alice exists with primary gid 100, not 2001: the users setting and this node"
            " disagree (change the gid in the setting, or the user on the node: usermod --gid 2001 alice)",
        ),
        (
            "alice:x:2001:2001::/home/alice:/bin/bash",
            "users.sh: error: user alice exists with home /home/alice, not /shared/home/alice: the users setting and"
            " this node disagree (usermod --home /shared/home/alice alice on the node, once the user runs nothing)",
        ),
    ],
    ids=["primary-gid", "home"],
)
@pytest.mark.parametrize("node", ["head", "compute"])
def test_a_user_whose_group_or_home_differs_fails_the_bootstrap_unchanged(
    request: pytest.FixtureRequest, node: str, passwd: str, message: str
) -> None:
    """The same rule as HyperPod's users step (one script): an account that disagrees is reported, not changed;
    on a compute node too, which writes no home."""
    where: Node = request.getfixturevalue(node)
    with (where.root / "etc" / "passwd").open("a") as f:
        f.write(passwd + "\n")
    with (where.root / "etc" / "group").open("a") as f:
        f.write("alice:x:2001:\n")
    result = where.run("users.sh", *TEAM)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [message]
    assert [c for c in where.changes() if _tool(c) in ("useradd", "usermod")] == []


#: the bootstrap must end with, and the account calls made, in order, the failed one last: none after it.
ACCOUNT_TOOLS = ("groupadd", "useradd", "usermod")
ACCOUNT_TOOL_FAILURES = {
    "groupadd-user-group": (
        {"STUB_GROUPADD_FAIL": "alice"}, 10, "groupadd: cannot lock /etc/group; try again later.",
        ["groupadd --gid 2001 alice"],
    ),
    "groupadd-supplementary-group": (
        {"STUB_GROUPADD_FAIL": "ops"}, 10, "groupadd: cannot lock /etc/group; try again later.",
        ["groupadd --gid 2001 alice", "groupadd --gid 3000 ml", "groupadd --gid 3001 ops"],
    ),
    "useradd": (
        {"STUB_USERADD_FAIL": "bob"}, 1, "useradd: cannot lock /etc/passwd; try again later.",
        ["groupadd --gid 2001 alice", "groupadd --gid 3000 ml", "groupadd --gid 3001 ops", "useradd", "usermod",
         "usermod", "groupadd --gid 2100 bob", "useradd"],
    ),
    "usermod-append-group": (
        {"STUB_USERMOD_FAIL": "alice"}, 8, "usermod: user alice is currently used by process 2411",
        ["groupadd --gid 2001 alice", "groupadd --gid 3000 ml", "groupadd --gid 3001 ops", "useradd", "usermod"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", ACCOUNT_TOOL_FAILURES)
def test_each_account_tool_that_fails_fails_the_bootstrap_where_it_failed(head: Node, case: str) -> None:
    """A tool refused (another holds /etc/passwd's or /etc/group's lock, the user runs a process): the action
    stops there with the tool's exit status and its message alone, and nothing after it happens; a
    ``groupadd ... || true`` would bootstrap a node with half its team "successfully"."""
    switch, code, message, changed = ACCOUNT_TOOL_FAILURES[case]
    result = head.run("users.sh", *TEAM, **switch)
    assert result.returncode == code
    assert result.stderr.splitlines() == [message]
    made = [c if c.startswith("groupadd") else _tool(c) for c in head.changes() if _tool(c) in ACCOUNT_TOOLS]
    assert made == changed
    assert list(head.homes.iterdir()) == ([head.homes / "alice"] if case == "useradd" else [])


def test_a_key_pair_that_cannot_be_generated_fails_the_bootstrap_before_any_key_is_authorised(
    head: Node,
) -> None:
    result = head.run("users.sh", *TEAM, STUB_SSH_KEYGEN_FAIL="alice")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "users.sh: error: could not generate the cluster key pair of alice in /shared/home/alice/.ssh as alice"
    )
    assert "failed: No space left on device" in result.stderr
    assert not (head.homes / "alice" / ".ssh" / "authorized_keys").exists()
    assert not (head.homes / "bob").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--user", "alice:2001:2001"], "--home-root must be an absolute path, got ''"),
        (["--home-root", "/shared", "--user", "Alice:x:1"], "--user must be NAME:UID:GID[:GROUP=GID,...]"),
        (["--home-root", "/shared", "--frobnicate"], "unknown argument '--frobnicate'"),
        (["--admins-only", "ubuntu", "--home-root", "/shared"], "--admins-only USER goes alone"),
        (["--admins-only", "Not A User"], "the cluster's default user must be a user name, got 'Not A User'"),
    ],
)
def test_bad_arguments_are_clear_errors(head: Node, args: list[str], message: str) -> None:
    result = head.run("users.sh", *args)
    assert result.returncode == 1
    assert message in result.stderr


SSHD_PAM = "@include common-auth\naccount required pam_nologin.so\n@include common-account\n"
ADMINS_LINE = "account required pam_access.so accessfile=/etc/security/training-clusters-admins.conf"


def test_with_login_nodes_the_head_node_lets_only_administrators_in_over_ssh(head: Node) -> None:
    """Real sshd refusing the team there is shown on the ParallelCluster-like bed
    (tests/integration/test_parallelcluster_real.py)."""
    (head.root / "etc" / "pam.d").mkdir(parents=True)
    (head.root / "etc" / "pam.d" / "sshd").write_text(SSHD_PAM)

    first = head.run("users.sh", *TEAM, "--admins-only-on-head-node")
    before = head.snapshot()
    second = head.run("users.sh", *TEAM, "--admins-only-on-head-node")

    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert (head.root / "etc" / "pam.d" / "sshd").read_text() == SSHD_PAM + ADMINS_LINE + "\n"
    assert (head.root / "etc" / "security" / "training-clusters-admins.conf").read_text().splitlines()[
        1:
    ] == [
        "+:root ec2-user:ALL",
        "-:ALL:ALL",
    ]
    assert "alice:x:2001:2001" in (head.root / "etc" / "passwd").read_text()  # Slurm still resolves them
    assert head.snapshot() == before


@pytest.mark.parametrize("admins_only", [True, False])
def test_head_node_logins_stay_open_without_the_flag_and_elsewhere(
    head: Node, compute: Node, admins_only: bool
) -> None:
    """Without login nodes the head node is where the team logs in; compute nodes are never closed here."""
    node, args = (compute, [*TEAM, "--admins-only-on-head-node"]) if admins_only else (head, TEAM)
    (node.root / "etc" / "pam.d").mkdir(parents=True)
    (node.root / "etc" / "pam.d" / "sshd").write_text(SSHD_PAM)

    result = node.run("users.sh", *args)

    assert result.returncode == 0, result.stderr
    assert (node.root / "etc" / "pam.d" / "sshd").read_text() == SSHD_PAM
    assert not (node.root / "etc" / "security").exists()


def test_a_head_node_without_sshs_pam_file_or_default_user_fails_clearly(head: Node) -> None:
    result = head.run("users.sh", *TEAM, "--admins-only-on-head-node")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "users.sh: error: no /etc/pam.d/sshd on this node: cannot keep the team's users off it"
    )
    (head.root / "etc" / "pam.d").mkdir(parents=True)
    (head.root / "etc" / "pam.d" / "sshd").write_text(SSHD_PAM)
    (head.root / "etc" / "parallelcluster" / "cfnconfig").write_text("cfn_node_type=HeadNode\n")
    result = head.run("users.sh", *TEAM, "--admins-only-on-head-node")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "users.sh: error: cannot tell the cluster's default user (cfn_cluster_user in "
        "/etc/parallelcluster/cfnconfig is '')"
    )


# --------------------------------------------------------------------------------------------------
# pyxis.sh

#: What ParallelCluster installs under /opt/parallelcluster/examples (3.11+), as its cookbook renders it
#: (github.com/aws/aws-parallelcluster-cookbook: cookbooks/aws-parallelcluster-platform/templates/enroot/
#: enroot.conf.erb with temporary_dir /run/enroot and persistent_dir /var/enroot, cookbooks/
#: aws-parallelcluster-slurm/templates/default/pyxis/plugstack.conf.erb and pyxis.conf.erb), shortened.
EXAMPLES = {
    "enroot/enroot.conf": (
        "ENROOT_RUNTIME_PATH         /run/enroot/runtime/user-$(id -u)\n"
        "ENROOT_DATA_PATH            /run/enroot/data/user-$(id -u)\n"
        "ENROOT_CACHE_PATH           /var/enroot/cache/group-$(id -g)\n"
        "ENROOT_RESTRICT_DEV        no\n"
    ),
    "spank/plugstack.conf": "include /opt/slurm/etc/plugstack.conf.d/*\n",
    "pyxis/pyxis.conf": "required /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis\n",
}
SCONTROL_DOWN = "slurm_reconfigure error: Unable to contact slurm controller (connect failure)"


def _with_examples(node: Node) -> Node:
    for relative, text in EXAMPLES.items():
        path = node.root / "opt" / "parallelcluster" / "examples" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (node.root / "opt" / "slurm" / "etc").mkdir(parents=True)
    return node


def test_the_head_node_enables_pyxis_in_the_shared_slurm_configuration_once(head: Node) -> None:
    _with_examples(head)
    first = head.run_as_parallelcluster("pyxis.sh")
    assert first.returncode == 0, first.stderr
    etc = head.root / "opt" / "slurm" / "etc"
    assert (etc / "plugstack.conf").read_text() == EXAMPLES["spank/plugstack.conf"]
    assert sorted(p.name for p in (etc / "plugstack.conf.d").iterdir()) == ["pyxis.conf"]
    assert not [p for p in etc.iterdir() if p.name.startswith("tmp.")]  # nothing staged is left behind
    # enroot's configuration and folders are the next action's (training-clusters-enroot.sh): none made 1777 here
    for left in ("etc/enroot", "run/enroot", "var/enroot", "run/pyxis"):
        assert not (head.root / left).exists(), left
    assert head.calls("scontrol") == ["scontrol reconfigure"]
    before = head.snapshot()
    second = head.run_as_parallelcluster("pyxis.sh")
    assert second.returncode == 0 and head.snapshot() == before
    assert head.calls("scontrol") == ["scontrol reconfigure"]  # not again: nothing changed


def test_pyxis_reconfigures_slurm_with_the_path_parallelcluster_gives_custom_actions(head: Node) -> None:
    """Issue 27: a bare `scontrol` is not found on ParallelCluster's PATH (exit 127, the head node fails to
    bootstrap); the action calls it where ParallelCluster installs it, as the cookbook does
    (cookbooks/aws-parallelcluster-slurm/recipes/update/update_head_node.rb: `<install_dir>/bin/scontrol
    reconfigure`)."""
    _with_examples(head)
    result = head.run_as_parallelcluster("pyxis.sh")
    assert result.returncode == 0, result.stderr
    assert "command not found" not in result.stderr
    assert head.calls() == ["scontrol reconfigure"]
    assert "pyxis.sh: Slurm reconfigured: srun --container-image is available" in result.stdout.splitlines()


def test_a_failing_reconfigure_fails_the_action_with_one_clear_line(head: Node) -> None:
    _with_examples(head)
    (head.root / "scontrol.fails").touch()  # the stub's scontrol answers as with slurmctld down
    result = head.run_as_parallelcluster("pyxis.sh")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"pyxis.sh: error: /opt/slurm/bin/scontrol reconfigure failed (exit 1): {SCONTROL_DOWN}"
        " (the Pyxis SPANK configuration is in place, but slurmctld has not loaded it)"
    ]


def test_a_reconfigure_that_failed_is_done_by_the_next_run(head: Node) -> None:
    """The configuration was written before the failing reconfigure, so the next run finds nothing to
    change: it must still reconfigure Slurm."""
    _with_examples(head)
    (head.root / "scontrol.fails").touch()
    assert head.run_as_parallelcluster("pyxis.sh").returncode == 1
    (head.root / "scontrol.fails").unlink()
    again = head.run_as_parallelcluster("pyxis.sh")
    assert again.returncode == 0, again.stderr
    assert head.calls("scontrol") == ["scontrol reconfigure", "scontrol reconfigure"]
    third = head.run_as_parallelcluster("pyxis.sh")
    assert third.returncode == 0 and len(head.calls("scontrol")) == 2


def test_a_head_node_without_slurm_where_parallelcluster_installs_it_fails_clearly(head: Node) -> None:
    _with_examples(head)
    (head.root / SLURM_BIN / "scontrol").unlink()
    result = head.run_as_parallelcluster("pyxis.sh")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "pyxis.sh: error: no /opt/slurm/bin/scontrol (where ParallelCluster installs Slurm): cannot reconfigure Slurm"
    ]


def test_compute_nodes_never_touch_the_shared_slurm_directory(compute: Node) -> None:
    _with_examples(compute)
    result = compute.run_as_parallelcluster("pyxis.sh")
    assert result.returncode == 0, result.stderr
    assert list((compute.root / "opt" / "slurm" / "etc").iterdir()) == []  # the race of issue #6459
    assert compute.calls() == []


def test_the_enroot_action_gives_each_user_their_own_folders_and_no_shared_ones(compute: Node) -> None:
    """Issue 40, High 2 on ParallelCluster: the example's config path (/var/enroot/config/user-<uid>, under a
    1777 folder in ParallelCluster's tutorial: a user could pre-create another's hooks.d) and its cache per group
    are gone; the config is enroot's default in the user's home, everything else one folder per user, 0700."""
    _with_examples(compute)
    assert compute.run("users.sh", *TEAM).returncode == 0
    result = compute.run_enroot_action("ec2-user", "alice")
    assert result.returncode == 0, result.stderr
    conf = (compute.root / "etc" / "enroot" / "enroot.conf").read_text().splitlines()
    assert [line for line in conf if line.startswith("ENROOT_") and "_PATH" in line.split()[0]] == [
        "ENROOT_RUNTIME_PATH    /run/enroot/runtime/user-$(id -u)",
        "ENROOT_DATA_PATH       /run/enroot/data/user-$(id -u)",
        "ENROOT_CACHE_PATH      /var/enroot/cache/user-$(id -u)",
        "ENROOT_TEMP_PATH       /var/enroot/tmp/user-$(id -u)",
    ]
    for folder in ("run/enroot", "var/enroot", "run/enroot/runtime", "var/enroot/cache", "run/pyxis"):
        assert oct((compute.root / folder).stat().st_mode & 0o7777) == "0o755", folder
    for folder in ("run/enroot/runtime", "run/enroot/data", "var/enroot/cache", "var/enroot/tmp"):
        assert sorted(p.name for p in (compute.root / folder).iterdir()) == ["user-1000", "user-2001"]
        assert oct((compute.root / folder / "user-2001").stat().st_mode & 0o7777) == "0o700"
        assert f"chown 2001:2001 -- {compute.root / folder / 'user-2001'}" in compute.calls("chown")
    tmpfiles = (
        (compute.root / "etc" / "tmpfiles.d" / "training-clusters-enroot.conf").read_text().splitlines()
    )
    assert "d /var/enroot/cache/user-2001 0700 2001 2001 -" in tmpfiles
    assert f"d /run/pyxis 0755 {os.geteuid()} 0 -" in tmpfiles


def test_enroot_keeps_the_hosts_devices_as_parallelclusters_example_sets_it(compute: Node) -> None:
    """Issue 27 item 2, checked for ParallelCluster: `ENROOT_RESTRICT_DEV` would give containers a minimal /dev
    without EFA's /dev/infiniband/uverbs* (github.com/NVIDIA/enroot conf/hooks/10-devices.sh). The action copies
    ParallelCluster's example, which has always said `no` (enroot.conf.erb, and enroot.template.conf before
    3.11), so containers keep the host's devices: this guards that the copy keeps every line but the paths."""
    _with_examples(compute)
    assert compute.run_as_parallelcluster("pyxis.sh").returncode == 0
    assert compute.run_enroot_action("ec2-user").returncode == 0
    lines = (compute.root / "etc" / "enroot" / "enroot.conf").read_text().splitlines()
    restrict = [line.split() for line in lines if "ENROOT_RESTRICT_DEV" in line]
    assert restrict == [["ENROOT_RESTRICT_DEV", "no"]]


def test_an_image_without_the_examples_fails_clearly(head: Node, compute: Node) -> None:
    result = head.run_as_parallelcluster("pyxis.sh")
    assert result.returncode == 1
    assert "/opt/parallelcluster/examples/spank/plugstack.conf is missing" in result.stderr
    enroot = compute.run_enroot_action("ec2-user")
    assert enroot.returncode == 2
    assert enroot.stderr == (
        "training-clusters-enroot: error: /opt/parallelcluster/examples/enroot/enroot.conf is missing\n"
    )


#: Slurm's client commands (slurm.schedmd.com/man_index.html), none of them on ParallelCluster's PATH.
SLURM_CLIENTS = (
    "sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol", "scrontab", "sdiag",
    "sinfo", "sprio", "squeue", "sreport", "srun", "sshare", "sstat", "strigger", "sview",
)  # fmt: skip


#: A quoted text that runs nothing: single-quoted, or double-quoted without a command substitution.
_TEXT = re.compile(r"'[^']*'" + r'|"(?:[^"\\$]|\\.|\$(?!\())*"')
_BARE_SLURM = re.compile(rf"(?<![\w/.$-])({'|'.join(SLURM_CLIENTS)})(?![\w.-])")


@pytest.mark.parametrize("script", sorted(BUCKET))
def test_no_action_runs_a_slurm_command_by_its_bare_name(script: str) -> None:
    """Every action (users.sh too) runs with :data:`PARALLELCLUSTER_PATH`: a Slurm command must be called by its
    full path under /opt/slurm/bin. Comments and plain quoted text (messages) are not commands."""
    lines = BUCKET[script].read_text().splitlines()
    code = [_TEXT.sub('""', line) for line in lines if not line.lstrip().startswith("#")]
    assert [line for line in code if _BARE_SLURM.search(line.split(" #")[0])] == []


def test_the_actions_are_shellcheck_clean(shellcheck: str) -> None:
    scripts = sorted(BUCKET.values())
    assert set(BUCKET) == {
        "users.sh",
        "pyxis.sh",
        "topology.sh",
        "training-clusters-imds.sh",
        "training-clusters-enroot.sh",
    }
    result = subprocess.run(
        [shellcheck, "-x", "--severity=style", *map(str, scripts), str(STUB)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout
    assert all(os.access(p, os.X_OK) for p in scripts)


# --------------------------------------------------------------------------------------------------
# topology.sh

#: Where ParallelCluster's AMI has its node virtual environment (the cookbook's node_virtualenv_path).
NODE_PYTHON = "opt/parallelcluster/pyenv/versions/3.12.8/envs/node_virtualenv/bin/python"
MODULE_URL = "s3://training-scripts/parallelcluster-actions/topology.py"


def fake_node_python(node: Node) -> Path:
    """The node virtual environment's Python: it logs each call; ``-c`` (the download) copies the object from the
    fake bucket ``TC_ROOT/s3``; ``initial`` runs the module for real; ``install`` (it needs EC2) only logs."""
    python = node.root / NODE_PYTHON
    python.parent.mkdir(parents=True)
    python.write_text(
        "#!/bin/bash\n"
        'echo "python $*" >>"${TC_ROOT}/calls.log"\n'
        'if [[ $1 == -c ]]; then cp "${TC_ROOT}/s3/$4/$5" "$6"; exit; fi\n'
        f'if [[ $2 == initial ]]; then exec "{sys.executable}" "$@"; fi\n'
    )
    python.chmod(0o755)
    bucket = node.root / "s3" / "training-scripts" / "parallelcluster-actions"
    bucket.mkdir(parents=True)
    shutil.copy(TOPOLOGY_MODULE, bucket / "topology.py")
    return python


def test_topology_initial_downloads_the_module_and_writes_every_node_unplaced(head: Node) -> None:
    fake_node_python(head)
    conf = head.root / "opt" / "slurm" / "etc" / "topology.conf"
    args = [
        MODULE_URL,
        "us-east-1",
        "initial",
        "--conf",
        str(conf),
        "--nodes",
        "gpu-st-p5-[1-2]",
        "gpu-dy-p5-[1-4]",
    ]
    result = head.run_as_parallelcluster("topology.sh", *args)
    assert result.returncode == 0, result.stderr
    installed = head.root / "opt" / "training-clusters" / "topology.py"
    assert installed.read_text() == TOPOLOGY_MODULE.read_text()
    assert stat.S_IMODE(installed.stat().st_mode) == 0o644
    assert conf.read_text().splitlines()[-2:] == [
        "SwitchName=ec2-network Switches=unplaced",
        "SwitchName=unplaced Nodes=gpu-st-p5-[1-2],gpu-dy-p5-[1-4]",
    ]
    calls = head.calls("python")
    assert calls[0].startswith("python -c import sys, boto3; ")
    assert calls[0].endswith(f" us-east-1 training-scripts parallelcluster-actions/topology.py {installed}")
    assert calls[1] == f"python {installed} initial --conf {conf} --nodes gpu-st-p5-[1-2] gpu-dy-p5-[1-4]"


def test_topology_install_hands_the_timer_the_node_python_and_the_installed_module(head: Node) -> None:
    fake_node_python(head)
    args = [MODULE_URL, "us-east-1", "install", "--conf", "/opt/slurm/etc/topology.conf",
            "--cluster-name", "p5-training", "--partition", "gpu"]  # fmt: skip
    result = head.run_as_parallelcluster("topology.sh", *args)
    assert result.returncode == 0, result.stderr
    installed = head.root / "opt" / "training-clusters" / "topology.py"
    assert head.calls("python")[1] == (
        f"python {installed} install --region us-east-1 --python /{NODE_PYTHON} --module "
        "/opt/training-clusters/topology.py --conf /opt/slurm/etc/topology.conf --cluster-name p5-training "
        "--partition gpu"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["s3://b/k", "us-east-1"], "usage: topology.sh MODULE_URL REGION initial|install ARGS..."),
        (["https://b/k", "us-east-1", "initial"], "MODULE_URL must be s3://BUCKET/KEY, got 'https://b/k'"),
        ([MODULE_URL, "us-east-1", "refresh"], "the command must be initial or install, got 'refresh'"),
        (
            ["s3://training-scripts/missing.py", "us-east-1", "initial"],
            "could not download s3://training-scripts/missing.py (the head node reads it with its S3Access)",
        ),
    ],
)
def test_topology_refuses_with_one_line(head: Node, args: list[str], message: str) -> None:
    fake_node_python(head)
    result = head.run_as_parallelcluster("topology.sh", *args)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == f"topology.sh: error: {message}"


def test_topology_without_a_node_virtual_environment_says_so(head: Node) -> None:
    result = head.run_as_parallelcluster("topology.sh", MODULE_URL, "us-east-1", "initial")
    assert result.returncode == 1
    assert result.stderr == (
        "topology.sh: error: no /opt/parallelcluster/pyenv/versions/*/envs/node_virtualenv/bin/python: not a "
        "ParallelCluster AMI?\n"
    )
