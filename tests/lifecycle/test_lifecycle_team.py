"""Slurm for a team (issue 15): accounting through slurmdbd on the controller (an external database whose
password comes from Secrets Manager, or MariaDB on the controller), the team's users with fixed ids on
every node, Docker as an option; HyperPod's topology stays untouched."""

from __future__ import annotations

import json
import re
import shutil
import stat
from typing import Any

import pytest

from tests.lifecycle.sandbox import AMI_SSHD_PAM, CONTROLLER_IP, SHARED, Run, Sandbox

SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurm-accounting-AbCdEf"
DB_HOST = "slurm-accounting.cluster-abc123.us-east-1.rds.amazonaws.com"
SECRET = {"username": "slurm_admin", "password": "s3cr#t-Pass", "host": DB_HOST, "port": 3306}
EXTERNAL: dict[str, Any] = {"mode": "external", "host": DB_HOST, "port": 3306, "secret_arn": SECRET_ARN}
SLURMDBD_CONF = "opt/slurm/etc/slurmdbd.conf"
SLURM_CONF = "opt/slurm/etc/slurm.conf"
ALICE_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAlice alice@laptop"
USERS = [
    {"name": "alice", "uid": 2001, "ssh_public_keys": [ALICE_KEY]},
    {"name": "bob", "uid": 2002, "gid": 2100, "groups": [{"name": "ml-team", "gid": 3000}]},
]


def secret_env(**overrides: str) -> dict[str, str]:
    return {"STUB_SECRET_STRING": json.dumps(SECRET), "STUB_SECRET_ARN": SECRET_ARN, **overrides}


def assert_failed_step(run: Run, step: str) -> None:
    assert run.returncode != 0, run.output
    assert run.output.count("FAILED step") == 1
    assert f"FAILED step '{step}'" in run.output.rstrip().splitlines()[-1]
    assert "SUCCESS" not in run.log


def conf_lines(sandbox: Sandbox, relative: str) -> list[str]:
    return sandbox.path(relative).read_text().splitlines()


# -- accounting ----------------------------------------------------------------------------------


def test_external_accounting_is_configured_from_the_secret(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting=EXTERNAL)

    run = sandbox.as_role("controller").run(**secret_env())

    assert run.returncode == 0, run.output
    [call] = run.calls_to("aws")
    assert call[:2] == ["secretsmanager", "get-secret-value"]
    assert {"--secret-id", SECRET_ARN, "--region", "us-east-1"} <= set(call)
    conf = conf_lines(sandbox, SLURMDBD_CONF)
    assert f"StorageHost={DB_HOST}" in conf
    assert "StoragePort=3306" in conf
    assert "StorageUser=slurm_admin" in conf  # no user in the settings: the secret's
    assert "StoragePass=s3cr\\#t-Pass" in conf  # '#' would start a comment
    assert "StorageType=accounting_storage/mysql" in conf and "StorageLoc=slurm_acct_db" in conf
    assert stat.S_IMODE(sandbox.path(SLURMDBD_CONF).stat().st_mode) == 0o600
    assert ["slurm:slurm", str(sandbox.path(SLURMDBD_CONF))] in run.calls_to("chown")
    assert "s3cr" not in run.output  # the password never reaches the log
    slurm_conf = conf_lines(sandbox, SLURM_CONF)
    assert "AccountingStorageType=accounting_storage/slurmdbd" in slurm_conf
    assert f"AccountingStorageHost={CONTROLLER_IP}" in slurm_conf
    assert ["restart", "slurmdbd"] in run.calls_to("systemctl")
    assert ["-i", "add", "cluster", "ml-cluster"] in run.calls_to("sacctmgr")
    assert run.calls_to("systemctl").count(["restart", "slurmctld"]) == 1  # once, after registering
    assert "registered cluster ml-cluster with slurmdbd" in run.log
    assert sandbox.path("etc/systemd/system/slurmdbd.service").exists()  # the AMI model ships none


def step_lines(run: Run) -> list[tuple[str, str]]:
    """The start and end of every step that ran, in order: ("slurm-config", "started"), ..."""
    return re.findall(r"step '([a-z-]+)' (started|done)", run.log)


def test_accounting_is_set_up_between_slurm_config_and_slurmctld(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting=EXTERNAL)

    run = sandbox.as_role("controller").run(**secret_env())

    assert run.returncode == 0, run.output
    steps = step_lines(run)
    assert steps[steps.index(("slurm-config", "started")) :][:6] == [
        ("slurm-config", "started"),
        ("slurm-config", "done"),
        ("accounting", "started"),
        ("accounting", "done"),
        ("slurm-controller", "started"),
        ("slurm-controller", "done"),
    ]
    # The database, slurmdbd answering, the cluster registered: then slurmctld's first and only start.
    create_database = max(index for index, call in enumerate(run.calls) if call[0] == "mysql")
    positions = [
        create_database,
        run.calls.index(["systemctl", "restart", "slurmdbd"]),
        run.calls.index(["sacctmgr", "-i", "add", "cluster", "ml-cluster"]),
        run.calls.index(["systemctl", "restart", "slurmctld"]),
    ]
    assert positions == sorted(set(positions))
    assert "-e" not in run.calls[create_database]  # the last: CREATE DATABASE, its SQL on stdin
    assert [args for args in run.calls_to("systemctl") if args[0] in ("start", "restart")] == [
        ["restart", "slurmdbd"],
        ["restart", "slurmctld"],
    ]
    # slurm-config already put the accounting keys in slurm.conf (sacctmgr finds slurmdbd through it).
    config_log = run.log[
        run.log.index("step 'slurm-config' started") : run.log.index("step 'slurm-config' done")
    ]
    assert "AccountingStorageType=accounting_storage/slurmdbd" in config_log


