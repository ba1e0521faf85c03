#!/usr/bin/env python3
"""CDK entry point: ``cdk synth -c environment=environments/x.yaml`` (every file in environments/ if absent)."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import aws_cdk as cdk
except ModuleNotFoundError as missing:  # `npx cdk` ran cdk.json's "python3 app.py" with a Python without it
    sys.exit(
        f"error: {sys.executable} has no {missing.name}: use .venv/bin/training-clusters deploy|diff|destroy FILE,"
        "\nwhich runs the CDK CLI with the project's Python and Node (or activate .venv first)"
    )

from training_clusters.environments import build_app, environment_files
from training_clusters.model.errors import ConfigurationError


def run(app: cdk.App) -> int:
    """Build the environment named by ``-c environment=FILE`` (every file when absent) and synthesize it.

    Returns the exit status: 0, 1 when cdk-nag or CDK validation findings stop the synth, 2 for a bad file.
    """
    chosen = app.node.try_get_context("environment")
    files = [Path(chosen)] if chosen else environment_files()
    try:
        build_app(app, files)
    except ConfigurationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        app.synth()
    except RuntimeError as error:
        if "ValidationFailed" not in str(error):
            raise
        print("error: cdk-nag / validation findings above must be fixed or acknowledged", file=sys.stderr)
        return 1
    return 0


def main() -> None:
    sys.exit(run(cdk.App()))


if __name__ == "__main__":
    main()
