"""scripts/compare_templates.py on two small hand-made cloud assemblies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.scripts import load_script

compare_templates = load_script("scripts/compare_templates.py", "compare_templates")

TEMPLATE: dict[str, Any] = {
    "Resources": {"Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}},
    "Outputs": {
        "ClusterName": {"Value": "training"},
        "NcclTestG5": {"Value": "kubectl apply -f cdk.out/training-x.nccl-tests-g5.yaml"},
    },
}


def _assembly(folder: Path, templates: dict[str, dict[str, Any]], *other: str) -> Path:
    folder.mkdir()
    for name, template in templates.items():
        (folder / f"{name}.template.json").write_text(json.dumps(template))
    for name in other:
        (folder / name).write_text("")
    return folder


def _changed(**outputs: str) -> dict[str, Any]:
    template = json.loads(json.dumps(TEMPLATE))
    for key, value in outputs.items():
        template["Outputs"][key]["Value"] = value
    return template


def test_identical_assemblies_match(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _assembly(tmp_path / "a", {"x": TEMPLATE, "y": TEMPLATE})
    after = _assembly(tmp_path / "b", {"x": TEMPLATE, "y": TEMPLATE})
    assert compare_templates.main([str(before), str(after)]) == 0
    assert capsys.readouterr().out.splitlines() == ["identical templates: 2", "templates match"]


def test_a_difference_is_reported_by_its_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _assembly(tmp_path / "a", {"x": TEMPLATE})
    after = _assembly(tmp_path / "b", {"x": _changed(ClusterName="other")})
    assert compare_templates.main([str(before), str(after)]) == 1
    text = capsys.readouterr().out
    assert "DIFFERS: x.template.json\n  Outputs.ClusterName.Value\n" in text
    assert '    before: "training"\n    after:  "other"\n' in text
    assert text.endswith("templates DIFFER\n")


def test_expected_differences_do_not_count_and_dropped_files_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _assembly(tmp_path / "a", {"x": TEMPLATE}, "training-x.nccl-tests-g5.yaml")
    after = _assembly(tmp_path / "b", {"x": _changed(NcclTestG5="training-clusters acceptance ...")})
    assert compare_templates.main([str(before), str(after), "--ignore", "Outputs.NcclTest*"]) == 0
    text = capsys.readouterr().out
    assert "expected difference: x.template.json\n  Outputs.NcclTestG5.Value\n" in text
    assert "other file only in the first assembly: training-x.nccl-tests-g5.yaml" in text
    assert text.endswith("templates match\n")


def test_missing_templates_and_keys_differ(tmp_path: Path) -> None:
    template = json.loads(json.dumps(TEMPLATE))
    del template["Outputs"]["ClusterName"]
    before = _assembly(tmp_path / "a", {"x": TEMPLATE, "gone": TEMPLATE})
    after = _assembly(tmp_path / "b", {"x": template})
    result = compare_templates.compare(before, after)
    assert result.only_before == ["gone.template.json"]
    ((path, left, right),) = result.differences["x.template.json"]
    assert (path, left, repr(right)) == ("Outputs.ClusterName", {"Value": "training"}, "<absent>")
    assert not result.clean
