"""Rules more than one service shares."""

from __future__ import annotations

import re
from collections.abc import Iterable

from training_clusters.model.errors import excerpt


def pattern_problem(
    value: str, pattern: re.Pattern[str], requirement: str, *, max_length: int | None = None
) -> str | None:
    """None when ``value`` matches ``pattern`` whole (and is at most ``max_length`` characters long), else
    ``"<requirement>, got <value as an excerpt>"``: names, ids and paths a service spells one way."""
    if pattern.fullmatch(value) and (max_length is None or len(value) <= max_length):
        return None
    return f"{requirement}, got {excerpt(value)}"


def duplicates_problem(names: Iterable[str]) -> str | None:
    """Names that must be unique (queues, compute resources, node groups)."""
    seen: set[str] = set()
    repeated: list[str] = []
    for name in names:
        if name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    if not repeated:
        return None
    return f"must be unique, got {', '.join(repr(n) for n in repeated)} more than once"


#: Folders of the operating system and Slurm on every node image this library targets: never a shared file
#: system's mount point (mounting over one hides what the node needs: ``/home`` holds the default user's SSH
#: keys, ``/opt/slurm`` Slurm itself).
SYSTEM_MOUNT_DIRS = frozenset(
    ("/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/opt/slurm", "/proc", "/root",
     "/run", "/sbin", "/snap", "/sys", "/tmp", "/usr", "/var")
)  # fmt: skip
#: System folders whose every subfolder is the system's too (``/etc/ssh``, ``/usr/local``; ``/var/lib``: the
#: packages' state, Docker's and containerd's images; ``/snap``: Ubuntu's snaps), and the vendors' folders under
#: ``/opt`` on the node images (Slurm; EFA's ``/opt/amazon``; ``/opt/aws``; the DLAMI's ``/opt/dlami/nvme``;
#: NVIDIA's). ParallelCluster's own ``/opt/parallelcluster`` is its rule's. Another folder under ``/opt``
#: (``/opt/data``) is a user's to choose.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/opt/amazon", "/opt/aws", "/opt/dlami",
                "/opt/nvidia", "/opt/slurm", "/proc", "/root", "/run", "/sbin", "/snap", "/sys", "/usr",
                "/var")  # fmt: skip
_MOUNT_DIR = re.compile(r"^/[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


def mount_dir_problem(
    mount_dir: str,
    *,
    reserved: Iterable[str] = SYSTEM_MOUNT_DIRS,
    reserved_by: str = "is reserved by the operating system or Slurm",
    example: str = "/fsx",
) -> str | None:
    """Where every node mounts a shared file system: an absolute directory without ``.`` or ``..`` segments
    (no ``/``), neither one of the ``reserved`` folders nor inside a :data:`SYSTEM_TREES` folder.

    ``reserved_by`` and ``example`` word the message for a service (``"is reserved by the operating system
    or ParallelCluster"``, ``"/shared"``); every service's ``reserved`` holds :data:`SYSTEM_MOUNT_DIRS`.
    """
    if not _MOUNT_DIR.fullmatch(mount_dir):
        return f"must be an absolute directory such as {example}, got {excerpt(mount_dir)}"
    if any(part in (".", "..") for part in mount_dir.split("/")):
        return f"must not contain '.' or '..' segments, got {excerpt(mount_dir)}"
    if mount_dir in reserved or any(
        mount_dir == tree or mount_dir.startswith(f"{tree}/") for tree in SYSTEM_TREES
    ):
        other = next(choice for choice in ("/fsx", "/shared") if choice != example)
        return f"{excerpt(mount_dir)} {reserved_by}; use e.g. {example} or {other}"
    return None
