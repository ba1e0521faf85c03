"""Pre-deploy checks of an environment file against the AWS account it will deploy into.

A deployment that runs out of quota fails half-way, often an hour in (FSx and EKS are slow to create and
slower to roll back). :func:`preflight` asks the account first, read-only::

    import boto3
    from training_clusters.config import load_environment
    from training_clusters.preflight import AwsClients, preflight

    config = load_environment("environments/eks-g5-efa.yaml")
    clients = AwsClients.from_session(boto3.session.Session(profile_name="dev"), config.region)
    for check in preflight(config, clients):
        print(check.message)

What is checked:

- **EC2 vCPU quotas**: the vCPUs each quota family needs (instances times vCPUs from the catalogue), against
  the account's "Running On-Demand <family> instances" quota, or "All <family> Spot Instance Requests" for
  Spot capacity. Instances launched into a Capacity Block or a capacity reservation are reported as
  skipped: they need no further On-Demand vCPU quota (the reservation itself is checked below).
- **SageMaker HyperPod quotas**: "ml.<type> for cluster usage" per instance type (instances, summed over
  the instance groups), the instances-per-cluster and instances-across-clusters quotas, and the EBS volume
  size quota where ``extra_volume_gib`` is set. Found by name in ``ListServiceQuotas`` (their codes are
  not documented).
- **Offerings**: every EC2 instance type is offered in each AZ it would launch in (the placement AZ for
  EFA nodegroups and ParallelCluster, ``availability_zones`` for the other EKS nodegroups).
- **EFA**: EC2 reports ``EfaSupported`` for every type the file asks EFA of.
- **FSx for Lustre**: ``storage.lustre.storage_capacity_gib`` against the account-wide storage quota of
  its deployment type.
- **Reserved capacity**: every capacity reservation and Capacity Block a file names (``capacity``'s
  ``reservation_id``; EC2 ``DescribeCapacityReservations`` covers both) and every SageMaker
  training plan (``DescribeTrainingPlan``): it exists; its state (active, or scheduled: the start is
  shown); its instance type and AZ are those of the group (the placement subnet's AZ); it has enough free
  instances (``AvailableInstanceCount``) for the group's nodes; when it ends (a warning within 24 hours, a
  failure once ended); a training plan serves HyperPod clusters. A resource group of reservations is
  reported as not verified.
- **Versions** (no AWS call): the advice the synth gives as warnings, repeated: a Kubernetes version past EKS
  standard support (the extended-support price), a Slurm or ParallelCluster below the fixes for the 2026
  Slurm CVEs (:mod:`training_clusters.rules.versions`).

A quota compares what the file needs with the quota's value: capacity already in use in the account
(running instances, other clusters, other file systems) is not subtracted, so a pass means "enough if
nothing else is running". A quota that Service Quotas does not know in the region is reported as a
passing check whose ``available`` says "not found": nothing was verified. An AWS error (access denied,
expired credentials ...) becomes a failed check saying which call failed and what to fix.

Not checked: HyperPod AZ availability (no API lists ``ml.`` types per AZ), On-Demand capacity itself (quota
is permission to ask, not capacity), placement-group, VPC, ENI and EIP quotas.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
    StubResponseError,
)

from training_clusters.catalog import CATALOG, HYPERPOD_PREFIX, lookup, quota_family_of
from training_clusters.config import EnvironmentConfig, HyperPodConfig, HyperPodEksConfig, stated_capacity
from training_clusters.model import capacity as capacity_model
from training_clusters.model.options import CapacityKind, LustreDeploymentType
from training_clusters.model.releases import EKS_KUBERNETES_VERSION, PARALLELCLUSTER_VERSION
from training_clusters.orchestrators import orchestrator_of
from training_clusters.rules.versions import (
    kubernetes_support_advice,
    parallelcluster_cve_advice,
    slurm_cve_advice,
)

__all__ = [
    "LUSTRE_STORAGE_QUOTAS",
    "REQUIRED_IAM_ACTIONS",
    "AwsClients",
    "Capacity",
    "Check",
    "InstanceDemand",
    "Service",
    "instance_demands",
    "preflight",
    "version_checks",
]

LUSTRE_STORAGE_QUOTAS: Mapping[LustreDeploymentType, tuple[str, tuple[str, ...]]] = MappingProxyType(
    {
        LustreDeploymentType.SCRATCH_2: ("L-AD2FC696", ("Lustre Scratch storage capacity",)),
        LustreDeploymentType.PERSISTENT_2: (
            "L-8F1B9C74",
            ("Lustre Persistent_2 storage capacity", "Lustre Persistent_2 file storage capacity"),
        ),
    }
)
"""Code and names of the account-wide FSx for Lustre storage quota (GiB, service code ``fsx``) per type.

