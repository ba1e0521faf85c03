"""``training-clusters cleanup FILE``: list what an environment left behind after ``cdk destroy``, and delete it
on request (the finding and deleting are :mod:`training_clusters.cli.cleanup`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from training_clusters.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    aws_problem,
    load,
    no_credentials,
    paragraph,
    print_json,
)
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.tables import numbered_notes, text_table

if TYPE_CHECKING:
    from training_clusters.cli.cleanup import Inventory, Leftover


def cleanup_command(args: argparse.Namespace, out: TextIO) -> int:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from training_clusters.cli import cleanup
    from training_clusters.environments import stack_id

    config, name = load(args.file)
    if args.yes and not args.delete:
        raise ConfigurationError("training-clusters cleanup: --yes confirms --delete; give --delete too")
    if args.dry_run and (args.delete or args.backup or args.disable_deletion_protection):
        raise ConfigurationError(
            "training-clusters cleanup: --dry-run asks AWS nothing; it takes no --delete"
        )
    region, stack = config.region, stack_id(name)
    if args.dry_run:
        _kept_report(args, name, region, out, credentials=None)
        return EXIT_OK
    try:
        session = boto3.session.Session(profile_name=args.profile, region_name=region)
        credentials = session.get_credentials()
        if credentials is None:
            _kept_report(args, name, region, out, credentials=False)
            raise no_credentials("cleanup", args.profile)
        credentials.get_frozen_credentials()  # an expired SSO token or a role that cannot be assumed: here
        clients = cleanup.CleanupClients.from_session(session, region)
        inventory = cleanup.find_leftovers(name, stack, region, clients)
    except (BotoCoreError, ClientError, cleanup.CleanupStopped) as error:  # no network, a listing refused
        raise ConfigurationError(f"cannot list what {stack} left in {region}: {aws_problem(error)}") from None
    now = cleanup.utc_now()
    planned = cleanup.plan(
        inventory.leftovers,
        backup=args.backup,
        disable_deletion_protection=args.disable_deletion_protection,
        now=now,
    )
    as_json = args.output == "json"
    document: dict[str, Any] = {
        "environment": name,
        "stack": stack,
        "region": region,
        "resources": [leftover.as_dict() for leftover in planned],
        "monthly_usd_known": round(sum(leftover.monthly_usd or 0 for leftover in planned), 2),
        "notes": cleanup.summary_lines(inventory, planned),
        "deleted": False,
        "steps": [],
    }
    if not as_json:
        print(_cleanup_table(inventory, planned), file=out)
    doomed = [leftover for leftover in planned if leftover.to_delete]
    status = EXIT_OK
    if not args.delete:
        if not as_json and doomed:
            dry_run = (
                "dry run: nothing deleted. --delete deletes what the plan column says (it asks for the "
                "environment's name; --yes for scripts)."
            )
            print(f"\n{paragraph(dry_run)}", file=out)
    elif not doomed:
        if not as_json:
            print("\nnothing to delete", file=out)
    elif not (args.yes or _confirmed(name, len(doomed))):
        document["steps"] = ["not confirmed: nothing deleted"]
        if not as_json:
            print("\nnot confirmed: nothing deleted", file=out)
        status = EXIT_FAILED
    else:
        deleter = cleanup.Deleter(
            clients,
            environment=name,
            tags=config.resource_tags(name),
            say=(lambda line: None)
            if as_json
            else (lambda line: print(paragraph(line, indent="    "), file=out, flush=True)),
            now=now,
        )
        if not as_json:
            print("", file=out)
        try:
            deleter.run(planned, backup=args.backup)
            document["deleted"] = True
        except (cleanup.CleanupStopped, BotoCoreError) as error:
            deleter.done.append(f"stopped: {aws_problem(error)}")
            if not as_json:
                print(paragraph(f"stopped: {aws_problem(error)}", indent="    "), file=out)
            status = EXIT_FAILED
        document["steps"] = deleter.done
    if as_json:
        print_json(out, document)
    return status


def _cleanup_table(inventory: Inventory, planned: Sequence[Leftover]) -> str:
    """What is left, what it costs and what --delete does with it (a long plan under its number below the
    table, ids never cut); then the total and what is not listed."""
    from training_clusters.cli.cleanup import summary_lines

    found = f"{inventory.stack} in {inventory.region}"
    lines = "\n".join(paragraph(f"- {line}", indent="  ") for line in summary_lines(inventory, planned))
    if not planned:
        return f"{found}: nothing left behind\n{lines}"
    notes: list[str] = []

    def plan(leftover: Leftover) -> str:
        if len(leftover.plan) <= _SHORT_PLAN:
            return leftover.plan
        note = leftover.keep or leftover.plan
        if note not in notes:
            notes.append(note)
        verb = "scheduled" if leftover.scheduled else "keep" if leftover.keep else "delete"
        return f"{verb} [{notes.index(note) + 1}]"

    rows = [
        (f"{p.kind.label}: {p.detail}" if p.detail else p.kind.label, p.name, p.cost, plan(p))
        for p in planned
    ]
    table = text_table(("resource", "id", "a month", "plan"), rows, whole=(1,))
    return f"{found}: {len(planned)} resource(s) left behind\n\n{table}\n\n{numbered_notes(notes)}\n\n{lines}".replace(
        "\n\n\n\n", "\n\n"
    )


#: A plan up to this long is shown in its cell; a longer one under its number below the table.
_SHORT_PLAN = 20


def _confirmed(name: str, count: int) -> bool:
    """Whether the user types the environment's name (read from standard input, at most one line)."""
    print(
        f"type the environment's name ({name}) to delete {count} resource(s): ",
        end="",
        file=sys.stderr,
        flush=True,
    )
    answer = sys.stdin.readline(256)
    return answer.strip() == name