def test_the_external_database_is_waited_for_and_created(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting=EXTERNAL)

    run = sandbox.as_role("controller").run(**secret_env(STUB_MYSQL_UNREACHABLE_TRIES="2"))

    assert run.returncode == 0, run.output
    mysql = run.calls_to("mysql")
    [defaults] = {call[0] for call in mysql}
    assert defaults.startswith(f"--defaults-extra-file={sandbox.path('etc/training-clusters')}/")
    assert defaults.endswith(".mysql-client")
    assert [call[1:] for call in mysql] == [["--connect-timeout=5", "-N", "-e", "SELECT 1"]] * 3 + [
        ["--connect-timeout=5"]
    ]
    unreachable = f"ERROR 2003 (HY000): Can't connect to MySQL server on '{DB_HOST}:3306' (110)"
    assert f"waiting for the database {DB_HOST}:3306 (1/3): {unreachable}" in run.log
    assert f"waiting for the database {DB_HOST}:3306 (2/3): {unreachable}" in run.log
    assert "(3/3)" not in run.log
    assert run.calls_to("sleep") == [["10"], ["10"]]  # TC_DATABASE_WAIT_SLEEP
    assert (sandbox.state / "mysql.sql").read_text() == "CREATE DATABASE IF NOT EXISTS `slurm_acct_db`;\n"
    assert f"the database {DB_HOST}:3306 answers and holds slurm_acct_db" in run.log
    # The connection went through a 0600 option file, removed afterwards; the password only there.
    assert (sandbox.state / "mysql.defaults").read_text() == (
        f'[client]\nhost={DB_HOST}\nport=3306\nuser=slurm_admin\npassword="s3cr#t-Pass"\n'
        # TLS, the server's certificate and name verified with the RDS bundle
        "ssl-ca=/etc/training-clusters/rds-ca-bundle.pem\nloose-ssl-verify-server-cert\n"
        "loose-ssl-mode=VERIFY_IDENTITY\n"
    )
    assert (sandbox.state / "mysql.defaults.mode").read_text() == "600\n"
    assert sorted(p.name for p in sandbox.path("etc/training-clusters").iterdir()) == [
        "rds-ca-bundle.pem",  # the RDS certificate bundle is kept: slurmdbd reads it
        "slurm-keys.conf",
    ]
    assert "s3cr" not in sandbox.calls_file.read_text()
    assert "s3cr" not in run.log and "s3cr" not in run.output


def test_an_external_database_that_never_answers_fails_the_step(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting=EXTERNAL)

    run = sandbox.as_role("controller").run(**secret_env(STUB_MYSQL_UNREACHABLE="1"))

    assert_failed_step(run, "accounting")
    errors = [line.split(" ERROR [accounting] ", 1)[1] for line in run.log.splitlines() if " ERROR [" in line]
    assert errors == [
        f"the database {DB_HOST}:3306 did not answer within 30s: ERROR 2003 (HY000): Can't connect to MySQL"
        f" server on '{DB_HOST}:3306' (110) (is its writer instance available, and does its security group"
        " admit this node?)",
        "FAILED step 'accounting' (exit 1)",
    ]
    # TC_DATABASE_WAIT_ATTEMPTS=3 in the sandbox: three tries, then no CREATE DATABASE
    assert [call[1:] for call in run.calls_to("mysql")] == [
        ["--connect-timeout=5", "-N", "-e", "SELECT 1"]
    ] * 3
    assert not (sandbox.state / "mysql.sql").exists()  # nothing created
    assert not sandbox.path(SLURMDBD_CONF).exists()
    assert run.calls_to("sacctmgr") == [] and "slurmdbd" not in run.started()
    assert sorted(p.name for p in sandbox.path("etc/training-clusters").iterdir()) == [
        "rds-ca-bundle.pem",  # the RDS certificate bundle is kept: slurmdbd reads it
        "slurm-keys.conf",
    ]
    assert "s3cr" not in sandbox.calls_file.read_text() and "s3cr" not in run.log


def test_the_mysql_client_is_installed_when_the_ami_has_none(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting=EXTERNAL)
    sandbox.remove_command("mysql")

    run = sandbox.as_role("controller").run(**secret_env())

    assert run.returncode == 0, run.output
    installs = [call for call in run.calls_to("apt-get") if "install" in call]
    assert [call[-4:] for call in installs] == [
        ["install", "-y", "--no-install-recommends", "mariadb-client"]
    ]
    assert (sandbox.state / "mysql.sql").read_text() == "CREATE DATABASE IF NOT EXISTS `slurm_acct_db`;\n"


