"""Install software that is published only as a release manifest (no helm chart) at deploy time.

Kubeflow ships the MPI Operator as one YAML file per release tag. CDK's ``add_manifest`` needs the objects
inline, which would copy the publisher's file into this repository; :class:`ReleaseManifest` instead runs
a small Lambda (``training_clusters/node_scripts/handlers/release_manifest``) that downloads the pinned release when
the stack deploys and applies it server-side with the kubectl of the cluster's kubectl layer.

Example::

    operator = MpiOperator(self, "MpiOperator", cluster=cluster)
    job = cluster.cluster.add_manifest("NcclTest", nccl_test_mpijob(...))
    job.node.add_dependency(operator)   # the MPIJob kind exists once the operator's CRD is established
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.constructs.private.handlers import vpc_interface_statement
from training_clusters.constructs.private.validation import checked_props, raise_if_problem
from training_clusters.gates.compliance import (
    accept_handler_findings,
    accept_inline_policy,
    accept_log_group_without_key,
    acknowledge_cdk_made,
    acknowledge_wildcards,
    skip_checkov,
)
from training_clusters.model.releases import (
    MPI_OPERATOR_SHA256,
    MPI_OPERATOR_VERSION,
    mpi_operator_manifest_url,
)
from training_clusters.rules.downloads import (
    mpi_operator_digest_problem,
    release_tag_problem,
    release_url_problem,
    sha256_problem,
)
from training_clusters.workloads.tenancy import system_placement

__all__ = ["DeploymentPatch", "MpiOperator", "ReleaseManifest", "mpi_operator_placement"]

HANDLER_DIR = Path(__file__).resolve().parents[2] / "node_scripts" / "handlers" / "release_manifest"
#: Moving references: a manifest behind one of these could change under a deployed stack.
_HANDLER_REASON = (
    "the release-manifest handler runs in the cluster's private subnets; Lambda needs these EC2 "
    "network-interface actions on any resource to attach and detach its VPC interfaces"
)
_PROVIDER_REASON = (
    "aws-cdk-lib's custom-resource Provider framework (its design): it invokes our release-manifest handler "
    "and reports back to CloudFormation"
)


@dataclass(frozen=True)
class DeploymentPatch:
    """A strategic-merge ``patch`` for the Deployment ``namespace/name`` of a release manifest."""

    namespace: str
    name: str
    patch: Mapping[str, Any]

    def as_property(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "patch": dict(self.patch)}


#: The MPI Operator's controller in its release manifest (``deploy/v2beta1/mpi-operator.yaml``).
MPI_OPERATOR_DEPLOYMENT = ("mpi-operator", "mpi-operator")


def mpi_operator_placement() -> DeploymentPatch:
    """The MPI Operator's controller on the system nodes: their labels and their taint's toleration
    (:func:`~training_clusters.workloads.tenancy.system_placement`); the release manifest sets neither."""
    namespace, name = MPI_OPERATOR_DEPLOYMENT
    return DeploymentPatch(namespace, name, {"spec": {"template": {"spec": system_placement()}}})


@checked_props
class ReleaseManifest(Construct):
    """Apply the manifest at a pinned HTTPS URL to an EKS cluster when the stack deploys.

    The handler is a cluster admin (an access entry with ``AmazonEKSClusterAdminPolicy``: installing CRDs
    and cluster roles needs it), runs in the cluster's private subnets with the cluster security group, and
    reaches the URL through the VPC's NAT gateway. Updating ``url`` applies the new release in place;
    removing the construct deletes the manifest's objects (skipped when the cluster is already gone).

    Attributes: ``handler`` (the Lambda function), ``resource`` (the custom resource: depend on it).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        url: str,
        sha256: str,
        wait_for_crds: bool = True,
        deployment_patches: Sequence[DeploymentPatch] = (),
    ) -> None:
        """Create the handler and the custom resource.

        :param cluster: The cluster to apply to.
        :param url: ``https://`` URL of the manifest at a release tag (``master``/``main``/``latest`` refused).
        :param sha256: SHA-256 (64 hex digits) the downloaded manifest must have; the handler refuses any other
            bytes, on create, update and delete (a tag is not a pin: release files can be replaced).
        :param wait_for_crds: Wait until the manifest's CRDs are established, so objects of their kinds can
            be applied next. Default: True.
        :param deployment_patches: Strategic-merge patches the handler applies to Deployments of the manifest
            right after it (``kubectl patch deployment --type=strategic``), on create and update: how a
            publisher's manifest gets the placement this cluster needs. Default: none.
        """
        super().__init__(scope, id)
        self._check_url(url)
        self._check_sha256(sha256)
        eks_cluster = cluster.cluster
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_YEAR)
        role = iam.Role(
            self,
            "HandlerRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Applies {url} to the EKS cluster",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["eks:DescribeCluster"], resources=[eks_cluster.cluster_arn])
        )
        role.add_to_policy(vpc_interface_statement())
        self.handler = lambda_.Function(
            self,
            "Handler",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.on_event",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            layers=[cluster.kubectl_layer],
            role=role,
            log_group=log_group,
            timeout=cdk.Duration.minutes(10),
            memory_size=1024,
            vpc=eks_cluster.vpc,
            # where CDK's own kubectl provider runs: the cluster's private subnets, the cluster security group
            vpc_subnets=ec2.SubnetSelection(subnets=cluster.subnets),
            security_groups=[cluster.cluster_security_group],
            description=f"Applies {url} to the EKS cluster",
            environment={"AWS_STS_REGIONAL_ENDPOINTS": "regional"},
        )
        access = eks.AccessEntry(
            self,
            "AccessEntry",
            cluster=eks_cluster,
            principal=role.role_arn,
            access_policies=[
                eks.AccessPolicy.from_access_policy_name(
                    "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
                )
            ],
        )
        provider = cr.Provider(self, "Provider", on_event_handler=self.handler)
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=provider.service_token,
            resource_type="Custom::ReleaseManifest",
            properties={
                "ClusterName": eks_cluster.cluster_name,
                "ManifestUrl": url,
                "Sha256": sha256,
                "WaitForCrds": "true" if wait_for_crds else "false",
                **(
                    {
                        "DeploymentPatches": json.dumps(
                            [p.as_property() for p in deployment_patches], sort_keys=True
                        )
                    }
                    if deployment_patches
                    else {}
                ),
            },
        )
        # The access entry must outlive every apply/delete the handler makes (its role and policy already do:
        # the resource depends on the provider, which depends on the handler, which depends on them).
        self.resource.node.add_dependency(access)
        self._acknowledge(role, provider)
        self._explain_checks(log_group)

    def _check_url(self, url: str) -> None:
        raise_if_problem(self, "url", release_url_problem(url))

    def _check_sha256(self, sha256: str) -> None:
        raise_if_problem(self, "sha256", sha256_problem(sha256))

    def _acknowledge(self, role: iam.Role, provider: cr.Provider) -> None:
        policy = role.node.find_child("DefaultPolicy").node.default_child
        acknowledge_wildcards(policy, {"AwsSolutions-IAM5[Resource::*]": _HANDLER_REASON})
        acknowledge_cdk_made(
            provider,
            _PROVIDER_REASON,
            managed_policy_reasons={
                "AWSLambdaBasicExecutionRole": "the framework Lambda writes its own logs"
            },
        )

    def _explain_checks(self, log_group: logs.LogGroup) -> None:
        """checkov and NIST 800-53 R5 findings of the handler, its role's policy and its log group."""
        reason = "the release-manifest handler applies a pinned manifest at deploy time"
        accept_handler_findings(self.handler.node.default_child, reason, in_vpc=True, has_environment=True)
        policy = self.handler.role.node.find_child("DefaultPolicy").node.default_child
        accept_inline_policy(policy, reason)
        skip_checkov(policy, "CKV_AWS_111", _HANDLER_REASON)
        accept_log_group_without_key(log_group, "the handler's own log (URLs applied, kubectl output)")


