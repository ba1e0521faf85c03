"""GpuEksCluster, EfaNodegroup, GpuNodegroup: EKS for GPU training, with EFA correct by construction.

Every nodegroup is a managed nodegroup over our own ``ec2.CfnLaunchTemplate`` holding the instance type:
CDK's nodegroup allow-lists lag behind new hardware (``aws_eks_v2`` refuses p5.48xlarge with the AL2023
NVIDIA AMI when the type is on the nodegroup, and calls p6-b200.48xlarge malformed), and its L2 launch
template cannot declare the network interfaces EFA needs.

The cluster is ``aws_eks_v2.Cluster``: the native ``AWS::EKS::Cluster`` resource (no cluster-resource
provider of CDK's own), with CDK's kubectl provider in the private subnets for the helm charts and
manifests the add-ons install.

Example::

    cluster = GpuEksCluster(self, "Eks", vpc=network.vpc, admin_role_arn="arn:aws:iam::111122223333:role/Admin")
    EfaNodegroup(self, "P5", cluster=cluster, instance_type="p5.48xlarge", desired_size=2,
                 subnet=network.placement_subnet(), placement_group=placement_group,
                 efa_security_group=network.efa_security_group)
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from enum import StrEnum

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer
from constructs import Construct

from training_clusters.catalog import CATALOG, AcceleratorKind, Architecture, InstanceType, architecture_of
from training_clusters.constructs.common.placement import TrainingPlacementGroup
from training_clusters.constructs.eks.compliance import acknowledge_eks_made
from training_clusters.constructs.private.launch_template import IMDS_HOP_LIMIT as IMDS_HOP_LIMIT
from training_clusters.constructs.private.launch_template import ROOT_DEVICE_NAME as ROOT_DEVICE_NAME
from training_clusters.constructs.private.launch_template import (
    efa_network_interfaces as efa_network_interfaces,
)
from training_clusters.constructs.private.launch_template import node_launch_template as node_launch_template
from training_clusters.constructs.private.security_groups import SameEnvironmentConnections, claim_efa_groups
from training_clusters.constructs.private.validation import (
    advice_day,
    advise,
    catalog_entry,
    checked_props,
    is_unresolved,
    parse_option,
    prop_error,
    raise_if_problem,
    refuse_misplaced,
    to_removal_policy,
)
from training_clusters.gates.compliance import acknowledge
from training_clusters.model.capacity import Capacity, Orchestrator
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import AccessMode, EfaInterfaceType, RemovalPolicy
from training_clusters.model.releases import EKS_KUBERNETES_VERSION
from training_clusters.rules.eks import (
    accelerated_nodegroup_problem,
    admin_role_arn_problem,
    efa_nodegroup_problem,
    imds_hop_limit_problem,
    nodegroup_sizes_problem,
    public_access_cidrs_problem,
    reserved_subnets_problem,
    root_volume_size_problem,
    system_node_count_problem,
)
from training_clusters.rules.instance_types import efa_interfaces_problem, instance_type_name_problem
from training_clusters.rules.versions import KUBERNETES_EXTENDED_SUPPORT, kubernetes_support_advice
from training_clusters.workloads.tenancy import SYSTEM_NODE_LABELS as SYSTEM_NODE_LABELS
from training_clusters.workloads.tenancy import SYSTEM_NODE_TAINT

#: The Kubernetes version (:data:`~training_clusters.model.releases.EKS_KUBERNETES_VERSION`), matched by the kubectl
#: layer ``aws-cdk.lambda-layer-kubectl-v35``.
KUBERNETES_VERSION = EKS_KUBERNETES_VERSION

#: Every control-plane log type: EKS sends them to CloudWatch Logs ``/aws/eks/<cluster>/cluster``.
CONTROL_PLANE_LOGS: tuple[eks.ClusterLoggingTypes, ...] = (
    eks.ClusterLoggingTypes.API,
    eks.ClusterLoggingTypes.AUDIT,
    eks.ClusterLoggingTypes.AUTHENTICATOR,
    eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    eks.ClusterLoggingTypes.SCHEDULER,
)

#: AWS-managed policies every EKS worker node needs. The VPC CNI's policy is not among them: the CNI gets it
#: through EKS Pod Identity (:data:`VPC_CNI_POLICY`), so pods cannot borrow it from the node.
NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryReadOnly",
)
#: The AWS-managed policy of the Amazon VPC CNI (``aws-node`` in ``kube-system``), given to its own role.
VPC_CNI_POLICY = "AmazonEKS_CNI_Policy"
VPC_CNI_NAMESPACE = "kube-system"
VPC_CNI_SERVICE_ACCOUNT = "aws-node"
#: The ``vpc-cni`` add-on's configuration: its network policy agent enforces Kubernetes NetworkPolicy (off by
#: default; "Limit Pod traffic with Kubernetes network policies" in the EKS user guide,
#: https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html).
VPC_CNI_CONFIGURATION: Mapping[str, str] = {"enableNetworkPolicy": "true"}

#: The EKS add-on that reports GPU (XID, DCGM), kernel and network problems as node conditions.
NODE_MONITORING_AGENT = "eks-node-monitoring-agent"

GPU_TAINT_KEY = "nvidia.com/gpu"


class DevicePluginKind(StrEnum):
    """The device plugins :class:`GpuEksCluster` installs for its nodegroups (``device_plugins``)."""

    NVIDIA = "nvidia"
    """NVIDIA's device plugin (``nvidia.com/gpu``), for NVIDIA GPU types."""
    EFA = "efa"
    """AWS's EFA device plugin (``vpc.amazonaws.com/efa``), for the types of EFA nodegroups."""
    NEURON = "neuron"
    """AWS Neuron's device plugin (``aws.amazon.com/neuron``), for Trainium types."""


