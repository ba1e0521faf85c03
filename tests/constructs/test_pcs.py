from __future__ import annotations

import inspect
import json
import os
import shutil
import stat
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from training_clusters.catalog import all_instance_types
from training_clusters.constructs.pcs.cluster import (
    INSTANCE_ROLE_PATH,
    MIME_BOUNDARY,
    ROOT_DEVICE_LOOKUP_TYPE,
    SLURMCTLD_PORT,
    SLURMD_PORT,
    SLURMDBD_PORT,
    SRUN_PORTS,
    PcsCluster,
    PcsComputeNodeGroup,
    PcsLoginNodes,
    PcsQueue,
    imds_guard_boothook,
    lustre_mount_script,
    node_user_data,
)
from training_clusters.model.capacity import Capacity
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import PcsClusterSize, SlurmAccounting, SlurmVersion

from ..assertions import (
    Rule,
    all_traffic,
    aws_managed,
    egress,
    ingress,
    logical_id,
    managed_policy_arns,
    policy_statements,
    security_group_rules,
    text,
    values_of,
)
from ..conftest import GatedStacks, gated_stack
from .parts import SharedLayer
from .test_session_manager import EVERYTHING_FINDING as SESSION_CHANNELS_FINDING
from .test_session_manager import EXPECTED as SESSION_MANAGER_STATEMENTS
from .test_session_manager import INSTANCES_FINDING as SESSION_AGENT_FINDING
from .test_session_manager import acknowledged_rules

C5N = PcsComputeNodeGroup(name="compute", instance_type="c5n.9xlarge", max_count=2)
P5 = PcsComputeNodeGroup(name="gpu", instance_type="p5.48xlarge", max_count=4)
CPU = PcsComputeNodeGroup(name="cpu", instance_type="m5.xlarge", max_count=4)
EFA_TYPES = [t for t in all_instance_types() if t.efa_supported]
SSM_AMI = "/training-clusters/pcs/ami"


class Parts(SharedLayer):
    """The shared layer and the PCS cluster under test."""

    def cluster(self, **props: Any) -> PcsCluster:
        """A cluster like the pcs-c5n environment's; ``props`` override it."""
        defaults: dict[str, Any] = {
            "cluster_name": "training",
            "vpc": self.network.vpc,
            "subnet": self.network.placement_subnet(),
            "compute_node_groups": [C5N],
            "placement_group": self.placement,
            "efa_security_group": self.network.efa_security_group,
            "file_system": self.fsx,
            "mount_dir": "/shared",
            "ami_ssm_parameter": SSM_AMI,
        }
        return PcsCluster(self.stack, "Pcs", **{**defaults, **props})


@pytest.fixture
def parts(stack: cdk.Stack) -> Parts:
    return Parts(stack)


def _template(cluster: PcsCluster) -> Template:
    return Template.from_stack(cdk.Stack.of(cluster))


def _resolve(cluster: PcsCluster, value: Any) -> Any:
    return cdk.Stack.of(cluster).resolve(value)


def _launch_template_data(cluster: PcsCluster, group: str) -> dict[str, Any]:
    template = cluster.launch_templates[group]
    logical_id = cdk.Stack.of(cluster).get_logical_id(template)
    data: dict[str, Any] = _template(cluster).to_json()["Resources"][logical_id]["Properties"][
        "LaunchTemplateData"
    ]
    return data


# --------------------------------------------------------------------------------------------------
# the cluster


def test_cluster_runs_the_chosen_slurm_with_accounting_idle_time_and_custom_settings(parts: Parts) -> None:
    cluster = parts.cluster(
        size=PcsClusterSize.MEDIUM,
        slurm_version="24.11",
        accounting=SlurmAccounting.STANDARD,
        scale_down_idle_time_seconds=1800,
        slurm_custom_settings={"Prolog": "/etc/slurm/prolog.sh"},
    )
    _template(cluster).has_resource_properties(
        "AWS::PCS::Cluster",
        {
            "Name": "training",
            "Size": "MEDIUM",
            "Scheduler": {"Type": "SLURM", "Version": "24.11"},
            "Networking": {
                "SubnetIds": [_resolve(cluster, parts.network.placement_subnet().subnet_id)],
                "SecurityGroupIds": [_resolve(cluster, cluster.security_group.security_group_id)],
            },
            "SlurmConfiguration": {
                "Accounting": {"Mode": "STANDARD"},
                "ScaleDownIdleTimeInSeconds": 1800,
                "SlurmCustomSettings": [
                    {"ParameterName": "Prolog", "ParameterValue": "/etc/slurm/prolog.sh"}
                ],
            },
        },
    )


