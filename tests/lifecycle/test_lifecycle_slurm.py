"""Slurm on each role as HyperPod leaves it: login nodes, configless slurmd, the controller's wait for
HyperPod's slurm.conf, settings kept when HyperPod rewrites it, and HyperPod's topology left alone."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.lifecycle.sandbox import (
    AMI_PLACEHOLDER_SLURM_CONF,
    AMI_SLURMD_UNIT,
    CONTROLLER_IP,
    HYPERPOD_SLURM_CONF,
    Run,
    Sandbox,
)

SLURM_CONF = "opt/slurm/etc/slurm.conf"
CGROUP_CONF = "opt/slurm/etc/cgroup.conf"
SLURMD_DROPIN = "etc/systemd/system/slurmd.service.d/50-training-clusters.conf"
KEYS_UNIT = "etc/systemd/system/training-clusters-slurm-keys"
CONFIGLESS_SLURMD = f"/opt/slurm/sbin/slurmd -D -s --conf-server {CONTROLLER_IP}"


def slurmd_command_line(sandbox: Sandbox) -> str:
    """What systemd ran for slurmd (unit + drop-ins, as the stub computes it)."""
    return (sandbox.state / "cmdline.slurmd").read_text().strip()


def assert_failed_step(run: Run, step: str, code: int = 1) -> None:
    assert run.returncode == code, run.output
    assert run.output.count("FAILED step") == 1
    assert run.output.rstrip().splitlines()[-1].endswith(f"FAILED step '{step}' (exit {code})")
    assert "SUCCESS" not in run.log


# -- issue 1: login nodes ------------------------------------------------------------------------


def test_login_node_fetches_the_configuration_with_slurmd(sandbox: Sandbox) -> None:
    run = sandbox.as_role("login").run()

    assert run.returncode == 0, run.output
    # Like the reference's start_slurm.sh: slurmd --conf-server on login nodes too; it fetches the
    # configuration the client commands read, then exits (a login node is no NodeName).
    assert ["restart", "--no-block", "slurmd"] in run.calls_to("systemctl")
    assert slurmd_command_line(sandbox) == CONFIGLESS_SLURMD
    assert ["ping"] in run.calls_to("scontrol")  # /opt/slurm/bin/scontrol: not on the script's PATH
    assert f"client commands read the configuration fetched from {CONTROLLER_IP}" in run.log


def test_login_node_fails_when_slurmctld_never_answers(sandbox: Sandbox) -> None:
    run = sandbox.as_role("login").run(STUB_CONTROLLER_DOWN="1")

    assert_failed_step(run, "slurm-login")
    assert len(run.calls_to("scontrol")) == 3  # TC_SLURM_START_WAIT_ATTEMPTS=3 in the sandbox
    assert (
        "Slurm is not up after 30s: scontrol ping says 'Slurmctld(primary) at ip-10-1-0-10 is DOWN'"
        in run.log
    )


# -- issue 2: --conf-server that cannot be lost, and a start that is checked ----------------------


@pytest.mark.parametrize(
    ("unit", "environment_file"),
    [
        pytest.param(AMI_SLURMD_UNIT, None, id="unit-expands-SLURMD_OPTIONS"),
        pytest.param(AMI_SLURMD_UNIT, "SLURMD_OPTIONS=\n", id="environment-file-overrides-it"),
        pytest.param(AMI_SLURMD_UNIT.replace(" $SLURMD_OPTIONS", ""), None, id="unit-without-the-variable"),
        pytest.param(
            AMI_SLURMD_UNIT.replace("$SLURMD_OPTIONS", "${SLURMD_OPTIONS}"), None, id="braced-variable"
        ),
        pytest.param(
            AMI_SLURMD_UNIT.replace("$SLURMD_OPTIONS", "--conf-server 10.9.9.9"),
            None,
            id="unit-rewritten-by-the-reference-scripts",
        ),
    ],
)
def test_worker_slurmd_gets_conf_server_whatever_the_ami_unit(
    sandbox: Sandbox, unit: str, environment_file: str | None
) -> None:
    sandbox.write("etc/systemd/system/slurmd.service", unit)
    if environment_file is not None:
        sandbox.write("etc/default/slurmd", environment_file)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert slurmd_command_line(sandbox) == CONFIGLESS_SLURMD
    dropin = sandbox.path(SLURMD_DROPIN).read_text().splitlines()
    assert dropin.index("ExecStart=") < dropin.index(f"ExecStart={CONFIGLESS_SLURMD}")
    assert "Restart=on-failure" in dropin
    assert "ConditionPathExists=" in dropin  # no condition on a local slurm.conf may skip the start
    assert "Environment" not in "\n".join(dropin)


def test_worker_whose_slurmd_never_comes_up_fails_the_step(sandbox: Sandbox) -> None:
    run = sandbox.run(STUB_SLURMD_BROKEN="1")

    assert_failed_step(run, "slurm-worker")
    assert len(run.calls_to("sleep")) >= 3
    assert "Slurm is not up after 30s: slurmd is activating, scontrol ping says" in run.log
    assert "journalctl -u slurmd" in run.log


def test_worker_fails_when_slurmctld_never_answers(sandbox: Sandbox) -> None:
    run = sandbox.run(STUB_CONTROLLER_DOWN="1")

    assert_failed_step(run, "slurm-worker")
    assert "slurmd is active, scontrol ping says 'Slurmctld(primary) at ip-10-1-0-10 is DOWN'" in run.log


def test_worker_without_a_slurmd_unit_fails_clearly(sandbox: Sandbox) -> None:
    sandbox.path("etc/systemd/system/slurmd.service").unlink()

    run = sandbox.run()

    assert_failed_step(run, "slurm-worker")
    assert "slurmd.service not found in /etc/systemd/system" in run.log


# -- issue 3: the controller waits for HyperPod's slurm.conf and for slurmctld -------------------


def test_controller_waits_for_hyperpods_slurm_conf_over_the_ami_placeholder(sandbox: Sandbox) -> None:
    sandbox.as_role("controller")
    sandbox.write(SLURM_CONF, AMI_PLACEHOLDER_SLURM_CONF)
    agent = sandbox.tmp / "agent-slurm.conf"
    agent.write_text(HYPERPOD_SLURM_CONF)

    run = sandbox.run(STUB_AGENT_SLURM_CONF=str(agent), STUB_AGENT_AFTER="2", TC_SLURM_CONF_WAIT_ATTEMPTS="5")

    assert run.returncode == 0, run.output
    assert "SlurmctldHost=localhost is not this node (10.1.0.10): still the AMI's placeholder" in run.log
    # Edited only once HyperPod's own file was there; its original is what the backup keeps.
    assert sandbox.path(SLURM_CONF).read_text() == HYPERPOD_SLURM_CONF + "JobRequeue=1\nRequeueExit=75\n"
    assert sandbox.path("var/backups/training-clusters/slurm.conf.orig").read_text() == HYPERPOD_SLURM_CONF
    assert ["restart", "slurmctld"] in run.calls_to("systemctl")


def test_controller_waits_for_nodes_and_fails_clearly_without_them(sandbox: Sandbox) -> None:
    no_nodes = f"ClusterName=ml-cluster\nSlurmctldHost=ip-10-1-0-10({CONTROLLER_IP})\n"
    sandbox.write(SLURM_CONF, no_nodes)

    run = sandbox.as_role("controller").run()

    assert_failed_step(run, "slurm-controller")
    assert len(run.calls_to("sleep")) == 2  # TC_SLURM_CONF_WAIT_ATTEMPTS=2 in the sandbox
    assert "HyperPod's agent did not write" in run.log and "(no NodeName line yet)" in run.log
    assert sandbox.path(SLURM_CONF).read_text() == no_nodes  # nothing invented, nothing edited
    assert "slurmctld" not in run.started()


def test_controller_counts_nodes_of_an_included_file(sandbox: Sandbox) -> None:
    nodes = [line for line in HYPERPOD_SLURM_CONF.splitlines() if line.startswith(("NodeName", "Partition"))]
    rest = [line for line in HYPERPOD_SLURM_CONF.splitlines() if line not in nodes]
    sandbox.write(SLURM_CONF, "\n".join([*rest, "NodeName=DEFAULT CPUs=4", "include nodes.conf"]) + "\n")
    sandbox.write("opt/slurm/etc/nodes.conf", "\n".join(nodes) + "\n")

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert "names this node as SlurmctldHost and lists the nodes" in run.log


def test_controller_whose_slurmctld_does_not_answer_fails_the_step(sandbox: Sandbox) -> None:
    run = sandbox.as_role("controller").run(STUB_SLURMCTLD_UNRESPONSIVE="1")

    assert_failed_step(run, "slurm-controller")
    assert "slurmctld is active, scontrol ping says 'Slurmctld(primary) at ip-10-1-0-10 is DOWN'" in run.log


# -- issue 4: settings survive HyperPod rewriting slurm.conf ------------------------------------


def unit_value(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


def reapply(sandbox: Sandbox) -> Run:
    """What systemd does when the path unit sees a change: run the service's ExecStart."""
    path_unit = sandbox.path(f"{KEYS_UNIT}.path").read_text()
    (service_name,) = unit_value(path_unit, "Unit")
    (command,) = unit_value(sandbox.path(f"etc/systemd/system/{service_name}").read_text(), "ExecStart")
    return sandbox.run_command([shutil.which("bash") or "/bin/bash", str(sandbox.path(command))])


