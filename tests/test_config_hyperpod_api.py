"""The ``hyperpod`` section's Slurm configuration fields as the environment file reads them (the messages of
their refused combinations are in ``tests/bad_inputs/``, with FILE:LINE)."""

from __future__ import annotations

from pathlib import Path

import pytest

from training_clusters.config import load_environment
from training_clusters.model.options import SlurmConfigMode, SlurmConfigStrategy

ROOT = Path(__file__).resolve().parents[1]


def _with(tmp_path: Path, extra: str) -> Path:
    text = (ROOT / "environments" / "hyperpod-slurm.yaml").read_text()
    path = tmp_path / "hyperpod-slurm.yaml"
    path.write_text(text.replace("  node_recovery: automatic\n", f"  node_recovery: automatic\n{extra}"))
    return path


def test_the_shipped_file_leaves_the_mode_unstated_so_it_is_api() -> None:
    spec = load_environment(ROOT / "environments" / "hyperpod-slurm.yaml").hyperpod
    assert spec is not None
    assert (spec.slurm_config, spec.slurm_config_strategy, spec.api_driven) == (None, None, True)


@pytest.mark.parametrize(
    ("extra", "mode", "strategy", "api"),
    [
        ("  slurm_config: legacy\n", SlurmConfigMode.LEGACY, None, False),
        ("  slurm_config: api\n", SlurmConfigMode.API, None, True),
        (
            "  slurm_config: API\n  slurm_config_strategy: managed\n",
            SlurmConfigMode.API,
            SlurmConfigStrategy.MANAGED,
            True,
        ),
        ("  slurm_config_strategy: Overwrite\n", None, SlurmConfigStrategy.OVERWRITE, True),
    ],
)
def test_the_fields_as_spelt(
    tmp_path: Path, extra: str, mode: SlurmConfigMode | None, strategy: SlurmConfigStrategy | None, api: bool
) -> None:
    spec = load_environment(_with(tmp_path, extra)).hyperpod
    assert spec is not None
    assert (spec.slurm_config, spec.slurm_config_strategy, spec.api_driven) == (mode, strategy, api)


def test_the_team_file_is_api_driven_under_continuous_provisioning_with_an_external_database() -> None:
    spec = load_environment(ROOT / "environments" / "hyperpod-team.yaml").hyperpod
    assert spec is not None
    assert spec.api_driven and spec.node_provisioning_mode == "Continuous" and spec.accounting == "external"
    assert spec.slurm_config_strategy is None