def docstring_example(cls: type) -> str:
    """The indented block after ``Example::`` in ``cls``'s docstring, dedented."""
    doc = inspect.getdoc(cls) or ""
    block = doc.split("Example::\n\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines))


def test_the_docstring_example_builds_a_cluster(parts: Parts) -> None:
    """Issue 24, item 5: the example named a node group ``p5``, which the 3-25 character rule refuses."""
    namespace: dict[str, Any] = {
        "self": parts.stack,
        "network": parts.network,
        "placement": parts.placement,
        "fsx": parts.fsx,
        "PcsCluster": PcsCluster,
        "PcsComputeNodeGroup": PcsComputeNodeGroup,
    }
    exec(docstring_example(PcsCluster), namespace)
    cluster: PcsCluster = namespace["cluster"]
    assert list(cluster.node_groups) == ["p5-nodes", "login"]


def test_defaults_are_a_small_cluster_on_slurm_25_11_without_accounting(parts: Parts) -> None:
    cluster = parts.cluster()
    _template(cluster).has_resource_properties(
        "AWS::PCS::Cluster",
        {
            "Size": "SMALL",
            "Scheduler": {"Version": SlurmVersion.V25_11.value},
            "SlurmConfiguration": {"Accounting": {"Mode": "NONE"}, "ScaleDownIdleTimeInSeconds": 600},
        },
    )


# --------------------------------------------------------------------------------------------------
# node groups and launch templates


@gated_stack("pcs-every-efa-type")
def _gated_pcs(stack: cdk.Stack) -> None:
    """A cluster with a compute node group per catalogued EFA type, a spot CPU group and login nodes."""
    parts = Parts(stack)
    groups = [
        PcsComputeNodeGroup(name=_group_name(t.name), instance_type=t.name, max_count=2) for t in EFA_TYPES
    ]
    groups.append(PcsComputeNodeGroup(name="cpu-spot", instance_type="m5.xlarge", capacity=Capacity.spot()))
    cluster = parts.cluster(
        compute_node_groups=groups,
        size=PcsClusterSize.MEDIUM,
        accounting=SlurmAccounting.STANDARD,
        login_nodes=PcsLoginNodes(instance_type="m5.xlarge", count=2),
    )
    parts.fsx.allow_clients_from(cluster)


def _group_name(instance_type: str) -> str:
    return "g-" + instance_type.replace(".", "-")


@pytest.fixture(scope="module")
def gated(gated_stacks: GatedStacks) -> dict[str, Any]:
    return gated_stacks.template("pcs-every-efa-type")


def test_pcs_cluster_passes_the_gates(gated_stacks: GatedStacks) -> None:
    gated_stacks.get("pcs-every-efa-type").assert_clean()


def _templates_by_group(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each node group's name -> the LaunchTemplateData of its launch template."""
    resources = template["Resources"]
    result = {}
    for resource in resources.values():
        if resource["Type"] == "AWS::PCS::ComputeNodeGroup":
            props = resource["Properties"]
            launch_template = resources[props["CustomLaunchTemplate"]["TemplateId"]["Ref"]]
            result[props["Name"]] = launch_template["Properties"]["LaunchTemplateData"]
    return result


@pytest.mark.parametrize("instance", EFA_TYPES, ids=[t.name for t in EFA_TYPES])
def test_one_efa_interface_per_network_card_each_with_node_and_efa_groups(
    gated: dict[str, Any], instance: Any
) -> None:
    data = _templates_by_group(gated)[_group_name(instance.name)]
    interfaces = data["NetworkInterfaces"]
    expected = min(instance.max_efa_interfaces, instance.max_network_cards)
    assert len(interfaces) == expected
    assert [i["NetworkCardIndex"] for i in interfaces] == list(range(expected))
    assert [i["DeviceIndex"] for i in interfaces] == [0] + [1] * (expected - 1)
    assert {i["InterfaceType"] for i in interfaces} == {"efa"}
    groups = {json.dumps(i["Groups"], sort_keys=True) for i in interfaces}
    assert len(groups) == 1 and len(interfaces[0]["Groups"]) == 2
    assert "SecurityGroupIds" not in data  # never at template level once interfaces are declared
    assert "GroupName" in data["Placement"]
    assert "InstanceType" not in data  # PCS launches the node group's instance_configs type


def test_efa_interface_counts_match_the_catalogue(parts: Parts) -> None:
    cluster = parts.cluster(compute_node_groups=[P5, C5N, CPU])
    assert cluster.efa_interfaces == {"gpu": 32, "compute": 1}


def test_efa_interfaces_can_be_fewer_than_the_maximum(parts: Parts) -> None:
    group = PcsComputeNodeGroup(name="gpu", instance_type="p5.48xlarge", efa_interfaces=4)
    cluster = parts.cluster(compute_node_groups=[group])
    assert len(_launch_template_data(cluster, "gpu")["NetworkInterfaces"]) == 4


def test_nodes_without_efa_have_one_private_interface_and_no_placement_group(gated: dict[str, Any]) -> None:
    by_group = _templates_by_group(gated)
    for name in ("cpu-spot", "login"):
        data = by_group[name]
        [interface] = data["NetworkInterfaces"]
        assert interface["AssociatePublicIpAddress"] is False
        assert interface["DeviceIndex"] == 0 and "InterfaceType" not in interface
        assert len(interface["Groups"]) == 1
        assert "Placement" not in data


def test_no_node_ever_gets_a_public_ip(gated: dict[str, Any]) -> None:
    public_ip = values_of(gated, "AssociatePublicIpAddress")
    # the launch template has interfaces, each saying False: not True, "true", nor a condition
    assert public_ip and all(value is False for value in public_ip)
    for resource in gated["Resources"].values():
        if resource["Type"] == "AWS::EC2::Subnet":
            assert resource["Properties"]["MapPublicIpOnLaunch"] is False


def test_every_launch_template_requires_imdsv2_and_encrypts_its_root_volume(gated: dict[str, Any]) -> None:
    by_group = _templates_by_group(gated)
    assert len(by_group) == len(EFA_TYPES) + 2
    for name, data in by_group.items():
        assert data["MetadataOptions"] == {
            "HttpEndpoint": "enabled",
            "HttpTokens": "required",
            "HttpPutResponseHopLimit": 1,
        }, name
        assert data["BlockDeviceMappings"][0]["Ebs"]["Encrypted"] is True, name


def test_node_groups_scale_buy_and_launch_as_asked(gated: dict[str, Any]) -> None:
    groups = {
        r["Properties"]["Name"]: r["Properties"]
        for r in gated["Resources"].values()
        if r["Type"] == "AWS::PCS::ComputeNodeGroup"
    }
    assert groups["cpu-spot"]["PurchaseOption"] == "SPOT"
    assert groups["g-p5-48xlarge"]["PurchaseOption"] == "ONDEMAND"
    assert groups["g-p5-48xlarge"]["InstanceConfigs"] == [{"InstanceType": "p5.48xlarge"}]
    assert groups["g-p5-48xlarge"]["ScalingConfiguration"] == {"MinInstanceCount": 0, "MaxInstanceCount": 2}
    # login nodes are static: always the same count, in no queue
    assert groups["login"]["ScalingConfiguration"] == {"MinInstanceCount": 2, "MaxInstanceCount": 2}
    login_id = next(
        logical_id
        for logical_id, r in gated["Resources"].items()
        if r["Type"] == "AWS::PCS::ComputeNodeGroup" and r["Properties"]["Name"] == "login"
    )
    queued = {
        text(configuration["ComputeNodeGroupId"])
        for r in gated["Resources"].values()
        if r["Type"] == "AWS::PCS::Queue"
        for configuration in r["Properties"]["ComputeNodeGroupConfigurations"]
    }
    assert queued and f"${{{login_id}.Id}}" not in queued


def test_capacity_reservation_goes_into_the_launch_template(parts: Parts) -> None:
    group = PcsComputeNodeGroup(
        name="gpu", instance_type="p5.48xlarge", capacity=Capacity.reservation("cr-0123456789abcdef0")
    )
    cluster = parts.cluster(compute_node_groups=[group])
    data = _launch_template_data(cluster, "gpu")
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
    }


RESERVATION_ID = "cr-0123456789abcdef0"
RESOURCE_GROUP = "arn:aws:resource-groups:us-east-1:111122223333:group/p5-reservations"
TARGETED = {"CapacityReservationTarget": {"CapacityReservationId": RESERVATION_ID}}

#: form -> (PurchaseOption, CapacityReservationSpecification, InstanceMarketOptions, keeps the placement group)
CAPACITY_FORMS: dict[str, tuple[Capacity, str, Any, Any, bool]] = {
    "on-demand": (Capacity.on_demand(), "ONDEMAND", None, None, True),
    "spot": (Capacity.spot(), "SPOT", None, None, True),
    "reservation": (Capacity.reservation(RESERVATION_ID), "ONDEMAND", TARGETED, None, False),
    "reservation in the placement group": (
        Capacity.reservation(RESERVATION_ID, in_placement_group=True),
        "ONDEMAND",
        TARGETED,
        None,
        True,
    ),
    "open reservation": (
        Capacity.reservation(RESERVATION_ID, targeted=False),
        "ONDEMAND",
        {"CapacityReservationPreference": "open"},
        None,
        False,
    ),
    "resource group": (
        Capacity.reservation(resource_group_arn=RESOURCE_GROUP),
        "ONDEMAND",
        {"CapacityReservationTarget": {"CapacityReservationResourceGroupArn": RESOURCE_GROUP}},
        None,
        False,
    ),
    "capacity block": (
        Capacity.capacity_block(RESERVATION_ID),
        "CAPACITY_BLOCK",
        TARGETED,
        {"MarketType": "capacity-block"},
        False,
    ),
}


@pytest.mark.parametrize("form", sorted(CAPACITY_FORMS))
def test_each_capacity_form_sets_the_purchase_option_and_the_launch_template(parts: Parts, form: str) -> None:
    capacity, purchase_option, specification, market, keeps_placement = CAPACITY_FORMS[form]
    group = PcsComputeNodeGroup(name="gpu", instance_type="p5.48xlarge", capacity=capacity)
    cluster = parts.cluster(compute_node_groups=[group])
    assert _resolve(cluster, cluster.node_groups["gpu"].purchase_option) == purchase_option
    data = _launch_template_data(cluster, "gpu")
    assert data.get("CapacityReservationSpecification") == specification
    assert data.get("InstanceMarketOptions") == market
    assert ("Placement" in data) is keeps_placement, data.get("Placement")
    # login nodes are On-Demand whatever the compute groups use
    assert _resolve(cluster, cluster.login_node_group.purchase_option) == "ONDEMAND"  # type: ignore[union-attr]


@pytest.mark.parametrize("removed", ["purchase_option", "capacity_reservation_id"])
def test_the_removed_capacity_props_are_a_type_error(removed: str) -> None:
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{removed}'"):
        PcsComputeNodeGroup(name="gpu", instance_type="p5.48xlarge", **{removed: "SPOT"})


# --------------------------------------------------------------------------------------------------
# AMI


def test_ami_from_ssm_is_a_parameter_cloudformation_resolves(parts: Parts) -> None:
    cluster = parts.cluster()
    template = _template(cluster).to_json()
    parameters = [p for p in template["Parameters"].values() if p.get("Default") == SSM_AMI]
    assert parameters == [{"Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>", "Default": SSM_AMI}]
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::PCS::ComputeNodeGroup":
            assert "Ref" in resource["Properties"]["AmiId"]


def test_explicit_ami_id_is_used_as_given(parts: Parts) -> None:
    cluster = parts.cluster(ami_ssm_parameter=None, ami_id="ami-0123456789abcdef0")
    template = _template(cluster)
    template.all_resources_properties("AWS::PCS::ComputeNodeGroup", {"AmiId": "ami-0123456789abcdef0"})
    assert not [p for p in template.to_json().get("Parameters", {}).values() if p.get("Default") == SSM_AMI]


# --------------------------------------------------------------------------------------------------
# the root volume, on the AMI's own root device


def joined_text(value: Any) -> str:
    """A CloudFormation string (plain or ``Fn::Join``), each ``Ref`` shown as ``<logical id>``."""
    if isinstance(value, str):
        return value
    (parts,) = value.values()
    return "".join(p if isinstance(p, str) else f"<{p['Ref']}>" for p in parts[1])


def _root_device_lookups(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == ROOT_DEVICE_LOOKUP_TYPE}


def _root_volume(device: Any, size_gib: int) -> list[dict[str, Any]]:
    """The one block device mapping every launch template must hold."""
    return [
        {
            "DeviceName": device,
            "Ebs": {
                "DeleteOnTermination": True,
                "Encrypted": True,
                "VolumeSize": size_gib,
                "VolumeType": "gp3",
            },
        }
    ]


def _ami_parameter_id(template: dict[str, Any]) -> str:
    (logical_id,) = [k for k, p in template["Parameters"].items() if p.get("Default") == SSM_AMI]
    return logical_id


def test_the_root_volume_goes_on_the_root_device_the_ami_reports_when_the_stack_deploys(parts: Parts) -> None:
    cluster = parts.cluster(compute_node_groups=[C5N, CPU])
    template = _template(cluster).to_json()
    ami = _ami_parameter_id(template)
    [(lookup_id, lookup)] = _root_device_lookups(template).items()
    call = {
        "service": "EC2",
        "action": "describeImages",
        "parameters": {"ImageIds": [f"<{ami}>"]},
        "physicalResourceId": {"id": f"<{ami}>"},
        "outputPaths": ["Images.0.RootDeviceName"],
    }
    assert json.loads(joined_text(lookup["Properties"]["Create"])) == call
    assert json.loads(joined_text(lookup["Properties"]["Update"])) == call
    assert "Delete" not in lookup["Properties"]
    device = {"Fn::GetAtt": [lookup_id, "Images.0.RootDeviceName"]}
    assert _resolve(cluster, cluster.root_device_name) == device
    for group, size in (("compute", 200), ("cpu", 200), ("login", 100)):
        assert _launch_template_data(cluster, group)["BlockDeviceMappings"] == _root_volume(device, size), (
            group
        )


def test_the_lookup_may_describe_images_and_nothing_else(parts: Parts) -> None:
    cluster = parts.cluster()
    stack = cdk.Stack.of(cluster)
    template = _template(cluster).to_json()
    [lookup] = _root_device_lookups(template).values()
    policy = cluster.node.find_child("RootDeviceLookup").node.find_child("CustomResourcePolicy")
    policy_id = stack.get_logical_id(policy.node.default_child)  # type: ignore[arg-type]
    # DescribeImages takes no resource-level permissions: "*" is the only resource it accepts
    assert template["Resources"][policy_id]["Properties"]["PolicyDocument"]["Statement"] == [
        {"Action": "ec2:DescribeImages", "Effect": "Allow", "Resource": "*"}
    ]
    assert lookup["DependsOn"] == [policy_id]  # the call waits for its permission


def test_an_explicit_ami_id_is_looked_up_as_given(parts: Parts) -> None:
    cluster = parts.cluster(ami_ssm_parameter=None, ami_id="ami-0123456789abcdef0")
    [lookup] = _root_device_lookups(_template(cluster).to_json()).values()
    call = json.loads(joined_text(lookup["Properties"]["Create"]))
    assert call["parameters"] == {"ImageIds": ["ami-0123456789abcdef0"]}


@pytest.mark.parametrize("device", ["/dev/sda1", "/dev/xvda"])
def test_a_given_root_device_name_is_used_as_is_and_nothing_is_looked_up(parts: Parts, device: str) -> None:
    cluster = parts.cluster(compute_node_groups=[C5N, CPU], root_device_name=device)
    assert cluster.root_device_name == device
    for group, size in (("compute", 200), ("cpu", 200), ("login", 100)):
        assert _launch_template_data(cluster, group)["BlockDeviceMappings"] == _root_volume(device, size), (
            group
        )
    assert _root_device_lookups(_template(cluster).to_json()) == {}
    # aws-cdk-lib's AwsCustomResource runs one function per stack, of this id: none was made
    assert [
        c.node.id for c in cdk.Stack.of(cluster).node.children if c.node.id.startswith("AWS679f53fa")
    ] == []


# --------------------------------------------------------------------------------------------------
# identity


def test_instance_profile_role_is_under_aws_pcs_path_and_registers_with_this_cluster_only(
    parts: Parts,
) -> None:
    cluster = parts.cluster()
    template = _template(cluster)
    role_id = cdk.Stack.of(cluster).get_logical_id(cluster.role.node.default_child)  # type: ignore[arg-type]
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "Path": INSTANCE_ROLE_PATH,
            "AssumeRolePolicyDocument": {
                "Statement": [Match.object_like({"Principal": {"Service": "ec2.amazonaws.com"}})]
            },
            "ManagedPolicyArns": [_resolve(cluster, cluster.session_manager_policy.managed_policy_arn)],
        },
    )
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": "pcs:RegisterComputeNodeGroupInstance",
                        "Effect": "Allow",
                        "Resource": _resolve(cluster, cluster.cluster_arn),
                    }
                ]
            },
            "Roles": [{"Ref": role_id}],
        },
    )
    template.has_resource_properties("AWS::IAM::InstanceProfile", {"Roles": [{"Ref": role_id}]})
    template.all_resources_properties(
        "AWS::PCS::ComputeNodeGroup",
        {"IamInstanceProfileArn": _resolve(cluster, cluster.instance_profile.instance_profile_arn)},
    )


