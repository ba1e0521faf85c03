"""The Amazon EBS CSI driver (EKS add-on, EKS Pod Identity) and a StorageClass of encrypted gp3 volumes."""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from training_clusters.constructs.eks.addons.managed_addon import (
    check_addon_version,
    pod_identity_addon,
    pod_identity_role,
)
from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.constructs.private.validation import checked_props, raise_if_problem, to_removal_policy
from training_clusters.gates.compliance import acknowledge
from training_clusters.model.options import RemovalPolicy
from training_clusters.rules.eks_addons import volume_tag_problem
from training_clusters.workloads.storage import gp3_storage_class_manifest

#: EKS add-on name and the service account of the EBS CSI driver's controller.
EBS_CSI_ADDON = "aws-ebs-csi-driver"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
#: AWS's scoped policy (2026-04): the driver creates, attaches, snapshots and deletes only volumes and snapshots
#: tagged ``ebs.csi.aws.com/cluster: "true"`` (which it tags itself), not every volume of the account as
#: ``service-role/AmazonEBSCSIDriverPolicy`` allows (https://docs.aws.amazon.com/aws-managed-policy/latest/
#: reference/AmazonEBSCSIDriverPolicyV2.html).
EBS_CSI_POLICY = "AmazonEBSCSIDriverPolicyV2"


@checked_props
class EbsCsiDriver(Construct):
    """The Amazon EBS CSI driver (EKS add-on, EKS Pod Identity) and a gp3 StorageClass.

    Example::

        ebs = EbsCsiDriver(self, "EbsCsi", cluster=cluster)
        # claims name it: storageClassName: gp3

    The controller's role carries ``AmazonEBSCSIDriverPolicyV2`` (it creates, attaches and deletes volumes
    for claims, and only those tagged ``ebs.csi.aws.com/cluster: "true"``, as it tags the ones it makes). Volumes are encrypted with the account's default EBS key. With the nodes' metadata hop
    limit of 1 the driver's pods read instance facts from the Kubernetes API instead, which does not count
    the ENIs attached: on instances with many EFA interfaces the attachment limit it reports can be too high,
    so keep EBS-backed pods on the system nodes (GPU nodes are tainted, so they land there by default).

    Attributes: ``addon``, ``role``, ``storage_class`` (the manifest), ``storage_class_name``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        storage_class_name: str = "gp3",
        addon_version: str | None = None,
        removal_policy: cdk.RemovalPolicy | RemovalPolicy | str = cdk.RemovalPolicy.RETAIN,
        volume_tags: Mapping[str, str] | None = None,
    ) -> None:
        """Install the add-on and the StorageClass.

        :param cluster: The cluster.
        :param storage_class_name: Name of the StorageClass. Default: ``gp3``.
        :param addon_version: Pin the ``aws-ebs-csi-driver`` add-on, e.g. ``v1.45.0-eksbuild.2`` (``aws eks
            describe-addon-versions --addon-name aws-ebs-csi-driver``). Default: EKS's default for the
            cluster's Kubernetes version when the add-on is created.
        :param removal_policy: What happens to a volume when its claim is deleted: RETAIN keeps it (the
            StorageClass's ``reclaimPolicy: Retain``), DESTROY deletes it. Deleting the cluster deletes no
            volume either way. Default: RETAIN.
        :param volume_tags: Tags for every volume the StorageClass makes (the driver makes them, not
            CloudFormation, so the stack's tags do not reach them), e.g. the environment's ``project`` and
            ``environment``, which ``training-clusters cleanup`` looks for. Keys must not start with ``aws:``
            and neither keys nor values may hold ``=`` or ``,``. Default: none (the driver's own tags only).
        """
        super().__init__(scope, id)
        removal_policy = to_removal_policy(self, "removal_policy", removal_policy)
        volume_tags = dict(volume_tags or {})
        _check_volume_tags(self, volume_tags)
        check_addon_version(self, addon_version)
        self.storage_class_name = storage_class_name
        self.role = pod_identity_role(
            self, cluster, EBS_CSI_SERVICE_ACCOUNT, "Amazon EBS CSI driver controller (EKS Pod Identity)"
        )
        self.role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(EBS_CSI_POLICY))
        role_resource = self.role.node.default_child
        assert isinstance(role_resource, iam.CfnRole)
        acknowledge(
            role_resource,
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{EBS_CSI_POLICY}]",
            f"{EBS_CSI_POLICY} is AWS's scoped policy for the EBS CSI driver (every volume and snapshot action "
            "conditioned on the driver's own ebs.csi.aws.com/cluster tag) and keeps current with it; only the driver's "
            "controller can assume this role",
        )
        self.addon = pod_identity_addon(
            self, cluster, EBS_CSI_ADDON, addon_version, EBS_CSI_SERVICE_ACCOUNT, self.role
        )
        reclaim = "Delete" if removal_policy is cdk.RemovalPolicy.DESTROY else "Retain"
        self.storage_class = eks.KubernetesManifest(
            self,
            "StorageClass",
            cluster=cluster.cluster,
            manifest=[
                gp3_storage_class_manifest(
                    name=storage_class_name, reclaim_policy=reclaim, volume_tags=volume_tags
                )
            ],
        )
        self.storage_class.node.add_dependency(self.addon)


def _check_volume_tags(scope: Construct, volume_tags: Mapping[str, str]) -> None:
    """EC2's tag limits (keys up to 128 characters, values up to 256, none under ``aws:``) and the driver's
    ``key=value`` form (``=`` and ``,`` would split a pair)."""
    for key, value in volume_tags.items():
        raise_if_problem(scope, "volume_tags", volume_tag_problem(key, value))
