from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template
from constructs import IConstruct

from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.slurm.accounting import SlurmAccountingDatabase
from training_clusters.gates.compliance import add_compliance_checks, nag_findings, synth_with_checks
from training_clusters.model.errors import ConfigurationError
from training_clusters.node_scripts.handlers.slurmdbd_user import HANDLER_DIR, staged_asset

from ..assertions import (
    NO_EGRESS,
    all_traffic,
    allow,
    egress,
    ingress,
    policy_statements,
    role_statements,
    security_group_rules,
    text,
)
from ..conftest import AZS, CDK_CONTEXT, REGION, ROOT, EnvironmentGates, GatedStacks, PinnedStack, gated_stack
from .parts import StorageAndCluster
from .test_session_manager import acknowledged_rules


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
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, username="slurm_master")
    plain_text = db.password_secret  # ParallelCluster reads it: made now
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SecretsManager::Secret",
        {"GenerateSecretString": Match.object_like({"SecretStringTemplate": '{"username":"slurm_master"}'})},
    )
    plain = stack.resolve(plain_text.node.default_child.secret_string)  # type: ignore[union-attr]
    assert plain == {
        "Fn::Join": [
            "",
            [
                "{{resolve:secretsmanager:",
                {"Ref": logical_id(stack, db.secret)},
                ":SecretString:password::}}",
            ],
        ]
    }
    assert db.username == "slurm_master"
    # the master user and password come from the JSON secret
    (props,) = [r["Properties"] for r in template.find_resources("AWS::RDS::DBCluster").values()]
    master = {"Ref": logical_id(stack, db.secret)}
    assert props["MasterUsername"] == {
        "Fn::Join": ["", ["{{resolve:secretsmanager:", master, ":SecretString:username::}}"]]
    }
    assert props["MasterUserPassword"] == {
        "Fn::Join": ["", ["{{resolve:secretsmanager:", master, ":SecretString:password::}}"]]
    }


def logical_id(stack: cdk.Stack, construct: IConstruct) -> str:
    cfn = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
    return stack.resolve(stack.get_logical_id(cfn))  # type: ignore[arg-type,no-any-return]


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


def _handler_group(stack: cdk.Stack, db: SlurmAccountingDatabase) -> str:
    return logical_id(stack, db.user_handler.connections.security_groups[0])


def test_clients_in_another_stack_get_both_rules_in_their_own_stack() -> None:
    layout = StorageAndCluster()
    app, storage, consumer, client = layout.app, layout.storage, layout.cluster, layout.client
    db = SlurmAccountingDatabase(storage, "Accounting", vpc=layout.network.vpc)

    db.connections.allow_default_port_from(client)

    rules = Template.from_stack(consumer).to_json()
    database = consumer.resolve(db.security_group.security_group_id)  # imported from the storage stack
    assert security_group_rules(rules, database) == {ingress(logical_id(consumer, client), 3306)}
    assert security_group_rules(rules, logical_id(consumer, client)) == {egress(text(database), 3306)}
    own = Template.from_stack(storage).to_json()
    # in the storage stack, only the user handler's pair
    assert security_group_rules(own, logical_id(storage, db.security_group)) == {
        ingress(_handler_group(storage, db), 3306),
        NO_EGRESS,
    }
    app.synth()  # no dependency cycle


def test_a_rule_asked_from_the_clients_side_opens_the_database_too(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    """``cluster.connections.allow_to(db)`` calls back into the database's connections: both rules exist."""
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc)
    client = ec2.SecurityGroup(stack, "Client", vpc=network.vpc, allow_all_outbound=False)

    client.connections.allow_to(db, ec2.Port.tcp(3306))

    template = Template.from_stack(stack).to_json()
    group, source = (logical_id(stack, g) for g in (db.security_group, client))
    assert security_group_rules(template, group) == {
        ingress(source, 3306),
        ingress(_handler_group(stack, db), 3306),
        NO_EGRESS,
    }
    assert security_group_rules(template, source) == {egress(group, 3306)}


