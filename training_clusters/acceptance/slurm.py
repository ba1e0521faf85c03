"""Slurm acceptance jobs: sbatch scripts for OSU and NCCL between two nodes of each EFA instance type.

For ParallelCluster queues, HyperPod partitions and AWS PCS queues, for each EFA instance type that scales to
two nodes:
``osu_bw`` and ``osu_latency`` (one rank per node) once with EFA forced and once over TCP, and for GPU types
NCCL ``all_reduce_perf`` (one rank per GPU) over EFA and over NCCL's socket transport. Each script prints
the measured figure beside the expected one and exits non-zero when it is clearly worse or when the run's
own output does not show the transport it was meant to use; ``bash SCRIPT --check OUTPUT`` applies the
same gate to a saved output. After the NCCL verdict, each node's switches in Slurm's topology (``scontrol show
topology``) and whether all nodes shared their leaf switch (``bash/slurm_placement.sh``). Benchmarks the AMI lacks are built once from pinned, checksummed releases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from training_clusters.acceptance.dcgm import DEFAULT_DCGM_LEVEL, dcgm_sbatch_job
from training_clusters.acceptance.expectations import (
    Expectation,
    Transport,
    human_number,
    nccl_busbw_expectation,
    osu_bw_expectation,
    osu_latency_expectation,
)
from training_clusters.acceptance.fragments import (
    FAIL_HINTS,
    NCCL_EFA_EVIDENCE,
    OSU_EFA_EVIDENCE,
    comment_lines,
    fragment,
    gate_settings,
    readonly_lines,
)
from training_clusters.acceptance.jobs import AcceptanceJob, AcceptancePlan
from training_clusters.catalog import InstanceType, lookup
from training_clusters.model.options import NodeRole, QueuePlacement
from training_clusters.node_scripts.parallelcluster.topology import UNPLACED_SWITCH

if TYPE_CHECKING:
    from training_clusters.config import (
        EnvironmentConfig,
        PclusterComputeResourceConfig,
        PclusterQueueConfig,
    )

# --- pinned sources, built once into the shared file system when the AMI lacks them ------------

#: sha256 as recorded by both Spack (repos/spack_repo/builtin/packages/osu_micro_benchmarks) and
#: EasyBuild (OSU-Micro-Benchmarks-7.5.1-gompi-2025b.eb), which verify it on every download.
OSU_VERSION = "7.5.1"
OSU_SHA256 = "160d0d5e3c3cb022520ecb247e9875bb0973b1d3cadccd6c17624f8407c52e22"
OSU_URL = f"https://mvapich.cse.ohio-state.edu/download/mvapich/osu-micro-benchmarks-{OSU_VERSION}.tar.gz"
#: ParallelCluster AMIs carry no NCCL (ParallelCluster's own EFA test builds 2.27.7-1 from source);
#: sha256 of GitHub's tag archive as recorded by Spack (repos/spack_repo/builtin/packages/nccl).
NCCL_VERSION = "2.27.7-1"
NCCL_SHA256 = "98e6262bd55932c51e7c8ffc50cc764f019e4b94a8fd6694d839ae828ec8d128"
NCCL_URL = f"https://github.com/NVIDIA/nccl/archive/v{NCCL_VERSION}.tar.gz"
#: sha256 of GitHub's tag archive as recorded by Spack (repos/spack_repo/builtin/packages/nccl_tests).
NCCL_TESTS_VERSION = "2.17.6"
NCCL_TESTS_SHA256 = "38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0"
NCCL_TESTS_URL = f"https://github.com/NVIDIA/nccl-tests/archive/v{NCCL_TESTS_VERSION}.tar.gz"
#: Where the EFA installer puts Open MPI 4 on ParallelCluster AMIs and the HyperPod (DLAMI-based) AMI.
OPEN_MPI_HOME = "/opt/amazon/openmpi"

SLURM_TIME_LIMIT = "01:00:00"
"""Covers a first run that builds the benchmarks (NCCL from source takes the longest)."""


def parallelcluster_plan(
    config: EnvironmentConfig, environment_name: str, *, dcgm_level: int = DEFAULT_DCGM_LEVEL
) -> AcceptancePlan:
    """The sbatch jobs of a ParallelCluster environment, and what is skipped and why.

    :param dcgm_level: ``dcgmi diag -r`` level of the DCGM job of each GPU partition. Default: 2.
    """
    targets, skipped = _parallelcluster_targets(config)
    return _slurm_plan(
        config, environment_name, targets, skipped, _parallelcluster_gpu_partitions(config), dcgm_level
    )


def hyperpod_plan(
    config: EnvironmentConfig, environment_name: str, *, dcgm_level: int = DEFAULT_DCGM_LEVEL
) -> AcceptancePlan:
    """The sbatch jobs of a HyperPod Slurm environment, and what is skipped and why (see :func:`parallelcluster_plan`)."""
    targets, skipped = _hyperpod_targets(config)
    return _slurm_plan(
        config, environment_name, targets, skipped, _hyperpod_gpu_partitions(config), dcgm_level
    )


def pcs_plan(
    config: EnvironmentConfig, environment_name: str, *, dcgm_level: int = DEFAULT_DCGM_LEVEL
) -> AcceptancePlan:
    """The sbatch jobs of an AWS PCS environment, and what is skipped and why (see :func:`parallelcluster_plan`)."""
    targets, skipped = _pcs_targets(config)
    return _slurm_plan(config, environment_name, targets, skipped, _pcs_gpu_partitions(config), dcgm_level)


def _slurm_plan(
    config: EnvironmentConfig,
    environment_name: str,
    targets: list[_SlurmTarget],
    skipped: list[str],
    gpu_partitions: tuple[list[_GpuPartition], list[str]],
    dcgm_level: int,
) -> AcceptancePlan:
    jobs = [job for target in targets for job in _slurm_jobs(target, config, environment_name)]
    partitions, not_gpu = gpu_partitions
    jobs += [
        dcgm_sbatch_job(
            scheduler=partition.scheduler,
            partition=partition.name,
            constraint=partition.constraint,
            nodes=partition.nodes,
            instance_types=partition.instance_types,
            level=dcgm_level,
            environment=environment_name,
        )
        for partition in partitions
    ]
    return AcceptancePlan(jobs=tuple(jobs), skipped=tuple([*skipped, *not_gpu]))


# --- Slurm: GPU partitions, for the DCGM diagnostics job ----------------------------------------------


@dataclass(frozen=True)
class _GpuPartition:
    """Every GPU node of one partition, which the DCGM job asks for at once."""

    scheduler: str
    name: str
    instance_types: list[str]
    nodes: int
    constraint: str | None
    """``--constraint`` selecting the GPU nodes, where the partition also holds other nodes."""


def _parallelcluster_gpu_partitions(config: EnvironmentConfig) -> tuple[list[_GpuPartition], list[str]]:
    assert config.parallelcluster is not None
    partitions: list[_GpuPartition] = []
    for queue in config.parallelcluster.queues:
        gpu = [r for r in queue.compute_resources if lookup(r.instance_type).is_gpu]
        if gpu:
            mixed = len(gpu) < len(queue.compute_resources)
            partitions.append(
                _GpuPartition(
                    "ParallelCluster",
                    queue.name,
                    sorted({r.instance_type for r in gpu}),
                    sum(r.max_count for r in gpu),
                    # ParallelCluster gives each node its compute resource's name as a feature.
                    "|".join(r.name for r in gpu) if mixed else None,
                )
            )
    return partitions, []


def _hyperpod_gpu_partitions(config: EnvironmentConfig) -> tuple[list[_GpuPartition], list[str]]:
    assert config.hyperpod is not None
    groups: dict[str, list[tuple[str, int]]] = {}
    for group in config.hyperpod.instance_groups:
        if group.role is NodeRole.WORKER and group.partition is not None:
            groups.setdefault(group.partition, []).append((group.instance_type, group.count))
    partitions: list[_GpuPartition] = []
    skipped: list[str] = []
    for partition, members in groups.items():
        gpu = [(name, count) for name, count in members if lookup(name).is_gpu]
        if gpu and len(gpu) < len(members):
            skipped.append(
                f"partition {partition}: mixes GPU and other instance types, and HyperPod gives Slurm no "
                "feature to pick the GPU nodes for DCGM diagnostics"
            )
        elif gpu:
            types = sorted({name for name, _ in gpu})
            partitions.append(_GpuPartition("HyperPod", partition, types, sum(c for _, c in gpu), None))
    return partitions, skipped


def _pcs_gpu_partitions(config: EnvironmentConfig) -> tuple[list[_GpuPartition], list[str]]:
    assert config.pcs is not None
    node_groups = {group.name: group for group in config.pcs.compute_node_groups}
    queues = [(q.name, list(q.compute_node_groups)) for q in config.pcs.queues or []] or [
        (name, [name]) for name in node_groups
    ]
    partitions: list[_GpuPartition] = []
    skipped: list[str] = []
    for queue, names in queues:
        gpu = [node_groups[name] for name in names if lookup(node_groups[name].instance_type).is_gpu]
        if gpu and len(gpu) < len(names):
            skipped.append(
                f"queue {queue}: mixes GPU and other node groups, which DCGM diagnostics cannot tell apart; "
                "give the GPU node groups their own queue"
            )
        elif gpu:
            types = sorted({group.instance_type for group in gpu})
            partitions.append(_GpuPartition("AWS PCS", queue, types, sum(g.max_count for g in gpu), None))
    return partitions, skipped


# --- Slurm: which partitions to test ---------------------------------------------------------------


@dataclass(frozen=True)
class _SlurmTarget:
    """Two nodes of one EFA instance type that one sbatch job can ask for."""

    scheduler: str
    partition: str
    instance_type: InstanceType
    constraint: str | None
    """``--constraint`` selecting the instance type's nodes, where the partition mixes types."""
    placement_group: bool
    suffix: str
    """Appended to file names when a partition holds several EFA instance types."""


