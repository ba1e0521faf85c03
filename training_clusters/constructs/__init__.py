"""The L3 constructs, importable from here: ``from training_clusters.constructs import TrainingNetwork``.

Names load on first use (PEP 562), so importing the package does not start jsii; the environment-file
model and the console script import pure-data modules such as :mod:`training_clusters.model.options` without paying for CDK.
Options (``LustreDeploymentType``, ``NodeRole``, ``QueuePlacement`` ...) live in
:mod:`training_clusters.model.options`, importable from here too; every construct also takes an option's value as a
string (``deployment_type="PERSISTENT_2"``).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "TrainingNetwork": "common.network",
    "SharedLustre": "common.lustre",
    "SlurmAccountingDatabase": "slurm.accounting",
    "ExistingLustre": "common.lustre",
    "DataRepository": "common.lustre",
    "LustreDeploymentType": "training_clusters.model.options",
    "TrainingPlacementGroup": "common.placement",
    "PlacementStrategy": "training_clusters.model.options",
    "SpreadLevel": "training_clusters.model.options",
    "SecureBucket": "common.bucket",
    "HyperPodCluster": "hyperpod.cluster",
    "HyperPodEksCluster": "hyperpod_eks.cluster",
    "HyperPodEksDependencies": "hyperpod_eks.cluster",
    "EksInstanceGroup": "hyperpod_eks.cluster",
    "KubernetesTaint": "hyperpod_eks.cluster",
    "HyperPodTaskGovernance": "hyperpod_eks.governance",
    "HyperPodAutoscaling": "hyperpod_eks.autoscaling",
    "InstanceGroup": "hyperpod.cluster",
    "LifecycleOptions": "hyperpod.cluster",
    "LifecycleStep": "hyperpod.cluster",
    "LustreMount": "hyperpod.cluster",
    "NodeRole": "training_clusters.model.options",
    "NodeRecovery": "training_clusters.model.options",
    "DeepHealthCheck": "training_clusters.model.options",
    "Orchestrator": "hyperpod.cluster",
    "HyperPodAccounting": "training_clusters.model.options",
    "NodeProvisioningMode": "training_clusters.model.options",
    "SlurmConfigMode": "training_clusters.model.options",
    "SlurmConfigStrategy": "training_clusters.model.options",
    "AutoScaler": "training_clusters.model.options",
    "TeamUser": "slurm.users",
    "ParallelCluster": "parallelcluster.cluster",
    "HeadNode": "parallelcluster.cluster",
    "ComputeResource": "parallelcluster.cluster",
    "SlurmQueue": "parallelcluster.cluster",
    "SlurmSettings": "parallelcluster.cluster",
    "ManagedLustre": "parallelcluster.cluster",
    "CustomActionScript": "parallelcluster.cluster",
    "LoginNodePool": "parallelcluster.cluster",
    "DirectoryService": "parallelcluster.cluster",
    "OperatingSystem": "training_clusters.model.options",
    "GpuEksCluster": "eks.cluster",
    "EfaNodegroup": "eks.cluster",
    "GpuNodegroup": "eks.cluster",
    "EfaInterfaceType": "training_clusters.model.options",
    "AccessMode": "training_clusters.model.options",
    "NvidiaDevicePlugin": "eks.addons.nvidia_device_plugin",
    "EfaDevicePlugin": "eks.addons.efa_device_plugin",
    "NeuronDevicePlugin": "eks.addons.neuron_device_plugin",
    "FsxCsiDriver": "eks.addons.fsx_csi_driver",
    "EbsCsiDriver": "eks.addons.ebs_csi_driver",
    "GpuMonitoring": "eks.addons.gpu_monitoring",
    "TimeSlicing": "training_clusters.model.options",
    "Mps": "training_clusters.model.options",
    "MigStrategy": "training_clusters.model.options",
    "MpiOperator": "eks.release_manifest",
    "ReleaseManifest": "eks.release_manifest",
    "Kueue": "eks.scheduling",
    "KubeflowTrainer": "eks.scheduling",
    "TrainingQueues": "eks.scheduling",
    "TrainingRuntimes": "eks.scheduling",
    "QueuePreemption": "training_clusters.model.options",
    "PodSecurityLevel": "training_clusters.model.options",
    "QueuePlacement": "training_clusters.model.options",
    "QueueUpdateStrategy": "training_clusters.model.options",
    "DeletionPolicy": "training_clusters.model.options",
    "Capacity": "training_clusters.model.capacity",
    "CapacityKind": "training_clusters.model.options",
    "SessionManagerPolicy": "common.session_manager",
    "PcsCluster": "pcs.cluster",
    "PcsComputeNodeGroup": "pcs.cluster",
    "PcsLoginNodes": "pcs.cluster",
    "PcsQueue": "pcs.cluster",
    "SlurmVersion": "training_clusters.model.options",
    "PcsClusterSize": "training_clusters.model.options",
    "SlurmAccounting": "training_clusters.model.options",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(
        import_module(module if module.startswith("training_clusters.") else f"{__name__}.{module}"), name
    )


def __dir__() -> list[str]:
    return __all__
