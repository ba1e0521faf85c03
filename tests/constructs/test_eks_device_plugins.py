"""GpuEksCluster installs the device plugins its nodegroups need (``device_plugins``), and only those.

Without NVIDIA's plugin no pod can ask for ``nvidia.com/gpu``, without AWS's EFA plugin none for
``vpc.amazonaws.com/efa``, without Neuron's none for ``aws.amazon.com/neuron``: a cluster built from the constructs
alone must schedule GPU pods, as one made by eksctl does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.common.placement import TrainingPlacementGroup
from training_clusters.constructs.eks.addons import (
    EfaDevicePlugin,
    Mps,
    NeuronDevicePlugin,
    NvidiaDevicePlugin,
    efa_device_plugin_values,
    neuron_device_plugin_values,
    nvidia_device_plugin_values,
)
from training_clusters.constructs.eks.cluster import (
    DevicePluginKind,
    EfaNodegroup,
    GpuEksCluster,
    GpuNodegroup,
)
from training_clusters.environments import add_environment
from training_clusters.model.releases import (
    EFA_DEVICE_PLUGIN_CHART,
    NEURON_HELM_CHART,
    NVIDIA_DEVICE_PLUGIN_CHART,
)
from training_clusters.stacks.eks import EksTrainingEnvironment

from ..conftest import AZS, CDK_CONTEXT, REGION, ROOT, PinnedStack

EFA_REPOSITORY = "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"
NVIDIA, EFA, NEURON = (
    NVIDIA_DEVICE_PLUGIN_CHART.chart,
    EFA_DEVICE_PLUGIN_CHART.chart,
    NEURON_HELM_CHART.chart,
)


class Cluster:
    """A stack with a network, a placement group and a GpuEksCluster; nodegroups are added by the test."""

    def __init__(self, tmp_path: Path, **props: Any) -> None:
        app = cdk.App(outdir=str(tmp_path), context=dict(CDK_CONTEXT))
        self.stack = PinnedStack(app, "Test", env=cdk.Environment(region=REGION))
        self.network = TrainingNetwork(self.stack, "Network", availability_zones=AZS)
        self.placement = TrainingPlacementGroup(self.stack, "PlacementGroup")
        self.cluster = GpuEksCluster(self.stack, "Eks", vpc=self.network.vpc, **props)

    def efa(self, id: str, instance_type: str) -> EfaNodegroup:
        return EfaNodegroup(
            self.stack,
            id,
            cluster=self.cluster,
            instance_type=instance_type,
            desired_size=2,
            subnet=self.network.placement_subnet(),
            placement_group=self.placement,
            efa_security_group=self.network.efa_security_group,
        )

    def gpu(self, id: str, instance_type: str) -> GpuNodegroup:
        return GpuNodegroup(self.stack, id, cluster=self.cluster, instance_type=instance_type, desired_size=1)

    def charts(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """Each Helm chart of the template: chart name -> (logical id, values)."""
        template = Template.from_stack(self.stack).to_json()
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] == "Custom::AWSCDK-EKS-HelmChart":
                chart = resource["Properties"]["Chart"]
                assert chart not in found, f"{chart} installed twice"
                found[chart] = (logical_id, json.loads(resource["Properties"]["Values"]))
        return found


def _logical_id(stack: cdk.Stack, chart: Any) -> str:
    """The logical id of a HelmChart's CloudFormation resource (its custom resource's own child)."""
    resource = chart.node.default_child.node.default_child
    assert isinstance(resource, cdk.CfnResource)
    logical_id: str = stack.resolve(stack.get_logical_id(resource))
    return logical_id


def _expected(kind: str, types: list[str]) -> dict[str, Any]:
    if kind == NVIDIA:
        return nvidia_device_plugin_values(instance_types=types)
    if kind == EFA:
        return efa_device_plugin_values(instance_types=types, image_repository=EFA_REPOSITORY)
    return neuron_device_plugin_values(instance_types=types)


@pytest.mark.parametrize(
    ("nodegroups", "wanted"),
    [
        ([], {}),
        ([("efa", "p5.48xlarge")], {NVIDIA: ["p5.48xlarge"], EFA: ["p5.48xlarge"]}),
        ([("efa", "trn1.32xlarge")], {EFA: ["trn1.32xlarge"], NEURON: ["trn1.32xlarge"]}),
        ([("gpu", "g5.2xlarge")], {NVIDIA: ["g5.2xlarge"]}),
        ([("gpu", "trn1.32xlarge")], {NEURON: ["trn1.32xlarge"]}),
        (
            [
                ("gpu", "g5.2xlarge"),
                ("efa", "p5.48xlarge"),
                ("efa", "p4d.24xlarge"),
                ("gpu", "trn1.32xlarge"),
            ],
            {
                NVIDIA: ["g5.2xlarge", "p4d.24xlarge", "p5.48xlarge"],
                EFA: ["p4d.24xlarge", "p5.48xlarge"],
                NEURON: ["trn1.32xlarge"],
            },
        ),
    ],
    ids=["none", "efa-gpu", "efa-trainium", "gpu", "trainium", "mixed"],
)
def test_each_plugin_is_installed_for_exactly_the_nodegroups_that_need_it(
    tmp_path: Path, nodegroups: list[tuple[str, str]], wanted: dict[str, list[str]]
) -> None:
    built = Cluster(tmp_path)
    for index, (kind, instance_type) in enumerate(nodegroups):
        getattr(built, kind)(f"Group{index}", instance_type)
    charts = built.charts()
    assert {chart: values for chart, (_, values) in charts.items()} == {
        chart: _expected(chart, types) for chart, types in wanted.items()
    }
    # under the cluster, with the ids the cluster's attribute names
    by_chart = {NVIDIA: "NvidiaDevicePlugin", EFA: "EfaDevicePlugin", NEURON: "NeuronDevicePlugin"}
    assert {logical_id for logical_id, _ in charts.values()} == {
        _logical_id(built.stack, built.cluster.node.find_child(by_chart[chart])) for chart in wanted
    }
    assert set(built.cluster.device_plugin_charts) == {
        {NVIDIA: DevicePluginKind.NVIDIA, EFA: DevicePluginKind.EFA, NEURON: DevicePluginKind.NEURON}[chart]
        for chart in wanted
    }


def test_device_plugins_false_installs_none(tmp_path: Path) -> None:
    built = Cluster(tmp_path, device_plugins=False)
    built.efa("P5", "p5.48xlarge")
    built.efa("Trn", "trn1.32xlarge")
    built.gpu("G5", "g5.2xlarge")
    assert built.charts() == {}
    assert built.cluster.device_plugin_charts == {}


@pytest.mark.parametrize("plugin_first", [True, False], ids=["plugin-first", "nodegroups-first"])
def test_a_plugin_given_for_the_cluster_replaces_the_clusters_own_of_that_kind(
    tmp_path: Path, plugin_first: bool
) -> None:
    built = Cluster(tmp_path)

    def given() -> None:
        NvidiaDevicePlugin(
            built.stack, "Shared", cluster=built.cluster, instance_types=["g5.2xlarge"], mps=Mps(replicas=4)
        )

    if plugin_first:
        given()
    built.efa("P5", "p5.48xlarge")
    built.gpu("G5", "g5.2xlarge")
    if not plugin_first:
        given()
    charts = built.charts()
    # the given plugin (MPS on g5 only), the cluster's EFA plugin, and no second NVIDIA plugin
    assert charts[NVIDIA][1] == nvidia_device_plugin_values(
        instance_types=["g5.2xlarge"], mps=Mps(replicas=4)
    )
    assert set(charts) == {NVIDIA, EFA}
    assert built.cluster.node.try_find_child("NvidiaDevicePlugin") is None
    assert set(built.cluster.device_plugin_charts) == {DevicePluginKind.EFA}


def test_efa_and_neuron_plugins_given_replace_the_clusters(tmp_path: Path) -> None:
    built = Cluster(tmp_path)
    built.efa("Trn", "trn1.32xlarge")
    EfaDevicePlugin(built.stack, "Efa", cluster=built.cluster, instance_types=["trn1.32xlarge"])
    NeuronDevicePlugin(built.stack, "Neuron", cluster=built.cluster, instance_types=["trn1.32xlarge"])
    assert set(built.charts()) == {EFA, NEURON}
    assert built.cluster.device_plugin_charts == {}


def test_the_eks_environment_installs_each_plugin_once_as_its_file_says(tmp_path: Path) -> None:
    """The stack installs the plugins the file's eks.addons name (with their sharing settings) and tells the
    cluster to install none, so no chart is there twice."""
    app = cdk.App(outdir=str(tmp_path), context=dict(CDK_CONTEXT))
    stack = add_environment(app, ROOT / "environments" / "eks-g5-efa.yaml")
    assert isinstance(stack, EksTrainingEnvironment)
    assert stack.cluster.installs_device_plugins is False
    assert stack.cluster.device_plugin_charts == {}
    assert stack.device_plugin is not None and stack.efa_device_plugin is not None
    template = Template.from_stack(stack).to_json()
    charts = [
        r["Properties"]["Chart"]
        for r in template["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    ]
    assert charts.count(NVIDIA) == 1 and charts.count(EFA) == 1 and NEURON not in charts
