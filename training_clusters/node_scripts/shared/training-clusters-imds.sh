#!/usr/bin/env bash
#
# training-clusters-imds: only root (and the users named with --allow) reach the instance metadata service
# (IMDS) on a node that team users log in to or run jobs on.
#
#   training-clusters-imds [--allow USER[,USER...]]             apply the rules now
#   training-clusters-imds --install [--allow USER[,USER...]]   install as /usr/local/sbin/training-clusters-imds
#                                                               with a unit that applies them at every boot
#
# HyperPod's on_create.sh (step imds-guard) installs it on every node of a cluster with users; ParallelCluster's
# compute nodes get it as their first custom action (OnNodeStart, before users.sh makes any team account at
# OnNodeConfigured) with --allow pcluster-admin, the user
# ParallelCluster's computemgtd runs as (its head and login nodes have ParallelCluster's own lockdown,
# HeadNode.Imds.Secured).
#
# IMDS hands out the credentials of the node's instance role to any process that asks. On a node with a
# team's users that role is the cluster's, not theirs, so the owner-matched rules below (netfilter's
# "owner" match on locally generated packets, the way ParallelCluster's cookbook secures its head node:
# cookbooks/aws-parallelcluster-environment/files/imds/imds-access.sh) let root's packets to IMDS through
# and reject everyone else's, for IPv4 (169.254.169.254) and, where the node has IPv6 netfilter, IPv6
# (fd00:ec2::254). Root's daemons (HyperPod's agents, the SSM agent, the AWS CLI of these scripts) keep
# their access. The rules live in a chain of their own, rebuilt on every run, so running it again
# changes nothing. TC_ROOT (default: the real root) prefixes the paths --install writes, for tests.
set -euo pipefail

CHAIN="TC-IMDS"
COMMAND="/usr/local/sbin/training-clusters-imds"
UNIT="training-clusters-imds.service"

say() { printf 'training-clusters-imds: %s\n' "$*"; }
die() {
    say "error: $*" >&2
    exit 2
}

# guard IPTABLES ADDRESS UID...: the chain (flushed, refilled) and one jump to it from OUTPUT.
guard() {
    local iptables=$1 address=$2 uid
    shift 2
    "$iptables" -w -N "$CHAIN" 2>/dev/null || "$iptables" -w -F "$CHAIN"
    for uid in 0 "$@"; do
        "$iptables" -w -A "$CHAIN" -m owner --uid-owner "$uid" -j RETURN
    done
    "$iptables" -w -A "$CHAIN" -p tcp -j REJECT --reject-with tcp-reset
    "$iptables" -w -A "$CHAIN" -j REJECT
    if ! "$iptables" -w -C OUTPUT -d "$address" -j "$CHAIN" 2>/dev/null; then
        "$iptables" -w -I OUTPUT 1 -d "$address" -j "$CHAIN"
    fi
    if (($#)); then
        say "${iptables}: only uids 0 $* reach ${address}"
    else
        say "${iptables}: only root reaches ${address}"
    fi
}

# install ALLOW: this script as COMMAND and a oneshot unit running it before anyone logs in.
install_guard() {
    local allow=$1 root=${TC_ROOT:-} exec_start=$COMMAND
    [[ -z $allow ]] || exec_start+=" --allow ${allow}"
    mkdir -p -- "${root}${COMMAND%/*}" "${root}/etc/systemd/system"
    cp -- "${BASH_SOURCE[0]}" "${root}${COMMAND}"
    chmod 0755 -- "${root}${COMMAND}"
    cat >"${root}/etc/systemd/system/${UNIT}" <<EOF
# Written by training-clusters-imds --install (cdk-training-clusters).
[Unit]
Description=Instance metadata (IMDS) for root only: team users never get the node's role credentials
DefaultDependencies=no
After=network-pre.target
Before=network-online.target systemd-user-sessions.service ssh.service sshd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=${exec_start}

[Install]
WantedBy=multi-user.target
EOF
    systemctl daemon-reload
    systemctl enable "$UNIT"
    # A oneshot unit's start fails when its command does, and the caller with it.
    systemctl restart "$UNIT"
    say "installed ${COMMAND} and ${UNIT} (applied at every boot)"
}

main() {
    local install="" allow="" name uid
    local -a uids=()
    while (($#)); do
        case $1 in
            --install) install=1; shift ;;
            --allow) allow=${2:?--allow needs USER[,USER...]}; shift 2 ;;
            *) die "unknown argument '$1' (expected --install or --allow USER[,USER...])" ;;
        esac
    done
    if [[ -n $install ]]; then
        install_guard "$allow"
        return
    fi
    if [[ -n $allow ]]; then
        IFS=, read -ra names <<<"$allow"
        for name in "${names[@]}"; do
            uid="$(id -u -- "$name" 2>/dev/null)" || die "--allow names '${name}', who is no user on this node"
            uids+=("$uid")
        done
    fi
    guard iptables 169.254.169.254/32 "${uids[@]}"
    if command -v ip6tables >/dev/null 2>&1 && ip6tables -w -S OUTPUT >/dev/null 2>&1; then
        guard ip6tables fd00:ec2::254/128 "${uids[@]}"
    else
        say "no IPv6 netfilter on this node: the IPv6 address of IMDS is left as it is"
    fi
}

main "$@"
