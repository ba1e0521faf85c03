from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match, Template

from training_clusters.constructs.common.network import ENDPOINT_ONLY_SERVICES, TrainingNetwork
from training_clusters.model.errors import ConfigurationError

from ..assertions import NO_EGRESS, all_traffic, ingress, logical_id, security_group_rules, text
from ..conftest import AZS, GatedStacks, gated_stack
from .parts import StorageAndCluster


def test_default_network_has_private_compute_and_nat_only_public_subnets(stack: cdk.Stack) -> None:
    TrainingNetwork(stack, "Network", availability_zones=AZS)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::EC2::NatGateway", 1)
    template.resource_count_is("AWS::EC2::Subnet", 4)
    # No subnet hands out public IPs, the public ones included.
    for subnet in template.find_resources("AWS::EC2::Subnet").values():
        assert subnet["Properties"]["MapPublicIpOnLaunch"] is False
    template.has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "ALL"})
    template.has_resource_properties(
        "AWS::EC2::VPCEndpoint", {"ServiceName": Match.object_like({}), "VpcEndpointType": "Gateway"}
    )


def test_efa_security_group_allows_all_traffic_in_and_out_to_itself_and_nothing_else(
    stack: cdk.Stack,
) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    template = Template.from_stack(stack).to_json()
    group = logical_id(network.efa_security_group)
    # allow_all_outbound=False: no 0.0.0.0/0 egress, only the members
    assert security_group_rules(template, group) == {
        all_traffic("ingress", group),
        all_traffic("egress", group),
    }


@pytest.mark.parametrize(("props", "cidr"), [({}, "10.0.0.0/16"), ({"cidr": "10.20.0.0/16"}, "10.20.0.0/16")])
def test_the_endpoints_group_admits_https_from_the_vpc_only(
    stack: cdk.Stack, props: dict[str, Any], cidr: str
) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS, endpoint_only=True, **props)
    template = Template.from_stack(stack).to_json()
    assert security_group_rules(template, logical_id(network.endpoint_security_group)) == {
        ingress(cidr, 443),
        NO_EGRESS,
    }


def test_nat_gateway_count_is_configurable(stack: cdk.Stack) -> None:
    TrainingNetwork(stack, "Network", availability_zones=AZS, nat_gateways=2)
    Template.from_stack(stack).resource_count_is("AWS::EC2::NatGateway", 2)


def test_endpoint_only_mode_has_no_nat_no_public_subnets_and_all_endpoints(stack: cdk.Stack) -> None:
    TrainingNetwork(stack, "Network", availability_zones=AZS, endpoint_only=True)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::EC2::InternetGateway", 0)
    template.resource_count_is("AWS::EC2::Subnet", 2)
    interface = [
        e
        for e in template.find_resources("AWS::EC2::VPCEndpoint").values()
        if e["Properties"].get("VpcEndpointType") == "Interface"
    ]
    assert len(interface) == len(ENDPOINT_ONLY_SERVICES)
    names = {text(e["Properties"]["ServiceName"]) for e in interface}
    assert names == {
        f"com.amazonaws.us-east-1.{service}"
        for service in (
            "autoscaling", "cloudformation", "ec2", "ec2messages", "ecr.api", "ecr.dkr", "eks", "eks-auth",
            "elasticloadbalancing", "fsx", "kms", "logs", "monitoring", "sagemaker.api", "secretsmanager",
            "sqs", "ssm", "ssmmessages", "sts",
        )
    }  # fmt: skip


def test_placement_subnet_is_one_private_subnet_in_the_chosen_az(stack: cdk.Stack) -> None:
    network = TrainingNetwork(
        stack, "Network", availability_zones=AZS, placement_availability_zone="us-east-1b"
    )
    subnet = network.placement_subnet()
    assert subnet.availability_zone == "us-east-1b"
    assert subnet.node.path in [s.node.path for s in network.private_subnets]
    assert network.placement_subnet("us-east-1a").availability_zone == "us-east-1a"


def test_existing_vpc_is_adopted(stack: cdk.Stack) -> None:
    vpc = ec2.Vpc(stack, "Mine", availability_zones=AZS)
    network = TrainingNetwork(stack, "Network", vpc=vpc)
    assert network.vpc is vpc
    Template.from_stack(stack).resource_count_is("AWS::EC2::VPC", 1)


