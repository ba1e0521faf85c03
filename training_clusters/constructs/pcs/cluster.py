"""PcsCluster: a Slurm cluster run by AWS Parallel Computing Service, on our network, EFA and shared storage.

AWS PCS runs the Slurm controller (and, with accounting, slurmdbd) in an account of its own and reaches your
nodes through an interface it creates in ``subnet``. The nodes are EC2 instances PCS launches from compute
node groups, each over our own launch template: one EFA interface per network card (the same layout as
:func:`~training_clusters.constructs.eks.cluster.efa_network_interfaces`), the placement group, IMDSv2 required
and user data that lets only root reach the instance metadata service and mounts the shared FSx for Lustre
file system (:func:`node_user_data`). Queues map Slurm partitions to node groups;
a static group of login nodes is where users run ``sbatch``.

Closed by default: nodes live in private subnets and never get a public IP, there is no key pair (SSM
Session Manager, through
:class:`~training_clusters.constructs.common.session_manager.SessionManagerPolicy`: the session's actions, no
parameter reads), and the only ingress is the Slurm traffic between the controller's interface and the
nodes (the ports listed in "Security groups in AWS PCS",
https://docs.aws.amazon.com/pcs/latest/userguide/working-with_networking_sg.html), plus all traffic between
the nodes themselves (MPI, srun steps; EFA has its own group).

References (AWS PCS user guide):
https://docs.aws.amazon.com/pcs/latest/userguide/working-with_launch-templates.html,
https://docs.aws.amazon.com/pcs/latest/userguide/working-with_ec2-user-data.html (user data is MIME
multi-part), https://docs.aws.amazon.com/pcs/latest/userguide/security-instance-profiles.html (role name
``AWSPCS*`` or path ``/aws-pcs/``, ``pcs:RegisterComputeNodeGroupInstance``),
https://docs.aws.amazon.com/pcs/latest/userguide/working-with_networking_efa_create-lt.html (EFA interfaces).

The root volume goes on the AMI's own root device, ``/dev/xvda`` or ``/dev/sda1`` depending on the AMI
(https://docs.aws.amazon.com/ebs/latest/userguide/device_naming.html): Amazon Linux, which every PCS sample AMI
is (https://docs.aws.amazon.com/pcs/latest/userguide/ami-release-notes.html), uses ``/dev/xvda``; Ubuntu and
RHEL images, from which custom PCS AMIs are also built, use ``/dev/sda1``. A mapping of another name would
leave the root at the AMI's size and attach an empty extra volume, so the name is read from the AMI
(``RootDeviceName`` of EC2 DescribeImages) when the stack deploys, unless ``root_device_name`` gives it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_pcs as pcs
from aws_cdk import aws_ssm as ssm
from aws_cdk import custom_resources as cr
from constructs import Construct

from training_clusters.catalog import InstanceType
from training_clusters.constructs.common.lustre import SDK_CALL_FUNCTION_ID, SharedLustre
from training_clusters.constructs.common.placement import TrainingPlacementGroup
from training_clusters.constructs.common.session_manager import SessionManagerPolicy
from training_clusters.constructs.private.launch_template import efa_network_interfaces, node_launch_template
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
from training_clusters.gates.compliance import accept_inline_policy, acknowledge_cdk_made
from training_clusters.model.capacity import Capacity, Orchestrator
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import PcsClusterSize, SlurmAccounting, SlurmVersion
from training_clusters.model.releases import PCS_SLURM_VERSION
from training_clusters.node_scripts import SHARED_DIR
from training_clusters.rules import pcs as rules
from training_clusters.rules.common import pattern_problem
from training_clusters.rules.instance_types import instance_type_name_problem
from training_clusters.rules.versions import SLURM_CVE_2026, slurm_cve_advice

#: IAM path PCS accepts for the role of a node group's instance profile (the other way: a name ``AWSPCS*``).
INSTANCE_ROLE_PATH = "/aws-pcs/"
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
#: Ports slurmctld calls back ``srun`` on (interactive steps from the login nodes).
SRUN_PORTS = (60001, 63000)
#: The boundary of the MIME multi-part user data PCS merges with its own.
MIME_BOUNDARY = "==TRAINING-CLUSTERS=="
#: The deploy-time lookup of the AMI's root device (an ``AwsCustomResource`` calling EC2 DescribeImages).
ROOT_DEVICE_LOOKUP_TYPE = "Custom::AmiRootDevice"
_ROOT_DEVICE_PATH = "Images.0.RootDeviceName"
#: What EC2 calls a device: ``/dev/`` and a name (``xvda``, ``sda1``, ``nvme0n1``).
_DEVICE_NAME = re.compile(r"/dev/[a-z][a-z0-9]{1,15}")


@dataclass(frozen=True)
class PcsComputeNodeGroup:
    """A compute node group: instances of one type that PCS starts and stops as Slurm needs them.

    :param name: 3 to 25 letters, digits and hyphens, starting with a letter; unique in the cluster.
    :param instance_type: An EC2 type from :mod:`training_clusters.catalog`, e.g. ``p5.48xlarge``.
    :param min_count: Nodes always running. Default: 0 (everything scales from zero).
    :param max_count: Nodes at most. Default: 2.
    :param capacity: Where the instances come from: ``Capacity.on_demand()``, ``.spot()``,
        ``.reservation(id=... | resource_group_arn=..., targeted=...)`` or ``.capacity_block(id)``, rendered as
        the node group's ``PurchaseOption`` (ONDEMAND, SPOT, CAPACITY_BLOCK) and its launch template's
        ``CapacityReservationSpecification`` / ``InstanceMarketOptions``. A Capacity Block, or a reservation
        not created in the placement group, leaves the placement group out (see
        :meth:`Capacity.keeps_placement_group`). A training plan is refused (HyperPod only). Default:
        On-Demand.
    :param efa: One EFA interface per network card, in the cluster's placement group. Default: enabled where
        the catalogue says the type has EFA.
    :param efa_interfaces: EFA interfaces per node. Default: the instance's maximum (p5.48xlarge 32).
    :param root_volume_size_gib: Encrypted gp3 root volume, on the AMI's root device (see
        :class:`PcsCluster`'s ``root_device_name``). Default: 200.
    """

    name: str
    instance_type: str
    min_count: int = 0
    max_count: int = 2
    efa: bool | None = None
    efa_interfaces: int | None = None
    root_volume_size_gib: int = 200
    capacity: Capacity | None = None


@dataclass(frozen=True)
class PcsLoginNodes:
    """The static login node group: always running, in no queue; users submit jobs from here.

    :param instance_type: Default: ``m5.xlarge``.
    :param count: How many login nodes (static: min = max). Default: 1; 0 builds none.
    :param name: The node group's name. Default: ``login``.
    :param root_volume_size_gib: Encrypted gp3 root volume, on the AMI's root device. Default: 100.
    """

    instance_type: str = "m5.xlarge"
    count: int = 1
    name: str = "login"
    root_volume_size_gib: int = 100


@dataclass(frozen=True)
class PcsQueue:
    """A Slurm partition and the compute node groups that run its jobs.

    :param name: 3 to 25 letters, digits and hyphens, starting with a letter; unique in the cluster.
    :param compute_node_groups: Names of the cluster's compute node groups (not the login nodes).
    """

    name: str
    compute_node_groups: Sequence[str]


@checked_props
@jsii.implements(ec2.IConnectable)
class PcsCluster(Construct):
    """An AWS PCS Slurm cluster: managed controller, EFA compute node groups, login nodes, queues.

    Example::

        cluster = PcsCluster(self, "Pcs", cluster_name="training", vpc=network.vpc,
                             subnet=network.placement_subnet(), placement_group=placement,
                             efa_security_group=network.efa_security_group, file_system=fsx, mount_dir="/fsx",
                             ami_ssm_parameter="/training-clusters/pcs/ami",
                             compute_node_groups=[PcsComputeNodeGroup(name="p5-nodes", instance_type="p5.48xlarge",
                                                                            max_count=4)])
        fsx.allow_clients_from(cluster)   # Lustre ports from every node

    Without ``queues`` every compute node group gets a queue of its own name.

    Attributes: ``cluster`` (the ``CfnCluster``), ``cluster_id``, ``cluster_arn``, ``security_group`` (on the
    controller's interface), ``node_security_group`` (on every node) and ``connections`` (its: allow file
    systems to it), ``role`` and ``instance_profile`` (of every node), ``session_manager_policy`` (the
    role's one managed policy: SSM Session Manager, no parameter reads), ``node_groups`` and
    ``launch_templates`` (by group name, login nodes included), ``login_node_group`` (or None),
    ``queues`` (by name), ``efa_interfaces`` (per compute node group with EFA), ``ami_id`` (a string or the
    CloudFormation parameter's token), ``root_device_name`` (as given, or the deploy-time lookup's token),
    ``mount_dir``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        compute_node_groups: Sequence[PcsComputeNodeGroup],
        queues: Sequence[PcsQueue] | None = None,
        login_nodes: PcsLoginNodes | None = None,
        cluster_name: str | None = None,
        size: PcsClusterSize | str = PcsClusterSize.SMALL,
        slurm_version: SlurmVersion | str = PCS_SLURM_VERSION,
        accounting: SlurmAccounting | str = SlurmAccounting.NONE,
        scale_down_idle_time_seconds: int = 600,
        slurm_custom_settings: Mapping[str, str] | None = None,
        ami_id: str | None = None,
        ami_ssm_parameter: str | None = None,
        root_device_name: str | None = None,
        placement_group: TrainingPlacementGroup | None = None,
        efa_security_group: ec2.ISecurityGroup | None = None,
        file_system: SharedLustre | None = None,
        mount_dir: str = "/fsx",
    ) -> None:
        """Build the security groups, the node role, the cluster, its node groups and queues.

        :param vpc: The VPC of the cluster.
        :param subnet: The one private subnet of the controller's interface and of every node (the
            placement group's AZ).
        :param compute_node_groups: 1 or more compute node groups.
        :param queues: Default: one queue per compute node group, of the group's name.
        :param login_nodes: Default: ``PcsLoginNodes()`` (one m5.xlarge); ``count=0`` for none.
        :param cluster_name: 3 to 40 letters, digits and hyphens. Default: generated by CloudFormation.
            Immutable: changing it replaces the cluster.
        :param size: The managed controller's size; caps the nodes of all groups together. Default: SMALL (32).
        :param slurm_version: Default: 25.11. A series with no release carrying the fixes for the 2026 Slurm
            CVEs (24.11) is a synth warning (:func:`~training_clusters.rules.versions.slurm_cve_advice`).
        :param accounting: Slurm accounting. Default: NONE.
        :param scale_down_idle_time_seconds: Idle seconds before PCS stops a dynamic node. Default: 600.
        :param slurm_custom_settings: slurm.conf parameters PCS lets you set on the cluster (e.g.
            ``{"Prolog": "/etc/slurm/prolog.sh"}``; see
            https://docs.aws.amazon.com/pcs/latest/userguide/slurm-custom-settings.html). Default: none.
        :param ami_id: The AMI every node launches (PCS agent, Slurm, EFA software, Lustre client installed).
            Exactly one of ``ami_id`` and ``ami_ssm_parameter``. Default: none (then ``ami_ssm_parameter``).
        :param ami_ssm_parameter: Name of an SSM parameter holding the AMI id, read by CloudFormation at deploy
            time (a stack parameter of type ``AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>``); synth makes
            no AWS call, and a new AMI in the parameter reaches the nodes on the next deploy. Default: none
            (then ``ami_id``).
        :param root_device_name: The AMI's root device, where every launch template puts the node's root
            volume: ``/dev/xvda`` on Amazon Linux (every PCS sample AMI), ``/dev/sda1`` on Ubuntu and RHEL.
            Any other name leaves the root at the AMI's size and attaches an empty extra volume. Default: read
            from the AMI when the stack deploys (EC2 DescribeImages' ``RootDeviceName``, through aws-cdk-lib's
            ``AwsCustomResource``: one small Lambda, run again when the AMI changes, e.g. a new id in
            ``ami_ssm_parameter``), so it is right for any AMI; giving it builds no Lambda.
        :param placement_group: The cluster placement group of EFA node groups. Required when a compute node
            group uses EFA. Default: none (node groups without EFA are not placed).
        :param efa_security_group: A group allowing all traffic between its members, on every EFA interface.
            Required when a compute node group uses EFA. Default: none.
        :param file_system: Our :class:`SharedLustre`, mounted on every node at ``mount_dir`` by user data.
            Default: none. The caller opens the Lustre ports: ``file_system.allow_clients_from(cluster)``.
        :param mount_dir: Where every node mounts ``file_system``. Default: ``/fsx``.
        """
        super().__init__(scope, id)
        if efa_security_group is not None:
            claim_efa_groups([efa_security_group], cluster=self, owner=self, prop="efa_security_group")
        size = parse_option(self, "size", PcsClusterSize, size)
        slurm_version = parse_option(self, "slurm_version", SlurmVersion, slurm_version)
        advise(self, SLURM_CVE_2026, slurm_cve_advice(slurm_version.value))
        accounting = parse_option(self, "accounting", SlurmAccounting, accounting)
        self.login = login_nodes if login_nodes is not None else PcsLoginNodes()

        self._check_cluster_name(cluster_name)
        self._check_compute_node_groups(compute_node_groups)
        instances = [
            catalog_entry(self, g.instance_type, f"compute_node_groups[{i}].instance_type")
            for i, g in enumerate(compute_node_groups)
        ]
        efa = self._check_efa(compute_node_groups, instances)
        interface_counts = [
            self._efa_interface_count(i, g, inst) if uses else 0
            for i, (g, inst, uses) in enumerate(zip(compute_node_groups, instances, efa, strict=True))
        ]
        self._check_efa_needs(efa, placement_group, efa_security_group, subnet)
        capacities = self._capacities(compute_node_groups)
        login_instance = self._check_login_nodes()
        self._check_names_unique(compute_node_groups)
        self.queue_specs = self._queues(queues, compute_node_groups)
        self._check_size(size, compute_node_groups)
        self._check_scale_down_idle_time(scale_down_idle_time_seconds)
        self._check_custom_settings(slurm_custom_settings)
        self._check_ami(ami_id, ami_ssm_parameter)
        self._check_root_device_name(root_device_name)
        self._check_private_subnet(vpc, subnet)
        self._check_mount_dir(mount_dir)

        self.mount_dir = mount_dir
        self.security_group, self.node_security_group = self._security_groups(vpc, accounting)
        self._connections = SameEnvironmentConnections(owner=self, security_groups=[self.node_security_group])
        self.cluster = pcs.CfnCluster(
            self,
            "Resource",
            name=cluster_name,
            size=size.value,
            scheduler=pcs.CfnCluster.SchedulerProperty(type="SLURM", version=slurm_version.value),
            networking=pcs.CfnCluster.NetworkingProperty(
                subnet_ids=[subnet.subnet_id], security_group_ids=[self.security_group.security_group_id]
            ),
            slurm_configuration=pcs.CfnCluster.SlurmConfigurationProperty(
                scale_down_idle_time_in_seconds=scale_down_idle_time_seconds,
                accounting=pcs.CfnCluster.AccountingProperty(mode=accounting.value),
                slurm_custom_settings=[
                    pcs.CfnCluster.SlurmCustomSettingProperty(parameter_name=k, parameter_value=v)
                    for k, v in (slurm_custom_settings or {}).items()
                ]
                or None,
            ),
        )
        self.cluster_id: str = self.cluster.attr_id
        self.cluster_arn: str = self.cluster.attr_arn
        self.role, self.instance_profile = self._node_role()
        self.ami_id: str = ami_id if ami_id is not None else self._ami_parameter(str(ami_ssm_parameter))
        self.root_device_name: str = (
            root_device_name if root_device_name is not None else self._root_device_lookup(self.ami_id)
        )
        user_data = node_user_data(file_system.mount_target() if file_system is not None else None, mount_dir)

        self.node_groups: dict[str, pcs.CfnComputeNodeGroup] = {}
        self.launch_templates: dict[str, ec2.CfnLaunchTemplate] = {}
        self.efa_interfaces: dict[str, int] = {}
        for spec, instance, capacity, interfaces in zip(
            compute_node_groups, instances, capacities, interface_counts, strict=True
        ):
            if interfaces:
                self.efa_interfaces[spec.name] = interfaces
            self._node_group(
                spec.name,
                instance_type=instance.name,
                min_count=spec.min_count,
                max_count=spec.max_count,
                subnet=subnet,
                capacity=capacity,
                efa_interfaces=interfaces,
                efa_security_group=efa_security_group,
                placement_group=placement_group if interfaces else None,
                root_volume_size_gib=spec.root_volume_size_gib,
                user_data=user_data,
            )
        self.login_node_group: pcs.CfnComputeNodeGroup | None = None
        if login_instance is not None:
            self.login_node_group = self._node_group(
                self.login.name,
                instance_type=login_instance,
                min_count=self.login.count,
                max_count=self.login.count,
                subnet=subnet,
                capacity=Capacity.on_demand(),
                efa_interfaces=0,
                efa_security_group=None,
                placement_group=None,
                root_volume_size_gib=self.login.root_volume_size_gib,
                user_data=user_data,
            )
        self.queues: dict[str, pcs.CfnQueue] = {
            queue.name: pcs.CfnQueue(
                self,
                f"Queue{_id_part(queue.name)}",
                cluster_id=self.cluster_id,
                name=queue.name,
                compute_node_group_configurations=[
                    pcs.CfnQueue.ComputeNodeGroupConfigurationProperty(
                        compute_node_group_id=self.node_groups[group].attr_id
                    )
                    for group in queue.compute_node_groups
                ],
            )
            for queue in self.queue_specs
        }

    @property
    def connections(self) -> ec2.Connections:
        """The node security group's connections (every node, login nodes included, carries it)."""
        return self._connections

    def login_ssm_command(self, region: str) -> str:
        """A shell command opening an SSM session on a login node (PCS tags its instances with their group)."""
        if self.login_node_group is None:
            raise ValueError(f"{self.node.path} has no login nodes (login_nodes count is 0)")
        group_id = self.login_node_group.attr_id
        return (
            f"aws ssm start-session --region {region} --target $(aws ec2 describe-instances --region {region} "
            f"--filters Name=tag:aws:pcs:compute-node-group-id,Values={group_id} "
            "Name=instance-state-name,Values=running --query 'Reservations[0].Instances[0].InstanceId' "
            "--output text)"
        )

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _check_cluster_name(self, name: str | None) -> None:
        if name is not None and not is_unresolved(name):
            raise_if_problem(self, "cluster_name", rules.pcs_cluster_name_problem(name))

    def _check_compute_node_groups(self, groups: Sequence[PcsComputeNodeGroup]) -> None:
        raise_if_problem(self, "compute_node_groups", rules.node_groups_problem(len(groups)))
        for index, group in enumerate(groups):
            field = f"compute_node_groups[{index}]"
            raise_if_problem(self, f"{field}.name", rules.pcs_name_problem(group.name))
            raise_if_problem(self, field, rules.node_counts_problem(group.min_count, group.max_count))
            raise_if_problem(
                self, f"{field}.root_volume_size_gib", rules.root_volume_problem(group.root_volume_size_gib)
            )

    def _check_efa(
        self, groups: Sequence[PcsComputeNodeGroup], instances: Sequence[InstanceType]
    ) -> list[bool]:
        uses: list[bool] = []
        for index, (group, instance) in enumerate(zip(groups, instances, strict=True)):
            if group.efa is not None:
                raise_if_problem(
                    self, f"compute_node_groups[{index}].efa", rules.efa_flag_problem(instance, group.efa)
                )
            enabled = group.efa if group.efa is not None else instance.efa_supported
            if group.efa_interfaces is not None:
                raise_if_problem(
                    self,
                    f"compute_node_groups[{index}].efa_interfaces",
                    rules.efa_interfaces_enabled_problem(enabled, instance.name, group.name),
                )
            uses.append(enabled)
        return uses

    def _check_efa_needs(
        self,
        efa: Sequence[bool],
        placement_group: TrainingPlacementGroup | None,
        efa_security_group: ec2.ISecurityGroup | None,
        subnet: ec2.ISubnet,
    ) -> None:
        if not any(efa):
            return
        if placement_group is None:
            raise prop_error(
                self.node.path,
                "placement_group",
                "is required: a compute node group uses EFA, which needs a cluster placement group",
            )
        if efa_security_group is None:
            raise prop_error(
                self.node.path,
                "efa_security_group",
                "is required: a compute node group uses EFA, which needs a group allowing all traffic "
                "between its members (e.g. network.efa_security_group)",
            )
        placement_group.check_subnets([subnet], field="subnet")

    def _capacities(self, groups: Sequence[PcsComputeNodeGroup]) -> list[Capacity]:
        """Each group's ``capacity`` (On-Demand when not given), checked for PCS."""
        return [
            self._checked_capacity(
                f"compute_node_groups[{index}].capacity", group.capacity or Capacity.on_demand()
            )
            for index, group in enumerate(groups)
        ]

    def _checked_capacity(self, field: str, capacity: Capacity) -> Capacity:
        try:
            capacity.check_for(Orchestrator.PCS, "")
        except ConfigurationError as error:
            raise prop_error(self.node.path, field, str(error).strip()) from None
        refuse_misplaced(self, field, capacity)
        return capacity

    def _check_login_nodes(self) -> str | None:
        login = self.login
        raise_if_problem(self, "login_nodes.count", rules.login_count_problem(login.count))
        if login.count == 0:
            return None
        raise_if_problem(self, "login_nodes.name", rules.pcs_name_problem(login.name))
        raise_if_problem(
            self, "login_nodes.root_volume_size_gib", rules.root_volume_problem(login.root_volume_size_gib)
        )
        # a login node may be any type PCS launches: its name is checked, no facts are needed
        raise_if_problem(self, "login_nodes.instance_type", instance_type_name_problem(login.instance_type))
        return login.instance_type

    def _check_names_unique(self, groups: Sequence[PcsComputeNodeGroup]) -> None:
        names = [g.name for g in groups] + ([self.login.name] if self.login.count else [])
        raise_if_problem(
            self, "compute_node_groups names (login_nodes.name included)", rules.duplicates_problem(names)
        )

    def _queues(
        self, queues: Sequence[PcsQueue] | None, groups: Sequence[PcsComputeNodeGroup]
    ) -> list[PcsQueue]:
        if queues is None:
            return [PcsQueue(name=g.name, compute_node_groups=[g.name]) for g in groups]
        raise_if_problem(self, "queues", rules.queues_problem(len(queues)))
        known = [g.name for g in groups]
        for index, queue in enumerate(queues):
            raise_if_problem(self, f"queues[{index}].name", rules.pcs_name_problem(queue.name))
            raise_if_problem(
                self,
                f"queues[{index}].compute_node_groups",
                rules.queue_node_groups_problem(queue.compute_node_groups, known),
            )
        raise_if_problem(self, "queues names", rules.duplicates_problem(q.name for q in queues))
        return list(queues)

    def _check_size(self, size: PcsClusterSize, groups: Sequence[PcsComputeNodeGroup]) -> None:
        nodes = sum(g.max_count for g in groups) + self.login.count
        raise_if_problem(self, "size", rules.cluster_size_problem(size, nodes))

    def _check_scale_down_idle_time(self, seconds: int) -> None:
        if not is_unresolved(seconds):
            raise_if_problem(
                self, "scale_down_idle_time_seconds", rules.scale_down_idle_time_problem(seconds)
            )

    def _check_custom_settings(self, settings: Mapping[str, str] | None) -> None:
        if settings:
            raise_if_problem(self, "slurm_custom_settings", rules.slurm_custom_settings_problem(settings))

    def _check_ami(self, ami_id: str | None, ami_ssm_parameter: str | None) -> None:
        if ami_id is not None and is_unresolved(ami_id) and ami_ssm_parameter is None:
            return
        raise_if_problem(self, "ami_id", rules.ami_problem(ami_id, ami_ssm_parameter))
        if ami_ssm_parameter is not None and not is_unresolved(ami_ssm_parameter):
            raise_if_problem(self, "ami_ssm_parameter", rules.ssm_parameter_name_problem(ami_ssm_parameter))

    def _check_root_device_name(self, name: str | None) -> None:
        if name is None or is_unresolved(name):
            return
        raise_if_problem(
            self,
            "root_device_name",
            pattern_problem(name, _DEVICE_NAME, "must be a device name such as /dev/xvda or /dev/sda1"),
        )

    def _check_private_subnet(self, vpc: ec2.IVpc, subnet: ec2.ISubnet) -> None:
        if subnet.subnet_id in {s.subnet_id for s in vpc.public_subnets}:
            raise prop_error(
                self.node.path,
                "subnet",
                "is a public subnet; PCS nodes live in private subnets and never get a public IP",
            )

    def _check_mount_dir(self, mount_dir: str) -> None:
        raise_if_problem(self, "mount_dir", rules.pcs_mount_dir_problem(mount_dir))

    def _efa_interface_count(self, index: int, spec: PcsComputeNodeGroup, instance: InstanceType) -> int:
        wanted = spec.efa_interfaces
        if wanted is None:
            return min(instance.max_efa_interfaces, instance.max_network_cards)
        raise_if_problem(
            self,
            f"compute_node_groups[{index}].efa_interfaces",
            rules.efa_interfaces_problem(instance, wanted),
        )
        return wanted

    # ----------------------------------------------------------------------------------------------
    # building

    def _security_groups(
        self, vpc: ec2.IVpc, accounting: SlurmAccounting
    ) -> tuple[ec2.SecurityGroup, ec2.SecurityGroup]:
        controller = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="AWS PCS controller interface: Slurm traffic with the cluster nodes only",
            allow_all_outbound=False,
        )
        nodes = ec2.SecurityGroup(
            self,
            "NodeSecurityGroup",
            vpc=vpc,
            description="AWS PCS nodes: Slurm with the controller, all traffic among nodes, HTTPS out",
            allow_all_outbound=False,
        )
        open_between_members(
            nodes,
            inbound="Nodes: MPI and srun steps between nodes",
            outbound="Nodes: MPI and srun steps between nodes",
            reason="MPI ranks and srun steps between a job's nodes use ports chosen at run time; the source "
            "is the node group itself, never an address range",
        )
        nodes.add_egress_rule(
            ec2.Peer.any_ipv4(),
            ec2.Port.tcp(443),
            "HTTPS to AWS APIs (PCS registration, SSM, S3) and package repositories, through the NAT gateway",
        )
        node_connections = SameEnvironmentConnections(owner=self, security_groups=[nodes])
        node_connections.allow_to(controller, ec2.Port.tcp(SLURMCTLD_PORT), "slurmctld from the nodes")
        node_connections.allow_from(controller, ec2.Port.tcp(SLURMD_PORT), "slurmd from slurmctld")
        node_connections.allow_from(
            controller, ec2.Port.tcp_range(*SRUN_PORTS), "slurmctld to srun on the nodes (interactive steps)"
        )
        if accounting is SlurmAccounting.STANDARD:
            node_connections.allow_to(
                controller, ec2.Port.tcp(SLURMDBD_PORT), "slurmdbd from sacct on the nodes"
            )
        return controller, nodes

    def _node_role(self) -> tuple[iam.Role, iam.InstanceProfile]:
        """The role of every node: register with this cluster, and SSM Session Manager (no parameter reads).

        PCS asks only ``pcs:RegisterComputeNodeGroupInstance`` of a node's role ("IAM instance profiles for AWS
        PCS", https://docs.aws.amazon.com/pcs/latest/userguide/security-instance-profiles.html; the managed
        policies it lists after that are suggestions). The nodes read no SSM parameter: the AMI parameter
        (``ami_ssm_parameter``) is resolved by CloudFormation when the stack deploys, with the deploying
        role's credentials. Session Manager, the nodes' only way in, gets :class:`SessionManagerPolicy`,
        not ``AmazonSSMManagedInstanceCore`` (which would let every user on a node read the region's
        parameters).
        """
        self.session_manager_policy = SessionManagerPolicy(
            self,
            "SessionManagerPolicy",
            description="AWS PCS nodes: SSM Session Manager only (agent registration, session channels)",
        )
        role = iam.Role(
            self,
            "NodeRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            path=INSTANCE_ROLE_PATH,
            description="AWS PCS nodes: register with the cluster; SSM Session Manager",
            managed_policies=[self.session_manager_policy],
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["pcs:RegisterComputeNodeGroupInstance"], resources=[self.cluster_arn]
            )
        )
        policy = role.node.find_child("DefaultPolicy")
        accept_inline_policy(policy, "the nodes' one statement: register with this cluster")
        profile = iam.InstanceProfile(self, "InstanceProfile", role=role)
        return role, profile

    def _ami_parameter(self, name: str) -> str:
        value: str = ssm.StringParameter.value_for_typed_string_parameter_v2(
            self, name, ssm.ParameterValueType.AWS_EC2_IMAGE_ID
        )
        return value

    def _root_device_lookup(self, ami_id: str) -> str:
        """The AMI's root device name, read by EC2 DescribeImages when the stack deploys."""
        call = cr.AwsSdkCall(
            service="EC2",
            action="describeImages",
            parameters={"ImageIds": [ami_id]},
            physical_resource_id=cr.PhysicalResourceId.of(ami_id),
            output_paths=[_ROOT_DEVICE_PATH],  # the whole answer may exceed CloudFormation's 4 KB for data
        )
        lookup = cr.AwsCustomResource(
            self,
            "RootDeviceLookup",
            resource_type=ROOT_DEVICE_LOOKUP_TYPE,
            on_update=call,  # also the create call; a new AMI id updates the name
            # DescribeImages takes no resource-level permissions (Service Authorization Reference, Amazon EC2:
            # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html)
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [iam.PolicyStatement(actions=["ec2:DescribeImages"], resources=["*"])]
            ),
            install_latest_aws_sdk=False,
        )
        self._explain_lookup(lookup)
        device: str = lookup.get_response_field(_ROOT_DEVICE_PATH)
        return device

    def _explain_lookup(self, lookup: cr.AwsCustomResource) -> None:
        reason = (
            "aws-cdk-lib's AwsCustomResource (its design): it reads the AMI's root device name with "
            "ec2:DescribeImages, which takes no resource-level permissions, when the stack deploys"
        )
        acknowledge_cdk_made(lookup, reason)
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

    def _node_group(
        self,
        name: str,
        *,
        instance_type: str,
        min_count: int,
        max_count: int,
        subnet: ec2.ISubnet,
        capacity: Capacity,
        efa_interfaces: int,
        efa_security_group: ec2.ISecurityGroup | None,
        placement_group: TrainingPlacementGroup | None,
        root_volume_size_gib: int,
        user_data: str,
    ) -> pcs.CfnComputeNodeGroup:
        part = _id_part(name)
        node_group_id = self.node_security_group.security_group_id
        if efa_interfaces:
            assert efa_security_group is not None
            interfaces = efa_network_interfaces(
                count=efa_interfaces,
                security_group_ids=[node_group_id, efa_security_group.security_group_id],
            )
        else:
            interfaces = [
                ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
                    device_index=0,
                    groups=[node_group_id],
                    associate_public_ip_address=False,
                    delete_on_termination=True,
                )
            ]
        template = node_launch_template(
            self,
            f"{part}LaunchTemplate",
            instance_type=instance_type,
            root_volume_size_gib=root_volume_size_gib,
            root_device_name=self.root_device_name,
            network_interfaces=interfaces,
            placement_group_name=placement_group.placement_group_name if placement_group else None,
            capacity=capacity,
        )
        # PCS launches the node group's instance_configs type; the template keeps the rest.
        template.add_property_deletion_override("LaunchTemplateData.InstanceType")
        template.add_property_override("LaunchTemplateData.UserData", cdk.Fn.base64(user_data))
        group = pcs.CfnComputeNodeGroup(
            self,
            f"{part}NodeGroup",
            cluster_id=self.cluster_id,
            name=name,
            ami_id=self.ami_id,
            iam_instance_profile_arn=self.instance_profile.instance_profile_arn,
            instance_configs=[pcs.CfnComputeNodeGroup.InstanceConfigProperty(instance_type=instance_type)],
            scaling_configuration=pcs.CfnComputeNodeGroup.ScalingConfigurationProperty(
                min_instance_count=min_count, max_instance_count=max_count
            ),
            subnet_ids=[subnet.subnet_id],
            custom_launch_template=pcs.CfnComputeNodeGroup.CustomLaunchTemplateProperty(
                template_id=template.ref, version=template.attr_latest_version_number
            ),
            purchase_option=capacity.pcs_purchase_option(),
        )
        # the role's policy must exist before an instance registers
        group.node.add_dependency(self.role)
        self.node_groups[name] = group
        self.launch_templates[name] = template
        return group


