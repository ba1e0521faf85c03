"""ParallelCluster for a team: accounting database, custom actions in sequence, custom AMIs, login nodes,
Slurm settings and a directory service, as they appear in the cluster configuration."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk.assertions import Template
from constructs import IConstruct

from training_clusters.constructs.parallelcluster.cluster import (
    CustomActionScript,
    DirectoryService,
    HeadNode,
    LoginNodePool,
    SlurmQueue,
    SlurmSettings,
)
from training_clusters.constructs.slurm.accounting import SlurmAccountingDatabase
from training_clusters.model.errors import ConfigurationError

from ..assertions import NO_EGRESS, egress, ingress, logical_id, security_group_rules
from ..conftest import AZS, REGION, GatedStacks, PinnedStack, gated_stack
from .test_parallelcluster import C5N, Parts, resolved

AMI = "ami-0123456789abcdef0"


@pytest.fixture
def parts(stack: cdk.Stack) -> Parts:
    return Parts(stack)


def _scripts(parts: Parts) -> dict[str, CustomActionScript]:
    bucket = s3.Bucket.from_bucket_name(parts.stack, "Scripts", "team-scripts")
    return {
        name: CustomActionScript(bucket=bucket, key=f"actions/{name}.sh", args=[f"--{name}"])
        for name in ("users", "pyxis", "head-start", "head-extra", "queue-start", "login")
    }


def test_the_database_becomes_slurm_accounting_reached_from_the_head_node_only(parts: Parts) -> None:
    db = SlurmAccountingDatabase(parts.stack, "Accounting", vpc=parts.network.vpc)
    cluster = parts.cluster(slurm_settings=SlurmSettings(database=db))
    db.connections.allow_default_port_from(cluster.head_node_connections)
    stack = parts.stack
    configuration = resolved(cluster)
    assert configuration["Scheduling"]["SlurmSettings"]["Database"] == {
        "Uri": stack.resolve(db.uri),
        "UserName": "slurmdbd",  # slurmdbd's own user, never the master user
        "PasswordSecretArn": stack.resolve(db.slurmdbd_password_secret.secret_arn),
    }
    head_group = stack.resolve(cluster.head_node_connections.security_groups[0].security_group_id)
    assert head_group in configuration["HeadNode"]["Networking"]["AdditionalSecurityGroups"]
    for queue in configuration["Scheduling"]["SlurmQueues"]:
        assert head_group not in queue["Networking"]["AdditionalSecurityGroups"]
    template = Template.from_stack(stack).to_json()
    head, database = logical_id(cluster.head_node_security_group), logical_id(db.security_group)
    assert security_group_rules(template, head) == {egress(database, 3306)}
    handler = logical_id(db.node.find_child("UserHandlerSecurityGroup"))
    assert security_group_rules(template, database) == {
        ingress(head, 3306),
        ingress(handler, 3306),
        NO_EGRESS,
    }


def test_without_a_database_there_is_no_head_node_group(parts: Parts) -> None:
    cluster = parts.cluster()
    assert cluster.head_node_security_group is None
    with pytest.raises(
        ConfigurationError, match=r"head_node_connections exists only with slurm_settings\.database"
    ):
        cluster.head_node_connections  # noqa: B018
    assert "Database" not in resolved(cluster)["Scheduling"]["SlurmSettings"]


def test_custom_actions_run_cluster_wide_first_then_each_nodes_own_in_sequence(parts: Parts) -> None:
    s = _scripts(parts)
    cluster = parts.cluster(
        on_node_configured=[s["users"], s["pyxis"]],
        head_node=HeadNode(on_node_start=[s["head-start"]], on_node_configured=[s["head-extra"]]),
        queues=[SlurmQueue(name="compute", compute_resources=[C5N], on_node_start=[s["queue-start"]])],
        login_nodes=[LoginNodePool(name="login", on_node_configured=[s["login"]])],
    )
    configuration = resolved(cluster)

    def action(name: str) -> dict[str, Any]:
        return {"Script": f"s3://team-scripts/actions/{name}.sh", "Args": [f"--{name}"]}

    assert configuration["HeadNode"]["CustomActions"] == {
        "OnNodeStart": action("head-start"),
        "OnNodeConfigured": {"Sequence": [action("users"), action("pyxis"), action("head-extra")]},
    }
    (queue,) = configuration["Scheduling"]["SlurmQueues"]
    assert queue["CustomActions"] == {
        "OnNodeStart": action("queue-start"),
        "OnNodeConfigured": {"Sequence": [action("users"), action("pyxis")]},
    }
    assert [a["KeyName"] for a in queue["Iam"]["S3Access"]] == [
        "actions/users.sh",
        "actions/pyxis.sh",
        "actions/queue-start.sh",
    ]
    (pool,) = configuration["LoginNodes"]["Pools"]
    assert pool["CustomActions"] == {
        "OnNodeConfigured": {"Sequence": [action("users"), action("pyxis"), action("login")]}
    }


def test_login_nodes_read_their_scripts_through_a_policy_of_exact_objects(parts: Parts) -> None:
    s = _scripts(parts)
    cluster = parts.cluster(on_node_configured=s["users"], login_nodes=[LoginNodePool(name="login", count=2)])
    (pool,) = resolved(cluster)["LoginNodes"]["Pools"]
    assert cluster.login_nodes_policy is not None
    assert pool["Iam"]["AdditionalIamPolicies"][1] == {
        "Policy": parts.stack.resolve(cluster.login_nodes_policy.managed_policy_arn)
    }
    assert pool["Count"] == 2 and pool["InstanceType"] == "m5.xlarge"
    assert pool["Networking"]["SubnetIds"] == [
        parts.stack.resolve(parts.network.placement_subnet().subnet_id)
    ]
    Template.from_stack(parts.stack).has_resource_properties(
        "AWS::IAM::ManagedPolicy",
        {
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": "s3:GetObject",
                        "Effect": "Allow",
                        "Resource": "arn:aws:s3:::team-scripts/actions/users.sh",
                    }
                ],
                "Version": "2012-10-17",
            }
        },
    )


def test_custom_amis_exclusive_allocation_and_slurm_settings(parts: Parts) -> None:
    cluster = parts.cluster(
        custom_ami=AMI,
        head_node=HeadNode(custom_ami="ami-0123456789abcdef1"),
        queues=[
            SlurmQueue(
                name="compute", compute_resources=[C5N], custom_ami="ami-0123456789abcdef2",
                job_exclusive_allocation=True,
            )
        ],
        login_nodes=[LoginNodePool(name="login", custom_ami="ami-0123456789abcdef3", gracetime_period_minutes=30)],
        slurm_settings=SlurmSettings(custom_slurm_settings=[{"PriorityType": "priority/multifactor"}]),
    )  # fmt: skip
    configuration = resolved(cluster)
    assert configuration["Image"] == {"Os": "alinux2023", "CustomAmi": AMI}
    assert configuration["HeadNode"]["Image"] == {"CustomAmi": "ami-0123456789abcdef1"}
    (queue,) = configuration["Scheduling"]["SlurmQueues"]
    assert (
        queue["Image"] == {"CustomAmi": "ami-0123456789abcdef2"} and queue["JobExclusiveAllocation"] is True
    )
    (pool,) = configuration["LoginNodes"]["Pools"]
    assert pool["Image"] == {"CustomAmi": "ami-0123456789abcdef3"} and pool["GracetimePeriod"] == 30
    assert configuration["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"] == [
        {"PriorityType": "priority/multifactor"}
    ]


def test_directory_service(parts: Parts) -> None:
    secret = secretsmanager.Secret.from_secret_name_v2(parts.stack, "AdPassword", "ad-read-only")
    cluster = parts.cluster(
        directory_service=DirectoryService(
            domain_name="corp.example.com",
            domain_addr="ldaps://corp.example.com",
            password_secret=secret,
            domain_read_only_user="cn=ReadOnly,ou=Users,dc=corp,dc=example,dc=com",
            ldap_tls_req_cert="never",
            additional_sssd_configs={"ldap_auth_disable_tls_never_use_in_production": "True"},
        )
    )
    assert resolved(cluster)["DirectoryService"] == {
        "DomainName": "corp.example.com",
        "DomainAddr": "ldaps://corp.example.com",
        "PasswordSecretArn": parts.stack.resolve(secret.secret_arn),
        "DomainReadOnlyUser": "cn=ReadOnly,ou=Users,dc=corp,dc=example,dc=com",
        "GenerateSshKeysForUsers": True,
        "LdapTlsReqCert": "never",
        "AdditionalSssdConfigs": {"ldap_auth_disable_tls_never_use_in_production": "True"},
    }


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"custom_ami": "ami-123"},
            "custom_ami must be an AMI id such as ami-0123456789abcdef0, got 'ami-123'",
        ),
        (
            {"login_nodes": [LoginNodePool(name="Login")]},
            "login_nodes[0].name must",
        ),
        (
            {"login_nodes": [LoginNodePool(name="login"), LoginNodePool(name="login")]},
            "login_nodes ",
        ),
        (
            {"login_nodes": [LoginNodePool(name="login", gracetime_period_minutes=200)]},
            "login_nodes[0].gracetime_period_minutes must be 3 to 120 minutes (ParallelCluster's bounds), got 200",
        ),
        (
            {"login_nodes": [LoginNodePool(name="login", count=0)]},
            "login_nodes[0].count must be 1 or more, got 0",
        ),
        (
            {"slurm_settings": SlurmSettings(custom_slurm_settings=[{"ClusterName": "other"}])},
            "slurm_settings.custom_slurm_settings[0] 'ClusterName' is managed by ParallelCluster and refused in "
            "CustomSlurmSettings",
        ),
    ],
)
def test_bad_team_props_are_clear_errors(parts: Parts, props: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        parts.cluster(**props)
    assert str(error.value).startswith("Test/Cluster: "), str(error.value)
    assert message in str(error.value), str(error.value)


def test_a_bad_script_key_in_a_sequence_names_its_place(parts: Parts) -> None:
    bucket = s3.Bucket.from_bucket_name(parts.stack, "Scripts", "team-scripts")
    with pytest.raises(ConfigurationError) as error:
        parts.cluster(
            queues=[
                SlurmQueue(
                    name="compute",
                    compute_resources=[C5N],
                    on_node_configured=[
                        CustomActionScript(bucket=bucket, key="ok.sh"),
                        CustomActionScript(bucket=bucket, key="/abs.sh"),
                    ],
                )
            ]
        )
    assert str(error.value) == (
        "Test/Cluster: queues[0].on_node_configured[1].key must be an object key such as "
        "scripts/on-node-configured.sh, got '/abs.sh'"
    )


@gated_stack("parallelcluster-team")
def _gated_team(stack: cdk.Stack) -> None:
    parts = Parts(stack)
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=parts.network.vpc)
    s = _scripts(parts)
    cluster = parts.cluster(
        slurm_settings=SlurmSettings(database=db),
        on_node_configured=[s["users"], s["pyxis"]],
        login_nodes=[LoginNodePool(name="login")],
    )
    db.connections.allow_default_port_from(cluster.head_node_connections)
    parts.fsx.allow_clients_from(cluster)


def test_a_team_cluster_passes_the_gates(gated_stacks: GatedStacks) -> None:
    gated_stacks.get("parallelcluster-team").assert_clean()


def test_a_database_in_a_shared_stack_gets_its_rule_from_the_cluster_stack() -> None:
    app = cdk.App()
    shared = PinnedStack(app, "Shared", env=cdk.Environment(region=REGION))
    parts = Parts(shared)
    db = SlurmAccountingDatabase(shared, "Accounting", vpc=parts.network.vpc)
    cluster_stack = PinnedStack(app, "ClusterStack", env=cdk.Environment(region=REGION))
    from training_clusters.constructs.parallelcluster.cluster import ParallelCluster

    cluster = ParallelCluster(
        cluster_stack,
        "Cluster",
        cluster_name="team",
        vpc=parts.network.vpc,
        subnet=parts.network.placement_subnet(),
        queues=[SlurmQueue(name="compute", compute_resources=[C5N])],
        slurm_settings=SlurmSettings(database=db),
    )
    db.connections.allow_default_port_from(cluster.head_node_connections)
    Template.from_stack(cluster_stack).resource_count_is("AWS::EC2::SecurityGroupIngress", 1)
    assert AZS  # the shared stack's AZs are pinned
    app.synth()


def _logical_ids_under(stack: cdk.Stack, *scopes: IConstruct) -> list[str]:
    """The logical ids of every CloudFormation resource in ``scopes``' subtrees, sorted."""
    return sorted(
        stack.get_logical_id(c)
        for scope in scopes
        for c in scope.node.find_all()
        if isinstance(c, cdk.CfnResource)
    )


