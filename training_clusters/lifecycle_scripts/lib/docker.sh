# shellcheck shell=bash
#
# Docker, behind enable_docker (default off), as the public reference's utils/install_docker.sh does
# (github.com/aws-samples/awsome-distributed-training, 1.architectures/5.sagemaker-hyperpod/
# LifecycleScripts/base-config): the engine (here the Ubuntu archive's docker.io, so no further apt
# source can break apt-get update), the NVIDIA runtime on GPU nodes (nvidia-ctk, shipped with the
# HyperPod GPU AMIs), and Docker's data on the local NVMe of workers when it is mounted. The DCGM
# exporter (enable_observability) runs as a Docker container.

TC_DOCKER_PACKAGE="${TC_DOCKER_PACKAGE:-docker.io}"

tc_setup_docker() {
    local changed=false data_root=""
    if tc_pkg_installed "$TC_DOCKER_PACKAGE" || tc_pkg_installed docker-ce; then
        log "Docker is already installed"
    else
        apt_get install -y --no-install-recommends "$TC_DOCKER_PACKAGE"
    fi
    if [[ $TC_ROLE == worker && -d ${TC_ROOT}/opt/dlami/nvme ]]; then
        data_root=/opt/dlami/nvme/docker/data-root
    fi
    if tc_docker_daemon_json "$data_root"; then
        changed=true
    fi
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        if grep -qs '"nvidia"' "${TC_ROOT}/etc/docker/daemon.json"; then
            log "the NVIDIA runtime is already in /etc/docker/daemon.json"
        elif command -v nvidia-ctk >/dev/null 2>&1; then
            nvidia-ctk runtime configure --runtime=docker
            changed=true
        else
            warn "NVIDIA GPUs but no nvidia-ctk (NVIDIA Container Toolkit): containers get no GPUs"
        fi
    fi
    systemctl enable docker
    if [[ $changed == true ]] || ! systemctl is-active --quiet docker; then
        systemctl restart docker
    fi
    log "Docker is running${data_root:+ with its data in ${data_root}}"
}

# Sets data-root in /etc/docker/daemon.json (keeping its other keys); true when the file changed.
tc_docker_daemon_json() {
    local data_root=$1 file="${TC_ROOT}/etc/docker/daemon.json" content
    [[ -n $data_root ]] || return 1
    content="$("$TC_PYTHON" -I -S - "$file" "$data_root" <<'PY'
import json
import os
import sys

path, data_root = sys.argv[1], sys.argv[2]
config = {}
if os.path.exists(path):
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
config["data-root"] = data_root
print(json.dumps(config, indent=2, sort_keys=True))
PY
)"
    if [[ -f $file ]] && [[ $content == "$(<"$file")" ]]; then
        return 1
    fi
    tc_write_file "$file" 0644 <<<"$content"
}
