"""What an environment left behind after ``cdk destroy``, what it costs, and deleting it on request.

``cdk destroy`` keeps the data (see ``TrainingEnvironmentStack``): the FSx for Lustre file system with its
security group, subnet and the VPC; a Slurm accounting database (``SlurmAccountingDatabase``: its writer
instance, KMS key, secrets, subnet group, parameter group, security group, log groups) with its subnets; the
lifecycle, custom-action and access-log buckets; the flow-log and MPI Operator log groups. :class:`Kind` lists
exactly those resource types; ``tests/test_destroy.py`` checks that every type a shipped environment retains is
one of them. Besides, the EBS volumes of Kubernetes claims (Prometheus, Grafana), which the EBS CSI driver made,
not CloudFormation: deleting the cluster deletes none of them.

**Finding them.** One listing of the Resource Groups Tagging API in the environment's region, asking for the
tags every resource of the stack carries (``EnvironmentConfig.resource_tags``: ``project`` and
``environment``) and CloudFormation's own ``aws:cloudformation:stack-name``; every answer is checked again
here, so a resource of another environment (another name, another stack, a resource ParallelCluster's own
stack made) is never listed, whatever the service returns. A resource whose ``aws:cloudformation:stack-id``
is a stack that still exists is in use, not left behind: only what earlier deployments left is listed (run
it after ``cdk destroy``, or beside a new deployment). The claims' volumes carry no stack tag: one
``DescribeVolumes`` asks for the ``project`` and ``environment`` tags the environment's StorageClass gives them
and the ``ebs.csi.aws.com/cluster`` tag the driver adds (checked again here too); nothing proves which deployment
made one, so while the stack exists they are all in use and none is listed. Not found: log groups Lambda made itself for CDK's
handlers (``/aws/lambda/training-<name>-*``), which carry no tags, and backups and snapshots, kept on purpose.

**Deleting them** (:func:`delete`, after :func:`plan`) in an order that lets each deletion succeed: file
systems (after a backup when asked, waiting for it), databases (instances, then the cluster; a cluster with
deletion protection only when asked to turn it off), their subnet and parameter groups, buckets (every
version of every object, then the bucket; access-log buckets last), log groups, secrets and KMS keys
(scheduled: Secrets Manager and KMS keep them 30 days, undoable), then security groups, subnets and the VPC
last. Whatever must stay (a SCRATCH file system when a backup is asked for, a protected database) keeps what
it uses: its key, secrets and the network. Each wait is bounded; the first failure stops the run with one
line, and a second run picks up what is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from training_clusters.catalog.prices import (
    EBS_GP3_USD_PER_GB_MONTH,
    KMS_KEY_USD_PER_MONTH,
    PRICES_AS_OF,
    PRICES_REGION,
    SECRET_USD_PER_MONTH,
    aurora_serverless_v2_monthly_usd,
    flat_monthly_usd,
    lustre_monthly_usd,
)
from training_clusters.config import PROJECT_TAG
from training_clusters.model.errors import bounded, displayable

STACK_NAME_TAG = "aws:cloudformation:stack-name"
STACK_ID_TAG = "aws:cloudformation:stack-id"
LOGICAL_ID_TAG = "aws:cloudformation:logical-id"

#: What listing needs (the dry run): IAM actions, one per call made.
LIST_IAM_ACTIONS = (
    "tag:GetResources",
    "cloudformation:DescribeStacks",
    "fsx:DescribeFileSystems",
    "rds:DescribeDBClusters",
    "kms:DescribeKey",
    "secretsmanager:DescribeSecret",
    "ec2:DescribeVolumes",
)
#: What ``--delete`` needs besides.
DELETE_IAM_ACTIONS = (
    "fsx:DeleteFileSystem",
    "rds:DeleteDBInstance",
    "rds:DeleteDBCluster",
    "rds:DeleteDBSubnetGroup",
    "rds:DeleteDBClusterParameterGroup",
    "s3:ListBucketVersions",
    "s3:DeleteObjectVersion",
    "s3:DeleteBucket",
    "logs:DeleteLogGroup",
    "secretsmanager:DeleteSecret",
    "kms:ScheduleKeyDeletion",
    "ec2:DeleteVolume",
    "ec2:DeleteSecurityGroup",
    "ec2:DeleteSubnet",
    "ec2:DeleteVpc",
)
#: What ``--backup`` adds: a tagged FSx backup waited for, and a database's final snapshot.
BACKUP_IAM_ACTIONS = (
    "fsx:CreateBackup",
    "fsx:DescribeBackups",
    "fsx:TagResource",
    "rds:CreateDBClusterSnapshot",
)
#: What ``--disable-deletion-protection`` adds.
PROTECTION_IAM_ACTIONS = ("rds:ModifyDBCluster",)

#: The error codes of a delete call whose resource no longer exists (the listing may name one just deleted).
ALREADY_GONE = frozenset(
    {
        "FileSystemNotFound",
        "DBClusterNotFoundFault",
        "DBInstanceNotFound",
        "DBSubnetGroupNotFoundFault",
        "DBParameterGroupNotFound",
        "NoSuchBucket",
        "ResourceNotFoundException",
        "NotFoundException",
        "InvalidGroup.NotFound",
        "InvalidVolume.NotFound",
        "InvalidSubnetID.NotFound",
        "InvalidVpcID.NotFound",
    }
)
#: Days Secrets Manager and KMS keep a deleted secret or key (their longest waiting period: undoable).
RECOVERY_DAYS = 30
#: How long a run waits for a backup to become available, and for a file system or database to go.
BACKUP_WAIT_SECONDS = 60 * 60
DELETION_WAIT_SECONDS = 45 * 60
POLL_SECONDS = 20
#: The most pages of 100 tagged resources (or of 1000 object versions of a bucket) a run reads.
MAX_PAGES = 1000


class Kind(Enum):
    """What the stacks retain, in the order a cleanup deletes it: (how it is called, its CloudFormation type,
    its type in the Resource Groups Tagging API)."""

    FILE_SYSTEM = ("FSx for Lustre file system", "AWS::FSx::FileSystem", "fsx:file-system")
    DB_INSTANCE = ("database instance", "AWS::RDS::DBInstance", "rds:db")
    DB_CLUSTER = ("Aurora database cluster", "AWS::RDS::DBCluster", "rds:cluster")
    DB_SUBNET_GROUP = ("database subnet group", "AWS::RDS::DBSubnetGroup", "rds:subgrp")
    DB_PARAMETER_GROUP = ("database parameter group", "AWS::RDS::DBClusterParameterGroup", "rds:cluster-pg")
    BUCKET = ("S3 bucket", "AWS::S3::Bucket", "s3:bucket")
    LOG_GROUP = ("log group", "AWS::Logs::LogGroup", "logs:log-group")
    SECRET = ("secret", "AWS::SecretsManager::Secret", "secretsmanager:secret")
    KMS_KEY = ("KMS key", "AWS::KMS::Key", "kms:key")
    EBS_VOLUME = ("EBS volume", "AWS::EC2::Volume", "ec2:volume")
    SECURITY_GROUP = ("security group", "AWS::EC2::SecurityGroup", "ec2:security-group")
    SUBNET = ("subnet", "AWS::EC2::Subnet", "ec2:subnet")
    VPC = ("VPC", "AWS::EC2::VPC", "ec2:vpc")

    def __init__(self, label: str, cloudformation_type: str, tagging_type: str) -> None:
        self.label = label
        self.cloudformation_type = cloudformation_type
        self.tagging_type = tagging_type


#: What the environment's stacks do not make (found by ``DescribeVolumes``, not by the stack's tags).
NOT_STACK_MADE = (Kind.EBS_VOLUME,)
#: The tag the EBS CSI driver puts on every volume it makes
#: (https://github.com/kubernetes-sigs/aws-ebs-csi-driver/blob/master/docs/tagging.md).
EBS_CSI_CLUSTER_TAG = "ebs.csi.aws.com/cluster"
#: The tags it adds naming the claim a volume was made for.
PVC_NAME_TAG = "kubernetes.io/created-for/pvc/name"
PVC_NAMESPACE_TAG = "kubernetes.io/created-for/pvc/namespace"

#: The network: kept whole while anything kept still lives in it.
NETWORK = (Kind.SECURITY_GROUP, Kind.SUBNET, Kind.VPC)


@dataclass(frozen=True)
class Leftover:
    """One resource an environment left behind."""

    kind: Kind
    id: str
    """What its service calls it by: fs-..., the cluster identifier, the bucket or log group name, the key's
    id, the secret's ARN, sg-/subnet-/vpc-..."""
    arn: str
    logical_id: str = ""
    """Its construct's logical id in the template (CloudFormation's tag), e.g. ``SharedStorageA8297BFB``."""
    detail: str = ""
    """What matters about it (``SCRATCH_2, 1200 GiB``)."""
    monthly_usd: float | None = None
    """Its known monthly cost (None: not known, or billed by use)."""
    cost: str = ""
    """The cost as shown: ``$168.00``, ``free``, ``by use``, ``at least $43.80 + storage``."""
    keep: str = ""
    """Why it stays when the others are deleted; empty: it is deleted."""
    scheduled: str = ""
    """When its deletion, already asked for, happens (a KMS key or a secret in its waiting period)."""
    facts: dict[str, Any] = field(default_factory=dict, compare=False)
    """What deleting it needs to know (a file system's deployment type, a database's members...)."""

    @property
    def plan(self) -> str:
        """``delete``, ``keep: <why>``, how it is deleted (``back up, then delete``), or ``scheduled: ...``."""
        if self.scheduled:
            return f"scheduled: {self.scheduled}"
        return f"keep: {self.keep}" if self.keep else str(self.facts.get("how", "delete"))

    @property
    def to_delete(self) -> bool:
        """Whether ``--delete`` deletes it: neither kept nor already scheduled."""
        return not (self.keep or self.scheduled)

    @property
    def name(self) -> str:
        """How a person recognises it: its id, a secret by its name rather than its ARN."""
        return self.id.split(":secret:", 1)[-1] if self.kind is Kind.SECRET else self.id

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind.name.lower(),
            "resource": self.kind.label,
            "id": self.id,
            "name": self.name,
            "arn": self.arn,
            "logical_id": self.logical_id,
            "detail": self.detail,
            "monthly_usd": self.monthly_usd,
            "cost": self.cost,
            "delete": self.to_delete,
            "plan": self.plan,
        }


