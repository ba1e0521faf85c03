"""What an environment asks for, free of AWS calls: each instance group as an :class:`InstanceDemand`, per
orchestrator (the registry's ``demands`` part, :mod:`training_clusters.orchestrators`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from training_clusters.catalog import HYPERPOD_PREFIX, lookup
from training_clusters.config import EnvironmentConfig, HyperPodConfig, HyperPodEksConfig, stated_capacity
from training_clusters.model import capacity as capacity_model
from training_clusters.model.options import CapacityKind
from training_clusters.orchestrators import orchestrator_of
from training_clusters.preflight.results import _TIMES


class Service(StrEnum):
    """Who launches the instances, and so whose quotas they count against."""

    EC2 = "ec2"
    SAGEMAKER = "sagemaker"


class Capacity(StrEnum):
    """How the instances are bought."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    CAPACITY_BLOCK = "capacity-block"
    CAPACITY_RESERVATION = "capacity-reservation"


@dataclass(frozen=True)
class InstanceDemand:
    """One group of instances the environment launches."""

    instance_type: str
    """As the file spells it: ``g5.8xlarge``, or ``ml.p5.48xlarge`` for HyperPod."""
    count: int
    """Instances at most (a ParallelCluster queue scales to ``max_count``)."""
    where: str
    """Where in the file, e.g. ``eks.efa_nodegroups[g5]``."""
    count_field: str
    """The setting that sets ``count``, e.g. ``eks.efa_nodegroups[g5].size``."""
    availability_zones: tuple[str, ...]
    """The AZs the group may launch in."""
    in_placement_az: bool
    """Whether the group lives in the placement subnet (``network.placement_availability_zone``)."""
    service: Service = Service.EC2
    """Whose quotas the instances count against. Default: EC2's."""
    capacity: Capacity = Capacity.ON_DEMAND
    """How they are bought. Default: On-Demand."""
    efa: bool = False
    """Whether the file asks for EFA on these instances. Default: no."""
    capacity_reservation_id: str | None = None
    reserved: capacity_model.Capacity | None = None
    """The reservation, Capacity Block or training plan the group launches into."""
    described_vcpus: int | None = None
    """vCPUs of one instance as EC2 describes the type (``VCpuInfo.DefaultVCpus``): for a type the catalogue
    does not know (a controller, login, head or system node may be any type). Default: the catalogue's."""

    @property
    def ec2_instance_type(self) -> str:
        """The EC2 name, without SageMaker's ``ml.`` prefix."""
        return self.instance_type.removeprefix(HYPERPOD_PREFIX)

    @property
    def vcpus(self) -> int:
        """vCPUs of the whole group, as EC2 vCPU quotas count them (catalogue or described vCPUs times count)."""
        each = (
            self.described_vcpus if self.described_vcpus is not None else lookup(self.ec2_instance_type).vcpus
        )
        return each * self.count

    @property
    def description(self) -> str:
        """Type, count and place: ``g5.8xlarge \N{MULTIPLICATION SIGN} 2 in eks.efa_nodegroups[g5]``."""
        return f"{self.instance_type} {_TIMES} {self.count} in {self.where}"


def instance_demands(config: EnvironmentConfig) -> tuple[InstanceDemand, ...]:
    """Every instance group ``config`` launches, in file order (its orchestrator's ``demands`` part)."""
    orchestrator = orchestrator_of(config)
    return () if orchestrator is None else tuple(orchestrator.load("demands")(config))


def _demand(
    where: str,
    group: Any,
    count_key: str,
    zones: tuple[str, ...],
    *,
    placed: bool,
    bought: capacity_model.Capacity | None = None,
    efa: bool = False,
    count: int | None = None,
) -> InstanceDemand:
    """The demand of the EC2 group at ``where`` in the file: ``group.instance_type`` times
    ``group.<count_key>`` (or ``count``), in ``zones`` (``placed``: the placement subnet's), bought as
    ``bought`` (its quota and reservation). Default: On-Demand, no EFA."""
    return InstanceDemand(
        instance_type=group.instance_type,
        count=getattr(group, count_key) if count is None else count,
        where=where,
        count_field=f"{where}.{count_key}",
        availability_zones=zones,
        in_placement_az=placed,
        capacity=Capacity.ON_DEMAND if bought is None else _bought(bought),
        efa=efa,
        capacity_reservation_id=None if bought is None else bought.reservation_id,
        reserved=_reserved(bought),
    )


@dataclass(frozen=True)
class _HyperPodGroup:
    """An instance group of either HyperPod section, in the terms preflight checks it."""

    name: str
    instance_type: str
    count: int
    capacity: capacity_model.Capacity | None
    volume_gib: int | None
    count_field: str = "count"
    """The setting that sets ``count``: ``max_count`` for a group Karpenter scales."""


