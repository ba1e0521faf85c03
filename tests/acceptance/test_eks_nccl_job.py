from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest
import yaml

from training_clusters.catalog import lookup
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.releases import DEFAULT_NCCL_TESTS_IMAGE
from training_clusters.workloads.nccl import (
    efa_node_hugepages_mib,
    efa_pod_hugepages,
    launcher_command,
    mpirun_command,
    nccl_test_mpijob,
    node_names_command,
    run_instructions,
    write_manifest,
)


def _env(job: dict, role: str) -> dict[str, str]:  # type: ignore[type-arg]
    container = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"][0]
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


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
        "hugepages-2Mi": "5120Mi",
        "memory": "32000Mi",
    }
    assert resources["requests"] == resources["limits"]
    assert worker["template"]["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    assert _env(job, "Worker")["FI_PROVIDER"] == "efa"
    assert _env(job, "Worker")["FI_EFA_USE_DEVICE_RDMA"] == "1"
    command = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert command == launcher_command(instance_type=lookup("p5.48xlarge"), workers=2)
    # first one rank per node names its node, then the test: 8 ranks per node
    names, test = command[2].split(" && exec ")
    assert shlex.split(names) == node_names_command(workers=2)
    assert shlex.split(names)[3:7] == ["-np", "2", "--map-by", "ppr:1:node"]
    assert shlex.split(test) == mpirun_command(instance_type=lookup("p5.48xlarge"), workers=2)
    assert shlex.split(test)[4] == "16"
    assert _env(job, "Worker")["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert "NODE_NAME" not in _env(job, "Launcher")


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


@pytest.mark.parametrize(
    ("instance", "interfaces", "pages"),
    [
        ("p5.48xlarge", 32, "5120Mi"),  # the EKS user guide's figure, within the node's 21122Mi
        ("g5.8xlarge", 1, "3522Mi"),  # 32 vCPUs reserve 1761 pages: 5120Mi would never schedule
    ],
)
def test_workers_ask_for_huge_pages_their_efa_node_sets_aside(
    instance: str, interfaces: int, pages: str
) -> None:
    job = nccl_test_mpijob(name="nccl", instance_type=lookup(instance), workers=2, efa_interfaces=interfaces)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["requests"]["hugepages-2Mi"] == pages
    assert worker["resources"]["limits"]["hugepages-2Mi"] == pages  # Kubernetes wants limits == requests
    assert int(pages.removesuffix("Mi")) <= efa_node_hugepages_mib(lookup(instance))


def test_an_efa_node_reserves_110_mib_of_huge_pages_per_vcpu_plus_a_page() -> None:
    """efa-config's reservation as AWS's efa-check.sh computes it: vCPUs x 110 MiB / 2 MiB + 1 pages."""
    assert efa_node_hugepages_mib(lookup("p5.48xlarge")) == (192 * 110 * 1024 // 2048 + 1) * 2 == 21122
    assert efa_node_hugepages_mib(lookup("g5.8xlarge")) == 1761 * 2
    assert efa_node_hugepages_mib(lookup("p4d.24xlarge")) == 5281 * 2  # not the old fixed 5128 pages


def test_a_pod_asks_for_5120mi_from_47_vcpus_and_for_the_whole_reservation_below() -> None:
    p5 = lookup("p5.48xlarge")
    last_short, first_full = dataclasses.replace(p5, vcpus=46), dataclasses.replace(p5, vcpus=47)
    assert efa_node_hugepages_mib(last_short) == 5062 and efa_pod_hugepages(last_short) == "5062Mi"
    assert efa_node_hugepages_mib(first_full) == 5172 and efa_pod_hugepages(first_full) == "5120Mi"
