"""EKS acceptance jobs: for each GPU EFA nodegroup, the NCCL MPIJob as YAML and a gate for its log.

The MPIJob is :func:`~training_clusters.workloads.nccl.nccl_test_mpijob`, annotated with the
expected bus bandwidth; ``nccl-tests-<nodegroup>-check.sh`` reads the launcher's log (``kubectl logs ... |
bash nccl-tests-<nodegroup>-check.sh``) and exits non-zero when the bandwidth is clearly low or the log does
not show NCCL on EFA.

Where the nodes sat in the network is printed next to the verdict, never changing it. A pod cannot read its
node's labels (the downward API gives it ``spec.nodeName``, not the node's labels), so the launcher first has
one rank per node print its node's name (:func:`~training_clusters.workloads.nccl.launcher_command`), and the gate
reads those nodes' ``topology.k8s.aws/network-node-layer-1..3`` labels with the caller's ``kubectl get nodes``:
the same credentials that read the launcher's log. The workers are gone by then (the MPIJob deletes them when
the launcher ends), the nodes are not; and no identity in the cluster is granted a read of nodes (a
ClusterRole, since nodes are cluster-scoped) for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from training_clusters.acceptance.dcgm import DEFAULT_DCGM_LEVEL, dcgm_eks_jobs
from training_clusters.acceptance.expectations import (
    Expectation,
    Transport,
    nccl_busbw_expectation,
    plain_number,
)
from training_clusters.acceptance.fragments import (
    FAIL_HINTS,
    NCCL_EFA_EVIDENCE,
    comment_lines,
    fragment,
    gate_settings,
    readonly_lines,
)
from training_clusters.acceptance.jobs import AcceptanceJob, AcceptancePlan
from training_clusters.acceptance.mig import mig_eks_jobs
from training_clusters.catalog import InstanceType, lookup, lookup_hyperpod
from training_clusters.config import EksGpuNodegroupConfig
from training_clusters.model.options import PodSecurityLevel, TopologyPlacement
from training_clusters.workloads.mig import mig_config_name, mig_devices
from training_clusters.workloads.nccl import (
    NODE_LINE_MARK,
    manifest_yaml,
    nccl_job_files,
    nccl_job_name,
    nccl_skip_reason,
    nccl_test_mpijob,
    run_instructions,
)
from training_clusters.workloads.scheduling import (
    GPU_RESOURCE,
    NETWORK_NODE_LEVELS,
    NODEGROUP_LABEL,
    SHARED_GPU_RESOURCE,
    FlavorCapacity,
    QueueRoute,
    gang_job,
    mpi_runtime_name,
    nccl_test_trainjob,
    queue_mpijob,
)
from training_clusters.workloads.task_governance import priority_class_label, team_local_queue, team_namespace

if TYPE_CHECKING:
    from training_clusters.config import (
        EksEfaNodegroupConfig,
        EksQueuesConfig,
        EnvironmentConfig,
        TaskGovernanceConfig,
    )


#: The label every node carries with its instance type (EC2's name; HyperPod's ``ml.`` name on its nodes).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def eks_plan(
    config: EnvironmentConfig, environment: str, *, dcgm_level: int = DEFAULT_DCGM_LEVEL
) -> AcceptancePlan:
    """The jobs of an EKS environment, and what is skipped: the NCCL job of each GPU EFA nodegroup of 2 nodes
    or more, the DCGM diagnostics job of each GPU nodegroup (EFA or not) and, with Kueue, the job layer's:
    the NCCL test as a TrainJob through a LocalQueue (GPU EFA nodegroups of 2 nodes or more, with Kubeflow
    Trainer) and the gang-admission test of each GPU nodegroup. With Kueue, every job holding a nodegroup's GPUs
    goes through a LocalQueue (:func:`queue_route`), as the cluster's other jobs do.

    :param dcgm_level: ``dcgmi diag -r`` level of the DCGM jobs. Default: 2.
    """
    assert config.eks is not None
    queue = queue_route(
        kueue=config.eks.addons.kueue, queued_groups=config.eks.queue_nodegroups, queues=config.eks.queues
    )
    jobs: list[AcceptanceJob] = []
    skipped: list[str] = []
    for group in config.eks.efa_nodegroups:
        instance = lookup(group.instance_type)
        reason = nccl_skip_reason(instance, group.size)
        if reason is not None:
            skipped.append(f"nodegroup {group.name}: {reason}")
        else:
            jobs += _eks_jobs(
                name=group.name,
                instance=instance,
                workers=group.size,
                efa_interfaces=group.efa_interfaces or instance.max_efa_interfaces,
                image=config.eks.nccl_test.image,
                environment=environment,
                queue=_in_default_namespace(queue),
                topology=config.eks.queues.topology,
            )
    if not config.eks.efa_nodegroups:
        skipped.append("eks: no efa_nodegroups (GPU nodegroups without EFA have no fabric to verify)")
    node_groups: list[EksEfaNodegroupConfig | EksGpuNodegroupConfig] = [
        *config.eks.efa_nodegroups,
        *config.eks.gpu_nodegroups,
    ]
    strategy = config.eks.addons.nvidia_device_plugin.mig_strategy
    for node_group in node_groups:
        gpu_type = lookup(node_group.instance_type)
        layout = node_group.mig_layout if isinstance(node_group, EksGpuNodegroupConfig) else None
        if layout is not None:
            # dcgmi diag needs whole GPUs; a MIG node is verified by a pod holding one instance
            skipped.append(
                f"nodegroup {node_group.name}: MIG-partitioned, so no DCGM diagnostics (whole GPUs only)"
            )
            jobs += mig_eks_jobs(
                nodegroup=node_group.name,
                instance=gpu_type,
                config_name=mig_config_name(gpu_type, layout, node_group.name),
                profile=next(iter(mig_devices(gpu_type, layout))),
                strategy=strategy,
                labels={**node_group.labels, NODEGROUP_LABEL: node_group.name},
                environment=environment,
                queue=queue,
            )
        elif gpu_type.is_gpu:
            jobs += dcgm_eks_jobs(
                nodegroup=node_group.name,
                instance=gpu_type,
                nodes=node_group.size,
                labels={**node_group.labels, NODEGROUP_LABEL: node_group.name},
                level=dcgm_level,
                environment=environment,
                queue=queue,
            )
    jobs += _job_layer_jobs(config, environment, skipped, queue)
    return AcceptancePlan(jobs=tuple(jobs), skipped=tuple(skipped))


def hyperpod_eks_plan(
    config: EnvironmentConfig, environment: str, *, dcgm_level: int = DEFAULT_DCGM_LEVEL
) -> AcceptancePlan:
    """The jobs of a HyperPod-on-EKS environment: the NCCL MPIJob of each GPU instance group with EFA and 2
    nodes or more, and the DCGM diagnostics Job of each GPU instance group, scheduled onto HyperPod's nodes
    (they carry the ``ml.`` instance type as their ``node.kubernetes.io/instance-type`` label). With Kueue,
    both go through a LocalQueue (:func:`queue_route`; the MPIJob when ``default`` has one), and the job layer's
    tests follow as on EKS: the NCCL TrainJob on each EFA GPU group's ``mpi-efa-<group>`` runtime (with Kubeflow
    Trainer) and the gang test of each GPU group.

    :param dcgm_level: ``dcgmi diag -r`` level of the DCGM jobs. Default: 2.
    """
    assert config.hyperpod_eks is not None
    spec = config.hyperpod_eks
    queue = (
        governance_route(spec.task_governance)
        if spec.task_governance is not None
        else queue_route(kueue=spec.kueue, queued_groups=spec.queue_groups, queues=spec.queues)
    )
    # under task governance the MPIJob joins the team's queue too: its namespace holds only queued pods
    mpijob_queue = queue if spec.task_governance is not None else None
    jobs: list[AcceptanceJob] = []
    skipped: list[str] = []
    for group in spec.instance_groups:
        instance = lookup_hyperpod(group.instance_type)
        reason = nccl_skip_reason(instance, group.nodes)
        if not instance.efa_supported:
            skipped.append(f"instance group {group.name}: {group.instance_type} has no EFA to verify")
        elif reason is not None:
            skipped.append(f"instance group {group.name}: {reason}")
        elif not spec.nccl_test.enabled:
            skipped.append(f"instance group {group.name}: nccl_test.enabled is false")
        else:
            jobs += _eks_jobs(
                name=group.name,
                instance=instance,
                workers=group.nodes,
                # HyperPod attaches every EFA interface the type has, one per network card
                efa_interfaces=min(instance.max_efa_interfaces, instance.max_network_cards),
                image=spec.nccl_test.image,
                environment=environment,
                node_instance_type=group.instance_type,
                queue=mpijob_queue.local_queue if mpijob_queue else _in_default_namespace(queue),
                topology=TopologyPlacement.OFF if mpijob_queue else spec.queues.topology,
                namespace=mpijob_queue.namespace if mpijob_queue else "default",
                priority_class=mpijob_queue.priority_class if mpijob_queue else None,
            )
        if instance.is_gpu:
            jobs += dcgm_eks_jobs(
                nodegroup=group.name,
                instance=instance,
                nodes=group.nodes,
                labels={
                    INSTANCE_TYPE_LABEL: group.instance_type,
                    **group.labels,
                    NODEGROUP_LABEL: group.name,
                },
                level=dcgm_level,
                environment=environment,
                queue=queue,
            )
    if queue is not None:
        jobs += _hyperpod_job_layer_jobs(config, environment, queue)
    elif not spec.addons.kueue:
        skipped.append("hyperpod_eks: addons.kueue is off (no queues: no TrainJob NCCL test, no gang test)")
    return AcceptancePlan(jobs=tuple(jobs), skipped=tuple(skipped))


def _hyperpod_job_layer_jobs(
    config: EnvironmentConfig, environment: str, queue: QueueRoute
) -> list[AcceptanceJob]:
    """The NCCL TrainJob and the gang test of HyperPod's instance groups, through ``queue``."""
    assert config.hyperpod_eks is not None
    spec = config.hyperpod_eks
    jobs: list[AcceptanceJob] = []
    for group in spec.instance_groups:
        instance = lookup_hyperpod(group.instance_type)
        if not instance.is_gpu:
            continue
        runs_nccl = spec.nccl_test.enabled and nccl_skip_reason(instance, group.nodes) is None
        if spec.addons.kubeflow_trainer and instance.efa_supported and runs_nccl:
            jobs += _trainjob_nccl_jobs(
                nodegroup=group.name,
                instance=instance,
                nodes=group.nodes,
                # what the group's runtime asks for per node (HyperPodEksCluster.node_pools)
                efa_interfaces=instance.max_efa_interfaces,
                image=spec.nccl_test.image,
                namespace=queue.namespace,
                queue=queue.local_queue,
                environment=environment,
                priority_class=queue.priority_class,
            )
        jobs += _gang_jobs(
            capacity=FlavorCapacity(name=group.name, instance_type=instance, nodes=group.nodes),
            image=spec.nccl_test.image,
            namespace=queue.namespace,
            queue=queue.local_queue,
            timeout_minutes=spec.queues.pods_ready_timeout_minutes,
            environment=environment,
            # task governance's Kueue has no Topology of ours to place by
            topology=TopologyPlacement.OFF if queue.priority_class else _gang_topology(spec.queues.topology),
            priority_class=queue.priority_class,
        )
    return jobs


