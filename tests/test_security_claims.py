"""docs/slurm-teams.md's "What a team user can reach" and docs/security.md's SSM claim, checked against the shipped
environments' templates.

Each claim is quoted from its guide page (the test fails when the sentence changes) and checked where it shows in
what `cdk deploy` would create; what it means on the nodes (sshd refusing, netfilter resetting) is shown on
the real-Slurm beds by tests/integration/test_slurm_real.py, test_parallelcluster_real.py and
test_tenant_nodes_real.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from training_clusters.constructs.pcs.cluster import imds_guard_boothook
from training_clusters.stacks.hyperpod import HyperPodEnvironment
from training_clusters.stacks.parallelcluster import IMDS_GUARD_ARGS, ParallelClusterEnvironment
from training_clusters.stacks.pcs import PcsEnvironment

from .assertions import aws_managed, text
from .conftest import ROOT, EnvironmentGates

#: The guide pages whose claims are checked here, by name.
PAGES = {name: (ROOT / "docs" / name).read_text() for name in ("slurm-teams.md", "security.md")}
ENVIRONMENTS = ROOT / "environments"


def claimed(sentence: str, page: str = "slurm-teams.md") -> None:
    """docs/PAGE says SENTENCE (its line breaks aside)."""
    assert sentence in " ".join(PAGES[page].split()), f"docs/{page} no longer says: {sentence}"


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {key: r for key, r in template["Resources"].items() if r["Type"] == kind}


def _ingress_to(template: dict[str, Any], stack: Any, group: Any) -> list[Any]:
    target = stack.resolve(group.security_group_id)
    return [
        r["Properties"].get("SourceSecurityGroupId")
        for r in _of_type(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("GroupId") == target
    ]


def test_the_accounting_database_admits_only_the_controller_or_head_node(
    environment_gates: EnvironmentGates,
) -> None:
    claimed(
        "**Not the accounting database.** It admits only the controller's (head node's) own security group and "
        "the functions that make slurmdbd's database user (at deploy) and rotate its password (HyperPod); "
        "slurmdbd connects as that user (`ALL` on its own database only), over TLS the server requires; no "
        "node's role reads the master user's secret."
    )
    team = ENVIRONMENTS / "hyperpod-team.yaml"
    stack, _ = environment_gates.get(team)
    assert isinstance(stack, HyperPodEnvironment) and stack.accounting_database is not None
    assert stack.cluster.controller_security_group is not None
    sources = _ingress_to(environment_gates.template(team), stack, stack.accounting_database.security_group)
    handler = stack.accounting_database.node.find_child("UserHandlerSecurityGroup")
    rotation = stack.accounting_database.node.find_child("RotationSecurityGroup")
    assert sorted(map(str, sources)) == sorted(
        str(stack.resolve(g.security_group_id))
        for g in (stack.cluster.controller_security_group, handler, rotation)
    )
    # HyperPod's slurmdbd reads slurmdbd's user from its secret (it alternates), never the master user's
    [cluster] = _of_type(environment_gates.template(team), "AWS::SageMaker::Cluster").values()
    database = cluster["Properties"]["Orchestrator"]["Slurm"]["AccountingDatabase"]
    assert database["SecretArn"] == stack.resolve(stack.accounting_database.slurmdbd_secret.secret_arn)
    assert "accounting" not in stack.cluster.lifecycle_settings

    team = ENVIRONMENTS / "parallelcluster-team.yaml"
    stack, _ = environment_gates.get(team)
    assert isinstance(stack, ParallelClusterEnvironment) and stack.accounting_database is not None
    head = stack.cluster.head_node_security_group
    assert head is not None
    sources = _ingress_to(environment_gates.template(team), stack, stack.accounting_database.security_group)
    handler = stack.accounting_database.node.find_child("UserHandlerSecurityGroup")
    assert sorted(map(str, sources)) == sorted(
        str(stack.resolve(g.security_group_id)) for g in (head, handler)
    )
    database = stack.cluster.concrete_configuration()["Scheduling"]["SlurmSettings"]["Database"]
    assert database["UserName"] == stack.accounting_database.slurmdbd_username == "slurmdbd"
    claimed(
        "On HyperPod slurmdbd's password rotates every 30 days (alternating users; the login in use is never "
        "changed: a legacy controller follows the secret hourly, HyperPod's own slurmdbd when it reads it again); "
        "ParallelCluster's head node cannot follow a rotation, so there it does not rotate."
    )
    assert stack.accounting_database.slurmdbd_rotation_days is None
    assert not _of_type(environment_gates.template(team), "AWS::SecretsManager::RotationSchedule")
    hyperpod = ENVIRONMENTS / "hyperpod-team.yaml"
    [schedule] = _of_type(
        environment_gates.template(hyperpod), "AWS::SecretsManager::RotationSchedule"
    ).values()
    assert schedule["Properties"]["RotationRules"] == {"ScheduleExpression": "rate(30 days)"}
    for path in (ENVIRONMENTS / "hyperpod-team.yaml", team):
        [group] = _of_type(environment_gates.template(path), "AWS::RDS::DBClusterParameterGroup").values()
        assert group["Properties"]["Parameters"]["require_secure_transport"] == "ON"


def test_no_team_user_reaches_a_nodes_credentials(environment_gates: EnvironmentGates) -> None:
    claimed("on ParallelCluster the head and login nodes have its own lockdown and compute nodes ours (root and "
            "`pcluster-admin` only); on PCS every login and compute node, from user data that runs before sshd "
            "starts")  # fmt: skip
    claimed("On HyperPod every node with `users:` lets only root reach instance metadata;")
    hyperpod, _ = environment_gates.get(ENVIRONMENTS / "hyperpod-team.yaml")
    assert isinstance(hyperpod, HyperPodEnvironment)
    assert hyperpod.cluster.lifecycle_settings["users"]  # the imds-guard step runs on every node with users
    pcluster, _ = environment_gates.get(ENVIRONMENTS / "parallelcluster-team.yaml")
    assert isinstance(pcluster, ParallelClusterEnvironment)
    config = pcluster.cluster.concrete_configuration()
    assert config["HeadNode"]["Imds"] == {"Secured": True}  # ParallelCluster's lockdown: head and login nodes
    claimed("on ParallelCluster too (compute nodes: our guard is the first `OnNodeStart` action, users come at "
            "`OnNodeConfigured`; head and login nodes: ParallelCluster's lockdown runs earlier still).")  # fmt: skip
    for queue in config["Scheduling"]["SlurmQueues"]:
        guard = queue["CustomActions"]["OnNodeStart"]  # the queue's only OnNodeStart action: a Script
        assert guard["Script"].endswith("/training-clusters-imds.sh")
        assert guard["Args"] == list(IMDS_GUARD_ARGS) == ["--install", "--allow", "pcluster-admin"]
        configured = queue["CustomActions"]["OnNodeConfigured"]["Sequence"]
        assert configured[0]["Script"].endswith("/users.sh")
        assert not any(a["Script"].endswith("/training-clusters-imds.sh") for a in configured)
    for name in ("pcs-c5n.yaml", "pcs-p5.yaml"):
        pcs, _ = environment_gates.get(ENVIRONMENTS / name)
        assert isinstance(pcs, PcsEnvironment)
        template = environment_gates.template(ENVIRONMENTS / name)
        assert set(pcs.cluster.launch_templates) >= {"login"}
        for launch_template in pcs.cluster.launch_templates.values():
            data = template["Resources"][pcs.get_logical_id(launch_template)]["Properties"][
                "LaunchTemplateData"
            ]
            user_data = text(data["UserData"]["Fn::Base64"])
            assert (
                f'Content-Type: text/cloud-boothook; charset="us-ascii"\n\n{imds_guard_boothook()}\n'
                in user_data
            )


def test_no_team_user_reads_what_anothers_containers_run(environment_gates: EnvironmentGates) -> None:
    claimed("enroot and Pyxis read nothing another user can write: runtime, data, image cache and temporary "
            "files in one folder per user and node")  # fmt: skip
    pcluster, _ = environment_gates.get(ENVIRONMENTS / "parallelcluster-team.yaml")
    assert isinstance(pcluster, ParallelClusterEnvironment)
    config = pcluster.cluster.concrete_configuration()
    nodes = [config["HeadNode"], *config["Scheduling"]["SlurmQueues"], *config["LoginNodes"]["Pools"]]
    for node in nodes:
        scripts = [
            a["Script"].rsplit("/", 1)[-1] for a in node["CustomActions"]["OnNodeConfigured"]["Sequence"]
        ]
        assert scripts.index("pyxis.sh") + 1 == scripts.index("training-clusters-enroot.sh")
    hyperpod, _ = environment_gates.get(ENVIRONMENTS / "hyperpod-team.yaml")
    assert isinstance(hyperpod, HyperPodEnvironment)
    assert hyperpod.cluster.lifecycle_settings.get(
        "enable_enroot_pyxis", True
    )  # the step runs the same script


def test_the_team_stays_off_the_controller_and_the_head_node(environment_gates: EnvironmentGates) -> None:
    claimed("HyperPod's controller admits root and `ubuntu` only over SSH (`team_logins_on_controller: true` "
            "opens it); ParallelCluster's head node likewise when the file has `login_nodes`")  # fmt: skip
    hyperpod, _ = environment_gates.get(ENVIRONMENTS / "hyperpod-team.yaml")
    assert isinstance(hyperpod, HyperPodEnvironment)
    assert "team_logins_on_controller" not in hyperpod.cluster.lifecycle_settings  # the default: closed
    pcluster, _ = environment_gates.get(ENVIRONMENTS / "parallelcluster-team.yaml")
    assert isinstance(pcluster, ParallelClusterEnvironment)
    config = pcluster.cluster.concrete_configuration()
    assert config["LoginNodes"]["Pools"]
    users = config["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Sequence"][0]
    assert users["Script"].endswith("/users.sh") and "--admins-only-on-head-node" in users["Args"]


@pytest.mark.parametrize(
    "environment",
    sorted(p.name for p in ENVIRONMENTS.glob("*.yaml") if p.name.startswith(("pcs-", "parallelcluster-"))),
)
def test_no_node_role_of_pcs_or_parallelcluster_gets_ssms_core_policy(
    environment_gates: EnvironmentGates, environment: str
) -> None:
    claimed("PCS nodes and ParallelCluster's head and login nodes reach SSM through `SessionManagerPolicy` "
            "(registration and session channels, no parameter reads), not `AmazonSSMManagedInstanceCore`.",
            "security.md")  # fmt: skip
    template = environment_gates.template(ENVIRONMENTS / environment)
    managed = [
        arn
        for role in _of_type(template, "AWS::IAM::Role").values()
        for arn in role["Properties"].get("ManagedPolicyArns", [])
    ]
    core = aws_managed("AmazonSSMManagedInstanceCore")
    assert core not in {text(arn) for arn in managed}
    clusters = _of_type(template, "Custom::PclusterCluster")
    for cluster in clusters.values():
        configuration = cluster["Properties"]["ClusterConfiguration"]
        nodes = [configuration["HeadNode"], *configuration.get("LoginNodes", {}).get("Pools", [])]
        for node in nodes:
            policies = [p["Policy"] for p in node["Iam"]["AdditionalIamPolicies"]]
            assert core not in {text(policy) for policy in policies}
            [session] = [p for p in policies if p == {"Ref": _logical_id(template, "SessionManager")}]
            assert _of_type(template, "AWS::IAM::ManagedPolicy")[session["Ref"]]
    if environment.startswith("pcs-"):
        [node_role] = [
            r
            for r in _of_type(template, "AWS::IAM::Role").values()
            if "AWS PCS nodes" in r["Properties"].get("Description", "")
        ]
        [policy] = node_role["Properties"]["ManagedPolicyArns"]
        assert _of_type(template, "AWS::IAM::ManagedPolicy")[policy["Ref"]]


def _logical_id(template: dict[str, Any], fragment: str) -> str:
    [found] = [k for k, r in _of_type(template, "AWS::IAM::ManagedPolicy").items() if fragment in k]
    return found
