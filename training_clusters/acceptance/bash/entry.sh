# shellcheck shell=bash
# Entry of the sbatch scripts: main, or the gate alone with --check OUTPUT.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- entry ---
if [[ ${1:-} == --check ]]; then
    status=0
    check_output "${2:?usage: bash ${SCRIPT_NAME} --check OUTPUT_FILE}" || status=$?
    exit "${status}"
fi
main
