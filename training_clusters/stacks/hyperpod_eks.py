"""HyperPodEksEnvironment: network + FSx + an EKS cluster + SageMaker HyperPod instance groups as its nodes."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from training_clusters.config import (
    EnvironmentConfig,
    HyperPodEksConfig,
    HyperPodEksInstanceGroupConfig,
    TaskGovernanceConfig,
    TaskGovernanceTeamConfig,
    stated_capacity,
)
from training_clusters.constructs.eks.addons.fsx_csi_driver import FsxCsiDriver
from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.constructs.eks.scheduling import TrainingQueues, TrainingRuntimes
from training_clusters.constructs.hyperpod.cluster import LustreMount
from training_clusters.constructs.hyperpod_eks.cluster import (
    EksInstanceGroup,
    HyperPodEksCluster,
    KubernetesTaint,
)
from training_clusters.constructs.hyperpod_eks.governance import HyperPodTaskGovernance
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import TopologyPlacement
from training_clusters.stacks.base import (
    DESTROY_STEP,
    TrainingEnvironmentStack,
    after_team_namespaces,
    kubernetes_acceptance_step,
    queue_step,
    team_roles,
)
from training_clusters.workloads.nccl import nccl_skip_reason
from training_clusters.workloads.task_governance import (
    PriorityClass,
    QuotaResource,
    Team,
    priority_class_label,
)


class HyperPodEksEnvironment(TrainingEnvironmentStack):
    """Network + placement group + FSx (from the base), an EKS cluster made for HyperPod, and the HyperPod cluster.

    Built from the environment file's ``hyperpod_eks`` section. The EKS cluster (``eks``: a
    :class:`GpuEksCluster` with a small system nodegroup for CoreDNS and controllers) takes the version and
    authentication mode HyperPod supports; HyperPod's instance groups (``hyperpod``: a
    :class:`HyperPodEksCluster`) join it in the placement subnet, in the EFA group, once HyperPod's agent,
    the device plugins, the VPC CNI, the MPI Operator, Kubeflow Trainer and Kueue are in the cluster; Kueue's
    queues (``queues``: a :class:`TrainingQueues` whose quota is what the GPU instance groups provide) and the
    TrainJob runtimes of the EFA GPU groups (``runtimes``: :class:`TrainingRuntimes`) follow. Pods mount the shared FSx through
    the CSI driver (``fsx_csi``: in each team namespace the claim ``fsx-lustre`` of its directory
    ``teams/<namespace>``, never the root). HyperPod places its instances itself: the
    environment's placement group is not used by its nodes.

    With ``task_governance`` in the section, SageMaker HyperPod task governance (``task_governance``: a
    :class:`HyperPodTaskGovernance`) takes Kueue's place: its add-on, the cluster policy and one compute quota per
    team, and each team's tenancy in the namespace HyperPod makes for it; our Kueue and queues are not installed.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: EnvironmentConfig,
        environment_name: str,
        environment_file: str | None = None,
    ) -> None:
        super().__init__(
            scope, id, config=config, environment_name=environment_name, environment_file=environment_file
        )
        if config.hyperpod_eks is None:
            raise ConfigurationError(
                f"{environment_name}: hyperpod_eks: required for a HyperPod EKS environment"
            )
        spec = config.hyperpod_eks
        self.eks = GpuEksCluster(
            self,
            "Eks",
            vpc=self.network.vpc,
            subnets=self.network.private_subnets,
            admin_role_arn=self._admin_role_arn(spec),
            public_access_cidrs=spec.public_access_cidrs,
            access_mode=spec.access_mode,
            cluster_name=spec.eks_cluster_name,
            system_instance_type=spec.system_nodegroup.instance_type,
            system_node_count=spec.system_nodegroup.size,
            kubernetes_version=spec.kubernetes_version,
        )
        self.hyperpod = HyperPodEksCluster(
            self,
            "HyperPod",
            cluster_name=spec.cluster_name,
            eks_cluster=self.eks,
            vpc=self.network.vpc,
            subnet=self.network.placement_subnet(),
            instance_groups=[_instance_group(g) for g in spec.instance_groups],
            additional_security_groups=[self.network.efa_security_group],
            lustre=self._lustre(),
            node_recovery=spec.node_recovery,
            node_provisioning_mode=spec.node_provisioning_mode,
            mpi_operator=spec.addons.mpi_operator,
            vpc_cni_version=spec.addons.vpc_cni_version,
            kueue=spec.kueue,
            pods_ready_timeout_minutes=spec.queues.pods_ready_timeout_minutes,
            kubeflow_trainer=spec.addons.kubeflow_trainer,
            autoscaling=spec.autoscaling,
        )
        self.queues = self._queues(spec)
        self.task_governance = self._task_governance(spec.task_governance)
        self.runtimes = self._runtimes(spec)
        self.fsx_csi: FsxCsiDriver | None = None
        if self.shared_storage is not None:
            self.shared_storage.allow_clients_from(self.eks)
            self.shared_storage.allow_clients_from(self.hyperpod)
            if spec.addons.fsx_csi_driver:
                self.fsx_csi = FsxCsiDriver(
                    self,
                    "FsxCsiDriver",
                    cluster=self.eks,
                    storage=self.shared_storage,
                    namespaces=spec.team_namespaces,
                    addon_version=spec.addons.fsx_csi_driver_version,
                )
                if self.queues is not None:
                    # each team's claim goes into its namespace, which the queues make
                    after_team_namespaces(self.fsx_csi, self.queues)
        self._add_outputs(spec)

    def _queues(self, spec: HyperPodEksConfig) -> TrainingQueues | None:
        """Kueue's queues over the GPU instance groups, when Kueue is installed and there is one."""
        kueue = self.hyperpod.dependencies.kueue
        if kueue is None or not spec.queue_groups:
            return None
        queues = spec.queues
        return TrainingQueues(
            self,
            "Queues",
            cluster=self.eks,
            kueue=kueue,
            nodegroups=self.hyperpod.node_pools,
            namespaces=queues.namespaces,
            cluster_queue_name=queues.cluster_queue,
            local_queue_name=queues.local_queue,
            cohort=queues.cohort,
            within_cluster_queue=queues.within_cluster_queue,
            reclaim_within_cohort=queues.reclaim_within_cohort,
            borrow_within_cohort=queues.borrow_within_cohort,
            lending_limit_percent=queues.lending_limit_percent,
            borrowing_limit_percent=queues.borrowing_limit_percent,
            topology=queues.topology,
            pod_security=queues.pod_security,
            team_roles=team_roles(self, queues),
        )

    def _runtimes(self, spec: HyperPodEksConfig) -> TrainingRuntimes | None:
        """Kubeflow Trainer's runtimes over the EFA GPU instance groups, when Trainer is installed."""
        trainer = self.hyperpod.dependencies.trainer
        pools = {
            name: pool
            for name, pool in self.hyperpod.node_pools.items()
            if pool.instance_type.is_gpu and pool.efa_interfaces
        }
        if trainer is None or not pools:
            return None
        return TrainingRuntimes(
            self,
            "TrainingRuntimes",
            cluster=self.eks,
            trainer=trainer,
            nodegroups=pools,
            mpi_image=spec.nccl_test.image,
            # only Kueue reads the pod-set annotations, and only its queues name the Topology
            topology=spec.queues.topology if spec.kueue else TopologyPlacement.OFF,
        )

    def _task_governance(self, spec: TaskGovernanceConfig | None) -> HyperPodTaskGovernance | None:
        """SageMaker HyperPod task governance (instead of our Kueue and queues), when the file asks for it."""
        if spec is None:
            return None
        return HyperPodTaskGovernance(
            self,
            "TaskGovernance",
            eks_cluster=self.eks,
            hyperpod=self.hyperpod,
            teams=[_team(t) for t in spec.teams],
            priority_classes=[PriorityClass(c.name, c.weight) for c in spec.priority_classes],
            fair_share=spec.fair_share,
            idle_resource_sharing=spec.idle_resource_sharing,
            addon_version=spec.addon_version,
            pod_security={t.name: t.pod_security for t in spec.teams},
            team_roles={
                t.name: iam.Role.from_role_arn(self, f"TeamRole-{t.name}", t.role_arn, mutable=False)
                for t in spec.teams
                if t.role_arn is not None
            },
        )

    def _lustre(self) -> LustreMount | None:
        if self.shared_storage is None or self.mount_dir is None:
            return None
        return LustreMount(
            dns_name=self.shared_storage.dns_name,
            mount_name=self.shared_storage.mount_name,
            mount_dir=self.mount_dir,
        )

    def _admin_role_arn(self, spec: HyperPodEksConfig) -> str | None:
        if spec.admin_role_name is None:
            return spec.admin_role_arn
        arn: str = cdk.Arn.format(
            cdk.ArnComponents(service="iam", region="", resource="role", resource_name=spec.admin_role_name),
            self,
        )
        return arn

    def _add_outputs(self, spec: HyperPodEksConfig) -> None:
        self.output("ClusterArn", self.hyperpod.cluster_arn, "HyperPod cluster ARN")
        self.output("ClusterName", self.eks.cluster_name, "The EKS cluster HyperPod's nodes join")
        self.output(
            "UpdateKubeconfigCommand",
            self.eks.update_kubeconfig_command(self.config.region),
            "Point kubectl at the cluster (run from inside the VPC unless public_access_cidrs is set)",
        )
        self.output(
            "ControlPlaneLogGroup",
            f"/aws/eks/{self.eks.cluster_name}/cluster",
            "CloudWatch log group of the EKS control plane",
        )
        self.output(
            "LifecycleLogGroup",
            cdk.Fn.join(
                "", ["/aws/sagemaker/Clusters/", spec.cluster_name, "/", self.hyperpod.hyperpod.cluster_id]
            ),
            "CloudWatch log group of the lifecycle script (one stream per node)",
        )
        if self.fsx_csi is not None:
            self.output(
                "SharedStorageClaim",
                f"persistentVolumeClaim: {{claimName: {self.fsx_csi.claim_name}}} (in each team namespace: its "
                f"directory teams/<namespace> of the file system)",
                "How pods mount their team's directory of the shared FSx for Lustre file system",
            )
        self.next_steps(
            "Connect: run [UpdateKubeconfigCommand] from a machine in the VPC (the endpoint is private unless "
            "public_access_cidrs is set), then kubectl get nodes -L sagemaker.amazonaws.com/node-health-status",
            *self._autoscaling_step(),
            *self._acceptance_step(spec),
            *queue_step(self.queues, self.runtimes, fits_on=" on the instance groups"),
            *self._governance_step(),
            "A node that does not join: its lifecycle script's log is in [LifecycleLogGroup]; a pod that does not "
            "start: kubectl describe, and the control plane's logs in [ControlPlaneLogGroup]",
            DESTROY_STEP,
        )

    def _governance_step(self) -> list[str]:
        """How a team's job joins task governance's queue, when the stack set it up."""
        governance = self.task_governance
        if governance is None:
            return []
        team = governance.teams[0]
        step = (
            f"Train: a team's jobs go in its namespace hyperpod-ns-<team> ({', '.join(t.namespace for t in governance.teams)}) "
            f"labelled kueue.x-k8s.io/queue-name: hyperpod-ns-<team>-localqueue (e.g. {team.local_queue})"
        )
        if governance.priority_classes:
            classes = ", ".join(priority_class_label(c.name) for c in governance.priority_classes)
            step += f" and kueue.x-k8s.io/priority-class: one of {classes}"
        return [
            step
            + "; HyperPod's Kueue starts a job when its team's quota, or idle compute it may borrow, holds it"
        ]

    def _autoscaling_step(self) -> list[str]:
        """With Karpenter autoscaling: where to see it (its groups start with no node)."""
        if self.hyperpod.autoscaling is None:
            return []
        return [
            "Autoscaling: the instance groups start with no node; `kubectl get hyperpodnodeclass,nodepool` shows "
            "them Ready, and a pending pod makes Karpenter start one (`kubectl get nodeclaims`)"
        ]

    def _acceptance_step(self, spec: HyperPodEksConfig) -> list[str]:
        """What ``training-clusters acceptance`` writes for these instance groups (as
        ``acceptance.eks.hyperpod_eks_plan``)."""
        pools = self.hyperpod.node_pools.values()
        nccl = spec.nccl_test.enabled and any(
            p.instance_type.efa_supported and nccl_skip_reason(p.instance_type, p.nodes) is None
            for p in pools
        )
        gpus = any(p.instance_type.is_gpu for p in pools)
        queued = self.queues is not None or self.task_governance is not None
        return kubernetes_acceptance_step(
            mpijob=nccl,
            trainjob=nccl and queued and spec.addons.kubeflow_trainer,
            dcgm=gpus,
            mig=False,
            gang=gpus and queued,
        )