def test_nothing_but_the_user_handler_reaches_the_database_until_allowed(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc)
    template = Template.from_stack(stack).to_json()
    assert security_group_rules(template, logical_id(stack, db.security_group)) == {
        ingress(_handler_group(stack, db), 3306),
        NO_EGRESS,
    }
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
    db.password_secret  # noqa: B018  (made when read, as ParallelCluster reads it)
    template = Template.from_stack(stack)
    template.has_resource("AWS::RDS::DBClusterParameterGroup", {"DeletionPolicy": "Retain"})
    (writer,) = template.find_resources("AWS::RDS::DBInstance").values()
    # no wait on NAT routes that `cdk destroy` deletes: only on the log groups it writes to
    assert writer["DependsOn"] == [logical_id(stack, group) for group in db.log_groups]
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

    cluster, storage = (Template.from_stack(s).to_json() for s in (layout.cluster, layout.storage))
    efa = layout.network.efa_security_group
    imported_efa = text(layout.cluster.resolve(efa.security_group_id))
    assert security_group_rules(cluster, logical_id(layout.cluster, db.security_group)) == {
        ingress(imported_efa, 3306),
        ingress(_handler_group(layout.cluster, db), 3306),
        NO_EGRESS,
    }
    assert security_group_rules(cluster, layout.cluster.resolve(efa.security_group_id)) == {
        egress(logical_id(layout.cluster, db.security_group), 3306)
    }
    group = logical_id(layout.storage, efa)
    assert security_group_rules(storage, group) == {
        all_traffic("ingress", group),
        all_traffic("egress", group),
    }
    layout.app.synth()  # no dependency cycle


ENVIRONMENTS = ROOT / "environments"


# -- issue 28: TLS required, slurmdbd's own user, plain-text copies only when read, log groups of our own ------


def test_the_db_cluster_parameter_group_requires_tls(stack: cdk.Stack, network: TrainingNetwork) -> None:
    """require_secure_transport is a cluster-level parameter of Aurora MySQL: the group bound to the cluster is
    an AWS::RDS::DBClusterParameterGroup, and the cluster names it."""
    SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc)
    template = Template.from_stack(stack)

    (group_id, group), *others = template.find_resources("AWS::RDS::DBClusterParameterGroup").items()
    assert others == []
    assert group["Properties"]["Family"] == "aurora-mysql8.0"
    assert group["Properties"]["Parameters"] == {
        "server_audit_logging": "1",
        "server_audit_events": "CONNECT,QUERY_DCL,QUERY_DDL",
        "slow_query_log": "1",
        "long_query_time": "5",
        "require_secure_transport": "ON",
    }
    template.resource_count_is("AWS::RDS::DBParameterGroup", 0)
    (cluster,) = template.find_resources("AWS::RDS::DBCluster").values()
    assert cluster["Properties"]["DBClusterParameterGroupName"] == {"Ref": group_id}


