# shellcheck shell=bash
#
# Shared home on FSx: the cluster user's home moves to <fsx_mount_dir>/<user>, where one SSH key
# pair is generated once for the whole cluster and authorised for itself, so the user can reach
# every node (srun, mpirun over ssh) with the same identity. Nodes run their lifecycle scripts at
# the same time, so the work happens under a lock file on FSx (mounted with `flock`).

TC_SSH_KEY_TYPE="${TC_SSH_KEY_TYPE:-ed25519}"

tc_setup_shared_home() {
    local user=$TC_CLUSTER_USER home rooted lock_fd
    home="${TC_FSX_MOUNT_DIR}/${user}"
    rooted="${TC_ROOT}${home}"

    exec {lock_fd}>"${TC_ROOT}${TC_FSX_MOUNT_DIR}/.training-clusters-home.lock"
    log "waiting for the shared-home lock"
    flock -w 600 "$lock_fd"

    tc_home_on_fsx "$user" "$home" "$rooted"
    tc_shared_keypair "$user" "$rooted/.ssh"

    exec {lock_fd}>&-
}

# Point the user's home at the FSx folder: create the user if the AMI has none, move the local
# home there on the first node, only repoint it on the others.
tc_home_on_fsx() {
    local user=$1 home=$2 rooted=$3 current
    if ! id -u "$user" >/dev/null 2>&1; then
        log "user ${user} does not exist; creating it with home ${home}"
        useradd --create-home --home-dir "$home" --shell /bin/bash "$user"
    else
        current="$(getent passwd "$user" | cut -d: -f6)"
        if [[ $current == "$home" ]]; then
            log "home of ${user} is already ${home}"
        elif [[ -d $rooted ]]; then
            log "pointing home of ${user} at the existing shared ${home} (was ${current})"
            usermod --home "$home" "$user"
        else
            tc_move_home "$user" "$current" "$home" "$rooted"
        fi
    fi
    tc_mkdir "$rooted"
    chown "${user}:" "$rooted"
}

# usermod --move-home refuses while the user has a process (an SSM or SSH session, a cron job) and
# may stop half way on a cross-device move; then copy the home and repoint it, or fail clearly.
tc_move_home() {
    local user=$1 current=$2 home=$3 rooted=$4 rc=0
    log "moving home of ${user} from ${current} to ${home}"
    usermod --move-home --home "$home" "$user" || rc=$?
    if ((rc == 0)); then
        return 0
    fi
    warn "usermod --move-home failed (exit ${rc}); copying ${current} to ${home} and repointing the home instead"
    tc_mkdir "$rooted"
    if [[ -n $current && -d ${TC_ROOT}${current} ]]; then
        cp -a -- "${TC_ROOT}${current}/." "${rooted}/"
    fi
    rc=0
    usermod --home "$home" "$user" || rc=$?
    if ((rc != 0)); then
        tc_error "could not point the home of ${user} at ${home} (usermod exit ${rc}); its files were copied" \
            "there, ${current} is unchanged"
        return "$rc"
    fi
    log "home of ${user} is now ${home} (a copy of ${current}, which is left in place)"
}

# One key pair for the cluster, generated once, listed in authorized_keys once.
tc_shared_keypair() {
    local user=$1 ssh_dir=$2 key public_key
    key="${ssh_dir}/id_${TC_SSH_KEY_TYPE}"
    tc_mkdir "$ssh_dir"
    if [[ -f $key && -f ${key}.pub ]]; then
        log "shared SSH key pair ${key} already exists"
    else
        log "generating the shared SSH key pair ${key}"
        rm -f -- "$key" "${key}.pub"
        ssh-keygen -q -t "$TC_SSH_KEY_TYPE" -N '' -C "${user}@training-clusters" -f "$key"
    fi
    public_key="$(cat -- "${key}.pub")"
    if [[ -z $public_key ]]; then
        tc_error "${key}.pub is empty"
        return 1
    fi
    tc_ensure_line "${ssh_dir}/authorized_keys" "$public_key"
    chmod 700 "$ssh_dir"
    chmod 600 "$key" "${ssh_dir}/authorized_keys"
    chmod 644 "${key}.pub"
    chown "${user}:" "$ssh_dir" "$key" "${key}.pub" "${ssh_dir}/authorized_keys"
}
