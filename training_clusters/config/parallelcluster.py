"""``parallelcluster``: an AWS ParallelCluster Slurm cluster."""

from __future__ import annotations

import re
from typing import Annotated, Any

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
    _raise_if_crowded,
)
from training_clusters.config.capacity import CapacityConfig, _capacity_for, stated_capacity
from training_clusters.model.capacity import Capacity
from training_clusters.model.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.model.errors import excerpt
from training_clusters.model.options import (
    DeletionPolicy,
    OperatingSystem,
    QueuePlacement,
    QueueUpdateStrategy,
    RemovalPolicy,
    SlurmTopology,
)
from training_clusters.rules import accounting as accounting_rules
from training_clusters.rules import parallelcluster as pcluster_rules


class PclusterComputeResourceConfig(_Model):
    """``parallelcluster.queues[].compute_resources[]``: one instance type of a Slurm queue."""

    name: str
    instance_type: str
    min_count: int = 0
    max_count: int = 10
    efa: bool | None = Field(default=None, description="Default: enabled where the instance type has EFA.")
    gdr_support: bool | None = Field(
        default=None, description="GPUDirect RDMA. Default: enabled where EFA is and the type has it."
    )
    disable_simultaneous_multithreading: bool = False
    capacity: CapacityConfig | None = Field(
        default=None,
        description="A reservation or Capacity Block for this compute resource only. Default: the queue's.",
    )
    gpu_health_check: bool | None = Field(
        default=None,
        description="ParallelCluster's GPU health check (DCGM) before each job. Default: on for GPU types.",
    )

    _name_pattern = field_validator("name")(_follows(pcluster_rules.slurm_name_problem))

    _instance_type = field_validator("instance_type")(_catalogued)

    @field_validator("capacity")
    @classmethod
    def _reserved_capacity(cls, value: CapacityConfig | None) -> CapacityConfig | None:
        if value is not None:
            _raise_if(pcluster_rules.compute_resource_capacity_problem(value.to_capacity()))
        return value

    @model_validator(mode="after")
    def _gpu_health_check_on_gpus(self) -> PclusterComputeResourceConfig:
        if self.gpu_health_check:
            _raise_if(
                pcluster_rules.gpu_health_check_problem(CATALOG[self.instance_type]), "gpu_health_check"
            )
        return self

    @model_validator(mode="after")
    def _counts(self) -> PclusterComputeResourceConfig:
        _raise_if(pcluster_rules.max_count_problem(self.max_count), "max_count")
        _raise_if(pcluster_rules.min_count_problem(self.min_count, self.max_count), "min_count")
        return self

    @model_validator(mode="after")
    def _efa_capable(self) -> PclusterComputeResourceConfig:
        if self.efa:
            _raise_if(pcluster_rules.efa_enabled_problem(CATALOG[self.instance_type]), "efa")
        return self

    @model_validator(mode="after")
    def _gdr_supported(self) -> PclusterComputeResourceConfig:
        if self.gdr_support:
            _raise_if(
                pcluster_rules.gdr_problem(CATALOG[self.instance_type], self.efa_enabled), "gdr_support"
            )
        return self

    def resource_capacity(self) -> Capacity | None:
        """``capacity`` on the model, or None (the queue's)."""
        return stated_capacity(self.capacity)

    @property
    def efa_enabled(self) -> bool:
        """``efa``, or whether the instance type has EFA when it is omitted."""
        return self.efa if self.efa is not None else CATALOG[self.instance_type].efa_supported


