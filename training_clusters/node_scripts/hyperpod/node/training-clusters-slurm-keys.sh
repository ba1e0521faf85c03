#!/usr/bin/env bash
#
# training-clusters-slurm-keys: keeps the Slurm settings of the training-clusters lifecycle scripts in
# the Slurm configuration files on the HyperPod controller. Installed as
# /usr/local/sbin/training-clusters-slurm-keys by on_create.sh (step slurm-controller), which runs it
# once; afterwards the systemd path unit training-clusters-slurm-keys.path runs it (through
# training-clusters-slurm-keys.service) whenever one of those files changes. HyperPod's agent rewrites
# slurm.conf when the cluster scales or replaces a node, without running the lifecycle scripts again:
# without this, JobRequeue / RequeueExit (auto-resume) and ConstrainDevices would silently lapse.
#
# The settings come from /etc/training-clusters/slurm-keys.conf, one per line: "<file> <Key> <Value>",
# <file> being a file of the Slurm etc folder (slurm.conf, cgroup.conf). Each file is made to hold
# exactly one Key=Value line (keys are case-insensitive, as in Slurm): the first Key= line is replaced,
# later duplicates dropped, or the line appended; a "+Flag" value adds a flag to the Key's list instead. No other line is touched (TopologyPlugin,
# topology.conf and the rest stay as HyperPod wrote them). A file is replaced atomically, and never
# over a version HyperPod's agent wrote meanwhile. When a file changed and slurmctld runs,
# `scontrol reconfigure` makes Slurm read it. Running it again changes nothing, so its own write does
# not trigger it for ever.
#
# Usage: training-clusters-slurm-keys [--no-reconfigure]
# Environment (tests): TC_ROOT (prefix of every path), TC_SLURM_KEYS_FILE.
set -euo pipefail

TC_ROOT="${TC_ROOT:-}"
TC_ROOT="${TC_ROOT%/}"
SLURM_ETC="${TC_ROOT}/opt/slurm/etc"
KEYS_FILE="${TC_SLURM_KEYS_FILE:-${TC_ROOT}/etc/training-clusters/slurm-keys.conf}"
ATTEMPTS=5

say() { printf 'training-clusters-slurm-keys: %s\n' "$*"; }

# set_key KEY VALUE < file > file with exactly one KEY=VALUE line. A VALUE of "+A,B" adds the flags A
# and B to the comma-separated list the first KEY= line already holds (PrologFlags=X11 becomes
# PrologFlags=X11,Contain; flags compared without case, as Slurm does), keeping the others.
set_key() {
    awk -v key="$1" -v value="$2" '
        function merged(current,    have, flags, n, i, out) {
            if (substr(value, 1, 1) != "+") return value
            out = current
            n = split(tolower(current), have, ",")
            for (i = 1; i <= n; i++) present[have[i]] = 1
            n = split(substr(value, 2), flags, ",")
            for (i = 1; i <= n; i++) {
                if (flags[i] == "" || (tolower(flags[i]) in present)) continue
                out = (out == "" ? flags[i] : out "," flags[i])
                present[tolower(flags[i])] = 1
            }
            return out
        }
        {
            probe = tolower($0)
            sub(/^[ \t]+/, "", probe)
            if (index(probe, tolower(key)) == 1 && substr(probe, length(key) + 1) ~ /^[ \t]*=/) {
                if (!done) {
                    current = $0
                    sub(/^[^=]*=[ \t]*/, "", current)
                    sub(/[ \t]*(#.*)?$/, "", current)
                    print key "=" merged(current)
                    done = 1
                }
                next
            }
            print
        }
        END { if (!done) print key "=" merged("") }
    '
}

# apply_file FILE KEY=VALUE...: returns 0 when FILE changed, 1 when it already held the settings.
apply_file() {
    local path=$1 attempt snapshot work next pair
    shift
    for ((attempt = 1; attempt <= ATTEMPTS; attempt++)); do
        snapshot="${path}.tc-snapshot.$$"
        work="${path}.tc-new.$$"
        if [[ -f $path ]]; then
            cp -p -- "$path" "$snapshot"
        else
            : >"$snapshot"
        fi
        cp -- "$snapshot" "$work"
        for pair in "$@"; do
            next="${work}.next"
            set_key "${pair%%=*}" "${pair#*=}" <"$work" >"$next"
            mv -f -- "$next" "$work"
        done
        if cmp -s -- "$work" "$snapshot"; then
            rm -f -- "$work" "$snapshot"
            return 1
        fi
        if [[ -f $path ]]; then
            chmod --reference="$snapshot" -- "$work"
            chown --reference="$snapshot" -- "$work"
        else
            chmod 0644 -- "$work"
        fi
        # HyperPod's agent may have written the file since we read it: never replace its newer version.
        if [[ -f $path ]] && ! cmp -s -- "$snapshot" "$path"; then
            rm -f -- "$work" "$snapshot"
            say "${path} changed while being edited; reading it again (${attempt}/${ATTEMPTS})"
            sleep 1
            continue
        fi
        mv -f -- "$work" "$path"
        rm -f -- "$snapshot"
        say "set $* in ${path}"
        return 0
    done
    say "ERROR: ${path} kept changing; settings not applied: $*" >&2
    exit 2
}

scontrol_command() {
    if [[ -x ${TC_ROOT}/opt/slurm/bin/scontrol ]]; then
        echo "${TC_ROOT}/opt/slurm/bin/scontrol"
    else
        echo scontrol
    fi
}

main() {
    local reconfigure=true file key value changed=false line_no=0 name
    local -a files=()
    local -A pairs=()
    if [[ ${1:-} == --no-reconfigure ]]; then
        reconfigure=false
    fi
    if [[ ! -f $KEYS_FILE ]]; then
        say "ERROR: ${KEYS_FILE} not found (written by the lifecycle scripts on the controller)" >&2
        exit 1
    fi
    while read -r file key value; do
        line_no=$((line_no + 1))
        [[ -n $file && $file != \#* ]] || continue
        if [[ ! $file =~ ^[A-Za-z0-9._-]+$ || ! $key =~ ^[A-Za-z]+$ || -z $value ]]; then
            say "ERROR: ${KEYS_FILE}:${line_no}: want '<file> <Key> <Value>', got '${file} ${key} ${value}'" >&2
            exit 1
        fi
        if [[ -z ${pairs[$file]+set} ]]; then
            files+=("$file")
            pairs[$file]=""
        fi
        pairs[$file]+="${key}=${value}"$'\n'
    done <"$KEYS_FILE"
    for name in "${files[@]}"; do
        local -a settings=()
        mapfile -t settings <<<"${pairs[$name]%$'\n'}"
        if apply_file "${SLURM_ETC}/${name}" "${settings[@]}"; then
            changed=true
        fi
    done
    if [[ $changed == false ]]; then
        say "settings already in place"
        return 0
    fi
    if [[ $reconfigure == true ]] && systemctl is-active --quiet slurmctld; then
        "$(scontrol_command)" reconfigure
        say "scontrol reconfigure done"
    fi
}

main "$@"
