# shellcheck shell=bash
#
# The one way these scripts call apt: apt_get, with bounded retries, exponential back-off, a dpkg
# lock timeout (HyperPod's own agents may hold the dpkg lock while the lifecycle script runs) and a
# bounded wait for apt's lists lock, which `apt-get update` does not wait for on its own.

TC_APT_LAST_OUTPUT=""
# Set by apt_get when it gave up because another process kept apt's lists lock: apt's own line.
TC_APT_LAST_LOCKED=""
# Seconds between two tries while another process holds apt's lists lock.
TC_APT_LOCK_POLL="${TC_APT_LOCK_POLL:-5}"

# Output that no retry will fix: a source that is forbidden, missing (404, no Release file),
# unsigned, signed with an expired or unknown key, or whose Release file expired; or a package that
# does not exist.
TC_APT_PERMANENT_ERRORS='403[[:space:]]+Forbidden|404[[:space:]]+Not Found|does not have a Release file|EXPKEYSIG|NO_PUBKEY|is not signed|is no longer signed|Release file .* is expired|SignatureDoesNotMatch|Request has expired|Unable to locate package|has no installation candidate'

# What apt prints when another process holds the lock of its lists folder (/var/lib/apt/lists/lock):
# "E: Could not get lock /var/lib/apt/lists/lock. It is held by process N (name)". DPkg::Lock::Timeout
# makes apt wait for dpkg's lock only; `apt-get update` fails on this one at once with exit 100.
# Freshly booted nodes often hold it (apt-daily, unattended-upgrades, cloud-init).
TC_APT_LISTS_LOCKED='Could not get lock [^ ]*/lists/lock|Unable to lock directory [^ ]*/lists'

# apt_get ARGS...: apt-get with retries. Returns apt-get's exit status of the last attempt.
# Written without relying on errexit, so callers may use it in `if` or `||`.
# While another process holds apt's lists lock, it tries again every TC_APT_LOCK_POLL seconds, for
# at most TC_APT_LOCK_TIMEOUT seconds, without using up an attempt; then it gives up with apt's exit
# status and sets TC_APT_LAST_LOCKED (a local lock, never the fault of a source).
# Settings: TC_APT_ATTEMPTS, TC_APT_RETRY_SLEEP, TC_APT_RETRY_MAX_SLEEP, TC_APT_LOCK_TIMEOUT,
# TC_APT_LOCK_POLL.
apt_get() {
    local attempts=$TC_APT_ATTEMPTS pause=$TC_APT_RETRY_SLEEP attempt=1 rc output lock_line
    local locked_for=0 lock_poll=$TC_APT_LOCK_POLL lock_pause
    TC_APT_LAST_OUTPUT="${TC_STATE_DIR}/apt-get.last.out"
    TC_APT_LAST_LOCKED=""
    tc_mkdir "$TC_STATE_DIR" || return 1
    if ((lock_poll < 1)); then
        lock_poll=1
    fi
    while :; do
        if ((locked_for == 0)); then
            log "apt-get $* (attempt ${attempt}/${attempts})"
        fi
        rc=0
        DEBIAN_FRONTEND=noninteractive apt-get -o "DPkg::Lock::Timeout=${TC_APT_LOCK_TIMEOUT}" \
            -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
            "$@" >"$TC_APT_LAST_OUTPUT" 2>&1 || rc=$?
        lock_line=""
        if ((rc != 0)); then
            lock_line="$(grep -m 1 -E -- "$TC_APT_LISTS_LOCKED" "$TC_APT_LAST_OUTPUT")" || lock_line=""
        fi
        if [[ -n $lock_line ]]; then
            lock_line=${lock_line#E: }
            if ((locked_for >= TC_APT_LOCK_TIMEOUT)); then
                # shellcheck disable=SC2034  # read by the callers (apt_hotfix.sh)
                TC_APT_LAST_LOCKED=$lock_line
                tc_error "apt-get $*: another process still holds apt's lists lock after ${locked_for}s" \
                    "(TC_APT_LOCK_TIMEOUT=${TC_APT_LOCK_TIMEOUT}): ${lock_line}"
                return "$rc"
            fi
            if ((locked_for == 0)); then
                warn "apt-get $*: ${lock_line}; waiting up to ${TC_APT_LOCK_TIMEOUT}s for it"
            fi
            lock_pause=$((TC_APT_LOCK_TIMEOUT - locked_for))
            if ((lock_pause > lock_poll)); then
                lock_pause=$lock_poll
            fi
            sleep "$lock_pause"
            locked_for=$((locked_for + lock_pause))
            continue
        fi
        if ((locked_for > 0)); then
            log "apt's lists lock was released after about ${locked_for}s"
            locked_for=0
        fi
        output="$(<"$TC_APT_LAST_OUTPUT")"
        if [[ -n $output ]]; then
            printf '%s\n' "$output" # apt's own output, into the log
        fi
        if ((rc == 0)); then
            return 0
        fi
        if grep -qE -- "$TC_APT_PERMANENT_ERRORS" "$TC_APT_LAST_OUTPUT"; then
            warn "apt-get $* failed (exit ${rc}) with an error that retrying will not fix"
            return "$rc"
        fi
        if ((attempt >= attempts)); then
            tc_error "apt-get $* failed (exit ${rc}) after ${attempts} attempts"
            return "$rc"
        fi
        warn "apt-get $* failed (exit ${rc}); retrying in ${pause}s"
        sleep "$pause"
        attempt=$((attempt + 1))
        pause=$((pause * 2))
        if ((pause > TC_APT_RETRY_MAX_SLEEP)); then
            pause=$TC_APT_RETRY_MAX_SLEEP
        fi
    done
}

tc_apt_update() {
    apt_get update
}
