"""The bed's stand-ins for what SlurmAccountingDatabase deploys around Aurora: its TLS (a test CA instead of
RDS's, see database_tls.py), its master user, and the slurmdbd-user custom resource, run for real.

The handler (``training_clusters/node_scripts/handlers/slurmdbd_user``) runs as Lambda runs it: the code of the asset the
construct stages (the handler beside PyMySQL, :func:`~training_clusters.node_scripts.handlers.slurmdbd_user.staged_asset`), its ``on_event`` given a
CloudFormation event, in the VPC, which here is the bed's bridge namespace (an address of its own there, as a
Lambda function's network interface in the database's subnet). Secrets Manager is botocore's Stubber, checked
against the service model, answering the two GetSecretValue calls the handler makes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration import database_tls
from tests.integration.slurm_bed import Bed, Node, run
from training_clusters.node_scripts.handlers.slurmdbd_user import staged_asset

#: Aurora's master user, as CloudFormation creates it from the master secret.
MASTER_USER = "admin"
MASTER_PASSWORD = "bed-Master-9876543210"
MASTER_SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:bed-master-AbCdEf"
USER_SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:bed-slurmdbd-AbCdEf"
#: Where the handler's "network interface" sits: an address of the bridge's namespace.
HANDLER_IP = "10.1.0.40"
#: Where a node finds the CA the bed's database certificate chains to (TC_RDS_CA_BUNDLE_URL points here).
CA_ON_NODE = "/etc/bed/rds-ca-bundle.pem"


@dataclass(frozen=True)
class BedTls:
    """The bed's certificate authority (RDS's stand-in), the database's certificate, and an impostor CA."""

    authority: database_tls.Authority
    server: database_tls.ServerCertificate
    impostor: database_tls.Authority

    @property
    def script_env(self) -> dict[str, str]:
        """What the lifecycle script needs to fetch the bed's CA instead of AWS's bundle."""
        return {"TC_RDS_CA_BUNDLE_URL": f"file://{CA_ON_NODE}"}

    def install_ca(self, node: Node, authority: database_tls.Authority | None = None) -> None:
        node.write(CA_ON_NODE, (authority or self.authority).cert.read_text())


def bed_tls(bed: Bed, database_ip: str) -> BedTls:
    """The bed's TLS material, made once per bed (under its work folder)."""
    folder = bed.work / "database-tls"
    made = getattr(bed, "_accounting_tls", None)
    if isinstance(made, BedTls):
        return made
    authority = database_tls.make_ca(folder, "bed-rds-ca")
    tls = BedTls(
        authority=authority,
        server=database_tls.server_certificate(authority, folder, "database", ip=database_ip),
        impostor=database_tls.make_ca(folder, "impostor-ca"),
    )
    bed._accounting_tls = tls  # type: ignore[attr-defined]
    return tls


def reach_from_bridge(bed: Bed, database_ip: str) -> None:
    """An address for the handler in the bridge's namespace and a route to the database (/32 each: nothing
    else of the bed's routing changes)."""
    if HANDLER_IP in run(["ip", "-n", bed.bridge_ns, "-4", "addr", "show", "dev", "br0"]).stdout:
        return
    run(["ip", "-n", bed.bridge_ns, "addr", "add", f"{HANDLER_IP}/32", "dev", "br0"])
    run(["ip", "-n", bed.bridge_ns, "route", "add", f"{database_ip}/32", "dev", "br0", "src", HANDLER_IP])
    run(["ip", "-n", bed.bridge_ns, "link", "set", "lo", "up"])


#: Runs in the bridge's namespace with the asset first on sys.path: on_event with Secrets Manager stubbed.
_DRIVER = r"""
import json, sys
import boto3
from botocore.stub import Stubber
import index, pymysql
request = json.loads(sys.stdin.read())
session = boto3.session.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="x", region_name="us-east-1")
client = session.client("secretsmanager")
stub = Stubber(client)
for arn, value in request["secrets"]:
    stub.add_response("get_secret_value", {"ARN": arn, "Name": arn.rsplit(":", 1)[1], "SecretString": json.dumps(value)},
                      {"SecretId": arn})
class Session:
    def client(self, name, **kwargs):
        assert name == "secretsmanager", name
        return client
stub.activate()
try:
    result = index.on_event(request["event"], None, session=Session())
    stub.assert_no_pending_responses()
    print(json.dumps({"result": result, "pymysql": pymysql.__file__}))
except Exception as error:
    print(json.dumps({"error": f"{type(error).__name__}: {error}", "pymysql": pymysql.__file__}))
"""


