"""No dead values: every Helm value key an environment sets changes what the pinned chart renders.

For every shipped EKS and HyperPod-on-EKS environment, the values each chart receives are read from the
synthesized template (what CDK's Helm handler passes to ``helm``). Each leaf key is then removed in turn and the
chart rendered again by the real helm: the render must differ. A key whose value is the chart's own default
cannot change the render by being removed; such a key must be set to a different value instead (a probe) and
change the render then, and it must be listed, with the reason we state it anyway, in :data:`RESTATEMENTS`. A
key that changes nothing either way is dead: the chart does not read it. helm and the charts as
:mod:`tests.charts.helm` finds them.

Randomness is masked: a field that differs between two renders of the same values (Grafana's generated
password, webhook certificates and the checksums of both) is compared by key only.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from training_clusters.environments import add_environment, environment_files
from training_clusters.model.releases import (
    HELM_CHARTS,
    KUBE_PROMETHEUS_STACK_CHART,
    KUBEFLOW_TRAINER_CHART,
    HelmChartSpec,
)

from ..assertions import text
from ..conftest import CDK_CONTEXT, JSII_LOCK, ROOT
from .helm import chart_dir, render_text

pytestmark = pytest.mark.integration

SPECS = {spec.chart: spec for spec in HELM_CHARTS}
KUBERNETES_ENVIRONMENTS = [
    path
    for path in environment_files(ROOT / "environments")
    if path.stem.startswith(("eks-", "hyperpod-eks-"))
]

#: Keys we set to the chart's own default on purpose, by chart and dotted key, with why. Each must still be read
#: by the chart (a different value changes the render), and each must be a restatement in some environment.
RESTATEMENTS: dict[str, dict[str, str]] = {
    "aws-efa-k8s-device-plugin": {
        "image.tag": "v0.5.13, the chart's appVersion: the plugin image is stated whole, tag beside the "
        "region's repository we set (EFA_DEVICE_PLUGIN_IMAGE_TAG)",
        "supportedInstanceLabels.keys": "the label our instance-type allow-list (supportedInstanceLabels.values) "
        "matches: key and values stated together",
    },
    "gpu-operator": {
        "daemonsets.tolerations": "the accelerator taint our GPU nodegroups carry: the DCGM exporter must "
        "tolerate it whatever the chart's default becomes",
        "dcgmExporter.enabled": "the component we install the operator for",
        "migManager.enabled": "follows mig_layouts: True with layouts (the chart's default), False without them",
        "migManager.config.default": "all-disabled, the entry our MIG ConfigMap defines for nodes without a "
        "nvidia.com/mig.config label: it must name an entry of that ConfigMap",
    },
    "kube-prometheus-stack": {
        "grafana.enabled": "follows GpuMonitoring(grafana=...): False turns Grafana off",
        "grafana.persistence.accessModes": "ReadWriteOnce, what the Recreate strategy set beside it is for",
        "grafana.persistence.size": "follows grafana_volume_gib, whose default (10) is the chart's 10Gi",
    },
    "kubeflow-trainer": {
        "image.registry": "the controller image stated whole (KUBEFLOW_TRAINER_IMAGE): registry, repository "
        "and tag; the chart derives the same from its version",
        "image.repository": "as image.registry",
        "image.tag": "as image.registry: v2.3.0 is what 2.3.0's trainer.resolveImageTag derives from the chart "
        "version when the tag is unset; another tag changes the controller's image",
        "jobset.install": "JobSet runs every TrainJob: installing it is not optional here",
    },
    "nvidia-device-plugin": {
        "gfd.enabled": "GPU feature discovery stays off (the chart's default): turning it on also installs "
        "node-feature-discovery",
        "tolerations": "CriticalAddonsOnly and the accelerator taint our GPU nodegroups carry: the plugin must "
        "reach those nodes whatever the chart's default becomes",
    },
}

Path_ = tuple[str, ...]


def _leaves(values: Any, prefix: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every key we set, as its path: a value that is not a mapping, or an empty mapping (a list is one value)."""
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from _leaves(value, (*prefix, key))
    else:
        yield prefix, values


def _without(values: dict[str, Any], path: Path_) -> dict[str, Any]:
    changed = copy.deepcopy(values)
    parent = changed
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return changed


