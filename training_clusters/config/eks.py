"""``eks``: an EKS cluster for GPU training, its nodegroups, add-ons and queues."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
    model_validator,
)

from training_clusters.catalog import (
    CATALOG,
)
from training_clusters.config.base import (
    _any_type,
    _catalogued,
    _FieldProblem,
    _FileChoice,
    _follows,
    _Model,
    _raise_at,
    _raise_if,
)
from training_clusters.config.capacity import CapacityConfig, _capacity_for
from training_clusters.model.capacity import Capacity
from training_clusters.model.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import (
    AccessMode,
    EfaInterfaceType,
    MigLayout,
    MigStrategy,
    Mps,
    PodSecurityLevel,
    QueuePreemption,
    TimeSlicing,
    TopologyPlacement,
)
from training_clusters.model.releases import (
    DEFAULT_NCCL_TESTS_IMAGE,
)
from training_clusters.rules import eks_queues as queue_rules
from training_clusters.rules.eks import (
    accelerated_nodegroup_problem,
    admin_role_arn_problem,
    efa_nodegroup_problem,
    gpu_sharing_problem,
    kubernetes_labels,
    mig_layout_problem,
    mig_strategy_problem,
    public_access_cidrs_problem,
)
from training_clusters.rules.eks_addons import (
    EKS_ADDON_VERSION_PATTERN,
    addon_version_problem,
    grafana_problem,
)
from training_clusters.rules.instance_types import (
    efa_interfaces_problem,
)


class EksSystemNodegroupConfig(_Model):
    """``eks.system_nodegroup``: nodes for CoreDNS, controllers and add-ons."""

    instance_type: str = "t3.large"
    size: Annotated[int, Field(ge=1)] = 2

    _instance_type = field_validator("instance_type")(_any_type)


class EksEfaNodegroupConfig(_Model):
    """``eks.efa_nodegroups[]``: EFA instances in the placement group."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    instance_type: str
    size: Annotated[int, Field(ge=1)]
    efa_interfaces: int | None = Field(default=None, description="Default: the instance's maximum.")
    efa_interface_type: Annotated[EfaInterfaceType, _FileChoice(EfaInterfaceType)] = EfaInterfaceType.EFA
    capacity: CapacityConfig | None = Field(
        default=None,
        description="Where the nodes come from: on-demand, spot, a reservation or a capacity-block. "
        "Default: on-demand.",
    )
    labels: Annotated[dict[str, str], AfterValidator(kubernetes_labels)] = Field(default_factory=dict)

    _instance_type = field_validator("instance_type")(_catalogued)

    _eks_capacity = field_validator("capacity")(_capacity_for(CapacityOrchestrator.EKS))

    def node_capacity(self) -> Capacity:
        """``capacity`` on the model: On-Demand when not given."""
        return Capacity.on_demand() if self.capacity is None else self.capacity.to_capacity()

    @model_validator(mode="after")
    def _has_efa(self) -> EksEfaNodegroupConfig:
        problem = efa_nodegroup_problem(CATALOG[self.instance_type])
        if problem:
            raise ValueError(f"instance_type {problem}")
        if self.efa_interfaces is not None:
            _raise_at(
                "efa_interfaces", efa_interfaces_problem(CATALOG[self.instance_type], self.efa_interfaces)
            )
        return self


