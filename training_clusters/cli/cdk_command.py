"""``training-clusters bootstrap|deploy|diff|destroy FILE``: the CDK CLI on one environment file
(:mod:`training_clusters.cli.cdk`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from training_clusters.cli.common import load

if TYPE_CHECKING:
    pass


def cdk_command(args: argparse.Namespace, out: TextIO) -> int:
    """bootstrap, deploy, diff, destroy: the file checked here first (one line, exit 2), then the CDK CLI runs it."""
    from training_clusters.cli.cdk import run

    load(args.file)
    out.flush()
    return run(args.cdk_action, args.file, args.cdk_args)
