# shellcheck shell=bash
# Running a benchmark: logging, downloads, the shared acceptance directory, recording the output.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- running ---
log() { printf '[acceptance] %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 2
}

# Interface of the default route (the primary ENI); empty when unknown.
primary_interface() { awk '$2 == "00000000" { print $1; exit }' /proc/net/route 2>/dev/null || true; }

# The existing directories among the arguments, joined with ':' before the current LD_LIBRARY_PATH.
library_path() {
    local dir
    local -a existing=()
    for dir in "$@"; do
        if [[ -n ${dir} && -d ${dir} ]]; then existing+=("${dir}"); fi
    done
    local IFS=:
    printf '%s\n' "${existing[*]}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
}

# Download $1 to $2 unless already there, and verify its sha256 $3.
fetch() {
    local url=$1 archive=$2 sha256=$3
    if [[ ! -f ${archive} ]]; then
        log "downloading ${url}"
        curl --fail --silent --show-error --location --retry 3 --output "${archive}.part" "${url}" ||
            die "cannot download ${url}: give the compute nodes internet access or copy it to ${archive}"
        mv "${archive}.part" "${archive}"
    fi
    printf '%s  %s\n' "${sha256}" "${archive}" | sha256sum --check --status ||
        die "${archive} does not match sha256 ${sha256}: delete it and run again"
}

# Run the command, append its output to $OUTPUT (and show it); return the command's exit status.
record() {
    local status
    log "running: $*"
    set +e
    "$@" 2>&1 | tee -a "${OUTPUT}"
    status=${PIPESTATUS[0]}
    set -e
    return "${status}"
}

# Run the benchmark, keep its output in $OUTPUT, stop the job when it fails.
run_recorded() {
    local status=0
    record "$@" || status=$?
    if ((status != 0)); then
        printf 'RESULT %s: FAIL the benchmark exited with status %s (see above). %s\n' "${TEST_LABEL}" \
            "${status}" "${FAIL_HINT}"
        exit 1
    fi
}

# Where builds and outputs go: TC_ACCEPTANCE_DIR, else <shared file system>/acceptance when this user
# can write there, else ~/acceptance. Every node must see it: the benchmarks run from there.
choose_acceptance_dir() {
    if [[ -n ${TC_ACCEPTANCE_DIR:-} ]]; then
        ACCEPTANCE_DIR=${TC_ACCEPTANCE_DIR}
    elif [[ -n ${SHARED_DIR} ]] && mkdir -p "${SHARED_DIR}/acceptance" 2>/dev/null && [[ -w ${SHARED_DIR}/acceptance ]]; then
        ACCEPTANCE_DIR="${SHARED_DIR}/acceptance"
    else
        ACCEPTANCE_DIR="${HOME}/acceptance"
    fi
    mkdir -p "${ACCEPTANCE_DIR}"
    log "benchmarks and outputs in ${ACCEPTANCE_DIR}"
}

prepare_output() {
    mkdir -p "${ACCEPTANCE_DIR}/results"
    OUTPUT="${ACCEPTANCE_DIR}/results/${SLURM_JOB_NAME:-${SCRIPT_NAME%.*}}-${SLURM_JOB_ID:-$$}.txt"
    : >"${OUTPUT}"
}

# Export RANK_ENVIRONMENT here and add '-x NAME' for each to the mpirun arguments in MPI_EXPORTS.
export_rank_environment() {
    local assignment
    MPI_EXPORTS=(-x LD_LIBRARY_PATH)
    for assignment in "${RANK_ENVIRONMENT[@]}"; do
        export "${assignment?}"
        MPI_EXPORTS+=(-x "${assignment%%=*}")
    done
}
