from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match, Template

from training_clusters.constructs.common.lustre import SharedLustre
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.hyperpod.cluster import (
    API_GROUP_KEYS,
    LIFECYCLE_SETTING_KEYS,
    ON_CREATE_SCRIPT,
    PROVISIONING_PARAMETER_KEYS,
    DeepHealthCheck,
    HyperPodCluster,
    InstanceGroup,
    LifecycleOptions,
    LifecycleStep,
    LustreMount,
    NodeRole,
    Orchestrator,
    lifecycle_scripts_path,
)
from training_clusters.model.capacity import Capacity
from training_clusters.model.errors import ConfigurationError
from training_clusters.node_scripts import HYPERPOD_DIR, SHARED_DIR
from training_clusters.node_scripts.hyperpod.lib import cluster_config as lifecycle_files

from ..assertions import (
    all_traffic,
    allow,
    arn_prefix,
    deployed_files,
    ingress,
    logical_id,
    managed_policy_arns,
    role_statements,
    security_group_rules,
    trust,
    trust_statements,
)
from ..conftest import AZS, CDK_CONTEXT, REGION, GatedStacks, PinnedStack, gated_stack

CONTROLLER = InstanceGroup(name="controller-machine", instance_type="ml.c5.xlarge", role=NodeRole.CONTROLLER)
WORKERS = InstanceGroup(
    name="worker-group-1", instance_type="ml.c5.xlarge", instance_count=2, partition="dev"
)


