"""``training-clusters connect FILE``: open a shell on a node (:mod:`training_clusters.cli.connect` finds it)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from training_clusters.cli.common import EXIT_FAILED, EXIT_OK, load, no_credentials, print_json
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.tables import TABLE_WIDTH

if TYPE_CHECKING:
    pass


def connect_command(args: argparse.Namespace, out: TextIO) -> int:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from training_clusters.cli.connect import (
        ConnectClients,
        aws_reason,
        connection,
        note_lines,
        open_connection,
    )
    from training_clusters.environments import stack_id

    config, name = load(args.file)
    region, stack = config.region, stack_id(name)
    try:
        session = boto3.session.Session(profile_name=args.profile, region_name=region)
        credentials = session.get_credentials()
        if credentials is None:
            raise no_credentials("connect", args.profile)
        credentials.get_frozen_credentials()  # an expired SSO token or a role that cannot be assumed: here
        clients = ConnectClients.from_session(session, region)
        found = connection(
            config,
            environment=name,
            stack=stack,
            node=args.node,
            clients=clients,
            profile=args.profile,
            file=str(args.file),
        )
    except (BotoCoreError, ClientError) as error:
        looked_up = f"cannot look up {stack} in {region}: "
        raise ConfigurationError(looked_up + aws_reason(error, TABLE_WIDTH - 7 - len(looked_up))) from None
    if args.output == "json":
        print_json(out, {"environment": name, "stack": stack, "region": region, **found.as_dict()})
    elif args.print:
        print("\n".join([found.shell, *note_lines(found, prefix="# ")]), file=out)
    else:
        return (
            EXIT_OK
            if open_connection(found, lambda line: print(line, file=out, flush=True)) == 0
            else EXIT_FAILED
        )
    return EXIT_OK
