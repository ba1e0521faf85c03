"""ParallelCluster custom action scripts shipped as package data: the team's users, Pyxis/Enroot, the head node's
Slurm topology step (``topology.sh``, which installs ``topology.py`` beside it), and, shared
with the lifecycle scripts (``node/``, one script for both services), the instance metadata guard of compute
nodes and enroot's per-user folders.

The ParallelCluster stack uploads this folder, the guard and ``topology.py`` to its scripts bucket; see ``users.sh``,
``pyxis.sh``, ``topology.sh``.
"""

from __future__ import annotations

from pathlib import Path

#: The folder holding the scripts.
ACTIONS_DIR = Path(__file__).resolve().parent
USERS_SCRIPT = "users.sh"
PYXIS_SCRIPT = "pyxis.sh"
#: The instance metadata guard, shared with HyperPod's lifecycle scripts, and its name in the bucket.
IMDS_GUARD = ACTIONS_DIR.parent / "hyperpod" / "node" / "training-clusters-imds.sh"
IMDS_SCRIPT = IMDS_GUARD.name
#: enroot's and Pyxis' folders, one per user (the lifecycle scripts' ``node/training-clusters-enroot.sh``, one
#: script for both services), and its name in the bucket.
ENROOT_FOLDERS = IMDS_GUARD.parent / "training-clusters-enroot.sh"
ENROOT_SCRIPT = ENROOT_FOLDERS.name
#: The head node's topology step, and the program it installs (``topology.py``, uploaded beside it).
TOPOLOGY_SCRIPT = "topology.sh"
TOPOLOGY_MODULE = ACTIONS_DIR / "topology.py"
