"""The HyperPod lifecycle's reader of its JSON inputs (``node_scripts/hyperpod/lib/cluster_config.py``), as a
module: the language it keeps to, and its command line. What it accepts and refuses, with every message, is
proven through the scripts that run it, in the sandbox (``tests/lifecycle/``) and on real Slurm
(``tests/integration/``)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from training_clusters.node_scripts.hyperpod.lib import cluster_config

ROOT = Path(__file__).resolve().parent.parent
MODULE = Path(cluster_config.__file__).resolve()


def test_the_module_keeps_to_the_language_of_the_oldest_node_python() -> None:
    """Python 3.7 (Amazon Linux 2's python3): the grammar, and ruff's per-file target that holds it there."""
    source = MODULE.read_text(encoding="utf-8")
    ast.parse(source, feature_version=(3, 7))
    with pytest.raises(SyntaxError):  # the check itself tells the difference
        ast.parse(source + "\nif (x := 1):\n    pass\n", feature_version=(3, 7))
    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    assert ruff["per-file-target-version"][MODULE.relative_to(ROOT).as_posix()] == "py37"
    tree = ast.parse(source)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {name.split(".")[0] for name in imported} <= sys.stdlib_module_names  # the standard library only


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """The module as ``lib/cluster_config.sh`` runs it."""
    return subprocess.run(
        [sys.executable, "-I", "-S", str(MODULE), *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    "args", [[], ["params", "a", "b"], ["role", "a", "b", "c"], ["other", "a", "b", "c"]]
)
def test_a_wrong_command_line_is_a_usage_error(args: list[str]) -> None:
    done = run(*args)
    assert (done.returncode, done.stdout) == (64, "")
    assert done.stderr.startswith("usage: cluster_config.py params PARAMS_FILE SETTINGS_FILE HOME\n")


def test_params_prints_the_values_and_a_refusal_names_the_file(tmp_path: Path) -> None:
    params = tmp_path / "provisioning_parameters.json"
    params.write_text(
        json.dumps({"controller_group": "ctl", "worker_groups": [{"instance_group_name": "w"}]})
    )
    settings = tmp_path / "training_clusters.json"

    done = run("params", str(params), str(settings), str(tmp_path))

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[:2] == ["controller_group=ctl", "login_group="]
    assert done.stdout.splitlines()[-1] == "worker_group=w:w"

    settings.write_text(json.dumps({"enable_docker": "maybe"}))
    refused = run("params", str(params), str(settings), str(tmp_path))
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == "training_clusters.json: enable_docker must be true or false, got 'maybe'\n"


def test_role_exits_2_on_an_unreadable_file_and_3_on_an_unknown_node(tmp_path: Path) -> None:
    config = tmp_path / "resource_config.json"
    config.write_text(
        json.dumps({"InstanceGroups": [{"Name": "ctl", "Instances": [{"CustomerIpAddress": "10.0.0.1"}]}]})
    )

    assert run("role", str(tmp_path / "missing.json"), "10.0.0.1", "ctl", "").returncode == 2
    unknown = run("role", str(config), "10.0.0.9", "ctl", "")
    assert unknown.returncode == 3
    assert unknown.stderr.startswith(
        "resource_config.json: this node's IPv4 addresses (10.0.0.9) are not listed"
    )
    known = run("role", str(config), "10.0.0.9 10.0.0.1", "ctl", "", "w:train")
    assert (known.returncode, known.stderr) == (0, "")
    assert known.stdout.splitlines() == [
        "role=controller",
        "group=ctl",
        "partition=",
        "node_ip=10.0.0.1",
        "instance_id=",
        "controller_ips=10.0.0.1",
        f"warning=worker group 'w' has no instances in {config}",
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"workload_manager": "eks"}', "eks"),
        ('{"workload_manager": "slurm"}', "slurm"),
        ("{}", "slurm"),
        ('{"workload_manager": "k8s"}', "slurm"),
        ("[]", "slurm"),
        ("not json", "slurm"),
        (None, "slurm"),
    ],
)
def test_workload_manager_is_slurm_unless_the_file_says_eks(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    """on_create.sh asks before its preflight, which then says what is wrong with a bad file."""
    params = tmp_path / "provisioning_parameters.json"
    if content is not None:
        params.write_text(content)
    done = run("workload-manager", str(params))
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{expected}\n", "")
