from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from training_clusters.catalog import AcceleratorKind, all_instance_types
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.common.placement import TrainingPlacementGroup
from training_clusters.constructs.eks.cluster import (
    CONTROL_PLANE_LOGS,
    AccessMode,
    EfaInterfaceType,
    EfaNodegroup,
    GpuEksCluster,
    GpuNodegroup,
)
from training_clusters.gates.summary import stack_metadata
from training_clusters.model.capacity import Capacity
from training_clusters.model.errors import ConfigurationError

from ..assertions import text
from ..conftest import AZS, CDK_CONTEXT, REGION, GatedStacks, GateResult, PinnedStack, gated_stack

EFA_TYPES = [t for t in all_instance_types() if t.efa_supported]
ADMIN = "arn:aws:iam::111122223333:role/Admin"


def _node_id(name: str) -> str:
    return "Efa" + name.replace(".", "").replace("-", "")


@gated_stack("eks-every-efa-type")
def _gated_eks(stack: cdk.Stack) -> None:
    """A cluster, an EFA nodegroup per catalogued EFA type and a plain GPU nodegroup."""
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    placement = TrainingPlacementGroup(stack, "PlacementGroup")
    cluster = GpuEksCluster(stack, "Eks", vpc=network.vpc, admin_role_arn=ADMIN)
    for instance in EFA_TYPES:
        EfaNodegroup(
            stack,
            _node_id(instance.name),
            cluster=cluster,
            instance_type=instance.name,
            desired_size=2,
            subnet=network.placement_subnet(),
            placement_group=placement,
            efa_security_group=network.efa_security_group,
            efa_interface_type=EfaInterfaceType.EFA_ONLY,
            labels={"team": "ml"},
        )
    GpuNodegroup(
        stack, "Gpu", cluster=cluster, instance_type="g5.2xlarge", desired_size=1, labels={"eks-node": "gpu"}
    )


@pytest.fixture(scope="module")
def synthesized(gated_stacks: GatedStacks) -> tuple[dict[str, Any], GateResult]:
    """That stack, synthesized once through the gates (cdk-nag + cfn-lint)."""
    return gated_stacks.template("eks-every-efa-type"), gated_stacks.get("eks-every-efa-type")


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == kind}


def _launch_template(template: dict[str, Any], instance_type: str) -> dict[str, Any]:
    found = [
        props["LaunchTemplateData"]
        for props in _resources(template, "AWS::EC2::LaunchTemplate").values()
        if props["LaunchTemplateData"]["InstanceType"] == instance_type
    ]
    assert len(found) == 1
    return found[0]


def _nodegroup_of(template: dict[str, Any], instance_type: str) -> dict[str, Any]:
    templates = {
        logical
        for logical, props in _resources(template, "AWS::EC2::LaunchTemplate").items()
        if props["LaunchTemplateData"]["InstanceType"] == instance_type
    }
    found = [
        props
        for props in _resources(template, "AWS::EKS::Nodegroup").values()
        if props["LaunchTemplate"]["Id"]["Ref"] in templates
    ]
    assert len(found) == 1
    return found[0]


#: cfn-lint knows these types are not offered in us-east-1 (E3628); every other finding would be ours.
NOT_IN_US_EAST_1 = {"p5e.48xlarge", "trn2.48xlarge"}