def build(stack: cdk.Stack, groups: list[InstanceGroup] | None = None, **props: object) -> HyperPodCluster:
    """A cluster with the shared FSx; legacy Slurm configuration unless ``slurm_config`` is given (the
    API-driven one has its own tests, ``test_hyperpod_api.py``)."""
    if props.get("orchestrator") is None:
        props.setdefault("slurm_config", "legacy")
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
    }
    # Our own keys go to a file of our own: provisioning_parameters.json keeps HyperPod's reference keys.
    assert cluster.lifecycle_settings == {
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
    assert len(deployment["Properties"]["SourceObjectKeys"]) == 3  # scripts, parameters, our settings
    assert deployment["Properties"]["SourceMarkers"][1]  # the tokens (FSx DNS, mount name) to fill in


def test_the_scripts_upload_carries_the_shared_node_scripts_in_shared(tmp_path: Path) -> None:
    """The lifecycle scripts run from the folder HyperPod downloads and nothing else, so the scripts both services
    run (node_scripts/shared/: users.sh, the IMDS guard, enroot's folders) travel inside it as shared/, byte for
    byte what ParallelCluster's bucket gets; the scripts asset holds the hyperpod/ folder (but its README) and
    them, nothing else, as one source."""
    app = cdk.App(
        outdir=str(tmp_path / "cdk.out"),
        context=dict(CDK_CONTEXT),
        post_cli_context={"aws:cdk:disable-asset-staging": False},  # staged as cdk synth does
    )
    stack = PinnedStack(app, "Test", env=cdk.Environment(region=REGION))
    build(stack)
    assembly = app.synth()
    template = assembly.get_stack_by_name(stack.stack_name).template
    deployment = next(r for r in template["Resources"].values() if r["Type"] == "Custom::CDKBucketDeployment")
    own = {
        file.relative_to(HYPERPOD_DIR).as_posix(): file.read_bytes()
        for file in HYPERPOD_DIR.rglob("*")
        if file.is_file() and file.name != "README.md" and "__pycache__" not in file.parts
    }
    shared = {f"shared/{file.name}": file.read_bytes() for file in SHARED_DIR.glob("*.sh")}
    assert sorted(shared) == [
        "shared/training-clusters-enroot.sh",
        "shared/training-clusters-imds.sh",
        "shared/users.sh",
    ]
    scripts, *settings = deployed_files(assembly.directory, deployment)
    assert scripts == own | shared
    assert [sorted(files) for files in settings] == [
        ["provisioning_parameters.json"],
        ["training_clusters.json"],
    ]


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


#: Every statement of AWS's AmazonSageMakerClusterInstanceRolePolicy (its actions and resources), as AWS
#: publishes it: https://docs.aws.amazon.com/sagemaker/latest/dg/security-iam-awsmanpol-AmazonSageMakerClusterInstanceRolePolicy.html
#: The execution role must grant every action HyperPod's instances need, each on no more than this.
MANAGED_POLICY_STATEMENTS = {
    ("logs:PutLogEvents", "logs:CreateLogStream", "logs:DescribeLogStreams"): (
        "arn:aws:logs:*:*:log-group:/aws/sagemaker/Clusters/*:log-stream:*"
    ),
    ("logs:CreateLogGroup",): "arn:aws:logs:*:*:log-group:/aws/sagemaker/Clusters/*",
    ("cloudwatch:PutMetricData",): "*",  # with the condition cloudwatch:namespace = /aws/sagemaker/Clusters
    ("s3:ListBucket", "s3:GetObject"): "arn:aws:s3:::sagemaker-*",
    (
        "ssmmessages:CreateControlChannel",
        "ssmmessages:CreateDataChannel",
        "ssmmessages:OpenControlChannel",
        "ssmmessages:OpenDataChannel",
    ): "*",
}


def _execution_role(stack: cdk.Stack, cluster: HyperPodCluster) -> tuple[dict[str, Any], str]:
    return Template.from_stack(stack).to_json(), logical_id(cluster.role)


def test_execution_role_trusts_sagemaker_and_carries_no_managed_policy(stack: cdk.Stack) -> None:
    template, role = _execution_role(stack, build(stack))
    assert trust_statements(template, role) == {trust({"Service:sagemaker.amazonaws.com"})}
    assert managed_policy_arns(template, role) == set()


def test_execution_role_grants_exactly_what_the_instances_need_scoped_to_this_cluster(
    stack: cdk.Stack,
) -> None:
    """Every statement of the role, whole: this cluster's log groups, its lifecycle prefix (read only), the
    ENI actions on its subnet and groups, nothing on ``sagemaker-*`` buckets and no S3 write."""
    cluster = build(stack)
    template, role = _execution_role(stack, cluster)
    bucket = logical_id(cluster.bucket)
    network = stack.node.find_child("Network")
    groups = [
        f"{arn_prefix(stack, 'ec2')}security-group/${{{logical_id(g)}.GroupId}}"
        for g in (cluster.security_group, network.efa_security_group)
    ]
    subnet = f"{arn_prefix(stack, 'ec2')}subnet/${{{logical_id(network.placement_subnet())}}}"
    log_groups = f"{arn_prefix(stack, 'logs')}log-group:/aws/sagemaker/Clusters/ml-cluster/*"
    assert role_statements(template, role) == {
        allow({"logs:CreateLogGroup"}, {log_groups}),
        allow(
            {"logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"},
            {f"{log_groups}:log-stream:*"},
        ),
        allow(
            {"cloudwatch:PutMetricData"},
            {"*"},
            {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Clusters"}},
        ),
        allow(
            {"s3:GetBucket*", "s3:GetObject*", "s3:List*"},
            {f"${{{bucket}.Arn}}", f"${{{bucket}.Arn}}/lifecycle/ml-cluster/*"},
        ),
        allow(
            {
                "ec2:CreateNetworkInterface",
                "ec2:CreateNetworkInterfacePermission",
                "ec2:DeleteNetworkInterface",
                "ec2:DeleteNetworkInterfacePermission",
                "ec2:DetachNetworkInterface",
            },
            {f"{arn_prefix(stack, 'ec2')}network-interface/*", subnet, *groups},
        ),
        allow(
            {"ec2:CreateTags"},
            {f"{arn_prefix(stack, 'ec2')}network-interface/*"},
            {"StringEquals": {"ec2:CreateAction": "CreateNetworkInterface"}},
        ),
        allow(
            {
                "ec2:DescribeDhcpOptions",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeVpcs",
                "fsx:DescribeFileSystems",
            },
            {"*"},
        ),
        allow(
            {
                "ssmmessages:CreateControlChannel",
                "ssmmessages:CreateDataChannel",
                "ssmmessages:OpenControlChannel",
                "ssmmessages:OpenDataChannel",
            },
            {"*"},
        ),
    }


def test_a_passed_execution_role_may_use_the_extra_volumes_customer_key_and_nothing_else(
    stack: cdk.Stack,
) -> None:
    """HyperPod attaches an extra EBS volume with the execution role: a role the cluster did not make gets,
    from a policy of the cluster's, exactly ``kms:CreateGrant`` and ``kms:DescribeKey`` on that volume's key
    (and the lifecycle prefix read), every statement whole."""
    role = iam.Role(stack, "Execution", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    key = kms.Key(stack, "VolumeKey", enable_key_rotation=True, removal_policy=cdk.RemovalPolicy.DESTROY)
    workers = InstanceGroup(
        name="worker-group-1",
        instance_type="ml.c5.xlarge",
        partition="dev",
        extra_volume_gib=500,
        extra_volume_kms_key=key,
    )
    cluster = build(stack, [CONTROLLER, workers], role=role)

    template = Template.from_stack(stack).to_json()
    bucket = logical_id(cluster.bucket)
    assert role_statements(template, logical_id(role)) == {
        allow(
            {"s3:GetBucket*", "s3:GetObject*", "s3:List*"},
            {f"${{{bucket}.Arn}}", f"${{{bucket}.Arn}}/lifecycle/ml-cluster/*"},
        ),
        allow({"kms:CreateGrant", "kms:DescribeKey"}, {f"${{{logical_id(key)}.Arn}}"}),
    }


def test_cluster_group_admits_its_members_and_the_file_system_and_sends_anywhere(stack: cdk.Stack) -> None:
    cluster = build(stack)
    template = Template.from_stack(stack).to_json()
    group, fsx = logical_id(cluster.security_group), logical_id(stack.node.find_child("Fsx").security_group)
    assert security_group_rules(template, group) == {
        all_traffic("ingress", group),
        ingress(fsx, 988),
        ingress(fsx, (1018, 1023)),
        all_traffic("egress", "0.0.0.0/0"),
    }


def test_execution_role_grants_every_action_of_aws_managed_policy(stack: cdk.Stack) -> None:
    """What AWS's managed policy grants HyperPod's instances, each action granted here too (in grant_read's
    spelling for S3)."""
    template, role = _execution_role(stack, build(stack))
    granted = {action for statement in role_statements(template, role) for action in statement.actions}
    spelling = {"s3:ListBucket": "s3:List*", "s3:GetObject": "s3:GetObject*"}
    needed = {spelling.get(action, action) for actions in MANAGED_POLICY_STATEMENTS for action in actions}
    assert needed - granted == set()


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


# -- lifecycle extension point and replacement folder (issue 12 item 5, issue 18 item 6) ----------

STEP_SCRIPT = (
    '#!/bin/bash\nset -eu\necho "team step on the $TC_ROLE"\ntouch "${TC_ROOT}/var/tmp/team-step-ran"\n'
)


def step_script(tmp_path: Path, name: str = "team.sh") -> Path:
    script = tmp_path / name
    script.write_text(STEP_SCRIPT)
    return script


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: tmp / "nowhere", "which does not exist"),
        (lambda tmp: (tmp / "a-file").write_text("x") and tmp / "a-file", "a file"),
        (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "which has no on_create.sh"),
    ],
    ids=["missing", "file", "without-on_create"],
)
def test_a_replacement_scripts_folder_is_checked_at_synth(
    stack: cdk.Stack, tmp_path: Path, make: object, message: str
) -> None:
    folder = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(ConfigurationError) as error:
        build(stack, lifecycle_scripts_dir=folder)
    assert str(error.value) == (
        "Test/HyperPod: lifecycle_scripts_dir must be a folder holding on_create.sh, the script HyperPod runs "
        f"on every node, got '{folder}', {message}"
    )