def _hyperpod_section(config: EnvironmentConfig) -> tuple[str, str, list[_HyperPodGroup]] | None:
    """(section, cluster name, instance groups) of the environment's HyperPod cluster, Slurm or EKS; or None."""
    orchestrator = orchestrator_of(config)
    spec = None if orchestrator is None else getattr(config, orchestrator.section)
    if isinstance(spec, HyperPodConfig):
        groups = [
            _HyperPodGroup(g.name, g.instance_type, g.count, stated_capacity(g.capacity), g.extra_volume_gib)
            for g in spec.instance_groups
        ]
    elif isinstance(spec, HyperPodEksConfig):
        groups = [
            # an autoscaled group may reach max_count nodes: the quota must allow that many
            _HyperPodGroup(
                g.name,
                g.instance_type,
                g.nodes,
                stated_capacity(g.capacity),
                g.volume_gib,
                "count" if g.max_count is None else "max_count",
            )
            for g in spec.instance_groups
        ]
    else:
        return None
    assert orchestrator is not None
    return orchestrator.section, spec.cluster_name, groups


def _instance_group_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    found = _hyperpod_section(config)
    assert found is not None
    section, _, groups = found
    # The HyperPod stacks put every instance group in the placement subnet; HyperPod sets up EFA itself.
    return [
        InstanceDemand(
            instance_type=group.instance_type,
            count=group.count,
            where=f"{section}.instance_groups[{group.name}]",
            count_field=f"{section}.instance_groups[{group.name}].{group.count_field}",
            service=Service.SAGEMAKER,
            availability_zones=(config.placement_availability_zone,),
            in_placement_az=True,
            reserved=_reserved(group.capacity),
        )
        for group in groups
    ]


def hyperpod_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    """A HyperPod Slurm cluster's instance groups."""
    return _instance_group_demands(config)


def hyperpod_eks_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    """HyperPod's instance groups, and the EKS cluster's own system nodes (EC2 instances)."""
    assert config.hyperpod_eks is not None
    every_az = tuple(config.availability_zones)
    system = config.hyperpod_eks.system_nodegroup
    return [
        *_instance_group_demands(config),
        _demand("hyperpod_eks.system_nodegroup", system, "size", every_az, placed=False),
    ]


def parallelcluster_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    """The instances of the ``parallelcluster`` section."""
    spec = config.parallelcluster
    assert spec is not None
    placement = (config.placement_availability_zone,)
    # one head node: the setting that makes it is its instance type
    demands = [
        _demand("parallelcluster.head_node", spec.head_node, "instance_type", placement, placed=True, count=1)
    ]
    for queue in spec.queues:
        for resource in queue.compute_resources:
            where = f"parallelcluster.queues[{queue.name}].compute_resources[{resource.name}]"
            bought = resource.resource_capacity() or queue.queue_capacity()
            demands.append(
                _demand(
                    where,
                    resource,
                    "max_count",
                    placement,
                    placed=True,
                    bought=bought,
                    efa=resource.efa_enabled,
                )
            )
    return demands


def pcs_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    """The instances of the ``pcs`` section."""
    spec = config.pcs
    assert spec is not None
    # The PCS stack puts every node group, login nodes included, in the placement subnet.
    placement = (config.placement_availability_zone,)
    demands = []
    if spec.login_nodes.count:
        demands.append(_demand("pcs.login_nodes", spec.login_nodes, "count", placement, placed=True))
    for group in spec.compute_node_groups:
        where = f"pcs.compute_node_groups[{group.name}]"
        demands.append(
            _demand(where, group, "max_count", placement, placed=True, bought=group.node_capacity(),
                    efa=group.efa_enabled)
        )  # fmt: skip
    return demands


def _bought(capacity: capacity_model.Capacity) -> Capacity:
    """The quota view of the model: a reservation or block needs no further On-Demand quota."""
    return {
        CapacityKind.SPOT: Capacity.SPOT,
        CapacityKind.CAPACITY_BLOCK: Capacity.CAPACITY_BLOCK,
        CapacityKind.RESERVATION: Capacity.CAPACITY_RESERVATION,
    }.get(capacity.kind, Capacity.ON_DEMAND)


def _reserved(capacity: capacity_model.Capacity | None) -> capacity_model.Capacity | None:
    return capacity if capacity is not None and capacity.is_reserved else None


def eks_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    """The EKS cluster's system nodegroup and its EFA and GPU nodegroups."""
    eks = config.eks
    assert eks is not None
    every_az, placement = tuple(config.availability_zones), (config.placement_availability_zone,)
    demands = [_demand("eks.system_nodegroup", eks.system_nodegroup, "size", every_az, placed=False)]
    for group in eks.efa_nodegroups:
        where = f"eks.efa_nodegroups[{group.name}]"
        demands.append(
            _demand(where, group, "size", placement, placed=True, bought=group.node_capacity(), efa=True)
        )
    for gpu_group in eks.gpu_nodegroups:
        bought = gpu_group.node_capacity()
        # reserved capacity puts the group in the placement subnet (one AZ); otherwise every AZ
        zones = placement if bought.is_reserved else every_az
        where = f"eks.gpu_nodegroups[{gpu_group.name}]"
        demands.append(_demand(where, gpu_group, "size", zones, placed=bought.is_reserved, bought=bought))
    return demands