DEVICE_PLUGIN_KINDS = tuple(DevicePluginKind)

#: The system nodes' taint (:data:`training_clusters.workloads.tenancy.SYSTEM_NODE_TAINT`): only the add-ons tolerate it.
SYSTEM_NODE_TAINTS = (
    eks.TaintSpec(
        key=SYSTEM_NODE_TAINT["key"], value=SYSTEM_NODE_TAINT["value"], effect=eks.TaintEffect.NO_SCHEDULE
    ),
)
NEURON_TAINT_KEY = "aws.amazon.com/neuron"


@checked_props
@jsii.implements(ec2.IConnectable)
class GpuEksCluster(Construct):
    """An EKS cluster for GPU training: private, encrypted, fully logged, administered through access entries.

    Example::

        cluster = GpuEksCluster(self, "Eks", vpc=network.vpc,
                                admin_role_arn="arn:aws:iam::111122223333:role/Admin")

    Credentials: the node role carries only what the kubelet and image pulls need
    (:data:`NODE_MANAGED_POLICIES`), and the nodes' launch templates answer instance metadata one hop away
    only (:data:`IMDS_HOP_LIMIT`), so pods cannot read the node role's credentials. Whatever in the cluster
    calls AWS gets its own role through EKS Pod Identity (the ``eks-pod-identity-agent`` add-on, installed
    here): the VPC CNI (``kube-system/aws-node``, with ``AmazonEKS_CNI_Policy``) here, the FSx and EBS CSI
    controllers in :mod:`~training_clusters.constructs.eks.addons`. What still reads instance metadata runs
    on the host or in its network namespace: the kubelet and ``nodeadm``, ``aws-node`` (ENI and IP facts;
    its credentials come from Pod Identity) and the Pod Identity agent (it exchanges the node role's
    credentials for pods' roles, which ``AmazonEKSWorkerNodePolicy`` allows). The FSx and EBS CSI drivers'
    pods, outside the host network, fall back to the Kubernetes API for instance facts. Your own pods that
    call AWS need a Pod Identity association of their own (``aws_eks_v2.ServiceAccount`` with
    ``POD_IDENTITY``); nodegroups can widen the hop limit (``imds_hop_limit=2``) for software that cannot.

    System nodes: labelled ``training-clusters/role=system`` and tainted ``CriticalAddonsOnly=true:NoSchedule``
    (:data:`SYSTEM_NODE_TAINTS`), so only add-ons run there, beside the Pod Identity tokens of the add-ons'
    roles; a pod of yours that must run there tolerates it
    (:data:`~training_clusters.workloads.tenancy.SYSTEM_TOLERATION`, :func:`~training_clusters.workloads.tenancy.system_placement`).

    Attributes: ``cluster`` (the ``aws_eks_v2.Cluster``), ``cluster_name``, ``kubernetes_version``,
    ``cluster_security_group``,
    ``secrets_key``, ``kubectl_layer``, ``subnets`` (of the control plane, the system nodes and the kubectl
    provider), ``node_role`` (shared by the nodegroups), ``pod_identity_agent`` (the add-on, CDK's own),
    ``vpc_cni_role`` and ``vpc_cni_pod_identity`` (its association), ``system_nodegroup``, ``connections``
    (the cluster security group's: allow file systems to it), ``installs_device_plugins`` and
    ``device_plugin_charts`` (the device plugins the cluster installs for its nodegroups, by
    :class:`DevicePluginKind`).

    Device plugins: each nodegroup added gets the plugins its nodes need (NVIDIA's on NVIDIA GPU types, AWS's EFA
    plugin on EFA nodegroups' types, AWS Neuron's on Trainium types), so pods can ask for ``nvidia.com/gpu``,
    ``vpc.amazonaws.com/efa`` and ``aws.amazon.com/neuron`` as on a cluster eksctl made (eksctl installs NVIDIA's
    plugin for GPU nodegroups, https://docs.aws.amazon.com/eks/latest/eksctl/gpu-support.html, and the EFA and
    Neuron plugins likewise). ``device_plugins=False`` leaves them to you.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet] | None = None,
        admin_role_arn: str | None = None,
        public_access_cidrs: Sequence[str] | None = None,
        access_mode: AccessMode | str = AccessMode.API,
        cluster_name: str | None = None,
        secrets_key: kms.IKey | None = None,
        system_instance_type: str = "t3.large",
        system_node_count: int = 2,
        removal_policy: cdk.RemovalPolicy | RemovalPolicy | str = cdk.RemovalPolicy.DESTROY,
        kubernetes_version: str = KUBERNETES_VERSION,
        device_plugins: bool = True,
    ) -> None:
        """Create the cluster and its system nodegroup.

        :param vpc: The VPC of the cluster.
        :param subnets: Subnets of the control plane's ENIs, the system nodes and CDK's kubectl provider.
            Default: the VPC's private subnets (with egress, else isolated).
        :param admin_role_arn: IAM role given ``AmazonEKSClusterAdminPolicy`` through an access entry.
            Default: none (only the CloudFormation execution role that creates the cluster is admin).
        :param public_access_cidrs: Open the API endpoint publicly, but only to these IPv4 ranges
            (``0.0.0.0/0`` is refused). Default: the endpoint is private, reachable only from the VPC.
        :param access_mode: Default: API (access entries only).
        :param cluster_name: Default: generated by CloudFormation.
        :param secrets_key: KMS key encrypting Kubernetes secrets. Default: a new key with rotation on and
            the cluster's ``removal_policy`` (deleted with the cluster, after KMS's 30-day waiting period).
        :param system_instance_type: Instance type of the system nodes (CoreDNS, controllers, add-ons; tainted
            for them alone).
            Default: ``t3.large``.
        :param system_node_count: How many system nodes. Default: 2.
        :param removal_policy: What happens to the cluster when it leaves the stack. Default: DESTROY (a
            cluster holds no data of its own; storage lives in FSx).
        :param kubernetes_version: The control plane's Kubernetes version; the kubectl layer (v1.33) drives
            1.32 to 1.34. Default: :data:`KUBERNETES_VERSION`.
        :param device_plugins: Install the device plugins the nodegroups need, as they are added: NVIDIA's for
            NVIDIA GPU types, AWS's EFA plugin for the types of EFA nodegroups (:class:`EfaNodegroup`), AWS Neuron's for
            Trainium types, each scheduled on exactly those instance types, with the charts and values of
            :mod:`~training_clusters.constructs.eks.addons` (without them no pod can ask for a GPU, an EFA
            interface or a Neuron device). A plugin you create for this cluster yourself
            (:class:`~training_clusters.constructs.eks.addons.nvidia_device_plugin.NvidiaDevicePlugin`, ``EfaDevicePlugin``,
            ``NeuronDevicePlugin``, e.g. for GPU sharing) replaces the cluster's of that kind. Default: True,
            as eksctl does; False installs none.
        :param kubernetes_version: The control plane's Kubernetes version; the kubectl layer (v1.35) drives
            1.34 to 1.36. A version past EKS standard support is a synth warning
            (:func:`~training_clusters.rules.versions.kubernetes_support_advice`). Default:
            :data:`KUBERNETES_VERSION`.
        """
        super().__init__(scope, id)
        access_mode = parse_option(self, "access_mode", AccessMode, access_mode)
        removal_policy = to_removal_policy(self, "removal_policy", removal_policy)
        self._check_admin_role_arn(admin_role_arn)
        self._check_public_access_cidrs(public_access_cidrs)
        self._check_system_node_count(system_node_count)
        # system nodes may be any type EC2 sells: the catalogue's facts where it knows the type, else its name
        raise_if_problem(self, "system_instance_type", instance_type_name_problem(system_instance_type))
        system_type = CATALOG.get(system_instance_type)

        self.secrets_key: kms.IKey = secrets_key or kms.Key(
            self,
            "SecretsKey",
            enable_key_rotation=True,
            description="Envelope encryption of Kubernetes secrets",
            # follows the cluster: it encrypts only the cluster's secrets, so a key kept after them is pure cost
            removal_policy=removal_policy,
        )
        self.kubectl_layer = KubectlV35Layer(self, "KubectlLayer")
        self.subnets: list[ec2.ISubnet] = list(subnets) if subnets else _private_subnets(vpc)
        self.cluster = eks.Cluster(
            self,
            "Resource",
            version=eks.KubernetesVersion.of(kubernetes_version),
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=self.kubectl_layer,
                # in the VPC, so it reaches a private endpoint (with the cluster security group)
                private_subnets=self.subnets,
            ),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnets=self.subnets)],
            cluster_name=cluster_name,
            default_capacity=0,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            endpoint_access=_endpoint_access(public_access_cidrs),
            secrets_encryption_key=self.secrets_key,
            cluster_logging=list(CONTROL_PLANE_LOGS),
            removal_policy=removal_policy,
        )
        if access_mode is not AccessMode.API:
            # aws_eks_v2 always asks for API; the legacy ConfigMap mode is a property of the same resource.
            cfn_cluster = self.cluster.node.default_child
            assert isinstance(cfn_cluster, cdk.CfnResource)
            cfn_cluster.add_property_override("AccessConfig.AuthenticationMode", str(access_mode))
        self.cluster_name: str = self.cluster.cluster_name
        self.kubernetes_version = kubernetes_version
        self.installs_device_plugins = device_plugins
        #: The device plugin charts the cluster installs itself, by kind (:data:`DEVICE_PLUGIN_KINDS`).
        self.device_plugin_charts: dict[str, eks.HelmChart] = {}
        self._device_plugin_types: dict[str, set[str]] = {kind: set() for kind in DEVICE_PLUGIN_KINDS}
        self._given_device_plugins: set[str] = set()
        if not is_unresolved(kubernetes_version):
            advise(
                self,
                KUBERNETES_EXTENDED_SUPPORT,
                kubernetes_support_advice(kubernetes_version, advice_day(self)),
            )
        self.cluster_security_group: ec2.ISecurityGroup = self.cluster.cluster_security_group
        self._connections = SameEnvironmentConnections(
            owner=self, security_groups=[self.cluster_security_group]
        )
        if admin_role_arn is not None:
            self.cluster.grant_access(
                "AdminAccess",
                admin_role_arn,
                [
                    eks.AccessPolicy.from_access_policy_name(
                        "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
                    )
                ],
            )
        self.admin_role_arn = admin_role_arn
        self.node_role = self._create_node_role()
        # CDK's own add-on (aws_eks_v2 creates it on first use, as its POD_IDENTITY service accounts do).
        self.pod_identity_agent: eks.IAddon = self.cluster.eks_pod_identity_agent
        self.vpc_cni_role = self._create_vpc_cni_role()
        # Every nodegroup depends on it: aws-node pods get Pod Identity only if it exists when they start.
        self.vpc_cni_pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "VpcCniPodIdentity",
            cluster_name=self.cluster_name,
            namespace=VPC_CNI_NAMESPACE,
            service_account=VPC_CNI_SERVICE_ACCOUNT,
            role_arn=self.vpc_cni_role.role_arn,
        )
        self.vpc_cni: eks.CfnAddon | None = None
        self.system_nodegroup = _managed_nodegroup(
            self,
            "SystemNodegroup",
            cluster=self,
            ami_type=ami_type_for(system_type)
            if system_type is not None
            else standard_ami_type(architecture_of(system_instance_type)),
            launch_template=node_launch_template(
                self, "SystemLaunchTemplate", instance_type=system_instance_type
            ),
            subnets=self.subnets,
            desired_size=system_node_count,
            min_size=system_node_count,
            max_size=system_node_count,
            labels=SYSTEM_NODE_LABELS,
            # no team pod tolerates it: a pod from a team namespace never shares a node with the add-ons'
            # Pod Identity tokens
            taints=SYSTEM_NODE_TAINTS,
            capacity_type=eks.CapacityType.ON_DEMAND,
        )
        # CDK's own resources all live under the aws_eks_v2 cluster; ours acknowledge where they are made.
        acknowledge_eks_made(self.cluster)

    @property
    def connections(self) -> ec2.Connections:
        """The cluster security group's connections (every node carries this group)."""
        return self._connections

    def add_node_monitoring_agent(self) -> eks.CfnAddon:
        """The ``eks-node-monitoring-agent`` add-on (once; later calls return the same add-on).

        The agent reads each node's kernel, NVIDIA driver (XID errors, DCGM) and network logs and reports
        problems as node conditions and events; node auto-repair, which every nodegroup of this library turns
        on, replaces a node whose condition stays unhealthy.
        https://docs.aws.amazon.com/eks/latest/userguide/node-health.html
        """
        existing = self.node.try_find_child("NodeMonitoringAgent")
        if isinstance(existing, eks.CfnAddon):
            return existing
        return eks.CfnAddon(
            self,
            "NodeMonitoringAgent",
            addon_name=NODE_MONITORING_AGENT,
            cluster_name=self.cluster_name,
            resolve_conflicts="OVERWRITE",
        )

    def add_device_plugins_for(self, instance_type: InstanceType, *, efa: bool) -> None:
        """Schedule the device plugins nodes of ``instance_type`` need on them (a nodegroup calls this).

        The first nodegroup that needs a kind installs its chart; later ones add their type to the chart's node
        affinity, read when the template is written. Nothing with ``device_plugins=False``, or for a kind whose
        plugin was given for this cluster (:meth:`device_plugin_given`).
        """
        if not self.installs_device_plugins:
            return
        wanted = {
            DevicePluginKind.NVIDIA: instance_type.is_gpu,
            DevicePluginKind.EFA: efa,
            DevicePluginKind.NEURON: instance_type.is_trainium,
        }
        for kind, needed in wanted.items():
            if not needed:
                continue
            self._device_plugin_types[kind].add(instance_type.name)
            if kind not in self.device_plugin_charts and kind not in self._given_device_plugins:
                # the add-ons import this module
                from training_clusters.constructs.eks.addons.cluster_device_plugins import (
                    cluster_device_plugin,
                )

                self.device_plugin_charts[kind] = cluster_device_plugin(
                    self, kind, functools.partial(sorted, self._device_plugin_types[kind])
                )

    def device_plugin_given(self, kind: DevicePluginKind | str) -> None:
        """A device plugin of ``kind`` is installed for this cluster by someone else (an add-on construct calls
        this): the cluster installs none of that kind, and removes its own if it made one already."""
        kind = DevicePluginKind(kind)
        self._given_device_plugins.add(kind)
        chart = self.device_plugin_charts.pop(kind, None)
        if chart is not None:
            self.node.try_remove_child(chart.node.id)

    def add_vpc_cni(
        self, *, addon_version: str | None = None, scope: Construct | None = None
    ) -> eks.CfnAddon:
        """The ``vpc-cni`` EKS add-on, configured to enforce NetworkPolicy (:data:`VPC_CNI_CONFIGURATION`); once:
        later calls return the same add-on.

        EKS installs the VPC CNI unmanaged with every cluster; the add-on takes it over (``OVERWRITE``) so its
        configuration is ours. Its ``aws-node`` pods keep their role through :attr:`vpc_cni_pod_identity`.

        :param addon_version: Pin the add-on. Default: EKS's default for the cluster's Kubernetes version.
        :param scope: Where the add-on's construct lives (its logical id). Default: this cluster.
        """
        if self.vpc_cni is not None:
            if addon_version is not None and addon_version != self.vpc_cni.addon_version:
                raise prop_error(
                    self.node.path,
                    "add_vpc_cni.addon_version",
                    f"must be the version the add-on was made with ({self.vpc_cni.addon_version or 'EKS default'}), "
                    f"got {addon_version!r}",
                )
            return self.vpc_cni
        self.vpc_cni = eks.CfnAddon(
            scope or self,
            "VpcCni",
            addon_name="vpc-cni",
            addon_version=addon_version,
            cluster_name=self.cluster_name,
            resolve_conflicts="OVERWRITE",
            configuration_values=json.dumps(dict(VPC_CNI_CONFIGURATION)),
        )
        self.vpc_cni.node.add_dependency(self.vpc_cni_pod_identity)
        return self.vpc_cni

    def update_kubeconfig_command(self, region: str) -> str:
        """The ``aws eks update-kubeconfig`` command for the admin role (a string with tokens)."""
        command = f"aws eks update-kubeconfig --name {self.cluster_name} --region {region}"
        if self.admin_role_arn is not None:
            command += f" --role-arn {self.admin_role_arn}"
        return command

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _check_admin_role_arn(self, admin_role_arn: str | None) -> None:
        if admin_role_arn is None or is_unresolved(admin_role_arn):
            return
        raise_if_problem(self, "admin_role_arn", admin_role_arn_problem(admin_role_arn))

    def _check_public_access_cidrs(self, cidrs: Sequence[str] | None) -> None:
        if cidrs is not None:
            known = [cidr for cidr in cidrs if not is_unresolved(cidr)]
            raise_if_problem(
                self,
                "public_access_cidrs",
                public_access_cidrs_problem(known) if known or not cidrs else None,
            )

    def _check_system_node_count(self, count: int) -> None:
        raise_if_problem(self, "system_node_count", system_node_count_problem(count))

    # ----------------------------------------------------------------------------------------------
    # building

    def _create_node_role(self) -> iam.Role:
        role = iam.Role(
            self,
            "NodeRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="EKS worker nodes of the training cluster",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(name) for name in NODE_MANAGED_POLICIES
            ],
        )
        for name in NODE_MANAGED_POLICIES:
            acknowledge(
                role,
                f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]",
                f"{name} is the AWS-managed policy EKS requires on every worker node role; AWS keeps it "
                "current with what the kubelet and image pulls need",
            )
        return role

    def _create_vpc_cni_role(self) -> iam.Role:
        """The VPC CNI's role, trusted by EKS Pod Identity for aws-node of this cluster only."""
        role = iam.Role(
            self,
            "VpcCniRole",
            assumed_by=pod_identity_principal(
                self.cluster.cluster_arn, VPC_CNI_NAMESPACE, VPC_CNI_SERVICE_ACCOUNT
            ),
            description="Amazon VPC CNI (kube-system/aws-node) through EKS Pod Identity",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(VPC_CNI_POLICY)],
        )
        resource = role.node.default_child
        assert isinstance(resource, iam.CfnRole)
        acknowledge(
            resource,
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{VPC_CNI_POLICY}]",
            f"{VPC_CNI_POLICY} is the AWS-managed policy of the VPC CNI (ENI and IP address management), "
            "which AWS keeps current with the plugin; only aws-node's pods can assume this role",
        )
        return role


