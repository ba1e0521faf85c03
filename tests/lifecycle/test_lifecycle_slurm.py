"""Slurm on each role as HyperPod leaves it: login nodes (sackd), configless slurmd, the controller's wait
for HyperPod's slurm.conf, settings kept when HyperPod rewrites it (flags merged, cgroup keys only with
pam_slurm_adopt), daemons restarted only when what they read changed, and HyperPod's topology left
alone."""

from __future__ import annotations

import json
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
SACKD_UNIT = "etc/systemd/system/sackd.service"
SACKD_DROPIN = "etc/systemd/system/sackd.service.d/50-training-clusters.conf"
KEYS_UNIT = "etc/systemd/system/training-clusters-slurm-keys"
KEYS_SETTINGS = "etc/training-clusters/slurm-keys.conf"
KEYS_HEADER = (
    "# Written by the training-clusters lifecycle scripts (on_create.sh). Kept applied by\n"
    "# training-clusters-slurm-keys.path: <file in /opt/slurm/etc> <Key> <Value>\n"
)
CONFIGLESS_SLURMD = f"/opt/slurm/sbin/slurmd -D -s --conf-server {CONTROLLER_IP}"
CONFIGLESS_SACKD = f"/opt/slurm/sbin/sackd --systemd --conf-server {CONTROLLER_IP}"
#: The sackd unit the scripts write when the AMI has none (after Slurm's etc/sackd.service.in).
OUR_SACKD_UNIT = """\
# Written by the training-clusters lifecycle scripts: Slurm's login-node daemon (https://slurm.schedmd.com/sackd.html).
[Unit]
Description=Slurm auth and cred kiosk daemon
After=network-online.target munge.service remote-fs.target
Wants=network-online.target

[Service]
Type=notify
User=slurm
Group=slurm
RuntimeDirectory=slurm
RuntimeDirectoryMode=0755
ExecStart=/opt/slurm/sbin/sackd --systemd
KillMode=process
LimitNOFILE=131072

[Install]
WantedBy=multi-user.target
"""


def warnings_of(run: Run) -> list[str]:
    """The run's warnings but those about unpinned downloads (tests/lifecycle/test_lifecycle_downloads.py)."""
    return [
        line.split(" WARN  ", 1)[1]
        for line in run.log.splitlines()
        if " WARN  " in line and "no download_sha256 entry pins it" not in line
    ]


def sackd_dropin(controllers: str = CONTROLLER_IP) -> str:
    return f"""\
# Written by the training-clusters lifecycle scripts: configless client configuration from slurmctld.
[Unit]
ConditionPathExists=

[Service]
Type=notify
ExecStart=
ExecStart=/opt/slurm/sbin/sackd --systemd --conf-server {controllers}
Restart=on-failure
RestartSec=10
"""


def slurmd_command_line(sandbox: Sandbox) -> str:
    """What systemd ran for slurmd (unit + drop-ins, as the stub computes it)."""
    return (sandbox.state / "cmdline.slurmd").read_text().strip()


def assert_failed_step(run: Run, step: str, code: int = 1) -> None:
    assert run.returncode == code, run.output
    assert run.output.count("FAILED step") == 1
    assert run.output.rstrip().splitlines()[-1].endswith(f"FAILED step '{step}' (exit {code})")
    assert "SUCCESS" not in run.log


# -- issue 1: login nodes ------------------------------------------------------------------------


