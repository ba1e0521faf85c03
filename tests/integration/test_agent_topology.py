"""The emulated HyperPod agent's topology.conf writer (tests/integration/agent_topology.py), from DescribeInstanceTopology answers.

The answers come from a real boto3 EC2 client whose ``describe_instance_topology`` a botocore Stubber
answers: the Stubber checks each canned response against EC2's service model, so the entries have the
structure the EC2 reference shows (``InstanceId``, ``InstanceType``, ``GroupName``, ``NetworkNodes``
top-down, ``AvailabilityZone``, ``ZoneId``). The real slurmctld loads the file in
tests/integration/test_hyperpod_api_real.py.
"""

from __future__ import annotations

import re
from typing import Any

import boto3  # type: ignore[import-untyped,unused-ignore]
import pytest
from botocore.stub import Stubber  # type: ignore[import-untyped,unused-ignore]

from .agent_topology import ROOT_SWITCH, topology_conf


def instance(instance_id: str, *nodes: str, instance_type: str = "p5.48xlarge") -> dict[str, Any]:
    return {
        "InstanceId": instance_id,
        "InstanceType": instance_type,
        "GroupName": "training-placement",
        "NetworkNodes": list(nodes),
        "AvailabilityZone": "us-east-1a",
        "ZoneId": "use1-az1",
    }