def _parallelcluster_targets(config: EnvironmentConfig) -> tuple[list[_SlurmTarget], list[str]]:
    assert config.parallelcluster is not None
    targets: list[_SlurmTarget] = []
    skipped: list[str] = []
    for queue in config.parallelcluster.queues:
        by_type: dict[str, list[tuple[str, int]]] = {}
        placed: dict[str, bool] = {}
        for resource in queue.compute_resources:
            if resource.efa_enabled:
                by_type.setdefault(resource.instance_type, []).append((resource.name, resource.max_count))
                in_group = placed.get(resource.instance_type, True) and _in_placement_group(queue, resource)
                placed[resource.instance_type] = in_group
        if not by_type:
            skipped.append(f"queue {queue.name}: no compute resource with EFA")
        for type_name, resources in by_type.items():
            nodes = sum(count for _, count in resources)
            if nodes < 2:
                skipped.append(f"queue {queue.name}: {type_name} scales to {nodes} node; the tests need 2")
                continue
            targets.append(
                _SlurmTarget(
                    scheduler="ParallelCluster",
                    partition=queue.name,
                    instance_type=lookup(type_name),
                    # ParallelCluster gives each node the features static|dynamic, its instance type and its
                    # compute resource's name (aws-parallelcluster-cookbook: Feature=static,c5.4xlarge,cr).
                    constraint="|".join(name for name, _ in resources),
                    # EFA queues sit in a placement group (shared or managed: validated in config) unless
                    # their reservation or Capacity Block leaves it out (Capacity.keeps_placement_group)
                    placement_group=placed[type_name],
                    suffix=f"-{_slug(type_name)}" if len(by_type) > 1 else "",
                )
            )
    return targets, skipped