def test_cdk_made_findings_are_acknowledged_on_each_resource_with_their_detail(
    gated_stacks: GatedStacks,
) -> None:
    """aws_eks_v2's own resources (cluster role, kubectl provider) get acknowledgements one by one, never a
    blanket one on the cluster or the stack."""
    assembly = gated_stacks.get("eks-every-efa-type").assembly
    assert assembly is not None
    directory = Path(assembly.directory)
    artifact = json.loads((directory / "manifest.json").read_text())["artifacts"]["Test"]
    metadata = stack_metadata(directory, artifact)
    resources = {
        path for path, entries in metadata.items() for e in entries if e["type"] == "aws:cdk:logicalId"
    }
    acknowledged = {
        path: list(entry["data"])
        for path, entries in metadata.items()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules" and path.startswith("/Test/Eks/")
    }
    assert any(path.endswith("/KubectlProvider/Handler/Resource") for path in acknowledged)
    assert any(path.endswith("/Eks/Resource/Role/Resource") for path in acknowledged)
    for path, rules in acknowledged.items():
        # on a CloudFormation resource; our node role's managed policies are acknowledged where it is made
        assert path in resources or path == "/Test/Eks/NodeRole", path
        for rule in rules:
            # AwsSolutions (the gate) and the informative NIST 800-53 R5 pack, each rule named in full
            assert rule.startswith(("AwsSolutions::AwsSolutions-", "NIST.800.53.R5::NIST.800.53.R5-")), rule
            if "-IAM4" in rule or "-IAM5" in rule:
                assert rule.endswith("]") and "[" in rule, rule


def test_the_whole_stack_passes_cdk_nag_and_cfn_lint(synthesized: tuple[dict[str, Any], GateResult]) -> None:
    gates = synthesized[1]
    assert gates.nag == [], "\n".join(map(str, gates.nag))
    unavailable = {m.message.split("'")[1] for m in gates.lint_errors if m.rule == "E3628"}
    assert unavailable == NOT_IN_US_EAST_1
    assert [m for m in gates.lint_errors if m.rule != "E3628"] == []


@pytest.mark.parametrize("instance", EFA_TYPES, ids=lambda t: t.name)
def test_efa_launch_template_has_one_interface_per_network_card(
    synthesized: tuple[dict[str, Any], GateResult], instance: Any
) -> None:
    data = _launch_template(synthesized[0], instance.name)
    interfaces = data["NetworkInterfaces"]
    assert len(interfaces) == instance.max_efa_interfaces
    assert sorted(i["NetworkCardIndex"] for i in interfaces) == list(range(instance.max_network_cards))
    primary = interfaces[0]
    assert (primary["NetworkCardIndex"], primary["DeviceIndex"], primary["InterfaceType"]) == (0, 0, "efa")
    for other in interfaces[1:]:
        assert (other["DeviceIndex"], other["InterfaceType"]) == (1, "efa-only")
    for interface in interfaces:
        assert len(interface["Groups"]) == 2  # cluster security group + EFA group
        assert "SubnetId" not in interface
    assert "SecurityGroupIds" not in data and "SecurityGroups" not in data
    assert "GroupName" in data["Placement"]


@pytest.mark.parametrize("instance", EFA_TYPES, ids=lambda t: t.name)
def test_efa_nodegroup_takes_the_type_from_the_launch_template(
    synthesized: tuple[dict[str, Any], GateResult], instance: Any
) -> None:
    nodegroup = _nodegroup_of(synthesized[0], instance.name)
    assert "InstanceTypes" not in nodegroup
    assert len(nodegroup["Subnets"]) == 1
    assert nodegroup["NodeRepairConfig"] == {"Enabled": True}
    assert nodegroup["ScalingConfig"] == {"DesiredSize": 2, "MaxSize": 2, "MinSize": 2}
    assert nodegroup["Labels"] == {"team": "ml"}
    accelerators = instance.accelerators
    if accelerators is None:
        assert nodegroup["AmiType"] == "AL2023_x86_64_STANDARD"
        assert "Taints" not in nodegroup
    elif accelerators.kind is AcceleratorKind.TRAINIUM:
        assert nodegroup["AmiType"] == "AL2023_x86_64_NEURON"
        assert nodegroup["Taints"] == [
            {"Effect": "NO_SCHEDULE", "Key": "aws.amazon.com/neuron", "Value": "true"}
        ]
    else:
        assert nodegroup["AmiType"] == "AL2023_x86_64_NVIDIA"
        assert nodegroup["Taints"] == [{"Effect": "NO_SCHEDULE", "Key": "nvidia.com/gpu", "Value": "true"}]


