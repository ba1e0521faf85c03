"""Containers on HyperPod nodes (issue 27): enroot keeps the host's devices (EFA), enroot's GPU hook finds
nvidia-container-cli on GPU workers, and Docker is recognised by what is there rather than by a package name.

What enroot needs is read from its own code (github.com/NVIDIA/enroot, v3.5.0): ``enroot.in`` loads
enroot.conf and unsets every ``ENROOT_*`` setting whose value is a "no" (``config::fini``);
``conf/hooks/10-devices.sh`` replaces the container's /dev with a minimal set when ``ENROOT_RESTRICT_DEV`` is
set, and ``99-mellanox.sh`` adds back only Mellanox devices, never EFA's /dev/infiniband/uverbs*;
``conf/hooks/98-nvidia.sh`` stops with "Command not found: nvidia-container-cli" for every image that sets
NVIDIA_VISIBLE_DEVICES (every CUDA image).
"""

from __future__ import annotations

import re

import pytest

from tests.lifecycle.sandbox import Run, Sandbox

ENROOT_CONF = "etc/enroot/enroot.conf"
#: The values enroot's config::fini takes for "no" (github.com/NVIDIA/enroot enroot.in, v3.5.0).
ENROOT_NO = re.compile(r"^(no?|N[oO]?|[fF](alse)?|FALSE)$")

NVIDIA_KEY_URL = "https://nvidia.github.io/libnvidia-container/gpgkey"
NVIDIA_LIST = "var/lib/training-clusters/apt/nvidia-container-toolkit.list"
NVIDIA_KEY = "/var/lib/training-clusters/apt/nvidia-container-toolkit.asc"
NVIDIA_PACKAGES = ["libnvidia-container-tools", "libnvidia-container1"]


def assert_failed_step(run: Run, step: str) -> None:
    assert run.returncode != 0, run.output
    assert run.output.count("FAILED step") == 1
    assert f"FAILED step '{step}'" in run.output.rstrip().splitlines()[-1]
    assert "SUCCESS" not in run.log


def errors(run: Run) -> list[str]:
    """The ERROR lines of a run, without their timestamp: the step's own line, then the FAILED line."""
    return [line.split(" ERROR ", 1)[1] for line in run.output.splitlines() if " ERROR " in line]


def installs(run: Run) -> list[list[str]]:
    return [args for args in run.calls_to("apt-get") if "install" in args]


def installed(sandbox: Sandbox, *packages: str) -> None:
    """dpkg reports PACKAGES installed (the stub's package database)."""
    with (sandbox.state / "installed").open("a") as database:
        database.writelines(f"{package}\n" for package in packages)


# -- item 2: enroot keeps the host's devices ------------------------------------------------------


def test_enroot_keeps_the_hosts_devices_so_containers_see_efa(sandbox: Sandbox) -> None:
    """As AWS's HyperPod reference (awsome-distributed-training, 1.architectures/5.sagemaker-hyperpod/
    LifecycleScripts/base-config/utils/enroot.conf) and ParallelCluster's cookbook (aws-parallelcluster-cookbook,
    cookbooks/aws-parallelcluster-platform/templates/enroot/enroot.conf.erb) both set it."""
    run = sandbox.run()

    assert run.returncode == 0, run.output
    lines = sandbox.path(ENROOT_CONF).read_text().splitlines()
    assert "ENROOT_RESTRICT_DEV    no" in lines
    [setting] = [line.split() for line in lines if line.startswith("ENROOT_RESTRICT_DEV")]
    assert ENROOT_NO.match(setting[1]), setting  # enroot unsets it: 10-devices.sh leaves /dev alone


# -- item 3: nvidia-container-cli for enroot's GPU hook -------------------------------------------


def test_a_gpu_worker_without_nvidia_container_cli_gets_it_from_nvidias_repository(sandbox: Sandbox) -> None:
    sandbox.remove_command("nvidia-container-cli")

    run = sandbox.run(STUB_GPU="1")

    assert run.returncode == 0, run.output
    assert (sandbox.bin / "nvidia-container-cli").exists()  # the package's command is there now
    assert any(args[-1] == NVIDIA_KEY_URL for args in run.calls_to("curl"))
    assert sandbox.path(NVIDIA_LIST).read_text() == (
        f"deb [arch=amd64 signed-by={NVIDIA_KEY}] https://nvidia.github.io/libnvidia-container/stable/deb/amd64 /\n"
    )
    source = [f"Dir::Etc::sourcelist={sandbox.path(NVIDIA_LIST)}", "Dir::Etc::sourceparts=-"]
    updates = [args for args in run.calls_to("apt-get") if "update" in args]
    assert [args for args in updates if set(source) <= set(args)]  # NVIDIA's source alone, short timeouts
    [install] = [args for args in installs(run) if "libnvidia-container-tools" in args]
    assert install[-2:] == NVIDIA_PACKAGES and set(source) <= set(install)
    # The source never joins sources.list.d: it cannot break a later apt-get update.
    assert list(sandbox.path("etc/apt/sources.list.d").iterdir()) == []
    assert run.log.index("nvidia-container-cli") < run.log.index(
        "training-clusters-enroot: wrote /etc/enroot/enroot.conf"
    )


def test_a_second_run_finds_nvidia_container_cli_and_installs_nothing(sandbox: Sandbox) -> None:
    sandbox.remove_command("nvidia-container-cli")
    first = sandbox.run(STUB_GPU="1")
    second = sandbox.run(STUB_GPU="1")

    assert first.returncode == second.returncode == 0, first.output + second.output
    assert [args for args in installs(first) if "libnvidia-container-tools" in args]
    assert [args for args in installs(second) if "libnvidia-container-tools" in args] == []
    assert not [args for args in second.calls_to("curl") if args[-1] == NVIDIA_KEY_URL]


