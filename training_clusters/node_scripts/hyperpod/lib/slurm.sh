# shellcheck shell=bash
#
# Slurm, per role, as SageMaker HyperPod sets a node up: the AMI ships Slurm in /opt/slurm and a
# placeholder slurm.conf; HyperPod's agent writes the cluster's slurm.conf on the controller only.
# Every other node runs "configless": slurmd (workers) and sackd (login nodes) fetch slurm.conf,
# cgroup.conf, plugstack.conf, topology.conf ... from slurmctld
# (https://slurm.schedmd.com/configless_slurm.html). As in the public reference
# (github.com/aws-samples/awsome-distributed-training, 1.architectures/5.sagemaker-hyperpod/
# LifecycleScripts/base-config: lifecycle_script.py, start_slurm.sh):
#   controller: waits until the agent's slurm.conf names this node as SlurmctldHost (step
#               slurm-config, before accounting: slurmctld must start with slurmdbd already
#               answering); JobRequeue / RequeueExit (auto-resume) and the accounting keys in slurm.conf,
#               kept applied by a systemd path unit when the agent rewrites the files; slurmctld only
#   worker:     slurmd --conf-server <controller>
#   login:      sackd --conf-server <controller> (Slurm >= 23.11, https://slurm.schedmd.com/sackd.html):
#               it keeps the configuration client commands (sbatch, squeue ...) read in /run/slurm/conf.
#               Not slurmd, as the reference does: a login node is no NodeName, so slurmd exits
#               ("Unable to determine this slurmd's NodeName") and takes /run/slurm with it
# Every role ends with a bounded wait until slurmctld answers `scontrol ping`: a daemon that cannot
# start fails the step instead of retrying unseen after a reported success. A daemon is restarted only
# when what it reads changed, so a second run of on_create.sh leaves running jobs and daemons alone.

TC_SLURM_DROPIN_NAME="50-training-clusters.conf"
TC_SLURMD_RESTART_SEC=10
# The re-apply command, its settings and its systemd units (paths on the node).
TC_SLURM_KEYS_COMMAND="/usr/local/sbin/training-clusters-slurm-keys"
TC_SLURM_KEYS_SETTINGS="/etc/training-clusters/slurm-keys.conf"
TC_SLURM_KEYS_UNIT="training-clusters-slurm-keys"

tc_setup_slurm() {
    case $TC_ROLE in
        controller) tc_setup_slurm_controller ;;
        worker) tc_setup_slurm_worker ;;
        login) tc_setup_slurm_login ;;
        *)
            tc_error "unknown role '${TC_ROLE}'"
            return 1
            ;;
    esac
}

# Step slurm-config (controller): HyperPod's slurm.conf is there (originals kept, topology checked), and
# our settings are in it, accounting's included: sacctmgr finds slurmdbd through slurm.conf, and the
# accounting step runs before slurmctld first starts.
tc_setup_slurm_config() {
    local conf="${TC_SLURM_ETC}/slurm.conf" keys_command="${TC_ROOT}${TC_SLURM_KEYS_COMMAND}"
    tc_wait_for_slurm_conf "$conf"
    tc_backup_once "$conf"
    tc_backup_once "${TC_SLURM_ETC}/cgroup.conf"
    tc_check_topology "$conf"
    TC_SLURM_CONFIG_BEFORE="$(tc_slurm_config_digest)"
    tc_install_slurm_keys
    TC_ROOT=$TC_ROOT "$BASH" "$keys_command" --no-reconfigure
}

# Step slurm-controller: slurmctld, (re)started only when it is not running or this run changed its
# configuration files. Changes HyperPod's agent made since slurmctld started were already read:
# training-clusters-slurm-keys.path runs `scontrol reconfigure` after each. So a second run of
# on_create.sh leaves a running controller alone.
TC_SLURM_CONFIG_BEFORE=""
tc_setup_slurm_controller() {
    tc_systemctl_try disable --now slurmd
    systemctl daemon-reload
    systemctl enable slurmctld
    if [[ $TC_SLURM_CONFIG_BEFORE != "$(tc_slurm_config_digest)" ]] || ! systemctl is-active --quiet slurmctld; then
        systemctl restart slurmctld
    else
        log "slurmctld already runs with this configuration: not restarted"
    fi
    systemctl enable --now "${TC_SLURM_KEYS_UNIT}.path"
    tc_wait_for_slurmctld slurmctld
    log "slurmctld is up; ${TC_SLURM_KEYS_UNIT}.path keeps the settings of ${TC_SLURM_KEYS_SETTINGS} applied"
}

