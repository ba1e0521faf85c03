"""HyperPodCluster for a team (issue 15): Slurm accounting (an external SlurmAccountingDatabase or MariaDB on the
controller), the team's users, Docker and pam_slurm_adopt as lifecycle options, custom AMIs, root and encrypted
volumes, continuous provisioning."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template
from constructs import IConstruct

from training_clusters.constructs import SlurmAccountingDatabase, TeamUser
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.hyperpod.cluster import (
    HyperPodCluster,
    InstanceGroup,
    LifecycleOptions,
    NodeRole,
)
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import HyperPodAccounting, NodeProvisioningMode

from ..assertions import (
    NO_EGRESS,
    Statement,
    allow,
    egress,
    ingress,
    logical_id,
    policy_statements,
    role_statements,
    security_group_rules,
    text,
)
from ..conftest import AZS, REGION
from .parts import StorageAndCluster
from .test_hyperpod import CONTROLLER, WORKERS, build

ALICE = TeamUser(
    name="alice", uid=2001, groups={"ml-team": 3000}, ssh_public_keys=["ssh-ed25519 AAAAC3Nz alice@laptop"]
)


def _cluster_props(stack: cdk.Stack) -> dict[str, Any]:
    [props] = [
        r["Properties"] for r in Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster").values()
    ]
    return props


def _policy_statements(stack: cdk.Stack) -> list[Statement]:
    """Every statement of every inline-attached policy of ``stack``."""
    template = Template.from_stack(stack).to_json()
    return [
        statement
        for key, resource in template["Resources"].items()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in policy_statements(template, key)
    ]


def _secret_statements(template: dict[str, Any], role: IConstruct) -> set[Statement]:
    """The statements granting ``role`` a Secrets Manager action."""
    return {
        statement
        for statement in role_statements(template, logical_id(role))
        if any(action.startswith("secretsmanager:") for action in statement.actions)
    }


def test_an_external_database_goes_to_the_nodes_and_its_secret_only_to_the_role(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, removal_policy="destroy")
    team = HyperPodCluster(
        stack,
        "Team",
        slurm_config="legacy",
        cluster_name="team",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[CONTROLLER, WORKERS],
        accounting=db,
    )
    db.connections.allow_default_port_from(team.controller_connections)  # the stack's wiring

    assert team.accounting_database is db
    settings = team.lifecycle_settings["accounting"]
    # slurmdbd's own database user, never the master user: the node takes it from slurmdbd's secret (no "user",
    # which would pin one of the two users a rotation alternates)
    assert settings["mode"] == "external" and settings["port"] == 3306 and "user" not in settings
    assert stack.resolve(settings["host"]) == stack.resolve(db.endpoint)
    assert stack.resolve(settings["secret_arn"]) == stack.resolve(db.slurmdbd_secret.secret_arn)
    template = Template.from_stack(stack).to_json()
    assert _secret_statements(template, team.controller_role) == {
        allow({"secretsmanager:GetSecretValue"}, [stack.resolve(db.slurmdbd_secret.secret_arn)])
    }
    # the controller alone reads it: team members run code on login and worker nodes
    assert team.controller_role is not team.role
    groups = {g["InstanceGroupName"]: g["ExecutionRole"] for g in _cluster_props(stack)["InstanceGroups"]}
    assert groups == {
        "controller-machine": stack.resolve(team.controller_role.role_arn),
        "worker-group-1": stack.resolve(team.role.role_arn),
    }
    assert _secret_statements(template, team.role) == set()
    controller, database = logical_id(team.controller_security_group), logical_id(db.security_group)
    handler = logical_id(db.user_handler.connections.security_groups[0])
    # the controller's own group reaches MySQL and nothing else; the database admits it and its user handler
    assert security_group_rules(template, controller) == {egress(database, 3306)}
    assert security_group_rules(template, database) == {
        ingress(controller, 3306),
        ingress(handler, 3306),
        NO_EGRESS,
    }


def test_only_the_controller_carries_the_group_the_database_admits(stack: cdk.Stack) -> None:
    """HyperPod's OverrideVpcConfig on the controller group alone: the cluster's subnet and groups plus the
    controller's own; workers (where team users run code) keep the cluster's VpcConfig."""
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, removal_policy="destroy")
    team = HyperPodCluster(
        stack,
        "Team",
        slurm_config="legacy",
        cluster_name="team",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[CONTROLLER, WORKERS],
        accounting=db,
    )
    assert team.controller_security_group is not None
    props = _cluster_props(stack)
    overrides = {g["InstanceGroupName"]: g.get("OverrideVpcConfig") for g in props["InstanceGroups"]}
    cluster_groups = [stack.resolve(sg.security_group_id) for sg in team.security_groups]
    assert props["VpcConfig"]["SecurityGroupIds"] == cluster_groups
    assert overrides == {
        "controller-machine": {
            "SecurityGroupIds": [
                *cluster_groups,
                stack.resolve(team.controller_security_group.security_group_id),
            ],
            "Subnets": props["VpcConfig"]["Subnets"],
        },
        "worker-group-1": None,
    }
    [controller_group] = [
        r["Properties"]
        for r in Template.from_stack(stack).find_resources("AWS::EC2::SecurityGroup").values()
        if "the Slurm controller" in r["Properties"]["GroupDescription"]
    ]
    assert "SecurityGroupIngress" not in controller_group  # it only names the controller
    # both roles may create the controller's interface with its groups
    for role in (team.role, team.controller_role):
        [eni] = [
            st
            for p in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
            if p["Properties"]["Roles"] == [stack.resolve(role.role_name)]
            for st in p["Properties"]["PolicyDocument"]["Statement"]
            if st.get("Sid") == "ManageClusterEnis"
        ]
        expected = stack.format_arn(
            service="ec2",
            resource="security-group",
            resource_name=team.controller_security_group.security_group_id,
        )
        assert stack.resolve(expected) in eni["Resource"]


def test_no_controller_group_without_a_database(stack: cdk.Stack) -> None:
    cluster = build(stack, accounting="local")

    assert cluster.controller_security_group is None
    assert all("OverrideVpcConfig" not in g for g in _cluster_props(stack)["InstanceGroups"])
    with pytest.raises(ConfigurationError) as error:
        cluster.controller_connections  # noqa: B018
    assert str(error.value) == (
        "Test/HyperPod: controller_connections exist only with an accounting database "
        "(accounting=SlurmAccountingDatabase), got accounting LOCAL"
    )


def test_local_accounting_needs_no_secret(stack: cdk.Stack) -> None:
    cluster = build(stack, accounting="local")

    assert cluster.lifecycle_settings["accounting"] == {"mode": "local"}
    assert cluster.accounting_database is None
    assert cluster.controller_role is cluster.role  # nothing only the controller may read
    granted = {action for statement in _policy_statements(stack) for action in statement.actions}
    assert granted and not {action for action in granted if action.startswith("secretsmanager:")}


def test_no_accounting_by_default(stack: cdk.Stack) -> None:
    cluster = build(stack)

    assert "accounting" not in cluster.lifecycle_settings
    assert "users" not in cluster.lifecycle_settings
    assert "NodeProvisioningMode" not in _cluster_props(stack)


def test_external_without_the_database_is_a_clear_error(stack: cdk.Stack) -> None:
    with pytest.raises(ConfigurationError) as error:
        build(stack, accounting=HyperPodAccounting.EXTERNAL)
    assert str(error.value) == (
        "Test/HyperPod: accounting EXTERNAL needs the database itself: pass the SlurmAccountingDatabase, "
        "got the option EXTERNAL"
    )


def test_users_and_options_go_to_the_scripts_settings(stack: cdk.Stack) -> None:
    cluster = build(
        stack,
        users=[ALICE, TeamUser(name="bob", uid=2002, gid=2100)],
        lifecycle=LifecycleOptions(enable_docker=True, enable_pam_slurm_adopt=True),
    )

    assert cluster.lifecycle_settings["users"] == [
        {
            "name": "alice",
            "uid": 2001,
            "gid": 2001,
            "groups": [{"name": "ml-team", "gid": 3000}],
            "ssh_public_keys": ["ssh-ed25519 AAAAC3Nz alice@laptop"],
        },
        {"name": "bob", "uid": 2002, "gid": 2100, "groups": [], "ssh_public_keys": []},
    ]
    assert cluster.lifecycle_settings["enable_docker"] is True
    assert cluster.lifecycle_settings["enable_pam_slurm_adopt"] is True


def test_pam_slurm_adopt_reaches_every_worker_group(stack: cdk.Stack) -> None:
    """One settings file for the whole cluster, every worker group in worker_groups (the scripts make each of
    them a worker, tests/lifecycle/test_lifecycle_team.py), and every group runs the same uploaded scripts."""
    gpus = dataclasses.replace(WORKERS, name="gpu-workers", partition="gpu", instance_count=1)
    cluster = build(
        stack, groups=[CONTROLLER, WORKERS, gpus], lifecycle=LifecycleOptions(enable_pam_slurm_adopt=True)
    )

    assert cluster.lifecycle_settings["enable_pam_slurm_adopt"] is True
    assert cluster.provisioning_parameters["worker_groups"] == [
        {"instance_group_name": "worker-group-1", "partition_name": "dev"},
        {"instance_group_name": "gpu-workers", "partition_name": "gpu"},
    ]
    [resource] = Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster").values()
    configs = {g["InstanceGroupName"]: g["LifeCycleConfig"] for g in resource["Properties"]["InstanceGroups"]}
    assert set(configs) == {"controller-machine", "worker-group-1", "gpu-workers"}
    assert len({json.dumps(config, sort_keys=True) for config in configs.values()}) == 1


@pytest.mark.parametrize(
    ("users", "message"),
    [
        (
            [TeamUser(name="ubuntu", uid=2001)],
            "users[0].name 'ubuntu' is already a user or group on the nodes (Ubuntu's cloud image and HyperPod's "
            "DLAMI); pick another name",
        ),
        (
            [TeamUser(name="alice", uid=2001, groups={"wheel": 3000})],
            "users[0].groups['wheel'] 'wheel' confers rights on the nodes: members of wheel run any command as root (%wheel "
            "in Amazon Linux's and Rocky's /etc/sudoers); pick another name",
        ),
        (
            [TeamUser(name="alice", uid=2001, ssh_public_keys=["ssh-ed25519 AAAAC3Nz alice\x07"])],
            "users[0].ssh_public_keys[0] must have a comment without control characters, got the comment "
            "'alice\\x07'",
        ),
        ([TeamUser(name="alice", uid=1000)], "users[0].uid must be 2000 to 59999"),
        ([ALICE, TeamUser(name="bob", uid=2001)], "users[1].uid 2001 is already given to another user"),
        (
            [ALICE, TeamUser(name="bob", uid=2002, groups={"ml-team": 3001})],
            "users group 'ml-team' is given gids 3000 and 3001; every node needs one",
        ),
        (
            [TeamUser(name="alice", uid=2001, ssh_public_keys=["hello"])],
            "users[0].ssh_public_keys[0] must be one OpenSSH public key line",
        ),
    ],
)
def test_bad_users_are_clear_errors(stack: cdk.Stack, users: list[TeamUser], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        build(stack, users=users)
    assert str(error.value).startswith(f"Test/HyperPod: {message}")


def test_custom_ami_volumes_and_continuous_provisioning(stack: cdk.Stack) -> None:
    key = kms.Key(stack, "VolumeKey", enable_key_rotation=True, removal_policy=cdk.RemovalPolicy.DESTROY)
    groups = [
        InstanceGroup(
            name="controller-machine",
            instance_type="ml.c5.xlarge",
            role=NodeRole.CONTROLLER,
            image_id="ami-0123456789abcdef0",
            root_volume_gib=200,
        ),
        InstanceGroup(
            name="worker-group-1",
            instance_type="ml.c5.xlarge",
            partition="dev",
            extra_volume_gib=500,
            extra_volume_kms_key=key,
        ),
    ]
    # Continuous provisioning on Slurm is API-driven: FSx goes after the volumes, no strategy is sent.
    cluster = build(stack, groups, node_provisioning_mode=NodeProvisioningMode.CONTINUOUS, slurm_config="api")

    props = _cluster_props(stack)
    assert props["NodeProvisioningMode"] == "Continuous"
    assert props["Orchestrator"] == {"Slurm": {}}
    assert cluster.slurm_config_strategy is None
    fs = stack.node.find_child("Fsx")
    fsx = {
        "FsxLustreConfig": {
            "DnsName": stack.resolve(fs.dns_name),  # type: ignore[attr-defined]
            "MountName": stack.resolve(fs.mount_name),  # type: ignore[attr-defined]
            "MountPath": "/fsx",
        }
    }
    controller, worker = props["InstanceGroups"]
    assert controller["ImageId"] == "ami-0123456789abcdef0"
    assert controller["InstanceStorageConfigs"] == [
        {"EbsVolumeConfig": {"RootVolume": True, "VolumeSizeInGB": 200}},
        fsx,
    ]
    assert "ImageId" not in worker
    assert worker["InstanceStorageConfigs"] == [
        {"EbsVolumeConfig": {"VolumeSizeInGB": 500, "VolumeKmsKeyId": stack.resolve(key.key_arn)}},
        fsx,
    ]
    key_statements = [st for st in _policy_statements(stack) if any(a.startswith("kms:") for a in st.actions)]
    assert key_statements == [allow({"kms:CreateGrant", "kms:DescribeKey"}, [stack.resolve(key.key_arn)])]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"image_id": "ubuntu-22.04"},
            "instance_groups[1].image_id must be an AMI id such as 'ami-0123456789abcdef0', got 'ubuntu-22.04'",
        ),
        (
            {"root_volume_gib": 50},
            "instance_groups[1].root_volume_gib must be between 100 (HyperPod's root volume) and 16384, got 50",
        ),
        ({"extra_volume_kms_key": "key"}, "instance_groups[1].extra_volume_kms_key"),
    ],
)
def test_bad_storage_and_images_are_clear_errors(
    stack: cdk.Stack, change: dict[str, Any], message: str
) -> None:
    if change.get("extra_volume_kms_key") == "key":
        change = {"extra_volume_kms_key": kms.Key(stack, "Key")}
        message += " encrypts the extra volume, so it needs extra_volume_gib"
    with pytest.raises(ConfigurationError) as error:
        build(stack, [CONTROLLER, dataclasses.replace(WORKERS, **change)])
    assert str(error.value) == f"Test/HyperPod: {message}"


def test_the_scripts_accept_the_team_settings_the_construct_writes(stack: cdk.Stack, tmp_path: Path) -> None:
    """training_clusters.json as the construct writes it for a team, on a sandboxed controller: local accounting,
    users and Docker are set up."""
    from tests.lifecycle.sandbox import Sandbox, link_real_tools

    cluster = build(
        stack,
        accounting="local",
        users=[ALICE],
        lifecycle=LifecycleOptions(enable_docker=True),
    )
    (tmp_path / "tools").mkdir()
    sandbox = Sandbox(tmp=tmp_path / "node", tools=link_real_tools(tmp_path / "tools"))
    settings = {**cluster.lifecycle_settings, "fsx_mount_dir": "/fsx"}
    (sandbox.scripts / "training_clusters.json").write_text(json.dumps(settings))

    run = sandbox.as_role("controller").run()

    assert run.returncode == 0, run.output
    for step in ("users", "docker", "accounting"):
        assert f"step '{step}' done" in run.log
    assert "alice:x:2001:2001::/fsx/alice:/bin/bash" in (sandbox.state / "passwd").read_text()


def test_team_settings_need_the_shipped_scripts(stack: cdk.Stack, tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "on_create.sh").write_text("#!/bin/bash\n")
    with pytest.raises(ConfigurationError) as error:
        build(stack, accounting="local", lifecycle_scripts_dir=own)
    assert str(error.value) == (
        "Test/HyperPod: accounting is set up by the shipped Slurm lifecycle scripts, so it cannot go with "
        "lifecycle_scripts_dir or the EKS orchestrator, got LOCAL"
    )
    other = cdk.Stack(cdk.App(), "Other")
    with pytest.raises(ConfigurationError) as error:
        build(other, users=[ALICE], lifecycle_scripts_dir=own)
    assert str(error.value) == (
        "Other/HyperPod: users are created by the shipped Slurm lifecycle scripts, so they cannot go with "
        "lifecycle_scripts_dir or the EKS orchestrator"
    )


def test_a_role_of_another_stack_gets_its_grants_from_a_policy_in_the_clusters_stack() -> None:
    """The role's own stack is left as it was: it must not come to depend on the cluster or the database."""
    layout = StorageAndCluster()
    iam_stack = cdk.Stack(layout.app, "Iam", env=cdk.Environment(region=REGION))
    role = iam.Role(iam_stack, "Execution", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    key = kms.Key(layout.storage, "VolumeKey", removal_policy=cdk.RemovalPolicy.DESTROY)
    db = SlurmAccountingDatabase(
        layout.storage, "Accounting", vpc=layout.network.vpc, removal_policy="destroy"
    )
    workers = dataclasses.replace(WORKERS, extra_volume_gib=500, extra_volume_kms_key=key)
    HyperPodCluster(
        layout.cluster,
        "Team",
        slurm_config="legacy",
        cluster_name="team",
        vpc=layout.network.vpc,
        subnet=layout.network.placement_subnet(),
        instance_groups=[CONTROLLER, workers],
        accounting=db,
        role=role,
    )

    assert Template.from_stack(iam_stack).find_resources("AWS::IAM::Policy") == {}
    policies = Template.from_stack(layout.cluster).find_resources("AWS::IAM::Policy")
    template = Template.from_stack(layout.cluster).to_json()
    imported = text(layout.cluster.resolve(role.role_name))
    for_role = [
        statement
        for key in policies
        if [text(r) for r in template["Resources"][key]["Properties"]["Roles"]] == [imported]
        for statement in policy_statements(template, key)
    ]
    bucket = "TeamLifecycleBucketC5F27EE3"
    assert set(for_role) == {
        allow(
            {"s3:GetObject*", "s3:GetBucket*", "s3:List*"},
            {f"${{{bucket}.Arn}}", f"${{{bucket}.Arn}}/lifecycle/team/*"},
        ),
        allow({"secretsmanager:GetSecretValue"}, [layout.cluster.resolve(db.slurmdbd_secret.secret_arn)]),
        allow({"kms:CreateGrant", "kms:DescribeKey"}, [layout.cluster.resolve(key.key_arn)]),
    }  # the lifecycle prefix (the bucket has no key), slurmdbd's secret, the volume key
    layout.app.synth()  # no dependency cycle


def _logical_ids_under(stack: cdk.Stack, *scopes: IConstruct) -> list[str]:
    """The logical ids of every CloudFormation resource in ``scopes``' subtrees, sorted."""
    return sorted(
        stack.get_logical_id(c)
        for scope in scopes
        for c in scope.node.find_all()
        if isinstance(c, cdk.CfnResource)
    )


def _database_layout(
    with_cluster: bool,
) -> tuple[StorageAndCluster, SlurmAccountingDatabase, HyperPodCluster | None]:
    layout = StorageAndCluster()
    db = SlurmAccountingDatabase(
        layout.storage, "Accounting", vpc=layout.network.vpc, removal_policy="destroy"
    )
    if not with_cluster:
        return layout, db, None
    cluster = HyperPodCluster(
        layout.cluster,
        "Team",
        slurm_config="legacy",
        cluster_name="team",
        vpc=layout.network.vpc,
        subnet=layout.network.placement_subnet(),
        instance_groups=[CONTROLLER, WORKERS],
        accounting=db,
    )
    db.connections.allow_default_port_from(cluster.controller_connections)
    return layout, db, cluster


def test_the_cluster_waits_for_the_database_writer_of_its_own_stack(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, removal_policy="destroy")
    cluster = HyperPodCluster(
        stack,
        "Team",
        slurm_config="legacy",
        cluster_name="team",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[CONTROLLER, WORKERS],
        accounting=db,
    )
    [resource] = Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster").values()
    assert sorted(resource["DependsOn"]) == sorted(
        {
            *_logical_ids_under(
                stack, cluster.deployment, cluster.role, cluster.controller_role, db.writer, db.user
            )
        }
    )
    assert stack.get_logical_id(db.writer.node.default_child) in resource["DependsOn"]  # type: ignore[arg-type]
    # slurmdbd connects as its own user: the cluster waits for the custom resource that makes it
    assert stack.get_logical_id(db.user.node.default_child) in resource["DependsOn"]  # type: ignore[arg-type]


def test_a_database_in_another_stack_makes_the_cluster_stack_wait_for_it_and_adds_nothing_there() -> None:
    """Across stacks the wait is a stack dependency (CloudFormation cannot DependsOn another stack's
    resource); the database's stack stays as it is, with no dependency on the cluster's (no cycle)."""
    layout, db, cluster = _database_layout(with_cluster=True)
    assert cluster is not None
    assembly = layout.app.synth()  # no dependency cycle
    [resource] = Template.from_stack(layout.cluster).find_resources("AWS::SageMaker::Cluster").values()
    assert sorted(resource["DependsOn"]) == _logical_ids_under(
        layout.cluster, cluster.deployment, cluster.role, cluster.controller_role
    )
    assert db.writer.node.path in [d.node.path for d in cluster.cluster.node.dependencies]
    stacks = {
        s.stack_name: [d.id for d in s.dependencies if d.id.split(".")[-1] != "assets"]
        for s in assembly.stacks
    }
    assert stacks == {"Storage": [], "Cluster": ["Storage"]}
    alone, _, _ = _database_layout(with_cluster=False)
    assert (
        Template.from_stack(layout.storage).to_json()["Resources"]
        == Template.from_stack(alone.storage).to_json()["Resources"]
    )


@pytest.mark.parametrize(
    ("pins", "where", "message"),
    [
        (["x"], "lifecycle.extra['download_sha256']", "must map https:// URLs to SHA-256 digests, got ['x']"),
        (
            {"http://example.com/a.deb": "0" * 64},
            "lifecycle.extra['download_sha256']",
            "keys must be https:// URLs without spaces, got 'http://example.com/a.deb'",
        ),
        (
            {"https://example.com/a.deb": "abc"},
            "lifecycle.extra['download_sha256']['https://example.com/a.deb']",
            "must be 64 hexadecimal digits, got 'abc'",
        ),
    ],
)
def test_download_pins_are_checked_at_synth(stack: cdk.Stack, pins: Any, where: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        build(stack, lifecycle=LifecycleOptions(extra={"download_sha256": pins}))
    assert str(error.value) == f"Test/HyperPod: {where} {message}"


def test_download_pins_reach_the_nodes(stack: cdk.Stack) -> None:
    pins = {"https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.20.0.tar.gz": "ab" * 32}
    cluster = build(stack, lifecycle=LifecycleOptions(extra={"download_sha256": pins}))
    assert cluster.lifecycle_settings["download_sha256"] == pins