Names: FSx for Lustre User Guide, "Quotas" (https://docs.aws.amazon.com/fsx/latest/LustreGuide/limits.html),
"Quotas that you can increase" (default 100800 GiB for scratch). Codes: as ``ListServiceQuotas`` lists them
(not in the AWS docs), so the quota is matched by code or by any of its names.
"""

REQUIRED_IAM_ACTIONS = (
    "servicequotas:GetServiceQuota",
    "servicequotas:GetAWSDefaultServiceQuota",
    "servicequotas:ListServiceQuotas",
    "servicequotas:ListAWSDefaultServiceQuotas",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeCapacityReservations",
    "sagemaker:DescribeTrainingPlan",
    "sagemaker:DescribeCluster",
)
"""Every action preflight calls: all read-only."""

# SageMaker quota names, from the SageMaker Developer Guide, HyperPod prerequisites, "List of common service
# quotas" (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites.html): per type
# "ml.<instance_type> for cluster usage" (instances), and the three below. Their codes are not documented.
_SAGEMAKER_PER_CLUSTER = re.compile(r"maximum number (of )?instances allowed per sagemaker hyperpod cluster")
_SAGEMAKER_ACROSS_CLUSTERS = re.compile(
    r"total number of instances allowed across sagemaker hyperpod clusters"
)
_SAGEMAKER_EBS = re.compile(r"maximum size of ebs volume in gb for a (sagemaker )?hyperpod cluster instance")
_TIMES = "\N{MULTIPLICATION SIGN}"
_PAGE_SIZE = 100
"""Service Quotas' largest page."""

_ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"}
_BAD_CREDENTIALS = {
    "AuthFailure",
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidClientTokenId",
    "RequestExpired",
    "UnrecognizedClientException",
}
_THROTTLED = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException"}


# --------------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class Check:
    """One row of the preflight table."""

    check: str
    """What was checked, e.g. ``EC2 quota L-DB2E81BA Running On-Demand G and VT instances``."""
    needed: str
    """What the environment needs and which groups of the file need it, e.g. 32 vCPUs (g5.8xlarge,
    1 instance, in eks.efa_nodegroups[g5])."""
    available: str
    """What the account has, e.g. ``8 vCPUs``; starts with "skipped" or says "not found" when not verified."""
    passed: bool
    remedy: str
    """How to fix it (the exact quota-increase command, or the field to change); empty when passed."""
    warning: bool = False
    """Passed, but worth a look (a reservation ending within a day)."""

    @property
    def verdict(self) -> str:
        """``pass``, ``WARN`` (passed, with a warning) or ``FAIL``."""
        if not self.passed:
            return "FAIL"
        return "WARN" if self.warning else "pass"

    @property
    def message(self) -> str:
        """The row as one sentence."""
        verdict = self.verdict
        text = f"{verdict}: {self.check}: needed {self.needed}; available {self.available}"
        return f"{text}; fix: {self.remedy}" if self.remedy else text

    def as_dict(self) -> dict[str, object]:
        """The row as plain data (for JSON)."""
        return {
            "check": self.check,
            "needed": self.needed,
            "available": self.available,
            "passed": self.passed,
            "remedy": self.remedy,
            "warning": self.warning,
        }


@dataclass(frozen=True)
class AwsClients:
    """The boto3 clients preflight calls, all in the environment's region (tests pass Stubber-wrapped ones)."""

    service_quotas: Any
    ec2: Any
    sagemaker: Any = None
    """Asked about training plans, and about a HyperPod Slurm cluster of the file's name that exists already."""

    @classmethod
    def from_session(cls, session: boto3.session.Session, region: str) -> AwsClients:
        """Clients of ``session`` in ``region``, with standard retries for throttling."""
        config = Config(retries={"mode": "standard", "max_attempts": 5})
        return cls(
            service_quotas=session.client("service-quotas", region_name=region, config=config),
            ec2=session.client("ec2", region_name=region, config=config),
            sagemaker=session.client("sagemaker", region_name=region, config=config),
        )

    @property
    def region(self) -> str:
        """The region the clients call."""
        return str(self.ec2.meta.region_name)


# --------------------------------------------------------------------------------------------------
# what the environment asks for (pure)


class Service(StrEnum):
    """Who launches the instances, and so whose quotas they count against."""

    EC2 = "ec2"
    SAGEMAKER = "sagemaker"


class Capacity(StrEnum):
    """How the instances are bought."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    CAPACITY_BLOCK = "capacity-block"
    CAPACITY_RESERVATION = "capacity-reservation"


@dataclass(frozen=True)
class InstanceDemand:
    """One group of instances the environment launches."""

    instance_type: str
    """As the file spells it: ``g5.8xlarge``, or ``ml.p5.48xlarge`` for HyperPod."""
    count: int
    """Instances at most (a ParallelCluster queue scales to ``max_count``)."""
    where: str
    """Where in the file, e.g. ``eks.efa_nodegroups[g5]``."""
    count_field: str
    """The setting that sets ``count``, e.g. ``eks.efa_nodegroups[g5].size``."""
    availability_zones: tuple[str, ...]
    """The AZs the group may launch in."""
    in_placement_az: bool
    """Whether the group lives in the placement subnet (``network.placement_availability_zone``)."""
    service: Service = Service.EC2
    """Whose quotas the instances count against. Default: EC2's."""
    capacity: Capacity = Capacity.ON_DEMAND
    """How they are bought. Default: On-Demand."""
    efa: bool = False
    """Whether the file asks for EFA on these instances. Default: no."""
    capacity_reservation_id: str | None = None
    reserved: capacity_model.Capacity | None = None
    """The reservation, Capacity Block or training plan the group launches into."""
    described_vcpus: int | None = None
    """vCPUs of one instance as EC2 describes the type (``VCpuInfo.DefaultVCpus``): for a type the catalogue
    does not know (a controller, login, head or system node may be any type). Default: the catalogue's."""

    @property
    def ec2_instance_type(self) -> str:
        """The EC2 name, without SageMaker's ``ml.`` prefix."""
        return self.instance_type.removeprefix(HYPERPOD_PREFIX)

    @property
    def vcpus(self) -> int:
        """vCPUs of the whole group, as EC2 vCPU quotas count them (catalogue or described vCPUs times count)."""
        each = (
            self.described_vcpus if self.described_vcpus is not None else lookup(self.ec2_instance_type).vcpus
        )
        return each * self.count

    @property
    def description(self) -> str:
        """Type, count and place: ``g5.8xlarge \N{MULTIPLICATION SIGN} 2 in eks.efa_nodegroups[g5]``."""
        return f"{self.instance_type} {_TIMES} {self.count} in {self.where}"


def instance_demands(config: EnvironmentConfig) -> tuple[InstanceDemand, ...]:
    """Every instance group ``config`` launches, in file order (its orchestrator's ``demands`` part)."""
    orchestrator = orchestrator_of(config)
    return () if orchestrator is None else tuple(orchestrator.load("demands")(config))


def _demand(
    where: str,
    group: Any,
    count_key: str,
    zones: tuple[str, ...],
    *,
    placed: bool,
    bought: capacity_model.Capacity | None = None,
    efa: bool = False,
    count: int | None = None,
) -> InstanceDemand:
    """The demand of the EC2 group at ``where`` in the file: ``group.instance_type`` times
    ``group.<count_key>`` (or ``count``), in ``zones`` (``placed``: the placement subnet's), bought as
    ``bought`` (its quota and reservation). Default: On-Demand, no EFA."""
    return InstanceDemand(
        instance_type=group.instance_type,
        count=getattr(group, count_key) if count is None else count,
        where=where,
        count_field=f"{where}.{count_key}",
        availability_zones=zones,
        in_placement_az=placed,
        capacity=Capacity.ON_DEMAND if bought is None else _bought(bought),
        efa=efa,
        capacity_reservation_id=None if bought is None else bought.reservation_id,
        reserved=_reserved(bought),
    )


@dataclass(frozen=True)
class _HyperPodGroup:
    """An instance group of either HyperPod section, in the terms preflight checks it."""

    name: str
    instance_type: str
    count: int
    capacity: capacity_model.Capacity | None
    volume_gib: int | None
    count_field: str = "count"
    """The setting that sets ``count``: ``max_count`` for a group Karpenter scales."""


def _hyperpod_section(config: EnvironmentConfig) -> tuple[str, str, list[_HyperPodGroup]] | None:
    """(section, cluster name, instance groups) of the environment's HyperPod cluster, Slurm or EKS; or None."""
    orchestrator = orchestrator_of(config)
    spec = None if orchestrator is None else getattr(config, orchestrator.section)
    if isinstance(spec, HyperPodConfig):
        groups = [
            _HyperPodGroup(g.name, g.instance_type, g.count, stated_capacity(g.capacity), g.extra_volume_gib)
            for g in spec.instance_groups
        ]
    elif isinstance(spec, HyperPodEksConfig):
        groups = [
            # an autoscaled group may reach max_count nodes: the quota must allow that many
            _HyperPodGroup(
                g.name,
                g.instance_type,
                g.nodes,
                stated_capacity(g.capacity),
                g.volume_gib,
                "count" if g.max_count is None else "max_count",
            )
            for g in spec.instance_groups
        ]
    else:
        return None
    assert orchestrator is not None
    return orchestrator.section, spec.cluster_name, groups


def _instance_group_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    found = _hyperpod_section(config)
    assert found is not None
    section, _, groups = found
    # The HyperPod stacks put every instance group in the placement subnet; HyperPod sets up EFA itself.
    return [
        InstanceDemand(
            instance_type=group.instance_type,
            count=group.count,
            where=f"{section}.instance_groups[{group.name}]",
            count_field=f"{section}.instance_groups[{group.name}].{group.count_field}",
            service=Service.SAGEMAKER,
            availability_zones=(config.placement_availability_zone,),
            in_placement_az=True,
            reserved=_reserved(group.capacity),
        )
        for group in groups
    ]


def hyperpod_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    """A HyperPod Slurm cluster's instance groups."""
    return _instance_group_demands(config)


def hyperpod_eks_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    """HyperPod's instance groups, and the EKS cluster's own system nodes (EC2 instances)."""
    assert config.hyperpod_eks is not None
    every_az = tuple(config.availability_zones)
    system = config.hyperpod_eks.system_nodegroup
    return [
        *_instance_group_demands(config),
        _demand("hyperpod_eks.system_nodegroup", system, "size", every_az, placed=False),
    ]


def parallelcluster_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    """The instances of the ``parallelcluster`` section."""
    spec = config.parallelcluster
    assert spec is not None
    placement = (config.placement_availability_zone,)
    # one head node: the setting that makes it is its instance type
    demands = [
        _demand("parallelcluster.head_node", spec.head_node, "instance_type", placement, placed=True, count=1)
    ]
    for queue in spec.queues:
        for resource in queue.compute_resources:
            where = f"parallelcluster.queues[{queue.name}].compute_resources[{resource.name}]"
            bought = resource.resource_capacity() or queue.queue_capacity()
            demands.append(
                _demand(
                    where,
                    resource,
                    "max_count",
                    placement,
                    placed=True,
                    bought=bought,
                    efa=resource.efa_enabled,
                )
            )
    return demands


def pcs_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    """The instances of the ``pcs`` section."""
    spec = config.pcs
    assert spec is not None
    # The PCS stack puts every node group, login nodes included, in the placement subnet.
    placement = (config.placement_availability_zone,)
    demands = []
    if spec.login_nodes.count:
        demands.append(_demand("pcs.login_nodes", spec.login_nodes, "count", placement, placed=True))
    for group in spec.compute_node_groups:
        where = f"pcs.compute_node_groups[{group.name}]"
        demands.append(
            _demand(where, group, "max_count", placement, placed=True, bought=group.node_capacity(),
                    efa=group.efa_enabled)
        )  # fmt: skip
    return demands


def _bought(capacity: capacity_model.Capacity) -> Capacity:
    """The quota view of the model: a reservation or block needs no further On-Demand quota."""
    return {
        CapacityKind.SPOT: Capacity.SPOT,
        CapacityKind.CAPACITY_BLOCK: Capacity.CAPACITY_BLOCK,
        CapacityKind.RESERVATION: Capacity.CAPACITY_RESERVATION,
    }.get(capacity.kind, Capacity.ON_DEMAND)


def _reserved(capacity: capacity_model.Capacity | None) -> capacity_model.Capacity | None:
    return capacity if capacity is not None and capacity.is_reserved else None


def eks_demands(config: EnvironmentConfig) -> list[InstanceDemand]:
    """The EKS cluster's system nodegroup and its EFA and GPU nodegroups."""
    eks = config.eks
    assert eks is not None
    every_az, placement = tuple(config.availability_zones), (config.placement_availability_zone,)
    demands = [_demand("eks.system_nodegroup", eks.system_nodegroup, "size", every_az, placed=False)]
    for group in eks.efa_nodegroups:
        where = f"eks.efa_nodegroups[{group.name}]"
        demands.append(
            _demand(where, group, "size", placement, placed=True, bought=group.node_capacity(), efa=True)
        )
    for gpu_group in eks.gpu_nodegroups:
        bought = gpu_group.node_capacity()
        # reserved capacity puts the group in the placement subnet (one AZ); otherwise every AZ
        zones = placement if bought.is_reserved else every_az
        where = f"eks.gpu_nodegroups[{gpu_group.name}]"
        demands.append(_demand(where, gpu_group, "size", zones, placed=bought.is_reserved, bought=bought))
    return demands


# --------------------------------------------------------------------------------------------------
# the checks


def preflight(config: EnvironmentConfig, clients: AwsClients, *, now: datetime | None = None) -> list[Check]:
    """Check ``config`` against the account behind ``clients``; the deployment is safe to try when all pass.

    Calls, in this order: EC2 instance types (only for EC2 types the catalogue does not know: their vCPUs),
    Service Quotas (EC2 quotas, then SageMaker, then FSx), EC2 (offerings, instance types, then each capacity
    reservation) and SageMaker (each training plan, then the HyperPod Slurm cluster of the file's name), read-only;
    see
    :data:`REQUIRED_IAM_ACTIONS`. ``now`` (default: the current time) dates the reservations' ends and the
    version advice (:func:`version_checks`).
    """
    demands, described = _described(instance_demands(config), clients)
    moment = now or datetime.now(UTC)
    return [
        *_region_check(config, clients),
        *described,
        *_ec2_quota_checks(demands, clients),
        *_sagemaker_quota_checks(config, demands, clients),
        *_offering_checks(config, demands, clients),
        *_efa_checks(demands, clients),
        *_lustre_quota_checks(config, clients),
        *_reserved_capacity_checks(demands, clients, moment),
        *version_checks(config, moment.date()),
        *_slurm_config_checks(config, clients),
    ]


#: What preflight repeats of the synth's version advice: (field, version, advice or ``None`` when fine).
VersionChoice = tuple[str, str, str | None]


def eks_versions(config: EnvironmentConfig, today: date) -> VersionChoice:
    """The Kubernetes version of an EKS environment against EKS standard support on ``today``."""
    return (
        "eks",
        f"Kubernetes {EKS_KUBERNETES_VERSION}",
        kubernetes_support_advice(EKS_KUBERNETES_VERSION, today),
    )


def hyperpod_eks_versions(config: EnvironmentConfig, today: date) -> VersionChoice:
    """The Kubernetes version the ``hyperpod_eks`` section chooses against EKS standard support on ``today``."""
    assert config.hyperpod_eks is not None
    version = config.hyperpod_eks.kubernetes_version
    return (
        "hyperpod_eks.kubernetes_version",
        f"Kubernetes {version}",
        kubernetes_support_advice(version, today),
    )


def pcs_versions(config: EnvironmentConfig, today: date) -> VersionChoice:
    """The Slurm series a PCS cluster runs against the fixes for the 2026 Slurm CVEs."""
    assert config.pcs is not None
    series = config.pcs.slurm.version.value
    return ("pcs.slurm.version", f"Slurm {series}", slurm_cve_advice(series))


def parallelcluster_versions(config: EnvironmentConfig, today: date) -> VersionChoice:
    """The ParallelCluster release we pin against the fixes for the 2026 Slurm CVEs."""
    advice = parallelcluster_cve_advice(PARALLELCLUSTER_VERSION)
    return ("parallelcluster", f"AWS ParallelCluster {PARALLELCLUSTER_VERSION}", advice)


def hyperpod_versions(config: EnvironmentConfig, today: date) -> VersionChoice:
    """HyperPod picks its own Slurm and AMI: nothing of ours to advise on."""
    return ("hyperpod", "SageMaker HyperPod", None)


def _slurm_config_checks(config: EnvironmentConfig, clients: AwsClients) -> list[Check]:
    """A HyperPod Slurm cluster of the file's name deployed already, by this file or an earlier version of the
    library: its Slurm configuration must be the file's. ``SlurmConfig`` cannot join a cluster configured by
    ``provisioning_parameters.json`` (the update fails and rolls back, or migrates the cluster for good), and a
    cluster configured through the API cannot go back (docs/hyperpod-slurm.md). No row without such a cluster."""
    spec = config.hyperpod
    if spec is None or clients.sagemaker is None:
        return []
    check = f"hyperpod.slurm_config of the deployed cluster {spec.cluster_name}"
    wanted = "api" if spec.api_driven else "legacy"
    needed = f"{wanted} (this file)"
    try:
        cluster = clients.sagemaker.describe_cluster(ClusterName=spec.cluster_name)
    except ClientError as error:
        if _error_code(error) in ("ResourceNotFound", "ValidationException"):
            return []
        return [_failed_call(check, needed, error, clients.sagemaker)]
    except BotoCoreError as error:
        return [_failed_call(check, needed, error, clients.sagemaker)]
    deployed = "api" if any("SlurmConfig" in g for g in cluster.get("InstanceGroups", [])) else "legacy"
    shape = {
        "api": "api (SlurmConfig on its instance groups)",
        "legacy": "legacy (no SlurmConfig: provisioning_parameters.json)",
    }[deployed]
    if deployed == wanted:
        return [Check(check=check, needed=needed, available=shape, passed=True, remedy="")]
    remedy = (
        "state hyperpod.slurm_config: legacy to keep the cluster as deployed; deploying api would fail and roll "
        "back, or move the cluster over for good (docs/hyperpod-slurm.md)"
        if deployed == "legacy"
        else "state hyperpod.slurm_config: api: a cluster configured through the API cannot go back to "
        "provisioning_parameters.json"
    )
    return [Check(check=check, needed=needed, available=shape, passed=False, remedy=remedy)]


def version_checks(config: EnvironmentConfig, today: date) -> list[Check]:
    """The synth's version advice, repeated (no AWS call): a Kubernetes version past EKS standard support on
    ``today``, a Slurm or ParallelCluster below the fixes for the 2026 Slurm CVEs. A warning row each; none when
    every version is fine."""
    orchestrator = orchestrator_of(config)
    chosen: list[VersionChoice] = (
        [] if orchestrator is None else [orchestrator.load("versions")(config, today)]
    )
    checks = []
    for field, version, advice in chosen:
        if advice is None:
            continue
        problem, _, fix = advice.partition(" Fix: ")
        checks.append(
            Check(
                check=f"version of {field}",
                needed="a version in standard support, without known CVEs",
                available=f"{version}: {problem}",
                passed=True,
                remedy=fix,
                warning=True,
            )
        )
    return checks


def _region_check(config: EnvironmentConfig, clients: AwsClients) -> list[Check]:
    if clients.region == config.region:
        return []
    return [
        Check(
            check="region",
            needed=f"{config.region} (the file's region)",
            available=f"{clients.region} (where preflight looked)",
            passed=False,
            remedy=f"run preflight in {config.region}: its quotas and AZs are the ones that matter",
        )
    ]


# --- EC2 quotas


def _described(
    demands: tuple[InstanceDemand, ...], clients: AwsClients
) -> tuple[tuple[InstanceDemand, ...], list[Check]]:
    """``demands`` with the vCPUs EC2 describes for each type the catalogue does not know (a controller, login,
    head or system node may be any type), and a failed check when EC2 could not say."""
    unknown = list(
        dict.fromkeys(
            d.ec2_instance_type
            for d in demands
            if d.service is Service.EC2 and d.ec2_instance_type not in CATALOG
        )
    )
    if not unknown:
        return demands, []
    try:
        described = clients.ec2.describe_instance_types(InstanceTypes=unknown)["InstanceTypes"]
    except (ClientError, BotoCoreError) as error:
        failed = _failed_call("EC2 instance types", f"vCPUs of {', '.join(unknown)}", error, clients.ec2)
        return tuple(d for d in demands if d.ec2_instance_type not in unknown), [failed]
    vcpus = {t["InstanceType"]: t["VCpuInfo"]["DefaultVCpus"] for t in described}
    missing = [name for name in unknown if name not in vcpus]
    checks = [
        Check(
            check=f"EC2 instance type {name}",
            needed=f"{name} ({', '.join(d.where for d in demands if d.ec2_instance_type == name)})",
            available=f"not described by EC2 in {clients.region}",
            passed=False,
            remedy=f"check the spelling of {name}, or choose a type EC2 offers in {clients.region}",
        )
        for name in missing
    ]
    kept = tuple(
        replace(d, described_vcpus=vcpus[d.ec2_instance_type]) if d.ec2_instance_type in vcpus else d
        for d in demands
        if d.ec2_instance_type not in missing
    )
    return kept, checks


def _ec2_quota_checks(demands: Sequence[InstanceDemand], clients: AwsClients) -> list[Check]:
    groups: dict[tuple[str, str], list[InstanceDemand]] = {}
    reserved: list[Check] = []
    unquoted: list[Check] = []
    for demand in demands:
        if demand.service is not Service.EC2:
            continue
        if demand.capacity in (Capacity.CAPACITY_BLOCK, Capacity.CAPACITY_RESERVATION):
            reserved.append(_reserved_check(demand))
            continue
        quota = _ec2_quota(demand)
        if quota is None:
            unquoted.append(_unquoted_check(demand))
            continue
        groups.setdefault(quota, []).append(demand)
    checks = [_ec2_quota_check(code, name, members, clients) for (code, name), members in groups.items()]
    return checks + unquoted + reserved


def _unquoted_check(demand: InstanceDemand) -> Check:
    return Check(
        check=f"EC2 quota for {demand.where}",
        needed=f"{demand.vcpus} vCPUs ({demand.description})",
        available=(
            f"not verified: the {demand.ec2_instance_type.split('.')[0]} family counts against a vCPU quota of its "
            "own (not Standard, G and VT, P or Trn)"
        ),
        passed=True,
        remedy="",
    )


def _ec2_quota(demand: InstanceDemand) -> tuple[str, str] | None:
    family = quota_family_of(demand.ec2_instance_type)
    if family is None:
        return None
    if demand.capacity is Capacity.SPOT:
        return family.spot_quota_code, family.spot_quota_name
    return family.quota_code, family.quota_name


def _ec2_quota_check(code: str, name: str, members: Sequence[InstanceDemand], clients: AwsClients) -> Check:
    vcpus = sum(m.vcpus for m in members)
    needed = f"{vcpus} vCPUs ({' + '.join(m.description for m in members)})"
    try:
        quota = _get_quota(clients.service_quotas, "ec2", code)
    except (ClientError, BotoCoreError) as error:
        return _failed_call(f"EC2 quota {code} {name}", needed, error, clients.service_quotas)
    if quota is None:
        return _not_found(f"EC2 quota {code} {name}", needed, "ec2", clients.region)
    check = f"EC2 quota {code} {quota.name or name}"
    fields = " / ".join(m.count_field for m in members)
    return _compare(check, needed, vcpus, quota, "vCPUs", "ec2", clients.region, fields)


def _reserved_check(demand: InstanceDemand) -> Check:
    kind = "Capacity Block" if demand.capacity is Capacity.CAPACITY_BLOCK else "capacity reservation"
    target = demand.capacity_reservation_id or (demand.reserved.described if demand.reserved else "")
    return Check(
        check=f"EC2 quota for {demand.where}",
        needed=f"{demand.vcpus} vCPUs ({demand.description})",
        available=(
            f"skipped: instances launched into {kind} {target} need no further On-Demand vCPU quota (the "
            "reservation's state, size, instance type and AZ are checked on their own rows)"
        ),
        passed=True,
        remedy="",
    )


# --- SageMaker (HyperPod) quotas


@dataclass(frozen=True)
class _Wanted:
    """One SageMaker quota to compare with what the file needs."""

    label: str
    matches: Callable[[_Quota], bool]
    amount: int
    detail: str
    unit: str
    field: str
    """The setting to lower when the quota cannot be raised."""

    @property
    def needed(self) -> str:
        return f"{self.amount} {self.unit} ({self.detail})"


def _sagemaker_quota_checks(
    config: EnvironmentConfig, demands: Sequence[InstanceDemand], clients: AwsClients
) -> list[Check]:
    found = _hyperpod_section(config)
    if found is None:
        return []
    wanted = _sagemaker_wanted(found, [d for d in demands if d.service is Service.SAGEMAKER])
    quotas = _QuotaList(clients.service_quotas, "sagemaker")
    checks: list[Check] = []
    for item in wanted:
        try:
            quota = quotas.find(item.matches)
        except (ClientError, BotoCoreError) as error:
            summary = "; ".join(f"{w.label}: {w.amount} {w.unit}" for w in wanted)
            return [*checks, _failed_call("SageMaker quotas for HyperPod", summary, error, quotas.client)]
        if quota is None:
            checks.append(
                _not_found(f"SageMaker quota {item.label}", item.needed, "sagemaker", clients.region)
            )
            continue
        check = f"SageMaker quota {quota.code} {quota.name}"
        checks.append(
            _compare(
                check, item.needed, item.amount, quota, item.unit, "sagemaker", clients.region, item.field
            )
        )
    return checks


def _sagemaker_wanted(
    found: tuple[str, str, list[_HyperPodGroup]], groups: Sequence[InstanceDemand]
) -> list[_Wanted]:
    section, cluster_name, instance_groups = found
    by_type: dict[str, list[InstanceDemand]] = {}
    for demand in groups:
        by_type.setdefault(demand.instance_type, []).append(demand)
    wanted = [
        _Wanted(
            label=f"{instance_type} for cluster usage",
            matches=_exactly(f"{instance_type} for cluster usage"),
            amount=sum(m.count for m in members),
            detail=" + ".join(m.description for m in members),
            unit="instances",
            field=" / ".join(m.count_field for m in members),
        )
        for instance_type, members in by_type.items()
    ]
    total = sum(d.count for d in groups)
    cluster = f"hyperpod cluster {cluster_name}"
    for label, quota, counted in (
        ("Maximum number instances allowed per SageMaker HyperPod cluster", _SAGEMAKER_PER_CLUSTER,
         f"all instance groups of {cluster}"),
        ("Total number of instances allowed across SageMaker HyperPod clusters", _SAGEMAKER_ACROSS_CLUSTERS,
         f"{cluster}; other clusters in the account not counted"),
    ):  # fmt: skip
        wanted.append(
            _Wanted(label=label, matches=_named(quota), amount=total, detail=counted, unit="instances",
                    field=f"{section}.instance_groups[].count")
        )  # fmt: skip
    volumes = [(g.name, g.volume_gib) for g in instance_groups if g.volume_gib]
    volume_key = "extra_volume_gib" if section == "hyperpod" else "volume_gib"
    if volumes:
        name, size = max(volumes, key=lambda item: item[1] or 0)
        wanted.append(
            _Wanted(
                label="Maximum size of EBS volume in GB for a SageMaker HyperPod cluster instance",
                matches=_named(_SAGEMAKER_EBS),
                amount=size or 0,
                detail=f"{section}.instance_groups[{name}].{volume_key}",
                unit="GB",
                field=f"{section}.instance_groups[{name}].{volume_key}",
            )
        )
    return wanted


# --- offerings and EFA


def _offering_checks(
    config: EnvironmentConfig, demands: Sequence[InstanceDemand], clients: AwsClients
) -> list[Check]:
    groups = [d for d in demands if d.service is Service.EC2]
    if not groups:
        return []
    types = list(dict.fromkeys(d.instance_type for d in groups))
    try:
        offered = _offered_azs(clients.ec2, types)
    except (ClientError, BotoCoreError) as error:
        needed = "; ".join(f"{d.instance_type} in {', '.join(d.availability_zones)}" for d in groups)
        return [_failed_call("EC2 instance-type offerings", needed, error, clients.ec2)]
    return [_offering_check(config, d, offered.get(d.instance_type, set()), clients.region) for d in groups]


def _offered_azs(ec2: Any, instance_types: list[str]) -> dict[str, set[str]]:
    offered: dict[str, set[str]] = {}
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": instance_types}]
    )
    for page in pages:
        for offering in page.get("InstanceTypeOfferings", []):
            offered.setdefault(offering["InstanceType"], set()).add(offering["Location"])
    return offered


