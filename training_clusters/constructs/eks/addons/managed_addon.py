"""The base of the add-ons EKS manages (``AWS::EKS::Addon``) whose controller calls AWS: the CSI drivers.

Each controller gets a role of its own through EKS Pod Identity (the cluster installs the agent) that only its
service account in ``kube-system`` may assume (:func:`pod_identity_role`), and runs on the system nodes
(:data:`CSI_CONTROLLER_CONFIGURATION`, :func:`pod_identity_addon`). A pinned add-on version is checked for EKS's
form (:func:`check_addon_version`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from training_clusters.constructs.eks.cluster import GpuEksCluster, pod_identity_principal
from training_clusters.constructs.private.validation import raise_if_problem
from training_clusters.rules.eks_addons import addon_version_problem
from training_clusters.workloads.tenancy import system_placement

#: The CSI add-ons' configuration (``aws eks describe-addon-configuration``; the keys of the drivers' charts,
#: ``charts/*/values.yaml`` in kubernetes-sigs/aws-fsx-csi-driver and aws-ebs-csi-driver): the controller on the
#: system nodes. Its default tolerations (``CriticalAddonsOnly``) let it run there but do not keep it there: on
#: HyperPod's untainted instance groups it would run beside the teams' pods, with its Pod Identity token.
CSI_CONTROLLER_CONFIGURATION: Mapping[str, Any] = {"controller": system_placement()}
#: Where EKS add-ons run their controllers (and so their service accounts).
ADDON_NAMESPACE = "kube-system"


def check_addon_version(scope: Construct, addon_version: str | None) -> None:
    """Refuse a pinned ``addon_version`` that is not in EKS's form (:data:`~training_clusters.rules.eks_addons.EKS_ADDON_VERSION`)."""
    if addon_version is not None:
        raise_if_problem(scope, "addon_version", addon_version_problem(addon_version))


def pod_identity_role(
    scope: Construct, cluster: GpuEksCluster, service_account: str, description: str
) -> iam.Role:
    """A role EKS Pod Identity may assume for the add-on's ``service_account`` (in kube-system) only."""
    return iam.Role(
        scope,
        "Role",
        assumed_by=pod_identity_principal(cluster.cluster.cluster_arn, ADDON_NAMESPACE, service_account),
        description=description,
    )


def pod_identity_addon(
    scope: Construct,
    cluster: GpuEksCluster,
    name: str,
    version: str | None,
    service_account: str,
    role: iam.IRole,
) -> eks.CfnAddon:
    """An EKS add-on whose ``service_account`` gets ``role`` through the cluster's Pod Identity agent, and whose
    controller runs on the system nodes (:data:`CSI_CONTROLLER_CONFIGURATION`)."""
    addon = eks.CfnAddon(
        scope,
        "Resource",
        addon_name=name,
        addon_version=version,
        cluster_name=cluster.cluster_name,
        resolve_conflicts="OVERWRITE",
        configuration_values=json.dumps(CSI_CONTROLLER_CONFIGURATION),
        pod_identity_associations=[
            eks.CfnAddon.PodIdentityAssociationProperty(
                service_account=service_account, role_arn=role.role_arn
            )
        ],
    )
    addon.node.add_dependency(cluster.pod_identity_agent)
    # The add-on turns ACTIVE only once its pods can run: on the system nodes.
    addon.node.add_dependency(cluster.system_nodegroup)
    return addon