def test_slurmdbd_gets_a_user_of_its_own_made_by_a_handler_in_the_vpc(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    db = SlurmAccountingDatabase(
        stack, "Accounting", vpc=network.vpc, databases=["slurm_acct_db", "team_acct"]
    )
    template = Template.from_stack(stack)
    resources = template.to_json()["Resources"]
    (user_id, user), *more = template.find_resources("Custom::SlurmdbdUser").items()
    assert more == []
    master, slurmdbd = logical_id(stack, db.secret), logical_id(stack, db.node.find_child("SlurmdbdSecret"))
    cluster_id = logical_id(stack, db.cluster)
    props = {k: v for k, v in user["Properties"].items() if k != "ServiceToken"}
    assert props == {
        "Host": {"Fn::GetAtt": [cluster_id, "Endpoint.Address"]},
        "Port": "3306",
        "MasterSecretArn": {"Ref": master},
        "UserSecretArn": {"Ref": slurmdbd},
        "Databases": ["slurm_acct_db", "team_acct"],
        "CaBundleUrl": "https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem",
    }
    assert logical_id(stack, db.writer) in user["DependsOn"]  # the database answers once its writer exists
    # slurmdbd's secret as clients get it: attached to the cluster (host, port), after the user exists
    assert stack.resolve(db.slurmdbd_secret.secret_arn) == {"Ref": logical_id(stack, db.slurmdbd_secret)}
    attachment = resources[logical_id(stack, db.slurmdbd_secret)]
    assert attachment["Type"] == "AWS::SecretsManager::SecretTargetAttachment"
    assert attachment["Properties"] == {
        "SecretId": {"Ref": slurmdbd},
        "TargetId": {"Ref": cluster_id},
        "TargetType": "AWS::RDS::DBCluster",
    }
    assert attachment["DependsOn"] == [user_id]
    assert resources[slurmdbd]["Properties"]["GenerateSecretString"]["SecretStringTemplate"] == (
        '{"username":"slurmdbd"}'
    )
    assert db.slurmdbd_username == "slurmdbd" and db.databases == ("slurm_acct_db", "team_acct")
    # the handler: in the database's private subnets, reading exactly the two secrets
    function = resources[logical_id(stack, db.user_handler)]["Properties"]
    private = sorted(stack.resolve(s.subnet_id)["Ref"] for s in network.vpc.private_subnets)
    assert sorted(ref["Ref"] for ref in function["VpcConfig"]["SubnetIds"]) == private
    assert function["Runtime"] == "python3.14" and function["Handler"] == "index.on_event"
    template_json = template.to_json()
    logs = logical_id(stack, db.node.find_child("UserHandlerLogs"))
    assert role_statements(template_json, logical_id(stack, db.user_handler.role)) == {
        allow({"secretsmanager:GetSecretValue"}, {f"${{{master}}}", f"${{{slurmdbd}}}"}),
        allow({"logs:CreateLogStream", "logs:PutLogEvents"}, {f"${{{logs}.Arn}}"}),
        allow(  # a function in a VPC manages its interfaces; EC2 takes no resource for these
            {
                "ec2:AssignPrivateIpAddresses",
                "ec2:CreateNetworkInterface",
                "ec2:DeleteNetworkInterface",
                "ec2:DescribeNetworkInterfaces",
                "ec2:UnassignPrivateIpAddresses",
            },
            {"*"},
        ),
    }
    # its group reaches HTTPS (Secrets Manager, the truststore) and the database's port, nothing else
    assert security_group_rules(template_json, _handler_group(stack, db)) == {
        egress("0.0.0.0/0", 443),
        egress(logical_id(stack, db.security_group), 3306),
    }


def test_the_plain_text_passwords_are_made_only_when_read(stack: cdk.Stack, network: TrainingNetwork) -> None:
    """HyperPod reads the JSON secrets, ParallelCluster a plain-text copy: a database only HyperPod uses has
    none (construct id PasswordSecret, as ParallelCluster's templates know it, once read)."""
    unread = SlurmAccountingDatabase(stack, "Unread", vpc=network.vpc)
    read = SlurmAccountingDatabase(stack, "Read", vpc=network.vpc)
    copy = read.password_secret
    assert read.password_secret is copy  # one copy, whoever asks again
    slurmdbd_copy = read.slurmdbd_password_secret

    template = Template.from_stack(stack)
    secrets = template.find_resources("AWS::SecretsManager::Secret")
    assert sorted(secrets) == sorted(
        [
            logical_id(stack, unread.secret),
            logical_id(stack, unread.node.find_child("SlurmdbdSecret")),
            logical_id(stack, read.secret),
            logical_id(stack, read.node.find_child("SlurmdbdSecret")),
            logical_id(stack, copy),
            logical_id(stack, slurmdbd_copy),
        ]
    )
    assert copy.node.path == "Test/Read/PasswordSecret"
    assert stack.resolve(copy.node.default_child.secret_string)["Fn::Join"][1][1] == {  # type: ignore[union-attr]
        "Ref": logical_id(stack, read.secret)
    }
    # from slurmdbd's secret itself, not its attachment: a retained copy never refers to what destroy deletes
    assert stack.resolve(slurmdbd_copy.node.default_child.secret_string)["Fn::Join"][1][1] == {  # type: ignore[union-attr]
        "Ref": logical_id(stack, read.node.find_child("SlurmdbdSecret"))
    }


def checkov_comments(template: dict[str, object], logical: str) -> dict[str, str]:
    resource = template["Resources"][logical]  # type: ignore[index]
    return {
        skip["id"]: skip["comment"]
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
    }


def test_the_secrets_reasons_are_true_of_the_template_they_land_in(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    alone = SlurmAccountingDatabase(stack, "Alone", vpc=network.vpc)
    copied = SlurmAccountingDatabase(stack, "Copied", vpc=network.vpc)
    copied.password_secret  # noqa: B018

    template = Template.from_stack(stack).to_json()

    assert checkov_comments(template, logical_id(stack, alone.secret)) == {
        "CKV_AWS_149": "encrypted with the account's AWS-managed Secrets Manager key: only the slurmdbd-user "
        "handler's role reads it (GetSecretValue on this secret), which needs no key grant"
    }
    assert checkov_comments(template, logical_id(stack, copied.secret)) == {
        "CKV_AWS_149": "encrypted with the account's AWS-managed Secrets Manager key: the slurmdbd-user handler's "
        "role reads it with GetSecretValue alone, and CloudFormation resolves PasswordSecret's reference to it"
    }
    assert (
        "ParallelCluster"
        in checkov_comments(template, logical_id(stack, copied.password_secret))["CKV_AWS_149"]
    )
    slurmdbd = checkov_comments(template, logical_id(stack, alone.node.find_child("SlurmdbdSecret")))
    assert "ParallelCluster" not in slurmdbd["CKV_AWS_149"]


def test_the_exported_logs_go_to_retained_encrypted_log_groups_of_the_stack(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc)
    template = Template.from_stack(stack).to_json()
    resources = template["Resources"]
    cluster_id, key_id = logical_id(stack, db.cluster), logical_id(stack, db.kms_key)

    groups = [resources[logical_id(stack, group)] for group in db.log_groups]
    assert [g["Properties"]["LogGroupName"] for g in groups] == [
        {"Fn::Join": ["", ["/aws/rds/cluster/", {"Ref": cluster_id}, f"/{kind}"]]}
        for kind in ("audit", "error", "general", "slowquery")
    ]
    assert resources[cluster_id]["Properties"]["EnableCloudwatchLogsExports"] == [
        "audit",
        "error",
        "general",
        "slowquery",
    ]
    for group in groups:
        assert group["Properties"]["RetentionInDays"] == 365
        assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
        assert (group["DeletionPolicy"], group["UpdateReplacePolicy"]) == ("Retain", "Retain")
        assert group["DependsOn"] == [key_id]
    # the writer instance, the first thing that writes logs, waits for them
    assert resources[logical_id(stack, db.writer)]["DependsOn"] == [
        logical_id(stack, g) for g in db.log_groups
    ]
    statements = resources[key_id]["Properties"]["KeyPolicy"]["Statement"]
    (logs_statement,) = [s for s in statements if s.get("Sid") == "CloudWatchLogsForTheDatabaseLogs"]
    assert logs_statement["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    assert logs_statement["Condition"] == {
        "ArnLike": {
            "kms:EncryptionContext:aws:logs:arn": {
                "Fn::Join": [
                    "",
                    ["arn:aws:logs:us-east-1:", {"Ref": "AWS::AccountId"}, ":log-group:/aws/rds/cluster/*"],
                ]
            }
        }
    }


def test_destroy_deletes_the_log_groups_and_slurmdbds_secret_too(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, removal_policy="destroy")
    resources = Template.from_stack(stack).to_json()["Resources"]
    owned = [*db.log_groups, db.node.find_child("SlurmdbdSecret")]
    assert {resources[logical_id(stack, c)].get("DeletionPolicy", "Delete") for c in owned} == {"Delete"}


def test_the_handlers_asset_is_the_handler_beside_the_pinned_pymysql() -> None:
    folder = staged_asset()
    assert (folder / "index.py").read_bytes() == (HANDLER_DIR / "index.py").read_bytes()
    assert (folder / ".complete").read_text() == "PyMySQL 1.2.4\n"
    assert (folder / "pymysql" / "connections.py").is_file()
    assert (
        "MIT" in (folder / "pymysql" / "LICENSE").read_text()
        or "Permission is hereby granted" in (folder / "pymysql" / "LICENSE").read_text()
    )
    pinned = [line for line in (ROOT / "pyproject.toml").read_text().splitlines() if "PyMySQL" in line]
    assert [line.strip() for line in pinned if line.strip().startswith('"')] == ['"PyMySQL==1.2.4",']
    assert staged_asset() == folder


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"username": "slurmdbd"},
            "Test/Accounting: username is slurmdbd's own database user, got 'slurmdbd'",
        ),
        ({"databases": []}, "Test/Accounting: databases must name at least one database, got []"),
        (
            {"databases": ["slurm-acct"]},
            "Test/Accounting: databases must be 1 to 64 letters, digits or '_' each, got 'slurm-acct'",
        ),
        (
            {"databases": ["a" * 65]},
            f"Test/Accounting: databases must be 1 to 64 letters, digits or '_' each, got '{'a' * 65}'",
        ),
    ],
)
def test_bad_user_props_are_clear_errors(
    stack: cdk.Stack, network: TrainingNetwork, props: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, **props)  # type: ignore[arg-type]
    assert str(error.value) == message


