# shellcheck shell=bash
#
# Hotfix: a broken FSx for Lustre client apt repository must not abort the lifecycle run.
#
# One failing source makes `apt-get update` exit 100, and with it the whole OnCreate script, so
# HyperPod rolls the node (and the cluster creation) back. The FSx Lustre client repository
# (fsx-lustre-client-repo.s3.amazonaws.com) has been seen answering 403 / expired signature, and
# its signing key can expire. Before the first `apt-get update`, every apt source file that points
# at that repository is probed ON ITS OWN; a source that fails is moved out of sources.list.d into
# a backup folder (renamed *.disabled) and the change is logged. Healthy sources stay untouched.
# The Lustre client usually ships with the HyperPod AMI; if it does not, the lustre-client step
# installs it and fails with a clear message when the repository is gone.
#
# The probe is short on purpose: a repository that accepts connections and never answers costs
# apt 60 s per try and 4 tries (about 4 minutes) and then only a warning, so it is probed with
# Acquire::http(s)::Timeout=TC_APT_PROBE_TIMEOUT and Acquire::Retries=TC_APT_PROBE_RETRIES
# (apt-transport-http(1), apt.conf(5)), and a source that could not be fetched counts as broken.
# A lock held by another process is never blamed on a source (apt_get waits for it).

TC_APT_SOURCES_DIR="${TC_APT_SOURCES_DIR:-${TC_ROOT}/etc/apt/sources.list.d}"
TC_APT_BACKUP_DIR="${TC_APT_BACKUP_DIR:-${TC_BACKUP_DIR}/apt}"
TC_FSX_REPO_PATTERN="${TC_FSX_REPO_PATTERN:-fsx-lustre-client-repo}"
# Probe: seconds apt waits for a connection or data, apt's own retries, apt_get attempts.
TC_APT_PROBE_TIMEOUT="${TC_APT_PROBE_TIMEOUT:-5}"
TC_APT_PROBE_RETRIES="${TC_APT_PROBE_RETRIES:-1}"
TC_APT_PROBE_ATTEMPTS="${TC_APT_PROBE_ATTEMPTS:-2}"
TC_APT_PROBE_REASON=""

