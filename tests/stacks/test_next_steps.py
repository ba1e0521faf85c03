"""Every shipped environment's stack prints what to do once deployed (its ``NextSteps`` output, the last one
`cdk deploy` shows), naming only outputs the template has; a step naming a missing output fails at synth."""

from __future__ import annotations

import re
from pathlib import Path

import aws_cdk as cdk
import pytest

from training_clusters.stacks.base import TrainingEnvironmentStack

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
    assert last.startswith("Done: npx cdk destroy -c environment=<environment file>;")


def test_a_step_naming_a_missing_output_is_refused() -> None:
    stack = cdk.Stack(cdk.App(), "Test")
    with pytest.raises(
        AssertionError, match="NextSteps names the output Nope, which this stack does not have"
    ):
        TrainingEnvironmentStack.next_steps(stack, "run [Nope]")  # type: ignore[arg-type]


#: The outputs README's "From deploy to a finished job" names, by the environment that must have each.
README_OUTPUTS = {
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
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### From deploy to a finished job") :].split("\n## ")[0]
    named = set(re.findall(r"`([A-Z]\w+)`", section)) - {"NextSteps", "RESULT"}
    assert named == set(README_OUTPUTS)
    for output, environment in README_OUTPUTS.items():
        template = environment_gates.template(ROOT / "environments" / f"{environment}.yaml")
        assert output in template["Outputs"], (output, environment)
    assert "cdk bootstrap aws://ACCOUNT/REGION" in section
