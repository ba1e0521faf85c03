"""PcsEnvironment: network + FSx + an AWS Parallel Computing Service Slurm cluster that mounts it."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from training_clusters.config import EnvironmentConfig, PcsComputeNodeGroupConfig, PcsConfig
from training_clusters.constructs.pcs.cluster import PcsCluster, PcsComputeNodeGroup, PcsLoginNodes, PcsQueue
from training_clusters.stacks.base import (
    DESTROY_STEP,
    SLURM_ACCEPTANCE_STEP,
    SLURM_RUN_STEP,
    TrainingEnvironmentStack,
)


class PcsEnvironment(TrainingEnvironmentStack):
    """An AWS PCS cluster in the placement subnet and group, its EFA nodes in the EFA group, mounting the FSx.

    Outputs (besides the base stack's): ``ClusterId``, ``ClusterArn``, ``LoginNodeSsmCommand`` (when there
    are login nodes), ``NodeSecurityGroupId`` and ``ClusterLogs`` (where PCS's own logs and the nodes' are).
    """

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
        assert config.pcs is not None
        spec = config.pcs
        self.cluster = PcsCluster(
            self,
            "Pcs",
            cluster_name=spec.cluster_name or environment_name,
            vpc=self.network.vpc,
            subnet=self.network.placement_subnet(),
            compute_node_groups=[_node_group(g) for g in spec.compute_node_groups],
            queues=_queues(spec),
            login_nodes=PcsLoginNodes(
                instance_type=spec.login_nodes.instance_type,
                count=spec.login_nodes.count,
                name=spec.login_nodes.name,
                root_volume_size_gib=spec.login_nodes.root_volume_size_gib,
            ),
            size=spec.size,
            slurm_version=spec.slurm.version,
            accounting=spec.slurm.accounting,
            scale_down_idle_time_seconds=spec.slurm.scale_down_idle_time_seconds,
            slurm_custom_settings=spec.slurm.custom_settings or None,
            ami_id=spec.ami_id,
            ami_ssm_parameter=spec.ami_ssm_parameter,
            placement_group=self.placement_group,
            efa_security_group=self.network.efa_security_group,
            file_system=self.shared_storage,
            mount_dir=self.mount_dir or "/fsx",
        )
        if self.shared_storage is not None:
            self.shared_storage.allow_clients_from(self.cluster)
        self._add_outputs()

    def _add_outputs(self) -> None:
        self.output("ClusterId", self.cluster.cluster_id, "AWS PCS cluster id")
        self.output("ClusterArn", self.cluster.cluster_arn, "AWS PCS cluster ARN")
        self.output(
            "NodeSecurityGroupId",
            self.cluster.node_security_group.security_group_id,
            "Security group every PCS node carries (allow shared services to it)",
        )
        if self.cluster.login_node_group is not None:
            self.output(
                "LoginNodeSsmCommand",
                self.cluster.login_ssm_command(self.region),
                "Open a shell on a login node through SSM Session Manager (no SSH, no key pair)",
            )
        self.output(
            "ClusterLogs",
            cdk.Fn.join(
                "",
                [
                    "Slurm daemons on the nodes: /var/log/slurmd.log, /var/log/amazon/pcs/ (SSM into a node); "
                    "controller logs: configure PCS log delivery for cluster ",
                    self.cluster.cluster_id,
                ],
            ),
            "Where the cluster's logs are",
        )
        connect = (
            "Connect: run [LoginNodeSsmCommand] (SSM Session Manager)"
            if self.cluster.login_node_group is not None
            else "Connect: aws ssm start-session to a compute node (this file has no login nodes)"
        )
        self.next_steps(
            connect,
            SLURM_ACCEPTANCE_STEP,
            SLURM_RUN_STEP,
            "A node that fails: see [ClusterLogs]",
            DESTROY_STEP,
        )


def _node_group(spec: PcsComputeNodeGroupConfig) -> PcsComputeNodeGroup:
    return PcsComputeNodeGroup(
        name=spec.name,
        instance_type=spec.instance_type,
        min_count=spec.min_count,
        max_count=spec.max_count,
        capacity=spec.node_capacity(),
        efa=spec.efa,
        efa_interfaces=spec.efa_interfaces,
        root_volume_size_gib=spec.root_volume_size_gib,
    )


def _queues(spec: PcsConfig) -> list[PcsQueue] | None:
    if spec.queues is None:
        return None
    return [PcsQueue(name=q.name, compute_node_groups=list(q.compute_node_groups)) for q in spec.queues]
