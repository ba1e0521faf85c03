"""Each node finds its role from resource_config.json and does that role's steps only."""

from __future__ import annotations

import pytest

from tests.lifecycle.sandbox import AMI_PLACEHOLDER_SLURM_CONF, CONTROLLER_IP, HYPERPOD_SLURM_CONF, Sandbox

SLURMD_DROPIN = "etc/systemd/system/slurmd.service.d/50-training-clusters.conf"
SACKD_DROPIN = "etc/systemd/system/sackd.service.d/50-training-clusters.conf"
PYXIS_LINE = "required /usr/local/lib/slurm/spank_pyxis.so"
KEYS_PATH_UNIT = "training-clusters-slurm-keys.path"


@pytest.mark.parametrize(
    ("role", "starts", "never_starts", "runs_jobs"),
    [
        ("controller", {"slurmctld", KEYS_PATH_UNIT}, {"slurmd", "sackd"}, False),
        ("worker", {"slurmd"}, {"slurmctld", "sackd"}, True),
        ("login", {"sackd"}, {"slurmctld", "slurmd"}, False),
    ],
)
def test_each_role_does_its_own_steps(
    sandbox: Sandbox, role: str, starts: set[str], never_starts: set[str], runs_jobs: bool
) -> None:
    run = sandbox.as_role(role).run()

    assert run.returncode == 0, run.output
    assert f"step 'slurm-{role}' done" in run.log
    assert f"SUCCESS: node provisioned as {role}" in run.log
    assert starts <= run.started()
    assert not never_starts & run.started()
    for daemon in never_starts - {"sackd"}:  # the AMI has no sackd unit: nothing to disable
        assert ["disable", "--now", daemon] in run.calls_to("systemctl")

    # enroot only where jobs run; pyxis everywhere (srun parses --container-image on the submit host)
    enroot_debs = [args for args in run.calls_to("apt-get") if any("enroot_3.5.0" in a for a in args)]
    assert bool(enroot_debs) == runs_jobs
    assert sandbox.path("etc/enroot/enroot.conf").exists() == runs_jobs
    assert PYXIS_LINE in sandbox.path("opt/slurm/etc/plugstack.conf").read_text().splitlines()

    slurm_conf = sandbox.path("opt/slurm/etc/slurm.conf")
    if role == "controller":
        lines = slurm_conf.read_text().splitlines()
        assert lines.count("JobRequeue=1") == 1
        assert lines.count("RequeueExit=75") == 1
        assert "Include" not in slurm_conf.read_text()  # HyperPod's slurm.conf already lists the nodes
    else:  # configless: the AMI's slurmd unit removed the placeholder (login: moved aside), none written
        assert not slurm_conf.exists()

    systemctl = run.calls_to("systemctl")
    assert sandbox.path(SLURMD_DROPIN).exists() == (role == "worker")
    assert sandbox.path(SACKD_DROPIN).exists() == (role == "login")
    if role == "worker":  # configless: slurmd fetches slurm.conf from the controller
        assert (sandbox.state / "cmdline.slurmd").read_text() == (
            f"/opt/slurm/sbin/slurmd -D -s --conf-server {CONTROLLER_IP}\n"
        )
        assert systemctl.index(["restart", "--no-block", "slurmd"]) > systemctl.index(["daemon-reload"])
        assert "slurmd is up in partition dev" in run.log
    if role == "login":  # sackd fetches what client commands read; the placeholder is kept aside once
        assert (sandbox.state / "cmdline.sackd").read_text() == (
            f"/opt/slurm/sbin/sackd --systemd --conf-server {CONTROLLER_IP}\n"
        )
        assert systemctl.index(["restart", "sackd"]) > systemctl.index(["daemon-reload"])
        assert not (sandbox.state / "cmdline.slurmd").exists()  # slurmd never ran
        backup = sandbox.path("var/backups/training-clusters/slurm.conf.orig")
        assert backup.read_text() == AMI_PLACEHOLDER_SLURM_CONF


def test_controller_requeue_settings_replace_existing_ones(sandbox: Sandbox) -> None:
    sandbox.write("opt/slurm/etc/slurm.conf", HYPERPOD_SLURM_CONF + "jobrequeue=0\nRequeueExit=1\n")
    sandbox.write_params(slurm_requeue_exit_codes=[75, 99])

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    lines = sandbox.path("opt/slurm/etc/slurm.conf").read_text().splitlines()
    assert [line for line in lines if line.lower().startswith(("jobrequeue", "requeueexit"))] == [
        "JobRequeue=1",
        "RequeueExit=75,99",
    ]
    original = sandbox.path("var/backups/training-clusters/slurm.conf.orig").read_text()
    assert original.endswith("jobrequeue=0\nRequeueExit=1\n")


def test_controller_without_slurm_conf_fails_clearly(sandbox: Sandbox) -> None:
    sandbox.path("opt/slurm/etc/slurm.conf").unlink()

    run = sandbox.as_role("controller").run()

    assert run.returncode == 1
    assert len(run.calls_to("sleep")) == 2  # TC_SLURM_CONF_WAIT_ATTEMPTS=2 in the sandbox
    assert "HyperPod's agent did not write" in run.log and "(not there yet)" in run.log
    assert run.output.rstrip().endswith("FAILED step 'slurm-config' (exit 1)")
    assert run.output.count("FAILED step") == 1
    assert "step 'accounting'" not in run.log and "step 'slurm-controller'" not in run.log
    assert "slurmctld" not in run.started()


def test_missing_units_to_disable_are_not_an_error(sandbox: Sandbox) -> None:
    run = sandbox.as_role("login").run(STUB_SYSTEMCTL_FAIL="disable")

    assert run.returncode == 0, run.output
    assert "systemctl disable --now slurmd failed (exit 5); continuing" in run.log
    assert "systemctl disable --now slurmctld failed (exit 5); continuing" in run.log


def test_role_from_ip_addr_when_hostname_lists_no_address(sandbox: Sandbox) -> None:
    sandbox.node_ip = ""

    run = sandbox.run(STUB_IP_ADDR_IPS="10.1.2.21")

    assert run.returncode == 0, run.output
    assert "role=worker group=worker-group-2 partition=train ip=10.1.2.21" in run.log
    node_env = sandbox.path("var/lib/training-clusters/node.env").read_text()
    assert "TC_ROLE=worker\n" in node_env
    assert "TC_PARTITION=train\n" in node_env


def test_unknown_node_ip_fails_clearly_before_changing_anything(sandbox: Sandbox) -> None:
    sandbox.node_ip = "10.9.9.9"

    run = sandbox.run()

    assert run.returncode == 3
    assert "this node's IPv4 addresses (10.9.9.9) are not listed in" in run.output
    assert "controller-machine=10.1.0.10" in run.output  # the known instances are listed
    assert run.output.rstrip().splitlines()[-1].endswith("FAILED step 'detect-role' (exit 3)")
    assert run.output.count("FAILED step") == 1
    assert [call[0] for call in run.calls] == ["hostname"]


def test_instance_group_without_a_role_fails_clearly(sandbox: Sandbox) -> None:
    sandbox.write_params(worker_groups=[{"instance_group_name": "worker-group-1", "partition_name": "dev"}])
    sandbox.node_ip = "10.1.2.21"

    run = sandbox.run()

    assert run.returncode == 3
    assert "instance group 'worker-group-2' is not controller_group 'controller-machine'" in run.output
    assert run.output.rstrip().endswith("FAILED step 'detect-role' (exit 3)")
