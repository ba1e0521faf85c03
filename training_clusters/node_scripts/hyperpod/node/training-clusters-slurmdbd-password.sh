#!/usr/bin/env bash
#
# training-clusters-slurmdbd-password: keep slurmdbd's database login (slurmdbd.conf's StorageUser and
# StoragePass) equal to the one in its Secrets Manager secret, on the controller of a HyperPod cluster whose
# accounting database is external.
#
#   training-clusters-slurmdbd-password --secret-arn ARN --region REGION [--user NAME]
#       read the secret now (with this node's role); when its user or password differs from slurmdbd.conf's,
#       rewrite the two lines atomically (0600, owned as before) and restart slurmdbd
#   training-clusters-slurmdbd-password --install --secret-arn ARN --region REGION [--user NAME]
#       install as /usr/local/sbin/training-clusters-slurmdbd-password with a timer that runs it hourly
#
# Why: slurmdbd reads its password only when it starts, and SlurmAccountingDatabase rotates the secret with
# alternating users (the rotation sets a new password on the user slurmdbd is NOT using, then makes that user
# the secret's current one). slurmdbd keeps working on its old login until the following rotation changes it,
# one rotation period later; this timer moves it to the new login within the hour. --user keeps a user name
# the settings fixed (accounting.user) instead of the secret's.
#
# A failing run (secret unreadable, no password in it, slurmdbd.conf missing) prints one line, exits 1 and
# leaves slurmdbd.conf and slurmdbd as they were; the timer tries again an hour later. The password reaches
# no command line and no log. TC_ROOT (default: the real root) prefixes the paths, for tests.
set -euo pipefail

COMMAND="/usr/local/sbin/training-clusters-slurmdbd-password"
UNIT="training-clusters-slurmdbd-password"
CONF="/opt/slurm/etc/slurmdbd.conf"
AWS="${TC_AWS:-aws}"
PYTHON="${TC_PYTHON:-python3}"

say() { printf 'training-clusters-slurmdbd-password: %s\n' "$*"; }
die() {
    say "error: $1" >&2
    exit "${2:-1}"
}

# install ARGS...: this script as COMMAND, a oneshot service running it with ARGS, and its hourly timer.
install_refresh() {
    local root=${TC_ROOT:-}
    mkdir -p -- "${root}${COMMAND%/*}" "${root}/etc/systemd/system"
    cp -- "${BASH_SOURCE[0]}" "${root}${COMMAND}"
    chmod 0755 -- "${root}${COMMAND}"
    cat >"${root}/etc/systemd/system/${UNIT}.service" <<EOF
# Written by training-clusters-slurmdbd-password --install (cdk-training-clusters).
[Unit]
Description=slurmdbd's database login follows its Secrets Manager secret (rotated with alternating users)
After=network-online.target slurmdbd.service
Wants=network-online.target
ConditionPathExists=${CONF}

[Service]
Type=oneshot
ExecStart=${COMMAND} $*
EOF
    cat >"${root}/etc/systemd/system/${UNIT}.timer" <<EOF
# Written by training-clusters-slurmdbd-password --install (cdk-training-clusters).
[Unit]
Description=Hourly: slurmdbd's database login follows its Secrets Manager secret

[Timer]
OnBootSec=10min
OnUnitActiveSec=1h
RandomizedDelaySec=5min

[Install]
WantedBy=timers.target
EOF
    systemctl daemon-reload
    systemctl enable --now "${UNIT}.timer"
    say "installed ${COMMAND}, ${UNIT}.service and ${UNIT}.timer (hourly)"
}

# The rewrite, in Python (python3 ships on HyperPod's AMIs): the secret's JSON on stdin, slurmdbd.conf and the
# fixed user (or "") as arguments. Prints "unchanged" or "changed USER"; exits non-zero with one line otherwise.
# The new file is written beside the old one (0600, the old one's owner) and renamed over it.
REWRITE="$(cat <<'PY'
import json, os, sys

conf, user = sys.argv[1], sys.argv[2]
try:
    data = json.loads(sys.stdin.read())
except ValueError:
    data = None
if not isinstance(data, dict) or not isinstance(data.get("password"), str) or not data["password"]:
    sys.exit("the secret holds no JSON password (want username and password, as RDS writes them)")