def test_requeue_settings_come_back_when_hyperpod_rewrites_slurm_conf(sandbox: Sandbox) -> None:
    sandbox.write_params(slurm_requeue_exit_codes=[75, 99])
    first = sandbox.as_role("controller").run()
    assert first.returncode == 0, first.output
    path_unit = sandbox.path(f"{KEYS_UNIT}.path").read_text()
    assert unit_value(path_unit, "PathChanged") == ["/opt/slurm/etc/slurm.conf", "/opt/slurm/etc/cgroup.conf"]
    assert "StartLimitIntervalSec=0" in sandbox.path(f"{KEYS_UNIT}.service").read_text()
    assert ["enable", "--now", "training-clusters-slurm-keys.path"] in first.calls_to("systemctl")

    # HyperPod's agent scales the cluster: a new slurm.conf, without our settings.
    rewritten = HYPERPOD_SLURM_CONF + "NodeName=ip-10-1-2-22 NodeAddr=10.1.2.22 CPUs=4 State=CLOUD\n"
    sandbox.write(SLURM_CONF, rewritten)
    again = reapply(sandbox)

    assert again.returncode == 0, again.output
    assert sandbox.path(SLURM_CONF).read_text() == rewritten + "JobRequeue=1\nRequeueExit=75,99\n"
    assert again.calls_to("scontrol") == [["reconfigure"]]
    # Its own write triggers it once more: nothing to do then, so no loop.
    idle = reapply(sandbox)
    assert idle.returncode == 0 and idle.calls_to("scontrol") == []
    assert "settings already in place" in idle.output


