"""A multi-stack app as one picture: each stack a box holding what it builds, the references between stacks drawn.

A stack uses another's resource in one of three ways CloudFormation resolves at deploy time, all read from the
templates of one cloud assembly (nested stages included):

- ``Fn::ImportValue`` of an output the other stack exports (what CDK writes for a construct passed from one
  stack to another in the same account and region, ``Outputs.<id>.Export.Name``);
- an SSM parameter the other stack writes (``AWS::SSM::Parameter`` with a literal ``Name``), read as a template
  parameter of type ``AWS::SSM::Parameter::Value<...>`` (``ssm.StringParameter.value_for_string_parameter``) or
  as a dynamic reference ``{{resolve:ssm:NAME}}``;

Each reference is drawn from the consumer's box to what it refers to in the producer's box (the drawn node of that
resource, or the one it belongs to: a subnet to its VPC, a security group to its file system), labelled with what
is referenced and how.

>>> network = {"Resources": {"Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}},
...            "Outputs": {"Out": {"Value": {"Ref": "Vpc"}, "Export": {"Name": "net:vpc"}}}}
>>> cluster = {"Resources": {"Sg": {"Type": "AWS::EC2::SecurityGroup",
...                                 "Properties": {"VpcId": {"Fn::ImportValue": "net:vpc"}}}}}
>>> [(r.consumer, r.producer, r.via, r.resources, r.users) for r in cross_stack_references(
...     {"network": network, "cluster": cluster})]
[('cluster', 'network', 'Fn::ImportValue', ('Vpc',), ('Sg',))]
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from training_clusters.diagram.graph import TIMES, Edge, EdgeKind, EnvironmentGraph, Node, NodeKind
from training_clusters.diagram.sources import StackSource
from training_clusters.diagram.template import _dict, _literal, _owner, _readable, _resources, _targets, _what

__all__ = ["APP_KINDS", "CrossStackReference", "app_graph", "cross_stack_references", "with_imports"]

IMPORT_VALUE, SSM_PARAMETER = "Fn::ImportValue", "SSM parameter"
"""How a reference crosses between stacks (:attr:`CrossStackReference.via`)."""

#: What a stack's box shows of the stack's own drawing (the rest is in its own picture).
APP_KINDS = (
    NodeKind.VPC,
    NodeKind.FILE_SYSTEM,
    NodeKind.DATABASE,
    NodeKind.BUCKET,
    NodeKind.CLUSTER,
    NodeKind.NODE_GROUP,
    NodeKind.PLACEMENT_GROUP,
)
#: What a referenced resource is called on an edge, where :func:`~.model._what`'s name would not do.
_WHAT = {
    "AWS::S3::Bucket": "S3 bucket",
    "AWS::EC2::VPC": "VPC",
    "AWS::FSx::FileSystem": "file system",
    "AWS::EKS::Cluster": "EKS cluster",
    "AWS::IAM::Role": "IAM role",
    "AWS::EC2::PlacementGroup": "placement group",
    "AWS::RDS::DBCluster": "DB cluster",
}
_SSM_TYPE = re.compile(r"AWS::SSM::Parameter::Value<.+>")
_SSM_DYNAMIC = re.compile(r"\{\{resolve:ssm:([^}:]+)(?::\d+)?\}\}")


@dataclass(frozen=True, order=True)
class CrossStackReference:
    """``consumer``'s resources ``users`` (logical ids; none for a template parameter or an output) use
    ``resources`` of ``producer`` through ``via`` under ``name`` (the export's or the parameter's name)."""

    consumer: str
    producer: str
    via: str
    name: str
    resources: tuple[str, ...]
    users: tuple[str, ...] = ()


def cross_stack_references(templates: Mapping[str, Mapping[str, Any]]) -> list[CrossStackReference]:
    """Every reference between the stacks of ``templates`` (stack name -> template), sorted.

    An import or parameter that no stack of the app provides (made outside it) is not a reference between them.
    """
    provided = _provided(templates)
    found: dict[tuple[str, str, str], tuple[str, tuple[str, ...], set[str]]] = {}
    for stack, template in templates.items():
        for via, name, user in _uses(template):
            producer, value = provided.get((via, name), (None, None))
            resources = tuple(dict.fromkeys(_targets(value))) if producer is not None else ()
            if producer is not None and producer != stack:
                users = found.setdefault((stack, via, name), (producer, resources, set()))[2]
                if user is not None:
                    users.add(user)
    return sorted(
        CrossStackReference(stack, producer, via, name, resources, tuple(sorted(users)))
        for (stack, via, name), (producer, resources, users) in found.items()
    )


def _provided(templates: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, str], tuple[str, Any]]:
    """(how, name) -> (the stack, the value) of every export and every SSM parameter with a literal name
    (a parameter written from no resource stands for itself)."""
    provided: dict[tuple[str, str], tuple[str, Any]] = {}
    for stack, template in templates.items():
        for output in _dict(template.get("Outputs")).values():
            name = _literal(_dict(_dict(output).get("Export")).get("Name"))
            if name is not None:
                provided[(IMPORT_VALUE, name)] = (stack, _dict(output).get("Value"))
        for logical_id, resource in _resources(template).items():
            if resource.get("Type") == "AWS::SSM::Parameter":
                properties = _dict(resource.get("Properties"))
                name = _literal(properties.get("Name"))
                if name is not None:
                    value = properties.get("Value")
                    provided[(SSM_PARAMETER, name)] = (
                        stack,
                        value if any(_targets(value)) else {"Ref": logical_id},
                    )
    return provided


def with_imports(source: StackSource, sources: Sequence[StackSource]) -> StackSource:
    """``source`` with a copy of each resource it imports from another stack of ``sources`` (by an export, or
    an SSM parameter read as a template parameter), its import rewritten to refer to the copy, so its own
    picture draws a node group in the imported subnet and mounting the imported file system.

    A copy is named ``<stack>/<logical id>``, keeps its properties (its references to other copies rewritten
    to them) and loses its ``DeletionPolicy`` (the other stack keeps it, not this one); ``borrowed`` names its
    stack. An import whose value is not a ``Ref`` or ``Fn::GetAtt`` of one resource is left as it is.
    """
    templates = {s.stack_name: s.template for s in sources}
    provided = _provided(templates)
    borrowed: dict[str, tuple[str, str]] = {}

    def copy_of(value: Any) -> Any:
        """The value with its reference (``Ref`` / ``Fn::GetAtt`` of an export's resource) to the copy."""
        producer, exported = value
        target = _one_resource(exported)
        if producer == source.stack_name or target is None or target not in _resources(templates[producer]):
            return None
        stub = f"{producer}/{target}"
        borrowed[stub] = (producer, target)
        return _retarget(exported, stub)

    def imported(value: Any) -> Any:
        name = _literal(value.get(IMPORT_VALUE)) if isinstance(value, dict) and len(value) == 1 else None
        found = provided.get((IMPORT_VALUE, name)) if name is not None else None
        return copy_of(found) if found is not None else None

    template = _rewrite(copy.deepcopy(dict(source.template)), imported)
    for parameter_id, parameter in _dict(template.get("Parameters")).items():
        kind, default = _literal(_dict(parameter).get("Type")), _literal(_dict(parameter).get("Default"))
        found = provided.get((SSM_PARAMETER, default)) if default is not None else None
        if kind is not None and _SSM_TYPE.fullmatch(kind) and found is not None:
            replacement = copy_of(found)
            if replacement is not None:
                template = _rewrite(template, _replacing({"Ref": parameter_id}, replacement))
    if not borrowed:
        return source
    stubs = {(producer, target): stub for stub, (producer, target) in borrowed.items()}
    resources = dict(_resources(template))
    for stub, (producer, target) in sorted(borrowed.items()):
        original = _resources(templates[producer])[target]
        copied = {key: copy.deepcopy(original[key]) for key in ("Type", "Properties") if key in original}
        resources[stub] = _rewrite(copied, _to_copies(producer, stubs))
    template["Resources"] = resources
    return replace(source, template=template, borrowed={stub: p for stub, (p, _) in borrowed.items()})


def _replacing(old: Any, new: Any) -> Callable[[Any], Any]:
    return lambda value: new if value == old else None


def _to_copies(producer: str, stubs: Mapping[tuple[str, str], str]) -> Callable[[Any], Any]:
    """A :func:`_rewrite` replacement: a reference to a resource of ``producer`` that has a copy, to the copy."""

    def replacement(value: Any) -> Any:
        target = _one_resource(value)
        return _retarget(value, stubs[(producer, target)]) if target and (producer, target) in stubs else None

    return replacement


def _one_resource(value: Any) -> str | None:
    """The logical id a ``Ref`` or ``Fn::GetAtt`` (list form) names."""
    if isinstance(value, dict) and len(value) == 1:
        if isinstance(value.get("Ref"), str):
            return str(value["Ref"])
        attribute = value.get("Fn::GetAtt")
        if isinstance(attribute, list) and len(attribute) == 2 and isinstance(attribute[0], str):
            return attribute[0]
    return None


def _retarget(value: Any, logical_id: str) -> Any:
    """A ``Ref`` or ``Fn::GetAtt`` like ``value`` naming ``logical_id`` instead."""
    if "Ref" in value:
        return {"Ref": logical_id}
    return {"Fn::GetAtt": [logical_id, value["Fn::GetAtt"][1]]}


def _rewrite(value: Any, replacement: Callable[[Any], Any]) -> Any:
    """``value`` with each part for which ``replacement`` gives something else than ``None`` replaced by it."""
    found = replacement(value)
    if found is not None:
        return found
    if isinstance(value, dict):
        return {key: _rewrite(item, replacement) for key, item in value.items()}
    if isinstance(value, list):
        return [_rewrite(item, replacement) for item in value]
    return value


def _uses(template: Mapping[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """(how, name, the resource that reads it) of each import and SSM parameter ``template`` reads; an SSM
    parameter read as a template parameter is read by every resource that refers to the parameter."""
    readers: dict[str, list[str]] = {}
    for logical_id, resource in _resources(template).items():
        for via, name in _uses_in(resource):
            yield via, name, logical_id
        for target in _targets(resource):
            readers.setdefault(target, []).append(logical_id)
    for parameter_id, parameter in _dict(template.get("Parameters")).items():
        parameter = _dict(parameter)
        kind, default = _literal(parameter.get("Type")), _literal(parameter.get("Default"))
        if kind is not None and default is not None and _SSM_TYPE.fullmatch(kind):
            found: list[str | None] = list(readers.get(parameter_id, [])) or [None]
            for reader in found:
                yield SSM_PARAMETER, default, reader
    for via, name in _uses_in(template.get("Outputs")):
        yield via, name, None


def _uses_in(value: Any) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        imported = value.get(IMPORT_VALUE) if len(value) == 1 else None
        name = _literal(imported)
        if name is not None:
            yield IMPORT_VALUE, name
        for item in value.values():
            yield from _uses_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _uses_in(item)
    elif isinstance(value, str):
        for match in _SSM_DYNAMIC.finditer(value):
            yield SSM_PARAMETER, match.group(1)


def app_graph(
    graphs: Mapping[str, EnvironmentGraph], templates: Mapping[str, Mapping[str, Any]], *, title: str
) -> EnvironmentGraph:
    """The whole app: a box per stack holding its VPC, clusters, node groups, file systems, databases and
    buckets (:data:`APP_KINDS`, with their kept-on-delete badges), and an ``imports`` edge per reference.

    :param graphs: Each stack's own drawing, by stack name.
    :param templates: Each stack's template, by stack name (the references are read from them).
    """
    nodes: list[Node] = []
    by_logical_id: dict[tuple[str, str], str] = {}
    for stack in sorted(graphs):
        graph, box = graphs[stack], _stack_id(stack)
        shown = [n for n in graph.nodes if n.kind in APP_KINDS]
        count = len(_resources(templates[stack]))
        nodes.append(
            Node(box, NodeKind.STACK, f"stack {stack}", (f"{count} resource{'s' if count != 1 else ''}",))
        )
        for node in shown:
            nodes.append(replace(node, id=f"{box}/{node.id}", parent=box, cluster=None))
            if node.logical_id is not None:
                by_logical_id[(stack, node.logical_id)] = f"{box}/{node.id}"
    edges: dict[tuple[str, str, str], dict[str, str]] = {}
    for reference in cross_stack_references(templates):
        producer, consumer = graphs[reference.producer], graphs[reference.consumer]
        resources = _resources(templates[reference.producer])
        via = "imports" if reference.via == IMPORT_VALUE else "SSM parameter:"
        sources = {_drawn_for(consumer, reference.consumer, u, by_logical_id) for u in reference.users}
        for source in sorted(sources or {_stack_id(reference.consumer)}):
            for resource in reference.resources:
                target = _drawn_for(producer, reference.producer, resource, by_logical_id)
                kind = _dict(resources.get(resource)).get("Type")
                what = _WHAT.get(kind, _what(kind)) if isinstance(kind, str) else _readable(resource)
                edges.setdefault((source, target, via), {})[resource] = what
    drawn_edges = tuple(
        sorted(
            Edge(source, target, EdgeKind.IMPORTS, f"{via} {_counted(list(whats.values()))}")
            for (source, target, via), whats in edges.items()
        )
    )
    return EnvironmentGraph(title=title, nodes=tuple(nodes), edges=drawn_edges)


def _stack_id(stack: str) -> str:
    return f"stack:{stack}"


def _drawn_for(
    graph: EnvironmentGraph, stack: str, resource: str, by_logical_id: Mapping[tuple[str, str], str]
) -> str:
    """The node of the app's drawing that stands for ``resource`` of ``stack``: its own, the box it is drawn in
    (a subnet's VPC), the drawn resource it belongs to by name (``FsxSecurityGroup`` -> ``Fsx``), else the
    stack's box."""
    if (stack, resource) in by_logical_id:
        return by_logical_id[(stack, resource)]
    inner = [n for n in graph.nodes if n.logical_id == resource]
    if inner:
        for ancestor in graph.ancestors(inner[0].id):
            node = graph.node(ancestor)
            if node.logical_id is not None and (stack, node.logical_id) in by_logical_id:
                return by_logical_id[(stack, node.logical_id)]
    owners = {_readable(logical_id): node for (s, logical_id), node in by_logical_id.items() if s == stack}
    return _owner(_readable(resource), owners) or _stack_id(stack)


def _counted(whats: list[str]) -> str:
    """``subnet x 2, security group`` (multiplication sign), in first-seen order."""
    counts: dict[str, int] = {}
    for what in whats:
        counts[what] = counts.get(what, 0) + 1
    return ", ".join(what if n == 1 else f"{what} {TIMES} {n}" for what, n in counts.items())
