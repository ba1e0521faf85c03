"""The environment file: one YAML document describing a whole training environment.

Loading validates the document with pydantic and turns every problem into a :class:`ConfigurationError`
naming the file, the line, the field path, the value received and what is allowed::

    environments/x.yaml: 1 problem(s)
      environments/x.yaml:12: storage.lustre: storage_capacity_gib must be 1200 or a multiple of 2400 ...
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from training_clusters.catalog import (
    CATALOG,
    AcceleratorKind,
    Accelerators,
    Architecture,
    InstanceType,
    QuotaFamily,
    declared_type_problem,
    hyperpod_offer_problem,
    instance_facts_problem,
    instance_type_problem,
    lookup_hyperpod,
    use_declared_types,
)
from training_clusters.config.compute import (
    ComputeIntent,
    Ignorable,
    IntentFieldError,
    IntentProblems,
    Orchestrator,
    expand_intent,
)
from training_clusters.config.unknown_keys import allowed_keys, unknown_key_problem
from training_clusters.config.yaml_file import KeyLines, read_yaml_with_lines
from training_clusters.model.capacity import Capacity
from training_clusters.model.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.model.errors import ConfigurationError, bounded, exact_number_problem, excerpt
from training_clusters.model.options import (
    AccessMode,
    AutoScaler,
    CapacityKind,
    Choice,
    DeepHealthCheck,
    DeletionPolicy,
    EfaInterfaceType,
    HyperPodAccounting,
    LustreDeploymentType,
    MigLayout,
    MigStrategy,
    Mps,
    NodeProvisioningMode,
    NodeRecovery,
    NodeRole,
    OperatingSystem,
    PcsClusterSize,
    PlacementStrategy,
    PodSecurityLevel,
    QueuePlacement,
    QueuePreemption,
    QueueUpdateStrategy,
    RemovalPolicy,
    ResourceSharingStrategy,
    SlurmAccounting,
    SlurmConfigMode,
    SlurmConfigStrategy,
    SlurmTopology,
    SlurmVersion,
    TeamPreemption,
    TimeSlicing,
    TopologyPlacement,
)
from training_clusters.model.releases import (
    DEFAULT_NCCL_TESTS_IMAGE,
    HYPERPOD_EKS_KUBERNETES_VERSION,
    HYPERPOD_TASK_GOVERNANCE_VERSION,
    HYPERPOD_VPC_CNI_VERSION,
    PCS_SLURM_VERSION,
)
from training_clusters.orchestrators import ORCHESTRATORS, orchestrator_of
from training_clusters.rules import eks_queues as queue_rules
from training_clusters.rules import hyperpod as hyperpod_rules
from training_clusters.rules import hyperpod_eks as hyperpod_eks_rules
from training_clusters.rules import hyperpod_governance as governance_rules
from training_clusters.rules import parallelcluster as pcluster_rules
from training_clusters.rules import pcs as pcs_rules
from training_clusters.rules import users as user_rules
from training_clusters.rules.common import duplicates_problem, mount_dir_problem
from training_clusters.rules.eks import (
    efa_nodegroup_problem,
    gpu_sharing_problem,
    kubernetes_labels,
    mig_layout_problem,
    mig_strategy_problem,
    public_access_cidrs_problem,
)
from training_clusters.rules.instance_types import (
    efa_interfaces_problem,
    hyperpod_instance_type_name_problem,
    instance_type_name_problem,
    undeclared_type_problem,
)
from training_clusters.rules.logs import cloudwatch_retention_problem
from training_clusters.rules.lustre import (
    DEFAULT_BACKUP_RETENTION_DAYS,
    LUSTRE_FIRST_STEP_GIB,
    MAX_BACKUP_RETENTION_DAYS,
    MAX_NO_SQUASH_NIDS,
    ROOT_WRITING_ORCHESTRATORS,
    file_system_path_problem,
    lustre_backup_retention_problem,
    lustre_capacity_problem,
    lustre_throughput_problem,
    no_squash_nid_problem,
    root_squash_orchestrator_problem,
    s3_prefix_problem,
)
from training_clusters.rules.network import (
    nat_gateways_fit_problem,
    nat_gateways_problem,
    nodes_fit_problem,
    usable_addresses,
    vpc_cidr_problem,
)
from training_clusters.rules.regions import (
    availability_zone_problem,
    region_shape_problem,
    unknown_region_problem,
)
from training_clusters.rules.tags import MAX_TAG_VALUE, tag_key_problem, tag_value_problem

_ACCOUNT = re.compile(r"^\d{12}$")
_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]{0,62}$")
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
PROJECT_TAG = "cdk-training-clusters"
COST_CENTRE_TAG = "cost-centre"


class _Model(BaseModel):
    """Strict base: unknown keys are errors, enum values are kept as enums, ``true`` is not a number, and a
    number is finite and exact in CloudFormation's JSON (``.nan``, ``.inf`` and 10**30 are refused)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_enum_values=False, str_strip_whitespace=True, allow_inf_nan=False
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads YAML's true/false as 1/0 in a number field; `size: true` is a mistake, not a count
        field = cls.model_fields.get(info.field_name or "")
        if field is None or not _is_number(field.annotation):
            return value
        if isinstance(value, bool):
            raise ValueError(f"must be a number, got {str(value).lower()}")
        problem = exact_number_problem(value)
        if problem:
            raise ValueError(problem)
        return value


@dataclass(frozen=True)
class _FileChoice:
    """A field holding a :class:`~training_clusters.model.options.Choice`: parsed by its one conversion, and listed
    in the JSON Schema with the spellings a file may use."""

    choice: type[Choice]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # parsed by the option's one conversion; written back (model_dump, schema defaults) as its value
        return core_schema.no_info_plain_validator_function(
            self.choice.parse, serialization=core_schema.to_string_ser_schema()
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "enum": self.choice.spellings()}


def _follows(rule: Callable[[Any], str | None]) -> Callable[[Any], Any]:
    """A field validator applying ``rule`` (a ``rules.*_problem`` function) to a field's value, if given."""

    def check(value: Any) -> Any:
        if value is not None:
            problem = rule(value)
            if problem:
                raise ValueError(problem)
        return value

    return check


def _hyperpod_instance_type(value: str) -> str:
    """An ``instance_type`` field validator: a HyperPod (``ml.*``) type the catalogue knows (or the file
    declares)."""
    _raise_if(hyperpod_instance_type_name_problem(value))
    if instance_type_problem(value.removeprefix("ml.")):
        raise ValueError(_undeclared(value))
    try:
        lookup_hyperpod(value, field="instance_type")
    except ConfigurationError as error:
        raise ValueError(str(error).removeprefix("instance_type: ")) from None
    return value


def _hyperpod_any_type(value: str) -> str:
    """An ``instance_type`` field validator of a HyperPod group that may be any type (a controller or login
    group): spelt as SageMaker spells it; workers are checked against the catalogue by their section."""
    _raise_if(hyperpod_instance_type_name_problem(value) or hyperpod_offer_problem(value))
    return value


def _capacity_for(orchestrator: CapacityOrchestrator) -> Callable[[Any], Any]:
    """A ``capacity`` field validator: the section's form must be one ``orchestrator`` offers."""

    def check(value: CapacityConfig | None) -> CapacityConfig | None:
        return None if value is None else value.checked_for(orchestrator)

    return check


def _is_number(annotation: Any) -> bool:
    """Whether a field's type is int or float (possibly Optional or Annotated)."""
    if annotation in (int, float):
        return True
    return any(_is_number(argument) for argument in get_args(annotation) if argument is not type(None))


class CapacityConfig(_Model):
    """``capacity`` of a queue, compute resource, nodegroup or instance group: where its instances come from.

    ``type: capacity-block`` with ``reservation_id``, ``type: reservation`` with ``reservation_id`` or
    ``resource_group_arn``, ``type: training-plan`` with ``training_plan_arn`` (HyperPod), or ``on-demand``
    / ``spot``. See :class:`training_clusters.model.capacity.Capacity`.
    """

    type: Annotated[CapacityKind, _FileChoice(CapacityKind)]
    reservation_id: str | None = Field(default=None, description="cr-... of a reservation or Capacity Block.")
    resource_group_arn: str | None = Field(default=None, description="A resource group of reservations.")
    targeted: bool = Field(
        default=True, description="Reservation only: launch only into it (true) or use it as open (false)."
    )
    in_placement_group: bool = Field(
        default=False,
        description="Reservation only: it was created in the environment's cluster placement group, so "
        "instances keep using that group. Default: false (the placement group is left out).",
    )
    training_plan_arn: str | None = Field(default=None, description="A SageMaker training plan (HyperPod).")

    @model_validator(mode="after")
    def _a_capacity(self) -> CapacityConfig:
        self.to_capacity()  # its own rules, with their messages
        return self

    def to_capacity(self) -> Capacity:
        """The :class:`~training_clusters.model.capacity.Capacity` this section describes."""
        try:
            return Capacity(
                self.type,
                reservation_id=self.reservation_id,
                resource_group_arn=self.resource_group_arn,
                targeted=self.targeted,
                in_placement_group=self.in_placement_group,
                training_plan_arn=self.training_plan_arn,
            )
        except ConfigurationError as error:
            raise ValueError(str(error)) from None

    def checked_for(self, orchestrator: CapacityOrchestrator) -> CapacityConfig:
        """This section, when ``orchestrator`` supports its capacity (else a ValueError saying why)."""
        _raise_if(self.to_capacity().problem_for(orchestrator))
        return self


def stated_capacity(section: CapacityConfig | None) -> Capacity | None:
    """A ``capacity`` section as the :class:`~training_clusters.model.capacity.Capacity` model; None when not given."""
    return None if section is None else section.to_capacity()


class PlacementGroupConfig(_Model):
    """``network.placement_group``: the group compute instances share."""

    strategy: Annotated[PlacementStrategy, _FileChoice(PlacementStrategy)] = PlacementStrategy.CLUSTER
    partitions: Annotated[int, Field(ge=1, le=7)] | None = None


class NetworkConfig(_Model):
    """``network``: the VPC."""

    cidr: str = "10.0.0.0/16"
    nat_gateways: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="NAT gateways (one per AZ at most). Default: 1, or 0 with endpoint_only."
    )
    endpoint_only: bool = Field(default=False, description="No NAT: reach AWS through VPC endpoints only.")
    placement_availability_zone: str | None = Field(
        default=None,
        description="AZ of the compute placement group and FSx. Default: the first of availability_zones.",
    )
    flow_logs_retention_days: int = 365
    placement_group: PlacementGroupConfig = PlacementGroupConfig()

    @field_validator("flow_logs_retention_days")
    @classmethod
    def _retention_period(cls, value: int) -> int:
        problem = cloudwatch_retention_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _nat_needs_a_way_out(self) -> NetworkConfig:
        problem = nat_gateways_problem(self.nat_gateways, self.endpoint_only)
        if problem:
            raise ValueError(f"nat_gateways {problem}")
        return self


class DataRepositoryConfig(_Model):
    """``storage.lustre.data_repository``: link an S3 prefix to a path of the file system."""

    bucket_name: str = Field(description="Existing bucket holding datasets / receiving checkpoints.")
    prefix: str = ""
    file_system_path: str = "/"
    auto_import: bool = True
    auto_export: bool = True

    _file_system_path = field_validator("file_system_path")(_follows(file_system_path_problem))
    _prefix = field_validator("prefix")(_follows(s3_prefix_problem))

    @field_validator("bucket_name")
    @classmethod
    def _bucket_name_shape(cls, value: str) -> str:
        if not _BUCKET_NAME.fullmatch(value) or ".." in value:
            raise ValueError(
                "must be an S3 bucket name: 3-63 lowercase letters, digits, dots and hyphens, starting and "
                f"ending with a letter or digit, got {excerpt(value)}"
            )
        return value