def run_user_handler(
    bed: Bed,
    *,
    request_type: str,
    host: str,
    ca_file: Path,
    databases: list[str],
    user: dict[str, str],
    old_databases: list[str] | None = None,
    master: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One CloudFormation event through the staged handler; its answer (``result``) or ``error``."""
    reach_from_bridge(bed, host)
    props: dict[str, Any] = {
        "Host": host,
        "Port": "3306",
        "MasterSecretArn": MASTER_SECRET_ARN,
        "UserSecretArn": USER_SECRET_ARN,
        "Databases": databases,
        "CaBundleUrl": f"file://{ca_file}",
    }
    event: dict[str, Any] = {"RequestType": request_type, "ResourceProperties": props}
    if old_databases is not None:
        event["OldResourceProperties"] = {**props, "Databases": old_databases}
        event["PhysicalResourceId"] = f"{host}/slurmdbd-user"
    secrets = [
        (
            MASTER_SECRET_ARN,
            master or {"username": MASTER_USER, "password": MASTER_PASSWORD, "engine": "mysql"},
        ),
        (USER_SECRET_ARN, user),
    ]
    completed = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            bed.bridge_ns,
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {str(staged_asset())!r}); exec({_DRIVER!r})",
        ],
        input=json.dumps({"event": event, "secrets": secrets if request_type != "Delete" else []}),
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CONNECT_ATTEMPTS": "2", "CONNECT_RETRY_SECONDS": "1"},
        check=False,
    )
    if completed.returncode != 0 or not completed.stdout.strip():
        raise RuntimeError(f"the handler's driver exited {completed.returncode}: {completed.stderr}")
    answer: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    assert answer["pymysql"].startswith(str(staged_asset())), answer  # the asset's own PyMySQL
    return answer


#: The bed's rotation driver: a list of stubbed Secrets Manager answers (in the order the function asks) and
#: the rotation events, run in order through the asset's on_rotation until one fails.
_ROTATION_DRIVER = r"""
import json, sys
import boto3
from botocore.stub import Stubber
import index
request = json.loads(sys.stdin.read())
session = boto3.session.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="x", region_name="us-east-1")
client = session.client("secretsmanager")
stub = Stubber(client)
for answer in request["answers"]:
    if "error" in answer:
        stub.add_client_error(answer["method"], service_error_code=answer["error"], expected_params=answer["params"])
    else:
        stub.add_response(answer["method"], answer["response"], answer["params"])
class Session:
    def client(self, name, **kwargs):
        assert name == "secretsmanager", name
        return client
stub.activate()
done = []
try:
    for event in request["events"]:
        index.on_rotation(event, None, session=Session())
        done.append(event["Step"])
    stub.assert_no_pending_responses()
    print(json.dumps({"done": done}))
except Exception as error:
    print(json.dumps({"done": done, "error": f"{type(error).__name__}: {error}"}))
