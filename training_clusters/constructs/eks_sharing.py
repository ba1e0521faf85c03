"""GPU sharing options of the NVIDIA device plugin, free of CDK imports.

Taken by :class:`~training_clusters.constructs.eks_addons.NvidiaDevicePlugin` and built from the environment
file's ``eks.addons.nvidia_device_plugin`` section; their rules live in :mod:`training_clusters.rules.eks`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TimeSlicing:
    """Share each GPU between ``replicas`` pods by CUDA time-slicing (no memory isolation).

    :param replicas: Pods per GPU, 2 or more.
    :param rename_by_default: Advertise shared GPUs as ``nvidia.com/gpu.shared``. Default: False.
    :param fail_requests_greater_than_one: Refuse pods asking for more than one shared GPU (which would
        not get more compute). Default: True.
    """

    replicas: int
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = True


@dataclass(frozen=True)
class Mps:
    """Share each GPU between ``replicas`` pods through CUDA MPS (memory and compute split evenly).

    :param replicas: Pods per GPU, 2 or more.
    """

    replicas: int
