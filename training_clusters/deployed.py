"""Concrete values of a deployed environment stack, for documents that reference its resources.

``training-clusters render-pcluster FILE --deployed`` renders ParallelCluster's ``cluster-config.yaml``
with the real subnet, security-group, file-system and placement-group ids of the deployed stack instead
of placeholders. CloudFormation tells us each resource's physical id; a ``Fn::GetAtt`` is answered only
where the attribute *is* the physical id (a security group's ``GroupId``, a placement group's
``GroupName``) or one EC2 call gives it (a VPC's ``CidrBlock``). Anything else is reported, never guessed.

Uses ``cloudformation:ListStackResources`` and ``ec2:DescribeVpcs``, both read-only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from botocore.exceptions import ClientError

from training_clusters.errors import ConfigurationError

__all__ = ["ATTRIBUTE_IS_PHYSICAL_ID", "deployed_values", "references"]

#: ``(resource type, attribute)`` pairs whose ``Fn::GetAtt`` value equals the resource's physical id.
ATTRIBUTE_IS_PHYSICAL_ID = frozenset(
    {
        ("AWS::EC2::SecurityGroup", "GroupId"),
        ("AWS::EC2::PlacementGroup", "GroupName"),
        ("AWS::EC2::Subnet", "SubnetId"),
        ("AWS::EC2::VPC", "VpcId"),
    }
)


def references(document: Any) -> set[str]:
    """Every ``Ref`` (``LogicalId``) and ``Fn::GetAtt`` (``LogicalId.Attribute``) in a resolved document.

    Pseudo parameters (``AWS::Region`` ...) are left out: they are not resources of the stack.
    """
    return set(_references(document))


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, list):
        for item in node:
            yield from _references(item)
    elif isinstance(node, dict):
        if len(node) == 1:
            ((key, argument),) = node.items()
            if key == "Ref" and isinstance(argument, str):
                if not argument.startswith("AWS::"):
                    yield argument
                return
            if key == "Fn::GetAtt":
                logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
                yield f"{logical_id}.{attribute}"
                return
        for value in node.values():
            yield from _references(value)


def deployed_values(stack_name: str, wanted: set[str], *, cloudformation: Any, ec2: Any) -> dict[str, str]:
    """The deployed value of each reference in ``wanted`` (see :func:`references`).

    :raises ConfigurationError: the stack does not exist (deploy it first), or a reference has no value
        we can read (named, with its resource type).
    """
    physical, types = _stack_resources(stack_name, cloudformation)
    values: dict[str, str] = {}
    unresolved: list[str] = []
    for key in sorted(wanted):
        logical_id, _, attribute = key.partition(".")
        kind = types.get(logical_id, "")
        if logical_id not in physical:
            unresolved.append(f"{key} (not a resource of {stack_name})")
        elif not attribute or (kind, attribute) in ATTRIBUTE_IS_PHYSICAL_ID:
            values[key] = physical[logical_id]
        elif (kind, attribute) == ("AWS::EC2::VPC", "CidrBlock"):
            values[key] = _vpc_cidr(ec2, physical[logical_id])
        else:
            unresolved.append(f"{key} ({kind} attribute {attribute} is not read by this command)")
    if unresolved:
        raise ConfigurationError(f"{stack_name}: cannot resolve " + "; ".join(unresolved))
    return values


def _stack_resources(stack_name: str, cloudformation: Any) -> tuple[Mapping[str, str], Mapping[str, str]]:
    physical: dict[str, str] = {}
    types: dict[str, str] = {}
    try:
        for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name):
            for summary in page["StackResourceSummaries"]:
                if "PhysicalResourceId" in summary:
                    physical[summary["LogicalResourceId"]] = summary["PhysicalResourceId"]
                types[summary["LogicalResourceId"]] = summary["ResourceType"]
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", str(error))
        raise ConfigurationError(
            f"{stack_name}: {message} (deploy it first: npx cdk deploy -c environment=<file>)"
        ) from None
    return physical, types


def _vpc_cidr(ec2: Any, vpc_id: str) -> str:
    (vpc,) = ec2.describe_vpcs(VpcIds=[vpc_id])["Vpcs"]
    cidr: str = vpc["CidrBlock"]
    return cidr