def _checked_capacity(scope: Construct, capacity: Capacity) -> Capacity:
    """``capacity`` when EKS managed nodegroups support it (a training plan is HyperPod's only)."""
    try:
        capacity.check_for(Orchestrator.EKS, "capacity")
    except ConfigurationError as error:
        raise ConfigurationError(f"{scope.node.path}: {error}") from None
    refuse_misplaced(scope, "capacity", capacity)
    return capacity


def _check_imds_hop_limit(scope: Construct, hop_limit: int) -> None:
    if not is_unresolved(hop_limit):
        raise_if_problem(scope, "imds_hop_limit", imds_hop_limit_problem(hop_limit))


def _check_root_volume(scope: Construct, size_gib: int) -> None:
    raise_if_problem(scope, "root_volume_size_gib", root_volume_size_problem(size_gib))


def _private_subnets(vpc: ec2.IVpc) -> list[ec2.ISubnet]:
    if vpc.private_subnets:
        return list(vpc.private_subnets)
    return list(vpc.isolated_subnets)


def _endpoint_access(public_access_cidrs: Sequence[str] | None) -> eks.EndpointAccess:
    if public_access_cidrs is None:
        return eks.EndpointAccess.PRIVATE
    return eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*public_access_cidrs)


# --------------------------------------------------------------------------------------------------
# launch templates and nodegroups


