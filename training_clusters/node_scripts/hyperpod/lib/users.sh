# shellcheck shell=bash
#
# The team's users (training_clusters.json `users`): the same name, uid and gid on every node, their
# homes on the shared file system, as the public reference's add_users.sh does
# (github.com/aws-samples/awsome-distributed-training, 1.architectures/5.sagemaker-hyperpod/
# LifecycleScripts/base-config: add_users.sh, shared_users_sample.txt, home <fsx>/<name>).
# Each user gets a group of the same name (gid), a home <fsx_mount_dir>/<name> (created once, by the
# first node, under the FSx lock), an SSH key pair generated once and authorised for itself (srun and
# mpirun over ssh between nodes) and the public keys given in the settings. Running it again changes
# nothing; a user or group that exists with other ids fails the step instead of being changed.
# Supplementary groups (`groups`) are created with their gids and the user added to them.

TC_SSH_KEY_TYPE="${TC_SSH_KEY_TYPE:-ed25519}"

tc_setup_users() {
    local entry name uid gid group home_root lock_fd=""
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
        tc_ensure_group "$name" "$gid"
        tc_ensure_user "$name" "$uid" "$gid" "${home_root}/${name}"
        tc_user_home "$name" "$uid" "$gid" "${home_root}/${name}"
    done
    for entry in "${TC_USER_GROUPS[@]}"; do
        IFS=: read -r name group gid <<<"$entry"
        tc_ensure_group "$group" "$gid"
        tc_ensure_member "$name" "$group"
    done
    if [[ -n $lock_fd ]]; then
        exec {lock_fd}>&-
    fi
    log "${#TC_USERS[@]} users in place: ${TC_USERS[*]%%:*}"
}

tc_ensure_group() {
    local name=$1 gid=$2 found holder
    if found="$(getent group "$name")"; then
        if [[ $(cut -d: -f3 <<<"$found") != "$gid" ]]; then
            tc_error "group ${name} exists with gid $(cut -d: -f3 <<<"$found"), not ${gid}: the users setting" \
                "and this node disagree (change the gid or remove the group)"
            return 1
        fi
        return 0
    fi
    if holder="$(getent group "$gid")"; then
        tc_error "gid ${gid} of ${name} already belongs to group ${holder%%:*} on this node"
        return 1
    fi
    groupadd --gid "$gid" "$name"
    log "created group ${name} (gid ${gid})"
}

# tc_ensure_member USER GROUP: USER in the supplementary GROUP (members are never removed).
tc_ensure_member() {
    local user=$1 group=$2 members
    members="$(getent group "$group" | cut -d: -f4)"
    if [[ ,${members}, == *,"${user}",* ]]; then
        return 0
    fi
    usermod --append --groups "$group" "$user"
    log "added ${user} to group ${group}"
}

tc_ensure_user() {
    local name=$1 uid=$2 gid=$3 home=$4 found holder found_uid found_gid found_home
    if found="$(getent passwd "$name")"; then
        IFS=: read -r _ _ found_uid found_gid _ found_home _ <<<"$found"
        if [[ $found_uid != "$uid" ]]; then
            tc_error "user ${name} exists with uid ${found_uid}, not ${uid}: the users setting and this node" \
                "disagree (files on the shared file system belong to the uid)"
            return 1
        fi
        if [[ $found_gid != "$gid" || $found_home != "$home" ]]; then
            usermod --gid "$gid" --home "$home" "$name"
            log "user ${name}: primary group ${gid}, home ${home} (were ${found_gid}, ${found_home})"
        fi
        return 0
    fi
    if holder="$(getent passwd "$uid")"; then
        tc_error "uid ${uid} of ${name} already belongs to user ${holder%%:*} on this node"
        return 1
    fi
    useradd --uid "$uid" --gid "$gid" --home-dir "$home" --no-create-home --shell /bin/bash "$name"
    log "created user ${name} (uid ${uid}, gid ${gid}, home ${home})"
}

# The home, made once by root (from /etc/skel); everything inside it is then done as its user. The user
# owns the home on the shared file system and may leave symbolic links in it (.ssh -> /root/.ssh, a key
# -> /etc/shadow) for the next node's root to follow; as the user, the kernel refuses to follow them to
# anything the user may not write, and the step fails instead. Links where root expects the home or its
# .ssh are refused outright.
tc_user_home() {
    local name=$1 uid=$2 gid=$3 home=$4 rooted fresh=""
    rooted="${TC_ROOT}${home}"
    if [[ -L $rooted || -L ${rooted}/.ssh ]]; then
        tc_error "the home of ${name} (${home}) or its .ssh is a symbolic link: refusing to set it up" \
            "(remove the link; the home and .ssh must be directories the user owns)"
        return 1
    fi
    if [[ ! -d $rooted ]]; then
        tc_mkdir "$rooted"
        if [[ -d ${TC_ROOT}/etc/skel ]]; then
            cp -a -- "${TC_ROOT}/etc/skel/." "${rooted}/"
        fi
        chown -R "${uid}:${gid}" "$rooted"
        chmod 0700 "$rooted"
        log "created home ${home}"
    fi
    [[ -f ${rooted}/.ssh/id_${TC_SSH_KEY_TYPE}.pub ]] || fresh=1
    tc_user_ssh_keys "$name" | runuser -u "$name" -- "$BASH" -c "$TC_USER_SSH_SETUP" tc-user-ssh-setup \
        "$rooted" "$TC_SSH_KEY_TYPE" "${name}@training-clusters"
    if [[ -n $fresh ]]; then
        log "generated the SSH key pair of ${name}"
    fi
}

# Run as the user, in the home (argument 1): a key pair of type $2 (comment $3) made once, its public key
# and the public keys read from stdin in .ssh/authorized_keys, each once.
# shellcheck disable=SC2016  # expanded by the user's shell, not here
TC_USER_SSH_SETUP='
set -euo pipefail
umask 077
cd -- "$1"
mkdir -p .ssh
chmod 700 .ssh
key=".ssh/id_$2"
if [[ ! -f $key || ! -f $key.pub ]]; then
    rm -f -- "$key" "$key.pub"
    ssh-keygen -q -t "$2" -N "" -C "$3" -f "$key"
fi
touch .ssh/authorized_keys
{ cat -- "$key.pub"; cat; } | while IFS= read -r line; do
    if [[ -n $line ]] && ! grep -qxF -- "$line" .ssh/authorized_keys; then
        printf "%s\n" "$line" >>.ssh/authorized_keys
    fi
done
chmod 600 "$key" .ssh/authorized_keys
chmod 644 "$key.pub"
'

# The public keys of user NAME from training_clusters.json (validated by preflight), one a line.
tc_user_ssh_keys() {
    "$TC_PYTHON" -I -S "$TC_CLUSTER_CONFIG_PY" ssh-keys "$TC_SETTINGS_FILE" "$1"
}
