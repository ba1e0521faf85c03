# shellcheck shell=bash disable=SC2034  # settings used by the other files on_create.sh sources
#
# Reads the JSON inputs of a lifecycle run with cluster_config.py beside this file, run by python3 (present on
# HyperPod AMIs):
#   provisioning_parameters.json  uploaded next to these scripts by the CDK construct; only the keys
#                                 HyperPod's reference lifecycle scripts use (version,
#                                 workload_manager, controller_group, login_group, worker_groups,
#                                 fsx_dns_name, fsx_mountname)
#   training_clusters.json        uploaded beside it: this project's own settings (optional); with
#                                 API-driven Slurm ("slurm_config": "api") there is no
#                                 provisioning_parameters.json and this file names the groups itself
#                                 (controller_group, login_group, worker_groups)
#   resource_config.json          written by HyperPod at /opt/ml/config/resource_config.json
# and sets TC_* shell variables. Values are validated there, once, because they end up in fstab,
# slurm.conf and command lines.

TC_PARAMS_FILE="${TC_PARAMS_FILE:-${TC_HOME:-.}/provisioning_parameters.json}"
TC_SETTINGS_FILE="${TC_SETTINGS_FILE:-${TC_HOME:-.}/training_clusters.json}"
# The reader (and the one list of both files' keys, which the construct imports): where this file is.
TC_CLUSTER_CONFIG_PY="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)/cluster_config.py"

# Filled by tc_load_params
TC_CONTROLLER_GROUP=""
TC_LOGIN_GROUP=""
TC_FSX_DNS_NAME=""
TC_FSX_MOUNTNAME=""
TC_FSX_MOUNT_DIR=""
TC_FSX_MANAGED=""         # true: HyperPod mounts FSx at TC_FSX_MOUNT_DIR (API-driven Slurm)
TC_SLURM_CONFIG=""        # api | legacy
TC_ENABLE_OBSERVABILITY=""
TC_ENABLE_ENROOT_PYXIS=""
TC_SLURM_REQUEUE_EXIT=""
TC_WORKER_GROUPS=()
TC_EXTRA_STEPS=() # name:script:roles (roles comma-separated)
TC_DOWNLOAD_SHA256=() # 'DIGEST URL': what tc_download refuses in any other form
TC_ENABLE_DOCKER=""
TC_ACCOUNTING_MODE=""     # none | external | local
TC_ACCOUNTING_HOST=""
TC_ACCOUNTING_PORT=""
TC_ACCOUNTING_USER=""     # empty: the secret's username
TC_ACCOUNTING_SECRET_ARN=""
TC_ACCOUNTING_REGION=""
TC_ACCOUNTING_DATABASE=""
TC_USERS=()               # name:uid:gid
TC_USER_GROUPS=()         # user:group:gid (supplementary groups)
TC_ENABLE_PAM_SLURM_ADOPT=""
TC_TEAM_LOGINS_ON_CONTROLLER=""

# Filled by tc_detect_role
TC_ROLE=""
TC_GROUP=""
TC_PARTITION=""
TC_NODE_IP=""
TC_INSTANCE_ID=""
TC_CONTROLLER_IPS=""
TC_WORKER_NODES=()

tc_preflight() {
    if ! command -v "$TC_PYTHON" >/dev/null 2>&1; then
        tc_error "python3 not found (TC_PYTHON='${TC_PYTHON}'): it is needed to read the JSON configuration"
        return 1
    fi
    if [[ ! -f $TC_PARAMS_FILE ]]; then
        tc_error "provisioning parameters not found at ${TC_PARAMS_FILE}: upload provisioning_parameters.json next to on_create.sh"
        return 1
    fi
    if [[ ! -f $TC_RESOURCE_CONFIG ]]; then
        tc_error "HyperPod resource config not found at ${TC_RESOURCE_CONFIG} (set SAGEMAKER_RESOURCE_CONFIG_PATH to override)"
        return 1
    fi
    tc_load_params "$TC_PARAMS_FILE" "$TC_SETTINGS_FILE"
    log "parameters: controller_group=${TC_CONTROLLER_GROUP} login_group=${TC_LOGIN_GROUP:-<none>}" \
        "worker_groups=${TC_WORKER_GROUPS[*]:-<none>} fsx=${TC_FSX_DNS_NAME:-<none>}@tcp:/${TC_FSX_MOUNTNAME:-<none>}" \
        "fsx_mount_dir=${TC_FSX_MOUNT_DIR} enable_enroot_pyxis=${TC_ENABLE_ENROOT_PYXIS}" \
        "enable_observability=${TC_ENABLE_OBSERVABILITY} slurm_requeue_exit=${TC_SLURM_REQUEUE_EXIT:-<none>}" \
        "extra_steps=${TC_EXTRA_STEPS[*]:-<none>} enable_docker=${TC_ENABLE_DOCKER}" \
        "accounting=${TC_ACCOUNTING_MODE}${TC_ACCOUNTING_HOST:+ (${TC_ACCOUNTING_HOST}:${TC_ACCOUNTING_PORT})}" \
        "users=${#TC_USERS[@]} enable_pam_slurm_adopt=${TC_ENABLE_PAM_SLURM_ADOPT}" \
        "team_logins_on_controller=${TC_TEAM_LOGINS_ON_CONTROLLER}"
}

