"""Custom-resource handler: the database user slurmdbd connects as, made once with the master user.

slurmdbd needs ``ALL`` on its own database only (Slurm's accounting guide,
https://slurm.schedmd.com/accounting.html#mysql-configuration: ``grant all on slurm_acct_db.* to
'slurm'@...``); the master user it would otherwise use holds every privilege RDS gives, on every database.
So the deployment makes a user of slurmdbd's own here, in the VPC next to the database, and only this
handler ever reads the master secret.

Runs in the Lambda Python runtime with PyMySQL beside it (pure Python, vendored into the asset by
:class:`~training_clusters.constructs.slurm.accounting.SlurmAccountingDatabase`); invoked by CDK's Provider
framework (``on_event``): return the physical id, raise to fail the deployment with the message.

Resource properties: ``Host``, ``Port`` (the writer endpoint), ``MasterSecretArn`` (RDS's JSON secret of the
master user), ``UserSecretArn`` (JSON with ``username`` and ``password``: the user to make), ``Databases``
(names slurmdbd gets ``ALL`` on), ``CaBundleUrl`` (the RDS certificate bundle: the connection uses TLS and
verifies the server's certificate and host name against it; ``https://``, or ``file://`` in tests).

Create / Update: ``CREATE USER IF NOT EXISTS`` (``REQUIRE SSL``), ``ALTER USER`` to the secret's password,
``GRANT ALL`` on each database, ``REVOKE`` on a database an update dropped; all idempotent. Delete: nothing.
The user stays with a retained database and its retained secret (slurmdbd of a later stack keeps working);
a deleted database takes it along.

The same asset's second entry point, :func:`on_rotation`, is the secret's Secrets Manager rotation function:
alternating users, as AWS's ``SecretsManagerRDSMySQLRotationMultiUser`` template rotates (aws-samples/
aws-secrets-manager-rotation-lambdas), with the server verified against the RDS bundle and a password never
changed while a session still uses it (see its docstring).
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
    for name in _databases(list(databases)):
        statements.append((f"GRANT ALL PRIVILEGES ON `{name}`.* TO %s@'%%'", (username,)))
    for name in _databases(list(dropped)):
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


def _connect(
    connect: Any, host: str, port: int, master: dict[str, Any], ca_file: str, who: str = "the master user"
) -> Any:
    """A TLS connection as the master user (or WHO, logging in with MASTER's username and password) that
    verifies the server's certificate and host name; retries while the server does not answer (not when TLS
    or the login fails)."""
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
                raise UserError(f"cannot connect to {host}:{port} as {who}: {error}") from None
            LOG.info("%s:%s does not answer (%s/%s): %s", host, port, attempt, CONNECT_ATTEMPTS, error)
            time.sleep(CONNECT_RETRY_SECONDS)
    raise AssertionError("unreachable")


def _is_tls_failure(error: Exception) -> bool:
    return isinstance(error.__cause__ or error.__context__, ssl.SSLError) or "SSL" in str(error)


def _secret(client: Any, arn: str, **version: str) -> dict[str, Any]:
    value = client.get_secret_value(SecretId=arn, **version)["SecretString"]
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


# -- rotation ------------------------------------------------------------------------------------------------

#: AWS's alternating-users templates name the second user ``<user>_clone`` (and back).
CLONE_SUFFIX = "_clone"
#: The rotation's new passwords: letters and digits only (slurmdbd.conf carries no white space, '#' starts a
#: comment there), 32 of them (about 190 bits).
PASSWORD_LENGTH = 32
_DATABASE_GRANT = re.compile(r"^GRANT .+ ON `((?:[^`]|``)+)`\.\* TO ")


def alternate_user(username: str) -> str:
    """The other user of the pair: ``slurmdbd`` <-> ``slurmdbd_clone``."""
    if username.endswith(CLONE_SUFFIX):
        return username[: -len(CLONE_SUFFIX)]
    return username + CLONE_SUFFIX


def on_rotation(event: dict[str, Any], context: Any, session: Any = None, connect: Any = None) -> None:
    """Secrets Manager's four rotation steps for slurmdbd's secret, alternating users.

    A rotation gives a new password to the user slurmdbd is *not* using (``slurmdbd`` or ``slurmdbd_clone``,
    made on the first rotation with the same grants) and makes that user the secret's current one; slurmdbd
    keeps working on its login until the controller's ``training-clusters-slurmdbd-password`` timer moves it
    over (hourly). So that a rotation never cuts slurmdbd off, ``setSecret`` refuses to change the password of
    a user that still has a session open (slurmdbd has not moved yet): the rotation fails, the secret keeps
    its current version, and Secrets Manager tries again on its schedule.

    Environment: ``DATABASE_HOST``, ``DATABASE_PORT`` (the writer), ``MASTER_SECRET_ARN`` (the master user,
    who makes the users and sees their sessions), ``DATABASES`` (JSON list: the users get ``ALL`` on these
    and nothing else), ``CA_BUNDLE_URL`` (the RDS bundle every connection verifies the server with).
    """
    arn, token, step = event["SecretId"], event["ClientRequestToken"], event["Step"]
    if session is None:
        import boto3

        session = boto3.session.Session()
    client = session.client("secretsmanager")
    metadata = client.describe_secret(SecretId=arn)
    if not metadata.get("RotationEnabled"):
        raise UserError(f"{arn} is not enabled for rotation")
    stages = metadata.get("VersionIdsToStages", {}).get(token)
    if stages is None:
        raise UserError(f"version {token} of {arn} has no stage for rotation")
    if "AWSCURRENT" in stages:
        LOG.info("%s: version %s is already AWSCURRENT", step, token)
        return
    if "AWSPENDING" not in stages:
        raise UserError(f"version {token} of {arn} is not AWSPENDING")
    if step == "createSecret":
        _create_pending(client, arn, token)
    elif step == "setSecret":
        _set_pending(client, arn, token, connect)
    elif step == "testSecret":
        _test_pending(client, arn, token, connect)
    elif step == "finishSecret":
        _finish(client, arn, token, metadata)
    else:
        raise UserError(f"unknown rotation step {step!r}")


def _create_pending(client: Any, arn: str, token: str) -> None:
    """AWSPENDING: the other user, a new password (once per token)."""
    current = _secret(client, arn, VersionStage="AWSCURRENT")
    try:
        client.get_secret_value(SecretId=arn, VersionId=token, VersionStage="AWSPENDING")
        LOG.info("createSecret: version %s already exists", token)
        return
    except client.exceptions.ResourceNotFoundException:
        pass
    username = alternate_user(str(current["username"]))
    if not USER_NAME.fullmatch(username):
        raise UserError(f"the alternate user {username!r} is no name MySQL takes ({USER_NAME.pattern})")
    password = client.get_random_password(PasswordLength=PASSWORD_LENGTH, ExcludePunctuation=True)
    pending = {**current, "username": username, "password": password["RandomPassword"]}
    client.put_secret_value(
        SecretId=arn, ClientRequestToken=token, SecretString=json.dumps(pending), VersionStages=["AWSPENDING"]
    )
    LOG.info("createSecret: version %s logs in as %s", token, username)


def _set_pending(client: Any, arn: str, token: str, connect: Any) -> None:
    """The pending user's password and grants, set as the master user, unless the user is still in use."""
    current = _secret(client, arn, VersionStage="AWSCURRENT")
    pending = _secret(client, arn, VersionId=token, VersionStage="AWSPENDING")
    username = str(pending["username"])
    if username != alternate_user(str(current["username"])) or not USER_NAME.fullmatch(username):
        raise UserError(
            f"the pending user {username!r} is not the alternate of the current user {current['username']!r}"
        )
    settings = _rotation_settings()
    master = _secret(client, settings["master_arn"])
    with tempfile.TemporaryDirectory() as folder:
        ca_file = download_ca_bundle(settings["ca_bundle_url"], folder)
        connection = _connect(connect, settings["host"], settings["port"], master, ca_file)
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", (username,)
                )
                sessions = int(cursor.fetchone()[0])
                if sessions:
                    raise UserError(
                        f"{username} still has {sessions} session(s) open: slurmdbd has not moved to "
                        f"{current['username']} yet (is the controller's training-clusters-slurmdbd-password."
                        "timer running?); its password stays, and the rotation is tried again later"
                    )
                for statement, args in user_statements(
                    username, str(pending["password"]), settings["databases"]
                ):
                    cursor.execute(statement, args)
                cursor.execute("SHOW GRANTS FOR %s@'%%'", (username,))
                granted = [_granted_database(str(row[0])) for row in cursor.fetchall()]
                stale = [name for name in granted if name and name not in settings["databases"]]
                for name in stale:
                    if not DATABASE_NAME.fullmatch(name):
                        raise UserError(
                            f"{username} has a grant on {name!r}, a name this handler does not revoke"
                        )
                    cursor.execute(f"REVOKE ALL PRIVILEGES ON `{name}`.* FROM %s@'%%'", (username,))
        finally:
            connection.close()
    LOG.info(
        "setSecret: %s has a new password, ALL on %s (revoked: %s)",
        username,
        settings["databases"],
        stale or "none",
    )


