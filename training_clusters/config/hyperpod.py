"""``hyperpod``: a SageMaker HyperPod cluster orchestrated by Slurm."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from training_clusters.config.base import (
    _FieldProblem,
    _FileChoice,
    _follows,
    _hyperpod_any_type,
    _hyperpod_instance_type,
    _Model,
    _raise_at,
    _raise_if,
    _raise_if_crowded,
)
from training_clusters.config.capacity import CapacityConfig, _capacity_for
from training_clusters.model.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.model.options import (
    DeepHealthCheck,
    HyperPodAccounting,
    NodeProvisioningMode,
    NodeRecovery,
    NodeRole,
    SlurmConfigMode,
    SlurmConfigStrategy,
)
from training_clusters.rules import downloads as download_rules
from training_clusters.rules import hyperpod as hyperpod_rules


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
    _threads_per_core = field_validator("threads_per_core")(_follows(hyperpod_rules.threads_per_core_problem))
    _extra_volume = field_validator("extra_volume_gib")(_follows(hyperpod_rules.extra_volume_problem))
    _root_volume = field_validator("root_volume_gib")(_follows(hyperpod_rules.root_volume_problem))

    _hyperpod_type = field_validator("instance_type")(_hyperpod_any_type)

    @model_validator(mode="after")
    def _health_checks_need_accelerators(self) -> HyperPodInstanceGroupConfig:
        checks = [check.value for check in self.deep_health_checks or ()]
        _raise_at("deep_health_checks", hyperpod_rules.deep_health_checks_problem(checks, self.instance_type))
        return self

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
    def _slurm_groups(self) -> HyperPodConfig:
        """One controller of one instance, at most one login group, workers with their partitions."""
        repeated = hyperpod_rules.group_names_problem([g.name for g in self.instance_groups])
        if repeated:
            _raise_at(f"instance_groups.{repeated[0]}.name", repeated[1])
        roles = [group.role.name for group in self.instance_groups]
        _raise_at(
            "instance_groups",
            hyperpod_rules.slurm_roles_problem(
                [(g.name, r) for g, r in zip(self.instance_groups, roles, strict=True)]
            ),
        )
        for index, (group, role) in enumerate(zip(self.instance_groups, roles, strict=True)):
            where = f"instance_groups.{index}"
            _raise_at(f"{where}.count", hyperpod_rules.controller_count_problem(role, group.count))
            _raise_at(
                f"{where}.partition",
                hyperpod_rules.slurm_partition_problem(role, group.partition, group.name),
            )
        _raise_at("instance_groups", hyperpod_rules.slurm_workers_problem(roles))
        return self

    @model_validator(mode="after")
    def _nodes_fit_the_subnet(self) -> HyperPodConfig:
        _raise_if_crowded(
            [(f"instance_groups.{i}.count", g.count) for i, g in enumerate(self.instance_groups)]
        )
        return self

    _cluster_name = field_validator("cluster_name")(_follows(hyperpod_rules.cluster_name_problem))

    @field_validator("download_sha256")
    @classmethod
    def _pins(cls, value: dict[str, str]) -> dict[str, str]:
        """Each pin as the nodes' preflight reads it: an https:// URL to 64 hexadecimal digits."""
        for url, digest in value.items():
            _raise_if(download_rules.pinned_url_problem(url))
            _raise_if(download_rules.sha256_problem(digest), f"[{url!r}]")
        return value

    def stated_capacities(self) -> list[tuple[str, CapacityConfig | None]]:
        """(field, section) of every ``capacity`` this section states, in file order."""
        return [(f"hyperpod.instance_groups.{i}", g.capacity) for i, g in enumerate(self.instance_groups)]


# --- ParallelCluster section ---
