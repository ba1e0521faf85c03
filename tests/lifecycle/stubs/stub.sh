#!/bin/bash
# Test double for the system commands the lifecycle scripts run. The sandbox links it under each
# command's name (apt-get, mount, systemctl ...). Every call is recorded to $STUB_CALLS as one
# line: the command name and its arguments separated by the ASCII unit separator (0x1f). The
# behaviour below emulates just enough of each command, driven by STUB_* variables and by state
# files in $STUB_STATE, so the scripts run end to end inside a fake root ($TC_ROOT).
set -euo pipefail

name="${0##*/}"
state="${STUB_STATE:?STUB_STATE is not set}"
printf -v record '%s\x1f' "$name" "$@"
printf '%s\n' "${record%$'\x1f'}" >>"${STUB_CALLS:?STUB_CALLS is not set}"

# Number of earlier calls recorded under a counter name, then count this one.
bump() {
    local file="${state}/count.$1" count=0
    [[ -f $file ]] && count="$(<"$file")"
    echo $((count + 1)) >"$file"
    echo "$count"
}

# Installed packages, one a line, in ${state}/installed (read without spawning a process).
installed() {
    local list=""
    [[ -f "${state}/installed" ]] && list="$(<"${state}/installed")"
    [[ $'\n'"${list}"$'\n' == *$'\n'"$1"$'\n'* ]]
}

apt_update() {
    local listfile="" arg file broken=""
    local -a files=()
    for arg in "$@"; do
        case $arg in Dir::Etc::sourcelist=*) listfile=${arg#*=} ;; esac
    done
    if [[ -n $listfile ]]; then
        files=("$listfile")
    else
        shopt -s nullglob
        files=("${TC_ROOT}"/etc/apt/sources.list.d/*.list "${TC_ROOT}"/etc/apt/sources.list.d/*.sources)
    fi
    if [[ -z $listfile && $(bump apt-update) -lt ${STUB_APT_TRANSIENT_FAILURES:-0} ]]; then
        echo "Err:1 http://archive.ubuntu.com/ubuntu jammy InRelease"
        echo "  Temporary failure resolving 'archive.ubuntu.com'"
        echo "W: Some index files failed to download. They have been ignored, or old ones used instead."
        exit 100
    fi
    for file in "${files[@]}"; do
        if [[ -n ${STUB_APT_BROKEN:-} && -f $file ]] &&
            [[ $(sed '/^[[:space:]]*#/d' "$file" | grep -cE -- "$STUB_APT_BROKEN") -gt 0 ]]; then
            broken=$file
        fi
    done
    echo "Hit:1 http://archive.ubuntu.com/ubuntu jammy InRelease"
    if [[ -z $broken ]]; then
        echo "Fetched 403 kB in 1s (403 kB/s)"
        echo "Reading package lists... Done"
        exit 0
    fi
    local repo="https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu"
    case ${STUB_APT_BROKEN_MESSAGE:-403} in
        403)
            echo "Err:2 ${repo} jammy InRelease"
            echo "  403  Forbidden [IP: 52.216.8.10 443]"
            echo "Reading package lists..."
            echo "E: Failed to fetch ${repo}/dists/jammy/InRelease  403  Forbidden [IP: 52.216.8.10 443]"
            echo "E: The repository '${repo} jammy InRelease' is no longer signed."
            ;;
        EXPKEYSIG)
            echo "Get:2 ${repo} jammy InRelease [2,031 B]"
            echo "Err:2 ${repo} jammy InRelease"
            echo "  The following signatures were invalid: EXPKEYSIG 96C9E4A7B4C2D1E0 Amazon FSx Lustre Client"
            echo "Reading package lists..."
            echo "W: GPG error: ${repo} jammy InRelease: The following signatures were invalid: EXPKEYSIG 96C9E4A7B4C2D1E0"
            echo "E: The repository '${repo} jammy InRelease' is not signed."
            ;;
        *)
            echo "E: Failed to fetch ${repo}/dists/jammy/InRelease  Could not connect"
            ;;
    esac
    exit 100
}

apt_install() {
    local arg package
    for arg in "$@"; do
        case $arg in
            -* | install | Dir::* | DPkg::* | Dpkg::* | APT::*) continue ;;
        esac
        package="${arg##*/}"
        package="${package%%_*}"
        package="${package%%=*}"
        if [[ -n ${STUB_APT_MISSING:-} ]] && [[ $package =~ $STUB_APT_MISSING ]]; then
            echo "E: Unable to locate package ${package}"
            exit 100
        fi
        echo "Setting up ${package} ..."
        installed "$package" || echo "$package" >>"${state}/installed"
    done
}

