"""GPU monitoring: the GPU Operator's DCGM exporter and kube-prometheus-stack (Prometheus, Alertmanager and
Grafana with our dashboards), their data on gp3 EBS volumes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from training_clusters.constructs.common.lustre import SharedLustre
from training_clusters.constructs.common.session_manager import AcknowledgeWildcards
from training_clusters.constructs.eks.addons.base import helm_chart
from training_clusters.constructs.eks.addons.ebs_csi_driver import EbsCsiDriver
from training_clusters.constructs.eks.addons.gpu_operator import gpu_operator_values
from training_clusters.constructs.eks.cluster import GpuEksCluster, pod_identity_principal
from training_clusters.constructs.private.validation import (
    checked_props,
    is_unresolved,
    parse_option,
    raise_if_problem,
)
from training_clusters.gates.compliance import accept_inline_policy
from training_clusters.model.options import MigStrategy
from training_clusters.model.releases import GPU_OPERATOR_CHART, KUBE_PROMETHEUS_STACK_CHART, HelmChartSpec
from training_clusters.monitoring.cloudwatch import (
    CLOUDWATCH_READ_ACTIONS,
    GRAFANA_SERVICE_ACCOUNT,
    cloudwatch_datasource,
)
from training_clusters.monitoring.dashboards import dashboard_configmaps
from training_clusters.monitoring.efa import node_exporter_values
from training_clusters.rules.eks_addons import (
    grafana_problem,
    monitoring_ebs_csi_driver_problem,
    monitoring_lustre_problem,
    monitoring_mig_strategy_problem,
    monitoring_volume_problem,
)
from training_clusters.workloads.tenancy import monitoring_ingress, system_placement

#: kube-prometheus-stack's components for the control plane EKS runs out of the cluster's reach.
EKS_MANAGED_CONTROL_PLANE = ("kubeControllerManager", "kubeScheduler", "kubeEtcd")
#: kube-prometheus-stack's components that run on EKS nodes but serve their metrics on loopback only:
#: kube-proxy binds ``metricsBindAddress`` to its default, ``127.0.0.1:10249`` (kube-proxy's configuration
#: reference, ``KubeProxyConfiguration``), and EKS's kube-proxy add-on reconciles its ConfigMap back to it
#: (github.com/aws/containers-roadmap issue 657).
EKS_LOOPBACK_ONLY = ("kubeProxy",)


def kube_prometheus_stack_values(
    *,
    grafana: bool,
    storage_class: str | None = None,
    prometheus_volume_gib: int = 50,
    grafana_volume_gib: int = 10,
    cloudwatch_region: str | None = None,
) -> dict[str, Any]:
    """Prometheus that scrapes every ServiceMonitor (DCGM's included); Grafana with a generated password.

    Quiet on EKS: the control plane's kube-controller-manager, kube-scheduler and etcd run in AWS's account,
    not as pods Prometheus can scrape, so their ServiceMonitors would find nothing and their default rules
    (``KubeControllerManagerDown``, ``KubeSchedulerDown``, the etcd alerts) fire forever; all three are turned
    off (the chart renders their rules only when the component is enabled). So is kube-proxy's scrape
    (:data:`EKS_LOOPBACK_ONLY`): EKS's kube-proxy serves metrics on 127.0.0.1 only, so ``KubeProxyDown`` would
    fire on every healthy cluster; its rules, Service and ServiceMonitor go with it. Grafana's admin password: chart
    82.6.0 sets none (``adminPassword`` is commented out in its values), so the Grafana chart generates a
    random one into its secret. node-exporter gets the EFA counter sidecar
    (:func:`~training_clusters.monitoring.efa.node_exporter_values`) and labels its series with the node. With ``storage_class``, Prometheus keeps its TSDB on a
    ``prometheus_volume_gib`` volume (``retentionSize`` at 90% of it, so 15 days never overfill it) and
    Grafana its database on a ``grafana_volume_gib`` one, replaced by ``Recreate`` (a ReadWriteOnce volume
    cannot be mounted by the old and the new pod at once). Without it both keep data in the pod: lost on
    every restart. Grafana runs as the chart's own service account,
    :data:`~training_clusters.monitoring.cloudwatch.GRAFANA_SERVICE_ACCOUNT`, which a Pod Identity association
    names (setting ``grafana.serviceAccount.name`` to it would change no rendered object). With
    ``cloudwatch_region`` Grafana also gets the CloudWatch data source in that region
    (:func:`~training_clusters.monitoring.cloudwatch.cloudwatch_datasource`, AWS SDK default credentials).
    The operator (and its admission-webhook certificate Jobs), Prometheus, Alertmanager, Grafana and
    kube-state-metrics run on the system nodes (:func:`~training_clusters.workloads.tenancy.system_placement`);
    node-exporter keeps the chart's toleration of every ``NoSchedule`` taint, so it runs on every node.
    """
    spec: dict[str, Any] = {
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
        "retention": "15d",
        **system_placement(),
    }
    values: dict[str, Any] = {
        "prometheus": {"prometheusSpec": spec},
        "alertmanager": {"alertmanagerSpec": system_placement()},
        "prometheusOperator": {**system_placement(), "admissionWebhooks": {"patch": system_placement()}},
        "kube-state-metrics": system_placement(),
        "grafana": {"enabled": grafana, **(system_placement() if grafana else {})},
        **{component: {"enabled": False} for component in (*EKS_MANAGED_CONTROL_PLANE, *EKS_LOOPBACK_ONLY)},
        "prometheus-node-exporter": node_exporter_values(),
    }
    if storage_class is not None:
        spec["retentionSize"] = f"{prometheus_volume_gib * 1024 * 9 // 10}MB"
        spec["storageSpec"] = {
            "volumeClaimTemplate": {
                "spec": {
                    "storageClassName": storage_class,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": f"{prometheus_volume_gib}Gi"}},
                }
            }
        }
    if grafana and storage_class is not None:
        values["grafana"]["persistence"] = {
            "enabled": True,
            "storageClassName": storage_class,
            "accessModes": ["ReadWriteOnce"],
            "size": f"{grafana_volume_gib}Gi",
        }
        values["grafana"]["deploymentStrategy"] = {"type": "Recreate"}
    if grafana and cloudwatch_region is not None:
        values["grafana"]["additionalDataSources"] = [cloudwatch_datasource(cloudwatch_region)]
    return values


@checked_props
class GpuMonitoring(Construct):
    """NVIDIA GPU Operator (DCGM exporter) and, optionally, kube-prometheus-stack scraping it.

    Example::

        GpuMonitoring(self, "Monitoring", cluster=cluster, prometheus=True, grafana=True)

    Metrics persist by default: Prometheus keeps 15 days (capped at 90% of its volume) on an encrypted gp3
    EBS volume, and Grafana its users and dashboards on another, through the EBS CSI driver (an
    :class:`EbsCsiDriver` created here unless you pass yours). Volumes outlive pod restarts and, with the
    driver's default RETAIN, the release. Alertmanager's silences are not persisted. With
    ``persistent_storage=False`` everything is ephemeral: lost whenever a pod restarts or moves.

    With Grafana come our dashboards (:mod:`training_clusters.monitoring.dashboards`: GPU overview, GPU
    stragglers, EFA throughput), as ConfigMaps its sidecar loads. Given ``lustre``, also the FSx for Lustre
    dashboard, read from CloudWatch: Grafana gets a CloudWatch data source in the stack's region and, through
    EKS Pod Identity (an association on the chart's namespace and Grafana's service account), a role that may
    only read CloudWatch metrics (:data:`~training_clusters.monitoring.cloudwatch.CLOUDWATCH_READ_ACTIONS`; why
    Grafana 12.4's data source picks those credentials up: :mod:`training_clusters.monitoring.cloudwatch`).
    With ``mig_layouts`` the GPU Operator's MIG manager partitions the nodes labelled ``nvidia.com/mig.config``
    (:mod:`training_clusters.workloads.mig`).

    Attributes: ``gpu_operator`` (chart), ``prometheus`` (chart or None), ``gpu_operator_values``,
    ``prometheus_values`` (or None), ``dashboards`` (manifest or None), ``ebs_csi_driver`` (or None when
    nothing persists), ``grafana_role`` and ``grafana_pod_identity`` (the association; both None without
    ``lustre``), ``network_policy`` (the manifest admitting connections to Prometheus, Alertmanager and
    Grafana from their own namespace only; None without Prometheus: reach Grafana with ``kubectl
    port-forward``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        prometheus: bool = True,
        grafana: bool = True,
        persistent_storage: bool = True,
        ebs_csi_driver: EbsCsiDriver | None = None,
        prometheus_volume_gib: int = 50,
        grafana_volume_gib: int = 10,
        gpu_operator_chart: HelmChartSpec = GPU_OPERATOR_CHART,
        prometheus_chart: HelmChartSpec = KUBE_PROMETHEUS_STACK_CHART,
        mig_layouts: Mapping[str, Mapping[str, int]] | None = None,
        mig_strategy: MigStrategy | str = MigStrategy.MIXED,
        lustre: SharedLustre | None = None,
        volume_tags: Mapping[str, str] | None = None,
    ) -> None:
        """Install the charts.

        :param cluster: The cluster.
        :param prometheus: Install kube-prometheus-stack; DCGM gets a ServiceMonitor. Default: True.
        :param grafana: Include Grafana (needs ``prometheus``). Default: True.
        :param persistent_storage: Keep Prometheus's and Grafana's data on gp3 EBS volumes. Default: True;
            False keeps it in the pods (ephemeral).
        :param ebs_csi_driver: The cluster's EBS CSI driver, when you install it yourself. Default: one is
            created here when something persists (a cluster holds one ``aws-ebs-csi-driver`` add-on only).
        :param prometheus_volume_gib: Prometheus's volume. Default: 50.
        :param grafana_volume_gib: Grafana's volume. Default: 10.
        :param gpu_operator_chart: Default: :data:`GPU_OPERATOR_CHART`.
        :param prometheus_chart: Default: :data:`KUBE_PROMETHEUS_STACK_CHART`.
        :param mig_layouts: MIG layouts to offer, by config name (the ``nvidia.com/mig.config`` label value):
            ``{profile: count}`` per GPU (:func:`~training_clusters.workloads.mig.mig_devices`). Default: none, and
            the GPU Operator's MIG manager stays off.
        :param mig_strategy: The device plugin's MIG strategy (SINGLE or MIXED), used with ``mig_layouts``.
            Default: MIXED.
        :param lustre: The environment's FSx for Lustre file system, for the FSx dashboard (needs ``grafana``).
            Default: none, and Grafana gets no CloudWatch data source and no AWS role.
        :param volume_tags: Tags for the Prometheus and Grafana volumes, given to the EBS CSI driver created
            here (:class:`EbsCsiDriver`'s ``volume_tags``). Default: none.
        """
        super().__init__(scope, id)
        raise_if_problem(self, "grafana", grafana_problem(grafana=grafana, prometheus=prometheus))
        self._check_lustre(grafana, lustre)
        self._check_ebs_csi_driver(persistent_storage, ebs_csi_driver)
        self._check_volume("prometheus_volume_gib", prometheus_volume_gib)
        self._check_volume("grafana_volume_gib", grafana_volume_gib)
        self.ebs_csi_driver: EbsCsiDriver | None = None
        if prometheus and persistent_storage:
            self.ebs_csi_driver = ebs_csi_driver or EbsCsiDriver(
                self, "EbsCsiDriver", cluster=cluster, volume_tags=volume_tags
            )
        self.prometheus: eks.HelmChart | None = None
        self.dashboards: eks.KubernetesManifest | None = None
        self.prometheus_values: dict[str, Any] | None = None
        self.grafana_role: iam.Role | None = None
        self.grafana_pod_identity: eks.CfnPodIdentityAssociation | None = None
        self.network_policy: eks.KubernetesManifest | None = None
        if prometheus:
            self.prometheus_values = kube_prometheus_stack_values(
                grafana=grafana,
                storage_class=self.ebs_csi_driver.storage_class_name if self.ebs_csi_driver else None,
                prometheus_volume_gib=prometheus_volume_gib,
                grafana_volume_gib=grafana_volume_gib,
                cloudwatch_region=cdk.Stack.of(self).region if lustre is not None else None,
            )
            self.prometheus = helm_chart(
                self, cluster, prometheus_chart, self.prometheus_values, id="Prometheus"
            )
            if self.ebs_csi_driver is not None:
                # The claims bind once the driver runs and its StorageClass exists.
                self.prometheus.node.add_dependency(self.ebs_csi_driver.storage_class)
            # Prometheus, Alertmanager and Grafana: reachable from their own namespace only
            self.network_policy = eks.KubernetesManifest(
                self,
                "NetworkPolicy",
                cluster=cluster.cluster,
                manifest=[monitoring_ingress(prometheus_chart.namespace)],
            )
            self.network_policy.node.add_dependency(self.prometheus)
            if lustre is not None:
                self._grant_grafana_cloudwatch(cluster, prometheus_chart.namespace)
            if grafana:
                # in the chart's namespace, once the chart has made it; Grafana's sidecar loads them
                self.dashboards = eks.KubernetesManifest(
                    self,
                    "Dashboards",
                    cluster=cluster.cluster,
                    manifest=dashboard_configmaps(
                        prometheus_chart.namespace, lustre.file_system_id if lustre is not None else None
                    ),
                )
                self.dashboards.node.add_dependency(self.prometheus)
        mig_strategy = parse_option(self, "mig_strategy", MigStrategy, mig_strategy)
        raise_if_problem(
            self, "mig_strategy", monitoring_mig_strategy_problem(mig_strategy, has_layouts=bool(mig_layouts))
        )
        self.gpu_operator_values = gpu_operator_values(
            service_monitor=prometheus, mig_layouts=mig_layouts, mig_strategy=mig_strategy
        )
        self.gpu_operator = helm_chart(
            self, cluster, gpu_operator_chart, self.gpu_operator_values, id="GpuOperator"
        )
        if self.prometheus is not None:
            # DCGM's ServiceMonitor needs the Prometheus Operator's CRDs.
            self.gpu_operator.node.add_dependency(self.prometheus)

    def _grant_grafana_cloudwatch(self, cluster: GpuEksCluster, namespace: str) -> None:
        """A role only Grafana's service account may assume (EKS Pod Identity), reading CloudWatch metrics."""
        self.grafana_role = iam.Role(
            self,
            "GrafanaRole",
            assumed_by=pod_identity_principal(
                cluster.cluster.cluster_arn, namespace, GRAFANA_SERVICE_ACCOUNT
            ),
            description="Grafana's CloudWatch data source: metric reads for the FSx dashboard (EKS Pod Identity)",
        )
        self.grafana_role.add_to_policy(
            iam.PolicyStatement(actions=list(CLOUDWATCH_READ_ACTIONS), resources=["*"])
        )
        policy = self.grafana_role.node.try_find_child("DefaultPolicy")
        assert isinstance(policy, iam.Policy)
        # acknowledged at synth only while * holds these reads alone (a statement added later is judged too)
        reason = (
            "cloudwatch:GetMetricData and cloudwatch:ListMetrics are granted on * as CloudWatch's permissions "
            "reference does: their only resource type, the optional CloudWatch dataset, has no documented ARN for "
            "queries of AWS-published metrics such as AWS/FSx. They are the role's only actions, metric reads, "
            "and only Grafana's service account in this cluster can assume it"
        )
        cdk.Aspects.of(policy).add(AcknowledgeWildcards(policy, {"*": (CLOUDWATCH_READ_ACTIONS, reason)}))
        accept_inline_policy(policy, "Grafana's Pod Identity role")
        self.grafana_pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "GrafanaPodIdentity",
            cluster_name=cluster.cluster_name,
            namespace=namespace,
            service_account=GRAFANA_SERVICE_ACCOUNT,
            role_arn=self.grafana_role.role_arn,
        )
        assert self.prometheus is not None
        # Pod Identity reaches only pods created after the association exists.
        self.prometheus.node.add_dependency(self.grafana_pod_identity)

    def _check_lustre(self, grafana: bool, lustre: SharedLustre | None) -> None:
        raise_if_problem(
            self, "lustre", monitoring_lustre_problem(lustre=lustre is not None, grafana=grafana)
        )

    def _check_ebs_csi_driver(self, persistent_storage: bool, ebs_csi_driver: EbsCsiDriver | None) -> None:
        raise_if_problem(
            self,
            "ebs_csi_driver",
            monitoring_ebs_csi_driver_problem(
                ebs_csi_driver=ebs_csi_driver is not None, persistent_storage=persistent_storage
            ),
        )

    def _check_volume(self, field: str, size_gib: int) -> None:
        if not is_unresolved(size_gib):
            raise_if_problem(self, field, monitoring_volume_problem(size_gib))
