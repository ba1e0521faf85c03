"""``training-clusters render-pcluster FILE``: write the ParallelCluster cluster's ``cluster-config.yaml``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from training_clusters.cli.common import EXIT_OK, aws_problem, load, print_json
from training_clusters.model.errors import ConfigurationError

if TYPE_CHECKING:
    pass


def render_pcluster_command(args: argparse.Namespace, out: TextIO) -> int:
    config, name = load(args.file)
    if config.parallelcluster is None:
        raise ConfigurationError(
            f"{args.file}: parallelcluster: render-pcluster needs a parallelcluster section"
        )
    import aws_cdk as cdk

    from training_clusters.environments import add_environment, stack_id
    from training_clusters.stacks.parallelcluster import ParallelClusterEnvironment

    stack = add_environment(cdk.App(), Path(args.file))
    assert isinstance(stack, ParallelClusterEnvironment)
    values = _deployed_values(stack_id(name), config.region, args.profile) if args.deployed else None
    if args.output_file:
        stack.cluster.write_config(args.output_file, values, strict=args.deployed)
    if args.output == "json":
        document = stack.cluster.file_configuration(values, strict=args.deployed)
        print_json(
            out,
            {"environment": name, "file": args.output_file, "deployed": args.deployed, "config": document},
        )
    elif args.output_file:
        what = (
            "deployed ids"
            if args.deployed
            else "placeholders mark deploy-time ids (use --deployed after deploy)"
        )
        print(f"wrote {args.output_file} (ParallelCluster {name}); {what}", file=out)
    else:
        out.write(stack.cluster.render_config(values, strict=args.deployed))
    return EXIT_OK


def _deployed_values(stack_name: str, region: str, profile: str | None) -> dict[str, str]:
    import boto3
    from botocore.exceptions import BotoCoreError

    from training_clusters.model.deployed import deployed_values

    try:
        session = boto3.session.Session(profile_name=profile, region_name=region)
        return deployed_values(
            stack_name, cloudformation=session.client("cloudformation"), ec2=session.client("ec2")
        )
    except BotoCoreError as error:
        raise ConfigurationError(
            f"cannot read stack {stack_name} in {region}: {aws_problem(error)}"
        ) from None
