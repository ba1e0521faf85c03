"""Every rule in ``training_clusters/rules/`` at both sides of its boundaries (the last value accepted and the
first refused) and with its whole message, free of CDK: the rules ``make mutation`` mutates must fail a test
for any one-line change (a ``<=`` turned ``<``, a limit off by one, a word of a message dropped)."""

from __future__ import annotations

from typing import Any

import pytest

from training_clusters.catalog import CATALOG, lookup
from training_clusters.model.capacity import Capacity
from training_clusters.model.errors import excerpt
from training_clusters.model.options import (
    MigStrategy,
    Mps,
    PcsClusterSize,
    QueuePreemption,
    TimeSlicing,
)
from training_clusters.rules import (
    accounting,
    common,
    downloads,
    eks,
    eks_addons,
    eks_queues,
    hyperpod,
    hyperpod_eks,
    hyperpod_governance,
    logs,
    lustre,
    network,
    pcs,
    placement,
    regions,
    s3,
    tags,
    users,
)
from training_clusters.rules import parallelcluster as pc

# --------------------------------------------------------------------------------------------------
# common


def test_a_value_of_exactly_the_maximum_length_is_accepted_and_one_more_is_refused() -> None:
    import re

    letters = re.compile(r"^[a-z]+$")
    assert common.pattern_problem("abc", letters, "must be letters", max_length=3) is None
    assert (
        common.pattern_problem("abcd", letters, "must be letters", max_length=3)
        == "must be letters, got 'abcd'"
    )
    assert (
        common.pattern_problem("ab1", letters, "must be letters", max_length=3)
        == "must be letters, got 'ab1'"
    )
    # the pattern must match the whole value, not a part of it
    assert (
        common.pattern_problem("abc1", re.compile("[a-z]+"), "must be letters")
        == "must be letters, got 'abc1'"
    )


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        ([], None),
        (["a", "b", "c"], None),
        (["a", "b", "a"], "must be unique, got 'a' more than once"),
        (["a", "b", "a", "a", "b", "c"], "must be unique, got 'a', 'b' more than once"),
    ],
)
def test_duplicates_are_named_once_each_in_order(names: list[str], problem: str | None) -> None:
    assert common.duplicates_problem(names) == problem


@pytest.mark.parametrize(
    ("mount_dir", "problem"),
    [
        ("/usrdata", None),  # beside a system tree, not inside it
        ("/a..b", None),  # dots inside a name are not a '..' segment
        ("/usr/local", "'/usr/local' is reserved by the operating system or Slurm; use e.g. /fsx or /shared"),
        (
            "/opt/slurm/etc",
            "'/opt/slurm/etc' is reserved by the operating system or Slurm; use e.g. /fsx or /shared",
        ),
        ("/shared/..", "must not contain '.' or '..' segments, got '/shared/..'"),
        ("/fsx/.", "must not contain '.' or '..' segments, got '/fsx/.'"),
    ],
)
def test_system_trees_hold_their_subfolders_only(mount_dir: str, problem: str | None) -> None:
    assert common.mount_dir_problem(mount_dir) == problem


def test_the_other_example_is_the_one_not_given() -> None:
    assert (
        common.mount_dir_problem("/etc", example="/shared")
        == "'/etc' is reserved by the operating system or Slurm; use e.g. /shared or /fsx"
    )


# --------------------------------------------------------------------------------------------------
# CloudWatch Logs retention

RETENTIONS = (
    "1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653"
)


@pytest.mark.parametrize("days", [1, 7, 3653])
def test_cloudwatch_retention_periods_are_accepted(days: int) -> None:
    assert logs.cloudwatch_retention_problem(days) is None


@pytest.mark.parametrize("days", [0, 2, 3654])
def test_other_retention_periods_are_refused_with_every_allowed_one(days: int) -> None:
    assert logs.cloudwatch_retention_problem(days) == f"must be one of {RETENTIONS}, got {days}"


# --------------------------------------------------------------------------------------------------
# network


def test_usable_addresses_leave_out_the_five_aws_keeps() -> None:
    assert network.usable_addresses() == 16_379  # the default private /18
    assert network.usable_addresses(24) == 251
    assert network.usable_addresses(28) == 11
    assert network.PRIVATE_SUBNET_MASK == 18 and network.PUBLIC_SUBNET_MASK == 24


_WHY_24 = "each node takes an address in the placement subnet, a private /24 of 251 usable addresses (AWS reserves 5 of every subnet's 256)"
_WHY_18 = "each node takes an address in the placement subnet, a private /18 of 16,379 usable addresses (AWS reserves 5 of every subnet's 16,384)"
_WHY_2X24 = "each node takes an address in the 2 private subnets, /24s of 251 usable addresses each (AWS reserves 5 of every subnet's 256)"


@pytest.mark.parametrize(
    ("args", "kwargs", "problem"),
    [
        ((251, 0), {"mask": 24}, None),
        ((252, 0), {"mask": 24}, f"must be at most 251, got 252: {_WHY_24}"),
        ((200, 51), {"mask": 24}, None),
        (
            (201, 51),
            {"mask": 24},
            f"must be at most 200, got 201: {_WHY_24}, and the other nodes there take 51",
        ),
        ((2, 250), {"mask": 24}, f"must be at most 1, got 2: {_WHY_24}, and the other nodes there take 250"),
        ((1, 251), {"mask": 24}, f"is 1, but the nodes there add up to 252: {_WHY_24}; lower the counts"),
        ((502, 0), {"mask": 24, "subnets": 2}, None),
        ((503, 0), {"mask": 24, "subnets": 2}, f"must be at most 502, got 503: {_WHY_2X24}"),
        ((16_379, 0), {}, None),
        ((16_380, 0), {}, f"must be at most 16,379, got 16380: {_WHY_18}"),
        ((15_379, 1_000), {}, None),
        (
            (15_380, 1_000),
            {},
            f"must be at most 15,379, got 15380: {_WHY_18}, and the other nodes there take 1,000",
        ),
        ((5, 16_379), {}, f"is 5, but the nodes there add up to 16,384: {_WHY_18}; lower the counts"),
    ],
)
def test_nodes_fit_their_subnets_up_to_the_last_address(
    args: tuple[int, int], kwargs: dict[str, int], problem: str | None
) -> None:
    assert network.nodes_fit_problem(*args, **kwargs) == problem


@pytest.mark.parametrize(
    ("cidr", "azs", "mask", "problem"),
    [
        ("10.0.0.0/16", 3, 18, None),
        (
            "10.0.0.0/16",
            4,
            18,
            "'10.0.0.0/16' (65536 addresses) cannot hold 4 private /18 and 4 public /24 subnets; use a larger range or a longer private_subnet_mask",
        ),
        ("10.0.0.0/23", 1, 24, None),  # exactly full: one /24 private, one /24 public
        (
            "10.0.0.0/23",
            2,
            24,
            "'10.0.0.0/23' (512 addresses) cannot hold 2 private /24 and 2 public /24 subnets; use a larger range or a longer private_subnet_mask",
        ),
        ("10.0.0.0/22", 2, 24, None),  # exactly full: two private /24s, two public /24s
        (
            "10.0.0.0/22",
            3,
            24,
            "'10.0.0.0/22' (1024 addresses) cannot hold 3 private /24 and 3 public /24 subnets; use a larger range or a longer private_subnet_mask",
        ),
        (  # a public subnet is a /24 (256 addresses) whatever the private mask: it alone fills a /24 range
            "10.0.0.0/24",
            1,
            28,
            "'10.0.0.0/24' (256 addresses) cannot hold 1 private /28 and 1 public /24 subnets; use a larger range or a longer private_subnet_mask",
        ),
        ("10.0.0.0/24", 0, 18, None),  # the longest prefix a VPC takes
        ("10.0.0.0/25", 0, 18, "prefix must be between /16 and /24 (VPC limits), got '10.0.0.0/25'"),
        ("10.0.0.0/15", 0, 18, "prefix must be between /16 and /24 (VPC limits), got '10.0.0.0/15'"),
        ("10.0.0.1/16", 1, 18, "must be an IPv4 range such as 10.0.0.0/16, got '10.0.0.1/16'"),
        ("10.0.0.0/33", 1, 18, "must be an IPv4 range such as 10.0.0.0/16, got '10.0.0.0/33'"),
    ],
)
def test_a_vpc_range_holds_every_subnet_or_is_refused(
    cidr: str, azs: int, mask: int, problem: str | None
) -> None:
    assert network.vpc_cidr_problem(cidr, azs, mask) == problem


def test_the_default_private_mask_is_18() -> None:
    assert network.vpc_cidr_problem("10.0.0.0/16", 3) is None
    assert network.vpc_cidr_problem("10.0.0.0/16", 4) is not None


@pytest.mark.parametrize(
    ("nat", "azs", "problem"),
    [(2, 2, None), (0, 2, None), (3, 2, "must be at most one per AZ (2 AZs), got 3")],
)
def test_at_most_one_nat_gateway_per_az(nat: int, azs: int, problem: str | None) -> None:
    assert network.nat_gateways_fit_problem(nat, azs) == problem


@pytest.mark.parametrize(
    ("nat", "endpoint_only", "problem"),
    [
        (None, False, None),
        (None, True, None),
        (-1, True, "must be 0 or more, got -1"),
        (0, True, None),
        (
            0,
            False,
            "is 0, which leaves private subnets without a way out; enable endpoint_only to reach AWS through VPC "
            "endpoints instead, or use 1 or more NAT gateways",
        ),
        (1, False, None),
        (1, True, "must be 0 (or omitted) when endpoint_only is enabled, got 1"),
    ],
)
def test_nat_gateways_and_endpoint_only_mode(
    nat: int | None, endpoint_only: bool, problem: str | None
) -> None:
    assert network.nat_gateways_problem(nat, endpoint_only) == problem


# --------------------------------------------------------------------------------------------------
# tags

_REFUSED = "which IAM, SageMaker, FSx and CloudWatch Logs refuse in tags; allowed: letters, numbers, spaces and _ . : / = + - @"


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("k", None),
        ("k" * 128, None),
        ("", "must be 1-128 characters, got 0"),
        ("k" * 129, "must be 1-128 characters, got 129"),
        ("aws:team", "must not start with 'aws:' (reserved for AWS)"),
        ("AWS:team", "must not start with 'aws:' (reserved for AWS)"),
        ("awsteam", None),
        ("R&D", f"holds '&', {_REFUSED}"),
        ("a&b&c", f"holds '&', {_REFUSED}"),
        ("!#$%^*", f"holds '!' '#' '$' '%' '^', {_REFUSED}"),
        pytest.param(
            "Équipe 中 _.:/=+-@ ٣", None, id="any-script"
        ),  # letters, separators, numbers of any script
    ],
)
def test_tag_keys(key: str, problem: str | None) -> None:
    assert tags.tag_key_problem(key) == problem


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", None),
        ("v" * 256, None),
        ("v" * 257, "must be at most 256 characters, got 257"),
        ("a,b", f"holds ',', {_REFUSED}"),
    ],
)
def test_tag_values(value: str, problem: str | None) -> None:
    assert tags.tag_value_problem(value) == problem


def test_the_tag_character_class_reads_categories_and_literals() -> None:
    assert tags.unicode_character_class(tags.TAG_CHARACTERS) == (frozenset("LZN"), frozenset("_.:/=+-@"))
    assert tags.refused_characters("a&b;&") == ["&", ";"]
    with pytest.raises(
        ValueError, match=r"^not a character class of \\p\{X\}, escaped and literal characters: \[a-z\]$"
    ):
        tags.unicode_character_class("[a-z]")


# --------------------------------------------------------------------------------------------------
# users

_LINUX_NAME = "must be a Linux name: a lower-case letter or '_', then lower-case letters, digits, '_' or '-', at most 32"


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a" * 32, None),
        ("svc_1-a", None),
        ("a" * 33, f"{_LINUX_NAME}, got '{'a' * 33}'"),
        ("1abc", f"{_LINUX_NAME}, got '1abc'"),
        (
            "slurm",
            "'slurm' is already a user or group on the nodes (ParallelCluster and Slurm); pick another name",
        ),
        (
            "_svc-1",
            "'_svc-1' starts with '_', kept for the distributions' system users (_apt, _chrony); pick another name",
        ),
        ("systemd", None),  # only the prefix with its dash is systemd's
        (
            "systemd-x",
            "'systemd-x' starts with 'systemd-', kept for systemd's own users and groups; pick another name",
        ),
        (
            "docker",
            "'docker' confers rights on the nodes: members of docker drive the Docker daemon, which runs as root "
            "(docs.docker.com/engine/security/#docker-daemon-attack-surface); pick another name",
        ),
        ("dockers", None),
        (
            "enroot",
            "'enroot' is already a user or group on the nodes (this library's node scripts and add-ons); pick another name",
        ),
    ],
)
def test_user_names(name: str, problem: str | None) -> None:
    assert users.name_problem(name) == problem


