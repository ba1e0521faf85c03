"""The environment-file model applies the rules the constructs apply (``training_clusters/rules/``), so a
mistake the constructs would refuse at build time is refused while the file loads, at its own field: each
rule here on both sides of its boundary, as a file writes it."""

from __future__ import annotations

from typing import Any

import pytest

from training_clusters.config import parse_environment
from training_clusters.model.errors import ConfigurationError

MINIMAL: dict[str, Any] = {"region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"]}


def problem(document: dict[str, Any]) -> str:
    """The one problem of ``document``: ``field: message``."""
    with pytest.raises(ConfigurationError) as raised:
        parse_environment(document)
    first, *rest = str(raised.value).splitlines()
    assert first == "<environment>: 1 problem(s)", str(raised.value)
    return rest[0].strip()


# --------------------------------------------------------------------------------------------------
# network.placement_group


@pytest.mark.parametrize(
    ("group", "partitions"),
    [({"strategy": "partition", "partitions": 7}, 7), ({"strategy": "cluster"}, None), ({}, None)],
)
def test_partitions_are_accepted_with_the_partition_strategy(
    group: dict[str, Any], partitions: int | None
) -> None:
    environment = parse_environment({**MINIMAL, "network": {"placement_group": group}})
    assert environment.network.placement_group.partitions == partitions


@pytest.mark.parametrize("strategy", ["cluster", "spread"])
def test_partitions_with_another_strategy_are_refused_at_the_field(strategy: str) -> None:
    group = {"strategy": strategy, "partitions": 2}
    assert problem({**MINIMAL, "network": {"placement_group": group}}) == (
        "network.placement_group.partitions: applies to the PARTITION strategy only, "
        f"got 2 with {strategy.upper()}"
    )


# --------------------------------------------------------------------------------------------------
# hyperpod and hyperpod_eks instance groups

CONTROLLER = {"name": "controller", "instance_type": "ml.c5.xlarge", "role": "controller"}
WORKER = {"name": "workers", "instance_type": "ml.g5.8xlarge", "partition": "dev"}


def hyperpod(*groups: dict[str, Any]) -> dict[str, Any]:
    return {**MINIMAL, "hyperpod": {"cluster_name": "ml", "instance_groups": list(groups)}}


def hyperpod_eks(group: dict[str, Any]) -> dict[str, Any]:
    group = {"name": "g5", "instance_type": "ml.g5.8xlarge", "volume_gib": 500, **group}
    return {**MINIMAL, "hyperpod_eks": {"cluster_name": "ml", "instance_groups": [group]}}


@pytest.mark.parametrize(
    "worker",
    [
        {"threads_per_core": 2},
        {"root_volume_gib": 100},
        {"root_volume_gib": 16384},
        {"extra_volume_gib": 1},
        {"extra_volume_gib": 16384},
        {"deep_health_checks": ["InstanceStress"]},
    ],
)
def test_a_hyperpod_group_at_its_limits_loads(worker: dict[str, Any]) -> None:
    parse_environment(hyperpod(CONTROLLER, {**WORKER, **worker}))


@pytest.mark.parametrize(
    ("worker", "message"),
    [
        ({"threads_per_core": 3}, "threads_per_core: must be 1 or 2, got 3"),
        (
            {"root_volume_gib": 99},
            "root_volume_gib: must be between 100 (HyperPod's root volume) and 16384, got 99",
        ),
        ({"extra_volume_gib": 0}, "extra_volume_gib: must be between 1 and 16384, got 0"),
        ({"extra_volume_gib": 16385}, "extra_volume_gib: must be between 1 and 16384, got 16385"),
        (
            {"instance_type": "ml.c5.xlarge", "deep_health_checks": ["InstanceStress"]},
            "deep_health_checks: run on GPU and Trainium instances only, got ml.c5.xlarge",
        ),
    ],
)
def test_a_hyperpod_group_past_its_limits_is_refused_at_the_field(
    worker: dict[str, Any], message: str
) -> None:
    assert problem(hyperpod(CONTROLLER, {**WORKER, **worker})) == f"hyperpod.instance_groups.1.{message}"


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ([WORKER], "instance_groups: need exactly one CONTROLLER group under Slurm, got 0 (none)"),
        (
            [CONTROLLER, {**CONTROLLER, "name": "c2"}, WORKER],
            "instance_groups: need exactly one CONTROLLER group under Slurm, got 2 (controller, c2)",
        ),
        (
            [
                CONTROLLER,
                {**CONTROLLER, "name": "l1", "role": "login"},
                {**CONTROLLER, "name": "l2", "role": "login"},
                WORKER,
            ],
            "instance_groups: allow at most one LOGIN group, got 2 (l1, l2)",
        ),
        ([CONTROLLER], "instance_groups: need at least one WORKER group to run jobs, got none"),
        (
            [{**CONTROLLER, "count": 2}, WORKER],
            "instance_groups.0.count: of the CONTROLLER group must be 1, got 2",
        ),
        (
            [CONTROLLER, {**WORKER, "partition": None}],
            "instance_groups.1.partition: is required for WORKER group 'workers'",
        ),
        (
            [{**CONTROLLER, "partition": "dev"}, WORKER],
            "instance_groups.0.partition: applies to WORKER groups only, got 'dev' on CONTROLLER group 'controller'",
        ),
        ([CONTROLLER, WORKER, WORKER], "instance_groups.2.name: 'workers' is used twice"),
    ],
)
def test_the_slurm_groups_are_checked_together(groups: list[dict[str, Any]], message: str) -> None:
    assert problem(hyperpod(*groups)) == f"hyperpod.{message}"