def _in_placement_group(queue: PclusterQueueConfig, resource: PclusterComputeResourceConfig) -> bool:
    """Whether ParallelCluster launches the compute resource into a placement group (the construct's rule)."""
    if queue.placement is QueuePlacement.NONE:
        return False
    if queue.placement is None and not queue.queue_capacity().keeps_placement_group():
        return False
    own = resource.resource_capacity()
    return own is None or own.keeps_placement_group()


def _hyperpod_targets(config: EnvironmentConfig) -> tuple[list[_SlurmTarget], list[str]]:
    assert config.hyperpod is not None
    partitions: dict[str, list[tuple[str, int]]] = {}
    for group in config.hyperpod.instance_groups:
        if group.role is NodeRole.WORKER and group.partition is not None:
            partitions.setdefault(group.partition, []).append((group.instance_type, group.count))
    targets: list[_SlurmTarget] = []
    skipped: list[str] = []
    for partition, groups in partitions.items():
        types = sorted({name for name, _ in groups})
        instance = lookup(types[0])
        nodes = sum(count for _, count in groups)
        if len(types) > 1:
            skipped.append(
                f"partition {partition}: mixes {', '.join(types)}, and HyperPod gives Slurm no feature to "
                "pick one; give each instance type its own partition"
            )
        elif not instance.efa_supported:
            skipped.append(f"partition {partition}: {types[0]} has no EFA")
        elif nodes < 2:
            skipped.append(f"partition {partition}: {nodes} node of {types[0]}; the tests need 2")
        else:
            # HyperPod takes no placement group: one TCP flow gets EC2's 5 Gbit/s, not 10.
            targets.append(_SlurmTarget("HyperPod", partition, instance, None, False, ""))
    if not partitions:
        skipped.append("hyperpod: no worker partition")
    return targets, skipped


