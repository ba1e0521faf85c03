#!/usr/bin/env bash
#
# training-clusters-enroot: enroot's and Pyxis' folders with no state one user can write for another.
#
#   training-clusters-enroot --template FILE|- --conf FILE --runtime DIR --data DIR --cache DIR --temp DIR
#                            --pyxis-runtime DIR --user NAME[,NAME...] [--user ...]
#
# One implementation for both services: HyperPod's on_create.sh (step enroot-pyxis, lib/enroot_pyxis.sh) runs it
# on every worker; ParallelCluster runs it as a custom action (OnNodeConfigured, after pyxis.sh) on every node.
#
# Why. enroot 3.5 (github.com/NVIDIA/enroot, v3.5.0) trusts whatever it finds at its paths:
#   - docker::_download_extract (src/docker.sh) skips a layer whose file "${ENROOT_CACHE_PATH}/<digest>" exists,
#     without hashing it, so a file planted in a shared cache under a public layer's digest runs in everyone's
#     container of that image;
#   - runtime.sh runs every "${ENROOT_CONFIG_PATH}/hooks.d" hook and reads mounts.d and environ.d, as the user;
#   - enroot.in creates ENROOT_CACHE_PATH, ENROOT_DATA_PATH and ENROOT_RUNTIME_PATH with `mkdir -p` (umask 077),
#     which succeeds on a folder someone else made first, so under a world-writable parent another user can
#     pre-create them (and their contents).
# Pyxis 0.20 (github.com/NVIDIA/pyxis, pyxis_slurmstepd.c enroot_create_user_runtime_dir) makes
# "<runtime_path>/<uid>" as root with mkdir(0700) and accepts one that already exists, whoever owns it.
#
# What this does. Every folder enroot or Pyxis reads from is root's (0755) or one user's (0700), made by root:
#   - --conf is --template with its ENROOT_RUNTIME_PATH, ENROOT_DATA_PATH, ENROOT_CACHE_PATH, ENROOT_TEMP_PATH
#     and ENROOT_CONFIG_PATH lines replaced by "<DIR>/user-$(id -u)" for the first four (enroot.in evaluates
#     each value, config::load), and none for the config path: enroot's default, "${XDG_CONFIG_HOME}/enroot"
#     (~/.config/enroot), is in the user's own home. The file is written (0644) only when it changes.
#   - each DIR and its parent are root's, 0755; each listed user gets "<DIR>/user-<uid>", 0700, theirs; the
#     Pyxis runtime folder is root's, 0755 (Pyxis makes the per-uid folder in it as root).
#   - the same folders go into /etc/tmpfiles.d/training-clusters-enroot.conf, so systemd-tmpfiles makes them
#     again at every boot (folders under /run are on tmpfs), before anyone logs in.
# So the cache is one per user (on the node's local disk): no user reads a layer another user wrote. A user not
# listed gets enroot's own "Permission denied" from its mkdir, never someone else's folder.
#
# Refused, with one line and exit 2: a folder above DIR's parent that is not root's or that others may write
# without the sticky bit; a DIR, parent or per-user folder that is a symbolic link or not a folder; a per-user
# folder owned by anyone but root or its user (someone made it first: remove it after looking at it). Running
# it again changes nothing. TC_ROOT (default: the real root) prefixes every path, for tests; "root" is whoever
# runs it ($EUID).
set -euo pipefail

ROOT=${TC_ROOT:-}
TMPFILES=/etc/tmpfiles.d/training-clusters-enroot.conf
PATH_KEYS="ENROOT_RUNTIME_PATH|ENROOT_DATA_PATH|ENROOT_CACHE_PATH|ENROOT_TEMP_PATH|ENROOT_CONFIG_PATH"

say() { printf 'training-clusters-enroot: %s\n' "$*"; }
die() {
    say "error: $*" >&2
    exit 2
}

