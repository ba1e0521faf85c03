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
record=${record//$'\n'/\\n} # one line a call, whatever the arguments hold
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
        if [[ $package == libnvidia-container-tools && ! -e ${0%/*}/nvidia-container-cli ]]; then
            ln -s .stub.sh "${0%/*}/nvidia-container-cli" # the package's command, beside this stub
        fi
        if [[ $package == mariadb-client && ! -e ${0%/*}/mysql ]]; then
            ln -s .stub.sh "${0%/*}/mysql"
        fi
    done
}

# ---------------------------------------------------------------------------------------------------
# A HyperPod Slurm node as systemd and Slurm see it (modelled on the public HyperPod reference,
# github.com/aws-samples/awsome-distributed-training LifecycleScripts/base-config, and the Slurm docs):
#   - unit files live in the fake root; `systemctl restart slurmd` computes the command line systemd
#     would run from the unit plus its drop-ins (ExecStart= resets, Environment=, EnvironmentFile=
#     overriding Environment=, $VAR / ${VAR} expansion) as of the last daemon-reload;
#   - slurmd fetches its configuration from slurmctld only when that command line has --conf-server
#     (configless); without it, it retries for ever and never becomes active;
#   - sackd (login nodes; Slurm >= 23.11) likewise, run from a unit of the scripts' own (the AMI model
#     ships the binary, no unit): systemctl enable / restart fail while no sackd.service exists, a
#     missing binary or a command line without --systemd (Type=notify: it would fork and never say
#     READY) fails the start;
#   - ExecStartPre=... rm -f <file> of the AMI's unit deletes a local slurm.conf;
#   - client commands (scontrol) read a local slurm.conf first, else the configuration slurmd or sackd
#     fetched (/run/slurm/conf on a node), as Slurm's configless lookup does;
#   - unit states are kept in ${state}/unit.<name> (active, activating, failed, inactive); the command
#     line of each start of slurmd / sackd in ${state}/cmdline.<daemon>.
# Knobs: STUB_SLURMD_BROKEN (slurmd crash-loops), STUB_SLURMD_NOT_IN_CONF (slurmd fetches the config,
# then exits: a login node is not a NodeName of slurm.conf), STUB_SLURMCTLD_UNRESPONSIVE (active but
# `scontrol ping` says DOWN), STUB_CONTROLLER_DOWN (the remote slurmctld does not answer),
# STUB_NVME (dlami-nvme.service mounts /opt/dlami/nvme), STUB_DLAMI_NVME_DELAY (show calls before
# dlami-nvme.service is active), STUB_DLAMI_NVME_FAILS, STUB_AGENT_SLURM_CONF + STUB_AGENT_AFTER
# (HyperPod's agent writes that slurm.conf over the AMI's placeholder after so many sleeps).
# ---------------------------------------------------------------------------------------------------

unit_file() {
    local dir
    for dir in /etc/systemd/system /run/systemd/system /lib/systemd/system /usr/lib/systemd/system; do
        if [[ -f ${TC_ROOT}${dir}/$1 ]]; then
            echo "${TC_ROOT}${dir}/$1"
            return 0
        fi
    done
    return 1
}

unit_name() {
    local unit=$1
    [[ $unit == *.* ]] || unit="${unit}.service"
    echo "$unit"
}

unit_state() {
    local file
    file="${state}/unit.$(unit_name "$1")"
    if [[ -f $file ]]; then cat "$file"; else echo inactive; fi
}

set_unit_state() {
    echo "$2" >"${state}/unit.$(unit_name "$1")"
}

# The unit file and its drop-ins, in the order systemd reads them.
unit_sources() {
    local main dropin
    main="$(unit_file "$1")" || return 0
    echo "$main"
    for dropin in "${TC_ROOT}/etc/systemd/system/$1.d"/*.conf; do
        if [[ -f $dropin ]]; then echo "$dropin"; fi
    done
}

# The ExecStart command line systemd would run, and the ExecStartPre lines, for a unit.
effective_unit() {
    local unit=$1 source line key value exec="" var_name var_value
    local -a pre=()
    local -A env=() file_env=()
    while IFS= read -r source; do
        while IFS= read -r line || [[ -n $line ]]; do
            [[ $line == *=* && $line != \#* && $line != \;* ]] || continue
            key=${line%%=*}
            value=${line#*=}
            case $key in
                ExecStart) exec=$value ;;
                ExecStartPre) if [[ -z $value ]]; then pre=(); else pre+=("$value"); fi ;;
                Environment)
                    value=${value#\"}
                    value=${value%\"}
                    env[${value%%=*}]=${value#*=}
                    ;;
                EnvironmentFile)
                    value=${value#-}
                    if [[ -f ${TC_ROOT}${value} ]]; then
                        while IFS='=' read -r var_name var_value; do
                            [[ -n $var_name && $var_name != \#* ]] || continue
                            var_value=${var_value#\"}
                            file_env[$var_name]=${var_value%\"}
                        done <"${TC_ROOT}${value}"
                    fi
                    ;;
            esac
        done <"$source"
    done < <(unit_sources "$unit")
    for var_name in "${!file_env[@]}"; do
        env[$var_name]=${file_env[$var_name]} # EnvironmentFile= overrides Environment=
    done
    while [[ $exec =~ \$\{?([A-Za-z_][A-Za-z0-9_]*)\}? ]]; do
        exec=${exec/"${BASH_REMATCH[0]}"/${env[${BASH_REMATCH[1]}]:-}}
    done
    for line in "${pre[@]}"; do
        printf 'pre\t%s\n' "$line"
    done
    printf 'exec\t%s\n' "$exec"
}

# Units whose command line the stub computes (as of the last daemon-reload) and acts on.
COMMAND_LINE_UNITS=(slurmd.service sackd.service)

# A unit systemd cannot find: `systemctl VERB UNIT` fails as systemd does (sackd has no AMI unit).
require_unit_file() {
    if [[ $2 == sackd.service ]] && ! unit_file "$2" >/dev/null; then
        echo "Failed to ${1} ${2}: Unit ${2} not found." >&2
        exit 5
    fi
}

start_unit() {
    local unit=$1 loaded kind line path
    unit="$(unit_name "$unit")"
    case $unit in
        slurmd.service | sackd.service)
            loaded="${state}/loaded.${unit}"
            [[ -f $loaded ]] || effective_unit "$unit" >"$loaded"
            while IFS=$'\t' read -r kind line; do
                if [[ $kind == pre && $line =~ ^[-@+!]*[^[:space:]]*/rm[[:space:]] ]]; then
                    for path in $line; do
                        if [[ $path == /* && $path != */rm ]]; then rm -f -- "${TC_ROOT}${path}"; fi
                    done
                fi
            done <"$loaded"
            line="$(awk -F'\t' '$1 == "exec" { print $2 }' "$loaded")"
            echo "$line" >"${state}/cmdline.${unit%.service}"
            if [[ $unit == sackd.service ]]; then
                start_sackd "$line"
            elif [[ " $line " != *" --conf-server "* ]]; then
                set_unit_state "$unit" activating # no slurm.conf and nowhere to fetch one: retries
            elif [[ -n ${STUB_SLURMD_BROKEN:-} ]]; then
                set_unit_state "$unit" activating # crash loop under Restart=on-failure
            else
                touch "${state}/config-fetched"
                if [[ -n ${STUB_SLURMD_NOT_IN_CONF:-} ]]; then
                    set_unit_state "$unit" failed
                else
                    set_unit_state "$unit" active
                fi
            fi
            ;;
        slurmdbd.service)
            if [[ -n ${STUB_SLURMDBD_FAILS:-} ]]; then
                set_unit_state "$unit" activating # cannot reach the database: restarts
            else
                set_unit_state "$unit" active
            fi
            ;;
        slurmctld.service)
            if [[ -n ${STUB_SLURMCTLD_FAILS:-} ]]; then
                set_unit_state "$unit" failed
                echo "Job for slurmctld.service failed because the control process exited with error code." >&2
                exit 1
            fi
            set_unit_state "$unit" active
            ;;
        *) set_unit_state "$unit" active ;;
    esac
}

