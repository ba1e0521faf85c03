"""``hyperpod_eks``: SageMaker HyperPod instance groups orchestrated by one of our EKS clusters."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
    model_validator,
)

from training_clusters.catalog import (
    lookup_hyperpod,
)
from training_clusters.config.base import (
    _FieldProblem,
    _FileChoice,
    _follows,
    _hyperpod_instance_type,
    _Model,
    _raise_at,
    _raise_if,
)
from training_clusters.config.capacity import CapacityConfig, _capacity_for
from training_clusters.config.eks import EksQueuesConfig, EksSystemNodegroupConfig, NcclTestImageConfig
from training_clusters.model.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.model.errors import excerpt
from training_clusters.model.options import (
    AccessMode,
    AutoScaler,
    CapacityKind,
    DeepHealthCheck,
    EfaInterfaceType,
    NodeProvisioningMode,
    NodeRecovery,
    PodSecurityLevel,
    ResourceSharingStrategy,
    TeamPreemption,
)
from training_clusters.model.releases import (
    HYPERPOD_EKS_KUBERNETES_VERSION,
    HYPERPOD_TASK_GOVERNANCE_VERSION,
    HYPERPOD_VPC_CNI_VERSION,
)
from training_clusters.rules import eks_queues as queue_rules
from training_clusters.rules import hyperpod as hyperpod_rules
from training_clusters.rules import hyperpod_eks as hyperpod_eks_rules
from training_clusters.rules import hyperpod_governance as governance_rules
from training_clusters.rules.eks import (
    kubernetes_labels,
    public_access_cidrs_problem,
)
from training_clusters.rules.eks_addons import EKS_ADDON_VERSION_PATTERN, addon_version_problem
from training_clusters.rules.network import (
    usable_addresses,
)


class HyperPodEksTaintConfig(_Model):
    """``hyperpod_eks.instance_groups[].taints[]``: a Kubernetes taint on every node of the group."""

    key: str
    value: str = ""
    effect: str = Field(default="NoSchedule", description="NoSchedule, PreferNoSchedule or NoExecute.")

    @model_validator(mode="after")
    def _well_formed(self) -> HyperPodEksTaintConfig:
        _raise_if(hyperpod_eks_rules.taint_problem(self.key, self.value, self.effect))
        return self


def _hyperpod_labels(labels: dict[str, str]) -> dict[str, str]:
    kubernetes_labels(labels)
    for key in labels:
        _raise_if(hyperpod_eks_rules.reserved_key_problem(key))
    return labels


class HyperPodEksInstanceGroupConfig(_Model):
    """``hyperpod_eks.instance_groups[]``: HyperPod instances that join the EKS cluster as nodes."""

    name: str
    instance_type: str = Field(description="HyperPod instance type with the ml. prefix, e.g. ml.p5.48xlarge")
    count: Annotated[
        int,
        Field(
            ge=0,
            json_schema_extra={"maximum": hyperpod_rules.MAX_INSTANCE_COUNT},
            description="Nodes of the group: 1 or more; 0 with autoscaling: karpenter (Karpenter adds them).",
        ),
    ] = 1
    max_count: int | None = Field(
        default=None,
        description="With autoscaling: karpenter, the most nodes Karpenter may start in the group (its NodePool's "
        "limit, the queues' quota). Required then, refused otherwise.",
    )
    efa_interface_type: Annotated[EfaInterfaceType, _FileChoice(EfaInterfaceType)] | None = Field(
        default=None,
        description="efa-only: the secondary EFA interfaces take no IP address (types with 2 or more EFA "
        "interfaces). Default: HyperPod's (efa).",
    )
    volume_gib: int | None = Field(
        default=None,
        description="The EBS volume at /opt/sagemaker that holds containerd's and the kubelet's data. Required.",
    )
    root_volume_gib: int | None = Field(default=None, description="Default: HyperPod's root volume size.")
    threads_per_core: int = Field(default=1, description="1 (hyper-threading off) or 2.")
    image_id: str | None = Field(default=None, description="A custom AMI from HyperPod's EKS AMI.")
    deep_health_checks: list[Annotated[DeepHealthCheck, _FileChoice(DeepHealthCheck)]] | None = Field(
        default=None, description="Default: both checks on GPU/Trainium groups, none on CPU groups."
    )
    capacity: CapacityConfig | None = Field(
        default=None, description="on-demand or training-plan (training_plan_arn). Default: on-demand."
    )
    labels: Annotated[dict[str, str], AfterValidator(_hyperpod_labels)] = Field(
        default_factory=dict, description="Kubernetes labels on every node of the group."
    )
    taints: list[HyperPodEksTaintConfig] = Field(
        default_factory=list, description="Kubernetes taints on every node of the group."
    )

    _hyperpod_capacity = field_validator("capacity")(_capacity_for(CapacityOrchestrator.HYPERPOD))
    _name = field_validator("name")(_follows(hyperpod_rules.instance_group_name_problem))
    _count = field_validator("count")(_follows(hyperpod_rules.instance_count_problem))
    _image_id = field_validator("image_id")(_follows(hyperpod_rules.image_id_problem))
    _threads_per_core = field_validator("threads_per_core")(_follows(hyperpod_rules.threads_per_core_problem))
    _root_volume = field_validator("root_volume_gib")(_follows(hyperpod_rules.root_volume_problem))

    @model_validator(mode="after")
    def _health_checks_need_accelerators(self) -> HyperPodEksInstanceGroupConfig:
        checks = [check.value for check in self.deep_health_checks or ()]
        _raise_at("deep_health_checks", hyperpod_rules.deep_health_checks_problem(checks, self.instance_type))
        return self

    @property
    def nodes(self) -> int:
        """The nodes the group may have: ``count``, or ``max_count`` when Karpenter scales it."""
        return self.count if self.max_count is None else self.max_count

    @model_validator(mode="after")
    def _volume_given(self) -> HyperPodEksInstanceGroupConfig:
        _raise_at("volume_gib", hyperpod_eks_rules.volume_problem(self.volume_gib))
        return self

    _hyperpod_type = field_validator("instance_type")(_hyperpod_instance_type)


class HyperPodEksAddonsConfig(_Model):
    """``hyperpod_eks.addons``: HyperPod's agent and the device plugins are always installed; these are optional."""

    mpi_operator: bool = Field(default=True, description="Kubeflow MPI Operator (MPIJob), before the nodes.")
    kueue: bool = Field(
        default=True,
        description="Kueue before the nodes, and its ClusterQueue over the GPU instance groups (quota: what "
        "their nodes advertise) with a LocalQueue in each of queues.namespaces.",
    )
    kubeflow_trainer: bool = Field(
        default=True,
        description="Kubeflow Trainer v2 and JobSet before the nodes, and per EFA GPU instance group the "
        "TrainJob runtimes torchrun-efa-<group> and mpi-efa-<group> (on its Schedulable nodes).",
    )
    fsx_csi_driver: bool = Field(default=True, description="Installed when storage.lustre is set.")
    fsx_csi_driver_version: (
        Annotated[str, Field(json_schema_extra={"pattern": EKS_ADDON_VERSION_PATTERN})] | None
    ) = Field(
        default=None,
        description="Pin the aws-fsx-csi-driver add-on (e.g. v1.6.0-eksbuild.1). Default: EKS's default.",
    )
    vpc_cni_version: str = Field(
        default=HYPERPOD_VPC_CNI_VERSION,
        description="The vpc-cni add-on, v1.18.3 or newer (HyperPod's minimum).",
    )

    _vpc_cni = field_validator("vpc_cni_version")(_follows(hyperpod_eks_rules.vpc_cni_version_problem))
    _fsx_csi_driver_version = field_validator("fsx_csi_driver_version")(_follows(addon_version_problem))


