# shellcheck shell=bash
#
# Slurm accounting on the controller (training_clusters.json `accounting`), as the public reference
# does it (github.com/aws-samples/awsome-distributed-training, 1.architectures/5.sagemaker-hyperpod/
# LifecycleScripts/base-config: setup_rds_accounting.sh, setup_mariadb_accounting.sh) and the Slurm
# accounting guide describes it (https://slurm.schedmd.com/accounting.html):
#   external  a MySQL-compatible database of yours (Aurora MySQL from SlurmAccountingDatabase): host,
#             port and user come from the settings, the password from a Secrets Manager secret, read
#             with this node's execution role (`aws secretsmanager get-secret-value`)
#   local     MariaDB on the controller itself (small clusters; its data is lost with the controller)
# slurmdbd.conf (0600, owned by SlurmUser) points slurmdbd at the database; slurmdbd is started and
# checked (bounded); the cluster is registered once (`sacctmgr -i add cluster`); slurmctld starts after
# all of this (step slurm-controller).
#
# TLS to the external database, verified: the database requires secure transport
# (require_secure_transport, SlurmAccountingDatabase's parameter group), and every client here trusts
# only the RDS certificate authorities. Their bundle is fetched over HTTPS from AWS's truststore
# (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/UsingWithRDS.SSL.html), checked to hold
# only PEM certificates (openssl storeutl) and kept at TC_RDS_CA_BUNDLE; slurmdbd.conf names it in
# StorageParameters=SSL_CA=... (slurmdbd.conf(5): https://slurm.schedmd.com/slurmdbd.conf.html), and the
# mysql client that waits for the database verifies the server's certificate and name with it.
# TC_RDS_CA_BUNDLE_URL replaces the URL (tests: a file:// URL; nothing but https:// and file:// is
# fetched, and a redirect only to https://). slurm.conf's AccountingStorageType / Host / Port are among the
# settings lib/slurm.sh keeps applied (/etc/training-clusters/slurm-keys.conf) when HyperPod rewrites it.

TC_SLURMDBD_PORT="${TC_SLURMDBD_PORT:-6819}"
TC_SLURM_USER="${TC_SLURM_USER:-slurm}"
TC_AWS="${TC_AWS:-aws}"
TC_ACCOUNTING_ATTEMPTS="${TC_ACCOUNTING_ATTEMPTS:-5}"
TC_ACCOUNTING_RETRY_SLEEP="${TC_ACCOUNTING_RETRY_SLEEP:-10}"
# The external database's writer can take minutes to come up after the cluster resource is created.
TC_DATABASE_WAIT_ATTEMPTS="${TC_DATABASE_WAIT_ATTEMPTS:-60}"
TC_DATABASE_WAIT_SLEEP="${TC_DATABASE_WAIT_SLEEP:-10}"
# The local database's password, generated once (paths on the node).
TC_LOCAL_DB_PASSWORD_FILE="/etc/training-clusters/slurmdbd-db.password"
TC_LOCAL_DB_USER="slurm"
# The RDS certificate bundle (every commercial Region's CAs) and where it is kept on the node.
TC_RDS_CA_BUNDLE_URL="${TC_RDS_CA_BUNDLE_URL:-https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem}"
TC_RDS_CA_BUNDLE="/etc/training-clusters/rds-ca-bundle.pem"

# The slurm.conf settings of accounting, in the format of slurm-keys.conf ("<file> <Key> <Value>").
tc_accounting_slurm_keys() {
    [[ $TC_ACCOUNTING_MODE == none || -z $TC_ACCOUNTING_MODE ]] && return 0
    echo "slurm.conf AccountingStorageType accounting_storage/slurmdbd"
    # Client commands on login and worker nodes (sacct, sacctmgr) reach slurmdbd here.
    echo "slurm.conf AccountingStorageHost ${TC_NODE_IP}"
    echo "slurm.conf AccountingStoragePort ${TC_SLURMDBD_PORT}"
}

