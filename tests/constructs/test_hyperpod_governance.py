"""HyperPodTaskGovernance: the task governance add-on, the cluster policy and one compute quota per team, in
that order after the HyperPod cluster; each team's tenancy in the namespace HyperPod makes; every refusal with
its message; and cfn-lint's own schema of ``AWS::SageMaker::ComputeQuota`` judging what we write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from training_clusters.constructs.hyperpod_eks.cluster import EksInstanceGroup
from training_clusters.constructs.hyperpod_eks.governance import COMPUTE_QUOTA_TYPE, HyperPodTaskGovernance
from training_clusters.gates.cfn_lint import cfn_lint
from training_clusters.model.errors import ConfigurationError
from training_clusters.workloads.task_governance import PriorityClass, QuotaResource, Team

from ..assertions import manifest_objects
from .test_hyperpod_eks import build, depends_on, resources

P4D = EksInstanceGroup(name="p4d", instance_type="ml.p4d.24xlarge", instance_count=2, volume_gib=1000)
G5 = EksInstanceGroup(name="g5", instance_type="ml.g5.8xlarge", instance_count=2, volume_gib=500)
RESEARCH = Team(
    "research",
    resources=[QuotaResource("ml.p4d.24xlarge", count=1)],
    fair_share_weight=60,
    borrow_limit_percent=100,
)
INFERENCE = Team(
    "inference",
    resources=[QuotaResource("ml.p4d.24xlarge", partition_type="mig-3g.20gb", partition_count=4)],
    sharing="Lend",  # type: ignore[arg-type]
    preempt_team_tasks="never",  # type: ignore[arg-type]
)
CLASSES = [PriorityClass("inference", 100), PriorityClass("training", 50)]


def governed(stack: cdk.Stack, teams: list[Team] | None = None, **props: Any) -> HyperPodTaskGovernance:
    hyperpod = build(stack, [P4D, G5], kueue=False)
    return HyperPodTaskGovernance(
        stack,
        "TaskGovernance",
        eks_cluster=_eks(stack),
        hyperpod=hyperpod,
        teams=teams if teams is not None else [RESEARCH, INFERENCE],
        **({"priority_classes": CLASSES} | props),
    )


def _eks(stack: cdk.Stack) -> Any:
    return stack.node.find_child("Eks")


def logical_id(stack: cdk.Stack, construct: Any) -> str:
    return stack.get_logical_id(construct)


# --------------------------------------------------------------------------------------------------
# what is made, and in which order


def test_the_addon_the_policy_and_a_quota_per_team(stack: cdk.Stack) -> None:
    governance = governed(stack)
    template = Template.from_stack(stack).to_json()["Resources"]
    addons = {
        k: r
        for k, r in resources(stack, "AWS::EKS::Addon").items()
        if r["Properties"]["AddonName"].startswith("amazon-")
    }
    ((addon_id, addon),) = addons.items()
    assert addon["Properties"] == {
        "AddonName": "amazon-sagemaker-hyperpod-taskgovernance",
        "AddonVersion": "v1.6.0-eksbuild.1",
        "ClusterName": {"Ref": logical_id(stack, _eks(stack).cluster.node.default_child)},
        "ResolveConflicts": "OVERWRITE",
    }
    assert depends_on(addon) == {logical_id(stack, _eks(stack).system_nodegroup.node.default_child)}
    ((policy_id, policy),) = resources(stack, "AWS::SageMaker::ClusterSchedulerConfig").items()
    ((cluster_id, _),) = resources(stack, "AWS::SageMaker::Cluster").items()
    assert policy["Properties"] == {
        "Name": "ml-cluster-policy",
        "ClusterArn": {"Fn::GetAtt": [cluster_id, "ClusterArn"]},
        "SchedulerConfig": {
            "PriorityClasses": [{"Name": "inference", "Weight": 100}, {"Name": "training", "Weight": 50}],
            "FairShare": "Enabled",
            "IdleResourceSharing": "Enabled",
        },
    }
    assert depends_on(policy) == {addon_id, cluster_id}
    quotas = resources(stack, COMPUTE_QUOTA_TYPE)
    assert {k: q["Properties"] for k, q in quotas.items()} == {
        logical_id(stack, governance.quotas["research"]): {
            "Name": "ml-cluster-research",
            "ClusterArn": {"Fn::GetAtt": [cluster_id, "ClusterArn"]},
            "ActivationState": "Enabled",
            "ComputeQuotaTarget": {"TeamName": "research", "FairShareWeight": 60},
            "ComputeQuotaConfig": {
                "ComputeQuotaResources": [{"InstanceType": "ml.p4d.24xlarge", "Count": 1}],
                "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 100},
                "PreemptTeamTasks": "LowerPriority",
            },
        },
        logical_id(stack, governance.quotas["inference"]): {
            "Name": "ml-cluster-inference",
            "ClusterArn": {"Fn::GetAtt": [cluster_id, "ClusterArn"]},
            "ActivationState": "Enabled",
            "ComputeQuotaTarget": {"TeamName": "inference"},
            "ComputeQuotaConfig": {
                "ComputeQuotaResources": [
                    {
                        "InstanceType": "ml.p4d.24xlarge",
                        "AcceleratorPartition": {"Type": "mig-3g.20gb", "Count": 4},
                    }
                ],
                "ResourceSharingConfig": {"Strategy": "Lend"},
                "PreemptTeamTasks": "Never",
            },
        },
    }
    for quota in quotas.values():
        assert depends_on(quota) == {policy_id}
    # no Kueue of ours: no kueue chart anywhere
    charts = [
        r["Properties"]["Chart"] for r in template.values() if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    ]
    assert "kueue" not in charts


def test_each_teams_tenancy_follows_its_quota(stack: cdk.Stack) -> None:
    role = iam.Role.from_role_arn(stack, "Research", "arn:aws:iam::111122223333:role/Research", mutable=False)
    governance = governed(stack, pod_security={"inference": "restricted"}, team_roles={"research": role})
    template = Template.from_stack(stack).to_json()["Resources"]
    for team, enforce in (("research", "baseline"), ("inference", "restricted")):
        namespace = f"hyperpod-ns-{team}"
        (patch_id,) = [
            k
            for k, r in template.items()
            if r["Type"] == "Custom::AWSCDK-EKS-KubernetesPatch"
            and r["Properties"]["ResourceName"] == f"namespace/{namespace}"
        ]
        patch = template[patch_id]
        assert logical_id(stack, governance.quotas[team]) in depends_on(patch)
        applied = json.loads(patch["Properties"]["ApplyPatchJson"])["metadata"]["labels"]
        assert applied == {
            "pod-security.kubernetes.io/enforce": enforce,
            "pod-security.kubernetes.io/enforce-version": "v1.35",
            "pod-security.kubernetes.io/warn": "restricted",
            "pod-security.kubernetes.io/warn-version": "v1.35",
            "pod-security.kubernetes.io/audit": "restricted",
            "pod-security.kubernetes.io/audit-version": "v1.35",
        }
        restored = json.loads(patch["Properties"]["RestorePatchJson"])["metadata"]["labels"]
        assert set(restored.values()) == {"privileged", "latest"} and set(restored) == set(applied)
        (objects_id,) = [
            k
            for k, r in template.items()
            if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource" and f"TeamAccess{team}" in k
        ]
        objects = manifest_objects(template[objects_id])
        assert [(o["kind"], o["metadata"]["name"], o["metadata"]["namespace"]) for o in objects] == [
            ("RoleBinding", "training-clusters-team-edit", namespace),
            ("NetworkPolicy", "training-clusters-same-namespace-ingress", namespace),
        ]
        assert objects[0]["subjects"] == [
            {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Group",
                "name": f"training-clusters:team:{namespace}",
            }
        ]
        assert patch_id in depends_on(template[objects_id])
    (entry,) = [
        r
        for r in resources(stack, "AWS::EKS::AccessEntry").values()
        if r["Properties"].get("KubernetesGroups") == ["training-clusters:team:hyperpod-ns-research"]
    ]
    assert entry["Properties"]["PrincipalArn"] == "arn:aws:iam::111122223333:role/Research"
    assert entry["Properties"]["Type"] == "STANDARD"
    assert set(governance.team_access_entries) == {"research"}


def test_cfn_lints_schema_of_compute_quota_judges_what_we_write(stack: cdk.Stack, tmp_path: Path) -> None:
    """Clean as written, the ARN pattern included; the schema's own limits refuse what our rules refuse first.
    (The policy and the quotas alone, their cluster's ARN written out: the whole stack is linted by the
    environment's gates.)"""
    governed(stack)
    arn = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdefghijkl"
    kinds = ("AWS::SageMaker::ClusterSchedulerConfig", COMPUTE_QUOTA_TYPE)
    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Resources": {
            k: {"Type": r["Type"], "Properties": {**r["Properties"], "ClusterArn": arn}}
            for k, r in Template.from_stack(stack).to_json()["Resources"].items()
            if r["Type"] in kinds
        },
    }
    assert sorted(r["Type"] for r in template["Resources"].values()) == sorted([kinds[0], *[kinds[1]] * 2])
    path = tmp_path / "t.json"
    path.write_text(json.dumps(template))
    assert [str(m) for m in cfn_lint(path, ["us-east-1"])] == []
    quota_id = next(k for k, r in template["Resources"].items() if r["Type"] == COMPUTE_QUOTA_TYPE)
    config = template["Resources"][quota_id]["Properties"]["ComputeQuotaConfig"]
    config["ResourceSharingConfig"]["BorrowLimit"] = 10001
    config["ComputeQuotaResources"][0]["AcceleratorPartition"] = {"Type": "mig-8g.80gb", "Count": 1}
    template["Resources"][quota_id]["Properties"]["ComputeQuotaTarget"]["FairShareWeight"] = 101
    path.write_text(json.dumps(template))
    found = {(m.rule, m.path.rsplit("/", 1)[-1]) for m in cfn_lint(path, ["us-east-1"])}
    assert found == {("E3034", "BorrowLimit"), ("E3030", "Type"), ("E3034", "FairShareWeight")}