# Step preflight of on_init_complete.sh (API-driven Slurm): training_clusters.json names the groups and
# there is no provisioning_parameters.json.
tc_preflight_api() {
    if ! command -v "$TC_PYTHON" >/dev/null 2>&1; then
        tc_error "python3 not found (TC_PYTHON='${TC_PYTHON}'): it is needed to read the JSON configuration"
        return 1
    fi
    if [[ ! -f $TC_SETTINGS_FILE ]]; then
        tc_error "settings not found at ${TC_SETTINGS_FILE}: upload training_clusters.json next to on_init_complete.sh"
        return 1
    fi
    if [[ ! -f $TC_RESOURCE_CONFIG ]]; then
        tc_error "HyperPod resource config not found at ${TC_RESOURCE_CONFIG} (set SAGEMAKER_RESOURCE_CONFIG_PATH to override)"
        return 1
    fi
    tc_load_params "" "$TC_SETTINGS_FILE"
    log "settings: slurm_config=${TC_SLURM_CONFIG} controller_group=${TC_CONTROLLER_GROUP}" \
        "login_group=${TC_LOGIN_GROUP:-<none>} worker_groups=${TC_WORKER_GROUPS[*]:-<none>}" \
        "fsx_mount_dir=${TC_FSX_MANAGED:+${TC_FSX_MOUNT_DIR} (mounted by HyperPod)}${TC_FSX_MANAGED:-<none>}" \
        "enable_enroot_pyxis=${TC_ENABLE_ENROOT_PYXIS} enable_observability=${TC_ENABLE_OBSERVABILITY}" \
        "slurm_requeue_exit=${TC_SLURM_REQUEUE_EXIT:-<none>} extra_steps=${TC_EXTRA_STEPS[*]:-<none>}" \
        "enable_docker=${TC_ENABLE_DOCKER} users=${#TC_USERS[@]}" \
        "enable_pam_slurm_adopt=${TC_ENABLE_PAM_SLURM_ADOPT} team_logins_on_controller=${TC_TEAM_LOGINS_ON_CONTROLLER}"
}

# tc_has_fsx: whether the node has the shared FSx file system (mounted by us, or by HyperPod).
tc_has_fsx() {
    [[ -n $TC_FSX_DNS_NAME || $TC_FSX_MANAGED == true ]]
}

