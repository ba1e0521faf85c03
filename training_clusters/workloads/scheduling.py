"""The EKS job layer's Kubernetes objects, as plain data (build side, free of CDK): Kueue's queues over the
GPU nodegroups a stack builds.

A :class:`FlavorCapacity` says what one nodegroup provides; from those, :func:`queue_manifests` makes a
``ResourceFlavor`` per nodegroup (its nodes' labels, taints and instance type), one ``ClusterQueue`` whose
nominal quota is exactly what the nodes advertise (GPUs; EFA interfaces and huge pages on EFA nodes), a ``LocalQueue`` in each team
namespace, and, where the instance types report EC2 network topology, a ``Topology`` so Kueue places a job's
pods on nodes close in the network. The constructs apply them
(:class:`~training_clusters.constructs.eks.scheduling.TrainingQueues`); acceptance reads the same names.

>>> from training_clusters.catalog import lookup
>>> p5 = FlavorCapacity(name="p5", instance_type=lookup("p5.48xlarge"), nodes=2, efa_interfaces=32)
>>> p5.quota()
{'nvidia.com/gpu': 16, 'vpc.amazonaws.com/efa': 64, 'hugepages-2Mi': '42244Mi'}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from training_clusters.catalog import InstanceType
from training_clusters.model.options import QueuePreemption, TopologyPlacement
from training_clusters.workloads.nccl import (
    NODE_NAME_ENV,
    efa_node_hugepages_mib,
    efa_pod_hugepages,
    launcher_command,
    nccl_environment,
)

#: The label a job carries to be queued: its value names a LocalQueue of the job's namespace.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
#: The label on every node of an EKS nodegroup or HyperPod instance group: its name (the EKS stack's nodegroup
#: labels; HyperPod's ``KubernetesConfig``). A ResourceFlavor and a runtime select by it.
NODEGROUP_LABEL = "training-clusters/nodegroup"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
GPU_RESOURCE = "nvidia.com/gpu"
#: What the NVIDIA device plugin advertises instead with time-slicing's ``renameByDefault``.
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
HUGEPAGES_RESOURCE = "hugepages-2Mi"
#: The ClusterQueue the EKS stacks make, and the LocalQueue of that name in each team namespace.
DEFAULT_CLUSTER_QUEUE = "training"
DEFAULT_LOCAL_QUEUE = "training"
#: The Topology object of the EKS stacks, and its levels: EKS's labels of EC2 instance topology, farthest
#: network node first, then the node itself. Kueue's docs name ``kubernetes.io/hostname`` as the node level, only
#: ever the lowest (https://kueue.sigs.k8s.io/docs/concepts/topology/), and with it TAS assigns pods to nodes and
#: can replace a failed node (node hot swap, https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/).
NETWORK_TOPOLOGY = "aws-network"
TOPOLOGY_LEVELS = (
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    "kubernetes.io/hostname",
)
#: The levels that are EC2's network nodes (all but the node itself).
NETWORK_NODE_LEVELS = TOPOLOGY_LEVELS[:-1]
#: The level a job's pods ask for: the instance's own network node, the nearest EC2 describes.
INSTANCE_NETWORK_NODE = "topology.k8s.aws/network-node-layer-3"
#: Kueue's pod-set annotations of topology-aware scheduling, set on a pod template's ``metadata.annotations``
#: (https://kueue.sigs.k8s.io/docs/tasks/run/topology_aware_scheduling/): Kueue reads them from each pod set,
#: a Job's ``spec.template``, an MPIJob's ``mpiReplicaSpecs.<role>.template``, a JobSet's (and a TrainJob's
#: runtime's) ``replicatedJobs[].template.spec.template``.
TOPOLOGY_ANNOTATIONS = {
    TopologyPlacement.PREFERRED: "kueue.x-k8s.io/podset-preferred-topology",
    TopologyPlacement.REQUIRED: "kueue.x-k8s.io/podset-required-topology",
}
#: The label that opts a namespace in to Kueue: Kueue's controller and its job webhooks act only in namespaces
#: carrying it (Kueue's ``managedJobsNamespaceSelector``, which the chart also makes each job webhook's
#: ``namespaceSelector``). Those webhooks fail closed, so elsewhere a Job (another chart's hook, a CronJob's)
#: never waits on Kueue's one replica. The queues put it on their team namespaces.
KUEUE_MANAGED_LABEL = "training-clusters/kueue-managed"
KUEUE_MANAGED_VALUE = "true"
#: Namespaces never opted in to Kueue: the cluster's own controllers and Kueue's run there.
UNMANAGED_NAMESPACES = ("kube-system", "kueue-system")


@dataclass(frozen=True)
class Taint:
    """A node taint (``key=value:effect``)."""

    key: str
    value: str
    effect: str

    def toleration(self) -> dict[str, str]:
        """The toleration that lets a pod onto nodes with this taint."""
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


@dataclass(frozen=True)
class NodePool:
    """What a pool of identical GPU nodes provides, whoever makes them: an EKS nodegroup, a HyperPod instance
    group. ``reported_instance_type`` is the value the nodes carry in ``node.kubernetes.io/instance-type`` when
    it is not the EC2 name (HyperPod's nodes report their ``ml.`` name); ``efa_interfaces`` is per node.
    ``ready_labels`` are labels a node carries only while it may take work (HyperPod's
    ``sagemaker.amazonaws.com/node-health-status: Schedulable``): the queue's flavor and the runtimes select
    them too, so no job lands on a node under health checks or awaiting repair.

    >>> from training_clusters.catalog import lookup_hyperpod
    >>> g5 = NodePool(instance_type=lookup_hyperpod("ml.g5.8xlarge"), nodes=2, efa_interfaces=1,
    ...               reported_instance_type="ml.g5.8xlarge")
    """

    instance_type: InstanceType
    nodes: int
    efa_interfaces: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    reported_instance_type: str | None = None
    ready_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FlavorCapacity:
    """What one GPU nodegroup gives its queue: its nodes, and what each advertises.

    ``gpu_replicas`` is how many pods the device plugin lets share one GPU (time-slicing or MPS replicas;
    1 without sharing), and ``gpu_resource`` the resource name it advertises them under. ``mig_devices``,
    for MIG-partitioned GPUs, is what the plugin advertises per GPU instead: ``{resource: instances}``.
    ``reported_instance_type`` is what the nodes report as their instance type (default: the EC2 name);
    ``ready_labels`` what a node carries only while it may take work (:class:`NodePool`).
    """

    name: str
    instance_type: InstanceType
    nodes: int
    efa_interfaces: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    gpu_replicas: int = 1
    gpu_resource: str = GPU_RESOURCE
    mig_devices: Mapping[str, int] = field(default_factory=dict)
    reported_instance_type: str | None = None
    ready_labels: Mapping[str, str] = field(default_factory=dict)

    def quota(self) -> dict[str, int | str]:
        """Resource name -> what all the nodes advertise together: GPUs (or, MIG-partitioned, each MIG
        resource), and on EFA nodes their EFA interfaces and the 2 MiB huge pages they reserve
        (:func:`~training_clusters.workloads.nccl.efa_node_hugepages_mib` of the instance type each)."""
        gpus = self.nodes * self.instance_type.gpu_count
        quota: dict[str, int | str] = (
            {resource: gpus * count for resource, count in self.mig_devices.items()}
            if self.mig_devices
            else {self.gpu_resource: gpus * self.gpu_replicas}
        )
        if self.efa_interfaces:
            quota[EFA_RESOURCE] = self.nodes * self.efa_interfaces
            quota[HUGEPAGES_RESOURCE] = f"{self.nodes * efa_node_hugepages_mib(self.instance_type)}Mi"
        return quota

    def node_labels(self) -> dict[str, str]:
        """The labels every node of the group carries that the flavor selects by: its instance type (as the
        nodes report it), labels, and those it carries while it may take work."""
        return {
            INSTANCE_TYPE_LABEL: self.reported_instance_type or self.instance_type.name,
            **self.labels,
            **self.ready_labels,
        }

    @property
    def reports_topology(self) -> bool:
        """Whether EKS labels the nodes with their network nodes (EC2 instance topology)."""
        return self.instance_type.network_node_layers > 0

    def topology_annotations(self, placement: TopologyPlacement) -> dict[str, str]:
        """What a pod template of a job on this nodegroup carries to be placed by network topology
        (:func:`pod_set_topology`)."""
        return pod_set_topology(placement, self.instance_type)


def pod_set_topology(placement: TopologyPlacement, instance_type: InstanceType) -> dict[str, str]:
    """The pod-set annotation asking Kueue to place the pods of a pod set on ``instance_type`` nodes under one
    layer-3 network node (:data:`INSTANCE_NETWORK_NODE`), as a preference or a requirement; none when
    ``placement`` is off or the type reports no EC2 network topology.

    None on such a type (g5, for one): Kueue admits a pod set asking for topology only to a flavor naming a
    ``Topology`` (elsewhere "Flavor ... does not support TopologyAwareScheduling", kueue v0.19.2
    ``pkg/scheduler/flavorassigner/tas_flavorassigner.go``), and :func:`queue_manifests` names one only for the
    types that report it, whose nodes carry the labels.
    """
    annotation = TOPOLOGY_ANNOTATIONS.get(placement)
    if annotation is None or not instance_type.network_node_layers:
        return {}
    return {annotation: INSTANCE_NETWORK_NODE}


@dataclass(frozen=True)
class QueueRoute:
    """Where a job joins the queues: a team namespace and its LocalQueue (``kueue.x-k8s.io/queue-name``), and
    under SageMaker HyperPod task governance the job's priority class (``kueue.x-k8s.io/priority-class``)."""

    namespace: str
    local_queue: str
    priority_class: str | None = None

    def labels(self) -> dict[str, str]:
        """The labels a job joins the queue with."""
        return queue_labels(self.local_queue, self.priority_class)


#: The label naming a job's Kueue ``WorkloadPriorityClass`` (task governance makes one per priority class).
KUEUE_PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"


def queue_labels(local_queue: str, priority_class: str | None = None) -> dict[str, str]:
    """``kueue.x-k8s.io/queue-name`` and, when given, ``kueue.x-k8s.io/priority-class``."""
    labels = {KUEUE_QUEUE_LABEL: local_queue}
    if priority_class is not None:
        labels[KUEUE_PRIORITY_CLASS_LABEL] = priority_class
    return labels


@dataclass(frozen=True)
class QueuePolicy:
    """How the ClusterQueue shares with other queues of a cohort, and whom a pending job may evict.

    Default: no cohort, no preemption (Kueue's defaults): a job waits until quota frees up.
    """

    cohort: str | None = None
    within_cluster_queue: QueuePreemption = QueuePreemption.NEVER
    reclaim_within_cohort: QueuePreemption = QueuePreemption.NEVER
    borrow_within_cohort: QueuePreemption = QueuePreemption.NEVER
    lending_limit_percent: int | None = None
    borrowing_limit_percent: int | None = None


def resource_flavor(capacity: FlavorCapacity, *, topology: str | None = None) -> dict[str, Any]:
    """The ``ResourceFlavor`` of one nodegroup: its nodes by label; its taints, tolerated by what it admits.

    Kueue admits a job to a flavor only when the job tolerates the flavor's ``nodeTaints``; the flavor's
    ``tolerations`` count, and Kueue adds them to the pods it admits, so a job needs no tolerations of its own.
    """
    spec: dict[str, Any] = {"nodeLabels": capacity.node_labels()}
    if capacity.taints:
        spec["nodeTaints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in capacity.taints]
        spec["tolerations"] = [t.toleration() for t in capacity.taints]
    if topology is not None:
        spec["topologyName"] = topology
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": capacity.name},
        "spec": spec,
    }


def network_topology(name: str = NETWORK_TOPOLOGY) -> dict[str, Any]:
    """The ``Topology`` of EKS's network-node labels, for topology-aware placement."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS]},
    }


def cluster_queue(
    name: str,
    capacities: Sequence[FlavorCapacity],
    *,
    namespaces: Sequence[str],
    policy: QueuePolicy = QueuePolicy(),
) -> dict[str, Any]:
    """The ``ClusterQueue`` over ``capacities``: one flavor each, nominal quota what its nodes advertise.

    Only the LocalQueues of ``namespaces`` may point at it. GPU and EFA quotas live in one resource group (a
    job is placed on one flavor for both); a flavor without EFA has an EFA quota of 0.
    """
    covered = sorted({resource for capacity in capacities for resource in capacity.quota()})
    flavors = []
    for capacity in capacities:
        quota = capacity.quota()
        flavors.append(
            {
                "name": capacity.name,
                "resources": [
                    _resource_quota(resource, quota.get(resource, _none(resource)), policy)
                    for resource in covered
                ],
            }
        )
    preemption: dict[str, Any] = {
        "withinClusterQueue": policy.within_cluster_queue.value,
        "reclaimWithinCohort": policy.reclaim_within_cohort.value,
    }
    if policy.borrow_within_cohort is not QueuePreemption.NEVER:
        preemption["borrowWithinCohort"] = {"policy": policy.borrow_within_cohort.value}
    spec: dict[str, Any] = {
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(namespaces)}
            ]
        },
        "queueingStrategy": "BestEffortFIFO",
        "preemption": preemption,
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
    }
    if policy.cohort is not None:
        spec["cohortName"] = policy.cohort
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _none(resource: str) -> int | str:
    """A zero quota, spelt as the resource's others are."""
    return "0Mi" if resource == HUGEPAGES_RESOURCE else 0


def _resource_quota(resource: str, nominal: int | str, policy: QueuePolicy) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": resource, "nominalQuota": nominal}
    for limit, percent in (
        ("lendingLimit", policy.lending_limit_percent),
        ("borrowingLimit", policy.borrowing_limit_percent),
    ):
        if percent is not None:
            quota[limit] = _share(nominal, percent)
    return quota


def _share(quantity: int | str, percent: int) -> int | str:
    """``percent`` of a count (rounded down) or of a ``<n>Mi`` quantity (rounded down to whole MiB)."""
    if isinstance(quantity, int):
        return quantity * percent // 100
    return f"{int(quantity.removesuffix('Mi')) * percent // 100}Mi"


def local_queue(name: str, namespace: str, cluster_queue_name: str) -> dict[str, Any]:
    """A team's ``LocalQueue``: what its jobs name in ``kueue.x-k8s.io/queue-name``."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue_name},
    }


def managed_namespace_selector() -> dict[str, Any]:
    """The namespaces Kueue manages jobs in: those labelled :data:`KUEUE_MANAGED_LABEL`."""
    return {"matchLabels": {KUEUE_MANAGED_LABEL: KUEUE_MANAGED_VALUE}}


def namespace_manifest(name: str) -> dict[str, Any]:
    """A team namespace, opted in to Kueue (:data:`KUEUE_MANAGED_LABEL`)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {KUEUE_MANAGED_LABEL: KUEUE_MANAGED_VALUE}},
    }


