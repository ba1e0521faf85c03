"""The pages' command blocks are all accounted for, and each command is typable as written (fast: no synth).

``test_commands_verbatim.py`` (slow) types them; this module checks, in milliseconds, that nothing escapes it:
every fence is a command block or of a language named with where it is checked, every command the verbatim
run does not type is named with the reason, and every command runs from a clean shell as written (the
console script by its path in the clone's ``.venv``, no placeholder).
"""

from __future__ import annotations

import re

import pytest

from training_clusters.stacks import base

from .blocks import COMMAND_LANGUAGES, NOT_COMMANDS, RUN_ELSEWHERE, blocks, commands, expected, run_elsewhere

TYPED = [c for c in commands() if run_elsewhere(c) is None]


def test_every_fence_is_a_command_block_or_named_with_what_checks_it() -> None:
    unnamed = [
        f"{b.page}:{b.line} ```{b.language}"
        for b in blocks()
        if b.language not in COMMAND_LANGUAGES and b.language not in NOT_COMMANDS
    ]
    assert unnamed == []


def test_every_command_not_typed_is_on_a_page_and_every_reason_is_used() -> None:
    used = {
        prefix for c in commands() for prefix in RUN_ELSEWHERE if run_elsewhere(c) == RUN_ELSEWHERE[prefix]
    }
    assert used == set(RUN_ELSEWHERE)


def test_the_readme_has_the_commands_a_user_types_first() -> None:
    typed = [c.bare for c in TYPED if c.page == "README.md"]
    assert typed[:3] == [
        ".venv/bin/training-clusters preflight environments/parallelcluster-c5n.yaml",
        ".venv/bin/training-clusters deploy environments/parallelcluster-c5n.yaml",
        ".venv/bin/training-clusters acceptance environments/parallelcluster-c5n.yaml -d acceptance/",
    ]


@pytest.mark.parametrize("command", TYPED, ids=lambda c: c.where)
def test_each_command_runs_from_a_clean_shell_as_written(command: object) -> None:
    """No activated environment: the console script by its path; no placeholder to fill in first."""
    from .blocks import Command

    assert isinstance(command, Command)
    assert command.words[0] == ".venv/bin/training-clusters", command.text
    assert not re.search(r"\[|\]|<[^>]*>|\bFILE\b|\|", command.bare), f"{command.where}: a placeholder"
    assert expected(command) in ("ok", "cdk-credentials", "our-credentials")


def test_no_page_or_stack_output_tells_a_user_to_run_the_cdk_cli_bare() -> None:
    """``npx cdk deploy`` runs cdk.json's python3 app.py with whatever Python is on PATH (issue 39)."""
    bare = re.compile(r"npx cdk (deploy|diff|destroy|synth)")
    from .blocks import ROOT, pages

    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in pages()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if bare.search(line) and "activate" not in line  # a user's own app, its environment activated
    ]
    steps = (base.SLURM_ACCEPTANCE_STEP, base.DESTROY_STEP, base.SLURM_RUN_STEP)
    assert found == [] and not any(bare.search(step) for step in steps)
