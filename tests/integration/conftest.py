"""Fixtures for the real-apt integration tests (``make integration``; deselected by default)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.apt_world import AptRun, build_repository, debian_root, run_apt_steps

#: (test, what, seconds) measured by the tests, printed at the end of the run.
TIMINGS: list[tuple[str, str, float]] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TIMINGS:
        terminalreporter.section("integration timings")
        for test, what, seconds in TIMINGS:
            terminalreporter.write_line(f"{seconds:7.1f} s  {what}  ({test})")


@pytest.fixture(scope="session")
def prepared_root() -> Path:
    """The Debian root built by ``make integration``; a clear failure when it cannot be used."""
    missing = [
        tool
        for tool in ("unshare", "chroot", "mount", "dpkg-deb", "apt-ftparchive", "gpg")
        if not shutil.which(tool)
    ]
    if os.geteuid() != 0 or missing:
        pytest.fail(f"real-apt tests need root and {missing or 'these tools'}: run `make integration`")
    root = debian_root()
    if not (root / ".tc-root-ready").is_file():
        pytest.fail(f"no Debian root at {root}: run `make integration` (it builds one with debootstrap)")
    return root


@pytest.fixture(scope="session")
def repository(prepared_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("apt-repository"))


@pytest.fixture
def apt_steps(repository: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., AptRun]:
    """Run the apt steps in a fresh copy of the root; the duration is reported at the end."""
    runs = 0

    def run(what: str, fsx_server: str | None, **kwargs: Any) -> AptRun:
        nonlocal runs
        runs += 1
        result = run_apt_steps(
            work=tmp_path / f"run{runs}", repository=repository, fsx_server=fsx_server, **kwargs
        )
        TIMINGS.append((request.node.name, what, result.seconds))
        return result

    return run