class PclusterQueueConfig(_Model):
    """``parallelcluster.queues[]``: one Slurm queue (partition)."""

    name: str
    compute_resources: list[PclusterComputeResourceConfig]
    capacity: CapacityConfig | None = Field(
        default=None,
        description="Where the queue's instances come from: on-demand, spot, a reservation or a "
        "capacity-block. Default: on-demand.",
    )
    placement: Annotated[QueuePlacement, _FileChoice(QueuePlacement)] | None = Field(
        default=None,
        description="shared (the environment's placement group), managed (made by ParallelCluster) or none. "
        "Default: shared when a compute resource uses EFA, else none.",
    )
    custom_ami: str | None = Field(default=None, description="The queue's own AMI. Default: the cluster's.")
    job_exclusive_allocation: bool | None = Field(
        default=None,
        description="Each job gets whole nodes of this queue. Default: ParallelCluster's (shared).",
    )
    on_node_start: list[PclusterCustomActionConfig] = Field(
        default_factory=list,
        description="Scripts each node of the queue runs, in order, before configuration.",
    )
    on_node_configured: list[PclusterCustomActionConfig] = Field(
        default_factory=list,
        description="Scripts each node of the queue runs, in order, once configured (after the cluster-wide ones).",
    )

    _custom_ami = field_validator("custom_ami")(lambda value: _ami(value))

    _name_pattern = field_validator("name")(_follows(pcluster_rules.slurm_name_problem))

    @field_validator("compute_resources")
    @classmethod
    def _compute_resources(
        cls, value: list[PclusterComputeResourceConfig]
    ) -> list[PclusterComputeResourceConfig]:
        _raise_if(pcluster_rules.count_problem(len(value), pcluster_rules.MAX_COMPUTE_RESOURCES_PER_QUEUE))
        _raise_if(pcluster_rules.duplicates_problem(r.name for r in value), "names")
        return value

    _pcluster_capacity = field_validator("capacity")(_capacity_for(CapacityOrchestrator.PARALLELCLUSTER))

    @model_validator(mode="after")
    def _capacities_fit_the_queue(self) -> PclusterQueueConfig:
        problem = pcluster_rules.queue_capacity_problem(
            self.queue_capacity(),
            [(r.name, r.resource_capacity(), r.min_count, r.max_count) for r in self.compute_resources],
        )
        _raise_if(problem)
        return self

    def queue_capacity(self) -> Capacity:
        """``capacity`` on the model: On-Demand when not given."""
        return Capacity.on_demand() if self.capacity is None else self.capacity.to_capacity()

    @model_validator(mode="after")
    def _efa_needs_placement(self) -> PclusterQueueConfig:
        if self.placement is QueuePlacement.NONE and pcluster_rules.placement_may_be_left_out(
            self.queue_capacity(), [r.resource_capacity() for r in self.compute_resources]
        ):
            return self  # reserved capacity: ParallelCluster only warns (see Capacity.keeps_placement_group)
        efa = [r.name for r in self.compute_resources if r.efa_enabled]
        placement = None if self.placement is None else self.placement.value
        if placement is not None:
            _raise_at("placement", pcluster_rules.efa_placement_problem(placement, efa))
        return self


class PclusterHeadNodeConfig(_Model):
    """``parallelcluster.head_node``: the Slurm controller and login node."""

    instance_type: str = "t3.medium"
    key_name: str | None = Field(default=None, description="EC2 key pair. Default: none (use SSM).")
    ssh_allowed_ips: str | None = Field(
        default=None,
        description="CIDR or prefix list allowed to SSH (needs key_name). Default: the VPC CIDR.",
    )
    custom_ami: str | None = Field(
        default=None, description="The head node's own AMI. Default: the cluster's."
    )
    on_node_start: list[PclusterCustomActionConfig] = Field(
        default_factory=list, description="Scripts the head node runs, in order, before configuration."
    )
    on_node_configured: list[PclusterCustomActionConfig] = Field(
        default_factory=list,
        description="Scripts the head node runs, in order, once configured (after the cluster-wide ones).",
    )

    _instance_type = field_validator("instance_type")(_any_type)
    _custom_ami = field_validator("custom_ami")(lambda value: _ami(value))

    @model_validator(mode="after")
    def _ssh(self) -> PclusterHeadNodeConfig:
        if self.ssh_allowed_ips is None:
            return self
        _raise_at("ssh_allowed_ips", pcluster_rules.ssh_key_problem(self.key_name))
        _raise_if(pcluster_rules.ssh_allowed_ips_problem(self.ssh_allowed_ips), "ssh_allowed_ips")
        return self