class LustreConfig(_Model):
    """``storage.lustre``: the shared FSx for Lustre file system."""

    deployment_type: Annotated[LustreDeploymentType, _FileChoice(LustreDeploymentType)] = (
        LustreDeploymentType.SCRATCH_2
    )
    storage_capacity_gib: int = LUSTRE_FIRST_STEP_GIB
    per_unit_storage_throughput_mbps: int | None = None
    mount_dir: str = Field(
        default="/fsx",
        max_length=4096,
        description="Where every node mounts it: an absolute directory, not a system folder (/etc, /home, /opt/slurm ...).",
    )
    data_repository: DataRepositoryConfig | None = None
    removal_policy: Annotated[RemovalPolicy, _FileChoice(RemovalPolicy)] = RemovalPolicy.RETAIN
    backup_retention_days: int | None = Field(
        default=None,
        description=(
            f"Days FSx keeps daily automatic backups (05:00 UTC), 0 (off) to {MAX_BACKUP_RETENTION_DAYS}. "
            f"Default: {DEFAULT_BACKUP_RETENTION_DAYS} for PERSISTENT_2; not allowed for SCRATCH_2."
        ),
    )

    root_squash: bool = Field(
        default=False,
        description=(
            "Root on every client acts as nobody (65534:65534) on the file system. Default: false, and root on "
            "any client reads and writes every file. Only for eks and hyperpod_eks (pods, through the CSI "
            "driver): the Slurm flavors' node scripts write here as root. A new file system's root is root's "
            "(0755): with root squash, folders are made once from a client in root_squash_exempt_nids."
        ),
    )
    root_squash_exempt_nids: list[str] = Field(
        default_factory=list,
        description="Clients root squash does not apply to (FSx NoSquashNids, e.g. 10.0.1.6@tcp), at most 64.",
    )

    @model_validator(mode="after")
    def _exempt_nids_need_root_squash(self) -> LustreConfig:
        if self.root_squash_exempt_nids and not self.root_squash:
            raise ValueError("root_squash_exempt_nids applies only with root_squash: true")
        if len(self.root_squash_exempt_nids) > MAX_NO_SQUASH_NIDS:
            raise ValueError(
                f"root_squash_exempt_nids must hold at most {MAX_NO_SQUASH_NIDS} NIDs, "
                f"got {len(self.root_squash_exempt_nids)}"
            )
        for nid in self.root_squash_exempt_nids:
            problem = no_squash_nid_problem(nid)
            if problem:
                raise ValueError(f"root_squash_exempt_nids {problem}")
        return self

    @model_validator(mode="after")
    def _backups_match_type(self) -> LustreConfig:
        problem = lustre_backup_retention_problem(self.deployment_type, self.backup_retention_days)
        if problem:
            raise ValueError(f"backup_retention_days {problem}")
        return self

    @model_validator(mode="after")
    def _capacity_steps(self) -> LustreConfig:
        problem = lustre_capacity_problem(self.deployment_type, self.storage_capacity_gib)
        if problem:
            raise ValueError(f"storage_capacity_gib {problem}")
        return self

    _mount_dir = field_validator("mount_dir")(_follows(mount_dir_problem))

    @model_validator(mode="after")
    def _throughput_matches_type(self) -> LustreConfig:
        problem = lustre_throughput_problem(self.deployment_type, self.per_unit_storage_throughput_mbps)
        if problem:
            raise ValueError(f"per_unit_storage_throughput_mbps {problem}")
        return self


class StorageConfig(_Model):
    """``storage``: what every node mounts."""

    lustre: LustreConfig | None = LustreConfig()


# --- HyperPod section ---


class HyperPodInstanceGroupConfig(_Model):
    """``hyperpod.instance_groups[]``: one HyperPod instance group."""

    name: str
    instance_type: str = Field(description="HyperPod instance type with the ml. prefix, e.g. ml.p5.48xlarge")
    count: Annotated[int, Field(ge=1, json_schema_extra={"maximum": hyperpod_rules.MAX_INSTANCE_COUNT})] = 1
    role: Annotated[NodeRole, _FileChoice(NodeRole)] = NodeRole.WORKER
    partition: str | None = Field(default=None, description="Slurm partition; required for workers.")
    threads_per_core: int = Field(default=1, description="1 (hyper-threading off) or 2.")
    extra_volume_gib: int | None = Field(default=None, description="Extra EBS volume at /opt/sagemaker.")
    root_volume_gib: int | None = Field(
        default=None, description="Root volume size, 100-16384. Default: HyperPod's root volume size."
    )
    image_id: str | None = Field(
        default=None, description="A custom AMI built from a HyperPod AMI. Default: HyperPod's public AMI."
    )
    deep_health_checks: list[Annotated[DeepHealthCheck, _FileChoice(DeepHealthCheck)]] | None = Field(
        default=None, description="Default: both checks on GPU/Trainium groups, none on CPU groups."
    )
    capacity: CapacityConfig | None = Field(
        default=None, description="on-demand or training-plan (training_plan_arn). Default: on-demand."
    )

    _hyperpod_capacity = field_validator("capacity")(_capacity_for(CapacityOrchestrator.HYPERPOD))

    _name = field_validator("name")(_follows(hyperpod_rules.instance_group_name_problem))
    _count = field_validator("count")(_follows(hyperpod_rules.instance_count_problem))
    _partition_name = field_validator("partition")(_follows(hyperpod_rules.partition_name_problem))

    _image_id = field_validator("image_id")(_follows(hyperpod_rules.image_id_problem))

    _hyperpod_type = field_validator("instance_type")(_hyperpod_any_type)

    @model_validator(mode="after")
    def _workers_catalogued(self) -> HyperPodInstanceGroupConfig:
        """Workers run the jobs: their accelerators and EFA come from the catalogue (controller and login
        groups may be any type HyperPod sells)."""
        if self.role is NodeRole.WORKER:
            try:
                _hyperpod_instance_type(self.instance_type)
            except ValueError as error:
                raise _FieldProblem("instance_type", str(error)) from None
        return self


class HyperPodConfig(_Model):
    """``hyperpod``: a SageMaker HyperPod cluster orchestrated by Slurm."""

    cluster_name: str
    node_recovery: Annotated[NodeRecovery, _FileChoice(NodeRecovery)] = NodeRecovery.AUTOMATIC
    instance_groups: Annotated[list[HyperPodInstanceGroupConfig], Field(min_length=1)]
    enable_enroot_pyxis: bool = True
    enable_observability: bool = False
    enable_docker: bool = Field(
        default=False,
        description="Docker on every node (the DCGM exporter of enable_observability needs it).",
    )
    enable_pam_slurm_adopt: bool = Field(
        default=False, description="Users reach a worker over SSH only while they hold a job on it."
    )
    team_logins_on_controller: bool = Field(
        default=False,
        description="Let the team's users SSH into the controller too. Default: only root and ubuntu log in "
        "there (it holds Slurm's state and reads the accounting secret).",
    )
    download_sha256: dict[str, str] = Field(
        default_factory=dict,
        description="SHA-256 of what the lifecycle scripts download (https:// URL: 64 hex digits: enroot's "
        "packages, pyxis' and Slurm's sources, or your mirror's copies); a pinned download with other bytes "
        "fails the node. Default: none (downloads are fetched over HTTPS, unverified, with a warning).",
    )
    accounting: Annotated[HyperPodAccounting, _FileChoice(HyperPodAccounting)] = Field(
        default=HyperPodAccounting.NONE,
        description="Slurm accounting (slurmdbd on the controller): none, external (an Aurora MySQL database "
        "made with the environment, kept when it is destroyed) or local (MariaDB on the controller).",
    )
    node_provisioning_mode: Annotated[NodeProvisioningMode, _FileChoice(NodeProvisioningMode)] | None = Field(
        default=None,
        description="continuous: nodes join as they come (needs slurm_config api). Default: all-or-nothing "
        "provisioning.",
    )
    slurm_config: Annotated[SlurmConfigMode, _FileChoice(SlurmConfigMode)] | None = Field(
        default=None,
        description="api: HyperPod configures Slurm from each instance group's SlurmConfig and mounts FSx, our "
        "lifecycle script adds the rest (OnInitComplete); legacy: provisioning_parameters.json and our "
        "on_create.sh, for a cluster deployed by an earlier version of this library (HyperPod refuses "
        "SlurmConfig beside that file). Default: api, with a synth warning until it is stated.",
    )
    slurm_config_strategy: Annotated[SlurmConfigStrategy, _FileChoice(SlurmConfigStrategy)] | None = Field(
        default=None,
        description="What an update does with slurm.conf edited on the controller (api only): Managed fails "
        "it, Overwrite discards the edits, Merge keeps them. Not with continuous provisioning (HyperPod merges). "
        "Default: Merge (our lifecycle keeps its own slurm.conf keys).",
    )

    @property
    def api_driven(self) -> bool:
        """Whether HyperPod configures Slurm from the instance groups (``slurm_config`` api, the default)."""
        return self.slurm_config is not SlurmConfigMode.LEGACY

    @model_validator(mode="after")
    def _slurm_config_combinations(self) -> HyperPodConfig:
        continuous = self.node_provisioning_mode is NodeProvisioningMode.CONTINUOUS
        _raise_at(
            "node_provisioning_mode", hyperpod_rules.continuous_slurm_problem(self.api_driven, continuous)
        )
        strategy = None if self.slurm_config_strategy is None else self.slurm_config_strategy.value
        _raise_at(
            "slurm_config_strategy",
            hyperpod_rules.slurm_config_strategy_problem(strategy, self.api_driven, continuous),
        )
        _raise_at(
            "accounting",
            hyperpod_rules.api_accounting_problem(self.accounting.value, self.api_driven, continuous),
        )
        return self

    @model_validator(mode="after")
    def _nodes_fit_the_subnet(self) -> HyperPodConfig:
        _raise_if_crowded(
            [(f"instance_groups.{i}.count", g.count) for i, g in enumerate(self.instance_groups)]
        )
        return self

    _cluster_name = field_validator("cluster_name")(_follows(hyperpod_rules.cluster_name_problem))

    def stated_capacities(self) -> list[tuple[str, CapacityConfig | None]]:
        """(field, section) of every ``capacity`` this section states, in file order."""
        return [(f"hyperpod.instance_groups.{i}", g.capacity) for i, g in enumerate(self.instance_groups)]


# --- ParallelCluster section ---


def _raise_if(problem: str | None, field: str = "") -> None:
    if problem:
        raise ValueError(f"{field} {problem}" if field else problem)


class _FieldProblem(ValueError):
    """A model validator's problem with one field of its model (``network.cidr``): reported at that field's
    path and line, not at the model's."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = tuple(int(part) if part.isdigit() else part for part in field.split("."))


def _raise_at(field: str, problem: str | None) -> None:
    if problem:
        raise _FieldProblem(field, problem)


def _raise_if_crowded(counts: list[tuple[str, int]], *, subnets: int = 1) -> None:
    """Refuse node counts (``(field, count)``, all in the same subnets) that need more addresses than
    ``subnets`` of the environment's private subnets have, naming the largest."""
    if counts:
        field, count = max(counts, key=lambda item: item[1])
        others = sum(n for _, n in counts) - count
        _raise_at(field, nodes_fit_problem(count, others, subnets=subnets))