def test_network_is_connectable(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    other = ec2.SecurityGroup(stack, "Other", vpc=network.vpc)
    network.connections.allow_from(other, ec2.Port.tcp(22))
    assert network.connections.security_groups == [network.efa_security_group]


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"nat_gateways": 0},
            "Test/Network: nat_gateways is 0, which leaves private subnets without a way out; enable "
            "endpoint_only to reach AWS through VPC endpoints instead, or use 1 or more NAT gateways",
        ),
        (
            {"nat_gateways": 1, "endpoint_only": True},
            "Test/Network: nat_gateways must be 0 (or omitted) when endpoint_only is enabled, got 1",
        ),
        ({"nat_gateways": -1}, "Test/Network: nat_gateways must be 0 or more, got -1"),
        ({"nat_gateways": 3}, "Test/Network: nat_gateways must be at most one per AZ (2 AZs), got 3"),
        (
            {"cidr": "10.0.0.0"},
            "Test/Network: cidr prefix must be between /16 and /24 (VPC limits), got '10.0.0.0'",
        ),
        ({"cidr": "banana"}, "Test/Network: cidr must be an IPv4 range such as 10.0.0.0/16, got 'banana'"),
        (
            {"cidr": "10.0.0.0/20"},
            "Test/Network: cidr '10.0.0.0/20' (4096 addresses) cannot hold 2 private /18 and 2 public /24 "
            "subnets; use a larger range or a longer private_subnet_mask",
        ),
        ({"private_subnet_mask": 30}, "Test/Network: private_subnet_mask must be between 16 and 28, got 30"),
        (
            {"placement_availability_zone": "us-east-1c"},
            "Test/Network: placement_availability_zone 'us-east-1c' must be one of the VPC's AZs "
            "(us-east-1a, us-east-1b)",
        ),
    ],
)
def test_bad_props_are_clear_errors(stack: cdk.Stack, props: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        TrainingNetwork(stack, "Network", availability_zones=AZS, **props)  # type: ignore[arg-type]
    assert str(error.value) == message


def test_existing_vpc_with_shaping_props_is_a_clear_error(stack: cdk.Stack) -> None:
    vpc = ec2.Vpc(stack, "Mine", availability_zones=AZS)
    with pytest.raises(ConfigurationError) as error:
        TrainingNetwork(stack, "Network", vpc=vpc, cidr="10.1.0.0/16", nat_gateways=2)
    assert str(error.value) == (
        "Test/Network: vpc is an existing VPC, so cidr, nat_gateways cannot also be given (they shape a new VPC)"
    )


def test_an_adopted_vpc_cannot_be_endpoint_only_so_the_endpoints_group_admits_a_literal_cidr(
    stack: cdk.Stack,
) -> None:
    """The interface endpoints exist only in a VPC made here, whose range is a literal that cdk-nag's EC23 reads:
    an adopted VPC's range (a reference EC23 cannot read) never reaches the endpoints' group, which therefore
    carries no acknowledgement (``tests/test_acknowledgement_negatives.py``)."""
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Adopted",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=AZS,
        private_subnet_ids=SUBNET_IDS,
        vpc_cidr_block=cdk.Fn.import_value("AdoptedVpcCidr"),
    )
    with pytest.raises(ConfigurationError) as error:
        TrainingNetwork(stack, "Network", vpc=vpc, endpoint_only=True)
    assert str(error.value) == (
        "Test/Network: vpc is an existing VPC, so endpoint_only cannot also be given (they shape a new VPC)"
    )


