"""The ``training-clusters`` console script: commands, output formats and exit codes.

The AWS side of ``preflight`` is tested in test_preflight.py with botocore's Stubber; here the checks are
canned and the script's rendering and exit status are what is tested.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from training_clusters import cli, preflight
from training_clusters.catalog import all_instance_types

from ..conftest import ROOT

ENVIRONMENTS = ROOT / "environments"


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = cli.main(list(argv), stdout=out)
    return status, out.getvalue()


def test_catalog_lists_every_type_as_a_table_and_as_json() -> None:
    status, table = run("catalog")
    assert status == 0
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["type", "vCPUs", "GiB"]
    assert len(lines) == 2 + len(all_instance_types())
    p5 = next(line for line in lines if line.startswith("p5.48xlarge "))
    assert p5.split()[1:3] == ["192", "2048"] and "8 x H100" in p5 and " 32 " in p5
    status, document = run("--output", "json", "catalog")
    rows = json.loads(document)
    assert {r["name"] for r in rows} == {t.name for t in all_instance_types()}


def test_the_shipped_schema_is_current() -> None:
    status, document = run("schema")
    assert status == 0
    shipped = json.loads((ENVIRONMENTS / "schema.json").read_text())
    assert json.loads(document) == shipped, "environments/schema.json is stale: run `make schema`"


def test_schema_rejects_unknown_keys_and_names_every_section() -> None:
    schema = cli.environment_schema()
    assert schema["additionalProperties"] is False
    assert {"region", "network", "storage", "hyperpod", "parallelcluster", "eks", "tags"} <= set(
        schema["properties"]
    )
    assert schema["required"] == ["region", "availability_zones"]


def test_every_environment_file_points_editors_at_the_schema() -> None:
    for path in sorted(ENVIRONMENTS.glob("*.yaml")):
        assert path.read_text().startswith("# yaml-language-server: $schema=./schema.json\n"), path


def test_render_pcluster_prints_the_cluster_config(tmp_path: Path) -> None:
    status, text = run("render-pcluster", str(ENVIRONMENTS / "parallelcluster-c5n.yaml"))
    assert status == 0
    config = yaml.safe_load(text)
    assert config["Scheduling"]["Scheduler"] == "slurm"
    assert config["HeadNode"]["Networking"]["SubnetId"].startswith("subnet-")
    target = tmp_path / "cluster-config.yaml"
    status, text = run("render-pcluster", str(ENVIRONMENTS / "parallelcluster-c5n.yaml"), "-o", str(target))
    assert status == 0 and f"wrote {target}" in text
    assert yaml.safe_load(target.read_text()) == config


def test_render_pcluster_without_a_parallelcluster_section_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _ = run("render-pcluster", str(ENVIRONMENTS / "eks-g5-efa.yaml"))
    assert status == 2
    assert "eks-g5-efa.yaml: parallelcluster: render-pcluster needs a parallelcluster section" in (
        capsys.readouterr().err
    )


def test_a_bad_file_exits_2_with_our_message_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("region: us-east-1\navailability_zones: [us-east-1a]\nnetwork: {nat_gatways: 1}\n")
    status, _ = run("acceptance", str(bad))
    err = capsys.readouterr().err
    assert status == 2
    assert "network.nat_gatways: unknown key" in err
    assert "Traceback" not in err


def test_acceptance_writes_the_jobs_and_says_what_to_expect(tmp_path: Path) -> None:
    status, text = run("acceptance", str(ENVIRONMENTS / "parallelcluster-c5n.yaml"), "-d", str(tmp_path))
    assert status == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written and all(name in text for name in written)
    assert "MB/s" in text
    status, document = run(
        "--output", "json", "acceptance", str(ENVIRONMENTS / "eks-g5-efa.yaml"), "-d", str(tmp_path / "eks")
    )
    jobs = json.loads(document)["jobs"]
    assert status == 0 and jobs
    assert all(job["expected"] for job in jobs)


def test_acceptance_without_efa_says_there_is_nothing_to_verify(tmp_path: Path) -> None:
    status, text = run("acceptance", str(ENVIRONMENTS / "eks-gpu-sharing.yaml"), "-d", str(tmp_path))
    assert status == 0
    assert "nothing to verify" in text
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


# --------------------------------------------------------------------------------------------------
# preflight: rendering and exit status


def _canned(monkeypatch: pytest.MonkeyPatch, checks: list[preflight.Check]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake_preflight(config: Any, clients: Any) -> list[preflight.Check]:
        calls.append({"region": config.region, "clients": clients})
        return checks

    monkeypatch.setattr(preflight, "preflight", fake_preflight)
    monkeypatch.setattr(
        preflight.AwsClients, "from_session", classmethod(lambda cls, session, region: region)
    )
    return calls


def _check(passed: bool, needed: str = "32 vCPUs", available: str = "8 vCPUs") -> preflight.Check:
    return preflight.Check(
        check="EC2 quota L-DB2E81BA Running On-Demand G and VT instances",
        needed=needed,
        available=available,
        passed=passed,
        remedy="" if passed else "request an increase to at least 32",
    )


def test_preflight_failure_exits_1_and_shows_the_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _canned(monkeypatch, [_check(False)])
    status, text = run("preflight", str(ENVIRONMENTS / "eks-g5-efa.yaml"))
    assert status == 1
    assert calls[0]["clients"] == "us-east-1"
    row = text.splitlines()[2]
    assert "Running On-Demand G and VT instances" in row and "32 vCPUs" in row and "8 vCPUs" in row
    assert "FAIL" in row and "request an increase" in row
    assert "1 of 1 checks failed" in text


def test_preflight_pass_exits_0_and_json_is_machine_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    _canned(monkeypatch, [_check(True, available="64 vCPUs")])
    status, document = run(
        "--output", "json", "preflight", str(ENVIRONMENTS / "eks-g5-efa.yaml"), "--region", "us-east-1"
    )
    result = json.loads(document)
    assert status == 0
    assert (result["passed"], result["region"]) == (True, "us-east-1")
    assert result["checks"][0]["available"] == "64 vCPUs"


def test_the_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "training-clusters"
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True)
    for command in ("preflight", "render-pcluster", "acceptance", "catalog", "schema"):
        assert command in result.stdout


def test_readme_lists_exactly_the_iam_actions_preflight_calls() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("- **preflight**") : readme.index("- **render-pcluster**")]
    listed = set(re.findall(r"`((?:servicequotas|ec2):\w+)`", section))
    assert listed == set(preflight.REQUIRED_IAM_ACTIONS)
