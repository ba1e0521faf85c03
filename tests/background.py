"""Work the suite hands to the machine's other core while the main process synthesizes.

cfn-lint is pure Python and takes longer per template than CDK takes to synthesize it, so linting in one
worker process (spawned: it never starts jsii) overlaps the rest of the suite. checkov runs once per session
(:func:`submit_checkov`), a subprocess of its own virtual environment waited on by a background thread. Tests that mostly wait on a
subprocess (shellcheck, the wheel build and its downstream app) register it with :func:`start` when their
module is collected; it starts when the session begins (:func:`begin_for`) if a test of that module was
selected, so a tier that leaves the module out (``make test`` leaves out shellcheck and the wheel) never pays
for it. Results are awaited where a test asserts on them, so a failure still fails the test that owns it.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Generic, TypeVar

from training_clusters.gates.cfn_lint import LintMatch, cfn_lint
from training_clusters.gates.checkov import CheckovResult, checkov_executable, checkov_scan

T = TypeVar("T")

#: Background work yields to the main process: its tests are the suite's critical path, the background has slack.
NICENESS = 10


def _yield_to_the_main_process() -> None:
    """Lower this thread's priority (Linux schedules threads; the subprocesses it starts inherit it)."""
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)


_pool: ProcessPoolExecutor | None = None
#: For work that waits on subprocesses (the GIL is released while it waits).
_threads = ThreadPoolExecutor(
    max_workers=3, thread_name_prefix="background", initializer=_yield_to_the_main_process
)


class Deferred(Generic[T]):
    """Subprocess-bound work of one test module: started by :func:`begin_for` when the session begins (if a
    test of the module was selected), or by the first ``result()``."""

    def __init__(self, work: Callable[[], T], module: str) -> None:
        self.module = module
        self._work = work
        self._future: Future[T] | None = None

    def begin(self) -> None:
        if self._future is None:
            self._future = _threads.submit(self._work)

    @property
    def started(self) -> bool:
        return self._future is not None

    def result(self) -> T:
        self.begin()
        assert self._future is not None
        return self._future.result()


#: Work registered by the test modules as they are collected, in order.
_registered: list[Deferred[object]] = []


def start(work: Callable[[], T]) -> Deferred[T]:
    """Register ``work`` (subprocess-bound) of the calling test module; ``.result()`` where a test needs it."""
    deferred = Deferred(work, sys._getframe(1).f_globals["__name__"])
    _registered.append(deferred)  # type: ignore[arg-type]
    return deferred


def begin_for(modules: Iterable[str]) -> list[str]:
    """Start, in background threads, the registered work of ``modules`` (those with selected tests); the
    modules whose work started."""
    wanted = set(modules)
    begun = []
    for deferred in _registered:
        if deferred.module in wanted:
            deferred.begin()
            begun.append(deferred.module)
    return begun


def submit_checkov(templates: list[Path], project_root: Path) -> Future[list[CheckovResult]]:
    """checkov over ``templates`` in one subprocess, waited on by a background thread.

    The executable is found now, so a missing ``.venv-checkov`` fails the tests that read the results.
    """
    try:
        executable = checkov_executable(project_root)
    except Exception as error:
        failed: Future[list[CheckovResult]] = Future()
        failed.set_exception(error)
        return failed
    return start(lambda: checkov_scan(templates, executable=executable))


#: Waits on the cfn-lint worker, apart from :data:`_threads` so a queue of lints never holds up other work.
_lint_waiters = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lint-wait")
_pool_lock = threading.Lock()


def _worker(broken: ProcessPoolExecutor | None = None) -> ProcessPoolExecutor:
    """The cfn-lint worker; a new one when ``broken`` is the current one (its process died)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool is broken:
            _pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_yield_to_the_main_process,
            )
        return _pool


def _lint_in_worker(template: Path, regions: list[str]) -> list[LintMatch]:
    """cfn-lint in the worker process. If the worker process dies (it did once, with nothing in its output, on
    a fresh clone: ``BrokenProcessPool``), the template is linted again in a new worker, once: a finding is a
    result, never a dead process, so this retries no verdict."""
    pool = _worker()
    try:
        return pool.submit(cfn_lint, template, regions).result()
    except BrokenProcessPool:
        return _worker(broken=pool).submit(cfn_lint, template, regions).result()


def submit_lint(template: Path, regions: Iterable[str]) -> Future[list[LintMatch]]:
    """cfn-lint ``template`` in the background worker."""
    return _lint_waiters.submit(_lint_in_worker, template, list(regions))


def lint(template: Path, regions: Iterable[str]) -> list[LintMatch]:
    """cfn-lint ``template`` in the background worker and wait: the main process never loads cfn-lint's rules."""
    return submit_lint(template, regions).result()


def shutdown() -> None:
    """Stop the worker (end of session)."""
    global _pool
    if _pool is not None:
        _pool.shutdown(cancel_futures=True)
        _pool = None
