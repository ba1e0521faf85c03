"""Every shipped environment's stack prints what to do once deployed (its ``NextSteps`` output, the last one
`cdk deploy` shows), naming only outputs the template has; a step naming a missing output fails at synth."""

from __future__ import annotations

import re
from pathlib import Path

import aws_cdk as cdk
import pytest

from training_clusters.acceptance import acceptance_plan
from training_clusters.config import load_environment
from training_clusters.environments import shown_path
from training_clusters.stacks.base import TrainingEnvironmentStack, kubernetes_acceptance_step

from ..conftest import ROOT, EnvironmentGates

ENVIRONMENTS = sorted((ROOT / "environments").glob("*.yaml"))


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=lambda p: p.stem)
def test_next_steps_name_outputs_the_stack_has(environment_gates: EnvironmentGates, path: Path) -> None:
    outputs = environment_gates.template(path)["Outputs"]
    steps = outputs["NextSteps"]["Value"]
    assert isinstance(steps, str) and steps.startswith("1) ")
    named = re.findall(r"\[(\w+)\]", steps)
    assert named, "no output named: the first step says how to connect or mount"
    assert [name for name in named if name not in outputs] == []
    *_, last = re.split(r" \d\) ", steps)
    file = shown_path(path)  # environments/x.yaml, as typed in the project's directory
    assert last == (
        f"Done: `.venv/bin/training-clusters destroy {file}`; what is kept (file system, database, buckets) keeps "
        f"costing until you delete it: `.venv/bin/training-clusters cleanup {file} --dry-run` lists it with its "
        "monthly cost"
    )
    acceptance = [c for c in re.findall(r"`([^`]+)`", steps) if " acceptance " in c]
    assert acceptance in ([], [f".venv/bin/training-clusters acceptance {file} -d acceptance/"])


def test_a_step_naming_a_missing_output_is_refused() -> None:
    stack = cdk.Stack(cdk.App(), "Test")
    with pytest.raises(
        AssertionError, match="NextSteps names the output Nope, which this stack does not have"
    ):
        TrainingEnvironmentStack.next_steps(stack, "run [Nope]")  # type: ignore[arg-type]


#: The outputs docs/deploy.md's "From deploy to a finished job" names, by the environment that must have each.
WALKTHROUGH_OUTPUTS = {
    "ControllerSsmCommand": "hyperpod-slurm",
    "HeadNodeSsmCommand": "parallelcluster-c5n",
    "LoginNodeSsmCommand": "pcs-c5n",
    "UpdateKubeconfigCommand": "eks-g5-efa",
    "LifecycleLogGroup": "hyperpod-slurm",
    "ClusterLogGroups": "parallelcluster-c5n",
    "ClusterLogs": "pcs-c5n",
    "ControlPlaneLogGroup": "eks-g5-efa",
}


def test_the_walkthrough_names_outputs_the_templates_have(environment_gates: EnvironmentGates) -> None:
    guide = (ROOT / "docs" / "deploy.md").read_text()
    section = guide[guide.index("## From deploy to a finished job") :].split("\n## ")[0]
    named = set(re.findall(r"`([A-Z]\w+)`", section)) - {"NextSteps", "RESULT"}
    assert named == set(WALKTHROUGH_OUTPUTS)
    for output, environment in WALKTHROUGH_OUTPUTS.items():
        template = environment_gates.template(ROOT / "environments" / f"{environment}.yaml")
        assert output in template["Outputs"], (output, environment)
    assert (
        "`.venv/bin/training-clusters bootstrap FILE`" in section
    )  # the CDK CLI run with the project's Python


#: What the Kubernetes acceptance step says it writes, by the file name each test gets from ``acceptance``.
ACCEPTANCE_KINDS = {
    "as an MPIJob": "nccl-tests-",
    "as a TrainJob": "nccl-trainjob-",
    "DCGM diagnostics": "dcgm-diag-",
    "a MIG instance": "mig-",
    "gang admission": "gang-test-",
}


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=lambda p: p.stem)
def test_the_kubernetes_acceptance_step_names_exactly_the_tests_acceptance_writes(
    environment_gates: EnvironmentGates, path: Path
) -> None:
    steps = environment_gates.template(path)["Outputs"]["NextSteps"]["Value"]
    (step,) = [s for s in re.split(r"\d\) ", steps) if s.startswith("Acceptance:")] or [None]
    config = load_environment(path)
    if config.eks is None and config.hyperpod_eks is None:
        assert step is None or "-check.sh" not in step
        return
    assert step is not None
    written = {job.filename for job in acceptance_plan(config, path.stem).jobs}
    for words, prefix in ACCEPTANCE_KINDS.items():
        assert (words in step) == any(name.startswith(prefix) for name in written), (words, sorted(written))


@pytest.mark.parametrize(
    ("kinds", "tests"),
    [
        ({"mpijob"}, "NCCL over EFA as an MPIJob"),
        ({"trainjob"}, "NCCL over EFA as a TrainJob"),
        (
            {"mpijob", "trainjob", "dcgm"},
            "NCCL over EFA as an MPIJob and as a TrainJob, GPU health with DCGM diagnostics",
        ),
        ({"mig"}, "a MIG instance in a pod"),
        (
            {"mpijob", "dcgm", "mig", "gang"},
            "NCCL over EFA as an MPIJob, GPU health with DCGM diagnostics, a MIG instance in a pod, gang admission "
            "through Kueue",
        ),
    ],
)
def test_the_acceptance_step_lists_the_kinds_of_test_in_order(kinds: set[str], tests: str) -> None:
    flags = {kind: kind in kinds for kind in ("mpijob", "trainjob", "dcgm", "mig", "gang")}
    assert kubernetes_acceptance_step(**flags) == [
        "Acceptance: `.venv/bin/training-clusters acceptance <environment file> -d acceptance/` writes this "
        "environment's "
        f"tests ({tests}), each with a -check.sh, and prints how to run each: apply it, pipe its log into its "
        "check, whose RESULT line says PASS or FAIL"
    ]


def test_without_a_test_to_write_there_is_no_acceptance_step() -> None:
    assert kubernetes_acceptance_step(mpijob=False, trainjob=False, dcgm=False, mig=False, gang=False) == []
