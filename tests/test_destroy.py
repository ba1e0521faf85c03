"""`cdk destroy` completes on every shipped environment and keeps the data.

A model of stack deletion, read from each synthesized template: CloudFormation deletes every resource except
those it retains (``DeletionPolicy: Retain``/``RetainExceptOnCreate``; a ``Custom::PclusterCluster`` whose
own ``DeletionPolicy`` property is ``Retain`` also leaves its cluster running). Deleting a resource that a
retained one still uses fails (a subnet holding a retained file system's interfaces, a security group it
carries), so the rule is: **no retained resource references a deleted one** (``Ref``, ``Fn::GetAtt``,
``Fn::Sub``, ``DependsOn``). And a retained KMS key must encrypt something retained, or it is only cost.

What the shipped environments keep after ``cdk destroy`` (everything else is deleted):

* the FSx for Lustre file system (billed per GiB-month of capacity until you delete it; its automatic
  backups go with it), with its security group, its subnet and the VPC (free: the NAT gateway, its Elastic
  IP, routes and endpoints are deleted);
* the VPC flow log group and the MPI Operator handler's log group (CloudWatch Logs storage, within their
  retention);
* HyperPod's lifecycle bucket and its access-log bucket (S3 storage of a few scripts and logs).
* a Slurm accounting database (``parallelcluster.accounting``: Aurora storage and backups are billed until
  you delete it, with deletion protection on) with its KMS key, secrets, parameter group, security group
  and the private subnets it lives in; ParallelCluster's custom-action bucket and its access-log bucket.

Clusters (HyperPod, ParallelCluster, AWS PCS, EKS with its secrets key) are deleted: they hold no data of
their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml

from training_clusters.cli.cleanup import Kind
from training_clusters.config import parse_environment
from training_clusters.environments import add_environment_config, environment_files

from .conftest import CDK_CONTEXT, ROOT, EnvironmentGates, template_of

ENVIRONMENTS = environment_files(ROOT / "environments")
IDS = [p.stem for p in ENVIRONMENTS]
RETAINING_POLICIES = {"Retain", "RetainExceptOnCreate"}


def is_retained(resource: dict[str, Any]) -> bool:
    """Whether deleting the stack leaves this resource (or what it manages) in place."""
    if resource.get("DeletionPolicy") in RETAINING_POLICIES:
        return True
    # ParallelCluster's provider keeps the cluster itself when its property says so
    return resource.get("Type") == "Custom::PclusterCluster" and (
        resource.get("Properties", {}).get("DeletionPolicy") == "Retain"
    )


def references(node: Any) -> Iterator[tuple[str, str]]:
    """(logical id, how) for every Ref, Fn::GetAtt and Fn::Sub variable in a template fragment."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                yield value, "Ref"
            elif key == "Fn::GetAtt":
                target = value[0] if isinstance(value, list) else str(value).split(".", 1)[0]
                yield target, "Fn::GetAtt"
            elif key == "Fn::Sub":
                text, variables = (value, {}) if isinstance(value, str) else (value[0], value[1])
                for name in re.findall(r"\$\{([^!}][^}]*)\}", text):
                    if name not in variables:
                        yield name.split(".", 1)[0], "Fn::Sub"
                yield from references(variables)
            else:
                yield from references(value)
    elif isinstance(node, list):
        for item in node:
            yield from references(item)


def destroy_problems(template: dict[str, Any]) -> list[str]:
    """Why ``cdk destroy`` of this template would stop, or keep what nothing needs; [] when it is clean."""
    resources: dict[str, dict[str, Any]] = template.get("Resources", {})
    problems = []
    needed_by_retained: set[str] = set()
    for logical_id, resource in resources.items():
        if not is_retained(resource):
            continue
        depends_on = resource.get("DependsOn", [])
        uses = [*references(resource.get("Properties", {}))]
        uses += [(d, "DependsOn") for d in ([depends_on] if isinstance(depends_on, str) else depends_on)]
        for target, how in uses:
            if target not in resources:
                continue  # a parameter or pseudo parameter
            needed_by_retained.add(target)
            if not is_retained(resources[target]):
                problems.append(
                    f"{logical_id} ({resource['Type']}) is retained but uses {target} "
                    f"({resources[target]['Type']}, deleted) through {how}: deleting {target} fails or "
                    "breaks what is kept"
                )
    for logical_id, resource in resources.items():
        if (
            resource["Type"] == "AWS::KMS::Key"
            and is_retained(resource)
            and logical_id not in needed_by_retained
        ):
            problems.append(
                f"{logical_id} (AWS::KMS::Key) is retained but encrypts nothing that is retained: it only costs"
            )
    return sorted(set(problems))