@pytest.mark.parametrize(("value", "ok"), [(1999, False), (2000, True), (59999, True), (60000, False)])
def test_user_ids_at_both_bounds(value: int, ok: bool) -> None:
    expected = (
        None
        if ok
        else f"must be 2000 to 59999, clear of the images' own users (uid 1000) and nobody (65534), got {value}"
    )
    assert users.id_problem(value) == expected


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI alice@laptop", None),
        ("ssh-rsa AAAAB3NzaC1yc2E=", None),
        ("ecdsa-sha2-nistp384 AAAAE2VjZHNh==", None),
        (
            "ssh-dss AAAAB3NzaC1kc3M",
            "must be one OpenSSH public key line ('ssh-ed25519 AAAA... comment'), got 'ssh-dss AAAAB3NzaC1kc3M'",
        ),
        ("x" * 40, f"must be one OpenSSH public key line ('ssh-ed25519 AAAA... comment'), got '{'x' * 40}'"),
        (
            "x" * 41,
            f"must be one OpenSSH public key line ('ssh-ed25519 AAAA... comment'), got '{'x' * 37}...'",
        ),
        pytest.param(
            "ssh-ed25519 AAAA\nssh-rsa AAAA",
            "must be one OpenSSH public key line ('ssh-ed25519 AAAA... comment'), got 'ssh-ed25519 AAAA\nssh-rsa AAAA'",
            id="two-lines",  # an id without an escape: make mutation runs a test by its id
        ),
    ],
)
def test_ssh_public_keys(key: str, problem: str | None) -> None:
    assert users.ssh_public_key_problem(key) == problem


@pytest.mark.parametrize(
    ("groups", "problem"),
    [
        ([("team", 3000), ("team", 3000), ("ops", 3001)], None),
        ([("team", 3000), ("team", 3001)], "group 'team' is given gids 3000 and 3001; every node needs one"),
        (
            [("team", 3000), ("ops", 3000)],
            "gid 3000 is given to groups 'team' and 'ops'; every node needs one",
        ),
    ],
)
def test_one_gid_per_group_and_one_group_per_gid(groups: list[tuple[str, int]], problem: str | None) -> None:
    assert users.group_ids_problem(groups) == problem


# --------------------------------------------------------------------------------------------------
# regions


def test_region_shapes() -> None:
    assert regions.region_shape_problem("us-east-1") is None
    assert regions.region_shape_problem("cn-north-1") is None
    assert regions.region_shape_problem("useast1") == "must be an AWS region such as us-east-1, got 'useast1'"
    assert "aws-global" not in regions.known_regions()
    assert {"us-east-1", "eu-west-1", "us-gov-west-1"} <= regions.known_regions()


@pytest.mark.parametrize(
    ("region", "hint"),
    [
        ("xx-nowhere-9", ""),
        ("us-eest-1", "did you mean us-east-1? "),
        (
            "us-east-3",
            "did you mean one of us-east-2, us-east-1? ",
        ),  # difflib: best first, ties by name descending
    ],
)
def test_an_unknown_region_names_botocore_and_the_closest_known_ones(
    monkeypatch: pytest.MonkeyPatch, region: str, hint: str
) -> None:
    import botocore

    monkeypatch.setattr(regions, "known_regions", lambda: frozenset({"us-east-1", "us-east-2", "eu-west-1"}))
    assert regions.unknown_region_problem("eu-west-1") is None
    assert regions.unknown_region_problem(region) == (
        f"'{region}' is not a region botocore {botocore.__version__} knows; {hint}"
        "for a region newer than botocore, set allow_unknown_region: true"
    )


@pytest.mark.parametrize(
    ("zone", "ok"),
    [
        ("us-east-1a", True),
        ("us-east-1f", True),
        ("us-east-1", False),
        ("us-east-1ab", False),
        ("us-east-1A", False),
        ("us-west-2a", False),
    ],
)
def test_an_availability_zone_is_its_region_and_one_letter(zone: str, ok: bool) -> None:
    expected = None if ok else f"'{zone}' is not an AZ of region us-east-1 (expected e.g. us-east-1a)"
    assert regions.availability_zone_problem(zone, "us-east-1") == expected


# --------------------------------------------------------------------------------------------------
# FSx for Lustre


@pytest.mark.parametrize(
    ("capacity", "ok"),
    [
        (1200, True),
        (2400, True),
        (4800, True),
        (1199, False),
        (1201, False),
        (3600, False),
        (0, False),
        (-2400, False),
    ],
)
def test_lustre_capacity_steps(capacity: int, ok: bool) -> None:
    expected = None if ok else f"must be 1200 or a multiple of 2400 for SCRATCH_2, got {capacity}"
    assert lustre.lustre_capacity_problem("SCRATCH_2", capacity) == expected


@pytest.mark.parametrize(
    ("deployment", "throughput", "problem"),
    [
        ("PERSISTENT_2", 125, None),
        ("PERSISTENT_2", 1000, None),
        ("PERSISTENT_2", None, "is required for PERSISTENT_2; allowed: 125, 250, 500, 1000"),
        ("PERSISTENT_2", 200, "must be one of 125, 250, 500, 1000 for PERSISTENT_2, got 200"),
        ("SCRATCH_2", None, None),
        ("SCRATCH_2", 125, "applies to PERSISTENT_2 only; SCRATCH_2 has a fixed throughput, got 125"),
    ],
)
def test_lustre_throughput(deployment: str, throughput: int | None, problem: str | None) -> None:
    assert lustre.lustre_throughput_problem(deployment, throughput) == problem


@pytest.mark.parametrize(
    ("deployment", "days", "problem"),
    [
        ("PERSISTENT_2", None, None),
        ("SCRATCH_2", None, None),
        ("PERSISTENT_2", 0, None),
        ("PERSISTENT_2", 90, None),
        ("PERSISTENT_2", 91, "must be between 0 (no automatic backups) and 90 days, got 91"),
        ("PERSISTENT_2", -1, "must be between 0 (no automatic backups) and 90 days, got -1"),
        ("SCRATCH_2", 0, "applies to PERSISTENT_2 only; FSx cannot back up a SCRATCH_2 file system, got 0"),
    ],
)
def test_lustre_backup_retention(deployment: str, days: int | None, problem: str | None) -> None:
    assert lustre.lustre_backup_retention_problem(deployment, days) == problem


def test_lustre_backup_defaults() -> None:
    """The module's documented defaults: 7 days on PERSISTENT_2, none on SCRATCH_2, backups at 05:00 UTC,
    maintenance on Sunday 02:00 UTC (never overlapping the backup window)."""
    assert lustre.lustre_backup_retention_days("PERSISTENT_2", None) == 7
    assert lustre.lustre_backup_retention_days("PERSISTENT_2", 0) == 0
    assert lustre.lustre_backup_retention_days("SCRATCH_2", None) is None
    assert lustre.lustre_backup_retention_days("SCRATCH_2", 3) == 3
    assert lustre.DAILY_BACKUP_START_UTC == (5, 0)
    assert lustre.WEEKLY_MAINTENANCE_START_UTC == (7, 2, 0)
    assert lustre.MAX_BACKUP_RETENTION_DAYS == 90


def test_data_repository_paths() -> None:
    assert lustre.file_system_path_problem("/datasets") is None
    assert (
        lustre.file_system_path_problem("datasets")
        == "must be an absolute path such as /datasets, got 'datasets'"
    )
    assert lustre.s3_prefix_problem("datasets/") is None
    assert (
        lustre.s3_prefix_problem("/datasets")
        == "is an S3 key prefix and must not start with '/', got '/datasets'"
    )


_DNS = "must be the file system's DNS name, letters, digits, hyphens and dots such as fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"


def _host(length: int) -> str:
    """A host name of ``length`` characters, labels of at most 63."""
    labels, left = [], length
    while left > 63:
        labels.append("a" * 62)
        left -= 63
    labels.append("a" * left)
    return ".".join(labels)


@pytest.mark.parametrize(
    ("dns_name", "ok"),
    [
        ("fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", True),
        ("a" * 63 + ".com", True),
        ("a" * 64 + ".com", False),
        (_host(253), True),
        (_host(254), False),
        ("-fs.example.com", False),
        ("fs-.example.com", False),
        ("fs.example.com;reboot", False),
    ],
)
def test_lustre_dns_names(dns_name: str, ok: bool) -> None:
    assert lustre.lustre_dns_name_problem(dns_name) == (None if ok else f"{_DNS}, got {excerpt(dns_name)}")


@pytest.mark.parametrize(
    ("mount_name", "ok"),
    [("a", True), ("abcd_-12", True), ("abcdefghi", False), ("", False), ("ab$c", False)],
)
def test_lustre_mount_names(mount_name: str, ok: bool) -> None:
    requirement = "must be the file system's mount name, 1-8 letters, digits, '_' or '-' such as 'abcdefgh' (FSx's MountName)"
    assert lustre.lustre_mount_name_problem(mount_name) == (
        None if ok else f"{requirement}, got {mount_name!r}"
    )


# --------------------------------------------------------------------------------------------------
# SageMaker HyperPod


def _hyperpod_name(maximum: int, name: str) -> str:
    return (
        f"must be 1-{maximum} letters, digits and hyphens, starting and ending with a letter or digit "
        f"(no '_' or '.'), got {name!r}"
    )


@pytest.mark.parametrize("rule", [hyperpod.cluster_name_problem, hyperpod.instance_group_name_problem])
def test_hyperpod_names_of_63_characters(rule: Any) -> None:
    assert rule("a" * 63) is None
    assert rule("a--1") is None
    assert rule("a" * 64) == _hyperpod_name(63, "a" * 64)
    assert rule("a_1") == _hyperpod_name(63, "a_1")
    assert rule("a-") == _hyperpod_name(63, "a-")


def test_hyperpod_partition_names_of_1024_characters() -> None:
    assert hyperpod.partition_name_problem("p" * 1024) is None
    assert hyperpod.partition_name_problem("p" * 1025) == (
        "must be 1-1024 letters, digits and hyphens, starting and ending with a letter or digit (no '_' or '.'), "
        f"got {excerpt('p' * 1025)}"
    )


@pytest.mark.parametrize(("count", "ok"), [(0, True), (6758, True), (6759, False)])
def test_hyperpod_instance_count(count: int, ok: bool) -> None:
    expected = (
        None
        if ok
        else f"must be at most 6758 (the most instances HyperPod's API takes in one instance group), got {count}"
    )
    assert hyperpod.instance_count_problem(count) == expected


@pytest.mark.parametrize(
    ("image_id", "ok"),
    [
        ("ami-" + "a" * 8, True),
        ("ami-" + "0" * 17, True),
        ("ami-" + "a" * 7, False),
        ("ami-" + "a" * 18, False),
        ("ami-ABCDEF01", False),
    ],
)
def test_hyperpod_image_ids(image_id: str, ok: bool) -> None:
    expected = None if ok else f"must be an AMI id such as 'ami-0123456789abcdef0', got {image_id!r}"
    assert hyperpod.image_id_problem(image_id) == expected


# --------------------------------------------------------------------------------------------------
# HyperPod on EKS


def test_kubernetes_versions_both_hyperpod_and_the_kubectl_layer_take() -> None:
    assert hyperpod_eks.supported_kubernetes_versions() == ("1.34", "1.35")
    assert hyperpod_eks.kubernetes_version_problem("1.34") is None
    assert hyperpod_eks.kubernetes_version_problem("1.35") is None
    assert hyperpod_eks.kubernetes_version_problem("1.33") == (
        "must be one of 1.34, 1.35 (the kubectl layer (v1.35) drives 1.34, 1.35, 1.36), got '1.33'"
    )
    assert hyperpod_eks.kubernetes_version_problem("1.36") == (
        "must be one of 1.34, 1.35 (SageMaker HyperPod supports 1.30, 1.31, 1.32, 1.33, 1.34, 1.35), got '1.36'"
    )


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        ("v1.18.3-eksbuild.1", None),
        ("v1.20.1-eksbuild.3", None),
        ("v2.0.0-eksbuild.1", None),
        (
            "v1.18.2-eksbuild.9",
            "must be v1.18.3 or newer (the oldest VPC CNI SageMaker HyperPod supports), got v1.18.2-eksbuild.9",
        ),
        (
            "v1.9.9-eksbuild.1",
            "must be v1.18.3 or newer (the oldest VPC CNI SageMaker HyperPod supports), got v1.9.9-eksbuild.1",
        ),
        ("1.18.3", "must look like v1.20.1-eksbuild.3 (aws eks describe-addon-versions), got '1.18.3'"),
    ],
)
def test_vpc_cni_versions(version: str, problem: str | None) -> None:
    assert hyperpod_eks.vpc_cni_version_problem(version) == problem


@pytest.mark.parametrize(
    ("volume", "problem"),
    [
        (1, None),
        (16384, None),
        (0, "must be between 1 and 16384, got 0"),
        (16385, "must be between 1 and 16384, got 16385"),
        (
            None,
            "is required on HyperPod with EKS: the lifecycle script moves containerd's and the kubelet's data "
            "(container images, pod volumes) onto that volume at /opt/sagemaker; give e.g. 500",
        ),
    ],
)
def test_hyperpod_eks_volumes(volume: int | None, problem: str | None) -> None:
    assert hyperpod_eks.volume_problem(volume) == problem


