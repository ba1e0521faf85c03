"""What the console script's commands share: exit statuses, argument types that check paths and regions, loading an
environment file, and printing tables or JSON."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from training_clusters.config import EnvironmentConfig, environment_name, load_environment
from training_clusters.config.yaml_file import regular_file_problem
from training_clusters.model.errors import ConfigurationError, bounded, excerpt
from training_clusters.model.tables import TABLE_WIDTH
from training_clusters.rules.regions import region_shape_problem

if TYPE_CHECKING:
    pass


EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


OUTPUTS = ("table", "json")


def no_credentials(command: str, profile: str | None) -> ConfigurationError:
    """The one line a command that asks AWS says without credentials (what it can say offline is printed
    before it, on standard output)."""
    found = f" for profile {excerpt(profile, limit=24)}" if profile else ""
    return ConfigurationError(
        f"{command} found no AWS credentials{found}: give --profile P, set AWS_PROFILE, or run aws configure"
    )


def aws_problem(error: Exception) -> str:
    """botocore's message on one bounded line (it quotes what it was given, such as a --profile)."""
    return bounded(str(error), 300)


def fitted(text: str) -> str:
    """``text`` with each line longer than the table width wrapped at spaces, continuation lines indented four
    more than their line; a word longer than the width (a path) stays whole."""
    import textwrap

    fitted: list[str] = []
    for line in text.splitlines():
        if len(line) <= TABLE_WIDTH:
            fitted.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        fitted.extend(
            textwrap.wrap(
                line,
                TABLE_WIDTH,
                subsequent_indent=lead + "    ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(fitted)


def paragraph(text: str, *, indent: str = "") -> str:
    """``text`` wrapped to the table width, later lines indented by ``indent``."""
    import textwrap

    return textwrap.fill(text, TABLE_WIDTH, subsequent_indent=indent, break_on_hyphens=False)


class ArgumentError(ConfigurationError, argparse.ArgumentTypeError):
    """An argument that cannot be used; argparse reports it as a usage error naming the argument.

    Its message is made safe (escaped, bounded) when made, as every ConfigurationError's; argparse's own
    report of a plain ValueError would repeat the whole value.
    """


class PathError(ArgumentError):
    """A path argument that cannot be used."""


def region_argument(text: str) -> str:
    """An AWS region name, by its shape (the rule the environment file's ``region`` follows; whether
    botocore knows it is checked with the file, whose ``allow_unknown_region`` may allow a newer one)."""
    problem = region_shape_problem(text)
    if problem is not None:
        raise ArgumentError(problem)
    return text


def input_file(text: str) -> Path:
    """An existing regular file to read (or a symbolic link to one): not a directory, pipe or device."""
    path = Path(text)
    if path.is_dir():
        raise PathError(f"{text!r} is a directory; give a file")
    problem = regular_file_problem(path)
    if problem is not None:
        raise PathError(f"{text!r}: {problem}")
    if not os.access(path, os.R_OK):
        raise PathError(f"{text!r} cannot be read (permission denied)")
    return path


def input_dir(text: str) -> Path:
    """An existing directory to read (a cloud assembly)."""
    path = Path(text)
    if not path.exists():
        raise PathError(f"{text!r}: no such directory")
    if not path.is_dir():
        raise PathError(f"{text!r} is a file; give a directory")
    return path


def output_file(text: str) -> Path:
    """A file to write (replaced if it exists): its directory must exist and be writable."""
    path = Path(text)
    if path.is_dir():
        raise PathError(f"{text!r} is a directory; give a file name to write")
    writable_directory(path.parent, text, create=False)
    if path.exists() and not os.access(path, os.W_OK):
        raise PathError(f"{text!r} cannot be written (permission denied)")
    return path


def output_dir(text: str) -> Path:
    """A directory to write files into: an existing writable one, or one that can be created."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise PathError(f"{text!r} is a file; give a directory")
    writable_directory(path, text, create=True)
    return path


def writable_directory(directory: Path, text: str, *, create: bool) -> None:
    """``directory`` (of argument ``text``) can hold new files, or (``create``) can be made."""
    existing = directory
    while create and not existing.exists() and existing != existing.parent:
        existing = existing.parent  # the directories below it are made when writing
    shown = str(existing) or "."
    if not existing.exists():
        raise PathError(f"{text!r}: directory {shown!r} does not exist; create it first")
    if not existing.is_dir():
        raise PathError(f"{text!r}: {shown!r} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PathError(f"{text!r}: directory {shown!r} cannot be written (permission denied)")


def load(file: str | Path) -> tuple[EnvironmentConfig, str]:
    path = Path(file)
    config = load_environment(path)
    return config, environment_name(config, path)


def print_json(out: TextIO, document: Any) -> None:
    json.dump(document, out, indent=2, sort_keys=False, default=str)
    out.write("\n")
