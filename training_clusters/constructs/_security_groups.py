"""What the constructs' security groups share: members that exchange all traffic among themselves."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2

from training_clusters.compliance import accept_all_traffic_between_members


def open_between_members(
    group: ec2.SecurityGroup, *, inbound: str, outbound: str | None, reason: str
) -> None:
    """Let ``group``'s members exchange all traffic: its rules from (and to) the group itself.

    :param inbound: Description of the all-traffic ingress rule from the group's members.
    :param outbound: Description of the all-traffic egress rule to them; None for a group that already
        allows all outbound traffic (an egress rule there would be ignored).
    :param reason: Why all ports are open between members: the acknowledgement of NIST's
        EC2RestrictedCommonPorts finding on the ingress rule.
    """
    group.add_ingress_rule(group, ec2.Port.all_traffic(), inbound)
    if outbound is not None:
        group.add_egress_rule(group, ec2.Port.all_traffic(), outbound)
    accept_all_traffic_between_members(group, reason)
