"""An :class:`EnvironmentGraph` as Graphviz DOT, and DOT laid out as SVG by Graphviz's WebAssembly build
(and rasterized to PNG by resvg).

The DOT says what is drawn and how it looks (boxes within boxes, colours per kind); Graphviz decides where.
Nothing here places a coordinate. The DOT is written in the graph's order (sorted), so the same template
always gives the same DOT, and the pinned Graphviz the same SVG.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from html import escape
from importlib import resources
from pathlib import Path

from training_clusters.diagram.model import Edge, EdgeKind, EnvironmentGraph, Node, NodeKind
from training_clusters.errors import ConfigurationError

__all__ = ["GRAPHVIZ_SCRIPT", "PNG_WIDTH_PX", "to_dot", "to_png", "to_svg", "to_svgs"]

GRAPHVIZ_SCRIPT = "graphviz.mjs"
"""The node script (package data next to this module) that reads DOT on stdin and writes SVG (or PNG)."""

PNG_WIDTH_PX = 1600
"""How wide :func:`to_png` draws (the height follows the drawing); set in the node script."""

FONT = "Helvetica"
RETAINED_COLOUR = "#b0084d"

#: Fill and line colour of each kind (AWS architecture-icon hues, lightened for fills).
_NODE_STYLE: dict[NodeKind, tuple[str, str]] = {
    NodeKind.SUBNET: ("#eef6e9", "#3f8624"),
    NodeKind.INTERNET_GATEWAY: ("#f1ebff", "#8c4fff"),
    NodeKind.NAT_GATEWAY: ("#f1ebff", "#8c4fff"),
    NodeKind.VPC_ENDPOINT: ("#f1ebff", "#8c4fff"),
    NodeKind.PLACEMENT_GROUP: ("#fff1e0", "#ed7100"),
    NodeKind.FILE_SYSTEM: ("#eaf5dc", "#7aa116"),
    NodeKind.CONTROL_PLANE: ("#fff1e0", "#ed7100"),
    NodeKind.NODE_GROUP: ("#fff1e0", "#ed7100"),
    NodeKind.ADDON: ("#f2f3f3", "#545b64"),
    NodeKind.WORKLOAD: ("#f2f3f3", "#545b64"),
    NodeKind.RETAINED_RESOURCE: ("#fbe9f0", RETAINED_COLOUR),
}
_CONTAINER_STYLE: dict[NodeKind, tuple[str, str]] = {
    NodeKind.VPC: ("solid", "#3f8624"),
    NodeKind.AVAILABILITY_ZONE: ("dashed", "#147eba"),
    NodeKind.CLUSTER: ("solid", "#ed7100"),
}
#: Line style, colour and whether the edge shows its kind, per edge kind.
_EDGE_STYLE: dict[EdgeKind, tuple[str, str, bool]] = {
    EdgeKind.RUNS_IN: ("dotted", "#879196", False),
    EdgeKind.ROUTES_THROUGH: ("solid", "#8c4fff", True),
    EdgeKind.SERVES: ("dashed", "#8c4fff", False),
    EdgeKind.PLACED_IN: ("bold", "#ed7100", True),
    EdgeKind.MOUNTS: ("bold", "#7aa116", True),
}


def to_dot(graph: EnvironmentGraph) -> str:
    """The graph as DOT: containers as clusters, resources kept on delete outlined in red."""
    lines = [
        f"digraph {_quote(graph.title)} {{",
        f'  graph [rankdir=LR, newrank=true, fontname="{FONT}", fontsize=12, labelloc=t, labeljust=l,'
        f" nodesep=0.25, ranksep=0.55, pad=0.2, label=<{_title(graph)}>];",
        f'  node [shape=box, style="rounded,filled", fontname="{FONT}", fontsize=10, margin="0.2,0.08"];',
        f'  edge [fontname="{FONT}", fontsize=9, arrowsize=0.7];',
    ]
    for node in graph.children(None):
        if node.kind is not NodeKind.RETAINED_RESOURCE:
            lines += _node(graph, node, indent="  ")
    retained = graph.of_kind(NodeKind.RETAINED_RESOURCE)
    if retained:
        lines += [
            '  subgraph "cluster_kept-on-delete" {',
            f'    label=<<B>also kept when the stack is deleted</B>>; style="rounded,dashed";'
            f' color="{RETAINED_COLOUR}"; fontcolor="{RETAINED_COLOUR}";',
        ]
        for node in retained:
            lines += _node(graph, node, indent="    ")
        lines.append("  }")
    lines += [f"  {_edge(edge)}" for edge in graph.edges]
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
    if graph.is_box(node):
        style, colour = _CONTAINER_STYLE[node.kind]
        pen = f'color="{RETAINED_COLOUR}"; penwidth=2' if node.retained else f'color="{colour}"'
        lines = [
            f"{indent}subgraph {_quote('cluster_' + node.id)} {{",
            f'{indent}  label=<{_label(node)}>; style="rounded,{style}"; {pen};',
        ]
        for child in graph.children(node.id):
            lines += _node(graph, child, indent + "  ")
        lines.append(f"{indent}}}")
        return lines
    fill, colour = _NODE_STYLE.get(node.kind, ("#ffffff", "#545b64"))
    attributes = [f"label=<{_label(node)}>", f'fillcolor="{fill}"', f'color="{colour}"']
    if node.retained:
        attributes += [f'color="{RETAINED_COLOUR}"', "penwidth=2", "peripheries=2"]
    return [f"{indent}{_quote(node.id)} [{', '.join(dict.fromkeys(attributes))}];"]


def _label(node: Node) -> str:
    """An HTML-like label: the title in bold, details below, the retention note in red."""
    title, *rest = node.lines
    parts = [f"<B>{escape(title)}</B>"]
    for line in rest:
        if line.startswith("kept on delete"):
            parts.append(f'<FONT COLOR="{RETAINED_COLOUR}">{escape(line)}</FONT>')
        else:
            parts.append(escape(line))
    return "<BR/>".join(parts)


def _edge(edge: Edge) -> str:
    style, colour, named = _EDGE_STYLE[edge.kind]
    text = " ".join(part for part in (edge.kind.value if named else "", edge.label) if part)
    attributes = [f'style="{style}"', f'color="{colour}"']
    if text:
        attributes.append(f'label="{_escape(text)}", fontcolor="{colour}"')
    if edge.kind is EdgeKind.RUNS_IN:
        attributes.append("arrowhead=none")
    return f"{_quote(edge.source)} -> {_quote(edge.target)} [{', '.join(attributes)}];"


def _quote(identifier: str) -> str:
    return f'"{_escape(identifier)}"'


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
