#!/bin/bash
# ParallelCluster custom action (OnNodeConfigured, every node): Pyxis and Enroot, shipped disabled since 3.11.
#
# Enables them the way ParallelCluster's tutorial does ("Running containerized jobs with Pyxis":
# https://docs.aws.amazon.com/parallelcluster/latest/ug/tutorials_11_running-containerized-jobs-with-pyxis.html),
# from the examples ParallelCluster installs under /opt/parallelcluster/examples, without the race of
# aws-parallelcluster issue #6459: /opt/slurm/etc is the head node's, shared with every other node, and nodes
# that edited files there at the same time left temporary files in plugstack.conf.d that broke every job. So
# - enroot's configuration and every folder enroot and Pyxis read from are the next custom action's,
#   training-clusters-enroot.sh (the one implementation HyperPod's lifecycle scripts use too): one folder per
#   user, made by root, none that every user may write (ParallelCluster's tutorial makes /run/enroot,
#   /var/enroot and /run/pyxis 1777, where one user can plant what another's containers run);
# - the head node alone writes the shared SPANK configuration, each file staged outside plugstack.conf.d and
#   renamed into place, and reconfigures Slurm when something changed (or when the last run's reconfigure failed).
# Slurm's commands are called by their full path: ParallelCluster runs custom actions with the PATH its user data
# exports, /usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin:/opt/aws/bin (github.com/aws/
# aws-parallelcluster, cli/src/pcluster/resources/head_node/user_data.sh), which lacks /opt/slurm/bin, and its
# cookbook calls `<install_dir>/bin/scontrol reconfigure`, install_dir /opt/slurm (github.com/aws/
# aws-parallelcluster-cookbook, cookbooks/aws-parallelcluster-slurm/recipes/update/update_head_node.rb).
# Running it again changes nothing. TC_ROOT (default: empty, the real root) prefixes every path, for tests.

set -euo pipefail

ROOT=${TC_ROOT:-}
EXAMPLES="${ROOT}/opt/parallelcluster/examples"
SLURM_ETC="${ROOT}/opt/slurm/etc"
SCONTROL=/opt/slurm/bin/scontrol
# On the head node's own disk: a reconfigure is owed (the SPANK files changed, Slurm has not loaded them yet).
PENDING="${ROOT}/var/lib/training-clusters/pyxis-reconfigure.pending"

log() { echo "pyxis.sh: $*"; }
die() {
    echo "pyxis.sh: error: $*" >&2
    exit 1
}

node_type() {
    local config="${ROOT}/etc/parallelcluster/cfnconfig" type=""
    if [[ -r $config ]]; then
        type="$(sed -n 's/^cfn_node_type=//p' "$config" | tr -d '"' | head -n 1)"
    fi
    echo "${type:-unknown}"
}

# Copy $1 to $2 (mode $3) through a temporary file in $4, renamed into place; only when the content differs.
place() {
    local source=$1 target=$2 mode=$3 staging=$4 staged
    [[ -f $source ]] || die "${source#"$ROOT"} is missing: this AMI has no ParallelCluster Pyxis examples (3.11+)"
    if [[ -f $target ]] && cmp -s "$source" "$target"; then
        return 1
    fi
    staged="$(mktemp -p "$staging")"
    cp "$source" "$staged"
    chmod "$mode" "$staged"
    mv -f "$staged" "$target"
    log "wrote ${target#"$ROOT"}"
}

main() {
    local type changed=0
    type="$(node_type)"
    log "node type ${type}"
    if [[ $type != HeadNode ]]; then
        log "the SPANK configuration is the head node's (shared ${SLURM_ETC#"$ROOT"}): left alone here"
        return 0
    fi
    mkdir -p "${SLURM_ETC}/plugstack.conf.d"
    if place "${EXAMPLES}/spank/plugstack.conf" "${SLURM_ETC}/plugstack.conf" 0644 "$SLURM_ETC"; then
        changed=1
    fi
    # staged in SLURM_ETC, not in plugstack.conf.d, whose every file Slurm loads
    if place "${EXAMPLES}/pyxis/pyxis.conf" "${SLURM_ETC}/plugstack.conf.d/pyxis.conf" 0644 "$SLURM_ETC"; then
        changed=1
    fi
    if ((changed)); then
        mkdir -p "${PENDING%/*}"
        touch "$PENDING"
    fi
    if [[ -e $PENDING ]]; then
        reconfigure
    fi
}

# `scontrol reconfigure` (slurmctld runs on the head node when OnNodeConfigured starts); its own output goes
# into the one error line.
reconfigure() {
    local output rc=0
    [[ -x ${ROOT}${SCONTROL} ]] ||
        die "no ${SCONTROL} (where ParallelCluster installs Slurm): cannot reconfigure Slurm"
    output="$("${ROOT}${SCONTROL}" reconfigure 2>&1)" || rc=$?
    if ((rc != 0)); then
        die "${SCONTROL} reconfigure failed (exit ${rc}): ${output//$'\n'/ } (the Pyxis SPANK configuration is in" \
            "place, but slurmctld has not loaded it)"
    fi
    rm -f "$PENDING"
    log "Slurm reconfigured: srun --container-image is available"
}

main "$@"
