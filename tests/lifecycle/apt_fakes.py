"""A fake ``apt-get update`` that answers like real apt 2.6 does for a held lock and broken repositories.

:func:`install_fake_apt_get` puts a small bash script in front of the sandbox's recording stub. It
handles ``apt-get update`` in the situations below and hands every other call (and every update it
does not fake) to the stub, so ``Run.calls_to("apt-get")`` still lists each call exactly once.

* ``FAKE_APT_LISTS_LOCKED_CALLS=N``: the first N updates fail the way apt fails when another
  process holds ``/var/lib/apt/lists/lock`` (it does not wait for that lock, whatever
  ``DPkg::Lock::Timeout`` says); ``FAKE_APT_LISTS_LOCKED_SCOPE=full`` limits that to updates that
  read every source (not the hotfix's single-source probes).
* ``FAKE_APT_FSX=silent|missing|unavailable|mirror-sync``: an update that reads an active FSx
  source answers as apt does when that server accepts connections and never answers (exit 0, only
  warnings), has no Release file (404, exit 100), answers 503 (exit 0, only warnings), or serves
  an index of the wrong size (exit 100, worth another try).

The output is what real apt 2.6 printed against the integration tests' servers (tests/integration),
with the FSx repository's address in place of 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path

from tests.lifecycle.sandbox import Sandbox

FSX_URI = "https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu"

LOCKED = """\
Reading package lists...
E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (unattended-upgr)
E: Unable to lock directory /var/lib/apt/lists/
"""

SILENT = f"""\
Ign:1 {FSX_URI} jammy InRelease
Err:1 {FSX_URI} jammy InRelease
  Connection failed [IP: 52.216.8.10 443]
Reading package lists...
W: Failed to fetch {FSX_URI}/dists/jammy/InRelease  Connection failed [IP: 52.216.8.10 443]
W: Some index files failed to download. They have been ignored, or old ones used instead.
"""

MISSING = f"""\
Ign:1 {FSX_URI} jammy InRelease
Err:2 {FSX_URI} jammy Release
  404  Not Found [IP: 52.216.8.10 443]
Reading package lists...
E: The repository '{FSX_URI} jammy Release' does not have a Release file.
"""

UNAVAILABLE = f"""\
Ign:1 {FSX_URI} jammy InRelease
Err:1 {FSX_URI} jammy InRelease
  503  Service Unavailable [IP: 52.216.8.10 443]
Reading package lists...
W: Failed to fetch {FSX_URI}/dists/jammy/InRelease  503  Service Unavailable [IP: 52.216.8.10 443]
W: Some index files failed to download. They have been ignored, or old ones used instead.
"""

MIRROR_SYNC = f"""\
Get:1 {FSX_URI} jammy InRelease [2,031 B]
Err:2 {FSX_URI} jammy/main amd64 Packages
  File has unexpected size (1423 != 1417). Mirror sync in progress? [IP: 52.216.8.10 443]
Reading package lists...
E: Failed to fetch {FSX_URI}/dists/jammy/main/binary-amd64/Packages.gz  File has unexpected size (1423 != 1417). Mirror sync in progress? [IP: 52.216.8.10 443]
E: Some index files failed to download. They have been ignored, or old ones used instead.
"""

FAKE_APT_GET = r"""#!/bin/bash
# Fake `apt-get update` (tests/lifecycle/apt_fakes.py); anything it does not fake goes to the stub.
set -euo pipefail
stub=__STUB__
state="${STUB_STATE:?}"
args=" $* "
[[ $args == *" update "* ]] || exec "$stub" "$@"

record() {
    local record
    printf -v record '%s\x1f' apt-get "$@"
    printf '%s\n' "${record%$'\x1f'}" >>"${STUB_CALLS:?}"
}

# Number of earlier calls under a counter name, then count this one.
bump() {
    local file="${state}/count.fake-apt.$1" count=0
    [[ -f $file ]] && count="$(<"$file")"
    echo $((count + 1)) >"$file"
    echo "$count"
}

listfile=""
for arg in "$@"; do
    case $arg in Dir::Etc::sourcelist=*) listfile=${arg#*=} ;; esac
done

scope=${FAKE_APT_LISTS_LOCKED_SCOPE:-all}
if [[ $scope == all || -z $listfile ]] &&
    (($(bump locked) < ${FAKE_APT_LISTS_LOCKED_CALLS:-0})); then
    record "$@"
    printf '%s' "$FAKE_APT_LOCKED_TEXT"
    exit 100
fi

if [[ -n ${FAKE_APT_FSX:-} ]]; then
    shopt -s nullglob
    if [[ -n $listfile ]]; then
        files=("$listfile")
    else
        files=("${TC_ROOT}"/etc/apt/sources.list.d/*.list "${TC_ROOT}"/etc/apt/sources.list.d/*.sources)
    fi
    for file in "${files[@]}"; do
        if [[ -f $file ]] && sed '/^[[:space:]]*#/d' "$file" | grep -q fsx-lustre-client-repo; then
            record "$@"
            case $FAKE_APT_FSX in
                silent) printf '%s' "$FAKE_APT_SILENT_TEXT"; exit 0 ;;
                missing) printf '%s' "$FAKE_APT_MISSING_TEXT"; exit 100 ;;
                unavailable) printf '%s' "$FAKE_APT_UNAVAILABLE_TEXT"; exit 0 ;;
                mirror-sync) printf '%s' "$FAKE_APT_MIRROR_SYNC_TEXT"; exit 100 ;;
            esac
        fi
    done
fi
exec "$stub" "$@"
"""


def install_fake_apt_get(sandbox: Sandbox) -> None:
    """Replace the sandbox's ``apt-get`` with the fake; the recording stub stays behind it."""
    behind = sandbox.tmp / "stub-behind-fake"
    behind.mkdir()
    (behind / "apt-get").symlink_to(sandbox.bin / ".stub.sh")  # the stub names itself after $0
    fake: Path = sandbox.bin / "apt-get"
    fake.unlink()
    fake.write_text(FAKE_APT_GET.replace("__STUB__", str(behind / "apt-get")))
    fake.chmod(0o755)
    sandbox.env.update(
        FAKE_APT_LOCKED_TEXT=LOCKED,
        FAKE_APT_SILENT_TEXT=SILENT,
        FAKE_APT_MISSING_TEXT=MISSING,
        FAKE_APT_UNAVAILABLE_TEXT=UNAVAILABLE,
        FAKE_APT_MIRROR_SYNC_TEXT=MIRROR_SYNC,
    )
