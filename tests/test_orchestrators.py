"""The orchestrator registry: every registered orchestrator has all its parts, under one name, and code asks the
registry instead of testing the sections in turn (CONTRIBUTING, "A new orchestrator")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from training_clusters.config import EnvironmentConfig, load_environment
from training_clusters.config.compute import Orchestrator
from training_clusters.orchestrators import ORCHESTRATORS, OrchestratorParts, orchestrator_of

from .conftest import ROOT

PACKAGE = ROOT / "training_clusters"
SECTIONS = list(ORCHESTRATORS)


def test_the_registry_holds_every_orchestrator_a_file_can_name() -> None:
    assert sorted(entry.kind for entry in ORCHESTRATORS.values()) == sorted(o.value for o in Orchestrator)
    assert [o.section for o in Orchestrator] == [ORCHESTRATORS[o.section].section for o in Orchestrator]


def test_every_orchestrator_section_is_a_field_of_the_environment_file() -> None:
    assert set(SECTIONS) <= set(EnvironmentConfig.model_fields)


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("part", OrchestratorParts.parts())
def test_each_part_resolves_to_what_its_callers_call(section: str, part: str) -> None:
    found = ORCHESTRATORS[section].load(part)
    assert callable(found), f"{section}.{part}: {getattr(ORCHESTRATORS[section], part)} is not callable"


@pytest.mark.parametrize("section", SECTIONS)
def test_each_orchestrator_has_its_files_named_alike(section: str) -> None:
    """The checklist of CONTRIBUTING's "A new orchestrator": a file each, named after the section."""
    expected = [
        PACKAGE / "config" / f"{section}.py",
        PACKAGE / "rules" / f"{section}.py",
        PACKAGE / "constructs" / section / "__init__.py",
        PACKAGE / "stacks" / f"{section}.py",
    ]
    assert [path.relative_to(ROOT) for path in expected if not path.is_file()] == []
    assert ORCHESTRATORS[section].stack.startswith(f"training_clusters.stacks.{section}:")


def test_contributing_lists_each_part_of_the_checklist() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    checklist = text[text.index("### A new orchestrator") :]
    checklist = checklist[: checklist.index("\n### ", 1)] if "\n### " in checklist[1:] else checklist
    missing = [part for part in OrchestratorParts.parts() if f"`{part}`" not in checklist]
    assert missing == []
    for shape in (
        "config/<section>.py",
        "rules/<section>.py",
        "constructs/<section>/",
        "stacks/<section>.py",
    ):
        assert shape in checklist


def test_an_environment_of_network_and_storage_has_no_orchestrator() -> None:
    assert orchestrator_of(load_environment(ROOT / "environments" / "network-storage.yaml")) is None
    assert orchestrator_of(load_environment(ROOT / "environments" / "pcs-c5n.yaml")) is ORCHESTRATORS["pcs"]


def _section_tests(function: ast.AST) -> set[str]:
    """The orchestrator sections a function tests with ``<x>.<section> is (not) None``."""
    found = set()
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Attribute)
            and node.left.attr in ORCHESTRATORS
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Is | ast.IsNot)
            and isinstance(node.comparators[0], ast.Constant)
            and node.comparators[0].value is None
        ):
            found.add(node.left.attr)
    return found


def _functions(path: Path) -> list[tuple[str, ast.AST]]:
    tree = ast.parse(path.read_text())
    return [
        (f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", node)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def test_no_function_chooses_among_orchestrators_by_testing_their_sections() -> None:
    """An if-chain over the sections belongs in the registry: a function may test its own section, not two."""
    chains = [
        f"{where}: {sorted(sections)}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "orchestrators.py"
        for where, function in _functions(path)
        if len(sections := _section_tests(function)) > 1
    ]
    assert chains == []


def test_the_chain_detector_sees_a_chain() -> None:
    source = "def f(config):\n    if config.eks is not None:\n        return 1\n    if config.pcs is None:\n        return 2\n"
    ((_, function),) = [(n.name, n) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)]
    assert _section_tests(function) == {"eks", "pcs"}


def test_the_file_model_and_compute_list_the_registry_s_orchestrators() -> None:
    from training_clusters.config import ORCHESTRATOR_SECTIONS, USER_ORCHESTRATORS
    from training_clusters.config.compute import USER_ORCHESTRATORS as COMPUTE_USER_ORCHESTRATORS
    from training_clusters.config.compute import Ignorable

    assert ORCHESTRATOR_SECTIONS == ("hyperpod", "parallelcluster", "eks", "pcs", "hyperpod_eks")
    assert USER_ORCHESTRATORS == ("hyperpod", "parallelcluster")
    assert [o.section for o in COMPUTE_USER_ORCHESTRATORS] == ["hyperpod", "parallelcluster"]
    assert {i.value for i in Ignorable} >= set(ORCHESTRATORS)
