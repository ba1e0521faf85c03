"""Tables fit a 120-column terminal: the wrapping itself, then every table a user sees, rendered for a shipped
environment (``make synth``'s summary, ``preflight``, ``acceptance``), each line at most 120 characters and
every column under a header; ``--output json`` keeps every column."""

from __future__ import annotations

import io
import json
from pathlib import Path

import aws_cdk as cdk
import pytest

from training_clusters import cli, preflight
from training_clusters.environments import add_environment
from training_clusters.gates.compliance import add_compliance_checks, synth_with_checks
from training_clusters.gates.summary import format_table, main, summarize
from training_clusters.model.tables import numbered_notes, text_table

from .cli.test_preflight import Account, quota
from .conftest import CDK_CONTEXT, ROOT
from .text_tables import assert_fits, column_headers

ENVIRONMENTS = ROOT / "environments"


# --------------------------------------------------------------------------------------------------
# text_table


def test_a_table_that_fits_is_left_as_it_was() -> None:
    assert text_table(("type", "GiB"), [("p5.48xlarge", "2048"), ("t3.large", "8")]) == (
        "type         GiB\n-----------  ----\np5.48xlarge  2048\nt3.large     8"
    )


def test_a_wide_table_wraps_its_widest_cells_at_spaces_headers_too() -> None:
    table = text_table(
        ("job", "a healthy cluster gives"),
        [
            ("nccl.sbatch", "bus bandwidth about 320 GB/s; fails below 160 GB/s"),
            ("osu.sbatch", "under 20 us"),
        ],
        width=40,
    )
    assert table == (
        "job          a healthy cluster gives\n"
        "-----------  ---------------------------\n"
        "nccl.sbatch  bus bandwidth about 320\n"
        "             GB/s; fails below 160 GB/s\n"
        "osu.sbatch   under 20 us"
    )
    assert column_headers(table) == ["job", "a healthy cluster gives"]
    narrow = text_table(("open / acknowledged", "x"), [("3 / 40", "y")], width=16)
    assert narrow == "open /         x\nacknowledged\n-------------  -\n3 / 40         y"
    assert column_headers(narrow) == ["open / acknowledged", "x"]


def test_words_are_cut_only_when_every_column_is_down_to_its_longest_word() -> None:
    table = text_table(("name", "value"), [("training-parallelcluster-p5", "a b")], width=20)
    assert table == ("name           value\n-------------  -----\ntraining-para  a b\nllelcluster-p\n5")


def test_without_a_width_nothing_wraps() -> None:
    cell = "x " * 100
    assert text_table(("a",), [(cell,)], width=None).splitlines()[2] == cell.rstrip()


def test_an_aws_command_among_the_notes_wraps_with_shell_continuations_and_prose_under_its_text() -> None:
    command = (
        "aws service-quotas request-service-quota-increase --service-code sagemaker --quota-code L-0000A002 "
        "--desired-value 2 --region us-east-1"
    )
    prose = "the quota is not adjustable: lower hyperpod.instance_groups[workers].count to fit 0 instances"
    assert numbered_notes([command, prose], width=60) == (
        "[1] aws service-quotas request-service-quota-increase \\\n"
        "    --service-code sagemaker --quota-code L-0000A002 \\\n"
        "    --desired-value 2 --region us-east-1\n"
        "[2] the quota is not adjustable: lower\n"
        "    hyperpod.instance_groups[workers].count to fit 0\n"
        "    instances"
    )


# --------------------------------------------------------------------------------------------------
# make synth's summary


#: The shipped environment with the longest stack name: the summary's widest first column.
LONGEST_STACK = ENVIRONMENTS / "parallelcluster-p5-capacity-block.yaml"


