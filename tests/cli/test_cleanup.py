"""``training-clusters cleanup`` against fake accounts: real boto3 clients under botocore's Stubber.

The Stubber checks every call's parameters and every canned answer against the services' own models, and
the order of the calls to each client; ``Account`` also records every call across all clients, so the order
of the whole cleanup is asserted, and that no queued answer is left unused. A resource of another environment
is in every listing (a listing is not trusted to filter): it is never shown, described or deleted.
"""

from __future__ import annotations

import inspect
import io
import json
import re
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from tests.text_tables import unwrapped
from training_clusters import cli
from training_clusters.cli import cleanup
from training_clusters.cli.cleanup import (
    BACKUP_IAM_ACTIONS,
    DELETE_IAM_ACTIONS,
    LIST_IAM_ACTIONS,
    PROTECTION_IAM_ACTIONS,
    CleanupClients,
    CleanupStopped,
    Deleter,
    Kind,
    Leftover,
)

from ..conftest import ROOT
from .test_cli import aws_config  # noqa: F401  (the fixture: no credentials anywhere)
from .test_widths import assert_fits

ENVIRONMENTS = ROOT / "environments"
REGION = "us-east-1"
ACCOUNT_ID = "111122223333"
NOW = datetime(2026, 12, 2, 9, 30, tzinfo=UTC)
#: The stack of the deployment that was destroyed (its resources keep CloudFormation's tags).
OLD_STACK_ID = (
    "arn:aws:cloudformation:us-east-1:111122223333:stack/{stack}/0a1b2c3d-0000-4000-8000-000000000001"
)
LIVE_STACK_ID = (
    "arn:aws:cloudformation:us-east-1:111122223333:stack/{stack}/0a1b2c3d-0000-4000-8000-000000000002"
)

FS = "fs-0123456789abcdef0"
FS_SG = "sg-0fa5e000000000001"
SUBNET_1 = "subnet-0a000000000000001"
SUBNET_2 = "subnet-0a000000000000002"
VPC = "vpc-0b000000000000001"


@cache
def session() -> boto3.session.Session:
    return boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)


def arn(service: str, resource: str) -> str:
    return f"arn:aws:{service}:{REGION}:{ACCOUNT_ID}:{resource}"


def tagged(resource_arn: str, logical_id: str, *, environment: str, **tags: str) -> dict[str, Any]:
    """A listing's entry: the tags every resource of ``training-<environment>``'s old deployment carries."""
    stack = f"training-{environment}"
    every = {
        "project": "cdk-training-clusters",
        "environment": environment,
        "aws:cloudformation:stack-name": stack,
        "aws:cloudformation:stack-id": OLD_STACK_ID.format(stack=stack),
        "aws:cloudformation:logical-id": logical_id,
        **tags,
    }
    return {"ResourceARN": resource_arn, "Tags": [{"Key": k, "Value": v} for k, v in every.items()]}


PROMETHEUS_VOLUME = "vol-0e000000000000001"
GRAFANA_VOLUME = "vol-0e000000000000002"


def claim_volume(
    volume_id: str,
    environment: str,
    *,
    claim: str = "prometheus-db-prometheus-0",
    size: int = 50,
    attached_to: str = "",
    **tags: str,
) -> dict[str, Any]:
    """A DescribeVolumes entry: a volume the EBS CSI driver made for a claim, with the StorageClass's tags."""
    every = {
        "project": "cdk-training-clusters",
        "environment": environment,
        "ebs.csi.aws.com/cluster": "true",
        "CSIVolumeName": f"pvc-{volume_id}",
        "kubernetes.io/created-for/pvc/name": claim,
        "kubernetes.io/created-for/pvc/namespace": "monitoring",
        **tags,
    }
    volume: dict[str, Any] = {
        "VolumeId": volume_id,
        "Size": size,
        "VolumeType": "gp3",
        "State": "in-use" if attached_to else "available",
        "AvailabilityZone": "us-east-1a",
        "Encrypted": True,
        "Tags": [{"Key": k, "Value": v} for k, v in every.items() if v != "-"],
    }
    if attached_to:
        volume["Attachments"] = [{"InstanceId": attached_to, "VolumeId": volume_id, "State": "attached"}]
    return volume


def look_alikes(environment: str) -> list[dict[str, Any]]:
    """Resources a careless filter would take for ``environment``'s: another environment whose name
    extends it, the same tags on a stack ParallelCluster made, another project."""
    other = f"{environment}-2"
    return [
        tagged(arn("fsx", "file-system/fs-0ffffffffffffff01"), "SharedStorageA8297BFB", environment=other),
        tagged(arn("ec2", "vpc/vpc-0fffffffffffff001"), "Network6E62CE96", environment=other),
        tagged(
            arn("ec2", "security-group/sg-0fffffffffffff002"),
            "HeadNodeSecurityGroup",
            environment=environment,
            **{"aws:cloudformation:stack-name": "p5-cluster"},
        ),
        tagged(
            arn("logs", "log-group:/other/project"), "Logs", environment=environment, project="someone-else"
        ),
    ]


def network_storage_listing() -> list[dict[str, Any]]:
    """What network-storage keeps after cdk destroy (see tests/test_destroy.py), with look-alikes."""
    env = "network-storage"
    return [
        tagged(arn("ec2", f"vpc/{VPC}"), "Network6E62CE96", environment=env),
        tagged(
            arn("logs", "log-group:training-network-storage-NetworkFlowLogs2BEC3212-AbCdEf"),
            "NetworkFlowLogs2BEC3212",
            environment=env,
        ),
        look_alikes(env)[0],
        tagged(arn("fsx", f"file-system/{FS}"), "SharedStorageA8297BFB", environment=env),
        tagged(arn("ec2", f"subnet/{SUBNET_1}"), "NetworkPrivateSubnet1Subnet80FBBF93", environment=env),
        *look_alikes(env)[1:],
        tagged(arn("ec2", f"security-group/{FS_SG}"), "SharedStorageSecurityGroup8BDD17A1", environment=env),
    ]


#: The parameter of each call that names what it acts on (what ``Account.calls`` records).
NAMING_PARAMETERS = (
    "StackName", "FileSystemId", "FileSystemIds", "BackupIds", "DBClusterIdentifier", "DBInstanceIdentifier",
    "DBSubnetGroupName", "DBClusterParameterGroupName", "Bucket", "logGroupName", "SecretId", "KeyId",
    "GroupId", "SubnetId", "VpcId", "VolumeId",
)  # fmt: skip


