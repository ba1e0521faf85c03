"""The synth's version advice, repeated by preflight: one function per orchestrator (the registry's ``versions``)."""

from __future__ import annotations

from datetime import date

from training_clusters.config import EnvironmentConfig
from training_clusters.model.releases import EKS_KUBERNETES_VERSION, PARALLELCLUSTER_VERSION
from training_clusters.orchestrators import orchestrator_of
from training_clusters.preflight.results import Check
from training_clusters.rules.versions import (
    kubernetes_support_advice,
    parallelcluster_cve_advice,
    slurm_cve_advice,
)

#: What preflight repeats of the synth's version advice: (field, version, advice or ``None`` when fine).
VersionChoice = tuple[str, str, str | None]


def eks_versions(config: EnvironmentConfig, today: date) -> VersionChoice:
    """The Kubernetes version of an EKS environment against EKS standard support on ``today``."""
    return (
        "eks",
        f"Kubernetes {EKS_KUBERNETES_VERSION}",
        kubernetes_support_advice(EKS_KUBERNETES_VERSION, today),
    )


def hyperpod_eks_versions(config: EnvironmentConfig, today: date) -> VersionChoice:
    """The Kubernetes version the ``hyperpod_eks`` section chooses against EKS standard support on ``today``."""
    assert config.hyperpod_eks is not None
    version = config.hyperpod_eks.kubernetes_version
    return (
        "hyperpod_eks.kubernetes_version",
        f"Kubernetes {version}",
        kubernetes_support_advice(version, today),
    )


def pcs_versions(config: EnvironmentConfig, today: date) -> VersionChoice:
    """The Slurm series a PCS cluster runs against the fixes for the 2026 Slurm CVEs."""
    assert config.pcs is not None
    series = config.pcs.slurm.version.value
    return ("pcs.slurm.version", f"Slurm {series}", slurm_cve_advice(series))


def parallelcluster_versions(config: EnvironmentConfig, today: date) -> VersionChoice:
    """The ParallelCluster release we pin against the fixes for the 2026 Slurm CVEs."""
    advice = parallelcluster_cve_advice(PARALLELCLUSTER_VERSION)
    return ("parallelcluster", f"AWS ParallelCluster {PARALLELCLUSTER_VERSION}", advice)


def hyperpod_versions(config: EnvironmentConfig, today: date) -> VersionChoice:
    """HyperPod picks its own Slurm and AMI: nothing of ours to advise on."""
    return ("hyperpod", "SageMaker HyperPod", None)


def version_checks(config: EnvironmentConfig, today: date) -> list[Check]:
    """The synth's version advice, repeated (no AWS call): a Kubernetes version past EKS standard support on
    ``today``, a Slurm or ParallelCluster below the fixes for the 2026 Slurm CVEs. A warning row each; none when
    every version is fine."""
    orchestrator = orchestrator_of(config)
    chosen: list[VersionChoice] = (
        [] if orchestrator is None else [orchestrator.load("versions")(config, today)]
    )
    checks = []
    for field, version, advice in chosen:
        if advice is None:
            continue
        problem, _, fix = advice.partition(" Fix: ")
        checks.append(
            Check(
                check=f"version of {field}",
                needed="a version in standard support, without known CVEs",
                available=f"{version}: {problem}",
                passed=True,
                remedy=fix,
                warning=True,
            )
        )
    return checks
