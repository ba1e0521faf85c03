# shellcheck shell=bash disable=SC2034  # settings used by the other files on_create.sh sources
#
# Reads the JSON inputs of a lifecycle run with python3 (present on HyperPod AMIs):
#   provisioning_parameters.json  uploaded next to these scripts by the CDK construct; only the keys
#                                 HyperPod's reference lifecycle scripts use (version,
#                                 workload_manager, controller_group, login_group, worker_groups,
#                                 fsx_dns_name, fsx_mountname)
#   training_clusters.json        uploaded beside it: this project's own settings (optional); with
#                                 API-driven Slurm ("slurm_config": "api") there is no
#                                 provisioning_parameters.json and this file names the groups itself
#                                 (controller_group, login_group, worker_groups)
#   resource_config.json          written by HyperPod at /opt/ml/config/resource_config.json
# and sets TC_* shell variables. Values are validated here, once, because they end up in fstab,
# slurm.conf and command lines.

TC_PARAMS_FILE="${TC_PARAMS_FILE:-${TC_HOME:-.}/provisioning_parameters.json}"
TC_SETTINGS_FILE="${TC_SETTINGS_FILE:-${TC_HOME:-.}/training_clusters.json}"

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
    out="$("$TC_PYTHON" -I -S - "$1" "$2" "${TC_HOME:-.}" <<'PY'
import json
import os
import re
import sys

params_path, settings_path, home = sys.argv[1], sys.argv[2], sys.argv[3]
PARAMS = os.path.basename(params_path)
SETTINGS = os.path.basename(settings_path)
# provisioning_parameters.json keeps the keys HyperPod's reference scripts read; ours live beside it.
OURS = ("fsx_mount_dir", "enable_enroot_pyxis", "enable_observability", "slurm_requeue_exit_codes",
        "extra_steps", "enable_docker", "accounting", "users", "enable_pam_slurm_adopt",
        "team_logins_on_controller", "download_sha256", "slurm_config")
# With API-driven Slurm, training_clusters.json also names the groups (there is no provisioning_parameters.json).
GROUP_KEYS = ("controller_group", "login_group", "worker_groups")
ROLES = ("controller", "login", "worker")


def fail(file, message):
    print(f"{file}: {message}", file=sys.stderr)
    sys.exit(2)


def load(path, required):
    if not required and not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as error:
        fail(os.path.basename(path), f"cannot read {path}: {error}")
    if not isinstance(data, dict):
        fail(os.path.basename(path), f"must be a JSON object, got {type(data).__name__}")
    return data


settings = load(settings_path, required=not params_path)
api = not params_path
slurm_config = settings.get("slurm_config", "legacy")
if slurm_config not in ("api", "legacy"):
    fail(SETTINGS, f"slurm_config must be api or legacy, got {slurm_config!r}")
if api != (slurm_config == "api"):
    entry = "on_init_complete.sh (OnInitComplete)" if api else "on_create.sh (OnCreate)"
    fail(SETTINGS, f"slurm_config {slurm_config!r} does not go with {entry}: api runs on_init_complete.sh, "
         "legacy on_create.sh with provisioning_parameters.json")
if api:
    PARAMS = SETTINGS
    params = {key: settings[key] for key in GROUP_KEYS if key in settings}
    if "accounting" in settings:
        fail(SETTINGS, "accounting is HyperPod's with slurm_config api (its own slurmdbd), got "
             f"{settings['accounting']!r}")
else:
    params = load(params_path, required=True)
for key in OURS:
    if key in params:
        print(f"warning={PARAMS}: {key} is ignored there: it belongs in {SETTINGS}")
allowed = OURS + GROUP_KEYS if api else OURS
unknown = sorted(set(settings) - set(allowed))
if unknown:
    fail(SETTINGS, f"unknown key {unknown[0]!r}: allowed are {', '.join(allowed)}")

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
DNS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*$")
ABS_DIR = re.compile(r"^(/[A-Za-z0-9._-]+)+$")
STEP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
SCRIPT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$")


def text(source, file, key, pattern, allowed, required=False, default=""):
    value = source.get(key, default)
    if value is None or value == "":
        if required:
            fail(file, f"{key} is required: {allowed}")
        return ""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        fail(file, f"{key} must be {allowed}, got {value!r}")
    return value


def flag(key, default):
    value = settings.get(key, default)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower()
    fail(SETTINGS, f"{key} must be true or false, got {value!r}")