_PREFIX_252 = ".".join(["a" * 63] * 3 + ["a" * 60])


@pytest.mark.parametrize(
    ("key", "value", "effect", "problem"),
    [
        ("gpu", "true", "NoSchedule", None),
        ("example.com/gpu", "", "NoExecute", None),
        ("gpu", "v" * 63, "PreferNoSchedule", None),
        (f"{_PREFIX_252}/{'n' * 63}", "", "NoSchedule", None),  # 316 characters
        (
            f"{_PREFIX_252}a/{'n' * 63}",
            "",
            "NoSchedule",
            f"key {excerpt(f'{_PREFIX_252}a/' + 'n' * 63)} is not a Kubernetes taint key ([dns-prefix/]name, name up "
            "to 63 characters)",
        ),
        (
            "n" * 64,
            "",
            "NoSchedule",
            f"key '{'n' * 64}' is not a Kubernetes taint key ([dns-prefix/]name, name up to 63 characters)",
        ),
        (
            "-gpu",
            "",
            "NoSchedule",
            "key '-gpu' is not a Kubernetes taint key ([dns-prefix/]name, name up to 63 characters)",
        ),
        (
            "gpu",
            "v" * 64,
            "NoSchedule",
            f"value '{'v' * 64}' of 'gpu' is not a Kubernetes taint value (up to 63 characters)",
        ),
        (
            "gpu",
            "a b",
            "NoSchedule",
            "value 'a b' of 'gpu' is not a Kubernetes taint value (up to 63 characters)",
        ),
        (
            "gpu",
            "",
            "NoRun",
            "effect of 'gpu' must be one of NoSchedule, PreferNoSchedule, NoExecute, got 'NoRun'",
        ),
        (
            "sagemaker.amazonaws.com/node-health-status",
            "x",
            "NoSchedule",
            "key 'sagemaker.amazonaws.com/node-health-status' is in sagemaker.amazonaws.com/, which SageMaker "
            "HyperPod sets itself; use a key of your own",
        ),
    ],
)
def test_taints(key: str, value: str, effect: str, problem: str | None) -> None:
    assert hyperpod_eks.taint_problem(key, value, effect) == problem


def test_reserved_keys() -> None:
    assert hyperpod_eks.reserved_key_problem("example.com/sagemaker.amazonaws.com/x") is None
    assert hyperpod_eks.reserved_key_problem("sagemaker.amazonaws.com/x") == (
        "key 'sagemaker.amazonaws.com/x' is in sagemaker.amazonaws.com/, which SageMaker HyperPod sets itself; "
        "use a key of your own"
    )
    assert hyperpod_eks.HEALTH_STATUS_KEY == "sagemaker.amazonaws.com/node-health-status"
    assert hyperpod_eks.ADDRESSES_PER_NODE == 251


@pytest.mark.parametrize(
    ("nodes", "per_node", "usable", "problem"),
    [
        (2, 251, 502, None),
        (
            2,
            251,
            501,
            "adds up to 2 HyperPod nodes, whose pods take VPC addresses from the placement subnet (up to 251 per "
            "node: the node and the VPC CNI's pool), 502 in all, but the subnet has 501 usable addresses; lower the counts",
        ),
        (
            100,
            251,
            16_379,
            "adds up to 100 HyperPod nodes, whose pods take VPC addresses from the placement subnet (up to 251 per "
            "node: the node and the VPC CNI's pool), 25,100 in all, but the subnet has 16,379 usable addresses; lower the counts",
        ),
    ],
)
def test_hyperpod_pods_fit_the_subnet(nodes: int, per_node: int, usable: int, problem: str | None) -> None:
    assert hyperpod_eks.pod_addresses_problem(nodes, per_node, usable) == problem


# --------------------------------------------------------------------------------------------------
# EKS: GPU sharing, MIG, EFA nodegroups, labels, public endpoint


@pytest.mark.parametrize(
    ("time_slicing", "mps", "mig", "problem"),
    [
        (TimeSlicing(2), None, MigStrategy.NONE, None),
        (None, Mps(2), MigStrategy.NONE, None),
        (None, None, MigStrategy.MIXED, None),
        (
            TimeSlicing(1),
            None,
            MigStrategy.NONE,
            ("time_slicing.replicas", "must be 2 or more (pods per GPU), got 1"),
        ),
        (None, Mps(1), MigStrategy.NONE, ("mps.replicas", "must be 2 or more (pods per GPU), got 1")),
        (
            TimeSlicing(2),
            Mps(2),
            MigStrategy.NONE,
            ("mps", "cannot be combined with time_slicing; choose one way of sharing GPUs"),
        ),
        (
            TimeSlicing(2),
            None,
            MigStrategy.SINGLE,
            ("mig_strategy", "must be NONE when time_slicing is set, got SINGLE"),
        ),
        (None, Mps(2), MigStrategy.MIXED, ("mig_strategy", "must be NONE when mps is set, got MIXED")),
    ],
)
def test_gpu_sharing(
    time_slicing: TimeSlicing | None, mps: Mps | None, mig: MigStrategy, problem: tuple[str, str] | None
) -> None:
    assert eks.gpu_sharing_problem(time_slicing, mps, mig) == problem


def test_time_slicing_defaults() -> None:
    """TimeSlicing's docstring: ``rename_by_default`` Default: False, ``fail_requests_greater_than_one``
    Default: True."""
    sharing = TimeSlicing(4)
    assert (sharing.replicas, sharing.rename_by_default, sharing.fail_requests_greater_than_one) == (
        4,
        False,
        True,
    )


@pytest.mark.parametrize(
    ("mps", "problem"),
    [
        (None, None),
        (Mps(48), None),
        (
            Mps(49),
            (
                "mps.replicas",
                "must be at most 48 (the clients one MPS control daemon serves per GPU), got 49",
            ),
        ),
    ],
)
def test_mps_replicas_up_to_what_the_daemon_serves(mps: Mps | None, problem: tuple[str, str] | None) -> None:
    assert eks.mps_replicas_problem(mps) == problem


@pytest.mark.parametrize(
    ("instance_type", "strategy", "problem"),
    [
        ("g5.xlarge", MigStrategy.NONE, None),
        ("p4d.24xlarge", MigStrategy.SINGLE, None),
        (
            "g5.xlarge",
            MigStrategy.SINGLE,
            "SINGLE needs MIG-capable GPUs (A100, H100, H200, B200); 'g5.xlarge' has A10G",
        ),
        (
            "m5.xlarge",
            MigStrategy.MIXED,
            "MIXED needs MIG-capable GPUs (A100, H100, H200, B200); 'm5.xlarge' has no GPU",
        ),
    ],
)
def test_mig_needs_mig_capable_gpus(instance_type: str, strategy: MigStrategy, problem: str | None) -> None:
    assert eks.mig_problem(lookup(instance_type), strategy) == problem


def test_efa_nodegroups_need_efa() -> None:
    assert eks.efa_nodegroup_problem(lookup("g5.8xlarge")) is None
    assert eks.efa_nodegroup_problem(lookup("g5.xlarge")) == (
        "'g5.xlarge' has no EFA; use an EFA-capable type such as g5.8xlarge or p5.48xlarge, or a GPU nodegroup "
        "for nodes without EFA"
    )


_LABEL_KEY = (
    "is not a Kubernetes label key ([dns-prefix/]name, name up to 63 letters, digits, '-', '_', '.', starting and "
    "ending with a letter or digit)"
)
_LABEL_VALUE = "is not a Kubernetes label value (up to 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)"
_PREFIX_253 = ".".join(["a" * 63] * 4)[:253].rstrip(".")


@pytest.mark.parametrize(
    ("labels", "problem"),
    [
        ({"team": "ml", "example.com/tier": "", "n" * 63: "v" * 63}, None),
        ({f"{_PREFIX_253}/name": "v"}, None),
        ({f"{_PREFIX_253}a/name": "v"}, f"label key {excerpt(_PREFIX_253 + 'a/name')} {_LABEL_KEY}"),
        ({"n" * 64: "v"}, f"label key '{'n' * 64}' {_LABEL_KEY}"),
        ({"example.com/": "v"}, f"label key 'example.com/' {_LABEL_KEY}"),
        ({"Example.com/name": "v"}, f"label key 'Example.com/name' {_LABEL_KEY}"),
        ({"-name": "v"}, f"label key '-name' {_LABEL_KEY}"),
        ({"team": "v" * 64}, f"label value '{'v' * 64}' of 'team' {_LABEL_VALUE}"),
        ({"team": "a b"}, f"label value 'a b' of 'team' {_LABEL_VALUE}"),
    ],
)
def test_kubernetes_labels(labels: dict[str, str], problem: str | None) -> None:
    assert len(_PREFIX_253) == 253
    if problem is None:
        assert eks.kubernetes_labels(labels) is labels
    else:
        with pytest.raises(ValueError) as raised:
            eks.kubernetes_labels(labels)
        assert str(raised.value) == problem


@pytest.mark.parametrize(
    ("cidrs", "problem"),
    [
        (["203.0.113.0/24"], None),
        (["10.0.0.0/8"], None),  # the widest one range may be
        ([f"{first}.0.0.0/8" for first in range(1, 17)], None),  # one sixteenth of the addresses, not more
        (
            [f"{first}.0.0.0/8" for first in range(1, 17)] + ["17.0.0.0/32"],
            "must not open the API endpoint to the whole internet, got ranges covering 268,435,457 addresses "
            "together, more than one sixteenth of IPv4's (268,435,456); list your own ranges",
        ),
        (["1.0.0.0/8", "1.0.0.0/8"], None),  # a range twice covers it once
        (
            ["0.0.0.0/1", "128.0.0.0/1"],
            "must not open the API endpoint to the whole internet, got '0.0.0.0/1', wider than a /8; "
            "list your own ranges",
        ),
        (
            ["10.0.0.0/7"],
            "must not open the API endpoint to the whole internet, got '10.0.0.0/7', wider than a /8; "
            "list your own ranges",
        ),
        ([], "must list at least one IPv4 range when given; omit it for a private endpoint"),
        (
            ["203.0.113.0/24", "0.0.0.0/0"],
            "must not open the API endpoint to the whole internet, got '0.0.0.0/0', wider than a /8; "
            "list your own ranges",
        ),
        (
            ["2001:db8:0:0:0:0:0:0/32"],
            "must hold IPv4 ranges such as 203.0.113.0/24, got '2001:db8:0:0:0:0:0:0/32'",
        ),
    ],
)
def test_public_endpoint_ranges(cidrs: list[str], problem: str | None) -> None:
    assert eks.public_access_cidrs_problem(cidrs) == problem


# --------------------------------------------------------------------------------------------------
# EKS job layer (Kueue)


@pytest.mark.parametrize(("minutes", "ok"), [(0, False), (1, True), (1440, True), (1441, False)])
def test_pods_ready_timeout_bounds(minutes: int, ok: bool) -> None:
    expected = (
        None
        if ok
        else "must be between 1 and 1440 minutes (how long an admitted job may take to have all its pods running), "
        f"got {minutes}"
    )
    assert eks_queues.pods_ready_timeout_problem(minutes) == expected


@pytest.mark.parametrize(("name", "ok"), [("a" * 63, True), ("a" * 64, False), ("a-1", True), ("a.b", False)])
def test_kubernetes_names_of_63_characters(name: str, ok: bool) -> None:
    expected = (
        None
        if ok
        else "must be 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit "
        f"(a Kubernetes name), got {name!r}"
    )
    assert eks_queues.kubernetes_name_problem(name) == expected


@pytest.mark.parametrize(
    ("name", "ok"), [(_PREFIX_253, True), (_PREFIX_253 + "a", False), ("a.b-c", True), ("A", False)]
)
def test_cohort_names_of_253_characters(name: str, ok: bool) -> None:
    expected = (
        None
        if ok
        else "must be lower-case letters, digits, '-' and '.', up to 253 characters, starting and ending with a "
        f"letter or digit, got {excerpt(name)}"
    )
    assert eks_queues.cohort_name_problem(name) == expected


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("within_cluster_queue", QueuePreemption.LOWER_OR_NEWER_EQUAL_PRIORITY, None),
        (
            "within_cluster_queue",
            QueuePreemption.ANY,
            "must be one of Never, LowerPriority, LowerOrNewerEqualPriority, got Any",
        ),
        ("reclaim_within_cohort", QueuePreemption.ANY, None),
        ("borrow_within_cohort", QueuePreemption.ANY, "must be one of Never, LowerPriority, got Any"),
    ],
)
def test_preemption_choices(field: str, value: QueuePreemption, problem: str | None) -> None:
    assert eks_queues.preemption_problem(field, value) == problem


