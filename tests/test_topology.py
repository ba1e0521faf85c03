"""topology.conf from EC2 instance topology: the tree, the EC2 calls (botocore's Stubber, answers shaped as the EC2
API reference's DescribeInstanceTopology example), and the head-node commands on a fake Slurm."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from training_clusters.node_scripts.parallelcluster import topology
from training_clusters.node_scripts.parallelcluster.topology import (
    HEADER,
    TopologyError,
    cluster_instances,
    describe_topology,
    hostlist,
    main,
    slurm_nodes,
    topology_conf,
)

SPINE, LEFT_MIDDLE, LEFT_LEAF, RIGHT_LEAF = (
    "nn-1111111111example",
    "nn-2222222222example",
    "nn-3333333333example",
    ("nn-4444444444example"),
)


def instance(instance_id: str, *nodes: str, instance_type: str = "p5.48xlarge") -> dict[str, object]:
    """One ``Instances`` entry as the EC2 API reference's example shows it."""
    return {
        "InstanceId": instance_id,
        "InstanceType": instance_type,
        "GroupName": "training-placement-group",
        "NetworkNodes": list(nodes),
        "AvailabilityZone": "us-east-1a",
        "ZoneId": "use1-az1",
    }


FOUR = [
    instance("i-0000000000000001", SPINE, LEFT_MIDDLE, LEFT_LEAF),
    instance("i-0000000000000002", SPINE, LEFT_MIDDLE, LEFT_LEAF),
    instance("i-0000000000000003", SPINE, LEFT_MIDDLE, RIGHT_LEAF),
    instance("i-0000000000000004", SPINE, LEFT_MIDDLE, RIGHT_LEAF),
]
NAMES = {f"i-000000000000000{i}": f"gpu-st-p5-{i}" for i in range(1, 5)}


def test_four_nodes_under_two_leaves() -> None:
    assert topology_conf(FOUR, NAMES) == HEADER + (
        f"SwitchName=ec2-network Switches={SPINE}\n"
        f"SwitchName={SPINE} Switches={LEFT_MIDDLE}\n"
        f"SwitchName={LEFT_MIDDLE} Switches={LEFT_LEAF},{RIGHT_LEAF}\n"
        f"SwitchName={LEFT_LEAF} Nodes=gpu-st-p5-[1-2]\n"
        f"SwitchName={RIGHT_LEAF} Nodes=gpu-st-p5-[3-4]\n"
    )


def test_nodes_ec2_does_not_place_sit_under_the_unplaced_leaf() -> None:
    answer = [*FOUR[:2], instance("i-0000000000000003")]  # running, but not (yet) in EC2's topology
    names = {**NAMES, "i-0000000000000009": "gpu-st-p5-9"}  # i-...4 and i-...9 are absent from the answer
    text = topology_conf(answer, names, unplaced=["gpu-dy-p5-1", "gpu-dy-p5-2", "cpu-dy-c5n-10"])
    assert text == HEADER + (
        f"SwitchName=ec2-network Switches={SPINE},unplaced\n"
        f"SwitchName={SPINE} Switches={LEFT_MIDDLE}\n"
        "SwitchName=unplaced Nodes=cpu-dy-c5n-10,gpu-dy-p5-[1-2],gpu-st-p5-[3-4,9]\n"
        f"SwitchName={LEFT_MIDDLE} Switches={LEFT_LEAF}\n"
        f"SwitchName={LEFT_LEAF} Nodes=gpu-st-p5-[1-2]\n"
    )


def test_instances_of_other_clusters_are_left_out() -> None:
    other = instance("i-00000000000000ff", "nn-9999999999example", "nn-8", "nn-7")
    assert topology_conf([*FOUR, other], NAMES) == topology_conf(FOUR, NAMES)


