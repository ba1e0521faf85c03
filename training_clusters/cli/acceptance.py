"""``training-clusters acceptance FILE``: write the acceptance jobs that prove a deployed cluster works."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from training_clusters.cli.common import EXIT_OK, load, output_dir, paragraph, print_json
from training_clusters.model.tables import text_table

if TYPE_CHECKING:
    pass


def acceptance_command(args: argparse.Namespace, out: TextIO) -> int:
    from training_clusters.acceptance import acceptance_plan, default_directory, write_jobs

    config, name = load(args.file)
    plan = acceptance_plan(config, name, dcgm_level=args.dcgm_level)
    directory = Path(args.directory) if args.directory else default_directory(name)
    paths = write_jobs(plan.jobs, output_dir(str(directory))) if plan.jobs else []
    if args.output == "json":
        print_json(
            out,
            {
                "environment": name,
                "directory": str(directory),
                "jobs": [
                    {**job.as_dict(), "path": str(path)} for job, path in zip(plan.jobs, paths, strict=True)
                ],
                "skipped": list(plan.skipped),
                "reason": plan.reason,
            },
        )
        return EXIT_OK
    if plan.reason:
        print(paragraph(f"{name}: {plan.reason}", indent="  "), file=out)
        return EXIT_OK
    rows = [(str(path), job.expected) for path, job in zip(paths, plan.jobs, strict=True)]
    print(text_table(("job", "a healthy cluster gives"), rows), file=out)
    print("", file=out)
    for job in plan.jobs:
        print(_job_lines(job.filename, job.description), file=out)
    for skipped in plan.skipped:
        print(paragraph(f"- skipped: {skipped}", indent="  "), file=out)
    return EXIT_OK


#: Where a job's description turns from what it is to the commands that run it.
_COMMANDS_START = re.compile(r": (?=(?:kubectl|sbatch|srun|bash) )")


#: A note after the last command, in brackets (not a shell construct).
_TRAILING_NOTE = re.compile(r" \(([^()|&;]*)\)$")


def _job_lines(filename: str, description: str) -> str:
    """A job's description as prose wrapped to the table width, then each command it says to run whole, alone
    on its own indented line (copy-pasteable however long)."""
    prose, *rest = _COMMANDS_START.split(description, maxsplit=1)
    commands = rest[0] if rest else ""
    if not commands:
        return paragraph(f"- {filename}: {prose}", indent="  ")
    note = _TRAILING_NOTE.search(commands)
    if note is not None:
        commands = commands[: note.start()]
        prose = f"{prose} ({note.group(1)})"
    steps = commands.split("; then ")
    lead = "run:" if len(steps) == 1 else "run, then check:" if "check.sh" in steps[-1] else "run in turn:"
    lines = [paragraph(f"- {filename}: {prose}; {lead}", indent="  ")]
    lines.extend(f"    {step}" for step in steps)
    return "\n".join(lines)