_COHORT = "acts between the ClusterQueues of a cohort; set cohort too, or leave it out"
_NO_COHORT_OPTIONS: dict[str, Any] = {
    "reclaim_within_cohort": QueuePreemption.NEVER,
    "borrow_within_cohort": QueuePreemption.NEVER,
    "lending_limit_percent": None,
    "borrowing_limit_percent": None,
}


@pytest.mark.parametrize(
    ("cohort", "given", "problem"),
    [
        (None, {}, None),
        ("team", {"reclaim_within_cohort": QueuePreemption.ANY, "lending_limit_percent": 0}, None),
        (None, {"reclaim_within_cohort": QueuePreemption.ANY}, ("reclaim_within_cohort", _COHORT)),
        (None, {"borrow_within_cohort": QueuePreemption.LOWER_PRIORITY}, ("borrow_within_cohort", _COHORT)),
        (None, {"lending_limit_percent": 0}, ("lending_limit_percent", _COHORT)),
        (None, {"borrowing_limit_percent": 0}, ("borrowing_limit_percent", _COHORT)),
    ],
)
def test_cohort_options_name_the_first_field_set(
    cohort: str | None, given: dict[str, Any], problem: tuple[str, str] | None
) -> None:
    assert eks_queues.cohort_needed_problem(cohort, **{**_NO_COHORT_OPTIONS, **given}) == problem


def test_borrowing_needs_reclaiming() -> None:
    never, lower = QueuePreemption.NEVER, QueuePreemption.LOWER_PRIORITY
    assert eks_queues.borrow_needs_reclaim_problem(never, never) is None
    assert eks_queues.borrow_needs_reclaim_problem(lower, lower) is None
    assert eks_queues.borrow_needs_reclaim_problem(never, lower) == (
        "LowerPriority needs reclaim_within_cohort other than Never (Kueue refuses a queue that preempts to "
        "borrow but not to reclaim)"
    )


@pytest.mark.parametrize(("percent", "ok"), [(None, True), (0, True), (100, True), (-1, False), (101, False)])
def test_limit_percent_at_both_bounds(percent: int | None, ok: bool) -> None:
    expected = (
        None if ok else f"must be between 0 and 100 (percent of the queue's nominal quota), got {percent}"
    )
    assert eks_queues.limit_percent_problem(percent) == expected


def test_namespaces_given_once_and_labels_up_to_eight() -> None:
    assert eks_queues.unique_names_problem(["b", "a"]) is None
    assert (
        eks_queues.unique_names_problem(["b", "a", "b", "a", "c"])
        == "must each be given once, got a, b more than once"
    )
    eight = {f"k{i}": "v" for i in range(8)}
    assert eks_queues.flavor_labels_problem(eight) is None
    nine = {**eight, "k8": "v"}
    assert eks_queues.flavor_labels_problem(nine) == (
        "are 9 with the ones the stack adds; a Kueue ResourceFlavor selects nodes by at most 8: "
        "k0, k1, k2, k3, k4, k5, k6, k7, k8"
    )


def test_team_namespaces_kueue_manages() -> None:
    from training_clusters.workloads.scheduling import UNMANAGED_NAMESPACES

    assert eks_queues.team_namespace_problem("team-a") is None
    for namespace in UNMANAGED_NAMESPACES:
        assert eks_queues.team_namespace_problem(namespace) == (
            f"must not be {', '.join(UNMANAGED_NAMESPACES)} (the cluster's own and Kueue's: their jobs must never "
            f"wait on Kueue), got {namespace!r}"
        )


# --------------------------------------------------------------------------------------------------
# AWS PCS


@pytest.mark.parametrize(
    ("rule", "maximum"), [(pcs.pcs_cluster_name_problem, 40), (pcs.pcs_name_problem, 25)]
)
def test_pcs_names_from_three_characters_to_their_maximum(rule: Any, maximum: int) -> None:
    assert rule("abc") is None
    assert rule("a" * maximum) is None
    assert rule("ab") == f"must be 3 to {maximum} characters long, got 'ab' (2)"
    long = "a" * (maximum + 1)
    assert rule(long) == f"must be 3 to {maximum} characters long, got '{long}' ({maximum + 1})"
    assert rule("1abc") == "must start with a letter and hold only letters, digits and hyphens, got '1abc'"


@pytest.mark.parametrize(("seconds", "ok"), [(0, False), (1, True), (10_000_000, True), (10_000_001, False)])
def test_pcs_scale_down_idle_time_bounds(seconds: int, ok: bool) -> None:
    expected = None if ok else f"must be between 1 and 10,000,000 seconds, got {seconds}"
    assert pcs.scale_down_idle_time_problem(seconds) == expected


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"SchedulerParameters": "a,b", "MaxJobCount_2": "1"}, None),
        ({"2Max": "1"}, "must name slurm.conf parameters (a letter, then letters, digits and _), got '2Max'"),
        (
            {"Max-Job": "1"},
            "must name slurm.conf parameters (a letter, then letters, digits and _), got 'Max-Job'",
        ),
        pytest.param(
            {"Max": "1\nSlurmUser=root"},
            "must give each parameter a one-line value, got '1\\nSlurmUser=root' for 'Max'",
            id="a-second-line",  # an id without an escape: make mutation runs a test by its id
        ),
        ({"Max": " "}, "must give each parameter a one-line value, got ' ' for 'Max'"),
        ({"Max": 1}, "must give each parameter a one-line value, got 1 for 'Max'"),
    ],
)
def test_pcs_slurm_custom_settings(settings: dict[str, Any], problem: str | None) -> None:
    assert pcs.slurm_custom_settings_problem(settings) == problem


@pytest.mark.parametrize(
    ("min_count", "max_count", "problem"),
    [
        (0, 1, None),
        (1, 1, None),
        (2, 1, "min_count must lie between 0 and max_count (1), got 2"),
        (-1, 1, "min_count must lie between 0 and max_count (1), got -1"),
        (0, 0, "max_count must be 1 or more, got 0"),
    ],
)
def test_pcs_node_counts(min_count: int, max_count: int, problem: str | None) -> None:
    assert pcs.node_counts_problem(min_count, max_count) == problem


@pytest.mark.parametrize(
    ("size", "nodes", "problem"),
    [
        (PcsClusterSize.SMALL, 32, None),
        (
            PcsClusterSize.SMALL,
            33,
            "is SMALL, which manages at most 32 nodes, but the node groups' max_count (login nodes included) add up "
            "to 33; use size MEDIUM",
        ),
        (PcsClusterSize.MEDIUM, 512, None),
        (
            PcsClusterSize.SMALL,
            512,
            "is SMALL, which manages at most 32 nodes, but the node groups' max_count (login nodes included) add up "
            "to 512; use size MEDIUM",
        ),
        (
            PcsClusterSize.SMALL,
            513,
            "is SMALL, which manages at most 32 nodes, but the node groups' max_count (login nodes included) add up "
            "to 513; use size LARGE",
        ),
        (PcsClusterSize.LARGE, 2048, None),
        (
            PcsClusterSize.LARGE,
            2049,
            "is LARGE, which manages at most 2048 nodes, but the node groups' max_count (login nodes included) add "
            "up to 2049; split the fleet across clusters",
        ),
    ],
)
def test_pcs_cluster_sizes(size: PcsClusterSize, nodes: int, problem: str | None) -> None:
    assert pcs.cluster_size_problem(size, nodes) == problem


@pytest.mark.parametrize(
    ("ami_id", "parameter", "problem"),
    [
        ("ami-0123456789abcdef0", None, None),
        ("ami-01234567", None, None),
        (None, "/pcs/ami", None),
        ("ami-012345678", None, "must be an AMI id such as ami-0123456789abcdef0, got 'ami-012345678'"),
        (
            "ami-01234567",
            "/pcs/ami",
            "and ami_ssm_parameter both name the AMI (got 'ami-01234567' and '/pcs/ami'); give one of them",
        ),
        (
            None,
            None,
            "or ami_ssm_parameter is required: PCS launches the AMI you give (one with the PCS agent, Slurm, the EFA "
            "software and the Lustre client, e.g. a PCS sample AMI or one built from it)",
        ),
    ],
)
def test_pcs_ami_sources(ami_id: str | None, parameter: str | None, problem: str | None) -> None:
    assert pcs.ami_problem(ami_id, parameter) == problem


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("ami", True),
        ("/a/b_c.d-e", True),
        ("/" + "a" * 2047, True),
        ("/" + "a" * 2048, False),
        ("a/b", False),
        ("/a//b", False),
    ],
)
def test_ssm_parameter_names(name: str, ok: bool) -> None:
    expected = (
        None
        if ok
        else "must be an SSM parameter name such as /training-clusters/pcs/ami (letters, digits, _ . - and / "
        f"separators), got {excerpt(name)}"
    )
    assert pcs.ssm_parameter_name_problem(name) == expected


def test_pcs_efa_flag_and_interfaces() -> None:
    assert pcs.efa_flag_problem(lookup("m5.xlarge"), False) is None
    assert pcs.efa_flag_problem(lookup("p5.48xlarge"), True) is None
    assert pcs.efa_flag_problem(lookup("m5.xlarge"), True) == (
        "is true, but m5.xlarge has no EFA interface; use an EFA-capable type or efa: false"
    )
    p5 = lookup("p5.48xlarge")
    assert pcs.efa_interfaces_problem(p5, 1) is None
    assert pcs.efa_interfaces_problem(p5, 32) is None
    assert (
        pcs.efa_interfaces_problem(p5, 33)
        == "must be between 1 and 32 for p5.48xlarge (one per network card), got 33"
    )
    assert (
        pcs.efa_interfaces_problem(p5, 0)
        == "must be between 1 and 32 for p5.48xlarge (one per network card), got 0"
    )


def test_pcs_efa_interfaces_are_bounded_by_network_cards_too() -> None:
    import dataclasses

    fewer_cards = dataclasses.replace(lookup("p5.48xlarge"), max_network_cards=4)
    assert pcs.efa_interfaces_problem(fewer_cards, 4) is None
    assert pcs.efa_interfaces_problem(fewer_cards, 5) == (
        "must be between 1 and 4 for p5.48xlarge (one per network card), got 5"
    )


@pytest.mark.parametrize(("size", "ok"), [(7, False), (8, True), (16_384, True), (16_385, False)])
def test_pcs_root_volume_bounds(size: int, ok: bool) -> None:
    expected = None if ok else f"must be between 8 and 16384 GiB, got {size}"
    assert pcs.root_volume_problem(size) == expected


def test_pcs_queues_name_compute_node_groups() -> None:
    assert pcs.queue_node_groups_problem(iter(["gpu"]), iter(["cpu", "gpu"])) is None
    assert pcs.queue_node_groups_problem([], ["gpu"]) == "must list at least one compute node group"
    assert pcs.queue_node_groups_problem(["gpu", "login", "x"], ["cpu", "gpu"]) == (
        "names 'login', which is not a compute node group of the cluster (cpu, gpu)"
    )


def test_pcs_mount_dirs() -> None:
    assert pcs.pcs_mount_dir_problem("/fsx") is None
    assert pcs.pcs_mount_dir_problem("/opt/aws") == (
        "'/opt/aws' belongs to the operating system, Slurm or the PCS agent; use e.g. /fsx or /shared"
    )
    assert pcs.pcs_mount_dir_problem("fsx") == "must be an absolute directory such as /fsx, got 'fsx'"


# --------------------------------------------------------------------------------------------------
# AWS ParallelCluster


_OSES = "alinux2023, ubuntu2204, ubuntu2404, rhel8, rhel9, rocky8, rocky9"


@pytest.mark.parametrize(
    ("os", "problem"),
    [
        ("alinux2023", None),
        ("rocky9", None),
        (
            "alinux2",
            f"'alinux2' is not allowed: Amazon Linux 2 is no longer supported by ParallelCluster 3.16; use one of {_OSES}",
        ),
        (
            "centos7",
            f"'centos7' is not allowed: CentOS 7 is no longer supported by ParallelCluster 3.16; use one of {_OSES}",
        ),
        ("windows", f"must be one of {_OSES}, got 'windows'"),
    ],
)
def test_pcluster_operating_systems(os: str, problem: str | None) -> None:
    assert pc.os_problem(os) == problem


@pytest.mark.parametrize(
    ("name", "ok"), [("a" * 60, True), ("A-1", True), ("a" * 61, False), ("1a", False), ("a_b", False)]
)
def test_pcluster_cluster_names_of_60_characters(name: str, ok: bool) -> None:
    expected = (
        None
        if ok
        else "must start with a letter and hold only letters, digits and hyphens, at most 60 characters, "
        f"got {name!r}"
    )
    assert pc.cluster_name_problem(name) == expected


