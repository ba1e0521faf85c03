"""Malformed environment files: each one is refused with our own clear message, never a trace.

Every file in ``tests/bad_inputs/`` is a realistic environment with one mistake. Its first lines say what
the error must contain::

    # expect: storage.lustre: storage_capacity_gib must be 1200 or a multiple of 2400 for SCRATCH_2, got 1000

Files named ``build-*`` are valid documents whose mistake only shows when the stack is built (construct
validation across sections); all others are refused while the file loads, before any CDK code runs.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest

from training_clusters.config import environment_name, load_environment
from training_clusters.environments import add_environment
from training_clusters.errors import ConfigurationError

BAD_INPUTS = Path(__file__).resolve().parent / "bad_inputs"
FILES = sorted(BAD_INPUTS.glob("*.yaml"))
BUILD_TIME = [p for p in FILES if p.stem.startswith("build-")]
EXPECT = b"# expect: "

#: Text that would mean a library's default report leaked through instead of our message.
NOT_OURS = ("Traceback", "jsii", "pydantic", "For further information visit", "validation error for")


def expectations(path: Path) -> list[str]:
    """The ``# expect:`` fragments on the file's first lines (read as bytes: one file is not UTF-8)."""
    fragments = []
    for line in path.read_bytes().splitlines():
        if not line.startswith(EXPECT):
            break
        fragments.append(line.removeprefix(EXPECT).decode("ascii"))
    return fragments


def test_the_suite_covers_every_kind_of_mistake() -> None:
    assert len(FILES) >= 35
    kinds = {p.stem.split("-")[0] for p in FILES}
    assert {"misspelt", "wrong", "out", "unknown", "build"} <= kinds
    assert len(BUILD_TIME) >= 10


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_bad_file_is_refused_with_our_message(path: Path, tmp_path: Path) -> None:
    fragments = expectations(path)
    assert fragments, f"{path.name}: first line must be '# expect: <message fragment>'"
    with pytest.raises(ConfigurationError) as raised:
        add_environment(cdk.App(outdir=str(tmp_path)), path)
    message = str(raised.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message
    for leaked in NOT_OURS:
        assert leaked not in message
    assert raised.value.__cause__ is None
    # one mistake per file: a second problem means the file went stale as the schema moved on
    assert "problem(s)" not in message or f"{path}: 1 problem(s)" in message


@pytest.mark.parametrize("path", BUILD_TIME, ids=[p.stem for p in BUILD_TIME])
def test_build_time_mistakes_pass_loading(path: Path) -> None:
    """These documents are well-formed: only the constructs, seeing all sections together, refuse them."""
    environment_name(load_environment(path), path)


@pytest.mark.parametrize(
    "path", [p for p in FILES if p not in BUILD_TIME], ids=[p.stem for p in FILES if p not in BUILD_TIME]
)
def test_load_time_mistakes_fail_before_any_construct(path: Path) -> None:
    with pytest.raises(ConfigurationError):
        environment_name(load_environment(path), path)
