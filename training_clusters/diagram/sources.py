"""Where a drawing's template comes from: a cloud assembly on disk, or environment files synthesized here.

Both paths end in :class:`StackSource`: the template plus the settings files the stack uploads
(:data:`~training_clusters.diagram.model.LIFECYCLE_FILES`: HyperPod's lifecycle scripts read node roles and
the mount point from them).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from training_clusters.config.yaml_file import read_bounded, read_json
from training_clusters.diagram.model import LIFECYCLE_FILES, EnvironmentGraph, graph_from_template
from training_clusters.diagram.template import _dict
from training_clusters.model.errors import ConfigurationError, excerpt

__all__ = [
    "STACK",
    "StackSource",
    "assembly_artifacts",
    "read_assembly",
    "read_stack",
    "read_template",
    "source_of",
    "synthesize_environments",
]

#: The artifact types of a cloud assembly this module reads, and the property naming each one's file.
STACK, NESTED_ASSEMBLY, ASSET_MANIFEST = (
    "aws:cloudformation:stack",
    "cdk:cloud-assembly",
    "cdk:asset-manifest",
)
_FILE_PROPERTY = {STACK: "templateFile", NESTED_ASSEMBLY: "directoryName", ASSET_MANIFEST: "file"}
#: The settings files read from an asset folder are small JSON documents.
_SETTINGS_FILE_BYTES = 256 * 1024

#: Where a deploy-time value goes in an uploaded JSON file (the bucket deployment fills it in, quoted).
_DEPLOY_TIME_MARKER = re.compile(r"<<marker:0x[0-9a-f]+:\d+>>")

#: Context that skips copying assets into the assembly: a drawing reads the templates, not the assets.
_DRAWING_CONTEXT = {"aws:cdk:disable-asset-staging": True}


@dataclass(frozen=True)
class StackSource:
    """One synthesized stack: its name, template and uploaded provisioning parameters (by S3 object key)."""

    stack_name: str
    template: Mapping[str, Any]
    uploads: Mapping[str, Mapping[str, Any]]
    borrowed: Mapping[str, str] = field(default_factory=dict)
    """Resources of ``template`` copied from the other stacks it imports them from (:func:`.app.with_imports`)."""

    def graph(self) -> EnvironmentGraph:
        return graph_from_template(
            self.template, title=self.stack_name, uploads=self.uploads, borrowed=self.borrowed
        )


def read_assembly(directory: str | Path) -> list[StackSource]:
    """Every stack of the cloud assembly in ``directory`` (``cdk.out``), nested stages included, by name.

    :raises ConfigurationError: ``directory`` is not a cloud assembly.
    """
    root = Path(directory)
    if not root.exists():
        raise ConfigurationError(f"{root}: no such cloud assembly (run cdk synth first)")
    if not root.is_dir():
        raise ConfigurationError(f"{root}: is a file; --assembly takes the folder cdk synth writes (cdk.out)")
    if not (root / "manifest.json").is_file():
        raise ConfigurationError(f"{root}: not a cloud assembly (no manifest.json); run cdk synth first")
    return sorted(_stacks(root, set()), key=lambda s: s.stack_name)


def assembly_artifacts(directory: Path) -> dict[str, dict[str, Any]]:
    """The artifacts of the cloud assembly in ``directory`` by id, as its ``manifest.json`` lists them.

    Each is checked to be a JSON object with object ``properties`` and ``metadata``, a string
    ``environment``, a list of ``dependencies``, and (for a stack, a nested assembly, an asset manifest)
    naming its file or folder by a path inside the assembly.

    :raises ConfigurationError: one line naming the manifest and what is wrong with it.
    """
    path = directory / "manifest.json"
    manifest = read_json(path, what="a cloud assembly manifest")
    if not isinstance(manifest, dict):
        raise ConfigurationError(
            f"{path}: must be a JSON object (a cloud assembly manifest), got {type(manifest).__name__}"
        )
    artifacts = manifest.get("artifacts", {})
    _expect(path, "artifacts", artifacts, dict)
    for artifact_id, artifact in artifacts.items():
        field = f"artifacts.{excerpt(artifact_id, 60)[1:-1]}"
        _expect(path, field, artifact, dict)
        properties = artifact.get("properties", {})
        _expect(path, f"{field}.properties", properties, dict)
        _expect(path, f"{field}.metadata", artifact.get("metadata", {}), dict)
        _expect(path, f"{field}.environment", artifact.get("environment", ""), str)
        _expect(path, f"{field}.dependencies", artifact.get("dependencies", []), list)
        kind = artifact.get("type")
        name = _FILE_PROPERTY.get(kind) if isinstance(kind, str) else None
        if name is not None and not _inside(properties.get(name)):
            raise ConfigurationError(
                f"{path}: {field}.properties.{name}: must name a file in the assembly, "
                f"got {excerpt(properties.get(name))}"
            )
    checked: dict[str, dict[str, Any]] = artifacts
    return checked


def read_template(path: Path) -> dict[str, Any]:
    """The CloudFormation template in ``path`` (a JSON object, bounded as :func:`read_json`)."""
    template = read_json(path, what="a CloudFormation template")
    if not isinstance(template, dict):
        raise ConfigurationError(
            f"{path}: must be a JSON object (a CloudFormation template), got {type(template).__name__}"
        )
    return template


def _expect(path: Path, field: str, value: object, kind: type) -> None:
    if not isinstance(value, kind):
        what = "a JSON object" if kind is dict else "a list" if kind is list else "a string"
        raise ConfigurationError(f"{path}: {field}: must be {what}, got {type(value).__name__}")


def _inside(name: object) -> TypeGuard[str]:
    """Whether ``name`` is a relative path below the assembly's folder (as CDK writes every one)."""
    if not isinstance(name, str) or not name:
        return False
    parts = Path(name).parts
    return not Path(name).is_absolute() and bool(parts) and ".." not in parts and parts != (".",)