def test_nodes_reach_session_manager_through_our_policy_and_read_no_parameter(parts: Parts) -> None:
    cluster = parts.cluster()
    stack = cdk.Stack.of(cluster)
    template = _template(cluster).to_json()
    (role,) = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Role" and r["Properties"].get("Path") == INSTANCE_ROLE_PATH
    ]
    # the role's one managed policy is ours (no AWS-managed policy, so no AmazonSSMManagedInstanceCore)
    policy_id = stack.get_logical_id(cluster.session_manager_policy.node.default_child)  # type: ignore[arg-type]
    assert role["Properties"]["ManagedPolicyArns"] == [{"Ref": policy_id}]
    assert policy_statements(template, policy_id) == SESSION_MANAGER_STATEMENTS
    granted = {
        action
        for resource in template["Resources"].values()
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }
    assert {a for a in granted if a.startswith("ssm:")} == {"ssm:UpdateInstanceInformation"}


def test_the_gated_cluster_acknowledges_no_managed_policy_and_only_the_session_wildcards_on_its_policy(
    gated_stacks: GatedStacks,
) -> None:
    assembly = gated_stacks.get("pcs-every-efa-type").assembly
    assert assembly is not None
    acknowledged = acknowledged_rules(Path(assembly.directory), "Test")
    cluster_rules = {
        rule for path, rules in acknowledged.items() if path.startswith("/Test/Pcs/") for rule in rules
    }
    assert not {rule for rule in cluster_rules if "IAM4" in rule}  # no AWS-managed policy left to explain
    assert acknowledged["/Test/Pcs/SessionManagerPolicy"] == {SESSION_CHANNELS_FINDING, SESSION_AGENT_FINDING}
    template = gated_stacks.template("pcs-every-efa-type")
    roles = [k for k, v in template["Resources"].items() if v["Type"] == "AWS::IAM::Role"]
    assert all(
        aws_managed("AmazonSSMManagedInstanceCore") not in managed_policy_arns(template, r) for r in roles
    )


