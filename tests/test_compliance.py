"""The gates themselves can fail: cfn-lint finds real deploy errors, cdk-nag blocks unacknowledged findings;
cdk-nag's NIST 800-53 R5 pack informs without blocking, and every shipped environment explains its findings."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from training_clusters.environments import environment_files
from training_clusters.gates.compliance import (
    NIST_800_53_R5,
    acknowledge,
    acknowledge_nist,
    add_compliance_checks,
    synth_with_checks,
)
from training_clusters.gates.summary import format_table, main, summarize

from . import background
from .conftest import ROOT, EnvironmentGates
from .text_tables import column_headers

ENVIRONMENTS = environment_files(ROOT / "environments")


def no_checkov(templates: list[Path]) -> list[object]:
    """These tests are about cdk-nag; checkov runs once per session in tests/test_checkov.py."""
    return []


@pytest.mark.lint
def test_cfn_lint_reports_a_lustre_capacity_cloudformation_would_reject(tmp_path: Path) -> None:
    template = {
        "Resources": {
            "Fs": {
                "Type": "AWS::FSx::FileSystem",
                "Properties": {
                    "FileSystemType": "LUSTRE",
                    "StorageCapacity": 1000,
                    "SubnetIds": ["subnet-0123456789abcdef0"],
                    "LustreConfiguration": {"DeploymentType": "SCRATCH_2"},
                },
            }
        }
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(template))
    errors = [m for m in background.lint(path, ["us-east-1"]) if m.level == "error"]
    assert errors, "cfn-lint should reject 1000 GiB of SCRATCH_2"


def test_unacknowledged_nag_finding_blocks_synth_and_acknowledging_clears_it(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path / "a"))
    stack = cdk.Stack(app, "S")
    s3.Bucket(stack, "Plain", enforce_ssl=True)
    add_compliance_checks(app)
    assembly, findings = synth_with_checks(app)
    assert assembly is None
    assert {f.rule for f in findings if f.plugin.startswith("AwsSolutions")} == {"AwsSolutions-S1"}

    app = cdk.App(outdir=str(tmp_path / "b"))
    stack = cdk.Stack(app, "S")
    bucket = s3.Bucket(stack, "Plain", enforce_ssl=True)
    acknowledge(bucket, "AwsSolutions-S1", "test bucket without access logs")
    add_compliance_checks(app)
    assembly, findings = synth_with_checks(app)
    assert assembly is not None
    assert not [f for f in findings if f.plugin.startswith("AwsSolutions")]
    summary = summarize(assembly.directory, lint=background.lint, scan=no_checkov)
    assert summary[0].nag_acknowledged == 1
    assert summary[0].passed
    assert "S" in format_table(summary)


@pytest.mark.parametrize("spelling", ["AwsSolutions-S1", "AwsSolutions::AwsSolutions-S1"])
def test_a_finding_is_acknowledged_as_cdk_nag_names_it_or_as_its_hint_prints_it(
    tmp_path: Path, spelling: str
) -> None:
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    bucket = s3.Bucket(cdk.Stack(app, "S"), "Plain", enforce_ssl=True)
    acknowledge(bucket, spelling, "test bucket without access logs")
    add_compliance_checks(app)
    assembly, findings = synth_with_checks(app)
    assert assembly is not None, findings
    assert not [f for f in findings if f.plugin.startswith("AwsSolutions")]


def test_acknowledging_without_a_reason_is_refused() -> None:
    app = cdk.App()
    with pytest.raises(ValueError, match="needs a specific reason"):
        acknowledge(cdk.Stack(app, "S"), "AwsSolutions-S1", "  ")


def test_report_exits_non_zero_when_a_template_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = cdk.App(outdir=str(tmp_path / "c"))
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="us-east-1"))
    s3.Bucket(stack, "Plain", enforce_ssl=True)
    add_compliance_checks(app)
    synth_with_checks(app)
    # synth refused, but the assembly folder holds the templates and the validation report
    assert main([str(tmp_path / "c")], lint=background.lint, scan=no_checkov) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out
    assert "AwsSolutions-S1" in out


def _ours(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The report's own lines on stderr. jsii relays what synth's Node process prints (cdk-nag's NIST
    warnings) from a thread of its own, so a late line of it may land among them."""
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]


