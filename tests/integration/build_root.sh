#!/usr/bin/env bash
# Build (once) the minimal Debian root the real-apt integration tests chroot into:
#   tests/integration/build_root.sh ROOT
# Needs root and network. Installs debootstrap and apt-utils (apt-ftparchive) with apt-get when
# missing. The mirror is the first Debian URI in this machine's own apt sources (override with
# DEBIAN_MIRROR); the suite is bookworm (override with DEBIAN_SUITE). A finished root is marked by
# ROOT/.tc-root-ready and reused as it is.
set -euo pipefail

root=${1:?usage: build_root.sh ROOT}
suite=${DEBIAN_SUITE:-bookworm}

if [[ -f "${root}/.tc-root-ready" ]]; then
    echo "debian root ready: ${root}"
    exit 0
fi
if ((EUID != 0)); then
    echo "build_root.sh: building ${root} needs root (debootstrap, chroot)" >&2
    exit 1
fi

missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v apt-ftparchive >/dev/null || missing+=(apt-utils)
command -v unshare >/dev/null || missing+=(util-linux)
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
echo "debootstrap --variant=minbase ${suite} ${root} ${mirror}"
debootstrap --variant=minbase "$suite" "$root" "$mirror"
# The tests bring their own sources; the root never reaches a network.
rm -f -- "${root}"/etc/apt/sources.list "${root}"/etc/apt/sources.list.d/*
rm -rf -- "${root}"/var/lib/apt/lists/*
mkdir -p -- "${root}/var/lib/apt/lists/partial"
touch -- "${root}/.tc-root-ready"
echo "debian root ready: ${root}"