def test_one_controller_one_login_and_workers_load() -> None:
    login = {**CONTROLLER, "name": "login", "role": "login"}
    environment = parse_environment(hyperpod(CONTROLLER, login, WORKER, {**WORKER, "name": "more"}))
    assert environment.hyperpod is not None
    assert [g.name for g in environment.hyperpod.instance_groups] == [
        "controller",
        "login",
        "workers",
        "more",
    ]


@pytest.mark.parametrize(
    "group", [{"threads_per_core": 2}, {"root_volume_gib": 100}, {"deep_health_checks": ["InstanceStress"]}]
)
def test_a_hyperpod_eks_group_at_its_limits_loads(group: dict[str, Any]) -> None:
    parse_environment(hyperpod_eks(group))


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ({"threads_per_core": 0}, "threads_per_core: must be 1 or 2, got 0"),
        (
            {"root_volume_gib": 16385},
            "root_volume_gib: must be between 100 (HyperPod's root volume) and 16384, got 16385",
        ),
        (
            {"instance_type": "ml.m5.2xlarge", "deep_health_checks": ["InstanceConnectivity"]},
            "deep_health_checks: run on GPU and Trainium instances only, got ml.m5.2xlarge",
        ),
    ],
)
def test_a_hyperpod_eks_group_past_its_limits_is_refused_at_the_field(
    group: dict[str, Any], message: str
) -> None:
    assert problem(hyperpod_eks(group)) == f"hyperpod_eks.instance_groups.0.{message}"


# --------------------------------------------------------------------------------------------------
# eks


def test_an_admin_role_arn_loads_and_a_user_arn_is_refused() -> None:
    role = "arn:aws:iam::111122223333:role/Admin"
    environment = parse_environment({**MINIMAL, "eks": {"admin_role_arn": role}})
    assert environment.eks is not None and environment.eks.admin_role_arn == role
    assert problem({**MINIMAL, "eks": {"admin_role_arn": "arn:aws:iam::111122223333:user/alice"}}) == (
        "eks.admin_role_arn: must be an IAM role ARN such as arn:aws:iam::111122223333:role/Admin, "
        "got 'arn:aws:iam::111122223333:user/alice'"
    )


def test_a_gpu_nodegroup_loads_on_a_gpu_type_and_is_refused_on_a_cpu_type() -> None:
    gpu = {"name": "gpu", "instance_type": "g5.2xlarge", "size": 1}
    parse_environment({**MINIMAL, "eks": {"gpu_nodegroups": [gpu]}})
    cpu = {**gpu, "instance_type": "m5.xlarge"}
    assert problem({**MINIMAL, "eks": {"gpu_nodegroups": [cpu]}}) == (
        "eks.gpu_nodegroups.0.instance_type: 'm5.xlarge' has no GPU or Trainium accelerator; use a type such "
        "as g5.2xlarge"
    )


# --------------------------------------------------------------------------------------------------
# what ParallelCluster reserves: its folders under storage.lustre.mount_dir, its tag prefix and tag count

