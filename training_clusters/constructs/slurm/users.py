"""TeamUser: a Linux user created alike on every node of a Slurm cluster (HyperPod now, ParallelCluster next).

Plain data, free of CDK: the constructs take a list of these, check them with the rules of
:mod:`training_clusters.rules.users` (the environment file's ``users:`` uses the same rules) and hand them to
the nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from training_clusters.rules import users as user_rules


@dataclass(frozen=True)
class TeamUser:
    """A team member with the same name, uid and gid on every node and a home on the shared file system.

    :param name: Linux user name: a lower-case letter or ``_``, then lower-case letters, digits, ``_`` or
        ``-``, at most 32; not one that confers rights on the nodes (``docker``, ``sudo``, ``wheel`` ...) or
        that the images, Slurm or the node scripts use (``ubuntu``, ``slurm``, ``enroot`` ...): see
        :mod:`training_clusters.rules.users`. The same holds for ``groups``' names.
    :param uid: 2000-59999, the same on every node.
    :param gid: Of the user's primary group, named like the user. Default: the uid.
    :param groups: Supplementary groups, name to gid. Default: none.
    :param ssh_public_keys: OpenSSH public keys allowed to log in as the user
        (``ssh-ed25519 AAAA... comment``). Default: none (the user still gets a key pair of its own for
        ``srun`` / ``mpirun`` between nodes).
    """

    name: str
    uid: int
    gid: int | None = None
    groups: Mapping[str, int] = field(default_factory=dict)
    ssh_public_keys: Sequence[str] = ()

    @property
    def primary_gid(self) -> int:
        """``gid``, else the uid."""
        return self.uid if self.gid is None else self.gid

    def problems(self) -> list[tuple[str, str]]:
        """``(field, sentence)`` for each rule the user breaks (field relative to the user)."""
        found: list[tuple[str, str]] = []
        for where, problem in (
            ("name", user_rules.name_problem(self.name)),
            ("uid", user_rules.id_problem(self.uid)),
            ("gid", None if self.gid is None else user_rules.id_problem(self.gid)),
        ):
            if problem:
                found.append((where, problem))
        for name, gid in self.groups.items():
            problem = user_rules.name_problem(name) or user_rules.id_problem(gid)
            if problem:
                found.append((f"groups[{name!r}]", problem))
        for index, key in enumerate(self.ssh_public_keys):
            problem = user_rules.ssh_public_key_problem(key)
            if problem:
                found.append((f"ssh_public_keys[{index}]", problem))
        return found

    def settings(self) -> dict[str, Any]:
        """The user as the nodes' scripts read it (HyperPod's ``training_clusters.json`` ``users``)."""
        return {
            "name": self.name,
            "uid": self.uid,
            "gid": self.primary_gid,
            "groups": [{"name": name, "gid": gid} for name, gid in self.groups.items()],
            "ssh_public_keys": list(self.ssh_public_keys),
        }


def team_problem(users: Sequence[TeamUser]) -> tuple[str, str] | None:
    """``(field, sentence)`` for the first rule a list of users breaks, else None: each user's own rules, names
    and uids used once, one gid per group across users."""
    for index, user in enumerate(users):
        for where, problem in user.problems():
            return f"[{index}].{where}", problem
    for attribute in ("name", "uid"):
        seen: set[object] = set()
        for index, user in enumerate(users):
            value = getattr(user, attribute)
            if value in seen:
                return f"[{index}].{attribute}", f"{value!r} is already given to another user"
            seen.add(value)
    groups = user_rules.group_ids_problem(
        group for user in users for group in [(user.name, user.primary_gid), *user.groups.items()]
    )
    return ("", groups) if groups else None