@dataclass(frozen=True)
class Inventory:
    """What :func:`find_leftovers` found."""

    environment: str
    stack: str
    region: str
    leftovers: tuple[Leftover, ...]
    live_stack_status: str | None = None
    """The status of the environment's stack when it still exists (its own resources are not listed)."""
    in_live_stack: int = 0
    """How many tagged resources belong to that stack (its claims' volumes included)."""


@dataclass(frozen=True)
class CleanupClients:
    """The boto3 clients cleanup calls, all in the environment's region (tests pass Stubber-wrapped ones)."""

    tagging: Any
    cloudformation: Any
    fsx: Any
    rds: Any
    s3: Any
    logs: Any
    secretsmanager: Any
    kms: Any
    ec2: Any

    @classmethod
    def from_session(cls, session: Any, region: str) -> CleanupClients:
        """Clients of ``session`` in ``region``, with standard retries for throttling."""
        from botocore.config import Config

        config = Config(retries={"mode": "standard", "max_attempts": 5})

        def client(name: str) -> Any:
            return session.client(name, region_name=region, config=config)

        return cls(
            tagging=client("resourcegroupstaggingapi"),
            cloudformation=client("cloudformation"),
            fsx=client("fsx"),
            rds=client("rds"),
            s3=client("s3"),
            logs=client("logs"),
            secretsmanager=client("secretsmanager"),
            kms=client("kms"),
            ec2=client("ec2"),
        )


