"""Acceptance jobs: the tests that tell a user at once whether EFA works in a deployed environment.

``acceptance_jobs(config, name)`` turns an environment file into files to run on the cluster:

* Slurm environments (ParallelCluster queues, HyperPod partitions), for each EFA instance type: sbatch
  scripts running OSU ``osu_bw`` and ``osu_latency`` between two nodes (one rank each) once with EFA
  forced and once over TCP, and for GPU types NCCL ``all_reduce_perf`` over EFA and over NCCL's socket
  transport. Each script prints the measured figure beside the expected one and exits non-zero when it
  is clearly worse (``bash SCRIPT --check OUTPUT`` applies the same gate to a saved output).
* EKS environments, for each GPU EFA nodegroup: the MPIJob of
  :func:`~training_clusters.constructs.eks_nccl_job.nccl_test_mpijob` as YAML, annotated with the
  expected bus bandwidth, and a ``-check.sh`` script gating the launcher's log.

Environments with nothing to test (no EFA anywhere) get no jobs; :func:`acceptance_plan` says why.

**The rule for expected figures** (line rates from :mod:`training_clusters.catalog`; 1 Gbit/s = 125 MB/s,
OSU's MB and NCCL's GB being 10^6 and 10^9 bytes):

* ``osu_bw`` over EFA: one rank pair drives one EFA device, so expect the line rate of one network card,
  ``network_gbps / max_network_cards``. The seed measured 6,130 MB/s on c5n.9xlarge (50 Gbit/s, one
  card: 6,250 MB/s), i.e. 98 %.
* ``osu_bw`` over TCP: one TCP flow, which EC2 limits to 10 Gbit/s inside a cluster placement group and
  5 Gbit/s outside one (capped at the card's rate). The seed measured 1,190 MB/s of the 1,250.
  Source: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-network-bandwidth.html
* NCCL bus bandwidth over EFA: 80 % of the aggregate line rate of the EFA interfaces in use (a ring
  all-reduce moves the bus bandwidth through each node's network once per direction). Calibration:
  g5.8xlarge peaks at 3.13 GB/s of 3.125 (aws-ia/terraform-aws-eks-blueprints,
  patterns/elastic-fabric-adapter/README.md); 2 x p4dn reach 57 GB/s of 50 with NCCL's tree
  (NVIDIA/nccl#527); ParallelCluster's own integration test requires > 26 GB/s on 2 x p4d
  (aws/aws-parallelcluster, tests/integration-tests/tests/efa/test_efa.py).
* NCCL over sockets: no figure of its own (NCCL opens many flows); the floor is half of one TCP flow.
* ``osu_latency`` over EFA (8-byte messages): 20 us; ParallelCluster's baseline is 17.2 us on
  c5n.18xlarge with Open MPI (aws/aws-parallelcluster, tests/integration-tests/tests/efa/test_efa/
  test_hit_efa/osu_benchmarks/results/c5n.18xlarge/openmpi/osu_latency). Over TCP there is no figure:
  only a sanity ceiling of 100 us.

A bandwidth fails below half its expected figure; a latency fails above twice it. For every EFA type in
the catalogue half the EFA ``osu_bw`` figure stays above what one TCP flow delivers, so a job that
silently fell back to TCP fails. NCCL over
sockets can come close to EFA on small instances, so the NCCL gate also reads NCCL's log and fails when
a channel went ``via NET/Socket``.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

from training_clusters.catalog import InstanceType, lookup
from training_clusters.config import EnvironmentConfig, HyperPodRole
from training_clusters.constructs.eks_nccl_job import manifest_yaml, nccl_test_mpijob, run_instructions

__all__ = [
    "AcceptanceJob",
    "AcceptancePlan",
    "Expectation",
    "Transport",
    "acceptance_jobs",
    "acceptance_plan",
    "nccl_busbw_expectation",
    "no_jobs_reason",
    "osu_bw_expectation",
    "osu_latency_expectation",
    "write_jobs",
]

# --- the rule ------------------------------------------------------------------------------------

MEGABYTES_PER_GBIT = 125.0
"""MB/s (10^6 bytes, as OSU counts) in one Gbit/s."""
GIGABYTES_PER_GBIT = 0.125
"""GB/s (10^9 bytes, as nccl-tests counts) in one Gbit/s."""
BANDWIDTH_FLOOR = 0.5
"""A bandwidth below this fraction of its expected figure fails."""
LATENCY_CEILING = 2.0
"""A latency above this multiple of its expected figure fails."""
NCCL_BUSBW_EFFICIENCY = 0.8
"""Expected NCCL bus bandwidth as a fraction of the aggregate EFA line rate."""
SINGLE_FLOW_GBPS_IN_PLACEMENT_GROUP = 10.0
"""EC2's limit for one TCP flow between instances of one cluster placement group."""
SINGLE_FLOW_GBPS = 5.0
"""EC2's limit for one TCP flow between instances outside a cluster placement group."""
EFA_LATENCY_US = 20.0
"""Expected 8-byte ``osu_latency`` over EFA."""
TCP_LATENCY_CEILING_US = 100.0
"""Sanity ceiling of 8-byte ``osu_latency`` over TCP (not a measured figure)."""

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


class Transport(StrEnum):
    """How the ranks of a test talk."""

    EFA = "efa"
    TCP = "tcp"


