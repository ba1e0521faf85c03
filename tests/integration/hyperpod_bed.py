"""A HyperPod-like Slurm cluster on the real-Slurm bed: controller, login node, two workers.

Every node gets what HyperPod's Slurm AMI and agent give it (see slurm_bed.py for what is emulated),
then our on_create.sh runs on all of them at once, as HyperPod runs the lifecycle script on every
instance of a new cluster, while the "agent" writes the controller's slurm.conf a few seconds in.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.slurm_bed import Bed, Node, hyperpod_slurm_conf, resource_config, wait_until

CONTROLLER_IP = "10.1.0.10"
LOGIN_IP = "10.1.0.20"
WORKER_IPS = ("10.1.1.11", "10.1.1.12")
DATABASE_IP = "10.1.0.30"
GROUPS = {
    "controller-machine": [CONTROLLER_IP],
    "login-group": [LOGIN_IP],
    "worker-group-1": list(WORKER_IPS),
}
PARTITION = "dev"
PARAMS: dict[str, Any] = {
    "version": "1.0.0",
    "workload_manager": "slurm",
    "controller_group": "controller-machine",
    "login_group": "login-group",
    "worker_groups": [{"instance_group_name": "worker-group-1", "partition_name": PARTITION}],
}
#: A team user, as `users:` in an environment file gives it.
ALICE = {"name": "alice", "uid": 2001}
#: Bounds of the scripts' waits, shortened: the bed's daemons start in about a second.
SCRIPT_ENV = {
    "TC_SLURM_CONF_WAIT_SLEEP": "1",
    "TC_SLURM_CONF_WAIT_ATTEMPTS": "30",
    "TC_SLURM_START_WAIT_SLEEP": "1",
    "TC_SLURM_START_WAIT_ATTEMPTS": "60",
    "TC_ACCOUNTING_RETRY_SLEEP": "1",
    "TC_APT_RETRY_SLEEP": "1",
}
#: How long after the scripts start the "agent" writes the controller's slurm.conf.
AGENT_DELAY_S = 3.0
#: The password of the database standing in for Aurora (the secret's value).
EXTERNAL_PASSWORD = "bed-Secret-0123456789"


@dataclass
class Provisioned:
    node: Node
    returncode: int
    output: str
    seconds: float


@dataclass
class Cluster:
    bed: Bed
    settings: dict[str, Any]
    runs: dict[str, Provisioned] = field(default_factory=dict)
    #: The lifecycle script HyperPod runs (LifeCycleConfig.OnCreate), in the lifecycle folder.
    script: str = "on_create.sh"

    @property
    def controller(self) -> Node:
        return self.bed.nodes[CONTROLLER_IP]

    @property
    def login(self) -> Node:
        return self.bed.nodes[LOGIN_IP]

    @property
    def workers(self) -> list[Node]:
        return [self.bed.nodes[ip] for ip in WORKER_IPS]

    def slurm_conf(self) -> str:
        return hyperpod_slurm_conf(CONTROLLER_IP, {PARTITION: list(WORKER_IPS)})

    def prepare(self, ip: str, *, generation: int = 0) -> Node:
        node = self.bed.prepare(ip, generation=generation)
        node.lay_out_hyperpod_ami(resource_config(GROUPS))
        node.upload_lifecycle(PARAMS, self.settings)
        if ip == CONTROLLER_IP and self.settings.get("accounting", {}).get("mode") == "external":
            install_secret_reader(node)
        return node

    def provision(self, nodes: list[Node], *, agent_writes: bool) -> dict[str, Provisioned]:
        """Runs on_create.sh on NODES at once; the agent writes slurm.conf meanwhile (if asked)."""
        started = time.monotonic()
        processes = {node.ip: node.on_create(script=self.script) for node in nodes}
        if agent_writes:
            self.bed.agent_writes_slurm_conf(self.controller, self.slurm_conf(), after_s=AGENT_DELAY_S)
        done: dict[str, Provisioned] = {}
        for node in nodes:
            process = processes[node.ip]
            try:
                output, _ = process.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                process.kill()
                output, _ = process.communicate()
            done[node.ip] = Provisioned(node, process.returncode, output, time.monotonic() - started)
        self.runs.update(done)
        return done

    def controller_daemons(self) -> tuple[str, ...]:
        """The units of the controller's daemons: slurmctld, and local accounting's when the settings ask."""
        if self.settings.get("accounting", {}).get("mode") == "local":
            return ("slurmctld", "slurmdbd", "mariadb")
        return ("slurmctld",)

    def daemon_pids(self) -> dict[str, str]:
        """The main PID of every Slurm daemon (and of local accounting's), by node/unit."""
        return self.daemon_units("MainPID")

    def daemon_units(self, prop: str) -> dict[str, str]:
        """PROP of the unit of every Slurm daemon (and of local accounting's), by node/unit."""
        units = [(self.controller, self.controller_daemons()), (self.login, ("sackd",))]
        units += [(worker, ("slurmd",)) for worker in self.workers]
        return {
            f"{node.name}/{unit}": node.sh(f"systemctl show -p {prop} --value {unit}").stdout.strip()
            for node, names in units
            for unit in names
        }

    def sinfo_states(self) -> dict[str, str]:
        out = self.controller.sh("/opt/slurm/bin/sinfo -h -N -o '%N %t'", check=False).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait_idle(self, timeout: float = 180) -> None:
        names = {worker.name for worker in self.workers}
        wait_until(
            "every worker idle",
            lambda: all(self.sinfo_states().get(name) == "idle" for name in names),
            seen=self.sinfo_states,
            timeout=timeout,
        )


def install_secret_reader(controller: Node) -> None:
    """Secrets Manager, emulated: `aws secretsmanager get-secret-value` answers the RDS-style secret.

    The lifecycle script reads the database password with `aws secretsmanager get-secret-value
    --secret-id ARN --query SecretString --output text` (the AWS CLI's documented form); this stand-in
    prints the SecretString RDS writes (JSON with username and password) from a root-only file, and
    fails for any other call, so a changed call fails the test; with /etc/bed/secret.denied present it fails
    as GetSecretValue does for a role that may not read the secret (AccessDeniedException, exit 254).
    """
    controller.write(
        "/etc/bed/secret.json",
        json.dumps({"username": "slurm_admin", "password": EXTERNAL_PASSWORD, "engine": "mysql"}) + "\n",
        0o600,
    )
    controller.write(
        "/usr/local/bin/aws",
        """#!/bin/bash
# Stand-in for the AWS CLI's secretsmanager get-secret-value (real-Slurm bed).
set -euo pipefail
want=(secretsmanager get-secret-value --region us-east-1 --secret-id \\
      arn:aws:secretsmanager:us-east-1:123456789012:secret:bed-accounting --query SecretString --output text)
if [[ "$*" != "${want[*]}" ]]; then
    echo "aws stand-in: unexpected call: $*" >&2
    exit 254
fi
if [[ -e /etc/bed/secret.denied ]]; then  # the role may no longer read the secret
    echo "An error occurred (AccessDeniedException) when calling the GetSecretValue operation:" \
         "User is not authorized to perform: secretsmanager:GetSecretValue" >&2
    exit 254
fi
cat /etc/bed/secret.json
""",
        0o755,
    )


EXTERNAL_ACCOUNTING = {
    "mode": "external",
    "host": DATABASE_IP,
    "port": 3306,
    "secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:bed-accounting",
    "database": "slurm_acct_db",
}


def start_database(bed: Bed) -> Node:
    """A MariaDB server standing in for Aurora MySQL as SlurmAccountingDatabase deploys it (see
    accounting_bed.py): it requires secure transport (``require_secure_transport``, as the DB cluster parameter
    group does) with a certificate of the bed's CA for its address; the master user; and the user the secret
    names, made by the slurmdbd-user custom resource's own code (``ALL`` on slurm_acct_db only, ``REQUIRE
    SSL``). A node reaches it only trusting the bed's CA (``accounting_bed.bed_tls(bed, DATABASE_IP)``:
    ``install_ca`` on the controller, ``script_env`` for the lifecycle script).
    """
    import os

    from tests.integration import accounting_bed

    tls = accounting_bed.bed_tls(bed, DATABASE_IP)
    node = bed.prepare(DATABASE_IP)
    mysql_uid, mysql_gid = bed.ids("mysql")
    node.write("/etc/mysql/tls/server.pem", tls.server.cert.read_text())
    node.write("/etc/mysql/tls/server.key", tls.server.key.read_text(), 0o600)
    os.chown(node.path("/etc/mysql/tls/server.key"), mysql_uid, mysql_gid)
    node.write(
        "/etc/mysql/mariadb.conf.d/90-bed.cnf",
        "[mysqld]\nbind-address = 0.0.0.0\nskip-name-resolve\n"
        "ssl_cert = /etc/mysql/tls/server.pem\nssl_key = /etc/mysql/tls/server.key\n"
        "require_secure_transport = ON\n",
    )
    # root's mysql on this node comes over the local socket, secure transport already: no TLS there
    node.write("/etc/mysql/mariadb.conf.d/91-bed-client.cnf", "[client-mariadb]\nskip-ssl\n")
    node.boot()
    node.sh("systemctl enable --now mariadb")
    # root over the local socket (secure transport already): Aurora's master user, as CloudFormation makes it
    node.sh(
        "mysql --protocol=socket --skip-ssl -u root <<'EOF'\n"
        f"CREATE USER '{accounting_bed.MASTER_USER}'@'%' IDENTIFIED BY '{accounting_bed.MASTER_PASSWORD}';\n"
        f"GRANT ALL ON *.* TO '{accounting_bed.MASTER_USER}'@'%' WITH GRANT OPTION;\n"
        "EOF"
    )
    answer = accounting_bed.run_user_handler(
        bed,
        request_type="Create",
        host=DATABASE_IP,
        ca_file=tls.authority.cert,
        databases=["slurm_acct_db"],
        user={"username": "slurm_admin", "password": EXTERNAL_PASSWORD},
    )
    if "error" in answer:
        raise RuntimeError(f"the slurmdbd-user handler failed on the bed's database: {answer['error']}")
    return node


def boot_cluster(work: Path, settings: dict[str, Any], *, database: bool = False) -> Cluster:
    bed = Bed(work)
    bed.script_env = dict(SCRIPT_ENV)
    bed.__enter__()
    cluster = Cluster(bed, settings)
    try:
        if database:
            start_database(bed)
        nodes = [cluster.prepare(ip) for ip in (CONTROLLER_IP, LOGIN_IP, *WORKER_IPS)]
        for node in nodes:
            node.boot()
        cluster.provision(nodes, agent_writes=True)
    except BaseException:
        bed.__exit__(None, None, None)
        raise
    return cluster


def job_field(cluster: Cluster, job: str, key: str) -> str:
    shown = cluster.controller.sh(f"/opt/slurm/bin/scontrol show job {job}", check=False).stdout
    found = re.search(rf"\b{key}=(\S*)", shown)
    return found.group(1) if found else ""


def sbatch(cluster: Cluster, options: str, *, script: str | None = None, user: str = "alice") -> str:
    """Submits from the login node as USER; SCRIPT (a batch script's body) is written to the user's home."""
    if script is not None:
        cluster.login.write(f"/home/{user}/job.sh", "#!/bin/bash\n" + script + "\n", 0o755)
        options += f" /home/{user}/job.sh"
    out = cluster.login.sh(f"/opt/slurm/bin/sbatch --parsable {options}", user=user).stdout.strip()
    return out.split(";")[0]
