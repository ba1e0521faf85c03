"""A HyperPod stack with a login group outputs the SSM command to a login node (``LoginNodeSsmCommand``), as it
does the controller's; without a login group there is no such output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from training_clusters.environments import add_environment

from ..conftest import CDK_CONTEXT, ROOT


def _outputs(tmp_path: Path, name: str) -> tuple[dict[str, Any], str]:
    app = cdk.App(outdir=str(tmp_path), context=dict(CDK_CONTEXT))
    stack = add_environment(app, ROOT / "environments" / f"{name}.yaml")
    template = app.synth().get_stack_by_name(stack.stack_name).template
    cluster = stack.resolve(stack.get_logical_id(stack.cluster.cluster))  # type: ignore[attr-defined]
    return template["Outputs"], cluster


def _ssm_command(cluster: str, group: str, cluster_name: str) -> dict[str, Any]:
    return {
        "Fn::Join": [
            "",
            [
                "aws ssm start-session --region us-east-1 --target sagemaker-cluster:",
                {"Fn::Select": [1, {"Fn::Split": ["cluster/", {"Fn::GetAtt": [cluster, "ClusterArn"]}]}]},
                f"_{group}-<instance-id>   # instance id: aws sagemaker list-cluster-nodes --region us-east-1 "
                f"--cluster-name {cluster_name} --instance-group-name-contains {group} "
                "--query 'ClusterNodeSummaries[0].InstanceId' --output text",
            ],
        ]
    }


def test_a_login_group_gets_its_ssm_command_beside_the_controllers(tmp_path: Path) -> None:
    outputs, cluster = _outputs(tmp_path, "hyperpod-team")
    assert outputs["LoginNodeSsmCommand"] == {
        "Description": "Reach a login node through SSM, where the team logs in (training-clusters connect FILE "
        "--node login)",
        "Value": _ssm_command(cluster, "login-group", "team-cluster"),
    }
    assert outputs["ControllerSsmCommand"] == {
        "Description": "Reach the Slurm controller through SSM (no SSH, no public IP)",
        "Value": _ssm_command(cluster, "controller-machine", "team-cluster"),
    }


@pytest.mark.parametrize("name", ["hyperpod-slurm"])
def test_without_a_login_group_there_is_no_login_command(tmp_path: Path, name: str) -> None:
    outputs, cluster = _outputs(tmp_path, name)
    assert "LoginNodeSsmCommand" not in outputs
    assert json.dumps(outputs["ControllerSsmCommand"]["Value"]) == json.dumps(
        _ssm_command(cluster, "controller-machine", "ml-cluster")
    )