def test_every_launch_template_requires_imdsv2_one_hop_away_and_encrypts_its_gp3_root_volume(
    synthesized: tuple[dict[str, Any], GateResult],
) -> None:
    templates = _resources(synthesized[0], "AWS::EC2::LaunchTemplate").values()
    assert len(templates) == len(EFA_TYPES) + 2  # + system + GPU nodegroups
    for props in templates:
        data = props["LaunchTemplateData"]
        # hop limit 1: the node and host-network pods reach instance metadata, other pods do not
        assert data["MetadataOptions"] == {
            "HttpEndpoint": "enabled",
            "HttpPutResponseHopLimit": 1,
            "HttpTokens": "required",
        }
        (root,) = data["BlockDeviceMappings"]
        assert root["DeviceName"] == "/dev/xvda"
        assert root["Ebs"]["Encrypted"] is True and root["Ebs"]["VolumeType"] == "gp3"


def test_plain_gpu_nodegroup_is_labelled_and_tainted_without_efa(
    synthesized: tuple[dict[str, Any], GateResult],
) -> None:
    data = _launch_template(synthesized[0], "g5.2xlarge")
    assert "NetworkInterfaces" not in data and "Placement" not in data
    nodegroup = _nodegroup_of(synthesized[0], "g5.2xlarge")
    assert nodegroup["Labels"] == {"eks-node": "gpu"}
    assert nodegroup["AmiType"] == "AL2023_x86_64_NVIDIA"
    assert len(nodegroup["Subnets"]) == 2


def _managed_policy_names(role: dict[str, Any]) -> list[str]:
    return sorted(arn["Fn::Join"][1][-1].rsplit("/", 1)[1] for arn in role.get("ManagedPolicyArns", []))


