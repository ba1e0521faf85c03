from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from training_clusters.constructs.hyperpod import (
    ON_CREATE_SCRIPT,
    DeepHealthCheck,
    HyperPodCluster,
    InstanceGroup,
    LustreMount,
    NodeRole,
    Orchestrator,
    lifecycle_scripts_path,
)
from training_clusters.constructs.lustre import SharedLustre
from training_clusters.constructs.network import TrainingNetwork
from training_clusters.errors import ConfigurationError

from ..conftest import AZS, GatedStacks, gated_stack

CONTROLLER = InstanceGroup(name="controller-machine", instance_type="ml.c5.xlarge", role=NodeRole.CONTROLLER)
WORKERS = InstanceGroup(
    name="worker-group-1", instance_type="ml.c5.xlarge", instance_count=2, partition="dev"
)


def build(stack: cdk.Stack, groups: list[InstanceGroup] | None = None, **props: object) -> HyperPodCluster:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    fs = SharedLustre(stack, "Fsx", vpc=network.vpc, subnet=network.placement_subnet())
    cluster = HyperPodCluster(
        stack,
        "HyperPod",
        cluster_name="ml-cluster",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=groups if groups is not None else [CONTROLLER, WORKERS],
        lustre=LustreMount(dns_name=fs.dns_name, mount_name=fs.mount_name, mount_dir="/fsx"),
        additional_security_groups=[network.efa_security_group],
        **props,  # type: ignore[arg-type]
    )
    fs.allow_clients_from(cluster)
    return cluster


def test_cluster_runs_on_create_from_the_deployed_prefix(stack: cdk.Stack) -> None:
    cluster = build(stack)
    template = Template.from_stack(stack)
    bucket = stack.resolve(cluster.bucket.bucket_name)
    expected_uri = {"Fn::Join": ["", ["s3://", bucket, "/lifecycle/ml-cluster/"]]}
    template.has_resource_properties(
        "AWS::SageMaker::Cluster",
        {
            "ClusterName": "ml-cluster",
            "NodeRecovery": "Automatic",
            "InstanceGroups": [
                Match.object_like(
                    {
                        "InstanceGroupName": "controller-machine",
                        "InstanceType": "ml.c5.xlarge",
                        "InstanceCount": 1,
                        "ThreadsPerCore": 1,
                        "LifeCycleConfig": {"SourceS3Uri": expected_uri, "OnCreate": ON_CREATE_SCRIPT},
                    }
                ),
                Match.object_like({"InstanceGroupName": "worker-group-1", "InstanceCount": 2}),
            ],
            "VpcConfig": {"SecurityGroupIds": Match.any_value(), "Subnets": [Match.any_value()]},
        },
    )
    template.has_resource_properties(
        "Custom::CDKBucketDeployment",
        {"DestinationBucketName": bucket, "DestinationBucketKeyPrefix": "lifecycle/ml-cluster/"},
    )


def test_the_shipped_entry_script_exists() -> None:
    assert (lifecycle_scripts_path() / ON_CREATE_SCRIPT).is_file()


def test_provisioning_parameters_match_the_groups_and_the_fsx(stack: cdk.Stack) -> None:
    cluster = build(stack)
    params = stack.resolve(cluster.provisioning_parameters)
    fs = stack.node.find_child("Fsx")
    assert isinstance(fs, SharedLustre)
    assert params == {
        "version": "1.0.0",
        "workload_manager": "slurm",
        "controller_group": "controller-machine",
        "worker_groups": [{"instance_group_name": "worker-group-1", "partition_name": "dev"}],
        "fsx_dns_name": stack.resolve(fs.dns_name),
        "fsx_mountname": stack.resolve(fs.mount_name),
        "fsx_mount_dir": "/fsx",
        "enable_enroot_pyxis": True,
        "enable_observability": False,
    }


def test_provisioning_parameters_are_uploaded_as_a_file(stack: cdk.Stack, tmp_path: Path) -> None:
    build(stack)
    assembly = cdk.Stage.of(stack).synth()  # type: ignore[union-attr]
    assert assembly.directory
    # Source.json_data stages the document as a zip asset whose markers are replaced at deploy time.
    template = assembly.get_stack_by_name(stack.stack_name).template
    deployment = next(r for r in template["Resources"].values() if r["Type"] == "Custom::CDKBucketDeployment")
    assert len(deployment["Properties"]["SourceObjectKeys"]) == 2
    assert deployment["Properties"]["SourceMarkers"][1]  # the tokens (FSx DNS, mount name) to fill in


def test_login_group_is_named_in_the_parameters(stack: cdk.Stack) -> None:
    login = InstanceGroup(name="login-group", instance_type="ml.m5.xlarge", role=NodeRole.LOGIN)
    cluster = build(stack, [CONTROLLER, login, WORKERS])
    assert cluster.provisioning_parameters["login_group"] == "login-group"


