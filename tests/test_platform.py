"""Platform-scale apps (``tests/composition/platform.py``): organisation tags and permissions boundaries reach
what every orchestrator launches, wrong-environment layouts are refused when built, and a role passed in
gets what the nodes need."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from training_clusters.constructs import (
    GpuEksCluster,
    HyperPodCluster,
    InstanceGroup,
    ParallelCluster,
    PcsCluster,
    PcsComputeNodeGroup,
    SharedLustre,
    SlurmAccountingDatabase,
    SlurmQueue,
    TrainingNetwork,
)
from training_clusters.constructs.parallelcluster.cluster import ComputeResource
from training_clusters.model.errors import ConfigurationError

from .composition.app import AZS, ZonedStack
from .composition.platform import ACCOUNT_A, ACCOUNT_B, ORG_BOUNDARY, ORG_TAGS, TEAM_B_BOUNDARY, Team, build
from .conftest import CDK_CONTEXT


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Team]:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("platform") / "cdk.out"), context=dict(CDK_CONTEXT))
    teams = build(app)
    app.synth()
    return teams


def _template(team: Team, stack: str) -> dict[str, Any]:
    assembly = team.stage.synth()  # the stage's assembly, made by the app's synth
    template: dict[str, Any] = json.loads(
        (Path(assembly.directory) / team.stacks[stack].template_file).read_text()
    )
    return template


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _tags(tags: list[dict[str, str]]) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in tags}


def _pcluster_configuration(team: Team) -> dict[str, Any]:
    (resource,) = _resources(_template(team, "Pcluster"), "Custom::PclusterCluster").values()
    configuration: dict[str, Any] = resource["Properties"]["ClusterConfiguration"]
    return configuration


# --------------------------------------------------------------------------------------------------
# 1. tags applied by aspects reach what every orchestrator launches


@pytest.mark.parametrize("stack", ["Eks", "Pcs"])
def test_launch_templates_tag_instances_volumes_and_interfaces_with_the_aspects_tags(
    teams: dict[str, Team], stack: str
) -> None:
    templates = _resources(_template(teams["TeamA"], stack), "AWS::EC2::LaunchTemplate")
    assert templates
    for logical_id, resource in templates.items():
        specs = resource["Properties"]["LaunchTemplateData"]["TagSpecifications"]
        assert [spec["ResourceType"] for spec in specs] == ["instance", "volume", "network-interface"], (
            logical_id
        )
        for spec in specs:
            assert _tags(spec["Tags"]) == ORG_TAGS, logical_id


def test_launch_template_tags_are_the_stacks_and_the_aspects_resolved_at_synth() -> None:
    from training_clusters.constructs.private.launch_template import node_launch_template

    app = cdk.App()
    stack = cdk.Stack(app, "Nodes", tags={"cost-centre": "stack-value", "stack-only": "kept"})
    template = node_launch_template(stack, "LaunchTemplate", instance_type="c5.large")
    cdk.Tags.of(app).add("cost-centre", "aspect-value")  # after the template exists: applied at synth
    cdk.Tags.of(stack).add("org:owner", "platform", include_resource_types=["AWS::EC2::LaunchTemplate"])
    cdk.Tags.of(stack).add("not-here", "x", include_resource_types=["AWS::EC2::Instance"])
    data = cdk.assertions.Template.from_stack(stack).to_json()["Resources"][stack.get_logical_id(template)]
    (instance, volume, interface) = data["Properties"]["LaunchTemplateData"]["TagSpecifications"]
    expected = {"cost-centre": "aspect-value", "org:owner": "platform", "stack-only": "kept"}
    assert [_tags(spec["Tags"]) for spec in (instance, volume, interface)] == [expected] * 3


def test_a_launch_template_without_any_tag_has_no_tag_specifications() -> None:
    from training_clusters.constructs.private.launch_template import node_launch_template

    stack = cdk.Stack(cdk.App(), "Nodes")
    template = node_launch_template(stack, "LaunchTemplate", instance_type="c5.large")
    data = cdk.assertions.Template.from_stack(stack).to_json()["Resources"][stack.get_logical_id(template)]
    assert "TagSpecifications" not in data["Properties"]["LaunchTemplateData"]


@pytest.mark.parametrize("team", ["TeamA", "TeamB"])
def test_parallelcluster_tags_are_the_aspects_and_its_own(teams: dict[str, Team], team: str) -> None:
    tags = _pcluster_configuration(teams[team])["Tags"]
    assert _tags(tags) == {**ORG_TAGS, "team": team}
    # the prop's tags first, in its order: a deployed cluster's list does not move when aspects are added
    assert [tag["Key"] for tag in tags] == ["team", *sorted(ORG_TAGS)]


@pytest.mark.parametrize("team", ["TeamA", "TeamB"])
def test_hyperpod_cluster_carries_the_aspects_tags(teams: dict[str, Team], team: str) -> None:
    (cluster,) = _resources(_template(teams[team], "HyperPod"), "AWS::SageMaker::Cluster").values()
    assert _tags(cluster["Properties"]["Tags"]) == ORG_TAGS


def test_pcs_cluster_node_groups_and_queues_carry_the_aspects_tags(teams: dict[str, Team]) -> None:
    template = _template(teams["TeamA"], "Pcs")
    for kind in ("AWS::PCS::Cluster", "AWS::PCS::ComputeNodeGroup", "AWS::PCS::Queue"):
        resources = _resources(template, kind)
        assert resources, kind
        for logical_id, resource in resources.items():
            assert ORG_TAGS.items() <= resource["Properties"]["Tags"].items(), logical_id


def _pcluster(stack: cdk.Stack, network: TrainingNetwork, **props: Any) -> ParallelCluster:
    return ParallelCluster(
        stack,
        "Cluster",
        cluster_name="bounded",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        queues=[
            SlurmQueue(
                name="compute",
                compute_resources=[ComputeResource(name="c5n", instance_type="c5n.9xlarge", max_count=2)],
            )
        ],
        **props,
    )


def _pcluster_stack(env: cdk.Environment | None = None) -> tuple[cdk.App, cdk.Stack, TrainingNetwork]:
    app = cdk.App(context=dict(CDK_CONTEXT))
    stack = ZonedStack(app, "Cluster", env=env or cdk.Environment(account=ACCOUNT_A, region="us-east-1"))
    return app, stack, TrainingNetwork(stack, "Network", availability_zones=AZS)


def _tag_keys(count: int) -> dict[str, str]:
    return {f"org:tag-{index:02d}": "x" for index in range(count)}


def test_parallelcluster_takes_40_tags_from_the_stack_the_aspects_and_its_prop() -> None:
    app, stack, network = _pcluster_stack()
    cluster = _pcluster(stack, network, tags=_tag_keys(10))
    for key, value in list(_tag_keys(40).items())[10:]:
        cdk.Tags.of(app).add(key, value)
    app.synth()
    assert cluster.cluster_tags() == _tag_keys(40)


@pytest.mark.parametrize(
    ("added", "problem"),
    [
        (
            _tag_keys(41),  # the first one past the limit: 10 of the prop's, 31 applied
            "must be at most 40 tags (ParallelCluster keeps 10 of EC2's 50 for its own), got 41",
        ),
        (
            {"parallelcluster:owner": "x"},
            "key 'parallelcluster:owner' starts with 'parallelcluster:', which ParallelCluster keeps for itself",
        ),
    ],
    ids=["41-tags", "reserved-prefix"],
)
def test_parallelcluster_refuses_at_synth_what_its_rules_refuse_in_the_aspects_tags(
    added: dict[str, str], problem: str
) -> None:
    app, stack, network = _pcluster_stack()
    _pcluster(stack, network, tags=_tag_keys(10))
    for key, value in added.items():
        cdk.Tags.of(app).add(key, value)
    with pytest.raises(RuntimeError) as raised:
        app.synth()
    assert f"[Cluster/Cluster] tags (this stack's, Tags.of and the tags prop) {problem}" in str(raised.value)


def test_parallelcluster_refuses_a_reserved_tag_in_its_prop_when_built() -> None:
    _, stack, network = _pcluster_stack()
    with pytest.raises(ConfigurationError) as raised:
        _pcluster(stack, network, tags={"parallelcluster:owner": "x"})
    assert str(raised.value) == (
        "Cluster/Cluster: tags key 'parallelcluster:owner' starts with 'parallelcluster:', which ParallelCluster "
        "keeps for itself"
    )


# --------------------------------------------------------------------------------------------------
# 2. permissions boundaries reach the roles ParallelCluster makes


def test_parallelcluster_roles_take_the_boundary_applied_to_the_stage(teams: dict[str, Team]) -> None:
    configuration = _pcluster_configuration(teams["TeamA"])
    assert configuration["Iam"] == {"PermissionsBoundary": ORG_BOUNDARY}
    # the same boundary CDK put on the provider role of ours
    (role,) = _resources(_template(teams["TeamA"], "Pcluster"), "AWS::IAM::Role").values()
    assert role["Properties"]["PermissionsBoundary"] == ORG_BOUNDARY


def test_parallelcluster_roles_take_the_stages_own_boundary(teams: dict[str, Team]) -> None:
    expected = f"arn:aws:iam::{ACCOUNT_B}:policy/{TEAM_B_BOUNDARY}"
    assert _pcluster_configuration(teams["TeamB"])["Iam"] == {"PermissionsBoundary": expected}
    (role,) = _resources(_template(teams["TeamB"], "Pcluster"), "AWS::IAM::Role").values()
    assert role["Properties"]["PermissionsBoundary"] == expected


@pytest.mark.parametrize("team", ["TeamA", "TeamB"])
def test_every_role_of_every_stack_is_bounded(teams: dict[str, Team], team: str) -> None:
    for name in teams[team].stacks:
        for logical_id, role in _resources(_template(teams[team], name), "AWS::IAM::Role").items():
            assert "PermissionsBoundary" in role["Properties"], f"{name}/{logical_id}"


def test_the_bounded_configuration_passes_parallelclusters_schema(teams: dict[str, Team]) -> None:
    from .pcluster_schema import schema_errors

    configuration = teams["TeamA"].pcluster.concrete_configuration()
    assert configuration["Iam"] == {"PermissionsBoundary": ORG_BOUNDARY}
    assert schema_errors(configuration, cluster_name="team-pcluster") == []


def test_without_a_boundary_parallelcluster_has_no_iam_section() -> None:
    app, stack, network = _pcluster_stack()
    cluster = _pcluster(stack, network)
    app.synth()
    assert "Iam" not in stack.resolve(cluster.configuration)


def test_a_later_boundary_clear_removes_it() -> None:
    app, stack, network = _pcluster_stack()
    cluster = _pcluster(stack, network)
    iam.PermissionsBoundary.of(app).apply(iam.ManagedPolicy.from_managed_policy_arn(stack, "B", ORG_BOUNDARY))
    iam.PermissionsBoundary.of(stack).clear()
    assert cluster.permissions_boundary() is None


@pytest.mark.parametrize("where", ["app", "stack"])
def test_a_boundary_without_a_provider_role_of_yours_is_refused_at_synth(where: str) -> None:
    app, stack, network = _pcluster_stack()
    _pcluster(stack, network)
    scope = app if where == "app" else stack
    iam.PermissionsBoundary.of(scope).apply(
        iam.ManagedPolicy.from_managed_policy_arn(stack, "B", ORG_BOUNDARY)
    )
    with pytest.raises(RuntimeError) as raised:
        app.synth()
    assert (
        f"[Cluster/Cluster] a permissions boundary applies to this construct's roles ({ORG_BOUNDARY}), and "
        "ParallelCluster's configuration carries it to the cluster's roles, but ParallelCluster's provider makes "
        "its own Lambda role (PclusterLambdaRole) without one: pass provider_lambda_role"
    ) in str(raised.value)


# --------------------------------------------------------------------------------------------------
# 3. a construct given a VPC or file system of another account or region is refused when built


GROUPS = [
    InstanceGroup(name="controller", instance_type="ml.c5.xlarge", role="controller"),
    InstanceGroup(name="workers", instance_type="ml.c5.xlarge", partition="cpu"),
]
NETWORK_ENV = cdk.Environment(account=ACCOUNT_A, region="us-east-1")
ELSEWHERE = {
    "region": cdk.Environment(account=ACCOUNT_A, region="us-west-2"),
    "account": cdk.Environment(account=ACCOUNT_B, region="us-east-1"),
}


def _network_elsewhere(difference: str) -> tuple[TrainingNetwork, cdk.Stack]:
    app = cdk.App(context=dict(CDK_CONTEXT))
    network = TrainingNetwork(ZonedStack(app, "Network", env=NETWORK_ENV), "Network", availability_zones=AZS)
    return network, ZonedStack(app, "Cluster", env=ELSEWHERE[difference])


BUILDERS: dict[str, Callable[[cdk.Stack, TrainingNetwork], Any]] = {
    "SharedLustre": lambda s, n: SharedLustre(s, "Built", vpc=n.vpc, subnet=n.placement_subnet()),
    "HyperPodCluster": lambda s, n: HyperPodCluster(
        s,
        "Built",
        cluster_name="team",
        vpc=n.vpc,
        subnet=n.placement_subnet(),
        instance_groups=GROUPS,
    ),
    "ParallelCluster": lambda s, n: ParallelCluster(
        s,
        "Built",
        cluster_name="team",
        vpc=n.vpc,
        subnet=n.placement_subnet(),
        queues=[
            SlurmQueue(name="q", compute_resources=[ComputeResource(name="c", instance_type="c5.large")])
        ],
    ),
    "PcsCluster": lambda s, n: PcsCluster(
        s,
        "Built",
        cluster_name="team",
        vpc=n.vpc,
        subnet=n.placement_subnet(),
        compute_node_groups=[PcsComputeNodeGroup(name="compute", instance_type="c5.large")],
        ami_ssm_parameter="/ami",
    ),
    "GpuEksCluster": lambda s, n: GpuEksCluster(s, "Built", vpc=n.vpc),
    "SlurmAccountingDatabase": lambda s, n: SlurmAccountingDatabase(s, "Built", vpc=n.vpc),
    "TrainingNetwork": lambda s, n: TrainingNetwork(s, "Built", vpc=n.vpc),
}


@pytest.mark.parametrize("difference", ["region", "account"])
@pytest.mark.parametrize("construct", sorted(BUILDERS))
def test_a_construct_on_a_network_of_another_environment_is_refused_naming_both(
    construct: str, difference: str
) -> None:
    network, stack = _network_elsewhere(difference)
    other = ELSEWHERE[difference]
    with pytest.raises(ConfigurationError) as raised:
        BUILDERS[construct](stack, network)
    assert str(raised.value) == (
        f"Cluster/Built: vpc is in stack Network (account {ACCOUNT_A}, region us-east-1), but this construct's "
        f"stack Cluster is in account {other.account}, region {other.region}: a stack cannot use a resource of "
        f"another {difference}; build it in this stack's environment, or import it there (e.g. "
        "ec2.Vpc.from_lookup in this stack)"
    )


def test_a_file_system_inside_a_props_dataclass_is_checked_too() -> None:
    from training_clusters.constructs import SlurmSettings

    app = cdk.App(context=dict(CDK_CONTEXT))
    here = ZonedStack(app, "Here", env=NETWORK_ENV)
    network = TrainingNetwork(here, "Network", availability_zones=AZS)
    there = ZonedStack(app, "There", env=ELSEWHERE["region"])
    database = SlurmAccountingDatabase(there, "Db", vpc=ec2.Vpc(there, "Vpc", max_azs=2))
    with pytest.raises(ConfigurationError) as raised:
        _pcluster(here, network, slurm_settings=SlurmSettings(database=database))
    assert str(raised.value).startswith(
        "Here/Cluster: slurm_settings.database is in stack There (account 111111111111, region us-west-2), but "
        "this construct's stack Here is in account 111111111111, region us-east-1"
    )


@pytest.mark.parametrize(
    ("network_env", "cluster_env"),
    [
        (None, None),  # both environment-agnostic
        (NETWORK_ENV, NETWORK_ENV),  # the same environment, another stack
        (cdk.Environment(region="us-east-1"), cdk.Environment(region="us-east-1")),  # account agnostic
    ],
)
def test_other_stacks_of_the_same_or_an_agnostic_environment_are_accepted(
    network_env: cdk.Environment | None, cluster_env: cdk.Environment | None
) -> None:
    app = cdk.App(context=dict(CDK_CONTEXT))
    network = TrainingNetwork(ZonedStack(app, "Network", env=network_env), "Network", availability_zones=AZS)
    stack = ZonedStack(app, "Cluster", env=cluster_env)
    fs = SharedLustre(stack, "Fsx", vpc=network.vpc, subnet=network.placement_subnet())
    BUILDERS["HyperPodCluster"](stack, network)
    app.synth()
    assert fs.file_system_id


# --------------------------------------------------------------------------------------------------
# 4. a role passed in gets what the nodes need


def _statements(template: dict[str, Any], policy_prefix: str) -> list[tuple[frozenset[str], frozenset[str]]]:
    """(actions, resources) of each statement of the policies whose logical id starts with ``policy_prefix``,
    resources as JSON (tokens included)."""
    found = []
    for logical_id, policy in _resources(template, "AWS::IAM::Policy").items():
        if not logical_id.startswith(policy_prefix):
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions, resources = statement["Action"], statement["Resource"]
            actions = actions if isinstance(actions, list) else [actions]
            resources = resources if isinstance(resources, list) else [resources]
            found.append((frozenset(actions), frozenset(json.dumps(r, sort_keys=True) for r in resources)))
    return found


def _team_with_role(
    role_of: Callable[[cdk.Stack], iam.IRole], *, security_bucket: bool = True
) -> tuple[cdk.App, cdk.Stack, HyperPodCluster]:
    app = cdk.App(context=dict(CDK_CONTEXT))
    security = ZonedStack(app, "Security", env=NETWORK_ENV)
    key = kms.Key(security, "Key", enable_key_rotation=True)
    bucket = s3.Bucket(
        security, "Lifecycle", bucket_name="sagemaker-team-lifecycle", encryption_key=key, enforce_ssl=True
    )
    role = role_of(security)
    stack = ZonedStack(app, "Cluster", env=NETWORK_ENV)
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    database = SlurmAccountingDatabase(stack, "Db", vpc=network.vpc)
    cluster = HyperPodCluster(
        stack,
        "HyperPod",
        cluster_name="team",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=GROUPS,
        bucket=bucket if security_bucket else None,
        role=role,
        accounting=database,
        slurm_config="legacy",  # our slurmdbd on the controller: an external database, all-or-nothing
    )
    return app, stack, cluster


def _sagemaker_role(scope: cdk.Stack) -> iam.IRole:
    return iam.Role(scope, "NodeRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))


def test_a_passed_role_reads_the_lifecycle_prefix_decrypts_with_its_key_and_reads_the_secret() -> None:
    _, stack, cluster = _team_with_role(_sagemaker_role)
    template = cdk.assertions.Template.from_stack(stack).to_json()
    security = cdk.Stack.of(cluster.bucket)
    exports = {
        json.dumps(output["Value"]): output["Export"]["Name"]
        for output in cdk.assertions.Template.from_stack(security).to_json()["Outputs"].values()
    }

    def imported(construct: Any) -> dict[str, str]:
        arn = {"Fn::GetAtt": [security.get_logical_id(construct.node.default_child), "Arn"]}
        return {"Fn::ImportValue": exports[json.dumps(arn)]}

    bucket_arn, key_arn = imported(cluster.bucket), imported(cluster.bucket.encryption_key)
    prefix_objects = {"Fn::Join": ["", [bucket_arn, "/lifecycle/team/*"]]}
    assert _statements(template, "HyperPodLifecycleRead") == [
        (
            frozenset({"s3:GetObject*", "s3:GetBucket*", "s3:List*"}),
            frozenset(json.dumps(r, sort_keys=True) for r in (bucket_arn, prefix_objects)),
        ),
        (frozenset({"kms:Decrypt"}), frozenset({json.dumps(key_arn, sort_keys=True)})),
    ]
    secret = stack.resolve(cluster.accounting_database.slurmdbd_secret.secret_arn)  # type: ignore[union-attr]
    assert _statements(template, "HyperPodAccountingSecretRead") == [
        (frozenset({"secretsmanager:GetSecretValue"}), frozenset({json.dumps(secret, sort_keys=True)}))
    ]
    # attached by this stack's policies: the security stack does not come to depend on the cluster's
    assert cdk.Stack.of(cluster.role).dependencies == []


def test_a_role_made_here_gets_no_second_lifecycle_policy() -> None:
    app = cdk.App(context=dict(CDK_CONTEXT))
    stack = ZonedStack(app, "Cluster", env=NETWORK_ENV)
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    BUILDERS["HyperPodCluster"](stack, network)
    assert _statements(cdk.assertions.Template.from_stack(stack).to_json(), "BuiltLifecycleRead") == []


@pytest.mark.parametrize(
    "immutable",
    [
        lambda s: iam.Role.from_role_arn(s, "NodeRole", f"arn:aws:iam::{ACCOUNT_A}:role/node", mutable=False),
        lambda s: _sagemaker_role(s).without_policy_updates(),
    ],
    ids=["from_role_arn", "without_policy_updates"],
)
def test_an_immutable_role_gets_nothing_and_a_warning_lists_what_it_must_carry(
    immutable: Callable[[cdk.Stack], iam.IRole],
) -> None:
    from training_clusters.constructs.private.grants import IMMUTABLE_ROLE_WARNING

    _, stack, cluster = _team_with_role(immutable)
    template = cdk.assertions.Template.from_stack(stack).to_json()
    granted = [
        logical_id
        for logical_id in _resources(template, "AWS::IAM::Policy")
        if logical_id.startswith(("HyperPodLifecycleRead", "HyperPodAccountingSecretRead"))
    ]
    assert granted == []
    warnings = [
        entry.data
        for entry in cluster.node.metadata
        if entry.type == "aws:cdk:warning" and IMMUTABLE_ROLE_WARNING in str(entry.data)
    ]
    assert len(warnings) == 2
    assert all(f"the role {cluster.role.node.path} is immutable" in str(w) for w in warnings)
    assert any('"s3:GetObject*"' in str(w) and '"kms:Decrypt"' in str(w) for w in warnings)
    assert any('"secretsmanager:GetSecretValue"' in str(w) for w in warnings)


def test_a_mutable_imported_role_is_granted() -> None:
    from training_clusters.constructs.private.grants import is_immutable

    stack = cdk.Stack(cdk.App(), "S", env=NETWORK_ENV)
    mutable = iam.Role.from_role_arn(stack, "Mutable", f"arn:aws:iam::{ACCOUNT_A}:role/node")
    other_account = iam.Role.from_role_arn(stack, "Foreign", f"arn:aws:iam::{ACCOUNT_B}:role/node")
    assert not is_immutable(mutable)
    assert is_immutable(other_account)  # aws-cdk-lib never changes a role of another account
    assert not is_immutable(_sagemaker_role(stack))


def test_the_passed_roles_policies_leave_no_cdk_nag_finding() -> None:
    """With the cluster's own lifecycle bucket: a bucket of another stack is known to cdk-nag by the name of
    CDK's export, made only at synth, so its prefix's wildcard cannot be acknowledged by name when built."""
    from training_clusters.gates.compliance import add_compliance_checks, synth_with_checks

    app, _, cluster = _team_with_role(_sagemaker_role, security_bucket=False)
    add_compliance_checks(app, nist=False)
    _, findings = synth_with_checks(app)
    paths = ("Cluster/HyperPod/LifecycleRead", "Cluster/HyperPod/AccountingSecretRead")
    assert [str(f) for f in findings if f.construct_path.startswith(paths)] == []
    assert cluster.node.try_find_child("LifecycleRead") is not None


# --------------------------------------------------------------------------------------------------
# every path that couples two constructs refuses another environment, naming both


def _storage_and_cluster(
    storage_env: cdk.Environment | None, cluster_env: cdk.Environment | None
) -> tuple[cdk.App, SharedLustre, cdk.Stack, TrainingNetwork]:
    """A file system in stack Storage and a network in stack Cluster (each with its own VPC)."""
    app = cdk.App(context=dict(CDK_CONTEXT))
    storage = ZonedStack(app, "Storage", env=storage_env)
    fs = SharedLustre(
        storage,
        "Fsx",
        vpc=(home := TrainingNetwork(storage, "Network", availability_zones=AZS)).vpc,
        subnet=home.placement_subnet(),
    )
    cluster = ZonedStack(app, "Cluster", env=cluster_env)
    return app, fs, cluster, TrainingNetwork(cluster, "Network", availability_zones=AZS)


def _hyperpod(stack: cdk.Stack, network: TrainingNetwork, **props: Any) -> HyperPodCluster:
    return HyperPodCluster(
        stack,
        "HyperPod",
        cluster_name="coupled",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=GROUPS,
        **props,
    )


def _tail(other: cdk.Environment, difference: str) -> str:
    return (
        f"(account {ACCOUNT_A}, region us-east-1), but this construct's stack Cluster is in account "
        f"{other.account}, region {other.region}: a stack cannot use a resource of another {difference}; build it "
        "in this stack's environment, or import it there (e.g. ec2.Vpc.from_lookup in this stack)"
    )


@pytest.mark.parametrize("difference", ["account", "region"])
def test_a_file_system_refuses_clients_of_another_environment(difference: str) -> None:
    _, fs, cluster_stack, network = _storage_and_cluster(NETWORK_ENV, ELSEWHERE[difference])
    cluster = _hyperpod(cluster_stack, network)
    before = {c.node.path for c in [*cdk.Stack.of(fs).node.find_all(), *cluster_stack.node.find_all()]}
    with pytest.raises(ConfigurationError) as raised:
        fs.allow_clients_from(cluster)
    other = ELSEWHERE[difference]
    assert str(raised.value) == (
        f"Storage/Fsx: allow_clients_from.clients is in stack Cluster (account {other.account}, region "
        f"{other.region}), but this construct's stack Storage is in account {ACCOUNT_A}, region us-east-1: a stack "
        f"cannot use a resource of another {difference}; build it in this stack's environment, or import it there "
        "(e.g. ec2.Vpc.from_lookup in this stack)"
    )
    after = {c.node.path for c in [*cdk.Stack.of(fs).node.find_all(), *cluster_stack.node.find_all()]}
    assert after == before  # refused before any rule was written, on either side


@pytest.mark.parametrize("difference", ["account", "region"])
def test_a_mount_built_from_another_environment_s_file_system_is_refused(difference: str) -> None:
    """``LustreMount(dns_name=fs.dns_name, ...)``: the values carry the file system's attributes."""
    from training_clusters.constructs import LustreMount

    _, fs, cluster_stack, network = _storage_and_cluster(NETWORK_ENV, ELSEWHERE[difference])
    with pytest.raises(ConfigurationError) as raised:
        _hyperpod(cluster_stack, network, lustre=LustreMount(dns_name=fs.dns_name, mount_name=fs.mount_name))
    assert str(raised.value) == (
        "Cluster/HyperPod: lustre.dns_name takes a value of Storage/Fsx/Resource/Resource, which is in stack Storage "
        + _tail(ELSEWHERE[difference], difference)
    )


