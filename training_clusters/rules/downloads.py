"""What is downloaded and how it is pinned: the synth warning for node downloads trusted on first use
(``training-clusters:unpinned-download``: which steps a HyperPod cluster turns on fetch something no digest
checks, and how to pin it, :data:`training_clusters.model.releases.BOOT_DOWNLOADS`, rendered as
docs/downloads.md), the ``download_sha256`` pins themselves, and the release manifests applied to EKS."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from training_clusters.model.releases import BOOT_DOWNLOADS, TRUSTED_ON_FIRST_USE, BootDownload

#: The warning's id (``training-clusters:`` prefixed), to acknowledge it with.
UNPINNED_DOWNLOAD_WARNING = "unpinned-download"
#: The ``LifecycleOptions`` flags whose steps download what ``download_sha256`` can pin, in the table's order.
LIFECYCLE_DOWNLOAD_OPTIONS: tuple[str, ...] = tuple(
    dict.fromkeys(row.lifecycle_option for row in BOOT_DOWNLOADS if row.lifecycle_option is not None)
)


def url_pattern(row: BootDownload) -> re.Pattern[str]:
    """The URLs a row's pattern stands for: ``<arch>`` and ``<installed version>`` any path segment,
    ``[+caps]`` present or not."""
    pattern = re.escape(row.url).replace(re.escape("[+caps]"), r"(\+caps)?")
    for placeholder in ("<arch>", "<installed version>"):
        pattern = pattern.replace(re.escape(placeholder), r"[^/]+")
    return re.compile(pattern)


def unpinned_download_advice(enabled: Iterable[str], pins: Mapping[str, object]) -> str | None:
    """The warning for the ``LifecycleOptions`` flags in ``enabled``, given ``download_sha256`` ``pins``: each
    download those steps make that is trusted on first use and matched by no pin, or None when there is none. A
    download counts as pinned once any pinned URL matches its pattern."""
    chosen = set(enabled)
    rows = [
        row
        for row in BOOT_DOWNLOADS
        if row.lifecycle_option in chosen
        and row.verified == TRUSTED_ON_FIRST_USE
        and not any(url_pattern(row).fullmatch(url) for url in pins)
    ]
    if not rows:
        return None
    options = sorted({f"lifecycle.{row.lifecycle_option}" for row in rows})
    downloads = "; ".join(f"{row.what.replace('`', '')} ({row.url})" for row in rows)
    return (
        f"{' and '.join(options)} download{'' if len(options) > 1 else 's'} as root at boot what no digest checks "
        f"(trusted on first use: HTTPS by tag): {downloads}. Pin each URL with lifecycle.extra['download_sha256'] "
        "({URL: SHA-256}; hyperpod: {download_sha256: ...} in an environment file); docs/downloads.md lists them"
    )


_PIN_URL = re.compile(r"https://[!-~]+")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
#: Branch names and moving tags: a URL holding one is not a release.
_UNPINNED = re.compile(r"/(master|main|latest|HEAD)/")
_RELEASE_TAG = re.compile(r"v\d+\.\d+\.\d+")


def download_pins_problem(pins: Any) -> str | None:
    """``download_sha256`` as a whole: a mapping (of URLs to digests)."""
    return None if isinstance(pins, Mapping) else f"must map https:// URLs to SHA-256 digests, got {pins!r}"


def pinned_url_problem(url: Any) -> str | None:
    """A ``download_sha256`` key: an https:// URL without spaces (the nodes' preflight compares it whole)."""
    if isinstance(url, str) and _PIN_URL.fullmatch(url):
        return None
    return f"keys must be https:// URLs without spaces, got {url!r}"


def sha256_problem(digest: Any) -> str | None:
    """A SHA-256 digest: 64 hexadecimal digits."""
    if isinstance(digest, str) and _SHA256.fullmatch(digest):
        return None
    return f"must be 64 hexadecimal digits, got {digest!r}"


def release_url_problem(url: str) -> str | None:
    """A release manifest's URL: https://, at a release tag rather than a branch or a moving tag."""
    if not url.startswith("https://"):
        return f"must be an https:// URL, got '{url}'"
    if _UNPINNED.search(url):
        return f"must point at a release tag, not master/main/latest/HEAD, got '{url}'"
    return None


def release_tag_problem(version: str) -> str | None:
    """A release tag: ``v<major>.<minor>.<patch>``."""
    return (
        None if _RELEASE_TAG.fullmatch(version) else f"must be a release tag such as v0.7.0, got '{version}'"
    )


def mpi_operator_digest_problem(version: str, digest: str | None, pinned: Iterable[str]) -> str | None:
    """The MPI Operator's manifest digest: given, or pinned for ``version`` (``pinned``: the versions that are)."""
    if digest is not None:
        return None
    return (
        f"is required for version '{version}', which has no pinned digest (pinned: {', '.join(sorted(pinned))}): "
        "pass the SHA-256 of its mpi-operator.yaml"
    )