class CleanupStopped(Exception):
    """A step failed or a wait ran out: nothing after it was attempted (the message is one line)."""


# --------------------------------------------------------------------------------------------------
# finding


def find_leftovers(environment: str, stack: str, region: str, clients: CleanupClients) -> Inventory:
    """Every resource of :class:`Kind` the environment's stack made and no existing stack holds.

    :param environment: The environment's name (its ``environment`` tag).
    :param stack: Its stack's name (``training-<name>``).
    :raises botocore.exceptions.ClientError: a listing was refused (the caller says which, in one line).
    """
    live_id, live_status = _live_stack(stack, clients.cloudformation)
    found: list[Leftover] = []
    in_live_stack = 0
    for arn, tags in _tagged(environment, stack, clients.tagging):
        if not _ours(tags, environment, stack):
            continue
        if live_status is not None and _in_use(tags, live_id):
            in_live_stack += 1
            continue
        leftover = _leftover(arn, tags, region)
        if leftover is not None:
            found.append(leftover)
    for volume in _volumes(environment, region, clients.ec2):
        if live_status is not None:  # no tag says which deployment made it: the live cluster's, maybe
            in_live_stack += 1
        else:
            found.append(volume)
    described = [*_described(sorted(found, key=_deletion_order), region, clients)]
    return Inventory(
        environment=environment,
        stack=stack,
        region=region,
        leftovers=tuple(sorted(described, key=_deletion_order)),
        live_stack_status=live_status,
        in_live_stack=in_live_stack,
    )


def _in_use(tags: dict[str, str], live_id: str | None) -> bool:
    """Whether a resource may belong to the stack that exists: it names that stack's id, or names none (a
    missing or empty ``aws:cloudformation:stack-id`` proves no earlier deployment), or the live stack's id is
    not known. Only a resource that names another, earlier stack id is left behind."""
    named = tags.get(STACK_ID_TAG, "").strip()
    return not named or not live_id or named == live_id


def _live_stack(stack: str, cloudformation: Any) -> tuple[str | None, str | None]:
    """(id, status) of the stack named ``stack`` when it exists (CloudFormation names only live stacks);
    (None, None) only when CloudFormation says it does not exist. Any other answer (refused, throttled, another
    validation error) is raised: without knowing, nothing may be listed for deletion."""
    from botocore.exceptions import ClientError

    try:
        answer = cloudformation.describe_stacks(StackName=stack)
    except ClientError as error:
        detail = error.response.get("Error", {})
        if detail.get("Code") == "ValidationError" and "does not exist" in str(detail.get("Message", "")):
            return None, None
        raise
    stacks = answer.get("Stacks", [])
    if not stacks:  # not how CloudFormation answers for a missing stack (that is the error above): unknown
        return None, "UNKNOWN"
    return str(stacks[0].get("StackId", "")).strip() or None, str(
        stacks[0].get("StackStatus", "")
    ) or "UNKNOWN"


def _tagged(environment: str, stack: str, tagging: Any) -> Iterator[tuple[str, dict[str, str]]]:
    """(ARN, tags) of every resource of our kinds carrying the environment's and the stack's tags."""
    token = ""
    for _ in range(MAX_PAGES):
        request: dict[str, Any] = {
            "TagFilters": [
                {"Key": "project", "Values": [PROJECT_TAG]},
                {"Key": "environment", "Values": [environment]},
                {"Key": STACK_NAME_TAG, "Values": [stack]},
            ],
            "ResourceTypeFilters": [kind.tagging_type for kind in Kind if kind not in NOT_STACK_MADE],
            "ResourcesPerPage": 100,
        }
        if token:
            request["PaginationToken"] = token
        answer = tagging.get_resources(**request)
        for mapping in answer.get("ResourceTagMappingList", []):
            tags = {str(t.get("Key")): str(t.get("Value")) for t in mapping.get("Tags", [])}
            yield str(mapping.get("ResourceARN", "")), tags
        token = answer.get("PaginationToken") or ""
        if not token:
            return
    raise CleanupStopped(f"more than {MAX_PAGES * 100} tagged resources: list them with the AWS console")


