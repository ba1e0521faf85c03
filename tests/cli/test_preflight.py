"""Preflight against fake accounts: real boto3 clients under botocore's Stubber.

The Stubber checks every call's parameters and every canned answer against the services' own models, and
that the calls come in the order expected; ``Account.run`` also asserts that every queued answer was used.
No CDK here: these tests stay fast.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
import yaml
from botocore.exceptions import NoCredentialsError
from botocore.stub import Stubber

from training_clusters import preflight as preflight_module
from training_clusters.config import EnvironmentConfig, load_environment, parse_environment
from training_clusters.preflight import (
    REQUIRED_IAM_ACTIONS,
    AwsClients,
    Capacity,
    Check,
    InstanceDemand,
    Service,
    instance_demands,
    preflight,
    version_checks,
)
from training_clusters.preflight import versions as preflight_versions

ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"
REGION = "us-east-1"
AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]

STANDARD = ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances")
G_AND_VT = ("L-DB2E81BA", "Running On-Demand G and VT instances")
P = ("L-417A185B", "Running On-Demand P instances")
STANDARD_SPOT = ("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests")
LUSTRE_SCRATCH = ("L-AD2FC696", "Lustre Scratch storage capacity")
LUSTRE_PERSISTENT_2 = ("L-8F1B9C74", "Lustre Persistent_2 storage capacity")
#: When the fake accounts' preflight runs: reservations' starts and ends are dated from it.
NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)

#: EKS with one g5.8xlarge (32 vCPUs) in an EFA nodegroup, beside the default system nodes.
ONE_G5_EFA_NODE = {
    "region": REGION,
    "availability_zones": ["us-east-1a", "us-east-1b"],
    "storage": {"lustre": None},
    "eks": {"efa_nodegroups": [{"name": "g5", "instance_type": "g5.8xlarge", "size": 1}]},
}


@cache
def session() -> boto3.session.Session:
    """One session for the module: it caches the service models (EC2's takes ~0.5 s to load)."""
    return boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)


def environment(name: str) -> EnvironmentConfig:
    return load_environment(ENVIRONMENTS / f"{name}.yaml")


def quota(service: str, code: str, name: str, value: float, *, adjustable: bool = True) -> dict[str, Any]:
    return {
        "ServiceCode": service,
        "QuotaCode": code,
        "QuotaName": name,
        "Value": value,
        "Adjustable": adjustable,
    }


class Account:
    """A fake account: answers queued in the order preflight asks (see ``preflight``'s docstring)."""

    def __init__(self, region: str = REGION) -> None:
        self.clients = AwsClients.from_session(session(), region)  # fresh clients, fresh Stubbers
        self.quotas = Stubber(self.clients.service_quotas)
        self.ec2 = Stubber(self.clients.ec2)
        self.sagemaker = Stubber(self.clients.sagemaker)

    def ec2_quota(self, code_and_name: tuple[str, str], value: float, *, adjustable: bool = True) -> None:
        code, name = code_and_name
        self.quotas.add_response(
            "get_service_quota",
            {"Quota": quota("ec2", code, name, value, adjustable=adjustable)},
            {"ServiceCode": "ec2", "QuotaCode": code},
        )

    def listed_quotas(
        self, service: str, quotas: list[dict[str, Any]], *, page: int = 100, defaults: bool = False
    ) -> None:
        """``ListServiceQuotas`` (or the AWS-default listing) of ``service``, ``page`` quotas a page."""
        operation = "list_aws_default_service_quotas" if defaults else "list_service_quotas"
        chunks = [quotas[i : i + page] for i in range(0, len(quotas), page)] or [[]]
        for number, chunk in enumerate(chunks):
            response: dict[str, Any] = {"Quotas": chunk}
            if number + 1 < len(chunks):
                response["NextToken"] = f"page-{number + 1}"
            expected: dict[str, Any] = {"ServiceCode": service, "MaxResults": 100}
            if number:
                expected["NextToken"] = f"page-{number}"
            self.quotas.add_response(operation, response, expected)

    def offerings(self, offered: dict[str, list[str]]) -> None:
        """EC2 offers each type (in the order preflight first meets them) in the AZs given."""
        self.ec2.add_response(
            "describe_instance_type_offerings",
            {
                "InstanceTypeOfferings": [
                    {"InstanceType": t, "LocationType": "availability-zone", "Location": az}
                    for t, zones in offered.items()
                    for az in zones
                ]
            },
            {
                "LocationType": "availability-zone",
                "Filters": [{"Name": "instance-type", "Values": list(offered)}],
            },
        )

    def efa(self, supported: dict[str, bool]) -> None:
        self.ec2.add_response(
            "describe_instance_types",
            {
                "InstanceTypes": [
                    {"InstanceType": t, "NetworkInfo": {"EfaSupported": s}} for t, s in supported.items()
                ]
            },
            {"InstanceTypes": list(supported)},
        )

    def reservation(self, reservation_id: str, **facts: Any) -> None:
        """``DescribeCapacityReservations`` of one id: a p5.48xlarge Capacity Block in us-east-1a unless
        ``facts`` say otherwise (``State``, ``AvailableInstanceCount``, ``EndDate`` ...)."""
        answer = {
            "CapacityReservationId": reservation_id,
            "InstanceType": "p5.48xlarge",
            "AvailabilityZone": "us-east-1a",
            "TotalInstanceCount": 2,
            "AvailableInstanceCount": 2,
            "State": "active",
            "StartDate": NOW - timedelta(days=1),
            "EndDate": NOW + timedelta(days=7),
            "ReservationType": "capacity-block",
            **facts,
        }
        self.ec2.add_response(
            "describe_capacity_reservations",
            {"CapacityReservations": [answer]},
            {"CapacityReservationIds": [reservation_id]},
        )

    def training_plan(self, arn: str, **facts: Any) -> None:
        """``DescribeTrainingPlan``: two ml.p5.48xlarge in us-east-1a for HyperPod unless ``facts`` differ."""
        answer = {
            "TrainingPlanArn": arn,
            "TrainingPlanName": arn.rsplit("/", 1)[-1],
            "Status": "Active",
            "StartTime": NOW - timedelta(days=1),
            "EndTime": NOW + timedelta(days=7),
            "TotalInstanceCount": 2,
            "AvailableInstanceCount": 2,
            "TargetResources": ["hyperpod-cluster"],
            "ReservedCapacitySummaries": [
                {
                    "ReservedCapacityArn": f"{arn}/reserved-capacity/rc-1",
                    "InstanceType": "ml.p5.48xlarge",
                    "TotalInstanceCount": 2,
                    "Status": "Active",
                    "AvailabilityZone": "us-east-1a",
                }
            ],
            **facts,
        }
        self.sagemaker.add_response("describe_training_plan", answer, {"TrainingPlanName": arn})

    def deployed_cluster(self, name: str, *, api: bool) -> None:
        """A HyperPod Slurm cluster of that name exists, configured through the API or the legacy way."""
        group: dict[str, Any] = {"InstanceGroupName": "worker-group-1", "InstanceType": "ml.c5.xlarge"}
        if api:
            group["SlurmConfig"] = {"NodeType": "Compute", "PartitionNames": ["dev"]}
        self.sagemaker.add_response(
            "describe_cluster",
            {
                "ClusterArn": f"arn:aws:sagemaker:{REGION}:111122223333:cluster/abcdef123456",
                "ClusterName": name,
                "ClusterStatus": "InService",
                "InstanceGroups": [group],
            },
            {"ClusterName": name},
        )
        self._cluster_answered = True

    def run(self, config: EnvironmentConfig) -> list[Check]:
        if config.hyperpod is not None and not getattr(self, "_cluster_answered", False):
            # No cluster of the file's name yet (preflight's last question, so queued last).
            self.sagemaker.add_client_error(
                "describe_cluster",
                service_error_code="ResourceNotFound",
                service_message=f"Cluster {config.hyperpod.cluster_name} not found",
                expected_params={"ClusterName": config.hyperpod.cluster_name},
            )
        with self.quotas, self.ec2, self.sagemaker:
            checks = preflight(config, self.clients, now=NOW)
        self.quotas.assert_no_pending_responses()
        self.ec2.assert_no_pending_responses()
        self.sagemaker.assert_no_pending_responses()
        return checks


