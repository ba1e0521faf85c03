"""The package is importable by other CDK apps: build the wheel, install it, synth a downstream app.

Installing into a clean virtual environment would download aws-cdk-lib and friends (a minute on this
machine), so the wheel is installed without dependencies into a folder of its own and run with the
project's dependencies; a separate test checks that every third-party module the package imports at
module level is declared in the wheel's ``Requires-Dist``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import background

from ..conftest import ROOT

DOWNSTREAM_APP = """
import aws_cdk as cdk
from training_clusters.constructs import SharedLustre, TrainingNetwork
from training_clusters.compliance import add_compliance_checks

app = cdk.App()
stack = cdk.Stack(app, "Downstream", env=cdk.Environment(region="us-east-1"))
network = TrainingNetwork(stack, "Network", max_azs=2)
fs = SharedLustre(stack, "Fsx", vpc=network.vpc, subnet=network.placement_subnet())
fs.allow_clients_from(network)
add_compliance_checks(app)
app.synth()
"""


@dataclass(frozen=True)
class Downstream:
    """The wheel, and what happened when a downstream app used it."""

    wheel: Path
    installed_from: str
    run: subprocess.CompletedProcess[str]
    template: str | None


def _build_install_and_run() -> Downstream:
    work = Path(tempfile.mkdtemp(prefix="wheel-"))
    # Build from a clean copy: setuptools keeps a build/ folder next to the sources, and a stale one would
    # let the wheel ship modules the checkout no longer has (and the test would write into the repository).
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "training_clusters", source / "training_clusters", ignore=shutil.ignore_patterns("__pycache__")
    )
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(work / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel_file,) = (work / "dist").glob("cdk_training_clusters-*.whl")
    target = work / "site"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(wheel_file),
        ],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    app_dir = work / "app"
    app_dir.mkdir()
    (app_dir / "app.py").write_text(DOWNSTREAM_APP)
    # The installed copy comes first on the path, ahead of the editable checkout. Assets are staged as in a
    # user's synth (package data must be found); CDK's built-in validation stays off as in the rest of the
    # suite (its engine costs ~10 CPU-seconds to start, and this test asserts on our package, not on it).
    env = {**os.environ, "CDK_OUTDIR": str(app_dir / "cdk.out"), "PYTHONPATH": str(target)}
    env.pop("CDK_CONTEXT_JSON")  # the suite's context that skips asset staging
    where = subprocess.run(
        [sys.executable, "-c", "import training_clusters; print(training_clusters.__file__)"],
        cwd=app_dir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    run = subprocess.run([sys.executable, "app.py"], cwd=app_dir, env=env, capture_output=True, text=True)
    template = app_dir / "cdk.out" / "Downstream.template.json"
    return Downstream(wheel_file, where, run, template.read_text() if template.exists() else None)


#: Started when this module is collected: building, installing and running it overlap the rest of the suite.
_DOWNSTREAM = background.start(_build_install_and_run)


@pytest.fixture(scope="module")
def wheel() -> Path:
    return _DOWNSTREAM.result().wheel


def test_wheel_carries_the_lifecycle_scripts_handlers_and_type_marker(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "training_clusters/py.typed" in names
    assert "training_clusters/lifecycle_scripts/on_create.sh" in names
    assert any(n.startswith("training_clusters/lifecycle_scripts/lib/") for n in names)
    assert "training_clusters/handlers/release_manifest/index.py" in names
    assert not any(n.startswith("constructs/") for n in names), (
        "must never ship a top-level constructs package"
    )
    assert not any(n.startswith("tests/") for n in names)


def test_every_module_level_import_is_a_declared_dependency(wheel: Path) -> None:
    metadata = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    requires = {
        _normalise(re.split(r"[ ;<>=!~\[(]", line.removeprefix("Requires-Dist: "), maxsplit=1)[0])
        for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
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


def test_downstream_app_synthesizes_with_the_installed_wheel() -> None:
    downstream = _DOWNSTREAM.result()
    assert downstream.installed_from.startswith(tempfile.gettempdir()), downstream.installed_from
    assert "/site/training_clusters/" in downstream.installed_from
    assert downstream.run.returncode == 0, downstream.run.stderr[-3000:]
    assert downstream.template is not None and "AWS::FSx::FileSystem" in downstream.template


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
