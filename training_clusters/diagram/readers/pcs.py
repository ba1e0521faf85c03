"""AWS PCS clusters, their node groups and queues."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from training_clusters.diagram.graph import EdgeKind, Node, NodeKind, NodeRole
from training_clusters.diagram.readers.base import GraphReader
from training_clusters.diagram.template import (
    _count,
    _dict,
    _efa_interfaces,
    _group_details,
    _launch_template_capacity,
    _list,
    _literal,
    _target,
    _targets,
    _text,
)


class PcsReader(GraphReader):
    def pcs_clusters(self) -> None:
        queued: dict[str, list[str]] = {}
        for _, props in self.of_type("AWS::PCS::Queue"):
            for configuration in _list(props.get("ComputeNodeGroupConfigurations")):
                group = _target(_dict(configuration).get("ComputeNodeGroupId"))
                if group is not None:
                    queued.setdefault(group, []).append(_text(props.get("Name")))
        for cluster_id, props in self.of_type("AWS::PCS::Cluster"):
            scheduler = _dict(props.get("Scheduler"))
            slurm = _dict(props.get("SlurmConfiguration"))
            details = [
                f"{_text(scheduler.get('Type'), 'SLURM').capitalize()} {_text(scheduler.get('Version'))}"
            ]
            details.append(f"size {_text(props.get('Size'))}")
            accounting = _literal(_dict(slurm.get("Accounting")).get("Mode"))
            if accounting and accounting != "NONE":
                details.append(f"accounting {accounting.lower()}")
            self.add(
                Node(
                    cluster_id,
                    NodeKind.CLUSTER,
                    f"AWS PCS {_text(props.get('Name'))}",
                    tuple(details),
                    logical_id=cluster_id,
                )
            )
            self.around.append(cluster_id)
            plane = f"{cluster_id}/control-plane"
            self.add(
                Node(
                    plane, NodeKind.CONTROL_PLANE, "managed Slurm controller", ("run by AWS PCS",), cluster_id
                )
            )
            self.link(
                plane, self.subnet_targets(_dict(props.get("Networking")).get("SubnetIds")), EdgeKind.RUNS_IN
            )
        for group_id, props in self.of_type("AWS::PCS::ComputeNodeGroup"):
            self.pcs_node_group(group_id, props, queued.get(group_id, []))

    def pcs_node_group(self, group_id: str, props: Mapping[str, Any], queues: list[str]) -> None:
        cluster = _target(props.get("ClusterId"))
        template_id = _target(_dict(props.get("CustomLaunchTemplate")).get("TemplateId"))
        data = _dict(
            _dict(_dict(self.resources.get(template_id or "", {})).get("Properties")).get(
                "LaunchTemplateData"
            )
        )
        configs = _list(props.get("InstanceConfigs"))
        instance_type = _literal(_dict(configs[0]).get("InstanceType")) if configs else None
        efa = _efa_interfaces(data)
        scaling = _dict(props.get("ScalingConfiguration"))
        count = _count(None, scaling.get("MinInstanceCount"), scaling.get("MaxInstanceCount"))
        name = _text(props.get("Name"))
        details = _group_details(instance_type, count, efa)
        details.append(f"queue {', '.join(queues)}" if queues else "login (in no queue)")
        self.add_node_group(
            group_id,
            f"node group {name}",
            details,
            cluster=cluster,
            logical_id=group_id,
            role=NodeRole.COMPUTE if queues else NodeRole.LOGIN,
            instance_type=instance_type,
            count=count,
            efa=efa,
            subnets=self.subnet_targets(props.get("SubnetIds")),
            placement=_target(_dict(data.get("Placement")).get("GroupName")),
            capacity=_launch_template_capacity(data, props.get("PurchaseOption")),
        )
        user_data = data.get("UserData")
        mount = re.search(r"mount_dir='([^']*)'", _text(_dict(user_data).get("Fn::Base64", user_data), ""))
        file_systems = [t for t in _targets(user_data) if self.type_of(t) == "AWS::FSx::FileSystem"]
        self.link(group_id, file_systems, EdgeKind.MOUNTS, mount.group(1) if mount else "")


def pcs_clusters(builder: PcsReader) -> None:
    """Draw each AWS PCS cluster with its node groups and queues."""
    builder.pcs_clusters()