# -- the shipped environments (their gated synths, no new one) -------------------------------------------


def _resources(environment_gates: EnvironmentGates, name: str) -> dict[str, dict[str, object]]:
    resources: dict[str, dict[str, object]] = environment_gates.template(ENVIRONMENTS / f"{name}.yaml")[
        "Resources"
    ]
    return resources


def _plain_text_copies(resources: dict[str, dict[str, object]]) -> list[str]:
    return sorted(
        logical
        for logical, r in resources.items()
        # a copy holds a value (the password, resolved from the generated secret), a generated one none
        if r["Type"] == "AWS::SecretsManager::Secret" and "SecretString" in r["Properties"]  # type: ignore[operator]
    )


def test_hyperpod_team_has_no_plain_text_copy_and_parallelcluster_team_keeps_its_own(
    environment_gates: EnvironmentGates,
) -> None:
    assert _plain_text_copies(_resources(environment_gates, "hyperpod-team")) == []
    pcluster = _resources(environment_gates, "parallelcluster-team")
    # ParallelCluster's PasswordSecretArn is slurmdbd's own password now: no copy of the master user's
    assert _plain_text_copies(pcluster) == ["AccountingDatabaseSlurmdbdPasswordSecretCA5EA08E"]


@pytest.mark.parametrize("name", ["hyperpod-team", "parallelcluster-team"])
def test_the_shipped_databases_pass_the_gates_require_tls_and_make_slurmdbds_user(
    environment_gates: EnvironmentGates, name: str
) -> None:
    environment_gates.get(ENVIRONMENTS / f"{name}.yaml")[1].assert_clean()  # cdk-nag and cfn-lint at 0
    resources = _resources(environment_gates, name)
    (group,) = [r for r in resources.values() if r["Type"] == "AWS::RDS::DBClusterParameterGroup"]
    assert group["Properties"]["Parameters"]["require_secure_transport"] == "ON"  # type: ignore[index]
    (user,) = [r for r in resources.values() if r["Type"] == "Custom::SlurmdbdUser"]
    # HyperPod's StorageLoc, and ParallelCluster's (the cluster name with '-' as '_', its cookbook's default)
    expected = {"hyperpod-team": ["slurm_acct_db"], "parallelcluster-team": ["team_training"]}[name]
    assert user["Properties"]["Databases"] == expected  # type: ignore[index]