def test_accounting_runs_again_without_a_change(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting={**EXTERNAL, "user": "admin", "database": "team_acct"})
    sandbox.as_role("controller")
    first = sandbox.run(**secret_env())
    before = sandbox.snapshot()

    second = sandbox.run(**secret_env())

    assert first.returncode == 0 and second.returncode == 0, second.output
    assert sandbox.snapshot() == before
    assert "StorageUser=admin" in conf_lines(sandbox, SLURMDBD_CONF)
    assert "StorageLoc=team_acct" in conf_lines(sandbox, SLURMDBD_CONF)
    assert not [c for c in second.calls_to("sacctmgr") if "add" in c]
    assert "cluster ml-cluster is already registered with slurmdbd" in second.log
    assert (sandbox.state / "clusters").read_text() == "ml-cluster\n"


def test_accounting_keys_come_back_when_hyperpod_rewrites_slurm_conf(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting=EXTERNAL)
    sandbox.as_role("controller").run(**secret_env())
    conf = sandbox.path(SLURM_CONF)
    conf.write_text(conf.read_text().replace("accounting_storage/slurmdbd", "accounting_storage/none"))

    keys_command = str(sandbox.path("usr/local/sbin/training-clusters-slurm-keys"))
    run = sandbox.run_command([shutil.which("bash") or "/bin/bash", keys_command])

    assert run.returncode == 0, run.output
    assert "AccountingStorageType=accounting_storage/slurmdbd" in conf_lines(sandbox, SLURM_CONF)
    assert ["reconfigure"] in run.calls_to("scontrol")


def test_the_controller_restarts_its_daemons_only_when_their_configuration_changed(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting=EXTERNAL)
    sandbox.as_role("controller")
    first = sandbox.run(**secret_env())
    second = sandbox.run(**secret_env())
    # Another requeue code: this run changes slurm.conf, not slurmdbd.conf.
    sandbox.write_params(accounting=EXTERNAL, slurm_requeue_exit_codes=[75, 99])
    requeue = sandbox.run(**secret_env())
    # The database moved to another port: slurmdbd.conf changes, slurm.conf does not.
    sandbox.write_params(accounting={**EXTERNAL, "port": 3307}, slurm_requeue_exit_codes=[75, 99])
    new_port = sandbox.run(**secret_env())
    for daemon in ("slurmdbd", "slurmctld"):  # nothing changed, but neither runs
        (sandbox.state / f"unit.{daemon}.service").write_text("failed\n")
    stopped = sandbox.run(**secret_env())

    for run in (first, second, requeue, new_port, stopped):
        assert run.returncode == 0, run.output
    assert first.slurm_restarts() == [["restart", "slurmdbd"], ["restart", "slurmctld"]]
    assert second.slurm_restarts() == []
    assert "slurmdbd already runs with this configuration: not restarted" in second.log
    assert "slurmctld already runs with this configuration: not restarted" in second.log
    assert requeue.slurm_restarts() == [["restart", "slurmctld"]]
    assert "RequeueExit=75,99" in conf_lines(sandbox, SLURM_CONF)
    assert new_port.slurm_restarts() == [["restart", "slurmdbd"]]
    assert "StoragePort=3307" in conf_lines(sandbox, SLURMDBD_CONF)
    assert stopped.slurm_restarts() == [["restart", "slurmdbd"], ["restart", "slurmctld"]]


def test_a_secret_the_role_cannot_read_fails_the_step(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting=EXTERNAL)

    run = sandbox.as_role("controller").run(**secret_env(STUB_AWS_DENIED="1"), TC_ACCOUNTING_RETRY_SLEEP="0")

    assert_failed_step(run, "accounting")
    assert len(run.calls_to("aws")) == 5
    assert "AccessDeniedException" in run.output
    assert not sandbox.path(SLURMDBD_CONF).exists()


def test_a_secret_read_that_fails_once_is_retried(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting=EXTERNAL)

    run = sandbox.as_role("controller").run(**secret_env(STUB_AWS_FAILURES="1"))

    assert run.returncode == 0, run.output
    assert len(run.calls_to("aws")) == 2
    assert "attempt 1/5 failed" in run.log
    conf = conf_lines(sandbox, SLURMDBD_CONF)
    assert "StoragePass=s3cr\\#t-Pass" in conf and "StorageUser=slurm_admin" in conf


def test_slurmdbd_that_never_answers_fails_the_step(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting=EXTERNAL)

    run = sandbox.as_role("controller").run(**secret_env(STUB_SLURMDBD_FAILS="1"))

    assert_failed_step(run, "accounting")
    assert "slurmdbd is not up after 30s: slurmdbd is activating" in run.log
    assert "Problem talking to the database" in run.log
    assert not [c for c in run.calls_to("sacctmgr") if "add" in c]


