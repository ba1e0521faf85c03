# shellcheck shell=bash
#
# The team's users (training_clusters.json `users`): the same name, uid and gid on every node, their
# homes on the shared file system, as the public reference's add_users.sh does
# (github.com/aws-samples/awsome-distributed-training, 1.architectures/5.sagemaker-hyperpod/
# LifecycleScripts/base-config: add_users.sh, shared_users_sample.txt, home <fsx>/<name>).
#
# One implementation for HyperPod and ParallelCluster: shared/users.sh (node_scripts/shared/ in the package,
# uploaded inside these scripts), whose header says what it does and why an account that disagrees with the
# settings fails the step instead of being changed. This step hands it the users, their supplementary groups
# and public keys, and lets it write the homes here (--homes-on-this-node): HyperPod starts its nodes together,
# so every node may be the first, and the homes on FSx are written under a lock on the file system, one node at
# a time. Without FSx the homes are local to each node (/home/<name>).

tc_setup_users() {
    local entry name uid gid user group home_root groups keys line lock_fd=""
    local -a args=()
    if tc_has_fsx; then
        home_root=$TC_FSX_MOUNT_DIR
        if [[ -L "${TC_ROOT}${TC_FSX_MOUNT_DIR}/.training-clusters-home.lock" ]]; then
            tc_error "${TC_FSX_MOUNT_DIR}/.training-clusters-home.lock is a symbolic link: refusing to open it"
            return 1
        fi
        exec {lock_fd}>"${TC_ROOT}${TC_FSX_MOUNT_DIR}/.training-clusters-home.lock"
        log "waiting for the shared-home lock"
        flock -w 600 "$lock_fd"
    else
        home_root=/home
        warn "no FSx file system: homes are local to each node (${home_root}/<name>), not shared"
    fi
    for entry in "${TC_USERS[@]}"; do
        IFS=: read -r name uid gid <<<"$entry"
        groups=""
        for line in "${TC_USER_GROUPS[@]}"; do
            IFS=: read -r user group entry <<<"$line"
            if [[ $user == "$name" ]]; then
                groups+="${groups:+,}${group}=${entry}"
            fi
        done
        args+=(--user "${name}:${uid}:${gid}${groups:+:${groups}}")
    done
    keys="$(tc_users_ssh_keys)"
    while IFS= read -r line; do
        if [[ -n $line ]]; then
            args+=(--key "$line")
        fi
    done <<<"$keys"
    TC_ROOT="$TC_ROOT" "$BASH" "${TC_HOME}/shared/users.sh" --home-root "$home_root" --homes-on-this-node "${args[@]}"
    if [[ -n $lock_fd ]]; then
        exec {lock_fd}>&-
    fi
    log "${#TC_USERS[@]} users in place: ${TC_USERS[*]%%:*}"
}

# The public keys of the users in training_clusters.json (validated by preflight), one NAME:KEY-LINE a line.
tc_users_ssh_keys() {
    "$TC_PYTHON" -I -S "$TC_CLUSTER_CONFIG_PY" ssh-keys "$TC_SETTINGS_FILE"
}
