"""A platform team's own multi-stack CDK app, written against the public API only.

The layout is the one a team would build and none of our shipped environments uses: a network stack, a
shared storage stack, and one stack per orchestrator, each a client of the shared file system; plus a plain
``ec2.Vpc`` owned by one stack and adopted by two others, and a VPC imported by attributes. The suite
synthesizes it in-process (``tests/test_composition.py``) and, from the built wheel in a fresh virtual
environment, through the CDK CLI (``tests/packaging/test_wheel.py``).

Run it yourself: ``cdk synth --app "python tests/composition/app.py"``.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2

from training_clusters.constructs import (
    EfaNodegroup,
    FsxCsiDriver,
    GpuEksCluster,
    HyperPodCluster,
    InstanceGroup,
    LustreMount,
    ParallelCluster,
    SharedLustre,
    SlurmQueue,
    TrainingNetwork,
    TrainingPlacementGroup,
)
from training_clusters.constructs.parallelcluster.cluster import ComputeResource
from training_clusters.gates.compliance import add_compliance_checks

ENV = cdk.Environment(account="111122223333", region="us-east-1")
AZS = ["us-east-1a", "us-east-1b"]
ADMIN_ROLE = "arn:aws:iam::111122223333:role/PlatformAdmin"


class ZonedStack(cdk.Stack):
    """A stack whose AZs are known, so synth needs no AWS lookup."""

    @property
    def availability_zones(self) -> list[str]:
        return list(AZS)


def build(app: cdk.App) -> dict[str, cdk.Stack]:
    """Add every stack of the layout to ``app``; return them by name."""
    stacks: dict[str, cdk.Stack] = {}

    # --- the shared layer: network and storage, each in its own stack
    network_stack = stacks["Network"] = ZonedStack(app, "Network", env=ENV)
    network = TrainingNetwork(network_stack, "Network", availability_zones=AZS)
    placement = TrainingPlacementGroup(network_stack, "PlacementGroup", subnets=[network.placement_subnet()])

    storage_stack = stacks["Storage"] = ZonedStack(app, "Storage", env=ENV)
    fs = SharedLustre(
        storage_stack,
        "Fsx",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        deployment_type="PERSISTENT_2",  # an option's value as a string is accepted everywhere
        storage_capacity_gib=2400,
        per_unit_storage_throughput_mbps=250,
    )

    # --- one stack per orchestrator, each a Lustre client of the shared file system
    hyperpod_stack = stacks["HyperPod"] = ZonedStack(app, "HyperPod", env=ENV)
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
        additional_security_groups=[network.efa_security_group],
    )
    fs.allow_clients_from(hyperpod)

    pcluster_stack = stacks["Pcluster"] = ZonedStack(app, "Pcluster", env=ENV)
    pcluster = ParallelCluster(
        pcluster_stack,
        "Cluster",
        cluster_name="team-pcluster",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        queues=[
            SlurmQueue(
                name="efa",
                compute_resources=[ComputeResource(name="c5n", instance_type="c5n.18xlarge", max_count=4)],
            )
        ],
        placement_group=placement,
        efa_security_group=network.add_efa_security_group("PclusterEfa"),
        file_system=fs,
        mount_dir="/fsx",
    )
    fs.allow_clients_from(pcluster)

    eks_stack = stacks["Eks"] = ZonedStack(app, "Eks", env=ENV)
    eks = GpuEksCluster(eks_stack, "Cluster", vpc=network.vpc, admin_role_arn=ADMIN_ROLE)
    EfaNodegroup(
        eks_stack,
        "EfaNodes",
        cluster=eks,
        instance_type="g5.8xlarge",
        subnet=network.placement_subnet(),
        placement_group=placement,
        efa_security_group=network.add_efa_security_group("EksEfa"),
        desired_size=2,
    )
    FsxCsiDriver(eks_stack, "Fsx", cluster=eks, storage=fs)
    fs.allow_clients_from(eks)

    # --- a plain VPC owned by one stack, adopted by two others; and a VPC imported by attributes
    owner = stacks["VpcOwner"] = ZonedStack(app, "VpcOwner", env=ENV)
    plain_vpc = ec2.Vpc(owner, "Vpc", availability_zones=AZS, nat_gateways=1)
    plain_vpc.add_flow_log("FlowLog")  # the owner's own VPC, logged as its team's policy wants
    for name in ("AdopterA", "AdopterB"):
        adopter = stacks[name] = ZonedStack(app, name, env=ENV)
        adopted = TrainingNetwork(adopter, "Network", vpc=plain_vpc)
        SharedLustre(
            adopter, "Scratch", vpc=adopted.vpc, subnet=adopted.placement_subnet()
        ).allow_clients_from(adopted)

    importer = stacks["Importer"] = ZonedStack(app, "Importer", env=ENV)
    imported_vpc = ec2.Vpc.from_vpc_attributes(
        importer,
        "ImportedVpc",
        vpc_id="vpc-0123456789abcdef0",
        vpc_cidr_block="10.20.0.0/16",
        availability_zones=AZS,
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
        private_subnet_route_table_ids=["rtb-0123456789abcdef0", "rtb-0123456789abcdef1"],
    )
    imported = TrainingNetwork(importer, "Network", vpc=imported_vpc)
    SharedLustre(
        importer, "Scratch", vpc=imported.vpc, subnet=imported.placement_subnet()
    ).allow_clients_from(imported)
    return stacks


if __name__ == "__main__":
    downstream = cdk.App()
    build(downstream)
    add_compliance_checks(downstream)
    downstream.synth()
