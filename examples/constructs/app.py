#!/usr/bin/env python3
# docs/constructs.md's example ("Use the constructs in your own app"), as a project: `npx cdk synth` here.
# tests/test_example_app.py keeps the two the same and synthesizes this folder with the CDK CLI.
import aws_cdk as cdk

from training_clusters.constructs import (
    ComputeResource,
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
from training_clusters.gates.compliance import add_compliance_checks
from training_clusters.model.capacity import Capacity

env = cdk.Environment(region="us-east-1")
app = cdk.App()
network_stack = cdk.Stack(app, "Network", env=env)
network = TrainingNetwork(network_stack, "Network", availability_zones=["us-east-1a", "us-east-1b"])
placement = TrainingPlacementGroup(network_stack, "PlacementGroup", subnets=[network.placement_subnet()])

storage_stack = cdk.Stack(app, "Storage", env=env)
fs = SharedLustre(
    storage_stack,
    "Fsx",
    vpc=network.vpc,
    subnet=network.placement_subnet(),
    deployment_type="PERSISTENT_2",
    storage_capacity_gib=2400,
    per_unit_storage_throughput_mbps=250,
)

hyperpod = HyperPodCluster(
    cdk.Stack(app, "HyperPod", env=env),
    "Cluster",
    cluster_name="team-hyperpod",
    slurm_config="api",  # HyperPod configures Slurm from the groups; docs/hyperpod-slurm.md
    vpc=network.vpc,
    subnet=network.placement_subnet(),
    instance_groups=[
        InstanceGroup(name="controller", instance_type="ml.c5.xlarge", role="controller"),
        InstanceGroup(
            name="workers",
            instance_type="ml.p5.48xlarge",
            instance_count=2,
            partition="gpu",
            # your SageMaker training plan's ARN (aws sagemaker list-training-plans)
            capacity=Capacity.training_plan("arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"),
        ),
    ],
    lustre=LustreMount(dns_name=fs.dns_name, mount_name=fs.mount_name),
    additional_security_groups=[network.efa_security_group],
)
pcluster = ParallelCluster(
    cdk.Stack(app, "Pcluster", env=env),
    "Cluster",
    cluster_name="team-pcluster",
    vpc=network.vpc,
    subnet=network.placement_subnet(),
    placement_group=placement,
    efa_security_group=network.add_efa_security_group("PclusterEfa"),  # each cluster its own EFA group
    file_system=fs,
    mount_dir="/fsx",
    queues=[
        SlurmQueue(
            name="efa",
            compute_resources=[ComputeResource(name="c5n", instance_type="c5n.18xlarge", max_count=4)],
        )
    ],
)
eks_stack = cdk.Stack(app, "Eks", env=env)
eks = GpuEksCluster(
    eks_stack, "Cluster", vpc=network.vpc, admin_role_arn="arn:aws:iam::111122223333:role/Admin"
)
EfaNodegroup(
    eks_stack,
    "P5",
    cluster=eks,
    instance_type="p5.48xlarge",
    desired_size=2,
    subnet=network.placement_subnet(),
    placement_group=placement,
    efa_security_group=network.add_efa_security_group("EksEfa"),
)
FsxCsiDriver(eks_stack, "Fsx", cluster=eks, storage=fs)  # PVC fsx-lustre: teams/default
for cluster in (hyperpod, pcluster, eks):
    fs.allow_clients_from(cluster)  # the rules land in each cluster's stack: no dependency cycle

add_compliance_checks(app)  # synth fails on any unacknowledged cdk-nag finding
app.synth()
