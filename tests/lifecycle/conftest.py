"""Fixtures for the lifecycle-script tests (see sandbox.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lifecycle.sandbox import Sandbox, link_real_tools


@pytest.fixture(scope="session")
def real_tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return link_real_tools(tmp_path_factory.mktemp("tools"))


@pytest.fixture
def sandbox(tmp_path: Path, real_tools: Path) -> Sandbox:
    return Sandbox(tmp=tmp_path, tools=real_tools)
