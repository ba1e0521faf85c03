from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from training_clusters.constructs.common.lustre import (
    LUSTRE_CLIENT_PORTS,
    LUSTRE_PORT,
    DataRepository,
    ExistingLustre,
    LustreDeploymentType,
    SharedLustre,
)
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.model.errors import ConfigurationError

from ..assertions import NO_EGRESS, Rule, all_traffic, egress, ingress, logical_id, security_group_rules, text
from ..conftest import AZS, GatedStacks, gated_stack
from .parts import StorageAndCluster


@pytest.fixture
def network(stack: cdk.Stack) -> TrainingNetwork:
    return TrainingNetwork(stack, "Network", availability_zones=AZS)


def test_scratch_2_defaults_to_1200_gib_in_the_placement_subnet_and_is_retained(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    SharedLustre(stack, "Fsx", vpc=network.vpc, subnet=network.placement_subnet())
    template = Template.from_stack(stack)
    template.has_resource(
        "AWS::FSx::FileSystem",
        {
            "Properties": Match.object_like(
                {
                    "StorageCapacity": 1200,
                    "FileSystemTypeVersion": "2.15",
                    "LustreConfiguration": Match.object_like({"DeploymentType": "SCRATCH_2"}),
                    "SubnetIds": [stack.resolve(network.placement_subnet().subnet_id)],
                }
            ),
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )


def test_persistent_2_takes_throughput_and_a_customer_key(stack: cdk.Stack, network: TrainingNetwork) -> None:
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    SharedLustre(
        stack,
        "Fsx",
        vpc=network.vpc,
        deployment_type=LustreDeploymentType.PERSISTENT_2,
        storage_capacity_gib=4800,
        per_unit_storage_throughput_mbps=250,
        kms_key=key,
    )
    Template.from_stack(stack).has_resource(
        "AWS::FSx::FileSystem",
        {
            "Properties": Match.object_like(
                {
                    "StorageCapacity": 4800,
                    "KmsKeyId": Match.any_value(),
                    "LustreConfiguration": Match.object_like(
                        {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250}
                    ),
                }
            ),
            "DeletionPolicy": "Retain",
        },
    )


def test_persistent_2_is_backed_up_daily_for_7_days_in_a_fixed_window(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    SharedLustre(
        stack,
        "Fsx",
        vpc=network.vpc,
        deployment_type=LustreDeploymentType.PERSISTENT_2,
        per_unit_storage_throughput_mbps=125,
    )
    (file_system,) = Template.from_stack(stack).find_resources("AWS::FSx::FileSystem").values()
    configuration = file_system["Properties"]["LustreConfiguration"]
    assert configuration["AutomaticBackupRetentionDays"] == 7
    assert configuration["CopyTagsToBackups"] is True
    assert configuration["DailyAutomaticBackupStartTime"] == "05:00"
    # maintenance pinned away from the backup window (FSx would otherwise pick a random one)
    assert configuration["WeeklyMaintenanceStartTime"] == "7:02:00"


@pytest.mark.parametrize(("days", "expected"), [(0, 0), (30, 30), (90, 90)])
def test_backup_retention_is_configurable_and_0_turns_backups_off(
    stack: cdk.Stack, network: TrainingNetwork, days: int, expected: int
) -> None:
    SharedLustre(
        stack,
        "Fsx",
        vpc=network.vpc,
        deployment_type="PERSISTENT_2",
        per_unit_storage_throughput_mbps=125,
        backup_retention_days=days,
    )
    (file_system,) = Template.from_stack(stack).find_resources("AWS::FSx::FileSystem").values()
    configuration = file_system["Properties"]["LustreConfiguration"]
    assert configuration["AutomaticBackupRetentionDays"] == expected
    assert ("DailyAutomaticBackupStartTime" in configuration) is (days > 0)


def test_scratch_2_has_no_backup_settings(stack: cdk.Stack, network: TrainingNetwork) -> None:
    SharedLustre(stack, "Fsx", vpc=network.vpc)
    (file_system,) = Template.from_stack(stack).find_resources("AWS::FSx::FileSystem").values()
    configuration = file_system["Properties"]["LustreConfiguration"]
    assert not {"AutomaticBackupRetentionDays", "CopyTagsToBackups", "DailyAutomaticBackupStartTime"} & set(
        configuration
    )


@pytest.mark.parametrize(
    ("removal", "group_policy"), [(cdk.RemovalPolicy.RETAIN, "Retain"), (cdk.RemovalPolicy.DESTROY, None)]
)
def test_a_retained_file_system_keeps_its_security_group(
    stack: cdk.Stack, network: TrainingNetwork, removal: cdk.RemovalPolicy, group_policy: str | None
) -> None:
    fs = SharedLustre(stack, "Fsx", vpc=network.vpc, removal_policy=removal)
    group = Template.from_stack(stack).to_json()["Resources"][
        stack.get_logical_id(fs.security_group.node.default_child)
    ]
    assert group.get("DeletionPolicy") == group_policy


#: Lustre's ports: the server's 988 and the clients' 1018-1023 (FSx for Lustre user guide, "File system access
#: control with Amazon VPC").
LUSTRE = [988, (1018, 1023)]


def _file_servers(group: str) -> set[Rule]:
    """The file system group's rules among its own servers: each Lustre port range both ways."""
    return {
        ingress(group, (988, 1023)),  # aws-cdk-lib's LustreFileSystem opens its own range to itself
        *(rule(group, ports) for rule in (ingress, egress) for ports in LUSTRE),
    }


def test_the_file_servers_talk_lustre_with_each_other_and_nothing_else(
    stack: cdk.Stack, network: TrainingNetwork
) -> None:
    fs = SharedLustre(stack, "Fsx", vpc=network.vpc)
    group = logical_id(fs.security_group)
    assert security_group_rules(Template.from_stack(stack).to_json(), group) == _file_servers(group)


def test_clients_get_lustre_ports_988_and_1018_to_1023(stack: cdk.Stack, network: TrainingNetwork) -> None:
    fs = SharedLustre(stack, "Fsx", vpc=network.vpc)
    fs.allow_clients_from(network)
    template = Template.from_stack(stack).to_json()
    fs_group, efa_group = logical_id(fs.security_group), logical_id(network.efa_security_group)
    assert security_group_rules(template, fs_group) == _file_servers(fs_group) | {
        rule(efa_group, ports) for rule in (ingress, egress) for ports in LUSTRE
    }
    # clients whose group denies egress by default get the matching egress rule, and the servers' calls back
    assert security_group_rules(template, efa_group) == {
        all_traffic("ingress", efa_group),
        all_traffic("egress", efa_group),
        *(rule(fs_group, ports) for rule in (ingress, egress) for ports in LUSTRE),
    }
    assert fs.connections.default_port is not None
    assert stack.resolve(fs.connections.default_port.to_string()) == "988"


@pytest.mark.parametrize(
    ("allow", "to_fs"),
    [
        pytest.param(lambda fs, c: fs.connections.allow_from(c, LUSTRE_PORT), True, id="fs.allow_from"),
        pytest.param(lambda fs, c: c.connections.allow_to(fs, LUSTRE_PORT), True, id="client.allow_to"),
        pytest.param(lambda fs, c: fs.connections.allow_to(c, LUSTRE_PORT), False, id="fs.allow_to"),
        pytest.param(lambda fs, c: c.connections.allow_from(fs, LUSTRE_PORT), False, id="client.allow_from"),
    ],
)
def test_every_connections_call_between_stacks_puts_both_rules_in_the_clients_stack(
    allow: Any, to_fs: bool
) -> None:
    """Whichever side the call starts on, the pair of rules lands in the stack of the side that is not
    shared (CDK alone would put it in the file system's stack when the call starts there: a cycle)."""
    layout = StorageAndCluster()
    app, storage, cluster, client = layout.app, layout.storage, layout.cluster, layout.client
    fs = SharedLustre(storage, "Fsx", vpc=layout.network.vpc)
    cdk.CfnOutput(cluster, "MountTarget", value=fs.mount_target())

    allow(fs, client)

    rules = Template.from_stack(cluster).to_json()
    fs_group = cluster.resolve(fs.security_group.security_group_id)  # imported from the storage stack
    imported, own = text(fs_group), logical_id(client)
    # the client's group allows no outbound traffic: its placeholder egress goes once it has a rule out
    client_rules = {egress(imported, 988)} if to_fs else {ingress(imported, 988), NO_EGRESS}
    assert security_group_rules(rules, own) == client_rules
    assert security_group_rules(rules, fs_group) == {(ingress if to_fs else egress)(own, 988)}
    assert security_group_rules(Template.from_stack(storage).to_json(), logical_id(fs.security_group)) == (
        _file_servers(logical_id(fs.security_group))
    )
    app.synth()  # no dependency cycle


def test_connections_asked_of_a_file_system_in_a_storage_stack_land_in_the_clients_stack() -> None:
    """STYLE habit 4's call, ``fs.connections.allow_default_port_from(cluster)``, across stacks: CDK would put
    the ingress rule in the storage stack (which would then depend on the cluster's stack that mounts it)."""
    layout = StorageAndCluster()
    app, storage, cluster, client = layout.app, layout.storage, layout.cluster, layout.client
    fs = SharedLustre(storage, "Fsx", vpc=layout.network.vpc)
    cdk.CfnOutput(cluster, "MountTarget", value=fs.mount_target())  # the cluster stack uses the file system

    fs.connections.allow_default_port_from(client)
    fs.connections.allow_from(client, LUSTRE_CLIENT_PORTS)

    rules = Template.from_stack(cluster).to_json()
    fs_group = cluster.resolve(fs.security_group.security_group_id)
    assert security_group_rules(rules, logical_id(client)) == {
        egress(text(fs_group), ports) for ports in LUSTRE
    }
    assert security_group_rules(rules, fs_group) == {ingress(logical_id(client), ports) for ports in LUSTRE}
    # only the file servers' rules among themselves in the storage stack
    own = logical_id(fs.security_group)
    assert security_group_rules(Template.from_stack(storage).to_json(), own) == _file_servers(own)
    app.synth()  # no dependency cycle


def test_data_repository_association_imports_and_exports(stack: cdk.Stack, network: TrainingNetwork) -> None:
    bucket = s3.Bucket.from_bucket_name(stack, "Data", "my-datasets")
    SharedLustre(
        stack,
        "Fsx",
        vpc=network.vpc,
        data_repository=DataRepository(bucket=bucket, prefix="imagenet", file_system_path="/datasets"),
    )
    Template.from_stack(stack).has_resource_properties(
        "AWS::FSx::DataRepositoryAssociation",
        {
            "DataRepositoryPath": "s3://my-datasets/imagenet",
            "FileSystemPath": "/datasets",
            "BatchImportMetaDataOnCreate": True,
            "S3": {
                "AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]},
                "AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]},
            },
        },
    )


def test_existing_file_system_is_adopted(stack: cdk.Stack, network: TrainingNetwork) -> None:
    group = ec2.SecurityGroup.from_security_group_id(stack, "FsxGroup", "sg-0123456789abcdef0")
    fs = SharedLustre(
        stack,
        "Fsx",
        vpc=network.vpc,
        existing=ExistingLustre(
            file_system_id="fs-0123456789abcdef0",
            dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            mount_name="abcdefgh",
            security_group=group,
        ),
    )
    assert fs.file_system is None
    assert fs.mount_target() == "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh"
    Template.from_stack(stack).resource_count_is("AWS::FSx::FileSystem", 0)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"storage_capacity_gib": 1000},
            "Test/Fsx: storage_capacity_gib must be 1200 or a multiple of 2400 for SCRATCH_2, got 1000",
        ),
        (
            {
                "storage_capacity_gib": 3600,
                "deployment_type": LustreDeploymentType.PERSISTENT_2,
                "per_unit_storage_throughput_mbps": 125,
            },
            "Test/Fsx: storage_capacity_gib must be 1200 or a multiple of 2400 for PERSISTENT_2, got 3600",
        ),
        (
            {"deployment_type": LustreDeploymentType.PERSISTENT_2},
            "Test/Fsx: per_unit_storage_throughput_mbps is required for PERSISTENT_2; allowed: 125, 250, 500, 1000",
        ),
        (
            {"deployment_type": LustreDeploymentType.PERSISTENT_2, "per_unit_storage_throughput_mbps": 200},
            "Test/Fsx: per_unit_storage_throughput_mbps must be one of 125, 250, 500, 1000 for PERSISTENT_2, got 200",
        ),
        (
            {"per_unit_storage_throughput_mbps": 125},
            "Test/Fsx: per_unit_storage_throughput_mbps applies to PERSISTENT_2 only; SCRATCH_2 has a fixed "
            "throughput, got 125",
        ),
        (
            {"backup_retention_days": 7},
            "Test/Fsx: backup_retention_days applies to PERSISTENT_2 only; FSx cannot back up a SCRATCH_2 "
            "file system, got 7",
        ),
        (
            {"backup_retention_days": 0},
            "Test/Fsx: backup_retention_days applies to PERSISTENT_2 only; FSx cannot back up a SCRATCH_2 "
            "file system, got 0",
        ),
        (
            {
                "deployment_type": LustreDeploymentType.PERSISTENT_2,
                "per_unit_storage_throughput_mbps": 125,
                "backup_retention_days": 91,
            },
            "Test/Fsx: backup_retention_days must be between 0 (no automatic backups) and 90 days, got 91",
        ),
        (
            {
                "deployment_type": LustreDeploymentType.PERSISTENT_2,
                "per_unit_storage_throughput_mbps": 125,
                "backup_retention_days": -1,
            },
            "Test/Fsx: backup_retention_days must be between 0 (no automatic backups) and 90 days, got -1",
        ),
    ],
)
def test_bad_props_are_clear_errors(
    stack: cdk.Stack, network: TrainingNetwork, props: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        SharedLustre(stack, "Fsx", vpc=network.vpc, **props)  # type: ignore[arg-type]
    assert str(error.value) == message


def test_customer_key_on_scratch_is_a_clear_error(stack: cdk.Stack, network: TrainingNetwork) -> None:
    with pytest.raises(ConfigurationError) as error:
        SharedLustre(stack, "Fsx", vpc=network.vpc, kms_key=kms.Key(stack, "Key"))
    assert str(error.value) == (
        "Test/Fsx: kms_key applies to PERSISTENT_2 only; SCRATCH_2 is always encrypted with an FSx-managed key"
    )


def test_existing_with_shaping_props_is_a_clear_error(stack: cdk.Stack, network: TrainingNetwork) -> None:
    group = ec2.SecurityGroup.from_security_group_id(stack, "FsxGroup", "sg-0123456789abcdef0")
    existing = ExistingLustre("fs-0123456789abcdef0", "dns", "mount", group)
    with pytest.raises(ConfigurationError) as error:
        SharedLustre(stack, "Fsx", vpc=network.vpc, existing=existing, storage_capacity_gib=2400)
    assert str(error.value) == (
        "Test/Fsx: existing adopts a file system made elsewhere, so storage_capacity_gib cannot also be given"
    )


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            {"dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com';touch /tmp/x;'"},
            "Test/Fsx: existing.dns_name must be the file system's DNS name, letters, digits, hyphens and dots "
            "such as fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com, got "
            "\"fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com';touch /tmp/x;'\"",
        ),
        (
            {"dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com $(reboot)"},
            "Test/Fsx: existing.dns_name must be the file system's DNS name, letters, digits, hyphens and dots "
            "such as fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com, got "
            "'fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com $(reboot)'",
        ),
        (
            {"mount_name": "abc;id"},
            "Test/Fsx: existing.mount_name must be the file system's mount name, 1-8 letters, digits, '_' or '-' "
            "such as 'abcdefgh' (FSx's MountName), got 'abc;id'",
        ),
        (
            {"mount_name": "abcdefghi"},
            "Test/Fsx: existing.mount_name must be the file system's mount name, 1-8 letters, digits, '_' or '-' "
            "such as 'abcdefgh' (FSx's MountName), got 'abcdefghi'",
        ),
    ],
    ids=["dns-quote", "dns-command", "mount-semicolon", "mount-too-long"],
)
def test_existing_names_that_could_run_as_commands_are_clear_errors(
    stack: cdk.Stack, network: TrainingNetwork, names: dict[str, str], message: str
) -> None:
    group = ec2.SecurityGroup.from_security_group_id(stack, "FsxGroup", "sg-0123456789abcdef0")
    props = {
        "dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        "mount_name": "abcdefgh",
        **names,
    }
    existing = ExistingLustre(file_system_id="fs-0123456789abcdef0", security_group=group, **props)
    with pytest.raises(ConfigurationError) as error:
        SharedLustre(stack, "Fsx", vpc=network.vpc, existing=existing)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("dns_name", "mount_name"),
    [
        ("fs-0123456789abcdef0.fsx.cn-north-1.amazonaws.com.cn", "fsx"),
        (
            cdk.Token.as_string(cdk.Fn.import_value("FsxDnsName")),
            cdk.Token.as_string(cdk.Fn.import_value("Mount")),
        ),
    ],
    ids=["china-persistent-1", "tokens"],
)
def test_existing_names_of_every_partition_and_tokens_are_accepted(
    stack: cdk.Stack, network: TrainingNetwork, dns_name: str, mount_name: str
) -> None:
    group = ec2.SecurityGroup.from_security_group_id(stack, "FsxGroup", "sg-0123456789abcdef0")
    existing = ExistingLustre("fs-0123456789abcdef0", dns_name, mount_name, group)
    fs = SharedLustre(stack, "Fsx", vpc=network.vpc, existing=existing)
    assert fs.dns_name == dns_name and fs.mount_name == mount_name


