#!/bin/bash
# The team's users, alike on every node: ONE implementation for both services. ParallelCluster runs it as a
# custom action (OnNodeConfigured, every node; the stack uploads it as users.sh); HyperPod's lifecycle scripts
# run it from their step users (lib/users.sh, under the shared-home lock) and controller-access
# (lib/node_access.sh).
#
#   users.sh --home-root DIR [--user NAME:UID:GID[:GROUP=GID,...]]... [--key NAME:KEY-LINE]...
#            [--homes-on-this-node] [--admins-only-on-head-node]
#   users.sh --admins-only USER
#
# Every node gets the same groups (gid) and users (uid, primary gid, home <home-root>/<name>, supplementary
# groups), so files on the shared file system keep their owners whichever node wrote them. The homes are
# written (created once from /etc/skel, mode 0700, ~/.ssh with a key pair for srun/mpirun between nodes and the
# given public keys in a marked block of authorized_keys, replaced as a whole so a key taken out of the settings
# is taken off the node) by ParallelCluster's head node only (the node type is cfn_node_type in ParallelCluster's
# /etc/parallelcluster/cfnconfig: https://docs.aws.amazon.com/parallelcluster/latest/ug/custom-bootstrap-actions-v3.html;
# the head node is configured before any compute or login node starts), or, with --homes-on-this-node, here
# (HyperPod, whose nodes start together: its lifecycle scripts hold a lock on the shared file system around
# this command). Running it again changes nothing.
#
# An account that exists and disagrees with the settings (a group's gid, a user's uid, primary gid or home, an
# id held by another name) is an error that fails the node's bootstrap; it is never changed here. Why not repair
# it: a uid or gid names the owner of every file on the shared file system, so changing one on a node strands the
# files written under the old id; an account that is already there was made by someone else (the AMI, an
# administrator, another tool), who may depend on it; usermod refuses to change a user who runs a process
# (shadow-utils usermod.c, user_busy: exit 8), so a repair would work on an idle node and fail on a busy one; and a
# node whose accounts differ from its neighbours' fails its bootstrap in the service's console, where an operator
# sees it, rather than running with a quietly different account. The message names both values and the fix.
#
# Every account tool (groupadd, useradd, usermod, ssh-keygen) that fails ends the run with its own exit status
# and message, and nothing after it happens: a node with part of its team never reports success.
#
# Root only creates a missing home and hands it to its user; everything inside a home (~/.ssh, the key pair,
# authorized_keys) is read and written as that user (runuser, util-linux). A home is retained with the file
# system and is its user's to change, so it may hold links the user planted (~/.ssh -> /root/.ssh): as root,
# this script would read and write through them; as the user, the kernel refuses a link to anything the user
# may not read or write, and the step fails the bootstrap instead. A home or ~/.ssh that is itself a link is
# refused outright. TC_ROOT (default: empty, the real root) prefixes every path, for tests.
#
# Node access: --admins-only-on-head-node (ParallelCluster's stack passes it when the cluster has login nodes)
# applies, on the head node only, what --admins-only USER applies here (HyperPod's controller): sshd lets only
# root and the cluster's default user in (USER; on ParallelCluster cfn_cluster_user: ec2-user, ubuntu ...), by
# pam_access(8) in sshd's PAM account stack, which sshd checks for every login, with a key too (UsePAM, the
# default of ParallelCluster's and HyperPod's AMIs: sshd_config(5)). The users still exist there (Slurm resolves
# their names); the team logs in on the login nodes. SSM sessions do not go through sshd.

set -euo pipefail

ROOT=${TC_ROOT:-}
ADMINS_FILE=/etc/security/training-clusters-admins.conf
MARK_BEGIN="# BEGIN training-clusters managed keys"
MARK_END="# END training-clusters managed keys"

log() { echo "users.sh: $*"; }
die() {
    echo "users.sh: error: $*" >&2
    exit 1
}

# cfnconfig KEY: the value of cfn_KEY in ParallelCluster's /etc/parallelcluster/cfnconfig, or empty.
cfnconfig() {
    local config="${ROOT}/etc/parallelcluster/cfnconfig"
    if [[ -r $config ]]; then
        sed -n "s/^cfn_${1}=//p" "$config" | tr -d '"' | head -n 1
    fi
}

node_type() {
    local type
    type="$(cfnconfig node_type)"
    echo "${type:-unknown}"
}

