# shellcheck shell=bash
#
# The one way these scripts call apt: apt_get, with bounded retries, exponential back-off and a
# dpkg lock timeout (HyperPod's own agents may hold the dpkg lock while the lifecycle script runs).

TC_APT_LAST_OUTPUT=""

# Output that no retry will fix: a source that is forbidden, unsigned, signed with an expired or
# unknown key, or whose Release file expired; or a package that does not exist.
TC_APT_PERMANENT_ERRORS='403[[:space:]]+Forbidden|EXPKEYSIG|NO_PUBKEY|is not signed|is no longer signed|Release file .* is expired|SignatureDoesNotMatch|Request has expired|Unable to locate package|has no installation candidate'

# apt_get ARGS...: apt-get with retries. Returns apt-get's exit status of the last attempt.
# Written without relying on errexit, so callers may use it in `if` or `||`.
# Settings: TC_APT_ATTEMPTS, TC_APT_RETRY_SLEEP, TC_APT_RETRY_MAX_SLEEP, TC_APT_LOCK_TIMEOUT.
apt_get() {
    local attempts=$TC_APT_ATTEMPTS pause=$TC_APT_RETRY_SLEEP attempt=1 rc output
    TC_APT_LAST_OUTPUT="${TC_STATE_DIR}/apt-get.last.out"
    tc_mkdir "$TC_STATE_DIR" || return 1
    while :; do
        log "apt-get $* (attempt ${attempt}/${attempts})"
        rc=0
        DEBIAN_FRONTEND=noninteractive apt-get -o "DPkg::Lock::Timeout=${TC_APT_LOCK_TIMEOUT}" \
            -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
            "$@" >"$TC_APT_LAST_OUTPUT" 2>&1 || rc=$?
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
