"""The API reference (``make docs``, scripts/build_docs.py) builds from the docstrings without a warning.

``make docs`` documents the whole package, which takes pdoc 15-25 s here; this test builds the three modules
users read most (the constructs, their options and the environment file's model) in about 4 s, with the
same settings and the same script, and checks that each main construct's props render as a parameter list.
The build runs in a background process from the moment this module is collected (see tests/background.py).
"""

from __future__ import annotations

import inspect
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scripts import load_script

from . import background

ROOT = Path(__file__).resolve().parents[1]
MODULES = ("training_clusters.constructs", "training_clusters.model.options", "training_clusters.config")
MAIN_CONSTRUCTS = (
    "TrainingNetwork",
    "SharedLustre",
    "HyperPodCluster",
    "ParallelCluster",
    "GpuEksCluster",
    "EfaNodegroup",
    "HyperPodTaskGovernance",
)


build_docs = load_script("scripts/build_docs.py", "build_docs")


def _build_reference() -> tuple[Path, subprocess.CompletedProcess[str]]:
    directory = Path(tempfile.mkdtemp(prefix="api-reference-"))
    script = ROOT / "scripts" / "build_docs.py"
    command = [sys.executable, str(script), str(directory), *MODULES]
    return directory, subprocess.run(command, capture_output=True, text=True, check=False)


_REFERENCE = background.start(_build_reference)


@pytest.fixture(scope="module")
def reference() -> Iterator[tuple[Path, list[str]]]:
    """The reference of :data:`MODULES`, and the warnings pdoc gave while building it."""
    directory, result = _REFERENCE.result()
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 1: built, with warnings
    warnings = [
        line.removeprefix("warning: ") for line in result.stderr.splitlines() if line.startswith("warning: ")
    ]
    yield directory, warnings
    shutil.rmtree(directory, ignore_errors=True)


def page(reference: tuple[Path, list[str]], module: str) -> str:
    return (reference[0] / f"{module.replace('.', '/')}.html").read_text()


def documented_parameters(html: str, function: str) -> dict[str, str]:
    """Each parameter in the rendered docstring of ``function`` (e.g. ``SharedLustre.__init__``): its text."""
    start = html.index(f'<div id="{function}" class="classattr">')
    end = html.find(f'<div id="{function.split(".")[0]}.', start + 1)
    docstring = html[html.index('<div class="docstring">', start) : end if end > 0 else None]
    items = re.findall(r"<li>(?:<p>)?<strong>([^<]*)</strong>:(.*?)</li>", docstring, flags=re.DOTALL)
    return {name: re.sub(r"<[^>]+>|\s+", " ", text).strip() for name, text in items}


def test_the_reference_builds_without_warnings(reference: tuple[Path, list[str]]) -> None:
    directory, warnings = reference
    assert warnings == []
    pages = {p.relative_to(directory).as_posix() for p in directory.rglob("*.html")}
    wanted = {"index.html", *(f"{module.replace('.', '/')}.html" for module in MODULES)}
    assert wanted <= pages
    # the rest are the public submodules of the packages asked for (config's sections), nothing else
    folders = tuple(f"{module.replace('.', '/')}/" for module in MODULES)
    assert sorted(p for p in pages - wanted if not p.startswith(folders)) == []


@pytest.mark.parametrize("name", MAIN_CONSTRUCTS)
def test_every_prop_of_a_main_construct_is_in_its_parameter_list(
    reference: tuple[Path, list[str]], name: str
) -> None:
    from training_clusters import constructs

    signature = inspect.signature(getattr(constructs, name).__init__)
    props = [p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    documented = documented_parameters(page(reference, "training_clusters.constructs"), f"{name}.__init__")
    assert props and list(documented) == props
    assert all(documented.values()), [prop for prop, text in documented.items() if not text]


def test_a_prop_s_text_renders_whole_even_with_colons_in_it(reference: tuple[Path, list[str]]) -> None:
    # ":param storage_capacity_gib: 1200, or a multiple of 2400. Default: 1200." (pdoc alone would read
    # "storage_capacity_gib: 1200, or a multiple of 2400. Default" as the parameter's name)
    documented = documented_parameters(
        page(reference, "training_clusters.constructs"), "SharedLustre.__init__"
    )
    assert documented["storage_capacity_gib"] == "1200, or a multiple of 2400. Default: 1200."
    rendered = re.sub(r"<pre>.*?</pre>", "", page(reference, "training_clusters.constructs"), flags=re.DOTALL)
    assert ":param" not in rendered  # outside the source listings, every field became a list item


def test_options_and_the_environment_file_model_are_documented(reference: tuple[Path, list[str]]) -> None:
    assert 'id="LustreDeploymentType"' in page(reference, "training_clusters.model.options")
    config = page(reference, "training_clusters.config")
    assert 'id="EnvironmentConfig"' in config and 'id="LustreConfig.storage_capacity_gib"' in config


@pytest.mark.parametrize(
    ("docstring", "prepared"),
    [
        (
            ":param subnet: Default: the first.\n    More.",
            ":param subnet:\n    Default: the first.\n    More.",
        ),
        (":raises ConfigurationError: when: bad", ":raises ConfigurationError:\n    when: bad"),
        ("See :mod:`~training_clusters.model.options`.", "See :mod:`training_clusters.model.options`."),
        ("Text: no field.\n:param x:\n    Already alone.", "Text: no field.\n:param x:\n    Already alone."),
    ],
)
def test_docstrings_are_prepared_for_pdoc_without_changing_their_meaning(
    docstring: str, prepared: str
) -> None:
    assert build_docs.prepared_for_pdoc(docstring) == prepared
