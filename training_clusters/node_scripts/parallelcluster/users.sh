#!/bin/bash
# ParallelCluster custom action (OnNodeConfigured, every node): the team's users, alike on every node.
#
#   users.sh --home-root /shared/home [--user NAME:UID:GID[:GROUP=GID,...]]... [--key NAME:KEY-LINE]...
#            [--admins-only-on-head-node]
#
# Every node gets the same groups (gid) and users (uid, primary gid, supplementary groups), so files on
# the shared file system keep their owners whichever node wrote them. Only the head node writes the homes
# (<home-root>/<name>: created once from /etc/skel, mode 0700, ~/.ssh with a key pair for srun/mpirun between
# nodes and the given public keys in a marked block of authorized_keys); the head node is configured before
# any compute or login node starts, so no two nodes write the shared file system at once. A group or user
# that exists with other ids is an error (the node fails to bootstrap) rather than being changed. Running it
# again changes nothing. The node type comes from ParallelCluster's /etc/parallelcluster/cfnconfig
# (cfn_node_type): https://docs.aws.amazon.com/parallelcluster/latest/ug/custom-bootstrap-actions-v3.html
#
# Root only creates a missing home and hands it to its user; everything inside a home (~/.ssh, the key pair,
# authorized_keys) is read and written as that user (runuser, util-linux). A home is retained with the file
# system and is its user's to change, so it may hold links the user planted (~/.ssh -> /root/.ssh): as root,
# this script would read and write through them; as the user, the kernel refuses a link to anything the user
# may not read or write, and the step fails the bootstrap instead. A home that is itself a link is refused.
# TC_ROOT (default: empty, the real root) prefixes every path, for tests.
#
# --admins-only-on-head-node (the stack passes it when the cluster has login nodes): on the head node (slurmctld,
# slurmdbd, the role that reads the accounting secret) sshd lets only root and the cluster's default user
# (cfn_cluster_user: ec2-user, ubuntu ...) in: pam_access(8) in sshd's PAM account stack, which sshd checks for
# every login, with a key too (UsePAM, the default of ParallelCluster's AMIs). The users still exist there
# (Slurm resolves their names); the team logs in on the login nodes. SSM sessions do not go through sshd.

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

# Only root and the cluster's default user may SSH in (see the header).
admins_only() {
    local default_user pam="${ROOT}/etc/pam.d/sshd"
    local line="account required pam_access.so accessfile=${ADMINS_FILE}"
    default_user="$(cfnconfig cluster_user)"
    [[ $default_user =~ ^[a-z_][a-z0-9_-]{0,31}$ ]] ||
        die "cannot tell the cluster's default user (cfn_cluster_user in /etc/parallelcluster/cfnconfig is '${default_user}')"
    [[ -f $pam ]] || die "no /etc/pam.d/sshd on this node: cannot keep the team's users off it"
    mkdir -p "${ROOT}${ADMINS_FILE%/*}"
    printf '%s\n' "# Written by training-clusters users.sh: who may SSH in to the head node." \
        "+:root ${default_user}:ALL" "-:ALL:ALL" >"${ROOT}${ADMINS_FILE}.new"
    chmod 0644 "${ROOT}${ADMINS_FILE}.new"
    mv -f "${ROOT}${ADMINS_FILE}.new" "${ROOT}${ADMINS_FILE}"
    if ! grep -qxF -- "$line" "$pam"; then
        printf '%s\n' "$line" >>"$pam"
        log "added to /etc/pam.d/sshd: ${line}"
    fi
    log "only root and ${default_user} log in to the head node over SSH; the team uses the login nodes"
}

ensure_group() {
    local name=$1 gid=$2 found holder
    if found="$(getent group "$name")"; then
        [[ $(cut -d: -f3 <<<"$found") == "$gid" ]] ||
            die "group ${name} exists with gid $(cut -d: -f3 <<<"$found"), not ${gid}"
        return 0
    fi
    if holder="$(getent group "$gid")"; then
        die "gid ${gid} of group ${name} already belongs to group ${holder%%:*}"
    fi
    groupadd --gid "$gid" "$name"
    log "created group ${name} (gid ${gid})"
}

ensure_user() {
    local name=$1 uid=$2 gid=$3 home=$4 found holder found_uid found_gid
    if found="$(getent passwd "$name")"; then
        IFS=: read -r _ _ found_uid found_gid _ _ _ <<<"$found"
        [[ $found_uid == "$uid" ]] || die "user ${name} exists with uid ${found_uid}, not ${uid}"
        [[ $found_gid == "$gid" ]] || die "user ${name} exists with primary gid ${found_gid}, not ${gid}"
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
        as_user "$name" ssh-keygen -q -t ed25519 -N "" -C "${name}@cluster" -f "${ssh}/id_ed25519" ||
            die "could not generate the cluster key pair of ${name} in ${home}/.ssh as ${name}"
        log "generated the cluster key pair of ${name}"
    fi
    pub="$(as_user "$name" cat "${ssh}/id_ed25519.pub")" ||
        die "could not read ${home}/.ssh/id_ed25519.pub as ${name}"
    write_keys "$name" "${ssh}/authorized_keys" "$pub" "$@"
}

main() {
    local home_root="" type spec name uid gid groups entry group ggid admins=""
    local -a specs=() key_specs=()
    while (($#)); do
        case $1 in
            --home-root) home_root=${2:?--home-root needs a directory}; shift 2 ;;
            --user) specs+=("${2:?--user needs NAME:UID:GID[:GROUP=GID,...]}"); shift 2 ;;
            --key) key_specs+=("${2:?--key needs NAME:KEY-LINE}"); shift 2 ;;
            --admins-only-on-head-node) admins=1; shift ;;
            *) die "unknown argument '$1' (expected --home-root, --user, --key or --admins-only-on-head-node)" ;;
        esac
    done
    [[ $home_root == /* ]] || die "--home-root must be an absolute path, got '${home_root}'"
    type="$(node_type)"
    log "node type ${type}, ${#specs[@]} users, homes under ${home_root}"
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
        if [[ $type == HeadNode ]]; then
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
        admins_only
    fi
}

main "$@"
