"""Acceptance jobs: which files each environment gets, the expected figures, and the gates in bash.

No CDK here: the module is pure data plus bash. The bash gates run for real against canned OSU and
nccl-tests output, with a PATH holding only harmless tools (and, for full runs, a stub ``mpirun``).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import background
from tests.lifecycle.sandbox import link_real_tools, shellcheck_path
from training_clusters.acceptance import (
    AcceptanceJob,
    AcceptancePlan,
    Transport,
    acceptance_jobs,
    acceptance_plan,
    nccl_busbw_expectation,
    no_jobs_reason,
    osu_bw_expectation,
    osu_latency_expectation,
    write_jobs,
)
from training_clusters.catalog import all_instance_types, lookup
from training_clusters.config import EnvironmentConfig, load_environment, parse_environment
from training_clusters.workloads.nccl import MPIRUN
from training_clusters.workloads.scheduling import FlavorCapacity, mpi_runtime

REPO = Path(__file__).resolve().parents[1]
ENVIRONMENTS = REPO / "environments"

SLURM_CPU = {
    "osu-bw-efa-{p}.sbatch",
    "osu-bw-tcp-{p}.sbatch",
    "osu-latency-efa-{p}.sbatch",
    "osu-latency-tcp-{p}.sbatch",
}
SLURM_GPU = SLURM_CPU | {"nccl-tests-efa-{p}.sbatch", "nccl-tests-tcp-{p}.sbatch", "dcgm-diag-{p}.sbatch"}


def _slurm(names: set[str], partition: str) -> set[str]:
    return {name.format(p=partition) for name in names}


def _dcgm(nodegroup: str) -> set[str]:
    """The DCGM diagnostics Job of a GPU nodegroup and its gate."""
    return {f"dcgm-diag-{nodegroup}.yaml", f"dcgm-diag-{nodegroup}-check.sh"}


def _job_layer(nodegroup: str, *, efa: bool) -> set[str]:
    """The gang test of a GPU nodegroup and, on EFA, the NCCL TrainJob; each with its gate."""
    files = {f"gang-test-{nodegroup}.yaml", f"gang-test-{nodegroup}-check.sh"}
    if efa:
        files |= {f"nccl-trainjob-{nodegroup}.yaml", f"nccl-trainjob-{nodegroup}-check.sh"}
    return files


EXPECTED_FILES: dict[str, set[str]] = {
    "eks-mig": {"mig-notebooks.yaml", "mig-notebooks-check.sh"},
    "eks-g5-efa": {"nccl-tests-g5.yaml", "nccl-tests-g5-check.sh"} | _dcgm("g5") | _job_layer("g5", efa=True),
    "eks-gpu-monitoring": _dcgm("gpu") | _job_layer("gpu", efa=False),
    "eks-gpu-sharing": _dcgm("gpu") | _job_layer("gpu", efa=False),
    "eks-p5-capacity-block": {"nccl-tests-p5.yaml", "nccl-tests-p5-check.sh"}
    | _dcgm("p5")
    | _job_layer("p5", efa=True),
    "eks-p5-efa": {"nccl-tests-p5.yaml", "nccl-tests-p5-check.sh"} | _dcgm("p5") | _job_layer("p5", efa=True),
    "hyperpod-eks-autoscaling": {"nccl-tests-g5.yaml", "nccl-tests-g5-check.sh"}
    | {"nccl-tests-p4d.yaml", "nccl-tests-p4d-check.sh"}
    | _dcgm("g5")
    | _dcgm("p4d")
    | _job_layer("g5", efa=True)
    | _job_layer("p4d", efa=True),
    "hyperpod-eks-g5": {"nccl-tests-g5.yaml", "nccl-tests-g5-check.sh"}
    | _dcgm("g5")
    | _job_layer("g5", efa=True),
    "hyperpod-eks-p5": {"nccl-tests-p5.yaml", "nccl-tests-p5-check.sh"}
    | _dcgm("p5")
    | _job_layer("p5", efa=True),
    "hyperpod-eks-governance": {"nccl-tests-p4d.yaml", "nccl-tests-p4d-check.sh"}
    | _dcgm("p4d")
    | _job_layer("p4d", efa=True),
    "hyperpod-p5": _slurm(SLURM_GPU, "gpu"),
    "hyperpod-p5-training-plan": _slurm(SLURM_GPU, "gpu"),
    "hyperpod-slurm": set(),
    "network-storage": set(),
    "parallelcluster-c5n": _slurm(SLURM_CPU, "compute"),
    "parallelcluster-p5": _slurm(SLURM_GPU, "gpu"),
    "parallelcluster-p5-capacity-block": _slurm(SLURM_GPU, "gpu"),
    "parallelcluster-team": _slurm(SLURM_CPU, "compute"),
    "hyperpod-team": _slurm(SLURM_GPU, "gpu"),
    "pcs-c5n": _slurm(SLURM_CPU, "compute"),
    "pcs-p5": _slurm(SLURM_GPU, "gpu"),
    "training-any": _slurm(SLURM_GPU, "gpu"),
}

# osu_bw measured between two c5n.9xlarge in a cluster placement group (MB/s).
MEASURED_EFA_MBPS = 6130.0
MEASURED_TCP_MBPS = 1190.0


def _plan(stem: str) -> AcceptancePlan:
    return acceptance_plan(load_environment(ENVIRONMENTS / f"{stem}.yaml"), stem)


def _job(stem: str, filename: str) -> AcceptanceJob:
    return next(job for job in _plan(stem).jobs if job.filename == filename)


def _all_jobs() -> list[tuple[str, AcceptanceJob]]:
    return [(stem, job) for stem in sorted(EXPECTED_FILES) for job in _plan(stem).jobs]


# --- which jobs ------------------------------------------------------------------------------------


def test_every_shipped_environment_is_covered() -> None:
    assert {path.stem for path in ENVIRONMENTS.glob("*.yaml")} == set(EXPECTED_FILES)


@pytest.mark.parametrize("stem", sorted(EXPECTED_FILES))
def test_environment_gets_its_jobs(stem: str) -> None:
    config = load_environment(ENVIRONMENTS / f"{stem}.yaml")
    assert {job.filename for job in acceptance_jobs(config, stem)} == EXPECTED_FILES[stem]


@pytest.mark.parametrize(
    ("stem", "why"),
    [
        ("hyperpod-slurm", "partition dev: ml.c5.xlarge has no EFA"),
        ("network-storage", "no hyperpod, parallelcluster, eks, pcs, hyperpod_eks section"),
    ],
)
def test_environments_without_efa_say_why(stem: str, why: str) -> None:
    config = load_environment(ENVIRONMENTS / f"{stem}.yaml")
    reason = no_jobs_reason(config, stem)
    assert reason is not None and reason.startswith("nothing to verify: ")
    assert why in reason


@pytest.mark.parametrize("stem", ["eks-gpu-sharing", "eks-gpu-monitoring"])
def test_gpu_nodegroups_without_efa_get_dcgm_and_gang_only_and_say_why_no_nccl(stem: str) -> None:
    plan = _plan(stem)
    assert {job.filename for job in plan.jobs} == _dcgm("gpu") | _job_layer("gpu", efa=False)
    assert any("no efa_nodegroups" in line for line in plan.skipped)


def test_environments_with_jobs_have_no_reason() -> None:
    assert no_jobs_reason(load_environment(ENVIRONMENTS / "parallelcluster-c5n.yaml"), "x") is None


def test_descriptions_say_how_to_run() -> None:
    for _, job in _all_jobs():
        assert "\n" not in job.description and "\n" not in job.expected
        if job.filename.endswith(".sbatch"):
            assert job.description.endswith(f"sbatch {job.filename}")
        elif job.filename.endswith(".yaml"):
            assert f"kubectl apply -f {job.filename}" in job.description
        else:
            assert f"| bash {job.filename}" in job.description


def test_as_dict_is_plain_data() -> None:
    job = _job("parallelcluster-c5n", "osu-bw-efa-compute.sbatch")
    assert job.as_dict() == {
        "filename": job.filename,
        "content": job.content,
        "description": job.description,
        "expected": job.expected,
    }


# --- what the scripts contain ---------------------------------------------------------------------


def test_sbatch_scripts_ask_for_two_nodes_of_the_partition() -> None:
    content = _job("parallelcluster-c5n", "osu-bw-efa-compute.sbatch").content
    assert "#SBATCH --partition=compute\n" in content
    assert "#SBATCH --constraint=c5n\n" in content  # the compute resource's Slurm feature
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n" in content
    nccl = _job("parallelcluster-p5", "nccl-tests-efa-gpu.sbatch").content
    assert "#SBATCH --ntasks-per-node=8\n" in nccl
    assert "--constraint" not in _job("hyperpod-p5", "osu-bw-efa-gpu.sbatch").content


def test_efa_is_forced_and_tcp_bypasses_libfabric() -> None:
    for _, job in _all_jobs():
        content = job.content
        if job.filename.startswith("osu-") and "-efa-" in job.filename:
            assert "MPI_TRANSPORT=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include efa)" in content
            assert "FI_PROVIDER=efa" in content
        elif job.filename.startswith("osu-"):
            assert 'MPI_TRANSPORT=(--mca pml ob1 --mca btl "tcp,self")' in content
            assert "FI_PROVIDER=efa" not in content.split("# --- settings ---")[1]
        elif job.filename.startswith("nccl-tests-efa-"):
            assert "RANK_ENVIRONMENT=(NCCL_DEBUG=INFO FI_PROVIDER=efa" in content
        elif job.filename.startswith("nccl-tests-tcp-"):
            assert "RANK_ENVIRONMENT=(NCCL_DEBUG=INFO NCCL_NET=Socket)" in content


def test_every_sbatch_script_exports_ld_library_path_to_the_ranks() -> None:
    # every MPI job (the DCGM job runs no MPI: one srun task per node)
    scripts = [
        job
        for _, job in _all_jobs()
        if job.filename.endswith(".sbatch") and not job.filename.startswith("dcgm-")
    ]
    assert scripts
    for job in scripts:
        assert "MPI_EXPORTS=(-x LD_LIBRARY_PATH)" in job.content, job.filename


@pytest.mark.parametrize("stem", ["parallelcluster-c5n", "eks-g5-efa"])
def test_no_device_rdma_without_gpudirect_rdma(stem: str) -> None:
    for job in _plan(stem).jobs:
        assert "FI_EFA_USE_DEVICE_RDMA" not in job.content, job.filename


def test_device_rdma_where_the_catalogue_has_gpudirect_rdma() -> None:
    for name in ("osu-bw-efa-gpu.sbatch", "nccl-tests-efa-gpu.sbatch"):
        assert "FI_EFA_USE_DEVICE_RDMA=1" in _job("parallelcluster-p5", name).content
    assert "FI_EFA_USE_DEVICE_RDMA" not in _job("parallelcluster-p5", "nccl-tests-tcp-gpu.sbatch").content
    assert "FI_EFA_USE_DEVICE_RDMA" in _job("eks-p5-efa", "nccl-tests-p5.yaml").content


def test_benchmarks_are_built_from_pinned_checksummed_releases() -> None:
    osu = _job("parallelcluster-c5n", "osu-bw-efa-compute.sbatch").content
    assert "osu-micro-benchmarks-7.5.1.tar.gz" in osu
    assert "readonly OSU_SHA256=160d0d5e3c3cb022520ecb247e9875bb0973b1d3cadccd6c17624f8407c52e22" in osu
    assert "sha256sum --check" in osu
    nccl = _job("parallelcluster-p5", "nccl-tests-efa-gpu.sbatch").content
    assert "readonly NCCL_TESTS_URL=https://github.com/NVIDIA/nccl-tests/archive/v2.17.6.tar.gz" in nccl


def test_scripts_build_into_the_lustre_mount() -> None:
    assert "readonly SHARED_DIR=/shared\n" in _job("parallelcluster-c5n", "osu-bw-efa-compute.sbatch").content
    assert "readonly SHARED_DIR=/fsx\n" in _job("hyperpod-p5", "nccl-tests-efa-gpu.sbatch").content


def test_without_lustre_the_home_directory_holds_the_builds() -> None:
    document = yaml.safe_load((ENVIRONMENTS / "parallelcluster-c5n.yaml").read_text())
    document["storage"]["lustre"] = None
    jobs = acceptance_jobs(parse_environment(document), "x")
    assert "readonly SHARED_DIR=''\n" in jobs[0].content


def _shellcheck_every_script() -> tuple[list[Path], subprocess.CompletedProcess[str]]:
    directory = Path(tempfile.mkdtemp(prefix="acceptance-shellcheck-"))
    files = [
        path
        for stem in sorted(EXPECTED_FILES)
        for path in write_jobs(_plan(stem).jobs, directory / stem)
        if path.suffix in (".sbatch", ".sh")
    ]
    result = subprocess.run(
        [shellcheck_path(), "--severity=style", "--format=gcc", *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
    )
    shutil.rmtree(directory)
    return files, result


def test_shellcheck_clean(shellcheck: str) -> None:
    files, result = _SHELLCHECK.result()
    assert result.args[0] == shellcheck
    # every script each environment gets (the MPIJob YAML is not shell): none left out, none unexpected
    scripts = [
        name for names in EXPECTED_FILES.values() for name in names if name.endswith((".sbatch", ".sh"))
    ]
    assert len(files) == len(scripts) > 40
    assert result.returncode == 0, result.stdout + result.stderr


# --- the expected figures -------------------------------------------------------------------------


def test_c5n_9xlarge_figures_match_the_measured_ones() -> None:
    c5n = lookup("c5n.9xlarge")
    efa = osu_bw_expectation(c5n, Transport.EFA, placement_group=True)
    tcp = osu_bw_expectation(c5n, Transport.TCP, placement_group=True)
    assert (efa.expected, efa.limit) == (6250.0, 3125.0)  # 50 Gbit/s, one card
    assert (tcp.expected, tcp.limit) == (1250.0, 625.0)  # one flow in a placement group: 10 Gbit/s
    assert efa.expected is not None and tcp.expected is not None
    assert MEASURED_EFA_MBPS / efa.expected == pytest.approx(1, abs=0.05)
    assert MEASURED_TCP_MBPS / tcp.expected == pytest.approx(1, abs=0.05)
    assert efa.passes(MEASURED_EFA_MBPS) and tcp.passes(MEASURED_TCP_MBPS)
    assert not efa.passes(MEASURED_TCP_MBPS)  # a silent fallback to TCP fails the EFA gate


def test_efa_gate_catches_a_fallback_to_tcp_on_every_efa_type() -> None:
    for instance in all_instance_types():
        if instance.efa_supported:
            efa = osu_bw_expectation(instance, Transport.EFA, placement_group=True)
            tcp = osu_bw_expectation(instance, Transport.TCP, placement_group=True)
            assert tcp.expected is not None and efa.limit > tcp.expected, instance.name


def test_c5n_expected_text_gives_both_figures() -> None:
    expected = _job("parallelcluster-c5n", "osu-bw-efa-compute.sbatch").expected
    assert expected.startswith("osu_bw peak bandwidth: about 6,250 MB/s; fails below 3,125 MB/s")
    assert "over TCP expect about 1,250 MB/s" in expected


def test_osu_bw_uses_one_card_of_multi_card_instances() -> None:
    p5 = osu_bw_expectation(lookup("p5.48xlarge"), Transport.EFA, placement_group=True)
    assert p5.expected == 12500.0  # 3,200 Gbit/s over 32 cards
    g5 = osu_bw_expectation(lookup("g5.8xlarge"), Transport.EFA, placement_group=True)
    assert g5.expected == 3125.0


def test_tcp_outside_a_placement_group_gets_five_gbit() -> None:
    p5 = lookup("p5.48xlarge")
    assert osu_bw_expectation(p5, Transport.TCP, placement_group=False).expected == 625.0
    assert "readonly EXPECTED=625\n" in _job("hyperpod-p5", "osu-bw-tcp-gpu.sbatch").content
    assert "readonly EXPECTED=1250\n" in _job("parallelcluster-p5", "osu-bw-tcp-gpu.sbatch").content
    # a Capacity Block leaves the placement group out: one TCP flow gets 5 Gbit/s, as on HyperPod
    block = _job("parallelcluster-p5-capacity-block", "osu-bw-tcp-gpu.sbatch").content
    assert "readonly EXPECTED=625\n" in block


def test_nccl_bus_bandwidth_is_a_fraction_of_the_efa_interfaces_in_use() -> None:
    g5 = nccl_busbw_expectation(lookup("g5.8xlarge"), Transport.EFA)
    assert (g5.expected, g5.limit) == (2.5, 1.25)
    assert g5.passes(3.13)  # EKS Blueprints' EFA pattern on 2 x g5.8xlarge
    p5 = nccl_busbw_expectation(lookup("p5.48xlarge"), Transport.EFA)
    assert (p5.expected, p5.limit) == (320.0, 160.0)
    half = nccl_busbw_expectation(lookup("p5.48xlarge"), Transport.EFA, efa_interfaces=16)
    assert half.expected == 160.0
    p4d = nccl_busbw_expectation(lookup("p4d.24xlarge"), Transport.EFA)
    assert p4d.passes(26.0)  # ParallelCluster's own threshold on 2 x p4d


def test_latency_gates() -> None:
    efa = osu_latency_expectation(Transport.EFA)
    assert (efa.expected, efa.limit, efa.higher_is_better) == (20.0, 40.0, False)
    assert efa.passes(17.2) and not efa.passes(45.0)
    tcp = osu_latency_expectation(Transport.TCP)
    assert tcp.expected is None and tcp.passes(60.0) and not tcp.passes(150.0)


# --- EKS --------------------------------------------------------------------------------------------


def _manifest(stem: str, nodegroup: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(_job(stem, f"nccl-tests-{nodegroup}.yaml").content)
    return document


@pytest.mark.parametrize(
    ("stem", "nodegroup", "efa", "expected", "minimum"),
    [("eks-g5-efa", "g5", 1, "2.5", "1.25"), ("eks-p5-efa", "p5", 32, "320", "160")],
)
def test_eks_job_is_the_mpijob_with_its_expected_bandwidth(
    stem: str, nodegroup: str, efa: int, expected: str, minimum: str
) -> None:
    job = _manifest(stem, nodegroup)
    assert (job["kind"], job["metadata"]["name"]) == ("MPIJob", f"nccl-tests-{nodegroup}")
    assert job["metadata"]["annotations"] == {
        "training-clusters/expected-busbw-GBps": expected,
        "training-clusters/minimum-busbw-GBps": minimum,
    }
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2
    assert worker["template"]["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == efa
    content = _job(stem, f"nccl-tests-{nodegroup}.yaml").content
    assert "&id" not in content  # no YAML anchors: every container spells out its env
    check = f"kubectl logs job/nccl-tests-{nodegroup}-launcher | bash nccl-tests-{nodegroup}-check.sh"
    assert f"# Check: {check}\n" in content


@pytest.mark.parametrize(
    ("stem", "group", "efa"), [("hyperpod-eks-g5", "g5", 1), ("hyperpod-eks-p5", "p5", 32)]
)
def test_hyperpod_eks_jobs_schedule_onto_hyperpods_ml_nodes(stem: str, group: str, efa: int) -> None:
    """HyperPod's nodes carry the ml. name as their instance-type label: the MPIJob's workers and the DCGM Job's
    pods select it (an EC2 name would leave them Pending), and tolerate the GPU taint the p5 group sets."""
    job = _manifest(stem, group)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    ml_type = f"ml.{'g5.8xlarge' if group == 'g5' else 'p5.48xlarge'}"
    assert worker["nodeSelector"] == {"node.kubernetes.io/instance-type": ml_type}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in worker["tolerations"]
    assert worker["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == efa
    dcgm = yaml.safe_load(_job(stem, f"dcgm-diag-{group}.yaml").content)
    selector = dcgm["spec"]["template"]["spec"]["nodeSelector"]
    assert selector == {
        "node.kubernetes.io/instance-type": ml_type,
        "training-clusters/pool": group,
        "training-clusters/nodegroup": group,  # what HyperPodEksCluster labels each group's nodes with
    }


def test_hyperpod_eks_gets_the_job_layer_tests_through_its_queue() -> None:
    """As on EKS: the NCCL TrainJob on the group's mpi runtime and the gang test, in default's LocalQueue."""
    (trainjob,) = _yaml_documents("hyperpod-eks-p5", "nccl-trainjob-p5.yaml")
    assert (trainjob["metadata"]["namespace"], trainjob["metadata"]["labels"]) == (
        "default",
        {"kueue.x-k8s.io/queue-name": "training"},
    )
    assert trainjob["spec"]["runtimeRef"] == {"name": "mpi-efa-p5"}
    assert (trainjob["spec"]["trainer"]["numNodes"], trainjob["spec"]["trainer"]["numProcPerNode"]) == (2, 8)
    first, second = _yaml_documents("hyperpod-eks-p5", "gang-test-p5.yaml")
    for job in (first, second):
        assert job["spec"]["parallelism"] == 16  # every GPU of the 2 x ml.p5.48xlarge group
        assert job["spec"]["template"]["spec"]["nodeSelector"] == {"training-clusters/nodegroup": "p5"}
    document = yaml.safe_load((ENVIRONMENTS / "hyperpod-eks-p5.yaml").read_text())
    document["hyperpod_eks"].setdefault("addons", {})["kueue"] = False
    del document["hyperpod_eks"]["queues"]  # no queues without Kueue
    plan = acceptance_plan(parse_environment(document), "x")
    assert not [job for job in plan.jobs if job.filename.startswith(("gang-", "nccl-trainjob-"))]
    assert (
        "hyperpod_eks: addons.kueue is off (no queues: no TrainJob NCCL test, no gang test)" in plan.skipped
    )
    document["hyperpod_eks"]["addons"] = {"kubeflow_trainer": False}
    plan = acceptance_plan(parse_environment(document), "x")
    assert {job.filename for job in plan.jobs if job.filename.startswith(("gang-", "nccl-trainjob-"))} == {
        "gang-test-p5.yaml",
        "gang-test-p5-check.sh",
    }


GOVERNED_LABELS = {
    "kueue.x-k8s.io/queue-name": "hyperpod-ns-research-localqueue",
    "kueue.x-k8s.io/priority-class": "experiment-priority",
}


def test_hyperpod_eks_under_task_governance_queues_every_job_in_a_teams_namespace() -> None:
    """Task governance's own Kueue: every job (the MPIJob too) in the first baseline team's namespace, through its
    LocalQueue, at the lowest-weight priority class (an acceptance test never preempts a team's work)."""
    stem = "hyperpod-eks-governance"
    (mpijob,) = _yaml_documents(stem, "nccl-tests-p4d.yaml")
    (trainjob,) = _yaml_documents(stem, "nccl-trainjob-p4d.yaml")
    (dcgm,) = _yaml_documents(stem, "dcgm-diag-p4d.yaml")
    first, second = _yaml_documents(stem, "gang-test-p4d.yaml")
    for job in (mpijob, trainjob, dcgm, first, second):
        assert job["metadata"]["namespace"] == "hyperpod-ns-research", job["metadata"]["name"]
        assert {
            k: v for k, v in job["metadata"]["labels"].items() if k.startswith("kueue.")
        } == GOVERNED_LABELS
    # no Topology of ours in HyperPod's Kueue: no topology annotation on any pod set
    worker = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    assert "annotations" not in worker.get("metadata", {})
    for job in (first, second):
        assert "annotations" not in job["spec"]["template"].get("metadata", {})
    assert (
        "kubectl apply -f nccl-tests-p4d.yaml && kubectl logs -n hyperpod-ns-research -f job/nccl-tests-p4d-launcher"
        in _job(stem, "nccl-tests-p4d.yaml").description
    )


def _gang_documents(document: dict[str, Any]) -> list[dict[str, Any]]:
    (job,) = [
        j
        for j in acceptance_plan(parse_environment(document), "x").jobs
        if j.filename == "gang-test-p4d.yaml"
    ]
    return [doc for doc in yaml.safe_load_all(job.content) if doc]


def test_task_governance_route_takes_a_baseline_team_and_the_lowest_class() -> None:
    document = yaml.safe_load((ENVIRONMENTS / "hyperpod-eks-governance.yaml").read_text())
    governance = document["hyperpod_eks"]["task_governance"]
    governance["teams"].reverse()  # inference (restricted) first: research still takes the tests
    gang, _ = _gang_documents(document)
    assert gang["metadata"]["namespace"] == "hyperpod-ns-research"
    for team in governance["teams"]:
        team["pod_security"] = "restricted"  # none at baseline: the first team's namespace
    governance["priority_classes"] = []  # no class: no priority label
    gang, _ = _gang_documents(document)
    assert gang["metadata"]["namespace"] == "hyperpod-ns-inference"
    assert gang["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "hyperpod-ns-inference-localqueue"}


def test_hyperpod_eks_group_of_one_node_is_skipped() -> None:
    document = yaml.safe_load((ENVIRONMENTS / "hyperpod-eks-g5.yaml").read_text())
    document["hyperpod_eks"]["instance_groups"][0]["count"] = 1
    plan = acceptance_plan(parse_environment(document), "x")
    assert {job.filename for job in plan.jobs} == _dcgm("g5") | _job_layer("g5", efa=False)  # gang test only
    assert plan.skipped == ("instance group g5: 1 node; NCCL over EFA needs 2",)


def test_eks_nodegroup_of_one_node_is_skipped() -> None:
    document = yaml.safe_load((ENVIRONMENTS / "eks-g5-efa.yaml").read_text())
    document["eks"]["efa_nodegroups"][0]["size"] = 1
    plan = acceptance_plan(parse_environment(document), "x")
    # DCGM runs on one node, and so does the gang test
    assert {job.filename for job in plan.jobs} == _dcgm("g5") | {"gang-test-g5.yaml", "gang-test-g5-check.sh"}
    assert plan.skipped == ("nodegroup g5: 1 node; NCCL over EFA needs 2",)


# --- partitions -------------------------------------------------------------------------------------


def _parallelcluster(queues: list[dict[str, Any]]) -> EnvironmentConfig:
    document = yaml.safe_load((ENVIRONMENTS / "parallelcluster-c5n.yaml").read_text())
    document["parallelcluster"]["queues"] = queues
    return parse_environment(document)


def test_queue_with_two_efa_types_gets_jobs_per_type() -> None:
    config = _parallelcluster(
        [
            {
                "name": "mixed",
                "compute_resources": [
                    {"name": "small", "instance_type": "c5n.9xlarge", "max_count": 2},
                    {"name": "big", "instance_type": "c5n.18xlarge", "max_count": 1},
                    {"name": "big2", "instance_type": "c5n.18xlarge", "max_count": 1},
                    {"name": "plain", "instance_type": "c5.xlarge", "max_count": 4},
                ],
            }
        ]
    )
    jobs = {job.filename: job for job in acceptance_jobs(config, "x")}
    assert set(jobs) == _slurm(SLURM_CPU, "mixed-c5n-9xlarge") | _slurm(SLURM_CPU, "mixed-c5n-18xlarge")
    assert "#SBATCH --constraint=big|big2\n" in jobs["osu-bw-efa-mixed-c5n-18xlarge.sbatch"].content
    assert "readonly EXPECTED=12500\n" in jobs["osu-bw-efa-mixed-c5n-18xlarge.sbatch"].content


def test_queues_that_cannot_run_a_two_node_test_are_explained() -> None:
    config = _parallelcluster(
        [
            {
                "name": "one",
                "compute_resources": [{"name": "c", "instance_type": "c5n.9xlarge", "max_count": 1}],
            },
            {"name": "cpu", "compute_resources": [{"name": "c", "instance_type": "c5.xlarge"}]},
        ]
    )
    plan = acceptance_plan(config, "x")
    assert plan.jobs == ()
    assert plan.skipped == (
        "queue one: c5n.9xlarge scales to 1 node; the tests need 2",
        "queue cpu: no compute resource with EFA",
    )


def test_hyperpod_partition_mixing_instance_types_is_skipped() -> None:
    document = yaml.safe_load((ENVIRONMENTS / "hyperpod-p5.yaml").read_text())
    document["hyperpod"]["instance_groups"].append(
        {"name": "more", "instance_type": "ml.p4d.24xlarge", "count": 2, "partition": "gpu"}
    )
    plan = acceptance_plan(parse_environment(document), "x")
    # DCGM runs one task per node of any GPU type: it still covers the partition
    assert [job.filename for job in plan.jobs] == ["dcgm-diag-gpu.sbatch"]
    assert "#SBATCH --nodes=" in plan.jobs[0].content
    assert plan.skipped[0].startswith("partition gpu: mixes ml.p4d.24xlarge, ml.p5.48xlarge")


# --- write_jobs -------------------------------------------------------------------------------------


def test_write_jobs_writes_executable_scripts(tmp_path: Path) -> None:
    jobs = _plan("eks-g5-efa").jobs
    paths = write_jobs(jobs, tmp_path / "out")
    assert [path.name for path in paths] == [
        "nccl-tests-g5.yaml",
        "nccl-tests-g5-check.sh",
        "dcgm-diag-g5.yaml",
        "dcgm-diag-g5-check.sh",
        "nccl-trainjob-g5.yaml",
        "nccl-trainjob-g5-check.sh",
        "gang-test-g5.yaml",
        "gang-test-g5-check.sh",
    ]
    assert paths[0].read_text() == jobs[0].content
    assert paths[1].stat().st_mode & stat.S_IXUSR
    assert not paths[0].stat().st_mode & stat.S_IXUSR


def test_write_jobs_refuses_duplicate_names(tmp_path: Path) -> None:
    job = AcceptanceJob("a.sh", "", "", "")
    with pytest.raises(ValueError, match=r"distinct file names, got a\.sh twice"):
        write_jobs([job, job], tmp_path)


def test_module_needs_no_cdk() -> None:
    code = "import sys, training_clusters.acceptance; print('aws_cdk' in sys.modules, 'jsii' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == "False False"


# --- the gates, in bash -----------------------------------------------------------------------------

OSU_BW_HEADER = "# OSU MPI Bandwidth Test v7.5.1\n# Datatype: MPI_CHAR.\n# Size      Bandwidth (MB/s)\n"


def osu_bw_output(peak: float) -> str:
    sizes = [1, 1024, 65536, 1048576, 2097152, 4194304]
    rows = [f"{size:<10d}{peak * (index + 1) / len(sizes):>18.2f}" for index, size in enumerate(sizes)]
    return OSU_BW_HEADER + "\n".join(rows) + "\n"


def osu_latency_output(at_8_bytes: float) -> str:
    rows = [
        (0, at_8_bytes - 0.1),
        (1, at_8_bytes),
        (8, at_8_bytes),
        (4096, at_8_bytes + 4),
        (4194304, 1659.9),
    ]
    body = "".join(f"{size:<10d}{value:>18.2f}\n" for size, value in rows)
    return "# OSU MPI Latency Test v7.5.1\n# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n" + body


# NCCL_DEBUG=INFO lines saying which network NCCL used, modeled on public logs: aws-ofi-nccl >= 1.14 on EFA
# ("NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)"), older plugins ("Selected Provider
# is efa (found 4 nics)", network "AWS Libfabric": NVIDIA/nccl#229, aws/aws-ofi-nccl#24), the plugin missing
# (NCCL falls back to its sockets) and the plugin on libfabric's tcp provider.
EFA_LOG = (
    "node-0:100:200 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.16.3\n"
    "node-0:100:200 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)\n"
    "node-0:100:200 [0] NCCL INFO Using network Libfabric\n"
    "node-0:100:200 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Libfabric/0/GDRDMA\n"
)
OLD_PLUGIN_EFA_LOG = (
    "node-0:100:200 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)\n"
    "node-0:100:200 [0] NCCL INFO Using network AWS Libfabric\n"
    "node-0:100:200 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/AWS Libfabric/0\n"
)
SOCKET_FALLBACK_LOG = (
    "node-0:100:200 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.\n"
    "node-0:100:200 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.1.11<0>\n"
    "node-0:100:200 [0] NCCL INFO Using network Socket\n"
    "node-0:100:200 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0\n"
)
LIBFABRIC_TCP_LOG = (
    "node-0:100:200 [0] NCCL INFO NET/OFI Selected provider is tcp, fabric is 10.1.0.0/16 (found 1 nics)\n"
    "node-0:100:200 [0] NCCL INFO Using network Libfabric\n"
    "node-0:100:200 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Libfabric/0\n"
)
PLUGIN_WITHOUT_PROVIDER_LOG = "node-0:100:200 [0] NCCL INFO Using network Libfabric\n"
# A rank on each node: one on EFA, one fell back to its sockets.
MIXED_LOG = EFA_LOG + SOCKET_FALLBACK_LOG.replace("node-0", "node-1")


def nccl_output(*, peak: float, ranks: int = 2, network_log: str = EFA_LOG) -> str:
    devices = "".join(
        f"#  Rank {rank:2d} Group  0 Pid {100 + rank} on node-{rank} device  0\n" for rank in range(ranks)
    )
    rows = [(8, 0.0), (4194304, peak * 0.75), (1073741824, peak)]
    data = "".join(
        f"{size:>12d}{size // 4:>14d}     float     sum      -1   1000.0  {bw:6.2f}  {bw:6.2f}      0"
        f"   1000.0  {bw:6.2f}  {bw - 0.01:6.2f}      0\n"
        for size, bw in rows
    )
    return (
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20\n"
        "#\n# Using devices\n"
        + devices
        + "#\n"
        + network_log
        + "#       size         count      type   redop"
        "    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
        + data
        + "# Avg bus bandwidth    : 1.15327\n"
    )


def fi_info_output(ranks: tuple[int, ...] = (0, 1)) -> str:
    """What ``mpirun --tag-output fi_info -p efa -t FI_EP_RDM`` prints when the given ranks have an EFA device
    (the layout of the EFA user guide's example; a rank without one prints libfabric's -61 error)."""
    lines = []
    for rank in (0, 1):
        if rank in ranks:
            entry = [
                "provider: efa",
                "    fabric: efa",
                f"    domain: rdmap0s{6 + rank}-rdm",
                "    version: 122.0",
                "    type: FI_EP_RDM",
                "    protocol: FI_PROTO_EFA",
            ]
        else:
            entry = ["fi_getinfo: -61 (No data available)"]
        lines += [f"[1,{rank}]<stdout>:{line}" for line in entry]
    return "\n".join(lines) + "\n"


@dataclass
class Bash:
    """Runs generated scripts with a PATH of harmless tools, plus stubs in ``bin``."""

    tmp: Path
    tools: Path

    def __post_init__(self) -> None:
        self.bin = self.tmp / "bin"
        self.bin.mkdir(exist_ok=True)

    def script(self, stem: str, filename: str) -> Path:
        return write_jobs([_job(stem, filename)], self.tmp / "jobs")[0]

    def text(self, name: str, text: str) -> Path:
        path = self.tmp / name
        path.write_text(text)
        return path

    def run(
        self, *args: str | Path, stdin: str | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        environment = {"PATH": f"{self.bin}:{self.tools}", "HOME": str(self.tmp), "LANG": "C.UTF-8", **env}
        return subprocess.run(
            [shutil.which("bash") or "/bin/bash", *map(str, args)],
            cwd=self.tmp,
            env=environment,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def check(self, stem: str, filename: str, output: str) -> subprocess.CompletedProcess[str]:
        return self.run(self.script(stem, filename), "--check", self.text("output.txt", output))


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return link_real_tools(tmp_path_factory.mktemp("tools"))


@pytest.fixture
def bash(tmp_path: Path, tools: Path) -> Bash:
    return Bash(tmp_path, tools)


C5N_EFA = ("parallelcluster-c5n", "osu-bw-efa-compute.sbatch")
C5N_TCP = ("parallelcluster-c5n", "osu-bw-tcp-compute.sbatch")


@pytest.mark.parametrize(
    ("script", "peak", "status", "verdict"),
    [
        (C5N_EFA, MEASURED_EFA_MBPS, 0, "PASS osu_bw peak bandwidth 6130.00 MB/s (minimum 3125 MB/s"),
        (C5N_EFA, MEASURED_TCP_MBPS, 1, "FAIL osu_bw peak bandwidth 1190.00 MB/s, minimum 3125 MB/s"),
        (C5N_TCP, MEASURED_TCP_MBPS, 0, "PASS osu_bw peak bandwidth 1190.00 MB/s (minimum 625 MB/s"),
        (C5N_TCP, 400.0, 1, "FAIL osu_bw peak bandwidth 400.00 MB/s, minimum 625 MB/s"),
    ],
)
def test_osu_bw_gate(bash: Bash, script: tuple[str, str], peak: float, status: int, verdict: str) -> None:
    evidence = fi_info_output() if script == C5N_EFA else ""
    result = bash.check(*script, evidence + osu_bw_output(peak))
    assert result.returncode == status, result.stdout + result.stderr
    assert verdict in result.stdout


def test_osu_bw_gate_reads_tagged_output_and_ignores_mpi_noise(bash: Bash) -> None:
    noisy = "".join(f"[1,0]<stdout>:{line}\n" for line in osu_bw_output(MEASURED_EFA_MBPS).splitlines())
    noisy = (
        "--------------------------------\nWARNING: There was an error initializing an OpenFabrics device.\n"
        + fi_info_output()
        + noisy
    )
    result = bash.check(*C5N_EFA, noisy)
    assert result.returncode == 0, result.stdout
    assert "peak bandwidth 6130.00 MB/s" in result.stdout


@pytest.mark.parametrize(
    ("evidence", "listed"),
    [
        ("", 0),
        (fi_info_output(ranks=(0,)), 1),
        (fi_info_output().replace("provider: efa", "provider: tcp"), 0),
    ],
    ids=["no fi_info", "one node", "tcp provider"],
)
def test_osu_efa_gate_fails_without_the_efa_provider_on_both_nodes(
    bash: Bash, evidence: str, listed: int
) -> None:
    # The measured EFA figure, but nothing in the output shows libfabric's efa provider on both nodes.
    result = bash.check(*C5N_EFA, evidence + osu_bw_output(MEASURED_EFA_MBPS))
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        f"FAIL 'fi_info -p efa -t FI_EP_RDM' lists libfabric's efa provider on {listed} of the 2 nodes"
        in result.stdout
    )
    latency = bash.check("parallelcluster-c5n", "osu-latency-efa-compute.sbatch", osu_latency_output(17.2))
    assert latency.returncode == 1 and "lists libfabric's efa provider on 0 of the 2 nodes" in latency.stdout


def test_osu_tcp_gate_needs_no_efa_evidence(bash: Bash) -> None:
    result = bash.check(*C5N_TCP, osu_bw_output(MEASURED_TCP_MBPS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_osu_gate_without_figures_says_so(bash: Bash) -> None:
    result = bash.check(*C5N_EFA, "mpirun: command not found\n")
    assert result.returncode == 2
    assert "FAIL no osu_bw peak bandwidth figures in" in result.stdout


@pytest.mark.parametrize(
    ("transport", "latency", "status"),
    [("efa", 17.2, 0), ("efa", 45.0, 1), ("tcp", 60.0, 0), ("tcp", 150.0, 1)],
)
def test_osu_latency_gate(bash: Bash, transport: str, latency: float, status: int) -> None:
    evidence = fi_info_output() if transport == "efa" else ""
    result = bash.check(
        "parallelcluster-c5n",
        f"osu-latency-{transport}-compute.sbatch",
        evidence + osu_latency_output(latency),
    )
    assert result.returncode == status, result.stdout + result.stderr
    assert f"osu_latency at 8 bytes {latency:.2f} us" in result.stdout


P5_NCCL_EFA = ("parallelcluster-p5", "nccl-tests-efa-gpu.sbatch")
P5_NCCL_TCP = ("parallelcluster-p5", "nccl-tests-tcp-gpu.sbatch")


@pytest.mark.parametrize(
    ("script", "output", "status", "verdict"),
    [
        (
            P5_NCCL_EFA,
            nccl_output(peak=355.1, ranks=16),
            0,
            "PASS all_reduce_perf peak bus bandwidth 355.10 GB/s",
        ),
        (
            P5_NCCL_EFA,
            nccl_output(peak=120.0, ranks=16),
            1,
            "FAIL all_reduce_perf peak bus bandwidth 120.00 GB/s",
        ),
        (
            P5_NCCL_EFA,
            nccl_output(peak=355.1, ranks=16, network_log=OLD_PLUGIN_EFA_LOG),
            0,
            "PASS all_reduce_perf peak bus bandwidth 355.10 GB/s",
        ),
        # Fell back to TCP with a healthy-looking figure: the log alone fails it.
        (
            P5_NCCL_EFA,
            nccl_output(peak=355.1, ranks=16, network_log=SOCKET_FALLBACK_LOG),
            1,
            "FAIL NCCL used the socket transport, not efa (peak 355.10 GB/s)",
        ),
        (
            P5_NCCL_EFA,
            nccl_output(peak=355.1, ranks=16, network_log=MIXED_LOG),
            1,
            "FAIL NCCL used the socket transport, not efa",
        ),
        (
            P5_NCCL_EFA,
            nccl_output(peak=355.1, ranks=16, network_log=LIBFABRIC_TCP_LOG),
            1,
            "FAIL NCCL used libfabric's tcp provider, not efa",
        ),
        (
            P5_NCCL_EFA,
            nccl_output(peak=355.1, ranks=16, network_log=PLUGIN_WITHOUT_PROVIDER_LOG),
            1,
            "FAIL NCCL used libfabric, but no 'NET/OFI Selected provider is' line names its provider",
        ),
        (
            P5_NCCL_EFA,
            nccl_output(peak=355.1, ranks=16, network_log=""),
            1,
            "FAIL NCCL's log names no network (no 'Using network' line; is NCCL_DEBUG=INFO set?)",
        ),
        (P5_NCCL_EFA, nccl_output(peak=355.1, ranks=2), 1, "2 rank(s) joined the test, not 16"),
        (
            P5_NCCL_TCP,
            nccl_output(peak=9.5, ranks=16, network_log=SOCKET_FALLBACK_LOG),
            0,
            "PASS all_reduce_perf peak bus",
        ),
        (P5_NCCL_TCP, nccl_output(peak=355.1, ranks=16), 1, "FAIL NCCL used the efa transport, not socket"),
        (
            P5_NCCL_TCP,
            nccl_output(peak=9.5, ranks=16, network_log=LIBFABRIC_TCP_LOG),
            1,
            "FAIL NCCL used libfabric's tcp provider, not socket",
        ),
    ],
)
def test_nccl_gate(bash: Bash, script: tuple[str, str], output: str, status: int, verdict: str) -> None:
    result = bash.check(*script, output)
    assert result.returncode == status, result.stdout + result.stderr
    assert verdict in result.stdout


def test_eks_check_reads_the_launcher_log_from_stdin(bash: Bash) -> None:
    check = bash.script("eks-g5-efa", "nccl-tests-g5-check.sh")
    tagged = "".join(f"[1,0]<stdout>:{line}\n" for line in nccl_output(peak=3.13).splitlines())
    result = bash.run(check, stdin=tagged)
    assert result.returncode == 0, result.stdout + result.stderr
    verdict = "PASS all_reduce_perf peak bus bandwidth 3.13 GB/s (minimum 1.25 GB/s; expected about 2.5 GB/s)"
    assert verdict in result.stdout
    over_tcp = bash.run(check, bash.text("log.txt", nccl_output(peak=3.13, network_log=SOCKET_FALLBACK_LOG)))
    assert over_tcp.returncode == 1
    assert "FAIL NCCL used the socket transport, not efa" in over_tcp.stdout


@pytest.mark.parametrize(
    ("network_log", "status"),
    [(EFA_LOG, 0), (OLD_PLUGIN_EFA_LOG, 0), (SOCKET_FALLBACK_LOG, 1), (LIBFABRIC_TCP_LOG, 1), ("", 1)],
    ids=["efa", "efa, older plugin", "socket fallback", "libfabric tcp", "no network lines"],
)
def test_eks_check_passes_only_on_an_efa_log(bash: Bash, network_log: str, status: int) -> None:
    # 3.13 GB/s clears the g5 figure: only NCCL's own log can tell a fallback from EFA.
    check = bash.script("eks-g5-efa", "nccl-tests-g5-check.sh")
    log = "".join(
        f"[1,0]<stdout>:{line}\n" for line in nccl_output(peak=3.13, network_log=network_log).splitlines()
    )
    result = bash.run(check, stdin=log)
    assert result.returncode == status, result.stdout + result.stderr
    assert (
        "RESULT all_reduce_perf over EFA (g5.8xlarge, nodegroup g5): " + ("PASS" if status == 0 else "FAIL")
    ) in (result.stdout)


# --- full runs, with a stub mpirun -----------------------------------------------------------------

STUB_MPIRUN = """#!/bin/bash
if [[ " $* " == *"/fi_info -p efa "* ]]; then
    printf '%s\\n' "$@" >"${STUB_FI_INFO_ARGS}"
    cat "${STUB_FI_INFO}"
    exit 0
fi
printf '%s\\n' "$@" >"${STUB_ARGS}"
printf 'FI_PROVIDER=%s\\nFI_EFA_USE_DEVICE_RDMA=%s\\n' "${FI_PROVIDER-unset}" "${FI_EFA_USE_DEVICE_RDMA-unset}" >"${STUB_ENV}"
cat "${STUB_OUTPUT}"
exit "${STUB_STATUS:-0}"
"""


def _fake_open_mpi(
    bash: Bash, output: str, status: int = 0, fi_info: str = fi_info_output()
) -> dict[str, str]:
    """A stub mpirun printing ``output`` (or, launching fi_info, ``fi_info``) and a stub EFA_HOME."""
    mpi = bash.tmp / "mpi"
    (mpi / "bin").mkdir(parents=True)
    mpirun = mpi / "bin" / "mpirun"
    mpirun.write_text(STUB_MPIRUN)
    mpirun.chmod(0o755)
    efa = bash.tmp / "efa"
    (efa / "bin").mkdir(parents=True)
    (efa / "bin" / "fi_info").write_text("#!/bin/bash\n")  # only launched through the stub mpirun
    (efa / "bin" / "fi_info").chmod(0o755)
    return {
        "MPI_HOME": str(mpi),
        "EFA_HOME": str(efa),
        "STUB_FI_INFO": str(bash.text("fi_info.txt", fi_info)),
        "STUB_FI_INFO_ARGS": str(bash.tmp / "fi_info_args.txt"),
        "TC_ACCEPTANCE_DIR": str(bash.tmp / "acceptance"),
        "STUB_ARGS": str(bash.tmp / "args.txt"),
        "STUB_ENV": str(bash.tmp / "env.txt"),
        "STUB_OUTPUT": str(bash.text("canned.txt", output)),
        "STUB_STATUS": str(status),
        "SLURM_JOB_NAME": "job",
        "SLURM_JOB_ID": "42",
    }


def _fake_osu(bash: Bash, name: str, acceptance_dir: Path | None = None) -> Path:
    prefix = (acceptance_dir or bash.tmp / "acceptance") / "osu-micro-benchmarks-7.5.1-openmpi"
    binary = prefix / "libexec/osu-micro-benchmarks/mpi/pt2pt" / name
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/bash\n")
    binary.chmod(0o755)
    return binary


def test_osu_efa_run_forces_efa_and_keeps_the_output(bash: Bash) -> None:
    env = _fake_open_mpi(bash, osu_bw_output(MEASURED_EFA_MBPS))
    binary = _fake_osu(bash, "osu_bw")
    result = bash.run(bash.script(*C5N_EFA), **env)
    assert result.returncode == 0, result.stdout + result.stderr
    args = (bash.tmp / "args.txt").read_text().splitlines()
    assert args[:4] == ["-np", "2", "--map-by", "ppr:1:node"]
    assert " ".join(args[4:]).startswith("--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include efa")
    assert args[-5:] == ["-x", "LD_LIBRARY_PATH", "-x", "FI_PROVIDER", str(binary)]
    assert (bash.tmp / "env.txt").read_text() == "FI_PROVIDER=efa\nFI_EFA_USE_DEVICE_RDMA=unset\n"
    fi_info = (bash.tmp / "fi_info_args.txt").read_text().splitlines()
    assert fi_info[:5] == ["-np", "2", "--map-by", "ppr:1:node", "--tag-output"]
    assert fi_info[-5:] == [f"{bash.tmp}/efa/bin/fi_info", "-p", "efa", "-t", "FI_EP_RDM"]
    kept = bash.tmp / "acceptance/results/job-42.txt"
    assert kept.read_text() == fi_info_output() + osu_bw_output(MEASURED_EFA_MBPS)  # evidence, then figures
    assert f"bash osu-bw-efa-compute.sbatch --check {kept}" in result.stderr
    again = bash.run(bash.script(*C5N_EFA), "--check", kept)
    assert again.returncode == 0, again.stdout


def test_osu_efa_run_stops_when_a_node_has_no_efa_provider(bash: Bash) -> None:
    env = _fake_open_mpi(bash, osu_bw_output(MEASURED_EFA_MBPS), fi_info=fi_info_output(ranks=(0,)))
    _fake_osu(bash, "osu_bw")
    result = bash.run(bash.script(*C5N_EFA), **env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "FAIL 'fi_info -p efa -t FI_EP_RDM' lists libfabric's efa provider on 1 of the 2 nodes"
        in result.stdout
    )
    assert not (bash.tmp / "args.txt").exists()  # the benchmark never ran


def test_osu_tcp_run_drops_fi_provider_and_uses_one_interface(bash: Bash) -> None:
    env = _fake_open_mpi(bash, osu_bw_output(MEASURED_TCP_MBPS))
    _fake_osu(bash, "osu_bw")
    result = bash.run(bash.script(*C5N_TCP), FI_PROVIDER="efa", **env)
    assert result.returncode == 0, result.stdout + result.stderr
    args = " ".join((bash.tmp / "args.txt").read_text().splitlines())
    assert "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_" in args
    assert "-x FI_PROVIDER" not in args
    assert (bash.tmp / "env.txt").read_text().startswith("FI_PROVIDER=unset\n")
    assert not (bash.tmp / "fi_info_args.txt").exists()  # no EFA evidence wanted over TCP


def test_failing_benchmark_fails_the_job(bash: Bash) -> None:
    env = _fake_open_mpi(bash, "No EFA device found\n", status=1)
    _fake_osu(bash, "osu_bw")
    result = bash.run(bash.script(*C5N_EFA), **env)
    assert result.returncode == 1
    assert "FAIL the benchmark exited with status 1" in result.stdout


def test_nccl_efa_run_launches_one_rank_per_gpu_with_rdma_on_p5(bash: Bash) -> None:
    env = _fake_open_mpi(bash, nccl_output(peak=355.1, ranks=16))
    test_binary = bash.tmp / "all_reduce_perf"
    test_binary.write_text("#!/bin/bash\n")
    test_binary.chmod(0o755)
    result = bash.run(bash.script(*P5_NCCL_EFA), NCCL_TESTS_BIN=str(test_binary), SLURM_NNODES="2", **env)
    assert result.returncode == 0, result.stdout + result.stderr
    args = " ".join((bash.tmp / "args.txt").read_text().splitlines())
    assert args.startswith("-np 16 --map-by ppr:8:node --bind-to none --mca pml ob1 --mca btl tcp,self")
    assert "-x LD_LIBRARY_PATH -x NCCL_DEBUG -x FI_PROVIDER -x FI_EFA_USE_DEVICE_RDMA" in args
    assert args.endswith(f"{test_binary} -b 8 -e 16G -f 2 -g 1 -c 1 -w 5 -n 20")
    assert (bash.tmp / "env.txt").read_text() == "FI_PROVIDER=efa\nFI_EFA_USE_DEVICE_RDMA=1\n"
    assert "RESULT all_reduce_perf over EFA (p5.48xlarge, gpu): PASS" in result.stdout


@pytest.mark.parametrize("writable", [True, False])
def test_builds_go_to_the_lustre_mount_else_home(bash: Bash, writable: bool) -> None:
    mount = bash.tmp / "fsx"
    if writable:
        mount.mkdir()
    else:
        mount.write_text("")  # not a directory: even root cannot create acceptance/ in it
    document = yaml.safe_load((ENVIRONMENTS / "parallelcluster-c5n.yaml").read_text())
    document["storage"]["lustre"]["mount_dir"] = str(mount)
    job = next(j for j in acceptance_jobs(parse_environment(document), "x") if j.filename == C5N_EFA[1])
    script = write_jobs([job], bash.tmp / "jobs")[0]
    env = _fake_open_mpi(bash, osu_bw_output(MEASURED_EFA_MBPS))
    del env["TC_ACCEPTANCE_DIR"]
    expected_dir = mount / "acceptance" if writable else bash.tmp / "acceptance"
    _fake_osu(bash, "osu_bw", expected_dir)
    result = bash.run(script, **env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (expected_dir / "results/job-42.txt").is_file()


def test_check_mode_never_touches_mpi(bash: Bash) -> None:
    # No mpirun, curl or MPI_HOME in the environment: --check only reads the file.
    result = bash.check(*P5_NCCL_EFA, nccl_output(peak=355.1, ranks=16))
    assert result.returncode == 0
    assert not os.path.exists(bash.tmp / "acceptance")


# Last, once every helper above is defined: started when this module is collected, so it runs
# alongside the rest of the suite.
_SHELLCHECK = background.start(_shellcheck_every_script)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda pcs: pcs["compute_node_groups"][0].update(max_count=1),
            "queue compute: c5n.9xlarge scales to 1 node; the tests need 2",
        ),
        (
            lambda pcs: pcs["compute_node_groups"][0].update(efa=False),
            "queue compute: no compute node group with EFA",
        ),
        (
            lambda pcs: (
                pcs["compute_node_groups"].append({"name": "big", "instance_type": "c5n.18xlarge"}),
                pcs["queues"][0].update(compute_node_groups=["compute", "big"]),
            ),
            "queue compute: mixes EFA types c5n.18xlarge, c5n.9xlarge and the tests cannot pick one; give each "
            "instance type its own queue",
        ),
    ],
)
def test_pcs_queues_the_tests_cannot_use_say_why(change: Any, reason: str) -> None:
    document = yaml.safe_load((ENVIRONMENTS / "pcs-c5n.yaml").read_text())
    change(document["pcs"])
    plan = acceptance_plan(parse_environment(document), "pcs-c5n")
    assert plan.jobs == () and reason in plan.skipped


def test_pcs_queues_default_to_one_per_node_group() -> None:
    document = yaml.safe_load((ENVIRONMENTS / "pcs-p5.yaml").read_text())
    del document["pcs"]["queues"]
    jobs = acceptance_jobs(parse_environment(document), "pcs-p5")
    assert {job.filename for job in jobs} == _slurm(SLURM_GPU, "gpu")
    assert all("AWS PCS partition gpu" in job.description for job in jobs)


# --- EKS job layer: the NCCL TrainJob through a LocalQueue, and the gang test ------------------------


def _yaml_documents(stem: str, filename: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(_job(stem, filename).content) if doc]


def test_the_mpijob_is_admitted_through_the_default_namespaces_local_queue() -> None:
    assert _manifest("eks-p5-efa", "p5")["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "training"}


def test_the_nccl_trainjob_runs_the_mpijobs_mpirun_on_the_nodegroups_runtime_through_the_queue() -> None:
    (job,) = _yaml_documents("eks-p5-efa", "nccl-trainjob-p5.yaml")
    assert (job["kind"], job["metadata"]["name"], job["metadata"]["namespace"]) == (
        "TrainJob",
        "nccl-trainjob-p5",
        "default",
    )
    assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "training"}
    assert job["spec"]["runtimeRef"] == {"name": "mpi-efa-p5"}
    trainer = job["spec"]["trainer"]
    # 2 nodes, one process per GPU: the TrainJob sets the slots of each node (Trainer 2.3.0's numProcPerNode)
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 8)
    mpijob = _manifest("eks-p5-efa", "p5")
    assert (
        trainer["command"]
        == mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    )
    assert job["metadata"]["annotations"]["training-clusters/minimum-busbw-GBps"] == "160"
    check = _job("eks-p5-efa", "nccl-trainjob-p5-check.sh").content
    assert (
        "# Usage: kubectl logs -n default job/nccl-trainjob-p5-launcher-0 | bash nccl-trainjob-p5-check.sh\n"
        in check
    )
    assert "readonly EXPECTED_RANKS=16\n" in check


PREFERRED_NETWORK_NODE = {"kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"}
REQUIRED_NETWORK_NODE = {"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3"}


@pytest.mark.parametrize(("stem", "group"), [("eks-p5-efa", "p5"), ("hyperpod-eks-p5", "p5")])
def test_p5_acceptance_pods_holding_gpus_ask_to_share_a_network_node(stem: str, group: str) -> None:
    specs = _manifest(stem, group)["spec"]["mpiReplicaSpecs"]
    assert specs["Worker"]["template"]["metadata"] == {"annotations": PREFERRED_NETWORK_NODE}
    assert "metadata" not in specs["Launcher"]["template"]  # the launcher holds no GPU
    for job in _yaml_documents(stem, f"gang-test-{group}.yaml"):
        assert job["spec"]["template"]["metadata"] == {"annotations": PREFERRED_NETWORK_NODE}


@pytest.mark.parametrize(("stem", "group"), [("eks-g5-efa", "g5"), ("hyperpod-eks-g5", "g5")])
def test_g5_acceptance_pods_ask_for_no_topology(stem: str, group: str) -> None:
    # g5 is not among the types EC2 instance topology describes: its flavor names no Topology
    plan = _plan(stem)
    for job in plan.jobs:
        if job.filename.endswith(".yaml"):
            assert "podset-" not in job.content, job.filename


def _eks_p5(queues: dict[str, Any]) -> AcceptancePlan:
    document = yaml.safe_load((ENVIRONMENTS / "eks-p5-efa.yaml").read_text())
    document["eks"]["queues"] = queues
    return acceptance_plan(parse_environment(document), "x")


def test_required_topology_is_asked_of_the_mpijob_and_the_gang_test_keeps_a_preference() -> None:
    plan = _eks_p5({"topology": "required"})
    mpijob = yaml.safe_load(_plan_job(plan, "nccl-tests-p5.yaml").content)
    assert mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"] == {
        "annotations": REQUIRED_NETWORK_NODE
    }
    gang = [d for d in yaml.safe_load_all(_plan_job(plan, "gang-test-p5.yaml").content) if d]
    assert [j["spec"]["template"]["metadata"] for j in gang] == [{"annotations": PREFERRED_NETWORK_NODE}] * 2


def test_topology_off_asks_nothing_and_an_unqueued_mpijob_asks_nothing() -> None:
    plan = _eks_p5({"topology": "off"})
    assert not [job.filename for job in plan.jobs if "podset-" in job.content]
    # the MPIJob outside any LocalQueue (default has none): Kueue does not admit it, so it asks for nothing
    plan = _eks_p5({"namespaces": ["vision"]})
    mpijob = yaml.safe_load(_plan_job(plan, "nccl-tests-p5.yaml").content)
    assert "metadata" not in mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]


