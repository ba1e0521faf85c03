"""A real-Slurm test bed: nodes booted with systemd-nspawn from a Debian root, on a private network.

Each node is a copy-on-write overlay of the root that ``build_slurm_root.sh`` builds (Debian 13: Slurm
24.11, the version HyperPod's current Slurm AMI runs; munge; MariaDB; systemd), booted with
``systemd-nspawn -b`` as a real systemd machine in a network namespace of its own, joined to the other
nodes by veth pairs on a bridge in one more namespace. Nothing reaches the host's network.

What is real: systemd, every Slurm daemon and client command, munge, MariaDB, useradd, apt, bash and
the lifecycle scripts themselves. What is emulated, because it cannot run here:

- **The HyperPod Slurm AMI's layout** (:meth:`Node.lay_out_hyperpod_ami`): Slurm under ``/opt/slurm``
  (here links to Debian's binaries, and ``/etc/slurm`` a link to ``/opt/slurm/etc``, the folder the
  binaries read), the AMI's ``slurmd`` / ``slurmctld`` / ``slurmdbd`` units in ``/etc/systemd/system``
  (after what the public reference's ``start_slurm.sh`` and ``setup_mariadb_accounting.sh`` expect
  there: ``$SLURMD_OPTIONS`` in slurmd's command line, a slurmdbd unit of the AMI's own), a placeholder
  ``slurm.conf``, and ``/opt/ml/config/resource_config.json`` as HyperPod writes it.
- **HyperPod's cluster agent** (:func:`hyperpod_slurm_conf`, :meth:`Bed.agent_writes_slurm_conf`): it
  writes the controller's ``slurm.conf`` while the lifecycle script runs, marks a failed node down and
  resumes its replacement. The file's cgroup settings differ from HyperPod's: this machine delegates no
  cgroups to containers, so Slurm's cgroup plugins cannot run (``proctrack/linuxproc``, ``task/none``,
  ``CgroupPlugin=disabled``). HyperPod's own defaults are ``task/none`` as well.
- **HyperPod's API-driven Slurm mode** (hyperpod_api_bed.py, whose docstring cites the AWS pages): before
  ``on_init_complete.sh`` runs, the agent writes the node and partition sections of slurm.conf and
  topology.conf from the instance groups' ``SlurmConfig``, runs its accounting (MariaDB and slurmdbd on the
  controller) and the Slurm daemons, and FSx is already mounted (a host folder).
- **Secrets Manager** (``aws`` on the controller answers ``get-secret-value`` from a file) and **Aurora**
  (a MariaDB node of the bed).
- **ParallelCluster's AMI layout** (:meth:`Node.lay_out_parallelcluster_ami`, used by parallelcluster_bed.py,
  whose docstring says what else of ParallelCluster it emulates): Slurm's client commands only under
  ``/opt/slurm/bin``, the cookbook's ``slurmctld`` / ``slurmd`` units, and ``/opt/slurm`` shared from the head
  node (a bind mount standing in for NFS).

Needs root, ``systemd-nspawn``, ``ip`` and overlayfs; ``make integration`` builds the root.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.lifecycle.sandbox import AMI_PLACEHOLDER_SLURM_CONF, AMI_SLURMCTLD_UNIT, AMI_SLURMD_UNIT
from training_clusters.node_scripts import lifecycle_bundle

REPO = Path(__file__).resolve().parents[2]
#: The lifecycle scripts under test (TC_BED_LIFECYCLE: another copy, e.g. an older commit's, to see a
#: test fail on it).
LIFECYCLE = Path(os.environ.get("TC_BED_LIFECYCLE") or lifecycle_bundle())
#: Where HyperPod puts the lifecycle folder it downloads from LifeCycleConfig.SourceS3Uri (any folder:
#: the scripts find their files beside on_create.sh).
LIFECYCLE_ON_NODE = "/opt/ml/lifecycle"
#: The PATH a root service has on Ubuntu; /opt/slurm/bin is not on it.
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NETWORK = "10.1.0.0/16"
PREFIX = 16

#: Client commands and daemons HyperPod's AMI has under /opt/slurm.
SLURM_BIN = ("sacct", "sacctmgr", "salloc", "sbatch", "scancel", "scontrol", "sdiag", "sinfo",
             "sprio", "squeue", "sreport", "srun", "sshare", "sstat")  # fmt: skip
SLURM_SBIN = ("slurmctld", "slurmd", "slurmdbd", "sackd", "slurmstepd")

#: The AMI's slurmdbd unit (the reference's setup_mariadb_accounting.sh enables the one at
#: /etc/systemd/system/slurmdbd.service instead of writing its own).
AMI_SLURMDBD_UNIT = """\
[Unit]
Description=Slurm DBD accounting daemon
After=network-online.target munge.service mysql.service mysqld.service mariadb.service

