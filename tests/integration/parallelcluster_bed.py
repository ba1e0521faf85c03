"""A ParallelCluster-like Slurm cluster on the real-Slurm bed: a head node and one static compute node.

Each node is booted as slurm_bed.py describes; then it gets what ParallelCluster gives it, and our custom actions
run as ParallelCluster runs them. Emulated, from ParallelCluster's own code (github.com/aws/aws-parallelcluster-
cookbook, "cookbook", and github.com/aws/aws-parallelcluster, "pcluster"):

- **Slurm under /opt/slurm** (:meth:`Node.lay_out_parallelcluster_ami`): client commands only in
  ``/opt/slurm/bin``, ``/etc/slurm`` -> ``/opt/slurm/etc``, the head node's ``/opt/slurm`` bound into the compute
  node at boot where ParallelCluster mounts it over NFS (cookbook aws-parallelcluster-environment/attributes/
  environment.rb: install_dir /opt/slurm, one of internal_shared_dirs). So ``/opt/slurm/etc`` is one folder for
  both nodes, as on a cluster: not configless, and not two copies either (a bind mount is NFS without its
  caching). The units are the cookbook's (templates/default/slurm/head_node/slurmctld.service.erb,
  compute/slurmd.service.erb).
- **slurm.conf** (:func:`slurm_conf_files`): the cookbook's templates/default/slurm/slurm.conf.erb rendered for
  this cluster, with ``slurm_parallelcluster.conf`` and one partition file shaped as the cookbook's generator
  writes them (files/default/head_node_slurm/slurm/templates/slurm_parallelcluster.conf, the expected outputs
  under test/unit/slurm/test_slurm_config_generator/): a static node ``compute-st-c5n-1`` (State=CLOUD, its
  features the instance type and compute resource) in partition ``compute``, excluded from power saving
  (SuspendExcNodes) as static nodes are. ParallelCluster's suspend and resume programs are stand-ins that fail
  (:data:`POWER_SAVING_STAND_IN`; Slurm never calls them for a static node), and power saving stays on: without
  it slurmctld resolves the node's name at every start and reconfigure, before the node has an address.
  Changed for the bed: no Prolog/Epilog (the health-check scripts they name are not here),
  ``proctrack/linuxproc`` and ``task/none`` (no cgroup delegation in this machine's containers), no accounting
  (parallelcluster-team's Aurora is not here) and none of its CustomSlurmSettings.
- **The bootstrap's order** (pcluster cli/src/pcluster/templates/cluster_stack.py: configSets ``default`` =
  chefPrepEnv, shellRunPreInstall, chefConfig, shellRunPostInstall, chefFinalize; compute_node/user_data.sh:
  init, -preinstall, config, -postinstall, finalize). On the head node the config recipe has started slurmctld
  (cookbook aws-parallelcluster-slurm/recipes/config/config_head_node.rb: enable + start, ``chef_sleep 3``,
  ``systemctl is-active``) before OnNodeConfigured runs. On a compute node OnNodeConfigured runs *before*
  finalize starts slurmd (recipes/finalize/finalize_compute.rb writes ``/etc/sysconfig/slurmd`` with
  ``SLURMD_OPTIONS='-N <node name>'``, enables and starts slurmd, checks it is active and resumes a static node,
  ignoring the failure when it is idle already); a second run of the actions here happens with slurmd up.
  clustermgtd's part, giving the static node its address (``scontrol update nodename=... nodeaddr=...
  nodehostname=...``) once the instance runs, is done by the bed before the compute node boots.
- **How a custom action runs** (:func:`run_custom_action`): cfn-init runs ``fetch_and_run -postinstall``
  (cluster_stack.py, shellRunPostInstall), which runs the cookbook's custom_action_executor.py
  (aws-parallelcluster-environment/files/custom_action_executor/): it downloads the script from S3 into a
  ``tempfile.NamedTemporaryFile`` (``/tmp/tmpXXXXXXXX``), ``chmod +x``, and runs ``[path, *Args]`` as root with
  its own environment: the PATH the user data exported (:data:`PARALLELCLUSTER_PATH`, pcluster
  cli/src/pcluster/resources/head_node/user_data.sh, compute_node/user_data.sh) plus the ``cfn_*`` variables
  of its CfnConfigEnvEnricher. The script comes from this repository instead of S3 (no dos2unix: the bed has
  none, and our scripts have Unix line ends). Its Args are those the stack gives it (``users_args``).
- **What else the AMI and cookbook put on a node**: the users ``pcluster-admin`` (cluster_admin_user,
  aws-parallelcluster-shared/attributes/users.rb) and ``ec2-user`` (alinux2023's default user),
  ``/etc/parallelcluster/cfnconfig`` (templates/init/
  cfnconfig.erb, ``cfn_node_type=HeadNode`` / ``ComputeFleet``), the Pyxis and Enroot examples ParallelCluster
  3.11+ installs under ``/opt/parallelcluster/examples`` (:data:`EXAMPLES`: aws-parallelcluster-slurm/recipes/
  install/install_pyxis.rb with templates/default/pyxis/{plugstack,pyxis}.conf.erb, aws-parallelcluster-platform/
  resources/enroot/partial/_enroot_common.rb with templates/enroot/enroot.conf.erb, rendered with the attributes'
  spank_config_dir /opt/slurm/etc/plugstack.conf.d, runtime_path /run/pyxis, temporary_dir /run/enroot and
  persistent_dir /var/enroot), and FSx for Lustre at ``/shared`` (one host folder bound into both nodes).
- **Pyxis itself**: install_pyxis.rb builds pyxis into ``/usr/local/lib/slurm/spank_pyxis.so`` on every AMI, and
  the example ``pyxis.conf`` names it ``required``, so once pyxis.sh enables it every sbatch and srun, and
  slurmd and slurmstepd on the compute node, must load it or fail (slurmd does not start). Pyxis is not on the bed: a stand-in
  (:data:`PYXIS_STAND_IN_C`, built with the host's gcc, no libc) is a SPANK plugin that registers pyxis's
  ``--container-image`` option and does nothing else. It shows the SPANK stack pyxis.sh writes is the one Slurm
  loads, and lets jobs run after it; containers themselves (enroot) are not tested here.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.slurm_bed import (
    REPO,
    Bed,
    Node,
    missing_prerequisites,
    node_name,
    run,
    slurm_version_number,
    wait_until,
)
from tests.parallelcluster_actions.test_actions import PARALLELCLUSTER_PATH
from training_clusters.config import load_environment
from training_clusters.node_scripts.parallelcluster import (
    ACTIONS_DIR,
    ENROOT_FOLDERS,
    ENROOT_SCRIPT,
    IMDS_GUARD,
    IMDS_SCRIPT,
    PYXIS_SCRIPT,
    USERS,
    USERS_SCRIPT,
)
from training_clusters.stacks.parallelcluster import (
    ACTIONS_PREFIX,
    DEFAULT_USERS,
    IMDS_GUARD_ARGS,
    PCLUSTER_ADMIN_USER,
    enroot_args,
    head_node_for_admins,
    users_args,
)

#: The environment the bed's cluster follows: its cluster name, queue, users and shared file system.
ENVIRONMENT = load_environment(REPO / "environments" / "parallelcluster-team.yaml")
_SPEC = ENVIRONMENT.parallelcluster
assert _SPEC is not None and ENVIRONMENT.storage is not None and ENVIRONMENT.storage.lustre is not None
CLUSTER_NAME = _SPEC.cluster_name
QUEUE = _SPEC.queues[0].name
#: The static node's name, as the cookbook's generator names them: <queue>-st-<compute resource>-<n>.
COMPUTE_NODE = f"{QUEUE}-st-{_SPEC.queues[0].compute_resources[0].name}-1"
INSTANCE_TYPE = _SPEC.queues[0].compute_resources[0].instance_type
#: Where FSx for Lustre is mounted on every node; the stack puts the homes under it.
SHARED = ENVIRONMENT.storage.lustre.mount_dir
HOME_ROOT = f"{SHARED}/home"
HEAD_IP = "10.1.0.10"
COMPUTE_IP = "10.1.1.11"
#: The bucket the stack uploads the actions to (a name of the bed's: the S3 URL only reaches cfn_postinstall).
ACTIONS_BUCKET = "team-training-actionsbucket-bed"
PYXIS_PLUGIN = "/usr/local/lib/slurm/spank_pyxis.so"


def cfnconfig(node_type: str) -> str:
    """/etc/parallelcluster/cfnconfig (cookbook aws-parallelcluster-environment/templates/init/cfnconfig.erb)."""
    lines = [
        f"stack_name={CLUSTER_NAME}",
        'cfn_preinstall="/opt/parallelcluster/scripts/fetch_and_run --execute-via-cfnconfig -preinstall"',
        "cfn_preinstall_args=()",
        'cfn_postinstall="/opt/parallelcluster/scripts/fetch_and_run --execute-via-cfnconfig -postinstall"',
        "cfn_postinstall_args=()",
        'cfn_postupdate="/opt/parallelcluster/scripts/fetch_and_run --execute-via-cfnconfig -postupdate"',
        "cfn_postupdate_args=()",
        "cfn_region=us-east-1",
        "cfn_scheduler=slurm",
        "cfn_scheduler_slots=vcpus",
        "cfn_instance_slots=1",
        "cfn_ephemeral_dir=/scratch",
        "cfn_ebs_shared_dirs=",
        "cfn_proxy=NONE",
        f"cfn_node_type={node_type}",
        "cfn_cluster_user=ec2-user",
    ]
    if node_type == "ComputeFleet":
        lines += [f"cfn_head_node={node_name(HEAD_IP)}", f"cfn_head_node_private_ip={HEAD_IP}",
                  f"cfn_scheduler_queue_name={QUEUE}"]  # fmt: skip
    else:
        lines.append("cfn_volume=vol-0bed0123456789abc")
    return "\n".join(lines) + "\n"


#: /opt/parallelcluster/examples as ParallelCluster 3.11+ installs it (see the module docstring): the templates
#: rendered with the cookbook's attributes, whole.
EXAMPLES = {
    "enroot/enroot.conf": """\
