"""``make synth`` as a user runs it: a refused environment file shows its error, only it, and no summary.

The recipe runs in a directory laid out as the repository (a symbolic link to each of its entries), so
the repository's own ``cdk.out`` and ``cdk.out.log`` are left alone. It costs one ``cdk synth`` (the CDK
CLI, then ``app.py`` importing CDK: several seconds of a subprocess), so it starts in the background when
this module is collected and the test waits for it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests import background

from .conftest import ROOT

#: A file refused while it loads: its ``# expect:`` header is the line the user must see.
BAD_FILE = "tests/bad_inputs/misspelt-pcluster-max-count.yaml"
#: What ``make synth`` writes; left out of the copy so the recipe writes into it.
WRITTEN = ("cdk.out", "cdk.out.log")
#: make's own variables: a make running this suite (``make test``) must not change how the inner one reports.
MAKE_VARIABLES = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")


def _make_synth(environment_file: str) -> subprocess.CompletedProcess[str]:
    """``make synth ENV=<environment_file>`` in a directory of links to the repository's entries."""
    workdir = Path(tempfile.mkdtemp(prefix="make-synth-"))
    try:
        for entry in ROOT.iterdir():
            if entry.name not in WRITTEN:
                (workdir / entry.name).symlink_to(entry)
        env = {name: value for name, value in os.environ.items() if name not in MAKE_VARIABLES}
        return subprocess.run(
            ["make", "synth", f"ENV={environment_file}"],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        shutil.rmtree(workdir)


_REFUSED = background.start(lambda: _make_synth(BAD_FILE))


def _expected_problem() -> str:
    first_line = (ROOT / BAD_FILE).read_text().splitlines()[0]
    return first_line.removeprefix("# expect: ")


def test_a_refused_file_shows_only_its_error_and_no_summary() -> None:
    result = _REFUSED.result()
    *error, make_line = result.stderr.splitlines()
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert error == [f"error: {BAD_FILE}: 1 problem(s)", f"  {_expected_problem()}"], result.stderr
    # the recipe exits with cdk synth's status (the CDK CLI's 1 for any failure of the app); make's is 2
    assert re.fullmatch(r"make: \*\*\* \[Makefile:\d+: synth\] Error 1", make_line), result.stderr
    assert "not a cloud assembly" not in result.stderr
