"""EKS clusters, their nodegroups, add-ons and the Kubernetes objects applied to them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from training_clusters.diagram.graph import Edge, EdgeKind, Node, NodeKind, NodeRole
from training_clusters.diagram.readers.base import GraphReader
from training_clusters.diagram.scheduling import (
    INSTANCE_TYPE_LABEL,
    may_schedule,
    scopes_in,
)
from training_clusters.diagram.template import (
    _EKS_TAINT_EFFECTS,
    _RUNNING_KINDS,
    _count,
    _dict,
    _efa_interfaces,
    _gpu_count,
    _group_details,
    _json_values,
    _launch_template_capacity,
    _list,
    _literal,
    _manifest_objects,
    _mig,
    _namespaced,
    _node_labels,
    _set_order,
    _sliced,
    _taint,
    _target,
    _targets,
    _text,
    _workload_lines,
    _yaml,
)


class EksReader(GraphReader):
    def eks_clusters(self) -> None:
        for cluster_id, props in self.of_type("AWS::EKS::Cluster"):
            vpc_config = _dict(props.get("ResourcesVpcConfig"))
            name = _literal(props.get("Name"))
            self.add(
                Node(
                    cluster_id,
                    NodeKind.CLUSTER,
                    f"Amazon EKS {name}" if name else "Amazon EKS cluster",
                    (f"Kubernetes {_text(props.get('Version'))}",),
                    logical_id=cluster_id,
                )
            )
            public = vpc_config.get("EndpointPublicAccess", True) is not False
            private = vpc_config.get("EndpointPrivateAccess", False) is True
            endpoint = "public and private" if public and private else "public" if public else "private"
            details = [f"{endpoint} API endpoint"]
            if props.get("EncryptionConfig"):
                details.append("secrets encrypted with KMS")
            plane = f"{cluster_id}/control-plane"
            self.add(Node(plane, NodeKind.CONTROL_PLANE, "EKS control plane", tuple(details), cluster_id))
            self.link(plane, self.subnet_targets(vpc_config.get("SubnetIds")), EdgeKind.RUNS_IN)
        self.eks_nodegroups()
        self.eks_addons()
        self.kubernetes_manifests()

    def eks_nodegroups(self) -> None:
        for group_id, props in self.of_type("AWS::EKS::Nodegroup"):
            cluster = _target(props.get("ClusterName"))
            template = _dict(
                self.resources.get(_target(_dict(props.get("LaunchTemplate")).get("Id")) or "", {})
            )
            data = _dict(_dict(template.get("Properties")).get("LaunchTemplateData"))
            types = _list(props.get("InstanceTypes")) or [data.get("InstanceType")]
            instance_type = _literal(types[0]) if types else None
            efa = _efa_interfaces(data)
            scaling = _dict(props.get("ScalingConfig"))
            count = _count(scaling.get("DesiredSize"), scaling.get("MinSize"), scaling.get("MaxSize"))
            labels = _dict(props.get("Labels"))
            system = labels.get("training-clusters/role") == "system"
            name = _literal(props.get("NodegroupName")) or _literal(labels.get("training-clusters/nodegroup"))
            self.scheduling[group_id] = _node_labels(
                labels,
                [_literal(t) for t in types],
                [_taint(t, _EKS_TAINT_EFFECTS) for t in _list(props.get("Taints"))],
            )
            self.add_node_group(
                group_id,
                f"nodegroup {name}" if name else "system nodegroup" if system else "nodegroup",
                _group_details(instance_type, count, efa),
                cluster=cluster,
                logical_id=group_id,
                role=NodeRole.SYSTEM if system else NodeRole.WORKER,
                instance_type=instance_type,
                count=count,
                efa=efa,
                subnets=self.subnet_targets(props.get("Subnets")),
                placement=_target(_dict(data.get("Placement")).get("GroupName")),
                capacity=_launch_template_capacity(data, props.get("CapacityType")),
            )

    def eks_addons(self) -> None:
        for addon_id, props in self.of_type("AWS::EKS::Addon"):
            version = _literal(props.get("AddonVersion"))
            details = ("EKS add-on", *([version] if version else []))
            self.add_addon(addon_id, props, _text(props.get("AddonName")), details, "ConfigurationValues")
        for chart_id, props in self.of_type("Custom::AWSCDK-EKS-HelmChart"):
            chart = _text(props.get("Chart"))
            details = (
                f"Helm chart {_text(props.get('Version'), 'latest')}",
                f"namespace {_text(props.get('Namespace'), 'default')}",
            )
            self.add_addon(chart_id, props, chart, details, "Values")
        for manifest_id, props in self.of_type("Custom::ReleaseManifest"):
            url = _text(props.get("ManifestUrl"))
            match = re.search(r"githubusercontent\.com/[^/]+/([^/]+)/([^/]+)/", url)
            title = f"{match.group(1)} {match.group(2)}" if match else url.rsplit("/", 1)[-1]
            self.add_addon(manifest_id, props, title, ("release manifest",), None)

    def add_addon(
        self,
        addon_id: str,
        props: Mapping[str, Any],
        title: str,
        details: tuple[str, ...],
        values_property: str | None,
    ) -> None:
        """An add-on in its cluster's box, with the scheduling its ``values_property`` sets (Helm values, an EKS
        add-on's configuration values; a release manifest's pods are not in the template)."""
        cluster = _target(props.get("ClusterName"))
        parent = cluster if cluster in self.nodes else None
        self.add(Node(addon_id, NodeKind.ADDON, title, details, parent, addon_id))
        values = _json_values(props.get(values_property)) if values_property else None
        self.addon_scopes[addon_id] = scopes_in(values) or None

    def schedule_addons(self) -> None:
        """Each cluster's add-ons (and workloads that run pods) in boxes by the node groups they may run on (:mod:`.scheduling`), each box
        with a ``runs on`` edge to those groups: the system nodegroup, the GPU groups, every group, none (a
        selector that matches nothing: its pods stay pending), or the add-on's own defaults."""
        sets: dict[tuple[str, tuple[str, ...] | None], list[str]] = {}
        for addon_id, scopes in sorted(self.addon_scopes.items()):
            cluster = self.nodes[addon_id].parent
            groups = [m for m in self.members.get(cluster or "", []) if m in self.scheduling]
            if cluster is None or not groups:
                continue
            known = {INSTANCE_TYPE_LABEL, *(k for g in groups for k in self.scheduling[g].labels)}
            runs_on = (
                None
                if scopes is None
                else tuple(
                    g for g in groups if any(may_schedule(s, self.scheduling[g], known) for s in scopes)
                )
            )
            sets.setdefault((cluster, runs_on), []).append(addon_id)
        for (cluster, runs_on), addons in sorted(sets.items(), key=lambda item: _set_order(item[0])):
            groups = [m for m in self.members[cluster] if m in self.scheduling]
            title, details = self.addon_set_lines(groups, runs_on)
            set_id = f"{cluster}/add-ons/{'+'.join(runs_on) if runs_on else 'none' if runs_on == () else 'defaults'}"
            self.add(Node(set_id, NodeKind.ADDON_SET, title, details, cluster))
            for addon_id in addons:
                self.nodes[addon_id] = replace(self.nodes[addon_id], parent=set_id)
            self.link(set_id, runs_on or (), EdgeKind.RUNS_ON)

    def gpu_sharing(self) -> None:
        """How each Kubernetes GPU group's GPUs are offered: the MIG layout its ``nvidia.com/mig.config`` label
        names (read from the GPU operator's mig-parted configuration in the template) and the slices it yields,
        or the time-slicing or MPS replicas of the NVIDIA device plugin that runs on it."""
        layouts: dict[str, Any] = {}
        sharing: list[tuple[str, str, int]] = []
        for chart_id, props in self.of_type("Custom::AWSCDK-EKS-HelmChart"):
            values = _dict(_json_values(props.get("Values")))
            for text in _dict(_dict(_dict(values.get("migManager")).get("config")).get("data")).values():
                layouts.update(_dict(_yaml(text).get("mig-configs")))
            config = _dict(values.get("config"))
            chosen = _yaml(_dict(config.get("map")).get(_text(config.get("default"), "default")))
            for mode, name in (("timeSlicing", "time-slicing"), ("mps", "MPS")):
                for resource in _list(_dict(_dict(chosen.get("sharing")).get(mode)).get("resources")):
                    replicas = _dict(resource).get("replicas")
                    if isinstance(replicas, int) and chart_id in self.nodes:
                        sharing.append((chart_id, name, replicas))
        for group_id, labels in self.scheduling.items():
            node = self.nodes[group_id]
            gpus = _gpu_count(node.instance_type)
            layout = labels.labels.get("nvidia.com/mig.config", ("",))[0]
            if layout and gpus:
                self.nodes[group_id] = _sliced(node, *_mig(layout, layouts.get(layout), gpus))
                continue
            for chart_id, name, replicas in sharing:
                if gpus and self.runs_on(chart_id, group_id):
                    line = f"{name}: {replicas} replicas per GPU, {gpus * replicas} nvidia.com/gpu per node"
                    self.nodes[group_id] = _sliced(node, line, gpus * replicas)

    def runs_on(self, addon_id: str, group_id: str) -> bool:
        """Whether the add-on's pods may run on the group (its set's ``runs on`` edges; a set placed by the
        add-on's own defaults may run on any group of its cluster)."""
        addon_set = self.nodes[addon_id].parent or ""
        if addon_set.endswith("/add-ons/defaults"):
            return group_id in self.members.get(self.nodes[addon_set].parent or "", [])
        return Edge(addon_set, group_id, EdgeKind.RUNS_ON) in self.edges

    def addon_set_lines(
        self, groups: list[str], runs_on: tuple[str, ...] | None
    ) -> tuple[str, tuple[str, ...]]:
        if runs_on is None:
            return "placed by their own defaults", ("no node selector, affinity or toleration set",)
        if not runs_on:
            return "on no node group", ("their node selectors or tolerations match none: pods stay pending",)
        if len(runs_on) == len(groups) and len(groups) > 1:
            return "on every node group", ()
        return "on " + ", ".join(self.group_name(g) for g in runs_on), ()

    def group_name(self, group_id: str) -> str:
        """``nodegroup g5 (g5.8xlarge)``: a node group's title and instance type."""
        node = self.nodes[group_id]
        return f"{node.title} ({node.instance_type})" if node.instance_type else node.title

    def kubernetes_manifests(self) -> None:
        """A manifest that names a file system mounts it (a PersistentVolume and its claim); any other
        is a workload the stack applies, placed with the add-ons when it runs pods (a Job, a DaemonSet ...)."""
        for manifest_id, props in self.of_type("Custom::AWSCDK-EKS-KubernetesResource"):
            cluster = _target(props.get("ClusterName"))
            objects = _manifest_objects(props.get("Manifest"))
            file_systems = [
                t for t in _targets(props.get("Manifest")) if self.type_of(t) == "AWS::FSx::FileSystem"
            ]
            if file_systems and cluster in self.nodes:
                claims = [o for o in objects if o.get("kind") == "PersistentVolumeClaim"]
                label = ", ".join(f"PVC {_namespaced(c)}" for c in claims) or "persistent volume"
                self.claims += [(cluster, fs, label) for fs in file_systems]
                continue
            parent = cluster if cluster in self.nodes else None
            self.add(Node(manifest_id, NodeKind.WORKLOAD, *_workload_lines(objects), parent, manifest_id))
            running = [o for o in objects if o.get("kind") in _RUNNING_KINDS]
            if running:
                self.addon_scopes[manifest_id] = scopes_in(running) or None


def eks_clusters(builder: EksReader) -> None:
    """Draw each EKS cluster with its nodegroups, add-ons and Kubernetes objects."""
    builder.eks_clusters()