def ami_type_for(instance_type: InstanceType) -> eks.NodegroupAmiType:
    """The EKS-optimized AL2023 AMI type for an instance: NVIDIA for GPUs, Neuron for Trainium."""
    arm = instance_type.architecture is Architecture.ARM64
    accelerators = instance_type.accelerators
    if accelerators is None:
        return standard_ami_type(instance_type.architecture)
    if accelerators.kind is AcceleratorKind.TRAINIUM:
        return eks.NodegroupAmiType.AL2023_X86_64_NEURON
    return eks.NodegroupAmiType.AL2023_ARM_64_NVIDIA if arm else eks.NodegroupAmiType.AL2023_X86_64_NVIDIA


def standard_ami_type(architecture: Architecture) -> eks.NodegroupAmiType:
    """The EKS-optimized AL2023 AMI type of a CPU-only instance of ``architecture``."""
    if architecture is Architecture.ARM64:
        return eks.NodegroupAmiType.AL2023_ARM_64_STANDARD
    return eks.NodegroupAmiType.AL2023_X86_64_STANDARD


def accelerator_taints(instance_type: InstanceType) -> tuple[eks.TaintSpec, ...]:
    """``nvidia.com/gpu`` (or ``aws.amazon.com/neuron``) NoSchedule, so only accelerator pods land here."""
    accelerators = instance_type.accelerators
    if accelerators is None:
        return ()
    key = NEURON_TAINT_KEY if accelerators.kind is AcceleratorKind.TRAINIUM else GPU_TAINT_KEY
    return (eks.TaintSpec(key=key, value="true", effect=eks.TaintEffect.NO_SCHEDULE),)


