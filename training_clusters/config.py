"""The environment file: one YAML document describing a whole training environment.

Loading validates the document with pydantic and turns every problem into a :class:`ConfigurationError`
naming the file, the field path, the value received and what is allowed::

    environments/x.yaml: storage.lustre.storage_capacity_gib: must be 1200 or a multiple of 2400, got 1000
"""

from __future__ import annotations

import re
from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from training_clusters.errors import ConfigurationError
from training_clusters.rules import (
    LUSTRE_FIRST_STEP_GIB,
    lustre_capacity_problem,
    log_retention_problem,
    lustre_throughput_problem,
    nat_gateways_problem,
)

_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
_ACCOUNT = re.compile(r"^\d{12}$")
_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]{0,62}$")


class _Model(BaseModel):
    """Strict base: unknown keys are errors, enum values are kept as enums."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False, str_strip_whitespace=True)


class LustreDeployment(str, Enum):
    SCRATCH_2 = "SCRATCH_2"
    PERSISTENT_2 = "PERSISTENT_2"


class RemovalPolicyChoice(str, Enum):
    RETAIN = "retain"
    DESTROY = "destroy"


class PlacementStrategyChoice(str, Enum):
    CLUSTER = "cluster"
    PARTITION = "partition"
    SPREAD = "spread"


class PlacementGroupConfig(_Model):
    """``network.placement_group``: the group compute instances share."""

    strategy: PlacementStrategyChoice = PlacementStrategyChoice.CLUSTER
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
        problem = log_retention_problem(value)
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


class LustreConfig(_Model):
    """``storage.lustre``: the shared FSx for Lustre file system."""

    deployment_type: LustreDeployment = LustreDeployment.SCRATCH_2
    storage_capacity_gib: int = LUSTRE_FIRST_STEP_GIB
    per_unit_storage_throughput_mbps: int | None = None
    mount_dir: str = "/fsx"
    data_repository: DataRepositoryConfig | None = None
    removal_policy: RemovalPolicyChoice = RemovalPolicyChoice.RETAIN

    @model_validator(mode="after")
    def _capacity_steps(self) -> LustreConfig:
        problem = lustre_capacity_problem(self.deployment_type.value, self.storage_capacity_gib)
        if problem:
            raise ValueError(f"storage_capacity_gib {problem}")
        return self

    @field_validator("mount_dir")
    @classmethod
    def _absolute_mount_dir(cls, value: str) -> str:
        if not re.fullmatch(r"/[A-Za-z0-9._/-]*", value) or value == "/":
            raise ValueError(f"must be an absolute directory such as /fsx, got '{value}'")
        return value

    @model_validator(mode="after")
    def _throughput_matches_type(self) -> LustreConfig:
        problem = lustre_throughput_problem(self.deployment_type.value, self.per_unit_storage_throughput_mbps)
        if problem:
            raise ValueError(f"per_unit_storage_throughput_mbps {problem}")
        return self


class StorageConfig(_Model):
    """``storage``: what every node mounts."""

    lustre: LustreConfig | None = LustreConfig()


# --- HyperPod section ---


class HyperPodRole(StrEnum):
    CONTROLLER = "controller"
    LOGIN = "login"
    WORKER = "worker"


class NodeRecoveryChoice(StrEnum):
    AUTOMATIC = "automatic"
    NONE = "none"


class DeepHealthCheckChoice(StrEnum):
    INSTANCE_STRESS = "InstanceStress"
    INSTANCE_CONNECTIVITY = "InstanceConnectivity"


class HyperPodInstanceGroupConfig(_Model):
    """``hyperpod.instance_groups[]``: one HyperPod instance group."""

    name: str
    instance_type: str = Field(description="HyperPod instance type with the ml. prefix, e.g. ml.p5.48xlarge")
    count: Annotated[int, Field(ge=1)] = 1
    role: HyperPodRole = HyperPodRole.WORKER
    partition: str | None = Field(default=None, description="Slurm partition; required for workers.")
    threads_per_core: int = Field(default=1, description="1 (hyper-threading off) or 2.")
    extra_volume_gib: int | None = Field(default=None, description="Extra EBS volume at /opt/sagemaker.")
    deep_health_checks: list[DeepHealthCheckChoice] | None = Field(
        default=None, description="Default: both checks on GPU/Trainium groups, none on CPU groups."
    )


class HyperPodConfig(_Model):
    """``hyperpod``: a SageMaker HyperPod cluster orchestrated by Slurm."""

    cluster_name: str
    node_recovery: NodeRecoveryChoice = NodeRecoveryChoice.AUTOMATIC
    instance_groups: Annotated[list[HyperPodInstanceGroupConfig], Field(min_length=1)]
    enable_enroot_pyxis: bool = True
    enable_observability: bool = False


class EnvironmentConfig(_Model):
    """A whole environment file."""

    name: str | None = Field(
        default=None, description="Environment name; the stack name derives from it. Default: the file name."
    )
    region: str
    account: str | None = None
    availability_zones: Annotated[list[str], Field(min_length=1, max_length=3)]
    tags: dict[str, str] = Field(default_factory=dict)
    network: NetworkConfig = NetworkConfig()
    storage: StorageConfig = StorageConfig()
    hyperpod: HyperPodConfig | None = None

    @field_validator("region")
    @classmethod
    def _region_shape(cls, value: str) -> str:
        if not _REGION.fullmatch(value):
            raise ValueError(f"must be an AWS region such as us-east-1, got '{value}'")
        return value

    @field_validator("account")
    @classmethod
    def _account_shape(cls, value: str | None) -> str | None:
        if value is not None and not _ACCOUNT.fullmatch(value):
            raise ValueError(f"must be a 12-digit AWS account id (quote it in YAML), got '{value}'")
        return value

    @field_validator("name")
    @classmethod
    def _name_shape(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.fullmatch(value):
            raise ValueError(
                f"must start with a letter and hold only letters, digits and hyphens (max 63), got '{value}'"
            )
        return value

    @model_validator(mode="after")
    def _zones_in_region(self) -> EnvironmentConfig:
        for zone in self.availability_zones:
            if not (zone.startswith(self.region) and len(zone) == len(self.region) + 1):
                raise ValueError(
                    f"availability_zones: '{zone}' is not an AZ of region {self.region} "
                    f"(expected e.g. {self.region}a)"
                )
        if len(set(self.availability_zones)) != len(self.availability_zones):
            raise ValueError(f"availability_zones: must not repeat a zone, got {self.availability_zones}")
        chosen = self.network.placement_availability_zone
        if chosen is not None and chosen not in self.availability_zones:
            raise ValueError(
                f"network.placement_availability_zone: '{chosen}' must be one of availability_zones "
                f"({', '.join(self.availability_zones)})"
            )
        return self

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
    return path.stem


def load_environment(path: str | Path) -> EnvironmentConfig:
    """Read and validate one environment file."""
    file = Path(path)
    try:
        document = yaml.safe_load(file.read_text())
    except FileNotFoundError:
        raise ConfigurationError(f"{file}: no such environment file") from None
    except yaml.YAMLError as error:
        raise ConfigurationError(f"{file}: not valid YAML: {error}") from None
    return parse_environment(document, source=str(file))


def parse_environment(document: Any, *, source: str = "<environment>") -> EnvironmentConfig:
    """Validate an already-parsed environment document."""
    if not isinstance(document, dict):
        raise ConfigurationError(f"{source}: must be a mapping of sections, got {type(document).__name__}")
    try:
        return EnvironmentConfig.model_validate(document)
    except ValidationError as error:
        raise ConfigurationError(_describe(error, source)) from None


def _describe(error: ValidationError, source: str) -> str:
    lines = [f"{source}: {len(error.errors())} problem(s)"]
    for problem in error.errors():
        path = ".".join(str(part) for part in problem["loc"]) or "(document)"
        lines.append(f"  {path}: {_message(problem)}")
    return "\n".join(lines)


def _message(problem: Any) -> str:
    kind = problem["type"]
    value = problem.get("input")
    if kind == "extra_forbidden":
        return f"unknown key (got value {value!r}); check the spelling against environments/schema.json"
    if kind == "missing":
        return "required, but missing"
    message = str(problem["msg"]).removeprefix("Value error, ")
    if kind in ("value_error", "assertion_error"):
        return message
    return f"{message}, got {value!r}"
