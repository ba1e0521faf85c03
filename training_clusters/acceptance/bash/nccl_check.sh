# shellcheck shell=bash
# check_output for NCCL all_reduce_perf: peak bus bandwidth, the network NCCL used, the ranks.
# Reads EXPECTED_TRANSPORT and EXPECTED_RANKS besides the verdict's settings.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- gate: peak bus bandwidth of all_reduce_perf (GB/s), the transport NCCL chose, the ranks ---
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

# socket, efa or unknown, from NCCL's INFO lines (NCCL_DEBUG=INFO).
transport() {
    if grep -Eq 'via NET/Socket|Using network Socket' "$1"; then
        echo socket
    elif grep -Eq 'via NET/(AWS )?(Libfabric|OFI)|Using network (AWS )?Libfabric|NET/OFI Selected [Pp]rovider is efa' "$1"; then
        echo efa
    else
        echo unknown
    fi
}

# Ranks listed under "# Using devices" (0 when the header is missing).
ranks() { grep -Ec '^(\[[0-9,]+\]<stdout>:)?#[[:space:]]+Rank[[:space:]]+[0-9]+' "$1" || true; }

check_output() {
    local measured used listed
    measured="$(measure "$1")"
    [[ -n ${measured} ]] || no_figures "$1" || return
    used="$(transport "$1")"
    if [[ ${used} != "${EXPECTED_TRANSPORT}" ]]; then
        printf 'RESULT %s: FAIL NCCL used the %s transport, not %s (peak %s %s). %s\n' "${TEST_LABEL}" \
            "${used}" "${EXPECTED_TRANSPORT}" "${measured}" "${METRIC_UNIT}" "${FAIL_HINT}"
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
