"""A ParallelCluster configuration as a ``pcluster`` user's ``cluster-config.yaml``: every CloudFormation token
replaced by a deployed value or a realistic placeholder, each placeholder commented with what it stands for.

What :meth:`ParallelCluster.render_config <training_clusters.constructs.parallelcluster.cluster.ParallelCluster.render_config>`
and ``training-clusters render-pcluster`` write; no resource is made here.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import yaml
from aws_cdk import aws_ec2 as ec2

from training_clusters.model.errors import ConfigurationError
from training_clusters.rules.parallelcluster import PCLUSTER_VERSION

#: What :func:`substitute_placeholders` puts in place of a reference it has no value for, by resource type,
#: and what the rendered file's comment calls the resource: ids of the shape ParallelCluster's schema checks.
PLACEHOLDERS: Mapping[str, tuple[str, str]] = {
    "AWS::EC2::Subnet": ("subnet-0123456789abcdef", "subnet"),
    "AWS::EC2::SecurityGroup": ("sg-0123456789abcdef", "security group"),
    "AWS::FSx::FileSystem": ("fs-0123456789abcdef", "file system"),
    "AWS::EC2::PlacementGroup": ("training-placement-group-", "placement group"),
    "AWS::S3::Bucket": ("training-bucket-", "bucket"),
    "AWS::SecretsManager::Secret": (
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:training-secret-",
        "secret",
    ),
    "AWS::IAM::ManagedPolicy": ("arn:aws:iam::123456789012:policy/training-policy-", "managed policy"),
    "AWS::RDS::DBCluster": ("training-accounting-database-", "database cluster"),
}
PLACEHOLDER_PREFIXES: Mapping[str, str] = {kind: prefix for kind, (prefix, _) in PLACEHOLDERS.items()}
PSEUDO_PARAMETER_PLACEHOLDERS: Mapping[str, str] = {
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::AccountId": "123456789012",
    "AWS::Region": "us-east-1",
}
VPC_CIDR_PLACEHOLDER = "10.0.0.0/16"


def resource_types(stack: cdk.Stack) -> dict[str, str]:
    """``{logical id: CloudFormation type}`` of every resource ``stack``'s configuration may reference.

    That is every resource of the app: a cluster in its own stack references the VPC and subnets of a
    network stack and the file system of a storage stack by their logical ids there. The cluster's own stack
    wins where two stacks use the same logical id.
    """
    types: dict[str, str] = {}
    stacks = [s for s in stack.node.root.node.find_all() if isinstance(s, cdk.Stack) and s is not stack]
    for owner in [*stacks, stack]:
        for child in owner.node.find_all():
            if isinstance(child, cdk.CfnResource) and cdk.Stack.of(child) is owner:
                types[owner.resolve(child.logical_id)] = child.cfn_resource_type
    return types


def app_exports(stack: cdk.Stack) -> dict[str, Any]:
    """``{export name: the exported reference}`` of every stack output of the app.

    Once an app is synthesized, CDK has turned each reference into another stack into ``Fn::ImportValue``
    of an output it added there; this maps it back to the ``Ref``/``Fn::GetAtt`` it exports.
    """
    exports: dict[str, Any] = {}
    for owner in stack.node.root.node.find_all():
        if isinstance(owner, cdk.CfnOutput) and owner.export_name is not None:
            home = cdk.Stack.of(owner)
            exports[str(home.resolve(owner.export_name))] = home.resolve(owner.value)
    return exports


def template_values(stack: cdk.Stack) -> dict[str, str]:
    """Values the app's templates already hold for references: each VPC's ``CidrBlock`` where it is written
    out (``10.0.0.0/16`` from the environment file), keyed as :func:`substitute_placeholders` reads them."""
    known: dict[str, str] = {}
    for owner in (s for s in stack.node.root.node.find_all() if isinstance(s, cdk.Stack)):
        for child in owner.node.find_all():
            if isinstance(child, ec2.CfnVPC) and cdk.Stack.of(child) is owner:
                cidr = child.cidr_block
                if isinstance(cidr, str) and not cdk.Token.is_unresolved(cidr):
                    known[f"{owner.resolve(child.logical_id)}.CidrBlock"] = cidr
    return known


@dataclass(frozen=True)
class Placeholder:
    """What a placeholder of a rendered configuration stands for."""

    logical_id: str
    """The referenced resource's logical id, or the pseudo parameter (``AWS::AccountId``)."""
    attribute: str | None
    """The ``Fn::GetAtt`` attribute, or None for a ``Ref``."""
    kind: str
    """The resource's CloudFormation type; empty for a pseudo parameter."""


