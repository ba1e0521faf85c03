"""The EKS job layer: Kueue (queues, quotas, all-or-nothing admission) and Kubeflow Trainer v2 (TrainJob).

Both are helm charts pinned in :mod:`training_clusters.model.releases`, pulled from their publishers' OCI
registries at deploy time by CDK's helm handler (the route every chart of the cluster takes), with their
controllers on the system nodes and their images set in the values rather than inherited.

Example::

    trainer = KubeflowTrainer(self, "Trainer", cluster=cluster)
    kueue = Kueue(self, "Kueue", cluster=cluster)
    kueue.node.add_dependency(trainer)      # Kueue manages TrainJobs and JobSets once their kinds exist

Over them, :class:`TrainingQueues` applies Kueue's queues for the cluster's GPU nodegroups (quota: what the
nodes advertise) and :class:`TrainingRuntimes` Kubeflow Trainer's runtimes for its EFA GPU nodegroups
(``torchrun-efa-<nodegroup>``, ``mpi-efa-<nodegroup>``); their objects are plain data in
:mod:`training_clusters.workloads.scheduling`.

Kueue admits a job only when its whole request fits the queue's quota, and with ``waitForPodsReady`` it
evicts and requeues an admitted job whose pods are not all running within the timeout: two jobs that each
need every GPU never hold half the nodes each. Jobs opt in with the label ``kueue.x-k8s.io/queue-name``;
jobs without it are left alone (``manageJobsWithoutQueueName: false``). Kueue acts only in namespaces labelled
``training-clusters/kueue-managed: "true"`` (the team namespaces :class:`TrainingQueues` makes or labels): its
job webhooks fail closed, and everywhere else a Job is created whether Kueue runs or not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from training_clusters.constructs.eks.addons.base import HelmAddon
from training_clusters.constructs.eks.cluster import (
    SYSTEM_NODE_LABELS,
    EfaNodegroup,
    GpuEksCluster,
    GpuNodegroup,
)
from training_clusters.constructs.private.validation import (
    checked_props,
    is_unresolved,
    parse_option,
    prop_error,
    raise_if_problem,
)
from training_clusters.model.options import (
    Mps,
    PodSecurityLevel,
    QueuePreemption,
    TimeSlicing,
    TopologyPlacement,
)
from training_clusters.model.releases import (
    DEFAULT_NCCL_TESTS_IMAGE,
    JOBSET_IMAGE,
    KUBEFLOW_TRAINER_CHART,
    KUBEFLOW_TRAINER_IMAGE,
    KUEUE_CHART,
    KUEUE_IMAGE,
    PYTORCH_EFA_IMAGE,
    HelmChartSpec,
    ImagePin,
)
from training_clusters.rules.eks_queues import (
    borrow_needs_reclaim_problem,
    cohort_name_problem,
    cohort_needed_problem,
    efa_gpu_nodegroups_problem,
    flavor_labels_problem,
    gpu_nodegroups_problem,
    kubernetes_name_problem,
    limit_percent_problem,
    namespaces_problem,
    pods_ready_timeout_problem,
    preemption_problem,
    required_topology_problem,
    team_namespace_problem,
    team_role_namespace_problem,
    unique_names_problem,
)
from training_clusters.workloads.scheduling import (
    DEFAULT_CLUSTER_QUEUE,
    DEFAULT_LOCAL_QUEUE,
    GPU_RESOURCE,
    KUEUE_MANAGED_LABEL,
    KUEUE_MANAGED_VALUE,
    KUEUE_QUEUE_LABEL,
    SHARED_GPU_RESOURCE,
    FlavorCapacity,
    NodePool,
    QueuePolicy,
    Taint,
    managed_namespace_selector,
    mpi_runtime_name,
    queue_manifests,
    runtime_manifests,
    torchrun_runtime_name,
)
from training_clusters.workloads.tenancy import (
    SYSTEM_TOLERATION,
    pod_security_labels,
    team_group,
    team_namespace_objects,
)

__all__ = [
    "KUEUE_INTEGRATIONS",
    "KUEUE_QUEUE_LABEL",
    "KubeflowTrainer",
    "Kueue",
    "TrainingQueues",
    "TrainingRuntimes",
    "kubeflow_trainer_values",
    "kueue_configuration",
    "kueue_values",
]

#: The kinds Kueue manages here: plain Jobs, MPIJobs (MPI Operator), JobSets and TrainJobs (Kubeflow Trainer).
#: Kueue starts managing a kind once its CRD is served, so a kind whose operator is not installed costs nothing.
KUEUE_INTEGRATIONS = (
    "batch/job",
    "kubeflow.org/mpijob",
    "jobset.x-k8s.io/jobset",
    "trainer.kubeflow.org/trainjob",
)
#: Kubernetes' spelling of a taint effect, by CDK's (``aws_eks_v2.TaintEffect``, EKS's API spelling).
_TAINT_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}
#: How long an admitted job may take to have every pod running before Kueue evicts and requeues it.
DEFAULT_PODS_READY_TIMEOUT_MINUTES = 10
#: How long the helm handler waits for a chart's pods to be ready (image pulls on fresh system nodes).
CHART_READY_TIMEOUT_MINUTES = 10


def kueue_configuration(
    *, pods_ready_timeout_minutes: int = DEFAULT_PODS_READY_TIMEOUT_MINUTES
) -> dict[str, Any]:
    """Kueue's ``Configuration`` (``config.kueue.x-k8s.io/v1beta2``): the chart's own settings plus gang admission.

    ``waitForPodsReady`` makes admission all-or-nothing in practice: a job admitted whose pods do not all
    run within the timeout (a node gone, an image that will not pull) is evicted whole and requeued with
    exponential back-off, freeing its quota. ``blockAdmission`` stays off: our queues' quota equals what
    the nodes provide, so quota alone keeps two jobs from sharing the GPUs they each need whole.
    ``quotaCheckStrategy: IgnoreUndeclared`` counts only what the ClusterQueue declares (GPUs, EFA
    interfaces), so a pod's CPU and memory requests, which the kubelet places, never block admission.
    ``managedJobsNamespaceSelector`` keeps Kueue to the namespaces labelled
    :data:`~training_clusters.workloads.scheduling.KUEUE_MANAGED_LABEL`: its controller reconciles jobs only there (always
    respected since Kueue 0.19), and the chart makes it the ``namespaceSelector`` of every job webhook, which
    fail closed; its default (every namespace but ``kube-system`` and Kueue's) would stop every Job in the
    cluster, other charts' hooks included, while Kueue's one replica is down.
    """
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": managed_namespace_selector(),
        "waitForPodsReady": {
            "timeout": f"{pods_ready_timeout_minutes}m",
            "blockAdmission": False,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffBaseSeconds": 60,
                "backoffMaxSeconds": 3600,
            },
        },
        "integrations": {"frameworks": list(KUEUE_INTEGRATIONS)},
        "resources": {"quotaCheckStrategy": "IgnoreUndeclared"},
    }


def kueue_values(
    *,
    pods_ready_timeout_minutes: int = DEFAULT_PODS_READY_TIMEOUT_MINUTES,
    image: ImagePin = KUEUE_IMAGE,
    node_selector: Mapping[str, str] = SYSTEM_NODE_LABELS,
) -> dict[str, Any]:
    """Helm values of the Kueue chart: our configuration, the released image, the controller on the system
    nodes (their labels and taint, :data:`~training_clusters.workloads.tenancy.SYSTEM_TOLERATION`). Its webhook
    certificates are Kueue's own (no cert-manager)."""
    return {
        "controllerManager": {
            "manager": {
                "image": {"repository": image.repository, "tag": image.tag, "pullPolicy": "IfNotPresent"}
            },
            "nodeSelector": dict(node_selector),
            "tolerations": [dict(SYSTEM_TOLERATION)],
        },
        "managerConfig": {
            "controllerManagerConfigYaml": yaml.safe_dump(
                kueue_configuration(pods_ready_timeout_minutes=pods_ready_timeout_minutes), sort_keys=False
            )
        },
    }


def kubeflow_trainer_values(
    *,
    image: ImagePin = KUBEFLOW_TRAINER_IMAGE,
    jobset_image: ImagePin = JOBSET_IMAGE,
    node_selector: Mapping[str, str] = SYSTEM_NODE_LABELS,
) -> dict[str, Any]:
    """Helm values of the Kubeflow Trainer chart: its controller and JobSet's (its dependency) on the system
    nodes (their labels and taint), both images stated. The chart's example runtimes stay off."""
    registry, _, repository = image.repository.partition("/")
    return {
        "image": {"registry": registry, "repository": repository, "tag": image.tag},
        "manager": {"nodeSelector": dict(node_selector), "tolerations": [dict(SYSTEM_TOLERATION)]},
        "jobset": {
            "install": True,
            "image": {
                "repository": jobset_image.repository,
                "tag": jobset_image.tag,
                "pullPolicy": "IfNotPresent",
            },
            "controller": {"nodeSelector": dict(node_selector), "tolerations": [dict(SYSTEM_TOLERATION)]},
        },
    }


@checked_props
class Kueue(HelmAddon):
    """Kueue with all-or-nothing admission (``waitForPodsReady``), managing Jobs, MPIJobs, JobSets and TrainJobs.

    Example::

        kueue = Kueue(self, "Kueue", cluster=cluster, pods_ready_timeout_minutes=15)

    The chart is installed with ``helm --wait``: it completes only when Kueue's controller is ready, which
    Kueue reports only once its webhook certificates are in place and its webhook server runs. Make queue
    objects depend on :attr:`chart`, so the webhook that checks them answers.

    Attributes: ``chart``, ``values``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        pods_ready_timeout_minutes: int = DEFAULT_PODS_READY_TIMEOUT_MINUTES,
        chart: HelmChartSpec = KUEUE_CHART,
        image: ImagePin = KUEUE_IMAGE,
    ) -> None:
        """Install the chart.

        :param cluster: The cluster.
        :param pods_ready_timeout_minutes: How long an admitted job may take to have every pod running
            before it is evicted whole and requeued. Default: 10.
        :param chart: Default: :data:`~training_clusters.model.releases.KUEUE_CHART`.
        :param image: The controller image; change it together with ``chart``.
            Default: :data:`~training_clusters.model.releases.KUEUE_IMAGE`.
        """
        super().__init__(scope, id)
        if not is_unresolved(pods_ready_timeout_minutes):
            raise_if_problem(
                self, "pods_ready_timeout_minutes", pods_ready_timeout_problem(pods_ready_timeout_minutes)
            )
        values = kueue_values(pods_ready_timeout_minutes=pods_ready_timeout_minutes, image=image)
        self._install(cluster, chart, values, wait_minutes=CHART_READY_TIMEOUT_MINUTES)


@checked_props
class KubeflowTrainer(HelmAddon):
    """Kubeflow Trainer v2 (``TrainJob``, ``ClusterTrainingRuntime``) and JobSet, which runs its jobs.

    Example::

        trainer = KubeflowTrainer(self, "Trainer", cluster=cluster)

    Installed with ``helm --wait``, so runtimes applied after :attr:`chart` meet a ready webhook.

    Attributes: ``chart``, ``values``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        chart: HelmChartSpec = KUBEFLOW_TRAINER_CHART,
        image: ImagePin = KUBEFLOW_TRAINER_IMAGE,
        jobset_image: ImagePin = JOBSET_IMAGE,
    ) -> None:
        """Install the chart.

        :param cluster: The cluster.
        :param chart: Default: :data:`~training_clusters.model.releases.KUBEFLOW_TRAINER_CHART`.
        :param image: The Trainer controller image; change it with ``chart``.
            Default: :data:`~training_clusters.model.releases.KUBEFLOW_TRAINER_IMAGE`.
        :param jobset_image: JobSet's controller image; change it with ``chart``.
            Default: :data:`~training_clusters.model.releases.JOBSET_IMAGE`.
        """
        super().__init__(scope, id)
        values = kubeflow_trainer_values(image=image, jobset_image=jobset_image)
        self._install(cluster, chart, values, wait_minutes=CHART_READY_TIMEOUT_MINUTES)


