"""``hyperpod_eks.task_governance`` in the environment file: what it turns off, what it accepts beside it, and the
refusals that need more than one field (each single-field rule is in ``tests/bad_inputs/`` with its line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from training_clusters.config import parse_environment
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import PodSecurityLevel, ResourceSharingStrategy, TeamPreemption

ROOT = Path(__file__).resolve().parents[1]
GOVERNED = ROOT / "environments" / "hyperpod-eks-governance.yaml"


def document() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(GOVERNED.read_text())
    return loaded


def refused(doc: dict[str, Any]) -> str:
    with pytest.raises(ConfigurationError) as raised:
        parse_environment(doc)
    return str(raised.value)


def test_the_shipped_file_reads_as_written() -> None:
    spec = parse_environment(document()).hyperpod_eks
    assert spec is not None and spec.task_governance is not None
    governance = spec.task_governance
    assert not spec.kueue  # our Kueue is off, though addons.kueue keeps its default
    assert spec.addons.kueue
    assert (governance.fair_share, governance.idle_resource_sharing) == (True, True)
    assert [(c.name, c.weight) for c in governance.priority_classes] == [
        ("inference", 100),
        ("training", 50),
        ("experiment", 10),
    ]
    research, inference = governance.teams
    assert (research.sharing, research.borrow_limit_percent, research.preempt_team_tasks) == (
        ResourceSharingStrategy.LEND_AND_BORROW,
        100,
        TeamPreemption.LOWER_PRIORITY,
    )
    assert (inference.sharing, inference.preempt_team_tasks, inference.pod_security) == (
        ResourceSharingStrategy.LEND,
        TeamPreemption.NEVER,
        PodSecurityLevel.RESTRICTED,
    )
    (partition,) = inference.quota
    assert partition.accelerator_partition is not None
    assert (partition.accelerator_partition.type, partition.accelerator_partition.count) == ("mig-3g.20gb", 4)
    assert governance.addon_version == "v1.6.0-eksbuild.1"


def test_defaults_are_the_services() -> None:
    doc = document()
    doc["hyperpod_eks"]["task_governance"] = {"teams": [{"name": "a"}]}
    governance = parse_environment(doc).hyperpod_eks.task_governance  # type: ignore[union-attr]
    assert governance is not None
    (team,) = governance.teams
    assert (team.sharing, team.preempt_team_tasks, team.borrow_limit_percent, team.fair_share_weight) == (
        ResourceSharingStrategy.LEND_AND_BORROW,
        TeamPreemption.LOWER_PRIORITY,
        None,
        None,
    )
    assert (team.quota, team.pod_security, team.role_arn) == ([], PodSecurityLevel.BASELINE, None)
    assert governance.priority_classes == []


def test_our_kueue_turned_off_explicitly_is_accepted_beside_it() -> None:
    doc = document()
    doc["hyperpod_eks"]["addons"] = {"kueue": False}
    spec = parse_environment(doc).hyperpod_eks
    assert spec is not None and not spec.kueue
    doc["hyperpod_eks"]["addons"] = {"kueue": True}
    assert "hyperpod_eks.addons.kueue: cannot be set with task_governance" in refused(doc)


def test_without_it_our_kueue_is_installed() -> None:
    doc = document()
    del doc["hyperpod_eks"]["task_governance"]
    spec = parse_environment(doc).hyperpod_eks
    assert spec is not None and spec.kueue


def test_accelerators_of_a_cpu_group_are_refused() -> None:
    doc = document()
    doc["hyperpod_eks"]["instance_groups"].append(
        {"name": "cpu", "instance_type": "ml.c5.xlarge", "count": 1, "volume_gib": 100}
    )
    doc["hyperpod_eks"]["task_governance"]["teams"][0]["quota"].append(
        {"instance_type": "ml.c5.xlarge", "accelerators": 1}
    )
    assert (
        "hyperpod_eks.task_governance.teams.0.quota.1.accelerators: must be left out: ml.c5.xlarge has no "
        "accelerators, got 1"
    ) in refused(doc)


def test_a_team_role_is_an_iam_role() -> None:
    doc = document()
    doc["hyperpod_eks"]["task_governance"]["teams"][0]["role_arn"] = "arn:aws:iam::111122223333:user/alice"
    assert (
        "hyperpod_eks.task_governance.teams.0.role_arn: must be an IAM role ARN such as "
        "arn:aws:iam::111122223333:role/VisionTeam (the role whose sessions act as the team), "
        "got 'arn:aws:iam::111122223333:user/alice'"
    ) in refused(doc)
    doc["hyperpod_eks"]["task_governance"]["teams"][0]["role_arn"] = "arn:aws:iam::111122223333:role/Research"
    parse_environment(doc)


def test_limits_of_counts() -> None:
    doc = document()
    governance = doc["hyperpod_eks"]["task_governance"]
    governance["priority_classes"] = [{"name": f"c{i}", "weight": i} for i in range(11)]
    assert (
        "hyperpod_eks.task_governance.priority_classes: must hold at most 10 priority classes (the cluster "
        "policy's limit), got 11"
    ) in refused(doc)
    governance["priority_classes"] = governance["priority_classes"][:10]
    governance["teams"][0]["quota"] = [{"instance_type": "ml.p4d.24xlarge", "count": 1}] * 16
    assert (
        "hyperpod_eks.task_governance.teams.0.quota: must hold at most 15 resources (a compute quota's limit), "
        "got 16"
    ) in refused(doc)
    governance["teams"][0]["quota"] = governance["teams"][0]["quota"][:15]
    parse_environment(doc)
    governance["teams"] = []
    assert "hyperpod_eks.task_governance.teams" in refused(doc)


def test_the_addon_version_is_shaped_like_one() -> None:
    doc = document()
    doc["hyperpod_eks"]["task_governance"]["addon_version"] = "latest"
    assert (
        "hyperpod_eks.task_governance.addon_version: must look like v1.6.0-eksbuild.1 (aws eks "
        "describe-addon-versions), got 'latest'"
    ) in refused(doc)
