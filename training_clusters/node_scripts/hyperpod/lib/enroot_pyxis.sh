# shellcheck shell=bash
#
# Containers in Slurm jobs: enroot (the container runtime, on workers, where jobs run) and the pyxis
# SPANK plugin (on every node: srun parses --container-image on the submit host, slurmstepd runs
# the container on the worker). Skipped when a version is already installed (some AMIs ship both).
# On GPU workers enroot's GPU hook needs nvidia-container-cli (see tc_ensure_nvidia_container_cli).
# Downloads come from GitHub releases through the VPC's NAT; point the *_URL settings at a mirror
# (an S3 bucket behind a gateway endpoint, say) for subnets without NAT.

TC_ENROOT_VERSION="${TC_ENROOT_VERSION:-3.5.0}"
TC_ENROOT_BASE_URL="${TC_ENROOT_BASE_URL:-https://github.com/NVIDIA/enroot/releases/download}"
TC_PYXIS_VERSION="${TC_PYXIS_VERSION:-0.20.0}"
TC_PYXIS_TARBALL_URL="${TC_PYXIS_TARBALL_URL:-https://github.com/NVIDIA/pyxis/archive/refs/tags/v${TC_PYXIS_VERSION}.tar.gz}"
TC_PYXIS_PLUGIN="/usr/local/lib/slurm/spank_pyxis.so"
# NVIDIA's container toolkit repository (github.com/NVIDIA/libnvidia-container; the apt set-up of
# docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html): a flat
# repository per architecture under the URL, signed by the key at TC_NVIDIA_CONTAINER_KEY_URL.
TC_NVIDIA_CONTAINER_REPO_URL="${TC_NVIDIA_CONTAINER_REPO_URL:-https://nvidia.github.io/libnvidia-container/stable/deb}"
TC_NVIDIA_CONTAINER_KEY_URL="${TC_NVIDIA_CONTAINER_KEY_URL:-https://nvidia.github.io/libnvidia-container/gpgkey}"

