"""ParallelClusterEnvironment: network + FSx + an AWS ParallelCluster Slurm cluster that mounts it."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from training_clusters.catalog import CATALOG
from training_clusters.config import (
    EnvironmentConfig,
    ParallelClusterConfig,
    PclusterComputeResourceConfig,
    PclusterCustomActionConfig,
    PclusterDirectoryServiceConfig,
    PclusterLoginPoolConfig,
    PclusterQueueConfig,
    UserConfig,
    stated_capacity,
)
from training_clusters.constructs.common.bucket import SecureBucket
from training_clusters.constructs.parallelcluster.cluster import (
    ComputeResource,
    CustomActionScript,
    DirectoryService,
    HeadNode,
    LoginNodePool,
    ParallelCluster,
    SlurmQueue,
    SlurmSettings,
    TopologyStep,
)
from training_clusters.constructs.slurm.accounting import SlurmAccountingDatabase
from training_clusters.gates.compliance import acknowledge_cdk_made
from training_clusters.model.options import OperatingSystem, RemovalPolicy, SlurmTopology
from training_clusters.node_scripts import SHARED_DIR
from training_clusters.node_scripts.parallelcluster import (
    ACTIONS_DIR,
    ENROOT_SCRIPT,
    IMDS_SCRIPT,
    PYXIS_SCRIPT,
    SHARED_SCRIPTS,
    TOPOLOGY_MODULE,
    TOPOLOGY_SCRIPT,
    USERS_SCRIPT,
)
from training_clusters.rules.parallelcluster import accounting_database_name, placed_by_topology
from training_clusters.stacks.base import (
    DESTROY_STEP,
    SLURM_ACCEPTANCE_STEP,
    SLURM_RUN_STEP,
    TrainingEnvironmentStack,
)

#: Where the shipped custom actions land in the scripts bucket.
ACTIONS_PREFIX = "parallelcluster-actions"
#: The user ParallelCluster's daemons on compute nodes run as (computemgtd): the cookbook's cluster_admin_user
#: (github.com/aws/aws-parallelcluster-cookbook, cookbooks/aws-parallelcluster-shared/attributes/users.rb;
#: cookbooks/aws-parallelcluster-platform/templates/supervisord/parallelcluster_supervisord.conf.erb).
PCLUSTER_ADMIN_USER = "pcluster-admin"
#: The compute nodes' metadata guard (the first OnNodeStart action of every queue, with users): root and
#: ParallelCluster's admin user reach IMDS, as the cookbook's own lockdown of head and login nodes allows
#: (head_node_imds_allowed_users, cookbooks/aws-parallelcluster-environment/attributes/environment.rb).
#:
#: Why OnNodeStart: a node boots init, ``fetch_and_run -preinstall`` (OnNodeStart), config (which mounts FSx),
#: ``-postinstall`` (OnNodeConfigured), finalize (github.com/aws/aws-parallelcluster,
#: cli/src/pcluster/resources/compute_node/user_data.sh; the head node's configSets in
#: cli/src/pcluster/templates/cluster_stack.py), and the executor runs a ``Sequence`` one script at a time in
#: its order, stopping at the first that fails (github.com/aws/aws-parallelcluster-cookbook,
#: cookbooks/aws-parallelcluster-environment/files/custom_action_executor/custom_action_executor.py,
#: ``download_and_execute_scripts``). users.sh, which makes the team's accounts, is an OnNodeConfigured action
#: (the head node needs FSx mounted to write the homes), so the guard is in force before any team account
#: exists. At OnNodeStart the node has only the AMI's users (root, the OS's default user, ``pcluster-admin``
#: and the services') and the init recipe's iptables rules. Head and login nodes are locked down by
#: ParallelCluster itself earlier still, in init (cookbooks/aws-parallelcluster-environment/recipes/init.rb
#: includes ``imds``, recipes/config/imds.rb: HeadNode and LoginNode, ``head_node_imds_secured`` 'true' by
#: default and ``HeadNode.Imds.Secured: true`` here).
IMDS_GUARD_ARGS = ("--install", "--allow", PCLUSTER_ADMIN_USER)
#: The default user of each operating system ParallelCluster supports (its ``cfn_cluster_user``: the cookbook's
#: ``default['cluster']['cluster_user']`` per platform, github.com/aws/aws-parallelcluster-cookbook).
DEFAULT_USERS = {
    OperatingSystem.ALINUX2023: "ec2-user",
    OperatingSystem.UBUNTU2204: "ubuntu",
    OperatingSystem.UBUNTU2404: "ubuntu",
    OperatingSystem.RHEL8: "ec2-user",
    OperatingSystem.RHEL9: "ec2-user",
    OperatingSystem.ROCKY8: "rocky",
    OperatingSystem.ROCKY9: "rocky",
}


class ParallelClusterEnvironment(TrainingEnvironmentStack):
    """A ParallelCluster cluster in the placement subnet and group, in the EFA group, mounting the shared FSx.

    Outputs (besides the base stack's): ``ClusterName``, ``HeadNodeInstanceId``, ``HeadNodeSsmCommand`` and
    ``ValidationMessages`` (ParallelCluster's warnings about the configuration); with ``accounting``,
    ``AccountingDatabaseEndpoint`` and ``AccountingDatabaseSecretArn``.

    A team's cluster: compute nodes first install the instance metadata guard (OnNodeStart, before any team
    account exists; head and login nodes have ParallelCluster's own lockdown from init), then ``users``
    (the file's top-level list) become the first OnNodeConfigured action of every node (``users.sh``: the same ids everywhere, homes under ``<mount_dir>/home``), then ``pyxis.sh`` and
    ``training-clusters-enroot.sh`` (one folder per user for enroot and Pyxis) when ``pyxis`` is on; all are
    uploaded with the stack to a :class:`SecureBucket`. ``accounting`` makes a
    :class:`SlurmAccountingDatabase` that only the head node may reach.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: EnvironmentConfig,
        environment_name: str,
        environment_file: str | None = None,
    ) -> None:
        super().__init__(
            scope, id, config=config, environment_name=environment_name, environment_file=environment_file
        )
        assert config.parallelcluster is not None
        spec = config.parallelcluster
        self._adopted_buckets: dict[str, s3.IBucket] = {}
        mount_dir = self.mount_dir or "/shared"
        self.accounting_database = self._accounting_database(spec, spec.cluster_name or environment_name)
        # homes on the shared file system; without one, on /home, which ParallelCluster shares from the head node
        home_root = f"{mount_dir}/home" if self.shared_storage is not None else "/home"
        self._actions: tuple[s3.IBucket, s3deploy.BucketDeployment] | None = None
        self._ships_topology = _topology_wanted(spec)
        team_actions = self._team_actions(spec, config.users, home_root)
        #: The compute nodes' instance metadata guard (every queue's first OnNodeStart action), with users.
        self.imds_guard: CustomActionScript | None = (
            CustomActionScript(
                bucket=self.actions_bucket, key=f"{ACTIONS_PREFIX}/{IMDS_SCRIPT}", args=IMDS_GUARD_ARGS
            )
            if config.users
            else None
        )
        self.cluster = ParallelCluster(
            self,
            "ParallelCluster",
            cluster_name=spec.cluster_name or environment_name,
            vpc=self.network.vpc,
            subnet=self.network.placement_subnet(),
            queues=[self._queue(i, q) for i, q in enumerate(spec.queues)],
            head_node=HeadNode(
                instance_type=spec.head_node.instance_type,
                key_name=spec.head_node.key_name,
                ssh_allowed_ips=spec.head_node.ssh_allowed_ips,
                custom_ami=spec.head_node.custom_ami,
                on_node_start=self._scripts(spec.head_node.on_node_start),
                on_node_configured=self._scripts(spec.head_node.on_node_configured),
            ),
            os=spec.os,
            placement_group=self.placement_group,
            efa_security_group=self.network.efa_security_group,
            file_system=self.shared_storage,
            mount_dir=mount_dir,
            slurm_settings=SlurmSettings(
                queue_update_strategy=spec.slurm.queue_update_strategy,
                scaledown_idletime_minutes=spec.slurm.scaledown_idletime_minutes,
                database=self.accounting_database,
                custom_slurm_settings=spec.slurm.custom_settings,
            ),
            on_node_configured=[*team_actions, *self._scripts(_one(spec.on_node_configured))],
            custom_ami=spec.custom_ami,
            login_nodes=[self._login_pool(i, p) for i, p in enumerate(spec.login_nodes)],
            directory_service=self._directory_service(spec.directory_service),
            log_retention_days=spec.log_retention_days,
            tags=config.resource_tags(environment_name),
            deletion_policy=spec.deletion_policy,
            provider_lambda_role=(
                iam.Role.from_role_arn(
                    self, "ProviderLambdaRole", spec.provider_lambda_role_arn, mutable=False
                )
                if spec.provider_lambda_role_arn
                else None
            ),
            topology=self._topology_step(spec),
        )
        if self.shared_storage is not None:
            # both directions: ParallelCluster's create-time check wants outbound Lustre rules too
            self.shared_storage.allow_clients_from(self.cluster)
        if self.accounting_database is not None:
            self.accounting_database.connections.allow_default_port_from(self.cluster.head_node_connections)
        self._add_outputs(spec)

    def _scripts(self, actions: Sequence[PclusterCustomActionConfig]) -> list[CustomActionScript]:
        """Scripts of the file (``s3://bucket/key``); buckets are adopted once each, by name."""
        scripts = []
        for action in actions:
            bucket_name, key = action.script.removeprefix("s3://").split("/", 1)
            scripts.append(
                CustomActionScript(bucket=self._bucket(bucket_name), key=key, args=tuple(action.args))
            )
        return scripts

    def _bucket(self, name: str) -> s3.IBucket:
        # the first bucket keeps the id it always had (CustomActionBucket); others are numbered after it
        adopted = self._adopted_buckets
        if name not in adopted:
            id = "CustomActionBucket" if not adopted else f"CustomActionBucket{len(adopted)}"
            adopted[name] = s3.Bucket.from_bucket_name(self, id, name)
        return adopted[name]

    def _queue(self, index: int, spec: PclusterQueueConfig) -> SlurmQueue:
        return SlurmQueue(
            name=spec.name,
            compute_resources=[_compute_resource(r) for r in spec.compute_resources],
            capacity=stated_capacity(spec.capacity),
            placement=spec.placement,
            custom_ami=spec.custom_ami,
            job_exclusive_allocation=spec.job_exclusive_allocation,
            # the guard first, before the file's own OnNodeStart scripts and every OnNodeConfigured one
            on_node_start=[
                *([] if self.imds_guard is None else [self.imds_guard]),
                *self._scripts(spec.on_node_start),
            ],
            on_node_configured=self._scripts(spec.on_node_configured),
        )

    def _login_pool(self, index: int, spec: PclusterLoginPoolConfig) -> LoginNodePool:
        return LoginNodePool(
            name=spec.name,
            instance_type=spec.instance_type,
            count=spec.count,
            key_name=spec.key_name,
            ssh_allowed_ips=spec.ssh_allowed_ips,
            custom_ami=spec.custom_ami,
            gracetime_period_minutes=spec.gracetime_period_minutes,
            on_node_start=self._scripts(spec.on_node_start),
            on_node_configured=self._scripts(spec.on_node_configured),
        )

    def _directory_service(self, spec: PclusterDirectoryServiceConfig | None) -> DirectoryService | None:
        if spec is None:
            return None
        return DirectoryService(
            domain_name=spec.domain_name,
            domain_addr=spec.domain_addr,
            password_secret=secretsmanager.Secret.from_secret_complete_arn(
                self, "DirectoryPassword", spec.password_secret_arn
            ),
            domain_read_only_user=spec.domain_read_only_user,
            ldap_tls_ca_cert=spec.ldap_tls_ca_cert,
            ldap_tls_req_cert=spec.ldap_tls_req_cert,
            ldap_access_filter=spec.ldap_access_filter,
            generate_ssh_keys_for_users=spec.generate_ssh_keys_for_users,
            additional_sssd_configs=spec.additional_sssd_configs or None,
        )

    def _accounting_database(
        self, spec: ParallelClusterConfig, cluster_name: str
    ) -> SlurmAccountingDatabase | None:
        """Aurora for slurmdbd on the head node; slurmdbd's user gets ALL on the database ParallelCluster names."""
        if spec.accounting is None:
            return None
        database = SlurmAccountingDatabase(
            self,
            "AccountingDatabase",
            vpc=self.network.vpc,
            databases=[accounting_database_name(cluster_name)],
            min_capacity_acu=spec.accounting.min_capacity_acu,
            max_capacity_acu=spec.accounting.max_capacity_acu,
            backup_retention_days=spec.accounting.backup_retention_days,
            removal_policy=spec.accounting.removal_policy,
        )
        if spec.accounting.removal_policy is RemovalPolicy.RETAIN:
            self._retain_database_subnets(database)
        return database

    def _team_actions(
        self, spec: ParallelClusterConfig, users: Sequence[UserConfig], home_root: str
    ) -> list[CustomActionScript]:
        """users.sh (when the file has users) then pyxis.sh (when on), uploaded to a scripts bucket."""
        if not users and not spec.pyxis:
            return []
        bucket = self._actions_bucket()
        actions = []
        if users:
            actions.append(
                CustomActionScript(
                    bucket=bucket,
                    key=f"{ACTIONS_PREFIX}/{USERS_SCRIPT}",
                    args=users_args(users, home_root, admins_only_on_head_node=head_node_for_admins(spec)),
                )
            )
        if spec.pyxis:
            actions.append(CustomActionScript(bucket=bucket, key=f"{ACTIONS_PREFIX}/{PYXIS_SCRIPT}"))
            actions.append(
                CustomActionScript(
                    bucket=bucket,
                    key=f"{ACTIONS_PREFIX}/{ENROOT_SCRIPT}",
                    args=enroot_args([DEFAULT_USERS[spec.os], *(user.name for user in users)]),
                )
            )
        return actions

    def _actions_bucket(self) -> s3.IBucket:
        """The scripts bucket and the upload of the shipped actions (made once, when an action needs them)."""
        if self._actions is None:
            bucket = SecureBucket(self, "ActionsBucket").bucket
            self.actions_bucket = bucket
            deployment = s3deploy.BucketDeployment(
                self,
                "Actions",
                destination_bucket=bucket,
                destination_key_prefix=ACTIONS_PREFIX,
                sources=self._action_sources(),
                prune=True,
                retain_on_delete=True,
                memory_limit=256,
            )
            _acknowledge_deployment(self)
            self.actions_deployment = deployment
            self._actions = (bucket, deployment)
        return self._actions[0]

    def _action_sources(self) -> list[s3deploy.ISource]:
        """The shipped actions, the node scripts shared with HyperPod (``node_scripts/shared/``: users, the metadata
        guard, enroot's folders), and with topology, ``topology.py`` (the
        topology step's files only then, so a cluster without it uploads what it did before the step existed)."""
        own = ["*.py", "__pycache__", *([] if self._ships_topology else [TOPOLOGY_SCRIPT])]
        sources = [
            s3deploy.Source.asset(str(ACTIONS_DIR), exclude=own),
            s3deploy.Source.asset(str(SHARED_DIR), exclude=["*", *(f"!{name}" for name in SHARED_SCRIPTS)]),
        ]
        if self._ships_topology:
            sources.append(
                s3deploy.Source.asset(str(TOPOLOGY_MODULE.parent), exclude=["*", f"!{TOPOLOGY_MODULE.name}"])
            )
        return sources

    def _topology_step(self, spec: ParallelClusterConfig) -> TopologyStep | None:
        """The head node's topology step (``topology.sh`` and ``topology.py``, uploaded with the other actions)
        when the file asks for topology and a queue's types all have it; None otherwise."""
        if not self._ships_topology:
            return None
        return TopologyStep(
            bucket=self._actions_bucket(),
            script_key=f"{ACTIONS_PREFIX}/{TOPOLOGY_SCRIPT}",
            module_key=f"{ACTIONS_PREFIX}/{TOPOLOGY_MODULE.name}",
        )

    def _add_outputs(self, spec: ParallelClusterConfig) -> None:
        self.output("ClusterName", self.cluster.cluster_name, "ParallelCluster name")
        self.output(
            "HeadNodeInstanceId",
            self.cluster.head_node_instance_id,
            "EC2 instance id of the head node (Slurm controller and login node)",
        )
        self.output(
            "HeadNodeSsmCommand",
            self.cluster.ssm_command(),
            "Open a shell on the head node through SSM Session Manager (no SSH, no key pair)",
        )
        self.output(
            "ValidationMessages",
            self.cluster.validation_messages,
            "ParallelCluster's validation warnings about the cluster configuration",
        )
        self.output(
            "ClusterLogGroups",
            f"/aws/parallelcluster/{self.cluster.cluster_name}-*",
            "CloudWatch log group of the cluster (ParallelCluster appends its creation timestamp)",
        )
        if self.accounting_database is not None:
            self.output(
                "AccountingDatabaseEndpoint",
                self.accounting_database.uri,
                "Slurm accounting database (host:port), reachable from the head node only",
            )
            self.output(
                "AccountingDatabaseSecretArn",
                self.accounting_database.secret.secret_arn,
                "Its master user's credentials (JSON: username, password, host, port); slurmdbd has a user of its own",
            )

        self.next_steps(
            "Connect: run [HeadNodeSsmCommand] (SSM Session Manager; the team logs in on the login nodes)",
            SLURM_ACCEPTANCE_STEP,
            SLURM_RUN_STEP,
            "A node that fails to start, or a job that does not: the logs are in [ClusterLogGroups]",
            DESTROY_STEP,
        )


def head_node_for_admins(spec: ParallelClusterConfig) -> bool:
    """Whether the team stays off the head node: when it has login nodes to log in to, unless the file says
    ``team_logins_on_head_node``."""
    return bool(spec.login_nodes) and not spec.team_logins_on_head_node


def users_args(
    users: Sequence[UserConfig], home_root: str, *, admins_only_on_head_node: bool = False
) -> list[str]:
    """users.sh's arguments: ``--home-root``, one ``--user NAME:UID:GID[:GROUP=GID,...]`` per user, one
    ``--key NAME:KEY`` per public key, and ``--admins-only-on-head-node`` when the team logs in on login nodes."""
    args = ["--home-root", home_root]
    if admins_only_on_head_node:
        args.append("--admins-only-on-head-node")
    for user in users:
        groups = ",".join(f"{g.name}={g.gid}" for g in user.groups)
        args += ["--user", f"{user.name}:{user.uid}:{user.primary_gid}" + (f":{groups}" if groups else "")]
    for user in users:
        for key in user.ssh_public_keys:
            args += ["--key", f"{user.name}:{key}"]
    return args


def enroot_args(names: Sequence[str]) -> list[str]:
    """training-clusters-enroot.sh's arguments on ParallelCluster: the example enroot.conf ParallelCluster 3.11+
    installs as the template, its folders (runtime and data on tmpfs, the cache on local disk: the cookbook's
    temporary_dir /run/enroot and persistent_dir /var/enroot), Pyxis' runtime_path of the example pyxis.conf,
    and the users who get a folder of each kind (the OS's default user and the team)."""
    return [
        "--template", "/opt/parallelcluster/examples/enroot/enroot.conf", "--conf", "/etc/enroot/enroot.conf",
        "--runtime", "/run/enroot/runtime", "--data", "/run/enroot/data", "--cache", "/var/enroot/cache",
        "--temp", "/var/enroot/tmp", "--pyxis-runtime", "/run/pyxis", "--user", ",".join(names),
    ]  # fmt: skip


def _topology_wanted(spec: ParallelClusterConfig) -> bool:
    """Whether the file asks for topology and a queue's instance types all have it (the construct decides the same
    from its queues; types the catalogue lacks are the construct's error to report)."""
    if spec.slurm.topology is SlurmTopology.OFF:
        return False
    queues = [[CATALOG.get(r.instance_type) for r in q.compute_resources] for q in spec.queues]
    return any(
        placed_by_topology([t for t in types if t is not None]) for types in queues if None not in types
    )


def _one(action: PclusterCustomActionConfig | None) -> list[PclusterCustomActionConfig]:
    return [] if action is None else [action]


def _acknowledge_deployment(stack: cdk.Stack) -> None:
    """CDK's BucketDeployment runs an aws-cdk-lib Lambda (one per stack): explain its findings where they arise."""
    handler = next(
        (c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment")), None
    )
    if handler is None:
        return
    acknowledge_cdk_made(
        handler,
        "CDK's BucketDeployment handler (aws-cdk-lib's design): it copies the staged custom-action scripts from "
        "the CDK assets bucket into the scripts bucket and prunes stale files there",
        managed_policy_reasons={
            "AWSLambdaBasicExecutionRole": "CDK's BucketDeployment handler writes its own logs"
        },
    )


def _compute_resource(spec: PclusterComputeResourceConfig) -> ComputeResource:
    return ComputeResource(
        name=spec.name,
        instance_type=spec.instance_type,
        min_count=spec.min_count,
        max_count=spec.max_count,
        efa=spec.efa,
        gdr_support=spec.gdr_support,
        disable_simultaneous_multithreading=spec.disable_simultaneous_multithreading,
        capacity=spec.resource_capacity(),
        gpu_health_check=spec.gpu_health_check,
    )
