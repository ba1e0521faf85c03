"""Prometheus node exporter and DCGM exporter, behind enable_observability (default off)."""

from __future__ import annotations

import pytest

from tests.lifecycle.sandbox import Run, Sandbox

NODE_EXPORTER = "prometheus-node-exporter"


def installed_packages(run: Run) -> list[str]:
    installs = [args for args in run.calls_to("apt-get") if "install" in args]
    return [arg for args in installs for arg in args if arg == NODE_EXPORTER]


def docker_runs(run: Run) -> list[list[str]]:
    return [args for args in run.calls_to("docker") if args[:1] == ["run"]]


@pytest.mark.parametrize(("role", "gpu"), [("worker", True), ("controller", False)])
def test_exporters_when_enabled(sandbox: Sandbox, role: str, gpu: bool) -> None:
    sandbox.write_params(enable_observability=True)

    run = sandbox.as_role(role).run(**({"STUB_GPU": "1"} if gpu else {}))

    assert run.returncode == 0, run.output
    assert installed_packages(run) == [NODE_EXPORTER]
    assert ["enable", NODE_EXPORTER] in run.calls_to("systemctl")
    assert ["restart", NODE_EXPORTER] in run.calls_to("systemctl")
    if gpu:
        [docker_run] = docker_runs(run)
        assert docker_run[:3] == ["run", "--detach", "--name"]
        assert {"--gpus", "all", "--net", "host"} <= set(docker_run)
        assert docker_run[-1].startswith("nvcr.io/nvidia/k8s/dcgm-exporter:")
    else:
        assert docker_runs(run) == []
        assert "no NVIDIA GPU on this node: DCGM exporter not needed" in run.log


def test_no_exporters_by_default(sandbox: Sandbox) -> None:
    run = sandbox.run(STUB_GPU="1")

    assert run.returncode == 0, run.output
    assert "step 'observability' skipped: enable_observability is false" in run.log
    assert installed_packages(run) == []
    assert NODE_EXPORTER not in run.started()
    assert run.calls_to("docker") == [] and run.calls_to("nvidia-smi") == []