# admins_only USER: only root and USER (the cluster's default user) may SSH in to this node (see the header).
admins_only() {
    local default_user=$1 pam="${ROOT}/etc/pam.d/sshd"
    local line="account required pam_access.so accessfile=${ADMINS_FILE}"
    [[ $default_user =~ ^[a-z_][a-z0-9_-]{0,31}$ ]] ||
        die "the cluster's default user must be a user name, got '${default_user}'"
    [[ -f $pam ]] || die "no /etc/pam.d/sshd on this node: cannot keep the team's users off it"
    mkdir -p "${ROOT}${ADMINS_FILE%/*}"
    printf '%s\n' "# Written by training-clusters users.sh: who may SSH in to this node." \
        "+:root ${default_user}:ALL" "-:ALL:ALL" >"${ROOT}${ADMINS_FILE}.new"
    chmod 0644 "${ROOT}${ADMINS_FILE}.new"
    mv -f "${ROOT}${ADMINS_FILE}.new" "${ROOT}${ADMINS_FILE}"
    if ! grep -qxF -- "$line" "$pam"; then
        printf '%s\n' "$line" >>"$pam"
        log "added to /etc/pam.d/sshd: ${line}"
    fi
    log "only root and ${default_user} log in to this node over SSH; the team uses the login nodes"
}

# The cluster's default user on ParallelCluster (cfn_cluster_user).
cluster_user() {
    local default_user
    default_user="$(cfnconfig cluster_user)"
    [[ $default_user =~ ^[a-z_][a-z0-9_-]{0,31}$ ]] ||
        die "cannot tell the cluster's default user (cfn_cluster_user in /etc/parallelcluster/cfnconfig is '${default_user}')"
    echo "$default_user"
}

# ensure_group NAME GID: the group, made when missing; one that exists with another gid, or a gid another group
# holds, is an error (see the header: never changed here).
ensure_group() {
    local name=$1 gid=$2 found holder
    if found="$(getent group "$name")"; then
        [[ $(cut -d: -f3 <<<"$found") == "$gid" ]] ||
            die "group ${name} exists with gid $(cut -d: -f3 <<<"$found"), not ${gid}: the users setting and this" \
                "node disagree (change the gid in the setting, or the group on the node: groupmod --gid ${gid} ${name})"
        return 0
    fi
    if holder="$(getent group "$gid")"; then
        die "gid ${gid} of group ${name} already belongs to group ${holder%%:*}"
    fi
    groupadd --gid "$gid" "$name"
    log "created group ${name} (gid ${gid})"
}

# ensure_user NAME UID GID HOME: the user, made when missing; one that exists with another uid, primary gid or
# home, or a uid another user holds, is an error (see the header: never changed here).
ensure_user() {
    local name=$1 uid=$2 gid=$3 home=$4 found holder found_uid found_gid found_home
    if found="$(getent passwd "$name")"; then
        IFS=: read -r _ _ found_uid found_gid _ found_home _ <<<"$found"
        [[ $found_uid == "$uid" ]] ||
            die "user ${name} exists with uid ${found_uid}, not ${uid}: the users setting and this node disagree" \
                "(files on the shared file system belong to the uid)"
        [[ $found_gid == "$gid" ]] ||
            die "user ${name} exists with primary gid ${found_gid}, not ${gid}: the users setting and this node" \
                "disagree (change the gid in the setting, or the user on the node: usermod --gid ${gid} ${name})"
        [[ $found_home == "$home" ]] ||
            die "user ${name} exists with home ${found_home}, not ${home}: the users setting and this node" \
                "disagree (usermod --home ${home} ${name} on the node, once the user runs nothing)"
        return 0
    fi
    if holder="$(getent passwd "$uid")"; then
        die "uid ${uid} of user ${name} already belongs to user ${holder%%:*}"
    fi
    useradd --uid "$uid" --gid "$gid" --home-dir "$home" --no-create-home --shell /bin/bash \
        --comment "training-clusters team user" "$name"
    log "created user ${name} (uid ${uid}, gid ${gid})"
}

ensure_member() {
    local name=$1 group=$2 members
    members="$(getent group "$group" | cut -d: -f4)"
    if [[ ,${members}, == *",${name},"* ]]; then
        return 0
    fi
    usermod --append --groups "$group" "$name"
    log "added ${name} to group ${group}"
}

# Run a command as user $1: inside a home, see the header.
as_user() {
    local name=$1
    shift
    runuser -u "$name" -- "$@"
}