class HyperPodEksNcclTestConfig(NcclTestImageConfig):
    """``hyperpod_eks.nccl_test``: the MPIJob `training-clusters acceptance` writes for each EFA GPU group."""


# --- HyperPod task governance (hyperpod_eks.task_governance) ---


class TaskGovernancePriorityClassConfig(_Model):
    """``hyperpod_eks.task_governance.priority_classes[]``: a class of tasks; jobs name it in the label
    ``kueue.x-k8s.io/priority-class: <name>-priority``."""

    name: str
    weight: int = Field(description="0 to 100: a higher weight is admitted first and may preempt lower ones.")

    _name = field_validator("name")(_follows(governance_rules.priority_class_name_problem))
    _weight = field_validator("weight")(_follows(governance_rules.weight_problem))


class TaskGovernancePartitionConfig(_Model):
    """``...quota[].accelerator_partition``: MIG partitions of the instance type's GPUs."""

    type: str = Field(description="mig-<profile> of a profile the type's GPUs have, e.g. mig-1g.10gb.")
    count: int

    _count = field_validator("count")(_follows(governance_rules.partition_count_problem))


class TaskGovernanceQuotaConfig(_Model):
    """``hyperpod_eks.task_governance.teams[].quota[]``: what the team is allotted of one instance type."""

    instance_type: str = Field(description="The ml. type of one of the cluster's instance groups.")
    count: int | None = Field(default=None, description="Whole instances.")
    accelerators: int | None = Field(default=None, description="GPUs or Trainium devices.")
    vcpu: float | None = None
    memory_gib: float | None = None
    accelerator_partition: TaskGovernancePartitionConfig | None = None

    _amounts = field_validator("count", "accelerators", "vcpu", "memory_gib")(
        _follows(governance_rules.amount_problem)
    )

    @model_validator(mode="after")
    def _allots_something(self) -> TaskGovernanceQuotaConfig:
        _raise_if(
            governance_rules.quota_amount_given_problem(
                count=self.count,
                accelerators=self.accelerators,
                vcpu=self.vcpu,
                memory_gib=self.memory_gib,
                partition_type=None
                if self.accelerator_partition is None
                else self.accelerator_partition.type,
            )
        )
        return self


