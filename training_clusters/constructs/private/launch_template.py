"""The launch template our EC2 nodes start from (EKS managed nodegroups, PCS compute node groups): instance
type, IMDSv2, an encrypted gp3 root volume, EFA interfaces, capacity, and the tags of what it launches.

A module of its own, free of EKS, so a PCS cluster does not load aws_eks_v2 and the kubectl layer.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from training_clusters.constructs.private.tags import launch_template_tags
from training_clusters.model.capacity import Capacity
from training_clusters.model.options import CapacityKind, EfaInterfaceType

#: Instance metadata answers only one network hop away: the node itself and host-network pods, not pods.
IMDS_HOP_LIMIT = 1
#: The root device of Amazon Linux AMIs, EKS's AL2023 node AMIs among them.
ROOT_DEVICE_NAME = "/dev/xvda"


def node_launch_template(
    scope: Construct,
    id: str,
    *,
    instance_type: str,
    root_volume_size_gib: int = 100,
    root_device_name: str = ROOT_DEVICE_NAME,
    network_interfaces: Sequence[ec2.CfnLaunchTemplate.NetworkInterfaceProperty] | None = None,
    placement_group_name: str | None = None,
    capacity: Capacity | None = None,
    imds_hop_limit: int = IMDS_HOP_LIMIT,
) -> ec2.CfnLaunchTemplate:
    """A launch template for an EKS managed nodegroup: instance type, IMDSv2, encrypted gp3 root volume.

    The instance type lives here, not on the nodegroup, so CDK's nodegroup allow-lists never block new
    hardware. IMDSv2 is required, with a hop limit of ``imds_hop_limit`` (default 1: the node and its
    host-network pods reach instance metadata, other pods, one hop further, do not). The
    stack's tags and those ``cdk.Tags.of(...)`` applies to the template's scopes go onto the instances, their
    volumes and interfaces (a nodegroup's own tags do not), rendered at synth, so GPU hours show up under the
    environment's cost centre. The aspects' tag manager is the construct ``<id>Tags`` beside the template.

    ``capacity`` becomes ``InstanceMarketOptions`` (``capacity-block`` for a Capacity Block; never ``spot``:
    EKS sets Spot from the nodegroup's capacity type) and ``CapacityReservationSpecification`` (the
    reservation, block or resource group targeted, or ``open``). ``placement_group_name`` is left out when
    the capacity does not keep the placement group (:meth:`Capacity.keeps_placement_group`).
    ``root_device_name`` must be the AMI's own root device (a mapping of any other name leaves the root at the
    AMI's size and attaches an extra, empty volume); the default fits Amazon Linux, which EKS's AL2023 AMIs are.
    """
    if capacity is not None and not capacity.keeps_placement_group():
        placement_group_name = None
    data = ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
        instance_type=instance_type,
        metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=imds_hop_limit
        ),
        block_device_mappings=[
            ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                device_name=root_device_name,
                ebs=ec2.CfnLaunchTemplate.EbsProperty(
                    volume_size=root_volume_size_gib,
                    volume_type="gp3",
                    encrypted=True,
                    delete_on_termination=True,
                ),
            )
        ],
        network_interfaces=list(network_interfaces) if network_interfaces else None,
        placement=(
            ec2.CfnLaunchTemplate.PlacementProperty(group_name=placement_group_name)
            if placement_group_name
            else None
        ),
        capacity_reservation_specification=_capacity_reservation_specification(capacity),
        instance_market_options=(
            ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(market_type="capacity-block")
            if capacity is not None and capacity.kind is CapacityKind.CAPACITY_BLOCK
            else None
        ),
        tag_specifications=launch_template_tags(scope, id),
    )
    return ec2.CfnLaunchTemplate(scope, id, launch_template_data=data)


def _capacity_reservation_specification(
    capacity: Capacity | None,
) -> ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty | None:
    if capacity is None:
        return None
    target = capacity.reservation_target()
    preference = capacity.reservation_preference()
    if target is None and preference is None:
        return None
    return ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty(
        capacity_reservation_preference=preference,
        capacity_reservation_target=(
            None
            if target is None
            else ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
                capacity_reservation_id=target.get("CapacityReservationId"),
                capacity_reservation_resource_group_arn=target.get("CapacityReservationResourceGroupArn"),
            )
        ),
    )


def efa_network_interfaces(
    *,
    count: int,
    security_group_ids: Sequence[str],
    interface_type: EfaInterfaceType = EfaInterfaceType.EFA,
) -> list[ec2.CfnLaunchTemplate.NetworkInterfaceProperty]:
    """One EFA interface per network card: card 0 / device 0 ``efa``, then card i / device 1.

    Security groups go on every interface (never at template level once interfaces are declared) and no
    subnet is given (EKS places the interfaces in the nodegroup's subnet).
    """
    interfaces = [
        ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
            network_card_index=0,
            device_index=0,
            interface_type=EfaInterfaceType.EFA.value,
            groups=list(security_group_ids),
            delete_on_termination=True,
        )
    ]
    interfaces.extend(
        ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
            network_card_index=card,
            device_index=1,
            interface_type=interface_type.value,
            groups=list(security_group_ids),
            delete_on_termination=True,
        )
        for card in range(1, count)
    )
    return interfaces
