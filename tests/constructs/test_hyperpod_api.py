"""API-driven Slurm configuration (``slurm_config`` API, the default): each instance group's ``SlurmConfig``,
the strategy, FSx through ``FsxLustreConfig``, ``OnInitComplete`` and no ``provisioning_parameters.json``;
HyperPod's ``AccountingDatabase`` under continuous provisioning; and every combination the service refuses
("SageMaker HyperPod Slurm configuration", sagemaker-hyperpod-ref; sagemaker-hyperpod-scaling-slurm;
sagemaker-hyperpod-external-accounting-db-slurm)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template

from training_clusters.constructs.common.lustre import SharedLustre
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.hyperpod.cluster import (
    ON_INIT_COMPLETE_SCRIPT,
    HyperPodCluster,
    InstanceGroup,
    LifecycleOptions,
    LustreMount,
    NodeRole,
    Orchestrator,
    lifecycle_scripts_path,
)
from training_clusters.constructs.slurm.accounting import SlurmAccountingDatabase
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import NodeProvisioningMode

from ..assertions import allow
from ..conftest import AZS
from .test_hyperpod import CONTROLLER, WORKERS, build
from .test_hyperpod_team import _secret_statements

LOGIN = InstanceGroup(name="login-group", instance_type="ml.m5.xlarge", role=NodeRole.LOGIN)
TRAIN = InstanceGroup(name="worker-group-2", instance_type="ml.c5.xlarge", partition="train")
FSX_DNS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
ACK = " [ack: training-clusters:slurm-config-default]"


def _props(stack: cdk.Stack) -> dict[str, Any]:
    [props] = [
        r["Properties"] for r in Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster").values()
    ]
    return props


def _fsx(stack: cdk.Stack) -> dict[str, Any]:
    fs = stack.node.find_child("Fsx")
    assert isinstance(fs, SharedLustre)
    return {
        "FsxLustreConfig": {
            "DnsName": stack.resolve(fs.dns_name),
            "MountName": stack.resolve(fs.mount_name),
            "MountPath": "/fsx",
        }
    }


def test_each_group_carries_its_slurm_config_fsx_and_on_init_complete(stack: cdk.Stack) -> None:
    cluster = build(stack, [CONTROLLER, LOGIN, WORKERS, TRAIN], slurm_config="api")
    props = _props(stack)
    uri = stack.resolve(cluster.source_s3_uri)
    fsx = _fsx(stack)
    assert [
        (g["InstanceGroupName"], g["SlurmConfig"], g["LifeCycleConfig"], g["InstanceStorageConfigs"])
        for g in props["InstanceGroups"]
    ] == [
        ("controller-machine", {"NodeType": "Controller"}, {"SourceS3Uri": uri, "OnInitComplete": ON_INIT_COMPLETE_SCRIPT}, [fsx]),
        ("login-group", {"NodeType": "Login"}, {"SourceS3Uri": uri, "OnInitComplete": ON_INIT_COMPLETE_SCRIPT}, [fsx]),
        ("worker-group-1", {"NodeType": "Compute", "PartitionNames": ["dev"]}, {"SourceS3Uri": uri, "OnInitComplete": ON_INIT_COMPLETE_SCRIPT}, [fsx]),
        ("worker-group-2", {"NodeType": "Compute", "PartitionNames": ["train"]}, {"SourceS3Uri": uri, "OnInitComplete": ON_INIT_COMPLETE_SCRIPT}, [fsx]),
    ]  # fmt: skip
    assert props["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Merge"}}
    assert "NodeProvisioningMode" not in props
    assert (lifecycle_scripts_path() / ON_INIT_COMPLETE_SCRIPT).is_file()


def test_no_provisioning_parameters_and_the_settings_name_the_groups(stack: cdk.Stack) -> None:
    cluster = build(stack, [CONTROLLER, LOGIN, WORKERS, TRAIN], slurm_config="api")
    assert cluster.provisioning_parameters is None
    assert cluster.lifecycle_settings == {
        "slurm_config": "api",
        "controller_group": "controller-machine",
        "login_group": "login-group",
        "worker_groups": [
            {"instance_group_name": "worker-group-1", "partition_name": "dev"},
            {"instance_group_name": "worker-group-2", "partition_name": "train"},
        ],
        "enable_enroot_pyxis": True,
        "enable_observability": False,
        "fsx_mount_dir": "/fsx",
    }
    assembly = cdk.Stage.of(stack).synth()  # type: ignore[union-attr]
    template = assembly.get_stack_by_name(stack.stack_name).template
    deployment = next(r for r in template["Resources"].values() if r["Type"] == "Custom::CDKBucketDeployment")
    assert len(deployment["Properties"]["SourceObjectKeys"]) == 2  # scripts and our settings only


@pytest.mark.parametrize("strategy", ["Managed", "Overwrite", "Merge", "managed"])
def test_the_strategy_given_is_sent(stack: cdk.Stack, strategy: str) -> None:
    cluster = build(stack, slurm_config="api", slurm_config_strategy=strategy)
    assert _props(stack)["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": strategy.capitalize()}}
    assert cluster.slurm_config_strategy == strategy.capitalize()


def test_legacy_sends_no_slurm_config_and_runs_on_create(stack: cdk.Stack) -> None:
    build(stack, slurm_config="legacy")
    props = _props(stack)
    assert "Orchestrator" not in props
    for group in props["InstanceGroups"]:
        assert "SlurmConfig" not in group
        assert set(group["LifeCycleConfig"]) == {"SourceS3Uri", "OnCreate"}
        assert "InstanceStorageConfigs" not in group


def _warnings(stack: cdk.Stack) -> list[str]:
    return [
        str(m.entry.data)
        for m in Annotations.from_stack(stack).find_warning("*", Match.any_value())
        if "slurm-config-default" in str(m.entry.data)
    ]


def test_an_unstated_mode_is_api_with_a_warning(stack: cdk.Stack) -> None:
    cluster = build(stack, slurm_config=None)
    assert cluster.is_api_driven
    assert _warnings(stack) == [
        "slurm_config is not stated, so this cluster is API-driven (each instance group's SlurmConfig, no "
        "provisioning_parameters.json). A cluster deployed by an earlier version of this library is legacy: "
        "HyperPod refuses SlurmConfig beside its provisioning_parameters.json and the update fails and rolls "
        "back. State slurm_config legacy for such a cluster, or slurm_config api for a new one "
        f"(docs/hyperpod-slurm.md).{ACK}"
    ]


@pytest.mark.parametrize("mode", ["api", "legacy"])
def test_a_stated_mode_does_not_warn(stack: cdk.Stack, mode: str) -> None:
    build(stack, slurm_config=mode)
    assert _warnings(stack) == []


def test_continuous_provisioning_sends_no_strategy(stack: cdk.Stack) -> None:
    cluster = build(stack, slurm_config="api", node_provisioning_mode=NodeProvisioningMode.CONTINUOUS)
    assert _props(stack)["Orchestrator"] == {"Slurm": {}}
    assert cluster.slurm_config_strategy is None


def _database_cluster(stack: cdk.Stack, **props: Any) -> tuple[HyperPodCluster, SlurmAccountingDatabase]:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, removal_policy="destroy")
    cluster = HyperPodCluster(
        stack,
        "Team",
        cluster_name="team",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[CONTROLLER, WORKERS],
        lustre=LustreMount(dns_name=FSX_DNS, mount_name="abcdefgh"),
        accounting=db,
        **props,
    )
    db.connections.allow_default_port_from(cluster.controller_connections)
    return cluster, db


def test_continuous_provisioning_hands_hyperpod_our_database_and_slurmdbds_secret(stack: cdk.Stack) -> None:
    cluster, db = _database_cluster(stack, slurm_config="api", node_provisioning_mode="continuous")
    assert _props(stack)["Orchestrator"] == {
        "Slurm": {
            "AccountingDatabase": {
                "Endpoint": stack.resolve(db.endpoint),
                "Name": "slurm_acct_db",
                "Port": 3306,
                "SecretArn": stack.resolve(db.slurmdbd_secret.secret_arn),
            }
        }
    }
    assert "accounting" not in cluster.lifecycle_settings  # HyperPod's slurmdbd, not ours
    # The controller (where HyperPod runs slurmdbd) reads slurmdbd's secret; no other node's role does.
    template = Template.from_stack(stack).to_json()
    assert _secret_statements(template, cluster.controller_role) == {
        allow({"secretsmanager:GetSecretValue"}, [stack.resolve(db.slurmdbd_secret.secret_arn)])
    }
    assert _secret_statements(template, cluster.role) == set()


def _error(stack: cdk.Stack, **props: Any) -> str:
    with pytest.raises(ConfigurationError) as error:
        build(stack, **props)
    return str(error.value)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"slurm_config": "legacy", "slurm_config_strategy": "Managed"},
            "Test/HyperPod: slurm_config_strategy applies to slurm_config api only (it governs the instance "
            "groups' SlurmConfig, which legacy clusters do not have), got Managed with slurm_config legacy",
        ),
        (
            {"slurm_config": "api", "slurm_config_strategy": "Merge", "node_provisioning_mode": "continuous"},
            "Test/HyperPod: slurm_config_strategy must be left out with node_provisioning_mode Continuous: "
            "HyperPod rejects any SlurmConfigStrategy there and merges edits made on the controller, got Merge",
        ),
        (
            {"slurm_config": "legacy", "node_provisioning_mode": "continuous"},
            "Test/HyperPod: node_provisioning_mode Continuous needs slurm_config api: HyperPod's continuous "
            "provisioning on Slurm requires each instance group's SlurmConfig and cannot read "
            "provisioning_parameters.json, got slurm_config legacy",
        ),
        (
            {"slurm_config": "yaml"},
            "Test/HyperPod: slurm_config must be one of api, legacy, got 'yaml'",
        ),
        (
            {"slurm_config": "api", "slurm_config_strategy": "Replace"},
            "Test/HyperPod: slurm_config_strategy must be one of Managed, Overwrite, Merge, got 'Replace'",
        ),
    ],
)
def test_combinations_the_service_refuses(stack: cdk.Stack, props: dict[str, Any], message: str) -> None:
    assert _error(stack, **props) == message


def test_an_external_database_needs_continuous_provisioning(stack: cdk.Stack) -> None:
    with pytest.raises(ConfigurationError) as error:
        _database_cluster(stack, slurm_config="api")
    assert str(error.value) == (
        "Test/Team: accounting external with slurm_config api needs node_provisioning_mode continuous: HyperPod "
        "connects its slurmdbd to an external database (AccountingDatabase) only under continuous provisioning; "
        "set slurm_config legacy to keep the lifecycle scripts' slurmdbd on the controller, got external "
        "without continuous provisioning"
    )


def test_fsx_dns_name_must_be_one_hyperpod_takes(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    with pytest.raises(ConfigurationError) as error:
        HyperPodCluster(
            stack,
            "HyperPod",
            cluster_name="ml-cluster",
            vpc=network.vpc,
            subnet=network.placement_subnet(),
            instance_groups=[CONTROLLER, WORKERS],
            lustre=LustreMount(dns_name="lustre.example.com", mount_name="abcdefgh"),
            slurm_config="api",
        )
    assert str(error.value) == (
        "Test/HyperPod: lustre.dns_name must be an FSx for Lustre DNS name such as "
        "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com (HyperPod's FsxLustreConfig.DnsName), got "
        "'lustre.example.com'"
    )


def test_slurm_config_is_slurms_only(stack: cdk.Stack, tmp_path: Path) -> None:
    (tmp_path / "on_create.sh").write_text("#!/bin/bash\n")
    message = _error(
        stack,
        slurm_config="api",
        orchestrator=Orchestrator.eks("arn:aws:eks:us-east-1:123456789012:cluster/eks"),
        lifecycle_scripts_dir=tmp_path,
    )
    assert (
        message
        == "Test/HyperPod: slurm_config applies to the Slurm orchestrator only, got api with the EKS orchestrator"
    )


def test_a_provisioning_parameters_key_is_refused(stack: cdk.Stack) -> None:
    message = _error(stack, slurm_config="api", lifecycle=LifecycleOptions(extra={"version": "2.0.0"}))
    assert message == (
        "Test/HyperPod: lifecycle.extra holds 'version', a key of provisioning_parameters.json, which an "
        "API-driven cluster (slurm_config api) does not upload"
    )


def test_own_scripts_need_the_api_entry_point(stack: cdk.Stack, tmp_path: Path) -> None:
    (tmp_path / "on_create.sh").write_text("#!/bin/bash\n")
    message = _error(stack, slurm_config="api", lifecycle_scripts_dir=tmp_path)
    assert message == (
        f"Test/HyperPod: lifecycle_scripts_dir must be a folder holding on_init_complete.sh, the script HyperPod "
        f"runs on every node, got '{tmp_path}', which has no on_init_complete.sh"
    )


def test_the_reduced_scripts_run_with_the_settings_the_construct_writes(
    stack: cdk.Stack, tmp_path: Path
) -> None:
    """The generated training_clusters.json, on a sandboxed worker HyperPod has set up: the reduced lifecycle
    accepts it and configures the node."""
    from tests.lifecycle.sandbox import Sandbox, link_real_tools
    from tests.lifecycle.test_lifecycle_api import as_hyperpod_leaves_it, run_api

    cluster = build(
        stack,
        [CONTROLLER, LOGIN, WORKERS, TRAIN],
        slurm_config="api",
        lifecycle=LifecycleOptions(enable_docker=True),
    )
    (tmp_path / "tools").mkdir()
    sandbox = Sandbox(tmp=tmp_path / "node", tools=link_real_tools(tmp_path / "tools"))
    as_hyperpod_leaves_it(sandbox, "worker")
    (sandbox.scripts / "training_clusters.json").write_text(json.dumps(cluster.lifecycle_settings))

    run = run_api(sandbox)

    assert run.returncode == 0, run.output
    assert "SUCCESS: node configured as worker (group worker-group-1)" in run.log
    assert "step 'docker' started" in run.log