def test_cgroup_devices_are_constrained_on_the_controller(sandbox: Sandbox) -> None:
    sandbox.write(CGROUP_CONF, "CgroupPlugin=autodetect\nconstraindevices=no\nConstrainCores=yes\n")

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert sandbox.path(CGROUP_CONF).read_text() == (
        "CgroupPlugin=autodetect\nConstrainDevices=yes\nConstrainCores=yes\n"
    )
    sandbox.write(CGROUP_CONF, "CgroupPlugin=autodetect\n")  # rewritten by HyperPod's agent
    assert reapply(sandbox).returncode == 0
    assert sandbox.path(CGROUP_CONF).read_text() == "CgroupPlugin=autodetect\nConstrainDevices=yes\n"


def test_cgroup_conf_is_created_when_the_controller_has_none(sandbox: Sandbox) -> None:
    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert sandbox.path(CGROUP_CONF).read_text() == "ConstrainDevices=yes\n"
    assert sandbox.path("var/backups/training-clusters/cgroup.conf.orig.absent").exists()


# -- issue 15 item 5: HyperPod's topology is left alone -------------------------------------------

TOPOLOGY_SLURM_CONF = HYPERPOD_SLURM_CONF.replace(
    "SlurmctldParameters=enable_configless\n",
    "SlurmctldParameters=enable_configless\nTopologyPlugin=topology/tree\nTopologyParam=SwitchAsNodeRank\n",
)
TOPOLOGY_CONF = "SwitchName=s0 Nodes=ip-10-1-1-[11-12]\nSwitchName=s1 Nodes=ip-10-1-2-21\nSwitchName=top Switches=s[0-1]\n"


def topology_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if not re.match(r"(?i)(JobRequeue|RequeueExit)=", line)]


def test_our_edits_leave_hyperpods_topology_untouched(sandbox: Sandbox) -> None:
    sandbox.write(SLURM_CONF, TOPOLOGY_SLURM_CONF)
    topology = sandbox.write("opt/slurm/etc/topology.conf", TOPOLOGY_CONF)
    stamp = topology.stat().st_mtime_ns

    run = sandbox.as_role("controller").run()
    sandbox.write(SLURM_CONF, TOPOLOGY_SLURM_CONF)  # HyperPod's agent rewrites slurm.conf
    again = reapply(sandbox)

    assert run.returncode == 0 and again.returncode == 0, run.output + again.output
    conf = sandbox.path(SLURM_CONF).read_text()
    assert topology_lines(conf) == TOPOLOGY_SLURM_CONF.splitlines()  # same lines, same order
    assert "TopologyPlugin=topology/tree" in conf.splitlines()
    assert topology.read_text() == TOPOLOGY_CONF and topology.stat().st_mtime_ns == stamp
    assert "TopologyPlugin=topology/tree with HyperPod's topology file (left as it is)" in run.log
    assert "WARN" not in run.log


def test_a_topology_plugin_without_topology_conf_is_reported(sandbox: Sandbox) -> None:
    sandbox.write(SLURM_CONF, TOPOLOGY_SLURM_CONF)

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert "sets TopologyPlugin=topology/tree but" in run.log
    assert "'Requested topology configuration is not available'" in run.log
    assert not sandbox.path("opt/slurm/etc/topology.conf").exists()  # HyperPod's to write, not ours