def node_user_data(mount_target: str | None, mount_dir: str) -> str:
    """MIME multi-part user data of every PCS node: the instance metadata guard and, with a file system, the
    mount of FSx for Lustre at ``mount_dir``.

    PCS merges it with its own user data, so it must be MIME multi-part. The first part, a
    ``text/cloud-boothook``, is :func:`imds_guard_boothook`: cloud-init runs boothooks (its
    ``BootHookPartHandler``, every boot) while it consumes user data in its network stage, whose unit
    (``cloud-init.service`` in cloud-init 22.4) is ordered ``Before=sshd.service`` and
    ``Before=systemd-user-sessions.service``, so only root reaches the metadata service before anyone can
    log in. The second, a ``text/x-shellscript`` (:func:`lustre_mount_script`), runs once
    per instance after the node registers with PCS and before slurmd starts, so jobs always find the file
    system: the fstab line is written once (a rerun finds it), the mount is retried while the network and the
    file system settle, and the node fails to start (rather than run jobs without storage) when it never
    mounts.
    """
    parts = [("text/cloud-boothook", imds_guard_boothook())]
    if mount_target is not None:
        parts.append(("text/x-shellscript", lustre_mount_script(mount_target, mount_dir)))
    text = f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\nMIME-Version: 1.0\n\n'
    for content_type, body in parts:
        text += f'--{MIME_BOUNDARY}\nContent-Type: {content_type}; charset="us-ascii"\n\n{body}\n'
    return text + f"--{MIME_BOUNDARY}--\n"


