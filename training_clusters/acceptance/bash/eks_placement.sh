# shellcheck shell=bash
# explain for the EKS NCCL gates: after the verdict, each node the test ran on with its EC2 network nodes
# (topology.k8s.aws/network-node-layer-1..3, farthest first) and whether all nodes shared the last one, so a
# low bandwidth can be told apart from a scattered placement. Reads TEST_LABEL, NODE_LINE_MARK and
# NETWORK_LEVELS (the node labels, space-separated). Never changes the verdict.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- placement: the network-node path of every node of the test ---
# The launcher's log names each node ("NODE_LINE_MARK POD NODE", one rank per node before the test); a pod
# cannot see its node's labels, so they are read here with the caller's kubectl, the one that read the log.
nodes_of() {
    awk -v mark="${NODE_LINE_MARK}" '
        { sub(/^\[[0-9,]+\]<std(out|err)>:/, "") }
        $1 == mark && NF == 3 && !($3 in seen) { seen[$3] = 1; print $3 }
    ' "$1"
}

explain() {
    local -a nodes levels
    local columns="NODE:.metadata.name" level table
    mapfile -t nodes < <(nodes_of "$1")
    if ((${#nodes[@]} == 0)); then
        printf "PLACEMENT %s: unknown, the log names no node (no '%s' line)\n" "${TEST_LABEL}" "${NODE_LINE_MARK}"
        return 0
    fi
    if ! command -v kubectl >/dev/null; then
        printf 'PLACEMENT %s: nodes %s; network nodes not read (no kubectl on PATH)\n' "${TEST_LABEL}" "${nodes[*]}"
        return 0
    fi
    read -r -a levels <<<"${NETWORK_LEVELS}"
    for level in "${levels[@]}"; do columns+=",${level##*/}:.metadata.labels.${level//./\\.}"; done
    if ! table="$(kubectl get nodes "${nodes[@]}" --no-headers -o "custom-columns=${columns}" 2>&1)"; then
        printf 'PLACEMENT %s: nodes %s; network nodes not read (kubectl get nodes: %s)\n' "${TEST_LABEL}" \
            "${nodes[*]}" "${table//$'\n'/ }"
        return 0
    fi
    awk -v label="${TEST_LABEL}" '
        NF >= 2 {
            path = $2
            for (i = 3; i <= NF; i++) path = path " > " $i
            printf "PLACEMENT %s: node %s: %s\n", label, $1, path
            nodes++
            if ($NF == "<none>") missing++
            else if (!($NF in last)) { last[$NF] = 1; shared++; names = names (shared > 1 ? ", " : "") $NF }
        }
        END {
            if (missing)
                printf "PLACEMENT %s: %d of %d nodes carry no network-node labels (EC2 instance topology does not describe their type)\n", label, missing, nodes
            else if (shared == 1)
                printf "PLACEMENT %s: all %d nodes under one last-layer network node (%s)\n", label, nodes, names
            else
                printf "PLACEMENT %s: SCATTERED, %d nodes under %d last-layer network nodes (%s): a low bandwidth may be the placement\n", label, nodes, shared, names
        }
    ' <<<"${table}"
}
