# shellcheck shell=bash
#
# Containers in Slurm jobs: enroot (the container runtime, on workers, where jobs run) and the pyxis
# SPANK plugin (on every node: srun parses --container-image on the submit host, slurmstepd runs
# the container on the worker). Skipped when a version is already installed (some AMIs ship both).
# Downloads come from GitHub releases through the VPC's NAT; point the *_URL settings at a mirror
# (an S3 bucket behind a gateway endpoint, say) for subnets without NAT.

TC_ENROOT_VERSION="${TC_ENROOT_VERSION:-3.5.0}"
TC_ENROOT_BASE_URL="${TC_ENROOT_BASE_URL:-https://github.com/NVIDIA/enroot/releases/download}"
TC_PYXIS_VERSION="${TC_PYXIS_VERSION:-0.20.0}"
TC_PYXIS_TARBALL_URL="${TC_PYXIS_TARBALL_URL:-https://github.com/NVIDIA/pyxis/archive/refs/tags/v${TC_PYXIS_VERSION}.tar.gz}"
TC_PYXIS_PLUGIN="/usr/local/lib/slurm/spank_pyxis.so"

tc_setup_enroot_pyxis() {
    if [[ $TC_ROLE == worker ]]; then
        tc_install_enroot
        tc_configure_enroot
    else
        log "enroot is only needed where jobs run (workers); this node is the ${TC_ROLE}"
    fi
    tc_install_pyxis
    tc_enable_pyxis_plugin
}

tc_install_enroot() {
    local arch downloads package
    local -a debs=()
    if tc_pkg_installed enroot && tc_pkg_installed enroot+caps; then
        log "enroot is already installed"
        return 0
    fi
    apt_get install -y squashfs-tools parallel fuse-overlayfs squashfuse
    arch="$(dpkg --print-architecture)"
    downloads="${TC_STATE_DIR}/downloads"
    for package in enroot enroot+caps; do
        debs+=("${downloads}/${package}_${TC_ENROOT_VERSION}-1_${arch}.deb")
        tc_download "${TC_ENROOT_BASE_URL}/v${TC_ENROOT_VERSION}/${package}_${TC_ENROOT_VERSION}-1_${arch}.deb" \
            "${debs[-1]}"
    done
    apt_get install -y "${debs[@]}"
    rm -f -- "${debs[@]}"
}

# enroot.conf: per-user runtime and data on the fastest local disk, the image cache on FSx when
# there is one (shared by all nodes, so an image is pulled once per cluster).
tc_configure_enroot() {
    local scratch="/tmp" cache candidate
    for candidate in /opt/dlami/nvme /opt/sagemaker; do
        if mountpoint -q -- "${TC_ROOT}${candidate}"; then
            scratch=$candidate
            break
        fi
    done
    cache="${scratch}/enroot/cache"
    if [[ -n $TC_FSX_DNS_NAME ]]; then
        cache="${TC_FSX_MOUNT_DIR}/enroot/cache"
    fi
    log "enroot scratch space: ${scratch}; image cache: ${cache}"
    tc_mkdir "${TC_ROOT}${scratch}/enroot/runtime" "${TC_ROOT}${scratch}/enroot/data" \
        "${TC_ROOT}${scratch}/enroot/tmp" "${TC_ROOT}${cache}"
    chmod 1777 "${TC_ROOT}${scratch}/enroot/runtime" "${TC_ROOT}${scratch}/enroot/data" \
        "${TC_ROOT}${scratch}/enroot/tmp" "${TC_ROOT}${cache}"
    # enroot sources this file in a shell: $(id -u) must reach it unexpanded.
    # shellcheck disable=SC2016
    local user_suffix='user-$(id -u)'
    tc_write_file "${TC_ROOT}/etc/enroot/enroot.conf" 0644 <<EOF
# Written by the training-clusters lifecycle scripts (on_create.sh).
ENROOT_RUNTIME_PATH    ${scratch}/enroot/runtime/${user_suffix}
ENROOT_DATA_PATH       ${scratch}/enroot/data/${user_suffix}
ENROOT_TEMP_PATH       ${scratch}/enroot/tmp
ENROOT_CACHE_PATH      ${cache}
ENROOT_SQUASH_OPTIONS  -noI -noD -noF -noX -no-duplicates
ENROOT_MOUNT_HOME      y
ENROOT_RESTRICT_DEV    y
ENROOT_ROOTFS_WRITABLE y
EOF
}

tc_install_pyxis() {
    local build source_dir
    if [[ -f ${TC_ROOT}${TC_PYXIS_PLUGIN} ]]; then
        log "pyxis is already installed (${TC_PYXIS_PLUGIN})"
        return 0
    fi
    if ! command -v make >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1; then
        apt_get install -y build-essential
    fi
    build="${TC_STATE_DIR}/build/pyxis"
    rm -rf -- "$build"
    mkdir -p -- "$build"
    tc_download "$TC_PYXIS_TARBALL_URL" "${build}.tar.gz"
    tar -xzf "${build}.tar.gz" -C "$build"
    source_dir="$(find "$build" -mindepth 1 -maxdepth 1 -type d -print -quit)"
    if [[ -z $source_dir ]]; then
        tc_error "the pyxis archive from ${TC_PYXIS_TARBALL_URL} holds no source folder"
        return 1
    fi
    # CPPFLAGS from the environment: pyxis' Makefile appends to it (a make argument would replace it).
    CPPFLAGS="-I${TC_ROOT}/opt/slurm/include" make -C "$source_dir"
    make -C "$source_dir" install prefix=/usr/local DESTDIR="${TC_ROOT}"
    rm -rf -- "$build" "${build}.tar.gz"
    log "installed pyxis ${TC_PYXIS_VERSION} as ${TC_PYXIS_PLUGIN}"
}

# plugstack.conf names the plugin directly: Slurm's configless mode (HyperPod workers fetch their
# config from slurmctld) cannot follow wildcard includes or files outside its etc folder.
tc_enable_pyxis_plugin() {
    local plugstack="${TC_SLURM_ETC}/plugstack.conf"
    if [[ -f $plugstack ]] &&
        awk '!/^[ \t]*#/ && /spank_pyxis\.so|pyxis\.conf/ { found = 1 } END { exit !found }' "$plugstack"; then
        log "pyxis is already enabled in ${plugstack}"
        return 0
    fi
    tc_ensure_line "$plugstack" "required ${TC_PYXIS_PLUGIN}"
}
