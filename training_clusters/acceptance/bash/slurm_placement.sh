# shellcheck shell=bash
# placement for the Slurm NCCL scripts: after the verdict, each node of the job with its switches in Slurm's
# topology (`scontrol show topology`, top-down to its leaf) and whether all nodes shared the leaf, so a low
# bandwidth can be told apart from a scattered placement. Reads TEST_LABEL and TOPOLOGY_UNPLACED (the leaf our
# ParallelCluster step keeps for nodes EC2 has not placed). Never changes the verdict.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- placement: the switch path of every node of the job ---
# scontrol: on PATH in a login shell's job, else where ParallelCluster and HyperPod install it.
slurm_scontrol() {
    if command -v scontrol >/dev/null; then
        command -v scontrol
    elif [[ -x /opt/slurm/bin/scontrol ]]; then
        printf '%s\n' /opt/slurm/bin/scontrol
    fi
}

# "leaf SWITCH NODE" for each node of a leaf switch, "child SWITCH CHILD" for each child switch, from the
# lines of `scontrol show topology` (SwitchName=S Level=L LinkSpeed=N [Nodes=HOSTLIST] [Switches=HOSTLIST]).
topology_edges() {
    local scontrol=$1 line name level nodes switches member
    while read -r line; do
        [[ ${line} =~ SwitchName=([^ ]+) ]] || continue
        name=${BASH_REMATCH[1]} level="" nodes="" switches=""
        if [[ ${line} =~ Level=([0-9]+) ]]; then level=${BASH_REMATCH[1]}; fi
        if [[ ${line} =~ Nodes=([^ ]+) ]]; then nodes=${BASH_REMATCH[1]}; fi
        if [[ ${line} =~ Switches=([^ ]+) ]]; then switches=${BASH_REMATCH[1]}; fi
        if [[ ${level} == 0 && -n ${nodes} ]]; then
            while read -r member; do printf 'leaf %s %s\n' "${name}" "${member}"; done \
                < <("${scontrol}" show hostnames "${nodes}")
        fi
        if [[ -n ${switches} ]]; then
            while read -r member; do printf 'child %s %s\n' "${name}" "${member}"; done \
                < <("${scontrol}" show hostnames "${switches}")
        fi
    done
}

placement() {
    local scontrol topology
    local -a nodes
    scontrol="$(slurm_scontrol)"
    if [[ -z ${scontrol} ]]; then
        printf 'PLACEMENT %s: unknown, no scontrol on PATH or in /opt/slurm/bin\n' "${TEST_LABEL}"
        return 0
    fi
    mapfile -t nodes < <("${scontrol}" show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null || true)
    if ((${#nodes[@]} == 0)); then
        printf 'PLACEMENT %s: unknown, no SLURM_JOB_NODELIST (not run by Slurm)\n' "${TEST_LABEL}"
        return 0
    fi
    if ! topology="$("${scontrol}" show topology 2>&1)" || [[ ${topology} != *SwitchName=* ]]; then
        printf 'PLACEMENT %s: nodes %s; Slurm has no switch tree (scontrol show topology: %s)\n' "${TEST_LABEL}" \
            "${nodes[*]}" "${topology//$'\n'/ }"
        return 0
    fi
    { printf 'job %s\n' "${nodes[@]}"; topology_edges "${scontrol}" <<<"${topology}"; } |
        awk -v label="${TEST_LABEL}" -v unplaced="${TOPOLOGY_UNPLACED}" '
            $1 == "job" { order[++count] = $2 }
            $1 == "leaf" { leaf[$3] = $2 }
            $1 == "child" { parent[$3] = $2 }
            END {
                for (i = 1; i <= count; i++) {
                    node = order[i]
                    if (!(node in leaf)) {
                        printf "PLACEMENT %s: node %s: under no switch\n", label, node
                        orphans++
                        continue
                    }
                    path = leaf[node]
                    for (s = leaf[node]; s in parent; s = parent[s]) path = parent[s] " > " path
                    printf "PLACEMENT %s: node %s: %s\n", label, node, path
                    if (!(leaf[node] in seen)) { seen[leaf[node]] = 1; leaves++; names = names (leaves > 1 ? ", " : "") leaf[node] }
                }
                if (orphans)
                    printf "PLACEMENT %s: %d of %d nodes are under no switch of Slurm'"'"'s topology\n", label, orphans, count
                else if (leaves == 1 && names == unplaced)
                    printf "PLACEMENT %s: all %d nodes under %s: EC2 had not placed them when Slurm last read its topology\n", label, count, unplaced
                else if (leaves == 1)
                    printf "PLACEMENT %s: all %d nodes under one leaf switch (%s)\n", label, count, names
                else
                    printf "PLACEMENT %s: SCATTERED, %d nodes under %d leaf switches (%s): a low bandwidth may be the placement\n", label, count, leaves, names
            }
        '
}
