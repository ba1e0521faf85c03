"""Fixtures for the lifecycle-script tests (see sandbox.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.lifecycle.sandbox import REAL_TOOLS, Sandbox


@pytest.fixture(scope="session")
def real_tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tools = tmp_path_factory.mktemp("tools")
    for tool in REAL_TOOLS:
        found = shutil.which(tool)
        if found is None:
            pytest.fail(f"the lifecycle tests need '{tool}' on PATH")
        (tools / tool).symlink_to(found)
    return tools


@pytest.fixture
def sandbox(tmp_path: Path, real_tools: Path) -> Sandbox:
    return Sandbox(tmp=tmp_path, tools=real_tools)