#ENROOT_LIBRARY_PATH        /usr/lib/enroot
#ENROOT_SYSCONF_PATH        /etc/enroot
ENROOT_RUNTIME_PATH         /run/enroot/runtime/user-$(id -u)
ENROOT_DATA_PATH            /run/enroot/data/user-$(id -u)
ENROOT_CONFIG_PATH          /var/enroot/config/user-$(id -u)
ENROOT_CACHE_PATH           /var/enroot/cache/group-$(id -g)
#ENROOT_TEMP_PATH           ${TMPDIR:-/tmp}

# Gzip program used to uncompress digest layers.
#ENROOT_GZIP_PROGRAM        gzip

# Options passed to zstd to compress digest layers.
#ENROOT_ZSTD_OPTIONS        -1

# Options passed to mksquashfs to produce container images.
ENROOT_SQUASH_OPTIONS -noI -noD -noF -noX -no-duplicates

# Make the container root filesystem writable by default.
ENROOT_ROOTFS_WRITABLE     yes

# Remap the current user to root inside containers by default.
#ENROOT_REMAP_ROOT          no

# Maximum number of processors to use for parallel tasks (0 means unlimited).
#ENROOT_MAX_PROCESSORS      $(nproc)

# Maximum number of concurrent connections (0 means unlimited).
#ENROOT_MAX_CONNECTIONS     10

