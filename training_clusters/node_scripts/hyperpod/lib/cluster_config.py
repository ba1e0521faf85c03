"""The JSON inputs of a HyperPod lifecycle run, read and checked on the node, and the keys of the two files the
``HyperPodCluster`` construct uploads beside the scripts.

The keys are written here once: the construct (``constructs/hyperpod/cluster.py``) imports
:data:`PARAMETER_KEYS`, :data:`SETTING_KEYS` and :data:`GROUP_KEYS` to decide which of its settings go to
which file, and this module, shipped in the lifecycle folder, reads them on the node.

``lib/cluster_config.sh`` runs it with the node's ``python3`` (``"$TC_PYTHON" -I -S lib/cluster_config.py ...``),
so it imports nothing but the standard library and keeps to the Python 3.7 language, which any ``python3`` a
HyperPod AMI may carry runs (Amazon Linux 2's is 3.7, Ubuntu 20.04's 3.8; ruff checks this file as py37,
mypy with the package). Its subcommands print what the bash side reads (``key=value`` lines become ``TC_*``
variables):

- ``params PARAMS_FILE SETTINGS_FILE HOME``: validates ``provisioning_parameters.json`` (empty PARAMS_FILE:
  API-driven Slurm, whose ``training_clusters.json`` names the groups itself) and ``training_clusters.json``
  (optional with a PARAMS_FILE: defaults apply without it); HOME is the lifecycle folder, where the
  ``extra_steps`` scripts must be. Values are validated here, once, because they end up in fstab,
  slurm.conf and command lines. Exit 2 with ``FILE: message`` on stderr when a file is wrong.
- ``role RESOURCE_CONFIG IPS CONTROLLER_GROUP LOGIN_GROUP [WORKER_GROUP:PARTITION ...]``: finds this node's
  role by matching its IPv4 addresses (IPS, space separated) against ``resource_config.json``, written by
  HyperPod. Exit 2 when the file cannot be read, 3 when the node's role cannot be told.
- ``workload-manager PARAMS_FILE``: ``slurm`` or ``eks`` (``slurm`` when the file says neither or cannot be
  read: the Slurm preflight then says what is wrong with it).
- ``has-fsx PARAMS_FILE``: ``true`` when ``provisioning_parameters.json`` names a file system (EKS nodes).
- ``ssh-keys SETTINGS_FILE``: the public keys of the team users in ``training_clusters.json`` (checked by
  ``params`` before), one ``NAME:KEY`` a line, as ``shared/users.sh --key`` takes them.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Callable, NoReturn, Sequence

#: The file HyperPod's reference lifecycle scripts read (legacy Slurm configuration, and EKS).
PARAMETERS_FILE = "provisioning_parameters.json"
#: This project's own settings, uploaded beside it.
SETTINGS_FILE = "training_clusters.json"
#: The keys of ``provisioning_parameters.json``: those HyperPod's reference lifecycle scripts read
#: (github.com/aws-samples/awsome-distributed-training, LifecycleScripts/base-config).
PARAMETER_KEYS = (
    "version",
    "workload_manager",
    "controller_group",
    "login_group",
    "worker_groups",
    "fsx_dns_name",
    "fsx_mountname",
)
#: The keys of ``training_clusters.json`` the shipped scripts read; in ``provisioning_parameters.json`` they are
#: ignored with a warning.
SETTING_KEYS = (
    "fsx_mount_dir",
    "enable_enroot_pyxis",
    "enable_observability",
    "slurm_requeue_exit_codes",
    "extra_steps",
    "enable_docker",
    "accounting",
    "users",
    "enable_pam_slurm_adopt",
    "team_logins_on_controller",
    "download_sha256",
    "slurm_config",
)
#: With API-driven Slurm, ``training_clusters.json`` also names the groups (there is no
#: ``provisioning_parameters.json``): ``on_init_complete.sh`` finds its node's role with them.
GROUP_KEYS = ("controller_group", "login_group", "worker_groups")
ROLES = ("controller", "login", "worker")

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
DNS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*$")
ABS_DIR = re.compile(r"^(/[A-Za-z0-9._-]+)+$")
STEP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
SCRIPT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$")
SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:([a-z0-9-]+):[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+$")
DB_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
SSH_KEY = re.compile(
    r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|"
    r"sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\n\r]*)?$"
)
#: The users a team user may not be: the AMI's and the daemons'.
RESERVED = ("root", "ubuntu", "slurm", "munge", "nobody")
#: The settings of each accounting mode besides ``mode``.
ACCOUNTING_KEYS = {
    "none": set(),
    "local": set(),
    "external": {"host", "port", "user", "secret_arn", "database"},
}
NAMES = "a name of letters, digits, '.', '_' or '-'"


class Refused(Exception):
    """A wrong input: ``file`` names it in the message, ``code`` is the exit status."""

    def __init__(self, file: str, message: str, code: int = 2) -> None:
        super().__init__(f"{file}: {message}")
        self.file = file
        self.message = message
        self.code = code


def _fail(file: str, message: str) -> NoReturn:
    raise Refused(file, message)


def _load(path: str, required: bool) -> dict[str, Any]:
    if not required and not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as error:
        _fail(os.path.basename(path), f"cannot read {path}: {error}")
    if not isinstance(data, dict):
        _fail(os.path.basename(path), f"must be a JSON object, got {type(data).__name__}")
    return data


def _text(
    source: dict[str, Any],
    file: str,
    key: str,
    pattern: re.Pattern[str],
    allowed: str,
    required: bool = False,
    default: str = "",
) -> str:
    value = source.get(key, default)
    if value is None or value == "":
        if required:
            _fail(file, f"{key} is required: {allowed}")
        return ""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        _fail(file, f"{key} must be {allowed}, got {value!r}")
    return value


def _flag(settings: dict[str, Any], settings_file: str, key: str, default: bool) -> str:
    value = settings.get(key, default)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower()
    _fail(settings_file, f"{key} must be true or false, got {value!r}")


def _is_id(value: Any, low: int, high: int) -> bool:
    """A JSON integer (not a boolean) from LOW to HIGH."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def read_params(
    params_path: str, settings_path: str, home: str, warn: Callable[[str], None]
) -> tuple[dict[str, object], list[str]]:
    """The checked parameters of ``params``: single values by name, then the repeated ones as ``kind=value``
    (``worker_group``, ``extra_step``, ``user``, ``user_group``, ``download_sha256``). ``warn`` is told, as
    they are found, about our settings misplaced in ``provisioning_parameters.json``."""
    params_file = os.path.basename(params_path)
    settings_file = os.path.basename(settings_path)
    settings = _load(settings_path, required=not params_path)
    api = not params_path
    slurm_config = settings.get("slurm_config", "legacy")
    if slurm_config not in ("api", "legacy"):
        _fail(settings_file, f"slurm_config must be api or legacy, got {slurm_config!r}")
    if api != (slurm_config == "api"):
        entry = "on_init_complete.sh (OnInitComplete)" if api else "on_create.sh (OnCreate)"
        _fail(
            settings_file,
            f"slurm_config {slurm_config!r} does not go with {entry}: api runs on_init_complete.sh, "
            "legacy on_create.sh with provisioning_parameters.json",
        )
    if api:
        params_file = settings_file
        params = {key: settings[key] for key in GROUP_KEYS if key in settings}
        if "accounting" in settings:
            _fail(
                settings_file,
                f"accounting is HyperPod's with slurm_config api (its own slurmdbd), got {settings['accounting']!r}",
            )
    else:
        params = _load(params_path, required=True)
    for key in SETTING_KEYS:
        if key in params:
            warn(f"{params_file}: {key} is ignored there: it belongs in {settings_file}")
    allowed = SETTING_KEYS + GROUP_KEYS if api else SETTING_KEYS
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        _fail(settings_file, f"unknown key {unknown[0]!r}: allowed are {', '.join(allowed)}")

    manager = params.get("workload_manager", "slurm")
    if manager != "slurm":
        _fail(params_file, f"workload_manager must be 'slurm' (these scripts set up Slurm), got {manager!r}")

    out: dict[str, object] = {
        "controller_group": _text(params, params_file, "controller_group", NAME, NAMES, required=True),
        "login_group": _text(params, params_file, "login_group", NAME, NAMES),
        "fsx_dns_name": _text(
            params, params_file, "fsx_dns_name", DNS, "a DNS name such as fs-0123.fsx.us-east-1.amazonaws.com"
        ),
        "fsx_mountname": _text(
            params, params_file, "fsx_mountname", NAME, "the FSx for Lustre mount name such as 'abcdefgh'"
        ),
        "fsx_mount_dir": _text(
            settings,
            settings_file,
            "fsx_mount_dir",
            ABS_DIR,
            "an absolute path such as '/fsx'",
            default="/fsx",
        ),
        "enable_observability": _flag(settings, settings_file, "enable_observability", False),
        "enable_enroot_pyxis": _flag(settings, settings_file, "enable_enroot_pyxis", True),
        "enable_docker": _flag(settings, settings_file, "enable_docker", False),
        "enable_pam_slurm_adopt": _flag(settings, settings_file, "enable_pam_slurm_adopt", False),
        "team_logins_on_controller": _flag(settings, settings_file, "team_logins_on_controller", False),
        "slurm_config": slurm_config,
        "fsx_managed": "true" if api and "fsx_mount_dir" in settings else "",
    }
    if bool(out["fsx_dns_name"]) != bool(out["fsx_mountname"]):
        _fail(
            params_file,
            "fsx_dns_name and fsx_mountname must be given together (or both left out to skip FSx), "
            f"got fsx_dns_name={out['fsx_dns_name']!r} fsx_mountname={out['fsx_mountname']!r}",
        )

    codes = settings.get("slurm_requeue_exit_codes", [75])
    if not isinstance(codes, list) or not all(_is_id(code, 0, 255) for code in codes):
        _fail(settings_file, f"slurm_requeue_exit_codes must be a list of exit codes 0-255, got {codes!r}")
    out["slurm_requeue_exit"] = ",".join(str(code) for code in codes)

    pins = settings.get("download_sha256", {})
    if not isinstance(pins, dict):
        _fail(settings_file, f"download_sha256 must map https:// URLs to SHA-256 digests, got {pins!r}")
    for url, digest in pins.items():
        if not re.fullmatch(r"https://[!-~]+", url):
            _fail(settings_file, f"download_sha256 keys must be https:// URLs without spaces, got {url!r}")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
            _fail(settings_file, f"download_sha256[{url!r}] must be 64 hexadecimal digits, got {digest!r}")

    lines = _worker_groups(params, params_file, out)
    lines += _extra_steps(settings, settings_file, home)
    out.update(_accounting(settings, settings_file))
    lines += _users(settings, settings_file)
    lines += [f"download_sha256={digest.lower()} {url}" for url, digest in pins.items()]
    return out, lines


