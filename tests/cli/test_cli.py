"""The ``training-clusters`` console script: commands, output formats and exit codes.

The AWS side of ``preflight`` is tested in test_preflight.py with botocore's Stubber; here the checks are
canned and the script's rendering and exit status are what is tested.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.text_tables import unwrapped
from training_clusters import cli, preflight
from training_clusters.catalog import all_instance_types
from training_clusters.cli import common
from training_clusters.cli import schema as schema_module
from training_clusters.cli.cdk import CDK_ACTIONS

from ..conftest import ROOT

ENVIRONMENTS = ROOT / "environments"


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = cli.main(list(argv), stdout=out)
    return status, out.getvalue()


def test_catalog_lists_every_type_as_a_table_and_as_json() -> None:
    status, table = run("catalog")
    assert status == 0
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["type", "vCPUs", "GiB"]
    assert len(lines) == 2 + len(all_instance_types())
    p5 = next(line for line in lines if line.startswith("p5.48xlarge "))
    assert p5.split()[1:3] == ["192", "2048"] and "8 x H100" in p5 and " 32 " in p5
    status, document = run("--output", "json", "catalog")
    rows = json.loads(document)
    assert {r["name"] for r in rows} == {t.name for t in all_instance_types()}


def test_the_shipped_schema_is_current(checked_in: Callable[[str], str]) -> None:
    status, document = run("schema")
    assert status == 0
    shipped = json.loads(checked_in("environments/schema.json"))
    assert json.loads(document) == shipped, "environments/schema.json is stale: run `make schema`"


def test_schema_rejects_unknown_keys_and_names_every_section() -> None:
    schema = schema_module.environment_schema()
    assert schema["additionalProperties"] is False
    assert {"region", "network", "storage", "hyperpod", "parallelcluster", "eks", "tags"} <= set(
        schema["properties"]
    )
    assert schema["required"] == ["region", "availability_zones"]


def test_every_environment_file_points_editors_at_the_schema() -> None:
    for path in sorted(ENVIRONMENTS.glob("*.yaml")):
        assert path.read_text().startswith("# yaml-language-server: $schema=./schema.json\n"), path


def test_render_pcluster_prints_the_cluster_config(tmp_path: Path) -> None:
    status, text = run("render-pcluster", str(ENVIRONMENTS / "parallelcluster-c5n.yaml"))
    assert status == 0
    config = yaml.safe_load(text)
    assert config["Scheduling"]["Scheduler"] == "slurm"
    assert config["HeadNode"]["Networking"]["SubnetId"].startswith("subnet-")
    target = tmp_path / "cluster-config.yaml"
    status, text = run("render-pcluster", str(ENVIRONMENTS / "parallelcluster-c5n.yaml"), "-o", str(target))
    assert status == 0 and f"wrote {target}" in text
    assert yaml.safe_load(target.read_text()) == config


#: The comment that opens a rendered cluster-config.yaml of environments/parallelcluster-c5n.yaml.
RENDERED_HEADER = """\
# AWS ParallelCluster 3.16.1 configuration of the cluster in stack training-parallelcluster-c5n, rendered by
# cdk-training-clusters. It documents `cdk deploy` and does not replace it: the stack deploys this same
# configuration through ParallelCluster's CloudFormation provider (Custom::PclusterCluster). Use it to
# review the cluster, or with `pcluster create-cluster --cluster-configuration FILE` on a network, file
# system and security groups of your own instead of the stack's.
# A value marked `# placeholder` stands for an id known only after deploy: its comment names the
# resource, and the stack output `cdk deploy` prints with its value (or its logical id: aws
# cloudformation describe-stack-resource --stack-name STACK --logical-resource-id ID). After the
# deploy, `training-clusters render-pcluster ENVIRONMENT_FILE --deployed` fills in every one.
Region: us-east-1
"""
#: What looks like an id of AWS's in a rendered file: each must carry a comment saying it is a placeholder.
AWS_ID = re.compile(r"\b(subnet|sg|fs|vpc)-[0-9a-f]{8,17}\b|arn:aws|training-(placement-group|bucket)-")


def test_rendered_placeholders_say_what_replaces_them_and_the_file_passes_pclusters_schema() -> None:
    from tests.pcluster_schema import schema_errors

    status, text = run("render-pcluster", str(ENVIRONMENTS / "parallelcluster-c5n.yaml"))
    assert status == 0
    assert text.startswith(RENDERED_HEADER)
    config = yaml.safe_load(text)
    assert config["Region"] == "us-east-1"
    assert schema_errors(config) == []
    lines = text.splitlines()
    assert [line for line in lines if AWS_ID.search(line) and "  # placeholder: " not in line] == []
    placed = {line.strip() for line in lines if "# placeholder" in line}
    assert placed >= {
        "SubnetId: subnet-0123456789abcdef0  # placeholder: subnet Network/Resource/PrivateSubnet1/Subnet "
        "(output PlacementSubnetId)",
        "Name: training-placement-group-0  # placeholder: GroupName of placement group PlacementGroup "
        "(output PlacementGroupName)",
        "- sg-0123456789abcdef1  # placeholder: GroupId of security group Network/EfaSecurityGroup (output "
        "EfaSecurityGroupId)",
        "FileSystemId: fs-0123456789abcdef0  # placeholder: file system SharedStorage (resource "
        "SharedStorageA8297BFB)",
    }
    assert (
        "AllowedIps: 10.0.0.0/16" in lines[lines.index("  Ssh:") + 1]
    )  # the file's network.cidr: no placeholder


def test_rendered_json_is_the_files_document(tmp_path: Path) -> None:
    target = tmp_path / "cluster-config.yaml"
    status, text = run(
        "render-pcluster",
        str(ENVIRONMENTS / "parallelcluster-c5n.yaml"),
        "-o",
        str(target),
        "--output",
        "json",
    )
    assert status == 0
    assert json.loads(text)["config"] == yaml.safe_load(target.read_text())


#: How an environment file names a section of the README, the one way it may: ``the README's "<heading>"``.
README_SECTION = re.compile(r"README's \"([^\"]+)\"")
#: How it names a guide page: by its path, ``docs/<page>.md``.
GUIDE_PAGE = re.compile(r"\bdocs/[\w./-]+\.md\b")


def test_every_readme_section_or_guide_page_an_environment_file_names_exists() -> None:
    headings: set[str] = set()
    fenced = False
    for line in (ROOT / "README.md").read_text().splitlines():
        fenced ^= line.startswith("```")
        if line.startswith("#") and not fenced:
            headings.add(line.lstrip("#").strip())
    named = 0
    for path in sorted(ENVIRONMENTS.glob("*.yaml")):
        comments = " ".join(
            line.split("#", 1)[1].strip() for line in path.read_text().splitlines() if "#" in line
        )
        sections = README_SECTION.findall(comments)
        assert comments.count("README") == len(sections), f"{path.name}: names the README without a section"
        assert set(sections) <= headings, f"{path.name}: {set(sections) - headings} are not README headings"
        guides = GUIDE_PAGE.findall(comments)
        assert [g for g in guides if not (ROOT / g).is_file()] == [], (
            f"{path.name}: names a missing guide page"
        )
        named += len(sections) + len(guides)
    assert named >= 2  # hyperpod-team's docs/slurm-teams.md, parallelcluster-c5n's docs/cli.md


def test_render_pcluster_without_a_parallelcluster_section_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _ = run("render-pcluster", str(ENVIRONMENTS / "eks-g5-efa.yaml"))
    assert status == 2
    assert "eks-g5-efa.yaml: parallelcluster: render-pcluster needs a parallelcluster section" in (
        unwrapped(capsys.readouterr().err)
    )


def test_a_bad_file_exits_2_with_our_message_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("region: us-east-1\navailability_zones: [us-east-1a]\nnetwork: {nat_gatways: 1}\n")
    status, _ = run("acceptance", str(bad))
    err = unwrapped(capsys.readouterr().err)
    assert status == 2
    assert "network.nat_gatways: unknown key" in err
    assert "Traceback" not in err


def test_acceptance_writes_the_jobs_and_says_what_to_expect(tmp_path: Path) -> None:
    status, text = run("acceptance", str(ENVIRONMENTS / "parallelcluster-c5n.yaml"), "-d", str(tmp_path))
    assert status == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written and all(name in text for name in written)
    assert "MB/s" in text
    status, document = run(
        "--output", "json", "acceptance", str(ENVIRONMENTS / "eks-g5-efa.yaml"), "-d", str(tmp_path / "eks")
    )
    jobs = json.loads(document)["jobs"]
    assert status == 0 and jobs
    assert all(job["expected"] for job in jobs)


def test_acceptance_without_efa_or_gpus_says_there_is_nothing_to_verify(tmp_path: Path) -> None:
    status, text = run("acceptance", str(ENVIRONMENTS / "hyperpod-slurm.yaml"), "-d", str(tmp_path))
    assert status == 0
    assert "nothing to verify" in text
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


# --------------------------------------------------------------------------------------------------
# preflight: rendering and exit status


def _canned(monkeypatch: pytest.MonkeyPatch, checks: list[preflight.Check]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake_preflight(config: Any, clients: Any) -> list[preflight.Check]:
        calls.append({"region": config.region, "clients": clients})
        return checks

    monkeypatch.setattr(preflight, "preflight", fake_preflight)
    monkeypatch.setattr(
        preflight.AwsClients, "from_session", classmethod(lambda cls, session, region: region)
    )
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")  # credentials, so preflight goes on to ask
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example")
    return calls


def _check(passed: bool, needed: str = "32 vCPUs", available: str = "8 vCPUs") -> preflight.Check:
    return preflight.Check(
        check="EC2 quota L-DB2E81BA Running On-Demand G and VT instances",
        needed=needed,
        available=available,
        passed=passed,
        remedy="" if passed else "request an increase to at least 32",
    )


def test_preflight_failure_exits_1_and_shows_the_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _canned(monkeypatch, [_check(False)])
    status, text = run("preflight", str(ENVIRONMENTS / "eks-g5-efa.yaml"))
    assert status == 1
    assert calls[0]["clients"] == "us-east-1"
    row = text.splitlines()[2]
    assert "Running On-Demand G and VT instances" in row and "32 vCPUs" in row and "8 vCPUs" in row
    assert row.endswith("FAIL    [1]")
    assert "\n\nto fix:\n[1] request an increase to at least 32\n" in text
    assert "1 of 1 checks failed" in text


def test_preflight_pass_exits_0_and_json_is_machine_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    _canned(monkeypatch, [_check(True, available="64 vCPUs")])
    status, document = run(
        "--output", "json", "preflight", str(ENVIRONMENTS / "eks-g5-efa.yaml"), "--region", "us-east-1"
    )
    result = json.loads(document)
    assert status == 0
    assert (result["passed"], result["region"]) == (True, "us-east-1")
    assert result["checks"][0]["available"] == "64 vCPUs"


#: Where botocore looks for credentials besides the two files (which the test points at empty ones).
CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
)


@pytest.fixture
def aws_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No credentials anywhere botocore looks, nothing it could reach to get some; the config file (empty
    but for a profile ``dev`` without credentials) is returned for a test to add profiles to."""
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    config, credentials = tmp_path / "config", tmp_path / "credentials"
    config.write_text("[profile dev]\nregion = us-east-1\n")
    credentials.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("HOME", str(tmp_path))  # no cached SSO token either (~/.aws/sso/cache)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata service to wait for
    return config