@dataclass(frozen=True)
class Expectation:
    """What a healthy run measures, and where the gate sits."""

    metric: str
    """What is measured, e.g. ``osu_bw peak bandwidth``."""
    unit: str
    """``MB/s``, ``GB/s`` or ``us``."""
    expected: float | None
    """The figure a healthy run reaches; ``None`` where there is none (TCP latency, NCCL sockets)."""
    limit: float
    """Pass boundary: the minimum bandwidth, or the maximum latency."""
    higher_is_better: bool
    basis: str
    """How the figures derive, in one sentence."""

    def passes(self, measured: float) -> bool:
        """Whether ``measured`` clears the gate."""
        return measured >= self.limit if self.higher_is_better else measured <= self.limit

    def summary(self) -> str:
        """``osu_bw peak bandwidth: about 6,250 MB/s; fails below 3,125 MB/s``."""
        bound = "below" if self.higher_is_better else "above"
        expected = "no fixed figure" if self.expected is None else self._expected_text()
        return f"{self.metric}: {expected}; fails {bound} {_number(self.limit)} {self.unit}"

    def _expected_text(self) -> str:
        assert self.expected is not None
        word = "about" if self.higher_is_better else "at most"
        return f"{word} {_number(self.expected)} {self.unit}"


def per_card_gbps(instance_type: InstanceType) -> float:
    """Line rate of one network card (one EFA device): the advertised bandwidth over the cards."""
    return instance_type.network_gbps / max(instance_type.max_network_cards, 1)


def single_flow_gbps(instance_type: InstanceType, *, placement_group: bool) -> float:
    """What one TCP flow may reach: EC2's single-flow limit, capped at one card's line rate."""
    limit = SINGLE_FLOW_GBPS_IN_PLACEMENT_GROUP if placement_group else SINGLE_FLOW_GBPS
    return min(limit, per_card_gbps(instance_type))


def osu_bw_expectation(
    instance_type: InstanceType, transport: Transport, *, placement_group: bool
) -> Expectation:
    """Peak ``osu_bw`` between two nodes of ``instance_type``, one rank each."""
    if transport is Transport.EFA:
        gbps = per_card_gbps(instance_type)
        basis = (
            f"one EFA device's line rate: {_number(instance_type.network_gbps)} Gbit/s over "
            f"{instance_type.max_network_cards} network card(s)"
        )
    else:
        gbps = single_flow_gbps(instance_type, placement_group=placement_group)
        where = "inside" if placement_group else "outside"
        basis = f"one TCP flow, which EC2 limits to {_number(gbps)} Gbit/s {where} a cluster placement group"
    expected = gbps * MEGABYTES_PER_GBIT
    return Expectation(
        metric="osu_bw peak bandwidth",
        unit="MB/s",
        expected=expected,
        limit=expected * BANDWIDTH_FLOOR,
        higher_is_better=True,
        basis=basis,
    )


def osu_latency_expectation(transport: Transport) -> Expectation:
    """8-byte ``osu_latency`` between two nodes."""
    if transport is Transport.EFA:
        return Expectation(
            metric="osu_latency at 8 bytes",
            unit="us",
            expected=EFA_LATENCY_US,
            limit=EFA_LATENCY_US * LATENCY_CEILING,
            higher_is_better=False,
            basis="EFA small-message latency (ParallelCluster's baseline: 17.2 us on c5n.18xlarge)",
        )
    return Expectation(
        metric="osu_latency at 8 bytes",
        unit="us",
        expected=None,
        limit=TCP_LATENCY_CEILING_US,
        higher_is_better=False,
        basis="TCP, for comparison: a sanity ceiling only",
    )


def nccl_busbw_expectation(
    instance_type: InstanceType,
    transport: Transport,
    *,
    efa_interfaces: int | None = None,
    placement_group: bool = True,
) -> Expectation:
    """Peak ``all_reduce_perf`` bus bandwidth between two nodes of ``instance_type``, one rank per GPU.

    :param efa_interfaces: EFA interfaces per node. Default: the instance's maximum.
    """
    if transport is Transport.TCP:
        floor = single_flow_gbps(instance_type, placement_group=placement_group) * GIGABYTES_PER_GBIT
        return Expectation(
            metric="all_reduce_perf peak bus bandwidth",
            unit="GB/s",
            expected=None,
            limit=floor * BANDWIDTH_FLOOR,
            higher_is_better=True,
            basis="NCCL sockets, for comparison: the floor is half of one TCP flow",
        )
    cards = min(efa_interfaces or instance_type.max_efa_interfaces, instance_type.max_network_cards)
    aggregate_gbps = per_card_gbps(instance_type) * cards
    expected = aggregate_gbps * GIGABYTES_PER_GBIT * NCCL_BUSBW_EFFICIENCY
    return Expectation(
        metric="all_reduce_perf peak bus bandwidth",
        unit="GB/s",
        expected=expected,
        limit=expected * BANDWIDTH_FLOOR,
        higher_is_better=True,
        basis=(
            f"{NCCL_BUSBW_EFFICIENCY:.0%} of {cards} EFA interface(s) x "
            f"{_number(per_card_gbps(instance_type))} Gbit/s = {_number(aggregate_gbps)} Gbit/s"
        ),
    )