def test_vpc_cni_gets_its_policy_through_pod_identity_not_the_node_role(
    synthesized: tuple[dict[str, Any], GateResult],
) -> None:
    template = synthesized[0]
    (cluster_id,) = _resources(template, "AWS::EKS::Cluster")
    (association,) = _resources(template, "AWS::EKS::PodIdentityAssociation").values()
    assert (association["Namespace"], association["ServiceAccount"]) == ("kube-system", "aws-node")
    assert association["ClusterName"] == {"Ref": cluster_id}
    role = template["Resources"][association["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    # only aws-node of this cluster: the session tags Pod Identity sets (pod-id-abac.html)
    assert trust["Condition"] == {
        "StringEquals": {
            "aws:RequestTag/eks-cluster-arn": {"Fn::GetAtt": [cluster_id, "Arn"]},
            "aws:RequestTag/kubernetes-namespace": "kube-system",
            "aws:RequestTag/kubernetes-service-account": "aws-node",
        }
    }
    assert _managed_policy_names(role) == ["AmazonEKS_CNI_Policy"]
    # the nodes' own role no longer carries it: pods cannot borrow the CNI's permissions
    node_roles = {
        json.dumps(ng["NodeRole"], sort_keys=True)
        for ng in _resources(template, "AWS::EKS::Nodegroup").values()
    }
    (node_role,) = node_roles
    node_role_props = template["Resources"][json.loads(node_role)["Fn::GetAtt"][0]]["Properties"]
    assert _managed_policy_names(node_role_props) == [
        "AmazonEC2ContainerRegistryReadOnly",
        "AmazonEKSWorkerNodePolicy",
    ]


def test_every_nodegroup_waits_for_the_vpc_cni_association_and_one_agent_runs(
    synthesized: tuple[dict[str, Any], GateResult],
) -> None:
    """aws-node pods get Pod Identity credentials only if the association exists when they start."""
    template = synthesized[0]
    (association_id,) = _resources(template, "AWS::EKS::PodIdentityAssociation")
    nodegroups = {k: v for k, v in template["Resources"].items() if v["Type"] == "AWS::EKS::Nodegroup"}
    assert len(nodegroups) == len(EFA_TYPES) + 2
    for logical_id, nodegroup in nodegroups.items():
        assert association_id in nodegroup.get("DependsOn", []), logical_id
    addons = [a["AddonName"] for a in _resources(template, "AWS::EKS::Addon").values()]
    assert addons == ["eks-pod-identity-agent"]


def test_system_nodegroup_is_two_t3_large_tainted_for_add_ons_only(
    synthesized: tuple[dict[str, Any], GateResult],
) -> None:
    """CriticalAddonsOnly=true:NoSchedule (EKS's API spells the effect NO_SCHEDULE): no team pod lands there."""
    nodegroup = _nodegroup_of(synthesized[0], "t3.large")
    assert nodegroup["AmiType"] == "AL2023_x86_64_STANDARD"
    assert nodegroup["ScalingConfig"] == {"DesiredSize": 2, "MaxSize": 2, "MinSize": 2}
    assert nodegroup["Taints"] == [{"Key": "CriticalAddonsOnly", "Value": "true", "Effect": "NO_SCHEDULE"}]
    assert nodegroup["Labels"] == {"training-clusters/role": "system"}


def test_cluster_is_private_encrypted_logged_and_uses_access_entries(
    synthesized: tuple[dict[str, Any], GateResult],
) -> None:
    template = synthesized[0]
    (cluster,) = _resources(template, "AWS::EKS::Cluster").values()
    assert cluster["Version"] == "1.35"
    assert cluster["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    assert cluster["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True
    assert cluster["AccessConfig"]["AuthenticationMode"] == "API"
    assert cluster["EncryptionConfig"][0]["Resources"] == ["secrets"]
    assert sorted(t["Type"] for t in cluster["Logging"]["ClusterLogging"]["EnabledTypes"]) == [
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    ]
    # the native resource: no CDK cluster-resource provider, no nested stacks
    assert not _resources(template, "AWS::CloudFormation::Stack")
    assert len(CONTROL_PLANE_LOGS) == 5
    keys = _resources(template, "AWS::KMS::Key").values()
    assert [k["EnableKeyRotation"] for k in keys] == [True]
    entries = [
        e for e in _resources(template, "AWS::EKS::AccessEntry").values() if e["PrincipalArn"] == ADMIN
    ]
    assert len(entries) == 1
    assert entries[0]["AccessPolicies"][0]["AccessScope"] == {"Type": "cluster"}
    assert text(entries[0]["AccessPolicies"][0]["PolicyArn"]) == (
        "arn:${AWS::Partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    )


def test_public_endpoint_is_restricted_to_the_given_ranges(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    GpuEksCluster(stack, "Eks", vpc=network.vpc, public_access_cidrs=["203.0.113.0/24"])
    from aws_cdk.assertions import Template

    (cluster,) = Template.from_stack(stack).find_resources("AWS::EKS::Cluster").values()
    vpc_config = cluster["Properties"]["ResourcesVpcConfig"]
    assert vpc_config["EndpointPublicAccess"] is True
    assert vpc_config["PublicAccessCidrs"] == ["203.0.113.0/24"]


def test_kubectl_provider_runs_in_the_private_subnets_with_the_cluster_security_group(
    synthesized: tuple[dict[str, Any], GateResult],
) -> None:
    """The endpoint is private: CDK's kubectl handler must run inside the VPC to install any chart."""
    template = synthesized[0]
    (cluster_id,) = _resources(template, "AWS::EKS::Cluster")
    (handler,) = (
        f
        for f in _resources(template, "AWS::Lambda::Function").values()
        if f.get("Description", "").startswith("onEvent handler for EKS kubectl")
    )
    assert handler["VpcConfig"]["SecurityGroupIds"] == [
        {"Fn::GetAtt": [cluster_id, "ClusterSecurityGroupId"]}
    ]
    subnets = {json.dumps(s, sort_keys=True) for s in handler["VpcConfig"]["SubnetIds"]}
    private = {
        json.dumps({"Ref": k}, sort_keys=True)
        for k, v in _resources(template, "AWS::EC2::Subnet").items()
        if v.get("MapPublicIpOnLaunch") is not True and "Private" in k
    }
    assert subnets and subnets <= private


def test_access_mode_api_and_config_map_reaches_the_cluster(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    GpuEksCluster(stack, "Eks", vpc=network.vpc, access_mode=AccessMode.API_AND_CONFIG_MAP)
    from aws_cdk.assertions import Template

    (cluster,) = Template.from_stack(stack).find_resources("AWS::EKS::Cluster").values()
    assert cluster["Properties"]["AccessConfig"]["AuthenticationMode"] == "API_AND_CONFIG_MAP"


# --------------------------------------------------------------------------------------------------
# validation: every message, exactly


@pytest.fixture(scope="module")
def validation_scope(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, GpuEksCluster, Any, Any]:
    """A stack whose constructs are only built, never synthesized: each test adds one bad construct."""
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("invalid")), context=dict(CDK_CONTEXT))
    stack = PinnedStack(app, "Test", env=cdk.Environment(region=REGION))
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    placement = TrainingPlacementGroup(stack, "PlacementGroup")
    return stack, GpuEksCluster(stack, "Eks", vpc=network.vpc), network, placement


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"instance_type": "g5.2xlarge"},
            "Test/Bad0: instance_type 'g5.2xlarge' has no EFA; use an EFA-capable type such as g5.8xlarge or "
            "p5.48xlarge, or a GPU nodegroup for nodes without EFA",
        ),
        (
            {"efa_interfaces": 0},
            "Test/Bad1: efa_interfaces must be between 1 and 32 for p5.48xlarge (one per network card), got 0",
        ),
        (
            {"efa_interfaces": 33},
            "Test/Bad2: efa_interfaces must be between 1 and 32 for p5.48xlarge (one per network card), got 33",
        ),
        (
            {"root_volume_size_gib": 10},
            "Test/Bad3: root_volume_size_gib must be at least 20 (the EKS AMI's own size), got 10",
        ),
        (
            {"desired_size": 3, "max_size": 2},
            "Test/Bad4: desired_size must lie between min_size and max_size (3..2), got 3",
        ),
        ({"desired_size": -1}, "Test/Bad5: desired_size must be 0 or more, got -1"),
        ({"instance_type": "p9.mega"}, None),
        (
            {"imds_hop_limit": 0},
            "Test/Bad7: imds_hop_limit must be between 1 and 64 (1 keeps pods away from the node's "
            "credentials), got 0",
        ),
    ],
)
def test_bad_efa_nodegroups_are_clear_errors(
    validation_scope: tuple[cdk.Stack, GpuEksCluster, Any, Any],
    props: dict[str, Any],
    message: str | None,
    request: pytest.FixtureRequest,
) -> None:
    stack, cluster, network, placement = validation_scope
    index = request.node.callspec.indices["props"]
    arguments: dict[str, Any] = {"instance_type": "p5.48xlarge", "desired_size": 2, **props}
    with pytest.raises(ConfigurationError) as error:
        EfaNodegroup(
            stack,
            f"Bad{index}",
            cluster=cluster,
            subnet=network.placement_subnet(),
            placement_group=placement,
            efa_security_group=network.efa_security_group,
            **arguments,
        )
    if message is None:
        assert str(error.value).startswith(
            f"Test/Bad{index}: instance_type: 'p9.mega' is not in the catalogue"
        )
    else:
        assert str(error.value) == message


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"instance_type": "t3.large"},
            "Test/Gpu0: instance_type 't3.large' has no GPU or Trainium accelerator; use a type such as g5.2xlarge",
        ),
        (
            {"imds_hop_limit": 65},
            "Test/Gpu1: imds_hop_limit must be between 1 and 64 (1 keeps pods away from the node's "
            "credentials), got 65",
        ),
    ],
)
def test_bad_gpu_nodegroups_are_clear_errors(
    validation_scope: tuple[cdk.Stack, GpuEksCluster, Any, Any],
    props: dict[str, Any],
    message: str,
    request: pytest.FixtureRequest,
) -> None:
    stack, cluster, _, _ = validation_scope
    index = request.node.callspec.indices["props"]
    with pytest.raises(ConfigurationError) as error:
        GpuNodegroup(
            stack, f"Gpu{index}", cluster=cluster, desired_size=1, **{"instance_type": "g5.2xlarge", **props}
        )
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"public_access_cidrs": ["0.0.0.0/0"]},
            "Test/Cluster0: public_access_cidrs must not open the API endpoint to the whole internet, got "
            "'0.0.0.0/0', wider than a /8; list your own ranges",
        ),
        (
            {"public_access_cidrs": ["office"]},
            "Test/Cluster1: public_access_cidrs must hold IPv4 ranges such as 203.0.113.0/24, got 'office'",
        ),
        (
            {"public_access_cidrs": []},
            "Test/Cluster2: public_access_cidrs must list at least one IPv4 range when given; omit it for a "
            "private endpoint",
        ),
        (
            {"admin_role_arn": "Admin"},
            "Test/Cluster3: admin_role_arn must be an IAM role ARN such as arn:aws:iam::111122223333:role/Admin, "
            "got 'Admin'",
        ),
        ({"system_node_count": 0}, "Test/Cluster4: system_node_count must be 1 or more, got 0"),
        (
            {"public_access_cidrs": ["0.0.0.0/1", "128.0.0.0/1"]},
            "Test/Cluster5: public_access_cidrs must not open the API endpoint to the whole internet, got "
            "'0.0.0.0/1', wider than a /8; list your own ranges",
        ),
        (
            {"public_access_cidrs": [f"{first}.0.0.0/8" for first in range(1, 18)]},
            "Test/Cluster6: public_access_cidrs must not open the API endpoint to the whole internet, got ranges "
            "covering 285,212,672 addresses together, more than one sixteenth of IPv4's (268,435,456); list your "
            "own ranges",
        ),
    ],
)
def test_bad_clusters_are_clear_errors(
    validation_scope: tuple[cdk.Stack, GpuEksCluster, Any, Any],
    props: dict[str, Any],
    message: str,
    request: pytest.FixtureRequest,
) -> None:
    stack, _, network, _ = validation_scope
    index = request.node.callspec.indices["props"]
    with pytest.raises(ConfigurationError) as error:
        GpuEksCluster(stack, f"Cluster{index}", vpc=network.vpc, **props)
    assert str(error.value) == message