def test_local_mariadb_accounting(sandbox: Sandbox) -> None:
    sandbox.write_params(accounting={"mode": "local"})
    sandbox.as_role("controller")

    first = sandbox.run()
    before = sandbox.snapshot()
    second = sandbox.run()

    assert first.returncode == 0 and second.returncode == 0, second.output
    assert first.calls_to("aws") == []
    assert any("mariadb-server" in call for call in first.calls_to("apt-get"))
    password_file = sandbox.path("etc/training-clusters/slurmdbd-db.password")
    password = password_file.read_text().strip()
    assert len(password) >= 24 and stat.S_IMODE(password_file.stat().st_mode) == 0o600
    conf = conf_lines(sandbox, SLURMDBD_CONF)
    assert {"StorageHost=localhost", "StorageUser=slurm", f"StoragePass={password}"} <= set(conf)
    sql = (sandbox.state / "mysql.sql").read_text()
    assert "CREATE DATABASE IF NOT EXISTS slurm_acct_db;" in sql
    assert f"CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '{password}';" in sql
    assert password not in first.output
    assert sandbox.snapshot() == before  # the same password, the same files


@pytest.mark.parametrize("role", ["worker", "login"])
def test_accounting_is_the_controllers_only(sandbox: Sandbox, role: str) -> None:
    sandbox.write_params(accounting=EXTERNAL)

    run = sandbox.as_role(role).run(**secret_env())

    assert run.returncode == 0, run.output
    assert "step 'accounting' skipped: runs on the controller only" in run.log
    assert run.calls_to("aws") == [] and run.calls_to("sacctmgr") == []


def test_no_accounting_by_default(sandbox: Sandbox) -> None:
    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert "step 'accounting' skipped: accounting mode is none" in run.log
    assert not any(line.startswith("AccountingStorage") for line in conf_lines(sandbox, SLURM_CONF))
    assert not sandbox.path(SLURMDBD_CONF).exists()


@pytest.mark.parametrize(
    ("accounting", "message"),
    [
        ({"mode": "remote"}, "accounting must be an object with mode none, local or external"),
        (
            {**EXTERNAL, "secret_arn": "my-secret"},
            "accounting.secret_arn must be the ARN of a Secrets Manager",
        ),
        ({**EXTERNAL, "port": 70000}, "accounting.port must be a TCP port 1-65535, got 70000"),
        ({"mode": "local", "host": DB_HOST}, "accounting.host is not a setting of mode 'local'"),
        ({**EXTERNAL, "host": "db host"}, "accounting.host must be the database's DNS name, got 'db host'"),
        ({**EXTERNAL, "database": "acct-db"}, "accounting.database must be 1-64 letters, digits or '_'"),
    ],
)
def test_bad_accounting_settings_fail_preflight(sandbox: Sandbox, accounting: Any, message: str) -> None:
    sandbox.write_params(accounting=accounting)

    run = sandbox.as_role("controller").run()

    assert_failed_step(run, "preflight")
    assert message in run.output


def test_accounting_leaves_hyperpods_topology_untouched(sandbox: Sandbox) -> None:
    topology_conf = "SwitchName=spine Switches=leaf1\nSwitchName=leaf1 Nodes=ip-10-1-1-[11-12]\n"
    sandbox.write_params(accounting=EXTERNAL)
    sandbox.as_role("controller")
    conf = sandbox.path(SLURM_CONF)
    conf.write_text(conf.read_text() + "TopologyPlugin=topology/tree\n")
    topology = sandbox.write("opt/slurm/etc/topology.conf", topology_conf)

    run = sandbox.run(**secret_env())

    assert run.returncode == 0, run.output
    assert "TopologyPlugin=topology/tree" in conf_lines(sandbox, SLURM_CONF)
    assert topology.read_text() == topology_conf


# -- users ---------------------------------------------------------------------------------------


def passwd(sandbox: Sandbox) -> list[str]:
    return (sandbox.state / "passwd").read_text().splitlines()


def group(sandbox: Sandbox) -> list[str]:
    return (sandbox.state / "group").read_text().splitlines()


@pytest.mark.parametrize("role", ["controller", "login", "worker"])
def test_users_have_fixed_ids_and_homes_on_fsx(sandbox: Sandbox, role: str) -> None:
    sandbox.write_params(users=USERS)

    run = sandbox.as_role(role).run()

    assert run.returncode == 0, run.output
    assert passwd(sandbox) == [
        "alice:x:2001:2001::/fsx/alice:/bin/bash",
        "bob:x:2002:2100::/fsx/bob:/bin/bash",
    ]
    assert group(sandbox) == ["alice:x:2001:", "bob:x:2100:", "ml-team:x:3000:bob"]
    keys = sandbox.path("fsx/alice/.ssh/authorized_keys").read_text().splitlines()
    assert keys == [
        "# BEGIN training-clusters managed keys",
        sandbox.path("fsx/alice/.ssh/id_ed25519.pub")
        .read_text()
        .strip(),  # its own pair: srun / mpirun over ssh
        ALICE_KEY,
        "# END training-clusters managed keys",
    ]
    assert keys[1].endswith(" alice@training-clusters")
    assert sandbox.path("fsx/bob/.ssh/id_ed25519").exists()
    assert ["2001:2001", str(sandbox.path("fsx/alice"))] in run.calls_to("chown")
    assert "users.sh: created user alice (uid 2001, gid 2001)" in run.log  # the shared users.sh did it
    assert "2 users in place: alice bob" in run.log


