"""Failures a step must not swallow, each driven in one sandbox run: the command the step runs fails, or the
thing it waits for never comes, and the run exits with that status and the step's one line
``FAILED step '<name>' (exit N)``, last and once. A step that swallowed the failure (``... || true``, a
``continue`` for an ``exit``) would end in SUCCESS or fail later, elsewhere, with another status.

Each kills one of ``benchmarks/construct_mutants.py``'s planted bugs (named on its test): before these, it
survived every test.
"""

from __future__ import annotations

import shutil

import pytest

from tests.lifecycle.sandbox import Sandbox
from tests.lifecycle.test_lifecycle_failures import assert_failed_step
from tests.lifecycle.test_lifecycle_team import USERS

KEYS_SETTINGS = "etc/training-clusters/slurm-keys.conf"
KEYS_COMMAND = "usr/local/sbin/training-clusters-slurm-keys"


def test_a_slurmctld_that_does_not_restart_fails_the_controller_step(sandbox: Sandbox) -> None:
    """slurmctld-restart-failure-swallowed: ``systemctl restart slurmctld || true``."""
    run = sandbox.as_role("controller").run(STUB_SYSTEMCTL_FAIL="restart slurmctld")

    assert_failed_step(run, "slurm-controller", 5)
    assert "Failed to restart slurmctld: Unit not found." in run.output.splitlines()
    assert ["enable", "--now", "training-clusters-slurm-keys.path"] not in run.calls_to("systemctl")


def test_a_user_useradd_cannot_add_fails_the_users_step(sandbox: Sandbox) -> None:
    """useradd-failure-swallowed: ``useradd ... || true``."""
    sandbox.write_params(users=USERS)

    run = sandbox.run(STUB_USERADD_FAIL="bob")

    assert_failed_step(run, "users", 1)
    assert "useradd: cannot lock /etc/passwd; try again later." in run.output
    assert "created user bob" not in run.log
    assert (sandbox.state / "passwd").read_text() == "alice:x:2001:2001::/fsx/alice:/bin/bash\n"


#: Each account tool the users step runs, made to fail for one name (the stub's switches), with the
#: exit status and message the step must pass on, and the last change that must not have happened.
ACCOUNT_TOOL_FAILURES = {
    "groupadd-user-group": (
        {"STUB_GROUPADD_FAIL": "bob"},
        10,
        "groupadd: cannot lock /etc/group; try again later.",
        "created group bob",
    ),
    "groupadd-supplementary-group": (
        {"STUB_GROUPADD_FAIL": "ml-team"},
        10,
        "groupadd: cannot lock /etc/group; try again later.",
        "created group ml-team",
    ),
    "usermod-append-group": (
        {"STUB_USERMOD_FAIL": "bob"},
        8,
        "usermod: user bob is currently used by process 2411",
        "added bob to group ml-team",
    ),
    "ssh-keygen": (
        {"STUB_SSH_KEYGEN_FAIL": "bob"},
        1,
        "failed: No space left on device",
        "generated the cluster key pair of bob",
    ),
}


@pytest.mark.parametrize("case", ACCOUNT_TOOL_FAILURES)
def test_each_account_tool_that_fails_fails_the_users_step(sandbox: Sandbox, case: str) -> None:
    """``groupadd ... || true`` (or the same after usermod, ssh-keygen) would leave a node with part of its
    team and a SUCCESS; each tool's failure ends the users step with its status and message instead."""
    switch, code, message, not_done = ACCOUNT_TOOL_FAILURES[case]
    sandbox.write_params(users=USERS)

    run = sandbox.run(**switch)

    assert_failed_step(run, "users", code)
    assert message in run.output
    assert not_done not in run.log
    assert "created user alice" in run.log  # alice came first and is in place