def _eks_jobs(
    *,
    name: str,
    instance: InstanceType,
    workers: int,
    efa_interfaces: int,
    image: str,
    environment: str,
    node_instance_type: str | None = None,
    queue: str | None = None,
    topology: TopologyPlacement = TopologyPlacement.OFF,
    namespace: str = "default",
    priority_class: str | None = None,
) -> list[AcceptanceJob]:
    job_name = nccl_job_name(name)
    manifest_file, check_file = nccl_job_files(name)
    expectation = nccl_busbw_expectation(instance, Transport.EFA, efa_interfaces=efa_interfaces)
    assert expectation.expected is not None
    job = nccl_test_mpijob(
        name=job_name,
        instance_type=instance,
        workers=workers,
        efa_interfaces=efa_interfaces,
        image=image,
        namespace=namespace,
        node_instance_type=node_instance_type,
    )
    job["metadata"]["annotations"] = _busbw_annotations(expectation)
    if queue is not None:  # Kueue's MPIJob integration admits it through the namespace's LocalQueue
        queue_mpijob(
            job, local_queue=queue, instance_type=instance, topology=topology, priority_class=priority_class
        )
    in_namespace = "" if namespace == "default" else f" -n {namespace}"
    check_command = f"kubectl logs{in_namespace} job/{job_name}-launcher | bash {check_file}"
    header = [
        f"# NCCL all_reduce_perf over EFA on nodegroup {name} ({workers} x {instance.name}, "
        f"{efa_interfaces} EFA interface(s) each): acceptance test of environment {environment}.",
        "# Generated by training_clusters.acceptance; regenerate it rather than edit it.",
        f"# Expected: {expectation.summary()} ({expectation.basis}).",
        *comment_lines(
            f"EFA is not working when the peak stays below the minimum; the check fails too unless "
            f"{NCCL_EFA_EVIDENCE}."
        ),
        f"# Run:   {run_instructions(manifest_file, job_name, namespace=namespace)}",
        f"# Check: {check_command}",
    ]
    expected = f"{expectation.summary()} ({instance.name}: {expectation.basis}); fails too unless {NCCL_EFA_EVIDENCE}"
    return [
        AcceptanceJob(
            filename=manifest_file,
            content="\n".join(header) + "\n" + manifest_yaml(job),
            description=(
                f"MPIJob: NCCL all_reduce_perf across {workers} {instance.name} nodes of nodegroup {name} "
                f"over EFA: {run_instructions(manifest_file, job_name, namespace=namespace)}; then {check_command}"
            ),
            expected=expected,
        ),
        AcceptanceJob(
            filename=check_file,
            content=_eks_check_script(
                check_file,
                instance,
                workers,
                expectation,
                environment,
                name,
                usage=f"kubectl logs{in_namespace} job/{job_name}-launcher",
            ),
            description=f"Gate for {manifest_file}: {check_command} (exit 1 when EFA is not delivering)",
            expected=expected,
        ),
    ]


