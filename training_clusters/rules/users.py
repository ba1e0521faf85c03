"""The team's Linux users, created alike on every node by ParallelCluster or HyperPod: rules, free of CDK.

Every node must give a user the same uid and gid, or files on the shared file system change owner between
nodes; ids therefore come from the environment file, never from ``useradd``'s next free number. Names follow
``useradd``'s default ``NAME_REGEX`` (shadow-utils); ids stay clear of the images' own users (ParallelCluster's
and HyperPod's default users are uid 1000, ``nobody`` is 65534). Each ``*_problem`` function returns ``None``
when the value is fine, else the sentence that explains what is allowed; the caller prefixes the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from training_clusters.rules.common import pattern_problem

#: ``useradd``'s default NAME_REGEX, at most 32 characters.
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
#: uids and gids the environment file may give: above the images' default users, below ``nobody``.
MIN_ID, MAX_ID = 2000, 59999
#: Names the images, Slurm or the orchestrators already use.
RESERVED_NAMES = ("root", "ec2-user", "ubuntu", "rocky", "slurm", "munge", "nobody", "pcluster-admin", "dcv")
#: One OpenSSH public key line (``ssh-ed25519 AAAA... comment``), the key types OpenSSH 8+ accepts by default.
SSH_PUBLIC_KEY = re.compile(
    r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|"
    r"sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\n\r]*)?$"
)


def name_problem(name: str) -> str | None:
    linux_name = "must be a Linux name: a lower-case letter or '_', then lower-case letters, digits, '_' or '-', at most 32"
    if problem := pattern_problem(name, USER_NAME, linux_name):
        return problem
    if name in RESERVED_NAMES:
        return f"'{name}' is already used by the images or Slurm; reserved are {', '.join(RESERVED_NAMES)}"
    return None


def id_problem(value: int) -> str | None:
    if not MIN_ID <= value <= MAX_ID:
        return (
            f"must be {MIN_ID} to {MAX_ID}, clear of the images' own users (uid 1000) and nobody (65534), "
            f"got {value}"
        )
    return None


def ssh_public_key_problem(key: str) -> str | None:
    if not SSH_PUBLIC_KEY.fullmatch(key):
        shown = key if len(key) <= 40 else key[:37] + "..."
        return f"must be one OpenSSH public key line ('ssh-ed25519 AAAA... comment'), got '{shown}'"
    return None


def group_ids_problem(groups: Iterable[tuple[str, int]]) -> str | None:
    """One gid per group name and one name per gid, across every user (primary and supplementary groups)."""
    by_name: dict[str, int] = {}
    by_id: dict[int, str] = {}
    for name, gid in groups:
        if by_name.setdefault(name, gid) != gid:
            return f"group '{name}' is given gids {by_name[name]} and {gid}; every node needs one"
        if by_id.setdefault(gid, name) != name:
            return f"gid {gid} is given to groups '{by_id[gid]}' and '{name}'; every node needs one"
    return None
