# shellcheck shell=bash
# check_output for NCCL all_reduce_perf: peak bus bandwidth, the network NCCL used, the ranks.
# Reads EXPECTED_TRANSPORT and EXPECTED_RANKS besides the verdict's settings.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- gate: peak bus bandwidth of all_reduce_perf (GB/s), the network NCCL used, the ranks ---
# Data lines end with: time algbw busbw #wrong (out of place), time algbw busbw #wrong (in place).
measure() {
    awk '
        { sub(/^\[[0-9,]+\]<std(out|err)>:/, "") }
        $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 12 {
            for (i = NF - 5; i <= NF - 1; i += 4) {
                if ($i ~ /^[0-9]+(\.[0-9]+)?$/ && (!seen || $i + 0 > peak)) { peak = $i + 0; seen = 1 }
            }
        }
        END { if (seen) printf "%.2f\n", peak }
    ' "$1"
}

# The network NCCL used, from its INFO lines (NCCL_DEBUG=INFO): "socket" when any rank or channel used
# NCCL's sockets; "efa" only when NCCL used the aws-ofi-nccl plugin ("Using network Libfabric", "AWS
# Libfabric" before plugin 1.9) and the plugin chose libfabric's efa provider and no other ("NET/OFI Selected
# provider is efa, fabric is ...", "Selected Provider is efa (found N nics)" before plugin 1.14);
# "libfabric:PROVIDERS" when it chose others, "libfabric:" when no line names one; "unknown" otherwise.
transport() {
    local providers
    if grep -Eq 'via NET/Socket|Using network Socket' "$1"; then
        echo socket
    elif ! grep -Eq 'Using network (AWS )?Libfabric|via NET/(AWS )?Libfabric' "$1"; then
        echo unknown
    else
        providers="$(awk '
            match($0, /NET\/OFI Selected [Pp]rovider is [^ ,]+/) {
                count = split(substr($0, RSTART, RLENGTH), words, " ")
                if (!(words[count] in seen)) list = list (list == "" ? "" : "+") words[count]
                seen[words[count]] = 1
            }
            END { print list }
        ' "$1")"
        if [[ ${providers} == efa ]]; then echo efa; else echo "libfabric:${providers}"; fi
    fi
}

# What is wrong when the transport ($1) is not EXPECTED_TRANSPORT, in words.
transport_problem() {
    case $1 in
        socket | efa) printf 'NCCL used the %s transport, not %s' "$1" "${EXPECTED_TRANSPORT}" ;;
        libfabric:) printf "NCCL used libfabric, but no 'NET/OFI Selected provider is' line names its provider" ;;
        libfabric:*) printf "NCCL used libfabric's %s provider, not %s" "${1#libfabric:}" "${EXPECTED_TRANSPORT}" ;;
        *) printf "NCCL's log names no network (no 'Using network' line; is NCCL_DEBUG=INFO set?)" ;;
    esac
}

# Ranks listed under "# Using devices" (0 when the header is missing).
ranks() { grep -Ec '^(\[[0-9,]+\]<stdout>:)?#[[:space:]]+Rank[[:space:]]+[0-9]+' "$1" || true; }

check_output() {
    local measured used listed
    measured="$(measure "$1")"
    [[ -n ${measured} ]] || no_figures "$1" || return
    used="$(transport "$1")"
    if [[ ${used} != "${EXPECTED_TRANSPORT}" ]]; then
        printf 'RESULT %s: FAIL %s (peak %s %s). %s\n' "${TEST_LABEL}" "$(transport_problem "${used}")" \
            "${measured}" "${METRIC_UNIT}" "${FAIL_HINT}"
        return 1
    fi
    listed="$(ranks "$1")"
    if ((listed > 0 && listed < EXPECTED_RANKS)); then
        printf 'RESULT %s: FAIL %s rank(s) joined the test, not %s (all_reduce_perf built without MPI?)\n' \
            "${TEST_LABEL}" "${listed}" "${EXPECTED_RANKS}"
        return 1
    fi
    judge "${measured}"
}
