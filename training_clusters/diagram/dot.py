"""An :class:`EnvironmentGraph` as Graphviz DOT, and DOT laid out as SVG by Graphviz's WebAssembly build
(and rasterized to PNG by resvg).

Resources are drawn as rounded boxes in the AWS Architecture Icons' category colours, not as the icons
themselves: the maintained package that ships them (PyPI ``diagrams`` 0.25.1, MIT for its code) is a 34.5 MB
wheel that also requires ``pre-commit`` at run time, carries no terms for the AWS icons it redistributes, has no
icon for ParallelCluster, AWS PCS, EFA or placement groups, and embedding its PNGs (5-20 KB each, Graphviz
writes only a link to them) would make each checked-in SVG several times larger.

The DOT says what is drawn and how it looks (boxes within boxes, colours per kind); Graphviz decides where.
Nothing here places a coordinate. The DOT is written in the graph's order (sorted), so the same template
always gives the same DOT, and the pinned Graphviz the same SVG.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from collections.abc import Sequence
from html import escape
from importlib import resources
from itertools import pairwise
from pathlib import Path

from training_clusters.diagram.model import Edge, EdgeKind, EnvironmentGraph, Node, NodeKind
from training_clusters.diagram.text import width_pt, wrap
from training_clusters.model.errors import ConfigurationError

__all__ = ["GRAPHVIZ_SCRIPT", "PNG_WIDTH_PX", "to_dot", "to_png", "to_svg", "to_svgs"]

GRAPHVIZ_SCRIPT = "graphviz.mjs"
"""The node script (package data next to this module) that reads DOT on stdin and writes SVG (or PNG)."""

PNG_WIDTH_PX = 1600
"""How wide :func:`to_png` draws (the height follows the drawing); set in the node script."""

FONT = "Helvetica"
"""The font Graphviz writes (a browser draws Helvetica or Arial); boxes are sized for the wider DejaVu Sans the
PNG is drawn with (:mod:`.text`)."""
FONT_SIZE = 10
BADGE_SIZE = 8
BOX_TITLE_SIZE = 11
CELL_PADDING = 1
RETAINED_COLOUR = "#b0084d"
BADGE = "KEPT ON DELETE"

#: Fill and line colour of each kind (AWS Architecture Icons' category hues, lightened for fills).
_NODE_STYLE: dict[NodeKind, tuple[str, str]] = {
    NodeKind.SUBNET: ("#f2f6e8", "#7aa116"),
    NodeKind.VPC: ("#f7f3ff", "#8c4fff"),
    NodeKind.INTERNET_GATEWAY: ("#f1ebff", "#8c4fff"),
    NodeKind.NAT_GATEWAY: ("#f1ebff", "#8c4fff"),
    NodeKind.VPC_ENDPOINT: ("#f1ebff", "#8c4fff"),
    NodeKind.PLACEMENT_GROUP: ("#fff1e0", "#ed7100"),
    NodeKind.FILE_SYSTEM: ("#eaf5dc", "#7aa116"),
    NodeKind.DATABASE: ("#ebedfa", "#3b48cc"),
    NodeKind.BUCKET: ("#eaf5dc", "#3f8624"),
    NodeKind.CLUSTER: ("#fff1e0", "#ed7100"),
    NodeKind.CONTROL_PLANE: ("#fff1e0", "#ed7100"),
    NodeKind.NODE_GROUP: ("#fff1e0", "#ed7100"),
    NodeKind.ADDON: ("#f2f3f3", "#545b64"),
    NodeKind.WORKLOAD: ("#f2f3f3", "#545b64"),
    NodeKind.RETAINED_RESOURCE: ("#fbe9f0", "#e7157b"),
}
#: Line style, line colour and fill of each box (AWS's group styles: Region, VPC, AZ, subnets).
_CONTAINER_STYLE: dict[NodeKind, tuple[str, str, str]] = {
    NodeKind.REGION: ("dashed", "#00a4a6", "#ffffff"),
    NodeKind.VPC: ("solid", "#8c4fff", "#ffffff"),
    NodeKind.AVAILABILITY_ZONE: ("dashed", "#147eba", "#ffffff"),
    NodeKind.SUBNET: ("solid", "#00a4a6", "#e6f6f7"),
    NodeKind.CLUSTER: ("solid", "#ed7100", "#fffaf3"),
    NodeKind.ADDON_SET: ("dashed", "#545b64", "#f7f8f8"),
    NodeKind.STACK: ("solid", "#232f3e", "#ffffff"),
}
#: An add-on set whose pods match no node group (they stay pending): outlined in the retention red.
_UNSCHEDULABLE_SET = ("bold", RETAINED_COLOUR, "#fbe9f0")
_PUBLIC_SUBNET = ("solid", "#7aa116", "#f2f6e8")
#: Line style, colour and whether the edge shows its kind, per edge kind; ``runs in`` is shown by containment.
_EDGE_STYLE: dict[EdgeKind, tuple[str, str, bool]] = {
    EdgeKind.ROUTES_THROUGH: ("solid", "#8c4fff", False),
    EdgeKind.SERVES: ("dashed", "#8c4fff", False),
    EdgeKind.PLACED_IN: ("bold", "#ed7100", True),
    EdgeKind.MOUNTS: ("bold", "#7aa116", True),
    EdgeKind.MANAGED_BY: ("dotted", "#879196", False),
    EdgeKind.DATABASE: ("bold", "#3b48cc", True),
    EdgeKind.FETCHES: ("dashed", "#3f8624", True),
    EdgeKind.RUNS_ON: ("dashed", "#545b64", False),
    EdgeKind.EFA: ("bold", "#dd344c", False),
    EdgeKind.IMPORTS: ("bold", "#232f3e", False),
}
#: What the legend shows: a swatch per kind of box, the badge, then the edges.
_LEGEND_KINDS = (
    (NodeKind.NODE_GROUP, "compute (node group, cluster)"),
    (NodeKind.FILE_SYSTEM, "file system"),
    (NodeKind.DATABASE, "database"),
    (NodeKind.BUCKET, "S3 bucket"),
    (NodeKind.NAT_GATEWAY, "gateway, endpoint"),
    (NodeKind.ADDON, "Kubernetes add-on, workload"),
)
_LEGEND_EDGES = (
    (EdgeKind.MOUNTS, "mounts a file system"),
    (EdgeKind.DATABASE, "Slurm accounting (slurmdbd)"),
    (EdgeKind.FETCHES, "fetches scripts from S3"),
    (EdgeKind.EFA, "EFA between the nodes of a group"),
    (EdgeKind.RUNS_ON, "add-ons run on that node group"),
    (EdgeKind.IMPORTS, "a stack uses another's resource"),
    (EdgeKind.PLACED_IN, "placed in a placement group"),
    (EdgeKind.MANAGED_BY, "managed by its cluster"),
    (EdgeKind.ROUTES_THROUGH, "default route (0.0.0.0/0)"),
    (EdgeKind.SERVES, "gateway endpoint serves a subnet"),
)


def to_dot(graph: EnvironmentGraph) -> str:
    """The graph as DOT: the region, VPC, availability zones and subnets as boxes, each resource inside the
    one it lives in; what is kept on delete badged; a legend."""
    lines = [
        f"digraph {_quote(graph.title)} {{",
        f'  graph [rankdir=LR, newrank=true, compound=true, fontname="{FONT}", fontsize=12, labelloc=t,'
        f" labeljust=l, nodesep=0.25, ranksep=0.6, pad=0.2, label=<{_title(graph)}>];",
        f"  graph [fontsize={FONT_SIZE}];",
        f'  node [shape=box, style="rounded,filled", fontname="{FONT}", fontsize={FONT_SIZE},'
        ' margin="0.12,0.06"];',
        f'  edge [fontname="{FONT}", fontsize=9, arrowsize=0.7];',
    ]
    for node in graph.children(None):
        lines += _node(graph, node, indent="  ")
    lines += _legend(graph)
    lines += [f"  {line}" for edge in graph.edges if (line := _edge(graph, edge))]
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_svg(dot: str, *, node: str | None = None) -> str:
    """Lay out ``dot`` with Graphviz (WebAssembly, run by Node.js) and return the SVG.

    :param node: The ``node`` executable. Default: the one beside this Python (a virtual environment's, as
        the Makefile installs it), else the first on ``PATH``.
    :raises ConfigurationError: Node.js or the Graphviz package is missing, or Graphviz refused the DOT.
    """
    return _graphviz([], dot, node).decode("utf-8")


def to_png(dot: str, *, node: str | None = None) -> bytes:
    """Lay out ``dot`` as :func:`to_svg` does and rasterize it with resvg (npm ``@resvg/resvg-js``, pinned in
    package.json): :data:`PNG_WIDTH_PX` wide, on white. The same DOT gives the same bytes on one machine (the
    text is drawn with its installed fonts).

    :raises ConfigurationError: as :func:`to_svg`, or the resvg package is missing.
    """
    return _graphviz(["--png"], dot, node)


def to_svgs(dots: Sequence[str], *, node: str | None = None) -> list[str]:
    """Lay out several graphs with one start of Graphviz (as :func:`to_svg` does one)."""
    if not dots:
        return []
    drawings: list[str] = json.loads(_graphviz(["--json"], json.dumps(list(dots)), node).decode("utf-8"))
    return drawings


def _graphviz(arguments: list[str], text: str, node: str | None) -> bytes:
    beside = Path(sys.executable).parent / "node"
    executable = node or (str(beside) if beside.is_file() else shutil.which("node"))
    if executable is None:
        raise ConfigurationError(
            "diagram: SVG and PNG need Node.js (node on PATH); write .dot or .md to skip it"
        )
    script = resources.files("training_clusters.diagram").joinpath(GRAPHVIZ_SCRIPT)
    with resources.as_file(script) as path:
        done = subprocess.run(
            [executable, str(Path(path)), *arguments],
            input=text.encode("utf-8"),
            capture_output=True,
            check=False,
        )
    if done.returncode != 0:
        errors = done.stderr.decode("utf-8", errors="replace")
        reason = errors.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise ConfigurationError(f"diagram: Graphviz could not draw it: {reason[0]}")
    return done.stdout


# --------------------------------------------------------------------------------------------------


def _title(graph: EnvironmentGraph) -> str:
    return f"<B>{escape(graph.title)}</B>"


def _node(graph: EnvironmentGraph, node: Node, indent: str) -> list[str]:
    tooltip = 'tooltip="' + "\\n".join(_escape(line) for line in node.lines) + '"'
    if graph.is_box(node):
        style, colour, fill = _container_style(node)
        lines = [
            f"{indent}subgraph {_quote('cluster_' + node.id)} {{",
            f'{indent}  label=<{label_table(node, box=True)}>; style="rounded,filled,{style}"; color="{colour}";'
            f' fillcolor="{fill}"; penwidth={2 if node.retained else 1}; {tooltip};',
        ]
        for child in graph.children(node.id):
            lines += _node(graph, child, indent + "  ")
        lines += _grid(graph, node, indent + "  ")
        lines.append(f"{indent}}}")
        return lines
    fill, colour = _NODE_STYLE.get(node.kind, ("#ffffff", "#545b64"))
    if node.kind is NodeKind.SUBNET:
        _, colour, fill = _container_style(node)
    attributes = [f"label=<{label_table(node)}>", f'fillcolor="{fill}"', f'color="{colour}"', tooltip]
    if node.retained:
        attributes.append("penwidth=2")
    return [f"{indent}{_quote(node.id)} [{', '.join(attributes)}];"]


GRID_COLUMNS = 3
"""A cluster's add-ons and workloads are laid out this many to a row (one long column otherwise)."""


