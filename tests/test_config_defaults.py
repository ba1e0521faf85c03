"""The environment file's model (training_clusters/config/__init__.py) where ``make mutation`` found one-line changes no
other test noticed, and its documented defaults pinned (a field's "Default:" in its description, and the
defaults a property resolves), free of CDK."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import TypeAdapter, ValidationError

from training_clusters import config
from training_clusters.config import (
    CapacityConfig,
    EksEfaNodegroupConfig,
    EksGpuNodegroupConfig,
    LustreConfig,
    NetworkConfig,
    PclusterComputeResourceConfig,
    PclusterQueueConfig,
    PcsComputeNodeGroupConfig,
    UserConfig,
    environment_name,
    load_environment,
    parse_environment,
    yaml_file,
)
from training_clusters.config import base as config_base
from training_clusters.config import capacity as config_capacity
from training_clusters.config.unknown_keys import retired_capacity_key_problem, unknown_key_problem
from training_clusters.model.capacity import Capacity
from training_clusters.model.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.model.errors import ConfigurationError, excerpt
from training_clusters.model.options import NodeRecovery

CR = "cr-0123456789abcdef0"
GROUP = "arn:aws:resource-groups:us-east-1:111122223333:group/p5-reservations"
MINIMAL: dict[str, Any] = {"region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"]}


def test_a_rule_field_validator_refuses_with_the_rules_words_and_passes_none() -> None:
    check = config_base._follows(lambda value: "must be small" if value > 1 else None)
    assert check(None) is None
    assert check(1) == 1
    with pytest.raises(ValueError, match=r"^must be small$"):
        check(2)


def test_a_capacity_field_validator_checks_the_orchestrators_forms() -> None:
    check = config_capacity._capacity_for(CapacityOrchestrator.HYPERPOD)
    assert check(None) is None
    on_demand = CapacityConfig(type="on-demand")
    assert check(on_demand) is on_demand
    with pytest.raises(
        ValueError, match=r"^spot is not supported by SageMaker HyperPod; use on-demand or training-plan$"
    ):
        check(CapacityConfig(type="spot"))


def test_a_choice_field_parses_every_spelling_and_writes_the_value_back() -> None:
    field = TypeAdapter(Annotated[NodeRecovery, config_base._FileChoice(NodeRecovery)])
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
        ({"capacity": {"type": "spot"}}, Capacity.spot()),
        ({"capacity": {"type": "reservation", "reservation_id": CR}}, Capacity.reservation(CR)),
        ({"capacity": {"type": "capacity-block", "reservation_id": CR}}, Capacity.capacity_block(CR)),
    ],
)
def test_a_pcs_node_groups_capacity(fields: dict[str, Any], capacity: Capacity) -> None:
    group = PcsComputeNodeGroupConfig(name="gpu", instance_type="g5.8xlarge", **fields)
    assert group.node_capacity() == capacity


@pytest.mark.parametrize(
    ("fields", "capacity"),
    [
        ({}, Capacity.on_demand()),
        ({"capacity": {"type": "spot"}}, Capacity.spot()),
        ({"capacity": {"type": "reservation", "reservation_id": CR}}, Capacity.reservation(CR)),
        ({"capacity": {"type": "capacity-block", "reservation_id": CR}}, Capacity.capacity_block(CR)),
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
        "root_squash": False,
        "root_squash_exempt_nids": [],
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


def problems(document: Any, **where: Any) -> str:
    """The whole report of validating ``document``."""
    with pytest.raises(ConfigurationError) as raised:
        parse_environment(document, **where)
    return str(raised.value)


def test_a_document_that_is_not_a_mapping_is_named_by_its_source_or_as_the_environment() -> None:
    assert problems(None) == (
        "<environment>: is empty; an environment needs at least region and availability_zones"
    )
    assert problems(["region", "us-east-1"]) == "<environment>: must be a mapping of sections, got list"
    assert problems("us-east-1", source="env.yaml") == "env.yaml: must be a mapping of sections, got str"


def test_a_section_written_as_a_value_says_what_it_got_and_only_null_gets_the_empty_section_hint() -> None:
    assert problems({**MINIMAL, "network": 5}) == (
        "<environment>: 1 problem(s)\n  network: must be a section of key: value settings, got 5"
    )
    assert problems({**MINIMAL, "network": None}) == (
        "<environment>: 1 problem(s)\n  network: must be a section of key: value settings, got None; an "
        "empty section reads as null: fill it in or delete it"
    )


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        ({"network": {"nat_gateways": True}}, "network.nat_gateways: must be a number, got true"),
        ({"network": {"nat_gateways": False}}, "network.nat_gateways: must be a number, got false"),
        (
            {"network": {"nat_gateways": float("nan")}},
            "network.nat_gateways: must be a finite number, got nan",
        ),
        (
            {"network": {"placement_group": {"partitions": True}}},
            "network.placement_group.partitions: must be a number, got true",
        ),
        (
            {"storage": {"lustre": {"per_unit_storage_throughput_mbps": True}}},
            "storage.lustre.per_unit_storage_throughput_mbps: must be a number, got true",
        ),
    ],
    ids=["true", "false", "nan", "partitions", "throughput"],
)
def test_an_optional_number_refuses_true_false_and_nan(sections: dict[str, Any], message: str) -> None:
    """Optional numbers (``int | None``, with or without bounds) are numbers too: YAML's true is not 1."""
    assert problems({**MINIMAL, **sections}) == f"<environment>: 1 problem(s)\n  {message}"
    assert parse_environment({**MINIMAL, "network": {"nat_gateways": 1}}).network.nat_gateways == 1