def test_four_layers_of_p6_b200() -> None:
    answer = [
        instance("i-0000000000000001", "nn-a", "nn-b", "nn-c", "nn-d", instance_type="p6-b200.48xlarge"),
        instance("i-0000000000000002", "nn-a", "nn-b", "nn-c", "nn-e", instance_type="p6-b200.48xlarge"),
    ]
    names = {"i-0000000000000001": "gpu-st-b200-1", "i-0000000000000002": "gpu-st-b200-2"}
    assert topology_conf(answer, names) == HEADER + (
        "SwitchName=ec2-network Switches=nn-a\n"
        "SwitchName=nn-a Switches=nn-b\n"
        "SwitchName=nn-b Switches=nn-c\n"
        "SwitchName=nn-c Switches=nn-d,nn-e\n"
        "SwitchName=nn-d Nodes=gpu-st-b200-1\n"
        "SwitchName=nn-e Nodes=gpu-st-b200-2\n"
    )


def test_no_nodes_still_one_switch_as_slurm_needs() -> None:
    """Slurm's tree plugin stops slurmctld on a file without a switch ("No switches configured")."""
    assert topology_conf([], {}) == HEADER + "SwitchName=ec2-network\n"


def test_a_network_node_under_two_parents_is_refused() -> None:
    answer = [FOUR[0], instance("i-0000000000000002", "nn-other-spine", LEFT_MIDDLE, LEFT_LEAF)]
    with pytest.raises(TopologyError) as raised:
        topology_conf(answer, NAMES)
    assert str(raised.value) == (
        f"network node {LEFT_MIDDLE} is under both {SPINE} and nn-other-spine (instance i-0000000000000002): "
        "EC2's answer is not a tree"
    )


def test_a_leaf_above_another_instance_is_refused() -> None:
    answer = [FOUR[0], instance("i-0000000000000002", SPINE, LEFT_MIDDLE, LEFT_LEAF, "nn-below")]
    with pytest.raises(TopologyError) as raised:
        topology_conf(answer, NAMES)
    assert str(raised.value) == (
        f"network node {LEFT_LEAF} holds instances and network nodes: EC2's answer is not a tree"
    )


def test_a_line_longer_than_slurm_reads_is_refused() -> None:
    spines = [f"nn-{n:017x}" for n in range(195)]  # 195 top network nodes: a root line of 4,126 characters
    answer = [instance(f"i-{n:016x}", spine, f"{spine}-b", f"{spine}-c") for n, spine in enumerate(spines)]
    names = {f"i-{n:016x}": f"gpu-st-p5-{n + 1}" for n in range(195)}
    with pytest.raises(TopologyError) as raised:
        topology_conf(answer, names)
    assert str(raised.value) == (
        "SwitchName=ec2-network would be a line of 4126 characters; Slurm reads at most 4094 (parse_config.c's "
        "buffer), so the file is not written"
    )
    assert len(topology_conf(answer[:180], names).splitlines()[2]) <= 4094  # 180 fit


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["n1"], "n1"),
        (["n3", "n1", "n2", "n5", "n10", "n9"], "n[1-3,5,9-10]"),
        (["a-1", "b-2", "a-2"], "a-[1-2],b-2"),
        (["node01", "node02"], "node01,node02"),  # leading zeros are kept as written
        (["login", "n1", "n1"], "login,n1"),
    ],
)
def test_hostlist(names: list[str], expected: str) -> None:
    assert hostlist(names) == expected


SCONTROL = (
    "NodeName=gpu-st-p5-1 Arch=x86_64 CoresPerSocket=48 NodeAddr=10.0.1.11 NodeHostName=ip-10-0-1-11 "
    "Partitions=gpu State=IDLE\n"
    "NodeName=gpu-st-p5-2 Arch=x86_64 NodeAddr=10.0.1.12 NodeHostName=ip-10-0-1-12 Partitions=gpu,all State=IDLE\n"
    "NodeName=gpu-dy-p5-1 NodeAddr=gpu-dy-p5-1 NodeHostName=gpu-dy-p5-1 Partitions=gpu State=IDLE+CLOUD+POWERED_DOWN\n"
    "NodeName=cpu-st-c5n-1 NodeAddr=10.0.1.20 NodeHostName=ip-10-0-1-20 Partitions=cpu State=IDLE\n"
)