def _eks_check_script(
    filename: str,
    instance: InstanceType,
    workers: int,
    expectation: Expectation,
    environment: str,
    nodegroup: str,
    *,
    usage: str,
    kind: str = "MPIJob",
) -> str:
    values = [
        ("TEST_LABEL", f"all_reduce_perf over EFA ({instance.name}, nodegroup {nodegroup})"),
        *gate_settings(expectation, FAIL_HINTS["nccl-tests", Transport.EFA]),
        ("NODE_LINE_MARK", NODE_LINE_MARK),
        ("NETWORK_LEVELS", " ".join(NETWORK_NODE_LEVELS)),
    ]
    settings = [
        "# --- settings ---",
        *readonly_lines(values),
        f"readonly EXPECTED_RANKS={workers * instance.gpu_count}",
        "readonly EXPECTED_TRANSPORT=efa",
    ]
    header = [
        "#!/bin/bash",
        f"# Gate for the NCCL acceptance {kind} of nodegroup {nodegroup}, environment {environment}.",
        "# Generated by training_clusters.acceptance; regenerate it rather than edit it.",
        f"# Expected: {expectation.summary()}.",
        f"# Usage: {usage} | bash {filename}",
        f"#        bash {filename} LAUNCHER_LOG",
        *comment_lines(
            "After the verdict it prints each node's EC2 network nodes, read with the caller's kubectl get "
            "nodes (the job itself is granted nothing), and whether all nodes shared the last one."
        ),
    ]
    fragments = [fragment(name) for name in ("common", "nccl_check", "eks_placement", "stdin_entry")]
    return "\n".join([*header, "set -euo pipefail", "", "\n".join(settings) + "\n", *fragments])


