"""DCGM diagnostics jobs: where they appear, what they ask for, and their gate run in bash on dcgmi output.

The dcgmi samples follow the table ``dcgmi diag -r 2`` prints in NVIDIA's DCGM user guide (DCGM 3: one row per
test, ``Pass - All`` or ``Fail - GPU: 0``, a ``Warning`` row beneath a failure) and DCGM 4 (a result row per
GPU beneath a blank test cell).
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.lifecycle.sandbox import link_real_tools
from training_clusters import cli
from training_clusters.acceptance import acceptance_plan, write_jobs
from training_clusters.acceptance.dcgm import GPU_TAINT_KEY, check_dcgm_level
from training_clusters.catalog import lookup
from training_clusters.config import load_environment, parse_environment
from training_clusters.constructs.eks import cluster as eks_gpu
from training_clusters.model.releases import DCGM_IMAGE

REPO = Path(__file__).resolve().parents[2]

DCGM3_PASS = """Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 3.3.5                                          |
| Driver Version Detected   | 535.161.08                                     |
| GPU Device IDs Detected   | 2330,2330                                      |
|-----  Deployment  --------+------------------------------------------------|
| Denylist                  | Pass                                           |
| NVML Library              | Pass                                           |
| CUDA Main Library         | Pass                                           |
| Permissions and OS Blocks | Pass                                           |
| Persistence Mode          | Pass                                           |
| Environment Variables     | Pass                                           |
| Page Retirement/Row Remap | Pass                                           |
| Graphics Processes        | Pass                                           |
| Inforom                   | Skip                                           |
+-----  Integration  -------+------------------------------------------------+
| PCIe                      | Pass - All                                     |
+-----  Hardware  ----------+------------------------------------------------+
| GPU Memory                | Pass - All                                     |
+-----  Stress  ------------+------------------------------------------------+
+---------------------------+------------------------------------------------+
"""
DCGM3_FAIL = DCGM3_PASS.replace(
    "| GPU Memory                | Pass - All                                     |\n",
    "| GPU Memory                | Fail - GPU: 0                                  |\n"
    "| Warning                   | GPU 0 Error using CUDA API cudaMalloc          |\n",
)
DCGM4_PASS = """Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 4.3.1                                          |
|-----  Deployment  --------+------------------------------------------------|
| software                  | Pass                                           |
|                           | GPU0: Pass                                     |
+-----  Hardware  ----------+------------------------------------------------+
| memory                    | Pass                                           |
|                           | GPU0: Pass                                     |
+-----  Integration  -------+------------------------------------------------+
| pcie                      | Warn                                           |
|                           | GPU0: Warn                                     |
+---------------------------+------------------------------------------------+
"""
DCGM4_FAIL = DCGM4_PASS.replace(
    "| memory                    | Pass                                           |\n"
    "|                           | GPU0: Pass                                     |\n",
    "| memory                    | Pass                                           |\n"
    "|                           | GPU0: Fail                                     |\n",
)


def node_output(node: str, diag: str, status: int = 0) -> str:
    """What ``dcgm_node`` prints for one node."""
    lines = [f"DCGM[{node}] {line}" for line in diag.splitlines()]
    return "\n".join([*lines, f"DCGM[{node}] EXIT {status}"]) + "\n"


def _plan_files(stem: str, level: int = 2) -> dict[str, str]:
    config = load_environment(REPO / "environments" / f"{stem}.yaml")
    return {job.filename: job.content for job in acceptance_plan(config, stem, dcgm_level=level).jobs}


# --- where the jobs appear ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stem", "files"),
    [
        ("training-any", {"dcgm-diag-gpu.sbatch"}),
        ("hyperpod-team", {"dcgm-diag-gpu.sbatch"}),
        ("pcs-p5", {"dcgm-diag-gpu.sbatch"}),
        ("eks-gpu-sharing", {"dcgm-diag-gpu.yaml", "dcgm-diag-gpu-check.sh"}),
        ("eks-p5-efa", {"dcgm-diag-p5.yaml", "dcgm-diag-p5-check.sh"}),
        ("parallelcluster-c5n", set()),
        ("hyperpod-slurm", set()),
        ("pcs-c5n", set()),
    ],
)
def test_dcgm_jobs_only_where_there_are_gpus(stem: str, files: set[str]) -> None:
    assert {name for name in _plan_files(stem) if name.startswith("dcgm-")} == files


def test_sbatch_takes_every_node_of_the_partition_once() -> None:
    script = _plan_files("pcs-p5")["dcgm-diag-gpu.sbatch"]
    config = load_environment(REPO / "environments" / "pcs-p5.yaml")
    assert config.pcs is not None
    nodes = sum(g.max_count for g in config.pcs.compute_node_groups if lookup(g.instance_type).is_gpu)
    for directive in (f"--nodes={nodes}", "--ntasks-per-node=1", "--exclusive", "--partition=gpu"):
        assert f"#SBATCH {directive}\n" in script
    assert f"readonly EXPECTED_NODES={nodes}\n" in script
    assert "srun --ntasks-per-node=1" in script


@pytest.mark.parametrize(
    ("level", "seconds", "time"), [(2, 1200, "00:30:00"), (3, 3600, "01:10:00"), (4, 9000, "02:40:00")]
)
def test_level_sets_the_run_and_its_time(level: int, seconds: int, time: str) -> None:
    script = _plan_files("training-any", level)["dcgm-diag-gpu.sbatch"]
    assert f"readonly DCGM_LEVEL={level}\n" in script
    assert f"readonly DIAG_TIMEOUT_SECONDS={seconds}\n" in script
    assert f"#SBATCH --time={time}\n" in script


@pytest.mark.parametrize("level", [1, 5, 0])
def test_level_outside_2_to_4_is_refused(level: int) -> None:
    config = load_environment(REPO / "environments" / "training-any.yaml")
    with pytest.raises(ValueError, match=f"dcgm_level must be one of 2, 3, 4, got {level}"):
        acceptance_plan(config, "training-any", dcgm_level=level)
    with pytest.raises(ValueError):
        check_dcgm_level(level)


def test_cli_option_writes_the_level_and_refuses_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    environment = str(REPO / "environments" / "eks-gpu-monitoring.yaml")
    status = cli.main(
        ["acceptance", environment, "-d", str(tmp_path), "--dcgm-level", "4"], stdout=io.StringIO()
    )
    assert status == 0
    assert "dcgm_node 4 9000\n" in (tmp_path / "dcgm-diag-gpu.yaml").read_text()
    assert "readonly DCGM_LEVEL=4\n" in (tmp_path / "dcgm-diag-gpu-check.sh").read_text()
    refused = cli.main(
        ["acceptance", environment, "-d", str(tmp_path), "--dcgm-level", "5"], stdout=io.StringIO()
    )
    assert refused == 2
    assert "invalid choice: 5" in capsys.readouterr().err


def _job(stem: str, nodegroup: str) -> dict[str, Any]:
    return yaml.safe_load(_plan_files(stem)[f"dcgm-diag-{nodegroup}.yaml"])


@pytest.mark.parametrize(("stem", "nodegroup"), [("eks-p5-efa", "p5"), ("eks-gpu-monitoring", "gpu")])
def test_eks_job_runs_one_pod_per_node_with_all_its_gpus(stem: str, nodegroup: str) -> None:
    config = load_environment(REPO / "environments" / f"{stem}.yaml")
    assert config.eks is not None
    group = next(g for g in [*config.eks.efa_nodegroups, *config.eks.gpu_nodegroups] if g.name == nodegroup)
    job = _job(stem, nodegroup)
    spec = job["spec"]
    pod = spec["template"]["spec"]
    assert job["kind"] == "Job" and job["apiVersion"] == "batch/v1"
    assert spec["completions"] == spec["parallelism"] == group.size
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["nodeSelector"]["node.kubernetes.io/instance-type"] == group.instance_type
    assert {"key": eks_gpu.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    container = pod["containers"][0]
    assert container["resources"]["limits"] == {eks_gpu.GPU_TAINT_KEY: lookup(group.instance_type).gpu_count}
    assert container["image"] == DCGM_IMAGE
    assert container["command"][-1].rstrip().endswith("dcgm_node 2 1200")


def test_with_kueue_the_eks_job_goes_through_the_default_namespaces_local_queue() -> None:
    """Outside the queue it would hold the GPUs Kueue counts free, and a job admitted onto them would wait."""
    files = _plan_files("eks-p5-efa")
    job = yaml.safe_load(files["dcgm-diag-p5.yaml"])
    assert job["metadata"]["namespace"] == "default"
    assert job["metadata"]["labels"] == {
        "training-clusters/acceptance": "dcgm-diag-p5",
        "kueue.x-k8s.io/queue-name": "training",
    }
    assert job["spec"]["suspend"] is True  # Kueue starts it once all of it fits
    # the nodegroup's own nodes (its flavor), not any of the same instance type
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "training-clusters/nodegroup": "p5",
    }
    assert (
        "# Admitted by Kueue through LocalQueue default/training: it waits while"
        in files["dcgm-diag-p5.yaml"]
    )
    assert (
        "# Run:   kubectl apply -f dcgm-diag-p5.yaml && kubectl wait -n default --for=condition=complete "
        "--timeout=-1s job/dcgm-diag-p5\n"
    ) in files["dcgm-diag-p5.yaml"]
    assert (
        "# Usage: kubectl logs -n default -l job-name=dcgm-diag-p5 --tail=-1 --max-log-requests=3 | bash "
        "dcgm-diag-p5-check.sh\n"
    ) in files["dcgm-diag-p5-check.sh"]


def test_with_team_namespaces_only_the_eks_job_runs_in_the_first() -> None:
    document = yaml.safe_load((REPO / "environments" / "eks-gpu-monitoring.yaml").read_text())
    document["eks"]["queues"] = {"namespaces": ["vision", "speech"], "local_queue": "gpus"}
    plan = acceptance_plan(parse_environment(document), "x")
    (job,) = [yaml.safe_load(j.content) for j in plan.jobs if j.filename == "dcgm-diag-gpu.yaml"]
    assert (job["metadata"]["namespace"], job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]) == (
        "vision",
        "gpus",
    )


def test_without_kueue_the_eks_job_is_a_plain_job_in_kubectls_namespace() -> None:
    document = yaml.safe_load((REPO / "environments" / "eks-p5-efa.yaml").read_text())
    document["eks"].setdefault("addons", {})["kueue"] = False
    del document["eks"]["queues"]  # no queues without Kueue
    plan = acceptance_plan(parse_environment(document), "x")
    (job,) = [j for j in plan.jobs if j.filename == "dcgm-diag-p5.yaml"]
    manifest = yaml.safe_load(job.content)
    assert "namespace" not in manifest["metadata"] and "suspend" not in manifest["spec"]
    assert manifest["metadata"]["labels"] == {"training-clusters/acceptance": "dcgm-diag-p5"}
    assert "Kueue" not in job.content
    assert (
        "# Run:   kubectl apply -f dcgm-diag-p5.yaml && kubectl wait --for=condition=complete --timeout=-1s "
        "job/dcgm-diag-p5\n"
    ) in job.content


def test_gpu_key_is_the_constructs_taint_key() -> None:
    assert GPU_TAINT_KEY == eks_gpu.GPU_TAINT_KEY


def test_image_is_pinned() -> None:
    repository, _, tag = DCGM_IMAGE.rpartition(":")
    assert repository == "nvcr.io/nvidia/cloud-native/dcgm"
    assert tag[0].isdigit() and tag.endswith("-ubuntu22.04")


# --- the gate, in bash --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return link_real_tools(tmp_path_factory.mktemp("tools"))


def _bash(
    tmp_path: Path, tools: Path, *args: str | Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": f"{tmp_path / 'bin'}:{tools}", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    return subprocess.run(
        ["/bin/bash", *map(str, args)],
        cwd=tmp_path,
        env=environment,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _script(tmp_path: Path, stem: str, filename: str) -> Path:
    config = load_environment(REPO / "environments" / f"{stem}.yaml")
    job = next(job for job in acceptance_plan(config, stem).jobs if job.filename == filename)
    (tmp_path / "bin").mkdir(exist_ok=True)
    return write_jobs([job], tmp_path / "jobs")[0]


SBATCH = ("training-any", "dcgm-diag-gpu.sbatch")  # 2 nodes


@pytest.mark.parametrize("passing", [DCGM3_PASS, DCGM4_PASS])
def test_gate_passes_when_every_node_passes(tmp_path: Path, tools: Path, passing: str) -> None:
    output = tmp_path / "out.txt"
    output.write_text(node_output("gpu-st-1", passing) + node_output("gpu-st-2", passing))
    result = _bash(tmp_path, tools, _script(tmp_path, *SBATCH), "--check", output)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS dcgmi diag -r 2 on 2 node(s)" in result.stdout
    assert "FAILED" not in result.stdout


@pytest.mark.parametrize(("failing", "test"), [(DCGM3_FAIL, "'GPU Memory'"), (DCGM4_FAIL, "'memory'")])
def test_gate_names_the_node_and_the_failing_test(
    tmp_path: Path, tools: Path, failing: str, test: str
) -> None:
    output = tmp_path / "out.txt"
    output.write_text(node_output("gpu-st-1", DCGM3_PASS) + node_output("gpu-st-2", failing, 226))
    result = _bash(tmp_path, tools, _script(tmp_path, *SBATCH), "--check", output)
    assert result.returncode == 1, result.stdout + result.stderr
    failed = [line for line in result.stdout.splitlines() if "FAILED" in line]
    assert len(failed) == 1
    assert f"FAILED on node gpu-st-2: dcgmi diag -r 2: test {test} reports Fail." in failed[0]


def test_gate_fails_when_dcgmi_is_missing_and_says_how_to_install(tmp_path: Path, tools: Path) -> None:
    output = tmp_path / "out.txt"
    output.write_text(node_output("gpu-st-1", DCGM3_PASS) + "DCGM[gpu-st-2] MISSING dcgmi is not on PATH\n")
    result = _bash(tmp_path, tools, _script(tmp_path, *SBATCH), "--check", output)
    assert result.returncode == 1
    assert "FAILED on node gpu-st-2: dcgmi diag -r 2: dcgmi is not installed." in result.stdout
    assert "DLAMI" in result.stdout and "datacenter-gpu-manager" in result.stdout


@pytest.mark.parametrize(
    ("output", "verdict"),
    [
        (node_output("gpu-st-1", DCGM3_PASS), "FAILED 1 of 2 node(s) reported"),
        (
            node_output("gpu-st-1", DCGM3_PASS) + node_output("gpu-st-2", "Error: unable to connect", 255),
            "FAILED on node gpu-st-2: dcgmi diag -r 2: no test results in dcgmi diag output (exit 255)",
        ),
        (
            node_output("gpu-st-1", DCGM3_PASS) + node_output("gpu-st-2", DCGM3_PASS, 124),
            "FAILED on node gpu-st-2: dcgmi diag -r 2: dcgmi diag exited 124",
        ),
        (
            node_output("gpu-st-1", DCGM3_PASS) + "DCGM[gpu-st-2] NO-HOSTENGINE x\n",
            "FAILED on node gpu-st-2: dcgmi diag -r 2: the DCGM host engine (nv-hostengine) is not running",
        ),
    ],
)
def test_gate_fails_on_missing_or_incomplete_results(
    tmp_path: Path, tools: Path, output: str, verdict: str
) -> None:
    saved = tmp_path / "out.txt"
    saved.write_text(output)
    result = _bash(tmp_path, tools, _script(tmp_path, *SBATCH), "--check", saved)
    assert result.returncode == 1
    assert verdict in result.stdout


def test_eks_check_reads_the_pods_logs_from_stdin(tmp_path: Path, tools: Path) -> None:
    check = _script(tmp_path, "eks-gpu-monitoring", "dcgm-diag-gpu-check.sh")
    logs = node_output("ip-10-0-1-1.ec2.internal", DCGM4_PASS)
    passing = _bash(tmp_path, tools, check, stdin=logs + node_output("ip-10-0-1-2.ec2.internal", DCGM4_PASS))
    assert passing.returncode == 0, passing.stdout + passing.stderr
    failing = _bash(
        tmp_path, tools, check, stdin=logs + node_output("ip-10-0-1-2.ec2.internal", DCGM4_FAIL, 226)
    )
    assert failing.returncode == 1
    assert (
        "FAILED on node ip-10-0-1-2.ec2.internal: dcgmi diag -r 2: test 'memory' reports Fail"
        in failing.stdout
    )


# --- a whole run: stub srun (two nodes), dcgmi and nv-hostengine ---------------------------------------


def _stub(tmp_path: Path, name: str, body: str) -> None:
    path = tmp_path / "bin" / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def _run_sbatch(
    tmp_path: Path, tools: Path, *, dcgmi: bool, engine_up: bool, node_2: str
) -> subprocess.CompletedProcess[str]:
    script = _script(tmp_path, *SBATCH)
    (tmp_path / "bin" / "bash").symlink_to("/bin/bash")
    (tmp_path / "diag-node-a").write_text(DCGM3_PASS)
    (tmp_path / "diag-node-b").write_text(node_2)
    # srun: the command once per node, NODE_NAME set as the pod's would be (hostname -s on a real node)
    _stub(tmp_path, "srun", 'shift 2; for n in node-a node-b; do NODE_NAME=$n "$@"; done\n')
    _stub(tmp_path, "timeout", 'shift; exec "$@"\n')
    _stub(tmp_path, "sleep", "exit 0\n")
    _stub(tmp_path, "hostname", "echo stub\n")
    _stub(tmp_path, "nv-hostengine", f"touch {tmp_path}/engine-started\n")
    if dcgmi:
        ready = "" if engine_up else f"[[ -e {tmp_path}/engine-started ]] || exit 255\n"
        _stub(
            tmp_path,
            "dcgmi",
            ready + '[[ $1 == discovery ]] && exit 0\n[[ "$1 $2 $3" == "diag -r 2" ]] || exit 9\n'
            f'cat {tmp_path}/diag-"$NODE_NAME"\nif grep -q Fail {tmp_path}/diag-"$NODE_NAME"; then exit 226; fi\n',
        )
    return _bash(tmp_path, tools, script)


def test_full_run_passes_and_starts_the_host_engine(tmp_path: Path, tools: Path) -> None:
    result = _run_sbatch(tmp_path, tools, dcgmi=True, engine_up=False, node_2=DCGM3_PASS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "engine-started").exists()
    assert "PASS dcgmi diag -r 2 on 2 node(s)" in result.stdout


def test_full_run_fails_on_a_failing_node(tmp_path: Path, tools: Path) -> None:
    result = _run_sbatch(tmp_path, tools, dcgmi=True, engine_up=True, node_2=DCGM3_FAIL)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED on node node-b: dcgmi diag -r 2: test 'GPU Memory' reports Fail" in result.stdout


def test_full_run_without_dcgmi_fails_on_every_node(tmp_path: Path, tools: Path) -> None:
    result = _run_sbatch(tmp_path, tools, dcgmi=False, engine_up=True, node_2=DCGM3_PASS)
    assert result.returncode == 1
    assert "FAILED on node node-a: dcgmi diag -r 2: dcgmi is not installed" in result.stdout
    assert "FAILED on node node-b: dcgmi diag -r 2: dcgmi is not installed" in result.stdout