def _managed_nodegroup(
    scope: Construct,
    id: str,
    *,
    cluster: GpuEksCluster,
    ami_type: eks.NodegroupAmiType,
    launch_template: ec2.CfnLaunchTemplate,
    subnets: Sequence[ec2.ISubnet],
    desired_size: int,
    min_size: int,
    max_size: int,
    labels: Mapping[str, str],
    taints: Sequence[eks.TaintSpec],
    capacity_type: eks.CapacityType,
) -> eks.Nodegroup:
    nodegroup = eks.Nodegroup(
        scope,
        id,
        cluster=cluster.cluster,
        node_role=cluster.node_role,
        ami_type=ami_type,
        capacity_type=capacity_type,
        launch_template_spec=eks.LaunchTemplateSpec(
            id=launch_template.ref, version=launch_template.attr_latest_version_number
        ),
        subnets=ec2.SubnetSelection(subnets=list(subnets)),
        desired_size=desired_size,
        min_size=min_size,
        max_size=max_size,
        labels=dict(labels) or None,
        taints=list(taints) or None,
        enable_node_auto_repair=True,
    )
    # aws-node gets its credentials through Pod Identity only if the association exists when its pod starts.
    nodegroup.node.add_dependency(cluster.vpc_cni_pod_identity)
    return nodegroup