# Replace the managed block of user $1's authorized_keys $2 (keeping every other line); write only when it
# changes. The file is read and written as the user; root assembles the text in its own scratch files.
write_keys() {
    local name=$1 file=$2
    shift 2
    local current wanted staged
    current="$(mktemp)"
    wanted="$(mktemp)"
    if as_user "$name" test -e "$file"; then
        as_user "$name" cat "$file" >"$current" || die "could not read ${file#"$ROOT"} as ${name}"
    fi
    sed "/^${MARK_BEGIN}\$/,/^${MARK_END}\$/d" "$current" >"$wanted"
    {
        echo "$MARK_BEGIN"
        printf '%s\n' "$@"
        echo "$MARK_END"
    } >>"$wanted"
    if ! cmp -s "$wanted" "$current"; then
        # staged next to the file and renamed over it (-T: over a link, never into the directory it names)
        if ! staged="$(as_user "$name" mktemp -p "${file%/*}")" ||
            ! as_user "$name" tee "$staged" <"$wanted" >/dev/null ||
            ! as_user "$name" chmod 0600 "$staged" ||
            ! as_user "$name" mv -fT "$staged" "$file"; then
            die "could not write ${file#"$ROOT"} as ${name}"
        fi
        log "wrote ${file}"
    fi
    rm -f "$current" "$wanted"
}

ensure_home() {
    local name=$1 uid=$2 gid=$3 home=$4
    shift 4
    local dir="${ROOT}${home}" ssh="${ROOT}${home}/.ssh" pub
    [[ ! -L $dir ]] || die "the home of ${name}, ${home}, is a symbolic link: refusing to use it"
    [[ ! -L $ssh ]] || die "${home}/.ssh of ${name} is a symbolic link: refusing to use it"
    if [[ ! -e $dir ]]; then
        mkdir -p "${dir%/*}"
        mkdir -m 0700 "$dir" # fails if anything appeared there since
        chown "${uid}:${gid}" "$dir"
        if [[ -d ${ROOT}/etc/skel ]]; then
            as_user "$name" cp -R "${ROOT}/etc/skel/." "$dir" ||
                die "could not copy /etc/skel into ${home} as ${name}"
        fi
        log "created home ${home}"
    fi
    if ! as_user "$name" test -d "$ssh"; then
        as_user "$name" mkdir -m 0700 "$ssh" || die "could not create ${home}/.ssh as ${name}"
    fi
    if ! as_user "$name" test -f "${ssh}/id_ed25519"; then
        as_user "$name" ssh-keygen -q -t ed25519 -N "" -C "${name}@training-clusters" -f "${ssh}/id_ed25519" ||
            die "could not generate the cluster key pair of ${name} in ${home}/.ssh as ${name}"
        log "generated the cluster key pair of ${name}"
    fi
    pub="$(as_user "$name" cat "${ssh}/id_ed25519.pub")" ||
        die "could not read ${home}/.ssh/id_ed25519.pub as ${name}"
    write_keys "$name" "${ssh}/authorized_keys" "$pub" "$@"
}

main() {
    local home_root="" type spec name uid gid groups entry group ggid admins="" admin="" homes_here=""
    local -a specs=() key_specs=()
    while (($#)); do
        case $1 in
            --home-root) home_root=${2:?--home-root needs a directory}; shift 2 ;;
            --user) specs+=("${2:?--user needs NAME:UID:GID[:GROUP=GID,...]}"); shift 2 ;;
            --key) key_specs+=("${2:?--key needs NAME:KEY-LINE}"); shift 2 ;;
            --homes-on-this-node) homes_here=1; shift ;;
            --admins-only-on-head-node) admins=1; shift ;;
            --admins-only) admin=${2:?--admins-only needs a user name}; shift 2 ;;
            *) die "unknown argument '$1' (expected --home-root, --user, --key, --homes-on-this-node," \
                "--admins-only-on-head-node or --admins-only)" ;;
        esac
    done
    if [[ -n $admin ]]; then
        ((${#specs[@]} == 0 && ${#key_specs[@]} == 0)) && [[ -z $home_root && -z $admins && -z $homes_here ]] ||
            die "--admins-only USER goes alone"
        admins_only "$admin"
        return 0
    fi
    [[ $home_root == /* ]] || die "--home-root must be an absolute path, got '${home_root}'"
    type="$(node_type)"
    if [[ -n $homes_here ]]; then
        log "${#specs[@]} users, homes under ${home_root}, written here"
    else
        log "node type ${type}, ${#specs[@]} users, homes under ${home_root}"
    fi
    for spec in "${specs[@]}"; do
        IFS=: read -r name uid gid groups <<<"$spec"
        [[ $name =~ ^[a-z_][a-z0-9_-]{0,31}$ && $uid =~ ^[0-9]+$ && $gid =~ ^[0-9]+$ ]] ||
            die "--user must be NAME:UID:GID[:GROUP=GID,...], got '${spec}'"
        ensure_group "$name" "$gid"
        local -a extra=()
        if [[ -n $groups ]]; then
            IFS=, read -ra extra <<<"$groups"
        fi
        for entry in "${extra[@]}"; do
            group=${entry%%=*}
            ggid=${entry#*=}
            [[ $group =~ ^[a-z_][a-z0-9_-]{0,31}$ && $ggid =~ ^[0-9]+$ ]] ||
                die "--user group must be GROUP=GID, got '${entry}'"
            ensure_group "$group" "$ggid"
        done
        ensure_user "$name" "$uid" "$gid" "${home_root}/${name}"
        for entry in "${extra[@]}"; do
            ensure_member "$name" "${entry%%=*}"
        done
        if [[ -n $homes_here || $type == HeadNode ]]; then
            local -a keys=()
            for entry in "${key_specs[@]}"; do
                if [[ ${entry%%:*} == "$name" ]]; then
                    keys+=("${entry#*:}")
                fi
            done
            ensure_home "$name" "$uid" "$gid" "${home_root}/${name}" "${keys[@]}"
        fi
    done
    if [[ -n $admins && $type == HeadNode ]]; then
        admin="$(cluster_user)"
        admins_only "$admin"
    fi
}

main "$@"
