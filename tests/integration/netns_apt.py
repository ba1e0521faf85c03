"""Run one command in a throw-away copy of a Debian root, with loopback-only apt repositories.

Started by the integration tests as ``unshare --mount --net --propagation private -- python3
netns_apt.py SPEC.json``, so that the mounts and the network it makes vanish with it:

* the cached root is mounted read-only under an overlay (writes go to ``work/upper``), with /proc;
* the loopback interface is brought up (a fresh network namespace has nothing else);
* HTTP servers listen on loopback addresses (see :data:`ADDRESSES`): ``healthy`` serves the local repository,
  ``forbidden``, ``missing`` and ``unavailable`` answer 403, 404 and 503 to everything, ``silent``
  accepts connections and never answers;
* optionally another process holds apt's lists lock the way apt takes it (``fcntl`` ``F_SETLK``
  write lock on ``/var/lib/apt/lists/lock``) for a while;
* the command runs under ``chroot``; its output, exit status and duration, the requests each server
  saw and the files of the folders asked for are printed as one JSON object.

It uses nothing but the standard library: it runs with the test's interpreter outside the root.
"""

from __future__ import annotations

import fcntl
import http.server
import json
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

#: One loopback address per server (all of 127.0.0.0/8 is local): apt queues downloads per host, so
#: servers sharing an address would wait for one another, which repositories on a node do not.
ADDRESSES = {
    "healthy": ("127.0.0.1", 8080),
    "forbidden": ("127.0.0.3", 8403),
    "missing": ("127.0.0.4", 8404),
    "unavailable": ("127.0.0.5", 8503),
    "silent": ("127.0.0.9", 8999),
}
LISTS_LOCK = "var/lib/apt/lists/lock"

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def loopback_up() -> None:
    """``ip link set lo up`` without iproute2: SIOCSIFFLAGS on an ``ifreq`` for "lo"."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def mount_overlay(lower: Path, work: Path) -> Path:
    merged = work / "merged"
    for name in ("upper", "overlay-work", "merged"):
        (work / name).mkdir(parents=True, exist_ok=True)
    options = f"lowerdir={lower},upperdir={work / 'upper'},workdir={work / 'overlay-work'}"
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", options, str(merged)], check=True)
    subprocess.run(["mount", "-t", "proc", "proc", str(merged / "proc")], check=True)
    # dpkg logs through a pseudo-terminal: a private devpts instance, or apt complains.
    subprocess.run(
        ["mount", "-t", "devpts", "devpts", "-o", "newinstance,ptmxmode=0666", str(merged / "dev" / "pts")],
        check=True,
    )
    return merged


class Recorder:
    """Requests seen per server: (server, method, path, status) in arrival order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, str, int]] = []

    def add(self, server: str, method: str, path: str, status: int) -> None:
        with self.lock:
            self.requests.append((server, method, path, status))


def handler_for(server: str, recorder: Recorder, repo: Path) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(repo), **kwargs)

        def send_response(self, code: int, message: str | None = None) -> None:
            recorder.add(server, self.command, self.path, code)
            super().send_response(code, message)

        def do_GET(self) -> None:
            if server == "forbidden":
                self.send_error(403)
            elif server == "missing":
                self.send_error(404)
            elif server == "unavailable":
                self.send_error(503)
            else:
                super().do_GET()

        def do_HEAD(self) -> None:
            self.do_GET()

        def log_message(self, format: str, *args: Any) -> None:
            """Keep the access log off stderr: the tests read what was requested from ``recorder``."""

    return Handler


def serve_http(server: str, recorder: Recorder, repo: Path) -> None:
    httpd = http.server.ThreadingHTTPServer(ADDRESSES[server], handler_for(server, recorder, repo))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()


def serve_silent(recorder: Recorder) -> None:
    """Accept every connection, read what comes, never answer, never close."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(ADDRESSES["silent"])
    listener.listen(64)
    held: list[socket.socket] = []

    def accept_forever() -> None:
        while True:
            connection, _ = listener.accept()
            held.append(connection)
            recorder.add("silent", "CONNECT", "", 0)

    threading.Thread(target=accept_forever, daemon=True).start()


HOLDER = """
import fcntl, sys, time
lock = open(sys.argv[1], "a")
fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fcntl(F_SETLK, F_WRLCK): what apt's GetLock does
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


def hold_lists_lock(merged: Path, seconds: float) -> subprocess.Popen[str]:
    path = merged / LISTS_LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    if holder.stdout.readline().strip() != "locked":
        raise RuntimeError("the lock holder could not take the lists lock")
    return holder


def folder_files(merged: Path, folder: str) -> dict[str, str]:
    base = merged / folder.lstrip("/")
    if not base.is_dir():
        return {}
    return {path.name: path.read_text(errors="replace") for path in sorted(base.iterdir()) if path.is_file()}


def main(spec_file: str) -> None:
    spec = json.loads(Path(spec_file).read_text())
    work = Path(spec["work"])
    loopback_up()
    merged = mount_overlay(Path(spec["root"]), work)
    for relative, text in spec.get("files", {}).items():
        target = merged / relative.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for relative, source in spec.get("copies", {}).items():
        target = merged / relative.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    for relative, source in spec.get("trees", {}).items():
        shutil.copytree(source, merged / relative.lstrip("/"), symlinks=True, dirs_exist_ok=True)

    recorder = Recorder()
    repo = Path(spec["repo"])
    for server in ("healthy", "forbidden", "missing", "unavailable"):
        serve_http(server, recorder, repo)
    serve_silent(recorder)

    holder = hold_lists_lock(merged, spec["hold_lists_lock_s"]) if spec.get("hold_lists_lock_s") else None
    started = time.monotonic()
    completed = subprocess.run(
        ["chroot", str(merged), *spec["command"]],
        env={
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8",
            "HOME": "/root",
            **spec.get("env", {}),
        },
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    if holder is not None:
        holder.kill()
        holder.wait()
    json.dump(
        {
            "returncode": completed.returncode,
            "output": completed.stdout,
            "seconds": round(seconds, 2),
            "lock_holder_pid": holder.pid if holder is not None else None,
            "requests": recorder.requests,
            "folders": {folder: folder_files(merged, folder) for folder in spec.get("report", [])},
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main(sys.argv[1])
