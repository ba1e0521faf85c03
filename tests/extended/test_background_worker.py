"""The cfn-lint worker of the test session (tests/background.py): a worker process that dies is replaced,
once, and the template is linted in the new one."""

from __future__ import annotations

import json
import os
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from .. import background


def test_a_worker_that_died_is_replaced_and_the_lint_still_answers(tmp_path: Path) -> None:
    dead = background._worker()
    with pytest.raises(BrokenProcessPool):
        dead.submit(os._exit, 1).result()
    template = tmp_path / "template.json"
    template.write_text(json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}))
    assert background._lint_in_worker(template, ["us-east-1"]) == []
    assert background._worker() is not dead


def test_a_finding_is_an_answer_not_a_retry(tmp_path: Path) -> None:
    template = tmp_path / "template.json"
    template.write_text(json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topc"}}}))
    worker = background._worker()
    findings = background._lint_in_worker(template, ["us-east-1"])
    assert [f.rule for f in findings] == ["E3006"]
    assert background._worker() is worker
