"""HyperPod clusters (Slurm or EKS) and their instance groups."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from training_clusters.diagram.graph import TIMES, EdgeKind, Node, NodeKind, NodeRole
from training_clusters.diagram.readers.base import GraphReader
from training_clusters.diagram.template import (
    ON_DEMAND,
    _catalog_efa,
    _count,
    _dict,
    _group_details,
    _hyperpod_roles,
    _list,
    _literal,
    _node_labels,
    _taint,
    _target,
    _targets,
    _text,
    _training_plan,
)


def _quota_resource(resource: Mapping[str, Any]) -> str:
    """One ``ComputeQuotaResourceConfig`` in words: instances, amounts and MIG partitions of its type."""
    instance_type = _text(resource.get("InstanceType"))
    partition = _dict(resource.get("AcceleratorPartition"))
    parts = [f"{_text(resource['Count'])} {TIMES} {instance_type}"] if "Count" in resource else []
    for key, unit in (("Accelerators", "accelerators"), ("VCpu", "vCPUs"), ("MemoryInGiB", "GiB")):
        if key in resource:
            parts.append(f"{_text(resource[key])} {unit} of {instance_type}")
    if partition:
        parts.append(
            f"{_text(partition.get('Count'))} {TIMES} {_text(partition.get('Type'))} of {instance_type}"
        )
    return ", ".join(parts)


class HyperPodReader(GraphReader):
    def hyperpod_clusters(self, *, on_eks: bool) -> None:
        for cluster_id, props in self.of_type("AWS::SageMaker::Cluster"):
            orchestrator = "EKS" if "Eks" in _dict(props.get("Orchestrator")) else "Slurm"
            if (orchestrator == "EKS") is not on_eks:
                continue
            details = [f"orchestrator {orchestrator}"]
            if "NodeRecovery" in props:
                details.append(f"node recovery {_text(props['NodeRecovery']).lower()}")
            if _dict(props.get("AutoScaling")).get("Mode") == "Enable":
                # the groups' counts are where Karpenter starts them; their NodePools bound them
                details.append("Karpenter autoscaling: groups start at 0, NodePools set the most")
            details += self.task_governance(cluster_id)
            self.add(
                Node(
                    cluster_id,
                    NodeKind.CLUSTER,
                    f"SageMaker HyperPod {_text(props.get('ClusterName'))}",
                    tuple(details),
                    logical_id=cluster_id,
                )
            )
            self.around.append(cluster_id)
            parameters, deployment = self.lifecycle_parameters(props)
            roles = _hyperpod_roles(parameters, orchestrator)
            subnets = self.subnet_targets(_dict(props.get("VpcConfig")).get("Subnets"))
            mount = _literal(parameters.get("fsx_mount_dir")) or ""
            file_systems = [
                t
                for t in _targets(_dict(self.resources.get(deployment or "", {})).get("Properties"))
                if self.type_of(t) == "AWS::FSx::FileSystem"
            ]
            eks = _target(_dict(_dict(props.get("Orchestrator")).get("Eks")).get("ClusterArn"))
            # API-driven Slurm: HyperPod's AccountingDatabase instead of the lifecycle settings' database.
            accounting = _dict(_dict(props.get("Orchestrator")).get("Slurm")).get("AccountingDatabase")
            databases = [
                t
                for t in (
                    *_targets(_dict(self.resources.get(deployment or "", {})).get("Properties")),
                    *_targets(accounting),
                )
                if self.type_of(t) == "AWS::RDS::DBCluster"
            ]
            for group in _list(props.get("InstanceGroups")):
                group = _dict(group)
                override = _dict(group.get("OverrideVpcConfig")).get("Subnets")
                node_id = self.instance_group(
                    cluster_id, group, roles, self.subnet_targets(override) if override else subnets
                )
                if eks in self.nodes and eks is not None:
                    self.members.setdefault(eks, []).append(node_id)
                    kubernetes = _dict(group.get("KubernetesConfig"))
                    self.scheduling[node_id] = _node_labels(
                        _dict(kubernetes.get("Labels")),
                        [self.nodes[node_id].instance_type],
                        [_taint(t) for t in _list(kubernetes.get("Taints"))],
                    )
                else:
                    self.link(node_id, file_systems, EdgeKind.MOUNTS, mount)
                    self.hyperpod_mounts(node_id, group)
                if self.nodes[node_id].role is NodeRole.CONTROLLER:
                    self.link(node_id, databases, EdgeKind.DATABASE, "slurmdbd")
                self.link(
                    node_id,
                    _targets(_dict(group.get("LifeCycleConfig")).get("SourceS3Uri")),
                    EdgeKind.FETCHES,
                    "lifecycle scripts",
                )

    def hyperpod_mounts(self, node_id: str, group: Mapping[str, Any]) -> None:
        """API-driven Slurm: the FSx file systems HyperPod mounts on a group (``FsxLustreConfig``)."""
        for config in _list(group.get("InstanceStorageConfigs")):
            lustre = _dict(_dict(config).get("FsxLustreConfig"))
            targets = [t for t in _targets(lustre) if self.type_of(t) == "AWS::FSx::FileSystem"]
            self.link(node_id, targets, EdgeKind.MOUNTS, _literal(lustre.get("MountPath")) or "")

    def task_governance(self, cluster_id: str) -> list[str]:
        """The cluster policy and each team's compute quota of SageMaker HyperPod task governance, one line each."""
        lines = []
        for _, props in self.of_type("AWS::SageMaker::ClusterSchedulerConfig"):
            if _target(props.get("ClusterArn")) != cluster_id:
                continue
            config = _dict(props.get("SchedulerConfig"))
            classes = ", ".join(
                f"{_text(_dict(c).get('Name'))} {_text(_dict(c).get('Weight'))}"
                for c in _list(config.get("PriorityClasses"))
            )
            lines.append(
                f"task governance: priority classes {classes or 'none'}; fair share "
                f"{_text(config.get('FairShare', 'Enabled')).lower()}; idle sharing "
                f"{_text(config.get('IdleResourceSharing', 'Enabled')).lower()}"
            )
        for _, props in self.of_type("AWS::SageMaker::ComputeQuota"):
            if _target(props.get("ClusterArn")) != cluster_id:
                continue
            config = _dict(props.get("ComputeQuotaConfig"))
            quota = "; ".join(_quota_resource(_dict(r)) for r in _list(config.get("ComputeQuotaResources")))
            sharing = _dict(config.get("ResourceSharingConfig"))
            limit = sharing.get("BorrowLimit")
            lines.append(
                f"team {_text(_dict(props.get('ComputeQuotaTarget')).get('TeamName'))}: {quota or 'no quota'}, "
                f"{_text(sharing.get('Strategy', 'LendAndBorrow'))}"
                + (f" (borrows up to {_text(limit)} %)" if limit is not None else "")
            )
        return lines

    def instance_group(
        self,
        cluster_id: str,
        group: Mapping[str, Any],
        roles: Mapping[str, tuple[NodeRole, str | None]],
        subnets: list[str],
    ) -> str:
        name = _text(group.get("InstanceGroupName"))
        instance_type = _literal(group.get("InstanceType"))
        count = _count(group.get("InstanceCount"), group.get("MinInstanceCount"), group.get("InstanceCount"))
        efa = _catalog_efa(instance_type)
        role, partition = roles.get(name, (None, None))
        details = _group_details(instance_type, count, efa)
        if partition is not None:
            details.append(f"Slurm partition {partition}")
        for config in _list(group.get("InstanceStorageConfigs")):
            volume = _dict(_dict(config).get("EbsVolumeConfig"))
            size = volume.get("VolumeSizeInGB")
            if size is not None:
                kind = "root volume" if volume.get("RootVolume") is True else "extra volume"
                details.append(f"{_text(size)} GiB {kind}")
        checks = [_text(c) for c in _list(group.get("OnStartDeepHealthChecks"))]
        if checks:
            details.append(f"deep health checks: {', '.join(checks)}")
        node_id = f"{cluster_id}/group/{name}"
        self.add_node_group(
            node_id,
            f"{role.value} group {name}" if role is not None else f"instance group {name}",
            details,
            cluster=cluster_id,
            role=role,
            instance_type=instance_type,
            count=count,
            efa=efa,
            subnets=subnets,
            capacity=_training_plan(group["TrainingPlanArn"]) if "TrainingPlanArn" in group else ON_DEMAND,
        )
        return node_id

    def lifecycle_parameters(self, cluster: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The settings uploaded where the cluster's lifecycle scripts come from (every file of the upload,
        merged), and the deployment that uploads them."""
        uris = {
            _text(_dict(_dict(g).get("LifeCycleConfig")).get("SourceS3Uri"), "{bucket}")
            for g in _list(cluster.get("InstanceGroups"))
        }
        buckets = {
            t
            for g in _list(cluster.get("InstanceGroups"))
            for t in _targets(_dict(_dict(g).get("LifeCycleConfig")).get("SourceS3Uri"))
        }
        for deployment_id, props in self.of_type("Custom::CDKBucketDeployment"):
            bucket = _target(props.get("DestinationBucketName"))
            prefix = _text(props.get("DestinationBucketKeyPrefix", ""))
            if bucket in buckets and f"s3://{{bucket}}/{prefix}" in uris:
                settings: dict[str, Any] = {}
                for key in _list(props.get("SourceObjectKeys")):
                    settings.update(self.uploads.get(_text(key), {}))
                return settings, deployment_id
        return {}, None


def hyperpod_clusters(builder: HyperPodReader) -> None:
    """Draw each HyperPod cluster orchestrated by Slurm."""
    builder.hyperpod_clusters(on_eks=False)


def hyperpod_eks_clusters(builder: HyperPodReader) -> None:
    """Draw each HyperPod cluster orchestrated by EKS (its EKS cluster is drawn by :func:`eks_clusters`)."""
    builder.hyperpod_clusters(on_eks=True)
