# shellcheck shell=bash
# The first Debian archive URI of this machine's sources (one-line or deb822 format).
host_mirror() {
    local file
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f $file ]] || continue
        awk '
            /^[ \t]*#/ { next }
            $1 == "URIs:" { for (i = 2; i <= NF; i++) print $i }
            $1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { print $i; break } }
        ' "$file"
    done | grep -E '/debian/?$' | head -n 1
}
