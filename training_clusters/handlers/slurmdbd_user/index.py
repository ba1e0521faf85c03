"""Custom-resource handler: the database user slurmdbd connects as, made once with the master user.

slurmdbd needs ``ALL`` on its own database only (Slurm's accounting guide,
https://slurm.schedmd.com/accounting.html#mysql-configuration: ``grant all on slurm_acct_db.* to
'slurm'@...``); the master user it would otherwise use holds every privilege RDS gives, on every database.
So the deployment makes a user of slurmdbd's own here, in the VPC next to the database, and only this
handler ever reads the master secret.

Runs in the Lambda Python runtime with PyMySQL beside it (pure Python, vendored into the asset by
:class:`~training_clusters.constructs.accounting.SlurmAccountingDatabase`); invoked by CDK's Provider
framework (``on_event``): return the physical id, raise to fail the deployment with the message.

Resource properties: ``Host``, ``Port`` (the writer endpoint), ``MasterSecretArn`` (RDS's JSON secret of the
master user), ``UserSecretArn`` (JSON with ``username`` and ``password``: the user to make), ``Databases``
(names slurmdbd gets ``ALL`` on), ``CaBundleUrl`` (the RDS certificate bundle: the connection uses TLS and
verifies the server's certificate and host name against it; ``https://``, or ``file://`` in tests).

Create / Update: ``CREATE USER IF NOT EXISTS`` (``REQUIRE SSL``), ``ALTER USER`` to the secret's password,
``GRANT ALL`` on each database, ``REVOKE`` on a database an update dropped; all idempotent. Delete: nothing.
The user stays with a retained database and its retained secret (slurmdbd of a later stack keeps working);
a deleted database takes it along.
"""

from __future__ import annotations

import json
import logging
import os
import re
import ssl
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable
from typing import Any

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

#: MySQL's rules for what this handler puts into SQL unquoted-by-driver: identifiers in backticks.
DATABASE_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
USER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")
MAX_BUNDLE_BYTES = 2 * 1024 * 1024
CONNECT_ATTEMPTS = int(os.environ.get("CONNECT_ATTEMPTS", "6"))
CONNECT_RETRY_SECONDS = float(os.environ.get("CONNECT_RETRY_SECONDS", "10"))
PEM_BEGIN = "-----BEGIN CERTIFICATE-----"


class UserError(RuntimeError):
    """A problem the deployment reports as is."""


def on_event(event: dict[str, Any], context: Any, session: Any = None, connect: Any = None) -> dict[str, Any]:
    """Create / Update: make the user and its grants. Delete: leave them (see the module docstring)."""
    props = event["ResourceProperties"]
    request = event["RequestType"]
    physical_id = event.get("PhysicalResourceId") or f"{props['Host']}/slurmdbd-user"
    if request == "Delete":
        LOG.info("Delete: the user stays with the database (retained, or deleted with it)")
        return {"PhysicalResourceId": physical_id}
    databases = _databases(props["Databases"])
    old = event.get("OldResourceProperties") or {}
    dropped = [name for name in _databases(old.get("Databases", [])) if name not in databases]
    if session is None:
        import boto3

        session = boto3.session.Session()
    secrets = session.client("secretsmanager")
    master = _secret(secrets, props["MasterSecretArn"])
    user = _secret(secrets, props["UserSecretArn"])
    username = str(user.get("username", ""))
    if not USER_NAME.fullmatch(username):
        raise UserError(f"the user secret's username must match {USER_NAME.pattern}, got {username!r}")
    with tempfile.TemporaryDirectory() as folder:
        ca_file = download_ca_bundle(props["CaBundleUrl"], folder)
        connection = _connect(connect, props["Host"], int(props["Port"]), master, ca_file)
        try:
            with connection.cursor() as cursor:
                for statement, args in user_statements(username, str(user["password"]), databases, dropped):
                    cursor.execute(statement, args)
        finally:
            connection.close()
    LOG.info("%s: user %s has ALL on %s (revoked: %s)", request, username, databases, dropped or "none")
    return {"PhysicalResourceId": physical_id, "Data": {"Username": username}}