def _grid(graph: EnvironmentGraph, node: Node, indent: str) -> list[str]:
    """Invisible edges that put the add-ons and workloads of a cluster's box (or an add-on set's) in rows of
    :data:`GRID_COLUMNS`."""
    if node.kind not in (NodeKind.CLUSTER, NodeKind.ADDON_SET):
        return []
    leaves = [c.id for c in graph.children(node.id) if c.kind in (NodeKind.ADDON, NodeKind.WORKLOAD)]
    rows = [leaves[i : i + GRID_COLUMNS] for i in range(0, len(leaves), GRID_COLUMNS)]
    return [f"{indent}{_quote(a)} -> {_quote(b)} [style=invis];" for row in rows for a, b in pairwise(row)]


def _container_style(node: Node) -> tuple[str, str, str]:
    if node.kind is NodeKind.SUBNET and node.title.startswith("public"):
        return _PUBLIC_SUBNET
    if node.kind is NodeKind.ADDON_SET and node.title == "on no node group":
        return _UNSCHEDULABLE_SET
    return _CONTAINER_STYLE[node.kind]


def label_lines(node: Node, *, box: bool = False) -> list[tuple[str, float, bool]]:
    """The lines of ``node``'s label as drawn: (text, font size, bold); a long line wrapped onto the next
    (:func:`.wrap`), never cut. A box's (``box``) title is a point larger."""
    title_size = float(BOX_TITLE_SIZE if box else FONT_SIZE)
    drawn = [(part, title_size, True) for part in wrap(node.title, title_size, bold=True)]
    drawn += [(part, float(FONT_SIZE), False) for line in node.details for part in wrap(line, FONT_SIZE)]
    for badge in node.badges:
        if badge == "kept on delete":
            drawn.append((BADGE, float(BADGE_SIZE), True))
        else:
            drawn += [(part, float(FONT_SIZE), False) for part in wrap(badge, FONT_SIZE)]
    return drawn