def _busbw_annotations(expectation: Expectation) -> dict[str, str]:
    assert expectation.expected is not None
    return {
        "training-clusters/expected-busbw-GBps": plain_number(expectation.expected),
        "training-clusters/minimum-busbw-GBps": plain_number(expectation.limit),
    }


# --------------------------------------------------------------------------------------------------
# the job layer: the NCCL test as a TrainJob through a LocalQueue, and the gang-admission test


def queue_route(*, kueue: bool, queued_groups: list[str], queues: EksQueuesConfig) -> QueueRoute | None:
    """Where acceptance jobs join the queues the stack makes (Kueue installed, a GPU group to queue for):
    ``default``'s LocalQueue when it has one, else the first team namespace's; None without queues."""
    if not kueue or not queued_groups:
        return None
    namespaces = queues.namespaces
    return QueueRoute("default" if "default" in namespaces else namespaces[0], queues.local_queue)


def governance_route(governance: TaskGovernanceConfig) -> QueueRoute:
    """Where acceptance jobs join task governance's queues: the LocalQueue of the first team whose namespace
    enforces baseline (our jobs run as root; restricted refuses them), else the first team's, with the priority
    class of the lowest weight, so an acceptance test never preempts a team's work (no class when there is none).
    """
    baseline = [t for t in governance.teams if t.pod_security is PodSecurityLevel.BASELINE]
    team = (baseline or governance.teams)[0].name
    lowest = min(governance.priority_classes, key=lambda c: c.weight, default=None)
    return QueueRoute(
        team_namespace(team),
        team_local_queue(team),
        None if lowest is None else priority_class_label(lowest.name),
    )


