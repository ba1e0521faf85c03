"""Releases the stacks install from a URL, pinned by version and by digest (build side, free of CDK).

A tag is not a pin: a release's files can be replaced under the same tag. Every manifest the stacks apply
is named here with the SHA-256 of its bytes, which the applying handler checks before anything reaches the
cluster (``training_clusters.handlers.release_manifest``); the operate side (acceptance) imports these.
"""

from __future__ import annotations

#: The MPI Operator release the EKS stacks install (MPIJob ``kubeflow.org/v2beta1``).
MPI_OPERATOR_VERSION = "v0.7.0"
#: SHA-256 of ``deploy/v2beta1/mpi-operator.yaml`` at each pinned tag of github.com/kubeflow/mpi-operator.
MPI_OPERATOR_SHA256 = {
    "v0.7.0": "507d5dc8e12bcef43be5b9c89bc93c450581fedb316c62282d7831720ef7b5c4",
}


def mpi_operator_manifest_url(version: str = MPI_OPERATOR_VERSION) -> str:
    """Where Kubeflow publishes the MPI Operator's release manifest for tag ``version``."""
    return (
        f"https://raw.githubusercontent.com/kubeflow/mpi-operator/{version}/deploy/v2beta1/mpi-operator.yaml"
    )


MPI_OPERATOR_MANIFEST_URL = mpi_operator_manifest_url()
