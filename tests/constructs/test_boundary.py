"""Props are checked at the boundary of every public construct (``@checked_props`` and ``options.Choice``).

* Every option prop (found from the type hints, down into props dataclasses) takes its member or the member's
  value as a string in any case, and builds the same template either way.
* A wrong string or a wrong type is our ``ConfigurationError`` naming the construct path, the prop, the value
  and what is allowed; never an ``AttributeError`` or a jsii trace.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from constructs import Construct

import training_clusters.constructs as package
from training_clusters.constructs import (
    ComputeResource,
    EbsCsiDriver,
    EfaNodegroup,
    GpuEksCluster,
    GpuNodegroup,
    HyperPodCluster,
    InstanceGroup,
    LifecycleOptions,
    LifecycleStep,
    ManagedLustre,
    NvidiaDevicePlugin,
    ParallelCluster,
    SecureBucket,
    SharedLustre,
    SlurmQueue,
    SlurmSettings,
    TrainingNetwork,
    TrainingPlacementGroup,
)
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import (
    Choice,
    RemovalPolicy,
    ResourceSharingStrategy,
    TeamPreemption,
    TopologyPlacement,
)

from ..conftest import AZS, CDK_CONTEXT, REGION, PinnedStack
from .test_hyperpod_eks import build
from .test_hyperpod_eks_autoscaling import G5 as AUTOSCALED_G5
from .test_hyperpod_governance import RESEARCH, governed

ADMIN = "arn:aws:iam::111122223333:role/Admin"
C5N = ComputeResource(name="c5n", instance_type="c5n.18xlarge", max_count=2)
T3 = ComputeResource(name="t3", instance_type="t3.medium", max_count=2)
CONTROLLER = InstanceGroup(name="controller", instance_type="ml.c5.xlarge", role="controller")
WORKERS = InstanceGroup(name="workers", instance_type="ml.g5.8xlarge", partition="gpu")
SPOT = package.Capacity.spot()
RESERVATION = package.Capacity.reservation("cr-0123456789abcdef0")
BLOCK = package.Capacity.capacity_block("cr-0123456789abcdef0")
PLAN = package.Capacity.training_plan("arn:aws:sagemaker:us-east-1:111122223333:training-plan/plan")


# --------------------------------------------------------------------------------------------------
# which props take an option, read from the constructs' own type hints


def _choices_in(hint: Any) -> bool:
    """Whether ``hint`` is an option (or an option or its string, or None)."""
    arms = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    return any(isinstance(a, type) and (issubclass(a, Choice) or a is cdk.RemovalPolicy) for a in arms)


def _option_paths(prefix: str, hint: Any, seen: frozenset[type] = frozenset()) -> Iterator[str]:
    """Prop paths (``queues[].placement``) whose type is an option, through lists and dataclasses."""
    if _choices_in(hint):
        yield prefix
        return
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (list, tuple, collections.abc.Sequence):
        yield from _option_paths(f"{prefix}[]", args[0], seen)
    elif origin in (typing.Union, types.UnionType):
        for arm in args:
            yield from _option_paths(prefix, arm, seen)
    elif isinstance(hint, type) and dataclasses.is_dataclass(hint) and hint not in seen:
        for name, field_hint in typing.get_type_hints(hint).items():
            yield from _option_paths(f"{prefix}.{name}", field_hint, seen | {hint})


def _public_constructs() -> list[type[Construct]]:
    found = []
    for name in package.__all__:
        value = getattr(package, name)
        if isinstance(value, type) and issubclass(value, Construct):
            found.append(value)
    return found


def _discovered() -> set[str]:
    paths = set()
    for cls in _public_constructs():
        init = getattr(cls.__init__, "__wrapped__", cls.__init__)
        for name, hint in typing.get_type_hints(init).items():
            if name != "return":
                paths.update(f"{cls.__name__}.{p}" for p in _option_paths(name, hint))
    return paths


# --------------------------------------------------------------------------------------------------
# each option prop, built with a value given as a member and as a string


Build = Callable[[cdk.Stack, Any], Construct]


def _network(stack: cdk.Stack) -> TrainingNetwork:
    return TrainingNetwork(stack, "Network", availability_zones=AZS)


def _eks(stack: cdk.Stack, **props: Any) -> GpuEksCluster:
    return GpuEksCluster(stack, "Eks", vpc=_network(stack).vpc, admin_role_arn=ADMIN, **props)


def _hyperpod(stack: cdk.Stack, **props: Any) -> HyperPodCluster:
    network = _network(stack)
    props.setdefault("instance_groups", [CONTROLLER, WORKERS])
    return HyperPodCluster(
        stack, "HyperPod", cluster_name="c", vpc=network.vpc, subnet=network.placement_subnet(), **props
    )


EKS_G5 = package.EksInstanceGroup(name="g5", instance_type="ml.g5.8xlarge", instance_count=2, volume_gib=500)


def _hyperpod_eks(stack: cdk.Stack, **props: Any) -> Construct:
    network = _network(stack)
    props.setdefault("instance_groups", [EKS_G5])
    return package.HyperPodEksCluster(  # type: ignore[no-any-return]
        stack,
        "HyperPodEks",
        cluster_name="ml-cluster",
        eks_cluster=GpuEksCluster(
            stack,
            "Eks",
            vpc=network.vpc,
            admin_role_arn=ADMIN,
            access_mode="API_AND_CONFIG_MAP",
            kubernetes_version="1.35",
        ),
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        **props,
    )


def _queues(stack: cdk.Stack, **props: Any) -> Construct:
    cluster = _eks(stack)
    gpu = package.GpuNodegroup(stack, "Gpu", cluster=cluster, instance_type="g5.2xlarge", desired_size=1)
    kueue = package.Kueue(stack, "Kueue", cluster=cluster)
    return package.TrainingQueues(  # type: ignore[no-any-return]
        stack, "Queues", cluster=cluster, kueue=kueue, nodegroups={"gpu": gpu}, cohort="research", **props
    )


def _runtimes(stack: cdk.Stack, **props: Any) -> Construct:
    nodegroup = _efa_nodegroup(stack)
    cluster = stack.node.find_child("Eks")
    trainer = package.KubeflowTrainer(stack, "Trainer", cluster=cluster)
    return package.TrainingRuntimes(  # type: ignore[no-any-return]
        stack, "Runtimes", cluster=cluster, trainer=trainer, nodegroups={"g5": nodegroup}, **props
    )


def _pcluster(stack: cdk.Stack, **props: Any) -> ParallelCluster:
    network = _network(stack)
    props.setdefault("queues", [SlurmQueue(name="q", compute_resources=[T3])])
    return ParallelCluster(
        stack, "Pcluster", cluster_name="team", vpc=network.vpc, subnet=network.placement_subnet(), **props
    )


def _efa_nodegroup(stack: cdk.Stack, **props: Any) -> EfaNodegroup:
    cluster = _eks(stack)
    network = stack.node.find_child("Network")
    assert isinstance(network, TrainingNetwork)
    return EfaNodegroup(
        stack,
        "Efa",
        cluster=cluster,
        instance_type="g5.8xlarge",
        subnet=network.placement_subnet(),
        placement_group=TrainingPlacementGroup(stack, "Pg"),
        efa_security_group=network.efa_security_group,
        desired_size=1,
        **props,
    )


#: prop path -> (build with the value, the member, a string spelling of it)
CASES: dict[str, tuple[Build, Any, str]] = {
    "TrainingPlacementGroup.strategy": (
        lambda s, v: TrainingPlacementGroup(s, "Pg", strategy=v),
        package.PlacementStrategy.SPREAD,
        "Spread",
    ),
    "TrainingPlacementGroup.spread_level": (
        lambda s, v: TrainingPlacementGroup(s, "Pg", strategy="spread", spread_level=v),
        package.SpreadLevel.HOST,
        "HOST",
    ),
    "SharedLustre.deployment_type": (
        lambda s, v: SharedLustre(
            s, "Fsx", vpc=_network(s).vpc, deployment_type=v, per_unit_storage_throughput_mbps=250
        ),
        package.LustreDeploymentType.PERSISTENT_2,
        "persistent-2",
    ),
    "SharedLustre.removal_policy": (
        lambda s, v: SharedLustre(s, "Fsx", vpc=_network(s).vpc, removal_policy=v),
        cdk.RemovalPolicy.DESTROY,
        "destroy",
    ),
    "SlurmAccountingDatabase.removal_policy": (
        lambda s, v: package.SlurmAccountingDatabase(s, "Accounting", vpc=_network(s).vpc, removal_policy=v),
        cdk.RemovalPolicy.DESTROY,
        "destroy",
    ),
    "SecureBucket.removal_policy": (
        lambda s, v: SecureBucket(s, "Bucket", removal_policy=v),
        cdk.RemovalPolicy.DESTROY,
        "Destroy",
    ),
    "HyperPodCluster.node_recovery": (
        lambda s, v: _hyperpod(s, node_recovery=v),
        package.NodeRecovery.NONE,
        "none",
    ),
    "HyperPodCluster.accounting": (
        lambda s, v: _hyperpod(s, accounting=v),
        package.HyperPodAccounting.LOCAL,
        "Local",
    ),
    "HyperPodCluster.node_provisioning_mode": (
        lambda s, v: _hyperpod(s, node_provisioning_mode=v),
        package.NodeProvisioningMode.CONTINUOUS,
        "continuous",
    ),
    "HyperPodCluster.slurm_config": (
        lambda s, v: _hyperpod(s, slurm_config=v),
        package.SlurmConfigMode.LEGACY,
        "Legacy",
    ),
    "HyperPodCluster.slurm_config_strategy": (
        lambda s, v: _hyperpod(s, slurm_config="api", slurm_config_strategy=v),
        package.SlurmConfigStrategy.OVERWRITE,
        "overwrite",
    ),
    "HyperPodCluster.instance_groups[].role": (
        lambda s, v: _hyperpod(s, instance_groups=[dataclasses.replace(CONTROLLER, role=v), WORKERS]),
        package.NodeRole.CONTROLLER,
        "CONTROLLER",
    ),
    "HyperPodCluster.instance_groups[].deep_health_checks[]": (
        lambda s, v: _hyperpod(
            s, instance_groups=[CONTROLLER, dataclasses.replace(WORKERS, deep_health_checks=[v])]
        ),
        package.DeepHealthCheck.INSTANCE_STRESS,
        "instance_stress",
    ),
    "HyperPodCluster.lifecycle.extra_steps[].roles[]": (
        lambda s, v: _hyperpod(
            s,
            lifecycle=LifecycleOptions(
                extra_steps=[LifecycleStep(name="check", script=str(_STEP_SCRIPT), roles=[v])]
            ),
        ),
        package.NodeRole.WORKER,
        "worker",
    ),
    "ParallelCluster.os": (lambda s, v: _pcluster(s, os=v), package.OperatingSystem.UBUNTU2404, "Ubuntu2404"),
    "ParallelCluster.deletion_policy": (
        lambda s, v: _pcluster(s, deletion_policy=v),
        package.DeletionPolicy.RETAIN,
        "retain",
    ),
    "ParallelCluster.queues[].capacity.kind": (
        lambda s, v: _pcluster(
            s,
            queues=[SlurmQueue(name="q", compute_resources=[T3], capacity=dataclasses.replace(SPOT, kind=v))],
        ),
        package.CapacityKind.SPOT,
        "Spot",
    ),
    "ParallelCluster.queues[].compute_resources[].capacity.kind": (
        lambda s, v: _pcluster(
            s,
            queues=[
                SlurmQueue(
                    name="q",
                    compute_resources=[
                        dataclasses.replace(T3, capacity=dataclasses.replace(RESERVATION, kind=v))
                    ],
                )
            ],
        ),
        package.CapacityKind.RESERVATION,
        "RESERVATION",
    ),
    "EfaNodegroup.capacity.kind": (
        lambda s, v: _efa_nodegroup(s, capacity=dataclasses.replace(BLOCK, kind=v)),
        package.CapacityKind.CAPACITY_BLOCK,
        "capacity_block",
    ),
    "GpuNodegroup.capacity.kind": (
        lambda s, v: GpuNodegroup(
            s,
            "Gpu",
            cluster=_eks(s),
            instance_type="g5.2xlarge",
            desired_size=1,
            capacity=dataclasses.replace(SPOT, kind=v),
        ),
        package.CapacityKind.SPOT,
        "spot",
    ),
    "HyperPodCluster.instance_groups[].capacity.kind": (
        lambda s, v: _hyperpod(
            s,
            instance_groups=[
                CONTROLLER,
                dataclasses.replace(WORKERS, capacity=dataclasses.replace(PLAN, kind=v)),
            ],
        ),
        package.CapacityKind.TRAINING_PLAN,
        "training_plan",
    ),
    "ParallelCluster.queues[].placement": (
        lambda s, v: _pcluster(s, queues=[SlurmQueue(name="q", compute_resources=[C5N], placement=v)]),
        package.QueuePlacement.MANAGED,
        "Managed",
    ),
    "ParallelCluster.slurm_settings.queue_update_strategy": (
        lambda s, v: _pcluster(s, slurm_settings=SlurmSettings(queue_update_strategy=v)),
        package.QueueUpdateStrategy.TERMINATE,
        "terminate",
    ),
    "ParallelCluster.managed_file_system.deployment_type": (
        lambda s, v: _pcluster(
            s, managed_file_system=ManagedLustre(deployment_type=v, per_unit_storage_throughput_mbps=125)
        ),
        package.LustreDeploymentType.PERSISTENT_2,
        "persistent_2",
    ),
    "ParallelCluster.managed_file_system.deletion_policy": (
        lambda s, v: _pcluster(s, managed_file_system=ManagedLustre(deletion_policy=v)),
        package.DeletionPolicy.DELETE,
        "DELETE",
    ),
    "GpuEksCluster.access_mode": (
        lambda s, v: _eks(s, access_mode=v),
        package.AccessMode.API_AND_CONFIG_MAP,
        "api-and-config-map",
    ),
    "GpuEksCluster.removal_policy": (
        lambda s, v: _eks(s, removal_policy=v),
        cdk.RemovalPolicy.RETAIN,
        "retain",
    ),
    "EfaNodegroup.efa_interface_type": (
        lambda s, v: _efa_nodegroup(s, efa_interface_type=v),
        package.EfaInterfaceType.EFA_ONLY,
        "EFA_ONLY",
    ),
    "NvidiaDevicePlugin.mig_strategy": (
        lambda s, v: NvidiaDevicePlugin(
            s, "Nvidia", cluster=_eks(s), instance_types=["g5.2xlarge"], mig_strategy=v
        ),
        package.MigStrategy.NONE,
        "None",
    ),
    "GpuMonitoring.mig_strategy": (
        lambda s, v: package.GpuMonitoring(
            s,
            "Monitoring",
            cluster=_eks(s),
            prometheus=False,
            grafana=False,
            mig_layouts={"all-1g.10gb": {"1g.10gb": 7}},
            mig_strategy=v,
        ),
        package.MigStrategy.SINGLE,
        "Single",
    ),
    "HyperPodEksCluster.node_recovery": (
        lambda s, v: _hyperpod_eks(s, node_recovery=v),
        package.NodeRecovery.NONE,
        "none",
    ),
    "HyperPodEksCluster.node_provisioning_mode": (
        lambda s, v: _hyperpod_eks(s, node_provisioning_mode=v),
        package.NodeProvisioningMode.CONTINUOUS,
        "continuous",
    ),
    "HyperPodEksCluster.instance_groups[].deep_health_checks[]": (
        lambda s, v: _hyperpod_eks(s, instance_groups=[dataclasses.replace(EKS_G5, deep_health_checks=[v])]),
        package.DeepHealthCheck.INSTANCE_STRESS,
        "instance_stress",
    ),
    "HyperPodEksCluster.instance_groups[].capacity.kind": (
        lambda s, v: _hyperpod_eks(
            s, instance_groups=[dataclasses.replace(EKS_G5, capacity=dataclasses.replace(PLAN, kind=v))]
        ),
        package.CapacityKind.TRAINING_PLAN,
        "training_plan",
    ),
    "HyperPodEksCluster.autoscaling": (
        lambda s, v: build(s, [AUTOSCALED_G5], autoscaling=v),
        package.AutoScaler.KARPENTER,
        "Karpenter",
    ),
    "HyperPodEksCluster.instance_groups[].efa_interface_type": (
        lambda s, v: _hyperpod_eks(s, instance_groups=[dataclasses.replace(EKS_G5, efa_interface_type=v)]),
        package.EfaInterfaceType.EFA,
        "EFA",
    ),
    "HyperPodTaskGovernance.teams[].sharing": (
        lambda s, v: governed(s, teams=[dataclasses.replace(RESEARCH, sharing=v)]),
        ResourceSharingStrategy.LEND_AND_BORROW,
        "lendandborrow",
    ),
    "HyperPodTaskGovernance.teams[].preempt_team_tasks": (
        lambda s, v: governed(s, teams=[dataclasses.replace(RESEARCH, preempt_team_tasks=v)]),
        TeamPreemption.NEVER,
        "NEVER",
    ),
    "TrainingQueues.within_cluster_queue": (
        lambda s, v: _queues(s, within_cluster_queue=v),
        package.QueuePreemption.LOWER_PRIORITY,
        "lowerpriority",
    ),
    "TrainingQueues.reclaim_within_cohort": (
        lambda s, v: _queues(s, reclaim_within_cohort=v),
        package.QueuePreemption.ANY,
        "any",
    ),
    "TrainingQueues.borrow_within_cohort": (
        lambda s, v: _queues(s, borrow_within_cohort=v, reclaim_within_cohort="Any"),
        package.QueuePreemption.LOWER_PRIORITY,
        "LOWER_PRIORITY",
    ),
    "TrainingQueues.topology": (
        lambda s, v: _queues(s, topology=v),
        TopologyPlacement.OFF,
        "Off",
    ),
    "TrainingRuntimes.topology": (
        lambda s, v: _runtimes(s, topology=v),
        TopologyPlacement.OFF,
        "OFF",
    ),
    "TrainingQueues.pod_security": (
        lambda s, v: _queues(s, pod_security=v),
        package.PodSecurityLevel.RESTRICTED,
        "Restricted",
    ),
    "EbsCsiDriver.removal_policy": (
        lambda s, v: EbsCsiDriver(s, "Ebs", cluster=_eks(s), removal_policy=v),
        cdk.RemovalPolicy.DESTROY,
        "DESTROY",
    ),
    "PcsCluster.size": (lambda s, v: _pcs(s, size=v), package.PcsClusterSize.MEDIUM, "medium"),
    "PcsCluster.slurm_version": (
        lambda s, v: _pcs(s, slurm_version=v),
        package.SlurmVersion.V24_11,
        "v24_11",
    ),
    "PcsCluster.accounting": (
        lambda s, v: _pcs(s, accounting=v),
        package.SlurmAccounting.STANDARD,
        "Standard",
    ),
    "PcsCluster.compute_node_groups[].capacity.kind": (
        lambda s, v: _pcs(
            s,
            compute_node_groups=[
                package.PcsComputeNodeGroup(
                    name="cpu", instance_type="m5.xlarge", capacity=dataclasses.replace(BLOCK, kind=v)
                )
            ],
        ),
        package.CapacityKind.CAPACITY_BLOCK,
        "Capacity-Block",
    ),
}


def _pcs(stack: cdk.Stack, **props: Any) -> Construct:
    network = _network(stack)
    props.setdefault(
        "compute_node_groups", [package.PcsComputeNodeGroup(name="cpu", instance_type="m5.xlarge")]
    )
    return package.PcsCluster(  # type: ignore[no-any-return]
        stack,
        "Pcs",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        ami_id="ami-0123456789abcdef0",
        **props,
    )


_STEP_SCRIPT = Path(__file__).resolve().parent.parent / "lifecycle" / "stubs" / "stub.sh"


def test_every_option_prop_of_every_construct_has_a_case() -> None:
    assert _discovered() == set(CASES)


def _template(build: Build, value: Any) -> dict[str, Any]:
    app = cdk.App(context=dict(CDK_CONTEXT))
    stack = PinnedStack(app, "Test", env=cdk.Environment(region=REGION))
    build(stack, value)
    template: dict[str, Any] = Template.from_stack(stack).to_json()
    return template


@pytest.mark.parametrize("prop", sorted(CASES))
def test_an_option_given_as_a_string_builds_what_its_member_builds(prop: str) -> None:
    build, member, spelling = CASES[prop]
    assert json.dumps(_template(build, spelling), sort_keys=True) == json.dumps(
        _template(build, member), sort_keys=True
    )


@pytest.mark.parametrize("prop", sorted(CASES))
def test_a_wrong_option_string_names_path_prop_value_and_what_is_allowed(prop: str, stack: cdk.Stack) -> None:
    build, member, _ = CASES[prop]
    with pytest.raises(ConfigurationError) as error:
        build(stack, "no-such-choice")
    message = str(error.value)
    assert message.startswith("Test/"), message
    leaf = prop.split(".")[-1].removesuffix("[]")
    assert leaf in message and "'no-such-choice'" in message, message
    allowed = member.value if isinstance(member, Choice) else RemovalPolicy.RETAIN.value
    assert "must be one of" in message and allowed in message, message


# --------------------------------------------------------------------------------------------------
# other wrong types


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda s: SharedLustre(s, "Fsx", vpc=_network(s).vpc, storage_capacity_gib="1200"),
            "Test/Fsx: storage_capacity_gib must be a whole number (or None), got str '1200'",
        ),
        (
            lambda s: SharedLustre(s, "Fsx", vpc="vpc-0123456789abcdef0"),
            "Test/Fsx: vpc must be an IVpc, got str 'vpc-0123456789abcdef0'",
        ),
        (
            lambda s: _hyperpod(s, instance_groups=CONTROLLER),
            "Test/HyperPod: instance_groups must be a list of InstanceGroup, got InstanceGroup InstanceGroup(",
        ),
        (
            lambda s: _hyperpod(
                s, instance_groups=[CONTROLLER, dataclasses.replace(WORKERS, instance_count="2")]
            ),
            "Test/HyperPod: instance_groups[1].instance_count must be a whole number, got str '2'",
        ),
        (
            lambda s: _hyperpod(s, instance_groups=[CONTROLLER, {"name": "w"}]),
            "Test/HyperPod: instance_groups[1] must be an InstanceGroup, got dict",
        ),
        (
            lambda s: _pcluster(s, queues=[SlurmQueue(name="q", compute_resources=[T3])], mount_dir=5),
            "Test/Pcluster: mount_dir must be a string, got int 5",
        ),
        (
            lambda s: TrainingNetwork(s, "Network", endpoint_only="yes"),
            "Test/Network: endpoint_only must be true or false, got str 'yes'",
        ),
        (
            lambda s: TrainingNetwork(s, "Network", availability_zones="us-east-1a"),
            "Test/Network: availability_zones must be a list of strings (or None), got str 'us-east-1a'",
        ),
        # a jsii interface is checked by what it declares: a construct of ours is not its inner resource
        (
            lambda s: SharedLustre(s, "Fsx", vpc=_network(s)),
            "Test/Fsx: vpc must be an IVpc, got a TrainingNetwork, which has no add_client_vpn_endpoint, ",
        ),
        (
            lambda s: _pcluster(
                s, efa_security_group=ec2.CfnSecurityGroup(s, "Group", group_description="EFA")
            ),
            "Test/Pcluster: efa_security_group must be an ISecurityGroup (or None), got a CfnSecurityGroup",
        ),
        (
            lambda s: _hyperpod(s, bucket=SecureBucket(s, "Bucket")),
            "Test/HyperPod: bucket must be an IBucket (or None), got a SecureBucket",
        ),
        (
            lambda s: _hyperpod(s, role=iam.CfnRole(s, "Role", assume_role_policy_document={})),
            "Test/HyperPod: role must be an IRole (or None), got a CfnRole",
        ),
        (
            lambda s: SharedLustre(s, "Fsx", vpc=_network(s).vpc, removal_policy=cdk.RemovalPolicy.SNAPSHOT),
            "Test/Fsx: removal_policy must be one of retain, destroy, got 'SNAPSHOT'",
        ),
    ],
)
def test_a_wrong_type_is_our_error_naming_path_prop_and_value(
    build: Callable[[cdk.Stack], Any], message: str, stack: cdk.Stack
) -> None:
    with pytest.raises(ConfigurationError) as error:
        build(stack)
    assert str(error.value).startswith(message), str(error.value)