# Maximum time in seconds to wait for connections establishment (0 means unlimited).
#ENROOT_CONNECT_TIMEOUT     30

# Maximum time in seconds to wait for network operations to complete (0 means unlimited).
#ENROOT_TRANSFER_TIMEOUT    0

# Number of times network operations should be retried.
#ENROOT_TRANSFER_RETRIES    0

# Use a login shell to run the container initialization.
#ENROOT_LOGIN_SHELL         yes

# Allow root to retain his superuser privileges inside containers.
#ENROOT_ALLOW_SUPERUSER     no

# Use HTTP for outgoing requests instead of HTTPS (UNSECURE!).
#ENROOT_ALLOW_HTTP          no

# Include user-specific configuration inside bundles by default.
#ENROOT_BUNDLE_ALL          no

# Generate an embedded checksum inside bundles by default.
#ENROOT_BUNDLE_CHECKSUM     no

# Mount the current user's home directory by default.
ENROOT_MOUNT_HOME          no

# Restrict /dev inside the container to a minimal set of devices.
ENROOT_RESTRICT_DEV        no

# Always use --force on command invocations.
#ENROOT_FORCE_OVERRIDE      no

# SSL certificates settings:
#SSL_CERT_DIR
#SSL_CERT_FILE

# Proxy settings:
#all_proxy
#no_proxy
#http_proxy
#https_proxy
""",
    "spank/plugstack.conf": """\