def _pcs_targets(config: EnvironmentConfig) -> tuple[list[_SlurmTarget], list[str]]:
    assert config.pcs is not None
    groups = {group.name: group for group in config.pcs.compute_node_groups}
    queues = [(q.name, list(q.compute_node_groups)) for q in config.pcs.queues or []] or [
        (name, [name]) for name in groups
    ]
    targets: list[_SlurmTarget] = []
    skipped: list[str] = []
    for queue, names in queues:
        efa = [groups[name] for name in names if groups[name].efa_enabled]
        types = sorted({group.instance_type for group in efa})
        nodes = sum(group.max_count for group in efa)
        if not efa:
            skipped.append(f"queue {queue}: no compute node group with EFA")
        elif len(types) > 1:
            skipped.append(
                f"queue {queue}: mixes EFA types {', '.join(types)} and the tests cannot pick one; give each "
                "instance type its own queue"
            )
        elif nodes < 2:
            skipped.append(f"queue {queue}: {types[0]} scales to {nodes} node; the tests need 2")
        else:
            # PCS EFA node groups launch into the environment's placement group (the construct requires it).
            targets.append(_SlurmTarget("AWS PCS", queue, lookup(types[0]), None, True, ""))
    return targets, skipped


def _slug(instance_type: str) -> str:
    return instance_type.removeprefix("ml.").replace(".", "-")


# --- Slurm: the scripts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Script:
    """One sbatch script being written."""

    target: _SlurmTarget
    test: str
    """``osu-bw``, ``osu-latency`` or ``nccl-tests``."""
    transport: Transport
    expectation: Expectation

    @property
    def filename(self) -> str:
        return f"{self.test}-{self.transport}-{self.target.partition}{self.target.suffix}.sbatch"

    @property
    def label(self) -> str:
        name = {"osu-bw": "osu_bw", "osu-latency": "osu_latency", "nccl-tests": "all_reduce_perf"}[self.test]
        return (
            f"{name} over {self.transport.name} ({self.target.instance_type.name}, {self.target.partition})"
        )


def _slurm_jobs(target: _SlurmTarget, config: EnvironmentConfig, environment: str) -> list[AcceptanceJob]:
    instance = target.instance_type
    placed = target.placement_group
    scripts = [
        _Script(target, "osu-bw", transport, osu_bw_expectation(instance, transport, placement_group=placed))
        for transport in Transport
    ]
    scripts += [
        _Script(target, "osu-latency", transport, osu_latency_expectation(transport))
        for transport in Transport
    ]
    if instance.is_gpu:
        scripts += [
            _Script(
                target,
                "nccl-tests",
                transport,
                nccl_busbw_expectation(instance, transport, placement_group=placed),
            )
            for transport in Transport
        ]
    lustre = config.storage.lustre
    shared_dir = lustre.mount_dir if lustre is not None else ""
    return [_slurm_job(script, environment, shared_dir) for script in scripts]


