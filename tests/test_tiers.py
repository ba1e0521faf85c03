"""The tiers (tests/conftest.py's TIERS): every test gets exactly one, from its path and fixtures; make test runs
the fast one, make check the rest too, CI all of them and make integration."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .conftest import FAST_ENVIRONMENT, ROOT, TIER_BY_PATH, TIERS, tier_of

ENVIRONMENTS = ROOT / "environments"


@dataclass
class FakeItem:
    """As much of a pytest item as :func:`tier_of` reads."""

    path: Path
    fixturenames: list[str] = field(default_factory=list)
    params: dict[str, Any] | None = None
    integration: bool = False

    @property
    def callspec(self) -> Any:
        return None if self.params is None else type("CallSpec", (), {"params": self.params})()

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "integration" and self.integration else None


def tier(path: str, *fixtures: str, params: dict[str, Any] | None = None, integration: bool = False) -> str:
    return tier_of(FakeItem(ROOT / path, list(fixtures), params, integration))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (("tests/test_rules.py",), "fast"),
        (("tests/constructs/test_lustre.py", "gated_stacks"), "fast"),
        (("tests/lifecycle/test_lifecycle_team.py", "sandbox"), "sandbox"),
        (("tests/lifecycle/test_lifecycle_new.py",), "sandbox"),  # a new module there, whatever its fixtures
        (("tests/parallelcluster_actions/test_actions.py",), "sandbox"),
        (("tests/lifecycle/test_lifecycle_shellcheck.py", "shellcheck"), "freshness"),
        (("tests/test_acceptance.py", "shellcheck"), "freshness"),
        (("tests/cli/test_cli.py", "checked_in"), "freshness"),
        (("tests/stacks/test_environments.py", "environment_gates"), "gates"),  # names no environment: all
        (("tests/test_checkov.py", "checkov_run"), "gates"),
        (("tests/packaging/test_wheel.py",), "extended"),
        (("tests/readme/test_commands_verbatim.py",), "extended"),
        (("tests/extended/test_anything.py",), "extended"),
        (("tests/constructs/test_boundary.py",), "extended"),
        (("tests/test_environment_fuzz.py",), "extended"),
    ],
)
def test_a_test_takes_its_tier_from_its_fixtures_then_its_path(item: tuple[str, ...], expected: str) -> None:
    assert tier(*item) == expected


def test_only_the_fast_environment_goes_through_the_gates_in_make_test() -> None:
    fast = ENVIRONMENTS / f"{FAST_ENVIRONMENT}.yaml"
    other = ENVIRONMENTS / "eks-p5-efa.yaml"
    assert fast.is_file()
    module = "tests/stacks/test_environments.py"
    assert tier(module, "environment_gates", params={"path": fast}) == "fast"
    assert tier(module, "environment_gates", params={"path": other}) == "gates"
    assert tier(module, "checkov_run", params={"path": fast}) == "fast"
    assert tier(module, "checkov_run", params={"check": "CKV_AWS_1"}) == "gates"  # no environment named
    assert tier(module, "environment_gates", params={"path": fast, "also": str(other)}) == "gates"


def test_a_fixture_outranks_the_path_and_integration_outranks_both() -> None:
    assert tier("tests/packaging/test_wheel.py", "shellcheck") == "freshness"
    assert tier("tests/lifecycle/test_lifecycle_apt.py", "shellcheck") == "freshness"
    assert tier("tests/charts/test_charts_real.py", "shellcheck", integration=True) == "integration"
    assert tier("tests/integration/test_slurm_real.py", integration=True) == "integration"


def test_every_path_rule_names_a_tier_and_a_place_that_exists_or_is_reserved() -> None:
    reserved = {"tests/extended/", "tests/readme/"}  # where new slow modules go
    for prefix, name in TIER_BY_PATH:
        assert name in TIERS and name != "fast", prefix
        assert (ROOT / prefix).exists() or prefix in reserved, prefix


def test_each_selected_test_has_exactly_one_tier(request: pytest.FixtureRequest) -> None:
    every = (*TIERS, "integration")
    for item in request.session.items:
        names = [marker.name for marker in item.iter_markers() if marker.name in every]
        assert len(names) == 1, (item.nodeid, names)


def test_the_commands_run_the_tiers_they_say() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipes = dict(re.findall(r"^([a-z-]+):[^\n]*\n\t([^\n]+)", makefile, re.MULTILINE))
    assert recipes["test"] == "$(BIN)/python -m pytest -m fast"
    assert recipes["check"] == "$(BIN)/python -m pytest"  # pyproject's addopts: -m 'not integration'
    assert recipes["check-slow"] == "$(BIN)/python -m pytest -m 'not fast and not integration'"
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    ci = [line.split("#")[0].strip() for line in lines if line.startswith("make ")]
    assert ci == ["make test", "make check-slow", "make synth", "make integration"]