def read_stack(directory: str | Path, stack_name: str | None) -> StackSource:
    """The stack named ``stack_name`` in the assembly (its only stack when ``None``).

    :raises ConfigurationError: no such stack, or several and none named.
    """
    stacks = read_assembly(directory)
    names = ", ".join(s.stack_name for s in stacks) or "none"
    if stack_name is None:
        if len(stacks) != 1:
            raise ConfigurationError(
                f"{directory}: holds {len(stacks)} stacks ({names}); choose one with --stack"
            )
        return stacks[0]
    for stack in stacks:
        if stack.stack_name == stack_name:
            return stack
    raise ConfigurationError(f"{directory}: no stack {stack_name!r}; stacks: {names}")


def synthesize_environments(
    paths: Iterable[Path], context: Mapping[str, Any] | None = None
) -> list[StackSource]:
    """Synthesize each environment file's stack (one app, no cdk-nag: nothing is deployed) and read it back.

    :param context: CDK context (feature flags). Default: ``context`` of ``cdk.json`` in the working folder
        when there is one, as ``cdk synth`` would use.
    """
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    import aws_cdk as cdk

    from training_clusters.environments import add_environment

    chosen = dict(_cdk_json_context() if context is None else context)
    with tempfile.TemporaryDirectory(prefix="training-clusters-diagram-") as outdir:
        app = cdk.App(outdir=outdir, context={**chosen, **_DRAWING_CONTEXT})
        stacks = [add_environment(app, Path(path)) for path in paths]
        app.synth()
        by_name = {s.stack_name: s for s in read_assembly(outdir)}
        return [source_of(stack, by_name[stack.stack_name].template) for stack in stacks]


def source_of(stack: Any, template: Mapping[str, Any]) -> StackSource:
    """A stack synthesized in this process, its uploads read from its constructs rather than its assets.

    Without asset staging (how this module and the test suite synthesize) generated files such as
    ``provisioning_parameters.json`` are not kept on disk, so they are taken from the construct that
    generates them: one with a ``deployment`` (a ``BucketDeployment``) and the settings it uploads,
    ``provisioning_parameters`` and ``lifecycle_settings`` (dicts), as
    :class:`~training_clusters.constructs.hyperpod.cluster.HyperPodCluster` has. Every object key that deployment
    uploads maps to the settings, merged.
    """
    import aws_cdk as cdk

    uploads: dict[str, Mapping[str, Any]] = {}
    resources = template.get("Resources", {})
    for construct in stack.node.find_all():
        parts = [getattr(construct, name, None) for name in ("provisioning_parameters", "lifecycle_settings")]
        settings = {k: v for part in parts if isinstance(part, dict) for k, v in part.items()}
        deployment = getattr(construct, "deployment", None)
        if not settings or deployment is None:
            continue
        resolved = stack.resolve(settings)
        for child in deployment.node.find_all():
            if (
                isinstance(child, cdk.CfnResource)
                and child.cfn_resource_type == "Custom::CDKBucketDeployment"
            ):
                logical_id = stack.resolve(stack.get_logical_id(child))
                keys = resources.get(logical_id, {}).get("Properties", {}).get("SourceObjectKeys", [])
                uploads.update({key: resolved for key in keys if isinstance(key, str)})
    return StackSource(stack_name=stack.stack_name, template=template, uploads=uploads)


