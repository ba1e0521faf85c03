"""Tenants stay in their lane on the nodes (issue 40), on the real-Slurm bed as two users, alice and bob.

A HyperPod-like cluster (hyperpod_bed.py: controller, login node, two workers, booted Debian 13 machines running
our on_create.sh) with the team ``alice`` and ``bob``, plus one bare machine standing in for a PCS node:

- **enroot's folders** (High 2): enroot cannot be installed here (Debian has no ``enroot`` package,
  ``apt-cache policy enroot`` names no candidate, and NVIDIA's GitHub release assets are out of reach), so the
  test runs what the lifecycle scripts run (``tc_configure_enroot`` of lib/enroot_pyxis.sh, i.e.
  shared/training-clusters-enroot.sh) on a worker, resolves the configuration as enroot 3.5 does
  (github.com/NVIDIA/enroot v3.5.0 ``enroot.in``: ``config::load`` reads ``/etc/enroot/enroot.conf`` line by line
  and exports ``$(eval echo "$value")``, then ``mkdir -p`` the cache, data and runtime paths with umask 077; the
  config path defaults to ``${XDG_CONFIG_HOME:-$HOME/.config}/enroot``) as alice and as bob, and has bob try
  every write that would reach alice's containers: a layer planted in her cache (``docker::_download_extract``
  trusts a digest's file by name), a hook in her config path (``runtime.sh`` runs ``hooks.d``), her runtime,
  data and temporary folders, Pyxis' per-uid folder (``pyxis_slurmstepd.c`` accepts an existing one). Real
  kernel permissions, real useradd, real systemd-tmpfiles (the folders come back at boot).
- **Order on a new worker** (Medium 6): a replaced worker with ``enable_pam_slurm_adopt`` (Debian's own
  ``libpam-slurm-adopt``, matching the bed's Slurm, standing in for the module the AMI ships) is watched from
  inside while on_create.sh runs: the moment alice's account appears, the IMDS guard's rules and
  pam_slurm_adopt's line are already there; then alice, who holds no job there, is refused by sshd, and by IMDS.
- **A PCS-like node** (High 3): the boothook of :func:`~training_clusters.constructs.pcs.cluster.imds_guard_boothook`,
  run as root as cloud-init runs a boothook, on a bare machine; alice is refused by IMDS (a listener on
  169.254.169.254 in the bed's own network namespace), root is answered, also after a reboot.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration import slurm_bed
from tests.integration.conftest import TIMINGS
from tests.integration.hyperpod_bed import ALICE, Cluster, boot_cluster
from tests.integration.slurm_bed import (
    REPO,
    SSH,
    Node,
    imds_answer,
    missing_prerequisites,
    reach_imds,
    wait_until,
)
from training_clusters.constructs.pcs.cluster import imds_guard_boothook

pytestmark = pytest.mark.integration

BOB = {"name": "bob", "uid": 2002}
SETTINGS = {"enable_enroot_pyxis": False, "users": [ALICE, BOB], "accounting": {"mode": "none"}}
#: A public layer's digest (any 64 hex digits: enroot looks the file up by name only).
DIGEST = "sha256:" + "a" * 64
PCS_NODE_IP = "10.1.3.31"

#: enroot 3.5's configuration as enroot.in resolves it for the user running it (config::load, the XDG defaults,
#: the mkdir with umask 077), printed KEY=VALUE. A transcription of those lines, not enroot itself.
RESOLVE = r"""
set -euo pipefail
while IFS=$' \t=' read -r key value; do
    if [[ "${key}" =~ ^ENROOT_[[:upper:]_]+$ ]]; then
        [ -n "${!key-}" ] || export "${key}=$(eval echo "${value}")"
    fi
