"""The numbers README.md shows are the synthesized templates' (issue 39: they had gone stale).

* the sample of ``make synth``'s summary is the row :mod:`training_clusters.gates.summary` prints for
  hyperpod-slurm, from the gated assembly (its cdk-nag, cfn-lint and checkov results);
* "One file, five orchestrators": the resources in each template of training-any under each orchestrator,
  and what it costs an hour (:func:`training_clusters.cli.estimate.hourly_estimate`, rounded to 0.1);
* the Environments table's costs that need no price beyond the estimate's table: network-storage, and
  training-any's range over the five. The other rows' costs (p5, p4d, trn, ml.p5 prices) are not checked.
"""

from __future__ import annotations

import copy
import re
import tempfile
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml

from training_clusters.cli.estimate import hourly_estimate
from training_clusters.config import parse_environment
from training_clusters.config.compute import Orchestrator
from training_clusters.environments import add_environment_config
from training_clusters.gates.summary import format_table, summarize

from ..conftest import CDK_CONTEXT, ROOT, CheckovRun, EnvironmentGates
from ..test_compute import UNUSED

README = (ROOT / "README.md").read_text(encoding="utf-8")
ANY = ROOT / "environments" / "training-any.yaml"
#: The five-orchestrator table's columns, in order.
COLUMNS = ("parallelcluster", "hyperpod", "pcs", "eks", "hyperpod-eks")


def table_row(label: str) -> list[str]:
    """The cells of the README table row that starts with ``| label |``."""
    line = next(line for line in README.splitlines() if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in line.strip().strip("|").split("|")][1:]


@pytest.fixture(scope="module")
def any_templates() -> dict[str, dict[str, Any]]:
    """training-any under each orchestrator (no gates: test_compute.py gates them)."""
    document = yaml.safe_load(ANY.read_text())
    templates = {}
    for orchestrator in COLUMNS:
        app = cdk.App(
            outdir=tempfile.mkdtemp(prefix="readme-numbers-"),
            context={**CDK_CONTEXT, "aws:cdk:disable-asset-staging": True},
        )
        switched = {**copy.deepcopy(document), "orchestrator": orchestrator}
        if UNUSED.get(orchestrator):  # what the README's table leaves out under that orchestrator
            switched["ignore"] = list(UNUSED[orchestrator])
        config = parse_environment(switched, source=str(ANY))
        stack = add_environment_config(app, config, ANY.stem)
        templates[orchestrator] = app.synth().get_stack_by_name(stack.stack_name).template
    return templates


def test_the_orchestrators_are_the_tables_columns() -> None:
    assert [o.value for o in Orchestrator] == list(COLUMNS)


def test_the_resource_counts_are_the_templates(any_templates: dict[str, dict[str, Any]]) -> None:
    counts = [re.match(r"\d+", cell).group(0) for cell in table_row("resources in the template")]  # type: ignore[union-attr]
    assert counts == [str(len(any_templates[o]["Resources"])) for o in COLUMNS]


def test_the_hourly_costs_are_the_estimates(any_templates: dict[str, dict[str, Any]]) -> None:
    estimates = {o: hourly_estimate(any_templates[o]) for o in COLUMNS}
    shown = [
        f"{estimates[o].usd_per_hour:.1f}" + (" + PCS fees" if estimates[o].unpriced else "") for o in COLUMNS
    ]
    assert table_row("≈ $/h (on-demand list prices)") == shown
    assert [estimates[o].unpriced for o in COLUMNS] == [(), (), ("AWS PCS cluster",), (), ()]
    low, high = (
        min(e.usd_per_hour for e in estimates.values()),
        max(e.usd_per_hour for e in estimates.values()),
    )
    assert table_row("`training-any.yaml`")[1] == f"≈ ${low:.1f}\N{EN DASH}{high:.1f}/h (see below)"


def test_network_storage_costs_what_its_table_row_says(environment_gates: EnvironmentGates) -> None:
    estimate = hourly_estimate(environment_gates.template(ROOT / "environments" / "network-storage.yaml"))
    assert [part for part, _ in estimate.parts] == ["NAT gateway", "FSx for Lustre storage"]
    assert table_row("`network-storage.yaml`")[1] == f"≈ ${estimate.usd_per_hour:.2f}/h"


def test_the_summary_sample_is_what_make_synth_prints_for_hyperpod_slurm(
    environment_gates: EnvironmentGates, checkov_run: CheckovRun
) -> None:
    stack, gate = environment_gates.get(ROOT / "environments" / "hyperpod-slurm.yaml")
    assert gate.assembly is not None
    lint = gate.lint
    (summary,) = summarize(
        Path(gate.assembly.directory),
        lint=lambda template, regions: lint,
        scan=lambda templates: checkov_run.results(stack.stack_name),
    )
    sample = README[README.index("`make synth` prints one row per template") :].split("```\n", 2)[1]
    assert sample == format_table([summary]) + "\n"
