"""The accounting database's TLS and slurmdbd's own user, on real MariaDB and real slurmdbd (issue 28).

The database node requires secure transport with a certificate of the bed's CA (hyperpod_bed.start_database:
what SlurmAccountingDatabase's parameter group and RDS's CAs give Aurora); the slurmdbd-user custom
resource's handler, the code of the construct's Lambda asset, made the user the controller's secret names
(accounting_bed.py). The controller runs on_create.sh as HyperPod runs it, fetching the bed's CA where it
would fetch AWS's RDS bundle (TC_RDS_CA_BUNDLE_URL). slurmdbd's secret is then rotated with alternating users
by the construct's rotation function (the same asset, Secrets Manager answered by botocore's Stubber in the
order Secrets Manager's four rotation steps call it), and the controller's hourly refresh
(training-clusters-slurmdbd-password, run by its real systemd unit, reading the secret through the bed's
stand-in for `aws secretsmanager get-secret-value`, hyperpod_bed.install_secret_reader) moves slurmdbd over.

What this cannot show: Aurora itself and AWS's bundle (the bed's CA stands in); HyperPod's AMI, whose Slurm
may be built against another MySQL client library than Debian's (MariaDB Connector/C 3.4, which verifies the
server's certificate and name when slurmdbd.conf names a CA: shown below).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration import accounting_bed
from tests.integration.conftest import TIMINGS
from tests.integration.hyperpod_bed import (
    CONTROLLER_IP,
    DATABASE_IP,
    EXTERNAL_ACCOUNTING,
    EXTERNAL_PASSWORD,
    SCRIPT_ENV,
    Cluster,
    start_database,
)
from tests.integration.slurm_bed import Bed, Node, missing_prerequisites, wait_until

pytestmark = pytest.mark.integration

SETTINGS = {"enable_enroot_pyxis": False, "accounting": EXTERNAL_ACCOUNTING}
#: The user the controller's secret names (hyperpod_bed.install_secret_reader), made by the handler.
USER = "slurm_admin"
MYSQL = f"mysql -h {DATABASE_IP} -u {USER} --connect-timeout=5 -N"


@dataclass
class Accounting:
    bed: Bed
    cluster: Cluster
    database: Node
    tls: accounting_bed.BedTls
    output: str
    returncode: int

    @property
    def controller(self) -> Node:
        return self.cluster.controller

    def client(
        self, options: str, query: str = "SELECT 1", *, password: str = EXTERNAL_PASSWORD
    ) -> tuple[int, str]:
        """A mysql client on the controller with OPTIONS: its exit status and the last line it printed (an
        error after the statement it echoes)."""
        result = self.controller.sh(f"MYSQL_PWD='{password}' {MYSQL} {options} -e \"{query}\"", check=False)
        return result.returncode, (result.stdout + result.stderr).strip().splitlines()[-1]

    def handler(self, **kwargs: Any) -> dict[str, Any]:
        return accounting_bed.run_user_handler(self.bed, host=DATABASE_IP, **kwargs)

    def grants(self) -> list[str]:
        shown = self.database.sh(f"mysql -N -e \"SHOW GRANTS FOR '{USER}'@'%'\"").stdout
        return shown.splitlines()


@pytest.fixture(scope="module")
def accounting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Accounting]:
    reason = missing_prerequisites()
    if reason:
        pytest.fail(reason)
    started = time.monotonic()
    bed = Bed(tmp_path_factory.mktemp("accounting-tls"))
    bed.__enter__()
    try:
        database = start_database(bed)
        tls = accounting_bed.bed_tls(bed, DATABASE_IP)
        bed.script_env = {
            **SCRIPT_ENV,
            **tls.script_env,
            "TC_DATABASE_WAIT_SLEEP": "1",
            "TC_DATABASE_WAIT_ATTEMPTS": "20",
        }
        cluster = Cluster(bed, SETTINGS)
        controller = cluster.prepare(CONTROLLER_IP)
        tls.install_ca(controller)
        controller.boot()
        run = cluster.provision([controller], agent_writes=True)[CONTROLLER_IP]
        TIMINGS.append(
            ("accounting", "database with TLS + controller: boot + on_create.sh", time.monotonic() - started)
        )
        yield Accounting(bed, cluster, database, tls, run.output, run.returncode)
    finally:
        bed.__exit__(None, None, None)


def native_password_hash(password: str) -> str:
    """mysql_native_password's stored form, as SHOW GRANTS prints it: '*' + SHA1(SHA1(password)), in hex."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


