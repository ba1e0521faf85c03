# shellcheck shell=bash
# main for the OSU scripts: build the pinned OSU release once, run it on two nodes, gate it.
# Reads OSU_TEST, OSU_VERSION, OSU_SHA256, OSU_URL, MPI_TRANSPORT and TCP_ONLY from the settings.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# The installed OSU binary named $1, if built.
osu_binary() {
    local found=""
    if [[ -d ${OSU_PREFIX}/libexec ]]; then
        found="$(find "${OSU_PREFIX}/libexec" -type f -name "$1" -perm -u+x -print -quit)"
    fi
    if [[ -n ${found} ]]; then printf '%s\n' "${found}"; fi
}

# Build the pinned OSU release against Open MPI, once per shared file system.
build_osu() {
    local archive="${ACCEPTANCE_DIR}/osu-micro-benchmarks-${OSU_VERSION}.tar.gz"
    local source="${ACCEPTANCE_DIR}/src/osu-micro-benchmarks-${OSU_VERSION}"
    mkdir -p "${ACCEPTANCE_DIR}/src"
    exec 9>"${ACCEPTANCE_DIR}/.osu.lock"
    flock 9
    if [[ -z "$(osu_binary "${OSU_TEST}")" ]]; then
        fetch "${OSU_URL}" "${archive}" "${OSU_SHA256}"
        rm -rf "${source}"
        tar -xzf "${archive}" -C "${ACCEPTANCE_DIR}/src"
        log "building OSU micro-benchmarks ${OSU_VERSION} into ${OSU_PREFIX} (once)"
        (cd "${source}" && ./configure CC="${MPI_HOME}/bin/mpicc" CXX="${MPI_HOME}/bin/mpicxx" \
            --prefix="${OSU_PREFIX}" && make -j "$(nproc)" && make install) >"${source}.log" 2>&1 ||
            die "building the OSU micro-benchmarks failed: see ${source}.log"
    fi
    exec 9>&-
}

# List libfabric's efa provider on both nodes into $OUTPUT, one rank per node, and stop the job unless both
# have it: the EFA benchmark's evidence (the installer's fi_info, under EFA_HOME, default /opt/amazon/efa).
record_efa_provider() {
    local fi_info="${EFA_HOME:-/opt/amazon/efa}/bin/fi_info"
    [[ -x ${fi_info} ]] || die "no fi_info at ${fi_info}: set EFA_HOME to the EFA installer's libfabric"
    record "${MPI_HOME}/bin/mpirun" -np 2 --map-by ppr:1:node --tag-output "${MPI_EXPORTS[@]}" \
        "${fi_info}" -p efa -t FI_EP_RDM || true
    efa_evidence "${OUTPUT}" || exit 1
}

main() {
    local binary interface
    local -a transport_args=("${MPI_TRANSPORT[@]}")
    [[ -x ${MPI_HOME}/bin/mpirun ]] || die "no Open MPI at ${MPI_HOME}: set MPI_HOME"
    choose_acceptance_dir
    OSU_PREFIX="${ACCEPTANCE_DIR}/osu-micro-benchmarks-${OSU_VERSION}-openmpi"
    binary="$(osu_binary "${OSU_TEST}")"
    if [[ -z ${binary} ]]; then
        build_osu
        binary="$(osu_binary "${OSU_TEST}")"
    fi
    [[ -n ${binary} ]] || die "no ${OSU_TEST} under ${OSU_PREFIX}"
    if [[ ${TCP_ONLY} == yes ]]; then
        unset FI_PROVIDER
        interface="$(primary_interface)"
        # One interface, so one TCP flow (the tcp BTL would otherwise stripe over every ENI).
        if [[ -n ${interface} ]]; then
            transport_args+=(--mca btl_tcp_if_include "${interface}")
        else
            transport_args+=(--mca btl_tcp_if_exclude "lo,docker0")
        fi
    fi
    LD_LIBRARY_PATH="$(library_path "${MPI_HOME}/lib64" "${MPI_HOME}/lib" /opt/amazon/efa/lib64 /opt/amazon/efa/lib)"
    export LD_LIBRARY_PATH
    export_rank_environment
    prepare_output
    if [[ ${TCP_ONLY} == no ]]; then record_efa_provider; fi
    run_recorded "${MPI_HOME}/bin/mpirun" -np 2 --map-by ppr:1:node "${transport_args[@]}" \
        "${MPI_EXPORTS[@]}" "${binary}"
    check_output "${OUTPUT}" || exit
    log "output kept in ${OUTPUT}; check it again with: bash ${SCRIPT_NAME} --check ${OUTPUT}"
}