PCLUSTER = {
    "cluster_name": "c5n-training",
    "queues": [
        {
            "name": "compute",
            "compute_resources": [{"name": "c5n", "instance_type": "c5.xlarge", "max_count": 2}],
        }
    ],
}
LUSTRE = {"deployment_type": "SCRATCH_2", "storage_capacity_gib": 1200}


def test_parallelcluster_refuses_its_own_folder_as_the_mount_dir() -> None:
    reserved = {**LUSTRE, "mount_dir": "/opt/parallelcluster"}
    parse_environment({**MINIMAL, "storage": {"lustre": reserved}})  # its folder only with ParallelCluster
    parse_environment(
        {**MINIMAL, "storage": {"lustre": {**LUSTRE, "mount_dir": "/shared"}}, "parallelcluster": PCLUSTER}
    )
    assert problem({**MINIMAL, "storage": {"lustre": reserved}, "parallelcluster": PCLUSTER}) == (
        "storage.lustre.mount_dir: '/opt/parallelcluster' is reserved by the operating system or ParallelCluster; "
        "use e.g. /shared or /fsx"
    )


def test_parallelcluster_refuses_its_tag_prefix() -> None:
    tags = {"parallelcluster:team": "vision"}
    parse_environment({**MINIMAL, "tags": tags})
    parse_environment({**MINIMAL, "tags": {"team": "vision"}, "parallelcluster": PCLUSTER})
    assert problem({**MINIMAL, "tags": tags, "parallelcluster": PCLUSTER}) == (
        "tags: key 'parallelcluster:team' starts with 'parallelcluster:', which ParallelCluster keeps for itself"
    )


def test_parallelcluster_takes_forty_tags_with_the_librarys_own() -> None:
    """project and environment are two of the 40 (cost_centre a third when given)."""
    tags = {f"t{i:02}": "x" for i in range(38)}
    parse_environment({**MINIMAL, "tags": tags, "parallelcluster": PCLUSTER})
    message = problem({**MINIMAL, "tags": tags, "cost_centre": "ml", "parallelcluster": PCLUSTER})
    assert message.startswith(
        "tags: must be at most 40 tags (ParallelCluster keeps 10 of EC2's 50 for its own), got 41: "
    )


def test_ssh_from_a_login_pool_needs_its_key_pair() -> None:
    pool = {"name": "login", "instance_type": "t3.medium", "ssh_allowed_ips": "10.1.0.0/16"}
    parse_environment(
        {**MINIMAL, "parallelcluster": {**PCLUSTER, "login_nodes": [{**pool, "key_name": "ops"}]}}
    )
    assert problem({**MINIMAL, "parallelcluster": {**PCLUSTER, "login_nodes": [pool]}}) == (
        "parallelcluster.login_nodes.0.ssh_allowed_ips: applies only with key_name (without a key pair, use SSM)"
    )


# --------------------------------------------------------------------------------------------------
# storage.lustre root squash


def test_exempt_nids_load_with_root_squash_and_are_refused_at_their_field_without() -> None:
    lustre = {**LUSTRE, "root_squash": True, "root_squash_exempt_nids": ["10.0.1.6@tcp"]}
    parse_environment({**MINIMAL, "storage": {"lustre": lustre}})
    assert problem({**MINIMAL, "storage": {"lustre": {**lustre, "root_squash": False}}}) == (
        "storage.lustre.root_squash_exempt_nids: applies only when root_squash is on"
    )


# --------------------------------------------------------------------------------------------------
# parallelcluster.accounting


@pytest.mark.parametrize(("low", "high"), [(0.5, 256), (2, 2), (1.5, 4)])
def test_accounting_capacity_in_range_loads(low: float, high: float) -> None:
    accounting = {"min_capacity_acu": low, "max_capacity_acu": high}
    parse_environment({**MINIMAL, "parallelcluster": {**PCLUSTER, "accounting": accounting}})


@pytest.mark.parametrize(
    ("accounting", "message"),
    [
        ({"min_capacity_acu": 0}, "min_capacity_acu: must be 0.5 to 256 in steps of 0.5 ACU, got 0"),
        ({"max_capacity_acu": 256.5}, "max_capacity_acu: must be 0.5 to 256 in steps of 0.5 ACU, got 256.5"),
        (
            {"min_capacity_acu": 3, "max_capacity_acu": 2},
            "min_capacity_acu: must not exceed max_capacity_acu (2), got 3",
        ),
    ],
)
def test_accounting_capacity_out_of_range_is_refused_at_the_field(
    accounting: dict[str, Any], message: str
) -> None:
    document = {**MINIMAL, "parallelcluster": {**PCLUSTER, "accounting": accounting}}
    assert problem(document) == f"parallelcluster.accounting.{message}"