def test_slurm_nodes() -> None:
    assert slurm_nodes(SCONTROL + "\n") == [
        topology.SlurmNode("gpu-st-p5-1", "10.0.1.11", ("gpu",)),
        topology.SlurmNode("gpu-st-p5-2", "10.0.1.12", ("gpu", "all")),
        topology.SlurmNode("gpu-dy-p5-1", "gpu-dy-p5-1", ("gpu",)),
        topology.SlurmNode("cpu-st-c5n-1", "10.0.1.20", ("cpu",)),
    ]


def ec2_client() -> object:
    return boto3.client(
        "ec2", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def test_describe_topology_batches_ids_by_100_and_follows_every_page() -> None:
    ec2 = ec2_client()
    ids = [f"i-{n:017x}" for n in range(150)]
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_instance_topology",
            {"Instances": [instance(ids[0], SPINE, LEFT_MIDDLE, LEFT_LEAF)], "NextToken": "page-2"},
            {"InstanceIds": ids[:100]},
        )
        stub.add_response(
            "describe_instance_topology",
            {"Instances": [instance(ids[1], SPINE, LEFT_MIDDLE, RIGHT_LEAF)]},
            {"InstanceIds": ids[:100], "NextToken": "page-2"},
        )
        stub.add_response(
            "describe_instance_topology",
            {"Instances": [instance(ids[120], SPINE, LEFT_MIDDLE, RIGHT_LEAF)], "NextToken": ""},
            {"InstanceIds": ids[100:]},
        )
        answer = describe_topology(ec2, ids)
        stub.assert_no_pending_responses()
    assert [i["InstanceId"] for i in answer] == [ids[0], ids[1], ids[120]]


def test_describe_topology_of_no_instance_asks_nothing() -> None:
    ec2 = ec2_client()
    with Stubber(ec2) as stub:
        assert describe_topology(ec2, []) == []
        stub.assert_no_pending_responses()


FILTERS = [
    {"Name": "tag:parallelcluster:cluster-name", "Values": ["p5-training"]},
    {"Name": "tag:parallelcluster:node-type", "Values": ["Compute"]},
    {"Name": "instance-state-name", "Values": ["running"]},
]


def reservation(*pairs: tuple[str, str]) -> dict[str, object]:
    return {"Instances": [{"InstanceId": i, "PrivateIpAddress": ip} for i, ip in pairs]}


def test_cluster_instances_reads_every_page_of_the_clusters_compute_instances() -> None:
    ec2 = ec2_client()
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_instances",
            {"Reservations": [reservation(("i-0000000000000001", "10.0.1.11"))], "NextToken": "more"},
            {"Filters": FILTERS},
        )
        stub.add_response(
            "describe_instances",
            {
                "Reservations": [
                    reservation(("i-0000000000000002", "10.0.1.12")),
                    {"Instances": [{"InstanceId": "i-x"}]},
                ]
            },
            {"Filters": FILTERS, "NextToken": "more"},
        )
        assert cluster_instances(ec2, "p5-training") == {
            "10.0.1.11": "i-0000000000000001",
            "10.0.1.12": "i-0000000000000002",
        }
        stub.assert_no_pending_responses()


