"""A picture of an environment, drawn from the CloudFormation template it synthesizes.

::

    training-clusters diagram environments/eks-p5-efa.yaml -o eks-p5-efa.svg   # and eks-p5-efa.md beside it
    training-clusters diagram environments/eks-p5-efa.yaml -o eks-p5-efa.png   # PNG 1600 px wide, .md beside it
    training-clusters diagram --assembly cdk.out --stack my-stack -o my-stack.svg
    training-clusters diagram --assembly cdk.out -d pictures/  # each stack, and app.svg: the whole app
    make diagrams                                                               # docs/environments/*.svg

:mod:`.model` turns a template into typed nodes and edges (pure Python, what the tests check);
:mod:`.dot` writes Graphviz DOT and lays it out with Graphviz's WebAssembly build (npm
``@hpcc-js/wasm-graphviz``, pinned in package.json) through a small node script, which also rasterizes it to
PNG with resvg (npm ``@resvg/resvg-js``, pinned beside it); :mod:`.mermaid` writes the
same graph as a Mermaid flowchart in Markdown. :mod:`.sources` reads a cloud assembly or synthesizes
environment files; :mod:`.app` draws a multi-stack app as a whole, with the references between its stacks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from training_clusters.diagram.app import CrossStackReference, app_graph, cross_stack_references, with_imports
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
from training_clusters.model.errors import ConfigurationError

__all__ = [
    "APP_PICTURE",
    "FORMATS",
    "PNG_WIDTH_PX",
    "CrossStackReference",
    "Edge",
    "EdgeKind",
    "EnvironmentGraph",
    "Node",
    "NodeKind",
    "NodeRole",
    "StackSource",
    "app_graph",
    "assembly_graphs",
    "cross_stack_references",
    "diagram_command",
    "graph_from_template",
    "make_directory",
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
    "with_imports",
    "write_assembly_diagrams",
    "write_diagram",
]

FORMATS = (".svg", ".png", ".dot", ".md")
"""What ``-o`` may end with: SVG or PNG (with the Markdown page beside it), Graphviz DOT, or the Markdown alone."""

#: The formats drawn as a picture, written with a Markdown page beside them that shows it.
_PICTURES = (".svg", ".png")

APP_PICTURE = "app"
"""The file name (``app.svg``, ``app.md``) of the whole app's picture among its stacks' (:func:`write_assembly_diagrams`)."""


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


def assembly_graphs(
    sources: Sequence[StackSource], *, title: str
) -> tuple[dict[str, EnvironmentGraph], EnvironmentGraph]:
    """Each stack's drawing by stack name (with what it imports from the others, :func:`.app.with_imports`), and
    the whole app's (:func:`.app.app_graph`, each stack's box holding only its own) called ``title``."""
    own = {source.stack_name: source.graph() for source in sources}
    templates = {source.stack_name: source.template for source in sources}
    graphs = {source.stack_name: with_imports(source, sources).graph() for source in sources}
    return graphs, app_graph(own, templates, title=title)


def write_assembly_diagrams(sources: Sequence[StackSource], directory: Path, *, title: str) -> list[Path]:
    """One SVG and Markdown page per stack (``<stack>.svg``, ``<stack>.md``) and one of the whole app
    (``app.svg``, ``app.md``, whose page links each stack's) in ``directory``; returns the paths, the app's
    first.

    :raises ConfigurationError: two stacks would share a file name, or one is named ``app``.
    """
    names = {source.stack_name: _file_stem(source.stack_name) for source in sources}
    clashes = sorted(
        {s for s, stem in names.items() if list(names.values()).count(stem) > 1 or stem == APP_PICTURE}
    )
    if clashes:
        raise ConfigurationError(
            f"diagram: stacks {', '.join(clashes)} would be written to the same file (or to {APP_PICTURE}.svg, "
            "the whole app's); draw them one at a time with --stack"
        )
    graphs, whole = assembly_graphs(sources, title=title)
    order = [whole, *(graphs[s.stack_name] for s in sources)]
    stems = [APP_PICTURE, *(names[s.stack_name] for s in sources)]
    pages = [(name, f"{names[name]}.md") for name in names]
    written: list[Path] = []
    for stem, graph, svg in zip(stems, order, to_svgs([to_dot(g) for g in order]), strict=True):
        page = render(graph, ".md", image_name=f"{stem}.svg")
        if stem == APP_PICTURE:
            page += "\nEach stack on its own:\n\n" + "".join(f"- [{name}]({link})\n" for name, link in pages)
        written += _write({directory / f"{stem}.svg": svg, directory / f"{stem}.md": page})
    return written


def _file_stem(stack_name: str) -> str:
    """A stack's name as a file name (CloudFormation allows letters, digits and hyphens; an artifact id more)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", stack_name).strip(".") or "stack"


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
    output_dir: str | Path | None = None,
) -> int:
    """What ``training-clusters diagram`` does; returns the exit status (errors raise ConfigurationError)."""
    if output_dir:
        return _draw_assembly(assembly, stack, output_file, Path(output_dir), as_json, out)
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


def _draw_assembly(
    assembly: str | Path | None,
    stack: str | None,
    output_file: str | Path | None,
    directory: Path,
    as_json: bool,
    out: TextIO,
) -> int:
    """``--assembly cdk.out -d DIR``: every stack, and the whole app (the directory is made first, so a path
    that cannot be written is named before anything else)."""
    make_directory(directory)
    if not assembly or stack or output_file:
        raise ConfigurationError(
            "diagram: --output-dir draws every stack of --assembly (and the whole app); give --assembly, "
            "without --stack or -o"
        )
    sources = read_assembly(assembly)
    if not sources:
        raise ConfigurationError(f"{assembly}: holds no stack")
    written = write_assembly_diagrams(
        sources, directory, title=f"{Path(assembly).name}: {len(sources)} stacks"
    )
    references = cross_stack_references({s.stack_name: s.template for s in sources})
    if as_json:
        document = {
            "stacks": [s.stack_name for s in sources],
            "files": [str(p) for p in written],
            "references": [
                {
                    "from": r.consumer,
                    "to": r.producer,
                    "via": r.via,
                    "name": r.name,
                    "resources": list(r.resources),
                }
                for r in references
            ],
        }
        json.dump(document, out, indent=2)
        out.write("\n")
    else:
        print(
            f"wrote {written[0]} (the whole app: {len(sources)} stacks, {len(references)} cross-stack "
            f"references) and {len(written) - 2} files of its stacks in {directory}",
            file=out,
        )
    return 0


def make_directory(directory: Path) -> None:
    """``directory`` and its parents, made where missing.

    :raises ConfigurationError: one line: it, or a folder above it, is a file, or cannot be made.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigurationError(f"{directory}: is a file, not a directory; give a directory") from None
    except NotADirectoryError:
        raise ConfigurationError(f"{directory}: a folder above it is a file, not a directory") from None
    except OSError as error:
        raise ConfigurationError(f"{directory}: cannot be made: {error.strerror}") from None


def _source(file: str | Path | None, assembly: str | Path | None, stack: str | None) -> StackSource:
    if file and assembly:
        raise ConfigurationError("diagram: give an environment file or --assembly, not both")
    if assembly:
        return with_imports(read_stack(assembly, stack), read_assembly(assembly))
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