def label_width_pt(node: Node, *, box: bool = False) -> int:
    """The width given to each line of ``node``'s label: its widest line in DejaVu Sans (:mod:`.text`) and a
    point either side; every line starts at the left of its cell, so none can end past it."""
    widest = max(width_pt(text, size, bold=bold) for text, size, bold in label_lines(node, box=box))
    return math.ceil(widest) + 2


def label_table(node: Node, *, box: bool = False) -> str:
    """An HTML-like label: the title in bold, details below, the retention badge in white on red; each line
    in a cell :func:`label_width_pt` wide, left-aligned."""
    width = label_width_pt(node, box=box)
    kept = {part for badge in node.badges if badge != "kept on delete" for part in wrap(badge, FONT_SIZE)}
    rows = []
    for text, size, bold in label_lines(node, box=box):
        content = f"<B>{escape(text)}</B>" if bold else escape(text)
        cell = f'<TD ALIGN="LEFT" WIDTH="{width}"'
        if text == BADGE:
            content = f'<FONT COLOR="white" POINT-SIZE="{size:g}">{content}</FONT>'
            cell += f' BGCOLOR="{RETAINED_COLOUR}"'
        elif text in kept:
            content = f'<FONT COLOR="{RETAINED_COLOUR}">{content}</FONT>'
        elif size != FONT_SIZE:
            content = f'<FONT POINT-SIZE="{size:g}">{content}</FONT>'
        rows.append(f"<TR>{cell}>{content}</TD></TR>")
    return f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="{CELL_PADDING}">{"".join(rows)}</TABLE>'