# sackd COMMAND-LINE: ready (Type=notify) once it fetched the configuration from --conf-server.
start_sackd() {
    local line=$1 binary=${1%% *}
    if [[ -z $binary || ! -x ${TC_ROOT}${binary} ]]; then
        set_unit_state sackd failed # status=203/EXEC
        echo "Job for sackd.service failed because the control process exited with error code." >&2
        exit 1
    fi
    if [[ " $line " != *" --systemd "* ]]; then
        set_unit_state sackd failed # forked into the background: never READY=1 from the main process
        echo "Job for sackd.service failed because the service did not take the steps required by its unit configuration." >&2
        exit 1
    fi
    if [[ " $line " != *" --conf-server "* ]]; then
        set_unit_state sackd activating # no configuration source: restarts
    else
        touch "${state}/config-fetched"
        set_unit_state sackd active
    fi
}

systemctl_stub() {
    local verb=${1:-} arg now="" unit prev="" file
    local -a units=() properties=()
    shift || true
    for arg in "$@"; do
        case $arg in
            --now) now=1 ;;
            --quiet | --no-block | --no-pager) ;;
            -p | --property) ;;
            --property=*) properties+=("${arg#*=}") ;;
            *)
                if [[ ${prev:-} == -p || ${prev:-} == --property ]]; then
                    properties+=("$arg")
                else
                    units+=("$arg")
                fi
                ;;
        esac
        prev=$arg
    done
    case $verb in
        daemon-reload)
            for unit in "${COMMAND_LINE_UNITS[@]}"; do
                effective_unit "$unit" >"${state}/loaded.${unit}"
            done
            ;;
        start | restart)
            for unit in "${units[@]}"; do require_unit_file "$verb" "$(unit_name "$unit")"; done
            for unit in "${units[@]}"; do start_unit "$unit"; done
            ;;
        enable)
            for unit in "${units[@]}"; do require_unit_file "$verb" "$(unit_name "$unit")"; done
            if [[ -n $now ]]; then
                for unit in "${units[@]}"; do start_unit "$unit"; done
            fi
            ;;
        stop | disable)
            if [[ $verb == stop || -n $now ]]; then
                for unit in "${units[@]}"; do
                    if [[ -f "${state}/unit.$(unit_name "$unit")" ]]; then set_unit_state "$unit" inactive; fi
                done
            fi
            ;;
        is-active)
            unit_state "${units[0]}"
            [[ $(unit_state "${units[0]}") == active ]]
            ;;
        show)
            show_unit "${units[0]}" "${properties[@]}"
            ;;
        cat)
            for unit in "${units[@]}"; do # the unit's file, or systemd's answer when there is none
                unit="$(unit_name "$unit")"
                if ! file="$(unit_file "$unit")"; then
                    echo "No files found for ${unit}." >&2
                    exit 1
                fi
                echo "# ${file#"$TC_ROOT"}"
                cat -- "$file"
            done
            ;;
    esac
}