class TaskGovernanceTeamConfig(_Model):
    """``hyperpod_eks.task_governance.teams[]``: a team, its namespace hyperpod-ns-<name> and its quota."""

    name: str = Field(description="HyperPod makes the namespace hyperpod-ns-<name> and its LocalQueue.")
    quota: list[TaskGovernanceQuotaConfig] = Field(
        default_factory=list, description="What the team is allotted, by instance type (at most 15)."
    )
    fair_share_weight: int | None = Field(
        default=None, description="0 to 100: the team's share of idle compute under fair share. Default: 0."
    )
    sharing: Annotated[ResourceSharingStrategy, _FileChoice(ResourceSharingStrategy)] = Field(
        default=ResourceSharingStrategy.LEND_AND_BORROW,
        description="Lend, DontLend or LendAndBorrow the team's idle quota.",
    )
    borrow_limit_percent: int | None = Field(
        default=None,
        description="1 to 500: idle compute the team may borrow, in percent of its quota (LendAndBorrow). "
        "Default: 50.",
    )
    preempt_team_tasks: Annotated[TeamPreemption, _FileChoice(TeamPreemption)] = Field(
        default=TeamPreemption.LOWER_PRIORITY,
        description="LowerPriority: a pending task evicts the team's own tasks of a lower class; or Never.",
    )
    pod_security: Annotated[PodSecurityLevel, _FileChoice(PodSecurityLevel)] = Field(
        default=PodSecurityLevel.BASELINE,
        description="Pod Security Standards level the team's namespace enforces (warn and audit at restricted).",
    )
    role_arn: str | None = Field(
        default=None,
        description="An IAM role whose sessions act as the team: an EKS access entry in the group "
        "training-clusters:team:hyperpod-ns-<name>, which holds edit in that namespace only.",
    )

    _name = field_validator("name")(_follows(governance_rules.team_name_problem))
    _weight = field_validator("fair_share_weight")(_follows(governance_rules.weight_problem))
    _borrow = field_validator("borrow_limit_percent")(_follows(governance_rules.borrow_limit_problem))
    _quota = field_validator("quota")(
        _follows(lambda quota: governance_rules.quota_resources_count_problem(len(quota)))
    )

    @model_validator(mode="after")
    def _borrow_limit_borrows(self) -> TaskGovernanceTeamConfig:
        _raise_at(
            "borrow_limit_percent",
            governance_rules.borrow_limit_needs_borrowing_problem(self.sharing, self.borrow_limit_percent),
        )
        return self

    @model_validator(mode="after")
    def _role_is_a_role(self) -> TaskGovernanceTeamConfig:
        if self.role_arn is not None and not queue_rules.IAM_ROLE_ARN.fullmatch(self.role_arn):
            raise _FieldProblem(
                "role_arn",
                "must be an IAM role ARN such as arn:aws:iam::111122223333:role/VisionTeam (the role whose "
                f"sessions act as the team), got {excerpt(self.role_arn)}",
            )
        return self


