"""The bash fragments of the acceptance scripts are files: shellcheck clean as files, shipped, all in use.

The scripts generated from them are shellchecked too (tests/test_acceptance.py): a fragment can be clean
alone and still clash with its neighbours or its settings.
"""

from __future__ import annotations

import fnmatch
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests import background
from tests.lifecycle.sandbox import shellcheck_path
from training_clusters.acceptance import acceptance_plan
from training_clusters.acceptance import fragments as fragments_module
from training_clusters.acceptance.fragments import FRAGMENT_DIR, comment_lines, fragment
from training_clusters.config import load_environment

REPO = Path(__file__).resolve().parents[2]
FRAGMENT_FILES = sorted(FRAGMENT_DIR.glob("*.sh"))


def test_the_fragments_are_found() -> None:
    assert {path.stem for path in FRAGMENT_FILES} == {
        "common",
        "dcgm_check",
        "eks_placement",
        "dcgm_node",
        "dcgm_run",
        "entry",
        "mig_check",
        "gang_check",
        "nccl_check",
        "nccl_run",
        "network",
        "osu_bandwidth_check",
        "osu_check_output",
        "osu_latency_check",
        "osu_run",
        "slurm_placement",
        "stdin_entry",
    }


def _shellcheck_fragments() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shellcheck_path(), "--severity=style", "--format=gcc", *map(str, FRAGMENT_FILES)],
        capture_output=True,
        text=True,
        check=False,
    )


#: Started when this module is collected, so it runs alongside the rest of the suite.
_SHELLCHECK = background.start(_shellcheck_fragments)


def test_shellcheck_clean_as_files(shellcheck: str) -> None:
    result = _SHELLCHECK.result()
    assert result.args[0] == shellcheck
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", FRAGMENT_FILES, ids=lambda path: path.name)
def test_each_file_is_bash_with_a_header_that_is_not_copied(path: Path) -> None:
    text = path.read_text()
    assert text.startswith("# shellcheck shell=bash\n")  # shellcheck reads it as bash without a shebang
    body = fragment(path.stem)
    assert text.endswith(body) and "shellcheck" not in body
    assert len(text.splitlines()) - len(body.splitlines()) >= 3  # directive, what the file is, blank line


def test_a_file_without_a_header_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bare.sh").write_text("echo one\n\necho two\n")
    monkeypatch.setattr(fragments_module, "FRAGMENT_DIR", tmp_path)
    with pytest.raises(ValueError, match=r"bash/bare\.sh must open with comment lines and a blank line"):
        fragment.__wrapped__("bare")


def test_every_fragment_is_in_some_generated_script() -> None:
    contents = [
        job.content
        for path in sorted((REPO / "environments").glob("*.yaml"))
        for job in acceptance_plan(load_environment(path), path.stem).jobs
    ]
    for path in FRAGMENT_FILES:
        assert any(fragment(path.stem) in content for content in contents), path.name


def test_the_package_data_globs_ship_every_fragment() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["training_clusters"]
    package = REPO / "training_clusters"
    for path in FRAGMENT_FILES:
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in globs), relative


def test_comment_lines_wrap_at_110_characters() -> None:
    lines = comment_lines("word " * 60)
    assert len(lines) > 1
    assert all(line.startswith("# ") and len(line) <= 110 for line in lines)