# --- the jobs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AcceptanceJob:
    """One file to run on the cluster."""

    filename: str
    """e.g. ``osu-bw-efa-compute.sbatch``, ``nccl-tests-g5.yaml``."""
    content: str
    description: str
    """One line: what it measures and how to run it."""
    expected: str
    """The figures a healthy run reaches, and where it fails."""

    def as_dict(self) -> dict[str, object]:
        """The job as plain data (``filename``, ``content``, ``description``, ``expected``)."""
        return asdict(self)


@dataclass(frozen=True)
class AcceptancePlan:
    """The jobs of an environment, and what was left untested and why."""

    jobs: tuple[AcceptanceJob, ...]
    skipped: tuple[str, ...]
    """One line per queue, partition or nodegroup without jobs, saying why."""

    @property
    def reason(self) -> str | None:
        """Why there is nothing to run, when there are no jobs; else ``None``."""
        if self.jobs:
            return None
        return "nothing to verify: " + "; ".join(self.skipped or ("no EFA-enabled nodes",))


def acceptance_plan(config: EnvironmentConfig, environment_name: str) -> AcceptancePlan:
    """The acceptance jobs of an environment, and what it leaves untested and why."""
    if config.eks is not None:
        return _eks_plan(config, environment_name)
    targets, skipped = _slurm_targets(config)
    if config.parallelcluster is None and config.hyperpod is None:
        skipped.append("no hyperpod, parallelcluster or eks section: there is no cluster to run jobs on")
    jobs = [job for target in targets for job in _slurm_jobs(target, config, environment_name)]
    return AcceptancePlan(jobs=tuple(jobs), skipped=tuple(skipped))


def acceptance_jobs(config: EnvironmentConfig, environment_name: str) -> list[AcceptanceJob]:
    """The verification jobs of an environment (empty when nothing in it has EFA)."""
    return list(acceptance_plan(config, environment_name).jobs)


def no_jobs_reason(config: EnvironmentConfig, environment_name: str) -> str | None:
    """Why an environment has no acceptance jobs, or ``None`` when it has some."""
    return acceptance_plan(config, environment_name).reason


def write_jobs(jobs: Sequence[AcceptanceJob], directory: Path) -> list[Path]:
    """Write each job's file into ``directory`` (created; existing files replaced); returns the paths.

    Scripts (``.sbatch``, ``.sh``) are made executable.

    :raises ValueError: two jobs share a file name.
    """
    names = [job.filename for job in jobs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"acceptance jobs must have distinct file names, got {', '.join(repeated)} twice")
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for job in jobs:
        path = directory / job.filename
        path.write_text(job.content)
        if path.suffix in (".sbatch", ".sh"):
            path.chmod(0o755)
        written.append(path)
    return written


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


def _slurm_targets(config: EnvironmentConfig) -> tuple[list[_SlurmTarget], list[str]]:
    if config.parallelcluster is not None:
        return _parallelcluster_targets(config)
    if config.hyperpod is not None:
        return _hyperpod_targets(config)
    return [], []


def _parallelcluster_targets(config: EnvironmentConfig) -> tuple[list[_SlurmTarget], list[str]]:
    assert config.parallelcluster is not None
    targets: list[_SlurmTarget] = []
    skipped: list[str] = []
    for queue in config.parallelcluster.queues:
        by_type: dict[str, list[tuple[str, int]]] = {}
        for resource in queue.compute_resources:
            if resource.efa_enabled:
                by_type.setdefault(resource.instance_type, []).append((resource.name, resource.max_count))
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
                    # EFA queues always sit in a placement group (shared or managed): validated in config.
                    placement_group=True,
                    suffix=f"-{_slug(type_name)}" if len(by_type) > 1 else "",
                )
            )
    return targets, skipped


def _hyperpod_targets(config: EnvironmentConfig) -> tuple[list[_SlurmTarget], list[str]]:
    assert config.hyperpod is not None
    partitions: dict[str, list[tuple[str, int]]] = {}
    for group in config.hyperpod.instance_groups:
        if group.role is HyperPodRole.WORKER and group.partition is not None:
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
        text += f"; over TCP expect about {_number(tcp.expected)} MB/s"
    if script.test == "nccl-tests":
        text += "; fails too when NCCL's log shows the wrong transport"
    if script.transport is Transport.TCP and script.test != "osu-latency":
        efa = (
            osu_bw_expectation(instance, Transport.EFA, placement_group=True)
            if script.test == "osu-bw"
            else nccl_busbw_expectation(instance, Transport.EFA)
        )
        assert efa.expected is not None
        text += f"; with EFA expect about {_number(efa.expected)} {efa.unit}"
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
        "osu-bw": [_COMMON, _OSU_BANDWIDTH_CHECK, _OSU_CHECK_OUTPUT, _NETWORK, _OSU_RUN],
        "osu-latency": [_COMMON, _OSU_LATENCY_CHECK, _OSU_CHECK_OUTPUT, _NETWORK, _OSU_RUN],
        "nccl-tests": [_COMMON, _NCCL_CHECK, _NETWORK, _NCCL_RUN],
    }[script.test]
    return "\n".join([*header, "set -euo pipefail", "", settings, *body, _ENTRY])


