# shellcheck shell=bash disable=SC2034  # settings used by the other files on_create.sh sources
#
# Shared helpers for the HyperPod lifecycle scripts: settings, logging, the step runner and
# idempotent file edits. Sourced by on_create.sh; never run on its own.
#
# Every path the scripts touch is "${TC_ROOT}<path as seen on the node>". TC_ROOT is empty on a
# real node, so paths are the usual /etc/fstab, /opt/slurm/etc ...; the tests point it at a fake
# root in a temporary folder. Paths written INTO files (fstab, slurm.conf, unit files) or handed to
# tools that store them (usermod -d) never carry TC_ROOT: they describe the node.

# ---------------------------------------------------------------------------------------------------
# Settings (environment overrides; the defaults are what a real node uses)
# ---------------------------------------------------------------------------------------------------
TC_ROOT="${TC_ROOT:-}"
TC_ROOT="${TC_ROOT%/}"                       # "/" and "" both mean the real root
TC_PYTHON="${TC_PYTHON:-python3}"            # python3 ships on HyperPod AMIs; used to read JSON only
TC_LOG_FILE="${TC_LOG_FILE:-${TC_ROOT}/var/log/provision/provisioning.log}"
TC_STATE_DIR="${TC_STATE_DIR:-${TC_ROOT}/var/lib/training-clusters}"
TC_BACKUP_DIR="${TC_BACKUP_DIR:-${TC_ROOT}/var/backups/training-clusters}"
TC_RESOURCE_CONFIG="${SAGEMAKER_RESOURCE_CONFIG_PATH:-${TC_ROOT}/opt/ml/config/resource_config.json}"
TC_SLURM_ETC="${TC_ROOT}/opt/slurm/etc"
TC_CLUSTER_USER="${TC_CLUSTER_USER:-ubuntu}"

# apt wrapper: attempts, first back-off (doubles up to the max), dpkg lock wait, all in seconds.
TC_APT_ATTEMPTS="${TC_APT_ATTEMPTS:-5}"
TC_APT_RETRY_SLEEP="${TC_APT_RETRY_SLEEP:-10}"
TC_APT_RETRY_MAX_SLEEP="${TC_APT_RETRY_MAX_SLEEP:-60}"
TC_APT_LOCK_TIMEOUT="${TC_APT_LOCK_TIMEOUT:-300}"
# FSx mount: mount attempts, then checks that the mount point is writable; sleep between tries.
TC_MOUNT_ATTEMPTS="${TC_MOUNT_ATTEMPTS:-5}"
TC_MOUNT_WAIT_ATTEMPTS="${TC_MOUNT_WAIT_ATTEMPTS:-30}"
TC_MOUNT_WAIT_SLEEP="${TC_MOUNT_WAIT_SLEEP:-5}"
# Controller: how long to wait for HyperPod's agent to write the cluster's slurm.conf.
TC_SLURM_CONF_WAIT_ATTEMPTS="${TC_SLURM_CONF_WAIT_ATTEMPTS:-60}"
TC_SLURM_CONF_WAIT_SLEEP="${TC_SLURM_CONF_WAIT_SLEEP:-5}"
# Every role: how long a started Slurm daemon gets until slurmctld answers `scontrol ping` (workers
# wait for the controller, whose own lifecycle script may still be running).
TC_SLURM_START_WAIT_ATTEMPTS="${TC_SLURM_START_WAIT_ATTEMPTS:-60}"
TC_SLURM_START_WAIT_SLEEP="${TC_SLURM_START_WAIT_SLEEP:-10}"
# Workers: how long to wait for dlami-nvme.service to mount the local NVMe disks.
TC_NVME_WAIT_ATTEMPTS="${TC_NVME_WAIT_ATTEMPTS:-24}"
TC_NVME_WAIT_SLEEP="${TC_NVME_WAIT_SLEEP:-5}"
# Slurm's client command; /opt/slurm/bin is not on the lifecycle script's PATH.
TC_SCONTROL="${TC_SCONTROL:-}"

TC_CURRENT_STEP=""
TC_NOW=""