def _catalogued(value: str) -> str:
    """An ``instance_type`` field validator for nodes whose accelerators or EFA the library configures: a type
    the catalogue knows, or one the file declares under ``instance_types``."""
    _raise_if(instance_type_name_problem(value) or (instance_type_problem(value) and _undeclared(value)))
    return value


def _undeclared(name: str) -> str:
    return undeclared_type_problem(name)


def _any_type(value: str) -> str:
    """An ``instance_type`` field validator for controller, login, head and system nodes: any type EC2 sells,
    spelt as EC2 spells it (no facts needed)."""
    _raise_if(instance_type_name_problem(value))
    return value


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
        if efa and self.placement is QueuePlacement.NONE:
            raise ValueError(
                f"placement is none, but compute resource '{efa[0]}' uses EFA, which needs a placement group; "
                "use shared or managed"
            )
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
        if self.key_name is None:
            raise ValueError("ssh_allowed_ips applies only with key_name (without a key pair, use SSM)")
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
            if self.key_name is None:
                raise ValueError("ssh_allowed_ips applies only with key_name (without a key pair, use SSM)")
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
        total = sum(len(q.compute_resources) for q in value)
        if total > pcluster_rules.MAX_COMPUTE_RESOURCES_PER_CLUSTER:
            raise ValueError(
                f"hold {total} compute resources in all; ParallelCluster allows at most "
                f"{pcluster_rules.MAX_COMPUTE_RESOURCES_PER_CLUSTER} per cluster"
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


class EksSystemNodegroupConfig(_Model):
    """``eks.system_nodegroup``: nodes for CoreDNS, controllers and add-ons."""

    instance_type: str = "t3.large"
    size: Annotated[int, Field(ge=1)] = 2

    _instance_type = field_validator("instance_type")(_any_type)


class EksEfaNodegroupConfig(_Model):
    """``eks.efa_nodegroups[]``: EFA instances in the placement group."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    instance_type: str
    size: Annotated[int, Field(ge=1)]
    efa_interfaces: int | None = Field(default=None, description="Default: the instance's maximum.")
    efa_interface_type: Annotated[EfaInterfaceType, _FileChoice(EfaInterfaceType)] = EfaInterfaceType.EFA
    capacity: CapacityConfig | None = Field(
        default=None,
        description="Where the nodes come from: on-demand, spot, a reservation or a capacity-block. "
        "Default: on-demand.",
    )
    labels: Annotated[dict[str, str], AfterValidator(kubernetes_labels)] = Field(default_factory=dict)

    _instance_type = field_validator("instance_type")(_catalogued)

    _eks_capacity = field_validator("capacity")(_capacity_for(CapacityOrchestrator.EKS))

    def node_capacity(self) -> Capacity:
        """``capacity`` on the model: On-Demand when not given."""
        return Capacity.on_demand() if self.capacity is None else self.capacity.to_capacity()

    @model_validator(mode="after")
    def _has_efa(self) -> EksEfaNodegroupConfig:
        problem = efa_nodegroup_problem(CATALOG[self.instance_type])
        if problem:
            raise ValueError(f"instance_type {problem}")
        if self.efa_interfaces is not None:
            _raise_at(
                "efa_interfaces", efa_interfaces_problem(CATALOG[self.instance_type], self.efa_interfaces)
            )
        return self


class EksGpuNodegroupConfig(_Model):
    """``eks.gpu_nodegroups[]``: GPU instances without EFA (sharing, inference, notebooks)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    instance_type: str
    size: Annotated[int, Field(ge=1)]
    labels: Annotated[dict[str, str], AfterValidator(kubernetes_labels)] = Field(default_factory=dict)
    gpu_taint: bool = True
    capacity: CapacityConfig | None = Field(
        default=None,
        description="on-demand, spot, a reservation or a capacity-block; reserved capacity puts the nodes "
        "in the placement subnet (its AZ must be the reservation's). Default: on-demand.",
    )
    mig: str | dict[str, Annotated[int, Field(ge=1, le=7)]] | None = Field(
        default=None,
        description="Partition every GPU with MIG (A100, H100, H200, B200): all-<profile> (e.g. all-1g.10gb), "
        "all-balanced, or {profile: instances per GPU}. Needs addons.nvidia_device_plugin.mig_strategy "
        "single or mixed. Default: whole GPUs.",
    )

    _instance_type = field_validator("instance_type")(_catalogued)

    _eks_capacity = field_validator("capacity")(_capacity_for(CapacityOrchestrator.EKS))

    def node_capacity(self) -> Capacity:
        """``capacity`` on the model (On-Demand when omitted)."""
        return Capacity.on_demand() if self.capacity is None else self.capacity.to_capacity()

    @property
    def mig_layout(self) -> MigLayout | None:
        """``mig`` as the constructs' option (None for whole GPUs)."""
        return None if self.mig is None else MigLayout.parse(self.mig)

    @model_validator(mode="after")
    def _mig_layout_fits_the_gpu(self) -> EksGpuNodegroupConfig:
        if self.mig is None:
            return self
        try:
            layout = MigLayout.parse(self.mig)
        except ConfigurationError as error:
            raise ValueError(f"mig {error}") from None
        problem = mig_layout_problem(CATALOG[self.instance_type], layout)
        if problem:
            raise ValueError(f"mig {problem}")
        return self


class EksTimeSlicingConfig(_Model):
    """``eks.addons.nvidia_device_plugin.time_slicing``."""

    replicas: int
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = True


class EksMpsConfig(_Model):
    """``eks.addons.nvidia_device_plugin.mps``."""

    replicas: int


class EksDevicePluginConfig(_Model):
    """``eks.addons.nvidia_device_plugin``: GPU sharing is time_slicing, mps or a MIG strategy, one at most."""

    enabled: bool = True
    time_slicing: EksTimeSlicingConfig | None = None
    mps: EksMpsConfig | None = None
    mig_strategy: Annotated[MigStrategy, _FileChoice(MigStrategy)] = MigStrategy.NONE

    @model_validator(mode="after")
    def _one_way_of_sharing(self) -> EksDevicePluginConfig:
        problem = gpu_sharing_problem(self.sharing_time_slicing, self.sharing_mps, self.mig_strategy)
        if problem:
            raise ValueError(f"{problem[0]} {problem[1]}")
        return self

    @property
    def sharing_time_slicing(self) -> TimeSlicing | None:
        """``time_slicing`` as the construct's option."""
        ts = self.time_slicing
        if ts is None:
            return None
        return TimeSlicing(ts.replicas, ts.rename_by_default, ts.fail_requests_greater_than_one)

    @property
    def sharing_mps(self) -> Mps | None:
        """``mps`` as the construct's option."""
        return None if self.mps is None else Mps(self.mps.replicas)


class EksMonitoringConfig(_Model):
    """``eks.addons.gpu_monitoring``: GPU Operator with DCGM exporter, optional Prometheus and Grafana."""

    prometheus: bool = True
    grafana: bool = True


class EksAddonsConfig(_Model):
    """``eks.addons``."""

    nvidia_device_plugin: EksDevicePluginConfig = EksDevicePluginConfig()
    efa_device_plugin: bool = Field(default=True, description="Installed when there are EFA nodegroups.")
    neuron_device_plugin: bool = Field(
        default=True, description="AWS Neuron's device plugin, installed when a nodegroup has Trainium."
    )
    fsx_csi_driver: bool = Field(default=True, description="Installed when storage.lustre is set.")
    fsx_csi_driver_version: str | None = Field(
        default=None,
        pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$",
        description="Pin the aws-fsx-csi-driver add-on (e.g. v1.6.0-eksbuild.1). Default: EKS's default.",
    )
    gpu_monitoring: EksMonitoringConfig | None = None
    mpi_operator: bool = Field(
        default=True, description="Kubeflow MPI Operator (runs MPIJobs such as the NCCL acceptance job)."
    )
    kueue: bool = Field(
        default=True,
        description="Kueue: queues, GPU quotas and all-or-nothing admission of Jobs, MPIJobs, JobSets and TrainJobs.",
    )
    kubeflow_trainer: bool = Field(
        default=True, description="Kubeflow Trainer v2 (TrainJob on JobSet) and JobSet, its dependency."
    )
    node_monitoring_agent: bool = Field(
        default=True,
        description="The eks-node-monitoring-agent add-on (GPU XID/DCGM, kernel and network problems as node "
        "conditions, acted on by node auto-repair), installed when there are EFA or GPU nodegroups.",
    )


class EksNcclTestConfig(_Model):
    """``eks.nccl_test``: the MPIJob written for each EFA nodegroup, optionally applied by the stack."""

    enabled: bool = True
    image: str = Field(
        default=DEFAULT_NCCL_TESTS_IMAGE,
        min_length=1,
        max_length=512,
        pattern=r"^\S+$",
        description="Container image reference (registry/repository:tag or @digest) with NCCL tests and EFA.",
    )
    apply: bool = Field(
        default=False,
        description="Apply the MPIJob at deploy time (it runs once the nodes are up). Needs addons.mpi_operator.",
    )


class EksQueuesConfig(_Model):
    """``eks.queues``: Kueue's ClusterQueue over the GPU nodegroups (quota: what their nodes advertise) and
    a LocalQueue in each team namespace. Needs addons.kueue; made whenever Kueue and a GPU nodegroup are."""

    cluster_queue: str = Field(default="training", description="Name of the ClusterQueue.")
    local_queue: str = Field(
        default="training",
        description="Name of each namespace's LocalQueue: jobs' kueue.x-k8s.io/queue-name.",
    )
    namespaces: list[str] = Field(
        default_factory=lambda: ["default"],
        min_length=1,
        description="Team namespaces (created unless default), each with a LocalQueue.",
    )
    cohort: str | None = Field(default=None, description="Share unused quota with the queues of this cohort.")
    within_cluster_queue: Annotated[QueuePreemption, _FileChoice(QueuePreemption)] = QueuePreemption.NEVER
    reclaim_within_cohort: Annotated[QueuePreemption, _FileChoice(QueuePreemption)] = QueuePreemption.NEVER
    borrow_within_cohort: Annotated[QueuePreemption, _FileChoice(QueuePreemption)] = QueuePreemption.NEVER
    lending_limit_percent: int | None = Field(
        default=None, description="Lend at most this share of each quota to the cohort. Default: all."
    )
    borrowing_limit_percent: int | None = Field(
        default=None, description="Borrow at most this share of each quota on top. Default: no limit."
    )
    topology: Annotated[TopologyPlacement, _FileChoice(TopologyPlacement)] = Field(
        default=TopologyPlacement.PREFERRED,
        description="Place a job's GPU pods under one EC2 network node (network-node-layer-3) where the "
        "instance type reports topology: preferred (else as close as they fit), required (else the job "
        "waits), or off.",
    )
    pods_ready_timeout_minutes: int = Field(
        default=10, description="Evict and requeue an admitted job whose pods are not all running by then."
    )
    pod_security: Annotated[PodSecurityLevel, _FileChoice(PodSecurityLevel)] = Field(
        default=PodSecurityLevel.BASELINE,
        description="Pod Security Standards level each team namespace enforces: baseline (no privileged, "
        "hostPath or hostNetwork pods) or restricted (also non-root, no capabilities); warn and audit are "
        "at restricted.",
    )
    team_roles: dict[str, str] = Field(
        default_factory=dict,
        description="An IAM role ARN per team namespace: its sessions get an EKS access entry in the group "
        "training-clusters:team:<namespace>, which holds edit in that namespace only.",
    )

    _names = field_validator("cluster_queue", "local_queue")(_follows(queue_rules.kubernetes_name_problem))
    _cohort = field_validator("cohort")(_follows(queue_rules.cohort_name_problem))
    _limits = field_validator("lending_limit_percent", "borrowing_limit_percent")(
        _follows(queue_rules.limit_percent_problem)
    )
    _timeout = field_validator("pods_ready_timeout_minutes")(_follows(queue_rules.pods_ready_timeout_problem))

    @field_validator("namespaces")
    @classmethod
    def _team_namespaces(cls, namespaces: list[str]) -> list[str]:
        for namespace in namespaces:
            _raise_if(
                queue_rules.kubernetes_name_problem(namespace)
                or queue_rules.team_namespace_problem(namespace)
            )
        _raise_if(queue_rules.unique_names_problem(namespaces))
        return namespaces

    @model_validator(mode="after")
    def _preemption_choices(self) -> EksQueuesConfig:
        for field in queue_rules.PREEMPTION_CHOICES:
            problem = queue_rules.preemption_problem(field, getattr(self, field))
            if problem:
                raise _FieldProblem(field, problem)
        problem = queue_rules.borrow_needs_reclaim_problem(
            self.reclaim_within_cohort, self.borrow_within_cohort
        )
        if problem:
            raise _FieldProblem("borrow_within_cohort", problem)
        return self

    @model_validator(mode="after")
    def _team_roles_of_team_namespaces(self) -> EksQueuesConfig:
        for namespace, role_arn in self.team_roles.items():
            problem = queue_rules.team_role_problem(namespace, role_arn, self.namespaces)
            if problem:
                raise _FieldProblem(*problem)
        return self

    @model_validator(mode="after")
    def _cohort_options_need_a_cohort(self) -> EksQueuesConfig:
        problem = queue_rules.cohort_needed_problem(
            self.cohort,
            reclaim_within_cohort=self.reclaim_within_cohort,
            borrow_within_cohort=self.borrow_within_cohort,
            lending_limit_percent=self.lending_limit_percent,
            borrowing_limit_percent=self.borrowing_limit_percent,
        )
        if problem:
            raise _FieldProblem(*problem)
        return self


class EksConfig(_Model):
    """``eks``: an EKS cluster with EFA and GPU nodegroups and GPU add-ons."""

    cluster_name: str | None = Field(default=None, pattern=r"^[a-zA-Z][a-zA-Z0-9_-]{0,99}$")
    admin_role_arn: str | None = Field(default=None, description="Role made cluster admin (access entry).")
    admin_role_name: str | None = Field(
        default=None, pattern=r"^[\w+=,.@-]{1,64}$", description="Same, a role of the deploying account."
    )
    public_access_cidrs: list[str] | None = Field(
        default=None, description="Open the API endpoint to these ranges only. Default: private endpoint."
    )
    access_mode: Annotated[AccessMode, _FileChoice(AccessMode)] = AccessMode.API
    system_nodegroup: EksSystemNodegroupConfig = EksSystemNodegroupConfig()
    efa_nodegroups: list[EksEfaNodegroupConfig] = Field(default_factory=list)
    gpu_nodegroups: list[EksGpuNodegroupConfig] = Field(default_factory=list)
    addons: EksAddonsConfig = EksAddonsConfig()
    nccl_test: EksNcclTestConfig = EksNcclTestConfig()
    queues: EksQueuesConfig = EksQueuesConfig()

    _public_ranges = field_validator("public_access_cidrs")(_follows(public_access_cidrs_problem))

    @model_validator(mode="after")
    def _one_admin_role(self) -> EksConfig:
        if self.admin_role_arn is not None and self.admin_role_name is not None:
            raise ValueError("admin_role_arn and admin_role_name name the same thing; give one of them")
        return self

    @model_validator(mode="after")
    def _queues_need_kueue_and_gpus(self) -> EksConfig:
        if "queues" not in self.model_fields_set:
            return self
        if not self.addons.kueue:
            raise _FieldProblem(
                "queues", "needs addons.kueue: true (Kueue runs the queues), got kueue: false"
            )
        if not self.queue_nodegroups:
            raise _FieldProblem("queues", "needs a GPU nodegroup to queue for; the eks section has none")
        return self

    @model_validator(mode="after")
    def _required_topology_is_reachable(self) -> EksConfig:
        types = [(g.name, g.instance_type) for g in self.efa_nodegroups]
        types += [(g.name, g.instance_type) for g in self.gpu_nodegroups]
        queued = self.queue_nodegroups
        reporting = [t for name, t in types if name in queued and CATALOG[t].network_node_layers]
        _raise_at("queues.topology", queue_rules.required_topology_problem(self.queues.topology, reporting))
        return self

    @property
    def team_namespaces(self) -> list[str]:
        """The namespaces that are teams': the queues' (the stack makes them with the queues, which need Kueue
        and a GPU nodegroup), else ``default``."""
        return list(self.queues.namespaces) if self.addons.kueue and self.queue_nodegroups else ["default"]

    @property
    def queue_nodegroups(self) -> list[str]:
        """The nodegroups the queues cover: those with NVIDIA GPUs."""
        names = [(g.name, g.instance_type) for g in self.efa_nodegroups]
        names += [(g.name, g.instance_type) for g in self.gpu_nodegroups]
        return [name for name, instance_type in names if CATALOG[instance_type].is_gpu]

    @model_validator(mode="after")
    def _applied_job_needs_operator(self) -> EksConfig:
        if self.nccl_test.apply and not (self.nccl_test.enabled and self.addons.mpi_operator):
            raise ValueError(
                "nccl_test.apply: true needs nccl_test.enabled: true and addons.mpi_operator: true "
                f"(got enabled: {str(self.nccl_test.enabled).lower()}, "
                f"mpi_operator: {str(self.addons.mpi_operator).lower()})"
            )
        return self

    @model_validator(mode="after")
    def _unique_nodegroup_names(self) -> EksConfig:
        names = [g.name for g in self.efa_nodegroups] + [g.name for g in self.gpu_nodegroups]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"nodegroup names must be unique, got {', '.join(repeated)} more than once")
        return self

    @model_validator(mode="after")
    def _mig_strategy_matches_the_layouts(self) -> EksConfig:
        plugin = self.addons.nvidia_device_plugin
        if not plugin.enabled:
            return self
        layouts = {g.name: g.mig_layout for g in self.gpu_nodegroups if g.mig_layout is not None}
        problem = mig_strategy_problem(plugin.mig_strategy, layouts)
        if problem:
            raise ValueError(f"addons.nvidia_device_plugin.mig_strategy {problem}")
        return self

    def stated_capacities(self) -> list[tuple[str, CapacityConfig | None]]:
        """(field, section) of every ``capacity`` this section states, in file order."""
        return [
            *((f"eks.efa_nodegroups.{i}", g.capacity) for i, g in enumerate(self.efa_nodegroups)),
            *((f"eks.gpu_nodegroups.{i}", g.capacity) for i, g in enumerate(self.gpu_nodegroups)),
        ]


