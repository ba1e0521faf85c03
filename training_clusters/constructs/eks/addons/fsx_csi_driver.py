"""The FSx for Lustre CSI driver (EKS add-on, EKS Pod Identity) and each team's volume: its own directory of
a SharedLustre, made by a Job on a system node, and a claim of it in the team's namespace."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from training_clusters.constructs.common.lustre import SharedLustre
from training_clusters.constructs.eks.addons.managed_addon import (
    check_addon_version,
    pod_identity_addon,
    pod_identity_role,
)
from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.constructs.private.validation import checked_props, raise_if_problem
from training_clusters.gates.compliance import accept_inline_policy, acknowledge
from training_clusters.rules.eks_addons import fsx_volume_capacity_problem
from training_clusters.rules.eks_queues import (
    kubernetes_name_problem,
    namespaces_problem,
    unique_names_problem,
)
from training_clusters.workloads.storage import (
    team_directory_commands,
    team_directory_manifests,
    team_volume_manifests,
)

#: EKS add-on name and the service account of the FSx for Lustre CSI driver's controller.
FSX_CSI_ADDON = "aws-fsx-csi-driver"
FSX_CSI_SERVICE_ACCOUNT = "fsx-csi-controller-sa"


@checked_props
class FsxCsiDriver(Construct):
    """The FSx for Lustre CSI driver (EKS add-on, EKS Pod Identity) and, in each team namespace, a PVC bound to
    that team's own directory of a SharedLustre.

    Example::

        FsxCsiDriver(self, "FsxCsi", cluster=cluster, storage=shared_lustre, namespaces=["vision", "nlp"])
        # pods of vision mount teams/vision of the file system with:
        #   volumes: [{name: data, persistentVolumeClaim: {claimName: fsx-lustre}}]

    A team's claim is its directory ``teams/<namespace>``
    (:func:`~training_clusters.workloads.storage.team_volume_manifests`), never the file system's root: a root pod
    of one team neither reads nor writes another team's data or the nodes' shared homes. The directories are made
    by a Job in ``kube-system`` on a system node (:func:`~training_clusters.workloads.storage.team_directory_manifests`:
    owner root, group :data:`~training_clusters.workloads.storage.TEAM_DIRECTORY_GID`, mode 2770), through a claim
    of the root that only ``kube-system`` holds. With root squash (``storage.root_squash``) root cannot make them:
    there is no Job, and a warning names the commands to run once from a client exempt from root squash.

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
        raise_if_problem(self, "namespaces", namespaces_problem(len(namespaces)))
        for namespace in namespaces:  # each reaches the directory job's shell: DNS labels only
            raise_if_problem(self, "namespaces", kubernetes_name_problem(namespace))
        raise_if_problem(self, "namespaces", unique_names_problem(list(namespaces)))

    def _capacity(self, storage: SharedLustre, capacity_gib: int | None) -> int:
        known = storage.storage_capacity_gib
        raise_if_problem(self, "capacity_gib", fsx_volume_capacity_problem(capacity_gib, known))
        if capacity_gib is None:
            assert known is not None  # refused above otherwise
            return known
        return capacity_gib