#: Kinds a legend entry stands for besides its own.
_ALSO_SHOWN: dict[NodeKind, set[NodeKind]] = {
    NodeKind.NODE_GROUP: {NodeKind.CLUSTER, NodeKind.CONTROL_PLANE, NodeKind.PLACEMENT_GROUP},
    NodeKind.NAT_GATEWAY: {NodeKind.INTERNET_GATEWAY, NodeKind.VPC_ENDPOINT},
    NodeKind.ADDON: {NodeKind.WORKLOAD},
}


def _legend(graph: EnvironmentGraph) -> list[str]:
    """A key to what this drawing shows: the kinds of box, the badge and the edges it has."""
    kinds = {n.kind for n in graph.nodes}
    rows = ['<TR><TD COLSPAN="2" ALIGN="LEFT"><B>legend</B></TD></TR>']
    for kind, meaning in _LEGEND_KINDS:
        if kind in kinds or kind in _ALSO_SHOWN.get(kind, set()) & kinds:
            fill, colour = _NODE_STYLE[kind]
            rows.append(
                f'<TR><TD BGCOLOR="{fill}" BORDER="1" COLOR="{colour}" WIDTH="28"> </TD>'
                f'<TD ALIGN="LEFT">{escape(meaning)}</TD></TR>'
            )
    if graph.kept_on_delete():
        rows.append(
            f'<TR><TD BGCOLOR="{RETAINED_COLOUR}"><FONT COLOR="white" POINT-SIZE="{BADGE_SIZE}"><B>KEPT</B>'
            '</FONT></TD><TD ALIGN="LEFT">outlives cdk destroy (DeletionPolicy Retain)</TD></TR>'
        )
    edges = {e.kind for e in graph.edges if not graph.shown_by_its_box(e)}
    for edge_kind, meaning in _LEGEND_EDGES:
        if edge_kind in edges:
            _, colour, _ = _EDGE_STYLE[edge_kind]
            rows.append(
                f'<TR><TD><FONT COLOR="{colour}"><B>{_EDGE_GLYPH[edge_kind]}</B></FONT></TD>'
                f'<TD ALIGN="LEFT"><FONT COLOR="{colour}">{escape(meaning)}</FONT></TD></TR>'
            )
    table = f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2" CELLPADDING="2">{"".join(rows)}</TABLE>'
    return [f'  "legend" [shape=plaintext, style="", label=<{table}>];']