def test_the_job_layer_jobs_run_in_the_first_team_namespace_without_default() -> None:
    document = yaml.safe_load((ENVIRONMENTS / "eks-g5-efa.yaml").read_text())
    document["eks"]["queues"] = {"namespaces": ["vision", "speech"], "local_queue": "gpus"}
    plan = acceptance_plan(parse_environment(document), "x")
    jobs = {job.filename: job for job in plan.jobs}
    (trainjob,) = [d for d in yaml.safe_load_all(jobs["nccl-trainjob-g5.yaml"].content) if d]
    assert (trainjob["metadata"]["namespace"], trainjob["metadata"]["labels"]) == (
        "vision",
        {"kueue.x-k8s.io/queue-name": "gpus"},
    )
    # the MPIJob runs in default, which has no LocalQueue now: not labelled, so Kueue leaves it alone
    mpijob = yaml.safe_load(jobs["nccl-tests-g5.yaml"].content)
    assert "labels" not in mpijob["metadata"]


def test_without_kueue_there_is_no_job_layer_test() -> None:
    document = yaml.safe_load((ENVIRONMENTS / "eks-g5-efa.yaml").read_text())
    document["eks"].setdefault("addons", {})["kueue"] = False
    plan = acceptance_plan(parse_environment(document), "x")
    assert not [job for job in plan.jobs if job.filename.startswith(("gang-", "nccl-trainjob-"))]
    assert "eks: addons.kueue is off (no queues: no TrainJob NCCL test, no gang test)" in plan.skipped
    assert "labels" not in yaml.safe_load(_plan_job(plan, "nccl-tests-g5.yaml").content)["metadata"]


