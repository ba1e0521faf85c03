"""Every line ``training-clusters`` prints for a person fits 120 columns (issue 39): prose is wrapped, and a
command to copy is kept whole, alone on its line, however long.

Run over every command's outputs and errors: the tables (catalog, preflight and cleanup offline, acceptance
for every shipped environment), every bad input of ``tests/bad_inputs`` (the errors a file can cause), usage
errors, and every command's ``--help``. Not prose, so not wrapped (named here, each a file format a program
reads): ``--output json``, ``schema`` (JSON), ``diagram`` without ``-o`` (SVG), ``render-pcluster`` (the
ParallelCluster configuration file, whose placeholder comments name the output to use). Elsewhere:
``tests/test_tables.py`` checks preflight's table with a faked account, ``tests/cli/test_cleanup.py`` every
cleanup listing against its fake accounts (``Account.run`` applies :func:`assert_fits`), and the CDK CLI's own
output (bootstrap, deploy, diff, destroy) is not ours.
"""

from __future__ import annotations

import io
import re
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from training_clusters import cli
from training_clusters.cli import common
from training_clusters.model.tables import TABLE_WIDTH

from ..conftest import ROOT
from .test_cli import aws_config  # noqa: F401  (the fixture: no credentials anywhere)

ENVIRONMENTS = sorted((ROOT / "environments").glob("*.yaml"))
BAD_INPUTS = sorted((ROOT / "tests" / "bad_inputs").glob("*.yaml"))
#: What a command line to copy starts with, once indented on its own line.
COMMAND = re.compile(
    r"^ *(kubectl|sbatch|srun|bash|aws|pcluster|\.venv/bin/training-clusters|training-clusters) "
)


def assert_fits(text: str) -> None:
    """Each line within 120 columns, unless it is a command alone on its line, or one word (a path) that no
    wrapping could shorten."""
    wide = [
        line
        for line in text.splitlines()
        if len(line) > TABLE_WIDTH and not COMMAND.match(line) and " " in line.strip()
    ]
    assert wide == [], f"{len(wide)} line(s) wider than {TABLE_WIDTH}: {wide[0]!r}"


def printed(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stderr(err):
        try:
            status = cli.main(list(argv), stdout=out)
        except SystemExit as exited:  # --help
            status = int(exited.code or 0)
    return status, out.getvalue(), err.getvalue()


def test_the_catalog_fits() -> None:
    status, out, err = printed("catalog")
    assert status == 0 and err == ""
    assert_fits(out)


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=lambda p: p.stem)
def test_acceptance_fits_with_each_command_whole_on_its_own_line(path: Path, tmp_path: Path) -> None:
    status, out, err = printed("acceptance", str(path), "-d", str(tmp_path))
    assert status == 0 and err == ""
    assert_fits(out)
    for line in out.splitlines():
        if COMMAND.match(line):
            assert line.startswith("    ") and "; then " not in line, line  # one command per line


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=lambda p: p.stem)
def test_preflight_without_credentials_fits(path: Path, aws_config: Path) -> None:  # noqa: F811
    status, out, err = printed("preflight", str(path))
    assert status == 2 and err.count("\n") == 1
    assert_fits(out + err)


@pytest.mark.parametrize("name", ["parallelcluster-team", "eks-gpu-monitoring"])
def test_cleanup_offline_and_without_credentials_fits(name: str, aws_config: Path) -> None:  # noqa: F811
    status, out, err = printed("cleanup", str(ROOT / "environments" / f"{name}.yaml"))
    assert status == 2 and err.count("\n") == 1
    assert_fits(out + err)


@pytest.mark.parametrize("path", BAD_INPUTS, ids=lambda p: p.stem)
def test_the_error_of_every_bad_input_fits(path: Path, tmp_path: Path) -> None:
    status, out, err = printed("acceptance", str(path), "-d", str(tmp_path))
    assert_fits(out + err)
    if status == 2:
        first, *rest = err.splitlines()
        assert first.startswith("error: ") and all(line.startswith("  ") for line in rest), err[:2000]


@pytest.mark.parametrize(
    "argv",
    [
        ["nope"],
        ["acceptance", "missing.yaml"],
        ["cleanup", "environments/network-storage.yaml", "--yes"],
        ["diagram", "--assembly", "no-such-cdk.out"],
        ["deploy"],
    ],
    ids=["unknown command", "missing file", "yes without delete", "missing assembly", "deploy without file"],
)
def test_usage_errors_fit(argv: list[str]) -> None:
    status, out, err = printed(*argv)
    assert status == 2 and out == ""
    assert_fits(err)


def test_a_long_error_is_wrapped_at_spaces_keeping_each_word_whole() -> None:
    long = "error: " + " ".join(f"word{i:03d}" for i in range(40)) + " /a/" + "p" * 130
    fitted = common.fitted(long)
    lines = fitted.splitlines()
    assert " ".join(line.strip() for line in lines) == long
    assert all(len(line) <= TABLE_WIDTH for line in lines[:-1]) and lines[-1] == "    /a/" + "p" * 130
    assert all(line.startswith("    ") for line in lines[1:])


@pytest.mark.parametrize("command", [None, *sorted(cli.EXAMPLES)])
def test_every_help_fits(command: str | None) -> None:
    status, out, err = printed(*([command] if command else []), "--help")
    assert status == 0 and err == ""
    assert_fits(out)