# THIS IS AN EXAMPLE OF Spank config file
# When you want to enable please move this to /opt/slurm/etc/plugstack.conf
include /opt/slurm/etc/plugstack.conf.d/*
""",
    "pyxis/pyxis.conf": f"""\
# THIS IS AN EXAMPLE OF pyxis.conf file
# When you want to enable please move this to /opt/slurm/etc/plugstack.conf.d/pyxis.conf
required {PYXIS_PLUGIN} runtime_path=/run/pyxis
""",
}

#: The cookbook's slurm.conf.erb rendered for the bed (what differs: see the module docstring).
SLURM_CONF = f"""\
#
# Example slurm.conf file. Please run configurator.html
# (in doc/html) to build a configuration file customized
# for your environment.
#
#
# slurm.conf file generated by configurator.html.
#
# See the slurm.conf man page for more information.
#
# CLUSTER SETTINGS
ClusterName={CLUSTER_NAME}
SlurmUser=slurm
SlurmctldPort=6820-6829
SlurmdPort=6818
AuthType=auth/munge
StateSaveLocation=/var/spool/slurm.state
SlurmdSpoolDir=/var/spool/slurmd
SwitchType=switch/none
SlurmctldPidFile=/var/run/slurmctld.pid
SlurmdPidFile=/var/run/slurmd.pid
ReconfigFlags=KeepPartState
#
# CLOUD CONFIGS OPTIONS
SlurmctldParameters=idle_on_node_suspend,power_save_min_interval=30,node_reg_mem_percent=75
TreeWidth=65533
SuspendProgram=/opt/parallelcluster/scripts/slurm/slurm_suspend
ResumeProgram=/opt/parallelcluster/scripts/slurm/slurm_resume
ResumeFailProgram=/opt/parallelcluster/scripts/slurm/slurm_suspend
RebootProgram=/sbin/reboot
SuspendTimeout=120
PrivateData=cloud
ResumeRate=0
SuspendRate=0
SchedulerParameters=nohold_on_prolog_fail
BatchStartTimeout=180
#
# TIMERS
SlurmctldTimeout=300
SlurmdTimeout=180
UnkillableStepTimeout=180
InactiveLimit=0
MinJobAge=300
KillWait=30
Waittime=0
MessageTimeout=60
AuthInfo=cred_expire=70
#
# SCHEDULING, JOB, AND NODE SETTINGS
EnforcePartLimits=ALL
SchedulerType=sched/backfill
ProctrackType=proctrack/linuxproc
MpiDefault=none
ReturnToService=1
TaskPlugin=task/none
#
# TRES AND GPU CONFIG OPTIONS
GresTypes=gpu
SelectType=select/cons_tres
#
# LOGGING
SlurmctldDebug=verbose
SlurmctldLogFile=/var/log/slurmctld.log
SlurmdDebug=info
SlurmdLogFile=/var/log/slurmd.log
DebugFlags=Power
JobCompType=jobcomp/none
#
# WARNING!!! The slurm_parallelcluster.conf file included below can be updated by the pcluster process.
# Please do not edit it.
include slurm_parallelcluster.conf

# WARNING!!! The custom_slurm_settings_include_file_slurm.conf file included below can be updated by the pcluster process.
# Please do not edit it.
include pcluster/custom_slurm_settings_include_file_slurm.conf
"""


def slurm_conf_files() -> dict[str, str]:
    """The head node's /opt/slurm/etc: slurm.conf and the files it includes (paths inside the node)."""
    partition_file = f"/opt/slurm/etc/pcluster/slurm_parallelcluster_{QUEUE}_partition.conf"
    return {
        "/opt/slurm/etc/slurm.conf": SLURM_CONF,
        "/opt/slurm/etc/slurm_parallelcluster.conf": (
            "# slurm_parallelcluster.conf is managed by the pcluster processes.\n"
            "# Do not modify.\n"
            "# Please use CustomSlurmSettings in the ParallelCluster configuration file to add user-specific"
            " slurm configuration\n# options\n\n"
            f"SlurmctldHost={node_name(HEAD_IP)}({HEAD_IP})\n"
            "SuspendTime=600\nResumeTimeout=1800\n"
            "SelectTypeParameters=CR_CPU\n\n"
            f"include {partition_file}\n\n"
            f"SuspendExcNodes={COMPUTE_NODE.rsplit('-', 1)[0]}-[1-1]\n"
        ),
        partition_file: (
            "# This file is automatically generated by pcluster\n\n"
            f"NodeName={COMPUTE_NODE} CPUs=1 State=CLOUD"
            f" Feature=static,{INSTANCE_TYPE},{_SPEC.queues[0].compute_resources[0].name} Weight=1\n\n"
            f"NodeSet={QUEUE}_nodes Nodes={COMPUTE_NODE}\n"
            f"PartitionName={QUEUE} Nodes={QUEUE}_nodes MaxTime=INFINITE State=UP Default=YES\n"
        ),
        "/opt/slurm/etc/pcluster/custom_slurm_settings_include_file_slurm.conf": (
            "# This file is automatically generated by pcluster\n\n"
        ),
    }


#: SuspendProgram and ResumeProgram: never run for a static node (SuspendExcNodes); if one is, it fails loudly.
POWER_SAVING_STAND_IN = """\
#!/bin/sh
echo "$0 $*: the bed has no EC2 to suspend or resume an instance with" >&2
exit 1
"""

#: A stand-in for pyxis's SPANK plugin: the three symbols Slurm's plugin loader checks (plugin_version must be
#: this Slurm's) and slurm_spank_init, which registers pyxis's --container-image option as pyxis does (in every
#: context, through libslurm's spank_option_register) and nothing else; the option does nothing. Without libc:
#: it runs inside the node's own Slurm (sbatch, srun, slurmd, slurmstepd), whatever the host's C library.
PYXIS_STAND_IN_C = """\
/* A stand-in for pyxis's spank_pyxis.so on the real-Slurm bed: loaded, it registers one option. */
struct spank_option {
    const char *name;
    const char *arginfo;
    const char *usage;
    int has_arg;
    int val;
    int (*cb)(int val, const char *optarg, int remote);
};
extern int spank_option_register(void *spank, struct spank_option *option);
const char plugin_name[] = "pyxis";
const char plugin_type[] = "spank";
const unsigned int plugin_version = PLUGIN_VERSION;
static struct spank_option container_image = {
    "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
    "[pyxis] the image to use for the container filesystem (bed stand-in: does nothing)", 1, 0, 0,
};
int slurm_spank_init(void *spank, int argc, char **argv)
{
    spank_option_register(spank, &container_image);
    return 0;
}
"""


def parallelcluster_prerequisites() -> str | None:
    """Why the ParallelCluster bed cannot run here, or None."""
    missing = missing_prerequisites()
    if missing:
        return missing
    if shutil.which("gcc") is None:
        return "the ParallelCluster bed needs gcc (it builds a stand-in for pyxis's SPANK plugin)"
    return None


def build_pyxis_stand_in(work: Path, root: Path) -> Path:
    source = work / "spank_pyxis.c"
    source.write_text(PYXIS_STAND_IN_C)
    built = work / "spank_pyxis.so"
    run(["gcc", "-shared", "-fPIC", "-nostdlib", "-O2", f"-DPLUGIN_VERSION={slurm_version_number(root)}",
         "-o", str(built), str(source)])  # fmt: skip
    return built


@dataclass
class Action:
    """One custom action's run: what the executor sees of it."""

    node: str
    script: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def __str__(self) -> str:
        return f"{self.script} on {self.node} exited {self.returncode}:\n{self.stdout}{self.stderr}"