# `systemctl show`: LoadState, ActiveState, ExecMainStatus; dlami-nvme.service as on a DLAMI.
show_unit() {
    local unit active="" status=0 property
    unit="$(unit_name "$1")"
    shift
    if ! unit_file "$unit" >/dev/null; then
        for property in "$@"; do
            case $property in
                LoadState) echo "LoadState=not-found" ;;
                ActiveState) echo "ActiveState=inactive" ;;
                *) echo "${property}=" ;;
            esac
        done
        return 0
    fi
    if [[ $unit == dlami-nvme.service ]]; then
        if [[ -n ${STUB_DLAMI_NVME_FAILS:-} ]]; then
            active=failed
            status=1
        elif (($(bump dlami-nvme-show) >= ${STUB_DLAMI_NVME_DELAY:-0})); then
            active=active
            if [[ -n ${STUB_NVME:-} ]] && ! grep -qxF -- "${TC_ROOT}/opt/dlami/nvme" "${state}/mounts" 2>/dev/null; then
                mkdir -p "${TC_ROOT}/opt/dlami/nvme"
                echo "${TC_ROOT}/opt/dlami/nvme" >>"${state}/mounts"
            fi
        else
            active=activating
        fi
    else
        active="$(unit_state "$unit")"
    fi
    for property in "$@"; do
        case $property in
            LoadState) echo "LoadState=loaded" ;;
            ActiveState) echo "ActiveState=${active}" ;;
            ExecMainStatus) echo "ExecMainStatus=${status}" ;;
            *) echo "${property}=" ;;
        esac
    done
}