def test_capacity_block_goes_into_the_launch_template(
    validation_scope: tuple[cdk.Stack, GpuEksCluster, Any, Any],
) -> None:
    stack, cluster, network, placement = validation_scope
    group = EfaNodegroup(
        stack,
        "Block",
        cluster=cluster,
        instance_type="p5en.48xlarge",
        desired_size=2,
        subnet=network.placement_subnet(),
        placement_group=placement,
        efa_security_group=network.efa_security_group,
        capacity=Capacity.capacity_block("cr-0123456789abcdef0"),
    )
    data = stack.resolve(group.launch_template.launch_template_data)
    assert data["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert data["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
    }
    assert stack.resolve(group.nodegroup.node.default_child.capacity_type) == "CAPACITY_BLOCK"  # type: ignore[union-attr]
    assert group.efa_interfaces == 16


@pytest.mark.parametrize("removed", ["capacity_type", "capacity_reservation_id"])
def test_the_removed_capacity_props_are_a_type_error(
    validation_scope: tuple[cdk.Stack, GpuEksCluster, Any, Any], removed: str
) -> None:
    stack, cluster, network, placement = validation_scope
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{removed}'"):
        EfaNodegroup(
            stack, f"Removed-{removed}", cluster=cluster, instance_type="p5.48xlarge", desired_size=2,
            subnet=network.placement_subnet(), placement_group=placement,
            efa_security_group=network.efa_security_group, **{removed: "SPOT"},
        )  # fmt: skip
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{removed}'"):
        GpuNodegroup(
            stack, f"RemovedGpu-{removed}", cluster=cluster, instance_type="g5.2xlarge", desired_size=1,
            **{removed: "SPOT"},
        )  # fmt: skip