def _offering_check(
    config: EnvironmentConfig, demand: InstanceDemand, offered: set[str], region: str
) -> Check:
    missing = [az for az in demand.availability_zones if az not in offered]
    zones = ", ".join(sorted(offered))
    return Check(
        check=f"EC2 offering {demand.instance_type}",
        needed=f"{', '.join(demand.availability_zones)} ({demand.where})",
        available=f"offered in {zones}" if offered else f"not offered in {region}",
        passed=not missing,
        remedy=_offering_remedy(config, demand, offered, missing, region) if missing else "",
    )


def _offering_remedy(
    config: EnvironmentConfig, demand: InstanceDemand, offered: set[str], missing: list[str], region: str
) -> str:
    instance_type = demand.instance_type
    other_type = f"or choose another instance type for {demand.where}"
    if not offered:
        return f"{instance_type} is not offered in {region}: choose another instance type for {demand.where}"
    not_here = f"{instance_type} is not offered in {', '.join(missing)}"
    if demand.in_placement_az:
        candidates = [az for az in config.availability_zones if az in offered]
        if candidates:
            return f"{not_here}: set network.placement_availability_zone to {candidates[0]}, {other_type}"
        return (
            f"{not_here}: add one of {', '.join(sorted(offered))} to availability_zones and make it "
            f"network.placement_availability_zone, {other_type}"
        )
    return f"{not_here}: pick availability_zones where it is ({', '.join(sorted(offered))}), {other_type}"