done < /etc/enroot/enroot.conf
export XDG_CONFIG_HOME="${XDG_CONFIG_HOME:-$HOME/.config}"
export ENROOT_CONFIG_PATH="${ENROOT_CONFIG_PATH:-${XDG_CONFIG_HOME}/enroot}"
if [[ -z ${RESOLVE_ONLY-} ]]; then
    (umask 077 && mkdir -p "${ENROOT_CACHE_PATH}" "${ENROOT_DATA_PATH}" "${ENROOT_RUNTIME_PATH}")
fi
for key in ENROOT_RUNTIME_PATH ENROOT_DATA_PATH ENROOT_CACHE_PATH ENROOT_TEMP_PATH ENROOT_CONFIG_PATH; do
    printf '%s=%s\n' "$key" "${!key}"
done
"""


def pam_slurm_adopt_deb(root: Path) -> Path:
    """Debian's libpam-slurm-adopt of the bed's Slurm version, downloaded once with apt from this machine's
    Debian mirror (like the root itself) into .cache/debs."""
    version = subprocess.run(
        ["chroot", str(root), "dpkg-query", "-W", "-f=${Version}", "slurmd"], capture_output=True, text=True,
        check=True,
    ).stdout.strip()  # fmt: skip
    folder = REPO / ".cache" / "debs"
    deb = folder / f"libpam-slurm-adopt_{version.replace(':', '%3a')}_amd64.deb"
    if deb.is_file():
        return deb
    folder.mkdir(parents=True, exist_ok=True)
    mirror = subprocess.run(
        ["bash", "-c", f"source {REPO}/tests/integration/host_mirror.sh; host_mirror"], capture_output=True,
        text=True, check=False,
    ).stdout.strip() or "http://deb.debian.org/debian"  # fmt: skip
    apt = folder / "apt"
    for part in ("lists/partial", "cache/archives/partial"):
        (apt / part).mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(f"deb [trusted=yes] {mirror} trixie main\n")
    options = [f"-o=Dir::Etc::sourcelist={apt / 'sources.list'}", "-o=Dir::Etc::sourceparts=-",
               f"-o=Dir::State::lists={apt / 'lists'}", f"-o=Dir::Cache={apt / 'cache'}",
               "-o=APT::Sandbox::User=root"]  # fmt: skip
    for command in (["update"], ["download", f"libpam-slurm-adopt={version}"]):
        done = subprocess.run(
            ["apt-get", "-q", *options, *command], cwd=folder, capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.fail(f"cannot get libpam-slurm-adopt {version} from {mirror}: {done.stderr.strip()}")
    return deb


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = missing_prerequisites()
    if reason:
        pytest.fail(reason)
    started = time.monotonic()
    made = boot_cluster(tmp_path_factory.mktemp("tenants"), SETTINGS)
    TIMINGS.append(
        (
            "tenants",
            "HyperPod-like cluster with alice and bob: boot + on_create.sh",
            time.monotonic() - started,
        )
    )
    try:
        for ip, run in made.runs.items():
            assert run.returncode == 0, f"{ip}:\n{run.output}"
        yield made
    finally:
        made.bed.__exit__(None, None, None)


@pytest.fixture(scope="module")
def metadata(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with slurm_bed.emulated_imds(cluster.bed, tmp_path_factory.mktemp("imds")):
        yield


# -- High 2: enroot -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def enroot_worker(cluster: Cluster) -> Node:
    """A worker whose enroot configuration and folders are what step enroot-pyxis writes (its function, run
    with the node's own settings), and a home for bob with his own .config."""
    worker = cluster.workers[0]
    configured = worker.sh(
        f"cd {slurm_bed.LIFECYCLE_ON_NODE} && TC_HOME=$PWD TC_ROLE=worker bash -c "
        "'set -euo pipefail; source lib/common.sh; source lib/cluster_config.sh; source lib/apt.sh; "
        "source lib/enroot_pyxis.sh; tc_preflight >/dev/null; tc_configure_enroot'",
        check=False,
    )
    assert configured.returncode == 0, configured.stdout + configured.stderr
    return worker


def resolved(node: Node, user: str, *, make: bool = True) -> dict[str, str]:
    """USER's enroot paths; with ``make``, created as enroot creates them on its first run."""
    done = node.sh(RESOLVE if make else "RESOLVE_ONLY=1\n" + RESOLVE, user=user, check=False)
    assert done.returncode == 0, done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines())


