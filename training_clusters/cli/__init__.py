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
import os
import sys
from collections.abc import Mapping, Sequence
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn, TextIO

from training_clusters.acceptance.dcgm import DCGM_LEVELS, DEFAULT_DCGM_LEVEL
from training_clusters.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    OUTPUTS,
    fitted,
    input_dir,
    input_file,
    output_dir,
    output_file,
    region_argument,
)
from training_clusters.model.errors import ConfigurationError

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
        module, _, name = args.command.partition(":")
        status: int = getattr(import_module(module), name)(args, out)
    except ConfigurationError as error:
        print(fitted(f"error: {error}"), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader left (| head): console() ends quietly
        raise
    except OSError as error:  # a path that passed the checks below, then failed when used (e.g. no space)
        where = f"{error.filename}: " if error.filename else ""
        print(f"error: {where}{error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    return status


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
    command.add_argument("file", type=input_file, help="environment file")
    command.add_argument("--region", type=region_argument, help="default: the file's region")
    command.add_argument("--profile", help="AWS profile; default: the standard credential chain")
    command.set_defaults(command="training_clusters.cli.preflight:preflight_command")

    command = add_command("render-pcluster", "the ParallelCluster cluster-config.yaml")
    command.add_argument("file", type=input_file, help="environment file with a parallelcluster section")
    command.add_argument(
        "-o", "--output-file", type=output_file, help="write it here; default: standard output"
    )
    command.add_argument(
        "--deployed", action="store_true", help="fill in the ids of the deployed stack (needs credentials)"
    )
    command.add_argument(
        "--profile", help="AWS profile for --deployed; default: the standard credential chain"
    )
    command.set_defaults(command="training_clusters.cli.render_pcluster:render_pcluster_command")

    command = add_command("acceptance", "write the EFA / NCCL / DCGM verification jobs")
    command.add_argument("file", type=input_file, help="environment file")
    command.add_argument(
        "-d", "--directory", type=output_dir, help="default: acceptance/<environment> (made if missing)"
    )
    command.add_argument(
        "--dcgm-level",
        type=int,
        choices=DCGM_LEVELS,
        default=DEFAULT_DCGM_LEVEL,
        help="dcgmi diag -r level of the DCGM diagnostics jobs: 2 (minutes, default), 3 (~30 min), 4 (1-2 h)",
    )
    command.set_defaults(command="training_clusters.cli.acceptance:acceptance_command")

    command = add_command("diagram", "draw what an environment synthesizes (SVG, PNG, Mermaid)")
    command.add_argument("file", nargs="?", type=input_file, help="environment file (or --assembly)")
    command.add_argument(
        "-o",
        "--output-file",
        type=output_file,
        help="out.svg or out.png (writes out.md with a Mermaid flowchart beside it), out.dot or out.md; "
        "default: SVG on standard output",
    )
    command.add_argument(
        "--assembly", type=input_dir, help="draw a stack of this cloud assembly (cdk.out) instead"
    )
    command.add_argument("--stack", help="the stack of --assembly to draw; default: its only stack")
    command.add_argument(
        "-d",
        "--output-dir",
        type=output_dir,
        help="with --assembly: write STACK.svg and STACK.md for every stack, and app.svg / app.md of the "
        "whole app with the references between its stacks",
    )
    command.set_defaults(command="training_clusters.cli.diagram:diagram_command")

    command = add_command(
        "cleanup", "list what an environment left after cdk destroy, what it costs; delete it on request"
    )
    command.add_argument("file", type=input_file, help="environment file")
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
    command.set_defaults(command="training_clusters.cli.cleanup_command:cleanup_command")

    command = add_command(
        "connect", "open an SSM session on a node of a deployed environment (EKS: kubeconfig)"
    )
    command.add_argument("file", type=input_file, help="environment file")
    command.add_argument(
        "--node",
        help="controller, login, head, an instance group / queue / node group name, or an instance id; default: "
        "the controller (HyperPod), head node (ParallelCluster), login node (PCS), the kubeconfig (EKS)",
    )
    command.add_argument(
        "--print", action="store_true", help="print the command instead of running it (--output json too)"
    )
    command.add_argument("--profile", help="AWS profile; default: the standard credential chain")
    command.set_defaults(command="training_clusters.cli.connect_command:connect_command")
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
        command.add_argument("file", type=input_file, help="environment file")
        command.add_argument(
            "cdk_args",
            nargs=argparse.REMAINDER,
            metavar="CDK_OPTION",
            help="passed to the CDK CLI as given (--profile P, --require-approval never, --force)",
        )
        command.set_defaults(command="training_clusters.cli.cdk_command:cdk_command", cdk_action=action)

    command = add_command("catalog", "the instance-type facts the library uses")
    command.set_defaults(command="training_clusters.cli.catalog:catalog_command")

    command = add_command("schema", "JSON Schema of the environment file")
    command.set_defaults(command="training_clusters.cli.schema:schema_command")
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
