"""environments/hyperpod-eks-autoscaling.yaml beyond the gates every environment passes: what preflight asks the
quotas for, what the stack hands the construct, and what the acceptance jobs are sized for (``max_count``)."""

from __future__ import annotations

import yaml

from training_clusters.acceptance.eks import hyperpod_eks_plan
from training_clusters.config import load_environment
from training_clusters.model.options import AutoScaler, EfaInterfaceType
from training_clusters.preflight import instance_demands
from training_clusters.stacks.hyperpod_eks import _instance_group

from ..conftest import ROOT

FILE = ROOT / "environments" / "hyperpod-eks-autoscaling.yaml"


def test_the_file_asks_for_karpenter_with_groups_at_zero() -> None:
    spec = load_environment(FILE).hyperpod_eks
    assert spec is not None and spec.autoscaling is AutoScaler.KARPENTER
    assert [(g.name, g.count, g.max_count, g.nodes) for g in spec.instance_groups] == [
        ("g5", 0, 4, 4),
        ("p4d", 0, 2, 2),
    ]
    groups = [_instance_group(g) for g in spec.instance_groups]
    assert [(g.instance_count, g.max_instance_count, g.efa_interface_type) for g in groups] == [
        (0, 4, None),
        (0, 2, EfaInterfaceType.EFA_ONLY),
    ]


def test_preflight_asks_the_quotas_for_max_count_nodes() -> None:
    demands = {
        d.where: (d.instance_type, d.count, d.count_field) for d in instance_demands(load_environment(FILE))
    }
    assert demands == {
        "hyperpod_eks.instance_groups[g5]": (
            "ml.g5.8xlarge",
            4,
            "hyperpod_eks.instance_groups[g5].max_count",
        ),
        "hyperpod_eks.instance_groups[p4d]": (
            "ml.p4d.24xlarge",
            2,
            "hyperpod_eks.instance_groups[p4d].max_count",
        ),
        "hyperpod_eks.system_nodegroup": ("t3.large", 2, "hyperpod_eks.system_nodegroup.size"),
    }


def test_the_acceptance_jobs_are_sized_for_max_count() -> None:
    plan = hyperpod_eks_plan(load_environment(FILE), "hyperpod-eks-autoscaling")
    jobs = {
        j.filename: list(yaml.safe_load_all(j.content)) for j in plan.jobs if j.filename.endswith(".yaml")
    }
    for group, nodes in (("g5", 4), ("p4d", 2)):
        (mpijob,) = [d for d in jobs[f"nccl-tests-{group}.yaml"] if d and d["kind"] == "MPIJob"]
        assert mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == nodes
    assert plan.skipped == ()
