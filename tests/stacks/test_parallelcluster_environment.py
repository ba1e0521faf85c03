from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

from training_clusters.config import load_environment, parse_environment
from training_clusters.environments import stack_class
from training_clusters.model.errors import ConfigurationError
from training_clusters.stacks.parallelcluster import ParallelClusterEnvironment

from ..conftest import EnvironmentGates


def c5n_document(environments_dir: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((environments_dir / "parallelcluster-c5n.yaml").read_text())
    return document


def _shipped(gates: EnvironmentGates, path: Path) -> tuple[ParallelClusterEnvironment, Template]:
    """A shipped environment and its template, from the session's gated synth (no second synth)."""
    stack, _ = gates.get(path)
    assert isinstance(stack, ParallelClusterEnvironment)
    return stack, Template.from_json(gates.template(path))


def test_c5n_environment_is_a_t3_head_node_and_an_efa_queue_of_c5n(
    environment_gates: EnvironmentGates, environments_dir: Path
) -> None:
    stack, template = _shipped(environment_gates, environments_dir / "parallelcluster-c5n.yaml")
    config = stack.cluster.concrete_configuration()
    assert config["Image"] == {"Os": "alinux2023"}
    assert config["HeadNode"]["InstanceType"] == "t3.medium"
    assert config["HeadNode"]["Ssh"] == {"AllowedIps": "10.0.0.0/16"}
    (queue,) = config["Scheduling"]["SlurmQueues"]
    assert queue["Name"] == "compute"
    assert queue["ComputeResources"] == [
        {
            "Name": "c5n",
            "InstanceType": "c5n.9xlarge",
            "MinCount": 0,
            "MaxCount": 2,
            "Efa": {"Enabled": True, "GdrSupport": False},
        }
    ]
    assert queue["Networking"]["AssignPublicIp"] is False
    assert queue["Networking"]["PlacementGroup"]["Enabled"] is True
    assert config["SharedStorage"][0]["MountDir"] == "/shared"
    template.resource_properties_count_is("AWS::FSx::FileSystem", {"StorageCapacity": 1200}, 1)
    outputs = template.to_json()["Outputs"]
    assert outputs["ClusterName"]["Value"] == "c5n-training"
    assert stack.resolve(stack.cluster.head_node_instance_id) == {
        "Fn::GetAtt": [stack.get_logical_id(stack.cluster.resource.node.default_child), "headNode.instanceId"]
    }
    ssm = outputs["HeadNodeSsmCommand"]["Value"]["Fn::Join"][1]
    assert ssm[0] == "aws ssm start-session --target " and ssm[2] == " --region us-east-1"
    assert "ValidationMessages" in outputs and "HeadNodeInstanceId" in outputs


def test_file_system_and_nodes_allow_lustre_both_ways(
    environment_gates: EnvironmentGates, environments_dir: Path
) -> None:
    stack, template = _shipped(environment_gates, environments_dir / "parallelcluster-c5n.yaml")
    assert stack.shared_storage is not None
    fsx_group = stack.resolve(stack.shared_storage.security_group.security_group_id)
    node_group = stack.resolve(stack.cluster.security_group.security_group_id)
    for port in (988, 1018):
        template.has_resource_properties(
            "AWS::EC2::SecurityGroupIngress",
            {"GroupId": fsx_group, "SourceSecurityGroupId": node_group, "FromPort": port},
        )
        template.has_resource_properties(
            "AWS::EC2::SecurityGroupEgress",
            {"GroupId": fsx_group, "DestinationSecurityGroupId": node_group, "FromPort": port},
        )


def test_p5_environment_has_efa_and_gpudirect_rdma(
    environment_gates: EnvironmentGates, environments_dir: Path
) -> None:
    stack, template = _shipped(environment_gates, environments_dir / "parallelcluster-p5.yaml")
    config = stack.cluster.concrete_configuration()
    resource = config["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]
    assert resource["InstanceType"] == "p5.48xlarge"
    assert resource["Efa"] == {"Enabled": True, "GdrSupport": True}
    template.has_resource_properties(
        "AWS::FSx::FileSystem",
        {
            "LustreConfiguration": {
                "DeploymentType": "PERSISTENT_2",
                "PerUnitStorageThroughput": 250,
                "DataCompressionType": "LZ4",
            }
        },
    )


def test_parallelcluster_section_selects_the_stack_class(environments_dir: Path) -> None:
    config = load_environment(environments_dir / "parallelcluster-c5n.yaml")
    assert stack_class(config) is ParallelClusterEnvironment


def _compute(document: dict[str, Any]) -> dict[str, Any]:
    resource: dict[str, Any] = document["parallelcluster"]["queues"][0]["compute_resources"][0]
    return resource


BAD_FILES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "min above max",
        lambda d: _compute(d).update(min_count=3, max_count=2),
        "parallelcluster.queues.0.compute_resources.0: min_count 3 is greater than max_count 2",
    ),
    (
        "queue name",
        lambda d: d["parallelcluster"]["queues"][0].update(name="Compute_1"),
        "parallelcluster.queues.0.name: must start with a lowercase letter and hold only lowercase letters, "
        "digits and hyphens, got 'Compute_1'",
    ),
    (
        "duplicate queue names",
        lambda d: d["parallelcluster"]["queues"].append(copy.deepcopy(d["parallelcluster"]["queues"][0])),
        "parallelcluster.queues: names must be unique, got 'compute' more than once",
    ),
    (
        "fsx 1000 GiB",
        lambda d: d["storage"]["lustre"].update(storage_capacity_gib=1000),
        "storage.lustre: storage_capacity_gib must be 1200 or a multiple of 2400 for SCRATCH_2, got 1000",
    ),
    (
        "efa on t3.medium",
        lambda d: _compute(d).update(instance_type="t3.medium"),
        "parallelcluster.queues.0.compute_resources.0: efa is enabled, but t3.medium has no EFA interface; "
        "EFA-capable types in the catalogue: ",
    ),
    (
        "gdr on c5n.9xlarge",
        lambda d: _compute(d).update(gdr_support=True),
        "parallelcluster.queues.0.compute_resources.0: gdr_support is enabled, but c5n.9xlarge has no "
        "GPUDirect RDMA; types with it in the catalogue: ",
    ),
    (
        "os alinux2",
        lambda d: d["parallelcluster"].update(os="alinux2"),
        "parallelcluster.os: 'alinux2' is not allowed: Amazon Linux 2 is no longer supported by ParallelCluster "
        "3.16; use one of alinux2023, ubuntu2204, ubuntu2404, rhel8, rhel9, rocky8, rocky9",
    ),
    (
        "efa without placement",
        lambda d: d["parallelcluster"]["queues"][0].update(placement="none"),
        "parallelcluster.queues.0.placement: is none, but compute resource 'c5n' uses EFA, which needs a "
        "placement group; use shared or managed",
    ),
    (
        "unknown instance type",
        lambda d: _compute(d).update(instance_type="c5n.99xlarge"),
        "parallelcluster.queues.0.compute_resources.0.instance_type: 'c5n.99xlarge' is not in the catalogue "
        "(`training-clusters catalog` lists its types); give its facts in this file under instance_types: (name, "
        "vcpus, memory_gib, accelerators, max_efa_interfaces, gpudirect_rdma, network_gbps, quota_family, source)",
    ),
    (
        "ssh from the internet",
        lambda d: d["parallelcluster"]["head_node"].update(key_name="ops", ssh_allowed_ips="0.0.0.0/0"),
        "parallelcluster.head_node: ssh_allowed_ips must not open SSH to the whole internet, got '0.0.0.0/0', wider than a /8; "
        "give the VPC CIDR or a prefix list",
    ),
    (
        "ssh without a key",
        lambda d: d["parallelcluster"]["head_node"].update(ssh_allowed_ips="10.1.0.0/16"),
        "parallelcluster.head_node.ssh_allowed_ips: applies only with key_name (without a key pair, use SSM)",
    ),
    (
        "cluster name",
        lambda d: d["parallelcluster"].update(cluster_name="c5n_training"),
        "parallelcluster.cluster_name: must start with a letter and hold only letters, digits and hyphens, at "
        "most 60 characters, got 'c5n_training'",
    ),
    (
        "log retention",
        lambda d: d["parallelcluster"].update(log_retention_days=2),
        "parallelcluster.log_retention_days: must be one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, "
        "545, 731, 1827, 3653, got 2",
    ),
    (
        "custom action script",
        lambda d: d["parallelcluster"].update(on_node_configured={"script": "https://example.com/x.sh"}),
        "parallelcluster.on_node_configured.script: must be an s3://bucket/key URI, got 'https://example.com/x.sh'",
    ),
    (
        "unknown key",
        lambda d: d["parallelcluster"].update(key_pair="ops"),
        "parallelcluster.key_pair: unknown key (got value 'ops')",
    ),
]