def failures(checks: list[Check]) -> list[Check]:
    return [c for c in checks if not c.passed]


def only(checks: list[Check], starting: str) -> Check:
    found = [c for c in checks if c.check.startswith(starting)]
    assert len(found) == 1, [c.check for c in checks]
    return found[0]


# --------------------------------------------------------------------------------------------------
# what the file asks for


def test_eks_demands_place_efa_groups_in_the_placement_az_and_others_in_every_az() -> None:
    demands = instance_demands(environment("eks-g5-efa"))

    assert demands == (
        InstanceDemand(
            instance_type="t3.large",
            count=2,
            where="eks.system_nodegroup",
            count_field="eks.system_nodegroup.size",
            service=Service.EC2,
            capacity=Capacity.ON_DEMAND,
            availability_zones=("us-east-1a", "us-east-1b"),
            in_placement_az=False,
            efa=False,
        ),
        InstanceDemand(
            instance_type="g5.8xlarge",
            count=2,
            where="eks.efa_nodegroups[g5]",
            count_field="eks.efa_nodegroups[g5].size",
            service=Service.EC2,
            capacity=Capacity.ON_DEMAND,
            availability_zones=("us-east-1a",),
            in_placement_az=True,
            efa=True,
        ),
    )
    assert [d.vcpus for d in demands] == [4, 64]


def test_gpu_nodegroups_span_every_az_without_efa() -> None:
    (_, gpu) = instance_demands(environment("eks-gpu-sharing"))

    assert (gpu.where, gpu.instance_type, gpu.count) == ("eks.gpu_nodegroups[gpu]", "g5.2xlarge", 1)
    assert gpu.availability_zones == ("us-east-1a", "us-east-1b")
    assert not gpu.efa


def test_parallelcluster_demands_count_the_head_node_and_each_queue_at_max_count() -> None:
    head, compute = instance_demands(environment("parallelcluster-c5n"))

    assert (head.where, head.instance_type, head.count, head.efa) == (
        "parallelcluster.head_node",
        "t3.medium",
        1,
        False,
    )
    assert (compute.where, compute.count, compute.efa) == (
        "parallelcluster.queues[compute].compute_resources[c5n]",
        2,
        True,
    )
    assert compute.vcpus == 72
    assert head.availability_zones == compute.availability_zones == ("us-east-1a",)


def test_hyperpod_demands_count_against_sagemaker() -> None:
    demands = instance_demands(environment("hyperpod-p5"))

    assert [(d.instance_type, d.count, d.service) for d in demands] == [
        ("ml.m5.2xlarge", 1, Service.SAGEMAKER),
        ("ml.m5.2xlarge", 1, Service.SAGEMAKER),
        ("ml.p5.48xlarge", 2, Service.SAGEMAKER),
    ]
    assert (
        demands[2].description
        == "ml.p5.48xlarge \N{MULTIPLICATION SIGN} 2 in hyperpod.instance_groups[gpu-workers]"
    )