def node_pool(group: EfaNodegroup | GpuNodegroup | NodePool) -> NodePool:
    """What an EKS nodegroup (or an already described pool) provides: its nodes, labels, taints, EFA interfaces."""
    if isinstance(group, NodePool):
        return group
    return NodePool(
        instance_type=group.instance_type,
        nodes=group.desired_size,
        efa_interfaces=group.efa_interfaces if isinstance(group, EfaNodegroup) else 0,
        labels=dict(group.labels),
        taints=tuple(
            Taint(t.key or "", t.value or "", _TAINT_EFFECTS[str(t.effect.value)]) for t in group.taints
        ),
    )


def nodegroup_capacity(
    name: str,
    group: EfaNodegroup | GpuNodegroup | NodePool,
    *,
    time_slicing: TimeSlicing | None = None,
    mps: Mps | None = None,
    mig_devices: Mapping[str, int] | None = None,
) -> FlavorCapacity:
    """What node pool ``group`` (called ``name``) gives a queue or a runtime: its nodes, labels, taints, EFA
    interfaces, and GPUs as the device plugin advertises them (``time_slicing`` or ``mps`` replicas each, or
    ``mig_devices``: MIG resource -> instances per GPU)."""
    pool = node_pool(group)
    replicas = time_slicing.replicas if time_slicing else mps.replicas if mps else 1
    return FlavorCapacity(
        name=name,
        instance_type=pool.instance_type,
        nodes=pool.nodes,
        efa_interfaces=pool.efa_interfaces,
        labels=dict(pool.labels),
        taints=pool.taints,
        gpu_replicas=replicas,
        gpu_resource=SHARED_GPU_RESOURCE if time_slicing and time_slicing.rename_by_default else GPU_RESOURCE,
        mig_devices=dict(mig_devices or {}),
        reported_instance_type=pool.reported_instance_type,
        ready_labels=dict(pool.ready_labels),
    )


