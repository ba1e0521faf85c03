from __future__ import annotations

import fnmatch
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match, Template

from training_clusters.constructs.common.lustre import LustreDeploymentType
from training_clusters.constructs.parallelcluster.cluster import (
    ComputeResource,
    CustomActionScript,
    DeletionPolicy,
    HeadNode,
    LoginNodePool,
    ManagedLustre,
    OperatingSystem,
    ParallelCluster,
    QueuePlacement,
    SlurmQueue,
    SlurmSettings,
)
from training_clusters.constructs.parallelcluster.rendering import (
    substitute_placeholders,
)
from training_clusters.gates.compliance import nag_detail
from training_clusters.model.capacity import Capacity
from training_clusters.model.errors import ConfigurationError

from ..assertions import (
    allow,
    aws_managed,
    egress,
    ingress,
    logical_id,
    managed_policy_arns,
    policy_statements,
    security_group_rules,
)
from ..conftest import GatedStacks, gated_stack
from .parts import SharedLayer
from .test_session_manager import EVERYTHING_FINDING, INSTANCES_FINDING, acknowledged_rules
from .test_session_manager import EXPECTED as SESSION_MANAGER_STATEMENTS

C5N = ComputeResource(name="c5n", instance_type="c5n.9xlarge", max_count=2)
P5 = ComputeResource(name="p5", instance_type="p5.48xlarge", max_count=4)
T3 = ComputeResource(name="t3", instance_type="t3.medium", max_count=4)


class Parts(SharedLayer):
    """The shared layer and the cluster under test."""

    def cluster(self, **props: Any) -> ParallelCluster:
        """A cluster like environments/parallelcluster-c5n.yaml's; ``props`` override its props."""
        defaults: dict[str, Any] = {
            "cluster_name": "training",
            "vpc": self.network.vpc,
            "subnet": self.network.placement_subnet(),
            "queues": [SlurmQueue(name="compute", compute_resources=[C5N])],
            "placement_group": self.placement,
            "efa_security_group": self.network.efa_security_group,
            "file_system": self.fsx,
        }
        return ParallelCluster(self.stack, "Cluster", **{**defaults, **props})


@pytest.fixture
def parts(stack: cdk.Stack) -> Parts:
    return Parts(stack)


def resolved(cluster: ParallelCluster) -> dict[str, Any]:
    result: dict[str, Any] = cdk.Stack.of(cluster).resolve(cluster.configuration)
    return result


def test_cluster_is_a_pcluster_custom_resource_served_by_the_pinned_provider(parts: Parts) -> None:
    parts.cluster()
    template = Template.from_stack(parts.stack)
    template.has_resource_properties(
        "AWS::CloudFormation::Stack",
        {
            "TemplateURL": {
                "Fn::Sub": "https://${AWS::Region}-aws-parallelcluster.s3.${AWS::Region}.${AWS::URLSuffix}"
                "/parallelcluster/3.16.1/templates/custom_resource/cluster.yaml"
            }
        },
    )
    provider = next(iter(template.find_resources("AWS::CloudFormation::Stack")))
    template.has_resource_properties(
        "Custom::PclusterCluster",
        {
            "ServiceToken": {"Fn::GetAtt": [provider, "Outputs.ServiceToken"]},
            "ClusterName": "training",
            "DeletionPolicy": "Delete",
            "ClusterConfiguration": Match.object_like({"Image": {"Os": "alinux2023"}}),
        },
    )


def test_c5n_configuration_mounts_our_lustre_in_our_placement_group_with_efa(parts: Parts) -> None:
    cluster = parts.cluster()
    config = resolved(cluster)
    stack = parts.stack
    subnet = stack.resolve(parts.network.placement_subnet().subnet_id)
    queue = config["Scheduling"]["SlurmQueues"][0]
    assert queue["ComputeResources"] == [
        {
            "Name": "c5n",
            "InstanceType": "c5n.9xlarge",
            "MinCount": 0,
            "MaxCount": 2,
            "Efa": {"Enabled": True, "GdrSupport": False},
        }
    ]
    assert queue["Networking"] == {
        "SubnetIds": [subnet],
        "AssignPublicIp": False,
        "PlacementGroup": {"Enabled": True, "Name": stack.resolve(parts.placement.placement_group_name)},
        "AdditionalSecurityGroups": [
            stack.resolve(parts.network.efa_security_group.security_group_id),
            stack.resolve(cluster.security_group.security_group_id),
        ],
    }
    assert config["Scheduling"]["SlurmSettings"] == {"QueueUpdateStrategy": "DRAIN", "ScaledownIdletime": 10}
    assert config["SharedStorage"] == [
        {
            "MountDir": "/shared",
            "Name": "shared",
            "StorageType": "FsxLustre",
            "FsxLustreSettings": {"FileSystemId": stack.resolve(parts.fsx.file_system_id)},
        }
    ]
    assert config["Monitoring"] == {"Logs": {"CloudWatch": {"Enabled": True, "RetentionInDays": 180}}}


def test_head_node_is_private_closed_and_reached_through_ssm(parts: Parts) -> None:
    cluster = parts.cluster()
    head = resolved(cluster)["HeadNode"]
    stack = parts.stack
    assert head["InstanceType"] == "t3.medium"
    assert head["Networking"] == {
        "SubnetId": stack.resolve(parts.network.placement_subnet().subnet_id),
        "AdditionalSecurityGroups": [stack.resolve(cluster.security_group.security_group_id)],
    }
    assert head["Ssh"] == {"AllowedIps": stack.resolve(parts.network.vpc.vpc_cidr_block)}
    assert head["Imds"] == {"Secured": True}
    assert head["Iam"] == {
        "AdditionalIamPolicies": [{"Policy": {"Ref": _logical_id(cluster.session_manager_policy)}}]
    }