@pytest.mark.parametrize(
    ("repository", "message"),
    [
        (
            {"file_system_path": "datasets"},
            "Test/Fsx: data_repository.file_system_path must be an absolute path such as /datasets, got 'datasets'",
        ),
        (
            {"prefix": "/imagenet"},
            "Test/Fsx: data_repository.prefix is an S3 key prefix and must not start with '/', got '/imagenet'",
        ),
    ],
)
def test_bad_data_repository_is_a_clear_error(
    stack: cdk.Stack, network: TrainingNetwork, repository: dict[str, str], message: str
) -> None:
    bucket = s3.Bucket.from_bucket_name(stack, "Data", "my-datasets")
    with pytest.raises(ConfigurationError) as error:
        SharedLustre(
            stack, "Fsx", vpc=network.vpc, data_repository=DataRepository(bucket=bucket, **repository)
        )  # type: ignore[arg-type]
    assert str(error.value) == message


@gated_stack("lustre")
def _gated_lustre(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    fs = SharedLustre(
        stack,
        "Fsx",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        deployment_type=LustreDeploymentType.PERSISTENT_2,
        per_unit_storage_throughput_mbps=125,
        data_repository=DataRepository(bucket=s3.Bucket.from_bucket_name(stack, "Data", "my-datasets")),
    )
    fs.allow_clients_from(network)


def test_lustre_passes_the_gates(gated_stacks: GatedStacks) -> None:
    gated_stacks.get("lustre").assert_clean()


@pytest.mark.parametrize(
    "clients",
    [
        pytest.param(lambda network: network, id="network"),
        pytest.param(lambda network: network.efa_security_group, id="efa_security_group"),
    ],
)
def test_the_network_as_clients_of_a_storage_stack_gets_the_rules_in_the_storage_stack(clients: Any) -> None:
    """The storage stack uses the network's stack (its VPC): rules there would make the network's stack
    depend on the storage stack, a cycle."""
    layout = StorageAndCluster()
    fs = SharedLustre(layout.cluster, "Fsx", vpc=layout.network.vpc)  # the cluster stack as a storage stack

    fs.allow_clients_from(clients(layout.network))
    fs.connections.allow_default_port_from(clients(layout.network), "988 again, a rule of its own")

    network_rules = Template.from_stack(layout.storage).find_resources("AWS::EC2::SecurityGroupIngress")
    assert len(network_rules) == 1  # the EFA group's own all-traffic rule, nothing of the file system's
    ingress = Template.from_stack(layout.cluster).find_resources("AWS::EC2::SecurityGroupIngress")
    # servers among themselves (988, 1018-1023), from clients, back to clients, 988 again
    assert len(ingress) == 2 + 2 + 2 + 1
    layout.app.synth()  # no dependency cycle