# --------------------------------------------------------------------------------------------------
# refusals


def _refused(stack: cdk.Stack, **props: Any) -> str:
    with pytest.raises(ConfigurationError) as raised:
        governed(stack, **props)
    return str(raised.value)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"teams": []}, "Test/TaskGovernance: teams must hold at least one team, got none"),
        (
            {"teams": [RESEARCH, RESEARCH]},
            "Test/TaskGovernance: teams must each have a name of their own, got research more than once",
        ),
        (
            {"teams": [Team("Research")]},
            "Test/TaskGovernance: teams[0].name must be 1 to 51 lower-case letters",
        ),
        (
            {"teams": [Team("a", fair_share_weight=101)]},
            "Test/TaskGovernance: teams[0].fair_share_weight must be between 0 and 100, got 101",
        ),
        (
            {"teams": [Team("a", borrow_limit_percent=0)]},
            "Test/TaskGovernance: teams[0].borrow_limit_percent must be between 1 and 500",
        ),
        (
            {"teams": [Team("a", sharing="DontLend", borrow_limit_percent=5)]},  # type: ignore[arg-type]
            "Test/TaskGovernance: teams[0].borrow_limit_percent limits borrowing, which only sharing: "
            "LendAndBorrow does; got sharing: DontLend",
        ),
        (
            {"teams": [Team("a", sharing="Borrow")]},  # type: ignore[arg-type]
            "Test/TaskGovernance: teams[0].sharing must be one of Lend, DontLend, LendAndBorrow, got 'Borrow'",
        ),
        (
            {"teams": [Team("a", resources=[QuotaResource("ml.p4d.24xlarge", count=1)] * 16)]},
            "Test/TaskGovernance: teams[0].resources must hold at most 15 resources (a compute quota's limit), got 16",
        ),
        (
            {"teams": [Team("a", resources=[QuotaResource("ml.p5.48xlarge", count=1)])]},
            "Test/TaskGovernance: teams[0].resources[0].instance_type must be the instance type of one of the "
            "cluster's instance groups (ml.g5.8xlarge, ml.p4d.24xlarge), got 'ml.p5.48xlarge'",
        ),
        (
            {"teams": [Team("a", resources=[QuotaResource("ml.g5.8xlarge")])]},
            "Test/TaskGovernance: teams[0].resources[0] must give count, accelerators, vcpu, memory_gib or "
            "accelerator_partition (what the team is allotted)",
        ),
        (
            {"teams": [Team("a", resources=[QuotaResource("ml.g5.8xlarge", vcpu=-1)])]},
            "Test/TaskGovernance: teams[0].resources[0].vcpu must be between 0 and 10,000,000, got -1",
        ),
        (
            {
                "teams": [
                    Team(
                        "a",
                        resources=[
                            QuotaResource("ml.g5.8xlarge", partition_type="mig-1g.5gb", partition_count=1)
                        ],
                    )
                ]
            },
            "Test/TaskGovernance: teams[0].resources[0].partition_type must be left out: the GPUs of "
            "ml.g5.8xlarge have no MIG profiles, got 'mig-1g.5gb'",
        ),
        (
            {"teams": [Team("a", resources=[QuotaResource("ml.p4d.24xlarge", partition_type="mig-1g.5gb")])]},
            "Test/TaskGovernance: teams[0].resources[0].partition_count must be between 1 and 10,000,000 "
            "partitions, got 0",
        ),
        (
            {"priority_classes": [PriorityClass(f"c{i}", i) for i in range(11)]},
            "Test/TaskGovernance: priority_classes must hold at most 10 priority classes (the cluster policy's "
            "limit), got 11",
        ),
        (
            {"priority_classes": [PriorityClass("a", 1), PriorityClass("a", 2)]},
            "Test/TaskGovernance: priority_classes must each have a name of their own, got a more than once",
        ),
        (
            {"priority_classes": [PriorityClass("a", 101)]},
            "Test/TaskGovernance: priority_classes[0].weight must be between 0 and 100, got 101",
        ),
        (
            {"priority_classes": [PriorityClass("A", 1)]},
            "Test/TaskGovernance: priority_classes[0].name must be 1 to 54 lower-case letters",
        ),
        (
            {"addon_version": "1.6.0"},
            "Test/TaskGovernance: addon_version must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), "
            "got '1.6.0'",
        ),
        (
            {"pod_security": {"ops": "baseline"}},
            "Test/TaskGovernance: pod_security['ops'] must name one of the teams (research, inference)",
        ),
        (
            {"pod_security": {"research": "privileged"}},
            "Test/TaskGovernance: pod_security['research'] must be one of baseline, restricted, got 'privileged'",
        ),
    ],
)
def test_refusals(stack: cdk.Stack, props: dict[str, Any], message: str) -> None:
    assert message in _refused(stack, **props)


def test_a_hyperpod_cluster_with_our_kueue_is_refused(stack: cdk.Stack) -> None:
    hyperpod = build(stack, [P4D])
    with pytest.raises(ConfigurationError) as raised:
        HyperPodTaskGovernance(
            stack, "TaskGovernance", eks_cluster=_eks(stack), hyperpod=hyperpod, teams=[RESEARCH]
        )
    assert str(raised.value) == (
        "Test/TaskGovernance: hyperpod must be made with kueue=False: the task governance add-on runs "
        "HyperPod's own Kueue and requires that no other Kueue is installed"
    )


def test_team_roles_name_teams(stack: cdk.Stack) -> None:
    role = iam.Role.from_role_arn(stack, "Ops", "arn:aws:iam::111122223333:role/Ops", mutable=False)
    assert (
        "Test/TaskGovernance: team_roles['ops'] must name one of the teams (research, inference)"
        in _refused(stack, team_roles={"ops": role})
    )