def substitute_placeholders(
    resolved: Any,
    *,
    resource_types: Mapping[str, str],
    values: Mapping[str, str] | None = None,
    region: str | None = None,
    strict: bool = False,
    exports: Mapping[str, Any] | None = None,
) -> Any:
    """Replace CloudFormation intrinsics in an already-resolved document with concrete values.

    ``Ref``/``Fn::GetAtt`` take ``values[logical id]`` / ``values["LogicalId.Attribute"]`` when given, else a
    realistic placeholder chosen by the referenced resource's type (one distinct id per resource);
    pseudo parameters take ``region`` and fixed placeholders; ``Fn::Join`` is joined after substitution;
    ``Fn::ImportValue`` of a name in ``exports`` becomes what that export holds.
    With ``strict``, a reference missing from ``values`` is an error instead of a placeholder.
    A pure function: it reads only its arguments.

    :raises ConfigurationError: an intrinsic it cannot turn into a value (e.g. ``Fn::ImportValue``), or with
        ``strict`` the references ``values`` lacks, each with its resource type.
    """
    return substitute_noting_placeholders(
        resolved,
        resource_types=resource_types,
        values=values,
        region=region,
        strict=strict,
        exports=exports,
    )[0]


def substitute_noting_placeholders(
    resolved: Any,
    *,
    resource_types: Mapping[str, str],
    values: Mapping[str, str] | None,
    region: str | None,
    strict: bool,
    exports: Mapping[str, Any] | None,
) -> tuple[Any, dict[str, Placeholder]]:
    """:func:`substitute_placeholders`, and what each placeholder it put in stands for (by its value)."""
    given = dict(values or {})
    used: dict[str, Placeholder] = {}
    missing: set[str] = set()
    pseudo = {**PSEUDO_PARAMETER_PLACEHOLDERS, **({"AWS::Region": region} if region else {})}
    counters: dict[str, itertools.count[int]] = {}
    assigned: dict[str, str] = {}

    def placeholder(key: str, logical_id: str, attribute: str | None) -> str:
        if key in given:
            return given[key]
        if key in assigned:
            return assigned[key]
        kind = resource_types.get(logical_id, "")
        if strict:
            missing.add(f"{key} ({kind or 'not a resource of the app'})")
        elif not kind:
            raise ConfigurationError(
                f"cannot render a reference to {key}: it is not a resource of this app, so no realistic "
                "placeholder exists; pass its deployed value in values"
            )
        if kind == "AWS::EC2::VPC" and attribute == "CidrBlock":
            value = VPC_CIDR_PLACEHOLDER
        elif kind in PLACEHOLDER_PREFIXES:
            value = f"{PLACEHOLDER_PREFIXES[kind]}{next(counters.setdefault(kind, itertools.count())):x}"
        else:
            value = f"placeholder-{logical_id.lower()}"
        assigned[key] = value
        used.setdefault(value, Placeholder(logical_id, attribute, kind))
        return value

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, argument),) = node.items()
            if key == "Ref":
                if argument in pseudo:
                    if argument in given:
                        return given[argument]
                    if argument != "AWS::Region" or region is None:
                        used.setdefault(pseudo[argument], Placeholder(argument, None, ""))
                    return pseudo[argument]
                return placeholder(argument, argument, None)
            if key == "Fn::GetAtt":
                logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
                return placeholder(f"{logical_id}.{attribute}", logical_id, attribute)
            if key == "Fn::Join":
                separator, parts = argument
                return separator.join(str(walk(part)) for part in parts)
            if key == "Fn::ImportValue" and isinstance(argument, str) and argument in (exports or {}):
                return walk((exports or {})[argument])  # another stack's resource, by its own logical id
            if key.startswith("Fn::"):
                raise ConfigurationError(f"cannot render {key} into a concrete value: {argument!r}")
        return {key: walk(value) for key, value in node.items()}

    document = walk(resolved)
    if missing:
        raise ConfigurationError("no deployed value for " + ", ".join(sorted(missing)))
    return document, used


#: Pseudo parameters a rendered file may hold a placeholder of, and what replaces it.
_PSEUDO_PARAMETER_NOTES: Mapping[str, str] = {
    "AWS::AccountId": "your AWS account id",
    "AWS::Region": "the stack's region",
    "AWS::Partition": "the partition (aws, aws-cn or aws-us-gov)",
    "AWS::URLSuffix": "the partition's domain (amazonaws.com)",
}


def placeholder_notes(placeholders: Mapping[str, Placeholder], stack: cdk.Stack) -> dict[str, str]:
    """``{placeholder: what replaces it}``: the resource (its construct path) and the stack output that
    holds its value, else its logical id, and the stack when it is not ``stack``. The harmless pseudo
    parameters (partition, URL suffix) are left out."""
    outputs = stack_outputs(stack)
    homes = resource_homes(stack)
    notes: dict[str, str] = {}
    for value, meant in placeholders.items():
        if not meant.kind:
            if meant.logical_id in ("AWS::AccountId", "AWS::Region"):
                notes[value] = _PSEUDO_PARAMETER_NOTES[meant.logical_id]
            continue
        key = meant.logical_id if meant.attribute is None else f"{meant.logical_id}.{meant.attribute}"
        home, path = homes.get(meant.logical_id, (stack.stack_name, meant.logical_id))
        noun = PLACEHOLDERS.get(meant.kind, ("", meant.kind))[1]
        what = f"{noun} {path}" if meant.attribute is None else f"{meant.attribute} of {noun} {path}"
        output = outputs.get(key)
        where = f"output {output[1]}" if output else f"resource {meant.logical_id}"
        if (output[0] if output else home) != stack.stack_name:
            where = f"stack {output[0] if output else home}, {where}"
        notes[value] = f"{what} ({where})"
    return notes


