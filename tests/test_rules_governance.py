"""HyperPod task governance's rules (``training_clusters/rules/hyperpod_governance.py``) at both sides of every
boundary with their whole messages, and the CloudFormation properties ``training_clusters.workloads.task_governance``
writes, free of CDK. The limits are the API's (botocore's ``sagemaker`` model, asserted below where it states
them) and Kubernetes' for the names HyperPod derives from a team or a class."""

from __future__ import annotations

import botocore.session
import pytest

from training_clusters.catalog import lookup_hyperpod
from training_clusters.model.options import ResourceSharingStrategy, TeamPreemption
from training_clusters.rules import hyperpod_governance as rules
from training_clusters.workloads.task_governance import (
    PriorityClass,
    QuotaResource,
    Team,
    compute_quota_config,
    compute_quota_target,
    priority_class_label,
    scheduler_config,
    team_local_queue,
    team_namespace,
)

TEAM_WHY = "HyperPod names the team's namespace hyperpod-ns-<team>, a Kubernetes name of at most 63"
CLASS_WHY = "jobs name it in the label value <class>-priority, at most 63 characters"


def test_the_limits_are_the_apis() -> None:
    model = botocore.session.get_session().get_service_model("sagemaker")

    def member(shape: str, name: str) -> dict[str, object]:
        return dict(model.shape_for(shape).members[name].metadata)

    assert member("SchedulerConfig", "PriorityClasses") == {"min": 0, "max": rules.MAX_PRIORITY_CLASSES}
    assert member("PriorityClass", "Weight") == {"min": 0, "max": rules.MAX_WEIGHT}
    assert member("ComputeQuotaTarget", "FairShareWeight") == {"min": 0, "max": rules.MAX_WEIGHT}
    assert member("ComputeQuotaConfig", "ComputeQuotaResources") == {
        "min": 0,
        "max": rules.MAX_QUOTA_RESOURCES,
    }
    for name in ("Count", "Accelerators", "VCpu", "MemoryInGiB"):
        assert member("ComputeQuotaResourceConfig", name) == {"min": 0, "max": rules.MAX_AMOUNT}
    assert member("AcceleratorPartitionConfig", "Count") == {"min": 0, "max": rules.MAX_AMOUNT}
    pattern = "[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?"
    assert member("ComputeQuotaTarget", "TeamName") == {"pattern": pattern}
    assert member("PriorityClass", "Name") == {"pattern": pattern}
    # the partition types the API knows include every profile the catalogue gives a HyperPod GPU
    known = set(model.shape_for("AcceleratorPartitionConfig").members["Type"].enum)
    for name in (
        "ml.p4d.24xlarge",
        "ml.p4de.24xlarge",
        "ml.p5.48xlarge",
        "ml.p5en.48xlarge",
        "ml.p6-b200.48xlarge",
    ):
        accelerators = lookup_hyperpod(name).accelerators
        assert accelerators is not None
        assert {f"mig-{p}" for p in accelerators.mig_profiles} <= known, name


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a", None),
        ("vision-2", None),
        ("a" * 51, None),
        (
            "a" * 52,
            f"must be 1 to 51 lower-case letters, digits and '-', starting and ending with a letter or digit ({TEAM_WHY}), got '{'a' * 52}'",
        ),
        (
            "",
            f"must be 1 to 51 lower-case letters, digits and '-', starting and ending with a letter or digit ({TEAM_WHY}), got ''",
        ),
        (
            "Vision",
            f"must be 1 to 51 lower-case letters, digits and '-', starting and ending with a letter or digit ({TEAM_WHY}), got 'Vision'",
        ),
        (
            "-vision",
            f"must be 1 to 51 lower-case letters, digits and '-', starting and ending with a letter or digit ({TEAM_WHY}), got '-vision'",
        ),
        (
            "vision-",
            f"must be 1 to 51 lower-case letters, digits and '-', starting and ending with a letter or digit ({TEAM_WHY}), got 'vision-'",
        ),
        (
            "vi_sion",
            f"must be 1 to 51 lower-case letters, digits and '-', starting and ending with a letter or digit ({TEAM_WHY}), got 'vi_sion'",
        ),
    ],
)
def test_team_names(name: str, problem: str | None) -> None:
    assert rules.team_name_problem(name) == problem
    if problem is None:
        assert len(team_namespace(name)) <= 63


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a", None),
        ("a" * 54, None),
        (
            "a" * 55,
            f"must be 1 to 54 lower-case letters, digits and '-', starting and ending with a letter or digit ({CLASS_WHY}), got '{'a' * 55}'",
        ),
        (
            "High",
            f"must be 1 to 54 lower-case letters, digits and '-', starting and ending with a letter or digit ({CLASS_WHY}), got 'High'",
        ),
    ],
)
def test_priority_class_names(name: str, problem: str | None) -> None:
    assert rules.priority_class_name_problem(name) == problem
    if problem is None:
        assert len(priority_class_label(name)) <= 63


@pytest.mark.parametrize(
    ("weight", "problem"),
    [
        (None, None),
        (0, None),
        (100, None),
        (-1, "must be between 0 and 100, got -1"),
        (101, "must be between 0 and 100, got 101"),
    ],
)
def test_weights(weight: int | None, problem: str | None) -> None:
    assert rules.weight_problem(weight) == problem


