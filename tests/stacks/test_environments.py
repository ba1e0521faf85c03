"""Every shipped environment file synthesizes with 0 cdk-nag findings and 0 cfn-lint errors."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from training_clusters.environments import add_environment, environment_files

from ..conftest import CDK_CONTEXT, ROOT

ENVIRONMENTS = environment_files(ROOT / "environments")


def test_the_seed_environments_are_shipped() -> None:
    names = {p.stem for p in ENVIRONMENTS}
    assert {"network-storage", "hyperpod-slurm", "hyperpod-p5"} <= names


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=[p.stem for p in ENVIRONMENTS])
def test_environment_passes_the_gates(tmp_path: Path, gates, path: Path) -> None:  # type: ignore[no-untyped-def]
    app = cdk.App(outdir=str(tmp_path / "cdk.out"), context=dict(CDK_CONTEXT))
    stack = add_environment(app, path)
    result = gates(app)
    result.assert_clean()
    template = Template.from_stack(stack).to_json()
    _assert_secure_by_default(template)
    assert stack.stack_name == f"training-{path.stem}"


def _assert_secure_by_default(template: dict[str, object]) -> None:
    text = json.dumps(template)
    resources = template["Resources"]
    assert isinstance(resources, dict)
    for logical_id, resource in resources.items():
        props = resource.get("Properties", {})
        kind = resource["Type"]
        if kind == "AWS::EC2::SecurityGroup":
            for rule in props.get("SecurityGroupIngress", []):
                assert rule.get("CidrIp") != "0.0.0.0/0", logical_id
                assert rule.get("CidrIpv6") != "::/0", logical_id
        if kind == "AWS::EC2::SecurityGroupIngress":
            assert props.get("CidrIp") != "0.0.0.0/0", logical_id
            assert props.get("CidrIpv6") != "::/0", logical_id
        if kind == "AWS::EC2::Subnet":
            assert props.get("MapPublicIpOnLaunch") is False, logical_id
        if kind in ("AWS::FSx::FileSystem", "AWS::S3::Bucket"):
            assert resource.get("DeletionPolicy") == "Retain", logical_id
    assert '"AssociatePublicIpAddress": true' not in text
