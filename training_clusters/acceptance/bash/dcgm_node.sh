# shellcheck shell=bash
# dcgm_node LEVEL TIMEOUT_SECONDS: run 'dcgmi diag -r LEVEL' on this node (one Slurm task, or one pod).
# Every line it prints starts with DCGM[<node>] so the gate can tell nodes apart in one merged output:
# MISSING (no dcgmi), NO-HOSTENGINE (host engine not reachable), dcgmi's own lines, then EXIT <status>.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- one node's diagnostics ---
dcgm_node() {
    local level=$1 limit=$2 node status=0 output line attempt
    node=${NODE_NAME:-$(hostname -s)}
    if ! command -v dcgmi >/dev/null 2>&1; then
        printf 'DCGM[%s] MISSING dcgmi is not on PATH\n' "${node}"
        return 127
    fi
    if ! timeout 30 dcgmi discovery -l >/dev/null 2>&1; then
        # The host engine is a systemd service on the DLAMI and HyperPod AMI (nvidia-dcgm); in the DCGM
        # container nothing starts it. Try the service, then the daemon itself, each bounded.
        timeout 30 sudo -n systemctl start nvidia-dcgm >/dev/null 2>&1 ||
            timeout 30 nv-hostengine >/dev/null 2>&1 ||
            timeout 30 sudo -n nv-hostengine >/dev/null 2>&1 || true
        for attempt in 1 2 3 4 5 6 7 8 9 10; do
            if timeout 30 dcgmi discovery -l >/dev/null 2>&1; then break; fi
            if [[ ${attempt} == 10 ]]; then
                printf 'DCGM[%s] NO-HOSTENGINE dcgmi cannot reach nv-hostengine, which did not start\n' "${node}"
                return 3
            fi
            sleep 3
        done
    fi
    output=$(timeout "${limit}" dcgmi diag -r "${level}" 2>&1) || status=$?
    while IFS= read -r line; do
        printf 'DCGM[%s] %s\n' "${node}" "${line}"
    done <<<"${output}"
    printf 'DCGM[%s] EXIT %s\n' "${node}" "${status}"
    return "${status}"
}