# --------------------------------------------------------------------------------------------------
# pcs

PCS = {
    "cluster_name": "training",
    "ami_id": "ami-0123456789abcdef0",
    "compute_node_groups": [{"name": "compute", "instance_type": "c5n.9xlarge", "max_count": 2}],
}


def test_pcs_queues_load_when_omitted_or_given_and_are_refused_empty() -> None:
    parse_environment({**MINIMAL, "pcs": PCS})
    parse_environment(
        {**MINIMAL, "pcs": {**PCS, "queues": [{"name": "batch", "compute_node_groups": ["compute"]}]}}
    )
    assert problem({**MINIMAL, "pcs": {**PCS, "queues": []}}) == (
        "pcs.queues: must hold at least one queue when given; omit it for one per group"
    )


def test_pcs_efa_interfaces_load_with_efa_and_are_refused_without() -> None:
    group = {"name": "compute", "instance_type": "c5n.9xlarge", "max_count": 2, "efa_interfaces": 1}
    parse_environment({**MINIMAL, "pcs": {**PCS, "compute_node_groups": [group]}})
    assert problem({**MINIMAL, "pcs": {**PCS, "compute_node_groups": [{**group, "efa": False}]}}) == (
        "pcs.compute_node_groups.0.efa_interfaces: applies only with EFA, but c5n.9xlarge in 'compute' has EFA off"
    )


# --------------------------------------------------------------------------------------------------
# hyperpod.download_sha256

SLURM_SOURCE = "https://download.schedmd.com/slurm/slurm-24.11.5.tar.bz2"


def test_download_pins_load_and_a_bad_one_is_refused() -> None:
    pins = {SLURM_SOURCE: "0123456789abcdef" * 4}
    document = hyperpod(CONTROLLER, WORKER)
    document["hyperpod"]["download_sha256"] = pins
    parse_environment(document)
    for bad, message in [
        ({SLURM_SOURCE: "abc"}, f"[{SLURM_SOURCE!r}] must be 64 hexadecimal digits, got 'abc'"),
        ({"http://x/y": "0" * 64}, "keys must be https:// URLs without spaces, got 'http://x/y'"),
    ]:
        document = hyperpod(CONTROLLER, WORKER)
        document["hyperpod"]["download_sha256"] = bad
        assert problem(document) == f"hyperpod.download_sha256: {message}"


# --------------------------------------------------------------------------------------------------
# eks.addons and hyperpod_eks.addons


@pytest.mark.parametrize(
    ("monitoring", "loads"),
    [
        ({}, True),
        ({"prometheus": True, "grafana": False}, True),
        ({"prometheus": False, "grafana": False}, True),
        ({"prometheus": False, "grafana": True}, False),
        ({"prometheus": False}, False),  # grafana's default is true
    ],
)
def test_grafana_loads_with_prometheus_and_is_refused_at_its_field_without(
    monitoring: dict[str, Any], loads: bool
) -> None:
    document = {**MINIMAL, "eks": {"addons": {"gpu_monitoring": monitoring}}}
    if loads:
        environment = parse_environment(document)
        assert environment.eks is not None and environment.eks.addons.gpu_monitoring is not None
    else:
        assert problem(document) == (
            "eks.addons.gpu_monitoring.grafana: needs prometheus (Grafana's data source), got prometheus=False"
        )


@pytest.mark.parametrize("section", ["eks", "hyperpod_eks"])
def test_an_fsx_csi_driver_version_in_eks_form_loads_and_another_is_refused(section: str) -> None:
    def document(version: str) -> dict[str, Any]:
        base = hyperpod_eks({}) if section == "hyperpod_eks" else {**MINIMAL, "eks": {}}
        base[section] = {**base[section], "addons": {"fsx_csi_driver_version": version}}
        return base

    environment = parse_environment(document("v1.6.0-eksbuild.1"))
    settings = getattr(environment, section)
    assert settings.addons.fsx_csi_driver_version == "v1.6.0-eksbuild.1"
    assert problem(document("1.6.0")) == (
        f"{section}.addons.fsx_csi_driver_version: must look like v1.6.0-eksbuild.1 "
        "(aws eks describe-addon-versions), got '1.6.0'"
    )
