"""The bed's stand-ins for what SlurmAccountingDatabase deploys around Aurora: its TLS (a test CA instead of
RDS's, see database_tls.py), its master user, and the slurmdbd-user custom resource, run for real.

The handler (``training_clusters/handlers/slurmdbd_user``) runs as Lambda runs it: the code of the asset the
construct stages (the handler beside PyMySQL, :func:`~training_clusters.handlers.slurmdbd_user.staged_asset`), its ``on_event`` given a
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
from training_clusters.handlers.slurmdbd_user import staged_asset

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