def _with(values: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(values)
    parent = changed
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return changed


def probe(value: Any) -> Any:
    """A value of the same type that differs from ``value``."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return f"{value}-probe"
    if isinstance(value, list):
        return [] if value else ["probe"]
    if isinstance(value, dict):
        return {"probe": "probe"}
    return "probe"


def _key(line: str) -> str:
    return line.split(":", 1)[0]


def _masking(first: str, second: str) -> Callable[[str], str]:
    """A normaliser that drops the value of every line whose key renders differently on each run."""
    a, b = first.splitlines(), second.splitlines()
    assert len(a) == len(b), "two renders of the same values differ in length: randomness beyond one line"
    varying = {_key(x) for x, y in zip(a, b, strict=True) if x != y}

    def normal(rendered: str) -> str:
        return "\n".join(
            f"{_key(line)}: <varies>" if _key(line) in varying else line for line in rendered.splitlines()
        )

    return normal


def key_effects(spec: HelmChartSpec, values: dict[str, Any], tmp_path: Path) -> dict[str, str]:
    """``dotted key`` -> ``removal`` (removing it changes the render), ``probe`` (only a different value does)
    or ``none`` (neither) for every leaf of ``values``."""
    baseline = render_text(spec, values, tmp_path)
    normal = _masking(baseline, render_text(spec, values, tmp_path))
    expected = normal(baseline)
    effects = {}
    for path, value in _leaves(values):
        if normal(render_text(spec, _without(values, path), tmp_path)) != expected:
            effects[".".join(path)] = "removal"
        elif normal(render_text(spec, _with(values, path, probe(value)), tmp_path)) != expected:
            effects[".".join(path)] = "probe"
        else:
            effects[".".join(path)] = "none"
    return effects


@pytest.fixture(scope="module")
def values_by_chart() -> dict[str, dict[str, list[str]]]:
    """chart -> the values JSON an environment gives it -> the environments giving exactly those values."""
    found: dict[str, dict[str, list[str]]] = {}
    with JSII_LOCK:
        app = cdk.App(context=dict(CDK_CONTEXT))
        stacks = {path.stem: add_environment(app, path) for path in KUBERNETES_ENVIRONMENTS}
        assembly = app.synth()
    for name, stack in stacks.items():
        template = json.loads(
            Path(assembly.get_stack_artifact(stack.artifact_id).template_full_path).read_text()
        )
        for resource in template["Resources"].values():
            if resource["Type"] != "Custom::AWSCDK-EKS-HelmChart":
                continue
            properties = resource["Properties"]
            spec = SPECS[properties["Chart"]]
            assert properties["Version"] == spec.version
            values = json.dumps(json.loads(text(properties.get("Values", "{}"))), sort_keys=True)
            found.setdefault(spec.chart, {}).setdefault(values, []).append(name)
    return found


@pytest.mark.parametrize("chart", sorted(SPECS))
def test_every_value_an_environment_sets_changes_the_render(
    chart: str, values_by_chart: dict[str, dict[str, list[str]]], tmp_path: Path
) -> None:
    spec = SPECS[chart]
    sets = values_by_chart.get(chart)
    if not sets:
        pytest.skip(f"no shipped environment installs {chart}")
    chart_dir(spec)
    unexplained, dead, restated = [], [], set()
    for values, environments in sets.items():
        where = ", ".join(environments)
        for key, effect in key_effects(spec, json.loads(values), tmp_path).items():
            if effect == "probe" and key in RESTATEMENTS.get(chart, {}):
                restated.add(key)
            elif effect == "probe":
                unexplained.append(f"{key}: the chart's default, restated without a reason ({where})")
            elif effect == "none":
                dead.append(f"{key}: no effect, removed or changed ({where})")
    assert not dead + unexplained, f"{chart}:\n" + "\n".join(dead + unexplained)
    assert restated == set(RESTATEMENTS.get(chart, {})), "a listed restatement no longer is one"


def test_the_check_tells_a_dead_key_a_restated_default_and_a_live_key_apart(tmp_path: Path) -> None:
    """The test above can fail: a key the chart never reads, one set to its default, one changed."""
    chart_dir(KUBEFLOW_TRAINER_CHART)
    values = {
        "notAKey": {"ofTheChart": True},
        "image": {"pullPolicy": "IfNotPresent"},
        "manager": {"replicas": 2},
    }
    assert key_effects(KUBEFLOW_TRAINER_CHART, values, tmp_path) == {
        "notAKey.ofTheChart": "none",
        "image.pullPolicy": "probe",
        "manager.replicas": "removal",
    }


def test_random_fields_are_masked_and_nothing_else(tmp_path: Path) -> None:
    """Two renders of Grafana differ only in what the chart generates; the mask keeps every other line."""
    values: dict[str, Any] = {"grafana": {"enabled": True}}
    first = render_text(KUBE_PROMETHEUS_STACK_CHART, values, tmp_path)
    second = render_text(KUBE_PROMETHEUS_STACK_CHART, values, tmp_path)
    assert first != second
    normal = _masking(first, second)
    assert normal(first) == normal(second)
    masked = {line.strip() for line in normal(first).splitlines() if line.endswith(": <varies>")}
    assert "admin-password: <varies>" in masked
    assert len(masked) <= 5, masked