# scontrol ping / reconfigure. The configuration comes from a local slurm.conf (on the controller
# HyperPod's; elsewhere the AMI's placeholder, naming no controller of this cluster) or, without one,
# from slurmctld (configless: once slurmd or sackd fetched it).
scontrol_stub() {
    local conf="${TC_ROOT}/opt/slurm/etc/slurm.conf" host="ip-10-1-0-10" up=1
    if [[ -f $conf ]]; then
        host="$(awk '{ line = tolower($0) } line ~ /^[ \t]*slurmctldhost[ \t]*=/ {
            sub(/^[^=]*=[ \t]*/, ""); sub(/[( \t].*$/, ""); print; exit }' "$conf")"
    elif [[ ! -f "${state}/config-fetched" ]]; then
        echo "scontrol: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host" >&2
        echo "scontrol: fatal: Could not establish a configuration source" >&2
        exit 1
    fi
    case ${1:-} in
        ping)
            if [[ $host != ip-10-1-0-10 ]]; then # the placeholder's: no slurmctld of this cluster
                up=""
            elif [[ -f "${state}/unit.slurmctld.service" ]]; then # this node is the controller
                [[ $(unit_state slurmctld) == active && -z ${STUB_SLURMCTLD_UNRESPONSIVE:-} ]] || up=""
            else
                [[ -z ${STUB_CONTROLLER_DOWN:-} ]] || up=""
            fi
            if [[ -n $up ]]; then
                echo "Slurmctld(primary) at ${host} is UP"
            else
                echo "Slurmctld(primary) at ${host} is DOWN"
                exit 1
            fi
            ;;
        reconfigure)
            [[ $(unit_state slurmctld) == active ]] || {
                echo "slurm_reconfigure error: Unable to contact slurm controller (connect failure)" >&2
                exit 1
            }
            ;;
    esac
}

# The passwd / group databases of users and groups added here: name:x:id:... lines in ${state}/<db>.
db_lookup() {
    local db=$1 key=$2
    [[ -f "${state}/${db}" ]] || return 1
    awk -F: -v key="$key" '$1 == key || $3 == key { print; found = 1; exit } END { exit !found }' "${state}/${db}"
}

db_add() {
    local db=$1 entry=$2
    if db_lookup "$db" "${entry%%:*}" >/dev/null; then
        echo "${db%d}add: '${entry%%:*}' already exists" >&2
        exit 9
    fi
    echo "$entry" >>"${state}/${db}"
}