# --- HyperPod on EKS section ---


class HyperPodEksTaintConfig(_Model):
    """``hyperpod_eks.instance_groups[].taints[]``: a Kubernetes taint on every node of the group."""

    key: str
    value: str = ""
    effect: str = Field(default="NoSchedule", description="NoSchedule, PreferNoSchedule or NoExecute.")

    @model_validator(mode="after")
    def _well_formed(self) -> HyperPodEksTaintConfig:
        _raise_if(hyperpod_eks_rules.taint_problem(self.key, self.value, self.effect))
        return self


def _hyperpod_labels(labels: dict[str, str]) -> dict[str, str]:
    kubernetes_labels(labels)
    for key in labels:
        _raise_if(hyperpod_eks_rules.reserved_key_problem(key))
    return labels


class HyperPodEksInstanceGroupConfig(_Model):
    """``hyperpod_eks.instance_groups[]``: HyperPod instances that join the EKS cluster as nodes."""

    name: str
    instance_type: str = Field(description="HyperPod instance type with the ml. prefix, e.g. ml.p5.48xlarge")
    count: Annotated[
        int,
        Field(
            ge=0,
            json_schema_extra={"maximum": hyperpod_rules.MAX_INSTANCE_COUNT},
            description="Nodes of the group: 1 or more; 0 with autoscaling: karpenter (Karpenter adds them).",
        ),
    ] = 1
    max_count: int | None = Field(
        default=None,
        description="With autoscaling: karpenter, the most nodes Karpenter may start in the group (its NodePool's "
        "limit, the queues' quota). Required then, refused otherwise.",
    )
    efa_interface_type: Annotated[EfaInterfaceType, _FileChoice(EfaInterfaceType)] | None = Field(
        default=None,
        description="efa-only: the secondary EFA interfaces take no IP address (types with 2 or more EFA "
        "interfaces). Default: HyperPod's (efa).",
    )
    volume_gib: int | None = Field(
        default=None,
        description="The EBS volume at /opt/sagemaker that holds containerd's and the kubelet's data. Required.",
    )
    root_volume_gib: int | None = Field(default=None, description="Default: HyperPod's root volume size.")
    threads_per_core: int = Field(default=1, description="1 (hyper-threading off) or 2.")
    image_id: str | None = Field(default=None, description="A custom AMI from HyperPod's EKS AMI.")
    deep_health_checks: list[Annotated[DeepHealthCheck, _FileChoice(DeepHealthCheck)]] | None = Field(
        default=None, description="Default: both checks on GPU/Trainium groups, none on CPU groups."
    )
    capacity: CapacityConfig | None = Field(
        default=None, description="on-demand or training-plan (training_plan_arn). Default: on-demand."
    )
    labels: Annotated[dict[str, str], AfterValidator(_hyperpod_labels)] = Field(
        default_factory=dict, description="Kubernetes labels on every node of the group."
    )
    taints: list[HyperPodEksTaintConfig] = Field(
        default_factory=list, description="Kubernetes taints on every node of the group."
    )

    _hyperpod_capacity = field_validator("capacity")(_capacity_for(CapacityOrchestrator.HYPERPOD))
    _name = field_validator("name")(_follows(hyperpod_rules.instance_group_name_problem))
    _count = field_validator("count")(_follows(hyperpod_rules.instance_count_problem))
    _image_id = field_validator("image_id")(_follows(hyperpod_rules.image_id_problem))

    @property
    def nodes(self) -> int:
        """The nodes the group may have: ``count``, or ``max_count`` when Karpenter scales it."""
        return self.count if self.max_count is None else self.max_count

    @model_validator(mode="after")
    def _volume_given(self) -> HyperPodEksInstanceGroupConfig:
        _raise_at("volume_gib", hyperpod_eks_rules.volume_problem(self.volume_gib))
        return self

    _hyperpod_type = field_validator("instance_type")(_hyperpod_instance_type)


