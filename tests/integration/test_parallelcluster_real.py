"""The ParallelCluster custom actions on real Slurm 24.11 under real systemd (``make integration``).

A head node and a static compute node (nspawn-booted Debian machines laid out as ParallelCluster's AMI and
cookbook lay out a node: see parallelcluster_bed.py for what is emulated, from which of ParallelCluster's
files) run our custom actions (the compute node's OnNodeStart guard, then every node's OnNodeConfigured
users.sh, pyxis.sh and enroot's folders) with the arguments the stack gives them, as
ParallelCluster's custom action executor runs them: as root, with exactly the PATH of its user data
(:data:`PARALLELCLUSTER_PATH`, no /opt/slurm/bin on it). On the head node slurmctld runs by then; on the compute
node slurmd starts after them (the cookbook's finalize step), and the second run happens with it up. Then real
Slurm answers: slurmctld took the reconfigure, the SPANK stack pyxis.sh enabled is the one sbatch and srun load,
the compute node left the shared configuration alone, a second run changes nothing, the team's users have the
same ids on both nodes and a job submitted from the head node runs on the compute node as its user. The
commit before abd9a13 shows the defect that fix addressed: a bare ``scontrol`` on that PATH exits 127.

What these tests cannot show: containers (enroot is not on the bed, and pyxis is a stand-in that only
registers its option), EFA, FSx for Lustre itself (a folder shared by bind mounts), ParallelCluster's daemons
(clustermgtd, computemgtd) and its scaling.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.integration import slurm_bed
from tests.integration.conftest import TIMINGS
from tests.integration.parallelcluster_bed import (
    COMPUTE_IP,
    COMPUTE_NODE,
    ENVIRONMENT,
    EXAMPLES,
    HEAD_IP,
    HOME_ROOT,
    PYXIS_PLUGIN,
    QUEUE,
    Action,
    Cluster,
    action_url,
    add_compute,
    boot_head,
    build_pyxis_stand_in,
    parallelcluster_prerequisites,
    reconfigure_requests,
    run_custom_action,
    show_job,
    tree_state,
)
from tests.integration.slurm_bed import REPO, Node, node_name, slurm_root, wait_until
from tests.parallelcluster_actions.test_actions import PARALLELCLUSTER_PATH
from training_clusters.acceptance.plan import acceptance_plan
from training_clusters.node_scripts.parallelcluster import (
    ENROOT_SCRIPT,
    IMDS_SCRIPT,
    PYXIS_SCRIPT,
    USERS_SCRIPT,
)
from training_clusters.stacks.parallelcluster import PCLUSTER_ADMIN_USER

pytestmark = pytest.mark.integration

#: The commit that called scontrol by its full path (issue #27 item 1); its parent called it by name.
FIX_COMMIT = "abd9a13"
SLURM_CLIENTS_CHECKED = ("scontrol", "sbatch", "srun", "sinfo", "squeue")
PENDING_MARKER = "/var/lib/training-clusters/pyxis-reconfigure.pending"


@dataclass
class Scenario:
    """The cluster after both nodes ran OnNodeConfigured, and what was seen on the way."""

    cluster: Cluster
    head_runs: dict[str, Action]
    compute_runs: dict[str, Action]
    #: slurmctld's log written while each node ran its actions
    head_ctld_log: str
    compute_ctld_log: str
    #: the shared /opt/slurm/etc before and after the compute node's actions
    shared_etc_before: dict[str, tuple[int, int, int, int, bytes]]
    shared_etc_after: dict[str, tuple[int, int, int, int, bytes]]
    #: `sbatch --container-image=...` on the head node before pyxis.sh
    container_option_before: subprocess.CompletedProcess[str]
    #: the compute node's OnNodeStart actions (the guard), run before its OnNodeConfigured ones
    compute_start_runs: dict[str, Action]
    #: what guarded the compute node the first moment the team's first account existed there (WATCH)
    when_the_account_appeared: list[str]

    @property
    def head(self) -> Node:
        return self.cluster.head

    @property
    def compute(self) -> Node:
        return self.cluster.compute


def by_script(actions: list[Action]) -> dict[str, Action]:
    return {action.script: action for action in actions}


#: The image of parallelcluster-team's example job (the stand-in plugin takes the option and does nothing).
IMAGE = "nvcr.io#nvidia/pytorch:24.09-py3"


def sbatch_with_a_container(node: Node) -> subprocess.CompletedProcess[str]:
    """`sbatch --test-only --container-image=...`: accepted only when sbatch has loaded pyxis."""
    return node.sh(f"cd /tmp && /opt/slurm/bin/sbatch --test-only -p {QUEUE} --container-image={IMAGE} --wrap true",
                   check=False)  # fmt: skip


#: Run as root inside the compute node from before its OnNodeStart actions: the first moment the team's first
#: account exists (checked every 20 ms), what guards the node's instance metadata then.
WATCH = rf"""
until getent passwd {ENVIRONMENT.users[0].name} >/dev/null; do sleep 0.02; done
{{
    echo "guard: $(iptables -w -S TC-IMDS 2>/dev/null | grep -c -- '-j REJECT')"
    echo "admin: $(iptables -w -S TC-IMDS 2>/dev/null | grep -c -- "--uid-owner $(id -u {PCLUSTER_ADMIN_USER}) -j RETURN")"
    echo "jump: $(iptables -w -C OUTPUT -d 169.254.169.254/32 -j TC-IMDS 2>/dev/null && echo yes || echo no)"
    echo "unit: $(systemctl is-enabled training-clusters-imds.service 2>&1)"
}} >/root/when-the-account-appeared
"""


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    reason = parallelcluster_prerequisites()
    if reason:
        pytest.fail(reason)
    started = time.monotonic()
    work = tmp_path_factory.mktemp("parallelcluster")
    cluster = boot_head(work / "bed", pyxis_stand_in=build_pyxis_stand_in(work, slurm_root()))
    try:
        head = cluster.head
        option_before = sbatch_with_a_container(head)
        mark = len(cluster.ctld_log())
        head_runs = by_script(cluster.on_node_configured(head))
        head_log = cluster.ctld_log()[mark:]
        compute = add_compute(cluster)
        assert "TC-IMDS" not in compute.sh("iptables -w -S").stdout
        compute.write("/root/watch.sh", WATCH, 0o700)
        watcher = subprocess.Popen(
            ["nsenter", "-t", str(compute.leader), "-a", "--", "bash", "/root/watch.sh"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            compute_start_runs = by_script(cluster.on_node_start(compute))
            etc_before = tree_state(head.path("/opt/slurm/etc"))
            mark = len(cluster.ctld_log())
            compute_runs = by_script(cluster.on_node_configured(compute))
            compute_log = cluster.ctld_log()[mark:]
            watcher.wait(timeout=30)
        finally:
            watcher.kill()
        appeared = compute.read("/root/when-the-account-appeared").splitlines()
        etc_after = tree_state(head.path("/opt/slurm/etc"))
        cluster.finalize_compute()
        cluster.wait_idle()
        TIMINGS.append(("parallelcluster", "ParallelCluster-like cluster: head boot to compute node idle",
                        time.monotonic() - started))  # fmt: skip
        for action in cluster.actions:
            TIMINGS.append(("parallelcluster", f"{action.script} on {action.node}", action.seconds))
        yield Scenario(
            cluster,
            head_runs,
            compute_runs,
            head_log,
            compute_log,
            etc_before,
            etc_after,
            option_before,
            compute_start_runs,
            appeared,
        )
    finally:
        cluster.bed.__exit__(None, None, None)
        TIMINGS.append(
            ("parallelcluster", "ParallelCluster-like cluster: whole scenario", time.monotonic() - started)
        )


def test_no_slurm_command_is_on_parallelclusters_path_on_either_node(scenario: Scenario) -> None:
    """The premise: a custom action finds Slurm only by its full path, on the head node and on a compute node
    (whose /opt/slurm is the head node's)."""
    for node in (scenario.head, scenario.compute):
        found = node.sh(
            f"command -v {' '.join(SLURM_CLIENTS_CHECKED)}", env={"PATH": PARALLELCLUSTER_PATH}, check=False
        )
        assert (found.returncode, found.stdout) == (1, ""), node.name
        assert re.fullmatch(r"slurm\S* 24\.11\.\d+\n", node.sh("/opt/slurm/bin/scontrol --version").stdout), (
            node.name
        )


def test_the_head_nodes_actions_exit_0_with_parallelclusters_path(scenario: Scenario) -> None:
    assert list(scenario.head_runs) == [USERS_SCRIPT, PYXIS_SCRIPT, ENROOT_SCRIPT]
    for action in scenario.head_runs.values():
        assert action.returncode == 0, action
        assert "command not found" not in action.stderr, action


def test_pyxis_reconfigures_the_running_slurmctld_once(scenario: Scenario) -> None:
    pyxis = scenario.head_runs[PYXIS_SCRIPT]
    assert "pyxis.sh: Slurm reconfigured: srun --container-image is available" in pyxis.stdout.splitlines()
    assert reconfigure_requests(scenario.head_ctld_log) == 1, scenario.head_ctld_log
    assert not scenario.head.path(PENDING_MARKER).exists()
    assert scenario.head.sh("systemctl is-active slurmctld").stdout.strip() == "active"
    assert "is UP" in scenario.head.sh("/opt/slurm/bin/scontrol ping").stdout


def test_the_spank_configuration_is_in_place_and_is_what_slurm_loads(scenario: Scenario) -> None:
    """The examples copied verbatim into the shared /opt/slurm/etc, nothing staged left beside them; sbatch
    and srun load that stack, with pyxis in it (pyxis.conf names it `required`: a broken stack fails every
    job), so --container-image is an option of theirs now."""
    etc = scenario.head.path("/opt/slurm/etc")
    assert (etc / "plugstack.conf").read_text() == EXAMPLES["spank/plugstack.conf"]
    assert (etc / "plugstack.conf.d" / "pyxis.conf").read_text() == EXAMPLES["pyxis/pyxis.conf"]
    assert sorted(p.name for p in (etc / "plugstack.conf.d").iterdir()) == ["pyxis.conf"]
    assert oct((etc / "plugstack.conf").stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in etc.iterdir() if p.name.startswith("tmp.")] == []
    before = scenario.container_option_before
    assert before.returncode != 0 and "unrecognized option '--container-image" in before.stderr, before
    after = sbatch_with_a_container(scenario.head)
    assert after.returncode == 0 and f"on nodes {COMPUTE_NODE} in partition {QUEUE}" in after.stderr, after
    assert "--container-image=" in scenario.head.sh("/opt/slurm/bin/srun --help").stdout


def test_the_compute_node_leaves_the_shared_spank_configuration_alone(scenario: Scenario) -> None:
    """aws-parallelcluster issue #6459: nodes writing the shared plugstack.conf.d at once broke every job."""
    compute = scenario.compute
    assert list(scenario.compute_runs) == [USERS_SCRIPT, PYXIS_SCRIPT, ENROOT_SCRIPT]
    for action in scenario.compute_runs.values():
        assert action.returncode == 0, action
    pyxis = scenario.compute_runs[PYXIS_SCRIPT]
    assert "pyxis.sh: node type ComputeFleet" in pyxis.stdout.splitlines()
    assert "left alone here" in pyxis.stdout
    assert scenario.shared_etc_after == scenario.shared_etc_before
    assert (
        compute.sh("cat /opt/slurm/etc/plugstack.conf").stdout == EXAMPLES["spank/plugstack.conf"]
    )  # shared
    assert reconfigure_requests(scenario.compute_ctld_log) == 0
    # enroot's folders: root's, 0755, one per user inside (training-clusters-enroot.sh), none world-writable
    modes = compute.sh("stat -c '%n %U %a' /run/enroot /var/enroot /run/pyxis /var/enroot/cache/*").stdout
    assert modes.splitlines() == [
        "/run/enroot root 755",
        "/var/enroot root 755",
        "/run/pyxis root 755",
        "/var/enroot/cache/user-1000 ec2-user 700",
        "/var/enroot/cache/user-2001 alice 700",
        "/var/enroot/cache/user-2002 bob 700",
    ]
    conf = compute.read("/etc/enroot/enroot.conf")
    assert "ENROOT_CONFIG_PATH" not in conf.replace("# ENROOT_CONFIG_PATH is enroot's default", "")
    assert "ENROOT_CACHE_PATH      /var/enroot/cache/user-$(id -u)" in conf.splitlines()


def test_the_team_users_have_the_same_ids_on_both_nodes(scenario: Scenario) -> None:
    for user in ENVIRONMENT.users:
        for node in (scenario.head, scenario.compute):
            ids = node.sh(f"id -u {user.name}; id -g {user.name}; getent passwd {user.name} | cut -d: -f6")
            assert ids.stdout.split() == [str(user.uid), str(user.primary_gid), f"{HOME_ROOT}/{user.name}"], (
                node.name
            )
            for group in user.groups:
                entry = node.sh(f"getent group {group.name}").stdout.strip().split(":")
                assert entry[2] == str(group.gid) and user.name in entry[3].split(","), (node.name, entry)
    # the head node made the homes on the shared file system; the compute node found them there
    assert "created home" in scenario.head_runs[USERS_SCRIPT].stdout
    assert "created home" not in scenario.compute_runs[USERS_SCRIPT].stdout


def test_a_team_user_sbatch_from_the_head_node_runs_on_the_compute_node_as_that_user(
    scenario: Scenario,
) -> None:
    """The job loads the shared SPANK stack on the compute node too (slurmstepd), and finds its user there."""
    scenario.cluster.wait_idle()
    user = ENVIRONMENT.users[0]
    submitted = scenario.head.sh(
        f"cd && /opt/slurm/bin/sbatch --wait --parsable -p {QUEUE} -o job-%j.out --wrap 'id -un; id -u; hostname; pwd'",
        user=user.name,
        timeout=90,
    )
    job = submitted.stdout.strip().split(";")[0]
    shown = show_job(scenario.head, job)
    assert (shown["JobState"], shown["ExitCode"]) == ("COMPLETED", "0:0"), shown
    assert shown["UserId"] == f"{user.name}({user.uid})"
    assert shown["NodeList"] == COMPUTE_NODE and shown["BatchHost"] == COMPUTE_NODE
    output = scenario.cluster.shared / "home" / user.name / f"job-{job}.out"
    assert output.read_text().split() == [
        user.name,
        str(user.uid),
        node_name(COMPUTE_IP),
        f"{HOME_ROOT}/{user.name}",
    ]
    assert (output.stat().st_uid, output.stat().st_gid) == (user.uid, user.primary_gid)


def test_the_acceptance_jobs_are_accepted_by_real_sbatch(scenario: Scenario) -> None:
    """`training-clusters acceptance` sbatch scripts of parallelcluster-team: their queue and their
    constraint (the instance type, a feature ParallelCluster gives each node) match the bed's node.
    They ask for two nodes; the bed has one compute node, so -N 1 on the command line."""
    jobs = acceptance_plan(ENVIRONMENT, "parallelcluster-team").jobs
    assert {job.filename.split("-")[0] for job in jobs} == {"osu"}
    for job in jobs:
        assert f"#SBATCH --partition={QUEUE}" in job.content.splitlines()
        (scenario.cluster.shared / job.filename).write_text(job.content)
        result = scenario.head.sh(
            f"cd /tmp && /opt/slurm/bin/sbatch --test-only -N 1 /shared/{job.filename}", check=False
        )
        assert result.returncode == 0 and "to start at" in result.stderr, f"{job.filename}: {result.stderr}"


def test_srun_from_the_head_node_loads_the_plugin_and_runs_on_the_compute_node(scenario: Scenario) -> None:
    scenario.cluster.wait_idle()
    ran = scenario.head.sh(
        f"/opt/slurm/bin/srun -p {QUEUE} hostname", user=ENVIRONMENT.users[0].name, timeout=90
    )
    assert ran.stdout.split() == [node_name(COMPUTE_IP)]
    assert scenario.head.path(PYXIS_PLUGIN).is_file()  # what the required line names (the bed's stand-in)


def _daemon_pids(scenario: Scenario) -> list[str]:
    return [
        scenario.head.sh("systemctl show -p MainPID --value slurmctld").stdout.strip(),
        scenario.compute.sh("systemctl show -p MainPID --value slurmd").stdout.strip(),
    ]


def _node_state(scenario: Scenario) -> dict[str, object]:
    state: dict[str, object] = {}
    for node in (scenario.head, scenario.compute):
        for folder in ("/etc/enroot", "/var/enroot", "/var/lib/training-clusters"):
            if node.path(folder).exists():
                state[f"{node.name}:{folder}"] = tree_state(node.path(folder))
        for file in ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"):
            state[f"{node.name}:{file}"] = node.path(file).read_bytes()
        state[f"{node.name}:/run"] = node.sh("stat -c '%n %a %Y' /run/enroot /run/pyxis").stdout
    state["/opt/slurm/etc"] = tree_state(scenario.head.path("/opt/slurm/etc"))
    state[HOME_ROOT] = tree_state(scenario.cluster.shared / "home")
    return state


def test_a_second_run_on_both_nodes_changes_nothing_and_does_not_reconfigure(scenario: Scenario) -> None:
    """As after a reboot or an update that runs the actions again; slurmd runs on the compute node now."""
    cluster = scenario.cluster
    cluster.wait_idle()
    pids, before, mark = _daemon_pids(scenario), _node_state(scenario), len(cluster.ctld_log())
    again = by_script(cluster.on_node_configured(scenario.head)) | {
        f"{name} (compute)": action
        for name, action in by_script(cluster.on_node_configured(scenario.compute)).items()
    }
    for action in again.values():
        assert action.returncode == 0, action
        assert not re.search(r"wrote|created|added|generated|reconfigured", action.stdout), action
    assert _node_state(scenario) == before
    assert reconfigure_requests(cluster.ctld_log()[mark:]) == 0
    assert _daemon_pids(scenario) == pids
    cluster.wait_idle()


def test_before_the_fix_pyxis_exits_127_on_a_head_node_as_scontrol_is_not_on_the_path(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Issue #27 item 1, on the real bed: the parent of abd9a13 ran a bare `scontrol reconfigure`, which
    ParallelCluster's PATH does not find: the action exits 127 and fails the head node's bootstrap, with the
    SPANK files written and slurmctld never told."""
    reason = parallelcluster_prerequisites()
    if reason:
        pytest.fail(reason)
    old = subprocess.run(
        ["git", "show", f"{FIX_COMMIT}~1:training_clusters/parallelcluster_actions/{PYXIS_SCRIPT}"],  # its path then
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if old.returncode != 0:
        pytest.fail(f"cannot read pyxis.sh before {FIX_COMMIT} from git (a shallow clone?): {old.stderr}")
    assert "/opt/slurm/bin/scontrol" not in old.stdout
    started = time.monotonic()
    cluster = boot_head(tmp_path_factory.mktemp("parallelcluster-before-fix"), pyxis_stand_in=None)
    try:
        mark = len(cluster.ctld_log())
        action = run_custom_action(cluster.head, old.stdout, (), url=action_url(PYXIS_SCRIPT))
        assert action.returncode == 127, action
        assert re.search(r"^/tmp/tmp\w+: line \d+: scontrol: command not found$", action.stderr, re.M), action
        assert (cluster.head.path("/opt/slurm/etc/plugstack.conf.d/pyxis.conf")).is_file()
        assert reconfigure_requests(cluster.ctld_log()[mark:]) == 0
        assert "is UP" in cluster.head.sh("/opt/slurm/bin/scontrol ping").stdout  # Slurm was there all along
    finally:
        cluster.bed.__exit__(None, None, None)
    TIMINGS.append(("before-fix", f"pyxis.sh of {FIX_COMMIT}~1 on a fresh head node: boot to exit 127",
                    time.monotonic() - started))  # fmt: skip


@pytest.fixture(scope="module")
def metadata(scenario: Scenario, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with slurm_bed.emulated_imds(scenario.cluster.bed, tmp_path_factory.mktemp("imds")):
        for node in (scenario.head, scenario.compute):
            slurm_bed.reach_imds(node)
        yield


def test_on_compute_nodes_only_root_and_parallelclusters_admin_reach_instance_metadata(
    scenario: Scenario, metadata: None
) -> None:
    """Issue 28: ParallelCluster locks IMDS down on head and login nodes only (HeadNode.Imds.Secured; cookbook
    aws-parallelcluster-environment/recipes/config/imds.rb); on compute nodes, where the team's jobs run, the
    guard does. Real netfilter in the compute node's namespace; IMDS emulated."""
    compute, head = scenario.compute, scenario.head
    user = ENVIRONMENT.users[0].name
    assert slurm_bed.imds_answer(compute, None) == "404"  # root: the server answers (no such path)
    assert slurm_bed.imds_answer(compute, PCLUSTER_ADMIN_USER) == "404"  # computemgtd's user
    assert slurm_bed.imds_answer(compute, user) == "000 curl exit 7"  # refused with a TCP reset
    assert "training-clusters-imds.service" in scenario.compute_start_runs[IMDS_SCRIPT].stdout
    assert compute.sh("systemctl is-active training-clusters-imds.service").stdout.strip() == "active"
    # the head node is left to ParallelCluster's own lockdown, which the bed does not emulate
    assert IMDS_SCRIPT not in scenario.head_runs
    assert slurm_bed.imds_answer(head, user) == "404"


def test_the_compute_nodes_guard_is_in_force_the_moment_the_first_team_account_appears(
    scenario: Scenario,
) -> None:
    """Issue 40: the guard is the queue's OnNodeStart action, users.sh an OnNodeConfigured one. Watched from
    inside the compute node while ParallelCluster's executor would run them: when alice's account appears the
    guard's chain (pcluster-admin let through, the TCP reset and the catch-all reject), OUTPUT's jump to it
    and its boot unit are all there."""
    assert list(scenario.compute_start_runs) == [IMDS_SCRIPT]
    (guard,) = scenario.compute_start_runs.values()
    assert guard.returncode == 0, guard
    assert scenario.when_the_account_appeared == ["guard: 2", "admin: 1", "jump: yes", "unit: enabled"]
    assert IMDS_SCRIPT not in scenario.head_runs  # the head node: ParallelCluster's lockdown, from init


def test_with_login_nodes_the_team_cannot_ssh_into_the_head_node(scenario: Scenario) -> None:
    """Issue 28: the head node runs slurmctld and reads the accounting secret; parallelcluster-team has a login
    node for the team. Real sshd and PAM on both nodes; the homes (and authorized_keys) are shared as on FSx."""
    compute, head = scenario.compute, scenario.head
    user = ENVIRONMENT.users[0].name
    for node in (compute, head):
        wait_until(
            f"sshd on {node.name}",
            lambda n=node: n.sh("systemctl is-active ssh", check=False).returncode == 0,
        )
    compute.sh("test -f /root/.ssh/id_ed25519 || ssh-keygen -q -t ed25519 -N '' -f /root/.ssh/id_ed25519")
    root_key = compute.sh("cat /root/.ssh/id_ed25519.pub").stdout.strip()
    head.sh(f"install -d -m 700 /root/.ssh && printf '%s\\n' '{root_key}' >>/root/.ssh/authorized_keys")

    to_compute = compute.sh(f"{slurm_bed.SSH} {COMPUTE_IP} hostname", user=user, check=False)
    to_head = compute.sh(f"{slurm_bed.SSH} {HEAD_IP} hostname", user=user, check=False)
    root_to_head = compute.sh(f"{slurm_bed.SSH} {HEAD_IP} hostname", check=False)

    assert (to_compute.returncode, to_compute.stdout.strip()) == (0, compute.name), to_compute.stderr
    assert to_head.returncode == 255 and to_head.stdout == "", to_head.stderr
    assert (root_to_head.returncode, root_to_head.stdout.strip()) == (0, head.name), root_to_head.stderr
    journal = head.sh("journalctl -u ssh --no-pager -o cat").stdout
    assert f"Access denied for user {user} by PAM account configuration" in journal
