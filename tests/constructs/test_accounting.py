from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template

from training_clusters.constructs.accounting import SlurmAccountingDatabase
from training_clusters.constructs.network import TrainingNetwork
from training_clusters.errors import ConfigurationError

from ..conftest import AZS, GatedStacks, gated_stack
from .parts import StorageAndCluster


@pytest.fixture
def network(stack: cdk.Stack) -> TrainingNetwork:
    return TrainingNetwork(stack, "Network", availability_zones=AZS)


def test_aurora_mysql_serverless_v2_encrypted_with_its_own_key_in_the_private_subnets(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc)
    template = Template.from_stack(stack)
    template.has_resource(
        "AWS::RDS::DBCluster",
        {
            "Properties": Match.object_like(
                {
                    "Engine": "aurora-mysql",
                    "EngineVersion": Match.string_like_regexp(r"^8\.0\.mysql_aurora\.3\.10\."),
                    "StorageEncrypted": True,
                    "KmsKeyId": {"Fn::GetAtt": [Match.string_like_regexp("AccountingKey"), "Arn"]},
                    "DeletionProtection": True,
                    "BackupRetentionPeriod": 7,
                    "PreferredBackupWindow": "05:00-06:00",
                    "EnableIAMDatabaseAuthentication": False,
                    "EnableCloudwatchLogsExports": ["audit", "error", "general", "slowquery"],
                    "ServerlessV2ScalingConfiguration": {"MinCapacity": 0.5, "MaxCapacity": 2},
                }
            ),
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )
    template.has_resource_properties("AWS::RDS::DBInstance", {"DBInstanceClass": "db.serverless"})
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    private = [stack.resolve(s.subnet_id) for s in network.vpc.private_subnets]
    template.has_resource_properties("AWS::RDS::DBSubnetGroup", {"SubnetIds": private})
    assert len(private) == 2
    assert db.port == 3306
    (logical_id,) = template.find_resources("AWS::RDS::DBCluster")
    assert stack.resolve(db.uri) == {
        "Fn::Join": ["", [{"Fn::GetAtt": [logical_id, "Endpoint.Address"]}, ":3306"]]
    }


def test_credentials_are_generated_json_and_the_same_password_as_plain_text(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, username="slurmdbd")
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SecretsManager::Secret",
        {"GenerateSecretString": Match.object_like({"SecretStringTemplate": '{"username":"slurmdbd"}'})},
    )
    plain = stack.resolve(db.password_secret.node.default_child.secret_string)  # type: ignore[union-attr]
    joined = "".join(p if isinstance(p, str) else "<ref>" for p in plain["Fn::Join"][1])
    assert joined == "{{resolve:secretsmanager:<ref>:SecretString:password::}}"
    assert db.username == "slurmdbd"
    # the master user and password come from the JSON secret
    cluster = template.find_resources("AWS::RDS::DBCluster")
    (props,) = [r["Properties"] for r in cluster.values()]
    assert "SecretString:username" in str(props["MasterUsername"])
    assert "SecretString:password" in str(props["MasterUserPassword"])


def test_destroy_turns_deletion_protection_off_and_deletes_everything(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, removal_policy="destroy")
    template = Template.from_stack(stack)
    template.has_resource(
        "AWS::RDS::DBCluster",
        {"Properties": Match.object_like({"DeletionProtection": False}), "DeletionPolicy": "Delete"},
    )
    for kind in ("AWS::SecretsManager::Secret", "AWS::EC2::SecurityGroup", "AWS::KMS::Key"):
        policies = {r.get("DeletionPolicy", "Delete") for r in template.find_resources(kind).values()}
        assert policies == {"Delete"}, kind


def test_clients_in_another_stack_get_both_rules_in_their_own_stack() -> None:
    layout = StorageAndCluster()
    app, storage, consumer, client = layout.app, layout.storage, layout.cluster, layout.client
    db = SlurmAccountingDatabase(storage, "Accounting", vpc=layout.network.vpc)

    db.connections.allow_default_port_from(client)

    rules = Template.from_stack(consumer)
    rules.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"FromPort": 3306, "ToPort": 3306, "IpProtocol": "tcp", "SourceSecurityGroupId": Match.any_value()},
    )
    rules.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress", {"FromPort": 3306, "ToPort": 3306, "IpProtocol": "tcp"}
    )
    own = Template.from_stack(storage)
    own.resource_count_is("AWS::EC2::SecurityGroupIngress", 1)  # the network's EFA group only
    app.synth()  # no dependency cycle


