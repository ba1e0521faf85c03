"""A picture of an environment, drawn from the CloudFormation template it synthesizes.

::

    training-clusters diagram environments/eks-p5-efa.yaml -o eks-p5-efa.svg   # and eks-p5-efa.md beside it
    training-clusters diagram environments/eks-p5-efa.yaml -o eks-p5-efa.png   # PNG 1600 px wide, .md beside it
    training-clusters diagram --assembly cdk.out --stack my-stack -o my-stack.svg
    make diagrams                                                               # docs/environments/*.svg

:mod:`.model` turns a template into typed nodes and edges (pure Python, what the tests check);
:mod:`.dot` writes Graphviz DOT and lays it out with Graphviz's WebAssembly build (npm
``@hpcc-js/wasm-graphviz``, pinned in package.json) through a small node script, which also rasterizes it to
PNG with resvg (npm ``@resvg/resvg-js``, pinned beside it); :mod:`.mermaid` writes the
same graph as a Mermaid flowchart in Markdown. :mod:`.sources` reads a cloud assembly or synthesizes
environment files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from training_clusters.diagram.dot import PNG_WIDTH_PX, to_dot, to_png, to_svg, to_svgs
from training_clusters.diagram.mermaid import to_markdown, to_mermaid
from training_clusters.diagram.model import (
    Edge,
    EdgeKind,
    EnvironmentGraph,
    Node,
    NodeKind,
    NodeRole,
    graph_from_template,
    retained_logical_ids,
)
from training_clusters.diagram.sources import StackSource, read_assembly, read_stack, synthesize_environments
from training_clusters.errors import ConfigurationError

__all__ = [
    "FORMATS",
    "PNG_WIDTH_PX",
    "Edge",
    "EdgeKind",
    "EnvironmentGraph",
    "Node",
    "NodeKind",
    "NodeRole",
    "StackSource",
    "diagram_command",
    "graph_from_template",
    "read_assembly",
    "read_stack",
    "render",
    "retained_logical_ids",
    "synthesize_environments",
    "to_dot",
    "to_markdown",
    "to_mermaid",
    "to_png",
    "to_svg",
    "to_svgs",
    "write_diagram",
]

FORMATS = (".svg", ".png", ".dot", ".md")
"""What ``-o`` may end with: SVG or PNG (with the Markdown page beside it), Graphviz DOT, or the Markdown alone."""

#: The formats drawn as a picture, written with a Markdown page beside them that shows it.
_PICTURES = (".svg", ".png")


def render(graph: EnvironmentGraph, suffix: str, *, image_name: str | None = None) -> str:
    """The graph as the text of a ``suffix`` file (one of :data:`FORMATS` but ``.png``: :func:`to_png`)."""
    if suffix == ".svg":
        return to_svg(to_dot(graph))
    if suffix == ".dot":
        return to_dot(graph)
    if suffix == ".md":
        return to_markdown(graph, image_name=image_name)
    if suffix == ".png":
        raise ConfigurationError("diagram: a PNG is not text; use to_png(to_dot(graph)) or write_diagram")
    raise ConfigurationError(_unsupported(suffix))


def write_diagram(graph: EnvironmentGraph, output: Path) -> list[Path]:
    """Write the drawing to ``output`` (and, for ``.svg`` or ``.png``, its Markdown page beside it); returns the
    paths.

    :raises ConfigurationError: the suffix is not one of :data:`FORMATS`, or the path cannot be written.
    """
    _check_output(output)
    suffix = output.suffix.lower()
    files: dict[Path, str | bytes] = {
        output: to_png(to_dot(graph)) if suffix == ".png" else render(graph, suffix)
    }
    if suffix in _PICTURES:
        files[output.with_suffix(".md")] = render(graph, ".md", image_name=output.name)
    return _write(files)


def _write(files: dict[Path, str | bytes]) -> list[Path]:
    for path, content in files.items():
        try:
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8", newline="\n")
        except OSError as error:
            raise ConfigurationError(f"{path}: cannot be written: {error.strerror}") from None
    return list(files)


def diagram_command(
    *,
    file: str | Path | None,
    assembly: str | Path | None,
    stack: str | None,
    output_file: str | Path | None,
    as_json: bool,
    out: TextIO,
) -> int:
    """What ``training-clusters diagram`` does; returns the exit status (errors raise ConfigurationError)."""
    if output_file:
        _check_output(Path(output_file))  # before a synth that may take a while
    source = _source(file, assembly, stack)
    graph = source.graph()
    written = write_diagram(graph, Path(output_file)) if output_file else []
    if as_json:
        document = {
            "stack": source.stack_name,
            "files": [str(p) for p in written],
            "nodes": {kind.value: count for kind, count in sorted(graph.kind_counts().items())},
            "edges": len(graph.edges),
            "retained": [{"id": logical_id, "by": by} for logical_id, by in graph.kept_on_delete().items()],
        }
        if not output_file:
            document["svg"] = render(graph, ".svg")
        json.dump(document, out, indent=2)
        out.write("\n")
    elif written:
        names = " and ".join(str(p) for p in written)
        print(
            f"wrote {names} ({source.stack_name}: {len(graph.nodes)} nodes, {len(graph.edges)} edges, "
            f"{len(graph.kept_on_delete())} kept on delete)",
            file=out,
        )
    else:
        out.write(render(graph, ".svg"))
    return 0


def write_environment_diagrams(files: Sequence[Path], directory: Path) -> list[Path]:
    """``make diagrams``: synthesize every environment file and write ``<directory>/<file stem>.svg`` / ``.md``."""
    graphs = [source.graph() for source in synthesize_environments(files)]
    written: list[Path] = []
    for path, graph, svg in zip(files, graphs, to_svgs([to_dot(g) for g in graphs]), strict=True):
        written += _write(
            {
                directory / f"{path.stem}.svg": svg,
                directory / f"{path.stem}.md": render(graph, ".md", image_name=f"{path.stem}.svg"),
            }
        )
    return written


def _source(file: str | Path | None, assembly: str | Path | None, stack: str | None) -> StackSource:
    if file and assembly:
        raise ConfigurationError("diagram: give an environment file or --assembly, not both")
    if assembly:
        return read_stack(assembly, stack)
    if stack:
        raise ConfigurationError("diagram: --stack chooses a stack of --assembly; give --assembly too")
    if not file:
        raise ConfigurationError("diagram: give an environment file, or --assembly cdk.out [--stack NAME]")
    return synthesize_environments([Path(file)])[0]


def _check_output(output: Path) -> None:
    """The format named by ``output``'s suffix (the console script has checked the path itself)."""
    suffix = output.suffix.lower()
    if suffix not in FORMATS:
        raise ConfigurationError(f"{output}: {_unsupported(suffix)}")


def _unsupported(suffix: str) -> str:
    return f"unsupported diagram format {suffix or '(no suffix)'!r}; use one of {', '.join(FORMATS)}"