@pytest.mark.parametrize(("case", "mutate", "message"), BAD_FILES, ids=[case for case, _, _ in BAD_FILES])
def test_bad_environment_files_name_the_field(
    environments_dir: Path, case: str, mutate: Callable[[dict[str, Any]], None], message: str
) -> None:
    document = c5n_document(environments_dir)
    mutate(document)
    with pytest.raises(ConfigurationError) as error:
        parse_environment(document, source="environments/parallelcluster-c5n.yaml")
    lines = str(error.value).splitlines()
    assert lines[0] == "environments/parallelcluster-c5n.yaml: 1 problem(s)"
    assert lines[1].strip().startswith(message)


def test_custom_action_script_from_the_environment_file(app: cdk.App, environments_dir: Path) -> None:
    document = c5n_document(environments_dir)
    document["parallelcluster"]["on_node_configured"] = {
        "script": "s3://my-scripts/pc/setup.sh",
        "args": ["-v"],
    }
    config = parse_environment(document)
    stack = ParallelClusterEnvironment(app, "training-c5n", config=config, environment_name="c5n")
    rendered = stack.cluster.concrete_configuration()
    assert rendered["HeadNode"]["CustomActions"] == {
        "OnNodeConfigured": {"Script": "s3://my-scripts/pc/setup.sh", "Args": ["-v"]}
    }