# --------------------------------------------------------------------------------------------------
# network


def _slurm_rules(controller: str, nodes: str, *, accounting: bool) -> dict[str, set[Rule]]:
    """Each group's rules: Slurm between controller and nodes, all traffic among nodes, HTTPS out."""
    to_controller = [SLURMCTLD_PORT, *([SLURMDBD_PORT] if accounting else [])]
    to_nodes = [SLURMD_PORT, SRUN_PORTS]
    return {
        controller: {
            *(ingress(nodes, port) for port in to_controller),
            *(egress(nodes, port) for port in to_nodes),
        },
        nodes: {
            all_traffic("ingress", nodes),
            all_traffic("egress", nodes),
            egress("0.0.0.0/0", 443),
            *(egress(controller, port) for port in to_controller),
            *(ingress(controller, port) for port in to_nodes),
        },
    }


@pytest.mark.parametrize("accounting", ["STANDARD", None])
def test_controller_and_nodes_talk_slurm_only_and_nothing_comes_from_an_address_range(
    parts: Parts, accounting: str | None
) -> None:
    """Every rule of both groups, exact: slurmdbd (6819) only with accounting, no CIDR source anywhere."""
    cluster = parts.cluster(**({"accounting": accounting} if accounting else {}))
    template = _template(cluster).to_json()
    controller, nodes = logical_id(cluster.security_group), logical_id(cluster.node_security_group)
    expected = _slurm_rules(controller, nodes, accounting=accounting is not None)
    assert {group: security_group_rules(template, group) for group in expected} == expected