def _efa_checks(demands: Sequence[InstanceDemand], clients: AwsClients) -> list[Check]:
    groups = [d for d in demands if d.efa and d.service is Service.EC2]
    if not groups:
        return []
    types = list(dict.fromkeys(d.instance_type for d in groups))
    try:
        described = clients.ec2.describe_instance_types(InstanceTypes=types)["InstanceTypes"]
    except (ClientError, BotoCoreError) as error:
        return [_failed_call("EFA support", f"EFA on {', '.join(types)}", error, clients.ec2)]
    supported = {t["InstanceType"]: bool(t.get("NetworkInfo", {}).get("EfaSupported")) for t in described}
    return [_efa_check(d, supported.get(d.instance_type)) for d in groups]


def _efa_check(demand: InstanceDemand, supported: bool | None) -> Check:
    if supported is None:
        available = "not described by EC2 in this region"
    else:
        available = f"EfaSupported: {str(supported).lower()}"
    if demand.where.startswith("eks."):
        drop_efa = "move the group to eks.gpu_nodegroups"
    else:
        drop_efa = "set efa: false on it"
    return Check(
        check=f"EFA on {demand.instance_type}",
        needed=f"EFA ({demand.where})",
        available=available,
        passed=bool(supported),
        remedy="" if supported else f"choose an EFA-capable instance type for {demand.where}, or {drop_efa}",
    )