# What slurmctld reads at start (its configuration files), as one line of checksums.
tc_slurm_config_digest() {
    local file line=""
    for file in slurm.conf cgroup.conf; do
        if [[ -f ${TC_SLURM_ETC}/${file} ]]; then
            line+="${file}:$(cksum <"${TC_SLURM_ETC}/${file}") "
        else
            line+="${file}:none "
        fi
    done
    printf '%s\n' "${line% }"
}

tc_setup_slurm_worker() {
    tc_start_configless_slurmd
    tc_wait_for_slurmctld slurmd
    log "slurmd is up in partition ${TC_PARTITION}; configuration from ${TC_CONTROLLER_IPS}"
}

tc_setup_slurm_login() {
    tc_start_sackd
    tc_wait_for_slurmctld sackd
    log "client commands read the configuration sackd fetched from ${TC_CONTROLLER_IPS}"
}

# ---------------------------------------------------------------------------------------------------
# Controller
# ---------------------------------------------------------------------------------------------------

# HyperPod's agent writes slurm.conf while the lifecycle script runs, over a placeholder from the
# AMI: editing the placeholder would race with the agent. Wait, bounded, for the cluster's own file:
# the one that names this node as SlurmctldHost (slurmctld refuses to start on a host that is not),
# the signal AWS's reference waits for (lifecycle_script.py, wait_for_slurm_conf). A file without
# NodeName lines is the agent's too (nodes may be listed later, or in a file it includes): a warning.
tc_wait_for_slurm_conf() {
    local conf=$1 attempt reason=""
    for ((attempt = 1; attempt <= TC_SLURM_CONF_WAIT_ATTEMPTS; attempt++)); do
        reason="$(tc_slurm_conf_not_ready "$conf")"
        if [[ -z $reason ]]; then
            log "HyperPod's ${conf} names this node as SlurmctldHost"
            if ! tc_slurm_conf_lists_nodes "$conf"; then
                warn "${conf} has no NodeName line yet: workers register once HyperPod's agent lists them"
            fi
            return 0
        fi
        log "waiting for HyperPod's agent to write ${conf} (${attempt}/${TC_SLURM_CONF_WAIT_ATTEMPTS}): ${reason}"
        sleep "$TC_SLURM_CONF_WAIT_SLEEP"
    done
    tc_error "HyperPod's agent did not write ${conf} within" \
        "$((TC_SLURM_CONF_WAIT_ATTEMPTS * TC_SLURM_CONF_WAIT_SLEEP))s (${reason}); on the HyperPod Slurm AMI it" \
        "writes the cluster's slurm.conf on the controller"
    return 1
}

# Prints why CONF is not yet the cluster's slurm.conf, or nothing when it is.
tc_slurm_conf_not_ready() {
    local conf=$1 hosts
    if [[ ! -s $conf ]]; then
        echo "not there yet"
        return 0
    fi
    hosts="$(awk '{ line = tolower($0) }
        line ~ /^[ \t]*(slurmctldhost|controlmachine)[ \t]*=/ { sub(/^[^=]*=[ \t]*/, ""); printf "%s ", $0 }' "$conf")"
    hosts=${hosts% }
    if [[ -z $hosts ]]; then
        echo "no SlurmctldHost yet"
    elif ! tc_names_this_node "$hosts"; then
        echo "SlurmctldHost=${hosts} is not this node (${TC_NODE_IP}): still the AMI's placeholder"
    fi
}

# tc_names_this_node "ip-10-1-0-10(10.1.0.10)": true when a name or address is this node's.
tc_names_this_node() {
    local words=" ${1//[(),]/ } " name
    for name in "$TC_NODE_IP" "ip-${TC_NODE_IP//./-}" "$(hostname -s 2>/dev/null || true)"; do
        if [[ -n $name && $words == *" ${name} "* ]]; then
            return 0
        fi
    done
    return 1
}