"""


@dataclass(frozen=True)
class Rotation:
    """One rotation of slurmdbd's secret (alternating users), as Secrets Manager drives it: the secret's
    current value, the token of the new version and the password GetRandomPassword hands out."""

    current: dict[str, Any]
    token: str
    password: str

    @property
    def pending(self) -> dict[str, Any]:
        name = str(self.current["username"])
        other = name[: -len("_clone")] if name.endswith("_clone") else name + "_clone"
        return {**self.current, "username": other, "password": self.password}

    def answers(self, steps: list[str]) -> list[dict[str, Any]]:
        """What Secrets Manager answers to each step's calls, in order (Stubber checks each call's
        parameters against these and the service model)."""
        old = "00000000-0000-4000-8000-000000000000"
        stages = {"ARN": USER_SECRET_ARN, "RotationEnabled": True,
                  "VersionIdsToStages": {old: ["AWSCURRENT"], self.token: ["AWSPENDING"]}}  # fmt: skip
        describe = {"method": "describe_secret", "response": stages, "params": {"SecretId": USER_SECRET_ARN}}

        def value(arn: str, secret: dict[str, Any], **version: str) -> dict[str, Any]:
            return {"method": "get_secret_value", "params": {"SecretId": arn, **version},
                    "response": {"ARN": arn, "Name": arn.rsplit(":", 1)[1], "SecretString": json.dumps(secret)}}  # fmt: skip

        current = value(USER_SECRET_ARN, self.current, VersionStage="AWSCURRENT")
        pending = value(USER_SECRET_ARN, self.pending, VersionId=self.token, VersionStage="AWSPENDING")
        master = value(
            MASTER_SECRET_ARN, {"username": MASTER_USER, "password": MASTER_PASSWORD, "engine": "mysql"}
        )
        per_step: dict[str, list[dict[str, Any]]] = {
            "createSecret": [
                describe,
                current,
                {"method": "get_secret_value", "error": "ResourceNotFoundException",
                 "params": {"SecretId": USER_SECRET_ARN, "VersionId": self.token, "VersionStage": "AWSPENDING"}},
                {"method": "get_random_password", "response": {"RandomPassword": self.password},
                 "params": {"PasswordLength": 32, "ExcludePunctuation": True}},
                {"method": "put_secret_value", "response": {"ARN": USER_SECRET_ARN, "VersionId": self.token},
                 "params": {"SecretId": USER_SECRET_ARN, "ClientRequestToken": self.token,
                            "SecretString": json.dumps(self.pending), "VersionStages": ["AWSPENDING"]}},
            ],
            "setSecret": [describe, current, pending, master],
            "testSecret": [describe, pending],
            "finishSecret": [
                describe,
                {"method": "update_secret_version_stage", "response": {"ARN": USER_SECRET_ARN},
                 "params": {"SecretId": USER_SECRET_ARN, "VersionStage": "AWSCURRENT", "MoveToVersionId": self.token,
                            "RemoveFromVersionId": old}},
            ],
        }  # fmt: skip
        return [answer for step in steps for answer in per_step[step]]


ROTATION_STEPS = ["createSecret", "setSecret", "testSecret", "finishSecret"]


def run_rotation(
    bed: Bed, rotation: Rotation, *, host: str, ca_file: Path, databases: list[str], steps: list[str]
) -> dict[str, Any]:
    """STEPS of ROTATION through the staged asset's on_rotation, in the bridge's namespace (the function's
    interface in the database's subnet); ``done`` (the steps that passed) and ``error`` (the first failure)."""
    reach_from_bridge(bed, host)
    events = [
        {"SecretId": USER_SECRET_ARN, "ClientRequestToken": rotation.token, "Step": step} for step in steps
    ]
    environment = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "CONNECT_ATTEMPTS": "2",
        "CONNECT_RETRY_SECONDS": "1",
        "DATABASE_HOST": host,
        "DATABASE_PORT": "3306",
        "MASTER_SECRET_ARN": MASTER_SECRET_ARN,
        "DATABASES": json.dumps(databases),
        "CA_BUNDLE_URL": f"file://{ca_file}",
    }
    completed = subprocess.run(
        ["ip", "netns", "exec", bed.bridge_ns, sys.executable, "-I", "-c",
         f"import sys; sys.path.insert(0, {str(staged_asset())!r}); exec({_ROTATION_DRIVER!r})"],
        input=json.dumps({"answers": rotation.answers(steps), "events": events}),
        capture_output=True, text=True, timeout=120, env=environment, check=False,
    )  # fmt: skip
    if completed.returncode != 0 or not completed.stdout.strip():
        raise RuntimeError(f"the rotation driver exited {completed.returncode}: {completed.stderr}")
    answer: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return answer