def test_the_accounting_database_is_the_cluster_name_with_underscores() -> None:
    assert pc.accounting_database_name("my-team-cluster") == "my_team_cluster"


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("q" * 25, None),
        ("gpu-1", None),
        ("q" * 26, f"must be at most 25 characters, got '{'q' * 26}' (26)"),
        (
            "Gpu",
            "must start with a lowercase letter and hold only lowercase letters, digits and hyphens, got 'Gpu'",
        ),
        ("default", "must not be 'default' (reserved by Slurm)"),
    ],
)
def test_pcluster_queue_and_compute_resource_names(name: str, problem: str | None) -> None:
    assert pc.slurm_name_problem(name) == problem


@pytest.mark.parametrize(("count", "ok"), [(0, False), (1, True), (50, True), (51, False)])
def test_pcluster_entry_counts(count: int, ok: bool) -> None:
    assert pc.count_problem(count, 50) == (None if ok else f"must hold between 1 and 50 entries, got {count}")
    assert (pc.MAX_QUEUES, pc.MAX_COMPUTE_RESOURCES_PER_QUEUE, pc.MAX_COMPUTE_RESOURCES_PER_CLUSTER) == (
        50,
        50,
        50,
    )


@pytest.mark.parametrize(
    ("min_count", "max_count", "problem"),
    [
        (0, 4, None),
        (4, 4, None),
        (5, 4, "5 is greater than max_count 4"),
        (-1, 4, "must be 0 or more, got -1"),
    ],
)
def test_pcluster_min_count(min_count: int, max_count: int, problem: str | None) -> None:
    assert pc.min_count_problem(min_count, max_count) == problem


def test_pcluster_max_count() -> None:
    assert pc.max_count_problem(1) is None
    assert pc.max_count_problem(0) == "must be 1 or more, got 0"


def _head(memory_gib: float) -> Any:
    import dataclasses

    return dataclasses.replace(lookup("m5.xlarge"), name="head.test", memory_gib=memory_gib)


@pytest.mark.parametrize(
    ("memory", "nodes", "problem"),
    [
        (4.6, 100, None),  # 100 / 25 + 0.6 = 4.6: exactly enough
        (
            4.5,
            100,
            "head.test has 4.5 GiB of memory, and ParallelCluster refuses a head node of less than 4.6 GiB for 100 "
            "compute nodes (max_count added up: 1 GiB per 25 nodes and 0.6 for the system, at most 16); choose a "
            "larger head node or lower max_count",
        ),
        (16, 10_000, None),  # asks at most 16 GiB
        (
            15.5,
            10_000,
            "head.test has 15.5 GiB of memory, and ParallelCluster refuses a head node of less than 16 GiB for "
            "10,000 compute nodes (max_count added up: 1 GiB per 25 nodes and 0.6 for the system, at most 16); "
            "choose a larger head node or lower max_count",
        ),
        (
            1,
            12,
            "head.test has 1 GiB of memory, and ParallelCluster refuses a head node of less than 1.08 GiB for 12 "
            "compute nodes (max_count added up: 1 GiB per 25 nodes and 0.6 for the system, at most 16); choose a "
            "larger head node or lower max_count",
        ),
    ],
)
def test_pcluster_head_node_memory(memory: float, nodes: int, problem: str | None) -> None:
    assert pc.head_node_memory_problem(_head(memory), nodes) == problem


def test_pcluster_efa_and_gpudirect_rdma_list_the_capable_types() -> None:
    efa = ", ".join(name for name, it in CATALOG.items() if it.efa_supported)
    rdma = ", ".join(name for name, it in CATALOG.items() if it.gpudirect_rdma)
    assert "c5n.18xlarge" in efa and "g5.8xlarge" in efa and "m5.xlarge" not in efa
    assert "p5.48xlarge" in rdma and "g5.8xlarge" not in rdma
    assert pc.efa_enabled_problem(lookup("c5n.18xlarge")) is None
    assert pc.efa_enabled_problem(lookup("m5.xlarge")) == (
        f"is enabled, but m5.xlarge has no EFA interface; EFA-capable types in the catalogue: {efa}"
    )
    assert pc.gdr_problem(lookup("p5.48xlarge"), True) is None
    assert pc.gdr_problem(lookup("p5.48xlarge"), False) == "requires efa to be enabled"
    assert pc.gdr_problem(lookup("g5.8xlarge"), True) == (
        f"is enabled, but g5.8xlarge has no GPUDirect RDMA; types with it in the catalogue: {rdma}"
    )


@pytest.mark.parametrize(
    ("allowed", "problem"),
    [
        ("pl-0123abcd", None),
        ("10.0.0.0/16", None),
        ("10.0.0.1/16", None),  # host bits are allowed, as ParallelCluster allows them
        ("10.0.0.1/8", None),
        (
            "10.0.0.1/7",
            "must not open SSH to the whole internet, got '10.0.0.1/7', wider than a /8; give the VPC CIDR or a "
            "prefix list",
        ),
        (
            "0.0.0.0/1",
            "must not open SSH to the whole internet, got '0.0.0.0/1', wider than a /8; give the VPC CIDR or a "
            "prefix list",
        ),
        (
            "0.0.0.0/0",
            "must not open SSH to the whole internet, got '0.0.0.0/0', wider than a /8; give the VPC CIDR or a "
            "prefix list",
        ),
        ("pl-", "must be an IPv4 CIDR such as 10.0.0.0/16 or a prefix list id (pl-...), got 'pl-'"),
        # IPv6 written out in full: a test id with "::" is not one pytest can be given back on its command line
        (
            "0:0:0:0:0:0:0:0/0",
            "must be an IPv4 CIDR such as 10.0.0.0/16 or a prefix list id (pl-...), got '0:0:0:0:0:0:0:0/0'",
        ),
    ],
)
def test_pcluster_ssh_allowed_ips(allowed: str, problem: str | None) -> None:
    assert pc.ssh_allowed_ips_problem(allowed) == problem


def test_pcluster_log_retention_and_scaledown() -> None:
    days = "1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653"
    assert pc.pcluster_log_retention_problem(3653) is None
    assert pc.pcluster_log_retention_problem(1096) == f"must be one of {days}, got 1096"
    assert pc.scaledown_idletime_problem(1) is None
    assert pc.scaledown_idletime_problem(0) == "must be 1 or more minutes, got 0"


def test_pcluster_mount_dirs() -> None:
    assert pc.mount_dir_problem("/shared") is None
    assert (
        pc.mount_dir_problem("/srv")
        == "'/srv' is reserved by the operating system or ParallelCluster; use e.g. /shared or /fsx"
    )
    assert pc.mount_dir_problem("shared") == "must be an absolute directory such as /shared, got 'shared'"


_BLOCK = Capacity.capacity_block("cr-0123456789abcdef0")
_ODCR = Capacity.reservation("cr-0123456789abcdef1")


def test_pcluster_compute_resource_capacity() -> None:
    assert pc.compute_resource_capacity_problem(_BLOCK) is None
    assert pc.compute_resource_capacity_problem(_ODCR) is None
    assert pc.compute_resource_capacity_problem(Capacity.spot()) == (
        "of a compute resource must be a reservation or a capacity-block, got spot; on-demand and spot are the "
        "queue's capacity"
    )


@pytest.mark.parametrize(
    ("queue", "resources", "problem"),
    [
        (Capacity.on_demand(), [("a", None, 0, 4), ("b", _ODCR, 0, 4)], None),
        (Capacity.spot(), [("a", None, 0, 4)], None),
        (
            Capacity.spot(),
            [("a", None, 0, 4), ("b", _ODCR, 0, 4)],
            "capacity is spot, but compute resource 'b' has capacity reservation cr-0123456789abcdef1; reservations "
            "and Capacity Blocks hold On-Demand capacity: use an on-demand queue",
        ),
        (Capacity.on_demand(), [("a", _BLOCK, 1, 1)], None),
        (_BLOCK, [("a", None, 2, 2)], None),
        (
            Capacity.on_demand(),
            [("a", _BLOCK, 1, 1), ("b", None, 0, 4)],
            "mixes Capacity Blocks with on-demand (compute resource 'b'); ParallelCluster's CapacityType is the "
            "queue's: put each Capacity Block in a queue of its own",
        ),
        (
            _BLOCK,
            [("a", None, 0, 0)],
            "compute resource 'a' uses Capacity Block cr-0123456789abcdef0, whose nodes are all static: min_count "
            "must equal max_count and be 1 or more, got 0 and 0",
        ),
        (
            _BLOCK,
            [("a", None, 1, 2)],
            "compute resource 'a' uses Capacity Block cr-0123456789abcdef0, whose nodes are all static: min_count "
            "must equal max_count and be 1 or more, got 1 and 2",
        ),
    ],
)
def test_pcluster_queue_capacity(
    queue: Capacity, resources: list[tuple[str, Capacity | None, int, int]], problem: str | None
) -> None:
    assert pc.queue_capacity_problem(queue, resources) == problem


def test_pcluster_placement_is_left_out_when_any_capacity_asks() -> None:
    assert pc.placement_may_be_left_out(Capacity.on_demand(), [None, None]) is False
    assert pc.placement_may_be_left_out(Capacity.on_demand(), [None, _BLOCK]) is True
    assert pc.placement_may_be_left_out(_BLOCK, [None]) is True
    assert (
        pc.placement_may_be_left_out(
            _BLOCK, [Capacity.reservation("cr-0123456789abcdef1", in_placement_group=True)]
        )
        is False
    )


def test_pcluster_gpu_health_checks_and_team_settings() -> None:
    assert pc.gpu_health_check_problem(lookup("g5.xlarge")) is None
    assert pc.gpu_health_check_problem(lookup("trn1.32xlarge")) == (
        "applies to NVIDIA GPU instance types (it runs DCGM diagnostics), got trn1.32xlarge"
    )
    assert pc.ami_problem("ami-01234567") is None
    assert pc.ami_problem("ami-0123456789abcdef0") is None
    assert (
        pc.ami_problem("ami-0123456789")
        == "must be an AMI id such as ami-0123456789abcdef0, got 'ami-0123456789'"
    )
    assert pc.ldap_tls_req_cert_problem("hard") is None
    assert (
        pc.ldap_tls_req_cert_problem("always")
        == "must be one of never, allow, try, demand, hard, got 'always'"
    )
    assert pc.custom_slurm_setting_problem("MaxJobCount") is None
    assert pc.custom_slurm_setting_problem("SlurmUser") == (
        "'SlurmUser' is managed by ParallelCluster and refused in CustomSlurmSettings; set it through its own field "
        "(database, for accounting) or leave it"
    )


@pytest.mark.parametrize(("minutes", "ok"), [(2, False), (3, True), (120, True), (121, False)])
def test_pcluster_login_gracetime_bounds(minutes: int, ok: bool) -> None:
    expected = None if ok else f"must be 3 to 120 minutes (ParallelCluster's bounds), got {minutes}"
    assert pc.login_gracetime_problem(minutes) == expected


def test_pcluster_cluster_tags() -> None:
    forty = {f"k{i:02}": "v" for i in range(40)}
    assert pc.cluster_tags_problem(forty) is None
    forty_one = {**forty, "k40": "v"}
    assert pc.cluster_tags_problem(forty_one) == (
        "must be at most 40 tags (ParallelCluster keeps 10 of EC2's 50 for its own), got 41: "
        + ", ".join(sorted(forty_one))
    )
    assert pc.cluster_tags_problem({"parallelcluster:x": "v"}) == (
        "key 'parallelcluster:x' starts with 'parallelcluster:', which ParallelCluster keeps for itself"
    )
    assert (
        pc.cluster_tags_problem({"ok": "v", "aws:x": "v"})
        == "key 'aws:x' must not start with 'aws:' (reserved for AWS)"
    )
    assert pc.cluster_tags_problem({"ok": "R&D"}) == f"value of 'ok' holds '&', {_REFUSED}"


def test_a_custom_mig_layout_names_every_profile_the_gpu_does_not_offer() -> None:
    from training_clusters.model.options import MigLayout

    p4d = lookup("p4d.24xlarge")
    offered = ", ".join(p4d.accelerators.mig_profiles if p4d.accelerators else ())
    assert offered == "1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb"
    assert eks.mig_layout_problem(p4d, MigLayout.parse({"9g.1gb": 1, "8g.1gb": 1, "1g.5gb": 1})) == (
        f"'8g.1gb, 9g.1gb' is not a MIG profile of A100 40 GB (p4d.24xlarge); it offers {offered} (and all-balanced)"
    )


# --------------------------------------------------------------------------------------------------
# placement groups


@pytest.mark.parametrize(
    ("strategy", "partitions", "problem"),
    [
        ("CLUSTER", None, None),
        ("PARTITION", None, None),
        ("PARTITION", 1, None),
        ("PARTITION", 7, None),
        ("PARTITION", 0, "must be between 1 and 7 per AZ, got 0"),
        ("PARTITION", 8, "must be between 1 and 7 per AZ, got 8"),
        ("CLUSTER", 3, "applies to the PARTITION strategy only, got 3 with CLUSTER"),
        ("SPREAD", 1, "applies to the PARTITION strategy only, got 1 with SPREAD"),
    ],
)
def test_partitions_go_with_the_partition_strategy_one_to_seven(
    strategy: str, partitions: int | None, problem: str | None
) -> None:
    assert placement.placement_partitions_problem(strategy, partitions) == problem


