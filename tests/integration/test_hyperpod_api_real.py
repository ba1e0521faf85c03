"""HyperPod's API-driven Slurm mode on real Slurm 24.11 under real systemd (``make integration``).

What is emulated, and from which AWS page (details in hyperpod_api_bed.py; the bed in slurm_bed.py):

- the cluster request's per-group ``SlurmConfig`` (one Controller group, one Login group, two Compute groups
  with one partition each: ``API_ClusterSlurmConfig``, ``sagemaker-hyperpod-ref`` "SageMaker HyperPod Slurm
  configuration"), which the agent turns into the node and partition sections of the controller's
  ``slurm.conf``, every compute node also in ``dev``;
- FSx for Lustre already mounted at ``/fsx`` by HyperPod and no ``provisioning_parameters.json``
  (``sagemaker-hyperpod-slurm-api-config-migration``): here a host folder bound into every node;
- Slurm running before the lifecycle script (``OnInitComplete`` runs "after the AMI-based initialization is
  complete", ``API_ClusterLifeCycleConfig``): slurmctld on the controller, configless slurmd on the compute
  nodes, sackd on the login node; and HyperPod's default accounting, MariaDB and slurmdbd on the controller
  (``sagemaker-hyperpod-external-accounting-db-slurm``);
- the agent's ``TopologyPlugin=topology/tree`` and ``topology.conf`` for ml.p5 compute groups, recomputed
  when a node is replaced (``sagemaker-hyperpod-topology``), written with
  ``training_clusters.node_scripts.parallelcluster.topology.topology_conf`` from ``DescribeInstanceTopology``-shaped
  entries: four compute nodes under two leaf switches.

Then our lifecycle of that mode (``on_init_complete.sh``, with the ``training_clusters.json`` the real
construct writes for these groups) runs on every node at once, and real Slurm answers: no daemon of the
agent's restarted by it; the controller up with the agent's topology loaded and left alone by our steps, by
our keys' re-application and by ``scontrol reconfigure``; ``sbatch -N2 --switches=1`` on two nodes of one
leaf (and waiting rather than spreading over two); instances under two spines still one fabric; a group of
a type HyperPod does not place turning the cluster to ``topology/flat``; workers idle in their partitions; the
login node serving ``srun``; the team user with the same ids on every node and their jobs in the agent's
accounting; a second run changing nothing; a node replaced under another leaf.
The timings are printed at the end of the run.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest import TIMINGS
from tests.integration.hyperpod_api_bed import (
    COMPUTE_IPS,
    DEV_PARTITION,
    FSX_MOUNT_PATH,
    GROUPS,
    LEAF_A,
    LEAF_B,
    ApiCluster,
    InstanceGroup,
    boot_api_cluster,
)
from tests.integration.hyperpod_bed import CONTROLLER_IP, LOGIN_IP, job_field, sbatch
from tests.integration.slurm_bed import LIFECYCLE_ON_NODE, Node, missing_prerequisites, node_name, wait_until

from .agent_topology import ROOT_SWITCH

pytestmark = pytest.mark.integration

NAMES = [node_name(ip) for ip in COMPUTE_IPS]
#: The compute nodes under each leaf switch (hyperpod_api_bed.NETWORK_NODES).
UNDER_A = {NAMES[0], NAMES[2]}
UNDER_B = {NAMES[1], NAMES[3]}
SCONTROL = "/opt/slurm/bin/scontrol"
#: Where the lifecycle script writes (besides its log): system and Slurm configuration, its state, the homes
#: (the team's on FSx).
WRITTEN_BY_US = ("/etc", "/opt/slurm/etc", "/var/lib/training-clusters", "/home", "/usr/local", "/fsx")


def file_digests(node: Node) -> dict[str, str]:
    """Every file of WRITTEN_BY_US on NODE (symbolic links as their target) by path, with its SHA-256, mode and
    owner; the output of the last `apt-get update` left out (a record, not configuration)."""
    listed = node.sh(
        f"find {' '.join(WRITTEN_BY_US)} -xdev \\( -type f -o -type l \\) "
        "-not -path /var/lib/training-clusters/apt-get.last.out -printf '%p %m %u:%g %l\\n' | sort"
    ).stdout.splitlines()
    digests = node.sh(
        f"find {' '.join(WRITTEN_BY_US)} -xdev -type f -not -path /var/lib/training-clusters/apt-get.last.out "
        "-exec sha256sum {} + | sort -k2"
    ).stdout.splitlines()
    found = {line.split(" ", 1)[0]: line for line in listed}
    for line in digests:
        digest, path = line.split(maxsplit=1)
        found[path] += f" {digest}"
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiCluster]:
    reason = missing_prerequisites()
    if reason:
        pytest.fail(reason)
    started = time.monotonic()
    made = boot_api_cluster(tmp_path_factory.mktemp("hyperpod-api"))
    TIMINGS.append(
        ("api", "API-driven HyperPod, 6 nodes: boot + agent + lifecycle", time.monotonic() - started)
    )
    TIMINGS.append(
        ("api", "API-driven HyperPod: agent (accounting, slurmctld, slurmd, sackd)", made.agent_seconds)
    )
    for ip, run in made.runs.items():
        TIMINGS.append(("api", f"API-driven HyperPod: lifecycle on {node_name(ip)}", run.seconds))
    try:
        yield made
    finally:
        made.bed.__exit__(None, None, None)
        TIMINGS.append(("api", "API-driven HyperPod: whole scenario", time.monotonic() - started))


def scontrol(cluster: ApiCluster, command: str) -> str:
    return cluster.controller.sh(f"{SCONTROL} {command}").stdout


def hostnames(cluster: ApiCluster, nodelist: str) -> set[str]:
    return set(scontrol(cluster, f"show hostnames {nodelist}").split())


def topology_lines(cluster: ApiCluster) -> list[str]:
    """`scontrol show topology`, one switch a line, without the variable spacing."""
    return [
        " ".join(line.split()) for line in scontrol(cluster, "show topology").splitlines() if line.strip()
    ]


def topology_config(cluster: ApiCluster) -> list[str]:
    """The Topology lines of `scontrol show config`, as `scontrol show config | grep Topology` shows them."""
    shown = scontrol(cluster, "show config").splitlines()
    return [" ".join(line.split()) for line in shown if "Topology" in line]


#: `scontrol show topology` for the agent's file: the upper switches with their nodes as a hostlist, the leaves
#: with them as the file lists them.
EXPECTED_TOPOLOGY = [
    "SwitchName=nn-spine-0123456789 Level=2 LinkSpeed=1 Nodes=ip-10-1-1-[11-14] Switches=nn-agg-0123456789",
    f"SwitchName=nn-agg-0123456789 Level=1 LinkSpeed=1 Nodes=ip-10-1-1-[11-14] Switches={LEAF_A},{LEAF_B}",
    f"SwitchName={LEAF_A} Level=0 LinkSpeed=1 Nodes=ip-10-1-1-11,ip-10-1-1-13",
    f"SwitchName={LEAF_B} Level=0 LinkSpeed=1 Nodes=ip-10-1-1-12,ip-10-1-1-14",
]


def run_until_running(cluster: ApiCluster, options: str) -> tuple[str, set[str]]:
    """Submits a job that sleeps from the login node; returns it and its nodes once it runs."""
    job = sbatch(cluster, f"{options} -o /dev/null --wrap 'sleep 300'")
    wait_until(
        f"job {job} running",
        lambda: job_field(cluster, job, "JobState") == "RUNNING",
        seen=lambda: (job_field(cluster, job, "JobState"), job_field(cluster, job, "Reason")),
        timeout=60,
    )
    return job, hostnames(cluster, job_field(cluster, job, "NodeList"))


def cancel_all(cluster: ApiCluster) -> None:
    cluster.controller.sh("/opt/slurm/bin/scancel -u alice")
    wait_until(
        "no job of alice left",
        lambda: not cluster.controller.sh("/opt/slurm/bin/squeue -h -u alice").stdout.strip(),
        timeout=60,
    )
    cluster.wait_idle()


def test_every_node_is_provisioned_in_its_role(cluster: ApiCluster) -> None:
    for ip, run in cluster.runs.items():
        assert run.returncode == 0, f"{ip}:\n{run.output}"
        assert "FAILED step" not in run.output
    roles = {
        ip: re.search(r"SUCCESS: node configured as (\w+)", run.output) for ip, run in cluster.runs.items()
    }
    assert {ip: found.group(1) for ip, found in roles.items() if found} == {
        CONTROLLER_IP: "controller",
        LOGIN_IP: "login",
        **{ip: "worker" for ip in COMPUTE_IPS},
    }
    for run in cluster.runs.values():  # the construct's settings, read by the API-driven preflight
        assert (
            "settings: slurm_config=api controller_group=controller-machine login_group=login-group"
            in run.output
        )


def test_the_lifecycle_is_the_api_entry_point_with_the_constructs_settings(cluster: ApiCluster) -> None:
    """on_init_complete.sh, beside training_clusters.json as the construct writes it in API-driven mode and
    no provisioning_parameters.json."""
    assert cluster.script == "on_init_complete.sh"
    for node in (cluster.controller, cluster.login, *cluster.workers):
        assert not node.path(f"{LIFECYCLE_ON_NODE}/provisioning_parameters.json").exists(), node.name
        assert json.loads(node.read(f"{LIFECYCLE_ON_NODE}/training_clusters.json")) == {
            "slurm_config": "api",
            "controller_group": "controller-machine",
            "login_group": "login-group",
            "worker_groups": [
                {"instance_group_name": "gpu-a", "partition_name": "train"},
                {"instance_group_name": "gpu-b", "partition_name": "batch"},
            ],
            "enable_enroot_pyxis": False,
            "enable_observability": False,
            "fsx_mount_dir": "/fsx",
            "users": [{"name": "alice", "uid": 2001, "gid": 2001, "groups": [], "ssh_public_keys": []}],
        }, node.name


def test_our_script_leaves_the_agents_daemons_running(cluster: ApiCluster) -> None:
    """HyperPod started every daemon before OnInitComplete; our run started and restarted none (each unit has
    the invocation the agent started; Slurm's own in-place re-exec on `scontrol reconfigure` keeps it)."""
    before = cluster.invocations_before_lifecycle
    assert len(before) == 8 and all(before.values()), before
    assert cluster.daemon_units("InvocationID") == before
    assert cluster.daemon_units("NRestarts") == dict.fromkeys(before, "0")
    for run in cluster.runs.values():
        assert "systemctl restart" not in run.output and "(re)start" not in run.output


def test_fsx_is_hyperpods_mount_and_our_steps_leave_it_alone(cluster: ApiCluster) -> None:
    """FSx is mounted before the script (FsxLustreConfig): our steps neither mount it nor touch fstab."""
    (cluster.fsx / "from-the-agent").write_text("shared\n")
    for node in (cluster.controller, cluster.login, *cluster.workers):
        assert node.sh(f"cat {FSX_MOUNT_PATH}/from-the-agent").stdout == "shared\n", node.name
        assert FSX_MOUNT_PATH not in node.read("/etc/fstab"), node.name
    for run in cluster.runs.values():
        assert "step 'fsx-mounted' done" in run.output and "mount-fsx" not in run.output, run.output


def test_the_agents_topology_is_loaded_and_left_alone(cluster: ApiCluster) -> None:
    """Issue 42: slurmctld runs the agent's topology/tree; our keys are in slurm.conf beside it."""
    controller = cluster.controller
    assert controller.read("/opt/slurm/etc/topology.conf") == cluster.topology()
    lines = controller.read("/opt/slurm/etc/slurm.conf").splitlines()
    assert [line for line in lines if line.lower().startswith("topology")] == ["TopologyPlugin=topology/tree"]
    assert "JobRequeue=1" in lines  # our keys went in (and the agent's line stayed)
    assert topology_config(cluster) == ["TopologyParam = (null)", "TopologyPlugin = topology/tree"]
    assert topology_lines(cluster) == EXPECTED_TOPOLOGY
    log = cluster.runs[CONTROLLER_IP].output
    assert "slurm.conf uses TopologyPlugin=topology/tree with HyperPod's topology file (left as it is)" in log


def test_the_topology_survives_a_rewrite_and_scontrol_reconfigure(cluster: ApiCluster) -> None:
    """The agent rewrites slurm.conf (our path unit re-applies our keys), then Slurm is reconfigured."""
    controller = cluster.controller
    topology = controller.path("/opt/slurm/etc/topology.conf")
    stamp = topology.stat().st_mtime_ns
    controller.write("/opt/slurm/etc/slurm.conf", cluster.slurm_conf() + "# rewritten by the agent\n")
    wait_until(
        "our keys back in slurm.conf",
        lambda: "JobRequeue=1" in controller.read("/opt/slurm/etc/slurm.conf").splitlines(),
        timeout=30,
    )
    controller.sh(f"{SCONTROL} reconfigure")
    wait_until("slurmctld answering", lambda: controller.sh(f"{SCONTROL} ping", check=False).returncode == 0)
    assert topology.read_text() == cluster.topology() and topology.stat().st_mtime_ns == stamp
    assert "TopologyPlugin=topology/tree" in controller.read("/opt/slurm/etc/slurm.conf").splitlines()
    assert topology_config(cluster) == ["TopologyParam = (null)", "TopologyPlugin = topology/tree"]
    assert topology_lines(cluster) == EXPECTED_TOPOLOGY
    cluster.wait_idle()


def test_workers_are_idle_in_their_partitions(cluster: ApiCluster) -> None:
    cluster.wait_idle()
    out = cluster.login.sh("/opt/slurm/bin/sinfo -h -N -o '%N %t %P'").stdout.splitlines()
    expected = [f"{name} idle {DEV_PARTITION}*" for name in NAMES]
    for group in GROUPS[2:]:
        expected += [f"{node_name(ip)} idle {group.partition}" for ip in group.ips]
    assert sorted(out) == sorted(expected)


def test_team_user_has_the_same_ids_on_every_node(cluster: ApiCluster) -> None:
    for node in (cluster.controller, cluster.login, *cluster.workers):
        assert node.sh("id -u alice; id -g alice").stdout.split() == ["2001", "2001"], node.name


def test_login_node_serves_srun_in_every_partition(cluster: ApiCluster) -> None:
    cluster.wait_idle()
    every = cluster.login.sh(f"/opt/slurm/bin/srun -p {DEV_PARTITION} -N4 hostname", user="alice", timeout=90)
    assert sorted(every.stdout.split()) == NAMES
    for group in GROUPS[2:]:
        out = cluster.login.sh(f"/opt/slurm/bin/srun -p {group.partition} -N2 hostname", user="alice")
        assert sorted(out.stdout.split()) == sorted(node_name(ip) for ip in group.ips)


def test_team_job_is_accounted(cluster: ApiCluster) -> None:
    cluster.wait_idle()
    job = sbatch(cluster, f"-p {DEV_PARTITION} -N2 --switches=1 --wait -o /dev/null --wrap 'id -un'")
    sacct = cluster.login.sh(
        f"/opt/slurm/bin/sacct -n -P -X -j {job} -o JobID,User,State,ExitCode,NNodes", user="alice"
    )
    assert sacct.stdout.split() == [f"{job}|alice|COMPLETED|0:0|2"]


def test_switches_1_lands_on_the_two_nodes_of_one_leaf(cluster: ApiCluster) -> None:
    """Issue 42: `sbatch -N2 --switches=1` gets both nodes under one leaf switch."""
    cluster.wait_idle()
    try:
        _, first = run_until_running(cluster, "-N2 --switches=1")
        assert first in (UNDER_A, UNDER_B)
        _, second = run_until_running(cluster, "-N2 --switches=1")
        assert {frozenset(first), frozenset(second)} == {frozenset(UNDER_A), frozenset(UNDER_B)}
    finally:
        cancel_all(cluster)
    try:  # one node of leaf A busy: the job goes to leaf B whole, not to the first free nodes
        run_until_running(cluster, f"-N1 -w {NAMES[0]}")
        assert run_until_running(cluster, "-N2 --switches=1")[1] == UNDER_B
    finally:
        cancel_all(cluster)


def test_switches_1_waits_rather_than_spread_over_two_leaves(cluster: ApiCluster) -> None:
    """One free node under each leaf: `--switches=1` waits; the same job without it runs at once on them."""
    cluster.wait_idle()
    try:
        run_until_running(cluster, f"-N1 -w {NAMES[0]}")  # leaf A: 13 stays free
        run_until_running(cluster, f"-N1 -w {NAMES[3]}")  # leaf B: 12 stays free
        waiting = sbatch(cluster, "-N2 --switches=1@5:00 -o /dev/null --wrap 'sleep 300'")
        time.sleep(5)
        # evaluated by the scheduler and held for want of one switch with two free nodes
        assert [job_field(cluster, waiting, key) for key in ("JobState", "Reason", "Switches")] == [
            "PENDING",
            "Resources",
            "1@00:05:00",
        ]
        assert cluster.sinfo_states()[NAMES[1]] == cluster.sinfo_states()[NAMES[2]] == "idle"
        cluster.controller.sh(f"/opt/slurm/bin/scancel {waiting}")
        assert run_until_running(cluster, "-N2")[1] == {NAMES[1], NAMES[2]}
    finally:
        cancel_all(cluster)


def test_second_run_changes_nothing(cluster: ApiCluster) -> None:
    cluster.wait_idle()
    before = cluster.daemon_pids()
    assert all(pid not in ("", "0") for pid in before.values()), before
    topology = cluster.controller.path("/opt/slurm/etc/topology.conf")
    stamp = topology.stat().st_mtime_ns
    conf = cluster.controller.path("/opt/slurm/etc/slurm.conf")
    conf_stamp = conf.stat().st_mtime_ns
    nodes = [cluster.controller, cluster.login, *cluster.workers]
    files_before = {node.name: file_digests(node) for node in nodes}
    mine = files_before[cluster.controller.name]
    assert {"/opt/slurm/etc/slurm.conf", "/fsx/alice/.ssh/authorized_keys", "/etc/passwd"} <= set(mine)
    started = time.monotonic()
    runs = cluster.provision([cluster.controller, cluster.login, *cluster.workers], agent_writes=False)
    TIMINGS.append(("api", "API-driven HyperPod: second run on 6 nodes", time.monotonic() - started))
    for ip, run in runs.items():
        assert run.returncode == 0, f"{ip}:\n{run.output}"
    assert cluster.daemon_pids() == before
    assert "settings already in place" in runs[CONTROLLER_IP].output
    assert "scontrol reconfigure done" not in runs[CONTROLLER_IP].output
    assert conf.stat().st_mtime_ns == conf_stamp
    assert {node.name: file_digests(node) for node in nodes} == files_before
    assert topology.stat().st_mtime_ns == stamp
    assert topology_lines(cluster) == EXPECTED_TOPOLOGY


def test_replaced_node_joins_under_its_new_leaf(cluster: ApiCluster) -> None:
    """Node replacement: the instance goes, the agent marks it down, its replacement lands under the other
    leaf, the agent recomputes topology.conf, the lifecycle runs on the new node; jobs follow the new tree."""
    cluster.wait_idle()
    old = cluster.bed.nodes[COMPUTE_IPS[1]]  # leaf B
    started = time.monotonic()
    old.power_off()
    cluster.controller.sh(f"{SCONTROL} update nodename={old.name} state=down reason=hyperpod-replacing")
    fresh = cluster.prepare(old.ip, generation=1)
    fresh.boot()
    cluster.agent_starts_slurm(fresh)
    cluster.agent_places(old.ip, [*cluster.network_nodes[old.ip][:-1], LEAF_A])
    run = cluster.provision([fresh], agent_writes=False)[fresh.ip]
    assert run.returncode == 0, run.output
    cluster.wait_idle()
    TIMINGS.append(("api", "API-driven HyperPod: node replaced, idle again", time.monotonic() - started))
    assert topology_lines(cluster)[2:] == [
        f"SwitchName={LEAF_A} Level=0 LinkSpeed=1 Nodes=ip-10-1-1-11,ip-10-1-1-12,ip-10-1-1-13",
        f"SwitchName={LEAF_B} Level=0 LinkSpeed=1 Nodes=ip-10-1-1-14",
    ]
    try:
        assert run_until_running(cluster, "-N3 --switches=1")[1] == {NAMES[0], NAMES[1], NAMES[2]}
    finally:
        cancel_all(cluster)


def test_instances_under_two_spines_share_one_fabric(cluster: ApiCluster) -> None:
    """An instance under another spine: topology_conf joins the spines under ROOT_SWITCH, without which
    Slurm refuses any job spanning both (shown first with the same file minus that line)."""
    cluster.wait_idle()
    other = cluster.bed.nodes[COMPUTE_IPS[3]]
    cluster.network_nodes[other.ip] = ["nn-spine-2", "nn-agg-2", "nn-leaf-c"]
    joined = cluster.topology()
    assert f"SwitchName={ROOT_SWITCH} Switches=nn-spine-0123456789,nn-spine-2" in joined.splitlines()
    apart = "".join(line for line in joined.splitlines(keepends=True) if ROOT_SWITCH not in line)
    cluster.controller.write("/opt/slurm/etc/topology.conf", apart)
    scontrol(cluster, "reconfigure")
    refused = cluster.login.sh(
        "/opt/slurm/bin/sbatch -N4 -o /dev/null --wrap true", user="alice", check=False
    )
    assert (refused.returncode, refused.stderr.strip()) == (
        1,
        "sbatch: error: Batch job submission failed: Requested topology configuration is not available",
    )
    cluster.agent_places(other.ip, cluster.network_nodes[other.ip])
    assert topology_lines(cluster)[0] == (
        f"SwitchName={ROOT_SWITCH} Level=3 LinkSpeed=1 Nodes=ip-10-1-1-[11-14] "
        "Switches=nn-spine-0123456789,nn-spine-2"
    )
    try:
        assert run_until_running(cluster, "-N4")[1] == set(NAMES)
    finally:
        cancel_all(cluster)


def test_a_group_hyperpod_cannot_place_turns_the_topology_flat(cluster: ApiCluster) -> None:
    """Scale-up with an ml.g5 group: the agent writes slurm.conf without TopologyPlugin (topology/flat, as
    sagemaker-hyperpod-topology says); our keys come back beside it and do not bring topology/tree back."""
    cluster.wait_idle()
    small = InstanceGroup("g5", "Compute", ("10.1.1.21",), partition="small", instance_type="ml.g5.48xlarge")
    started = time.monotonic()
    (node,) = cluster.agent_scales_up(small)
    controller = cluster.controller
    assert "TopologyPlugin" not in cluster.slurm_conf()
    run = cluster.provision([node], agent_writes=False)[node.ip]
    assert run.returncode == 0, run.output
    # no TopologyPlugin line: Slurm's flat topology, which Slurm 24.11 reports as topology/default
    wait_until(
        "slurmctld on the flat topology",
        lambda: topology_config(cluster) == ["TopologyParam = (null)", "TopologyPlugin = topology/default"],
        seen=lambda: topology_config(cluster),
        timeout=60,
    )
    cluster.wait_idle()
    TIMINGS.append(("api", "API-driven HyperPod: a g5 group added, idle", time.monotonic() - started))
    lines = controller.read("/opt/slurm/etc/slurm.conf").splitlines()
    assert "JobRequeue=1" in lines
    assert not [line for line in lines if line.lower().startswith("topologyplugin")]
    out = cluster.login.sh("/opt/slurm/bin/srun -p small -N1 hostname", user="alice")
    assert out.stdout.split() == [node.name]