def test_users_run_again_without_a_change(sandbox: Sandbox) -> None:
    sandbox.write_params(users=USERS)
    first = sandbox.run()
    before = sandbox.snapshot()
    tables = (passwd(sandbox), group(sandbox))

    second = sandbox.run()

    assert first.returncode == 0 and second.returncode == 0, second.output
    assert sandbox.snapshot() == before
    assert (passwd(sandbox), group(sandbox)) == tables
    assert second.calls_to("useradd") == [] and second.calls_to("groupadd") == []
    assert second.calls_to("usermod") == [] and second.calls_to("ssh-keygen") == []


def test_inside_a_home_everything_is_done_as_its_user(sandbox: Sandbox) -> None:
    """A user may leave symbolic links in their home on the shared file system; root never writes there
    (only the new home's first chown), so the kernel judges every write as the user's."""
    sandbox.write_params(users=USERS)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    as_user = run.calls_to("runuser")
    assert {tuple(args[:3]) for args in as_user} == {("-u", "alice", "--"), ("-u", "bob", "--")}
    for args in as_user:  # every path a user's command names is in that user's home (or /etc/skel)
        home = str(sandbox.path(f"fsx/{args[1]}"))
        paths = [a for a in args[3:] if a.startswith(str(sandbox.root))]
        assert paths and all(
            a == home or a.startswith((home + "/", str(sandbox.path("etc/skel")))) for a in paths
        )
    homes = (str(sandbox.path("fsx/alice")), str(sandbox.path("fsx/bob")))
    by_root = [args for command in ("chown", "chmod") for args in run.calls_to(command)]
    assert [args for args in by_root if any(a.startswith(homes) for a in args)] == [
        ["2001:2001", homes[0]],
        ["2002:2100", homes[1]],
    ]
    keygens = run.calls_to("ssh-keygen")
    alice_keygen = next(args for args in keygens if "alice@training-clusters" in args)
    assert alice_keygen == [
        *["-q", "-t", "ed25519", "-N", "", "-C", "alice@training-clusters", "-f"],
        str(sandbox.path("fsx/alice/.ssh/id_ed25519")),
    ]
    assert ["-u", "alice", "--", "ssh-keygen"] in [args[:4] for args in as_user]  # made by the user


@pytest.mark.parametrize("link", ["alice", "alice/.ssh"])
def test_a_home_or_ssh_folder_that_is_a_link_is_refused(sandbox: Sandbox, link: str) -> None:
    sandbox.write_params(users=USERS)
    target = sandbox.path("root/.ssh")
    target.mkdir(parents=True)
    planted = sandbox.path(f"fsx/{link}")
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.symlink_to(target)  # left by alice in her home on the shared file system

    run = sandbox.run()

    assert_failed_step(run, "users")
    assert {
        "alice": "users.sh: error: the home of alice, /fsx/alice, is a symbolic link: refusing to use it",
        "alice/.ssh": "users.sh: error: /fsx/alice/.ssh of alice is a symbolic link: refusing to use it",
    }[link] in run.output.splitlines()
    assert list(target.iterdir()) == []
    assert run.calls_to("runuser") == []


def test_a_home_lock_that_is_a_link_is_refused(sandbox: Sandbox) -> None:
    sandbox.write_params(users=USERS)
    sandbox.path("fsx").mkdir(parents=True, exist_ok=True)
    sandbox.path("fsx/.training-clusters-home.lock").symlink_to(sandbox.path("etc/fstab"))

    run = sandbox.run()

    assert_failed_step(run, "users")
    assert "/fsx/.training-clusters-home.lock is a symbolic link: refusing to open it" in run.output


def test_a_user_with_another_uid_fails_the_step(sandbox: Sandbox) -> None:
    sandbox.write_params(users=USERS)
    (sandbox.state / "passwd").write_text("alice:x:3005:3005::/home/alice:/bin/bash\n")

    run = sandbox.run()

    assert_failed_step(run, "users")
    assert "user alice exists with uid 3005, not 2001" in run.output


def test_a_taken_uid_fails_the_step(sandbox: Sandbox) -> None:
    sandbox.write_params(users=USERS)
    (sandbox.state / "passwd").write_text("carol:x:2002:2002::/home/carol:/bin/bash\n")

    run = sandbox.run()

    assert_failed_step(run, "users")
    assert "users.sh: error: uid 2002 of user bob already belongs to user carol" in run.output.splitlines()


def test_users_without_fsx_get_local_homes(sandbox: Sandbox) -> None:
    sandbox.write_params(users=USERS[:1], fsx_dns_name=None, fsx_mountname=None, fsx_mount_dir=None)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert passwd(sandbox) == ["alice:x:2001:2001::/home/alice:/bin/bash"]
    assert "homes are local to each node" in run.log


def test_no_users_by_default(sandbox: Sandbox) -> None:
    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert "step 'users' skipped: no users in training_clusters.json" in run.log
    assert run.calls_to("useradd") == [] and run.calls_to("groupadd") == []