def test_login_node_runs_sackd_for_the_client_commands(sandbox: Sandbox) -> None:
    run = sandbox.as_role("login").run()

    assert run.returncode == 0, run.output
    # sackd --conf-server (not slurmd, which exits on a node that is no NodeName and takes the fetched
    # configuration with it), from a unit of ours: the AMI has the binary, no unit.
    assert sandbox.path(SACKD_UNIT).read_text() == OUR_SACKD_UNIT
    assert sandbox.path(SACKD_DROPIN).read_text() == sackd_dropin()
    assert (sandbox.state / "cmdline.sackd").read_text().strip() == CONFIGLESS_SACKD
    assert run.calls_to("systemctl") == [
        ["disable", "--now", "slurmd"],
        ["disable", "--now", "slurmctld"],
        ["daemon-reload"],
        ["enable", "sackd"],
        ["restart", "sackd"],
        ["is-active", "sackd"],
    ]
    # Client commands read a local slurm.conf before sackd's copy: the AMI's placeholder is kept aside.
    assert not sandbox.path(SLURM_CONF).exists()
    assert (
        sandbox.path("var/backups/training-clusters/slurm.conf.orig").read_text()
        == AMI_PLACEHOLDER_SLURM_CONF
    )
    assert "moved the AMI's /opt/slurm/etc/slurm.conf aside: client commands read sackd's copy" in run.log
    assert run.calls_to("scontrol") == [["ping"]]  # /opt/slurm/bin/scontrol: not on the script's PATH
    assert "sackd is active; scontrol ping: Slurmctld(primary) at ip-10-1-0-10 is UP" in run.log
    assert f"client commands read the configuration sackd fetched from {CONTROLLER_IP}" in run.log


def test_login_node_uses_the_amis_sackd_unit_when_it_has_one(sandbox: Sandbox) -> None:
    ami_unit = OUR_SACKD_UNIT.replace("# Written by the training-clusters", "# The AMI's, not").replace(
        "ExecStart=/opt/slurm/sbin/sackd --systemd",
        "ExecStart=/opt/slurm/sbin/sackd --systemd $SACKD_OPTIONS",
    )
    sandbox.write("lib/systemd/system/sackd.service", ami_unit)

    run = sandbox.as_role("login").run()

    assert run.returncode == 0, run.output
    assert not sandbox.path(SACKD_UNIT).exists()
    assert sandbox.path("lib/systemd/system/sackd.service").read_text() == ami_unit
    assert sandbox.path(SACKD_DROPIN).read_text() == sackd_dropin()
    assert (sandbox.state / "cmdline.sackd").read_text().strip() == CONFIGLESS_SACKD


def test_login_node_without_sackd_fails_the_step_with_one_line(sandbox: Sandbox) -> None:
    sandbox.path("opt/slurm/sbin/sackd").unlink()

    run = sandbox.as_role("login").run()

    assert_failed_step(run, "slurm-login")
    errors = [line for line in run.log.splitlines() if " ERROR [slurm-login] " in line]
    assert [line.split(" ERROR [slurm-login] ", 1)[1] for line in errors] == [
        "/opt/slurm/sbin/sackd not found: login nodes need sackd (Slurm 23.11 or later; HyperPod's Slurm AMI has 24.11)",
        "FAILED step 'slurm-login' (exit 1)",
    ]
    assert run.calls_to("systemctl") == []  # nothing stopped, nothing written
    assert sandbox.path(SLURM_CONF).read_text() == AMI_PLACEHOLDER_SLURM_CONF
    assert not sandbox.path(SACKD_DROPIN).exists()