# -- the server requires TLS, and clients verify it -------------------------------------------------------


def test_the_controller_sets_up_accounting_over_verified_tls(accounting: Accounting) -> None:
    assert accounting.returncode == 0, accounting.output
    conf = accounting.controller.read("/opt/slurm/etc/slurmdbd.conf").splitlines()
    assert "StorageParameters=SSL_CA=/etc/training-clusters/rds-ca-bundle.pem" in conf
    assert f"StorageUser={USER}" in conf
    bundle = accounting.controller.read("/etc/training-clusters/rds-ca-bundle.pem")
    assert bundle == accounting.tls.authority.cert.read_text()
    clusters = accounting.controller.sh("/opt/slurm/bin/sacctmgr -n -P show cluster format=cluster").stdout
    assert clusters.split() == ["ml-cluster"]
    tables = accounting.database.sh("mysql -N -e 'SHOW TABLES FROM slurm_acct_db'").stdout.split()
    assert "ml-cluster_job_table" in tables
    # every connection of slurmdbd's user is encrypted (the server refuses others: next test)
    sessions = accounting.database.sh(
        "mysql -N -e \"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER='slurm_admin'\""
    ).stdout.split()
    assert int(sessions[0]) >= 1


def test_the_database_refuses_a_connection_without_tls(accounting: Accounting) -> None:
    assert accounting.client("--skip-ssl") == (
        1,
        "ERROR 3159 (08004): Connections using insecure transport are prohibited while "
        "--require_secure_transport=ON.",
    )


def test_a_client_trusting_another_ca_is_refused(accounting: Accounting) -> None:
    accounting.controller.write("/etc/bed/impostor-ca.pem", accounting.tls.impostor.cert.read_text())

    assert accounting.client("--ssl-ca=/etc/bed/impostor-ca.pem") == (
        1,
        "ERROR 2026 (HY000): TLS/SSL error: unable to get local issuer certificate",
    )
    assert accounting.client(f"--ssl-ca={accounting_bed.CA_ON_NODE}") == (0, "1")


def test_a_certificate_of_the_right_ca_for_another_name_is_refused(accounting: Accounting) -> None:
    """The host name is verified too: the database's certificate names 10.1.0.30, not its node name."""
    by_name = accounting.controller.sh(
        f"MYSQL_PWD='{EXTERNAL_PASSWORD}' mysql -h ip-10-1-0-30 -u {USER} --connect-timeout=5 -N "
        f"--ssl-ca={accounting_bed.CA_ON_NODE} -e 'SELECT 1'",
        check=False,
    )
    assert (by_name.returncode, by_name.stderr.strip()) == (
        1,
        "ERROR 2026 (HY000): TLS/SSL error: Hostname verification failed",
    )


def test_the_handler_refuses_a_server_it_cannot_verify(accounting: Accounting) -> None:
    answer = accounting.handler(
        request_type="Create",
        ca_file=accounting.tls.impostor.cert,
        databases=["slurm_acct_db"],
        user={"username": USER, "password": EXTERNAL_PASSWORD},
    )
    assert re.fullmatch(
        rf"UserError: cannot connect to {re.escape(DATABASE_IP)}:3306 as the master user: .*"
        r"CERTIFICATE_VERIFY_FAILED.*",
        answer["error"],
    ), answer


