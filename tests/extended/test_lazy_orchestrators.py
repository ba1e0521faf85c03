"""The orchestrator registry loads an orchestrator's modules only when an environment uses it (a fresh process,
as ``cdk synth`` starts one)."""

from __future__ import annotations

import inspect
import subprocess
import sys

from ..conftest import ROOT

ORCHESTRATOR_FOLDERS = {"parallelcluster", "hyperpod", "pcs", "eks", "hyperpod_eks"}
SCRIPT = inspect.cleandoc(
    """
    import sys
    from pathlib import Path
    import aws_cdk as cdk
    from training_clusters.environments import add_environment
    app = cdk.App()
    add_environment(app, Path(sys.argv[1]))
    print(sorted(
        name for name in sys.modules
        if name.startswith(("training_clusters.stacks.", "training_clusters.constructs."))
        and name.split(".")[2] in {"parallelcluster", "hyperpod", "pcs", "eks", "hyperpod_eks"}
    ))
    """
)


def _loaded(environment: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, f"environments/{environment}.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=180,
    )
    return result.stdout.strip()


def test_an_app_without_an_orchestrator_imports_none_of_their_modules() -> None:
    assert _loaded("network-storage") == "[]"


def test_an_app_with_one_orchestrator_imports_its_own_modules_and_no_other() -> None:
    loaded = _loaded("pcs-c5n")
    assert "'training_clusters.stacks.pcs'" in loaded
    assert "'training_clusters.constructs.pcs.cluster'" in loaded
    assert not [
        folder
        for folder in ORCHESTRATOR_FOLDERS - {"pcs"}
        if f".{folder}'" in loaded or f".{folder}." in loaded
    ]