# --- FSx for Lustre


def _lustre_quota_checks(config: EnvironmentConfig, clients: AwsClients) -> list[Check]:
    lustre = config.storage.lustre
    if lustre is None:
        return []
    code, names = LUSTRE_STORAGE_QUOTAS[lustre.deployment_type]
    capacity = lustre.storage_capacity_gib
    needed = f"{capacity} GiB (storage.lustre.storage_capacity_gib, {lustre.deployment_type.value})"
    label = f"FSx quota {code} {names[0]}"
    quotas = _QuotaList(clients.service_quotas, "fsx")
    try:
        quota = quotas.find(_coded(code, names))
    except (ClientError, BotoCoreError) as error:
        return [_failed_call(label, needed, error, quotas.client)]
    if quota is None:
        return [_not_found(label, needed, "fsx", clients.region)]
    check = f"FSx quota {quota.code} {quota.name}"
    return [
        _compare(
            check,
            needed,
            capacity,
            quota,
            "GiB",
            "fsx",
            clients.region,
            "storage.lustre.storage_capacity_gib",
        )
    ]


# --- reserved capacity: reservations, Capacity Blocks, training plans

#: A reservation ending sooner than this after preflight runs is a warning: jobs may not finish in it.
ENDING_SOON = timedelta(hours=24)
_USABLE_RESERVATION_STATES = ("active", "scheduled")
_RESERVATION_NOT_FOUND = {"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed"}
_USABLE_PLAN_STATES = ("Active", "Scheduled")
_HYPERPOD_TARGET = "hyperpod-cluster"


