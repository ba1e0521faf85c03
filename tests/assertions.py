"""Exact assertions on synthesized templates: IAM statements and security group rules, parsed.

A substring of a policy's JSON passes for the wrong action (``ec2:DeleteNetworkInterface`` is inside
``ec2:DeleteNetworkInterfacePermission``) and for a widened resource; a rule checked with ``has_resource_properties``
passes when a sibling rule is dropped. These helpers turn a template into comparable values, so a test states
the whole of what a role may do, or what a group lets in and out, and any one-line change fails it:

* :func:`text` renders a CloudFormation value as a string: ``{"Ref": "AWS::Partition"}`` is ``${AWS::Partition}``,
  ``{"Fn::GetAtt": ["Bucket", "Arn"]}`` is ``${Bucket.Arn}``, ``Fn::Join`` is joined, ``Fn::ImportValue`` is
  ``${Import:<name>}``; anything else is canonical JSON.
* :class:`Statement`: effect, actions, resources (as :func:`text`) and conditions of one IAM statement;
  :func:`policy_statements` of one policy, :func:`role_statements` of everything attached to one role.
* :class:`Rule`: direction, protocol, ports and peer of one security group rule, inline on the group or a
  separate ``AWS::EC2::SecurityGroupIngress`` / ``Egress`` resource; :func:`security_group_rules`.

This module never imports CDK: it reads template dictionaries (``Template.from_stack(stack).to_json()``);
:func:`logical_id` takes a construct and asks its stack.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TemplateJson = Mapping[str, Any]


def text(value: Any) -> str:
    """``value`` (a CloudFormation value) as one comparable string; see the module docstring."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    if isinstance(value, dict) and len(value) == 1:
        ((key, argument),) = value.items()
        if key == "Ref" and isinstance(argument, str):
            return f"${{{argument}}}"
        if key == "Fn::GetAtt":
            parts = argument.split(".", 1) if isinstance(argument, str) else argument
            return f"${{{parts[0]}.{text(parts[1])}}}"
        if key == "Fn::Join" and isinstance(argument, list) and isinstance(argument[1], list):
            return argument[0].join(text(part) for part in argument[1])
        if key == "Fn::Sub":
            template, variables = (argument, {}) if isinstance(argument, str) else argument
            return re.sub(
                r"\$\{([^}!]+)\}",
                lambda m: text(variables[m.group(1)]) if m.group(1) in variables else m.group(0),
                template,
            )
        if key == "Fn::Base64":
            return text(argument)  # the text before encoding
        if key == "Fn::ImportValue":
            return f"${{Import:{text(argument)}}}"
        if key == "Fn::Select" and isinstance(argument[1], list):
            return text(argument[1][int(argument[0])])
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


Conditions = frozenset[tuple[str, str, frozenset[str]]]


def _conditions(condition: Mapping[str, Mapping[str, Any]] | None) -> Conditions:
    """``{"StringEquals": {"aws:x": ["a", "b"]}}`` as a set of (operator, key, values as text)."""
    return frozenset(
        (operator, key, frozenset(text(v) for v in _as_list(values)))
        for operator, pairs in (condition or {}).items()
        for key, values in pairs.items()
    )


@dataclass(frozen=True)
class Statement:
    """One IAM statement, parsed: every field compared whole, actions and resources as sets."""

    effect: str
    actions: frozenset[str]
    resources: frozenset[str] = frozenset()
    conditions: Conditions = frozenset()
    principals: frozenset[str] = frozenset()
    not_actions: frozenset[str] = frozenset()
    not_resources: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, statement: Mapping[str, Any]) -> Statement:
        unknown = set(statement) - {
            "Effect", "Action", "Resource", "Condition", "Principal", "NotAction", "NotResource", "Sid",
        }  # fmt: skip
        assert not unknown, f"a statement field these helpers do not compare: {unknown}"
        principal = statement.get("Principal", {})
        principals = (
            {f"{kind}:{text(p)}" for kind, values in principal.items() for p in _as_list(values)}
            if isinstance(principal, dict)
            else {text(principal)}
        )
        return cls(
            effect=statement["Effect"],
            actions=frozenset(_as_list(statement.get("Action", []))),
            resources=frozenset(text(r) for r in _as_list(statement.get("Resource", []))),
            conditions=_conditions(statement.get("Condition")),
            principals=frozenset(principals),
            not_actions=frozenset(_as_list(statement.get("NotAction", []))),
            not_resources=frozenset(text(r) for r in _as_list(statement.get("NotResource", []))),
        )


def allow(
    actions: Iterable[str],
    resources: Iterable[Any],
    conditions: Mapping[str, Mapping[str, Any]] | None = None,
) -> Statement:
    """The Allow statement a test expects; ``resources`` may be template values (rendered with :func:`text`)."""
    return Statement(
        "Allow",
        frozenset(actions),
        frozenset(text(r) for r in resources),
        _conditions(conditions),
    )