def resource_homes(stack: cdk.Stack) -> dict[str, tuple[str, str]]:
    """``{logical id: (stack name, construct path in it)}`` of every resource of the app, as
    :func:`resource_types` finds them (the cluster's own stack wins); trailing ``/Resource`` left off."""
    homes: dict[str, tuple[str, str]] = {}
    stacks = [s for s in stack.node.root.node.find_all() if isinstance(s, cdk.Stack) and s is not stack]
    for owner in [*stacks, stack]:
        for child in owner.node.find_all():
            if isinstance(child, cdk.CfnResource) and cdk.Stack.of(child) is owner:
                path = child.node.path.removeprefix(owner.node.path + "/")
                while path.endswith("/Resource"):
                    path = path.removesuffix("/Resource")
                homes[owner.resolve(child.logical_id)] = (owner.stack_name, path)
    return homes


def stack_outputs(stack: cdk.Stack) -> dict[str, tuple[str, str]]:
    """``{"LogicalId" or "LogicalId.Attribute": (stack name, output name)}``: the app's stack outputs that
    hold a resource's ``Ref`` or ``Fn::GetAtt``, the stacks' own before the exports CDK adds."""
    found: dict[str, tuple[str, str]] = {}
    outputs = [o for o in stack.node.root.node.find_all() if isinstance(o, cdk.CfnOutput)]
    for output in sorted(outputs, key=lambda o: o.export_name is None):  # exports first, then overridden
        home = cdk.Stack.of(output)
        value = home.resolve(output.value)
        if isinstance(value, dict) and len(value) == 1:
            ((function, argument),) = value.items()
            name = str(home.resolve(output.logical_id))
            if function == "Ref" and isinstance(argument, str):
                found[argument] = (home.stack_name, name)
            elif function == "Fn::GetAtt" and isinstance(argument, list) and len(argument) == 2:
                found[f"{argument[0]}.{argument[1]}"] = (home.stack_name, name)
    return found


def config_file_header(stack_name: str, placeholders: bool) -> str:
    """The comment that opens a rendered ``cluster-config.yaml``: what the file is for, and its placeholders."""
    lines = [
        f"AWS ParallelCluster {PCLUSTER_VERSION} configuration of the cluster in stack {stack_name}, rendered by",
        "cdk-training-clusters. It documents `cdk deploy` and does not replace it: the stack deploys this same",
        "configuration through ParallelCluster's CloudFormation provider (Custom::PclusterCluster). Use it to",
        "review the cluster, or with `pcluster create-cluster --cluster-configuration FILE` on a network, file",
        "system and security groups of your own instead of the stack's.",
    ]
    if placeholders:
        lines += [
            "A value marked `# placeholder` stands for an id known only after deploy: its comment names the",
            "resource, and the stack output `cdk deploy` prints with its value (or its logical id: aws",
            "cloudformation describe-stack-resource --stack-name STACK --logical-resource-id ID). After the",
            "deploy, `training-clusters render-pcluster ENVIRONMENT_FILE --deployed` fills in every one.",
        ]
    else:
        lines.append("Every id is a deployed one: the file holds no placeholder.")
    return "".join(f"# {line}\n" for line in lines)


def annotated_yaml(document: Mapping[str, Any], notes: Mapping[str, str], *, header: str = "") -> str:
    """``document`` as YAML under ``header``, each line that holds a placeholder of ``notes`` (as a whole
    word: ``subnet-...abcdef1`` is not in ``...abcdef10``) ending in ``# placeholder: <note>``.

    Lines are never folded, so every value ends on its own line; should a comment still land inside a value
    (a multi-line string), the notes go under the header instead, and the document is unchanged either way.
    """
    text = yaml.safe_dump(dict(document), sort_keys=False, width=1 << 16)
    if not notes:
        return header + text
    word = re.compile(
        r"(?<![\w-])(" + "|".join(re.escape(v) for v in sorted(notes, key=len, reverse=True)) + r")(?![\w-])"
    )
    lines = []
    for line in text.splitlines():
        found = list(dict.fromkeys(word.findall(line)))
        comment = "; ".join(notes[value] for value in found)
        lines.append(f"{line}  # placeholder: {comment}" if found else line)
    annotated = "\n".join(lines) + "\n"
    if yaml.safe_load(annotated) == yaml.safe_load(text):
        return header + annotated
    listed = "".join(f"# placeholder {value}: {note}\n" for value, note in notes.items())
    return header + listed + text