def test_slurmdbd_refuses_the_database_when_its_bundle_is_another_cas(accounting: Accounting) -> None:
    """slurmdbd itself verifies with SSL_CA (not only the scripts' mysql client): with the impostor's CA in
    the bundle's place it cannot connect; with the right one back it answers again."""
    controller = accounting.controller
    bundle = "/etc/training-clusters/rds-ca-bundle.pem"
    controller.write(bundle, accounting.tls.impostor.cert.read_text())
    try:
        controller.sh("truncate -s 0 /var/log/slurmdbd.log; systemctl restart slurmdbd")
        wait_until(
            "slurmdbd refusing the database's certificate",
            lambda: "TLS/SSL error" in controller.read("/var/log/slurmdbd.log"),
            seen=lambda: controller.read("/var/log/slurmdbd.log")[-600:],
            timeout=60,
        )
        log = controller.read("/var/log/slurmdbd.log")
        assert "mysql_real_connect failed: 2026 TLS/SSL error: unable to get local issuer certificate" in log
    finally:
        controller.write(bundle, accounting.tls.authority.cert.read_text())
        controller.sh("systemctl restart slurmdbd")
    wait_until(
        "slurmdbd answering again",
        lambda: (
            controller.sh(
                "/opt/slurm/bin/sacctmgr -n -P show cluster format=cluster", check=False
            ).stdout.split()
            == ["ml-cluster"]
        ),
        timeout=60,
    )


# -- slurmdbd's own user ----------------------------------------------------------------------------------


def test_slurmdbds_user_has_all_on_its_database_and_nothing_else(accounting: Accounting) -> None:
    assert accounting.grants() == [
        f"GRANT USAGE ON *.* TO `{USER}`@`%` IDENTIFIED BY PASSWORD '{native_password_hash(EXTERNAL_PASSWORD)}'"
        " REQUIRE SSL",
        f"GRANT ALL PRIVILEGES ON `slurm_acct_db`.* TO `{USER}`@`%`",
    ]
    ca = f"--ssl-ca={accounting_bed.CA_ON_NODE}"
    assert accounting.client(ca, "CREATE DATABASE other_db") == (
        1,
        f"ERROR 1044 (42000) at line 1: Access denied for user '{USER}'@'%' to database 'other_db'",
    )
    assert accounting.client(ca, "SELECT COUNT(*) FROM mysql.user") == (
        1,
        f"ERROR 1142 (42000) at line 1: SELECT command denied to user '{USER}'@'{CONTROLLER_IP}' for table "
        "`mysql`.`user`",
    )


def test_the_handler_is_idempotent_grants_an_added_database_and_revokes_a_dropped_one(
    accounting: Accounting,
) -> None:
    user = {"username": USER, "password": EXTERNAL_PASSWORD}
    ca = accounting.tls.authority.cert
    again = accounting.handler(request_type="Create", ca_file=ca, databases=["slurm_acct_db"], user=user)
    added = accounting.handler(
        request_type="Update", ca_file=ca, databases=["slurm_acct_db", "team_training"], user=user,
        old_databases=["slurm_acct_db"],
    )  # fmt: skip
    grants_with_two = accounting.grants()
    dropped = accounting.handler(
        request_type="Update", ca_file=ca, databases=["slurm_acct_db"], user=user,
        old_databases=["slurm_acct_db", "team_training"],
    )  # fmt: skip

    for answer in (again, added, dropped):
        assert answer["result"] == {
            "PhysicalResourceId": f"{DATABASE_IP}/slurmdbd-user",
            "Data": {"Username": USER},
        }, answer
    assert sorted(grants_with_two[1:]) == [  # SHOW GRANTS lists databases in no set order
        f"GRANT ALL PRIVILEGES ON `slurm_acct_db`.* TO `{USER}`@`%`",
        f"GRANT ALL PRIVILEGES ON `team_training`.* TO `{USER}`@`%`",
    ]
    assert accounting.grants()[1:] == [f"GRANT ALL PRIVILEGES ON `slurm_acct_db`.* TO `{USER}`@`%`"]