@pytest.mark.parametrize(
    ("users", "message"),
    [
        ([{"name": "ubuntu", "uid": 2001}], "users[0].name must be a Linux user name"),
        (
            [{"name": "alice\n", "uid": 2001}],
            "users[0].name must be a Linux user name",
        ),  # no trailing newline
        ([{"name": "alice", "uid": 1000}], "users[0].uid must be a number 2000-59999"),
        ([{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2001}], "users[1].uid 2001 is used twice"),
        ([{"name": "alice", "uid": 2001, "ssh_public_keys": ["hello"]}], "users[0].ssh_public_keys must be"),
        (
            [{"name": "alice", "uid": 2001, "groups": [{"name": "ml", "gid": 7}]}],
            "users[0].groups[0].gid must be",
        ),
    ],
)
def test_bad_users_fail_preflight(sandbox: Sandbox, users: Any, message: str) -> None:
    sandbox.write_params(users=users)

    run = sandbox.run()

    assert_failed_step(run, "preflight")
    assert message in run.output


# -- docker --------------------------------------------------------------------------------------


def test_docker_on_a_gpu_worker(sandbox: Sandbox) -> None:
    sandbox.write_params(enable_docker=True)

    run = sandbox.run(STUB_GPU="1", STUB_NVME="1")

    assert run.returncode == 0, run.output
    installs = [call for call in run.calls_to("apt-get") if "install" in call]
    assert any("docker.io" in call for call in installs)
    assert ["runtime", "configure", "--runtime=docker"] in run.calls_to("nvidia-ctk")
    daemon = json.loads(sandbox.path("etc/docker/daemon.json").read_text())
    assert daemon["data-root"] == "/opt/dlami/nvme/docker/data-root"
    assert {"enable", "docker"} <= {arg for call in run.calls_to("systemctl") for arg in call}
    assert run.log.index("step 'docker' started") < run.log.index("step 'slurm-worker' started")


def test_no_docker_by_default(sandbox: Sandbox) -> None:
    run = sandbox.run(STUB_GPU="1")

    assert run.returncode == 0, run.output
    assert "step 'docker' skipped: enable_docker is false" in run.log
    assert not any("docker.io" in call for call in run.calls_to("apt-get"))
    assert not sandbox.path("etc/docker/daemon.json").exists()


# -- pam_slurm_adopt -----------------------------------------------------------------------------

COMMON_SESSION = (
    "session [default=1] pam_permit.so\nsession optional pam_systemd.so\nsession required pam_unix.so\n"
)
SSHD_PAM = AMI_SSHD_PAM


def test_pam_slurm_adopt_on_a_worker_built_from_slurms_source(sandbox: Sandbox) -> None:
    sandbox.write_params(enable_pam_slurm_adopt=True)
    sandbox.write("etc/pam.d/sshd", SSHD_PAM)
    sandbox.write("etc/pam.d/common-session", COMMON_SESSION)

    first = sandbox.run()
    before = sandbox.snapshot()
    second = sandbox.run()

    assert first.returncode == 0 and second.returncode == 0, second.output
    [download] = [call for call in first.calls_to("curl") if "slurm-24.11.1.tar.bz2" in call[-1]]
    assert download[-1] == "https://download.schedmd.com/slurm/slurm-24.11.1.tar.bz2"
    sshd = conf_lines(sandbox, "etc/pam.d/sshd")
    assert sshd[-2:] == [
        "account sufficient pam_access.so accessfile=/etc/security/training-clusters-access.conf",
        "account required /lib/security/pam_slurm_adopt.so",
    ]
    assert conf_lines(sandbox, "etc/security/training-clusters-access.conf")[1:] == [
        "+:root ubuntu:ALL",
        "-:ALL:ALL",
    ]
    session = conf_lines(sandbox, "etc/pam.d/common-session")
    assert "# disabled for pam_slurm_adopt: session optional pam_systemd.so" in session
    assert sandbox.path("var/backups/training-clusters/common-session.orig").read_text() == COMMON_SESSION
    logind = [call for call in first.calls_to("systemctl") if "systemd-logind" in call]
    assert logind == [["stop", "systemd-logind"], ["mask", "systemd-logind"]]
    assert sandbox.snapshot() == before  # nothing built, doubled or commented twice
    assert not [c for c in second.calls_to("make") if "contribs/pam_slurm_adopt" in c]


def test_a_new_worker_is_guarded_before_any_team_account_exists(sandbox: Sandbox) -> None:
    """Issue 40, Medium 6: the homes (and authorized_keys) of the team may already be on FSx, so a user can log in
    the moment their account exists: the metadata guard and pam_slurm_adopt come first."""
    sandbox.write_params(users=USERS, enable_pam_slurm_adopt=True)
    sandbox.write("etc/pam.d/sshd", SSHD_PAM)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    steps = re.findall(r"step '([\w-]+)' (?:started|skipped)", run.log)
    assert steps.index("imds-guard") < steps.index("controller-access") < steps.index("pam-slurm-adopt")
    assert steps.index("pam-slurm-adopt") + 1 == steps.index("users")
    first_account = min(i for i, call in enumerate(run.calls) if call[0] in ("useradd", "groupadd"))
    guard = next(
        i for i, call in enumerate(run.calls) if call[1:] == ["restart", "training-clusters-imds.service"]
    )
    logind = next(i for i, call in enumerate(run.calls) if call[1:] == ["mask", "systemd-logind"])
    assert guard < logind < first_account