def run_custom_action(
    node: Node, script_text: str, args: Sequence[str], *, url: str, event: str = "postinstall"
) -> Action:
    """Runs a script as ParallelCluster's custom_action_executor.py runs an OnNodeConfigured action (EVENT
    ``postinstall``) or an OnNodeStart one (``preinstall``)."""
    staged = f"/tmp/tmp{secrets.token_hex(4)}"  # on the node's /tmp, a tmpfs the host does not see
    quoted_args = "(" + " ".join(f'"{arg}"' for arg in args) + ")"
    environment = {
        "PATH": PARALLELCLUSTER_PATH,
        # CfnConfigEnvEnricher: the first script and args of each event, the running one's for its own event
        "cfn_preinstall": f'"{url}"' if event == "preinstall" else '""',
        "cfn_preinstall_args": quoted_args if event == "preinstall" else "()",
        "cfn_postinstall": f'"{url}"' if event == "postinstall" else '""',
        "cfn_postinstall_args": quoted_args if event == "postinstall" else "()",
        "cfn_postupdate": '""',
        "cfn_postupdate_args": "()",
    }
    enter = ["nsenter", "-t", str(node.leader), "-a", "--", "env", "-i",
             *(f"{key}={value}" for key, value in environment.items())]  # fmt: skip
    run([*enter, "sh", "-c", 'umask 077 && cat >"$1"', "sh", staged], input=script_text)
    run([*enter, "chmod", "+x", staged])
    started = time.monotonic()
    result = subprocess.run([*enter, staged, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=120, check=False)  # fmt: skip
    seconds = time.monotonic() - started
    run([*enter, "rm", staged])
    return Action(node.name, url.rsplit("/", 1)[-1], result.returncode, result.stdout, result.stderr, seconds)


def action_url(script: str) -> str:
    return f"s3://{ACTIONS_BUCKET}/{ACTIONS_PREFIX}/{script}"


#: The stack's OnNodeConfigured actions for parallelcluster-team, in its order: users.sh (with the args it
#: gives: the head node for administrators, as the file has login nodes), pyxis.sh (none) and enroot's folders...
ON_NODE_CONFIGURED = (
    (
        USERS_SCRIPT,
        tuple(users_args(ENVIRONMENT.users, HOME_ROOT, admins_only_on_head_node=head_node_for_admins(_SPEC))),
    ),
    (PYXIS_SCRIPT, ()),
    (
        ENROOT_SCRIPT,
        tuple(enroot_args([DEFAULT_USERS[_SPEC.os], *(user.name for user in ENVIRONMENT.users)])),
    ),
)
#: The queue's OnNodeStart actions: on compute nodes, the instance metadata guard, which runs before the
#: config recipe and every OnNodeConfigured action (compute_node/user_data.sh: init, -preinstall, config,
#: -postinstall, finalize).
QUEUE_ON_NODE_START = ((IMDS_SCRIPT, IMDS_GUARD_ARGS),)
#: Where each action's text comes from.
SCRIPT_FILES = {
    USERS_SCRIPT: USERS,
    PYXIS_SCRIPT: ACTIONS_DIR / PYXIS_SCRIPT,
    IMDS_SCRIPT: IMDS_GUARD,
    ENROOT_SCRIPT: ENROOT_FOLDERS,
}
#: The users ParallelCluster's AMI has: its admin user (the cookbook's cluster_admin_user, a system user its
#: daemons run as) and the OS's default user (cfn_cluster_user), here alinux2023's.
AMI_USERS = (f"useradd --system --no-create-home {PCLUSTER_ADMIN_USER}", "useradd --create-home ec2-user")


@dataclass
class Cluster:
    """The bed's ParallelCluster: ``head`` and ``compute`` once :func:`boot_head` / :meth:`add_compute` ran."""

    bed: Bed
    pyxis_stand_in: Path | None
    actions: list[Action] = field(default_factory=list)

    @property
    def head(self) -> Node:
        return self.bed.nodes[HEAD_IP]

    @property
    def compute(self) -> Node:
        return self.bed.nodes[COMPUTE_IP]

    @property
    def shared(self) -> Path:
        return self.bed.work / "fsx"

    def prepare(self, ip: str, node_type: str) -> Node:
        node = self.bed.prepare(ip)
        # the bed's node names are EC2's private host names, which ParallelCluster's nodes keep
        hosts = [
            "127.0.0.1 localhost",
            f"{HEAD_IP} {node_name(HEAD_IP)}",
            f"{COMPUTE_IP} {node_name(COMPUTE_IP)}",
        ]
        node.write("/etc/hosts", "\n".join(hosts) + "\n")
        node.lay_out_parallelcluster_ami(head_node=None if node_type == "HeadNode" else self.head)
        node.write("/etc/parallelcluster/cfnconfig", cfnconfig(node_type))
        for relative, text in EXAMPLES.items():
            node.write(f"/opt/parallelcluster/examples/{relative}", text)
        for program in ("slurm_suspend", "slurm_resume"):
            node.write(f"/opt/parallelcluster/scripts/slurm/{program}", POWER_SAVING_STAND_IN, 0o755)
        if self.pyxis_stand_in is not None:
            node.path(PYXIS_PLUGIN).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.pyxis_stand_in, node.path(PYXIS_PLUGIN))
        self.shared.mkdir(exist_ok=True)
        node.binds[SHARED] = self.shared
        return node

    def on_node_start(self, node: Node) -> list[Action]:
        """The stack's OnNodeStart actions of NODE (the queue's, on the compute node; none on the head node)."""
        actions = QUEUE_ON_NODE_START if node.ip == COMPUTE_IP else ()
        return self._run(node, actions, None, event="preinstall")

    def on_node_configured(self, node: Node, scripts: dict[str, str] | None = None) -> list[Action]:
        """The stack's OnNodeConfigured actions, in order, stopping at the first that fails (as the executor
        does); SCRIPTS replaces a script's text by name."""
        return self._run(node, ON_NODE_CONFIGURED, scripts, event="postinstall")

    def _run(
        self,
        node: Node,
        actions: Sequence[tuple[str, Sequence[str]]],
        scripts: dict[str, str] | None,
        *,
        event: str,
    ) -> list[Action]:
        done = []
        for script, args in actions:
            text = (scripts or {}).get(script) or SCRIPT_FILES[script].read_text()
            action = run_custom_action(node, text, args, url=action_url(script), event=event)
            done.append(action)
            if action.returncode != 0:
                break
        self.actions += done
        return done

    def start_slurmctld(self) -> None:
        """config_head_node.rb: enable and start slurmctld, sleep 3 s, check it is active."""
        self.head.sh("systemctl enable --now slurmctld")
        time.sleep(3)
        self.head.sh("systemctl is-active --quiet slurmctld.service")

    def clustermgtd_gives_the_node_its_address(self) -> None:
        self.head.sh(
            f"/opt/slurm/bin/scontrol update nodename={COMPUTE_NODE} nodeaddr={COMPUTE_IP}"
            f" nodehostname={node_name(COMPUTE_IP)}"
        )

    def finalize_compute(self) -> None:
        """finalize_compute.rb: SLURMD_OPTIONS with the node's name, slurmd enabled and started and checked
        active, the static node resumed (failing when it is idle already, which the cookbook ignores)."""
        self.compute.write("/etc/sysconfig/slurmd", f"SLURMD_OPTIONS='-N {COMPUTE_NODE}'\n")
        self.compute.sh("systemctl enable --now slurmd")
        wait_until("slurmd active", lambda: self.compute.sh("systemctl is-active --quiet slurmd.service",
                                                            check=False).returncode == 0, timeout=20)  # fmt: skip
        self.compute.sh(
            f"/opt/slurm/bin/scontrol update nodename={COMPUTE_NODE} state=resume reason='Node start up'",
            check=False,
        )

    def node_state(self) -> str:
        return self.head.sh(f"/opt/slurm/bin/sinfo -h -n {COMPUTE_NODE} -o %t", check=False).stdout.strip()

    def wait_idle(self, timeout: float = 60) -> None:
        wait_until(f"{COMPUTE_NODE} idle", lambda: self.node_state() == "idle", seen=self.node_state,
                   timeout=timeout)  # fmt: skip

    def ctld_log(self) -> str:
        return self.head.read("/var/log/slurmctld.log")


