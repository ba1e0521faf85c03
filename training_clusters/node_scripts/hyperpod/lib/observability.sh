# shellcheck shell=bash
#
# Metrics exporters for Prometheus, behind enable_observability (default off):
#   Prometheus node exporter on every node (Ubuntu package, port 9100)
#   NVIDIA DCGM exporter on nodes with NVIDIA GPUs (container through Docker, port 9400)

TC_NODE_EXPORTER_PACKAGE="${TC_NODE_EXPORTER_PACKAGE:-prometheus-node-exporter}"
TC_DCGM_EXPORTER_IMAGE="${TC_DCGM_EXPORTER_IMAGE:-nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.0-ubuntu22.04}"
TC_DCGM_EXPORTER_NAME="dcgm-exporter"

tc_setup_observability() {
    tc_install_node_exporter
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        tc_run_dcgm_exporter
    else
        log "no NVIDIA GPU on this node: DCGM exporter not needed"
    fi
}

tc_install_node_exporter() {
    if tc_pkg_installed "$TC_NODE_EXPORTER_PACKAGE"; then
        log "${TC_NODE_EXPORTER_PACKAGE} is already installed"
    else
        apt_get install -y --no-install-recommends "$TC_NODE_EXPORTER_PACKAGE"
    fi
    systemctl enable "$TC_NODE_EXPORTER_PACKAGE"
    systemctl restart "$TC_NODE_EXPORTER_PACKAGE"
    log "node exporter serving on :9100"
}

tc_run_dcgm_exporter() {
    if ! command -v docker >/dev/null 2>&1; then
        warn "Docker is not installed: DCGM exporter not started (GPU metrics unavailable on this node)"
        return 0
    fi
    if docker container inspect "$TC_DCGM_EXPORTER_NAME" >/dev/null 2>&1; then
        log "DCGM exporter container already exists"
        return 0
    fi
    docker run --detach --name "$TC_DCGM_EXPORTER_NAME" --restart unless-stopped \
        --gpus all --net host --cap-add SYS_ADMIN "$TC_DCGM_EXPORTER_IMAGE"
    log "DCGM exporter serving on :9400 (${TC_DCGM_EXPORTER_IMAGE})"
}