password, name = data["password"], user or data.get("username") or ""
if not isinstance(name, str) or not name:
    sys.exit("the secret holds no username")
if any(c.isspace() for c in password + name):
    sys.exit("the secret's username or password holds white space, which slurmdbd.conf cannot carry")
with open(conf, encoding="utf-8") as handle:
    old_text = handle.read()
lines = old_text.splitlines()
# '#' starts a comment in Slurm's files: the password's are escaped, as the lifecycle script writes them.
wanted = {"StorageUser": name, "StoragePass": password.replace("#", "\\#")}
found = set()
for index, line in enumerate(lines):
    key = line.split("=", 1)[0].strip()
    if key in wanted and "=" in line:
        lines[index] = f"{key}={wanted[key]}"
        found.add(key)
missing = sorted(set(wanted) - found)
if missing:
    sys.exit(f"{conf} has no {missing[0]}= line")
new_text = "\n".join(lines) + "\n"
if new_text == old_text:
    print("unchanged")
    sys.exit(0)
old = os.stat(conf)
temporary = f"{conf}.tc-new.{os.getpid()}"
fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
try:
    os.fchown(fd, old.st_uid, old.st_gid)
    os.fchmod(fd, 0o600)
    os.write(fd, new_text.encode())
    os.fsync(fd)
finally:
    os.close(fd)
os.replace(temporary, conf)
print(f"changed {name}")
PY
)"

# refresh ARN REGION USER: the secret into slurmdbd.conf; restarts slurmdbd when the file changed.
refresh() {
    local arn=$1 region=$2 user=$3 conf="${TC_ROOT:-}${CONF}" secret errors answer outcome
    [[ -f $conf ]] || die "${CONF} does not exist: nothing to keep in step with ${arn}"
    errors="$(mktemp)"
    if ! secret="$("$AWS" secretsmanager get-secret-value --region "$region" --secret-id "$arn" \
        --query SecretString --output text 2>"$errors")"; then
        answer="$(<"$errors")"
        answer=${answer//$'\n'/ | }
        rm -f -- "$errors"
        die "cannot read ${arn} (slurmdbd.conf left as it is): ${answer:0:300}"
    fi
    rm -f -- "$errors"
    if ! outcome="$("$PYTHON" -I -S -c "$REWRITE" "$conf" "$user" <<<"$secret" 2>&1)"; then
        die "${outcome//$'\n'/ | } (slurmdbd.conf left as it is)"
    fi
    if [[ $outcome == unchanged ]]; then
        say "slurmdbd.conf already holds the secret's login: nothing to do"
        return 0
    fi
    say "slurmdbd.conf now logs in as ${outcome#changed }: restarting slurmdbd"
    systemctl restart slurmdbd || die "slurmdbd did not restart with the new login (systemctl status slurmdbd)"
}

main() {
    local install="" arn="" region="" user=""
    local -a args=("$@")
    while (($#)); do
        case $1 in
            --install) install=1; shift ;;
            --secret-arn) arn=${2:-}; shift 2 || die "--secret-arn needs an ARN" 2 ;;
            --region) region=${2:-}; shift 2 || die "--region needs a Region" 2 ;;
            --user) user=${2:-}; shift 2 || die "--user needs a name" 2 ;;
            *) die "unknown argument '$1' (expected --install, --secret-arn ARN, --region REGION, --user NAME)" 2 ;;
        esac
    done
    [[ $arn =~ ^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+$ ]] ||
        die "--secret-arn must be a Secrets Manager secret's ARN, got '${arn}'" 2
    [[ $region =~ ^[a-z]{2}(-[a-z]+)+-[0-9]+$ ]] || die "--region must be an AWS Region, got '${region}'" 2
    [[ -z $user || $user =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "--user must be a database user name, got '${user}'" 2
    if [[ -n $install ]]; then
        local -a unit_args=()
        local arg
        for arg in "${args[@]}"; do
            [[ $arg == --install ]] || unit_args+=("$arg")
        done
        install_refresh "${unit_args[@]}"
        return
    fi
    refresh "$arn" "$region" "$user"
}

main "$@"