#: The metadata guard HyperPod's lifecycle scripts and ParallelCluster's compute nodes run, one script
#: (``node_scripts/shared/``).
IMDS_GUARD_SCRIPT = SHARED_DIR / "training-clusters-imds.sh"
#: The heredoc delimiter the boothook writes the guard with (a line the guard never holds).
_GUARD_END = "TC_IMDS_GUARD_END"


def imds_guard_boothook() -> str:
    """The boothook of :func:`node_user_data`: only root reaches the instance metadata service on a PCS node.

    Any local user who reads IMDS gets the node role's credentials, and that role may call
    ``pcs:RegisterComputeNodeGroupInstance``, whose answer holds the cluster's Slurm (Munge) key
    (``sharedSecret`` in botocore's PCS model): a forged credential for uid 0 on every node. So the boothook
    installs the same owner-matched netfilter guard as HyperPod's and ParallelCluster's nodes
    (``training-clusters-imds --install``: the rules now and a unit that applies them at every boot), with
    ``iptables`` installed first if the AMI lacks it (``iptables-nft`` with dnf on Amazon Linux 2023, PCS's
    sample AMIs; ``iptables`` with apt-get on Ubuntu). Root's daemons (PCS's agent, slurmd, the SSM agent)
    keep their access. If the guard cannot be put in place, the instance powers off rather than run open:
    cloud-init only logs a boothook that fails.
    """
    guard = IMDS_GUARD_SCRIPT.read_text()
    if any(
        line == _GUARD_END for line in guard.splitlines()
    ):  # pragma: no cover - a fact of the shipped file
        raise AssertionError(f"{IMDS_GUARD_SCRIPT} holds the line {_GUARD_END}")
    return _BOOTHOOK.replace("@GUARD@", guard.rstrip("\n")).replace("@END@", _GUARD_END)


