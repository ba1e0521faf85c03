"""SharedLustre: an FSx for Lustre file system that every node of a training cluster mounts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import custom_resources as cr
from constructs import Construct

from training_clusters.constructs.private.security_groups import ClientSideConnections
from training_clusters.constructs.private.validation import (
    checked_props,
    is_unresolved,
    parse_option,
    prop_error,
    raise_if_problem,
    refuse_alongside,
    to_removal_policy,
)
from training_clusters.gates.compliance import acknowledge_cdk_made
from training_clusters.model.options import LustreDeploymentType, RemovalPolicy
from training_clusters.rules.lustre import (
    DAILY_BACKUP_START_UTC,
    LUSTRE_FIRST_STEP_GIB,
    NO_ROOT_SQUASH_IDS,
    ROOT_SQUASH_IDS,
    WEEKLY_MAINTENANCE_START_UTC,
    adopted_root_squash_problem,
    exempt_nids_problem,
    file_system_path_problem,
    lustre_backup_retention_days,
    lustre_backup_retention_problem,
    lustre_capacity_problem,
    lustre_dns_name_problem,
    lustre_kms_key_problem,
    lustre_mount_name_problem,
    lustre_throughput_problem,
    s3_prefix_problem,
)

#: Lustre's server port and the privileged client port range, both needed between clients and servers.
LUSTRE_PORT = ec2.Port.tcp(988)
LUSTRE_CLIENT_PORTS = ec2.Port.tcp_range(1018, 1023)

#: The deploy-time root squash of a file system (an ``AwsCustomResource`` calling FSx UpdateFileSystem).
ROOT_SQUASH_TYPE = "Custom::LustreRootSquash"
#: aws-cdk-lib's AwsCustomResource runs one Lambda per stack, a stack child of this id (its provider's UUID).
SDK_CALL_FUNCTION_ID = "AWS679f53fac002430cb0da5b7982bd2287"


@dataclass(frozen=True)
class DataRepository:
    """Link a path of the file system to an S3 prefix (a data repository association).

    :param bucket: The bucket holding the datasets / receiving checkpoints.
    :param prefix: Key prefix inside the bucket. Default: the whole bucket.
    :param file_system_path: Where the prefix appears in the file system. Default: ``/``.
    :param auto_import: New, changed and deleted S3 objects appear in Lustre. Default: True.
    :param auto_export: New, changed and deleted Lustre files are written back to S3 (checkpoints).
        Default: True.
    :param import_metadata_on_create: List the prefix's objects when the association is created. Default: True.
    """

    bucket: s3.IBucket
    prefix: str = ""
    file_system_path: str = "/"
    auto_import: bool = True
    auto_export: bool = True
    import_metadata_on_create: bool = True


@dataclass(frozen=True)
class ExistingLustre:
    """Attributes of a file system made elsewhere, for :class:`SharedLustre` to adopt.

    :param dns_name: Its DNS name, ``fs-<id>.fsx.<region>.amazonaws.com`` (letters, digits, ``-`` and ``.``).
    :param mount_name: Its Lustre mount name: 1-8 letters, digits, ``_`` or ``-`` (``fsx`` on PERSISTENT_1).
    :param storage_capacity_gib: Its capacity, for clients that advertise it (an EKS PersistentVolume).
        Default: unknown; :class:`~training_clusters.constructs.eks.addons.fsx_csi_driver.FsxCsiDriver` then asks for it.
    """

    file_system_id: str
    dns_name: str
    mount_name: str
    security_group: ec2.ISecurityGroup
    storage_capacity_gib: int | None = None


@checked_props
@jsii.implements(ec2.IConnectable)
class SharedLustre(Construct):
    """FSx for Lustre in one private subnet, reachable by whatever you allow through ``connections``.

    Example::

        fs = SharedLustre(self, "Fsx", vpc=network.vpc, subnet=network.placement_subnet(),
                          storage_capacity_gib=1200)
        fs.allow_clients_from(cluster)   # Lustre ports 988 and 1018-1023 both ways

    Attributes: ``file_system`` (None when adopting an existing one), ``file_system_id``, ``dns_name``,
    ``mount_name``, ``security_group``, ``connections`` (default port 988).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet | None = None,
        existing: ExistingLustre | None = None,
        deployment_type: LustreDeploymentType | str = LustreDeploymentType.SCRATCH_2,
        storage_capacity_gib: int | None = None,
        per_unit_storage_throughput_mbps: int | None = None,
        data_repository: DataRepository | None = None,
        kms_key: kms.IKey | None = None,
        removal_policy: cdk.RemovalPolicy | RemovalPolicy | str = cdk.RemovalPolicy.RETAIN,
        backup_retention_days: int | None = None,
        root_squash: bool = False,
        root_squash_exempt_nids: Sequence[str] = (),
    ) -> None:
        """Create a file system, or adopt ``existing``.

        :param vpc: The VPC of the file system and its clients.
        :param subnet: The one private subnet the file system lives in; put it in the AZ of the cluster's
            placement group. Default: the VPC's first private subnet. Not used with ``existing``.
        :param existing: Adopt a file system created elsewhere. Default: a new one is created. Mutually
            exclusive with the props that shape a new file system.
        :param deployment_type: Default: SCRATCH_2.
        :param storage_capacity_gib: 1200, or a multiple of 2400. Default: 1200.
        :param per_unit_storage_throughput_mbps: MB/s per TiB for PERSISTENT_2: 125, 250, 500 or 1000.
            Required for PERSISTENT_2, not allowed for SCRATCH_2. Default: none (SCRATCH_2's fixed throughput).
        :param data_repository: Link an S3 prefix (import datasets, export checkpoints). Default: none.
        :param kms_key: Customer key for data at rest (PERSISTENT_2 only). Default: an AWS-managed key
            (FSx always encrypts at rest).
        :param removal_policy: What happens to the file system when it leaves the stack: a ``cdk.RemovalPolicy``,
            or ``RemovalPolicy`` / ``"retain"`` / ``"destroy"``. Default: RETAIN. With RETAIN the file
            system's security group is retained too (the file system keeps using it); the stack must keep
            its subnet and VPC as well, or ``cdk destroy`` stops on them.
        :param backup_retention_days: Days FSx keeps the daily automatic backups of a PERSISTENT_2 file system,
            0 (off) to 90; backups copy the file system's tags and start at 05:00 UTC, and weekly maintenance
            is pinned to Sunday 02:00 UTC so the two windows never overlap. Default: 7 for PERSISTENT_2;
            not allowed for SCRATCH_2 (FSx cannot back it up). Backups are billed per GB-month of backup
            storage; they are deleted with the file system.
        :param root_squash: Root on every client acts as nobody (``65534:65534``) on the file system
            (``LustreConfiguration.RootSquashConfiguration``). Default: False, and then root on any client (a
            node, a privileged pod) reads and writes every file here, everyone's homes and keys included. On
            for clusters whose nodes never write here as root: pods through the FSx CSI driver (EKS, HyperPod
            on EKS). The Slurm flavors' node scripts (ParallelCluster's ``users.sh``, HyperPod's shared home and
            users, the PCS mount script's ``chmod``) write here as root on every new node, and FSx exempts
            clients only by IP address, which replaced nodes do not keep: leave it off there (environment files
            refuse it). A new file system's root directory is root's, mode 0755: with root squash on, nothing
            is written until an exempt client makes the folders (one-time: from an instance whose NID is in
            ``root_squash_exempt_nids``, ``mkdir`` and ``chown`` one folder per team), or a data repository
            imports them.
        :param root_squash_exempt_nids: Clients root squash does not apply to (``NoSquashNids``: NIDs such as
            ``10.0.1.6@tcp``, at most 64), e.g. an administrator's instance at a fixed private IP. Only with
            ``root_squash``. Default: none.

        Replacement: these props are create-only in CloudFormation (``Update requires: Replacement``), so
        changing one after deployment replaces the file system with a new, empty one: ``subnet``, the
        security group (its description, or anything else that replaces it), and ``kms_key`` (adding one
        later too). ``tests/test_replacement.py`` pins them for the shipped environments.
        """
        super().__init__(scope, id)
        self.deployment_type = parse_option(self, "deployment_type", LustreDeploymentType, deployment_type)
        removal = to_removal_policy(self, "removal_policy", removal_policy)
        self._check_existing_exclusive(
            existing, storage_capacity_gib, per_unit_storage_throughput_mbps, data_repository, kms_key, subnet
        )
        self.file_system: fsx.LustreFileSystem | None
        #: With ``root_squash``, the deploy-time call that sets it (``Custom::LustreRootSquash``); else None.
        self.root_squash: cr.AwsCustomResource | None = None
        if existing is not None:
            if root_squash or root_squash_exempt_nids:
                field = "root_squash" if root_squash else "root_squash_exempt_nids"
                raise_if_problem(self, field, adopted_root_squash_problem(adopted=True))
            self._check_existing_names(existing)
            self.file_system = None
            self.security_group = existing.security_group
            self.file_system_id: str = existing.file_system_id
            self.dns_name: str = existing.dns_name
            self.mount_name: str = existing.mount_name
            self.storage_capacity_gib: int | None = existing.storage_capacity_gib
        else:
            capacity = storage_capacity_gib if storage_capacity_gib is not None else LUSTRE_FIRST_STEP_GIB
            self.storage_capacity_gib = capacity
            self._check_capacity(capacity)
            self._check_throughput(per_unit_storage_throughput_mbps)
            self._check_kms_key(kms_key)
            self._check_backup_retention(backup_retention_days)
            self._check_root_squash(root_squash, root_squash_exempt_nids)
            self._check_data_repository(data_repository)
            self.security_group = self._create_security_group(vpc)
            self.file_system = self._create_file_system(
                vpc,
                subnet or vpc.select_subnets(subnet_type=_private_subnet_type(vpc)).subnets[0],
                capacity,
                per_unit_storage_throughput_mbps,
                kms_key,
                removal,
                lustre_backup_retention_days(self.deployment_type.value, backup_retention_days),
            )
            if root_squash:
                self._squash_root(root_squash_exempt_nids)
            if removal == cdk.RemovalPolicy.RETAIN:
                # A retained file system keeps using its security group: deleting the group would fail.
                self.security_group.apply_removal_policy(removal)
            self.file_system_id = self.file_system.file_system_id
            self.dns_name = self.file_system.dns_name
            self.mount_name = self.file_system.mount_name
            if data_repository is not None:
                self.data_repository_association = self._associate(data_repository)
        self._connections = ClientSideConnections(
            self.security_group, LUSTRE_PORT, home=vpc if existing is None else None, owner=self
        )

    @property
    def connections(self) -> ec2.Connections:
        """The file system's security group; the default port is Lustre's 988.

        Between two stacks each pair of rules asked of it (``fs.connections.allow_default_port_from(cluster)``)
        lands in the stack that uses the other, as :meth:`allow_clients_from`'s do. Call it on this side: a
        call on a plain CDK group's connections (``group.connections.allow_to(fs, port)``) makes CDK's own
        rule in that group's stack first, which cycles when the group lives in the network's stack. For a
        Lustre client one port is not enough: prefer :meth:`allow_clients_from`.
        """
        return self._connections

    def allow_clients_from(self, clients: ec2.IConnectable) -> None:
        """Let ``clients`` mount the file system: Lustre ports 988 and 1018-1023, in both directions.

        The rules are made through :attr:`connections`, so between two stacks they land in the one that
        uses the other: a cluster stack's clients get them in their own stack (the file system may live in a
        shared storage stack every cluster stack uses), the network's EFA group gets them in the file
        system's stack. In one stack the rules are the same as ever. Clients in a stack of another account or
        region are refused (:class:`ConfigurationError` naming both environments): a file system is mounted
        within its own account and region here.
        """
        self._connections.check_peer(clients, "allow_clients_from.clients")
        for port, what in ((LUSTRE_PORT, "server port"), (LUSTRE_CLIENT_PORTS, "client ports")):
            self.connections.allow_from(clients, port, f"Lustre {what} from clients")
            # Lustre servers also open connections back to clients; ParallelCluster checks for it.
            self.connections.allow_to(clients, port, f"Lustre {what} to clients")

    def mount_target(self) -> str:
        """``<dns name>@tcp:/<mount name>``, the device part of a Lustre mount or fstab line."""
        return f"{self.dns_name}@tcp:/{self.mount_name}"

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _check_existing_exclusive(
        self,
        existing: ExistingLustre | None,
        capacity: int | None,
        throughput: int | None,
        data_repository: DataRepository | None,
        kms_key: kms.IKey | None,
        subnet: ec2.ISubnet | None,
    ) -> None:
        if existing is None:
            return
        refuse_alongside(
            self,
            "existing",
            "adopts a file system made elsewhere",
            {
                "storage_capacity_gib": capacity,
                "per_unit_storage_throughput_mbps": throughput,
                "data_repository": data_repository,
                "kms_key": kms_key,
                "subnet": subnet,
            },
        )

    def _check_existing_names(self, existing: ExistingLustre) -> None:
        """The names go into the nodes' root scripts (fstab lines, user data): only the shapes FSx gives."""
        if not is_unresolved(existing.dns_name):
            raise_if_problem(self, "existing.dns_name", lustre_dns_name_problem(existing.dns_name))
        if not is_unresolved(existing.mount_name):
            raise_if_problem(self, "existing.mount_name", lustre_mount_name_problem(existing.mount_name))

    def _check_capacity(self, capacity: int) -> None:
        if is_unresolved(capacity):
            return
        raise_if_problem(
            self, "storage_capacity_gib", lustre_capacity_problem(self.deployment_type.value, capacity)
        )

    def _check_throughput(self, throughput: int | None) -> None:
        if is_unresolved(throughput):
            return
        raise_if_problem(
            self,
            "per_unit_storage_throughput_mbps",
            lustre_throughput_problem(self.deployment_type.value, throughput),
        )

    def _check_kms_key(self, kms_key: kms.IKey | None) -> None:
        if kms_key is not None:
            raise_if_problem(self, "kms_key", lustre_kms_key_problem(self.deployment_type.value))

    def _check_root_squash(self, root_squash: bool, exempt: Sequence[str]) -> None:
        raise_if_problem(self, "root_squash_exempt_nids", exempt_nids_problem(root_squash, exempt))

    def _squash_root(self, exempt: Sequence[str]) -> None:
        """Root squash through FSx's UpdateFileSystem when the stack deploys: CloudFormation's
        ``AWS::FSx::FileSystem`` has no ``RootSquashConfiguration`` (its LustreConfiguration schema), FSx's API
        has (``UpdateFileSystemLustreConfiguration.RootSquashConfiguration``). Removing it (root_squash off, or
        the stack deleted while a retained file system stays) sets ``0:0``, which FSx reads as root squash off."""
        assert self.file_system is not None
        file_system_id = self.file_system.file_system_id

        def update(root_squash: str, nids: Sequence[str]) -> cr.AwsSdkCall:
            return cr.AwsSdkCall(
                service="FSx",
                action="updateFileSystem",
                parameters={
                    "FileSystemId": file_system_id,
                    "LustreConfiguration": {
                        "RootSquashConfiguration": {"RootSquash": root_squash, "NoSquashNids": list(nids)}
                    },
                },
                physical_resource_id=cr.PhysicalResourceId.of(file_system_id),
                ignore_error_codes_matching="FileSystemNotFound"
                if root_squash == NO_ROOT_SQUASH_IDS
                else None,
            )

        arn = cdk.Stack.of(self).format_arn(
            service="fsx", resource="file-system", resource_name=file_system_id
        )
        self.root_squash = cr.AwsCustomResource(
            self,
            "RootSquash",
            resource_type=ROOT_SQUASH_TYPE,
            on_update=update(ROOT_SQUASH_IDS, exempt),  # also the create call
            on_delete=update(NO_ROOT_SQUASH_IDS, ()),
            # UpdateFileSystem on this file system only (Service Authorization Reference, Amazon FSx:
            # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonfsx.html)
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [iam.PolicyStatement(actions=["fsx:UpdateFileSystem"], resources=[arn])]
            ),
            install_latest_aws_sdk=False,
        )
        reason = (
            "aws-cdk-lib's AwsCustomResource (its design): it sets the file system's root squash with "
            "fsx:UpdateFileSystem on this file system only, as CloudFormation has no property for it"
        )
        acknowledge_cdk_made(self.root_squash, reason)
        stack = cdk.Stack.of(self)
        for child in stack.node.children:
            if child.node.id.startswith(SDK_CALL_FUNCTION_ID):
                acknowledge_cdk_made(
                    child,
                    reason,
                    managed_policy_reasons={
                        "AWSLambdaBasicExecutionRole": "aws-cdk-lib's AwsCustomResource function writes its own logs"
                    },
                )

    def _check_backup_retention(self, days: int | None) -> None:
        if is_unresolved(days):
            return
        problem = lustre_backup_retention_problem(self.deployment_type.value, days)
        if problem:
            raise prop_error(self.node.path, "backup_retention_days", problem)

    def _check_data_repository(self, repository: DataRepository | None) -> None:
        if repository is None:
            return
        raise_if_problem(
            self, "data_repository.file_system_path", file_system_path_problem(repository.file_system_path)
        )
        raise_if_problem(self, "data_repository.prefix", s3_prefix_problem(repository.prefix))

    # ----------------------------------------------------------------------------------------------
    # building

    def _create_security_group(self, vpc: ec2.IVpc) -> ec2.SecurityGroup:
        group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="FSx for Lustre: ports 988 and 1018-1023 between servers and allowed clients",
            allow_all_outbound=False,
        )
        # Lustre servers also talk to each other on the same ports.
        for port, what in ((LUSTRE_PORT, "server port"), (LUSTRE_CLIENT_PORTS, "client ports")):
            group.add_ingress_rule(group, port, f"Lustre {what} between file servers")
            group.add_egress_rule(group, port, f"Lustre {what} between file servers")
        return group

    def _create_file_system(
        self,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        capacity: int,
        throughput: int | None,
        kms_key: kms.IKey | None,
        removal_policy: cdk.RemovalPolicy,
        backup_retention_days: int | None,
    ) -> fsx.LustreFileSystem:
        configuration = fsx.LustreConfiguration(
            deployment_type=fsx.LustreDeploymentType(self.deployment_type.value),
            per_unit_storage_throughput=throughput,
            data_compression_type=fsx.LustreDataCompressionType.LZ4,
            **_backup_settings(backup_retention_days),
        )
        return fsx.LustreFileSystem(
            self,
            "Resource",
            vpc=vpc,
            vpc_subnet=subnet,
            storage_capacity_gib=capacity,
            lustre_configuration=configuration,
            security_group=self.security_group,
            kms_key=kms_key,
            removal_policy=removal_policy,
            file_system_type_version=fsx.FileSystemTypeVersion.V_2_15,
        )

    def _associate(self, repository: DataRepository) -> fsx.CfnDataRepositoryAssociation:
        events = ["NEW", "CHANGED", "DELETED"]
        prefix = repository.prefix.strip("/")
        s3_path = (
            f"s3://{repository.bucket.bucket_name}/{prefix}"
            if prefix
            else f"s3://{repository.bucket.bucket_name}"
        )
        s3_config = fsx.CfnDataRepositoryAssociation.S3Property(
            auto_import_policy=(
                fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(events=events)
                if repository.auto_import
                else None
            ),
            auto_export_policy=(
                fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(events=events)
                if repository.auto_export
                else None
            ),
        )
        assert self.file_system is not None
        return fsx.CfnDataRepositoryAssociation(
            self,
            "DataRepositoryAssociation",
            file_system_id=self.file_system.file_system_id,
            file_system_path=repository.file_system_path,
            data_repository_path=s3_path,
            batch_import_meta_data_on_create=repository.import_metadata_on_create,
            s3=s3_config,
        )


