"""ParallelCluster's network topology: the head node's topology step, its scoped permission and Slurm's plugin,
on the queues EC2 instance topology places, and nothing where it does not."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match, Template

from training_clusters.constructs.parallelcluster.cluster import (
    TOPOLOGY_CONF,
    ComputeResource,
    HeadNode,
    ParallelCluster,
    SlurmQueue,
    SlurmSettings,
    TopologyStep,
)
from training_clusters.model.errors import ConfigurationError

from ..assertions import allow, policy_statements
from ..conftest import GatedStacks, gated_stack
from ..pcluster_schema import pcluster_python
from .test_parallelcluster import C5N, P5, Parts, _logical_id, resolved
from .test_session_manager import acknowledged_rules

TRN2 = ComputeResource(name="trn2", instance_type="trn2.48xlarge", min_count=2, max_count=3)
SCRIPT_URL = "s3://my-scripts/parallelcluster-actions/topology.sh"
MODULE_URL = "s3://my-scripts/parallelcluster-actions/topology.py"


def step(stack: cdk.Stack) -> TopologyStep:
    bucket = s3.Bucket.from_bucket_name(stack, "Scripts", "my-scripts")
    return TopologyStep(
        bucket=bucket,
        script_key="parallelcluster-actions/topology.sh",
        module_key="parallelcluster-actions/topology.py",
    )


@pytest.fixture
def parts(stack: cdk.Stack) -> Parts:
    return Parts(stack)


def topology_cluster(parts: Parts, **props: Any) -> ParallelCluster:
    queues = [
        SlurmQueue(name="gpu", compute_resources=[P5, TRN2]),
        SlurmQueue(name="cpu", compute_resources=[C5N]),
        SlurmQueue(
            name="mixed", compute_resources=[ComputeResource(name="p5b", instance_type="p5.48xlarge"), C5N]
        ),
    ]
    return parts.cluster(queues=queues, topology=step(parts.stack), **props)


def test_the_head_node_writes_topology_conf_before_slurmctld_starts_and_keeps_it_current(
    parts: Parts,
) -> None:
    cluster = topology_cluster(parts, head_node=HeadNode(on_node_start=[]))
    assert cluster.topology_queues == ["gpu"]
    head = resolved(cluster)["HeadNode"]
    assert head["CustomActions"] == {
        "OnNodeStart": {
            "Script": SCRIPT_URL,
            "Args": [
                MODULE_URL, "us-east-1", "initial", "--conf", "/opt/slurm/etc/topology.conf", "--nodes",
                "gpu-dy-p5-[1-4]", "gpu-st-trn2-[1-2]", "gpu-dy-trn2-1", "cpu-dy-c5n-[1-2]",
                "mixed-dy-p5b-[1-10]", "mixed-dy-c5n-[1-2]",
            ],
        },
        "OnNodeConfigured": {
            "Script": SCRIPT_URL,
            "Args": [
                MODULE_URL, "us-east-1", "install", "--conf", "/opt/slurm/etc/topology.conf",
                "--cluster-name", "training", "--partition", "gpu",
            ],
        },
    }  # fmt: skip
    assert TOPOLOGY_CONF == "/opt/slurm/etc/topology.conf"
    assert head["Iam"]["S3Access"] == [
        {"BucketName": "my-scripts", "KeyName": "parallelcluster-actions/topology.sh"},
        {"BucketName": "my-scripts", "KeyName": "parallelcluster-actions/topology.py"},
    ]


def test_the_head_node_alone_may_describe_instance_topology_in_its_region(parts: Parts) -> None:
    cluster = topology_cluster(parts)
    assert cluster.topology_policy is not None
    config = resolved(cluster)
    topology = {"Policy": {"Ref": _logical_id(cluster.topology_policy)}}
    session = {"Policy": {"Ref": _logical_id(cluster.session_manager_policy)}}
    assert config["HeadNode"]["Iam"]["AdditionalIamPolicies"] == [session, topology]
    for queue in config["Scheduling"]["SlurmQueues"]:
        assert "Iam" not in queue and "CustomActions" not in queue
    template = Template.from_stack(parts.stack).to_json()
    properties = template["Resources"][_logical_id(cluster.topology_policy)]["Properties"]
    assert properties["Path"] == "/parallelcluster/"
    assert policy_statements(template, _logical_id(cluster.topology_policy)) == [
        allow({"ec2:DescribeInstanceTopology"}, ["*"], {"StringEquals": {"ec2:Region": "us-east-1"}})
    ]


def test_slurm_gets_the_tree_plugin_after_the_users_own_settings(parts: Parts) -> None:
    settings = SlurmSettings(custom_slurm_settings=[{"PriorityType": "priority/multifactor"}])
    cluster = topology_cluster(parts, slurm_settings=settings)
    assert resolved(cluster)["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"] == [
        {"PriorityType": "priority/multifactor"},
        {"TopologyPlugin": "topology/tree"},
    ]
    assert cluster.slurm_settings.custom_slurm_settings == [{"PriorityType": "priority/multifactor"}]


def test_a_topology_plugin_of_your_own_contradicts_the_file(parts: Parts) -> None:
    settings = SlurmSettings(custom_slurm_settings=[{"TopologyPlugin": "topology/block"}])
    with pytest.raises(ConfigurationError) as raised:
        topology_cluster(parts, slurm_settings=settings)
    assert str(raised.value) == (
        "Test/Cluster: slurm_settings.custom_slurm_settings[0] must not set TopologyPlugin while topology is tree "
        "(the head node writes topology.conf for topology/tree); set topology to off to choose your own plugin"
    )


def test_without_a_queue_ec2_places_nothing_changes_and_a_warning_says_so(parts: Parts) -> None:
    plain = resolved(parts.cluster())
    mixed = [SlurmQueue(name="mixed", compute_resources=[P5, C5N])]
    app = cdk.App()
    other = Parts(cdk.Stack(app, "Test", env=cdk.Environment(region="us-east-1", account="123456789012")))
    cluster = other.cluster(topology=step(other.stack), queues=mixed)
    assert cluster.topology_queues == [] and cluster.topology_policy is None
    config = resolved(cluster)
    assert "CustomActions" not in config["HeadNode"]
    assert config["HeadNode"]["Iam"] == plain["HeadNode"]["Iam"]
    assert "CustomSlurmSettings" not in config["Scheduling"]["SlurmSettings"]
    assert [
        k for k in Template.from_stack(other.stack).to_json()["Resources"] if "NetworkTopology" in k
    ] == []
    warnings = Annotations.from_stack(other.stack).find_warning("*", Match.string_like_regexp("topology"))
    assert [w.entry.data for w in warnings] == [
        "topology is given, but no queue's instance types are all described by EC2 instance topology (p5, p5e, "
        "p5en, p6, trn2 and the like are): Slurm keeps a flat network and the head node gets no topology step "
        "[ack: training-clusters:topology-off]"
    ]


def test_without_the_step_no_plugin_no_permission(parts: Parts) -> None:
    cluster = parts.cluster(queues=[SlurmQueue(name="gpu", compute_resources=[P5])])
    assert cluster.topology_queues == [] and cluster.topology_policy is None
    config = resolved(cluster)
    assert "CustomActions" not in config["HeadNode"]
    assert "CustomSlurmSettings" not in config["Scheduling"]["SlurmSettings"]


@gated_stack("parallelcluster-topology")
def _gated_topology(stack: cdk.Stack) -> None:
    parts = Parts(stack)
    cluster = topology_cluster(parts)
    parts.fsx.allow_clients_from(cluster)


def test_the_topology_cluster_passes_the_gates(gated_stacks: GatedStacks) -> None:
    gated_stacks.get("parallelcluster-topology").assert_clean()


def test_the_topology_policy_acknowledges_only_its_one_wildcard(gated_stacks: GatedStacks) -> None:
    assembly = gated_stacks.get("parallelcluster-topology").assembly
    assert assembly is not None
    acknowledged = acknowledged_rules(Path(assembly.directory), "Test")
    assert acknowledged["/Test/Cluster/NetworkTopology"] == {"AwsSolutions-IAM5[Resource::*]"}


#: ParallelCluster's own check of cluster-level CustomSlurmSettings (pcluster/config/cluster_config.py registers
#: it with SLURM_SETTINGS_DENY_LIST["SlurmConf"]["Global"]), run in .venv-pcluster.
_PCLUSTER_CUSTOM_SETTINGS_CHECK = """
import json, sys
from pcluster.validators.slurm_settings_validator import (
    SLURM_SETTINGS_DENY_LIST, CustomSlurmSettingLevel, CustomSlurmSettingsValidator,
)
failures = CustomSlurmSettingsValidator().execute(
    custom_settings=json.load(sys.stdin),
    deny_list=SLURM_SETTINGS_DENY_LIST["SlurmConf"]["Global"],
    settings_level=CustomSlurmSettingLevel.SLURM_CONF,
)
print(json.dumps([failure.message for failure in failures]))
"""


@pytest.mark.parametrize(
    ("settings", "failures"),
    [
        ([{"TopologyPlugin": "topology/tree"}], []),
        # what it refuses, so the check is known to run (a slurmctld hook for new nodes would need this one)
        (
            [{"SlurmctldParameters": "reconfig_on_change"}],
            [
                "Using the following custom Slurm settings at SlurmConf level is not allowed: SlurmctldParameters"
            ],
        ),
    ],
)
def test_parallelclusters_own_validator_takes_the_topology_plugin(
    settings: list[dict[str, str]], failures: list[str]
) -> None:
    completed = subprocess.run(
        [str(pcluster_python()), "-c", _PCLUSTER_CUSTOM_SETTINGS_CHECK],
        input=json.dumps(settings),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(completed.stdout) == failures