class TaskGovernanceConfig(_Model):
    """``hyperpod_eks.task_governance``: SageMaker HyperPod task governance (its EKS add-on, the cluster policy and
    one compute quota per team) instead of our Kueue and ClusterQueue."""

    addon_version: str = Field(
        default=HYPERPOD_TASK_GOVERNANCE_VERSION,
        description="The amazon-sagemaker-hyperpod-taskgovernance add-on.",
    )
    priority_classes: list[TaskGovernancePriorityClassConfig] = Field(
        default_factory=list, description="At most 10 classes of tasks, each with a weight."
    )
    fair_share: bool = Field(
        default=True, description="Teams borrow idle compute by their fair_share_weight (else first come)."
    )
    idle_resource_sharing: bool = Field(
        default=True, description="Compute no team's quota holds is lent to the teams that borrow."
    )
    teams: Annotated[list[TaskGovernanceTeamConfig], Field(min_length=1)]

    _addon_version = field_validator("addon_version")(_follows(governance_rules.addon_version_problem))

    @field_validator("priority_classes")
    @classmethod
    def _classes(
        cls, value: list[TaskGovernancePriorityClassConfig]
    ) -> list[TaskGovernancePriorityClassConfig]:
        _raise_if(governance_rules.priority_classes_count_problem(len(value)))
        _raise_if(governance_rules.unique_problem([c.name for c in value]))
        return value

    @field_validator("teams")
    @classmethod
    def _teams(cls, value: list[TaskGovernanceTeamConfig]) -> list[TaskGovernanceTeamConfig]:
        _raise_if(governance_rules.unique_problem([t.name for t in value]))
        return value