def test_a_delete_leaves_the_user_to_the_database(accounting: Accounting) -> None:
    answer = accounting.handler(
        request_type="Delete",
        ca_file=accounting.tls.authority.cert,
        databases=["slurm_acct_db"],
        user={"username": USER, "password": EXTERNAL_PASSWORD},
        old_databases=["slurm_acct_db"],
    )

    assert answer["result"] == {"PhysicalResourceId": f"{DATABASE_IP}/slurmdbd-user"}
    assert accounting.grants()[1:] == [f"GRANT ALL PRIVILEGES ON `slurm_acct_db`.* TO `{USER}`@`%`"]


# -- slurmdbd's rotating secret (alternating users), followed by the controller --------------------------------

REFRESH = "training-clusters-slurmdbd-password"
SECRET_ARN = EXTERNAL_ACCOUNTING["secret_arn"]
CLONE = f"{USER}_clone"
#: What GetRandomPassword hands the rotations here (32 letters and digits, as the function asks).
ROTATED_PASSWORD = "Rotated0123456789abcdefABCDEFghi"
SECOND_PASSWORD = "Second00123456789abcdefABCDEFghi"


def slurmdbd_pid(controller: Node) -> str:
    return controller.sh("systemctl show -p MainPID --value slurmdbd").stdout.strip()


def sessions_of(database: Node, user: str) -> int:
    query = f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER='{user}'"
    return int(database.sh(f'mysql -N -e "{query}"').stdout.split()[0])


def sacctmgr(controller: Node, arguments: str) -> str:
    return controller.sh(f"/opt/slurm/bin/sacctmgr {arguments}", check=False).stdout.strip()