def _logical_id(policy: iam.ManagedPolicy) -> str:
    return cdk.Stack.of(policy).get_logical_id(policy.node.default_child)  # type: ignore[arg-type]


#: The managed policies the role of ParallelCluster's provider Lambda may attach to a node role (its own,
#: unless ``provider_lambda_role``): ``iam:PolicyARN`` of statement ``IamPolicy`` of
#: ``DefaultParallelClusterIamAdminPolicy`` in cloudformation/policies/parallelcluster-policies.yaml of
#: https://github.com/aws/aws-parallelcluster (``ArnLike``: ``*`` matches any characters).
PROVIDER_ATTACHABLE = (
    "arn:${AWS::Partition}:iam::${AWS::AccountId}:policy/parallelcluster*",
    "arn:${AWS::Partition}:iam::${AWS::AccountId}:policy/parallelcluster/*",
    "arn:${AWS::Partition}:iam::aws:policy/CloudWatchAgentServerPolicy",
    "arn:${AWS::Partition}:iam::aws:policy/AmazonSSMManagedInstanceCore",
    "arn:${AWS::Partition}:iam::aws:policy/AWSBatchFullAccess",
    "arn:${AWS::Partition}:iam::aws:policy/AmazonS3ReadOnlyAccess",
)


def _attachable_by_the_provider(template: dict[str, Any], policy: Any) -> bool:
    """Whether ParallelCluster's provider may attach ``policy`` (a ``Ref`` to a managed policy of ours, or an
    ARN) to the roles it makes: our policies are named by CloudFormation, so their path must do."""
    if isinstance(policy, dict) and set(policy) == {"Ref"}:
        path = template["Resources"][policy["Ref"]]["Properties"].get("Path", "/")
        arn = f"arn:${{AWS::Partition}}:iam::${{AWS::AccountId}}:policy{path}GeneratedName"
    else:
        arn = nag_detail(policy).replace("<AWS::Partition>", "${AWS::Partition}")
    return any(fnmatch.fnmatchcase(arn, pattern) for pattern in PROVIDER_ATTACHABLE)


def test_head_and_login_nodes_reach_session_manager_through_our_policy_and_compute_nodes_get_no_ssm(
    parts: Parts,
) -> None:
    bucket = s3.Bucket.from_bucket_name(parts.stack, "Scripts", "my-scripts")
    cluster = parts.cluster(
        on_node_configured=CustomActionScript(bucket=bucket, key="setup.sh"),
        login_nodes=[LoginNodePool(name="login"), LoginNodePool(name="builds")],
    )
    config = resolved(cluster)
    ssm = {"Policy": {"Ref": _logical_id(cluster.session_manager_policy)}}
    assert cluster.login_nodes_policy is not None
    scripts = {"Policy": {"Ref": _logical_id(cluster.login_nodes_policy)}}
    assert config["HeadNode"]["Iam"]["AdditionalIamPolicies"] == [ssm]
    assert [pool["Iam"]["AdditionalIamPolicies"] for pool in config["LoginNodes"]["Pools"]] == [
        [ssm, scripts],
        [ssm, scripts],
    ]
    for queue in config["Scheduling"]["SlurmQueues"]:
        assert queue["Iam"] == {"S3Access": [{"BucketName": "my-scripts", "KeyName": "setup.sh"}]}
    template = Template.from_stack(parts.stack).to_json()
    assert (
        policy_statements(template, _logical_id(cluster.session_manager_policy)) == SESSION_MANAGER_STATEMENTS
    )
    roles = [k for k, v in template["Resources"].items() if v["Type"] == "AWS::IAM::Role"]
    assert all(
        aws_managed("AmazonSSMManagedInstanceCore") not in managed_policy_arns(template, r) for r in roles
    )


def test_every_policy_we_give_a_node_is_one_parallelclusters_provider_may_attach(parts: Parts) -> None:
    """Fails on the login nodes' script policy before it moved under /parallelcluster/."""
    bucket = s3.Bucket.from_bucket_name(parts.stack, "Scripts", "my-scripts")
    cluster = parts.cluster(
        on_node_configured=CustomActionScript(bucket=bucket, key="setup.sh"),
        login_nodes=[LoginNodePool(name="login")],
    )
    config = resolved(cluster)
    template = Template.from_stack(parts.stack).to_json()
    policies = [
        entry["Policy"]
        for node in [config["HeadNode"], *config["LoginNodes"]["Pools"], *config["Scheduling"]["SlurmQueues"]]
        for entry in node.get("Iam", {}).get("AdditionalIamPolicies", [])
    ]
    assert len(policies) == 3
    assert [p for p in policies if not _attachable_by_the_provider(template, p)] == []
    for policy in (cluster.session_manager_policy, cluster.login_nodes_policy):
        assert policy is not None
        assert template["Resources"][_logical_id(policy)]["Properties"]["Path"] == "/parallelcluster/"


def test_the_provider_rule_refuses_a_policy_outside_its_path() -> None:
    template = {"Resources": {"P": {"Type": "AWS::IAM::ManagedPolicy", "Properties": {}}}}
    assert not _attachable_by_the_provider(template, {"Ref": "P"})
    template["Resources"]["P"]["Properties"]["Path"] = "/parallelcluster/"
    assert _attachable_by_the_provider(template, {"Ref": "P"})
    aws_managed = {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AdministratorAccess"]]
    }
    assert not _attachable_by_the_provider(template, aws_managed)