class HyperPodEksAddonsConfig(_Model):
    """``hyperpod_eks.addons``: HyperPod's agent and the device plugins are always installed; these are optional."""

    mpi_operator: bool = Field(default=True, description="Kubeflow MPI Operator (MPIJob), before the nodes.")
    kueue: bool = Field(
        default=True,
        description="Kueue before the nodes, and its ClusterQueue over the GPU instance groups (quota: what "
        "their nodes advertise) with a LocalQueue in each of queues.namespaces.",
    )
    kubeflow_trainer: bool = Field(
        default=True,
        description="Kubeflow Trainer v2 and JobSet before the nodes, and per EFA GPU instance group the "
        "TrainJob runtimes torchrun-efa-<group> and mpi-efa-<group> (on its Schedulable nodes).",
    )
    fsx_csi_driver: bool = Field(default=True, description="Installed when storage.lustre is set.")
    fsx_csi_driver_version: str | None = Field(
        default=None,
        pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$",
        description="Pin the aws-fsx-csi-driver add-on (e.g. v1.6.0-eksbuild.1). Default: EKS's default.",
    )
    vpc_cni_version: str = Field(
        default=HYPERPOD_VPC_CNI_VERSION,
        description="The vpc-cni add-on, v1.18.3 or newer (HyperPod's minimum).",
    )

    _vpc_cni = field_validator("vpc_cni_version")(_follows(hyperpod_eks_rules.vpc_cni_version_problem))


class HyperPodEksNcclTestConfig(_Model):
    """``hyperpod_eks.nccl_test``: the MPIJob `training-clusters acceptance` writes for each EFA GPU group."""

    enabled: bool = True
    image: str = Field(
        default=DEFAULT_NCCL_TESTS_IMAGE,
        min_length=1,
        max_length=512,
        pattern=r"^\S+$",
        description="Container image reference (registry/repository:tag or @digest) with NCCL tests and EFA.",
    )


# --- HyperPod task governance (hyperpod_eks.task_governance) ---


class TaskGovernancePriorityClassConfig(_Model):
    """``hyperpod_eks.task_governance.priority_classes[]``: a class of tasks; jobs name it in the label
    ``kueue.x-k8s.io/priority-class: <name>-priority``."""

    name: str
    weight: int = Field(description="0 to 100: a higher weight is admitted first and may preempt lower ones.")

    _name = field_validator("name")(_follows(governance_rules.priority_class_name_problem))
    _weight = field_validator("weight")(_follows(governance_rules.weight_problem))


class TaskGovernancePartitionConfig(_Model):
    """``...quota[].accelerator_partition``: MIG partitions of the instance type's GPUs."""

    type: str = Field(description="mig-<profile> of a profile the type's GPUs have, e.g. mig-1g.10gb.")
    count: int

    _count = field_validator("count")(_follows(governance_rules.partition_count_problem))


class TaskGovernanceQuotaConfig(_Model):
    """``hyperpod_eks.task_governance.teams[].quota[]``: what the team is allotted of one instance type."""

    instance_type: str = Field(description="The ml. type of one of the cluster's instance groups.")
    count: int | None = Field(default=None, description="Whole instances.")
    accelerators: int | None = Field(default=None, description="GPUs or Trainium devices.")
    vcpu: float | None = None
    memory_gib: float | None = None
    accelerator_partition: TaskGovernancePartitionConfig | None = None

    _amounts = field_validator("count", "accelerators", "vcpu", "memory_gib")(
        _follows(governance_rules.amount_problem)
    )

    @model_validator(mode="after")
    def _allots_something(self) -> TaskGovernanceQuotaConfig:
        _raise_if(
            governance_rules.quota_amount_given_problem(
                count=self.count,
                accelerators=self.accelerators,
                vcpu=self.vcpu,
                memory_gib=self.memory_gib,
                partition_type=None
                if self.accelerator_partition is None
                else self.accelerator_partition.type,
            )
        )
        return self


class TaskGovernanceTeamConfig(_Model):
    """``hyperpod_eks.task_governance.teams[]``: a team, its namespace hyperpod-ns-<name> and its quota."""

    name: str = Field(description="HyperPod makes the namespace hyperpod-ns-<name> and its LocalQueue.")
    quota: list[TaskGovernanceQuotaConfig] = Field(
        default_factory=list, description="What the team is allotted, by instance type (at most 15)."
    )
    fair_share_weight: int | None = Field(
        default=None, description="0 to 100: the team's share of idle compute under fair share. Default: 0."
    )
    sharing: Annotated[ResourceSharingStrategy, _FileChoice(ResourceSharingStrategy)] = Field(
        default=ResourceSharingStrategy.LEND_AND_BORROW,
        description="Lend, DontLend or LendAndBorrow the team's idle quota.",
    )
    borrow_limit_percent: int | None = Field(
        default=None,
        description="1 to 500: idle compute the team may borrow, in percent of its quota (LendAndBorrow). "
        "Default: 50.",
    )
    preempt_team_tasks: Annotated[TeamPreemption, _FileChoice(TeamPreemption)] = Field(
        default=TeamPreemption.LOWER_PRIORITY,
        description="LowerPriority: a pending task evicts the team's own tasks of a lower class; or Never.",
    )
    pod_security: Annotated[PodSecurityLevel, _FileChoice(PodSecurityLevel)] = Field(
        default=PodSecurityLevel.BASELINE,
        description="Pod Security Standards level the team's namespace enforces (warn and audit at restricted).",
    )
    role_arn: str | None = Field(
        default=None,
        description="An IAM role whose sessions act as the team: an EKS access entry in the group "
        "training-clusters:team:hyperpod-ns-<name>, which holds edit in that namespace only.",
    )

    _name = field_validator("name")(_follows(governance_rules.team_name_problem))
    _weight = field_validator("fair_share_weight")(_follows(governance_rules.weight_problem))
    _borrow = field_validator("borrow_limit_percent")(_follows(governance_rules.borrow_limit_problem))
    _quota = field_validator("quota")(
        _follows(lambda quota: governance_rules.quota_resources_count_problem(len(quota)))
    )

    @model_validator(mode="after")
    def _borrow_limit_borrows(self) -> TaskGovernanceTeamConfig:
        _raise_at(
            "borrow_limit_percent",
            governance_rules.borrow_limit_needs_borrowing_problem(self.sharing, self.borrow_limit_percent),
        )
        return self

    @model_validator(mode="after")
    def _role_is_a_role(self) -> TaskGovernanceTeamConfig:
        if self.role_arn is not None and not queue_rules.IAM_ROLE_ARN.fullmatch(self.role_arn):
            raise _FieldProblem(
                "role_arn",
                "must be an IAM role ARN such as arn:aws:iam::111122223333:role/VisionTeam (the role whose "
                f"sessions act as the team), got {excerpt(self.role_arn)}",
            )
        return self


class TaskGovernanceConfig(_Model):
    """``hyperpod_eks.task_governance``: SageMaker HyperPod task governance (its EKS add-on, the cluster policy and
    one compute quota per team) instead of our Kueue and ClusterQueue."""

    addon_version: str = Field(
        default=HYPERPOD_TASK_GOVERNANCE_VERSION,
        description="The amazon-sagemaker-hyperpod-taskgovernance add-on.",
    )
    priority_classes: list[TaskGovernancePriorityClassConfig] = Field(
        default_factory=list, description="At most 10 classes of tasks, each with a weight."
    )
    fair_share: bool = Field(
        default=True, description="Teams borrow idle compute by their fair_share_weight (else first come)."
    )
    idle_resource_sharing: bool = Field(
        default=True, description="Compute no team's quota holds is lent to the teams that borrow."
    )
    teams: Annotated[list[TaskGovernanceTeamConfig], Field(min_length=1)]

    _addon_version = field_validator("addon_version")(_follows(governance_rules.addon_version_problem))

    @field_validator("priority_classes")
    @classmethod
    def _classes(
        cls, value: list[TaskGovernancePriorityClassConfig]
    ) -> list[TaskGovernancePriorityClassConfig]:
        _raise_if(governance_rules.priority_classes_count_problem(len(value)))
        _raise_if(governance_rules.unique_problem([c.name for c in value]))
        return value

    @field_validator("teams")
    @classmethod
    def _teams(cls, value: list[TaskGovernanceTeamConfig]) -> list[TaskGovernanceTeamConfig]:
        _raise_if(governance_rules.unique_problem([t.name for t in value]))
        return value