def _volumes(environment: str, region: str, ec2: Any) -> Iterator[Leftover]:
    """The EBS volumes the EBS CSI driver made for the environment's claims (its StorageClass's tags)."""
    token = ""
    for _ in range(MAX_PAGES):
        request: dict[str, Any] = {
            "Filters": [
                {"Name": "tag:project", "Values": [PROJECT_TAG]},
                {"Name": "tag:environment", "Values": [environment]},
                {"Name": "tag-key", "Values": [EBS_CSI_CLUSTER_TAG]},
            ],
            "MaxResults": 500,
        }
        if token:
            request["NextToken"] = token
        answer = ec2.describe_volumes(**request)
        for volume in answer.get("Volumes", []):
            tags = {str(t.get("Key")): str(t.get("Value")) for t in volume.get("Tags", [])}
            ours = tags.get("project") == PROJECT_TAG and tags.get("environment") == environment
            if ours and EBS_CSI_CLUSTER_TAG in tags and volume.get("VolumeId"):
                yield _volume(volume, tags, region)
        token = answer.get("NextToken") or ""
        if not token:
            return
    raise CleanupStopped(f"more than {MAX_PAGES * 500} tagged volumes: list them with the AWS console")


def _volume(volume: dict[str, Any], tags: dict[str, str], region: str) -> Leftover:
    """A claim's volume: its size and type, the claim it was made for, what it costs a month."""
    size, kind = volume.get("Size"), str(volume.get("VolumeType", ""))
    claim = "/".join(t for t in (tags.get(PVC_NAMESPACE_TAG, ""), tags.get(PVC_NAME_TAG, "")) if t)
    detail = ", ".join(p for p in (f"{kind}, {size} GiB", f"claim {claim}" if claim else "") if p)
    usd = None
    if kind == "gp3" and isinstance(size, int) and region == PRICES_REGION:
        usd = round(size * EBS_GP3_USD_PER_GB_MONTH, 2)
    attached = [str(a.get("InstanceId", "")) for a in volume.get("Attachments", []) if a.get("InstanceId")]
    return Leftover(
        kind=Kind.EBS_VOLUME,
        id=str(volume["VolumeId"]),
        arn="",  # DescribeVolumes names no account
        detail=detail,
        monthly_usd=usd,
        cost=_usd(usd) if usd is not None else _unknown(region),
        keep=f"attached to {', '.join(attached)}" if attached else "",
    )


def _ours(tags: dict[str, str], environment: str, stack: str) -> bool:
    """Whether the tags say the environment's own stack made it (never trusting the listing's filter)."""
    return (
        tags.get("project") == PROJECT_TAG
        and tags.get("environment") == environment
        and tags.get(STACK_NAME_TAG) == stack
    )


