"""Node set-up details: enroot scratch waits for the local NVMe, the shared home survives a failing
usermod --move-home, and our settings live in training_clusters.json beside HyperPod's parameters."""

from __future__ import annotations

import json

from tests.lifecycle.sandbox import Sandbox

ENROOT_CONF = "etc/enroot/enroot.conf"


# -- issue 18 item 5: container scratch waits for dlami-nvme.service ------------------------------


def test_enroot_waits_for_dlami_nvme_before_choosing_scratch(sandbox: Sandbox) -> None:
    # dlami-nvme.service mounts /opt/dlami/nvme while the lifecycle script already runs.
    run = sandbox.run(STUB_NVME="1", STUB_DLAMI_NVME_DELAY="2")

    assert run.returncode == 0, run.output
    assert run.log.count("waiting for dlami-nvme.service to mount local NVMe") == 2
    assert "dlami-nvme.service is active: local NVMe disks are mounted" in run.log
    conf = sandbox.path(ENROOT_CONF).read_text()
    assert "ENROOT_DATA_PATH       /opt/dlami/nvme/enroot/data/user-$(id -u)" in conf
    assert "ENROOT_TEMP_PATH       /opt/dlami/nvme/enroot/tmp/user-$(id -u)" in conf


def test_enroot_wait_is_bounded_and_says_where_scratch_went(sandbox: Sandbox) -> None:
    run = sandbox.run(STUB_NVME="1", STUB_DLAMI_NVME_DELAY="100")

    assert run.returncode == 0, run.output
    assert run.log.count("waiting for dlami-nvme.service") == 3  # TC_NVME_WAIT_ATTEMPTS=3
    assert "dlami-nvme.service not active after 15s (ActiveState=activating)" in run.log
    # the root disk, in a folder of root's (not /tmp, which every user may write)
    assert (
        "ENROOT_DATA_PATH       /var/lib/enroot/data/user-$(id -u)" in sandbox.path(ENROOT_CONF).read_text()
    )


def test_enroot_does_not_wait_for_a_failed_or_missing_dlami_nvme(sandbox: Sandbox) -> None:
    failed = sandbox.run(STUB_DLAMI_NVME_FAILS="1")
    sandbox.path("lib/systemd/system/dlami-nvme.service").unlink()
    missing = sandbox.run()

    assert failed.returncode == missing.returncode == 0, failed.output + missing.output
    assert "dlami-nvme.service failed (exit 1): container scratch may land on the root disk" in failed.log
    assert "no dlami-nvme.service on this AMI" in missing.log
    assert failed.calls_to("sleep") == missing.calls_to("sleep") == []


# -- issue 40: ubuntu's home off FSx; a failing repoint fails the step ------------------------------------


def test_a_home_that_cannot_be_repointed_fails_the_step_clearly(sandbox: Sandbox) -> None:
    (sandbox.state / "home.ubuntu").write_text("/fsx/ubuntu\n")  # as an earlier version left it

    run = sandbox.run(STUB_USERMOD_FAIL="1")

    assert run.returncode == 8
    assert run.output.count("FAILED step") == 1
    assert run.output.rstrip().endswith("FAILED step 'admin-home' (exit 8)")


# -- issue 18 item 6: our keys in a file of our own ---------------------------------------------


def test_our_settings_come_from_training_clusters_json(sandbox: Sandbox) -> None:
    sandbox.write_params(fsx_mount_dir="/lustre", enable_enroot_pyxis=False)
    params = json.loads((sandbox.scripts / "provisioning_parameters.json").read_text())

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert "fsx_mount_dir" not in params and "enable_enroot_pyxis" not in params
    assert " /lustre lustre " in sandbox.path("etc/fstab").read_text()
    assert "step 'enroot-pyxis' skipped: enable_enroot_pyxis is false" in run.log


def test_our_keys_in_provisioning_parameters_are_ignored_with_a_warning(sandbox: Sandbox) -> None:
    params_file = sandbox.scripts / "provisioning_parameters.json"
    params = json.loads(params_file.read_text())
    params_file.write_text(json.dumps({**params, "enable_enroot_pyxis": False}))

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert (
        "provisioning_parameters.json: enable_enroot_pyxis is ignored there: it belongs in training_clusters.json"
        in run.log
    )
    assert "step 'enroot-pyxis' started" in run.log  # the default, from training_clusters.json


def test_without_training_clusters_json_the_defaults_apply(sandbox: Sandbox) -> None:
    (sandbox.scripts / "training_clusters.json").unlink()

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    assert (
        "fsx_mount_dir=/fsx enable_enroot_pyxis=true enable_observability=false slurm_requeue_exit=75"
        in run.log
    )
