"""MIG on EKS as data (build side, no CDK): what the GPU Operator's MIG manager applies to each nodegroup.

A nodegroup with a :class:`~training_clusters.model.options.MigLayout` carries the node label
``nvidia.com/mig.config=<name>``; the MIG manager (github.com/NVIDIA/mig-parted, run by the GPU Operator)
watches that label and partitions every GPU of the node as the named entry of its config file says, then sets
``nvidia.com/mig.config.state=success``. The config file is ours (:func:`mig_parted_config`): exactly the
layouts our nodegroups ask for, checked against the catalogue's MIG profiles for their GPU
(:func:`training_clusters.rules.eks.mig_layout_problem`), plus ``all-disabled`` for every other node.

A profile's name gives its share of the GPU: ``<g>g.<memory>gb`` takes ``g`` of the 7 compute slices and
memory/(the ``7g`` profile's memory / 8) of the 8 memory slices (NVIDIA's MIG User Guide, "Terminology" and
"Supported MIG Profiles"). A layout fits when its instances take at most 7 compute and 8 memory slices; that
is necessary, and for the layouts here (at most one 4g, 3g pairs, 2g and 1g fills) also sufficient.

The NVIDIA device plugin advertises what the MIG manager made: under the ``single`` strategy every instance
as ``nvidia.com/gpu`` (all GPUs of a node must share one profile: ``all-<profile>``), under ``mixed`` each as
``nvidia.com/mig-<profile>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from training_clusters.catalog import InstanceType
from training_clusters.model.options import MigLayout, MigStrategy

#: The label the MIG manager watches: the name of the config-file entry to apply to the node.
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
#: The label the MIG manager sets once the node is partitioned (``pending``, ``success``, ``failed``).
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
#: The GPU Operator runs its MIG manager on MIG-capable nodes unless this label says ``false``.
MIG_MANAGER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.mig-manager"
#: The config-file entry of nodes that ask for no MIG (and the MIG manager's default).
MIG_DISABLED = "all-disabled"
#: The ConfigMap the GPU Operator chart creates with our config file (key ``config.yaml``).
MIG_CONFIGMAP = "training-clusters-mig-parted-config"
COMPUTE_SLICES = 7
MEMORY_SLICES = 8


def _whole_gpu_gb(instance_type: InstanceType) -> int | None:
    profiles = instance_type.accelerators.mig_profiles if instance_type.accelerators else ()
    whole = [p for p in profiles if p.startswith(f"{COMPUTE_SLICES}g.")]
    return int(whole[0].split(".")[1].removesuffix("gb")) if whole else None


def profile_slices(instance_type: InstanceType, profile: str) -> tuple[int, int]:
    """``(compute, memory)`` slices ``profile`` takes of one GPU of ``instance_type``."""
    whole_gb = _whole_gpu_gb(instance_type)
    assert whole_gb is not None, f"{instance_type.name} has no MIG profiles"
    compute, memory = profile.split(".")
    return int(compute.removesuffix("g")), round(int(memory.removesuffix("gb")) * MEMORY_SLICES / whole_gb)


def layout_fits(instance_type: InstanceType, devices: Mapping[str, int]) -> bool:
    slices = [profile_slices(instance_type, p) for p, n in devices.items() for _ in range(n)]
    return sum(c for c, _ in slices) <= COMPUTE_SLICES and sum(m for _, m in slices) <= MEMORY_SLICES


def _balanced(instance_type: InstanceType) -> dict[str, int]:
    profiles = instance_type.accelerators.mig_profiles if instance_type.accelerators else ()

    def smallest(g: int) -> str:
        return min(
            (p for p in profiles if p.startswith(f"{g}g.")), key=lambda p: profile_slices(instance_type, p)
        )

    return {smallest(1): 2, smallest(2): 1, smallest(3): 1}


def mig_devices(instance_type: InstanceType, layout: MigLayout) -> dict[str, int]:
    """The instances of each GPU, ``{profile: count}``, for a layout :func:`mig_layout_problem` accepts."""
    if layout.name == MigLayout.BALANCED:
        return _balanced(instance_type)
    profile = layout.uniform_profile
    if profile is None:
        return dict(layout.devices)
    compute, memory = profile_slices(instance_type, profile)
    return {profile: min(COMPUTE_SLICES // compute, MEMORY_SLICES // memory)}


def mig_config_name(instance_type: InstanceType, layout: MigLayout, nodegroup: str) -> str:
    """The config-file entry (and ``nvidia.com/mig.config`` value) of a nodegroup's layout.

    ``all-<profile>`` keeps its name (one profile names one layout on every GPU); ``all-balanced`` is named
    by the GPU's memory (``all-balanced-80gb``), as its profiles differ between GPUs; a custom layout by the
    nodegroup (``custom-<nodegroup>``).
    """
    if layout.name == MigLayout.BALANCED:
        return f"{MigLayout.BALANCED}-{_whole_gpu_gb(instance_type)}gb"
    if layout.name is not None:
        return layout.name
    return f"custom-{nodegroup}"


def mig_parted_config(layouts: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """mig-parted's config file (``version: v1``): ``all-disabled`` and each named layout on every GPU."""
    configs: dict[str, Any] = {MIG_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    for name, devices in sorted(layouts.items()):
        configs[name] = [{"devices": "all", "mig-enabled": True, "mig-devices": dict(devices)}]
    return {"version": "v1", "mig-configs": configs}


def mig_resource(strategy: MigStrategy, profile: str) -> str:
    """The extended resource a pod requests for one ``profile`` instance under ``strategy``."""
    return "nvidia.com/gpu" if strategy is MigStrategy.SINGLE else f"nvidia.com/mig-{profile}"


def mig_node_labels(
    instance_type: InstanceType, config_name: str | None, *, mig_manager: bool
) -> dict[str, str]:
    """The labels a GPU nodegroup carries for MIG.

    With a layout, ``nvidia.com/mig.config=<config_name>``: the MIG manager applies it. Without one, while the
    cluster runs a MIG manager, a MIG-capable node gets ``nvidia.com/gpu.deploy.mig-manager=false``: the GPU
    Operator deploys its MIG manager only where a label does not say otherwise, so it runs exactly on the
    nodegroups that asked. Nothing otherwise.
    """
    if config_name is not None:
        return {MIG_CONFIG_LABEL: config_name}
    accelerators = instance_type.accelerators
    if mig_manager and accelerators is not None and accelerators.mig_capable:
        return {MIG_MANAGER_DEPLOY_LABEL: "false"}
    return {}