def _cdk_json_context() -> dict[str, Any]:
    try:
        document = read_json(Path("cdk.json"), what="a CDK app's cdk.json")
    except ConfigurationError:
        return {}
    context = document.get("context") if isinstance(document, dict) else None
    return context if isinstance(context, dict) else {}


def _stacks(directory: Path, seen: set[Path]) -> Iterator[StackSource]:
    """The stacks of the assembly in ``directory`` and of the assemblies nested in it (each read once)."""
    seen.add(directory.resolve())
    artifacts = assembly_artifacts(directory)
    for artifact_id, artifact in sorted(artifacts.items()):
        properties = artifact.get("properties", {})
        if artifact.get("type") == STACK:
            template = read_template(directory / properties["templateFile"])
            assets = _assets_manifest(directory, artifacts, artifact)
            stack_name = properties.get("stackName")
            yield StackSource(
                stack_name=stack_name if isinstance(stack_name, str) else artifact_id,
                template=template,
                uploads=_uploads(directory, assets),
            )
        elif artifact.get("type") == NESTED_ASSEMBLY:
            nested = directory / properties["directoryName"]
            if not (nested / "manifest.json").is_file():
                raise ConfigurationError(f"{nested}: not a cloud assembly (no manifest.json)")
            if nested.resolve() in seen:
                raise ConfigurationError(
                    f"{directory / 'manifest.json'}: artifacts.{excerpt(artifact_id, 60)[1:-1]}: nests an "
                    "assembly already read (the assemblies loop)"
                )
            yield from _stacks(nested, seen)


def _assets_manifest(
    directory: Path, artifacts: Mapping[str, Any], stack: Mapping[str, Any]
) -> dict[str, Any]:
    for dependency in stack.get("dependencies", []):
        artifact = artifacts.get(dependency, {}) if isinstance(dependency, str) else {}
        if artifact.get("type") == ASSET_MANIFEST:
            path = directory / artifact["properties"]["file"]
            document = read_json(path, what="an asset manifest")
            return document if isinstance(document, dict) else {}
    return {}


def _uploads(directory: Path, assets: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The settings files (:data:`LIFECYCLE_FILES`) of each folder asset that holds any, by its S3 object key.

    Decoration for the drawing: an asset of another shape, or a settings file that cannot be read, is
    passed over.
    """
    found: dict[str, dict[str, Any]] = {}
    for asset in _dict(assets.get("files")).values():
        folder = _dict(_dict(asset).get("source")).get("path")
        if not _inside(folder):
            continue
        settings: dict[str, Any] = {}
        for name in LIFECYCLE_FILES:
            settings.update(_settings_file(directory / folder / name))
        if settings:
            for destination in _dict(_dict(asset).get("destinations")).values():
                key = _dict(destination).get("objectKey")
                if isinstance(key, str):
                    found[key] = settings
    return found


def _settings_file(path: Path) -> dict[str, Any]:
    """A JSON object uploaded with deploy-time markers in it (as ``null``); empty when absent, not a regular
    file of at most :data:`_SETTINGS_FILE_BYTES`, or not JSON."""
    if not path.is_file():
        return {}
    try:
        data = read_bounded(path, limit=_SETTINGS_FILE_BYTES, what="a settings file")
        document = json.loads(_DEPLOY_TIME_MARKER.sub("null", data.decode("utf-8")))
    except (ConfigurationError, ValueError, RecursionError):
        return {}
    return document if isinstance(document, dict) else {}
