"""``on_init_complete.sh``: the reduced lifecycle of API-driven Slurm, on the sandbox.

HyperPod runs it (``LifeCycleConfig.OnInitComplete``, "Extended mode" in the AWS::SageMaker::Cluster schema)
after its own set-up: it has written slurm.conf from the instance groups' ``SlurmConfig``, started the node's
Slurm daemon, set up accounting and mounted FSx at the group's ``FsxLustreConfig.MountPath``
("SageMaker HyperPod Slurm configuration", https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ref.html).
The sandbox is left that way before each run; there is no ``provisioning_parameters.json``, and
``training_clusters.json`` names the groups.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

import pytest

from tests.lifecycle.sandbox import (
    AMI_PLACEHOLDER_SLURM_CONF,
    CONTROLLER_GROUP,
    HYPERPOD_SLURM_CONF,
    LOGIN_GROUP,
    Run,
    Sandbox,
)

ENTRY = "on_init_complete.sh"
STEPS = (
    "preflight", "detect-role", "apt-hotfix", "apt-update", "fsx-mounted", "admin-home", "imds-guard",
    "controller-access", "pam-slurm-adopt", "users", "enroot-pyxis", "docker", "slurm-keys", "slurm-ready",
    "observability",
)  # fmt: skip


def api_settings(**overrides: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "slurm_config": "api",
        "controller_group": CONTROLLER_GROUP,
        "login_group": LOGIN_GROUP,
        "worker_groups": [
            {"instance_group_name": "worker-group-1", "partition_name": "dev"},
            {"instance_group_name": "worker-group-2", "partition_name": "train"},
        ],
        "enable_enroot_pyxis": True,
        "enable_observability": False,
        "fsx_mount_dir": "/fsx",
    }
    settings.update(overrides)
    return {key: value for key, value in settings.items() if value is not None}


def as_hyperpod_leaves_it(sandbox: Sandbox, role: str, *, fsx: bool = True, **settings: Any) -> Sandbox:
    """The node after HyperPod's own set-up: slurm.conf written (every role reads the cluster's), the
    controller's slurmctld active, FSx mounted; our settings without provisioning_parameters.json."""
    (sandbox.scripts / "provisioning_parameters.json").unlink()
    sandbox.write_settings(api_settings(**settings))
    sandbox.as_role(role)
    sandbox.write("opt/slurm/etc/slurm.conf", HYPERPOD_SLURM_CONF)
    if role == "controller":
        (sandbox.state / "unit.slurmctld.service").write_text("active\n")
    if fsx:
        sandbox.path("fsx").mkdir(parents=True)
        (sandbox.state / "mounts").write_text(f"{sandbox.path('fsx')}\n")
    return sandbox


def run_api(sandbox: Sandbox, **env: str) -> Run:
    return sandbox.run_command([shutil.which("bash") or "/bin/bash", str(sandbox.scripts / ENTRY)], **env)


@pytest.mark.parametrize("role", ["controller", "login", "worker"])
def test_each_role_succeeds_without_mounting_or_starting_slurm(sandbox: Sandbox, role: str) -> None:
    run = run_api(as_hyperpod_leaves_it(sandbox, role))
    assert run.returncode == 0, run.output
    assert f"SUCCESS: node configured as {role}" in run.output
    assert run.calls_to("mount") == []  # HyperPod mounted FSx
    assert run.slurm_restarts() == []  # HyperPod started Slurm
    assert not any(call and call[0] in ("mysql", "sacctmgr") for call in run.calls)  # HyperPod's accounting
    assert "FAILED" not in run.output


def test_the_steps_in_order(sandbox: Sandbox) -> None:
    run = run_api(as_hyperpod_leaves_it(sandbox, "worker"))
    assert re.findall(r"step '([a-z-]+)' (?:started|skipped)", run.log) == list(STEPS)


def test_controller_keeps_our_keys_in_hyperpods_slurm_conf(sandbox: Sandbox) -> None:
    run = run_api(as_hyperpod_leaves_it(sandbox, "controller", slurm_requeue_exit_codes=[75, 76]))
    assert run.returncode == 0, run.output
    conf = sandbox.path("opt/slurm/etc/slurm.conf").read_text()
    assert "JobRequeue=1" in conf.splitlines()
    assert "RequeueExit=75,76" in conf.splitlines()
    assert not any(line.startswith("AccountingStorage") for line in conf.splitlines())  # HyperPod's
    assert ["reconfigure"] in run.calls_to("scontrol")
    assert ["enable", "--now", "training-clusters-slurm-keys.path"] in run.calls_to("systemctl")


