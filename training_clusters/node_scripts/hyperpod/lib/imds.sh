# shellcheck shell=bash
#
# Instance metadata for root only, on clusters with team users (training_clusters.json `users`): every
# HyperPod node's instance role is the cluster's, and IMDS gives its credentials to any local process,
# so a user on a node could act as the cluster (read the accounting secret on the controller, for one).
# shared/training-clusters-imds.sh (one script for HyperPod, ParallelCluster and PCS) installs owner-matched netfilter rules that let only root's packets
# reach IMDS, and training-clusters-imds.service, which applies them at every boot.

tc_setup_imds_guard() {
    if ! command -v iptables >/dev/null 2>&1; then
        apt_get install -y --no-install-recommends iptables
    fi
    # The command installs itself and its unit (training-clusters-imds.service), then applies the rules.
    TC_ROOT="$TC_ROOT" "$BASH" "${TC_HOME}/shared/training-clusters-imds.sh" --install
    log "only root reaches the instance metadata service (applied at every boot)"
}
