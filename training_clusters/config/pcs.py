"""``pcs``: an AWS Parallel Computing Service Slurm cluster."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from training_clusters.catalog import (
    CATALOG,
)
from training_clusters.config.base import (
    _any_type,
    _catalogued,
    _FileChoice,
    _follows,
    _Model,
    _raise_at,
    _raise_if,
)
from training_clusters.config.capacity import CapacityConfig, _capacity_for
from training_clusters.model.capacity import Capacity
from training_clusters.model.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.model.options import (
    PcsClusterSize,
    SlurmAccounting,
    SlurmVersion,
)
from training_clusters.model.releases import (
    PCS_SLURM_VERSION,
)
from training_clusters.rules import pcs as pcs_rules


class PcsComputeNodeGroupConfig(_Model):
    """``pcs.compute_node_groups[]``: instances of one type that PCS starts and stops as Slurm needs them."""

    name: str = Field(description="3-25 letters, digits and hyphens, starting with a letter.")
    instance_type: str
    min_count: Annotated[int, Field(ge=0)] = 0
    max_count: Annotated[int, Field(ge=1)] = 2
    efa: bool | None = Field(default=None, description="Default: enabled where the instance type has EFA.")
    efa_interfaces: int | None = Field(
        default=None,
        description="EFA interfaces per node, one per network card. Default: the type's maximum.",
    )
    capacity: CapacityConfig | None = Field(
        default=None,
        description="Where the nodes come from: on-demand, spot, a reservation or a capacity-block. "
        "Default: on-demand.",
    )
    root_volume_size_gib: int = 200

    _pcs_name = field_validator("name")(_follows(pcs_rules.pcs_name_problem))

    _instance_type = field_validator("instance_type")(_catalogued)

    _root_volume = field_validator("root_volume_size_gib")(_follows(pcs_rules.root_volume_problem))

    _pcs_capacity = field_validator("capacity")(_capacity_for(CapacityOrchestrator.PCS))

    def node_capacity(self) -> Capacity:
        """``capacity`` on the model: On-Demand when not given."""
        return Capacity.on_demand() if self.capacity is None else self.capacity.to_capacity()

    @model_validator(mode="after")
    def _pcs_group(self) -> PcsComputeNodeGroupConfig:
        _raise_if(pcs_rules.node_counts_problem(self.min_count, self.max_count))
        instance = CATALOG[self.instance_type]
        if self.efa is not None:
            _raise_if(pcs_rules.efa_flag_problem(instance, self.efa), "efa")
        if self.efa_interfaces is not None:
            _raise_at(
                "efa_interfaces",
                pcs_rules.efa_interfaces_enabled_problem(self.efa_enabled, instance.name, self.name),
            )
            _raise_if(pcs_rules.efa_interfaces_problem(instance, self.efa_interfaces), "efa_interfaces")
        return self

    @property
    def efa_enabled(self) -> bool:
        """``efa``, or whether the instance type has EFA when it is omitted."""
        return self.efa if self.efa is not None else CATALOG[self.instance_type].efa_supported


class PcsLoginNodesConfig(_Model):
    """``pcs.login_nodes``: the static login node group (always running, in no queue)."""

    instance_type: str = "m5.xlarge"
    count: Annotated[int, Field(ge=0)] = Field(default=1, description="0 builds no login nodes.")
    name: str = "login"
    root_volume_size_gib: int = 100

    _instance_type = field_validator("instance_type")(_any_type)

    _pcs_name = field_validator("name")(_follows(pcs_rules.pcs_name_problem))

    _root_volume = field_validator("root_volume_size_gib")(_follows(pcs_rules.root_volume_problem))


class PcsQueueConfig(_Model):
    """``pcs.queues[]``: a Slurm partition and the compute node groups that run its jobs."""

    name: str
    compute_node_groups: Annotated[list[str], Field(min_length=1)]

    _pcs_name = field_validator("name")(_follows(pcs_rules.pcs_name_problem))


class PcsSlurmConfig(_Model):
    """``pcs.slurm``: the cluster's Slurm settings."""

    version: Annotated[SlurmVersion, _FileChoice(SlurmVersion)] = SlurmVersion(PCS_SLURM_VERSION)
    accounting: Annotated[SlurmAccounting, _FileChoice(SlurmAccounting)] = SlurmAccounting.NONE
    scale_down_idle_time_seconds: int = 600
    custom_settings: dict[str, str] = Field(
        default_factory=dict, description="slurm.conf parameters PCS lets a cluster set (e.g. Prolog)."
    )

    _idle_time = field_validator("scale_down_idle_time_seconds")(
        _follows(pcs_rules.scale_down_idle_time_problem)
    )

    _custom_settings = field_validator("custom_settings")(_follows(pcs_rules.slurm_custom_settings_problem))


class PcsConfig(_Model):
    """``pcs``: an AWS Parallel Computing Service Slurm cluster on the environment's network and FSx."""

    cluster_name: str | None = Field(default=None, description="Default: the environment's name.")
    size: Annotated[PcsClusterSize, _FileChoice(PcsClusterSize)] = Field(
        default=PcsClusterSize.SMALL, description="SMALL (32 nodes), MEDIUM (512) or LARGE (2048)."
    )
    ami_id: str | None = Field(default=None, description="The nodes' AMI. Give this or ami_ssm_parameter.")
    ami_ssm_parameter: str | None = Field(
        default=None, description="SSM parameter holding the AMI id, read by CloudFormation at deploy time."
    )
    login_nodes: PcsLoginNodesConfig = PcsLoginNodesConfig()
    compute_node_groups: Annotated[list[PcsComputeNodeGroupConfig], Field(min_length=1)]
    queues: list[PcsQueueConfig] | None = Field(
        default=None, description="Default: one queue per compute node group, of its name."
    )
    slurm: PcsSlurmConfig = PcsSlurmConfig()

    _pcs_cluster_name = field_validator("cluster_name")(_follows(pcs_rules.pcs_cluster_name_problem))

    _ssm_parameter = field_validator("ami_ssm_parameter")(_follows(pcs_rules.ssm_parameter_name_problem))

    @model_validator(mode="after")
    def _one_ami(self) -> PcsConfig:
        _raise_if(pcs_rules.ami_problem(self.ami_id, self.ami_ssm_parameter), "ami_id")
        return self

    @model_validator(mode="after")
    def _names_and_queues(self) -> PcsConfig:
        groups = [g.name for g in self.compute_node_groups]
        login = [self.login_nodes.name] if self.login_nodes.count else []
        _raise_if(
            pcs_rules.duplicates_problem(groups + login),
            "compute_node_groups names (login_nodes.name included)",
        )
        for index, queue in enumerate(self.queues or []):
            _raise_if(
                pcs_rules.queue_node_groups_problem(queue.compute_node_groups, groups),
                f"queues[{index}].compute_node_groups",
            )
        _raise_at("queues", pcs_rules.queues_problem(None if self.queues is None else len(self.queues)))
        if self.queues is not None:
            _raise_if(pcs_rules.duplicates_problem(q.name for q in self.queues), "queues names")
        return self

    @model_validator(mode="after")
    def _fits_size(self) -> PcsConfig:
        nodes = sum(g.max_count for g in self.compute_node_groups) + self.login_nodes.count
        _raise_if(pcs_rules.cluster_size_problem(self.size, nodes), "size")
        return self

    def stated_capacities(self) -> list[tuple[str, CapacityConfig | None]]:
        """(field, section) of every ``capacity`` this section states, in file order."""
        return [(f"pcs.compute_node_groups.{i}", g.capacity) for i, g in enumerate(self.compute_node_groups)]
