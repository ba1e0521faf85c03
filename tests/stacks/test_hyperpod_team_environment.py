"""environments/hyperpod-team.yaml: the stack makes the accounting database, opens its port to the controller only,
lets the nodes read its secret only, and hands the team's settings to the lifecycle scripts."""

from __future__ import annotations

import json
from typing import Any

from training_clusters.stacks.hyperpod import HyperPodEnvironment

from ..assertions import allow, role_statements
from ..conftest import ROOT, EnvironmentGates

TEAM = ROOT / "environments" / "hyperpod-team.yaml"


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def test_the_database_admits_the_controller_on_3306_only(environment_gates: EnvironmentGates) -> None:
    stack, _ = environment_gates.get(TEAM)
    template = environment_gates.template(TEAM)
    assert isinstance(stack, HyperPodEnvironment) and stack.accounting_database is not None
    db_group = stack.resolve(stack.accounting_database.security_group.security_group_id)
    ingress = [
        r["Properties"]
        for r in _of_type(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("GroupId") == db_group
    ]
    handler = stack.accounting_database.node.find_child("UserHandlerSecurityGroup")
    rotation = stack.accounting_database.node.find_child("RotationSecurityGroup")
    # the controller, the deploy-time function that makes slurmdbd's user and the rotation of its password;
    # no other node
    expected = [stack.cluster.controller_security_group, handler, rotation]
    by_source = {json.dumps(i["SourceSecurityGroupId"], sort_keys=True): i for i in ingress}
    assert len(by_source) == len(ingress) == 3
    for group in expected:
        rule = by_source[json.dumps(stack.resolve(group.security_group_id), sort_keys=True)]
        assert {k: v for k, v in rule.items() if k != "Description"} == {
            "IpProtocol": "tcp",
            "FromPort": 3306,
            "ToPort": 3306,
            "GroupId": db_group,
            "SourceSecurityGroupId": stack.resolve(group.security_group_id),
        }


def test_the_nodes_read_the_database_secret_and_no_other(environment_gates: EnvironmentGates) -> None:
    stack, _ = environment_gates.get(TEAM)
    template = environment_gates.template(TEAM)
    assert isinstance(stack, HyperPodEnvironment) and stack.accounting_database is not None
    secret = stack.resolve(stack.accounting_database.slurmdbd_secret.secret_arn)  # never the master's
    reads = {
        role: {
            st
            for st in role_statements(template, stack.get_logical_id(role.node.default_child))
            if any(action.startswith("secretsmanager:") for action in st.actions)
        }
        for role in (stack.cluster.role, stack.cluster.controller_role)
    }
    assert reads == {
        stack.cluster.role: set(),
        stack.cluster.controller_role: {allow({"secretsmanager:GetSecretValue"}, [secret])},
    }


def test_the_team_settings_reach_the_lifecycle_scripts(environment_gates: EnvironmentGates) -> None:
    stack, _ = environment_gates.get(TEAM)
    assert isinstance(stack, HyperPodEnvironment)
    settings = stack.cluster.lifecycle_settings
    # API-driven Slurm under continuous provisioning: HyperPod's AccountingDatabase, not our controller's
    assert "accounting" not in settings and settings["slurm_config"] == "api"
    assert [(u["name"], u["uid"], u["gid"], u["groups"]) for u in settings["users"]] == [
        ("alice", 2001, 2001, [{"name": "ml-team", "gid": 3000}]),
        ("bob", 2002, 2002, [{"name": "ml-team", "gid": 3000}]),
    ]
    assert settings["enable_docker"] is True and settings["enable_pam_slurm_adopt"] is True
    [cluster] = _of_type(environment_gates.template(TEAM), "AWS::SageMaker::Cluster").values()
    assert cluster["Properties"]["NodeProvisioningMode"] == "Continuous"
    assert stack.accounting_database is not None
    assert cluster["Properties"]["Orchestrator"] == {
        "Slurm": {
            "AccountingDatabase": {
                "Endpoint": {
                    "Fn::GetAtt": [
                        stack.get_logical_id(stack.accounting_database.cluster.node.default_child),
                        "Endpoint.Address",
                    ]  # type: ignore[arg-type]
                },
                "Name": "slurm_acct_db",
                "Port": 3306,
                "SecretArn": {"Ref": "AccountingSlurmdbdSecretAttachmentD9EBB3BE"},
            }
        }
    }
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    assert groups["controller-machine"]["InstanceStorageConfigs"] == [
        {"EbsVolumeConfig": {"RootVolume": True, "VolumeSizeInGB": 200}},
        {  # API-driven: HyperPod mounts FSx on every group
            "FsxLustreConfig": {
                "DnsName": {
                    "Fn::Join": [
                        "",
                        [{"Ref": "SharedStorageA8297BFB"}, ".fsx.us-east-1.", {"Ref": "AWS::URLSuffix"}],
                    ]
                },
                "MountName": {"Fn::GetAtt": ["SharedStorageA8297BFB", "LustreMountName"]},
                "MountPath": "/fsx",
            }
        },
    ]
    assert set(groups) == {"controller-machine", "login-group", "gpu-workers"}


def test_the_cluster_waits_for_its_scripts_roles_and_the_database_writer(
    environment_gates: EnvironmentGates,
) -> None:
    """slurmdbd starts on the controller while HyperPod creates the cluster: the Aurora writer instance, which
    CloudFormation creates minutes after its DB cluster, must exist by then."""
    stack, _ = environment_gates.get(TEAM)
    template = environment_gates.template(TEAM)
    assert isinstance(stack, HyperPodEnvironment) and stack.accounting_database is not None
    [cluster] = _of_type(template, "AWS::SageMaker::Cluster").values()
    [writer_id] = _of_type(template, "AWS::RDS::DBInstance")
    assert writer_id == stack.get_logical_id(stack.accounting_database.writer.node.default_child)  # type: ignore[arg-type]
    user_id = stack.get_logical_id(stack.accounting_database.user.node.default_child)  # type: ignore[arg-type]
    assert sorted(cluster["DependsOn"]) == [
        user_id,
        writer_id,
        "HyperPodControllerRoleA6202A60",
        "HyperPodControllerRoleDefaultPolicy6D211D96",
        "HyperPodExecutionRole32B4ED4D",
        "HyperPodExecutionRoleDefaultPolicy39EF654D",
        "HyperPodLifecycleScriptsAwsCliLayer1CCA87DF",
        "HyperPodLifecycleScriptsCustomResource256MiB8339CB6D",
    ]
