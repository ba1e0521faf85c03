"""ParallelClusterEnvironment: network + FSx + an AWS ParallelCluster Slurm cluster that mounts it."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from training_clusters.config import (
    EnvironmentConfig,
    ParallelClusterConfig,
    PclusterComputeResourceConfig,
    PclusterCustomActionConfig,
    PclusterQueueConfig,
)
from training_clusters.constructs.parallelcluster import (
    ComputeResource,
    CustomActionScript,
    HeadNode,
    ParallelCluster,
    SlurmQueue,
    SlurmSettings,
)
from training_clusters.stacks.base import TrainingEnvironmentStack


class ParallelClusterEnvironment(TrainingEnvironmentStack):
    """A ParallelCluster cluster in the placement subnet and group, in the EFA group, mounting the shared FSx.

    Outputs (besides the base stack's): ``ClusterName``, ``HeadNodeInstanceId``, ``HeadNodeSsmCommand`` and
    ``ValidationMessages`` (ParallelCluster's warnings about the configuration).
    """

    def __init__(
        self, scope: Construct, id: str, *, config: EnvironmentConfig, environment_name: str
    ) -> None:
        super().__init__(scope, id, config=config, environment_name=environment_name)
        assert config.parallelcluster is not None
        spec = config.parallelcluster
        self.cluster = ParallelCluster(
            self,
            "ParallelCluster",
            cluster_name=spec.cluster_name or environment_name,
            vpc=self.network.vpc,
            subnet=self.network.placement_subnet(),
            queues=[_queue(q) for q in spec.queues],
            head_node=HeadNode(
                instance_type=spec.head_node.instance_type,
                key_name=spec.head_node.key_name,
                ssh_allowed_ips=spec.head_node.ssh_allowed_ips,
            ),
            os=spec.os,
            placement_group=self.placement_group,
            efa_security_group=self.network.efa_security_group,
            file_system=self.shared_storage,
            mount_dir=self.mount_dir or "/shared",
            slurm_settings=SlurmSettings(
                queue_update_strategy=spec.slurm.queue_update_strategy,
                scaledown_idletime_minutes=spec.slurm.scaledown_idletime_minutes,
            ),
            on_node_configured=self._script(spec.on_node_configured),
            log_retention_days=spec.log_retention_days,
            tags=config.resource_tags(environment_name),
            deletion_policy=spec.deletion_policy,
            provider_lambda_role=(
                iam.Role.from_role_arn(self, "ProviderLambdaRole", spec.provider_lambda_role_arn, mutable=False)
                if spec.provider_lambda_role_arn
                else None
            ),
        )
        if self.shared_storage is not None:
            # both directions: ParallelCluster's create-time check wants outbound Lustre rules too
            self.shared_storage.allow_clients_from(self.cluster)
        self._add_outputs(spec)

    def _script(self, action: PclusterCustomActionConfig | None) -> CustomActionScript | None:
        if action is None:
            return None
        bucket_name, key = action.script.removeprefix("s3://").split("/", 1)
        bucket = s3.Bucket.from_bucket_name(self, "CustomActionBucket", bucket_name)
        return CustomActionScript(bucket=bucket, key=key, args=tuple(action.args))

    def _add_outputs(self, spec: ParallelClusterConfig) -> None:
        cdk.CfnOutput(
            self, "ClusterName", value=self.cluster.cluster_name, description="ParallelCluster name"
        )
        cdk.CfnOutput(
            self,
            "HeadNodeInstanceId",
            value=self.cluster.head_node_instance_id,
            description="EC2 instance id of the head node (Slurm controller and login node)",
        )
        cdk.CfnOutput(
            self,
            "HeadNodeSsmCommand",
            value=self.cluster.ssm_command(),
            description="Open a shell on the head node through SSM Session Manager (no SSH, no key pair)",
        )
        cdk.CfnOutput(
            self,
            "ValidationMessages",
            value=self.cluster.validation_messages,
            description="ParallelCluster's validation warnings about the cluster configuration",
        )
        cdk.CfnOutput(
            self,
            "ClusterLogGroups",
            value=f"/aws/parallelcluster/{self.cluster.cluster_name}-*",
            description="CloudWatch log group of the cluster (ParallelCluster appends its creation timestamp)",
        )


def _queue(spec: PclusterQueueConfig) -> SlurmQueue:
    return SlurmQueue(
        name=spec.name,
        compute_resources=[_compute_resource(r) for r in spec.compute_resources],
        capacity_type=spec.capacity_type,
        capacity=None if spec.capacity is None else spec.capacity.to_capacity(),
        placement=spec.placement,
    )


def _compute_resource(spec: PclusterComputeResourceConfig) -> ComputeResource:
    return ComputeResource(
        name=spec.name,
        instance_type=spec.instance_type,
        min_count=spec.min_count,
        max_count=spec.max_count,
        efa=spec.efa,
        gdr_support=spec.gdr_support,
        disable_simultaneous_multithreading=spec.disable_simultaneous_multithreading,
        capacity=spec.resource_capacity(),
        gpu_health_check=spec.gpu_health_check,
    )
