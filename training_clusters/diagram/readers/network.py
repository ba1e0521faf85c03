"""The VPC, its availability zones, subnets, gateways and endpoints."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from training_clusters.diagram.graph import EdgeKind, Node, NodeKind
from training_clusters.diagram.readers.base import GraphReader
from training_clusters.diagram.template import _DEPLOY_TIME, _dict, _literal, _target, _targets, _text


class NetworkReader(GraphReader):
    def network(self) -> None:
        for vpc_id, props in self.of_type("AWS::EC2::VPC"):
            self.add(Node(vpc_id, NodeKind.VPC, "VPC", (_text(props.get("CidrBlock")),), logical_id=vpc_id))
        gateways = self.internet_gateways()
        tiers = self.subnet_tiers(gateways)
        for subnet_id, props in self.of_type("AWS::EC2::Subnet"):
            vpc = _target(props.get("VpcId"))
            zone = self.availability_zone(vpc if vpc in self.nodes else None, props.get("AvailabilityZone"))
            tier = tiers.get(subnet_id, ("isolated", None))[0]
            self.add(
                Node(
                    subnet_id,
                    NodeKind.SUBNET,
                    "subnet" if subnet_id in self.borrowed else f"{tier} subnet",
                    (_text(props.get("CidrBlock")),),
                    parent=zone,
                    logical_id=subnet_id,
                )
            )
        for nat_id, props in self.of_type("AWS::EC2::NatGateway"):
            subnet = _target(props.get("SubnetId"))
            parent = subnet if subnet in self.nodes else None
            private = props.get("ConnectivityType") == "private"
            detail = "private NAT" if private else "elastic IP"
            self.add(Node(nat_id, NodeKind.NAT_GATEWAY, "NAT gateway", (detail,), parent, nat_id))
            self.link(nat_id, [subnet], EdgeKind.RUNS_IN)
        for subnet_id, (_, via) in sorted(tiers.items()):
            if via is not None:
                self.link(subnet_id, [via], EdgeKind.ROUTES_THROUGH, "0.0.0.0/0")
        self.endpoints()

    def internet_gateways(self) -> set[str]:
        attached: dict[str, str] = {}
        for _, props in self.of_type("AWS::EC2::VPCGatewayAttachment"):
            gateway, vpc = _target(props.get("InternetGatewayId")), _target(props.get("VpcId"))
            if gateway is not None and vpc is not None:
                attached[gateway] = vpc
        gateways = set()
        for gateway_id, _ in self.of_type("AWS::EC2::InternetGateway"):
            gateways.add(gateway_id)
            vpc = attached.get(gateway_id)
            self.add(
                Node(
                    gateway_id,
                    NodeKind.INTERNET_GATEWAY,
                    "internet gateway",
                    parent=vpc if vpc in self.nodes else None,
                    logical_id=gateway_id,
                )
            )
        return gateways

    def subnet_tiers(self, internet_gateways: set[str]) -> dict[str, tuple[str, str | None]]:
        """Each subnet's tier (public, private, isolated) and the gateway its default route uses."""
        table_of = {subnet: table for table, subnet in self.route_table_associations()}
        default_route: dict[str, tuple[str, str]] = {}
        for _, props in self.of_type("AWS::EC2::Route"):
            if props.get("DestinationCidrBlock") != "0.0.0.0/0":
                continue
            table = _target(props.get("RouteTableId"))
            gateway, nat = _target(props.get("GatewayId")), _target(props.get("NatGatewayId"))
            if table is None:
                continue
            if gateway in internet_gateways and gateway is not None:
                default_route[table] = ("public", gateway)
            elif nat is not None:
                default_route[table] = ("private", nat)
        tiers: dict[str, tuple[str, str | None]] = {}
        for subnet_id, _ in self.of_type("AWS::EC2::Subnet"):
            table = table_of.get(subnet_id)
            tier, via = default_route.get(table or "", ("isolated", None))
            tiers[subnet_id] = (tier, via)
        return tiers

    def enclosing(self, subnets: list[str]) -> str | None:
        """The availability zone all ``subnets`` share, else their VPC (``None`` when not drawn)."""
        zones = {self.nodes[s].parent for s in subnets if s in self.nodes}
        if len(zones) == 1:
            return zones.pop()
        vpcs = {self.nodes[z].parent for z in zones if z is not None and z in self.nodes}
        return vpcs.pop() if len(vpcs) == 1 else None

    def availability_zone(self, vpc: str | None, value: Any) -> str:
        zone = _literal(value)
        if zone is None:
            select = _dict(value).get("Fn::Select")
            index = _literal(select[0]) if isinstance(select, list) and select else None
            zone = f"AZ #{int(index) + 1}" if index is not None and index.isdigit() else _DEPLOY_TIME
        zone_id = f"{vpc or 'imported-vpc'}/{zone}"
        if zone_id not in self.nodes:
            self.add(Node(zone_id, NodeKind.AVAILABILITY_ZONE, zone, parent=vpc))
        return zone_id

    def route_table_associations(self) -> Iterator[tuple[str, str]]:
        """(route table, subnet) of every association in the template."""
        for _, props in self.of_type("AWS::EC2::SubnetRouteTableAssociation"):
            subnet, table = _target(props.get("SubnetId")), _target(props.get("RouteTableId"))
            if subnet is not None and table is not None:
                yield table, subnet

    def endpoints(self) -> None:
        subnets_of_table: dict[str, list[str]] = {}
        for table, subnet in self.route_table_associations():
            subnets_of_table.setdefault(table, []).append(subnet)
        for endpoint_id, props in self.of_type("AWS::EC2::VPCEndpoint"):
            service = _text(props.get("ServiceName"), "{region}")
            match = re.fullmatch(r"com\.amazonaws\.[^.]+\.(.+)", service)
            name = match.group(1) if match else service
            kind = _literal(props.get("VpcEndpointType")) or "Gateway"
            vpc = _target(props.get("VpcId"))
            interfaces = self.subnet_targets(props.get("SubnetIds"))
            self.add(
                Node(
                    endpoint_id,
                    NodeKind.VPC_ENDPOINT,
                    f"{name} endpoint",
                    (kind.lower(), *self.other_zones(interfaces)),
                    parent=self.home(interfaces) or (vpc if vpc in self.nodes else None),
                    logical_id=endpoint_id,
                )
            )
            served = [
                s for table in _targets(props.get("RouteTableIds")) for s in subnets_of_table.get(table, [])
            ]
            served += self.subnet_targets(props.get("SubnetIds"))
            self.link(endpoint_id, served, EdgeKind.SERVES)
