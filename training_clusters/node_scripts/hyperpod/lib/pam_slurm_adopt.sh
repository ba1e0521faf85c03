# shellcheck shell=bash
#
# pam_slurm_adopt on workers, behind enable_pam_slurm_adopt (default off): a user may SSH into a worker
# only while holding a job there, and the session is adopted into that job (its cgroup, its accounting).
# As Slurm documents it (https://slurm.schedmd.com/pam_slurm_adopt.html) and the public reference does it
# (github.com/aws-samples/awsome-distributed-training, 1.architectures/5.sagemaker-hyperpod/
# LifecycleScripts/base-config/utils/pam_adopt_cgroup_wheel.sh):
#   - the module matching the installed Slurm: the one shipped with Slurm if found, else built from
#     SchedMD's source of that version (contribs/pam_slurm_adopt), as the reference does;
#   - /etc/pam.d/sshd: `account sufficient pam_access.so` with a file of ours that lets root and the
#     cluster user (ubuntu) in without a job, then `account required pam_slurm_adopt.so`;
#   - pam_systemd disabled in /etc/pam.d/common-session (it would move the session out of the job),
#     systemd-logind stopped and masked, as the guide says;
#   - PrologFlags=Contain in slurm.conf, set by the controller (lib/slurm.sh keeps it applied).
# SSM sessions (how HyperPod nodes are reached by administrators) do not go through sshd.

TC_PAM_ACCESS_FILE="/etc/security/training-clusters-access.conf"
TC_SLURM_SOURCE_URL="${TC_SLURM_SOURCE_URL:-https://download.schedmd.com/slurm}"
TC_PAM_BUILD_DIR="${TC_PAM_BUILD_DIR:-${TC_ROOT}/opt/training-clusters/build}"

tc_setup_pam_slurm_adopt() {
    local module
    if ! module="$(tc_find_pam_slurm_adopt)"; then
        tc_build_pam_slurm_adopt
        if ! module="$(tc_find_pam_slurm_adopt)"; then
            tc_error "pam_slurm_adopt.so was built but is in none of $(tc_pam_dirs)"
            return 1
        fi
    fi
    log "using ${module}"
    tc_write_file "${TC_ROOT}${TC_PAM_ACCESS_FILE}" 0644 <<EOF
# Written by the training-clusters lifecycle scripts: who may SSH in without a job on this node.
+:root ${TC_CLUSTER_USER}:ALL
-:ALL:ALL
EOF
    tc_backup_once "${TC_ROOT}/etc/pam.d/sshd"
    tc_ensure_line "${TC_ROOT}/etc/pam.d/sshd" "account sufficient pam_access.so accessfile=${TC_PAM_ACCESS_FILE}"
    tc_ensure_line "${TC_ROOT}/etc/pam.d/sshd" "account required ${module}"
    tc_disable_pam_systemd "${TC_ROOT}/etc/pam.d/common-session"
    # Slurm's guide: systemd-logind would take the adopted session's processes out of the job's
    # cgroup; stop and mask it (administrators come in through SSM, which needs no logind session).
    tc_systemctl_try stop systemd-logind
    tc_systemctl_try mask systemd-logind
    log "users reach this worker over SSH only while they hold a job on it (root and ${TC_CLUSTER_USER} always)"
}

tc_pam_dirs() {
    echo "/opt/slurm/lib/security /lib/security /lib/x86_64-linux-gnu/security /usr/lib/x86_64-linux-gnu/security" \
        "/lib/aarch64-linux-gnu/security /usr/lib/aarch64-linux-gnu/security /usr/lib/security"
}

# Prints the module's path on the node, or fails.
tc_find_pam_slurm_adopt() {
    local dir
    for dir in $(tc_pam_dirs); do
        if [[ -f ${TC_ROOT}${dir}/pam_slurm_adopt.so ]]; then
            printf '%s\n' "${dir}/pam_slurm_adopt.so"
            return 0
        fi
    done
    return 1
}

# Builds contribs/pam_slurm_adopt from SchedMD's source of the installed Slurm version.
tc_build_pam_slurm_adopt() {
    local version source
    version="$(tc_slurm_command sinfo --version | awk '{ print $2 }')"
    if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9]+)?$ ]]; then
        tc_error "cannot tell the installed Slurm version (sinfo --version says '${version}')"
        return 1
    fi
    log "pam_slurm_adopt.so is not installed: building it from the source of Slurm ${version}"
    apt_get install -y --no-install-recommends libpam0g-dev build-essential
    source="${TC_PAM_BUILD_DIR}/slurm-${version}"
    if [[ ! -x ${source}/configure ]]; then
        tc_download "${TC_SLURM_SOURCE_URL}/slurm-${version}.tar.bz2" "${TC_PAM_BUILD_DIR}/slurm-${version}.tar.bz2"
        tar -xjf "${TC_PAM_BUILD_DIR}/slurm-${version}.tar.bz2" -C "$TC_PAM_BUILD_DIR"
    fi
    (
        cd -- "$source" || exit
        ./configure --prefix=/opt/slurm --sysconfdir=/opt/slurm/etc --with-pam_dir=/lib/security >configure.log
        make -C contribs/pam_slurm_adopt
        make -C contribs/pam_slurm_adopt install DESTDIR="${TC_ROOT}"
    )
}

# Comments out pam_systemd's session line (kept once in the backups).
tc_disable_pam_systemd() {
    local file=$1
    [[ -f $file ]] || return 0
    if ! grep -qE '^[[:space:]]*-?session[[:space:]].*pam_systemd\.so' "$file"; then
        return 0
    fi
    tc_backup_once "$file"
    sed -E 's/^([[:space:]]*-?session[[:space:]].*pam_systemd\.so.*)$/# disabled for pam_slurm_adopt: \1/' "$file" |
        tc_write_file "$file"
}