@dataclass(frozen=True)
class _Held:
    """What a reservation or plan holds, in the terms the checks compare (from either API)."""

    label: str
    state: str
    usable: bool
    instance_types: tuple[str, ...]
    availability_zones: tuple[str, ...]
    available: int | None
    total: int | None
    start: datetime | None
    end: datetime | None


def _reserved_capacity_checks(
    demands: Sequence[InstanceDemand], clients: AwsClients, now: datetime
) -> list[Check]:
    by_target: dict[capacity_model.Capacity, list[InstanceDemand]] = {}
    for demand in demands:
        if demand.reserved is not None:
            by_target.setdefault(demand.reserved, []).append(demand)
    checks: list[Check] = []
    for reserved, members in by_target.items():
        if reserved.kind is CapacityKind.TRAINING_PLAN:
            checks.extend(_training_plan_checks(reserved, members, clients, now))
        elif reserved.reservation_id is not None:
            checks.extend(_reservation_checks(reserved, members, clients, now))
        else:
            checks.append(_not_verified_group(reserved, members))
    return checks


def _needed(members: Sequence[InstanceDemand]) -> str:
    return " + ".join(f"{m.description} in {', '.join(m.availability_zones)}" for m in members)


def _fields(members: Sequence[InstanceDemand]) -> str:
    return " / ".join(f"{m.where}.capacity" for m in members)