def _in_default_namespace(queue: QueueRoute | None) -> str | None:
    """The LocalQueue of namespace ``default`` (where the MPIJob runs), when there is one."""
    return queue.local_queue if queue is not None and queue.namespace == "default" else None


def _job_layer_jobs(
    config: EnvironmentConfig, environment: str, skipped: list[str], queue: QueueRoute | None
) -> list[AcceptanceJob]:
    assert config.eks is not None
    eks = config.eks
    if not eks.addons.kueue:
        skipped.append("eks: addons.kueue is off (no queues: no TrainJob NCCL test, no gang test)")
        return []
    # no queue only when no nodegroup has NVIDIA GPUs: then no job below asks for any
    namespace = queue.namespace if queue is not None else "default"
    sharing = eks.addons.nvidia_device_plugin
    jobs: list[AcceptanceJob] = []
    for group in eks.efa_nodegroups:
        instance = lookup(group.instance_type)
        if not eks.addons.kubeflow_trainer or nccl_skip_reason(instance, group.size) is not None:
            continue
        jobs += _trainjob_nccl_jobs(
            nodegroup=group.name,
            instance=instance,
            nodes=group.size,
            efa_interfaces=group.efa_interfaces or instance.max_efa_interfaces,
            image=eks.nccl_test.image,
            namespace=namespace,
            queue=eks.queues.local_queue,
            environment=environment,
        )
    if not eks.addons.kubeflow_trainer:
        skipped.append("eks: addons.kubeflow_trainer is off (no TrainJob NCCL test)")
    groups: list[EksEfaNodegroupConfig | EksGpuNodegroupConfig] = [*eks.efa_nodegroups, *eks.gpu_nodegroups]
    for node_group in groups:
        instance = lookup(node_group.instance_type)
        if not instance.is_gpu:
            continue
        if isinstance(node_group, EksGpuNodegroupConfig) and node_group.mig_layout is not None:
            skipped.append(
                f"nodegroup {node_group.name}: MIG-partitioned, so no gang test (it asks for whole GPUs)"
            )
            continue
        capacity = FlavorCapacity(
            name=node_group.name,
            instance_type=instance,
            nodes=node_group.size,
            gpu_replicas=(
                sharing.time_slicing.replicas
                if sharing.time_slicing
                else sharing.mps.replicas
                if sharing.mps
                else 1
            ),
            gpu_resource=(
                SHARED_GPU_RESOURCE
                if sharing.time_slicing and sharing.time_slicing.rename_by_default
                else GPU_RESOURCE
            ),
        )
        jobs += _gang_jobs(
            capacity=capacity,
            image=eks.nccl_test.image,
            namespace=namespace,
            queue=eks.queues.local_queue,
            timeout_minutes=eks.queues.pods_ready_timeout_minutes,
            environment=environment,
            topology=_gang_topology(eks.queues.topology),
        )
    return jobs


