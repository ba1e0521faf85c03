"""The device plugins :class:`~training_clusters.constructs.eks.cluster.GpuEksCluster` installs itself
(``device_plugins=True``): the charts and values of the add-on constructs, on the instance types of every
nodegroup the cluster has when the template is written."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_eks_v2 as eks

from training_clusters.constructs.eks.addons.base import helm_chart
from training_clusters.constructs.eks.addons.efa_device_plugin import (
    efa_device_plugin_repository,
    efa_device_plugin_values,
)
from training_clusters.constructs.eks.addons.neuron_device_plugin import neuron_device_plugin_values
from training_clusters.constructs.eks.addons.nvidia_device_plugin import nvidia_device_plugin_values
from training_clusters.constructs.eks.cluster import DevicePluginKind, GpuEksCluster
from training_clusters.model.releases import (
    EFA_DEVICE_PLUGIN_CHART,
    NEURON_HELM_CHART,
    NVIDIA_DEVICE_PLUGIN_CHART,
    HelmChartSpec,
)

#: Construct id and chart of each device plugin :class:`GpuEksCluster` installs (under the cluster).
CLUSTER_DEVICE_PLUGINS: Mapping[DevicePluginKind, tuple[str, HelmChartSpec]] = {
    DevicePluginKind.NVIDIA: ("NvidiaDevicePlugin", NVIDIA_DEVICE_PLUGIN_CHART),
    DevicePluginKind.EFA: ("EfaDevicePlugin", EFA_DEVICE_PLUGIN_CHART),
    DevicePluginKind.NEURON: ("NeuronDevicePlugin", NEURON_HELM_CHART),
}


def cluster_device_plugin(
    cluster: GpuEksCluster, kind: DevicePluginKind, instance_types: Callable[[], list[str]]
) -> eks.HelmChart:
    """The ``kind`` device plugin of ``cluster`` (``device_plugins=True``), with the values the add-on construct
    gives (:mod:`~training_clusters.constructs.eks.addons.nvidia_device_plugin`,
    :mod:`~training_clusters.constructs.eks.addons.efa_device_plugin`,
    :mod:`~training_clusters.constructs.eks.addons.neuron_device_plugin`), scheduled on ``instance_types()`` as it
    is when the template is written, so nodegroups added later are covered (the way CDK's own ``aws-auth``
    ConfigMap collects roles, aws-cdk ``aws-eks/lib/aws-auth.ts``)."""
    build: Callable[[], dict[str, Any]]
    if kind is DevicePluginKind.NVIDIA:
        build = lambda: nvidia_device_plugin_values(instance_types=instance_types())  # noqa: E731
    elif kind is DevicePluginKind.EFA:
        repository = efa_device_plugin_repository(cluster)
        build = lambda: efa_device_plugin_values(  # noqa: E731
            instance_types=instance_types(), image_repository=repository
        )
    else:
        build = lambda: neuron_device_plugin_values(instance_types=instance_types())  # noqa: E731
    id, spec = CLUSTER_DEVICE_PLUGINS[kind]
    return helm_chart(cluster, cluster, spec, _lazy_values(build), id=id)


@jsii.implements(cdk.IStableAnyProducer)
class _Produce:
    def __init__(self, produce: Callable[[], Any]) -> None:
        self._produce = produce

    def produce(self) -> Any:
        return self._produce()


def _lazy_values(build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Helm values whose every top-level entry is computed by ``build()`` when the template is written (the
    chart's custom resource serializes its values with ``Stack.toJsonString``, which resolves tokens)."""

    def entry(key: str) -> Callable[[], Any]:
        return lambda: build()[key]

    return {key: cdk.Lazy.any(_Produce(entry(key))) for key in build()}