class EksGpuNodegroupConfig(_Model):
    """``eks.gpu_nodegroups[]``: GPU instances without EFA (sharing, inference, notebooks)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    instance_type: str
    size: Annotated[int, Field(ge=1)]
    labels: Annotated[dict[str, str], AfterValidator(kubernetes_labels)] = Field(default_factory=dict)
    gpu_taint: bool = True
    capacity: CapacityConfig | None = Field(
        default=None,
        description="on-demand, spot, a reservation or a capacity-block; reserved capacity puts the nodes "
        "in the placement subnet (its AZ must be the reservation's). Default: on-demand.",
    )
    mig: str | dict[str, Annotated[int, Field(ge=1, le=7)]] | None = Field(
        default=None,
        description="Partition every GPU with MIG (A100, H100, H200, B200): all-<profile> (e.g. all-1g.10gb), "
        "all-balanced, or {profile: instances per GPU}. Needs addons.nvidia_device_plugin.mig_strategy "
        "single or mixed. Default: whole GPUs.",
    )

    _instance_type = field_validator("instance_type")(_catalogued)

    _eks_capacity = field_validator("capacity")(_capacity_for(CapacityOrchestrator.EKS))

    def node_capacity(self) -> Capacity:
        """``capacity`` on the model (On-Demand when omitted)."""
        return Capacity.on_demand() if self.capacity is None else self.capacity.to_capacity()

    @property
    def mig_layout(self) -> MigLayout | None:
        """``mig`` as the constructs' option (None for whole GPUs)."""
        return None if self.mig is None else MigLayout.parse(self.mig)

    @model_validator(mode="after")
    def _has_accelerators(self) -> EksGpuNodegroupConfig:
        _raise_at("instance_type", accelerated_nodegroup_problem(CATALOG[self.instance_type]))
        return self

    @model_validator(mode="after")
    def _mig_layout_fits_the_gpu(self) -> EksGpuNodegroupConfig:
        if self.mig is None:
            return self
        try:
            layout = MigLayout.parse(self.mig)
        except ConfigurationError as error:
            raise ValueError(f"mig {error}") from None
        problem = mig_layout_problem(CATALOG[self.instance_type], layout)
        if problem:
            raise ValueError(f"mig {problem}")
        return self


class EksTimeSlicingConfig(_Model):
    """``eks.addons.nvidia_device_plugin.time_slicing``."""

    replicas: int
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = True


class EksMpsConfig(_Model):
    """``eks.addons.nvidia_device_plugin.mps``."""

    replicas: int


class EksDevicePluginConfig(_Model):
    """``eks.addons.nvidia_device_plugin``: GPU sharing is time_slicing, mps or a MIG strategy, one at most."""

    enabled: bool = True
    time_slicing: EksTimeSlicingConfig | None = None
    mps: EksMpsConfig | None = None
    mig_strategy: Annotated[MigStrategy, _FileChoice(MigStrategy)] = MigStrategy.NONE

    @model_validator(mode="after")
    def _one_way_of_sharing(self) -> EksDevicePluginConfig:
        problem = gpu_sharing_problem(self.sharing_time_slicing, self.sharing_mps, self.mig_strategy)
        if problem:
            raise ValueError(f"{problem[0]} {problem[1]}")
        return self

    @property
    def sharing_time_slicing(self) -> TimeSlicing | None:
        """``time_slicing`` as the construct's option."""
        ts = self.time_slicing
        if ts is None:
            return None
        return TimeSlicing(ts.replicas, ts.rename_by_default, ts.fail_requests_greater_than_one)

    @property
    def sharing_mps(self) -> Mps | None:
        """``mps`` as the construct's option."""
        return None if self.mps is None else Mps(self.mps.replicas)


class EksMonitoringConfig(_Model):
    """``eks.addons.gpu_monitoring``: GPU Operator with DCGM exporter, optional Prometheus and Grafana."""

    prometheus: bool = True
    grafana: bool = True

    @model_validator(mode="after")
    def _grafana_needs_prometheus(self) -> EksMonitoringConfig:
        _raise_at("grafana", grafana_problem(grafana=self.grafana, prometheus=self.prometheus))
        return self


