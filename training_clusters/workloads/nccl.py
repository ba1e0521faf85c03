"""The NCCL job over EFA: the MPIJob running ``all_reduce_perf`` across one EFA nodegroup, and the NCCL and
libfabric settings per instance type (which the job layer's training runtimes share).

Build side, pure data, no CDK: the manifest is a dict, applied by the EKS stack itself (``eks.nccl_test.apply``)
or written as YAML by ``training-clusters acceptance`` (:mod:`training_clusters.acceptance.eks`, which imports
it) and applied with ``kubectl apply -f`` once the MPI Operator is installed. It avoids the two mistakes that
break this job most often: the image's ``LD_LIBRARY_PATH`` is exported to the workers with ``-x``, and
``FI_EFA_USE_DEVICE_RDMA=1`` is set only where GPUDirect RDMA exists (on g5 it aborts with "EFA device has
no rdma-read capability").

The image is pinned (:data:`training_clusters.model.releases.DEFAULT_NCCL_TESTS_IMAGE`) and the job keeps the image's own
``LD_LIBRARY_PATH``: a fixed list of directories would go stale when an image moves the aws-ofi-nccl plugin,
and NCCL would fall back to its sockets without an error. The acceptance gate fails such a run anyway: it
wants NCCL's log to show the plugin on libfabric's efa provider.

>>> from training_clusters.catalog import lookup
>>> job = nccl_test_mpijob(name="nccl-p5", instance_type=lookup("p5.48xlarge"), workers=2, efa_interfaces=32)
>>> job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
2
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from training_clusters.catalog import InstanceType
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.releases import DEFAULT_NCCL_TESTS_IMAGE, MPI_OPERATOR_MANIFEST_URL

MPIRUN = "/opt/amazon/openmpi/bin/mpirun"
ALL_REDUCE_PERF = "/opt/nccl-tests/build/all_reduce_perf"
#: Where each node pod of an NCCL job learns its node's name: Kubernetes' downward API gives a container
#: ``spec.nodeName`` as an environment variable (not the node's labels: those are the cluster's to read).
NODE_NAME_ENV: dict[str, Any] = {
    "name": "NODE_NAME",
    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
}
#: What starts each line of the launcher's log naming a node of the job: ``training-clusters-node POD NODE``.
NODE_LINE_MARK = "training-clusters-node"
#: The program one rank per node runs before the test to name its node. Open MPI starts ranks through sshd, whose
#: sessions do not inherit the container's environment, so it reads ``NODE_NAME`` from the environment of the
#: container's first process (sshd itself, as root; the ranks run as root too).
NODE_LINE_SCRIPT = (
    f"printf '{NODE_LINE_MARK} %s %s\\n' \"$(cat /etc/hostname)\" "
    "\"$(tr '\\0' '\\n' </proc/1/environ | sed -n 's/^NODE_NAME=//p')\""
)
#: Huge-page memory the EFA installer sets aside per vCPU, in MiB: libfabric's EFA provider backs each endpoint's
#: two packet pools with 110 MiB of huge pages, and the installer's efa-config package reserves that much for one
#: endpoint per vCPU at boot, ``vCPUs * 110 MiB / page size + 1`` pages. Source: AWS's own check of an EFA node,
#: ``efa-check.sh`` in github.com/awslabs/libfabric-ci-scripts (commit 81ff8ce, "Due to changes with EFA-Config,
#: we only reserve as many huge pages as necessary"), which replaced the earlier fixed 5128 pages ("enough for
#: current Amazon EC2 instance types") with this computation. EKS's AL2023 AMIs run that installer
#: (``templates/al2023/provisioners/install-efa.sh`` in github.com/awslabs/amazon-eks-ami: ``efa_installer.sh
#: --minimal``, ``enable_efa`` true by default), and the kubelet reports the pages as allocatable
#: ``hugepages-2Mi``.
EFA_HUGEPAGES_MIB_PER_VCPU = 110
HUGEPAGE_KIB = 2048
#: What a whole-node EFA pod asks for where the node has it: 5120Mi, the figure of the EKS user guide's EFA
#: example job (https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html) and of aws-samples'
#: ``micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml`` (on p5.48xlarge, whose 192 vCPUs reserve 21122Mi).
EFA_POD_HUGEPAGES_MIB = 5120


def efa_node_hugepages_mib(instance_type: InstanceType) -> int:
    """The 2 MiB huge pages, in MiB, the EFA installer reserves on a node of ``instance_type``
    (:data:`EFA_HUGEPAGES_MIB_PER_VCPU`): 21122 on a p5.48xlarge (192 vCPUs), 3522 on a g5.8xlarge (32)."""
    pages = instance_type.vcpus * EFA_HUGEPAGES_MIB_PER_VCPU * 1024 // HUGEPAGE_KIB + 1
    return pages * HUGEPAGE_KIB // 1024


def efa_pod_hugepages(instance_type: InstanceType) -> str:
    """``hugepages-2Mi`` a whole-node EFA pod requests: :data:`EFA_POD_HUGEPAGES_MIB`, or all the node reserves
    where that is less (below 47 vCPUs: a g5.8xlarge's 3522Mi), so the pod fits the node it is meant for."""
    return f"{min(EFA_POD_HUGEPAGES_MIB, efa_node_hugepages_mib(instance_type))}Mi"


def nccl_environment(instance_type: InstanceType) -> dict[str, str]:
    """Environment of every rank: EFA as the libfabric provider, RDMA only with GPUDirect RDMA.

    ``NCCL_DEBUG=INFO`` is what lets the acceptance gate read which network NCCL used.
    """
    env = {"FI_PROVIDER": "efa", "NCCL_DEBUG": "INFO"}
    if instance_type.gpudirect_rdma:
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return env


def mpirun_command(
    *, instance_type: InstanceType, workers: int, extra_test_args: tuple[str, ...] = ()
) -> list[str]:
    """The launcher's ``mpirun`` command line: one rank per GPU, the environment exported with ``-x``."""
    gpus = instance_type.gpu_count
    exported: list[str] = ["-x", "PATH", "-x", "LD_LIBRARY_PATH"]  # the image's, as the launcher has them
    for name in nccl_environment(instance_type):
        exported += ["-x", name]
    return [
        MPIRUN,
        "--allow-run-as-root",
        "--tag-output",
        "-np",
        str(workers * gpus),
        "--bind-to",
        "none",
        "--map-by",
        f"ppr:{gpus}:node",
        *exported,
        "--mca",
        "pml",
        "^ucx",
        "--mca",
        "btl",
        "tcp,self",
        "--mca",
        "btl_tcp_if_exclude",
        "lo,docker0,veth_def_agent",
        ALL_REDUCE_PERF,
        "-b",
        "8",
        "-e",
        "16G",
        "-f",
        "2",
        "-g",
        "1",
        "-c",
        "1",
        "-n",
        "100",
        *extra_test_args,
    ]


def node_names_command(*, workers: int) -> list[str]:
    """``mpirun`` of one rank per node printing :data:`NODE_LINE_MARK`, the pod's host name and its node's name
    (:data:`NODE_LINE_SCRIPT`): the nodes the acceptance check reads the network placement of."""
    return [
        MPIRUN,
        "--allow-run-as-root",
        "--tag-output",
        "-np",
        str(workers),
        "--map-by",
        "ppr:1:node",
        "--bind-to",
        "none",
        "/bin/sh",
        "-c",
        NODE_LINE_SCRIPT,
    ]


def launcher_command(*, instance_type: InstanceType, workers: int) -> list[str]:
    """The launcher's command: name each node (:func:`node_names_command`), then run the test
    (:func:`mpirun_command`), whose exit status is the launcher's."""
    line = f"{shlex.join(node_names_command(workers=workers))} && exec " + shlex.join(
        mpirun_command(instance_type=instance_type, workers=workers)
    )
    return ["/bin/sh", "-c", line]


def nccl_test_mpijob(
    *,
    name: str,
    instance_type: InstanceType,
    workers: int,
    efa_interfaces: int,
    image: str = DEFAULT_NCCL_TESTS_IMAGE,
    namespace: str = "default",
    worker_memory: str = "32000Mi",
    node_instance_type: str | None = None,
) -> dict[str, Any]:
    """An ``kubeflow.org/v2beta1`` MPIJob running ``all_reduce_perf`` on ``workers`` nodes of one type.

    Its launcher first names the node of each worker (:func:`launcher_command`; each worker has its node's name
    as ``NODE_NAME``), so the log says where the test ran.

    :param name: The MPIJob's name.
    :param instance_type: The nodegroup's instance type (catalogue entry); must carry NVIDIA GPUs.
    :param workers: Worker pods, one per node: the nodegroup's size.
    :param efa_interfaces: ``vpc.amazonaws.com/efa`` each worker requests: the nodegroup's interfaces.
    :param image: Default: :data:`training_clusters.model.releases.DEFAULT_NCCL_TESTS_IMAGE`.
    :param namespace: Default: ``default``.
    :param worker_memory: Memory request and limit of each worker. Default: ``32000Mi``.
    :param node_instance_type: The ``node.kubernetes.io/instance-type`` label of the nodes the workers run on.
        Default: ``instance_type``'s EC2 name; SageMaker HyperPod's nodes carry the ``ml.`` name.
    """
    _check(name, instance_type, workers, efa_interfaces)
    gpus = instance_type.gpu_count
    env = [{"name": key, "value": value} for key, value in nccl_environment(instance_type).items()]
    limits = {
        "nvidia.com/gpu": gpus,
        "vpc.amazonaws.com/efa": efa_interfaces,
        "hugepages-2Mi": efa_pod_hugepages(instance_type),
        "memory": worker_memory,
    }
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 20},
            "slotsPerWorker": gpus,
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "OnFailure",
                            "containers": [
                                {
                                    "name": "launcher",
                                    "image": image,
                                    "imagePullPolicy": "IfNotPresent",
                                    "env": env,
                                    "command": launcher_command(instance_type=instance_type, workers=workers),
                                }
                            ],
                        }
                    },
                },
                "Worker": {
                    "replicas": workers,
                    "template": {
                        "spec": {
                            "nodeSelector": {
                                "node.kubernetes.io/instance-type": node_instance_type or instance_type.name
                            },
                            "tolerations": [
                                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                            ],
                            "containers": [
                                {
                                    "name": "worker",
                                    "image": image,
                                    "imagePullPolicy": "IfNotPresent",
                                    "env": [*env, NODE_NAME_ENV],
                                    "resources": {"limits": dict(limits), "requests": dict(limits)},
                                    "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
                                }
                            ],
                            "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
                        }
                    },
                },
            },
        },
    }


