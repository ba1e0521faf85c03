from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

from training_clusters.config import load_environment, parse_environment
from training_clusters.constructs.pcs.cluster import ROOT_DEVICE_LOOKUP_TYPE, node_user_data
from training_clusters.environments import add_environment_config, stack_class
from training_clusters.model.errors import ConfigurationError
from training_clusters.stacks.pcs import PcsEnvironment

from ..assertions import text
from ..conftest import CDK_CONTEXT, EnvironmentGates
from ..constructs.test_pcs import joined_text


def _document(environments_dir: Path, name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((environments_dir / name).read_text())
    return document


def _shipped(gates: EnvironmentGates, path: Path) -> tuple[PcsEnvironment, dict[str, Any]]:
    """A shipped environment and its template, from the session's gated synth (no second synth)."""
    stack, _ = gates.get(path)
    assert isinstance(stack, PcsEnvironment)
    return stack, gates.template(path)


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == kind}


def test_pcs_files_build_the_pcs_stack(environments_dir: Path) -> None:
    for name in ("pcs-c5n.yaml", "pcs-p5.yaml"):
        assert stack_class(load_environment(environments_dir / name)) is PcsEnvironment


def test_c5n_environment_is_the_parallelcluster_c5n_cluster_on_pcs(
    environment_gates: EnvironmentGates, environments_dir: Path
) -> None:
    stack, template = _shipped(environment_gates, environments_dir / "pcs-c5n.yaml")
    (cluster,) = _of_type(template, "AWS::PCS::Cluster").values()
    assert cluster["Name"] == "c5n-training"
    assert cluster["Scheduler"] == {"Type": "SLURM", "Version": "25.11"}
    groups = {g["Name"]: g for g in _of_type(template, "AWS::PCS::ComputeNodeGroup").values()}
    assert set(groups) == {"compute", "login"}
    assert groups["compute"]["InstanceConfigs"] == [{"InstanceType": "c5n.9xlarge"}]
    assert groups["compute"]["ScalingConfiguration"] == {"MinInstanceCount": 0, "MaxInstanceCount": 2}
    assert groups["login"]["InstanceConfigs"] == [{"InstanceType": "t3.medium"}]
    assert stack.cluster.efa_interfaces == {"compute": 1}
    (queue,) = _of_type(template, "AWS::PCS::Queue").values()
    assert queue["Name"] == "compute"
    # the placement subnet: the controller's interface, every node and the file system share it
    subnet = stack.resolve(stack.network.placement_subnet().subnet_id)
    assert cluster["Networking"]["SubnetIds"] == [subnet]
    assert all(g["SubnetIds"] == [subnet] for g in groups.values())
    (fsx,) = _of_type(template, "AWS::FSx::FileSystem").values()
    assert fsx["SubnetIds"] == [subnet]
    assert stack.cluster.mount_dir == "/shared"
    # the AMI comes from the named SSM parameter, read by CloudFormation at deploy time
    parameter = next(
        p for p in template["Parameters"].values() if p.get("Default") == "/training-clusters/pcs/ami"
    )
    assert parameter["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"


def test_p5_environment_has_32_efa_interfaces_accounting_and_fsx_at_fsx(
    environment_gates: EnvironmentGates, environments_dir: Path
) -> None:
    stack, template = _shipped(environment_gates, environments_dir / "pcs-p5.yaml")
    assert stack.cluster.efa_interfaces == {"gpu": 32}
    (cluster,) = _of_type(template, "AWS::PCS::Cluster").values()
    assert cluster["SlurmConfiguration"]["Accounting"] == {"Mode": "STANDARD"}
    assert cluster["SlurmConfiguration"]["ScaleDownIdleTimeInSeconds"] == 1800
    launch_template = template["Resources"][stack.get_logical_id(stack.cluster.launch_templates["gpu"])]
    data = launch_template["Properties"]["LaunchTemplateData"]
    assert len(data["NetworkInterfaces"]) == 32
    assert data["Placement"] == {"GroupName": stack.resolve(stack.placement_group.placement_group_name)}
    assert "mount_dir='/fsx'" in text(data["UserData"]).splitlines()


@pytest.mark.parametrize("name", ["pcs-c5n.yaml", "pcs-p5.yaml"])
def test_pcs_environment_says_how_to_connect_and_mounts_storage_on_every_node(
    environment_gates: EnvironmentGates, environments_dir: Path, name: str
) -> None:
    stack, template = _shipped(environment_gates, environments_dir / name)
    outputs = template["Outputs"]
    assert {"ClusterId", "ClusterArn", "LoginNodeSsmCommand", "NodeSecurityGroupId", "ClusterLogs"} <= set(
        outputs
    )
    login = f"${{{stack.get_logical_id(stack.cluster.login_node_group)}.Id}}"
    region = stack.region
    assert text(outputs["LoginNodeSsmCommand"]["Value"]) == (
        f"aws ssm start-session --region {region} --target $(aws ec2 describe-instances --region {region} "
        f"--filters Name=tag:aws:pcs:compute-node-group-id,Values={login} "
        "Name=instance-state-name,Values=running --query 'Reservations[0].Instances[0].InstanceId' --output text)"
    )
    # every node group's launch template mounts the shared file system
    mount_target = stack.shared_storage.mount_target()
    for group in stack.cluster.launch_templates.values():
        data = template["Resources"][stack.get_logical_id(group)]["Properties"]["LaunchTemplateData"]
        # exactly the metadata guard and the mount part, for this stack's file system at its mount folder
        assert text(data["UserData"]) == text(
            stack.resolve(node_user_data(mount_target, stack.mount_dir or "/fsx"))
        )
    # the nodes are the file system's clients (Lustre port from the node security group)
    nodes = stack.resolve(stack.cluster.node_security_group.security_group_id)
    lustre = [
        r
        for r in _of_type(template, "AWS::EC2::SecurityGroupIngress").values()
        if r.get("SourceSecurityGroupId") == nodes and r.get("FromPort") == 988
    ]
    assert lustre


@pytest.mark.parametrize("name", ["pcs-c5n.yaml", "pcs-p5.yaml"])
def test_every_root_volume_goes_on_the_root_device_of_the_files_ami(
    environment_gates: EnvironmentGates, environments_dir: Path, name: str
) -> None:
    """Whatever AMI the file's SSM parameter holds (Amazon Linux /dev/xvda, Ubuntu or RHEL /dev/sda1), each
    launch template resizes that AMI's own root device and adds no other volume."""
    stack, template = _shipped(environment_gates, environments_dir / name)
    spec = _document(environments_dir, name)["pcs"]
    (parameter,) = [
        k for k, p in template["Parameters"].items() if p.get("Default") == spec["ami_ssm_parameter"]
    ]
    ((lookup_id, lookup),) = [
        (k, r) for k, r in template["Resources"].items() if r["Type"] == ROOT_DEVICE_LOOKUP_TYPE
    ]
    assert json.loads(joined_text(lookup["Properties"]["Create"]))["parameters"] == {
        "ImageIds": [f"<{parameter}>"]
    }
    sizes = {g["name"]: g.get("root_volume_size_gib", 200) for g in spec["compute_node_groups"]}
    sizes[spec["login_nodes"].get("name", "login")] = spec["login_nodes"].get("root_volume_size_gib", 100)
    assert set(sizes) == set(stack.cluster.launch_templates)
    for group, size in sizes.items():
        resource = template["Resources"][stack.get_logical_id(stack.cluster.launch_templates[group])]
        assert resource["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"] == [
            {
                "DeviceName": {"Fn::GetAtt": [lookup_id, "Images.0.RootDeviceName"]},
                "Ebs": {
                    "DeleteOnTermination": True,
                    "Encrypted": True,
                    "VolumeSize": size,
                    "VolumeType": "gp3",
                },
            }
        ], group


def test_a_file_with_two_orchestrators_is_refused(environments_dir: Path) -> None:
    document = _document(environments_dir, "pcs-c5n.yaml")
    document["parallelcluster"] = _document(environments_dir, "parallelcluster-c5n.yaml")["parallelcluster"]
    with pytest.raises(
        ConfigurationError, match="an environment has one orchestrator, got sections parallelcluster, pcs"
    ):
        parse_environment(document)


BLOCK_ID = "cr-0123456789abcdef0"
PLAN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/plan"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda pcs: pcs.update(ami_id="ami-0123456789abcdef0"),
            "pcs: ami_id and ami_ssm_parameter both name the AMI",
        ),
        (
            lambda pcs: pcs["compute_node_groups"][0].update(max_count=40),
            "pcs: size is SMALL, which manages at most 32 nodes, but the node groups' max_count (login nodes "
            "included) add up to 41; use size MEDIUM",
        ),
        (
            lambda pcs: pcs["queues"][0].update(compute_node_groups=["gpu"]),
            "pcs: queues[0].compute_node_groups names 'gpu', which is not a compute node group of the cluster",
        ),
        (
            lambda pcs: pcs["compute_node_groups"][0].update(name="c5"),
            "pcs.compute_node_groups.0.name: must be 3 to 25 characters long, got 'c5' (2)",
        ),
        (
            lambda pcs: pcs["compute_node_groups"][0].update(instance_type="m5.xlarge"),
            "efa is true, but m5.xlarge has no EFA interface",
        ),
        (
            lambda pcs: pcs["compute_node_groups"][0].update(
                capacity={"type": "spot", "reservation_id": "cr-0123456789abcdef0"}
            ),
            "pcs.compute_node_groups.0.capacity: reservation_id does not apply to spot capacity, got "
            "'cr-0123456789abcdef0'",
        ),
        (
            lambda pcs: pcs["compute_node_groups"][0].update(
                capacity={"type": "training-plan", "training_plan_arn": PLAN}
            ),
            "pcs.compute_node_groups.0.capacity: training-plan is not supported by AWS PCS; use on-demand or "
            "spot or reservation or capacity-block",
        ),
        (
            lambda pcs: pcs["compute_node_groups"][0].update(
                purchase_option="spot", capacity={"type": "spot"}
            ),
            "pcs.compute_node_groups.0.purchase_option: was replaced by capacity; write capacity: {type: spot} "
            "instead",
        ),
        (
            lambda pcs: pcs["compute_node_groups"][0].update(
                capacity_reservation_id=BLOCK_ID,
                capacity={"type": "capacity-block", "reservation_id": BLOCK_ID},
            ),
            "pcs.compute_node_groups.0.capacity_reservation_id: was replaced by capacity; write capacity: {type: "
            f"reservation, reservation_id: {BLOCK_ID}}} ({{type: capacity-block, ...}} for a Capacity Block) "
            "instead",
        ),
        (
            lambda pcs: pcs["compute_node_groups"][0].update(capacity={"type": "capacity-block"}),
            "capacity-block capacity needs reservation_id",
        ),
        (lambda pcs: pcs["slurm"].update(version="23.11"), "pcs.slurm.version: must be one of 24.11, 25.05"),
        (
            lambda pcs: pcs["slurm"].update(scale_down_idle_time_seconds=0),
            "pcs.slurm.scale_down_idle_time_seconds: must be between 1 and 10,000,000 seconds, got 0",
        ),
        (lambda pcs: pcs.update(cluster_name="my_cluster"), "pcs.cluster_name: must start with a letter"),
        (
            lambda pcs: pcs["login_nodes"].update(name="compute"),
            "pcs: compute_node_groups names (login_nodes.name included) must be unique, got 'compute'",
        ),
    ],
)
def test_bad_pcs_sections_are_clear_errors(environments_dir: Path, change: Any, message: str) -> None:
    document = copy.deepcopy(_document(environments_dir, "pcs-c5n.yaml"))
    change(document["pcs"])
    with pytest.raises(ConfigurationError) as error:
        parse_environment(document)
    assert message in str(error.value), str(error.value)