class Account:
    """A fake account: each client's answers queued in the order cleanup asks."""

    def __init__(self) -> None:
        self.clients = CleanupClients.from_session(session(), REGION)
        self.calls: list[str] = []
        for client in vars(self.clients).values():  # before the Stubbers: sees every call
            client.meta.events.register("before-parameter-build.*.*", self._record)
        self.stubs = {name: Stubber(client) for name, client in vars(self.clients).items()}

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        named = [params[p] for p in NAMING_PARAMETERS if p in params]
        self.calls.append(f"{model.name} {named[0] if named else ''}".strip())

    def answer(self, client: str, operation: str, response: dict[str, Any], expected: dict[str, Any]) -> None:
        self.stubs[client].add_response(operation, response, expected)

    def error(self, client: str, operation: str, code: str, message: str, expected: dict[str, Any]) -> None:
        self.stubs[client].add_client_error(
            operation,
            service_error_code=code,
            service_message=message,
            http_status_code=400,
            expected_params=expected,
        )

    def listing(
        self,
        environment: str,
        resources: list[dict[str, Any]],
        *,
        stack_id: str | None = None,
        volumes: list[dict[str, Any]] | None = None,
        volume_pages: bool = True,
    ) -> None:
        """The stack's state, then the tagged resources, on one page, then the claims' volumes on one page
        (``volume_pages=False``: the test queues them itself)."""
        stack = f"training-{environment}"
        if stack_id is None:
            self.error(
                "cloudformation",
                "describe_stacks",
                "ValidationError",
                f"Stack with id {stack} does not exist",
                {"StackName": stack},
            )
        else:
            self.answer(
                "cloudformation",
                "describe_stacks",
                {
                    "Stacks": [
                        {
                            "StackName": stack,
                            "StackId": stack_id,
                            "CreationTime": NOW,
                            "StackStatus": "CREATE_COMPLETE",
                        }
                    ]
                },
                {"StackName": stack},
            )
        self.answer(
            "tagging",
            "get_resources",
            {"ResourceTagMappingList": resources, "PaginationToken": ""},
            {
                "TagFilters": [
                    {"Key": "project", "Values": ["cdk-training-clusters"]},
                    {"Key": "environment", "Values": [environment]},
                    {"Key": "aws:cloudformation:stack-name", "Values": [stack]},
                ],
                "ResourceTypeFilters": [kind.tagging_type for kind in Kind if kind is not Kind.EBS_VOLUME],
                "ResourcesPerPage": 100,
            },
        )
        if volume_pages:
            self.volumes(environment, volumes or [])

    def volumes(
        self, environment: str, volumes: list[dict[str, Any]], *, next_token: str = "", token: str = ""
    ) -> None:
        """One page of DescribeVolumes for the environment's StorageClass tags."""
        expected: dict[str, Any] = {
            "Filters": [
                {"Name": "tag:project", "Values": ["cdk-training-clusters"]},
                {"Name": "tag:environment", "Values": [environment]},
                {"Name": "tag-key", "Values": ["ebs.csi.aws.com/cluster"]},
            ],
            "MaxResults": 500,
        }
        if token:
            expected["NextToken"] = token
        response: dict[str, Any] = {"Volumes": volumes}
        if next_token:
            response["NextToken"] = next_token
        self.answer("ec2", "describe_volumes", response, expected)

    def file_system(
        self,
        file_system_id: str,
        deployment: str,
        capacity: int,
        throughput: int | None = None,
        *,
        lifecycle: str = "AVAILABLE",
    ) -> None:
        lustre: dict[str, Any] = {"DeploymentType": deployment}
        if throughput is not None:
            lustre["PerUnitStorageThroughput"] = throughput
        self.answer(
            "fsx",
            "describe_file_systems",
            {
                "FileSystems": [
                    {
                        "FileSystemId": file_system_id,
                        "FileSystemType": "LUSTRE",
                        "Lifecycle": lifecycle,
                        "StorageCapacity": capacity,
                        "StorageType": "SSD",
                        "VpcId": VPC,
                        "SubnetIds": [SUBNET_1],
                        "LustreConfiguration": lustre,
                    }
                ]
            },
            {"FileSystemIds": [file_system_id]},
        )

    def file_system_gone(self, file_system_id: str) -> None:
        self.error(
            "fsx",
            "describe_file_systems",
            "FileSystemNotFound",
            "File system not found",
            {"FileSystemIds": [file_system_id]},
        )

    def deleted(
        self, client: str, operation: str, expected: dict[str, Any], response: dict[str, Any] | None = None
    ) -> None:
        self.answer(client, operation, response or {}, expected)

    def run(
        self, monkeypatch: pytest.MonkeyPatch, file: str | Path, *options: str, stdin: str = ""
    ) -> tuple[int, str]:
        """``training-clusters cleanup FILE OPTIONS`` against this account; (exit status, standard output)."""
        monkeypatch.setattr(CleanupClients, "from_session", classmethod(lambda cls, s, r: self.clients))
        monkeypatch.setattr(cleanup, "utc_now", lambda: NOW)
        monkeypatch.setattr(cleanup, "POLL_SECONDS", 0)
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example")
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        path = file if isinstance(file, Path) else ENVIRONMENTS / f"{file}.yaml"
        out = io.StringIO()
        for stub in self.stubs.values():
            stub.activate()
        try:
            status = cli.main(["cleanup", str(path), *options], stdout=out)
        finally:
            for stub in self.stubs.values():
                stub.deactivate()
        for stub in self.stubs.values():
            stub.assert_no_pending_responses()
        if "json" not in options:  # a document for scripts, not prose
            assert_fits(out.getvalue())
        return status, out.getvalue()


def network_storage_account() -> Account:
    account = Account()
    account.listing("network-storage", network_storage_listing())
    account.file_system(FS, "SCRATCH_2", 1200)
    return account


FLOW_LOGS = "training-network-storage-NetworkFlowLogs2BEC3212-AbCdEf"
LISTED = [
    "DescribeStacks training-network-storage",
    "GetResources",
    "DescribeVolumes",
    f"DescribeFileSystems ['{FS}']",
]


# --------------------------------------------------------------------------------------------------
# the dry run


def test_the_dry_run_lists_what_stays_and_its_cost_and_deletes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    account = network_storage_account()

    status, text = account.run(monkeypatch, "network-storage")

    assert status == 0
    assert text == (
        "training-network-storage in us-east-1: 5 resource(s) left behind\n"
        "\n"
        "resource                                        id                                                       a month  plan\n"
        "----------------------------------------------  -------------------------------------------------------  -------  ------\n"
        "FSx for Lustre file system: SCRATCH_2, 1200     fs-0123456789abcdef0                                     $168.00  delete\n"
        "GiB\n"
        "log group                                       training-network-storage-NetworkFlowLogs2BEC3212-AbCdEf  by use   delete\n"
        "security group                                  sg-0fa5e000000000001                                     free     delete\n"
        "subnet                                          subnet-0a000000000000001                                 free     delete\n"
        "VPC                                             vpc-0b000000000000001                                    free     delete\n"
        "\n"
        "- about $168.00 a month (us-east-1 list prices of 2026-12), plus what is billed by use\n"
        "- not listed: the log groups Lambda made for CDK's handlers (/aws/lambda/training-network-storage-*), which carry no\n"
        "  tags; backups and snapshots\n"
        "\n"
        "dry run: nothing deleted. --delete deletes what the plan column says (it asks for the environment's name; --yes for\n"
        "scripts).\n"
    )
    assert account.calls == LISTED  # nothing deleted, the other environments' resources not even described


def test_the_dry_run_as_json_gives_every_column(monkeypatch: pytest.MonkeyPatch) -> None:
    status, text = network_storage_account().run(monkeypatch, "network-storage", "--output", "json")

    document = json.loads(text)
    assert status == 0
    assert (document["stack"], document["deleted"], document["monthly_usd_known"]) == (
        "training-network-storage",
        False,
        168.0,
    )
    assert document["resources"][0] == {
        "kind": "file_system",
        "resource": "FSx for Lustre file system",
        "id": FS,
        "name": FS,
        "arn": arn("fsx", f"file-system/{FS}"),
        "logical_id": "SharedStorageA8297BFB",
        "detail": "SCRATCH_2, 1200 GiB",
        "monthly_usd": 168.0,
        "cost": "$168.00",
        "delete": True,
        "plan": "delete",
    }
    assert [r["id"] for r in document["resources"]] == [FS, FLOW_LOGS, FS_SG, SUBNET_1, VPC]