def test_second_run_changes_nothing(sandbox: Sandbox) -> None:
    as_hyperpod_leaves_it(sandbox, "controller")
    first = run_api(sandbox)
    assert first.returncode == 0, first.output
    before = sandbox.snapshot()
    second = run_api(sandbox)
    assert second.returncode == 0, second.output
    assert sandbox.snapshot() == before
    assert ["reconfigure"] not in second.calls_to("scontrol")  # nothing changed: no reconfigure


def test_ubuntu_s_home_stays_on_the_node_s_disk_beside_hyperpods_fsx(sandbox: Sandbox) -> None:
    """As with on_create.sh (test_lifecycle_runs.py): nothing of ``ubuntu``'s goes to FSx (issue 40)."""
    run = run_api(as_hyperpod_leaves_it(sandbox, "worker"))
    assert run.returncode == 0, run.output
    assert "step 'admin-home' done" in run.output
    assert run.calls_to("usermod") == [] and run.calls_to("ssh-keygen") == []
    assert not sandbox.path("fsx/ubuntu").exists()
    assert "home of ubuntu stays /home/ubuntu on this node's disk (nothing of ubuntu's is on FSx)" in run.log


def test_fsx_not_mounted_by_hyperpod_fails_the_node(sandbox: Sandbox) -> None:
    as_hyperpod_leaves_it(sandbox, "worker", fsx=False)
    run = run_api(sandbox)
    assert run.returncode == 1
    assert "/fsx is not mounted and writable after 3 checks" in run.output
    assert run.output.rstrip().endswith("FAILED step 'fsx-mounted' (exit 1)")


def test_without_fsx_its_steps_are_skipped(sandbox: Sandbox) -> None:
    run = run_api(as_hyperpod_leaves_it(sandbox, "worker", fsx=False, fsx_mount_dir=None))
    assert run.returncode == 0, run.output
    assert (
        "step 'fsx-mounted' skipped: no fsx_mount_dir in training_clusters.json: the cluster has no FSx"
        in run.output
    )


def test_a_slurm_conf_not_naming_this_controller_fails_slurm_keys(sandbox: Sandbox) -> None:
    """HyperPod's set-up did not leave the cluster's slurm.conf (the AMI's placeholder is still there)."""
    as_hyperpod_leaves_it(sandbox, "controller")
    sandbox.write("opt/slurm/etc/slurm.conf", AMI_PLACEHOLDER_SLURM_CONF)
    run = run_api(sandbox)
    assert run.returncode == 1
    assert run.output.rstrip().endswith("FAILED step 'slurm-keys' (exit 1)")


def test_slurm_not_up_fails_the_node(sandbox: Sandbox) -> None:
    run = run_api(as_hyperpod_leaves_it(sandbox, "worker"), STUB_CONTROLLER_DOWN="1")
    assert run.returncode == 1
    assert run.output.rstrip().endswith("FAILED step 'slurm-ready' (exit 1)")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"slurm_config": "legacy"},
            "training_clusters.json: slurm_config 'legacy' does not go with on_init_complete.sh (OnInitComplete): "
            "api runs on_init_complete.sh, legacy on_create.sh with provisioning_parameters.json",
        ),
        (
            {"slurm_config": "both"},
            "training_clusters.json: slurm_config must be api or legacy, got 'both'",
        ),
        (
            {"accounting": {"mode": "local"}},
            "training_clusters.json: accounting is HyperPod's with slurm_config api (its own slurmdbd), got "
            "{'mode': 'local'}",
        ),
        (
            {"controller_group": None},
            "training_clusters.json: controller_group is required: a name of letters, digits, '.', '_' or '-'",
        ),
    ],
)
def test_bad_settings_fail_the_preflight(sandbox: Sandbox, settings: dict[str, Any], message: str) -> None:
    run = run_api(as_hyperpod_leaves_it(sandbox, "worker", **settings))
    assert run.returncode == 2
    assert message in run.output
    assert run.output.rstrip().endswith("FAILED step 'preflight' (exit 2)")


def test_on_create_refuses_api_settings(sandbox: Sandbox) -> None:
    """The legacy entry point with API settings beside provisioning_parameters.json (a mixed upload)."""
    sandbox.write_settings({**sandbox.settings(), "slurm_config": "api"})
    run = sandbox.run()
    assert run.returncode == 2
    assert (
        "slurm_config 'api' does not go with on_create.sh (OnCreate): api runs on_init_complete.sh, legacy "
        "on_create.sh with provisioning_parameters.json" in run.output
    )
