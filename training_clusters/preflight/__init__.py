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

from datetime import UTC, datetime

from training_clusters.config import EnvironmentConfig
from training_clusters.preflight.demands import Capacity, InstanceDemand, Service, instance_demands
from training_clusters.preflight.offerings import _efa_checks, _offering_checks
from training_clusters.preflight.quotas import (
    LUSTRE_STORAGE_QUOTAS,
    _described,
    _ec2_quota_checks,
    _lustre_quota_checks,
    _sagemaker_quota_checks,
)
from training_clusters.preflight.reserved import _reserved_capacity_checks
from training_clusters.preflight.results import REQUIRED_IAM_ACTIONS, AwsClients, Check
from training_clusters.preflight.slurm_config import _slurm_config_checks
from training_clusters.preflight.versions import version_checks

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
