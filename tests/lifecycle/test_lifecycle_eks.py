"""HyperPod on EKS (``workload_manager: eks``): on_create.sh moves containerd's and the kubelet's data onto the
instance group's volume at /opt/sagemaker, loads the Lustre client for the FSx CSI driver, and runs none of the
Slurm steps.

The node is as AWS's reference EKS lifecycle (github.com/aws-samples/awsome-distributed-training,
1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/base-config) describes it: HyperPod mounts the group's
EBS volume at /opt/sagemaker (maybe after the script starts), and containerd and the kubelet already run with
their data under /var/lib.
"""

from __future__ import annotations

import json

import pytest

from tests.lifecycle.sandbox import Sandbox

EKS_PARAMS = {
    "version": "1.0.0",
    "workload_manager": "eks",
    "fsx_dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
    "fsx_mountname": "abcdefgh",
}
FSTAB_LINES = [
    "/opt/sagemaker/containerd /var/lib/containerd none bind,nofail 0 0",
    "/opt/sagemaker/kubelet /var/lib/kubelet none bind,nofail 0 0",
]


def eks_node(sandbox: Sandbox) -> Sandbox:
    """An EKS node: its parameters, the volume mounted, containerd and the kubelet running with data."""
    (sandbox.scripts / "provisioning_parameters.json").write_text(json.dumps(EKS_PARAMS))
    (sandbox.scripts / "training_clusters.json").write_text(json.dumps({"enable_enroot_pyxis": True}))
    sandbox.write("var/lib/containerd/io.containerd.content.v1.content/blob", "layer")
    sandbox.write("var/lib/kubelet/kubeconfig", "node credentials")
    (sandbox.state / "mounts").write_text(f"{sandbox.root}/opt/sagemaker\n")
    for unit in ("containerd", "kubelet"):
        (sandbox.state / f"unit.{unit}.service").write_text("active\n")
    sandbox.env["TC_EKS_VOLUME_WAIT_ATTEMPTS"] = "2"
    return sandbox


@pytest.fixture
def node(sandbox: Sandbox) -> Sandbox:
    return eks_node(sandbox)


def test_the_runtime_data_moves_onto_the_volume_with_the_runtime_stopped(node: Sandbox) -> None:
    run = node.run()

    assert run.returncode == 0, run.output
    systemctl = [call for call in run.calls_to("systemctl") if call[0] in ("stop", "start")]
    assert systemctl == [
        ["stop", "kubelet.service"],
        ["stop", "containerd.service"],
        ["start", "containerd.service"],
        ["start", "kubelet.service"],
    ]
    root = str(node.root)
    assert run.calls_to("mount") == [
        ["--bind", f"{root}/opt/sagemaker/containerd", f"{root}/var/lib/containerd"],
        ["--bind", f"{root}/opt/sagemaker/kubelet", f"{root}/var/lib/kubelet"],
    ]
    assert node.path("opt/sagemaker/containerd/io.containerd.content.v1.content/blob").read_text() == "layer"
    assert node.path("opt/sagemaker/kubelet/kubeconfig").read_text() == "node credentials"
    fstab = node.path("etc/fstab").read_text().splitlines()
    assert fstab[1:] == FSTAB_LINES
    assert run.calls_to("modprobe") == [["lnet"], ["lustre"]]
    assert "SUCCESS: node ready to join the EKS cluster" in run.log


def test_no_slurm_or_apt_step_runs_on_an_eks_node(node: Sandbox) -> None:
    run = node.run()

    assert run.returncode == 0, run.output
    assert run.calls_to("apt-get") == []
    slurm = [
        call
        for call in run.calls
        if call[0] in ("scontrol", "sacctmgr", "sinfo")
        or (call[0] == "systemctl" and any(unit.startswith(("slurm", "sackd")) for unit in call[1:]))
    ]
    assert slurm == []
    steps = [
        line.split("step '")[1].split("'")[0]
        for line in run.log.splitlines()
        if "started" in line and "step '" in line
    ]
    assert steps == [
        "eks-preflight",
        "volume",
        "stop-runtime",
        "move-containerd",
        "move-kubelet",
        "start-runtime",
        "lustre-client",
    ]


def test_a_second_run_changes_nothing(node: Sandbox) -> None:
    first = node.run()
    snapshot = node.snapshot()
    second = node.run()

    assert first.returncode == second.returncode == 0, second.output
    assert node.snapshot() == snapshot
    assert second.calls_to("mount") == []
    assert [c for c in second.calls_to("systemctl") if c[0] in ("stop", "start")] == []
    assert "nothing to stop" in second.log


def test_the_volume_is_waited_for_and_then_refused_with_a_reason(node: Sandbox) -> None:
    (node.state / "mounts").write_text("")
    run = node.run()

    assert run.returncode != 0
    assert run.log.count("waiting for HyperPod to mount the instance group's volume at /opt/sagemaker") == 2
    assert "give the instance group an EBS volume (InstanceStorageConfigs)" in run.log
    assert "FAILED step 'volume'" in run.log
    assert run.calls_to("mount") == []


def test_without_a_file_system_the_lustre_client_is_skipped(node: Sandbox) -> None:
    params = {k: v for k, v in EKS_PARAMS.items() if not k.startswith("fsx_")}
    (node.scripts / "provisioning_parameters.json").write_text(json.dumps(params))
    run = node.run()

    assert run.returncode == 0, run.output
    assert "step 'lustre-client' skipped: no fsx_dns_name in provisioning_parameters.json" in run.log
    assert run.calls_to("modprobe") == []


def test_a_node_without_the_lustre_client_fails_that_step(node: Sandbox) -> None:
    run = node.run(STUB_NO_LUSTRE="1")

    assert run.returncode != 0
    assert "the Lustre client modules are not on this AMI" in run.log
    assert "FAILED step 'lustre-client'" in run.log


def test_a_slurm_node_still_runs_the_slurm_steps(sandbox: Sandbox) -> None:
    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert "step 'eks-preflight'" not in run.log
    assert "step 'slurm-worker' started" in run.log
