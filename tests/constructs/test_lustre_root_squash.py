"""FSx root squash (issue 40, Medium 5): ``SharedLustre(root_squash=True)`` and ``storage.lustre.root_squash``.

Root squash maps root on every client to nobody (65534:65534); the Slurm flavors' node scripts write the file
system as root on every new node, so environment files refuse it there with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import botocore.session
import pytest
import yaml
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template
from botocore.validate import ParamValidator

from training_clusters.config import parse_environment
from training_clusters.constructs.common.lustre import ExistingLustre, SharedLustre
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.environments import add_environment_config
from training_clusters.gates.cfn_lint import cfn_lint
from training_clusters.model.errors import ConfigurationError

from ..conftest import AZS, CDK_CONTEXT, ROOT


@pytest.fixture
def network(stack: cdk.Stack) -> TrainingNetwork:
    return TrainingNetwork(stack, "Network", availability_zones=AZS)


def _lustre(stack: cdk.Stack) -> dict[str, Any]:
    (fs,) = Template.from_stack(stack).find_resources("AWS::FSx::FileSystem").values()
    configuration: dict[str, Any] = fs["Properties"]["LustreConfiguration"]
    return configuration


#: What the calls' references to the file system stand for: an id of FSx's shape (botocore checks its length).
FS_ID = "fs-0123456789abcdef0"


def _text(value: Any, ref: str = "FS") -> str:
    """A template string with each reference (the file system, the partition, the account) written REF."""
    if isinstance(value, str):
        return value
    (parts,) = value.values()
    return "".join(p if isinstance(p, str) else ref for p in parts[1])


def _squash_calls(template: dict[str, Any]) -> dict[str, Any]:
    """The Create, Update and Delete calls of the one Custom::LustreRootSquash, each validated against
    botocore's FSx model (UpdateFileSystem's input shape)."""
    (resource,) = [r for r in template["Resources"].values() if r["Type"] == "Custom::LustreRootSquash"]
    operation = botocore.session.get_session().get_service_model("fsx").operation_model("UpdateFileSystem")
    calls = {}
    for event in ("Create", "Update", "Delete"):
        call = json.loads(_text(resource["Properties"][event], FS_ID))
        assert (call["service"], call["action"]) == ("FSx", "updateFileSystem")
        report = ParamValidator().validate(call["parameters"], operation.input_shape)
        assert not report.has_errors(), report.generate_report()
        calls[event] = call
    return calls


def _expected(root_squash: str, nids: list[str], *, delete: bool = False) -> dict[str, Any]:
    return {
        "action": "updateFileSystem",
        "service": "FSx",
        **({"ignoreErrorCodesMatching": "FileSystemNotFound"} if delete else {}),
        "parameters": {
            "FileSystemId": FS_ID,
            "LustreConfiguration": {
                "RootSquashConfiguration": {"RootSquash": root_squash, "NoSquashNids": nids}
            },
        },
        "physicalResourceId": {"id": FS_ID},
    }


def test_off_by_default(stack: cdk.Stack, network: TrainingNetwork) -> None:
    fs = SharedLustre(stack, "Fsx", vpc=network.vpc)
    Template.from_stack(stack).resource_count_is("Custom::LustreRootSquash", 0)
    assert "RootSquashConfiguration" not in _lustre(stack) and fs.root_squash is None


@pytest.mark.parametrize("nids", [[], ["10.0.1.6@tcp", "10.0.[2-10].[1-255]@tcp"]])
def test_on_maps_root_to_nobody_at_deploy_and_back_to_root_on_removal(
    stack: cdk.Stack, network: TrainingNetwork, nids: list[str]
) -> None:
    """CloudFormation's AWS::FSx::FileSystem has no RootSquashConfiguration (cfn-lint's schema refuses it):
    FSx's UpdateFileSystem sets it when the stack deploys, on this file system only."""
    fs = SharedLustre(stack, "Fsx", vpc=network.vpc, root_squash=True, root_squash_exempt_nids=nids)
    template = Template.from_stack(stack).to_json()
    assert _squash_calls(template) == {
        "Create": _expected("65534:65534", nids),
        "Update": _expected("65534:65534", nids),
        "Delete": _expected("0:0", [], delete=True),
    }
    assert "RootSquashConfiguration" not in _lustre(stack)
    assert fs.root_squash is not None
    (policy,) = [
        r for k, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::Policy" and k.startswith("FsxRootSquash")
    ]  # fmt: skip
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert (statement["Action"], statement["Effect"]) == ("fsx:UpdateFileSystem", "Allow")
    assert _text(statement["Resource"]) == "arn:aws:fsx:us-east-1:FS:file-system/FS"  # the account, the id


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"root_squash_exempt_nids": ["10.0.1.6@tcp"]},
            "Test/Fsx: root_squash_exempt_nids applies only when root_squash is on",
        ),
        (
            {"root_squash": True, "root_squash_exempt_nids": ["10.0.1.6"]},
            "Test/Fsx: root_squash_exempt_nids must be a Lustre client NID such as 10.0.1.6@tcp or "
            "10.0.[2-10].[1-255]@tcp, got '10.0.1.6'",
        ),
        (
            {"root_squash": True, "root_squash_exempt_nids": ["10.0.1.6@tcp;reboot"]},
            "Test/Fsx: root_squash_exempt_nids must be a Lustre client NID such as 10.0.1.6@tcp or "
            "10.0.[2-10].[1-255]@tcp, got '10.0.1.6@tcp;reboot'",
        ),
        (
            {"root_squash": True, "root_squash_exempt_nids": [f"10.0.1.{i}@tcp" for i in range(65)]},
            "Test/Fsx: root_squash_exempt_nids must hold at most 64 NIDs, got 65",
        ),
    ],
)
def test_bad_exemptions_are_clear_errors(
    stack: cdk.Stack, network: TrainingNetwork, props: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        SharedLustre(stack, "Fsx", vpc=network.vpc, **props)
    assert str(error.value) == message


def test_sixty_four_exemptions_are_allowed(stack: cdk.Stack, network: TrainingNetwork) -> None:
    nids = [f"10.0.1.{i}@tcp" for i in range(64)]
    SharedLustre(stack, "Fsx", vpc=network.vpc, root_squash=True, root_squash_exempt_nids=nids)
    calls = _squash_calls(Template.from_stack(stack).to_json())
    assert (
        calls["Update"]["parameters"]["LustreConfiguration"]["RootSquashConfiguration"]["NoSquashNids"]
        == nids
    )


def test_an_adopted_file_system_takes_no_root_squash(stack: cdk.Stack, network: TrainingNetwork) -> None:
    group = ec2.SecurityGroup.from_security_group_id(stack, "FsxGroup", "sg-0123456789abcdef0")
    existing = ExistingLustre("fs-0123456789abcdef0", "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
                              "abcdefgh", group)  # fmt: skip
    with pytest.raises(ConfigurationError) as error:
        SharedLustre(stack, "Fsx", vpc=network.vpc, existing=existing, root_squash=True)
    assert str(error.value) == (
        "Test/Fsx: root_squash applies to a file system made here; set an adopted one's root squash where it "
        "is made"
    )


def _document(name: str, **lustre: Any) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / "environments" / name).read_text())
    document["storage"]["lustre"].update(lustre)
    return document


