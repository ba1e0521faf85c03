"""The MIG acceptance pod and its gate, run on what nvidia-smi -L prints in a MIG pod and elsewhere."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from training_clusters.acceptance import acceptance_plan
from training_clusters.acceptance.mig import mig_eks_jobs
from training_clusters.catalog import lookup
from training_clusters.config import load_environment
from training_clusters.model.options import MigStrategy

from ..conftest import ROOT

ONE_MIG = """GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f)
  MIG 1g.10gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)
"""
WHOLE_GPU = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f)\n"
OTHER_PROFILE = ONE_MIG.replace("1g.10gb", "1g.5gb ")
TWO_MIG = ONE_MIG + "  MIG 1g.10gb     Device  1: (UUID: MIG-d6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"


def _jobs(strategy: MigStrategy) -> dict[str, str]:
    jobs = mig_eks_jobs(
        nodegroup="notebooks",
        instance=lookup("p4d.24xlarge"),
        config_name="all-1g.10gb",
        profile="1g.10gb",
        strategy=strategy,
        labels={"team": "a"},
        environment="eks-mig",
    )
    return {job.filename: job.content for job in jobs}


@pytest.mark.parametrize(
    ("strategy", "resource"),
    [(MigStrategy.MIXED, "nvidia.com/mig-1g.10gb"), (MigStrategy.SINGLE, "nvidia.com/gpu")],
)
def test_the_pod_asks_for_one_instance_on_the_partitioned_nodegroup(
    strategy: MigStrategy, resource: str
) -> None:
    job = yaml.safe_load(_jobs(strategy)["mig-notebooks.yaml"])
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "p4d.24xlarge",
        "nvidia.com/mig.config": "all-1g.10gb",
        "team": "a",
    }
    (container,) = pod["containers"]
    assert container["command"] == ["nvidia-smi", "-L"]
    assert container["resources"] == {"limits": {resource: 1}}


@pytest.mark.parametrize(
    ("log", "status", "verdict"),
    [
        (
            ONE_MIG,
            0,
            "PASS MIG 1g.10gb (p4d.24xlarge, nodegroup notebooks): the pod sees one MIG 1g.10gb device",
        ),
        (WHOLE_GPU, 1, "it sees 0 MIG device(s), 0 of 1g.10gb"),
        (OTHER_PROFILE, 1, "it sees 1 MIG device(s), 0 of 1g.10gb"),
        (TWO_MIG, 1, "it sees 2 MIG device(s), 2 of 1g.10gb"),
        ("", 1, "it sees 0 MIG device(s), 0 of 1g.10gb"),
    ],
)
def test_the_gate_passes_one_instance_of_the_profile_only(
    tmp_path: Path, log: str, status: int, verdict: str
) -> None:
    script = tmp_path / "check.sh"
    script.write_text(_jobs(MigStrategy.MIXED)["mig-notebooks-check.sh"])
    done = subprocess.run(["bash", str(script)], input=log, capture_output=True, text=True, check=False)
    assert done.returncode == status, done.stdout + done.stderr
    assert verdict in done.stdout


def test_the_mig_environment_gets_the_mig_pod_instead_of_dcgm() -> None:
    plan = acceptance_plan(load_environment(ROOT / "environments" / "eks-mig.yaml"), "eks-mig")
    assert {job.filename for job in plan.jobs} == {"mig-notebooks.yaml", "mig-notebooks-check.sh"}
    assert "nodegroup notebooks: MIG-partitioned, so no DCGM diagnostics (whole GPUs only)" in plan.skipped
    # through the default namespace's LocalQueue, created suspended, on its own nodegroup's nodes
    (manifest,) = [yaml.safe_load(j.content) for j in plan.jobs if j.filename == "mig-notebooks.yaml"]
    assert (manifest["metadata"]["namespace"], manifest["metadata"]["labels"]) == (
        "default",
        {"kueue.x-k8s.io/queue-name": "training"},
    )
    assert manifest["spec"]["suspend"] is True
    assert manifest["spec"]["template"]["spec"]["nodeSelector"]["training-clusters/nodegroup"] == "notebooks"


def test_without_a_queue_the_mig_pod_is_a_plain_job() -> None:
    manifest = yaml.safe_load(_jobs(MigStrategy.MIXED)["mig-notebooks.yaml"])
    assert manifest["metadata"] == {"name": "mig-notebooks"}
    assert "suspend" not in manifest["spec"]
