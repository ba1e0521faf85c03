#!/usr/bin/env bash
# The apt part of on_create.sh, for the real-apt integration tests: the same libraries, the same
# step runner, the same two steps (apt-hotfix, apt-update), then one install from the local
# repository to show apt works afterwards. Runs inside the Debian root (chroot), TC_ROOT empty.
# Usage: apt_steps.sh [PACKAGE]
set -euo pipefail
cd /opt/tc/lifecycle
# shellcheck source=/dev/null
source lib/common.sh
# shellcheck source=/dev/null
source lib/apt.sh
# shellcheck source=/dev/null
source lib/apt_hotfix.sh

main() {
    tc_install_traps
    run_step apt-hotfix tc_apt_hotfix
    run_step apt-update tc_apt_update
    if [[ -n ${1:-} ]]; then
        run_step apt-install apt_get install -y "$1"
    fi
    log "SUCCESS: apt steps done in ${SECONDS}s"
}

main "$@" 2>&1
