#!/bin/bash
# ParallelCluster custom action (head node only): Slurm's topology.conf (TopologyPlugin=topology/tree, set by the
# cluster's CustomSlurmSettings) from EC2's DescribeInstanceTopology, kept current as nodes come and go.
#
#   topology.sh MODULE_URL REGION initial --conf FILE --nodes EXPR...      (OnNodeStart: before slurmctld starts)
#   topology.sh MODULE_URL REGION install --conf FILE --cluster-name NAME --partition P...   (OnNodeConfigured)
#
# MODULE_URL is topology.py in the scripts bucket (s3://BUCKET/KEY; the head node may read it): the program that
# does the work, run by the Python of ParallelCluster's node virtual environment, the one with boto3
# (/opt/parallelcluster/pyenv/versions/<python>/envs/node_virtualenv: the cookbook's
# default['cluster']['node_virtualenv_path'], github.com/aws/aws-parallelcluster-cookbook, where
# aws-parallelcluster-node and its boto3 are installed), copied
# to /opt/training-clusters/topology.py. `initial` writes every node unplaced when no file exists (slurmctld reads
# the file as it starts); `install` adds a systemd timer that refreshes the file every 30 s (dynamic nodes come
# and go through ParallelCluster's own ResumeProgram and SuspendProgram, which no custom setting may replace) and
# refreshes it once. Running it again changes nothing. TC_ROOT (default: empty, the real root) prefixes every path,
# for tests.

set -euo pipefail

ROOT=${TC_ROOT:-}
INSTALLED=/opt/training-clusters/topology.py

die() {
    echo "topology.sh: error: $*" >&2
    exit 1
}

# The node virtual environment's Python (ParallelCluster's AMI has one, under its Python version's folder).
node_python() {
    local found="" candidate
    for candidate in "${ROOT}"/opt/parallelcluster/pyenv/versions/*/envs/node_virtualenv/bin/python; do
        if [[ -z $found && -x $candidate ]]; then
            found=$candidate
        fi
    done
    [[ -n $found ]] ||
        die "no /opt/parallelcluster/pyenv/versions/*/envs/node_virtualenv/bin/python: not a ParallelCluster AMI?"
    echo "$found"
}

main() {
    (($# >= 3)) || die "usage: topology.sh MODULE_URL REGION initial|install ARGS..."
    local url=$1 region=$2 command=$3 python bucket key
    shift 3
    [[ $url =~ ^s3://([^/]+)/(.+)$ ]] || die "MODULE_URL must be s3://BUCKET/KEY, got '${url}'"
    bucket=${BASH_REMATCH[1]} key=${BASH_REMATCH[2]}
    python="$(node_python)"
    mkdir -p "${ROOT}${INSTALLED%/*}"
    "$python" -c 'import sys, boto3; boto3.client("s3", region_name=sys.argv[1]).download_file(*sys.argv[2:])' \
        "$region" "$bucket" "$key" "${ROOT}${INSTALLED}" ||
        die "could not download ${url} (the head node reads it with its S3Access)"
    chmod 0644 "${ROOT}${INSTALLED}"
    case $command in
        initial) exec "$python" "${ROOT}${INSTALLED}" initial "$@" ;;
        install)
            exec "$python" "${ROOT}${INSTALLED}" install --region "$region" --python "${python#"$ROOT"}" \
                --module "$INSTALLED" "$@"
            ;;
        *) die "the command must be initial or install, got '${command}'" ;;
    esac
}

main "$@"