tc_setup_enroot_pyxis() {
    if [[ $TC_ROLE == worker ]]; then
        tc_install_enroot
        tc_ensure_nvidia_container_cli
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

# enroot's GPU hook (github.com/NVIDIA/enroot conf/hooks/98-nvidia.sh) runs nvidia-container-cli for
# every image that sets NVIDIA_VISIBLE_DEVICES (every CUDA image) and fails the container without it.
# It comes with libnvidia-container-tools, which some HyperPod GPU AMIs ship and nothing else here
# installs when Docker is off (AWS's reference gets it from utils/install_docker.sh). So on a GPU
# worker without the command, it is installed from NVIDIA's repository, whose source is kept out of
# sources.list.d: it is updated on its own with short timeouts (tc_apt_probe_source) and installed
# from with -o Dir::Etc::sourcelist, so a failing NVIDIA repository can never break a later
# `apt-get update` (the lesson of the FSx repository, README "Hotfix"); if it fails now, the step
# fails naming what is missing. The key and the source stay in TC_STATE_DIR/apt for an administrator.
tc_ensure_nvidia_container_cli() {
    local found
    if found="$(command -v nvidia-container-cli)"; then
        log "nvidia-container-cli is already installed (${found}): enroot's GPU hook can run"
        return 0
    fi
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        log "no NVIDIA GPU on this node: enroot's GPU hook needs no nvidia-container-cli"
        return 0
    fi
    tc_install_nvidia_container_cli
}

tc_install_nvidia_container_cli() {
    local reason=""
    tc__install_nvidia_container_cli
    if [[ -n $reason ]]; then
        tc_error "this GPU worker has no nvidia-container-cli (libnvidia-container-tools), which enroot's GPU" \
            "hook 98-nvidia.sh needs for every CUDA image, and ${reason}"
        return 1
    fi
    log "installed libnvidia-container-tools: $(command -v nvidia-container-cli)"
}

# The installation; sets reason (of the caller) to why it failed, if it did.
tc__install_nvidia_container_cli() {
    local dir="${TC_STATE_DIR}/apt" arch list key rc=0 repo=$TC_NVIDIA_CONTAINER_REPO_URL
    local -a packages=(libnvidia-container-tools libnvidia-container1)
    arch="$(dpkg --print-architecture)"
    list="${dir}/nvidia-container-toolkit.list"
    key="${dir}/nvidia-container-toolkit.asc" # apt reads an ASCII-armoured key by its .asc name
    log "no nvidia-container-cli on this GPU worker: installing ${packages[*]} from NVIDIA's repository"
    tc_mkdir "$dir"
    if ! tc_download "$TC_NVIDIA_CONTAINER_KEY_URL" "$key"; then
        reason="NVIDIA's signing key could not be downloaded from ${TC_NVIDIA_CONTAINER_KEY_URL}"
        return 0
    fi
    chmod 0644 "$key" # apt's _apt user reads it
    tc_write_file "$list" 0644 <<<"deb [arch=${arch} signed-by=${key#"$TC_ROOT"}] ${repo}/${arch} /"
    if ! tc_apt_probe_source "$list"; then
        reason="another process kept apt's lists lock for ${TC_APT_LOCK_TIMEOUT}s (TC_APT_LOCK_TIMEOUT)"
        return 0
    fi
    if [[ -n $TC_APT_PROBE_REASON ]]; then
        reason="NVIDIA's container toolkit repository ${repo} failed: ${TC_APT_PROBE_REASON}"
        return 0
    fi
    apt_get install -y --no-install-recommends -o "Dir::Etc::sourcelist=${list}" -o Dir::Etc::sourceparts=- \
        "${packages[@]}" || rc=$?
    if ((rc != 0)); then
        reason="apt-get could not install ${packages[*]} from NVIDIA's container toolkit repository ${repo}"
        reason+=" (exit ${rc})"
    elif ! command -v nvidia-container-cli >/dev/null 2>&1; then
        reason="${packages[0]} is installed but no nvidia-container-cli is on PATH"
    fi
}

# enroot.conf and every folder enroot and Pyxis read from, through the one implementation HyperPod and
# ParallelCluster share (shared/training-clusters-enroot.sh, whose header says why): runtime, data, image cache
# and temporary files in one folder per user on the fastest local disk, made by root, 0700, the user's (the
# cluster user and each of `users`); the user's enroot configuration (hooks, credentials) in their own home,
# enroot's default. No folder is shared between users, so no user reads a layer another wrote: each user's
# cache is their own on each node (an image is pulled once per user and node). ENROOT_RESTRICT_DEV is off,
# as in AWS's HyperPod reference (utils/enroot.conf) and ParallelCluster's cookbook
# (templates/enroot/enroot.conf.erb): when set, enroot's 10-devices.sh hook gives the container a minimal
# /dev, and the later hooks add back only NVIDIA's and Mellanox's devices (98-nvidia.sh, 99-mellanox.sh),
# never EFA's /dev/infiniband/uverbs*, so NCCL in a Pyxis container would lose EFA and fall back to sockets.
tc_configure_enroot() {
    local scratch="/var/lib" candidate entry
    local -a names=()
    tc_wait_for_local_nvme
    for candidate in /opt/dlami/nvme /opt/sagemaker; do
        if mountpoint -q -- "${TC_ROOT}${candidate}"; then
            scratch=$candidate
            break
        fi
    done
    if id -u -- "$TC_CLUSTER_USER" >/dev/null 2>&1; then
        names+=("$TC_CLUSTER_USER")
    fi
    for entry in "${TC_USERS[@]}"; do
        names+=("${entry%%:*}")
    done
    log "enroot folders: one per user under ${scratch}/enroot, for ${names[*]:-nobody}"
    local -a user_args=()
    if ((${#names[@]} > 0)); then
        user_args=(--user "$(IFS=,; echo "${names[*]}")")
    fi
    TC_ROOT="$TC_ROOT" "$BASH" "${TC_HOME}/shared/training-clusters-enroot.sh" --template - \
        --conf /etc/enroot/enroot.conf --runtime "${scratch}/enroot/runtime" --data "${scratch}/enroot/data" \
        --cache "${scratch}/enroot/cache" --temp "${scratch}/enroot/tmp" --pyxis-runtime /run/pyxis \
        "${user_args[@]}" <<'EOF'
# Written by the training-clusters lifecycle scripts (on_create.sh).
ENROOT_SQUASH_OPTIONS  -noI -noD -noF -noX -no-duplicates
ENROOT_MOUNT_HOME      y
ENROOT_RESTRICT_DEV    no
ENROOT_ROOTFS_WRITABLE y
EOF
}

# On the DLAMI-based HyperPod AMIs, dlami-nvme.service mounts the instance's NVMe disks at
# /opt/dlami/nvme while the lifecycle script runs: checking the mount point at once can put container
# scratch on the root disk (github.com/aws-samples/awsome-distributed-training issue 427; the
# reference's utils/install_enroot_pyxis.sh waits the same way). Bounded; a node without the unit or
# whose unit failed goes on with what is mounted.
tc_wait_for_local_nvme() {
    local attempt load="" active="" status=""
    for ((attempt = 1; attempt <= TC_NVME_WAIT_ATTEMPTS; attempt++)); do
        tc_nvme_unit_state
        if [[ $load == not-found ]]; then
            log "no dlami-nvme.service on this AMI: local disks are whatever is mounted now"
            return 0
        fi
        if [[ $active == active && $status == 0 ]]; then
            log "dlami-nvme.service is active: local NVMe disks are mounted"
            return 0
        fi
        if [[ $active == failed ]]; then
            warn "dlami-nvme.service failed (exit ${status}): container scratch may land on the root disk"
            return 0
        fi
        log "waiting for dlami-nvme.service to mount local NVMe (${attempt}/${TC_NVME_WAIT_ATTEMPTS}):" \
            "ActiveState=${active:-?} ExecMainStatus=${status:-?}"
        sleep "$TC_NVME_WAIT_SLEEP"
    done
    warn "dlami-nvme.service not active after $((TC_NVME_WAIT_ATTEMPTS * TC_NVME_WAIT_SLEEP))s" \
        "(ActiveState=${active:-?}): container scratch may land on the root disk"
}

# Sets load, active and status (of the caller) from `systemctl show dlami-nvme.service`.
tc_nvme_unit_state() {
    local key value
    load="" active="" status=""
    while IFS='=' read -r key value; do
        case $key in
            LoadState) load=$value ;;
            ActiveState) active=$value ;;
            ExecMainStatus) status=$value ;;
        esac
    done < <(systemctl show -p LoadState -p ActiveState -p ExecMainStatus dlami-nvme.service 2>/dev/null || true)
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