def reconfigure_requests(log: str) -> int:
    """How many `scontrol reconfigure` requests slurmctld's log shows (SlurmctldDebug=verbose). The log is the
    evidence: `scontrol show config` says PlugStackConfig = (null) whether or not plugstack.conf exists."""
    return log.count("Processing Reconfiguration Request")


def boot_head(work: Path, *, pyxis_stand_in: Path | None) -> Cluster:
    """A bed with the head node booted and slurmctld started, as when OnNodeConfigured starts there."""
    bed = Bed(work)
    bed.__enter__()
    cluster = Cluster(bed, pyxis_stand_in)
    try:
        cluster.prepare(HEAD_IP, "HeadNode")
        for path, text in slurm_conf_files().items():
            cluster.head.write(path, text)
        cluster.head.boot()
        for command in AMI_USERS:
            cluster.head.sh(command)
        cluster.start_slurmctld()
    except BaseException:
        bed.__exit__(None, None, None)
        raise
    return cluster


def add_compute(cluster: Cluster) -> Node:
    """The compute node booted (its /opt/slurm the head node's), slurmd not started yet."""
    cluster.clustermgtd_gives_the_node_its_address()
    node = cluster.prepare(COMPUTE_IP, "ComputeFleet")
    node.boot()
    for command in AMI_USERS:
        node.sh(command)
    return node


def tree_state(root: Path) -> dict[str, tuple[int, int, int, int, bytes]]:
    """Every path under ROOT (on the host) with its mode, owner, group, mtime and content (or link target)."""
    state = {}
    for path in sorted([root, *root.rglob("*")]):
        info = path.lstat()
        if path.is_symlink():
            body = os.readlink(path).encode()
        elif path.is_file():
            body = path.read_bytes()
        else:
            body = b""
        state[str(path.relative_to(root))] = (info.st_mode, info.st_uid, info.st_gid, info.st_mtime_ns, body)
    return state


def show_job(node: Node, job: str) -> dict[str, str]:
    shown = node.sh(f"/opt/slurm/bin/scontrol show job -o {shlex.quote(job)}").stdout
    return dict(word.split("=", 1) for word in shown.split() if "=" in word)
