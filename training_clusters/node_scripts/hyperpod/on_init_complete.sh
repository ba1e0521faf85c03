#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
#
# SageMaker HyperPod OnInitComplete entry point of the cdk-training-clusters lifecycle scripts, for
# API-driven Slurm (each instance group's SlurmConfig; no provisioning_parameters.json).
#
# HyperPod runs it as root on every new node after its own set-up ("Extended mode": the
# AWS::SageMaker::Cluster ClusterLifeCycleConfig), from the folder it downloaded
# LifeCycleConfig.SourceS3Uri to (this folder plus training_clusters.json and user_steps/). By then
# HyperPod has written slurm.conf's node and partition lines (and topology), started the node's Slurm
# daemon, set up accounting and mounted FSx at the group's FsxLustreConfig.MountPath
# ("SageMaker HyperPod Slurm configuration", sagemaker-hyperpod-ref). What is left is what AWS's
# migration guide keeps in lifecycle scripts, "user creation, package installation, and environment
# configuration": the team's users, the IMDS guard and node access, packages (Enroot/Pyxis, Docker),
# our slurm.conf keys HyperPod leaves alone, observability and your steps. Same log, step runner and
# FAILED line as on_create.sh; running it twice gives the same node.
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
source lib/pam_slurm_adopt.sh
source lib/enroot_pyxis.sh
source lib/slurm.sh
source lib/observability.sh
source lib/extra_steps.sh
source lib/steps.sh

main() {
    tc_install_traps
    log "on_init_complete.sh started (scripts: ${TC_HOME}, root: ${TC_ROOT:-/}, log: ${TC_LOG_FILE})"

    run_step preflight tc_preflight_api
    run_step detect-role tc_detect_role
    run_step apt-hotfix tc_apt_hotfix
    run_step apt-update tc_apt_update

    # HyperPod mounted FSx (FsxLustreConfig); as in on_create.sh, the cluster user's home stays on the
    # node's disk (lib/shared_home.sh), the team's homes go on FSx (step users).
    if tc_has_fsx; then
        run_step fsx-mounted tc_wait_writable "${TC_ROOT}${TC_FSX_MOUNT_DIR}"
        run_step admin-home tc_setup_admin_home
    else
        skip_step fsx-mounted "no fsx_mount_dir in training_clusters.json: the cluster has no FSx"
        skip_step admin-home "no FSx"
    fi

    # As in on_create.sh: what keeps a team user in their lane is in force before their account exists.
    tc_team_steps

    # HyperPod runs Slurm and its accounting; the controller keeps our keys in slurm.conf.
    if [[ $TC_ROLE == controller ]]; then
        run_step slurm-keys tc_setup_slurm_keys_api
    else
        skip_step slurm-keys "runs on the controller only"
    fi
    run_step slurm-ready tc_check_slurm_api

    tc_closing_steps

    log "SUCCESS: node configured as ${TC_ROLE} (group ${TC_GROUP}) in ${SECONDS}s"
}

mkdir -p -- "$(dirname -- "$TC_LOG_FILE")"
main "$@" 2>&1 | tee -a -- "$TC_LOG_FILE"