# owner_mode_type PATH: "uid mode type" of PATH itself (a link is not followed).
owner_mode_type() {
    stat -c '%u %a %F' -- "$1"
}

# check_above DIR: every folder from / down to DIR is root's and not writable by others unless sticky (links
# followed: /var/run -> /run is the system's); one that is missing is made, root's, 0755.
check_above() {
    local dir=$1 walked="" part uid mode
    local -a parts
    IFS=/ read -ra parts <<<"${dir#/}"
    for part in "" "${parts[@]}"; do
        [[ -n $part ]] && walked+="/${part}"
        [[ -e ${ROOT}${walked:-/} ]] || mkdir -m 0755 -- "${ROOT}${walked}" 2>/dev/null || true
        [[ -d ${ROOT}${walked:-/} ]] || die "${walked:-/} (above an enroot folder) is not a folder"
        read -r uid mode < <(stat -L -c '%u %a' -- "${ROOT}${walked:-/}")
        ((uid == EUID)) || die "${walked:-/} (above an enroot folder) belongs to uid ${uid}, not root"
        if ((8#$mode & 8#022)) && ! ((8#$mode & 8#1000)); then
            die "${walked:-/} (above an enroot folder) is writable by others (mode ${mode}) without the sticky bit"
        fi
    done
}

# check_owned PATH UID...: PATH is missing, or a folder (not a link) owned by one of UID.
check_owned() {
    local path=$1 uid mode type allowed
    shift
    [[ -e ${ROOT}${path} || -L ${ROOT}${path} ]] || return 0
    read -r uid mode type < <(owner_mode_type "${ROOT}${path}")
    [[ $type == directory ]] || die "${path} is a ${type}, not a folder: remove it"
    for allowed in "$@"; do
        ((uid == allowed)) && return 0
    done
    die "${path} belongs to uid ${uid}, not to $(printf '%s or ' "$@" | sed 's/ or $//'): someone made it" \
        "before this step; look at it, remove it and run again"
}

# folder PATH MODE UID GID: PATH made (or kept) a folder with MODE, owned by UID:GID.
folder() {
    local path=$1 mode=$2 uid=$3 gid=$4
    [[ -d ${ROOT}${path} ]] || mkdir -m "$mode" -- "${ROOT}${path}"
    chown "${uid}:${gid}" -- "${ROOT}${path}"
    chmod "$mode" -- "${ROOT}${path}"
    tmpfiles+=("d ${path} ${mode} ${uid} ${gid} -")
}

# write_if_changed TARGET MODE: stdin to TARGET (through a file beside it, renamed) unless it is the same; an
# unchanged file leaves its folder untouched too.
write_if_changed() {
    local target=$1 mode=$2 content staged
    content="$(cat && printf x)"
    content=${content%x}
    if [[ -f $target ]] && cmp -s "$target" <(printf '%s' "$content"); then
        return 0
    fi
    staged="$(mktemp -p "${target%/*}")"
    printf '%s' "$content" >"$staged"
    chmod "$mode" "$staged"
    mv -f -- "$staged" "$target"
    say "wrote ${target#"$ROOT"}"
}

main() {
    local template="" conf="" pyxis="" kind dir name uid gid key parent i
    local -A dirs=()
    local -a names=() uids=() gids=() tmpfiles=() listed
    while (($#)); do
        case $1 in
            --template) template=${2:?--template needs a file (or -)}; shift 2 ;;
            --conf) conf=${2:?--conf needs a file}; shift 2 ;;
            --runtime | --data | --cache | --temp) dirs[${1#--}]=${2:?$1 needs a folder}; shift 2 ;;
            --pyxis-runtime) pyxis=${2:?--pyxis-runtime needs a folder}; shift 2 ;;
            --user)
                IFS=, read -ra listed <<<"${2:?--user needs NAME[,NAME...]}"
                names+=("${listed[@]}")
                shift 2
                ;;
            *) die "unknown argument '$1' (expected --template, --conf, --runtime, --data, --cache, --temp," \
                "--pyxis-runtime or --user)" ;;
        esac
    done
    [[ -n $template && -n $conf && -n $pyxis ]] || die "--template, --conf and --pyxis-runtime are required"
    for kind in runtime data cache temp; do
        [[ -n ${dirs[$kind]:-} ]] || die "--${kind} is required"
    done
    [[ $template == - || -f ${ROOT}${template} ]] || die "${template} is missing"
    for dir in "${dirs[@]}" "$pyxis" "$conf"; do
        [[ $dir =~ ^(/[A-Za-z0-9._-]+)+$ && ! $dir =~ /\.\.?(/|$) ]] ||
            die "'${dir}' is not an absolute path of letters, digits, '.', '_' and '-'"
    done
    for name in "${names[@]}"; do
        [[ $name =~ ^[a-z_][a-z0-9_-]{0,31}$ ]] || die "--user names '${name}', which is no user name"
        uid="$(id -u -- "$name" 2>/dev/null)" || die "--user names '${name}', who is no user on this node"
        gid="$(id -g -- "$name")"
        uids+=("$uid")
        gids+=("$gid")
    done

    mkdir -p -- "${ROOT}${conf%/*}"
    # the configuration: the template without its path lines, then ours ($(id -u) stays for enroot to expand)
    {
        if [[ $template == - ]]; then cat; else cat -- "${ROOT}${template}"; fi |
            grep -Ev "^[[:space:]]*(${PATH_KEYS})([[:space:]=]|$)" || true
        echo "# Written by training-clusters-enroot: one folder per user, made by root (0700, the user's);"
        echo "# ENROOT_CONFIG_PATH is enroot's default, ~/.config/enroot, in the user's own home."
        for kind in runtime data cache temp; do
            key="ENROOT_${kind^^}_PATH"
            # shellcheck disable=SC2016  # expanded by enroot (config::load), per user
            printf '%-22s %s/user-$(id -u)\n' "$key" "${dirs[$kind]}"
        done
    } | write_if_changed "${ROOT}${conf}" 0644

    # the folders: checked first, then made, then listed for systemd-tmpfiles
    for kind in runtime data cache temp; do
        dir=${dirs[$kind]}
        parent=${dir%/*}
        check_above "${parent%/*}"
        check_owned "$parent" "$EUID"
        check_owned "$dir" "$EUID"
    done
    check_above "${pyxis%/*}"
    check_owned "$pyxis" "$EUID"
    for kind in runtime data cache temp; do
        for i in "${!names[@]}"; do
            check_owned "${dirs[$kind]}/user-${uids[i]}" "$EUID" "${uids[i]}"
        done
    done
    for kind in runtime data cache temp; do
        parent=${dirs[$kind]%/*}
        if [[ " ${tmpfiles[*]} " != *" d ${parent} "* ]]; then
            folder "$parent" 0755 "$EUID" 0
        fi
        folder "${dirs[$kind]}" 0755 "$EUID" 0
    done
    folder "$pyxis" 0755 "$EUID" 0
    for kind in runtime data cache temp; do
        for i in "${!names[@]}"; do
            folder "${dirs[$kind]}/user-${uids[i]}" 0700 "${uids[i]}" "${gids[i]}"
        done
    done
    mkdir -p -- "${ROOT}${TMPFILES%/*}"
    {
        echo "# Written by training-clusters-enroot: enroot's and Pyxis' folders, made again at every boot."
        printf '%s\n' "${tmpfiles[@]}"
    } | write_if_changed "${ROOT}${TMPFILES}" 0644
    say "enroot folders for ${#names[@]} users (${names[*]:-none}): ${dirs[runtime]} ${dirs[data]} ${dirs[cache]}" \
        "${dirs[temp]} and Pyxis' ${pyxis}"
}

main "$@"