def test_unknown_placement_az_lookup_is_a_clear_error(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    with pytest.raises(ConfigurationError, match="availability_zone 'us-east-1f' has no private subnet"):
        network.placement_subnet("us-east-1f")


@gated_stack("network-nat")
def _gated_network_with_nat(stack: cdk.Stack) -> None:
    TrainingNetwork(stack, "Network", availability_zones=AZS)


@gated_stack("network-endpoint-only")
def _gated_endpoint_only_network(stack: cdk.Stack) -> None:
    TrainingNetwork(stack, "Network", availability_zones=AZS, endpoint_only=True)


@pytest.mark.parametrize("name", ["network-nat", "network-endpoint-only"])
def test_network_passes_the_gates(gated_stacks: GatedStacks, name: str) -> None:
    gated_stacks.get(name).assert_clean()


def _flow_log_group(stack: cdk.Stack, network: TrainingNetwork) -> dict[str, Any]:
    resources = Template.from_stack(stack).to_json()["Resources"]
    group: dict[str, Any] = resources[stack.get_logical_id(network.flow_log_group.node.default_child)]
    return group


def test_flow_logs_take_an_opt_in_kms_key_that_cloudwatch_logs_may_use(stack: cdk.Stack) -> None:
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    network = TrainingNetwork(stack, "Network", availability_zones=AZS, flow_logs_encryption_key=key)
    group = _flow_log_group(stack, network)
    assert group["Properties"]["KmsKeyId"] == stack.resolve(key.key_arn)
    assert "checkov" not in group.get("Metadata", {})  # encrypted: nothing to explain
    (key_resource,) = Template.from_stack(stack).find_resources("AWS::KMS::Key").values()
    principals = [s["Principal"] for s in key_resource["Properties"]["KeyPolicy"]["Statement"]]
    logs_in_region = {"Fn::Join": ["", ["logs.us-east-1.", {"Ref": "AWS::URLSuffix"}]]}
    assert {"Service": logs_in_region} in principals


def test_flow_logs_without_a_key_say_why_to_checkov(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    group = _flow_log_group(stack, network)
    assert "KmsKeyId" not in group["Properties"]
    (skip,) = group["Metadata"]["checkov"]["skip"]
    assert skip["id"] == "CKV_AWS_158" and "opt-in" in skip["comment"]


def test_retain_keeps_the_vpc_and_one_subnet(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    network.retain(network.placement_subnet())
    resources = Template.from_stack(stack).to_json()["Resources"]
    kept = {lid for lid, r in resources.items() if r.get("DeletionPolicy") == "Retain"}
    assert kept >= {
        stack.get_logical_id(network.vpc.node.default_child),
        stack.get_logical_id(network.placement_subnet().node.default_child),
    }
    assert not any(resources[lid]["Type"] in ("AWS::EC2::NatGateway", "AWS::EC2::EIP") for lid in kept)
    assert sum(resources[lid]["Type"] == "AWS::EC2::Subnet" for lid in kept) == 1


SUBNET_IDS = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]


def _adopted(stack: cdk.Stack, subnets: str) -> ec2.IVpc:
    """A VPC adopted by its ids, its two subnets given as ``subnets`` (private_subnet_ids, ...)."""
    return ec2.Vpc.from_vpc_attributes(
        stack, "Adopted", vpc_id="vpc-0123456789abcdef0", availability_zones=AZS, **{subnets: SUBNET_IDS}
    )


def test_retain_leaves_an_adopted_vpc_alone(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", vpc=_adopted(stack, "private_subnet_ids"))
    network.retain(network.placement_subnet())  # not ours to keep or delete: no error, no change
    assert not [
        r for r in Template.from_stack(stack).to_json()["Resources"].values() if r.get("DeletionPolicy")
    ]


def test_retain_leaves_another_stacks_vpc_alone() -> None:
    """An ``ec2.Vpc`` object adopted from its owner's stack is not this network's to keep either."""
    layout = StorageAndCluster()  # its network owns a VPC in the storage stack
    adopter = TrainingNetwork(layout.cluster, "Adopter", vpc=layout.network.vpc)
    adopter.retain(adopter.placement_subnet())
    owned = Template.from_stack(layout.storage).to_json()["Resources"]
    assert [
        lid for lid, r in owned.items() if r["Type"].startswith("AWS::EC2::") and r.get("DeletionPolicy")
    ] == []


def test_an_adopted_vpc_with_isolated_subnets_only_places_compute_there(stack: cdk.Stack) -> None:
    vpc = _adopted(stack, "isolated_subnet_ids")
    network = TrainingNetwork(stack, "Network", vpc=vpc, placement_availability_zone=AZS[1])
    assert [s.subnet_id for s in network.private_subnets] == SUBNET_IDS
    assert network.placement_subnet().subnet_id == "subnet-0123456789abcdef1"


@pytest.mark.parametrize("direction", ["allow_from", "allow_to"])
def test_rules_between_the_network_and_a_cluster_stack_land_in_the_cluster_stack(direction: str) -> None:
    layout = StorageAndCluster()
    getattr(layout.network.connections, direction)(layout.client, ec2.Port.tcp(22))

    for kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
        Template.from_stack(layout.cluster).resource_count_is(kind, 1)
    layout.app.synth()  # no dependency cycle: the network's stack depends on no cluster


def test_only_this_account_s_flow_logs_may_assume_the_delivery_role(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    template = Template.from_stack(stack).to_json()
    roles = {k: v for k, v in template["Resources"].items() if v["Type"] == "AWS::IAM::Role"}
    (document,) = [
        r["Properties"]["AssumeRolePolicyDocument"]
        for r in roles.values()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": "vpc-flow-logs.amazonaws.com"}
    ]
    assert document["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "vpc-flow-logs.amazonaws.com"},
            "Condition": {
                "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                "ArnLike": {
                    "aws:SourceArn": {
                        "Fn::Join": [
                            "",
                            ["arn:aws:ec2:us-east-1:", {"Ref": "AWS::AccountId"}, ":vpc-flow-log/*"],
                        ]
                    }
                },
            },
        }
    ]
    assert network.flow_log_group is not None
