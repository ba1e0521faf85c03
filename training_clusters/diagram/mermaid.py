"""An :class:`EnvironmentGraph` as a Mermaid flowchart in Markdown (GitHub draws it inline)."""

from __future__ import annotations

from training_clusters.diagram.model import EdgeKind, EnvironmentGraph, Node, NodeKind

__all__ = ["to_markdown", "to_mermaid"]

#: How each edge is drawn; ``runs in`` is shown by containment (a resource inside its subnet).
_ARROWS = {
    EdgeKind.ROUTES_THROUGH: "-->",
    EdgeKind.SERVES: "-.->",
    EdgeKind.PLACED_IN: "==>",
    EdgeKind.MOUNTS: "==>",
    EdgeKind.MANAGED_BY: "-.-",
    EdgeKind.DATABASE: "==>",
    EdgeKind.FETCHES: "-.->",
    EdgeKind.RUNS_ON: "-.->",
    EdgeKind.EFA: "<==>",
    EdgeKind.IMPORTS: "==>",
}
_CLASSES = {
    "network": "fill:#eef6e9,stroke:#3f8624",
    "gateway": "fill:#f1ebff,stroke:#8c4fff",
    "compute": "fill:#fff1e0,stroke:#ed7100",
    "storage": "fill:#eaf5dc,stroke:#7aa116",
    "database": "fill:#ebedfa,stroke:#3b48cc",
    "addon": "fill:#f2f3f3,stroke:#545b64",
    "retained": "fill:#fbe9f0,stroke:#b0084d,stroke-width:3px",
}
_CLASS_OF = {
    NodeKind.SUBNET: "network",
    NodeKind.VPC: "network",
    NodeKind.INTERNET_GATEWAY: "gateway",
    NodeKind.NAT_GATEWAY: "gateway",
    NodeKind.VPC_ENDPOINT: "gateway",
    NodeKind.PLACEMENT_GROUP: "compute",
    NodeKind.CONTROL_PLANE: "compute",
    NodeKind.NODE_GROUP: "compute",
    NodeKind.FILE_SYSTEM: "storage",
    NodeKind.BUCKET: "storage",
    NodeKind.DATABASE: "database",
    NodeKind.CLUSTER: "compute",
    NodeKind.ADDON: "addon",
    NodeKind.ADDON_SET: "addon",
    NodeKind.WORKLOAD: "addon",
    NodeKind.RETAINED_RESOURCE: "retained",
}


def to_mermaid(graph: EnvironmentGraph) -> str:
    """A ``flowchart LR``: the region, VPC, zones and subnets as subgraphs with each resource inside the one it
    lives in, edges styled by kind, kept-on-delete resources outlined in red."""
    ids = {node.id: f"n{index}" for index, node in enumerate(graph.nodes)}
    lines = ["flowchart LR"]
    for node in graph.children(None):
        lines += _node(graph, node, ids, "  ")
    for edge in graph.edges:
        if edge.kind not in _ARROWS:
            continue
        if graph.shown_by_its_box(edge):
            continue
        named = edge.kind not in (
            EdgeKind.MANAGED_BY,
            EdgeKind.SERVES,
            EdgeKind.RUNS_ON,
            EdgeKind.EFA,
            EdgeKind.IMPORTS,
        )
        text = " ".join(p for p in (edge.kind.value if named else "", edge.label) if p)
        arrow = _ARROWS[edge.kind]
        middle = f'{arrow}|"{_escape(text)}"|' if text else arrow
        lines.append(f"  {ids[edge.source]} {middle} {ids[edge.target]}")
    lines += [f"  classDef {name} {style}" for name, style in _CLASSES.items()]
    return "\n".join(lines) + "\n"


def to_markdown(graph: EnvironmentGraph, *, image_name: str | None = None) -> str:
    """A page for ``docs/``: the drawing (SVG or PNG, when there is one), the flowchart and the kept-on-delete list."""
    parts = [
        f"# {graph.title}",
        "",
        "Drawn from the synthesized CloudFormation template by `training-clusters diagram`; regenerate it "
        "with `make diagrams` rather than editing it.",
        "",
    ]
    if image_name:
        parts += [f"![{graph.title}]({image_name})", ""]
    parts += ["```mermaid", to_mermaid(graph).rstrip("\n"), "```", ""]
    kept = graph.kept_on_delete()
    if kept:
        parts += ["Kept when the stack is deleted (badged in the drawing where each lives):", ""]
        parts += [f"- {logical_id}: {policy}" for logical_id, policy in kept.items()]
        parts.append("")
    return "\n".join(parts)


def _node(graph: EnvironmentGraph, node: Node, ids: dict[str, str], indent: str) -> list[str]:
    label = "<br/>".join(_escape(line) for line in node.lines)
    if graph.is_box(node):
        lines = [f'{indent}subgraph {ids[node.id]}["{label}"]']
        for child in graph.children(node.id):
            lines += _node(graph, child, ids, indent + "  ")
        lines.append(f"{indent}end")
        if node.retained:
            lines.append(f"{indent}style {ids[node.id]} stroke:#b0084d,stroke-width:3px")
        return lines
    style = "retained" if node.retained else _CLASS_OF.get(node.kind, "addon")
    return [f'{indent}{ids[node.id]}["{label}"]:::{style}']


def _escape(text: str) -> str:
    """Mermaid reads ``#quot;``-style entities inside quoted labels."""
    return text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
