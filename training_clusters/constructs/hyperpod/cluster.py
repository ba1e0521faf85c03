"""HyperPodCluster: a SageMaker HyperPod cluster (Slurm) with our lifecycle scripts, ready to train."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IConstruct

from training_clusters.catalog import hyperpod_offer_problem
from training_clusters.constructs.common.bucket import SecureBucket
from training_clusters.constructs.common.session_manager import CHANNEL_ACTIONS
from training_clusters.constructs.private.grants import grant_passed_role
from training_clusters.constructs.private.security_groups import (
    SameEnvironmentConnections,
    claim_efa_groups,
    open_between_members,
)
from training_clusters.constructs.private.validation import (
    advise,
    catalog_entry,
    checked_props,
    is_unresolved,
    parse_option,
    prop_error,
    raise_if_problem,
    refuse_misplaced,
)
from training_clusters.constructs.slurm.accounting import SlurmAccountingDatabase
from training_clusters.constructs.slurm.users import TeamUser, team_problem
from training_clusters.gates.compliance import (
    accept_inline_policy,
    acknowledge_cdk_made,
    acknowledge_wildcards,
    wildcard_finding,
)
from training_clusters.model.capacity import Capacity
from training_clusters.model.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.model.options import (
    DeepHealthCheck,
    HyperPodAccounting,
    NodeProvisioningMode,
    NodeRecovery,
    NodeRole,
    SlurmConfigMode,
    SlurmConfigStrategy,
)
from training_clusters.node_scripts import HYPERPOD_DIR, SHARED_DIR, lifecycle_bundle
from training_clusters.node_scripts.hyperpod.lib import cluster_config as lifecycle_files
from training_clusters.rules.common import mount_dir_problem
from training_clusters.rules.downloads import (
    LIFECYCLE_DOWNLOAD_OPTIONS,
    UNPINNED_DOWNLOAD_WARNING,
    download_pins_problem,
    pinned_url_problem,
    sha256_problem,
    unpinned_download_advice,
)
from training_clusters.rules.hyperpod import (
    RESERVED_MOUNT_DIRS,
    accounting_database_name_problem,
    api_accounting_problem,
    cluster_name_problem,
    continuous_slurm_problem,
    controller_count_problem,
    deep_health_checks_problem,
    extra_key_problem,
    extra_steps_problem,
    extra_volume_key_problem,
    extra_volume_problem,
    fsx_lustre_dns_name_problem,
    group_count_problem,
    group_names_problem,
    groups_problem,
    image_id_problem,
    instance_group_name_problem,
    is_accelerated,
    lifecycle_scripts_required_problem,
    owned_keys_problem,
    partition_name_problem,
    root_volume_problem,
    scripts_folder_problem,
    shipped_step_problem,
    slurm_config_strategy_problem,
    slurm_lifecycle_problem,
    slurm_only_problem,
    slurm_partition_problem,
    slurm_roles_problem,
    slurm_workers_problem,
    step_name_problem,
    step_roles_problem,
    step_script_problem,
    threads_per_core_problem,
    users_problem,
)
from training_clusters.rules.instance_types import hyperpod_instance_type_name_problem
from training_clusters.rules.lustre import lustre_dns_name_problem, lustre_mount_name_problem

#: The lifecycle entry point HyperPod runs on every node with legacy Slurm configuration
#: (``LifeCycleConfig.OnCreate``): it mounts FSx and starts the Slurm daemons itself.
ON_CREATE_SCRIPT = "on_create.sh"
#: The entry point HyperPod runs on every node with API-driven Slurm configuration
#: (``LifeCycleConfig.OnInitComplete``, "Extended mode": after HyperPod has set up Slurm and mounted FSx).
ON_INIT_COMPLETE_SCRIPT = "on_init_complete.sh"
#: Why a cluster with no ``slurm_config`` stated is warned about (``training-clusters:slurm-config-default``).
SLURM_CONFIG_DEFAULT_WARNING = "slurm-config-default"
#: The strategy API-driven clusters get when none is given (see :class:`HyperPodCluster`'s
#: ``slurm_config_strategy``).
DEFAULT_SLURM_CONFIG_STRATEGY = SlurmConfigStrategy.MERGE
#: HyperPod's reference lifecycle file, uploaded beside the shipped scripts (legacy Slurm, EKS).
PROVISIONING_PARAMETERS_FILE = lifecycle_files.PARAMETERS_FILE
#: Our own settings, uploaded beside ``provisioning_parameters.json`` and read by our scripts.
LIFECYCLE_SETTINGS_FILE = lifecycle_files.SETTINGS_FILE
#: The keys of ``provisioning_parameters.json``: those HyperPod's reference lifecycle scripts read. This and the
#: two below are written once, in the module the nodes run (``node_scripts/hyperpod/lib/cluster_config.py``).
PROVISIONING_PARAMETER_KEYS = frozenset(lifecycle_files.PARAMETER_KEYS)
#: The keys of ``training_clusters.json`` the shipped scripts read.
LIFECYCLE_SETTING_KEYS = frozenset(lifecycle_files.SETTING_KEYS)
#: With API-driven Slurm, ``training_clusters.json`` also names the groups (there is no
#: ``provisioning_parameters.json``): ``on_init_complete.sh`` finds its node's role with them.
API_GROUP_KEYS = frozenset(lifecycle_files.GROUP_KEYS)
#: The keys the construct writes itself from its props, which check them: ``lifecycle.extra`` cannot set them.
OWNED_KEYS = {
    "workload_manager": "orchestrator",
    "controller_group": "instance_groups",
    "login_group": "instance_groups",
    "worker_groups": "instance_groups",
    "fsx_dns_name": "lustre.dns_name",
    "fsx_mountname": "lustre.mount_name",
    "fsx_mount_dir": "lustre.mount_dir",
    "enable_enroot_pyxis": "lifecycle.enable_enroot_pyxis",
    "enable_observability": "lifecycle.enable_observability",
    "extra_steps": "lifecycle.extra_steps",
    "enable_docker": "lifecycle.enable_docker",
    "accounting": "accounting",
    "users": "users",
    "enable_pam_slurm_adopt": "lifecycle.enable_pam_slurm_adopt",
    "team_logins_on_controller": "lifecycle.team_logins_on_controller",
    "slurm_config": "slurm_config",
}
#: ``SlurmConfig.NodeType`` of each role (``ClusterSlurmConfig``: Controller | Login | Compute).
SLURM_NODE_TYPES = {NodeRole.CONTROLLER: "Controller", NodeRole.LOGIN: "Login", NodeRole.WORKER: "Compute"}
#: Where :class:`LifecycleStep` scripts are uploaded, under the lifecycle prefix.
USER_STEPS_FOLDER = "user_steps"


@dataclass(frozen=True)
class Orchestrator:
    """Slurm or an existing EKS cluster.

    Slurm is configured by HyperPod from the instance groups (``slurm_config`` api) or by the shipped
    lifecycle scripts (legacy); with EKS (``Orchestrator.eks(cluster_arn)``), use
    :class:`~training_clusters.constructs.hyperpod_eks.cluster.HyperPodEksCluster`, which installs what HyperPod needs
    in the cluster first (``environments/hyperpod-eks-*.yaml``).
    """

    eks_cluster_arn: str | None = None

    @staticmethod
    def slurm() -> Orchestrator:
        return Orchestrator()

    @staticmethod
    def eks(cluster_arn: str) -> Orchestrator:
        return Orchestrator(eks_cluster_arn=cluster_arn)

    @property
    def is_slurm(self) -> bool:
        return self.eks_cluster_arn is None


@dataclass(frozen=True)
class InstanceGroup:
    """One HyperPod instance group.

    :param name: Instance group name, e.g. ``worker-group-1``.
    :param instance_type: HyperPod type with the ``ml.`` prefix, e.g. ``ml.p5.48xlarge``.
    :param instance_count: Number of instances. Default: 1.
    :param role: CONTROLLER, LOGIN or WORKER. Default: WORKER.
    :param partition: Slurm partition of a WORKER group (required for workers under Slurm).
    :param threads_per_core: 1 (hyper-threading off, usual for training) or 2. Default: 1.
    :param extra_volume_gib: An extra EBS volume per instance, mounted by HyperPod at
        ``/opt/sagemaker``. Default: none.
    :param deep_health_checks: On-start deep health checks. Default: both for GPU / Trainium groups,
        none for CPU groups (HyperPod offers them on accelerated instances only).
    :param capacity: ``Capacity.on_demand()`` or ``Capacity.training_plan(arn)`` (``TrainingPlanArn``: the
        group runs on the plan's reserved ``ml.`` instances, in its window). EC2 reservations, Capacity
        Blocks and Spot are refused: HyperPod takes reserved capacity through training plans. HyperPod
        places its instances itself; no placement group of ours applies. Default: On-Demand.
    :param image_id: A custom AMI (``ImageId``, ``ami-...``) built from a HyperPod AMI, e.g. with the
        lifecycle's packages baked in. Default: HyperPod's public AMI for the orchestrator.
    :param extra_volume_kms_key: Customer key encrypting the ``extra_volume_gib`` volume (``VolumeKmsKeyId``);
        the execution role may create grants on it and describe it. Default: the account's EBS default
        encryption.
    :param root_volume_gib: Size of the root volume (an ``EbsVolumeConfig`` with ``RootVolume``), for
        images and caches that outgrow the AMI's. Default: HyperPod's root volume size.
    """

    name: str
    instance_type: str
    instance_count: int = 1
    role: NodeRole | str = NodeRole.WORKER
    partition: str | None = None
    threads_per_core: int = 1
    extra_volume_gib: int | None = None
    deep_health_checks: Sequence[DeepHealthCheck | str] | None = None
    capacity: Capacity | None = None
    image_id: str | None = None
    extra_volume_kms_key: kms.IKey | None = None
    root_volume_gib: int | None = None


@dataclass(frozen=True)
class LustreMount:
    """The shared FSx for Lustre file system every node mounts (from ``SharedLustre``).

    :param dns_name: The file system's DNS name (letters, digits, ``-`` and ``.``).
    :param mount_name: Its Lustre mount name: 1-8 letters, digits, ``_`` or ``-``.
    :param mount_dir: Where nodes mount it: an absolute directory, not a system folder such as ``/home`` or
        ``/opt/slurm``. Default: ``/fsx``.
    """

    dns_name: str
    mount_name: str
    mount_dir: str = "/fsx"


@dataclass(frozen=True)
class LifecycleStep:
    """A script of your own that the shipped lifecycle scripts run on the nodes after their own steps.

    It runs as step ``user-<name>``, with bash, from the lifecycle folder, as root, after every step of
    ours succeeded; its output goes to the lifecycle log (and CloudWatch) and a non-zero exit fails the
    node like one of our steps (one line ``FAILED step 'user-<name>' (exit N)``). Its environment names
    the node: ``TC_ROLE`` (controller, login or worker), ``TC_GROUP``, ``TC_PARTITION``, ``TC_NODE_IP``,
    ``TC_CONTROLLER_IPS`` and ``TC_FSX_MOUNT_DIR`` (empty without FSx). Make it idempotent: HyperPod runs
    the lifecycle scripts again on a replaced node.

    :param name: 1-63 letters, digits, ``-`` or ``_``, unique among the steps.
    :param script: Path of the bash script on the machine that synthesizes; uploaded as
        ``user_steps/<name>.sh``.
    :param roles: The node roles it runs on. Default: every role (controller, login and worker).
    """

    name: str
    script: str | Path
    roles: Sequence[NodeRole | str] | None = None


@dataclass(frozen=True)
class LifecycleOptions:
    """Settings of the shipped lifecycle scripts, uploaded as ``training_clusters.json``.

    :param enable_enroot_pyxis: Enroot + Pyxis for ``srun --container-image``. Default: True.
    :param enable_observability: Prometheus node exporter (:9100) + DCGM exporter (:9400, its default metric
        list) on every node, for a Prometheus you run; no EFA counters, no Prometheus or Grafana here (the
        shipped dashboards are EKS-only, :mod:`training_clusters.monitoring.dashboards`). Default: False.
    :param extra_steps: Your own steps, run in this order after ours on the roles they name.
        Default: none.
    :param enable_docker: Docker (the Ubuntu archive's ``docker.io``) on every node, with the NVIDIA runtime on
        GPU nodes; the DCGM exporter of ``enable_observability`` needs it. Default: False.
    :param enable_pam_slurm_adopt: Users reach a worker over SSH only while they hold a job on it, and their
        session is adopted into the job (``pam_slurm_adopt``, ``PrologFlags=Contain``). Default: False.
    :param team_logins_on_controller: With ``users``, let the team SSH into the controller too. Default:
        False: the users exist there (Slurm resolves their names) but sshd lets only root and the cluster
        user (``ubuntu``) in, since the controller holds slurmctld's state and reads the accounting secret.
    :param extra: More keys: those HyperPod's reference reads go to ``provisioning_parameters.json``, those
        of the shipped scripts (e.g. ``slurm_requeue_exit_codes``, or ``download_sha256``: ``{URL: SHA-256}``
        for what the scripts download, which they then refuse in any other form; by default nothing is pinned:
        enroot's ``.deb``s and Pyxis' source from github.com, Slurm's source from download.schedmd.com and
        NVIDIA's apt key, docs/downloads.md lists the URLs) to ``training_clusters.json``; another
        key is an error, unless ``lifecycle_scripts_dir`` replaces the scripts (then it goes to
        ``provisioning_parameters.json``). A key the construct writes from a prop (``users``,
        ``extra_steps``, ``accounting``, ``controller_group``, ``fsx_mount_dir`` ...; see
        :data:`OWNED_KEYS`) is an error: set the prop, which is checked. Default: none.
    """

    enable_enroot_pyxis: bool = True
    enable_observability: bool = False
    extra_steps: Sequence[LifecycleStep] = ()
    enable_docker: bool = False
    enable_pam_slurm_adopt: bool = False
    team_logins_on_controller: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@checked_props
@jsii.implements(ec2.IConnectable)
class HyperPodCluster(Construct):
    """A SageMaker HyperPod cluster whose nodes run our lifecycle scripts from a secure bucket.

    Example::

        cluster = HyperPodCluster(self, "HyperPod", cluster_name="ml-cluster", vpc=network.vpc,
            subnet=network.placement_subnet(),
            instance_groups=[
                InstanceGroup(name="controller-machine", instance_type="ml.c5.xlarge", role=NodeRole.CONTROLLER),
                InstanceGroup(name="worker-group-1", instance_type="ml.p5.48xlarge", instance_count=2,
                              partition="gpu"),
            ],
            lustre=LustreMount(dns_name=fs.dns_name, mount_name=fs.mount_name),
            slurm_config=SlurmConfigMode.API)

    HyperPod then configures Slurm from each group's ``SlurmConfig`` and mounts FSx itself; our lifecycle
    script adds the rest (``slurm_config``; docs/hyperpod-slurm.md).

    Attributes: ``cluster`` (the L1), ``cluster_name``, ``cluster_arn``, ``role``, ``controller_role``,
    ``accounting_database``, ``users``, ``bucket``,
    ``lifecycle_prefix``, ``source_s3_uri``, ``provisioning_parameters`` (None when API-driven),
    ``lifecycle_settings``, ``slurm_config``, ``slurm_config_strategy``, ``is_api_driven``, ``entry_script``,
    ``security_group``, ``connections``, ``controller_security_group``, ``controller_connections``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        instance_groups: Sequence[InstanceGroup],
        lustre: LustreMount | None = None,
        additional_security_groups: Sequence[ec2.ISecurityGroup] = (),
        orchestrator: Orchestrator | None = None,
        node_recovery: NodeRecovery | str = NodeRecovery.AUTOMATIC,
        bucket: s3.IBucket | None = None,
        role: iam.IRole | None = None,
        lifecycle: LifecycleOptions | None = None,
        lifecycle_scripts_dir: str | Path | None = None,
        accounting: SlurmAccountingDatabase | HyperPodAccounting | str | None = None,
        users: Sequence[TeamUser] = (),
        node_provisioning_mode: NodeProvisioningMode | str | None = None,
        slurm_config: SlurmConfigMode | str | None = None,
        slurm_config_strategy: SlurmConfigStrategy | str | None = None,
    ) -> None:
        """Create the cluster, its execution role, bucket and lifecycle upload.

        :param cluster_name: 1-63 letters, digits and hyphens. Replacing it replaces the cluster.
        :param vpc: The VPC of the cluster.
        :param subnet: The one private subnet of all nodes (a placement subnet: EFA and FSx share its AZ).
        :param instance_groups: The groups; under Slurm exactly one CONTROLLER group and workers with
            partitions.
        :param lustre: The FSx for Lustre file system to mount. Default: no shared file system.
        :param additional_security_groups: Added to the cluster's own group, e.g. an EFA group of this
            cluster's own (``network.add_efa_security_group(id)``): an EFA group another cluster already uses
            is refused, as it would open every port between the two clusters' nodes.
            Default: none.
        :param orchestrator: Default: Slurm, configured by the lifecycle scripts.
        :param node_recovery: Default: AUTOMATIC (HyperPod replaces failed nodes).
        :param bucket: Where lifecycle scripts go; its name must start with ``sagemaker-`` for HyperPod's
            managed policy. Default: a new :class:`SecureBucket` named ``sagemaker-...``.
        :param role: Execution role of the instances. Default: a least-privilege role made here; with an
            ``accounting`` database, the controller group gets a second one (``controller_role``), the only
            role that may read the database's secret (team members run code on login and worker nodes).
            A role you pass gets, in policies of this cluster's attached to it, what this cluster's
            resources need: read on the lifecycle prefix and ``kms:Decrypt`` on the bucket's key, the
            accounting secret, the extra volumes' keys; it must carry HyperPod's own needs itself (trust
            ``sagemaker.amazonaws.com``; ``AmazonSageMakerClusterInstanceRolePolicy`` or its scoped
            equivalent; the VPC interface actions ``ec2:CreateNetworkInterface`` ... listed at
            https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites-iam.html). An
            immutable role (``iam.Role.from_role_arn(..., mutable=False)``) gets nothing: a warning
            (``training-clusters:immutable-role``) lists each statement it must carry.
        :param lifecycle: Settings of the shipped lifecycle scripts and your own steps after theirs.
            Default: Enroot/Pyxis on, exporters off, no steps of yours.
        :param lifecycle_scripts_dir: A folder uploaded INSTEAD of the shipped lifecycle scripts; it must
            hold ``on_create.sh``, which HyperPod runs on every node. To add to the shipped scripts, use
            ``lifecycle.extra_steps``. Default: the scripts shipped in this package.
        :param accounting: Slurm accounting through slurmdbd on the controller: a
            :class:`SlurmAccountingDatabase` (its endpoint, port and slurmdbd's own user go to the nodes, and
            the controller's role may read that user's secret, never the master user's; the controller's
            interface carries a security group of its own, ``controller_security_group``: open the database's
            port to it alone in the stack,
            ``db.connections.allow_default_port_from(cluster.controller_connections)``; the cluster is created
            once the writer instance and slurmdbd's user exist, through a stack dependency when the database
            lives in another stack), or
            ``HyperPodAccounting.LOCAL`` (MariaDB on the controller). Default: none.
        :param users: The team's Linux users, the same ids on every node, homes on the shared file system.
            Default: none.
        :param node_provisioning_mode: ``CONTINUOUS``: nodes join as they come, the cluster is usable
            before all have; needs ``slurm_config`` API under Slurm. Default: HyperPod's all-or-nothing
            provisioning.
        :param slurm_config: Who configures Slurm (Slurm orchestrator only). ``API``: each instance group's
            ``SlurmConfig`` (NodeType Controller, Login, or Compute with ``PartitionNames`` [its partition]),
            FSx in each group's ``InstanceStorageConfigs`` (``FsxLustreConfig`` DnsName, MountName,
            MountPath = ``lustre.mount_dir``), and ``LifeCycleConfig.OnInitComplete`` =
            :data:`ON_INIT_COMPLETE_SCRIPT`: HyperPod writes slurm.conf's node and partition lines, starts the
            daemons, keeps accounting on the controller (or in the ``accounting`` database under continuous
            provisioning) and mounts FSx, then our script adds what it does not do (the team's users, the
            IMDS guard and node access, packages, Enroot/Pyxis and Docker, our slurm.conf keys,
            observability, your steps). No ``provisioning_parameters.json`` is uploaded. ``LEGACY``:
            ``provisioning_parameters.json`` and ``OnCreate`` = :data:`ON_CREATE_SCRIPT`, which does all of
            it itself: for a cluster deployed by an earlier version of this library (HyperPod refuses
            ``SlurmConfig`` beside that file: the update fails and rolls back; AWS's migration guide,
            sagemaker-hyperpod-slurm-api-config-migration, moves a cluster over by hand, one way). Default:
            ``API``, with the warning ``training-clusters:slurm-config-default`` saying so: state it to
            silence it. API needs a HyperPod AMI from January 2026 or later (what HyperPod gives a new
            cluster; a custom ``image_id`` must be built from one).
        :param slurm_config_strategy: ``Orchestrator.Slurm.SlurmConfigStrategy`` of an API-driven cluster:
            what an update does when slurm.conf on the controller differs from the API's configuration.
            ``MANAGED`` fails the update and rolls it back, ``OVERWRITE`` discards the edits, ``MERGE`` keeps
            them. AWS's pages disagree on the service's default (the reference says Managed, the migration
            guide Merge), so it is always sent. Refused under continuous provisioning, which rejects any
            value and merges. Default: ``MERGE``: our lifecycle script keeps its own keys in slurm.conf
            (``JobRequeue``, ``RequeueExit``, pam_slurm_adopt's), which ``MANAGED`` would count as drift
            (every update failing) and ``OVERWRITE`` would discard on each update; and it is what continuous
            provisioning does anyway, so both modes behave alike.
        """
        super().__init__(scope, id)
        claim_efa_groups(
            additional_security_groups, cluster=self, owner=self, prop="additional_security_groups"
        )
        self._orchestrator = orchestrator or Orchestrator.slurm()
        self.node_provisioning_mode = (
            None
            if node_provisioning_mode is None
            else parse_option(self, "node_provisioning_mode", NodeProvisioningMode, node_provisioning_mode)
        )
        #: ``API`` or ``LEGACY`` under Slurm (see ``slurm_config``); None with EKS.
        self.slurm_config: SlurmConfigMode | None = self._slurm_config_option(slurm_config)
        #: The ``SlurmConfigStrategy`` sent, or None (legacy, EKS, continuous provisioning).
        self.slurm_config_strategy: SlurmConfigStrategy | None = self._strategy_option(slurm_config_strategy)
        node_recovery = parse_option(self, "node_recovery", NodeRecovery, node_recovery)
        instance_groups = [self._group_options(i, g) for i, g in enumerate(instance_groups)]
        self._check_cluster_name(cluster_name)
        self._check_groups(instance_groups)
        self._check_lustre(lustre)
        self._check_lifecycle_scripts(lifecycle_scripts_dir)
        lifecycle = self._lifecycle_options(lifecycle or LifecycleOptions(), lifecycle_scripts_dir)
        if lifecycle_scripts_dir is None:
            enabled = [name for name in LIFECYCLE_DOWNLOAD_OPTIONS if getattr(lifecycle, name) is True]
            pins = lifecycle.extra.get("download_sha256", {})
            advise(self, UNPINNED_DOWNLOAD_WARNING, unpinned_download_advice(enabled, pins))
        self._accounting = self._accounting_option(accounting, lifecycle_scripts_dir)
        self._check_users(users, lifecycle_scripts_dir)
        self.users = tuple(users)
        self._check_api_accounting()
        if self.is_api_driven:
            self._check_api_lustre(lustre)
        self.cluster_name = cluster_name
        self.instance_groups = tuple(instance_groups)
        self.lifecycle_prefix = f"lifecycle/{cluster_name}/"

        self.security_group = self._create_security_group(vpc)
        #: Every group the nodes' interfaces carry: the cluster's own and ``additional_security_groups``.
        self.security_groups: list[ec2.ISecurityGroup] = [self.security_group, *additional_security_groups]
        self._connections = SameEnvironmentConnections(owner=self, security_groups=[self.security_group])
        #: With an accounting database, a group only the controller's interface carries (beside
        #: ``security_groups``): the database admits it alone. Else None.
        self.controller_security_group: ec2.SecurityGroup | None = (
            self._create_controller_security_group(vpc) if self.accounting_database is not None else None
        )
        self.bucket = bucket or SecureBucket(self, "LifecycleBucket", name_prefix="sagemaker-").bucket
        self.source_s3_uri = f"s3://{self.bucket.bucket_name}/{self.lifecycle_prefix}"
        #: ``provisioning_parameters.json`` (legacy Slurm, EKS), or None: API-driven clusters have none.
        self.provisioning_parameters: dict[str, Any] | None = (
            None
            if self.is_api_driven
            else self._provisioning_parameters(lustre, lifecycle, lifecycle_scripts_dir)
        )
        self.lifecycle_settings = self._lifecycle_settings(lustre, lifecycle, lifecycle_scripts_dir)
        self.deployment = self._upload_lifecycle_scripts(lifecycle_scripts_dir, lifecycle)
        self.role = role or self._create_execution_role(subnet)
        self._grant_lifecycle_read()
        #: The controller group's execution role: a role of its own when it reads the accounting database's
        #: secret (team members run code on login and worker nodes, whose role must not read it), else ``role``.
        self.controller_role = (
            self._create_execution_role(subnet, "ControllerRole", "the Slurm controller of ")
            if role is None and self.accounting_database is not None
            else self.role
        )
        self._grant_accounting_secret()
        self._grant_volume_keys()
        self._lustre = lustre
        self.cluster = self._create_cluster(subnet, node_recovery)
        self.cluster_arn: str = self.cluster.attr_cluster_arn
        self.cluster_id: str = cdk.Fn.select(1, cdk.Fn.split("cluster/", self.cluster.attr_cluster_arn))

    @property
    def connections(self) -> ec2.Connections:
        """The cluster's own security group: rules made through it (``fs.allow_clients_from(cluster)``) never
        touch the additional groups, which may belong to another stack (the network's EFA group)."""
        return self._connections

    @property
    def controller_connections(self) -> ec2.Connections:
        """The controller's own security group (made with an accounting database): what slurmdbd connects
        from, so ``db.connections.allow_default_port_from(cluster.controller_connections)`` opens the
        database to the controller and to no other node."""
        if self.controller_security_group is None:
            raise prop_error(
                self.node.path,
                "controller_connections",
                "exist only with an accounting database (accounting=SlurmAccountingDatabase), got accounting "
                f"{self._accounting.name}",
            )
        return SameEnvironmentConnections(owner=self, security_groups=[self.controller_security_group])

    @property
    def is_api_driven(self) -> bool:
        """Whether HyperPod configures Slurm from the instance groups' ``SlurmConfig`` (``slurm_config`` API)."""
        return self.slurm_config is SlurmConfigMode.API

    @property
    def entry_script(self) -> str:
        """The lifecycle entry point HyperPod runs: ``on_init_complete.sh`` (API) or ``on_create.sh``."""
        return ON_INIT_COMPLETE_SCRIPT if self.is_api_driven else ON_CREATE_SCRIPT

    @property
    def controller_group(self) -> InstanceGroup | None:
        return next((g for g in self.instance_groups if g.role is NodeRole.CONTROLLER), None)

    @property
    def login_group(self) -> InstanceGroup | None:
        """The login group (at most one), else None."""
        return next((g for g in self.instance_groups if g.role is NodeRole.LOGIN), None)

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _group_options(self, index: int, group: InstanceGroup) -> InstanceGroup:
        """The group with its options as members (a string names one), checked with their field paths."""
        if not isinstance(group, InstanceGroup):
            raise prop_error(
                self.node.path,
                f"instance_groups[{index}]",
                f"must be an InstanceGroup, got {type(group).__name__}",
            )
        where = f"instance_groups[{index}]"
        if group.capacity is not None:
            raise_if_problem(
                self, f"{where}.capacity", group.capacity.problem_for(CapacityOrchestrator.HYPERPOD)
            )
            refuse_misplaced(self, f"{where}.capacity", group.capacity)
        checks = group.deep_health_checks
        if isinstance(checks, str):
            raise prop_error(
                self.node.path,
                f"{where}.deep_health_checks",
                f"must be a list of {DeepHealthCheck.allowed()}, got the single string {checks!r}",
            )
        return replace(
            group,
            role=parse_option(self, f"{where}.role", NodeRole, group.role),
            deep_health_checks=(
                None
                if checks is None
                else tuple(
                    parse_option(self, f"{where}.deep_health_checks[{i}]", DeepHealthCheck, check)
                    for i, check in enumerate(checks)
                )
            ),
        )

    def _check_cluster_name(self, name: str) -> None:
        if is_unresolved(name):
            return
        raise_if_problem(self, "cluster_name", cluster_name_problem(name))

    def _check_lustre(self, lustre: LustreMount | None) -> None:
        """The names and folder go into the nodes' root lifecycle scripts: only the shapes FSx gives."""
        if lustre is None:
            return
        if not is_unresolved(lustre.dns_name):
            raise_if_problem(self, "lustre.dns_name", lustre_dns_name_problem(lustre.dns_name))
        if not is_unresolved(lustre.mount_name):
            raise_if_problem(self, "lustre.mount_name", lustre_mount_name_problem(lustre.mount_name))
        if not is_unresolved(lustre.mount_dir):
            raise_if_problem(
                self,
                "lustre.mount_dir",
                mount_dir_problem(
                    lustre.mount_dir,
                    reserved=RESERVED_MOUNT_DIRS,
                    reserved_by="is reserved by the operating system, Slurm or HyperPod",
                ),
            )

    def _check_lifecycle_scripts(self, scripts_dir: str | Path | None) -> None:
        raise_if_problem(
            self,
            "lifecycle_scripts_dir",
            lifecycle_scripts_required_problem(self._orchestrator.is_slurm, scripts_dir is not None),
        )
        if scripts_dir is not None:
            self._check_scripts_folder(scripts_dir)

    def _check_scripts_folder(self, scripts_dir: str | Path) -> None:
        folder = Path(scripts_dir)
        entry = self.entry_script
        state = (
            "missing"
            if not folder.exists()
            else "file"
            if not folder.is_dir()
            else "no entry"
            if not (folder / entry).is_file()
            else None
        )
        raise_if_problem(
            self, "lifecycle_scripts_dir", scripts_folder_problem(str(scripts_dir), entry, state)
        )

    def _lifecycle_options(
        self, options: LifecycleOptions, scripts_dir: str | Path | None
    ) -> LifecycleOptions:
        """The options with each step's roles as members, every step and extra key checked."""
        self._check_extra_keys(options, scripts_dir)
        if options.extra_steps:
            given = None if scripts_dir is None else str(scripts_dir)
            raise_if_problem(self, "lifecycle.extra_steps", extra_steps_problem(given, ON_CREATE_SCRIPT))
        steps = tuple(
            self._step_options(f"lifecycle.extra_steps[{i}]", s) for i, s in enumerate(options.extra_steps)
        )
        self._check_step_names(steps)
        return replace(options, extra_steps=steps)

    def _check_extra_keys(self, options: LifecycleOptions, scripts_dir: str | Path | None) -> None:
        owned = [(key, OWNED_KEYS[key]) for key in options.extra if key in OWNED_KEYS]
        raise_if_problem(self, "lifecycle.extra", owned_keys_problem(owned))
        if scripts_dir is not None:
            return
        known = (
            LIFECYCLE_SETTING_KEYS
            if self.is_api_driven
            else PROVISIONING_PARAMETER_KEYS | LIFECYCLE_SETTING_KEYS
        )
        for key in options.extra:
            raise_if_problem(
                self,
                "lifecycle.extra",
                extra_key_problem(key, self.is_api_driven, PROVISIONING_PARAMETER_KEYS, known),
            )
        self._check_download_pins(options.extra.get("download_sha256", {}))

    def _check_download_pins(self, pins: Any) -> None:
        """``download_sha256``: https:// URL to 64 hex digits, as the nodes' preflight checks it."""
        field = "lifecycle.extra['download_sha256']"
        raise_if_problem(self, field, download_pins_problem(pins))
        for url, digest in pins.items():
            raise_if_problem(self, field, pinned_url_problem(url))
            if not is_unresolved(digest):
                raise_if_problem(self, f"{field}[{url!r}]", sha256_problem(digest))

    def _step_options(self, where: str, step: LifecycleStep) -> LifecycleStep:
        if not isinstance(step, LifecycleStep):
            raise prop_error(self.node.path, where, f"must be a LifecycleStep, got {type(step).__name__}")
        raise_if_problem(self, f"{where}.name", step_name_problem(step.name))
        script = Path(step.script)
        state = None if script.is_file() else "folder" if script.is_dir() else "missing"
        raise_if_problem(self, f"{where}.script", step_script_problem(str(step.script), state))
        shipped = script.name == ON_CREATE_SCRIPT or any(
            script.resolve().is_relative_to(folder.resolve())
            for folder in (HYPERPOD_DIR, SHARED_DIR, lifecycle_scripts_path())
        )
        raise_if_problem(
            self, f"{where}.script", shipped_step_problem(str(step.script), shipped, ON_CREATE_SCRIPT)
        )
        raise_if_problem(self, f"{where}.roles", step_roles_problem(step.roles, NodeRole.allowed()))
        roles = tuple(NodeRole) if step.roles is None else step.roles
        return replace(
            step,
            roles=tuple(parse_option(self, f"{where}.roles[{i}]", NodeRole, r) for i, r in enumerate(roles)),
        )

    def _check_step_names(self, steps: Sequence[LifecycleStep]) -> None:
        repeated = group_names_problem([step.name for step in steps])
        if repeated:
            raise_if_problem(self, f"lifecycle.extra_steps[{repeated[0]}].name", repeated[1])

    def _accounting_option(
        self,
        accounting: SlurmAccountingDatabase | HyperPodAccounting | str | None,
        scripts_dir: str | Path | None,
    ) -> HyperPodAccounting:
        """The accounting mode; sets ``accounting_database`` (None unless EXTERNAL)."""
        #: The external database slurmdbd uses, or None.
        self.accounting_database: SlurmAccountingDatabase | None = None
        if isinstance(accounting, SlurmAccountingDatabase):
            self.accounting_database = accounting
            mode = HyperPodAccounting.EXTERNAL
        else:
            mode = parse_option(self, "accounting", HyperPodAccounting, accounting or HyperPodAccounting.NONE)
            if mode is HyperPodAccounting.EXTERNAL:
                raise prop_error(
                    self.node.path,
                    "accounting",
                    "EXTERNAL needs the database itself: pass the SlurmAccountingDatabase, got the option "
                    "EXTERNAL",
                )
        if mode is not HyperPodAccounting.NONE:
            raise_if_problem(
                self,
                "accounting",
                slurm_lifecycle_problem(mode.name, scripts_dir is not None, self._orchestrator.is_slurm),
            )
        return mode

    def _slurm_config_option(self, value: SlurmConfigMode | str | None) -> SlurmConfigMode | None:
        """The Slurm configuration mode (None with EKS); API with a warning when none was given."""
        if not self._orchestrator.is_slurm:
            raise_if_problem(self, "slurm_config", slurm_only_problem(value, slurm=False))
            return None
        if value is None:
            advise(
                self,
                SLURM_CONFIG_DEFAULT_WARNING,
                "slurm_config is not stated, so this cluster is API-driven (each instance group's "
                "SlurmConfig, no provisioning_parameters.json). A cluster deployed by an earlier version of "
                "this library is legacy: HyperPod refuses SlurmConfig beside its provisioning_parameters.json "
                "and the update fails and rolls back. State slurm_config legacy for such a cluster, or "
                "slurm_config api for a new one (docs/hyperpod-slurm.md).",
            )
            return SlurmConfigMode.API
        mode = parse_option(self, "slurm_config", SlurmConfigMode, value)
        continuous = self.node_provisioning_mode is NodeProvisioningMode.CONTINUOUS
        raise_if_problem(
            self, "node_provisioning_mode", continuous_slurm_problem(mode is SlurmConfigMode.API, continuous)
        )
        return mode

    def _strategy_option(self, value: SlurmConfigStrategy | str | None) -> SlurmConfigStrategy | None:
        """The strategy sent: the one given, or :data:`DEFAULT_SLURM_CONFIG_STRATEGY` for an API-driven
        cluster without continuous provisioning (which takes none)."""
        continuous = self.node_provisioning_mode is NodeProvisioningMode.CONTINUOUS
        if value is not None:
            strategy = parse_option(self, "slurm_config_strategy", SlurmConfigStrategy, value)
            raise_if_problem(
                self,
                "slurm_config_strategy",
                slurm_config_strategy_problem(strategy.value, self.is_api_driven, continuous),
            )
            return strategy
        return DEFAULT_SLURM_CONFIG_STRATEGY if self.is_api_driven and not continuous else None

    def _check_api_accounting(self) -> None:
        continuous = self.node_provisioning_mode is NodeProvisioningMode.CONTINUOUS
        raise_if_problem(
            self, "accounting", api_accounting_problem(self._accounting.value, self.is_api_driven, continuous)
        )
        database = self.accounting_database
        if self.is_api_driven and database is not None and not is_unresolved(database.databases[0]):
            raise_if_problem(self, "accounting", accounting_database_name_problem(database.databases[0]))

    def _check_api_lustre(self, lustre: LustreMount | None) -> None:
        """HyperPod's ``FsxLustreConfig.DnsName`` is narrower than a host name: an FSx file system's."""
        if lustre is not None and not is_unresolved(lustre.dns_name):
            raise_if_problem(self, "lustre.dns_name", fsx_lustre_dns_name_problem(lustre.dns_name))

    def _check_users(self, users: Sequence[TeamUser], scripts_dir: str | Path | None) -> None:
        if not users:
            return
        raise_if_problem(self, "users", users_problem(scripts_dir is not None, self._orchestrator.is_slurm))
        problem = team_problem(users)
        if problem is not None:
            where, sentence = problem
            raise prop_error(self.node.path, f"users{where}", sentence)

    def _check_groups(self, groups: Sequence[InstanceGroup]) -> None:
        raise_if_problem(self, "instance_groups", groups_problem(len(groups)))
        self._check_group_names(groups)
        for index, group in enumerate(groups):
            self._check_group(f"instance_groups[{index}]", group)
        if self._orchestrator.is_slurm:
            self._check_slurm_roles(groups)

    def _check_group_names(self, groups: Sequence[InstanceGroup]) -> None:
        for index, group in enumerate(groups):
            raise_if_problem(self, f"instance_groups[{index}].name", instance_group_name_problem(group.name))
        repeated = group_names_problem([group.name for group in groups])
        if repeated:
            raise_if_problem(self, f"instance_groups[{repeated[0]}].name", repeated[1])

    def _check_group(self, where: str, group: InstanceGroup) -> None:
        if group.role is NodeRole.WORKER or not self._orchestrator.is_slurm:
            catalog_entry(self, group.instance_type, f"{where}.instance_type", hyperpod=True)
        else:  # a controller or login group may be any type HyperPod sells: its name is checked
            raise_if_problem(
                self,
                f"{where}.instance_type",
                hyperpod_instance_type_name_problem(group.instance_type)
                or hyperpod_offer_problem(group.instance_type),
            )
        # An EKS group may start at 0 (Karpenter autoscaling): HyperPodEksCluster checks its counts itself.
        least = 1 if self._orchestrator.is_slurm else 0
        raise_if_problem(self, f"{where}.instance_count", group_count_problem(group.instance_count, least))
        raise_if_problem(self, f"{where}.threads_per_core", threads_per_core_problem(group.threads_per_core))
        raise_if_problem(self, f"{where}.extra_volume_gib", extra_volume_problem(group.extra_volume_gib))
        image_problem = (
            None
            if group.image_id is None or is_unresolved(group.image_id)
            else image_id_problem(group.image_id)
        )
        raise_if_problem(self, f"{where}.image_id", image_problem)
        raise_if_problem(self, f"{where}.root_volume_gib", root_volume_problem(group.root_volume_gib))
        if group.extra_volume_kms_key is not None:
            raise_if_problem(
                self, f"{where}.extra_volume_kms_key", extra_volume_key_problem(group.extra_volume_gib)
            )
        raise_if_problem(
            self,
            f"{where}.deep_health_checks",
            deep_health_checks_problem([str(c) for c in group.deep_health_checks or ()], group.instance_type),
        )

    def _check_slurm_roles(self, groups: Sequence[InstanceGroup]) -> None:
        roles = [NodeRole.parse(g.role).name for g in groups]
        raise_if_problem(
            self,
            "instance_groups",
            slurm_roles_problem([(g.name, r) for g, r in zip(groups, roles, strict=True)]),
        )
        for index, group in enumerate(groups):
            self._check_slurm_group(f"instance_groups[{index}]", group)
        raise_if_problem(self, "instance_groups", slurm_workers_problem(roles))

    def _check_slurm_group(self, where: str, group: InstanceGroup) -> None:
        role = NodeRole.parse(group.role).name
        raise_if_problem(
            self, f"{where}.instance_count", controller_count_problem(role, group.instance_count)
        )
        raise_if_problem(
            self, f"{where}.partition", slurm_partition_problem(role, group.partition, group.name)
        )
        raise_if_problem(
            self, f"{where}.partition", partition_name_problem(group.partition) if group.partition else None
        )

    # ----------------------------------------------------------------------------------------------
    # building

    def _create_security_group(self, vpc: ec2.IVpc) -> ec2.SecurityGroup:
        group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"HyperPod cluster {self.cluster_name}: all traffic between nodes, egress for AWS APIs",
            # All egress, more than the description says: nodes also reach package mirrors and GitHub over NAT
            # (HTTP and HTTPS), the file system's Lustre ports and each other. The description stays: it is
            # create-only, and a new group would replace the cluster's VpcConfig, hence the cluster.
            allow_all_outbound=True,
        )
        # HyperPod requires nodes to reach each other on all ports (Slurm, NCCL, EFA).
        open_between_members(
            group,
            inbound="All traffic between cluster nodes",
            outbound=None,
            reason="HyperPod nodes exchange Slurm, NCCL and EFA traffic on all ports",
        )
        return group

    def _create_controller_security_group(self, vpc: ec2.IVpc) -> ec2.SecurityGroup:
        """No rules of its own: the controller's traffic is the cluster group's; this group names the
        controller, so the accounting database can admit it and not the nodes team users log in to."""
        group = ec2.SecurityGroup(
            self,
            "ControllerSecurityGroup",
            vpc=vpc,
            description=f"HyperPod cluster {self.cluster_name}: the Slurm controller (database client)",
            allow_all_outbound=False,
        )
        return group

    def _provisioning_parameters(
        self, lustre: LustreMount | None, options: LifecycleOptions, scripts_dir: str | Path | None
    ) -> dict[str, Any]:
        """``provisioning_parameters.json``: only the keys HyperPod's reference scripts read."""
        params: dict[str, Any] = {
            "version": "1.0.0",
            "workload_manager": "slurm" if self._orchestrator.is_slurm else "eks",
        }
        if self._orchestrator.is_slurm:
            controller = self.controller_group
            assert controller is not None
            params["controller_group"] = controller.name
            login = next((g for g in self.instance_groups if g.role is NodeRole.LOGIN), None)
            if login is not None:
                params["login_group"] = login.name
            params["worker_groups"] = [
                {"instance_group_name": g.name, "partition_name": g.partition}
                for g in self.instance_groups
                if g.role is NodeRole.WORKER
            ]
        if lustre is not None:
            params["fsx_dns_name"] = lustre.dns_name
            params["fsx_mountname"] = lustre.mount_name
        ours = LIFECYCLE_SETTING_KEYS if scripts_dir is None else frozenset()
        params.update({key: value for key, value in options.extra.items() if key not in ours})
        return params

    def _lifecycle_settings(
        self, lustre: LustreMount | None, options: LifecycleOptions, scripts_dir: str | Path | None
    ) -> dict[str, Any]:
        """``training_clusters.json``: the settings of the shipped scripts and the steps of yours. An
        API-driven cluster's also names its groups (``on_init_complete.sh`` finds its node's role with them)
        and leaves accounting out: HyperPod runs it."""
        settings: dict[str, Any] = {}
        if self.is_api_driven:
            settings["slurm_config"] = str(SlurmConfigMode.API)
            settings.update(self._group_settings())
        settings["enable_enroot_pyxis"] = options.enable_enroot_pyxis
        settings["enable_observability"] = options.enable_observability
        if lustre is not None:
            settings["fsx_mount_dir"] = lustre.mount_dir
        if options.enable_docker:
            settings["enable_docker"] = True
        if options.enable_pam_slurm_adopt:
            settings["enable_pam_slurm_adopt"] = True
        if options.team_logins_on_controller:
            settings["team_logins_on_controller"] = True
        if self.is_api_driven:
            pass  # HyperPod's own slurmdbd: MariaDB on the controller, or AccountingDatabase
        elif self._accounting is HyperPodAccounting.LOCAL:
            settings["accounting"] = {"mode": "local"}
        elif self.accounting_database is not None:
            db = self.accounting_database
            # No "user": the controller takes it from the secret, whose user alternates when it rotates.
            settings["accounting"] = {
                "mode": "external",
                "host": db.endpoint,
                "port": db.port,
                "secret_arn": db.slurmdbd_secret.secret_arn,
            }
        if self.users:
            settings["users"] = [user.settings() for user in self.users]
        if options.extra_steps:
            settings["extra_steps"] = [
                {
                    "name": step.name,
                    "script": f"{USER_STEPS_FOLDER}/{step.name}.sh",
                    "roles": [str(role) for role in step.roles or ()],
                }
                for step in options.extra_steps
            ]
        ours = LIFECYCLE_SETTING_KEYS if scripts_dir is None or not self.is_api_driven else options.extra
        settings.update({key: value for key, value in options.extra.items() if key in ours})
        return settings

    def _group_settings(self) -> dict[str, Any]:
        """The controller, login and worker groups (with their partitions), as the legacy file names them."""
        controller = self.controller_group
        assert controller is not None
        groups: dict[str, Any] = {"controller_group": controller.name}
        if self.login_group is not None:
            groups["login_group"] = self.login_group.name
        groups["worker_groups"] = [
            {"instance_group_name": g.name, "partition_name": g.partition}
            for g in self.instance_groups
            if g.role is NodeRole.WORKER
        ]
        return groups

    def _upload_lifecycle_scripts(
        self, scripts_dir: str | Path | None, options: LifecycleOptions
    ) -> s3deploy.BucketDeployment:
        folder = Path(scripts_dir) if scripts_dir else lifecycle_scripts_path()
        deployment = s3deploy.BucketDeployment(
            self,
            "LifecycleScripts",
            destination_bucket=self.bucket,
            destination_key_prefix=self.lifecycle_prefix,
            sources=[
                s3deploy.Source.asset(
                    str(folder), exclude=["__pycache__", "*.pyc", "README.md", ".complete"]
                ),
                *(
                    []
                    if self.provisioning_parameters is None
                    else [
                        s3deploy.Source.json_data(PROVISIONING_PARAMETERS_FILE, self.provisioning_parameters)
                    ]
                ),
                s3deploy.Source.json_data(LIFECYCLE_SETTINGS_FILE, self.lifecycle_settings),
                *(
                    s3deploy.Source.data(
                        f"{USER_STEPS_FOLDER}/{step.name}.sh", Path(step.script).read_text(encoding="utf-8")
                    )
                    for step in options.extra_steps
                ),
            ],
            prune=True,
            retain_on_delete=True,
            memory_limit=256,
        )
        _acknowledge_bucket_deployment(deployment)
        return deployment

    def _create_execution_role(
        self, subnet: ec2.ISubnet, id_: str = "ExecutionRole", whose: str = "the instances of "
    ) -> iam.Role:
        """The instances' execution role, trusted by ``sagemaker.amazonaws.com`` without an ``aws:SourceAccount``
        or ``aws:SourceArn`` condition, on purpose: neither SageMaker's HyperPod IAM page
        (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites-iam.html, whose trust
        policy for the cluster instances' role has no condition) nor the instance role's managed-policy page
        documents one for cluster instance roles, and a condition on a key the service does not send would leave
        every node without credentials (``tests/constructs/test_hyperpod.py`` holds the trust to exactly this)."""
        stack = cdk.Stack.of(self)
        role = iam.Role(
            self,
            id_,
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"Execution role of {whose}HyperPod cluster {self.cluster_name}",
        )
        # What AWS's AmazonSageMakerClusterInstanceRolePolicy grants, scoped to this cluster (that policy lets
        # every node read every 'sagemaker-*' bucket of the account and write any cluster's logs). See
        # https://docs.aws.amazon.com/sagemaker/latest/dg/security-iam-awsmanpol-AmazonSageMakerClusterInstanceRolePolicy.html
        for statement in cluster_instance_statements(stack, self.cluster_name):
            role.add_to_policy(statement)
        # The lifecycle prefix only: read, not write (the managed policy's S3 statement, narrowed to the
        # objects this cluster downloads; it also works for a bucket not named 'sagemaker-*').
        self.bucket.grant_read(role, f"{self.lifecycle_prefix}*")
        role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeForVpcConfig",
                actions=[
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeVpcs",
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                    "fsx:DescribeFileSystems",
                ],
                resources=["*"],
            )
        )
        eni_arn = stack.format_arn(service="ec2", resource="network-interface", resource_name="*")
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ManageClusterEnis",
                actions=[
                    "ec2:CreateNetworkInterface",
                    "ec2:CreateNetworkInterfacePermission",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DeleteNetworkInterfacePermission",
                    "ec2:DetachNetworkInterface",
                ],
                resources=[
                    eni_arn,
                    stack.format_arn(service="ec2", resource="subnet", resource_name=subnet.subnet_id),
                    *(
                        stack.format_arn(
                            service="ec2", resource="security-group", resource_name=sg.security_group_id
                        )
                        for sg in self._interface_groups()
                    ),
                ],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="TagClusterEnis",
                actions=["ec2:CreateTags"],
                resources=[eni_arn],
                conditions={"StringEquals": {"ec2:CreateAction": "CreateNetworkInterface"}},
            )
        )
        self._acknowledge_role_wildcards(role, eni_arn)
        return role

    def _acknowledge_role_wildcards(self, role: iam.Role, eni_arn: str) -> None:
        stack = cdk.Stack.of(self)
        reasons = {
            wildcard_finding(self, "Resource", cluster_log_group_arn(stack, self.cluster_name)): "HyperPod "
            "names each cluster's log group /aws/sagemaker/Clusters/<name>/<id>, and the id exists only once "
            "the cluster does; the wildcard covers this cluster's name only.",
            wildcard_finding(
                self, "Resource", cluster_log_group_arn(stack, self.cluster_name) + ":log-stream:*"
            ): ("One log stream per node, named by HyperPod as nodes join; this cluster's log group only."),
            wildcard_finding(self, "Resource", "*"): "ec2:Describe* (VPCs, subnets, security groups, DHCP "
            "options, ENIs) and fsx:DescribeFileSystems do not support resource-level permissions; read-only.",
            wildcard_finding(self, "Resource", eni_arn): "HyperPod creates one ENI per node in the cluster "
            "subnet and removes it with the node; their ids are not known before they exist. Creating one is "
            "scoped to the cluster's subnet and security groups (both named in the statement); deleting, "
            "detaching and the interface permissions cover this account's ENIs in this region.",
            **self._lifecycle_read_reasons(),
        }
        reasons[wildcard_finding(self, "Resource", "*")] = (
            "ec2:Describe* (VPCs, subnets, security groups, DHCP options, ENIs), fsx:DescribeFileSystems and "
            "the ssmmessages channel actions (SSM Session Manager) support no resource-level permissions; "
            "cloudwatch:PutMetricData is limited by condition to HyperPod's namespace /aws/sagemaker/Clusters."
        )
        acknowledge_wildcards(_cfn(role.node.find_child("DefaultPolicy")), reasons)
        accept_inline_policy(role.node.find_child("DefaultPolicy"), "the HyperPod instances' execution role")

    def _lifecycle_read_reasons(self) -> dict[str, str]:
        """Why the lifecycle read (``grant_read``'s statement on the prefix) has wildcards."""
        return {
            wildcard_finding(
                self, "Resource", self.bucket.arn_for_objects(f"{self.lifecycle_prefix}*")
            ): "Read-only access to the objects of this cluster's lifecycle prefix, which HyperPod downloads.",
            wildcard_finding(self, "Action", "s3:GetObject*"): "grant_read's object read actions (GetObject, "
            "GetObjectVersion, ...), limited to the lifecycle prefix.",
            wildcard_finding(self, "Action", "s3:GetBucket*"): "grant_read's bucket metadata reads on the "
            "lifecycle bucket only.",
            wildcard_finding(
                self, "Action", "s3:List*"
            ): "Listing the lifecycle bucket, which HyperPod does to download the prefix.",
        }

    def _grant_lifecycle_read(self) -> None:
        """A role you pass reads the lifecycle prefix, and decrypts with the bucket's key, as the role made
        here does (the statements of ``bucket.grant_read(role, prefix)``): nodes download on_create.sh with it."""
        if self._made(self.role):
            return
        statements = [
            iam.PolicyStatement(
                actions=["s3:GetObject*", "s3:GetBucket*", "s3:List*"],
                resources=[self.bucket.bucket_arn, self.bucket.arn_for_objects(f"{self.lifecycle_prefix}*")],
            )
        ]
        key = self.bucket.encryption_key
        if key is not None:
            statements.append(iam.PolicyStatement(actions=["kms:Decrypt"], resources=[key.key_arn]))
        reason = "the lifecycle scripts' read access for the execution role you passed"
        policy = grant_passed_role(self, "LifecycleRead", self.role, statements, reason)
        if policy is not None:
            acknowledge_wildcards(_cfn(policy), self._lifecycle_read_reasons())

    def _grant_accounting_secret(self) -> None:
        """The controller reads slurmdbd's password (its own database user's, never the master user's) with
        its role: GetSecretValue on that one secret."""
        if self.accounting_database is None:
            return
        statement = iam.PolicyStatement(
            actions=["secretsmanager:GetSecretValue"],
            resources=[self.accounting_database.slurmdbd_secret.secret_arn],
        )
        self._add_to_role(self.controller_role, "AccountingSecretRead", statement)

    def _add_to_role(self, role: iam.IRole, id_: str, statement: iam.PolicyStatement) -> None:
        """``statement`` for ``role``: in the role's own policy when this cluster made it, else in a policy of
        this cluster's, attached to the role (a role you pass may belong to another stack, which must not
        come to depend on this one)."""
        if self._made(role):
            role.add_to_principal_policy(statement)
        else:
            self._attached_policy(role, id_, statement)

    def _attached_policy(self, role: iam.IRole, id_: str, statement: iam.PolicyStatement) -> None:
        """``statement`` in a policy of this cluster's, attached to a role it did not make (or, for an
        immutable role, a warning naming it)."""
        reason = "a statement of this cluster's for the execution role you passed"
        grant_passed_role(self, id_, role, [statement], reason)

    def _made(self, role: iam.IRole) -> bool:
        return isinstance(role, iam.Role) and role.node.scope is self

    def _role_of(self, group: InstanceGroup) -> iam.IRole:
        return self.controller_role if group.role is NodeRole.CONTROLLER else self.role

    def _grant_volume_keys(self) -> None:
        """HyperPod attaches the extra volumes with the execution role: it may use their customer keys."""
        for group in self.instance_groups:
            key, role = group.extra_volume_kms_key, self._role_of(group)
            if key is None:
                continue
            if self._made(role):
                key.grant(role, "kms:CreateGrant", "kms:DescribeKey")
            else:
                statement = iam.PolicyStatement(
                    actions=["kms:CreateGrant", "kms:DescribeKey"], resources=[key.key_arn]
                )
                self._attached_policy(role, f"VolumeKeyUse-{group.name}", statement)

    def _create_cluster(self, subnet: ec2.ISubnet, node_recovery: NodeRecovery) -> sagemaker.CfnCluster:
        cluster = sagemaker.CfnCluster(
            self,
            "Resource",
            cluster_name=self.cluster_name,
            instance_groups=[self._instance_group_property(g, subnet) for g in self.instance_groups],
            node_recovery=node_recovery.value,
            node_provisioning_mode=None
            if self.node_provisioning_mode is None
            else self.node_provisioning_mode.value,
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=[sg.security_group_id for sg in self.security_groups],
                subnets=[subnet.subnet_id],
            ),
            orchestrator=self._orchestrator_property(),
        )
        # Nodes download the scripts at creation and need the role's policies: wait for both (IAM is
        # eventually consistent, and a missing script fails the whole cluster).
        cluster.node.add_dependency(self.deployment)
        cluster.node.add_dependency(self.role)
        if self.controller_role is not self.role:
            cluster.node.add_dependency(self.controller_role)
        if self.accounting_database is not None:
            # slurmdbd connects as the controller starts, as its own user: wait for the writer instance (the
            # DB cluster exists minutes before it) and that user. In another stack this is a stack dependency.
            cluster.node.add_dependency(self.accounting_database.ready)
        return cluster

    def _orchestrator_property(self) -> sagemaker.CfnCluster.OrchestratorProperty | None:
        """EKS; API-driven Slurm (its strategy, or HyperPod's accounting database under continuous
        provisioning, or nothing: ``Slurm: {}``); legacy Slurm sends none."""
        if not self._orchestrator.is_slurm:
            return sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(
                    cluster_arn=self._orchestrator.eks_cluster_arn or ""
                )
            )
        if not self.is_api_driven:
            return None
        return sagemaker.CfnCluster.OrchestratorProperty(
            slurm=sagemaker.CfnCluster.ClusterOrchestratorSlurmConfigProperty(
                slurm_config_strategy=None
                if self.slurm_config_strategy is None
                else self.slurm_config_strategy.value,
                accounting_database=self._accounting_database_property(),
            )
        )

    def _accounting_database_property(self) -> sagemaker.CfnCluster.ClusterAccountingDatabaseProperty | None:
        """HyperPod's ``AccountingDatabase`` (continuous provisioning): our Aurora database, its first
        database (the one slurmdbd's user has ``ALL`` on; the API's own default name differs per page, so it
        is sent) and slurmdbd's own rotating secret (``username`` / ``password`` JSON), never the master's."""
        database = self.accounting_database
        if database is None or not self.is_api_driven:
            return None
        return sagemaker.CfnCluster.ClusterAccountingDatabaseProperty(
            endpoint=database.endpoint,
            name=database.databases[0],
            port=database.port,
            secret_arn=database.slurmdbd_secret.secret_arn,
        )

    def _slurm_config_property(
        self, group: InstanceGroup
    ) -> sagemaker.CfnCluster.ClusterSlurmConfigProperty | None:
        """``SlurmConfig`` of an API-driven cluster's group: Controller, Login, or Compute in its partition."""
        if not self.is_api_driven:
            return None
        if group.role is NodeRole.WORKER:
            assert group.partition is not None
            return sagemaker.CfnCluster.ClusterSlurmConfigProperty(
                node_type=SLURM_NODE_TYPES[NodeRole.WORKER], partition_names=[group.partition]
            )
        return sagemaker.CfnCluster.ClusterSlurmConfigProperty(
            node_type=SLURM_NODE_TYPES[NodeRole(group.role)]
        )

    def _interface_groups(self) -> list[ec2.ISecurityGroup]:
        """Every group a node's interface may carry: the cluster's, and the controller's own."""
        controller = [] if self.controller_security_group is None else [self.controller_security_group]
        return [*self.security_groups, *controller]

    def _override_vpc_config(
        self, group: InstanceGroup, subnet: ec2.ISubnet
    ) -> sagemaker.CfnCluster.VpcConfigProperty | None:
        """The controller's interface: the cluster's subnet and groups plus the controller's own (HyperPod's
        ``OverrideVpcConfig`` replaces the cluster's ``VpcConfig`` for one instance group)."""
        if group.role is not NodeRole.CONTROLLER or self.controller_security_group is None:
            return None
        return sagemaker.CfnCluster.VpcConfigProperty(
            security_group_ids=[sg.security_group_id for sg in self._interface_groups()],
            subnets=[subnet.subnet_id],
        )

    def _instance_group_property(
        self, group: InstanceGroup, subnet: ec2.ISubnet
    ) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        checks = group.deep_health_checks
        if checks is None:
            checks = tuple(DeepHealthCheck) if is_accelerated(group.instance_type) else ()
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=group.name,
            instance_type=group.instance_type,
            instance_count=group.instance_count,
            execution_role=self._role_of(group).role_arn,
            threads_per_core=group.threads_per_core,
            life_cycle_config=sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
                source_s3_uri=self.source_s3_uri,
                on_create=None if self.is_api_driven else ON_CREATE_SCRIPT,
                on_init_complete=ON_INIT_COMPLETE_SCRIPT if self.is_api_driven else None,
            ),
            instance_storage_configs=_storage_configs(group, self._lustre if self.is_api_driven else None),
            slurm_config=self._slurm_config_property(group),
            image_id=group.image_id,
            on_start_deep_health_checks=[str(c) for c in checks] or None,
            training_plan_arn=None if group.capacity is None else group.capacity.training_plan_arn,
            override_vpc_config=self._override_vpc_config(group, subnet),
            **self._orchestrator_group_settings(group),
        )

    def _orchestrator_group_settings(self, group: InstanceGroup) -> dict[str, Any]:
        """What the orchestrator adds to ``group``'s ``ClusterInstanceGroupProperty``: nothing under Slurm;
        :class:`~training_clusters.constructs.hyperpod_eks.cluster.HyperPodEksCluster` adds each group's
        ``KubernetesConfig`` and ``NetworkInterface``."""
        return {}