def _slurm_job(script: _Script, environment: str, shared_dir: str) -> AcceptanceJob:
    target = script.target
    what = {
        "osu-bw": "osu_bw (peak point-to-point bandwidth)",
        "osu-latency": "osu_latency (small-message latency)",
        "nccl-tests": f"NCCL all_reduce_perf ({target.instance_type.gpu_count} GPU(s) per node)",
    }[script.test]
    how = {
        Transport.EFA: "EFA forced",
        Transport.TCP: "TCP for comparison",
    }[script.transport]
    description = (
        f"{what} between 2 {target.instance_type.name} nodes of {target.scheduler} partition "
        f"{target.partition}, {how}: sbatch {script.filename}"
    )
    return AcceptanceJob(
        filename=script.filename,
        content=_sbatch(script, environment, shared_dir),
        description=description,
        expected=_expected_text(script),
    )


def _expected_text(script: _Script) -> str:
    instance = script.target.instance_type
    text = f"{script.expectation.summary()} ({instance.name}: {script.expectation.basis})"
    if script.test == "osu-bw" and script.transport is Transport.EFA:
        tcp = osu_bw_expectation(instance, Transport.TCP, placement_group=script.target.placement_group)
        assert tcp.expected is not None
        text += f"; over TCP expect about {human_number(tcp.expected)} MB/s"
    if script.test == "nccl-tests":
        text += (
            f"; fails too unless {NCCL_EFA_EVIDENCE}"
            if script.transport is Transport.EFA
            else "; fails too when NCCL's log shows the wrong transport"
        )
    elif script.transport is Transport.EFA:
        text += f"; fails too unless {OSU_EFA_EVIDENCE}"
    if script.transport is Transport.TCP and script.test != "osu-latency":
        efa = (
            osu_bw_expectation(instance, Transport.EFA, placement_group=True)
            if script.test == "osu-bw"
            else nccl_busbw_expectation(instance, Transport.EFA)
        )
        assert efa.expected is not None
        text += f"; with EFA expect about {human_number(efa.expected)} {efa.unit}"
    return text


def _sbatch(script: _Script, environment: str, shared_dir: str) -> str:
    target = script.target
    instance = target.instance_type
    gpus = instance.gpu_count
    ranks_per_node = gpus if script.test == "nccl-tests" else 1
    directives = [
        f"--job-name={script.filename.removesuffix('.sbatch')}",
        f"--partition={target.partition}",
        *([f"--constraint={target.constraint}"] if target.constraint else []),
        "--nodes=2",
        f"--ntasks-per-node={ranks_per_node}",
        "--exclusive",
        f"--time={SLURM_TIME_LIMIT}",
        "--output=%x-%j.out",
    ]
    header = [
        "#!/bin/bash",
        *(f"#SBATCH {directive}" for directive in directives),
        "#",
        f"# {script.label}: acceptance test of environment {environment}.",
        "# Generated by training_clusters.acceptance; regenerate it rather than edit it.",
        "#",
        f"# Expected: {script.expectation.summary()}.",
        f"# Basis: {script.expectation.basis}.",
        *_COMMENTS[script.test, script.transport],
        *_SOURCES[script.test, script.transport],
        *(_RDMA_COMMENT if instance.gpudirect_rdma and script.transport is Transport.EFA else []),
        "#",
        f"# Usage: sbatch {script.filename}",
        f"#        bash {script.filename} --check OUTPUT   (apply the gate to a saved output)",
        "# Benchmarks missing from the AMI are built once into TC_ACCEPTANCE_DIR, by default "
        + (f"{shared_dir}/acceptance (or ~/acceptance" if shared_dir else "~/acceptance (no Lustre")
        + "); every node must see it.",
    ]
    settings = _settings(script, shared_dir, ranks_per_node)
    body = {
        "osu-bw": ["common", "osu_bandwidth_check", "osu_check_output", "network", "osu_run"],
        "osu-latency": ["common", "osu_latency_check", "osu_check_output", "network", "osu_run"],
        "nccl-tests": ["common", "nccl_check", "network", "slurm_placement", "nccl_run"],
    }[script.test]
    fragments = [fragment(name) for name in [*body, "entry"]]
    return "\n".join([*header, "set -euo pipefail", "", settings, *fragments])


