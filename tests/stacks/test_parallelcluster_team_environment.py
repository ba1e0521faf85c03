"""environments/parallelcluster-team.yaml: accounting, the team's users, a login node and Pyxis, as deployed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Match, Template
from constructs import IConstruct

from training_clusters.config import UserConfig, UserGroupConfig, parse_environment
from training_clusters.environments import build_app
from training_clusters.model.errors import ConfigurationError
from training_clusters.node_scripts import SHARED_DIR
from training_clusters.node_scripts.parallelcluster import ACTIONS_DIR, IMDS_GUARD
from training_clusters.stacks.parallelcluster import (
    ACTIONS_PREFIX,
    ParallelClusterEnvironment,
    head_node_for_admins,
    users_args,
)

from ..assertions import deployed_files
from ..conftest import CDK_CONTEXT, EnvironmentGates

BASE: dict[str, Any] = {"region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"]}
QUEUE = {"name": "cpu", "compute_resources": [{"name": "c5", "instance_type": "c5.xlarge"}]}


@pytest.fixture
def team(
    environment_gates: EnvironmentGates, environments_dir: Path
) -> tuple[ParallelClusterEnvironment, Template]:
    path = environments_dir / "parallelcluster-team.yaml"
    stack, _ = environment_gates.get(path)
    assert isinstance(stack, ParallelClusterEnvironment)
    return stack, Template.from_json(environment_gates.template(path))


def test_compute_nodes_guard_metadata_at_node_start_and_every_node_then_creates_the_users_and_enables_pyxis(
    team: tuple[ParallelClusterEnvironment, Template],
) -> None:
    """With login nodes the head node is for administrators (users.sh --admins-only-on-head-node); compute
    nodes, which ParallelCluster's own IMDS lockdown does not cover, get the guard as their only OnNodeStart
    action, which ParallelCluster runs before any OnNodeConfigured one (users.sh makes the accounts)."""
    stack, _ = team
    config = stack.cluster.concrete_configuration()
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOfAliceReplaceMe alice@example.com"
    users = {
        "Args": [
            "--home-root", "/shared/home",
            "--admins-only-on-head-node",
            "--user", "alice:2001:2001:ml=3000",
            "--user", "bob:2002:2002:ml=3000",
            "--key", f"alice:{key}",
        ],
    }  # fmt: skip
    (queue,) = config["Scheduling"]["SlurmQueues"]
    (pool,) = config["LoginNodes"]["Pools"]
    enroot_args = [
        "--template", "/opt/parallelcluster/examples/enroot/enroot.conf", "--conf", "/etc/enroot/enroot.conf",
        "--runtime", "/run/enroot/runtime", "--data", "/run/enroot/data", "--cache", "/var/enroot/cache",
        "--temp", "/var/enroot/tmp", "--pyxis-runtime", "/run/pyxis", "--user", "ec2-user,alice,bob",
    ]  # fmt: skip
    for node in (config["HeadNode"], queue, pool):
        first, second, third = node["CustomActions"]["OnNodeConfigured"]["Sequence"]
        assert first["Script"].endswith(f"/{ACTIONS_PREFIX}/users.sh") and first["Args"] == users["Args"]
        assert second == {"Script": first["Script"].replace("users.sh", "pyxis.sh")}
        # enroot's folders, one per user (the OS's default user, alinux2023's ec2-user, and the team)
        assert third == {
            "Script": first["Script"].replace("users.sh", "training-clusters-enroot.sh"),
            "Args": enroot_args,
        }
        if node is queue:
            assert node["CustomActions"]["OnNodeStart"] == {
                "Script": first["Script"].replace("users.sh", "training-clusters-imds.sh"),
                "Args": ["--install", "--allow", "pcluster-admin"],
            }
        else:  # ParallelCluster's lockdown (HeadNode.Imds.Secured) covers head and login nodes, from init
            assert "OnNodeStart" not in node["CustomActions"]
    assert config["HeadNode"]["Imds"] == {"Secured": True}
    keys = [entry["KeyName"] for entry in queue["Iam"]["S3Access"]]
    assert keys == [
        f"{ACTIONS_PREFIX}/{name}"
        for name in ("users.sh", "pyxis.sh", "training-clusters-enroot.sh", "training-clusters-imds.sh")
    ]
    assert queue["JobExclusiveAllocation"] is True


def test_the_guard_uploaded_is_the_lifecycle_scripts_own(
    team: tuple[ParallelClusterEnvironment, Template],
) -> None:
    """One script for both services: the deployment's second source is the folder of HyperPod's node scripts,
    filtered to the guard and enroot's folders."""
    stack, _ = team
    assert IMDS_GUARD.read_text().startswith("#!/usr/bin/env bash\n#\n# training-clusters-imds:")
    assert (
        stack.imds_guard is not None and stack.imds_guard.key == f"{ACTIONS_PREFIX}/training-clusters-imds.sh"
    )