@pytest.mark.parametrize(
    ("group", "capacity"),
    [
        ({"capacity": {"type": "spot"}}, Capacity.SPOT),
        (
            {"capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}},
            Capacity.CAPACITY_BLOCK,
        ),
        (
            {"capacity": {"type": "reservation", "reservation_id": "cr-0123456789abcdef0"}},
            Capacity.CAPACITY_RESERVATION,
        ),
        ({}, Capacity.ON_DEMAND),
    ],
)
def test_eks_capacity_types(group: dict[str, Any], capacity: Capacity) -> None:
    document = {
        **ONE_G5_EFA_NODE,
        "eks": {"efa_nodegroups": [{"name": "p5", "instance_type": "p5.48xlarge", "size": 2, **group}]},
    }

    assert instance_demands(parse_environment(document))[1].capacity is capacity


@pytest.mark.parametrize(
    ("group", "capacity", "reserved"),
    [
        ({"capacity": {"type": "spot"}}, Capacity.SPOT, None),
        (
            {"capacity": {"type": "reservation", "reservation_id": "cr-0123456789abcdef0"}},
            Capacity.CAPACITY_RESERVATION,
            "reservation",
        ),
        (
            {
                "capacity": {
                    "type": "reservation",
                    "reservation_id": "cr-0123456789abcdef0",
                    "targeted": False,
                }
            },
            Capacity.CAPACITY_RESERVATION,
            "reservation",
        ),
        (
            {"capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}},
            Capacity.CAPACITY_BLOCK,
            "capacity-block",
        ),
        ({}, Capacity.ON_DEMAND, None),
    ],
)
def test_pcs_node_group_capacity_reaches_the_demand(
    group: dict[str, Any], capacity: Capacity, reserved: str | None
) -> None:
    document = yaml.safe_load((ENVIRONMENTS / "pcs-p5.yaml").read_text())
    document["pcs"]["compute_node_groups"][0].update(group)
    demands = {d.where: d for d in instance_demands(parse_environment(document))}
    gpu = demands["pcs.compute_node_groups[gpu]"]
    assert gpu.capacity is capacity
    assert (gpu.reserved.kind if gpu.reserved else None) == reserved
    assert gpu.capacity_reservation_id == ("cr-0123456789abcdef0" if reserved else None)


# --------------------------------------------------------------------------------------------------
# passing accounts


def test_eks_environment_passes_in_an_account_with_room() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 640)
    account.ec2_quota(G_AND_VT, 64)  # exactly the 2 g5.8xlarge of 32 vCPUs each
    account.offerings({"t3.large": AZS, "g5.8xlarge": AZS})
    account.efa({"g5.8xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    checks = account.run(environment("eks-g5-efa"))

    assert failures(checks) == []
    assert [c.check for c in checks] == [
        f"EC2 quota {STANDARD[0]} {STANDARD[1]}",
        f"EC2 quota {G_AND_VT[0]} {G_AND_VT[1]}",
        "EC2 offering t3.large",
        "EC2 offering g5.8xlarge",
        "EFA on g5.8xlarge",
        f"FSx quota {LUSTRE_SCRATCH[0]} {LUSTRE_SCRATCH[1]}",
    ]
    g5 = checks[1]
    assert g5.needed == "64 vCPUs (g5.8xlarge \N{MULTIPLICATION SIGN} 2 in eks.efa_nodegroups[g5])"
    assert (g5.available, g5.remedy) == ("64 vCPUs", "")
    assert checks[-1].needed == "1200 GiB (storage.lustre.storage_capacity_gib, SCRATCH_2)"


def test_parallelcluster_environment_passes_with_head_node_and_queue_in_one_quota() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 128)
    account.offerings({"t3.medium": AZS, "c5n.9xlarge": ["us-east-1a"]})
    account.efa({"c5n.9xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    checks = account.run(environment("parallelcluster-c5n"))

    assert failures(checks) == []
    standard = only(checks, "EC2 quota")
    assert standard.needed.startswith(
        "74 vCPUs (t3.medium \N{MULTIPLICATION SIGN} 1 in parallelcluster.head_node + "
    )
    assert only(checks, "EC2 offering c5n.9xlarge").available == "offered in us-east-1a"


def test_hyperpod_environment_passes_reading_sagemaker_quotas_page_by_page() -> None:
    unrelated = [
        quota("sagemaker", f"L-{n:08X}", f"ml.c5.{n}xlarge for endpoint usage", 4) for n in range(1, 5)
    ]
    sagemaker = [
        *unrelated,
        quota("sagemaker", "L-0000A001", "ml.m5.2xlarge for cluster usage", 4),
        quota("sagemaker", "L-0000A002", "ml.p5.48xlarge for cluster usage", 2),
        quota(
            "sagemaker", "L-0000A003", "Maximum number instances allowed per SageMaker HyperPod cluster", 20
        ),
        quota(
            "sagemaker",
            "L-0000A004",
            "Total number of instances allowed across SageMaker HyperPod clusters",
            100,
        ),
        quota(
            "sagemaker",
            "L-0000A005",
            "Maximum size of EBS volume in GB for a SageMaker HyperPod cluster instance",
            2000,
        ),
    ]
    account = Account()
    account.listed_quotas("sagemaker", sagemaker, page=3)  # three pages
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_PERSISTENT_2, 100800)])

    checks = account.run(environment("hyperpod-p5"))

    assert failures(checks) == []
    assert [(c.check, c.needed.split(" (")[0], c.available) for c in checks] == [
        ("SageMaker quota L-0000A001 ml.m5.2xlarge for cluster usage", "2 instances", "4 instances"),
        ("SageMaker quota L-0000A002 ml.p5.48xlarge for cluster usage", "2 instances", "2 instances"),
        (
            "SageMaker quota L-0000A003 Maximum number instances allowed per SageMaker HyperPod cluster",
            "4 instances",
            "20 instances",
        ),
        (
            "SageMaker quota L-0000A004 Total number of instances allowed across SageMaker HyperPod clusters",
            "4 instances",
            "100 instances",
        ),
        (
            "SageMaker quota L-0000A005 Maximum size of EBS volume in GB for a SageMaker HyperPod cluster instance",
            "500 GB",
            "2000 GB",
        ),
        ("FSx quota L-8F1B9C74 Lustre Persistent_2 storage capacity", "4800 GiB", "100800 GiB"),
    ]


def test_spot_queues_count_against_the_spot_quota() -> None:
    document = environment("parallelcluster-c5n").model_dump(mode="json", exclude_none=True)
    document["parallelcluster"]["queues"][0]["capacity"] = {"type": "spot"}
    account = Account()
    account.ec2_quota(STANDARD, 8)  # the head node
    account.ec2_quota(STANDARD_SPOT, 72)  # 2 c5n.9xlarge of 36 vCPUs
    account.offerings({"t3.medium": AZS, "c5n.9xlarge": AZS})
    account.efa({"c5n.9xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    checks = account.run(parse_environment(document))

    assert failures(checks) == []
    assert only(checks, f"EC2 quota {STANDARD_SPOT[0]}").needed.startswith("72 vCPUs (c5n.9xlarge")


def _head_node(instance_type: str) -> dict[str, Any]:
    document = environment("parallelcluster-c5n").model_dump(mode="json", exclude_none=True)
    document["parallelcluster"]["head_node"]["instance_type"] = instance_type
    return document


def test_a_head_node_type_the_catalogue_does_not_know_counts_its_described_vcpus() -> None:
    """c7i.2xlarge is not catalogued: EC2 describes its 8 vCPUs first, then it counts against Standard."""
    account = Account()
    account.ec2.add_response(
        "describe_instance_types",
        {"InstanceTypes": [{"InstanceType": "c7i.2xlarge", "VCpuInfo": {"DefaultVCpus": 8}}]},
        {"InstanceTypes": ["c7i.2xlarge"]},
    )
    account.ec2_quota(STANDARD, 80)  # the head node's 8 and 2 c5n.9xlarge of 36
    account.offerings({"c7i.2xlarge": AZS, "c5n.9xlarge": AZS})
    account.efa({"c5n.9xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    checks = account.run(parse_environment(_head_node("c7i.2xlarge")))

    assert failures(checks) == []
    assert only(checks, f"EC2 quota {STANDARD[0]}").needed == (
        "80 vCPUs (c7i.2xlarge \N{MULTIPLICATION SIGN} 1 in parallelcluster.head_node + c5n.9xlarge "
        "\N{MULTIPLICATION SIGN} 2 in parallelcluster.queues[compute].compute_resources[c5n])"
    )
    assert only(checks, "EC2 offering c7i.2xlarge").passed


def test_a_type_ec2_does_not_describe_fails_and_its_quota_is_not_guessed() -> None:
    account = Account()
    account.ec2.add_response(
        "describe_instance_types", {"InstanceTypes": []}, {"InstanceTypes": ["c7x.2xlarge"]}
    )
    account.ec2_quota(STANDARD, 80)
    account.offerings({"c5n.9xlarge": AZS})
    account.efa({"c5n.9xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    checks = account.run(parse_environment(_head_node("c7x.2xlarge")))

    assert [(c.check, c.available, c.remedy) for c in failures(checks)] == [
        (
            "EC2 instance type c7x.2xlarge",
            "not described by EC2 in us-east-1",
            "check the spelling of c7x.2xlarge, or choose a type EC2 offers in us-east-1",
        )
    ]
    assert only(checks, f"EC2 quota {STANDARD[0]}").needed.startswith("72 vCPUs (c5n.9xlarge")


def test_a_family_with_a_quota_of_its_own_is_not_verified_and_says_so() -> None:
    account = Account()
    account.ec2.add_response(
        "describe_instance_types",
        {"InstanceTypes": [{"InstanceType": "x2idn.16xlarge", "VCpuInfo": {"DefaultVCpus": 64}}]},
        {"InstanceTypes": ["x2idn.16xlarge"]},
    )
    account.ec2_quota(STANDARD, 72)
    account.offerings({"x2idn.16xlarge": AZS, "c5n.9xlarge": AZS})
    account.efa({"c5n.9xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    checks = account.run(parse_environment(_head_node("x2idn.16xlarge")))

    assert failures(checks) == []
    unquoted = only(checks, "EC2 quota for parallelcluster.head_node")
    assert (unquoted.needed, unquoted.available) == (
        "64 vCPUs (x2idn.16xlarge \N{MULTIPLICATION SIGN} 1 in parallelcluster.head_node)",
        "not verified: the x2idn family counts against a vCPU quota of its own (not Standard, G and VT, P or Trn)",
    )


def test_capacity_blocks_skip_the_on_demand_quota_and_say_so() -> None:
    document = {
        **ONE_G5_EFA_NODE,
        "eks": {
            "efa_nodegroups": [
                {
                    "name": "p5",
                    "instance_type": "p5.48xlarge",
                    "size": 2,
                    "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"},
                }
            ]
        },
    }
    account = Account()
    account.ec2_quota(STANDARD, 640)  # system nodes only: no call for the P quota
    account.offerings({"t3.large": AZS, "p5.48xlarge": AZS})
    account.efa({"p5.48xlarge": True})
    account.reservation("cr-0123456789abcdef0")

    checks = account.run(parse_environment(document))

    assert failures(checks) == []
    skipped = only(checks, "EC2 quota for eks.efa_nodegroups[p5]")
    assert skipped.needed == "384 vCPUs (p5.48xlarge \N{MULTIPLICATION SIGN} 2 in eks.efa_nodegroups[p5])"
    assert skipped.available.startswith(
        "skipped: instances launched into Capacity Block cr-0123456789abcdef0"
    )


def test_a_quota_with_only_an_aws_default_value_is_read_from_the_defaults() -> None:
    account = Account()
    account.quotas.add_client_error(
        "get_service_quota",
        service_error_code="NoSuchResourceException",
        service_message="The request failed because the specified service quota does not exist.",
        http_status_code=400,
        expected_params={"ServiceCode": "ec2", "QuotaCode": STANDARD[0]},
    )
    account.quotas.add_response(
        "get_aws_default_service_quota",
        {"Quota": quota("ec2", *STANDARD, 5)},
        {"ServiceCode": "ec2", "QuotaCode": STANDARD[0]},
    )
    account.ec2_quota(G_AND_VT, 32)
    account.offerings({"t3.large": AZS, "g5.8xlarge": AZS})
    account.efa({"g5.8xlarge": True})

    checks = account.run(parse_environment(ONE_G5_EFA_NODE))

    assert failures(checks) == []
    assert only(checks, f"EC2 quota {STANDARD[0]}").available == "5 vCPUs (AWS default value)"


# --------------------------------------------------------------------------------------------------
# each failure


def test_g5_node_over_the_g_quota_fails_naming_the_quota_the_vcpus_needed_and_the_quota() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 640)
    account.ec2_quota(G_AND_VT, 8)
    account.offerings({"t3.large": AZS, "g5.8xlarge": AZS})
    account.efa({"g5.8xlarge": True})

    checks = account.run(parse_environment(ONE_G5_EFA_NODE))

    [failed] = failures(checks)
    assert failed == Check(
        check="EC2 quota L-DB2E81BA Running On-Demand G and VT instances",
        needed="32 vCPUs (g5.8xlarge \N{MULTIPLICATION SIGN} 1 in eks.efa_nodegroups[g5])",
        available="8 vCPUs",
        passed=False,
        remedy=(
            "aws service-quotas request-service-quota-increase --service-code ec2 "
            "--quota-code L-DB2E81BA --desired-value 32 --region us-east-1"
        ),
    )
    assert failed.message.startswith(
        "FAIL: EC2 quota L-DB2E81BA Running On-Demand G and VT instances: needed 32 vCPUs "
    )
    assert "available 8 vCPUs" in failed.message
    assert failed.as_dict()["passed"] is False


def test_a_quota_that_cannot_be_raised_says_which_field_to_lower() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 640)
    account.ec2_quota(G_AND_VT, 8, adjustable=False)
    account.offerings({"t3.large": AZS, "g5.8xlarge": AZS})
    account.efa({"g5.8xlarge": True})

    [failed] = failures(account.run(parse_environment(ONE_G5_EFA_NODE)))

    assert failed.remedy == "the quota is not adjustable: lower eks.efa_nodegroups[g5].size to fit 8 vCPUs"


def test_sagemaker_cluster_usage_quota_too_small_fails() -> None:
    account = Account()
    account.listed_quotas(
        "sagemaker",
        [
            quota("sagemaker", "L-0000B001", "ml.c5.xlarge for cluster usage", 1),
            quota(
                "sagemaker",
                "L-0000B002",
                "Maximum number instances allowed per SageMaker HyperPod cluster",
                20,
            ),
            quota(
                "sagemaker",
                "L-0000B003",
                "Total number of instances allowed across SageMaker HyperPod clusters",
                100,
            ),
        ],
    )
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    checks = account.run(environment("hyperpod-slurm"))

    [failed] = failures(checks)
    assert failed.check == "SageMaker quota L-0000B001 ml.c5.xlarge for cluster usage"
    assert failed.needed == (
        "2 instances (ml.c5.xlarge \N{MULTIPLICATION SIGN} 1 in hyperpod.instance_groups[controller-machine]"
        " + ml.c5.xlarge \N{MULTIPLICATION SIGN} 1 in hyperpod.instance_groups[worker-group-1])"
    )
    assert failed.available == "1 instances"
    assert "--service-code sagemaker --quota-code L-0000B001 --desired-value 2" in failed.remedy


def test_a_sagemaker_quota_missing_from_the_account_is_reported_as_not_found() -> None:
    per_cluster = quota(
        "sagemaker", "L-0000B002", "Maximum number instances allowed per SageMaker HyperPod cluster", 20
    )
    across = quota(
        "sagemaker", "L-0000B003", "Total number of instances allowed across SageMaker HyperPod clusters", 100
    )
    account = Account()
    account.listed_quotas("sagemaker", [per_cluster, across])
    account.listed_quotas("sagemaker", [per_cluster, across], defaults=True)  # asked once, on the first miss
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    checks = account.run(environment("hyperpod-slurm"))

    assert failures(checks) == []
    missing = only(checks, "SageMaker quota ml.c5.xlarge for cluster usage")
    assert missing.available == "not found in Service Quotas (sagemaker, us-east-1): not verified"


def test_an_instance_type_not_offered_in_the_placement_az_fails_and_names_an_az_that_offers_it() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 640)
    account.ec2_quota(G_AND_VT, 64)
    account.offerings({"t3.large": AZS, "g5.8xlarge": ["us-east-1b", "us-east-1c"]})
    account.efa({"g5.8xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    [failed] = failures(account.run(environment("eks-g5-efa")))

    assert failed.check == "EC2 offering g5.8xlarge"
    assert failed.needed == "us-east-1a (eks.efa_nodegroups[g5])"
    assert failed.available == "offered in us-east-1b, us-east-1c"
    assert failed.remedy.startswith(
        "g5.8xlarge is not offered in us-east-1a: set network.placement_availability_zone to us-east-1b"
    )


def test_an_instance_type_missing_from_one_of_several_azs_fails() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 640)
    account.ec2_quota(G_AND_VT, 64)
    account.offerings({"t3.large": ["us-east-1a"], "g5.8xlarge": AZS})
    account.efa({"g5.8xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    [failed] = failures(account.run(environment("eks-g5-efa")))

    assert (failed.check, failed.needed) == (
        "EC2 offering t3.large",
        "us-east-1a, us-east-1b (eks.system_nodegroup)",
    )
    assert failed.remedy.startswith(
        "t3.large is not offered in us-east-1b: pick availability_zones where it is (us-east-1a)"
    )


def test_efa_asked_of_a_type_without_efa_fails() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 640)
    account.ec2_quota(G_AND_VT, 64)
    account.offerings({"t3.large": AZS, "g5.8xlarge": AZS})
    account.efa({"g5.8xlarge": False})  # the catalogue says yes; the region's EC2 has the last word
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    [failed] = failures(account.run(environment("eks-g5-efa")))

    assert (failed.check, failed.needed, failed.available) == (
        "EFA on g5.8xlarge",
        "EFA (eks.efa_nodegroups[g5])",
        "EfaSupported: false",
    )
    assert failed.remedy == (
        "choose an EFA-capable instance type for eks.efa_nodegroups[g5], or move the group to eks.gpu_nodegroups"
    )


def test_lustre_capacity_above_the_fsx_quota_fails() -> None:
    account = Account()
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 0)])

    [failed] = account.run(environment("network-storage"))

    assert (failed.passed, failed.check, failed.available) == (
        False,
        "FSx quota L-AD2FC696 Lustre Scratch storage capacity",
        "0 GiB",
    )
    assert "--service-code fsx --quota-code L-AD2FC696 --desired-value 1200" in failed.remedy


def test_an_fsx_quota_the_account_does_not_list_passes_as_not_found() -> None:
    account = Account()
    account.listed_quotas("fsx", [quota("fsx", "L-C48231E5", "Lustre Scratch file systems", 100)])
    account.listed_quotas("fsx", [], defaults=True)

    [check] = account.run(environment("network-storage"))

    assert check.passed
    assert check.available == "not found in Service Quotas (fsx, us-east-1): not verified"


def test_aws_errors_become_failed_checks_naming_the_call_and_the_permission() -> None:
    account = Account()
    account.quotas.add_client_error(
        "get_service_quota",
        service_error_code="AccessDeniedException",
        service_message="User: arn:aws:iam::123456789012:user/ci is not authorized to perform: servicequotas:GetServiceQuota",
        http_status_code=400,
    )
    account.ec2_quota(G_AND_VT, 64)
    account.ec2.add_client_error(
        "describe_instance_type_offerings",
        service_error_code="UnauthorizedOperation",
        service_message="You are not authorized to perform this operation.",
        http_status_code=403,
    )
    account.efa({"g5.8xlarge": True})

    checks = account.run(parse_environment(ONE_G5_EFA_NODE))

    quota_error, offering_error = failures(checks)
    assert quota_error.check == f"EC2 quota {STANDARD[0]} {STANDARD[1]}"
    assert quota_error.available.startswith(
        "unknown: servicequotas:GetServiceQuota failed with AccessDeniedException: User: arn:aws:iam::"
    )
    assert quota_error.remedy.startswith("allow servicequotas:GetServiceQuota to the caller")
    assert offering_error.check == "EC2 instance-type offerings"
    assert "ec2:DescribeInstanceTypeOfferings failed with UnauthorizedOperation" in offering_error.available
    assert offering_error.remedy.startswith("allow ec2:DescribeInstanceTypeOfferings to the caller")


def test_the_required_actions_are_exactly_the_operations_preflight_calls() -> None:
    """REQUIRED_IAM_ACTIONS (what the console script and README say preflight needs) against preflight's
    source: every operation of its clients' services whose method it calls (``.describe_instance_types(``)
    or whose name it passes to a paginator (``"describe_instance_type_offerings"``)."""
    package = Path(preflight_module.__file__).parent
    source = "\n".join(module.read_text() for module in sorted(package.glob("*.py")))
    called = {
        f"{client.meta.service_model.signing_name}:{operation}"
        for client in vars(Account().clients).values()
        for method, operation in client.meta.method_to_api_mapping.items()
        if re.search(rf"\.{method}\(|\"{method}\"", source)
    }
    assert sorted(called) == sorted(REQUIRED_IAM_ACTIONS)


def test_missing_credentials_become_a_failed_check() -> None:
    class NoCredentials:
        meta = SimpleNamespace(region_name=REGION)

        def __getattr__(self, name: str) -> Any:
            def call(*args: object, **kwargs: object) -> None:
                raise NoCredentialsError()

            return call

    clients = AwsClients(service_quotas=NoCredentials(), ec2=NoCredentials())

    [failed] = preflight(environment("network-storage"), clients)

    assert (failed.passed, failed.available) == (False, "unknown: Unable to locate credentials")
    assert failed.remedy.startswith("configure credentials")


def test_clients_in_another_region_than_the_file_fail() -> None:
    account = Account(region="us-west-2")
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    [failed] = failures(account.run(environment("network-storage")))

    assert (failed.check, failed.needed, failed.available) == (
        "region",
        "us-east-1 (the file's region)",
        "us-west-2 (where preflight looked)",
    )


# --------------------------------------------------------------------------------------------------
# reserved capacity: reservations, Capacity Blocks and training plans named in the file

BLOCK = "cr-0123456789abcdef0"
PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"
#: Two p5.48xlarge nodes on a Capacity Block, EKS, placement AZ us-east-1a.
EKS_ON_A_BLOCK = {
    "region": REGION,
    "availability_zones": ["us-east-1a", "us-east-1b"],
    "storage": {"lustre": None},
    "eks": {
        "efa_nodegroups": [
            {
                "name": "p5",
                "instance_type": "p5.48xlarge",
                "size": 2,
                "capacity": {"type": "capacity-block", "reservation_id": BLOCK},
            }
        ]
    },
}
#: A controller and two ml.p5.48xlarge workers on a training plan, no FSx.
HYPERPOD_ON_A_PLAN = {
    "region": REGION,
    "availability_zones": ["us-east-1a", "us-east-1b"],
    "storage": {"lustre": None},
    "hyperpod": {
        "cluster_name": "plan",
        "instance_groups": [
            {"name": "controller", "instance_type": "ml.m5.2xlarge", "role": "controller"},
            {
                "name": "workers",
                "instance_type": "ml.p5.48xlarge",
                "count": 2,
                "partition": "gpu",
                "capacity": {"type": "training-plan", "training_plan_arn": PLAN},
            },
        ],
    },
}


def eks_block_account(**facts: Any) -> Account:
    """Quotas, offerings and EFA for EKS_ON_A_BLOCK, then the block as ``facts`` describe it."""
    account = Account()
    account.ec2_quota(STANDARD, 640)
    account.offerings({"t3.large": AZS, "p5.48xlarge": AZS})
    account.efa({"p5.48xlarge": True})
    account.reservation(BLOCK, **facts)
    return account


def hyperpod_plan_account(**facts: Any) -> Account:
    """SageMaker quotas with room for HYPERPOD_ON_A_PLAN, then the plan as ``facts`` describe it."""
    account = Account()
    account.listed_quotas(
        "sagemaker",
        [
            quota("sagemaker", "L-0000A001", "ml.m5.2xlarge for cluster usage", 4),
            quota("sagemaker", "L-0000A002", "ml.p5.48xlarge for cluster usage", 2),
            quota(
                "sagemaker",
                "L-0000A003",
                "Maximum number instances allowed per SageMaker HyperPod cluster",
                20,
            ),
            quota(
                "sagemaker",
                "L-0000A004",
                "Total number of instances allowed across SageMaker HyperPod clusters",
                100,
            ),
        ],
    )
    account.training_plan(PLAN, **facts)
    return account


def test_the_shipped_capacity_examples_name_their_reservations() -> None:
    demands = {d.where: d for d in instance_demands(environment("parallelcluster-p5-capacity-block"))}
    p5 = demands["parallelcluster.queues[gpu].compute_resources[p5]"]
    assert (p5.capacity, p5.capacity_reservation_id, p5.count) == (Capacity.CAPACITY_BLOCK, BLOCK, 2)
    [worker] = [d for d in instance_demands(environment("hyperpod-p5-training-plan")) if d.reserved]
    assert worker.reserved is not None and worker.reserved.training_plan_arn == PLAN


def test_an_active_block_of_the_right_type_size_and_az_passes_with_one_row_per_fact() -> None:
    checks = eks_block_account().run(parse_environment(EKS_ON_A_BLOCK))

    assert failures(checks) == []
    rows = [(c.check, c.available) for c in checks if c.check.startswith(f"Capacity Block {BLOCK}")]
    assert rows == [
        (f"Capacity Block {BLOCK}: state", "active"),
        (f"Capacity Block {BLOCK}: instance type and AZ", "p5.48xlarge in us-east-1a"),
        (f"Capacity Block {BLOCK}: free instances", "2 free of 2"),
        (f"Capacity Block {BLOCK}: end", "ends 2026-12-07 08:00 UTC"),
    ]
    assert not any(c.warning for c in checks)


def test_a_scheduled_block_passes_and_shows_its_start() -> None:
    start = NOW + timedelta(days=2)
    checks = eks_block_account(State="scheduled", StartDate=start).run(parse_environment(EKS_ON_A_BLOCK))

    assert failures(checks) == []
    state = only(checks, f"Capacity Block {BLOCK}: state")
    assert state.available == "scheduled, starts 2026-12-02 08:00 UTC (nodes launch from then on)"


def test_a_reservation_that_does_not_exist_fails() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 640)
    account.offerings({"t3.large": AZS, "p5.48xlarge": AZS})
    account.efa({"p5.48xlarge": True})
    account.ec2.add_client_error(
        "describe_capacity_reservations",
        service_error_code="InvalidCapacityReservationId.NotFound",
        service_message=f"The capacity reservation ID '{BLOCK}' does not exist",
        expected_params={"CapacityReservationIds": [BLOCK]},
    )

    [failed] = failures(account.run(parse_environment(EKS_ON_A_BLOCK)))

    assert failed.check == f"Capacity Block {BLOCK}: exists"
    assert failed.available == f"no capacity reservation {BLOCK} in us-east-1"
    assert failed.remedy == "check the id and the region, then set it in eks.efa_nodegroups[p5].capacity"


def test_a_block_in_another_az_fails_naming_the_az_and_the_fix() -> None:
    [failed] = failures(
        eks_block_account(AvailabilityZone="us-east-1b").run(parse_environment(EKS_ON_A_BLOCK))
    )

    assert failed.check == f"Capacity Block {BLOCK}: instance type and AZ"
    assert failed.available == "p5.48xlarge in us-east-1b"
    assert failed.remedy.startswith(
        "eks.efa_nodegroups[p5] launches in us-east-1a: use a reservation of that"
    )
    assert "network.placement_availability_zone" in failed.remedy


def test_a_block_of_another_instance_type_fails() -> None:
    [failed] = failures(eks_block_account(InstanceType="p5e.48xlarge").run(parse_environment(EKS_ON_A_BLOCK)))

    assert failed.check == f"Capacity Block {BLOCK}: instance type and AZ"
    assert failed.remedy.startswith("eks.efa_nodegroups[p5] runs p5.48xlarge:")


def test_a_block_too_small_for_the_nodes_fails() -> None:
    account = eks_block_account(TotalInstanceCount=2, AvailableInstanceCount=1)

    [failed] = failures(account.run(parse_environment(EKS_ON_A_BLOCK)))

    assert failed == Check(
        check=f"Capacity Block {BLOCK}: free instances",
        needed="2 instances (eks.efa_nodegroups[p5].size)",
        available="1 free of 2",
        passed=False,
        remedy="lower eks.efa_nodegroups[p5].size to 1, or reserve more instances",
    )


def test_an_expired_block_fails_its_state_and_its_end() -> None:
    account = eks_block_account(State="expired", EndDate=NOW - timedelta(hours=3), AvailableInstanceCount=0)

    failed = {c.check: c for c in failures(account.run(parse_environment(EKS_ON_A_BLOCK)))}

    assert set(failed) == {
        f"Capacity Block {BLOCK}: state",
        f"Capacity Block {BLOCK}: free instances",
        f"Capacity Block {BLOCK}: end",
    }
    assert failed[f"Capacity Block {BLOCK}: state"].available == "expired"
    assert failed[f"Capacity Block {BLOCK}: end"].available == "ended 2026-11-30 05:00 UTC"


def test_a_block_ending_within_a_day_passes_with_a_warning() -> None:
    checks = eks_block_account(EndDate=NOW + timedelta(hours=5)).run(parse_environment(EKS_ON_A_BLOCK))

    assert failures(checks) == []
    end = only(checks, f"Capacity Block {BLOCK}: end")
    assert end.warning and end.verdict == "WARN"
    assert end.available == "ends 2026-11-30 13:00 UTC, in 5.0 h: instances are terminated then"
    assert end.message.startswith("WARN: ")


def test_a_parallelcluster_reservation_is_checked_for_the_queues_max_count() -> None:
    document = environment("parallelcluster-c5n").model_dump(mode="json", exclude_none=True)
    queue = document["parallelcluster"]["queues"][0]
    queue["capacity"] = {"type": "reservation", "reservation_id": BLOCK}
    account = Account()
    account.ec2_quota(STANDARD, 640)  # the head node only: the reserved queue needs no quota
    account.offerings({"t3.medium": AZS, "c5n.9xlarge": AZS})
    account.efa({"c5n.9xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])
    account.reservation(
        BLOCK, InstanceType="c5n.9xlarge", AvailableInstanceCount=1, ReservationType="default"
    )

    [failed] = failures(account.run(parse_environment(document)))

    assert failed.check == f"capacity reservation {BLOCK}: free instances"
    assert failed.needed == "2 instances (parallelcluster.queues[compute].compute_resources[c5n].max_count)"


def test_an_active_training_plan_for_hyperpod_passes() -> None:
    checks = hyperpod_plan_account().run(parse_environment(HYPERPOD_ON_A_PLAN))

    assert failures(checks) == []
    assert (
        only(checks, f"training plan {PLAN}: instance type and AZ").available
        == "ml.p5.48xlarge in us-east-1a"
    )


@pytest.mark.parametrize(
    ("facts", "failed_check", "available"),
    [
        ({"Status": "Pending"}, "state", "Pending"),
        ({"Status": "Expired", "EndTime": NOW - timedelta(days=1)}, "state", "Expired"),
        ({"AvailableInstanceCount": 1}, "free instances", "1 free of 2"),
        ({"TargetResources": ["training-job"]}, "target", "training-job"),
    ],
)
def test_a_training_plan_that_cannot_run_the_workers_fails(
    facts: dict[str, Any], failed_check: str, available: str
) -> None:
    failed = failures(hyperpod_plan_account(**facts).run(parse_environment(HYPERPOD_ON_A_PLAN)))

    assert f"training plan {PLAN}: {failed_check}" in [c.check for c in failed]
    assert only(failed, f"training plan {PLAN}: {failed_check}").available == available


def test_a_training_plan_that_does_not_exist_fails() -> None:
    account = hyperpod_plan_account()
    account.sagemaker = Stubber(account.clients.sagemaker)  # replace the queued answer with an error
    account.sagemaker.add_client_error(
        "describe_training_plan",
        service_error_code="ResourceNotFound",
        service_message="Training plan not found",
        expected_params={"TrainingPlanName": PLAN},
    )

    [failed] = failures(account.run(parse_environment(HYPERPOD_ON_A_PLAN)))

    assert (failed.check, failed.available) == (
        f"training plan {PLAN}: exists",
        f"no training plan {PLAN} in us-east-1",
    )


# --------------------------------------------------------------------------------------------------
# AWS PCS


def test_pcs_demands_count_login_nodes_and_each_node_group_at_max_count_in_the_placement_az() -> None:
    login, compute = instance_demands(environment("pcs-c5n"))

    assert (login.where, login.instance_type, login.count, login.efa, login.count_field) == (
        "pcs.login_nodes",
        "t3.medium",
        1,
        False,
        "pcs.login_nodes.count",
    )
    assert (compute.where, compute.count, compute.efa, compute.count_field) == (
        "pcs.compute_node_groups[compute]",
        2,
        True,
        "pcs.compute_node_groups[compute].max_count",
    )
    assert compute.vcpus == 72 and compute.service is Service.EC2
    assert login.availability_zones == compute.availability_zones == ("us-east-1a",)


@pytest.mark.parametrize(
    ("group", "capacity"),
    [
        ({"capacity": {"type": "spot"}}, Capacity.SPOT),
        (
            {"capacity": {"type": "reservation", "reservation_id": "cr-0123456789abcdef0"}},
            Capacity.CAPACITY_RESERVATION,
        ),
        ({}, Capacity.ON_DEMAND),
    ],
)
def test_pcs_purchase_options(group: dict[str, Any], capacity: Capacity) -> None:
    document = {
        "region": REGION,
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "pcs": {
            "ami_id": "ami-0123456789abcdef0",
            "login_nodes": {"count": 0},
            "compute_node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", **group}],
        },
    }

    [demand] = instance_demands(parse_environment(document))
    assert demand.capacity is capacity
    assert (demand.reserved is not None) is (capacity is Capacity.CAPACITY_RESERVATION)


def test_pcs_environment_passes_with_login_and_compute_nodes_in_one_quota() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 128)
    account.offerings({"t3.medium": AZS, "c5n.9xlarge": ["us-east-1a"]})
    account.efa({"c5n.9xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    checks = account.run(environment("pcs-c5n"))

    assert failures(checks) == []
    standard = only(checks, "EC2 quota")
    assert standard.needed.startswith("74 vCPUs (t3.medium \N{MULTIPLICATION SIGN} 1 in pcs.login_nodes + ")
    assert only(checks, "EFA on c5n.9xlarge").passed


def test_pcs_environment_without_room_for_its_nodes_fails_naming_the_node_group() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 64)
    account.offerings({"t3.medium": AZS, "c5n.9xlarge": ["us-east-1a"]})
    account.efa({"c5n.9xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])

    checks = account.run(environment("pcs-c5n"))

    [failed] = failures(checks)
    assert "pcs.compute_node_groups[compute]" in failed.needed and failed.available == "64 vCPUs"


# --- HyperPod on EKS: the same SageMaker quotas and training plan checks, and the EKS system nodes


def test_hyperpod_eks_demands_its_groups_on_sagemaker_and_its_system_nodes_on_ec2() -> None:
    demands = instance_demands(environment("hyperpod-eks-p5"))

    assert [(d.where, d.instance_type, d.count, d.service) for d in demands] == [
        ("hyperpod_eks.instance_groups[p5]", "ml.p5.48xlarge", 2, Service.SAGEMAKER),
        ("hyperpod_eks.system_nodegroup", "t3.large", 2, Service.EC2),
    ]
    assert demands[0].reserved is not None and demands[0].reserved.training_plan_arn == PLAN


def test_hyperpod_eks_checks_sagemaker_quotas_its_volume_and_its_training_plan() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 640)
    account.listed_quotas(
        "sagemaker",
        [
            quota("sagemaker", "L-0000A002", "ml.p5.48xlarge for cluster usage", 2),
            quota(
                "sagemaker",
                "L-0000A003",
                "Maximum number instances allowed per SageMaker HyperPod cluster",
                20,
            ),
            quota(
                "sagemaker",
                "L-0000A004",
                "Total number of instances allowed across SageMaker HyperPod clusters",
                100,
            ),
            quota(
                "sagemaker",
                "L-0000A005",
                "Maximum size of EBS volume in GB for a SageMaker HyperPod cluster instance",
                1000,
            ),
        ],
    )
    account.offerings({"t3.large": AZS})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_PERSISTENT_2, 100800)])
    account.training_plan(PLAN)

    checks = account.run(environment("hyperpod-eks-p5"))

    [volume] = failures(checks)
    assert volume.check.endswith("Maximum size of EBS volume in GB for a SageMaker HyperPod cluster instance")
    assert (volume.needed, volume.available) == (
        "2000 GB (hyperpod_eks.instance_groups[p5].volume_gib)",
        "1000 GB",
    )
    assert only(checks, f"training plan {PLAN}: free instances").available == "2 free of 2"
    assert (
        only(checks, "SageMaker quota L-0000A002 ml.p5.48xlarge for cluster usage").available == "2 instances"
    )


# --------------------------------------------------------------------------------------------------
# version advice: the synth's warnings, repeated


def _with(name: str, section: str, **changes: Any) -> EnvironmentConfig:
    document = yaml.safe_load((ENVIRONMENTS / f"{name}.yaml").read_text())
    target = document[section]
    for key, value in changes.items():
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target[parent]
        target[leaf] = value
    return parse_environment(document)


def test_a_kubernetes_version_past_standard_support_is_a_warning_row_from_its_end_date() -> None:
    config = _with("hyperpod-eks-g5", "hyperpod_eks", kubernetes_version="1.34")
    assert version_checks(config, datetime(2026, 12, 1, tzinfo=UTC).date()) == []
    (row,) = version_checks(config, datetime(2026, 12, 2, tzinfo=UTC).date())
    assert row == Check(
        check="version of hyperpod_eks.kubernetes_version",
        needed="a version in standard support, without known CVEs",
        available="Kubernetes 1.34: Kubernetes 1.34 left Amazon EKS standard support on 2026-12-02: the cluster "
        "runs in extended support at $0.60 instead of $0.10 per cluster-hour (about $365 a month more).",
        passed=True,
        remedy="choose 1.35 (standard support until 2027-03-27) "
        "(docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html)",
        warning=True,
    )
    assert row.verdict == "WARN"


def test_the_eks_default_is_advised_against_once_it_leaves_standard_support() -> None:
    config = environment("eks-g5-efa")
    assert version_checks(config, datetime(2027, 3, 26, tzinfo=UTC).date()) == []
    (row,) = version_checks(config, datetime(2027, 3, 27, tzinfo=UTC).date())
    assert (row.check, row.available.split(":")[0]) == ("version of eks", "Kubernetes 1.35")
    assert row.remedy.startswith("choose 1.36 (standard support until 2027-08-02)")


def test_a_pcs_slurm_series_without_the_cve_fixes_is_a_warning_row() -> None:
    assert version_checks(environment("pcs-c5n"), NOW.date()) == []
    (row,) = version_checks(_with("pcs-c5n", "pcs", **{"slurm.version": "24.11"}), NOW.date())
    assert (row.check, row.verdict) == ("version of pcs.slurm.version", "WARN")
    assert row.available.startswith("Slurm 24.11: Slurm 24.11 is affected by the 2026 Slurm CVEs")
    assert row.remedy == "choose a series with them (25.05.9, 25.11.8, 26.05.4 or later)"


def test_parallelcluster_below_the_cve_floor_is_a_warning_row(monkeypatch: pytest.MonkeyPatch) -> None:
    config = environment("parallelcluster-c5n")
    assert version_checks(config, NOW.date()) == []
    monkeypatch.setattr(preflight_versions, "PARALLELCLUSTER_VERSION", "3.16.0")
    (row,) = version_checks(config, NOW.date())
    assert (row.check, row.verdict) == ("version of parallelcluster", "WARN")
    assert row.remedy.startswith("use ParallelCluster 3.16.1 (Slurm 25.11.8)")


def test_preflight_repeats_the_advice_after_the_accounts_checks() -> None:
    account = Account()
    account.ec2_quota(STANDARD, 640)
    account.ec2_quota(G_AND_VT, 64)
    account.offerings({"t3.large": AZS, "g5.8xlarge": AZS})
    account.efa({"g5.8xlarge": True})
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])
    config = environment("eks-g5-efa")
    with account.quotas, account.ec2, account.sagemaker:
        checks = preflight(config, account.clients, now=datetime(2027, 4, 1, tzinfo=UTC))
    assert failures(checks) == []
    assert [c.check for c in checks][-2:] == [
        f"FSx quota {LUSTRE_SCRATCH[0]} {LUSTRE_SCRATCH[1]}",
        "version of eks",
    ]
    assert checks[-1].verdict == "WARN"


