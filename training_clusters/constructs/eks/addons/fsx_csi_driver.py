"""The FSx for Lustre CSI driver (EKS add-on, EKS Pod Identity) and each team's volume: its own directory of
a SharedLustre, made by a Job on a system node, and a claim of it in the team's namespace."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from training_clusters.constructs.common.lustre import SharedLustre
from training_clusters.constructs.eks.addons.managed_addon import (
    ADDON_NAMESPACE,
    check_addon_version,
    pod_identity_addon,
    pod_identity_role,
)
from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.constructs.private.validation import checked_props, fail, refuse
from training_clusters.gates.compliance import accept_inline_policy, acknowledge
from training_clusters.model.releases import BUSYBOX_IMAGE
from training_clusters.rules.eks_queues import kubernetes_name_problem, unique_names_problem
from training_clusters.workloads.tenancy import system_placement

#: EKS add-on name and the service account of the FSx for Lustre CSI driver's controller.
FSX_CSI_ADDON = "aws-fsx-csi-driver"
FSX_CSI_SERVICE_ACCOUNT = "fsx-csi-controller-sa"
FSX_CSI_PROVISIONER = "fsx.csi.aws.com"


#: Where each team's data lives on the file system: ``<TEAM_DIRECTORY_PARENT>/<namespace>``.
TEAM_DIRECTORY_PARENT = "teams"
#: The group that owns each team's directory (mode 2770, owner root): a pod running as root writes there (unless
#: the file system squashes root), any other pod joins the group (``securityContext.supplementalGroups: [1000]``
#: or ``runAsGroup: 1000``). The same number for every team is enough: a team mounts its own directory only.
TEAM_DIRECTORY_GID = 1000
TEAM_DIRECTORY_MODE = "2770"
#: Where the job that makes the team directories runs, with the claim of the file system's root it mounts.
TEAM_DIRECTORY_NAMESPACE = ADDON_NAMESPACE
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


@checked_props
class FsxCsiDriver(Construct):
    """The FSx for Lustre CSI driver (EKS add-on, EKS Pod Identity) and, in each team namespace, a PVC bound to
    that team's own directory of a SharedLustre.

    Example::

        FsxCsiDriver(self, "FsxCsi", cluster=cluster, storage=shared_lustre, namespaces=["vision", "nlp"])
        # pods of vision mount teams/vision of the file system with:
        #   volumes: [{name: data, persistentVolumeClaim: {claimName: fsx-lustre}}]

    A team's claim is its directory ``teams/<namespace>`` (:func:`team_volume_manifests`), never the file
    system's root: a root pod of one team neither reads nor writes another team's data or the nodes' shared
    homes. The directories are made by a Job in ``kube-system`` on a system node (:func:`team_directory_manifests`:
    owner root, group :data:`TEAM_DIRECTORY_GID`, mode 2770), through a claim of the root that only
    ``kube-system`` holds. With root squash (``storage.root_squash``) root cannot make them: there is no Job, and
    a warning names the commands to run once from a client exempt from root squash.

    The controller's role (EKS Pod Identity, through the cluster's agent) may only describe file systems:
    static provisioning needs nothing more. Its pods run on the system nodes (the add-on's
    ``controller.nodeSelector`` and ``controller.tolerations``). The nodes must reach the file system (the stack
    allows the cluster security group on the Lustre ports).

    Attributes: ``addon``, ``pod_identity_agent`` (the cluster's), ``role``, ``manifest`` (the team volumes and
    claims), ``directories`` (the root claim and the Job, or None with root squash), ``claim_name``,
    ``namespaces``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        storage: SharedLustre,
        capacity_gib: int | None = None,
        claim_name: str = "fsx-lustre",
        namespaces: Sequence[str] = ("default",),
        addon_version: str | None = None,
    ) -> None:
        """Install the add-on, the team directories and their volumes.

        :param cluster: The cluster.
        :param storage: The file system to bind.
        :param capacity_gib: The capacity the PVs and PVCs advertise. Default: the file system's own
            (``storage.storage_capacity_gib``); required only for an adopted file system whose capacity was
            not given, and then it must not differ from the file system's.
        :param claim_name: Name of the PVC pods mount, in each namespace. Default: ``fsx-lustre``.
        :param namespaces: The team namespaces: each gets its directory ``teams/<namespace>`` and a claim of it.
            They must exist (or be created in the same deployment, before the claims). Default: ``default``.
        :param addon_version: Pin the ``aws-fsx-csi-driver`` add-on, e.g. ``v1.6.0-eksbuild.1`` (list them with
            ``aws eks describe-addon-versions --addon-name aws-fsx-csi-driver``). Default: the version EKS
            picks as default for the cluster's Kubernetes version when the add-on is created.
        """
        super().__init__(scope, id)
        check_addon_version(self, addon_version)
        capacity_gib = self._capacity(storage, capacity_gib)
        self._check_namespaces(namespaces)
        self.claim_name = claim_name
        self.namespaces = list(namespaces)
        self.pod_identity_agent = cluster.pod_identity_agent
        self.role = pod_identity_role(
            self, cluster, FSX_CSI_SERVICE_ACCOUNT, "FSx for Lustre CSI driver controller (EKS Pod Identity)"
        )
        self.role.add_to_policy(iam.PolicyStatement(actions=["fsx:DescribeFileSystems"], resources=["*"]))
        policy = self.role.node.try_find_child("DefaultPolicy")
        assert policy is not None
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "fsx:DescribeFileSystems supports no resource-level permissions; it is the only action the "
            "CSI controller is granted (static provisioning creates and deletes nothing)",
        )
        accept_inline_policy(policy, "the FSx CSI controller's Pod Identity role")
        self.addon = pod_identity_addon(
            self, cluster, FSX_CSI_ADDON, addon_version, FSX_CSI_SERVICE_ACCOUNT, self.role
        )
        volume: dict[str, Any] = {
            "file_system_id": storage.file_system_id,
            "dns_name": storage.dns_name,
            "mount_name": storage.mount_name,
            "capacity_gib": capacity_gib,
        }
        self.directories: eks.KubernetesManifest | None = None
        if storage.root_squash is None:
            self.directories = eks.KubernetesManifest(
                self,
                "TeamDirectories",
                cluster=cluster.cluster,
                manifest=team_directory_manifests(**volume, namespaces=self.namespaces),
            )
            self.directories.node.add_dependency(self.addon)
        else:
            cdk.Annotations.of(self).add_warning_v2(
                "training-clusters:fsx-team-directories",
                "root squash is on, so no job can make the team directories: from a client in "
                "root_squash_exempt_nids, with the file system mounted at /fsx, run once: "
                + team_directory_commands(self.namespaces),
            )
        self.manifest = eks.KubernetesManifest(
            self,
            "Volume",
            cluster=cluster.cluster,
            manifest=team_volume_manifests(**volume, namespaces=self.namespaces, name=claim_name),
        )
        self.manifest.node.add_dependency(self.addon)

    def _check_namespaces(self, namespaces: Sequence[str]) -> None:
        if not namespaces:
            raise fail(self.node.path, "namespaces", "must name at least one namespace, got none")
        for namespace in namespaces:  # each reaches the directory job's shell: DNS labels only
            refuse(self, "namespaces", kubernetes_name_problem(namespace))
        refuse(self, "namespaces", unique_names_problem(list(namespaces)))

    def _capacity(self, storage: SharedLustre, capacity_gib: int | None) -> int:
        known = storage.storage_capacity_gib
        if capacity_gib is None:
            if known is None:
                raise fail(
                    self.node.path,
                    "capacity_gib",
                    "is required for an adopted file system whose ExistingLustre gives no storage_capacity_gib",
                )
            return known
        if known is not None and capacity_gib != known:
            raise fail(
                self.node.path,
                "capacity_gib",
                f"must match the file system's storage_capacity_gib ({known}) or be omitted, got {capacity_gib}",
            )
        return capacity_gib
