"""AWS Neuron's device plugin (chart ``neuron-helm-chart``): Trainium devices as ``aws.amazon.com/neuron``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from constructs import Construct

from training_clusters.constructs.eks.addons.base import HelmAddon, check_instance_types
from training_clusters.constructs.eks.cluster import NEURON_TAINT_KEY, DevicePluginKind, GpuEksCluster
from training_clusters.constructs.private.validation import checked_props
from training_clusters.model.releases import NEURON_HELM_CHART, HelmChartSpec

#: The device plugin's tolerations as AWS Neuron's chart sets them (``devicePlugin.tolerations`` in its
#: ``values.yaml``, github.com/aws-neuron/neuron-helm-charts): written out because Helm replaces a list value
#: whole, so a caller adding one (HyperPod's health taint) must repeat these.
NEURON_DEVICE_PLUGIN_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": NEURON_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
)


def neuron_device_plugin_values(*, instance_types: Sequence[str]) -> dict[str, Any]:
    """Helm values of AWS Neuron's chart: the device plugin only, on exactly these instance types.

    The chart's ``neuronInstances`` list feeds its node affinity; like the EFA plugin's, a built-in list
    lags new hardware, so it names our types. The plugin tolerates :data:`NEURON_DEVICE_PLUGIN_TOLERATIONS`.
    Its node problem detector is off (EKS node auto-repair, which our nodegroups turn on, already replaces
    unhealthy nodes, and it runs privileged) and so is the optional scheduler extension (whole-device
    requests need none).
    """
    return {
        "neuronInstances": sorted(set(instance_types)),
        "devicePlugin": {"tolerations": [dict(t) for t in NEURON_DEVICE_PLUGIN_TOLERATIONS]},
        "npd": {"enabled": False},
        "scheduler": {"enabled": False},
    }


@checked_props
class NeuronDevicePlugin(HelmAddon):
    """AWS Neuron's device plugin on the given Trainium instance types (``aws.amazon.com/neuron`` resources).

    Example::

        NeuronDevicePlugin(self, "NeuronPlugin", cluster=cluster, instance_types=["trn1.32xlarge"])

    Attributes: ``chart``, ``values``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        instance_types: Sequence[str],
        chart: HelmChartSpec = NEURON_HELM_CHART,
    ) -> None:
        """Install the chart.

        :param cluster: The cluster.
        :param instance_types: The Trainium instance types of the nodegroups.
        :param chart: Default: :data:`NEURON_HELM_CHART`.
        """
        super().__init__(scope, id)
        check_instance_types(
            self, instance_types, "Trainium", "Trainium (Neuron) devices", lambda entry: entry.is_trainium
        )
        cluster.device_plugin_given(DevicePluginKind.NEURON)
        self._install(cluster, chart, neuron_device_plugin_values(instance_types=instance_types))
