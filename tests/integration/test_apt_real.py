"""The lifecycle scripts' apt steps against real apt (Debian bookworm, apt 2.6) and real servers.

Each test runs the apt-hotfix and apt-update steps of on_create.sh, then installs a package, in a
fresh copy-on-write copy of a minimal Debian root, with loopback-only networking: a healthy signed
repository is always there, and the FSx Lustre client source points at a healthy, forbidden (403),
missing (404), unavailable (503) or silent (accepts, never answers) server. See apt_world.py.

Before the fixes of issue 13 (items 14, 15) these took: a held lists lock, 150 s: the healthy
source was disabled after 130 s; a 404: 130 s of retries; a silent server: every `apt-get update`
about 4 minutes (60 s timeout, 4 tries), the source kept, so the node paid twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.integration.apt_world import FSX_SOURCE, PACKAGE, AptRun, debian_root

pytestmark = pytest.mark.integration

FSX_NAME = FSX_SOURCE.rsplit("/", 1)[1]
RunSteps = Callable[..., AptRun]


def assert_disabled(run: AptRun, reason: str) -> None:
    assert run.returncode == 0, run.output
    assert FSX_NAME not in run.sources
    assert "local.list" in run.sources
    assert f"{FSX_NAME}.disabled" in run.backups
    assert f"disabling apt source {FSX_SOURCE}: {reason}" in run.output
    assert f"Setting up {PACKAGE} (1.0)" in run.output  # apt works for the rest of the node
    assert "SUCCESS: apt steps done" in run.output


def test_apt_get_update_does_not_wait_for_its_lists_lock(apt_steps: RunSteps) -> None:
    """Why the scripts wait themselves: DPkg::Lock::Timeout does not cover /var/lib/apt/lists/lock."""
    run = apt_steps(
        "apt-get update, lists lock held, DPkg::Lock::Timeout=60",
        None,
        hold_lists_lock_s=30,
        command=["apt-get", "-o", "DPkg::Lock::Timeout=60", "update"],
    )

    assert run.returncode == 100
    assert run.seconds < 10
    holder = run.lock_holder_pid
    assert f"E: Could not get lock /var/lib/apt/lists/lock. It is held by process {holder}" in run.output


def test_healthy_fsx_source_is_kept(apt_steps: RunSteps) -> None:
    run = apt_steps("healthy FSx source", "healthy")

    assert run.returncode == 0, run.output
    assert FSX_NAME in run.sources
    assert run.backups == {}
    assert f"apt source {FSX_SOURCE} is healthy; left untouched" in run.output
    assert f"Setting up {PACKAGE} (1.0)" in run.output


def test_forbidden_fsx_source_is_disabled_at_once(apt_steps: RunSteps) -> None:
    run = apt_steps("403 FSx source", "forbidden")

    assert_disabled(run, "HTTP 403 Forbidden from the repository")
    assert "403  Forbidden" in run.output
    assert run.seconds < 15


def test_missing_fsx_source_is_disabled_without_retries(apt_steps: RunSteps) -> None:
    """A 404 (no Release file) is permanent: one probe, no back-off (it was 5 probes, 130 s)."""
    run = apt_steps("404 FSx source", "missing")

    assert_disabled(run, "the repository has no Release file (HTTP 404 Not Found: wrong URL or suite)")
    assert "does not have a Release file" in run.output
    assert "(attempt 2/" not in run.output
    assert run.seconds < 15


def test_unavailable_fsx_source_counts_as_broken(apt_steps: RunSteps) -> None:
    """apt only warns about a 503 (exit 0): the probe reads its output, not only its exit status."""
    run = apt_steps("503 FSx source", "unavailable")

    assert_disabled(run, "apt could not fetch the repository's index files (503  Service Unavailable)")
    assert run.seconds < 30


def test_silent_fsx_source_is_disabled_within_the_probe_timeouts(apt_steps: RunSteps) -> None:
    """Accepts, never answers: 5 s timeout, 1 apt retry (about 21 s), then apt-update does not pay again."""
    run = apt_steps("silent FSx source (accepts, never answers)", "silent")

    assert_disabled(run, "the repository could not be reached (no connection or no answer within 5s)")
    assert run.seconds < 60  # it was ~495 s: ~247 s in the probe, the same again in apt-update
    assert int(re.findall(r"step 'apt-update' done \((\d+)s\)", run.output)[0]) < 10
    assert 1 <= len(run.requests_to("silent")) <= 4


def test_held_lists_lock_is_waited_for_and_not_blamed_on_the_source(apt_steps: RunSteps) -> None:
    run = apt_steps("lists lock held 12 s, healthy FSx source", "healthy", hold_lists_lock_s=12)

    assert run.returncode == 0, run.output
    assert FSX_NAME in run.sources
    assert run.backups == {}
    assert (
        f"Could not get lock /var/lib/apt/lists/lock. It is held by process {run.lock_holder_pid}"
        in run.output
    )
    assert "waiting up to 300s for it" in run.output
    assert "apt's lists lock was released after about 15s" in run.output
    assert f"apt source {FSX_SOURCE} is healthy; left untouched" in run.output
    assert 12 <= run.seconds < 40


def test_lists_lock_held_past_the_timeout_fails_the_step_and_disables_nothing(apt_steps: RunSteps) -> None:
    run = apt_steps(
        "lists lock held past TC_APT_LOCK_TIMEOUT=8",
        "healthy",
        hold_lists_lock_s=120,
        env={"TC_APT_LOCK_TIMEOUT": "8"},
    )

    assert run.returncode == 1
    assert FSX_NAME in run.sources
    assert run.backups == {}
    assert "another process still holds apt's lists lock after 8s (TC_APT_LOCK_TIMEOUT=8)" in run.output
    assert "FAILED step 'apt-hotfix' (exit 1)" in run.output
    assert run.requests == []
    assert run.seconds < 30


def test_the_root_is_bookworm_with_apt_2_6(apt_steps: RunSteps) -> None:
    """The facts above are apt 2.6's (Debian bookworm); Ubuntu's apt may differ."""
    assert (debian_root() / "etc" / "debian_version").read_text().startswith("12.")
    run = apt_steps("apt-get --version", None, command=["apt-get", "--version"])
    assert run.output.startswith("apt 2.6.")