def test_gpu_queue_gets_efa_and_gpudirect_rdma_from_the_catalogue_cpu_queue_neither(parts: Parts) -> None:
    config = resolved(
        parts.cluster(
            queues=[
                SlurmQueue(name="gpu", compute_resources=[P5]),
                SlurmQueue(name="cpu", compute_resources=[T3]),
            ]
        )
    )
    gpu, cpu = config["Scheduling"]["SlurmQueues"]
    assert gpu["ComputeResources"][0]["Efa"] == {"Enabled": True, "GdrSupport": True}
    assert gpu["Networking"]["PlacementGroup"]["Enabled"] is True
    assert cpu["ComputeResources"][0]["Efa"] == {"Enabled": False, "GdrSupport": False}
    assert cpu["Networking"]["PlacementGroup"] == {"Enabled": False}


def test_without_our_placement_group_efa_queues_get_a_managed_one(parts: Parts) -> None:
    config = resolved(parts.cluster(placement_group=None))
    assert config["Scheduling"]["SlurmQueues"][0]["Networking"]["PlacementGroup"] == {"Enabled": True}


def test_managed_lustre_is_created_by_parallelcluster_and_retained(parts: Parts) -> None:
    config = resolved(
        parts.cluster(
            file_system=None,
            managed_file_system=ManagedLustre(
                deployment_type=LustreDeploymentType.PERSISTENT_2,
                storage_capacity_gib=2400,
                per_unit_storage_throughput_mbps=250,
            ),
            mount_dir="/fsx",
        )
    )
    assert config["SharedStorage"] == [
        {
            "MountDir": "/fsx",
            "Name": "shared",
            "StorageType": "FsxLustre",
            "FsxLustreSettings": {
                "DeploymentType": "PERSISTENT_2",
                "StorageCapacity": 2400,
                "DataCompressionType": "LZ4",
                "DeletionPolicy": "Retain",
                "PerUnitStorageThroughput": 250,
            },
        }
    ]


def test_custom_action_script_runs_on_every_node_which_may_read_it(parts: Parts) -> None:
    bucket = s3.Bucket.from_bucket_name(parts.stack, "Scripts", "my-scripts")
    config = resolved(
        parts.cluster(on_node_configured=CustomActionScript(bucket=bucket, key="pc/setup.sh", args=["-v"]))
    )
    action = {"OnNodeConfigured": {"Script": "s3://my-scripts/pc/setup.sh", "Args": ["-v"]}}
    access = [{"BucketName": "my-scripts", "KeyName": "pc/setup.sh"}]
    assert config["HeadNode"]["CustomActions"] == action
    assert config["HeadNode"]["Iam"]["S3Access"] == access
    queue = config["Scheduling"]["SlurmQueues"][0]
    assert queue["CustomActions"] == action
    assert queue["Iam"] == {"S3Access": access}


def test_custom_action_scripts_are_read_by_login_nodes_through_a_policy_of_their_exact_objects(
    parts: Parts,
) -> None:
    """The login nodes' policy reads each of their scripts (the cluster's and the pools' own) as the exact
    object, and does nothing else."""
    bucket = s3.Bucket.from_bucket_name(parts.stack, "Scripts", "my-scripts")
    setup = CustomActionScript(bucket=bucket, key="pc/setup.sh")
    cluster = parts.cluster(
        on_node_configured=setup,
        login_nodes=[
            LoginNodePool(name="login", on_node_start=[CustomActionScript(bucket=bucket, key="pc/login.sh")]),
            LoginNodePool(name="builds", on_node_configured=[setup]),
        ],
    )
    assert cluster.login_nodes_policy is not None
    template = Template.from_stack(parts.stack).to_json()
    objects = "arn:aws:s3:::my-scripts/pc"  # the test stack is in a region of the aws partition
    assert policy_statements(template, _logical_id(cluster.login_nodes_policy)) == [
        allow({"s3:GetObject"}, [f"{objects}/setup.sh", f"{objects}/login.sh"])
    ]


