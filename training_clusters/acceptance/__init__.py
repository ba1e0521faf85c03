"""Acceptance jobs: the tests that tell a user at once whether EFA works in a deployed environment.

``acceptance_plan(config, name)`` turns an environment file into files to run on the cluster (the
``training-clusters acceptance FILE`` command writes them):

* Slurm environments (:mod:`~training_clusters.acceptance.slurm`): sbatch scripts running OSU and NCCL
  between two nodes of each EFA instance type, over EFA and over TCP.
* EKS environments (:mod:`~training_clusters.acceptance.eks`): for each GPU EFA nodegroup, the MPIJob of
  :mod:`~training_clusters.workloads.nccl` as YAML and a ``-check.sh`` script gating its log.
* Every GPU partition or nodegroup (:mod:`~training_clusters.acceptance.dcgm`): ``dcgmi diag -r 2``
  (3 or 4 on request) on each node, failing on any test that reports ``Fail``.

Environments with nothing to test (no EFA and no GPU anywhere) get no jobs; :attr:`AcceptancePlan.reason` says why.
The expected figures and their sources are in :mod:`~training_clusters.acceptance.expectations`; the
scripts' bash is in ``bash/`` (:mod:`~training_clusters.acceptance.fragments`).

Names load on first use (PEP 562), as in :mod:`training_clusters.constructs`: the planning modules import
the environment-file model. This package imports the build side (pins from :mod:`training_clusters.model.releases`,
job templates from :mod:`training_clusters.workloads.nccl`), never the reverse.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from training_clusters.acceptance.expectations import (
        Expectation,
        Transport,
        nccl_busbw_expectation,
        osu_bw_expectation,
        osu_latency_expectation,
    )
    from training_clusters.acceptance.jobs import AcceptanceJob, AcceptancePlan, default_directory, write_jobs
    from training_clusters.acceptance.plan import acceptance_jobs, acceptance_plan, no_jobs_reason
    from training_clusters.workloads.nccl import nccl_test_mpijob

_EXPORTS = {
    "AcceptanceJob": "jobs",
    "AcceptancePlan": "jobs",
    "write_jobs": "jobs",
    "default_directory": "jobs",
    "acceptance_plan": "plan",
    "acceptance_jobs": "plan",
    "no_jobs_reason": "plan",
    "Expectation": "expectations",
    "Transport": "expectations",
    "nccl_busbw_expectation": "expectations",
    "osu_bw_expectation": "expectations",
    "osu_latency_expectation": "expectations",
    "nccl_test_mpijob": "training_clusters.workloads.nccl",
}

__all__ = [
    "AcceptanceJob",
    "AcceptancePlan",
    "Expectation",
    "Transport",
    "acceptance_jobs",
    "acceptance_plan",
    "default_directory",
    "nccl_busbw_expectation",
    "nccl_test_mpijob",
    "no_jobs_reason",
    "osu_bw_expectation",
    "osu_latency_expectation",
    "write_jobs",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    qualified = module if module.startswith("training_clusters.") else f"{__name__}.{module}"
    return getattr(import_module(qualified), name)


def __dir__() -> list[str]:
    return __all__