def test_a_wider_metadata_hop_limit_is_a_deliberate_choice(
    validation_scope: tuple[cdk.Stack, GpuEksCluster, Any, Any],
) -> None:
    stack, cluster, _, _ = validation_scope
    group = GpuNodegroup(
        stack, "Hop2", cluster=cluster, instance_type="g5.2xlarge", desired_size=1, imds_hop_limit=2
    )
    data = stack.resolve(group.launch_template.launch_template_data)
    assert data["metadataOptions"]["httpPutResponseHopLimit"] == 2


# --------------------------------------------------------------------------------------------------
# capacity: the model on EKS nodegroups, and where the placement group goes

BLOCK = "cr-0123456789abcdef0"
RESERVATION_GROUP = "arn:aws:resource-groups:us-east-1:111122223333:group/p5-reservations"


def _efa_group(scope: tuple[cdk.Stack, GpuEksCluster, Any, Any], id: str, **props: Any) -> EfaNodegroup:
    stack, cluster, network, placement = scope
    return EfaNodegroup(
        stack,
        id,
        cluster=cluster,
        instance_type="p5.48xlarge",
        desired_size=2,
        subnet=network.placement_subnet(),
        placement_group=placement,
        efa_security_group=network.efa_security_group,
        **props,
    )


def _capacity_of(stack: cdk.Stack, group: EfaNodegroup | GpuNodegroup) -> tuple[Any, dict[str, Any]]:
    data = stack.resolve(group.launch_template.launch_template_data)
    return stack.resolve(group.nodegroup.node.default_child.capacity_type), data  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("capacity", "nodegroup_type", "specification", "market", "placed"),
    [
        (
            Capacity.capacity_block(BLOCK),
            "CAPACITY_BLOCK",
            {"capacityReservationTarget": {"capacityReservationId": BLOCK}},
            {"marketType": "capacity-block"},
            False,
        ),
        (
            Capacity.reservation(BLOCK),
            "ON_DEMAND",
            {"capacityReservationTarget": {"capacityReservationId": BLOCK}},
            None,
            False,
        ),
        (
            Capacity.reservation(BLOCK, targeted=False),
            "ON_DEMAND",
            {"capacityReservationPreference": "open"},
            None,
            False,
        ),
        (
            Capacity.reservation(BLOCK, in_placement_group=True),
            "ON_DEMAND",
            {"capacityReservationTarget": {"capacityReservationId": BLOCK}},
            None,
            True,
        ),
        (
            Capacity.reservation(resource_group_arn=RESERVATION_GROUP),
            "ON_DEMAND",
            {"capacityReservationTarget": {"capacityReservationResourceGroupArn": RESERVATION_GROUP}},
            None,
            False,
        ),
        (
            Capacity.spot(),
            "SPOT",
            None,
            None,
            True,
        ),  # EKS sets Spot itself: no market options in the template
        (Capacity.on_demand(), "ON_DEMAND", None, None, True),
    ],
    ids=["block", "reservation", "open", "reservation-in-group", "resource-group", "spot", "on-demand"],
)
def test_efa_nodegroup_capacity_reaches_the_nodegroup_and_its_launch_template(
    validation_scope: tuple[cdk.Stack, GpuEksCluster, Any, Any],
    request: pytest.FixtureRequest,
    capacity: Capacity,
    nodegroup_type: str,
    specification: dict[str, Any] | None,
    market: dict[str, str] | None,
    placed: bool,
) -> None:
    stack = validation_scope[0]
    group = _efa_group(validation_scope, f"Capacity-{request.node.callspec.id}", capacity=capacity)

    capacity_type, data = _capacity_of(stack, group)

    assert capacity_type == nodegroup_type
    assert data.get("capacityReservationSpecification") == specification
    assert data.get("instanceMarketOptions") == market
    assert ("placement" in data) is placed, "a reservation outside the placement group leaves it out"
    assert group.capacity == capacity


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"capacity": Capacity.training_plan("arn:aws:sagemaker:us-east-1:111122223333:training-plan/p")},
            "Test/BadCapacity0: capacity training-plan is not supported by Amazon EKS managed nodegroups; use on-demand "
            "or spot or reservation or capacity-block",
        ),
        (
            {"capacity": "capacity-block"},
            "Test/BadCapacity1: capacity must be a Capacity (or None), got str 'capacity-block'",
        ),
        (
            {
                "capacity": Capacity.reservation(
                    resource_group_arn=RESERVATION_GROUP.replace("us-east-1", "eu-west-1")
                )
            },
            "Test/BadCapacity2: capacity.resource_group_arn is in eu-west-1, but the stack deploys to us-east-1; use "
            "one bought in us-east-1, or deploy to eu-west-1",
        ),
    ],
)
def test_bad_efa_nodegroup_capacities_are_clear_errors(
    validation_scope: tuple[cdk.Stack, GpuEksCluster, Any, Any],
    request: pytest.FixtureRequest,
    props: dict[str, Any],
    message: str,
) -> None:
    index = request.node.callspec.indices["props"]
    with pytest.raises(ConfigurationError) as error:
        _efa_group(validation_scope, f"BadCapacity{index}", **props)
    assert str(error.value) == message


