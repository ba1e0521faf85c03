#!/bin/bash
# A fake of the account and Slurm commands the ParallelCluster custom actions run, on a fake root ($TC_ROOT):
# getent, id, groupadd, useradd and usermod read and write $TC_ROOT/etc/{passwd,group}; every call is recorded
# in $TC_ROOT/calls.log, prefixed with the user it ran as ("[alice] mkdir ...") when runuser ran it; chown
# only checks its operands exist (the sandbox cannot change owners); the file tools that write (chmod, cp,
# mkdir, mv, tee) are recorded and then run for real, from $TC_TOOLS. scontrol (linked only into the fake root's
# /opt/slurm/bin, where ParallelCluster installs it) answers as with slurmctld down while $TC_ROOT/scontrol.fails
# exists. Failure switches, each naming the user or group whose call fails (as when another tool holds the lock
# on /etc/passwd or /etc/group, or the user runs a process): STUB_GROUPADD_FAIL=GROUP, STUB_USERADD_FAIL=USER,
# STUB_USERMOD_FAIL=USER, STUB_SSH_KEYGEN_FAIL=USER (the key pair commented USER@...).
set -euo pipefail
tool=$(basename "$0")
echo "${TC_AS_USER:+[${TC_AS_USER}] }${tool} $*" >>"${TC_ROOT}/calls.log"
# fail_for SWITCH NAME EXIT MESSAGE: exit with EXIT and MESSAGE when the switch names NAME.
fail_for() {
    if [[ -n ${1} && $1 == "$2" ]]; then
        echo "$4" >&2
        exit "$3"
    fi
}
passwd="${TC_ROOT}/etc/passwd"
group="${TC_ROOT}/etc/group"
case $tool in
    getent)
        db=$1 key=$2 file=$passwd
        [[ $db == group ]] && file=$group
        awk -F: -v k="$key" '$1 == k || $3 == k { print; found = 1; exit } END { exit !found }' "$file"
        ;;
    groupadd)
        [[ $1 == --gid ]] || exit 2
        fail_for "${STUB_GROUPADD_FAIL:-}" "$3" 10 "groupadd: cannot lock /etc/group; try again later."
        echo "$3:x:$2:" >>"$group"
        ;;
    useradd)
        uid="" gid="" home=""
        while (($# > 1)); do
            case $1 in
                --uid) uid=$2; shift 2 ;;
                --gid) gid=$2; shift 2 ;;
                --home-dir) home=$2; shift 2 ;;
                --shell | --comment) shift 2 ;;
                --no-create-home) shift ;;
                *) exit 2 ;;
            esac
        done
        fail_for "${STUB_USERADD_FAIL:-}" "$1" 1 "useradd: cannot lock /etc/passwd; try again later."
        echo "$1:x:${uid}:${gid}::${home}:/bin/bash" >>"$passwd"
        ;;
    usermod)
        [[ $1 == --append && $2 == --groups ]] || exit 2
        fail_for "${STUB_USERMOD_FAIL:-}" "$4" 8 "usermod: user $4 is currently used by process 2411"
        awk -F: -v OFS=: -v g="$3" -v u="$4" '$1 == g { $4 = ($4 == "" ? u : $4 "," u) } { print }' \
            "$group" >"${group}.new"
        "${TC_TOOLS}/mv" "${group}.new" "$group"
        ;;
    ssh-keygen)
        file="" comment=""
        while (($#)); do
            if [[ $1 == -f ]]; then file=$2; fi
            if [[ $1 == -C ]]; then comment=$2; fi
            shift
        done
        fail_for "${STUB_SSH_KEYGEN_FAIL:-}" "${comment%%@*}" 1 "Saving key \"${file}\" failed: No space left on device"
        echo "PRIVATE" >"$file"
        echo "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIClusterKey generated" >"${file}.pub"
        ;;
    chown)
        shift
        for path in "$@"; do [[ $path == -- || -e $path ]] || exit 1; done
        ;;
    id)
        # id -u|-g [--] NAME: from the fake root's /etc/passwd
        field=3
        [[ $1 == -g ]] && field=4
        awk -F: -v k="${*: -1}" -v f="$field" '$1 == k { print $f; found = 1; exit } END { exit !found }' \
            "$passwd" || { echo "id: '${*: -1}': no such user" >&2; exit 1; }
        ;;
    runuser)
        # runuser -u NAME -- COMMAND...: the sandbox cannot switch users, so COMMAND runs as the test, marked
        # with TC_AS_USER=NAME, once the stub has refused what the kernel would refuse NAME: an operand that
        # resolves, through links, to a path in the fake root outside NAME's home (but /etc/skel, world-readable).
        [[ $1 == -u && $3 == -- ]] || exit 2
        user=$2
        shift 3
        home=$(awk -F: -v u="$user" '$1 == u { print $6 }' "$passwd")
        [[ -n $home ]] || { echo "runuser: user ${user} does not exist" >&2; exit 1; }
        root=$(realpath "$TC_ROOT")
        home="${root}${home}"
        for operand in "$@"; do
            [[ $operand == /* ]] || continue
            path=$(realpath -m -- "$operand")
            case $path in
                "$home" | "$home"/* | "${root}/etc/skel" | "${root}/etc/skel"/*) ;;
                "$root"/*)
                    echo "runuser (stub): ${operand}: Permission denied for ${user}" >&2
                    exit 1
                    ;;
            esac
        done
        TC_AS_USER=$user exec "$@"
        ;;
    chmod | cp | mkdir | mv | tee) exec "${TC_TOOLS}/${tool}" "$@" ;;
    scontrol)
        if [[ -e ${TC_ROOT}/scontrol.fails ]]; then
            echo "slurm_reconfigure error: Unable to contact slurm controller (connect failure)" >&2
            exit 1
        fi
        ;;
    *) exit 127 ;;
esac