#: How the legend writes each edge style.
_EDGE_GLYPH: dict[EdgeKind, str] = {
    EdgeKind.MOUNTS: "━" * 3,
    EdgeKind.DATABASE: "━" * 3,
    EdgeKind.FETCHES: "- - -",
    EdgeKind.PLACED_IN: "━" * 3,
    EdgeKind.EFA: "━" * 3,
    EdgeKind.RUNS_ON: "- - -",
    EdgeKind.IMPORTS: "━" * 3,
    EdgeKind.MANAGED_BY: ". . . .",
    EdgeKind.ROUTES_THROUGH: "─" * 3,
    EdgeKind.SERVES: "- - -",
}


def _anchor(graph: EnvironmentGraph, node_id: str) -> tuple[str, str | None]:
    """The node an edge to ``node_id`` is drawn to, and the box it is clipped at (when ``node_id`` is one)."""
    node = graph.node(node_id)
    if not graph.is_box(node):
        return node_id, None
    inner = node
    while graph.is_box(inner):
        inner = graph.children(inner.id)[0]
    return inner.id, f"cluster_{node_id}"


def _edge(graph: EnvironmentGraph, edge: Edge) -> str | None:
    if edge.kind not in _EDGE_STYLE:
        return None
    style, colour, named = _EDGE_STYLE[edge.kind]
    source, tail = _anchor(graph, edge.source)
    target, head = _anchor(graph, edge.target)
    if source == target and edge.kind is not EdgeKind.EFA:
        return None
    if graph.shown_by_its_box(edge):
        return None
    text = " ".join(part for part in (edge.kind.value if named else "", edge.label) if part)
    attributes = [f'style="{style}"', f'color="{colour}"']
    if text:
        attributes.append(f'label="{_escape(text)}", fontcolor="{colour}"')
    if tail is not None:
        attributes.append(f'ltail="{tail}"')
    if head is not None:
        attributes.append(f'lhead="{head}"')
    if edge.kind is EdgeKind.MANAGED_BY:
        attributes.append("arrowhead=none, constraint=false")
    if edge.kind is EdgeKind.RUNS_ON:
        attributes.append("constraint=false")
    if edge.kind is EdgeKind.EFA:
        attributes.append("dir=both, penwidth=2")
    return f"{_quote(source)} -> {_quote(target)} [{', '.join(attributes)}];"


def _quote(identifier: str) -> str:
    return f'"{_escape(identifier)}"'


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
