"""What the acceptance command produces: files to run on the cluster, and the plan that lists them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from training_clusters.workloads.nccl import default_directory as default_directory


@dataclass(frozen=True)
class AcceptanceJob:
    """One file to run on the cluster."""

    filename: str
    """e.g. ``osu-bw-efa-compute.sbatch``, ``nccl-tests-g5.yaml``."""
    content: str
    description: str
    """One line: what it measures and how to run it."""
    expected: str
    """The figures a healthy run reaches, and where it fails."""

    def as_dict(self) -> dict[str, object]:
        """The job as plain data (``filename``, ``content``, ``description``, ``expected``)."""
        return asdict(self)


@dataclass(frozen=True)
class AcceptancePlan:
    """The jobs of an environment, and what was left untested and why."""

    jobs: tuple[AcceptanceJob, ...]
    skipped: tuple[str, ...]
    """One line per queue, partition or nodegroup without jobs, saying why."""

    @property
    def reason(self) -> str | None:
        """Why there is nothing to run, when there are no jobs; else ``None``."""
        if self.jobs:
            return None
        return "nothing to verify: " + "; ".join(self.skipped or ("no EFA-enabled nodes",))


def write_jobs(jobs: Sequence[AcceptanceJob], directory: Path) -> list[Path]:
    """Write each job's file into ``directory`` (created; existing files replaced); returns the paths.

    Scripts (``.sbatch``, ``.sh``) are made executable.

    :raises ValueError: two jobs share a file name.
    """
    names = [job.filename for job in jobs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"acceptance jobs must have distinct file names, got {', '.join(repeated)} twice")
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for job in jobs:
        path = directory / job.filename
        path.write_text(job.content)
        if path.suffix in (".sbatch", ".sh"):
            path.chmod(0o755)
        written.append(path)
    return written
