"""Our constructs in a team's own multi-stack app (``tests/composition/app.py``): every layout CDK supports.

Shared network and storage stacks with a cluster stack per orchestrator, a VPC adopted by two stacks and an
imported one: no dependency cycle, rules in the consuming stacks, nothing written into a stack that owns an
adopted resource, and the same gates as the shipped environments (cdk-nag 0 open, cfn-lint 0 errors).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2

from .composition.app import AZS, ENV, ZonedStack, build
from .conftest import CDK_CONTEXT, GateResult


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, cdk.Stack], GateResult]:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("composition") / "cdk.out"), context=dict(CDK_CONTEXT))
    stacks = build(app)
    return stacks, GateResult(app)


def _template(result: GateResult, stack: cdk.Stack) -> dict[str, Any]:
    assert result.assembly is not None, "synth refused: " + "\n".join(map(str, result.findings))
    template: dict[str, Any] = json.loads((Path(result.assembly.directory) / stack.template_file).read_text())
    return template


def _imports(template: dict[str, Any]) -> set[str]:
    """The exports a template imports (``Fn::ImportValue``): which other stacks it depends on."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "Fn::ImportValue" in node:
                found.add(json.dumps(node["Fn::ImportValue"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(template.get("Resources", {}))
    return found


def test_the_whole_layout_synthesizes_through_the_gates(
    layout: tuple[dict[str, cdk.Stack], GateResult],
) -> None:
    _, result = layout
    result.assert_clean()


def test_the_shared_layer_depends_on_no_cluster_stack(
    layout: tuple[dict[str, cdk.Stack], GateResult],
) -> None:
    stacks, _ = layout
    clusters = {stacks[name] for name in ("HyperPod", "Pcluster", "Eks")}
    for shared in ("Network", "Storage"):
        assert not clusters & set(stacks[shared].dependencies), shared
    for cluster in clusters:
        assert stacks["Storage"] in cluster.dependencies


def test_lustre_rules_live_in_each_client_stack(layout: tuple[dict[str, cdk.Stack], GateResult]) -> None:
    stacks, result = layout
    storage = _template(result, stacks["Storage"])
    rule_types = ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
    # the storage stack only imports the network's VPC and subnet, never a cluster's security group
    assert all("Network" in imported for imported in _imports(storage)), _imports(storage)
    for name in ("HyperPod", "Pcluster", "Eks"):
        rules = [r for r in _template(result, stacks[name])["Resources"].values() if r["Type"] in rule_types]
        ports = sorted(
            {(r["Type"], r["Properties"]["FromPort"]) for r in rules if r["Properties"].get("FromPort")}
        )
        assert ("AWS::EC2::SecurityGroupIngress", 988) in ports, name
        assert ("AWS::EC2::SecurityGroupEgress", 988) in ports, name
        assert ("AWS::EC2::SecurityGroupIngress", 1018) in ports, name


def test_adopters_leave_the_vpc_owner_untouched(
    layout: tuple[dict[str, cdk.Stack], GateResult], tmp_path: Path
) -> None:
    stacks, result = layout
    alone = cdk.App(outdir=str(tmp_path / "cdk.out"), context=dict(CDK_CONTEXT))
    owner = ZonedStack(alone, "VpcOwner", env=ENV)
    ec2.Vpc(owner, "Vpc", availability_zones=AZS, nat_gateways=1).add_flow_log("FlowLog")
    template_alone = json.loads(
        (Path(alone.synth().directory) / owner.template_file).read_text(encoding="utf-8")
    )
    shared = _template(result, stacks["VpcOwner"])
    assert shared["Resources"] == template_alone["Resources"]
    # what the adopters need from the owner is exported, nothing more; no endpoint is added to its VPC
    assert not [r for r in shared["Resources"].values() if r["Type"] == "AWS::EC2::VPCEndpoint"]


def test_adopting_adds_no_gateway_endpoint_unless_asked(
    layout: tuple[dict[str, cdk.Stack], GateResult],
) -> None:
    stacks, result = layout
    for name in ("AdopterA", "AdopterB", "Importer"):
        resources = _template(result, stacks[name])["Resources"].values()
        assert not [r for r in resources if r["Type"] == "AWS::EC2::VPCEndpoint"], name
        assert [r for r in resources if r["Type"] == "AWS::EC2::SecurityGroup"], name


def test_an_adopter_may_ask_for_the_s3_endpoint_in_its_own_stack(app: cdk.App) -> None:
    from training_clusters.constructs import TrainingNetwork

    owner = ZonedStack(app, "Owner", env=ENV)
    vpc = ec2.Vpc(owner, "Vpc", availability_zones=AZS, nat_gateways=1)
    adopter = ZonedStack(app, "Adopter", env=ENV)
    TrainingNetwork(adopter, "Network", vpc=vpc, gateway_endpoints=True)
    assert [c.node.path for c in vpc.node.children if "Endpoint" in c.node.id] == []
    endpoints = [
        r
        for r in app.synth().get_stack_by_name("Adopter").template["Resources"].values()
        if r["Type"] == "AWS::EC2::VPCEndpoint"
    ]
    assert len(endpoints) == 1
    assert endpoints[0]["Properties"]["VpcEndpointType"] == "Gateway"


def test_a_cluster_config_written_across_stacks_passes_parallelclusters_schema(
    layout: tuple[dict[str, cdk.Stack], GateResult], tmp_path: Path
) -> None:
    from training_clusters.constructs import ParallelCluster

    from .pcluster_schema import schema_errors

    stacks, _ = layout
    cluster = stacks["Pcluster"].node.find_child("Cluster")
    assert isinstance(cluster, ParallelCluster)
    written = cluster.write_config(tmp_path / "cluster-config.yaml")
    text = written.read_text()
    assert "placeholder-" not in text
    assert "SubnetId: subnet-0123456789abcdef" in text  # the network stack's subnet, by its type
    (subnet,) = (line.strip() for line in text.splitlines() if "SubnetId: " in line)
    # its comment names the other stack, and the output CDK made there to export it
    assert subnet.startswith(
        "SubnetId: subnet-0123456789abcdef0  # placeholder: subnet Network/Resource/PrivateSubnet1/Subnet "
        "(stack Network, output ExportsOutputRefNetworkPrivateSubnet1Subnet"
    )
    assert schema_errors(cluster.concrete_configuration()) == []