# True when CONF, or a file it includes, declares a node (NodeName=DEFAULT does not count).
tc_slurm_conf_lists_nodes() {
    local conf=$1 include
    local -a files=("$conf")
    while IFS= read -r include; do
        case $include in
            /*) include="${TC_ROOT}${include}" ;;
            *) include="${TC_SLURM_ETC}/${include}" ;;
        esac
        if [[ -f $include ]]; then
            files+=("$include")
        fi
    done < <(awk 'tolower($1) == "include" && NF >= 2 { print $2 }' "$conf")
    awk '{ line = tolower($0) }
        line ~ /^[ \t]*nodename[ \t]*=/ && line !~ /^[ \t]*nodename[ \t]*=[ \t]*default([ \t]|$)/ { found = 1 }
        END { exit !found }' "${files[@]}"
}

# HyperPod now writes Slurm's network topology itself (TopologyPlugin in slurm.conf, topology.conf or
# topology.yaml beside it). These scripts never touch either; a plugin without its file makes sbatch
# fail, so say so.
tc_check_topology() {
    local conf=$1 plugin
    plugin="$(awk '{ line = tolower($0) }
        line ~ /^[ \t]*topologyplugin[ \t]*=/ { sub(/^[^=]*=[ \t]*/, ""); value = $0 } END { print value }' "$conf")"
    case $plugin in
        "" | topology/flat | topology/default | topology/none)
            log "slurm.conf sets no topology plugin"
            ;;
        *)
            if [[ -s ${TC_SLURM_ETC}/topology.conf || -s ${TC_SLURM_ETC}/topology.yaml ]]; then
                log "slurm.conf uses TopologyPlugin=${plugin} with HyperPod's topology file (left as it is)"
            else
                warn "slurm.conf sets TopologyPlugin=${plugin} but ${TC_SLURM_ETC}/topology.conf is missing or" \
                    "empty: sbatch fails with 'Requested topology configuration is not available' until" \
                    "HyperPod writes it (these scripts never write topology files)"
            fi
            ;;
    esac
}

# The settings of the controller, the command that applies them and the systemd units that apply them
# again whenever HyperPod's agent rewrites slurm.conf or cgroup.conf (scaling, node replacement).
tc_install_slurm_keys() {
    {
        echo "# Written by the training-clusters lifecycle scripts (on_create.sh). Kept applied by"
        echo "# ${TC_SLURM_KEYS_UNIT}.path: <file in /opt/slurm/etc> <Key> <Value>"
        # Auto-resume: jobs may be requeued after a node failure, and a job exiting with one of these
        # codes is requeued by Slurm. HyperPod's `srun --auto-resume=1` works besides these.
        echo "slurm.conf JobRequeue 1"
        if [[ -n $TC_SLURM_REQUEUE_EXIT ]]; then
            echo "slurm.conf RequeueExit ${TC_SLURM_REQUEUE_EXIT}"
        fi
        # Accounting through slurmdbd on this node (lib/accounting.sh), when training_clusters.json asks.
        # (With API-driven Slurm, accounting is HyperPod's: lib/accounting.sh is not sourced.)
        if declare -F tc_accounting_slurm_keys >/dev/null; then
            tc_accounting_slurm_keys
        fi
        # pam_slurm_adopt (lib/pam_slurm_adopt.sh) adopts SSH sessions into the job's "extern" step,
        # which needs PrologFlags=Contain and Slurm's cgroup plugins (https://slurm.schedmd.com/
        # pam_slurm_adopt.html), as AWS's reference utils/pam_adopt_cgroup_wheel.sh sets them; then
        # ConstrainDevices=yes makes jobs see only the GPUs they were given. HyperPod's own default is
        # TaskPlugin=task/none, under which cgroup.conf's constraints do nothing: they are not written.
        # A "+" value adds flags to the list already there (PrologFlags=X11 stays).
        if [[ $TC_ENABLE_PAM_SLURM_ADOPT == true ]]; then
            echo "slurm.conf PrologFlags +Contain"
            echo "slurm.conf ProctrackType proctrack/cgroup"
            echo "slurm.conf TaskPlugin task/cgroup,task/affinity"
            echo "cgroup.conf ConstrainDevices yes"
        fi
    } | tc_write_file "${TC_ROOT}${TC_SLURM_KEYS_SETTINGS}" 0644
    tc_write_file "${TC_ROOT}${TC_SLURM_KEYS_COMMAND}" 0755 <"${TC_HOME}/node/training-clusters-slurm-keys.sh"
    tc_write_file "${TC_ROOT}/etc/systemd/system/${TC_SLURM_KEYS_UNIT}.service" 0644 <<EOF
# Written by the training-clusters lifecycle scripts (on_create.sh).
[Unit]
Description=Re-apply the training-clusters Slurm settings after HyperPod rewrites its configuration
# The agent may write several times in a row: never stop re-applying for a start rate limit.
StartLimitIntervalSec=0

[Service]
Type=oneshot
ExecStart=${TC_SLURM_KEYS_COMMAND}
EOF
    tc_write_file "${TC_ROOT}/etc/systemd/system/${TC_SLURM_KEYS_UNIT}.path" 0644 <<EOF
# Written by the training-clusters lifecycle scripts (on_create.sh).
[Unit]
Description=Watch HyperPod's Slurm configuration for rewrites

[Path]
PathChanged=/opt/slurm/etc/slurm.conf
PathChanged=/opt/slurm/etc/cgroup.conf
Unit=${TC_SLURM_KEYS_UNIT}.service

[Install]
WantedBy=multi-user.target
EOF
}