def _settings(script: _Script, shared_dir: str, ranks_per_node: int) -> str:
    expectation = script.expectation
    instance = script.target.instance_type
    gdr = instance.gpudirect_rdma
    values: list[tuple[str, str]] = [
        ("SCRIPT_NAME", script.filename),
        ("TEST_LABEL", script.label),
        *gate_settings(expectation, FAIL_HINTS[script.test, script.transport]),
    ]
    lines = ["# --- settings ---", *readonly_lines([*values, ("SHARED_DIR", shared_dir)])]
    lines += [
        f'readonly MPI_HOME="${{MPI_HOME:-{OPEN_MPI_HOME}}}"',
    ]
    if script.test == "nccl-tests":
        rank_environment = ["NCCL_DEBUG=INFO"]
        if script.transport is Transport.EFA:
            rank_environment += ["FI_PROVIDER=efa", *(["FI_EFA_USE_DEVICE_RDMA=1"] if gdr else [])]
        else:
            rank_environment += ["NCCL_NET=Socket"]
        lines += [
            f"readonly GPUS_PER_NODE={ranks_per_node}",
            f"readonly EXPECTED_RANKS={2 * ranks_per_node}",
            f"readonly EXPECTED_TRANSPORT={'efa' if script.transport is Transport.EFA else 'socket'}",
            f"readonly NCCL_VERSION={NCCL_VERSION}",
            f"readonly NCCL_SHA256={NCCL_SHA256}",
            f"readonly NCCL_URL={NCCL_URL}",
            f"readonly NCCL_TESTS_VERSION={NCCL_TESTS_VERSION}",
            f"readonly NCCL_TESTS_SHA256={NCCL_TESTS_SHA256}",
            f"readonly NCCL_TESTS_URL={NCCL_TESTS_URL}",
            'readonly CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"',
            f"readonly TOPOLOGY_UNPLACED={UNPLACED_SWITCH}",
        ]
    else:
        if script.transport is Transport.EFA:
            # EFA forced: Open MPI's cm PML over the OFI MTL restricted to the efa provider, so a node
            # without a usable EFA device fails the job instead of falling back to TCP.
            transport = "--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include efa"
            rank_environment = ["FI_PROVIDER=efa", *(["FI_EFA_USE_DEVICE_RDMA=1"] if gdr else [])]
        else:
            # TCP: ob1 with the tcp BTL bypasses libfabric altogether (FI_PROVIDER=tcp would keep
            # libfabric's own tcp provider under the OFI MTL, measuring a different stack).
            transport = '--mca pml ob1 --mca btl "tcp,self"'
            rank_environment = []
        lines += [
            f"readonly OSU_TEST={'osu_bw' if script.test == 'osu-bw' else 'osu_latency'}",
            f"readonly OSU_VERSION={OSU_VERSION}",
            f"readonly OSU_SHA256={OSU_SHA256}",
            f"readonly OSU_URL={OSU_URL}",
            f"readonly -a MPI_TRANSPORT=({transport})",
            f"readonly TCP_ONLY={'yes' if script.transport is Transport.TCP else 'no'}",
        ]
    lines.append(f"readonly -a RANK_ENVIRONMENT=({' '.join(rank_environment)})")
    return "\n".join(lines) + "\n"


