"""What the constructs' own Lambda handlers share."""

from __future__ import annotations

from aws_cdk import aws_iam as iam

#: What a Lambda function in a VPC does with its network interfaces (AWS's AWSLambdaVPCAccessExecutionRole,
#: without its log actions): none of them supports resource-level permissions.
VPC_INTERFACE_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)


def vpc_interface_statement() -> iam.PolicyStatement:
    """The statement a handler in the VPC needs for its network interfaces (on ``*``)."""
    return iam.PolicyStatement(actions=list(VPC_INTERFACE_ACTIONS), resources=["*"])
