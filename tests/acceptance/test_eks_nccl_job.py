from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from training_clusters.catalog import lookup
from training_clusters.eks_jobs import (
    HUGEPAGES_2MI,
    mpirun_command,
    nccl_test_mpijob,
    run_instructions,
    write_manifest,
)
from training_clusters.errors import ConfigurationError
from training_clusters.releases import DEFAULT_NCCL_TESTS_IMAGE


def _env(job: dict, role: str) -> dict[str, str]:  # type: ignore[type-arg]
    container = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"][0]
    return {item["name"]: item["value"] for item in container["env"]}


def test_p5_job_asks_for_every_gpu_and_efa_interface_and_uses_gpudirect_rdma() -> None:
    job = nccl_test_mpijob(
        name="nccl-tests-p5", instance_type=lookup("p5.48xlarge"), workers=2, efa_interfaces=32
    )
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
    assert job["spec"]["slotsPerWorker"] == 8
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2
    resources = worker["template"]["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {
        "nvidia.com/gpu": 8,
        "vpc.amazonaws.com/efa": 32,
        "hugepages-2Mi": HUGEPAGES_2MI,
        "memory": "32000Mi",
    }
    assert resources["requests"] == resources["limits"]
    assert worker["template"]["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    assert _env(job, "Worker")["FI_PROVIDER"] == "efa"
    assert _env(job, "Worker")["FI_EFA_USE_DEVICE_RDMA"] == "1"
    command = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("-np") + 1] == "16"


def test_g5_job_leaves_device_rdma_off() -> None:
    job = nccl_test_mpijob(
        name="nccl-tests-g5", instance_type=lookup("g5.8xlarge"), workers=2, efa_interfaces=1
    )
    assert "FI_EFA_USE_DEVICE_RDMA" not in _env(job, "Worker")
    assert "FI_EFA_USE_DEVICE_RDMA" not in mpirun_command(instance_type=lookup("g5.8xlarge"), workers=2)


def test_ld_library_path_and_efa_settings_are_exported_to_every_rank() -> None:
    command = mpirun_command(instance_type=lookup("p4d.24xlarge"), workers=4)
    exported = {command[i + 1] for i, arg in enumerate(command) if arg == "-x"}
    assert exported == {"PATH", "LD_LIBRARY_PATH", "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_DEBUG"}
    test_binary = command.index("/opt/nccl-tests/build/all_reduce_perf")
    assert max(i for i, arg in enumerate(command) if arg == "-x") < test_binary


def test_the_image_is_pinned_and_keeps_its_own_library_path() -> None:
    repository, tag = DEFAULT_NCCL_TESTS_IMAGE.rsplit(":", 1)
    assert repository == "public.ecr.aws/hpc-cloud/nccl-tests"
    assert tag != "latest" and "ofiv" in tag and "ncclv" in tag  # a published version tag, not a moving one
    job = nccl_test_mpijob(
        name="nccl-tests-p5", instance_type=lookup("p5.48xlarge"), workers=2, efa_interfaces=32
    )
    for role in ("Launcher", "Worker"):
        container = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"][0]
        assert container["image"] == DEFAULT_NCCL_TESTS_IMAGE
        # No fixed list of directories over the image's own: a moved plugin would silently mean sockets.
        assert "LD_LIBRARY_PATH" not in _env(job, role)
        assert _env(job, role)["NCCL_DEBUG"] == "INFO"  # the acceptance gate reads NCCL's INFO lines


def test_manifest_is_written_as_yaml(tmp_path: Path) -> None:
    job = nccl_test_mpijob(
        name="nccl-tests-g5", instance_type=lookup("g5.8xlarge"), workers=2, efa_interfaces=1
    )
    path = write_manifest(job, tmp_path / "jobs" / "nccl.yaml")
    assert yaml.safe_load(path.read_text()) == job
    assert run_instructions("jobs/nccl.yaml", "nccl-tests-g5").endswith(
        "kubectl apply -f jobs/nccl.yaml && kubectl logs -f job/nccl-tests-g5-launcher"
    )


@pytest.mark.parametrize(
    ("instance", "workers", "interfaces", "message"),
    [
        (
            "trn1.32xlarge",
            2,
            8,
            "nccl test: instance_type 'trn1.32xlarge' has no NVIDIA GPU; NCCL tests need GPUs",
        ),
        ("g5.8xlarge", 0, 1, "nccl test: workers must be 1 or more, got 0"),
        ("g5.8xlarge", 2, 2, "nccl test: efa_interfaces must be between 1 and 1 for g5.8xlarge, got 2"),
    ],
)
def test_bad_jobs_are_clear_errors(instance: str, workers: int, interfaces: int, message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        nccl_test_mpijob(name="x", instance_type=lookup(instance), workers=workers, efa_interfaces=interfaces)
    assert str(error.value) == message


def test_workers_ask_for_the_huge_pages_an_efa_node_sets_aside() -> None:
    """5120Mi, the EKS user guide's EFA figure; within the 5128 2-MiB pages the EFA installer reserves."""
    job = nccl_test_mpijob(name="nccl-p5", instance_type=lookup("p5.48xlarge"), workers=2, efa_interfaces=32)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["requests"]["hugepages-2Mi"] == "5120Mi" == HUGEPAGES_2MI
    assert worker["resources"]["limits"]["hugepages-2Mi"] == "5120Mi"  # Kubernetes wants limits == requests