def test_resources_of_the_deployed_stack_are_in_use_not_left_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deployed again after a destroy: the new stack's resources stay out, the earlier deployment's are left."""
    live = LIVE_STACK_ID.format(stack="training-network-storage")
    in_use = tagged(
        arn("fsx", "file-system/fs-0aaaaaaaaaaaaaaa1"),
        "SharedStorageA8297BFB",
        environment="network-storage",
        **{"aws:cloudformation:stack-id": live},
    )
    account = Account()
    account.listing("network-storage", [in_use, *network_storage_listing()], stack_id=live)
    account.file_system(FS, "SCRATCH_2", 1200)

    status, text = account.run(monkeypatch, "network-storage")

    assert status == 0
    assert "fs-0aaaaaaaaaaaaaaa1" not in text
    assert (
        "- stack training-network-storage exists (CREATE_COMPLETE): its 1 resource(s) are in use and not listed; cdk destroy\n"
        "  first to clean up everything\n"
    ) in text
    assert text.startswith("training-network-storage in us-east-1: 5 resource(s) left behind\n")


def without_stack_id(entry: dict[str, Any], value: str | None = None) -> dict[str, Any]:
    """A listing entry whose aws:cloudformation:stack-id tag is missing (or, with ``value``, says that)."""
    tags = [t for t in entry["Tags"] if t["Key"] != "aws:cloudformation:stack-id"]
    if value is not None:
        tags.append({"Key": "aws:cloudformation:stack-id", "Value": value})
    return {**entry, "Tags": tags}


UNTAGGED_FS = "fs-0ccccccccccccccc1"


@pytest.mark.parametrize("stack_id_tag", [None, "", "  "], ids=["missing", "empty", "blank"])
def test_while_the_stack_exists_a_resource_without_its_stack_id_is_never_listed_or_deleted(
    stack_id_tag: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39: a resource of the environment's stack whose stack-id tag is missing could be the live stack's
    own; with --delete --yes it is neither described nor deleted (the Stubber refuses any call not queued),
    while the earlier deployment's resources are."""
    live = LIVE_STACK_ID.format(stack="training-network-storage")
    unproven = without_stack_id(
        tagged(
            arn("fsx", f"file-system/{UNTAGGED_FS}"), "SharedStorageA8297BFB", environment="network-storage"
        ),
        stack_id_tag,
    )
    account = Account()
    account.listing("network-storage", [unproven, *network_storage_listing()], stack_id=live)
    account.file_system(FS, "SCRATCH_2", 1200)
    queue_network_storage_deletion(account)

    status, text = account.run(monkeypatch, "network-storage", "--delete", "--yes")

    assert status == 0
    assert UNTAGGED_FS not in text and UNTAGGED_FS not in " ".join(account.calls)
    assert "its 1 resource(s) are in use and not listed" in text


def test_without_a_stack_a_resource_without_a_stack_id_is_left_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other side of the boundary: no stack of the environment exists, so nothing can be using it."""
    unproven = without_stack_id(
        tagged(
            arn("fsx", f"file-system/{UNTAGGED_FS}"), "SharedStorageA8297BFB", environment="network-storage"
        )
    )
    account = Account()
    account.listing("network-storage", [unproven, *network_storage_listing()])
    account.file_system(FS, "SCRATCH_2", 1200)  # described in id order
    account.file_system(UNTAGGED_FS, "SCRATCH_2", 1200)

    status, text = account.run(monkeypatch, "network-storage")

    assert status == 0
    assert text.startswith("training-network-storage in us-east-1: 6 resource(s) left behind\n")
    assert f"{UNTAGGED_FS}  " in text


@pytest.mark.parametrize(
    "stacks",
    [
        [
            {
                "StackName": "training-network-storage",
                "CreationTime": NOW,
                "StackStatus": "UPDATE_ROLLBACK_FAILED",
            }
        ],
        [],
    ],
    ids=["stack without an id", "empty answer"],
)
def test_a_stack_whose_id_is_not_known_holds_every_resource(
    stacks: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even the earlier deployment's resources stay out: which are the live stack's cannot be told."""
    account = Account()
    account.answer(
        "cloudformation", "describe_stacks", {"Stacks": stacks}, {"StackName": "training-network-storage"}
    )
    account.stubs["tagging"].add_response(
        "get_resources", {"ResourceTagMappingList": network_storage_listing(), "PaginationToken": ""}
    )
    account.volumes("network-storage", [claim_volume(PROMETHEUS_VOLUME, "network-storage")])

    status, text = account.run(monkeypatch, "network-storage", "--delete", "--yes")

    assert status == 0
    assert text.startswith("training-network-storage in us-east-1: nothing left behind\n")
    assert "its 6 resource(s) are in use and not listed" in text  # the volume too
    assert account.calls == ["DescribeStacks training-network-storage", "GetResources", "DescribeVolumes"]


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("Throttling", "Rate exceeded"),
        ("ValidationError", "1 validation error detected: Value at 'stackName' failed to satisfy constraint"),
        ("InternalFailure", "internal error"),
    ],
)
def test_when_the_stack_cannot_be_asked_for_nothing_is_listed_or_deleted(
    code: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stub failing: only CloudFormation's "does not exist" means no stack; any other error stops the run
    before the listing (GetResources is never called, nothing is deleted)."""
    account = Account()
    account.error(
        "cloudformation", "describe_stacks", code, message, {"StackName": "training-network-storage"}
    )

    status, text = account.run(monkeypatch, "network-storage", "--delete", "--yes")

    assert (status, text) == (2, "")
    assert unwrapped(capsys.readouterr().err).startswith(
        f"error: cannot list what training-network-storage left in us-east-1: An error occurred ({code})"
    )
    assert account.calls == ["DescribeStacks training-network-storage"]


def test_when_the_listing_fails_after_the_stack_is_known_nothing_is_deleted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    account = Account()
    account.error(
        "cloudformation",
        "describe_stacks",
        "ValidationError",
        "Stack with id training-network-storage does not exist",
        {"StackName": "training-network-storage"},
    )
    account.stubs["tagging"].add_client_error("get_resources", "AccessDeniedException", "not authorized")

    status, text = account.run(monkeypatch, "network-storage", "--delete", "--yes")

    assert (status, text) == (2, "")
    assert account.calls == ["DescribeStacks training-network-storage", "GetResources"]
    assert "AccessDeniedException" in unwrapped(capsys.readouterr().err)


def test_a_region_without_prices_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    document = yaml.safe_load((ENVIRONMENTS / "network-storage.yaml").read_text())
    document.update(region="eu-west-1", availability_zones=["eu-west-1a", "eu-west-1b"])
    (tmp_path / "network-storage.yaml").write_text(yaml.safe_dump(document))
    account = Account()
    account.clients = CleanupClients.from_session(session(), "eu-west-1")
    account.stubs = {name: Stubber(client) for name, client in vars(account.clients).items()}
    account.listing(
        "network-storage",
        [
            tagged(
                f"arn:aws:fsx:eu-west-1:{ACCOUNT_ID}:file-system/{FS}",
                "SharedStorageA8297BFB",
                environment="network-storage",
            )
        ],
    )
    account.file_system(FS, "SCRATCH_2", 1200)

    status, text = account.run(monkeypatch, tmp_path / "network-storage.yaml")

    assert status == 0
    assert (
        "\nFSx for Lustre file system: SCRATCH_2, 1200 GiB  fs-0123456789abcdef0  unknown  delete\n" in text
    )
    assert "- monthly cost unknown: the price table holds us-east-1 only, not eu-west-1\n" in text


# --------------------------------------------------------------------------------------------------
# deleting


def queue_network_storage_deletion(account: Account, *, security_group_gone: bool = False) -> None:
    """The answers to deleting network-storage's leftovers (``security_group_gone``: EC2 says the group no
    longer exists, as when something else deleted it after the listing)."""
    account.deleted(
        "fsx",
        "delete_file_system",
        {"FileSystemId": FS},
        {"FileSystemId": FS, "Lifecycle": "DELETING"},
    )
    account.file_system(FS, "SCRATCH_2", 1200, lifecycle="DELETING")
    account.file_system_gone(FS)
    account.deleted("logs", "delete_log_group", {"logGroupName": FLOW_LOGS})
    if security_group_gone:
        account.error(
            "ec2",
            "delete_security_group",
            "InvalidGroup.NotFound",
            f"The security group '{FS_SG}' does not exist",
            {"GroupId": FS_SG},
        )
    else:
        account.deleted("ec2", "delete_security_group", {"GroupId": FS_SG})
    account.deleted("ec2", "delete_subnet", {"SubnetId": SUBNET_1})
    account.deleted("ec2", "delete_vpc", {"VpcId": VPC})


NETWORK_STORAGE_DELETED = [
    f"DeleteFileSystem {FS}",
    f"DescribeFileSystems ['{FS}']",
    f"DescribeFileSystems ['{FS}']",
    f"DeleteLogGroup {FLOW_LOGS}",
    f"DeleteSecurityGroup {FS_SG}",
    f"DeleteSubnet {SUBNET_1}",
    f"DeleteVpc {VPC}",
]


def test_delete_asks_for_the_environment_name_then_deletes_in_order_the_vpc_last(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SCRATCH file system without --backup is deleted; the file system goes before its security group and
    subnet, the VPC last; nothing of the look-alikes is touched (the Stubber refuses any other parameter)."""
    account = network_storage_account()
    queue_network_storage_deletion(account)

    status, text = account.run(monkeypatch, "network-storage", "--delete", stdin="network-storage\n")

    assert status == 0
    assert (
        unwrapped(capsys.readouterr().err)
        == "type the environment's name (network-storage) to delete 5 resource(s): "
    )
    assert account.calls == [*LISTED, *NETWORK_STORAGE_DELETED]
    assert text.endswith(
        "\n\n"
        f"deleted file system {FS} (gone after 0 s)\n"
        f"deleted log group {FLOW_LOGS}\n"
        f"deleted security group {FS_SG}\n"
        f"deleted subnet {SUBNET_1}\n"
        f"deleted VPC {VPC}\n"
    )


