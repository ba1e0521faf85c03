"""ParallelCluster custom action scripts shipped as package data: the team's users and Pyxis/Enroot.

The ParallelCluster stack uploads this folder to its scripts bucket; see ``users.sh`` and ``pyxis.sh``.
"""

from __future__ import annotations

from pathlib import Path

#: The folder holding the scripts.
ACTIONS_DIR = Path(__file__).resolve().parent
USERS_SCRIPT = "users.sh"
PYXIS_SCRIPT = "pyxis.sh"