def test_hyperpods_controller_reads_slurmdbds_secret_and_not_the_master_secret(
    environment_gates: EnvironmentGates,
) -> None:
    resources = _resources(environment_gates, "hyperpod-team")
    template = {"Resources": resources}
    readers = {
        (key.rstrip("0123456789ABCDEF"), statement.resources)
        for key, r in resources.items()
        if r["Type"] == "AWS::IAM::Policy"
        for statement in policy_statements(template, key)
        if "secretsmanager:GetSecretValue" in statement.actions
    }
    master, slurmdbd = "${AccountingSecret64A6CC0D}", "${AccountingSlurmdbdSecret490707E2}"
    assert readers == {
        # slurmdbd's secret as attached to the database (host and port), never the master user's
        ("HyperPodControllerRoleDefaultPolicy", frozenset({"${AccountingSlurmdbdSecretAttachmentD9EBB3BE}"})),
        # the deploy-time handler reads both to make slurmdbd's user; the rotation rotates slurmdbd's only
        ("AccountingUserHandlerRoleDefaultPolicy", frozenset({master, slurmdbd})),
        ("AccountingRotationRoleDefaultPolicy", frozenset({master})),
        ("AccountingRotationRoleDefaultPolicy", frozenset({slurmdbd})),
    }


# -- slurmdbd's password, rotated with alternating users (issue 28) ----------------------------------------