@pytest.mark.parametrize(
    "typed", ["network-storage-2\n", "yes\n", ""], ids=["another name", "yes", "nothing"]
)
def test_delete_refuses_without_the_environment_name(monkeypatch: pytest.MonkeyPatch, typed: str) -> None:
    account = network_storage_account()

    status, text = account.run(monkeypatch, "network-storage", "--delete", stdin=typed)

    assert status == 1
    assert text.endswith("\n\nnot confirmed: nothing deleted\n")
    assert account.calls == LISTED


def test_yes_deletes_without_asking_and_json_lists_the_steps(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    account = network_storage_account()
    queue_network_storage_deletion(account)

    status, text = account.run(monkeypatch, "network-storage", "--delete", "--yes", "--output", "json")

    document = json.loads(text)
    assert (status, unwrapped(capsys.readouterr().err)) == (0, "")
    assert document["deleted"] is True
    assert document["steps"] == [
        f"deleted file system {FS} (gone after 0 s)",
        f"deleted log group {FLOW_LOGS}",
        f"deleted security group {FS_SG}",
        f"deleted subnet {SUBNET_1}",
        f"deleted VPC {VPC}",
    ]
    assert account.calls == [*LISTED, *NETWORK_STORAGE_DELETED]


def test_yes_without_delete_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli.main(["cleanup", str(ENVIRONMENTS / "network-storage.yaml"), "--yes"], stdout=io.StringIO()) == 2
    )
    assert (
        unwrapped(capsys.readouterr().err)
        == "error: training-clusters cleanup: --yes confirms --delete; give --delete too\n"
    )


def test_a_scratch_file_system_cannot_be_backed_up_so_it_and_its_network_stay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    account = network_storage_account()
    account.deleted("logs", "delete_log_group", {"logGroupName": FLOW_LOGS})

    status, text = account.run(
        monkeypatch, "network-storage", "--delete", "--yes", "--backup", "--output", "json"
    )

    document = json.loads(text)
    assert status == 0
    assert {r["id"]: r["plan"] for r in document["resources"]} == {
        FS: "keep: SCRATCH_2 cannot be backed up (FSx backs up PERSISTENT file systems only); run without --backup to "
        "delete it, after copying what it holds to S3",
        FLOW_LOGS: "delete",
        FS_SG: f"keep: the kept file system {FS} uses it",
        SUBNET_1: f"keep: the kept file system {FS} uses it",
        VPC: f"keep: the kept file system {FS} uses it",
    }
    assert account.calls == [*LISTED, f"DeleteLogGroup {FLOW_LOGS}"]  # no backup asked of FSx


# --- hyperpod-team: a PERSISTENT_2 file system, the accounting database, the lifecycle buckets --------------

TEAM = "hyperpod-team"
TEAM_FS = "fs-0c000000000000001"
DB = "training-hyperpod-team-accounting8979588e-q1w2e3r4t5y6"
WRITER = "training-hyperpod-team-accountingwriter0bdcda7b-a1b2c3d4e5f6"
SUBNET_GROUP = "training-hyperpod-team-accountingsubnets65c94705-zxcvbnmasdfg"
PARAMETERS = "training-hyperpod-team-accountingparameters23e7102d-poiuytrewq12"
KEY = "1234abcd-12ab-34cd-56ef-1234567890ab"
DB_SG = "sg-0db0000000000001"
SECRET = arn("secretsmanager", "secret:AccountingSecret64A6CC0D-abcdefgh12-AbCdEf")
SLURMDBD_SECRET = arn("secretsmanager", "secret:AccountingSlurmdbdSecret490707E2-ijklmnop34-GhIjKl")
LIFECYCLE = "sagemaker-training-hyperpod-team-hyperpodlifecy-111122223333-us-east-1"
ACCESS_LOGS = "training-hyperpod-team-hyperpodlifecyclebucketacc-1a2b3c4d5e6f"
TEAM_FLOW_LOGS = "training-hyperpod-team-NetworkFlowLogs2BEC3212-XyZaBc"
USER_HANDLER_LOGS = "training-hyperpod-team-AccountingUserHandlerLogs690F9286-DeFgHi"
RDS_LOGS = [f"/aws/rds/cluster/{DB}/{kind}" for kind in ("audit", "error", "general", "slowquery")]
SNAPSHOT = f"{DB}-final-202612020930"
BACKUP = "backup-0d000000000000001"


def team_listing() -> list[dict[str, Any]]:
    """Everything hyperpod-team's template retains (tests/test_destroy.py), in no particular order."""

    def mine(resource_arn: str, logical_id: str) -> dict[str, Any]:
        return tagged(resource_arn, logical_id, environment=TEAM)

    return [
        mine(arn("rds", f"cluster:{DB}"), "Accounting8979588E"),
        mine(f"arn:aws:s3:::{ACCESS_LOGS}", "HyperPodLifecycleBucketAccessLogsCB5BC6C0"),
        mine(arn("ec2", f"vpc/{VPC}"), "Network6E62CE96"),
        *[
            mine(arn("logs", f"log-group:{name}:*"), f"Accounting{name.rsplit('/', 1)[1].title()}Log")
            for name in RDS_LOGS
        ],
        mine(arn("kms", f"key/{KEY}"), "AccountingKey4D75B93F"),
        mine(arn("rds", f"cluster-pg:{PARAMETERS}"), "AccountingParameters23E7102D"),
        mine(SECRET, "AccountingSecret64A6CC0D"),
        mine(arn("ec2", f"security-group/{DB_SG}"), "AccountingSecurityGroupBEC88DBC"),
        mine(SLURMDBD_SECRET, "AccountingSlurmdbdSecret490707E2"),
        mine(arn("rds", f"subgrp:{SUBNET_GROUP}"), "AccountingSubnets65C94705"),
        mine(arn("logs", f"log-group:{USER_HANDLER_LOGS}"), "AccountingUserHandlerLogs690F9286"),
        mine(arn("rds", f"db:{WRITER}"), "AccountingWriter0BDCDA7B"),
        mine(f"arn:aws:s3:::{LIFECYCLE}", "HyperPodLifecycleBucket266C8849"),
        mine(arn("logs", f"log-group:{TEAM_FLOW_LOGS}"), "NetworkFlowLogs2BEC3212"),
        mine(arn("ec2", f"subnet/{SUBNET_1}"), "NetworkPrivateSubnet1Subnet80FBBF93"),
        mine(arn("ec2", f"subnet/{SUBNET_2}"), "NetworkPrivateSubnet2SubnetF8FE1BD8"),
        mine(arn("fsx", f"file-system/{TEAM_FS}"), "SharedStorageA8297BFB"),
        mine(arn("ec2", f"security-group/{FS_SG}"), "SharedStorageSecurityGroup8BDD17A1"),
        *look_alikes(TEAM),
    ]


