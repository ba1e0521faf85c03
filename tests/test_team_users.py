"""The team's users in the environment file: one exact message per rule, ids consistent across users."""

from __future__ import annotations

from typing import Any

import pytest

from training_clusters.config import parse_environment
from training_clusters.model.errors import ConfigurationError

BASE: dict[str, Any] = {"region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"]}
PCLUSTER = {"queues": [{"name": "cpu", "compute_resources": [{"name": "c5", "instance_type": "c5.xlarge"}]}]}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0ZXN0a2V5Zm9ydGhldGVhbXVzZXJzMDEyMzQ1Njc4OQ alice@laptop"


def _document(users: list[dict[str, Any]], **sections: Any) -> dict[str, Any]:
    return {**BASE, "parallelcluster": PCLUSTER, **sections, "users": users}


def test_users_default_their_gid_to_the_uid_and_carry_groups_and_keys() -> None:
    config = parse_environment(
        _document(
            [
                {
                    "name": "alice",
                    "uid": 2001,
                    "groups": [{"name": "ml", "gid": 3000}],
                    "ssh_public_keys": [KEY],
                },
                {"name": "bob", "uid": 2002, "gid": 2102, "groups": [{"name": "ml", "gid": 3000}]},
            ]
        )
    )
    alice, bob = config.users
    assert (alice.primary_gid, bob.primary_gid) == (2001, 2102)
    assert alice.all_groups() == [("alice", 2001), ("ml", 3000)]
    assert alice.ssh_public_keys == [KEY]


def test_no_users_is_the_default() -> None:
    assert parse_environment({**BASE, "parallelcluster": PCLUSTER}).users == []


@pytest.mark.parametrize(
    ("users", "message"),
    [
        (
            [{"name": "Alice", "uid": 2001}],
            "users.0.name: must be a Linux name: a lower-case letter or '_', then lower-case "
            "letters, digits, '_' or '-', at most 32, got 'Alice'",
        ),
        (
            [{"name": "ubuntu", "uid": 2001}],
            "users.0.name: 'ubuntu' is already a user or group on the nodes (Ubuntu's cloud image and "
            "HyperPod's DLAMI); pick another name",
        ),
        (
            [{"name": "alice", "uid": 2001, "groups": [{"name": "docker", "gid": 3000}]}],
            "users.0.groups.0.name: 'docker' confers rights on the nodes: members of docker drive the Docker "
            "daemon, which runs as root (docs.docker.com/engine/security/#docker-daemon-attack-surface); pick "
            "another name",
        ),
        (
            [{"name": "alice", "uid": 2001, "ssh_public_keys": ["ssh-ed25519 AAAAC3Nz alice\x00@laptop"]}],
            "users.0.ssh_public_keys: [0] must have a comment without control characters, got the comment "
            "'alice\\x00@laptop'",
        ),
        (
            [{"name": "alice", "uid": 1000}],
            "users.0.uid: must be 2000 to 59999, clear of the images' own users (uid 1000) and "
            "nobody (65534), got 1000",
        ),
        (
            [{"name": "alice", "uid": 2001, "groups": [{"name": "ml", "gid": 70000}]}],
            "users.0.groups.0.gid: must be 2000 to 59999, clear of the images' own users (uid "
            "1000) and nobody (65534), got 70000",
        ),
        (
            [{"name": "alice", "uid": 2001, "ssh_public_keys": ["AAAAC3Nza alice"]}],
            "users.0.ssh_public_keys: [0] must be one OpenSSH public key line ('ssh-ed25519 "
            "AAAA... comment'), got 'AAAAC3Nza alice'",
        ),
        (
            [{"name": "alice", "uid": 2001}, {"name": "alice", "uid": 2002}],
            "users: [1].name 'alice' is already given to another user",
        ),
        (
            [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2001, "gid": 2500}],
            "users: [1].uid 2001 is already given to another user",
        ),
        (
            [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002, "gid": 2001}],
            "users: gid 2001 is given to groups 'alice' and 'bob'; every node needs one",
        ),
        (
            [
                {"name": "alice", "uid": 2001, "groups": [{"name": "ml", "gid": 3000}]},
                {"name": "bob", "uid": 2002, "groups": [{"name": "ml", "gid": 3001}]},
            ],
            "users: group 'ml' is given gids 3000 and 3001; every node needs one",
        ),
        (
            [{"name": "alice", "uid": 2001, "shell": "/bin/zsh"}],
            "users.0.shell: unknown key (got value '/bin/zsh')",
        ),
    ],
)
def test_bad_users_name_the_field_the_value_and_what_is_allowed(
    users: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(_document(users), source="env.yaml")
    assert message in str(error.value), str(error.value)


def test_users_need_a_cluster_that_creates_them() -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment({**BASE, "users": [{"name": "alice", "uid": 2001}]}, source="env.yaml")
    assert (
        "users: are created on the nodes of a hyperpod or parallelcluster cluster; add one of those sections "
        "or remove users"
    ) in str(error.value)
