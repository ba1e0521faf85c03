"""The hyperpod section's team fields: accounting, Docker, pam_slurm_adopt, continuous provisioning, custom AMIs
and root volumes; defaults and every message."""

from __future__ import annotations

from typing import Any

import pytest

from training_clusters.config import parse_environment
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import HyperPodAccounting, NodeProvisioningMode

BASE: dict[str, Any] = {"region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"]}
GROUPS = [
    {"name": "controller-machine", "instance_type": "ml.c5.xlarge", "role": "controller"},
    {"name": "workers", "instance_type": "ml.c5.xlarge", "role": "worker", "partition": "dev"},
]


def hyperpod(**fields: Any) -> dict[str, Any]:
    return {**BASE, "hyperpod": {"cluster_name": "team", "instance_groups": GROUPS, **fields}}


def test_team_fields_default_to_todays_behaviour() -> None:
    spec = parse_environment(hyperpod()).hyperpod
    assert spec is not None
    assert spec.accounting is HyperPodAccounting.NONE
    assert (spec.enable_docker, spec.enable_pam_slurm_adopt, spec.node_provisioning_mode) == (
        False,
        False,
        None,
    )
    assert (spec.instance_groups[0].image_id, spec.instance_groups[0].root_volume_gib) == (None, None)


def test_team_fields_are_read() -> None:
    groups = [{**GROUPS[0], "image_id": "ami-0123456789abcdef0", "root_volume_gib": 200}, GROUPS[1]]
    document = hyperpod(
        accounting="Local",
        node_provisioning_mode="continuous",
        enable_docker=True,
        enable_pam_slurm_adopt=True,
        instance_groups=groups,
    )
    spec = parse_environment(document).hyperpod
    assert spec is not None
    assert spec.accounting is HyperPodAccounting.LOCAL
    assert spec.node_provisioning_mode is NodeProvisioningMode.CONTINUOUS
    assert spec.enable_docker and spec.enable_pam_slurm_adopt
    assert spec.instance_groups[0].image_id == "ami-0123456789abcdef0"
    assert spec.instance_groups[0].root_volume_gib == 200


@pytest.mark.parametrize(
    ("document", "line"),
    [
        (
            hyperpod(accounting="rds"),
            "  hyperpod.accounting: must be one of none, external, local, got 'rds'",
        ),
        (
            hyperpod(node_provisioning_mode="eager"),
            "  hyperpod.node_provisioning_mode: must be one of Continuous, got 'eager'",
        ),
        (
            hyperpod(instance_groups=[{**GROUPS[0], "image_id": "ubuntu"}, GROUPS[1]]),
            "  hyperpod.instance_groups.0.image_id: must be an AMI id such as 'ami-0123456789abcdef0', got 'ubuntu'",
        ),
    ],
)
def test_bad_team_fields_name_the_field(document: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(document, source="env.yaml")
    assert line in str(error.value).splitlines(), str(error.value)
