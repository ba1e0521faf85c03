"""What the constructs' security groups share: members that exchange all traffic among themselves, and
connections whose rules land in the clients' stack."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct, IConstruct, Node

from training_clusters.constructs.private.validation import prop_error, refuse_other_environment
from training_clusters.gates.compliance import accept_all_traffic_between_members
from training_clusters.rules.network import shared_efa_group_problem

#: The metadata entry marking a security group as an EFA group (members exchange all traffic) ...
EFA_GROUP = "training-clusters:efa-group"
#: ... and the one naming each cluster that uses it (a construct path).
EFA_CLUSTER = "training-clusters:efa-cluster"


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


class SameEnvironmentConnections(ec2.Connections):
    """The connections of one of our constructs: a peer (or a security group of it) in a stack of another
    account or region is refused, naming both environments, before any rule is written. CDK would otherwise
    write the rules through ``Fn::GetStackOutput`` or an export reader into a group no instance of the peer can
    be in. Every ``allow_*`` of CDK's ``Connections`` ends in :meth:`allow_from` or :meth:`allow_to`."""

    def __init__(
        self,
        *,
        owner: IConstruct,
        security_groups: list[ec2.ISecurityGroup],
        default_port: ec2.Port | None = None,
    ) -> None:
        super().__init__(security_groups=security_groups, default_port=default_port)
        self._owner = owner

    def allow_from(
        self, other: ec2.IConnectable, port_range: ec2.Port, description: str | None = None
    ) -> None:
        self.check_peer(other)
        super().allow_from(other, port_range, description)

    def allow_to(self, other: ec2.IConnectable, port_range: ec2.Port, description: str | None = None) -> None:
        self.check_peer(other)
        super().allow_to(other, port_range, description)

    def allow_default_port_from(self, other: ec2.IConnectable, description: str | None = None) -> None:
        self.check_peer(other)  # here too: raised from Python, not from inside CDK's call of allow_from
        super().allow_default_port_from(other, description)

    def allow_default_port_to(self, other: ec2.IConnectable, description: str | None = None) -> None:
        self.check_peer(other)
        super().allow_default_port_to(other, description)

    def check_peer(self, other: ec2.IConnectable, field: str = "connections") -> None:
        """Raise when ``other`` or one of its security groups is of another account or region."""
        own = cdk.Stack.of(self._owner)
        peers: list[IConstruct] = [other] if isinstance(getattr(other, "node", None), Node) else []
        peers += other.connections.security_groups
        for peer in peers:
            refuse_other_environment(own, self._owner.node.path, field, peer)


def mark_efa_group(group: ec2.ISecurityGroup) -> None:
    """Marks GROUP as an EFA group (all traffic between members), so a second cluster using it is refused."""
    group.node.add_metadata(EFA_GROUP, True)


def claim_efa_groups(
    groups: Sequence[ec2.ISecurityGroup], *, cluster: Construct, owner: Construct, prop: str
) -> None:
    """Records CLUSTER as the user of each EFA group among GROUPS (those :func:`mark_efa_group` marked, and all
    of them when PROP names an EFA group outright: ``efa_security_group``); refuses one another cluster
    already uses. Several constructs of one cluster (an EKS cluster's EFA nodegroups) share it freely."""
    whole = prop == "efa_security_group"
    for group in groups:
        entries = group.node.metadata
        if not whole and not any(e.type == EFA_GROUP for e in entries):
            continue
        users = {str(e.data) for e in entries if e.type == EFA_CLUSTER}
        others = sorted(users - {cluster.node.path})
        if others:
            raise prop_error(owner.node.path, prop, shared_efa_group_problem(group.node.path, others[0]))
        if not users:
            group.node.add_metadata(EFA_CLUSTER, cluster.node.path)


class ClientSideConnections(SameEnvironmentConnections):
    """Connections of a shared resource whose rules land in the stack that uses the other.

    CDK places a rule between two stacks in the stack of the group it is called on: called on a shared
    resource (``db.connections.allow_default_port_from(cluster)``), the ingress rule would land in the
    resource's stack and make it depend on the cluster's stack, which already depends on it: a cycle. Here
    both rules of a pair land in one stack, whichever side the call starts on:

    * in the other side's stack (a cluster using a shared file system, database or network), unless
    * the other side lives in the stack of ``home``, the VPC this resource is in: that stack is one this
      resource's stack already uses (the network's), so the pair lands in this resource's stack.

    In one stack the rules are the same as CDK's. Peers without a security group (CIDR ranges, prefix lists)
    take CDK's own path.
    """

    def __init__(
        self,
        group: ec2.ISecurityGroup,
        port: ec2.Port | None = None,
        *,
        home: ec2.IVpc | None = None,
        owner: IConstruct | None = None,
    ) -> None:
        super().__init__(owner=owner or group, security_groups=[group], default_port=port)
        self._home = home

    def allow_from(
        self, other: ec2.IConnectable, port_range: ec2.Port, description: str | None = None
    ) -> None:
        self.check_peer(other)
        if not self._pair_rules(other, port_range, description, inbound=True):
            ec2.Connections.allow_from(self, other, port_range, description)

    def allow_to(self, other: ec2.IConnectable, port_range: ec2.Port, description: str | None = None) -> None:
        self.check_peer(other)
        if not self._pair_rules(other, port_range, description, inbound=False):
            ec2.Connections.allow_to(self, other, port_range, description)

    def _pair_rules(
        self, other: ec2.IConnectable, port_range: ec2.Port, description: str | None, *, inbound: bool
    ) -> bool:
        """Each of this resource's groups' rule and the other group's matching one, in one stack (a rule
        marked remote lands in its peer's stack); False for a peer with no group."""
        theirs = other.connections.security_groups
        for group in self.security_groups:
            for peer in theirs:
                ours_add, their_add = (
                    (group.add_ingress_rule, peer.add_egress_rule)
                    if inbound
                    else (group.add_egress_rule, peer.add_ingress_rule)
                )
                in_ours = self._home is not None and cdk.Stack.of(peer) is cdk.Stack.of(self._home)
                ours_add(peer, port_range, description, not in_ours)
                their_add(group, port_range, description, in_ours)
        return bool(theirs)
