"""The package is importable by other CDK apps: build the wheel, install it in a clean venv, synth an app."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ..conftest import ROOT

DOWNSTREAM_APP = """
import aws_cdk as cdk
from training_clusters.constructs.network import TrainingNetwork
from training_clusters.constructs.lustre import SharedLustre
from training_clusters.compliance import add_compliance_checks

app = cdk.App()
stack = cdk.Stack(app, "Downstream", env=cdk.Environment(region="us-east-1"))
network = TrainingNetwork(stack, "Network", max_azs=2)
fs = SharedLustre(stack, "Fsx", vpc=network.vpc, subnet=network.placement_subnet())
fs.allow_clients_from(network)
add_compliance_checks(app)
app.synth()
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("cdk_training_clusters-*.whl")
    return built


def test_wheel_carries_the_lifecycle_scripts_and_type_marker(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "training_clusters/py.typed" in names
    assert "training_clusters/lifecycle_scripts/on_create.sh" in names
    assert any(n.startswith("training_clusters/lifecycle_scripts/lib/") for n in names)
    assert not any(n.startswith("constructs/") for n in names), (
        "must never ship a top-level constructs package"
    )


@pytest.mark.slow
def test_downstream_app_synthesizes_with_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "app.py").write_text(DOWNSTREAM_APP)
    env = {
        **os.environ,
        "CDK_OUTDIR": str(app_dir / "cdk.out"),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    env.pop("PYTHONPATH", None)
    result = subprocess.run([str(python), "app.py"], cwd=app_dir, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    template = (app_dir / "cdk.out" / "Downstream.template.json").read_text()
    assert "AWS::FSx::FileSystem" in template
    # the installed copy, not the source tree, was used
    where = subprocess.run(
        [str(python), "-c", "import training_clusters, sys; print(training_clusters.__file__)"],
        cwd=app_dir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(venv) in where