@pytest.mark.parametrize(
    ("login_nodes", "team_logins_on_head_node", "for_admins"),
    [(True, False, True), (True, True, False), (False, False, False), (False, True, False)],
)
def test_the_head_node_is_for_administrators_only_when_the_team_has_login_nodes(
    environments_dir: Path, login_nodes: bool, team_logins_on_head_node: bool, for_admins: bool
) -> None:
    document = yaml.safe_load((environments_dir / "parallelcluster-team.yaml").read_text())
    if not login_nodes:
        del document["parallelcluster"]["login_nodes"]
    document["parallelcluster"]["team_logins_on_head_node"] = team_logins_on_head_node
    spec = parse_environment(document).parallelcluster
    assert spec is not None
    assert head_node_for_admins(spec) is for_admins


def test_accounting_is_aurora_reachable_from_the_head_node_only(
    team: tuple[ParallelClusterEnvironment, Template],
) -> None:
    stack, template = team
    database = stack.accounting_database
    assert database is not None
    settings = stack.cluster.concrete_configuration()["Scheduling"]["SlurmSettings"]
    assert settings["Database"]["UserName"] == "slurmdbd"  # its own user, ALL on its database only
    assert stack.accounting_database.databases == ("team_training",)  # ParallelCluster's StorageLoc
    assert settings["Database"]["Uri"].endswith(":3306")
    assert settings["CustomSlurmSettings"] == [
        {"PriorityType": "priority/multifactor"},
        {"PriorityWeightFairshare": "10000"},
    ]
    ingress = [
        r["Properties"]
        for r in template.find_resources("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("FromPort") == 3306
    ]
    head_group = stack.cluster.head_node_security_group
    assert head_group is not None
    handler = stack.accounting_database.node.find_child("UserHandlerSecurityGroup")
    assert [stack.resolve(i["SourceSecurityGroupId"]) for i in ingress] == [
        stack.resolve(handler.security_group_id),  # the deploy-time function that makes slurmdbd's user
        stack.resolve(head_group.security_group_id),
    ]
    template.resource_count_is("AWS::RDS::DBCluster", 1)
    template.has_resource(
        "AWS::RDS::DBCluster",
        {"DeletionPolicy": "Retain", "Properties": Match.object_like({"DeletionProtection": True})},
    )
    outputs = template.to_json()["Outputs"]
    assert {"AccountingDatabaseEndpoint", "AccountingDatabaseSecretArn"} <= set(outputs)


def _logical_ids_under(stack: cdk.Stack, *scopes: IConstruct) -> list[str]:
    """The logical ids of every CloudFormation resource in ``scopes``' subtrees, sorted."""
    return sorted(
        stack.get_logical_id(c)
        for scope in scopes
        for c in scope.node.find_all()
        if isinstance(c, cdk.CfnResource)
    )


def test_the_cluster_waits_for_the_network_its_groups_the_storage_and_the_database_writer(
    team: tuple[ParallelClusterEnvironment, Template],
) -> None:
    """slurmdbd starts on the head node while ParallelCluster creates the cluster: the Aurora writer instance,
    which CloudFormation creates minutes after its DB cluster, must exist by then."""
    stack, template = team
    database, head_group, storage = (
        stack.accounting_database,
        stack.cluster.head_node_security_group,
        stack.shared_storage,
    )
    assert database is not None and head_group is not None and storage is not None
    [(cluster_id, cluster)] = template.find_resources("Custom::PclusterCluster").items()
    [writer_id] = template.find_resources("AWS::RDS::DBInstance")
    assert writer_id == stack.get_logical_id(database.writer.node.default_child)  # type: ignore[arg-type]
    assert sorted(cluster["DependsOn"]) == _logical_ids_under(
        stack,
        stack.network.vpc,
        stack.cluster.security_group,
        head_group,
        storage,
        database.writer,
        database.user,
    )
    assert writer_id in cluster["DependsOn"] and cluster_id not in cluster["DependsOn"]


def test_the_actions_are_uploaded_to_a_secure_bucket(
    team: tuple[ParallelClusterEnvironment, Template],
) -> None:
    _, template = team
    template.resource_count_is("Custom::CDKBucketDeployment", 1)
    template.has_resource_properties(
        "Custom::CDKBucketDeployment", {"DestinationBucketKeyPrefix": ACTIONS_PREFIX, "Prune": True}
    )


def test_the_users_action_uploaded_is_the_one_hyperpod_runs(environments_dir: Path, tmp_path: Path) -> None:
    """One implementation: the bucket's users.sh (and the guard, enroot's folders) are node_scripts/shared/'s
    bytes, the same files HyperPod's lifecycle upload carries in its shared/ folder; this folder's own action is
    uploaded beside them, and nothing else."""
    app = cdk.App(
        outdir=str(tmp_path / "cdk.out"),
        context=dict(CDK_CONTEXT),
        post_cli_context={"aws:cdk:disable-asset-staging": False},  # staged as cdk synth does
    )
    (stack,) = build_app(app, [environments_dir / "parallelcluster-team.yaml"])
    assembly = app.synth()
    template = assembly.get_stack_by_name(stack.stack_name).template
    deployment = next(r for r in template["Resources"].values() if r["Type"] == "Custom::CDKBucketDeployment")
    actions, shared_scripts = deployed_files(assembly.directory, deployment)
    assert sorted(actions) == ["pyxis.sh"]
    uploaded = actions | shared_scripts
    shared = ("users.sh", "training-clusters-imds.sh", "training-clusters-enroot.sh")
    assert sorted(uploaded) == sorted([*shared, "pyxis.sh"])
    assert {name: uploaded[name] for name in shared} == {
        name: (SHARED_DIR / name).read_bytes() for name in shared
    }
    assert uploaded["pyxis.sh"] == (ACTIONS_DIR / "pyxis.sh").read_bytes()


def test_users_args_carry_ids_groups_and_keys() -> None:
    users = [
        UserConfig(
            name="carol",
            uid=2003,
            gid=2500,
            groups=[UserGroupConfig(name="ml", gid=3000), UserGroupConfig(name="ops", gid=3001)],
        ),
        UserConfig(name="dan", uid=2004, ssh_public_keys=["ssh-ed25519 AAAA dan@x", "ssh-rsa BBBB dan@y"]),
    ]
    assert users_args(users, "/fsx/home") == [
        "--home-root", "/fsx/home",
        "--user", "carol:2003:2500:ml=3000,ops=3001",
        "--user", "dan:2004:2004",
        "--key", "dan:ssh-ed25519 AAAA dan@x",
        "--key", "dan:ssh-rsa BBBB dan@y",
    ]  # fmt: skip


def _stack(document: dict[str, Any]) -> ParallelClusterEnvironment:
    app = cdk.App(context=dict(CDK_CONTEXT))
    return ParallelClusterEnvironment(
        app, "Team", config=parse_environment(document), environment_name="team"
    )


def test_without_shared_storage_homes_go_to_the_head_nodes_shared_home() -> None:
    stack = _stack(
        {
            **BASE,
            "storage": {"lustre": None},
            "users": [{"name": "erin", "uid": 2005}],
            "parallelcluster": {"queues": [QUEUE]},
        }
    )
    configuration = stack.cluster.concrete_configuration()
    action = configuration["HeadNode"]["CustomActions"]["OnNodeConfigured"]
    assert action["Args"][:2] == ["--home-root", "/home"]
    assert "Database" not in configuration["Scheduling"]["SlurmSettings"]


def test_no_users_and_no_pyxis_means_no_bucket_and_no_actions() -> None:
    stack = _stack({**BASE, "parallelcluster": {"queues": [QUEUE]}})
    template = Template.from_stack(stack)
    template.resource_count_is("Custom::CDKBucketDeployment", 0)
    assert "CustomActions" not in stack.cluster.concrete_configuration()["HeadNode"]


def test_file_scripts_in_sequences_and_a_directory_service() -> None:
    secret = "arn:aws:secretsmanager:us-east-1:111122223333:secret:ad-read-only-AbCdEf"
    stack = _stack(
        {
            **BASE,
            "parallelcluster": {
                "queues": [
                    {
                        **QUEUE,
                        "on_node_start": [
                            {"script": "s3://my-scripts/a.sh"},
                            {"script": "s3://other-scripts/b.sh"},
                        ],
                    }
                ],
                "head_node": {"on_node_configured": [{"script": "s3://my-scripts/h.sh", "args": ["-v"]}]},
                "custom_ami": "ami-0123456789abcdef0",
                "directory_service": {
                    "domain_name": "corp.example.com",
                    "domain_addr": "ldaps://corp.example.com",
                    "password_secret_arn": secret,
                    "domain_read_only_user": "cn=ReadOnly,ou=Users,dc=corp,dc=example,dc=com",
                },
            },
        }
    )
    configuration = stack.cluster.concrete_configuration()
    (queue,) = configuration["Scheduling"]["SlurmQueues"]
    assert queue["CustomActions"]["OnNodeStart"] == {
        "Sequence": [{"Script": "s3://my-scripts/a.sh"}, {"Script": "s3://other-scripts/b.sh"}]
    }
    assert configuration["HeadNode"]["CustomActions"]["OnNodeConfigured"] == {
        "Script": "s3://my-scripts/h.sh",
        "Args": ["-v"],
    }
    assert configuration["Image"]["CustomAmi"] == "ami-0123456789abcdef0"
    assert configuration["DirectoryService"]["PasswordSecretArn"] == secret


def test_with_users_the_guard_runs_before_the_files_own_node_start_scripts_and_every_configured_one() -> None:
    """The executor runs a Sequence in its order and stops at the first failure (aws-parallelcluster-cookbook,
    custom_action_executor.py), and OnNodeStart before OnNodeConfigured (compute_node/user_data.sh)."""
    stack = _stack(
        {
            **BASE,
            "users": [{"name": "erin", "uid": 2005}],
            "parallelcluster": {
                "queues": [
                    {
                        **QUEUE,
                        "on_node_start": [{"script": "s3://my-scripts/a.sh", "args": ["-x"]}],
                        "on_node_configured": [{"script": "s3://my-scripts/c.sh"}],
                    }
                ],
            },
        }
    )
    (queue,) = stack.cluster.concrete_configuration()["Scheduling"]["SlurmQueues"]
    actions = queue["CustomActions"]
    guard, own = actions["OnNodeStart"]["Sequence"]
    assert guard["Script"].endswith(f"/{ACTIONS_PREFIX}/training-clusters-imds.sh")
    assert guard["Args"] == ["--install", "--allow", "pcluster-admin"]
    assert own == {"Script": "s3://my-scripts/a.sh", "Args": ["-x"]}
    users, configured = actions["OnNodeConfigured"]["Sequence"]
    assert users["Script"].endswith(f"/{ACTIONS_PREFIX}/users.sh")
    assert configured == {"Script": "s3://my-scripts/c.sh"}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"queues": [QUEUE], "custom_ami": "ami-1"}, "parallelcluster.custom_ami: must be an AMI id"),
        (
            {"queues": [QUEUE], "login_nodes": [{"gracetime_period_minutes": 1}]},
            "parallelcluster.login_nodes.0.gracetime_period_minutes: must be 3 to 120 minutes",
        ),
        (
            {"queues": [QUEUE], "login_nodes": [{}, {}]},
            "parallelcluster.login_nodes: names",
        ),
        (
            {"queues": [QUEUE], "slurm": {"custom_settings": [{"SlurmUser": "root"}]}},
            "parallelcluster.slurm.custom_settings: [0] 'SlurmUser' is managed by ParallelCluster",
        ),
        (
            {"queues": [QUEUE], "accounting": {"backup_retention_days": 0}},
            "parallelcluster.accounting.backup_retention_days",
        ),
        (
            {"queues": [{**QUEUE, "custom_ami": "ubuntu"}]},
            "parallelcluster.queues.0.custom_ami: must be an AMI id such as ami-0123456789abcdef0, got 'ubuntu'",
        ),
        (
            {
                "queues": [QUEUE],
                "directory_service": {
                    "domain_name": "d", "domain_addr": "ldaps://d", "domain_read_only_user": "u",
                    "password_secret_arn": "arn:aws:secretsmanager:us-east-1:111122223333:secret:x",
                    "ldap_tls_req_cert": "sometimes",
                },
            },
            "parallelcluster.directory_service.ldap_tls_req_cert: must be one of never, allow, try, demand, hard, "
            "got 'sometimes'",
        ),
    ],
)  # fmt: skip
def test_bad_team_fields_name_the_field_and_what_is_allowed(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment({**BASE, "parallelcluster": section}, source="env.yaml")
    assert message in str(error.value), str(error.value)
