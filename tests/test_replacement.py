"""Replacement hazard: a change that would replace a stateful resource fails here, loudly, naming the property.

CloudFormation replaces a resource when one of its create-only properties changes ("Update requires:
Replacement"; ``createOnlyProperties`` in the resource schemas cfn-lint bundles). For a file system, bucket or
cluster that means a new, empty one. So every create-only property of every stateful resource of the shipped
environments is pinned in ``tests/replacement_snapshot.json``, and so is every resource those properties
reference (a security group whose description changes is replaced, which changes the ``SecurityGroupIds`` of
the file system using it, which replaces the file system too). A construct id change shows as a pinned
resource that disappeared.

To change one on purpose (a new environment, a deliberate replacement), refresh the snapshot and review its
diff like code::

    REFRESH_REPLACEMENT_SNAPSHOT=1 .venv/bin/python -m pytest tests/test_replacement.py
    git diff tests/replacement_snapshot.json
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from training_clusters.environments import environment_files, stack_id

from .conftest import ROOT, EnvironmentGates

ENVIRONMENTS = environment_files(ROOT / "environments")
IDS = [p.stem for p in ENVIRONMENTS]
SNAPSHOT = Path(__file__).resolve().parent / "replacement_snapshot.json"
REFRESH = os.environ.get("REFRESH_REPLACEMENT_SNAPSHOT") == "1"
REFRESH_COMMAND = "REFRESH_REPLACEMENT_SNAPSHOT=1 .venv/bin/python -m pytest tests/test_replacement.py"

#: Resources holding data or running a cluster: replacing one loses its contents or its nodes.
STATEFUL_TYPES = (
    "AWS::FSx::FileSystem",
    "AWS::S3::Bucket",
    "AWS::SageMaker::Cluster",
    "AWS::EKS::Cluster",
    "AWS::PCS::Cluster",
    "AWS::RDS::DBCluster",
    "Custom::PclusterCluster",
)
#: Custom resources have no schema: ParallelCluster documents ClusterName as immutable
#: (https://docs.aws.amazon.com/parallelcluster/latest/ug/cfn-cluster-resource.html).
CUSTOM_CREATE_ONLY = {"Custom::PclusterCluster": ("/properties/ClusterName",)}


@functools.cache
def create_only_properties(resource_type: str) -> tuple[str, ...]:
    """JSON pointers of the properties whose change replaces a resource of this type (cfn-lint's schemas)."""
    if resource_type in CUSTOM_CREATE_ONLY:
        return CUSTOM_CREATE_ONLY[resource_type]
    if resource_type.startswith("Custom::") or resource_type == "AWS::CloudFormation::CustomResource":
        return ()
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource_type).schema
    return tuple(schema.get("createOnlyProperties", ()))


def value_at(properties: dict[str, Any], pointer: str) -> Any:
    """The value at ``/properties/A/*/B`` (``*``: every list item, a list back); None where absent."""
    parts = pointer.split("/")[2:]

    def walk(node: Any, rest: list[str]) -> Any:
        if not rest:
            return node
        if rest[0] == "*":
            return [walk(item, rest[1:]) for item in node] if isinstance(node, list) else None
        return walk(node.get(rest[0]), rest[1:]) if isinstance(node, dict) else None

    return walk(properties, parts)


def referenced_ids(node: Any) -> Iterator[str]:
    """Logical ids a fragment refers to with Ref or Fn::GetAtt (their replacement changes the value)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                yield value
            elif key == "Fn::GetAtt":
                yield value[0] if isinstance(value, list) else str(value).split(".", 1)[0]
            else:
                yield from referenced_ids(value)
    elif isinstance(node, list):
        for item in node:
            yield from referenced_ids(item)


def pins(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Create-only property values of each stateful resource and, transitively, of what they reference.

    ``{logical id: {"Type": ..., "replaces": [stateful logical ids], "properties": {pointer: value}}}``
    """
    resources: dict[str, dict[str, Any]] = template.get("Resources", {})
    pinned: dict[str, dict[str, Any]] = {}
    roots = sorted(lid for lid, r in resources.items() if r["Type"] in STATEFUL_TYPES)
    for root in roots:
        queue = [root]
        while queue:
            logical_id = queue.pop()
            resource = resources[logical_id]
            entry = pinned.setdefault(
                logical_id, {"Type": resource["Type"], "replaces": [], "properties": {}}
            )
            if root in entry["replaces"]:
                continue
            entry["replaces"].append(root)
            properties = resource.get("Properties", {})
            for pointer in create_only_properties(resource["Type"]):
                value = value_at(properties, pointer)
                entry["properties"][pointer] = value
                queue += [t for t in referenced_ids(value) if t in resources]
    for entry in pinned.values():
        entry["replaces"].sort()
    return dict(sorted(pinned.items()))