def test_report_has_real_help_and_says_what_is_missing_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from training_clusters.gates.checkov import CheckovUnavailable

    with pytest.raises(SystemExit) as help_exit:
        main(["--help"])
    assert help_exit.value.code == 0
    assert "clusters[gates]" in capsys.readouterr().out  # argparse wraps at the hyphens of the name

    assert main([str(tmp_path / "nowhere")]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("is not a cloud assembly (no manifest.json); run cdk synth first")
    )

    app = cdk.App(outdir=str(tmp_path / "ok"))
    acknowledge(s3.Bucket(cdk.Stack(app, "S"), "Plain", enforce_ssl=True), "AwsSolutions-S1", "test bucket")
    add_compliance_checks(app)
    synth_with_checks(app)
    capsys.readouterr()  # what synth printed (the informative NIST pack's warnings)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "cfnlint" else real_find_spec(name, *a)
    )
    assert main([str(tmp_path / "ok")]) == 2
    assert _ours(capsys) == [
        "error: cfn-lint is not installed: pip install 'cdk-training-clusters[gates]' (or pass --no-lint)"
    ]

    def unavailable(templates: list[Path]) -> list[object]:
        raise CheckovUnavailable("checkov could not start: no such file")

    assert main([str(tmp_path / "ok"), "--no-lint"], scan=unavailable) == 2  # type: ignore[arg-type]
    assert _ours(capsys) == ["error: checkov could not start: no such file; or pass --no-checkov"]
    assert main([str(tmp_path / "ok"), "--no-lint", "--no-checkov"], scan=unavailable) == 0  # type: ignore[arg-type]


def _bucket_app(outdir: Path, *, explain_nist: bool) -> cdk.App:
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="us-east-1"))
    bucket = s3.Bucket(stack, "Plain", enforce_ssl=True, versioned=True)
    acknowledge(bucket, "AwsSolutions-S1", "test bucket without access logs")
    if explain_nist:
        for rule in (
            "S3BucketLoggingEnabled",
            "S3BucketReplicationEnabled",
            "S3DefaultEncryptionKMS",
        ):
            acknowledge_nist(bucket, f"NIST.800.53.R5-{rule}", "a test bucket holding nothing")
    add_compliance_checks(app)
    return app


def test_nist_findings_are_reported_but_never_block_synth(tmp_path: Path) -> None:
    assembly, findings = synth_with_checks(_bucket_app(tmp_path / "a", explain_nist=False))
    assert assembly is not None, "the informative NIST pack must not refuse the assembly"
    nist = {f.rule for f in findings if f.plugin == NIST_800_53_R5}
    assert {"NIST.800.53.R5-S3DefaultEncryptionKMS", "NIST.800.53.R5-S3BucketReplicationEnabled"} <= nist
    (summary,) = summarize(assembly.directory, lint=background.lint, scan=no_checkov)
    assert summary.passed and summary.nist_findings
    assert summary.nist_acknowledged == 0


def test_acknowledged_nist_findings_drop_out_and_are_counted(tmp_path: Path) -> None:
    assembly, _ = synth_with_checks(_bucket_app(tmp_path / "b", explain_nist=True))
    assert assembly is not None
    (summary,) = summarize(assembly.directory, lint=background.lint, scan=no_checkov)
    explained = {
        f"NIST.800.53.R5-{r}"
        for r in ("S3BucketLoggingEnabled", "S3BucketReplicationEnabled", "S3DefaultEncryptionKMS")
    }
    assert summary.nist_findings  # others still show (public access is not blocked on this bare bucket)
    assert explained.isdisjoint(f.rule for f in summary.nist_findings)
    assert summary.nist_acknowledged == 3
    assert "NIST (info) open / acknowledged" in column_headers(format_table([summary]))


def test_acknowledging_nist_without_a_reason_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a specific reason"):
        acknowledge_nist(cdk.Stack(cdk.App(), "S"), "NIST.800.53.R5-IAMNoInlinePolicy", "")


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=[p.stem for p in ENVIRONMENTS])
def test_shipped_environment_explains_every_nist_finding(
    environment_gates: EnvironmentGates, path: Path
) -> None:
    _, result = environment_gates.get(path)
    assert result.assembly is not None
    open_findings = [f for f in result.findings if f.plugin == NIST_800_53_R5]
    assert open_findings == [], "acknowledge with a reason (compliance.acknowledge_nist):\n" + "\n".join(
        map(str, open_findings)
    )


def _assembly(directory: Path, manifest: str, template: str = '{"Resources": {}}') -> Path:
    directory.mkdir()
    (directory / "manifest.json").write_text(manifest)
    (directory / "S.template.json").write_text(template)
    return directory


STACK = '{"artifacts": {"S": {"type": "aws:cloudformation:stack", "properties": {"templateFile": "S.template.json"}}}}'