@pytest.mark.parametrize(
    ("name", "orchestrator"),
    [
        ("parallelcluster-team.yaml", "parallelcluster"),
        ("hyperpod-team.yaml", "hyperpod"),
        ("pcs-c5n.yaml", "pcs"),
    ],
)
def test_a_slurm_file_with_root_squash_is_refused_with_the_reason(name: str, orchestrator: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_environment(_document(name, root_squash=True))
    assert str(error.value) == (
        "<environment>: 1 problem(s)\n"
        f"  storage.lustre.root_squash: must be off with {orchestrator}: its node scripts write on the file system as root on "
        "every new node (the shared homes and their ~/.ssh, the mount point's mode), which root squash refuses, "
        "and FSx exempts clients only by IP address (NoSquashNids), which replaced nodes do not keep"
    )


@pytest.mark.parametrize("orchestrator", ["parallelcluster", "hyperpod", "pcs"])
def test_training_any_under_a_slurm_orchestrator_with_root_squash_is_refused(orchestrator: str) -> None:
    document = _document("training-any.yaml", root_squash=True)
    document["orchestrator"] = orchestrator
    if orchestrator == "pcs":  # AWS PCS runs the controller: the file says it ignores compute.controller
        document["ignore"] = ["compute.controller"]
    with pytest.raises(ValueError) as error:
        parse_environment(document)
    assert f"\n  storage.lustre.root_squash: must be off with {orchestrator}: its node scripts" in str(
        error.value
    )


@pytest.mark.parametrize("name", ["eks-p5-efa.yaml", "hyperpod-eks-g5.yaml"])
def test_an_eks_file_with_root_squash_gets_it_and_cfn_lint_accepts_it(name: str, tmp_path: Path) -> None:
    config = parse_environment(_document(name, root_squash=True, root_squash_exempt_nids=["10.0.1.6@tcp"]))
    app = cdk.App(context=dict(CDK_CONTEXT))
    stack = add_environment_config(app, config, Path(name).stem)
    template = app.synth().get_stack_by_name(stack.stack_name).template
    assert _squash_calls(template)["Update"] == _expected("65534:65534", ["10.0.1.6@tcp"])
    path = tmp_path / "template.json"
    path.write_text(json.dumps(template))
    assert [str(m) for m in cfn_lint(path, ["us-east-1"]) if m.level == "error"] == []