class _NoAliasDumper(yaml.SafeDumper):
    """Writes shared objects (the launcher's and workers' env) in full instead of as YAML anchors."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def manifest_yaml(manifest: dict[str, Any]) -> str:
    """``manifest`` as YAML for ``kubectl apply -f``, keys in order, no anchors."""
    return yaml.dump(manifest, Dumper=_NoAliasDumper, sort_keys=False)


def write_manifest(manifest: dict[str, Any], path: str | Path) -> Path:
    """Write ``manifest`` as YAML to ``path`` (parents created); returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(manifest_yaml(manifest))
    return target


def _check(name: str, instance_type: InstanceType, workers: int, efa_interfaces: int) -> None:
    if not instance_type.is_gpu:
        raise ConfigurationError(
            f"nccl test: instance_type '{instance_type.name}' has no NVIDIA GPU; NCCL tests need GPUs"
        )
    if workers < 1:
        raise ConfigurationError(f"nccl test: workers must be 1 or more, got {workers}")
    if not 1 <= efa_interfaces <= instance_type.max_efa_interfaces:
        raise ConfigurationError(
            f"nccl test: efa_interfaces must be between 1 and {instance_type.max_efa_interfaces} for "
            f"{instance_type.name}, got {efa_interfaces}"
        )
    if not name or len(name) > 63:
        raise ConfigurationError(f"nccl test: name must be 1 to 63 characters, got '{name}'")


