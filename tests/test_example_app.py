"""examples/constructs/ is docs/constructs.md's example as a ready CDK project, and the CDK CLI synthesizes it.

The guide shows the code; the folder adds what a project needs around it: ``cdk.json`` (the app command and the
feature flags this repository is tested with) and ``package.json`` (the CDK CLI, and the two npm packages
``training-clusters diagram`` draws with), at the versions the guide's install steps name.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT
from .test_readme_examples import BLOCKS

EXAMPLE = ROOT / "examples" / "constructs"
SECTION = "Use the constructs in your own app"
PLAN_ARN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"


def _guide_section() -> str:
    """docs/constructs.md from its title to its first subsection."""
    text = (ROOT / "docs" / "constructs.md").read_text()
    start = text.index(f"# {SECTION}\n")
    return text[start : text.index("\n## ", start + 1)]


def test_the_example_folder_holds_the_guide_example_verbatim() -> None:
    (block,) = [
        b
        for b in BLOCKS
        if b.page == "docs/constructs.md" and b.heading == SECTION and "app.synth()" in b.code
    ]
    app = (EXAMPLE / "app.py").read_text()
    header, _, code = app.partition("import aws_cdk as cdk\n")
    assert "import aws_cdk as cdk\n" + code == block.code
    assert all(line.startswith("#") for line in header.splitlines())


def test_its_cdk_json_runs_the_app_with_the_flags_the_repository_is_tested_with() -> None:
    example = json.loads((EXAMPLE / "cdk.json").read_text())
    assert example["app"] == "python3 app.py"
    assert example["context"] == json.loads((ROOT / "cdk.json").read_text())["context"]


def test_its_package_json_and_the_guide_s_install_steps_pin_what_the_repository_uses() -> None:
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]
    assert json.loads((EXAMPLE / "package.json").read_text())["devDependencies"] == pinned
    installed = {
        name: version
        for line in _guide_section().splitlines()
        if line.startswith("npm install --save-dev ")
        for name, version in re.findall(r"(@?[\w./-]+)@(\d[\w.-]*)", line.split("#")[0])
    }
    assert installed == pinned  # the CDK CLI, Graphviz (diagram's SVG) and resvg (its PNG)


def _chart_values(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        r["Properties"]["Chart"]: json.loads(r["Properties"]["Values"])
        for r in template["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }


def test_the_cdk_cli_synthesizes_the_example_folder(tmp_path: Path) -> None:
    """``npx cdk synth`` from the folder, as its guide line says (the CLI from this repository's node_modules,
    found the way npx finds it: in the folders above)."""
    bin_dir = ROOT / ".venv" / "bin"
    if not (bin_dir / "npx").exists() or not (ROOT / "node_modules" / ".bin" / "cdk").exists():
        pytest.skip("no .venv/bin/npx or node_modules/.bin/cdk: run make bootstrap")
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(ROOT),  # the package from this tree, as `pip install` would give it
        "CDK_DISABLE_CLI_TELEMETRY": "true",
    }
    done = subprocess.run(
        ["npx", "cdk", "synth", "--no-notices", "-q", "-o", str(tmp_path / "out")],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Successfully synthesized" in done.stderr
    templates = {
        path.name.removesuffix(".template.json"): json.loads(path.read_text())
        for path in (tmp_path / "out").glob("*.template.json")
    }
    assert set(templates) == {"Network", "Storage", "HyperPod", "Pcluster", "Eks"}
    groups = {
        g["InstanceGroupName"]: g
        for r in templates["HyperPod"]["Resources"].values()
        if r["Type"] == "AWS::SageMaker::Cluster"
        for g in r["Properties"]["InstanceGroups"]
    }
    assert groups["workers"]["TrainingPlanArn"] == PLAN_ARN
    assert "TrainingPlanArn" not in groups["controller"]
    charts = _chart_values(templates["Eks"])
    # GpuEksCluster's own device plugins for its p5 EFA nodegroup: pods can ask for GPUs and EFA interfaces
    assert set(charts) == {"nvidia-device-plugin", "aws-efa-k8s-device-plugin"}
    assert charts["aws-efa-k8s-device-plugin"]["supportedInstanceLabels"]["values"] == ["p5.48xlarge"]
    assert not (EXAMPLE / "cdk.out").exists()