def trainjob_nccl_name(nodegroup: str) -> str:
    """The NCCL TrainJob's name for an EFA nodegroup: ``nccl-trainjob-<nodegroup>``."""
    return f"nccl-trainjob-{nodegroup}"


def _trainjob_nccl_jobs(
    *,
    nodegroup: str,
    instance: InstanceType,
    nodes: int,
    efa_interfaces: int,
    image: str,
    namespace: str,
    queue: str,
    environment: str,
    priority_class: str | None = None,
) -> list[AcceptanceJob]:
    name = trainjob_nccl_name(nodegroup)
    manifest_file, check_file = f"{name}.yaml", f"{name}-check.sh"
    expectation = nccl_busbw_expectation(instance, Transport.EFA, efa_interfaces=efa_interfaces)
    job = nccl_test_trainjob(
        name=name,
        nodegroup=nodegroup,
        instance_type=instance,
        nodes=nodes,
        image=image,
        namespace=namespace,
        queue=queue,
        priority_class=priority_class,
    )
    job["metadata"]["annotations"] = _busbw_annotations(expectation)
    logs = f"kubectl logs -n {namespace} -f job/{name}-launcher-0"
    run = f"kubectl apply -f {manifest_file} && {logs}"
    check = f"kubectl logs -n {namespace} job/{name}-launcher-0 | bash {check_file}"
    header = [
        f"# NCCL all_reduce_perf over EFA on nodegroup {nodegroup} ({nodes} x {instance.name}) as a Kubeflow "
        f"TrainJob on runtime {mpi_runtime_name(nodegroup)}, admitted by Kueue through LocalQueue "
        f"{namespace}/{queue}: acceptance test of environment {environment}.",
        "# Generated by training_clusters.acceptance; regenerate it rather than edit it.",
        f"# Expected: {expectation.summary()} ({expectation.basis}).",
        f"# Run:   {run}",
        f"# Check: {check}",
    ]
    expected = f"{expectation.summary()} ({instance.name}: {expectation.basis}); fails too unless {NCCL_EFA_EVIDENCE}"
    return [
        AcceptanceJob(
            filename=manifest_file,
            content="\n".join(comment_lines(" ".join(line.removeprefix("# ") for line in header[:1])))
            + "\n"
            + "\n".join(header[1:])
            + "\n"
            + manifest_yaml(job),
            description=(
                f"TrainJob: NCCL all_reduce_perf across {nodes} {instance.name} nodes of nodegroup {nodegroup} "
                f"through LocalQueue {namespace}/{queue}: {run}; then {check}"
            ),
            expected=expected,
        ),
        AcceptanceJob(
            filename=check_file,
            content=_eks_check_script(
                check_file,
                instance,
                nodes,
                expectation,
                environment,
                nodegroup,
                usage=f"kubectl logs -n {namespace} job/{name}-launcher-0",
                kind="TrainJob",
            ),
            description=f"Gate for {manifest_file}: {check} (exit 1 when EFA is not delivering)",
            expected=expected,
        ),
    ]


def gang_job_names(nodegroup: str) -> tuple[str, str]:
    """The two jobs of a nodegroup's gang test: ``gang-<nodegroup>-a`` and ``-b``."""
    return f"gang-{nodegroup}-a", f"gang-{nodegroup}-b"


#: What the gang check reads: each Kueue workload's owning job, whether it is admitted, whether its pods run.
_WORKLOAD_COLUMNS = (
    "JOB:.metadata.ownerReferences[0].name,"
    'ADMITTED:.status.conditions[?(@.type=="Admitted")].status,'
    'PODS_READY:.status.conditions[?(@.type=="PodsReady")].status'
)