def test_a_gpu_nodegroup_on_reserved_capacity_needs_one_subnet_in_its_az(
    validation_scope: tuple[cdk.Stack, GpuEksCluster, Any, Any],
) -> None:
    stack, cluster, network, _ = validation_scope
    with pytest.raises(ConfigurationError) as error:
        GpuNodegroup(
            stack, "SpreadBlock", cluster=cluster, instance_type="g5.2xlarge", desired_size=1,
            capacity=Capacity.reservation(BLOCK),
        )  # fmt: skip
    assert str(error.value) == (
        f"Test/SpreadBlock: subnets must be one subnet in the AZ of capacity reservation {BLOCK} (reserved "
        "capacity lives in one AZ), got the VPC's private subnets"
    )
    group = GpuNodegroup(
        stack, "OneSubnetBlock", cluster=cluster, instance_type="p5.48xlarge", desired_size=1,
        subnets=[network.placement_subnet()], capacity=Capacity.capacity_block(BLOCK),
    )  # fmt: skip
    capacity_type, data = _capacity_of(stack, group)
    assert capacity_type == "CAPACITY_BLOCK"
    assert data["instanceMarketOptions"] == {"marketType": "capacity-block"}


def test_the_node_monitoring_agent_is_added_once(
    validation_scope: tuple[cdk.Stack, GpuEksCluster, Any, Any],
) -> None:
    stack, cluster, _, _ = validation_scope
    agent = cluster.add_node_monitoring_agent()
    assert cluster.add_node_monitoring_agent() is agent
    assert stack.resolve(agent.addon_name) == "eks-node-monitoring-agent"
    assert stack.resolve(agent.cluster_name) == stack.resolve(cluster.cluster_name)


