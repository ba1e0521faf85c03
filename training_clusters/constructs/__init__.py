"""The L3 constructs, importable from here: ``from training_clusters.constructs import TrainingNetwork``.

Names load on first use (PEP 562), so importing the package does not start jsii; the environment-file
model and the console script import pure-data modules such as ``eks_sharing`` without paying for CDK.
Option types whose names repeat across modules (``CapacityType`` of ParallelCluster and of EKS) are
imported from their modules.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "TrainingNetwork": "network",
    "SharedLustre": "lustre",
    "ExistingLustre": "lustre",
    "DataRepository": "lustre",
    "LustreDeploymentType": "lustre",
    "TrainingPlacementGroup": "placement",
    "PlacementStrategy": "placement",
    "SpreadLevel": "placement",
    "SecureBucket": "bucket",
    "HyperPodCluster": "hyperpod",
    "InstanceGroup": "hyperpod",
    "LifecycleOptions": "hyperpod",
    "LustreMount": "hyperpod",
    "NodeRole": "hyperpod",
    "NodeRecovery": "hyperpod",
    "DeepHealthCheck": "hyperpod",
    "Orchestrator": "hyperpod",
    "ParallelCluster": "parallelcluster",
    "HeadNode": "parallelcluster",
    "ComputeResource": "parallelcluster",
    "SlurmQueue": "parallelcluster",
    "SlurmSettings": "parallelcluster",
    "ManagedLustre": "parallelcluster",
    "CustomActionScript": "parallelcluster",
    "OperatingSystem": "parallelcluster",
    "GpuEksCluster": "eks_gpu",
    "EfaNodegroup": "eks_gpu",
    "GpuNodegroup": "eks_gpu",
    "EfaInterfaceType": "eks_gpu",
    "AccessMode": "eks_gpu",
    "NvidiaDevicePlugin": "eks_addons",
    "EfaDevicePlugin": "eks_addons",
    "NeuronDevicePlugin": "eks_addons",
    "FsxCsiDriver": "eks_addons",
    "GpuMonitoring": "eks_addons",
    "TimeSlicing": "eks_sharing",
    "Mps": "eks_sharing",
    "MigStrategy": "eks_sharing",
    "MpiOperator": "eks_release_manifest",
    "ReleaseManifest": "eks_release_manifest",
    "nccl_test_mpijob": "eks_nccl_job",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return __all__