def team_account(*, scheduled: bool = False) -> Account:
    """hyperpod-team's leftovers; ``scheduled``: a second run, after a first scheduled the key and secrets."""
    account = Account()
    account.listing(TEAM, team_listing())
    account.file_system(TEAM_FS, "PERSISTENT_2", 1200, 125)
    account.answer(
        "rds",
        "describe_db_clusters",
        {
            "DBClusters": [
                {
                    "DBClusterIdentifier": DB,
                    "Status": "available",
                    "Engine": "aurora-mysql",
                    "EngineVersion": "8.0.mysql_aurora.3.08.2",
                    "DeletionProtection": True,
                    "DBClusterMembers": [{"DBInstanceIdentifier": WRITER, "IsClusterWriter": True}],
                    "VpcSecurityGroups": [{"VpcSecurityGroupId": DB_SG, "Status": "active"}],
                    "DBSubnetGroup": SUBNET_GROUP,
                    "DBClusterParameterGroup": PARAMETERS,
                    "KmsKeyId": arn("kms", f"key/{KEY}"),
                    "ServerlessV2ScalingConfiguration": {"MinCapacity": 0.5, "MaxCapacity": 2.0},
                }
            ]
        },
        {"DBClusterIdentifier": DB},
    )
    for secret in (SECRET, SLURMDBD_SECRET):
        marked = {"DeletedDate": NOW} if scheduled else {}
        account.answer("secretsmanager", "describe_secret", {"ARN": secret, **marked}, {"SecretId": secret})
    key: dict[str, Any] = {"KeyId": KEY, "KeyState": "Enabled"}
    if scheduled:
        key.update(KeyState="PendingDeletion", DeletionDate=datetime(2027, 1, 1, tzinfo=UTC))
    account.answer("kms", "describe_key", {"KeyMetadata": key}, {"KeyId": KEY})
    return account


TEAM_LISTED = [
    f"DescribeStacks training-{TEAM}",
    "GetResources",
    "DescribeVolumes",
    f"DescribeFileSystems ['{TEAM_FS}']",
    f"DescribeDBClusters {DB}",
    f"DescribeSecret {SECRET}",
    f"DescribeSecret {SLURMDBD_SECRET}",
    f"DescribeKey {KEY}",
]


def test_a_protected_database_stays_with_everything_it_uses_unless_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    status, text = team_account().run(monkeypatch, TEAM, "--output", "json")

    document = json.loads(text)
    kept_db = f"keep: used by the kept database {DB}"
    network = f"keep: the kept database {DB} uses it"
    assert status == 0
    assert [(r["resource"], r["id"], r["cost"], r["plan"]) for r in document["resources"]] == [
        ("FSx for Lustre file system", TEAM_FS, "$174.00", "delete"),
        ("database instance", WRITER, "with its cluster", kept_db),
        (
            "Aurora database cluster",
            DB,
            "at least $43.80 + storage",
            "keep: deletion protection is on (--disable-deletion-protection turns it off)",
        ),
        ("database subnet group", SUBNET_GROUP, "free", kept_db),
        ("database parameter group", PARAMETERS, "free", kept_db),
        ("S3 bucket", LIFECYCLE, "by use", "delete"),
        ("S3 bucket", ACCESS_LOGS, "by use", "delete"),  # after the bucket that logs into it
        *[("log group", name, "by use", kept_db) for name in RDS_LOGS],
        ("log group", USER_HANDLER_LOGS, "by use", "delete"),
        ("log group", TEAM_FLOW_LOGS, "by use", "delete"),
        ("secret", SECRET, "$0.40", kept_db),
        ("secret", SLURMDBD_SECRET, "$0.40", kept_db),
        ("KMS key", KEY, "$1.00", kept_db),
        ("security group", DB_SG, "free", kept_db),
        ("security group", FS_SG, "free", network),
        ("subnet", SUBNET_1, "free", network),
        ("subnet", SUBNET_2, "free", network),
        ("VPC", VPC, "free", network),
    ]
    assert document["resources"][2]["detail"] == "aurora-mysql, 0.5 ACU minimum, deletion protection on"
    assert document["monthly_usd_known"] == 219.6  # 174 + 43.80 + 2 x 0.40 + 1


