"""``compute``'s node groups, HyperPod's controller and login, and the merge with the orchestrator's own section
(training_clusters/config/compute.py), asserted whole on small files of their own: how a group is sized at both sides of
its boundaries, which field a HyperPod type is refused at, and that the section written is the caller's own.
Free of CDK; ``make mutation`` runs it against config/compute.py with tests/test_compute_section.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from training_clusters.config.compute import expand_intent
from training_clusters.model.errors import ConfigurationError

_EC2_NAME = "HyperPod's ml. form is added when orchestrator is hyperpod"


def _file(orchestrator: str, group: dict[str, Any], **compute: Any) -> dict[str, Any]:
    """A file of one node group ``gpu`` (g5.8xlarge unless ``group`` says otherwise) under ``orchestrator``."""
    node_group = {"name": "gpu", "instance_type": "g5.8xlarge", **group}
    return {"name": "team", "orchestrator": orchestrator, "compute": {"node_groups": [node_group], **compute}}


def _problem(document: dict[str, Any]) -> str:
    with pytest.raises(ConfigurationError) as raised:
        expand_intent(document)
    return str(raised.value)


# --- sizing a group: count, or min_count and max_count


@pytest.mark.parametrize(
    ("group", "named"),
    [
        ({"count": 2, "min_count": 0}, "min_count"),
        ({"count": 2, "max_count": 2}, "max_count"),
        ({"count": 2, "min_count": 0, "max_count": 2}, "min_count and max_count"),
    ],
)
def test_count_with_scaling_names_each_scaling_field_given(group: dict[str, Any], named: str) -> None:
    assert _problem(_file("pcs", group)) == (
        f"compute.node_groups[0]: count (2) and {named} both size the group; give count (a fixed size) or "
        "min_count and max_count (scaling)"
    )


def test_min_count_may_equal_max_count_but_not_exceed_it() -> None:
    (node_group,) = expand_intent(_file("pcs", {"min_count": 2, "max_count": 2}))["pcs"][
        "compute_node_groups"
    ]
    assert (node_group["min_count"], node_group["max_count"]) == (2, 2)
    assert _problem(_file("pcs", {"min_count": 3, "max_count": 2})) == (
        "compute.node_groups[0].min_count: must not exceed max_count (2), got 3"
    )


def test_min_count_equal_to_max_count_is_a_fixed_size_where_the_orchestrator_keeps_one() -> None:
    """HyperPod, HyperPod on EKS and EKS keep a fixed number of nodes: min_count = max_count is that number."""
    hyperpod = expand_intent(_file("hyperpod", {"min_count": 2, "max_count": 2}))["hyperpod"][
        "instance_groups"
    ]
    assert hyperpod[-1]["count"] == 2
    hyperpod_eks = expand_intent(_file("hyperpod-eks", {"min_count": 2, "max_count": 2}))["hyperpod_eks"]
    assert hyperpod_eks["instance_groups"][0]["count"] == 2
    eks = expand_intent(_file("eks", {"min_count": 2, "max_count": 2}))["eks"]
    assert eks["efa_nodegroups"] == [{"name": "gpu", "instance_type": "g5.8xlarge", "size": 2}]
    assert _problem(_file("eks", {"min_count": 1, "max_count": 2})) == (
        "compute.node_groups[0]: min_count 1 and max_count 2 scale the group, but eks keeps a fixed number of nodes "
        "here; give count, or pick parallelcluster or pcs"
    )


# --- HyperPod: the controller, login and worker types, each refused at its own field


def test_a_stated_hyperpod_controller_is_used_in_its_ml_form() -> None:
    document = _file("hyperpod", {"count": 1}, controller={"instance_type": "m5.2xlarge"})
    controller = expand_intent(document)["hyperpod"]["instance_groups"][0]
    assert controller == {
        "name": "controller",
        "instance_type": "ml.m5.2xlarge",
        "count": 1,
        "role": "controller",
    }


@pytest.mark.parametrize("where", ["controller", "login"])
def test_a_hyperpod_controller_or_login_type_in_ml_form_is_refused_at_its_field(where: str) -> None:
    document = _file("hyperpod", {"count": 1}, **{where: {"instance_type": "ml.m5.xlarge"}})
    assert _problem(document) == (
        f"compute.{where}.instance_type: give the EC2 name, got 'ml.m5.xlarge' (did you mean 'm5.xlarge'? "
        f"{_EC2_NAME})"
    )


@pytest.mark.parametrize("where", ["controller", "login"])
def test_a_hyperpod_controller_or_login_type_not_spelt_as_a_type_is_refused_at_its_field(where: str) -> None:
    document = _file("hyperpod", {"count": 1}, **{where: {"instance_type": "g9.huge"}})
    assert _problem(document) == (
        f"compute.{where}.instance_type: must be an EC2 instance type such as 'c7i.2xlarge' (family.size), got "
        "'g9.huge'"
    )


@pytest.mark.parametrize("where", ["controller", "login"])
def test_a_hyperpod_controller_or_login_type_not_in_the_catalogue_is_used(where: str) -> None:
    document = _file("hyperpod", {"count": 1}, **{where: {"instance_type": "m7i.xlarge"}})
    groups = expand_intent(document)["hyperpod"]["instance_groups"]
    assert {g["name"]: g["instance_type"] for g in groups}[where] == "ml.m7i.xlarge"


def test_a_type_hyperpod_does_not_offer_is_refused_at_the_controllers_field() -> None:
    document = _file("hyperpod", {"count": 1}, controller={"instance_type": "t3.small"})
    assert _problem(document) == (
        "compute.controller.instance_type: 'ml.t3.small' is not offered by SageMaker HyperPod "
        "(`training-clusters catalog` lists the types it offers) (orchestrator: hyperpod)"
    )


def test_a_type_hyperpod_does_not_offer_is_refused_at_the_node_groups_field() -> None:
    assert _problem(_file("hyperpod", {"instance_type": "t3.small", "count": 1})) == (
        "compute.node_groups[0].instance_type: 'ml.t3.small' is not offered by SageMaker HyperPod "
        "(`training-clusters catalog` lists the types it offers) (orchestrator: hyperpod)"
    )


def test_efa_asked_of_a_type_without_it_is_refused_at_the_hyperpod_groups_field() -> None:
    assert _problem(_file("hyperpod", {"instance_type": "m5.xlarge", "count": 1, "efa": True})) == (
        "compute.node_groups[0].efa: m5.xlarge has no EFA, got true; use an EFA type (e.g. g5.8xlarge, "
        "c5n.18xlarge, p5.48xlarge) or omit efa"
    )


# --- the merged section belongs to the caller


def test_changing_the_expanded_section_leaves_the_files_own_section_as_written() -> None:
    """What the file's own section holds besides compute's part is copied, not shared: a caller that adjusts
    the expanded section (a later default, a test's variant) does not rewrite the document it read."""
    document = _file("eks", {"count": 2})
    document["eks"] = {"addons": {"kueue": True}, "system_nodegroup": {"instance_type": "t3.large"}}
    written = copy.deepcopy(document)
    section = expand_intent(document)["eks"]
    assert section["addons"] == {"kueue": True}
    section["addons"]["kueue"] = False
    section["system_nodegroup"]["instance_type"] = "m5.xlarge"
    assert document == written