def _kept_report(
    args: argparse.Namespace, name: str, region: str, out: TextIO, *, credentials: bool | None
) -> None:
    """What ``cdk destroy`` leaves, offline from the synthesized template, with its monthly cost (the dry run;
    also what cleanup says without credentials, with the actions a listing would call)."""
    from training_clusters.cli.cleanup import (
        BACKUP_IAM_ACTIONS,
        DELETE_IAM_ACTIONS,
        LIST_IAM_ACTIONS,
        PROTECTION_IAM_ACTIONS,
    )
    from training_clusters.cli.kept import kept_after_destroy, monthly_total, summary
    from training_clusters.diagram.sources import synthesize_environments
    from training_clusters.environments import stack_id

    (source,) = synthesize_environments([args.file])
    kept = kept_after_destroy(source.template, region)
    needs = (
        f"listing what is really there calls {', '.join(LIST_IAM_ACTIONS)} in {region}; --delete also "
        f"{', '.join(DELETE_IAM_ACTIONS)}; --backup {', '.join(BACKUP_IAM_ACTIONS)}; "
        f"--disable-deletion-protection {', '.join(PROTECTION_IAM_ACTIONS)}"
    )
    if args.output == "json":
        document: dict[str, Any] = {
            "environment": name,
            "stack": stack_id(name),
            "region": region,
            "offline": True,
            "kept": [k.as_dict() for k in kept],
            "monthly_usd_known": monthly_total(kept),
            "notes": summary(kept, region),
        }
        if credentials is False:
            document["iam_actions"] = {
                "list": list(LIST_IAM_ACTIONS),
                "delete": list(DELETE_IAM_ACTIONS),
                "backup": list(BACKUP_IAM_ACTIONS),
                "disable_deletion_protection": list(PROTECTION_IAM_ACTIONS),
            }
        print_json(out, document)
        return
    head = (
        f"{stack_id(name)} in {region}, offline from its synthesized template: what cdk destroy leaves, "
        f"{len(kept)} resource(s)"
    )
    rows = [(k.resource + (f": {k.detail}" if k.detail else ""), k.logical_id, k.cost) for k in kept]
    table = text_table(("resource", "logical id", "a month"), rows, whole=(1,))
    lines = "\n".join(paragraph(f"- {line}", indent="  ") for line in summary(kept, region))
    tail = (
        paragraph(needs)
        if credentials is False
        else paragraph(
            f"with credentials, cleanup {args.file} lists what is really there, and --delete deletes it"
        )
    )
    print(f"{paragraph(head)}\n\n{table}\n\n{lines}\n\n{tail}", file=out)