def _worker_groups(params: dict[str, Any], params_file: str, out: dict[str, object]) -> list[str]:
    groups = params.get("worker_groups", [])
    if not isinstance(groups, list):
        _fail(
            params_file,
            f"worker_groups must be a list of {{instance_group_name, partition_name}}, got {groups!r}",
        )
    lines = []
    for index, group in enumerate(groups):
        where = f"worker_groups[{index}]"
        if not isinstance(group, dict):
            _fail(
                params_file,
                f"{where} must be an object with instance_group_name and partition_name, got {group!r}",
            )
        name = group.get("instance_group_name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            _fail(params_file, f"{where}.instance_group_name must be {NAMES}, got {name!r}")
        partition = group.get("partition_name") or name
        if not isinstance(partition, str) or not NAME.fullmatch(partition):
            _fail(params_file, f"{where}.partition_name must be {NAMES}, got {partition!r}")
        if name in (out["controller_group"], out["login_group"]):
            _fail(
                params_file, f"{where}.instance_group_name {name!r} is already the controller or login group"
            )
        lines.append(f"worker_group={name}:{partition}")
    return lines


def _extra_steps(settings: dict[str, Any], settings_file: str, home: str) -> list[str]:
    steps = settings.get("extra_steps", [])
    if not isinstance(steps, list):
        _fail(settings_file, f"extra_steps must be a list of {{name, script, roles}}, got {steps!r}")
    lines = []
    seen = set()
    for index, step in enumerate(steps):
        where = f"extra_steps[{index}]"
        if not isinstance(step, dict):
            _fail(settings_file, f"{where} must be an object with name, script and roles, got {step!r}")
        name = step.get("name")
        if not isinstance(name, str) or not STEP.fullmatch(name):
            _fail(settings_file, f"{where}.name must be 1-63 letters, digits, '-' or '_', got {name!r}")
        if name in seen:
            _fail(settings_file, f"{where}.name {name!r} is used twice")
        seen.add(name)
        script = step.get("script")
        if not isinstance(script, str) or not SCRIPT.fullmatch(script) or ".." in script.split("/"):
            _fail(
                settings_file,
                f"{where}.script must be a path relative to the lifecycle folder, got {script!r}",
            )
        if not os.path.isfile(os.path.join(home, script)):
            _fail(settings_file, f"{where}.script {script!r} is not in the lifecycle folder {home}")
        roles = step.get("roles", list(ROLES))
        if not isinstance(roles, list) or not roles or any(role not in ROLES for role in roles):
            _fail(
                settings_file, f"{where}.roles must be a non-empty list of {', '.join(ROLES)}, got {roles!r}"
            )
        lines.append(f"extra_step={name}:{script}:{','.join(roles)}")
    return lines


def _accounting(settings: dict[str, Any], settings_file: str) -> dict[str, object]:
    accounting = settings.get("accounting") or {"mode": "none"}
    if not isinstance(accounting, dict) or accounting.get("mode") not in ACCOUNTING_KEYS:
        _fail(
            settings_file,
            f"accounting must be an object with mode none, local or external, got {accounting!r}",
        )
    mode = accounting["mode"]
    extra = sorted(set(accounting) - ACCOUNTING_KEYS[mode] - {"mode"})
    if extra:
        _fail(settings_file, f"accounting.{extra[0]} is not a setting of mode {mode!r}")
    out: dict[str, object] = {"accounting_mode": mode}
    if mode == "external":
        field = {f"accounting.{key}": value for key, value in accounting.items()}  # messages name the field
        out["accounting_host"] = _text(
            field, settings_file, "accounting.host", DNS, "the database's DNS name", required=True
        )
        port = accounting.get("port", 3306)
        if isinstance(port, str) and port.isdigit():
            port = int(port)
        if not _is_id(port, 1, 65535):
            _fail(settings_file, f"accounting.port must be a TCP port 1-65535, got {port!r}")
        out["accounting_port"] = port
        out["accounting_user"] = _text(field, settings_file, "accounting.user", NAME, "a database user name")
        arn = accounting.get("secret_arn")
        found = SECRET_ARN.fullmatch(arn) if isinstance(arn, str) else None
        if not found:
            _fail(
                settings_file,
                "accounting.secret_arn must be the ARN of a Secrets Manager secret holding the database "
                f"password, got {arn!r}",
            )
        out["accounting_secret_arn"] = arn
        out["accounting_region"] = found.group(1)
        out["accounting_database"] = _text(
            field, settings_file, "accounting.database", DB_NAME, "1-64 letters, digits or '_'",
            default="slurm_acct_db",
        )  # fmt: skip
    elif mode == "local":
        out["accounting_database"] = "slurm_acct_db"
    return out


def _users(settings: dict[str, Any], settings_file: str) -> list[str]:
    users = settings.get("users", [])
    if not isinstance(users, list):
        _fail(settings_file, f"users must be a list of {{name, uid, gid, ssh_public_keys}}, got {users!r}")
    lines = []
    names, uids = set(), set()
    for index, user in enumerate(users):
        where = f"users[{index}]"
        if not isinstance(user, dict):
            _fail(
                settings_file,
                f"{where} must be an object with name, uid, gid and ssh_public_keys, got {user!r}",
            )
        unknown = sorted(set(user) - {"name", "uid", "gid", "groups", "ssh_public_keys"})
        if unknown:
            _fail(
                settings_file,
                f"{where}.{unknown[0]} is not a user setting: allowed are name, uid, gid, groups, ssh_public_keys",
            )
        name = user.get("name")
        if not isinstance(name, str) or not USER.fullmatch(name) or name in RESERVED:
            _fail(
                settings_file,
                f"{where}.name must be a Linux user name (lower-case letters, digits, '_' or '-', "
                f"at most 32) other than {', '.join(RESERVED)}, got {name!r}",
            )
        if name in names:
            _fail(settings_file, f"{where}.name {name!r} is used twice")
        ids = {}
        for key in ("uid", "gid"):
            value = user.get(key, user.get("uid"))
            if not _is_id(value, 2000, 59999):
                _fail(
                    settings_file,
                    f"{where}.{key} must be a number 2000-59999 (clear of the AMI's own users), got {value!r}",
                )
            ids[key] = value
        if ids["uid"] in uids:
            _fail(settings_file, f"{where}.uid {ids['uid']} is used twice")
        names.add(name)
        uids.add(ids["uid"])
        keys = user.get("ssh_public_keys", [])
        if not isinstance(keys, list) or not all(isinstance(k, str) and SSH_KEY.fullmatch(k) for k in keys):
            _fail(
                settings_file,
                f"{where}.ssh_public_keys must be a list of OpenSSH public keys "
                f"('ssh-ed25519 AAAA... comment'), got {keys!r}",
            )
        lines.append(f"user={name}:{ids['uid']}:{ids['gid']}")
        groups_of_user = user.get("groups", [])
        if not isinstance(groups_of_user, list):
            _fail(settings_file, f"{where}.groups must be a list of {{name, gid}}, got {groups_of_user!r}")
        for number, group in enumerate(groups_of_user):
            gname = group.get("name") if isinstance(group, dict) else None
            gid = group.get("gid") if isinstance(group, dict) else None
            if not isinstance(gname, str) or not USER.fullmatch(gname) or gname in RESERVED:
                _fail(
                    settings_file, f"{where}.groups[{number}].name must be a Linux group name, got {gname!r}"
                )
            if not _is_id(gid, 2000, 59999):
                _fail(settings_file, f"{where}.groups[{number}].gid must be a number 2000-59999, got {gid!r}")
            lines.append(f"user_group={name}:{gname}:{gid}")
    return lines


def _group_name(group: dict[str, Any]) -> str:
    return group.get("Name") or group.get("InstanceGroupName") or ""


def _addresses(group: dict[str, Any]) -> list[str]:
    return [i.get("CustomerIpAddress") for i in group.get("Instances") or [] if i.get("CustomerIpAddress")]


def detect_role(
    path: str, ips: Sequence[str], controller: str, login: str, workers: Sequence[str]
) -> list[str]:
    """The lines of ``role``: this node's ``role``, ``group``, ``partition``, ``node_ip``, ``instance_id``,
    ``controller_ips``, a ``warning`` per worker group without instances, and a ``worker_node`` per worker
    (``PARTITION:IP``). WORKERS are ``GROUP:PARTITION``."""
    partitions = dict(entry.split(":", 1) for entry in workers)
    resource_config = "resource_config.json"
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
        groups = config["InstanceGroups"]
        if not isinstance(groups, list):
            raise TypeError("InstanceGroups is not a list")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise Refused(resource_config, f"cannot read InstanceGroups from {path}: {error!r}", code=2) from None

    mine = None
    for group in groups:
        for instance in group.get("Instances") or []:
            if instance.get("CustomerIpAddress") in ips:
                mine = (group, instance)
                break
        if mine:
            break
    if mine is None:
        known = ", ".join(f"{_group_name(g)}={'/'.join(_addresses(g)) or '-'}" for g in groups) or "none"
        raise Refused(
            resource_config,
            f"this node's IPv4 addresses ({', '.join(ips) or 'none found'}) are not listed in {path} "
            f"(known instances: {known}); cannot tell this node's role",
            code=3,
        )

    group, instance = mine
    name = _group_name(group)
    if name == controller:
        role, partition = "controller", ""
    elif login and name == login:
        role, partition = "login", ""
    elif name in partitions:
        role, partition = "worker", partitions[name]
    else:
        raise Refused(
            resource_config,
            f"this node's instance group {name!r} is not controller_group {controller!r}, "
            f"login_group {login or '<none>'!r} or one of worker_groups {sorted(partitions)} "
            "in provisioning_parameters.json; cannot tell this node's role",
            code=3,
        )

    controller_ips = [ip for g in groups if _group_name(g) == controller for ip in _addresses(g)]
    if not controller_ips:
        raise Refused(
            resource_config, f"no instance of controller_group {controller!r} is listed in {path}", code=3
        )

    lines = [
        f"role={role}",
        f"group={name}",
        f"partition={partition}",
        f"node_ip={instance.get('CustomerIpAddress')}",
        f"instance_id={instance.get('InstanceId', '')}",
        f"controller_ips={','.join(controller_ips)}",
    ]
    present = {_group_name(g) for g in groups}
    for worker_group in partitions:
        if worker_group not in present:
            lines.append(f"warning=worker group {worker_group!r} has no instances in {path}")
    for g in groups:
        if _group_name(g) in partitions:
            for ip in _addresses(g):
                lines.append(f"worker_node={partitions[_group_name(g)]}:{ip}")
    return lines


def workload_manager(params_path: str) -> str:
    """``workload_manager`` of ``provisioning_parameters.json``: ``slurm`` unless the file says ``eks``."""
    try:
        with open(params_path, encoding="utf-8") as handle:
            value = json.load(handle).get("workload_manager", "slurm")
    except (OSError, ValueError, AttributeError):
        value = "slurm"  # the Slurm preflight says what is wrong with the file
    return value if value in ("slurm", "eks") else "slurm"


def has_fsx(params_path: str) -> bool:
    """Whether ``provisioning_parameters.json`` names an FSx file system."""
    with open(params_path, encoding="utf-8") as handle:
        params = json.load(handle)
    return bool(params.get("fsx_dns_name"))


def ssh_public_keys(settings_path: str) -> list[str]:
    """Every team user's public keys in ``training_clusters.json``: ``NAME:KEY``, in the file's order."""
    with open(settings_path, encoding="utf-8") as handle:
        settings = json.load(handle)
    return [
        "{}:{}".format(user["name"], key)
        for user in settings.get("users", [])
        for key in user.get("ssh_public_keys", [])
    ]


def main(argv: Sequence[str]) -> int:
    """Run a subcommand (see the module's docstring); its exit status."""
    command, args = (argv[0], list(argv[1:])) if argv else ("", [])
    try:
        if command == "params" and len(args) == 3:
            out, lines = read_params(args[0], args[1], args[2], lambda message: print(f"warning={message}"))
            for key, value in out.items():
                print(f"{key}={value}")
            print("\n".join(lines))
        elif command == "role" and len(args) >= 4:
            print("\n".join(detect_role(args[0], args[1].split(), args[2], args[3], args[4:])))
        elif command == "workload-manager" and len(args) == 1:
            print(workload_manager(args[0]))
        elif command == "has-fsx" and len(args) == 1:
            print("true" if has_fsx(args[0]) else "false")
        elif command == "ssh-keys" and len(args) == 1:
            for line in ssh_public_keys(args[0]):
                print(line)
        else:
            print(
                "usage: cluster_config.py params PARAMS_FILE SETTINGS_FILE HOME\n"
                "       cluster_config.py role RESOURCE_CONFIG IPS CONTROLLER_GROUP LOGIN_GROUP [GROUP:PARTITION ...]\n"
                "       cluster_config.py workload-manager PARAMS_FILE\n"
                "       cluster_config.py has-fsx PARAMS_FILE\n"
                "       cluster_config.py ssh-keys SETTINGS_FILE",
                file=sys.stderr,
            )
            return 64
    except Refused as refused:
        print(str(refused), file=sys.stderr)
        return refused.code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