# ---------------------------------------------------------------------------------------------------
# Logging: one line per event, ISO-8601 timestamp, level, current step. on_create.sh sends stdout and
# stderr through `tee -a "$TC_LOG_FILE"`, so every line lands in the log file AND on stdout (which
# HyperPod forwards to CloudWatch).
# ---------------------------------------------------------------------------------------------------
tc__now() {
    local ts
    printf -v ts '%(%Y-%m-%dT%H:%M:%S%z)T' -1
    TC_NOW="${ts:0:${#ts}-2}:${ts:${#ts}-2}"    # +0000 -> +00:00 (ISO-8601 extended offset)
}

tc__log() {
    local level=$1
    shift
    tc__now
    printf '%s %-5s [%s] %s\n' "$TC_NOW" "$level" "${TC_CURRENT_STEP:-on_create}" "$*"
}

log() { tc__log INFO "$@"; }
warn() { tc__log WARN "$@"; }
tc_error() { tc__log ERROR "$@"; }

# ---------------------------------------------------------------------------------------------------
# Step runner. `run_step NAME cmd args...` logs start and end; if anything inside fails, errexit
# ends the run and the EXIT trap prints exactly one line: FAILED step 'NAME' (exit N).
# Call run_step plainly (never inside if / && / ||), or errexit would be switched off inside it.
# ---------------------------------------------------------------------------------------------------
run_step() {
    local name=$1 started=$SECONDS
    shift
    TC_CURRENT_STEP=$name
    log "step '${name}' started"
    "$@"
    log "step '${name}' done ($((SECONDS - started))s)"
    TC_CURRENT_STEP=""
}

skip_step() {
    local name=$1
    shift
    TC_CURRENT_STEP=$name
    log "step '${name}' skipped: $*"
    TC_CURRENT_STEP=""
}