def test_head_and_login_nodes_take_any_type_spelt_as_ec2_spells_it(parts: Parts) -> None:
    """c7i.2xlarge and m7i.xlarge are not in the catalogue: a head or login node needs no facts."""
    config = resolved(
        parts.cluster(
            head_node=HeadNode(instance_type="c7i.2xlarge"),
            login_nodes=[LoginNodePool(name="login", instance_type="m7i.xlarge")],
        )
    )
    assert config["HeadNode"]["InstanceType"] == "c7i.2xlarge"
    assert [p["InstanceType"] for p in config["LoginNodes"]["Pools"]] == ["m7i.xlarge"]


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"head_node": HeadNode(instance_type="c7i-2xlarge")},
            "Test/Cluster: head_node.instance_type must be an EC2 instance type such as 'c7i.2xlarge' (family.size), "
            "got 'c7i-2xlarge'",
        ),
        (
            {"login_nodes": [LoginNodePool(name="login", instance_type="ml.m7i.xlarge")]},
            "Test/Cluster: login_nodes[0].instance_type must be the EC2 name such as 'c7i.2xlarge', got "
            "'ml.m7i.xlarge' (did you mean 'm7i.xlarge'?)",
        ),
    ],
    ids=["head-node", "login-pool"],
)
def test_a_head_or_login_type_not_spelt_as_a_type_is_refused(
    parts: Parts, props: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        parts.cluster(**props)
    assert str(error.value) == message


def test_key_pair_opens_ssh_to_the_vpc_or_the_given_range_only(parts: Parts) -> None:
    config = resolved(parts.cluster(head_node=HeadNode(key_name="ops", ssh_allowed_ips="10.20.0.0/16")))
    assert config["HeadNode"]["Ssh"] == {"AllowedIps": "10.20.0.0/16", "KeyName": "ops"}


def _options(parts: Parts) -> dict[str, dict[str, Any]]:
    bucket = s3.Bucket.from_bucket_name(parts.stack, "Scripts", "my-scripts")
    return {
        "defaults": {},
        "key pair": {"head_node": HeadNode(key_name="ops")},
        "key pair and prefix list": {"head_node": HeadNode(key_name="ops", ssh_allowed_ips="pl-0123abcd")},
        "gpu queue": {"queues": [SlurmQueue(name="gpu", compute_resources=[P5])]},
        "managed placement": {
            "queues": [SlurmQueue(name="c", compute_resources=[C5N], placement=QueuePlacement.MANAGED)]
        },
        "spot cpu queue": {"queues": [SlurmQueue(name="cpu", compute_resources=[T3])]},
        "managed fsx": {"file_system": None, "managed_file_system": ManagedLustre()},
        "no shared storage": {"file_system": None},
        "ubuntu and script": {
            "os": OperatingSystem.UBUNTU2404,
            "on_node_configured": CustomActionScript(bucket=bucket, key="setup.sh"),
        },
    }


@pytest.mark.parametrize(
    "option",
    [
        "defaults",
        "key pair",
        "key pair and prefix list",
        "gpu queue",
        "managed placement",
        "spot cpu queue",
        "managed fsx",
        "no shared storage",
        "ubuntu and script",
    ],
)
def test_no_option_opens_ssh_to_the_internet_or_gives_compute_a_public_ip(parts: Parts, option: str) -> None:
    cluster = parts.cluster(**_options(parts)[option])
    rendered = cluster.render_config()
    config = yaml.safe_load(rendered)
    assert config["HeadNode"]["Ssh"]["AllowedIps"] not in ("0.0.0.0/0", "::/0")
    assert "0.0.0.0/0" not in rendered
    for queue in config["Scheduling"]["SlurmQueues"]:
        assert queue["Networking"]["AssignPublicIp"] is False


def test_render_config_uses_realistic_placeholders_or_given_values(parts: Parts) -> None:
    cluster = parts.cluster()
    placeholders = yaml.safe_load(cluster.render_config())
    assert placeholders["HeadNode"]["Networking"]["SubnetId"] == "subnet-0123456789abcdef0"
    assert placeholders["HeadNode"]["Ssh"]["AllowedIps"] == "10.0.0.0/16"
    assert placeholders["SharedStorage"][0]["FsxLustreSettings"]["FileSystemId"] == "fs-0123456789abcdef0"
    groups = placeholders["Scheduling"]["SlurmQueues"][0]["Networking"]["AdditionalSecurityGroups"]
    assert sorted(groups) == ["sg-0123456789abcdef0", "sg-0123456789abcdef1"]

    stack = parts.stack
    subnet_ref = stack.resolve(parts.network.placement_subnet().subnet_id)["Ref"]
    fsx_ref = stack.resolve(parts.fsx.file_system_id)["Ref"]
    given = yaml.safe_load(
        cluster.render_config({subnet_ref: "subnet-0aaaabbbbccccdddd", fsx_ref: "fs-0aaaabbbbccccdddd"})
    )
    assert given["HeadNode"]["Networking"]["SubnetId"] == "subnet-0aaaabbbbccccdddd"
    assert given["Scheduling"]["SlurmQueues"][0]["Networking"]["SubnetIds"] == ["subnet-0aaaabbbbccccdddd"]
    assert given["SharedStorage"][0]["FsxLustreSettings"]["FileSystemId"] == "fs-0aaaabbbbccccdddd"


def test_write_config_writes_cluster_config_yaml(parts: Parts, tmp_path: Any) -> None:
    path = parts.cluster().write_config(tmp_path / "cluster-config.yaml")
    assert yaml.safe_load(path.read_text())["Image"] == {"Os": "alinux2023"}


def test_substitute_placeholders_joins_and_refuses_what_it_cannot_render() -> None:
    document = {
        "A": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":x/", {"Ref": "Bucket1"}]]},
        "B": {"Fn::GetAtt": ["Group1", "GroupId"]},
        "C": {"Ref": "AWS::Region"},
    }
    types = {"Bucket1": "AWS::S3::Bucket", "Group1": "AWS::EC2::SecurityGroup"}
    assert substitute_placeholders(document, resource_types=types, region="eu-west-1") == {
        "A": "arn:aws:x/training-bucket-0",
        "B": "sg-0123456789abcdef0",
        "C": "eu-west-1",
    }
    with pytest.raises(ConfigurationError) as error:
        substitute_placeholders({"X": {"Fn::ImportValue": "shared-vpc"}}, resource_types={})
    assert str(error.value) == "cannot render Fn::ImportValue into a concrete value: 'shared-vpc'"


def test_cluster_depends_on_network_storage_and_their_rules(parts: Parts) -> None:
    cluster = parts.cluster()
    parts.fsx.allow_clients_from(cluster)
    template = Template.from_stack(parts.stack)
    (resource,) = template.find_resources("Custom::PclusterCluster").values()
    depends = resource["DependsOn"]
    assert parts.stack.resolve(parts.fsx.file_system_id)["Ref"] in depends
    assert any(d.startswith("NetworkPrivateSubnet1DefaultRoute") for d in depends)
    assert any(d.startswith("FsxSecurityGroupfrom") for d in depends)


