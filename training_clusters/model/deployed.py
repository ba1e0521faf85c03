"""Concrete values of a deployed environment stack, for documents that reference its resources.

``training-clusters render-pcluster FILE --deployed`` renders ParallelCluster's ``cluster-config.yaml``
with the real subnet, security-group, file-system and placement-group ids of the deployed stack instead
of placeholders (``ParallelCluster.render_config(values, strict=True)``, which names any reference left
without a value). CloudFormation tells us each resource's physical id; a ``Fn::GetAtt`` is answered only
where the attribute *is* the physical id (a security group's ``GroupId``, a placement group's
``GroupName``) or one EC2 call gives it (a VPC's ``CidrBlock``). Anything else is left out, never guessed.

Uses ``cloudformation:ListStackResources`` and ``ec2:DescribeVpcs``, both read-only.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from training_clusters.model.errors import ConfigurationError

__all__ = ["ATTRIBUTE_IS_PHYSICAL_ID", "deployed_values"]

#: ``(resource type, attribute)`` pairs whose ``Fn::GetAtt`` value equals the resource's physical id.
ATTRIBUTE_IS_PHYSICAL_ID = frozenset(
    {
        ("AWS::EC2::SecurityGroup", "GroupId"),
        ("AWS::EC2::PlacementGroup", "GroupName"),
        ("AWS::EC2::Subnet", "SubnetId"),
        ("AWS::EC2::VPC", "VpcId"),
    }
)


def deployed_values(stack_name: str, *, cloudformation: Any, ec2: Any) -> dict[str, str]:
    """``{logical id: physical id}`` of the deployed stack, plus the ``LogicalId.Attribute`` values we can read.

    :raises ConfigurationError: the stack does not exist (deploy it first).
    """
    values: dict[str, str] = {}
    vpcs: dict[str, str] = {}
    try:
        for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name):
            for summary in page["StackResourceSummaries"]:
                if "PhysicalResourceId" not in summary:  # not created (yet)
                    continue
                logical_id, physical_id = summary["LogicalResourceId"], summary["PhysicalResourceId"]
                kind = summary["ResourceType"]
                values[logical_id] = physical_id
                for attribute in (a for k, a in ATTRIBUTE_IS_PHYSICAL_ID if k == kind):
                    values[f"{logical_id}.{attribute}"] = physical_id
                if kind == "AWS::EC2::VPC":
                    vpcs[physical_id] = logical_id
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", str(error))
        raise ConfigurationError(
            f"{stack_name}: {message} (deploy it first: npx cdk deploy -c environment=<file>)"
        ) from None
    if vpcs:
        for vpc in ec2.describe_vpcs(VpcIds=sorted(vpcs))["Vpcs"]:
            values[f"{vpcs[vpc['VpcId']]}.CidrBlock"] = vpc["CidrBlock"]
    return values