@pytest.mark.parametrize(
    ("options", "found"),
    [([], ""), (["--profile", "dev"], " for profile 'dev'")],
    ids=["default chain", "profile without credentials"],
)
def test_preflight_without_credentials_says_so_in_one_line_and_what_it_would_check_and_exits_2(
    options: list[str], found: str, aws_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = run("preflight", str(ENVIRONMENTS / "eks-g5-efa.yaml"), *options)

    err = unwrapped(capsys.readouterr().err)
    assert status == 2
    assert err == (
        f"error: preflight found no AWS credentials{found}: give --profile P, set AWS_PROFILE, or run aws configure\n"
    )
    assert out == (
        textwrap.fill(
            f"offline, from {ENVIRONMENTS / 'eks-g5-efa.yaml'}: with credentials preflight checks these groups "
            "against the quotas, offerings and EFA support of us-east-1 (--region R for another), and the file "
            "system's quota",
            120,
            break_on_hyphens=False,
        )
        + "\n\n"
        "group                   instances       vCPUs  EC2 quota   bought     EFA\n"
        "----------------------  --------------  -----  ----------  ---------  ---\n"
        "eks.system_nodegroup    t3.large x 2    4      L-1216C47A  on-demand  no\n"
        "eks.efa_nodegroups[g5]  g5.8xlarge x 2  64     L-DB2E81BA  on-demand  yes\n"
        "\n"
        + textwrap.fill(
            f"it calls, read-only: {', '.join(preflight.REQUIRED_IAM_ACTIONS)}", 120, break_on_hyphens=False
        )
        + "\n"
    )


def test_preflight_without_credentials_as_json_gives_the_groups_and_the_actions(
    aws_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = run("preflight", str(ENVIRONMENTS / "eks-g5-efa.yaml"), "--output", "json")

    assert status == 2
    assert unwrapped(capsys.readouterr().err).count("\n") == 1
    document = json.loads(out)
    assert document["credentials"] is False
    assert [
        (d["where"], d["instance_type"], d["count"], d["vcpus"], d["efa"]) for d in document["demands"]
    ] == [
        ("eks.system_nodegroup", "t3.large", 2, 4, False),
        ("eks.efa_nodegroups[g5]", "g5.8xlarge", 2, 64, True),
    ]
    assert document["iam_actions"] == list(preflight.REQUIRED_IAM_ACTIONS)


def test_preflight_with_credentials_that_cannot_be_loaded_says_so_in_one_line_and_exits_2(
    aws_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An SSO profile whose token was never fetched (``aws sso login``): botocore defers loading its
    credentials to the first call; preflight loads them before any check."""
    with aws_config.open("a") as config:
        config.write(
            "[profile sso]\nsso_start_url = https://example.awsapps.com/start\nsso_region = us-east-1\n"
            "sso_account_id = 111111111111\nsso_role_name = ReadOnly\n"
        )

    status, out = run("preflight", str(ENVIRONMENTS / "eks-g5-efa.yaml"), "--profile", "sso")

    assert (status, out) == (2, "")
    assert unwrapped(capsys.readouterr().err) == (
        "error: cannot reach AWS in us-east-1: Error loading SSO Token: Token for "
        "https://example.awsapps.com/start does not exist\n"
    )


def test_the_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "training-clusters"
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True)
    for command in ("preflight", "render-pcluster", "acceptance", "cleanup", "catalog", "schema"):
        assert command in result.stdout


def test_the_cli_guide_lists_exactly_the_iam_actions_preflight_calls() -> None:
    guide = (ROOT / "docs" / "cli.md").read_text()
    section = guide[guide.index("- **preflight**") : guide.index("- **render-pcluster**")]
    listed = set(re.findall(r"`((?:servicequotas|ec2|sagemaker):\w+)`", section))
    assert listed == set(preflight.REQUIRED_IAM_ACTIONS)


# --------------------------------------------------------------------------------------------------
# paths: every path argument of every command, missing, unwritable or of the wrong kind, is one line and
# exit status 2. Commands are read from the parser, so a new command's path arguments are tried too: give
# them one of cli's path types.

PATH_TYPES: dict[Any, str] = {
    common.input_file: "input file",
    common.output_file: "output file",
    common.output_dir: "output directory",
    common.input_dir: "input directory",
}
#: Path arguments of commands that check their paths themselves, by (command, dest).
#: Valid values for a command's other path arguments while one is tried, by kind.
VALID_ENVIRONMENT = ENVIRONMENTS / "parallelcluster-c5n.yaml"


def _commands() -> dict[str, argparse.ArgumentParser]:
    subparsers = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(subparsers.choices)


def _looks_like_a_path(action: argparse.Action) -> bool:
    dest = action.dest
    return dest in ("file", "directory", "assembly") or dest.endswith(
        ("_file", "_dir", "_directory", "_path")
    )


def _path_arguments() -> list[tuple[str, argparse.Action, str]]:
    found = []
    for name, parser in _commands().items():
        for action in parser._actions:
            if action.type in PATH_TYPES:
                found.append((name, action, PATH_TYPES[action.type]))
    return found


#: Bad values of each kind: (case, path relative to the test's directory, the part the message must name).
#: ``{unwritable}`` is a directory that cannot be written to (see :func:`unwritable`).
BAD_PATHS = {
    "input file": [("missing", "missing.yaml", "missing.yaml"), ("a directory", "adir", "adir")],
    "input directory": [("missing", "missing-dir", "missing-dir"), ("a file", "afile", "afile")],
    "output file": [
        ("directory missing", "missing-dir/out.svg", "missing-dir"),
        ("under a file", "afile/out.svg", "afile"),
        ("a directory", "adir.svg", "adir.svg"),
        ("unwritable", "{unwritable}/out.svg", "{unwritable}"),
    ],
    "output directory": [
        ("a file", "afile", "afile"),
        ("under a file", "afile/sub", "afile"),
        ("unwritable", "{unwritable}/sub", "{unwritable}"),
    ],
}
PATH_CASES = [
    pytest.param(name, action, kind, case, bad, named, id=f"{name}-{action.dest}-{case}")
    for name, action, kind in _path_arguments()
    for case, bad, named in BAD_PATHS[kind]
]


def test_every_path_argument_of_every_command_is_checked() -> None:
    """A path argument without one of cli's path types fails here."""
    unchecked = [
        f"{name} {action.dest}"
        for name, parser in _commands().items()
        for action in parser._actions
        if _looks_like_a_path(action) and action.type not in PATH_TYPES
    ]
    assert unchecked == []
    assert {name for name, _, _ in _path_arguments()} >= {"preflight", "render-pcluster", "acceptance"}


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[Path]:
    """A directory where creating a file fails: mode 0555 for a user; for root (who ignores modes), /sys."""
    if os.geteuid() != 0:
        directory = tmp_path / "read-only"
        directory.mkdir()
        directory.chmod(0o555)
        yield directory
        directory.chmod(0o755)
        return
    directory = Path("/sys")
    try:
        (directory / "probe").touch()
    except OSError:
        yield directory
    else:
        pytest.skip("no directory here refuses root's writes")


def _argv(name: str, tried: argparse.Action, kind: str, bad: str) -> list[str]:
    """The command line: ``bad`` for the tried argument and a valid environment file for the command's
    required one (for an optional one too when an output is tried: the output is written from it)."""
    argv = [name]
    for action in _commands()[name]._actions:
        positional = not action.option_strings
        if action.dest == tried.dest:
            value = bad
        elif (positional and action.nargs != "?") or (positional and kind.startswith("output")):
            value = str(VALID_ENVIRONMENT)
        elif action.required:
            raise AssertionError(f"{name}: give the test a valid value for {action.dest}")
        else:
            continue
        argv += [value] if positional else [action.option_strings[0], value]
    return argv


@pytest.mark.parametrize(("name", "action", "kind", "case", "bad", "named"), PATH_CASES)
def test_a_bad_path_is_one_line_and_exit_2(
    name: str,
    action: argparse.Action,
    kind: str,
    case: str,
    bad: str,
    named: str,
    tmp_path: Path,
    unwritable: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("not a directory\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "adir.svg").mkdir()
    bad, named = bad.format(unwritable=unwritable), named.format(unwritable=unwritable)
    status, out = run(*_argv(name, action, kind, bad))
    err = unwrapped(capsys.readouterr().err)
    assert (status, out) == (2, ""), err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert named in err and "Traceback" not in err
    assert not (tmp_path / "missing-dir").exists()


# --------------------------------------------------------------------------------------------------
# untrusted command lines: one line, exit 2, never a traceback


def test_an_option_is_never_taken_for_a_longer_one_it_begins() -> None:
    """``--output json`` after the command is ``--output``, not ``--output-file json`` (argparse's prefix
    matching), and an abbreviation is refused before or after the command."""
    args = cli._parser().parse_args(["render-pcluster", str(VALID_ENVIRONMENT), "--output", "json"])
    assert (args.output, args.output_file) == ("json", None)
    assert run("--out", "json", "catalog")[0] == 2
    assert run("catalog", "--out", "json")[0] == 2


@pytest.mark.parametrize(
    ("region", "fragment"),
    [
        ("us-east-1\n", "must be an AWS region such as us-east-1, got 'us-east-1\\n'"),
        ("us-east-" + "1" * 100_000, "(100008 characters)"),
        ("\x1b[31mus-east-1", "got '\\x1b[31mus-east-1'"),
    ],
    ids=["newline", "huge", "escape"],
)
def test_preflight_refuses_a_region_that_is_not_one_in_one_short_line(
    region: str, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = run("preflight", str(ENVIRONMENTS / "eks-g5-efa.yaml"), "--region", region)
    err = unwrapped(capsys.readouterr().err)
    assert (status, out) == (2, "")
    assert err.startswith("error: ") and err.count("\n") == 1 and "--region" in err, err[:2000]
    assert fragment in err and len(err) < 1024 and "\x1b" not in err


def test_preflight_quotes_an_unknown_profile_bounded_and_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    profile = "\x1b[31m" + "p" * 100_000 + "\nsecond line"
    status, out = run("preflight", str(ENVIRONMENTS / "eks-g5-efa.yaml"), "--profile", profile)
    err = unwrapped(capsys.readouterr().err)
    assert (status, out) == (2, "")
    assert err.startswith("error: cannot reach AWS in us-east-1") and err.count("\n") == 1, err[:2000]
    assert len(err) < 1024 and "\x1b" not in err and "\\x1b[31mppp" in err


def test_preflight_checks_the_file_name_as_every_command_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _canned(monkeypatch, [_check(True)])
    badly_named = tmp_path / "1 g5.yaml"
    badly_named.write_text((ENVIRONMENTS / "eks-g5-efa.yaml").read_text())
    status, out = run("preflight", str(badly_named))
    err = unwrapped(capsys.readouterr().err)
    assert (status, out) == (2, "")
    assert "the file name '1 g5' names the environment and its stack" in err and err.count("\n") == 1


# --------------------------------------------------------------------------------------------------
# console-script conventions: --output after the command, --version, a closed pipe, examples in --help


SCRIPT = Path(sys.executable).parent / "training-clusters"


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert (exited.value.code, capsys.readouterr().out) == (0, f"training-clusters {project['version']}\n")


@pytest.mark.parametrize("command", ["schema", "catalog"])
def test_a_reader_that_stops_early_ends_the_script_quietly(command: str) -> None:
    """``training-clusters schema | head -n 1``: once head has exited, each write to the pipe fails (EPIPE).
    The reading end is closed before the script starts, so the pipe is broken whatever its size (the schema
    fills a pipe's buffer, the catalogue does not: it fails when standard output is flushed). Python's
    "Note on SIGPIPE": no message, status 1."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [str(SCRIPT), command], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (1, "")


def _help(*argv: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_help_ends_with_examples_and_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert _help(capsys=capsys).endswith(
        """examples:
  training-clusters preflight environments/eks-g5-efa.yaml --profile dev
  training-clusters preflight environments/eks-g5-efa.yaml --output json > preflight.json
  training-clusters render-pcluster environments/parallelcluster-c5n.yaml -o cluster-config.yaml
  training-clusters render-pcluster environments/parallelcluster-c5n.yaml --deployed -o cluster-config.yaml
  training-clusters acceptance environments/parallelcluster-c5n.yaml -d acceptance/
  training-clusters diagram environments/eks-p5-efa.yaml -o eks-p5-efa.svg
  training-clusters diagram --assembly cdk.out --stack training-eks-p5-efa -o eks-p5-efa.png
  training-clusters diagram --assembly cdk.out -d pictures/
  training-clusters cleanup environments/network-storage.yaml --dry-run
  training-clusters cleanup environments/network-storage.yaml
  training-clusters cleanup environments/network-storage.yaml --delete --backup
  training-clusters connect environments/hyperpod-team.yaml --node login
  training-clusters connect environments/parallelcluster-c5n.yaml --print
  training-clusters bootstrap environments/parallelcluster-c5n.yaml --profile dev
  training-clusters deploy environments/parallelcluster-c5n.yaml
  training-clusters deploy environments/parallelcluster-c5n.yaml --require-approval never --profile dev
  training-clusters diff environments/parallelcluster-c5n.yaml
  training-clusters destroy environments/parallelcluster-c5n.yaml
  training-clusters catalog --output json
  training-clusters schema > environments/schema.json

Every command takes --output json, before or after its name (bootstrap, deploy, diff and destroy pass what
follows the file to the CDK CLI, whose --output is the assembly's folder). Exit status: 0 ok, 1 a check
failed, 2 a bad file, path or command line, or no AWS credentials (one line on standard error); bootstrap,
deploy, diff and destroy exit with the CDK CLI's status.
"""
    )


@pytest.mark.parametrize("name", sorted(_commands()))
def test_each_command_help_ends_with_its_examples(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    examples = cli.EXAMPLES[name]
    assert examples and all(e.startswith(f"training-clusters {name} ") for e in examples)
    assert _help(name, capsys=capsys).endswith(
        "examples:\n" + "".join(f"  {example}\n" for example in examples)
    )


def test_every_example_is_a_valid_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each example parses (its paths checked as they would be), in a directory holding environments/ and a
    cloud assembly; a shell redirection or pipe ends the command line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "environments").symlink_to(ENVIRONMENTS)
    (tmp_path / "cdk.out").mkdir()
    assert set(cli.EXAMPLES) == set(_commands())
    for name, examples in cli.EXAMPLES.items():
        for example in examples:
            program, *argv = shlex.split(re.split(r" [|>] ", example)[0])
            args = cli._parser().parse_args(argv)
            assert (program, args.command) == ("training-clusters", _commands()[name].get_default("command"))


@pytest.mark.parametrize("name", sorted(set(_commands()) - set(CDK_ACTIONS)))
def test_output_is_taken_before_or_after_the_command(name: str) -> None:
    required = [
        str(VALID_ENVIRONMENT)
        for action in _commands()[name]._actions
        if not action.option_strings and action.nargs != "?"
    ]
    argv = [name, *required]
    parse = cli._parser().parse_args
    chosen = [
        parse(argv).output,
        parse(["--output", "json", *argv]).output,
        parse([*argv, "--output", "json"]),
    ]
    assert [chosen[0], chosen[1], chosen[2].output] == ["table", "json", "json"]


@pytest.mark.parametrize("name", CDK_ACTIONS)
def test_what_follows_the_file_of_a_cdk_command_goes_to_the_cdk_cli(name: str) -> None:
    """deploy, diff and destroy take no --output of ours: the CDK CLI's --output names the assembly's folder."""
    args = cli._parser().parse_args(
        [name, str(VALID_ENVIRONMENT), "--output", "out", "--profile", "dev", "--require-approval", "never"]
    )
    assert (args.cdk_action, args.cdk_args) == (
        name,
        ["--output", "out", "--profile", "dev", "--require-approval", "never"],
    )
    assert args.output == "table"  # the default of the option before the command's name


def test_catalog_gives_the_same_json_with_output_after_the_command() -> None:
    before, after = run("--output", "json", "catalog"), run("catalog", "--output", "json")
    assert after == before and before[0] == 0
    assert json.loads(before[1])
