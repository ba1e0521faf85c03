#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# SageMaker HyperPod OnCreate entry point (Slurm; EKS in lib/eks_node.sh) of the cdk-training-clusters lifecycle scripts.
#
# HyperPod downloads LifeCycleConfig.SourceS3Uri (this folder plus provisioning_parameters.json,
# training_clusters.json and user_steps/) to some folder on every new node and runs this script as
# root. It configures the node for its
# role (controller, login or worker), step by step; each step is logged with a timestamp to
# $TC_LOG_FILE (default /var/log/provision/provisioning.log) and to stdout. The first failing step
# ends the run with one line `FAILED step '<name>' (exit N)` and the same exit status.
#
# Running it twice gives the same node. See README.md for the flow and for running it locally.
set -euo pipefail

TC_HOME="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
cd -- "$TC_HOME"

source lib/common.sh
source lib/cluster_config.sh
source lib/apt.sh
source lib/apt_hotfix.sh
source lib/fsx.sh
source lib/shared_home.sh
source lib/users.sh
source lib/imds.sh
source lib/node_access.sh
source lib/docker.sh
source lib/accounting.sh
source lib/pam_slurm_adopt.sh
source lib/enroot_pyxis.sh
source lib/slurm.sh
source lib/observability.sh
source lib/extra_steps.sh
source lib/steps.sh
source lib/eks_node.sh

main() {
    local step
    tc_install_traps
    log "on_create.sh started (scripts: ${TC_HOME}, root: ${TC_ROOT:-/}, log: ${TC_LOG_FILE})"

    # HyperPod on EKS: the node joins an EKS cluster; none of the Slurm steps below apply.
    if [[ $(tc_workload_manager) == eks ]]; then
        tc_eks_main
        return 0
    fi

    run_step preflight tc_preflight
    run_step detect-role tc_detect_role
    run_step apt-hotfix tc_apt_hotfix
    run_step apt-update tc_apt_update

    if [[ -n $TC_FSX_DNS_NAME ]]; then
        run_step lustre-client tc_ensure_lustre_client
        run_step mount-fsx tc_mount_fsx
        run_step admin-home tc_setup_admin_home
    else
        for step in lustre-client mount-fsx admin-home; do
            skip_step "$step" "no fsx_dns_name / fsx_mountname in provisioning_parameters.json"
        done
    fi

    # What keeps a team user in their lane is in force before any team account exists on the node: their
    # homes (with authorized_keys) may already be on FSx, so a login works the moment the account does.
    tc_team_steps

    # The controller: HyperPod's slurm.conf, then slurmdbd answering, then slurmctld with accounting.
    if [[ $TC_ROLE == controller ]]; then
        run_step slurm-config tc_setup_slurm_config
        if [[ $TC_ACCOUNTING_MODE == none ]]; then
            skip_step accounting "accounting mode is none"
        else
            run_step accounting tc_setup_accounting
        fi
    else
        skip_step slurm-config "runs on the controller only"
        skip_step accounting "runs on the controller only"
    fi
    run_step "slurm-${TC_ROLE}" tc_setup_slurm

    tc_closing_steps

    log "SUCCESS: node provisioned as ${TC_ROLE} (group ${TC_GROUP}) in ${SECONDS}s"
}

mkdir -p -- "$(dirname -- "$TC_LOG_FILE")"
# A pipeline rather than `exec > >(tee ...)`: tee has written everything when the script exits.
main "$@" 2>&1 | tee -a -- "$TC_LOG_FILE"