# Names the failing command; a function that returned an error has already said why.
tc__on_err() {
    local rc=$1 where=$2 command=${3%%$'\n'*}
    if ((${#command} > 160)); then
        command="${command:0:160}..."
    fi
    if [[ $command != return* ]]; then
        tc_error "command failed (exit ${rc}) at ${where}: ${command}"
    fi
}

tc__on_exit() {
    local rc=$?
    trap - ERR EXIT
    if ((rc != 0)); then
        tc_error "FAILED step '${TC_CURRENT_STEP:-on_create}' (exit ${rc})"
    fi
    exit "$rc"
}

tc_install_traps() {
    set -E
    trap 'tc__on_err "$?" "${BASH_SOURCE[0]##*/}:${LINENO}" "$BASH_COMMAND"' ERR
    trap tc__on_exit EXIT
}

# ---------------------------------------------------------------------------------------------------
# Idempotent file edits
# ---------------------------------------------------------------------------------------------------

# tc_mkdir DIR...: create the folders that are missing (and their parents).
tc_mkdir() {
    local dir
    local -a missing=()
    for dir in "$@"; do
        [[ -d $dir ]] || missing+=("$dir")
    done
    if ((${#missing[@]} > 0)); then
        mkdir -p -- "${missing[@]}"
    fi
}

# tc_mkdir_parent PATH: create the folder holding PATH.
tc_mkdir_parent() {
    local parent=.
    if [[ $1 == */* ]]; then
        parent=${1%/*}
    fi
    tc_mkdir "${parent:-/}"
}

# tc_write_file PATH [MODE] < content
# Replaces PATH only when the content differs (atomically, via a temporary file beside it).
# MODE defaults to the existing file's mode, or 0644 for a new file. Sets TC_FILE_CHANGED to true
# when it wrote, false when the file already held the content (a daemon restarts only on a change).
TC_FILE_CHANGED=false
tc_write_file() {
    local path=$1 mode=${2:-} tmp
    tc_mkdir_parent "$path"
    tmp="${path}.tc-new.$$"
    cat >"$tmp"
    if [[ -f $path ]] && cmp -s -- "$tmp" "$path"; then
        rm -f -- "$tmp"
        TC_FILE_CHANGED=false
        log "unchanged ${path}"
        return 0
    fi
    TC_FILE_CHANGED=true
    if [[ -n $mode ]]; then
        chmod "$mode" "$tmp"
    elif [[ -f $path ]]; then
        chmod --reference="$path" "$tmp"
    else
        chmod 0644 "$tmp"
    fi
    mv -f -- "$tmp" "$path"
    log "wrote ${path}"
}

# tc_ensure_line FILE LINE: append LINE unless FILE already has it (exact, whole-line match).
tc_ensure_line() {
    local file=$1 line=$2
    tc_mkdir_parent "$file"
    [[ -f $file ]] || touch -- "$file"
    if grep -qxF -- "$line" "$file"; then
        return 0
    fi
    if [[ -s $file && $(tail -c1 -- "$file" | wc -l) -eq 0 ]]; then
        printf '\n' >>"$file" # the file did not end with a newline
    fi
    printf '%s\n' "$line" >>"$file"
    log "added to ${file}: ${line}"
}

# tc_backup_once FILE: keep a copy of FILE as it was before these scripts first changed it (or, when
# there was none, an empty <name>.orig.absent, so a file the scripts created is never taken for it).
tc_backup_once() {
    local file=$1 backup
    backup="${TC_BACKUP_DIR}/$(basename -- "$file").orig"
    [[ ! -e $backup && ! -e ${backup}.absent ]] || return 0
    tc_mkdir "$TC_BACKUP_DIR"
    if [[ -f $file ]]; then
        cp -p -- "$file" "$backup"
        log "saved original ${file} as ${backup}"
    else
        : >"${backup}.absent"
        log "no ${file} before these scripts (noted as ${backup}.absent)"
    fi
}

# tc_pkg_installed NAME: true when dpkg reports the package installed.
tc_pkg_installed() {
    local status
    status="$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" || return 1
    [[ $status == *"install ok installed"* ]]
}

# tc_retry ATTEMPTS SLEEP cmd...: run cmd until it succeeds, at most ATTEMPTS times.
tc_retry() {
    local attempts=$1 pause=$2 attempt=1 rc
    shift 2
    while :; do
        rc=0
        "$@" || rc=$?
        if ((rc == 0)); then
            return 0
        fi
        if ((attempt >= attempts)); then
            tc_error "gave up after ${attempts} attempts (exit ${rc}): $*"
            return "$rc"
        fi
        warn "attempt ${attempt}/${attempts} failed (exit ${rc}): $*; retrying in ${pause}s"
        sleep "$pause"
        attempt=$((attempt + 1))
    done
}

# tc_download URL DEST: fetch URL to DEST (through NAT / endpoints only; curl's own retries). When
# training_clusters.json's download_sha256 pins URL, DEST must have that SHA-256, else it is deleted and the
# step fails with one line; an unpinned URL is fetched with a warning that nothing verified it (a tag is
# not a pin: release files can be replaced).
tc_download() {
    local url=$1 dest=$2 entry expected="" actual
    tc_mkdir_parent "$dest"
    log "downloading ${url}"
    curl -fsSL --retry 5 --retry-delay 5 --connect-timeout 20 -o "$dest" "$url"
    for entry in "${TC_DOWNLOAD_SHA256[@]}"; do
        if [[ ${entry#* } == "$url" ]]; then
            expected=${entry%% *}
        fi
    done
    if [[ -z $expected ]]; then
        warn "${url} is not verified: no download_sha256 entry pins it"
        return 0
    fi
    actual="$("$TC_PYTHON" -I -S -c '
import hashlib, sys
digest = hashlib.sha256()
with open(sys.argv[1], "rb") as handle:
    for block in iter(lambda: handle.read(1 << 20), b""):
        digest.update(block)
print(digest.hexdigest())' "$dest")"
    if [[ $actual != "$expected" ]]; then
        rm -f -- "$dest"
        tc_error "${url} has sha256 ${actual}, expected ${expected} (download_sha256): refusing to use it"
        return 1
    fi
    log "verified ${url} (sha256 ${expected})"
}