def test_the_controller_follows_a_rotation_and_accounting_keeps_working(accounting: Accounting) -> None:
    """The rotation function (the construct's asset, Secrets Manager stubbed) gives the idle user a new
    password and makes it current; slurmdbd keeps working on its old login meanwhile, a second rotation may not
    touch that login while slurmdbd uses it, and the controller's refresh moves slurmdbd over."""
    controller, database = accounting.controller, accounting.database
    assert controller.sh(f"systemctl is-enabled {REFRESH}.timer").stdout.strip() == "enabled"
    assert controller.sh(f"systemctl is-active {REFRESH}.timer").stdout.strip() == "active"
    wait_until("slurmdbd holding a session as its user", lambda: sessions_of(database, USER) >= 1, timeout=60)
    ca = accounting.tls.authority.cert
    first = accounting_bed.Rotation(
        current={"username": USER, "password": EXTERNAL_PASSWORD, "engine": "mysql", "host": DATABASE_IP},
        token="11111111-1111-4111-8111-111111111111",
        password=ROTATED_PASSWORD,
    )

    rotated = accounting_bed.run_rotation(
        accounting.bed, first, host=DATABASE_IP, ca_file=ca, databases=["slurm_acct_db"],
        steps=accounting_bed.ROTATION_STEPS,
    )  # fmt: skip

    assert rotated == {"done": accounting_bed.ROTATION_STEPS}, rotated
    shown = database.sh(f"mysql -N -e \"SHOW GRANTS FOR '{CLONE}'@'%'\"").stdout.splitlines()
    assert shown == [
        f"GRANT USAGE ON *.* TO `{CLONE}`@`%` IDENTIFIED BY PASSWORD '{native_password_hash(ROTATED_PASSWORD)}'"
        " REQUIRE SSL",
        f"GRANT ALL PRIVILEGES ON `slurm_acct_db`.* TO `{CLONE}`@`%`",
    ]
    pid = slurmdbd_pid(controller)
    assert sacctmgr(controller, "-n -P show cluster format=cluster") == "ml-cluster"  # still on its old login

    # the next rotation would change the password slurmdbd still uses: refused, nothing changed
    second = accounting_bed.Rotation(
        current=first.pending, token="22222222-2222-4222-8222-222222222222", password=SECOND_PASSWORD
    )
    held = sessions_of(database, USER)  # slurmdbd usually holds exactly one: one refuses already
    refused = accounting_bed.run_rotation(
        accounting.bed, second, host=DATABASE_IP, ca_file=ca, databases=["slurm_acct_db"],
        steps=["createSecret", "setSecret"],
    )  # fmt: skip
    assert refused["done"] == ["createSecret"]
    assert re.fullmatch(
        rf"UserError: {USER} still has {held} session\(s\) open: slurmdbd has not moved to {CLONE} yet .*",
        refused["error"],
    ), refused
    assert accounting.grants()[0].endswith(f"'{native_password_hash(EXTERNAL_PASSWORD)}' REQUIRE SSL")

    # Secrets Manager's AWSCURRENT is now the clone's login: the controller's refresh follows it
    controller.write("/etc/bed/secret.json", json.dumps(first.pending) + "\n", 0o600)
    controller.sh(f"systemctl start {REFRESH}.service")

    conf = controller.read("/opt/slurm/etc/slurmdbd.conf").splitlines()
    assert f"StorageUser={CLONE}" in conf and f"StoragePass={ROTATED_PASSWORD}" in conf
    assert (
        controller.sh("stat -c '%a %U:%G' /opt/slurm/etc/slurmdbd.conf").stdout.strip() == "600 slurm:slurm"
    )
    assert slurmdbd_pid(controller) != pid
    wait_until(
        "slurmdbd answering on its new login",
        lambda: sacctmgr(controller, "-n -P show cluster format=cluster") == "ml-cluster",
        timeout=60,
    )
    assert "Adding Account(s)" in controller.sh("/opt/slurm/bin/sacctmgr -i add account rotated").stdout
    assert sacctmgr(controller, "-n -P show account rotated format=account") == "rotated"  # written to the DB
    wait_until(
        "slurmdbd holding a session as the clone", lambda: sessions_of(database, CLONE) >= 1, timeout=60
    )
    assert sessions_of(database, USER) == 0

    # run again: the secret has not changed, slurmdbd is not restarted
    pid = slurmdbd_pid(controller)
    again = controller.sh(f"/usr/local/sbin/{REFRESH} --secret-arn {SECRET_ARN} --region us-east-1")
    assert again.stdout.strip() == f"{REFRESH}: slurmdbd.conf already holds the secret's login: nothing to do"
    assert slurmdbd_pid(controller) == pid


def test_a_refresh_that_cannot_read_the_secret_fails_in_one_line_and_leaves_slurmdbd_running(
    accounting: Accounting,
) -> None:
    controller = accounting.controller
    conf = controller.read("/opt/slurm/etc/slurmdbd.conf")
    pid = slurmdbd_pid(controller)
    controller.write("/etc/bed/secret.denied", "")
    try:
        direct = controller.sh(
            f"/usr/local/sbin/{REFRESH} --secret-arn {SECRET_ARN} --region us-east-1", check=False
        )
        by_systemd = controller.sh(f"systemctl start {REFRESH}.service", check=False)
        state = controller.sh(f"systemctl is-failed {REFRESH}.service", check=False).stdout.strip()
    finally:
        controller.sh(f"rm -f /etc/bed/secret.denied; systemctl reset-failed {REFRESH}.service")

    assert direct.returncode == 1
    assert (direct.stdout + direct.stderr).splitlines() == [
        f"{REFRESH}: error: cannot read {SECRET_ARN} (slurmdbd.conf left as it is): An error occurred "
        "(AccessDeniedException) when calling the GetSecretValue operation: User is not authorized to perform: "
        "secretsmanager:GetSecretValue"
    ]
    assert by_systemd.returncode != 0 and state == "failed"
    assert controller.read("/opt/slurm/etc/slurmdbd.conf") == conf
    assert slurmdbd_pid(controller) == pid
    assert sacctmgr(controller, "-n -P show cluster format=cluster") == "ml-cluster"