def test_a_rule_asked_from_the_clients_side_opens_the_database_too(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    """``cluster.connections.allow_to(db)`` calls back into the database's connections: both rules exist."""
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc)
    client = ec2.SecurityGroup(stack, "Client", vpc=network.vpc, allow_all_outbound=False)

    client.connections.allow_to(db, ec2.Port.tcp(3306))

    template = Template.from_stack(stack)
    group, source = (stack.resolve(g.security_group_id) for g in (db.security_group, client))
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"GroupId": group, "SourceSecurityGroupId": source, "FromPort": 3306},
    )
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {"GroupId": source, "DestinationSecurityGroupId": group, "FromPort": 3306},
    )


def test_nothing_reaches_the_database_until_allowed(stack: cdk.Stack, network: TrainingNetwork) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc)
    group = stack.resolve(db.security_group.security_group_id)
    ingress = Template.from_stack(stack).find_resources("AWS::EC2::SecurityGroupIngress")
    assert [r for r in ingress.values() if r["Properties"]["GroupId"] == group] == []
    assert db.connections.default_port is not None
    assert stack.resolve(db.connections.default_port.to_rule_json())["fromPort"] == 3306


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"username": "9lives"},
            "Test/Accounting: username must be 1 to 16 letters, digits or '_', starting with a letter, "
            "got '9lives'",
        ),
        (
            {"username": "a" * 17},
            f"Test/Accounting: username must be 1 to 16 letters, digits or '_', starting with a letter, "
            f"got '{'a' * 17}'",
        ),
        ({"username": "rdsadmin"}, "Test/Accounting: username is reserved by RDS, got 'rdsadmin'"),
        (
            {"min_capacity_acu": 0.25},
            "Test/Accounting: min_capacity_acu must be 0.5 to 256 in steps of 0.5 ACU, got 0.25",
        ),
        (
            {"max_capacity_acu": 300.0},
            "Test/Accounting: max_capacity_acu must be 0.5 to 256 in steps of 0.5 ACU, got 300",
        ),
        (
            {"min_capacity_acu": 4.0, "max_capacity_acu": 2.0},
            "Test/Accounting: min_capacity_acu must not exceed max_capacity_acu (2), got 4",
        ),
        (
            {"backup_retention_days": 0},
            "Test/Accounting: backup_retention_days must be 1 to 35 (RDS keeps automated backups at least a "
            "day), got 0",
        ),
        (
            {"removal_policy": "snapshot"},
            "Test/Accounting: removal_policy must be one of retain, destroy, got 'snapshot'",
        ),
    ],
)
def test_bad_props_are_clear_errors(
    stack: cdk.Stack, network: TrainingNetwork, props: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, **props)  # type: ignore[arg-type]
    assert str(error.value) == message


@gated_stack("accounting")
def _gated_accounting(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc)
    client = ec2.SecurityGroup(stack, "Client", vpc=network.vpc, allow_all_outbound=False)
    db.connections.allow_default_port_from(client)


@gated_stack("accounting-destroy")
def _gated_accounting_destroy(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, removal_policy="destroy")


@pytest.mark.parametrize("name", ["accounting", "accounting-destroy"])
def test_accounting_passes_the_gates(gated_stacks: GatedStacks, name: str) -> None:
    gated_stacks.get(name).assert_clean()


def test_a_retained_database_keeps_what_it_uses_and_names_its_subnets(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc)
    template = Template.from_stack(stack)
    template.has_resource("AWS::RDS::DBClusterParameterGroup", {"DeletionPolicy": "Retain"})
    (writer,) = template.find_resources("AWS::RDS::DBInstance").values()
    assert "DependsOn" not in writer  # no wait on NAT routes that `cdk destroy` deletes
    (plain,) = [
        r
        for r in template.find_resources("AWS::SecretsManager::Secret").values()
        if "GenerateSecretString" not in r["Properties"]
    ]
    assert "DependsOn" not in plain
    assert [stack.resolve(s.subnet_id) for s in db.subnets] == [
        stack.resolve(s.subnet_id) for s in network.vpc.private_subnets
    ]


def test_the_networks_efa_group_as_a_client_of_a_database_in_another_stack() -> None:
    """The database's stack uses the network's (its VPC), so the pair of rules lands in the database's."""
    layout = StorageAndCluster()
    db = SlurmAccountingDatabase(
        layout.cluster, "Accounting", vpc=layout.network.vpc, removal_policy="destroy"
    )

    db.connections.allow_default_port_from(layout.network.efa_security_group)

    Template.from_stack(layout.cluster).has_resource_properties(
        "AWS::EC2::SecurityGroupIngress", {"FromPort": 3306, "ToPort": 3306}
    )
    Template.from_stack(layout.storage).resource_count_is("AWS::EC2::SecurityGroupIngress", 1)  # EFA's own
    layout.app.synth()  # no dependency cycle