def _test_pending(client: Any, arn: str, token: str, connect: Any) -> None:
    """The pending login works over verified TLS and holds ALL on every database."""
    pending = _secret(client, arn, VersionId=token, VersionStage="AWSPENDING")
    settings = _rotation_settings()
    username = str(pending["username"])
    with tempfile.TemporaryDirectory() as folder:
        ca_file = download_ca_bundle(settings["ca_bundle_url"], folder)
        connection = _connect(connect, settings["host"], settings["port"], pending, ca_file, who=username)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SHOW GRANTS FOR CURRENT_USER()", ())
                grants = [str(row[0]) for row in cursor.fetchall()]
        finally:
            connection.close()
    for name in settings["databases"]:
        if not any(
            line.startswith("GRANT ALL PRIVILEGES ON ") and _granted_database(line) == name for line in grants
        ):
            raise UserError(f"{username} logs in but lacks ALL on {name}: {grants}")
    LOG.info("testSecret: %s logs in over verified TLS with ALL on %s", username, settings["databases"])


def _finish(client: Any, arn: str, token: str, metadata: dict[str, Any]) -> None:
    """AWSCURRENT moves to the new version (AWSPREVIOUS follows, by Secrets Manager)."""
    current = next(
        (version for version, stages in metadata["VersionIdsToStages"].items() if "AWSCURRENT" in stages),
        None,
    )
    client.update_secret_version_stage(
        SecretId=arn,
        VersionStage="AWSCURRENT",
        MoveToVersionId=token,
        **({"RemoveFromVersionId": current} if current else {}),
    )
    LOG.info("finishSecret: version %s is AWSCURRENT (was %s)", token, current)


def _granted_database(line: str) -> str | None:
    found = _DATABASE_GRANT.match(line)
    return found.group(1).replace("``", "`") if found else None


def _rotation_settings() -> dict[str, Any]:
    """The rotation function's environment, checked."""
    try:
        databases = _databases(json.loads(os.environ["DATABASES"]))
        return {
            "host": os.environ["DATABASE_HOST"],
            "port": int(os.environ["DATABASE_PORT"]),
            "master_arn": os.environ["MASTER_SECRET_ARN"],
            "databases": databases,
            "ca_bundle_url": os.environ["CA_BUNDLE_URL"],
        }
    except (KeyError, ValueError) as error:
        raise UserError(f"the rotation function's environment is incomplete: {error!r}") from None