@pytest.mark.parametrize(
    ("stub_env", "reason"),
    [
        (
            {"STUB_APT_BROKEN": "libnvidia-container"},
            "NVIDIA's container toolkit repository https://nvidia.github.io/libnvidia-container/stable/deb"
            " failed: HTTP 403 Forbidden from the repository (access denied or expired S3 signature)",
        ),
        (
            {"STUB_APT_MISSING": "libnvidia-container"},
            "apt-get could not install libnvidia-container-tools libnvidia-container1 from NVIDIA's container"
            " toolkit repository https://nvidia.github.io/libnvidia-container/stable/deb (exit 100)",
        ),
    ],
    ids=["repository-broken", "package-missing"],
)
def test_when_nvidia_container_cli_cannot_be_installed_the_step_fails_with_one_line(
    sandbox: Sandbox, stub_env: dict[str, str], reason: str
) -> None:
    sandbox.remove_command("nvidia-container-cli")

    run = sandbox.run(STUB_GPU="1", **stub_env)

    assert_failed_step(run, "enroot-pyxis")
    assert errors(run)[-2:] == [
        "[enroot-pyxis] this GPU worker has no nvidia-container-cli (libnvidia-container-tools), which enroot's"
        f" GPU hook 98-nvidia.sh needs for every CUDA image, and {reason}",
        "[enroot-pyxis] FAILED step 'enroot-pyxis' (exit 1)",
    ]
    assert list(sandbox.path("etc/apt/sources.list.d").iterdir()) == []


def test_a_gpu_worker_with_nvidia_container_cli_gets_nothing(sandbox: Sandbox) -> None:
    run = sandbox.run(STUB_GPU="1")

    assert run.returncode == 0, run.output
    assert "nvidia-container-cli is already installed" in run.log
    assert not [args for args in installs(run) if "libnvidia-container-tools" in args]
    assert not [args for args in run.calls_to("curl") if args[-1] == NVIDIA_KEY_URL]
    assert not sandbox.path(NVIDIA_LIST).exists()


@pytest.mark.parametrize(("role", "gpu"), [("worker", False), ("login", True), ("controller", True)])
def test_nodes_that_run_no_gpu_container_get_nothing(sandbox: Sandbox, role: str, gpu: bool) -> None:
    sandbox.remove_command("nvidia-container-cli")

    run = sandbox.as_role(role).run(**({"STUB_GPU": "1"} if gpu else {}))

    assert run.returncode == 0, run.output
    assert not [args for args in installs(run) if "libnvidia-container-tools" in args]
    assert not [args for args in run.calls_to("curl") if args[-1] == NVIDIA_KEY_URL]
    assert not sandbox.path(NVIDIA_LIST).exists()


# -- item 4: Docker is recognised by its command and engine, not by a package name ---------------


def docker_installs(run: Run) -> list[list[str]]:
    return [args for args in installs(run) if "docker.io" in args]


def test_docker_ce_is_not_installed_again(sandbox: Sandbox) -> None:
    sandbox.write_params(enable_docker=True)
    installed(sandbox, "docker-ce", "docker-ce-cli", "containerd.io")
    sandbox.add_command("dockerd")
    sandbox.write("lib/systemd/system/docker.service", "[Service]\nExecStart=/usr/bin/dockerd\n")

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert docker_installs(run) == []
    assert (
        f"Docker is already installed ({sandbox.bin}/docker, engine: dockerd at {sandbox.bin}/dockerd)"
        in run.log
    )


@pytest.mark.parametrize("engine", ["dockerd", "docker.service"])
def test_docker_from_another_package_is_recognised_by_its_command_and_engine(
    sandbox: Sandbox, engine: str
) -> None:
    """An AMI whose Docker is neither docker.io nor docker-ce (its own build, beside Docker's containerd.io):
    installing docker.io over it would replace containerd.io."""
    sandbox.write_params(enable_docker=True)
    installed(sandbox, "containerd.io", "ami-docker-engine")
    if engine == "dockerd":
        sandbox.add_command("dockerd")
    else:
        sandbox.write("etc/systemd/system/docker.service", "[Service]\nExecStart=/opt/docker/bin/dockerd\n")

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert docker_installs(run) == []
    assert "Docker is already installed" in run.log
    assert {"enable", "docker"} <= {arg for call in run.calls_to("systemctl") for arg in call}


def test_containerd_io_without_docker_fails_clearly_instead_of_being_replaced(sandbox: Sandbox) -> None:
    """docker.io depends on Ubuntu's containerd and runc (versioned); Docker's containerd.io provides both
    without a version and conflicts with them (github.com/docker/containerd-packaging debian/control), so
    apt would remove containerd.io to install docker.io."""
    sandbox.write_params(enable_docker=True)
    installed(sandbox, "containerd.io")
    sandbox.remove_command("docker")

    run = sandbox.run()

    assert_failed_step(run, "docker")
    assert docker_installs(run) == []
    assert errors(run)[-2:] == [
        "[docker] containerd.io is installed but no Docker (no docker command with dockerd or docker.service):"
        " docker.io from the Ubuntu archive would remove it (docker.io needs Ubuntu's containerd and runc, which"
        " containerd.io conflicts with); install Docker's docker-ce beside it, or remove containerd.io",
        "[docker] FAILED step 'docker' (exit 1)",
    ]


def test_a_node_without_docker_gets_docker_io(sandbox: Sandbox) -> None:
    sandbox.write_params(enable_docker=True)
    sandbox.remove_command("docker")

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert [args[-1] for args in docker_installs(run)] == ["docker.io"]