def _storage_configs(
    group: InstanceGroup, lustre: LustreMount | None = None
) -> list[sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty] | None:
    """``InstanceStorageConfigs``: the extra volume (``/opt/sagemaker``), the root volume's size and, for an
    API-driven cluster, the FSx for Lustre file system HyperPod mounts (``lustre``)."""
    volumes = []
    if group.extra_volume_gib:
        volumes.append(
            sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                volume_size_in_gb=group.extra_volume_gib,
                volume_kms_key_id=None
                if group.extra_volume_kms_key is None
                else group.extra_volume_kms_key.key_arn,
            )
        )
    if group.root_volume_gib:
        volumes.append(
            sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                root_volume=True, volume_size_in_gb=group.root_volume_gib
            )
        )
    configs = [
        sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(ebs_volume_config=v) for v in volumes
    ]
    if lustre is not None:
        configs.append(
            sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                fsx_lustre_config=sagemaker.CfnCluster.ClusterFsxLustreConfigProperty(
                    dns_name=lustre.dns_name, mount_name=lustre.mount_name, mount_path=lustre.mount_dir
                )
            )
        )
    return configs or None


def lifecycle_scripts_path() -> Path:
    """The shipped lifecycle scripts as a node gets them: ``node_scripts/hyperpod/`` with the scripts both services
    run (``node_scripts/shared/``) in its ``shared/`` folder (:func:`~training_clusters.node_scripts.lifecycle_bundle`)."""
    return lifecycle_bundle()