def _plan_job(plan: Any, filename: str) -> Any:
    (job,) = [job for job in plan.jobs if job.filename == filename]
    return job


@pytest.mark.parametrize(
    ("stem", "nodegroup", "pods", "resource"),
    [("eks-p5-efa", "p5", 16, "nvidia.com/gpu"), ("eks-gpu-sharing", "gpu", 10, "nvidia.com/gpu")],
)
def test_the_gang_jobs_each_ask_for_every_gpu_the_nodegroup_advertises(
    stem: str, nodegroup: str, pods: int, resource: str
) -> None:
    first, second = _yaml_documents(stem, f"gang-test-{nodegroup}.yaml")
    assert [first["metadata"]["name"], second["metadata"]["name"]] == [
        f"gang-{nodegroup}-a",
        f"gang-{nodegroup}-b",
    ]
    for job in (first, second):
        assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "training"}
        assert job["spec"]["suspend"] is True  # Kueue starts it on admission
        assert job["spec"]["parallelism"] == job["spec"]["completions"] == pods
        pod = job["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"training-clusters/nodegroup": nodegroup}
        assert pod["containers"][0]["resources"] == {
            "limits": {resource: 1}
        }  # one shared GPU each on sharing


GANG_HEADER = "JOB          ADMITTED   PODS_READY\n"


@pytest.mark.parametrize(
    ("table", "status", "verdict"),
    [
        (
            GANG_HEADER + "gang-p5-a    True       True\ngang-p5-b    False      <none>\n",
            0,
            "PASS gang-p5-a runs whole, gang-p5-b waits whole (gang-p5-a: admitted True, pods ready True; "
            "gang-p5-b: admitted False, pods ready <none>)",
        ),
        (
            GANG_HEADER + "gang-p5-b    True       True\ngang-p5-a    <none>     <none>\n",
            0,
            "PASS gang-p5-b runs whole",
        ),
        (
            GANG_HEADER + "gang-p5-a    True       True\ngang-p5-b    True       False\n",
            1,
            "FAIL expected one job running whole and one waiting (gang-p5-a: admitted True, pods ready True; "
            "gang-p5-b: admitted True, pods ready False). Both admitted means",
        ),
        (
            GANG_HEADER + "gang-p5-a    False      <none>\ngang-p5-b    False      <none>\n",
            1,
            "FAIL expected one",
        ),
        (
            GANG_HEADER + "gang-p5-a    True       False\ngang-p5-b    False      <none>\n",
            1,
            "FAIL expected one",
        ),
        (
            GANG_HEADER + "gang-p5-a    True       True\n",
            1,
            "FAIL job gang-p5-b has no Kueue workload: is it applied, labelled with the queue, and does the "
            "LocalQueue exist?",
        ),
    ],
    ids=[
        "one runs, one waits",
        "the other way round",
        "both admitted",
        "none admitted",
        "not ready yet",
        "missing",
    ],
)
def test_gang_gate(bash: Bash, table: str, status: int, verdict: str) -> None:
    check = bash.script("eks-p5-efa", "gang-test-p5-check.sh")
    result = bash.run(check, stdin=table)
    assert result.returncode == status, result.stdout + result.stderr
    assert f"RESULT gang admission (p5, 16 nvidia.com/gpu): {verdict}" in result.stdout
    from_file = bash.run(check, bash.text("table.txt", table))
    assert from_file.returncode == status


def test_the_gang_gate_reads_the_columns_its_usage_asks_kubectl_for() -> None:
    check = _job("eks-p5-efa", "gang-test-p5-check.sh").content
    assert (
        "# Usage: kubectl get workloads.kueue.x-k8s.io -n default -o custom-columns='JOB:.metadata.ownerReferences[0].name,"
        'ADMITTED:.status.conditions[?(@.type=="Admitted")].status,'
        'PODS_READY:.status.conditions[?(@.type=="PodsReady")].status\' | bash gang-test-p5-check.sh\n'
    ) in check


@pytest.mark.parametrize(
    ("instance_type", "basis"),
    [
        (
            "p5.48xlarge",
            "one EFA device's line rate, 100 Gbit/s (3,200 Gbit/s = 32 EFA devices x 100 Gbit/s)",
        ),
        (
            "p5en.48xlarge",
            "one EFA device's line rate, 200 Gbit/s (3,200 Gbit/s = 16 EFA devices x 200 Gbit/s)",
        ),
        ("p4d.24xlarge", "one EFA device's line rate, 100 Gbit/s (400 Gbit/s = 4 EFA devices x 100 Gbit/s)"),
        ("c5n.9xlarge", "one EFA device's line rate, 50 Gbit/s (the instance's one network card)"),
    ],
)
def test_the_osu_bw_note_says_one_devices_rate_and_how_the_instances_splits_into_devices(
    instance_type: str, basis: str
) -> None:
    """Issue 39: p5's note called 3,200 Gbit/s, the instance's total, one EFA device's line rate."""
    from training_clusters.acceptance.expectations import Transport, osu_bw_expectation
    from training_clusters.catalog import lookup

    assert osu_bw_expectation(lookup(instance_type), Transport.EFA, placement_group=True).basis == basis


# --- EKS NCCL jobs: where the nodes sat in the network, next to the bandwidth -------------------------

#: Open MPI as the launcher meets it: ``-np N`` ranks; for the node-naming step (``/bin/sh -c SCRIPT``) each rank
#: runs SCRIPT the way sshd starts it in a worker container: in its own PID and mount namespaces whose first
#: process has the pod's environment (``NODE_NAME`` from the downward API) while the rank's own environment is
#: clean, and ``/etc/hostname`` holds the pod's name. The test step prints ``STUB_OUTPUT``. Output is tagged.
FAKE_OPEN_MPI = """#!/bin/bash
set -euo pipefail
np=0
while (($#)); do
    case $1 in
        -np) np=$2; shift 2 ;;
        /bin/sh) script=$3; break ;;
        /opt/nccl-tests/build/all_reduce_perf) sed 's/^/[1,0]<stdout>:/' "${STUB_OUTPUT}"; exit 0 ;;
        *) shift ;;
    esac
done
read -r -a nodes <<<"${STUB_NODES}"
for ((rank = 0; rank < np; rank++)); do
    printf 'nccl-tests-p5-worker-%s\\n' "${rank}" >"${STUB_DIR}/hostname-${rank}"
    unshare -Urpfm --mount-proc env -i NODE_NAME="${nodes[rank]}" PATH=/usr/bin:/bin /bin/sh -c \\
        'mount --bind "$1" /etc/hostname && env -i PATH=/usr/bin:/bin /bin/sh -c "$2"' \\
        sh "${STUB_DIR}/hostname-${rank}" "${script}" | sed "s/^/[1,${rank}]<stdout>:/"
done
"""

#: ``kubectl get nodes`` as the caller's kubectl answers: its arguments recorded, ``STUB_TABLE`` printed.
FAKE_KUBECTL = """#!/bin/bash
printf '%s\\n' "$@" >"${STUB_DIR}/kubectl-args"
cat "${STUB_TABLE}"
exit "${STUB_STATUS:-0}"
"""

LEVEL_COLUMNS = (
    "NODE:.metadata.name,"
    "network-node-layer-1:.metadata.labels.topology\\.k8s\\.aws/network-node-layer-1,"
    "network-node-layer-2:.metadata.labels.topology\\.k8s\\.aws/network-node-layer-2,"
    "network-node-layer-3:.metadata.labels.topology\\.k8s\\.aws/network-node-layer-3"
)


def _launcher_log(
    bash: Bash, stem: str, manifest: str, nodes: tuple[str, ...], *, peak: float = 355.1
) -> str:
    """What the launcher of ``manifest`` prints: its own command run by ``/bin/sh`` with Open MPI faked."""
    (job,) = _yaml_documents(stem, manifest)
    if job["kind"] == "MPIJob":
        command = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    else:
        command = job["spec"]["trainer"]["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    fake = bash.text("mpirun", FAKE_OPEN_MPI)
    fake.chmod(0o755)
    assert command[2].count(MPIRUN) == 2
    result = subprocess.run(
        ["/bin/sh", "-c", command[2].replace(MPIRUN, str(fake))],
        env={
            "PATH": "/usr/bin:/bin",
            "STUB_NODES": " ".join(nodes),
            "STUB_DIR": str(bash.tmp),
            "STUB_OUTPUT": str(bash.text("nccl.txt", nccl_output(peak=peak, ranks=16))),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _kubectl(bash: Bash, table: str) -> Path:
    kubectl = bash.bin / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    return bash.text("table.txt", table)


def test_each_p5_node_names_itself_from_the_downward_api_before_the_test(bash: Bash) -> None:
    log = _launcher_log(bash, "eks-p5-efa", "nccl-tests-p5.yaml", ("ip-10-1-0-5", "ip-10-1-0-9"))
    assert log.splitlines()[:2] == [
        "[1,0]<stdout>:training-clusters-node nccl-tests-p5-worker-0 ip-10-1-0-5",
        "[1,1]<stdout>:training-clusters-node nccl-tests-p5-worker-1 ip-10-1-0-9",
    ]
    # the workers have the name: the downward API's spec.nodeName
    (job,) = _yaml_documents("eks-p5-efa", "nccl-tests-p5.yaml")
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["env"][-1] == {
        "name": "NODE_NAME",
        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
    }


@pytest.mark.parametrize(
    ("table", "verdict"),
    [
        (
            "ip-10-1-0-5   nn-aaa   nn-bbb   nn-ccc\nip-10-1-0-9   nn-aaa   nn-bbb   nn-ccc\n",
            [
                "PLACEMENT all_reduce_perf over EFA (p5.48xlarge, nodegroup p5): node ip-10-1-0-5: nn-aaa > nn-bbb > nn-ccc",
                "PLACEMENT all_reduce_perf over EFA (p5.48xlarge, nodegroup p5): node ip-10-1-0-9: nn-aaa > nn-bbb > nn-ccc",
                "PLACEMENT all_reduce_perf over EFA (p5.48xlarge, nodegroup p5): all 2 nodes under one last-layer "
                "network node (nn-ccc)",
            ],
        ),
        (
            "ip-10-1-0-5   nn-aaa   nn-bbb   nn-ccc\nip-10-1-0-9   nn-aaa   nn-bbd   nn-ccd\n",
            [
                "PLACEMENT all_reduce_perf over EFA (p5.48xlarge, nodegroup p5): node ip-10-1-0-5: nn-aaa > nn-bbb > nn-ccc",
                "PLACEMENT all_reduce_perf over EFA (p5.48xlarge, nodegroup p5): node ip-10-1-0-9: nn-aaa > nn-bbd > nn-ccd",
                "PLACEMENT all_reduce_perf over EFA (p5.48xlarge, nodegroup p5): SCATTERED, 2 nodes under 2 "
                "last-layer network nodes (nn-ccc, nn-ccd): a low bandwidth may be the placement",
            ],
        ),
        (
            "ip-10-1-0-5   <none>   <none>   <none>\nip-10-1-0-9   <none>   <none>   <none>\n",
            [
                "PLACEMENT all_reduce_perf over EFA (p5.48xlarge, nodegroup p5): node ip-10-1-0-5: <none> > <none> > <none>",
                "PLACEMENT all_reduce_perf over EFA (p5.48xlarge, nodegroup p5): node ip-10-1-0-9: <none> > <none> > <none>",
                "PLACEMENT all_reduce_perf over EFA (p5.48xlarge, nodegroup p5): 2 of 2 nodes carry no network-node "
                "labels (EC2 instance topology does not describe their type)",
            ],
        ),
    ],
    ids=["shared", "scattered", "unlabelled"],
)
def test_the_eks_nccl_check_prints_each_nodes_network_path_after_the_bandwidth(
    bash: Bash, table: str, verdict: list[str]
) -> None:
    log = _launcher_log(bash, "eks-p5-efa", "nccl-tests-p5.yaml", ("ip-10-1-0-5", "ip-10-1-0-9"))
    stub = _kubectl(bash, table)
    check = bash.script("eks-p5-efa", "nccl-tests-p5-check.sh")
    result = bash.run(check, stdin=log, STUB_DIR=str(bash.tmp), STUB_TABLE=str(stub))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("RESULT all_reduce_perf over EFA (p5.48xlarge, nodegroup p5): PASS")
    assert lines[1:] == verdict
    # the caller's kubectl reads the nodes the log named, and only their network-node labels
    assert (bash.tmp / "kubectl-args").read_text().splitlines() == [
        "get",
        "nodes",
        "ip-10-1-0-5",
        "ip-10-1-0-9",
        "--no-headers",
        "-o",
        f"custom-columns={LEVEL_COLUMNS}",
    ]


def test_the_placement_never_changes_the_verdict(bash: Bash) -> None:
    log = _launcher_log(bash, "eks-p5-efa", "nccl-tests-p5.yaml", ("ip-10-1-0-5", "ip-10-1-0-9"))
    check = bash.script("eks-p5-efa", "nccl-tests-p5-check.sh")
    label = "PLACEMENT all_reduce_perf over EFA (p5.48xlarge, nodegroup p5)"
    # no kubectl on PATH
    result = bash.run(check, stdin=log)
    assert result.returncode == 0
    assert result.stdout.splitlines()[1:] == [
        f"{label}: nodes ip-10-1-0-5 ip-10-1-0-9; network nodes not read (no kubectl on PATH)"
    ]
    # kubectl refuses (no permission to get nodes)
    stub = _kubectl(bash, 'Error from server (Forbidden): nodes "ip-10-1-0-5" is forbidden\n')
    result = bash.run(check, stdin=log, STUB_DIR=str(bash.tmp), STUB_TABLE=str(stub), STUB_STATUS="1")
    assert result.returncode == 0
    assert result.stdout.splitlines()[1:] == [
        f"{label}: nodes ip-10-1-0-5 ip-10-1-0-9; network nodes not read (kubectl get nodes: Error from "
        'server (Forbidden): nodes "ip-10-1-0-5" is forbidden)'
    ]
    # a failing bandwidth stays a failure, with the placement after it
    slow = _launcher_log(bash, "eks-p5-efa", "nccl-tests-p5.yaml", ("ip-10-1-0-5", "ip-10-1-0-9"), peak=100.0)
    stub = _kubectl(bash, "ip-10-1-0-5   nn-aaa   nn-bbb   nn-ccc\nip-10-1-0-9   nn-aaa   nn-bbd   nn-ccd\n")
    result = bash.run(check, stdin=slow, STUB_DIR=str(bash.tmp), STUB_TABLE=str(stub))
    assert result.returncode == 1, result.stdout
    assert "FAIL" in result.stdout.splitlines()[0]
    assert result.stdout.splitlines()[-1].startswith(f"{label}: SCATTERED, 2 nodes under 2 last-layer")
    # a log without the node lines (an older job) says so
    result = bash.run(check, stdin=nccl_output(peak=355.1, ranks=16))
    assert result.stdout.splitlines()[1:] == [
        f"{label}: unknown, the log names no node (no 'training-clusters-node' line)"
    ]


def test_the_nccl_trainjob_names_its_nodes_as_the_mpijob_does(bash: Bash) -> None:
    log = _launcher_log(bash, "eks-p5-efa", "nccl-trainjob-p5.yaml", ("ip-10-1-0-5", "ip-10-1-0-9"))
    assert "[1,1]<stdout>:training-clusters-node nccl-tests-p5-worker-1 ip-10-1-0-9\n" in log
    check = _job("eks-p5-efa", "nccl-trainjob-p5-check.sh").content
    assert "readonly NODE_LINE_MARK=training-clusters-node\n" in check
    # the runtime's node pods have their node's name
    runtime = mpi_runtime(
        FlavorCapacity(name="p5", instance_type=lookup("p5.48xlarge"), nodes=2, efa_interfaces=32), image="x"
    )
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert node["containers"][0]["env"][-1]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_the_placement_asks_for_no_permission_in_the_cluster() -> None:
    """The caller's kubectl reads the nodes: no acceptance file makes a ServiceAccount, a Role or a binding."""
    for stem in ("eks-p5-efa", "eks-p5-capacity-block", "hyperpod-eks-p5", "eks-g5-efa"):
        for job in _plan(stem).jobs:
            if job.filename.endswith(".yaml"):
                kinds = {doc["kind"] for doc in yaml.safe_load_all(job.content) if doc}
                assert not kinds & {
                    "ServiceAccount",
                    "Role",
                    "ClusterRole",
                    "RoleBinding",
                    "ClusterRoleBinding",
                }


# --- Slurm NCCL jobs: where the nodes sat in the network ---------------------------------------------

STUB_SCONTROL = r"""#!/bin/bash
# scontrol: `show topology` prints $STUB_TOPOLOGY (exit $STUB_TOPOLOGY_STATUS); `show hostnames` expands comma
# lists with one [a-b,c] range per name, as Slurm's hostlists are written.
if [[ $1 == show && $2 == topology ]]; then
    cat "${STUB_TOPOLOGY}"
    exit "${STUB_TOPOLOGY_STATUS:-0}"
fi
[[ $1 == show && $2 == hostnames ]] || exit 2
expr=${3:-} depth=0 current=""
items=()
for ((i = 0; i < ${#expr}; i++)); do
    ch=${expr:i:1}
    if [[ $ch == "[" ]]; then depth=1; elif [[ $ch == "]" ]]; then depth=0; fi
    if [[ $ch == "," && $depth == 0 ]]; then items+=("$current"); current=""; else current+=$ch; fi
done
if [[ -n $current ]]; then items+=("$current"); fi
for item in "${items[@]}"; do
    if [[ $item =~ ^(.*)\[(.*)\]$ ]]; then
        prefix=${BASH_REMATCH[1]}
        IFS=, read -ra parts <<<"${BASH_REMATCH[2]}"
        for part in "${parts[@]}"; do
            if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
                for ((n = BASH_REMATCH[1]; n <= BASH_REMATCH[2]; n++)); do echo "$prefix$n"; done
            else
                echo "$prefix$part"
            fi
        done
    else
        echo "$item"
    fi
done
"""
#: `scontrol show topology` of the file training_clusters.node_scripts.parallelcluster.topology writes for four p5 nodes under two leaves and
#: two dynamic nodes EC2 has not placed (Slurm's line format: topology/tree's _print_topo_record).
SLURM_TOPOLOGY = (
    "SwitchName=ec2-network Level=3 LinkSpeed=1 Nodes=gpu-dy-p5-[1-2],gpu-st-p5-[1-4] Switches=nn-a,unplaced\n"
    "SwitchName=nn-a Level=2 LinkSpeed=1 Nodes=gpu-st-p5-[1-4] Switches=nn-b\n"
    "SwitchName=unplaced Level=0 LinkSpeed=1 Nodes=gpu-dy-p5-[1-2]\n"
    "SwitchName=nn-b Level=1 LinkSpeed=1 Nodes=gpu-st-p5-[1-4] Switches=nn-c,nn-d\n"
    "SwitchName=nn-c Level=0 LinkSpeed=1 Nodes=gpu-st-p5-[1-2]\n"
    "SwitchName=nn-d Level=0 LinkSpeed=1 Nodes=gpu-st-p5-[3-4]\n"
)
P5_LABEL = "PLACEMENT all_reduce_perf over EFA (p5.48xlarge, gpu)"


def _slurm_nccl_run(
    bash: Bash, nodelist: str, *, peak: float = 355.1, topology: str = SLURM_TOPOLOGY, status: int = 0,
    scontrol: bool = True,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = _fake_open_mpi(bash, nccl_output(peak=peak, ranks=16))
    test_binary = bash.tmp / "all_reduce_perf"
    test_binary.write_text("#!/bin/bash\n")
    test_binary.chmod(0o755)
    if scontrol:
        stub = bash.bin / "scontrol"
        stub.write_text(STUB_SCONTROL)
        stub.chmod(0o755)
    return bash.run(
        bash.script(*P5_NCCL_EFA),
        NCCL_TESTS_BIN=str(test_binary),
        SLURM_NNODES="2",
        SLURM_JOB_NODELIST=nodelist,
        STUB_TOPOLOGY=str(bash.text("topology.txt", topology)),
        STUB_TOPOLOGY_STATUS=str(status),
        **env,
    )


def _placement_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith("PLACEMENT ")]


def test_the_slurm_nccl_job_prints_each_nodes_switches_after_its_verdict(bash: Bash) -> None:
    result = _slurm_nccl_run(bash, "gpu-st-p5-[1-2]")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _placement_lines(result) == [
        f"{P5_LABEL}: node gpu-st-p5-1: ec2-network > nn-a > nn-b > nn-c",
        f"{P5_LABEL}: node gpu-st-p5-2: ec2-network > nn-a > nn-b > nn-c",
        f"{P5_LABEL}: all 2 nodes under one leaf switch (nn-c)",
    ]
    lines = result.stdout.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("RESULT "))
    assert verdict < lines.index(_placement_lines(result)[0])  # the bandwidth first, then the placement


def test_a_scattered_slurm_job_says_so_and_keeps_its_failing_verdict(bash: Bash) -> None:
    result = _slurm_nccl_run(bash, "gpu-st-p5-[2-3]", peak=40.0)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "RESULT all_reduce_perf over EFA (p5.48xlarge, gpu): FAIL" in result.stdout
    assert _placement_lines(result) == [
        f"{P5_LABEL}: node gpu-st-p5-2: ec2-network > nn-a > nn-b > nn-c",
        f"{P5_LABEL}: node gpu-st-p5-3: ec2-network > nn-a > nn-b > nn-d",
        f"{P5_LABEL}: SCATTERED, 2 nodes under 2 leaf switches (nn-c, nn-d): a low bandwidth may be the placement",
    ]


def test_nodes_ec2_had_not_placed_are_named_so(bash: Bash) -> None:
    result = _slurm_nccl_run(bash, "gpu-dy-p5-[1-2]")
    assert _placement_lines(result)[-1] == (
        f"{P5_LABEL}: all 2 nodes under unplaced: EC2 had not placed them when Slurm last read its topology"
    )


def test_a_node_under_no_switch_is_counted(bash: Bash) -> None:
    result = _slurm_nccl_run(bash, "gpu-st-p5-1,gpu-st-p5-9")
    assert _placement_lines(result) == [
        f"{P5_LABEL}: node gpu-st-p5-1: ec2-network > nn-a > nn-b > nn-c",
        f"{P5_LABEL}: node gpu-st-p5-9: under no switch",
        f"{P5_LABEL}: 1 of 2 nodes are under no switch of Slurm's topology",
    ]


def test_a_flat_slurm_says_it_has_no_switch_tree(bash: Bash) -> None:
    result = _slurm_nccl_run(bash, "gpu-st-p5-[1-2]", topology="No topology information available\n")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _placement_lines(result) == [
        f"{P5_LABEL}: nodes gpu-st-p5-1 gpu-st-p5-2; Slurm has no switch tree (scontrol show topology: No "
        "topology information available)"
    ]


def test_without_scontrol_the_placement_is_unknown(bash: Bash) -> None:
    result = _slurm_nccl_run(bash, "gpu-st-p5-[1-2]", scontrol=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _placement_lines(result) == [f"{P5_LABEL}: unknown, no scontrol on PATH or in /opt/slurm/bin"]


def test_without_a_node_list_the_placement_is_unknown(bash: Bash) -> None:
    result = _slurm_nccl_run(bash, "")
    assert _placement_lines(result) == [f"{P5_LABEL}: unknown, no SLURM_JOB_NODELIST (not run by Slurm)"]
