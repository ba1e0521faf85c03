"""The slurmdbd-user handler, run as Lambda would run it, offline: Secrets Manager through botocore's Stubber
(checked against the service model), the database connection a recording stand-in for pymysql.connect.
Against real MariaDB requiring TLS: tests/integration/test_accounting_real.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pymysql.err
import pytest
from botocore.stub import Stubber

from training_clusters.node_scripts.handlers.slurmdbd_user import index
from training_clusters.node_scripts.handlers.slurmdbd_user.index import UserError, on_event, user_statements

MASTER_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:master-AbCdEf"
USER_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurmdbd-AbCdEf"
HOST = "accounting.cluster-abc.us-east-1.rds.amazonaws.com"
BUNDLE = Path(__file__).resolve().parents[1] / "lifecycle" / "stubs" / "rds-ca-bundle.pem"
MASTER = {"username": "slurm", "password": "Master-Pass", "engine": "mysql", "host": HOST, "port": 3306}
USER = {"username": "slurmdbd", "password": "User'Pass", "engine": "mysql"}


def event(request: str = "Create", **props: Any) -> dict[str, Any]:
    properties = {
        "Host": HOST,
        "Port": "3306",
        "MasterSecretArn": MASTER_ARN,
        "UserSecretArn": USER_ARN,
        "Databases": ["slurm_acct_db"],
        "CaBundleUrl": f"file://{BUNDLE}",
        **props,
    }
    return {"RequestType": request, "ResourceProperties": properties}


class FakeSession:
    def __init__(self) -> None:
        session = boto3.session.Session(
            aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="x", region_name="us-east-1"
        )
        self.secrets = session.client("secretsmanager")
        self.stub = Stubber(self.secrets)

    def client(self, name: str, **kwargs: Any) -> Any:
        assert name == "secretsmanager"
        return self.secrets

    def answer(self, arn: str, value: object) -> None:
        text = value if isinstance(value, str) else json.dumps(value)
        self.stub.add_response(
            "get_secret_value",
            {"ARN": arn, "Name": arn.rsplit(":", 1)[1], "SecretString": text},
            {"SecretId": arn},
        )


class Connection:
    """What the handler does with its connection: the statements, then close."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.executed: list[tuple[str, tuple[str, ...]]] = []
        self.closed = False

    def cursor(self) -> Connection:
        return self

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, statement: str, args: tuple[str, ...]) -> None:
        self.executed.append((statement, args))

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def session() -> Iterator[FakeSession]:
    fake = FakeSession()
    with fake.stub:
        yield fake
        fake.stub.assert_no_pending_responses()


@pytest.fixture
def connections() -> list[Connection]:
    return []


def connect_recording(connections: list[Connection]) -> Any:
    def connect(**kwargs: Any) -> Connection:
        made = Connection(**kwargs)
        connections.append(made)
        return made

    return connect


def test_create_connects_as_the_master_over_verified_tls_and_makes_the_user(
    session: FakeSession, connections: list[Connection]
) -> None:
    session.answer(MASTER_ARN, MASTER)
    session.answer(USER_ARN, USER)

    answer = on_event(event(), None, session=session, connect=connect_recording(connections))

    assert answer == {"PhysicalResourceId": f"{HOST}/slurmdbd-user", "Data": {"Username": "slurmdbd"}}
    (connection,) = connections
    ca_file = connection.kwargs.pop("ssl_ca")
    assert ca_file.endswith("/rds-ca-bundle.pem") and not Path(ca_file).exists()  # a temporary copy, gone
    assert connection.kwargs == {
        "host": HOST,
        "port": 3306,
        "user": "slurm",
        "password": "Master-Pass",
        "ssl_verify_cert": True,
        "ssl_verify_identity": True,
        "connect_timeout": 10,
        "autocommit": True,
    }
    assert connection.executed == [
        ("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s REQUIRE SSL", ("slurmdbd", "User'Pass")),
        ("ALTER USER %s@'%%' IDENTIFIED BY %s REQUIRE SSL", ("slurmdbd", "User'Pass")),
        ("GRANT ALL PRIVILEGES ON `slurm_acct_db`.* TO %s@'%%'", ("slurmdbd",)),
    ]
    assert connection.closed


def test_an_update_revokes_a_dropped_database_and_keeps_its_physical_id(
    session: FakeSession, connections: list[Connection]
) -> None:
    session.answer(MASTER_ARN, MASTER)
    session.answer(USER_ARN, USER)
    update = event("Update", Databases=["slurm_acct_db"])
    update["OldResourceProperties"] = {
        **update["ResourceProperties"],
        "Databases": ["slurm_acct_db", "old_db"],
    }
    update["PhysicalResourceId"] = "kept-id"

    answer = on_event(update, None, session=session, connect=connect_recording(connections))

    assert answer["PhysicalResourceId"] == "kept-id"
    assert connections[0].executed[2:] == [
        ("GRANT ALL PRIVILEGES ON `slurm_acct_db`.* TO %s@'%%'", ("slurmdbd",)),
        ("REVOKE ALL PRIVILEGES ON `old_db`.* FROM %s@'%%'", ("slurmdbd",)),
    ]


