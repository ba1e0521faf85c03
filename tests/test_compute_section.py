"""``orchestrator`` + ``compute`` (training_clusters/config/compute.py) asserted whole, free of CDK: each message as the
file's author reads it (not a prefix of it), and the section each orchestrator gets from the one shipped
``training-any.yaml``, key by key. tests/test_compute.py synthesizes those sections; this module is what
``make mutation`` runs against intent.py."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from training_clusters.config import construct_error_line, load_environment, parse_environment
from training_clusters.config.compute import (
    DEFAULT_HYPERPOD_CONTROLLER,
    DEFAULT_HYPERPOD_EKS_VOLUME_GIB,
    DEFAULT_PCS_AMI_SSM_PARAMETER,
    Ignorable,
    Orchestrator,
    expand_intent,
)
from training_clusters.config.yaml_file import read_yaml_with_lines
from training_clusters.model.errors import ConfigurationError

from .test_compute import MESSAGES, UNUSED, _as

WHOLE = {
    "compute without orchestrator": "orchestrator: required with compute; one of parallelcluster, hyperpod, pcs, eks, hyperpod-eks (it picks who runs the nodes)",
    "orchestrator without compute": "compute: required with orchestrator: 'eks'; it states the nodes (node_groups, and optionally controller and login); or remove orchestrator and give the orchestrator's own section",
    "unknown orchestrator": "orchestrator: must be one of parallelcluster, hyperpod, pcs, eks, hyperpod-eks, got 'slurm'",
    "another orchestrator's section": "eks: this file builds orchestrator: pcs, so a eks section does not apply; remove it, set orchestrator: eks, or add eks to ignore",
    "compute not a section": "compute: must be a section of key: value settings (node_groups, controller, login, cluster_name), got [1]",
    "no node groups": "compute.node_groups: List should have at least 1 item after validation, not 0, got []",
    "unknown key": "compute.node_groups[0].gpus: unknown key (got value 1); allowed here: name, instance_type, count, min_count, max_count, efa, capacity",
    "count as a string": "compute.node_groups[0].count: Input should be a valid integer, got '2'",
    "count true": "compute.node_groups[0].count: Input should be a valid integer, got True",
    "not catalogued": "compute.node_groups[0].instance_type: 'g9.48xlarge' is not in the catalogue (`training-clusters catalog` lists its types); give its facts in this file under instance_types: (name, vcpus, memory_gib, accelerators, max_efa_interfaces, gpudirect_rdma, network_gbps, quota_family, source)",
    "not a type name": "compute.node_groups[0].instance_type: must be an EC2 instance type such as 'c7i.2xlarge' (family.size), got 'g9.huge'",
    "login not a type name": "compute.login.instance_type: must be an EC2 instance type such as 'c7i.2xlarge' (family.size), got 'm7i-xlarge'",
    "controller under eks": "compute.controller: orchestrator: eks runs the Kubernetes control plane (managed by EKS) itself, so no instance of yours is a controller and this would not be used; remove it, or add compute.controller to ignore",
    "controller under pcs": "compute.controller: orchestrator: pcs runs the Slurm controller (managed by AWS PCS) itself, so no instance of yours is a controller and this would not be used; remove it, or add compute.controller to ignore",
    "login under hyperpod-eks": "compute.login: orchestrator: hyperpod-eks has no login nodes (kubectl is the way in), so this would not be used; remove it, or add compute.login to ignore",
    "users under eks": "users: are created on the nodes of a hyperpod or parallelcluster cluster, and orchestrator: eks has none; remove users, or add users to ignore",
    "ignore what is used": "ignore[0]: compute.login is used by orchestrator: parallelcluster; remove it from ignore",
    "ignore what is absent": "ignore[2]: hyperpod is not in this file; remove it from ignore",
    "ignore something else": "ignore[2]: must be one of compute.controller, compute.login, users, hyperpod, parallelcluster, eks, pcs, hyperpod_eks, got 'network'",
    "ignore not a list": "ignore: must be a list of compute.controller, compute.login, users, hyperpod, parallelcluster, eks, pcs, hyperpod_eks, got 'compute.login'",
    "ignore without orchestrator": "ignore: lists what orchestrator: cannot use from compute and the other sections; it needs orchestrator and compute, or remove it",
    "ml. form": "compute.node_groups[0].instance_type: give the EC2 name, got 'ml.g5.8xlarge' (did you mean 'g5.8xlarge'? HyperPod's ml. form is added when orchestrator is hyperpod)",
    "not on hyperpod": "compute.login.instance_type: 'ml.t3.small' is not offered by SageMaker HyperPod (`training-clusters catalog` lists the types it offers) (orchestrator: hyperpod)",
    "count and max": "compute.node_groups[0]: count (2) and max_count both size the group; give count (a fixed size) or min_count and max_count (scaling)",
    "no size": "compute.node_groups[0]: give count (a fixed size) or max_count (with min_count, default 0)",
    "min above max": "compute.node_groups[0].min_count: must not exceed max_count (2), got 3",
    "scaling on hyperpod": "compute.node_groups[0]: min_count 0 and max_count 2 scale the group, but hyperpod keeps a fixed number of nodes here; give count, or pick parallelcluster or pcs",
    "scaling on eks": "compute.node_groups[0]: min_count 0 and max_count 2 scale the group, but eks keeps a fixed number of nodes here; give count, or pick parallelcluster or pcs",
    "efa without efa": "compute.node_groups[0].efa: m5.xlarge has no EFA, got true; use an EFA type (e.g. g5.8xlarge, c5n.18xlarge, p5.48xlarge) or omit efa",
    "efa off on hyperpod": "compute.node_groups[0].efa: HyperPod gives every ml.g5.8xlarge its EFA interfaces, so false cannot be honoured; omit efa",
    "cpu without efa on eks": "compute.node_groups[0].instance_type: on eks a node group without EFA needs GPUs (a gpu nodegroup), got 'm5.xlarge' with neither; use an EFA or GPU type",
    "slurm queue name": "compute.node_groups[0].name: must start with a lowercase letter and hold only lowercase letters, digits and hyphens, got 'GPU'",
    "pcs name": "compute.node_groups[0].name: must be 3 to 25 characters long, got 'g' (1)",
    "reserved hyperpod name": "compute.node_groups[0].name: 'login' is the name of the login instance group; pick another name",
    "repeated name": "compute.node_groups[1].name: 'gpu' names an earlier node group too; names are unique",
    "capacity unknown key": "compute.node_groups[0].capacity.id: unknown key; allowed: type, reservation_id, resource_group_arn, targeted, in_placement_group, training_plan_arn",
    "capacity without type": "compute.node_groups[0].capacity.type: required, one of on-demand, spot, reservation, capacity-block, training-plan",
    "capacity wrong kind": "compute.node_groups[0].capacity: must be one of on-demand, spot, reservation, capacity-block, training-plan, got 'reserved'",
    "spot on hyperpod": "compute.node_groups[0].capacity: spot is not supported by SageMaker HyperPod; use on-demand or training-plan",
    "training plan on pcs": "compute.node_groups[0].capacity: training-plan is not supported by AWS PCS; use on-demand or spot or reservation or capacity-block",
    "hyperpod without a name": "compute.cluster_name: required with orchestrator: hyperpod when the file sets no name: (a HyperPod cluster is named in the file); set compute.cluster_name, name or hyperpod.cluster_name",
    "conflict": "compute.controller.instance_type ('m5.xlarge') and parallelcluster.head_node.instance_type ('t3.large') both state this; keep one of them (compute for what every orchestrator has, parallelcluster for what only parallelcluster has)",
    "conflicting lists": "compute.node_groups (3 item(s)) and hyperpod.instance_groups (0 item(s)) both state this; keep one of them (compute for what every orchestrator has, hyperpod for what only hyperpod has)",
    "section not a mapping": "eks: must be a section of key: value settings, got []",
    "spot on hyperpod-eks": "compute.node_groups[0].capacity: spot is not supported by SageMaker HyperPod; use on-demand or training-plan",
    "hyperpod_eks section under another orchestrator": "hyperpod_eks: this file builds orchestrator: eks, so a hyperpod_eks section does not apply; remove it, set orchestrator: hyperpod-eks, or add hyperpod_eks to ignore",
    "hyperpod-eks without a name": "compute.cluster_name: required with orchestrator: hyperpod-eks when the file sets no name: (a HyperPod cluster is named in the file); set compute.cluster_name, name or hyperpod_eks.cluster_name",
    "efa false on hyperpod-eks": "compute.node_groups[0].efa: HyperPod gives every ml.g5.8xlarge its EFA interfaces, so false cannot be honoured; omit efa",
}


@pytest.mark.parametrize(("document", "name"), [(m[1], m[0]) for m in MESSAGES], ids=[m[0] for m in MESSAGES])
def test_every_intent_message_whole(document: Any, name: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_environment(document, source="any.yaml")
    assert str(raised.value).splitlines() == ["any.yaml: 1 problem(s)", f"  {WHOLE[name]}"]


def test_every_message_is_asserted_whole() -> None:
    assert set(WHOLE) == {m[0] for m in MESSAGES}


SECTIONS: dict[str, dict[str, Any]] = {
    "parallelcluster": {
        "cluster_name": "training-any",
        "head_node": {"instance_type": "m5.xlarge"},
        "login_nodes": [{"name": "login", "instance_type": "m5.xlarge", "count": 1}],
        "queues": [
            {
                "name": "gpu",
                "compute_resources": [
                    {
                        "name": "gpu",
                        "instance_type": "g5.8xlarge",
                        "min_count": 2,
                        "max_count": 2,
                        "efa": True,
                    }
                ],
            }
        ],
    },
    "hyperpod": {
        "cluster_name": "training-any",
        "instance_groups": [
            {"name": "controller", "instance_type": "ml.m5.xlarge", "count": 1, "role": "controller"},
            {"name": "login", "instance_type": "ml.m5.xlarge", "count": 1, "role": "login"},
            {
                "name": "gpu",
                "instance_type": "ml.g5.8xlarge",
                "count": 2,
                "role": "worker",
                "partition": "gpu",
            },
        ],
    },
    "pcs": {
        "cluster_name": "training-any",
        "login_nodes": {"instance_type": "m5.xlarge", "count": 1},
        "compute_node_groups": [
            {"name": "gpu", "instance_type": "g5.8xlarge", "min_count": 2, "max_count": 2, "efa": True}
        ],
        "ami_ssm_parameter": "/training-clusters/pcs/ami",
    },
    "eks": {
        "cluster_name": "training-any",
        "efa_nodegroups": [{"name": "gpu", "instance_type": "g5.8xlarge", "size": 2}],
    },
    "hyperpod_eks": {
        "cluster_name": "training-any",
        "instance_groups": [{"name": "gpu", "instance_type": "ml.g5.8xlarge", "count": 2, "volume_gib": 500}],
    },
}


@pytest.mark.parametrize("orchestrator", list(Orchestrator))
def test_each_orchestrator_gets_its_whole_section(orchestrator: Orchestrator) -> None:
    document = _as(orchestrator.value)
    expanded = expand_intent(document)
    assert expanded[orchestrator.section] == SECTIONS[orchestrator.section]
    kept = copy.deepcopy(document)
    for part in UNUSED.get(orchestrator.value, []):  # what the file ignores is left out
        del kept["compute"][part.removeprefix("compute.")]
    assert {k: v for k, v in expanded.items() if k != orchestrator.section} == kept


def test_the_documented_defaults() -> None:
    """The module's defaults: HyperPod's controller ml.m5.xlarge, a HyperPod-on-EKS group's 500 GiB volume,
    the PCS AMI from /training-clusters/pcs/ami, a login pool of one, min_count 0."""
    assert (DEFAULT_HYPERPOD_CONTROLLER, DEFAULT_HYPERPOD_EKS_VOLUME_GIB) == ("m5.xlarge", 500)
    assert DEFAULT_PCS_AMI_SSM_PARAMETER == "/training-clusters/pcs/ami"
    document = _as("hyperpod")
    del document["compute"]["controller"]
    controller = expand_intent(document)["hyperpod"]["instance_groups"][0]
    assert controller == {
        "name": "controller",
        "instance_type": "ml.m5.xlarge",
        "count": 1,
        "role": "controller",
    }
    document = _as("pcs")
    document["compute"]["login"] = {"instance_type": "m5.xlarge"}
    document["compute"]["node_groups"][0] = {"name": "gpu", "instance_type": "g5.8xlarge", "max_count": 3}
    pcs = expand_intent(document)["pcs"]
    assert pcs["login_nodes"] == {"instance_type": "m5.xlarge", "count": 1}
    assert (pcs["compute_node_groups"][0]["min_count"], pcs["compute_node_groups"][0]["max_count"]) == (0, 3)


def test_without_cluster_name_hyperpod_takes_the_files_name_and_others_take_none() -> None:
    for orchestrator in ("hyperpod", "hyperpod-eks"):
        document = _as(orchestrator)
        del document["compute"]["cluster_name"]
        document["name"] = "team-a"
        assert expand_intent(document)[orchestrator.replace("-", "_")]["cluster_name"] == "team-a"
        document[orchestrator.replace("-", "_")] = {"cluster_name": "own"}
        assert expand_intent(document)[orchestrator.replace("-", "_")]["cluster_name"] == "own"
    for orchestrator in ("parallelcluster", "pcs", "eks"):
        document = _as(orchestrator)
        del document["compute"]["cluster_name"]
        assert "cluster_name" not in expand_intent(document)[orchestrator]


def test_efa_defaults_to_the_types_own_and_can_be_turned_off_where_it_scales() -> None:
    document = _as("pcs")
    document["compute"]["node_groups"][0]["efa"] = False
    assert expand_intent(document)["pcs"]["compute_node_groups"][0]["efa"] is False
    document["compute"]["node_groups"][0] = {"name": "cpu", "instance_type": "m5.xlarge", "count": 1}
    assert expand_intent(document)["pcs"]["compute_node_groups"][0]["efa"] is False


def test_a_capacity_is_copied_only_when_stated() -> None:
    reservation = {"type": "reservation", "reservation_id": "cr-0123456789abcdef0", "targeted": False}
    document = _as("parallelcluster")
    document["compute"]["node_groups"][0]["capacity"] = reservation
    (queue,) = expand_intent(document)["parallelcluster"]["queues"]
    assert queue["capacity"] == reservation and queue["capacity"] is not reservation
    assert "capacity" not in expand_intent(_as("parallelcluster"))["parallelcluster"]["queues"][0]
    plan = {
        "type": "training-plan",
        "training_plan_arn": "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p",
    }
    for orchestrator in ("hyperpod", "hyperpod-eks"):
        document = _as(orchestrator)
        document["compute"]["node_groups"][0]["capacity"] = plan
        groups = expand_intent(document)[orchestrator.replace("-", "_")]["instance_groups"]
        assert groups[-1]["capacity"] == plan


def test_a_conflict_deep_in_a_section_names_the_compute_field_it_came_from() -> None:
    document = _as("pcs")
    document["pcs"] = {"login_nodes": {"count": 2}}
    with pytest.raises(ConfigurationError) as raised:
        expand_intent(document)
    assert str(raised.value) == (
        "compute.login (1) and pcs.login_nodes.count (2) both state this; keep one of them (compute for what every "
        "orchestrator has, pcs for what only pcs has)"
    )
    document = _as("hyperpod")
    document["hyperpod"] = {"cluster_name": {"a": 1}}
    with pytest.raises(ConfigurationError) as raised:
        expand_intent(document)
    assert str(raised.value) == (
        "compute.cluster_name ('training-any') and hyperpod.cluster_name (a section) both state this; keep one of "
        "them (compute for what every orchestrator has, hyperpod for what only hyperpod has)"
    )


def test_an_empty_orchestrator_section_is_no_section() -> None:
    document = _as("eks")
    document["eks"] = None
    assert expand_intent(document)["eks"] == SECTIONS["eks"]
    assert copy.deepcopy(document)["eks"] is None


def test_eks_nodegroup_names_of_31_characters() -> None:
    for name, ok in (("g" * 31, True), ("g" * 32, False), ("g-1", True), ("1g", False)):
        document = _as("eks")
        document["compute"]["node_groups"][0]["name"] = name
        if ok:
            assert expand_intent(document)["eks"]["efa_nodegroups"][0]["name"] == name
            continue
        with pytest.raises(ConfigurationError) as raised:
            expand_intent(document)
        assert str(raised.value) == (
            "compute.node_groups[0].name: must be a lower-case letter then up to 30 lower-case letters, digits and "
            f"'-', got {name!r}"
        )


def test_a_conflict_over_a_whole_section_is_blamed_on_compute() -> None:
    document = _as("parallelcluster")
    document["parallelcluster"] = {"head_node": "m5.xlarge"}
    with pytest.raises(ConfigurationError) as raised:
        expand_intent(document)
    assert str(raised.value) == (
        "compute (a section) and parallelcluster.head_node ('m5.xlarge') both state this; keep one of them (compute "
        "for what every orchestrator has, parallelcluster for what only parallelcluster has)"
    )


def test_a_hyperpod_section_that_names_the_cluster_needs_no_name_elsewhere() -> None:
    for orchestrator in ("hyperpod", "hyperpod-eks"):
        section = orchestrator.replace("-", "_")
        document = _as(orchestrator)
        del document["compute"]["cluster_name"]
        document[section] = {"cluster_name": "own"}
        assert expand_intent(document)[section]["cluster_name"] == "own"


def _hyperpod_eks_problem(change: Any) -> str:
    document = _as("hyperpod-eks")
    change(document["compute"]["node_groups"][0])
    with pytest.raises(ConfigurationError) as raised:
        expand_intent(document)
    return str(raised.value)


def test_hyperpod_eks_node_groups_are_checked_at_their_own_field() -> None:
    assert _hyperpod_eks_problem(lambda g: g.update(count=None, min_count=1, max_count=2)) == (
        "compute.node_groups[0]: min_count 1 and max_count 2 scale the group, but hyperpod-eks keeps a fixed number "
        "of nodes here; give count, or pick parallelcluster or pcs"
    )
    assert _hyperpod_eks_problem(lambda g: g.update(instance_type="m5.xlarge", efa=True)) == (
        "compute.node_groups[0].efa: m5.xlarge has no EFA, got true; use an EFA type (e.g. g5.8xlarge, "
        "c5n.18xlarge, p5.48xlarge) or omit efa"
    )
    assert _hyperpod_eks_problem(lambda g: g.update(instance_type="t3.small")) == (
        "compute.node_groups[0].instance_type: 'ml.t3.small' is not offered by SageMaker HyperPod "
        "(`training-clusters catalog` lists the types it offers) (orchestrator: hyperpod)"
    )
    document = _as("hyperpod-eks")
    document["hyperpod_eks"] = {"instance_groups": []}
    with pytest.raises(ConfigurationError) as raised:
        expand_intent(document)
    assert str(raised.value) == (
        "compute.node_groups (1 item(s)) and hyperpod_eks.instance_groups (0 item(s)) both state this; keep one of "
        "them (compute for what every orchestrator has, hyperpod_eks for what only hyperpod_eks has)"
    )


def test_a_missing_field_of_compute_is_named() -> None:
    document = _as("pcs")
    del document["compute"]["node_groups"][0]["instance_type"]
    with pytest.raises(ConfigurationError) as raised:
        expand_intent(document)
    assert str(raised.value) == "compute.node_groups[0].instance_type: required, but missing"


def test_a_validators_message_loses_pydantics_prefix() -> None:
    from training_clusters.config.compute import _message

    problem = {"type": "value_error", "loc": ("name",), "msg": "Value error, must be short", "input": "x" * 3}
    assert _message(problem) == "must be short, got 'xxx'"
    problem = {"type": "int_type", "loc": ("count",), "msg": "Input should be a valid integer", "input": "2"}
    assert _message(problem) == "Input should be a valid integer, got '2'"


def test_eks_node_groups_are_checked_at_their_own_field() -> None:
    def problem(change: Any, section: dict[str, Any] | None = None) -> str:
        document = _as("eks")
        change(document["compute"])
        if section is not None:
            document["eks"] = section
        with pytest.raises(ConfigurationError) as raised:
            expand_intent(document)
        return str(raised.value)

    plan = {
        "type": "training-plan",
        "training_plan_arn": "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p",
    }
    assert problem(lambda c: c["node_groups"][0].update(capacity=plan)) == (
        "compute.node_groups[0].capacity: training-plan is not supported by Amazon EKS managed nodegroups; use "
        "on-demand or spot or reservation or capacity-block"
    )
    assert problem(lambda c: c["node_groups"][0].update(instance_type="m5.xlarge", efa=True)) == (
        "compute.node_groups[0].efa: m5.xlarge has no EFA, got true; use an EFA type (e.g. g5.8xlarge, "
        "c5n.18xlarge, p5.48xlarge) or omit efa"
    )
    assert problem(lambda c: None, {"efa_nodegroups": []}) == (
        "compute.node_groups (1 item(s)) and eks.efa_nodegroups (0 item(s)) both state this; keep one of them "
        "(compute for what every orchestrator has, eks for what only eks has)"
    )


def _malformed(field: str, name: str) -> str:
    return f"{field}: must be an EC2 instance type such as 'c7i.2xlarge' (family.size), got {name!r}"


@pytest.mark.parametrize("where", ["controller", "login"])
def test_parallelcluster_head_and_login_take_any_type_spelt_as_ec2_spells_it(where: str) -> None:
    """c7i.2xlarge and m7i.xlarge are not in the catalogue: a head or login node needs no facts, only a name."""
    document = _as("parallelcluster")
    document["compute"][where]["instance_type"] = "c7i.2xlarge"
    section = expand_intent(document)["parallelcluster"]
    head, logins = section["head_node"], section["login_nodes"]
    assert (head["instance_type"], logins[0]["instance_type"]) == (
        ("c7i.2xlarge", "m5.xlarge") if where == "controller" else ("m5.xlarge", "c7i.2xlarge")
    )
    document["compute"][where]["instance_type"] = "g9.huge"
    with pytest.raises(ConfigurationError) as raised:
        expand_intent(document)
    assert str(raised.value) == _malformed(f"compute.{where}.instance_type", "g9.huge")


def test_the_pcs_login_type_is_any_type_spelt_as_ec2_spells_it() -> None:
    document = _as("pcs")
    document["compute"]["login"]["instance_type"] = "m7i.xlarge"
    assert expand_intent(document)["pcs"]["login_nodes"]["instance_type"] == "m7i.xlarge"
    document["compute"]["login"]["instance_type"] = "g9.huge"
    with pytest.raises(ConfigurationError) as raised:
        expand_intent(document)
    assert str(raised.value) == _malformed("compute.login.instance_type", "g9.huge")


def test_hyperpod_controller_and_login_take_any_type_hyperpod_may_sell() -> None:
    """Not in the catalogue: accepted in the ml. form; in it but not offered by HyperPod: refused."""
    document = _as("hyperpod")
    document["compute"]["controller"]["instance_type"] = "c7i.2xlarge"
    document["compute"]["login"]["instance_type"] = "m7i.xlarge"
    groups = expand_intent(document)["hyperpod"]["instance_groups"]
    assert [(g["name"], g["instance_type"]) for g in groups[:2]] == [
        ("controller", "ml.c7i.2xlarge"),
        ("login", "ml.m7i.xlarge"),
    ]
    document["compute"]["controller"]["instance_type"] = "t3.small"
    with pytest.raises(ConfigurationError) as raised:
        expand_intent(document)
    assert str(raised.value) == (
        "compute.controller.instance_type: 'ml.t3.small' is not offered by SageMaker HyperPod "
        "(`training-clusters catalog` lists the types it offers) (orchestrator: hyperpod)"
    )


def _problem(orchestrator: str, change: Any, section: dict[str, Any] | None = None) -> str:
    """The message of ``training-any.yaml`` under ``orchestrator``, its compute changed and its own section given."""
    document = _as(orchestrator)
    change(document["compute"])
    if section is not None:
        document[orchestrator] = section
    with pytest.raises(ConfigurationError) as raised:
        expand_intent(document)
    return str(raised.value)


_TRAINING_PLAN = {
    "type": "training-plan",
    "training_plan_arn": "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p",
}


def test_parallelcluster_node_groups_are_checked_at_their_own_field() -> None:
    """A queue's size and capacity are checked as ParallelCluster's, and named at the node group they come from."""
    assert _problem("parallelcluster", lambda c: c["node_groups"][0].update(max_count=3)) == (
        "compute.node_groups[0]: count (2) and max_count both size the group; give count (a fixed size) or "
        "min_count and max_count (scaling)"
    )
    assert _problem("parallelcluster", lambda c: c["node_groups"][0].update(capacity=_TRAINING_PLAN)) == (
        "compute.node_groups[0].capacity: training-plan is not supported by AWS ParallelCluster; use on-demand or "
        "spot or reservation or capacity-block"
    )


def test_parallelcluster_sections_that_restate_compute_name_the_compute_field() -> None:
    """parallelcluster.queues and .login_nodes given beside compute: the message names node_groups and login."""
    assert _problem("parallelcluster", lambda c: None, {"queues": []}) == (
        "compute.node_groups (1 item(s)) and parallelcluster.queues (0 item(s)) both state this; keep one of them "
        "(compute for what every orchestrator has, parallelcluster for what only parallelcluster has)"
    )
    assert _problem("parallelcluster", lambda c: None, {"login_nodes": []}) == (
        "compute.login (1 item(s)) and parallelcluster.login_nodes (0 item(s)) both state this; keep one of them "
        "(compute for what every orchestrator has, parallelcluster for what only parallelcluster has)"
    )


def test_pcs_node_groups_given_beside_compute_name_the_compute_field() -> None:
    assert _problem("pcs", lambda c: None, {"compute_node_groups": []}) == (
        "compute.node_groups (1 item(s)) and pcs.compute_node_groups (0 item(s)) both state this; keep one of them "
        "(compute for what every orchestrator has, pcs for what only pcs has)"
    )


def test_a_pcs_section_without_an_ami_gets_the_default_ami_parameter() -> None:
    """Only an AMI the file names (ami_id or ami_ssm_parameter) replaces the default parameter; other PCS
    settings do not."""
    for given, ami in (
        ({"size": "MEDIUM"}, {"ami_ssm_parameter": DEFAULT_PCS_AMI_SSM_PARAMETER}),
        ({"ami_ssm_parameter": "/own/ami"}, {"ami_ssm_parameter": "/own/ami"}),
        ({"ami_id": "ami-0123456789abcdef0"}, {"ami_id": "ami-0123456789abcdef0"}),
    ):
        document = _as("pcs")
        document["pcs"] = given
        pcs = expand_intent(document)["pcs"]
        assert {key: pcs[key] for key in ("ami_id", "ami_ssm_parameter") if key in pcs} == ami


ALL_AT_ONCE = """\
region: us-east-1
availability_zones: [us-east-1a, us-east-1b]
name: any
orchestrator: eks
compute:
  controller: {instance_type: m5.xlarge}
  login: {instance_type: m5.xlarge}
  node_groups:
    - {name: gpu, instance_type: g5.8xlarge, count: 2}