class HyperPodEksConfig(_Model):
    """``hyperpod_eks``: a SageMaker HyperPod cluster whose nodes join an EKS cluster made with it."""

    cluster_name: str = Field(description="The HyperPod cluster's name.")
    eks_cluster_name: str | None = Field(
        default=None, pattern=r"^[a-zA-Z][a-zA-Z0-9_-]{0,99}$", description="Default: generated."
    )
    kubernetes_version: str = Field(
        default=HYPERPOD_EKS_KUBERNETES_VERSION,
        description="One HyperPod supports that the kubectl layer drives: "
        f"{' or '.join(hyperpod_eks_rules.supported_kubernetes_versions())}. A version past EKS standard support "
        "is a synth warning.",
    )
    admin_role_arn: str | None = Field(default=None, description="Role made cluster admin (access entry).")
    admin_role_name: str | None = Field(
        default=None, pattern=r"^[\w+=,.@-]{1,64}$", description="Same, a role of the deploying account."
    )
    public_access_cidrs: list[str] | None = Field(
        default=None, description="Open the API endpoint to these ranges only. Default: private endpoint."
    )
    access_mode: Annotated[AccessMode, _FileChoice(AccessMode)] = AccessMode.API_AND_CONFIG_MAP
    system_nodegroup: EksSystemNodegroupConfig = EksSystemNodegroupConfig()
    node_recovery: Annotated[NodeRecovery, _FileChoice(NodeRecovery)] = NodeRecovery.AUTOMATIC
    node_provisioning_mode: Annotated[NodeProvisioningMode, _FileChoice(NodeProvisioningMode)] = (
        NodeProvisioningMode.CONTINUOUS
    )
    autoscaling: Annotated[AutoScaler, _FileChoice(AutoScaler)] | None = Field(
        default=None,
        description="karpenter: HyperPod's managed Karpenter scales each instance group from 0 (count: 0) to its "
        "max_count as pods wait. Default: none (each group keeps count nodes).",
    )
    instance_groups: Annotated[list[HyperPodEksInstanceGroupConfig], Field(min_length=1)]
    addons: HyperPodEksAddonsConfig = HyperPodEksAddonsConfig()
    queues: EksQueuesConfig = EksQueuesConfig()
    nccl_test: HyperPodEksNcclTestConfig = HyperPodEksNcclTestConfig()
    task_governance: TaskGovernanceConfig | None = Field(
        default=None,
        description="SageMaker HyperPod task governance: teams with quotas, priority classes, fair share. With "
        "it, the stack installs HyperPod's task governance add-on instead of Kueue and our queues.",
    )

    _cluster_name = field_validator("cluster_name")(_follows(hyperpod_rules.cluster_name_problem))
    _version = field_validator("kubernetes_version")(_follows(hyperpod_eks_rules.kubernetes_version_problem))
    _public_ranges = field_validator("public_access_cidrs")(_follows(public_access_cidrs_problem))

    @model_validator(mode="after")
    def _one_admin_role(self) -> HyperPodEksConfig:
        if self.admin_role_arn is not None and self.admin_role_name is not None:
            raise ValueError("admin_role_arn and admin_role_name name the same thing; give one of them")
        return self

    @model_validator(mode="after")
    def _counts_fit_the_scaling(self) -> HyperPodEksConfig:
        """A fixed group has 1 or more nodes; an autoscaled group starts at 0, up to its max_count."""
        for index, group in enumerate(self.instance_groups):
            where = f"instance_groups.{index}"
            if self.autoscaling is None:
                if group.count < 1:
                    raise _FieldProblem(f"{where}.count", f"must be 1 or more, got {group.count}")
                _raise_at(
                    f"{where}.max_count",
                    hyperpod_eks_rules.max_count_without_autoscaling_problem(group.max_count),
                )
                continue
            _raise_at(f"{where}.count", hyperpod_eks_rules.autoscaled_count_problem(group.count))
            _raise_at(
                f"{where}.max_count",
                hyperpod_eks_rules.autoscaled_max_count_problem(
                    group.max_count, hyperpod_rules.MAX_INSTANCE_COUNT
                ),
            )
        return self

    @model_validator(mode="after")
    def _autoscaling_is_possible(self) -> HyperPodEksConfig:
        """What HyperPod's Karpenter autoscaling refuses, refused here with its reason."""
        if self.autoscaling is None:
            return self
        _raise_at(
            "node_provisioning_mode",
            hyperpod_eks_rules.autoscaling_provisioning_problem(self.node_provisioning_mode.value),
        )
        _raise_at("node_recovery", hyperpod_eks_rules.autoscaling_recovery_problem(self.node_recovery.value))
        _raise_at("instance_groups", hyperpod_eks_rules.autoscaled_groups_problem(len(self.instance_groups)))
        _raise_at(
            "instance_groups",
            hyperpod_eks_rules.node_resource_names_problem([g.name for g in self.instance_groups]),
        )
        for index, group in enumerate(self.instance_groups):
            where = f"instance_groups.{index}"
            training_plan = group.capacity is not None and group.capacity.type is CapacityKind.TRAINING_PLAN
            _raise_at(f"{where}.capacity", hyperpod_eks_rules.autoscaled_capacity_problem(training_plan))
            _raise_at(
                f"{where}.deep_health_checks",
                hyperpod_eks_rules.autoscaled_health_checks_problem(
                    [str(c) for c in group.deep_health_checks or ()]
                ),
            )
        return self

    @model_validator(mode="after")
    def _efa_only_applies(self) -> HyperPodEksConfig:
        """efa-only on a type with secondary EFA interfaces and a VPC CNI that knows them."""
        for index, group in enumerate(self.instance_groups):
            if group.efa_interface_type is EfaInterfaceType.EFA_ONLY:
                _raise_at(
                    f"instance_groups.{index}.efa_interface_type",
                    hyperpod_eks_rules.efa_only_problem(
                        group.instance_type,
                        lookup_hyperpod(group.instance_type).max_efa_interfaces,
                        self.addons.vpc_cni_version,
                    ),
                )
        return self

    @model_validator(mode="after")
    def _unique_group_names(self) -> HyperPodEksConfig:
        names = [g.name for g in self.instance_groups]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"instance group names must be unique, got {', '.join(repeated)} more than once")
        return self

    @model_validator(mode="after")
    def _one_kueue(self) -> HyperPodEksConfig:
        if self.task_governance is None:
            return self
        problem = governance_rules.own_kueue_problem(
            kueue_set="kueue" in self.addons.model_fields_set and self.addons.kueue,
            queues_set="queues" in self.model_fields_set,
        )
        if problem:
            raise _FieldProblem(*problem)
        return self

    @model_validator(mode="after")
    def _quotas_of_the_cluster(self) -> HyperPodEksConfig:
        if self.task_governance is None:
            return self
        cluster_types = [g.instance_type for g in self.instance_groups]
        for t, team in enumerate(self.task_governance.teams):
            for q, resource in enumerate(team.quota):
                where = f"task_governance.teams.{t}.quota.{q}"
                _raise_at(
                    f"{where}.instance_type",
                    governance_rules.quota_instance_type_problem(resource.instance_type, cluster_types),
                )
                instance_type = lookup_hyperpod(resource.instance_type)
                _raise_at(
                    f"{where}.accelerators",
                    governance_rules.accelerators_problem(instance_type, resource.accelerators),
                )
                if resource.accelerator_partition is not None:
                    _raise_at(
                        f"{where}.accelerator_partition.type",
                        governance_rules.accelerator_partition_problem(
                            instance_type, resource.accelerator_partition.type
                        ),
                    )
        return self

    @property
    def kueue(self) -> bool:
        """Whether the stack installs our Kueue (and its queues): never beside task governance."""
        return self.addons.kueue and self.task_governance is None

    @model_validator(mode="after")
    def _queues_need_kueue_and_gpus(self) -> HyperPodEksConfig:
        if "queues" not in self.model_fields_set:
            return self
        if not self.addons.kueue:
            raise _FieldProblem(
                "queues", "needs addons.kueue: true (Kueue runs the queues), got kueue: false"
            )
        if not self.queue_groups:
            raise _FieldProblem(
                "queues", "needs a GPU instance group to queue for; the hyperpod_eks section has none"
            )
        return self

    @model_validator(mode="after")
    def _required_topology_is_reachable(self) -> HyperPodEksConfig:
        reporting = [
            g.instance_type
            for g in self.instance_groups
            if g.name in self.queue_groups and lookup_hyperpod(g.instance_type).network_node_layers
        ]
        _raise_at("queues.topology", queue_rules.required_topology_problem(self.queues.topology, reporting))
        return self

    @property
    def team_namespaces(self) -> list[str]:
        """The namespaces that are teams': the queues' (the stack makes them with the queues, which need Kueue
        and a GPU instance group), else ``default``."""
        return list(self.queues.namespaces) if self.addons.kueue and self.queue_groups else ["default"]

    @property
    def queue_groups(self) -> list[str]:
        """The instance groups the queues cover: those with NVIDIA GPUs."""
        return [g.name for g in self.instance_groups if lookup_hyperpod(g.instance_type).is_gpu]

    @model_validator(mode="after")
    def _pods_fit_the_subnet(self) -> HyperPodEksConfig:
        nodes = sum(g.nodes for g in self.instance_groups)
        _raise_at(
            "instance_groups",
            hyperpod_eks_rules.pod_addresses_problem(
                nodes, hyperpod_eks_rules.ADDRESSES_PER_NODE, usable_addresses()
            ),
        )
        return self

    def stated_capacities(self) -> list[tuple[str, CapacityConfig | None]]:
        """(field, section) of every ``capacity`` this section states, in file order."""
        return [(f"hyperpod_eks.instance_groups.{i}", g.capacity) for i, g in enumerate(self.instance_groups)]


# --- AWS PCS section ---


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
            if not self.efa_enabled:
                raise ValueError(f"efa_interfaces applies only with EFA, which is off for {instance.name}")
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


#: The sections that each make an environment's cluster; at most one per file.
ORCHESTRATOR_SECTIONS = tuple(ORCHESTRATORS)
#: The orchestrators that create ``users`` on their nodes.
USER_ORCHESTRATORS = tuple(section for section, entry in ORCHESTRATORS.items() if entry.team_users)


class UserGroupConfig(_Model):
    """A supplementary group of a user, with the gid it has on every node."""

    name: str
    gid: int

    _name_shape = field_validator("name")(_follows(user_rules.name_problem))

    _gid_range = field_validator("gid")(_follows(user_rules.id_problem))


class UserConfig(_Model):
    """A team member: the same name, uid and gid on every node, home on the shared file system.

    The user's primary group has the user's name and ``gid``; ``groups`` adds supplementary ones.
    """

    name: str = Field(description="Linux user name: lower-case letters, digits, '_' or '-', at most 32.")
    uid: int = Field(description="2000-59999, the same on every node.")
    gid: int | None = Field(
        default=None, description="Of the user's primary group (named like the user). Default: the uid."
    )
    groups: list[UserGroupConfig] = Field(
        default_factory=list, description="Supplementary groups, each with its gid. Default: none."
    )
    ssh_public_keys: list[str] = Field(
        default_factory=list,
        description="OpenSSH public keys allowed to log in as the user ('ssh-ed25519 AAAA... comment').",
    )

    _name_shape = field_validator("name")(_follows(user_rules.name_problem))

    _id_range = field_validator("uid", "gid")(_follows(user_rules.id_problem))

    @field_validator("ssh_public_keys")
    @classmethod
    def _keys_shape(cls, value: list[str]) -> list[str]:
        for index, key in enumerate(value):
            _raise_if(user_rules.ssh_public_key_problem(key), f"[{index}]")
        return value

    @property
    def primary_gid(self) -> int:
        """The primary group's gid: ``gid``, else the uid."""
        return self.uid if self.gid is None else self.gid

    def all_groups(self) -> list[tuple[str, int]]:
        """``(name, gid)`` of the primary group, then of each supplementary group."""
        return [(self.name, self.primary_gid), *((g.name, g.gid) for g in self.groups)]


def _users_consistent(users: list[UserConfig]) -> list[UserConfig]:
    for field in ("name", "uid"):
        seen: set[object] = set()
        for index, user in enumerate(users):
            value = getattr(user, field)
            if value in seen:
                raise ValueError(f"[{index}].{field} {value!r} is already given to another user")
            seen.add(value)
    _raise_if(user_rules.group_ids_problem(g for user in users for g in user.all_groups()))
    return users


# --- instance types the file declares ---


class AcceleratorFactsConfig(_Model):
    """``instance_types[].accelerators``: the accelerators of a declared type, all of one model."""

    kind: Literal["nvidia-gpu", "trainium"] = Field(
        default="nvidia-gpu",
        description="nvidia-gpu, or trainium for AWS Trainium (Neuron devices). Default: nvidia-gpu.",
    )
    model: str = Field(
        min_length=1, description="As EC2 names it (GpuInfo / NeuronInfo): B200, Trainium2 ..."
    )
    count: int = Field(description="Devices per instance (GPUs, or Neuron devices).")
    memory_gib_each: int = Field(description="Memory of one device in GiB.")
    mig_capable: bool = Field(default=False, description="NVIDIA Multi-Instance GPU. Default: false.")
    mig_profiles: list[str] = Field(
        default_factory=list, description="MIG profiles such as 1g.23gb, as NVIDIA lists them. Default: none."
    )


