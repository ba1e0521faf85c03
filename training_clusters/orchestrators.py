"""The orchestrators this library builds, and where each one's parts live: the one table code dispatches on.

Each orchestrator has one name across the layers: the environment file's section (``parallelcluster``), its
rules (``rules/parallelcluster.py``), constructs (``constructs/parallelcluster/``), stack
(``stacks/parallelcluster.py``) and the functions registered below. Code that does something per orchestrator
asks :func:`orchestrator_of` for the environment's entry and calls its part, instead of testing each section in
turn. A part is named as ``"module:attribute"`` and imported only when an environment uses that orchestrator, so
an app with none of them (``network-storage``) loads none of their modules.

Adding an orchestrator is the checklist in CONTRIBUTING ("A new orchestrator"); ``tests/test_orchestrators.py``
fails while one of its parts is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from training_clusters.config import EnvironmentConfig


@dataclass(frozen=True)
class OrchestratorParts:
    """Where one orchestrator's parts live (each ``"module:attribute"``, loaded on first use)."""

    section: str
    """The environment file's section and the name of the orchestrator's modules (``hyperpod_eks``)."""
    kind: str
    """What ``orchestrator:`` says in a file that states its nodes under ``compute:`` (``hyperpod-eks``)."""
    title: str
    """How the README and messages name it."""
    kubernetes: bool
    """Whether its nodes run Kubernetes (an EKS cluster of ours is their control plane)."""
    team_users: bool
    """Whether the file's ``users`` are created on its nodes (Linux accounts on every Slurm node)."""
    stack: str
    """The stack class an environment with this section gets."""
    compute: str
    """Turns ``compute:`` into this section (:mod:`training_clusters.config.compute`)."""
    demands: str
    """The instances preflight checks quotas and offerings for (:mod:`training_clusters.preflight`)."""
    versions: str
    """The versions preflight repeats the synth's advice for."""
    acceptance: str
    """The acceptance plan: the jobs that prove a deployed cluster works (:mod:`training_clusters.acceptance`)."""
    connect: str
    """How ``training-clusters connect`` finds a node (:mod:`training_clusters.cli.connect`)."""
    diagram: str
    """The diagram reader drawing the cluster from a template (:mod:`training_clusters.diagram.readers`)."""

    def load(self, part: str) -> Any:
        """The object a part names, imported now."""
        return _resolve(getattr(self, part))

    @classmethod
    def parts(cls) -> tuple[str, ...]:
        """The parts every orchestrator has: each field naming ``"module:attribute"``."""
        return tuple(
            f.name
            for f in fields(cls)
            if f.name not in {"section", "kind", "title", "kubernetes", "team_users"}
        )


def _entry(
    section: str, title: str, *, stack: str, kubernetes: bool, team_users: bool = False, reader: str = ""
) -> OrchestratorParts:
    acceptance = "training_clusters.acceptance.eks" if kubernetes else "training_clusters.acceptance.slurm"
    reader = reader or section
    return OrchestratorParts(
        section=section,
        kind=section.replace("_", "-"),
        title=title,
        kubernetes=kubernetes,
        team_users=team_users,
        stack=f"training_clusters.stacks.{section}:{stack}",
        compute=f"training_clusters.config.compute:{section}_section",
        demands=f"training_clusters.preflight.demands:{section}_demands",
        versions=f"training_clusters.preflight.versions:{section}_versions",
        acceptance=f"{acceptance}:{section}_plan",
        connect=f"training_clusters.cli.connect:NodeFinder.{section}",
        diagram=f"training_clusters.diagram.readers.{reader}:{section}_clusters",
    )


#: Every orchestrator, by section, in the order of the environment file's sections (messages list them so).
ORCHESTRATORS: dict[str, OrchestratorParts] = {
    entry.section: entry
    for entry in (
        _entry(
            "hyperpod",
            "SageMaker HyperPod (Slurm)",
            stack="HyperPodEnvironment",
            kubernetes=False,
            team_users=True,
        ),
        _entry(
            "parallelcluster",
            "AWS ParallelCluster",
            stack="ParallelClusterEnvironment",
            kubernetes=False,
            team_users=True,
        ),
        _entry("eks", "Amazon EKS", stack="EksTrainingEnvironment", kubernetes=True),
        _entry("pcs", "AWS PCS", stack="PcsEnvironment", kubernetes=False),
        _entry(
            "hyperpod_eks",
            "SageMaker HyperPod (EKS)",
            stack="HyperPodEksEnvironment",
            kubernetes=True,
            reader="hyperpod",
        ),
    )
}


def orchestrator_of(config: EnvironmentConfig) -> OrchestratorParts | None:
    """The orchestrator whose section ``config`` has, or ``None`` for an environment of network and storage only.

    The file model allows one orchestrator section per environment.
    """
    for entry in ORCHESTRATORS.values():
        if getattr(config, entry.section) is not None:
            return entry
    return None


@cache
def _resolve(name: str) -> Any:
    module, _, attribute = name.partition(":")
    found: Any = import_module(module)
    for part in attribute.split("."):
        found = getattr(found, part)
    return found
