# shellcheck shell=bash
# The gate of the DCGM diagnostics job: check_output FILE reads the DCGM[<node>] lines of dcgm_node.sh.
# Fails when a node reports a test as Fail, lacks dcgmi, has no host engine, shows no results, or is
# missing altogether. Reads TEST_LABEL, DCGM_LEVEL, EXPECTED_NODES and INSTALL_HINT from the settings.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- gate ---
# dcgmi diag's table rows are "| <test> | Pass |", "| <test> | Fail - GPU: 0 |" (DCGM 3) or a blank test
# cell and "GPU0: Fail" beneath the test (DCGM 4); Skip and Warn pass.
check_output() {
    local file=$1 verdicts
    verdicts=$(awk '
        match($0, /^DCGM\[[^]]*\] /) {
            node = substr($0, 6, RLENGTH - 7)
            line = substr($0, RLENGTH + 1)
            if (!(node in seen)) { seen[node] = 1; order[++nodes] = node }
            if (line ~ /^MISSING /) { missing[node] = 1; next }
            if (line ~ /^NO-HOSTENGINE /) { nohost[node] = 1; next }
            if (line ~ /^EXIT [0-9]+$/) { status[node] = substr(line, 6); next }
            if (line !~ /^\|/) next
            cells = split(line, cell, "|")
            if (cells < 4) next
            name = cell[2]; result = cell[3]
            gsub(/^[ \t]+|[ \t]+$/, "", name); gsub(/^[ \t]+|[ \t]+$/, "", result)
            if (name != "") test = name
            if (result ~ /^(Pass|Fail|Skip|Warn)/ || result ~ /^GPU ?[0-9]+: (Pass|Fail|Skip|Warn)/) rows[node]++
            if ((result ~ /^Fail/ || result ~ /^GPU ?[0-9]+: Fail/) && index(failed[node], "\047" test "\047") == 0)
                failed[node] = failed[node] (failed[node] == "" ? "" : ", ") "\047" test "\047"
        }
        END {
            for (i = 1; i <= nodes; i++) {
                n = order[i]
                if (missing[n]) print "FAIL", n, "dcgmi is not installed"
                else if (nohost[n]) print "FAIL", n, "the DCGM host engine (nv-hostengine) is not running and did not start"
                else if (failed[n] != "") print "FAIL", n, "test " failed[n] " reports Fail"
                else if (!(n in status)) print "FAIL", n, "dcgmi diag did not finish (no exit status: killed or timed out?)"
                else if (!rows[n]) print "FAIL", n, "no test results in dcgmi diag output (exit " status[n] ")"
                else if (status[n] != 0) print "FAIL", n, "dcgmi diag exited " status[n]
                else print "PASS", n, rows[n] " result row(s), none Fail"
            }
            print "NODES", nodes + 0
        }' "${file}")
    local word node detail failures=0 passes=0 reported=0
    while read -r word node detail; do
        case ${word} in
            FAIL)
                failures=$((failures + 1))
                printf 'RESULT %s: FAILED on node %s: dcgmi diag -r %s: %s.' "${TEST_LABEL}" "${node}" \
                    "${DCGM_LEVEL}" "${detail}"
                case ${detail} in
                    dcgmi\ is\ not*) printf ' %s\n' "${INSTALL_HINT}" ;;
                    the\ DCGM\ host*) printf ' Start it: sudo systemctl start nvidia-dcgm (or sudo nv-hostengine).\n' ;;
                    *) printf ' The full report is in %s.\n' "${file}" ;;
                esac
                ;;
            PASS) passes=$((passes + 1)) ;;
            NODES) reported=${node} ;;
        esac
    done <<<"${verdicts}"
    if ((reported < EXPECTED_NODES)); then
        printf 'RESULT %s: FAILED %s of %s node(s) reported DCGM results in %s\n' "${TEST_LABEL}" \
            "${reported}" "${EXPECTED_NODES}" "${file}"
        return 1
    fi
    ((failures == 0)) || return 1
    printf 'RESULT %s: PASS dcgmi diag -r %s on %s node(s): no test reports Fail\n' "${TEST_LABEL}" \
        "${DCGM_LEVEL}" "${passes}"
}
