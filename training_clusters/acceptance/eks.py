"""EKS acceptance jobs: for each GPU EFA nodegroup, the NCCL MPIJob as YAML and a gate for its log.

The MPIJob is :func:`~training_clusters.eks_jobs.nccl_test_mpijob`, annotated with the
expected bus bandwidth; ``nccl-tests-<nodegroup>-check.sh`` reads the launcher's log (``kubectl logs ... |
bash nccl-tests-<nodegroup>-check.sh``) and exits non-zero when the bandwidth is clearly low or the log does
not show NCCL on EFA.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from training_clusters.acceptance.dcgm import DEFAULT_DCGM_LEVEL, dcgm_eks_jobs
from training_clusters.acceptance.expectations import (
    Expectation,
    Transport,
    nccl_busbw_expectation,
    plain_number,
)
from training_clusters.acceptance.fragments import (
    FAIL_HINTS,
    NCCL_EFA_EVIDENCE,
    comment_lines,
    fragment,
    gate_settings,
    readonly_lines,
)
from training_clusters.acceptance.jobs import AcceptanceJob, AcceptancePlan
from training_clusters.acceptance.mig import mig_eks_jobs
from training_clusters.catalog import InstanceType, lookup, lookup_hyperpod
from training_clusters.config import EksGpuNodegroupConfig
from training_clusters.eks_jobs import (
    manifest_yaml,
    nccl_job_files,
    nccl_job_name,
    nccl_skip_reason,
    nccl_test_mpijob,
    run_instructions,
)
from training_clusters.eks_mig import mig_config_name, mig_devices

if TYPE_CHECKING:
    from training_clusters.config import EksEfaNodegroupConfig, EnvironmentConfig


#: The label every node carries with its instance type (EC2's name; HyperPod's ``ml.`` name on its nodes).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def eks_plan(
    config: EnvironmentConfig, environment: str, *, dcgm_level: int = DEFAULT_DCGM_LEVEL
) -> AcceptancePlan:
    """The jobs of an EKS environment, and what is skipped: the NCCL job of each GPU EFA nodegroup of 2 nodes
    or more, and the DCGM diagnostics job of each GPU nodegroup (EFA or not).

    :param dcgm_level: ``dcgmi diag -r`` level of the DCGM jobs. Default: 2.
    """
    assert config.eks is not None
    jobs: list[AcceptanceJob] = []
    skipped: list[str] = []
    for group in config.eks.efa_nodegroups:
        instance = lookup(group.instance_type)
        reason = nccl_skip_reason(instance, group.size)
        if reason is not None:
            skipped.append(f"nodegroup {group.name}: {reason}")
        else:
            jobs += _eks_jobs(
                name=group.name,
                instance=instance,
                workers=group.size,
                efa_interfaces=group.efa_interfaces or instance.max_efa_interfaces,
                image=config.eks.nccl_test.image,
                environment=environment,
            )
    if not config.eks.efa_nodegroups:
        skipped.append("eks: no efa_nodegroups (GPU nodegroups without EFA have no fabric to verify)")
    node_groups: list[EksEfaNodegroupConfig | EksGpuNodegroupConfig] = [
        *config.eks.efa_nodegroups,
        *config.eks.gpu_nodegroups,
    ]
    strategy = config.eks.addons.nvidia_device_plugin.mig_strategy
    for node_group in node_groups:
        gpu_type = lookup(node_group.instance_type)
        layout = node_group.mig_layout if isinstance(node_group, EksGpuNodegroupConfig) else None
        if layout is not None:
            # dcgmi diag needs whole GPUs; a MIG node is verified by a pod holding one instance
            skipped.append(
                f"nodegroup {node_group.name}: MIG-partitioned, so no DCGM diagnostics (whole GPUs only)"
            )
            jobs += mig_eks_jobs(
                nodegroup=node_group.name,
                instance=gpu_type,
                config_name=mig_config_name(gpu_type, layout, node_group.name),
                profile=next(iter(mig_devices(gpu_type, layout))),
                strategy=strategy,
                labels=dict(node_group.labels),
                environment=environment,
            )
        elif gpu_type.is_gpu:
            jobs += dcgm_eks_jobs(
                nodegroup=node_group.name,
                instance=gpu_type,
                nodes=node_group.size,
                labels=dict(node_group.labels),
                level=dcgm_level,
                environment=environment,
            )
    return AcceptancePlan(jobs=tuple(jobs), skipped=tuple(skipped))


def hyperpod_eks_plan(
    config: EnvironmentConfig, environment: str, *, dcgm_level: int = DEFAULT_DCGM_LEVEL
) -> AcceptancePlan:
    """The jobs of a HyperPod-on-EKS environment: the NCCL MPIJob of each GPU instance group with EFA and 2
    nodes or more, and the DCGM diagnostics Job of each GPU instance group, scheduled onto HyperPod's nodes
    (they carry the ``ml.`` instance type as their ``node.kubernetes.io/instance-type`` label).

    :param dcgm_level: ``dcgmi diag -r`` level of the DCGM jobs. Default: 2.
    """
    assert config.hyperpod_eks is not None
    spec = config.hyperpod_eks
    jobs: list[AcceptanceJob] = []
    skipped: list[str] = []
    for group in spec.instance_groups:
        instance = lookup_hyperpod(group.instance_type)
        reason = nccl_skip_reason(instance, group.count)
        if not instance.efa_supported:
            skipped.append(f"instance group {group.name}: {group.instance_type} has no EFA to verify")
        elif reason is not None:
            skipped.append(f"instance group {group.name}: {reason}")
        elif not spec.nccl_test.enabled:
            skipped.append(f"instance group {group.name}: nccl_test.enabled is false")
        else:
            jobs += _eks_jobs(
                name=group.name,
                instance=instance,
                workers=group.count,
                # HyperPod attaches every EFA interface the type has, one per network card
                efa_interfaces=min(instance.max_efa_interfaces, instance.max_network_cards),
                image=spec.nccl_test.image,
                environment=environment,
                node_instance_type=group.instance_type,
            )
        if instance.is_gpu:
            jobs += dcgm_eks_jobs(
                nodegroup=group.name,
                instance=instance,
                nodes=group.count,
                labels={INSTANCE_TYPE_LABEL: group.instance_type, **dict(group.labels)},
                level=dcgm_level,
                environment=environment,
            )
    return AcceptancePlan(jobs=tuple(jobs), skipped=tuple(skipped))


def _eks_jobs(
    *,
    name: str,
    instance: InstanceType,
    workers: int,
    efa_interfaces: int,
    image: str,
    environment: str,
    node_instance_type: str | None = None,
) -> list[AcceptanceJob]:
    job_name = nccl_job_name(name)
    manifest_file, check_file = nccl_job_files(name)
    expectation = nccl_busbw_expectation(instance, Transport.EFA, efa_interfaces=efa_interfaces)
    assert expectation.expected is not None
    job = nccl_test_mpijob(
        name=job_name,
        instance_type=instance,
        workers=workers,
        efa_interfaces=efa_interfaces,
        image=image,
        node_instance_type=node_instance_type,
    )
    job["metadata"]["annotations"] = {
        "training-clusters/expected-busbw-GBps": plain_number(expectation.expected),
        "training-clusters/minimum-busbw-GBps": plain_number(expectation.limit),
    }
    check_command = f"kubectl logs job/{job_name}-launcher | bash {check_file}"
    header = [
        f"# NCCL all_reduce_perf over EFA on nodegroup {name} ({workers} x {instance.name}, "
        f"{efa_interfaces} EFA interface(s) each): acceptance test of environment {environment}.",
        "# Generated by training_clusters.acceptance; regenerate it rather than edit it.",
        f"# Expected: {expectation.summary()} ({expectation.basis}).",
        *comment_lines(
            f"EFA is not working when the peak stays below the minimum; the check fails too unless "
            f"{NCCL_EFA_EVIDENCE}."
        ),
        f"# Run:   {run_instructions(manifest_file, job_name)}",
        f"# Check: {check_command}",
    ]
    expected = f"{expectation.summary()} ({instance.name}: {expectation.basis}); fails too unless {NCCL_EFA_EVIDENCE}"
    return [
        AcceptanceJob(
            filename=manifest_file,
            content="\n".join(header) + "\n" + manifest_yaml(job),
            description=(
                f"MPIJob: NCCL all_reduce_perf across {workers} {instance.name} nodes of nodegroup {name} "
                f"over EFA: {run_instructions(manifest_file, job_name)}; then {check_command}"
            ),
            expected=expected,
        ),
        AcceptanceJob(
            filename=check_file,
            content=_eks_check_script(check_file, instance, workers, expectation, environment, name),
            description=f"Gate for {manifest_file}: {check_command} (exit 1 when EFA is not delivering)",
            expected=expected,
        ),
    ]


def _eks_check_script(
    filename: str,
    instance: InstanceType,
    workers: int,
    expectation: Expectation,
    environment: str,
    nodegroup: str,
) -> str:
    values = [
        ("TEST_LABEL", f"all_reduce_perf over EFA ({instance.name}, nodegroup {nodegroup})"),
        *gate_settings(expectation, FAIL_HINTS["nccl-tests", Transport.EFA]),
    ]
    settings = [
        "# --- settings ---",
        *readonly_lines(values),
        f"readonly EXPECTED_RANKS={workers * instance.gpu_count}",
        "readonly EXPECTED_TRANSPORT=efa",
    ]
    header = [
        "#!/bin/bash",
        f"# Gate for the NCCL acceptance MPIJob of nodegroup {nodegroup}, environment {environment}.",
        "# Generated by training_clusters.acceptance; regenerate it rather than edit it.",
        f"# Expected: {expectation.summary()}.",
        f"# Usage: kubectl logs job/{nccl_job_name(nodegroup)}-launcher | bash {filename}",
        f"#        bash {filename} LAUNCHER_LOG",
    ]
    fragments = [fragment(name) for name in ("common", "nccl_check", "stdin_entry")]
    return "\n".join([*header, "set -euo pipefail", "", "\n".join(settings) + "\n", *fragments])