def test_ten_problems_are_listed_and_more_are_counted() -> None:
    unknown = "unknown key (got value {i}); check the spelling against environments/schema.json"
    ten = {f"k{i}": i for i in range(10)}
    listed = [f"  k{i}: {unknown.format(i=i)}" for i in range(10)]
    assert problems({**MINIMAL, **ten}).splitlines() == ["<environment>: 10 problem(s)", *listed]
    assert problems({**MINIMAL, **ten, "k10": 10}).splitlines() == [
        "<environment>: 11 problem(s)",
        *listed,
        "  ... and 1 more",
    ]


def test_a_field_path_is_shown_whole_up_to_120_characters_then_cut_in_the_middle() -> None:
    unknown = ": unknown key (got value 1); check the spelling against environments/schema.json"
    key = "k" * 120
    assert problems({**MINIMAL, key: 1}) == f"<environment>: 1 problem(s)\n  {key}{unknown}"
    longer = "k" * 80 + "x" * 21 + "e" * 20
    assert problems({**MINIMAL, longer: 1}) == (
        f"<environment>: 1 problem(s)\n  {'k' * 60} ...(41 characters cut)... {'e' * 20}{unknown}"
    )


def test_a_file_name_before_a_line_is_shown_whole_up_to_200_characters_then_cut(tmp_path: Path) -> None:
    path = tmp_path / "env.yaml"
    path.write_text("region: us-east-1\navailability_zones: [us-east-1a]\nxyzzy: 1\n")
    document, key_lines = yaml_file.read_yaml_with_lines(path)
    unknown = "xyzzy: unknown key (got value 1); check the spelling against environments/schema.json"
    name = "environments/" + "a" * 182 + ".yaml"
    assert len(name) == 200
    assert problems(document, source=name, key_lines=key_lines).splitlines() == [
        f"{name}: 1 problem(s)",
        f"  {name}:3: {unknown}",
    ]
    longer = "environments/" + "a" * 183 + ".yaml"
    assert problems(document, source=longer, key_lines=key_lines).splitlines() == [
        f"{longer}: 1 problem(s)",
        f"  environments/{'a' * 107} ...(41 characters cut)... {'a' * 35}.yaml:3: {unknown}",
    ]


def test_a_key_missing_from_a_section_of_the_file_is_shown_at_the_sections_line(tmp_path: Path) -> None:
    path = tmp_path / "env.yaml"
    path.write_text(
        "region: us-east-1\navailability_zones: [us-east-1a]\nhyperpod:\n  instance_groups:\n"
        "    - {name: c, instance_type: ml.c5.xlarge}\n"
    )
    with pytest.raises(ConfigurationError) as raised:
        load_environment(path)
    assert (
        str(raised.value) == f"{path}: 1 problem(s)\n  {path}:3: hyperpod.cluster_name: required, but missing"
    )


def test_a_problem_in_what_compute_wrote_has_no_line_even_beside_the_orchestrators_own_section(
    tmp_path: Path,
) -> None:
    """The file's parallelcluster section adds a setting; the head node comes from compute's controller, so
    the line of ``parallelcluster:`` would point at the wrong place."""
    path = tmp_path / "env.yaml"
    path.write_text(
        "region: us-east-1\navailability_zones: [us-east-1a]\norchestrator: parallelcluster\ncompute:\n"
        "  controller: {instance_type: t3.medium}\n  node_groups:\n    - name: gpu\n"
        "      instance_type: c5n.9xlarge\n      max_count: 200\nparallelcluster:\n"
        "  custom_ami: ami-0123456789abcdef0\n"
    )
    with pytest.raises(ConfigurationError) as raised:
        load_environment(path)
    assert str(raised.value) == (
        f"{path}: 1 problem(s)\n  parallelcluster.head_node.instance_type: t3.medium has 4 GiB of memory, and "
        "ParallelCluster refuses a head node of less than 8.6 GiB for 200 compute nodes (max_count added up: 1 "
        "GiB per 25 nodes and 0.6 for the system, at most 16); choose a larger head node or lower max_count"
    )


