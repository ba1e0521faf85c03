"""The slurmdbd-user handler (``index.py``) and the folder its Lambda asset is made from.

Imported by the construct at synth (no aws-cdk-lib here: the real-Slurm bed runs the same asset).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import shutil
import tempfile
from pathlib import Path

HANDLER_DIR = Path(__file__).resolve().parent
#: PyMySQL (pinned in pyproject.toml), which the asset carries beside the handler.
PYMYSQL_DISTRIBUTION = "PyMySQL"


@functools.cache
def staged_asset() -> Path:
    """The slurmdbd-user handler's Lambda code: ``handlers/slurmdbd_user/index.py`` with the installed PyMySQL
    (pure Python, its licence included) beside it, in a folder named by the content's SHA-256 under the
    system's temporary folder. Made once per content, offline (no pip, no Docker at synth)."""
    spec = importlib.util.find_spec("pymysql")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"{PYMYSQL_DISTRIBUTION} is not installed: it is a dependency of cdk-training-clusters"
        )
    package = Path(next(iter(spec.submodule_search_locations)))
    distribution = importlib.metadata.distribution(PYMYSQL_DISTRIBUTION)
    licence = next(
        (
            Path(str(distribution.locate_file(f)))
            for f in distribution.files or ()
            if f.name.startswith("LICENSE")
        ),
        None,
    )
    sources = [("index.py", HANDLER_DIR / "index.py")]
    sources += [
        (f"pymysql/{path.relative_to(package).as_posix()}", path) for path in sorted(package.rglob("*.py"))
    ]
    if licence is not None:
        sources.append(("pymysql/LICENSE", licence))
    digest = hashlib.sha256()
    for name, path in sources:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    folder = Path(tempfile.gettempdir()) / f"training-clusters-slurmdbd-user-{digest.hexdigest()[:16]}"
    if not (folder / ".complete").is_file():
        staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
        for name, path in sources:
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        (staging / ".complete").write_text(f"{PYMYSQL_DISTRIBUTION} {distribution.version}\n")
        try:
            staging.rename(folder)
        except OSError:  # another process made it meanwhile: same content
            shutil.rmtree(staging, ignore_errors=True)
    return folder
