"""``render-pcluster --deployed``: the cluster config with the deployed stack's ids, read through botocore's
Stubber (CloudFormation ListStackResources, EC2 DescribeVpcs checked against their service models)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
import yaml
from botocore.stub import Stubber

from training_clusters import cli
from training_clusters.constructs.parallelcluster.rendering import annotated_yaml, substitute_placeholders
from training_clusters.model.deployed import deployed_values
from training_clusters.model.errors import ConfigurationError
from training_clusters.stacks.parallelcluster import ParallelClusterEnvironment

from ..conftest import ROOT, EnvironmentGates

FILE = ROOT / "environments" / "parallelcluster-c5n.yaml"
STACK = "training-parallelcluster-c5n"
PHYSICAL_PREFIX = {
    "AWS::EC2::Subnet": "subnet-0d",
    "AWS::EC2::SecurityGroup": "sg-0d",
    "AWS::FSx::FileSystem": "fs-0d",
    "AWS::EC2::VPC": "vpc-0d",
    "AWS::EC2::PlacementGroup": "training-pg-",
}


@pytest.fixture(scope="module")
def referenced(environment_gates: EnvironmentGates) -> dict[str, str]:
    """``{logical id: resource type}`` of every resource of the c5n stack, as CloudFormation would list them."""
    stack, _ = environment_gates.get(FILE)
    assert isinstance(stack, ParallelClusterEnvironment)
    return {
        stack.resolve(c.logical_id): c.cfn_resource_type
        for c in stack.node.find_all()
        if isinstance(c, cdk.CfnResource) and cdk.Stack.of(c) is stack
    }


def _summaries(referenced: dict[str, str]) -> list[dict[str, Any]]:
    summaries = [
        {
            "LogicalResourceId": logical_id,
            "PhysicalResourceId": f"{PHYSICAL_PREFIX.get(kind, 'x-')}{index:015x}",
            "ResourceType": kind,
            "LastUpdatedTimestamp": "2026-11-29T00:00:00Z",
            "ResourceStatus": "CREATE_COMPLETE",
        }
        for index, (logical_id, kind) in enumerate(sorted(referenced.items()), start=1)
    ]
    # one resource still being created has no physical id yet: ignored unless referenced
    summaries.append(
        {
            "LogicalResourceId": "Pending",
            "ResourceType": "AWS::SSM::Parameter",
            "LastUpdatedTimestamp": "2026-11-29T00:00:00Z",
            "ResourceStatus": "CREATE_IN_PROGRESS",
        }
    )
    return summaries


class FakeSession:
    def __init__(self, **_: Any) -> None:
        session = boto3.session.Session(
            aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"
        )
        self.clients = {name: session.client(name) for name in ("cloudformation", "ec2")}
        self.stubs = {name: Stubber(client) for name, client in self.clients.items()}

    def client(self, name: str) -> Any:
        return self.clients[name]


def _run(monkeypatch: pytest.MonkeyPatch, session: FakeSession, *argv: str) -> tuple[int, str]:
    monkeypatch.setattr(boto3.session, "Session", lambda **kwargs: session)
    out = io.StringIO()
    with session.stubs["cloudformation"], session.stubs["ec2"]:
        status = cli.main(list(argv), stdout=out)
    return status, out.getvalue()


def test_deployed_render_has_the_stacks_ids_and_no_placeholders(
    monkeypatch: pytest.MonkeyPatch, referenced: dict[str, str]
) -> None:
    session = FakeSession()
    summaries = _summaries(referenced)
    session.stubs["cloudformation"].add_response(
        "list_stack_resources", {"StackResourceSummaries": summaries}, {"StackName": STACK}
    )
    (vpc,) = (s for s in summaries if s["ResourceType"] == "AWS::EC2::VPC")
    session.stubs["ec2"].add_response(
        "describe_vpcs",
        {"Vpcs": [{"VpcId": vpc["PhysicalResourceId"], "CidrBlock": "10.42.0.0/16"}]},
        {"VpcIds": [vpc["PhysicalResourceId"]]},
    )
    status, text = _run(monkeypatch, session, "render-pcluster", str(FILE), "--deployed")
    assert status == 0
    config = yaml.safe_load(text)
    ids: dict[str, set[str]] = {}
    for summary in summaries:
        if "PhysicalResourceId" in summary:
            ids.setdefault(summary["ResourceType"], set()).add(summary["PhysicalResourceId"])
    assert config["HeadNode"]["Networking"]["SubnetId"] in ids["AWS::EC2::Subnet"]
    assert config["HeadNode"]["Ssh"]["AllowedIps"] == "10.42.0.0/16"
    assert {config["SharedStorage"][0]["FsxLustreSettings"]["FileSystemId"]} == ids["AWS::FSx::FileSystem"]
    assert "0123456789abcdef" not in text  # no placeholder left
    assert "# placeholder" not in text
    assert "# Every id is a deployed one: the file holds no placeholder.\nRegion: us-east-1\n" in text
    for stub in session.stubs.values():
        stub.assert_no_pending_responses()


def test_a_stack_that_is_not_deployed_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    session = FakeSession()
    session.stubs["cloudformation"].add_client_error(
        "list_stack_resources",
        service_error_code="ValidationError",
        service_message=f"Stack with id {STACK} does not exist",
    )
    status, _ = _run(monkeypatch, session, "render-pcluster", str(FILE), "--deployed")
    err = capsys.readouterr().err
    assert status == 2
    assert f"Stack with id {STACK} does not exist (deploy it first" in err
    assert "Traceback" not in err


def test_deployed_values_answer_refs_and_the_attributes_that_are_physical_ids() -> None:
    session = FakeSession()
    summaries = [
        {
            "LogicalResourceId": "Sg",
            "PhysicalResourceId": "sg-0abc",
            "ResourceType": "AWS::EC2::SecurityGroup",
        },
        {"LogicalResourceId": "Vpc", "PhysicalResourceId": "vpc-0abc", "ResourceType": "AWS::EC2::VPC"},
        {"LogicalResourceId": "Fs", "PhysicalResourceId": "fs-0abc", "ResourceType": "AWS::FSx::FileSystem"},
        {"LogicalResourceId": "Pending", "ResourceType": "AWS::SSM::Parameter"},
    ]
    for summary in summaries:
        summary.update({"LastUpdatedTimestamp": "2026-11-29T00:00:00Z", "ResourceStatus": "CREATE_COMPLETE"})
    session.stubs["cloudformation"].add_response(
        "list_stack_resources", {"StackResourceSummaries": summaries}, {"StackName": "s"}
    )
    session.stubs["ec2"].add_response(
        "describe_vpcs",
        {"Vpcs": [{"VpcId": "vpc-0abc", "CidrBlock": "10.9.0.0/16"}]},
        {"VpcIds": ["vpc-0abc"]},
    )
    with session.stubs["cloudformation"], session.stubs["ec2"]:
        values = deployed_values(
            "s", cloudformation=session.clients["cloudformation"], ec2=session.clients["ec2"]
        )
    assert values == {
        "Sg": "sg-0abc",
        "Sg.GroupId": "sg-0abc",
        "Vpc": "vpc-0abc",
        "Vpc.VpcId": "vpc-0abc",
        "Vpc.CidrBlock": "10.9.0.0/16",
        "Fs": "fs-0abc",
    }


def test_strict_rendering_names_references_without_a_value_and_never_guesses() -> None:
    document = {
        "A": {"Ref": "Fs"},
        "B": {"Fn::GetAtt": ["Fs", "DNSName"]},
        "C": {"Ref": "Gone"},
        "D": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}]]},
    }
    types = {"Fs": "AWS::FSx::FileSystem"}
    with pytest.raises(ConfigurationError) as error:
        substitute_placeholders(document, resource_types=types, values={"Fs": "fs-0abc"}, strict=True)
    assert str(error.value) == (
        "no deployed value for Fs.DNSName (AWS::FSx::FileSystem), Gone (not a resource of the app)"
    )
    rendered = substitute_placeholders(
        document,
        resource_types=types,
        values={"Fs": "fs-0abc", "Fs.DNSName": "fs.example", "Gone": "x"},
        strict=True,
    )
    assert rendered == {"A": "fs-0abc", "B": "fs.example", "C": "x", "D": "arn:aws"}


def test_the_file_is_written_and_says_whether_ids_are_real(tmp_path: Path) -> None:
    target = tmp_path / "cluster-config.yaml"
    out = io.StringIO()
    assert cli.main(["render-pcluster", str(FILE), "-o", str(target)], stdout=out) == 0
    assert "placeholders mark deploy-time ids (use --deployed after deploy)" in out.getvalue()


def test_a_reference_outside_the_app_is_never_a_guessed_placeholder() -> None:
    with pytest.raises(
        ConfigurationError, match="cannot render a reference to Gone: it is not a resource of this app"
    ):
        substitute_placeholders({"C": {"Ref": "Gone"}}, resource_types={})


SUBNET_1, SUBNET_16 = "subnet-0123456789abcdef1", "subnet-0123456789abcdef10"


def test_a_placeholder_is_marked_where_it_stands_as_a_whole_word() -> None:
    document = {"A": SUBNET_1, "B": [SUBNET_16], "C": f"s3://b/{SUBNET_1}x", "D": f"s3://b/{SUBNET_1}/k"}
    text = annotated_yaml(document, {SUBNET_1: "subnet A", SUBNET_16: "subnet B"}, header="# what it is\n")
    assert text == (
        "# what it is\n"
        f"A: {SUBNET_1}  # placeholder: subnet A\n"
        "B:\n"
        f"- {SUBNET_16}  # placeholder: subnet B\n"
        f"C: s3://b/{SUBNET_1}x\n"
        f"D: s3://b/{SUBNET_1}/k  # placeholder: subnet A\n"
    )
    assert yaml.safe_load(text) == document


def test_a_placeholder_inside_a_multi_line_value_is_listed_under_the_header_instead() -> None:
    document = {"Script": f"first line {SUBNET_1}\nsecond line", "Args": ["--x"]}
    text = annotated_yaml(document, {SUBNET_1: "subnet A"}, header="# what it is\n")
    assert text.startswith(f"# what it is\n# placeholder {SUBNET_1}: subnet A\nScript: ")
    assert yaml.safe_load(text) == document