def _not_verified_group(reserved: capacity_model.Capacity, members: Sequence[InstanceDemand]) -> Check:
    return Check(
        check=f"Reserved capacity {reserved.described}",
        needed=_needed(members),
        available="not verified: preflight does not list a resource group's reservations",
        passed=True,
        remedy="",
    )


def _reservation_checks(
    reserved: capacity_model.Capacity, members: Sequence[InstanceDemand], clients: AwsClients, now: datetime
) -> list[Check]:
    reservation_id = reserved.reservation_id
    label = reserved.described
    try:
        found = clients.ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    except ClientError as error:
        if _error_code(error) in _RESERVATION_NOT_FOUND:
            return [_missing(label, members, f"no capacity reservation {reservation_id} in {clients.region}")]
        return [_failed_call(label, _needed(members), error, clients.ec2)]
    except BotoCoreError as error:
        return [_failed_call(label, _needed(members), error, clients.ec2)]
    raw = (found.get("CapacityReservations") or [{}])[0]
    state = str(raw.get("State", "unknown"))
    held = _Held(
        label=label,
        state=state,
        usable=state in _USABLE_RESERVATION_STATES,
        instance_types=(str(raw.get("InstanceType", "")),),
        availability_zones=(str(raw.get("AvailabilityZone", "")),),
        available=raw.get("AvailableInstanceCount"),
        total=raw.get("TotalInstanceCount"),
        start=raw.get("StartDate"),
        end=raw.get("EndDate"),
    )
    return _held_checks(held, members, now)


def _training_plan_checks(
    reserved: capacity_model.Capacity, members: Sequence[InstanceDemand], clients: AwsClients, now: datetime
) -> list[Check]:
    arn = reserved.training_plan_arn
    label = reserved.described
    try:
        plan = clients.sagemaker.describe_training_plan(TrainingPlanName=arn)
    except ClientError as error:
        if _error_code(error) in ("ResourceNotFound", "ValidationException"):
            return [_missing(label, members, f"no training plan {arn} in {clients.region}")]
        return [_failed_call(label, _needed(members), error, clients.sagemaker)]
    except BotoCoreError as error:
        return [_failed_call(label, _needed(members), error, clients.sagemaker)]
    summaries = plan.get("ReservedCapacitySummaries", [])
    state = str(plan.get("Status", "unknown"))
    held = _Held(
        label=label,
        state=state,
        usable=state in _USABLE_PLAN_STATES,
        instance_types=tuple(dict.fromkeys(str(s.get("InstanceType", "")) for s in summaries)),
        availability_zones=tuple(
            dict.fromkeys(str(s["AvailabilityZone"]) for s in summaries if s.get("AvailabilityZone"))
        ),
        available=plan.get("AvailableInstanceCount"),
        total=plan.get("TotalInstanceCount"),
        start=plan.get("StartTime"),
        end=plan.get("EndTime"),
    )
    checks = _held_checks(held, members, now)
    targets = [str(t) for t in plan.get("TargetResources", [])]
    if _HYPERPOD_TARGET not in targets:
        checks.append(
            Check(
                check=f"{label}: target",
                needed=f"{_HYPERPOD_TARGET} ({_fields(members)})",
                available=", ".join(targets) or "no target resources",
                passed=False,
                remedy=f"reserve a training plan for {_HYPERPOD_TARGET} and set its ARN in {_fields(members)}",
            )
        )
    return checks


def _missing(label: str, members: Sequence[InstanceDemand], available: str) -> Check:
    return Check(
        check=f"{label}: exists",
        needed=_needed(members),
        available=available,
        passed=False,
        remedy=f"check the id and the region, then set it in {_fields(members)}",
    )


def _held_checks(held: _Held, members: Sequence[InstanceDemand], now: datetime) -> list[Check]:
    return [
        _state_check(held, members),
        _match_check(held, members),
        _size_check(held, members),
        _end_check(held, members, now),
    ]


def _when(moment: datetime | None) -> str:
    return "an unknown time" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _state_check(held: _Held, members: Sequence[InstanceDemand]) -> Check:
    available = held.state
    if held.state.lower() == "scheduled":
        available = f"{held.state}, starts {_when(held.start)} (nodes launch from then on)"
    return Check(
        check=f"{held.label}: state",
        needed=f"active or scheduled ({_fields(members)})",
        available=available,
        passed=held.usable,
        remedy=""
        if held.usable
        else f"it cannot take instances in state {held.state}: buy or create a new one and set it in "
        f"{_fields(members)}",
    )


def _match_check(held: _Held, members: Sequence[InstanceDemand]) -> Check:
    problems: list[str] = []
    for member in members:
        if member.instance_type not in held.instance_types:  # both spell HyperPod's with the ml. prefix
            problems.append(f"{member.where} runs {member.instance_type}")
        zones = held.availability_zones
        elsewhere = [az for az in member.availability_zones if zones and az not in zones]
        if elsewhere:
            problems.append(f"{member.where} launches in {', '.join(elsewhere)}")
    types = ", ".join(held.instance_types) or "no instance type"
    holds = f"{types} in {', '.join(held.availability_zones) or 'an unknown AZ'}"
    remedy = ""
    if problems:
        remedy = (
            f"{'; '.join(problems)}: use a reservation of that type in that AZ, or set "
            "network.placement_availability_zone (and the instance type) to the reservation's"
        )
    return Check(
        check=f"{held.label}: instance type and AZ",
        needed=_needed(members),
        available=holds,
        passed=not problems,
        remedy=remedy,
    )


def _size_check(held: _Held, members: Sequence[InstanceDemand]) -> Check:
    wanted = sum(m.count for m in members)
    fields = " / ".join(m.count_field for m in members)
    if held.available is None:
        return Check(
            check=f"{held.label}: free instances",
            needed=f"{wanted} instances ({fields})",
            available="not reported: not verified",
            passed=True,
            remedy="",
        )
    passed = wanted <= held.available
    return Check(
        check=f"{held.label}: free instances",
        needed=f"{wanted} instances ({fields})",
        available=f"{held.available} free of {held.total if held.total is not None else '?'}",
        passed=passed,
        remedy="" if passed else f"lower {fields} to {held.available}, or reserve more instances",
    )


