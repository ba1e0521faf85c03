"""Version advice at synth: a Kubernetes version past EKS standard support, a Slurm or ParallelCluster below the
2026 CVE fixes, each an acknowledgeable warning on the construct that chose it; the day fixed through the
``training-clusters:today`` context."""

from __future__ import annotations

from datetime import date
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match

from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.constructs.parallelcluster import cluster as parallelcluster_module
from training_clusters.rules.versions import (
    TODAY_CONTEXT,
    kubernetes_support_advice,
    parallelcluster_cve_advice,
    slurm_cve_advice,
)

from ..conftest import AZS, REGION, PinnedStack
from .test_parallelcluster import Parts as ParallelClusterParts
from .test_pcs import Parts as PcsParts


def _warnings(stack: cdk.Stack) -> dict[str, list[str]]:
    """Each warning's text by the construct path it is on."""
    found: dict[str, list[str]] = {}
    for message in Annotations.from_stack(stack).find_warning("*", Match.any_value()):
        found.setdefault(message.id, []).append(str(message.entry.data))
    return found


def _eks(stack: cdk.Stack, today: str, **props: Any) -> GpuEksCluster:
    stack.node.set_context(TODAY_CONTEXT, today)
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    return GpuEksCluster(stack, "Eks", vpc=network.vpc, **props)


@pytest.mark.parametrize(
    ("version", "day_before", "end"),
    [("1.34", "2026-12-01", "2026-12-02"), ("1.35", "2027-03-26", "2027-03-27")],
)
def test_a_kubernetes_version_past_standard_support_is_a_warning_from_its_end_date(
    app: cdk.App, version: str, day_before: str, end: str
) -> None:
    before = PinnedStack(app, "Before", env=cdk.Environment(region=REGION))
    _eks(before, day_before, kubernetes_version=version)
    assert _warnings(before) == {}
    after = PinnedStack(app, "After", env=cdk.Environment(region=REGION))
    _eks(after, end, kubernetes_version=version)
    expected = kubernetes_support_advice(version, date.fromisoformat(end))
    assert expected is not None
    assert _warnings(after) == {
        "/After/Eks": [f"{expected} [ack: training-clusters:kubernetes-extended-support]"]
    }


def test_the_default_version_gets_no_warning_today(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    GpuEksCluster(stack, "Eks", vpc=network.vpc)
    assert _warnings(stack) == {}


def test_the_warning_can_be_acknowledged(app: cdk.App) -> None:
    stack = PinnedStack(app, "Acknowledged", env=cdk.Environment(region=REGION))
    cluster = _eks(stack, "2026-12-06", kubernetes_version="1.34")
    cdk.Annotations.of(cluster).acknowledge_warning(
        "training-clusters:kubernetes-extended-support", "upgrading next week"
    )
    assert _warnings(stack) == {}


def test_a_pcs_slurm_series_without_the_cve_fixes_is_a_warning(stack: cdk.Stack) -> None:
    PcsParts(stack).cluster(slurm_version="24.11")
    advice = slurm_cve_advice("24.11")
    assert _warnings(stack) == {"/Test/Pcs": [f"{advice} [ack: training-clusters:slurm-cve-2026]"]}


@pytest.mark.parametrize("series", ["25.05", "25.11", "26.05"])
def test_a_pcs_slurm_series_with_the_fixes_is_not(stack: cdk.Stack, series: str) -> None:
    PcsParts(stack).cluster(slurm_version=series)
    assert _warnings(stack) == {}


def test_parallelcluster_below_the_cve_floor_is_a_warning(
    stack: cdk.Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release is the library's pin, not a prop: a pin moved below 3.16.1 would warn on every cluster."""
    monkeypatch.setattr(parallelcluster_module, "PCLUSTER_VERSION", "3.16.0")
    ParallelClusterParts(stack).cluster()
    advice = parallelcluster_cve_advice("3.16.0")
    assert _warnings(stack) == {
        "/Test/Cluster": [f"{advice} [ack: training-clusters:parallelcluster-slurm-cve-2026]"]
    }


def test_the_pinned_parallelcluster_is_not(stack: cdk.Stack) -> None:
    ParallelClusterParts(stack).cluster()
    assert _warnings(stack) == {}
