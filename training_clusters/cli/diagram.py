"""``training-clusters diagram``: draw an environment, or every stack of an assembly."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    pass


def diagram_command(args: argparse.Namespace, out: TextIO) -> int:
    from training_clusters.diagram import diagram_command

    return diagram_command(
        file=args.file,
        assembly=args.assembly,
        stack=args.stack,
        output_file=args.output_file,
        as_json=args.output == "json",
        out=out,
        output_dir=args.output_dir,
    )