def trust(principals: Iterable[str], actions: Iterable[str] = ("sts:AssumeRole",)) -> Statement:
    """An Allow statement of a trust policy: ``principals`` as ``"Service:sagemaker.amazonaws.com"``."""
    return Statement("Allow", frozenset(actions), principals=frozenset(principals))


def document_statements(document: Mapping[str, Any]) -> list[Statement]:
    """Every statement of a policy document, parsed, in its order."""
    return [Statement.parse(s) for s in _as_list(document.get("Statement", []))]


def policy_statements(template: TemplateJson, logical_id: str) -> list[Statement]:
    """The statements of the ``AWS::IAM::Policy`` or ``AWS::IAM::ManagedPolicy`` ``logical_id``, in order."""
    resource = template["Resources"][logical_id]
    assert resource["Type"] in {"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"}, resource["Type"]
    return document_statements(resource["Properties"]["PolicyDocument"])


def _attached_to(properties: Mapping[str, Any], role: str) -> bool:
    return any(text(r) == f"${{{role}}}" for r in properties.get("Roles", []))


def role_policies(template: TemplateJson, role: str) -> list[str]:
    """The logical ids of the policies (inline-attached and customer managed) this template attaches to ``role``."""
    return sorted(
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] in {"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"}
        and _attached_to(resource["Properties"], role)
    )


def role_statements(template: TemplateJson, role: str) -> set[Statement]:
    """Every statement that grants the role ``role`` (a logical id) something, from every policy of this
    template attached to it and from the role's own inline ``Policies``; a set, since CDK merges
    statements and their order means nothing."""
    resource = template["Resources"][role]
    assert resource["Type"] == "AWS::IAM::Role", resource["Type"]
    found = {s for p in role_policies(template, role) for s in policy_statements(template, p)}
    for inline in resource["Properties"].get("Policies", []):
        found.update(document_statements(inline["PolicyDocument"]))
    return found


