"""Version advice and the one table of version defaults: both sides of every date and every floor, the exact
words, and each default the code uses found in the table (no CDK)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from training_clusters.config import HyperPodEksConfig, PcsSlurmConfig
from training_clusters.model import releases
from training_clusters.model.releases import EKS_STANDARD_SUPPORT_ENDS, VERSION_DEFAULTS
from training_clusters.rules import hyperpod_eks
from training_clusters.rules.parallelcluster import PCLUSTER_VERSION
from training_clusters.rules.versions import (
    kubernetes_support_advice,
    parallelcluster_cve_advice,
    slurm_cve_advice,
)

DAY = timedelta(days=1)
CVES = "the 2026 Slurm CVEs (CVE-2026-65107 and seven more, github.com/aws/aws-parallelcluster/issues/7601)"


def _extended(version: str, ends: str, fix: str) -> str:
    return (
        f"Kubernetes {version} left Amazon EKS standard support on {ends}: the cluster runs in extended support "
        "at $0.60 instead of $0.10 per cluster-hour (about $365 a month more). "
        f"Fix: choose {fix} (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html)"
    )


# --------------------------------------------------------------------------------------------------
# the calendar, as AWS publishes it


def test_the_eks_calendar_is_awss() -> None:
    assert {v: d.isoformat() for v, d in EKS_STANDARD_SUPPORT_ENDS.items()} == {
        "1.29": "2025-03-23",
        "1.30": "2025-07-23",
        "1.31": "2025-11-26",
        "1.32": "2026-03-23",
        "1.33": "2026-07-29",
        "1.34": "2026-12-02",
        "1.35": "2027-03-27",
        "1.36": "2027-08-02",
    }


@pytest.mark.parametrize("version", sorted(EKS_STANDARD_SUPPORT_ENDS))
def test_each_version_is_advised_against_from_its_end_date_on(version: str) -> None:
    ends = EKS_STANDARD_SUPPORT_ENDS[version]
    assert kubernetes_support_advice(version, ends - DAY) is None
    advice = kubernetes_support_advice(version, ends)
    assert advice is not None and advice.startswith(
        f"Kubernetes {version} left Amazon EKS standard support on {ends.isoformat()}: "
    )


def test_the_advice_names_the_date_the_cost_and_the_fix() -> None:
    today = date(2026, 12, 6)
    assert kubernetes_support_advice("1.33", today) == _extended(
        "1.33", "2026-07-29", "1.35 (standard support until 2027-03-27)"
    )
    assert kubernetes_support_advice("1.34", today) == _extended(
        "1.34", "2026-12-02", "1.35 (standard support until 2027-03-27)"
    )
    assert kubernetes_support_advice("1.35", today) is None
    assert kubernetes_support_advice("1.36", today) is None


def test_once_the_default_has_left_standard_support_the_fix_is_the_newest_version() -> None:
    assert kubernetes_support_advice("1.35", date(2027, 3, 27)) == _extended(
        "1.35", "2027-03-27", "1.36 (standard support until 2027-08-02)"
    )
    assert kubernetes_support_advice("1.34", date(2027, 3, 26)) == _extended(
        "1.34", "2026-12-02", "1.35 (standard support until 2027-03-27)"
    )


def test_past_the_calendar_the_fix_says_so() -> None:
    assert kubernetes_support_advice("1.36", date(2027, 8, 2)) == _extended(
        "1.36", "2027-08-02", "a version newer than 1.36, the last this library's calendar lists"
    )


def test_a_version_the_calendar_does_not_list_gets_no_advice() -> None:
    assert kubernetes_support_advice("1.37", date(2030, 1, 1)) is None
    assert kubernetes_support_advice("latest", date(2030, 1, 1)) is None


# --------------------------------------------------------------------------------------------------
# Slurm and ParallelCluster against the 2026 CVE floor


@pytest.mark.parametrize(
    ("below", "fixed"), [("25.05.8", "25.05.9"), ("25.11.7", "25.11.8"), ("26.05.3", "26.05.4")]
)
def test_a_slurm_release_below_its_series_fix_is_advised_against(below: str, fixed: str) -> None:
    assert slurm_cve_advice(below) == f"Slurm {below} is affected by {CVES}. Fix: update to {fixed} or later"
    assert slurm_cve_advice(fixed) is None
    major, minor, patch = fixed.split(".")
    assert slurm_cve_advice(f"{major}.{minor}.{int(patch) + 1}") is None


@pytest.mark.parametrize("version", ["24.11", "24.11.0", "24.05.8", "23.11.10"])
def test_a_series_without_any_fixed_release_is_advised_against(version: str) -> None:
    series = ".".join(version.split(".")[:2])
    assert slurm_cve_advice(version) == (
        f"Slurm {version} is affected by {CVES}, and no {series} release has the fixes. "
        "Fix: choose a series with them (25.05.9, 25.11.8, 26.05.4 or later)"
    )


@pytest.mark.parametrize(
    "version", ["25.05", "25.11", "26.05", "26.11", "26.11.0", "25", "", "not-a-version"]
)
def test_a_series_whose_patch_the_service_chooses_or_a_later_one_gets_no_advice(version: str) -> None:
    """PCS takes a series and applies the patch releases itself: only a series with no fixed release is known
    to be affected."""
    assert slurm_cve_advice(version) is None


def test_parallelcluster_below_3_16_1_is_advised_against() -> None:
    assert parallelcluster_cve_advice("3.16.0") == (
        f"AWS ParallelCluster 3.16.0 installs a Slurm affected by {CVES}. Fix: use ParallelCluster 3.16.1 "
        "(Slurm 25.11.8), or update Slurm in place "
        "(github.com/aws/aws-parallelcluster/wiki/Upgrade-Slurm-in-an-AWS-ParallelCluster-cluster)"
    )
    assert parallelcluster_cve_advice("3.15.2") is not None
    assert parallelcluster_cve_advice("3.16.1") is None
    assert parallelcluster_cve_advice("3.17.0") is None
    assert parallelcluster_cve_advice(PCLUSTER_VERSION) is None


# --------------------------------------------------------------------------------------------------
# one table of defaults


def _table() -> dict[str, releases.VersionDefault]:
    return {row.what: row for row in VERSION_DEFAULTS}


def test_every_version_default_is_in_the_one_table_with_a_public_source() -> None:
    table = _table()
    assert len(table) == len(VERSION_DEFAULTS)
    assert {w: row.version for w, row in table.items()} == {
        "Kubernetes on Amazon EKS": "1.35",
        "Kubernetes of SageMaker HyperPod on EKS": "1.35",
        "kubectl Lambda layer (aws-cdk.lambda-layer-kubectl-v35)": "1.35",
        "AWS ParallelCluster": "3.16.1",
        "Slurm of AWS PCS clusters": "25.11",
        "Slurm in SageMaker HyperPod's Slurm AMI": "24.11.0",
        "Helm chart nvidia-device-plugin": "0.19.0",
        "Helm chart aws-efa-k8s-device-plugin": "v0.5.20",
        "Helm chart neuron-helm-chart": "1.9.0",
        "Helm chart gpu-operator": "v25.3.4",
        "Helm chart kube-prometheus-stack": "82.6.0",
        "Helm chart kueue": "0.19.2",
        "Helm chart kubeflow-trainer": "2.3.0",
        "EKS add-on amazon-sagemaker-hyperpod-taskgovernance (SageMaker HyperPod task governance)": (
            "v1.6.0-eksbuild.1"
        ),
        "MPI Operator release manifest": "v0.7.0",
    }
    for row in VERSION_DEFAULTS:
        assert row.source.startswith(("https://", "oci://")), row
    ends = {w: row.standard_support_ends for w, row in table.items() if row.standard_support_ends}
    assert ends == {
        "Kubernetes on Amazon EKS": date(2027, 3, 27),
        "Kubernetes of SageMaker HyperPod on EKS": date(2027, 3, 27),
    }


def test_the_environment_files_defaults_are_the_tables() -> None:
    table = _table()
    hyperpod_default = HyperPodEksConfig.model_fields["kubernetes_version"].default
    assert hyperpod_default == table["Kubernetes of SageMaker HyperPod on EKS"].version
    assert table["AWS ParallelCluster"].version == PCLUSTER_VERSION
    assert PcsSlurmConfig.model_fields["version"].default.value == table["Slurm of AWS PCS clusters"].version


def test_hyperpod_on_eks_defaults_to_the_newest_version_hyperpod_documents_and_the_layer_drives() -> None:
    assert hyperpod_eks.supported_kubernetes_versions()[-1] == releases.HYPERPOD_EKS_KUBERNETES_VERSION
    assert releases.HYPERPOD_KUBERNETES_VERSIONS[-1] == releases.HYPERPOD_EKS_KUBERNETES_VERSION


def test_the_kubernetes_defaults_are_in_standard_support_today() -> None:
    """Fails on the day a default leaves EKS standard support: move the default (and the kubectl layer) on."""
    today = datetime.now(UTC).date()
    for row in VERSION_DEFAULTS:
        if row.standard_support_ends is not None:
            assert today < row.standard_support_ends, f"{row.what} {row.version}: move to a supported version"
