"""SlurmAccountingDatabase: the MySQL-compatible database slurmdbd keeps job and user accounting in.

Amazon Aurora MySQL 3 (MySQL 8.0 compatible), Serverless v2, in the VPC's private subnets. Slurm supports MySQL
and MariaDB servers for accounting (https://slurm.schedmd.com/accounting.html#mysql-configuration), and so do
AWS ParallelCluster's ``Scheduling.SlurmSettings.Database``
(https://docs.aws.amazon.com/parallelcluster/latest/ug/slurm-accounting-v3.html) and SageMaker HyperPod's
external accounting database
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import custom_resources as cr
from constructs import Construct, DependencyGroup, IConstruct

from training_clusters.constructs.private.handlers import vpc_interface_statement
from training_clusters.constructs.private.security_groups import ClientSideConnections
from training_clusters.constructs.private.validation import (
    checked_props,
    is_unresolved,
    prop_error,
    raise_if_problem,
    to_removal_policy,
)
from training_clusters.gates.compliance import (
    accept_handler_findings,
    accept_inline_policy,
    accept_log_group_without_key,
    acknowledge,
    acknowledge_cdk_made,
    acknowledge_nist,
    acknowledge_wildcards,
    skip_checkov,
)
from training_clusters.model.options import RemovalPolicy
from training_clusters.node_scripts.handlers.slurmdbd_user import staged_asset
from training_clusters.rules.accounting import (
    SLURMDBD_USERNAME,
    backup_retention_problem,
    capacity_acu_problem,
    capacity_range_problem,
    databases_problem,
    master_username_problem,
    rotation_days_problem,
)

#: Aurora MySQL 3.10, a long-term-support release (MySQL 8.0 compatible), supported by Serverless v2. The
#: engine itself is looked up when a database is built (:func:`_engine`): a jsii call at import time would
#: start jsii for anyone importing the module.
ENGINE_VERSION = "VER_3_10_0"
#: Automated backups and maintenance, both in UTC, never overlapping.
BACKUP_WINDOW = "05:00-06:00"
MAINTENANCE_WINDOW = "Sun:02:00-Sun:03:00"
#: What the database writes to CloudWatch Logs (the audit log records connections and DDL/DCL statements).
LOG_EXPORTS = ("audit", "error", "general", "slowquery")
#: slurmdbd's database (its StorageLoc) when none is named: Slurm's default and HyperPod's lifecycle's.
DEFAULT_DATABASES = ("slurm_acct_db",)
#: AWS's bundle of the RDS certificate authorities of every commercial Region
#: (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/UsingWithRDS.SSL.html): what clients verify
#: the database's certificate against.
RDS_CA_BUNDLE_URL = "https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem"
_HANDLER_ENI_REASON = (
    "the slurmdbd-user handler runs in the database's private subnets; Lambda needs these EC2 "
    "network-interface actions on any resource to attach and detach its VPC interfaces"
)
_PROVIDER_REASON = (
    "aws-cdk-lib's custom-resource Provider framework (its design): it invokes the slurmdbd-user handler and "
    "reports back to CloudFormation"
)


@checked_props
@jsii.implements(ec2.IConnectable)
class SlurmAccountingDatabase(Construct):
    """An encrypted Aurora MySQL Serverless v2 cluster for Slurm accounting, reachable only by what you allow.

    Example::

        db = SlurmAccountingDatabase(self, "Accounting", vpc=network.vpc)
        db.connections.allow_default_port_from(cluster)   # MySQL 3306, rule placed in the cluster's stack

    **TLS, required and verified.** The DB cluster parameter group sets ``require_secure_transport`` to ``ON``
    (a cluster-level parameter of Aurora MySQL; its cluster parameter groups take ``ON``/``OFF``:
    https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/AuroraMySQL.Security.html#AuroraMySQL.Security.SSL),
    so the server refuses any connection without TLS (MySQL error 3159). Clients verify the server's
    certificate against AWS's RDS certificate bundle (:data:`RDS_CA_BUNDLE_URL`): the slurmdbd-user handler
    (below) and HyperPod's controller (``node_scripts/hyperpod/lib/accounting.sh``: slurmdbd.conf's
    ``StorageParameters=SSL_CA=<bundle>``, the bundle fetched over HTTPS and checked to be PEM certificates).
    ParallelCluster's head node encrypts without verifying: its cookbook writes slurmdbd's storage settings
    into ``slurm_parallelcluster_slurmdbd.conf`` with no ``StorageParameters``
    (aws/aws-parallelcluster-cookbook, ``cookbooks/aws-parallelcluster-slurm/files/default/head_node_slurm/
    slurm/templates/slurm_parallelcluster_slurmdbd.conf``, lines 5-17, commit f75d84c), so Slurm sets no
    TLS option (``_set_mysql_ssl_opts`` in Slurm's ``src/database/mysql_common.c`` returns at once without
    them) and the MySQL 8.0 client library the cookbook builds Slurm against (``mysql_client`` resource,
    ``partial/_common.rb`` lines 38 and 42: MySQL community client 8.0.36; on Ubuntu ``partial/_setup_ubuntu.rb`` line 16: ``libmysqlclient21``) uses
    TLS when the server offers it, which Aurora does, but checks no certificate
    (https://dev.mysql.com/doc/c-api/8.0/en/c-api-encrypted-connections.html). So the head node meets the
    requirement, and a spoofed server could still be accepted there.

    **slurmdbd's own database user.** slurmdbd needs ``ALL`` on its database only (Slurm's accounting guide,
    ``grant all on slurm_acct_db.*``); the master user holds every privilege RDS gives. At deploy time a
    custom resource (``training_clusters/node_scripts/handlers/slurmdbd_user``: a Lambda function in the database's
    subnets, PyMySQL over TLS verifying the server) reads the master secret and makes the user
    :data:`SLURMDBD_USERNAME` with ``ALL`` on each of ``databases`` (``REQUIRE SSL``), its password in a
    secret of its own (``slurmdbd_secret``). Clients are meant to read only slurmdbd's: ``slurmdbd_username``
    with ``slurmdbd_secret`` (HyperPod) or ``slurmdbd_password_secret`` (ParallelCluster), depending on
    ``ready``. (As of this version :class:`HyperPodCluster` and :class:`ParallelCluster` still hand their
    controller / head node the master user's ``username`` with ``secret`` / ``password_secret``; switching
    them is pending.) slurmdbd's job-completion
    plugin (``JobCompType=jobcomp/mysql``), if ever used, would be slurmctld's client (``JobCompUser``), not
    slurmdbd's, and need ``ALL`` on its own database (``JobCompLoc``): name it in ``databases``; neither
    HyperPod nor ParallelCluster configures it here.

    **Secrets; slurmdbd's rotated with alternating users.** ``secret`` is the master user's (JSON as RDS writes
    it), ``slurmdbd_secret`` slurmdbd's (JSON ``username``, ``password``, ``host``, ``port``, ``engine``, ...: what
    SageMaker HyperPod's controller reads), ``password_secret`` / ``slurmdbd_password_secret`` the same passwords
    as plain text (what ParallelCluster's ``SlurmSettings.Database.PasswordSecretArn`` requires: its head node
    reads the string verbatim), each made only when first read, so a HyperPod template has neither.

    **Rotation** (``slurmdbd_rotation_days``). slurmdbd reads its password only when it starts. Secrets
    Manager's single-user strategy changes the password slurmdbd is using, so every connection slurmdbd opens
    afterwards (each client command such as ``sacct`` gets one) fails until slurmdbd restarts with the new one;
    the alternating-users strategy (https://docs.aws.amazon.com/secretsmanager/latest/userguide/
    rotation-strategy.html) changes the password of the *other* user (``slurmdbd`` / ``slurmdbd_clone``) and
    then makes it the secret's current one, so slurmdbd keeps working on its old login for a whole rotation
    period. That is the strategy here: a function of this construct (the slurmdbd-user asset's
    ``on_rotation``, in the database's subnets, group ``RotationSecurityGroup``: MySQL to the database, HTTPS
    out) makes the other user with ``ALL`` on ``databases`` only, ``REQUIRE SSL``, a 32-character password of
    letters and digits, and verifies the server against the RDS bundle. It is ours rather than AWS's hosted
    ``SecretsManagerRDSMySQLRotationMultiUser`` because that one verifies the server against the Lambda
    runtime's ``/etc/pki/tls/cert.pem`` and, without an ``ssl`` key in the secret, falls back to an unencrypted
    connection (aws-samples/aws-secrets-manager-rotation-lambdas, ``lambda_function.py``, commit b4b8eca,
    ``get_connection``/``connect_and_authenticate``). It also refuses to change the password of a user that
    still has a session open (slurmdbd not moved over yet): the rotation fails and is tried again, and
    slurmdbd is never cut off. HyperPod's controller follows the secret with an hourly timer
    (``node_scripts/hyperpod/node/training-clusters-slurmdbd-password.sh``: rewrites StorageUser/StoragePass,
    restarts slurmdbd only on a change). ParallelCluster cannot follow it: its head node runs
    ``update_slurm_database_password.sh`` (which rewrites ``StoragePass`` only, never the user) when it
    configures slurmdbd and on ``pcluster update-cluster``, nothing in between (aws/aws-parallelcluster-cookbook
    at f75d84c: ``cookbooks/aws-parallelcluster-slurm/recipes/config/config_slurm_accounting.rb`` lines 50-67,
    ``recipes/update/update_head_node.rb`` line 241, ``templates/default/slurm/head_node/
    update_slurm_database_password.sh.erb``), and ``Database.UserName`` is fixed in the cluster's
    configuration: alternating users cannot be followed, and a single-user rotation would fail slurmdbd's new
    connections until someone ran the script. So ParallelCluster's environments do not rotate, and
    ``slurmdbd_password_secret`` is refused with a rotation. Upgrading a deployed HyperPod environment: the
    first rotation (when the schedule is created) clones slurmdbd's user and makes the clone current; a
    controller provisioned before has no refresh timer and stays on the original login, so every later
    rotation is refused (that login still has sessions) until the controller is re-provisioned (replaced, or
    its lifecycle run again), which installs the timer. The rotation function needs the same network path as
    the slurmdbd-user handler: Secrets Manager and AWS's certificate truststore
    (``truststore.pki.rds.amazonaws.com``) over HTTPS, through NAT. The master user's secret is not rotated (only the
    handler and the rotation function log in with it).

    **Logs.** The exported database logs go to log groups of this stack, ``/aws/rds/cluster/<id>/<type>``
    (Aurora writes into an existing group of that name:
    https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/AuroraMySQL.Integrating.CloudWatch.html),
    kept a year (as the handler's own log), encrypted with ``kms_key``, retained like the database. The group
    names hold the DB cluster's identifier, which CloudFormation generates, so they are created right after the
    DB cluster and before its writer instance, the first thing that writes logs. A database deployed before
    these groups existed in the stack has groups of those names already (RDS made them): deploying this
    version then fails with "already exists" until they are imported (``cdk import``) or deleted.

    Attributes: ``cluster`` (the ``rds.DatabaseCluster``), ``writer`` (its writer instance, which CloudFormation
    creates minutes after the DB cluster), ``ready`` (the writer and slurmdbd's user: a client that connects
    as it starts depends on it), ``endpoint`` (writer host name), ``port``, ``uri`` (``host:port``,
    ParallelCluster's ``Database.Uri``), ``username`` (the master user), ``secret``, ``password_secret``,
    ``slurmdbd_username``, ``slurmdbd_secret``, ``slurmdbd_password_secret``, ``databases``,
    ``security_group``, ``connections`` (default port: the database port), ``kms_key``, ``parameter_group``,
    ``log_groups``, ``user_handler``, ``subnets`` (where it lives: keep them when the database is retained,
    see ``TrainingNetwork.retain``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        vpc_subnets: ec2.SubnetSelection | None = None,
        username: str = "slurm",
        databases: Sequence[str] = DEFAULT_DATABASES,
        min_capacity_acu: float = 0.5,
        max_capacity_acu: float = 2.0,
        backup_retention_days: int = 7,
        kms_key: kms.IKey | None = None,
        removal_policy: cdk.RemovalPolicy | RemovalPolicy | str = cdk.RemovalPolicy.RETAIN,
        deletion_protection: bool | None = None,
        slurmdbd_rotation_days: int | None = None,
    ) -> None:
        """Create the database cluster, its security group, key, secrets, log groups and slurmdbd's user.

        :param vpc: The VPC of the database and its clients.
        :param vpc_subnets: Where the database (and the slurmdbd-user handler) lives; Aurora wants subnets in
            at least two AZs, and the handler reaches Secrets Manager and AWS's certificate truststore from
            them (NAT, or endpoints). Default: the VPC's private subnets (isolated ones when it has no others).
        :param username: The master user (1 to 16 letters, digits and ``_``, starting with a letter; not
            ``slurmdbd``, slurmdbd's own). Only the slurmdbd-user handler connects as it. Default: ``slurm``.
        :param databases: The databases slurmdbd's user gets ``ALL`` on: its ``StorageLoc``. HyperPod's
            lifecycle scripts use ``slurm_acct_db``; ParallelCluster's cookbook uses ``Database.DatabaseName``,
            else the cluster's name with ``-`` as ``_``. Default: ``("slurm_acct_db",)``.
        :param min_capacity_acu: Least Serverless v2 capacity, in ACU (0.5 to 256, steps of 0.5). slurmdbd
            keeps a connection open, so the database never pauses and bills at least this much every hour.
            Default: 0.5 (about 1 GiB of memory), plenty for a team's job records.
        :param max_capacity_acu: Most capacity Aurora scales up to, in ACU. Default: 2.
        :param backup_retention_days: Days RDS keeps automated backups (1 to 35); point-in-time restore covers
            the same days. Backups run 05:00-06:00 UTC, maintenance Sunday 02:00-03:00 UTC. Default: 7.
        :param kms_key: Customer key encrypting the storage, its backups, the exported logs' snapshots and the
            log groups (a key you pass must let ``logs.<region>.amazonaws.com`` use it for log groups
            ``/aws/rds/cluster/*``, as the key made here does). Default: a new key with yearly rotation
            (about 1 USD a month).
        :param removal_policy: What happens to the database (with its key, secrets, log groups and security
            group) when it leaves the stack: a ``cdk.RemovalPolicy``, or ``RemovalPolicy`` / ``"retain"`` /
            ``"destroy"``. Default: RETAIN, the job history outlives the cluster.
        :param deletion_protection: Refuse to delete the database (also through the console or API) until
            turned off. Default: on, unless ``removal_policy`` is DESTROY (which asks for the deletion).
        :param slurmdbd_rotation_days: Rotate slurmdbd's password every this many days (1 to 1000), with
            alternating users (see "Rotation" above). Only for a client that follows the secret, as
            :class:`HyperPodCluster`'s controller does; ParallelCluster's head node cannot, and
            ``slurmdbd_password_secret`` is refused with it. Default: no rotation.

        Replacement: ``vpc``, ``vpc_subnets`` (the subnet group), ``username``, ``kms_key`` and the security
        group's description are create-only: changing one replaces the database with a new, empty one.
        ``databases`` is not: a change grants the new names and revokes the dropped ones.
        """
        super().__init__(scope, id)
        removal = to_removal_policy(self, "removal_policy", removal_policy)
        self._check_username(username)
        self._check_databases(databases)
        self._check_capacity(min_capacity_acu, max_capacity_acu)
        self._check_backup_retention(backup_retention_days)
        self._check_rotation_days(slurmdbd_rotation_days)
        #: Days between rotations of slurmdbd's password, or None (not rotated).
        self.slurmdbd_rotation_days = slurmdbd_rotation_days
        protect = removal != cdk.RemovalPolicy.DESTROY if deletion_protection is None else deletion_protection
        self._removal = removal

        self.username = username
        self.databases: tuple[str, ...] = tuple(dict.fromkeys(databases))
        self.slurmdbd_username = SLURMDBD_USERNAME
        self._selection = vpc_subnets or ec2.SubnetSelection(subnet_type=_private_subnet_type(vpc))
        selection = self._selection
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
        if removal == cdk.RemovalPolicy.RETAIN:
            # A retained database keeps using its security group, parameter group and master user's secret.
            self.security_group.apply_removal_policy(removal)
            self.secret.apply_removal_policy(removal)
            self.parameter_group.apply_removal_policy(removal)
        #: The writer instance: CloudFormation creates it minutes after the DB cluster, and the database
        #: accepts no connection before it exists.
        self.writer: IConstruct = self.cluster.node.find_child("Writer")
        self.log_groups = self._log_groups()
        writer = self.writer.node.default_child
        assert isinstance(writer, rds.CfnDBInstance)
        # CDK makes the instance wait for the subnets' internet routes; a database in private subnets needs no
        # internet, and the wait would tie a retained instance to routes `cdk destroy` deletes. It waits for
        # the log groups instead: it is the first thing that writes to them.
        stack = cdk.Stack.of(self)
        writer.add_override(
            "DependsOn", [stack.get_logical_id(group.node.default_child) for group in self.log_groups]
        )

        self.endpoint: str = self.cluster.cluster_endpoint.hostname
        self.port: int = 3306
        self.uri: str = f"{self.endpoint}:{self.port}"
        self._connections = ClientSideConnections(
            self.security_group, ec2.Port.tcp(self.port), home=vpc, owner=self
        )
        self._password_secret: secretsmanager.Secret | None = None
        self._slurmdbd_password_secret: secretsmanager.Secret | None = None
        self.slurmdbd_secret: secretsmanager.ISecret = self._slurmdbd_user(vpc)
        self._explain_findings(protect)

    @property
    def connections(self) -> ec2.Connections:
        """The database's security group; the default port is MySQL's 3306.

        ``db.connections.allow_default_port_from(clients)`` opens 3306 from the clients' group; when the
        clients live in another stack, CDK puts the ingress rule in that stack (and the clients' egress rule
        beside it), so the database may sit in a shared stack with no dependency cycle.
        """
        return self._connections

    @property
    def password_secret(self) -> secretsmanager.ISecret:
        """The master user's password as plain text (construct id ``PasswordSecret``), made when first read.

        ParallelCluster's ``SlurmSettings.Database.PasswordSecretArn`` takes a secret whose string is the
        password itself. Prefer ``slurmdbd_password_secret`` with ``slurmdbd_username``: a head node given
        this one runs slurmdbd as the master user.
        """
        if self._password_secret is None:
            self._password_secret = self._plain_text_copy(
                "PasswordSecret",
                self.secret,
                "Slurm accounting database password, plain text (ParallelCluster PasswordSecretArn)",
                who="the master user's",
            )
        return self._password_secret

    @property
    def slurmdbd_password_secret(self) -> secretsmanager.ISecret:
        """slurmdbd's password as plain text (construct id ``SlurmdbdPasswordSecret``), made when first read:
        ParallelCluster's ``PasswordSecretArn`` for ``UserName`` ``slurmdbd_username``."""
        if self.slurmdbd_rotation_days is not None:
            raise prop_error(
                self.node.path,
                "slurmdbd_password_secret",
                "is a plain-text copy made at deploy time, which cannot follow slurmdbd's rotating secret "
                f"(slurmdbd_rotation_days={self.slurmdbd_rotation_days}): leave slurmdbd_rotation_days unset for "
                "ParallelCluster, whose head node reads the password only when it configures slurmdbd",
            )
        if self._slurmdbd_password_secret is None:
            # from the secret itself, not its attachment (deleted with the stack while the copy is kept);
            # ParallelCluster waits for the user anyway (``ready``)
            self._slurmdbd_password_secret = self._plain_text_copy(
                "SlurmdbdPasswordSecret",
                self._slurmdbd_own_secret,
                "slurmdbd's database password, plain text (ParallelCluster PasswordSecretArn)",
                who="slurmdbd's",
            )
        return self._slurmdbd_password_secret

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _check_username(self, username: str) -> None:
        if not is_unresolved(username):
            raise_if_problem(self, "username", master_username_problem(username))

    def _check_databases(self, databases: Sequence[str]) -> None:
        if not isinstance(databases, str) and any(is_unresolved(name) for name in databases):
            raise prop_error(self.node.path, "databases", "must be names known at synth time, got a token")
        raise_if_problem(self, "databases", databases_problem(databases))

    def _check_capacity(self, low: float, high: float) -> None:
        for field, value in (("min_capacity_acu", low), ("max_capacity_acu", high)):
            if not is_unresolved(value):
                raise_if_problem(self, field, capacity_acu_problem(value))
        if not is_unresolved(low) and not is_unresolved(high):
            raise_if_problem(self, "min_capacity_acu", capacity_range_problem(low, high))

    def _check_backup_retention(self, days: int) -> None:
        if not is_unresolved(days):
            raise_if_problem(self, "backup_retention_days", backup_retention_problem(days))

    def _check_rotation_days(self, days: int | None) -> None:
        if days is not None and not is_unresolved(days):
            raise_if_problem(self, "slurmdbd_rotation_days", rotation_days_problem(days))

    # ----------------------------------------------------------------------------------------------
    # building

    def _parameter_group(self) -> rds.ParameterGroup:
        # The audit log records every connection and every DDL/DCL statement (grants, schema changes), so the
        # exported "audit" log group has content; long queries go to the slow query log. Bound to the DB
        # cluster it becomes an AWS::RDS::DBClusterParameterGroup, where Aurora MySQL keeps
        # require_secure_transport (a cluster-level parameter). The description stays as it was: it is
        # create-only, and a new one would replace the parameter group.
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
                "require_secure_transport": "ON",
            },
        )

    def _log_groups(self) -> list[logs.LogGroup]:
        """One log group per exported log, named as Aurora names them, encrypted with the database's key."""
        stack = cdk.Stack.of(self)
        if isinstance(self.kms_key, kms.Key):
            self.kms_key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="CloudWatchLogsForTheDatabaseLogs",
                    principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
                    actions=[
                        "kms:Encrypt*",
                        "kms:Decrypt*",
                        "kms:ReEncrypt*",
                        "kms:GenerateDataKey*",
                        "kms:Describe*",
                    ],
                    resources=["*"],
                    conditions={
                        "ArnLike": {
                            "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                                service="logs",
                                resource="log-group",
                                resource_name="/aws/rds/cluster/*",
                                arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                            )
                        }
                    },
                )
            )
        groups = []
        for kind in LOG_EXPORTS:
            group = logs.LogGroup(
                self,
                f"{kind.capitalize()}Log",
                log_group_name=f"/aws/rds/cluster/{self.cluster.cluster_identifier}/{kind}",
                retention=logs.RetentionDays.ONE_YEAR,
                encryption_key=self.kms_key,
                removal_policy=self._removal,
            )
            if isinstance(self.kms_key, kms.Key):
                # CloudWatch Logs checks it may use the key when the group is created.
                group.node.add_dependency(self.kms_key)
            groups.append(group)
        return groups

    def _slurmdbd_user(self, vpc: ec2.IVpc) -> secretsmanager.ISecret:
        """slurmdbd's secret and the custom resource that makes its database user; returns the secret as
        clients should read it (attached to the database, after the user exists)."""
        secret = rds.DatabaseSecret(self, "SlurmdbdSecret", username=SLURMDBD_USERNAME)
        secret.apply_removal_policy(self._removal)
        handler_group = ec2.SecurityGroup(
            self,
            "UserHandlerSecurityGroup",
            vpc=vpc,
            description="Slurm accounting database: the slurmdbd-user handler (MySQL, HTTPS out)",
            allow_all_outbound=False,
        )
        handler_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "Secrets Manager and the RDS certificate truststore"
        )
        self.connections.allow_default_port_from(handler_group, "the slurmdbd-user handler")
        log_group = logs.LogGroup(
            self,
            "UserHandlerLogs",
            retention=logs.RetentionDays.ONE_YEAR,
            removal_policy=self._removal,
        )
        role = iam.Role(
            self,
            "UserHandlerRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Makes slurmdbd's database user with the master user, once per deployment",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue"],
                resources=[self.secret.secret_arn, secret.secret_arn],
            )
        )
        role.add_to_policy(vpc_interface_statement())
        self.user_handler = lambda_.Function(
            self,
            "UserHandler",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.on_event",
            code=lambda_.Code.from_asset(str(staged_asset())),
            role=role,
            log_group=log_group,
            timeout=cdk.Duration.minutes(5),
            memory_size=256,
            vpc=vpc,
            vpc_subnets=self._selection,
            security_groups=[handler_group],
            description="Makes slurmdbd's database user (Slurm accounting), TLS verified with the RDS CAs",
        )
        provider = cr.Provider(self, "UserProvider", on_event_handler=self.user_handler)
        self.user = cdk.CustomResource(
            self,
            "SlurmdbdUser",
            service_token=provider.service_token,
            resource_type="Custom::SlurmdbdUser",
            properties={
                "Host": self.endpoint,
                "Port": str(3306),
                "MasterSecretArn": self.secret.secret_arn,
                "UserSecretArn": secret.secret_arn,
                "Databases": list(self.databases),
                "CaBundleUrl": RDS_CA_BUNDLE_URL,
            },
        )
        # The database answers once its writer exists; the secrets' versions exist before.
        self.user.node.add_dependency(self.writer)
        self.user.node.add_dependency(role)
        attached = secret.attach(self.cluster)
        # Clients reading the attached secret's ARN (a reference to the attachment) wait for the user.
        attached.node.add_dependency(self.user)
        self._slurmdbd_own_secret = secret
        self.ready = DependencyGroup(self.writer, self.user)
        self._explain_user_handler(role, provider, log_group)
        #: The function rotating slurmdbd's secret, or None.
        self.rotation_function: lambda_.Function | None = None
        if self.slurmdbd_rotation_days is not None:
            self.rotation_function = self._rotation(vpc, secret, self.slurmdbd_rotation_days)
        return attached

    def _rotation(self, vpc: ec2.IVpc, secret: rds.DatabaseSecret, days: int) -> lambda_.Function:
        """slurmdbd's secret rotated every DAYS days by the asset's ``on_rotation`` (alternating users), in the
        database's subnets with a security group of its own (MySQL to the database, HTTPS out)."""
        group = ec2.SecurityGroup(
            self,
            "RotationSecurityGroup",
            vpc=vpc,
            description="Slurm accounting database: rotation of the slurmdbd secret (MySQL, HTTPS out)",
            allow_all_outbound=False,
        )
        group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "Secrets Manager and the RDS certificate truststore"
        )
        self.connections.allow_default_port_from(group, "the rotation of slurmdbd's secret")
        log_group = logs.LogGroup(
            self, "RotationLogs", retention=logs.RetentionDays.ONE_YEAR, removal_policy=self._removal
        )
        role = iam.Role(
            self,
            "RotationRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Rotates slurmdbd's database password (alternating users) with the master user",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[self.secret.secret_arn])
        )
        role.add_to_policy(vpc_interface_statement())
        function = lambda_.Function(
            self,
            "RotationFunction",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.on_rotation",
            code=lambda_.Code.from_asset(str(staged_asset())),
            role=role,
            log_group=log_group,
            timeout=cdk.Duration.minutes(2),
            memory_size=256,
            vpc=vpc,
            vpc_subnets=self._selection,
            security_groups=[group],
            environment={
                "DATABASE_HOST": self.endpoint,
                "DATABASE_PORT": str(self.port),
                "MASTER_SECRET_ARN": self.secret.secret_arn,
                "DATABASES": json.dumps(list(self.databases)),
                "CA_BUNDLE_URL": RDS_CA_BUNDLE_URL,
            },
            description="Rotates slurmdbd's database password (alternating users), TLS verified with the RDS CAs",
        )
        schedule = secret.add_rotation_schedule(
            "Rotation", rotation_lambda=function, automatically_after=cdk.Duration.days(days)
        )
        # The first rotation runs when the schedule is made and clones slurmdbd's user: it must exist by then.
        schedule.node.add_dependency(self.user)
        # Secrets Manager may invoke it for this account's secrets only: the condition AWS recommends for a
        # rotation function's resource policy (https://docs.aws.amazon.com/secretsmanager/latest/userguide/
        # rotating-secrets-required-permissions-function.html), on the permission CDK's schedule adds.
        for child in function.node.children:
            resource = child.node.default_child if not isinstance(child, lambda_.CfnPermission) else child
            if (
                isinstance(resource, lambda_.CfnPermission)
                and resource.principal == "secretsmanager.amazonaws.com"
            ):
                resource.source_account = cdk.Stack.of(self).account
        self._explain_rotation(role, function, log_group)
        return function

    def _plain_text_copy(
        self, id_: str, source: secretsmanager.ISecret, description: str, *, who: str
    ) -> secretsmanager.Secret:
        plain = secretsmanager.Secret(
            self,
            id_,
            description=description,
            secret_string_value=cdk.SecretValue.secrets_manager(source.secret_arn, json_field="password"),
            removal_policy=self._removal,
        )
        why = (
            f"{who} password as ParallelCluster's PasswordSecretArn needs it; the head node reads it once, when "
            "it configures slurmdbd, and ParallelCluster documents re-running update_slurm_database_password.sh "
            "with the compute fleet stopped after a change, so a rotation would stop accounting until someone does"
        )
        acknowledge(plain, "AwsSolutions-SMG4", why)
        acknowledge_nist(plain, "NIST.800.53.R5-SecretsManagerRotationEnabled", why)
        why_key = (
            "encrypted with the account's AWS-managed Secrets Manager key, which ParallelCluster's head node role "
            "(granted GetSecretValue on PasswordSecretArn by ParallelCluster itself) can use; a customer key "
            "would need a kms:Decrypt grant outside ParallelCluster's own policy"
        )
        skip_checkov(plain, "CKV_AWS_149", why_key)
        acknowledge_nist(plain, "NIST.800.53.R5-SecretsManagerUsingKMSKey", why_key)
        return plain

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
            acknowledge_nist(cluster, "NIST.800.53.R5-RDSInstanceDeletionProtectionEnabled", why)
        no_enhanced_monitoring = (
            "Aurora publishes the instance's CloudWatch metrics (ACU, connections, CPU); enhanced OS monitoring "
            "needs a monitoring role and per-second billing a team's accounting database does not warrant"
        )
        acknowledge_nist(writer, "NIST.800.53.R5-RDSEnhancedMonitoringEnabled", no_enhanced_monitoring)
        skip_checkov(writer, "CKV_AWS_118", no_enhanced_monitoring)
        self._explain_secrets()

    def _explain_secrets(self) -> None:
        """Why the master and slurmdbd secrets are not rotated and use the AWS-managed key, in words true of
        this template (whether a plain-text copy of the master password was made is known at synth)."""

        def master(copied: str, alone: str) -> str:
            reason: str = cdk.Lazy.string(
                _Produced(lambda: copied if self._password_secret is not None else alone)
            )
            return reason

        rotated = self.slurmdbd_rotation_days is not None
        # Who logs in as the master user: the deploy-time handler, and the rotation of slurmdbd's secret if any.
        readers = (
            "the slurmdbd-user handler (when the stack deploys) and the rotation of slurmdbd's secret (when it "
            "runs, in the VPC) log in"
            if rotated
            else "the slurmdbd-user handler logs in (when the stack deploys)"
        )
        reader_roles = (
            "the roles of the slurmdbd-user handler and of the rotation of slurmdbd's secret read"
            if rotated
            else "the slurmdbd-user handler's role reads"
        )
        no_rotation = master(
            f"the master user's password: CloudFormation sets it on the database, {readers} with it, and "
            "PasswordSecret copies it for ParallelCluster's head node, which reads the copy once when it "
            "configures slurmdbd; a rotation would leave that copy behind (and ParallelCluster documents "
            "re-running update_slurm_database_password.sh with the fleet stopped)",
            f"the master user's password: CloudFormation sets it on the database and only {readers} with it; "
            "no node or person reads it (slurmdbd has its own user), so nothing on the cluster would follow "
            "a rotation, and rotating it is not built",
        )
        why_key = master(
            f"encrypted with the account's AWS-managed Secrets Manager key: {reader_roles} it with GetSecretValue "
            "alone, and CloudFormation resolves PasswordSecret's reference to it",
            f"encrypted with the account's AWS-managed Secrets Manager key: only {reader_roles} it (GetSecretValue "
            "on this secret), which needs no key grant",
        )
        slurmdbd_rotation: str = cdk.Lazy.string(
            _Produced(
                lambda: (
                    "slurmdbd's password, not rotated: ParallelCluster's head node reads its plain-text copy "
                    "(SlurmdbdPasswordSecret) when it configures slurmdbd and again only on a cluster update (its "
                    "cookbook's update_slurm_database_password.sh, which never changes the user), so a rotation "
                    "would leave slurmdbd with a password the database no longer accepts"
                    if self._slurmdbd_password_secret is not None
                    else "slurmdbd's password, not rotated (slurmdbd_rotation_days unset): slurmdbd reads it only "
                    "when it starts, so only a cluster whose nodes follow the secret may rotate it (HyperPodCluster's "
                    "controller does, with slurmdbd_rotation_days)"
                )
            )
        )
        slurmdbd_key = (
            "encrypted with the account's AWS-managed Secrets Manager key: the cluster using it grants its "
            "node role GetSecretValue on this one secret and no kms:Decrypt, which a customer key would need"
        )
        for secret, rotation, key in (
            (self.secret, no_rotation, why_key),
            (self.node.find_child("SlurmdbdSecret"), None if rotated else slurmdbd_rotation, slurmdbd_key),
        ):
            if rotation is not None:
                acknowledge(secret, "AwsSolutions-SMG4", rotation)
                acknowledge_nist(secret, "NIST.800.53.R5-SecretsManagerRotationEnabled", rotation)
            skip_checkov(secret, "CKV_AWS_149", key)
            acknowledge_nist(secret, "NIST.800.53.R5-SecretsManagerUsingKMSKey", key)

    def _explain_rotation(self, role: iam.Role, function: lambda_.Function, log_group: logs.LogGroup) -> None:
        """cdk-nag, checkov and NIST findings of the rotation function and its role."""
        policy = role.node.find_child("DefaultPolicy").node.default_child
        assert isinstance(policy, iam.CfnPolicy)
        why_star = (
            "the rotation function runs in the database's private subnets (Lambda's network-interface actions "
            "support no resource) and Secrets Manager's GetRandomPassword, which makes the new password, "
            "takes no resource"
        )
        acknowledge_wildcards(policy, {"AwsSolutions-IAM5[Resource::*]": why_star})
        skip_checkov(policy, "CKV_AWS_111", why_star)
        accept_inline_policy(policy, "the rotation of slurmdbd's secret")
        resource = function.node.default_child
        why_concurrency = (
            "Secrets Manager invokes it four times per rotation of one secret, one rotation at a time; reserving "
            "concurrency would take it from the account's unreserved pool"
        )
        why_dlq = (
            "Secrets Manager invokes it synchronously and records a failed step in the secret's rotation status "
            "(and retries); a dead-letter queue only receives failed asynchronous invocations"
        )
        why_environment = (
            "its environment holds the database's host name, port, database names and the master secret's ARN, "
            "no secret value; Lambda encrypts it at rest with an AWS-managed key"
        )
        for check, nist, why in (
            ("CKV_AWS_115", "NIST.800.53.R5-LambdaConcurrency", why_concurrency),
            ("CKV_AWS_116", "NIST.800.53.R5-LambdaDLQ", why_dlq),
            ("CKV_AWS_173", "", why_environment),
        ):
            skip_checkov(resource, check, why)
            if nist:
                acknowledge_nist(resource, nist, why)
        accept_log_group_without_key(log_group, "the rotation function's own log (user names, no password)")

    def _explain_user_handler(self, role: iam.Role, provider: cr.Provider, log_group: logs.LogGroup) -> None:
        """cdk-nag, checkov and NIST findings of the slurmdbd-user handler, its role and its provider."""
        policy = role.node.find_child("DefaultPolicy").node.default_child
        assert isinstance(policy, iam.CfnPolicy)
        acknowledge_wildcards(policy, {"AwsSolutions-IAM5[Resource::*]": _HANDLER_ENI_REASON})
        skip_checkov(policy, "CKV_AWS_111", _HANDLER_ENI_REASON)
        reason = "the slurmdbd-user handler makes slurmdbd's database user when the stack deploys"
        accept_inline_policy(policy, reason)
        accept_handler_findings(
            self.user_handler.node.default_child, reason, in_vpc=True, has_environment=False
        )
        accept_log_group_without_key(
            log_group, "the slurmdbd-user handler's own log (user name and grants, no secret)"
        )
        acknowledge_cdk_made(
            provider,
            _PROVIDER_REASON,
            managed_policy_reasons={
                "AWSLambdaBasicExecutionRole": "the framework Lambda writes its own logs"
            },
        )


#: Master user names RDS keeps for itself.


@jsii.implements(cdk.IStableStringProducer)
class _Produced:
    """A string worked out at synth time (an acknowledgement's reason that depends on what was read)."""

    def __init__(self, produce: object) -> None:
        self._produce = produce

    def produce(self) -> str:
        return str(self._produce())  # type: ignore[operator]


def _private_subnet_type(vpc: ec2.IVpc) -> ec2.SubnetType:
    if vpc.isolated_subnets and not vpc.private_subnets:
        return ec2.SubnetType.PRIVATE_ISOLATED
    return ec2.SubnetType.PRIVATE_WITH_EGRESS


def _engine() -> rds.IClusterEngine:
    """The Aurora MySQL engine of :data:`ENGINE_VERSION`."""
    version = getattr(rds.AuroraMysqlEngineVersion, ENGINE_VERSION)
    return rds.DatabaseClusterEngine.aurora_mysql(version=version)