# Runs on the controller before slurmctld starts (on_create.sh orders slurm-config, accounting,
# slurm-controller): slurmctld that starts with accounting before slurmdbd answers never answers itself
# ("Still don't know my ClusterID"), and one that starts without it mints a ClusterID that later
# mismatches slurmdbd's. So: the database (created before slurmdbd's first start; slurmdbd 24.11 dies if
# it must create it in a fresh MariaDB), slurmdbd answering, the cluster registered, then slurmctld.
tc_setup_accounting() {
    local host port user password cluster ca_bundle="" bundle_changed=false
    cluster="$(tc_slurm_cluster_name)"
    case $TC_ACCOUNTING_MODE in
        external)
            host=$TC_ACCOUNTING_HOST
            port=$TC_ACCOUNTING_PORT
            tc_read_database_secret
            user=${TC_ACCOUNTING_USER:-$TC_DB_SECRET_USER}
            password=$TC_DB_SECRET_PASSWORD
            if [[ -z $user ]]; then
                tc_error "no database user: set accounting.user or store 'username' in the secret"
                return 1
            fi
            tc_install_rds_ca_bundle
            bundle_changed=$TC_FILE_CHANGED
            ca_bundle=$TC_RDS_CA_BUNDLE
            tc_prepare_external_database "$host" "$port" "$user" "$password"
            ;;
        local)
            tc_setup_local_mariadb
            host=localhost
            port=3306
            user=$TC_LOCAL_DB_USER
            password="$(<"${TC_ROOT}${TC_LOCAL_DB_PASSWORD_FILE}")"
            ;;
        *)
            tc_error "accounting mode '${TC_ACCOUNTING_MODE}' is not none, external or local"
            return 1
            ;;
    esac
    tc_write_slurmdbd_conf "$host" "$port" "$user" "$password" "$TC_ACCOUNTING_DATABASE" "$ca_bundle"
    local conf_changed=$TC_FILE_CHANGED
    # slurmdbd reads the CA file when it connects: a new bundle takes effect on a restart.
    [[ $bundle_changed == false ]] || conf_changed=true
    tc_install_slurmdbd_unit
    [[ $TC_FILE_CHANGED == false ]] || conf_changed=true
    tc_start_slurmdbd "$conf_changed"
    tc_register_cluster "$cluster"
    [[ $TC_ACCOUNTING_MODE != external ]] || tc_install_slurmdbd_password_refresh
    log "accounting: slurmdbd stores cluster '${cluster}' in ${host}:${port}/${TC_ACCOUNTING_DATABASE} as ${user}"
}

# The external database's login follows its secret: SlurmAccountingDatabase rotates it with alternating users
# and slurmdbd reads it only when it starts, so node/training-clusters-slurmdbd-password.sh (installed with an
# hourly timer) rewrites slurmdbd.conf's StorageUser/StoragePass and restarts slurmdbd when the secret changed.
tc_install_slurmdbd_password_refresh() {
    local -a args=(--install --secret-arn "$TC_ACCOUNTING_SECRET_ARN" --region "$TC_ACCOUNTING_REGION")
    [[ -z $TC_ACCOUNTING_USER ]] || args+=(--user "$TC_ACCOUNTING_USER")
    TC_ROOT="$TC_ROOT" "$BASH" "${TC_HOME}/node/training-clusters-slurmdbd-password.sh" "${args[@]}"
    log "slurmdbd's login follows ${TC_ACCOUNTING_SECRET_ARN} (training-clusters-slurmdbd-password.timer, hourly)"
}

