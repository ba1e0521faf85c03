"""The pytest plugin ``make mutation`` loads (``-p tests.mutation_selection``, with ``--noconftest``): of the
test modules it names in pyproject.toml's ``[tool.mutmut]``, only the tests that never start jsii and run in
milliseconds.

mutmut runs every test that calls a mutated function once per mutant, so one slow test is paid thousands of
times. Left out here (each is still in ``make test``): tests that synthesize a stack (the suite's fixtures,
which ``--noconftest`` does not load, and ``test_compute.py``'s module fixture), tests that start a
subprocess or read documents of megabytes, hypothesis tests that draw many examples, and tests whose
parametrized id holds an escape (mutmut names each test by its id on pytest's command line, where such an id
is "not found" and would end the whole run).
"""

from __future__ import annotations

import pytest

#: Fixtures that synthesize: the suite's own (tests/conftest.py) and test_compute.py's.
SYNTHESIZING_FIXTURES = frozenset(
    {"app", "stack", "environment_gates", "gated_stacks", "checkov_run", "environments_dir", "synthesized"}
)
#: Words of the names of tests that take seconds: subprocesses, files of megabytes, hypothesis, synths.
SLOW_NAMES = (
    "build-",  # test_bad_inputs' files whose mistake shows only when the stack is built
    "alias_bomb",
    "size_limit",
    "too_many_values",
    "broken_shipped_file",
    "nesting_deeper",
    "valid_tag_value",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept: list[pytest.Item] = []
    left_out: list[pytest.Item] = []
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        slow = any(word in item.nodeid for word in SLOW_NAMES)
        # mutmut runs a mutant's tests by id: an id with an escape (a parametrized '\\t', '\\u200b') is one
        # pytest cannot be given back on its command line, so it would stop the run with "not found"
        unaddressable = "\\" in item.nodeid
        (left_out if slow or unaddressable or fixtures & SYNTHESIZING_FIXTURES else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
