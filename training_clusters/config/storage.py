"""``storage``: the FSx for Lustre file system, its data repository and backups."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from training_clusters.config.base import _BUCKET_NAME, _FileChoice, _follows, _Model, _raise_at
from training_clusters.model.errors import excerpt
from training_clusters.model.options import (
    LustreDeploymentType,
    RemovalPolicy,
)
from training_clusters.rules.common import mount_dir_problem
from training_clusters.rules.lustre import (
    DEFAULT_BACKUP_RETENTION_DAYS,
    LUSTRE_FIRST_STEP_GIB,
    MAX_BACKUP_RETENTION_DAYS,
    exempt_nids_problem,
    file_system_path_problem,
    lustre_backup_retention_problem,
    lustre_capacity_problem,
    lustre_throughput_problem,
    s3_prefix_problem,
)


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
        _raise_at(
            "root_squash_exempt_nids", exempt_nids_problem(self.root_squash, self.root_squash_exempt_nids)
        )
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
