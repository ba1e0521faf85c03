"""Placement groups, file systems and their mounts, databases and buckets."""

from __future__ import annotations

import re
from dataclasses import replace

from training_clusters.diagram.graph import EdgeKind, Node, NodeKind, NodeRole
from training_clusters.diagram.readers.base import GraphReader
from training_clusters.diagram.template import _dict, _literal, _target, _targets, _text


class StorageReader(GraphReader):
    def placement_groups(self) -> None:
        for group_id, props in self.of_type("AWS::EC2::PlacementGroup"):
            details = [f"strategy {_text(props.get('Strategy', 'cluster'))}"]
            if "PartitionCount" in props:
                details.append(f"{_text(props['PartitionCount'])} partitions")
            if "SpreadLevel" in props:
                details.append(f"spread level {_text(props['SpreadLevel'])}")
            self.add(
                Node(group_id, NodeKind.PLACEMENT_GROUP, "placement group", tuple(details), None, group_id)
            )

    def file_systems(self) -> None:
        for fs_id, props in self.of_type("AWS::FSx::FileSystem"):
            fs_type = _text(props.get("FileSystemType"))
            lustre = _dict(props.get("LustreConfiguration"))
            details = [f"{_text(props.get('StorageCapacity'))} GiB"]
            if lustre:
                details.insert(0, _text(lustre.get("DeploymentType", "SCRATCH_1")))
                if "PerUnitStorageThroughput" in lustre:
                    details.append(f"{_text(lustre['PerUnitStorageThroughput'])} MB/s/TiB")
            title = {"LUSTRE": "FSx for Lustre", "ONTAP": "FSx for ONTAP", "OPENZFS": "FSx for OpenZFS"}.get(
                fs_type, f"FSx ({fs_type})"
            )
            subnets = self.subnet_targets(props.get("SubnetIds"))
            details += self.other_zones(subnets)
            self.add(Node(fs_id, NodeKind.FILE_SYSTEM, title, tuple(details), self.home(subnets), fs_id))
            self.link(fs_id, subnets, EdgeKind.RUNS_IN)

    def mount_hints(self) -> None:
        """A file system no cluster mounts shows the mount point the stack's outputs suggest."""
        mounted = {e.target for e in self.edges if e.kind is EdgeKind.MOUNTS}
        for output in _dict(self.template.get("Outputs")).values():
            value = _dict(output).get("Value")
            text = _text(value, "")
            match = re.search(r" mounted at (\S+)$", text)
            targets = [t for t in _targets(value) if self.type_of(t) == "AWS::FSx::FileSystem"]
            for target in targets:
                if match and target not in mounted and target in self.nodes:
                    node = self.nodes[target]
                    self.nodes[target] = replace(node, details=(*node.details, f"mount {match.group(1)}"))
                    mounted.add(target)

    def databases(self) -> None:
        """RDS and Aurora DB clusters, drawn in (the first of) their subnet group's subnets."""
        writers: dict[str, list[str]] = {}
        for _, props in self.of_type("AWS::RDS::DBInstance"):
            cluster = _target(props.get("DBClusterIdentifier"))
            if cluster is not None:
                writers.setdefault(cluster, []).append(_text(props.get("DBInstanceClass")))
        for db_id, props in self.of_type("AWS::RDS::DBCluster"):
            group = _dict(self.resources.get(_target(props.get("DBSubnetGroupName")) or "", {}))
            subnets = self.subnet_targets(_dict(group.get("Properties")).get("SubnetIds"))
            engine = _text(props.get("Engine"))
            title = {"aurora-mysql": "Aurora MySQL", "aurora-postgresql": "Aurora PostgreSQL"}.get(
                engine, f"RDS {engine}"
            )
            details = [
                f"{'writer' if n == 0 else 'reader'} {kind}" for n, kind in enumerate(writers.get(db_id, []))
            ]
            scaling = _dict(props.get("ServerlessV2ScalingConfiguration"))
            if scaling:
                details.append(f"{_text(scaling.get('MinCapacity'))}-{_text(scaling.get('MaxCapacity'))} ACU")
            details += self.other_zones(subnets)
            self.add(Node(db_id, NodeKind.DATABASE, title, tuple(details), self.home(subnets), db_id))
            self.link(db_id, subnets, EdgeKind.RUNS_IN)

    def buckets(self) -> None:
        """S3 buckets, outside the VPC; a bucket that only receives another's access logs is folded into it."""
        logs_of: dict[str, str] = {}
        for bucket_id, props in self.of_type("AWS::S3::Bucket"):
            destination = _target(_dict(props.get("LoggingConfiguration")).get("DestinationBucketName"))
            if destination is not None and destination != bucket_id:
                logs_of[destination] = bucket_id
        for bucket_id, props in self.of_type("AWS::S3::Bucket"):
            if bucket_id in logs_of:
                self.access_logs_of[bucket_id] = logs_of[bucket_id]
                continue
            name = _literal(props.get("BucketName"))
            self.add(Node(bucket_id, NodeKind.BUCKET, "S3 bucket", (name,) if name else (), None, bucket_id))

    def claimed_mounts(self) -> None:
        """A persistent volume claim is mounted by the pods on a cluster's nodes: the file system is mounted
        from its worker node groups (all its node groups when it has only system ones), never its control
        plane."""
        for cluster, file_system, label in self.claims:
            members = self.members.get(cluster, [])
            workers = [m for m in members if self.nodes[m].role is not NodeRole.SYSTEM] or members
            for member in workers:
                self.link(member, [file_system], EdgeKind.MOUNTS, label)
