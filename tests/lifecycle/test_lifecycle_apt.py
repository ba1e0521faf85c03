"""The FSx apt-repository hotfix and the apt wrapper every apt call goes through."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.lifecycle.apt_fakes import FAKE_APT_GET, install_fake_apt_get
from tests.lifecycle.sandbox import (
    FSX_REPO_DEB822,
    FSX_REPO_LIST,
    OTHER_REPO_LIST,
    REPO,
    Run,
    Sandbox,
)

BACKUPS = "var/backups/training-clusters/apt"
#: What the probe adds to `apt-get update`: the one source, and short network timeouts.
PROBE_TIMEOUTS = [
    "-o", "Acquire::http::Timeout=5",
    "-o", "Acquire::https::Timeout=5",
    "-o", "Acquire::Retries=1",
]  # fmt: skip


def probes(run: Run, source: Path) -> list[list[str]]:
    return [args for args in run.calls_to("apt-get") if f"Dir::Etc::sourcelist={source}" in args]


def full_updates(run: Run) -> list[list[str]]:
    return [
        args
        for args in run.calls_to("apt-get")
        if "update" in args and not any(arg.startswith("Dir::Etc::sourcelist=") for arg in args)
    ]


@pytest.mark.parametrize(
    ("name", "content", "failure", "reason"),
    [
        ("fsxlustreclientrepo.list", FSX_REPO_LIST, "403", "HTTP 403 Forbidden"),
        ("fsxlustreclientrepo.list", FSX_REPO_LIST, "EXPKEYSIG", "signing key expired (EXPKEYSIG)"),
        ("fsx-lustre-client.sources", FSX_REPO_DEB822, "403", "HTTP 403 Forbidden"),
    ],
    ids=["list-403", "list-expkeysig", "deb822-403"],
)
def test_broken_fsx_source_is_disabled_backed_up_and_logged(
    sandbox: Sandbox, name: str, content: str, failure: str, reason: str
) -> None:
    source = sandbox.add_apt_source(name, content)
    other = sandbox.add_apt_source("cuda.list", OTHER_REPO_LIST)

    run = sandbox.run(STUB_APT_BROKEN="fsx-lustre-client-repo", STUB_APT_BROKEN_MESSAGE=failure)

    assert run.returncode == 0, run.output
    assert not source.exists()
    backup = sandbox.path(f"{BACKUPS}/{name}.disabled")
    assert backup.read_text() == content
    assert other.read_text() == OTHER_REPO_LIST
    assert f"disabling apt source {source}: " in run.log
    assert reason in run.log
    assert f"moved {source} -> {backup}" in run.log
    changes = sandbox.path(f"{BACKUPS}/changes.tsv").read_text().splitlines()
    assert len(changes) == 1
    assert changes[0].split("\t")[1:4] == ["disabled", str(source), str(backup)]
    assert "SUCCESS: node provisioned as worker" in run.log

    # The probe reads that source alone, through the wrapper, and does not retry a permanent error.
    [probe] = probes(run, source)
    assert probe[:2] == ["-o", "DPkg::Lock::Timeout=300"]
    assert probe[-13:] == [
        "update",
        "-o", f"Dir::Etc::sourcelist={source}",
        "-o", "Dir::Etc::sourceparts=-",
        "-o", "APT::Get::List-Cleanup=0",
        *PROBE_TIMEOUTS,
    ]  # fmt: skip
    assert run.calls_to("sleep") == []
    # It runs before the first full `apt-get update`, which then succeeds.
    updates = [args for args in run.calls_to("apt-get") if "update" in args]
    assert updates[0] == probe
    assert not any("Dir::Etc::sourcelist" in arg for arg in updates[1])
    assert not any(arg.startswith("Acquire::") for arg in updates[1])  # the full update keeps apt's defaults


def test_healthy_fsx_source_is_left_untouched(sandbox: Sandbox) -> None:
    source = sandbox.add_apt_source("fsxlustreclientrepo.list", FSX_REPO_LIST)
    before = source.stat().st_mtime_ns

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert source.read_text() == FSX_REPO_LIST
    assert source.stat().st_mtime_ns == before
    assert len(probes(run, source)) == 1
    assert f"apt source {source} is healthy; left untouched" in run.log
    assert not sandbox.path(BACKUPS).exists()


def test_commented_out_fsx_source_is_not_probed(sandbox: Sandbox) -> None:
    source = sandbox.add_apt_source("fsxlustreclientrepo.list", "# " + FSX_REPO_LIST)

    run = sandbox.run(STUB_APT_BROKEN="fsx-lustre-client-repo")

    assert run.returncode == 0, run.output
    assert probes(run, source) == []
    assert source.exists()
    assert "nothing to check" in run.log


def test_other_broken_sources_are_not_the_hotfix_business(sandbox: Sandbox) -> None:
    other = sandbox.add_apt_source("cuda.list", OTHER_REPO_LIST)

    run = sandbox.run(STUB_APT_BROKEN="developer.download.nvidia.com")

    assert run.returncode == 100
    assert other.read_text() == OTHER_REPO_LIST
    assert run.output.rstrip().endswith("FAILED step 'apt-update' (exit 100)")


def test_apt_wrapper_retries_with_backoff_then_succeeds(sandbox: Sandbox) -> None:
    run = sandbox.run(
        STUB_APT_TRANSIENT_FAILURES="3",
        TC_APT_ATTEMPTS="5",
        TC_APT_RETRY_SLEEP="2",
        TC_APT_RETRY_MAX_SLEEP="5",
    )

    assert run.returncode == 0, run.output
    updates = [args for args in run.calls_to("apt-get") if "update" in args]
    assert len(updates) == 4
    assert run.calls_to("sleep") == [["2"], ["4"], ["5"]]
    assert "apt-get update (attempt 4/5)" in run.log
    assert "apt-get update failed (exit 100); retrying in 2s" in run.log


def test_apt_wrapper_gives_up_after_the_configured_attempts(sandbox: Sandbox) -> None:
    run = sandbox.run(STUB_APT_TRANSIENT_FAILURES="99", TC_APT_ATTEMPTS="3")

    assert run.returncode == 100
    assert len([args for args in run.calls_to("apt-get") if "update" in args]) == 3
    assert "apt-get update failed (exit 100) after 3 attempts" in run.log
    assert run.output.rstrip().splitlines()[-1].endswith("FAILED step 'apt-update' (exit 100)")


def test_every_apt_call_goes_through_the_wrapper(sandbox: Sandbox) -> None:
    sandbox.add_apt_source("fsxlustreclientrepo.list", FSX_REPO_LIST)
    sandbox.write_params(enable_observability=True)

    run = sandbox.run(STUB_NO_LUSTRE="1", TC_APT_LOCK_TIMEOUT="77")

    assert run.returncode == 0, run.output
    calls = run.calls_to("apt-get")
    assert len(calls) >= 5  # probe, update, lustre client, enroot deps, enroot, node exporter
    assert all(args[:2] == ["-o", "DPkg::Lock::Timeout=77"] for args in calls)
    assert run.log.count("apt-get ") >= len(calls)


def test_missing_lustre_client_after_the_repo_was_disabled_fails_clearly(sandbox: Sandbox) -> None:
    sandbox.add_apt_source("fsxlustreclientrepo.list", FSX_REPO_LIST)

    run = sandbox.run(
        STUB_APT_BROKEN="fsx-lustre-client-repo",
        STUB_NO_LUSTRE="1",
        STUB_APT_MISSING="^lustre-client-modules",
    )

    assert run.returncode == 100
    assert "could not install lustre-client-modules-" in run.log
    assert "re-enable it (backups in" in run.log
    assert run.output.rstrip().endswith("FAILED step 'lustre-client' (exit 100)")


# -- a lock held by another process is waited for and never blamed on a source (issue 13, item 14) --


def test_probe_waits_for_apt_lists_lock_and_keeps_the_healthy_source(sandbox: Sandbox) -> None:
    install_fake_apt_get(sandbox)
    source = sandbox.add_apt_source("fsxlustreclientrepo.list", FSX_REPO_LIST)

    run = sandbox.run(FAKE_APT_LISTS_LOCKED_CALLS="3")

    assert run.returncode == 0, run.output
    assert source.read_text() == FSX_REPO_LIST
    assert not sandbox.path(BACKUPS).exists()
    assert len(probes(run, source)) == 4  # three refused by the lock, then the real probe
    assert run.calls_to("sleep") == [["5"], ["5"], ["5"]]  # TC_APT_LOCK_POLL, not the retry back-off
    assert "(attempt 2/" not in run.log  # waiting for the lock uses up no attempt
    assert (
        "Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (unattended-upgr);" in run.log
    )
    assert "waiting up to 300s for it" in run.log
    assert "apt's lists lock was released after about 15s" in run.log
    assert f"apt source {source} is healthy; left untouched" in run.log


def test_lists_lock_held_past_the_timeout_fails_clearly_and_disables_nothing(sandbox: Sandbox) -> None:
    install_fake_apt_get(sandbox)
    source = sandbox.add_apt_source("fsxlustreclientrepo.list", FSX_REPO_LIST)

    run = sandbox.run(FAKE_APT_LISTS_LOCKED_CALLS="99", TC_APT_LOCK_TIMEOUT="12", TC_APT_LOCK_POLL="5")

    assert run.returncode == 1
    assert source.read_text() == FSX_REPO_LIST
    assert not sandbox.path(BACKUPS).exists()
    assert run.calls_to("sleep") == [["5"], ["5"], ["2"]]  # never past TC_APT_LOCK_TIMEOUT
    assert len(probes(run, source)) == 4
    assert full_updates(run) == []
    assert "another process still holds apt's lists lock after 12s (TC_APT_LOCK_TIMEOUT=12)" in run.log
    assert f"could not probe {source}: another process kept apt's lists lock for 12s" in run.log
    assert "disabling" not in run.log
    assert run.output.rstrip().endswith("FAILED step 'apt-hotfix' (exit 1)")


def test_full_update_waits_for_apt_lists_lock_too(sandbox: Sandbox) -> None:
    install_fake_apt_get(sandbox)

    run = sandbox.run(
        FAKE_APT_LISTS_LOCKED_CALLS="2", FAKE_APT_LISTS_LOCKED_SCOPE="full", TC_APT_LOCK_POLL="7"
    )

    assert run.returncode == 0, run.output
    assert len(full_updates(run)) == 3
    assert run.calls_to("sleep") == [["7"], ["7"]]
    assert "apt's lists lock was released after about 14s" in run.log


def test_full_update_gives_up_on_a_lock_held_past_the_timeout(sandbox: Sandbox) -> None:
    install_fake_apt_get(sandbox)

    run = sandbox.run(
        FAKE_APT_LISTS_LOCKED_CALLS="99", FAKE_APT_LISTS_LOCKED_SCOPE="full", TC_APT_LOCK_TIMEOUT="10"
    )

    assert run.returncode == 100
    assert run.calls_to("sleep") == [["5"], ["5"]]
    assert "another process still holds apt's lists lock after 10s" in run.log
    assert run.output.rstrip().endswith("FAILED step 'apt-update' (exit 100)")


# -- a silent or missing repository is judged quickly (issue 13, item 15) --------------------------


@pytest.mark.parametrize(
    ("failure", "reason", "probe_count", "sleeps"),
    [
        ("silent", "the repository could not be reached (no connection or no answer within 5s)", 1, []),
        ("missing", "the repository has no Release file (HTTP 404 Not Found: wrong URL or suite)", 1, []),
        ("unavailable", "apt could not fetch the repository's index files (503  Service Unavailable)", 1, []),
        (
            "mirror-sync",
            "apt could not fetch the repository's index files"
            " (File has unexpected size (1423 != 1417). Mirror sync in progress?)",
            2,  # exit 100 without a permanent error: one more try (TC_APT_PROBE_ATTEMPTS), then judged
            [["1"]],
        ),
    ],
    ids=["silent", "missing-404", "unavailable-503", "mirror-sync"],
)
def test_unreachable_or_missing_fsx_source_is_disabled_after_one_short_probe(
    sandbox: Sandbox, failure: str, reason: str, probe_count: int, sleeps: list[list[str]]
) -> None:
    install_fake_apt_get(sandbox)
    source = sandbox.add_apt_source("fsxlustreclientrepo.list", FSX_REPO_LIST)

    run = sandbox.run(FAKE_APT_FSX=failure)

    assert run.returncode == 0, run.output
    assert not source.exists()
    assert sandbox.path(f"{BACKUPS}/fsxlustreclientrepo.list.disabled").read_text() == FSX_REPO_LIST
    assert f"disabling apt source {source}: {reason}\n" in run.log
    calls = probes(run, source)
    assert len(calls) == probe_count
    assert all(call[-6:] == PROBE_TIMEOUTS for call in calls)
    assert run.calls_to("sleep") == sleeps
    # The full update no longer reads the source, so it does not pay for it a second time.
    assert len(full_updates(run)) == 1
    assert run.log.count("\nErr:") == probe_count
    assert "SUCCESS: node provisioned as worker" in run.log


def test_probe_timeouts_are_settings(sandbox: Sandbox) -> None:
    install_fake_apt_get(sandbox)
    source = sandbox.add_apt_source("fsxlustreclientrepo.list", FSX_REPO_LIST)

    run = sandbox.run(FAKE_APT_FSX="silent", TC_APT_PROBE_TIMEOUT="3", TC_APT_PROBE_RETRIES="0")

    [probe] = probes(run, source)
    assert probe[-6:] == [
        "-o", "Acquire::http::Timeout=3",
        "-o", "Acquire::https::Timeout=3",
        "-o", "Acquire::Retries=0",
    ]  # fmt: skip
    assert "no answer within 3s" in run.log


def test_missing_repository_is_not_retried_by_the_wrapper(sandbox: Sandbox) -> None:
    """A 404 / missing Release file is permanent: the full update does not back off and try again."""
    install_fake_apt_get(sandbox)
    other = sandbox.add_apt_source("cuda.list", OTHER_REPO_LIST)
    sandbox.write("etc/apt/sources.list.d/fsx.list", FSX_REPO_LIST.replace("deb ", "deb [arch=amd64] "))

    run = sandbox.run(FAKE_APT_FSX="missing", TC_APT_SOURCES_DIR=str(sandbox.path("nowhere")))

    assert run.returncode == 100
    assert other.exists()
    assert len(full_updates(run)) == 1
    assert run.calls_to("sleep") == []
    assert "failed (exit 100) with an error that retrying will not fix" in run.log


def test_apt_test_scripts_are_shellcheck_clean(tmp_path: Path, shellcheck: str) -> None:
    """The fake apt-get and the real-apt integration scripts, like the lifecycle scripts themselves."""
    fake = tmp_path / "apt-get"
    fake.write_text(FAKE_APT_GET.replace("__STUB__", "/nonexistent/stub"))
    integration = sorted((REPO / "tests" / "integration").glob("*.sh"))
    assert [path.name for path in integration] == [
        "apt_steps.sh",
        "build_root.sh",
        "build_slurm_root.sh",
        "host_mirror.sh",
    ]
    result = subprocess.run(
        [shellcheck, "--severity=style", "--format=gcc", str(fake), *map(str, integration)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


#: apt output lines (as apt 2.x prints them) and the reason the probe gives for each; the first one that
#: matches wins, so a 403 that also failed to fetch is reported as the 403.
FAILURE_REASONS = [
    ("E: Failed to fetch https://fsx/dists/jammy/InRelease  403  Forbidden [IP: 52.1.2.3 443]", 100,
     "HTTP 403 Forbidden from the repository (access denied or expired S3 signature)"),
    ("E: The repository 'https://fsx jammy Release' does not have a Release file.", 100,
     "the repository has no Release file (HTTP 404 Not Found: wrong URL or suite)"),
    ("W: Failed to fetch https://fsx/dists/jammy/InRelease  Could not resolve 'fsx'", 0,
     "the repository could not be reached (no connection or no answer within 5s)"),
    ("<Code>SignatureDoesNotMatch</Code>", 100, "the repository's S3 request signature expired"),
    ("W: GPG error: https://fsx jammy InRelease: EXPKEYSIG 1A2B3C4D FSx", 0,
     "the repository's signing key expired (EXPKEYSIG)"),
    ("W: GPG error: https://fsx jammy InRelease: NO_PUBKEY 1A2B3C4D", 0,
     "the repository's signing key is not installed (NO_PUBKEY)"),
    ("E: The repository 'https://fsx jammy InRelease' is not signed.", 100, "the repository is not signed"),
    ("E: Release file for https://fsx/dists/jammy/InRelease is expired (invalid since 2d).", 100,
     "the repository's Release file is expired"),
    ("Err:1 https://fsx jammy InRelease\n  Hash Sum mismatch [IP: 52.1.2.3 443]", 100,
     "apt could not fetch the repository's index files (Hash Sum mismatch)"),
    ("Reading package lists...", 100, "apt-get update exited 100"),
    ("Hit:1 https://fsx jammy InRelease\nReading package lists...", 0, ""),
]  # fmt: skip


@pytest.mark.parametrize(("output", "rc", "reason"), FAILURE_REASONS)
def test_every_apt_failure_gets_its_reason(tmp_path: Path, output: str, rc: int, reason: str) -> None:
    apt_output = tmp_path / "apt.out"
    apt_output.write_text(output + "\n")
    library = REPO / "training_clusters" / "node_scripts" / "hyperpod" / "lib" / "apt_hotfix.sh"
    result = subprocess.run(
        [
            "bash",
            "-c",
            f'source "$1"; tc_apt_failure_reason {rc} "$2"',
            "bash",
            str(library),
            str(apt_output),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, reason + "\n" if reason else "", "")