# --- the model itself can fail --------------------------------------------------------------------------

FS = {"Type": "AWS::FSx::FileSystem", "DeletionPolicy": "Retain"}
SUBNET = {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}}}
VPC = {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}


@pytest.mark.parametrize(
    ("uses", "how"),
    [
        ({"Properties": {"SubnetIds": [{"Ref": "Subnet"}]}}, "Ref"),
        ({"Properties": {"SubnetIds": [{"Fn::GetAtt": ["Subnet", "SubnetId"]}]}}, "Fn::GetAtt"),
        ({"Properties": {"SubnetIds": [{"Fn::GetAtt": "Subnet.SubnetId"}]}}, "Fn::GetAtt"),
        ({"Properties": {"Name": {"Fn::Sub": "fs-in-${Subnet}"}}}, "Fn::Sub"),
        ({"DependsOn": "Subnet"}, "DependsOn"),
        ({"DependsOn": ["Vpc", "Subnet"]}, "DependsOn"),
    ],
)
def test_a_retained_resource_using_a_deleted_one_is_a_problem(uses: dict[str, Any], how: str) -> None:
    template = {
        "Resources": {"Fs": {**FS, **uses}, "Subnet": SUBNET, "Vpc": {**VPC, "DeletionPolicy": "Retain"}}
    }
    (problem,) = destroy_problems(template)
    assert problem.startswith(
        "Fs (AWS::FSx::FileSystem) is retained but uses Subnet (AWS::EC2::Subnet, deleted)"
    )
    assert problem.endswith(f"through {how}: deleting Subnet fails or breaks what is kept")


def test_retaining_what_a_retained_resource_uses_is_clean() -> None:
    retained = {"DeletionPolicy": "Retain"}
    template = {
        "Resources": {
            "Fs": {
                **FS,
                "Properties": {"SubnetIds": [{"Ref": "Subnet"}], "Name": {"Fn::Sub": "${AWS::Region}"}},
            },
            "Subnet": {**SUBNET, **retained},
            "Vpc": {**VPC, **retained},
            # deleted resources may use retained ones: CloudFormation deletes them first
            "Route": {"Type": "AWS::EC2::Route", "Properties": {"SubnetId": {"Ref": "Subnet"}}},
        }
    }
    assert destroy_problems(template) == []


def test_a_retained_parallelcluster_counts_as_retained() -> None:
    cluster = {
        "Type": "Custom::PclusterCluster",
        "Properties": {"DeletionPolicy": "Retain", "S": {"Ref": "Vpc"}},
    }
    assert destroy_problems({"Resources": {"Cluster": cluster, "Vpc": VPC}})
    cluster["Properties"]["DeletionPolicy"] = "Delete"
    assert destroy_problems({"Resources": {"Cluster": cluster, "Vpc": VPC}}) == []


def test_a_retained_key_nothing_retained_uses_is_only_cost() -> None:
    key = {"Type": "AWS::KMS::Key", "DeletionPolicy": "Retain"}
    cluster = {
        "Type": "AWS::EKS::Cluster",
        "Properties": {"EncryptionConfig": [{"Provider": {"KeyArn": {"Ref": "Key"}}}]},
    }
    (problem,) = destroy_problems({"Resources": {"Key": key, "Cluster": cluster}})
    assert "encrypts nothing that is retained" in problem
    bucket = {
        "Type": "AWS::S3::Bucket",
        "DeletionPolicy": "Retain",
        "Properties": {"K": {"Fn::GetAtt": ["Key", "Arn"]}},
    }
    assert destroy_problems({"Resources": {"Key": key, "Bucket": bucket}}) == []