manager = params.get("workload_manager", "slurm")
if manager != "slurm":
    fail(PARAMS, f"workload_manager must be 'slurm' (these scripts set up Slurm), got {manager!r}")

names = "a name of letters, digits, '.', '_' or '-'"
out = {
    "controller_group": text(params, PARAMS, "controller_group", NAME, names, required=True),
    "login_group": text(params, PARAMS, "login_group", NAME, names),
    "fsx_dns_name": text(params, PARAMS, "fsx_dns_name", DNS,
                         "a DNS name such as fs-0123.fsx.us-east-1.amazonaws.com"),
    "fsx_mountname": text(params, PARAMS, "fsx_mountname", NAME,
                          "the FSx for Lustre mount name such as 'abcdefgh'"),
    "fsx_mount_dir": text(settings, SETTINGS, "fsx_mount_dir", ABS_DIR, "an absolute path such as '/fsx'",
                          default="/fsx"),
    "enable_observability": flag("enable_observability", False),
    "enable_enroot_pyxis": flag("enable_enroot_pyxis", True),
    "enable_docker": flag("enable_docker", False),
    "enable_pam_slurm_adopt": flag("enable_pam_slurm_adopt", False),
    "team_logins_on_controller": flag("team_logins_on_controller", False),
    "slurm_config": slurm_config,
    "fsx_managed": "true" if api and "fsx_mount_dir" in settings else "",
}
if bool(out["fsx_dns_name"]) != bool(out["fsx_mountname"]):
    fail(PARAMS, "fsx_dns_name and fsx_mountname must be given together (or both left out to skip FSx), "
         f"got fsx_dns_name={out['fsx_dns_name']!r} fsx_mountname={out['fsx_mountname']!r}")

codes = settings.get("slurm_requeue_exit_codes", [75])
if not isinstance(codes, list) or not all(
    isinstance(code, int) and not isinstance(code, bool) and 0 <= code <= 255 for code in codes
):
    fail(SETTINGS, f"slurm_requeue_exit_codes must be a list of exit codes 0-255, got {codes!r}")
out["slurm_requeue_exit"] = ",".join(str(code) for code in codes)

pins = settings.get("download_sha256", {})
if not isinstance(pins, dict):
    fail(SETTINGS, f"download_sha256 must map https:// URLs to SHA-256 digests, got {pins!r}")
for url, digest in pins.items():
    if not re.fullmatch(r"https://[!-~]+", url):
        fail(SETTINGS, f"download_sha256 keys must be https:// URLs without spaces, got {url!r}")
    if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
        fail(SETTINGS, f"download_sha256[{url!r}] must be 64 hexadecimal digits, got {digest!r}")

groups = params.get("worker_groups", [])
if not isinstance(groups, list):
    fail(PARAMS, f"worker_groups must be a list of {{instance_group_name, partition_name}}, got {groups!r}")
