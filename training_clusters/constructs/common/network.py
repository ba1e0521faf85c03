"""TrainingNetwork: the private VPC every training environment stands on.

Public subnets hold only NAT gateways; every instance, file system and endpoint lives in private subnets.
An EFA security group (all traffic in and out to itself, as EFA's OS-bypass transport requires) is shared
by the orchestrators, and :meth:`TrainingNetwork.placement_subnet` hands out the one private subnet that a
cluster placement group's instances must share.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from training_clusters.constructs.private.security_groups import (
    ClientSideConnections,
    mark_efa_group,
    open_between_members,
)
from training_clusters.constructs.private.validation import (
    checked_props,
    is_unresolved,
    raise_if_problem,
    refuse_alongside,
)
from training_clusters.gates.compliance import (
    accept_handler_findings,
    accept_inline_policy,
    accept_log_group_without_key,
    acknowledge_nist,
)
from training_clusters.rules.network import (
    PRIVATE_SUBNET_MASK,
    PUBLIC_SUBNET_MASK,
    nat_gateways_fit_problem,
    nat_gateways_problem,
    placement_zone_problem,
    private_subnet_mask_problem,
    private_subnet_zone_problem,
    vpc_cidr_problem,
)

#: Interface endpoints created in endpoint-only mode: what SSM sessions, container pulls, logging and the
#: three orchestrators (ParallelCluster, HyperPod, EKS) call from inside a VPC without a NAT gateway.
ENDPOINT_ONLY_SERVICES: dict[str, ec2.InterfaceVpcEndpointAwsService] = {
    "Ssm": ec2.InterfaceVpcEndpointAwsService.SSM,
    "SsmMessages": ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES,
    "Ec2Messages": ec2.InterfaceVpcEndpointAwsService.EC2_MESSAGES,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Monitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
    "Ec2": ec2.InterfaceVpcEndpointAwsService.EC2,
    "Kms": ec2.InterfaceVpcEndpointAwsService.KMS,
    "SecretsManager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    "CloudFormation": ec2.InterfaceVpcEndpointAwsService.CLOUDFORMATION,
    "AutoScaling": ec2.InterfaceVpcEndpointAwsService.AUTOSCALING,
    "ElasticLoadBalancing": ec2.InterfaceVpcEndpointAwsService.ELASTIC_LOAD_BALANCING,
    "SageMakerApi": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_API,
    "Eks": ec2.InterfaceVpcEndpointAwsService.EKS,
    "EksAuth": ec2.InterfaceVpcEndpointAwsService.EKS_AUTH,
    "Fsx": ec2.InterfaceVpcEndpointAwsService.FSX,
    "Sqs": ec2.InterfaceVpcEndpointAwsService.SQS,
}


@checked_props
@jsii.implements(ec2.IConnectable)
class TrainingNetwork(Construct):
    """A VPC for distributed training: private compute, NAT-only public subnets, flow logs, an EFA group.

    Example::

        network = TrainingNetwork(self, "Network", availability_zones=["us-east-1a", "us-east-1b"])
        subnet = network.placement_subnet()   # the one subnet a cluster placement group shares

    ``connections`` is the EFA security group's: anything placed in it can exchange all traffic with every
    other member, which EFA needs; add nothing else to it. It serves one cluster: a second cluster takes its
    own from :meth:`add_efa_security_group` (a cluster given a group another cluster uses is refused).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc | None = None,
        cidr: str | None = None,
        availability_zones: Sequence[str] | None = None,
        max_azs: int | None = None,
        nat_gateways: int | None = None,
        endpoint_only: bool = False,
        private_subnet_mask: int = PRIVATE_SUBNET_MASK,
        flow_logs_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        flow_logs_encryption_key: kms.IKey | None = None,
        placement_availability_zone: str | None = None,
        gateway_endpoints: bool | None = None,
    ) -> None:
        """Create the network, or adopt an existing VPC.

        Adopting a VPC (one of another stack, or imported with ``Vpc.from_lookup`` /
        ``Vpc.from_vpc_attributes``) adds nothing to the VPC's own stack: everything this construct makes
        (the EFA security group, an S3 endpoint when asked for) is its own child, so any number of stacks
        may adopt the same VPC.

        :param vpc: An existing VPC to build on. Default: a new VPC is created. Mutually exclusive with
            ``cidr``, ``nat_gateways``, ``endpoint_only`` and ``availability_zones``.
        :param cidr: IPv4 range of a new VPC. Default: ``10.0.0.0/16``.
        :param availability_zones: AZs of a new VPC. Default: the first ``max_azs`` of the stack's AZs.
        :param max_azs: How many AZs a new VPC spans when ``availability_zones`` is omitted. Default: 2.
        :param nat_gateways: NAT gateways for a new VPC (at most one per AZ). Default: 1, or 0 when
            ``endpoint_only`` is set. 0 requires ``endpoint_only``.
        :param endpoint_only: No NAT and no public subnets; private subnets reach AWS only through an S3
            gateway endpoint and the interface endpoints in :data:`ENDPOINT_ONLY_SERVICES`. Default: False.
        :param private_subnet_mask: Prefix length of each private subnet. Default: 18 (16,379 addresses,
            room for the many ENIs of EFA instances and EKS pods).
        :param flow_logs_retention: Retention of the VPC flow log group. Default: one year.
        :param flow_logs_encryption_key: Customer KMS key for the flow log group; a key made in this app gets
            a key-policy statement letting CloudWatch Logs in this region use it (an imported key's policy
            must already allow that). Default: CloudWatch Logs' own service-managed encryption. Adding or
            removing a key later is an in-place update. The flow log group is retained with the stack
            (RETAIN: audit data), so a key given here must outlive it too.
        :param placement_availability_zone: The AZ whose private subnet hosts placement groups and FSx.
            Default: the first AZ of the VPC.
        :param gateway_endpoints: Add an S3 gateway endpoint on the private subnets' route tables (free; keeps
            dataset and checkpoint traffic off the NAT gateway). Default: True for a new VPC, False for an
            adopted one: its route tables may already route S3 through an endpoint, and a second one for
            the same service fails at deploy. Set True for an adopted VPC you know has none.

        Replacement: ``cidr``, ``availability_zones`` (and their order), ``private_subnet_mask`` and
        ``placement_availability_zone`` are create-only for the VPC or its subnets, so changing one after
        deployment replaces them, and with them every file system and cluster inside (a new, empty file
        system). The EFA group's description is create-only too. ``tests/test_replacement.py`` pins them.
        """
        super().__init__(scope, id)
        self._check_existing_vpc_exclusive(vpc, cidr, nat_gateways, endpoint_only, availability_zones)
        self._check_nat_gateways(nat_gateways, endpoint_only)
        self._check_private_subnet_mask(private_subnet_mask)
        self.endpoint_only = endpoint_only
        self._adopted = vpc is not None
        self._placement_az = placement_availability_zone
        resolved_cidr = cidr or "10.0.0.0/16"

        if vpc is None:
            nat_count = nat_gateways if nat_gateways is not None else (0 if endpoint_only else 1)
            self._check_cidr(resolved_cidr, private_subnet_mask, availability_zones, max_azs)
            self._check_nat_gateways_fit_azs(nat_count, availability_zones, max_azs)
            self.vpc: ec2.IVpc = self._create_vpc(
                resolved_cidr, availability_zones, max_azs, nat_count, endpoint_only, private_subnet_mask
            )
            self._add_flow_logs(flow_logs_retention, flow_logs_encryption_key)
            self._explain_cdk_made(self.vpc)
        else:
            self.vpc = vpc
        if gateway_endpoints if gateway_endpoints is not None else vpc is None:
            self._add_s3_gateway_endpoint(adopted=vpc is not None)
        if endpoint_only:  # refused with an adopted VPC: always the VPC made here, its CIDR a literal
            self._add_interface_endpoints(resolved_cidr)

        self.efa_security_group: ec2.ISecurityGroup = self._create_efa_security_group()
        self._connections = ClientSideConnections(self.efa_security_group, owner=self)
        if placement_availability_zone is not None:
            self._check_placement_az(placement_availability_zone)

    # ----------------------------------------------------------------------------------------------
    # public API

    @property
    def connections(self) -> ec2.Connections:
        """The EFA security group's connections. Rules between it and a group of another stack (a cluster's,
        a file system's) land in that other stack, which uses the network, never in the network's."""
        return self._connections

    @property
    def private_subnets(self) -> list[ec2.ISubnet]:
        """Private subnets, one per AZ: where all compute, file systems and endpoints live."""
        selection = self.vpc.select_subnets(subnet_type=self._private_subnet_type())
        return list(selection.subnets)

    def placement_subnet(self, availability_zone: str | None = None) -> ec2.ISubnet:
        """The single private subnet a cluster placement group's instances (and their FSx) share.

        Default: the subnet of ``placement_availability_zone``, else of the VPC's first AZ.
        """
        wanted = availability_zone or self._placement_az
        subnets = self.private_subnets
        if wanted is None:
            return subnets[0]
        zones = [subnet.availability_zone for subnet in subnets]
        raise_if_problem(self, "availability_zone", private_subnet_zone_problem(wanted, zones))
        return subnets[zones.index(wanted)]

    def retain(self, subnet: ec2.ISubnet) -> None:
        """Keep the VPC and ``subnet`` when the stack is deleted: something retained still lives there.

        A retained file system keeps its network interfaces in its subnet, so deleting that subnet (and the
        VPC around it) would stop ``cdk destroy``. Both cost nothing to keep; everything else of the network
        (NAT gateway, Elastic IP, routes, endpoints, the other subnets) is still deleted. An adopted VPC is
        not this stack's to delete, so this does nothing for it.
        """
        if self._adopted:
            return
        self.vpc.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        subnet.apply_removal_policy(cdk.RemovalPolicy.RETAIN)

    def placement_subnet_selection(self, availability_zone: str | None = None) -> ec2.SubnetSelection:
        """:meth:`placement_subnet` as a ``SubnetSelection``."""
        return ec2.SubnetSelection(subnets=[self.placement_subnet(availability_zone)])

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _check_existing_vpc_exclusive(
        self,
        vpc: ec2.IVpc | None,
        cidr: str | None,
        nat_gateways: int | None,
        endpoint_only: bool,
        availability_zones: Sequence[str] | None,
    ) -> None:
        if vpc is None:
            return
        refuse_alongside(
            self,
            "vpc",
            "is an existing VPC",
            {
                "cidr": cidr,
                "nat_gateways": nat_gateways,
                "availability_zones": availability_zones,
                "endpoint_only": endpoint_only or None,
            },
            why=" (they shape a new VPC)",
        )

    def _check_nat_gateways(self, nat_gateways: int | None, endpoint_only: bool) -> None:
        raise_if_problem(self, "nat_gateways", nat_gateways_problem(nat_gateways, endpoint_only))

    def _check_nat_gateways_fit_azs(
        self, nat_count: int, availability_zones: Sequence[str] | None, max_azs: int | None
    ) -> None:
        az_count = _az_count(availability_zones, max_azs)
        raise_if_problem(self, "nat_gateways", nat_gateways_fit_problem(nat_count, az_count))

    def _check_private_subnet_mask(self, mask: int) -> None:
        raise_if_problem(self, "private_subnet_mask", private_subnet_mask_problem(mask))

    def _check_cidr(
        self, cidr: str, private_mask: int, availability_zones: Sequence[str] | None, max_azs: int | None
    ) -> None:
        if is_unresolved(cidr):
            return
        az_count = _az_count(availability_zones, max_azs)
        raise_if_problem(self, "cidr", vpc_cidr_problem(cidr, az_count, private_mask))

    def _check_placement_az(self, availability_zone: str) -> None:
        azs = [s.availability_zone for s in self.private_subnets]
        if any(is_unresolved(az) for az in azs) or is_unresolved(availability_zone):
            return
        raise_if_problem(
            self,
            "placement_availability_zone",
            placement_zone_problem(availability_zone, azs, "the VPC's AZs"),
        )

    # ----------------------------------------------------------------------------------------------
    # building

    def _private_subnet_type(self) -> ec2.SubnetType:
        """Where compute lives: the isolated subnets of an endpoint-only VPC, or of an adopted VPC that has
        no private subnets with egress; else the private subnets with egress."""
        if self.endpoint_only or (
            self._adopted and not self.vpc.private_subnets and self.vpc.isolated_subnets
        ):
            return ec2.SubnetType.PRIVATE_ISOLATED
        return ec2.SubnetType.PRIVATE_WITH_EGRESS

    def _create_vpc(
        self,
        cidr: str,
        availability_zones: Sequence[str] | None,
        max_azs: int | None,
        nat_gateways: int,
        endpoint_only: bool,
        private_subnet_mask: int,
    ) -> ec2.Vpc:
        subnets = [
            ec2.SubnetConfiguration(
                name="Private", subnet_type=self._private_subnet_type(), cidr_mask=private_subnet_mask
            )
        ]
        if not endpoint_only:
            # Public subnets exist only to hold NAT gateways: nothing launched there gets a public IP.
            subnets.insert(
                0,
                ec2.SubnetConfiguration(
                    name="Public",
                    subnet_type=ec2.SubnetType.PUBLIC,
                    cidr_mask=PUBLIC_SUBNET_MASK,
                    map_public_ip_on_launch=False,
                ),
            )
        vpc = ec2.Vpc(
            self,
            "Resource",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            availability_zones=list(availability_zones) if availability_zones else None,
            max_azs=None if availability_zones else (max_azs or 2),
            nat_gateways=nat_gateways,
            subnet_configuration=subnets,
            restrict_default_security_group=True,
            enable_dns_hostnames=True,
            enable_dns_support=True,
        )
        if availability_zones:
            for subnet in [*vpc.public_subnets, *vpc.private_subnets, *vpc.isolated_subnets]:
                cdk.Validations.of(subnet).acknowledge(
                    cdk.Acknowledgment(
                        id="CloudFormation-Validate::W3010",
                        reason="AZs are pinned on purpose: a cluster placement group, its subnet and FSx must "
                        "share one known AZ, and synth must not need credentials to look AZs up",
                    )
                )
        return vpc

    def _add_flow_logs(self, retention: logs.RetentionDays, key: kms.IKey | None) -> None:
        log_group = logs.LogGroup(self, "FlowLogs", retention=retention, encryption_key=key)
        if key is None:
            accept_log_group_without_key(log_group, "VPC flow logs (network metadata, no payloads)")
        else:
            stack = cdk.Stack.of(self)
            key.grant_encrypt_decrypt(iam.ServicePrincipal(f"logs.{stack.region}.{stack.url_suffix}"))
        self.flow_log_group = log_group
        flow_log = self.vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        for policy in flow_log.node.find_all():
            if isinstance(policy, iam.CfnPolicy):
                accept_inline_policy(policy, "the flow logs' delivery role, made by aws-cdk-lib")
        self._confine_flow_log_role(flow_log)

    def _confine_flow_log_role(self, flow_log: ec2.FlowLog) -> None:
        """Only this account's flow logs may have the delivery role assumed for them: the confused-deputy
        conditions of "IAM role for publishing flow logs to CloudWatch Logs" (VPC user guide,
        https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-iam-role.html). The flow log's own id is
        made with it, so ``aws:SourceArn`` names this account's and region's flow logs."""
        role = flow_log.node.find_child("IAMRole").node.default_child
        assert isinstance(role, iam.CfnRole)
        stack = cdk.Stack.of(self)
        role.add_property_override(
            "AssumeRolePolicyDocument.Statement.0.Condition",
            {
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {
                    "aws:SourceArn": f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:vpc-flow-log/*"
                },
            },
        )

    def _explain_cdk_made(self, vpc: ec2.Vpc) -> None:
        """Explain the findings on what aws-cdk-lib adds to a new VPC, on each resource that causes them."""
        for subnet in vpc.public_subnets:
            route = subnet.node.try_find_child("DefaultRoute")
            if route is not None:
                acknowledge_nist(
                    route,
                    "NIST.800.53.R5-VPCNoUnrestrictedRouteToIGW",
                    "public subnets hold only NAT gateways, which need the internet gateway route; nothing "
                    "launched there gets a public IP (map_public_ip_on_launch is off)",
                )
        # restrict_default_security_group: CDK's one-per-stack provider removes the default group's rules
        provider = cdk.Stack.of(self).node.try_find_child(
            "Custom::VpcRestrictDefaultSGCustomResourceProvider"
        )
        handler = provider.node.try_find_child("Handler") if provider is not None else None
        if handler is not None:
            accept_handler_findings(
                handler,
                "aws-cdk-lib's handler that strips the default security group's rules at deploy time",
                in_vpc=False,
                has_environment=False,
            )

    def _add_s3_gateway_endpoint(self, *, adopted: bool) -> None:
        # Free, and keeps dataset and checkpoint traffic to S3 off the NAT gateway's per-GB charge.
        subnets = [ec2.SubnetSelection(subnet_type=self._private_subnet_type())]
        if adopted:  # our own child, in our own stack: never one under a VPC another stack owns
            ec2.GatewayVpcEndpoint(
                self, "S3Endpoint", vpc=self.vpc, service=ec2.GatewayVpcEndpointAwsService.S3, subnets=subnets
            )
        else:
            self.vpc.add_gateway_endpoint(
                "S3Endpoint", service=ec2.GatewayVpcEndpointAwsService.S3, subnets=subnets
            )

    def _add_interface_endpoints(self, cidr: str) -> None:
        """The interface endpoints of an endpoint-only VPC, their group admitting HTTPS from ``cidr`` (the VPC's
        literal range: cdk-nag's EC23 reads it, so the group needs no acknowledgement and any wider source
        added to it is a finding)."""
        endpoint_sg = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            description="HTTPS from inside the VPC to its interface endpoints",
            allow_all_outbound=False,
        )
        endpoint_sg.add_ingress_rule(
            ec2.Peer.ipv4(cidr),
            ec2.Port.tcp(443),
            "HTTPS from the VPC",
        )
        self.endpoint_security_group = endpoint_sg
        # DynamoDB is a gateway endpoint: ParallelCluster's head node keeps its cluster state there.
        self.vpc.add_gateway_endpoint(
            "DynamoDbEndpoint",
            service=ec2.GatewayVpcEndpointAwsService.DYNAMODB,
            subnets=[ec2.SubnetSelection(subnet_type=self._private_subnet_type())],
        )
        for name, service in ENDPOINT_ONLY_SERVICES.items():
            self.vpc.add_interface_endpoint(
                f"{name}Endpoint",
                service=service,
                subnets=ec2.SubnetSelection(subnet_type=self._private_subnet_type()),
                security_groups=[endpoint_sg],
                private_dns_enabled=True,
                open=False,  # our group already admits HTTPS from the VPC CIDR
            )

    def add_efa_security_group(self, id: str) -> ec2.SecurityGroup:
        """Another EFA group in this VPC (all traffic between its members, nothing else): one per cluster.

        ``efa_security_group`` serves one cluster; a second cluster on this network takes a group of its own
        from here, since a group shared by two clusters opens every port between their nodes (the clusters'
        constructs refuse an EFA group another cluster already uses).

        :param id: The group's construct id, unique in this network (``"TrainingEfa"``).
        """
        return self._create_efa_security_group(id)

    def _create_efa_security_group(self, id: str = "EfaSecurityGroup") -> ec2.SecurityGroup:
        group = ec2.SecurityGroup(
            self,
            id,
            vpc=self.vpc,
            description="EFA: all traffic in and out between members (EFA OS-bypass needs both directions)",
            allow_all_outbound=False,
        )
        open_between_members(
            group,
            inbound="EFA: all traffic from members",
            outbound="EFA: all traffic to members",
            reason="EFA's OS-bypass transport needs all traffic between the group's own members; the source "
            "is the group itself, never an address range",
        )
        mark_efa_group(group)
        return group


def _az_count(availability_zones: Sequence[str] | None, max_azs: int | None) -> int:
    """How many AZs a new VPC spans: the zones given, else ``max_azs`` (default 2)."""
    return len(availability_zones) if availability_zones else (max_azs or 2)