[Service]
Type=simple
ExecStart=/opt/slurm/sbin/slurmdbd -D -s
ExecReload=/bin/kill -HUP $MAINPID
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
"""

#: ParallelCluster's slurmctld unit, as the cookbook renders it with install_dir /opt/slurm
#: (aws/aws-parallelcluster-cookbook cookbooks/aws-parallelcluster-slurm/templates/default/slurm/head_node/
#: slurmctld.service.erb).
PCLUSTER_SLURMCTLD_UNIT = """\
[Unit]
Description=Slurm controller daemon
After=network-online.target munge.service remote-fs.target
Wants=network-online.target
ConditionPathExists=/opt/slurm/etc/slurm.conf

[Service]
Type=simple
EnvironmentFile=-/etc/sysconfig/slurmctld
ExecStart=/opt/slurm/sbin/slurmctld -D -s $SLURMCTLD_OPTIONS
ExecReload=/bin/kill -HUP $MAINPID
LimitNOFILE=562930
LimitMEMLOCK=infinity
LimitSTACK=infinity

[Install]
WantedBy=multi-user.target
"""

#: ParallelCluster's slurmd unit (the same cookbook, templates/default/slurm/compute/slurmd.service.erb); the
#: node name comes from /etc/sysconfig/slurmd (SLURMD_OPTIONS='-N <name>', written by finalize_compute.rb).
PCLUSTER_SLURMD_UNIT = """\
[Unit]
Description=Slurm node daemon
After=munge.service network-online.target remote-fs.target
Wants=network-online.target
ConditionPathExists=/opt/slurm/etc/slurm.conf

[Service]
Type=simple
EnvironmentFile=-/etc/sysconfig/slurmd
ExecStart=/opt/slurm/sbin/slurmd -D -s $SLURMD_OPTIONS
ExecReload=/bin/kill -HUP $MAINPID
KillMode=process
LimitNOFILE=131072
LimitMEMLOCK=infinity
LimitSTACK=infinity
Delegate=yes

[Install]
WantedBy=multi-user.target
"""


def slurm_root() -> Path:
    return Path(os.environ.get("TC_SLURM_ROOT", REPO / ".cache" / "slurm-root"))


def missing_prerequisites() -> str | None:
    """Why the bed cannot run here, or None."""
    if os.geteuid() != 0:
        return "the real-Slurm bed needs root (systemd-nspawn, network namespaces, overlayfs)"
    for tool in ("systemd-nspawn", "ip", "nsenter", "mount"):
        if shutil.which(tool) is None:
            return f"the real-Slurm bed needs {tool}"
    if not (slurm_root() / ".tc-slurm-root-ready").is_file():
        return (
            f"no Slurm root at {slurm_root()}: run `make integration` (tests/integration/build_slurm_root.sh)"
        )
    return None


def slurm_client_commands(root: Path) -> list[str]:
    """Every command of the root's Debian slurm-client package, by name (it puts them in /usr/bin)."""
    listed = (root / "var" / "lib" / "dpkg" / "info" / "slurm-client.list").read_text().split()
    return sorted(
        path.rsplit("/", 1)[1] for path in listed if path.startswith("/usr/bin/") and path != "/usr/bin"
    )


