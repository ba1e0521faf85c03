"""SlurmAccountingDatabase: the MySQL-compatible database slurmdbd keeps job and user accounting in.

Amazon Aurora MySQL 3 (MySQL 8.0 compatible), Serverless v2, in the VPC's private subnets. Slurm supports MySQL
and MariaDB servers for accounting (https://slurm.schedmd.com/accounting.html#mysql-configuration), and so do
AWS ParallelCluster's ``Scheduling.SlurmSettings.Database``
(https://docs.aws.amazon.com/parallelcluster/latest/ug/slurm-accounting-v3.html) and SageMaker HyperPod's
external accounting database
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html).
"""

from __future__ import annotations

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct, IConstruct

from training_clusters.compliance import acknowledge, acknowledge_nist, skip_checkov
from training_clusters.options import RemovalPolicy

from ._security_groups import ClientSideConnections
from ._validation import checked_props, fail, is_unresolved, to_removal_policy

#: Aurora MySQL 3.10, a long-term-support release (MySQL 8.0 compatible), supported by Serverless v2. The
#: engine itself is looked up when a database is built (:func:`_engine`): a jsii call at import time would
#: start jsii for anyone importing the module.
ENGINE_VERSION = "VER_3_10_0"
#: Serverless v2 capacity bounds, in Aurora capacity units (ACU, about 2 GiB of memory each).
MIN_ACU, MAX_ACU = 0.5, 256.0
#: RDS keeps automated backups 1 to 35 days.
MIN_BACKUP_DAYS, MAX_BACKUP_DAYS = 1, 35
#: Automated backups and maintenance, both in UTC, never overlapping.
BACKUP_WINDOW = "05:00-06:00"
MAINTENANCE_WINDOW = "Sun:02:00-Sun:03:00"
#: What the database writes to CloudWatch Logs (the audit log records connections and DDL/DCL statements).
LOG_EXPORTS = ("audit", "error", "general", "slowquery")
_USERNAME_MAX = 16  # MySQL's limit for the master user name