def queue_manifests(
    capacities: Sequence[FlavorCapacity],
    *,
    namespaces: Sequence[str],
    cluster_queue_name: str = DEFAULT_CLUSTER_QUEUE,
    local_queue_name: str = DEFAULT_LOCAL_QUEUE,
    policy: QueuePolicy = QueuePolicy(),
    topology: TopologyPlacement = TopologyPlacement.PREFERRED,
) -> list[dict[str, Any]]:
    """Every object of the queues, in the order they can be created: team namespaces, opted in to Kueue
    (``default`` exists: label it with :data:`KUEUE_MANAGED_LABEL` yourself), the Topology (when a flavor uses
    it: unless ``topology`` is off, the flavor of each nodegroup whose type reports EC2 network topology names
    it), the flavors, the ClusterQueue, the LocalQueues."""
    topology_aware = topology is not TopologyPlacement.OFF
    with_topology = topology_aware and any(c.reports_topology for c in capacities)
    objects = [namespace_manifest(ns) for ns in namespaces if ns != "default"]
    if with_topology:
        objects.append(network_topology())
    objects += [
        resource_flavor(c, topology=NETWORK_TOPOLOGY if topology_aware and c.reports_topology else None)
        for c in capacities
    ]
    objects.append(cluster_queue(cluster_queue_name, capacities, namespaces=namespaces, policy=policy))
    objects += [local_queue(local_queue_name, ns, cluster_queue_name) for ns in namespaces]
    return objects