def test_nodes_are_lustre_clients_through_connections(parts: Parts) -> None:
    cluster = parts.cluster()
    parts.fsx.allow_clients_from(cluster)
    template = _template(cluster).to_json()
    fsx, nodes = logical_id(parts.fsx.security_group), logical_id(cluster.node_security_group)
    lustre = [988, (1018, 1023)]
    controller = logical_id(cluster.security_group)
    assert security_group_rules(template, nodes) == _slurm_rules(controller, nodes, accounting=False)[
        nodes
    ] | {rule(fsx, ports) for rule in (ingress, egress) for ports in lustre}
    assert security_group_rules(template, fsx) == {
        ingress(fsx, (988, 1023)),  # aws-cdk-lib's LustreFileSystem opens its own range to itself
        *(rule(peer, ports) for rule in (ingress, egress) for peer in (fsx, nodes) for ports in lustre),
    }


# --------------------------------------------------------------------------------------------------
# shared storage through user data


def _user_data(cluster: PcsCluster, group: str) -> str:
    """The launch template's user data with tokens shown as ``<Logical.Attribute>``."""
    value = _launch_template_data(cluster, group)["UserData"]["Fn::Base64"]
    if isinstance(value, str):
        return value
    parts = value["Fn::Join"][1]
    return "".join(
        p
        if isinstance(p, str)
        else f"<{'.'.join(p['Fn::GetAtt'])}>"
        if "Fn::GetAtt" in p
        else f"<{p['Ref']}>"
        for p in parts
    )


def test_every_node_mounts_the_file_system_from_mime_multipart_user_data(parts: Parts) -> None:
    cluster = parts.cluster(compute_node_groups=[C5N, CPU])
    fsx_id = cdk.Stack.of(cluster).get_logical_id(parts.fsx.file_system.node.default_child)  # type: ignore[union-attr, arg-type]
    for group in ("compute", "cpu", "login"):
        text = _user_data(cluster, group)
        assert text.startswith(
            f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\nMIME-Version: 1.0\n\n'
            f'--{MIME_BOUNDARY}\nContent-Type: text/cloud-boothook; charset="us-ascii"\n\n'
            f"{imds_guard_boothook()}\n"
            f'--{MIME_BOUNDARY}\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n#!/bin/bash\n'
        )
        assert text.endswith(f"\n--{MIME_BOUNDARY}--\n")
        assert f"device='<{fsx_id}>.fsx.us-east-1.<AWS::URLSuffix>@tcp:/<{fsx_id}.LustreMountName>'" in text
        assert "mount_dir='/shared'" in text
        assert "mount -a -t lustre" in text


def test_without_a_file_system_the_user_data_is_the_metadata_guard_alone(parts: Parts) -> None:
    cluster = parts.cluster(file_system=None)
    for group in ("compute", "login"):
        assert _user_data(cluster, group) == (
            f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\nMIME-Version: 1.0\n\n'
            f'--{MIME_BOUNDARY}\nContent-Type: text/cloud-boothook; charset="us-ascii"\n\n'
            f"{imds_guard_boothook()}\n--{MIME_BOUNDARY}--\n"
        )


