"""Check cluster configurations with AWS ParallelCluster's own schema, offline.

``aws-parallelcluster`` cannot live in our virtual environment (it pins jsii 1.85 and CDK v1), so
``make bootstrap`` installs it into ``.venv-pcluster`` and this test helper runs its schema there in a subprocess,
with a region set and no credentials::

    from tests.pcluster_schema import schema_errors   # test tooling, not shipped
    schema_errors(cluster.concrete_configuration())   # [] when ParallelCluster accepts it

The schema checks field names, types, enumerations and patterns (e.g. ``subnet-...`` ids, which is why
tokens must be replaced by placeholders first); the rules it leaves to online validators are checked by
:mod:`training_clusters.rules.parallelcluster`.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PCLUSTER_VENV = PROJECT_ROOT / ".venv-pcluster"
#: Overrides the interpreter that has ``aws-parallelcluster`` installed.
PYTHON_ENV_VAR = "TRAINING_CLUSTERS_PCLUSTER_PYTHON"

_RUNNER = """
import json, sys
from marshmallow import ValidationError
from pcluster.schemas.cluster_schema import ClusterSchema

results = []
for item in json.load(sys.stdin):
    try:
        ClusterSchema(cluster_name=item["cluster_name"]).load(item["configuration"])
        results.append({})
    except ValidationError as error:
        results.append(error.messages)
json.dump(results, sys.stdout, default=str)
"""


class SchemaUnavailable(RuntimeError):
    """ParallelCluster's schema cannot be run: its virtual environment is missing or broken."""


def pcluster_python() -> Path:
    """The interpreter of ParallelCluster's virtual environment (``$TRAINING_CLUSTERS_PCLUSTER_PYTHON``)."""
    override = os.environ.get(PYTHON_ENV_VAR)
    return Path(override) if override else PCLUSTER_VENV / "bin" / "python"


def schema_errors(
    configuration: Mapping[str, Any], *, cluster_name: str = "training", region: str = "us-east-1"
) -> list[str]:
    """ParallelCluster's schema errors for one configuration, one ``Path.To.Field: message`` per line."""
    return schema_errors_many([configuration], cluster_name=cluster_name, region=region)[0]


def schema_errors_many(
    configurations: Sequence[Mapping[str, Any]], *, cluster_name: str = "training", region: str = "us-east-1"
) -> list[list[str]]:
    """:func:`schema_errors` for several configurations in one subprocess (about 0.6 s in all).

    :raises SchemaUnavailable: the ParallelCluster environment is missing (run ``make bootstrap``) or fails.
    """
    python = pcluster_python()
    if not python.exists():
        raise SchemaUnavailable(
            f"ParallelCluster's schema environment is missing ({python}); run `make bootstrap` to create "
            f"{PCLUSTER_VENV.name} from requirements-pcluster.txt"
        )
    payload = json.dumps(
        [{"cluster_name": cluster_name, "configuration": c} for c in configurations], default=str
    )
    completed = subprocess.run(  # a fixed interpreter and script; the data goes on stdin
        [str(python), "-c", _RUNNER],
        input=payload,
        capture_output=True,
        text=True,
        env=_offline_environment(region),
        timeout=120,
        check=False,
    )
    if completed.returncode != 0:
        raise SchemaUnavailable(
            f"ParallelCluster's schema could not run with {python} (exit {completed.returncode}); "
            f"run `make bootstrap` to repair {PCLUSTER_VENV.name}:\n{completed.stderr.strip()}"
        )
    return [_flatten(messages) for messages in json.loads(completed.stdout)]


def _offline_environment(region: str) -> dict[str, str]:
    """A region, and nothing that could find credentials or reach the instance metadata service."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    environment.update(
        AWS_DEFAULT_REGION=region,
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    return environment


def _flatten(messages: Any, path: str = "") -> list[str]:
    if isinstance(messages, dict):
        return [
            line
            for key, value in messages.items()
            for line in _flatten(value, f"{path}.{key}" if path else str(key))
        ]
    if isinstance(messages, list) and all(isinstance(m, str) for m in messages):
        return [f"{path or '(document)'}: {message}" for message in messages]
    if isinstance(messages, list):
        return [line for item in messages for line in _flatten(item, path)]
    return [f"{path or '(document)'}: {messages}"]