class EksAddonsConfig(_Model):
    """``eks.addons``."""

    nvidia_device_plugin: EksDevicePluginConfig = EksDevicePluginConfig()
    efa_device_plugin: bool = Field(default=True, description="Installed when there are EFA nodegroups.")
    neuron_device_plugin: bool = Field(
        default=True, description="AWS Neuron's device plugin, installed when a nodegroup has Trainium."
    )
    fsx_csi_driver: bool = Field(default=True, description="Installed when storage.lustre is set.")
    fsx_csi_driver_version: (
        Annotated[str, Field(json_schema_extra={"pattern": EKS_ADDON_VERSION_PATTERN})] | None
    ) = Field(
        default=None,
        description="Pin the aws-fsx-csi-driver add-on (e.g. v1.6.0-eksbuild.1). Default: EKS's default.",
    )
    gpu_monitoring: EksMonitoringConfig | None = None
    mpi_operator: bool = Field(
        default=True, description="Kubeflow MPI Operator (runs MPIJobs such as the NCCL acceptance job)."
    )
    kueue: bool = Field(
        default=True,
        description="Kueue: queues, GPU quotas and all-or-nothing admission of Jobs, MPIJobs, JobSets and TrainJobs.",
    )
    kubeflow_trainer: bool = Field(
        default=True, description="Kubeflow Trainer v2 (TrainJob on JobSet) and JobSet, its dependency."
    )
    node_monitoring_agent: bool = Field(
        default=True,
        description="The eks-node-monitoring-agent add-on (GPU XID/DCGM, kernel and network problems as node "
        "conditions, acted on by node auto-repair), installed when there are EFA or GPU nodegroups.",
    )

    _fsx_csi_driver_version = field_validator("fsx_csi_driver_version")(_follows(addon_version_problem))


class NcclTestImageConfig(_Model):
    """Whether the NCCL MPIJob is written, and the image it runs: what ``eks.nccl_test`` and
    ``hyperpod_eks.nccl_test`` share."""

    enabled: bool = True
    image: str = Field(
        default=DEFAULT_NCCL_TESTS_IMAGE,
        min_length=1,
        max_length=512,
        pattern=r"^\S+$",
        description="Container image reference (registry/repository:tag or @digest) with NCCL tests and EFA.",
    )


class EksNcclTestConfig(NcclTestImageConfig):
    """``eks.nccl_test``: the MPIJob written for each EFA nodegroup, optionally applied by the stack."""

    apply: bool = Field(
        default=False,
        description="Apply the MPIJob at deploy time (it runs once the nodes are up). Needs addons.mpi_operator.",
    )