def test_counts_of_classes_and_resources() -> None:
    assert rules.priority_classes_count_problem(10) is None
    assert rules.priority_classes_count_problem(11) == (
        "must hold at most 10 priority classes (the cluster policy's limit), got 11"
    )
    assert rules.quota_resources_count_problem(15) is None
    assert rules.quota_resources_count_problem(16) == (
        "must hold at most 15 resources (a compute quota's limit), got 16"
    )


def test_unique_names() -> None:
    assert rules.unique_problem(["a", "b"]) is None
    assert (
        rules.unique_problem(["b", "a", "b", "a", "c"])
        == "must each have a name of their own, got a, b more than once"
    )


@pytest.mark.parametrize(
    ("percent", "problem"),
    [
        (None, None),
        (1, None),
        (500, None),
        (0, "must be between 1 and 500 (percent of the team's quota it may borrow in idle compute), got 0"),
        (
            501,
            "must be between 1 and 500 (percent of the team's quota it may borrow in idle compute), got 501",
        ),
    ],
)
def test_borrow_limits(percent: int | None, problem: str | None) -> None:
    assert rules.borrow_limit_problem(percent) == problem


@pytest.mark.parametrize(
    ("strategy", "percent", "problem"),
    [
        (ResourceSharingStrategy.LEND_AND_BORROW, 50, None),
        (ResourceSharingStrategy.LEND, None, None),
        (ResourceSharingStrategy.DONT_LEND, None, None),
        (
            ResourceSharingStrategy.LEND,
            50,
            "limits borrowing, which only sharing: LendAndBorrow does; got sharing: Lend",
        ),
        (
            ResourceSharingStrategy.DONT_LEND,
            1,
            "limits borrowing, which only sharing: LendAndBorrow does; got sharing: DontLend",
        ),
    ],
)
def test_borrow_limit_needs_borrowing(
    strategy: ResourceSharingStrategy, percent: int | None, problem: str | None
) -> None:
    assert rules.borrow_limit_needs_borrowing_problem(strategy, percent) == problem


@pytest.mark.parametrize(
    ("amount", "problem"),
    [
        (None, None),
        (0, None),
        (10_000_000, None),
        (0.5, None),
        (-1, "must be between 0 and 10,000,000, got -1"),
        (10_000_001, "must be between 0 and 10,000,000, got 10000001"),
    ],
)
def test_amounts(amount: float | None, problem: str | None) -> None:
    assert rules.amount_problem(amount) == problem


def test_partition_counts() -> None:
    assert rules.partition_count_problem(1) is None
    assert rules.partition_count_problem(10_000_000) is None
    assert rules.partition_count_problem(0) == "must be between 1 and 10,000,000 partitions, got 0"
    assert rules.partition_count_problem(10_000_001) == (
        "must be between 1 and 10,000,000 partitions, got 10000001"
    )


def test_quota_instance_types_are_the_clusters() -> None:
    assert rules.quota_instance_type_problem("ml.g5.8xlarge", ["ml.p5.48xlarge", "ml.g5.8xlarge"]) is None
    assert rules.quota_instance_type_problem(
        "ml.p4d.24xlarge", ["ml.p5.48xlarge", "ml.g5.8xlarge", "ml.g5.8xlarge"]
    ) == (
        "must be the instance type of one of the cluster's instance groups (ml.g5.8xlarge, ml.p5.48xlarge), "
        "got 'ml.p4d.24xlarge'"
    )


@pytest.mark.parametrize("given", ["count", "accelerators", "vcpu", "memory_gib", "partition_type"])
def test_a_quota_resource_allots_something(given: str) -> None:
    amounts: dict[str, object] = {
        "count": None,
        "accelerators": None,
        "vcpu": None,
        "memory_gib": None,
        "partition_type": None,
    }
    assert rules.quota_amount_given_problem(**amounts) == (  # type: ignore[arg-type]
        "must give count, accelerators, vcpu, memory_gib or accelerator_partition (what the team is allotted)"
    )
    amounts[given] = "mig-1g.5gb" if given == "partition_type" else 0
    assert rules.quota_amount_given_problem(**amounts) is None  # type: ignore[arg-type]


def test_accelerators_only_on_accelerated_types() -> None:
    assert rules.accelerators_problem(lookup_hyperpod("ml.g5.8xlarge"), 1) is None
    assert rules.accelerators_problem(lookup_hyperpod("ml.trn1.32xlarge"), 16) is None
    assert rules.accelerators_problem(lookup_hyperpod("ml.c5.xlarge"), None) is None
    assert rules.accelerators_problem(lookup_hyperpod("ml.c5.xlarge"), 0) == (
        "must be left out: ml.c5.xlarge has no accelerators, got 0"
    )