# --------------------------------------------------------------------------------------------------
# a HyperPod Slurm cluster deployed already: its Slurm configuration must be the file's


def _slurm_account(**deployed: bool) -> Account:
    """hyperpod-slurm.yaml's quotas all fit; ``api=...`` deploys a cluster of its name first."""
    account = Account()
    account.listed_quotas(
        "sagemaker",
        [
            quota("sagemaker", "L-0000B001", "ml.c5.xlarge for cluster usage", 10),
            quota(
                "sagemaker",
                "L-0000B002",
                "Maximum number instances allowed per SageMaker HyperPod cluster",
                20,
            ),
            quota(
                "sagemaker",
                "L-0000B003",
                "Total number of instances allowed across SageMaker HyperPod clusters",
                100,
            ),
        ],
    )
    account.listed_quotas("fsx", [quota("fsx", *LUSTRE_SCRATCH, 100800)])
    if deployed:
        account.deployed_cluster("ml-cluster", api=deployed["api"])
    return account


SLURM_CONFIG_CHECK = "hyperpod.slurm_config of the deployed cluster ml-cluster"


def test_no_cluster_of_the_files_name_adds_no_row() -> None:
    checks = _slurm_account().run(environment("hyperpod-slurm"))
    assert failures(checks) == []
    assert [c for c in checks if c.check == SLURM_CONFIG_CHECK] == []


