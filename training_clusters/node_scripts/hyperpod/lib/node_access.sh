# shellcheck shell=bash
#
# The controller for administrators only, on clusters with team users (training_clusters.json `users`,
# unless `team_logins_on_controller` is true). The users exist there (slurmctld and slurmdbd resolve their
# names and uids for accounting), and their homes with their authorised keys are shared with every node, so
# without this step any of them could SSH from the login node into the controller: the node whose role reads
# the accounting database's secret and whose slurmctld and slurmdbd hold the cluster's state.
#
# sshd checks every login, with a key too, against its PAM account stack (UsePAM, the default on Ubuntu and
# Debian: sshd_config(5)); pam_access(8) there, with an access file of ours listing root and the cluster
# user (ubuntu), refuses everyone else: "Access denied for user alice by PAM account configuration".
# SSM sessions, the administrators' way in, start without sshd and are not affected. One implementation for
# HyperPod's controller and ParallelCluster's head node: shared/users.sh --admins-only (its header).

tc_keep_team_off_node() {
    tc_backup_once "${TC_ROOT}/etc/pam.d/sshd"
    TC_ROOT="$TC_ROOT" "$BASH" "${TC_HOME}/shared/users.sh" --admins-only "$TC_CLUSTER_USER"
    log "only root and ${TC_CLUSTER_USER} log in to this ${TC_ROLE} over SSH (the team's ${#TC_USERS[@]} users do not)"
}
