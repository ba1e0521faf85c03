# shellcheck shell=bash
# check_output for the OSU scripts: the figure measure reads, judged; on EFA runs (TCP_ONLY=no) also the
# evidence that libfabric's efa provider serves both nodes.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- gate: EFA runs show libfabric's efa provider on both nodes ---
# Before an EFA benchmark each node lists the provider ('fi_info -p efa -t FI_EP_RDM' under mpirun
# --tag-output, see record_efa_provider): count the ranks whose listing has a "provider: efa" entry.
efa_provider_ranks() {
    awk '
        /^\[[0-9]+,[0-9]+\]<stdout>:[[:space:]]*provider: efa[[:space:]]*$/ { ranks[substr($0, 1, index($0, "]"))] = 1 }
        END { count = 0; for (rank in ranks) count++; print count }
    ' "$1"
}

# Print FAIL and return 1 when an EFA run's output lacks the efa provider on either node.
efa_evidence() {
    local listed
    if [[ ${TCP_ONLY} == yes ]]; then return 0; fi
    listed="$(efa_provider_ranks "$1")"
    if ((listed < 2)); then
        printf "RESULT %s: FAIL 'fi_info -p efa -t FI_EP_RDM' lists libfabric's efa provider on %s of the 2 nodes" \
            "${TEST_LABEL}" "${listed}"
        printf ' in %s. %s\n' "$1" "${FAIL_HINT}"
        return 1
    fi
}

# --- gate: the OSU figure ``measure`` reads, judged against the expectation ---
check_output() {
    local measured
    measured="$(measure "$1")"
    [[ -n ${measured} ]] || no_figures "$1" || return
    efa_evidence "$1" || return
    judge "${measured}"
}