def test_a_legacy_cluster_fails_an_api_file_naming_the_way_out() -> None:
    checks = _slurm_account(api=False).run(environment("hyperpod-slurm"))
    assert failures(checks) == [
        Check(
            check=SLURM_CONFIG_CHECK,
            needed="api (this file)",
            available="legacy (no SlurmConfig: provisioning_parameters.json)",
            passed=False,
            remedy="state hyperpod.slurm_config: legacy to keep the cluster as deployed; deploying api would fail "
            "and roll back, or move the cluster over for good (docs/hyperpod-slurm.md)",
        )
    ]


def test_an_api_cluster_fails_a_legacy_file() -> None:
    checks = _slurm_account(api=True).run(_with("hyperpod-slurm", "hyperpod", slurm_config="legacy"))
    assert failures(checks) == [
        Check(
            check=SLURM_CONFIG_CHECK,
            needed="legacy (this file)",
            available="api (SlurmConfig on its instance groups)",
            passed=False,
            remedy="state hyperpod.slurm_config: api: a cluster configured through the API cannot go back to "
            "provisioning_parameters.json",
        )
    ]


@pytest.mark.parametrize(("api", "mode"), [(True, None), (True, "api"), (False, "legacy")])
def test_a_cluster_deployed_as_the_file_says_passes(api: bool, mode: str | None) -> None:
    config = (
        environment("hyperpod-slurm")
        if mode is None
        else _with("hyperpod-slurm", "hyperpod", slurm_config=mode)
    )
    checks = _slurm_account(api=api).run(config)
    assert failures(checks) == []
    [row] = [c for c in checks if c.check == SLURM_CONFIG_CHECK]
    assert row.passed and row.needed == f"{'api' if api else 'legacy'} (this file)"
