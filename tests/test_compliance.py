"""The gates themselves can fail: cfn-lint finds real deploy errors, cdk-nag blocks unacknowledged findings."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from training_clusters.compliance import acknowledge, add_compliance_checks, synth_with_checks
from training_clusters.report import format_table, main, summarize

from . import background


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
    summary = summarize(assembly.directory, lint=background.lint)
    assert summary[0].nag_acknowledged == 1
    assert summary[0].passed
    assert "S" in format_table(summary)


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
    assert main([str(tmp_path / "c")], lint=background.lint) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out
    assert "AwsSolutions-S1" in out
