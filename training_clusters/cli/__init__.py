"""The ``training-clusters`` console script: what to do with an environment file before and after deploy.

::

    training-clusters preflight environments/eks-g5-efa.yaml [--region R] [--profile P]
    training-clusters render-pcluster environments/parallelcluster-c5n.yaml [-o cluster-config.yaml] [--deployed]
    training-clusters acceptance environments/parallelcluster-c5n.yaml [-d acceptance/] [--dcgm-level 2|3|4]
    training-clusters diagram environments/eks-p5-efa.yaml -o eks-p5-efa.svg|.png  [--assembly cdk.out --stack S]
    training-clusters diagram --assembly cdk.out -d pictures/   # every stack, and the whole app
    training-clusters cleanup environments/network-storage.yaml [--delete [--yes] [--backup]] [--profile P]
    training-clusters connect environments/hyperpod-team.yaml [--node controller|login|head|NAME|i-...] [--print]
    training-clusters catalog
    training-clusters schema > environments/schema.json

Every command prints a table for people or, with ``--output json`` (before or after the command's name),
one JSON document for scripts. Exit status: 0 success, 1 a check failed (preflight), 2 a bad environment
file or command line, or no AWS credentials for a command that asks AWS — always one line on standard
error (``error: ...``), never a traceback: a missing input, an output directory that does not exist, a
file where a directory is wanted, a path that cannot be written. A reader that stops early (``| head``)
ends the script quietly with status 1, as Python's documentation suggests ("Note on SIGPIPE").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from training_clusters.acceptance.dcgm import DCGM_LEVELS, DEFAULT_DCGM_LEVEL
from training_clusters.catalog import all_instance_types
from training_clusters.config import EnvironmentConfig, environment_name, load_environment
from training_clusters.config.yaml_file import regular_file_problem
from training_clusters.model.errors import ConfigurationError, bounded, excerpt
from training_clusters.model.tables import TABLE_WIDTH, numbered_notes, text_table
from training_clusters.rules.regions import region_shape_problem, unknown_region_problem

if TYPE_CHECKING:
    from training_clusters.cli.cleanup import Inventory, Leftover
    from training_clusters.preflight import Check

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
OUTPUTS = ("table", "json")
DISTRIBUTION = "cdk-training-clusters"

#: What ``--help`` shows, per command (each command's ``--help`` shows its own); tests/cli/test_cli.py parses
#: every one, so they stay valid command lines.
EXAMPLES: Mapping[str, tuple[str, ...]] = {
    "preflight": (
        "training-clusters preflight environments/eks-g5-efa.yaml --profile dev",
        "training-clusters preflight environments/eks-g5-efa.yaml --output json > preflight.json",
    ),
    "render-pcluster": (
        "training-clusters render-pcluster environments/parallelcluster-c5n.yaml -o cluster-config.yaml",
        "training-clusters render-pcluster environments/parallelcluster-c5n.yaml --deployed -o cluster-config.yaml",
    ),
    "acceptance": ("training-clusters acceptance environments/parallelcluster-c5n.yaml -d acceptance/",),
    "diagram": (
        "training-clusters diagram environments/eks-p5-efa.yaml -o eks-p5-efa.svg",
        "training-clusters diagram --assembly cdk.out --stack training-eks-p5-efa -o eks-p5-efa.png",
        "training-clusters diagram --assembly cdk.out -d pictures/",
    ),
    "cleanup": (
        "training-clusters cleanup environments/network-storage.yaml --dry-run",
        "training-clusters cleanup environments/network-storage.yaml",
        "training-clusters cleanup environments/network-storage.yaml --delete --backup",
    ),
    "connect": (
        "training-clusters connect environments/hyperpod-team.yaml --node login",
        "training-clusters connect environments/parallelcluster-c5n.yaml --print",
    ),
    "bootstrap": ("training-clusters bootstrap environments/parallelcluster-c5n.yaml --profile dev",),
    "deploy": (
        "training-clusters deploy environments/parallelcluster-c5n.yaml",
        "training-clusters deploy environments/parallelcluster-c5n.yaml --require-approval never --profile dev",
    ),
    "diff": ("training-clusters diff environments/parallelcluster-c5n.yaml",),
    "destroy": ("training-clusters destroy environments/parallelcluster-c5n.yaml",),
    "catalog": ("training-clusters catalog --output json",),
    "schema": ("training-clusters schema > environments/schema.json",),
}
_CONVENTIONS = """Every command takes --output json, before or after its name (bootstrap, deploy, diff and destroy pass what
follows the file to the CDK CLI, whose --output is the assembly's folder). Exit status: 0 ok, 1 a check
failed, 2 a bad file, path or command line, or no AWS credentials (one line on standard error); bootstrap,
deploy, diff and destroy exit with the CDK CLI's status."""


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    """Run one command; return the exit status (the console script exits with it)."""
    out = stdout or sys.stdout
    try:
        args = _parser().parse_args(argv)
        status: int = args.command(args, out)
    except ConfigurationError as error:
        print(_fitted(f"error: {error}"), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader left (| head): console() ends quietly
        raise
    except OSError as error:  # a path that passed the checks below, then failed when used (e.g. no space)
        where = f"{error.filename}: " if error.filename else ""
        print(f"error: {where}{error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    return status


# --------------------------------------------------------------------------------------------------
# commands


def _preflight(args: argparse.Namespace, out: TextIO) -> int:
    import boto3
    from botocore.exceptions import BotoCoreError

    from training_clusters.preflight import AwsClients, preflight

    config, _ = _load(args.file)
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
            raise _no_credentials("preflight", args.profile)
        credentials.get_frozen_credentials()  # an expired SSO token or a role that cannot be assumed: here
        checks = preflight(config, AwsClients.from_session(session, region))
    except BotoCoreError as error:  # unknown profile, credentials that cannot be loaded, no network
        raise ConfigurationError(f"cannot reach AWS in {region}: {_aws_problem(error)}") from None
    failed = [check for check in checks if not check.passed]
    if args.output == "json":
        _json(
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


def _no_credentials(command: str, profile: str | None) -> ConfigurationError:
    """The one line a command that asks AWS says without credentials (what it can say offline is printed
    before it, on standard output)."""
    found = f" for profile {excerpt(profile, limit=24)}" if profile else ""
    return ConfigurationError(
        f"{command} found no AWS credentials{found}: give --profile P, set AWS_PROFILE, or run aws configure"
    )


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
        _json(out, {**document, "iam_actions": list(REQUIRED_IAM_ACTIONS)})
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
    print(f"{_paragraph(head)}\n\n{table}\n\n{_paragraph(calls)}", file=out)


def _render_pcluster(args: argparse.Namespace, out: TextIO) -> int:
    config, name = _load(args.file)
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
        _json(
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
            f"cannot read stack {stack_name} in {region}: {_aws_problem(error)}"
        ) from None


def _aws_problem(error: Exception) -> str:
    """botocore's message on one bounded line (it quotes what it was given, such as a --profile)."""
    return bounded(str(error), 300)


def _acceptance(args: argparse.Namespace, out: TextIO) -> int:
    from training_clusters.acceptance import acceptance_plan, default_directory, write_jobs

    config, name = _load(args.file)
    plan = acceptance_plan(config, name, dcgm_level=args.dcgm_level)
    directory = Path(args.directory) if args.directory else default_directory(name)
    paths = write_jobs(plan.jobs, _output_dir(str(directory))) if plan.jobs else []
    if args.output == "json":
        _json(
            out,
            {
                "environment": name,
                "directory": str(directory),
                "jobs": [
                    {**job.as_dict(), "path": str(path)} for job, path in zip(plan.jobs, paths, strict=True)
                ],
                "skipped": list(plan.skipped),
                "reason": plan.reason,
            },
        )
        return EXIT_OK
    if plan.reason:
        print(_paragraph(f"{name}: {plan.reason}", indent="  "), file=out)
        return EXIT_OK
    rows = [(str(path), job.expected) for path, job in zip(paths, plan.jobs, strict=True)]
    print(text_table(("job", "a healthy cluster gives"), rows), file=out)
    print("", file=out)
    for job in plan.jobs:
        print(_job_lines(job.filename, job.description), file=out)
    for skipped in plan.skipped:
        print(_paragraph(f"- skipped: {skipped}", indent="  "), file=out)
    return EXIT_OK


#: Where a job's description turns from what it is to the commands that run it.
_COMMANDS_START = re.compile(r": (?=(?:kubectl|sbatch|srun|bash) )")
#: A note after the last command, in brackets (not a shell construct).
_TRAILING_NOTE = re.compile(r" \(([^()|&;]*)\)$")


def _job_lines(filename: str, description: str) -> str:
    """A job's description as prose wrapped to the table width, then each command it says to run whole, alone
    on its own indented line (copy-pasteable however long)."""
    prose, *rest = _COMMANDS_START.split(description, maxsplit=1)
    commands = rest[0] if rest else ""
    if not commands:
        return _paragraph(f"- {filename}: {prose}", indent="  ")
    note = _TRAILING_NOTE.search(commands)
    if note is not None:
        commands = commands[: note.start()]
        prose = f"{prose} ({note.group(1)})"
    steps = commands.split("; then ")
    lead = "run:" if len(steps) == 1 else "run, then check:" if "check.sh" in steps[-1] else "run in turn:"
    lines = [_paragraph(f"- {filename}: {prose}; {lead}", indent="  ")]
    lines.extend(f"    {step}" for step in steps)
    return "\n".join(lines)


def _fitted(text: str) -> str:
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


def _diagram(args: argparse.Namespace, out: TextIO) -> int:
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


def _cleanup(args: argparse.Namespace, out: TextIO) -> int:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from training_clusters.cli import cleanup
    from training_clusters.environments import stack_id

    config, name = _load(args.file)
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
            raise _no_credentials("cleanup", args.profile)
        credentials.get_frozen_credentials()  # an expired SSO token or a role that cannot be assumed: here
        clients = cleanup.CleanupClients.from_session(session, region)
        inventory = cleanup.find_leftovers(name, stack, region, clients)
    except (BotoCoreError, ClientError, cleanup.CleanupStopped) as error:  # no network, a listing refused
        raise ConfigurationError(
            f"cannot list what {stack} left in {region}: {_aws_problem(error)}"
        ) from None
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
            print(f"\n{_paragraph(dry_run)}", file=out)
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
            else (lambda line: print(_paragraph(line, indent="    "), file=out, flush=True)),
            now=now,
        )
        if not as_json:
            print("", file=out)
        try:
            deleter.run(planned, backup=args.backup)
            document["deleted"] = True
        except (cleanup.CleanupStopped, BotoCoreError) as error:
            deleter.done.append(f"stopped: {_aws_problem(error)}")
            if not as_json:
                print(_paragraph(f"stopped: {_aws_problem(error)}", indent="    "), file=out)
            status = EXIT_FAILED
        document["steps"] = deleter.done
    if as_json:
        _json(out, document)
    return status


def _cleanup_table(inventory: Inventory, planned: Sequence[Leftover]) -> str:
    """What is left, what it costs and what --delete does with it (a long plan under its number below the
    table, ids never cut); then the total and what is not listed."""
    from training_clusters.cli.cleanup import summary_lines

    found = f"{inventory.stack} in {inventory.region}"
    lines = "\n".join(_paragraph(f"- {line}", indent="  ") for line in summary_lines(inventory, planned))
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


def _paragraph(text: str, *, indent: str = "") -> str:
    """``text`` wrapped to the table width, later lines indented by ``indent``."""
    import textwrap

    return textwrap.fill(text, TABLE_WIDTH, subsequent_indent=indent, break_on_hyphens=False)


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
        _json(out, document)
        return
    head = (
        f"{stack_id(name)} in {region}, offline from its synthesized template: what cdk destroy leaves, "
        f"{len(kept)} resource(s)"
    )
    rows = [(k.resource + (f": {k.detail}" if k.detail else ""), k.logical_id, k.cost) for k in kept]
    table = text_table(("resource", "logical id", "a month"), rows, whole=(1,))
    lines = "\n".join(_paragraph(f"- {line}", indent="  ") for line in summary(kept, region))
    tail = (
        _paragraph(needs)
        if credentials is False
        else _paragraph(
            f"with credentials, cleanup {args.file} lists what is really there, and --delete deletes it"
        )
    )
    print(f"{_paragraph(head)}\n\n{table}\n\n{lines}\n\n{tail}", file=out)


def _cdk(args: argparse.Namespace, out: TextIO) -> int:
    """bootstrap, deploy, diff, destroy: the file checked here first (one line, exit 2), then the CDK CLI runs it."""
    from training_clusters.cli.cdk import run

    _load(args.file)
    out.flush()
    return run(args.cdk_action, args.file, args.cdk_args)


def _connect(args: argparse.Namespace, out: TextIO) -> int:
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

    config, name = _load(args.file)
    region, stack = config.region, stack_id(name)
    try:
        session = boto3.session.Session(profile_name=args.profile, region_name=region)
        credentials = session.get_credentials()
        if credentials is None:
            raise _no_credentials("connect", args.profile)
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
        _json(out, {"environment": name, "stack": stack, "region": region, **found.as_dict()})
    elif args.print:
        print("\n".join([found.shell, *note_lines(found, prefix="# ")]), file=out)
    else:
        return (
            EXIT_OK
            if open_connection(found, lambda line: print(line, file=out, flush=True)) == 0
            else EXIT_FAILED
        )
    return EXIT_OK


def _catalog(args: argparse.Namespace, out: TextIO) -> int:
    types = all_instance_types()
    if args.output == "json":
        from training_clusters.catalog import to_row

        _json(out, [to_row(t) for t in types])
        return EXIT_OK
    rows = [
        (
            t.name,
            str(t.vcpus),
            f"{t.memory_gib:g}",
            f"{t.accelerators.count} x {t.accelerators.model}" if t.accelerators else "-",
            str(t.max_efa_interfaces or "-"),
            str(t.max_network_cards),
            "yes" if t.gpudirect_rdma else "no",
            f"{t.network_gbps:g}",
            t.quota_family.value,
            t.hyperpod_name or "-",
        )
        for t in types
    ]
    header = (
        "type",
        "vCPUs",
        "GiB",
        "accelerators",
        "EFA",
        "cards",
        "GPUDirect",
        "Gbit/s",
        "quota",
        "HyperPod",
    )
    print(text_table(header, rows), file=out)
    return EXIT_OK


def _schema(args: argparse.Namespace, out: TextIO) -> int:
    _json(out, environment_schema())
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


class ArgumentError(ConfigurationError, argparse.ArgumentTypeError):
    """An argument that cannot be used; argparse reports it as a usage error naming the argument.

    Its message is made safe (escaped, bounded) when made, as every ConfigurationError's; argparse's own
    report of a plain ValueError would repeat the whole value.
    """


class PathError(ArgumentError):
    """A path argument that cannot be used."""


def _region(text: str) -> str:
    """An AWS region name, by its shape (the rule the environment file's ``region`` follows; whether
    botocore knows it is checked with the file, whose ``allow_unknown_region`` may allow a newer one)."""
    problem = region_shape_problem(text)
    if problem is not None:
        raise ArgumentError(problem)
    return text


def _input_file(text: str) -> Path:
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


def _input_dir(text: str) -> Path:
    """An existing directory to read (a cloud assembly)."""
    path = Path(text)
    if not path.exists():
        raise PathError(f"{text!r}: no such directory")
    if not path.is_dir():
        raise PathError(f"{text!r} is a file; give a directory")
    return path


def _output_file(text: str) -> Path:
    """A file to write (replaced if it exists): its directory must exist and be writable."""
    path = Path(text)
    if path.is_dir():
        raise PathError(f"{text!r} is a directory; give a file name to write")
    _writable_directory(path.parent, text, create=False)
    if path.exists() and not os.access(path, os.W_OK):
        raise PathError(f"{text!r} cannot be written (permission denied)")
    return path


def _output_dir(text: str) -> Path:
    """A directory to write files into: an existing writable one, or one that can be created."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise PathError(f"{text!r} is a file; give a directory")
    _writable_directory(path, text, create=True)
    return path


def _writable_directory(directory: Path, text: str, *, create: bool) -> None:
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


class _Parser(argparse.ArgumentParser):
    """Usage errors on one line (``error: training-clusters acceptance: argument -d/--directory: ...``).

    Options are never abbreviated: argparse would otherwise take ``--output json`` given after a command
    with an ``--output-file`` for ``--output-file json``. Each command's parser is one of these too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)  # examples as written
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise ConfigurationError(f"{self.prog}: {message}")


# --------------------------------------------------------------------------------------------------
# plumbing


def _load(file: str | Path) -> tuple[EnvironmentConfig, str]:
    path = Path(file)
    config = load_environment(path)
    return config, environment_name(config, path)


def _json(out: TextIO, document: Any) -> None:
    json.dump(document, out, indent=2, sort_keys=False, default=str)
    out.write("\n")


def _examples(*commands: str) -> str:
    return "examples:\n" + "".join(f"  {example}\n" for name in commands for example in EXAMPLES[name])


def _version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="training-clusters",
        description="Check, render and verify cdk-training-clusters environments.",
        epilog=f"{_examples(*EXAMPLES)}\n{_CONVENTIONS}",
    )
    parser.add_argument("--output", choices=OUTPUTS, default="table", help="default: table")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    # each command takes --output too; given there, it overrides the one before the command's name
    output = _Parser(add_help=False)
    output.add_argument("--output", choices=OUTPUTS, default=argparse.SUPPRESS, help="default: table")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def add_command(name: str, summary: str, *, takes_output: bool = True) -> argparse.ArgumentParser:
        added: argparse.ArgumentParser = commands.add_parser(
            name, help=summary, parents=[output] if takes_output else [], epilog=_examples(name)
        )
        return added

    command = add_command("preflight", "check quotas, offerings, EFA and FSx limits before deploy")
    command.add_argument("file", type=_input_file, help="environment file")
    command.add_argument("--region", type=_region, help="default: the file's region")
    command.add_argument("--profile", help="AWS profile; default: the standard credential chain")
    command.set_defaults(command=_preflight)

    command = add_command("render-pcluster", "the ParallelCluster cluster-config.yaml")
    command.add_argument("file", type=_input_file, help="environment file with a parallelcluster section")
    command.add_argument(
        "-o", "--output-file", type=_output_file, help="write it here; default: standard output"
    )
    command.add_argument(
        "--deployed", action="store_true", help="fill in the ids of the deployed stack (needs credentials)"
    )
    command.add_argument(
        "--profile", help="AWS profile for --deployed; default: the standard credential chain"
    )
    command.set_defaults(command=_render_pcluster)

    command = add_command("acceptance", "write the EFA / NCCL / DCGM verification jobs")
    command.add_argument("file", type=_input_file, help="environment file")
    command.add_argument(
        "-d", "--directory", type=_output_dir, help="default: acceptance/<environment> (made if missing)"
    )
    command.add_argument(
        "--dcgm-level",
        type=int,
        choices=DCGM_LEVELS,
        default=DEFAULT_DCGM_LEVEL,
        help="dcgmi diag -r level of the DCGM diagnostics jobs: 2 (minutes, default), 3 (~30 min), 4 (1-2 h)",
    )
    command.set_defaults(command=_acceptance)

    command = add_command("diagram", "draw what an environment synthesizes (SVG, PNG, Mermaid)")
    command.add_argument("file", nargs="?", type=_input_file, help="environment file (or --assembly)")
    command.add_argument(
        "-o",
        "--output-file",
        type=_output_file,
        help="out.svg or out.png (writes out.md with a Mermaid flowchart beside it), out.dot or out.md; "
        "default: SVG on standard output",
    )
    command.add_argument(
        "--assembly", type=_input_dir, help="draw a stack of this cloud assembly (cdk.out) instead"
    )
    command.add_argument("--stack", help="the stack of --assembly to draw; default: its only stack")
    command.add_argument(
        "-d",
        "--output-dir",
        type=_output_dir,
        help="with --assembly: write STACK.svg and STACK.md for every stack, and app.svg / app.md of the "
        "whole app with the references between its stacks",
    )
    command.set_defaults(command=_diagram)

    command = add_command(
        "cleanup", "list what an environment left after cdk destroy, what it costs; delete it on request"
    )
    command.add_argument("file", type=_input_file, help="environment file")
    command.add_argument(
        "--delete",
        action="store_true",
        help="delete it (asks for the environment's name); default: a dry run",
    )
    command.add_argument("--yes", action="store_true", help="with --delete: do not ask (for scripts)")
    command.add_argument(
        "--dry-run",
        action="store_true",
        help="offline: what cdk destroy leaves, read from the synthesized template, and its monthly cost",
    )
    command.add_argument(
        "--backup",
        action="store_true",
        help="back each file system up first and wait for it (SCRATCH ones cannot be: they are kept), and take "
        "a final snapshot of each database",
    )
    command.add_argument(
        "--disable-deletion-protection",
        action="store_true",
        help="turn a database's deletion protection off to delete it; default: a protected database is kept",
    )
    command.add_argument("--profile", help="AWS profile; default: the standard credential chain")
    command.set_defaults(command=_cleanup)

    command = add_command(
        "connect", "open an SSM session on a node of a deployed environment (EKS: kubeconfig)"
    )
    command.add_argument("file", type=_input_file, help="environment file")
    command.add_argument(
        "--node",
        help="controller, login, head, an instance group / queue / node group name, or an instance id; default: "
        "the controller (HyperPod), head node (ParallelCluster), login node (PCS), the kubeconfig (EKS)",
    )
    command.add_argument(
        "--print", action="store_true", help="print the command instead of running it (--output json too)"
    )
    command.add_argument("--profile", help="AWS profile; default: the standard credential chain")
    command.set_defaults(command=_connect)
    for action, summary in (
        (
            "bootstrap",
            "cdk bootstrap the account and region of the file's stack (once per account and region)",
        ),
        ("deploy", "cdk deploy one environment file (synth, the gates, then CloudFormation)"),
        ("diff", "cdk diff: what deploying the file would change in its deployed stack"),
        ("destroy", "cdk destroy the file's stack; what it keeps: cleanup FILE --dry-run"),
    ):
        command = add_command(action, summary, takes_output=False)
        command.add_argument("file", type=_input_file, help="environment file")
        command.add_argument(
            "cdk_args",
            nargs=argparse.REMAINDER,
            metavar="CDK_OPTION",
            help="passed to the CDK CLI as given (--profile P, --require-approval never, --force)",
        )
        command.set_defaults(command=_cdk, cdk_action=action)

    command = add_command("catalog", "the instance-type facts the library uses")
    command.set_defaults(command=_catalog)

    command = add_command("schema", "JSON Schema of the environment file")
    command.set_defaults(command=_schema)
    return parser


def console() -> None:
    """Entry point of the ``training-clusters`` script."""
    try:
        status = main()
        sys.stdout.flush()  # a reader that left early is found here, not in Python's flush at exit
    except BrokenPipeError:
        # Python's "Note on SIGPIPE" (signal module): piped into head & co., which stopped reading. Standard
        # output goes to /dev/null so the flush at exit cannot fail again; quietly, status 1.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(EXIT_FAILED)
    sys.exit(status)


if __name__ == "__main__":
    console()
