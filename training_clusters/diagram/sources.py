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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training_clusters.diagram.model import LIFECYCLE_FILES, EnvironmentGraph, graph_from_template
from training_clusters.errors import ConfigurationError

__all__ = ["StackSource", "read_assembly", "read_stack", "source_of", "synthesize_environments"]

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

    def graph(self) -> EnvironmentGraph:
        return graph_from_template(self.template, title=self.stack_name, uploads=self.uploads)


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
    return sorted(_stacks(root), key=lambda s: s.stack_name)


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
    :class:`~training_clusters.constructs.hyperpod.HyperPodCluster` has. Every object key that deployment
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
        document = json.loads(Path("cdk.json").read_text())
    except (OSError, ValueError):
        return {}
    context = document.get("context") if isinstance(document, dict) else None
    return context if isinstance(context, dict) else {}


def _stacks(directory: Path) -> Iterator[StackSource]:
    manifest = json.loads((directory / "manifest.json").read_text())
    artifacts: dict[str, Any] = manifest.get("artifacts", {})
    for artifact_id, artifact in sorted(artifacts.items()):
        properties = artifact.get("properties", {})
        if artifact.get("type") == "aws:cloudformation:stack":
            template = json.loads((directory / properties["templateFile"]).read_text())
            assets = _assets_manifest(directory, artifacts, artifact)
            yield StackSource(
                stack_name=properties.get("stackName", artifact_id),
                template=template,
                uploads=_uploads(directory, assets),
            )
        elif artifact.get("type") == "cdk:cloud-assembly":
            yield from _stacks(directory / properties["directoryName"])


def _assets_manifest(
    directory: Path, artifacts: Mapping[str, Any], stack: Mapping[str, Any]
) -> dict[str, Any]:
    for dependency in stack.get("dependencies", []):
        artifact = artifacts.get(dependency, {})
        if artifact.get("type") == "cdk:asset-manifest":
            document: dict[str, Any] = json.loads((directory / artifact["properties"]["file"]).read_text())
            return document
    return {}


def _uploads(directory: Path, assets: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The settings files (:data:`LIFECYCLE_FILES`) of each folder asset that holds any, by its S3 object key."""
    found: dict[str, dict[str, Any]] = {}
    for asset in assets.get("files", {}).values():
        source = directory / asset.get("source", {}).get("path", "")
        settings: dict[str, Any] = {}
        for name in LIFECYCLE_FILES:
            settings.update(_settings_file(source / name))
        if settings:
            for destination in asset.get("destinations", {}).values():
                found[destination["objectKey"]] = settings
    return found


def _settings_file(path: Path) -> dict[str, Any]:
    """A JSON object uploaded with deploy-time markers in it (as ``null``); empty when absent or not JSON."""
    try:
        document = json.loads(_DEPLOY_TIME_MARKER.sub("null", path.read_text()))
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}
