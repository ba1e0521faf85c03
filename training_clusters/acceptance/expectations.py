"""The expected figures of the acceptance jobs, and where each gate sits.

**The rule** (line rates from :mod:`training_clusters.catalog`; 1 Gbit/s = 125 MB/s, OSU's MB and NCCL's GB
being 10^6 and 10^9 bytes):

* ``osu_bw`` over EFA: one rank pair drives one EFA device, so expect the line rate of one network card,
  ``network_gbps / max_network_cards``. Measured between two c5n.9xlarge: 6,130 MB/s (50 Gbit/s, one
  card: 6,250 MB/s), i.e. 98 %.
* ``osu_bw`` over TCP: one TCP flow, which EC2 limits to 10 Gbit/s inside a cluster placement group and
  5 Gbit/s outside one (capped at the card's rate). Measured on the same c5n.9xlarge: 1,190 MB/s of 1,250.
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
silently fell back to TCP fails on its figure alone; the gates also read the run's own evidence of the
transport (see :mod:`training_clusters.acceptance`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from training_clusters.catalog import InstanceType

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
        return f"{self.metric}: {expected}; fails {bound} {human_number(self.limit)} {self.unit}"

    def _expected_text(self) -> str:
        assert self.expected is not None
        word = "about" if self.higher_is_better else "at most"
        return f"{word} {human_number(self.expected)} {self.unit}"


def per_card_gbps(instance_type: InstanceType) -> float:
    """Line rate of one network card (one EFA device): the advertised bandwidth over the cards."""
    return instance_type.network_gbps / max(instance_type.max_network_cards, 1)


def _devices(instance_type: InstanceType, per_card: float) -> str:
    """How the instance's bandwidth splits into devices: `` (3,200 Gbit/s = 32 EFA devices x 100 Gbit/s)``."""
    cards = instance_type.max_network_cards
    if cards <= 1:
        return " (the instance's one network card)"
    what = "EFA devices" if instance_type.max_efa_interfaces == cards else "network cards"
    return f" ({human_number(instance_type.network_gbps)} Gbit/s = {cards} {what} x {human_number(per_card)} Gbit/s)"


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
        basis = f"one EFA device's line rate, {human_number(gbps)} Gbit/s{_devices(instance_type, gbps)}"
    else:
        gbps = single_flow_gbps(instance_type, placement_group=placement_group)
        where = "inside" if placement_group else "outside"
        basis = (
            f"one TCP flow, which EC2 limits to {human_number(gbps)} Gbit/s {where} a cluster placement group"
        )
    expected = gbps * MEGABYTES_PER_GBIT
    return _bandwidth("osu_bw peak bandwidth", "MB/s", expected=expected, floor_of=expected, basis=basis)


def osu_latency_expectation(transport: Transport) -> Expectation:
    """8-byte ``osu_latency`` between two nodes."""
    if transport is Transport.EFA:
        expected: float | None = EFA_LATENCY_US
        limit = EFA_LATENCY_US * LATENCY_CEILING
        basis = "EFA small-message latency (ParallelCluster's baseline: 17.2 us on c5n.18xlarge)"
    else:
        expected, limit = None, TCP_LATENCY_CEILING_US
        basis = "TCP, for comparison: a sanity ceiling only"
    return Expectation(
        metric="osu_latency at 8 bytes",
        unit="us",
        expected=expected,
        limit=limit,
        higher_is_better=False,
        basis=basis,
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
        expected: float | None = None
        floor = single_flow_gbps(instance_type, placement_group=placement_group) * GIGABYTES_PER_GBIT
        basis = "NCCL sockets, for comparison: the floor is half of one TCP flow"
    else:
        cards = min(efa_interfaces or instance_type.max_efa_interfaces, instance_type.max_network_cards)
        aggregate_gbps = per_card_gbps(instance_type) * cards
        expected = floor = aggregate_gbps * GIGABYTES_PER_GBIT * NCCL_BUSBW_EFFICIENCY
        basis = (
            f"{NCCL_BUSBW_EFFICIENCY:.0%} of {cards} EFA interface(s) x "
            f"{human_number(per_card_gbps(instance_type))} Gbit/s = {human_number(aggregate_gbps)} Gbit/s"
        )
    return _bandwidth(
        "all_reduce_perf peak bus bandwidth", "GB/s", expected=expected, floor_of=floor, basis=basis
    )


def _bandwidth(metric: str, unit: str, *, expected: float | None, floor_of: float, basis: str) -> Expectation:
    """A bandwidth to reach: at least :data:`BANDWIDTH_FLOOR` of ``floor_of``."""
    return Expectation(
        metric=metric,
        unit=unit,
        expected=expected,
        limit=floor_of * BANDWIDTH_FLOOR,
        higher_is_better=True,
        basis=basis,
    )


def human_number(value: float) -> str:
    """Human figure: ``6,250``, ``62.5``, ``2.5``, ``0.31``."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def plain_number(value: float) -> str:
    """Figure for bash and annotations: no thousands separators, at most three decimals."""
    return f"{value:.3f}".rstrip("0").rstrip(".")
