# shellcheck shell=bash
#
# FSx for Lustre: make sure the Lustre client is installed, record the mount in /etc/fstab once,
# mount it now and wait until the mount point is writable.

TC_FSX_MOUNT_OPTIONS="defaults,noatime,flock,_netdev,x-systemd.automount,x-systemd.requires=network-online.target"

tc_fsx_source() {
    printf '%s@tcp:/%s' "$TC_FSX_DNS_NAME" "$TC_FSX_MOUNTNAME"
}

# The Lustre kernel module ships with HyperPod AMIs; install it (through apt_get) only if missing.
tc_ensure_lustre_client() {
    local package rc=0
    if modinfo lustre >/dev/null 2>&1; then
        log "Lustre client kernel module is installed"
        return 0
    fi
    package="lustre-client-modules-$(uname -r)"
    log "Lustre client kernel module missing; installing ${package}"
    apt_get install -y "$package" || rc=$?
    if ((rc != 0)); then
        tc_error "could not install ${package}; if the apt-hotfix step disabled the FSx Lustre client" \
            "repository, fix or re-enable it (backups in ${TC_APT_BACKUP_DIR}) or use an AMI with the client"
        return "$rc"
    fi
    modinfo lustre >/dev/null
}

tc_mount_fsx() {
    local dir=$TC_FSX_MOUNT_DIR source rooted
    source="$(tc_fsx_source)"
    rooted="${TC_ROOT}${dir}"
    tc_mkdir "$rooted"
    tc_fsx_fstab_entry "$source" "$dir"

    if mountpoint -q -- "$rooted"; then
        log "${dir} is already mounted"
    else
        log "mounting ${source} on ${dir}"
        tc_retry "$TC_MOUNT_ATTEMPTS" "$TC_MOUNT_WAIT_SLEEP" \
            mount -t lustre -o noatime,flock -- "$source" "$rooted"
    fi
    tc_wait_writable "$rooted"
}

# One fstab line for the mount point: added once, replaced if it points elsewhere, never doubled.
tc_fsx_fstab_entry() {
    local source=$1 dir=$2 fstab="${TC_ROOT}/etc/fstab" line
    line="${source} ${dir} lustre ${TC_FSX_MOUNT_OPTIONS} 0 0"
    tc_mkdir_parent "$fstab"
    [[ -f $fstab ]] || touch -- "$fstab"
    if grep -qxF -- "$line" "$fstab" && [[ $(awk -v d="$dir" '$1 !~ /^#/ && $2 == d' "$fstab" | wc -l) -eq 1 ]]; then
        log "fstab already mounts ${source} on ${dir}"
        return 0
    fi
    tc_backup_once "$fstab"
    {
        awk -v d="$dir" '$1 ~ /^#/ || $2 != d' "$fstab"
        printf '%s\n' "$line"
    } | tc_write_file "$fstab"
}

# tc_wait_writable DIR: bounded wait until DIR is a mount point we can write to.
tc_wait_writable() {
    local rooted=$1 attempt probe
    probe="${rooted}/.training-clusters-write-test.$$"
    for ((attempt = 1; attempt <= TC_MOUNT_WAIT_ATTEMPTS; attempt++)); do
        if mountpoint -q -- "$rooted" && touch -- "$probe" 2>/dev/null; then
            rm -f -- "$probe"
            log "${rooted} is mounted and writable"
            return 0
        fi
        log "waiting for ${rooted} to be mounted and writable (${attempt}/${TC_MOUNT_WAIT_ATTEMPTS})"
        sleep "$TC_MOUNT_WAIT_SLEEP"
    done
    tc_error "${rooted} is not mounted and writable after ${TC_MOUNT_WAIT_ATTEMPTS} checks"
    return 1
}