# --------------------------------------------------------------------------------------------------
# Kubeflow Trainer runtimes: torchrun (and mpirun) over EFA on one nodegroup

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
#: The label Kubeflow Trainer reads to know which replicated job runs the TrainJob's own image and command.
TRAINER_STEP_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
#: Memory each node's pod asks for (pods that ask for huge pages must ask for memory too).
NODE_POD_MEMORY = "32000Mi"
#: Where the MPI runtime's nodes mount the SSH keys Kubeflow Trainer generates (the image's root user).
MPI_SSH_PATH = "/root/.ssh"


def torchrun_runtime_name(nodegroup: str) -> str:
    """The ClusterTrainingRuntime of ``nodegroup`` for torchrun: ``torchrun-efa-<nodegroup>``."""
    return f"torchrun-efa-{nodegroup}"


def mpi_runtime_name(nodegroup: str) -> str:
    """The ClusterTrainingRuntime of ``nodegroup`` for mpirun (NCCL tests): ``mpi-efa-<nodegroup>``."""
    return f"mpi-efa-{nodegroup}"


def efa_node_resources(instance_type: InstanceType, efa_interfaces: int) -> dict[str, Any]:
    """What one training pod asks for to have a whole EFA node: every GPU and EFA interface, huge pages for
    libfabric, memory (requests equal limits: huge pages require it)."""
    limits = {
        GPU_RESOURCE: instance_type.gpu_count,
        EFA_RESOURCE: efa_interfaces,
        "hugepages-2Mi": efa_pod_hugepages(instance_type),
        "memory": NODE_POD_MEMORY,
    }
    return {"limits": dict(limits), "requests": dict(limits)}