def _end_check(held: _Held, members: Sequence[InstanceDemand], now: datetime) -> Check:
    check = f"{held.label}: end"
    if held.end is None:
        return Check(check=check, needed="time to run", available="no end date", passed=True, remedy="")
    left = held.end - now
    if left <= timedelta(0):
        return Check(
            check=check,
            needed="time to run",
            available=f"ended {_when(held.end)}",
            passed=False,
            remedy=f"it has ended: buy or create a new one and set it in {_fields(members)}",
        )
    soon = left < ENDING_SOON
    return Check(
        check=check,
        needed="time to run",
        available=f"ends {_when(held.end)}"
        + (f", in {left.total_seconds() / 3600:.1f} h: instances are terminated then" if soon else ""),
        passed=True,
        remedy="",
        warning=soon,
    )


# --------------------------------------------------------------------------------------------------
# Service Quotas


@dataclass(frozen=True)
class _Quota:
    code: str
    name: str
    value: float
    adjustable: bool
    default_only: bool
    """True when the value is AWS's default because Service Quotas has no applied value for the account."""


def _quota_from(raw: Mapping[str, Any], *, default_only: bool) -> _Quota | None:
    if raw.get("Value") is None:
        return None
    return _Quota(
        code=str(raw.get("QuotaCode", "")),
        name=str(raw.get("QuotaName", "")),
        value=float(raw["Value"]),
        adjustable=bool(raw.get("Adjustable", True)),
        default_only=default_only,
    )


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _get_quota(client: Any, service_code: str, quota_code: str) -> _Quota | None:
    """The applied value, else AWS's default (Service Quotas has only the default for some quotas)."""
    try:
        raw = client.get_service_quota(ServiceCode=service_code, QuotaCode=quota_code)["Quota"]
        applied = _quota_from(raw, default_only=False)
        if applied is not None:
            return applied
    except ClientError as error:
        if _error_code(error) != "NoSuchResourceException":
            raise
    try:
        raw = client.get_aws_default_service_quota(ServiceCode=service_code, QuotaCode=quota_code)["Quota"]
    except ClientError as error:
        if _error_code(error) == "NoSuchResourceException":
            return None
        raise
    return _quota_from(raw, default_only=True)


def _normal(name: str) -> str:
    return " ".join(name.lower().split())


def _named(pattern: re.Pattern[str]) -> Callable[[_Quota], bool]:
    return lambda quota: pattern.fullmatch(_normal(quota.name)) is not None


def _exactly(name: str) -> Callable[[_Quota], bool]:
    return lambda quota: _normal(quota.name) == _normal(name)


def _coded(code: str, names: Iterable[str]) -> Callable[[_Quota], bool]:
    wanted = {_normal(n) for n in names}
    return lambda quota: quota.code == code or _normal(quota.name) in wanted


class _QuotaList:
    """One service's quotas, listed once; AWS's defaults are listed too if a quota is missing."""

    def __init__(self, client: Any, service_code: str) -> None:
        self.client = client
        self._service_code = service_code
        self._applied: list[_Quota] | None = None
        self._defaults: list[_Quota] | None = None

    def find(self, matches: Callable[[_Quota], bool]) -> _Quota | None:
        """The first quota ``matches`` accepts, or None."""
        if self._applied is None:
            self._applied = self._list("list_service_quotas", default_only=False)
        found = next((q for q in self._applied if matches(q)), None)
        if found is not None:
            return found
        if self._defaults is None:
            self._defaults = self._list("list_aws_default_service_quotas", default_only=True)
        return next((q for q in self._defaults if matches(q)), None)

    def _list(self, operation: str, *, default_only: bool) -> list[_Quota]:
        pages = self.client.get_paginator(operation).paginate(
            ServiceCode=self._service_code, PaginationConfig={"PageSize": _PAGE_SIZE}
        )
        quotas = (
            _quota_from(raw, default_only=default_only) for page in pages for raw in page.get("Quotas", [])
        )
        return [q for q in quotas if q is not None]


# --------------------------------------------------------------------------------------------------
# building rows


def _amount(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _compare(
    check: str,
    needed: str,
    amount: int,
    quota: _Quota,
    unit: str,
    service_code: str,
    region: str,
    field: str,
) -> Check:
    passed = amount <= quota.value
    available = f"{_amount(quota.value)} {unit}" + (" (AWS default value)" if quota.default_only else "")
    if passed:
        remedy = ""
    elif quota.adjustable:
        remedy = (
            f"aws service-quotas request-service-quota-increase --service-code {service_code} "
            f"--quota-code {quota.code} --desired-value {amount} --region {region}"
        )
    else:
        remedy = f"the quota is not adjustable: lower {field} to fit {_amount(quota.value)} {unit}"
    return Check(check=check, needed=needed, available=available, passed=passed, remedy=remedy)


def _not_found(check: str, needed: str, service_code: str, region: str) -> Check:
    return Check(
        check=check,
        needed=needed,
        available=f"not found in Service Quotas ({service_code}, {region}): not verified",
        passed=True,
        remedy="",
    )


def _failed_call(check: str, needed: str, error: ClientError | BotoCoreError, client: Any) -> Check:
    if isinstance(error, ParamValidationError | StubResponseError):
        # Our call does not fit the service model (or a test's Stubber expected another): a bug, not an answer.
        raise error
    if isinstance(error, ClientError):
        code = _error_code(error) or "Error"
        action = f"{client.meta.service_model.signing_name}:{error.operation_name}"
        message = str(error.response.get("Error", {}).get("Message", "")) or str(error)
        available = f"unknown: {action} failed with {code}: {message}"
        remedy = _client_error_remedy(code, action)
    else:
        available = f"unknown: {error}"
        remedy = _sdk_error_remedy(error)
    return Check(check=check, needed=needed, available=available, passed=False, remedy=remedy)


def _client_error_remedy(code: str, action: str) -> str:
    if code in _ACCESS_DENIED:
        return f"allow {action} to the caller (preflight needs {', '.join(REQUIRED_IAM_ACTIONS)})"
    if code in _BAD_CREDENTIALS:
        return "refresh the credentials (e.g. aws sso login --profile P) and run preflight again"
    if code.startswith("InvalidInstanceType"):
        return (
            "EC2 does not know an instance type in this region: see the offering checks, choose another type"
        )
    if code in _THROTTLED:
        return "AWS throttled the call: run preflight again in a minute"
    return f"run preflight again; if {action} keeps failing, check the region and the account"


def _sdk_error_remedy(error: BotoCoreError) -> str:
    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return "configure credentials: --profile P, AWS_PROFILE, or aws configure"
    return "check the network and the region, then run preflight again"
