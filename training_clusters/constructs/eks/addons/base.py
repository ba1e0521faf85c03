"""The Helm add-on base: what every add-on installed as one Helm chart shares.

An add-on's chart is pinned in :mod:`training_clusters.model.releases` (a
:class:`~training_clusters.model.releases.HelmChartSpec` listed in ``HELM_CHARTS``, with its public source) and
installed at deploy time from its publisher's repository by CDK's kubectl handler (:func:`helm_chart`): no
third-party manifest is copied into this repository. Its values are built by a plain function from typed options
(tested as dicts) and validated when the construct is created; the construct keeps both (:class:`HelmAddon`:
``chart``, ``values``). What runs on accelerator nodes is scheduled on exactly the instance types given
(:func:`instance_type_affinity`, each checked against the catalogue by :func:`check_instance_types`) and tolerates
their taints (:data:`ACCELERATOR_TOLERATIONS`); controllers run on the system nodes
(:func:`~training_clusters.workloads.tenancy.system_placement`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from training_clusters.catalog import InstanceType
from training_clusters.constructs.eks.cluster import GPU_TAINT_KEY, NEURON_TAINT_KEY, GpuEksCluster
from training_clusters.constructs.private.validation import catalog_entry, raise_if_problem
from training_clusters.model.releases import HelmChartSpec
from training_clusters.rules.eks_addons import addon_instance_type_problem, addon_instance_types_problem

#: The label every EKS node carries with its instance type: what the device plugins are scheduled by.
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
#: The taints of the accelerator nodegroups (NVIDIA GPU, then Neuron): what runs there tolerates them.
ACCELERATOR_TOLERATIONS: list[dict[str, str]] = [
    {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
    {"key": NEURON_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
]


def instance_type_affinity(instance_types: Sequence[str]) -> dict[str, Any]:
    """Node affinity requiring one of ``instance_types`` (the label every EKS node carries)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": INSTANCE_TYPE_LABEL,
                                "operator": "In",
                                "values": sorted(set(instance_types)),
                            }
                        ]
                    }
                ]
            }
        }
    }


def check_instance_types(
    scope: Construct,
    instance_types: Sequence[str],
    kind: str,
    feature: str,
    has: Callable[[InstanceType], bool],
) -> list[InstanceType]:
    """The catalogue entries of ``instance_types``: at least one, each with ``feature``."""
    raise_if_problem(scope, "instance_types", addon_instance_types_problem(kind, instance_types))
    entries = [catalog_entry(scope, name, "instance_types") for name in instance_types]
    for entry in entries:
        raise_if_problem(
            scope,
            "instance_types",
            addon_instance_type_problem(entry.name, kind, feature, has_feature=has(entry)),
        )
    return entries


def helm_chart(
    scope: Construct,
    cluster: GpuEksCluster,
    spec: HelmChartSpec,
    values: dict[str, Any],
    *,
    id: str = "Resource",
    wait_minutes: int | None = None,
) -> eks.HelmChart:
    """The chart ``spec`` pins, released with ``values`` into its namespace (created if missing) of ``cluster``,
    as ``scope``'s child ``id``. With ``wait_minutes``, installed with ``helm --wait``: complete only once its
    workloads are ready, and failed when they are not within that many minutes."""
    wait: dict[str, Any] = {}
    if wait_minutes is not None:
        wait = {"wait": True, "timeout": cdk.Duration.minutes(wait_minutes)}
    return eks.HelmChart(
        scope,
        id,
        cluster=cluster.cluster,
        chart=spec.chart,
        repository=spec.repository,
        version=spec.version,
        namespace=spec.namespace,
        release=spec.release,
        create_namespace=True,
        **wait,
        values=values,
    )


class HelmAddon(Construct):
    """An add-on that is one Helm release on the cluster, the construct's ``Resource``.

    A subclass checks its props, builds its values with its values function (a plain function of typed options,
    tested as a dict) and installs them with :meth:`HelmAddon._install`.

    Attributes: ``chart`` (the release), ``values`` (its Helm values).
    """

    chart: eks.HelmChart
    values: dict[str, Any]

    def _install(
        self,
        cluster: GpuEksCluster,
        spec: HelmChartSpec,
        values: dict[str, Any],
        *,
        wait_minutes: int | None = None,
    ) -> None:
        """Release ``spec``, with ``values``, on ``cluster`` (:func:`helm_chart`)."""
        self.values = values
        self.chart = helm_chart(self, cluster, spec, values, wait_minutes=wait_minutes)
