# shellcheck shell=bash disable=SC2034  # settings read by on_create.sh
#
# HyperPod on EKS: the node-side steps of an instance group whose nodes join an EKS cluster
# (provisioning_parameters.json says "workload_manager": "eks"). HyperPod itself installs and joins the
# kubelet; what the lifecycle does, as AWS's reference LifecycleScripts/base-config/on_create.sh for EKS
# (github.com/aws-samples/awsome-distributed-training, 1.architectures/7.sagemaker-hyperpod-eks) does it
# in its own way:
#   - container images and pod volumes go onto the instance group's EBS volume, which HyperPod mounts at
#     /opt/sagemaker, not onto the root volume: /var/lib/containerd and /var/lib/kubelet become bind
#     mounts of folders there (kept in /etc/fstab, so a reboot keeps them), with containerd and the
#     kubelet stopped while their data moves;
#   - the Lustre client modules are loaded, so the FSx CSI driver can mount the shared file system.
# Sourced by on_create.sh; never run on its own.

# Where HyperPod mounts the instance group's EBS volume (InstanceStorageConfigs) on the node.
TC_EKS_VOLUME="/opt/sagemaker"
# The runtime's data folders that move there, and the units that hold them open (stopped in this order).
TC_EKS_DATA_DIRS=(containerd kubelet)
TC_EKS_UNITS=(kubelet containerd)
# How long to wait for HyperPod to mount the volume (the reference waits up to a minute).
TC_EKS_VOLUME_WAIT_ATTEMPTS="${TC_EKS_VOLUME_WAIT_ATTEMPTS:-12}"
TC_EKS_VOLUME_WAIT_SLEEP="${TC_EKS_VOLUME_WAIT_SLEEP:-5}"

TC_EKS_FSX=""              # true when provisioning_parameters.json names a file system
TC_EKS_STOPPED_UNITS=()    # what tc_eks_stop_runtime stopped, started again by tc_eks_start_runtime

# tc_workload_manager: provisioning_parameters.json's workload_manager (slurm when absent).
tc_workload_manager() {
    "$TC_PYTHON" -I -S "$TC_CLUSTER_CONFIG_PY" workload-manager "$TC_PARAMS_FILE"
}

tc_eks_preflight() {
    if [[ ! -f $TC_PARAMS_FILE ]]; then
        tc_error "provisioning parameters not found at ${TC_PARAMS_FILE}: upload provisioning_parameters.json next to on_create.sh"
        return 1
    fi
    TC_EKS_FSX="$("$TC_PYTHON" -I -S "$TC_CLUSTER_CONFIG_PY" has-fsx "$TC_PARAMS_FILE")"
    log "parameters: workload_manager=eks fsx=${TC_EKS_FSX} volume=${TC_EKS_VOLUME}"
}

# tc_eks_wait_volume: HyperPod mounts the group's EBS volume while the lifecycle may already run.
tc_eks_wait_volume() {
    local attempt
    for ((attempt = 1; attempt <= TC_EKS_VOLUME_WAIT_ATTEMPTS; attempt++)); do
        if mountpoint -q -- "${TC_ROOT}${TC_EKS_VOLUME}"; then
            log "${TC_EKS_VOLUME} is mounted"
            return 0
        fi
        log "waiting for HyperPod to mount the instance group's volume at ${TC_EKS_VOLUME} (${attempt}/${TC_EKS_VOLUME_WAIT_ATTEMPTS})"
        sleep "$TC_EKS_VOLUME_WAIT_SLEEP"
    done
    tc_error "${TC_EKS_VOLUME} is not mounted after $((TC_EKS_VOLUME_WAIT_ATTEMPTS * TC_EKS_VOLUME_WAIT_SLEEP))s:" \
        "give the instance group an EBS volume (InstanceStorageConfigs); containerd's and the kubelet's data" \
        "would fill the root volume"
    return 1
}

# tc_eks_moved NAME: whether /var/lib/NAME already is the bind mount of the volume's folder.
tc_eks_moved() {
    mountpoint -q -- "${TC_ROOT}/var/lib/$1"
}

tc_eks_stop_runtime() {
    local name unit pending=false
    for name in "${TC_EKS_DATA_DIRS[@]}"; do
        tc_eks_moved "$name" || pending=true
    done
    TC_EKS_STOPPED_UNITS=()
    if [[ $pending == false ]]; then
        log "containerd's and the kubelet's data are already on ${TC_EKS_VOLUME}: nothing to stop"
        return 0
    fi
    for unit in "${TC_EKS_UNITS[@]}"; do
        if systemctl is-active --quiet "${unit}.service"; then
            systemctl stop "${unit}.service"
            TC_EKS_STOPPED_UNITS=("${unit}" "${TC_EKS_STOPPED_UNITS[@]}")
            log "stopped ${unit}.service while its data moves"
        fi
    done
}

# tc_eks_move_data NAME: /var/lib/NAME becomes a bind mount of /opt/sagemaker/NAME, with what it held.
tc_eks_move_data() {
    local name=$1 source target line
    source="/var/lib/${name}"
    target="${TC_EKS_VOLUME}/${name}"
    line="${target} ${source} none bind,nofail 0 0"
    if tc_eks_moved "$name"; then
        tc_ensure_line "${TC_ROOT}/etc/fstab" "$line"
        log "${source} is already bind-mounted from ${target}"
        return 0
    fi
    tc_mkdir "${TC_ROOT}${target}" "${TC_ROOT}${source}"
    if [[ -z $(ls -A -- "${TC_ROOT}${target}") && -n $(ls -A -- "${TC_ROOT}${source}") ]]; then
        cp -a -- "${TC_ROOT}${source}/." "${TC_ROOT}${target}/"
        log "copied ${source} to ${target}"
    fi
    tc_backup_once "${TC_ROOT}/etc/fstab"
    tc_ensure_line "${TC_ROOT}/etc/fstab" "$line"
    mount --bind "${TC_ROOT}${target}" "${TC_ROOT}${source}"
    log "${source} is now ${target} (bind mount, in /etc/fstab)"
}

tc_eks_start_runtime() {
    local unit
    if ((${#TC_EKS_STOPPED_UNITS[@]} == 0)); then
        log "nothing was stopped"
        return 0
    fi
    for unit in "${TC_EKS_STOPPED_UNITS[@]}"; do
        systemctl start "${unit}.service"
        log "started ${unit}.service"
    done
}

# tc_eks_lustre_client: the FSx CSI driver's node plugin mounts Lustre on the host: its modules must load.
tc_eks_lustre_client() {
    if ! modinfo lustre >/dev/null 2>&1; then
        tc_error "the Lustre client modules are not on this AMI: the FSx CSI driver could not mount the claim"
        return 1
    fi
    modprobe lnet
    modprobe lustre
    log "Lustre client modules loaded"
}

# tc_eks_main: every step of an EKS node, in order.
tc_eks_main() {
    local name
    run_step eks-preflight tc_eks_preflight
    run_step volume tc_eks_wait_volume
    run_step stop-runtime tc_eks_stop_runtime
    for name in "${TC_EKS_DATA_DIRS[@]}"; do
        run_step "move-${name}" tc_eks_move_data "$name"
    done
    run_step start-runtime tc_eks_start_runtime
    if [[ $TC_EKS_FSX == true ]]; then
        run_step lustre-client tc_eks_lustre_client
    else
        skip_step lustre-client "no fsx_dns_name in provisioning_parameters.json"
    fi
    log "SUCCESS: node ready to join the EKS cluster in ${SECONDS}s"
}