def slurm_version_number(root: Path) -> int:
    """The root's Slurm as Slurm's SLURM_VERSION_NUMBER: 24.11.5 is (24 << 16) + (11 << 8) + 5."""
    status = (root / "var" / "lib" / "dpkg" / "status").read_text()
    for stanza in status.split("\n\n"):
        if "Package: slurm-client\n" in stanza + "\n":
            version = next(line.split()[1] for line in stanza.splitlines() if line.startswith("Version:"))
            major, minor, micro = (int(part) for part in version.split("-")[0].split(".")[:3])
            return (major << 16) + (minor << 8) + micro
    raise KeyError("slurm-client")


def node_name(ip: str) -> str:
    """HyperPod's node names: ip-10-1-0-10 for 10.1.0.10."""
    return "ip-" + ip.replace(".", "-")


def hyperpod_slurm_conf(controller_ip: str, partitions: dict[str, list[str]], *, extra: str = "") -> str:
    """The controller's slurm.conf as HyperPod's agent writes it, with this machine's cgroup limits.

    The keys HyperPod sets that the lifecycle scripts read (ClusterName, SlurmctldHost with the node
    name and address, configless, one NodeName line per instance with NodeAddr, one partition per
    worker group); the daemon settings of a minimal working cluster around them. Nodes are declared
    with 8 CPUs, which the bed's containers do not have (``SlurmdParameters=config_overrides``), so jobs
    for a GPU instance (8 tasks per node, one per GPU) fit as they would on it.
    """
    lines = [
        "ClusterName=ml-cluster",
        f"SlurmctldHost={node_name(controller_ip)}({controller_ip})",
        "SlurmctldParameters=enable_configless",
        "AuthType=auth/munge",
        "SlurmUser=slurm",
        "StateSaveLocation=/var/spool/slurmctld",
        "SlurmdSpoolDir=/var/spool/slurmd",
        "SlurmctldLogFile=/var/log/slurmctld.log",
        "SlurmdLogFile=/var/log/slurmd.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "KillWait=5",
        "MinJobAge=300",
    ]
    # one NodeName line per node, in the order the partitions first list it (a node may be in several)
    for ip in dict.fromkeys(ip for ips in partitions.values() for ip in ips):
        lines.append(f"NodeName={node_name(ip)} NodeAddr={ip} CPUs=8 State=UNKNOWN")
    default = True
    for partition, ips in partitions.items():
        nodes = ",".join(node_name(ip) for ip in ips)
        lines.append(
            f"PartitionName={partition} Nodes={nodes} Default={'YES' if default else 'NO'} MaxTime=INFINITE"
        )
        default = False
    return "\n".join(lines) + "\n" + extra


def resource_config(groups: dict[str, list[str]]) -> dict[str, object]:
    """/opt/ml/config/resource_config.json as HyperPod writes it (the keys the scripts read)."""
    return {
        "ClusterConfig": {
            "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/bed0123456",
            "ClusterName": "ml-cluster",
        },
        "InstanceGroups": [
            {
                "Name": group,
                "InstanceType": "ml.c5.xlarge",
                "Instances": [
                    {
                        "InstanceName": f"{group}-{index + 1}",
                        "AgentIpAddress": f"172.16.0.{index + 10}",
                        "CustomerIpAddress": ip,
                        "InstanceId": f"i-0bed{ip.replace('.', '')}",
                    }
                    for index, ip in enumerate(ips)
                ],
            }
            for group, ips in groups.items()
        ],
    }


def run(
    command: list[str], *, check: bool = True, timeout: float = 60, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)  # type: ignore[call-overload]
    if check and result.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(command)} exited {result.returncode}: {result.stdout}{result.stderr}"
        )
    return result