def _gang_topology(placement: TopologyPlacement) -> TopologyPlacement:
    """What the gang test's pods ask for: a preference whenever the queues place by topology. Its jobs take
    every GPU of the nodegroup, which one layer-3 network node need not hold: required, they might never be
    admitted, and the test is of gang admission, not of placement."""
    return TopologyPlacement.OFF if placement is TopologyPlacement.OFF else TopologyPlacement.PREFERRED


def _gang_jobs(
    *,
    capacity: FlavorCapacity,
    image: str,
    namespace: str,
    queue: str,
    timeout_minutes: int,
    environment: str,
    topology: TopologyPlacement = TopologyPlacement.PREFERRED,
    priority_class: str | None = None,
) -> list[AcceptanceJob]:
    first, second = gang_job_names(capacity.name)
    manifest_file, check_file = f"gang-test-{capacity.name}.yaml", f"gang-test-{capacity.name}-check.sh"
    (gpus,) = [v for k, v in capacity.quota().items() if k == capacity.gpu_resource]
    workloads = f"kubectl get workloads.kueue.x-k8s.io -n {namespace} -o custom-columns='{_WORKLOAD_COLUMNS}'"
    check = f"{workloads} | bash {check_file}"
    run = f"kubectl apply -f {manifest_file}"
    header = [
        *comment_lines(
            f"Gang admission on nodegroup {capacity.name}: two Jobs, {first} and {second}, each asking for all "
            f"{gpus} {capacity.gpu_resource} of the nodegroup through LocalQueue {namespace}/{queue}. Kueue "
            f"admits one whole and holds the other whole (no pod of it starts) until the first ends. "
            f"Acceptance test of environment {environment}."
        ),
        "# Generated by training_clusters.acceptance; regenerate it rather than edit it.",
        f"# Run:   {run}   (then wait until the admitted job's pods run, a minute or two)",
        f"# Check: {check}",
        f"# Clean: kubectl delete -f {manifest_file}",
    ]
    jobs = [
        gang_job(
            name=name,
            capacity=capacity,
            image=image,
            namespace=namespace,
            queue=queue,
            topology=topology,
            priority_class=priority_class,
        )
        for name in (first, second)
    ]
    expected = f"one of {first} and {second} admitted with every pod ready, the other not admitted"
    settings = readonly_lines(
        [
            ("TEST_LABEL", f"gang admission ({capacity.name}, {gpus} {capacity.gpu_resource})"),
            ("FIRST_JOB", first),
            ("SECOND_JOB", second),
            (
                "WAIT_HINT",
                "Both admitted means the ClusterQueue's quota exceeds the nodegroup (compare it with kubectl "
                "describe clusterqueue); an admitted job whose pods are not all ready may still be pulling its "
                f"image: check again, Kueue evicts it after {timeout_minutes} minutes.",
            ),
        ]
    )
    script = "\n".join(
        [
            "#!/bin/bash",
            f"# Gate for the gang-admission test of nodegroup {capacity.name}, environment {environment}.",
            "# Generated by training_clusters.acceptance; regenerate it rather than edit it.",
            f"# Usage: {workloads} | bash {check_file}",
            f"#        bash {check_file} WORKLOADS_TABLE",
            "set -euo pipefail",
            "",
            "\n".join(["# --- settings ---", *settings]) + "\n",
            fragment("gang_check"),
            fragment("stdin_entry"),
        ]
    )
    return [
        AcceptanceJob(
            filename=manifest_file,
            content="\n".join(header) + "\n" + "---\n".join(manifest_yaml(job) for job in jobs),
            description=f"Two Jobs each asking for every GPU of nodegroup {capacity.name}: {run}; then {check}",
            expected=expected,
        ),
        AcceptanceJob(
            filename=check_file,
            content=script,
            description=f"Gate for {manifest_file}: {check} (exit 1 unless one runs whole and one waits)",
            expected=expected,
        ),
    ]
