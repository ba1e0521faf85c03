"""``training-clusters preflight FILE``: check quotas, offerings, EFA and FSx limits before deploy."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from training_clusters.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    aws_problem,
    load,
    no_credentials,
    paragraph,
    print_json,
)
from training_clusters.config import EnvironmentConfig
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.tables import numbered_notes, text_table
from training_clusters.rules.regions import unknown_region_problem

if TYPE_CHECKING:
    from training_clusters.preflight import Check


def preflight_command(args: argparse.Namespace, out: TextIO) -> int:
    import boto3
    from botocore.exceptions import BotoCoreError

    from training_clusters.preflight import AwsClients, preflight

    config, _ = load(args.file)
    region = args.region or config.region
    if args.region and not config.allow_unknown_region:  # the rule the file's own region follows
        problem = unknown_region_problem(args.region)
        if problem is not None:
            raise ConfigurationError(f"{args.file}: --region: {problem}")
    try:
        session = boto3.session.Session(profile_name=args.profile, region_name=region)
        credentials = session.get_credentials()
        if credentials is None:
            _preflight_offline(args, config, region, out)
            raise no_credentials("preflight", args.profile)
        credentials.get_frozen_credentials()  # an expired SSO token or a role that cannot be assumed: here
        checks = preflight(config, AwsClients.from_session(session, region))
    except BotoCoreError as error:  # unknown profile, credentials that cannot be loaded, no network
        raise ConfigurationError(f"cannot reach AWS in {region}: {aws_problem(error)}") from None
    failed = [check for check in checks if not check.passed]
    if args.output == "json":
        print_json(
            out,
            {
                "file": str(args.file),
                "region": region,
                "passed": not failed,
                "checks": [c.as_dict() for c in checks],
            },
        )
    else:
        print(_preflight_table(checks), file=out)
        verdict = (
            f"{len(failed)} of {len(checks)} checks failed" if failed else f"all {len(checks)} checks passed"
        )
        print(f"\n{args.file} in {region}: {verdict}", file=out)
    return EXIT_FAILED if failed else EXIT_OK


def _preflight_table(checks: Sequence[Check]) -> str:
    """The checks in 120 columns: each fix under its number below the table, an AWS CLI command whole."""
    fixes = [check.remedy for check in checks if check.remedy]
    numbers = iter(range(1, len(fixes) + 1))
    rows = [
        (c.check, c.needed, c.available, c.verdict, f"[{next(numbers)}]" if c.remedy else "") for c in checks
    ]
    table = text_table(("check", "needed", "available", "result", "fix"), rows)
    return f"{table}\n\nto fix:\n{numbered_notes(fixes)}" if fixes else table


def _preflight_offline(args: argparse.Namespace, config: EnvironmentConfig, region: str, out: TextIO) -> None:
    """What preflight can say without credentials: the instances it would check, and the actions it calls."""
    from training_clusters.catalog import lookup
    from training_clusters.preflight import REQUIRED_IAM_ACTIONS, instance_demands

    demands = instance_demands(config)
    if args.output == "json":
        rows = [
            {
                "where": d.where,
                "instance_type": d.instance_type,
                "count": d.count,
                "vcpus": d.vcpus,
                "quota": lookup(d.ec2_instance_type).quota_family.quota_code,
                "bought": d.capacity.value,
                "efa": d.efa,
            }
            for d in demands
        ]
        document = {"file": str(args.file), "region": region, "credentials": False, "demands": rows}
        print_json(out, {**document, "iam_actions": list(REQUIRED_IAM_ACTIONS)})
        return
    table = text_table(
        ("group", "instances", "vCPUs", "EC2 quota", "bought", "EFA"),
        [
            (
                d.where,
                f"{d.instance_type} x {d.count}",
                str(d.vcpus),
                lookup(d.ec2_instance_type).quota_family.quota_code,
                d.capacity.value,
                "yes" if d.efa else "no",
            )
            for d in demands
        ],
    )
    head = (
        f"offline, from {args.file}: with credentials preflight checks these groups against the quotas, "
        f"offerings and EFA support of {region} (--region R for another), and the file system's quota"
    )
    calls = f"it calls, read-only: {', '.join(REQUIRED_IAM_ACTIONS)}"
    print(f"{paragraph(head)}\n\n{table}\n\n{paragraph(calls)}", file=out)