def test_queues_default_to_one_per_group_and_login_nodes_can_be_left_out(
    environments_dir: Path, tmp_path: Path
) -> None:
    document = _document(environments_dir, "pcs-c5n.yaml")
    del document["pcs"]["queues"]
    document["pcs"]["login_nodes"] = {"count": 0}
    app = cdk.App(outdir=str(tmp_path), context=dict(CDK_CONTEXT))
    stack = add_environment_config(app, parse_environment(document), "pcs-test")
    assert isinstance(stack, PcsEnvironment)
    template = Template.from_stack(stack).to_json()
    assert [q["Name"] for q in _of_type(template, "AWS::PCS::Queue").values()] == ["compute"]
    assert [g["Name"] for g in _of_type(template, "AWS::PCS::ComputeNodeGroup").values()] == ["compute"]
    assert "LoginNodeSsmCommand" not in template["Outputs"]


def test_a_capacity_block_section_buys_the_block_and_leaves_the_placement_group_out(
    environments_dir: Path, tmp_path: Path
) -> None:
    document = _document(environments_dir, "pcs-p5.yaml")
    document["pcs"]["compute_node_groups"][0]["capacity"] = {
        "type": "capacity-block",
        "reservation_id": BLOCK_ID,
    }
    app = cdk.App(outdir=str(tmp_path), context=dict(CDK_CONTEXT))
    stack = add_environment_config(app, parse_environment(document), "pcs-test")
    template = Template.from_stack(stack).to_json()
    name = document["pcs"]["compute_node_groups"][0]["name"]
    (group,) = [g for g in _of_type(template, "AWS::PCS::ComputeNodeGroup").values() if g["Name"] == name]
    assert group["PurchaseOption"] == "CAPACITY_BLOCK"
    launch_template = template["Resources"][group["CustomLaunchTemplate"]["TemplateId"]["Ref"]]
    data = launch_template["Properties"]["LaunchTemplateData"]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": BLOCK_ID}
    }
    assert "Placement" not in data
