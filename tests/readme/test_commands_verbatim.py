"""Every command of README.md and the guide pages under docs/, and those the stacks' ``NextSteps`` print, typed
as written in a clean shell (slow: each deploy, diff, destroy and dry run synthesizes; minutes in all).

The clean shell: a copy of the repository as a fresh clone after ``make bootstrap`` (its tracked and untracked
files, with ``.venv`` and ``node_modules`` linked), a fresh HOME, ``PATH=/usr/local/bin:/usr/bin:/bin`` (no
``.venv/bin``, no ``VIRTUAL_ENV``), no AWS credentials (no ``AWS_*`` variable but the config and credentials
files pointed at an empty folder and ``AWS_EC2_METADATA_DISABLED``, so a CI machine's instance role is not
found either). ``PYTHONPATH`` names the copy, whose package the shared editable install would not import; it
gives the system Python no ``aws_cdk``. Each command runs in a pseudo-terminal, as typed (the CDK CLI asks
before destroying, and refuses without a terminal); the answer is ``y``.

Each must succeed, or stop exactly at the credentials boundary: the CDK CLI's own message after the stack was
synthesized (its template written during the command), or our one line (``preflight``, ``cleanup``). A
traceback, ``ModuleNotFoundError``, "command not found" or a missing file fails it anywhere. Commands not typed
here are named in ``blocks.RUN_ELSEWHERE`` with the reason; ``NextSteps`` commands are typed for one stack of
each orchestrator (``tests/stacks/test_next_steps.py`` checks every shipped stack prints the same commands with
its own file). The results are printed as a table (``pytest -s``).
"""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import pytest

from training_clusters.config import environment_name, load_environment
from training_clusters.environments import add_environment, stack_id

from ..conftest import CDK_CONTEXT
from .blocks import (
    CDK_NO_CREDENTIALS,
    NEVER,
    OUR_NO_CREDENTIALS,
    ROOT,
    Command,
    commands,
    expected,
    run_elsewhere,
)

pytestmark = pytest.mark.slow

#: One environment per stack class: the NextSteps commands typed here.
NEXT_STEPS_SAMPLE = (
    "network-storage",
    "hyperpod-slurm",
    "parallelcluster-c5n",
    "pcs-c5n",
    "eks-g5-efa",
    "hyperpod-eks-g5",
)
LINKED = (".venv", "node_modules")
TIMEOUT_SECONDS = 900


@dataclass
class Typed:
    command: Command
    expected: str
    status: int
    output: str
    seconds: float
    synthesized: bool

    @property
    def result(self) -> str:
        if NEVER.search(self.output):
            return "FAILED: " + NEVER.search(self.output).group(0)  # type: ignore[union-attr]
        if self.expected == "ok":
            return "ok" if self.status == 0 else f"FAILED: exit {self.status}"
        if self.expected == "our-credentials":
            good = self.status == 2 and OUR_NO_CREDENTIALS.search(self.output)
            return "stopped at credentials (ours)" if good else f"FAILED: exit {self.status}"
        good = self.status != 0 and CDK_NO_CREDENTIALS in self.output and self.synthesized
        if good:
            return "synthesized, stopped at credentials (CDK CLI's message)"
        return f"FAILED: exit {self.status}, synthesized {self.synthesized}"


def clone() -> Path:
    """The repository's files (tracked and untracked, not ignored) in a fresh folder, bootstrapped by link."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    target = Path(tempfile.mkdtemp(prefix="verbatim-")) / "cdk-training-clusters"
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            (target / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / os.fsdecode(name))
    for name in LINKED:
        (target / name).symlink_to((ROOT / name).resolve())
    return target


def clean_environment(home: Path, aws: Path, clone: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "PYTHONPATH": str(clone),
        "AWS_CONFIG_FILE": str(aws / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(aws / "credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def in_a_terminal(text: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """``bash -c text`` with a pseudo-terminal for its standard streams; "y" typed ahead."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        ["/bin/bash", "-c", text], cwd=cwd, env=env, stdin=terminal, stdout=terminal, stderr=terminal
    )
    os.close(terminal)
    os.write(controller, b"y\n")
    chunks: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 1)
        if ready:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            chunks.append(chunk)
        elif process.poll() is not None:
            break
    else:
        process.kill()
    os.close(controller)
    status = process.wait()
    return status, re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace"))