class _Sizes:
    """Validated desired / min / max sizes of a nodegroup."""

    def __init__(self, path: str, desired: int, minimum: int | None, maximum: int | None) -> None:
        self.desired = desired
        self.min = desired if minimum is None else minimum
        self.max = desired if maximum is None else maximum
        problem = nodegroup_sizes_problem(desired, self.min, self.max)
        if problem:
            raise_if_problem(path, *problem)


class _LaunchTemplateNodegroup(Construct):
    """What :class:`EfaNodegroup` and :class:`GpuNodegroup` share: their node checks and the managed nodegroup
    over their launch template, with id ``"Resource"``."""

    instance_type: InstanceType
    capacity: Capacity
    launch_template: ec2.CfnLaunchTemplate
    labels: dict[str, str]
    taints: tuple[eks.TaintSpec, ...]
    desired_size: int
    nodegroup: eks.Nodegroup

    def _check_nodes(
        self,
        *,
        root_volume_size_gib: int,
        imds_hop_limit: int,
        desired_size: int,
        min_size: int | None,
        max_size: int | None,
    ) -> _Sizes:
        _check_root_volume(self, root_volume_size_gib)
        _check_imds_hop_limit(self, imds_hop_limit)
        return _Sizes(self.node.path, desired_size, min_size, max_size)

    def _add_nodegroup(
        self,
        *,
        cluster: GpuEksCluster,
        subnets: Sequence[ec2.ISubnet],
        sizes: _Sizes,
        labels: Mapping[str, str] | None,
        taints: Sequence[eks.TaintSpec],
        efa: bool = False,
    ) -> None:
        self.labels = dict(labels or {})
        self.taints = tuple(taints)
        self.desired_size = sizes.desired
        self.nodegroup = _managed_nodegroup(
            self,
            "Resource",
            cluster=cluster,
            ami_type=ami_type_for(self.instance_type),
            launch_template=self.launch_template,
            subnets=subnets,
            desired_size=sizes.desired,
            min_size=sizes.min,
            max_size=sizes.max,
            labels=self.labels,
            taints=taints,
            capacity_type=eks.CapacityType(self.capacity.eks_capacity_type()),
        )
        cluster.add_device_plugins_for(self.instance_type, efa=efa)