class EksQueuesConfig(_Model):
    """``eks.queues``: Kueue's ClusterQueue over the GPU nodegroups (quota: what their nodes advertise) and
    a LocalQueue in each team namespace. Needs addons.kueue; made whenever Kueue and a GPU nodegroup are."""

    cluster_queue: str = Field(default="training", description="Name of the ClusterQueue.")
    local_queue: str = Field(
        default="training",
        description="Name of each namespace's LocalQueue: jobs' kueue.x-k8s.io/queue-name.",
    )
    namespaces: list[str] = Field(
        default_factory=lambda: ["default"],
        min_length=1,
        description="Team namespaces (created unless default), each with a LocalQueue.",
    )
    cohort: str | None = Field(default=None, description="Share unused quota with the queues of this cohort.")
    within_cluster_queue: Annotated[QueuePreemption, _FileChoice(QueuePreemption)] = QueuePreemption.NEVER
    reclaim_within_cohort: Annotated[QueuePreemption, _FileChoice(QueuePreemption)] = QueuePreemption.NEVER
    borrow_within_cohort: Annotated[QueuePreemption, _FileChoice(QueuePreemption)] = QueuePreemption.NEVER
    lending_limit_percent: int | None = Field(
        default=None, description="Lend at most this share of each quota to the cohort. Default: all."
    )
    borrowing_limit_percent: int | None = Field(
        default=None, description="Borrow at most this share of each quota on top. Default: no limit."
    )
    topology: Annotated[TopologyPlacement, _FileChoice(TopologyPlacement)] = Field(
        default=TopologyPlacement.PREFERRED,
        description="Place a job's GPU pods under one EC2 network node (network-node-layer-3) where the "
        "instance type reports topology: preferred (else as close as they fit), required (else the job "
        "waits), or off.",
    )
    pods_ready_timeout_minutes: int = Field(
        default=10, description="Evict and requeue an admitted job whose pods are not all running by then."
    )
    pod_security: Annotated[PodSecurityLevel, _FileChoice(PodSecurityLevel)] = Field(
        default=PodSecurityLevel.BASELINE,
        description="Pod Security Standards level each team namespace enforces: baseline (no privileged, "
        "hostPath or hostNetwork pods) or restricted (also non-root, no capabilities); warn and audit are "
        "at restricted.",
    )
    team_roles: dict[str, str] = Field(
        default_factory=dict,
        description="An IAM role ARN per team namespace: its sessions get an EKS access entry in the group "
        "training-clusters:team:<namespace>, which holds edit in that namespace only.",
    )

    _names = field_validator("cluster_queue", "local_queue")(_follows(queue_rules.kubernetes_name_problem))
    _cohort = field_validator("cohort")(_follows(queue_rules.cohort_name_problem))
    _limits = field_validator("lending_limit_percent", "borrowing_limit_percent")(
        _follows(queue_rules.limit_percent_problem)
    )
    _timeout = field_validator("pods_ready_timeout_minutes")(_follows(queue_rules.pods_ready_timeout_problem))

    @field_validator("namespaces")
    @classmethod
    def _team_namespaces(cls, namespaces: list[str]) -> list[str]:
        for namespace in namespaces:
            _raise_if(
                queue_rules.kubernetes_name_problem(namespace)
                or queue_rules.team_namespace_problem(namespace)
            )
        _raise_if(queue_rules.unique_names_problem(namespaces))
        return namespaces

    @model_validator(mode="after")
    def _preemption_choices(self) -> EksQueuesConfig:
        for field in queue_rules.PREEMPTION_CHOICES:
            problem = queue_rules.preemption_problem(field, getattr(self, field))
            if problem:
                raise _FieldProblem(field, problem)
        problem = queue_rules.borrow_needs_reclaim_problem(
            self.reclaim_within_cohort, self.borrow_within_cohort
        )
        if problem:
            raise _FieldProblem("borrow_within_cohort", problem)
        return self

    @model_validator(mode="after")
    def _team_roles_of_team_namespaces(self) -> EksQueuesConfig:
        for namespace, role_arn in self.team_roles.items():
            problem = queue_rules.team_role_problem(namespace, role_arn, self.namespaces)
            if problem:
                raise _FieldProblem(*problem)
        return self

    @model_validator(mode="after")
    def _cohort_options_need_a_cohort(self) -> EksQueuesConfig:
        problem = queue_rules.cohort_needed_problem(
            self.cohort,
            reclaim_within_cohort=self.reclaim_within_cohort,
            borrow_within_cohort=self.borrow_within_cohort,
            lending_limit_percent=self.lending_limit_percent,
            borrowing_limit_percent=self.borrowing_limit_percent,
        )
        if problem:
            raise _FieldProblem(*problem)
        return self