def run_instructions(
    manifest_path: str,
    job_name: str,
    *,
    install_operator: bool = False,
    applied: bool = False,
    namespace: str = "default",
) -> str:
    """Shell commands that start the job (unless the stack applied it) and follow the launcher's output.

    :param install_operator: Prefix the MPI Operator's install (when the stack does not install it).
    :param applied: The stack applied the job already: only follow its output.
    :param namespace: The job's namespace. Default: ``default`` (kubectl's).
    """
    steps = []
    if install_operator:
        steps.append(f"kubectl apply --server-side -f {MPI_OPERATOR_MANIFEST_URL}")
    if not applied:
        steps.append(f"kubectl apply -f {manifest_path}")
    in_namespace = "" if namespace == "default" else f" -n {namespace}"
    steps.append(f"kubectl logs{in_namespace} -f job/{job_name}-launcher")
    return " && ".join(steps)


def default_directory(environment_name: str) -> Path:
    """Where ``training-clusters acceptance`` writes an environment's jobs unless told: ``acceptance/<name>``."""
    return Path("acceptance") / environment_name


def nccl_job_name(nodegroup: str) -> str:
    """The NCCL MPIJob's name for an EFA nodegroup: ``nccl-tests-<nodegroup>``."""
    return f"nccl-tests-{nodegroup}"


def nccl_job_files(nodegroup: str) -> tuple[str, str]:
    """The file names ``training-clusters acceptance`` gives a nodegroup's MPIJob and its log check."""
    job_name = nccl_job_name(nodegroup)
    return f"{job_name}.yaml", f"{job_name}-check.sh"


def nccl_acceptance_command(
    environment_name: str, nodegroup: str, *, install_operator: bool = False, applied: bool = False
) -> str:
    """Shell commands that write a nodegroup's NCCL job with ``training-clusters acceptance``, start it (unless
    the stack applied it) and gate the launcher's log with its check script.

    The environment file is taken to be ``environments/<environment_name>.yaml``, as the shipped ones are.

    :param install_operator: Install the MPI Operator first (when the stack does not install it).
    :param applied: The stack applied the job already: only follow and gate its log.
    """
    directory = default_directory(environment_name).as_posix()
    manifest_file, check_file = nccl_job_files(nodegroup)
    write = f"training-clusters acceptance environments/{environment_name}.yaml -d {directory}"
    run = run_instructions(
        f"{directory}/{manifest_file}",
        nccl_job_name(nodegroup),
        install_operator=install_operator,
        applied=applied,
    )
    return f"{write} && {run} | bash {directory}/{check_file}"


def nccl_skip_reason(instance: InstanceType, nodes: int) -> str | None:
    """Why an EFA nodegroup of ``nodes`` x ``instance`` gets no NCCL acceptance job, or ``None`` when it gets one."""
    if not instance.is_gpu:
        return f"{instance.name} has no GPU for the NCCL job"
    if nodes < 2:
        return f"{nodes} node; NCCL over EFA needs 2"
    return None
