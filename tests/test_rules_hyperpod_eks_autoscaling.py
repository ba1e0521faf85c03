"""The Karpenter-autoscaling and EFA-interface rules of ``rules/hyperpod_eks.py`` at both sides of every boundary,
with their whole messages (apart from ``test_rules_boundaries.py`` so the HyperPod EKS rules of other features
merge without conflict)."""

from __future__ import annotations

import pytest

from training_clusters.rules import hyperpod_eks


def test_continuous_provisioning_is_the_only_mode() -> None:
    assert hyperpod_eks.autoscaling_provisioning_problem("Continuous") is None
    assert hyperpod_eks.autoscaling_provisioning_problem(None) == (
        "must be Continuous with autoscaling: karpenter (HyperPod's Karpenter autoscaling is built on continuous "
        "provisioning), got none (all-or-nothing provisioning)"
    )
    assert hyperpod_eks.autoscaling_provisioning_problem("continuous") == (
        "must be Continuous with autoscaling: karpenter (HyperPod's Karpenter autoscaling is built on continuous "
        "provisioning), got 'continuous'"
    )


def test_node_recovery_must_be_automatic() -> None:
    assert hyperpod_eks.autoscaling_recovery_problem("Automatic") is None
    assert hyperpod_eks.autoscaling_recovery_problem("None") == (
        "must be Automatic with autoscaling: karpenter (HyperPod's Karpenter autoscaling replaces faulty nodes "
        "itself), got 'None'"
    )


@pytest.mark.parametrize(("count", "refused"), [(0, False), (1, True)])
def test_an_autoscaled_group_starts_at_zero(count: int, refused: bool) -> None:
    problem = hyperpod_eks.autoscaled_count_problem(count)
    assert problem == (
        (
            "must be 0 with autoscaling: karpenter (Karpenter adds the nodes as pods wait for them, and would "
            f"scale the group down to 0 anyway); bound the group with max_count instead, got {count}"
        )
        if refused
        else None
    )


@pytest.mark.parametrize(
    ("max_count", "problem"),
    [
        (
            None,
            "is required with autoscaling: karpenter: the most nodes Karpenter may start in the group (its NodePool's "
            "limit and the queues' quota); give e.g. 2",
        ),
        (0, "must be between 1 and 6758, got 0"),
        (1, None),
        (6758, None),
        (6759, "must be between 1 and 6758, got 6759"),
    ],
)
def test_max_count_bounds(max_count: int | None, problem: str | None) -> None:
    assert hyperpod_eks.autoscaled_max_count_problem(max_count, 6758) == problem


def test_max_count_belongs_to_autoscaling() -> None:
    assert hyperpod_eks.max_count_without_autoscaling_problem(None) is None
    assert hyperpod_eks.max_count_without_autoscaling_problem(1) == (
        "applies with autoscaling: karpenter only (a fixed group has count nodes), got 1"
    )


def test_on_demand_only() -> None:
    assert hyperpod_eks.autoscaled_capacity_problem(False) is None
    assert hyperpod_eks.autoscaled_capacity_problem(True) == (
        "must be on-demand with autoscaling: karpenter (HyperPod's Karpenter scales On-Demand instance groups "
        "only, not groups on a training plan or reserved capacity), got training-plan"
    )


def test_no_deep_health_checks() -> None:
    assert hyperpod_eks.autoscaled_health_checks_problem([]) is None
    assert hyperpod_eks.autoscaled_health_checks_problem(["InstanceStress", "InstanceConnectivity"]) == (
        "must be empty with autoscaling: karpenter (a deep health check takes 60-90 minutes, while the pods that "
        "asked for the node wait and Karpenter starts more; HyperPod refuses them on autoscaled groups), got "
        "InstanceStress, InstanceConnectivity"
    )


@pytest.mark.parametrize(("groups", "refused"), [(10, False), (11, True)])
def test_a_node_class_names_ten_groups_at_most(groups: int, refused: bool) -> None:
    assert hyperpod_eks.MAX_NODE_CLASS_GROUPS == 10
    problem = hyperpod_eks.autoscaled_groups_problem(groups)
    assert problem == (
        (
            "must hold at most 10 groups with autoscaling: karpenter (a HyperpodNodeClass names up to 10 instance "
            f"groups), got {groups}"
        )
        if refused
        else None
    )


def test_node_resource_names_differ_in_more_than_case() -> None:
    assert hyperpod_eks.node_resource_names_problem(["gpu", "gpu-2", "cpu"]) is None
    assert hyperpod_eks.node_resource_names_problem(["a", "gpu", "Gpu"]) == (
        "with autoscaling: karpenter must have names that differ in more than case (each group's NodeClass and "
        "NodePool take its name in lower case), got gpu and Gpu"
    )


@pytest.mark.parametrize(
    ("interfaces", "cni", "problem"),
    [
        (
            0,
            "v1.20.1-eksbuild.3",
            "efa-only applies to secondary EFA interfaces, and ml.x has no EFA interfaces (its primary interface is "
            "never EFA-only); use efa or leave it out",
        ),
        (
            1,
            "v1.20.1-eksbuild.3",
            "efa-only applies to secondary EFA interfaces, and ml.x has 1 EFA interface (its primary interface is "
            "never EFA-only); use efa or leave it out",
        ),
        (2, "v1.20.1-eksbuild.3", None),
        (2, "v1.18.5-eksbuild.1", None),
        (
            4,
            "v1.18.4-eksbuild.9",
            "efa-only needs the VPC CNI v1.18.5 or newer, got addons.vpc_cni_version v1.18.4-eksbuild.9",
        ),
    ],
)
def test_efa_only_needs_secondary_interfaces_and_a_recent_vpc_cni(
    interfaces: int, cni: str, problem: str | None
) -> None:
    assert hyperpod_eks.MIN_VPC_CNI_FOR_EFA_ONLY == (1, 18, 5)
    assert hyperpod_eks.efa_only_problem("ml.x", interfaces, cni) == problem
