"""ParallelCluster custom action scripts shipped as package data: the team's users and Pyxis/Enroot, and, shared
with the lifecycle scripts (``node/``, one script for both services), the instance metadata guard of compute
nodes and enroot's per-user folders.

The ParallelCluster stack uploads this folder and the guard to its scripts bucket; see ``users.sh``, ``pyxis.sh``.
"""

from __future__ import annotations

from pathlib import Path

#: The folder holding the scripts.
ACTIONS_DIR = Path(__file__).resolve().parent
USERS_SCRIPT = "users.sh"
PYXIS_SCRIPT = "pyxis.sh"
#: The instance metadata guard, shared with HyperPod's lifecycle scripts, and its name in the bucket.
IMDS_GUARD = ACTIONS_DIR.parent / "lifecycle_scripts" / "node" / "training-clusters-imds.sh"
IMDS_SCRIPT = IMDS_GUARD.name
#: enroot's and Pyxis' folders, one per user (the lifecycle scripts' ``node/training-clusters-enroot.sh``, one
#: script for both services), and its name in the bucket.
ENROOT_FOLDERS = IMDS_GUARD.parent / "training-clusters-enroot.sh"
ENROOT_SCRIPT = ENROOT_FOLDERS.name
