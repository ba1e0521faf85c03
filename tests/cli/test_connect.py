"""``training-clusters connect`` against fake accounts: real boto3 clients under botocore's Stubber.

The Stubber checks every call's parameters and every canned answer against the services' own models
(CloudFormation, SageMaker, EC2, PCS, EKS), so a lookup that asks the wrong question, or reads a field the API
does not return, fails here. ``--print`` output is asserted whole; opening a session runs a recorded command.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from training_clusters import cli
from training_clusters.cli import common
from training_clusters.cli import connect as connect_module
from training_clusters.cli.connect import ConnectClients, Connection, connection, open_connection
from training_clusters.config import load_environment
from training_clusters.model.errors import ConfigurationError

from ..conftest import ROOT

REGION = "us-east-1"
ENVIRONMENTS = ROOT / "environments"
CLUSTER_ARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abc123def456"
A, B, C = "i-0aaaaaaaaaaaaaaa1", "i-0bbbbbbbbbbbbbbb2", "i-0ccccccccccccccc3"
NOW = datetime(2026, 12, 6, tzinfo=UTC)


class Account:
    """Fresh clients and a Stubber on each; ``expect`` queues answers, ``active`` checks they were all asked."""

    def __init__(self) -> None:
        session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)
        self.clients = ConnectClients.from_session(session, REGION)
        self.stubs = {
            name: Stubber(getattr(self.clients, name)) for name in ConnectClients.__dataclass_fields__
        }

    def outputs(self, stack: str, **outputs: str) -> None:
        self.stubs["cloudformation"].add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": stack,
                        "CreationTime": NOW,
                        "StackStatus": "CREATE_COMPLETE",
                        "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
                    }
                ]
            },
            {"StackName": stack},
        )

    def hyperpod_nodes(self, nodes: Sequence[tuple[str, str, str]], group: str | None) -> None:
        params: dict[str, Any] = {"ClusterName": CLUSTER_ARN}
        if group is not None:
            params["InstanceGroupNameContains"] = group
        self.stubs["sagemaker"].add_response(
            "list_cluster_nodes",
            {
                "ClusterNodeSummaries": [
                    {
                        "InstanceGroupName": name,
                        "InstanceId": instance,
                        "InstanceType": "ml.m5.xlarge",
                        "LaunchTime": NOW,
                        "InstanceStatus": {"Status": status},
                    }
                    for name, instance, status in nodes
                ]
            },
            params,
        )

    def instances(self, tags: dict[str, Any], found: Sequence[str], instance_id: str | None = None) -> None:
        filters = [{"Name": f"tag:{k}", "Values": v if isinstance(v, list) else [v]} for k, v in tags.items()]
        filters.append({"Name": "instance-state-name", "Values": ["running"]})
        params: dict[str, Any] = {"Filters": filters}
        if instance_id is not None:
            params["InstanceIds"] = [instance_id]
        self.stubs["ec2"].add_response(
            "describe_instances",
            {"Reservations": [{"Instances": [{"InstanceId": i} for i in found]}] if found else []},
            params,
        )

    @contextmanager
    def active(self) -> Iterator[None]:
        with ExitStack() as stack:
            for stub in self.stubs.values():
                stack.enter_context(stub)
            yield
            for stub in self.stubs.values():
                stub.assert_no_pending_responses()


def _find(account: Account, file: str, node: str | None = None, profile: str | None = None) -> Connection:
    config = load_environment(ENVIRONMENTS / file)
    name = Path(file).stem
    with account.active():
        return connection(
            config,
            environment=name,
            stack=f"training-{name}",
            node=node,
            clients=account.clients,
            profile=profile,
        )


def _refused(account: Account, file: str, node: str | None = None) -> str:
    with pytest.raises(ConfigurationError) as caught:
        _find(account, file, node)
    return str(caught.value)


# --------------------------------------------------------------------------------------------------
# HyperPod (Slurm)

HYPERPOD_TEAM = "training-hyperpod-team"


@pytest.mark.parametrize(
    ("node", "group", "nodes", "instance"),
    [
        (None, "controller-machine", [("controller-machine", A, "Running")], A),
        ("controller", "controller-machine", [("controller-machine", A, "Running")], A),
        # the API matches names that contain the group's: a group "login-group-old" is not the login group
        ("login", "login-group", [("login-group-old", A, "Running"), ("login-group", B, "Running")], B),
        ("gpu-workers", "gpu-workers", [("gpu-workers", C, "Pending"), ("gpu-workers", B, "Running")], B),
    ],
    ids=["default-controller", "controller", "login", "worker-group"],
)
def test_hyperpod_finds_the_nodes_ssm_target(
    node: str | None, group: str, nodes: list[tuple[str, str, str]], instance: str
) -> None:
    account = Account()
    account.outputs(HYPERPOD_TEAM, ClusterArn=CLUSTER_ARN)
    account.hyperpod_nodes(nodes, group)
    found = _find(account, "hyperpod-team.yaml", node)
    target = f"sagemaker-cluster:abc123def456_{group}-{instance}"
    assert (found.instance_id, found.target, found.notes) == (instance, target, ())
    assert found.command == ("aws", "ssm", "start-session", "--region", REGION, "--target", target)


def test_hyperpod_group_of_several_nodes_takes_the_first_and_names_the_others() -> None:
    account = Account()
    account.outputs(HYPERPOD_TEAM, ClusterArn=CLUSTER_ARN)
    account.hyperpod_nodes([("gpu-workers", C, "Running"), ("gpu-workers", A, "Running")], "gpu-workers")
    found = _find(account, "hyperpod-team.yaml", "gpu-workers")
    assert found.instance_id == A
    assert found.notes == (f"2 nodes are running; for another: --node {C}",)


def test_hyperpod_instance_id_is_looked_up_among_all_nodes() -> None:
    account = Account()
    account.outputs(HYPERPOD_TEAM, ClusterArn=CLUSTER_ARN)
    account.hyperpod_nodes([("controller-machine", A, "Running"), ("gpu-workers", B, "Running")], None)
    found = _find(account, "hyperpod-team.yaml", B)
    assert found.target == f"sagemaker-cluster:abc123def456_gpu-workers-{B}"


def test_hyperpod_refusals() -> None:
    account = Account()
    account.outputs(HYPERPOD_TEAM, ClusterArn=CLUSTER_ARN)
    account.hyperpod_nodes([("controller-machine", A, "Pending")], "controller-machine")
    assert _refused(account, "hyperpod-team.yaml") == (
        f"{HYPERPOD_TEAM}: no running node in HyperPod controller (instance group controller-machine) "
        f"(its nodes: {A} Pending)"
    )
    account = Account()
    account.outputs(HYPERPOD_TEAM, ClusterArn=CLUSTER_ARN)
    account.hyperpod_nodes(
        [("controller-machine", B, "Running"), ("controller-machine", A, "Running")], "controller-machine"
    )
    assert _refused(account, "hyperpod-team.yaml", "controller") == (
        f"{HYPERPOD_TEAM}: HyperPod controller (instance group controller-machine) should have one node and 2 are "
        f"running ({A}, {B}); pick one with --node INSTANCE-ID"
    )
    account = Account()
    account.outputs(HYPERPOD_TEAM, ClusterArn=CLUSTER_ARN)
    account.hyperpod_nodes([("controller-machine", A, "Running")], None)
    assert _refused(account, "hyperpod-team.yaml", C) == (
        f"{HYPERPOD_TEAM}: HyperPod cluster abc123def456 has no node '{C}'"
    )


def test_an_unknown_node_is_refused_before_asking_aws() -> None:
    # no answers queued: any call would fail the Stubber
    assert _refused(Account(), "hyperpod-slurm.yaml", "login") == (
        "hyperpod-slurm: --node 'login' is not a node of this environment; give one of controller, "
        "controller-machine, worker-group-1, or an instance id (i-...)"
    )
    assert _refused(Account(), "parallelcluster-c5n.yaml", "login") == (
        "parallelcluster-c5n: --node 'login' is not a node of this environment; give one of head, compute, or an "
        "instance id (i-...)"
    )
    assert _refused(Account(), "pcs-c5n.yaml", "gpu") == (
        "pcs-c5n: --node 'gpu' is not a node of this environment; give one of login, compute, or an instance id "
        "(i-...)"
    )
    assert _refused(Account(), "hyperpod-eks-g5.yaml", "controller") == (
        "hyperpod-eks-g5: --node 'controller' is not a node of this environment; give one of g5, or an instance "
        "id (i-...)"
    )
    assert _refused(Account(), "eks-g5-efa.yaml", "g5") == (
        "eks-g5-efa: --node is for Slurm nodes and HyperPod instance groups; on EKS connect writes the kubeconfig "
        "(EKS nodes take no SSM sessions: their role carries only what the kubelet needs)"
    )
    assert _refused(Account(), "network-storage.yaml") == (
        "network-storage: connect needs a cluster; this environment has only a network and storage"
    )


def test_a_stack_that_is_not_deployed_or_lacks_the_output_is_a_clear_error() -> None:
    account = Account()
    account.stubs["cloudformation"].add_client_error(
        "describe_stacks",
        service_error_code="ValidationError",
        service_message=f"Stack with id {HYPERPOD_TEAM} does not exist",
        expected_params={"StackName": HYPERPOD_TEAM},
    )
    assert (
        _refused(account, "hyperpod-team.yaml")
        == f"{HYPERPOD_TEAM} is not deployed in us-east-1: deploy it first"
    )
    account = Account()
    account.outputs(HYPERPOD_TEAM, LifecycleLogGroup="/aws/sagemaker/Clusters/team-cluster/abc123def456")
    assert _refused(account, "hyperpod-team.yaml") == (
        f"{HYPERPOD_TEAM} has no output ClusterArn: deployed from another version of the file or the library? "
        "Deploy it again"
    )


# --------------------------------------------------------------------------------------------------
# ParallelCluster

PC = {"parallelcluster:cluster-name": "team-training"}


@pytest.mark.parametrize(
    ("node", "tags", "found", "notes"),
    [
        (None, {**PC, "parallelcluster:node-type": "HeadNode"}, [A], ()),
        ("head", {**PC, "parallelcluster:node-type": "HeadNode"}, [A], ()),
        ("login", {**PC, "parallelcluster:node-type": "LoginNode"}, [B], ()),
        (
            "compute",
            {**PC, "parallelcluster:node-type": "Compute", "parallelcluster:queue-name": "compute"},
            [C, B],
            (f"2 nodes are running; for another: --node {C}",),
        ),
    ],
    ids=["default-head", "head", "login", "queue"],
)
def test_parallelcluster_finds_instances_by_its_tags(
    node: str | None, tags: dict[str, str], found: list[str], notes: tuple[str, ...]
) -> None:
    account = Account()
    account.outputs("training-parallelcluster-team", ClusterName="team-training")
    account.instances(tags, found)
    connected = _find(account, "parallelcluster-team.yaml", node)
    chosen = sorted(found)[0]
    assert (connected.instance_id, connected.notes) == (chosen, notes)
    assert connected.command == ("aws", "ssm", "start-session", "--region", REGION, "--target", chosen)


def test_parallelcluster_instance_id_must_be_the_clusters() -> None:
    account = Account()
    account.outputs("training-parallelcluster-team", ClusterName="team-training")
    account.stubs["ec2"].add_client_error(
        "describe_instances",
        service_error_code="InvalidInstanceID.NotFound",
        service_message=f"The instance ID '{C}' does not exist",
        expected_params={
            "InstanceIds": [C],
            "Filters": [
                {"Name": "tag:parallelcluster:cluster-name", "Values": ["team-training"]},
                {"Name": "instance-state-name", "Values": ["running"]},
            ],
        },
    )
    assert _refused(account, "parallelcluster-team.yaml", C) == (
        f"training-parallelcluster-team: no running node in ParallelCluster node {C}"
    )


def test_parallelcluster_head_node_missing_or_doubled() -> None:
    head = {**PC, "parallelcluster:node-type": "HeadNode"}
    account = Account()
    account.outputs("training-parallelcluster-team", ClusterName="team-training")
    account.instances(head, [])
    assert _refused(account, "parallelcluster-team.yaml") == (
        "training-parallelcluster-team: no running node in ParallelCluster head node"
    )
    account = Account()
    account.outputs("training-parallelcluster-team", ClusterName="team-training")
    account.instances(head, [B, A])
    assert _refused(account, "parallelcluster-team.yaml", "head") == (
        "training-parallelcluster-team: ParallelCluster head node should have one node and 2 are running "
        f"({A}, {B}); pick one with --node INSTANCE-ID"
    )


# --------------------------------------------------------------------------------------------------
# AWS PCS


def _node_groups(account: Account, cluster_id: str, groups: dict[str, str]) -> None:
    account.stubs["pcs"].add_response(
        "list_compute_node_groups",
        {
            "computeNodeGroups": [
                {
                    "name": name,
                    "id": group_id,
                    "arn": f"arn:aws:pcs:us-east-1:111122223333:cluster/{cluster_id}/computenodegroup/{group_id}",
                    "clusterId": cluster_id,
                    "createdAt": NOW,
                    "modifiedAt": NOW,
                    "status": "ACTIVE",
                }
                for name, group_id in groups.items()
            ]
        },
        {"clusterIdentifier": cluster_id},
    )


@pytest.mark.parametrize(("node", "group_id"), [(None, "pcs_login1234"), ("compute", "pcs_compute12")])
def test_pcs_finds_the_node_groups_instances_by_its_tags(node: str | None, group_id: str) -> None:
    account = Account()
    account.outputs("training-pcs-c5n", ClusterId="pcs_abc1234567")
    _node_groups(account, "pcs_abc1234567", {"login": "pcs_login1234", "compute": "pcs_compute12"})
    account.instances({"aws:pcs:compute-node-group-id": group_id}, [A])
    assert _find(account, "pcs-c5n.yaml", node).command == (
        "aws",
        "ssm",
        "start-session",
        "--region",
        REGION,
        "--target",
        A,
    )


def test_pcs_instance_id_must_be_in_one_of_the_clusters_groups() -> None:
    account = Account()
    account.outputs("training-pcs-c5n", ClusterId="pcs_abc1234567")
    _node_groups(account, "pcs_abc1234567", {"login": "pcs_login1234", "compute": "pcs_compute12"})
    account.instances(
        {"aws:pcs:compute-node-group-id": ["pcs_compute12", "pcs_login1234"]}, [B], instance_id=B
    )
    assert _find(account, "pcs-c5n.yaml", B).target == B


def test_pcs_without_login_nodes_asks_for_a_group() -> None:
    config = load_environment(ENVIRONMENTS / "pcs-c5n.yaml")
    assert config.pcs is not None
    pcs = config.pcs.model_copy(
        update={"login_nodes": config.pcs.login_nodes.model_copy(update={"count": 0})}
    )
    with pytest.raises(ConfigurationError) as caught:
        connection(
            config.model_copy(update={"pcs": pcs}),
            environment="pcs-c5n",
            stack="training-pcs-c5n",
            node=None,
            clients=Account().clients,
        )
    assert str(caught.value) == (
        "pcs-c5n: this PCS cluster has no login nodes (pcs.login_nodes.count is 0); give --node with a compute "
        "node group: compute"
    )


@pytest.mark.parametrize(
    ("text", "instance"), [(A, True), ("i-0123abcd", True), ("i-group", False), ("i-0123", False)]
)
def test_node_takes_an_instance_id_by_its_shape(text: str, instance: bool) -> None:
    assert connect_module._is_instance_id(text) is instance


def test_pcs_node_group_missing_from_the_deployed_cluster() -> None:
    account = Account()
    account.outputs("training-pcs-c5n", ClusterId="pcs_abc1234567")
    _node_groups(account, "pcs_abc1234567", {"compute": "pcs_compute12"})
    assert _refused(account, "pcs-c5n.yaml") == (
        "training-pcs-c5n: PCS cluster pcs_abc1234567 has no compute node group login (it has compute); is the "
        "deployed stack older than the file?"
    )


# --------------------------------------------------------------------------------------------------
# EKS and HyperPod on EKS

KUBECONFIG = "aws eks update-kubeconfig --name training-eks --region us-east-1"


def _eks(account: Account, stack: str, *, public: list[str] | None) -> None:
    account.outputs(stack, UpdateKubeconfigCommand=KUBECONFIG, ClusterName="training-eks")
    vpc: dict[str, Any] = {"vpcId": "vpc-0123456789abcdef0", "endpointPublicAccess": public is not None}
    if public is not None:
        vpc["publicAccessCidrs"] = public
    account.stubs["eks"].add_response(
        "describe_cluster",
        {"cluster": {"name": "training-eks", "resourcesVpcConfig": vpc}},
        {"name": "training-eks"},
    )


def test_eks_private_endpoint_says_how_to_reach_it() -> None:
    account = Account()
    _eks(account, "training-eks-g5-efa", public=None)
    found = _find(account, "eks-g5-efa.yaml", profile="dev")
    assert found.command == (*KUBECONFIG.split(), "--profile", "dev")
    assert found.notes == (
        "The API endpoint is private: kubectl reaches it only from inside VPC vpc-0123456789abcdef0. Run kubectl "
        "there, or set eks.public_access_cidrs to your address range and deploy again.",
        "For kubectl in the VPC, use an instance of your own in the cluster's private subnets with the SSM agent "
        "and Session Manager permissions (aws ssm start-session --target i-...): EKS nodes take no sessions.",
    )


def test_eks_public_endpoint_names_its_ranges() -> None:
    account = Account()
    _eks(account, "training-eks-g5-efa", public=["203.0.113.0/24"])
    assert _find(account, "eks-g5-efa.yaml").notes == (
        "The API endpoint is public, open to 203.0.113.0/24 only (public_access_cidrs).",
    )


def test_hyperpod_eks_points_at_its_own_nodes_inside_the_vpc() -> None:
    account = Account()
    _eks(account, "training-hyperpod-eks-g5", public=None)
    assert _find(account, "hyperpod-eks-g5.yaml").notes[1] == (
        "A HyperPod node is in the VPC: training-clusters connect FILE --node g5 opens a shell there (install "
        "kubectl and run this command on it)."
    )
    account = Account()
    account.outputs("training-hyperpod-eks-g5", ClusterArn=CLUSTER_ARN)
    account.hyperpod_nodes([("g5", A, "Running")], "g5")
    assert _find(account, "hyperpod-eks-g5.yaml", "g5").target == f"sagemaker-cluster:abc123def456_g5-{A}"


# --------------------------------------------------------------------------------------------------
# the command line: --print, --output json, opening a session, no credentials, AWS failing


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Static fake credentials and no config files (the lookups are stubbed)."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    (tmp_path / "credentials").write_text("[dev]\naws_access_key_id = x\naws_secret_access_key = x\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))


def _run(monkeypatch: pytest.MonkeyPatch, account: Account, *argv: str) -> str:
    monkeypatch.setattr(
        ConnectClients, "from_session", classmethod(lambda cls, session, region: account.clients)
    )
    out = io.StringIO()
    with account.active():
        assert cli.main(["connect", *argv], stdout=out) == common.EXIT_OK
    return out.getvalue()


@pytest.mark.usefixtures("credentials")
def test_print_gives_each_orchestrators_command_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    account = Account()
    account.outputs(HYPERPOD_TEAM, ClusterArn=CLUSTER_ARN)
    account.hyperpod_nodes([("login-group", B, "Running")], "login-group")
    assert _run(
        monkeypatch, account, str(ENVIRONMENTS / "hyperpod-team.yaml"), "--node", "login", "--print"
    ) == (
        f"aws ssm start-session --region us-east-1 --target sagemaker-cluster:abc123def456_login-group-{B}\n"
    )
    account = Account()
    account.outputs("training-parallelcluster-c5n", ClusterName="c5n-training")
    account.instances(
        {"parallelcluster:cluster-name": "c5n-training", "parallelcluster:node-type": "HeadNode"}, [A]
    )
    assert _run(monkeypatch, account, str(ENVIRONMENTS / "parallelcluster-c5n.yaml"), "--print") == (
        f"aws ssm start-session --region us-east-1 --target {A}\n"
    )
    account = Account()
    account.outputs("training-pcs-c5n", ClusterId="pcs_abc1234567")
    _node_groups(account, "pcs_abc1234567", {"login": "pcs_login1234", "compute": "pcs_compute12"})
    account.instances({"aws:pcs:compute-node-group-id": "pcs_login1234"}, [C])
    assert _run(monkeypatch, account, str(ENVIRONMENTS / "pcs-c5n.yaml"), "--print", "--profile", "dev") == (
        f"aws ssm start-session --region us-east-1 --target {C} --profile dev\n"
    )
    account = Account()
    _eks(account, "training-eks-g5-efa", public=None)
    assert _run(monkeypatch, account, str(ENVIRONMENTS / "eks-g5-efa.yaml"), "--print") == (
        "aws eks update-kubeconfig --name training-eks --region us-east-1\n"
        "# The API endpoint is private: kubectl reaches it only from inside VPC vpc-0123456789abcdef0. Run kubectl "
        "there, or set\n"
        "# eks.public_access_cidrs to your address range and deploy again.\n"
        "# For kubectl in the VPC, use an instance of your own in the cluster's private subnets with the SSM agent "
        "and Session\n"
        "# Manager permissions (aws ssm start-session --target i-...): EKS nodes take no sessions.\n"
    )
    account = Account()
    _eks(account, "training-hyperpod-eks-g5", public=None)
    assert _run(monkeypatch, account, "environments/hyperpod-eks-g5.yaml", "--print") == (
        "aws eks update-kubeconfig --name training-eks --region us-east-1\n"
        "# The API endpoint is private: kubectl reaches it only from inside VPC vpc-0123456789abcdef0. Run kubectl "
        "there, or set\n"
        "# hyperpod_eks.public_access_cidrs to your address range and deploy again.\n"
        "# A HyperPod node is in the VPC: training-clusters connect environments/hyperpod-eks-g5.yaml --node g5 "
        "opens a shell\n"
        "# there (install kubectl and run this command on it).\n"
    )
    account = Account()
    account.outputs(HYPERPOD_TEAM, ClusterArn=CLUSTER_ARN)
    account.hyperpod_nodes([("gpu-workers", B, "Running"), ("gpu-workers", A, "Running")], "gpu-workers")
    printed = _run(
        monkeypatch, account, str(ENVIRONMENTS / "hyperpod-team.yaml"), "--node", "gpu-workers", "--print"
    )
    assert printed == (
        f"aws ssm start-session --region us-east-1 --target sagemaker-cluster:abc123def456_gpu-workers-{A}\n"
        f"# 2 nodes are running; for another: --node {B}\n"
    )
    assert max(len(line) for line in printed.splitlines()) <= 120


@pytest.mark.usefixtures("credentials")
def test_json_output_never_opens_a_session(monkeypatch: pytest.MonkeyPatch) -> None:
    account = Account()
    account.outputs("training-parallelcluster-c5n", ClusterName="c5n-training")
    account.instances(
        {"parallelcluster:cluster-name": "c5n-training", "parallelcluster:node-type": "HeadNode"}, [A]
    )
    monkeypatch.setattr(connect_module, "open_connection", None)  # would fail if called
    document = json.loads(
        _run(monkeypatch, account, str(ENVIRONMENTS / "parallelcluster-c5n.yaml"), "--output", "json")
    )
    assert document == {
        "environment": "parallelcluster-c5n",
        "stack": "training-parallelcluster-c5n",
        "region": REGION,
        "node": f"ParallelCluster head node ({A})",
        "instance_id": A,
        "target": A,
        "command": ["aws", "ssm", "start-session", "--region", REGION, "--target", A],
        "shell": f"aws ssm start-session --region us-east-1 --target {A}",
        "notes": [],
    }


@pytest.mark.usefixtures("credentials")
def test_without_print_the_session_is_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []

    def fake_open(found: Connection, say: Any) -> int:
        return open_connection(
            found, say, run=lambda argv: ran.append(list(argv)) or 0, which=lambda tool: "/bin/x"
        )

    monkeypatch.setattr(connect_module, "open_connection", fake_open)
    account = Account()
    account.outputs("training-parallelcluster-c5n", ClusterName="c5n-training")
    account.instances(
        {"parallelcluster:cluster-name": "c5n-training", "parallelcluster:node-type": "HeadNode"}, [A]
    )
    said = _run(monkeypatch, account, str(ENVIRONMENTS / "parallelcluster-c5n.yaml"))
    assert ran == [["aws", "ssm", "start-session", "--region", REGION, "--target", A]]
    assert (
        said == f"ParallelCluster head node ({A}):\naws ssm start-session --region us-east-1 --target {A}\n"
    )


def test_opening_needs_the_aws_cli_and_for_a_session_its_plugin() -> None:
    session = Connection("n", ("aws", "ssm", "start-session", "--region", REGION, "--target", A))
    kubeconfig = Connection("the EKS cluster x", tuple(KUBECONFIG.split()), notes=("note",))
    ran: list[list[str]] = []

    def run(argv: Sequence[str]) -> int:
        ran.append(list(argv))
        return 3

    with pytest.raises(
        ConfigurationError, match=r"^the AWS CLI \(aws\) is not on PATH: install it, or print"
    ):
        open_connection(session, print, run=run, which=lambda tool: None)
    with pytest.raises(
        ConfigurationError, match=r"^session-manager-plugin is not on PATH: install the AWS CLI's"
    ):
        open_connection(session, print, run=run, which=lambda tool: "/x" if tool == "aws" else None)
    said: list[str] = []
    # a kubeconfig needs no plugin; the command's exit status is returned, the notes said after it
    assert (
        open_connection(kubeconfig, said.append, run=run, which=lambda t: "/x" if t == "aws" else None) == 3
    )
    assert ran == [KUBECONFIG.split()]
    assert said == ["the EKS cluster x:", KUBECONFIG, "note"]


def test_without_credentials_one_line_and_status_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    assert cli.main(["connect", str(ENVIRONMENTS / "hyperpod-team.yaml")]) == common.EXIT_USAGE
    assert capsys.readouterr().err == (
        "error: connect found no AWS credentials: give --profile P, set AWS_PROFILE, or run aws configure\n"
    )


@pytest.mark.usefixtures("credentials")
def test_aws_failing_is_one_line_and_status_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    account = Account()
    account.outputs(HYPERPOD_TEAM, ClusterArn=CLUSTER_ARN)
    account.stubs["sagemaker"].add_client_error(
        "list_cluster_nodes",
        service_error_code="AccessDeniedException",
        service_message="User is not authorized to perform: sagemaker:ListClusterNodes",
        expected_params={"ClusterName": CLUSTER_ARN, "InstanceGroupNameContains": "controller-machine"},
    )
    monkeypatch.setattr(
        ConnectClients, "from_session", classmethod(lambda cls, session, region: account.clients)
    )
    with account.active():
        status = cli.main(["connect", str(ENVIRONMENTS / "hyperpod-team.yaml")])
    assert status == common.EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        f"error: cannot look up {HYPERPOD_TEAM} in us-east-1: AccessDeniedException: User is not authorized to "
        "perform: ...\n"
    )
    assert len(err) == 121  # 120 columns and the newline


def test_the_guide_names_every_action_connect_needs_and_the_readme_points_to_it() -> None:
    guide = (ROOT / "docs" / "connect.md").read_text().split("## What it needs")[1].split("\n## ")[0]
    named = re.findall(r"`((?:cloudformation|sagemaker|ec2|pcs|eks|ssm):\w+)`", guide)
    assert named == list(connect_module.CONNECT_IAM_ACTIONS)
    assert "[docs/connect.md](docs/connect.md)" in (ROOT / "README.md").read_text()