@pytest.mark.parametrize(
    ("instance_type", "partition", "problem"),
    [
        ("ml.p4d.24xlarge", "mig-1g.5gb", None),
        ("ml.p4d.24xlarge", "mig-7g.40gb", None),
        ("ml.p5.48xlarge", "mig-1g.10gb", None),
        ("ml.p5en.48xlarge", "mig-7g.141gb", None),
        (
            "ml.p5.48xlarge",
            "mig-1g.5gb",
            "must be a MIG profile of ml.p5.48xlarge's GPUs (mig-1g.10gb, mig-1g.20gb, mig-2g.20gb, mig-3g.40gb, "
            "mig-4g.40gb, mig-7g.80gb), got 'mig-1g.5gb'",
        ),
        (
            "ml.p4d.24xlarge",
            "1g.5gb",
            "must be a MIG profile of ml.p4d.24xlarge's GPUs (mig-1g.5gb, mig-1g.10gb, mig-2g.10gb, mig-3g.20gb, "
            "mig-4g.20gb, mig-7g.40gb), got '1g.5gb'",
        ),
        (
            "ml.g5.8xlarge",
            "mig-1g.5gb",
            "must be left out: the GPUs of ml.g5.8xlarge have no MIG profiles, got 'mig-1g.5gb'",
        ),
        (
            "ml.c5.xlarge",
            "mig-1g.5gb",
            "must be left out: the GPUs of ml.c5.xlarge have no MIG profiles, got 'mig-1g.5gb'",
        ),
    ],
)
def test_mig_partitions_of_the_types_gpus(instance_type: str, partition: str, problem: str | None) -> None:
    assert rules.accelerator_partition_problem(lookup_hyperpod(instance_type), partition) == problem


def test_our_kueue_is_refused_beside_task_governance() -> None:
    why = (
        "cannot be set with task_governance: its add-on runs HyperPod's own Kueue and requires that no other "
        "Kueue is installed; each team's jobs use the LocalQueue hyperpod-ns-<team>-localqueue"
    )
    assert rules.own_kueue_problem(kueue_set=False, queues_set=False) is None
    assert rules.own_kueue_problem(kueue_set=True, queues_set=True) == ("addons.kueue", why)
    assert rules.own_kueue_problem(kueue_set=False, queues_set=True) == ("queues", why)


def test_addon_versions_and_entity_names() -> None:
    assert rules.addon_version_problem("v1.6.0-eksbuild.1") is None
    assert rules.addon_version_problem("1.6.0") == (
        "must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), got '1.6.0'"
    )
    assert rules.entity_name("cluster", "policy") == "cluster-policy"
    assert rules.entity_name("c" * 62, "team") == "c" * 62  # cut to 63, never ending in '-'
    assert rules.entity_name("c" * 60, "team") == "c" * 60 + "-te"


# --------------------------------------------------------------------------------------------------
# the properties written


def test_scheduler_config_states_every_setting() -> None:
    assert scheduler_config(
        [PriorityClass("inference", 100), PriorityClass("training", 0)],
        fair_share=True,
        idle_resource_sharing=False,
    ) == {
        "PriorityClasses": [{"Name": "inference", "Weight": 100}, {"Name": "training", "Weight": 0}],
        "FairShare": "Enabled",
        "IdleResourceSharing": "Disabled",
    }
    assert scheduler_config([], fair_share=False, idle_resource_sharing=True) == {
        "PriorityClasses": [],
        "FairShare": "Disabled",
        "IdleResourceSharing": "Enabled",
    }


def test_compute_quota_of_a_team() -> None:
    team = Team(
        "vision",
        resources=[
            QuotaResource("ml.p5.48xlarge", count=1),
            QuotaResource("ml.g5.8xlarge", accelerators=2, vcpu=16.5, memory_gib=64),
            QuotaResource("ml.p4d.24xlarge", partition_type="mig-1g.5gb", partition_count=7),
        ],
        fair_share_weight=0,
        borrow_limit_percent=200,
    )
    assert compute_quota_target(team) == {"TeamName": "vision", "FairShareWeight": 0}
    assert compute_quota_config(team) == {
        "ComputeQuotaResources": [
            {"InstanceType": "ml.p5.48xlarge", "Count": 1},
            {"InstanceType": "ml.g5.8xlarge", "Accelerators": 2, "VCpu": 16.5, "MemoryInGiB": 64},
            {"InstanceType": "ml.p4d.24xlarge", "AcceleratorPartition": {"Type": "mig-1g.5gb", "Count": 7}},
        ],
        "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 200},
        "PreemptTeamTasks": "LowerPriority",
    }
    lender = Team("ops", sharing=ResourceSharingStrategy.DONT_LEND, preempt_team_tasks=TeamPreemption.NEVER)
    assert compute_quota_target(lender) == {"TeamName": "ops"}
    assert compute_quota_config(lender) == {
        "ComputeQuotaResources": [],
        "ResourceSharingConfig": {"Strategy": "DontLend"},
        "PreemptTeamTasks": "Never",
    }


def test_what_hyperpod_names_after_a_team() -> None:
    team = Team("vision")
    assert (team.namespace, team.local_queue) == ("hyperpod-ns-vision", "hyperpod-ns-vision-localqueue")
    assert team_local_queue("a") == "hyperpod-ns-a-localqueue"
    assert priority_class_label("inference") == "inference-priority"
