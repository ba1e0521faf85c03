"""What outlives the stack: every resource kept on delete, drawn or summarised."""

from __future__ import annotations

from dataclasses import replace

from training_clusters.diagram.graph import Node, NodeKind
from training_clusters.diagram.readers.base import GraphReader
from training_clusters.diagram.template import _owner, _readable, _what


class RetainedReader(GraphReader):
    def retained_resources(self) -> None:
        """A retained resource that is not drawn is badged on the drawn resource it belongs to (a bucket's
        access-log bucket; else the one whose construct its logical id extends: ``AccountingWriter`` belongs
        to ``Accounting``); one that belongs to none is drawn in the region by what it is."""
        drawn = {n.logical_id: n.id for n in self.nodes.values() if n.logical_id is not None}
        owners = {_readable(logical_id): node_id for logical_id, node_id in drawn.items()}
        kept: dict[str, list[tuple[str, str]]] = {}
        for logical_id in sorted(self.retained - set(drawn)):
            kind = self.type_of(logical_id) or "?"
            owner = drawn.get(self.access_logs_of.get(logical_id, "")) or _owner(
                _readable(logical_id), owners
            )
            if owner is not None:
                kept.setdefault(owner, []).append((logical_id, _what(kind)))
                continue
            self.add(
                Node(
                    logical_id,
                    NodeKind.RETAINED_RESOURCE,
                    _what(kind),
                    (_readable(logical_id),),
                    logical_id=logical_id,
                )
            )
        for owner, resources in kept.items():
            self.nodes[owner] = replace(self.nodes[owner], kept_with=tuple(resources))
