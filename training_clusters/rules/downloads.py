"""The synth warning for node downloads trusted on first use (``training-clusters:unpinned-download``): which
steps a HyperPod cluster turns on fetch something no digest checks, and how to pin it
(:data:`training_clusters.model.releases.BOOT_DOWNLOADS`, rendered as docs/downloads.md)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

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
