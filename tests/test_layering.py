"""The build side never imports the operate side: pins and job templates live where the stacks are built."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import ROOT

PACKAGE = ROOT / "training_clusters"
BUILD_SIDE = [
    *sorted((PACKAGE / "constructs").glob("*.py")),
    *sorted((PACKAGE / "stacks").glob("*.py")),
    *sorted((PACKAGE / "rules").glob("*.py")),
    *sorted((PACKAGE / "monitoring").glob("*.py")),
    *(
        PACKAGE / name
        for name in ("config.py", "catalog.py", "releases.py", "options.py", "nccl_job.py", "eks_mig.py")
    ),
]
OPERATE_SIDE = ("training_clusters.acceptance", "training_clusters.cli", "training_clusters.preflight")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("path", BUILD_SIDE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_build_side_imports_nothing_of_the_operate_side(path: Path) -> None:
    assert sorted(m for m in _imports(path) if m.startswith(OPERATE_SIDE)) == []


@pytest.mark.parametrize(
    "path", [*sorted((PACKAGE / "rules").glob("*.py")), PACKAGE / "config.py"], ids=lambda p: p.name
)
def test_rules_and_the_file_model_take_options_not_constructs(path: Path) -> None:
    assert sorted(m for m in _imports(path) if m.startswith("training_clusters.constructs")) == []
