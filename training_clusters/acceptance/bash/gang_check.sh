# shellcheck shell=bash
# The gang-admission gate: of two jobs that each ask for every GPU of a nodegroup, one runs whole and the
# other waits whole. Reads TEST_LABEL, FIRST_JOB, SECOND_JOB and WAIT_HINT from the settings; its input is
# kubectl's table of the namespace's Kueue workloads: JOB (the owning job), ADMITTED and PODS_READY.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- gang admission ---
# "ADMITTED PODS_READY" of job $1's workload in table $2; "missing missing" when the job has none.
workload_state() {
    awk -v job="$1" '$1 == job { print $2, $3; found = 1; exit } END { if (!found) print "missing missing" }' "$2"
}

check_output() {
    local table=$1 job admitted ready verdict
    local -a running=() waiting=() states=()
    for job in "${FIRST_JOB}" "${SECOND_JOB}"; do
        read -r admitted ready < <(workload_state "${job}" "${table}")
        states+=("${job}: admitted ${admitted}, pods ready ${ready}")
        if [[ ${admitted} == missing ]]; then
            printf 'RESULT %s: FAIL job %s has no Kueue workload: is it applied, labelled with the queue, and does the LocalQueue exist?\n' \
                "${TEST_LABEL}" "${job}"
            return 1
        fi
        if [[ ${admitted} == True && ${ready} == True ]]; then
            running+=("${job}")
        elif [[ ${admitted} != True ]]; then
            waiting+=("${job}")
        fi
    done
    verdict="$(printf '%s; ' "${states[@]}")"
    if ((${#running[@]} == 1 && ${#waiting[@]} == 1)); then
        printf 'RESULT %s: PASS %s runs whole, %s waits whole (%s)\n' "${TEST_LABEL}" "${running[0]}" \
            "${waiting[0]}" "${verdict%; }"
        return 0
    fi
    printf 'RESULT %s: FAIL expected one job running whole and one waiting (%s). %s\n' "${TEST_LABEL}" \
        "${verdict%; }" "${WAIT_HINT}"
    return 1
}