@pytest.mark.parametrize(
    ("manifest", "template", "message"),
    [
        ("{not json", "{}", "manifest.json: not valid JSON"),
        ("[1, 2]", "{}", "manifest.json: must be a JSON object (a cloud assembly manifest), got list"),
        (
            '{"artifacts": {"S": {"type": "aws:cloudformation:stack", "properties": {}}}}',
            "{}",
            "manifest.json: artifacts.S.properties.templateFile: must name a file in the assembly, got None",
        ),
        (STACK, "[]", "S.template.json: must be a JSON object (a CloudFormation template), got list"),
        (STACK, '{"Resources": 5', "S.template.json: not valid JSON"),
        (STACK.replace('"properties"', '"metadata": 3, "properties"'), "{}", "artifacts.S.metadata: must be"),
        (
            STACK.replace('"properties"', '"environment": 3, "properties"'),
            "{}",
            "artifacts.S.environment: must",
        ),
    ],
    ids=[
        "not-json",
        "a-list",
        "no-template",
        "template-a-list",
        "template-not-json",
        "metadata",
        "environment",
    ],
)
def test_report_on_a_broken_assembly_is_one_line_and_exit_2(
    manifest: str, template: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = _assembly(tmp_path / "a", manifest, template)
    assert main([str(directory), "--no-lint", "--no-checkov"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert message in captured.err, captured.err


def test_report_reads_no_device_and_counts_only_resources_that_are_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = _assembly(tmp_path / "a", STACK, '{"Resources": {"A": 1, "B": {"Type": "AWS::S3::Bucket"}}}')
    assert main([str(directory), "--no-lint", "--no-checkov", "--output", "json"]) == 0
    [summary] = json.loads(capsys.readouterr().out)["templates"]
    assert summary["resources"] == 1  # B; A is no object
    (directory / "S.template.json").unlink()
    (directory / "S.template.json").symlink_to("/dev/zero")
    assert main([str(directory), "--no-lint", "--no-checkov"]) == 2
    assert "S.template.json: is not a regular file" in capsys.readouterr().err


def test_report_options_are_never_abbreviated(tmp_path: Path) -> None:
    directory = _assembly(tmp_path / "a", STACK)
    with pytest.raises(SystemExit) as usage:
        main([str(directory), "--no-l", "--no-checkov"])
    assert usage.value.code == 2


def test_a_handlers_nist_acknowledgements_go_on_a_lambda_cfn_function_only() -> None:
    """accept_handler_findings tells an L1 function from a raw resource of the same type without importing
    aws_lambda (a network imports none): by the class's jsii type."""
    from aws_cdk import aws_lambda as lambda_

    from training_clusters.gates.compliance import accept_handler_findings

    stack = cdk.Stack(cdk.App(), "Handlers")
    function = lambda_.CfnFunction(
        stack, "Function", code=lambda_.CfnFunction.CodeProperty(zip_file="x"), role="arn:aws:iam::1:role/x"
    )
    raw = cdk.CfnResource(stack, "Raw", type="AWS::Lambda::Function")
    for handler in (function, raw):
        accept_handler_findings(handler, "a test handler", in_vpc=True, has_environment=False)

    def nist_rules(construct: cdk.CfnResource) -> list[str]:
        return sorted(
            str(entry.data)
            for entry in construct.node.metadata
            if "NIST" in str(entry.data) and "Lambda" in str(entry.data)
        )

    assert nist_rules(raw) == []
    assert len(nist_rules(function)) == 2  # concurrency and dead-letter queue


def test_accepting_traffic_between_members_acknowledges_only_the_groups_own_rule(tmp_path: Path) -> None:
    """A group's children also hold another group's rule whose peer it is (CDK puts a rule between two stacks
    in its peer's stack): here ``Peers/Group``'s all-traffic ingress rule from ``Members/Group`` lands under the
    members' group, with the same logical ids in both stacks. Only the members' own rule is acknowledged; the
    peers' rule keeps its EC2RestrictedCommonPorts finding."""
    from aws_cdk import aws_ec2 as ec2

    from training_clusters.constructs.private.security_groups import open_between_members

    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    env = cdk.Environment(account="111111111111", region="us-east-1")
    network = cdk.Stack(app, "Network", env=env)
    vpc = ec2.Vpc(network, "Vpc", max_azs=1, nat_gateways=0, subnet_configuration=[])
    peers = ec2.SecurityGroup(cdk.Stack(app, "Peers", env=env), "Group", vpc=vpc)
    members = ec2.SecurityGroup(cdk.Stack(app, "Members", env=env), "Group", vpc=vpc)
    members.connections.allow_to(peers, ec2.Port.all_traffic(), "all traffic to the peers")
    open_between_members(
        members, inbound="from members", outbound=None, reason="members exchange all traffic"
    )
    rules = {
        child.node.path: (child.group_id, child.source_security_group_id)
        for child in members.node.children
        if isinstance(child, ec2.CfnSecurityGroupIngress)
    }
    assert rules == {
        "Members/Group/from MembersGroupAC709B91:ALL TRAFFIC": (
            members.security_group_id,
            members.security_group_id,
        ),
        "Members/Group/PeersGroupF554E4C6:ALL TRAFFIC to": (
            peers.security_group_id,
            members.security_group_id,
        ),
    }
    add_compliance_checks(app)
    _, findings = synth_with_checks(app)
    restricted = sorted(
        f.construct_path for f in findings if f.rule == "NIST.800.53.R5-EC2RestrictedCommonPorts"
    )
    assert restricted == ["Members/Group/PeersGroupF554E4C6:ALL TRAFFIC to"]