def _shared_database(app: cdk.App) -> tuple[cdk.Stack, Parts, SlurmAccountingDatabase]:
    shared = PinnedStack(app, "Shared", env=cdk.Environment(region=REGION))
    parts = Parts(shared)
    return shared, parts, SlurmAccountingDatabase(shared, "Accounting", vpc=parts.network.vpc)


def test_the_cluster_waits_for_the_database_writer_of_its_own_stack(parts: Parts) -> None:
    db = SlurmAccountingDatabase(parts.stack, "Accounting", vpc=parts.network.vpc)
    cluster = parts.cluster(slurm_settings=SlurmSettings(database=db))
    head_group = cluster.head_node_security_group
    assert head_group is not None
    [resource] = Template.from_stack(parts.stack).find_resources("Custom::PclusterCluster").values()
    assert sorted(resource["DependsOn"]) == _logical_ids_under(
        parts.stack, parts.network.vpc, cluster.security_group, head_group, parts.fsx, db.writer, db.user
    )
    assert parts.stack.get_logical_id(db.writer.node.default_child) in resource["DependsOn"]  # type: ignore[arg-type]


def test_a_database_in_a_shared_stack_makes_the_cluster_stack_wait_for_it_and_adds_nothing_there() -> None:
    """Across stacks the wait is a stack dependency (CloudFormation cannot DependsOn another stack's
    resource); the database's stack stays as it is, with no dependency on the cluster's (no cycle)."""
    from training_clusters.constructs.parallelcluster.cluster import ParallelCluster

    app = cdk.App()
    shared, parts, db = _shared_database(app)
    cluster_stack = PinnedStack(app, "ClusterStack", env=cdk.Environment(region=REGION))
    cluster = ParallelCluster(
        cluster_stack,
        "Cluster",
        cluster_name="team",
        vpc=parts.network.vpc,
        subnet=parts.network.placement_subnet(),
        queues=[SlurmQueue(name="compute", compute_resources=[C5N])],
        slurm_settings=SlurmSettings(database=db),
    )
    db.connections.allow_default_port_from(cluster.head_node_connections)
    head_group = cluster.head_node_security_group
    assert head_group is not None
    assembly = app.synth()  # no dependency cycle
    [resource] = Template.from_stack(cluster_stack).find_resources("Custom::PclusterCluster").values()
    assert sorted(resource["DependsOn"]) == _logical_ids_under(
        cluster_stack, cluster.security_group, head_group
    )
    assert db.writer.node.path in [d.node.path for d in cluster.resource.node.dependencies]
    stacks = {
        s.stack_name: [d.id for d in s.dependencies if d.id.split(".")[-1] != "assets"]
        for s in assembly.stacks
    }
    assert stacks == {"Shared": [], "ClusterStack": ["Shared"]}
    alone, _, alone_db = _shared_database(cdk.App())
    # the database's own plain-text copy of slurmdbd's password (made when first read, as ParallelCluster's
    # PasswordSecretArn needs): nothing else of the cluster's lands in the shared stack
    assert alone_db.slurmdbd_password_secret is not None
    assert (
        Template.from_stack(shared).to_json()["Resources"]
        == Template.from_stack(alone).to_json()["Resources"]
    )