def test_nodes_are_lustre_clients_through_connections(parts: Parts) -> None:
    """The nodes' group talks Lustre with the file system and nothing else; the file system's group keeps
    its servers' own rules and gains the client's pair (each rule exact: dropping one fails)."""
    cluster = parts.cluster()
    parts.fsx.allow_clients_from(cluster)
    template = Template.from_stack(parts.stack).to_json()
    nodes, fsx = logical_id(cluster.security_group), logical_id(parts.fsx.security_group)
    lustre = [988, (1018, 1023)]
    assert security_group_rules(template, nodes) == {
        *(ingress(fsx, ports) for ports in lustre),
        *(egress(fsx, ports) for ports in lustre),
    }
    assert security_group_rules(template, fsx) == {
        ingress(fsx, (988, 1023)),  # aws-cdk-lib's LustreFileSystem opens its own range to itself
        *(rule(peer, ports) for rule in (ingress, egress) for peer in (fsx, nodes) for ports in lustre),
    }


def test_deletion_policy_retain_is_opt_in_keeps_the_nodes_group_and_warns(parts: Parts) -> None:
    cluster = parts.cluster(deletion_policy=DeletionPolicy.RETAIN)
    template = Template.from_stack(parts.stack)
    template.has_resource_properties("Custom::PclusterCluster", {"DeletionPolicy": "Retain"})
    group = parts.stack.get_logical_id(cluster.security_group.node.default_child)
    assert template.to_json()["Resources"][group]["DeletionPolicy"] == "Retain"
    warnings = Annotations.from_stack(parts.stack).find_warning("*", Match.string_like_regexp("RETAIN"))
    assert any("pcluster delete-cluster" in str(w.entry.data) for w in warnings)


def _queue(*resources: ComputeResource, name: str = "compute", **props: Any) -> list[SlurmQueue]:
    return [SlurmQueue(name=name, compute_resources=list(resources), **props)]


