# shellcheck shell=bash
#
# Slurm, per role. The HyperPod AMI ships Slurm in /opt/slurm and HyperPod's agent writes
# slurm.conf on the controller from provisioning_parameters.json; workers run "configless": slurmd
# fetches slurm.conf (and plugstack.conf) from slurmctld at the controller's address.
#   controller: slurmctld only; JobRequeue=1 and RequeueExit=<codes> for auto-resume; a node and
#               partition list from resource_config.json if slurm.conf has none
#   worker:     slurmd only, pointed at the controller(s) with --conf-server
#   login:      neither daemon; sackd (Slurm >= 23.11) fetches the config for client commands
#               when the AMI ships it

TC_SLURM_NODES_FILE_NAME="training_clusters_nodes.conf"
TC_SLURM_DROPIN_NAME="50-training-clusters.conf"

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

tc_setup_slurm_controller() {
    local conf="${TC_SLURM_ETC}/slurm.conf"
    tc_wait_for_slurm_conf "$conf"
    tc_backup_once "$conf"
    # Auto-resume: jobs may be requeued (sbatch --requeue is the default), and a job that exits
    # with one of these codes is requeued by Slurm itself. HyperPod's `srun --auto-resume=1`
    # restarts steps on replaced nodes independently of these settings.
    tc_set_conf_key "$conf" JobRequeue 1
    if [[ -n $TC_SLURM_REQUEUE_EXIT ]]; then
        tc_set_conf_key "$conf" RequeueExit "$TC_SLURM_REQUEUE_EXIT"
    fi
    tc_slurm_nodes_fallback "$conf"

    tc_systemctl_try disable --now slurmd
    systemctl daemon-reload
    systemctl enable slurmctld
    systemctl restart slurmctld
    log "slurmctld (re)started"
}

tc_setup_slurm_worker() {
    tc_write_conf_server_dropin slurmd SLURMD_OPTIONS
    tc_systemctl_try disable --now slurmctld
    systemctl daemon-reload
    systemctl enable slurmd
    # --no-block: slurmd waits for slurmctld, whose node may still be in its own lifecycle script.
    systemctl restart --no-block slurmd
    log "slurmd (re)start queued; config from ${TC_CONTROLLER_IPS}; partition ${TC_PARTITION}"
}

tc_setup_slurm_login() {
    tc_systemctl_try disable --now slurmctld
    tc_systemctl_try disable --now slurmd
    if tc_systemd_unit_exists sackd.service; then
        tc_write_conf_server_dropin sackd SACKD_OPTIONS
        systemctl daemon-reload
        systemctl enable sackd
        systemctl restart --no-block sackd
        log "sackd (re)start queued; client commands read the config from ${TC_CONTROLLER_IPS}"
    else
        log "no sackd unit: client commands use the slurm.conf that HyperPod provides on this node"
    fi
}

# HyperPod's agent writes slurm.conf while the lifecycle script runs: wait for it, bounded.
tc_wait_for_slurm_conf() {
    local conf=$1 attempt
    for ((attempt = 1; attempt <= TC_SLURM_CONF_WAIT_ATTEMPTS; attempt++)); do
        if [[ -s $conf ]]; then
            log "found ${conf}"
            return 0
        fi
        log "waiting for HyperPod to write ${conf} (${attempt}/${TC_SLURM_CONF_WAIT_ATTEMPTS})"
        sleep "$TC_SLURM_CONF_WAIT_SLEEP"
    done
    tc_error "${conf} did not appear; the HyperPod Slurm AMI and agent provide it"
    return 1
}

# When slurm.conf lists no nodes (HyperPod normally writes them), declare the workers and their
# partitions from resource_config.json in an included file. Node names follow the HyperPod host
# names (ip-10-1-2-3).
tc_slurm_nodes_fallback() {
    local conf=$1 nodes_file="${TC_SLURM_ETC}/${TC_SLURM_NODES_FILE_NAME}" entry ip name partition default
    local -a partitions=()
    local -A members=()
    if awk '/^[ \t]*[Nn][Oo][Dd][Ee][Nn][Aa][Mm][Ee][ \t]*=/ { found = 1 } END { exit !found }' "$conf"; then
        log "slurm.conf declares its nodes (HyperPod); no node list added"
        return 0
    fi
    if ((${#TC_WORKER_NODES[@]} == 0)); then
        warn "slurm.conf declares no nodes and resource_config.json lists no worker instances"
        return 0
    fi
    for entry in "${TC_WORKER_NODES[@]}"; do
        partition=${entry%%:*}
        ip=${entry#*:}
        name="ip-${ip//./-}"
        if [[ -z ${members[$partition]+set} ]]; then
            partitions+=("$partition")
            members[$partition]=$name
        else
            members[$partition]+=",${name}"
        fi
    done
    {
        echo "# Written by the training-clusters lifecycle scripts: slurm.conf declared no nodes."
        for entry in "${TC_WORKER_NODES[@]}"; do
            ip=${entry#*:}
            name="ip-${ip//./-}"
            echo "NodeName=${name} NodeAddr=${ip} NodeHostname=${name} State=UNKNOWN"
        done
        default=YES
        for partition in "${partitions[@]}"; do
            echo "PartitionName=${partition} Nodes=${members[$partition]} Default=${default} MaxTime=INFINITE State=UP"
            default=NO
        done
    } | tc_write_file "$nodes_file" 0644
    tc_ensure_line "$conf" "Include /opt/slurm/etc/${TC_SLURM_NODES_FILE_NAME}"
}

# tc_write_conf_server_dropin UNIT VARIABLE: a systemd drop-in giving the daemon --conf-server.
tc_write_conf_server_dropin() {
    local unit=$1 variable=$2
    tc_write_file "${TC_ROOT}/etc/systemd/system/${unit}.service.d/${TC_SLURM_DROPIN_NAME}" 0644 <<EOF
# Written by the training-clusters lifecycle scripts: configless Slurm, config from slurmctld.
[Service]
Environment="${variable}=--conf-server ${TC_CONTROLLER_IPS}"
EOF
}

tc_systemd_unit_exists() {
    local dir
    for dir in /etc/systemd/system /lib/systemd/system /usr/lib/systemd/system; do
        if [[ -f ${TC_ROOT}${dir}/$1 ]]; then
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
