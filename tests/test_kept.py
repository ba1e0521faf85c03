"""What ``cdk destroy`` leaves, read offline from a template (``cleanup FILE --dry-run``), and its cost: each kind
of resource on template fragments, both sides of each rule; every shipped environment against the model of
stack deletion in tests/test_destroy.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from training_clusters.cli.kept import Kept, kept_after_destroy, monthly_total, summary
from training_clusters.environments import environment_files

from .conftest import ROOT, EnvironmentGates
from .test_destroy import is_retained


def retained(kind: str, properties: dict[str, Any], policy: str = "Retain") -> dict[str, Any]:
    return {"Type": kind, "Properties": properties, "DeletionPolicy": policy}


def test_each_retained_kind_with_its_price() -> None:
    template = {
        "Resources": {
            "Fs": retained(
                "AWS::FSx::FileSystem",
                {
                    "StorageCapacity": 2400,
                    "LustreConfiguration": {
                        "DeploymentType": "PERSISTENT_2",
                        "PerUnitStorageThroughput": 250,
                    },
                },
            ),
            "Db": retained(
                "AWS::RDS::DBCluster",
                {"Engine": "aurora-mysql", "ServerlessV2ScalingConfiguration": {"MinCapacity": 0.5}},
                "RetainExceptOnCreate",
            ),
            "Key": retained("AWS::KMS::Key", {}),
            "Secret": retained("AWS::SecretsManager::Secret", {}),
            "Logs": retained("AWS::Logs::LogGroup", {"RetentionInDays": 30}),
            "Forever": retained("AWS::Logs::LogGroup", {}),
            "Deleted": {"Type": "AWS::Logs::LogGroup", "Properties": {}, "DeletionPolicy": "Delete"},
            "Vpc": retained("AWS::EC2::VPC", {}),
        }
    }
    kept = kept_after_destroy(template, "us-east-1")
    assert kept == [
        Kept(
            "FSx for Lustre file system",
            "Fs",
            "PERSISTENT_2, 250 MB/s/TiB, 2400 GiB",
            504.0,
            "$504.00",
            "fsx",
        ),
        Kept(
            "Aurora database cluster",
            "Db",
            "aurora-mysql, 0.5 ACU minimum",
            43.8,
            "at least $43.80 + storage",
            "aurora",
        ),
        Kept("KMS key", "Key", "", 1.0, "$1.00", "kms"),
        Kept("secret", "Secret", "", 0.4, "$0.40", "secrets"),
        Kept("log group", "Logs", "kept 30 days", None, "by use"),
        Kept("log group", "Forever", "kept forever", None, "by use"),
        Kept("VPC", "Vpc"),
    ]
    assert monthly_total(kept) == 549.2
    assert summary(kept, "us-east-1") == [
        "about $549.20 a month (us-east-1 list prices of 2026-12), plus what is billed by use",
        "price source: Aurora Serverless v2 https://aws.amazon.com/rds/aurora/pricing/",
        "price source: FSx for Lustre https://aws.amazon.com/fsx/lustre/pricing/",
        "price source: KMS keys https://aws.amazon.com/kms/pricing/",
        "price source: Secrets Manager https://aws.amazon.com/secrets-manager/pricing/",
    ]


def test_outside_the_price_table_s_region_costs_are_unknown_and_said_so() -> None:
    template = {"Resources": {"Fs": retained("AWS::FSx::FileSystem", {"StorageCapacity": 1200})}}
    (fs,) = kept_after_destroy(template, "eu-west-1")
    assert (fs.monthly_usd, fs.cost) == (None, "unknown")
    assert summary([fs], "eu-west-1") == [
        "monthly cost unknown: the price table holds us-east-1 only, not eu-west-1"
    ]


@pytest.mark.parametrize("policy", ["Retain", None])
def test_a_parallelcluster_cluster_kept_running_is_listed_only_when_its_property_says_retain(
    policy: str | None,
) -> None:
    properties = {"DeletionPolicy": policy} if policy else {}
    template = {"Resources": {"Cluster": {"Type": "Custom::PclusterCluster", "Properties": properties}}}
    expected = (
        [Kept("ParallelCluster cluster (keeps running)", "Cluster", cost="its instances")] if policy else []
    )
    assert kept_after_destroy(template, "us-east-1") == expected


def chart(values: Any) -> dict[str, Any]:
    return {
        "Resources": {"Chart": {"Type": "Custom::AWSCDK-EKS-HelmChart", "Properties": {"Values": values}}}
    }


PROMETHEUS = {
    "prometheus": {
        "prometheusSpec": {
            "storageSpec": {
                "volumeClaimTemplate": {
                    "spec": {"storageClassName": "gp3", "resources": {"requests": {"storage": "50Gi"}}}
                }
            }
        }
    },
    "grafana": {"enabled": True, "persistence": {"enabled": True, "storageClassName": "gp3", "size": "10Gi"}},
}


def test_the_volumes_of_a_chart_s_claims_stay_whether_its_values_are_a_string_or_joined_with_tokens() -> None:
    text = json.dumps(PROMETHEUS)
    joined = {"Fn::Join": ["", [text[:20], {"Ref": "AWS::Region"}, text[20:]]]}
    expected = [
        Kept("EBS volume (gp3)", "Chart", "Prometheus's claim, 50Gi, StorageClass gp3", 4.0, "$4.00", "ebs"),
        Kept("EBS volume (gp3)", "Chart", "Grafana's claim, 10Gi, StorageClass gp3", 0.8, "$0.80", "ebs"),
    ]
    assert kept_after_destroy(chart(text), "us-east-1") == expected
    assert kept_after_destroy(chart(joined), "us-east-1") == expected


def test_a_chart_without_claims_or_with_grafana_off_keeps_no_volume() -> None:
    off = {**PROMETHEUS, "grafana": {"enabled": False, "persistence": {"enabled": True, "size": "10Gi"}}}
    assert [k.detail for k in kept_after_destroy(chart(json.dumps(off)), "us-east-1")] == [
        "Prometheus's claim, 50Gi, StorageClass gp3"
    ]
    assert kept_after_destroy(chart(json.dumps({"replicas": 2})), "us-east-1") == []
    assert kept_after_destroy(chart("not json"), "us-east-1") == []


@pytest.mark.parametrize("path", environment_files(ROOT / "environments"), ids=lambda p: p.stem)
def test_every_resource_the_stack_deletion_model_keeps_is_listed(
    environment_gates: EnvironmentGates, path: Path
) -> None:
    template = environment_gates.template(path)
    kept = {
        k.logical_id for k in kept_after_destroy(template, "us-east-1") if not k.resource.startswith("EBS")
    }
    assert kept == {key for key, resource in template["Resources"].items() if is_retained(resource)}
