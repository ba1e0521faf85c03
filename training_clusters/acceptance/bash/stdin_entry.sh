# shellcheck shell=bash
# Entry of the EKS -check.sh scripts: the gate on a log file argument or on stdin.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- entry: the launcher's log from a file argument or from stdin ---
input=${1:-}
if [[ -z ${input} ]]; then
    input="$(mktemp)"
    trap 'rm -f "${input}"' EXIT
    cat >"${input}"
fi
status=0
check_output "${input}" || status=$?
# what explains the verdict, where the gate has it (the EKS NCCL gates: where the nodes sat in the network)
if declare -F explain >/dev/null; then explain "${input}"; fi
exit "${status}"