@dataclass
class Node:
    """One booted machine of the bed."""

    bed: Bed
    ip: str
    generation: int = 0
    process: subprocess.Popen[bytes] | None = None
    leader: int = 0
    console: Path | None = None
    #: Host folders bound into the node when it boots (inside path -> host path), e.g. a shared file system.
    binds: dict[str, Path] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return node_name(self.ip)

    @property
    def netns(self) -> str:
        return f"{self.bed.tag}-{self.ip.rsplit('.', 2)[-2]}-{self.ip.rsplit('.', 1)[-1]}"

    @property
    def base(self) -> Path:
        return self.bed.work / f"{self.name}.{self.generation}"

    @property
    def merged(self) -> Path:
        return self.base / "merged"

    def path(self, inside: str) -> Path:
        return self.merged / inside.lstrip("/")

    def write(self, inside: str, text: str, mode: int = 0o644) -> None:
        target = self.path(inside)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        target.write_text(text)
        target.chmod(mode)

    def read(self, inside: str) -> str:
        return self.path(inside).read_text()

    # -- machine ------------------------------------------------------------------------------------

    def mount(self) -> None:
        for part in ("upper", "work", "merged"):
            (self.base / part).mkdir(parents=True, exist_ok=True)
        run(["mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={self.bed.root},upperdir={self.base / 'upper'},workdir={self.base / 'work'}",
             str(self.merged)])  # fmt: skip
        self.write("/etc/hostname", self.name + "\n")
        self.write_hosts()

    def write_hosts(self) -> None:
        """/etc/hosts naming every node of the bed, as the VPC's DNS resolves every ip-a-b-c-d name (slurmctld
        looks up the host of each client it answers: a name it cannot resolve costs it 10 s per message)."""
        hosts = ["127.0.0.1 localhost"] + [f"{ip} {node_name(ip)}" for ip in self.bed.ips]
        self.write("/etc/hosts", "\n".join(hosts) + "\n")

    def lay_out_hyperpod_ami(self, resource_config_json: dict[str, object]) -> None:
        """What HyperPod's Slurm AMI and agent give a node before the lifecycle script runs (emulated)."""
        for folder, names, source in (("bin", SLURM_BIN, "/usr/bin"), ("sbin", SLURM_SBIN, "/usr/sbin")):
            (self.path(f"/opt/slurm/{folder}")).mkdir(parents=True, exist_ok=True)
            for command in names:
                self.path(f"/opt/slurm/{folder}/{command}").symlink_to(f"{source}/{command}")
        self._etc_slurm_in_opt()
        self.write("/opt/slurm/etc/slurm.conf", AMI_PLACEHOLDER_SLURM_CONF)
        self.write("/etc/systemd/system/slurmd.service", AMI_SLURMD_UNIT)
        self.write("/etc/systemd/system/slurmctld.service", AMI_SLURMCTLD_UNIT)
        self.write("/etc/systemd/system/slurmdbd.service", AMI_SLURMDBD_UNIT)
        self._slurm_spools("/var/spool/slurmctld", "/var/spool/slurmd")
        self.write("/opt/ml/config/resource_config.json", json.dumps(resource_config_json, indent=2))

    def lay_out_parallelcluster_ami(self, *, head_node: Node | None = None) -> None:
        """Slurm as ParallelCluster's AMI and cookbook give a node (emulated); HEAD_NODE shares its /opt/slurm.

        The cookbook builds Slurm into /opt/slurm (install_dir, aws-parallelcluster-environment/attributes/
        environment.rb) and shares that folder from the head node with every other node over NFS
        (internal_shared_dirs, same file). Here the head node gets Slurm's client commands moved from Debian's
        /usr/bin to /opt/slurm/bin, so none is on any PATH, and links to Debian's daemons in /opt/slurm/sbin
        (Debian's slurmd starts /usr/sbin/slurmstepd, a path built into it); a node given HEAD_NODE has the
        head node's /opt/slurm bound in at boot (for NFS) and no client command of its own. Both get
        /etc/slurm -> /opt/slurm/etc (Debian's binaries read /etc/slurm), the cookbook's units and spools.
        """
        clients = slurm_client_commands(self.bed.root)
        if head_node is None:
            self.path("/opt/slurm/bin").mkdir(parents=True, exist_ok=True)
            for command in clients:
                os.rename(self.path(f"/usr/bin/{command}"), self.path(f"/opt/slurm/bin/{command}"))
            self.path("/opt/slurm/sbin").mkdir(parents=True, exist_ok=True)
            for daemon in SLURM_SBIN:
                self.path(f"/opt/slurm/sbin/{daemon}").symlink_to(f"/usr/sbin/{daemon}")
        else:
            for command in clients:
                self.path(f"/usr/bin/{command}").unlink()
            self.binds["/opt/slurm"] = head_node.path("/opt/slurm")
        self._etc_slurm_in_opt()
        self.write("/etc/systemd/system/slurmctld.service", PCLUSTER_SLURMCTLD_UNIT)
        self.write("/etc/systemd/system/slurmd.service", PCLUSTER_SLURMD_UNIT)
        # StateSaveLocation and SlurmdSpoolDir of the cookbook's slurm.conf.erb
        self._slurm_spools("/var/spool/slurm.state", "/var/spool/slurmd")

    def _etc_slurm_in_opt(self) -> None:
        etc = self.path("/etc/slurm")
        shutil.rmtree(etc)
        self.path("/opt/slurm/etc").mkdir(parents=True, exist_ok=True)
        etc.symlink_to("/opt/slurm/etc")

    def _slurm_spools(self, *spools: str) -> None:
        slurm_uid, slurm_gid = self.bed.ids("slurm")
        for spool in spools:
            self.path(spool).mkdir(parents=True, exist_ok=True)
            os.chown(self.path(spool), slurm_uid, slurm_gid)

    def upload_lifecycle(self, params: dict[str, object] | None, settings: dict[str, object]) -> None:
        """The lifecycle folder as HyperPod downloads it: our scripts plus the generated files (no
        provisioning_parameters.json when PARAMS is None, as in HyperPod's API-driven Slurm mode)."""
        target = self.path(LIFECYCLE_ON_NODE)
        shutil.copytree(LIFECYCLE, target, ignore=shutil.ignore_patterns("README.md", "__pycache__"))
        if params is not None:
            (target / "provisioning_parameters.json").write_text(json.dumps(params, indent=2))
        (target / "training_clusters.json").write_text(json.dumps(settings, indent=2))

    def boot(self) -> None:
        self.console = self.base / "console.log"
        with self.console.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    "systemd-nspawn",
                    "-b",
                    "-D",
                    str(self.merged),
                    f"--machine={self.name}",
                    f"--hostname={self.name}",
                    "--register=no",
                    "--keep-unit",
                    f"--network-namespace-path=/run/netns/{self.netns}",
                    "--console=pipe",
                    "--capability=CAP_NET_ADMIN",
                    *(f"--bind={host}:{inside}" for inside, host in self.binds.items()),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.leader = self._wait_for_leader()
        deadline = time.monotonic() + 60
        state = ""
        while time.monotonic() < deadline:
            state = self.sh("systemctl is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                return
            time.sleep(0.2)
        jobs = self.sh("systemctl list-jobs --no-pager", check=False).stdout
        raise RuntimeError(f"{self.name} did not boot (systemctl is-system-running: {state}; jobs: {jobs})")

    def _wait_for_leader(self) -> int:
        """The PID (on the host) of the container's systemd: nspawn's descendant that is PID 1 inside."""
        assert self.process is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"systemd-nspawn for {self.name} exited: {self.console.read_text()}")  # type: ignore[union-attr]
            for pid in _descendants(self.process.pid):
                with contextlib.suppress(OSError):
                    if _is_namespace_init(pid) and _comm(pid) == "systemd":
                        return pid
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: no systemd inside the container after 30 s")

    def power_off(self) -> None:
        """Pulls the plug: the machine stops at once, as an instance HyperPod takes out of service."""
        if self.process is None:
            return
        # The container's init outlives nspawn; killing a PID namespace's init ends every process in it.
        for pid in (self.leader, self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{self.leader}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.process = None
        for _ in range(50):
            if run(["umount", str(self.merged)], check=False).returncode == 0:
                return
            time.sleep(0.1)
        run(["umount", "-l", str(self.merged)], check=False)

    # -- commands inside ----------------------------------------------------------------------------

    def sh(self, script: str, *, user: str | None = None, check: bool = True, timeout: float = 60,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """Runs a bash script on the node (as root, or as USER through runuser's login shell)."""
        variables = {"PATH": ROOT_PATH, "HOME": "/root", "LANG": "C.UTF-8", **(env or {})}
        command = ["bash", "-c", script]
        if user is not None:
            command = ["runuser", "-l", user, "-c", script]
        full = ["nsenter", "-t", str(self.leader), "-a", "--", "env", "-i",
                *(f"{key}={value}" for key, value in variables.items()), *command]  # fmt: skip
        return run(full, check=check, timeout=timeout)

    def on_create(self, *, env: dict[str, str] | None = None, timeout: float = 300,
                  script: str = "on_create.sh") -> subprocess.Popen[str]:  # fmt: skip
        """Starts the lifecycle script (SCRIPT of the lifecycle folder: LifeCycleConfig.OnCreate or
        OnInitComplete) as HyperPod does (root, its folder, stdin closed); returns at once."""
        variables = {
            "PATH": ROOT_PATH,
            "HOME": "/root",
            "LANG": "C.UTF-8",
            **self.bed.script_env,
            **(env or {}),
        }
        command = ["nsenter", "-t", str(self.leader), "-a", "--", "env", "-i",
                   *(f"{key}={value}" for key, value in variables.items()),
                   "bash", f"{LIFECYCLE_ON_NODE}/{script}"]  # fmt: skip
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)  # fmt: skip


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    queue = [pid]
    while queue:
        current = queue.pop()
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{current}/task"):
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
                for child in children:
                    found.append(int(child))
                    queue.append(int(child))
    return found


def _is_namespace_init(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            ids = line.split()[1:]
            return len(ids) > 1 and ids[-1] == "1"
    return False


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


_BEDS = itertools.count()


@dataclass
class Bed:
    """Nodes on one bridge; ``with Bed(work) as bed:`` tears everything down at the end."""

    work: Path
    ips: list[str] = field(default_factory=list)
    tag: str = field(default_factory=lambda: f"tcb{os.getpid() % 10000}{next(_BEDS)}")
    nodes: dict[str, Node] = field(default_factory=dict)
    script_env: dict[str, str] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return slurm_root()

    @property
    def bridge_ns(self) -> str:
        return f"{self.tag}-br"

    def __enter__(self) -> Bed:
        run(["ip", "netns", "add", self.bridge_ns])
        run(["ip", "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.bridge_ns, "link", "set", "br0", "up"])
        return self

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes.values():
            node.power_off()
        for ip in self.ips:
            run(["ip", "netns", "del", Node(self, ip).netns], check=False)
        run(["ip", "netns", "del", self.bridge_ns], check=False)

    def ids(self, user: str) -> tuple[int, int]:
        for line in (self.root / "etc" / "passwd").read_text().splitlines():
            fields = line.split(":")
            if fields[0] == user:
                return int(fields[2]), int(fields[3])
        raise KeyError(user)

    def wire(self, ip: str) -> None:
        """A network namespace for the node at IP, with a veth into the bridge."""
        node = Node(self, ip)
        index = len(self.ips)
        inside, outside = f"v{self.tag}-{index}", f"b{self.tag}-{index}"
        run(["ip", "netns", "add", node.netns])
        run(["ip", "link", "add", inside, "type", "veth", "peer", "name", outside])
        run(["ip", "link", "set", inside, "netns", node.netns])
        run(["ip", "link", "set", outside, "netns", self.bridge_ns])
        run(["ip", "-n", self.bridge_ns, "link", "set", outside, "master", "br0", "up"])
        run(["ip", "-n", node.netns, "link", "set", inside, "name", "eth0"])
        run(["ip", "-n", node.netns, "addr", "add", f"{ip}/{PREFIX}", "dev", "eth0"])
        run(["ip", "-n", node.netns, "link", "set", "eth0", "up"])
        run(["ip", "-n", node.netns, "link", "set", "lo", "up"])
        self.ips.append(ip)
        for other in self.nodes.values():  # the new name resolves on every node already there
            if os.path.ismount(other.merged):
                other.write_hosts()

    def prepare(self, ip: str, *, generation: int = 0) -> Node:
        """A node's file system (a fresh overlay), not yet booted."""
        if ip not in self.ips:
            self.wire(ip)
        node = Node(self, ip, generation=generation)
        node.mount()
        self.nodes[ip] = node
        return node

    def agent_writes_slurm_conf(self, controller: Node, text: str, *, after_s: float) -> None:
        """HyperPod's agent writing the cluster's slurm.conf on the controller, AFTER_S seconds from now."""

        def write() -> None:
            time.sleep(after_s)
            controller.write("/opt/slurm/etc/slurm.conf", text)

        import threading

        threading.Thread(target=write, daemon=True).start()


def wait_until(what: str, probe: Callable[[], bool], *, seen: Callable[[], object] | None = None,
               timeout: float = 60, pause: float = 0.5) -> None:  # fmt: skip
    """Polls PROBE until it is true; fails naming WHAT and what SEEN (if given) shows at the end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(pause)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last seen: {seen() if seen else 'false'!r})")


@contextlib.contextmanager
def bed(work: Path) -> Iterator[Bed]:
    with Bed(work) as made:
        yield made


#: The instance metadata service's address.
IMDS = "169.254.169.254"


@contextlib.contextmanager
def emulated_imds(bed: Bed, folder: Path) -> Iterator[None]:
    """IMDS, emulated: an HTTP server on its address (169.254.169.254) in the bridge's namespace, a host of
    its own as on EC2, serving FOLDER; a node reaches it once :func:`reach_imds` routed it over its link."""
    run(["ip", "-n", bed.bridge_ns, "addr", "add", f"{IMDS}/32", "dev", "br0"])
    run(["ip", "-n", bed.bridge_ns, "route", "add", NETWORK, "dev", "br0"])
    run(["ip", "-n", bed.bridge_ns, "link", "set", "lo", "up"])
    server = subprocess.Popen(
        ["ip", "netns", "exec", bed.bridge_ns, sys.executable, "-m", "http.server", "--bind", IMDS, "80"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    probe = f"import socket; socket.create_connection(({IMDS!r}, 80), 1)"
    try:
        wait_until(
            "the emulated IMDS listening",
            lambda: (
                run(
                    ["ip", "netns", "exec", bed.bridge_ns, sys.executable, "-c", probe], check=False
                ).returncode
                == 0
            ),
            timeout=20,
        )
        yield
    finally:
        server.kill()
        server.wait()


def reach_imds(node: Node) -> None:
    node.sh(f"ip route replace {IMDS}/32 dev eth0")


def imds_answer(node: Node, user: str | None) -> str:
    """What a request to IMDS gets as USER (None: root): the HTTP status, or curl's exit code."""
    result = node.sh(
        f"curl -s -m 5 -o /dev/null -w '%{{http_code}}' http://{IMDS}/latest/meta-data/ || echo \" curl exit $?\"",
        user=user,
        check=False,
    )
    return result.stdout.strip()


#: ssh as a script uses it: no prompt, no host key question, a short connect timeout.
SSH = "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5"