class FakeSlurm:
    """A scontrol on a fake root: ``-o show nodes`` prints :data:`SCONTROL`, every call is logged, and
    ``reconfigure`` fails while ``fails`` exists."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "scontrol.log"
        self.fails = root / "scontrol.fails"
        (root / "nodes.txt").write_text(SCONTROL)
        self.path = root / "scontrol"
        self.path.write_text(
            "#!/bin/bash\n"
            f'echo "$*" >>"{self.log}"\n'
            f'if [[ $1 == -o ]]; then cat "{root}/nodes.txt"; exit 0; fi\n'
            f'if [[ -e "{self.fails}" ]]; then echo "slurm_reconfigure error: Unable to contact slurm controller" >&2; exit 1; fi\n'
        )
        self.path.chmod(self.path.stat().st_mode | stat.S_IXUSR)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


def stub_refresh(stub: Stubber, *, ec2_error: str | None = None) -> None:
    stub.add_response(
        "describe_instances",
        {
            "Reservations": [
                reservation(("i-0000000000000001", "10.0.1.11"), ("i-0000000000000002", "10.0.1.12")),
                reservation(("i-00000000000000c5", "10.0.1.20")),
            ]
        },
        {"Filters": FILTERS},
    )
    ids = {"InstanceIds": ["i-0000000000000001", "i-0000000000000002"]}
    if ec2_error:
        stub.add_client_error(
            "describe_instance_topology",
            service_error_code=ec2_error,
            service_message="You are not authorized to perform this operation.",
            http_status_code=403,
            expected_params=ids,
        )
    else:
        stub.add_response("describe_instance_topology", {"Instances": FOUR[:2]}, ids)


REFRESH = ["--cluster-name", "p5-training", "--region", "us-east-1", "--partition", "gpu"]


def refresh_args(tmp_path: Path, conf: Path, slurm: FakeSlurm) -> list[str]:
    return [
        "refresh",
        "--conf",
        str(conf),
        *REFRESH,
        "--scontrol",
        str(slurm.path),
        "--state",
        str(tmp_path / "state"),
    ]


PLACED = HEADER + (
    f"SwitchName=ec2-network Switches={SPINE},unplaced\n"
    f"SwitchName={SPINE} Switches={LEFT_MIDDLE}\n"
    "SwitchName=unplaced Nodes=cpu-st-c5n-1,gpu-dy-p5-1\n"
    f"SwitchName={LEFT_MIDDLE} Switches={LEFT_LEAF}\n"
    f"SwitchName={LEFT_LEAF} Nodes=gpu-st-p5-[1-2]\n"
)


def test_refresh_writes_the_file_reconfigures_once_then_leaves_both_alone(tmp_path: Path, capsys) -> None:
    slurm = FakeSlurm(tmp_path)
    conf = tmp_path / "etc" / "topology.conf"
    args = refresh_args(tmp_path, conf, slurm)
    ec2 = ec2_client()
    with Stubber(ec2) as stub:
        stub_refresh(stub)
        stub_refresh(stub)
        assert main(args, ec2=ec2) == 0
        assert conf.read_text() == PLACED
        assert stat.S_IMODE(conf.stat().st_mode) == 0o644
        assert slurm.calls() == ["-o show nodes", "reconfigure"]
        assert main(args, ec2=ec2) == 0
        stub.assert_no_pending_responses()
    assert slurm.calls() == ["-o show nodes", "reconfigure", "-o show nodes"]
    assert sorted(os.listdir(conf.parent)) == ["topology.conf"]
    assert sorted(os.listdir(tmp_path / "state")) == ["topology.conf"]
    assert (tmp_path / "state" / "topology.conf").read_text() == PLACED
    out = capsys.readouterr().out.splitlines()
    assert out == [f"topology.py: {conf} rewritten, Slurm reconfigured", f"topology.py: {conf} unchanged"]


def test_a_failed_reconfigure_is_owed_and_retried(tmp_path: Path, capsys) -> None:
    slurm = FakeSlurm(tmp_path)
    slurm.fails.touch()
    conf = tmp_path / "topology.conf"
    args = refresh_args(tmp_path, conf, slurm)
    ec2 = ec2_client()
    with Stubber(ec2) as stub:
        stub_refresh(stub)
        stub_refresh(stub)
        assert main(args, ec2=ec2) == 1
        assert capsys.readouterr().err == (
            f"topology.py: error: {slurm.path} reconfigure failed (exit 1): slurm_reconfigure error: Unable to "
            f"contact slurm controller ({conf} left as it was)\n"
        )
        assert (tmp_path / "state" / "reconfigure.pending").exists()
        slurm.fails.unlink()
        assert main(args, ec2=ec2) == 0  # same content, but the reconfigure is still owed
    assert slurm.calls() == ["-o show nodes", "reconfigure", "-o show nodes", "reconfigure"]
    assert not (tmp_path / "state" / "reconfigure.pending").exists()


def test_a_denied_describe_leaves_the_file_as_it_was(tmp_path: Path, capsys) -> None:
    slurm = FakeSlurm(tmp_path)
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=ec2-network Switches=unplaced\n")
    args = refresh_args(tmp_path, conf, slurm)
    ec2 = ec2_client()
    with Stubber(ec2) as stub:
        stub_refresh(stub, ec2_error="UnauthorizedOperation")
        assert main(args, ec2=ec2) == 1
    assert capsys.readouterr().err == (
        "topology.py: error: reading EC2 failed: An error occurred (UnauthorizedOperation) when calling the "
        "DescribeInstanceTopology operation: You are not authorized to perform this operation. "
        f"({conf} left as it was)\n"
    )
    assert conf.read_text() == "SwitchName=ec2-network Switches=unplaced\n"
    assert slurm.calls() == ["-o show nodes"]


def test_a_failing_scontrol_is_one_error_line(tmp_path: Path, capsys) -> None:
    conf = tmp_path / "topology.conf"
    args = [
        "refresh",
        "--conf",
        str(conf),
        *REFRESH,
        "--scontrol",
        "/bin/false",
        "--state",
        str(tmp_path / "s"),
    ]
    assert main(args, ec2=ec2_client()) == 1
    assert capsys.readouterr().err == (
        f"topology.py: error: /bin/false -o show nodes failed (exit 1):  ({conf} left as it was)\n"
    )
    assert not conf.exists()


def test_a_file_parallelcluster_deleted_comes_back_before_slurm_is_asked(tmp_path: Path, capsys) -> None:
    """A pcluster update that changes queues deletes topology.conf; slurmctld cannot start without it."""
    slurm = FakeSlurm(tmp_path)
    conf = tmp_path / "topology.conf"
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "topology.conf").write_text(PLACED)
    assert (
        main(
            [
                "refresh",
                "--conf",
                str(conf),
                *REFRESH,
                "--scontrol",
                "/bin/false",
                "--state",
                str(tmp_path / "state"),
            ]
        )
        == 1
    )
    assert conf.read_text() == PLACED  # back, though slurmctld did not answer
    assert (tmp_path / "state" / "reconfigure.pending").exists()
    ec2 = ec2_client()
    with Stubber(ec2) as stub:
        stub_refresh(stub)
        assert main(refresh_args(tmp_path, conf, slurm), ec2=ec2) == 0
    assert slurm.calls() == ["-o show nodes", "reconfigure"]  # owed, though the content is the same
    assert not (tmp_path / "state" / "reconfigure.pending").exists()


def test_without_boto3_the_refresh_still_puts_the_file_back_and_says_what_is_missing(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 raises ImportError
    conf = tmp_path / "topology.conf"
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "topology.conf").write_text(PLACED)
    args = ["refresh", "--conf", str(conf), *REFRESH, "--state", str(tmp_path / "state")]
    assert main(args) == 1
    captured = capsys.readouterr()
    assert captured.out == f"topology.py: put {conf} back from {tmp_path / 'state'}\n"
    assert captured.err.startswith(f"topology.py: error: {sys.executable} cannot import boto3 (")
    assert conf.read_text() == PLACED


def test_initial_puts_every_node_unplaced_once(tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    assert main(["initial", "--conf", str(conf), "--nodes", "gpu-st-p5-[1-2]", "gpu-dy-p5-[1-2]"]) == 0
    first = (
        HEADER
        + "SwitchName=ec2-network Switches=unplaced\nSwitchName=unplaced Nodes=gpu-st-p5-[1-2],gpu-dy-p5-[1-2]\n"
    )
    assert conf.read_text() == first
    conf.write_text(PLACED)  # a refresh has run since: a second boot keeps its file
    assert main(["initial", "--conf", str(conf), "--nodes", "gpu-st-p5-[1-2]"]) == 0
    assert conf.read_text() == PLACED


def test_install_writes_the_units_enables_the_timer_and_refreshes(tmp_path: Path, monkeypatch) -> None:
    slurm = FakeSlurm(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(f'#!/bin/bash\necho "systemctl $*" >>"{slurm.log}"\n')
    systemctl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    conf = tmp_path / "topology.conf"
    systemd = tmp_path / "systemd"
    args = [
        "install", "--conf", str(conf), *REFRESH, "--scontrol", str(slurm.path),
        "--python", "/opt/venv/bin/python", "--module", "/opt/training-clusters/topology.py", "--systemd", str(systemd),
        "--state", str(tmp_path / "state"),
    ]  # fmt: skip
    ec2 = ec2_client()
    with Stubber(ec2) as stub:
        stub_refresh(stub)
        assert main(args, ec2=ec2) == 0
    service = (systemd / "training-clusters-topology.service").read_text()
    assert service.splitlines()[-1] == (
        f"ExecStart=/opt/venv/bin/python /opt/training-clusters/topology.py refresh --conf {conf} --cluster-name "
        f"p5-training --region us-east-1 --partition gpu --scontrol {slurm.path} --state {tmp_path / 'state'}"
    )
    timer = (systemd / "training-clusters-topology.timer").read_text()
    assert "OnUnitActiveSec=30\n" in timer and "WantedBy=timers.target\n" in timer
    assert slurm.calls() == [
        "systemctl daemon-reload",
        "systemctl enable --now training-clusters-topology.timer",
        "-o show nodes",
        "reconfigure",
    ]
    assert conf.read_text() == PLACED


def test_install_keeps_the_head_node_going_when_the_first_refresh_fails(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A failed OnNodeConfigured action fails the cluster's creation: a denied or throttled first refresh is a
    warning, and the timer, already running, tries again."""
    slurm = FakeSlurm(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(f'#!/bin/bash\necho "systemctl $*" >>"{slurm.log}"\n')
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    conf = tmp_path / "topology.conf"
    args = [
        "install", "--conf", str(conf), *REFRESH, "--scontrol", str(slurm.path), "--python", "/p", "--module", "/m",
        "--systemd", str(tmp_path / "systemd"), "--state", str(tmp_path / "state"),
    ]  # fmt: skip
    ec2 = ec2_client()
    with Stubber(ec2) as stub:
        stub_refresh(stub, ec2_error="UnauthorizedOperation")
        assert main(args, ec2=ec2) == 0
    assert capsys.readouterr().err == (
        "topology.py: warning: reading EC2 failed: An error occurred (UnauthorizedOperation) when calling the "
        "DescribeInstanceTopology operation: You are not authorized to perform this operation. "
        f"({conf} left as it was; the timer tries again every 30 s: journalctl -u training-clusters-topology)\n"
    )
    assert slurm.calls()[:2] == [
        "systemctl daemon-reload",
        "systemctl enable --now training-clusters-topology.timer",
    ]


def test_the_module_imports_nothing_of_the_package() -> None:
    """It is shipped alone to the head node: the standard library and boto3 only."""
    source = Path(topology.__file__).read_text()
    assert "training_clusters" not in source.replace("training-clusters", "")