tc_apt_hotfix() {
    local source
    local -a sources=()
    while IFS= read -r source; do
        sources+=("$source")
    done < <(tc_apt_fsx_sources)

    if [[ -f "${TC_ROOT}/etc/apt/sources.list" ]] &&
        tc_apt_source_is_fsx "${TC_ROOT}/etc/apt/sources.list"; then
        warn "${TC_ROOT}/etc/apt/sources.list itself mentions the FSx Lustre client repository;" \
            "only files in sources.list.d are probed and disabled"
    fi
    if ((${#sources[@]} == 0)); then
        log "no apt source in ${TC_APT_SOURCES_DIR} points at the FSx Lustre client repository; nothing to check"
        return 0
    fi

    for source in "${sources[@]}"; do
        if ! tc_apt_probe_source "$source"; then
            tc_error "could not probe ${source}: another process kept apt's lists lock for" \
                "${TC_APT_LOCK_TIMEOUT}s (TC_APT_LOCK_TIMEOUT); the source was left in place"
            return 1
        fi
        if [[ -z $TC_APT_PROBE_REASON ]]; then
            log "apt source ${source} is healthy; left untouched"
        else
            tc_apt_disable_source "$source" "$TC_APT_PROBE_REASON"
        fi
    done
}

# The *.list and *.sources (deb822) files in sources.list.d that reference the FSx repository.
tc_apt_fsx_sources() {
    local file
    for file in "$TC_APT_SOURCES_DIR"/*.list "$TC_APT_SOURCES_DIR"/*.sources; do
        if [[ -f $file ]] && tc_apt_source_is_fsx "$file"; then
            printf '%s\n' "$file"
        fi
    done
}

# True when an active (uncommented) line of FILE mentions the FSx repository.
tc_apt_source_is_fsx() {
    awk -v pattern="$TC_FSX_REPO_PATTERN" '
        !/^[ \t]*#/ && index($0, pattern) { found = 1 }
        END { exit !found }
    ' "$1"
}

# tc_apt_probe_source FILE: `apt-get update` against FILE alone, with short network timeouts.
# Sets TC_APT_PROBE_REASON to "" when healthy, else to why it is broken; returns 1 (and judges
# nothing) when another process kept apt's lists lock past TC_APT_LOCK_TIMEOUT. apt picks the
# format from the file name (.list or deb822 .sources); other sources are not read
# (sourceparts=-) and lists are not cleaned.
tc_apt_probe_source() {
    local source=$1 rc=0
    log "probing apt source ${source} on its own" \
        "(timeout ${TC_APT_PROBE_TIMEOUT}s, ${TC_APT_PROBE_RETRIES} apt retries)"
    TC_APT_ATTEMPTS=$TC_APT_PROBE_ATTEMPTS apt_get update \
        -o "Dir::Etc::sourcelist=${source}" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 \
        -o "Acquire::http::Timeout=${TC_APT_PROBE_TIMEOUT}" \
        -o "Acquire::https::Timeout=${TC_APT_PROBE_TIMEOUT}" \
        -o "Acquire::Retries=${TC_APT_PROBE_RETRIES}" || rc=$?
    TC_APT_PROBE_REASON=""
    if [[ -n $TC_APT_LAST_LOCKED ]]; then
        return 1
    fi
    TC_APT_PROBE_REASON="$(tc_apt_failure_reason "$rc" "$TC_APT_LAST_OUTPUT")"
}

# tc_apt_failure_reason RC OUTPUT_FILE: "" for a clean update, else a short reason. A zero exit
# with signature errors or failed fetches in the output still counts as broken: apt only warned
# and kept stale lists (an unreachable repository is only a warning to apt).
tc_apt_failure_reason() {
    local rc=$1 output=$2 i
    # pairs: an extended regular expression in apt's output, and the reason it gives (first match wins)
    local -a known=(
        '403[[:space:]]+Forbidden'
        "HTTP 403 Forbidden from the repository (access denied or expired S3 signature)"
        '404[[:space:]]+Not Found|does not have a Release file'
        "the repository has no Release file (HTTP 404 Not Found: wrong URL or suite)"
        'Connection timed out|Connection failed|Could not connect|Failed to connect|Unable to connect|Could not resolve|Temporary failure resolving|Could not wait for server fd'
        "the repository could not be reached (no connection or no answer within ${TC_APT_PROBE_TIMEOUT}s)"
        'SignatureDoesNotMatch|Request has expired|ExpiredToken'
        "the repository's S3 request signature expired"
        'EXPKEYSIG'
        "the repository's signing key expired (EXPKEYSIG)"
        'NO_PUBKEY'
        "the repository's signing key is not installed (NO_PUBKEY)"
        'is not signed|is no longer signed'
        "the repository is not signed"
        'Release file .* is (expired|not valid yet)'
        "the repository's Release file is expired"
    )
    for ((i = 0; i < ${#known[@]}; i += 2)); do
        if grep -qE -- "${known[i]}" "$output"; then
            echo "${known[i + 1]}"
            return 0
        fi
    done
    if grep -qE '^(Err:|[WE]: Failed to fetch)' "$output"; then
        echo "apt could not fetch the repository's index files ($(tc_apt_first_error "$output"))"
    elif ((rc != 0)); then
        echo "apt-get update exited ${rc}"
    fi
}

# tc_apt_first_error OUTPUT_FILE: apt's reason under its first "Err:" line, without the address.
tc_apt_first_error() {
    awk '/^Err:/ { getline; sub(/^[ \t]+/, ""); sub(/ \[IP: [^]]*\]$/, ""); print; exit }' "$1"
}

# tc_apt_disable_source FILE REASON: move FILE to the backup folder as NAME.disabled and log it.
tc_apt_disable_source() {
    local source=$1 reason=$2 name backup
    name="$(basename -- "$source")"
    backup="${TC_APT_BACKUP_DIR}/${name}.disabled"
    tc_mkdir "$TC_APT_BACKUP_DIR"
    warn "disabling apt source ${source}: ${reason}"
    while IFS= read -r line; do
        warn "  ${name}: ${line}"
    done <"$source"
    if [[ -e $backup ]] && cmp -s -- "$source" "$backup"; then
        rm -f -- "$source"
        warn "removed ${source}; an identical backup was already at ${backup}"
    else
        if [[ -e $backup ]]; then
            backup="${TC_APT_BACKUP_DIR}/${name}.$(date -u +%Y%m%dT%H%M%SZ).disabled"
        fi
        mv -- "$source" "$backup"
        warn "moved ${source} -> ${backup} (to restore: mv '${backup}' '${source}')"
    fi
    tc__now
    printf '%s\tdisabled\t%s\t%s\t%s\n' "$TC_NOW" "$source" "$backup" "$reason" \
        >>"${TC_APT_BACKUP_DIR}/changes.tsv"
}