@checked_props
class EfaNodegroup(_LaunchTemplateNodegroup):
    """A managed nodegroup of EFA instances in one placement group and one subnet.

    Example::

        EfaNodegroup(self, "P5", cluster=cluster, instance_type="p5.48xlarge", desired_size=2,
                     subnet=network.placement_subnet(), placement_group=placement_group,
                     efa_security_group=network.efa_security_group)

    The launch template declares one EFA interface per network card, up to the instance's maximum from
    the catalogue (p5.48xlarge 32, p5en 16, p6-b200 8, p4d 4, trn1 8, g5.8xlarge 1), each carrying the
    cluster security group and the EFA security group. Nodes get the ``nvidia.com/gpu`` NoSchedule taint
    (``aws.amazon.com/neuron`` for Trainium) and node auto-repair.

    Attributes: ``nodegroup``, ``launch_template``, ``instance_type`` (the catalogue entry),
    ``efa_interfaces`` (how many), ``desired_size``, ``labels``, ``taints``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        instance_type: str,
        subnet: ec2.ISubnet,
        placement_group: TrainingPlacementGroup,
        efa_security_group: ec2.ISecurityGroup,
        desired_size: int,
        min_size: int | None = None,
        max_size: int | None = None,
        efa_interfaces: int | None = None,
        efa_interface_type: EfaInterfaceType | str = EfaInterfaceType.EFA,
        capacity: Capacity | None = None,
        labels: Mapping[str, str] | None = None,
        root_volume_size_gib: int = 200,
        imds_hop_limit: int = IMDS_HOP_LIMIT,
    ) -> None:
        """Create the launch template and the nodegroup.

        :param cluster: The cluster the nodes join.
        :param instance_type: An EFA-capable type from the catalogue, e.g. ``p5.48xlarge``.
        :param subnet: The one subnet (and so AZ) of the placement group, e.g. ``network.placement_subnet()``.
        :param placement_group: The placement group the instances launch into.
        :param efa_security_group: The group allowing all traffic between EFA members: the cluster's own (its
            nodegroups share it); one another cluster already uses is refused.
        :param desired_size: How many nodes.
        :param min_size: Default: ``desired_size``.
        :param max_size: Default: ``desired_size``.
        :param efa_interfaces: EFA interfaces per node, one per network card. Default: the instance's maximum.
        :param efa_interface_type: Type of the interfaces after the primary. Default: EFA.
        :param capacity: Where the instances come from: ``Capacity.on_demand()``, ``.spot()``,
            ``.reservation(id=... | resource_group_arn=..., targeted=...)`` or ``.capacity_block(id)``; a
            training plan is refused (HyperPod only). With a Capacity Block, or a reservation not made in
            ``placement_group`` (``in_placement_group``), the launch template leaves the placement group out
            (see :meth:`Capacity.keeps_placement_group`). Default: On-Demand.
        :param labels: Kubernetes node labels. Default: none beyond what EKS sets.
        :param root_volume_size_gib: Encrypted gp3 root volume (container images are large). Default: 200.
        :param imds_hop_limit: IMDSv2 PUT response hop limit. Default: 1, so pods outside the host network
            cannot read the node role's credentials; 2 lets every pod reach instance metadata.
        """
        super().__init__(scope, id)
        claim_efa_groups([efa_security_group], cluster=cluster, owner=self, prop="efa_security_group")
        efa_interface_type = parse_option(self, "efa_interface_type", EfaInterfaceType, efa_interface_type)
        self.instance_type = catalog_entry(self, instance_type, "instance_type")
        self._check_efa_supported()
        self.efa_interfaces = self._check_efa_interfaces(efa_interfaces)
        self.capacity = _checked_capacity(self, capacity or Capacity.on_demand())
        sizes = self._check_nodes(
            root_volume_size_gib=root_volume_size_gib,
            imds_hop_limit=imds_hop_limit,
            desired_size=desired_size,
            min_size=min_size,
            max_size=max_size,
        )
        placement_group.check_subnets([subnet], field="subnet")

        security_group_ids = [
            cluster.cluster_security_group.security_group_id,
            efa_security_group.security_group_id,
        ]
        self.launch_template = node_launch_template(
            self,
            "LaunchTemplate",
            instance_type=self.instance_type.name,
            root_volume_size_gib=root_volume_size_gib,
            network_interfaces=efa_network_interfaces(
                count=self.efa_interfaces,
                security_group_ids=security_group_ids,
                interface_type=efa_interface_type,
            ),
            placement_group_name=placement_group.placement_group_name,
            capacity=self.capacity,
            imds_hop_limit=imds_hop_limit,
        )
        self._add_nodegroup(
            cluster=cluster,
            subnets=[subnet],
            sizes=sizes,
            labels=labels,
            taints=accelerator_taints(self.instance_type),
            efa=True,
        )

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _check_efa_supported(self) -> None:
        raise_if_problem(self, "instance_type", efa_nodegroup_problem(self.instance_type))

    def _check_efa_interfaces(self, wanted: int | None) -> int:
        if wanted is None:
            return min(self.instance_type.max_efa_interfaces, self.instance_type.max_network_cards)
        raise_if_problem(self, "efa_interfaces", efa_interfaces_problem(self.instance_type, wanted))
        return wanted


@checked_props
class GpuNodegroup(_LaunchTemplateNodegroup):
    """A managed nodegroup of GPU instances without EFA (inference, notebooks, GPU sharing).

    Example::

        GpuNodegroup(self, "Gpu", cluster=cluster, instance_type="g5.2xlarge", desired_size=1,
                     labels={"eks-node": "gpu"})

    Same launch-template hardening as :class:`EfaNodegroup` (IMDSv2 with hop limit 1, encrypted gp3 root
    volume, instance type in the template), in any private subnet, with node auto-repair.

    Attributes: ``nodegroup``, ``launch_template``, ``instance_type``, ``desired_size``, ``labels``, ``taints``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: GpuEksCluster,
        instance_type: str,
        desired_size: int,
        min_size: int | None = None,
        max_size: int | None = None,
        subnets: Sequence[ec2.ISubnet] | None = None,
        labels: Mapping[str, str] | None = None,
        gpu_taint: bool = True,
        capacity: Capacity | None = None,
        root_volume_size_gib: int = 100,
        imds_hop_limit: int = IMDS_HOP_LIMIT,
    ) -> None:
        """Create the launch template and the nodegroup.

        :param cluster: The cluster the nodes join.
        :param instance_type: A GPU or Trainium type from the catalogue, e.g. ``g5.2xlarge``.
        :param desired_size: How many nodes.
        :param min_size: Default: ``desired_size``.
        :param max_size: Default: ``desired_size``.
        :param subnets: Default: the cluster's VPC's private subnets.
        :param labels: Kubernetes node labels. Default: none beyond what EKS sets.
        :param gpu_taint: Taint nodes ``nvidia.com/gpu=true:NoSchedule`` so only GPU pods land there.
            Default: True.
        :param capacity: Where the instances come from: ``Capacity.on_demand()``, ``.spot()``,
            ``.reservation(...)`` or ``.capacity_block(id)``. Reserved capacity lives in one AZ, so it needs
            ``subnets`` of exactly one subnet in that AZ. Default: On-Demand.
        :param root_volume_size_gib: Encrypted gp3 root volume. Default: 100.
        :param imds_hop_limit: IMDSv2 PUT response hop limit. Default: 1, so pods outside the host network
            cannot read the node role's credentials; 2 lets every pod reach instance metadata.
        """
        super().__init__(scope, id)
        self.instance_type = catalog_entry(self, instance_type, "instance_type")
        self._check_accelerated()
        self.capacity = _checked_capacity(self, capacity or Capacity.on_demand())
        self._check_reserved_in_one_subnet(subnets)
        sizes = self._check_nodes(
            root_volume_size_gib=root_volume_size_gib,
            imds_hop_limit=imds_hop_limit,
            desired_size=desired_size,
            min_size=min_size,
            max_size=max_size,
        )
        self.launch_template = node_launch_template(
            self,
            "LaunchTemplate",
            instance_type=self.instance_type.name,
            root_volume_size_gib=root_volume_size_gib,
            capacity=self.capacity,
            imds_hop_limit=imds_hop_limit,
        )
        self._add_nodegroup(
            cluster=cluster,
            subnets=list(subnets) if subnets else _private_subnets(cluster.cluster.vpc),
            sizes=sizes,
            labels=labels,
            taints=accelerator_taints(self.instance_type) if gpu_taint else (),
        )

    def _check_accelerated(self) -> None:
        raise_if_problem(self, "instance_type", accelerated_nodegroup_problem(self.instance_type))

    def _check_reserved_in_one_subnet(self, subnets: Sequence[ec2.ISubnet] | None) -> None:
        reserved = self.capacity.described if self.capacity.is_reserved else None
        raise_if_problem(
            self, "subnets", reserved_subnets_problem(reserved, None if subnets is None else len(subnets))
        )


def pod_identity_principal(cluster_arn: str, namespace: str, service_account: str) -> iam.IPrincipal:
    """EKS Pod Identity (``sts:AssumeRole`` and ``sts:TagSession``) for one service account of one cluster.

    Pod Identity tags every session with the cluster's ARN, the namespace and the service account
    (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html); the trust policy requires all three,
    as AWS shows in https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html, so no other
    association of the account (another cluster's, another namespace's) can assume the role.
    """
    return iam.SessionTagsPrincipal(iam.ServicePrincipal("pods.eks.amazonaws.com")).with_conditions(
        {
            "StringEquals": {
                "aws:RequestTag/eks-cluster-arn": cluster_arn,
                "aws:RequestTag/kubernetes-namespace": namespace,
                "aws:RequestTag/kubernetes-service-account": service_account,
            }
        }
    )
