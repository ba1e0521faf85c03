# shellcheck shell=bash
#
# The cluster user's home stays on the node's own disk. `ubuntu` (TC_CLUSTER_USER) has passwordless sudo and
# is admitted to every node, the controller included: a home or SSH key of its on FSx would be writable by
# root on any FSx client (FSx has no root squash on the Slurm flavors), and so would make root on one client
# root on every node. Nothing of ubuntu's goes to FSx; administrators reach each node through SSM (the stack's
# output names the command). The team's users keep their homes on FSx (lib/users.sh).
#
# A node whose ubuntu was moved to FSx by an earlier version of these scripts (home <fsx>/ubuntu, with a
# cluster-wide key pair) is brought back: the home is pointed at the local folder again, and the FSx folder is
# left in place, named in a warning (it holds the old private key; delete it once every node has run this).

tc_setup_admin_home() {
    local user=$TC_CLUSTER_USER home current
    home="/home/${user}"
    if ! id -u "$user" >/dev/null 2>&1; then
        log "user ${user} does not exist; creating it with home ${home} on this node's disk"
        useradd --create-home --home-dir "$home" --shell /bin/bash "$user"
        return 0
    fi
    current="$(getent passwd "$user" | cut -d: -f6)"
    if [[ -z $TC_FSX_MOUNT_DIR || ($current != "$TC_FSX_MOUNT_DIR" && $current != "${TC_FSX_MOUNT_DIR}"/*) ]]; then
        log "home of ${user} stays ${current} on this node's disk (nothing of ${user}'s is on FSx)"
        return 0
    fi
    if [[ -L ${TC_ROOT}${home} ]]; then
        tc_error "${home} is a symbolic link: refusing to make it ${user}'s home"
        return 1
    fi
    tc_mkdir "${TC_ROOT}${home}"
    chown "${user}:" "${TC_ROOT}${home}"
    chmod 750 "${TC_ROOT}${home}"
    usermod --home "$home" "$user"
    warn "home of ${user} was ${current} on FSx; it is ${home} on this node's disk now. ${current} is left in" \
        "place: it holds ${user}'s old SSH key pair, readable by root on every FSx client; delete it once every" \
        "node has run this"
}
