"""Every lifecycle script, and every shared script it runs (``node_scripts/shared/``), is bash and shellcheck clean
(`shellcheck -x`, all severities)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import background
from tests.lifecycle.sandbox import SCRIPTS, SHARED, STUB, shellcheck_path

SHELL_FILES = [*sorted(SCRIPTS.rglob("*.sh")), *sorted(SHARED.rglob("*.sh")), STUB]


def test_the_scripts_are_found() -> None:
    names = {path.relative_to(SCRIPTS).as_posix() for path in SCRIPTS.rglob("*.sh")}
    assert {"on_create.sh", "lib/common.sh", "lib/apt.sh", "lib/apt_hotfix.sh"} <= names
    assert {path.name for path in SHARED.rglob("*.sh")} == {
        "users.sh",
        "training-clusters-imds.sh",
        "training-clusters-enroot.sh",
    }


def _shellcheck_all() -> subprocess.CompletedProcess[str]:
    # One process for all files: on_create.sh with -x follows every `source` anyway.
    return subprocess.run(
        [shellcheck_path(), "-x", "--severity=style", "--format=gcc", *map(str, SHELL_FILES)],
        capture_output=True,
        text=True,
        check=False,
    )


#: Started when this module is collected, so it runs alongside the rest of the suite.
_SHELLCHECK = background.start(_shellcheck_all)


def test_shellcheck_clean(shellcheck: str) -> None:
    result = _SHELLCHECK.result()
    assert result.args[0] == shellcheck
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", SHELL_FILES, ids=lambda path: path.name)
def test_bash_only(path: Path) -> None:
    first_line = path.read_text().splitlines()[0]
    bash_markers = ("#!/usr/bin/env bash", "#!/bin/bash", "# shellcheck shell=bash")
    assert first_line.startswith(bash_markers), first_line


def test_entry_point_is_executable() -> None:
    assert (SCRIPTS / "on_create.sh").stat().st_mode & 0o111
