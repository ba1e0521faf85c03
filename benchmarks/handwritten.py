"""The network-storage environment written by hand with aws-cdk-lib alone: the yardstick of ``paired.py``.

The same resources as ``environments/network-storage.yaml`` (a two-AZ VPC with one NAT gateway, flow logs to
a log group, an S3 gateway endpoint, an EFA security group open to itself, a cluster placement group, an FSx
for Lustre SCRATCH_2 file system of 1200 GiB whose security group admits Lustre's ports from itself and the
EFA group, and the same outputs), synthesized with the same cdk-nag packs as ``app.py`` (AwsSolutions and NIST
800-53 R5 as validation plugins). What it does not do is ours: validating props, acknowledging findings,
reading an environment file. Run: ``python benchmarks/handwritten.py`` (``CDK_OUTDIR`` says where).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_logs as logs
from cdk_nag import AwsSolutionsChecks, NIST80053R5Checks

LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))


class HandWritten(cdk.Stack):
    @property
    def availability_zones(self) -> list[str]:
        return ["us-east-1a", "us-east-1b"]


def build(app: cdk.App) -> cdk.Stack:
    stack = HandWritten(app, "handwritten-network-storage", env=cdk.Environment(region="us-east-1"))
    vpc = ec2.Vpc(
        stack, "Network", ip_addresses=ec2.IpAddresses.cidr("10.0.0.0/16"), max_azs=2, nat_gateways=1
    )
    log_group = logs.LogGroup(
        stack, "FlowLogs", retention=logs.RetentionDays.ONE_YEAR, removal_policy=cdk.RemovalPolicy.RETAIN
    )
    vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(log_group))
    vpc.add_gateway_endpoint("S3Endpoint", service=ec2.GatewayVpcEndpointAwsService.S3)
    efa = ec2.SecurityGroup(stack, "EfaSecurityGroup", vpc=vpc, allow_all_outbound=False)
    efa.add_ingress_rule(efa, ec2.Port.all_traffic())
    efa.add_egress_rule(efa, ec2.Port.all_traffic())
    placement = ec2.PlacementGroup(stack, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER)
    subnet = vpc.private_subnets[0]
    storage_group = ec2.SecurityGroup(stack, "SharedStorageSecurityGroup", vpc=vpc, allow_all_outbound=False)
    for port in LUSTRE_PORTS:
        for peer in (storage_group, efa):
            storage_group.add_ingress_rule(peer, port)
            storage_group.add_egress_rule(peer, port)
        efa.add_ingress_rule(storage_group, port)
        efa.add_egress_rule(storage_group, port)
    lustre = fsx.LustreFileSystem(
        stack,
        "SharedStorage",
        vpc=vpc,
        vpc_subnet=subnet,
        storage_capacity_gib=1200,
        lustre_configuration=fsx.LustreConfiguration(deployment_type=fsx.LustreDeploymentType.SCRATCH_2),
        security_group=storage_group,
        removal_policy=cdk.RemovalPolicy.RETAIN,
    )
    for name, value in {
        "VpcId": vpc.vpc_id,
        "PlacementSubnetId": subnet.subnet_id,
        "PlacementGroupName": placement.placement_group_name,
        "EfaSecurityGroupId": efa.security_group_id,
        "SharedStorageMount": f"{lustre.dns_name}@tcp:/{lustre.mount_name}",
        "FlowLogGroup": log_group.log_group_name,
    }.items():
        cdk.CfnOutput(stack, name, value=value)
    return stack


def main() -> None:
    app = cdk.App()
    build(app)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), NIST80053R5Checks(app))
    try:
        app.synth()
    except RuntimeError as error:  # findings: the packs ran to the end, as they do for app.py
        if "ValidationFailed" not in str(error):
            raise


if __name__ == "__main__":
    main()