def test_the_vpc_cni_add_on_enforces_network_policy_once_after_its_pod_identity(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    cluster = GpuEksCluster(stack, "Eks", vpc=network.vpc)
    assert cluster.vpc_cni is None  # made on request: HyperPod's dependencies make it with their own id
    addon = cluster.add_vpc_cni()
    assert cluster.add_vpc_cni() is addon
    template = cdk.assertions.Template.from_stack(stack).to_json()
    (properties,) = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == "vpc-cni"
    ]
    assert json.loads(properties["Properties"].pop("ConfigurationValues")) == {"enableNetworkPolicy": "true"}
    assert properties["Properties"] == {
        "AddonName": "vpc-cni",
        "ClusterName": {"Ref": stack.get_logical_id(cluster.cluster.node.default_child)},
        "ResolveConflicts": "OVERWRITE",
    }
    assert stack.get_logical_id(cluster.vpc_cni_pod_identity) in properties["DependsOn"]
    with pytest.raises(ConfigurationError) as error:
        cluster.add_vpc_cni(addon_version="v1.20.1-eksbuild.3")
    assert str(error.value) == (
        "Test/Eks: add_vpc_cni.addon_version must be the version the add-on was made with (EKS default), got "
        "'v1.20.1-eksbuild.3'"
    )
