"""The FSx apt-repository hotfix and the apt wrapper every apt call goes through."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lifecycle.sandbox import FSX_REPO_DEB822, FSX_REPO_LIST, OTHER_REPO_LIST, Run, Sandbox

BACKUPS = "var/backups/training-clusters/apt"


def probes(run: Run, source: Path) -> list[list[str]]:
    return [args for args in run.calls_to("apt-get") if f"Dir::Etc::sourcelist={source}" in args]


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
    assert probe[-7:] == [
        "update",
        "-o", f"Dir::Etc::sourcelist={source}",
        "-o", "Dir::Etc::sourceparts=-",
        "-o", "APT::Get::List-Cleanup=0",
    ]  # fmt: skip
    assert run.calls_to("sleep") == []
    # It runs before the first full `apt-get update`, which then succeeds.
    updates = [args for args in run.calls_to("apt-get") if "update" in args]
    assert updates[0] == probe
    assert not any("Dir::Etc::sourcelist" in arg for arg in updates[1])


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