@pytest.mark.parametrize(
    ("strategy", "level", "problem"),
    [
        ("SPREAD", None, None),
        ("SPREAD", "HOST", None),
        ("CLUSTER", None, None),
        ("CLUSTER", "HOST", "applies to the SPREAD strategy only, got HOST with CLUSTER"),
        ("PARTITION", "RACK", "applies to the SPREAD strategy only, got RACK with PARTITION"),
    ],
)
def test_a_spread_level_goes_with_the_spread_strategy(
    strategy: str, level: str | None, problem: str | None
) -> None:
    assert placement.placement_spread_level_problem(strategy, level) == problem


@pytest.mark.parametrize(
    ("strategy", "zones", "problem"),
    [
        ("CLUSTER", [], None),
        ("CLUSTER", ["us-east-1a", "us-east-1a"], None),
        (
            "CLUSTER",
            ["us-east-1b", "us-east-1a", "us-east-1b"],
            "span 2 Availability Zones (us-east-1a, us-east-1b); a CLUSTER placement group keeps its instances "
            "in one AZ, so give subnets of a single AZ",
        ),
        ("SPREAD", ["us-east-1a", "us-east-1b"], None),
        ("PARTITION", ["us-east-1a", "us-east-1b"], None),
    ],
)
def test_a_cluster_group_keeps_to_one_zone(strategy: str, zones: list[str], problem: str | None) -> None:
    assert placement.placement_zones_problem(strategy, zones) == problem


# --------------------------------------------------------------------------------------------------
# HyperPod instance groups


@pytest.mark.parametrize(
    ("threads", "problem"), [(1, None), (2, None), (0, "must be 1 or 2, got 0"), (3, "must be 1 or 2, got 3")]
)
def test_threads_per_core_is_one_or_two(threads: int, problem: str | None) -> None:
    assert hyperpod.threads_per_core_problem(threads) == problem


@pytest.mark.parametrize(
    ("gib", "problem"),
    [
        (None, None),
        (1, None),
        (16384, None),
        (0, "must be between 1 and 16384, got 0"),
        (16385, "must be between 1 and 16384, got 16385"),
    ],
)
def test_the_extra_volume_is_one_gib_to_sixteen_tib(gib: int | None, problem: str | None) -> None:
    assert hyperpod.extra_volume_problem(gib) == problem


@pytest.mark.parametrize(
    ("gib", "problem"),
    [
        (None, None),
        (100, None),
        (16384, None),
        (99, "must be between 100 (HyperPod's root volume) and 16384, got 99"),
        (16385, "must be between 100 (HyperPod's root volume) and 16384, got 16385"),
    ],
)
def test_the_root_volume_grows_hyperpods_own_up_to_sixteen_tib(gib: int | None, problem: str | None) -> None:
    assert hyperpod.root_volume_problem(gib) == problem


@pytest.mark.parametrize(
    ("gib", "problem"),
    [
        (1, None),
        (500, None),
        (None, "encrypts the extra volume, so it needs extra_volume_gib"),
        (0, "encrypts the extra volume, so it needs extra_volume_gib"),
    ],
)
def test_an_extra_volume_key_needs_the_extra_volume(gib: int | None, problem: str | None) -> None:
    assert hyperpod.extra_volume_key_problem(gib) == problem


@pytest.mark.parametrize(
    ("count", "least", "problem"),
    [(1, 1, None), (0, 1, "must be 1 or more, got 0"), (0, 0, None), (-1, 0, "must be 0 or more, got -1")],
)
def test_a_group_holds_at_least_its_least_count(count: int, least: int, problem: str | None) -> None:
    assert hyperpod.group_count_problem(count, least) == problem


@pytest.mark.parametrize(
    ("checks", "instance_type", "problem"),
    [
        (["InstanceStress"], "ml.p5.48xlarge", None),
        (["InstanceConnectivity"], "ml.trn1.32xlarge", None),
        (["InstanceStress"], "p5.48xlarge", None),
        ([], "ml.c5.xlarge", None),
        (["InstanceStress"], "ml.c5.xlarge", "run on GPU and Trainium instances only, got ml.c5.xlarge"),
        (["InstanceStress"], "ml.x9.unknown", "run on GPU and Trainium instances only, got ml.x9.unknown"),
    ],
)
def test_deep_health_checks_need_accelerators(
    checks: list[str], instance_type: str, problem: str | None
) -> None:
    assert hyperpod.deep_health_checks_problem(checks, instance_type) == problem


def test_the_second_group_of_a_name_is_the_one_named() -> None:
    assert hyperpod.group_names_problem([]) is None
    assert hyperpod.group_names_problem(["a", "b"]) is None
    assert hyperpod.group_names_problem(["a", "b", "a", "b"]) == (2, "'a' is used twice")


@pytest.mark.parametrize(
    ("roles", "problem"),
    [
        ([("c", "CONTROLLER"), ("w", "WORKER")], None),
        ([("c", "CONTROLLER"), ("l", "LOGIN"), ("w", "WORKER")], None),
        ([("w", "WORKER")], "need exactly one CONTROLLER group under Slurm, got 0 (none)"),
        (
            [("a", "CONTROLLER"), ("b", "CONTROLLER")],
            "need exactly one CONTROLLER group under Slurm, got 2 (a, b)",
        ),
        (
            [("c", "CONTROLLER"), ("l1", "LOGIN"), ("l2", "LOGIN")],
            "allow at most one LOGIN group, got 2 (l1, l2)",
        ),
    ],
)
def test_slurm_has_one_controller_and_at_most_one_login_group(
    roles: list[tuple[str, str]], problem: str | None
) -> None:
    assert hyperpod.slurm_roles_problem(roles) == problem


def test_slurm_needs_a_worker_group() -> None:
    assert hyperpod.slurm_workers_problem(["CONTROLLER", "WORKER"]) is None
    assert hyperpod.slurm_workers_problem(["CONTROLLER", "LOGIN"]) == (
        "need at least one WORKER group to run jobs, got none"
    )


@pytest.mark.parametrize(
    ("role", "count", "problem"),
    [
        ("CONTROLLER", 1, None),
        ("CONTROLLER", 2, "of the CONTROLLER group must be 1, got 2"),
        ("CONTROLLER", 0, "of the CONTROLLER group must be 1, got 0"),
        ("WORKER", 2, None),
        ("LOGIN", 2, None),
    ],
)
def test_the_controller_group_holds_one_instance(role: str, count: int, problem: str | None) -> None:
    assert hyperpod.controller_count_problem(role, count) == problem


@pytest.mark.parametrize(
    ("role", "partition", "problem"),
    [
        ("WORKER", "dev", None),
        ("WORKER", None, "is required for WORKER group 'g'"),
        ("WORKER", "", "is required for WORKER group 'g'"),
        ("CONTROLLER", None, None),
        ("LOGIN", "dev", "applies to WORKER groups only, got 'dev' on LOGIN group 'g'"),
        ("CONTROLLER", "dev", "applies to WORKER groups only, got 'dev' on CONTROLLER group 'g'"),
    ],
)
def test_workers_and_only_workers_name_a_partition(
    role: str, partition: str | None, problem: str | None
) -> None:
    assert hyperpod.slurm_partition_problem(role, partition, "g") == problem


# --------------------------------------------------------------------------------------------------
# EKS cluster and nodegroups


@pytest.mark.parametrize(
    ("arn", "problem"),
    [
        ("arn:aws:iam::111122223333:role/Admin", None),
        ("arn:aws-cn:iam::111122223333:role/path/Admin", None),
        ("arn:aws:iam::111122223333:user/alice", "user/alice"),
        ("arn:aws:iam::11112222333:role/Admin", "11112222333"),
        ("arn:aws:iam::111122223333:role/", "role/'"),
    ],
)
def test_the_admin_role_is_a_role_arn(arn: str, problem: str | None) -> None:
    found = eks.admin_role_arn_problem(arn)
    if problem is None:
        assert found is None
    else:
        assert found == f"must be an IAM role ARN such as arn:aws:iam::111122223333:role/Admin, got '{arn}'"


def test_a_gpu_nodegroup_needs_an_accelerator() -> None:
    assert eks.accelerated_nodegroup_problem(lookup("g5.2xlarge")) is None
    assert eks.accelerated_nodegroup_problem(lookup("trn1.32xlarge")) is None
    assert eks.accelerated_nodegroup_problem(lookup("m5.xlarge")) == (
        "'m5.xlarge' has no GPU or Trainium accelerator; use a type such as g5.2xlarge"
    )


def test_the_system_nodegroup_has_a_node() -> None:
    assert eks.system_node_count_problem(1) is None
    assert eks.system_node_count_problem(0) == "must be 1 or more, got 0"


@pytest.mark.parametrize(
    ("hops", "problem"),
    [
        (1, None),
        (64, None),
        (0, "must be between 1 and 64 (1 keeps pods away from the node's credentials), got 0"),
        (65, "must be between 1 and 64 (1 keeps pods away from the node's credentials), got 65"),
    ],
)
def test_the_imds_hop_limit_is_one_to_sixty_four(hops: int, problem: str | None) -> None:
    assert eks.imds_hop_limit_problem(hops) == problem


def test_a_root_volume_holds_the_eks_ami() -> None:
    assert eks.root_volume_size_problem(20) is None
    assert eks.root_volume_size_problem(19) == "must be at least 20 (the EKS AMI's own size), got 19"


@pytest.mark.parametrize(
    ("sizes", "problem"),
    [
        ((0, 0, 1), None),
        ((2, 1, 3), None),
        ((3, 3, 3), None),
        ((-1, -1, 1), ("desired_size", "must be 0 or more, got -1")),
        ((0, 1, 3), ("desired_size", "must lie between min_size and max_size (1..3), got 0")),
        ((4, 1, 3), ("desired_size", "must lie between min_size and max_size (1..3), got 4")),
        ((0, 0, 0), ("max_size", "must be 1 or more, got 0")),
    ],
)
def test_nodegroup_sizes(sizes: tuple[int, int, int], problem: tuple[str, str] | None) -> None:
    assert eks.nodegroup_sizes_problem(*sizes) == problem


@pytest.mark.parametrize(
    ("reserved", "subnets", "problem"),
    [
        (None, None, None),
        (None, 3, None),
        ("reservation cr-1", 1, None),
        (
            "reservation cr-1",
            None,
            "must be one subnet in the AZ of reservation cr-1 (reserved capacity lives in one AZ), got the "
            "VPC's private subnets",
        ),
        (
            "reservation cr-1",
            2,
            "must be one subnet in the AZ of reservation cr-1 (reserved capacity lives in one AZ), got 2 subnets",
        ),
    ],
)
def test_reserved_nodes_take_one_subnet(
    reserved: str | None, subnets: int | None, problem: str | None
) -> None:
    assert eks.reserved_subnets_problem(reserved, subnets) == problem


# --------------------------------------------------------------------------------------------------
# ParallelCluster: moved from the construct


def test_ssh_needs_a_key_pair_named_as_the_caller_names_it() -> None:
    assert pc.ssh_key_problem("ops") is None
    assert pc.ssh_key_problem(None) == "applies only with key_name (without a key pair, use SSM)"
    assert pc.ssh_key_problem(None, "head_node.key_name") == (
        "applies only with head_node.key_name (without a key pair, use SSM)"
    )


def test_a_cluster_holds_at_most_fifty_compute_resources() -> None:
    assert pc.cluster_compute_resources_problem(50) is None
    assert pc.cluster_compute_resources_problem(51) == (
        "hold 51 compute resources in all; ParallelCluster allows at most 50 per cluster"
    )


@pytest.mark.parametrize(
    ("placement", "efa", "problem"),
    [
        ("none", [], None),
        ("shared", ["c5n"], None),
        ("managed", ["c5n"], None),
        (
            "none",
            ["c5n", "p5"],
            "is none, but compute resource 'c5n' uses EFA, which needs a placement group; use shared or managed",
        ),
    ],
)
def test_efa_needs_a_placement_group(placement: str, efa: list[str], problem: str | None) -> None:
    assert pc.efa_placement_problem(placement, efa) == problem


@pytest.mark.parametrize(
    ("placement", "has_group", "problem"),
    [
        ("shared", True, None),
        ("managed", False, None),
        ("none", False, None),
        ("shared", False, "is shared, but the cluster has no placement_group; give one or use managed"),
    ],
)
def test_shared_placement_needs_the_clusters_group(
    placement: str, has_group: bool, problem: str | None
) -> None:
    assert pc.shared_placement_problem(placement, has_group) == problem


def test_the_cluster_is_not_named_as_our_stack() -> None:
    assert pc.stack_name_problem("c5n", "training-c5n") is None
    assert pc.stack_name_problem("training-c5n", "training-c5n") == (
        "'training-c5n' must differ from the stack's name: ParallelCluster creates a stack of that name"
    )


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("scripts/a.sh", None),
        ("a", None),
        ("", "must be an object key such as scripts/on-node-configured.sh, got ''"),
        ("/scripts/a.sh", "must be an object key such as scripts/on-node-configured.sh, got '/scripts/a.sh'"),
    ],
)
def test_a_custom_action_is_an_object_key(key: str, problem: str | None) -> None:
    assert pc.action_key_problem(key) == problem