class HyperPodEksConfig(_Model):
    """``hyperpod_eks``: a SageMaker HyperPod cluster whose nodes join an EKS cluster made with it."""

    cluster_name: str = Field(description="The HyperPod cluster's name.")
    eks_cluster_name: str | None = Field(
        default=None, pattern=r"^[a-zA-Z][a-zA-Z0-9_-]{0,99}$", description="Default: generated."
    )
    kubernetes_version: str = Field(
        default=HYPERPOD_EKS_KUBERNETES_VERSION,
        description="One HyperPod supports that the kubectl layer drives: "
        f"{' or '.join(hyperpod_eks_rules.supported_kubernetes_versions())}. A version past EKS standard support "
        "is a synth warning.",
    )
    admin_role_arn: str | None = Field(default=None, description="Role made cluster admin (access entry).")
    admin_role_name: str | None = Field(
        default=None, pattern=r"^[\w+=,.@-]{1,64}$", description="Same, a role of the deploying account."
    )
    public_access_cidrs: list[str] | None = Field(
        default=None, description="Open the API endpoint to these ranges only. Default: private endpoint."
    )
    access_mode: Annotated[AccessMode, _FileChoice(AccessMode)] = AccessMode.API_AND_CONFIG_MAP
    system_nodegroup: EksSystemNodegroupConfig = EksSystemNodegroupConfig()
    node_recovery: Annotated[NodeRecovery, _FileChoice(NodeRecovery)] = NodeRecovery.AUTOMATIC
    node_provisioning_mode: Annotated[NodeProvisioningMode, _FileChoice(NodeProvisioningMode)] = (
        NodeProvisioningMode.CONTINUOUS
    )
    autoscaling: Annotated[AutoScaler, _FileChoice(AutoScaler)] | None = Field(
        default=None,
        description="karpenter: HyperPod's managed Karpenter scales each instance group from 0 (count: 0) to its "
        "max_count as pods wait. Default: none (each group keeps count nodes).",
    )
    instance_groups: Annotated[list[HyperPodEksInstanceGroupConfig], Field(min_length=1)]
    addons: HyperPodEksAddonsConfig = HyperPodEksAddonsConfig()
    queues: EksQueuesConfig = EksQueuesConfig()
    nccl_test: HyperPodEksNcclTestConfig = HyperPodEksNcclTestConfig()
    task_governance: TaskGovernanceConfig | None = Field(
        default=None,
        description="SageMaker HyperPod task governance: teams with quotas, priority classes, fair share. With "
        "it, the stack installs HyperPod's task governance add-on instead of Kueue and our queues.",
    )

    _cluster_name = field_validator("cluster_name")(_follows(hyperpod_rules.cluster_name_problem))
    _version = field_validator("kubernetes_version")(_follows(hyperpod_eks_rules.kubernetes_version_problem))
    _public_ranges = field_validator("public_access_cidrs")(_follows(public_access_cidrs_problem))

    @model_validator(mode="after")
    def _one_admin_role(self) -> HyperPodEksConfig:
        if self.admin_role_arn is not None and self.admin_role_name is not None:
            raise ValueError("admin_role_arn and admin_role_name name the same thing; give one of them")
        return self

    @model_validator(mode="after")
    def _counts_fit_the_scaling(self) -> HyperPodEksConfig:
        """A fixed group has 1 or more nodes; an autoscaled group starts at 0, up to its max_count."""
        for index, group in enumerate(self.instance_groups):
            where = f"instance_groups.{index}"
            if self.autoscaling is None:
                _raise_at(f"{where}.count", hyperpod_eks_rules.fixed_count_problem(group.count))
                _raise_at(
                    f"{where}.max_count",
                    hyperpod_eks_rules.max_count_without_autoscaling_problem(group.max_count),
                )
                continue
            _raise_at(f"{where}.count", hyperpod_eks_rules.autoscaled_count_problem(group.count))
            _raise_at(
                f"{where}.max_count",
                hyperpod_eks_rules.autoscaled_max_count_problem(
                    group.max_count, hyperpod_rules.MAX_INSTANCE_COUNT
                ),
            )
        return self

    @model_validator(mode="after")
    def _autoscaling_is_possible(self) -> HyperPodEksConfig:
        """What HyperPod's Karpenter autoscaling refuses, refused here with its reason."""
        if self.autoscaling is None:
            return self
        _raise_at(
            "node_provisioning_mode",
            hyperpod_eks_rules.autoscaling_provisioning_problem(self.node_provisioning_mode.value),
        )
        _raise_at("node_recovery", hyperpod_eks_rules.autoscaling_recovery_problem(self.node_recovery.value))
        _raise_at("instance_groups", hyperpod_eks_rules.autoscaled_groups_problem(len(self.instance_groups)))
        _raise_at(
            "instance_groups",
            hyperpod_eks_rules.node_resource_names_problem([g.name for g in self.instance_groups]),
        )
        for index, group in enumerate(self.instance_groups):
            where = f"instance_groups.{index}"
            training_plan = group.capacity is not None and group.capacity.type is CapacityKind.TRAINING_PLAN
            _raise_at(f"{where}.capacity", hyperpod_eks_rules.autoscaled_capacity_problem(training_plan))
            _raise_at(
                f"{where}.deep_health_checks",
                hyperpod_eks_rules.autoscaled_health_checks_problem(
                    [str(c) for c in group.deep_health_checks or ()]
                ),
            )
        return self

    @model_validator(mode="after")
    def _efa_only_applies(self) -> HyperPodEksConfig:
        """efa-only on a type with secondary EFA interfaces and a VPC CNI that knows them."""
        for index, group in enumerate(self.instance_groups):
            if group.efa_interface_type is EfaInterfaceType.EFA_ONLY:
                _raise_at(
                    f"instance_groups.{index}.efa_interface_type",
                    hyperpod_eks_rules.efa_only_problem(
                        group.instance_type,
                        lookup_hyperpod(group.instance_type).max_efa_interfaces,
                        self.addons.vpc_cni_version,
                    ),
                )
        return self

    @model_validator(mode="after")
    def _unique_group_names(self) -> HyperPodEksConfig:
        names = [g.name for g in self.instance_groups]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"instance group names must be unique, got {', '.join(repeated)} more than once")
        return self

    @model_validator(mode="after")
    def _one_kueue(self) -> HyperPodEksConfig:
        if self.task_governance is None:
            return self
        problem = governance_rules.own_kueue_problem(
            kueue_set="kueue" in self.addons.model_fields_set and self.addons.kueue,
            queues_set="queues" in self.model_fields_set,
        )
        if problem:
            raise _FieldProblem(*problem)
        return self

    @model_validator(mode="after")
    def _quotas_of_the_cluster(self) -> HyperPodEksConfig:
        if self.task_governance is None:
            return self
        cluster_types = [g.instance_type for g in self.instance_groups]
        for t, team in enumerate(self.task_governance.teams):
            for q, resource in enumerate(team.quota):
                where = f"task_governance.teams.{t}.quota.{q}"
                _raise_at(
                    f"{where}.instance_type",
                    governance_rules.quota_instance_type_problem(resource.instance_type, cluster_types),
                )
                instance_type = lookup_hyperpod(resource.instance_type)
                _raise_at(
                    f"{where}.accelerators",
                    governance_rules.accelerators_problem(instance_type, resource.accelerators),
                )
                if resource.accelerator_partition is not None:
                    _raise_at(
                        f"{where}.accelerator_partition.type",
                        governance_rules.accelerator_partition_problem(
                            instance_type, resource.accelerator_partition.type
                        ),
                    )
        return self

    @property
    def kueue(self) -> bool:
        """Whether the stack installs our Kueue (and its queues): never beside task governance."""
        return self.addons.kueue and self.task_governance is None

    @model_validator(mode="after")
    def _queues_need_kueue_and_gpus(self) -> HyperPodEksConfig:
        if "queues" not in self.model_fields_set:
            return self
        if not self.addons.kueue:
            raise _FieldProblem(
                "queues", "needs addons.kueue: true (Kueue runs the queues), got kueue: false"
            )
        if not self.queue_groups:
            raise _FieldProblem(
                "queues", "needs a GPU instance group to queue for; the hyperpod_eks section has none"
            )
        return self

    @model_validator(mode="after")
    def _required_topology_is_reachable(self) -> HyperPodEksConfig:
        reporting = [
            g.instance_type
            for g in self.instance_groups
            if g.name in self.queue_groups and lookup_hyperpod(g.instance_type).network_node_layers
        ]
        _raise_at("queues.topology", queue_rules.required_topology_problem(self.queues.topology, reporting))
        return self

    @property
    def team_namespaces(self) -> list[str]:
        """The namespaces that are teams': the queues' (the stack makes them with the queues, which need Kueue
        and a GPU instance group), else ``default``."""
        return list(self.queues.namespaces) if self.addons.kueue and self.queue_groups else ["default"]

    @property
    def queue_groups(self) -> list[str]:
        """The instance groups the queues cover: those with NVIDIA GPUs."""
        return [g.name for g in self.instance_groups if lookup_hyperpod(g.instance_type).is_gpu]

    @model_validator(mode="after")
    def _pods_fit_the_subnet(self) -> HyperPodEksConfig:
        nodes = sum(g.nodes for g in self.instance_groups)
        _raise_at(
            "instance_groups",
            hyperpod_eks_rules.pod_addresses_problem(
                nodes, hyperpod_eks_rules.ADDRESSES_PER_NODE, usable_addresses()
            ),
        )
        return self

    def stated_capacities(self) -> list[tuple[str, CapacityConfig | None]]:
        """(field, section) of every ``capacity`` this section states, in file order."""
        return [(f"hyperpod_eks.instance_groups.{i}", g.capacity) for i, g in enumerate(self.instance_groups)]


# --- AWS PCS section ---
