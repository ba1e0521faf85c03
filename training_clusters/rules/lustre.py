"""FSx for Lustre: storage capacity steps and per-unit throughput.

Source: the ``StorageCapacity`` and ``PerUnitStorageThroughput`` properties of ``AWS::FSx::FileSystem``
LustreConfiguration (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-fsx-filesystem-lustreconfiguration.html).
"""

from __future__ import annotations

LUSTRE_FIRST_STEP_GIB = 1200
LUSTRE_STEP_GIB = 2400
PERSISTENT_2_THROUGHPUTS_MBPS = (125, 250, 500, 1000)


def lustre_capacity_problem(deployment_type: str, capacity_gib: int) -> str | None:
    """FSx for Lustre SSD capacity: 1200 GiB, or a multiple of 2400 GiB."""
    if capacity_gib == LUSTRE_FIRST_STEP_GIB or (capacity_gib > 0 and capacity_gib % LUSTRE_STEP_GIB == 0):
        return None
    return (
        f"must be {LUSTRE_FIRST_STEP_GIB} or a multiple of {LUSTRE_STEP_GIB} for {deployment_type}, "
        f"got {capacity_gib}"
    )


def lustre_throughput_problem(deployment_type: str, throughput_mbps: int | None) -> str | None:
    """Per-unit throughput: required (125/250/500/1000) for PERSISTENT_2, absent for SCRATCH_2."""
    allowed = ", ".join(str(v) for v in PERSISTENT_2_THROUGHPUTS_MBPS)
    if deployment_type == "PERSISTENT_2":
        if throughput_mbps is None:
            return f"is required for PERSISTENT_2; allowed: {allowed}"
        if throughput_mbps not in PERSISTENT_2_THROUGHPUTS_MBPS:
            return f"must be one of {allowed} for PERSISTENT_2, got {throughput_mbps}"
        return None
    if throughput_mbps is not None:
        return (
            f"applies to PERSISTENT_2 only; {deployment_type} has a fixed throughput, got {throughput_mbps}"
        )
    return None