def _run_mount_script(
    tmp_path: Path, device: str = "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd", *, never_mounts: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the shell part with ``mount``/``mountpoint`` stubbed and /etc/fstab redirected into ``tmp_path``:
    the first ``mount -a`` fails and the second mounts, or with ``never_mounts`` every one fails."""
    mount_dir = tmp_path / "shared"
    script = lustre_mount_script(device, str(mount_dir))
    fstab = tmp_path / "fstab"
    fstab.touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    mounted = tmp_path / "mounted"
    stubs = {
        # the first `mount -a` fails (network not ready), the second succeeds
        "mount": f"if [ -f {tmp_path}/tried ]; then touch {mounted}; else touch {tmp_path}/tried; exit 32; fi",
        "mountpoint": f"[ -f {mounted} ]",
        "mount.lustre": "exit 0",
        "sleep": "exit 0",
    }
    if never_mounts:
        stubs["mount"] = 'echo "mount.lustre: mount failed: Input/output error" >&2; exit 32'
    for name, body in stubs.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/bash\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "mount.sh").write_text(script.replace("/etc/fstab", str(fstab)))
    environment = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", str(tmp_path / "mount.sh")],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
        cwd=tmp_path,
    )


def test_mount_script_retries_and_writes_the_fstab_line_once(tmp_path: Path) -> None:
    first = _run_mount_script(tmp_path)
    assert first.returncode == 0, first.stderr
    assert "retrying" in first.stderr
    second = _run_mount_script(tmp_path)
    assert second.returncode == 0, second.stderr
    lines = (tmp_path / "fstab").read_text().splitlines()
    assert lines == [
        f"fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd {tmp_path / 'shared'} lustre defaults,relatime,flock,_netdev 0 0"
    ]


def test_mount_script_fails_the_node_when_the_file_system_never_mounts(tmp_path: Path) -> None:
    """The node must not start jobs without its storage: after its ten attempts the part exits 1 with one line
    (a part that swallowed the failure would exit 0)."""
    device = "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd"
    run = _run_mount_script(tmp_path, device, never_mounts=True)
    assert run.returncode == 1, run.stderr
    lines = run.stderr.rstrip().splitlines()
    assert lines[-1] == f"could not mount {device} at {tmp_path / 'shared'}"
    assert lines.count("mount.lustre: mount failed: Input/output error") == 10
    assert not (tmp_path / "shared").stat().st_mode & 0o002  # the chmod 1777 after a mount never ran


def test_the_device_is_one_quoted_word_of_the_mount_script(tmp_path: Path) -> None:
    # Defence in depth: SharedLustre refuses such a name, and a name that slipped through stays a name.
    device = "fs-1.fsx.us-east-1.amazonaws.com';touch injected;'@tcp:/abcd"
    text = node_user_data(device, "/fsx")
    assert "device='fs-1.fsx.us-east-1.amazonaws.com'\"'\"';touch injected;'\"'\"'@tcp:/abcd'\n" in text
    assert "mount_dir='/fsx'\n" in text
    run = _run_mount_script(tmp_path, device)
    assert run.returncode == 0, run.stderr
    assert not (tmp_path / "injected").exists()
    assert (tmp_path / "fstab").read_text().startswith(f"{device} {tmp_path / 'shared'} lustre ")


# --------------------------------------------------------------------------------------------------
# queues


def _queues(cluster: PcsCluster) -> dict[str, list[str]]:
    """Queue name -> names of its node groups."""
    template = _template(cluster).to_json()["Resources"]
    names = {
        logical_id: r["Properties"]["Name"]
        for logical_id, r in template.items()
        if r["Type"] == "AWS::PCS::ComputeNodeGroup"
    }
    return {
        r["Properties"]["Name"]: [
            names[c["ComputeNodeGroupId"]["Fn::GetAtt"][0]]
            for c in r["Properties"]["ComputeNodeGroupConfigurations"]
        ]
        for r in template.values()
        if r["Type"] == "AWS::PCS::Queue"
    }


def test_each_group_gets_a_queue_of_its_name_by_default(parts: Parts) -> None:
    assert _queues(parts.cluster(compute_node_groups=[C5N, CPU])) == {"compute": ["compute"], "cpu": ["cpu"]}


def test_queues_map_node_groups_as_given(parts: Parts) -> None:
    cluster = parts.cluster(
        compute_node_groups=[C5N, CPU], queues=[PcsQueue(name="all", compute_node_groups=["compute", "cpu"])]
    )
    assert _queues(cluster) == {"all": ["compute", "cpu"]}


def test_login_nodes_can_be_left_out(parts: Parts) -> None:
    cluster = parts.cluster(login_nodes=PcsLoginNodes(count=0))
    assert cluster.login_node_group is None
    assert set(cluster.node_groups) == {"compute"}
    with pytest.raises(ValueError, match="has no login nodes"):
        cluster.login_ssm_command("us-east-1")


# --------------------------------------------------------------------------------------------------
# validation: every message


def _group(**changes: Any) -> list[PcsComputeNodeGroup]:
    base: dict[str, Any] = {"name": "compute", "instance_type": "c5n.9xlarge", "max_count": 2}
    return [PcsComputeNodeGroup(**{**base, **changes})]


BAD_PROPS: list[tuple[str, Callable[[Parts], dict[str, Any]], str]] = [
    (
        "cluster name with underscore",
        lambda p: {"cluster_name": "my_cluster"},
        "Test/Pcs: cluster_name must start with a letter and hold only letters, digits and hyphens, got "
        "'my_cluster'",
    ),
    (
        "cluster name too long",
        lambda p: {"cluster_name": "c" * 41},
        f"Test/Pcs: cluster_name must be 3 to 40 characters long, got '{'c' * 41}' (41)",
    ),
    (
        "no compute node groups",
        lambda p: {"compute_node_groups": []},
        "Test/Pcs: compute_node_groups must hold at least one compute node group",
    ),
    (
        "group name too short",
        lambda p: {"compute_node_groups": _group(name="p5")},
        "Test/Pcs: compute_node_groups[0].name must be 3 to 25 characters long, got 'p5' (2)",
    ),
    (
        "max count zero",
        lambda p: {"compute_node_groups": _group(max_count=0)},
        "Test/Pcs: compute_node_groups[0] max_count must be 1 or more, got 0",
    ),
    (
        "min above max",
        lambda p: {"compute_node_groups": _group(min_count=3)},
        "Test/Pcs: compute_node_groups[0] min_count must lie between 0 and max_count (2), got 3",
    ),
    (
        "root volume too small",
        lambda p: {"compute_node_groups": _group(root_volume_size_gib=4)},
        "Test/Pcs: compute_node_groups[0].root_volume_size_gib must be between 8 and 16384 GiB, got 4",
    ),
    (
        "unknown instance type",
        lambda p: {"compute_node_groups": _group(instance_type="c5n.9xlargeish")},
        "Test/Pcs: compute_node_groups[0].instance_type: ",
    ),
    (
        "efa on a type without it",
        lambda p: {"compute_node_groups": _group(instance_type="m5.xlarge", efa=True)},
        "Test/Pcs: compute_node_groups[0].efa is true, but m5.xlarge has no EFA interface; use an EFA-capable "
        "type or efa: false",
    ),
    (
        "efa interfaces without efa",
        lambda p: {"compute_node_groups": _group(efa=False, efa_interfaces=1)},
        "Test/Pcs: compute_node_groups[0].efa_interfaces applies only with EFA, but c5n.9xlarge in 'compute' "
        "has EFA off",
    ),
    (
        "too many efa interfaces",
        lambda p: {"compute_node_groups": _group(instance_type="p5.48xlarge", efa_interfaces=33)},
        "Test/Pcs: compute_node_groups[0].efa_interfaces must be between 1 and 32 for p5.48xlarge (one per "
        "network card), got 33",
    ),
    (
        "efa without placement group",
        lambda p: {"placement_group": None},
        "Test/Pcs: placement_group is required: a compute node group uses EFA, which needs a cluster placement "
        "group",
    ),
    (
        "efa without efa security group",
        lambda p: {"efa_security_group": None},
        "Test/Pcs: efa_security_group is required: a compute node group uses EFA, which needs a group allowing "
        "all traffic between its members (e.g. network.efa_security_group)",
    ),
    (
        "negative login count",
        lambda p: {"login_nodes": PcsLoginNodes(count=-1)},
        "Test/Pcs: login_nodes.count must be 0 or more, got -1",
    ),
    (
        "login name taken by a group",
        lambda p: {"login_nodes": PcsLoginNodes(name="compute")},
        "Test/Pcs: compute_node_groups names (login_nodes.name included) must be unique, got 'compute' more "
        "than once",
    ),
    (
        "empty queues",
        lambda p: {"queues": []},
        "Test/Pcs: queues must hold at least one queue when given; omit it for one per group",
    ),
    (
        "queue of an unknown group",
        lambda p: {"queues": [PcsQueue(name="all", compute_node_groups=["gpu"])]},
        "Test/Pcs: queues[0].compute_node_groups names 'gpu', which is not a compute node group of the cluster "
        "(compute)",
    ),
    (
        "queue of the login nodes",
        lambda p: {"queues": [PcsQueue(name="all", compute_node_groups=["login"])]},
        "Test/Pcs: queues[0].compute_node_groups names 'login', which is not a compute node group of the "
        "cluster (compute)",
    ),
    (
        "queue without groups",
        lambda p: {"queues": [PcsQueue(name="all", compute_node_groups=[])]},
        "Test/Pcs: queues[0].compute_node_groups must list at least one compute node group",
    ),
    (
        "queue names repeat",
        lambda p: {
            "queues": [
                PcsQueue(name="all", compute_node_groups=["compute"]),
                PcsQueue(name="all", compute_node_groups=["compute"]),
            ]
        },
        "Test/Pcs: queues names must be unique, got 'all' more than once",
    ),
    (
        "too many nodes for the size",
        lambda p: {"compute_node_groups": _group(max_count=32)},
        "Test/Pcs: size is SMALL, which manages at most 32 nodes, but the node groups' max_count (login nodes "
        "included) add up to 33; use size MEDIUM",
    ),
    (
        "idle time zero",
        lambda p: {"scale_down_idle_time_seconds": 0},
        "Test/Pcs: scale_down_idle_time_seconds must be between 1 and 10,000,000 seconds, got 0",
    ),
    (
        "custom setting name",
        lambda p: {"slurm_custom_settings": {"Prolog=x": "y"}},
        "Test/Pcs: slurm_custom_settings must name slurm.conf parameters (a letter, then letters, digits and _), "
        "got 'Prolog=x'",
    ),
    (
        "custom setting value over two lines",
        lambda p: {"slurm_custom_settings": {"Prolog": "a\nb"}},
        "Test/Pcs: slurm_custom_settings must give each parameter a one-line value, got 'a\\nb' for 'Prolog'",
    ),
    (
        "two amis",
        lambda p: {"ami_id": "ami-0123456789abcdef0"},
        "Test/Pcs: ami_id and ami_ssm_parameter both name the AMI (got 'ami-0123456789abcdef0' and "
        f"'{SSM_AMI}'); give one of them",
    ),
    (
        "no ami",
        lambda p: {"ami_ssm_parameter": None},
        "Test/Pcs: ami_id or ami_ssm_parameter is required: PCS launches the AMI you give (one with the PCS "
        "agent, Slurm, the EFA software and the Lustre client, e.g. a PCS sample AMI or one built from it)",
    ),
    (
        "malformed ami",
        lambda p: {"ami_ssm_parameter": None, "ami_id": "ami-123"},
        "Test/Pcs: ami_id must be an AMI id such as ami-0123456789abcdef0, got 'ami-123'",
    ),
    (
        "malformed ssm parameter",
        lambda p: {"ami_ssm_parameter": "pcs ami"},
        "Test/Pcs: ami_ssm_parameter must be an SSM parameter name such as /training-clusters/pcs/ami (letters, "
        "digits, _ . - and / separators), got 'pcs ami'",
    ),
    (
        "root device without /dev/",
        lambda p: {"root_device_name": "sda1"},
        "Test/Pcs: root_device_name must be a device name such as /dev/xvda or /dev/sda1, got 'sda1'",
    ),
    (
        "root device with a space",
        lambda p: {"root_device_name": "/dev/sda 1"},
        "Test/Pcs: root_device_name must be a device name such as /dev/xvda or /dev/sda1, got '/dev/sda 1'",
    ),
    (
        "public subnet",
        lambda p: {"subnet": p.network.vpc.public_subnets[0]},
        "Test/Pcs: subnet is a public subnet; PCS nodes live in private subnets and never get a public IP",
    ),
    (
        "reserved mount dir",
        lambda p: {"mount_dir": "/opt/slurm"},
        "Test/Pcs: mount_dir '/opt/slurm' belongs to the operating system, Slurm or the PCS agent; use e.g. "
        "/fsx or /shared",
    ),
    (
        "mount dir in a system tree",
        lambda p: {"mount_dir": "/var/lib"},
        "Test/Pcs: mount_dir '/var/lib' belongs to the operating system, Slurm or the PCS agent; use e.g. "
        "/fsx or /shared",
    ),
    (
        "relative mount dir",
        lambda p: {"mount_dir": "shared"},
        "Test/Pcs: mount_dir must be an absolute directory such as /fsx, got 'shared'",
    ),
    (
        "wrong slurm version",
        lambda p: {"slurm_version": "23.11"},
        "Test/Pcs: slurm_version must be one of 24.11, 25.05, 25.11, 26.05, got '23.11'",
    ),
    (
        "training plan capacity",
        lambda p: {
            "compute_node_groups": _group(
                capacity=Capacity.training_plan("arn:aws:sagemaker:us-east-1:111122223333:training-plan/plan")
            )
        },
        "Test/Pcs: compute_node_groups[0].capacity training-plan is not supported by AWS PCS; use on-demand or "
        "spot or reservation or capacity-block",
    ),
    (
        "wrong capacity kind",
        lambda p: {"compute_node_groups": _group(capacity=Capacity("reserved"))},  # type: ignore[arg-type]
        "Test/Pcs: compute_node_groups[0].capacity.kind must be one of on-demand, spot, reservation, "
        "capacity-block, training-plan, got 'reserved'",
    ),
]


@pytest.mark.parametrize(("case", "props", "message"), BAD_PROPS, ids=[case for case, _, _ in BAD_PROPS])
def test_bad_props_are_clear_errors(
    parts: Parts, case: str, props: Callable[[Parts], dict[str, Any]], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        parts.cluster(**props(parts))
    if message.endswith(": "):  # the catalogue's long list of types: check the start
        assert str(error.value).startswith(message)
    else:
        assert str(error.value) == message


# -- the metadata guard (issue 40, High 3) ----------------------------------------------------------


def test_the_boothook_carries_the_guard_hyperpod_and_parallelcluster_nodes_run_byte_for_byte() -> None:
    hook = imds_guard_boothook()
    body = hook.split("<<'TC_IMDS_GUARD_END'", 1)[1].split("\n", 1)[1].split("\nTC_IMDS_GUARD_END\n", 1)[0]
    shared = (
        Path(__file__).resolve().parents[2]
        / "training_clusters/node_scripts/shared/training-clusters-imds.sh"
    )
    assert body + "\n" == shared.read_text()
    # EC2 takes at most 16 KB of user data (before base64): the guard and the mount part fit
    assert len(node_user_data("fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd", "/shared").encode()) < 16 * 1024


def _run_boothook(
    tmp_path: Path, stubs: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The boothook with /usr/local/sbin and /dev/console moved into ``tmp_path`` and the commands in ``stubs``
    (name: body) recording their arguments in calls.log; only the stubbed commands and bash's own tools exist."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.log"
    for name, body in stubs.items():
        path = bin_dir / name
        path.write_text(f'#!/bin/bash\necho "{name} $*" >>{calls}\n{body}\n')
        path.chmod(0o755)
    for tool in ("mkdir", "mktemp", "cat", "chmod", "rm", "tee", "bash", "cp"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    sbin = tmp_path / "sbin"
    script = (
        imds_guard_boothook()
        .replace("/usr/local/sbin", str(sbin))
        .replace("/dev/console", str(tmp_path / "console"))
    )
    (tmp_path / "hook").write_text(script)
    done = subprocess.run(
        [shutil.which("bash") or "bash", str(tmp_path / "hook")],
        capture_output=True, text=True, env={"PATH": str(bin_dir)}, check=False, timeout=30,
    )  # fmt: skip
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_the_boothook_installs_iptables_with_dnf_then_the_guard_and_its_unit(tmp_path: Path) -> None:
    installed = tmp_path / "bin" / "iptables"
    done, calls = _run_boothook(
        tmp_path,
        {"dnf": f"printf '#!/bin/bash\\necho \"iptables $*\" >>{tmp_path}/calls.log\\n' >{installed}; chmod 755 {installed}",
         "systemctl": "exit 0"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert calls == [
        "dnf install -y iptables-nft",
        "systemctl daemon-reload",
        "systemctl enable training-clusters-imds.service",
        "systemctl restart training-clusters-imds.service",
    ]
    assert (tmp_path / "sbin" / "training-clusters-imds").stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize(
    ("stubs", "reason", "tried"),
    [
        ({"dnf": "exit 1"}, "dnf could not install iptables-nft", ["dnf install -y iptables-nft"]),
        ({"apt-get": "exit 100"}, "apt-get could not install iptables", ["apt-get install -y iptables"]),
        ({}, "no iptables, and neither dnf nor apt-get to install it", []),
        ({"iptables": "exit 0", "systemctl": '[[ $1 != restart ]]'}, "", None),
    ],
)  # fmt: skip
def test_a_node_whose_guard_cannot_be_put_in_place_powers_off(
    tmp_path: Path, stubs: dict[str, str], reason: str, tried: list[str] | None
) -> None:
    """cloud-init only logs a failing boothook: the node must not run open, so it powers itself off."""
    done, calls = _run_boothook(tmp_path, {"systemctl": "exit 0", **stubs})
    reason = reason or "training-clusters-imds --install failed"
    assert done.returncode == 1
    line = f"training-clusters: {reason} (the metadata guard is not in place): powering off"
    assert done.stderr.splitlines()[-1] == line
    assert (tmp_path / "console").read_text() == line + "\n"
    assert calls[-1] == "systemctl poweroff --no-block"
    if tried is not None:
        assert calls[:-1] == tried