def _instance_group(spec: HyperPodEksInstanceGroupConfig) -> EksInstanceGroup:
    return EksInstanceGroup(
        name=spec.name,
        instance_type=spec.instance_type,
        instance_count=spec.count,
        volume_gib=spec.volume_gib,
        root_volume_gib=spec.root_volume_gib,
        threads_per_core=spec.threads_per_core,
        image_id=spec.image_id,
        deep_health_checks=spec.deep_health_checks,
        capacity=stated_capacity(spec.capacity),
        labels=dict(spec.labels),
        taints=[KubernetesTaint(key=t.key, value=t.value, effect=t.effect) for t in spec.taints],
        max_instance_count=spec.max_count,
        efa_interface_type=spec.efa_interface_type,
    )


def _team(spec: TaskGovernanceTeamConfig) -> Team:
    return Team(
        name=spec.name,
        resources=[
            QuotaResource(
                instance_type=q.instance_type,
                count=q.count,
                accelerators=q.accelerators,
                vcpu=q.vcpu,
                memory_gib=q.memory_gib,
                partition_type=None if q.accelerator_partition is None else q.accelerator_partition.type,
                partition_count=None if q.accelerator_partition is None else q.accelerator_partition.count,
            )
            for q in spec.quota
        ],
        fair_share_weight=spec.fair_share_weight,
        sharing=spec.sharing,
        borrow_limit_percent=spec.borrow_limit_percent,
        preempt_team_tasks=spec.preempt_team_tasks,
    )