#: CloudWatch metric namespace HyperPod's agent writes to (the managed policy's condition).
CLUSTER_METRICS_NAMESPACE = "/aws/sagemaker/Clusters"


def cluster_log_group_arn(stack: cdk.Stack, cluster_name: str) -> str:
    """ARN pattern of the log groups of HyperPod cluster ``cluster_name``: ``/aws/sagemaker/Clusters/<name>/*``."""
    arn: str = stack.format_arn(
        service="logs",
        resource="log-group",
        resource_name=f"/aws/sagemaker/Clusters/{cluster_name}/*",
        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
    )
    return arn


def cluster_instance_statements(stack: cdk.Stack, cluster_name: str) -> list[iam.PolicyStatement]:
    """The permissions of AWS's ``AmazonSageMakerClusterInstanceRolePolicy``, scoped to one cluster.

    Logs go to the cluster's own log groups, metrics to HyperPod's namespace only, and SSM Session Manager
    channels stay open (they take no resource). The managed policy's S3 read of every ``sagemaker-*`` bucket
    is left out: :class:`HyperPodCluster` grants its lifecycle prefix instead.
    """
    log_group = cluster_log_group_arn(stack, cluster_name)
    return [
        iam.PolicyStatement(
            sid="ClusterLogStreams",
            actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            resources=[f"{log_group}:log-stream:*"],
        ),
        iam.PolicyStatement(sid="ClusterLogGroup", actions=["logs:CreateLogGroup"], resources=[log_group]),
        iam.PolicyStatement(
            sid="ClusterMetrics",
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": CLUSTER_METRICS_NAMESPACE}},
        ),
        iam.PolicyStatement(sid="SessionManagerChannels", actions=list(CHANNEL_ACTIONS), resources=["*"]),
    ]


def ssm_target_hint(cluster_id: str, group: str) -> str:
    """The SSM target of a HyperPod node: ``sagemaker-cluster:<cluster-id>_<group>-<instance-id>``."""
    return f"sagemaker-cluster:{cluster_id}_{group}-<instance-id>"


def _cfn(construct: IConstruct) -> Any:
    """The L1 resource behind an L2 construct."""
    child = construct.node.default_child
    assert child is not None, construct.node.path
    return child


def _acknowledge_bucket_deployment(deployment: s3deploy.BucketDeployment) -> None:
    """CDK's BucketDeployment runs an aws-cdk-lib Lambda; acknowledge its findings on its resources."""
    handler = next(
        (
            c
            for c in cdk.Stack.of(deployment).node.children
            if c.node.id.startswith("Custom::CDKBucketDeployment")
        ),
        None,
    )
    if handler is None:
        return
    acknowledge_cdk_made(
        handler,
        "CDK's BucketDeployment handler (aws-cdk-lib's design): it copies the staged lifecycle-script asset "
        "from the CDK assets bucket into the lifecycle prefix and prunes stale files there",
        managed_policy_reasons={
            "AWSLambdaBasicExecutionRole": "CDK's BucketDeployment handler writes its own logs"
        },
    )