def replacement_problems(stack: str, pinned: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What changed between the snapshot's pins and the template's, each naming the property and what it
    replaces."""
    problems = []
    for logical_id, was in pinned.items():
        what = f"{stack}: {logical_id} ({was['Type']})"
        losing = ", ".join(was["replaces"])
        if logical_id not in now:
            problems.append(
                f"{what} is gone from the template (a renamed construct id replaces it); it held up: {losing}"
            )
            continue
        for pointer, value in was["properties"].items():
            current = now[logical_id]["properties"].get(pointer)
            if current != value:
                problems.append(
                    f"{what} {pointer} changed from {json.dumps(value)} to {json.dumps(current)}: "
                    f"CloudFormation replaces it (Update requires: Replacement), and with it {losing}; "
                    "a replaced file system or bucket starts EMPTY"
                )
    for logical_id in now.keys() - pinned.keys():
        problems.append(f"{stack}: {logical_id} ({now[logical_id]['Type']}) is not pinned yet")
    return problems


def _snapshot() -> dict[str, Any]:
    return json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}


def _write(snapshot: dict[str, Any]) -> None:
    SNAPSHOT.write_text(json.dumps(dict(sorted(snapshot.items())), indent=1) + "\n")


# --- the shipped environments ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=IDS)
def test_no_stateful_resource_would_be_replaced(environment_gates: EnvironmentGates, path: Path) -> None:
    stack = stack_id(path.stem)
    now = pins(environment_gates.template(path))
    assert any(entry["Type"] in STATEFUL_TYPES for entry in now.values()) or not now
    if REFRESH:
        _write({**_snapshot(), stack: now})
        return
    snapshot = _snapshot()
    assert stack in snapshot, f"{stack} is not in {SNAPSHOT.name}; if it is new, run: {REFRESH_COMMAND}"
    problems = replacement_problems(stack, snapshot[stack], now)
    assert problems == [], "\n".join([*problems, f"If this is deliberate, run: {REFRESH_COMMAND}"])


def test_the_snapshot_covers_exactly_the_shipped_environments() -> None:
    stacks = {stack_id(p.stem) for p in ENVIRONMENTS}
    snapshot = _snapshot()
    if REFRESH:
        _write({k: v for k, v in snapshot.items() if k in stacks})
        return
    assert set(snapshot) == stacks, f"stale or missing stacks; run: {REFRESH_COMMAND}"
    # the hazards named in the issue are covered: file systems pin their subnet, groups and key
    for stack, pinned in snapshot.items():
        for entry in pinned.values():
            if entry["Type"] == "AWS::FSx::FileSystem":
                assert {
                    "/properties/SubnetIds",
                    "/properties/SecurityGroupIds",
                    "/properties/KmsKeyId",
                } <= set(entry["properties"]), stack


# --- the check itself can fail --------------------------------------------------------------------------


def _template(**changes: Any) -> dict[str, Any]:
    fs_properties = {
        "FileSystemType": "LUSTRE",
        "SubnetIds": [{"Ref": "Subnet"}],
        "SecurityGroupIds": [{"Fn::GetAtt": ["Group", "GroupId"]}],
        "StorageCapacity": 1200,
        **changes.get("fs", {}),
    }
    return {
        "Resources": {
            "Fs": {"Type": "AWS::FSx::FileSystem", "Properties": fs_properties},
            "Group": {
                "Type": "AWS::EC2::SecurityGroup",
                "Properties": {
                    "GroupDescription": changes.get("description", "FSx"),
                    "VpcId": {"Ref": "Vpc"},
                },
            },
            "Subnet": {
                "Type": "AWS::EC2::Subnet",
                "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": changes.get("cidr", "10.0.0.0/18")},
            },
            "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
            "Unrelated": {"Type": "AWS::EC2::Subnet", "Properties": {"CidrBlock": "10.0.64.0/18"}},
        }
    }


def test_pins_follow_references_from_the_file_system() -> None:
    pinned = pins(_template())
    assert set(pinned) == {"Fs", "Group", "Subnet", "Vpc"}  # not the subnet nothing stateful uses
    assert pinned["Group"] == {
        "Type": "AWS::EC2::SecurityGroup",
        "replaces": ["Fs"],
        "properties": {
            "/properties/GroupDescription": "FSx",
            "/properties/GroupName": None,
            "/properties/VpcId": {"Ref": "Vpc"},
        },
    }
    assert "/properties/StorageCapacity" not in pinned["Fs"]["properties"]  # updated in place


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"description": "FSx for Lustre"},
            "Group (AWS::EC2::SecurityGroup) /properties/GroupDescription changed",
        ),
        ({"cidr": "10.0.128.0/18"}, "Subnet (AWS::EC2::Subnet) /properties/CidrBlock changed"),
        (
            {"fs": {"KmsKeyId": {"Ref": "Key"}}},
            'Fs (AWS::FSx::FileSystem) /properties/KmsKeyId changed from null to {"Ref": "Key"}',
        ),
        (
            {"fs": {"SubnetIds": [{"Ref": "Unrelated"}]}},
            "Fs (AWS::FSx::FileSystem) /properties/SubnetIds changed",
        ),
    ],
)
def test_a_replacing_change_is_reported_with_its_property_and_what_it_replaces(
    change: dict[str, Any], expected: str
) -> None:
    problems = replacement_problems("S", pins(_template()), pins(_template(**change)))
    assert any(p.startswith(f"S: {expected}") and "with it Fs" in p for p in problems), problems


def test_an_in_place_change_is_not_a_problem() -> None:
    assert replacement_problems("S", pins(_template()), pins(_template(fs={"StorageCapacity": 2400}))) == []


def test_a_renamed_resource_is_reported() -> None:
    renamed = _template()
    renamed["Resources"]["Fs2"] = renamed["Resources"].pop("Fs")
    problems = replacement_problems("S", pins(_template()), pins(renamed))
    assert (
        "S: Fs (AWS::FSx::FileSystem) is gone from the template (a renamed construct id replaces it); it held up: Fs"
        in problems
    )
    assert "S: Fs2 (AWS::FSx::FileSystem) is not pinned yet" in problems