class PclusterSlurmConfig(_Model):
    """``parallelcluster.slurm``: cluster-wide Slurm settings."""

    queue_update_strategy: Annotated[QueueUpdateStrategy, _FileChoice(QueueUpdateStrategy)] = (
        QueueUpdateStrategy.DRAIN
    )
    scaledown_idletime_minutes: int = 10
    custom_settings: list[dict[str, str]] = Field(
        default_factory=list,
        description="Extra slurm.conf parameters (CustomSlurmSettings), e.g. [{PriorityType: priority/multifactor}]; "
        "parameters ParallelCluster manages are refused. Default: none.",
    )
    topology: Annotated[SlurmTopology, _FileChoice(SlurmTopology)] = Field(
        default=SlurmTopology.TREE,
        description="Place multi-node jobs by EC2 network topology: tree (Slurm's topology/tree on every queue whose "
        "instance types EC2 instance topology describes, p5, p5e, p5en, p6, trn2 and the like; the head node writes "
        "topology.conf and keeps it current; jobs ask with --switches) or off. Default: tree.",
    )

    _idletime = field_validator("scaledown_idletime_minutes")(
        _follows(pcluster_rules.scaledown_idletime_problem)
    )

    @model_validator(mode="after")
    def _own_topology_plugin(self) -> PclusterSlurmConfig:
        if self.topology is SlurmTopology.TREE:
            for index, settings in enumerate(self.custom_settings):
                _raise_at(f"custom_settings[{index}]", pcluster_rules.topology_plugin_problem(settings))
        return self

    @field_validator("custom_settings")
    @classmethod
    def _settings_allowed(cls, value: list[dict[str, str]]) -> list[dict[str, str]]:
        for index, settings in enumerate(value):
            for name in settings:
                _raise_if(pcluster_rules.custom_slurm_setting_problem(name), f"[{index}]")
        return value


class PclusterCustomActionConfig(_Model):
    """``parallelcluster.on_node_configured``: a script in S3 every node runs once configured."""

    script: str = Field(description="s3://bucket/key of the script")
    args: list[str] = Field(default_factory=list)

    @field_validator("script")
    @classmethod
    def _s3_uri(cls, value: str) -> str:
        if not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/\S+", value):
            raise ValueError(f"must be an s3://bucket/key URI, got {excerpt(value)}")
        return value


def _ami(value: str | None) -> str | None:
    if value is not None:
        _raise_if(pcluster_rules.ami_problem(value))
    return value


class PclusterLoginPoolConfig(_Model):
    """``parallelcluster.login_nodes[]``: a pool of login nodes."""

    name: str = "login"
    instance_type: str = "m5.xlarge"
    count: Annotated[int, Field(ge=1)] = 1
    key_name: str | None = Field(default=None, description="EC2 key pair. Default: none (use SSM).")
    ssh_allowed_ips: str | None = Field(default=None, description="Default: the VPC CIDR (needs key_name).")
    custom_ami: str | None = Field(default=None, description="The pool's own AMI. Default: the cluster's.")
    gracetime_period_minutes: int | None = Field(
        default=None,
        description="3-120 minutes users get before a node stops. Default: ParallelCluster's (10).",
    )
    on_node_start: list[PclusterCustomActionConfig] = Field(default_factory=list)
    on_node_configured: list[PclusterCustomActionConfig] = Field(default_factory=list)

    _instance_type = field_validator("instance_type")(_any_type)
    _custom_ami = field_validator("custom_ami")(lambda value: _ami(value))

    _name_pattern = field_validator("name")(_follows(pcluster_rules.slurm_name_problem))

    _gracetime = field_validator("gracetime_period_minutes")(_follows(pcluster_rules.login_gracetime_problem))

    @model_validator(mode="after")
    def _ssh(self) -> PclusterLoginPoolConfig:
        if self.ssh_allowed_ips is not None:
            _raise_at("ssh_allowed_ips", pcluster_rules.ssh_key_problem(self.key_name))
            _raise_if(pcluster_rules.ssh_allowed_ips_problem(self.ssh_allowed_ips), "ssh_allowed_ips")
        return self