def _node_pod(capacity: FlavorCapacity, container: dict[str, Any]) -> dict[str, Any]:
    """A pod on one node of ``capacity``'s nodegroup: selected by its label (and its ready labels), its taints
    tolerated, shared memory for NCCL, the instance type's NCCL/libfabric environment."""
    container = {
        **container,
        "env": [{"name": k, "value": v} for k, v in nccl_environment(capacity.instance_type).items()],
        "resources": efa_node_resources(capacity.instance_type, capacity.efa_interfaces),
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
    }
    pod: dict[str, Any] = {
        "nodeSelector": {NODEGROUP_LABEL: capacity.name, **capacity.ready_labels},
        "containers": [container],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
    }
    if capacity.taints:
        pod["tolerations"] = [t.toleration() for t in capacity.taints]
    return pod


def _pod_template(spec: dict[str, Any], annotations: Mapping[str, str]) -> dict[str, Any]:
    """A pod template of ``spec``, with ``annotations`` when there are any."""
    return {"metadata": {"annotations": dict(annotations)}, "spec": spec} if annotations else {"spec": spec}


def torchrun_runtime(
    capacity: FlavorCapacity, *, image: str, topology: TopologyPlacement = TopologyPlacement.PREFERRED
) -> dict[str, Any]:
    """``ClusterTrainingRuntime`` for torchrun over EFA on ``capacity``'s nodegroup: one pod per node with
    every GPU and EFA interface, one process per GPU.

    Kubeflow Trainer's torch policy gives each pod torchrun's rendezvous (``PET_NNODES``,
    ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR``/``PORT``), so a TrainJob's command is just
    ``torchrun train.py``. Processes per node are the TrainJob's (``spec.trainer.numProcPerNode``): Trainer
    2.3.0's runtime has no such field (its torch policy is empty, as in the chart's own runtimes), and without
    one in the TrainJob, a pod that asks for GPUs gets ``PET_NPROC_PER_NODE=auto``, with which torchrun starts
    one process per GPU (kubeflow/trainer v2.3.0 ``pkg/runtime/framework/plugins/torch``). libfabric uses EFA (``FI_PROVIDER=efa``), with GPUDirect RDMA
    (``FI_EFA_USE_DEVICE_RDMA=1``) only where the catalogue says the instance type has it. A TrainJob may
    change the image, command, node count (up to the nodegroup's) and resources.

    Where the type reports EC2 network topology, the node pods' template carries Kueue's pod-set annotation
    for ``topology`` (:meth:`FlavorCapacity.topology_annotations`): Trainer builds the TrainJob's JobSet from
    this template, and Kueue takes a TrainJob's pod sets from that JobSet's replicated jobs (kueue v0.19.2
    ``pkg/controller/jobs/trainjob/trainjob_controller.go``), so every TrainJob on the runtime asks for it. A
    TrainJob may add its own through ``spec.runtimePatches`` (Trainer 2.3.0's CRD: a replicated job's pod template
    metadata, labels and annotations only).
    """
    return {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {
            "name": torchrun_runtime_name(capacity.name),
            "labels": {"trainer.kubeflow.org/framework": "torch"},
        },
        "spec": {
            "mlPolicy": {
                "numNodes": capacity.nodes,
                "torch": {},
            },
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {TRAINER_STEP_LABEL: "trainer"}},
                                "spec": {
                                    "template": _pod_template(
                                        _node_pod(capacity, {"name": "node", "image": image}),
                                        capacity.topology_annotations(topology),
                                    )
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def mpi_runtime(
    capacity: FlavorCapacity, *, image: str, topology: TopologyPlacement = TopologyPlacement.PREFERRED
) -> dict[str, Any]:
    """``ClusterTrainingRuntime`` for mpirun over EFA on ``capacity``'s nodegroup (OpenMPI): a launcher, which
    runs the TrainJob's command, and one pod per node running sshd, with every GPU and EFA interface.

    Kubeflow Trainer writes the hostfile (``OMPI_MCA_orte_default_hostfile``, one slot per GPU) and the SSH
    keys; the launcher starts once every node's sshd answers. The image must run ``/usr/sbin/sshd`` as root
    (the NCCL tests image does). The node pods ask for ``topology`` as :func:`torchrun_runtime`'s do; the
    launcher, which holds no GPU, asks for nothing. Each node pod has its node's name as ``NODE_NAME`` (what the
    NCCL acceptance TrainJob's launcher prints, :func:`~training_clusters.workloads.nccl.launcher_command`).
    """
    gpus = capacity.instance_type.gpu_count
    node = _node_pod(
        capacity,
        {
            "name": "node",
            "image": image,
            "command": ["/usr/sbin/sshd", "-De"],
            "readinessProbe": {"tcpSocket": {"port": 22}, "initialDelaySeconds": 5},
        },
    )
    node["containers"][0]["env"].append(NODE_NAME_ENV)
    launcher = {
        "containers": [
            {
                "name": "node",
                "image": image,
                "env": [{"name": k, "value": v} for k, v in nccl_environment(capacity.instance_type).items()],
            }
        ]
    }
    return {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {
            "name": mpi_runtime_name(capacity.name),
            "labels": {"trainer.kubeflow.org/framework": "mpi"},
        },
        "spec": {
            "mlPolicy": {
                "numNodes": capacity.nodes,
                "mpi": {
                    "numProcPerNode": gpus,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": MPI_SSH_PATH,
                    "runLauncherAsNode": False,
                },
            },
            "template": {
                "spec": {
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": _pod_template(node, capacity.topology_annotations(topology))
                                }
                            },
                        },
                        {
                            "name": "launcher",
                            "dependsOn": [{"name": "node", "status": "Ready"}],
                            "template": {
                                "metadata": {"labels": {TRAINER_STEP_LABEL: "trainer"}},
                                "spec": {"template": {"spec": launcher}},
                            },
                        },
                    ],
                }
            },
        },
    }


