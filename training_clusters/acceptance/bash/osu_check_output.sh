# shellcheck shell=bash
# check_output for the OSU scripts: the figure measure reads, judged.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- gate: the OSU figure ``measure`` reads, judged against the expectation ---
check_output() {
    local measured
    measured="$(measure "$1")"
    [[ -n ${measured} ]] || no_figures "$1" || return
    judge "${measured}"
}