# arg_of OPTION ARGS...: the value after OPTION.
arg_of() {
    local option=$1
    shift
    while (($#)); do
        if [[ $1 == "$option" ]]; then
            echo "${2:-}"
            return 0
        fi
        shift
    done
}

# mysql: a query given with -e (SELECT 1) is answered; SQL on stdin is appended to ${state}/mysql.sql.
# With --defaults-extra-file=FILE (the external database) the connection comes from FILE, which must
# exist: a copy and its mode are kept (mysql.defaults, mysql.defaults.mode) for the tests. Knobs:
# STUB_MYSQL_UNREACHABLE (no connection ever), STUB_MYSQL_UNREACHABLE_TRIES (the first N connections
# fail: Aurora's writer is still starting).
mysql_stub() {
    local arg prev="" defaults="" host=localhost port=3306 query=""
    for arg in "$@"; do
        case $arg in --defaults-extra-file=*) defaults=${arg#*=} ;; esac
        if [[ $prev == -e ]]; then query=$arg; fi
        prev=$arg
    done
    if [[ -n $defaults ]]; then
        if [[ ! -f $defaults ]]; then
            echo "mysql: [ERROR] Could not open required defaults file: ${defaults}" >&2
            echo "mysql: [ERROR] Fatal error in defaults handling. Program aborted!" >&2
            exit 1
        fi
        cp -- "$defaults" "${state}/mysql.defaults"
        find "$defaults" -maxdepth 0 -printf '%m\n' >"${state}/mysql.defaults.mode"
        host="$(awk -F= '$1 == "host" { print $2 }' "$defaults")"
        port="$(awk -F= '$1 == "port" { print $2 }' "$defaults")"
    fi
    if [[ -n ${STUB_MYSQL_UNREACHABLE:-} ]] || (($(bump mysql-connect) < ${STUB_MYSQL_UNREACHABLE_TRIES:-0})); then
        echo "ERROR 2003 (HY000): Can't connect to MySQL server on '${host}:${port}' (110)" >&2
        exit 1
    fi
    if [[ -n $query ]]; then
        [[ $query == "SELECT 1" ]] && echo 1
        return 0
    fi
    cat >>"${state}/mysql.sql"
}

# HyperPod's agent, on the controller: replaces the AMI's placeholder slurm.conf after a while.
# netfilter, as much of it as training-clusters-imds uses. The tables are kept in ${state}/<command>.rules,
# a line a chain ("chain NAME") or a rule ("rule CHAIN SPEC...", in the chain's order): -N fails on a chain
# that exists, -F empties one, -A appends, -I inserts at the head, -C fails unless the rule is there, -S
# fails for ip6tables when STUB_NO_IP6TABLES is set (a node without IPv6 netfilter).
iptables_stub() {
    local rules="${state}/${name}.rules" chain
    [[ ${1:-} == -w ]] && shift
    touch "$rules"
    case ${1:-} in
        -N)
            if grep -qxF -- "chain $2" "$rules"; then
                echo "${name}: Chain already exists." >&2
                exit 1
            fi
            echo "chain $2" >>"$rules"
            ;;
        -F)
            grep -vF -- "rule $2 " "$rules" >"${rules}.new" || true
            mv -- "${rules}.new" "$rules"
            ;;
        -A)
            chain=$2
            shift 2
            echo "rule ${chain} $*" >>"$rules"
            ;;
        -I)
            chain=$2
            shift 3
            { echo "rule ${chain} $*"; cat -- "$rules"; } >"${rules}.new"
            mv -- "${rules}.new" "$rules"
            ;;
        -C)
            chain=$2
            shift 2
            grep -qxF -- "rule ${chain} $*" "$rules" || exit 1
            ;;
        -S)
            [[ $name == ip6tables && -n ${STUB_NO_IP6TABLES:-} ]] && exit 1
            ;;
    esac
    exit 0
}