def test_gpu_groups_get_deep_health_checks_by_default_and_cpu_groups_none(stack: cdk.Stack) -> None:
    gpu = InstanceGroup(name="gpu", instance_type="ml.p5.48xlarge", instance_count=2, partition="gpu")
    build(stack, [CONTROLLER, gpu])
    groups = next(iter(Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster").values()))[
        "Properties"
    ]["InstanceGroups"]
    assert "OnStartDeepHealthChecks" not in groups[0]
    assert groups[1]["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]


def test_extra_volume_becomes_instance_storage(stack: cdk.Stack) -> None:
    gpu = InstanceGroup(name="gpu", instance_type="ml.p5.48xlarge", partition="gpu", extra_volume_gib=500)
    build(stack, [CONTROLLER, gpu])
    Template.from_stack(stack).has_resource_properties(
        "AWS::SageMaker::Cluster",
        {
            "InstanceGroups": Match.array_with(
                [
                    Match.object_like(
                        {"InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]}
                    )
                ]
            )
        },
    )


def test_execution_role_trusts_sagemaker_and_reads_only_the_lifecycle_prefix(stack: cdk.Stack) -> None:
    cluster = build(stack)
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": Match.object_like(
                {"Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]}
            ),
            "ManagedPolicyArns": [
                Match.object_like(
                    {
                        "Fn::Join": [
                            "",
                            Match.array_with(
                                [Match.string_like_regexp("AmazonSageMakerClusterInstanceRolePolicy")]
                            ),
                        ]
                    }
                )
            ],
        },
    )
    role_ref = stack.resolve(cluster.role.role_name)
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [role_ref]}})
    policy = json.dumps(list(policies.values()))
    for action in (
        "ec2:CreateNetworkInterface",
        "ec2:CreateNetworkInterfacePermission",
        "ec2:DeleteNetworkInterface",
        "ec2:DeleteNetworkInterfacePermission",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeVpcs",
        "ec2:DescribeDhcpOptions",
        "ec2:DescribeSubnets",
        "ec2:DescribeSecurityGroups",
        "ec2:DetachNetworkInterface",
        "ec2:CreateTags",
        "fsx:DescribeFileSystems",
        "s3:GetObject*",
    ):
        assert action in policy, action
    assert "/lifecycle/ml-cluster/*" in policy
    assert "s3:PutObject" not in policy


def test_cluster_waits_for_the_upload_and_the_role_policy(stack: cdk.Stack) -> None:
    build(stack)
    template = Template.from_stack(stack)
    cluster = next(iter(template.find_resources("AWS::SageMaker::Cluster").values()))
    depends = " ".join(cluster["DependsOn"])
    assert "LifecycleScriptsCustomResource" in depends
    assert "ExecutionRoleDefaultPolicy" in depends


def test_lifecycle_bucket_is_sagemaker_prefixed_and_retained(stack: cdk.Stack) -> None:
    build(stack)
    buckets = Template.from_stack(stack).find_resources(
        "AWS::S3::Bucket", {"Properties": {"BucketName": Match.any_value()}}
    )
    (bucket,) = buckets.values()
    assert bucket["Properties"]["BucketName"]["Fn::Join"][1][0].startswith("sagemaker-")
    assert bucket["DeletionPolicy"] == "Retain"


def test_eks_orchestrator_without_own_scripts_is_a_clear_error(stack: cdk.Stack) -> None:
    worker = InstanceGroup(name="gpu", instance_type="ml.g5.8xlarge")
    with pytest.raises(ConfigurationError) as error:
        build(stack, [worker], orchestrator=Orchestrator.eks("arn:aws:eks:us-east-1:123456789012:cluster/t"))
    assert str(error.value) == (
        "Test/HyperPod: lifecycle_scripts_dir is required with the EKS orchestrator: the shipped lifecycle "
        "scripts configure Slurm nodes"
    )


