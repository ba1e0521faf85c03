"""What a Slurm cluster construct stands on in a test stack: network, placement group, FSx for Lustre."""

from __future__ import annotations

import aws_cdk as cdk

from training_clusters.constructs.lustre import SharedLustre
from training_clusters.constructs.network import TrainingNetwork
from training_clusters.constructs.placement import TrainingPlacementGroup

from ..conftest import AZS


class SharedLayer:
    """The network, placement group and file system a cluster stands on, in one test stack."""

    def __init__(self, stack: cdk.Stack) -> None:
        self.stack = stack
        self.network = TrainingNetwork(stack, "Network", availability_zones=AZS)
        self.placement = TrainingPlacementGroup(stack, "PlacementGroup")
        self.fsx = SharedLustre(stack, "Fsx", vpc=self.network.vpc, subnet=self.network.placement_subnet())