case $name in
    apt-get)
        case " $* " in
            *" update "*) apt_update "$@" ;;
            *" install "*) apt_install "$@" ;;
        esac
        ;;
    dpkg-query)
        package="${*: -1}"
        if installed "$package"; then
            printf 'install ok installed'
        else
            echo "dpkg-query: no packages found matching ${package}" >&2
            exit 1
        fi
        ;;
    dpkg)
        [[ ${1:-} == --print-architecture ]] && echo amd64
        ;;
    modinfo)
        list=""
        [[ -f "${state}/installed" ]] && list="$(<"${state}/installed")"
        if [[ -n ${STUB_NO_LUSTRE:-} && $'\n'"${list}" != *$'\n'lustre-client-modules* ]]; then
            echo "modinfo: ERROR: Module lustre not found." >&2
            exit 1
        fi
        echo "filename: /lib/modules/lustre.ko"
        ;;
    mount)
        target="${*: -1}"
        if [[ -n ${STUB_MOUNT_FAIL:-} ]]; then
            echo "mount.lustre: mount ${*: -2:1} at ${target} failed: No such file or directory" >&2
            exit 32
        fi
        mkdir -p "$target"
        echo "$target" >>"${state}/mounts"
        ;;
    mountpoint)
        grep -qxF -- "${*: -1}" "${state}/mounts" 2>/dev/null
        ;;
    hostname)
        if [[ ${1:-} == -I ]]; then
            echo "${STUB_NODE_IPS:-} "
        else
            echo "ip-10-1-0-1"
        fi
        ;;
    ip)
        index=2
        echo "1: lo    inet 127.0.0.1/8 scope host lo"
        for address in ${STUB_IP_ADDR_IPS:-}; do
            echo "${index}: ens${index}    inet ${address}/24 brd 10.1.255.255 scope global ens${index}"
            index=$((index + 1))
        done
        ;;
    id)
        if [[ ${STUB_NO_USER:-} && ! -f "${state}/home.${*: -1}" ]]; then
            echo "id: '${*: -1}': no such user" >&2
            exit 1
        fi
        echo 1000
        ;;
    getent)
        user="${*: -1}"
        home="/home/${user}"
        [[ -f "${state}/home.${user}" ]] && home="$(<"${state}/home.${user}")"
        echo "${user}:x:1000:1000::${home}:/bin/bash"
        ;;
    usermod | useradd)
        home=""
        while (($#)); do
            case $1 in
                --home | --home-dir | -d)
                    home=$2
                    shift
                    ;;
            esac
            user=$1
            shift
        done
        echo "$home" >"${state}/home.${user}"
        ;;
    ssh-keygen)
        key=""
        while (($#)); do
            [[ $1 == -f ]] && key=$2
            shift
        done
        echo "PRIVATE KEY $(bump keys)" >"$key"
        echo "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIStub$(<"${state}/count.keys") ubuntu@training-clusters" >"${key}.pub"
        ;;
    curl)
        output=""
        url="${*: -1}"
        while (($#)); do
            [[ $1 == -o ]] && output=$2
            shift
        done
        if [[ $url == *.tar.gz ]]; then
            work="$(mktemp -d)"
            folder="pyxis-${url##*/v}"
            mkdir -p "${work}/${folder%.tar.gz}"
            echo "all:" >"${work}/${folder%.tar.gz}/Makefile"
            tar -czf "$output" -C "$work" "${folder%.tar.gz}"
            rm -rf "$work"
        else
            echo "downloaded from ${url}" >"$output"
        fi
        ;;
    make)
        destdir=""
        prefix="/usr/local"
        for arg in "$@"; do
            case $arg in
                DESTDIR=*) destdir=${arg#*=} ;;
                prefix=*) prefix=${arg#*=} ;;
            esac
        done
        if [[ " $* " == *" install "* ]]; then
            mkdir -p "${destdir}${prefix}/lib/slurm"
            echo "plugin" >"${destdir}${prefix}/lib/slurm/spank_pyxis.so"
        fi
        ;;
    nvidia-smi)
        if [[ -z ${STUB_GPU:-} ]]; then
            echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2
            exit 9
        fi
        echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"
        ;;
    docker)
        if [[ ${1:-} == container && ${2:-} == inspect ]]; then
            [[ -f "${state}/container.${*: -1}" ]]
        elif [[ ${1:-} == run ]]; then
            while (($#)); do
                [[ $1 == --name ]] && touch "${state}/container.$2"
                shift
            done
        fi
        ;;
    sudo)
        exec "$@"
        ;;
    systemctl)
        if [[ -n ${STUB_SYSTEMCTL_FAIL:-} && " $* " == *" ${STUB_SYSTEMCTL_FAIL} "* ]]; then
            echo "Failed to ${1} ${*: -1}: Unit not found." >&2
            exit 5
        fi
        ;;
    *) ;; # chown, sleep, umount, wget, apt-key, modprobe, cc ...: record only
esac
exit 0
