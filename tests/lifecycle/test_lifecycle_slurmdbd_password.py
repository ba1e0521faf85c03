"""slurmdbd's login follows its rotating secret (issue 28): on the controller of a cluster with an external
accounting database, on_create.sh installs node/training-clusters-slurmdbd-password.sh with an hourly timer;
a run rewrites slurmdbd.conf's StorageUser/StoragePass atomically (0600, its owner kept) and restarts slurmdbd
only when they changed; a failing run prints one line and leaves slurmdbd.conf and slurmdbd alone.
Sandbox: aws and systemctl are the stubs. Real systemd, slurmdbd and MariaDB:
tests/integration/test_accounting_real.py."""

from __future__ import annotations

import json
import os
import shutil
import stat
from typing import Any

import pytest

from tests.lifecycle.sandbox import Run, Sandbox

SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurmdbd-AbCdEf"
DB_HOST = "accounting.cluster-abc123.us-east-1.rds.amazonaws.com"
SECRET = {"username": "slurmdbd", "password": "Pa55#word", "host": DB_HOST, "port": 3306}
#: The secret after a rotation with alternating users: the other user, a new password.
ROTATED = {**SECRET, "username": "slurmdbd_clone", "password": "N3w-Pa55word"}
EXTERNAL: dict[str, Any] = {"mode": "external", "host": DB_HOST, "port": 3306, "secret_arn": SECRET_ARN}
SLURMDBD_CONF = "opt/slurm/etc/slurmdbd.conf"
COMMAND = "usr/local/sbin/training-clusters-slurmdbd-password"
SERVICE = "etc/systemd/system/training-clusters-slurmdbd-password.service"
TIMER = "etc/systemd/system/training-clusters-slurmdbd-password.timer"


def secret_env(secret: dict[str, Any] = SECRET, **overrides: str) -> dict[str, str]:
    return {"STUB_SECRET_STRING": json.dumps(secret), "STUB_SECRET_ARN": SECRET_ARN, **overrides}


@pytest.fixture
def controller(sandbox: Sandbox) -> Sandbox:
    """A controller provisioned with the external database (slurmdbd.conf from SECRET)."""
    sandbox.write_params(accounting=EXTERNAL)
    run = sandbox.as_role("controller").run(**secret_env())
    assert run.returncode == 0, run.output
    return sandbox


def refresh(sandbox: Sandbox, *args: str, **env: str) -> Run:
    """The installed command, as its unit runs it (the unit's own arguments unless ARGS are given)."""
    if not args:
        exec_start = next(
            line for line in sandbox.path(SERVICE).read_text().splitlines() if line.startswith("ExecStart=")
        )
        args = tuple(exec_start.split()[1:])
    return sandbox.run_command(
        [shutil.which("bash") or "/bin/bash", str(sandbox.path(COMMAND)), *args], **env
    )


def storage_lines(sandbox: Sandbox) -> list[str]:
    lines = sandbox.path(SLURMDBD_CONF).read_text().splitlines()
    return [line for line in lines if line.startswith(("StorageUser=", "StoragePass="))]


def test_the_controller_installs_the_refresh_with_an_hourly_timer(controller: Sandbox) -> None:
    service = controller.path(SERVICE).read_text().splitlines()
    assert (
        f"ExecStart=/usr/local/sbin/training-clusters-slurmdbd-password --secret-arn {SECRET_ARN} --region us-east-1"
        in service
    )
    assert "Type=oneshot" in service and "ConditionPathExists=/opt/slurm/etc/slurmdbd.conf" in service
    timer = controller.path(TIMER).read_text().splitlines()
    assert {
        "OnBootSec=10min",
        "OnUnitActiveSec=1h",
        "RandomizedDelaySec=5min",
        "WantedBy=timers.target",
    } <= set(timer)
    assert controller.path(COMMAND).stat().st_mode & 0o777 == 0o755
    log = controller.path("var/log/provision/provisioning.log").read_text()
    assert f"slurmdbd's login follows {SECRET_ARN} (training-clusters-slurmdbd-password.timer, hourly)" in log


def test_the_refresh_is_installed_with_the_controller_and_enabled(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting=EXTERNAL)

    run = sandbox.as_role("controller").run(**secret_env())

    assert run.returncode == 0, run.output
    assert ["enable", "--now", "training-clusters-slurmdbd-password.timer"] in run.calls_to("systemctl")
    # installed after slurmdbd runs with the secret's login: the first timer run finds nothing to change
    calls = run.calls
    assert calls.index(["systemctl", "restart", "slurmdbd"]) < calls.index(
        ["systemctl", "enable", "--now", "training-clusters-slurmdbd-password.timer"]
    )


def test_a_fixed_user_is_kept(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting={**EXTERNAL, "user": "admin"})
    assert sandbox.as_role("controller").run(**secret_env()).returncode == 0

    run = refresh(sandbox, **secret_env(ROTATED))

    assert run.returncode == 0, run.output
    assert "--user admin" in sandbox.path(SERVICE).read_text()
    assert storage_lines(sandbox) == ["StorageUser=admin", "StoragePass=N3w-Pa55word"]


@pytest.mark.parametrize("mode", [{"mode": "local"}, {"mode": "none"}])
def test_no_refresh_without_an_external_database(sandbox: Sandbox, mode: dict[str, str]) -> None:
    sandbox.write_params(accounting=mode)

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert not sandbox.path(SERVICE).exists() and not sandbox.path(COMMAND).exists()


