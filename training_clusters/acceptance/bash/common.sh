# shellcheck shell=bash
# The verdict every gate prints: at_least, judge (one figure against LIMIT) and no_figures.
# Reads METRIC, METRIC_UNIT, EXPECTED, LIMIT, HIGHER_IS_BETTER, FAIL_HINT and TEST_LABEL from the settings.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- verdict ---
# Whether decimal number $1 >= $2.
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }

# Print the verdict on one measured figure; return 0 (pass) or 1 (fail).
judge() {
    local measured=$1 passed=no bound expected=""
    if [[ ${HIGHER_IS_BETTER} == yes ]]; then
        bound=minimum
        if at_least "${measured}" "${LIMIT}"; then passed=yes; fi
        [[ -z ${EXPECTED} ]] || expected="; expected about ${EXPECTED} ${METRIC_UNIT}"
    else
        bound=maximum
        if at_least "${LIMIT}" "${measured}"; then passed=yes; fi
        [[ -z ${EXPECTED} ]] || expected="; expected at most ${EXPECTED} ${METRIC_UNIT}"
    fi
    if [[ ${passed} == yes ]]; then
        printf 'RESULT %s: PASS %s %s %s (%s %s %s%s)\n' "${TEST_LABEL}" "${METRIC}" "${measured}" \
            "${METRIC_UNIT}" "${bound}" "${LIMIT}" "${METRIC_UNIT}" "${expected}"
        return 0
    fi
    printf 'RESULT %s: FAIL %s %s %s, %s %s %s%s. %s\n' "${TEST_LABEL}" "${METRIC}" "${measured}" \
        "${METRIC_UNIT}" "${bound}" "${LIMIT}" "${METRIC_UNIT}" "${expected}" "${FAIL_HINT}"
    return 1
}

no_figures() {
    printf 'RESULT %s: FAIL no %s figures in %s\n' "${TEST_LABEL}" "${METRIC}" "$1"
    return 2
}
