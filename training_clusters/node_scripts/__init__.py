"""What runs on machines, grouped by where it runs, shipped as package data:

- ``hyperpod/``: HyperPod's lifecycle scripts (``on_create.sh`` and its ``lib/`` steps, ``node/`` commands it
  installs);
- ``parallelcluster/``: ParallelCluster's custom actions;
- ``shared/``: what both services run, one implementation each: the team's users and who may log in
  (``users.sh``), the instance metadata guard (``training-clusters-imds.sh``, also PCS's) and enroot's per-user
  folders (``training-clusters-enroot.sh``). HyperPod's lifecycle scripts are uploaded with ``shared/`` inside
  them (:func:`lifecycle_bundle`); ParallelCluster's stack uploads the shared scripts beside its actions;
- ``handlers/``: the Lambda handlers of our custom resources.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import tempfile
from pathlib import Path

NODE_SCRIPTS_DIR = Path(__file__).resolve().parent
#: HyperPod's lifecycle scripts as kept in the package (without ``shared/``; see :func:`lifecycle_bundle`).
HYPERPOD_DIR = NODE_SCRIPTS_DIR / "hyperpod"
#: The scripts both services run: one implementation each.
SHARED_DIR = NODE_SCRIPTS_DIR / "shared"
#: The folder of the shared scripts inside HyperPod's uploaded lifecycle scripts (``${TC_HOME}/shared``).
BUNDLED_SHARED = "shared"
#: Not uploaded to a node.
_LEFT_OUT = ("__pycache__", ".pyc", "README.md")


def _files(folder: Path) -> list[Path]:
    return sorted(
        path
        for path in folder.rglob("*")
        if path.is_file() and not any(part == "__pycache__" for part in path.parts)
        if not path.name.endswith(_LEFT_OUT)
    )


@functools.cache
def lifecycle_bundle() -> Path:
    """HyperPod's lifecycle scripts as a node gets them: ``hyperpod/`` with ``shared/`` inside it (``shared/``),
    in a folder named by the content's SHA-256 under the system's temporary folder, made once per content.

    The lifecycle scripts run from the folder HyperPod downloads from S3 and nothing else, so the shared scripts
    travel inside it; one folder (one asset) keeps the upload a single source."""
    sources = [(path.relative_to(HYPERPOD_DIR).as_posix(), path) for path in _files(HYPERPOD_DIR)]
    sources += [
        (f"{BUNDLED_SHARED}/{path.relative_to(SHARED_DIR).as_posix()}", path) for path in _files(SHARED_DIR)
    ]
    digest = hashlib.sha256()
    for name, path in sources:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    folder = Path(tempfile.gettempdir()) / f"training-clusters-lifecycle-{digest.hexdigest()[:16]}"
    if not (folder / ".complete").is_file():
        staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
        for name, path in sources:
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        (staging / ".complete").touch()
        try:
            staging.rename(folder)
        except OSError:  # another process made it meanwhile: same content
            shutil.rmtree(staging, ignore_errors=True)
    return folder