def test_backup_then_delete_everything_in_order_the_database_after_turning_its_protection_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--backup: FSx backs the PERSISTENT_2 file system up (waited for) before deleting it, and the database
    leaves a final snapshot, whose KMS key stays; buckets are emptied version by version, page by page."""
    account = team_account()
    tags = [
        {"Key": "project", "Value": "cdk-training-clusters"},
        {"Key": "environment", "Value": TEAM},
        {"Key": "cost-centre", "Value": "ml-platform"},
        {"Key": "Name", "Value": f"{TEAM} before cleanup"},
    ]
    backup = {
        "BackupId": BACKUP,
        "Type": "USER_INITIATED",
        "CreationTime": NOW,
        "FileSystem": {"FileSystemId": TEAM_FS},
    }
    account.answer(
        "fsx",
        "create_backup",
        {"Backup": {**backup, "Lifecycle": "CREATING"}},
        {"FileSystemId": TEAM_FS, "Tags": tags},
    )
    account.answer(
        "fsx", "describe_backups", {"Backups": [{**backup, "Lifecycle": "CREATING"}]}, {"BackupIds": [BACKUP]}
    )
    account.answer(
        "fsx",
        "describe_backups",
        {"Backups": [{**backup, "Lifecycle": "AVAILABLE"}]},
        {"BackupIds": [BACKUP]},
    )
    account.deleted("fsx", "delete_file_system", {"FileSystemId": TEAM_FS})
    account.file_system_gone(TEAM_FS)
    account.deleted(
        "rds",
        "modify_db_cluster",
        {"DBClusterIdentifier": DB, "DeletionProtection": False, "ApplyImmediately": True},
    )
    account.deleted("rds", "delete_db_instance", {"DBInstanceIdentifier": WRITER})
    account.deleted(
        "rds", "delete_db_cluster", {"DBClusterIdentifier": DB, "FinalDBSnapshotIdentifier": SNAPSHOT}
    )
    account.answer(
        "rds",
        "describe_db_clusters",
        {"DBClusters": [{"DBClusterIdentifier": DB, "Status": "deleting"}]},
        {"DBClusterIdentifier": DB},
    )
    account.error(
        "rds",
        "describe_db_clusters",
        "DBClusterNotFoundFault",
        f"DBCluster {DB} not found.",
        {"DBClusterIdentifier": DB},
    )
    account.deleted("rds", "delete_db_subnet_group", {"DBSubnetGroupName": SUBNET_GROUP})
    account.deleted("rds", "delete_db_cluster_parameter_group", {"DBClusterParameterGroupName": PARAMETERS})
    # the lifecycle bucket: two versions of a script and the delete marker of a removed one
    account.answer(
        "s3",
        "list_object_versions",
        {
            "IsTruncated": False,
            "Versions": [
                {"Key": "on_create.sh", "VersionId": "v2"},
                {"Key": "on_create.sh", "VersionId": "v1"},
            ],
            "DeleteMarkers": [{"Key": "old.sh", "VersionId": "m1"}],
        },
        {"Bucket": LIFECYCLE},
    )
    account.deleted(
        "s3",
        "delete_objects",
        {
            "Bucket": LIFECYCLE,
            "Delete": {
                "Objects": [
                    {"Key": "on_create.sh", "VersionId": "v2"},
                    {"Key": "on_create.sh", "VersionId": "v1"},
                    {"Key": "old.sh", "VersionId": "m1"},
                ],
                "Quiet": True,
            },
        },
    )
    account.deleted("s3", "delete_bucket", {"Bucket": LIFECYCLE})
    # the access-log bucket: two pages
    account.answer(
        "s3",
        "list_object_versions",
        {
            "IsTruncated": True,
            "NextKeyMarker": "access-logs/b",
            "NextVersionIdMarker": "null",
            "Versions": [{"Key": "access-logs/a", "VersionId": "null"}],
        },
        {"Bucket": ACCESS_LOGS},
    )
    account.deleted(
        "s3",
        "delete_objects",
        {
            "Bucket": ACCESS_LOGS,
            "Delete": {"Objects": [{"Key": "access-logs/a", "VersionId": "null"}], "Quiet": True},
        },
    )
    account.answer(
        "s3",
        "list_object_versions",
        {"IsTruncated": False, "Versions": [{"Key": "access-logs/b", "VersionId": "null"}]},
        {"Bucket": ACCESS_LOGS, "KeyMarker": "access-logs/b", "VersionIdMarker": "null"},
    )
    account.deleted(
        "s3",
        "delete_objects",
        {
            "Bucket": ACCESS_LOGS,
            "Delete": {"Objects": [{"Key": "access-logs/b", "VersionId": "null"}], "Quiet": True},
        },
    )
    account.deleted("s3", "delete_bucket", {"Bucket": ACCESS_LOGS})
    for name in [*RDS_LOGS, USER_HANDLER_LOGS, TEAM_FLOW_LOGS]:
        account.deleted("logs", "delete_log_group", {"logGroupName": name})
    for secret in (SECRET, SLURMDBD_SECRET):
        account.deleted("secretsmanager", "delete_secret", {"SecretId": secret, "RecoveryWindowInDays": 30})
    for group in (DB_SG, FS_SG):
        account.deleted("ec2", "delete_security_group", {"GroupId": group})
    for subnet in (SUBNET_1, SUBNET_2):
        account.deleted("ec2", "delete_subnet", {"SubnetId": subnet})
    account.deleted("ec2", "delete_vpc", {"VpcId": VPC})

    status, text = account.run(
        monkeypatch, TEAM, "--delete", "--backup", "--disable-deletion-protection", stdin=f"{TEAM}\n"
    )

    assert status == 0
    assert account.calls == [
        *TEAM_LISTED,
        f"CreateBackup {TEAM_FS}",
        f"DescribeBackups ['{BACKUP}']",
        f"DescribeBackups ['{BACKUP}']",
        f"DeleteFileSystem {TEAM_FS}",
        f"DescribeFileSystems ['{TEAM_FS}']",
        f"ModifyDBCluster {DB}",
        f"DeleteDBInstance {WRITER}",
        f"DeleteDBCluster {DB}",
        f"DescribeDBClusters {DB}",
        f"DescribeDBClusters {DB}",
        f"DeleteDBSubnetGroup {SUBNET_GROUP}",
        f"DeleteDBClusterParameterGroup {PARAMETERS}",
        f"ListObjectVersions {LIFECYCLE}",
        f"DeleteObjects {LIFECYCLE}",
        f"DeleteBucket {LIFECYCLE}",
        f"ListObjectVersions {ACCESS_LOGS}",
        f"DeleteObjects {ACCESS_LOGS}",
        f"ListObjectVersions {ACCESS_LOGS}",
        f"DeleteObjects {ACCESS_LOGS}",
        f"DeleteBucket {ACCESS_LOGS}",
        *[f"DeleteLogGroup {name}" for name in [*RDS_LOGS, USER_HANDLER_LOGS, TEAM_FLOW_LOGS]],
        f"DeleteSecret {SECRET}",
        f"DeleteSecret {SLURMDBD_SECRET}",
        f"DeleteSecurityGroup {DB_SG}",
        f"DeleteSecurityGroup {FS_SG}",
        f"DeleteSubnet {SUBNET_1}",
        f"DeleteSubnet {SUBNET_2}",
        f"DeleteVpc {VPC}",
    ]
    steps = unwrapped(text.split("\n\n")[-1])
    assert steps.splitlines()[:7] == [
        f"backed up file system {TEAM_FS} as {BACKUP} (available after 0 s; it stays, billed per GB-month: aws fsx "
        "delete-backup deletes it)",
        f"deleted file system {TEAM_FS} (gone after 0 s)",
        f"turned deletion protection off on database {DB}",
        f"deleting database instance {WRITER}",
        f"deleted database {DB} (gone after 0 s); its final snapshot {SNAPSHOT} stays (aws rds "
        "delete-db-cluster-snapshot deletes it)",
        f"deleted database subnet group {SUBNET_GROUP}",
        f"deleted database parameter group {PARAMETERS}",
    ]
    assert f"deleted S3 bucket {LIFECYCLE} (3 object version(s) and delete marker(s))" in steps
    assert f"KMS key {KEY}" not in steps  # it encrypts the final snapshot


def test_with_backup_the_plan_keeps_the_key_of_the_final_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    status, text = team_account().run(
        monkeypatch, TEAM, "--backup", "--disable-deletion-protection", "--output", "json"
    )

    plans = {r["id"]: r["plan"] for r in json.loads(text)["resources"]}
    assert status == 0
    assert plans[TEAM_FS] == "back up, then delete"
    assert plans[DB] == f"turn deletion protection off, final snapshot {SNAPSHOT}, delete"
    assert plans[KEY] == f"keep: encrypts the final snapshot {SNAPSHOT}"
    assert plans[SECRET] == "delete in 30 days"
    assert {plans[i] for i in (WRITER, SUBNET_GROUP, PARAMETERS, DB_SG, FS_SG, SUBNET_1, VPC)} == {"delete"}


def test_a_second_run_shows_the_key_and_secrets_already_scheduled_and_leaves_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    status, text = team_account(scheduled=True).run(
        monkeypatch, TEAM, "--disable-deletion-protection", "--output", "json"
    )

    resources = {r["id"]: r for r in json.loads(text)["resources"]}
    assert status == 0
    assert (resources[KEY]["plan"], resources[KEY]["delete"]) == (
        "scheduled: KMS deletes it on 2027-01-01",
        False,
    )
    assert (resources[SECRET]["plan"], resources[SECRET]["delete"]) == (
        "scheduled: marked for deletion on 2026-12-02",
        False,
    )


def test_a_resource_deleted_since_it_was_listed_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    account = network_storage_account()
    queue_network_storage_deletion(account, security_group_gone=True)

    status, text = account.run(monkeypatch, "network-storage", "--delete", "--yes")

    assert status == 0
    assert (
        f"\nsecurity group {FS_SG} was already gone\ndeleted subnet {SUBNET_1}\ndeleted VPC {VPC}\n" in text
    )


# --------------------------------------------------------------------------------------------------
# waits and failures


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def test_a_file_system_that_does_not_go_stops_the_run_after_the_bounded_wait() -> None:
    account = Account()
    account.deleted("fsx", "delete_file_system", {"FileSystemId": FS})
    for _ in range(cleanup.DELETION_WAIT_SECONDS // cleanup.POLL_SECONDS + 1):
        account.file_system(FS, "SCRATCH_2", 1200, lifecycle="DELETING")
    clock = FakeClock()
    said: list[str] = []
    deleter = Deleter(
        account.clients,
        environment="network-storage",
        tags={},
        say=said.append,
        now=NOW,
        sleep=clock.sleep,
        clock=clock,
    )
    planned = [
        Leftover(
            Kind.FILE_SYSTEM, FS, arn("fsx", f"file-system/{FS}"), facts={"deployment_type": "SCRATCH_2"}
        ),
        Leftover(Kind.VPC, VPC, arn("ec2", f"vpc/{VPC}")),
    ]

    with account.stubs["fsx"], pytest.raises(CleanupStopped) as stopped:
        deleter.run(planned, backup=False)

    assert str(stopped.value) == (
        f"deletion of file system {FS} not done after 45 min: nothing after it was deleted; run cleanup again later"
    )
    assert clock.now == cleanup.DELETION_WAIT_SECONDS
    assert said == [] and "DeleteVpc" not in " ".join(account.calls)


def test_a_refused_deletion_stops_the_run_in_one_line_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    account = network_storage_account()
    account.deleted("fsx", "delete_file_system", {"FileSystemId": FS})
    account.file_system_gone(FS)
    account.error(
        "logs",
        "delete_log_group",
        "AccessDeniedException",
        "not authorized to perform: logs:DeleteLogGroup",
        {"logGroupName": FLOW_LOGS},
    )

    status, text = account.run(monkeypatch, "network-storage", "--delete", "--yes")

    assert status == 1
    assert unwrapped(text).endswith(
        f"deleted file system {FS} (gone after 0 s)\n"
        f"stopped: log group {FLOW_LOGS}: AccessDeniedException: not authorized to perform: logs:DeleteLogGroup; "
        "nothing after it was deleted: run cleanup again when it is fixed\n"
    )
    assert account.calls[-1] == f"DeleteLogGroup {FLOW_LOGS}"


def test_a_refused_listing_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    account = Account()
    account.error(
        "cloudformation",
        "describe_stacks",
        "AccessDenied",
        "User is not authorized to perform: cloudformation:DescribeStacks",
        {"StackName": "training-network-storage"},
    )

    status, text = account.run(monkeypatch, "network-storage")

    assert (status, text) == (2, "")
    assert unwrapped(capsys.readouterr().err) == (
        "error: cannot list what training-network-storage left in us-east-1: An error occurred (AccessDenied) when "
        "calling the DescribeStacks operation: User is not authorized to perform: cloudformation:DescribeStacks\n"
    )


# --- the EBS volumes of Prometheus's and Grafana's claims (made by the EBS CSI driver, not CloudFormation) -----

MONITORING = "eks-gpu-monitoring"


def monitoring_volumes() -> list[dict[str, Any]]:
    """The two claims' volumes, and what the filter must not be trusted with: another environment's volume,
    a volume with the environment's tags that the driver did not make, one of another project."""
    return [
        claim_volume(PROMETHEUS_VOLUME, MONITORING),
        claim_volume(GRAFANA_VOLUME, MONITORING, claim="prometheus-grafana", size=10),
        claim_volume("vol-0f000000000000001", "eks-mig"),
        claim_volume("vol-0f000000000000002", MONITORING, **{"ebs.csi.aws.com/cluster": "-"}),
        claim_volume("vol-0f000000000000003", MONITORING, project="another-project"),
    ]