def runtime_manifests(
    capacities: Sequence[FlavorCapacity],
    *,
    torchrun_image: str,
    mpi_image: str,
    topology: TopologyPlacement = TopologyPlacement.PREFERRED,
) -> list[dict[str, Any]]:
    """The torchrun and mpirun runtimes of every EFA nodegroup among ``capacities``, their node pods asking
    for ``topology`` where the type reports it."""
    efa = [c for c in capacities if c.efa_interfaces]
    return [
        *(torchrun_runtime(c, image=torchrun_image, topology=topology) for c in efa),
        *(mpi_runtime(c, image=mpi_image, topology=topology) for c in efa),
    ]


# --------------------------------------------------------------------------------------------------
# Acceptance jobs the queues and runtimes run (written by ``training-clusters acceptance``)


def nccl_test_trainjob(
    *,
    name: str,
    nodegroup: str,
    instance_type: InstanceType,
    nodes: int,
    image: str,
    namespace: str = "default",
    queue: str | None = DEFAULT_LOCAL_QUEUE,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """A TrainJob running NCCL's ``all_reduce_perf`` over EFA across ``nodes`` nodes of ``nodegroup``, on its
    mpirun runtime (:func:`mpi_runtime`): the launcher runs the same command as the MPIJob test (each node's
    name, then ``mpirun``), one
    process per GPU (``spec.trainer.numProcPerNode``, the slots of each node in the hostfile Trainer writes).

    With ``queue``, the job is labelled for that LocalQueue (and ``priority_class``, when given) and Kueue admits
    it when the whole of it fits.
    """
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if queue is not None:
        metadata["labels"] = queue_labels(queue, priority_class)
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": metadata,
        "spec": {
            "runtimeRef": {"name": mpi_runtime_name(nodegroup)},
            "trainer": {
                "numNodes": nodes,
                "numProcPerNode": instance_type.gpu_count,
                "image": image,
                "command": launcher_command(instance_type=instance_type, workers=nodes),
            },
        },
    }