BAD_PROPS: list[tuple[str, Callable[[Parts], dict[str, Any]], str]] = [
    (
        "min above max",
        lambda p: {
            "queues": _queue(
                ComputeResource(name="c5n", instance_type="c5n.9xlarge", min_count=3, max_count=2)
            )
        },
        "Test/Cluster: queues[0].compute_resources[0].min_count 3 is greater than max_count 2",
    ),
    (
        "max zero",
        lambda p: {"queues": _queue(ComputeResource(name="c5n", instance_type="c5n.9xlarge", max_count=0))},
        "Test/Cluster: queues[0].compute_resources[0].max_count must be 1 or more, got 0",
    ),
    (
        "queue name with capital and underscore",
        lambda p: {"queues": _queue(C5N, name="Compute_1")},
        "Test/Cluster: queues[0].name must start with a lowercase letter and hold only lowercase letters, "
        "digits and hyphens, got 'Compute_1'",
    ),
    (
        "queue name too long",
        lambda p: {"queues": _queue(C5N, name="a" * 26)},
        f"Test/Cluster: queues[0].name must be at most 25 characters, got '{'a' * 26}' (26)",
    ),
    (
        "queue named default",
        lambda p: {"queues": _queue(C5N, name="default")},
        "Test/Cluster: queues[0].name must not be 'default' (reserved by Slurm)",
    ),
    (
        "duplicate queue names",
        lambda p: {"queues": [*_queue(C5N), *_queue(T3)]},
        "Test/Cluster: queues[].name must be unique, got 'compute' more than once",
    ),
    (
        "compute resource name",
        lambda p: {"queues": _queue(ComputeResource(name="C5n", instance_type="c5n.9xlarge"))},
        "Test/Cluster: queues[0].compute_resources[0].name must start with a lowercase letter and hold only "
        "lowercase letters, digits and hyphens, got 'C5n'",
    ),
    (
        "duplicate compute resource names",
        lambda p: {"queues": _queue(C5N, C5N)},
        "Test/Cluster: queues[0].compute_resources[].name must be unique, got 'c5n' more than once",
    ),
    (
        "no queues",
        lambda p: {"queues": []},
        "Test/Cluster: queues must hold between 1 and 50 entries, got 0",
    ),
    (
        "51 queues",
        lambda p: {"queues": [SlurmQueue(name=f"q{i}", compute_resources=[T3]) for i in range(51)]},
        "Test/Cluster: queues must hold between 1 and 50 entries, got 51",
    ),
    (
        "empty queue",
        lambda p: {"queues": _queue()},
        "Test/Cluster: queues[0].compute_resources must hold between 1 and 50 entries, got 0",
    ),
    (
        "51 compute resources in the cluster",
        lambda p: {
            "queues": [
                SlurmQueue(
                    name=f"q{i}",
                    compute_resources=[
                        ComputeResource(name=f"r{j}", instance_type="t3.medium") for j in range(17)
                    ],
                )
                for i in range(3)
            ]
        },
        "Test/Cluster: queues hold 51 compute resources in all; ParallelCluster allows at most 50 per cluster",
    ),
    (
        "unknown instance type",
        lambda p: {"queues": _queue(ComputeResource(name="x", instance_type="p9.96xlarge"))},
        "Test/Cluster: queues[0].compute_resources[0].instance_type: 'p9.96xlarge' is not in the catalogue "
        "(`training-clusters catalog` lists its types); give its facts with "
        "training_clusters.catalog.register_instance_type(...) first",
    ),
    (
        "efa on t3.medium",
        lambda p: {"queues": _queue(ComputeResource(name="t3", instance_type="t3.medium", efa=True))},
        "Test/Cluster: queues[0].compute_resources[0].efa is enabled, but t3.medium has no EFA interface; "
        "EFA-capable types in the catalogue: ",
    ),
    (
        "gdr on c5n.9xlarge",
        lambda p: {
            "queues": _queue(ComputeResource(name="c5n", instance_type="c5n.9xlarge", gdr_support=True))
        },
        "Test/Cluster: queues[0].compute_resources[0].gdr_support is enabled, but c5n.9xlarge has no "
        "GPUDirect RDMA; types with it in the catalogue: ",
    ),
    (
        "gdr without efa",
        lambda p: {
            "queues": _queue(
                ComputeResource(name="p5", instance_type="p5.48xlarge", efa=False, gdr_support=True)
            )
        },
        "Test/Cluster: queues[0].compute_resources[0].gdr_support requires efa to be enabled",
    ),
    (
        "efa without placement group",
        lambda p: {"queues": _queue(C5N, placement=QueuePlacement.NONE)},
        "Test/Cluster: queues[0].placement is none, but compute resource 'c5n' uses EFA, which needs a "
        "placement group; use shared or managed",
    ),
    (
        "shared placement without a group",
        lambda p: {"placement_group": None, "queues": _queue(T3, placement=QueuePlacement.SHARED)},
        "Test/Cluster: queues[0].placement is shared, but the cluster has no placement_group; give one or use "
        "managed",
    ),
    (
        "os alinux2",
        lambda p: {"os": "alinux2"},
        "Test/Cluster: os 'alinux2' is not allowed: Amazon Linux 2 is no longer supported by ParallelCluster "
        "3.16; use one of alinux2023, ubuntu2204, ubuntu2404, rhel8, rhel9, rocky8, rocky9",
    ),
    (
        "cluster name with underscore",
        lambda p: {"cluster_name": "my_cluster"},
        "Test/Cluster: cluster_name must start with a letter and hold only letters, digits and hyphens, at "
        "most 60 characters, got 'my_cluster'",
    ),
    (
        "cluster name equals stack name",
        lambda p: {"cluster_name": "Test"},
        "Test/Cluster: cluster_name 'Test' must differ from the stack's name: ParallelCluster creates a stack "
        "of that name",
    ),
    (
        "ssh from the internet",
        lambda p: {"head_node": HeadNode(key_name="ops", ssh_allowed_ips="0.0.0.0/0")},
        "Test/Cluster: head_node.ssh_allowed_ips must not open SSH to the whole internet, got '0.0.0.0/0', wider than a /8; give "
        "the VPC CIDR or a prefix list",
    ),
    (
        "ssh from half the internet",
        lambda p: {"head_node": HeadNode(key_name="ops", ssh_allowed_ips="128.0.0.0/1")},
        "Test/Cluster: head_node.ssh_allowed_ips must not open SSH to the whole internet, got '128.0.0.0/1', wider "
        "than a /8; give the VPC CIDR or a prefix list",
    ),
    (
        "ssh range that is not a cidr",
        lambda p: {"head_node": HeadNode(key_name="ops", ssh_allowed_ips="office")},
        "Test/Cluster: head_node.ssh_allowed_ips must be an IPv4 CIDR such as 10.0.0.0/16 or a prefix list id "
        "(pl-...), got 'office'",
    ),
    (
        "ssh range without a key",
        lambda p: {"head_node": HeadNode(ssh_allowed_ips="10.1.0.0/16")},
        "Test/Cluster: head_node.ssh_allowed_ips applies only with head_node.key_name (without a key pair, "
        "use SSM)",
    ),
    (
        "public subnet",
        lambda p: {"subnet": p.network.vpc.public_subnets[0]},
        "Test/Cluster: subnet is a public subnet; cluster nodes live in private subnets and never get a "
        "public IP",
    ),
    (
        "both file systems",
        lambda p: {"managed_file_system": ManagedLustre()},
        "Test/Cluster: managed_file_system cannot be given together with file_system; mount our SharedLustre "
        "or let ParallelCluster create one, not both",
    ),
    (
        "managed fsx 1000 GiB",
        lambda p: {"file_system": None, "managed_file_system": ManagedLustre(storage_capacity_gib=1000)},
        "Test/Cluster: managed_file_system.storage_capacity_gib must be 1200 or a multiple of 2400 for "
        "SCRATCH_2, got 1000",
    ),
    (
        "managed persistent without throughput",
        lambda p: {
            "file_system": None,
            "managed_file_system": ManagedLustre(deployment_type=LustreDeploymentType.PERSISTENT_2),
        },
        "Test/Cluster: managed_file_system.per_unit_storage_throughput_mbps is required for PERSISTENT_2; "
        "allowed: 125, 250, 500, 1000",
    ),
    (
        "reserved mount dir",
        lambda p: {"mount_dir": "/opt/slurm"},
        "Test/Cluster: mount_dir '/opt/slurm' is reserved by the operating system or ParallelCluster; use e.g. "
        "/shared or /fsx",
    ),
    (
        "relative mount dir",
        lambda p: {"mount_dir": "shared"},
        "Test/Cluster: mount_dir must be an absolute directory such as /shared, got 'shared'",
    ),
    (
        "log retention",
        lambda p: {"log_retention_days": 1096},
        "Test/Cluster: log_retention_days must be one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, "
        "545, 731, 1827, 3653, got 1096",
    ),
    (
        "scaledown idletime",
        lambda p: {"slurm_settings": SlurmSettings(scaledown_idletime_minutes=0)},
        "Test/Cluster: slurm_settings.scaledown_idletime_minutes must be 1 or more minutes, got 0",
    ),
    (
        "script key",
        lambda p: {
            "on_node_configured": CustomActionScript(
                bucket=s3.Bucket.from_bucket_name(p.stack, "Scripts", "my-scripts"), key="/setup.sh"
            )
        },
        "Test/Cluster: on_node_configured.key must be an object key such as scripts/on-node-configured.sh, "
        "got '/setup.sh'",
    ),
]