def test_the_claims_volumes_are_listed_with_their_claim_and_cost_and_deleted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    account = Account()
    account.listing(MONITORING, [], volumes=monitoring_volumes())
    for volume in (PROMETHEUS_VOLUME, GRAFANA_VOLUME):
        account.deleted("ec2", "delete_volume", {"VolumeId": volume})

    status, text = account.run(monkeypatch, MONITORING, "--delete", "--yes", "--output", "json")

    document = json.loads(text)
    assert (status, document["deleted"], document["monthly_usd_known"]) == (0, True, 4.8)
    assert document["resources"] == [
        {
            "kind": "ebs_volume",
            "resource": "EBS volume",
            "id": PROMETHEUS_VOLUME,
            "name": PROMETHEUS_VOLUME,
            "arn": "",
            "logical_id": "",
            "detail": "gp3, 50 GiB, claim monitoring/prometheus-db-prometheus-0",
            "monthly_usd": 4.0,  # 50 GiB x $0.08
            "cost": "$4.00",
            "delete": True,
            "plan": "delete",
        },
        {
            "kind": "ebs_volume",
            "resource": "EBS volume",
            "id": GRAFANA_VOLUME,
            "name": GRAFANA_VOLUME,
            "arn": "",
            "logical_id": "",
            "detail": "gp3, 10 GiB, claim monitoring/prometheus-grafana",
            "monthly_usd": 0.8,
            "cost": "$0.80",
            "delete": True,
            "plan": "delete",
        },
    ]
    assert document["steps"] == [
        f"deleted EBS volume {PROMETHEUS_VOLUME}",
        f"deleted EBS volume {GRAFANA_VOLUME}",
    ]
    assert account.calls == [
        f"DescribeStacks training-{MONITORING}",
        "GetResources",
        "DescribeVolumes",
        f"DeleteVolume {PROMETHEUS_VOLUME}",
        f"DeleteVolume {GRAFANA_VOLUME}",
    ]


def test_while_the_stack_exists_no_claim_volume_is_listed_or_deleted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A volume names no stack: which deployment's cluster made it cannot be told, so the live one may use it."""
    account = Account()
    live = LIVE_STACK_ID.format(stack=f"training-{MONITORING}")
    account.listing(MONITORING, [], stack_id=live, volumes=monitoring_volumes())

    status, text = account.run(monkeypatch, MONITORING, "--delete", "--yes")

    assert status == 0
    assert text.startswith(f"training-{MONITORING} in us-east-1: nothing left behind\n")
    assert "its 2 resource(s) are in use and not listed" in text  # the two claims' volumes, not the others
    assert account.calls == [f"DescribeStacks training-{MONITORING}", "GetResources", "DescribeVolumes"]


def test_an_attached_volume_is_kept_and_no_volume_of_ours_means_none_listed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    account = Account()
    attached = claim_volume(PROMETHEUS_VOLUME, MONITORING, attached_to="i-0123456789abcdef0")
    account.listing(MONITORING, [], volumes=[attached, *monitoring_volumes()[2:]])

    status, text = account.run(monkeypatch, MONITORING, "--delete", "--yes", "--output", "json")

    document = json.loads(text)
    assert status == 0
    assert [(r["id"], r["plan"], r["delete"]) for r in document["resources"]] == [
        (PROMETHEUS_VOLUME, "keep: attached to i-0123456789abcdef0", False)
    ]
    assert account.calls == [f"DescribeStacks training-{MONITORING}", "GetResources", "DescribeVolumes"]

    none = Account()
    none.listing(MONITORING, [], volumes=monitoring_volumes()[2:])
    status, text = none.run(monkeypatch, MONITORING)
    assert (status, text.splitlines()[0]) == (0, f"training-{MONITORING} in us-east-1: nothing left behind")


def test_the_volumes_are_read_page_by_page(monkeypatch: pytest.MonkeyPatch) -> None:
    account = Account()
    account.listing(MONITORING, [], volume_pages=False)
    account.volumes(MONITORING, monitoring_volumes()[:1], next_token="page-2")
    account.volumes(MONITORING, monitoring_volumes()[1:2], token="page-2")

    status, text = account.run(monkeypatch, MONITORING, "--output", "json")

    assert status == 0
    assert [r["id"] for r in json.loads(text)["resources"]] == [PROMETHEUS_VOLUME, GRAFANA_VOLUME]
    assert account.calls.count("DescribeVolumes") == 2