# The external database (Aurora): its writer may still be starting when the controller boots, and
# slurmdbd's first start must not meet a database that is not there. Waits, bounded, until it answers
# (TC_DATABASE_WAIT_ATTEMPTS x TC_DATABASE_WAIT_SLEEP), then creates slurmdbd's database if missing.
tc_prepare_external_database() {
    local host=$1 port=$2 user=$3 password=$4 attempt answer="" defaults
    if ! command -v mysql >/dev/null 2>&1; then
        apt_get install -y --no-install-recommends mariadb-client
    fi
    defaults="$(tc_mysql_defaults "$host" "$port" "$user" "$password" "$TC_RDS_CA_BUNDLE")"
    for ((attempt = 1; attempt <= TC_DATABASE_WAIT_ATTEMPTS; attempt++)); do
        if answer="$(mysql --defaults-extra-file="$defaults" --connect-timeout=5 -N -e 'SELECT 1' 2>&1)"; then
            break
        fi
        answer=${answer//$'\n'/ | }
        log "waiting for the database ${host}:${port} (${attempt}/${TC_DATABASE_WAIT_ATTEMPTS}): ${answer}"
        if ((attempt == TC_DATABASE_WAIT_ATTEMPTS)); then
            rm -f -- "$defaults"
            tc_error "the database ${host}:${port} did not answer within" \
                "$((TC_DATABASE_WAIT_ATTEMPTS * TC_DATABASE_WAIT_SLEEP))s: ${answer} (is its writer instance" \
                "available, and does its security group admit this node?)"
            return 1
        fi
        sleep "$TC_DATABASE_WAIT_SLEEP"
    done
    mysql --defaults-extra-file="$defaults" --connect-timeout=5 <<EOF
CREATE DATABASE IF NOT EXISTS \`${TC_ACCOUNTING_DATABASE}\`;
EOF
    rm -f -- "$defaults"
    log "the database ${host}:${port} answers and holds ${TC_ACCOUNTING_DATABASE}"
}

# Prints the path of a 0600 client option file holding the connection (the password never reaches a
# command line or the log). The caller removes it. With CA_FILE the client uses TLS and verifies the
# server's certificate and host name against it (CA_FILE: the path on the node): MariaDB's client with ssl-verify-server-cert
# (https://mariadb.com/docs/server/connect/clients/mariadb-client/mariadb-command-line-client), MySQL's
# with ssl-mode=VERIFY_IDENTITY (https://dev.mysql.com/doc/refman/8.0/en/connection-options.html); each
# ignores the other's option, as the loose- prefix asks.
tc_mysql_defaults() {
    local host=$1 port=$2 user=$3 password=$4 ca_file=${5:-} dir="${TC_ROOT}/etc/training-clusters" file
    tc_mkdir "$dir"
    file="$(umask 077 && mktemp -p "$dir" --suffix=.mysql-client)"
    password=${password//\\/\\\\}
    password=${password//\"/\\\"}
    printf '[client]\nhost=%s\nport=%s\nuser=%s\npassword="%s"\n' "$host" "$port" "$user" "$password" >"$file"
    if [[ -n $ca_file ]]; then
        printf 'ssl-ca=%s\nloose-ssl-verify-server-cert\nloose-ssl-mode=VERIFY_IDENTITY\n' "$ca_file" >>"$file"
    fi
    printf '%s\n' "$file"
}

# The RDS certificate bundle at TC_RDS_CA_BUNDLE (0644: slurmdbd reads it as SlurmUser), fetched from
# TC_RDS_CA_BUNDLE_URL and checked to hold PEM certificates and nothing else; a failed fetch or anything
# else fails the step with one line. Sets TC_FILE_CHANGED (the bundle changed since the last run).
tc_install_rds_ca_bundle() {
    local bundle="${TC_ROOT}${TC_RDS_CA_BUNDLE}" fetched answer="" problem
    if ! command -v openssl >/dev/null 2>&1; then
        apt_get install -y --no-install-recommends openssl
    fi
    tc_mkdir_parent "$bundle"
    fetched="$(mktemp -p "${bundle%/*}" --suffix=.rds-ca)"
    log "fetching the RDS certificate bundle from ${TC_RDS_CA_BUNDLE_URL}"
    if ! answer="$(curl --fail --silent --show-error --location --proto '=https,file' --proto-redir '=https' \
        --retry 5 --retry-delay 5 --connect-timeout 20 --max-time 120 -o "$fetched" "$TC_RDS_CA_BUNDLE_URL" 2>&1)"; then
        rm -f -- "$fetched"
        tc_error "could not fetch the RDS certificate bundle from ${TC_RDS_CA_BUNDLE_URL}: ${answer//$'\n'/ | }"
        return 1
    fi
    if ! problem="$(tc_pem_certificates_problem "$fetched")"; then
        rm -f -- "$fetched"
        tc_error "${TC_RDS_CA_BUNDLE_URL} is no certificate bundle: ${problem}"
        return 1
    fi
    tc_write_file "$bundle" 0644 <"$fetched"
    rm -f -- "$fetched"
}

# Prints why FILE is not a bundle of PEM certificates and fails; prints nothing when it is one: openssl
# loads every certificate in it (a truncated or corrupt one fails) and finds as many as the file has
# BEGIN lines (a key or other PEM object among them fails too).
tc_pem_certificates_problem() {
    local file=$1 begins found out
    begins="$(grep -c -- '-----BEGIN ' "$file" || true)"
    if ((begins == 0)); then
        echo "it holds no PEM certificate ($(wc -c <"$file") bytes)"
        return 1
    fi
    if ! out="$(openssl storeutl -noout -certs "$file" 2>&1)"; then
        echo "openssl cannot read every certificate in it (${begins} PEM objects)"
        return 1
    fi
    found="$(sed -n 's/^Total found: \([0-9][0-9]*\)$/\1/p' <<<"$out")"
    if [[ $found != "$begins" ]]; then
        echo "openssl finds ${found:-no} certificates among its ${begins} PEM objects"
        return 1
    fi
}

# ClusterName from HyperPod's slurm.conf (Slurm lower-cases it), else the HyperPod cluster's name.
tc_slurm_cluster_name() {
    local name
    name="$(awk '{ line = tolower($0) }
        line ~ /^[ \t]*clustername[ \t]*=/ { sub(/^[^=]*=[ \t]*/, ""); sub(/[ \t#].*$/, ""); value = $0 }
        END { print tolower(value) }' "${TC_SLURM_ETC}/slurm.conf")"
    if [[ -z $name ]]; then
        tc_error "${TC_SLURM_ETC}/slurm.conf sets no ClusterName: cannot register the cluster with slurmdbd"
        return 1
    fi
    printf '%s\n' "$name"
}

# Sets TC_DB_SECRET_USER and TC_DB_SECRET_PASSWORD from the secret (an RDS secret's JSON, or the bare
# password). The secret never reaches the log or a command line.
tc_read_database_secret() {
    local secret fields
    if ! command -v "$TC_AWS" >/dev/null 2>&1; then
        tc_error "the AWS CLI ('${TC_AWS}') is not installed: it reads the database password from" \
            "${TC_ACCOUNTING_SECRET_ARN}"
        return 1
    fi
    log "reading the database password from ${TC_ACCOUNTING_SECRET_ARN} (with this node's role)"
    # Not `secret="$(tc_retry ...)"`: the retry's log lines would land in the secret.
    tc_retry "$TC_ACCOUNTING_ATTEMPTS" "$TC_ACCOUNTING_RETRY_SLEEP" tc__fetch_secret
    secret=$TC_DB_SECRET_RAW
    TC_DB_SECRET_RAW=""
    fields="$("$TC_PYTHON" -I -S -c '
import json, sys
raw = sys.stdin.read().strip()
try:
    data = json.loads(raw)
except ValueError:
    data = {"password": raw}
if not isinstance(data, dict):
    data = {"password": raw}
password, user = data.get("password"), data.get("username") or ""
if not isinstance(password, str) or not password:
    sys.exit("the secret holds no password (want JSON with \"password\", as RDS writes it, or the password)")
if any(c.isspace() for c in password) or any(c.isspace() for c in user):
    sys.exit("the password or username in the secret holds white space, which slurmdbd.conf cannot carry")
print(user)
print(password)
' <<<"$secret")"
    TC_DB_SECRET_USER="${fields%%$'\n'*}"
    TC_DB_SECRET_PASSWORD="${fields#*$'\n'}"
}

tc__fetch_secret() {
    TC_DB_SECRET_RAW="$("$TC_AWS" secretsmanager get-secret-value --region "$TC_ACCOUNTING_REGION" \
        --secret-id "$TC_ACCOUNTING_SECRET_ARN" --query SecretString --output text)"
}

# MariaDB on the controller: the database and its user, password generated once and kept in a 0600 file.
tc_setup_local_mariadb() {
    local password_file="${TC_ROOT}${TC_LOCAL_DB_PASSWORD_FILE}" password
    if tc_pkg_installed mariadb-server; then
        log "mariadb-server is already installed"
    else
        apt_get install -y --no-install-recommends mariadb-server
    fi
    systemctl enable --now mariadb
    if [[ ! -s $password_file ]]; then
        tc_mkdir_parent "$password_file"
        (
            umask 077
            "$TC_PYTHON" -I -S -c 'import secrets; print(secrets.token_urlsafe(24).replace("-", "A").replace("_", "B"))' \
                >"${password_file}.tc-new.$$"
        )
        mv -f -- "${password_file}.tc-new.$$" "$password_file"
        log "generated the local database password in ${TC_LOCAL_DB_PASSWORD_FILE} (0600)"
    fi
    password="$(<"$password_file")"
    # Idempotent SQL, through stdin (never on a command line); root logs in through the unix socket.
    mysql --protocol=socket -u root <<EOF
CREATE DATABASE IF NOT EXISTS ${TC_ACCOUNTING_DATABASE};
CREATE USER IF NOT EXISTS '${TC_LOCAL_DB_USER}'@'localhost' IDENTIFIED BY '${password}';
ALTER USER '${TC_LOCAL_DB_USER}'@'localhost' IDENTIFIED BY '${password}';
GRANT ALL ON ${TC_ACCOUNTING_DATABASE}.* TO '${TC_LOCAL_DB_USER}'@'localhost';
EOF
    log "MariaDB on this node holds ${TC_ACCOUNTING_DATABASE} for user ${TC_LOCAL_DB_USER}"
}

# slurmdbd.conf: 0600 and owned by SlurmUser (slurmdbd refuses a file others can read, it holds the
# password). '#' starts a comment in Slurm's files: it is escaped.
tc_write_slurmdbd_conf() {
    local host=$1 port=$2 user=$3 password=$4 database=$5 ca_bundle=${6:-} conf="${TC_SLURM_ETC}/slurmdbd.conf"
    local umask_was storage_parameters=""
    # StorageParameters SSL_CA: slurmdbd's client library uses TLS and verifies the server against it.
    [[ -z $ca_bundle ]] || storage_parameters="StorageParameters=SSL_CA=${ca_bundle}"$'\n'
    if ! id -u "$TC_SLURM_USER" >/dev/null 2>&1; then
        tc_error "user ${TC_SLURM_USER} (SlurmUser) does not exist: these scripts need the HyperPod Slurm AMI"
        return 1
    fi
    # Not in a subshell: the caller reads TC_FILE_CHANGED (slurmdbd restarts when the file changed).
    umask_was="$(umask)"
    umask 077
    tc_write_file "$conf" 0600 <<EOF
# Written by the training-clusters lifecycle scripts (on_create.sh, step accounting).
AuthType=auth/munge
DbdHost=localhost
DbdPort=${TC_SLURMDBD_PORT}
SlurmUser=${TC_SLURM_USER}
LogFile=/var/log/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=${host}
StoragePort=${port}
StorageUser=${user}
StoragePass=${password//#/\\#}
StorageLoc=${database}
${storage_parameters}PurgeStepAfter=3month
PurgeJobAfter=12month
EOF
    umask "$umask_was"
    chown "${TC_SLURM_USER}:${TC_SLURM_USER}" "$conf"
}

# The AMI may not ship a slurmdbd unit (the reference writes one): write it when none exists.
tc_install_slurmdbd_unit() {
    local unit=""
    unit="$(tc_systemd_unit_path slurmdbd.service || true)"
    if [[ -n $unit ]] && ! grep -q '^# Written by the training-clusters' "$unit"; then
        log "slurmdbd.service comes with the AMI (${unit#"$TC_ROOT"})"
    else
        tc_write_file "${TC_ROOT}/etc/systemd/system/slurmdbd.service" 0644 <<'EOF'
# Written by the training-clusters lifecycle scripts (on_create.sh, step accounting).
[Unit]
Description=Slurm database daemon
After=network-online.target munge.service mariadb.service
Wants=network-online.target
ConditionPathExists=/opt/slurm/etc/slurmdbd.conf

[Service]
Type=simple
ExecStart=/opt/slurm/sbin/slurmdbd -D -s
ExecReload=/bin/kill -HUP $MAINPID
LimitNOFILE=65536
Restart=on-failure
RestartSec=10

[Install]
WantedBy=multi-user.target
EOF
    fi
}

# tc_start_slurmdbd CHANGED: (re)start slurmdbd when its configuration CHANGED or it is not running,
# then wait (bounded) until it is active and answers sacctmgr.
tc_start_slurmdbd() {
    local changed=$1 attempt state="" answer=""
    systemctl daemon-reload
    systemctl enable slurmdbd
    if [[ $changed == true ]] || ! systemctl is-active --quiet slurmdbd; then
        systemctl restart slurmdbd
    else
        log "slurmdbd already runs with this configuration: not restarted"
    fi
    for ((attempt = 1; attempt <= TC_SLURM_START_WAIT_ATTEMPTS; attempt++)); do
        state="$(systemctl is-active slurmdbd 2>&1 || true)"
        answer="$(tc_slurm_command sacctmgr -n -P show cluster format=cluster 2>&1 || true)"
        if [[ $state == active && $answer != *rror* ]]; then
            log "slurmdbd is active and answers sacctmgr"
            return 0
        fi
        answer=${answer//$'\n'/ | }
        log "waiting for slurmdbd (${attempt}/${TC_SLURM_START_WAIT_ATTEMPTS}): slurmdbd is ${state:-unknown};" \
            "sacctmgr says: ${answer:-<no output>}"
        sleep "$TC_SLURM_START_WAIT_SLEEP"
    done
    tc_error "slurmdbd is not up after $((TC_SLURM_START_WAIT_ATTEMPTS * TC_SLURM_START_WAIT_SLEEP))s:" \
        "slurmdbd is ${state:-unknown}, sacctmgr says '${answer:-nothing}' (see journalctl -u slurmdbd," \
        "/var/log/slurmdbd.log, and that the database's security group admits this node)"
    return 1
}

# `sacctmgr -i add cluster` once, before slurmctld starts with accounting (it then finds its cluster).
tc_register_cluster() {
    local cluster=$1 known
    known="$(tc_slurm_command sacctmgr -n -P show cluster format=cluster)"
    if grep -qxF -- "$cluster" <<<"$known"; then
        log "cluster ${cluster} is already registered with slurmdbd"
        return 0
    fi
    tc_slurm_command sacctmgr -i add cluster "$cluster"
    log "registered cluster ${cluster} with slurmdbd"
}

# A Slurm client command from /opt/slurm/bin (not on the lifecycle script's PATH), else from PATH.
tc_slurm_command() {
    local command=$1
    shift
    if [[ -x ${TC_ROOT}/opt/slurm/bin/${command} ]]; then
        command="${TC_ROOT}/opt/slurm/bin/${command}"
    fi
    "$command" "$@"
}
