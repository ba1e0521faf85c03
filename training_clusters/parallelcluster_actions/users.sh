#!/bin/bash
# ParallelCluster custom action (OnNodeConfigured, every node): the team's users, alike on every node.
#
#   users.sh --home-root /shared/home [--user NAME:UID:GID[:GROUP=GID,...]]... [--key NAME:KEY-LINE]...
#
# Every node gets the same groups (gid) and users (uid, primary gid, supplementary groups), so files on
# the shared file system keep their owners whichever node wrote them. Only the head node writes the homes
# (<home-root>/<name>: created once, mode 0700, ~/.ssh with a key pair for srun/mpirun between nodes and the
# given public keys in a marked block of authorized_keys); the head node is configured before any compute or
# login node starts, so no two nodes write the shared file system at once. A group or user that exists with
# other ids is an error (the node fails to bootstrap) rather than being changed. Running it again changes
# nothing. The node type comes from ParallelCluster's /etc/parallelcluster/cfnconfig (cfn_node_type):
# https://docs.aws.amazon.com/parallelcluster/latest/ug/custom-bootstrap-actions-v3.html
# TC_ROOT (default: empty, the real root) prefixes every path, for tests.

set -euo pipefail

ROOT=${TC_ROOT:-}
MARK_BEGIN="# BEGIN training-clusters managed keys"
MARK_END="# END training-clusters managed keys"

log() { echo "users.sh: $*"; }
die() {
    echo "users.sh: error: $*" >&2
    exit 1
}

node_type() {
    local config="${ROOT}/etc/parallelcluster/cfnconfig" type=""
    if [[ -r $config ]]; then
        type="$(sed -n 's/^cfn_node_type=//p' "$config" | tr -d '"' | head -n 1)"
    fi
    echo "${type:-unknown}"
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

# Replace the managed block of authorized_keys (keeping every other line); write only when it changes.
write_keys() {
    local file=$1 uid=$2 gid=$3
    shift 3
    local wanted
    wanted="$(mktemp)"
    if [[ -f $file ]]; then
        sed "/^${MARK_BEGIN}\$/,/^${MARK_END}\$/d" "$file" >"$wanted"
    fi
    {
        echo "$MARK_BEGIN"
        printf '%s\n' "$@"
        echo "$MARK_END"
    } >>"$wanted"
    if [[ -f $file ]] && cmp -s "$wanted" "$file"; then
        rm -f "$wanted"
        return 0
    fi
    mv "$wanted" "$file"
    chmod 0600 "$file"
    chown "${uid}:${gid}" "$file"
    log "wrote ${file}"
}

ensure_home() {
    local name=$1 uid=$2 gid=$3 home=$4
    shift 4
    local dir="${ROOT}${home}" pub
    if [[ ! -d $dir ]]; then
        mkdir -p "$dir"
        chmod 0700 "$dir"
        chown "${uid}:${gid}" "$dir"
        log "created home ${home}"
    fi
    if [[ ! -d ${dir}/.ssh ]]; then
        mkdir -p "${dir}/.ssh"
        chmod 0700 "${dir}/.ssh"
        chown "${uid}:${gid}" "${dir}/.ssh"
    fi
    if [[ ! -f ${dir}/.ssh/id_ed25519 ]]; then
        ssh-keygen -q -t ed25519 -N "" -C "${name}@cluster" -f "${dir}/.ssh/id_ed25519"
        chown "${uid}:${gid}" "${dir}/.ssh/id_ed25519" "${dir}/.ssh/id_ed25519.pub"
        log "generated the cluster key pair of ${name}"
    fi
    pub="$(cat "${dir}/.ssh/id_ed25519.pub")"
    write_keys "${dir}/.ssh/authorized_keys" "$uid" "$gid" "$pub" "$@"
}

main() {
    local home_root="" type spec name uid gid groups entry group ggid
    local -a specs=() key_specs=()
    while (($#)); do
        case $1 in
            --home-root) home_root=${2:?--home-root needs a directory}; shift 2 ;;
            --user) specs+=("${2:?--user needs NAME:UID:GID[:GROUP=GID,...]}"); shift 2 ;;
            --key) key_specs+=("${2:?--key needs NAME:KEY-LINE}"); shift 2 ;;
            *) die "unknown argument '$1' (expected --home-root, --user or --key)" ;;
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
}

main "$@"
