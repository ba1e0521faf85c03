"""Turn environment files into stacks: what ``app.py`` and the tests both call."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import aws_cdk as cdk

from training_clusters.config import (
    EnvironmentConfig,
    construct_error_line,
    environment_name,
    load_environment,
)
from training_clusters.config.yaml_file import read_yaml_with_lines
from training_clusters.gates.compliance import add_compliance_checks
from training_clusters.model.errors import ConfigurationError
from training_clusters.orchestrators import orchestrator_of
from training_clusters.stacks.base import TrainingEnvironmentStack

ENVIRONMENTS_DIR = Path("environments")


def environment_files(directory: Path = ENVIRONMENTS_DIR) -> list[Path]:
    """Every environment file in ``directory``, sorted."""
    return sorted(p for p in directory.glob("*.yaml") if p.is_file())


def stack_id(name: str) -> str:
    """The CloudFormation stack name of environment ``name``: ``training-<name>``."""
    return f"training-{name}"


def stack_class(config: EnvironmentConfig) -> type[TrainingEnvironmentStack]:
    """The stack class an environment's orchestrator section asks for (:data:`~training_clusters.orchestrators.ORCHESTRATORS`)."""
    orchestrator = orchestrator_of(config)
    return TrainingEnvironmentStack if orchestrator is None else orchestrator.load("stack")


def add_environment(app: cdk.App, path: Path) -> TrainingEnvironmentStack:
    """Load one environment file and add its stack to ``app``.

    Errors raised while the constructs validate their props are re-raised naming the file and the line they
    come from (:func:`~training_clusters.config.construct_error_line`).
    """
    config = load_environment(path)
    name = environment_name(config, path)
    try:
        return add_environment_config(app, config, name, environment_file=shown_path(path))
    except ConfigurationError as error:
        document, key_lines = read_yaml_with_lines(path)
        line = construct_error_line(document, key_lines, str(error))
        raise ConfigurationError(f"{path}:{line}: {error}" if line else f"{path}: {error}") from None


def add_environment_config(
    app: cdk.App, config: EnvironmentConfig, name: str, *, environment_file: str | None = None
) -> TrainingEnvironmentStack:
    """Add the stack for an already-loaded environment (``environment_file``: the file its commands name)."""
    return stack_class(config)(
        app, stack_id(name), config=config, environment_name=name, environment_file=environment_file
    )


def shown_path(path: Path) -> str:
    """``path`` as a user in the current directory types it: relative when it is under that directory."""
    if path.is_absolute():
        try:
            return path.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return path.as_posix()
    return path.as_posix()


def build_app(app: cdk.App, files: Iterable[Path]) -> list[TrainingEnvironmentStack]:
    """Add every file's stack to ``app`` and turn on the cdk-nag gate."""
    stacks = [add_environment(app, path) for path in files]
    add_compliance_checks(app)
    return stacks