def _settings(script: _Script, shared_dir: str, ranks_per_node: int) -> str:
    expectation = script.expectation
    instance = script.target.instance_type
    gdr = instance.gpudirect_rdma
    values: list[tuple[str, str]] = [
        ("SCRIPT_NAME", script.filename),
        ("TEST_LABEL", script.label),
        *_gate_settings(expectation, _FAIL_HINTS[script.test, script.transport]),
    ]
    lines = ["# --- settings ---", *(f"readonly {name}={shlex.quote(value)}" for name, value in values)]
    lines += [
        f"readonly SHARED_DIR={shlex.quote(shared_dir)}",
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


def _gate_settings(expectation: Expectation, hint: str) -> list[tuple[str, str]]:
    return [
        ("METRIC", expectation.metric),
        ("METRIC_UNIT", expectation.unit),
        ("EXPECTED", "" if expectation.expected is None else _plain(expectation.expected)),
        ("LIMIT", _plain(expectation.limit)),
        ("HIGHER_IS_BETTER", "yes" if expectation.higher_is_better else "no"),
        ("FAIL_HINT", hint),
    ]


_COMMENTS: dict[tuple[str, Transport], list[str]] = {
    ("osu-bw", Transport.EFA): [
        "# EFA is forced: Open MPI's cm PML on the OFI MTL with FI_PROVIDER=efa; no fallback to TCP.",
    ],
    ("osu-bw", Transport.TCP): [
        "# TCP: Open MPI's ob1 PML with the tcp BTL on the primary interface, libfabric not involved.",
    ],
    ("osu-latency", Transport.EFA): [
        "# EFA is forced: Open MPI's cm PML on the OFI MTL with FI_PROVIDER=efa; no fallback to TCP.",
    ],
    ("osu-latency", Transport.TCP): [
        "# TCP: Open MPI's ob1 PML with the tcp BTL on the primary interface, libfabric not involved.",
    ],
    ("nccl-tests", Transport.EFA): [
        "# NCCL over EFA through the aws-ofi-nccl plugin; the gate also fails when NCCL's log shows a",
        "# channel 'via NET/Socket' (the plugin was not loaded). MPI only launches the ranks, over TCP.",
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
        "# Calibration: the seed measured 6,130 MB/s with EFA and 1,190 MB/s over TCP on c5n.9xlarge.",
        *_PINNED_SOURCES["osu"],
    ],
    ("osu-bw", Transport.TCP): [
        f"# Single-flow limits: {_EC2_BANDWIDTH_DOC}",
        "# Calibration: the seed measured 1,190 MB/s over TCP and 6,130 MB/s with EFA on c5n.9xlarge.",
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

_FAIL_HINTS: dict[tuple[str, Transport], str] = {
    ("osu-bw", Transport.EFA): (
        "EFA is not delivering: check that both nodes share one cluster placement group, that the EFA "
        "security group allows all traffic to and from itself, and that 'fi_info -p efa' lists a device on "
        "each node."
    ),
    ("osu-bw", Transport.TCP): "The network itself is slow between these nodes: check their placement.",
    ("osu-latency", Transport.EFA): (
        "Latency this high means the nodes are far apart (no cluster placement group) or EFA is degraded."
    ),
    ("osu-latency", Transport.TCP): "The network itself is slow between these nodes: check their placement.",
    ("nccl-tests", Transport.EFA): (
        "NCCL is not getting EFA's bandwidth: check the aws-ofi-nccl plugin (NCCL INFO lines 'NET/OFI'), "
        "FI_PROVIDER=efa, the placement group and the EFA security group."
    ),
    ("nccl-tests", Transport.TCP): "NCCL's socket transport is slower than one TCP flow: check the network.",
}


# --- EKS -------------------------------------------------------------------------------------------


def _eks_plan(config: EnvironmentConfig, environment: str) -> AcceptancePlan:
    assert config.eks is not None
    jobs: list[AcceptanceJob] = []
    skipped: list[str] = []
    for group in config.eks.efa_nodegroups:
        instance = lookup(group.instance_type)
        if not instance.is_gpu:
            skipped.append(f"nodegroup {group.name}: {instance.name} has no GPU for the NCCL job")
        elif group.size < 2:
            skipped.append(f"nodegroup {group.name}: {group.size} node; NCCL over EFA needs 2")
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
    return AcceptancePlan(jobs=tuple(jobs), skipped=tuple(skipped))


def _eks_jobs(
    *, name: str, instance: InstanceType, workers: int, efa_interfaces: int, image: str, environment: str
) -> list[AcceptanceJob]:
    job_name = f"nccl-tests-{name}"
    manifest_file = f"{job_name}.yaml"
    check_file = f"{job_name}-check.sh"
    expectation = nccl_busbw_expectation(instance, Transport.EFA, efa_interfaces=efa_interfaces)
    assert expectation.expected is not None
    job = nccl_test_mpijob(
        name=job_name, instance_type=instance, workers=workers, efa_interfaces=efa_interfaces, image=image
    )
    job["metadata"]["annotations"] = {
        "training-clusters/expected-busbw-GBps": _plain(expectation.expected),
        "training-clusters/minimum-busbw-GBps": _plain(expectation.limit),
    }
    check_command = f"kubectl logs job/{job_name}-launcher | bash {check_file}"
    header = [
        f"# NCCL all_reduce_perf over EFA on nodegroup {name} ({workers} x {instance.name}, "
        f"{efa_interfaces} EFA interface(s) each): acceptance test of environment {environment}.",
        "# Generated by training_clusters.acceptance; regenerate it rather than edit it.",
        f"# Expected: {expectation.summary()} ({expectation.basis}).",
        "# EFA is not working when the peak stays below the minimum or NCCL's log shows 'via NET/Socket'.",
        f"# Run:   {run_instructions(manifest_file, job_name)}",
        f"# Check: {check_command}",
    ]
    expected = (
        f"{expectation.summary()} ({instance.name}: {expectation.basis}); fails too when NCCL's log "
        "shows 'via NET/Socket'"
    )
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
        *_gate_settings(expectation, _FAIL_HINTS["nccl-tests", Transport.EFA]),
    ]
    settings = [
        "# --- settings ---",
        *(f"readonly {key}={shlex.quote(value)}" for key, value in values),
        f"readonly EXPECTED_RANKS={workers * instance.gpu_count}",
        "readonly EXPECTED_TRANSPORT=efa",
    ]
    header = [
        "#!/bin/bash",
        f"# Gate for the NCCL acceptance MPIJob of nodegroup {nodegroup}, environment {environment}.",
        "# Generated by training_clusters.acceptance; regenerate it rather than edit it.",
        f"# Expected: {expectation.summary()}.",
        f"# Usage: kubectl logs job/nccl-tests-{nodegroup}-launcher | bash {filename}",
        f"#        bash {filename} LAUNCHER_LOG",
    ]
    return "\n".join(
        [*header, "set -euo pipefail", "", "\n".join(settings) + "\n", _COMMON, _NCCL_CHECK, _STDIN_ENTRY]
    )


# --- helpers -------------------------------------------------------------------------------------


def _number(value: float) -> str:
    """Human figure: ``6,250``, ``62.5``, ``2.5``, ``0.31``."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _plain(value: float) -> str:
    """Figure for bash and annotations: no thousands separators, at most three decimals."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


# --- bash fragments --------------------------------------------------------------------------------
# Plain text, no interpolation: every parameter comes from the settings block above them.

_COMMON = r"""# --- verdict ---
# Whether decimal number $1 >= $2.
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }

# Print the verdict on one measured figure; return 0 (pass) or 1 (fail).
judge() {
    local measured=$1 passed=no bound expected=""
    if [[ ${HIGHER_IS_BETTER} == yes ]]; then
        bound=minimum
        if at_least "${measured}" "${LIMIT}"; then passed=yes; fi
        [[ -z ${EXPECTED} ]] || expected="; expected about ${EXPECTED} ${METRIC_UNIT}"
    else
        bound=maximum
        if at_least "${LIMIT}" "${measured}"; then passed=yes; fi
        [[ -z ${EXPECTED} ]] || expected="; expected at most ${EXPECTED} ${METRIC_UNIT}"
    fi
    if [[ ${passed} == yes ]]; then
        printf 'RESULT %s: PASS %s %s %s (%s %s %s%s)\n' "${TEST_LABEL}" "${METRIC}" "${measured}" \
            "${METRIC_UNIT}" "${bound}" "${LIMIT}" "${METRIC_UNIT}" "${expected}"
        return 0
    fi
    printf 'RESULT %s: FAIL %s %s %s, %s %s %s%s. %s\n' "${TEST_LABEL}" "${METRIC}" "${measured}" \
        "${METRIC_UNIT}" "${bound}" "${LIMIT}" "${METRIC_UNIT}" "${expected}" "${FAIL_HINT}"
    return 1
}

no_figures() {
    printf 'RESULT %s: FAIL no %s figures in %s\n' "${TEST_LABEL}" "${METRIC}" "$1"
    return 2
}
"""

_OSU_BANDWIDTH_CHECK = r"""# --- gate: the highest osu_bw figure (second column of the data lines, MB/s) ---
measure() {
    awk '
        { sub(/^\[[0-9,]+\]<std(out|err)>:/, "") }
        $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+(\.[0-9]+)?$/ {
            if (!seen || $2 + 0 > peak) peak = $2 + 0
            seen = 1
        }
        END { if (seen) printf "%.2f\n", peak }
    ' "$1"
}
"""

_OSU_CHECK_OUTPUT = r"""# --- gate: the OSU figure ``measure`` reads, judged against the expectation ---
check_output() {
    local measured
    measured="$(measure "$1")"
    [[ -n ${measured} ]] || no_figures "$1" || return
    judge "${measured}"
}
"""

_OSU_LATENCY_CHECK = r"""# --- gate: osu_latency at 8 bytes (the smallest size when 8 is missing), us ---
measure() {
    awk '
        { sub(/^\[[0-9,]+\]<std(out|err)>:/, "") }
        $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+(\.[0-9]+)?$/ {
            if ($1 == 8) { at8 = $2 + 0; has8 = 1 }
            if (!seen || $1 + 0 < smallest) { smallest = $1 + 0; first = $2 + 0 }
            seen = 1
        }
        END { if (has8) printf "%.2f\n", at8; else if (seen) printf "%.2f\n", first }
    ' "$1"
}
"""

_NCCL_CHECK = r"""# --- gate: peak bus bandwidth of all_reduce_perf (GB/s), the transport NCCL chose, the ranks ---
# Data lines end with: time algbw busbw #wrong (out of place), time algbw busbw #wrong (in place).
measure() {
    awk '
        { sub(/^\[[0-9,]+\]<std(out|err)>:/, "") }
        $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 12 {
            for (i = NF - 5; i <= NF - 1; i += 4) {
                if ($i ~ /^[0-9]+(\.[0-9]+)?$/ && (!seen || $i + 0 > peak)) { peak = $i + 0; seen = 1 }
            }
        }
        END { if (seen) printf "%.2f\n", peak }
    ' "$1"
}

# socket, efa or unknown, from NCCL's INFO lines (NCCL_DEBUG=INFO).
transport() {
    if grep -Eq 'via NET/Socket|Using network Socket' "$1"; then
        echo socket
    elif grep -Eq 'via NET/(AWS )?(Libfabric|OFI)|Using network (AWS )?Libfabric|NET/OFI Selected [Pp]rovider is efa' "$1"; then
        echo efa
    else
        echo unknown
    fi
}

# Ranks listed under "# Using devices" (0 when the header is missing).
ranks() { grep -Ec '^(\[[0-9,]+\]<stdout>:)?#[[:space:]]+Rank[[:space:]]+[0-9]+' "$1" || true; }

check_output() {
    local measured used listed
    measured="$(measure "$1")"
    [[ -n ${measured} ]] || no_figures "$1" || return
    used="$(transport "$1")"
    if [[ ${used} != "${EXPECTED_TRANSPORT}" ]]; then
        printf 'RESULT %s: FAIL NCCL used the %s transport, not %s (peak %s %s). %s\n' "${TEST_LABEL}" \
            "${used}" "${EXPECTED_TRANSPORT}" "${measured}" "${METRIC_UNIT}" "${FAIL_HINT}"
        return 1
    fi
    listed="$(ranks "$1")"
    if ((listed > 0 && listed < EXPECTED_RANKS)); then
        printf 'RESULT %s: FAIL %s rank(s) joined the test, not %s (all_reduce_perf built without MPI?)\n' \
            "${TEST_LABEL}" "${listed}" "${EXPECTED_RANKS}"
        return 1
    fi
    judge "${measured}"
}
"""

_NETWORK = r"""# --- running ---
log() { printf '[acceptance] %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 2
}

# Interface of the default route (the primary ENI); empty when unknown.
primary_interface() { awk '$2 == "00000000" { print $1; exit }' /proc/net/route 2>/dev/null || true; }

# The existing directories among the arguments, joined with ':' before the current LD_LIBRARY_PATH.
library_path() {
    local dir
    local -a existing=()
    for dir in "$@"; do
        if [[ -n ${dir} && -d ${dir} ]]; then existing+=("${dir}"); fi
    done
    local IFS=:
    printf '%s\n' "${existing[*]}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
}

# Download $1 to $2 unless already there, and verify its sha256 $3.
fetch() {
    local url=$1 archive=$2 sha256=$3
    if [[ ! -f ${archive} ]]; then
        log "downloading ${url}"
        curl --fail --silent --show-error --location --retry 3 --output "${archive}.part" "${url}" ||
            die "cannot download ${url}: give the compute nodes internet access or copy it to ${archive}"
        mv "${archive}.part" "${archive}"
    fi
    printf '%s  %s\n' "${sha256}" "${archive}" | sha256sum --check --status ||
        die "${archive} does not match sha256 ${sha256}: delete it and run again"
}

# Run the command, keep its output in $OUTPUT, stop the job when it fails.
run_recorded() {
    local status
    log "running: $*"
    set +e
    "$@" 2>&1 | tee "${OUTPUT}"
    status=${PIPESTATUS[0]}
    set -e
    if ((status != 0)); then
        printf 'RESULT %s: FAIL the benchmark exited with status %s (see above). %s\n' "${TEST_LABEL}" \
            "${status}" "${FAIL_HINT}"
        exit 1
    fi
}

# Where builds and outputs go: TC_ACCEPTANCE_DIR, else <shared file system>/acceptance when this user
# can write there, else ~/acceptance. Every node must see it: the benchmarks run from there.
choose_acceptance_dir() {
    if [[ -n ${TC_ACCEPTANCE_DIR:-} ]]; then
        ACCEPTANCE_DIR=${TC_ACCEPTANCE_DIR}
    elif [[ -n ${SHARED_DIR} ]] && mkdir -p "${SHARED_DIR}/acceptance" 2>/dev/null && [[ -w ${SHARED_DIR}/acceptance ]]; then
        ACCEPTANCE_DIR="${SHARED_DIR}/acceptance"
    else
        ACCEPTANCE_DIR="${HOME}/acceptance"
    fi
    mkdir -p "${ACCEPTANCE_DIR}"
    log "benchmarks and outputs in ${ACCEPTANCE_DIR}"
}

prepare_output() {
    mkdir -p "${ACCEPTANCE_DIR}/results"
    OUTPUT="${ACCEPTANCE_DIR}/results/${SLURM_JOB_NAME:-${SCRIPT_NAME%.*}}-${SLURM_JOB_ID:-$$}.txt"
}

# Export RANK_ENVIRONMENT here and add '-x NAME' for each to the mpirun arguments in MPI_EXPORTS.
export_rank_environment() {
    local assignment
    MPI_EXPORTS=(-x LD_LIBRARY_PATH)
    for assignment in "${RANK_ENVIRONMENT[@]}"; do
        export "${assignment?}"
        MPI_EXPORTS+=(-x "${assignment%%=*}")
    done
}
"""

_OSU_RUN = r"""# The installed OSU binary named $1, if built.
osu_binary() {
    local found=""
    if [[ -d ${OSU_PREFIX}/libexec ]]; then
        found="$(find "${OSU_PREFIX}/libexec" -type f -name "$1" -perm -u+x -print -quit)"
    fi
    if [[ -n ${found} ]]; then printf '%s\n' "${found}"; fi
}

# Build the pinned OSU release against Open MPI, once per shared file system.
build_osu() {
    local archive="${ACCEPTANCE_DIR}/osu-micro-benchmarks-${OSU_VERSION}.tar.gz"
    local source="${ACCEPTANCE_DIR}/src/osu-micro-benchmarks-${OSU_VERSION}"
    mkdir -p "${ACCEPTANCE_DIR}/src"
    exec 9>"${ACCEPTANCE_DIR}/.osu.lock"
    flock 9
    if [[ -z "$(osu_binary "${OSU_TEST}")" ]]; then
        fetch "${OSU_URL}" "${archive}" "${OSU_SHA256}"
        rm -rf "${source}"
        tar -xzf "${archive}" -C "${ACCEPTANCE_DIR}/src"
        log "building OSU micro-benchmarks ${OSU_VERSION} into ${OSU_PREFIX} (once)"
        (cd "${source}" && ./configure CC="${MPI_HOME}/bin/mpicc" CXX="${MPI_HOME}/bin/mpicxx" \
            --prefix="${OSU_PREFIX}" && make -j "$(nproc)" && make install) >"${source}.log" 2>&1 ||
            die "building the OSU micro-benchmarks failed: see ${source}.log"
    fi
    exec 9>&-
}

main() {
    local binary interface
    local -a transport_args=("${MPI_TRANSPORT[@]}")
    [[ -x ${MPI_HOME}/bin/mpirun ]] || die "no Open MPI at ${MPI_HOME}: set MPI_HOME"
    choose_acceptance_dir
    OSU_PREFIX="${ACCEPTANCE_DIR}/osu-micro-benchmarks-${OSU_VERSION}-openmpi"
    binary="$(osu_binary "${OSU_TEST}")"
    if [[ -z ${binary} ]]; then
        build_osu
        binary="$(osu_binary "${OSU_TEST}")"
    fi
    [[ -n ${binary} ]] || die "no ${OSU_TEST} under ${OSU_PREFIX}"
    if [[ ${TCP_ONLY} == yes ]]; then
        unset FI_PROVIDER
        interface="$(primary_interface)"
        # One interface, so one TCP flow (the tcp BTL would otherwise stripe over every ENI).
        if [[ -n ${interface} ]]; then
            transport_args+=(--mca btl_tcp_if_include "${interface}")
        else
            transport_args+=(--mca btl_tcp_if_exclude "lo,docker0")
        fi
    fi
    LD_LIBRARY_PATH="$(library_path "${MPI_HOME}/lib64" "${MPI_HOME}/lib" /opt/amazon/efa/lib64 /opt/amazon/efa/lib)"
    export LD_LIBRARY_PATH
    export_rank_environment
    prepare_output
    run_recorded "${MPI_HOME}/bin/mpirun" -np 2 --map-by ppr:1:node "${transport_args[@]}" \
        "${MPI_EXPORTS[@]}" "${binary}"
    check_output "${OUTPUT}" || exit
    log "output kept in ${OUTPUT}; check it again with: bash ${SCRIPT_NAME} --check ${OUTPUT}"
}
"""

_NCCL_RUN = r"""# The all_reduce_perf to run: NCCL_TESTS_BIN, our pinned build, or the one the DLAMI ships.
find_all_reduce_perf() {
    local candidate
    for candidate in "${NCCL_TESTS_BIN:-}" \
        "${ACCEPTANCE_DIR}/src/nccl-tests-${NCCL_TESTS_VERSION}/build/all_reduce_perf" \
        /usr/local/cuda*/efa/test-cuda*/all_reduce_perf; do
        if [[ -n ${candidate} && -x ${candidate} ]]; then
            printf '%s\n' "${candidate}"
            return 0
        fi
    done
}

# An NCCL installation to build against: NCCL_HOME, CUDA's (DLAMI), the system's, or our pinned build.
find_nccl_home() {
    local candidate
    for candidate in "${NCCL_HOME:-}" "${CUDA_HOME}" /usr /opt/nccl/build; do
        if [[ -n ${candidate} && -f ${candidate}/include/nccl.h ]]; then
            printf '%s\n' "${candidate}"
            return 0
        fi
    done
    candidate="${ACCEPTANCE_DIR}/src/nccl-${NCCL_VERSION}/build"
    if [[ -f ${candidate}/lib/libnccl.so ]]; then printf '%s\n' "${candidate}"; fi
}

# -gencode for this node's GPUs (from nvidia-smi), so the builds compile for one architecture only.
nvcc_gencode() {
    local capability
    capability="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .' || true)"
    if [[ ${capability} =~ ^[0-9]+$ ]]; then
        printf -- '-gencode=arch=compute_%s,code=sm_%s\n' "${capability}" "${capability}"
    fi
}

# Build the pinned NCCL (when the AMI has none) and nccl-tests, once per shared file system.
build_nccl_tests() {
    local gencode nccl_home archive
    local source="${ACCEPTANCE_DIR}/src/nccl-tests-${NCCL_TESTS_VERSION}"
    mkdir -p "${ACCEPTANCE_DIR}/src"
    exec 9>"${ACCEPTANCE_DIR}/.nccl-tests.lock"
    flock 9
    gencode="$(nvcc_gencode)"
    nccl_home="$(find_nccl_home)"
    if [[ -z ${nccl_home} ]]; then
        archive="${ACCEPTANCE_DIR}/nccl-${NCCL_VERSION}.tar.gz"
        fetch "${NCCL_URL}" "${archive}" "${NCCL_SHA256}"
        tar -xzf "${archive}" -C "${ACCEPTANCE_DIR}/src"
        log "building NCCL ${NCCL_VERSION} (once; the AMI has none)"
        make -C "${ACCEPTANCE_DIR}/src/nccl-${NCCL_VERSION}" -j "$(nproc)" src.build CUDA_HOME="${CUDA_HOME}" \
            ${gencode:+NVCC_GENCODE="${gencode}"} >"${ACCEPTANCE_DIR}/src/nccl-${NCCL_VERSION}.log" 2>&1 ||
            die "building NCCL failed: see ${ACCEPTANCE_DIR}/src/nccl-${NCCL_VERSION}.log"
        nccl_home="${ACCEPTANCE_DIR}/src/nccl-${NCCL_VERSION}/build"
    fi
    if [[ ! -x ${source}/build/all_reduce_perf ]]; then
        archive="${ACCEPTANCE_DIR}/nccl-tests-${NCCL_TESTS_VERSION}.tar.gz"
        fetch "${NCCL_TESTS_URL}" "${archive}" "${NCCL_TESTS_SHA256}"
        tar -xzf "${archive}" -C "${ACCEPTANCE_DIR}/src"
        log "building nccl-tests ${NCCL_TESTS_VERSION} against ${nccl_home} (once)"
        make -C "${source}" -j "$(nproc)" MPI=1 MPI_HOME="${MPI_HOME}" CUDA_HOME="${CUDA_HOME}" \
            NCCL_HOME="${nccl_home}" ${gencode:+NVCC_GENCODE="${gencode}"} >"${source}.log" 2>&1 ||
            die "building nccl-tests failed: see ${source}.log"
    fi
    exec 9>&-
}

# Directories aws-ofi-nccl registered with the dynamic linker (the EFA installer writes this file).
ofi_nccl_dirs() {
    if [[ -f /etc/ld.so.conf.d/100_ofinccl.conf ]]; then grep -v '^#' /etc/ld.so.conf.d/100_ofinccl.conf || true; fi
}

main() {
    local binary interface nccl_home
    local -a ofi_dirs
    [[ -x ${MPI_HOME}/bin/mpirun ]] || die "no Open MPI at ${MPI_HOME}: set MPI_HOME"
    choose_acceptance_dir
    binary="$(find_all_reduce_perf)"
    if [[ -z ${binary} ]]; then
        build_nccl_tests
        binary="$(find_all_reduce_perf)"
    fi
    [[ -n ${binary} ]] || die "no all_reduce_perf found or built"
    nccl_home="$(find_nccl_home)"
    if [[ ${EXPECTED_TRANSPORT} == socket ]]; then
        unset FI_PROVIDER
        interface="$(primary_interface)"
        export NCCL_SOCKET_IFNAME="${interface:+=${interface}}"
        NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-^lo,docker}"
    fi
    mapfile -t ofi_dirs < <(ofi_nccl_dirs)
    LD_LIBRARY_PATH="$(library_path "${nccl_home:+${nccl_home}/lib}" "${ofi_dirs[@]}" /opt/amazon/ofi-nccl/lib64 \
        /opt/amazon/ofi-nccl/lib /opt/aws-ofi-nccl/lib /opt/amazon/efa/lib64 /opt/amazon/efa/lib \
        "${MPI_HOME}/lib64" "${MPI_HOME}/lib" "${CUDA_HOME}/lib64" "${CUDA_HOME}/lib")"
    export LD_LIBRARY_PATH
    export_rank_environment
    if [[ ${EXPECTED_TRANSPORT} == socket ]]; then MPI_EXPORTS+=(-x NCCL_SOCKET_IFNAME); fi
    prepare_output
    # MPI only starts the ranks and exchanges NCCL's id: keep it on TCP so it never competes for EFA.
    run_recorded "${MPI_HOME}/bin/mpirun" -np "$((${SLURM_NNODES:-2} * GPUS_PER_NODE))" \
        --map-by "ppr:${GPUS_PER_NODE}:node" --bind-to none --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_exclude lo,docker0 "${MPI_EXPORTS[@]}" \
        "${binary}" -b 8 -e 16G -f 2 -g 1 -c 1 -w 5 -n 20
    check_output "${OUTPUT}" || exit
    log "output kept in ${OUTPUT}; check it again with: bash ${SCRIPT_NAME} --check ${OUTPUT}"
}
"""

_ENTRY = r"""# --- entry ---
if [[ ${1:-} == --check ]]; then
    status=0
    check_output "${2:?usage: bash ${SCRIPT_NAME} --check OUTPUT_FILE}" || status=$?
    exit "${status}"
fi
main
"""

_STDIN_ENTRY = r"""# --- entry: the launcher's log from a file argument or from stdin ---
input=${1:-}
if [[ -z ${input} ]]; then
    input="$(mktemp)"
    trap 'rm -f "${input}"' EXIT
    cat >"${input}"
fi
status=0
check_output "${input}" || status=$?
exit "${status}"
"""