# Step slurm-keys of on_init_complete.sh (API-driven Slurm, controller): HyperPod wrote slurm.conf and
# started slurmctld before running the script; our settings go in as with on_create.sh (kept by the same
# path unit) and `scontrol reconfigure` makes slurmctld read them (since Slurm 23.11 it restarts the
# daemons in place: https://slurm.schedmd.com/scontrol.html#OPT_reconfigure). SlurmConfigStrategy Merge
# (the construct's default, and what continuous provisioning does) keeps these edits across updates.
tc_setup_slurm_keys_api() {
    local conf="${TC_SLURM_ETC}/slurm.conf" keys_command="${TC_ROOT}${TC_SLURM_KEYS_COMMAND}"
    tc_wait_for_slurm_conf "$conf"
    tc_backup_once "$conf"
    tc_backup_once "${TC_SLURM_ETC}/cgroup.conf"
    tc_check_topology "$conf"
    tc_install_slurm_keys
    systemctl daemon-reload
    TC_ROOT=$TC_ROOT "$BASH" "$keys_command"
    systemctl enable --now "${TC_SLURM_KEYS_UNIT}.path"
    log "${TC_SLURM_KEYS_UNIT}.path keeps the settings of ${TC_SLURM_KEYS_SETTINGS} applied"
}

# Step slurm-ready of on_init_complete.sh: HyperPod started this node's Slurm daemon; wait, bounded, until
# slurmctld answers (and, on the controller, slurmctld's unit is active), so a node whose Slurm is not up
# fails its lifecycle run instead of reporting success.
tc_check_slurm_api() {
    if [[ $TC_ROLE == controller ]]; then
        tc_wait_for_slurmctld slurmctld
    else
        tc_wait_for_slurmctld ""
    fi
}

# ---------------------------------------------------------------------------------------------------
# Workers and login nodes: configless slurmd
# ---------------------------------------------------------------------------------------------------

