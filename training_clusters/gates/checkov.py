"""checkov (Prisma Cloud's policy scanner, PyPI ``checkov``) on synthesized templates: the third gate.

checkov pins ``boto3==1.35.49`` and ``packaging<24``, which cannot share an environment with aws-cdk-lib's
``boto3>=1.44``, so it runs from its own virtual environment (``make bootstrap`` creates ``.venv-checkov``
from ``requirements-checkov.txt``) as a subprocess, offline::

    from training_clusters.gates.checkov import checkov_scan
    results = checkov_scan([Path("cdk.out/training-network-storage.template.json")])
    [r for r in results if r.failed]   # [] when every finding is fixed or skipped with a reason

A resource skips a check with a reason through :func:`training_clusters.gates.compliance.skip_checkov`. Free of CDK
imports, like :mod:`training_clusters.gates.cfn_lint`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CHECKOV_ENV_VAR", "CheckovResult", "CheckovUnavailable", "checkov_executable", "checkov_scan"]

#: Path of the ``checkov`` executable to run (default: ``.venv-checkov/bin/checkov``, else one on PATH).
CHECKOV_ENV_VAR = "TRAINING_CLUSTERS_CHECKOV"
CHECKOV_VENV = Path(".venv-checkov")
#: No network: no Prisma Cloud guideline download, no PyPI update check.
_OFFLINE = {"BC_SKIP_MAPPING": "TRUE", "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true"}


class CheckovUnavailable(RuntimeError):
    """checkov cannot be run: its virtual environment is missing (``make bootstrap``) or it failed."""


@dataclass(frozen=True)
class CheckovResult:
    """One checkov check that failed or was skipped on one resource of one template."""

    check_id: str
    check_name: str
    template: str
    resource: str
    failed: bool
    comment: str = ""

    def __str__(self) -> str:
        if self.failed:
            return f"{self.check_id} FAILED on {self.resource}: {self.check_name}"
        return f"{self.check_id} skipped on {self.resource}: {self.comment}"


def checkov_executable(project_root: Path | None = None) -> Path:
    """``$TRAINING_CLUSTERS_CHECKOV``, else ``.venv-checkov/bin/checkov`` under ``project_root`` (default: the
    working directory), else ``checkov`` on PATH.

    :raises CheckovUnavailable: none of them exists.
    """
    override = os.environ.get(CHECKOV_ENV_VAR)
    if override:
        return Path(override)
    local = (project_root or Path.cwd()) / CHECKOV_VENV / "bin" / "checkov"
    if local.exists():
        return local
    found = shutil.which("checkov")
    if found:
        return Path(found)
    raise CheckovUnavailable(
        f"checkov is not installed ({local} is missing); run `make bootstrap` to create {CHECKOV_VENV} from "
        f"requirements-checkov.txt, or point {CHECKOV_ENV_VAR} at a checkov executable"
    )


def checkov_scan(templates: Iterable[Path], *, executable: Path | None = None) -> list[CheckovResult]:
    """Run checkov's CloudFormation checks on ``templates`` in one process; failed and skipped checks.

    Passed checks are left out. ``template`` in each result is the template's absolute path.

    :raises CheckovUnavailable: checkov is missing, crashed, or printed no report.
    """
    files = [str(Path(t).resolve()) for t in templates]
    if not files:
        return []
    command = [str(executable or checkov_executable())]
    for file in files:
        command += ["--file", file]
    command += ["--framework", "cloudformation", "--compact", "--skip-download", "--soft-fail", "-o", "json"]
    try:
        completed = subprocess.run(  # a fixed executable and our own template paths
            command, capture_output=True, text=True, env={**os.environ, **_OFFLINE}, check=False
        )
    except OSError as error:
        raise CheckovUnavailable(f"checkov could not start: {error}") from None
    if completed.returncode != 0:
        raise CheckovUnavailable(f"checkov exited {completed.returncode}: {completed.stderr.strip()[-2000:]}")
    try:
        reports = json.loads(completed.stdout)
    except json.JSONDecodeError:
        raise CheckovUnavailable(f"checkov printed no JSON report: {completed.stdout[:500]}") from None
    return [
        result
        for report in (reports if isinstance(reports, list) else [reports])
        for result in _results(report)
    ]


def _results(report: dict[str, Any]) -> list[CheckovResult]:
    results = report.get("results", {})
    return [
        CheckovResult(
            check_id=check["check_id"],
            check_name=check.get("check_name", ""),
            template=check.get("file_abs_path") or check.get("file_path", ""),
            resource=check.get("resource", ""),
            failed=failed,
            comment=(check.get("check_result") or {}).get("suppress_comment", "") or "",
        )
        for key, failed in (("failed_checks", True), ("skipped_checks", False))
        for check in results.get(key, [])
    ]