def test_a_login_pool_has_a_node() -> None:
    assert pc.login_count_problem(1) is None
    assert pc.login_count_problem(0) == "must be 1 or more, got 0"


# --------------------------------------------------------------------------------------------------
# common constructs: Lustre, network, bucket (moved from the constructs)


def test_exempt_nids_go_with_root_squash_sixty_four_at_most() -> None:
    sixty_four = [f"10.0.1.{i}@tcp" for i in range(1, 65)]
    assert lustre.exempt_nids_problem(False, []) is None
    assert lustre.exempt_nids_problem(True, sixty_four) is None
    assert lustre.exempt_nids_problem(False, ["10.0.1.6@tcp"]) == "applies only when root_squash is on"
    assert (
        lustre.exempt_nids_problem(True, [*sixty_four, "10.0.1.65@tcp"])
        == "must hold at most 64 NIDs, got 65"
    )
    assert lustre.exempt_nids_problem(True, ["10.0.1.6"]) == lustre.no_squash_nid_problem("10.0.1.6")
    assert lustre.no_squash_nid_problem("10.0.1.6") is not None


def test_a_kms_key_needs_a_persistent_file_system() -> None:
    assert lustre.lustre_kms_key_problem("PERSISTENT_2") is None
    assert lustre.lustre_kms_key_problem("SCRATCH_2") == (
        "applies to PERSISTENT_2 only; SCRATCH_2 is always encrypted with an FSx-managed key"
    )


def test_root_squash_is_set_where_the_file_system_is_made() -> None:
    assert lustre.adopted_root_squash_problem(False) is None
    assert lustre.adopted_root_squash_problem(True) == (
        "applies to a file system made here; set an adopted one's root squash where it is made"
    )


@pytest.mark.parametrize(
    ("mask", "problem"),
    [
        (16, None),
        (28, None),
        (15, "must be between 16 and 28, got 15"),
        (29, "must be between 16 and 28, got 29"),
    ],
)
def test_private_subnet_masks_are_sixteen_to_twenty_eight(mask: int, problem: str | None) -> None:
    assert network.private_subnet_mask_problem(mask) == problem


def test_the_placement_zone_is_one_of_the_vpcs() -> None:
    zones = ["us-east-1a", "us-east-1b"]
    assert network.placement_zone_problem("us-east-1b", zones, "availability_zones") is None
    assert network.placement_zone_problem("us-east-1c", zones, "availability_zones") == (
        "'us-east-1c' must be one of availability_zones (us-east-1a, us-east-1b)"
    )
    assert network.private_subnet_zone_problem("us-east-1a", zones) is None
    assert network.private_subnet_zone_problem("us-east-1f", zones) == (
        "'us-east-1f' has no private subnet; available: us-east-1a, us-east-1b"
    )


@pytest.mark.parametrize(
    ("prefix", "problem"),
    [
        ("a", None),
        ("9-scripts", None),
        ("a" * 20, None),
        ("a" * 21, f"got '{'a' * 21}'"),
        ("", "got ''"),
        ("-scripts", "got '-scripts'"),
        ("Scripts", "got 'Scripts'"),
        ("my.scripts", "got 'my.scripts'"),
    ],
)
def test_a_bucket_name_prefix(prefix: str, problem: str | None) -> None:
    found = s3.bucket_name_prefix_problem(prefix)
    if problem is None:
        assert found is None
    else:
        assert found == (
            f"must be 1-20 lowercase letters, digits or hyphens starting with a letter or digit, {problem}"
        )


# --------------------------------------------------------------------------------------------------
# Slurm accounting's database


@pytest.mark.parametrize(
    ("username", "problem"),
    [
        ("admin", None),
        ("a" * 16, None),
        ("a_1", None),
        ("a" * 17, f"must be 1 to 16 letters, digits or '_', starting with a letter, got '{'a' * 17}'"),
        ("", "must be 1 to 16 letters, digits or '_', starting with a letter, got ''"),
        ("1admin", "must be 1 to 16 letters, digits or '_', starting with a letter, got '1admin'"),
        ("ad-min", "must be 1 to 16 letters, digits or '_', starting with a letter, got 'ad-min'"),
        ("ädmin", "must be 1 to 16 letters, digits or '_', starting with a letter, got 'ädmin'"),
        ("RdsAdmin", "is reserved by RDS, got 'RdsAdmin'"),
        ("SlurmDBD", "is slurmdbd's own database user, got 'SlurmDBD'"),
    ],
)
def test_the_master_user_name(username: str, problem: str | None) -> None:
    assert accounting.master_username_problem(username) == problem


@pytest.mark.parametrize(
    ("databases", "problem"),
    [
        (["slurm_acct_db"], None),
        (["a" * 64, "b"], None),
        ([], "must name at least one database, got []"),
        ("slurm_acct_db", "must name at least one database, got 'slurm_acct_db'"),
        (["a" * 65], f"must be 1 to 64 letters, digits or '_' each, got '{'a' * 65}'"),
        (["ok", ""], "must be 1 to 64 letters, digits or '_' each, got ''"),
        (["slurm-db"], "must be 1 to 64 letters, digits or '_' each, got 'slurm-db'"),
    ],
)
def test_the_databases(databases: list[str] | str, problem: str | None) -> None:
    assert accounting.databases_problem(databases) == problem


@pytest.mark.parametrize(
    ("acu", "problem"),
    [
        (0.5, None),
        (256.0, None),
        (1.5, None),
        (0.0, "must be 0.5 to 256 in steps of 0.5 ACU, got 0"),
        (256.5, "must be 0.5 to 256 in steps of 0.5 ACU, got 256.5"),
        (0.75, "must be 0.5 to 256 in steps of 0.5 ACU, got 0.75"),
    ],
)
def test_capacity_in_half_acus(acu: float, problem: str | None) -> None:
    assert accounting.capacity_acu_problem(acu) == problem


def test_the_least_capacity_does_not_exceed_the_most() -> None:
    assert accounting.capacity_range_problem(2, 2) is None
    assert accounting.capacity_range_problem(2.5, 2) == "must not exceed max_capacity_acu (2), got 2.5"


@pytest.mark.parametrize(
    ("days", "problem"),
    [
        (1, None),
        (35, None),
        (0, "must be 1 to 35 (RDS keeps automated backups at least a day), got 0"),
        (36, "must be 1 to 35 (RDS keeps automated backups at least a day), got 36"),
    ],
)
def test_database_backups(days: int, problem: str | None) -> None:
    assert accounting.backup_retention_problem(days) == problem


@pytest.mark.parametrize(
    ("days", "problem"),
    [
        (1, None),
        (1000, None),
        (0, "must be 1 to 1000 days (Secrets Manager's rotation schedule), got 0"),
        (1001, "must be 1 to 1000 days (Secrets Manager's rotation schedule), got 1001"),
        (True, "must be 1 to 1000 days (Secrets Manager's rotation schedule), got True"),
    ],
)
def test_password_rotation(days: int, problem: str | None) -> None:
    assert accounting.rotation_days_problem(days) == problem


# --------------------------------------------------------------------------------------------------
# PCS: moved from the construct


def test_a_pcs_cluster_has_a_compute_node_group() -> None:
    assert pcs.node_groups_problem(1) is None
    assert pcs.node_groups_problem(0) == "must hold at least one compute node group"


def test_efa_interfaces_need_efa_on() -> None:
    assert pcs.efa_interfaces_enabled_problem(True, "p5.48xlarge", "gpu") is None
    assert pcs.efa_interfaces_enabled_problem(False, "c5n.9xlarge", "compute") == (
        "applies only with EFA, but c5n.9xlarge in 'compute' has EFA off"
    )


def test_login_nodes_are_zero_or_more() -> None:
    assert pcs.login_count_problem(0) is None
    assert pcs.login_count_problem(-1) == "must be 0 or more, got -1"


def test_queues_when_given_hold_one() -> None:
    assert pcs.queues_problem(None) is None
    assert pcs.queues_problem(1) is None
    assert pcs.queues_problem(0) == "must hold at least one queue when given; omit it for one per group"


# --------------------------------------------------------------------------------------------------
# downloads: pins and release manifests

DIGEST = "0123456789abcdef" * 4


def test_download_pins_map_https_urls_to_digests() -> None:
    assert downloads.download_pins_problem({}) is None
    assert downloads.download_pins_problem(["x"]) == "must map https:// URLs to SHA-256 digests, got ['x']"
    assert downloads.pinned_url_problem("https://example.com/a.tar.gz") is None
    for url in ("http://example.com/a", "https://example.com/a b", "https://", 5):
        assert downloads.pinned_url_problem(url) == f"keys must be https:// URLs without spaces, got {url!r}"


@pytest.mark.parametrize("digest", [DIGEST, DIGEST.upper()])
def test_a_sha256_is_sixty_four_hex_digits(digest: str) -> None:
    assert downloads.sha256_problem(digest) is None


@pytest.mark.parametrize("digest", [DIGEST[:63], DIGEST + "0", "g" * 64, f"sha256:{DIGEST}", None])
def test_other_digests_are_refused(digest: object) -> None:
    assert downloads.sha256_problem(digest) == f"must be 64 hexadecimal digits, got {digest!r}"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://github.com/kubeflow/mpi-operator/raw/v0.7.0/deploy/v2beta1/mpi-operator.yaml", None),
        ("http://example.com/v1/a.yaml", "must be an https:// URL, got 'http://example.com/v1/a.yaml'"),
        (
            "https://github.com/x/y/raw/master/a.yaml",
            "must point at a release tag, not master/main/latest/HEAD, got 'https://github.com/x/y/raw/master/a.yaml'",
        ),
        (
            "https://github.com/x/y/releases/latest/download/a.yaml",
            "must point at a release tag, not master/main/latest/HEAD, got "
            "'https://github.com/x/y/releases/latest/download/a.yaml'",
        ),
    ],
)
def test_a_release_manifest_is_fetched_over_https_at_a_tag(url: str, problem: str | None) -> None:
    assert downloads.release_url_problem(url) == problem


def test_release_tags_and_their_digests() -> None:
    assert downloads.release_tag_problem("v0.7.0") is None
    assert downloads.release_tag_problem("0.7.0") == "must be a release tag such as v0.7.0, got '0.7.0'"
    assert downloads.release_tag_problem("v0.7") == "must be a release tag such as v0.7.0, got 'v0.7'"
    assert downloads.mpi_operator_digest_problem("v9.9.9", DIGEST, ["v0.7.0"]) is None
    assert downloads.mpi_operator_digest_problem("v9.9.9", None, ["v0.7.0", "v0.6.0"]) == (
        "is required for version 'v9.9.9', which has no pinned digest (pinned: v0.6.0, v0.7.0): pass the SHA-256 "
        "of its mpi-operator.yaml"
    )


# --------------------------------------------------------------------------------------------------
# HyperPod: the cluster's groups, orchestrator and lifecycle scripts


def test_a_hyperpod_cluster_has_a_group() -> None:
    assert hyperpod.groups_problem(1) is None
    assert hyperpod.groups_problem(0) == "must hold at least one group, got none"


@pytest.mark.parametrize(("slurm", "given"), [(True, False), (True, True), (False, True)])
def test_lifecycle_scripts_are_shipped_for_slurm_only(slurm: bool, given: bool) -> None:
    assert hyperpod.lifecycle_scripts_required_problem(slurm, given) is None


def test_an_eks_cluster_brings_its_lifecycle_scripts() -> None:
    assert hyperpod.lifecycle_scripts_required_problem(False, False) == (
        "is required with the EKS orchestrator: the shipped lifecycle scripts configure Slurm nodes"
    )


@pytest.mark.parametrize(
    ("state", "tail"),
    [
        (None, None),
        ("missing", "which does not exist"),
        ("file", "a file"),
        ("no entry", "which has no on_create.sh"),
    ],
)
def test_a_scripts_folder_holds_its_entry_script(state: str | None, tail: str | None) -> None:
    found = hyperpod.scripts_folder_problem("/s", "on_create.sh", state)
    expected = None
    if tail is not None:
        expected = (
            f"must be a folder holding on_create.sh, the script HyperPod runs on every node, got '/s', {tail}"
        )
    assert found == expected


def test_extra_steps_go_with_the_shipped_scripts() -> None:
    assert hyperpod.extra_steps_problem(None, "on_create.sh") is None
    assert hyperpod.extra_steps_problem("/s", "on_create.sh") == (
        "are run by the shipped on_create.sh, so they cannot go with lifecycle_scripts_dir '/s': call your scripts "
        "from your own on_create.sh, or leave lifecycle_scripts_dir out"
    )