def _leftover(arn: str, tags: dict[str, str], region: str) -> Leftover | None:
    """The resource an ARN names, when it is of a :class:`Kind` in ``region``; None otherwise."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        return None
    _, _, service, arn_region, _, resource = parts
    if service != "s3" and arn_region != region:
        return None
    found = _kind_and_id(service, resource, arn)
    if found is None:
        return None
    kind, id_ = found
    return Leftover(kind=kind, id=id_, arn=arn, logical_id=tags.get(LOGICAL_ID_TAG, ""))


def _kind_and_id(service: str, resource: str, arn: str) -> tuple[Kind, str] | None:
    prefixed = {
        ("fsx", "file-system/"): Kind.FILE_SYSTEM,
        ("ec2", "vpc/"): Kind.VPC,
        ("ec2", "subnet/"): Kind.SUBNET,
        ("ec2", "security-group/"): Kind.SECURITY_GROUP,
        ("rds", "cluster:"): Kind.DB_CLUSTER,
        ("rds", "db:"): Kind.DB_INSTANCE,
        ("rds", "subgrp:"): Kind.DB_SUBNET_GROUP,
        ("rds", "cluster-pg:"): Kind.DB_PARAMETER_GROUP,
        ("kms", "key/"): Kind.KMS_KEY,
        ("logs", "log-group:"): Kind.LOG_GROUP,
    }
    for (arn_service, prefix), kind in prefixed.items():
        if service == arn_service and resource.startswith(prefix):
            id_ = resource.removeprefix(prefix)
            if kind is Kind.LOG_GROUP:
                id_ = id_.removesuffix(":*")
            return (kind, id_) if id_ else None
    if service == "secretsmanager" and resource.startswith("secret:"):
        return Kind.SECRET, arn  # Secrets Manager takes the whole ARN as SecretId
    if service == "s3" and resource and "/" not in resource:
        return Kind.BUCKET, resource
    return None


def _described(found: list[Leftover], region: str, clients: CleanupClients) -> Iterator[Leftover]:
    """Each leftover with what it costs and what deleting it needs (file systems and databases described)."""
    for leftover in found:
        if leftover.kind is Kind.FILE_SYSTEM:
            described = _file_system(leftover, region, clients.fsx)
        elif leftover.kind is Kind.DB_CLUSTER:
            described = _database(leftover, region, clients.rds)
        elif leftover.kind is Kind.KMS_KEY:
            described = _key(_priced(leftover, region), clients.kms)
        elif leftover.kind is Kind.SECRET:
            described = _secret(_priced(leftover, region), clients.secretsmanager)
        elif leftover.kind is Kind.EBS_VOLUME:
            described = leftover  # DescribeVolumes said it all
        else:
            described = _priced(leftover, region)
        if described is not None:
            yield described


def _file_system(leftover: Leftover, region: str, fsx: Any) -> Leftover | None:
    from botocore.exceptions import ClientError

    try:
        answer = fsx.describe_file_systems(FileSystemIds=[leftover.id])
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "FileSystemNotFound":
            return None  # gone since it was tagged
        raise
    systems = answer.get("FileSystems", [])
    if not systems or systems[0].get("Lifecycle") == "DELETING":
        return None
    system = systems[0]
    lustre = system.get("LustreConfiguration", {})
    deployment = str(lustre.get("DeploymentType", "unknown"))
    throughput = lustre.get("PerUnitStorageThroughput")
    capacity = int(system.get("StorageCapacity", 0))
    usd = lustre_monthly_usd(region, deployment, throughput, capacity)
    per_tib = f", {throughput} MB/s/TiB" if throughput else ""
    return replace(
        leftover,
        detail=f"{deployment}{per_tib}, {capacity} GiB",
        monthly_usd=usd,
        cost=_usd(usd) if usd is not None else _unknown(region),
        facts={"deployment_type": deployment, "vpc": system.get("VpcId", "")},
    )


def _database(leftover: Leftover, region: str, rds: Any) -> Leftover | None:
    from botocore.exceptions import ClientError

    try:
        answer = rds.describe_db_clusters(DBClusterIdentifier=leftover.id)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "DBClusterNotFoundFault":
            return None
        raise
    clusters = answer.get("DBClusters", [])
    if not clusters or clusters[0].get("Status") == "deleting":
        return None
    cluster = clusters[0]
    minimum = cluster.get("ServerlessV2ScalingConfiguration", {}).get("MinCapacity")
    usd = aurora_serverless_v2_monthly_usd(region, float(minimum)) if minimum is not None else None
    if usd is not None:
        cost = f"at least {_usd(usd)} + storage"
    else:
        cost = "by use" if region == PRICES_REGION else _unknown(region)
    protected = bool(cluster.get("DeletionProtection"))
    return replace(
        leftover,
        detail=str(cluster.get("Engine", "aurora"))
        + (f", {minimum:g} ACU minimum" if minimum is not None else "")
        + (", deletion protection on" if protected else ""),
        monthly_usd=usd,
        cost=cost,
        facts={
            "protected": protected,
            "instances": [str(m.get("DBInstanceIdentifier")) for m in cluster.get("DBClusterMembers", [])],
            "security_groups": [
                str(g.get("VpcSecurityGroupId")) for g in cluster.get("VpcSecurityGroups", [])
            ],
            "subnet_group": str(cluster.get("DBSubnetGroup", "")),
            "parameter_group": str(cluster.get("DBClusterParameterGroup", "")),
            "kms_key": str(cluster.get("KmsKeyId", "")).rsplit("/", 1)[-1],
        },
    )


def _key(leftover: Leftover, kms: Any) -> Leftover | None:
    """A key, or the date KMS deletes it when that is already scheduled (a second cleanup run)."""
    from botocore.exceptions import ClientError

    try:
        metadata = kms.describe_key(KeyId=leftover.id)["KeyMetadata"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "NotFoundException":
            return None
        raise
    if metadata.get("KeyState") == "PendingDeletion":
        when = metadata.get("DeletionDate")
        return replace(
            leftover, scheduled=f"KMS deletes it on {when:%Y-%m-%d}" if when else "pending deletion"
        )
    return leftover


def _secret(leftover: Leftover, secretsmanager: Any) -> Leftover | None:
    """A secret, or when it was marked for deletion (Secrets Manager deletes it after its recovery window)."""
    from botocore.exceptions import ClientError

    try:
        answer = secretsmanager.describe_secret(SecretId=leftover.id)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return None
        raise
    marked = answer.get("DeletedDate")
    if marked is not None:
        return replace(leftover, scheduled=f"marked for deletion on {marked:%Y-%m-%d}")
    return leftover


def _priced(leftover: Leftover, region: str) -> Leftover:
    flat = {Kind.KMS_KEY: KMS_KEY_USD_PER_MONTH, Kind.SECRET: SECRET_USD_PER_MONTH}
    if leftover.kind in flat:
        usd = flat_monthly_usd(region, flat[leftover.kind])
        return replace(leftover, monthly_usd=usd, cost=_usd(usd) if usd is not None else _unknown(region))
    if leftover.kind in (Kind.BUCKET, Kind.LOG_GROUP):
        return replace(leftover, cost="by use")
    if leftover.kind is Kind.DB_INSTANCE:
        return replace(leftover, cost="with its cluster")
    return replace(leftover, cost="free")


def _deletion_order(leftover: Leftover) -> tuple[int, bool, str]:
    """Kind by kind (:class:`Kind`'s order); access-log buckets after the buckets that log into them."""
    order = list(Kind).index(leftover.kind)
    return order, "AccessLogs" in leftover.logical_id, leftover.id


def _usd(amount: float) -> str:
    return f"${amount:,.2f}"


def _unknown(region: str) -> str:
    """The cost of what the price table has no region for (the summary says which region it has)."""
    return "unknown"


# --------------------------------------------------------------------------------------------------
# planning (pure)


def plan(
    leftovers: Sequence[Leftover], *, backup: bool, disable_deletion_protection: bool, now: datetime
) -> list[Leftover]:
    """The leftovers, each either deleted or kept with the reason (what a kept resource uses stays too).

    :param backup: Back file systems up first (SCRATCH ones cannot be: they are kept) and take a final
        snapshot of each database (its KMS key is then kept: the snapshot needs it).
    :param disable_deletion_protection: Turn a database's deletion protection off to delete it; without it a
        protected database is kept, with its instances, groups, key, secrets and log groups.
    :param now: Names the final snapshots.
    """
    keep: dict[tuple[Kind, str], str] = {}
    how: dict[tuple[Kind, str], str] = {}
    kept_in_network: list[str] = []
    for fs in _of(leftovers, Kind.FILE_SYSTEM):
        deployment = fs.facts.get("deployment_type", "")
        if backup and str(deployment).startswith("SCRATCH"):
            keep[(fs.kind, fs.id)] = (
                f"{deployment} cannot be backed up (FSx backs up PERSISTENT file systems only); run "
                "without --backup to delete it, after copying what it holds to S3"
            )
            kept_in_network.append(f"file system {fs.id}")
        elif backup:
            how[(fs.kind, fs.id)] = "back up, then delete"
    for db in _of(leftovers, Kind.DB_CLUSTER):
        if db.facts.get("protected") and not disable_deletion_protection:
            keep[(db.kind, db.id)] = "deletion protection is on (--disable-deletion-protection turns it off)"
            uses = f"used by the kept database {db.id}"
            for kind, id_ in _database_parts(db, leftovers):
                keep.setdefault((kind, id_), uses)
            kept_in_network.append(f"database {db.id}")
            continue
        steps = ["turn deletion protection off"] if db.facts.get("protected") else []
        if backup:
            snapshot = final_snapshot_id(db.id, now)
            steps.append(f"final snapshot {snapshot}")
            key = db.facts.get("kms_key", "")
            if key:
                keep[(Kind.KMS_KEY, key)] = f"encrypts the final snapshot {snapshot}"
        how[(db.kind, db.id)] = ", ".join([*steps, "delete"])
    for leftover in leftovers:
        if leftover.kind in NETWORK and kept_in_network:
            uses = "uses" if len(kept_in_network) == 1 else "use"
            keep.setdefault(
                (leftover.kind, leftover.id), f"the kept {' and '.join(kept_in_network)} {uses} it"
            )
        if leftover.kind in (Kind.SECRET, Kind.KMS_KEY):
            how.setdefault((leftover.kind, leftover.id), f"delete in {RECOVERY_DAYS} days")
    return [
        replace(
            leftover,
            keep=keep.get((leftover.kind, leftover.id), leftover.keep),
            facts={
                **leftover.facts,
                **({"how": how[(leftover.kind, leftover.id)]} if (leftover.kind, leftover.id) in how else {}),
            },
        )
        for leftover in leftovers
    ]


def _database_parts(db: Leftover, leftovers: Sequence[Leftover]) -> Iterator[tuple[Kind, str]]:
    """What a database uses among the leftovers: its instances, groups, key, the secrets, its log groups."""
    facts = db.facts
    for instance in facts.get("instances", []):
        yield Kind.DB_INSTANCE, instance
    for group in facts.get("security_groups", []):
        yield Kind.SECURITY_GROUP, group
    yield Kind.DB_SUBNET_GROUP, facts.get("subnet_group", "")
    yield Kind.DB_PARAMETER_GROUP, facts.get("parameter_group", "")
    yield Kind.KMS_KEY, facts.get("kms_key", "")
    for leftover in leftovers:
        if leftover.kind is Kind.SECRET:  # every secret of the stacks is the accounting database's
            yield leftover.kind, leftover.id
        if leftover.kind is Kind.LOG_GROUP and leftover.id.startswith(f"/aws/rds/cluster/{db.id}/"):
            yield leftover.kind, leftover.id


def _of(leftovers: Sequence[Leftover], kind: Kind) -> list[Leftover]:
    return [leftover for leftover in leftovers if leftover.kind is kind]


def utc_now() -> datetime:
    """Now, in UTC: names final snapshots (tests replace it)."""
    return datetime.now(UTC)


def final_snapshot_id(cluster: str, now: datetime) -> str:
    """The name of a database's final snapshot: ``<cluster>-final-<UTC minute>`` (RDS: letters, digits and
    single hyphens, at most 255)."""
    return f"{cluster}-final-{now:%Y%m%d%H%M}"[:255]


# --------------------------------------------------------------------------------------------------
# deleting


@dataclass
class Deleter:
    """Deletes a plan's leftovers in order; ``say`` hears one line per step done.

    ``sleep`` and ``clock`` are the waits' (tests pass a fake clock).
    """

    clients: CleanupClients
    environment: str
    tags: dict[str, str]
    say: Callable[[str], None]
    now: datetime
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    done: list[str] = field(default_factory=list)

    def run(self, planned: Sequence[Leftover], *, backup: bool) -> None:
        """Delete every leftover the plan does not keep.

        :raises CleanupStopped: a step failed or a wait ran out; the steps before it are in ``done``.
        """
        from botocore.exceptions import ClientError

        for leftover in sorted(planned, key=_deletion_order):
            if not leftover.to_delete or leftover.kind is Kind.DB_INSTANCE:  # instances go with their cluster
                continue
            try:
                self._delete(leftover, backup=backup)
            except ClientError as error:
                if (
                    error.response.get("Error", {}).get("Code") in ALREADY_GONE
                ):  # listed, then deleted elsewhere
                    self._step(f"{leftover.kind.label} {displayable(leftover.name)} was already gone")
                    continue
                raise CleanupStopped(
                    f"{leftover.kind.label} {displayable(leftover.id)}: {_client_error(error)}; nothing after it "
                    "was deleted: run cleanup again when it is fixed"
                ) from None

    def _step(self, line: str) -> None:
        self.done.append(line)
        self.say(line)

    def _delete(self, leftover: Leftover, *, backup: bool) -> None:
        name = displayable(leftover.id)
        kind = leftover.kind
        if kind is Kind.FILE_SYSTEM:
            self._file_system(leftover, backup=backup)
        elif kind is Kind.DB_CLUSTER:
            self._database(leftover, backup=backup)
        elif kind is Kind.DB_SUBNET_GROUP:
            self.clients.rds.delete_db_subnet_group(DBSubnetGroupName=leftover.id)
            self._step(f"deleted database subnet group {name}")
        elif kind is Kind.DB_PARAMETER_GROUP:
            self.clients.rds.delete_db_cluster_parameter_group(DBClusterParameterGroupName=leftover.id)
            self._step(f"deleted database parameter group {name}")
        elif kind is Kind.BUCKET:
            versions = self._empty(leftover.id)
            self.clients.s3.delete_bucket(Bucket=leftover.id)
            self._step(f"deleted S3 bucket {name} ({versions} object version(s) and delete marker(s))")
        elif kind is Kind.LOG_GROUP:
            self.clients.logs.delete_log_group(logGroupName=leftover.id)
            self._step(f"deleted log group {name}")
        elif kind is Kind.SECRET:
            self.clients.secretsmanager.delete_secret(
                SecretId=leftover.id, RecoveryWindowInDays=RECOVERY_DAYS
            )
            self._step(
                f"scheduled secret {name} for deletion in {RECOVERY_DAYS} days (restore-secret undoes it)"
            )
        elif kind is Kind.KMS_KEY:
            self.clients.kms.schedule_key_deletion(KeyId=leftover.id, PendingWindowInDays=RECOVERY_DAYS)
            self._step(
                f"scheduled KMS key {name} for deletion in {RECOVERY_DAYS} days (cancel-key-deletion undoes it)"
            )
        elif kind is Kind.EBS_VOLUME:
            self.clients.ec2.delete_volume(VolumeId=leftover.id)
            self._step(f"deleted EBS volume {name}")
        elif kind is Kind.SECURITY_GROUP:
            self.clients.ec2.delete_security_group(GroupId=leftover.id)
            self._step(f"deleted security group {name}")
        elif kind is Kind.SUBNET:
            self.clients.ec2.delete_subnet(SubnetId=leftover.id)
            self._step(f"deleted subnet {name}")
        elif kind is Kind.VPC:
            self.clients.ec2.delete_vpc(VpcId=leftover.id)
            self._step(f"deleted VPC {name}")

    def _file_system(self, fs: Leftover, *, backup: bool) -> None:
        fsx = self.clients.fsx
        if backup:
            tags = [
                {"Key": k, "Value": v}
                for k, v in {**self.tags, "Name": f"{self.environment} before cleanup"}.items()
            ]
            backup_id = str(fsx.create_backup(FileSystemId=fs.id, Tags=tags)["Backup"]["BackupId"])
            waited = self._wait(
                f"backup {backup_id} of {fs.id}",
                lambda: self._backup_available(backup_id),
                BACKUP_WAIT_SECONDS,
            )
            self._step(
                f"backed up file system {fs.id} as {backup_id} (available after {_minutes(waited)}; it stays, "
                "billed per GB-month: aws fsx delete-backup deletes it)"
            )
        fsx.delete_file_system(FileSystemId=fs.id)
        waited = self._wait(
            f"deletion of file system {fs.id}", lambda: self._file_system_gone(fs.id), DELETION_WAIT_SECONDS
        )
        self._step(f"deleted file system {fs.id} (gone after {_minutes(waited)})")

    def _backup_available(self, backup_id: str) -> bool:
        (found,) = self.clients.fsx.describe_backups(BackupIds=[backup_id])["Backups"]
        lifecycle = str(found.get("Lifecycle", ""))
        if lifecycle in ("FAILED", "DELETED"):
            reason = found.get("FailureDetails", {}).get("Message", "no reason given")
            raise CleanupStopped(
                f"backup {backup_id} is {lifecycle} ({bounded(str(reason), 200)}): the file system is kept"
            )
        return lifecycle == "AVAILABLE"

    def _file_system_gone(self, file_system_id: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.clients.fsx.describe_file_systems(FileSystemIds=[file_system_id])
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "FileSystemNotFound":
                return True
            raise
        return False

    def _database(self, db: Leftover, *, backup: bool) -> None:
        rds = self.clients.rds
        if db.facts.get("protected"):
            rds.modify_db_cluster(DBClusterIdentifier=db.id, DeletionProtection=False, ApplyImmediately=True)
            self._step(f"turned deletion protection off on database {db.id}")
        for instance in db.facts.get("instances", []):
            rds.delete_db_instance(DBInstanceIdentifier=instance)
            self._step(f"deleting database instance {instance}")
        if backup:
            snapshot = final_snapshot_id(db.id, self.now)
            rds.delete_db_cluster(DBClusterIdentifier=db.id, FinalDBSnapshotIdentifier=snapshot)
            kept = f"; its final snapshot {snapshot} stays (aws rds delete-db-cluster-snapshot deletes it)"
        else:
            rds.delete_db_cluster(DBClusterIdentifier=db.id, SkipFinalSnapshot=True)
            kept = ""
        waited = self._wait(
            f"deletion of database {db.id}", lambda: self._database_gone(db.id), DELETION_WAIT_SECONDS
        )
        self._step(f"deleted database {db.id} (gone after {_minutes(waited)}){kept}")

    def _database_gone(self, cluster: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.clients.rds.describe_db_clusters(DBClusterIdentifier=cluster)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "DBClusterNotFoundFault":
                return True
            raise
        return False

    def _empty(self, bucket: str) -> int:
        """Delete every object version and delete marker of a versioned bucket; how many there were."""
        s3 = self.clients.s3
        deleted = 0
        markers: dict[str, str] = {}
        for _ in range(MAX_PAGES):
            page = s3.list_object_versions(Bucket=bucket, **markers)
            objects = [
                {"Key": item["Key"], "VersionId": item["VersionId"]}
                for item in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
            ]
            if objects:
                answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})
                errors = answer.get("Errors", [])
                if errors:
                    first = errors[0]
                    raise CleanupStopped(
                        f"S3 bucket {displayable(bucket)}: {len(errors)} object(s) not deleted, first "
                        f"{displayable(str(first.get('Key')))}: {first.get('Code')}: {bounded(str(first.get('Message')), 200)}"
                    )
                deleted += len(objects)
            if not page.get("IsTruncated"):
                return deleted
            markers = {"KeyMarker": page["NextKeyMarker"], "VersionIdMarker": page["NextVersionIdMarker"]}
        raise CleanupStopped(
            f"S3 bucket {displayable(bucket)} holds more than {MAX_PAGES * 1000} versions: empty it with an S3 "
            "lifecycle rule, then run cleanup again"
        )

    def _wait(self, what: str, done: Callable[[], bool], limit_seconds: float) -> float:
        """Seconds until ``done()``; :class:`CleanupStopped` after ``limit_seconds``."""
        start = self.clock()
        while not done():
            waited = self.clock() - start
            if waited >= limit_seconds:
                raise CleanupStopped(
                    f"{what} not done after {_minutes(waited)}: nothing after it was deleted; run cleanup again later"
                )
            self.sleep(POLL_SECONDS)
        return self.clock() - start


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _client_error(error: Any) -> str:
    details = error.response.get("Error", {})
    return f"{details.get('Code', 'error')}: {bounded(str(details.get('Message', '')), 300)}"


# --------------------------------------------------------------------------------------------------
# showing


def summary_lines(inventory: Inventory, planned: Sequence[Leftover]) -> list[str]:
    """The lines under the table: the monthly total, what is not found by tags, a live stack."""
    known = sum(leftover.monthly_usd or 0 for leftover in planned)
    by_use = any(
        leftover.monthly_usd is None and leftover.cost not in ("free", "with its cluster")
        for leftover in planned
    )
    if inventory.region == PRICES_REGION:
        total = f"about {_usd(known)} a month ({PRICES_REGION} list prices of {PRICES_AS_OF})"
        total += ", plus what is billed by use" if by_use else ""
    else:
        total = f"monthly cost unknown: the price table holds {PRICES_REGION} only, not {inventory.region}"
    lines = [total]
    if inventory.live_stack_status:
        lines.append(
            f"stack {inventory.stack} exists ({inventory.live_stack_status}): its {inventory.in_live_stack} "
            "resource(s) are in use and not listed; cdk destroy first to clean up everything"
        )
    lines.append(
        f"not listed: the log groups Lambda made for CDK's handlers (/aws/lambda/{inventory.stack}-*), which carry "
        "no tags; backups and snapshots"
    )
    return lines