def test_eks_orchestrator_sets_the_cluster_arn_and_needs_no_controller(
    stack: cdk.Stack, tmp_path: Path
) -> None:
    scripts = tmp_path / "eks-scripts"
    scripts.mkdir()
    (scripts / "on_create.sh").write_text("#!/bin/bash\necho eks node\n")
    arn = "arn:aws:eks:us-east-1:123456789012:cluster/training"
    worker = InstanceGroup(name="gpu", instance_type="ml.g5.8xlarge", instance_count=2)
    cluster = build(stack, [worker], orchestrator=Orchestrator.eks(arn), lifecycle_scripts_dir=scripts)
    Template.from_stack(stack).has_resource_properties(
        "AWS::SageMaker::Cluster", {"Orchestrator": {"Eks": {"ClusterArn": arn}}}
    )
    assert cluster.provisioning_parameters["workload_manager"] == "eks"


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        (
            [WORKERS],
            "Test/HyperPod: instance_groups need exactly one CONTROLLER group under Slurm, got 0 (none)",
        ),
        (
            [
                CONTROLLER,
                InstanceGroup(name="c2", instance_type="ml.c5.xlarge", role=NodeRole.CONTROLLER),
                WORKERS,
            ],
            "Test/HyperPod: instance_groups need exactly one CONTROLLER group under Slurm, got 2 "
            "(controller-machine, c2)",
        ),
        (
            [CONTROLLER, InstanceGroup(name="w", instance_type="ml.c5.xlarge")],
            "Test/HyperPod: instance_groups[1].partition is required for WORKER group 'w'",
        ),
        (
            [CONTROLLER, InstanceGroup(name="w", instance_type="c5.xlarge", partition="dev")],
            "Test/HyperPod: instance_groups[1].instance_type: HyperPod instance types start with 'ml.', got "
            "'c5.xlarge' (did you mean 'ml.c5.xlarge'?)",
        ),
        (
            [
                CONTROLLER,
                InstanceGroup(name="w", instance_type="ml.c5.xlarge", partition="dev", threads_per_core=3),
            ],
            "Test/HyperPod: instance_groups[1].threads_per_core must be 1 or 2, got 3",
        ),
        (
            [
                CONTROLLER,
                InstanceGroup(name="w", instance_type="ml.c5.xlarge", partition="dev", instance_count=0),
            ],
            "Test/HyperPod: instance_groups[1].instance_count must be 1 or more, got 0",
        ),
        (
            [
                CONTROLLER,
                InstanceGroup(name="controller-machine", instance_type="ml.c5.xlarge", partition="dev"),
            ],
            "Test/HyperPod: instance_groups[1].name 'controller-machine' is used twice",
        ),
        (
            [
                InstanceGroup(
                    name="c", instance_type="ml.c5.xlarge", role=NodeRole.CONTROLLER, instance_count=2
                ),
                WORKERS,
            ],
            "Test/HyperPod: instance_groups[0].instance_count of the CONTROLLER group must be 1, got 2",
        ),
        (
            [CONTROLLER],
            "Test/HyperPod: instance_groups need at least one WORKER group to run jobs, got none",
        ),
        (
            [
                CONTROLLER,
                InstanceGroup(
                    name="w",
                    instance_type="ml.c5.xlarge",
                    partition="dev",
                    deep_health_checks=(DeepHealthCheck.INSTANCE_STRESS,),
                ),
            ],
            "Test/HyperPod: instance_groups[1].deep_health_checks run on GPU and Trainium instances only, got "
            "ml.c5.xlarge",
        ),
        (
            [
                CONTROLLER,
                InstanceGroup(name="w", instance_type="ml.c5.xlarge", partition="dev", extra_volume_gib=0),
            ],
            "Test/HyperPod: instance_groups[1].extra_volume_gib must be between 1 and 16384, got 0",
        ),
        (
            [
                InstanceGroup(
                    name="c", instance_type="ml.c5.xlarge", role=NodeRole.CONTROLLER, partition="x"
                ),
                WORKERS,
            ],
            "Test/HyperPod: instance_groups[0].partition applies to WORKER groups only, got 'x' on CONTROLLER "
            "group 'c'",
        ),
        (
            [CONTROLLER, InstanceGroup(name="under_score", instance_type="ml.c5.xlarge", partition="dev")],
            "Test/HyperPod: instance_groups[1].name must be 1-63 letters, digits and hyphens, starting and ending with a letter or digit (no '_' or '.'), got 'under_score'",
        ),
    ],
)
def test_bad_groups_are_clear_errors(stack: cdk.Stack, groups: list[InstanceGroup], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        build(stack, groups)
    assert str(error.value) == message


def test_unknown_hyperpod_type_is_a_clear_error(stack: cdk.Stack) -> None:
    with pytest.raises(ConfigurationError, match=r"instance_groups\[1\].instance_type: 'ml.p9.huge'"):
        build(stack, [CONTROLLER, InstanceGroup(name="w", instance_type="ml.p9.huge", partition="dev")])


@pytest.mark.parametrize("name", ["ml_cluster", "a" * 64, "-cluster", ""])
def test_bad_cluster_name_is_a_clear_error(stack: cdk.Stack, name: str) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    with pytest.raises(ConfigurationError) as error:
        HyperPodCluster(
            stack,
            "HyperPod",
            cluster_name=name,
            vpc=network.vpc,
            subnet=network.placement_subnet(),
            instance_groups=[CONTROLLER, WORKERS],
        )
    assert str(error.value) == (
        "Test/HyperPod: cluster_name must be 1-63 letters, digits and hyphens, starting and ending with a letter "
        f"or digit (no '_' or '.'), got '{name}'"
    )


@gated_stack("hyperpod")
def _gated_hyperpod(stack: cdk.Stack) -> None:
    build(stack)


def test_hyperpod_passes_the_gates(gated_stacks: GatedStacks) -> None:
    gated_stacks.get("hyperpod").assert_clean()