def stack_name(command: Command, cwd: Path) -> str | None:
    """The stack a bootstrap/deploy/diff/destroy command synthesizes (the file's name, or its ``name:``)."""
    if expected(command) != "cdk-credentials":
        return None
    path = cwd / command.words[2]
    return stack_id(environment_name(load_environment(path), path))


def type_one(command: Command, cwd: Path, env: dict[str, str]) -> Typed:
    stack = stack_name(command, cwd)
    started = time.time()
    status, output = in_a_terminal(command.text, cwd, env)
    template = cwd / "cdk.out" / f"{stack}.template.json"
    synthesized = stack is not None and template.is_file() and template.stat().st_mtime >= started - 1
    return Typed(command, expected(command), status, output, time.time() - started, synthesized)


def next_steps_commands() -> Iterator[Command]:
    """The commands (in backquotes) of the sample stacks' NextSteps, as synthesized from the project folder."""
    for name in NEXT_STEPS_SAMPLE:
        path = Path("environments") / f"{name}.yaml"
        app = cdk.App(outdir=tempfile.mkdtemp(prefix="next-steps-"), context=dict(CDK_CONTEXT))
        previous = Path.cwd()
        os.chdir(ROOT)  # the file as a user names it from the project's folder
        try:
            stack = add_environment(app, path)
            steps = app.synth().get_stack_by_name(stack.stack_name).template["Outputs"]["NextSteps"]["Value"]
        finally:
            os.chdir(previous)
        for text in re.findall(r"`([^`]+)`", steps):
            yield Command(f"NextSteps of {stack.stack_name}", 0, text)


@pytest.fixture(scope="module")
def typed() -> Iterator[list[Typed]]:
    folder = clone()
    home, aws = folder.parent / "home", folder.parent / "aws"
    home.mkdir()
    aws.mkdir()
    env = clean_environment(home, aws, folder)
    assert "VIRTUAL_ENV" not in env and not any(k.startswith("AWS_ACCESS") or k == "AWS_PROFILE" for k in env)
    runs = [
        type_one(c, folder, env) for c in [*commands(), *next_steps_commands()] if run_elsewhere(c) is None
    ]
    print("\n" + report(runs))
    yield runs
    shutil.rmtree(folder.parent, ignore_errors=True)


def report(runs: list[Typed]) -> str:
    width = max(len(r.command.text) for r in runs)
    lines = [f"{'where':<40}  {'command':<{width}}  {'s':>5}  result"]
    for r in runs:
        where = r.command.where if r.command.line else r.command.page
        lines.append(f"{where:<40}  {r.command.text:<{width}}  {r.seconds:5.1f}  {r.result}")
    return "\n".join(lines)


def test_every_command_succeeds_or_stops_at_the_credentials_boundary(typed: list[Typed]) -> None:
    failed = [
        f"{r.command.where} {r.command.text}: {r.result}\n{r.output[-2000:]}"
        for r in typed
        if "FAILED" in r.result
    ]
    assert failed == []


def test_the_commands_typed_cover_every_page_and_every_kind_of_step(typed: list[Typed]) -> None:
    pages = {r.command.page for r in typed}
    assert "README.md" in pages
    assert {f"NextSteps of training-{name}" for name in NEXT_STEPS_SAMPLE} <= pages
    kinds = {r.command.words[1] for r in typed if r.command.page.startswith("NextSteps")}
    assert kinds == {"acceptance", "destroy", "cleanup"}
    assert {r.expected for r in typed} == {"ok", "cdk-credentials", "our-credentials"}
