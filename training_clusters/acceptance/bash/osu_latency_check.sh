# shellcheck shell=bash
# measure for osu_latency: the 8-byte latency of an OSU output (us).
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- gate: osu_latency at 8 bytes (the smallest size when 8 is missing), us ---
measure() {
    awk '
        { sub(/^\[[0-9,]+\]<std(out|err)>:/, "") }
        $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+(\.[0-9]+)?$/ {
            if ($1 == 8) { at8 = $2 + 0; has8 = 1 }
            if (!seen || $1 + 0 < smallest) { smallest = $1 + 0; first = $2 + 0 }
            seen = 1
        }
        END { if (has8) printf "%.2f\n", at8; else if (seen) printf "%.2f\n", first }
    ' "$1"
}