# --- the shipped environments ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_destroy_completes_and_keeps_the_data(environment_gates: EnvironmentGates, path: Path) -> None:
    template = environment_gates.template(path)
    assert destroy_problems(template) == []
    kept = {r["Type"] for r in template["Resources"].values() if is_retained(r)}
    # the data stays: file systems and buckets are never deleted with the stack
    for resource in template["Resources"].values():
        if resource["Type"] in ("AWS::FSx::FileSystem", "AWS::S3::Bucket"):
            assert resource.get("DeletionPolicy") == "Retain"
    # clusters hold no data: they go, so nothing they run on has to stay; a key stays only with the data it
    # encrypts (an accounting database's), which destroy_problems checks
    assert not kept & {
        "Custom::PclusterCluster",
        "AWS::SageMaker::Cluster",
        "AWS::EKS::Cluster",
        "AWS::PCS::Cluster",
    }


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_cleanup_finds_every_kind_of_resource_destroy_keeps(
    environment_gates: EnvironmentGates, path: Path
) -> None:
    """``training-clusters cleanup`` lists and deletes the kinds of :class:`~training_clusters.cli.cleanup.Kind`
    only: every type a shipped environment retains must be one of them, or cleanup would leave it behind."""
    template = environment_gates.template(path)
    kept = {r["Type"] for r in template["Resources"].values() if is_retained(r)}
    assert kept <= {kind.cloudformation_type for kind in Kind}


#: docs/deploy.md's kept list ("What destroy keeps"), by what it names, and the log groups (by logical id) each name stands for.
KEPT_LOG_GROUPS = {
    "the flow-log group": re.compile(r"NetworkFlowLogs[0-9A-F]{8}"),
    "the MPI operator's log group": re.compile(r"(HyperPodDependencies)?MpiOperatorLogs[0-9A-F]{8}"),
    "the autoscaling waiter's log group": re.compile(r"HyperPodAutoscalingStatusLogs[0-9A-F]{8}"),
    "log groups (the database's own, its user handler's and its secret rotation's)": re.compile(
        r"Accounting(Database)?(AuditLog|ErrorLog|GeneralLog|SlowqueryLog|UserHandlerLogs|RotationLogs)[0-9A-F]{8}"
    ),
}


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_the_deploy_guide_names_every_log_group_destroy_keeps(
    environment_gates: EnvironmentGates, path: Path
) -> None:
    guide = (ROOT / "docs" / "deploy.md").read_text()
    kept_list = " ".join(guide[guide.index("## What destroy keeps") :].split())
    for name in KEPT_LOG_GROUPS:
        assert name in kept_list, f"docs/deploy.md's kept list no longer says: {name}"
    template = environment_gates.template(path)
    kept = [
        logical_id
        for logical_id, r in template["Resources"].items()
        if r["Type"] == "AWS::Logs::LogGroup" and is_retained(r)
    ]
    unnamed = [k for k in kept if not any(p.fullmatch(k) for p in KEPT_LOG_GROUPS.values())]
    assert unnamed == []


def test_the_kept_list_s_log_group_names_match_only_what_they_name() -> None:
    patterns = KEPT_LOG_GROUPS.values()
    for named in ("NetworkFlowLogs2BEC3212", "MpiOperatorLogsA1B2C3D4", "AccountingRotationLogs0A1B2C3D"):
        assert any(p.fullmatch(named) for p in patterns)
    for unnamed in ("NetworkFlowLogs2BEC321", "ClusterLogs2BEC3212", "AccountingRotationLog0A1B2C3D"):
        assert not any(p.fullmatch(unnamed) for p in patterns)


def _variant(file: str, change: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "environments" / file).read_text())
    for section, values in change.items():
        document[section] = {**document.get(section, {}), **values}
    config = parse_environment(document, source=file)
    app = cdk.App(outdir=str(tmp_path), context=dict(CDK_CONTEXT))
    return template_of(add_environment_config(app, config, Path(file).stem))  # type: ignore[return-value]


def test_a_destroyed_file_system_leaves_no_network_behind(tmp_path: Path) -> None:
    template = _variant(
        "network-storage.yaml",
        {"storage": {"lustre": {"deployment_type": "SCRATCH_2", "removal_policy": "destroy"}}},
        tmp_path,
    )
    assert destroy_problems(template) == []
    kept = sorted(r["Type"] for r in template["Resources"].values() if is_retained(r))
    assert kept == ["AWS::Logs::LogGroup"]  # only the flow logs


def test_a_retained_parallelcluster_is_caught_by_the_model(tmp_path: Path) -> None:
    template = _variant(
        "parallelcluster-c5n.yaml", {"parallelcluster": {"deletion_policy": "retain"}}, tmp_path
    )
    problems = destroy_problems(template)
    # the kept cluster still runs on the network and placement group the stack would delete
    assert any(
        "Custom::PclusterCluster) is retained but uses" in p and "AWS::EC2::PlacementGroup" in p
        for p in problems
    )
