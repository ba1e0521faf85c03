"""EksTrainingEnvironment: an EKS cluster for GPU training on the environment's network, placement group and FSx."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from training_clusters.catalog import CATALOG
from training_clusters.config import PROJECT_TAG, EksConfig, EnvironmentConfig, stated_capacity
from training_clusters.constructs.eks.addons.efa_device_plugin import EfaDevicePlugin
from training_clusters.constructs.eks.addons.fsx_csi_driver import FsxCsiDriver
from training_clusters.constructs.eks.addons.gpu_monitoring import GpuMonitoring
from training_clusters.constructs.eks.addons.neuron_device_plugin import NeuronDevicePlugin
from training_clusters.constructs.eks.addons.nvidia_device_plugin import (
    NvidiaDevicePlugin,
    device_plugin_node_labels,
)
from training_clusters.constructs.eks.cluster import EfaNodegroup, GpuEksCluster, GpuNodegroup
from training_clusters.constructs.eks.release_manifest import MpiOperator
from training_clusters.constructs.eks.scheduling import (
    KubeflowTrainer,
    Kueue,
    TrainingQueues,
    TrainingRuntimes,
)
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import MigStrategy, TopologyPlacement
from training_clusters.stacks.base import (
    DESTROY_STEP,
    TrainingEnvironmentStack,
    after_team_namespaces,
    kubernetes_acceptance_step,
    queue_step,
    team_roles,
)
from training_clusters.workloads.mig import mig_config_name, mig_devices, mig_node_labels, mig_resource
from training_clusters.workloads.nccl import (
    nccl_acceptance_command,
    nccl_job_name,
    nccl_skip_reason,
    nccl_test_mpijob,
)
from training_clusters.workloads.scheduling import NODEGROUP_LABEL, queue_mpijob


class EksTrainingEnvironment(TrainingEnvironmentStack):
    """Network + placement group + FSx (from the base) and an EKS cluster with EFA and GPU nodegroups.

    Built from the environment file's ``eks`` section. Attributes: ``cluster``, ``efa_nodegroups`` and
    ``gpu_nodegroups`` (by name), ``device_plugin``, ``efa_device_plugin``, ``neuron_device_plugin``,
    ``fsx_csi``, ``monitoring``,
    ``mpi_operator``, ``trainer``, ``runtimes``, ``kueue``, ``queues`` (each None when not installed), ``nccl_jobs`` (MPIJob manifests by nodegroup name) and
    ``applied_nccl_jobs`` (the jobs the stack applies itself, by nodegroup name, when ``nccl_test.apply`` is
    set). Synth writes no job files: ``training-clusters acceptance FILE`` does, and each ``NcclTest<Nodegroup>``
    output names that command.
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
        if config.eks is None:
            raise ConfigurationError(f"{environment_name}: eks: required for an EKS environment")
        settings = config.eks
        self.cluster = GpuEksCluster(
            self,
            "Eks",
            vpc=self.network.vpc,
            subnets=self.network.private_subnets,
            admin_role_arn=self._admin_role_arn(settings),
            public_access_cidrs=settings.public_access_cidrs,
            access_mode=settings.access_mode,
            cluster_name=settings.cluster_name,
            system_instance_type=settings.system_nodegroup.instance_type,
            system_node_count=settings.system_nodegroup.size,
            # the file's eks.addons say which device plugins to install, and how (_add_addons)
            device_plugins=False,
        )
        self.cluster.add_vpc_cni()  # enforcing NetworkPolicy: the team namespaces' and the monitoring stack's
        if self.shared_storage is not None:
            self.shared_storage.allow_clients_from(self.cluster)
        self._mig_configs = self._mig_layouts(settings)
        self.efa_nodegroups = self._efa_nodegroups(settings)
        self.gpu_nodegroups = self._gpu_nodegroups(settings)
        self._add_addons(settings)
        self._add_job_layer(settings)
        if self.fsx_csi is not None and self.queues is not None:
            # each team's claim goes into its namespace, which the queues make
            after_team_namespaces(self.fsx_csi, self.queues)
        self.nccl_jobs: dict[str, dict[str, Any]] = {}
        self.applied_nccl_jobs: dict[str, eks.KubernetesManifest] = {}
        if settings.nccl_test.enabled:
            self._build_nccl_jobs(settings)
        if settings.nccl_test.apply:
            self._apply_nccl_jobs()
        self._add_eks_outputs()

    # ----------------------------------------------------------------------------------------------
    # nodegroups

    def _admin_role_arn(self, settings: EksConfig) -> str | None:
        if settings.admin_role_name is None:
            return settings.admin_role_arn
        arn: str = cdk.Arn.format(
            cdk.ArnComponents(
                service="iam", region="", resource="role", resource_name=settings.admin_role_name
            ),
            self,
        )
        return arn

    def _efa_nodegroups(self, settings: EksConfig) -> dict[str, EfaNodegroup]:
        return {
            group.name: EfaNodegroup(
                self,
                f"EfaNodegroup-{group.name}",
                cluster=self.cluster,
                instance_type=group.instance_type,
                subnet=self.network.placement_subnet(),
                placement_group=self.placement_group,
                efa_security_group=self.network.efa_security_group,
                desired_size=group.size,
                efa_interfaces=group.efa_interfaces,
                efa_interface_type=group.efa_interface_type,
                capacity=stated_capacity(group.capacity),
                labels=self._node_labels(settings, group.name, group.labels, group.instance_type),
            )
            for group in settings.efa_nodegroups
        }

    def _gpu_nodegroups(self, settings: EksConfig) -> dict[str, GpuNodegroup]:
        return {
            group.name: GpuNodegroup(
                self,
                f"GpuNodegroup-{group.name}",
                cluster=self.cluster,
                instance_type=group.instance_type,
                desired_size=group.size,
                # reserved capacity lives in one AZ: the placement subnet's (preflight checks it matches)
                subnets=(
                    [self.network.placement_subnet()]
                    if group.node_capacity().is_reserved
                    else self.network.private_subnets
                ),
                labels=self._node_labels(
                    settings, group.name, group.labels, group.instance_type, self._mig_configs.get(group.name)
                ),
                gpu_taint=group.gpu_taint,
                capacity=group.node_capacity(),
            )
            for group in settings.gpu_nodegroups
        }

    def _node_labels(
        self,
        settings: EksConfig,
        name: str,
        labels: dict[str, str],
        instance_type: str,
        mig_config: str | None = None,
    ) -> dict[str, str]:
        """The group's labels plus its name (what its queue flavor selects), what the NVIDIA device plugin's
        sharing mode needs (MPS: its daemon's) and what the MIG manager reads (the group's layout, or to stay
        off it)."""
        plugin = settings.addons.nvidia_device_plugin
        mps = plugin.sharing_mps if plugin.enabled else None
        entry = CATALOG[instance_type]
        mig = mig_node_labels(entry, mig_config, mig_manager=bool(self._mig_configs))
        return {**labels, NODEGROUP_LABEL: name, **device_plugin_node_labels(entry, mps=mps), **mig}

    def _mig_layouts(self, settings: EksConfig) -> dict[str, str]:
        """The MIG config name of each GPU nodegroup with a layout; fills ``mig_layouts`` (name to devices)."""
        self.mig_layouts: dict[str, dict[str, int]] = {}
        names: dict[str, str] = {}
        for group in settings.gpu_nodegroups:
            layout = group.mig_layout
            if layout is not None:
                entry = CATALOG[group.instance_type]
                names[group.name] = mig_config_name(entry, layout, group.name)
                self.mig_layouts[names[group.name]] = mig_devices(entry, layout)
        return names

    # ----------------------------------------------------------------------------------------------
    # add-ons

    def _add_addons(self, settings: EksConfig) -> None:
        addons = settings.addons
        instance_types = [g.instance_type for g in self.efa_nodegroups.values()]
        instance_types += [g.instance_type for g in self.gpu_nodegroups.values()]
        gpu_types = sorted({t.name for t in instance_types if t.is_gpu})
        plugin = addons.nvidia_device_plugin
        self.device_plugin: NvidiaDevicePlugin | None = None
        if plugin.enabled and gpu_types:
            self.device_plugin = NvidiaDevicePlugin(
                self,
                "NvidiaDevicePlugin",
                cluster=self.cluster,
                instance_types=gpu_types,
                time_slicing=plugin.sharing_time_slicing,
                mps=plugin.sharing_mps,
                mig_strategy=plugin.mig_strategy,
            )
        self.efa_device_plugin: EfaDevicePlugin | None = None
        if addons.efa_device_plugin and self.efa_nodegroups:
            self.efa_device_plugin = EfaDevicePlugin(
                self,
                "EfaDevicePlugin",
                cluster=self.cluster,
                instance_types=sorted({g.instance_type.name for g in self.efa_nodegroups.values()}),
            )
        trainium_types = sorted({t.name for t in instance_types if t.is_trainium})
        self.neuron_device_plugin: NeuronDevicePlugin | None = None
        if addons.neuron_device_plugin and trainium_types:
            self.neuron_device_plugin = NeuronDevicePlugin(
                self, "NeuronDevicePlugin", cluster=self.cluster, instance_types=trainium_types
            )
        self.fsx_csi: FsxCsiDriver | None = None
        if addons.fsx_csi_driver and self.shared_storage is not None:
            self.fsx_csi = FsxCsiDriver(
                self,
                "FsxCsiDriver",
                cluster=self.cluster,
                storage=self.shared_storage,
                namespaces=settings.team_namespaces,
                addon_version=addons.fsx_csi_driver_version,
            )
        self.mpi_operator: MpiOperator | None = None
        if addons.mpi_operator:
            self.mpi_operator = MpiOperator(self, "MpiOperator", cluster=self.cluster)
        self.node_monitoring_agent: eks.CfnAddon | None = None
        if addons.node_monitoring_agent and instance_types:
            # node auto-repair (on for every nodegroup) acts on the conditions the agent reports
            self.node_monitoring_agent = self.cluster.add_node_monitoring_agent()
        self.monitoring: GpuMonitoring | None = None
        if addons.gpu_monitoring is not None or self.mig_layouts:
            # MIG alone brings the GPU Operator (its MIG manager) without Prometheus and Grafana
            monitoring = addons.gpu_monitoring
            self.monitoring = GpuMonitoring(
                self,
                "GpuMonitoring",
                cluster=self.cluster,
                prometheus=monitoring is not None and monitoring.prometheus,
                grafana=monitoring is not None and monitoring.grafana,
                mig_layouts=self.mig_layouts or None,
                mig_strategy=plugin.mig_strategy if self.mig_layouts else MigStrategy.MIXED,
                # Grafana's FSx dashboard, when there is a file system and a Grafana to show it
                lustre=self.shared_storage if monitoring is not None and monitoring.grafana else None,
                # the driver makes the volumes, so the stack's tags miss them: cleanup finds them by these
                volume_tags={"project": PROJECT_TAG, "environment": self.environment_name},
            )

    def _add_job_layer(self, settings: EksConfig) -> None:
        """Kubeflow Trainer (and its runtimes for the EFA GPU nodegroups) and the MPI Operator first, then Kueue,
        which manages their jobs, and its queues."""
        self.trainer: KubeflowTrainer | None = None
        self.runtimes: TrainingRuntimes | None = None
        if settings.addons.kubeflow_trainer:
            self.trainer = KubeflowTrainer(self, "KubeflowTrainer", cluster=self.cluster)
            if any(g.instance_type.is_gpu for g in self.efa_nodegroups.values()):
                self.runtimes = TrainingRuntimes(
                    self,
                    "TrainingRuntimes",
                    cluster=self.cluster,
                    trainer=self.trainer,
                    nodegroups=self.efa_nodegroups,
                    mpi_image=settings.nccl_test.image,
                    # only Kueue reads the pod-set annotations, and only its queues name the Topology
                    topology=settings.queues.topology if settings.addons.kueue else TopologyPlacement.OFF,
                )
        self.kueue: Kueue | None = None
        self.queues: TrainingQueues | None = None
        if not settings.addons.kueue:
            return
        queues = settings.queues
        self.kueue = Kueue(
            self, "Kueue", cluster=self.cluster, pods_ready_timeout_minutes=queues.pods_ready_timeout_minutes
        )
        for operator in (self.trainer, self.mpi_operator):
            if operator is not None:
                self.kueue.node.add_dependency(operator)
        if settings.queue_nodegroups:
            plugin = settings.addons.nvidia_device_plugin
            self.queues = TrainingQueues(
                self,
                "Queues",
                cluster=self.cluster,
                kueue=self.kueue,
                nodegroups={**self.efa_nodegroups, **self.gpu_nodegroups},
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
                time_slicing=plugin.sharing_time_slicing if plugin.enabled else None,
                mps=plugin.sharing_mps if plugin.enabled else None,
                mig_devices=self._queue_mig_devices(plugin.mig_strategy),
                pod_security=queues.pod_security,
                team_roles=team_roles(self, queues),
            )

    def _queue_mig_devices(self, strategy: MigStrategy) -> dict[str, dict[str, int]]:
        """What the device plugin advertises per GPU of each MIG-partitioned nodegroup: resource -> instances."""
        devices: dict[str, dict[str, int]] = {}
        for group, config in self._mig_configs.items():
            per_gpu: dict[str, int] = {}
            for profile, count in self.mig_layouts[config].items():
                resource = mig_resource(strategy, profile)
                per_gpu[resource] = per_gpu.get(resource, 0) + count
            devices[group] = per_gpu
        return devices

    # ----------------------------------------------------------------------------------------------
    # NCCL acceptance jobs and outputs

    def _build_nccl_jobs(self, settings: EksConfig) -> None:
        for name, group in self.efa_nodegroups.items():
            if group.instance_type.is_gpu:
                self.nccl_jobs[name] = nccl_test_mpijob(
                    name=nccl_job_name(name),
                    instance_type=group.instance_type,
                    workers=group.desired_size,
                    efa_interfaces=group.efa_interfaces,
                    image=settings.nccl_test.image,
                )
                if self.queues is not None and "default" in self.queues.namespaces:
                    # admitted by Kueue through the LocalQueue of its namespace, as acceptance writes it
                    queue_mpijob(
                        self.nccl_jobs[name],
                        local_queue=self.queues.local_queue_name,
                        instance_type=group.instance_type,
                        topology=self.queues.topology,
                    )

    def _apply_nccl_jobs(self) -> None:
        """Apply each MPIJob once the operator's CRD exists and its nodegroup has been created."""
        assert self.mpi_operator is not None  # the config requires addons.mpi_operator with nccl_test.apply
        for name, job in self.nccl_jobs.items():
            manifest = self.cluster.cluster.add_manifest(f"NcclTest-{name}", job)
            manifest.node.add_dependency(self.mpi_operator.resource)
            manifest.node.add_dependency(self.efa_nodegroups[name])
            if "labels" in job["metadata"] and self.queues is not None:
                manifest.node.add_dependency(self.queues.resource)  # its LocalQueue exists, Kueue suspends it
            self.applied_nccl_jobs[name] = manifest

    def _add_eks_outputs(self) -> None:
        self.output(
            "UpdateKubeconfigCommand",
            self.cluster.update_kubeconfig_command(self.config.region),
            "Point kubectl at the cluster (run from inside the VPC unless public_access_cidrs is set)",
        )
        self.output("ClusterName", self.cluster.cluster_name, "The EKS cluster")
        self.output(
            "ControlPlaneLogGroup",
            f"/aws/eks/{self.cluster.cluster_name}/cluster",
            "CloudWatch log group of the control plane (api, audit, authenticator, ...)",
        )
        if self.fsx_csi is not None:
            self.output(
                "SharedStorageClaim",
                f"persistentVolumeClaim: {{claimName: {self.fsx_csi.claim_name}}} (in each team namespace: its "
                f"directory teams/<namespace> of the file system)",
                "How pods mount their team's directory of the shared FSx for Lustre file system",
            )
        for name in self._runnable_nccl_jobs():  # `training-clusters acceptance` writes no job for the others
            self.output(
                f"NcclTest{''.join(part.capitalize() for part in name.split('-'))}",
                nccl_acceptance_command(
                    self.environment_name,
                    name,
                    install_operator=self.mpi_operator is None,
                    applied=name in self.applied_nccl_jobs,
                ),
                f"Write the NCCL all_reduce_perf acceptance job of nodegroup {name} with training-clusters "
                "acceptance, run it and check its log",
            )
        self.next_steps(
            "Connect: run [UpdateKubeconfigCommand] from a machine in the VPC (the endpoint is private unless "
            "public_access_cidrs is set), then kubectl get nodes",
            *self._acceptance_step(nccl=bool(self._runnable_nccl_jobs())),
            *queue_step(self.queues, self.runtimes, fits_on=""),
            "A pod that does not start: kubectl describe and kubectl logs; the control plane's logs are in "
            "[ControlPlaneLogGroup]",
            DESTROY_STEP,
        )

    def _runnable_nccl_jobs(self) -> list[str]:
        """The nodegroups whose NCCL job ``training-clusters acceptance`` writes (large enough to run it)."""
        return [
            name
            for name in self.nccl_jobs
            if nccl_skip_reason(
                self.efa_nodegroups[name].instance_type, self.efa_nodegroups[name].desired_size
            )
            is None
        ]

    def _acceptance_step(self, *, nccl: bool) -> list[str]:
        """What ``training-clusters acceptance`` writes for these nodegroups (as ``acceptance.eks.eks_plan``)."""
        whole_gpus = any(g.instance_type.is_gpu for g in self.efa_nodegroups.values()) or any(
            g.instance_type.is_gpu and name not in self._mig_configs
            for name, g in self.gpu_nodegroups.items()
        )
        return kubernetes_acceptance_step(
            mpijob=nccl,
            trainjob=nccl and self.kueue is not None and self.trainer is not None,
            dcgm=whole_gpus,
            mig=bool(self._mig_configs),
            gang=whole_gpus and self.kueue is not None,
        )
