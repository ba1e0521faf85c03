"""The environment file's model (training_clusters/config.py) where ``make mutation`` found one-line changes no
other test noticed, and its documented defaults pinned (a field's "Default:" in its description, and the
defaults a property resolves), free of CDK."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import TypeAdapter, ValidationError

from training_clusters import config
from training_clusters.capacity import Capacity
from training_clusters.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.config import (
    CapacityConfig,
    EksEfaNodegroupConfig,
    EksGpuNodegroupConfig,
    LustreConfig,
    NetworkConfig,
    PclusterComputeResourceConfig,
    PcsComputeNodeGroupConfig,
    UserConfig,
    environment_name,
    parse_environment,
)
from training_clusters.errors import ConfigurationError
from training_clusters.options import NodeRecovery, PcsPurchaseOption

CR = "cr-0123456789abcdef0"
MINIMAL: dict[str, Any] = {"region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"]}


def test_a_rule_field_validator_refuses_with_the_rules_words_and_passes_none() -> None:
    check = config._follows(lambda value: "must be small" if value > 1 else None)
    assert check(None) is None
    assert check(1) == 1
    with pytest.raises(ValueError, match=r"^must be small$"):
        check(2)


def test_a_capacity_field_validator_checks_the_orchestrators_forms() -> None:
    check = config._capacity_for(CapacityOrchestrator.HYPERPOD)
    assert check(None) is None
    on_demand = CapacityConfig(type="on-demand")
    assert check(on_demand) is on_demand
    with pytest.raises(
        ValueError, match=r"^spot is not supported by SageMaker HyperPod; use on-demand or training-plan$"
    ):
        check(CapacityConfig(type="spot"))


def test_a_choice_field_parses_every_spelling_and_writes_the_value_back() -> None:
    field = TypeAdapter(Annotated[NodeRecovery, config._FileChoice(NodeRecovery)])
    assert field.validate_python("automatic") is NodeRecovery.AUTOMATIC
    assert field.validate_python("NONE") is NodeRecovery.NONE
    assert field.dump_python(NodeRecovery.AUTOMATIC) == "Automatic"
    assert field.dump_json(NodeRecovery.NONE) == b'"None"'
    assert field.json_schema() == {"type": "string", "enum": ["Automatic", "automatic", "None", "none"]}
    with pytest.raises(ValidationError, match="must be one of Automatic, None, got 'sometimes'"):
        field.validate_python("sometimes")


def test_the_environments_name() -> None:
    named = parse_environment({**MINIMAL, "name": "team-a"})
    assert environment_name(named, Path("environments/other.yaml")) == "team-a"
    unnamed = parse_environment(MINIMAL)
    assert environment_name(unnamed, Path("environments/network-storage.yaml")) == "network-storage"
    with pytest.raises(ConfigurationError) as raised:
        environment_name(unnamed, None)
    assert str(raised.value) == "name: required when the environment does not come from a file"
    with pytest.raises(ConfigurationError) as raised:
        environment_name(unnamed, Path("envs/2nd_try.yaml"))
    assert str(raised.value) == (
        "envs/2nd_try.yaml: the file name '2nd_try' names the environment and its stack, so it must start with a "
        "letter and hold only letters, digits and hyphens (max 63); rename the file or set name:"
    )


def test_resource_tags() -> None:
    assert parse_environment(MINIMAL).resource_tags("env") == {
        "project": "cdk-training-clusters",
        "environment": "env",
    }
    tagged = parse_environment({**MINIMAL, "cost_centre": "ml", "tags": {"team": "a"}})
    assert tagged.resource_tags("env") == {
        "project": "cdk-training-clusters",
        "environment": "env",
        "cost-centre": "ml",
        "team": "a",
    }


@pytest.mark.parametrize(
    ("fields", "capacity"),
    [
        ({}, Capacity.on_demand()),
        ({"purchase_option": "SPOT"}, Capacity.spot()),
        ({"capacity_reservation_id": CR}, Capacity.reservation(CR)),
        ({"capacity": {"type": "capacity-block", "reservation_id": CR}}, Capacity.capacity_block(CR)),
    ],
)
def test_a_pcs_node_groups_capacity(fields: dict[str, Any], capacity: Capacity) -> None:
    group = PcsComputeNodeGroupConfig(name="gpu", instance_type="g5.8xlarge", **fields)
    assert group.node_capacity() == capacity
    assert (
        PcsComputeNodeGroupConfig(name="gpu", instance_type="g5.8xlarge").purchase_option
        is PcsPurchaseOption.ONDEMAND
    )


@pytest.mark.parametrize(
    ("fields", "capacity"),
    [
        ({}, Capacity.on_demand()),
        ({"capacity_type": "SPOT"}, Capacity.spot()),
        ({"capacity_reservation_id": CR}, Capacity.reservation(CR)),
        ({"capacity_type": "CAPACITY_BLOCK", "capacity_reservation_id": CR}, Capacity.capacity_block(CR)),
        (
            {"capacity": {"type": "reservation", "reservation_id": CR, "targeted": False}},
            Capacity.reservation(CR, targeted=False),
        ),
    ],
)
def test_an_eks_efa_nodegroups_capacity(fields: dict[str, Any], capacity: Capacity) -> None:
    nodegroup = EksEfaNodegroupConfig(name="efa", instance_type="g5.8xlarge", size=2, **fields)
    assert nodegroup.node_capacity() == capacity


def test_an_eks_gpu_nodegroups_capacity_is_on_demand_unless_stated() -> None:
    assert (
        EksGpuNodegroupConfig(name="gpu", instance_type="g5.2xlarge", size=1).node_capacity()
        == Capacity.on_demand()
    )
    stated = EksGpuNodegroupConfig(name="gpu", instance_type="g5.2xlarge", size=1, capacity={"type": "spot"})
    assert stated.node_capacity() == Capacity.spot()


def test_documented_defaults_of_the_network_and_the_file_system() -> None:
    """NetworkConfig and LustreConfig as an empty section gives them: one year of flow logs, 10.0.0.0/16, a
    cluster placement group, SCRATCH_2 of 1200 GiB at /fsx kept (RETAIN) when the stack goes."""
    assert NetworkConfig().model_dump(mode="json") == {
        "cidr": "10.0.0.0/16",
        "nat_gateways": None,
        "endpoint_only": False,
        "placement_availability_zone": None,
        "flow_logs_retention_days": 365,
        "placement_group": {"strategy": "cluster", "partitions": None},
    }
    assert LustreConfig().model_dump(mode="json") == {
        "deployment_type": "SCRATCH_2",
        "storage_capacity_gib": 1200,
        "per_unit_storage_throughput_mbps": None,
        "mount_dir": "/fsx",
        "data_repository": None,
        "removal_policy": "retain",
        "backup_retention_days": None,
    }


def test_defaults_the_model_resolves() -> None:
    """ "Default: the first of availability_zones", "enabled where the instance type has EFA", "the uid",
    "false" (capacity's in_placement_group, allow_unknown_region)."""
    environment = parse_environment(MINIMAL)
    assert environment.placement_availability_zone == "us-east-1a"
    assert environment.allow_unknown_region is False
    placed = parse_environment({**MINIMAL, "network": {"placement_availability_zone": "us-east-1b"}})
    assert placed.placement_availability_zone == "us-east-1b"
    for model in (PclusterComputeResourceConfig, PcsComputeNodeGroupConfig):
        assert model(name="gpu", instance_type="g5.8xlarge").efa_enabled is True
        assert model(name="gpu", instance_type="g5.8xlarge", efa=False).efa_enabled is False
        assert model(name="cpu", instance_type="m5.xlarge").efa_enabled is False
    assert UserConfig(name="alice", uid=3001).primary_gid == 3001
    assert UserConfig(name="alice", uid=3001, gid=4000).primary_gid == 4000
    block = CapacityConfig(type="reservation", reservation_id=CR)
    assert (block.targeted, block.in_placement_group) == (True, False)
    assert config.stated_capacity(None) is None
    assert config.stated_capacity(block) == Capacity.reservation(CR)


def _pcluster_models() -> list[tuple[str, Any]]:
    queue = {"name": "gpu", "compute_resources": [{"name": "gpu", "instance_type": "g5.8xlarge"}]}
    return [
        ("queue", lambda ami: config.PclusterQueueConfig(**queue, custom_ami=ami)),
        ("head node", lambda ami: config.PclusterHeadNodeConfig(custom_ami=ami)),
        ("login pool", lambda ami: config.PclusterLoginPoolConfig(custom_ami=ami)),
        ("cluster", lambda ami: config.ParallelClusterConfig(queues=[queue], custom_ami=ami)),
    ]


@pytest.mark.parametrize(("where", "build"), _pcluster_models(), ids=[m[0] for m in _pcluster_models()])
def test_every_custom_ami_of_parallelcluster_is_an_ami_id(where: str, build: Any) -> None:
    assert build(None).custom_ami is None
    assert build("ami-0123456789abcdef0").custom_ami == "ami-0123456789abcdef0"
    with pytest.raises(ValidationError) as raised:
        build("ami-123")
    (problem,) = raised.value.errors()
    assert (problem["loc"], problem["msg"]) == (
        ("custom_ami",),
        "Value error, must be an AMI id such as ami-0123456789abcdef0, got 'ami-123'",
    )