def test_the_provider_lambda_role_from_the_environment_file(app: cdk.App, environments_dir: Path) -> None:
    document = c5n_document(environments_dir)
    document["parallelcluster"]["provider_lambda_role_arn"] = (
        "arn:aws:iam::111122223333:role/pcluster-provider"
    )
    stack = ParallelClusterEnvironment(
        app, "training-c5n", config=parse_environment(document), environment_name="c5n"
    )
    (provider,) = Template.from_stack(stack).find_resources("AWS::CloudFormation::Stack").values()
    assert provider["Properties"]["Parameters"] == {
        "CustomLambdaRole": "arn:aws:iam::111122223333:role/pcluster-provider"
    }


def test_the_p5_environment_ships_the_topology_step_with_the_other_actions(
    environment_gates: EnvironmentGates, environments_dir: Path
) -> None:
    stack, template = _shipped(environment_gates, environments_dir / "parallelcluster-p5.yaml")
    config = stack.cluster.concrete_configuration()
    head = config["HeadNode"]
    bucket = head["Iam"]["S3Access"][0]["BucketName"]
    assert head["Iam"]["S3Access"] == [
        {"BucketName": bucket, "KeyName": "parallelcluster-actions/topology.sh"},
        {"BucketName": bucket, "KeyName": "parallelcluster-actions/topology.py"},
    ]
    module = f"s3://{bucket}/parallelcluster-actions/topology.py"
    assert head["CustomActions"] == {
        "OnNodeStart": {
            "Script": f"s3://{bucket}/parallelcluster-actions/topology.sh",
            "Args": [module, "us-east-1", "initial", "--conf", "/opt/slurm/etc/topology.conf", "--nodes",
                     "gpu-dy-p5-[1-4]"],
        },
        "OnNodeConfigured": {
            "Script": f"s3://{bucket}/parallelcluster-actions/topology.sh",
            "Args": [module, "us-east-1", "install", "--conf", "/opt/slurm/etc/topology.conf", "--cluster-name",
                     "p5-training", "--partition", "gpu"],
        },
    }  # fmt: skip
    assert config["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"] == [
        {"TopologyPlugin": "topology/tree"}
    ]
    deployment = next(iter(template.find_resources("Custom::CDKBucketDeployment").values()))
    assert deployment["Properties"]["DestinationBucketKeyPrefix"] == "parallelcluster-actions"
    assert (
        len(deployment["Properties"]["SourceObjectKeys"]) == 3
    )  # the actions, the shared node scripts, topology.py


@pytest.mark.parametrize(
    "queue_types", [["c5n.9xlarge"], ["p5.48xlarge", "c5n.9xlarge"]], ids=["c5n", "mixed"]
)
def test_no_topology_step_where_it_is_off_or_no_queue_has_it(
    app: cdk.App, environments_dir: Path, queue_types: list[str]
) -> None:
    document = c5n_document(environments_dir)
    document["parallelcluster"]["queues"][0]["compute_resources"] = [
        {"name": f"r{i}", "instance_type": name, "max_count": 2} for i, name in enumerate(queue_types)
    ]
    stack = ParallelClusterEnvironment(
        app, "training-c5n", config=parse_environment(document), environment_name="c5n"
    )
    rendered = stack.cluster.concrete_configuration()
    assert "CustomActions" not in rendered["HeadNode"]
    assert "CustomSlurmSettings" not in rendered["Scheduling"]["SlurmSettings"]
    assert stack.cluster.topology_policy is None
    assert Template.from_stack(stack).find_resources("Custom::CDKBucketDeployment") == {}


def test_topology_off_in_the_file_leaves_a_p5_cluster_flat(app: cdk.App, environments_dir: Path) -> None:
    document = yaml.safe_load((environments_dir / "parallelcluster-p5.yaml").read_text())
    document["parallelcluster"]["slurm"]["topology"] = "off"
    document["parallelcluster"]["slurm"]["custom_settings"] = [{"TopologyPlugin": "topology/block"}]
    stack = ParallelClusterEnvironment(
        app, "training-p5", config=parse_environment(document), environment_name="p5"
    )
    rendered = stack.cluster.concrete_configuration()
    assert "CustomActions" not in rendered["HeadNode"]
    assert rendered["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"] == [
        {"TopologyPlugin": "topology/block"}
    ]
    assert stack.cluster.topology_policy is None


def test_a_cluster_without_the_topology_step_uploads_no_topology_files(
    environment_gates: EnvironmentGates, environments_dir: Path
) -> None:
    """parallelcluster-team (c5n, users and pyxis): the actions and the shared node scripts, as before the step."""
    stack, template = _shipped(environment_gates, environments_dir / "parallelcluster-team.yaml")
    assert stack.cluster.topology_policy is None
    deployment = next(iter(template.find_resources("Custom::CDKBucketDeployment").values()))
    assert len(deployment["Properties"]["SourceObjectKeys"]) == 2