_BOOTHOOK = """#!/bin/bash
# Only root reaches the instance metadata service on this node (cdk-training-clusters); runs at every boot.
set -uo pipefail
fail() {
  echo "training-clusters: $* (the metadata guard is not in place): powering off" | tee /dev/console >&2
  systemctl poweroff --no-block
  exit 1
}
if ! command -v iptables >/dev/null 2>&1; then
  if command -v dnf >/dev/null 2>&1; then
    dnf install -y iptables-nft || fail "dnf could not install iptables-nft"
  elif command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y iptables || fail "apt-get could not install iptables"
  else
    fail "no iptables, and neither dnf nor apt-get to install it"
  fi
fi
# the guard installs itself as /usr/local/sbin/training-clusters-imds, with its unit
staged="$(mktemp)" || fail "could not create a temporary file"
cat >"$staged" <<'@END@' || fail "could not write $staged"
@GUARD@
@END@
bash "$staged" --install || fail "training-clusters-imds --install failed"
rm -f "$staged"
"""


def lustre_mount_script(mount_target: str, mount_dir: str) -> str:
    """The shell part of :func:`node_user_data`: what cloud-init writes to the instance's scripts
    folder and runs once per instance (its ``scripts_user`` module)."""
    return _MOUNT_SCRIPT.replace("@DEVICE@", _shell_word(mount_target)).replace(
        "@MOUNT_DIR@", _shell_word(mount_dir)
    )