def queue_mpijob(
    job: dict[str, Any],
    *,
    local_queue: str,
    instance_type: InstanceType,
    topology: TopologyPlacement = TopologyPlacement.PREFERRED,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """``job`` (an MPIJob, :func:`~training_clusters.workloads.nccl.nccl_test_mpijob`) labelled for ``local_queue``
    of its namespace, so Kueue's MPIJob integration admits it whole, its workers (the pod set holding the GPUs)
    asking for ``topology`` on a type that reports it; the launcher holds no GPU and asks for nothing."""
    job["metadata"]["labels"] = {
        **job["metadata"].get("labels", {}),
        **queue_labels(local_queue, priority_class),
    }
    annotations = pod_set_topology(topology, instance_type)
    if annotations:
        worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
        worker["metadata"] = {
            "annotations": {**worker.get("metadata", {}).get("annotations", {}), **annotations}
        }
    return job


def gang_job(
    *,
    name: str,
    capacity: FlavorCapacity,
    image: str,
    namespace: str = "default",
    queue: str = DEFAULT_LOCAL_QUEUE,
    seconds: int = 600,
    topology: TopologyPlacement = TopologyPlacement.PREFERRED,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """A Job asking for every GPU of ``capacity``'s nodegroup (as the device plugin advertises them, shared
    replicas included): one pod per GPU, each holding it for ``seconds``, so it also passes a time-slicing
    plugin that refuses requests of more than one. Two of them test gang admission: Kueue admits one whole
    and holds the other whole.

    Created suspended, as Kueue wants: Kueue unsuspends it on admission and adds the flavor's node labels and
    tolerations to its pods. Where the type reports EC2 network topology its pods ask for ``topology``
    (:meth:`FlavorCapacity.topology_annotations`), as the queues' own jobs do.
    """
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": {NODEGROUP_LABEL: capacity.name},
        "containers": [
            {
                "name": "hold",
                "image": image,
                "command": ["sleep", str(seconds)],
                "resources": {"limits": {capacity.gpu_resource: 1}},
            }
        ],
    }
    gpus = capacity.nodes * capacity.instance_type.gpu_count * capacity.gpu_replicas
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": queue_labels(queue, priority_class)},
        "spec": {
            "suspend": True,
            "parallelism": gpus,
            "completions": gpus,
            "backoffLimit": 0,
            "template": _pod_template(pod, capacity.topology_annotations(topology)),
        },
    }
