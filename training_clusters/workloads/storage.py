"""Storage as Kubernetes objects: each team's FSx for Lustre volume (its own directory of the file system, the Job
that makes the directories) and a StorageClass of encrypted gp3 EBS volumes. What the CSI driver add-ons apply
(:mod:`training_clusters.constructs.eks.addons.fsx_csi_driver`,
:mod:`training_clusters.constructs.eks.addons.ebs_csi_driver`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from training_clusters.model.releases import BUSYBOX_IMAGE
from training_clusters.workloads.tenancy import system_placement

#: The CSI drivers' names, which their StorageClasses and PersistentVolumes name as provisioner and driver.
FSX_CSI_PROVISIONER = "fsx.csi.aws.com"
EBS_CSI_PROVISIONER = "ebs.csi.aws.com"
#: Where each team's data lives on the file system: ``<TEAM_DIRECTORY_PARENT>/<namespace>``.
TEAM_DIRECTORY_PARENT = "teams"
#: The group that owns each team's directory (mode 2770, owner root): a pod running as root writes there (unless
#: the file system squashes root), any other pod joins the group (``securityContext.supplementalGroups: [1000]``
#: or ``runAsGroup: 1000``). The same number for every team is enough: a team mounts its own directory only.
TEAM_DIRECTORY_GID = 1000
TEAM_DIRECTORY_MODE = "2770"
#: Where the job that makes the team directories runs, with the claim of the file system's root it mounts.
TEAM_DIRECTORY_NAMESPACE = "kube-system"  # the EKS add-ons' namespace: no team has rights there
TEAM_DIRECTORY_JOB = "fsx-lustre-team-directories"


def team_directory(namespace: str) -> str:
    """The directory of a team namespace's data, relative to the file system's root."""
    return f"{TEAM_DIRECTORY_PARENT}/{namespace}"


def lustre_volume_manifests(
    *,
    file_system_id: str,
    dns_name: str,
    mount_name: str,
    capacity_gib: int,
    name: str = "fsx-lustre",
    namespace: str = "default",
    subdirectory: str | None = None,
    volume_name: str | None = None,
) -> list[dict[str, Any]]:
    """StorageClass, PersistentVolume and PersistentVolumeClaim for an existing FSx for Lustre file system.

    Static provisioning: the PV names the file system; the PVC (``<name>`` in ``namespace``) binds to exactly
    that PV (``volume_name``, default ``<name>-pv``). With ``subdirectory`` the PV is that directory of the file
    system, never its root: the driver has no sub-directory field, and mounts
    ``<dnsname>@tcp:/<mountname>`` as given (kubernetes-sigs/aws-fsx-csi-driver ``pkg/driver/node.go``,
    ``NodePublishVolume``), so the PV's ``mountname`` is ``<mount name>/<subdirectory>``, the Lustre client's
    form for a sub-directory mount, as the driver's issue #247 describes (the directory must exist, or the mount
    fails and kubelet retries). Its ``volumeHandle`` names the directory too: one handle per volume.
    """
    storage_class = f"{name}-static"
    capacity = f"{capacity_gib}Gi"
    volume_name = volume_name or f"{name}-pv"
    mount = mount_name if subdirectory is None else f"{mount_name}/{subdirectory}"
    handle = file_system_id if subdirectory is None else f"{file_system_id}::{subdirectory}"
    return [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": storage_class},
            "provisioner": FSX_CSI_PROVISIONER,
            "reclaimPolicy": "Retain",
            "volumeBindingMode": "Immediate",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume_name},
            "spec": {
                "capacity": {"storage": capacity},
                "volumeMode": "Filesystem",
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": storage_class,
                "mountOptions": ["flock"],
                # only this namespace's claim of this name may bind it
                "claimRef": {"namespace": namespace, "name": name},
                "csi": {
                    "driver": FSX_CSI_PROVISIONER,
                    "volumeHandle": handle,
                    "volumeAttributes": {"dnsname": dns_name, "mountname": mount},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": storage_class,
                "volumeName": volume_name,
                "resources": {"requests": {"storage": capacity}},
            },
        },
    ]


def team_volume_manifests(
    *,
    file_system_id: str,
    dns_name: str,
    mount_name: str,
    capacity_gib: int,
    namespaces: Sequence[str],
    name: str = "fsx-lustre",
) -> list[dict[str, Any]]:
    """One StorageClass, then per team namespace a PV of its own directory (:func:`team_directory`) named
    ``<name>-<namespace>`` and the claim ``<name>`` in the namespace bound to it. No team's claim reaches the
    file system's root or another team's directory: a PV binds one claim (its ``claimRef``), and a namespace's
    users create claims in their namespace only."""
    objects: list[dict[str, Any]] = []
    for namespace in namespaces:
        storage_class, volume, claim = lustre_volume_manifests(
            file_system_id=file_system_id,
            dns_name=dns_name,
            mount_name=mount_name,
            capacity_gib=capacity_gib,
            name=name,
            namespace=namespace,
            subdirectory=team_directory(namespace),
            volume_name=f"{name}-{namespace}",
        )
        objects += [storage_class] if not objects else []
        objects += [volume, claim]
    return objects


def team_directory_script(namespaces: Sequence[str], *, root: str = "/fsx") -> str:
    """The shell (busybox ``sh``) that makes each team's directory under ``root``: owner root, group
    :data:`TEAM_DIRECTORY_GID`, mode 2770 (new files keep the group). Idempotent; it refuses, and fails, where a
    path is a symbolic link or not a directory (``chown`` and ``chmod`` would follow a link)."""
    lines = [
        "set -eu",
        "make() {",
        '  if [ -L "$1" ] || { [ -e "$1" ] && [ ! -d "$1" ]; }; then',
        '    echo "refusing $1: not a directory" >&2; exit 1',
        "  fi",
        '  mkdir -p "$1"',
        '  chown "$2" "$1"',
        '  chmod "$3" "$1"',
        "}",
        f"make {root}/{TEAM_DIRECTORY_PARENT} 0:0 0755",
    ]
    lines += [
        f"make {root}/{team_directory(ns)} 0:{TEAM_DIRECTORY_GID} {TEAM_DIRECTORY_MODE}" for ns in namespaces
    ]
    return "\n".join(lines) + "\n"


def team_directory_commands(namespaces: Sequence[str], *, root: str = "/fsx") -> str:
    """One line that makes the team directories as :func:`team_directory_script` does, to run by hand as root on
    a client that root squash exempts (where the directory job cannot run)."""
    paths = [f"{root}/{TEAM_DIRECTORY_PARENT}"] + [f"{root}/{team_directory(ns)}" for ns in namespaces]
    teams = " ".join(paths[1:])
    return (
        f"mkdir -p {' '.join(paths)} && chown 0:0 {paths[0]} && chmod 0755 {paths[0]} && "
        f"chown 0:{TEAM_DIRECTORY_GID} {teams} && chmod {TEAM_DIRECTORY_MODE} {teams}"
    )


def team_directory_manifests(
    *,
    file_system_id: str,
    dns_name: str,
    mount_name: str,
    capacity_gib: int,
    namespaces: Sequence[str],
    image: str = BUSYBOX_IMAGE,
) -> list[dict[str, Any]]:
    """A claim of the file system's root in ``kube-system`` (where a team has no rights), and a Job there that
    mounts it on a system node and runs :func:`team_directory_script`. The Job's name carries a digest of the
    namespaces: a Job's pod template cannot change, so a new list is a new Job (the old one is pruned)."""
    name = "fsx-lustre-root"
    digest = hashlib.sha256("\n".join(namespaces).encode()).hexdigest()[:8]
    _, volume, claim = lustre_volume_manifests(
        file_system_id=file_system_id,
        dns_name=dns_name,
        mount_name=mount_name,
        capacity_gib=capacity_gib,
        name=name,
        namespace=TEAM_DIRECTORY_NAMESPACE,
        volume_name=f"{name}-pv",
    )
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{TEAM_DIRECTORY_JOB}-{digest}", "namespace": TEAM_DIRECTORY_NAMESPACE},
        "spec": {
            "backoffLimit": 10,
            "template": {
                "spec": {
                    **system_placement(),
                    "restartPolicy": "OnFailure",
                    "containers": [
                        {
                            "name": "mkdir",
                            "image": image,
                            "command": ["sh", "-c", team_directory_script(namespaces)],
                            "securityContext": {
                                "runAsUser": 0,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
                            },
                            "volumeMounts": [{"name": "fsx", "mountPath": "/fsx"}],
                        }
                    ],
                    "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": name}}],
                }
            },
        },
    }
    return [volume, claim, job]


def gp3_storage_class_manifest(
    *, name: str = "gp3", reclaim_policy: str = "Retain", volume_tags: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A StorageClass of encrypted gp3 EBS volumes, provisioned in the AZ of the pod that first uses them.

    ``volume_tags`` go on every volume it makes, as the driver's ``tagSpecification_<n>: "key=value"``
    parameters (https://github.com/kubernetes-sigs/aws-ebs-csi-driver/blob/master/docs/tagging.md), in key order.
    """
    tags = sorted((volume_tags or {}).items())
    parameters = {"type": "gp3", "encrypted": "true"}
    parameters.update({f"tagSpecification_{n}": f"{key}={value}" for n, (key, value) in enumerate(tags, 1)})
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": EBS_CSI_PROVISIONER,
        "parameters": parameters,
        "reclaimPolicy": reclaim_policy,
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
    }
