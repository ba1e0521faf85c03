"""A platform team's app: one stage per team account, organisation tags and permissions boundaries on each.

Stage ``TeamA`` (account 111111111111) holds a network-and-storage stack and one stack per orchestrator
(ParallelCluster, HyperPod, PCS, EKS); ``cdk.Tags.of(stage)`` adds the organisation's tags and
``iam.PermissionsBoundary.of(stage)`` its boundary, as a platform team does after building everything (CDK
invokes a stage's aspects on their own: an app's aspects stop at a stage). Stage ``TeamB`` (account
444455556666) is bounded by the stage's own ``permissions_boundary`` instead, and adds ParallelCluster and
HyperPod. ``tests/test_platform.py`` synthesizes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from training_clusters.constructs import (
    EfaNodegroup,
    GpuEksCluster,
    HyperPodCluster,
    InstanceGroup,
    LustreMount,
    ParallelCluster,
    PcsCluster,
    PcsComputeNodeGroup,
    SharedLustre,
    SlurmQueue,
    TrainingNetwork,
    TrainingPlacementGroup,
)
from training_clusters.constructs.parallelcluster.cluster import ComputeResource

from .app import AZS, ZonedStack

REGION = "us-east-1"
ACCOUNT_A, ACCOUNT_B = "111111111111", "444455556666"
#: What the organisation tags everything with.
ORG_TAGS = {"org:cost-centre": "ml-research", "org:owner": "platform"}
ORG_BOUNDARY = f"arn:aws:iam::{ACCOUNT_A}:policy/org-boundary"
TEAM_B_BOUNDARY = "team-b-boundary"


@dataclass
class Team:
    """One team's stage: the stacks, and the clusters the tests read."""

    stage: cdk.Stage
    stacks: dict[str, cdk.Stack]
    pcluster: ParallelCluster
    hyperpod: HyperPodCluster
    pcs: PcsCluster | None = None
    eks_nodes: EfaNodegroup | None = None


def shared_layer(stage: cdk.Stage, stacks: dict[str, cdk.Stack]) -> tuple[TrainingNetwork, SharedLustre]:
    stack = stacks["Network"] = ZonedStack(stage, "Network")
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    fs = SharedLustre(stack, "Fsx", vpc=network.vpc, subnet=network.placement_subnet())
    return network, fs


def slurm_clusters(
    stage: cdk.Stage, stacks: dict[str, cdk.Stack], network: TrainingNetwork, fs: SharedLustre
) -> tuple[ParallelCluster, HyperPodCluster]:
    pcluster_stack = stacks["Pcluster"] = ZonedStack(stage, "Pcluster")
    # bounded by the aspect like every role of the app: ParallelCluster's provider cannot bound its own
    provider_role = iam.Role(
        pcluster_stack, "ProviderRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com")
    )
    pcluster = ParallelCluster(
        pcluster_stack,
        "Cluster",
        cluster_name="team-pcluster",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        queues=[
            SlurmQueue(
                name="compute",
                compute_resources=[ComputeResource(name="c5n", instance_type="c5n.9xlarge", max_count=2)],
            )
        ],
        file_system=fs,
        mount_dir="/fsx",
        tags={"team": stage.node.id},
        provider_lambda_role=provider_role,
    )
    fs.allow_clients_from(pcluster)
    hyperpod_stack = stacks["HyperPod"] = ZonedStack(stage, "HyperPod")
    hyperpod = HyperPodCluster(
        hyperpod_stack,
        "Cluster",
        cluster_name="team-hyperpod",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[
            InstanceGroup(name="controller", instance_type="ml.c5.xlarge", role="controller"),
            InstanceGroup(name="workers", instance_type="ml.g5.8xlarge", instance_count=2, partition="gpu"),
        ],
        lustre=LustreMount(dns_name=fs.dns_name, mount_name=fs.mount_name),
    )
    fs.allow_clients_from(hyperpod)
    return pcluster, hyperpod


def build(app: cdk.App) -> dict[str, Team]:
    """Both teams' stages in ``app``, with their aspects applied."""
    teams: dict[str, Team] = {}

    stage_a = cdk.Stage(app, "TeamA", env=cdk.Environment(account=ACCOUNT_A, region=REGION))
    stacks_a: dict[str, cdk.Stack] = {}
    network, fs = shared_layer(stage_a, stacks_a)
    placement = TrainingPlacementGroup(
        stacks_a["Network"], "PlacementGroup", subnets=[network.placement_subnet()]
    )
    pcluster, hyperpod = slurm_clusters(stage_a, stacks_a, network, fs)
    pcs_stack = stacks_a["Pcs"] = ZonedStack(stage_a, "Pcs")
    pcs = PcsCluster(
        pcs_stack,
        "Cluster",
        cluster_name="team-pcs",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        compute_node_groups=[PcsComputeNodeGroup(name="compute", instance_type="c5n.9xlarge", max_count=2)],
        placement_group=placement,
        efa_security_group=network.add_efa_security_group("PcsEfa"),
        file_system=fs,
        ami_ssm_parameter="/training-clusters/pcs/ami",
    )
    fs.allow_clients_from(pcs)
    eks_stack = stacks_a["Eks"] = ZonedStack(stage_a, "Eks")
    eks = GpuEksCluster(
        eks_stack, "Cluster", vpc=network.vpc, admin_role_arn=f"arn:aws:iam::{ACCOUNT_A}:role/Admin"
    )
    eks_nodes = EfaNodegroup(
        eks_stack,
        "EfaNodes",
        cluster=eks,
        instance_type="g5.8xlarge",
        subnet=network.placement_subnet(),
        placement_group=placement,
        efa_security_group=network.add_efa_security_group("EksEfa"),
        desired_size=1,
    )
    # the organisation's aspects, applied last, as a platform team's app does
    for key, value in ORG_TAGS.items():
        cdk.Tags.of(stage_a).add(key, value)
    boundary = iam.ManagedPolicy.from_managed_policy_arn(stacks_a["Network"], "OrgBoundary", ORG_BOUNDARY)
    iam.PermissionsBoundary.of(stage_a).apply(boundary)
    teams["TeamA"] = Team(stage_a, stacks_a, pcluster, hyperpod, pcs, eks_nodes)

    stage_b = cdk.Stage(
        app,
        "TeamB",
        env=cdk.Environment(account=ACCOUNT_B, region=REGION),
        permissions_boundary=cdk.PermissionsBoundary.from_name(TEAM_B_BOUNDARY),
    )
    stacks_b: dict[str, cdk.Stack] = {}
    network_b, fs_b = shared_layer(stage_b, stacks_b)
    pcluster_b, hyperpod_b = slurm_clusters(stage_b, stacks_b, network_b, fs_b)
    for key, value in ORG_TAGS.items():
        cdk.Tags.of(stage_b).add(key, value)
    teams["TeamB"] = Team(stage_b, stacks_b, pcluster_b, hyperpod_b)
    return teams