@gated_stack("accounting-rotated")
def _gated_accounting_rotated(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, slurmdbd_rotation_days=30)


def test_a_rotated_database_passes_the_gates(gated_stacks: GatedStacks) -> None:
    gated_stacks.get("accounting-rotated").assert_clean()


def _rotation_gate(
    tmp_path: Path, *, keep_schedule: bool
) -> tuple[set[tuple[str, str]], dict[str, set[str]]]:
    """AwsSolutions findings (rule, construct path) and acknowledgements of a rotated database's stack, with or
    without its rotation schedule (the schedule removed: what the secret would be without rotation)."""
    app = cdk.App(outdir=str(tmp_path / "cdk.out"), context=dict(CDK_CONTEXT))
    stack = PinnedStack(app, "Test", env=cdk.Environment(region=REGION))
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, slurmdbd_rotation_days=30)
    if not keep_schedule:
        assert db.node.find_child("SlurmdbdSecret").node.try_remove_child("Rotation")
    add_compliance_checks(app, nist=False)
    _, findings = synth_with_checks(app)
    found = {(f.rule, f.construct_path.strip("/")) for f in nag_findings(findings)}
    return found, acknowledged_rules(tmp_path / "cdk.out", "Test")


def test_the_rotated_secret_is_clean_because_it_rotates_not_because_of_an_acknowledgement(
    tmp_path: Path,
) -> None:
    rotated, acknowledged = _rotation_gate(tmp_path / "rotated", keep_schedule=True)
    without, _ = _rotation_gate(tmp_path / "without", keep_schedule=False)

    def acknowledged_on(construct: str) -> set[str]:
        return acknowledged.get(construct, set()) | acknowledged.get(f"{construct}/Resource", set())

    assert rotated == set()
    assert "AwsSolutions-SMG4" not in acknowledged_on("/Test/Accounting/SlurmdbdSecret")
    assert ("AwsSolutions-SMG4", "Test/Accounting/SlurmdbdSecret/Resource") in without
    # the master user's secret still is not rotated, and says so
    assert "AwsSolutions-SMG4" in acknowledged_on("/Test/Accounting/Secret")


def test_slurmdbds_secret_rotates_every_n_days_with_our_function_after_the_user_exists(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, slurmdbd_rotation_days=30)
    template = Template.from_stack(stack).to_json()
    resources = template["Resources"]
    [schedule] = [r for r in resources.values() if r["Type"] == "AWS::SecretsManager::RotationSchedule"]
    function = db.rotation_function
    assert function is not None
    assert schedule["Properties"] == {
        "RotationLambdaARN": {"Fn::GetAtt": [logical_id(stack, function), "Arn"]},
        "RotationRules": {"ScheduleExpression": "rate(30 days)"},
        "SecretId": {"Ref": logical_id(stack, db.node.find_child("SlurmdbdSecret"))},
    }
    assert logical_id(stack, db.user) in schedule["DependsOn"]  # the first rotation clones that user
    properties = resources[logical_id(stack, function)]["Properties"]
    assert properties["Handler"] == "index.on_rotation" and properties["Runtime"] == "python3.14"
    assert properties["Environment"]["Variables"] == {
        "DATABASE_HOST": {"Fn::GetAtt": [logical_id(stack, db.cluster), "Endpoint.Address"]},
        "DATABASE_PORT": "3306",
        "MASTER_SECRET_ARN": {"Ref": logical_id(stack, db.secret)},
        "DATABASES": '["slurm_acct_db"]',
        "CA_BUNDLE_URL": "https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem",
    }
    # the same asset as the slurmdbd-user handler (one home for the TLS and SQL code)
    assert properties["Code"] == resources[logical_id(stack, db.user_handler)]["Properties"]["Code"]
    assert properties["VpcConfig"]["SubnetIds"] == [
        stack.resolve(s.subnet_id) for s in network.vpc.private_subnets
    ]
    [permission] = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Permission"
        and r["Properties"]["FunctionName"] == {"Fn::GetAtt": [logical_id(stack, function), "Arn"]}
    ]
    assert permission["Principal"] == "secretsmanager.amazonaws.com"
    assert permission["SourceAccount"] == stack.resolve(stack.account)  # this account's secrets only


