# shellcheck shell=bash
# main of the DCGM sbatch script: dcgm_node on every node of the allocation (one task each), then the gate.
# Reads SCRIPT_NAME, DCGM_LEVEL and DIAG_TIMEOUT_SECONDS from the settings.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- run ---
main() {
    local output="${SCRIPT_NAME%.sbatch}-${SLURM_JOB_ID:-manual}.diag"
    # One task per node; a node that fails must not stop the others (--kill-on-bad-exit=0).
    srun --ntasks-per-node=1 --kill-on-bad-exit=0 \
        bash -c "$(declare -f dcgm_node); dcgm_node ${DCGM_LEVEL} ${DIAG_TIMEOUT_SECONDS}" >"${output}" 2>&1 || true
    cat "${output}"
    check_output "${output}"
}