class InstanceTypeFactsConfig(_Model):
    """``instance_types[]``: the facts of a type the catalogue does not know, in the shape of the catalogue's
    rows (``training-clusters catalog --output json``) and checked by the same rules; the figures are EC2
    ``DescribeInstanceTypes``' (``aws ec2 describe-instance-types --instance-types NAME``)."""

    name: str = Field(description="EC2 name, e.g. p6-b300.48xlarge.")
    vcpus: int = Field(description="VCpuInfo.DefaultVCpus.")
    memory_gib: float = Field(description="MemoryInfo.SizeInMiB / 1024.")
    architecture: Literal["x86_64", "arm64"] = Field(
        default="x86_64", description="ProcessorInfo.SupportedArchitectures. Default: x86_64."
    )
    accelerators: AcceleratorFactsConfig | None = Field(
        default=None, description="GpuInfo or NeuronInfo. Default: none (a CPU type)."
    )
    max_efa_interfaces: int = Field(
        default=0, description="NetworkInfo.EfaInfo.MaximumEfaInterfaces. Default: 0 (no EFA)."
    )
    max_network_cards: int | None = Field(
        default=None,
        description="NetworkInfo.MaximumNetworkCards. Default: max_efa_interfaces (at least 1).",
    )
    gpudirect_rdma: bool = Field(
        default=False,
        description="Whether FI_EFA_USE_DEVICE_RDMA=1 is safe (p4d and later, Trainium). Default: false.",
    )
    network_gbps: float = Field(description="NetworkInfo.NetworkPerformance in Gbit/s (the peak).")
    quota_family: Literal["P", "G and VT", "Standard", "Trn"] = Field(
        description="The EC2 vCPU quota it counts against: P, G and VT, Standard or Trn."
    )
    hyperpod_name: str | None = Field(
        default=None, description="ml.<name> where SageMaker HyperPod offers it. Default: not offered."
    )
    source: str = Field(min_length=1, description="Where the figures come from (a page, or the CLI call).")

    _name = field_validator("name")(_follows(instance_type_name_problem))

    def facts(self) -> InstanceType:
        """The declared type as the catalogue holds one."""
        accelerators = self.accelerators
        return InstanceType(
            name=self.name,
            vcpus=self.vcpus,
            memory_gib=self.memory_gib,
            architecture=Architecture(self.architecture),
            accelerators=None
            if accelerators is None
            else Accelerators(
                kind=AcceleratorKind(accelerators.kind),
                model=accelerators.model,
                count=accelerators.count,
                memory_gib_each=accelerators.memory_gib_each,
                mig_capable=accelerators.mig_capable,
                mig_profiles=tuple(accelerators.mig_profiles),
            ),
            max_efa_interfaces=self.max_efa_interfaces,
            max_network_cards=self.max_network_cards
            if self.max_network_cards is not None
            else max(1, self.max_efa_interfaces),
            gpudirect_rdma=self.gpudirect_rdma,
            network_gbps=self.network_gbps,
            quota_family=QuotaFamily(self.quota_family),
            hyperpod_name=self.hyperpod_name,
            source=self.source,
        )

    @model_validator(mode="after")
    def _consistent(self) -> InstanceTypeFactsConfig:
        """The catalogue's rules, reported at the fact each names first (``vcpus must be ...``)."""
        problem = instance_facts_problem(self.facts())
        if problem:
            fact, _, rest = problem.partition(" ")
            if fact.split(".")[0] in type(self).model_fields:
                raise _FieldProblem(fact, rest)
            raise ValueError(problem)
        return self


def _declared_types(value: list[InstanceTypeFactsConfig]) -> list[InstanceTypeFactsConfig]:
    """Each declared type once, none with other facts than the catalogue holds for it."""
    _raise_if(duplicates_problem(t.name for t in value), "names")
    for index, declared in enumerate(value):
        _raise_at(f"{index}", declared_type_problem(declared.facts()))
    return value


class _DeclaredTypes(BaseModel):
    """The ``instance_types`` of a document alone: read before the rest, which may use them."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    instance_types: Annotated[list[InstanceTypeFactsConfig], AfterValidator(_declared_types)] = []


class EnvironmentConfig(_Model):
    """A whole environment file."""

    name: str | None = Field(
        default=None, description="Environment name; the stack name derives from it. Default: the file name."
    )
    region: str = Field(
        description="AWS region, one the installed botocore lists (see allow_unknown_region)."
    )
    allow_unknown_region: bool = Field(
        default=False,
        description="Accept a region the installed botocore does not list yet (newer than it), as long as "
        "its name has the shape of a partition's regions. Default: false, so a typo such as us-central-1 "
        "is refused; upgrading botocore is the better fix.",
    )
    account: str | None = None
    availability_zones: Annotated[list[str], Field(min_length=1, max_length=3)] = Field(
        description="AZs of region: its name and a letter, e.g. us-east-1a (Local Zones are not used)."
    )
    cost_centre: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TAG_VALUE,
        description="Tagged as 'cost-centre' on every resource, with 'project' and 'environment'. Letters, "
        "numbers, spaces and _ . : / = + - @ only (what IAM, SageMaker, FSx and CloudWatch Logs accept).",
    )
    tags: dict[str, str] = Field(
        default_factory=dict,
        description="More tags for every resource. Keys 1-128 and values up to 256 letters, numbers, "
        "spaces and _ . : / = + - @ (what IAM, SageMaker, FSx and CloudWatch Logs accept); keys not "
        "starting with aws:.",
    )
    instance_types: Annotated[list[InstanceTypeFactsConfig], AfterValidator(_declared_types)] = Field(
        default_factory=list,
        description="Instance types the catalogue does not know, for nodes with accelerators or EFA (controller, "
        "login, head and system nodes take any type without): the facts EC2's DescribeInstanceTypes reports, "
        "checked like the catalogue's rows. Default: none.",
    )
    network: NetworkConfig = NetworkConfig()
    storage: StorageConfig = StorageConfig()
    hyperpod: HyperPodConfig | None = None
    parallelcluster: ParallelClusterConfig | None = None
    eks: EksConfig | None = None
    pcs: PcsConfig | None = None
    hyperpod_eks: HyperPodEksConfig | None = None
    orchestrator: Annotated[Orchestrator, _FileChoice(Orchestrator)] | None = Field(
        default=None,
        description="Who runs the nodes of compute: its section is written from compute (see "
        "training_clusters.config.compute). Default: none (give the orchestrator's own section instead).",
    )
    compute: ComputeIntent | None = Field(
        default=None,
        description="The nodes, stated once for any orchestrator; merged with that orchestrator's section, "
        "which adds what only it has. Needs orchestrator.",
    )
    ignore: list[Annotated[Ignorable, _FileChoice(Ignorable)]] = Field(
        default_factory=list,
        description="Parts this file states that its orchestrator cannot use, left out on purpose: "
        "compute.controller (pcs, eks and hyperpod-eks run their own), compute.login (eks and hyperpod-eks have "
        "no login nodes), users (created on parallelcluster and hyperpod nodes only) and the sections of the "
        "other orchestrators. Anything else such a file states is an error naming it, so nothing is dropped "
        "silently; an entry naming a part that is used, or absent, is an error too. Default: none.",
    )
    users: Annotated[list[UserConfig], AfterValidator(_users_consistent)] = Field(
        default_factory=list,
        description="The team's Linux users, created with the same ids on every node of a parallelcluster or "
        "hyperpod cluster, homes on the shared file system. Default: none.",
    )

    _region_shape = field_validator("region")(_follows(region_shape_problem))

    @model_validator(mode="after")
    def _region_known(self) -> EnvironmentConfig:
        if not self.allow_unknown_region:
            _raise_at("region", unknown_region_problem(self.region))
        return self

    @field_validator("account", mode="before")
    @classmethod
    def _account_quoted(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            raise ValueError(
                f"must be a 12-digit AWS account id in quotes, got the number {value} "
                "(unquoted, YAML reads digits as a number and drops leading zeros)"
            )
        return value

    @field_validator("account")
    @classmethod
    def _account_shape(cls, value: str | None) -> str | None:
        if value is not None and not _ACCOUNT.fullmatch(value):
            raise ValueError(f"must be a 12-digit AWS account id (quote it in YAML), got {excerpt(value)}")
        return value

    @field_validator("name")
    @classmethod
    def _name_shape(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.fullmatch(value):
            raise ValueError(
                "must start with a letter and hold only letters, digits and hyphens (max 63), "
                f"got {excerpt(value)}"
            )
        return value

    @field_validator("cost_centre")
    @classmethod
    def _cost_centre_is_a_tag_value(cls, value: str | None) -> str | None:
        if value is not None:
            _raise_if(tag_value_problem(value), excerpt(value))
        return value

    @field_validator("tags")
    @classmethod
    def _tags_allowed_by_every_service(cls, value: dict[str, str]) -> dict[str, str]:
        for key, tag in value.items():
            _raise_if(tag_key_problem(key), f"key {excerpt(key)}")
            if key in ("project", "environment", COST_CENTRE_TAG):
                raise ValueError(
                    f"'{key}' is set by the library (project, environment) or by cost_centre; remove it from tags"
                )
            _raise_if(tag_value_problem(tag), f"value {excerpt(tag)} of {excerpt(key)}")
        return value

    @model_validator(mode="after")
    def _zones_in_region(self) -> EnvironmentConfig:
        for zone in self.availability_zones:
            _raise_at("availability_zones", availability_zone_problem(zone, self.region))
        if len(set(self.availability_zones)) != len(self.availability_zones):
            raise _FieldProblem(
                "availability_zones", f"must not repeat a zone, got {self.availability_zones}"
            )
        chosen = self.network.placement_availability_zone
        if chosen is not None and chosen not in self.availability_zones:
            raise _FieldProblem(
                "network.placement_availability_zone",
                f"'{chosen}' must be one of availability_zones ({', '.join(self.availability_zones)})",
            )
        return self

    @model_validator(mode="after")
    def _network_fits_the_zones(self) -> EnvironmentConfig:
        zones = len(self.availability_zones)
        _raise_at("network.cidr", vpc_cidr_problem(self.network.cidr, zones))
        nat_count = self.network.nat_gateways
        if nat_count is not None:
            _raise_at("network.nat_gateways", nat_gateways_fit_problem(nat_count, zones))
        return self

    @model_validator(mode="after")
    def _eks_nodes_fit_the_subnets(self) -> EnvironmentConfig:
        """EFA and reserved nodegroups live in the placement subnet; the others spread over every private one.
        (ParallelCluster and HyperPod check their own sections; a PCS cluster's size keeps it far below.)"""
        if self.eks is None:
            return self
        nodes = [
            *((f"eks.efa_nodegroups.{i}.size", g.size, True) for i, g in enumerate(self.eks.efa_nodegroups)),
            *(
                (f"eks.gpu_nodegroups.{i}.size", g.size, g.node_capacity().is_reserved)
                for i, g in enumerate(self.eks.gpu_nodegroups)
            ),
            ("eks.system_nodegroup.size", self.eks.system_nodegroup.size, False),
        ]
        _raise_if_crowded([(field, count) for field, count, placed in nodes if placed])
        _raise_if_crowded([(field, count) for field, count, _ in nodes], subnets=len(self.availability_zones))
        return self

    @model_validator(mode="after")
    def _eks_needs_a_way_out(self) -> EnvironmentConfig:
        orchestrator = orchestrator_of(self)
        section = orchestrator.section if orchestrator is not None and orchestrator.kubernetes else None
        if section is not None and self.network.endpoint_only:
            raise _FieldProblem(
                "network.endpoint_only",
                "true leaves the EKS cluster no route to its helm chart repositories and the MPI Operator "
                f"release; use nat_gateways: 1 (or more) with an {section} section",
            )
        return self

    @model_validator(mode="after")
    def _one_orchestrator(self) -> EnvironmentConfig:
        given = [name for name in ORCHESTRATOR_SECTIONS if getattr(self, name) is not None]
        if len(given) > 1:  # reported at the second one
            raise _FieldProblem(
                given[1],
                f"an environment has one orchestrator, got sections {', '.join(given)}; keep one of "
                f"{', '.join(ORCHESTRATOR_SECTIONS)} (or none, for network and storage only)",
            )
        return self

    @model_validator(mode="after")
    def _root_squash_where_no_node_writes_as_root(self) -> EnvironmentConfig:
        lustre = self.storage.lustre
        if lustre is None or not lustre.root_squash:
            return self
        intent = (
            None if self.orchestrator is None else str(getattr(self.orchestrator, "value", self.orchestrator))
        )
        for name in ROOT_WRITING_ORCHESTRATORS:
            if getattr(self, name) is not None or intent == name:
                problem = root_squash_orchestrator_problem(name)
                assert problem is not None
                raise _FieldProblem("storage.lustre.root_squash", problem)
        return self

    @model_validator(mode="after")
    def _users_need_slurm_nodes(self) -> EnvironmentConfig:
        if self.users and not any(getattr(self, name) is not None for name in USER_ORCHESTRATORS):
            raise _FieldProblem(
                "users",
                f"are created on the nodes of a {' or '.join(USER_ORCHESTRATORS)} cluster; add one of "
                "those sections or remove users",
            )
        return self

    @model_validator(mode="after")
    def _capacity_in_this_region_and_account(self) -> EnvironmentConfig:
        """A training plan or reservation group ARN of another region or account fails at deploy: refused here."""
        for field, section in self._stated_capacities():
            misplaced = section.to_capacity().place_problem(self.region, self.account)
            if misplaced:
                raise _FieldProblem(f"{field}.capacity.{misplaced[0]}", misplaced[1])
        return self

    def _stated_capacities(self) -> list[tuple[str, CapacityConfig]]:
        """(field, section) of every ``capacity`` the file states, in file order."""
        orchestrator = orchestrator_of(self)
        if orchestrator is None:
            return []
        found = getattr(self, orchestrator.section).stated_capacities()
        return [(field, section) for field, section in found if section is not None]

    def resource_tags(self, environment_name: str) -> dict[str, str]:
        """The tags every resource of the environment carries: project, environment, cost centre, ``tags``."""
        tags = {"project": PROJECT_TAG, "environment": environment_name}
        if self.cost_centre is not None:
            tags[COST_CENTRE_TAG] = self.cost_centre
        return {**tags, **self.tags}

    @property
    def placement_availability_zone(self) -> str:
        """The AZ of placement groups and FSx."""
        return self.network.placement_availability_zone or self.availability_zones[0]


def environment_name(config: EnvironmentConfig, path: Path | None) -> str:
    """The environment's name: ``name`` from the file, else the file's stem."""
    if config.name:
        return config.name
    if path is None:
        raise ConfigurationError("name: required when the environment does not come from a file")
    if not _NAME.fullmatch(path.stem):
        raise ConfigurationError(
            f"{path}: the file name '{path.stem}' names the environment and its stack, so it must start with "
            "a letter and hold only letters, digits and hyphens (max 63); rename the file or set name:"
        )
    return path.stem


#: Where in the file each top-level construct of a stack comes from (its id, or the prefix of ids such as
#: ``EfaNodegroup-<name>``): the sections a construct's error is looked up in, most specific first.
_CONSTRUCT_SECTIONS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Network": (("network",),),
    "PlacementGroup": (("network", "placement_group"),),
    "SharedStorage": (("storage", "lustre"), ("storage",)),
    "HyperPod": (("hyperpod",), ("hyperpod_eks",)),
    "ParallelCluster": (("parallelcluster",),),
    "AccountingDatabase": (("parallelcluster", "slurm", "accounting"), ("parallelcluster",)),
    "Actions": (("parallelcluster",),),
    "Pcs": (("pcs",),),
    "Eks": (("eks",), ("hyperpod_eks",)),
    "EfaNodegroup-": (("eks", "efa_nodegroups"),),
    "GpuNodegroup-": (("eks", "gpu_nodegroups"),),
    "NvidiaDevicePlugin": (("eks", "addons", "nvidia_device_plugin"), ("eks", "addons")),
    "EfaDevicePlugin": (("eks", "addons"),),
    "FsxCsiDriver": (("eks", "addons"), ("hyperpod_eks", "addons")),
    "GpuMonitoring": (("eks", "addons", "gpu_monitoring"), ("eks", "addons")),
    "TrainingRuntimes": (("eks", "addons"), ("hyperpod_eks", "addons")),
    "Queues": (("eks", "queues"), ("hyperpod_eks", "queues")),
}