# A drop-in that replaces slurmd's whole command line with one carrying --conf-server: unlike an
# Environment=SLURMD_OPTIONS=... drop-in, it cannot be lost to a unit that does not expand the
# variable or to an EnvironmentFile= that sets it.
tc_start_configless_slurmd() {
    local unit exec_start
    if ! unit="$(tc_systemd_unit_path slurmd.service)"; then
        tc_error "slurmd.service not found in /etc/systemd/system, /lib/systemd/system or" \
            "/usr/lib/systemd/system: these scripts need the HyperPod Slurm AMI"
        return 1
    fi
    exec_start="$(tc_slurmd_exec_start "$unit")"
    tc_write_file "${TC_ROOT}/etc/systemd/system/slurmd.service.d/${TC_SLURM_DROPIN_NAME}" 0644 <<EOF
# Written by the training-clusters lifecycle scripts: configless slurmd, configuration from slurmctld.
# ExecStart is replaced as a whole (see lib/slurm.sh of the lifecycle scripts).
[Unit]
# A configless node has no local slurm.conf: no condition on one may skip the start.
ConditionPathExists=

[Service]
ExecStart=
ExecStart=${exec_start}
Restart=on-failure
RestartSec=${TC_SLURMD_RESTART_SEC}
EOF
    local changed=$TC_FILE_CHANGED
    tc_systemctl_try disable --now slurmctld
    systemctl daemon-reload
    systemctl enable slurmd
    if [[ $changed == false ]] && systemctl is-active --quiet slurmd; then
        log "slurmd already runs with this command line: not restarted (${exec_start})"
        return 0
    fi
    # --no-block: slurmd waits for slurmctld, whose node may still be in its own lifecycle script;
    # tc_wait_for_slurmctld bounds that wait.
    systemctl restart --no-block slurmd
    log "slurmd (re)start queued: ${exec_start}"
}

# Login nodes: sackd --conf-server, from the AMI's unit when it has one (a drop-in sets the command
# line) or from a unit of ours. The AMI's placeholder slurm.conf is moved aside: client commands read a
# local slurm.conf before the configless copy in /run/slurm/conf.
tc_start_sackd() {
    local binary="/opt/slurm/sbin/sackd" command changed=false
    if [[ ! -x ${TC_ROOT}${binary} ]]; then
        tc_error "${binary} not found: login nodes need sackd (Slurm 23.11 or later; HyperPod's Slurm AMI has 24.11)"
        return 1
    fi
    # --systemd: sackd stays in the foreground and tells systemd when it is ready (Type=notify), as in
    # Slurm's own etc/sackd.service.in; without it sackd forks and the unit ends at once.
    command="${binary} --systemd --conf-server ${TC_CONTROLLER_IPS}"
    if ! tc_systemd_unit_path sackd.service >/dev/null; then
        tc_write_file "${TC_ROOT}/etc/systemd/system/sackd.service" 0644 <<EOF
# Written by the training-clusters lifecycle scripts: Slurm's login-node daemon (https://slurm.schedmd.com/sackd.html).
[Unit]
Description=Slurm auth and cred kiosk daemon
After=network-online.target munge.service remote-fs.target
Wants=network-online.target

[Service]
Type=notify
User=${TC_SLURM_USER}
Group=${TC_SLURM_USER}
RuntimeDirectory=slurm
RuntimeDirectoryMode=0755
ExecStart=${binary} --systemd
KillMode=process
LimitNOFILE=131072

[Install]
WantedBy=multi-user.target
EOF
        [[ $TC_FILE_CHANGED == false ]] || changed=true
    fi
    tc_write_file "${TC_ROOT}/etc/systemd/system/sackd.service.d/${TC_SLURM_DROPIN_NAME}" 0644 <<EOF
# Written by the training-clusters lifecycle scripts: configless client configuration from slurmctld.
[Unit]
ConditionPathExists=

[Service]
Type=notify
ExecStart=
ExecStart=${command}
Restart=on-failure
RestartSec=${TC_SLURMD_RESTART_SEC}
EOF
    [[ $TC_FILE_CHANGED == false ]] || changed=true
    if [[ -f ${TC_SLURM_ETC}/slurm.conf ]]; then
        tc_backup_once "${TC_SLURM_ETC}/slurm.conf"
        rm -f -- "${TC_SLURM_ETC}/slurm.conf"
        log "moved the AMI's ${TC_SLURM_ETC#"$TC_ROOT"}/slurm.conf aside: client commands read sackd's copy"
    fi
    tc_systemctl_try disable --now slurmd
    tc_systemctl_try disable --now slurmctld
    systemctl daemon-reload
    systemctl enable sackd
    if [[ $changed == false ]] && systemctl is-active --quiet sackd; then
        log "sackd already runs with this command line: not restarted (${command})"
        return 0
    fi
    systemctl restart sackd
    log "sackd (re)started: ${command}"
}

