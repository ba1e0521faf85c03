#!/usr/bin/env bash
# Build (once) the Debian root the real-Slurm integration tests boot nodes from:
#   tests/integration/build_slurm_root.sh ROOT
# Debian 13 (trixie): Slurm 24.11 (slurmctld, slurmd, sackd, slurmdbd, client commands), munge, MariaDB,
# systemd, python3, sshd, openssl and the tools the lifecycle scripts call. Needs root and network once. The packages'
# own Slurm units are removed and every daemon but munge is disabled: each test node gets the layout of
# HyperPod's Slurm AMI on top (tests/integration/slurm_bed.py). The root is rebuilt when the package list
# below changes (its hash is kept in ROOT/.tc-slurm-root-ready). The mirror is this machine's own Debian
# mirror (DEBIAN_MIRROR overrides it), as in build_root.sh.
set -euo pipefail

root=${1:?usage: build_slurm_root.sh ROOT}
packages=systemd,systemd-sysv,dbus,iproute2,iptables,curl,procps,python3,openssh-client,openssh-server,openssl,slurmctld,slurmd,slurmdbd,sackd,slurm-client,munge,mariadb-server,mariadb-client
stamp="trixie ${packages}"

if [[ -f "${root}/.tc-slurm-root-ready" && $(<"${root}/.tc-slurm-root-ready") == "$stamp" ]]; then
    echo "slurm root ready: ${root}"
    exit 0
fi
if ((EUID != 0)); then
    echo "build_slurm_root.sh: building ${root} needs root (debootstrap)" >&2
    exit 1
fi
missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
if ((${#missing[@]} > 0)); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=tests/integration/host_mirror.sh
source "${here}/host_mirror.sh"
mirror=${DEBIAN_MIRROR:-$(host_mirror)}
mirror=${mirror:-http://deb.debian.org/debian}

rm -rf -- "$root"
mkdir -p -- "$(dirname -- "$root")"
echo "debootstrap --variant=minbase --include=${packages} trixie ${root} ${mirror}"
debootstrap --variant=minbase --include="$packages" trixie "$root" "$mirror"
# HyperPod's AMI builds Slurm from source: no packaged units (nor SysV scripts, from which systemd would
# generate units). The bed writes the AMI's own.
rm -f -- "$root"/usr/lib/systemd/system/{slurmctld,slurmd,slurmdbd,sackd}.service \
    "$root"/etc/systemd/system/multi-user.target.wants/{slurmctld,slurmd,slurmdbd,sackd}.service \
    "$root"/etc/init.d/{slurmctld,slurmd,slurmdbd,sackd}
find "$root"/etc/rc?.d \( -name '*slurm*' -o -name '*sackd*' \) -delete
systemctl --root="$root" disable mariadb.service >/dev/null 2>&1 || true
systemctl --root="$root" enable munge.service >/dev/null 2>&1
# No console login, no network set-up from inside: the test gives every node its address.
systemctl --root="$root" mask getty@.service console-getty.service systemd-networkd.service \
    systemd-resolved.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer \
    >/dev/null 2>&1 || true
rm -f -- "${root}"/etc/apt/sources.list "${root}"/etc/apt/sources.list.d/*
rm -rf -- "${root}"/var/lib/apt/lists/* "${root}"/var/cache/apt/archives/*.deb
mkdir -p -- "${root}/var/lib/apt/lists/partial"
printf '%s' "$stamp" >"${root}/.tc-slurm-root-ready"
echo "slurm root ready: ${root}"
