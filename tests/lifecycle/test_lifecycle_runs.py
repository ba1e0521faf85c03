"""Whole runs of on_create.sh: idempotency, failures, logging, parameters, FSx and the shared home."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.lifecycle.sandbox import FSX_DNS, FSX_MOUNTNAME, FSX_REPO_LIST, Sandbox

FSTAB_LINE = (
    f"{FSX_DNS}@tcp:/{FSX_MOUNTNAME} /fsx lustre "
    "defaults,noatime,flock,_netdev,x-systemd.automount,x-systemd.requires=network-online.target 0 0"
)
#: How each role starts its Slurm daemon (workers: without waiting for a controller still provisioning).
DAEMON_START = {
    "controller": ["restart", "slurmctld"],
    "login": ["restart", "sackd"],
    "worker": ["restart", "--no-block", "slurmd"],
}
ISO_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d (INFO |WARN |ERROR) \[[a-z_-]+\] ")


@pytest.mark.parametrize("role", ["controller", "login", "worker"])
def test_second_run_gives_the_same_node(sandbox: Sandbox, role: str) -> None:
    sandbox.add_apt_source("fsxlustreclientrepo.list", FSX_REPO_LIST)
    sandbox.write_params(enable_observability=True)
    sandbox.as_role(role)
    broken = {"STUB_APT_BROKEN": "fsx-lustre-client-repo", "STUB_GPU": "1"}

    first = sandbox.run(**broken)
    after_first = sandbox.snapshot()
    second = sandbox.run(**broken)

    assert first.returncode == 0, first.output
    assert second.returncode == 0, second.output
    assert sandbox.snapshot() == after_first
    assert sandbox.path("etc/fstab").read_text().splitlines().count(FSTAB_LINE) == 1
    backups = sorted(p.name for p in sandbox.path("var/backups/training-clusters/apt").iterdir())
    assert backups == ["changes.tsv", "fsxlustreclientrepo.list.disabled"]
    # Nothing is redone: no probe, mount, key, home move, download or build the second time.
    once_only = {"mount", "ssh-keygen", "usermod", "useradd", "curl", "make"}
    assert {call[0] for call in second.calls} & once_only == set()
    assert not any(args[:1] == ["run"] for args in second.calls_to("docker"))
    assert any(args[:1] == ["run"] for args in first.calls_to("docker"))
    assert not any("Dir::Etc::sourcelist" in " ".join(args) for args in second.calls_to("apt-get"))
    # Running daemons are left alone: none of Slurm's is restarted, so running jobs are not disturbed.
    assert second.slurm_restarts() == []
    assert first.slurm_restarts() == [DAEMON_START[role]]
    assert "unchanged" in second.log
    assert second.log.count("on_create.sh started") == 2  # the log file is appended to


def test_fstab_gets_one_lustre_line(sandbox: Sandbox) -> None:
    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert sandbox.path("etc/fstab").read_text() == (
        "LABEL=cloudimg-rootfs / ext4 discard,errors=remount-ro 0 1\n" + FSTAB_LINE + "\n"
    )
    [mount] = run.calls_to("mount")
    assert mount == ["-t", "lustre", "-o", "noatime,flock", "--", f"{FSX_DNS}@tcp:/{FSX_MOUNTNAME}",
                     str(sandbox.path("fsx"))]  # fmt: skip


def test_fstab_entry_for_the_mount_point_is_replaced_not_doubled(sandbox: Sandbox) -> None:
    old = "fs-old.fsx.us-east-1.amazonaws.com@tcp:/oldname /fsx lustre defaults 0 0\n"
    sandbox.write("etc/fstab", old)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert sandbox.path("etc/fstab").read_text() == FSTAB_LINE + "\n"
    assert sandbox.path("var/backups/training-clusters/fstab.orig").read_text() == old


def test_custom_mount_dir(sandbox: Sandbox) -> None:
    sandbox.write_params(fsx_mount_dir="/lustre/shared")
    (sandbox.state / "home.ubuntu").write_text("/lustre/shared/ubuntu\n")  # an earlier version's shared home

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert " /lustre/shared lustre " in sandbox.path("etc/fstab").read_text()
    assert run.calls_to("usermod") == [["--home", "/home/ubuntu", "ubuntu"]]  # judged against the mount dir
    assert not sandbox.path("lustre/shared/ubuntu").exists()


def test_failing_step_exits_non_zero_naming_the_step(sandbox: Sandbox) -> None:
    run = sandbox.run(STUB_MOUNT_FAIL="1")

    assert run.returncode == 32
    assert len(run.calls_to("mount")) == 2  # TC_MOUNT_ATTEMPTS=2 in the sandbox
    assert run.output.count("FAILED step") == 1
    assert run.output.rstrip().splitlines()[-1].endswith("FAILED step 'mount-fsx' (exit 32)")
    assert "FAILED step 'mount-fsx' (exit 32)" in run.log
    assert "mount.lustre: mount" in run.log  # the tool's own message is kept
    assert not run.calls_to("systemctl")  # later steps did not run
    assert "SUCCESS" not in run.log


def test_every_line_is_timestamped_in_the_log_and_on_stdout(sandbox: Sandbox) -> None:
    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert run.log == run.output
    ours = [line for line in run.log.splitlines() if ISO_LINE.match(line)]
    steps = re.findall(r"step '([a-z-]+)' started", run.log)
    assert steps == [
        "preflight", "detect-role", "apt-hotfix", "apt-update", "lustre-client", "mount-fsx",
        "admin-home", "enroot-pyxis", "slurm-worker",
    ]  # fmt: skip
    assert len(ours) > 30
    # Tool output passes through untouched, everything else is ours.
    assert all(ISO_LINE.match(line) or not line[:4].isdigit() for line in run.log.splitlines())


def test_ubuntu_s_home_and_keys_stay_on_the_node_s_disk(sandbox: Sandbox) -> None:
    """``ubuntu`` has passwordless sudo and is admitted to every node: nothing of it goes to FSx, where root on
    any client could plant a key (issue 40, Medium 5)."""
    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert run.calls_to("usermod") == [] and run.calls_to("useradd") == []
    assert run.calls_to("ssh-keygen") == []
    assert not sandbox.path("fsx/ubuntu").exists()
    assert "home of ubuntu stays /home/ubuntu on this node's disk (nothing of ubuntu's is on FSx)" in run.log
    assert (sandbox.state / "home.ubuntu").exists() is False  # never repointed


def test_a_home_an_earlier_version_put_on_fsx_is_brought_back_and_the_old_keys_named(
    sandbox: Sandbox,
) -> None:
    (sandbox.state / "home.ubuntu").write_text("/fsx/ubuntu\n")  # the node as the earlier scripts left it
    sandbox.write("fsx/ubuntu/.ssh/id_ed25519", "old private key\n")

    first = sandbox.run()
    second = sandbox.run()  # running twice gives the same node

    assert first.returncode == second.returncode == 0, first.output + second.output
    assert first.calls_to("usermod") == [["--home", "/home/ubuntu", "ubuntu"]]
    assert ["ubuntu:", str(sandbox.path("home/ubuntu"))] in first.calls_to("chown")
    assert oct(sandbox.path("home/ubuntu").stat().st_mode & 0o777) == "0o750"
    assert (sandbox.state / "home.ubuntu").read_text().strip() == "/home/ubuntu"
    assert (
        "home of ubuntu was /fsx/ubuntu on FSx; it is /home/ubuntu on this node's disk now. /fsx/ubuntu is left in "
        "place: it holds ubuntu's old SSH key pair, readable by root on every FSx client; delete it once every "
        "node has run this"
    ) in first.log
    assert sandbox.path("fsx/ubuntu/.ssh/id_ed25519").read_text() == "old private key\n"  # data is kept
    assert second.calls_to("usermod") == []
    assert sandbox.path("home/ubuntu/.bashrc").read_text() == "# the AMI's\n"


def test_a_link_where_ubuntu_s_local_home_goes_is_refused(sandbox: Sandbox) -> None:
    (sandbox.state / "home.ubuntu").write_text("/fsx/ubuntu\n")
    target = sandbox.write("fsx/elsewhere/.keep", "")
    home = sandbox.path("home/ubuntu")
    for child in home.iterdir():
        child.unlink()
    home.rmdir()
    home.symlink_to(target.parent)

    run = sandbox.run()

    assert run.returncode == 1
    assert run.output.rstrip().endswith("FAILED step 'admin-home' (exit 1)")
    assert "/home/ubuntu is a symbolic link: refusing to make it ubuntu's home" in run.log
    assert run.calls_to("usermod") == [] and run.calls_to("chown") == []


def test_user_is_created_when_the_ami_has_none(sandbox: Sandbox) -> None:
    run = sandbox.run(STUB_NO_USER="1")

    assert run.returncode == 0, run.output
    assert run.calls_to("useradd") == [
        ["--create-home", "--home-dir", "/home/ubuntu", "--shell", "/bin/bash", "ubuntu"]
    ]
    assert run.calls_to("usermod") == []


def test_without_fsx_the_fsx_steps_are_skipped(sandbox: Sandbox) -> None:
    sandbox.write_params(fsx_dns_name=None, fsx_mountname=None)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert run.calls_to("mount") == [] and run.calls_to("usermod") == []
    assert "step 'mount-fsx' skipped" in run.log
    assert (
        "ENROOT_CACHE_PATH      /var/lib/enroot/cache/user-$(id -u)"
        in sandbox.path("etc/enroot/enroot.conf").read_text()
    )


def test_enroot_and_pyxis_can_be_turned_off(sandbox: Sandbox) -> None:
    sandbox.write_params(enable_enroot_pyxis=False)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert "step 'enroot-pyxis' skipped: enable_enroot_pyxis is false" in run.log
    assert run.calls_to("curl") == [] and run.calls_to("make") == []
    assert not sandbox.path("opt/slurm/etc/plugstack.conf").exists()
    assert not sandbox.path("etc/enroot/enroot.conf").exists()


def test_enroot_uses_local_nvme_when_mounted(sandbox: Sandbox) -> None:
    sandbox.state.joinpath("mounts").write_text(str(sandbox.path("opt/dlami/nvme")) + "\n")

    run = sandbox.run()

    assert run.returncode == 0, run.output
    conf = sandbox.path("etc/enroot/enroot.conf").read_text()
    assert "ENROOT_RUNTIME_PATH    /opt/dlami/nvme/enroot/runtime/user-$(id -u)" in conf
    # the image cache is each user's own on the local disk, never on FSx (shared by every user)
    assert "ENROOT_CACHE_PATH      /opt/dlami/nvme/enroot/cache/user-$(id -u)" in conf


PARAMS, SETTINGS = "provisioning_parameters.json", "training_clusters.json"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"controller_group": None}, f"{PARAMS}: controller_group is required"),
        (
            {"enable_observability": "yes"},
            f"{SETTINGS}: enable_observability must be true or false, got 'yes'",
        ),
        (
            {"fsx_mount_dir": "fsx"},
            f"{SETTINGS}: fsx_mount_dir must be an absolute path such as '/fsx', got 'fsx'",
        ),
        ({"fsx_mountname": None}, f"{PARAMS}: fsx_dns_name and fsx_mountname must be given together"),
        ({"fsx_dns_name": "fs-1;reboot"}, f"{PARAMS}: fsx_dns_name must be a DNS name"),
        ({"workload_manager": "kubernetes"}, f"{PARAMS}: workload_manager must be 'slurm'"),
        ({"worker_groups": {"a": 1}}, f"{PARAMS}: worker_groups must be a list"),
        (
            {"worker_groups": [{"partition_name": "dev"}]},
            f"{PARAMS}: worker_groups[0].instance_group_name must be",
        ),
        (
            {"slurm_requeue_exit_codes": [300]},
            f"{SETTINGS}: slurm_requeue_exit_codes must be a list of exit codes 0-255",
        ),
        (
            {"enable_observabilty": True},
            f"{SETTINGS}: unknown key 'enable_observabilty': allowed are fsx_mount_dir",
        ),
        (
            {"extra_steps": [{"name": "a b", "script": "user_steps/x.sh"}]},
            f"{SETTINGS}: extra_steps[0].name must be 1-63 letters, digits, '-' or '_', got 'a b'",
        ),
        (
            {"extra_steps": [{"name": "x", "script": "../x.sh"}]},
            f"{SETTINGS}: extra_steps[0].script must be a path relative to the lifecycle folder, got '../x.sh'",
        ),
        (
            {"extra_steps": [{"name": "x", "script": "user_steps/missing.sh"}]},
            f"{SETTINGS}: extra_steps[0].script 'user_steps/missing.sh' is not in the lifecycle folder",
        ),
    ],
)
def test_bad_parameters_fail_clearly(sandbox: Sandbox, overrides: dict[str, Any], message: str) -> None:
    sandbox.write_params(**overrides)

    run = sandbox.run()

    assert run.returncode == 2
    assert message in run.output
    assert run.output.rstrip().endswith("FAILED step 'preflight' (exit 2)")
    assert run.calls == []


def test_missing_resource_config_fails_clearly(sandbox: Sandbox) -> None:
    sandbox.path("opt/ml/config/resource_config.json").unlink()

    run = sandbox.run()

    assert run.returncode == 1
    assert "HyperPod resource config not found at" in run.output
    assert run.output.rstrip().endswith("FAILED step 'preflight' (exit 1)")


def test_resource_config_path_from_hyperpod_variable(sandbox: Sandbox) -> None:
    moved = sandbox.tmp / "elsewhere.json"
    sandbox.path("opt/ml/config/resource_config.json").rename(moved)

    run = sandbox.run(SAGEMAKER_RESOURCE_CONFIG_PATH=str(moved))

    assert run.returncode == 0, run.output
