#!/usr/bin/env bash
#
# training-clusters-imds: only root reaches the instance metadata service (IMDS) on a HyperPod node
# that team users log in to. Installed as /usr/local/sbin/training-clusters-imds by on_create.sh (step
# imds-guard) and run at every boot by training-clusters-imds.service, before users can log in.
#
# IMDS hands out the credentials of the node's instance role to any process that asks. On a node with a
# team's users that role is the cluster's, not theirs, so the owner-matched rules below (netfilter's
# "owner" match on locally generated packets, the way ParallelCluster's cookbook secures its head node:
# cookbooks/aws-parallelcluster-environment/files/imds/imds-access.sh) let root's packets to IMDS through
# and reject everyone else's, for IPv4 (169.254.169.254) and, where the node has IPv6 netfilter, IPv6
# (fd00:ec2::254). Root's daemons (HyperPod's agents, the SSM agent, the AWS CLI of these scripts) keep
# their access. The rules live in a chain of their own, rebuilt on every run, so running it again
# changes nothing.
set -euo pipefail

CHAIN="TC-IMDS"

say() { printf 'training-clusters-imds: %s\n' "$*"; }

# guard IPTABLES ADDRESS: the chain (flushed, refilled) and one jump to it from OUTPUT.
guard() {
    local iptables=$1 address=$2
    "$iptables" -w -N "$CHAIN" 2>/dev/null || "$iptables" -w -F "$CHAIN"
    "$iptables" -w -A "$CHAIN" -m owner --uid-owner 0 -j RETURN
    "$iptables" -w -A "$CHAIN" -p tcp -j REJECT --reject-with tcp-reset
    "$iptables" -w -A "$CHAIN" -j REJECT
    if ! "$iptables" -w -C OUTPUT -d "$address" -j "$CHAIN" 2>/dev/null; then
        "$iptables" -w -I OUTPUT 1 -d "$address" -j "$CHAIN"
    fi
    say "${iptables}: only root reaches ${address}"
}

guard iptables 169.254.169.254/32
if command -v ip6tables >/dev/null 2>&1 && ip6tables -w -S OUTPUT >/dev/null 2>&1; then
    guard ip6tables fd00:ec2::254/128
else
    say "no IPv6 netfilter on this node: the IPv6 address of IMDS is left as it is"
fi
