"""ParallelCluster: a Slurm cluster from typed props, deployed through AWS ParallelCluster's own provider.

The construct builds the ParallelCluster 3.16 cluster configuration (the document ``pcluster create-cluster``
reads) and deploys it as a ``Custom::PclusterCluster`` served by ParallelCluster's published CloudFormation
provider, added as a nested stack for a pinned version. The same configuration can be exported as
``cluster-config.yaml`` (:meth:`ParallelCluster.render_config`) for users who prefer the ``pcluster`` CLI.

Closed by default: the head node sits in a private subnet, SSH is open only to the VPC CIDR (never to
0.0.0.0/0, ParallelCluster's default), there is no key pair, access is through SSM Session Manager, IMDSv2
is enforced, and compute nodes never get a public IP.

Node roles. ParallelCluster makes the role of the head node, of each queue and of each login pool itself; we
add only ``AdditionalIamPolicies``. The head node and every login pool get
:class:`~training_clusters.constructs.common.session_manager.SessionManagerPolicy` (Session Manager's own actions,
no parameter reads), not ``AmazonSSMManagedInstanceCore``, whose ``ssm:GetParameter(s)`` on ``*`` any user
with a shell on a login node could call; compute nodes get no SSM access from us. What ParallelCluster 3.16.1
attaches on its own (``cli/src/pcluster/templates/cdk_builder_utils.py`` of
https://github.com/aws/aws-parallelcluster at v3.16.1, as shipped in the PyPI package): an inline policy per
role (``NodeIamResourcesBase._add_pcluster_policies_to_role``) whose only SSM action is ``ssm:GetParameter``
on the directory service's password when that is an SSM parameter, scoped to its ARN
(``HeadNodeIamResources._build_policy``, line 871), and, because we turn CloudWatch logs on,
``CloudWatchAgentServerPolicy`` (``_add_node_role``, line 495), which grants ``ssm:GetParameter`` on
``arn:aws:ssm:*:*:parameter/AmazonCloudWatch-*`` only
(https://docs.aws.amazon.com/aws-managed-policy/latest/reference/CloudWatchAgentServerPolicy.html): that is
ParallelCluster's to attach, and beyond this construct's reach. ParallelCluster attaches
``AmazonSSMManagedInstanceCore`` itself only to the instance role of ``pcluster build-image``
(``templates/imagebuilder_stack.py``, line 556), which this construct does not use.

Our managed policies live under the IAM path ``/parallelcluster/``: the role ParallelCluster's provider makes
for its Lambda may attach to node roles only policies of this account named ``parallelcluster*`` or under that
path, and a few AWS-managed ones (``DefaultParallelClusterIamAdminPolicy``, statement ``IamPolicy``, in
``cloudformation/policies/parallelcluster-policies.yaml`` of https://github.com/aws/aws-parallelcluster).

Updating a deployed cluster: ParallelCluster changes a login pool's ``AdditionalIamPolicies`` only while no
login node of that pool runs (update policy ``LOGIN_NODES_POOL_STOP``, ``schemas/cluster_schema.py``), and
checks it against the nodes running when the update starts. A cluster with login nodes deployed before
``SessionManagerPolicy`` replaced ``AmazonSSMManagedInstanceCore`` therefore takes three deploys: the pools'
``count=0`` with the configuration they run now, then this change, then the count back. The head node's
policies change in place (update policy ``SUPPORTED``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct, IValidation

from training_clusters.catalog import InstanceType
from training_clusters.constructs.common.lustre import SharedLustre
from training_clusters.constructs.common.placement import TrainingPlacementGroup
from training_clusters.constructs.common.session_manager import SessionManagerPolicy
from training_clusters.constructs.parallelcluster.rendering import (
    Placeholder,
    annotated_yaml,
    app_exports,
    config_file_header,
    placeholder_notes,
    resource_types,
    substitute_noting_placeholders,
    template_values,
)
from training_clusters.constructs.private.boundary import applied_boundary
from training_clusters.constructs.private.security_groups import SameEnvironmentConnections, claim_efa_groups
from training_clusters.constructs.private.tags import lazy, stack_and_aspect_tags, tag_list
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
from training_clusters.gates.compliance import acknowledge
from training_clusters.model.capacity import Capacity
from training_clusters.model.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import (
    CapacityKind,
    DeletionPolicy,
    LustreDeploymentType,
    OperatingSystem,
    QueuePlacement,
    QueueUpdateStrategy,
)
from training_clusters.node_scripts.parallelcluster.topology import hostlist
from training_clusters.rules.instance_types import instance_type_name_problem
from training_clusters.rules.lustre import lustre_capacity_problem, lustre_throughput_problem
from training_clusters.rules.parallelcluster import (
    MAX_COMPUTE_RESOURCES_PER_QUEUE,
    MAX_QUEUES,
    PCLUSTER_VERSION,
    action_key_problem,
    ami_problem,
    cluster_compute_resources_problem,
    cluster_name_problem,
    cluster_tags_problem,
    compute_resource_capacity_problem,
    count_problem,
    custom_slurm_setting_problem,
    duplicates_problem,
    efa_enabled_problem,
    efa_placement_problem,
    gdr_problem,
    gpu_health_check_problem,
    ldap_tls_req_cert_problem,
    login_count_problem,
    login_gracetime_problem,
    max_count_problem,
    min_count_problem,
    mount_dir_problem,
    os_problem,
    pcluster_log_retention_problem,
    placed_by_topology,
    placement_may_be_left_out,
    queue_capacity_problem,
    scaledown_idletime_problem,
    shared_placement_problem,
    slurm_name_problem,
    ssh_allowed_ips_problem,
    ssh_key_problem,
    stack_name_problem,
    topology_plugin_problem,
)
from training_clusters.rules.versions import PARALLELCLUSTER_CVE_2026, parallelcluster_cve_advice

#: ParallelCluster's published provider template (a SAM template: deploying it needs CAPABILITY_AUTO_EXPAND,
#: which ``cdk deploy`` grants).
PROVIDER_TEMPLATE_URL = (
    "https://${AWS::Region}-aws-parallelcluster.s3.${AWS::Region}.${AWS::URLSuffix}"
    f"/parallelcluster/{PCLUSTER_VERSION}/templates/custom_resource/cluster.yaml"
)
CUSTOM_RESOURCE_TYPE = "Custom::PclusterCluster"
#: Where our managed policies for the nodes live: the IAM path ParallelCluster's provider may attach from
#: (see the module docstring).
PCLUSTER_POLICY_PATH = "/parallelcluster/"


@dataclass(frozen=True)
class CustomActionScript:
    """A script a node runs as a ParallelCluster custom action; the nodes that run it get read access to it.

    Used for the cluster-wide ``on_node_configured`` and the per-node ``on_node_start`` /
    ``on_node_configured`` sequences of :class:`HeadNode`, :class:`SlurmQueue` and :class:`LoginNodePool`
    (ParallelCluster runs a sequence's scripts in order, stopping at the first that fails:
    https://docs.aws.amazon.com/parallelcluster/latest/ug/custom-bootstrap-actions-v3.html).

    :param bucket: The bucket holding the script.
    :param key: The script's object key, e.g. ``scripts/on-node-configured.sh``.
    :param args: Arguments passed to the script. Default: none.
    """

    bucket: s3.IBucket
    key: str
    args: Sequence[str] = ()


#: Where the head node's step writes Slurm's topology file: beside slurm.conf in ParallelCluster's Slurm folder
#: (Slurm reads topology.conf from slurm.conf's directory, https://slurm.schedmd.com/topology.conf.html).
TOPOLOGY_CONF = "/opt/slurm/etc/topology.conf"


@dataclass(frozen=True)
class TopologyStep:
    """The head node's step that writes Slurm's ``topology.conf`` from EC2 instance topology and keeps it current:
    ``node_scripts/parallelcluster/topology.sh`` with :mod:`training_clusters.node_scripts.parallelcluster.topology` (``topology.py``) beside it.

    :param bucket: The bucket holding both.
    :param script_key: The action's key, e.g. ``parallelcluster-actions/topology.sh``.
    :param module_key: ``topology.py``'s key, e.g. ``parallelcluster-actions/topology.py``.
    """

    bucket: s3.IBucket
    script_key: str
    module_key: str


@dataclass(frozen=True)
class HeadNode:
    """The Slurm controller (and, without login nodes, the login node).

    :param instance_type: Default: ``t3.medium``.
    :param key_name: EC2 key pair for SSH. Default: none (reach the node with SSM Session Manager).
    :param ssh_allowed_ips: Where SSH may come from: an IPv4 CIDR or a prefix list id; needs ``key_name``.
        Default: the VPC CIDR (so ParallelCluster's own default, 0.0.0.0/0, never applies).
    :param subnet: A private subnet. Default: the cluster's ``subnet``.
    :param custom_ami: The head node's own AMI (``HeadNode.Image.CustomAmi``). Default: the cluster's image.
    :param on_node_start: Scripts run in order before the node is configured (``OnNodeStart``). Default: none.
    :param on_node_configured: Scripts run in order once the node is configured (``OnNodeConfigured``), after
        the cluster-wide ``on_node_configured``. Default: none.
    """

    instance_type: str = "t3.medium"
    key_name: str | None = None
    ssh_allowed_ips: str | None = None
    subnet: ec2.ISubnet | None = None
    custom_ami: str | None = None
    on_node_start: Sequence[CustomActionScript] = ()
    on_node_configured: Sequence[CustomActionScript] = ()


@dataclass(frozen=True)
class ComputeResource:
    """One instance type of a queue and how many of it Slurm may run.

    :param name: ``^[a-z][a-z0-9-]*$``, at most 25 characters, unique in its queue.
    :param instance_type: An EC2 type from :mod:`training_clusters.catalog`.
    :param min_count: Nodes always running. Default: 0 (everything scales from zero).
    :param max_count: Nodes at most. Default: 10 (ParallelCluster's default).
    :param efa: Elastic Fabric Adapter. Default: enabled where the catalogue says the type supports it.
    :param gdr_support: GPUDirect RDMA over EFA. Default: enabled where EFA is and the type has it
        (ParallelCluster enables it by itself where supported; the flag documents and checks the intent).
    :param disable_simultaneous_multithreading: One thread per core. Default: False.
    :param capacity: This compute resource's own reservation or Capacity Block
        (``CapacityReservationTarget`` on the compute resource); a Capacity Block makes the whole queue
        CAPACITY_BLOCK and needs ``min_count == max_count`` (its nodes are static). Default: the queue's.
    :param gpu_health_check: ParallelCluster's GPU health check (``HealthChecks.Gpu``: DCGM diagnostics
        before each job, the node drained when they fail). Default: on for NVIDIA GPU types, off otherwise.
    """

    name: str
    instance_type: str
    min_count: int = 0
    max_count: int = 10
    efa: bool | None = None
    gdr_support: bool | None = None
    disable_simultaneous_multithreading: bool = False
    capacity: Capacity | None = None
    gpu_health_check: bool | None = None


@dataclass(frozen=True)
class SlurmQueue:
    """A Slurm partition.

    :param name: ``^[a-z][a-z0-9-]*$``, at most 25 characters, unique in the cluster.
    :param compute_resources: 1 to 50 compute resources.
    :param capacity: Where the queue's instances come from: ``Capacity.on_demand()``, ``.spot()``,
        ``.reservation(id=... | resource_group_arn=..., targeted=...)`` (``CapacityType: ONDEMAND`` with a
        ``CapacityReservationTarget`` unless open) or ``.capacity_block(id)`` (``CAPACITY_BLOCK``); a
        training plan is refused (HyperPod only). Default: On-Demand.
    :param placement: Default: NONE when the capacity asks to leave the placement group out (a Capacity
        Block, or a reservation not made in the cluster's placement group: see
        :meth:`Capacity.keeps_placement_group`), else SHARED when a compute resource uses EFA and the cluster
        has a ``placement_group``, MANAGED when one uses EFA and it has none, else NONE. A compute resource
        with such a capacity of its own gets its placement group turned off.
    :param custom_ami: The queue's own AMI (``Image.CustomAmi`` of the queue). Default: the cluster's image.
    :param job_exclusive_allocation: Give each job whole nodes of this partition (Slurm ``OverSubscribe=
        EXCLUSIVE``, ParallelCluster's ``JobExclusiveAllocation``). Default: ParallelCluster's (shared nodes).
    :param on_node_start: Scripts run in order before each node of the queue is configured. Default: none.
    :param on_node_configured: Scripts run in order once each node is configured, after the cluster-wide
        ``on_node_configured``. Default: none.
    """

    name: str
    compute_resources: Sequence[ComputeResource]
    placement: QueuePlacement | str | None = None
    capacity: Capacity | None = None
    custom_ami: str | None = None
    job_exclusive_allocation: bool | None = None
    on_node_start: Sequence[CustomActionScript] = ()
    on_node_configured: Sequence[CustomActionScript] = ()


@dataclass(frozen=True)
class SlurmSettings:
    """Cluster-wide Slurm settings.

    Slurm requeues batch jobs whose node fails (its ``JobRequeue=1`` default, which ParallelCluster keeps),
    and ParallelCluster replaces the failed node.

    :param queue_update_strategy: Default: DRAIN (running jobs finish before nodes are replaced).
    :param scaledown_idletime_minutes: Idle minutes before a dynamic node is terminated. Default: 10.
    :param database: Slurm accounting in this database (``SlurmSettings.Database``: ``Uri`` host:port,
        ``UserName`` slurmdbd's own user, ``PasswordSecretArn`` its plain-text password secret; that user has
        ``ALL`` on the database's ``databases`` only, so name ParallelCluster's database there:
        :func:`training_clusters.rules.parallelcluster.accounting_database_name`). ParallelCluster itself grants the
        head node ``secretsmanager:GetSecretValue`` on that secret and runs slurmdbd there; let the head node
        reach the database: ``database.connections.allow_default_port_from(cluster.head_node_connections)``.
        The cluster is created once the database's writer instance and slurmdbd's user exist (a stack
        dependency when the database lives in another stack). Default: no accounting.
    :param custom_slurm_settings: Extra ``slurm.conf`` parameters (``CustomSlurmSettings``), each a mapping
        such as ``{"PriorityType": "priority/multifactor"}``; parameters ParallelCluster manages are refused.
        Default: none.
    """

    queue_update_strategy: QueueUpdateStrategy | str = QueueUpdateStrategy.DRAIN
    scaledown_idletime_minutes: int = 10
    database: SlurmAccountingDatabase | None = None
    custom_slurm_settings: Sequence[Mapping[str, str]] = ()


@dataclass(frozen=True)
class LoginNodePool:
    """A pool of login nodes (``LoginNodes.Pools``): where users log in, build and submit; no slurmctld.

    :param name: ``^[a-z][a-z0-9-]*$``, at most 25 characters, unique in the cluster.
    :param instance_type: Default: ``m5.xlarge``.
    :param count: Login nodes kept running. Default: 1.
    :param key_name: EC2 key pair for SSH. Default: none (SSM Session Manager).
    :param ssh_allowed_ips: Where SSH may come from. Default: the VPC CIDR.
    :param custom_ami: The pool's own AMI. Default: the cluster's image.
    :param gracetime_period_minutes: Minutes logged-in users get to finish before a node stops
        (3 to 120). Default: ParallelCluster's (10).
    :param on_node_start: Scripts run in order before each login node is configured. Default: none.
    :param on_node_configured: Scripts run in order once it is configured, after the cluster-wide
        ``on_node_configured``. Default: none.
    """

    name: str
    instance_type: str = "m5.xlarge"
    count: int = 1
    key_name: str | None = None
    ssh_allowed_ips: str | None = None
    custom_ami: str | None = None
    gracetime_period_minutes: int | None = None
    on_node_start: Sequence[CustomActionScript] = ()
    on_node_configured: Sequence[CustomActionScript] = ()


@dataclass(frozen=True)
class DirectoryService:
    """Users from Active Directory (or another LDAP directory) through SSSD: an alternative to local users.

    ParallelCluster's ``DirectoryService`` section
    (https://docs.aws.amazon.com/parallelcluster/latest/ug/DirectoryService-v3.html); it grants the head node
    read access to ``password_secret`` itself.

    :param domain_name: The domain, as a DNS name (``corp.example.com``) or LDAP DN (``DC=corp,DC=example``).
    :param domain_addr: Its LDAP endpoint(s), e.g. ``ldaps://corp.example.com`` (comma-separated for several).
    :param password_secret: Secret holding the read-only user's password (plain text).
    :param domain_read_only_user: The read-only user's DN, e.g. ``cn=ReadOnly,ou=Users,dc=corp,dc=example``.
    :param ldap_tls_ca_cert: Path of the CA bundle on the nodes, for ldaps. Default: none.
    :param ldap_tls_req_cert: never, allow, try, demand or hard. Default: ParallelCluster's (hard).
    :param ldap_access_filter: Only directory users matching this LDAP filter may log in. Default: all.
    :param generate_ssh_keys_for_users: Generate an SSH key for each user at first login. Default: True.
    :param additional_sssd_configs: More ``sssd.conf`` domain settings. Default: none.
    """

    domain_name: str
    domain_addr: str
    password_secret: secretsmanager.ISecret
    domain_read_only_user: str
    ldap_tls_ca_cert: str | None = None
    ldap_tls_req_cert: str | None = None
    ldap_access_filter: str | None = None
    generate_ssh_keys_for_users: bool = True
    additional_sssd_configs: Mapping[str, str] | None = None


@dataclass(frozen=True)
class ManagedLustre:
    """An FSx for Lustre file system that ParallelCluster creates with the cluster.

    :param deployment_type: Default: SCRATCH_2.
    :param storage_capacity_gib: 1200, or a multiple of 2400. Default: 1200.
    :param per_unit_storage_throughput_mbps: 125/250/500/1000, PERSISTENT_2 only (and required there).
    :param deletion_policy: What happens to the file system when the cluster is deleted. Default: RETAIN.
    """

    deployment_type: LustreDeploymentType | str = LustreDeploymentType.SCRATCH_2
    storage_capacity_gib: int = 1200
    per_unit_storage_throughput_mbps: int | None = None
    deletion_policy: DeletionPolicy | str = DeletionPolicy.RETAIN


@checked_props
@jsii.implements(ec2.IConnectable, cdk.ITaggable)
class ParallelCluster(Construct):
    """An AWS ParallelCluster Slurm cluster on our network, placement group and shared file system.

    Example::

        cluster = ParallelCluster(self, "Cluster", cluster_name="training", vpc=network.vpc,
                                  subnet=network.placement_subnet(), placement_group=placement,
                                  efa_security_group=network.efa_security_group, file_system=fsx,
                                  queues=[SlurmQueue(name="compute", compute_resources=[
                                      ComputeResource(name="c5n", instance_type="c5n.9xlarge", max_count=2)])])
        fsx.allow_clients_from(cluster)   # Lustre ports both ways: ParallelCluster checks both directions

    Attributes: ``configuration`` (the cluster configuration, CloudFormation tokens included),
    ``cluster_name``, ``provider`` (the nested provider stack), ``resource`` (the custom resource),
    ``head_node_instance_id``, ``validation_messages``, ``security_group`` and ``connections`` (a group every
    node carries, for storage clients), ``session_manager_policy`` (SSM Session Manager for the head node and
    the login pools, no parameter reads), ``login_nodes_policy`` (the login pools' read access to their
    scripts, or None), ``tags`` (the tag manager ``cdk.Tags.of`` fills: see below).

    Tags. ParallelCluster tags what it creates (instances, volumes, its stack) with the configuration's
    ``Tags`` only: CloudFormation's stack tags and tag aspects never reach them. ``Tags`` is therefore
    rendered at synth from this stack's tags, the tags ``cdk.Tags.of(...)`` applies to this construct or any
    scope above it, and the ``tags`` prop (the aspects' value wins on the same key, as on CDK's own
    constructs). ParallelCluster's rules apply to the result: at most 40 tags, none starting with
    ``parallelcluster:``; synth fails naming the offending tag otherwise.

    Permissions boundary. ParallelCluster makes the head node, queue and login pool roles (and the roles of its
    own Lambda functions) in the stack it creates, where CDK's aspects cannot reach: the boundary that
    ``iam.PermissionsBoundary.of(scope).apply(policy)`` or a stack's or stage's ``permissions_boundary`` puts
    on this construct's scopes is carried into the configuration's ``Iam.PermissionsBoundary``, which
    ParallelCluster applies to every role of the cluster stack. The provider's own Lambda role
    (``PclusterLambdaRole`` of ParallelCluster's ``custom_resource/cluster.yaml``) takes no boundary: with a
    boundary in force, synth is refused unless ``provider_lambda_role`` is given (bounded by you).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        queues: Sequence[SlurmQueue],
        head_node: HeadNode | None = None,
        os: OperatingSystem | str = OperatingSystem.ALINUX2023,
        placement_group: TrainingPlacementGroup | None = None,
        efa_security_group: ec2.ISecurityGroup | None = None,
        file_system: SharedLustre | None = None,
        managed_file_system: ManagedLustre | None = None,
        mount_dir: str = "/shared",
        slurm_settings: SlurmSettings | None = None,
        on_node_configured: CustomActionScript | Sequence[CustomActionScript] | None = None,
        custom_ami: str | None = None,
        login_nodes: Sequence[LoginNodePool] = (),
        directory_service: DirectoryService | None = None,
        log_retention_days: int = 180,
        tags: Mapping[str, str] | None = None,
        deletion_policy: DeletionPolicy | str = DeletionPolicy.DELETE,
        provider_lambda_role: iam.IRole | None = None,
        provider_additional_policies: Sequence[iam.IManagedPolicy] = (),
        topology: TopologyStep | None = None,
    ) -> None:
        """Build the configuration, the provider and the cluster.

        The provider is ParallelCluster's own nested stack. Unless given ``provider_lambda_role``, it makes
        the role of its Lambda itself, with what ``pcluster`` needs to create any cluster: EC2 (run and
        terminate instances, security groups, launch templates), CloudFormation, IAM roles and instance
        profiles named ``parallelcluster-*``, DynamoDB, FSx, Route 53, CloudWatch and more, much of it on
        ``*`` (see https://docs.aws.amazon.com/parallelcluster/latest/ug/iam-roles-in-parallelcluster-v3.html).
        cdk-nag never sees it (it lives in the nested template). To bound it, pass your own role, for
        example one made with ParallelCluster's policies template and a permissions boundary
        (``PermissionsBoundaryPolicy`` of ``parallelcluster-policies.yaml``).

        :param cluster_name: ParallelCluster's name (also the name of the stack it creates): a letter, then
            letters, digits and hyphens, at most 60; different from this stack's name. Immutable.
        :param vpc: The VPC of the cluster; its CIDR is where SSH may come from by default.
        :param subnet: The one private subnet of the compute nodes (a cluster placement group's AZ).
        :param queues: 1 to 50 Slurm queues, at most 50 compute resources in all.
        :param head_node: Default: ``HeadNode()`` (t3.medium, no key pair, SSH only from the VPC CIDR).
        :param os: Default: ALINUX2023.
        :param placement_group: The group SHARED queues use. Default: none (EFA queues get a MANAGED one).
        :param efa_security_group: A group allowing all traffic between its members, added to every queue;
            this cluster's own (``network.add_efa_security_group(id)`` makes one): a group another cluster
            already uses is refused, as it would open every port between the two clusters' nodes.
            Default: none (ParallelCluster's own compute group already allows all traffic between nodes).
        :param file_system: Our :class:`SharedLustre`, mounted on every node at ``mount_dir``. Default: none.
            Mutually exclusive with ``managed_file_system``.
        :param managed_file_system: An FSx for Lustre that ParallelCluster creates. Default: none.
        :param mount_dir: Where the shared file system is mounted. Default: ``/shared``.
        :param slurm_settings: Default: ``SlurmSettings()`` (DRAIN, 10 idle minutes).
        :param on_node_configured: A script, or scripts in order, every node (head, compute and login) runs once
            configured, before the node's own ``on_node_configured``. Default: none.
        :param custom_ami: The cluster's AMI (``Image.CustomAmi``), e.g. one built with ``pcluster
            build-image`` from ParallelCluster's own AMI for ``os``. Default: ParallelCluster's AMI for ``os``.
        :param login_nodes: Login node pools (``LoginNodes.Pools``), in the cluster's subnet with the
            head node's SSH rules; they mount the shared file system and run the cluster-wide actions. Default:
            none (users log in on the head node).
        :param directory_service: Users from Active Directory / LDAP (``DirectoryService``), instead of or
            beside local users created by a custom action. Default: none.
        :param log_retention_days: CloudWatch retention of the cluster's logs. Default: 180
            (ParallelCluster's default).
        :param tags: Tags ParallelCluster puts on everything it creates. Default: none.
        :param deletion_policy: What happens to the cluster when it leaves the stack. Default: DELETE
            (ParallelCluster's own default): ``cdk destroy`` deletes the cluster first, then the network it
            ran in; a ``file_system`` is separate and keeps its own removal policy (retained by default).
            RETAIN keeps the cluster (head node and all) running after the stack is gone, on this stack's
            subnet, security groups and placement group: its own security group is retained with it, but
            ``cdk destroy`` stops on the network resources it still uses unless they are retained too (a
            warning says so); delete a retained cluster with ``pcluster delete-cluster``. See
            https://docs.aws.amazon.com/parallelcluster/latest/ug/cfn-cluster-resource.html

        :param provider_lambda_role: The role of the provider's Lambda (``CustomLambdaRole``). Default: the
            provider makes its own (see above).
        :param provider_additional_policies: More managed policies for the role the provider makes
            (``AdditionalIamPolicies``), e.g. to reach a bucket of yours. Not with ``provider_lambda_role``.
            Default: none.
        :param topology: Place multi-node jobs by EC2 network topology: Slurm's ``topology/tree``
            (``CustomSlurmSettings``) over a ``topology.conf`` the head node writes with this step, on the queues
            whose every instance type EC2 instance topology describes (``topology_queues``; a queue that mixes in
            another type stays flat, its nodes under one leaf). The step runs at the head node's ``OnNodeStart``
            (every node unplaced, before slurmctld starts) and ``OnNodeConfigured`` (a systemd timer that
            refreshes the file every 30 s, as static and dynamic nodes come and go, and reconfigures slurmctld
            when it changed); the head node gets ``ec2:DescribeInstanceTopology`` (no resource-level permission
            exists: ``*`` in this region only, ``topology_policy``; ``ec2:DescribeInstances``, which the refresh
            also calls, is in the head node policy ParallelCluster makes, ``HeadNodeIamResources``). With no such
            queue it changes nothing (a warning says so). Default: none (no topology plugin).

        Replacement: ``cluster_name`` is immutable (ParallelCluster creates a stack of that name); changing
        it creates a new cluster and deletes the old one. ``tests/test_replacement.py`` pins it.
        """
        super().__init__(scope, id)
        advise(self, PARALLELCLUSTER_CVE_2026, parallelcluster_cve_advice(PCLUSTER_VERSION))
        if efa_security_group is not None:
            claim_efa_groups([efa_security_group], cluster=self, owner=self, prop="efa_security_group")
        self.cluster_name = cluster_name
        self.head_node = head_node or HeadNode()
        self.slurm_settings = self._settings_options(slurm_settings or SlurmSettings())
        self.queues = [self._queue_options(i, q) for i, q in enumerate(queues)]
        os = self._os_option(os)
        deletion_policy = parse_option(self, "deletion_policy", DeletionPolicy, deletion_policy)
        managed_file_system = self._managed_lustre_options(managed_file_system)

        self._check_cluster_name(cluster_name)
        self._check_cluster_name_differs_from_stack(cluster_name)
        self._check_queue_count()
        self._check_queue_names()
        self._check_queue_names_unique()
        self._check_compute_resource_counts()
        self._check_compute_resource_names()
        self._check_compute_resource_names_unique()
        self._check_min_max_counts()
        self._check_compute_resource_capacities()
        self._check_queue_capacities()
        instances = self._check_instance_types()
        self._check_gpu_health_checks(instances)
        self._check_efa_capable(instances)
        self._check_gdr_supported(instances)
        self._check_efa_has_placement(instances, placement_group)
        self._check_shared_placement_has_group(instances, placement_group)
        self._warn_placement_with_reserved_capacity(instances, placement_group)
        self._check_private_subnets(vpc, subnet)
        self._check_ssh()
        self._check_storage_exclusive(file_system, managed_file_system)
        self._check_managed_lustre(managed_file_system)
        self._check_mount_dir(mount_dir, file_system, managed_file_system)
        self._check_log_retention(log_retention_days)
        self._check_scaledown_idletime()
        cluster_actions = _as_sequence(on_node_configured)
        self.login_nodes = list(login_nodes)
        self._check_scripts(cluster_actions)
        self._check_custom_amis(custom_ami)
        self._check_login_nodes()
        self._check_custom_slurm_settings()
        #: The queues placed by EC2 network topology (``topology``), in order; empty without it.
        self.topology_queues = self._topology_queues(topology, instances)
        self._check_topology_settings()
        self._check_directory_service(directory_service)
        self._check_tags(tags or {})
        self._tags = cdk.TagManager(cdk.TagType.KEY_VALUE, CUSTOM_RESOURCE_TYPE, dict(tags or {}))
        self._tag_order = list(tags or {})

        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"ParallelCluster {cluster_name}: every node, as a client of shared storage",
            allow_all_outbound=False,
        )
        self._connections = SameEnvironmentConnections(owner=self, security_groups=[self.security_group])
        # The head node alone runs slurmdbd: the accounting database is opened to a group only it carries.
        self.head_node_security_group: ec2.SecurityGroup | None = None
        if self.slurm_settings.database is not None:
            self.head_node_security_group = ec2.SecurityGroup(
                self,
                "HeadNodeSecurityGroup",
                vpc=vpc,
                description=f"ParallelCluster {cluster_name}: head node, client of the Slurm accounting database",
                allow_all_outbound=False,
            )
        self.session_manager_policy = SessionManagerPolicy(
            self,
            "SessionManager",
            path=PCLUSTER_POLICY_PATH,
            description=f"ParallelCluster {cluster_name}: SSM Session Manager only, for the head and login nodes",
        )
        self.login_nodes_policy = self._login_nodes_policy(cluster_actions)
        #: The head node's ``ec2:DescribeInstanceTopology`` (with ``topology`` and a queue it places), or None.
        self.topology_policy = self._topology_policy(cluster_name) if self.topology_queues else None
        head_node, head_reads, slurm_settings = self.head_node, [], self.slurm_settings
        if topology is not None and self.topology_policy is not None:
            head_node = self._head_node_with_topology(topology)
            head_reads = [CustomActionScript(bucket=topology.bucket, key=topology.module_key)]
            slurm_settings = replace(
                slurm_settings,
                custom_slurm_settings=[
                    *slurm_settings.custom_slurm_settings,
                    {"TopologyPlugin": "topology/tree"},
                ],
            )
        self.configuration: dict[str, Any] = _ClusterConfigurationBuilder(
            vpc=vpc,
            subnet=subnet,
            head_node=head_node,
            queues=self.queues,
            instances=instances,
            os=os,
            placement_group=placement_group,
            node_groups=[g for g in (efa_security_group,) if g is not None],
            client_group=self.security_group,
            file_system=file_system,
            managed_file_system=managed_file_system,
            mount_dir=mount_dir,
            slurm_settings=slurm_settings,
            on_node_configured=cluster_actions,
            log_retention_days=log_retention_days,
            head_group=self.head_node_security_group,
            custom_ami=custom_ami,
            login_nodes=self.login_nodes,
            login_nodes_policy=self.login_nodes_policy,
            session_manager_policy=self.session_manager_policy,
            directory_service=directory_service,
            head_reads=head_reads,
            head_policies=[p for p in (self.topology_policy,) if p is not None],
        ).build()
        self.configuration["Iam"] = lazy(self._iam_boundary)
        self.configuration["Tags"] = lazy(self._rendered_tags)
        self.node.add_validation(_SynthChecks(self, provider_lambda_role))

        self._check_provider_role(provider_lambda_role, provider_additional_policies)
        provider_parameters: dict[str, str] = {}
        if provider_lambda_role is not None:
            provider_parameters["CustomLambdaRole"] = provider_lambda_role.role_arn
        if provider_additional_policies:
            provider_parameters["AdditionalIamPolicies"] = cdk.Fn.join(
                ",", [policy.managed_policy_arn for policy in provider_additional_policies]
            )
        self.provider = cdk.CfnStack(
            self,
            "Provider",
            template_url=cdk.Fn.sub(PROVIDER_TEMPLATE_URL),
            parameters=provider_parameters or None,
        )
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.provider.get_att("Outputs.ServiceToken").to_string(),
            resource_type=CUSTOM_RESOURCE_TYPE,
            properties={
                "ClusterName": cluster_name,
                "ClusterConfiguration": self.configuration,
                "DeletionPolicy": str(deletion_policy),
            },
        )
        # ParallelCluster checks at create time that nodes can reach the internet (or endpoints) and mount the
        # file system: create the cluster only after the network, the storage and their rules exist.
        self.resource.node.add_dependency(vpc, self.security_group)
        if self.head_node_security_group is not None:
            self.resource.node.add_dependency(self.head_node_security_group)
        if file_system is not None:
            self.resource.node.add_dependency(file_system)
        if self.slurm_settings.database is not None:
            # slurmdbd connects as the head node is configured, as its own user: wait for the writer instance
            # (the DB cluster exists minutes before it) and that user. In another stack: a stack dependency.
            self.resource.node.add_dependency(self.slurm_settings.database.ready)
        self._retain_with_cluster(deletion_policy)
        self.head_node_instance_id: str = self.resource.get_att_string("headNode.instanceId")
        self.validation_messages: str = self.resource.get_att_string("validationMessages")

    def _retain_with_cluster(self, deletion_policy: DeletionPolicy) -> None:
        """A retained cluster keeps its nodes' security group; the network it needs belongs to the stack."""
        if deletion_policy is not DeletionPolicy.RETAIN:
            return
        self.security_group.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        if self.head_node_security_group is not None:
            self.head_node_security_group.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        cdk.Annotations.of(self).add_warning_v2(
            "training-clusters:pcluster-retained",
            "deletion_policy RETAIN keeps the cluster running after the stack is deleted, in this stack's "
            "subnet, security groups and placement group: `cdk destroy` stops on those it still uses unless they "
            "are retained too. Delete the cluster with `pcluster delete-cluster` first, or use DELETE (the "
            "default).",
        )

    # ----------------------------------------------------------------------------------------------
    # public API

    @property
    def connections(self) -> ec2.Connections:
        """The group every node carries: allow it on storage (``fs.allow_clients_from(cluster)``)."""
        return self._connections

    @property
    def tags(self) -> cdk.TagManager:
        """The tags of the cluster's ``Tags``: the ``tags`` prop, then what ``cdk.Tags.of`` applies."""
        return self._tags

    def cluster_tags(self) -> dict[str, str]:
        """The configuration's ``Tags`` as they are now (complete once the app is synthesized): the ``tags``
        prop's keys first, in its order (a reordered list would be an update of the cluster), then the others."""
        tags = stack_and_aspect_tags(self, self._tags)
        first = [key for key in self._tag_order if key in tags]
        return {key: tags[key] for key in [*first, *(key for key in tags if key not in first)]}

    def permissions_boundary(self) -> str | None:
        """The boundary CDK's aspects put on this construct's scopes (``Iam.PermissionsBoundary``), or None."""
        return applied_boundary(self)

    def _iam_boundary(self) -> dict[str, str] | None:
        boundary = self.permissions_boundary()
        return None if boundary is None else {"PermissionsBoundary": boundary}

    def _rendered_tags(self) -> list[dict[str, str]] | None:
        return tag_list(self.cluster_tags()) or None

    @property
    def head_node_connections(self) -> ec2.Connections:
        """A group only the head node carries, made when ``slurm_settings.database`` is given: allow it on the
        database (``database.connections.allow_default_port_from(cluster.head_node_connections)``)."""
        if self.head_node_security_group is None:
            raise ConfigurationError(
                f"{self.node.path}: head_node_connections exists only with slurm_settings.database (the head "
                "node's own group is made for the accounting database)"
            )
        return SameEnvironmentConnections(owner=self, security_groups=[self.head_node_security_group])

    def ssm_command(self) -> str:
        """``aws ssm start-session --target <head node> --region <region>`` (a token until deploy)."""
        command: str = cdk.Fn.join(
            "",
            [
                "aws ssm start-session --target ",
                self.head_node_instance_id,
                " --region ",
                cdk.Stack.of(self).region,
            ],
        )
        return command

    def render_config(self, values: Mapping[str, str] | None = None, *, strict: bool = False) -> str:
        """The configuration as ``cluster-config.yaml`` for ``pcluster create-cluster``, with ``Region``.

        A header comment says what the file is for: the stack deploys this same configuration through
        ParallelCluster's CloudFormation provider, so the file documents ``cdk deploy`` (for review) or
        serves ``pcluster create-cluster`` on resources of your own; it does not replace the deploy. Each
        placeholder carries a ``# placeholder:`` comment naming the resource it stands for and the stack
        output that holds it (else its logical id).

        :param values: Deployed values for CloudFormation references, keyed by the referenced logical id
            (``Ref``) or ``LogicalId.Attribute`` (``Fn::GetAtt``), e.g. from
            :func:`training_clusters.model.deployed.deployed_values`. A reference into another stack of the app (a
            network stack's subnet, a storage stack's file system) is keyed by its logical id there: merge
            the values of each stack. Default: realistic placeholders (``subnet-0123456789abcdef0``,
            ``sg-...``, ``fs-...``), chosen by the referenced resource's type wherever it lives in the app,
            so the file passes ParallelCluster's schema.
        :param strict: Refuse placeholders: a reference missing from ``values`` is a ConfigurationError
            naming it. Default: False.
        """
        document, placeholders = self._file_configuration(values, strict=strict)
        stack = cdk.Stack.of(self)
        notes = placeholder_notes(placeholders, stack)
        return annotated_yaml(document, notes, header=config_file_header(stack.stack_name, bool(notes)))

    def file_configuration(
        self, values: Mapping[str, str] | None = None, *, strict: bool = False
    ) -> dict[str, Any]:
        """What :meth:`render_config` writes, as data: ``Region`` (where the stack names one), then the
        :meth:`concrete_configuration`."""
        return self._file_configuration(values, strict=strict)[0]

    def write_config(
        self, path: str | Path, values: Mapping[str, str] | None = None, *, strict: bool = False
    ) -> Path:
        """Write :meth:`render_config` to ``path`` (e.g. ``cluster-config.yaml``) and return it."""
        target = Path(path)
        target.write_text(self.render_config(values, strict=strict))
        return target

    def concrete_configuration(
        self, values: Mapping[str, str] | None = None, *, strict: bool = False
    ) -> dict[str, Any]:
        """The configuration with every token replaced by ``values`` or placeholders (see render_config)."""
        return self._concrete(values, strict=strict)[0]

    def _concrete(
        self, values: Mapping[str, str] | None, *, strict: bool
    ) -> tuple[dict[str, Any], dict[str, Placeholder]]:
        stack = cdk.Stack.of(self)
        region = stack.region if not cdk.Token.is_unresolved(stack.region) else None
        resolved = stack.resolve(self.configuration)
        result, placeholders = substitute_noting_placeholders(
            resolved,
            resource_types=resource_types(stack),
            values={**template_values(stack), **(values or {})},
            region=region,
            strict=strict,
            exports=app_exports(stack),
        )
        return result, placeholders

    def _file_configuration(
        self, values: Mapping[str, str] | None, *, strict: bool
    ) -> tuple[dict[str, Any], dict[str, Placeholder]]:
        document, placeholders = self._concrete(values, strict=strict)
        region = cdk.Stack.of(self).region
        if cdk.Token.is_unresolved(region):
            return document, placeholders
        return {"Region": region, **document}, placeholders

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _check_cluster_name(self, name: str) -> None:
        if is_unresolved(name):
            return
        raise_if_problem(self, "cluster_name", cluster_name_problem(name))

    def _check_tags(self, tags: Mapping[str, str]) -> None:
        if any(is_unresolved(key) or is_unresolved(value) for key, value in tags.items()):
            return
        raise_if_problem(self, "tags", cluster_tags_problem(tags))

    def _check_cluster_name_differs_from_stack(self, name: str) -> None:
        stack_name = cdk.Stack.of(self).stack_name
        if is_unresolved(name) or is_unresolved(stack_name):
            return
        raise_if_problem(self, "cluster_name", stack_name_problem(name, stack_name))

    def _check_provider_role(self, role: iam.IRole | None, policies: Sequence[iam.IManagedPolicy]) -> None:
        if role is not None and policies:
            raise prop_error(
                self.node.path,
                "provider_additional_policies",
                "apply only to the role the provider makes itself; with provider_lambda_role, attach them to "
                "that role instead",
            )

    # ----------------------------------------------------------------------------------------------
    # options given as strings become their members here, before any rule reads them

    def _os_option(self, os: object) -> OperatingSystem:
        retired = os_problem(os.strip().lower()) if isinstance(os, str) else None
        if retired and not isinstance(os, OperatingSystem):
            raise prop_error(self.node.path, "os", retired)  # names a retired OS and why
        return parse_option(self, "os", OperatingSystem, os)

    def _queue_options(self, index: int, queue: SlurmQueue) -> SlurmQueue:
        where = f"queues[{index}]"
        placement = queue.placement
        return replace(
            queue,
            capacity=self._queue_capacity(where, queue.capacity or Capacity.on_demand()),
            placement=None
            if placement is None
            else parse_option(self, f"{where}.placement", QueuePlacement, placement),
        )

    def _queue_capacity(self, where: str, capacity: Capacity) -> Capacity:
        """``capacity``, when ParallelCluster supports it."""
        raise_if_problem(
            self, f"{where}.capacity", capacity.problem_for(CapacityOrchestrator.PARALLELCLUSTER)
        )
        refuse_misplaced(self, f"{where}.capacity", capacity)
        return capacity

    def _settings_options(self, settings: SlurmSettings) -> SlurmSettings:
        strategy = settings.queue_update_strategy
        return replace(
            settings,
            queue_update_strategy=parse_option(
                self, "slurm_settings.queue_update_strategy", QueueUpdateStrategy, strategy
            ),
        )

    def _managed_lustre_options(self, managed: ManagedLustre | None) -> ManagedLustre | None:
        if managed is None:
            return None
        return replace(
            managed,
            deployment_type=parse_option(
                self, "managed_file_system.deployment_type", LustreDeploymentType, managed.deployment_type
            ),
            deletion_policy=parse_option(
                self, "managed_file_system.deletion_policy", DeletionPolicy, managed.deletion_policy
            ),
        )

    def _check_queue_count(self) -> None:
        raise_if_problem(self, "queues", count_problem(len(self.queues), MAX_QUEUES))

    def _check_queue_names(self) -> None:
        for i, queue in enumerate(self.queues):
            raise_if_problem(self, f"queues[{i}].name", slurm_name_problem(queue.name))

    def _check_queue_names_unique(self) -> None:
        raise_if_problem(self, "queues[].name", duplicates_problem(q.name for q in self.queues))

    def _check_compute_resource_counts(self) -> None:
        for i, queue in enumerate(self.queues):
            raise_if_problem(
                self,
                f"queues[{i}].compute_resources",
                count_problem(len(queue.compute_resources), MAX_COMPUTE_RESOURCES_PER_QUEUE),
            )
        total = sum(len(q.compute_resources) for q in self.queues)
        raise_if_problem(self, "queues", cluster_compute_resources_problem(total))

    def _check_compute_resource_names(self) -> None:
        for field, resource in self._compute_resources():
            raise_if_problem(self, f"{field}.name", slurm_name_problem(resource.name))

    def _check_compute_resource_names_unique(self) -> None:
        for i, queue in enumerate(self.queues):
            raise_if_problem(
                self,
                f"queues[{i}].compute_resources[].name",
                duplicates_problem(r.name for r in queue.compute_resources),
            )

    def _check_min_max_counts(self) -> None:
        for field, resource in self._compute_resources():
            raise_if_problem(self, f"{field}.max_count", max_count_problem(resource.max_count))
            raise_if_problem(
                self, f"{field}.min_count", min_count_problem(resource.min_count, resource.max_count)
            )

    def _check_instance_types(self) -> dict[str, InstanceType]:
        """The compute resources' catalogue entries; the head node may be any type (its name is checked)."""
        raise_if_problem(
            self, "head_node.instance_type", instance_type_name_problem(self.head_node.instance_type)
        )
        fields = [(f"{field}.instance_type", r.instance_type) for field, r in self._compute_resources()]
        return {name: catalog_entry(self, name, field) for field, name in fields}

    def _check_efa_capable(self, instances: Mapping[str, InstanceType]) -> None:
        for field, resource in self._compute_resources():
            if resource.efa:
                raise_if_problem(self, f"{field}.efa", efa_enabled_problem(instances[resource.instance_type]))

    def _check_gdr_supported(self, instances: Mapping[str, InstanceType]) -> None:
        for field, resource in self._compute_resources():
            if resource.gdr_support:
                efa = _efa_enabled(resource, instances[resource.instance_type])
                raise_if_problem(
                    self, f"{field}.gdr_support", gdr_problem(instances[resource.instance_type], efa)
                )

    def _check_compute_resource_capacities(self) -> None:
        for field, resource in self._compute_resources():
            if resource.capacity is None:
                continue
            raise_if_problem(self, f"{field}.capacity", compute_resource_capacity_problem(resource.capacity))

    def _check_queue_capacities(self) -> None:
        for i, queue in enumerate(self.queues):
            resources = [(r.name, r.capacity, r.min_count, r.max_count) for r in queue.compute_resources]
            raise_if_problem(self, f"queues[{i}]", queue_capacity_problem(_capacity(queue), resources))

    def _check_gpu_health_checks(self, instances: Mapping[str, InstanceType]) -> None:
        for field, resource in self._compute_resources():
            if resource.gpu_health_check:
                raise_if_problem(
                    self,
                    f"{field}.gpu_health_check",
                    gpu_health_check_problem(instances[resource.instance_type]),
                )

    def _warn_placement_with_reserved_capacity(
        self, instances: Mapping[str, InstanceType], group: TrainingPlacementGroup | None
    ) -> None:
        for i, queue in enumerate(self.queues):
            placement = _placement(queue, instances, group)
            capacity = _capacity(queue)
            if placement is not QueuePlacement.NONE and not capacity.keeps_placement_group():
                cdk.Annotations.of(self).add_warning_v2(
                    "training-clusters:capacity-placement",
                    f"queues[{i}].placement is {placement}, but the queue uses {capacity.described}: "
                    "ParallelCluster warns that a placement group outside the reservation may fail for "
                    "capacity even when the reservation has room; leave placement out (none).",
                )

    def _check_efa_has_placement(
        self, instances: Mapping[str, InstanceType], group: TrainingPlacementGroup | None
    ) -> None:
        for i, queue in enumerate(self.queues):
            if _reserved_without_placement(queue):
                continue  # ParallelCluster only warns: the reservation decides where nodes go
            efa = [r.name for r in queue.compute_resources if _efa_enabled(r, instances[r.instance_type])]
            placement = _placement(queue, instances, group).value
            raise_if_problem(self, f"queues[{i}].placement", efa_placement_problem(placement, efa))

    def _check_shared_placement_has_group(
        self, instances: Mapping[str, InstanceType], group: TrainingPlacementGroup | None
    ) -> None:
        for i, queue in enumerate(self.queues):
            placement = _placement(queue, instances, group).value
            raise_if_problem(
                self, f"queues[{i}].placement", shared_placement_problem(placement, group is not None)
            )

    def _check_private_subnets(self, vpc: ec2.IVpc, subnet: ec2.ISubnet) -> None:
        public = {s.subnet_id for s in vpc.public_subnets}
        for field, candidate in (("subnet", subnet), ("head_node.subnet", self.head_node.subnet)):
            if candidate is not None and candidate.subnet_id in public:
                raise prop_error(
                    self.node.path,
                    field,
                    "is a public subnet; cluster nodes live in private subnets and never get a public IP",
                )

    def _check_ssh(self) -> None:
        allowed = self.head_node.ssh_allowed_ips
        if allowed is None or is_unresolved(allowed):
            return
        raise_if_problem(
            self, "head_node.ssh_allowed_ips", ssh_key_problem(self.head_node.key_name, "head_node.key_name")
        )
        raise_if_problem(self, "head_node.ssh_allowed_ips", ssh_allowed_ips_problem(allowed))

    def _check_storage_exclusive(
        self, file_system: SharedLustre | None, managed: ManagedLustre | None
    ) -> None:
        if file_system is not None and managed is not None:
            raise prop_error(
                self.node.path,
                "managed_file_system",
                "cannot be given together with file_system; mount our SharedLustre or let ParallelCluster "
                "create one, not both",
            )

    def _check_managed_lustre(self, managed: ManagedLustre | None) -> None:
        if managed is None:
            return
        deployment = str(managed.deployment_type)
        raise_if_problem(
            self,
            "managed_file_system.storage_capacity_gib",
            lustre_capacity_problem(deployment, managed.storage_capacity_gib),
        )
        raise_if_problem(
            self,
            "managed_file_system.per_unit_storage_throughput_mbps",
            lustre_throughput_problem(deployment, managed.per_unit_storage_throughput_mbps),
        )

    def _check_mount_dir(
        self, mount_dir: str, file_system: SharedLustre | None, managed: ManagedLustre | None
    ) -> None:
        if file_system is None and managed is None:
            return
        raise_if_problem(self, "mount_dir", mount_dir_problem(mount_dir))

    def _check_log_retention(self, days: int) -> None:
        raise_if_problem(self, "log_retention_days", pcluster_log_retention_problem(days))

    def _check_scaledown_idletime(self) -> None:
        raise_if_problem(
            self,
            "slurm_settings.scaledown_idletime_minutes",
            scaledown_idletime_problem(self.slurm_settings.scaledown_idletime_minutes),
        )

    def _check_scripts(self, cluster_actions: Sequence[CustomActionScript]) -> None:
        where: list[tuple[str, Sequence[CustomActionScript]]] = [
            ("on_node_configured", cluster_actions),
            ("head_node.on_node_start", self.head_node.on_node_start),
            ("head_node.on_node_configured", self.head_node.on_node_configured),
        ]
        for i, queue in enumerate(self.queues):
            where += [(f"queues[{i}].on_node_start", queue.on_node_start)]
            where += [(f"queues[{i}].on_node_configured", queue.on_node_configured)]
        for i, pool in enumerate(self.login_nodes):
            where += [(f"login_nodes[{i}].on_node_start", pool.on_node_start)]
            where += [(f"login_nodes[{i}].on_node_configured", pool.on_node_configured)]
        for field, scripts in where:
            for j, script in enumerate(scripts):
                if is_unresolved(script.key):
                    continue
                name = field if field == "on_node_configured" and len(scripts) == 1 else f"{field}[{j}]"
                raise_if_problem(self, f"{name}.key", action_key_problem(script.key))

    def _check_custom_amis(self, custom_ami: str | None) -> None:
        amis = [("custom_ami", custom_ami), ("head_node.custom_ami", self.head_node.custom_ami)]
        amis += [(f"queues[{i}].custom_ami", q.custom_ami) for i, q in enumerate(self.queues)]
        amis += [(f"login_nodes[{i}].custom_ami", p.custom_ami) for i, p in enumerate(self.login_nodes)]
        for field, ami in amis:
            if ami is None or is_unresolved(ami):
                continue
            raise_if_problem(self, field, ami_problem(ami))

    def _check_login_nodes(self) -> None:
        raise_if_problem(self, "login_nodes", duplicates_problem([p.name for p in self.login_nodes]))
        for i, pool in enumerate(self.login_nodes):
            raise_if_problem(self, f"login_nodes[{i}].name", slurm_name_problem(pool.name))
            raise_if_problem(
                self, f"login_nodes[{i}].instance_type", instance_type_name_problem(pool.instance_type)
            )
            if not is_unresolved(pool.count):
                raise_if_problem(self, f"login_nodes[{i}].count", login_count_problem(pool.count))
            minutes = pool.gracetime_period_minutes
            raise_if_problem(
                self,
                f"login_nodes[{i}].gracetime_period_minutes",
                None if minutes is None else login_gracetime_problem(minutes),
            )
            if pool.ssh_allowed_ips is not None:
                raise_if_problem(
                    self, f"login_nodes[{i}].ssh_allowed_ips", ssh_allowed_ips_problem(pool.ssh_allowed_ips)
                )

    def _check_custom_slurm_settings(self) -> None:
        for i, settings in enumerate(self.slurm_settings.custom_slurm_settings):
            for name in settings:
                raise_if_problem(
                    self, f"slurm_settings.custom_slurm_settings[{i}]", custom_slurm_setting_problem(name)
                )

    def _check_directory_service(self, directory: DirectoryService | None) -> None:
        if directory is None or directory.ldap_tls_req_cert is None:
            return
        raise_if_problem(
            self,
            "directory_service.ldap_tls_req_cert",
            ldap_tls_req_cert_problem(directory.ldap_tls_req_cert),
        )

    def _topology_queues(
        self, topology: TopologyStep | None, instances: Mapping[str, InstanceType]
    ) -> list[str]:
        if topology is None:
            return []
        placed = [
            q.name
            for q in self.queues
            if placed_by_topology([instances[r.instance_type] for r in q.compute_resources])
        ]
        if not placed:
            cdk.Annotations.of(self).add_warning_v2(
                "training-clusters:topology-off",
                "topology is given, but no queue's instance types are all described by EC2 instance topology "
                "(p5, p5e, p5en, p6, trn2 and the like are): Slurm keeps a flat network and the head node gets no "
                "topology step",
            )
        return placed

    def _check_topology_settings(self) -> None:
        if not self.topology_queues:
            return
        for i, settings in enumerate(self.slurm_settings.custom_slurm_settings):
            raise_if_problem(
                self, f"slurm_settings.custom_slurm_settings[{i}]", topology_plugin_problem(settings)
            )

    def _topology_policy(self, cluster_name: str) -> iam.ManagedPolicy:
        """``ec2:DescribeInstanceTopology``: EC2 has no resource-level permission for it, and ``ec2:Region`` is
        its only condition key (Service Authorization Reference, "Actions, resources, and condition keys for
        Amazon EC2": https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html)."""
        policy = iam.ManagedPolicy(
            self,
            "NetworkTopology",
            path=PCLUSTER_POLICY_PATH,
            description=f"ParallelCluster {cluster_name}: the head node reads EC2 instance topology for Slurm",
            statements=[
                iam.PolicyStatement(
                    actions=["ec2:DescribeInstanceTopology"],
                    resources=["*"],
                    conditions={"StringEquals": {"ec2:Region": cdk.Stack.of(self).region}},
                )
            ],
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "ec2:DescribeInstanceTopology supports no resource-level permission (Service Authorization Reference); "
            "the statement is held to this region by ec2:Region, and the action only reads where instances sit",
        )
        return policy

    def _head_node_with_topology(self, topology: TopologyStep) -> HeadNode:
        """The head node with the topology step last of its ``OnNodeStart`` and ``OnNodeConfigured`` scripts."""
        region = cdk.Stack.of(self).region
        module = f"s3://{topology.bucket.bucket_name}/{topology.module_key}"
        nodes = [expr for q in self.queues for r in q.compute_resources for expr in _node_names(q.name, r)]
        initial = [module, region, "initial", "--conf", TOPOLOGY_CONF, "--nodes", *nodes]
        install = [module, region, "install", "--conf", TOPOLOGY_CONF, "--cluster-name", self.cluster_name]
        install += [arg for name in self.topology_queues for arg in ("--partition", name)]
        script = CustomActionScript(bucket=topology.bucket, key=topology.script_key)
        return replace(
            self.head_node,
            on_node_start=[*self.head_node.on_node_start, replace(script, args=tuple(initial))],
            on_node_configured=[*self.head_node.on_node_configured, replace(script, args=tuple(install))],
        )

    def _login_nodes_policy(self, cluster_actions: Sequence[CustomActionScript]) -> iam.ManagedPolicy | None:
        """Read access to the login nodes' scripts (ParallelCluster has no ``S3Access`` for login pools)."""
        scripts = [
            *cluster_actions,
            *(s for p in self.login_nodes for s in (*p.on_node_start, *p.on_node_configured)),
        ]
        if not self.login_nodes or not scripts:
            return None
        resources = list(dict.fromkeys(s.bucket.arn_for_objects(s.key) for s in scripts))
        return iam.ManagedPolicy(
            self,
            "LoginNodesScripts",
            path=PCLUSTER_POLICY_PATH,
            description="Login nodes: read their ParallelCluster custom action scripts",
            statements=[iam.PolicyStatement(actions=["s3:GetObject"], resources=resources)],
        )

    def _compute_resources(self) -> list[tuple[str, ComputeResource]]:
        return [
            (f"queues[{i}].compute_resources[{j}]", resource)
            for i, queue in enumerate(self.queues)
            for j, resource in enumerate(queue.compute_resources)
        ]


def _as_sequence(
    scripts: CustomActionScript | Sequence[CustomActionScript] | None,
) -> list[CustomActionScript]:
    if scripts is None:
        return []
    if isinstance(scripts, CustomActionScript):
        return [scripts]
    return list(scripts)


def _node_names(queue: str, resource: ComputeResource) -> list[str]:
    """The Slurm nodes ParallelCluster names for a compute resource, as host lists: ``{queue}-st-{name}-N`` for
    its ``min_count`` static nodes, ``{queue}-dy-{name}-N`` for the rest (each numbered from 1)."""
    static = [f"{queue}-st-{resource.name}-{i}" for i in range(1, resource.min_count + 1)]
    dynamic = [
        f"{queue}-dy-{resource.name}-{i}" for i in range(1, resource.max_count - resource.min_count + 1)
    ]
    return [hostlist(names) for names in (static, dynamic) if names]


def _action(script: CustomActionScript) -> dict[str, Any]:
    action: dict[str, Any] = {"Script": f"s3://{script.bucket.bucket_name}/{script.key}"}
    if script.args:
        action["Args"] = list(script.args)
    return action


def _efa_enabled(resource: ComputeResource, instance: InstanceType) -> bool:
    return resource.efa if resource.efa is not None else instance.efa_supported


def _gdr_enabled(resource: ComputeResource, instance: InstanceType) -> bool:
    if resource.gdr_support is not None:
        return resource.gdr_support
    return _efa_enabled(resource, instance) and instance.gpudirect_rdma


def _capacity(queue: SlurmQueue) -> Capacity:
    """The queue's capacity (``_queue_options`` always sets it)."""
    return queue.capacity or Capacity.on_demand()


def _reserved_without_placement(queue: SlurmQueue) -> bool:
    return placement_may_be_left_out(_capacity(queue), [r.capacity for r in queue.compute_resources])


def _gpu_health_check(resource: ComputeResource, instance: InstanceType) -> bool:
    return resource.gpu_health_check if resource.gpu_health_check is not None else instance.is_gpu


def _placement(
    queue: SlurmQueue, instances: Mapping[str, InstanceType], group: TrainingPlacementGroup | None
) -> QueuePlacement:
    if queue.placement is not None:
        return QueuePlacement.parse(queue.placement)
    if not _capacity(queue).keeps_placement_group():
        return QueuePlacement.NONE  # see Capacity.keeps_placement_group: the reservation places the nodes
    if not any(_efa_enabled(r, instances[r.instance_type]) for r in queue.compute_resources):
        return QueuePlacement.NONE
    return QueuePlacement.SHARED if group is not None else QueuePlacement.MANAGED


@dataclass(frozen=True)
class _ClusterConfigurationBuilder:
    """Turns validated props into ParallelCluster's configuration document (PascalCase keys)."""

    vpc: ec2.IVpc
    subnet: ec2.ISubnet
    head_node: HeadNode
    queues: Sequence[SlurmQueue]
    instances: Mapping[str, InstanceType]
    os: OperatingSystem
    placement_group: TrainingPlacementGroup | None
    node_groups: Sequence[ec2.ISecurityGroup]
    client_group: ec2.ISecurityGroup
    file_system: SharedLustre | None
    managed_file_system: ManagedLustre | None
    mount_dir: str
    slurm_settings: SlurmSettings
    on_node_configured: Sequence[CustomActionScript]
    log_retention_days: int
    head_group: ec2.ISecurityGroup | None
    custom_ami: str | None
    login_nodes: Sequence[LoginNodePool]
    login_nodes_policy: iam.ManagedPolicy | None
    session_manager_policy: iam.ManagedPolicy
    directory_service: DirectoryService | None
    head_reads: Sequence[CustomActionScript] = ()
    head_policies: Sequence[iam.IManagedPolicy] = ()

    def build(self) -> dict[str, Any]:
        image: dict[str, Any] = {"Os": self.os.value}
        if self.custom_ami is not None:
            image["CustomAmi"] = self.custom_ami
        configuration: dict[str, Any] = {
            "Image": image,
            "HeadNode": self._head_node(),
            "Scheduling": {
                "Scheduler": "slurm",
                "SlurmSettings": self._slurm_settings(),
                "SlurmQueues": [self._queue(queue) for queue in self.queues],
            },
            "Monitoring": {
                "Logs": {"CloudWatch": {"Enabled": True, "RetentionInDays": self.log_retention_days}}
            },
        }
        if self.login_nodes:
            configuration["LoginNodes"] = {"Pools": [self._login_pool(pool) for pool in self.login_nodes]}
        if self.directory_service is not None:
            configuration["DirectoryService"] = self._directory_service(self.directory_service)
        storage = self._shared_storage()
        if storage is not None:
            configuration["SharedStorage"] = [storage]
        return configuration

    def _head_node(self) -> dict[str, Any]:
        head = self.head_node
        ssh: dict[str, Any] = {"AllowedIps": head.ssh_allowed_ips or self.vpc.vpc_cidr_block}
        if head.key_name is not None:
            ssh["KeyName"] = head.key_name
        node: dict[str, Any] = {
            "InstanceType": head.instance_type,
            "Networking": {
                "SubnetId": (head.subnet or self.subnet).subnet_id,
                "AdditionalSecurityGroups": [
                    g.security_group_id for g in (self.client_group, self.head_group) if g is not None
                ],
            },
            "Ssh": ssh,
            "Iam": {
                "AdditionalIamPolicies": [
                    {"Policy": p.managed_policy_arn}
                    for p in (self.session_manager_policy, *self.head_policies)
                ],
                **self._script_access(head.on_node_start, head.on_node_configured, self.head_reads),
            },
            "Imds": {"Secured": True},
        }
        if head.custom_ami is not None:
            node["Image"] = {"CustomAmi": head.custom_ami}
        actions = self._custom_actions(head.on_node_start, head.on_node_configured)
        if actions:
            node["CustomActions"] = actions
        return node

    def _slurm_settings(self) -> dict[str, Any]:
        settings = self.slurm_settings
        result: dict[str, Any] = {
            "QueueUpdateStrategy": str(settings.queue_update_strategy),
            "ScaledownIdletime": settings.scaledown_idletime_minutes,
        }
        if settings.database is not None:
            # slurmdbd's own user (ALL on its database only), never the master user
            result["Database"] = {
                "Uri": settings.database.uri,
                "UserName": settings.database.slurmdbd_username,
                "PasswordSecretArn": settings.database.slurmdbd_password_secret.secret_arn,
            }
        if settings.custom_slurm_settings:
            result["CustomSlurmSettings"] = [dict(s) for s in settings.custom_slurm_settings]
        return result

    def _login_pool(self, pool: LoginNodePool) -> dict[str, Any]:
        ssh: dict[str, Any] = {"AllowedIps": pool.ssh_allowed_ips or self.vpc.vpc_cidr_block}
        if pool.key_name is not None:
            ssh["KeyName"] = pool.key_name
        policies = [{"Policy": self.session_manager_policy.managed_policy_arn}]
        if self.login_nodes_policy is not None:
            policies.append({"Policy": self.login_nodes_policy.managed_policy_arn})
        result: dict[str, Any] = {
            "Name": pool.name,
            "InstanceType": pool.instance_type,
            "Count": pool.count,
            "Networking": {
                "SubnetIds": [self.subnet.subnet_id],
                "AdditionalSecurityGroups": [self.client_group.security_group_id],
            },
            "Ssh": ssh,
            "Iam": {"AdditionalIamPolicies": policies},
        }
        if pool.custom_ami is not None:
            result["Image"] = {"CustomAmi": pool.custom_ami}
        if pool.gracetime_period_minutes is not None:
            result["GracetimePeriod"] = pool.gracetime_period_minutes
        actions = self._custom_actions(pool.on_node_start, pool.on_node_configured)
        if actions:
            result["CustomActions"] = actions
        return result

    def _directory_service(self, directory: DirectoryService) -> dict[str, Any]:
        result: dict[str, Any] = {
            "DomainName": directory.domain_name,
            "DomainAddr": directory.domain_addr,
            "PasswordSecretArn": directory.password_secret.secret_arn,
            "DomainReadOnlyUser": directory.domain_read_only_user,
            "GenerateSshKeysForUsers": directory.generate_ssh_keys_for_users,
        }
        optional = {
            "LdapTlsCaCert": directory.ldap_tls_ca_cert,
            "LdapTlsReqCert": directory.ldap_tls_req_cert,
            "LdapAccessFilter": directory.ldap_access_filter,
        }
        result.update({key: value for key, value in optional.items() if value is not None})
        if directory.additional_sssd_configs:
            result["AdditionalSssdConfigs"] = dict(directory.additional_sssd_configs)
        return result

    def _queue(self, queue: SlurmQueue) -> dict[str, Any]:
        groups = [g.security_group_id for g in (*self.node_groups, self.client_group)]
        capacity = _capacity(queue)
        blocks = any(
            (r.capacity or capacity).kind is CapacityKind.CAPACITY_BLOCK for r in queue.compute_resources
        )
        placement = _placement(queue, self.instances, self.placement_group)
        result: dict[str, Any] = {
            "Name": queue.name,
            "CapacityType": "CAPACITY_BLOCK" if blocks else capacity.pcluster_capacity_type(),
            "ComputeResources": [
                self._compute_resource(r, placement is not QueuePlacement.NONE)
                for r in queue.compute_resources
            ],
            "Networking": {
                "SubnetIds": [self.subnet.subnet_id],
                "AssignPublicIp": False,
                "PlacementGroup": self._placement_group(queue),
                "AdditionalSecurityGroups": groups,
            },
        }
        target = capacity.reservation_target()
        if target is not None:
            result["CapacityReservationTarget"] = target
        if queue.custom_ami is not None:
            result["Image"] = {"CustomAmi": queue.custom_ami}
        if queue.job_exclusive_allocation is not None:
            result["JobExclusiveAllocation"] = queue.job_exclusive_allocation
        access = self._script_access(queue.on_node_start, queue.on_node_configured)
        if access:
            result["Iam"] = access
        actions = self._custom_actions(queue.on_node_start, queue.on_node_configured)
        if actions:
            result["CustomActions"] = actions
        return result

    def _compute_resource(self, resource: ComputeResource, queue_placement: bool) -> dict[str, Any]:
        instance = self.instances[resource.instance_type]
        efa = _efa_enabled(resource, instance)
        result: dict[str, Any] = {
            "Name": resource.name,
            "InstanceType": resource.instance_type,
            "MinCount": resource.min_count,
            "MaxCount": resource.max_count,
            "Efa": {"Enabled": efa, "GdrSupport": _gdr_enabled(resource, instance)},
        }
        if resource.disable_simultaneous_multithreading:
            result["DisableSimultaneousMultithreading"] = True
        if _gpu_health_check(resource, instance):
            result["HealthChecks"] = {"Gpu": {"Enabled": True}}
        if resource.capacity is not None:
            target = resource.capacity.reservation_target()
            if target is not None:
                result["CapacityReservationTarget"] = target
            if queue_placement and not resource.capacity.keeps_placement_group():
                result["Networking"] = {"PlacementGroup": {"Enabled": False}}
        return result

    def _placement_group(self, queue: SlurmQueue) -> dict[str, Any]:
        placement = _placement(queue, self.instances, self.placement_group)
        if placement is QueuePlacement.SHARED and self.placement_group is not None:
            return {"Enabled": True, "Name": self.placement_group.placement_group_name}
        return {"Enabled": placement is QueuePlacement.MANAGED}

    def _shared_storage(self) -> dict[str, Any] | None:
        if self.file_system is not None:
            settings: dict[str, Any] = {"FileSystemId": self.file_system.file_system_id}
        elif self.managed_file_system is not None:
            managed = self.managed_file_system
            settings = {
                "DeploymentType": str(managed.deployment_type),
                "StorageCapacity": managed.storage_capacity_gib,
                "DataCompressionType": "LZ4",
                "DeletionPolicy": str(managed.deletion_policy),
            }
            if managed.per_unit_storage_throughput_mbps is not None:
                settings["PerUnitStorageThroughput"] = managed.per_unit_storage_throughput_mbps
        else:
            return None
        return {
            "MountDir": self.mount_dir,
            "Name": "shared",
            "StorageType": "FsxLustre",
            "FsxLustreSettings": settings,
        }

    def _custom_actions(
        self, on_node_start: Sequence[CustomActionScript], on_node_configured: Sequence[CustomActionScript]
    ) -> dict[str, Any]:
        """``OnNodeStart`` / ``OnNodeConfigured``: one script as ``Script``, several as a ``Sequence``."""
        result: dict[str, Any] = {}
        for key, scripts in (
            ("OnNodeStart", list(on_node_start)),
            ("OnNodeConfigured", [*self.on_node_configured, *on_node_configured]),
        ):
            if len(scripts) == 1:
                result[key] = _action(scripts[0])
            elif scripts:
                result[key] = {"Sequence": [_action(script) for script in scripts]}
        return result

    def _script_access(self, *own: Sequence[CustomActionScript]) -> dict[str, Any]:
        scripts = [*self.on_node_configured, *(script for group in own for script in group)]
        entries = [{"BucketName": s.bucket.bucket_name, "KeyName": s.key} for s in scripts]
        unique = list({(e["BucketName"], e["KeyName"]): e for e in entries}.values())
        if not unique:
            return {}
        return {"S3Access": unique}


# --------------------------------------------------------------------------------------------------
# export: tokens -> concrete values


@jsii.implements(IValidation)
class _SynthChecks:
    """What only the synthesized app shows: the tags and the permissions boundary the aspects applied."""

    def __init__(self, cluster: ParallelCluster, provider_lambda_role: iam.IRole | None) -> None:
        self._cluster = cluster
        self._provider_lambda_role = provider_lambda_role

    def validate(self) -> list[str]:
        errors = []
        tags = self._cluster.cluster_tags()
        if not any(is_unresolved(key) or is_unresolved(value) for key, value in tags.items()):
            problem = cluster_tags_problem(tags)
            if problem is not None:
                errors.append(f"tags (this stack's, Tags.of and the tags prop) {problem}")
        boundary = self._cluster.permissions_boundary()
        if boundary is not None and self._provider_lambda_role is None:
            errors.append(
                "a permissions boundary applies to this construct's roles "
                f"({cdk.Stack.of(self._cluster).resolve(boundary)}), and ParallelCluster's configuration carries "
                "it to the cluster's roles, but ParallelCluster's provider makes its own Lambda role "
                "(PclusterLambdaRole) without one: pass provider_lambda_role, a role of yours that carries the "
                "boundary (ParallelCluster's parallelcluster-policies.yaml with PermissionsBoundaryPolicy makes "
                "one)"
            )
        return errors
