# shellcheck shell=bash
#
# Instance metadata for root only, on clusters with team users (training_clusters.json `users`): every
# HyperPod node's instance role is the cluster's, and IMDS gives its credentials to any local process,
# so a user on a node could act as the cluster (read the accounting secret on the controller, for one).
# node/training-clusters-imds.sh installs owner-matched netfilter rules that let only root's packets
# reach IMDS; training-clusters-imds.service applies them at every boot.

TC_IMDS_COMMAND="/usr/local/sbin/training-clusters-imds"
TC_IMDS_UNIT="training-clusters-imds.service"

tc_setup_imds_guard() {
    if ! command -v iptables >/dev/null 2>&1; then
        apt_get install -y --no-install-recommends iptables
    fi
    tc_write_file "${TC_ROOT}${TC_IMDS_COMMAND}" 0755 <"${TC_HOME}/node/training-clusters-imds.sh"
    tc_write_file "${TC_ROOT}/etc/systemd/system/${TC_IMDS_UNIT}" 0644 <<EOF
# Written by the training-clusters lifecycle scripts (on_create.sh, step imds-guard).
[Unit]
Description=Instance metadata (IMDS) for root only: team users never get the node's role credentials
DefaultDependencies=no
After=network-pre.target
Before=network-online.target systemd-user-sessions.service ssh.service sshd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=${TC_IMDS_COMMAND}

[Install]
WantedBy=multi-user.target
EOF
    systemctl daemon-reload
    systemctl enable "$TC_IMDS_UNIT"
    # A oneshot unit's start fails when its command does, and the step with it.
    systemctl restart "$TC_IMDS_UNIT"
    log "only root reaches the instance metadata service (${TC_IMDS_UNIT}, applied at every boot)"
}
