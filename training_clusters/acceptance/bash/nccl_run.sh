# shellcheck shell=bash
# main for the NCCL scripts: find or build all_reduce_perf, run one rank per GPU, gate it, then say where the
# nodes sit in the network (slurm_placement.sh).
# Reads GPUS_PER_NODE, NCCL_* and CUDA_HOME from the settings.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# The all_reduce_perf to run: NCCL_TESTS_BIN, our pinned build, or the one the DLAMI ships.
find_all_reduce_perf() {
    local candidate
    for candidate in "${NCCL_TESTS_BIN:-}" \
        "${ACCEPTANCE_DIR}/src/nccl-tests-${NCCL_TESTS_VERSION}/build/all_reduce_perf" \
        /usr/local/cuda*/efa/test-cuda*/all_reduce_perf; do
        if [[ -n ${candidate} && -x ${candidate} ]]; then
            printf '%s\n' "${candidate}"
            return 0
        fi
    done
}

# An NCCL installation to build against: NCCL_HOME, CUDA's (DLAMI), the system's, or our pinned build.
find_nccl_home() {
    local candidate
    for candidate in "${NCCL_HOME:-}" "${CUDA_HOME}" /usr /opt/nccl/build; do
        if [[ -n ${candidate} && -f ${candidate}/include/nccl.h ]]; then
            printf '%s\n' "${candidate}"
            return 0
        fi
    done
    candidate="${ACCEPTANCE_DIR}/src/nccl-${NCCL_VERSION}/build"
    if [[ -f ${candidate}/lib/libnccl.so ]]; then printf '%s\n' "${candidate}"; fi
}

# -gencode for this node's GPUs (from nvidia-smi), so the builds compile for one architecture only.
nvcc_gencode() {
    local capability
    capability="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .' || true)"
    if [[ ${capability} =~ ^[0-9]+$ ]]; then
        printf -- '-gencode=arch=compute_%s,code=sm_%s\n' "${capability}" "${capability}"
    fi
}

# Build the pinned NCCL (when the AMI has none) and nccl-tests, once per shared file system.
build_nccl_tests() {
    local gencode nccl_home archive
    local source="${ACCEPTANCE_DIR}/src/nccl-tests-${NCCL_TESTS_VERSION}"
    mkdir -p "${ACCEPTANCE_DIR}/src"
    exec 9>"${ACCEPTANCE_DIR}/.nccl-tests.lock"
    flock 9
    gencode="$(nvcc_gencode)"
    nccl_home="$(find_nccl_home)"
    if [[ -z ${nccl_home} ]]; then
        archive="${ACCEPTANCE_DIR}/nccl-${NCCL_VERSION}.tar.gz"
        fetch "${NCCL_URL}" "${archive}" "${NCCL_SHA256}"
        tar -xzf "${archive}" -C "${ACCEPTANCE_DIR}/src"
        log "building NCCL ${NCCL_VERSION} (once; the AMI has none)"
        make -C "${ACCEPTANCE_DIR}/src/nccl-${NCCL_VERSION}" -j "$(nproc)" src.build CUDA_HOME="${CUDA_HOME}" \
            ${gencode:+NVCC_GENCODE="${gencode}"} >"${ACCEPTANCE_DIR}/src/nccl-${NCCL_VERSION}.log" 2>&1 ||
            die "building NCCL failed: see ${ACCEPTANCE_DIR}/src/nccl-${NCCL_VERSION}.log"
        nccl_home="${ACCEPTANCE_DIR}/src/nccl-${NCCL_VERSION}/build"
    fi
    if [[ ! -x ${source}/build/all_reduce_perf ]]; then
        archive="${ACCEPTANCE_DIR}/nccl-tests-${NCCL_TESTS_VERSION}.tar.gz"
        fetch "${NCCL_TESTS_URL}" "${archive}" "${NCCL_TESTS_SHA256}"
        tar -xzf "${archive}" -C "${ACCEPTANCE_DIR}/src"
        log "building nccl-tests ${NCCL_TESTS_VERSION} against ${nccl_home} (once)"
        make -C "${source}" -j "$(nproc)" MPI=1 MPI_HOME="${MPI_HOME}" CUDA_HOME="${CUDA_HOME}" \
            NCCL_HOME="${nccl_home}" ${gencode:+NVCC_GENCODE="${gencode}"} >"${source}.log" 2>&1 ||
            die "building nccl-tests failed: see ${source}.log"
    fi
    exec 9>&-
}

# Directories aws-ofi-nccl registered with the dynamic linker (the EFA installer writes this file).
ofi_nccl_dirs() {
    if [[ -f /etc/ld.so.conf.d/100_ofinccl.conf ]]; then grep -v '^#' /etc/ld.so.conf.d/100_ofinccl.conf || true; fi
}

main() {
    local binary interface nccl_home
    local -a ofi_dirs
    [[ -x ${MPI_HOME}/bin/mpirun ]] || die "no Open MPI at ${MPI_HOME}: set MPI_HOME"
    choose_acceptance_dir
    binary="$(find_all_reduce_perf)"
    if [[ -z ${binary} ]]; then
        build_nccl_tests
        binary="$(find_all_reduce_perf)"
    fi
    [[ -n ${binary} ]] || die "no all_reduce_perf found or built"
    nccl_home="$(find_nccl_home)"
    if [[ ${EXPECTED_TRANSPORT} == socket ]]; then
        unset FI_PROVIDER
        interface="$(primary_interface)"
        export NCCL_SOCKET_IFNAME="${interface:+=${interface}}"
        NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-^lo,docker}"
    fi
    mapfile -t ofi_dirs < <(ofi_nccl_dirs)
    LD_LIBRARY_PATH="$(library_path "${nccl_home:+${nccl_home}/lib}" "${ofi_dirs[@]}" /opt/amazon/ofi-nccl/lib64 \
        /opt/amazon/ofi-nccl/lib /opt/aws-ofi-nccl/lib /opt/amazon/efa/lib64 /opt/amazon/efa/lib \
        "${MPI_HOME}/lib64" "${MPI_HOME}/lib" "${CUDA_HOME}/lib64" "${CUDA_HOME}/lib")"
    export LD_LIBRARY_PATH
    export_rank_environment
    if [[ ${EXPECTED_TRANSPORT} == socket ]]; then MPI_EXPORTS+=(-x NCCL_SOCKET_IFNAME); fi
    prepare_output
    # MPI only starts the ranks and exchanges NCCL's id: keep it on TCP so it never competes for EFA.
    run_recorded "${MPI_HOME}/bin/mpirun" -np "$((${SLURM_NNODES:-2} * GPUS_PER_NODE))" \
        --map-by "ppr:${GPUS_PER_NODE}:node" --bind-to none --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_exclude lo,docker0 "${MPI_EXPORTS[@]}" \
        "${binary}" -b 8 -e 16G -f 2 -g 1 -c 1 -w 5 -n 20
    local verdict=0
    check_output "${OUTPUT}" || verdict=$?
    placement
    ((verdict == 0)) || exit "${verdict}"
    log "output kept in ${OUTPUT}; check it again with: bash ${SCRIPT_NAME} --check ${OUTPUT}"
}
