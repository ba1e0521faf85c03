"""ParallelCluster custom action scripts shipped as package data: the team's users and Pyxis/Enroot, and the
instance metadata guard of compute nodes (the lifecycle scripts' ``node/training-clusters-imds.sh``, one script
for both services).

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