def test_keys_the_construct_writes_are_refused_in_extra() -> None:
    assert hyperpod.owned_keys_problem([]) is None
    assert hyperpod.owned_keys_problem([("a", "p"), ("b", "q")]) == (
        "sets a (set by p), b (set by q), which the construct writes itself from the props that check them; set "
        "those props instead"
    )


def test_extra_keys_the_scripts_read() -> None:
    provisioning = frozenset({"controller_group"})
    known = frozenset({"x", "y"})
    assert hyperpod.extra_key_problem("x", True, provisioning, known) is None
    assert hyperpod.extra_key_problem("controller_group", False, provisioning, known | provisioning) is None
    assert hyperpod.extra_key_problem("controller_group", True, provisioning, known) == (
        "holds 'controller_group', a key of provisioning_parameters.json, which an API-driven cluster "
        "(slurm_config api) does not upload"
    )
    assert hyperpod.extra_key_problem("z", True, provisioning, known) == (
        "holds 'z', which the shipped lifecycle scripts do not read; allowed: x, y"
    )


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("a", True),
        ("a" * 63, True),
        ("a_b-1", True),
        ("a" * 64, False),
        ("-a", False),
        ("", False),
        (5, False),
    ],
)
def test_a_step_name(name: object, ok: bool) -> None:
    expected = (
        None
        if ok
        else f"must be 1-63 letters, digits, '-' or '_' starting with a letter or digit, got '{name}'"
    )
    assert hyperpod.step_name_problem(name) == expected


def test_a_step_is_a_script_of_ones_own() -> None:
    assert hyperpod.step_script_problem("s.sh", None) is None
    assert hyperpod.step_script_problem("d", "folder") == "must be a script file, got 'd', a folder"
    assert (
        hyperpod.step_script_problem("m", "missing") == "must be a script file, got 'm', which does not exist"
    )
    assert hyperpod.shipped_step_problem("s.sh", False, "on_create.sh") is None
    assert hyperpod.shipped_step_problem("on_create.sh", True, "on_create.sh") == (
        "must be a script of your own, not on_create.sh or another shipped lifecycle script (the shipped "
        "on_create.sh runs every step, so the step would run it again without end), got 'on_create.sh'"
    )


@pytest.mark.parametrize(("roles", "ok"), [(None, True), (["WORKER"], True), ([], False), ("WORKER", False)])
def test_step_roles(roles: object, ok: bool) -> None:
    expected = None if ok else f"must be a list of R (leave it out for every role), got {roles!r}"
    assert hyperpod.step_roles_problem(roles, "R") == expected


@pytest.mark.parametrize(
    ("own", "slurm", "ok"), [(False, True, True), (True, True, False), (False, False, False)]
)
def test_what_the_shipped_slurm_scripts_set_up(own: bool, slurm: bool, ok: bool) -> None:
    accounting = hyperpod.slurm_lifecycle_problem("LOCAL", own, slurm)
    users = hyperpod.users_problem(own, slurm)
    if ok:
        assert (accounting, users) == (None, None)
    else:
        assert accounting == (
            "is set up by the shipped Slurm lifecycle scripts, so it cannot go with lifecycle_scripts_dir or the "
            "EKS orchestrator, got LOCAL"
        )
        assert users == (
            "are created by the shipped Slurm lifecycle scripts, so they cannot go with lifecycle_scripts_dir or "
            "the EKS orchestrator"
        )


def test_slurm_settings_on_eks() -> None:
    assert hyperpod.slurm_only_problem("api", slurm=True) is None
    assert hyperpod.slurm_only_problem(None, slurm=False) is None
    assert hyperpod.slurm_only_problem("api", slurm=False) == (
        "applies to the Slurm orchestrator only, got api with the EKS orchestrator"
    )


# --------------------------------------------------------------------------------------------------
# HyperPod on EKS, task governance and EKS queues: moved from the constructs


def test_hyperpod_eks_counts() -> None:
    assert hyperpod_eks.instance_types_problem(1) is None
    assert hyperpod_eks.instance_types_problem(0) == "must name at least one ml. instance type, got none"
    assert hyperpod_eks.fixed_count_problem(1) is None
    assert hyperpod_eks.fixed_count_problem(0) == "must be 1 or more, got 0"


def test_governance_teams() -> None:
    assert hyperpod_governance.teams_problem(1) is None
    assert hyperpod_governance.teams_problem(0) == "must hold at least one team, got none"
    assert hyperpod_governance.team_key_problem("a", ["a", "b"]) is None
    assert hyperpod_governance.team_key_problem("c", ["a", "b"]) == "must name one of the teams (a, b)"


def test_eks_queue_namespaces_and_nodegroups() -> None:
    assert eks_queues.namespaces_problem(1) is None
    assert eks_queues.namespaces_problem(0) == "must name at least one namespace, got none"
    assert eks_queues.team_role_namespace_problem("ml", ["ml", "cv"]) is None
    assert eks_queues.team_role_namespace_problem("nlp", ["ml", "cv"]) == (
        "must name one of the team namespaces (ml, cv), got 'nlp'"
    )
    assert eks_queues.gpu_nodegroups_problem(True, ["gpu"]) is None
    assert eks_queues.gpu_nodegroups_problem(False, ["cpu"]) == (
        "must include a nodegroup with NVIDIA GPUs to queue for, got cpu"
    )
    assert eks_queues.gpu_nodegroups_problem(False, []) == (
        "must include a nodegroup with NVIDIA GPUs to queue for, got none"
    )
    assert eks_queues.efa_gpu_nodegroups_problem(True, ["p5"]) is None
    assert eks_queues.efa_gpu_nodegroups_problem(False, ["g5", "m5"]) == (
        "must include an EFA nodegroup with NVIDIA GPUs, got g5, m5"
    )


# --------------------------------------------------------------------------------------------------
# eks_addons


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("v1.6.0-eksbuild.1", None),
        ("v10.20.30-eksbuild.40", None),
        ("1.6.0", "must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), got '1.6.0'"),
        ("v1.6.0", "must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), got 'v1.6.0'"),
        (
            "v1.6-eksbuild.1",
            "must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), got 'v1.6-eksbuild.1'",
        ),
        # the whole value, not a part of it
        (
            "v1.6.0-eksbuild.1 ",
            "must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), got 'v1.6.0-eksbuild.1 '",
        ),
        (
            "xv1.6.0-eksbuild.1",
            "must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), got 'xv1.6.0-eksbuild.1'",
        ),
    ],
)
def test_an_addon_version_is_in_the_form_eks_lists(version: str, expected: str | None) -> None:
    assert eks_addons.addon_version_problem(version) == expected


def test_an_addon_version_of_a_hostile_length_is_quoted_as_an_excerpt() -> None:
    version = "v" * 10_000
    assert eks_addons.addon_version_problem(version) == (
        f"must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), got {excerpt(version)}"
    )


def test_task_governance_and_the_csi_drivers_share_one_addon_version_rule() -> None:
    assert hyperpod_governance.addon_version_problem is eks_addons.addon_version_problem


def test_a_device_plugin_serves_at_least_one_instance_type_each_with_its_feature() -> None:
    assert eks_addons.addon_instance_types_problem("GPU", ["g5.xlarge"]) is None
    assert eks_addons.addon_instance_types_problem("GPU", []) == (
        "must name at least one GPU instance type, got none"
    )
    assert eks_addons.addon_instance_types_problem("EFA", ()) == (
        "must name at least one EFA instance type, got none"
    )
    assert eks_addons.addon_instance_type_problem("g5.xlarge", "GPU", "NVIDIA GPU", has_feature=True) is None
    assert eks_addons.addon_instance_type_problem("m5.large", "GPU", "NVIDIA GPU", has_feature=False) == (
        "'m5.large' has no NVIDIA GPU; give GPU instance types (`training-clusters catalog` lists them)"
    )


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("k", "", None),
        ("k" * 128, "v" * 256, None),
        ("AWS", "v", None),  # only the aws: prefix is reserved
        ("team:aws:x", "v", None),
        (
            "",
            "v",
            "keys must be 1-128 characters without '=' or ',' and not start with 'aws:', got ''",
        ),
        (
            "k" * 129,
            "v",
            f"keys must be 1-128 characters without '=' or ',' and not start with 'aws:', got {'k' * 129!r}",
        ),
        (
            "aws:owner",
            "v",
            "keys must be 1-128 characters without '=' or ',' and not start with 'aws:', got 'aws:owner'",
        ),
        (
            "AWS:owner",
            "v",
            "keys must be 1-128 characters without '=' or ',' and not start with 'aws:', got 'AWS:owner'",
        ),
        ("a=b", "v", "keys must be 1-128 characters without '=' or ',' and not start with 'aws:', got 'a=b'"),
        ("a,b", "v", "keys must be 1-128 characters without '=' or ',' and not start with 'aws:', got 'a,b'"),
        (
            "k",
            "v" * 257,
            f"values must be at most 256 characters without '=' or ',', got 'k': {'v' * 257!r}",
        ),
        ("k", "a=b", "values must be at most 256 characters without '=' or ',', got 'k': 'a=b'"),
        ("k", "a,b", "values must be at most 256 characters without '=' or ',', got 'k': 'a,b'"),
    ],
)
def test_an_ebs_volume_tag_keeps_ec2s_limits_and_the_drivers_pairs(
    key: str, value: str, expected: str | None
) -> None:
    assert eks_addons.volume_tag_problem(key, value) == expected


def test_the_efa_device_plugin_needs_a_known_registry_or_a_repository() -> None:
    assert (
        eks_addons.efa_registry_problem("us-east-1", "602401143452.dkr.ecr.us-east-1.amazonaws.com") is None
    )
    assert eks_addons.efa_registry_problem("xx-nowhere-1", None) == (
        "is required in xx-nowhere-1, a region without an EKS add-on registry in this library's table; "
        "give the EFA device plugin's repository in your region's EKS registry "
        "(https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html)"
    )


@pytest.mark.parametrize(
    ("capacity", "known", "expected"),
    [
        (None, 1200, None),
        (1200, 1200, None),
        (2400, None, None),
        (
            None,
            None,
            "is required for an adopted file system whose ExistingLustre gives no storage_capacity_gib",
        ),
        (2400, 1200, "must match the file system's storage_capacity_gib (1200) or be omitted, got 2400"),
        (1199, 1200, "must match the file system's storage_capacity_gib (1200) or be omitted, got 1199"),
    ],
)
def test_the_fsx_volume_capacity_is_the_file_systems(
    capacity: int | None, known: int | None, expected: str | None
) -> None:
    assert eks_addons.fsx_volume_capacity_problem(capacity, known) == expected


def test_grafana_needs_prometheus() -> None:
    assert eks_addons.grafana_problem(grafana=True, prometheus=True) is None
    assert eks_addons.grafana_problem(grafana=False, prometheus=True) is None
    assert eks_addons.grafana_problem(grafana=False, prometheus=False) is None
    assert eks_addons.grafana_problem(grafana=True, prometheus=False) == (
        "needs prometheus (Grafana's data source), got prometheus=False"
    )


def test_monitoring_mig_layouts_need_a_mig_strategy() -> None:
    for strategy in (MigStrategy.SINGLE, MigStrategy.MIXED):
        assert eks_addons.monitoring_mig_strategy_problem(strategy, has_layouts=True) is None
    assert eks_addons.monitoring_mig_strategy_problem(MigStrategy.NONE, has_layouts=False) is None
    assert eks_addons.monitoring_mig_strategy_problem(MigStrategy.NONE, has_layouts=True) == (
        "must be SINGLE or MIXED with mig_layouts, got NONE"
    )


def test_monitoring_takes_a_file_system_only_for_grafana() -> None:
    assert eks_addons.monitoring_lustre_problem(lustre=True, grafana=True) is None
    assert eks_addons.monitoring_lustre_problem(lustre=False, grafana=False) is None
    assert eks_addons.monitoring_lustre_problem(lustre=True, grafana=False) == (
        "is shown on Grafana's FSx dashboard and needs grafana=True, got grafana=False"
    )


def test_monitoring_takes_an_ebs_csi_driver_only_for_persistent_storage() -> None:
    assert eks_addons.monitoring_ebs_csi_driver_problem(ebs_csi_driver=True, persistent_storage=True) is None
    assert (
        eks_addons.monitoring_ebs_csi_driver_problem(ebs_csi_driver=False, persistent_storage=False) is None
    )
    assert eks_addons.monitoring_ebs_csi_driver_problem(ebs_csi_driver=False, persistent_storage=True) is None
    assert eks_addons.monitoring_ebs_csi_driver_problem(ebs_csi_driver=True, persistent_storage=False) == (
        "is only used to persist metrics; got one with persistent_storage=False"
    )


def test_a_monitoring_volume_is_one_gib_or_more() -> None:
    assert eks_addons.monitoring_volume_problem(1) is None
    assert eks_addons.monitoring_volume_problem(0) == "must be 1 or more, got 0"
    assert eks_addons.monitoring_volume_problem(-5) == "must be 1 or more, got -5"
