"""AWS's EFA device plugin (chart ``aws-efa-k8s-device-plugin``): each EFA interface a
``vpc.amazonaws.com/efa``, with the plugin image pulled from the EKS registry of the stack's region."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from constructs import Construct

from training_clusters.constructs.eks.addons.base import (
    ACCELERATOR_TOLERATIONS,
    INSTANCE_TYPE_LABEL,
    HelmAddon,
    check_instance_types,
)
from training_clusters.constructs.eks.cluster import DevicePluginKind, GpuEksCluster
from training_clusters.constructs.private.validation import checked_props, raise_if_problem
from training_clusters.model.releases import (
    EFA_DEVICE_PLUGIN_CHART,
    EFA_DEVICE_PLUGIN_IMAGE_TAG,
    EFA_DEVICE_PLUGIN_REPOSITORY,
    EKS_ADDON_REGISTRIES,
    HelmChartSpec,
    eks_registry,
)
from training_clusters.rules.eks_addons import efa_registry_problem


def efa_device_plugin_values(
    *,
    instance_types: Sequence[str],
    image_repository: str,
    image_tag: str = EFA_DEVICE_PLUGIN_IMAGE_TAG,
) -> dict[str, Any]:
    """Helm values of the EFA device plugin: run on exactly these instance types, with a pinned image.

    The chart's own allow-list (``supportedInstanceLabels``, its DaemonSet's node affinity) lags new
    hardware (chart v0.5.20's has no p6-b300, for one): without this override its DaemonSet runs zero pods
    there and NCCL silently falls back to TCP. The image is set explicitly, repository and tag, so what runs
    and where it is pulled from is stated here rather than inherited from the chart (whose values name the
    us-west-2 registry).
    """
    return {
        "image": {"repository": image_repository, "tag": image_tag},
        "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": sorted(set(instance_types))},
        "tolerations": list(ACCELERATOR_TOLERATIONS),
    }


def efa_device_plugin_repository(scope: Construct) -> str:
    """The EFA device plugin's image repository in the registry of ``scope``'s own region.

    A stack with a concrete region gets its region's registry; an environment-agnostic one a
    ``Fn::FindInMap`` over :data:`~training_clusters.model.releases.EKS_ADDON_REGISTRIES` keyed on ``AWS::Region``.

    :raises ConfigurationError: for a concrete region without a known registry.
    """
    stack = cdk.Stack.of(scope)
    region = stack.region
    if not cdk.Token.is_unresolved(region):
        registry = eks_registry(region)
        raise_if_problem(scope, "image_repository", efa_registry_problem(region, registry))
        return f"{registry}/{EFA_DEVICE_PLUGIN_REPOSITORY}"
    mapping = stack.node.try_find_child(_REGISTRY_MAPPING_ID)
    if not isinstance(mapping, cdk.CfnMapping):
        mapping = cdk.CfnMapping(
            stack,
            _REGISTRY_MAPPING_ID,
            mapping={region: {"Registry": host} for region, host in sorted(EKS_ADDON_REGISTRIES.items())},
        )
    return f"{mapping.find_in_map(cdk.Aws.REGION, 'Registry')}/{EFA_DEVICE_PLUGIN_REPOSITORY}"


_REGISTRY_MAPPING_ID = "TrainingClustersEksAddonRegistries"


@checked_props
class EfaDevicePlugin(HelmAddon):
    """AWS's EFA device plugin, scheduled on exactly the given EFA instance types.

    Example::

        EfaDevicePlugin(self, "EfaPlugin", cluster=cluster, instance_types=["p5en.48xlarge"])

    Installs chart ``aws-efa-k8s-device-plugin`` v0.5.20 running plugin image v0.5.13 (the chart's version
    is not the plugin's; see :data:`~training_clusters.model.releases.EFA_DEVICE_PLUGIN_CHART`), pulled from the
    EKS registry of the stack's own region (:func:`efa_device_plugin_repository`).

    Attributes: ``chart``, ``values``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        instance_types: Sequence[str],
        chart: HelmChartSpec = EFA_DEVICE_PLUGIN_CHART,
        image_tag: str = EFA_DEVICE_PLUGIN_IMAGE_TAG,
        image_repository: str | None = None,
    ) -> None:
        """Install the chart.

        :param cluster: The cluster.
        :param instance_types: The instance types of the EFA nodegroups.
        :param chart: Default: :data:`~training_clusters.model.releases.EFA_DEVICE_PLUGIN_CHART`.
        :param image_tag: The plugin image to run; change it together with ``chart``.
            Default: :data:`~training_clusters.model.releases.EFA_DEVICE_PLUGIN_IMAGE_TAG` (v0.5.13, what chart
            v0.5.20 ships).
        :param image_repository: Where the image is pulled from. Default: ``eks/aws-efa-k8s-device-plugin`` in
            the EKS add-on registry of the stack's region; required in a region that table does not list.
        """
        super().__init__(scope, id)
        check_instance_types(self, instance_types, "EFA", "EFA", lambda entry: entry.efa_supported)
        cluster.device_plugin_given(DevicePluginKind.EFA)
        self._install(
            cluster,
            chart,
            efa_device_plugin_values(
                instance_types=instance_types,
                image_repository=image_repository or efa_device_plugin_repository(self),
                image_tag=image_tag,
            ),
        )
