"""``make synth`` as a user runs it: a refused environment file shows its error, only it, and no summary.

The recipe runs in a directory laid out as the repository (a symbolic link to each of its entries), so
the repository's own ``cdk.out`` and ``cdk.out.log`` are left alone. Each file costs one ``cdk synth`` (the
CDK CLI, then ``app.py`` importing CDK: several seconds of a subprocess), so they run in the background,
one after the other, from when this module is collected; each test waits for its own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests import background

from .conftest import ROOT

#: Files refused while they load, each with the one line under the count the user must see: where the
#: mistake is (file and line), the field, the value and what is allowed.
REFUSED = {
    "tests/bad_inputs/misspelt-pcluster-max-count.yaml": (
        "tests/bad_inputs/misspelt-pcluster-max-count.yaml:23: parallelcluster.queues.0.compute_resources.0."
        "max_cont: unknown key (got value 2); did you mean max_count?"
    ),
    "tests/bad_inputs/out-of-range-pcluster-max-count-beyond-the-subnet.yaml": (
        "tests/bad_inputs/out-of-range-pcluster-max-count-beyond-the-subnet.yaml:23: parallelcluster.queues.0."
        "compute_resources.0.max_count: must be at most 16,378, got 100000: each node takes an address in the "
        "placement subnet, a private /18 of 16,379 usable addresses (AWS reserves 5 of every subnet's 16,384), "
        "and the other nodes there take 1"
    ),
}
#: What ``make synth`` writes; left out of the copy so the recipe writes into it.
WRITTEN = ("cdk.out", "cdk.out.log")
#: make's own variables: a make running this suite (``make test``) must not change how the inner one reports.
MAKE_VARIABLES = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")
#: The bootstrap's stamps, never remade here (``make --old-file``): the suite runs after the bootstrap, and a
#: recipe that bootstrapped (after an edit to pyproject.toml) would run pip and npm ci from this copy into the
#: repository's own .venv and node_modules (links here), which other checkouts may share.
STAMPS = (
    ".venv/.installed",
    "node_modules/.installed",
    ".venv-pcluster/.installed",
    ".venv-checkov/.installed",
)


def _make_synth(environment_file: str) -> subprocess.CompletedProcess[str]:
    """``make synth ENV=<environment_file>`` in a directory of links to the repository's entries."""
    workdir = Path(tempfile.mkdtemp(prefix="make-synth-"))
    try:
        for entry in ROOT.iterdir():
            if entry.name not in WRITTEN:
                (workdir / entry.name).symlink_to(entry)
        env = {name: value for name, value in os.environ.items() if name not in MAKE_VARIABLES}
        return subprocess.run(
            ["make", *(f"--old-file={stamp}" for stamp in STAMPS), "synth", f"ENV={environment_file}"],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        shutil.rmtree(workdir)


def _make_synth_each() -> dict[str, subprocess.CompletedProcess[str]]:
    """One after the other: two cdk synths at once would only compete for the two cores."""
    return {file: _make_synth(file) for file in REFUSED}


_RUNS = background.start(_make_synth_each)


@pytest.mark.parametrize("bad_file", list(REFUSED), ids=[Path(f).stem for f in REFUSED])
def test_a_refused_file_shows_only_its_error_and_no_summary(bad_file: str) -> None:
    result = _RUNS.result()[bad_file]
    *error, make_line = result.stderr.splitlines()
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert error == [f"error: {bad_file}: 1 problem(s)", f"  {REFUSED[bad_file]}"], result.stderr
    # the recipe exits with cdk synth's status (the CDK CLI's 1 for any failure of the app); make's is 2
    assert re.fullmatch(r"make: \*\*\* \[Makefile:\d+: synth\] Error 1", make_line), result.stderr
    assert "not a cloud assembly" not in result.stderr
