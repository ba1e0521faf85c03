#!/usr/bin/env python3
"""CDK entry point: ``cdk synth -c environment=environments/x.yaml`` (every file in environments/ if absent)."""

from __future__ import annotations

import sys
from pathlib import Path

import aws_cdk as cdk

from training_clusters.environments import build_app, environment_files
from training_clusters.errors import ConfigurationError


def main() -> None:
    app = cdk.App()
    chosen = app.node.try_get_context("environment")
    files = [Path(chosen)] if chosen else environment_files()
    try:
        build_app(app, files)
    except ConfigurationError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    try:
        app.synth()
    except RuntimeError as error:
        if "ValidationFailed" not in str(error):
            raise
        print("error: cdk-nag / validation findings above must be fixed or acknowledged", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
