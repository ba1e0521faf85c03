"""What a construct under test stands on: a Slurm cluster's network, placement group and FSx for Lustre in one
test stack, or a storage stack whose resources a cluster stack uses."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2

from training_clusters.constructs.common.lustre import SharedLustre
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.common.placement import TrainingPlacementGroup

from ..conftest import AZS, REGION, PinnedStack


class SharedLayer:
    """The network, placement group and file system a cluster stands on, in one test stack."""

    def __init__(self, stack: cdk.Stack) -> None:
        self.stack = stack
        self.network = TrainingNetwork(stack, "Network", availability_zones=AZS)
        self.placement = TrainingPlacementGroup(stack, "PlacementGroup")
        self.fsx = SharedLustre(stack, "Fsx", vpc=self.network.vpc, subnet=self.network.placement_subnet())


class StorageAndCluster:
    """A team's layout in two stacks: the network (and what a test adds) in ``storage``, and a client security
    group of a cluster in ``cluster``, which uses the storage stack."""

    def __init__(self) -> None:
        self.app = cdk.App()
        self.storage = PinnedStack(self.app, "Storage", env=cdk.Environment(region=REGION))
        self.network = TrainingNetwork(self.storage, "Network", availability_zones=AZS)
        self.cluster = PinnedStack(self.app, "Cluster", env=cdk.Environment(region=REGION))
        self.client = ec2.SecurityGroup(
            self.cluster, "Client", vpc=self.network.vpc, allow_all_outbound=False
        )
