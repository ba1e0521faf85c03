"""The folders are the layers (CONTRIBUTING, "Layout"): the build side never imports the operate side, and the
CDK-free folders never import CDK, so pins and job templates live where the stacks are built."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import ROOT

PACKAGE = ROOT / "training_clusters"
#: Folders (and top-level modules) that build the stacks.
BUILD_SIDE = (
    "model",
    "catalog",
    "rules",
    "config",
    "constructs",
    "workloads",
    "stacks",
    "gates",
    "monitoring",
    "orchestrators.py",
    "environments.py",
)
#: Folders that only read a synthesized or deployed environment: the console script and what it runs.
OPERATE_SIDE = ("cli", "preflight", "acceptance")
#: Folders free of CDK: the environment file, the console script and the rules load without starting jsii.
CDK_FREE = ("model", "catalog", "rules", "config", "workloads", "orchestrators.py")


def _modules(*homes: str) -> list[Path]:
    found: list[Path] = []
    for home in homes:
        path = PACKAGE / home
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return found


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _shown(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_every_module_of_the_package_is_in_a_layer() -> None:
    homes = {*BUILD_SIDE, *OPERATE_SIDE, "diagram", "node_scripts", "__init__.py"}
    unplaced = [_shown(p) for p in sorted(PACKAGE.rglob("*.py")) if _shown(p).split("/")[0] not in homes]
    assert unplaced == []


@pytest.mark.parametrize("path", _modules(*BUILD_SIDE), ids=_shown)
def test_build_side_imports_nothing_of_the_operate_side(path: Path) -> None:
    operate = tuple(f"training_clusters.{home}" for home in OPERATE_SIDE)
    assert sorted(m for m in _imports(path) if m.startswith(operate)) == []


@pytest.mark.parametrize("path", _modules(*CDK_FREE), ids=_shown)
def test_cdk_free_layers_import_no_cdk_and_no_construct(path: Path) -> None:
    cdk = (
        "aws_cdk",
        "constructs",
        "cdk_nag",
        "jsii",
        "training_clusters.constructs",
        "training_clusters.stacks",
    )
    assert sorted(m for m in _imports(path) if m.startswith(cdk)) == []


def test_the_layer_check_sees_an_operate_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from training_clusters.cli import connect\nimport aws_cdk\n")
    assert {"training_clusters.cli", "training_clusters.cli.connect", "aws_cdk"} <= _imports(module)
