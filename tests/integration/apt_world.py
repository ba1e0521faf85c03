"""Real apt for the lifecycle scripts: a local repository, a cached Debian root, one run per scenario.

:func:`run_apt_steps` runs ``apt_steps.sh`` (the apt-hotfix and apt-update steps of on_create.sh,
then one install) inside a copy-on-write copy of the Debian root that ``make integration`` builds,
in a private network namespace where only loopback exists (see ``netns_apt.py``). The FSx Lustre
client source points at one of the loopback servers; a healthy local repository is always there.

Settings: TC_DEBIAN_ROOT (default .cache/debian-root), TC_INTEGRATION_SCRIPTS (the lifecycle
scripts to copy into the root; default this checkout's, another copy measures a "before").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tests.integration.netns_apt import ADDRESSES
from training_clusters.node_scripts import lifecycle_bundle

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
SCRIPTS = lifecycle_bundle()
DEFAULT_DEBIAN_ROOT = REPO_ROOT / ".cache" / "debian-root"
SUITE = "bookworm"
PACKAGE = "tc-hello"

KEYRING = "/usr/share/keyrings/tc-tests-archive.gpg"
FSX_SOURCE = "/etc/apt/sources.list.d/fsxlustreclientrepo.list"
LOCAL_SOURCE = "/etc/apt/sources.list.d/local.list"
BACKUPS = "/var/backups/training-clusters/apt"


def debian_root() -> Path:
    return Path(os.environ.get("TC_DEBIAN_ROOT", DEFAULT_DEBIAN_ROOT))


def lifecycle_scripts() -> Path:
    """The scripts under test; TC_INTEGRATION_SCRIPTS points at another copy (e.g. an older commit's)."""
    return Path(os.environ.get("TC_INTEGRATION_SCRIPTS", SCRIPTS))


def source_line(server: str, path: str) -> str:
    address, port = ADDRESSES[server]
    return f"deb [signed-by={KEYRING}] http://{address}:{port}/{path} {SUITE} main\n"


def fsx_source_line(server: str) -> str:
    return source_line(server, "fsx-lustre-client-repo/ubuntu")


def gpg(home: Path, *args: str) -> None:
    subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--quiet", *args], check=True, capture_output=True
    )


def build_repository(dest: Path) -> Path:
    """A signed apt repository holding one package, served as /debian and as the FSx path.

    Signed like the real FSx repository (InRelease and Release.gpg, a ``signed-by`` keyring), so apt
    reports a missing or forbidden Release file as it would on a node. The keyring is ``keyring.gpg``.
    """
    package = dest / "build" / PACKAGE
    (package / "DEBIAN").mkdir(parents=True)
    (package / "DEBIAN" / "control").write_text(
        textwrap.dedent(f"""\
            Package: {PACKAGE}
            Version: 1.0
            Architecture: all
            Maintainer: cdk-training-clusters tests <tests@example.invalid>
            Description: proves that apt installs from the local repository
            """)
    )
    doc = package / "usr" / "share" / "doc" / PACKAGE
    doc.mkdir(parents=True)
    (doc / "hello.txt").write_text("hello from the local repository\n")

    archive = dest / "debian"
    pool = archive / "pool" / "main"
    pool.mkdir(parents=True)
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "--build", str(package), str(pool / f"{PACKAGE}_1.0_all.deb")],
        check=True,
        capture_output=True,
    )
    binary = archive / "dists" / SUITE / "main" / "binary-amd64"
    binary.mkdir(parents=True)
    packages = subprocess.run(
        ["apt-ftparchive", "packages", "pool"], cwd=archive, check=True, capture_output=True, text=True
    ).stdout
    (binary / "Packages").write_text(packages)
    release = subprocess.run(
        [
            "apt-ftparchive",
            "-o", f"APT::FTPArchive::Release::Suite={SUITE}",
            "-o", f"APT::FTPArchive::Release::Codename={SUITE}",
            "-o", "APT::FTPArchive::Release::Components=main",
            "-o", "APT::FTPArchive::Release::Architectures=amd64",
            "release", f"dists/{SUITE}",
        ],
        cwd=archive, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    dists = archive / "dists" / SUITE
    (dists / "Release").write_text(release)
    home = dest / "gnupg"
    home.mkdir(mode=0o700)
    try:
        gpg(home, "--passphrase", "", "--pinentry-mode", "loopback", "--quick-gen-key",
            "cdk-training-clusters tests <tests@example.invalid>", "ed25519", "sign", "never")  # fmt: skip
        gpg(home, "--output", str(dest / "keyring.gpg"), "--export")
        gpg(home, "--output", str(dists / "InRelease"), "--clearsign", str(dists / "Release"))
        gpg(home, "--output", str(dists / "Release.gpg"), "--detach-sign", str(dists / "Release"))
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False, capture_output=True)
    (dest / "fsx-lustre-client-repo").mkdir()
    (dest / "fsx-lustre-client-repo" / "ubuntu").symlink_to(archive)
    shutil.rmtree(dest / "build")
    shutil.rmtree(home)
    return dest


@dataclass
class AptRun:
    returncode: int
    output: str
    seconds: float
    lock_holder_pid: int | None
    requests: list[list[object]]
    folders: dict[str, dict[str, str]]

    def requests_to(self, server: str) -> list[list[object]]:
        return [request for request in self.requests if request[0] == server]

    @property
    def sources(self) -> dict[str, str]:
        return self.folders["/etc/apt/sources.list.d"]

    @property
    def backups(self) -> dict[str, str]:
        return self.folders[BACKUPS]


def run_apt_steps(
    *,
    work: Path,
    repository: Path,
    fsx_server: str | None,
    env: dict[str, str] | None = None,
    hold_lists_lock_s: float | None = None,
    scripts: Path | None = None,
    command: list[str] | None = None,
    timeout_s: float = 900,
) -> AptRun:
    """Run the apt steps (or ``command``) once in a fresh copy of the root.

    ``fsx_server`` names the server the FSx source points at; None means no FSx source.
    """
    files = {
        "/opt/tc/apt_steps.sh": (HERE / "apt_steps.sh").read_text(),
        LOCAL_SOURCE: source_line("healthy", "debian"),
    }
    if fsx_server is not None:
        files[FSX_SOURCE] = fsx_source_line(fsx_server)
    spec = {
        "root": str(debian_root()),
        "work": str(work),
        "repo": str(repository),
        "files": files,
        "trees": {"/opt/tc/lifecycle": str(scripts or lifecycle_scripts())},
        "copies": {KEYRING: str(repository / "keyring.gpg")},
        "command": command or ["bash", "/opt/tc/apt_steps.sh", PACKAGE],
        "env": env or {},
        "hold_lists_lock_s": hold_lists_lock_s,
        "report": ["/etc/apt/sources.list.d", BACKUPS],
    }
    spec_file = work / "spec.json"
    work.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(json.dumps(spec))
    completed = subprocess.run(
        [
            "unshare", "--mount", "--net", "--propagation", "private", "--",
            sys.executable, str(HERE / "netns_apt.py"), str(spec_file),
        ],
        capture_output=True, text=True, timeout=timeout_s, check=False,
        cwd=REPO_ROOT,
    )  # fmt: skip
    if completed.returncode != 0:
        raise RuntimeError(f"netns_apt.py failed (exit {completed.returncode}):\n{completed.stderr}")
    return AptRun(**json.loads(completed.stdout))