#: What bob tries against alice's paths (as enroot resolves them for her, before her first run), formatted
#: with them: each would put his file where her containers read, or make her folder his.
ATTACKS = {
    "plant a layer in her cache": "mkdir -p {ENROOT_CACHE_PATH} && touch {ENROOT_CACHE_PATH}/" + DIGEST,
    "add a hook to her config": "mkdir -p {ENROOT_CONFIG_PATH}/hooks.d && touch {ENROOT_CONFIG_PATH}/hooks.d/x.sh",
    "pre-create her runtime": "mkdir -p {ENROOT_RUNTIME_PATH} && chmod 777 {ENROOT_RUNTIME_PATH}",
    "pre-create her data": "mkdir -p {ENROOT_DATA_PATH} && chmod 777 {ENROOT_DATA_PATH}",
    "write in her temporary folder": "touch {ENROOT_TEMP_PATH}/x",
    "pre-create Pyxis' folder of her uid": "mkdir -p /run/pyxis/2001 && chmod 777 /run/pyxis/2001",
    "rename her cache": "mv {ENROOT_CACHE_PATH} {ENROOT_CACHE_PATH}.old",
    "link a new user's cache elsewhere": "ln -s /tmp {ENROOT_CACHE_PATH}/../user-2099",
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_bob_cannot_plant_pre_create_or_write_what_alices_containers_read(
    enroot_worker: Node, attack: str
) -> None:
    paths = resolved(enroot_worker, "alice", make=False)
    done = enroot_worker.sh(ATTACKS[attack].format(**paths), user="bob", check=False)
    assert done.returncode != 0, f"bob could {attack}: {ATTACKS[attack].format(**paths)}"
    assert re.search(r"Permission denied|Operation not permitted", done.stderr), done.stderr


def test_enroot_resolves_a_folder_of_each_users_own(enroot_worker: Node) -> None:
    alice, bob = resolved(enroot_worker, "alice"), resolved(enroot_worker, "bob")
    assert alice == {
        "ENROOT_RUNTIME_PATH": "/var/lib/enroot/runtime/user-2001",
        "ENROOT_DATA_PATH": "/var/lib/enroot/data/user-2001",
        "ENROOT_CACHE_PATH": "/var/lib/enroot/cache/user-2001",
        "ENROOT_TEMP_PATH": "/var/lib/enroot/tmp/user-2001",
        "ENROOT_CONFIG_PATH": "/home/alice/.config/enroot",
    }
    assert bob["ENROOT_CACHE_PATH"] == "/var/lib/enroot/cache/user-2002"
    listing = enroot_worker.sh(
        "stat -c '%n %U %a' /var/lib/enroot /var/lib/enroot/* /var/lib/enroot/*/user-200* /run/pyxis /home/alice"
    ).stdout.splitlines()
    assert listing == [
        "/var/lib/enroot root 755",
        "/var/lib/enroot/cache root 755",
        "/var/lib/enroot/data root 755",
        "/var/lib/enroot/runtime root 755",
        "/var/lib/enroot/tmp root 755",
        "/var/lib/enroot/cache/user-2001 alice 700",
        "/var/lib/enroot/cache/user-2002 bob 700",
        "/var/lib/enroot/data/user-2001 alice 700",
        "/var/lib/enroot/data/user-2002 bob 700",
        "/var/lib/enroot/runtime/user-2001 alice 700",
        "/var/lib/enroot/runtime/user-2002 bob 700",
        "/var/lib/enroot/tmp/user-2001 alice 700",
        "/var/lib/enroot/tmp/user-2002 bob 700",
        "/run/pyxis root 755",
        "/home/alice alice 700",
    ]


def test_alice_writes_her_own_folders_as_enroot_does(enroot_worker: Node) -> None:
    paths = resolved(enroot_worker, "alice")
    done = enroot_worker.sh(
        f"touch {paths['ENROOT_CACHE_PATH']}/{DIGEST} && mkdir -p {paths['ENROOT_CONFIG_PATH']}/hooks.d && "
        f"mktemp -d -p {paths['ENROOT_TEMP_PATH']} && touch {paths['ENROOT_DATA_PATH']}/rootfs",
        user="alice",
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # bob cannot even see whether alice has cached a layer
    peek = enroot_worker.sh(f"ls /var/lib/enroot/cache/user-2001/{DIGEST}", user="bob", check=False)
    assert peek.returncode != 0 and "Permission denied" in peek.stderr


def test_a_folder_bob_made_under_the_old_layout_stops_the_step(enroot_worker: Node) -> None:
    """A node set up by the old scripts (enroot's folders 1777): bob made alice's cache folder. The step refuses
    to hand it to alice, naming it, instead of letting her enroot trust what bob put there."""
    node = enroot_worker
    node.sh("mv /var/lib/enroot/cache/user-2001 /root/alice-cache && chmod 1777 /var/lib/enroot/cache")
    node.sh(
        f"mkdir /var/lib/enroot/cache/user-2001 && touch /var/lib/enroot/cache/user-2001/{DIGEST}", user="bob"
    )
    try:
        again = node.sh(
            f"cd {slurm_bed.LIFECYCLE_ON_NODE} && TC_HOME=$PWD TC_ROLE=worker bash -c "
            "'set -euo pipefail; source lib/common.sh; source lib/cluster_config.sh; source lib/apt.sh; "
            "source lib/enroot_pyxis.sh; tc_preflight >/dev/null; tc_configure_enroot'",
            check=False,
        )
        assert again.returncode == 2
        assert (
            "training-clusters-enroot: error: /var/lib/enroot/cache/user-2001 belongs to uid 2002, not to 0 or 2001: "
            "someone made it before this step; look at it, remove it and run again"
        ) in again.stderr
    finally:
        node.sh("rm -rf /var/lib/enroot/cache/user-2001 && mv /root/alice-cache /var/lib/enroot/cache/user-2001 && "
                "chmod 755 /var/lib/enroot/cache")  # fmt: skip


def test_the_folders_come_back_at_boot_from_systemd_tmpfiles(enroot_worker: Node) -> None:
    node = enroot_worker
    node.sh("rm -rf /run/pyxis /var/lib/enroot/runtime/user-2001")
    node.sh("systemd-tmpfiles --create /etc/tmpfiles.d/training-clusters-enroot.conf")
    shown = node.sh("stat -c '%n %U %a' /run/pyxis /var/lib/enroot/runtime/user-2001").stdout.splitlines()
    assert shown == ["/run/pyxis root 755", "/var/lib/enroot/runtime/user-2001 alice 700"]


# -- Medium 6: a new worker is guarded before alice's account exists --------------------------------

#: Run as root inside a new worker before on_create.sh: the first moment alice's account exists, what guards
#: the node then (checked every 20 ms).
WATCH = r"""
until getent passwd alice >/dev/null; do sleep 0.02; done
{
    echo "guard: $(iptables -w -S TC-IMDS 2>/dev/null | grep -c -- '-j REJECT')"
    echo "jump: $(iptables -w -C OUTPUT -d 169.254.169.254/32 -j TC-IMDS 2>/dev/null && echo yes || echo no)"
    echo "pam: $(grep -c '^account required .*pam_slurm_adopt.so$' /etc/pam.d/sshd)"
    echo "access: $(grep -c '^account sufficient pam_access.so accessfile=/etc/security/training-clusters-access.conf$' /etc/pam.d/sshd)"
    echo "logind: $(systemctl is-enabled systemd-logind 2>&1)"
} >/root/when-alice-appeared
"""


def test_a_new_worker_has_the_guard_and_pam_slurm_adopt_before_alices_account_exists(
    cluster: Cluster, metadata: None
) -> None:
    old = cluster.workers[1]
    old.power_off()
    fresh = cluster.prepare(old.ip, generation=1)
    subprocess.run(
        ["dpkg-deb", "-x", str(pam_slurm_adopt_deb(cluster.bed.root)), str(fresh.merged)], check=True
    )
    fresh.write(
        f"{slurm_bed.LIFECYCLE_ON_NODE}/training_clusters.json",
        json.dumps({**SETTINGS, "enable_pam_slurm_adopt": True}, indent=2),
    )
    fresh.boot()
    # a new instance has a network stack of its own: the bed reuses the old one's namespace, so its rules go
    fresh.sh(
        "iptables -w -F OUTPUT && { iptables -w -F TC-IMDS; iptables -w -X TC-IMDS; } 2>/dev/null || true"
    )
    assert "TC-IMDS" not in fresh.sh("iptables -w -S").stdout
    fresh.write("/root/watch.sh", WATCH, 0o700)
    watcher = subprocess.Popen(
        ["nsenter", "-t", str(fresh.leader), "-a", "--", "bash", "/root/watch.sh"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        run = cluster.provision([fresh], agent_writes=False)[fresh.ip]
        watcher.wait(timeout=30)
    finally:
        watcher.kill()
    assert run.returncode == 0, run.output
    assert fresh.read("/root/when-alice-appeared").splitlines() == [
        "guard: 2",  # the TCP reset and the catch-all reject
        "jump: yes",
        "pam: 1",
        "access: 1",
        "logind: masked",
    ]
    steps = re.findall(r"step '([\w-]+)' (?:started|skipped)", run.output)
    assert steps.index("imds-guard") < steps.index("pam-slurm-adopt") < steps.index("users")

    # and then: alice holds no job on this worker, so sshd lets her in nowhere; root (an administrator) gets in
    login = cluster.login
    wait_until(
        "sshd on the new worker", lambda: fresh.sh("systemctl is-active ssh", check=False).returncode == 0
    )
    public = login.sh("cat /home/alice/.ssh/id_ed25519.pub").stdout.strip()
    fresh.sh(f"printf '%s\\n' {shlex.quote(public)} >>/home/alice/.ssh/authorized_keys")
    denied = login.sh(f"{SSH} {fresh.ip} hostname", user="alice", check=False)
    assert denied.returncode == 255 and denied.stdout == "", denied.stderr
    journal = fresh.sh("journalctl -u ssh --no-pager -o cat").stdout
    assert "pam_slurm_adopt" in journal, journal
    reach_imds(fresh)
    assert imds_answer(fresh, "alice") == "000 curl exit 7"
    assert imds_answer(fresh, None) == "404"


# -- High 3: a PCS-like node ----------------------------------------------------------------------


def test_a_pcs_like_node_answers_root_and_refuses_alice_at_the_metadata_address(
    cluster: Cluster, metadata: None
) -> None:
    node = cluster.bed.prepare(PCS_NODE_IP)
    node.boot()
    node.write("/var/lib/cloud/instance/boothooks/part-001", imds_guard_boothook(), 0o700)
    hooked = node.sh("/var/lib/cloud/instance/boothooks/part-001", check=False)  # as cloud-init runs it: root
    assert hooked.returncode == 0, hooked.stdout + hooked.stderr
    node.sh("useradd --uid 2001 --create-home --shell /bin/bash alice")
    reach_imds(node)
    assert imds_answer(node, None) == "404"  # root: the server answers (no such path)
    assert imds_answer(node, "alice") == "000 curl exit 7"  # refused: a TCP reset
    assert node.sh("systemctl is-enabled training-clusters-imds.service").stdout.strip() == "enabled"

    node.power_off()  # the guard is back before anyone logs in after a reboot (its unit)
    node.mount()
    node.boot()
    reach_imds(node)
    assert imds_answer(node, None) == "404"
    assert imds_answer(node, "alice") == "000 curl exit 7"
