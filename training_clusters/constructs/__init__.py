"""The L3 constructs, importable from here: ``from training_clusters.constructs import TrainingNetwork``.

Names load on first use (PEP 562), so importing the package does not start jsii; the environment-file
model and the console script import pure-data modules such as :mod:`training_clusters.options` without paying for CDK.
Options (``LustreDeploymentType``, ``NodeRole``, ``QueuePlacement`` ...) live in
:mod:`training_clusters.options`, importable from here too; every construct also takes an option's value as a
string (``deployment_type="PERSISTENT_2"``).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "TrainingNetwork": "network",
    "SharedLustre": "lustre",
    "SlurmAccountingDatabase": "accounting",
    "ExistingLustre": "lustre",
    "DataRepository": "lustre",
    "LustreDeploymentType": "training_clusters.options",
    "TrainingPlacementGroup": "placement",
    "PlacementStrategy": "training_clusters.options",
    "SpreadLevel": "training_clusters.options",
    "SecureBucket": "bucket",
    "HyperPodCluster": "hyperpod",
    "HyperPodEksCluster": "hyperpod_eks",
    "HyperPodEksDependencies": "hyperpod_eks",
    "EksInstanceGroup": "hyperpod_eks",
    "KubernetesTaint": "hyperpod_eks",
    "HyperPodAutoscaling": "hyperpod_eks_autoscaling",
    "AutoScaler": "training_clusters.options",
    "InstanceGroup": "hyperpod",
    "LifecycleOptions": "hyperpod",
    "LifecycleStep": "hyperpod",
    "LustreMount": "hyperpod",
    "NodeRole": "training_clusters.options",
    "NodeRecovery": "training_clusters.options",
    "DeepHealthCheck": "training_clusters.options",
    "Orchestrator": "hyperpod",
    "HyperPodAccounting": "training_clusters.options",
    "NodeProvisioningMode": "training_clusters.options",
    "TeamUser": "users",
    "ParallelCluster": "parallelcluster",
    "HeadNode": "parallelcluster",
    "ComputeResource": "parallelcluster",
    "SlurmQueue": "parallelcluster",
    "SlurmSettings": "parallelcluster",
    "ManagedLustre": "parallelcluster",
    "CustomActionScript": "parallelcluster",
    "LoginNodePool": "parallelcluster",
    "DirectoryService": "parallelcluster",
    "OperatingSystem": "training_clusters.options",
    "GpuEksCluster": "eks_gpu",
    "EfaNodegroup": "eks_gpu",
    "GpuNodegroup": "eks_gpu",
    "EfaInterfaceType": "training_clusters.options",
    "AccessMode": "training_clusters.options",
    "NvidiaDevicePlugin": "eks_addons",
    "EfaDevicePlugin": "eks_addons",
    "NeuronDevicePlugin": "eks_addons",
    "FsxCsiDriver": "eks_addons",
    "EbsCsiDriver": "eks_addons",
    "GpuMonitoring": "eks_addons",
    "TimeSlicing": "training_clusters.options",
    "Mps": "training_clusters.options",
    "MigStrategy": "training_clusters.options",
    "MpiOperator": "eks_release_manifest",
    "ReleaseManifest": "eks_release_manifest",
    "Kueue": "eks_jobs",
    "KubeflowTrainer": "eks_jobs",
    "TrainingQueues": "eks_jobs",
    "TrainingRuntimes": "eks_jobs",
    "QueuePreemption": "training_clusters.options",
    "PodSecurityLevel": "training_clusters.options",
    "QueuePlacement": "training_clusters.options",
    "QueueUpdateStrategy": "training_clusters.options",
    "DeletionPolicy": "training_clusters.options",
    "Capacity": "training_clusters.capacity",
    "CapacityKind": "training_clusters.options",
    "SessionManagerPolicy": "session_manager",
    "PcsCluster": "pcs",
    "PcsComputeNodeGroup": "pcs",
    "PcsLoginNodes": "pcs",
    "PcsQueue": "pcs",
    "SlurmVersion": "training_clusters.options",
    "PcsClusterSize": "training_clusters.options",
    "SlurmAccounting": "training_clusters.options",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module if "." in module else f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return __all__