def test_delete_reads_nothing_and_connects_nowhere(
    session: FakeSession, connections: list[Connection]
) -> None:
    delete = event("Delete")
    delete["PhysicalResourceId"] = f"{HOST}/slurmdbd-user"

    assert on_event(delete, None, session=session, connect=connect_recording(connections)) == {
        "PhysicalResourceId": f"{HOST}/slurmdbd-user"
    }
    assert connections == []


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"Databases": ["slurm-acct"]}, "a database name must match ^[A-Za-z0-9_]{1,64}$, got 'slurm-acct'"),
        ({"Databases": "slurm_acct_db"}, "Databases must be a list of names, got 'slurm_acct_db'"),
        (
            {"CaBundleUrl": "http://example.com/ca.pem"},
            "CaBundleUrl must be an https:// URL, got 'http://example.com/ca.pem'",
        ),
    ],
)
def test_bad_properties_fail_the_deployment_before_any_connection(
    session: FakeSession, connections: list[Connection], props: dict[str, Any], message: str
) -> None:
    if "Databases" not in props:  # database names are refused before the secrets are read
        session.answer(MASTER_ARN, MASTER)
        session.answer(USER_ARN, USER)
    with pytest.raises(UserError) as error:
        on_event(event(**props), None, session=session, connect=connect_recording(connections))
    assert str(error.value) == message
    assert connections == []


def test_a_bundle_without_certificates_fails_with_one_line(
    session: FakeSession, connections: list[Connection], tmp_path: Path
) -> None:
    page = tmp_path / "page.html"
    page.write_text("<html>denied</html>\n")
    session.answer(MASTER_ARN, MASTER)
    session.answer(USER_ARN, USER)

    with pytest.raises(UserError) as error:
        on_event(
            event(CaBundleUrl=f"file://{page}"), None, session=session, connect=connect_recording(connections)
        )

    assert (
        str(error.value) == f"file://{page} is no certificate bundle: it holds no PEM certificate (20 bytes)"
    )
    assert connections == []


def test_a_user_secret_with_a_name_mysql_cannot_take_is_refused(session: FakeSession) -> None:
    session.answer(MASTER_ARN, MASTER)
    session.answer(USER_ARN, {"username": "slurm'; DROP", "password": "x"})

    with pytest.raises(UserError) as error:
        on_event(event(), None, session=session, connect=connect_recording([]))

    assert (
        str(error.value)
        == "the user secret's username must match ^[A-Za-z][A-Za-z0-9_]{0,31}$, got \"slurm'; DROP\""
    )


def test_a_tls_failure_is_not_retried(session: FakeSession, monkeypatch: pytest.MonkeyPatch) -> None:
    session.answer(MASTER_ARN, MASTER)
    session.answer(USER_ARN, USER)
    attempts: list[int] = []

    def refuse(**kwargs: Any) -> None:
        attempts.append(1)
        raise pymysql.err.OperationalError(
            2003, "Can't connect to MySQL server (SSL: CERTIFICATE_VERIFY_FAILED)"
        )

    monkeypatch.setattr(index, "CONNECT_RETRY_SECONDS", 0)
    with pytest.raises(UserError) as error:
        on_event(event(), None, session=session, connect=refuse)

    assert attempts == [1]
    assert str(error.value) == (
        f"cannot connect to {HOST}:3306 as the master user: (2003, \"Can't connect to MySQL server (SSL: "
        'CERTIFICATE_VERIFY_FAILED)")'
    )


def test_a_server_that_does_not_answer_yet_is_retried(
    session: FakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    session.answer(MASTER_ARN, MASTER)
    session.answer(USER_ARN, USER)
    made: list[Connection] = []

    def late(**kwargs: Any) -> Connection:
        if len(made) < 2:
            made.append(Connection())
            raise pymysql.err.OperationalError(2003, "Can't connect to MySQL server on 'x' (timed out)")
        return connect_recording(made)(**kwargs)

    monkeypatch.setattr(index, "CONNECT_RETRY_SECONDS", 0)
    on_event(event(), None, session=session, connect=late)

    assert len(made) == 3 and len(made[2].executed) == 3


def test_the_sql_quotes_databases_and_leaves_values_to_the_driver() -> None:
    assert user_statements("slurmdbd", "pw", ["a_db", "a_db", "b_db"], ["old"]) == [
        ("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s REQUIRE SSL", ("slurmdbd", "pw")),
        ("ALTER USER %s@'%%' IDENTIFIED BY %s REQUIRE SSL", ("slurmdbd", "pw")),
        ("GRANT ALL PRIVILEGES ON `a_db`.* TO %s@'%%'", ("slurmdbd",)),
        ("GRANT ALL PRIVILEGES ON `b_db`.* TO %s@'%%'", ("slurmdbd",)),
        ("REVOKE ALL PRIVILEGES ON `old`.* FROM %s@'%%'", ("slurmdbd",)),
    ]