class EksConfig(_Model):
    """``eks``: an EKS cluster with EFA and GPU nodegroups and GPU add-ons."""

    cluster_name: str | None = Field(default=None, pattern=r"^[a-zA-Z][a-zA-Z0-9_-]{0,99}$")
    admin_role_arn: str | None = Field(default=None, description="Role made cluster admin (access entry).")
    admin_role_name: str | None = Field(
        default=None, pattern=r"^[\w+=,.@-]{1,64}$", description="Same, a role of the deploying account."
    )
    public_access_cidrs: list[str] | None = Field(
        default=None, description="Open the API endpoint to these ranges only. Default: private endpoint."
    )
    access_mode: Annotated[AccessMode, _FileChoice(AccessMode)] = AccessMode.API
    system_nodegroup: EksSystemNodegroupConfig = EksSystemNodegroupConfig()
    efa_nodegroups: list[EksEfaNodegroupConfig] = Field(default_factory=list)
    gpu_nodegroups: list[EksGpuNodegroupConfig] = Field(default_factory=list)
    addons: EksAddonsConfig = EksAddonsConfig()
    nccl_test: EksNcclTestConfig = EksNcclTestConfig()
    queues: EksQueuesConfig = EksQueuesConfig()

    _public_ranges = field_validator("public_access_cidrs")(_follows(public_access_cidrs_problem))
    _admin_role_arn = field_validator("admin_role_arn")(_follows(admin_role_arn_problem))

    @model_validator(mode="after")
    def _one_admin_role(self) -> EksConfig:
        if self.admin_role_arn is not None and self.admin_role_name is not None:
            raise ValueError("admin_role_arn and admin_role_name name the same thing; give one of them")
        return self

    @model_validator(mode="after")
    def _queues_need_kueue_and_gpus(self) -> EksConfig:
        if "queues" not in self.model_fields_set:
            return self
        if not self.addons.kueue:
            raise _FieldProblem(
                "queues", "needs addons.kueue: true (Kueue runs the queues), got kueue: false"
            )
        if not self.queue_nodegroups:
            raise _FieldProblem("queues", "needs a GPU nodegroup to queue for; the eks section has none")
        return self

    @model_validator(mode="after")
    def _required_topology_is_reachable(self) -> EksConfig:
        types = [(g.name, g.instance_type) for g in self.efa_nodegroups]
        types += [(g.name, g.instance_type) for g in self.gpu_nodegroups]
        queued = self.queue_nodegroups
        reporting = [t for name, t in types if name in queued and CATALOG[t].network_node_layers]
        _raise_at("queues.topology", queue_rules.required_topology_problem(self.queues.topology, reporting))
        return self

    @property
    def team_namespaces(self) -> list[str]:
        """The namespaces that are teams': the queues' (the stack makes them with the queues, which need Kueue
        and a GPU nodegroup), else ``default``."""
        return list(self.queues.namespaces) if self.addons.kueue and self.queue_nodegroups else ["default"]

    @property
    def queue_nodegroups(self) -> list[str]:
        """The nodegroups the queues cover: those with NVIDIA GPUs."""
        names = [(g.name, g.instance_type) for g in self.efa_nodegroups]
        names += [(g.name, g.instance_type) for g in self.gpu_nodegroups]
        return [name for name, instance_type in names if CATALOG[instance_type].is_gpu]

    @model_validator(mode="after")
    def _applied_job_needs_operator(self) -> EksConfig:
        if self.nccl_test.apply and not (self.nccl_test.enabled and self.addons.mpi_operator):
            raise ValueError(
                "nccl_test.apply: true needs nccl_test.enabled: true and addons.mpi_operator: true "
                f"(got enabled: {str(self.nccl_test.enabled).lower()}, "
                f"mpi_operator: {str(self.addons.mpi_operator).lower()})"
            )
        return self

    @model_validator(mode="after")
    def _unique_nodegroup_names(self) -> EksConfig:
        names = [g.name for g in self.efa_nodegroups] + [g.name for g in self.gpu_nodegroups]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"nodegroup names must be unique, got {', '.join(repeated)} more than once")
        return self

    @model_validator(mode="after")
    def _mig_strategy_matches_the_layouts(self) -> EksConfig:
        plugin = self.addons.nvidia_device_plugin
        if not plugin.enabled:
            return self
        layouts = {g.name: g.mig_layout for g in self.gpu_nodegroups if g.mig_layout is not None}
        problem = mig_strategy_problem(plugin.mig_strategy, layouts)
        if problem:
            raise ValueError(f"addons.nvidia_device_plugin.mig_strategy {problem}")
        return self

    def stated_capacities(self) -> list[tuple[str, CapacityConfig | None]]:
        """(field, section) of every ``capacity`` this section states, in file order."""
        return [
            *((f"eks.efa_nodegroups.{i}", g.capacity) for i, g in enumerate(self.efa_nodegroups)),
            *((f"eks.gpu_nodegroups.{i}", g.capacity) for i, g in enumerate(self.gpu_nodegroups)),
        ]


# --- HyperPod on EKS section ---