def test_a_refused_volume_listing_is_one_line_exit_2_and_nothing_deleted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    account = Account()
    account.listing(MONITORING, [], volume_pages=False)
    account.error(
        "ec2",
        "describe_volumes",
        "UnauthorizedOperation",
        "You are not authorized to perform this operation.",
        {
            "Filters": [
                {"Name": "tag:project", "Values": ["cdk-training-clusters"]},
                {"Name": "tag:environment", "Values": [MONITORING]},
                {"Name": "tag-key", "Values": ["ebs.csi.aws.com/cluster"]},
            ],
            "MaxResults": 500,
        },
    )

    status, text = account.run(monkeypatch, MONITORING, "--delete", "--yes")

    assert (status, text) == (2, "")
    assert unwrapped(capsys.readouterr().err) == (
        f"error: cannot list what training-{MONITORING} left in us-east-1: An error occurred (UnauthorizedOperation) "
        "when calling the DescribeVolumes operation: You are not authorized to perform this operation.\n"
    )
    assert account.calls == [f"DescribeStacks training-{MONITORING}", "GetResources", "DescribeVolumes"]


NETWORK_STORAGE_KEPT = (
    "training-network-storage in us-east-1, offline from its synthesized template: what cdk destroy leaves, 5 "
    "resource(s)\n"
    "\n"
    "resource                                         logical id                           a month\n"
    "-----------------------------------------------  -----------------------------------  -------\n"
    "VPC                                              Network6E62CE96                      free\n"
    "subnet                                           NetworkPrivateSubnet1Subnet80FBBF93  free\n"
    "log group: kept 365 days                         NetworkFlowLogs2BEC3212              by use\n"
    "security group                                   SharedStorageSecurityGroup8BDD17A1   free\n"
    "FSx for Lustre file system: SCRATCH_2, 1200 GiB  SharedStorageA8297BFB                $168.00\n"
    "\n"
    "- about $168.00 a month (us-east-1 list prices of 2026-12), plus what is billed by use\n"
    "- price source: FSx for Lustre https://aws.amazon.com/fsx/lustre/pricing/\n"
    "\n"
)


def no_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any boto3 session fails the test: the dry run asks AWS nothing."""

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("the dry run made a boto3 session")

    monkeypatch.setattr(boto3.session, "Session", refused)


def test_the_offline_dry_run_lists_what_cdk_destroy_leaves_from_the_template_with_its_cost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the template retains is what a listing finds after cdk destroy (the same logical ids as the
    fake account's network-storage leftovers above), priced the same, without asking AWS."""
    no_aws(monkeypatch)
    out = io.StringIO()
    path = ENVIRONMENTS / "network-storage.yaml"

    status = cli.main(["cleanup", str(path), "--dry-run"], stdout=out)

    assert status == 0
    assert (
        out.getvalue()
        == NETWORK_STORAGE_KEPT
        + textwrap.fill(
            f"with credentials, cleanup {path} lists what is really there, and --delete deletes it",
            120,
            break_on_hyphens=False,
        )
        + "\n"
    )
    listed = {
        tag["Value"]
        for entry in network_storage_listing()
        for tag in entry["Tags"]
        if tag["Key"] == "aws:cloudformation:logical-id"
        and {"Key": "environment", "Value": "network-storage"} in entry["Tags"]
        and {"Key": "aws:cloudformation:stack-name", "Value": "training-network-storage"} in entry["Tags"]
        and {"Key": "project", "Value": "cdk-training-clusters"} in entry["Tags"]
    }
    assert listed == set(re.findall(r"  (\w+[0-9A-F]{8})  ", out.getvalue()))


def test_the_offline_dry_run_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    no_aws(monkeypatch)
    out = io.StringIO()
    assert (
        cli.main(
            ["cleanup", str(ENVIRONMENTS / "network-storage.yaml"), "--dry-run", "--output", "json"], out
        )
        == 0
    )
    document = json.loads(out.getvalue())
    assert (document["stack"], document["offline"], document["monthly_usd_known"]) == (
        "training-network-storage",
        True,
        168.0,
    )
    assert [(k["resource"], k["logical_id"], k["cost"]) for k in document["kept"]][-1] == (
        "FSx for Lustre file system",
        "SharedStorageA8297BFB",
        "$168.00",
    )
    assert "iam_actions" not in document


@pytest.mark.parametrize("option", ["--delete", "--backup", "--disable-deletion-protection"])
def test_the_offline_dry_run_takes_no_deletion_option(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["cleanup", str(ENVIRONMENTS / "network-storage.yaml"), "--dry-run", option])
    assert status == 2
    assert unwrapped(capsys.readouterr().err) == (
        "error: training-clusters cleanup: --dry-run asks AWS nothing; it takes no --delete\n"
    )


def test_without_credentials_cleanup_says_so_in_one_line_and_what_it_can_say_offline_and_exits_2(
    aws_config: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    status = cli.main(["cleanup", str(ENVIRONMENTS / "network-storage.yaml"), "--profile", "dev"], stdout=out)

    assert status == 2
    assert unwrapped(capsys.readouterr().err) == (
        "error: cleanup found no AWS credentials for profile 'dev': give --profile P, set AWS_PROFILE, or run aws "
        "configure\n"
    )
    needs = (
        f"listing what is really there calls {', '.join(LIST_IAM_ACTIONS)} in us-east-1; --delete also "
        f"{', '.join(DELETE_IAM_ACTIONS)}; --backup {', '.join(BACKUP_IAM_ACTIONS)}; "
        f"--disable-deletion-protection {', '.join(PROTECTION_IAM_ACTIONS)}"
    )
    assert out.getvalue() == NETWORK_STORAGE_KEPT + textwrap.fill(needs, 120, break_on_hyphens=False) + "\n"


def test_the_iam_actions_named_are_the_operations_cleanup_calls() -> None:
    """The actions the one-line error names against cleanup's source: every operation of its clients whose
    method it calls, as IAM names it (S3 bills ListObjectVersions as s3:ListBucketVersions, a DeleteObjects of
    versions as s3:DeleteObjectVersion; CreateBackup with tags needs fsx:TagResource, a final snapshot
    rds:CreateDBClusterSnapshot)."""
    source = inspect.getsource(cleanup)
    called = {
        f"{client.meta.service_model.signing_name}:{operation}"
        for name, client in vars(Account().clients).items()
        for method, operation in client.meta.method_to_api_mapping.items()
        if re.search(rf"\b{name}\.{method}\(", source)  # ec2.delete_volume, not FSx's DeleteVolume
    }
    iam = {
        "tagging:GetResources": "tag:GetResources",
        "s3:ListObjectVersions": "s3:ListBucketVersions",
        "s3:DeleteObjects": "s3:DeleteObjectVersion",
    }
    implied = {"fsx:TagResource", "rds:CreateDBClusterSnapshot"}
    assert {iam.get(action, action) for action in called} | implied == {
        *LIST_IAM_ACTIONS,
        *DELETE_IAM_ACTIONS,
        *BACKUP_IAM_ACTIONS,
        *PROTECTION_IAM_ACTIONS,
    }


def test_cleanup_needs_neither_cdk_nor_boto3_to_import() -> None:
    """The operate side's module loads without jsii (and boto3 only when it asks AWS); the price table is
    plain data."""
    code = (
        "import sys, training_clusters.cli.cleanup, training_clusters.catalog.prices; "
        "print(*(name in sys.modules for name in ('aws_cdk', 'jsii', 'boto3')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert result.stdout.strip() == "False False False"
