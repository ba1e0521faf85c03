"""ParallelCluster clusters: head node, login pools, queues and shared storage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from training_clusters.diagram.graph import TIMES, EdgeKind, Node, NodeKind, NodeRole
from training_clusters.diagram.readers.base import GraphReader
from training_clusters.diagram.template import (
    _DEPLOY_TIME,
    ON_DEMAND,
    _capacity,
    _catalog_efa,
    _count,
    _dict,
    _group_details,
    _list,
    _literal,
    _reservation,
    _target,
    _targets,
    _text,
)


class ParallelClusterReader(GraphReader):
    def parallelclusters(self) -> None:
        for cluster_id, props in self.of_type("Custom::PclusterCluster"):
            config = _dict(props.get("ClusterConfiguration"))
            scheduling = _dict(config.get("Scheduling"))
            image = _dict(config.get("Image"))
            retained_by = (
                "ParallelCluster DeletionPolicy Retain" if props.get("DeletionPolicy") == "Retain" else None
            )
            self.add(
                Node(
                    cluster_id,
                    NodeKind.CLUSTER,
                    f"AWS ParallelCluster {_text(props.get('ClusterName'))}",
                    (f"{_text(scheduling.get('Scheduler'), 'slurm')} on {_text(image.get('Os'))}",),
                    logical_id=cluster_id,
                    retained_by=retained_by,
                )
            )
            self.around.append(cluster_id)
            head = _dict(config.get("HeadNode"))
            pools = [_dict(p) for p in _list(_dict(config.get("LoginNodes")).get("Pools"))]
            clients = [self.head_node(cluster_id, head, login=not pools)]
            logins = [self.login_pool(cluster_id, pool) for pool in pools]
            database = _dict(_dict(scheduling.get("SlurmSettings")).get("Database"))
            self.link(
                clients[0], self.of_kind_in(database, "AWS::RDS::DBCluster"), EdgeKind.DATABASE, "slurmdbd"
            )
            self.link(
                clients[0],
                self.of_kind_in(head.get("CustomActions"), "AWS::S3::Bucket"),
                EdgeKind.FETCHES,
                "custom actions",
            )
            for queue in _list(scheduling.get("SlurmQueues")):
                groups = self.slurm_queue(cluster_id, _dict(queue))
                buckets = self.of_kind_in(_dict(queue).get("CustomActions"), "AWS::S3::Bucket")
                for group in groups:
                    self.link(group, buckets, EdgeKind.FETCHES, "custom actions")
                clients += groups
            for pool, login in zip(pools, logins, strict=True):
                self.link(
                    login,
                    self.of_kind_in(pool.get("CustomActions"), "AWS::S3::Bucket"),
                    EdgeKind.FETCHES,
                    "custom actions",
                )
            clients += logins
            for index, storage in enumerate(_list(config.get("SharedStorage"))):
                self.shared_storage(cluster_id, index, _dict(storage), clients)

    def head_node(self, cluster_id: str, head: Mapping[str, Any], *, login: bool) -> str:
        """The head node: the Slurm controller, and where users log in unless the cluster has login pools."""
        node_id = f"{cluster_id}/head-node"
        instance_type = _literal(head.get("InstanceType"))
        self.add_node_group(
            node_id,
            "head node",
            [
                f"{instance_type or _DEPLOY_TIME} {TIMES} 1",
                "Slurm controller and login"
                if login
                else "Slurm controller (users log in on the login pool)",
            ],
            cluster=cluster_id,
            role=NodeRole.HEAD,
            instance_type=instance_type,
            count="1",
            efa=0,
            subnets=self.subnet_targets(_dict(head.get("Networking")).get("SubnetId")),
            capacity=ON_DEMAND,
        )
        return node_id

    def login_pool(self, cluster_id: str, pool: Mapping[str, Any]) -> str:
        """A pool of ParallelCluster login nodes (``LoginNodes`` ``Pools``): where users log in and submit."""
        name = _text(pool.get("Name"))
        node_id = f"{cluster_id}/login/{name}"
        instance_type = _literal(pool.get("InstanceType"))
        count = _count(pool.get("Count"), None, None)
        self.add_node_group(
            node_id,
            f"login pool {name}",
            [f"{instance_type or _DEPLOY_TIME} {TIMES} {count}", "Slurm login: users log in and submit here"],
            cluster=cluster_id,
            role=NodeRole.LOGIN,
            instance_type=instance_type,
            count=count,
            efa=0,
            subnets=self.subnet_targets(_dict(pool.get("Networking")).get("SubnetIds")),
            capacity=ON_DEMAND,
        )
        return node_id

    def slurm_queue(self, cluster_id: str, queue: Mapping[str, Any]) -> list[str]:
        name = _text(queue.get("Name"))
        networking = _dict(queue.get("Networking"))
        placement = _dict(networking.get("PlacementGroup"))
        placement_target = _target(placement.get("Name") or placement.get("Id"))
        managed_placement = placement.get("Enabled") is True and placement_target is None
        added = []
        for resource in _list(queue.get("ComputeResources")):
            resource = _dict(resource)
            node_id = f"{cluster_id}/queue/{name}/{_text(resource.get('Name'))}"
            instance_type = _literal(resource.get("InstanceType"))
            efa_settings = _dict(resource.get("Efa"))
            efa = _catalog_efa(instance_type) if efa_settings.get("Enabled") is True else 0
            count = _count(None, resource.get("MinCount", 0), resource.get("MaxCount", 10))
            details = _group_details(instance_type, count, efa)
            if efa_settings.get("GdrSupport") is True:
                details.append("GPUDirect RDMA")
            if managed_placement:
                details.append("placement group made by ParallelCluster")
            self.add_node_group(
                node_id,
                f"queue {name} / {_text(resource.get('Name'))}",
                details,
                cluster=cluster_id,
                role=NodeRole.COMPUTE,
                instance_type=instance_type,
                count=count,
                efa=efa,
                subnets=self.subnet_targets(networking.get("SubnetIds")),
                placement=placement_target if placement.get("Enabled", True) is not False else None,
                capacity=_capacity(
                    queue.get("CapacityType"),
                    _reservation(resource.get("CapacityReservationTarget"))
                    or _reservation(queue.get("CapacityReservationTarget")),
                ),
            )
            added.append(node_id)
        return added

    def shared_storage(
        self, cluster_id: str, index: int, storage: Mapping[str, Any], clients: list[str]
    ) -> None:
        mount = _text(storage.get("MountDir"))
        kind = _text(storage.get("StorageType"))
        settings = _dict(storage.get(f"{kind}Settings"))
        existing = [t for t in _targets(settings) if t in self.nodes]
        if existing:
            targets = existing
        else:
            node_id = f"{cluster_id}/storage/{index}"
            details = [_text(settings[key]) for key in ("DeploymentType",) if key in settings]
            if "StorageCapacity" in settings:
                details.append(f"{_text(settings['StorageCapacity'])} GiB")
            details.append("made by ParallelCluster")
            policy = _literal(settings.get("DeletionPolicy")) or "Delete"
            self.add(
                Node(
                    node_id,
                    NodeKind.FILE_SYSTEM,
                    {"FsxLustre": "FSx for Lustre"}.get(kind, kind),
                    tuple(details),
                    retained_by=f"ParallelCluster DeletionPolicy {policy}" if policy == "Retain" else None,
                )
            )
            targets = [node_id]
        for client in clients:
            self.link(client, targets, EdgeKind.MOUNTS, mount)


def parallelcluster_clusters(builder: ParallelClusterReader) -> None:
    """Draw each ParallelCluster cluster (``Custom::PclusterCluster``) of the template."""
    builder.parallelclusters()