hyperpod_agent_tick() {
    [[ -n ${STUB_AGENT_SLURM_CONF:-} ]] || return 0
    if (($(bump agent-sleeps) + 1 == ${STUB_AGENT_AFTER:-1})); then
        cp -- "$STUB_AGENT_SLURM_CONF" "${TC_ROOT}/opt/slurm/etc/slurm.conf"
    fi
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
        # STUB_MOUNT_NEVER_SHOWS: mount exits 0 but the file system never shows as mounted there.
        [[ -z ${STUB_MOUNT_NEVER_SHOWS:-} ]] || exit 0
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
        if entry="$(db_lookup passwd "${*: -1}")"; then
            if [[ $1 == -g ]]; then cut -d: -f4 <<<"$entry"; else cut -d: -f3 <<<"$entry"; fi
            exit 0
        fi
        if [[ ${STUB_NO_USER:-} && ! -f "${state}/home.${*: -1}" ]]; then
            echo "id: '${*: -1}': no such user" >&2
            exit 1
        fi
        echo 1000
        ;;
    getent)
        if entry="$(db_lookup "$1" "$2")"; then
            echo "$entry"
            exit 0
        fi
        # Beyond the users and groups added here, only the AMI's "ubuntu" exists.
        if [[ $1 != passwd || $2 != ubuntu ]]; then
            exit 2
        fi
        user="${*: -1}"
        home="/home/${user}"
        [[ -f "${state}/home.${user}" ]] && home="$(<"${state}/home.${user}")"
        echo "${user}:x:1000:1000::${home}:/bin/bash"
        ;;
    groupadd)
        # STUB_GROUPADD_FAIL: that one group cannot be added (as when /etc/group stays locked).
        if [[ -n ${STUB_GROUPADD_FAIL:-} && ${*: -1} == "$STUB_GROUPADD_FAIL" ]]; then
            echo "groupadd: cannot lock /etc/group; try again later." >&2
            exit 10
        fi
        db_add group "${*: -1}:x:$(arg_of --gid "$@"):"
        ;;
    useradd)
        # STUB_USERADD_FAIL: that one user cannot be added (as when /etc/passwd stays locked).
        if [[ -n ${STUB_USERADD_FAIL:-} && ${*: -1} == "$STUB_USERADD_FAIL" ]]; then
            echo "useradd: cannot lock /etc/passwd; try again later." >&2
            exit 1
        fi
        if [[ " $* " == *" --uid "* ]]; then
            db_add passwd "${*: -1}:x:$(arg_of --uid "$@"):$(arg_of --gid "$@")::$(arg_of --home-dir "$@"):$(arg_of --shell "$@")"
            exit 0
        fi
        arg_of --home-dir "$@" >"${state}/home.${*: -1}"
        ;;
    usermod)
        # STUB_USERMOD_FAIL: 1 (every change) or a user's name (changes to that user) fail, as while the user
        # runs a process; STUB_USERMOD_MOVE_FAIL: only --move-home fails.
        if [[ -n ${STUB_USERMOD_FAIL:-} ]] && [[ $STUB_USERMOD_FAIL == 1 || ${*: -1} == "$STUB_USERMOD_FAIL" ]]; then
            echo "usermod: user ${*: -1} is currently used by process 2411" >&2
            exit 8
        fi
        if [[ ${1:-} == --append && ${2:-} == --groups ]]; then
            [[ -f "${state}/group" ]] || exit 6
            awk -F: -v OFS=: -v group="$3" -v user="$4" \
                '$1 == group { $4 = ($4 == "" ? user : $4 "," user) } { print }' "${state}/group" >"${state}/group.new"
            mv "${state}/group.new" "${state}/group"
            exit 0
        fi
        if [[ -n ${STUB_USERMOD_MOVE_FAIL:-} && " $* " == *" --move-home "* ]]; then
            echo "usermod: user ${*: -1} is currently used by process 2411" >&2
            exit 8
        fi
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
        comment="ubuntu@training-clusters"
        while (($#)); do
            [[ $1 == -f ]] && key=$2
            [[ $1 == -C ]] && comment=$2
            shift
        done
        # STUB_SSH_KEYGEN_FAIL: the key pair commented NAME@... cannot be written (a full disk, say).
        if [[ -n ${STUB_SSH_KEYGEN_FAIL:-} && ${comment%%@*} == "$STUB_SSH_KEYGEN_FAIL" ]]; then
            echo "Saving key \"${key}\" failed: No space left on device" >&2
            exit 1
        fi
        echo "PRIVATE KEY $(bump keys)" >"$key"
        echo "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIStub$(<"${state}/count.keys") ${comment}" >"${key}.pub"
        ;;
    curl)
        output=""
        url="${*: -1}"
        while (($#)); do
            [[ $1 == -o ]] && output=$2
            shift
        done
        # STUB_CURL_FAILS_FOR: that one URL cannot be fetched (its host does not resolve), whatever it is.
        if [[ -n ${STUB_CURL_FAILS_FOR:-} && $url == "$STUB_CURL_FAILS_FOR" ]]; then
            host="${url#*://}"
            echo "curl: (6) Could not resolve host: ${host%%/*}" >&2
            exit 6
        fi
        if [[ $url == file://* ]]; then
            if [[ ! -f ${url#file://} ]]; then
                echo "curl: (37) Couldn't open file ${url#file://}" >&2
                exit 37
            fi
            cp -- "${url#file://}" "$output"
        elif [[ $url == https://truststore.pki.rds.amazonaws.com/* ]]; then
            # AWS's RDS certificate bundle: two test CA certificates (openssl-made, sandbox only).
            cp -- "${0%/*}/.rds-ca-bundle.pem" "$output"
        elif [[ $url == */slurm-*.tar.bz2 ]]; then
            work="$(mktemp -d)"
            folder="${url##*/}"
            folder="${folder%.tar.bz2}"
            mkdir -p "${work}/${folder}/contribs/pam_slurm_adopt"
            printf '#!/bin/bash\necho "configured $*"\n' >"${work}/${folder}/configure"
            chmod +x "${work}/${folder}/configure"
            tar -cjf "$output" -C "$work" "$folder"
            rm -rf "$work"
        elif [[ $url == *.tar.gz ]]; then
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
        if [[ " $* " == *" contribs/pam_slurm_adopt install "* ]]; then
            mkdir -p "${destdir}/lib/security"
            echo "module" >"${destdir}/lib/security/pam_slurm_adopt.so"
        elif [[ " $* " == *" install "* ]]; then
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
    runuser)
        # runuser -u NAME -- COMMAND...: recorded above; run here as this test's own user
        while (($#)) && [[ $1 != -- ]]; do shift; done
        shift
        exec "$@"
        ;;
    aws)
        if [[ ${1:-} != secretsmanager || ${2:-} != get-secret-value ]]; then
            echo "aws: unexpected call: $*" >&2
            exit 252
        fi
        if [[ -n ${STUB_AWS_DENIED:-} ]] || (($(bump aws) < ${STUB_AWS_FAILURES:-0})); then
            echo "An error occurred (AccessDeniedException) when calling the GetSecretValue operation" >&2
            exit 254
        fi
        if [[ -n ${STUB_SECRET_ARN:-} && $(arg_of --secret-id "$@") != "$STUB_SECRET_ARN" ]]; then
            echo "An error occurred (ResourceNotFoundException) when calling the GetSecretValue operation" >&2
            exit 254
        fi
        printf '%s\n' "${STUB_SECRET_STRING:?STUB_SECRET_STRING is not set}"
        ;;
    mysql)
        mysql_stub "$@"
        ;;
    sacctmgr)
        if [[ $(unit_state slurmdbd) != active ]]; then
            echo "sacctmgr: error: Problem talking to the database: Connection refused" >&2
            exit 1
        fi
        if [[ " $* " == *" show cluster "* ]]; then
            cat "${state}/clusters" 2>/dev/null || true
        elif [[ " $* " == *" add cluster "* ]]; then
            echo "${*: -1}" >>"${state}/clusters"
            echo " Adding Cluster(s)"
            echo "  Name           = ${*: -1}"
        fi
        ;;
    systemctl)
        if [[ -n ${STUB_SYSTEMCTL_FAIL:-} && " $* " == *" ${STUB_SYSTEMCTL_FAIL} "* ]]; then
            echo "Failed to ${1} ${*: -1}: Unit not found." >&2
            exit 5
        fi
        systemctl_stub "$@"
        ;;
    scontrol)
        scontrol_stub "$@"
        ;;
    sinfo)
        echo "slurm ${STUB_SLURM_VERSION:-24.11.1}"
        ;;
    sleep)
        hyperpod_agent_tick
        ;;
    iptables | ip6tables)
        iptables_stub "$@"
        ;;
    *) ;; # chown, umount, wget, apt-key, modprobe, cc ...: record only
esac
exit 0
