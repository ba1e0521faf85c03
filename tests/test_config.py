"""The environment file model: defaults, and one exact message per rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from training_clusters.config import load_environment, parse_environment
from training_clusters.errors import ConfigurationError

BASE: dict[str, Any] = {"region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"]}


def with_(**sections: Any) -> dict[str, Any]:
    return {**BASE, **sections}


def test_minimal_file_gets_the_documented_defaults() -> None:
    config = parse_environment(BASE)
    assert config.network.cidr == "10.0.0.0/16"
    assert config.network.nat_gateways is None
    assert config.storage.lustre is not None
    assert config.storage.lustre.storage_capacity_gib == 1200
    assert config.storage.lustre.mount_dir == "/fsx"
    assert config.placement_availability_zone == "us-east-1a"


@pytest.mark.parametrize(
    ("document", "line"),
    [
        (
            with_(netwrok={}),
            "  netwrok: unknown key (got value {}); check the spelling against environments/schema.json",
        ),
        ({"availability_zones": ["us-east-1a"]}, "  region: required, but missing"),
        (with_(region="useast1"), "  region: must be an AWS region such as us-east-1, got 'useast1'"),
        (
            with_(account="1234"),
            "  account: must be a 12-digit AWS account id (quote it in YAML), got '1234'",
        ),
        (
            with_(availability_zones=["us-west-2a"]),
            "  (document): availability_zones: 'us-west-2a' is not an AZ of region us-east-1 (expected e.g. us-east-1a)",
        ),
        (
            with_(storage={"lustre": {"storage_capacity_gib": 1000}}),
            "  storage.lustre: storage_capacity_gib must be 1200 or a multiple of 2400 for SCRATCH_2, got 1000",
        ),
        (
            with_(storage={"lustre": {"deployment_type": "PERSISTENT_2"}}),
            "  storage.lustre: per_unit_storage_throughput_mbps is required for PERSISTENT_2; allowed: 125, 250, 500, 1000",
        ),
        (
            with_(storage={"lustre": {"deployment_type": "SCRATCH_1"}}),
            "  storage.lustre.deployment_type: must be one of SCRATCH_2, PERSISTENT_2, got 'SCRATCH_1'",
        ),
        (
            with_(storage={"lustre": {"mount_dir": "fsx"}}),
            "  storage.lustre.mount_dir: must be an absolute directory such as /fsx, got 'fsx'",
        ),
        (
            with_(network={"nat_gateways": 0}),
            "  network: nat_gateways is 0, which leaves private subnets without a way out; enable endpoint_only to "
            "reach AWS through VPC endpoints instead, or use 1 or more NAT gateways",
        ),
        (
            with_(network={"placement_availability_zone": "us-east-1c"}),
            "  (document): network.placement_availability_zone: 'us-east-1c' must be one of availability_zones "
            "(us-east-1a, us-east-1b)",
        ),
        (
            with_(network={"flow_logs_retention_days": 10}),
            "  network.flow_logs_retention_days: must be one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, "
            "400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653, got 10",
        ),
        (
            with_(network={"placement_group": {"strategy": "clustered"}}),
            "  network.placement_group.strategy: must be one of cluster, partition, spread, got 'clustered'",
        ),
        (
            with_(network={"nat_gateways": "two"}),
            "  network.nat_gateways: Input should be a valid integer, unable to parse string as an integer, got 'two'",
        ),
        (
            with_(
                hyperpod={
                    "cluster_name": "x",
                    "instance_groups": [{"name": "c", "instance_type": "ml.c5.xlarge", "threads": 2}],
                }
            ),
            "  hyperpod.instance_groups.0.threads: unknown key (got value 2); check the spelling against "
            "environments/schema.json",
        ),
        (
            with_(
                hyperpod={
                    "cluster_name": "x",
                    "instance_groups": [{"name": "c", "instance_type": "ml.c5.xlarge", "role": "head"}],
                }
            ),
            "  hyperpod.instance_groups.0.role: must be one of controller, login, worker, got 'head'",
        ),
    ],
)
def test_bad_documents_name_the_field_the_value_and_what_is_allowed(
    document: dict[str, Any], line: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(document, source="env.yaml")
    lines = str(error.value).splitlines()
    assert lines[0].startswith("env.yaml: ")
    assert line in lines


def test_two_orchestrator_sections_are_a_clear_error() -> None:
    hyperpod = {"cluster_name": "x", "instance_groups": [{"name": "c", "instance_type": "ml.c5.xlarge"}]}
    eks: dict[str, Any] = {}
    with pytest.raises(ConfigurationError) as error:
        parse_environment(with_(hyperpod=hyperpod, eks=eks), source="env.yaml")
    assert (
        "  (document): an environment has one orchestrator, got sections hyperpod, eks; keep one of "
        "hyperpod, parallelcluster, eks (or none, for network and storage only)"
        in str(error.value).splitlines()
    )


def test_loading_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(with_(storage={"lustre": {"storag_capacity_gib": 1200}})))
    with pytest.raises(ConfigurationError) as error:
        load_environment(path)
    assert str(error.value).startswith(f"{path}: 1 problem(s)")
    assert "storage.lustre.storag_capacity_gib: unknown key" in str(error.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("region: [unclosed", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping of sections, got list"),
    ],
)
def test_unreadable_files_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=message):
        load_environment(path)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no such environment file"):
        load_environment(tmp_path / "nope.yaml")
