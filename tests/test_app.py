"""``app.py``, the CDK entry point: ``cdk deploy -c environment=FILE`` builds exactly that environment."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import aws_cdk as cdk
import pytest

from tests.scripts import load_script

from .conftest import CDK_CONTEXT, ROOT


def _app_module() -> ModuleType:
    return load_script("app.py", "cdk_app")


def _run(outdir: Path, environment: Path) -> int:
    """What ``cdk synth -c environment=<environment>`` runs, with the project's feature flags."""
    app = cdk.App(outdir=str(outdir), context={**CDK_CONTEXT, "environment": str(environment)})
    status: int = _app_module().run(app)
    return status


def test_one_environment_file_synthesizes_exactly_its_stack(tmp_path: Path) -> None:
    assert _run(tmp_path, ROOT / "environments" / "network-storage.yaml") == 0
    assert sorted(p.name for p in tmp_path.glob("*.template.json")) == [
        "training-network-storage.template.json"
    ]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    stacks = [name for name, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"]
    assert stacks == ["training-network-storage"]


def test_a_bad_file_exits_2_with_our_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "region: us-east-1\navailability_zones: [us-east-1a]\nstorage: {lustre: {storage_capacity_gib: 1000}}\n"
    )
    assert _run(tmp_path / "cdk.out", bad) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: 1 problem(s)")
    assert "storage.lustre" in err and "1000" in err


def test_run_by_a_python_without_the_cdk_it_says_what_to_type_instead_in_two_lines() -> None:
    """What ``npx cdk deploy`` gives when cdk.json's ``python3`` is not the project's (``-I -S``: a Python that
    sees no site-packages): a pointer to the command that finds the right one, not a traceback."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-I", "-S", "app.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"error: {sys.executable} has no aws_cdk: use .venv/bin/training-clusters deploy|diff|destroy FILE,\n"
        "which runs the CDK CLI with the project's Python and Node (or activate .venv first)\n"
    )