class PclusterAccountingConfig(_Model):
    """``parallelcluster.accounting``: Slurm accounting in an Aurora MySQL database made with the environment."""

    min_capacity_acu: float = Field(default=0.5, description="Least Serverless v2 capacity (0.5-256 ACU).")
    max_capacity_acu: float = Field(default=2.0, description="Most Serverless v2 capacity (0.5-256 ACU).")
    backup_retention_days: int = Field(default=7, ge=1, le=35, description="Days of automated backups.")
    removal_policy: Annotated[RemovalPolicy, _FileChoice(RemovalPolicy)] = Field(
        default=RemovalPolicy.RETAIN,
        description="retain (default): the job history outlives the environment.",
    )

    _min_acu = field_validator("min_capacity_acu")(_follows(accounting_rules.capacity_acu_problem))
    _max_acu = field_validator("max_capacity_acu")(_follows(accounting_rules.capacity_acu_problem))

    @model_validator(mode="after")
    def _capacity_range(self) -> PclusterAccountingConfig:
        _raise_at(
            "min_capacity_acu",
            accounting_rules.capacity_range_problem(self.min_capacity_acu, self.max_capacity_acu),
        )
        return self


class PclusterDirectoryServiceConfig(_Model):
    """``parallelcluster.directory_service``: users from Active Directory / LDAP, instead of ``users``."""

    domain_name: str = Field(description="corp.example.com, or DC=corp,DC=example,DC=com")
    domain_addr: str = Field(description="ldaps://corp.example.com (comma-separated for several)")
    password_secret_arn: str = Field(
        pattern=r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:.+$",
        description="Secrets Manager secret holding the read-only user's password.",
    )
    domain_read_only_user: str = Field(description="cn=ReadOnly,ou=Users,dc=corp,dc=example,dc=com")
    ldap_tls_ca_cert: str | None = None
    ldap_tls_req_cert: str | None = Field(default=None, description="never, allow, try, demand or hard.")
    ldap_access_filter: str | None = None
    generate_ssh_keys_for_users: bool = True
    additional_sssd_configs: dict[str, str] = Field(default_factory=dict)

    _tls = field_validator("ldap_tls_req_cert")(_follows(pcluster_rules.ldap_tls_req_cert_problem))


