"""Version advice: a Kubernetes version past Amazon EKS standard support, a Slurm or ParallelCluster below the
fixes for the 2026 Slurm CVEs. Free of CDK imports.

Each ``*_advice`` function returns ``None`` when the version is fine, else the sentence a synth warning
(``training-clusters:<id>``, acknowledgeable) and ``training-clusters preflight`` both print: what is wrong,
since when, what it costs and the fix. The dates and floors come from :mod:`training_clusters.model.releases`; the
day they are compared with is passed in, so the advice is tested on both sides of every date.
"""

from __future__ import annotations

from datetime import date

from training_clusters.catalog.prices import HOURS_PER_MONTH
from training_clusters.model.releases import (
    EKS_EXTENDED_SUPPORT_USD_PER_CLUSTER_HOUR,
    EKS_KUBERNETES_VERSION,
    EKS_STANDARD_SUPPORT_ENDS,
    EKS_STANDARD_SUPPORT_USD_PER_CLUSTER_HOUR,
    PARALLELCLUSTER_CVE_2026_FIXED,
    PARALLELCLUSTER_SLURM,
    SLURM_CVE_2026_FIXED,
)

#: The warning ids (``training-clusters:<id>``) the constructs give the advice under.
KUBERNETES_EXTENDED_SUPPORT = "kubernetes-extended-support"
SLURM_CVE_2026 = "slurm-cve-2026"
PARALLELCLUSTER_CVE_2026 = "parallelcluster-slurm-cve-2026"
#: The CDK context key that fixes the day the advice is given for (``YYYY-MM-DD``); default: today.
TODAY_CONTEXT = "training-clusters:today"
_CVES = "the 2026 Slurm CVEs (CVE-2026-65107 and seven more, github.com/aws/aws-parallelcluster/issues/7601)"


def _parts(version: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return None


def kubernetes_support_advice(version: str, today: date) -> str | None:
    """Kubernetes ``version`` on Amazon EKS is past its standard support on ``today`` (from the end date on).

    A version the calendar does not list gets no advice.
    """
    ends = EKS_STANDARD_SUPPORT_ENDS.get(version)
    if ends is None or today < ends:
        return None
    extra = (
        EKS_EXTENDED_SUPPORT_USD_PER_CLUSTER_HOUR - EKS_STANDARD_SUPPORT_USD_PER_CLUSTER_HOUR
    ) * HOURS_PER_MONTH
    return (
        f"Kubernetes {version} left Amazon EKS standard support on {ends.isoformat()}: the cluster runs in "
        f"extended support at ${EKS_EXTENDED_SUPPORT_USD_PER_CLUSTER_HOUR:.2f} instead of "
        f"${EKS_STANDARD_SUPPORT_USD_PER_CLUSTER_HOUR:.2f} per cluster-hour (about ${extra:.0f} a month more). "
        f"Fix: choose {_newest_supported(today)} (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html)"
    )


def _newest_supported(today: date) -> str:
    """The library's default while it is in standard support on ``today``, else the newest version in standard
    support then."""
    current = [v for v, ends in EKS_STANDARD_SUPPORT_ENDS.items() if today < ends]
    if not current:
        newest = max(EKS_STANDARD_SUPPORT_ENDS, key=lambda v: EKS_STANDARD_SUPPORT_ENDS[v])
        return f"a version newer than {newest}, the last this library's calendar lists"
    chosen = EKS_KUBERNETES_VERSION if EKS_KUBERNETES_VERSION in current else current[-1]
    return f"{chosen} (standard support until {EKS_STANDARD_SUPPORT_ENDS[chosen].isoformat()})"


def slurm_cve_advice(version: str) -> str | None:
    """Slurm ``version`` is affected by the 2026 Slurm CVEs.

    A whole release (``25.11.7``) is compared with its series' first fixed release; a series alone (``24.11``,
    as AWS PCS takes it, which chooses the patch release itself) is affected only when no release of it has
    the fixes (the series before 25.05).
    """
    parts = _parts(version)
    if parts is None or len(parts) < 2:
        return None
    series = f"{parts[0]:02d}.{parts[1]:02d}"
    fixed = SLURM_CVE_2026_FIXED.get(series)
    fixes = ", ".join(SLURM_CVE_2026_FIXED.values())
    if fixed is None:
        oldest = min(SLURM_CVE_2026_FIXED)
        if parts[:2] >= tuple(int(p) for p in oldest.split(".")):
            return None  # a later series than the ones the advisory names: released after the fixes
        return (
            f"Slurm {version} is affected by {_CVES}, and no {series} release has the fixes. "
            f"Fix: choose a series with them ({fixes} or later)"
        )
    if len(parts) < 3 or parts >= tuple(int(p) for p in fixed.split(".")):
        return None
    return f"Slurm {version} is affected by {_CVES}. Fix: update to {fixed} or later"


def parallelcluster_cve_advice(version: str) -> str | None:
    """AWS ParallelCluster ``version`` installs a Slurm affected by the 2026 Slurm CVEs (every release before
    :data:`~training_clusters.model.releases.PARALLELCLUSTER_CVE_2026_FIXED`)."""
    parts = _parts(version)
    if parts is None or parts >= tuple(int(p) for p in PARALLELCLUSTER_CVE_2026_FIXED.split(".")):
        return None
    return (
        f"AWS ParallelCluster {version} installs a Slurm affected by {_CVES}. Fix: use ParallelCluster "
        f"{PARALLELCLUSTER_CVE_2026_FIXED} (Slurm {PARALLELCLUSTER_SLURM}), or update Slurm in place "
        "(github.com/aws/aws-parallelcluster/wiki/Upgrade-Slurm-in-an-AWS-ParallelCluster-cluster)"
    )