@pytest.mark.parametrize(("group", "ip"), [("worker-group-1", "10.1.1.11"), ("worker-group-2", "10.1.2.21")])
def test_pam_slurm_adopt_covers_every_worker_group(sandbox: Sandbox, group: str, ip: str) -> None:
    """Every instance group of worker_groups is a worker, so each gets pam_slurm_adopt (not only the first)."""
    sandbox.write_params(enable_pam_slurm_adopt=True)
    sandbox.write("opt/slurm/lib/security/pam_slurm_adopt.so", "module")
    sandbox.node_ip = ip

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert f"role=worker group={group}" in run.log
    assert "step 'pam-slurm-adopt' done" in run.log
    assert (
        conf_lines(sandbox, "etc/pam.d/sshd")[-1]
        == "account required /opt/slurm/lib/security/pam_slurm_adopt.so"
    )


def test_pam_slurm_adopt_uses_the_module_slurm_ships(sandbox: Sandbox) -> None:
    sandbox.write_params(enable_pam_slurm_adopt=True)
    sandbox.write("opt/slurm/lib/security/pam_slurm_adopt.so", "module")

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert not [c for c in run.calls_to("curl") if "schedmd" in c[-1]]
    assert "account required /opt/slurm/lib/security/pam_slurm_adopt.so" in conf_lines(
        sandbox, "etc/pam.d/sshd"
    )


def test_the_controller_contains_jobs_for_pam_slurm_adopt(sandbox: Sandbox) -> None:
    sandbox.write_params(enable_pam_slurm_adopt=True)

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert "PrologFlags=Contain" in conf_lines(sandbox, SLURM_CONF)
    assert "step 'pam-slurm-adopt' skipped: runs on workers only" in run.log
    assert sandbox.path("etc/pam.d/sshd").read_text() == SSHD_PAM  # the AMI's, untouched


def test_no_pam_slurm_adopt_by_default(sandbox: Sandbox) -> None:
    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert "step 'pam-slurm-adopt' skipped: enable_pam_slurm_adopt is false" in run.log
    assert sandbox.path("etc/pam.d/sshd").read_text() == SSHD_PAM  # the AMI's, untouched


# --- Instance metadata for root only (imds-guard) --------------------------------------------------
# The rules themselves are shown on real netfilter by tests/integration/test_slurm_real.py.


@pytest.mark.parametrize("role", ["controller", "login", "worker"])
def test_nodes_with_users_keep_instance_metadata_for_root(sandbox: Sandbox, role: str) -> None:
    sandbox = sandbox.as_role(role)
    sandbox.write_params(users=USERS)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    command = sandbox.path("usr/local/sbin/training-clusters-imds")
    assert command.read_bytes() == (SHARED / "training-clusters-imds.sh").read_bytes()
    assert stat.S_IMODE(command.stat().st_mode) == 0o755
    unit = conf_lines(sandbox, "etc/systemd/system/training-clusters-imds.service")
    assert "ExecStart=/usr/local/sbin/training-clusters-imds" in unit
    assert "Before=network-online.target systemd-user-sessions.service ssh.service sshd.service" in unit
    assert ["enable", "training-clusters-imds.service"] in run.calls_to("systemctl")
    assert ["restart", "training-clusters-imds.service"] in run.calls_to("systemctl")
    steps = re.findall(r"step '([\w-]+)' started", run.log)
    assert steps.index("imds-guard") < steps.index("users")  # in force before any team account exists


def test_nodes_without_users_leave_instance_metadata_alone(sandbox: Sandbox) -> None:
    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert "step 'imds-guard' skipped: no users in training_clusters.json" in run.log
    assert not sandbox.path("usr/local/sbin/training-clusters-imds").exists()
    assert not [call for call in run.calls_to("systemctl") if "training-clusters-imds.service" in call]


def test_a_failing_imds_guard_fails_the_step(sandbox: Sandbox) -> None:
    sandbox.write_params(users=USERS)

    run = sandbox.run(STUB_SYSTEMCTL_FAIL="restart training-clusters-imds.service")

    assert_failed_step(run, "imds-guard")
    assert "step 'slurm-worker' started" not in run.log


def _imds_guard(sandbox: Sandbox, *args: str, **env: str) -> Run:
    """training-clusters-imds run on the node (netfilter emulated by the stub: tables in stub-state)."""
    command = [
        shutil.which("bash") or "/bin/bash",
        str(sandbox.scripts / "shared" / "training-clusters-imds.sh"),
    ]
    return sandbox.run_command([*command, *args], **env)


def _netfilter(sandbox: Sandbox, command: str) -> list[str]:
    """The chains and rules ``command`` (iptables or ip6tables) holds, in order, a line each."""
    tables = sandbox.state / f"{command}.rules"
    return tables.read_text().splitlines() if tables.exists() else []


def _imds_tables(address: str, *uids: int) -> list[str]:
    """The whole of one family's tables after the guard: the jump to its chain first in OUTPUT, then the
    chain, whose rules let the uids' packets through and reject everyone else's (TCP with a reset)."""
    return [
        f"rule OUTPUT -d {address} -j TC-IMDS",
        "chain TC-IMDS",
        *(f"rule TC-IMDS -m owner --uid-owner {uid} -j RETURN" for uid in (0, *uids)),
        "rule TC-IMDS -p tcp -j REJECT --reject-with tcp-reset",
        "rule TC-IMDS -j REJECT",
    ]