def construct_error_line(document: Any, key_lines: KeyLines, message: str) -> int | None:
    """The line of the file a construct's error (``<stack>/<construct>...: <field> <problem>``) comes from.

    The constructs name their props (``instance_groups[1].threads_per_core``), which the file's sections spell
    alike: the line is that of the field in the construct's section when the file writes it, else in the
    storage or top-level settings the construct was given (``mount_dir``, ``tags``), else the section's own
    line; a section ``compute`` wrote gives the line of its node group or of ``compute``.
    """
    construct_path, _, rest = message.partition(": ")
    ids = construct_path.split("/")
    top = ids[1] if len(ids) > 1 else ""
    field = _field_parts(rest.split(" ", 1)[0])
    named = top.split("-", 1)[1] if "-" in top else None
    sections = next(
        (
            paths
            for key, paths in _CONSTRUCT_SECTIONS.items()
            if top == key or (key.endswith("-") and top.startswith(key))
        ),
        (),
    )
    candidates: list[tuple[str | int, ...]] = []
    for section in sections:
        here: tuple[str | int, ...] = section
        if named is not None:
            index = _index_named(document, section, named)
            here = (*section, index) if index is not None else section
        # the field, else the nearest part of it the file writes (the item of a missing key), within the section
        candidates += [(*here, *field[:end]) for end in range(len(field), 0, -1)]
    candidates += [("storage", "lustre", *field), tuple(field)]
    for candidate in candidates:
        if candidate and key_lines.line(document, candidate, whole=True):
            return key_lines.line(document, candidate, whole=True)
    for section in sections:
        line = key_lines.line(document, section, whole=True)
        if line:
            return line
    if named is not None:  # a node group compute states
        index = _index_named(document, ("compute", "node_groups"), named)
        if index is not None:
            return key_lines.line(document, ("compute", "node_groups", index))
    return key_lines.line(document, ("compute",), whole=True) or key_lines.line(
        document, ("orchestrator",), whole=True
    )


def _field_parts(field: str) -> list[str | int]:
    """``instance_groups[1].threads_per_core`` as ``["instance_groups", 1, "threads_per_core"]``."""
    parts: list[str | int] = []
    for part in field.replace("]", "").replace("[", ".").split("."):
        if part:
            parts.append(int(part) if part.isdigit() else part)
    return parts


def _index_named(document: Any, section: tuple[str, ...], name: str) -> int | None:
    node: Any = document
    for part in section:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, list):
        return None
    return next(
        (i for i, item in enumerate(node) if isinstance(item, dict) and item.get("name") == name), None
    )


def load_environment(path: str | Path) -> EnvironmentConfig:
    """Read and validate one environment file (bounded: see :mod:`training_clusters.config.yaml_file`)."""
    file = Path(path)
    document, key_lines = read_yaml_with_lines(file)
    return parse_environment(document, source=str(file), key_lines=key_lines)


def parse_environment(
    document: Any, *, source: str = "<environment>", key_lines: KeyLines | None = None
) -> EnvironmentConfig:
    """Validate an already-parsed environment document.

    :param key_lines: Where the document's keys are in file ``source``, to start each problem with
        ``source:LINE:``. Default: no lines.
    """
    use_declared_types(())  # no earlier file's declared types: this one declares its own
    first = _at(source, 1) if key_lines is not None else f"{source}: "  # a file's whole document: its line 1
    if document is None:
        raise ConfigurationError(
            f"{first}is empty; an environment needs at least region and availability_zones"
        )
    if not isinstance(document, dict):
        raise ConfigurationError(f"{first}must be a mapping of sections, got {type(document).__name__}")
    lines = key_lines or KeyLines()
    try:  # the types the file declares first: compute and every section may use them
        declared = _DeclaredTypes.model_validate(document).instance_types
    except ValidationError as error:
        use_declared_types(())
        raise ConfigurationError(_describe(error, source, lambda path: lines.line(document, path))) from None
    use_declared_types(t.facts() for t in declared)  # this file's, in place of an earlier file's
    try:
        expanded = expand_intent(document)
    except IntentProblems as error:
        raise ConfigurationError(
            "\n".join(
                [
                    f"{source}: {len(error.problems)} problem(s)",
                    *(
                        f"  {_at(source, line)}{problem}"
                        for line, problem in _in_file_order(error, document, lines)
                    ),
                ]
            )
        ) from None
    except ConfigurationError as error:
        line = lines.line(document, error.path) if isinstance(error, IntentFieldError) else None
        raise ConfigurationError(f"{source}: 1 problem(s)\n  {_at(source, line)}{error}") from None
    try:
        return EnvironmentConfig.model_validate(expanded)
    except ValidationError as error:
        # an intent's sections are written by expand_intent: only a path found whole in the file has a line
        whole = expanded is not document
        raise ConfigurationError(
            _describe(error, source, lambda path: lines.line(document, path, whole=whole))
        ) from None


def _in_file_order(
    error: IntentProblems, document: Any, lines: KeyLines
) -> list[tuple[int | None, IntentFieldError]]:
    """Each problem of ``error`` with its line, in the order of the file."""
    found = [(lines.line(document, problem.path), problem) for problem in error.problems]
    return sorted(found, key=lambda pair: pair[0] or 0)


#: At most this many problems are listed, each on one line of at most this many characters (the longest
#: rule lists the allowed instance types: about 600): a file of ten thousand mistakes, or a pasted log in
#: a field, gives a report of a few KiB.
_MAX_PROBLEMS_SHOWN, _MAX_PROBLEM_LINE = 10, 1000


def _describe(
    error: ValidationError, source: str, line_of: Callable[[tuple[str | int, ...]], int | None]
) -> str:
    problems = error.errors(include_url=False)  # with the context: a _FieldProblem names its field
    lines = [f"{source}: {len(problems)} problem(s)"]
    for problem in problems[:_MAX_PROBLEMS_SHOWN]:
        location = _location(problem)
        where = _at(source, line_of(location))
        path = ".".join(str(part) for part in location) or "(document)"
        lines.append(
            bounded(f"  {where}{bounded(path, 120)}: {_message(problem, location)}", _MAX_PROBLEM_LINE)
        )
    if len(problems) > _MAX_PROBLEMS_SHOWN:
        lines.append(f"  ... and {len(problems) - _MAX_PROBLEMS_SHOWN} more")
    return "\n".join(lines)


def _at(source: str, line: int | None) -> str:
    """``environments/x.yaml:23: `` (as compilers say where), or nothing without a line."""
    return f"{bounded(source, 200)}:{line}: " if line else ""


def _location(problem: Any) -> tuple[str | int, ...]:
    """The field path of a problem: pydantic's, and the field a :class:`_FieldProblem` names within it."""
    cause = (problem.get("ctx") or {}).get("error")
    field = cause.field if isinstance(cause, _FieldProblem) else ()
    return (*problem["loc"], *field)


def _message(problem: Any, location: tuple[str | int, ...]) -> str:
    kind = problem["type"]
    value = problem.get("input")
    if kind == "extra_forbidden":
        *section, key = location
        return unknown_key_problem(key, value, allowed_keys(EnvironmentConfig, section))
    if kind == "missing":
        return "required, but missing"
    if kind == "model_type":
        hint = "; an empty section reads as null: fill it in or delete it" if value is None else ""
        return f"must be a section of key: value settings, got {excerpt(value)}{hint}"
    message = str(problem["msg"]).removeprefix("Value error, ")
    if kind == "value_error":  # a validator's own words (no validator here uses assert)
        return message
    return f"{message}, got {excerpt(value)}"