# tc_load_params PARAMS_FILE SETTINGS_FILE: validate provisioning_parameters.json and
# training_clusters.json (optional: defaults apply without it) and set the TC_* parameter variables.
# An empty PARAMS_FILE: API-driven Slurm, whose training_clusters.json names the groups.
tc_load_params() {
    local out key value
    out="$("$TC_PYTHON" -I -S "$TC_CLUSTER_CONFIG_PY" params "$1" "$2" "${TC_HOME:-.}")"
    TC_WORKER_GROUPS=()
    TC_EXTRA_STEPS=()
    TC_DOWNLOAD_SHA256=()
    TC_USERS=()
    TC_USER_GROUPS=()
    while IFS='=' read -r key value; do
        case $key in
            controller_group) TC_CONTROLLER_GROUP=$value ;;
            login_group) TC_LOGIN_GROUP=$value ;;
            fsx_dns_name) TC_FSX_DNS_NAME=$value ;;
            fsx_mountname) TC_FSX_MOUNTNAME=$value ;;
            fsx_mount_dir) TC_FSX_MOUNT_DIR=$value ;;
            fsx_managed) TC_FSX_MANAGED=$value ;;
            slurm_config) TC_SLURM_CONFIG=$value ;;
            enable_observability) TC_ENABLE_OBSERVABILITY=$value ;;
            enable_enroot_pyxis) TC_ENABLE_ENROOT_PYXIS=$value ;;
            slurm_requeue_exit) TC_SLURM_REQUEUE_EXIT=$value ;;
            worker_group) TC_WORKER_GROUPS+=("$value") ;;
            extra_step) TC_EXTRA_STEPS+=("$value") ;;
            download_sha256) TC_DOWNLOAD_SHA256+=("$value") ;;
            enable_docker) TC_ENABLE_DOCKER=$value ;;
            enable_pam_slurm_adopt) TC_ENABLE_PAM_SLURM_ADOPT=$value ;;
            team_logins_on_controller) TC_TEAM_LOGINS_ON_CONTROLLER=$value ;;
            accounting_mode) TC_ACCOUNTING_MODE=$value ;;
            accounting_host) TC_ACCOUNTING_HOST=$value ;;
            accounting_port) TC_ACCOUNTING_PORT=$value ;;
            accounting_user) TC_ACCOUNTING_USER=$value ;;
            accounting_secret_arn) TC_ACCOUNTING_SECRET_ARN=$value ;;
            accounting_region) TC_ACCOUNTING_REGION=$value ;;
            accounting_database) TC_ACCOUNTING_DATABASE=$value ;;
            user) TC_USERS+=("$value") ;;
            user_group) TC_USER_GROUPS+=("$value") ;;
            warning) warn "$value" ;;
            "") ;;
            *) warn "ignoring unexpected parameter line: ${key}" ;;
        esac
    done <<<"$out"
}

# tc_local_ips: this node's IPv4 addresses, space separated (hostname -I, else ip addr).
tc_local_ips() {
    local ips
    local -a addresses=()
    ips="$(hostname -I 2>/dev/null || true)"
    if [[ -z ${ips//[[:space:]]/} ]]; then
        ips="$(ip -4 -o addr show 2>/dev/null | awk '{ split($4, a, "/"); printf "%s ", a[1] }' || true)"
    fi
    read -r -a addresses <<<"$ips" || true
    printf '%s' "${addresses[*]}"
}

# tc_detect_role: match this node's IP against resource_config.json and set TC_ROLE
# (controller | login | worker), TC_GROUP, TC_PARTITION, TC_CONTROLLER_IPS, TC_WORKER_NODES.
tc_detect_role() {
    local ips out key value
    ips="$(tc_local_ips)"
    log "local IPv4 addresses: ${ips:-<none>}"
    out="$("$TC_PYTHON" -I -S "$TC_CLUSTER_CONFIG_PY" role "$TC_RESOURCE_CONFIG" "$ips" "$TC_CONTROLLER_GROUP" \
        "$TC_LOGIN_GROUP" "${TC_WORKER_GROUPS[@]}")"
    TC_WORKER_NODES=()
    while IFS='=' read -r key value; do
        case $key in
            role) TC_ROLE=$value ;;
            group) TC_GROUP=$value ;;
            partition) TC_PARTITION=$value ;;
            node_ip) TC_NODE_IP=$value ;;
            instance_id) TC_INSTANCE_ID=$value ;;
            controller_ips) TC_CONTROLLER_IPS=$value ;;
            worker_node) TC_WORKER_NODES+=("$value") ;;
            warning) warn "$value" ;;
            "") ;;
            *) warn "ignoring unexpected role line: ${key}" ;;
        esac
    done <<<"$out"
    log "this node: role=${TC_ROLE} group=${TC_GROUP} partition=${TC_PARTITION:-<none>}" \
        "ip=${TC_NODE_IP} instance=${TC_INSTANCE_ID:-?} controller=${TC_CONTROLLER_IPS}"
    tc_write_file "${TC_STATE_DIR}/node.env" 0644 <<EOF
# Written by the training-clusters lifecycle scripts (on_create.sh).
TC_ROLE=${TC_ROLE}
TC_GROUP=${TC_GROUP}
TC_PARTITION=${TC_PARTITION}
TC_NODE_IP=${TC_NODE_IP}
TC_CONTROLLER_IPS=${TC_CONTROLLER_IPS}
EOF
}