@pytest.mark.parametrize(("case", "props", "message"), BAD_PROPS, ids=[case for case, _, _ in BAD_PROPS])
def test_bad_props_are_clear_errors(
    parts: Parts, case: str, props: Callable[[Parts], dict[str, Any]], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        parts.cluster(**props(parts))
    if message.endswith(": ") or message.endswith(" "):  # long lists of catalogue types: check the start
        assert str(error.value).startswith(message)
    else:
        assert str(error.value) == message


@gated_stack("parallelcluster")
def _gated_parallelcluster(stack: cdk.Stack) -> None:
    parts = Parts(stack)
    bucket = s3.Bucket.from_bucket_name(parts.stack, "Scripts", "my-scripts")
    cluster = parts.cluster(
        head_node=HeadNode(key_name="ops"),
        queues=[
            SlurmQueue(name="gpu", compute_resources=[P5]),
            SlurmQueue(name="cpu", compute_resources=[T3]),
        ],
        on_node_configured=CustomActionScript(bucket=bucket, key="setup.sh"),
    )
    parts.fsx.allow_clients_from(cluster)


def test_parallelcluster_passes_the_gates(gated_stacks: GatedStacks) -> None:
    gated_stacks.get("parallelcluster").assert_clean()


def test_the_gated_cluster_acknowledges_only_the_session_wildcards_on_its_policy(
    gated_stacks: GatedStacks,
) -> None:
    assembly = gated_stacks.get("parallelcluster").assembly
    assert assembly is not None
    acknowledged = acknowledged_rules(Path(assembly.directory), "Test")
    assert acknowledged["/Test/Cluster/SessionManager"] == {EVERYTHING_FINDING, INSTANCES_FINDING}
    assert not {
        r
        for path, rules in acknowledged.items()
        if path.startswith("/Test/Cluster/")
        for r in rules
        if "IAM4" in r
    }


def test_the_provider_takes_your_own_lambda_role(parts: Parts) -> None:
    from aws_cdk import aws_iam as iam

    role = iam.Role.from_role_arn(parts.stack, "Bounded", "arn:aws:iam::111122223333:role/pcluster-provider")
    parts.cluster(provider_lambda_role=role)
    Template.from_stack(parts.stack).has_resource_properties(
        "AWS::CloudFormation::Stack",
        {"Parameters": {"CustomLambdaRole": "arn:aws:iam::111122223333:role/pcluster-provider"}},
    )


def test_the_provider_role_is_its_own_by_default_with_optional_policies(parts: Parts) -> None:
    from aws_cdk import aws_iam as iam

    policy = iam.ManagedPolicy.from_managed_policy_arn(
        parts.stack, "Extra", "arn:aws:iam::111122223333:policy/x"
    )
    parts.cluster(provider_additional_policies=[policy])
    (provider,) = Template.from_stack(parts.stack).find_resources("AWS::CloudFormation::Stack").values()
    assert "CustomLambdaRole" not in provider["Properties"]["Parameters"]
    assert (
        provider["Properties"]["Parameters"]["AdditionalIamPolicies"] == "arn:aws:iam::111122223333:policy/x"
    )


def test_provider_policies_with_your_own_role_are_refused(parts: Parts) -> None:
    from aws_cdk import aws_iam as iam

    role = iam.Role.from_role_arn(parts.stack, "Bounded", "arn:aws:iam::111122223333:role/pcluster-provider")
    policy = iam.ManagedPolicy.from_managed_policy_arn(
        parts.stack, "Extra", "arn:aws:iam::111122223333:policy/x"
    )
    with pytest.raises(
        ConfigurationError, match="provider_additional_policies apply only to the role the provider"
    ):
        parts.cluster(provider_lambda_role=role, provider_additional_policies=[policy])


# --------------------------------------------------------------------------------------------------
# capacity and GPU health checks

BLOCK = "cr-0123456789abcdef0"
RESERVATION_GROUP = "arn:aws:resource-groups:us-east-1:111122223333:group/p5-reservations"
P5_STATIC = ComputeResource(name="p5", instance_type="p5.48xlarge", min_count=2, max_count=2)


def _only_queue(parts: Parts, *queues: SlurmQueue) -> dict[str, Any]:
    queue: dict[str, Any] = resolved(parts.cluster(queues=list(queues)))["Scheduling"]["SlurmQueues"][0]
    return queue


def test_a_capacity_block_queue_targets_the_block_without_a_placement_group(parts: Parts) -> None:
    queue = _only_queue(
        parts, SlurmQueue(name="gpu", compute_resources=[P5_STATIC], capacity=Capacity.capacity_block(BLOCK))
    )
    assert queue["CapacityType"] == "CAPACITY_BLOCK"
    assert queue["CapacityReservationTarget"] == {"CapacityReservationId": BLOCK}
    # ParallelCluster's PlacementGroupCapacityTypeValidator: no placement group with a block
    assert queue["Networking"]["PlacementGroup"] == {"Enabled": False}


def test_a_block_on_one_compute_resource_makes_the_queue_capacity_block(parts: Parts) -> None:
    resource = ComputeResource(
        name="p5",
        instance_type="p5.48xlarge",
        min_count=1,
        max_count=1,
        capacity=Capacity.capacity_block(BLOCK),
    )
    queue = _only_queue(parts, SlurmQueue(name="gpu", compute_resources=[resource]))
    assert queue["CapacityType"] == "CAPACITY_BLOCK"
    assert "CapacityReservationTarget" not in queue
    [compute] = queue["ComputeResources"]
    assert compute["CapacityReservationTarget"] == {"CapacityReservationId": BLOCK}
    assert compute["Networking"] == {"PlacementGroup": {"Enabled": False}}


@pytest.mark.parametrize(
    ("capacity", "target", "placement"),
    [
        (Capacity.reservation(BLOCK), {"CapacityReservationId": BLOCK}, {"Enabled": False}),
        (Capacity.reservation(BLOCK, targeted=False), None, {"Enabled": False}),
        (
            Capacity.reservation(resource_group_arn=RESERVATION_GROUP),
            {"CapacityReservationResourceGroupArn": RESERVATION_GROUP},
            {"Enabled": False},
        ),
        (Capacity.reservation(BLOCK, in_placement_group=True), {"CapacityReservationId": BLOCK}, None),
    ],
    ids=["targeted", "open", "resource-group", "in-our-placement-group"],
)
def test_a_reservation_queue_stays_on_demand_and_keeps_the_group_only_when_made_in_it(
    parts: Parts, capacity: Capacity, target: dict[str, str] | None, placement: dict[str, Any] | None
) -> None:
    queue = _only_queue(parts, SlurmQueue(name="gpu", compute_resources=[P5], capacity=capacity))
    assert queue["CapacityType"] == "ONDEMAND"
    assert queue.get("CapacityReservationTarget") == target
    if placement is None:
        assert queue["Networking"]["PlacementGroup"]["Enabled"] is True
        assert "Name" in queue["Networking"]["PlacementGroup"]
    else:
        assert queue["Networking"]["PlacementGroup"] == placement


def test_a_placement_group_forced_onto_a_block_is_kept_with_a_warning(parts: Parts) -> None:
    queue = _only_queue(
        parts,
        SlurmQueue(
            name="gpu",
            compute_resources=[P5_STATIC],
            capacity=Capacity.capacity_block(BLOCK),
            placement=QueuePlacement.SHARED,
        ),
    )
    assert queue["Networking"]["PlacementGroup"]["Enabled"] is True
    warnings = Annotations.from_stack(parts.stack).find_warning("*", Match.string_like_regexp("placement"))
    assert any("training-clusters:capacity-placement" in str(w.entry.data) for w in warnings)


def test_a_spot_queue_is_capacity_spot_and_the_removed_capacity_type_is_a_type_error(parts: Parts) -> None:
    queue = _only_queue(parts, SlurmQueue(name="compute", compute_resources=[C5N], capacity=Capacity.spot()))
    assert queue["CapacityType"] == "SPOT"
    with pytest.raises(TypeError, match="unexpected keyword argument 'capacity_type'"):
        SlurmQueue(name="compute", compute_resources=[C5N], capacity_type="spot")  # type: ignore[call-arg]


def test_gpu_health_checks_are_on_for_gpus_unless_turned_off(parts: Parts) -> None:
    off = ComputeResource(name="p5-off", instance_type="p5.48xlarge", max_count=1, gpu_health_check=False)
    queue = _only_queue(parts, SlurmQueue(name="gpu", compute_resources=[P5, off, T3], placement="managed"))
    on, turned_off, cpu = queue["ComputeResources"]
    assert on["HealthChecks"] == {"Gpu": {"Enabled": True}}
    assert "HealthChecks" not in turned_off
    assert "HealthChecks" not in cpu


CAPACITY_BAD_PROPS: list[tuple[str, dict[str, Any], str]] = [
    (
        "training plan",
        {
            "queues": _queue(
                P5,
                capacity=Capacity.training_plan("arn:aws:sagemaker:us-east-1:111122223333:training-plan/p"),
            )
        },
        "Test/Cluster: queues[0].capacity training-plan is not supported by AWS ParallelCluster; use on-demand or "
        "spot or reservation or capacity-block",
    ),
    (
        "spot on a compute resource",
        {"queues": _queue(ComputeResource(name="p5", instance_type="p5.48xlarge", capacity=Capacity.spot()))},
        "Test/Cluster: queues[0].compute_resources[0].capacity of a compute resource must be a reservation or a "
        "capacity-block, got spot; on-demand and spot are the queue's capacity",
    ),
    (
        "block with dynamic nodes",
        {"queues": _queue(P5, capacity=Capacity.capacity_block(BLOCK))},
        f"Test/Cluster: queues[0] compute resource 'p5' uses Capacity Block {BLOCK}, whose nodes are all static: "
        "min_count must equal max_count and be 1 or more, got 0 and 4",
    ),
    (
        "block beside on-demand",
        {
            "queues": _queue(
                ComputeResource(
                    name="p5",
                    instance_type="p5.48xlarge",
                    min_count=1,
                    max_count=1,
                    capacity=Capacity.capacity_block(BLOCK),
                ),
                C5N,
            )
        },
        "Test/Cluster: queues[0] mixes Capacity Blocks with on-demand (compute resource 'c5n'); ParallelCluster's "
        "CapacityType is the queue's: put each Capacity Block in a queue of its own",
    ),
    (
        "reservation in a spot queue",
        {
            "queues": _queue(
                ComputeResource(
                    name="c5n", instance_type="c5n.9xlarge", capacity=Capacity.reservation(BLOCK)
                ),
                capacity=Capacity.spot(),
            )
        },
        f"Test/Cluster: queues[0] capacity is spot, but compute resource 'c5n' has capacity reservation {BLOCK}; "
        "reservations and Capacity Blocks hold On-Demand capacity: use an on-demand queue",
    ),
    (
        "gpu health check on a cpu",
        {"queues": _queue(ComputeResource(name="t3", instance_type="t3.medium", gpu_health_check=True))},
        "Test/Cluster: queues[0].compute_resources[0].gpu_health_check applies to NVIDIA GPU instance types (it "
        "runs DCGM diagnostics), got t3.medium",
    ),
]


@pytest.mark.parametrize(
    ("case", "props", "message"), CAPACITY_BAD_PROPS, ids=[case for case, _, _ in CAPACITY_BAD_PROPS]
)
def test_bad_capacities_are_clear_errors(
    parts: Parts, case: str, props: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        parts.cluster(**props)
    assert str(error.value) == message