def trust_statements(template: TemplateJson, role: str) -> set[Statement]:
    """The role's trust policy (``AssumeRolePolicyDocument``), parsed."""
    return set(document_statements(template["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]))


def managed_policy_arns(template: TemplateJson, role: str) -> set[str]:
    """The role's ``ManagedPolicyArns`` as :func:`text`, e.g. ``arn:${AWS::Partition}:iam::aws:policy/X``."""
    return {text(arn) for arn in template["Resources"][role]["Properties"].get("ManagedPolicyArns", [])}


def aws_managed(name: str) -> str:
    """The :func:`text` of the AWS-managed policy ``name``'s ARN as CDK writes it."""
    return f"arn:${{AWS::Partition}}:iam::aws:policy/{name}"


# ----------------------------------------------------------------------------------------------
# security groups


@dataclass(frozen=True)
class Rule:
    """One security group rule: ``peer`` is a CIDR, a prefix list, or a group's logical id (of this template)
    or :func:`text` (of an imported one). Ports are None for all traffic (protocol ``-1``)."""

    direction: str
    protocol: str
    from_port: int | None
    to_port: int | None
    peer: str
    description: str = field(default="", compare=False)


def ingress(peer: str, ports: int | tuple[int, int] | None = None, protocol: str = "tcp") -> Rule:
    """An ingress rule a test expects: ``ports`` one port or an inclusive range; None with ``protocol`` -1."""
    return _rule("ingress", peer, ports, protocol)


def egress(peer: str, ports: int | tuple[int, int] | None = None, protocol: str = "tcp") -> Rule:
    """An egress rule a test expects (see :func:`ingress`)."""
    return _rule("egress", peer, ports, protocol)


def all_traffic(direction: str, peer: str) -> Rule:
    return Rule(direction, "-1", None, None, peer)


def _rule(direction: str, peer: str, ports: int | tuple[int, int] | None, protocol: str) -> Rule:
    low, high = (ports, ports) if isinstance(ports, int) else (ports or (None, None))
    return Rule(direction, protocol, low, high, peer)


#: The placeholder CDK writes as a group's only egress rule when it allows no outbound traffic.
NO_EGRESS = Rule("egress", "icmp", 252, 86, "255.255.255.255/32")

_PEERS = {
    "ingress": ("CidrIp", "CidrIpv6", "SourceSecurityGroupId", "SourcePrefixListId"),
    "egress": ("CidrIp", "CidrIpv6", "DestinationSecurityGroupId", "DestinationPrefixListId"),
}


def _peer(properties: Mapping[str, Any], direction: str) -> str:
    (key,) = [k for k in _PEERS[direction] if k in properties]
    value = properties[key]
    if (
        isinstance(value, dict)
        and list(value) == ["Fn::GetAtt"]
        and _as_list(value["Fn::GetAtt"])[1:] == ["GroupId"]
    ):
        return str(value["Fn::GetAtt"][0])
    return text(value)


def _parse_rule(properties: Mapping[str, Any], direction: str) -> Rule:
    protocol = str(properties["IpProtocol"])
    ports = (properties.get("FromPort"), properties.get("ToPort"))
    return Rule(
        direction,
        "-1" if protocol in {"-1", "all"} else protocol,
        None if ports[0] is None else int(ports[0]),
        None if ports[1] is None else int(ports[1]),
        _peer(properties, direction),
        properties.get("Description", ""),
    )


def _is_group(value: Any, group: str | Mapping[str, Any]) -> bool:
    if isinstance(group, str):
        return text(value) in {f"${{{group}.GroupId}}", f"${{{group}}}"}
    return text(value) == text(group)


def security_group_rules(template: TemplateJson, group: str | Mapping[str, Any]) -> set[Rule]:
    """Every rule of the security group ``group`` this template holds: its inline ingress and egress, and
    each ``AWS::EC2::SecurityGroupIngress`` / ``Egress`` whose ``GroupId`` is it.

    ``group`` is the group's logical id in this template, or for a group of another stack the value this
    template refers to it by (e.g. ``{"Fn::ImportValue": ...}``).
    """
    rules: set[Rule] = set()
    resources = template["Resources"]
    if isinstance(group, str) and group in resources:
        properties = resources[group]["Properties"]
        assert resources[group]["Type"] == "AWS::EC2::SecurityGroup", resources[group]["Type"]
        rules.update(_parse_rule(p, "ingress") for p in properties.get("SecurityGroupIngress", []))
        rules.update(_parse_rule(p, "egress") for p in properties.get("SecurityGroupEgress", []))
    for resource in resources.values():
        direction = {
            "AWS::EC2::SecurityGroupIngress": "ingress",
            "AWS::EC2::SecurityGroupEgress": "egress",
        }.get(resource["Type"])
        if direction and _is_group(resource["Properties"]["GroupId"], group):
            rules.add(_parse_rule(resource["Properties"], direction))
    return rules


def logical_id(construct: Any) -> str:
    """The logical id of ``construct``'s CloudFormation resource (the construct, or its default child)."""
    import aws_cdk as cdk  # only when asked: the rest of this module reads dictionaries

    resource = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
    return str(cdk.Stack.of(resource).get_logical_id(resource))


def arn_prefix(stack: Any, service: str) -> str:
    """``arn:<partition>:<service>:<region>:<account>:`` of ``stack`` as :func:`text` renders its template."""
    return text(stack.resolve(f"arn:{stack.partition}:{service}:{stack.region}:{stack.account}:"))


def values_of(tree: Any, key: str) -> list[Any]:
    """Every value held under ``key`` anywhere in ``tree`` (a template or part of one), in document order."""
    found: list[Any] = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            if k == key:
                found.append(v)
            found.extend(values_of(v, key))
    elif isinstance(tree, list):
        for item in tree:
            found.extend(values_of(item, key))
    return found


def manifest_objects(resource: Mapping[str, Any]) -> list[Any]:
    """The Kubernetes objects a ``Custom::AWSCDK-EKS-KubernetesResource`` applies, parsed (tokens in their
    strings rendered with :func:`text`)."""
    objects: list[Any] = json.loads(text(resource["Properties"]["Manifest"]))
    return objects


def numbered_steps(value: Any) -> list[str]:
    """The steps of a ``NextSteps`` output (``1) first 2) second``), each whole, tokens as :func:`text`."""
    return re.split(r"(?:^| )\d+\) ", text(value))[1:]


def deployed_files(assembly_dir: str | Path, deployment: Mapping[str, Any]) -> list[dict[str, bytes]]:
    """The files a ``Custom::CDKBucketDeployment`` uploads, one mapping (key under the prefix -> bytes) per source
    in the order of ``SourceObjectKeys``: each ``<hash>.zip`` is looked up in the assembly's asset manifests. The
    assembly must have been synthesized with asset staging on (the tests turn it off: ``post_cli_context=
    {"aws:cdk:disable-asset-staging": False}``), so the staged folder holds what the zip holds, excludes applied
    (``Source.data`` and ``Source.json_data`` are staged as folders too, their markers not yet replaced)."""
    sources: dict[str, Path] = {}
    for manifest in Path(assembly_dir).glob("*.assets.json"):
        for asset_hash, asset in json.loads(manifest.read_text())["files"].items():
            source = Path(asset["source"]["path"])
            sources[asset_hash] = source if source.is_absolute() else Path(assembly_dir) / source
    return [
        {
            f.relative_to(sources[key]).as_posix(): f.read_bytes()
            for f in sources[key].rglob("*")
            if f.is_file()
        }
        for key in re.findall(r"[0-9a-f]{64}", json.dumps(deployment["Properties"]["SourceObjectKeys"]))
    ]