def test_a_rotated_secret_is_written_and_slurmdbd_restarted(controller: Sandbox) -> None:
    before = controller.path(SLURMDBD_CONF).read_text()

    run = refresh(controller, **secret_env(ROTATED))

    assert run.returncode == 0, run.output
    assert storage_lines(controller) == ["StorageUser=slurmdbd_clone", "StoragePass=N3w-Pa55word"]
    after = controller.path(SLURMDBD_CONF).read_text()
    # every other line as it was
    assert [line for line in after.splitlines() if not line.startswith("Storage")] == [
        line for line in before.splitlines() if not line.startswith("Storage")
    ]
    assert stat.S_IMODE(controller.path(SLURMDBD_CONF).stat().st_mode) == 0o600
    assert run.calls_to("systemctl") == [["restart", "slurmdbd"]]
    assert run.output.splitlines() == [
        "training-clusters-slurmdbd-password: slurmdbd.conf now logs in as slurmdbd_clone: restarting slurmdbd"
    ]
    assert "N3w-Pa55word" not in run.output
    assert not list(controller.path("opt/slurm/etc").glob("*.tc-new.*"))


def test_the_owner_of_slurmdbd_conf_is_kept(controller: Sandbox) -> None:
    conf = controller.path(SLURMDBD_CONF)
    os.chown(conf, 4242, 4343)

    run = refresh(controller, **secret_env(ROTATED))

    assert run.returncode == 0, run.output
    assert (conf.stat().st_uid, conf.stat().st_gid) == (4242, 4343)


def test_an_unchanged_secret_restarts_nothing(controller: Sandbox) -> None:
    before = controller.snapshot()

    run = refresh(controller, **secret_env())

    assert run.returncode == 0, run.output
    assert run.calls_to("systemctl") == []
    assert controller.snapshot() == before
    assert run.output.splitlines() == [
        "training-clusters-slurmdbd-password: slurmdbd.conf already holds the secret's login: nothing to do"
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            secret_env(STUB_AWS_DENIED="1"),
            f"cannot read {SECRET_ARN} (slurmdbd.conf left as it is): An error occurred "
            "(AccessDeniedException) when calling the GetSecretValue operation",
        ),
        (
            secret_env({"username": "slurmdbd"}),
            "the secret holds no JSON password (want username and password, as RDS writes them) "
            "(slurmdbd.conf left as it is)",
        ),
        (
            {"STUB_SECRET_STRING": "not json", "STUB_SECRET_ARN": SECRET_ARN},
            "the secret holds no JSON password (want username and password, as RDS writes them) "
            "(slurmdbd.conf left as it is)",
        ),
        (
            secret_env({**ROTATED, "password": "two words"}),
            "the secret's username or password holds white space, which slurmdbd.conf cannot carry "
            "(slurmdbd.conf left as it is)",
        ),
    ],
    ids=["denied", "no-password", "not-json", "white-space"],
)
def test_a_failing_refresh_says_why_in_one_line_and_changes_nothing(
    controller: Sandbox, env: dict[str, str], message: str
) -> None:
    before = controller.snapshot()

    run = refresh(controller, **env)

    assert run.returncode == 1
    assert run.output.splitlines() == [f"training-clusters-slurmdbd-password: error: {message}"]
    assert run.calls_to("systemctl") == []
    assert controller.snapshot() == before


def test_a_slurmdbd_conf_without_its_login_lines_is_refused(controller: Sandbox) -> None:
    conf = controller.path(SLURMDBD_CONF)
    conf.write_text(
        "\n".join(line for line in conf.read_text().splitlines() if "StoragePass" not in line) + "\n"
    )
    before = conf.read_bytes()

    run = refresh(controller, **secret_env(ROTATED))

    assert run.returncode == 1
    assert run.output.splitlines() == [
        f"training-clusters-slurmdbd-password: error: {conf} has no StoragePass= line (slurmdbd.conf left as it is)"
    ]
    assert conf.read_bytes() == before


def test_a_slurmdbd_that_does_not_restart_fails_the_run(controller: Sandbox) -> None:
    run = refresh(controller, **secret_env(ROTATED, STUB_SYSTEMCTL_FAIL="slurmdbd"))

    assert run.returncode == 1
    assert run.output.splitlines()[-1] == (
        "training-clusters-slurmdbd-password: error: slurmdbd did not restart with the new login "
        "(systemctl status slurmdbd)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--region", "us-east-1"], "--secret-arn must be a Secrets Manager secret's ARN, got ''"),
        (
            ["--secret-arn", SECRET_ARN, "--region", "us east"],
            "--region must be an AWS Region, got 'us east'",
        ),
        (
            ["--secret-arn", SECRET_ARN, "--region", "us-east-1", "--user", "a b"],
            "--user must be a database user name, got 'a b'",
        ),
        (
            ["--bogus"],
            "unknown argument '--bogus' (expected --install, --secret-arn ARN, --region REGION, --user NAME)",
        ),
    ],
)
def test_bad_arguments_are_refused(controller: Sandbox, args: list[str], message: str) -> None:
    run = refresh(controller, *args, **secret_env())

    assert run.returncode == 2
    assert run.output.splitlines() == [f"training-clusters-slurmdbd-password: error: {message}"]