def test_each_field_of_the_older_capacity_form_says_what_replaces_it() -> None:
    nodegroup = {
        "name": "efa",
        "instance_type": "p5.48xlarge",
        "size": 2,
        "capacity_type": "CAPACITY_BLOCK",
        "capacity_reservation_id": CR,
    }
    assert problems({**MINIMAL, "eks": {"efa_nodegroups": [nodegroup]}}) == (
        "<environment>: 2 problem(s)\n"
        "  eks.efa_nodegroups.0.capacity_type: was replaced by capacity; write capacity: {type: capacity-block, "
        "reservation_id: cr-...} instead\n"
        "  eks.efa_nodegroups.0.capacity_reservation_id: was replaced by capacity; write capacity: {type: "
        f"reservation, reservation_id: {CR}}} ({{type: capacity-block, ...}} for a Capacity Block) instead"
    )


def test_a_capacity_section_keeps_every_field_it_was_given() -> None:
    """A resource group of reservations, and a reservation made in the environment's placement group."""
    grouped = CapacityConfig(type="reservation", resource_group_arn=GROUP).to_capacity()
    assert grouped == Capacity.reservation(resource_group_arn=GROUP)
    placed = CapacityConfig(type="reservation", reservation_id=CR, in_placement_group=True).to_capacity()
    assert placed == Capacity.reservation(CR, in_placement_group=True)
    assert placed.keeps_placement_group() is True
    open_ = CapacityConfig(type="reservation", reservation_id=CR, targeted=False).to_capacity()
    assert open_ == Capacity.reservation(CR, targeted=False)


def test_a_parallelcluster_queue_and_compute_resource_capacity() -> None:
    """A compute resource's own capacity, else None (the queue's); a queue's capacity, else On-Demand."""
    block = {"type": "capacity-block", "reservation_id": CR}
    resource = {"name": "gpu", "instance_type": "g5.8xlarge"}
    assert PclusterComputeResourceConfig(**resource).resource_capacity() is None
    assert PclusterComputeResourceConfig(**resource, capacity=block).resource_capacity() == (
        Capacity.capacity_block(CR)
    )
    assert (
        PclusterQueueConfig(name="q", compute_resources=[resource]).queue_capacity() == Capacity.on_demand()
    )
    stated = PclusterQueueConfig(name="q", compute_resources=[resource], capacity={"type": "spot"})
    assert stated.queue_capacity() == Capacity.spot()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("capacity_type", "ON_DEMAND", "was replaced by capacity; write capacity: {type: on-demand} instead"),
        (
            "purchase_option",
            "ONDEMAND",
            "was replaced by capacity; write capacity: {type: on-demand} instead",
        ),
        ("purchase_option", "spot", "was replaced by capacity; write capacity: {type: spot} instead"),
        (
            "capacity_type",
            "capacity_block",
            "was replaced by capacity; write capacity: {type: capacity-block, reservation_id: cr-...} instead",
        ),
        (
            "capacity_type",
            "reserved",
            "was replaced by capacity; write capacity: {type: on-demand | spot | reservation | capacity-block, "
            "...} instead",
        ),
        (
            "capacity_reservation_id",
            CR,
            f"was replaced by capacity; write capacity: {{type: reservation, reservation_id: {CR}}} ({{type: "
            "capacity-block, ...} for a Capacity Block) instead",
        ),
        (
            "capacity_reservation_id",
            "cr-1\nrm -rf /",
            "was replaced by capacity; write capacity: {type: reservation, reservation_id: cr-...} ({type: "
            "capacity-block, ...} for a Capacity Block) instead",
        ),
        ("capacity", "spot", None),
        ("instance_type", "spot", None),
    ],
)
def test_what_replaces_each_key_of_the_older_capacity_form(
    key: str, value: object, message: str | None
) -> None:
    """The replacement is said where the section takes ``capacity``; elsewhere the key is just unknown."""
    assert retired_capacity_key_problem(key, value) == message
    if message is not None:
        assert unknown_key_problem(key, value, ["name", "capacity"]) == message
    assert unknown_key_problem(key, value, ["name"]).startswith(f"unknown key (got value {excerpt(value)})")
