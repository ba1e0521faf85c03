# shellcheck shell=bash
#
# Docker, behind enable_docker (default off), as the public reference's utils/install_docker.sh does
# (github.com/aws-samples/awsome-distributed-training, 1.architectures/5.sagemaker-hyperpod/
# LifecycleScripts/base-config): the engine (here the Ubuntu archive's docker.io, so no further apt
# source can break apt-get update), the NVIDIA runtime on GPU nodes (nvidia-ctk, shipped with the
# HyperPod GPU AMIs), and Docker's data on the local NVMe of workers when it is mounted. The DCGM
# exporter (enable_observability) runs as a Docker container.
#
# Docker counts as installed when it is there, whatever package brought it: a docker command and an
# engine (dockerd on PATH, or a docker.service unit). Otherwise docker.io is installed, unless a
# package it cannot live beside is there: docker.io depends on Ubuntu's containerd and runc
# (versioned), which Docker's containerd.io provides without a version and conflicts with
# (github.com/docker/containerd-packaging debian/control), and it conflicts with docker-ce and
# docker-ce-cli itself; apt would remove those to install it. Then the step fails naming them.

TC_DOCKER_PACKAGE="${TC_DOCKER_PACKAGE:-docker.io}"
# Packages that installing docker.io would remove (see above).
TC_DOCKER_CONFLICTS=(containerd.io docker-ce docker-ce-cli)

tc_setup_docker() {
    local changed=false data_root="" cli engine
    if cli="$(command -v docker)" && engine="$(tc_docker_engine)"; then
        log "Docker is already installed (${cli}, engine: ${engine})"
    else
        tc_refuse_docker_conflicts
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

# Fails, naming it, when a package is installed that installing docker.io would remove (see above).
tc_refuse_docker_conflicts() {
    local package why instead
    [[ $TC_DOCKER_PACKAGE == docker.io ]] || return 0 # another package (TC_DOCKER_PACKAGE) brings its own
    for package in "${TC_DOCKER_CONFLICTS[@]}"; do
        tc_pkg_installed "$package" || continue
        if [[ $package == containerd.io ]]; then
            why="docker.io needs Ubuntu's containerd and runc, which containerd.io conflicts with"
            instead="install Docker's docker-ce beside it"
        else
            why="docker.io conflicts with Docker's docker-ce and docker-ce-cli"
            instead="complete Docker's own installation (docker-ce, docker-ce-cli)"
        fi
        tc_error "${package} is installed but no Docker (no docker command with dockerd or docker.service):" \
            "${TC_DOCKER_PACKAGE} from the Ubuntu archive would remove it (${why}); ${instead}, or remove ${package}"
        return 1
    done
}

# What runs Docker's containers here: dockerd on PATH, else the docker.service unit; fails when neither.
tc_docker_engine() {
    local dockerd
    if dockerd="$(command -v dockerd)"; then
        echo "dockerd at ${dockerd}"
    elif systemctl cat docker.service >/dev/null 2>&1; then
        echo "docker.service"
    else
        return 1
    fi
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
