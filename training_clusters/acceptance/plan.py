"""Which acceptance jobs an environment gets: the Slurm scripts or the EKS MPIJobs, and what is skipped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from training_clusters.acceptance.dcgm import DEFAULT_DCGM_LEVEL, check_dcgm_level
from training_clusters.acceptance.jobs import AcceptanceJob, AcceptancePlan
from training_clusters.orchestrators import ORCHESTRATORS, orchestrator_of

if TYPE_CHECKING:
    from training_clusters.config import EnvironmentConfig


def acceptance_plan(
    config: EnvironmentConfig, environment_name: str, *, dcgm_level: int = DEFAULT_DCGM_LEVEL
) -> AcceptancePlan:
    """The acceptance jobs of an environment, and what it leaves untested and why.

    :param dcgm_level: ``dcgmi diag -r`` level of the DCGM diagnostics jobs (2, 3 or 4). Default: 2.
    :raises ValueError: ``dcgm_level`` is not 2, 3 or 4.
    """
    check_dcgm_level(dcgm_level)
    orchestrator = orchestrator_of(config)
    if orchestrator is None:
        sections = ", ".join(ORCHESTRATORS)
        return AcceptancePlan(
            jobs=(), skipped=(f"no {sections} section: there is no cluster to run jobs on",)
        )
    plan: AcceptancePlan = orchestrator.load("acceptance")(config, environment_name, dcgm_level=dcgm_level)
    return plan


def acceptance_jobs(config: EnvironmentConfig, environment_name: str) -> list[AcceptanceJob]:
    """The verification jobs of an environment (empty when nothing in it has EFA or GPUs)."""
    return list(acceptance_plan(config, environment_name).jobs)


def no_jobs_reason(config: EnvironmentConfig, environment_name: str) -> str | None:
    """Why an environment has no acceptance jobs, or ``None`` when it has some."""
    return acceptance_plan(config, environment_name).reason
