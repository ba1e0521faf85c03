"""``training-clusters schema``: the environment file's JSON Schema, for editors."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from training_clusters.cli.common import EXIT_OK, print_json
from training_clusters.config import EnvironmentConfig

if TYPE_CHECKING:
    pass


def schema_command(args: argparse.Namespace, out: TextIO) -> int:
    print_json(out, environment_schema())
    return EXIT_OK


def environment_schema() -> dict[str, Any]:
    """JSON Schema of the environment file (for editor completion; the loader stays the authority)."""
    schema = EnvironmentConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "cdk-training-clusters environment file"
    return schema


# --------------------------------------------------------------------------------------------------
# paths: each argument naming a file or directory is one of these argparse types, so a path problem is one
# line and exit status 2 before any work (tests/cli/test_cli.py tries every such argument of every command)