@checked_props
class TrainingQueues(Construct):
    """Kueue's queues over the cluster's GPU nodegroups: quota equal to what their nodes advertise.

    Example::

        TrainingQueues(self, "Queues", cluster=cluster, kueue=kueue, nodegroups={"p5": p5},
                       namespaces=["vision", "speech"], cohort="research",
                       reclaim_within_cohort="Any")
        # a job joins with the label kueue.x-k8s.io/queue-name: training

    A ``ResourceFlavor`` per GPU nodegroup (named after it) selects its nodes by their instance type and
    labels and carries their taints, with tolerations Kueue adds to what it admits; one ``ClusterQueue``
    (``cluster_queue_name``) holds, per flavor, nominal quota of nodes x GPUs (x sharing replicas, with
    ``time_slicing`` or ``mps``) and nodes x EFA interfaces, and admits a job only when all of it fits; a
    ``LocalQueue`` (``local_queue_name``) in each namespace (created unless ``default``, and labelled
    ``training-clusters/kueue-managed: "true"`` so Kueue manages its jobs) points at it. Where a
    nodegroup's instance type reports EC2 network topology, its flavor names a ``Topology`` of EKS's
    ``topology.k8s.aws/network-node-layer-*`` labels, so Kueue packs a job's pods under the fewest network
    nodes it can (``topology``: the runtimes and acceptance jobs ask for it by Kueue's pod-set annotation).
    A job of your own on such a nodegroup asks the same way (``kueue.x-k8s.io/podset-preferred-topology:
    topology.k8s.aws/network-node-layer-3`` on its pod template): when the ClusterQueue also has flavors without
    a Topology, Kueue admits a pod set that asks for none only to those (kueue v0.19.2
    ``pkg/scheduler/flavorassigner/tas_flavorassigner.go``: "supports only TopologyAwareScheduling"); when all
    its flavors have one, Kueue places every job by topology unasked.
    Applied once Kueue's webhook answers (after :attr:`Kueue.chart`).

    Each team namespace is also a tenant's boundary (:mod:`training_clusters.workloads.tenancy`): Pod Security admission
    enforces ``pod_security`` there (``baseline``: no privileged, hostPath, hostNetwork pod; warn and audit at
    ``restricted``), the team's Kubernetes group (``training-clusters:team:<namespace>``) holds ``edit`` in it
    and nothing outside, its pods accept connections from their own namespace only and reach everything but
    the instance metadata service (so never the node's role, whatever the node's hop limit), and each IAM role of
    ``team_roles`` gets an EKS access entry in that group.

    Attributes: ``capacities`` (:class:`~training_clusters.workloads.scheduling.FlavorCapacity` by nodegroup),
    ``manifests`` (the objects), ``cluster_queue`` (the ClusterQueue object), ``topology`` (the placement), ``resource`` (the
    ``KubernetesManifest`` of the queues), ``namespaces_resource`` (the one of the team namespaces, never
    pruned: one the list lets go stays; or None), ``default_namespace_label`` (the ``KubernetesPatch``
    opting ``default`` in, or None), ``team_manifests`` (each namespace's RoleBinding and NetworkPolicies),
    ``team_resource`` (their ``KubernetesManifest``), ``team_access_entries`` (``CfnAccessEntry`` by
    namespace), ``local_queue_name``, ``namespaces``, ``pod_security``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        kueue: Kueue,
        nodegroups: Mapping[str, EfaNodegroup | GpuNodegroup | NodePool],
        namespaces: Sequence[str] = ("default",),
        cluster_queue_name: str = DEFAULT_CLUSTER_QUEUE,
        local_queue_name: str = DEFAULT_LOCAL_QUEUE,
        cohort: str | None = None,
        within_cluster_queue: QueuePreemption | str = QueuePreemption.NEVER,
        reclaim_within_cohort: QueuePreemption | str = QueuePreemption.NEVER,
        borrow_within_cohort: QueuePreemption | str = QueuePreemption.NEVER,
        lending_limit_percent: int | None = None,
        borrowing_limit_percent: int | None = None,
        topology: TopologyPlacement | str = TopologyPlacement.PREFERRED,
        time_slicing: TimeSlicing | None = None,
        mps: Mps | None = None,
        mig_devices: Mapping[str, Mapping[str, int]] | None = None,
        pod_security: PodSecurityLevel | str = PodSecurityLevel.BASELINE,
        team_roles: Mapping[str, iam.IRole] | None = None,
    ) -> None:
        """Apply the queues.

        :param cluster: The cluster.
        :param kueue: Kueue on that cluster; the queues are applied once its webhook is ready.
        :param nodegroups: The nodegroups by name (the flavors' names), or any pool of nodes described as a
            :class:`~training_clusters.workloads.scheduling.NodePool` (a HyperPod instance group); those with NVIDIA GPUs
            get a flavor.
        :param namespaces: The team namespaces that get a LocalQueue (and may use the ClusterQueue).
            Default: ``default`` only.
        :param cluster_queue_name: Default: ``training``.
        :param local_queue_name: What jobs name in ``kueue.x-k8s.io/queue-name``. Default: ``training``.
        :param cohort: Join this cohort: queues of a cohort lend each other unused quota. Default: none.
        :param within_cluster_queue: Which admitted jobs of this queue a pending one may evict: NEVER,
            LOWER_PRIORITY or LOWER_OR_NEWER_EQUAL_PRIORITY. Default: NEVER.
        :param reclaim_within_cohort: Which jobs borrowing this queue's quota a pending one may evict to take
            it back: NEVER, LOWER_PRIORITY or ANY; needs ``cohort``. Default: NEVER.
        :param borrow_within_cohort: Evict lower-priority jobs of other queues to borrow (LOWER_PRIORITY), or
            never (NEVER); needs ``cohort`` and ``reclaim_within_cohort``. Default: NEVER.
        :param lending_limit_percent: At most this share of each quota is lent to the cohort. Default: all of
            it; needs ``cohort``.
        :param borrowing_limit_percent: Borrow at most this share of each quota on top. Default: no limit;
            needs ``cohort``.
        :param topology: How jobs ask to be placed by EC2 network topology on nodegroups whose type reports it
            (:class:`~training_clusters.model.options.TopologyPlacement`): PREFERRED, REQUIRED or OFF (no Topology,
            flavors without one). Default: PREFERRED. REQUIRED needs such a nodegroup.
        :param time_slicing: The device plugin's time-slicing, when it shares GPUs: quota counts its replicas.
            Default: whole GPUs.
        :param mps: The device plugin's MPS sharing: quota counts its replicas. Default: whole GPUs.
        :param mig_devices: For MIG-partitioned nodegroups, by name: what the device plugin advertises per GPU,
            ``{resource: instances}`` (``nvidia.com/mig-1g.10gb: 7``). Default: none partitioned.
        :param pod_security: The Pod Security Standards level each team namespace enforces: BASELINE or
            RESTRICTED (warn and audit are always at restricted). Default: BASELINE.
        :param team_roles: An IAM role per team namespace whose sessions act as that team (an EKS access entry
            in the group ``training-clusters:team:<namespace>``, bound to ``edit`` in the namespace only; a STANDARD
            entry, which may name a role of another account: "Create access entries" in the EKS user guide).
            Default: none (map users to the group yourself).
        """
        super().__init__(scope, id)
        self.pod_security = parse_option(self, "pod_security", PodSecurityLevel, pod_security)
        within = parse_option(self, "within_cluster_queue", QueuePreemption, within_cluster_queue)
        reclaim = parse_option(self, "reclaim_within_cohort", QueuePreemption, reclaim_within_cohort)
        borrow = parse_option(self, "borrow_within_cohort", QueuePreemption, borrow_within_cohort)
        placement = parse_option(self, "topology", TopologyPlacement, topology)
        self._check_names(namespaces, cluster_queue_name, local_queue_name, cohort)
        self._check_preemption(within, reclaim, borrow)
        self._check_limits(lending_limit_percent, borrowing_limit_percent)
        policy = QueuePolicy(
            cohort=cohort,
            within_cluster_queue=within,
            reclaim_within_cohort=reclaim,
            borrow_within_cohort=borrow,
            lending_limit_percent=lending_limit_percent,
            borrowing_limit_percent=borrowing_limit_percent,
        )
        self._check_cohort(policy)
        self.capacities = self._capacities(nodegroups, time_slicing, mps, mig_devices or {})
        reporting = [c.instance_type.name for c in self.capacities.values() if c.reports_topology]
        raise_if_problem(self, "topology", required_topology_problem(placement, reporting))
        self.topology = placement
        self.namespaces = list(namespaces)
        self.local_queue_name = local_queue_name
        self.manifests = queue_manifests(
            list(self.capacities.values()),
            namespaces=self.namespaces,
            cluster_queue_name=cluster_queue_name,
            local_queue_name=local_queue_name,
            policy=policy,
            topology=placement,
        )
        (self.cluster_queue,) = [m for m in self.manifests if m["kind"] == "ClusterQueue"]
        tenancy = [
            team_namespace_objects(
                namespace,
                kubernetes_version=cluster.kubernetes_version,
                level=self.pod_security,
                labels={KUEUE_MANAGED_LABEL: KUEUE_MANAGED_VALUE},
            )
            for namespace in self.namespaces
        ]
        namespace_objects = iter(o for objects in tenancy for o in objects if o["kind"] == "Namespace")
        self.manifests = [next(namespace_objects) if m["kind"] == "Namespace" else m for m in self.manifests]
        self.team_manifests = [o for objects in tenancy for o in objects if o["kind"] != "Namespace"]
        self.namespaces_resource = self._team_namespaces(cluster)
        self.resource = eks.KubernetesManifest(
            self,
            "Resource",
            cluster=cluster.cluster,
            manifest=[m for m in self.manifests if m["kind"] != "Namespace"],
        )
        self.resource.node.add_dependency(kueue.chart)
        if self.namespaces_resource is not None:
            self.resource.node.add_dependency(self.namespaces_resource)
        self.default_namespace_label = self._label_default(cluster) if "default" in namespaces else None
        self.team_resource = eks.KubernetesManifest(
            self, "TeamAccess", cluster=cluster.cluster, manifest=self.team_manifests
        )
        for scope_resource in (self.namespaces_resource, self.default_namespace_label):
            if scope_resource is not None:
                self.team_resource.node.add_dependency(scope_resource)
        self.team_access_entries = self._team_access_entries(cluster, team_roles or {})

    def _team_namespaces(self, cluster: GpuEksCluster) -> eks.KubernetesManifest | None:
        """The team namespaces (all but ``default``), applied on their own and not pruned: one that leaves
        ``namespaces`` stays, with all in it (deleting a namespace deletes everything in it, volumes claimed
        with a ``Delete`` reclaim policy included); only its LocalQueue goes. It keeps its Kueue label, and jobs
        there that name no queue are not Kueue's (``manageJobsWithoutQueueName: false``). They are deleted with
        the stack, as the cluster is."""
        namespaces = [m for m in self.manifests if m["kind"] == "Namespace"]
        if not namespaces:
            return None
        return eks.KubernetesManifest(
            self,
            "TeamNamespaces",
            cluster=cluster.cluster,
            manifest=namespaces,
            prune=False,
        )

    def _label_default(self, cluster: GpuEksCluster) -> eks.KubernetesPatch:
        """Opt the existing ``default`` namespace in to Kueue, and out again on delete (the label's value turns
        ``"false"``: CDK's patch drops a null, which would remove it; the namespace stays, as Kubernetes never
        deletes it). The queues are applied after it, so what waits for them finds Kueue managing the
        namespace."""
        security = pod_security_labels(self.pod_security, cluster.kubernetes_version)
        # on delete the namespace goes back to what an unlabelled namespace admits (privileged)
        unlabelled = {key: "privileged" if not key.endswith("-version") else "latest" for key in security}
        patch = eks.KubernetesPatch(
            self,
            "DefaultNamespaceLabel",
            cluster=cluster.cluster,
            resource_name="namespace/default",
            apply_patch={"metadata": {"labels": {KUEUE_MANAGED_LABEL: KUEUE_MANAGED_VALUE, **security}}},
            restore_patch={"metadata": {"labels": {KUEUE_MANAGED_LABEL: "false", **unlabelled}}},
        )
        self.resource.node.add_dependency(patch)
        return patch

    def _team_access_entries(
        self, cluster: GpuEksCluster, roles: Mapping[str, iam.IRole]
    ) -> dict[str, eks.CfnAccessEntry]:
        """An access entry per team role: its sessions are the team's Kubernetes group, nothing more (no
        access policy: what the group may do is the namespace's RoleBinding)."""
        entries = {}
        for namespace, role in roles.items():
            raise_if_problem(
                self, f"team_roles[{namespace!r}]", team_role_namespace_problem(namespace, self.namespaces)
            )
            entry = eks.CfnAccessEntry(
                self,
                f"TeamAccessEntry-{namespace}",
                cluster_name=cluster.cluster_name,
                principal_arn=role.role_arn,
                kubernetes_groups=[team_group(namespace)],
                type="STANDARD",
            )
            entry.node.add_dependency(cluster.cluster)
            entries[namespace] = entry
        return entries

    def _capacities(
        self,
        nodegroups: Mapping[str, EfaNodegroup | GpuNodegroup | NodePool],
        time_slicing: TimeSlicing | None,
        mps: Mps | None,
        mig_devices: Mapping[str, Mapping[str, int]],
    ) -> dict[str, FlavorCapacity]:
        capacities = {
            name: nodegroup_capacity(
                name, group, time_slicing=time_slicing, mps=mps, mig_devices=mig_devices.get(name)
            )
            for name, group in nodegroups.items()
            if group.instance_type.is_gpu
        }
        raise_if_problem(self, "nodegroups", gpu_nodegroups_problem(bool(capacities), list(nodegroups)))
        for name, capacity in capacities.items():
            raise_if_problem(self, f"nodegroups.{name}.labels", flavor_labels_problem(capacity.node_labels()))
        return capacities

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _check_names(
        self, namespaces: Sequence[str], cluster_queue: str, local_queue: str, cohort: str | None
    ) -> None:
        raise_if_problem(self, "namespaces", namespaces_problem(len(namespaces)))
        for namespace in namespaces:
            raise_if_problem(
                self, "namespaces", kubernetes_name_problem(namespace) or team_namespace_problem(namespace)
            )
        raise_if_problem(self, "namespaces", unique_names_problem(list(namespaces)))
        raise_if_problem(self, "cluster_queue_name", kubernetes_name_problem(cluster_queue))
        raise_if_problem(self, "local_queue_name", kubernetes_name_problem(local_queue))
        if cohort is not None:
            raise_if_problem(self, "cohort", cohort_name_problem(cohort))

    def _check_preemption(
        self, within: QueuePreemption, reclaim: QueuePreemption, borrow: QueuePreemption
    ) -> None:
        raise_if_problem(self, "within_cluster_queue", preemption_problem("within_cluster_queue", within))
        raise_if_problem(self, "reclaim_within_cohort", preemption_problem("reclaim_within_cohort", reclaim))
        raise_if_problem(self, "borrow_within_cohort", preemption_problem("borrow_within_cohort", borrow))
        raise_if_problem(self, "borrow_within_cohort", borrow_needs_reclaim_problem(reclaim, borrow))

    def _check_limits(self, lending: int | None, borrowing: int | None) -> None:
        raise_if_problem(self, "lending_limit_percent", limit_percent_problem(lending))
        raise_if_problem(self, "borrowing_limit_percent", limit_percent_problem(borrowing))

    def _check_cohort(self, policy: QueuePolicy) -> None:
        problem = cohort_needed_problem(
            policy.cohort,
            reclaim_within_cohort=policy.reclaim_within_cohort,
            borrow_within_cohort=policy.borrow_within_cohort,
            lending_limit_percent=policy.lending_limit_percent,
            borrowing_limit_percent=policy.borrowing_limit_percent,
        )
        if problem:
            raise prop_error(self.node.path, *problem)


@checked_props
class TrainingRuntimes(Construct):
    """Kubeflow Trainer runtimes for the cluster's EFA GPU nodegroups (or HyperPod instance groups): torchrun and
    mpirun over EFA.

    Example::

        TrainingRuntimes(self, "Runtimes", cluster=cluster, trainer=trainer, nodegroups={"p5": p5})
        TrainingRuntimes(self, "HyperPodRuntimes", cluster=cluster, trainer=trainer,
                         nodegroups=hyperpod.node_pools)       # HyperPodEksCluster's instance groups
        # a TrainJob: spec.runtimeRef.name: torchrun-efa-p5, spec.trainer.command: [torchrun, train.py]

    Per nodegroup, ``torchrun-efa-<nodegroup>`` (one pod per node with every GPU and EFA interface and huge
    pages, torchrun's rendezvous from Kubeflow Trainer) and ``mpi-efa-<nodegroup>`` (an OpenMPI launcher and
    sshd on every node: what the NCCL acceptance TrainJob runs). Both select the nodegroup's nodes (label
    ``training-clusters/nodegroup``, and a pool's ready labels), tolerate its taints and set the instance
    type's NCCL/libfabric environment (GPUDirect RDMA only where the catalogue
    says so). See :func:`~training_clusters.workloads.scheduling.torchrun_runtime`. Applied once Kubeflow Trainer's webhook
    is ready (after :attr:`KubeflowTrainer.chart`).

    Attributes: ``manifests``, ``names`` (runtime names by nodegroup: torchrun, mpi), ``resource``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        trainer: KubeflowTrainer,
        nodegroups: Mapping[str, EfaNodegroup | NodePool],
        torchrun_image: str = PYTORCH_EFA_IMAGE.reference,
        mpi_image: str = DEFAULT_NCCL_TESTS_IMAGE,
        topology: TopologyPlacement | str = TopologyPlacement.PREFERRED,
    ) -> None:
        """Apply the runtimes.

        :param cluster: The cluster.
        :param trainer: Kubeflow Trainer on that cluster.
        :param nodegroups: EFA nodegroups by name, or pools of nodes carrying ``training-clusters/nodegroup``
            with their name (:class:`~training_clusters.workloads.scheduling.NodePool`: HyperPod's instance groups); those
            with NVIDIA GPUs and EFA get runtimes.
        :param torchrun_image: Default image of the torchrun runtimes (a TrainJob may set its own).
            Default: :data:`~training_clusters.model.releases.PYTORCH_EFA_IMAGE`.
        :param mpi_image: Default image of the mpirun runtimes; it must run sshd as root.
            Default: :data:`~training_clusters.model.releases.DEFAULT_NCCL_TESTS_IMAGE`.
        :param topology: What the node pods of runtimes on a nodegroup whose type reports EC2 network topology
            ask Kueue for (:class:`~training_clusters.model.options.TopologyPlacement`; the queues' own setting).
            Default: PREFERRED.
        """
        super().__init__(scope, id)
        placement = parse_option(self, "topology", TopologyPlacement, topology)
        capacities = [
            capacity
            for capacity in (nodegroup_capacity(name, g) for name, g in nodegroups.items())
            if capacity.instance_type.is_gpu and capacity.efa_interfaces
        ]
        raise_if_problem(self, "nodegroups", efa_gpu_nodegroups_problem(bool(capacities), list(nodegroups)))
        self.names = {c.name: (torchrun_runtime_name(c.name), mpi_runtime_name(c.name)) for c in capacities}
        self.manifests = runtime_manifests(
            capacities, torchrun_image=torchrun_image, mpi_image=mpi_image, topology=placement
        )
        self.resource = eks.KubernetesManifest(
            self, "Resource", cluster=cluster.cluster, manifest=self.manifests
        )
        self.resource.node.add_dependency(trainer.chart)