class ParallelClusterConfig(_Model):
    """``parallelcluster``: an AWS ParallelCluster Slurm cluster on the environment's network and FSx."""

    cluster_name: str | None = Field(default=None, description="Default: the environment's name.")
    os: Annotated[OperatingSystem, _FileChoice(OperatingSystem)] = OperatingSystem.ALINUX2023
    head_node: PclusterHeadNodeConfig = PclusterHeadNodeConfig()
    queues: list[PclusterQueueConfig]
    slurm: PclusterSlurmConfig = PclusterSlurmConfig()
    on_node_configured: PclusterCustomActionConfig | None = None
    custom_ami: str | None = Field(default=None, description="The cluster's AMI. Default: ParallelCluster's.")
    login_nodes: list[PclusterLoginPoolConfig] = Field(
        default_factory=list, description="Login node pools. Default: none (log in on the head node)."
    )
    team_logins_on_head_node: bool = Field(
        default=False,
        description="With users and login_nodes, let the team SSH into the head node too. Default: only root and "
        "the OS's default user log in there (it runs slurmctld and reads the accounting secret); without "
        "login_nodes the head node is where everyone logs in.",
    )
    accounting: PclusterAccountingConfig | None = Field(
        default=None, description="Slurm accounting in an Aurora MySQL database ({} for the defaults)."
    )
    pyxis: bool = Field(
        default=False,
        description="Enable Pyxis/Enroot (srun --container-image), shipped disabled since 3.11.",
    )
    directory_service: PclusterDirectoryServiceConfig | None = None
    log_retention_days: int = 180
    deletion_policy: Annotated[DeletionPolicy, _FileChoice(DeletionPolicy)] = Field(
        default=DeletionPolicy.DELETE,
        description=(
            "Delete (default): the cluster is deleted with the stack (storage.lustre keeps its own removal "
            "policy). Retain: it keeps running on the stack's network; cdk destroy then stops on that network."
        ),
    )
    provider_lambda_role_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$",
        description="Role of ParallelCluster's provider Lambda (CustomLambdaRole), e.g. one with a permissions "
        "boundary. Default: the provider makes its own, which may run and terminate instances on '*'.",
    )

    _custom_ami = field_validator("custom_ami")(lambda value: _ami(value))

    @field_validator("login_nodes")
    @classmethod
    def _login_pool_names(cls, value: list[PclusterLoginPoolConfig]) -> list[PclusterLoginPoolConfig]:
        _raise_if(pcluster_rules.duplicates_problem(p.name for p in value), "names")
        return value

    _cluster_name = field_validator("cluster_name")(_follows(pcluster_rules.cluster_name_problem))

    @field_validator("os", mode="before")
    @classmethod
    def _supported_os(cls, value: Any) -> Any:
        if isinstance(value, str):
            _raise_if(pcluster_rules.os_problem(value.strip().lower()))  # names a retired OS and why
        return value

    _retention = field_validator("log_retention_days")(
        _follows(pcluster_rules.pcluster_log_retention_problem)
    )

    @model_validator(mode="after")
    def _nodes_fit_the_subnet(self) -> ParallelClusterConfig:
        _raise_if_crowded(
            [
                *(
                    (f"queues.{i}.compute_resources.{j}.max_count", resource.max_count)
                    for i, queue in enumerate(self.queues)
                    for j, resource in enumerate(queue.compute_resources)
                ),
                *((f"login_nodes.{k}.count", pool.count) for k, pool in enumerate(self.login_nodes)),
                ("head_node", 1),
            ]
        )
        return self

    @model_validator(mode="after")
    def _head_node_memory(self) -> ParallelClusterConfig:
        compute_nodes = sum(r.max_count for q in self.queues for r in q.compute_resources)
        head_node = CATALOG.get(self.head_node.instance_type)
        if head_node is not None:  # any type may be the head node; its memory is known for catalogued ones
            _raise_at(
                "head_node.instance_type", pcluster_rules.head_node_memory_problem(head_node, compute_nodes)
            )
        return self

    @field_validator("queues")
    @classmethod
    def _queues(cls, value: list[PclusterQueueConfig]) -> list[PclusterQueueConfig]:
        _raise_if(pcluster_rules.count_problem(len(value), pcluster_rules.MAX_QUEUES))
        _raise_if(pcluster_rules.duplicates_problem(q.name for q in value), "names")
        _raise_if(
            pcluster_rules.cluster_compute_resources_problem(sum(len(q.compute_resources) for q in value))
        )
        return value

    def stated_capacities(self) -> list[tuple[str, CapacityConfig | None]]:
        """(field, section) of every ``capacity`` this section states, in file order."""
        found: list[tuple[str, CapacityConfig | None]] = []
        for i, queue in enumerate(self.queues):
            found.append((f"parallelcluster.queues.{i}", queue.capacity))
            found += [
                (f"parallelcluster.queues.{i}.compute_resources.{j}", r.capacity)
                for j, r in enumerate(queue.compute_resources)
            ]
        return found


# --- EKS section ---