_MOUNT_SCRIPT = """#!/bin/bash
# Mount the shared FSx for Lustre file system (cdk-training-clusters); safe to run again.
set -euo pipefail
device=@DEVICE@
mount_dir=@MOUNT_DIR@
if ! command -v mount.lustre >/dev/null 2>&1 && command -v dnf >/dev/null 2>&1; then
  dnf install -y lustre-client
fi
mkdir -p "$mount_dir"
if ! awk -v d="$device" -v m="$mount_dir" '$1 == d && $2 == m { found = 1 } END { exit !found }' /etc/fstab; then
  echo "$device $mount_dir lustre defaults,relatime,flock,_netdev 0 0" >> /etc/fstab
fi
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  mountpoint -q "$mount_dir" && break
  mount -a -t lustre || echo "mount of $device failed (attempt $attempt), retrying" >&2
  mountpoint -q "$mount_dir" && break
  sleep $((attempt * 5))
done
mountpoint -q "$mount_dir" || { echo "could not mount $device at $mount_dir" >&2; exit 1; }
chmod 1777 "$mount_dir"
"""


def _shell_word(value: str) -> str:
    """``value`` as one single-quoted shell word, whatever it holds (``shlex.quote``; a value it would leave
    bare is quoted too, so the script reads the same for a token and a plain name). The file system's names
    are checked where they are given; this keeps a name that slipped through from running as a command."""
    quoted = shlex.quote(value)
    return quoted if quoted.startswith("'") else f"'{quoted}'"


def _id_part(name: str) -> str:
    """A construct-id fragment from a node group or queue name: ``gpu-p5`` becomes ``GpuP5``."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("-"))