lines = []
for index, group in enumerate(groups):
    where = f"worker_groups[{index}]"
    if not isinstance(group, dict):
        fail(PARAMS, f"{where} must be an object with instance_group_name and partition_name, got {group!r}")
    name = group.get("instance_group_name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        fail(PARAMS, f"{where}.instance_group_name must be {names}, got {name!r}")
    partition = group.get("partition_name") or name
    if not isinstance(partition, str) or not NAME.fullmatch(partition):
        fail(PARAMS, f"{where}.partition_name must be {names}, got {partition!r}")
    if name in (out["controller_group"], out["login_group"]):
        fail(PARAMS, f"{where}.instance_group_name {name!r} is already the controller or login group")
    lines.append(f"worker_group={name}:{partition}")

steps = settings.get("extra_steps", [])
if not isinstance(steps, list):
    fail(SETTINGS, f"extra_steps must be a list of {{name, script, roles}}, got {steps!r}")
seen = set()
for index, step in enumerate(steps):
    where = f"extra_steps[{index}]"
    if not isinstance(step, dict):
        fail(SETTINGS, f"{where} must be an object with name, script and roles, got {step!r}")
    name = step.get("name")
    if not isinstance(name, str) or not STEP.fullmatch(name):
        fail(SETTINGS, f"{where}.name must be 1-63 letters, digits, '-' or '_', got {name!r}")
    if name in seen:
        fail(SETTINGS, f"{where}.name {name!r} is used twice")
    seen.add(name)
    script = step.get("script")
    if not isinstance(script, str) or not SCRIPT.fullmatch(script) or ".." in script.split("/"):
        fail(SETTINGS, f"{where}.script must be a path relative to the lifecycle folder, got {script!r}")
    if not os.path.isfile(os.path.join(home, script)):
        fail(SETTINGS, f"{where}.script {script!r} is not in the lifecycle folder {home}")
    roles = step.get("roles", list(ROLES))
    if not isinstance(roles, list) or not roles or any(role not in ROLES for role in roles):
        fail(SETTINGS, f"{where}.roles must be a non-empty list of {', '.join(ROLES)}, got {roles!r}")
    lines.append(f"extra_step={name}:{script}:{','.join(roles)}")

SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:([a-z0-9-]+):[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+$")
DB_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
ACCOUNTING_KEYS = {"none": set(), "local": set(), "external": {"host", "port", "user", "secret_arn", "database"}}
accounting = settings.get("accounting") or {"mode": "none"}
if not isinstance(accounting, dict) or accounting.get("mode") not in ACCOUNTING_KEYS:
    fail(SETTINGS, "accounting must be an object with mode none, local or external, got "
         f"{accounting!r}")
mode = accounting["mode"]
extra = sorted(set(accounting) - ACCOUNTING_KEYS[mode] - {"mode"})
if extra:
    fail(SETTINGS, f"accounting.{extra[0]} is not a setting of mode {mode!r}")
out["accounting_mode"] = mode
if mode == "external":
    field = {f"accounting.{key}": value for key, value in accounting.items()}  # messages name the field
    out["accounting_host"] = text(field, SETTINGS, "accounting.host", DNS, "the database's DNS name",
                                  required=True)
    port = accounting.get("port", 3306)
    if isinstance(port, str) and port.isdigit():
        port = int(port)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        fail(SETTINGS, f"accounting.port must be a TCP port 1-65535, got {port!r}")
    out["accounting_port"] = port
    out["accounting_user"] = text(field, SETTINGS, "accounting.user", NAME, "a database user name")
    arn = accounting.get("secret_arn")
    found = SECRET_ARN.fullmatch(arn) if isinstance(arn, str) else None
    if not found:
        fail(SETTINGS, "accounting.secret_arn must be the ARN of a Secrets Manager secret holding the "
             f"database password, got {arn!r}")
    out["accounting_secret_arn"] = arn
    out["accounting_region"] = found.group(1)
    out["accounting_database"] = text(field, SETTINGS, "accounting.database", DB_NAME,
                                      "1-64 letters, digits or '_'", default="slurm_acct_db")
elif mode == "local":
    out["accounting_database"] = "slurm_acct_db"

USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
SSH_KEY = re.compile(r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|"
                     r"sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\n\r]*)?$")
RESERVED = ("root", "ubuntu", "slurm", "munge", "nobody")
users = settings.get("users", [])
if not isinstance(users, list):
    fail(SETTINGS, f"users must be a list of {{name, uid, gid, ssh_public_keys}}, got {users!r}")
names, uids = set(), set()
for index, user in enumerate(users):
    where = f"users[{index}]"
    if not isinstance(user, dict):
        fail(SETTINGS, f"{where} must be an object with name, uid, gid and ssh_public_keys, got {user!r}")
    unknown = sorted(set(user) - {"name", "uid", "gid", "groups", "ssh_public_keys"})
    if unknown:
        fail(SETTINGS, f"{where}.{unknown[0]} is not a user setting: allowed are name, uid, gid, groups, "
             "ssh_public_keys")
    name = user.get("name")
    if not isinstance(name, str) or not USER.fullmatch(name) or name in RESERVED:
        fail(SETTINGS, f"{where}.name must be a Linux user name (lower-case letters, digits, '_' or '-', "
             f"at most 32) other than {', '.join(RESERVED)}, got {name!r}")
    if name in names:
        fail(SETTINGS, f"{where}.name {name!r} is used twice")
    ids = {}
    for key in ("uid", "gid"):
        value = user.get(key, user.get("uid"))
        if not isinstance(value, int) or isinstance(value, bool) or not 2000 <= value <= 59999:
            fail(SETTINGS, f"{where}.{key} must be a number 2000-59999 (clear of the AMI's own users), "
                 f"got {value!r}")
        ids[key] = value
    if ids["uid"] in uids:
        fail(SETTINGS, f"{where}.uid {ids['uid']} is used twice")
    names.add(name)
    uids.add(ids["uid"])
    keys = user.get("ssh_public_keys", [])
    if not isinstance(keys, list) or not all(isinstance(k, str) and SSH_KEY.fullmatch(k) for k in keys):
        fail(SETTINGS, f"{where}.ssh_public_keys must be a list of OpenSSH public keys "
             f"('ssh-ed25519 AAAA... comment'), got {keys!r}")
    lines.append(f"user={name}:{ids['uid']}:{ids['gid']}")
    groups_of_user = user.get("groups", [])
    if not isinstance(groups_of_user, list):
        fail(SETTINGS, f"{where}.groups must be a list of {{name, gid}}, got {groups_of_user!r}")
    for number, group in enumerate(groups_of_user):
        gname = group.get("name") if isinstance(group, dict) else None
        gid = group.get("gid") if isinstance(group, dict) else None
        if not isinstance(gname, str) or not USER.fullmatch(gname) or gname in RESERVED:
            fail(SETTINGS, f"{where}.groups[{number}].name must be a Linux group name, got {gname!r}")
        if not isinstance(gid, int) or isinstance(gid, bool) or not 2000 <= gid <= 59999:
            fail(SETTINGS, f"{where}.groups[{number}].gid must be a number 2000-59999, got {gid!r}")
        lines.append(f"user_group={name}:{gname}:{gid}")

for key, value in out.items():
    print(f"{key}={value}")
lines += [f"download_sha256={digest.lower()} {url}" for url, digest in pins.items()]
print("\n".join(lines))
PY
)"
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
    out="$("$TC_PYTHON" -I -S - "$TC_RESOURCE_CONFIG" "$ips" "$TC_CONTROLLER_GROUP" "$TC_LOGIN_GROUP" \
        "${TC_WORKER_GROUPS[@]}" <<'PY'
import json
import sys

path, ips, controller, login = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4]
partitions = dict(entry.split(":", 1) for entry in sys.argv[5:])