def described(*entries: dict[str, Any]) -> list[dict[str, Any]]:
    """What DescribeInstanceTopology answers for ENTRIES (checked against EC2's model by the Stubber)."""
    client = boto3.client(
        "ec2", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    ids = [entry["InstanceId"] for entry in entries]
    with Stubber(client) as stub:
        stub.add_response("describe_instance_topology", {"Instances": list(entries)}, {"InstanceIds": ids})
        answer = client.describe_instance_topology(InstanceIds=ids)
        stub.assert_no_pending_responses()
    return answer["Instances"]  # type: ignore[no-any-return]


#: Four p5 instances under two leaf switches of one spine: 1 and 3 on one leaf, 2 and 4 on the other.
FOUR = described(
    instance("i-0000000000000001", "nn-spine1", "nn-agg1", "nn-leafa"),
    instance("i-0000000000000002", "nn-spine1", "nn-agg1", "nn-leafb"),
    instance("i-0000000000000003", "nn-spine1", "nn-agg1", "nn-leafa"),
    instance("i-0000000000000004", "nn-spine1", "nn-agg1", "nn-leafb"),
)
NAMES = {f"i-000000000000000{n}": f"ip-10-1-1-1{n}" for n in range(1, 5)}
HEADER = "# Slurm topology/tree from EC2 DescribeInstanceTopology (written by training-clusters)"


def test_four_nodes_under_two_leaves() -> None:
    assert topology_conf(FOUR, NAMES).splitlines() == [
        HEADER,
        "SwitchName=nn-spine1 Switches=nn-agg1",
        "SwitchName=nn-agg1 Switches=nn-leafa,nn-leafb",
        "SwitchName=nn-leafa Nodes=ip-10-1-1-11,ip-10-1-1-13",
        "SwitchName=nn-leafb Nodes=ip-10-1-1-12,ip-10-1-1-14",
    ]


def test_the_answer_order_does_not_change_the_file() -> None:
    assert topology_conf(list(reversed(FOUR)), NAMES) == topology_conf(FOUR, NAMES)


def test_instances_not_named_are_left_out() -> None:
    names = {key: value for key, value in NAMES.items() if key != "i-0000000000000004"}
    assert topology_conf(FOUR, names).splitlines()[-1] == "SwitchName=nn-leafb Nodes=ip-10-1-1-12"


def test_two_spines_are_joined_under_one_root_switch() -> None:
    entries = described(
        instance("i-0000000000000001", "nn-spine2", "nn-agg2", "nn-leafc"),
        instance("i-0000000000000002", "nn-spine1", "nn-agg1", "nn-leafa"),
    )
    names = {"i-0000000000000001": "b", "i-0000000000000002": "a"}
    assert topology_conf(entries, names).splitlines() == [
        HEADER,
        f"SwitchName={ROOT_SWITCH} Switches=nn-spine1,nn-spine2",
        "SwitchName=nn-spine1 Switches=nn-agg1",
        "SwitchName=nn-spine2 Switches=nn-agg2",
        "SwitchName=nn-agg1 Switches=nn-leafa",
        "SwitchName=nn-agg2 Switches=nn-leafc",
        "SwitchName=nn-leafa Nodes=a",
        "SwitchName=nn-leafc Nodes=b",
    ]


def test_one_spine_needs_no_root_switch() -> None:
    assert ROOT_SWITCH not in topology_conf(FOUR, NAMES)


def test_four_layers_of_p6_b200() -> None:
    entries = described(
        instance("i-0000000000000001", "nn-1", "nn-2", "nn-3", "nn-4", instance_type="p6-b200.48xlarge"),
        instance("i-0000000000000002", "nn-1", "nn-2", "nn-3", "nn-5", instance_type="p6-b200.48xlarge"),
    )
    names = {"i-0000000000000001": "n1", "i-0000000000000002": "n2"}
    assert topology_conf(entries, names).splitlines()[1:] == [
        "SwitchName=nn-1 Switches=nn-2",
        "SwitchName=nn-2 Switches=nn-3",
        "SwitchName=nn-3 Switches=nn-4,nn-5",
        "SwitchName=nn-4 Nodes=n1",
        "SwitchName=nn-5 Nodes=n2",
    ]


# -- what cannot be written ---------------------------------------------------------------------------


def test_no_node_names() -> None:
    with pytest.raises(ValueError, match=r"^node_names must name at least one instance, got none$"):
        topology_conf(FOUR, {})


def test_an_instance_ec2_did_not_list() -> None:
    names = {**NAMES, "i-0000000000000009": "ip-10-1-1-19"}
    with pytest.raises(
        ValueError,
        match=r"^DescribeInstanceTopology did not list i-0000000000000009: every instance of node_names "
        r"must be among the instances$",
    ):
        topology_conf(FOUR, names)


@pytest.mark.parametrize("nodes", [[], None])
def test_an_instance_type_ec2_does_not_place(nodes: list[str] | None) -> None:
    entry = instance("i-0000000000000001", instance_type="c5.xlarge")
    entry["NetworkNodes"] = nodes
    with pytest.raises(
        ValueError,
        match=r"^i-0000000000000001 \(n1\) has no NetworkNodes: EC2 gives no topology for its instance "
        r"type, so it cannot be placed in a topology/tree file$",
    ):
        topology_conf([entry], {"i-0000000000000001": "n1"})


@pytest.mark.parametrize("name", ["ip 10", "a,b", "n[1-2]", "a=b", "#x", "-x", "", 7])
def test_a_node_name_slurm_would_misread(name: Any) -> None:
    message = (
        "node_names['i-0000000000000001'] must be a Slurm node name (letters, digits, '.', '_', '-'), "
        f"got {name!r}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        topology_conf(FOUR, {"i-0000000000000001": name})


def test_a_network_node_slurm_would_misread() -> None:
    entries = [instance("i-0000000000000001", "nn-1", "nn 2", "nn-3")]
    with pytest.raises(
        ValueError, match=r"^i-0000000000000001 \(n1\): network node 'nn 2' is not a safe Slurm switch name$"
    ):
        topology_conf(entries, {"i-0000000000000001": "n1"})


def test_a_network_node_under_two_parents() -> None:
    entries = [
        instance("i-0000000000000001", "nn-1", "nn-2", "nn-leaf"),
        instance("i-0000000000000002", "nn-1", "nn-9", "nn-leaf"),
    ]
    with pytest.raises(
        ValueError,
        match=r"^network node nn-leaf is listed under nn-2 at layer 3 and under nn-9 at layer 3 "
        r"\(i-0000000000000002\): the answers do not form one tree$",
    ):
        topology_conf(entries, {"i-0000000000000001": "n1", "i-0000000000000002": "n2"})


def test_a_network_node_at_two_layers() -> None:
    entries = [
        instance("i-0000000000000001", "nn-1", "nn-2", "nn-3"),
        instance("i-0000000000000002", "nn-2", "nn-4", "nn-5"),
    ]
    with pytest.raises(
        ValueError,
        match=r"^network node nn-2 is listed under nn-1 at layer 2 and under no parent at layer 1 "
        r"\(i-0000000000000002\): the answers do not form one tree$",
    ):
        topology_conf(entries, {"i-0000000000000001": "n1", "i-0000000000000002": "n2"})


def test_a_switch_with_both_nodes_and_switches_below() -> None:
    entries = [
        instance("i-0000000000000001", "nn-1", "nn-2", "nn-3"),
        instance("i-0000000000000002", "nn-1", "nn-2", "nn-3", "nn-4"),
    ]
    with pytest.raises(
        ValueError,
        match=r"^network node nn-3 has both instances and network nodes below it: Slurm's tree plugin "
        r"takes a switch with either nodes or switches$",
    ):
        topology_conf(entries, {"i-0000000000000001": "n1", "i-0000000000000002": "n2"})


@pytest.mark.parametrize("name", ["nn-leafa", ROOT_SWITCH])
def test_a_node_named_like_a_switch(name: str) -> None:
    with pytest.raises(
        ValueError, match=rf"^{name} is the name of a node and of a switch: Slurm needs them apart$"
    ):
        topology_conf(FOUR, {**NAMES, "i-0000000000000001": name})


def test_two_instances_with_one_node_name() -> None:
    with pytest.raises(ValueError, match=r"^node_names gives two instances the same node name$"):
        topology_conf(FOUR, {**NAMES, "i-0000000000000002": "ip-10-1-1-11"})
