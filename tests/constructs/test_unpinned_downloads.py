"""A HyperPod cluster whose shipped lifecycle scripts download as root what no digest checks warns at synth
(``training-clusters:unpinned-download``), naming the downloads and how to pin them; the warning goes with the
steps, with the pins, and with an acknowledgement."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk.assertions import Annotations, Match

from training_clusters.constructs.hyperpod.cluster import LifecycleOptions

from .test_hyperpod import build

ENROOT = "https://github.com/NVIDIA/enroot/releases/download/v3.5.0"
PYXIS = "https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.20.0.tar.gz"
KEY = "https://nvidia.github.io/libnvidia-container/gpgkey"
SLURM = "https://download.schedmd.com/slurm/slurm-24.11.1.tar.bz2"
DIGEST = "0" * 64
ACK = " [ack: training-clusters:unpinned-download]"
PIN = (
    "Pin each URL with lifecycle.extra['download_sha256'] ({URL: SHA-256}; hyperpod: {download_sha256: ...} in an "
    "environment file); docs/downloads.md lists them"
)
ENROOT_PYXIS_DOWNLOADS = (
    f"enroot's enroot and enroot+caps .debs ({ENROOT}/enroot[+caps]_3.5.0-1_<arch>.deb); "
    f"Pyxis' source ({PYXIS}); NVIDIA's container toolkit apt key ({KEY})"
)
SLURM_DOWNLOAD = "Slurm's source, to build pam_slurm_adopt.so (https://download.schedmd.com/slurm/slurm-<installed version>.tar.bz2)"


def _warnings(stack: cdk.Stack) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for message in Annotations.from_stack(stack).find_warning("*", Match.any_value()):
        found.setdefault(message.id, []).append(str(message.entry.data))
    return found


def test_the_default_steps_warn_naming_enroot_pyxis_and_nvidias_key(stack: cdk.Stack) -> None:
    build(stack)
    assert _warnings(stack) == {
        "/Test/HyperPod": [
            "lifecycle.enable_enroot_pyxis downloads as root at boot what no digest checks (trusted on first use: "
            f"HTTPS by tag): {ENROOT_PYXIS_DOWNLOADS}. {PIN}{ACK}"
        ]
    }


def test_pam_slurm_adopt_adds_slurms_source(stack: cdk.Stack) -> None:
    build(stack, lifecycle=LifecycleOptions(enable_pam_slurm_adopt=True))
    assert _warnings(stack) == {
        "/Test/HyperPod": [
            "lifecycle.enable_enroot_pyxis and lifecycle.enable_pam_slurm_adopt download as root at boot what no "
            f"digest checks (trusted on first use: HTTPS by tag): {ENROOT_PYXIS_DOWNLOADS}; {SLURM_DOWNLOAD}. "
            f"{PIN}{ACK}"
        ]
    }


def test_only_slurms_source_with_enroot_pyxis_off(stack: cdk.Stack) -> None:
    build(stack, lifecycle=LifecycleOptions(enable_enroot_pyxis=False, enable_pam_slurm_adopt=True))
    assert _warnings(stack) == {
        "/Test/HyperPod": [
            "lifecycle.enable_pam_slurm_adopt downloads as root at boot what no digest checks (trusted on first "
            f"use: HTTPS by tag): {SLURM_DOWNLOAD}. {PIN}{ACK}"
        ]
    }


def test_no_step_that_downloads_no_warning(stack: cdk.Stack) -> None:
    build(stack, lifecycle=LifecycleOptions(enable_enroot_pyxis=False))
    assert _warnings(stack) == {}


def test_each_pinned_download_leaves_the_warning(stack: cdk.Stack) -> None:
    pins = {
        f"{ENROOT}/enroot+caps_3.5.0-1_amd64.deb": DIGEST,
        PYXIS: DIGEST,
        KEY: DIGEST,
        SLURM: DIGEST,
    }
    build(stack, lifecycle=LifecycleOptions(enable_pam_slurm_adopt=True, extra={"download_sha256": pins}))
    assert _warnings(stack) == {}


def test_a_pin_of_another_version_does_not_count(stack: cdk.Stack) -> None:
    pins = {
        "https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.19.0.tar.gz": DIGEST,
        f"{ENROOT}/enroot_3.5.0-1_amd64.deb": DIGEST,
        KEY: DIGEST,
    }
    build(stack, lifecycle=LifecycleOptions(extra={"download_sha256": pins}))
    assert _warnings(stack) == {
        "/Test/HyperPod": [
            "lifecycle.enable_enroot_pyxis downloads as root at boot what no digest checks (trusted on first use: "
            f"HTTPS by tag): Pyxis' source ({PYXIS}). {PIN}{ACK}"
        ]
    }


def test_the_warning_can_be_acknowledged(stack: cdk.Stack) -> None:
    cluster = build(stack)
    cdk.Annotations.of(cluster).acknowledge_warning(
        "training-clusters:unpinned-download", "we mirror these files and check them ourselves"
    )
    assert _warnings(stack) == {}


def test_own_lifecycle_scripts_get_no_warning(stack: cdk.Stack, tmp_path: Path) -> None:
    folder = tmp_path / "scripts"
    folder.mkdir()
    (folder / "on_create.sh").write_text("#!/bin/bash\n")
    build(stack, lifecycle_scripts_dir=folder)
    assert _warnings(stack) == {}
