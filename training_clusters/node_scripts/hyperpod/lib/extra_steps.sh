# shellcheck shell=bash
#
# Steps of your own, run after ours on the roles they name: training_clusters.json lists them as
# extra_steps [{"name", "script", "roles"}] (the CDK construct writes it from
# LifecycleOptions.extra_steps and uploads each script as user_steps/<name>.sh). Each runs as step
# user-<name> with the same log and failure contract as ours: its output goes to the log and to
# CloudWatch, and a non-zero exit ends the run with one line FAILED step 'user-<name>' (exit N).

# tc_run_extra_step SCRIPT: bash SCRIPT (relative to the lifecycle folder, the working directory),
# with this node's facts in its environment.
tc_run_extra_step() {
    local path="${TC_HOME}/$1" fsx_dir=""
    if tc_has_fsx; then
        fsx_dir=$TC_FSX_MOUNT_DIR
    fi
    log "running $1 (role ${TC_ROLE}, group ${TC_GROUP})"
    TC_ROLE=$TC_ROLE TC_GROUP=$TC_GROUP TC_PARTITION=$TC_PARTITION TC_NODE_IP=$TC_NODE_IP \
        TC_CONTROLLER_IPS=$TC_CONTROLLER_IPS TC_FSX_MOUNT_DIR=$fsx_dir TC_HOME=$TC_HOME TC_ROOT=$TC_ROOT \
        "$BASH" -- "$path" </dev/null
}
