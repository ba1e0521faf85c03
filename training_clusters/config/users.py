"""``users`` and ``groups``: the Linux accounts created alike on every node of a Slurm cluster."""

from __future__ import annotations

from pydantic import (
    Field,
    field_validator,
)

from training_clusters.config.base import _follows, _Model, _raise_if
from training_clusters.orchestrators import ORCHESTRATORS
from training_clusters.rules import users as user_rules

#: The orchestrators that create ``users`` on their nodes.
USER_ORCHESTRATORS = tuple(section for section, entry in ORCHESTRATORS.items() if entry.team_users)


class UserGroupConfig(_Model):
    """A supplementary group of a user, with the gid it has on every node."""

    name: str
    gid: int

    _name_shape = field_validator("name")(_follows(user_rules.name_problem))

    _gid_range = field_validator("gid")(_follows(user_rules.id_problem))


class UserConfig(_Model):
    """A team member: the same name, uid and gid on every node, home on the shared file system.

    The user's primary group has the user's name and ``gid``; ``groups`` adds supplementary ones.
    """

    name: str = Field(description="Linux user name: lower-case letters, digits, '_' or '-', at most 32.")
    uid: int = Field(description="2000-59999, the same on every node.")
    gid: int | None = Field(
        default=None, description="Of the user's primary group (named like the user). Default: the uid."
    )
    groups: list[UserGroupConfig] = Field(
        default_factory=list, description="Supplementary groups, each with its gid. Default: none."
    )
    ssh_public_keys: list[str] = Field(
        default_factory=list,
        description="OpenSSH public keys allowed to log in as the user ('ssh-ed25519 AAAA... comment').",
    )

    _name_shape = field_validator("name")(_follows(user_rules.name_problem))

    _id_range = field_validator("uid", "gid")(_follows(user_rules.id_problem))

    @field_validator("ssh_public_keys")
    @classmethod
    def _keys_shape(cls, value: list[str]) -> list[str]:
        for index, key in enumerate(value):
            _raise_if(user_rules.ssh_public_key_problem(key), f"[{index}]")
        return value

    @property
    def primary_gid(self) -> int:
        """The primary group's gid: ``gid``, else the uid."""
        return self.uid if self.gid is None else self.gid

    def all_groups(self) -> list[tuple[str, int]]:
        """``(name, gid)`` of the primary group, then of each supplementary group."""
        return [(self.name, self.primary_gid), *((g.name, g.gid) for g in self.groups)]


def _users_consistent(users: list[UserConfig]) -> list[UserConfig]:
    for field in ("name", "uid"):
        seen: set[object] = set()
        for index, user in enumerate(users):
            value = getattr(user, field)
            if value in seen:
                raise ValueError(f"[{index}].{field} {value!r} is already given to another user")
            seen.add(value)
    _raise_if(user_rules.group_ids_problem(g for user in users for g in user.all_groups()))
    return users


# --- instance types the file declares ---