def test_the_rotation_role_reads_the_master_secret_and_rotates_only_slurmdbds(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, slurmdbd_rotation_days=7)
    resources = Template.from_stack(stack).to_json()["Resources"]
    role = db.node.find_child("RotationRole")
    [policy] = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and r["Properties"]["Roles"] == [{"Ref": logical_id(stack, role)}]
    ]
    granted = {
        (frozenset([s["Action"]] if isinstance(s["Action"], str) else s["Action"]), json.dumps(s["Resource"]))
        for s in policy
    }
    own = json.dumps({"Ref": logical_id(stack, db.node.find_child("SlurmdbdSecret"))})
    logs = json.dumps({"Fn::GetAtt": [logical_id(stack, db.node.find_child("RotationLogs")), "Arn"]})
    assert granted == {
        (frozenset({"logs:CreateLogStream", "logs:PutLogEvents"}), logs),
        (frozenset({"secretsmanager:GetSecretValue"}), json.dumps({"Ref": logical_id(stack, db.secret)})),
        (  # CDK merges the statements on "*": the VPC interfaces' and GetRandomPassword
            frozenset(
                {
                    "ec2:CreateNetworkInterface",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DeleteNetworkInterface",
                    "ec2:AssignPrivateIpAddresses",
                    "ec2:UnassignPrivateIpAddresses",
                    "secretsmanager:GetRandomPassword",
                }
            ),
            '"*"',
        ),
        (
            frozenset(
                {
                    "secretsmanager:DescribeSecret",
                    "secretsmanager:GetSecretValue",
                    "secretsmanager:PutSecretValue",
                    "secretsmanager:UpdateSecretVersionStage",
                }
            ),
            own,
        ),
    }
    schedule = next(r for r in resources.values() if r["Type"] == "AWS::SecretsManager::RotationSchedule")
    assert schedule["Properties"]["RotationRules"] == {"ScheduleExpression": "rate(7 days)"}


def test_the_rotation_reaches_the_database_and_https_only(stack: cdk.Stack, network: TrainingNetwork) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, slurmdbd_rotation_days=30)
    resources = Template.from_stack(stack).to_json()["Resources"]
    group = db.node.find_child("RotationSecurityGroup")
    own = logical_id(stack, group)
    assert resources[own]["Properties"]["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "Secrets Manager and the RDS certificate truststore",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]
    database = {"Fn::GetAtt": [logical_id(stack, db.security_group), "GroupId"]}
    rotation = {"Fn::GetAtt": [own, "GroupId"]}
    egress = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroupEgress"
              and r["Properties"]["GroupId"] == rotation]  # fmt: skip
    assert egress == [
        {"Description": "the rotation of slurmdbd's secret", "DestinationSecurityGroupId": database,
         "FromPort": 3306, "GroupId": rotation, "IpProtocol": "tcp", "ToPort": 3306}
    ]  # fmt: skip
    ingress = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"
               and r["Properties"]["SourceSecurityGroupId"] == rotation]  # fmt: skip
    assert ingress == [
        {"Description": "the rotation of slurmdbd's secret", "FromPort": 3306, "GroupId": database,
         "IpProtocol": "tcp", "SourceSecurityGroupId": rotation, "ToPort": 3306}
    ]  # fmt: skip


def test_no_rotation_by_default(stack: cdk.Stack, network: TrainingNetwork) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc)
    resources = Template.from_stack(stack).to_json()["Resources"]
    assert db.slurmdbd_rotation_days is None and db.rotation_function is None
    assert not [r for r in resources.values() if r["Type"] == "AWS::SecretsManager::RotationSchedule"]
    assert db.node.try_find_child("RotationSecurityGroup") is None