def test_a_value_of_another_environment_inside_a_function_or_a_string_is_found_too() -> None:
    from training_clusters.constructs import LustreMount

    _, fs, cluster_stack, network = _storage_and_cluster(NETWORK_ENV, ELSEWHERE["account"])
    joined = cdk.Fn.join(
        "", [cdk.Fn.select(0, cdk.Fn.split(".", fs.dns_name)), ".fsx.us-east-1.amazonaws.com"]
    )
    for dns_name in (joined, f"{fs.file_system_id}.fsx.us-east-1.amazonaws.com"):
        with pytest.raises(
            ConfigurationError, match=r"lustre\.dns_name takes a value of Storage/Fsx/Resource/Resource, "
        ):
            _hyperpod(cluster_stack, network, lustre=LustreMount(dns_name=dns_name, mount_name="abcdefgh"))


@pytest.mark.parametrize("difference", ["account", "region"])
def test_connections_refuse_a_peer_of_another_environment_from_either_side(difference: str) -> None:
    """Ours and theirs: the file system's (rules in the clients' stack), a cluster's (CDK's placement)."""
    _, fs, cluster_stack, network = _storage_and_cluster(NETWORK_ENV, ELSEWHERE[difference])
    cluster = _hyperpod(cluster_stack, network)
    calls: list[tuple[str, Callable[[], None]]] = [
        ("Storage/Fsx", lambda: fs.connections.allow_default_port_from(cluster)),
        ("Storage/Fsx", lambda: fs.connections.allow_to(cluster, ec2.Port.tcp(988))),
        ("Cluster/HyperPod", lambda: cluster.connections.allow_from(fs, ec2.Port.tcp(988))),
        ("Cluster/HyperPod", lambda: cluster.connections.allow_default_port_to(fs)),
    ]
    for owner, call in calls:
        with pytest.raises(ConfigurationError) as raised:
            call()
        assert str(raised.value).startswith(f"{owner}: connections is in stack ")
        assert str(raised.value).endswith(
            f"a stack cannot use a resource of another {difference}; build it in this "
            "stack's environment, or import it there (e.g. ec2.Vpc.from_lookup in this stack)"
        )


@pytest.mark.parametrize(
    ("storage_env", "cluster_env"),
    [
        (NETWORK_ENV, NETWORK_ENV),  # the same environment, two stacks
        (None, None),  # both environment-agnostic: deployed together, into the credentials' environment
        (cdk.Environment(region="us-east-1"), cdk.Environment(region="us-east-1")),  # account-agnostic
    ],
)
def test_every_coupling_path_accepts_the_same_or_an_agnostic_environment(
    storage_env: cdk.Environment | None, cluster_env: cdk.Environment | None
) -> None:
    from training_clusters.constructs import LustreMount

    app, fs, cluster_stack, network = _storage_and_cluster(storage_env, cluster_env)
    cluster = _hyperpod(
        cluster_stack, network, lustre=LustreMount(dns_name=fs.dns_name, mount_name=fs.mount_name)
    )
    fs.allow_clients_from(cluster)
    cluster.connections.allow_to(fs, ec2.Port.tcp(988))
    app.synth()
    rules = _resources(
        cdk.assertions.Template.from_stack(cluster_stack).to_json(), "AWS::EC2::SecurityGroupIngress"
    )
    assert {r["Properties"].get("FromPort") for r in rules.values()} >= {988, 1018}  # in the clients' stack
