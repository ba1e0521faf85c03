# shellcheck shell=bash
# measure for osu_bw: the peak bandwidth of an OSU output (MB/s).
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- gate: the highest osu_bw figure (second column of the data lines, MB/s) ---
measure() {
    awk '
        { sub(/^\[[0-9,]+\]<std(out|err)>:/, "") }
        $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+(\.[0-9]+)?$/ {
            if (!seen || $2 + 0 > peak) peak = $2 + 0
            seen = 1
        }
        END { if (seen) printf "%.2f\n", peak }
    ' "$1"
}
