"""Tags for what a service launches for us: the stack's tags and those ``Tags.of(...)`` applies, read at synth.

``cdk.Tags.of(app).add(...)`` is an aspect: it runs when the app is synthesized, long after our constructs
are built, and reaches only constructs that are taggable (a :class:`cdk.TagManager` in a ``tags``
attribute). Instances an EKS nodegroup or PCS launches from our launch template, and everything
ParallelCluster creates, are not resources of our templates: they get tags only from what we write into the
launch template's ``TagSpecifications`` or ParallelCluster's ``Tags``. So, as aws-cdk-lib's own L2
``ec2.LaunchTemplate`` does (``aws-ec2/lib/launch-template.ts``: a ``TagManager`` read by a ``Lazy`` when the
template is rendered), we keep a tag manager the aspects fill and render it lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import aws_cdk as cdk
import jsii
from constructs import Construct, IConstruct

#: The resources a launch template tags as they are launched: the instance, its volumes and its interfaces.
LAUNCHED_RESOURCE_TYPES = ("instance", "volume", "network-interface")


def stack_and_aspect_tags(scope: IConstruct, manager: cdk.TagManager) -> dict[str, str]:
    """The tags of ``scope``'s stack (``cdk.Stack(tags=...)``, which CloudFormation puts on the stack's own
    resources but never on what a service launches), overridden by those ``manager`` holds (``Tags.of``
    applied to the construct or any of its scopes, and a construct's own tags)."""
    tags = dict(cdk.Stack.of(scope).tags.tag_values())
    tags.update(manager.tag_values())
    return tags


@jsii.implements(cdk.ITaggable)
class TagSink(Construct):
    """A construct without resources whose ``tags`` the tag aspects fill, for a resource that cannot hold
    them itself (an L1 launch template has no tag manager for the instances it launches). It sits beside
    that resource, so the resource's construct path and logical id stay as they were."""

    def __init__(self, scope: Construct, id: str, *, resource_type: str) -> None:
        super().__init__(scope, id)
        self._tags = cdk.TagManager(cdk.TagType.KEY_VALUE, resource_type)

    @property
    def tags(self) -> cdk.TagManager:
        return self._tags


@jsii.implements(cdk.IAnyProducer)
class _Produce:
    def __init__(self, produce: Callable[[], Any]) -> None:
        self._produce = produce

    def produce(self, context: cdk.IResolveContext) -> Any:
        return self._produce()


def lazy(produce: Callable[[], Any]) -> Any:
    """A value computed each time it is resolved, so when the template is rendered it sees what the aspects
    did; ``None`` leaves it out."""
    return cdk.Lazy.uncached_any(_Produce(produce))


def launch_template_tags(scope: Construct, id: str) -> Any:
    """``LaunchTemplateData.TagSpecifications`` for the launch template ``id`` in ``scope``: the stack's and
    the aspects' tags on each launched instance, volume and network interface, resolved at synth; left out
    when there are none. The tag manager is the construct ``<id>Tags`` beside the template."""
    sink = TagSink(scope, f"{id}Tags", resource_type="AWS::EC2::LaunchTemplate")

    def produce() -> list[dict[str, Any]] | None:
        tags = dict(sorted(stack_and_aspect_tags(sink, sink.tags).items()))
        if not tags:
            return None
        # the L1 renders the resolved list through its own property mapper: its (camelCase) property names
        rendered = [{"key": key, "value": value} for key, value in tags.items()]
        return [{"resourceType": kind, "tags": rendered} for kind in LAUNCHED_RESOURCE_TYPES]

    return lazy(produce)


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    """``[{"Key": k, "Value": v}, ...]``, CloudFormation's and ParallelCluster's shape of a tag list."""
    return [{"Key": key, "Value": value} for key, value in tags.items()]
