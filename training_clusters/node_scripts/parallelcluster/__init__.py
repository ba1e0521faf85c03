"""ParallelCluster custom action scripts shipped as package data: Pyxis/Enroot and the head node's Slurm topology
step (``topology.sh``, which installs ``topology.py`` beside it); and, from ``node_scripts/shared/`` (one script for
both services, see :mod:`training_clusters.node_scripts`), the team's users (``users.sh``), the instance metadata
guard of compute nodes and enroot's per-user folders.

The ParallelCluster stack uploads this folder, those shared scripts and ``topology.py`` to its scripts bucket; see
``pyxis.sh``, ``topology.sh`` and ``shared/users.sh``.
"""

from __future__ import annotations

from pathlib import Path

from training_clusters.node_scripts import SHARED_DIR

#: The folder holding the ParallelCluster-only scripts.
ACTIONS_DIR = Path(__file__).resolve().parent
#: The team's users (``shared/users.sh``, one script for both services), and its name in the bucket.
USERS = SHARED_DIR / "users.sh"
USERS_SCRIPT = USERS.name
PYXIS_SCRIPT = "pyxis.sh"
#: The instance metadata guard, shared with HyperPod's lifecycle scripts, and its name in the bucket.
IMDS_GUARD = SHARED_DIR / "training-clusters-imds.sh"
IMDS_SCRIPT = IMDS_GUARD.name
#: enroot's and Pyxis' folders, one per user (shared with HyperPod's lifecycle scripts), and its name in the bucket.
ENROOT_FOLDERS = SHARED_DIR / "training-clusters-enroot.sh"
ENROOT_SCRIPT = ENROOT_FOLDERS.name
#: Every shared script the custom actions use, uploaded beside this folder's.
SHARED_SCRIPTS = (USERS_SCRIPT, IMDS_SCRIPT, ENROOT_SCRIPT)
#: The head node's topology step, and the program it installs (``topology.py``, uploaded beside it).
TOPOLOGY_SCRIPT = "topology.sh"
TOPOLOGY_MODULE = ACTIONS_DIR / "topology.py"