def _backup_settings(days: int | None) -> dict[str, Any]:
    """LustreConfiguration's backup props: none (SCRATCH_2), off (0), or daily in a fixed window."""
    if days is None:
        return {}
    if days == 0:
        return {"automatic_backup_retention": cdk.Duration.days(0)}
    hour, minute = DAILY_BACKUP_START_UTC
    weekday, maintenance_hour, maintenance_minute = WEEKLY_MAINTENANCE_START_UTC
    return {
        "automatic_backup_retention": cdk.Duration.days(days),
        "copy_tags_to_backups": True,
        "daily_automatic_backup_start_time": fsx.DailyAutomaticBackupStartTime(hour=hour, minute=minute),
        "weekly_maintenance_start_time": fsx.LustreMaintenanceTime(
            day=_WEEKDAYS[weekday], hour=maintenance_hour, minute=maintenance_minute
        ),
    }


_WEEKDAYS = {
    1: fsx.Weekday.MONDAY, 2: fsx.Weekday.TUESDAY, 3: fsx.Weekday.WEDNESDAY, 4: fsx.Weekday.THURSDAY,
    5: fsx.Weekday.FRIDAY, 6: fsx.Weekday.SATURDAY, 7: fsx.Weekday.SUNDAY,
}  # fmt: skip


def _private_subnet_type(vpc: ec2.IVpc) -> ec2.SubnetType:
    if vpc.isolated_subnets and not vpc.private_subnets:
        return ec2.SubnetType.PRIVATE_ISOLATED
    return ec2.SubnetType.PRIVATE_WITH_EGRESS
