# shellcheck shell=bash
# The gate of the MIG acceptance pod: check_output FILE reads the pod's `nvidia-smi -L`. Passes when the pod
# sees exactly one MIG device, of MIG_PROFILE; fails on whole GPUs, another profile, or none. Reads TEST_LABEL
# and MIG_PROFILE from the settings.
# A fragment of the generated acceptance scripts (training_clusters/acceptance/fragments.py): the lines
# above the first blank line are dropped, the rest is copied after the script's settings block.

# --- gate ---
# nvidia-smi -L lists the GPU the instance lives on ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-...)"), then
# each MIG device the container may use ("  MIG 1g.10gb     Device  0: (UUID: MIG-...)").
check_output() {
    local file=$1 devices wanted
    devices=$(grep -cE '^[[:space:]]+MIG [0-9]+g\.[0-9]+gb[[:space:]]+Device[[:space:]]+[0-9]+:' "${file}" || true)
    wanted=$(grep -cE "^[[:space:]]+MIG ${MIG_PROFILE//./\\.}[[:space:]]+Device[[:space:]]+[0-9]+:" "${file}" || true)
    if [[ ${devices} -eq 1 && ${wanted} -eq 1 ]]; then
        echo "PASS ${TEST_LABEL}: the pod sees one MIG ${MIG_PROFILE} device"
        return 0
    fi
    echo "FAIL ${TEST_LABEL}: the pod should see exactly one MIG ${MIG_PROFILE} device; it sees ${devices} MIG device(s), ${wanted} of ${MIG_PROFILE}"
    echo "Look at: kubectl get node -L nvidia.com/mig.config,nvidia.com/mig.config.state (state must be success) and the GPU Operator's nvidia-mig-manager pod log"
    return 1
}