def fail(message, code=3):
    print(f"resource_config.json: {message}", file=sys.stderr)
    sys.exit(code)


try:
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    groups = config["InstanceGroups"]
    if not isinstance(groups, list):
        raise TypeError("InstanceGroups is not a list")
except (OSError, ValueError, KeyError, TypeError) as error:
    fail(f"cannot read InstanceGroups from {path}: {error!r}", code=2)


def group_name(group):
    return group.get("Name") or group.get("InstanceGroupName") or ""


def addresses(group):
    return [i.get("CustomerIpAddress") for i in group.get("Instances") or [] if i.get("CustomerIpAddress")]


mine = None
for group in groups:
    for instance in group.get("Instances") or []:
        if instance.get("CustomerIpAddress") in ips:
            mine = (group, instance)
            break
    if mine:
        break
if mine is None:
    known = ", ".join(f"{group_name(g)}={'/'.join(addresses(g)) or '-'}" for g in groups) or "none"
    fail(f"this node's IPv4 addresses ({', '.join(ips) or 'none found'}) are not listed in {path} "
         f"(known instances: {known}); cannot tell this node's role")

group, instance = mine
name = group_name(group)
if name == controller:
    role, partition = "controller", ""
elif login and name == login:
    role, partition = "login", ""
elif name in partitions:
    role, partition = "worker", partitions[name]
else:
    fail(f"this node's instance group {name!r} is not controller_group {controller!r}, "
         f"login_group {login or '<none>'!r} or one of worker_groups {sorted(partitions)} "
         "in provisioning_parameters.json; cannot tell this node's role")

controller_ips = [ip for g in groups if group_name(g) == controller for ip in addresses(g)]
if not controller_ips:
    fail(f"no instance of controller_group {controller!r} is listed in {path}")

print(f"role={role}")
print(f"group={name}")
print(f"partition={partition}")
print(f"node_ip={instance.get('CustomerIpAddress')}")
print(f"instance_id={instance.get('InstanceId', '')}")
print(f"controller_ips={','.join(controller_ips)}")
present = {group_name(g) for g in groups}
for worker_group, worker_partition in partitions.items():
    if worker_group not in present:
        print(f"warning=worker group {worker_group!r} has no instances in {path}")
for g in groups:
    if group_name(g) in partitions:
        for ip in addresses(g):
            print(f"worker_node={partitions[group_name(g)]}:{ip}")
PY
)"
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