# The AMI unit's own ExecStart (binary and flags), without $SLURMD_OPTIONS or an earlier
# --conf-server, plus --conf-server <controller addresses>.
tc_slurmd_exec_start() {
    local unit=$1 line word skip=false
    local -a words=() kept=()
    line="$(awk '/^[ \t]*ExecStart[ \t]*=/ { sub(/^[^=]*=[ \t]*/, ""); if ($0 != "") value = $0 }
        END { print value }' "$unit")"
    read -r -a words <<<"${line:-/opt/slurm/sbin/slurmd -D -s}"
    for word in "${words[@]}"; do
        if [[ $skip == true ]]; then
            skip=false
            continue
        fi
        # shellcheck disable=SC2016  # the unit file's literal variable references
        case $word in
            '$SLURMD_OPTIONS' | '${SLURMD_OPTIONS}' | --conf-server=*) ;;
            --conf-server) skip=true ;;
            *) kept+=("$word") ;;
        esac
    done
    printf '%s --conf-server %s\n' "${kept[*]}" "$TC_CONTROLLER_IPS"
}

# ---------------------------------------------------------------------------------------------------
# Shared
# ---------------------------------------------------------------------------------------------------

# tc_wait_for_slurmctld [DAEMON]: bounded wait until DAEMON (if given) is active and slurmctld answers
# `scontrol ping`; fails the step with one line saying what was last seen.
tc_wait_for_slurmctld() {
    local daemon=$1 attempt state="" ping=""
    for ((attempt = 1; attempt <= TC_SLURM_START_WAIT_ATTEMPTS; attempt++)); do
        if [[ -n $daemon ]]; then
            state="$(systemctl is-active "$daemon" 2>&1 || true)"
        fi
        ping="$(tc_scontrol ping 2>&1 || true)"
        ping=${ping//$'\n'/ | }
        if [[ (-z $daemon || $state == active) && $ping == *" is UP"* ]]; then
            log "${daemon:+${daemon} is active; }scontrol ping: ${ping}"
            return 0
        fi
        log "waiting for Slurm (${attempt}/${TC_SLURM_START_WAIT_ATTEMPTS}):" \
            "${daemon:+${daemon} is ${state:-unknown}; }scontrol ping: ${ping:-<no output>}"
        sleep "$TC_SLURM_START_WAIT_SLEEP"
    done
    tc_error "Slurm is not up after $((TC_SLURM_START_WAIT_ATTEMPTS * TC_SLURM_START_WAIT_SLEEP))s:" \
        "${daemon:+${daemon} is ${state:-unknown}, }scontrol ping says '${ping:-nothing}'" \
        "(see journalctl -u ${daemon:-slurmd} and the Slurm logs)"
    return 1
}

# Slurm's scontrol: /opt/slurm/bin is not on the lifecycle script's PATH.
tc_scontrol() {
    local command=$TC_SCONTROL
    if [[ -z $command ]]; then
        command=scontrol
        if [[ -x ${TC_ROOT}/opt/slurm/bin/scontrol ]]; then
            command="${TC_ROOT}/opt/slurm/bin/scontrol"
        fi
    fi
    "$command" "$@"
}

# tc_systemd_unit_path UNIT: prints the unit file systemd loads, or fails.
tc_systemd_unit_path() {
    local dir
    for dir in /etc/systemd/system /run/systemd/system /lib/systemd/system /usr/lib/systemd/system; do
        if [[ -f ${TC_ROOT}${dir}/$1 ]]; then
            printf '%s\n' "${TC_ROOT}${dir}/$1"
            return 0
        fi
    done
    return 1
}

# systemctl for best-effort changes (a unit the AMI may not have): log a failure, carry on.
tc_systemctl_try() {
    local rc=0
    systemctl "$@" || rc=$?
    if ((rc != 0)); then
        warn "systemctl $* failed (exit ${rc}); continuing"
    fi
}