hyperpod:
  node_recovery: automatic
users:
  - {name: alice, uid: 2001}
"""


def test_every_part_the_orchestrator_cannot_use_is_reported_in_one_run_in_file_order(tmp_path: Path) -> None:
    """A parallelcluster file switched to eks: four parts EKS cannot use, each at its line, all at once."""
    path = tmp_path / "any.yaml"
    path.write_text(ALL_AT_ONCE)
    with pytest.raises(ConfigurationError) as raised:
        load_environment(path)
    assert str(raised.value).replace(str(path), "F").splitlines() == [
        "F: 4 problem(s)",
        "  F:6: compute.controller: orchestrator: eks runs the Kubernetes control plane (managed by EKS) itself, so no "
        "instance of yours is a controller and this would not be used; remove it, or add compute.controller to ignore",
        "  F:7: compute.login: orchestrator: eks has no login nodes (kubectl is the way in), so this would not be "
        "used; remove it, or add compute.login to ignore",
        "  F:10: hyperpod: this file builds orchestrator: eks, so a hyperpod section does not apply; remove it, set "
        "orchestrator: hyperpod, or add hyperpod to ignore",
        "  F:12: users: are created on the nodes of a hyperpod or parallelcluster cluster, and orchestrator: eks has "
        "none; remove users, or add users to ignore",
    ]


def test_what_ignore_lists_is_left_out_and_the_rest_is_built(tmp_path: Path) -> None:
    path = tmp_path / "any.yaml"
    path.write_text(
        ALL_AT_ONCE.replace(
            "orchestrator: eks\n",
            "orchestrator: eks\nignore: [compute.controller, compute.login, hyperpod, users]\n",
        )
    )
    config = load_environment(path)
    assert (config.hyperpod, config.users, config.ignore) == (
        None,
        [],
        [Ignorable.CONTROLLER, Ignorable.LOGIN, Ignorable.HYPERPOD, Ignorable.USERS],
    )
    assert [(g.name, g.instance_type, g.size) for g in config.eks.efa_nodegroups] == [
        ("gpu", "g5.8xlarge", 2)
    ]


def test_a_construct_error_of_a_section_compute_wrote_is_placed_at_its_node_group_or_at_compute() -> None:
    document, lines = read_yaml_with_lines(
        Path(__file__).parent.parent / "environments" / "training-any.yaml"
    )
    text = (Path(__file__).parent.parent / "environments" / "training-any.yaml").read_text().splitlines()
    group = construct_error_line(document, lines, "training-any/EfaNodegroup-gpu: efa_interfaces must be ...")
    assert group is not None and text[group - 1].strip() == "- name: gpu"
    anywhere = construct_error_line(
        document, lines, "training-any/HyperPod: instance_groups[2].threads_per_core ..."
    )
    assert anywhere is not None and text[anywhere - 1] == "compute:"