def test_extra_steps_are_uploaded_and_listed_for_the_scripts(stack: cdk.Stack, tmp_path: Path) -> None:
    steps = (
        LifecycleStep(name="team", script=step_script(tmp_path)),
        LifecycleStep(name="workers_only", script=step_script(tmp_path, "w.sh"), roles=["Worker"]),
    )
    # Staged for real (the suite skips asset staging) to read the uploaded step back.
    app = cdk.App(outdir=str(tmp_path / "out"), post_cli_context={"aws:cdk:disable-asset-staging": False})
    staged_stack = cdk.Stack(app, "Staged")
    cluster = build(
        staged_stack,
        lifecycle=LifecycleOptions(extra_steps=steps, extra={"slurm_requeue_exit_codes": [75, 99]}),
    )

    assert cluster.lifecycle_settings["extra_steps"] == [
        {"name": "team", "script": "user_steps/team.sh", "roles": ["controller", "login", "worker"]},
        {"name": "workers_only", "script": "user_steps/workers_only.sh", "roles": ["worker"]},
    ]
    assert cluster.lifecycle_settings["slurm_requeue_exit_codes"] == [75, 99]
    assert "slurm_requeue_exit_codes" not in cluster.provisioning_parameters
    assembly = app.synth()
    template = assembly.get_stack_by_name("Staged").template
    deployment = next(r for r in template["Resources"].values() if r["Type"] == "Custom::CDKBucketDeployment")
    assert len(deployment["Properties"]["SourceObjectKeys"]) == 5  # scripts, 2 JSON files, 2 steps
    [staged] = Path(assembly.directory).glob("asset.*/user_steps/team.sh")
    assert staged.read_text() == STEP_SCRIPT


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (
            {"name": "bad name"},
            "lifecycle.extra_steps[0].name must be 1-63 letters, digits, '-' or '_' starting with a letter or "
            "digit, got 'bad name'",
        ),
        (
            {"script": "missing.sh"},
            "lifecycle.extra_steps[0].script must be a script file, got 'missing.sh', which does not exist",
        ),
        (
            {"roles": ["gpu"]},
            "lifecycle.extra_steps[0].roles[0] must be one of controller, login, worker, got 'gpu'",
        ),
        (
            {"roles": []},
            "lifecycle.extra_steps[0].roles must be a list of controller, login, worker (leave it out "
            "for every role), got []",
        ),
        (
            {"roles": "worker"},
            # refused at the boundary (@checked_props), before the construct runs
            "lifecycle.extra_steps[0].roles must be a list of controller, login, worker (or None), got str "
            "'worker'",
        ),
    ],
)
def test_bad_extra_steps_are_clear_errors(
    stack: cdk.Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: dict[str, object], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    props: dict[str, object] = {"name": "team", "script": step_script(tmp_path), **step}
    with pytest.raises(ConfigurationError) as error:
        build(stack, lifecycle=LifecycleOptions(extra_steps=[LifecycleStep(**props)]))  # type: ignore[arg-type]
    assert str(error.value) == f"Test/HyperPod: {message}"


def test_two_extra_steps_with_one_name_are_a_clear_error(stack: cdk.Stack, tmp_path: Path) -> None:
    step = LifecycleStep(name="team", script=step_script(tmp_path))
    with pytest.raises(ConfigurationError) as error:
        build(stack, lifecycle=LifecycleOptions(extra_steps=[step, step]))
    assert str(error.value) == "Test/HyperPod: lifecycle.extra_steps[1].name 'team' is used twice"


def test_extra_steps_with_a_replacement_folder_are_a_clear_error(stack: cdk.Stack, tmp_path: Path) -> None:
    folder = tmp_path / "own"
    folder.mkdir()
    (folder / ON_CREATE_SCRIPT).write_text("#!/bin/bash\n")
    step = LifecycleStep(name="team", script=step_script(tmp_path))
    with pytest.raises(ConfigurationError) as error:
        build(stack, lifecycle=LifecycleOptions(extra_steps=[step]), lifecycle_scripts_dir=folder)
    assert str(error.value) == (
        "Test/HyperPod: lifecycle.extra_steps are run by the shipped on_create.sh, so they cannot go with "
        f"lifecycle_scripts_dir '{folder}': call your scripts from your own on_create.sh, or leave "
        "lifecycle_scripts_dir out"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"extra_steps": [{"name": "again", "script": ON_CREATE_SCRIPT, "roles": ["worker"]}]},
            "extra_steps (set by lifecycle.extra_steps)",
        ),
        ({"users": [{"name": "root", "uid": 0}]}, "users (set by users)"),
        ({"accounting": {"mode": "local"}}, "accounting (set by accounting)"),
        ({"controller_group": "worker-group-1"}, "controller_group (set by instance_groups)"),
        ({"fsx_mount_dir": "/etc"}, "fsx_mount_dir (set by lustre.mount_dir)"),
        (
            {"fsx_dns_name": "x;reboot", "slurm_requeue_exit_codes": [75], "enable_docker": True},
            "fsx_dns_name (set by lustre.dns_name), enable_docker (set by lifecycle.enable_docker)",
        ),
    ],
    ids=["extra_steps", "users", "accounting", "controller_group", "fsx_mount_dir", "two-keys"],
)
def test_extra_keys_the_construct_writes_itself_are_clear_errors(
    stack: cdk.Stack, extra: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        build(stack, lifecycle=LifecycleOptions(extra=extra))
    assert str(error.value) == (
        f"Test/HyperPod: lifecycle.extra sets {message}, which the construct writes itself from the props "
        "that check them; set those props instead"
    )


def test_extra_keys_the_construct_writes_are_refused_with_replacement_scripts_too(
    stack: cdk.Stack, tmp_path: Path
) -> None:
    folder = tmp_path / "own"
    folder.mkdir()
    (folder / ON_CREATE_SCRIPT).write_text("#!/bin/bash\n")
    with pytest.raises(ConfigurationError) as error:
        build(stack, lifecycle=LifecycleOptions(extra={"worker_groups": []}), lifecycle_scripts_dir=folder)
    assert str(error.value) == (
        "Test/HyperPod: lifecycle.extra sets worker_groups (set by instance_groups), which the construct writes "
        "itself from the props that check them; set those props instead"
    )


@pytest.mark.parametrize(
    "script",
    [lambda tmp: step_script(tmp, ON_CREATE_SCRIPT), lambda tmp: lifecycle_scripts_path() / ON_CREATE_SCRIPT],
    ids=["own-file-named-on_create", "the-shipped-on_create"],
)
def test_a_step_that_would_run_on_create_again_is_a_clear_error(
    stack: cdk.Stack, tmp_path: Path, script: Any
) -> None:
    path = script(tmp_path)
    with pytest.raises(ConfigurationError) as error:
        build(stack, lifecycle=LifecycleOptions(extra_steps=[LifecycleStep(name="again", script=path)]))
    assert str(error.value) == (
        "Test/HyperPod: lifecycle.extra_steps[0].script must be a script of your own, not on_create.sh or "
        "another shipped lifecycle script (the shipped on_create.sh runs every step, so the step would run it "
        f"again without end), got '{path}'"
    )


def test_a_step_may_not_be_another_shipped_lifecycle_script(stack: cdk.Stack) -> None:
    shipped = next(p for p in sorted(lifecycle_scripts_path().rglob("*.sh")) if p.name != ON_CREATE_SCRIPT)
    with pytest.raises(ConfigurationError, match="must be a script of your own"):
        build(stack, lifecycle=LifecycleOptions(extra_steps=[LifecycleStep(name="again", script=shipped)]))


def _with_lustre(stack: cdk.Stack, **lustre: str) -> HyperPodCluster:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    names = {
        "dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        "mount_name": "abcdefgh",
        **lustre,
    }
    return HyperPodCluster(
        stack,
        "HyperPod",
        cluster_name="ml-cluster",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[CONTROLLER, WORKERS],
        lustre=LustreMount(**names),
        slurm_config="legacy",
    )


@pytest.mark.parametrize(
    ("lustre", "message"),
    [
        (
            {"dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com;reboot"},
            "lustre.dns_name must be the file system's DNS name, letters, digits, hyphens and dots such as "
            "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com, got "
            "'fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com;reboot'",
        ),
        (
            {"mount_name": "$(id)"},
            "lustre.mount_name must be the file system's mount name, 1-8 letters, digits, '_' or '-' such as "
            "'abcdefgh' (FSx's MountName), got '$(id)'",
        ),
        (
            {"mount_dir": "/home"},
            "lustre.mount_dir '/home' is reserved by the operating system, Slurm or HyperPod; use e.g. /fsx or "
            "/shared",
        ),
        (
            {"mount_dir": "/opt/sagemaker"},
            "lustre.mount_dir '/opt/sagemaker' is reserved by the operating system, Slurm or HyperPod; use e.g. "
            "/fsx or /shared",
        ),
        (
            {"mount_dir": "/fsx/../etc"},
            "lustre.mount_dir must not contain '.' or '..' segments, got '/fsx/../etc'",
        ),
        ({"mount_dir": "fsx"}, "lustre.mount_dir must be an absolute directory such as /fsx, got 'fsx'"),
    ],
    ids=["dns-command", "mount-name-command", "home", "opt-sagemaker", "dot-dot", "relative"],
)
def test_bad_lustre_mounts_are_clear_errors(stack: cdk.Stack, lustre: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        _with_lustre(stack, **lustre)
    assert str(error.value) == f"Test/HyperPod: {message}"


def test_lustre_names_of_the_china_partition_are_accepted(stack: cdk.Stack) -> None:
    cluster = _with_lustre(
        stack, dns_name="fs-0123456789abcdef0.fsx.cn-north-1.amazonaws.com.cn", mount_name="fsx"
    )
    assert cluster.provisioning_parameters["fsx_mountname"] == "fsx"


def test_extra_keys_go_to_the_file_that_reads_them(stack: cdk.Stack, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as error:
        build(stack, lifecycle=LifecycleOptions(extra={"enable_observabilty": True}))
    assert str(error.value).startswith(
        "Test/HyperPod: lifecycle.extra holds 'enable_observabilty', which the shipped lifecycle scripts do "
        "not read; allowed: accounting, controller_group, download_sha256, enable_docker, enable_enroot_pyxis,"
    )
    folder = tmp_path / "own"
    folder.mkdir()
    (folder / ON_CREATE_SCRIPT).write_text("#!/bin/bash\n")
    own = build(
        cdk.Stack(cdk.App(), "Own"),
        lifecycle=LifecycleOptions(extra={"team_setting": 1, "version": "2.0.0"}),
        lifecycle_scripts_dir=folder,
    )
    assert own.provisioning_parameters["team_setting"] == 1  # their own scripts read what they want
    assert own.provisioning_parameters["version"] == "2.0.0"


SSH_KEY = "ssh-ed25519 AAAAC3Nz alice@laptop"


def test_the_keys_come_from_the_module_the_nodes_run() -> None:
    """The construct's lists of keys are the node module's, and that module is the one shipped in the
    lifecycle folder (``lib/cluster_config.sh`` runs it there, in the uploaded bundle), not a copy beside it."""
    from tests.lifecycle.sandbox import PROVISIONING_PARAMETER_KEYS as SANDBOX_KEYS

    shipped = HYPERPOD_DIR / "lib" / "cluster_config.py"
    assert Path(lifecycle_files.__file__).resolve() == shipped.resolve()
    assert (lifecycle_scripts_path() / "lib" / "cluster_config.py").read_bytes() == shipped.read_bytes()
    assert '"$TC_CLUSTER_CONFIG_PY" params' in (shipped.parent / "cluster_config.sh").read_text()
    assert frozenset(lifecycle_files.PARAMETER_KEYS) == PROVISIONING_PARAMETER_KEYS
    assert frozenset(lifecycle_files.SETTING_KEYS) == LIFECYCLE_SETTING_KEYS
    assert frozenset(lifecycle_files.GROUP_KEYS) == API_GROUP_KEYS
    assert SANDBOX_KEYS == PROVISIONING_PARAMETER_KEYS


@pytest.mark.parametrize("slurm_config", ["legacy", "api"])
def test_the_node_module_reads_every_key_the_construct_writes(
    stack: cdk.Stack, tmp_path: Path, slurm_config: str
) -> None:
    """With every lifecycle option on, each key the construct writes is one the node module reads from that
    file: it accepts both files without a warning, and a key it reads from training_clusters.json in
    provisioning_parameters.json is warned about."""
    from training_clusters.constructs.slurm.users import TeamUser

    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    cluster = HyperPodCluster(
        stack,
        "HyperPod",
        cluster_name="ml-cluster",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[
            CONTROLLER,
            InstanceGroup(name="login-group", instance_type="ml.m5.xlarge", role=NodeRole.LOGIN),
            InstanceGroup(name="worker-group-1", instance_type="ml.c5.xlarge", partition="dev"),
        ],
        lustre=LustreMount(
            dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", mount_name="abcdefgh"
        ),
        users=[TeamUser(name="alice", uid=2001, groups={"ml-team": 3000}, ssh_public_keys=[SSH_KEY])],
        **({"accounting": "local"} if slurm_config == "legacy" else {}),  # type: ignore[arg-type]
        lifecycle=LifecycleOptions(
            enable_observability=True,
            enable_docker=True,
            enable_pam_slurm_adopt=True,
            team_logins_on_controller=True,
            extra_steps=[LifecycleStep(name="team", script=step_script(tmp_path))],
            extra={
                "slurm_requeue_exit_codes": [75, 76],
                "download_sha256": {"https://example.com/a": "a" * 64},
            },
        ),
        slurm_config=slurm_config,
    )
    params = cluster.provisioning_parameters
    settings = cluster.lifecycle_settings
    (tmp_path / "user_steps").mkdir()
    (tmp_path / "user_steps" / "team.sh").write_text(STEP_SCRIPT)
    (tmp_path / "training_clusters.json").write_text(json.dumps(settings))
    params_path = ""
    if params is not None:
        params_path = str(tmp_path / "provisioning_parameters.json")
        Path(params_path).write_text(json.dumps(params))
    warnings: list[str] = []

    out, lines = lifecycle_files.read_params(
        params_path, str(tmp_path / "training_clusters.json"), str(tmp_path), warnings.append
    )

    assert warnings == []
    if slurm_config == "legacy":  # every key the module reads, but slurm_config (legacy is the default)
        assert set(settings) == LIFECYCLE_SETTING_KEYS - {"slurm_config"}
        assert params is not None and set(params) == PROVISIONING_PARAMETER_KEYS
    else:  # the groups too, and no accounting: HyperPod's own
        assert set(settings) == (LIFECYCLE_SETTING_KEYS - {"accounting"}) | API_GROUP_KEYS
        assert params is None
    assert (out["accounting_mode"], out["slurm_requeue_exit"]) == (
        "local" if slurm_config == "legacy" else "none",
        "75,76",
    )
    assert lines == [
        "worker_group=worker-group-1:dev",
        "extra_step=team:user_steps/team.sh:controller,login,worker",
        "user=alice:2001:2001",
        "user_group=alice:ml-team:3000",
        f"download_sha256={'a' * 64} https://example.com/a",
    ]
    if params is not None:  # our keys in HyperPod's file are ignored, with a warning naming each
        Path(params_path).write_text(json.dumps({**params, **settings}))
        lifecycle_files.read_params(
            params_path, str(tmp_path / "training_clusters.json"), str(tmp_path), warnings.append
        )
        assert warnings == [
            f"provisioning_parameters.json: {key} is ignored there: it belongs in training_clusters.json"
            for key in lifecycle_files.SETTING_KEYS
            if key in settings
        ]


def test_the_scripts_run_with_the_files_the_construct_writes(stack: cdk.Stack, tmp_path: Path) -> None:
    """The generated provisioning_parameters.json, training_clusters.json and user step, on a sandboxed
    worker: the scripts accept them and run the step after theirs."""
    from tests.lifecycle.sandbox import Sandbox, link_real_tools

    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    groups = [
        CONTROLLER,
        InstanceGroup(name="login-group", instance_type="ml.m5.xlarge", role=NodeRole.LOGIN),
        InstanceGroup(name="worker-group-1", instance_type="ml.c5.xlarge", instance_count=2, partition="dev"),
        InstanceGroup(name="worker-group-2", instance_type="ml.c5.xlarge", partition="train"),
    ]
    cluster = HyperPodCluster(
        stack,
        "HyperPod",
        cluster_name="ml-cluster",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=groups,
        lustre=LustreMount(
            dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", mount_name="abcdefgh"
        ),
        lifecycle=LifecycleOptions(extra_steps=[LifecycleStep(name="team", script=step_script(tmp_path))]),
        slurm_config="legacy",
    )
    (tmp_path / "tools").mkdir()
    sandbox = Sandbox(tmp=tmp_path / "node", tools=link_real_tools(tmp_path / "tools"))
    (sandbox.scripts / "provisioning_parameters.json").write_text(json.dumps(cluster.provisioning_parameters))
    (sandbox.scripts / "training_clusters.json").write_text(json.dumps(cluster.lifecycle_settings))
    (sandbox.scripts / "user_steps").mkdir()
    (sandbox.scripts / "user_steps" / "team.sh").write_text(STEP_SCRIPT)
    sandbox.path("var/tmp").mkdir(parents=True)

    run = sandbox.run()

    assert run.returncode == 0, run.output
    unpinned = "is not verified: no download_sha256 entry pins it"  # the enroot and pyxis downloads
    assert [line for line in run.log.splitlines() if "WARN" in line and unpinned not in line] == []
    assert "team step on the worker" in run.log
    assert sandbox.path("var/tmp/team-step-ran").exists()


# --------------------------------------------------------------------------------------------------
# capacity: training plans, and what HyperPod refuses

PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"


def test_a_training_plan_becomes_the_groups_training_plan_arn(stack: cdk.Stack) -> None:
    planned = InstanceGroup(
        name="gpu", instance_type="ml.p5.48xlarge", instance_count=2, partition="gpu",
        capacity=Capacity.training_plan(PLAN),
    )  # fmt: skip
    build(stack, [CONTROLLER, planned])
    groups = next(iter(Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster").values()))[
        "Properties"
    ]["InstanceGroups"]
    assert "TrainingPlanArn" not in groups[0]
    assert groups[1]["TrainingPlanArn"] == PLAN


@pytest.mark.parametrize(
    ("env", "refused"),
    [
        (
            cdk.Environment(region="us-west-2"),
            "training_plan_arn is in us-east-1, but the stack deploys to us-west-2; use one bought in us-west-2, or "
            "deploy to us-east-1",
        ),
        (
            cdk.Environment(region="us-east-1", account="444455556666"),
            "training_plan_arn belongs to account 111122223333, but the stack deploys to account 444455556666; use "
            "one of 444455556666's, or deploy to 111122223333",
        ),
        (cdk.Environment(region="us-east-1", account="111122223333"), None),
        (None, None),  # an environment-agnostic stack: region and account are tokens, not compared
    ],
    ids=["other-region", "other-account", "same-place", "agnostic"],
)
def test_a_training_plan_of_another_region_or_account_is_refused(
    app: cdk.App, env: cdk.Environment | None, refused: str | None
) -> None:
    stack = PinnedStack(app, "Test", env=env)
    planned = InstanceGroup(
        name="gpu", instance_type="ml.p5.48xlarge", instance_count=2, partition="gpu",
        capacity=Capacity.training_plan(PLAN),
    )  # fmt: skip
    if refused is None:
        build(stack, [CONTROLLER, planned])
        return
    with pytest.raises(ConfigurationError) as error:
        build(stack, [CONTROLLER, planned])
    assert str(error.value) == f"Test/HyperPod: instance_groups[1].capacity.{refused}"


@pytest.mark.parametrize(
    ("capacity", "message"),
    [
        (Capacity.spot(), "spot is not supported by SageMaker HyperPod; use on-demand or training-plan"),
        (
            Capacity.reservation(resource_group_arn="arn:aws:resource-groups:us-east-1:111122223333:group/r"),
            "reservation is not supported by SageMaker HyperPod; use on-demand or training-plan",
        ),
        (
            Capacity.capacity_block("cr-0123456789abcdef0"),
            "capacity-block is not supported by SageMaker HyperPod; use on-demand or training-plan",
        ),
    ],
    ids=["spot", "resource-group", "capacity-block"],
)
def test_hyperpod_refuses_capacity_it_cannot_use(stack: cdk.Stack, capacity: Capacity, message: str) -> None:
    group = InstanceGroup(name="gpu", instance_type="ml.p5.48xlarge", partition="gpu", capacity=capacity)
    with pytest.raises(ConfigurationError) as error:
        build(stack, [CONTROLLER, group])
    assert str(error.value) == f"Test/HyperPod: instance_groups[1].capacity {message}"