def test_login_node_fails_when_slurmctld_never_answers(sandbox: Sandbox) -> None:
    run = sandbox.as_role("login").run(STUB_CONTROLLER_DOWN="1")

    assert_failed_step(run, "slurm-login")
    assert len(run.calls_to("scontrol")) == 3  # TC_SLURM_START_WAIT_ATTEMPTS=3 in the sandbox
    assert (
        "Slurm is not up after 30s: sackd is active, scontrol ping says "
        "'Slurmctld(primary) at ip-10-1-0-10 is DOWN' (see journalctl -u sackd and the Slurm logs)" in run.log
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


def test_controller_without_nodes_warns_and_goes_on(sandbox: Sandbox) -> None:
    no_nodes = f"ClusterName=ml-cluster\nSlurmctldHost=ip-10-1-0-10({CONTROLLER_IP})\n"
    sandbox.write(SLURM_CONF, no_nodes)

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    conf = sandbox.path(SLURM_CONF)
    # The agent's file (it names this node): no wait, one warning, then the steps as usual.
    assert run.calls_to("sleep") == []
    warnings = warnings_of(run)
    assert warnings == [
        f"[slurm-config] {conf} has no NodeName line yet: workers register once HyperPod's agent lists them"
    ]
    assert f"HyperPod's {conf} names this node as SlurmctldHost" in run.log
    assert "step 'slurm-config' done" in run.log and "step 'slurm-controller' done" in run.log
    assert conf.read_text() == no_nodes + "JobRequeue=1\nRequeueExit=75\n"  # no node invented
    assert run.calls_to("systemctl").count(["restart", "slurmctld"]) == 1


def test_controller_counts_nodes_of_an_included_file(sandbox: Sandbox) -> None:
    nodes = [line for line in HYPERPOD_SLURM_CONF.splitlines() if line.startswith(("NodeName", "Partition"))]
    rest = [line for line in HYPERPOD_SLURM_CONF.splitlines() if line not in nodes]
    sandbox.write(SLURM_CONF, "\n".join([*rest, "NodeName=DEFAULT CPUs=4", "include nodes.conf"]) + "\n")
    sandbox.write("opt/slurm/etc/nodes.conf", "\n".join(nodes) + "\n")

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert f"HyperPod's {sandbox.path(SLURM_CONF)} names this node as SlurmctldHost" in run.log
    assert "has no NodeName line" not in run.log and warnings_of(run) == []


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


# -- cgroup keys: only with pam_slurm_adopt --------------------------------------------------------

PAM_SLURM_KEYS = [
    "PrologFlags=Contain",
    "ProctrackType=proctrack/cgroup",
    "TaskPlugin=task/cgroup,task/affinity",
]


def test_without_pam_slurm_adopt_no_cgroup_key_is_written(sandbox: Sandbox) -> None:
    cgroup = "CgroupPlugin=autodetect\nconstraindevices=no\nConstrainCores=yes\n"
    sandbox.write(CGROUP_CONF, cgroup)

    run = sandbox.as_role("controller").run()
    sandbox.write(CGROUP_CONF, "CgroupPlugin=autodetect\n")  # rewritten by HyperPod's agent
    again = reapply(sandbox)

    assert run.returncode == 0 and again.returncode == 0, run.output + again.output
    # HyperPod's TaskPlugin=task/none makes cgroup.conf's constraints void: none are kept applied.
    assert sandbox.path(KEYS_SETTINGS).read_text() == (
        KEYS_HEADER + "slurm.conf JobRequeue 1\nslurm.conf RequeueExit 75\n"
    )
    assert sandbox.path(CGROUP_CONF).read_text() == "CgroupPlugin=autodetect\n"
    assert sandbox.path("var/backups/training-clusters/cgroup.conf.orig").read_text() == cgroup
    assert sandbox.path(SLURM_CONF).read_text() == HYPERPOD_SLURM_CONF + "JobRequeue=1\nRequeueExit=75\n"
    assert "ConstrainDevices" not in run.log


def test_without_pam_slurm_adopt_no_cgroup_conf_is_created(sandbox: Sandbox) -> None:
    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert not sandbox.path(CGROUP_CONF).exists()
    assert sandbox.path("var/backups/training-clusters/cgroup.conf.orig.absent").exists()


def test_pam_slurm_adopt_writes_the_four_cgroup_keys(sandbox: Sandbox) -> None:
    sandbox.write_params(enable_pam_slurm_adopt=True)
    sandbox.write(CGROUP_CONF, "CgroupPlugin=autodetect\nconstraindevices=no\nConstrainCores=yes\n")

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert sandbox.path(KEYS_SETTINGS).read_text() == KEYS_HEADER + (
        "slurm.conf JobRequeue 1\n"
        "slurm.conf RequeueExit 75\n"
        "slurm.conf PrologFlags +Contain\n"
        "slurm.conf ProctrackType proctrack/cgroup\n"
        "slurm.conf TaskPlugin task/cgroup,task/affinity\n"
        "cgroup.conf ConstrainDevices yes\n"
    )
    assert sandbox.path(SLURM_CONF).read_text() == (
        HYPERPOD_SLURM_CONF + "JobRequeue=1\nRequeueExit=75\n" + "\n".join(PAM_SLURM_KEYS) + "\n"
    )
    assert sandbox.path(CGROUP_CONF).read_text() == (
        "CgroupPlugin=autodetect\nConstrainDevices=yes\nConstrainCores=yes\n"
    )
    sandbox.write(CGROUP_CONF, "CgroupPlugin=autodetect\n")  # rewritten by HyperPod's agent
    assert reapply(sandbox).returncode == 0
    assert sandbox.path(CGROUP_CONF).read_text() == "CgroupPlugin=autodetect\nConstrainDevices=yes\n"


def test_pam_slurm_adopt_creates_cgroup_conf_when_the_controller_has_none(sandbox: Sandbox) -> None:
    sandbox.write_params(enable_pam_slurm_adopt=True)

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert sandbox.path(CGROUP_CONF).read_text() == "ConstrainDevices=yes\n"
    assert sandbox.path("var/backups/training-clusters/cgroup.conf.orig.absent").exists()


# -- "+" values: flags merged into HyperPod's list -------------------------------------------------


def test_prolog_flags_of_hyperpod_are_kept_beside_contain(sandbox: Sandbox) -> None:
    sandbox.write_params(enable_pam_slurm_adopt=True)
    with_x11 = HYPERPOD_SLURM_CONF.replace(
        "SlurmctldParameters=enable_configless\n", "SlurmctldParameters=enable_configless\nPrologFlags=X11\n"
    )
    sandbox.write(SLURM_CONF, with_x11)

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    lines = sandbox.path(SLURM_CONF).read_text().splitlines()
    assert [line for line in lines if line.lower().startswith("prologflags")] == ["PrologFlags=X11,Contain"]
    assert (
        sandbox.path(SLURM_CONF).read_text()
        == with_x11.replace("PrologFlags=X11\n", "PrologFlags=X11,Contain\n")
        + "JobRequeue=1\nRequeueExit=75\n"
        + "\n".join(PAM_SLURM_KEYS[1:])
        + "\n"
    )
    before = sandbox.path(SLURM_CONF).read_bytes()
    again = reapply(sandbox)  # what the path unit runs after that write: nothing to do
    assert again.returncode == 0, again.output
    assert sandbox.path(SLURM_CONF).read_bytes() == before
    assert "settings already in place" in again.output and again.calls_to("scontrol") == []


def run_keys_command(sandbox: Sandbox, keys: str) -> Run:
    keys_file = sandbox.write("etc/training-clusters/test-keys.conf", keys)
    command = sandbox.scripts / "node" / "training-clusters-slurm-keys.sh"
    return sandbox.run_command(
        [shutil.which("bash") or "/bin/bash", str(command), "--no-reconfigure"],
        TC_SLURM_KEYS_FILE=str(keys_file),
    )


@pytest.mark.parametrize(
    ("existing", "value", "expected"),
    [
        pytest.param("PrologFlags=X11", "+Contain", "PrologFlags=X11,Contain", id="added"),
        pytest.param(
            "prologflags = x11,CONTAIN  # HyperPod's",
            "+Contain",
            "PrologFlags=x11,CONTAIN",
            id="there-in-other-case",
        ),
        pytest.param(
            "PrologFlags=Alloc,Contain",
            "+contain,X11",
            "PrologFlags=Alloc,Contain,X11",
            id="only-the-missing-one",
        ),
        pytest.param(
            "  PROLOGFLAGS=Serial", "+Contain,X11", "PrologFlags=Serial,Contain,X11", id="key-in-capitals"
        ),
    ],
)
def test_a_plus_value_merges_flags_into_the_existing_list(
    sandbox: Sandbox, existing: str, value: str, expected: str
) -> None:
    sandbox.write(SLURM_CONF, f"ClusterName=ml-cluster\n{existing}\nMpiDefault=none\nPrologFlags=NoHold\n")

    first = run_keys_command(sandbox, f"slurm.conf PrologFlags {value}\n")
    after_first = sandbox.path(SLURM_CONF).read_text()
    second = run_keys_command(sandbox, f"slurm.conf PrologFlags {value}\n")

    assert first.returncode == 0 and second.returncode == 0, first.output + second.output
    # The first PrologFlags line merged in place, a later duplicate dropped, nothing else touched.
    assert after_first == f"ClusterName=ml-cluster\n{expected}\nMpiDefault=none\n"
    assert sandbox.path(SLURM_CONF).read_text() == after_first
    assert "settings already in place" in second.output


def test_a_plus_value_without_a_line_appends_the_flags(sandbox: Sandbox) -> None:
    sandbox.write(SLURM_CONF, "ClusterName=ml-cluster\n")

    run = run_keys_command(sandbox, "slurm.conf PrologFlags +Contain,,X11\n")

    assert run.returncode == 0, run.output
    assert sandbox.path(SLURM_CONF).read_text() == "ClusterName=ml-cluster\nPrologFlags=Contain,X11\n"


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
    assert warnings_of(run) == []


def test_a_topology_plugin_without_topology_conf_is_reported(sandbox: Sandbox) -> None:
    sandbox.write(SLURM_CONF, TOPOLOGY_SLURM_CONF)

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert "sets TopologyPlugin=topology/tree but" in run.log
    assert "'Requested topology configuration is not available'" in run.log
    assert not sandbox.path("opt/slurm/etc/topology.conf").exists()  # HyperPod's to write, not ours


# -- daemons restart only when what they read changed ----------------------------------------------


def move_controller(sandbox: Sandbox, new_ip: str) -> None:
    """HyperPod replaced the controller: resource_config.json lists it at NEW_IP."""
    config_file = sandbox.path("opt/ml/config/resource_config.json")
    config = json.loads(config_file.read_text())
    for group in config["InstanceGroups"]:
        for instance in group["Instances"]:
            if instance["CustomerIpAddress"] == CONTROLLER_IP:
                instance["CustomerIpAddress"] = new_ip
    config_file.write_text(json.dumps(config, indent=2))


@pytest.mark.parametrize(
    ("role", "restart", "command_line"),
    [
        pytest.param("worker", ["restart", "--no-block", "slurmd"], "cmdline.slurmd", id="worker"),
        pytest.param("login", ["restart", "sackd"], "cmdline.sackd", id="login"),
    ],
)
def test_a_configless_daemon_restarts_only_when_its_command_line_changed(
    sandbox: Sandbox, role: str, restart: list[str], command_line: str
) -> None:
    daemon = restart[-1]
    sandbox.as_role(role)
    first = sandbox.run()
    second = sandbox.run()  # on_create.sh again, nothing changed: running jobs stay alone
    move_controller(sandbox, "10.1.0.11")
    moved = sandbox.run()  # the drop-in now names another controller
    (sandbox.state / f"unit.{daemon}.service").write_text("failed\n")
    stopped = sandbox.run()  # nothing changed, but the daemon is not running

    for run in (first, second, moved, stopped):
        assert run.returncode == 0, run.output
    assert first.slurm_restarts() == [restart]
    assert second.slurm_restarts() == []
    assert f"{daemon} already runs with this command line: not restarted" in second.log
    assert moved.slurm_restarts() == [restart]
    assert (sandbox.state / command_line).read_text().split("--conf-server ")[1] == "10.1.0.11\n"
    assert stopped.slurm_restarts() == [restart]
