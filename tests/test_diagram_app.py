"""``training-clusters diagram --assembly cdk.out -d DIR``: a multi-stack app, one picture per stack and one of
the whole app with the references between its stacks.

The app is a platform team's smallest split, synthesized once here: a stage ``Team`` holding a storage stack
(network, FSx for Lustre, an SSM parameter naming the file system) and a cluster stack (HyperPod on that network,
mounting that file system; an output reading the parameter). CDK passes the VPC, subnet, file system and
security group across as exports the cluster stack imports (``Fn::ImportValue``); the parameter crosses as a
template parameter of type ``AWS::SSM::Parameter::Value<String>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ssm as ssm

from tests.text_tables import unwrapped
from training_clusters.constructs import (
    HyperPodCluster,
    InstanceGroup,
    LustreMount,
    SharedLustre,
    TrainingNetwork,
)
from training_clusters.diagram import (
    EdgeKind,
    NodeKind,
    StackSource,
    assembly_graphs,
    cross_stack_references,
    read_assembly,
    read_stack,
    render,
    to_dot,
    to_svg,
    with_imports,
)
from training_clusters.diagram.app import IMPORT_VALUE, SSM_PARAMETER

from .composition.app import AZS, ZonedStack
from .conftest import CDK_CONTEXT
from .test_diagram import _boxes_and_texts, _spills, run

PARAMETER = "/team/fsx-id"


def build(app: cdk.App) -> cdk.Stage:
    stage = cdk.Stage(app, "Team", env=cdk.Environment(account="111122223333", region="us-east-1"))
    storage = ZonedStack(stage, "Storage")
    network = TrainingNetwork(storage, "Network", availability_zones=AZS)
    fs = SharedLustre(
        storage,
        "Fsx",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    ssm.StringParameter(
        storage, "FsxId", parameter_name=PARAMETER, string_value=fs.file_system.file_system_id
    )
    cluster = ZonedStack(stage, "Cluster")
    hyperpod = HyperPodCluster(
        cluster,
        "Cluster",
        cluster_name="team-hyperpod",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[
            InstanceGroup(name="controller", instance_type="ml.c5.xlarge", role="controller"),
            InstanceGroup(name="workers", instance_type="ml.g5.8xlarge", instance_count=2, partition="gpu"),
        ],
        lustre=LustreMount(dns_name=fs.dns_name, mount_name=fs.mount_name),
    )
    fs.allow_clients_from(hyperpod)
    cdk.CfnOutput(
        cluster, "SharedFileSystem", value=ssm.StringParameter.value_for_string_parameter(cluster, PARAMETER)
    )
    return stage


@pytest.fixture(scope="module")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    outdir = tmp_path_factory.mktemp("two-stacks") / "cdk.out"
    app = cdk.App(outdir=str(outdir), context={**CDK_CONTEXT, "aws:cdk:disable-asset-staging": True})
    build(app)
    app.synth()
    return outdir


def _templates(assembly: Path) -> dict[str, dict[str, Any]]:
    return {s.stack_name: dict(s.template) for s in read_assembly(assembly)}


def _of_type(template: dict[str, Any], kind: str) -> list[str]:
    return sorted(k for k, r in template["Resources"].items() if r["Type"] == kind)


def test_the_references_between_the_stacks_are_read_from_the_templates(assembly: Path) -> None:
    templates = _templates(assembly)
    assert set(templates) == {"Team-Storage", "Team-Cluster"}  # the stacks of the nested stage
    storage, cluster = templates["Team-Storage"], templates["Team-Cluster"]
    references = cross_stack_references(templates)
    imports = [r for r in references if r.via == IMPORT_VALUE]
    exported = {o["Export"]["Name"] for o in storage["Outputs"].values() if "Export" in o}
    assert {r.name for r in imports} == exported  # every export the storage stack makes, the cluster imports
    assert {(r.consumer, r.producer) for r in references} == {("Team-Cluster", "Team-Storage")}
    [file_system] = _of_type(storage, "AWS::FSx::FileSystem")
    [vpc] = _of_type(storage, "AWS::EC2::VPC")
    [hyperpod] = _of_type(cluster, "AWS::SageMaker::Cluster")
    referenced = {resource for r in imports for resource in r.resources}
    assert {file_system, vpc} <= referenced
    assert referenced <= set(storage["Resources"])
    assert referenced & set(_of_type(storage, "AWS::EC2::Subnet"))  # HyperPod's subnet
    assert hyperpod in {u for r in imports for u in r.users}
    [by_parameter] = [r for r in references if r.via == SSM_PARAMETER]
    assert (by_parameter.name, by_parameter.resources, by_parameter.users) == (PARAMETER, (file_system,), ())
    alone = {"Team-Cluster": cluster}  # an import no stack of the app exports is made outside it: not drawn
    assert cross_stack_references(alone) == []


def test_the_whole_app_draws_each_stack_as_a_box_and_each_reference_to_what_it_uses(assembly: Path) -> None:
    sources = read_assembly(assembly)
    graphs, whole = assembly_graphs(sources, title="team")
    stacks = whole.of_kind(NodeKind.STACK)
    assert sorted(s.title for s in stacks) == ["stack Team-Cluster", "stack Team-Storage"]
    for stack in stacks:  # what a stack builds of compute and storage is in its box (not what it imports)
        name = stack.title.removeprefix("stack ")
        built = read_stack(assembly, name).graph()
        own = {n.title for n in built.nodes if n.kind in (NodeKind.FILE_SYSTEM, NodeKind.NODE_GROUP)}
        assert len(own) == (2 if name == "Team-Cluster" else 1)
        assert len(graphs[name].nodes) >= len(built.nodes)
        assert own <= {n.title for n in whole.children(stack.id)}
        resources = len(read_stack(assembly, name).template["Resources"])
        assert stack.details == (f"{resources} resources",)
    edges = {
        (whole.node(e.source).title, whole.node(e.target).title, e.label)
        for e in whole.edges
        if e.kind is EdgeKind.IMPORTS
    }
    assert ("SageMaker HyperPod team-hyperpod", "VPC", "imports VPC, subnet") in edges
    assert ("stack Team-Cluster", "FSx for Lustre", "SSM parameter: file system") in edges
    assert all(target.startswith(("FSx", "VPC")) for _, target, _ in edges)
    retained = {n.title for n in whole.retained}
    assert "S3 bucket" in retained  # the lifecycle bucket keeps its badge in the app's picture
    svg = to_svg(to_dot(whole))
    assert _spills(svg) == []
    drawn = [texts[0][0] for _, _, texts in _boxes_and_texts(svg) if texts]
    assert sorted(t for t in drawn if t.startswith("stack")) == ["stack Team-Cluster", "stack Team-Storage"]
    assert '==>|"imports VPC, subnet"|' in render(whole, ".md")


def test_a_stacks_own_picture_draws_what_it_imports_where_it_lives(assembly: Path) -> None:
    """The cluster stack's picture: its node groups in the subnet it imports, mounting the file system it
    imports, both marked with the stack they come from and kept by that stack, not this one."""
    sources = {s.stack_name: s for s in read_assembly(assembly)}
    storage = dict(sources["Team-Storage"].template)
    graphs, _ = assembly_graphs(list(sources.values()), title="team")
    cluster = graphs["Team-Cluster"]
    [file_system] = _of_type(storage, "AWS::FSx::FileSystem")
    groups = cluster.of_kind(NodeKind.NODE_GROUP)
    assert len(groups) == 2
    for group in groups:  # in the HyperPod box, which is in the subnet
        box = cluster.node(group.parent)
        assert box.kind is NodeKind.CLUSTER and box.title.startswith("SageMaker HyperPod")
        subnet = cluster.node(box.parent)
        assert subnet.kind is NodeKind.SUBNET and subnet.id.startswith("Team-Storage/")
        assert subnet.title == "subnet" and subnet.details[-1] == "from stack Team-Storage"
        assert subnet.logical_id.removeprefix("Team-Storage/") in _of_type(storage, "AWS::EC2::Subnet")
        assert [cluster.node(a).kind for a in cluster.ancestors(group.id)] == [
            NodeKind.CLUSTER, NodeKind.SUBNET, NodeKind.AVAILABILITY_ZONE, NodeKind.VPC, NodeKind.REGION,
        ]  # fmt: skip
        mounted = {e.target for e in cluster.edges if e.source == group.id and e.kind is EdgeKind.MOUNTS}
        assert mounted == {f"Team-Storage/{file_system}"}
    assert cluster.node(f"Team-Storage/{file_system}").details[-1] == "from stack Team-Storage"
    assert not [i for i in cluster.kept_on_delete() if i.startswith("Team-Storage/")]
    assert graphs["Team-Storage"] == sources["Team-Storage"].graph()  # imports nothing: drawn as it is
    alone = sources["Team-Cluster"].graph()  # without the imports: in the region, mounting nothing
    assert {alone.node(g.id).parent for g in groups} == {"region"}
    assert not [e for e in alone.edges if e.kind is EdgeKind.MOUNTS]
    assert "Team-Storage/" not in json.dumps(sources["Team-Cluster"].template)  # the assembly's is untouched


def test_an_import_is_redrawn_as_a_copy_only_for_a_reference_to_one_resource() -> None:
    producer = StackSource(
        "p",
        {
            "Resources": {
                "Fs": {"Type": "AWS::FSx::FileSystem", "DeletionPolicy": "Retain", "Properties": {"SubnetIds": [{"Ref": "Sub"}]}},
                "Sub": {"Type": "AWS::EC2::Subnet", "Properties": {"CidrBlock": "10.0.0.0/24", "AvailabilityZone": "az1"}},
                "Name": {"Type": "AWS::SSM::Parameter", "Properties": {"Name": "/fs", "Value": {"Ref": "Fs"}}},
            },
            "Outputs": {
                "A": {"Value": {"Fn::GetAtt": ["Fs", "DNSName"]}, "Export": {"Name": "p:dns"}},
                "B": {"Value": {"Ref": "Sub"}, "Export": {"Name": "p:sub"}},
                "C": {"Value": {"Fn::Join": ["", [{"Ref": "Sub"}, "x"]]}, "Export": {"Name": "p:joined"}},
            },
        },
        {},
    )  # fmt: skip
    consumer = StackSource(
        "c",
        {
            "Parameters": {"FsParam": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/fs"}},
            "Resources": {
                "Sg": {"Type": "AWS::EC2::SecurityGroup", "Properties": {
                    "A": {"Fn::ImportValue": "p:dns"}, "B": {"Fn::ImportValue": "p:sub"},
                    "C": {"Fn::ImportValue": "p:joined"}, "D": {"Ref": "FsParam"}, "E": {"Fn::ImportValue": "q:none"},
                }},
            },
        },
        {},
    )  # fmt: skip
    drawn = with_imports(consumer, [producer, consumer])
    assert drawn.template["Resources"]["Sg"]["Properties"] == {
        "A": {"Fn::GetAtt": ["p/Fs", "DNSName"]},
        "B": {"Ref": "p/Sub"},
        "C": {"Fn::ImportValue": "p:joined"},  # not one resource: left as it is
        "D": {"Ref": "p/Fs"},
        "E": {"Fn::ImportValue": "q:none"},  # exported by no stack of the app
    }
    copied = drawn.template["Resources"]["p/Fs"]
    assert copied == {"Type": "AWS::FSx::FileSystem", "Properties": {"SubnetIds": [{"Ref": "p/Sub"}]}}
    assert drawn.borrowed == {"p/Fs": "p", "p/Sub": "p"}
    assert with_imports(producer, [producer, consumer]) is producer
    graph = drawn.graph()
    assert graph.node("p/Fs").parent == "p/Sub" and graph.kept_on_delete() == {}


def test_the_cli_writes_each_stack_and_the_whole_app_the_same_every_time(
    assembly: Path, tmp_path: Path
) -> None:
    status, text = run("diagram", "--assembly", str(assembly), "-d", str(tmp_path / "pictures"))
    names = ["app", "Team-Cluster", "Team-Storage"]
    assert status == 0 and text.startswith(
        f"wrote {tmp_path / 'pictures' / 'app.svg'} (the whole app: 2 stacks"
    )
    assert sorted(p.name for p in (tmp_path / "pictures").iterdir()) == sorted(
        f"{n}.{s}" for n in names for s in ("svg", "md")
    )
    page = (tmp_path / "pictures" / "app.md").read_text()
    assert "![" in page and "- [Team-Cluster](Team-Cluster.md)\n- [Team-Storage](Team-Storage.md)\n" in page
    one = tmp_path / "one.svg"
    assert run("diagram", "--assembly", str(assembly), "--stack", "Team-Cluster", "-o", str(one))[0] == 0
    assert one.read_text() == (tmp_path / "pictures" / "Team-Cluster.svg").read_text()
    status, document = run(
        "--output", "json", "diagram", "--assembly", str(assembly), "-d", str(tmp_path / "again")
    )
    summary = json.loads(document)
    assert status == 0 and summary["stacks"] == ["Team-Cluster", "Team-Storage"]
    assert {(r["from"], r["to"]) for r in summary["references"]} == {("Team-Cluster", "Team-Storage")}
    for name in names:
        assert (tmp_path / "again" / f"{name}.svg").read_bytes() == (
            tmp_path / "pictures" / f"{name}.svg"
        ).read_bytes()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["-d", "{tmp}/out"], "--output-dir draws every stack of --assembly"),
        (["--assembly", "{assembly}", "--stack", "Team-Cluster", "-d", "{tmp}/out"], "without --stack or -o"),
        (["--assembly", "{assembly}", "-o", "{tmp}/x.svg", "-d", "{tmp}/out"], "without --stack or -o"),
        (
            ["--assembly", "{assembly}", "-d", "{assembly}/manifest.json"],
            "manifest.json' is a file; give a directory",
        ),
    ],
)
def test_output_dir_usage_errors_are_one_line(
    arguments: list[str], message: str, assembly: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, text = run("diagram", *[a.format(tmp=tmp_path, assembly=assembly) for a in arguments])
    err = unwrapped(capsys.readouterr().err)
    assert (status, text) == (2, "") and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())  # nothing drawn


def test_a_stack_named_app_would_overwrite_the_whole_apps_picture_and_is_refused(
    assembly: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "cdk.out"
    copy.mkdir()
    for path in assembly.rglob("*.json"):
        target = copy / path.relative_to(assembly)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text().replace('"stackName": "Team-Storage"', '"stackName": "app"'))
    status, _ = run("diagram", "--assembly", str(copy), "-d", str(tmp_path / "out"))
    err = capsys.readouterr().err
    assert status == 2 and "stacks app would be written to the same file (or to app.svg" in err
    assert not list((tmp_path / "out").glob("*"))


def test_an_ssm_dynamic_reference_and_a_parameter_read_by_a_resource_are_references() -> None:
    producer = {
        "Resources": {
            "Fs": {"Type": "AWS::FSx::FileSystem", "Properties": {}},
            "Name": {"Type": "AWS::SSM::Parameter", "Properties": {"Name": "/fs", "Value": {"Ref": "Fs"}}},
            "Plain": {"Type": "AWS::SSM::Parameter", "Properties": {"Name": "/plain", "Value": "x"}},
        }
    }
    consumer = {
        "Parameters": {"FsParam": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/fs"}},
        "Resources": {
            "Reader": {
                "Type": "AWS::EC2::SecurityGroup",
                "Properties": {"GroupDescription": {"Ref": "FsParam"}},
            },
            "Dynamic": {
                "Type": "AWS::EC2::SecurityGroup",
                "Properties": {"GroupDescription": "{{resolve:ssm:/plain:3}}"},
            },
            "Outside": {
                "Type": "AWS::EC2::SecurityGroup",
                "Properties": {"GroupDescription": "{{resolve:ssm:/elsewhere}}"},
            },
        },
    }
    found = {(r.name, r.resources, r.users) for r in cross_stack_references({"p": producer, "c": consumer})}
    assert found == {("/fs", ("Fs",), ("Reader",)), ("/plain", ("Plain",), ("Dynamic",))}