@checked_props
@jsii.implements(ec2.IConnectable)
class SlurmAccountingDatabase(Construct):
    """An encrypted Aurora MySQL Serverless v2 cluster for Slurm accounting, reachable only by what you allow.

    Example::

        db = SlurmAccountingDatabase(self, "Accounting", vpc=network.vpc)
        db.connections.allow_default_port_from(cluster)   # MySQL 3306, rule placed in the cluster's stack

    Credentials are generated in AWS Secrets Manager, in two forms that hold the same password:

    - ``secret``: JSON ``{"username", "password", "host", "port", "engine", "dbClusterIdentifier"}``, as RDS
      writes it; what SageMaker HyperPod's ``AccountingDatabase.SecretArn`` and MySQL clients read.
    - ``password_secret``: the password alone, as plain text; what ParallelCluster's
      ``SlurmSettings.Database.PasswordSecretArn`` requires (its head node reads the secret string verbatim).

    The password is not rotated: slurmdbd reads it when the head node is configured, and ParallelCluster
    documents re-running ``/opt/parallelcluster/scripts/slurm/update_slurm_database_password.sh`` after a
    change, so a rotation would cut accounting off until someone does.

    Attributes: ``cluster`` (the ``rds.DatabaseCluster``), ``writer`` (its writer instance, which CloudFormation
    creates minutes after the DB cluster: a client that connects as it starts depends on it, as
    :class:`HyperPodCluster` and :class:`ParallelCluster` do), ``endpoint`` (writer host name), ``port``,
    ``uri`` (``host:port``, ParallelCluster's ``Database.Uri``), ``username``, ``secret``, ``password_secret``,
    ``security_group``, ``connections`` (default port: the database port), ``kms_key``, ``parameter_group``,
    ``subnets`` (where it lives: keep them when the database is retained, see ``TrainingNetwork.retain``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        vpc_subnets: ec2.SubnetSelection | None = None,
        username: str = "slurm",
        min_capacity_acu: float = 0.5,
        max_capacity_acu: float = 2.0,
        backup_retention_days: int = 7,
        kms_key: kms.IKey | None = None,
        removal_policy: cdk.RemovalPolicy | RemovalPolicy | str = cdk.RemovalPolicy.RETAIN,
        deletion_protection: bool | None = None,
    ) -> None:
        """Create the database cluster, its security group, key and secrets.

        :param vpc: The VPC of the database and its clients.
        :param vpc_subnets: Where the database lives; Aurora wants subnets in at least two AZs. Default: the
            VPC's private subnets (isolated ones when the VPC has no others).
        :param username: The master user slurmdbd connects as (1 to 16 letters, digits and ``_``, starting
            with a letter). Default: ``slurm``.
        :param min_capacity_acu: Least Serverless v2 capacity, in ACU (0.5 to 256, steps of 0.5). slurmdbd
            keeps a connection open, so the database never pauses and bills at least this much every hour.
            Default: 0.5 (about 1 GiB of memory), plenty for a team's job records.
        :param max_capacity_acu: Most capacity Aurora scales up to, in ACU. Default: 2.
        :param backup_retention_days: Days RDS keeps automated backups (1 to 35); point-in-time restore covers
            the same days. Backups run 05:00-06:00 UTC, maintenance Sunday 02:00-03:00 UTC. Default: 7.
        :param kms_key: Customer key encrypting the storage, its backups and the exported logs' snapshots.
            Default: a new key with yearly rotation (about 1 USD a month).
        :param removal_policy: What happens to the database (with its key, secrets and security group) when
            it leaves the stack: a ``cdk.RemovalPolicy``, or ``RemovalPolicy`` / ``"retain"`` / ``"destroy"``.
            Default: RETAIN, the job history outlives the cluster.
        :param deletion_protection: Refuse to delete the database (also through the console or API) until
            turned off. Default: on, unless ``removal_policy`` is DESTROY (which asks for the deletion).

        Replacement: ``vpc``, ``vpc_subnets`` (the subnet group), ``username``, ``kms_key`` and the security
        group's description are create-only: changing one replaces the database with a new, empty one.
        """
        super().__init__(scope, id)
        removal = to_removal_policy(self, "removal_policy", removal_policy)
        self._check_username(username)
        self._check_capacity(min_capacity_acu, max_capacity_acu)
        self._check_backup_retention(backup_retention_days)
        protect = removal != cdk.RemovalPolicy.DESTROY if deletion_protection is None else deletion_protection

        self.username = username
        selection = vpc_subnets or ec2.SubnetSelection(subnet_type=_private_subnet_type(vpc))
        self.subnets: list[ec2.ISubnet] = vpc.select_subnets(
            subnet_type=selection.subnet_type,
            subnets=selection.subnets,
            subnet_group_name=selection.subnet_group_name,
            availability_zones=selection.availability_zones,
            one_per_az=selection.one_per_az,
            subnet_filters=selection.subnet_filters,
        ).subnets
        self.kms_key: kms.IKey = kms_key or kms.Key(
            self,
            "Key",
            description="Slurm accounting database: storage and backups",
            enable_key_rotation=True,
            removal_policy=removal,
        )
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="Slurm accounting database: MySQL from allowed clients only",
            allow_all_outbound=False,
        )
        self.secret = rds.DatabaseSecret(self, "Secret", username=username)
        self.parameter_group = self._parameter_group()
        self.cluster = rds.DatabaseCluster(
            self,
            "Resource",
            engine=_engine(),
            writer=rds.ClusterInstance.serverless_v2("Writer", auto_minor_version_upgrade=True),
            serverless_v2_min_capacity=min_capacity_acu,
            serverless_v2_max_capacity=max_capacity_acu,
            vpc=vpc,
            vpc_subnets=selection,
            security_groups=[self.security_group],
            credentials=rds.Credentials.from_secret(self.secret),
            parameter_group=self.parameter_group,
            storage_encrypted=True,
            storage_encryption_key=self.kms_key,
            deletion_protection=protect,
            removal_policy=removal,
            backup=rds.BackupProps(
                retention=cdk.Duration.days(backup_retention_days), preferred_window=BACKUP_WINDOW
            ),
            preferred_maintenance_window=MAINTENANCE_WINDOW,
            cloudwatch_logs_exports=list(LOG_EXPORTS),
            copy_tags_to_snapshot=True,
            iam_authentication=False,
        )
        # ParallelCluster reads PasswordSecretArn's string verbatim: the same password, as plain text.
        self.password_secret = secretsmanager.Secret(
            self,
            "PasswordSecret",
            description="Slurm accounting database password, plain text (ParallelCluster PasswordSecretArn)",
            secret_string_value=cdk.SecretValue.secrets_manager(
                self.secret.secret_arn, json_field="password"
            ),
            removal_policy=removal,
        )
        if removal == cdk.RemovalPolicy.RETAIN:
            # A retained database keeps using its security group, parameter group and master user's secret.
            self.security_group.apply_removal_policy(removal)
            self.secret.apply_removal_policy(removal)
            self.parameter_group.apply_removal_policy(removal)
        #: The writer instance: CloudFormation creates it minutes after the DB cluster, and the database
        #: accepts no connection before it exists.
        self.writer: IConstruct = self.cluster.node.find_child("Writer")
        writer = self.writer.node.default_child
        # CDK makes the instance wait for the subnets' internet routes; a database in private subnets needs no
        # internet, and the wait would tie a retained instance to routes `cdk destroy` deletes.
        writer.add_deletion_override("DependsOn")

        self.endpoint: str = self.cluster.cluster_endpoint.hostname
        self.port: int = 3306
        self.uri: str = f"{self.endpoint}:{self.port}"
        self._connections = ClientSideConnections(self.security_group, ec2.Port.tcp(self.port), home=vpc)
        self._explain_findings(protect)

    @property
    def connections(self) -> ec2.Connections:
        """The database's security group; the default port is MySQL's 3306.

        ``db.connections.allow_default_port_from(clients)`` opens 3306 from the clients' group; when the
        clients live in another stack, CDK puts the ingress rule in that stack (and the clients' egress rule
        beside it), so the database may sit in a shared stack with no dependency cycle.
        """
        return self._connections

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _check_username(self, username: str) -> None:
        if is_unresolved(username):
            return
        valid = (
            0 < len(username) <= _USERNAME_MAX
            and username[0].isascii()
            and username[0].isalpha()
            and all(c.isascii() and (c.isalnum() or c == "_") for c in username)
        )
        if not valid:
            raise fail(
                self.node.path,
                "username",
                f"must be 1 to {_USERNAME_MAX} letters, digits or '_', starting with a letter, got '{username}'",
            )
        if username.lower() in _RESERVED_USERNAMES:
            raise fail(self.node.path, "username", f"is reserved by RDS, got '{username}'")

    def _check_capacity(self, low: float, high: float) -> None:
        for field, value in (("min_capacity_acu", low), ("max_capacity_acu", high)):
            if is_unresolved(value):
                continue
            if not MIN_ACU <= value <= MAX_ACU or (value * 2) != int(value * 2):
                raise fail(
                    self.node.path,
                    field,
                    f"must be {MIN_ACU:g} to {MAX_ACU:g} in steps of 0.5 ACU, got {value:g}",
                )
        if not is_unresolved(low) and not is_unresolved(high) and low > high:
            raise fail(
                self.node.path,
                "min_capacity_acu",
                f"must not exceed max_capacity_acu ({high:g}), got {low:g}",
            )

    def _check_backup_retention(self, days: int) -> None:
        if is_unresolved(days):
            return
        if not MIN_BACKUP_DAYS <= days <= MAX_BACKUP_DAYS:
            raise fail(
                self.node.path,
                "backup_retention_days",
                f"must be {MIN_BACKUP_DAYS} to {MAX_BACKUP_DAYS} (RDS keeps automated backups at least a day), "
                f"got {days}",
            )

    # ----------------------------------------------------------------------------------------------
    # building

    def _parameter_group(self) -> rds.ParameterGroup:
        # The audit log records every connection and every DDL/DCL statement (grants, schema changes), so the
        # exported "audit" log group has content; long queries go to the slow query log.
        return rds.ParameterGroup(
            self,
            "Parameters",
            engine=_engine(),
            description="Slurm accounting: audit connections and DDL/DCL, log queries slower than 5 s",
            parameters={
                "server_audit_logging": "1",
                "server_audit_events": "CONNECT,QUERY_DCL,QUERY_DDL",
                "slow_query_log": "1",
                "long_query_time": "5",
            },
        )

    def _explain_findings(self, protected: bool) -> None:
        cluster = self.cluster.node.default_child
        assert isinstance(cluster, rds.CfnDBCluster)
        acknowledge(
            cluster,
            "AwsSolutions-RDS6",
            "slurmdbd authenticates with a user name and password (StoragePass); it cannot request IAM "
            "database authentication tokens",
        )
        acknowledge(
            cluster,
            "AwsSolutions-RDS11",
            "ParallelCluster and HyperPod expect MySQL's port; the port is no access control: only the security "
            "groups of the clients allowed through connections reach it, inside private subnets",
        )
        acknowledge(
            cluster,
            "AwsSolutions-RDS14",
            "backtrack is not available for Aurora Serverless v2; automated backups with point-in-time "
            "restore cover the accounting history",
        )
        skip_checkov(
            cluster,
            "CKV_AWS_162",
            "slurmdbd authenticates with a user name and password; it cannot use IAM database authentication",
        )
        writer = self.cluster.node.find_child("Writer").node.default_child
        assert isinstance(writer, rds.CfnDBInstance)
        acknowledge_nist(
            writer,
            "NIST.800.53.R5-RDSInBackupPlan",
            "RDS automated backups with point-in-time restore protect the job history; an AWS Backup plan "
            "would duplicate them",
        )
        if not protected:
            why = "removal_policy DESTROY (or deletion_protection=False) asks for a database that can be deleted"
            acknowledge(cluster, "AwsSolutions-RDS10", why)
            skip_checkov(cluster, "CKV_AWS_139", why)
            acknowledge_nist(cluster, "NIST.800.53.R5-RDSInstanceDeletionProtectionEnabled", why)
        no_enhanced_monitoring = (
            "Aurora publishes the instance's CloudWatch metrics (ACU, connections, CPU); enhanced OS monitoring "
            "needs a monitoring role and per-second billing a team's accounting database does not warrant"
        )
        acknowledge_nist(writer, "NIST.800.53.R5-RDSEnhancedMonitoringEnabled", no_enhanced_monitoring)
        skip_checkov(writer, "CKV_AWS_118", no_enhanced_monitoring)
        no_rotation = (
            "slurmdbd reads the password once, when the head node is configured; ParallelCluster documents "
            "re-running update_slurm_database_password.sh with the compute fleet stopped after a change, so an "
            "automatic rotation would stop accounting until someone does"
        )
        for secret in (self.secret, self.password_secret):
            acknowledge(secret, "AwsSolutions-SMG4", no_rotation)
            acknowledge_nist(secret, "NIST.800.53.R5-SecretsManagerRotationEnabled", no_rotation)
            why_key = (
                "encrypted with the account's AWS-managed Secrets Manager key, which ParallelCluster's head node "
                "role (granted GetSecretValue on PasswordSecretArn) can use; a customer key would need a "
                "kms:Decrypt grant outside ParallelCluster's own policy"
            )
            skip_checkov(secret, "CKV_AWS_149", why_key)
            acknowledge_nist(secret, "NIST.800.53.R5-SecretsManagerUsingKMSKey", why_key)


#: Master user names RDS keeps for itself.
_RESERVED_USERNAMES = frozenset({"rdsadmin"})


def _private_subnet_type(vpc: ec2.IVpc) -> ec2.SubnetType:
    if vpc.isolated_subnets and not vpc.private_subnets:
        return ec2.SubnetType.PRIVATE_ISOLATED
    return ec2.SubnetType.PRIVATE_WITH_EGRESS


def _engine() -> rds.IClusterEngine:
    """The Aurora MySQL engine of :data:`ENGINE_VERSION`."""
    version = getattr(rds.AuroraMysqlEngineVersion, ENGINE_VERSION)
    return rds.DatabaseClusterEngine.aurora_mysql(version=version)