@pytest.mark.parametrize(("days", "accepted"), [(0, False), (1, True), (1000, True), (1001, False)])
def test_rotation_days_boundaries(
    stack: cdk.Stack, network: TrainingNetwork, days: int, accepted: bool
) -> None:
    if accepted:
        assert (
            SlurmAccountingDatabase(
                stack, "Accounting", vpc=network.vpc, slurmdbd_rotation_days=days
            ).slurmdbd_rotation_days
            == days
        )
        return
    with pytest.raises(ConfigurationError) as error:
        SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, slurmdbd_rotation_days=days)
    assert str(error.value) == (
        "Test/Accounting: slurmdbd_rotation_days must be 1 to 1000 days (Secrets Manager's rotation schedule), "
        f"got {days}"
    )


def test_a_plain_text_copy_of_a_rotating_password_is_refused(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, slurmdbd_rotation_days=30)
    with pytest.raises(ConfigurationError) as error:
        db.slurmdbd_password_secret  # noqa: B018
    assert str(error.value) == (
        "Test/Accounting: slurmdbd_password_secret is a plain-text copy made at deploy time, which cannot follow "
        "slurmdbd's rotating secret (slurmdbd_rotation_days=30): leave slurmdbd_rotation_days unset for "
        "ParallelCluster, whose head node reads the password only when it configures slurmdbd"
    )


def acknowledgement_reason(stack: cdk.Stack, construct: IConstruct, rule: str) -> str | None:
    """The reason given for acknowledging RULE (e.g. ``AwsSolutions::AwsSolutions-SMG4``) on CONSTRUCT, or None."""
    for entry in construct.node.metadata:
        if entry.type == "aws:cdk:acknowledged-rules":
            data = stack.resolve(entry.data)
            if rule in data:
                return str(data[rule])
    return None


SMG4 = "AwsSolutions::AwsSolutions-SMG4"


def test_the_rotation_reasons_are_true_of_the_template_they_land_in(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    alone = SlurmAccountingDatabase(stack, "Alone", vpc=network.vpc)
    for_parallelcluster = SlurmAccountingDatabase(stack, "ForParallelCluster", vpc=network.vpc)
    for_parallelcluster.slurmdbd_password_secret  # noqa: B018
    rotated = SlurmAccountingDatabase(stack, "Rotated", vpc=network.vpc, slurmdbd_rotation_days=30)
    Template.from_stack(stack)

    def slurmdbd_reason(db: SlurmAccountingDatabase) -> str | None:
        return acknowledgement_reason(stack, db.node.find_child("SlurmdbdSecret"), SMG4)

    assert slurmdbd_reason(rotated) is None  # it rotates (the finding's absence: the test above)
    assert slurmdbd_reason(alone) == (
        "slurmdbd's password, not rotated (slurmdbd_rotation_days unset): slurmdbd reads it only when it starts, "
        "so only a cluster whose nodes follow the secret may rotate it (HyperPodCluster's controller does, with "
        "slurmdbd_rotation_days)"
    )
    assert slurmdbd_reason(for_parallelcluster) == (
        "slurmdbd's password, not rotated: ParallelCluster's head node reads its plain-text copy "
        "(SlurmdbdPasswordSecret) when it configures slurmdbd and again only on a cluster update (its cookbook's "
        "update_slurm_database_password.sh, which never changes the user), so a rotation would leave slurmdbd "
        "with a password the database no longer accepts"
    )
    # the master user's: who logs in with it, as this template has it
    assert acknowledgement_reason(stack, alone.secret, SMG4) == (
        "the master user's password: CloudFormation sets it on the database and only the slurmdbd-user handler "
        "logs in (when the stack deploys) with it; no node or person reads it (slurmdbd has its own user), so "
        "nothing on the cluster would follow a rotation, and rotating it is not built"
    )
    assert acknowledgement_reason(stack, rotated.secret, SMG4) == (
        "the master user's password: CloudFormation sets it on the database and only the slurmdbd-user handler "
        "(when the stack deploys) and the rotation of slurmdbd's secret (when it runs, in the VPC) log in with it; "
        "no node or person reads it (slurmdbd has its own user), so nothing on the cluster would follow a "
        "rotation, and rotating it is not built"
    )
    template = Template.from_stack(stack).to_json()
    assert checkov_comments(template, logical_id(stack, rotated.secret)) == {
        "CKV_AWS_149": "encrypted with the account's AWS-managed Secrets Manager key: only the roles of the "
        "slurmdbd-user handler and of the rotation of slurmdbd's secret read it (GetSecretValue on this secret), "
        "which needs no key grant"
    }
