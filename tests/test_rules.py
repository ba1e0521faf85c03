"""Rules every service shares (training_clusters/rules/common.py), tested once here; each construct's tests
keep one case of its own wording."""

from __future__ import annotations

import re

import pytest

from training_clusters.rules.common import SYSTEM_MOUNT_DIRS, mount_dir_problem, pattern_problem

RESERVED = "is reserved by the operating system or Slurm; use e.g. /fsx or /shared"


@pytest.mark.parametrize(
    ("mount_dir", "problem"),
    [
        ("/fsx", None),
        ("/shared/datasets", None),
        ("/opt/data", None),  # /opt itself is the system's, a folder under it is not a system tree
        ("shared", "must be an absolute directory such as /fsx, got 'shared'"),
        ("/", "must be an absolute directory such as /fsx, got '/'"),
        ("/fsx/", "must be an absolute directory such as /fsx, got '/fsx/'"),
        ("/shared/../etc", "must not contain '.' or '..' segments, got '/shared/../etc'"),
        ("/./fsx", "must not contain '.' or '..' segments, got '/./fsx'"),
        ("/etc", f"'/etc' {RESERVED}"),
        ("/etc/ssh", f"'/etc/ssh' {RESERVED}"),
        ("/home", f"'/home' {RESERVED}"),
        ("/opt/slurm", f"'/opt/slurm' {RESERVED}"),
        ("/var", f"'/var' {RESERVED}"),
        ("/var/lib", f"'/var/lib' {RESERVED}"),  # the packages' state, Docker's images
        ("/var/lib/docker", f"'/var/lib/docker' {RESERVED}"),
        ("/variable", None),  # a tree's name as a prefix of another folder's is not inside it
        ("/opt/dlami/nvme", f"'/opt/dlami/nvme' {RESERVED}"),
        ("/opt/amazon/efa", f"'/opt/amazon/efa' {RESERVED}"),
        ("/opt/parallelcluster", None),  # ParallelCluster's own rule refuses it, when the stack is built
        ("/snap/bin", f"'/snap/bin' {RESERVED}"),
        ("/sys/fs/cgroup", f"'/sys/fs/cgroup' {RESERVED}"),
        ("/proc/self", f"'/proc/self' {RESERVED}"),
        ("/boot/efi", f"'/boot/efi' {RESERVED}"),
        ("/dev/shm", f"'/dev/shm' {RESERVED}"),
        ("/root/data", f"'/root/data' {RESERVED}"),
        ("/run/user", f"'/run/user' {RESERVED}"),
        ("/bin/x", f"'/bin/x' {RESERVED}"),
        ("/usr/local", f"'/usr/local' {RESERVED}"),
    ],
)
def test_a_mount_dir_is_an_absolute_directory_the_system_does_not_own(
    mount_dir: str, problem: str | None
) -> None:
    assert mount_dir_problem(mount_dir) == problem


def test_a_service_adds_its_own_folders_and_words() -> None:
    problem = mount_dir_problem(
        "/opt/aws", reserved=SYSTEM_MOUNT_DIRS | {"/opt/aws"}, reserved_by="belongs to PCS", example="/shared"
    )
    assert problem == "'/opt/aws' belongs to PCS; use e.g. /shared or /fsx"


def test_a_pattern_rule_shows_the_value_as_a_bounded_excerpt() -> None:
    name = re.compile(r"^[a-z]+$")
    assert pattern_problem("abc", name, "must be letters") is None
    assert pattern_problem("abcd", name, "must be letters", max_length=3) == "must be letters, got 'abcd'"
    assert pattern_problem("it's", name, "must be letters") == 'must be letters, got "it\'s"'
    long = pattern_problem("A" * 500, name, "must be letters")
    assert long is not None and long.endswith("... (500 characters)") and len(long) < 150


@pytest.mark.parametrize(
    ("types", "placed"),
    [
        ([], False),
        (["p5.48xlarge"], True),
        (["trn2.48xlarge", "p5en.48xlarge"], True),
        (["p5.48xlarge", "c5n.9xlarge"], False),  # one type EC2 does not place keeps the queue flat
        (["c5n.9xlarge"], False),
    ],
)
def test_a_queue_is_placed_by_topology_only_when_every_type_is(types: list[str], placed: bool) -> None:
    from training_clusters.catalog import lookup
    from training_clusters.rules.parallelcluster import placed_by_topology

    assert placed_by_topology([lookup(name) for name in types]) is placed


def test_a_topology_plugin_of_ones_own_is_refused_only_by_name() -> None:
    from training_clusters.rules.parallelcluster import topology_plugin_problem

    assert topology_plugin_problem({"PriorityType": "priority/multifactor"}) is None
    assert topology_plugin_problem({"TopologyPlugin": "topology/block"}) == (
        "must not set TopologyPlugin while topology is tree (the head node writes topology.conf for "
        "topology/tree); set topology to off to choose your own plugin"
    )
