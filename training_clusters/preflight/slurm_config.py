"""A HyperPod Slurm cluster of the file's name deployed already must have the file's ``slurm_config``."""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
)

from training_clusters.config import EnvironmentConfig
from training_clusters.preflight.results import AwsClients, Check, _error_code, _failed_call


def _slurm_config_checks(config: EnvironmentConfig, clients: AwsClients) -> list[Check]:
    """A HyperPod Slurm cluster of the file's name deployed already, by this file or an earlier version of the
    library: its Slurm configuration must be the file's. ``SlurmConfig`` cannot join a cluster configured by
    ``provisioning_parameters.json`` (the update fails and rolls back, or migrates the cluster for good), and a
    cluster configured through the API cannot go back (docs/hyperpod-slurm.md). No row without such a cluster."""
    spec = config.hyperpod
    if spec is None or clients.sagemaker is None:
        return []
    check = f"hyperpod.slurm_config of the deployed cluster {spec.cluster_name}"
    wanted = "api" if spec.api_driven else "legacy"
    needed = f"{wanted} (this file)"
    try:
        cluster = clients.sagemaker.describe_cluster(ClusterName=spec.cluster_name)
    except ClientError as error:
        if _error_code(error) in ("ResourceNotFound", "ValidationException"):
            return []
        return [_failed_call(check, needed, error, clients.sagemaker)]
    except BotoCoreError as error:
        return [_failed_call(check, needed, error, clients.sagemaker)]
    deployed = "api" if any("SlurmConfig" in g for g in cluster.get("InstanceGroups", [])) else "legacy"
    shape = {
        "api": "api (SlurmConfig on its instance groups)",
        "legacy": "legacy (no SlurmConfig: provisioning_parameters.json)",
    }[deployed]
    if deployed == wanted:
        return [Check(check=check, needed=needed, available=shape, passed=True, remedy="")]
    remedy = (
        "state hyperpod.slurm_config: legacy to keep the cluster as deployed; deploying api would fail and roll "
        "back, or move the cluster over for good (docs/hyperpod-slurm.md)"
        if deployed == "legacy"
        else "state hyperpod.slurm_config: api: a cluster configured through the API cannot go back to "
        "provisioning_parameters.json"
    )
    return [Check(check=check, needed=needed, available=shape, passed=False, remedy=remedy)]
