"""HyperPodEksEnvironment: network + FSx + an EKS cluster + SageMaker HyperPod instance groups as its nodes."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from training_clusters.config import (
    EnvironmentConfig,
    HyperPodEksConfig,
    HyperPodEksInstanceGroupConfig,
    stated_capacity,
)
from training_clusters.constructs.eks_addons import FsxCsiDriver
from training_clusters.constructs.eks_gpu import GpuEksCluster
from training_clusters.constructs.eks_jobs import TrainingQueues, TrainingRuntimes
from training_clusters.constructs.hyperpod import LustreMount
from training_clusters.constructs.hyperpod_eks import EksInstanceGroup, HyperPodEksCluster, KubernetesTaint
from training_clusters.errors import ConfigurationError
from training_clusters.nccl_job import nccl_skip_reason
from training_clusters.options import TopologyPlacement
from training_clusters.stacks.base import (
    DESTROY_STEP,
    TrainingEnvironmentStack,
    kubernetes_acceptance_step,
    queue_step,
    team_roles,
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
    the CSI driver (``fsx_csi``, a PV and the claim ``fsx-lustre``). HyperPod places its instances itself: the
    environment's placement group is not used by its nodes.
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
            kueue=spec.addons.kueue,
            pods_ready_timeout_minutes=spec.queues.pods_ready_timeout_minutes,
            kubeflow_trainer=spec.addons.kubeflow_trainer,
            autoscaling=spec.autoscaling,
        )
        self.queues = self._queues(spec)
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
                    addon_version=spec.addons.fsx_csi_driver_version,
                )
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
            topology=spec.queues.topology if spec.addons.kueue else TopologyPlacement.OFF,
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
                f"persistentVolumeClaim: {{claimName: {self.fsx_csi.claim_name}}} (namespace default)",
                "How pods mount the shared FSx for Lustre file system",
            )
        self.next_steps(
            "Connect: run [UpdateKubeconfigCommand] from a machine in the VPC (the endpoint is private unless "
            "public_access_cidrs is set), then kubectl get nodes -L sagemaker.amazonaws.com/node-health-status",
            *self._autoscaling_step(),
            *self._acceptance_step(spec),
            *queue_step(self.queues, self.runtimes, fits_on=" on the instance groups"),
            "A node that does not join: its lifecycle script's log is in [LifecycleLogGroup]; a pod that does not "
            "start: kubectl describe, and the control plane's logs in [ControlPlaneLogGroup]",
            DESTROY_STEP,
        )

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
        return kubernetes_acceptance_step(
            mpijob=nccl,
            trainjob=nccl and self.queues is not None and spec.addons.kubeflow_trainer,
            dcgm=gpus,
            mig=False,
            gang=gpus and self.queues is not None,
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
