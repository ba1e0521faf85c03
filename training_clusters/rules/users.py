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

from training_clusters.model.errors import excerpt
from training_clusters.rules.common import pattern_problem

#: ``useradd``'s default NAME_REGEX, at most 32 characters.
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
#: uids and gids the environment file may give: above the images' default users, below ``nobody``.
MIN_ID, MAX_ID = 2000, 59999
#: Groups that confer root's power, or the system's, on the nodes, with what a member can do. A team user is
#: never one of them, nor named like one (a user's primary group takes the user's name).
PRIVILEGED_GROUPS = {
    "root": "uid and gid 0 are root's",
    "sudo": "members of sudo run any command as root (%sudo in Ubuntu's /etc/sudoers)",
    "admin": "members of admin run any command as root (%admin in Ubuntu's /etc/sudoers)",
    "wheel": "members of wheel run any command as root (%wheel in Amazon Linux's and Rocky's /etc/sudoers)",
    "docker": "members of docker drive the Docker daemon, which runs as root "
    "(docs.docker.com/engine/security/#docker-daemon-attack-surface)",
    "lxd": "members of lxd drive LXD, which runs as root (documentation.ubuntu.com/lxd, security)",
    "adm": "members of adm read every system log (Debian base-passwd)",
    "disk": "members of disk read and write the raw disks (Debian base-passwd)",
    "shadow": "members of shadow read /etc/shadow (Debian base-passwd)",
    "kmem": "members of kmem read kernel memory (Debian base-passwd)",
    "systemd-journal": "members of systemd-journal read every service's journal (systemd's sysusers.d)",
}
#: Users and groups the node images, their packages and our node scripts create, with who: a team user or group
#: of that name would take over their files or fail the node's setup. Ubuntu's static ones are Debian
#: base-passwd's passwd.master and group.master (salsa.debian.org/debian/base-passwd); Ubuntu's cloud image and
#: HyperPod's DLAMI add the default user ubuntu and the packages' service users; Amazon Linux ec2-user,
#: ec2-instance-connect, chrony, rpc and ssm-user (the SSM agent's, with sudo); ParallelCluster's cookbook
#: (github.com/aws/aws-parallelcluster-cookbook) pcluster-admin, slurm, slurmrestd, munge, dcv, dcvextauth; our
#: node scripts and add-ons enroot (the image cache's owner), prometheus, mysql.
_BASE_PASSWD = ("nobody", "nogroup", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp",
                "proxy", "www-data", "backup", "list", "irc", "gnats", "tty", "dialout", "fax", "voice", "cdrom",
                "floppy", "tape", "audio", "dip", "operator", "src", "utmp", "video", "sasl", "plugdev", "staff",
                "users")  # fmt: skip
_UBUNTU_IMAGES = ("ubuntu", "messagebus", "syslog", "sshd", "uuidd", "tcpdump", "tss", "landscape", "pollinate",
                  "fwupd-refresh", "usbmux", "dnsmasq", "polkitd", "nvidia-persistenced")  # fmt: skip
_OTHER_IMAGES = ("ec2-user", "ec2-instance-connect", "chrony", "rpc", "rpcuser", "ssm-user", "rocky")
_SLURM_CLUSTERS = ("pcluster-admin", "slurm", "slurmrestd", "munge", "dcv", "dcvextauth")
_OURS = ("enroot", "prometheus", "mysql")
SERVICE_USERS = {
    **dict.fromkeys(_BASE_PASSWD, "Debian base-passwd, on every Ubuntu node"),
    **dict.fromkeys(_UBUNTU_IMAGES, "Ubuntu's cloud image and HyperPod's DLAMI"),
    **dict.fromkeys(_OTHER_IMAGES, "Amazon Linux, Rocky Linux and the SSM agent"),
    **dict.fromkeys(_SLURM_CLUSTERS, "ParallelCluster and Slurm"),
    **dict.fromkeys(_OURS, "this library's node scripts and add-ons"),
}
#: Name prefixes of system users and groups: systemd's own (sysusers.d) and Debian's underscore convention.
SYSTEM_PREFIXES = {
    "systemd-": "systemd's own users and groups",
    "_": "the distributions' system users (_apt, _chrony)",
}
#: One OpenSSH public key line (``ssh-ed25519 AAAA... comment``), the key types OpenSSH 8+ accepts by default;
#: the comment is printable text (no control character: NUL, a tab, an escape would reach the nodes' files).
SSH_PUBLIC_KEY = re.compile(
    r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|"
    r"sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\x00-\x1f\x7f]*)?$"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def name_problem(name: str) -> str | None:
    """A team user's or group's name: a Linux name that confers nothing and takes nothing over on the nodes."""
    linux_name = "must be a Linux name: a lower-case letter or '_', then lower-case letters, digits, '_' or '-', at most 32"
    if problem := pattern_problem(name, USER_NAME, linux_name):
        return problem
    if name in PRIVILEGED_GROUPS:
        return f"'{name}' confers rights on the nodes: {PRIVILEGED_GROUPS[name]}; pick another name"
    if name in SERVICE_USERS:
        return f"'{name}' is already a user or group on the nodes ({SERVICE_USERS[name]}); pick another name"
    for prefix, owner in SYSTEM_PREFIXES.items():
        if name.startswith(prefix):
            return f"'{name}' starts with '{prefix}', kept for {owner}; pick another name"
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
        if SSH_PUBLIC_KEY.fullmatch(_CONTROL.sub("?", key)):
            comment = key.split(" ", 2)[2]
            return f"must have a comment without control characters, got the comment {excerpt(comment)}"
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