def test_the_imds_guard_lets_root_and_the_allowed_users_reach_imds_and_rejects_everyone_else(
    sandbox: Sandbox,
) -> None:
    """Every rule of the chain, in order, for both families; run again (every boot), it rebuilds the chain
    and leaves one jump to it."""
    for command in ("iptables", "ip6tables"):
        sandbox.add_command(command)
    (sandbox.state / "passwd").write_text("pcluster-admin:x:401:401::/home/pcluster-admin:/bin/bash\n")

    first = _imds_guard(sandbox, "--allow", "pcluster-admin")
    after_first = {command: _netfilter(sandbox, command) for command in ("iptables", "ip6tables")}
    second = _imds_guard(sandbox, "--allow", "pcluster-admin")

    assert first.returncode == 0 and second.returncode == 0, second.output
    expected = {
        "iptables": _imds_tables("169.254.169.254/32", 401),
        "ip6tables": _imds_tables("fd00:ec2::254/128", 401),
    }
    assert after_first == expected
    assert {command: _netfilter(sandbox, command) for command in expected} == expected
    assert second.output.splitlines() == [
        "training-clusters-imds: iptables: only uids 0 401 reach 169.254.169.254/32",
        "training-clusters-imds: ip6tables: only uids 0 401 reach fd00:ec2::254/128",
    ]
    assert ["-w", "-F", "TC-IMDS"] in second.calls_to("iptables")  # the chain emptied, then refilled
    assert not [call for call in second.calls_to("iptables") if call[1] == "-I"]


def test_the_imds_guard_without_ipv6_netfilter_guards_ipv4_for_root_only(sandbox: Sandbox) -> None:
    for command in ("iptables", "ip6tables"):
        sandbox.add_command(command)

    run = _imds_guard(sandbox, STUB_NO_IP6TABLES="1")

    assert run.returncode == 0, run.output
    assert _netfilter(sandbox, "iptables") == _imds_tables("169.254.169.254/32")
    assert _netfilter(sandbox, "ip6tables") == []
    assert run.output.splitlines() == [
        "training-clusters-imds: iptables: only root reaches 169.254.169.254/32",
        "training-clusters-imds: no IPv6 netfilter on this node: the IPv6 address of IMDS is left as it is",
    ]
    assert run.calls_to("ip6tables") == [["-w", "-S", "OUTPUT"]]


# --- The controller for administrators only (controller-access) ------------------------------------
# Real sshd refusing a team user there, and letting the same user into a worker, is shown on the real-Slurm
# bed (tests/integration/test_slurm_real.py).

ADMINS_FILE = "etc/security/training-clusters-admins.conf"


def test_the_controller_lets_only_administrators_log_in_over_ssh(sandbox: Sandbox) -> None:
    sandbox = sandbox.as_role("controller")
    sandbox.write_params(users=USERS)
    sandbox.write("etc/pam.d/sshd", SSHD_PAM)

    first = sandbox.run()
    before = sandbox.snapshot()
    second = sandbox.run()

    assert first.returncode == 0 and second.returncode == 0, second.output
    assert conf_lines(sandbox, "etc/pam.d/sshd") == [
        *SSHD_PAM.splitlines(),
        "account required pam_access.so accessfile=/etc/security/training-clusters-admins.conf",
    ]
    assert conf_lines(sandbox, ADMINS_FILE)[1:] == ["+:root ubuntu:ALL", "-:ALL:ALL"]
    assert sandbox.path("var/backups/training-clusters/sshd.orig").read_text() == SSHD_PAM
    assert passwd(sandbox)[0] == "alice:x:2001:2001::/fsx/alice:/bin/bash"  # Slurm still resolves them
    steps = re.findall(r"step '([\w-]+)' started", first.log)
    assert steps.index("imds-guard") + 1 == steps.index("controller-access")
    assert steps.index("controller-access") < steps.index("users")
    assert sandbox.snapshot() == before


@pytest.mark.parametrize(
    ("role", "settings", "reason"),
    [
        ("login", {"users": USERS}, "runs on the controller only"),
        ("worker", {"users": USERS}, "runs on the controller only"),
        ("controller", {}, "no users in training_clusters.json: only administrators log in"),
        (
            "controller",
            {"users": USERS, "team_logins_on_controller": True},
            "team_logins_on_controller is true: the team logs in here too",
        ),
    ],
)
def test_team_logins_stay_open_elsewhere(
    sandbox: Sandbox, role: str, settings: dict[str, Any], reason: str
) -> None:
    sandbox = sandbox.as_role(role)
    sandbox.write_params(**settings)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert f"step 'controller-access' skipped: {reason}" in run.log
    assert not sandbox.path(ADMINS_FILE).exists()


def test_team_logins_on_controller_must_be_a_flag(sandbox: Sandbox) -> None:
    sandbox.as_role("controller").write_params(users=USERS, team_logins_on_controller="sometimes")

    run = sandbox.run()

    assert run.returncode != 0
    assert "team_logins_on_controller must be true or false, got 'sometimes'" in run.output