@checked_props
class MpiOperator(ReleaseManifest):
    """Kubeflow's MPI Operator (``MPIJob`` v2beta1), from its release manifest at ``version``, its controller
    patched onto the system nodes (:func:`mpi_operator_placement`).

    Example::

        MpiOperator(self, "MpiOperator", cluster=cluster)
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        version: str = MPI_OPERATOR_VERSION,
        sha256: str | None = None,
    ) -> None:
        """Install the operator.

        :param cluster: The cluster it runs in (the manifest is applied through the cluster's kubectl provider).
        :param version: Release tag of kubeflow/mpi-operator. Default: :data:`MPI_OPERATOR_VERSION`.
        :param sha256: SHA-256 of that release's ``deploy/v2beta1/mpi-operator.yaml``. Default: the digest
            pinned for ``version`` in :data:`training_clusters.model.releases.MPI_OPERATOR_SHA256`; required for a
            version pinned there is none for.
        """
        path = f"{scope.node.path}/{id}"
        raise_if_problem(path, "version", release_tag_problem(version))
        digest = sha256 or MPI_OPERATOR_SHA256.get(version)
        raise_if_problem(path, "sha256", mpi_operator_digest_problem(version, digest, MPI_OPERATOR_SHA256))
        assert digest is not None
        super().__init__(
            scope,
            id,
            cluster=cluster,
            url=mpi_operator_manifest_url(version),
            sha256=digest,
            deployment_patches=[mpi_operator_placement()],
        )
        self.version = version
