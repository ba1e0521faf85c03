"""slurmdbd's secret rotation function (the slurmdbd-user asset's ``on_rotation``), alternating users, offline:
Secrets Manager through botocore's Stubber (checked against the service model), the database a recording
stand-in for pymysql.connect that answers the queries the function makes. Against real MariaDB and a running
slurmdbd: tests/integration/test_accounting_real.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from training_clusters.node_scripts.handlers.slurmdbd_user.index import UserError, alternate_user, on_rotation

ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurmdbd-AbCdEf"
MASTER_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:master-AbCdEf"
HOST = "accounting.cluster-abc.us-east-1.rds.amazonaws.com"
BUNDLE = Path(__file__).resolve().parents[1] / "lifecycle" / "stubs" / "rds-ca-bundle.pem"
TOKEN = "c0ffee00-0000-4000-8000-000000000001"
OLD = "0ld00000-0000-4000-8000-000000000000"
CURRENT = {"username": "slurmdbd", "password": "Current-Pass", "engine": "mysql", "host": HOST, "port": 3306}
PENDING = {**CURRENT, "username": "slurmdbd_clone", "password": "NewPassword0123456789abcdefABCDEF"}
MASTER = {"username": "slurm", "password": "Master-Pass", "engine": "mysql"}
ENVIRONMENT = {
    "DATABASE_HOST": HOST,
    "DATABASE_PORT": "3306",
    "MASTER_SECRET_ARN": MASTER_ARN,
    "DATABASES": json.dumps(["slurm_acct_db"]),
    "CA_BUNDLE_URL": f"file://{BUNDLE}",
}


class Secrets:
    def __init__(self) -> None:
        session = boto3.session.Session(
            aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="x", region_name="us-east-1"
        )
        self.client_ = session.client("secretsmanager")
        self.stub = Stubber(self.client_)

    def client(self, name: str, **kwargs: Any) -> Any:
        assert name == "secretsmanager"
        return self.client_

    def describe(self, stages: dict[str, list[str]], *, enabled: bool = True) -> None:
        self.stub.add_response(
            "describe_secret",
            {"ARN": ARN, "RotationEnabled": enabled, "VersionIdsToStages": stages},
            {"SecretId": ARN},
        )

    def value(self, arn: str, secret: dict[str, Any], **version: str) -> None:
        self.stub.add_response(
            "get_secret_value",
            {"ARN": arn, "Name": arn.rsplit(":", 1)[1], "SecretString": json.dumps(secret)},
            {"SecretId": arn, **version},
        )


class Database:
    """The connections the function opens: who logged in, the statements, the answers it reads."""

    def __init__(self, sessions: int = 0, grants: list[str] | None = None) -> None:
        self.sessions = sessions
        self.grants = grants if grants is not None else []
        self.logins: list[dict[str, Any]] = []
        self.executed: list[tuple[str, tuple[str, ...]]] = []
        self._rows: list[tuple[Any, ...]] = []

    def connect(self, **kwargs: Any) -> Database:
        self.logins.append(kwargs)
        return self

    def cursor(self) -> Database:
        return self

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, statement: str, args: tuple[str, ...]) -> None:
        self.executed.append((statement, args))
        if "PROCESSLIST" in statement:
            self._rows = [(self.sessions,)]
        elif statement.startswith("SHOW GRANTS"):
            self._rows = [(line,) for line in self.grants]

    def fetchone(self) -> tuple[Any, ...]:
        return self._rows[0]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def close(self) -> None:
        """A recorded connection holds nothing to release."""


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[Secrets]:
    for key, value in ENVIRONMENT.items():
        monkeypatch.setenv(key, value)
    fake = Secrets()
    with fake.stub:
        yield fake
        fake.stub.assert_no_pending_responses()


def step(name: str) -> dict[str, str]:
    return {"SecretId": ARN, "ClientRequestToken": TOKEN, "Step": name}


ROTATING = {OLD: ["AWSCURRENT"], TOKEN: ["AWSPENDING"]}


def test_the_alternate_of_each_user_is_the_other() -> None:
    assert alternate_user("slurmdbd") == "slurmdbd_clone"
    assert alternate_user("slurmdbd_clone") == "slurmdbd"


def test_create_puts_the_other_user_with_a_new_password(secrets: Secrets) -> None:
    secrets.describe(ROTATING)
    secrets.value(ARN, CURRENT, VersionStage="AWSCURRENT")
    secrets.stub.add_client_error(
        "get_secret_value",
        service_error_code="ResourceNotFoundException",
        expected_params={"SecretId": ARN, "VersionId": TOKEN, "VersionStage": "AWSPENDING"},
    )
    secrets.stub.add_response(
        "get_random_password",
        {"RandomPassword": PENDING["password"]},
        {"PasswordLength": 32, "ExcludePunctuation": True},
    )
    secrets.stub.add_response(
        "put_secret_value",
        {"ARN": ARN, "VersionId": TOKEN, "VersionStages": ["AWSPENDING"]},
        {"SecretId": ARN, "ClientRequestToken": TOKEN, "SecretString": json.dumps(PENDING),
         "VersionStages": ["AWSPENDING"]},
    )  # fmt: skip

    on_rotation(step("createSecret"), None, session=secrets)


def test_create_again_for_the_same_token_changes_nothing(secrets: Secrets) -> None:
    secrets.describe(ROTATING)
    secrets.value(ARN, CURRENT, VersionStage="AWSCURRENT")
    secrets.value(ARN, PENDING, VersionId=TOKEN, VersionStage="AWSPENDING")

    on_rotation(step("createSecret"), None, session=secrets)


def test_set_gives_the_idle_user_its_password_and_exactly_the_grants(secrets: Secrets) -> None:
    secrets.describe(ROTATING)
    secrets.value(ARN, CURRENT, VersionStage="AWSCURRENT")
    secrets.value(ARN, PENDING, VersionId=TOKEN, VersionStage="AWSPENDING")
    secrets.value(MASTER_ARN, MASTER)
    database = Database(
        grants=[
            "GRANT USAGE ON *.* TO `slurmdbd_clone`@`%` REQUIRE SSL",
            "GRANT ALL PRIVILEGES ON `slurm_acct_db`.* TO `slurmdbd_clone`@`%`",
            "GRANT ALL PRIVILEGES ON `dropped_db`.* TO `slurmdbd_clone`@`%`",
        ]
    )

    on_rotation(step("setSecret"), None, session=secrets, connect=database.connect)

    [login] = database.logins
    assert (login["user"], login["password"], login["host"], login["port"]) == (
        "slurm",
        "Master-Pass",
        HOST,
        3306,
    )
    assert login["ssl_verify_cert"] is True and login["ssl_verify_identity"] is True
    new = PENDING["password"]
    assert database.executed == [
        ("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", ("slurmdbd_clone",)),
        ("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s REQUIRE SSL", ("slurmdbd_clone", new)),
        ("ALTER USER %s@'%%' IDENTIFIED BY %s REQUIRE SSL", ("slurmdbd_clone", new)),
        ("GRANT ALL PRIVILEGES ON `slurm_acct_db`.* TO %s@'%%'", ("slurmdbd_clone",)),
        ("SHOW GRANTS FOR %s@'%%'", ("slurmdbd_clone",)),
        ("REVOKE ALL PRIVILEGES ON `dropped_db`.* FROM %s@'%%'", ("slurmdbd_clone",)),
    ]


# slurmdbd usually holds exactly one connection: one session already refuses (none is the test above).
@pytest.mark.parametrize("sessions", [1, 2])
def test_set_refuses_a_user_that_still_has_a_session(secrets: Secrets, sessions: int) -> None:
    secrets.describe(ROTATING)
    secrets.value(ARN, CURRENT, VersionStage="AWSCURRENT")
    secrets.value(ARN, PENDING, VersionId=TOKEN, VersionStage="AWSPENDING")
    secrets.value(MASTER_ARN, MASTER)
    database = Database(sessions=sessions)

    with pytest.raises(UserError) as error:
        on_rotation(step("setSecret"), None, session=secrets, connect=database.connect)

    assert str(error.value) == (
        f"slurmdbd_clone still has {sessions} session(s) open: slurmdbd has not moved to slurmdbd yet (is the controller's "
        "training-clusters-slurmdbd-password.timer running?); its password stays, and the rotation is tried again "
        "later"
    )
    assert [statement for statement, _ in database.executed] == [
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s"
    ]


def test_set_refuses_a_pending_user_that_is_not_the_alternate(secrets: Secrets) -> None:
    secrets.describe(ROTATING)
    secrets.value(ARN, CURRENT, VersionStage="AWSCURRENT")
    secrets.value(ARN, {**PENDING, "username": "root"}, VersionId=TOKEN, VersionStage="AWSPENDING")

    with pytest.raises(UserError) as error:
        on_rotation(step("setSecret"), None, session=secrets, connect=Database().connect)

    assert str(error.value) == "the pending user 'root' is not the alternate of the current user 'slurmdbd'"


def test_test_logs_in_as_the_pending_user_and_checks_its_grants(secrets: Secrets) -> None:
    secrets.describe(ROTATING)
    secrets.value(ARN, PENDING, VersionId=TOKEN, VersionStage="AWSPENDING")
    database = Database(grants=["GRANT ALL PRIVILEGES ON `slurm_acct_db`.* TO `slurmdbd_clone`@`%`"])

    on_rotation(step("testSecret"), None, session=secrets, connect=database.connect)

    [login] = database.logins
    assert (login["user"], login["password"]) == ("slurmdbd_clone", PENDING["password"])
    assert login["ssl_verify_cert"] is True and login["ssl_verify_identity"] is True


def test_test_fails_when_a_grant_is_missing(secrets: Secrets) -> None:
    secrets.describe(ROTATING)
    secrets.value(ARN, PENDING, VersionId=TOKEN, VersionStage="AWSPENDING")
    database = Database(grants=["GRANT USAGE ON *.* TO `slurmdbd_clone`@`%`"])

    with pytest.raises(UserError) as error:
        on_rotation(step("testSecret"), None, session=secrets, connect=database.connect)

    assert str(error.value) == (
        "slurmdbd_clone logs in but lacks ALL on slurm_acct_db: ['GRANT USAGE ON *.* TO `slurmdbd_clone`@`%`']"
    )


def test_finish_moves_awscurrent_to_the_new_version(secrets: Secrets) -> None:
    secrets.describe(ROTATING)
    secrets.stub.add_response(
        "update_secret_version_stage",
        {"ARN": ARN, "Name": "slurmdbd-AbCdEf"},
        {"SecretId": ARN, "VersionStage": "AWSCURRENT", "MoveToVersionId": TOKEN, "RemoveFromVersionId": OLD},
    )

    on_rotation(step("finishSecret"), None, session=secrets)


def test_a_version_already_current_is_left_alone(secrets: Secrets) -> None:
    secrets.describe({TOKEN: ["AWSCURRENT"]})

    on_rotation(step("setSecret"), None, session=secrets, connect=Database().connect)


@pytest.mark.parametrize(
    ("stages", "enabled", "message"),
    [
        (ROTATING, False, f"{ARN} is not enabled for rotation"),
        ({OLD: ["AWSCURRENT"]}, True, f"version {TOKEN} of {ARN} has no stage for rotation"),
        ({OLD: ["AWSCURRENT"], TOKEN: ["AWSPREVIOUS"]}, True, f"version {TOKEN} of {ARN} is not AWSPENDING"),
    ],
)
def test_a_secret_not_rotating_this_version_is_refused(
    secrets: Secrets, stages: dict[str, list[str]], enabled: bool, message: str
) -> None:
    secrets.describe(stages, enabled=enabled)

    with pytest.raises(UserError) as error:
        on_rotation(step("createSecret"), None, session=secrets)

    assert str(error.value) == message


def test_an_incomplete_environment_fails_with_one_line(
    secrets: Secrets, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MASTER_SECRET_ARN")
    secrets.describe(ROTATING)
    secrets.value(ARN, CURRENT, VersionStage="AWSCURRENT")
    secrets.value(ARN, PENDING, VersionId=TOKEN, VersionStage="AWSPENDING")

    with pytest.raises(UserError) as error:
        on_rotation(step("setSecret"), None, session=secrets, connect=Database().connect)

    assert (
        str(error.value) == "the rotation function's environment is incomplete: KeyError('MASTER_SECRET_ARN')"
    )
