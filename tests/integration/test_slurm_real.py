"""The HyperPod lifecycle scripts on real Slurm 24.11 under real systemd (``make integration``).

A cluster of four nspawn-booted Debian machines (controller, login node, two workers: see
hyperpod_bed.py and slurm_bed.py for what is emulated and why) runs our on_create.sh on every node at
once while the emulated HyperPod agent writes the controller's slurm.conf; then real Slurm answers:
workers idle, a team user's jobs from the login node, requeue on exit code 75, the settings kept when
the agent rewrites slurm.conf, a second run changing nothing, a worker replaced mid-job, accounting in
MariaDB on the controller (``local``) or in a database server of its own (``external``, started after
the controller, as Aurora's writer may be).

What these tests cannot show: Slurm's cgroup enforcement (ConstrainDevices, pam_slurm_adopt's adoption
of SSH sessions into a job) needs cgroup delegation this machine does not give containers; GPUs, EFA,
FSx for Lustre and HyperPod's own auto-resume (``srun --auto-resume``) are not here either.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import pytest

from tests.integration import accounting_bed, slurm_bed
from tests.integration.conftest import TIMINGS
from tests.integration.hyperpod_bed import (
    ALICE,
    CONTROLLER_IP,
    DATABASE_IP,
    EXTERNAL_ACCOUNTING,
    EXTERNAL_PASSWORD,
    LOGIN_IP,
    PARTITION,
    SCRIPT_ENV,
    WORKER_IPS,
    Cluster,
    boot_cluster,
    job_field,
    sbatch,
    start_database,
)
from tests.integration.slurm_bed import (
    REPO,
    SSH,
    Bed,
    Node,
    imds_answer,
    missing_prerequisites,
    reach_imds,
    wait_until,
)
from training_clusters.acceptance.plan import acceptance_plan
from training_clusters.config import load_environment

pytestmark = pytest.mark.integration

SETTINGS_LOCAL = {"enable_enroot_pyxis": False, "users": [ALICE], "accounting": {"mode": "local"}}
SETTINGS_EXTERNAL = {"enable_enroot_pyxis": False, "users": [ALICE], "accounting": EXTERNAL_ACCOUNTING}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = missing_prerequisites()
    if reason:
        pytest.fail(reason)
    started = time.monotonic()
    made = boot_cluster(tmp_path_factory.mktemp("hyperpod-local"), SETTINGS_LOCAL)
    TIMINGS.append(
        (
            "cluster",
            "HyperPod-like cluster, local accounting: boot + on_create.sh",
            time.monotonic() - started,
        )
    )
    try:
        yield made
    finally:
        made.bed.__exit__(None, None, None)
        TIMINGS.append(
            ("cluster", "HyperPod-like cluster, local accounting: whole scenario", time.monotonic() - started)
        )


def release_requeued(cluster: Cluster, job: str) -> None:
    """Slurm makes a requeued batch job eligible again only after a delay (BeginTime about two minutes
    on): move it to now, as an administrator would, so the test does not wait it out."""
    cluster.controller.sh(f"/opt/slurm/bin/scontrol update jobid={job} StartTime=now")


def test_every_node_is_provisioned(cluster: Cluster) -> None:
    for ip, run in cluster.runs.items():
        assert run.returncode == 0, f"{ip}:\n{run.output}"
        assert "FAILED step" not in run.output
    roles = {
        ip: re.search(r"SUCCESS: node provisioned as (\w+)", run.output) for ip, run in cluster.runs.items()
    }
    assert {ip: found.group(1) for ip, found in roles.items() if found} == {
        CONTROLLER_IP: "controller",
        cluster.login.ip: "login",
        **{worker.ip: "worker" for worker in cluster.workers},
    }


def test_controller_sets_up_accounting_before_slurmctld_starts(cluster: Cluster) -> None:
    """Defect 10: slurmctld started with accounting before slurmdbd answered never came up."""
    log = cluster.runs[CONTROLLER_IP].output
    order = [m.group(1) for m in re.finditer(r"step '([\w-]+)' (?:started|skipped)", log)]
    assert order.index("slurm-config") < order.index("accounting") < order.index("slurm-controller")
    ctld_log = cluster.controller.read("/var/log/slurmctld.log")
    assert "Still don't know my ClusterID" not in ctld_log
    assert "CLUSTER ID MISMATCH" not in ctld_log


def test_workers_are_idle_in_their_partition(cluster: Cluster) -> None:
    cluster.wait_idle()
    out = cluster.login.sh(f"/opt/slurm/bin/sinfo -h -p {PARTITION} -N -o '%N %t %P'").stdout.split("\n")
    assert sorted(line for line in out if line) == sorted(
        f"{w.name} idle {PARTITION}*" for w in cluster.workers
    )


def test_login_node_runs_sackd_and_no_slurmd(cluster: Cluster) -> None:
    """Defect 5: slurmd on a login node (no NodeName) exits and loops; sackd serves the client commands."""
    login = cluster.login
    assert login.sh("systemctl is-active sackd").stdout.strip() == "active"
    assert login.sh("systemctl is-active slurmd", check=False).stdout.strip() == "inactive"
    assert login.sh("systemctl is-enabled slurmd", check=False).stdout.strip() == "disabled"
    assert login.sh("test -s /run/slurm/conf/slurm.conf", check=False).returncode == 0
    assert not login.path("/opt/slurm/etc/slurm.conf").exists()  # the AMI's placeholder moved aside
    assert "is UP" in login.sh("/opt/slurm/bin/scontrol ping").stdout


def test_team_user_has_the_same_ids_on_every_node(cluster: Cluster) -> None:
    for node in (cluster.controller, cluster.login, *cluster.workers):
        assert node.sh("id -u alice; id -g alice").stdout.split() == ["2001", "2001"], node.name


def test_team_user_runs_srun_on_both_workers_from_the_login_node(cluster: Cluster) -> None:
    cluster.wait_idle()
    out = cluster.login.sh(f"/opt/slurm/bin/srun -p {PARTITION} -N2 hostname", user="alice", timeout=90)
    assert sorted(out.stdout.split()) == sorted(worker.name for worker in cluster.workers)


def test_team_user_sbatch_completes_and_sacct_lists_it(cluster: Cluster) -> None:
    cluster.wait_idle()
    job = sbatch(cluster, f"-p {PARTITION} -N1 --wait -o /dev/null --wrap 'id -un'")
    sacct = cluster.login.sh(
        f"/opt/slurm/bin/sacct -n -P -X -j {job} -o JobID,User,State,ExitCode", user="alice"
    )
    assert sacct.stdout.split() == [f"{job}|alice|COMPLETED|0:0"]


def test_job_exiting_75_is_requeued_and_runs_again(cluster: Cluster) -> None:
    """RequeueExit=75 from slurm_requeue_exit_codes: Slurm puts the job back in the queue itself."""
    cluster.wait_idle()
    script = 'if [ "${SLURM_RESTART_COUNT:-0}" -ge 1 ]; then exit 0; fi; exit 75'
    job = sbatch(cluster, f"-p {PARTITION} -N1 -o /dev/null", script=script)

    def state() -> tuple[str, str, str]:
        return (
            job_field(cluster, job, "JobState"),
            job_field(cluster, job, "Restarts"),
            job_field(cluster, job, "ExitCode"),
        )

    wait_until(f"job {job} requeued", lambda: state() == ("PENDING", "1", "75:0"), seen=state, timeout=60)
    release_requeued(cluster, job)
    wait_until(
        f"job {job} completed on its second run", lambda: state() == ("COMPLETED", "1", "0:0"), seen=state
    )


def test_settings_survive_the_agent_rewriting_slurm_conf(cluster: Cluster) -> None:
    controller = cluster.controller
    controller.write("/opt/slurm/etc/slurm.conf", cluster.slurm_conf() + "# rewritten by the agent\n")

    def applied() -> bool:
        text = controller.read("/opt/slurm/etc/slurm.conf")
        return "# rewritten by the agent" in text and "JobRequeue=1" in text and "RequeueExit=75" in text

    wait_until("our keys back in slurm.conf", applied, timeout=30)
    lines = controller.read("/opt/slurm/etc/slurm.conf").splitlines()
    assert "AccountingStorageType=accounting_storage/slurmdbd" in lines
    assert f"AccountingStorageHost={CONTROLLER_IP}" in lines
    wait_until(
        "slurmctld reconfigured with them",
        lambda: bool(
            re.search(
                r"^JobRequeue\s*=\s*1$", controller.sh("/opt/slurm/bin/scontrol show config").stdout, re.M
            )
        ),
        timeout=30,
    )
    cluster.wait_idle()


def test_second_run_of_on_create_restarts_nothing(cluster: Cluster) -> None:
    """Defect 11: a second run restarted slurmd on every worker (killing their jobs' steps)."""
    cluster.wait_idle()
    before = cluster.daemon_pids()
    assert all(pid not in ("", "0") for pid in before.values()), before
    runs = cluster.provision([cluster.controller, cluster.login, *cluster.workers], agent_writes=False)
    for ip, run in runs.items():
        assert run.returncode == 0, f"{ip}:\n{run.output}"
    assert cluster.daemon_pids() == before
    assert "slurmctld already runs with this configuration: not restarted" in runs[CONTROLLER_IP].output
    assert "slurmdbd already runs with this configuration: not restarted" in runs[CONTROLLER_IP].output


@pytest.fixture(scope="module")
def metadata(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with slurm_bed.emulated_imds(cluster.bed, tmp_path_factory.mktemp("imds")):
        yield


def test_only_root_reaches_instance_metadata_on_every_node(cluster: Cluster, metadata: None) -> None:
    """Issue 28: a team user must never get the node role's credentials (the controller's reads the
    accounting secret). Real netfilter in each node's own network namespace; IMDS emulated."""
    for node in (cluster.controller, cluster.login, *cluster.workers):
        reach_imds(node)
        assert imds_answer(node, None) == "404", node.name  # root: the server answers (no such path)
        assert imds_answer(node, "alice") == "000 curl exit 7", node.name  # refused: a TCP reset


def test_metadata_stays_closed_to_users_after_a_reboot(cluster: Cluster, metadata: None) -> None:
    worker = cluster.workers[0]
    worker.power_off()
    worker.mount()
    worker.boot()
    assert worker.sh("systemctl is-active training-clusters-imds.service").stdout.strip() == "active"
    reach_imds(worker)
    assert imds_answer(worker, None) == "404"
    assert imds_answer(worker, "alice") == "000 curl exit 7"
    cluster.wait_idle()  # slurmd came back with the machine


def authorise(key_holder: Node, user: str, home: str, targets: list[Node]) -> None:
    """USER's public key from KEY_HOLDER in USER's authorized_keys on TARGETS, as the one home on FSx for
    Lustre gives every node (the bed has no shared file system: each node has its own /home)."""
    public = key_holder.sh(f"cat {home}/.ssh/id_ed25519.pub").stdout.strip()
    for target in targets:
        target.sh(
            f"install -d -m 700 -o {user} -g {user} {home}/.ssh && "
            f"printf '%s\\n' '{public}' >>{home}/.ssh/authorized_keys && "
            f"chown {user}: {home}/.ssh/authorized_keys && chmod 600 {home}/.ssh/authorized_keys"
        )


def test_team_users_cannot_ssh_into_the_controller_but_reach_the_workers(cluster: Cluster) -> None:
    """Issue 28: the controller (slurmctld's state, the role that reads the accounting secret) admits root
    and the cluster user over SSH, not the team. Real sshd and PAM (pam_access) on every node."""
    login, controller, worker = cluster.login, cluster.controller, cluster.workers[0]
    for node in (login, controller, worker):
        wait_until(
            f"sshd on {node.name}",
            lambda n=node: n.sh("systemctl is-active ssh", check=False).returncode == 0,
        )
    authorise(login, "alice", "/home/alice", [controller, worker])
    login.sh("test -f /root/.ssh/id_ed25519 || ssh-keygen -q -t ed25519 -N '' -f /root/.ssh/id_ed25519")
    authorise(login, "root", "/root", [controller])

    to_worker = login.sh(f"{SSH} {WORKER_IPS[0]} hostname", user="alice", check=False)
    to_controller = login.sh(f"{SSH} {CONTROLLER_IP} hostname", user="alice", check=False)
    root_to_controller = login.sh(f"{SSH} {CONTROLLER_IP} hostname", check=False)

    assert (to_worker.returncode, to_worker.stdout.strip()) == (0, worker.name), to_worker.stderr
    assert to_controller.returncode == 255 and to_controller.stdout == "", to_controller.stderr
    assert (root_to_controller.returncode, root_to_controller.stdout.strip()) == (0, controller.name)
    journal = controller.sh("journalctl -u ssh --no-pager -o cat").stdout
    assert "Access denied for user alice by PAM account configuration" in journal


@pytest.mark.parametrize(
    ("environment", "kinds"),
    [
        ("hyperpod-team", {"osu", "nccl", "dcgm"}),
        ("hyperpod-p5", {"osu", "nccl", "dcgm"}),
        ("pcs-c5n", {"osu"}),
        ("pcs-p5", {"osu", "nccl", "dcgm"}),
    ],
)
def test_acceptance_jobs_are_accepted_by_real_sbatch(
    cluster: Cluster, environment: str, kinds: set[str]
) -> None:
    """`training-clusters acceptance` sbatch scripts (OSU, NCCL, DCGM) parse and fit the bed's partition.

    Their own partition is the environment's, and the DCGM job asks for every node of its group (four
    in pcs-p5): -p and -N on the command line point them at the bed's partition and its two workers.
    (The ParallelCluster ones also ask for the instance type as a node feature: see
    test_parallelcluster_real.)
    """
    config = load_environment(REPO / "environments" / f"{environment}.yaml")
    jobs = acceptance_plan(config, environment).jobs
    assert {job.filename.split("-")[0] for job in jobs} == kinds
    for job in jobs:
        cluster.login.write(f"/home/alice/{job.filename}", job.content, 0o755)
        result = cluster.login.sh(
            f"cd /home/alice && /opt/slurm/bin/sbatch --test-only -p {PARTITION} -N 2 {job.filename}",
            user="alice",
            check=False,
        )
        assert result.returncode == 0 and "to start at" in result.stderr, f"{job.filename}: {result.stderr}"


def test_replaced_worker_joins_and_the_requeued_job_runs_on_it(cluster: Cluster) -> None:
    """Node replacement as HyperPod does it: the instance goes, a new one with its name runs on_create.sh."""
    cluster.wait_idle()
    old = cluster.workers[1]
    script = 'if [ "${SLURM_RESTART_COUNT:-0}" -ge 1 ]; then exit 0; fi; sleep 600'
    job = sbatch(cluster, f"-p {PARTITION} -N2 --requeue -o /dev/null", script=script)
    wait_until(f"job {job} running", lambda: job_field(cluster, job, "JobState") == "RUNNING", timeout=60)

    started = time.monotonic()
    old.power_off()
    # HyperPod's agent takes the failed instance out of Slurm before it replaces it.
    cluster.controller.sh(
        f"/opt/slurm/bin/scontrol update nodename={old.name} state=down reason=hyperpod-replacing"
    )
    wait_until(f"job {job} requeued", lambda: job_field(cluster, job, "Restarts") == "1", timeout=60)

    fresh = cluster.prepare(old.ip, generation=1)
    fresh.boot()
    run = cluster.provision([fresh], agent_writes=False)[fresh.ip]
    assert run.returncode == 0, run.output
    release_requeued(cluster, job)
    wait_until(
        f"job {job} completed again on the new node",
        lambda: job_field(cluster, job, "JobState") == "COMPLETED",
        seen=lambda: job_field(cluster, job, "JobState"),
        timeout=180,
    )
    assert job_field(cluster, job, "Restarts") == "1"
    ran_on = cluster.controller.sh(
        f"/opt/slurm/bin/scontrol show hostnames {job_field(cluster, job, 'NodeList')}"
    )
    assert sorted(ran_on.stdout.split()) == sorted(worker.name for worker in cluster.workers)
    assert cluster.bed.nodes[old.ip] is fresh
    TIMINGS.append(
        ("replacement", "worker replaced mid-job: power-off to job completed", time.monotonic() - started)
    )
    cluster.wait_idle()


# ------------------------------------------------------------------------------------------------------
# External accounting: a database server of its own, which comes up after the controller.
# ------------------------------------------------------------------------------------------------------


def test_external_accounting_waits_for_the_database_and_lists_jobs(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Defect 12 (node side): slurmdbd's first start must wait for a database that is still starting."""
    reason = missing_prerequisites()
    if reason:
        pytest.fail(reason)

    started = time.monotonic()
    with Bed(tmp_path_factory.mktemp("hyperpod-external")) as bed:
        # the database requires TLS with a certificate of the bed's CA, which the controller fetches where
        # it would fetch AWS's RDS bundle (test_accounting_real.py shows the TLS itself)
        tls = accounting_bed.bed_tls(bed, DATABASE_IP)
        bed.script_env = {
            **SCRIPT_ENV,
            **tls.script_env,
            "TC_DATABASE_WAIT_SLEEP": "1",
            "TC_DATABASE_WAIT_ATTEMPTS": "120",
        }
        cluster = Cluster(bed, SETTINGS_EXTERNAL)
        bed.wire(DATABASE_IP)  # the database's address exists; its server is not up yet
        nodes = [cluster.prepare(ip) for ip in (CONTROLLER_IP, LOGIN_IP, *WORKER_IPS)]
        tls.install_ca(cluster.controller)
        for node in nodes:
            node.boot()
        database_up = threading.Event()

        def late_database() -> None:
            time.sleep(8)
            start_database(bed)
            database_up.set()

        threading.Thread(target=late_database, daemon=True).start()
        runs = cluster.provision(nodes, agent_writes=True)
        assert database_up.is_set()
        for ip, run in runs.items():
            assert run.returncode == 0, f"{ip}:\n{run.output}"
        controller_log = runs[CONTROLLER_IP].output
        assert re.search(rf"waiting for the database {DATABASE_IP}:3306 \(1/120\)", controller_log)
        assert f"the database {DATABASE_IP}:3306 answers and holds slurm_acct_db" in controller_log
        assert EXTERNAL_PASSWORD not in controller_log
        cluster.wait_idle()
        job = sbatch(cluster, f"-p {PARTITION} -N1 --wait -o /dev/null --wrap true")
        sacct = cluster.login.sh(f"/opt/slurm/bin/sacct -n -P -X -j {job} -o JobID,User,State", user="alice")
        assert sacct.stdout.split() == [f"{job}|alice|COMPLETED"]
        tables = bed.nodes[DATABASE_IP].sh("mysql -N -e 'SHOW TABLES FROM slurm_acct_db'").stdout.split()
        assert "ml-cluster_job_table" in tables
    TIMINGS.append(
        ("external", "HyperPod-like cluster, external accounting: whole scenario", time.monotonic() - started)
    )