@pytest.mark.parametrize(
    ("passwd", "message"),
    [
        (
            "alice:x:2001:100::/fsx/alice:/bin/bash\n",
            "users.sh: error: user alice exists with primary gid 100, not 2001: the users setting and this node"
            " disagree (change the gid in the setting, or the user on the node: usermod --gid 2001 alice)",
        ),
        (
            "alice:x:2001:2001::/home/alice:/bin/bash\n",
            "users.sh: error: user alice exists with home /home/alice, not /fsx/alice: the users setting and this"
            " node disagree (usermod --home /fsx/alice alice on the node, once the user runs nothing)",
        ),
    ],
    ids=["primary-gid", "home"],
)
def test_a_user_whose_group_or_home_differs_fails_the_users_step_unchanged(
    sandbox: Sandbox, passwd: str, message: str
) -> None:
    """alice exists with her uid but another primary group or home: the shared users.sh changes no account
    (its header says why), so the step fails naming both values and the fix, and usermod never runs."""
    sandbox.write_params(users=USERS)
    (sandbox.state / "group").write_text("alice:x:2001:\n")
    (sandbox.state / "passwd").write_text(passwd)

    run = sandbox.run()

    assert_failed_step(run, "users", 1)
    assert message in run.output.splitlines()
    assert run.calls_to("usermod") == []
    assert (sandbox.state / "passwd").read_text() == passwd


def test_a_file_system_that_never_shows_as_mounted_fails_the_mount_step(sandbox: Sandbox) -> None:
    """mount-not-waited-for: ``tc_wait_writable "$rooted" || true``. mount exits 0, but /fsx never becomes a
    mount point: the wait is bounded (TC_MOUNT_WAIT_ATTEMPTS=3 in the sandbox; sleep is a stub)."""
    run = sandbox.run(STUB_MOUNT_NEVER_SHOWS="1")

    assert_failed_step(run, "mount-fsx", 1)
    fsx = sandbox.path("fsx")
    assert [line.split("] ", 1)[1] for line in run.log.splitlines() if "writable" in line] == [
        *(f"waiting for {fsx} to be mounted and writable ({n}/3)" for n in (1, 2, 3)),
        f"{fsx} is not mounted and writable after 3 checks",
    ]
    assert len(run.calls_to("sleep")) == 3
    assert "step 'admin-home' started" not in run.log


def test_a_malformed_slurm_keys_line_is_refused(sandbox: Sandbox) -> None:
    """slurm-keys-bad-line-accepted: the keys script skips (``continue``) a line it must refuse (``exit 1``).
    The line lacks its value; slurm.conf is left as it was and Slurm is not reconfigured."""
    node = sandbox.as_role("controller")
    assert node.run().returncode == 0
    keys = node.path(KEYS_SETTINGS)
    keys.write_text(keys.read_text() + "slurm.conf JobRequeue\n")
    line = len(keys.read_text().splitlines())
    slurm_conf = node.path("opt/slurm/etc/slurm.conf").read_bytes()

    run = node.run_command([shutil.which("bash") or "/bin/bash", str(node.path(KEYS_COMMAND))])

    assert run.returncode == 1, run.output
    assert run.output.splitlines() == [
        f"training-clusters-slurm-keys: ERROR: {keys}:{line}: want '<file> <Key> <Value>',"
        " got 'slurm.conf JobRequeue '"
    ]
    assert node.path("opt/slurm/etc/slurm.conf").read_bytes() == slurm_conf
    assert run.calls_to("scontrol") == []


def test_docker_without_a_data_root_leaves_a_running_docker_alone(sandbox: Sandbox) -> None:
    """docker-data-root-check-swallowed: ``[[ -n $data_root ]] || return 0`` in ``tc_docker_daemon_json``.
    Its ``return 1`` means "daemon.json unchanged" (not a failure): a node without local NVMe has no data
    root to set, so a Docker already running (the AMI's, or a first run's) is neither reconfigured nor
    restarted; the swallowed check reports a change and restarts it."""
    sandbox.write_params(enable_docker=True)
    (sandbox.state / "unit.docker.service").write_text("active\n")  # Docker runs on this node

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert [call for call in run.calls_to("systemctl") if "docker" in call] == [
        ["enable", "docker"],
        ["is-active", "--quiet", "docker"],
    ]
    assert not sandbox.path("etc/docker/daemon.json").exists()
    assert [line.split("] ", 1)[1] for line in run.log.splitlines() if "[docker]" in line][
        -2
    ] == "Docker is running"
