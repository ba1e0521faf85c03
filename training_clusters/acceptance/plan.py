"""Which acceptance jobs an environment gets: the Slurm scripts or the EKS MPIJobs, and what is skipped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from training_clusters.acceptance.dcgm import DEFAULT_DCGM_LEVEL, check_dcgm_level
from training_clusters.acceptance.eks import eks_plan, hyperpod_eks_plan
from training_clusters.acceptance.jobs import AcceptanceJob, AcceptancePlan
from training_clusters.acceptance.slurm import slurm_plan

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
    if config.eks is not None:
        return eks_plan(config, environment_name, dcgm_level=dcgm_level)
    if config.hyperpod_eks is not None:
        return hyperpod_eks_plan(config, environment_name, dcgm_level=dcgm_level)
    return slurm_plan(config, environment_name, dcgm_level=dcgm_level)


def acceptance_jobs(config: EnvironmentConfig, environment_name: str) -> list[AcceptanceJob]:
    """The verification jobs of an environment (empty when nothing in it has EFA or GPUs)."""
    return list(acceptance_plan(config, environment_name).jobs)


def no_jobs_reason(config: EnvironmentConfig, environment_name: str) -> str | None:
    """Why an environment has no acceptance jobs, or ``None`` when it has some."""
    return acceptance_plan(config, environment_name).reason