_COMMENTS: dict[tuple[str, Transport], list[str]] = {
    ("osu-bw", Transport.EFA): [
        "# EFA is forced: Open MPI's cm PML on the OFI MTL with FI_PROVIDER=efa; no fallback to TCP.",
        *comment_lines(f"The gate also fails unless {OSU_EFA_EVIDENCE} (recorded before the benchmark)."),
    ],
    ("osu-bw", Transport.TCP): [
        "# TCP: Open MPI's ob1 PML with the tcp BTL on the primary interface, libfabric not involved.",
    ],
    ("osu-latency", Transport.EFA): [
        "# EFA is forced: Open MPI's cm PML on the OFI MTL with FI_PROVIDER=efa; no fallback to TCP.",
        *comment_lines(f"The gate also fails unless {OSU_EFA_EVIDENCE} (recorded before the benchmark)."),
    ],
    ("osu-latency", Transport.TCP): [
        "# TCP: Open MPI's ob1 PML with the tcp BTL on the primary interface, libfabric not involved.",
    ],
    ("nccl-tests", Transport.EFA): [
        "# NCCL over EFA through the aws-ofi-nccl plugin; MPI only launches the ranks, over TCP.",
        *comment_lines(f"The gate also fails unless {NCCL_EFA_EVIDENCE}."),
    ],
    ("nccl-tests", Transport.TCP): [
        "# NCCL over its socket transport (NCCL_NET=Socket), for comparison with the EFA job.",
    ],
}

_PINNED_SOURCES = {
    "osu": [
        f"# OSU micro-benchmarks {OSU_VERSION}: sha256 as recorded by Spack (osu_micro_benchmarks/package.py)",
        f"# and EasyBuild (OSU-Micro-Benchmarks-{OSU_VERSION}-gompi-2025b.eb).",
    ],
    "nccl": [
        f"# NCCL {NCCL_VERSION} (built only when the AMI has none, as on ParallelCluster) and nccl-tests",
        f"# {NCCL_TESTS_VERSION}: sha256 of GitHub's tag archives as recorded by Spack (nccl, nccl_tests).",
    ],
}
_EC2_BANDWIDTH_DOC = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-network-bandwidth.html"
_SOURCES: dict[tuple[str, Transport], list[str]] = {
    ("osu-bw", Transport.EFA): [
        "# Calibration: measured on two c5n.9xlarge: 6,130 MB/s with EFA and 1,190 MB/s over TCP.",
        *_PINNED_SOURCES["osu"],
    ],
    ("osu-bw", Transport.TCP): [
        f"# Single-flow limits: {_EC2_BANDWIDTH_DOC}",
        "# Calibration: measured on two c5n.9xlarge: 1,190 MB/s over TCP and 6,130 MB/s with EFA.",
        *_PINNED_SOURCES["osu"],
    ],
    ("osu-latency", Transport.EFA): [
        "# Calibration: github.com/aws/aws-parallelcluster tests/integration-tests/tests/efa/test_efa/",
        "# test_hit_efa/osu_benchmarks/results/c5n.18xlarge/openmpi/osu_latency (17.2 us at 8 bytes).",
        *_PINNED_SOURCES["osu"],
    ],
    ("osu-latency", Transport.TCP): [*_PINNED_SOURCES["osu"]],
    ("nccl-tests", Transport.EFA): [
        "# Calibration: 2 x g5.8xlarge peak at 3.13 GB/s of 3.125 (github.com/aws-ia/terraform-aws-eks-blueprints",
        "# patterns/elastic-fabric-adapter/README.md); 2 x p4dn reach 57 GB/s of 50 (github.com/NVIDIA/nccl/",
        "# issues/527); ParallelCluster's EFA test wants > 26 GB/s on 2 x p4d (aws-parallelcluster test_efa.py).",
        *_PINNED_SOURCES["nccl"],
    ],
    ("nccl-tests", Transport.TCP): [
        f"# Single-flow limits: {_EC2_BANDWIDTH_DOC}",
        *_PINNED_SOURCES["nccl"],
    ],
}
_RDMA_COMMENT = [
    "# FI_EFA_USE_DEVICE_RDMA=1: the catalogue lists GPUDirect RDMA for this instance type.",
]
