"""Defaults the constructs' docstrings state ("Default: ..."), pinned where no other test holds them, so a
changed default fails a test instead of reaching every user who left the prop out."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk.assertions import Template

from training_clusters.constructs.common.network import TrainingNetwork

from ..conftest import AZS


def test_flow_logs_are_kept_one_year_by_default(stack: cdk.Stack) -> None:
    """TrainingNetwork ``flow_logs_retention``: "Default: one year"; the log group is kept with the stack's
    audit data (RETAIN)."""
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    resources = Template.from_stack(stack).to_json()["Resources"]
    group = resources[stack.get_logical_id(network.flow_log_group.node.default_child)]
    assert group["Properties"]["RetentionInDays"] == 365
    assert (group["DeletionPolicy"], group["UpdateReplacePolicy"]) == ("Retain", "Retain")
