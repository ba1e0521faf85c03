"""checkov, the third gate: every finding on a shipped environment is fixed or skipped with a reason.

checkov runs once per session (``checkov_run``: one process from ``.venv-checkov`` over every shipped
environment's template and the gated stacks named ``checkov-*``), in the background; a missing checkov
environment fails these tests rather than skipping them.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from training_clusters.environments import environment_files, stack_id
from training_clusters.gates.checkov import CheckovResult
from training_clusters.gates.compliance import skip_checkov
from training_clusters.gates.summary import format_table, main, summarize

from . import background
from .conftest import ROOT, CheckovRun, gated_stack
from .text_tables import column_headers

ENVIRONMENTS = environment_files(ROOT / "environments")
IDS = [p.stem for p in ENVIRONMENTS]
PROBE_REASON = "a probe: this log group holds nothing"


@gated_stack("checkov-probe")
def _probe(stack: cdk.Stack) -> None:
    logs.LogGroup(stack, "Plain", removal_policy=cdk.RemovalPolicy.DESTROY)
    explained = logs.LogGroup(stack, "Explained", removal_policy=cdk.RemovalPolicy.DESTROY)
    skip_checkov(explained, "CKV_AWS_158", PROBE_REASON)


def _on(results: list[CheckovResult], logical_id_prefix: str) -> list[CheckovResult]:
    return [r for r in results if r.resource.split(".", 1)[-1].startswith(logical_id_prefix)]


def test_checkov_reports_a_finding_and_honours_a_skip_with_its_reason(checkov_run: CheckovRun) -> None:
    results = checkov_run.results("checkov-probe")
    plain = _on(results, "Plain")
    assert [(r.check_id, r.failed) for r in plain] == [("CKV_AWS_158", True)]
    explained = _on(results, "Explained")
    assert [(r.check_id, r.failed, r.comment) for r in explained] == [("CKV_AWS_158", False, PROBE_REASON)]


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_shipped_environment_has_no_unexplained_checkov_finding(checkov_run: CheckovRun, path: Path) -> None:
    results = checkov_run.results(stack_id(path.stem))
    open_findings = [r for r in results if r.failed]
    assert open_findings == [], (
        "fix these or skip them with a reason (compliance.skip_checkov):\n"
        + "\n".join(map(str, open_findings))
    )
    # every environment has skips (CDK's own provider Lambda at least): the scan really ran on it
    assert results, f"checkov reported nothing at all for {path.name}"


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_every_checkov_skip_says_why(checkov_run: CheckovRun, path: Path) -> None:
    for result in checkov_run.results(stack_id(path.stem)):
        assert result.failed or len(result.comment.split()) >= 5, f"{result} needs a specific reason"


def test_skip_checkov_writes_template_metadata_once_per_check(app: cdk.App) -> None:
    stack = cdk.Stack(app, "S")
    group = logs.LogGroup(stack, "Logs")
    skip_checkov(group, "CKV_AWS_158", "first reason")
    skip_checkov(group, "CKV_AWS_158", "second reason")  # the later reason replaces the earlier one
    skip_checkov(group, "CKV_AWS_66", "retention is set on purpose")
    (resource,) = Template.from_stack(stack).find_resources("AWS::Logs::LogGroup").values()
    assert resource["Metadata"]["checkov"] == {
        "skip": [
            {"id": "CKV_AWS_158", "comment": "second reason"},
            {"id": "CKV_AWS_66", "comment": "retention is set on purpose"},
        ]
    }


def test_skipping_without_a_reason_or_resource_is_refused(app: cdk.App) -> None:
    stack = cdk.Stack(app, "S")
    with pytest.raises(ValueError, match="needs a specific reason"):
        skip_checkov(logs.LogGroup(stack, "Logs"), "CKV_AWS_158", " ")
    with pytest.raises(TypeError, match="not a CloudFormation resource"):
        skip_checkov(stack, "CKV_AWS_158", "a stack is no resource")


def _one_stack_assembly(tmp_path: Path) -> Path:
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    logs.LogGroup(cdk.Stack(app, "S", env=cdk.Environment(region="us-east-1")), "Logs")
    return Path(app.synth().directory)


def test_the_report_fails_on_an_open_checkov_finding_and_counts_skips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = _one_stack_assembly(tmp_path)
    template = str(directory / "S.template.json")
    finding = CheckovResult(
        "CKV_AWS_158", "Log group encrypted by KMS", template, "AWS::Logs::LogGroup.L", True
    )
    skipped = CheckovResult("CKV_AWS_66", "Retention", template, "AWS::Logs::LogGroup.L", False, "on purpose")
    (summary,) = summarize(directory, lint=background.lint, scan=lambda _: [finding, skipped])
    assert summary.checkov_open == [finding]
    assert summary.checkov_skipped == 1
    assert not summary.passed
    assert main([str(directory)], lint=background.lint, scan=lambda _: [finding, skipped]) == 1
    out = capsys.readouterr().out
    assert "[checkov] CKV_AWS_158 FAILED on AWS::Logs::LogGroup.L" in out
    (clean,) = summarize(directory, lint=background.lint, scan=lambda _: [skipped])
    assert clean.passed
    assert "checkov open / skipped" in column_headers(format_table([clean]))