def test_the_synth_summary_of_a_shipped_environment_fits_and_json_keeps_every_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = cdk.App(outdir=str(tmp_path / "cdk.out"), context=dict(CDK_CONTEXT))
    add_environment(app, LONGEST_STACK)
    add_compliance_checks(app)
    assembly, _ = synth_with_checks(app)
    assert assembly is not None
    (summary,) = summarize(assembly.directory, lint=lambda template, regions: [], scan=lambda templates: [])

    table = format_table([summary])

    assert_fits(table)
    assert column_headers(table) == [
        "stack",
        "region",
        "resources",
        "AwsSolutions open / acknowledged",
        "cfn-lint errors / warnings",
        "checkov open / skipped",
        "NIST (info) open / acknowledged",
        "gates",
    ]
    row = " ".join(table.splitlines()[4:])
    assert row.split()[:3] == [
        "training-parallelcluster-p5-capacity-block",
        "us-east-1",
        str(summary.resources),
    ]
    assert f"0 / {summary.nag_acknowledged}" in row and row.endswith("ok")

    assert main([assembly.directory, "--no-lint", "--no-checkov", "--output", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (template,) = document["templates"]
    assert document["passed"] is True
    assert {key: template[key] for key in ("stack", "resources", "nag_open", "nag_acknowledged")} == {
        "stack": "training-parallelcluster-p5-capacity-block",
        "resources": summary.resources,
        "nag_open": 0,
        "nag_acknowledged": summary.nag_acknowledged,
    }
    assert set(template) >= {
        "region",
        "lint_errors",
        "lint_warnings",
        "checkov_open",
        "checkov_skipped",
        "nist_open",
        "nist_acknowledged",
        "passed",
    }


# --------------------------------------------------------------------------------------------------
# preflight


def hyperpod_account_without_room_for_p5() -> Account:
    """SageMaker and FSx quotas for hyperpod-p5 with none for its ml.p5.48xlarge workers."""
    account = Account()
    account.listed_quotas(
        "sagemaker",
        [
            quota("sagemaker", "L-0000A001", "ml.m5.2xlarge for cluster usage", 4),
            quota("sagemaker", "L-0000A002", "ml.p5.48xlarge for cluster usage", 0),
            quota(
                "sagemaker",
                "L-0000A003",
                "Maximum number instances allowed per SageMaker HyperPod cluster",
                20,
            ),
            quota(
                "sagemaker",
                "L-0000A004",
                "Total number of instances allowed across SageMaker HyperPod clusters",
                100,
            ),
            quota(
                "sagemaker",
                "L-0000A005",
                "Maximum size of EBS volume in GB for a SageMaker HyperPod cluster instance",
                2000,
            ),
        ],
    )
    account.listed_quotas("fsx", [quota("fsx", "L-8F1B9C74", "Lustre Persistent_2 storage capacity", 100800)])
    return account


def run_preflight(monkeypatch: pytest.MonkeyPatch, *options: str) -> tuple[int, str]:
    """``training-clusters preflight environments/hyperpod-p5.yaml`` against that account (real boto3 clients
    under botocore's Stubber)."""
    account = hyperpod_account_without_room_for_p5()
    monkeypatch.setattr(preflight.AwsClients, "from_session", classmethod(lambda cls, s, r: account.clients))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # no cluster of the file's name yet: preflight's last question (its slurm_config check)
    account.sagemaker.add_client_error(
        "describe_cluster", service_error_code="ResourceNotFound", service_message="Cluster not found"
    )
    out = io.StringIO()
    with account.quotas, account.ec2, account.sagemaker:
        status = cli.main(["preflight", str(ENVIRONMENTS / "hyperpod-p5.yaml"), *options], stdout=out)
    account.quotas.assert_no_pending_responses()
    return status, out.getvalue()


def test_the_preflight_table_of_a_shipped_environment_fits_with_each_fix_below_it_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hyperpod-p5 in an account without room for its p5 workers: SageMaker's long quota names and the
    quota-increase command make the widest preflight rows."""
    status, text = run_preflight(monkeypatch)

    table, fixes = text.split("\n\nto fix:\n")
    assert status == 1
    assert_fits(text)
    assert column_headers(table) == ["check", "needed", "available", "result", "fix"]
    lines = table.splitlines()
    [failed] = [n for n, line in enumerate(lines) if " FAIL " in line]
    assert lines[failed].split("  ")[0] == "SageMaker quota L-0000A002"
    assert lines[failed].endswith("0 instances    FAIL    [1]")
    assert lines[failed + 1].startswith(
        "ml.p5.48xlarge for cluster usage    hyperpod.instance_groups[gpu-workers])"
    )
    # the command runs as printed: its shell continuations join it back into the exact remedy
    command = fixes.split("\n\n")[0].replace(" \\\n    ", " ")
    assert command == (
        "[1] aws service-quotas request-service-quota-increase --service-code sagemaker --quota-code "
        "L-0000A002 --desired-value 2 --region us-east-1"
    )

    status, document = run_preflight(monkeypatch, "--output", "json")
    checks = json.loads(document)["checks"]
    assert status == 1
    assert {tuple(check) for check in checks} == {
        ("check", "needed", "available", "passed", "remedy", "warning")
    }
    assert [c["remedy"] for c in checks if not c["passed"]] == [command.removeprefix("[1] ")]


# --------------------------------------------------------------------------------------------------
# acceptance


@pytest.mark.parametrize("name", ["eks-p5-efa", "parallelcluster-p5-capacity-block"])
def test_the_acceptance_table_of_a_shipped_environment_fits(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The jobs of the longest-named environment and of EKS (the longest expectations), written where the
    command writes them by default (acceptance/<environment>)."""
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()

    assert cli.main(["acceptance", str(ENVIRONMENTS / f"{name}.yaml")], stdout=out) == 0

    table = out.getvalue().split("\n\n")[0]
    assert_fits(table)
    assert column_headers(table) == ["job", "a healthy cluster gives"]
    rows = [line for line in table.splitlines()[2:] if not line.startswith(" ")]
    assert rows == [line for line in rows if line.startswith(f"acceptance/{name}/")]
    assert len(rows) == len(list((tmp_path / "acceptance" / name).iterdir()))