def user_statements(
    username: str, password: str, databases: Iterable[str], dropped: Iterable[str] = ()
) -> list[tuple[str, tuple[str, ...]]]:
    """The SQL, with PyMySQL's client-side parameters (``%s``, escaped as string literals) for the user name
    and password, and database names (checked against :data:`DATABASE_NAME`) in backticks."""
    statements: list[tuple[str, tuple[str, ...]]] = [
        ("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s REQUIRE SSL", (username, password)),
        ("ALTER USER %s@'%%' IDENTIFIED BY %s REQUIRE SSL", (username, password)),
    ]
    for name in _databases(databases):
        statements.append((f"GRANT ALL PRIVILEGES ON `{name}`.* TO %s@'%%'", (username,)))
    for name in _databases(dropped):
        statements.append((f"REVOKE ALL PRIVILEGES ON `{name}`.* FROM %s@'%%'", (username,)))
    return statements


def download_ca_bundle(url: str, folder: str) -> str:
    """The certificate bundle at URL (``https://``, or ``file://`` for tests) as a file in FOLDER, checked
    to hold PEM certificates that Python's ssl module loads."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("https", "file"):
        raise UserError(f"CaBundleUrl must be an https:// URL, got {url!r}")
    with urllib.request.urlopen(url, timeout=30) as answer:  # https: verified against the runtime's CAs
        body = answer.read(MAX_BUNDLE_BYTES + 1)
    if len(body) > MAX_BUNDLE_BYTES:
        raise UserError(f"{url} is larger than {MAX_BUNDLE_BYTES} bytes: no certificate bundle")
    text = body.decode("ascii", errors="replace")
    if PEM_BEGIN not in text:
        raise UserError(f"{url} is no certificate bundle: it holds no PEM certificate ({len(body)} bytes)")
    try:
        ssl.create_default_context(cadata=text)
    except ssl.SSLError as error:
        raise UserError(f"{url} is no certificate bundle: {error}") from None
    path = os.path.join(folder, "rds-ca-bundle.pem")
    with open(path, "w", encoding="ascii") as out:
        out.write(text)
    return path


def _connect(connect: Any, host: str, port: int, master: dict[str, Any], ca_file: str) -> Any:
    """A TLS connection as the master user that verifies the server's certificate and host name; retries
    while the server does not answer (not when TLS or the login fails)."""
    if connect is None:
        import pymysql

        connect = pymysql.connect
    import pymysql.err

    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        try:
            return connect(
                host=host,
                port=port,
                user=master["username"],
                password=master["password"],
                ssl_ca=ca_file,
                ssl_verify_cert=True,
                ssl_verify_identity=True,
                connect_timeout=10,
                autocommit=True,
            )
        except pymysql.err.OperationalError as error:
            if _is_tls_failure(error) or attempt == CONNECT_ATTEMPTS or error.args[0] != 2003:
                raise UserError(f"cannot connect to {host}:{port} as the master user: {error}") from None
            LOG.info("%s:%s does not answer (%s/%s): %s", host, port, attempt, CONNECT_ATTEMPTS, error)
            time.sleep(CONNECT_RETRY_SECONDS)
    raise AssertionError("unreachable")


def _is_tls_failure(error: Exception) -> bool:
    return isinstance(error.__cause__ or error.__context__, ssl.SSLError) or "SSL" in str(error)


def _secret(client: Any, arn: str) -> dict[str, Any]:
    value = client.get_secret_value(SecretId=arn)["SecretString"]
    try:
        data = json.loads(value)
    except ValueError:
        raise UserError(f"{arn} holds no JSON (want username and password, as RDS writes them)") from None
    if not isinstance(data, dict) or not data.get("username") or not data.get("password"):
        raise UserError(f"{arn} holds no username and password")
    return data


def _databases(names: Any) -> list[str]:
    if not isinstance(names, list):
        raise UserError(f"Databases must be a list of names, got {names!r}")
    for name in names:
        if not isinstance(name, str) or not DATABASE_NAME.fullmatch(name):
            raise UserError(f"a database name must match {DATABASE_NAME.pattern}, got {name!r}")
    return list(dict.fromkeys(names))
