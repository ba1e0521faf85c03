"""HyperPodEnvironment: network + FSx + a SageMaker HyperPod Slurm cluster that mounts it."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from training_clusters.config import (
    EnvironmentConfig,
    HyperPodConfig,
    HyperPodInstanceGroupConfig,
    UserConfig,
    stated_capacity,
)
from training_clusters.constructs.hyperpod.cluster import (
    HyperPodCluster,
    InstanceGroup,
    LifecycleOptions,
    LustreMount,
    ssm_target_hint,
)
from training_clusters.constructs.slurm.accounting import SlurmAccountingDatabase
from training_clusters.constructs.slurm.users import TeamUser
from training_clusters.model.options import HyperPodAccounting
from training_clusters.stacks.base import (
    DESTROY_STEP,
    SLURM_ACCEPTANCE_STEP,
    SLURM_RUN_STEP,
    TrainingEnvironmentStack,
)

#: Days between rotations of slurmdbd's database password (alternating users: slurmdbd keeps working on its
#: login for a whole period, and the controller moves to the new one within the hour).
SLURMDBD_ROTATION_DAYS = 30


class HyperPodEnvironment(TrainingEnvironmentStack):
    """A HyperPod cluster in the placement subnet, in the EFA group, mounting the shared FSx."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: EnvironmentConfig,
        environment_name: str,
        environment_file: str | None = None,
    ) -> None:
        super().__init__(
            scope, id, config=config, environment_name=environment_name, environment_file=environment_file
        )
        assert config.hyperpod is not None
        spec = config.hyperpod
        lustre = None
        if self.shared_storage is not None and self.mount_dir is not None:
            lustre = LustreMount(
                dns_name=self.shared_storage.dns_name,
                mount_name=self.shared_storage.mount_name,
                mount_dir=self.mount_dir,
            )
        #: The Aurora MySQL database of slurmdbd (``accounting: external``), else None; slurmdbd's password rotates
        #: every SLURMDBD_ROTATION_DAYS days (the controller follows the secret hourly).
        self.accounting_database = (
            SlurmAccountingDatabase(
                self, "Accounting", vpc=self.network.vpc, slurmdbd_rotation_days=SLURMDBD_ROTATION_DAYS
            )
            if spec.accounting is HyperPodAccounting.EXTERNAL
            else None
        )
        self.cluster = HyperPodCluster(
            self,
            "HyperPod",
            cluster_name=spec.cluster_name,
            vpc=self.network.vpc,
            subnet=self.network.placement_subnet(),
            instance_groups=[_instance_group(g) for g in spec.instance_groups],
            lustre=lustre,
            additional_security_groups=[self.network.efa_security_group],
            node_recovery=spec.node_recovery,
            lifecycle=LifecycleOptions(
                enable_enroot_pyxis=spec.enable_enroot_pyxis,
                enable_observability=spec.enable_observability,
                enable_docker=spec.enable_docker,
                enable_pam_slurm_adopt=spec.enable_pam_slurm_adopt,
                team_logins_on_controller=spec.team_logins_on_controller,
                extra={"download_sha256": dict(spec.download_sha256)} if spec.download_sha256 else {},
            ),
            accounting=self.accounting_database or spec.accounting,
            users=[_team_user(u) for u in config.users],
            node_provisioning_mode=spec.node_provisioning_mode,
            slurm_config=spec.slurm_config,
            slurm_config_strategy=spec.slurm_config_strategy,
        )
        if self.shared_storage is not None:
            self.shared_storage.allow_clients_from(self.cluster)
        if self.accounting_database is not None:
            # slurmdbd on the controller (ours, or HyperPod's through AccountingDatabase) is the database's only
            # client: team users log in to the others.
            self.accounting_database.connections.allow_default_port_from(self.cluster.controller_connections)
            self._retain_database_subnets(self.accounting_database)
        self._add_outputs(spec)

    def _ssm_command(self, spec: HyperPodConfig, group: str) -> str:
        """``aws ssm start-session`` to a node of ``group``, with the command that finds its instance id."""
        command: str = cdk.Fn.join(
            "",
            [
                "aws ssm start-session --region ",
                self.region,
                " --target ",
                ssm_target_hint(self.cluster.cluster_id, group),
                "   # instance id: aws sagemaker list-cluster-nodes --region ",
                self.region,
                f" --cluster-name {spec.cluster_name} --instance-group-name-contains {group}"
                " --query 'ClusterNodeSummaries[0].InstanceId' --output text",
            ],
        )
        return command

    def _add_outputs(self, spec: HyperPodConfig) -> None:
        controller = self.cluster.controller_group
        assert controller is not None
        self.output("ClusterArn", self.cluster.cluster_arn, "HyperPod cluster ARN")
        self.output(
            "ControllerSsmCommand",
            self._ssm_command(spec, controller.name),
            "Reach the Slurm controller through SSM (no SSH, no public IP)",
        )
        login = self.cluster.login_group
        if login is not None:
            self.output(
                "LoginNodeSsmCommand",
                self._ssm_command(spec, login.name),
                "Reach a login node through SSM, where the team logs in (training-clusters connect FILE --node login)",
            )
        self.output(
            "LifecycleLogGroup",
            cdk.Fn.join("", ["/aws/sagemaker/Clusters/", spec.cluster_name, "/", self.cluster.cluster_id]),
            "CloudWatch log group of the lifecycle scripts (one stream per node)",
        )
        self.output(
            "LifecycleScriptsUri",
            self.cluster.source_s3_uri,
            "Where the lifecycle scripts and their settings were uploaded",
        )

        self.next_steps(
            "Connect: run [ControllerSsmCommand] (SSM Session Manager; with users, the team logs in on the "
            "login node)",
            SLURM_ACCEPTANCE_STEP,
            SLURM_RUN_STEP,
            "A node that fails: its lifecycle script's log is in [LifecycleLogGroup], one stream per node",
            DESTROY_STEP,
        )


def _instance_group(spec: HyperPodInstanceGroupConfig) -> InstanceGroup:
    return InstanceGroup(
        name=spec.name,
        instance_type=spec.instance_type,
        instance_count=spec.count,
        role=spec.role,
        partition=spec.partition,
        threads_per_core=spec.threads_per_core,
        extra_volume_gib=spec.extra_volume_gib,
        deep_health_checks=spec.deep_health_checks,
        capacity=stated_capacity(spec.capacity),
        image_id=spec.image_id,
        root_volume_gib=spec.root_volume_gib,
    )


def _team_user(spec: UserConfig) -> TeamUser:
    return TeamUser(
        name=spec.name,
        uid=spec.uid,
        gid=spec.gid,
        groups={group.name: group.gid for group in spec.groups},
        ssh_public_keys=tuple(spec.ssh_public_keys),
    )
