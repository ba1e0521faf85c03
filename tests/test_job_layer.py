"""The EKS job layer as data: queues from nodegroup capacities, and every rule's message (no CDK here)."""

from __future__ import annotations

import pytest

from training_clusters.catalog import lookup
from training_clusters.model.options import QueuePreemption, TopologyPlacement
from training_clusters.rules.eks_queues import (
    borrow_needs_reclaim_problem,
    cohort_name_problem,
    cohort_needed_problem,
    flavor_labels_problem,
    kubernetes_name_problem,
    limit_percent_problem,
    preemption_problem,
    required_topology_problem,
    team_namespace_problem,
    unique_names_problem,
)
from training_clusters.workloads.scheduling import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    HUGEPAGES_RESOURCE,
    MPI_SSH_PATH,
    NODEGROUP_LABEL,
    SHARED_GPU_RESOURCE,
    TOPOLOGY_LEVELS,
    TRAINER_STEP_LABEL,
    FlavorCapacity,
    QueuePolicy,
    Taint,
    cluster_queue,
    gang_job,
    managed_namespace_selector,
    mpi_runtime,
    pod_set_topology,
    queue_manifests,
    resource_flavor,
    runtime_manifests,
    torchrun_runtime,
)

GPU_TAINT = Taint("nvidia.com/gpu", "true", "NoSchedule")
P5 = FlavorCapacity(
    name="p5",
    instance_type=lookup("p5.48xlarge"),
    nodes=2,
    efa_interfaces=32,
    labels={NODEGROUP_LABEL: "p5"},
    taints=(GPU_TAINT,),
)
G5 = FlavorCapacity(name="g5", instance_type=lookup("g5.2xlarge"), nodes=3, labels={NODEGROUP_LABEL: "g5"})

# --------------------------------------------------------------------------------------------------
# quotas: what the nodes advertise


def test_quota_is_nodes_times_gpus_efa_interfaces_and_huge_pages() -> None:
    # 2 nodes x (192 vCPUs x 110 MiB / 2 MiB + 1 = 10561 pages, 21122Mi): what the EFA installer reserves
    assert P5.quota() == {GPU_RESOURCE: 16, EFA_RESOURCE: 64, HUGEPAGES_RESOURCE: "42244Mi"}
    assert G5.quota() == {GPU_RESOURCE: 3}  # no EFA: no EFA quota, no huge pages


def test_shared_gpus_count_their_replicas_under_the_name_the_plugin_advertises() -> None:
    shared = FlavorCapacity(
        name="g5",
        instance_type=lookup("g5.12xlarge"),
        nodes=2,
        gpu_replicas=10,
        gpu_resource=SHARED_GPU_RESOURCE,
    )
    assert shared.quota() == {SHARED_GPU_RESOURCE: 2 * 4 * 10}


def test_one_resource_group_covers_every_flavor_and_a_flavor_without_efa_gets_none() -> None:
    queue = cluster_queue("training", [P5, G5], namespaces=["vision", "default"])
    (group,) = queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == [HUGEPAGES_RESOURCE, GPU_RESOURCE, EFA_RESOURCE]
    assert group["flavors"] == [
        {
            "name": "p5",
            "resources": [
                {"name": HUGEPAGES_RESOURCE, "nominalQuota": "42244Mi"},
                {"name": GPU_RESOURCE, "nominalQuota": 16},
                {"name": EFA_RESOURCE, "nominalQuota": 64},
            ],
        },
        {
            "name": "g5",
            "resources": [
                {"name": HUGEPAGES_RESOURCE, "nominalQuota": "0Mi"},
                {"name": GPU_RESOURCE, "nominalQuota": 3},
                {"name": EFA_RESOURCE, "nominalQuota": 0},
            ],
        },
    ]
    # only the team namespaces' LocalQueues may use it
    assert queue["spec"]["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["default", "vision"]}
        ]
    }
    assert queue["spec"]["preemption"] == {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    assert "cohortName" not in queue["spec"]


def test_cohort_limits_are_shares_of_each_quota_rounded_down() -> None:
    policy = QueuePolicy(
        cohort="research",
        within_cluster_queue=QueuePreemption.LOWER_PRIORITY,
        reclaim_within_cohort=QueuePreemption.ANY,
        borrow_within_cohort=QueuePreemption.LOWER_PRIORITY,
        lending_limit_percent=50,
        borrowing_limit_percent=25,
    )
    spec = cluster_queue("training", [G5], namespaces=["default"], policy=policy)["spec"]
    assert spec["cohortName"] == "research"
    assert spec["preemption"] == {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority"},
    }
    (gpus,) = spec["resourceGroups"][0]["flavors"][0]["resources"]
    assert gpus == {"name": GPU_RESOURCE, "nominalQuota": 3, "lendingLimit": 1, "borrowingLimit": 0}
    p5 = cluster_queue("training", [P5], namespaces=["default"], policy=policy)["spec"]
    pages = p5["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert pages == {
        "name": HUGEPAGES_RESOURCE,
        "nominalQuota": "42244Mi",
        "lendingLimit": "21122Mi",
        "borrowingLimit": "10561Mi",
    }


def test_a_flavor_selects_its_nodes_and_tolerates_their_taints() -> None:
    assert resource_flavor(P5, topology="aws-network")["spec"] == {
        "nodeLabels": {"node.kubernetes.io/instance-type": "p5.48xlarge", NODEGROUP_LABEL: "p5"},
        "nodeTaints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        ],
        "topologyName": "aws-network",
    }
    assert resource_flavor(G5)["spec"] == {
        "nodeLabels": {"node.kubernetes.io/instance-type": "g5.2xlarge", NODEGROUP_LABEL: "g5"}
    }


def test_topology_only_where_the_instance_type_reports_it() -> None:
    assert (P5.reports_topology, G5.reports_topology) == (True, False)
    objects = queue_manifests([P5, G5], namespaces=["vision"])
    kinds = [o["kind"] for o in objects]
    assert kinds == [
        "Namespace",
        "Topology",
        "ResourceFlavor",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
    ]
    topology = objects[1]
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == list(TOPOLOGY_LEVELS)
    flavors = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "ResourceFlavor"}
    assert flavors["p5"]["topologyName"] == "aws-network" and "topologyName" not in flavors["g5"]
    # off: no Topology, no flavor names one
    plain = queue_manifests([P5], namespaces=["default"], topology=TopologyPlacement.OFF)
    assert [o["kind"] for o in plain] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    assert "topologyName" not in plain[0]["spec"]


def test_each_team_namespace_gets_its_local_queue_and_default_is_not_created() -> None:
    objects = queue_manifests([G5], namespaces=["default", "vision"], local_queue_name="gpus")
    # created, opted in to Kueue (managedJobsNamespaceSelector selects this label)
    assert [o["metadata"] for o in objects if o["kind"] == "Namespace"] == [
        {"name": "vision", "labels": {"training-clusters/kueue-managed": "true"}}
    ]
    assert managed_namespace_selector() == {"matchLabels": {"training-clusters/kueue-managed": "true"}}
    queues = [o for o in objects if o["kind"] == "LocalQueue"]
    assert [
        (q["metadata"]["namespace"], q["metadata"]["name"], q["spec"]["clusterQueue"]) for q in queues
    ] == [
        ("default", "gpus", "training"),
        ("vision", "gpus", "training"),
    ]


@pytest.mark.parametrize(
    ("name", "layers"),
    [
        ("p5.48xlarge", 3),
        ("p5en.48xlarge", 3),
        ("p6-b200.48xlarge", 4),
        ("trn1.32xlarge", 3),
        ("g5.48xlarge", 0),
    ],
)
def test_the_catalogue_says_which_types_report_network_topology(name: str, layers: int) -> None:
    assert lookup(name).network_node_layers == layers


# --------------------------------------------------------------------------------------------------
# rules, both sides of each boundary


def test_kubernetes_names() -> None:
    assert kubernetes_name_problem("a") is None
    assert kubernetes_name_problem("a" * 63) is None
    expected = (
        "must be 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit "
        "(a Kubernetes name), got "
    )
    assert kubernetes_name_problem("a" * 64) == expected + repr("a" * 64)
    assert kubernetes_name_problem("Team") == expected + "'Team'"
    assert kubernetes_name_problem("team-") == expected + "'team-'"


def test_cohort_names() -> None:
    assert cohort_name_problem("research.ml") is None
    assert cohort_name_problem("Research") == (
        "must be lower-case letters, digits, '-' and '.', up to 253 characters, starting and ending with a "
        "letter or digit, got 'Research'"
    )


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("within_cluster_queue", QueuePreemption.ANY, "Never, LowerPriority, LowerOrNewerEqualPriority"),
        ("reclaim_within_cohort", QueuePreemption.LOWER_OR_NEWER_EQUAL_PRIORITY, "Never, LowerPriority, Any"),
        ("borrow_within_cohort", QueuePreemption.ANY, "Never, LowerPriority"),
    ],
)
def test_each_preemption_field_takes_what_kueue_allows_there(
    field: str, value: QueuePreemption, allowed: str
) -> None:
    assert preemption_problem(field, QueuePreemption.LOWER_PRIORITY) is None
    assert preemption_problem(field, value) == f"must be one of {allowed}, got {value.value}"


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"reclaim_within_cohort": QueuePreemption.ANY}, "reclaim_within_cohort"),
        ({"borrow_within_cohort": QueuePreemption.LOWER_PRIORITY}, "borrow_within_cohort"),
        ({"lending_limit_percent": 0}, "lending_limit_percent"),
        ({"borrowing_limit_percent": 10}, "borrowing_limit_percent"),
    ],
)
def test_cohort_options_need_a_cohort(given: dict[str, object], field: str) -> None:
    options: dict[str, object] = {
        "reclaim_within_cohort": QueuePreemption.NEVER,
        "borrow_within_cohort": QueuePreemption.NEVER,
        "lending_limit_percent": None,
        "borrowing_limit_percent": None,
    }
    options.update(given)
    assert cohort_needed_problem("research", **options) is None  # type: ignore[arg-type]
    assert cohort_needed_problem(None, **options) == (  # type: ignore[arg-type]
        field,
        "acts between the ClusterQueues of a cohort; set cohort too, or leave it out",
    )


def test_borrowing_preemption_needs_reclaiming_preemption() -> None:
    assert borrow_needs_reclaim_problem(QueuePreemption.NEVER, QueuePreemption.NEVER) is None
    assert (
        borrow_needs_reclaim_problem(QueuePreemption.LOWER_PRIORITY, QueuePreemption.LOWER_PRIORITY) is None
    )
    assert borrow_needs_reclaim_problem(QueuePreemption.NEVER, QueuePreemption.LOWER_PRIORITY) == (
        "LowerPriority needs reclaim_within_cohort other than Never (Kueue refuses a queue that preempts to "
        "borrow but not to reclaim)"
    )


@pytest.mark.parametrize(("percent", "ok"), [(None, True), (0, True), (100, True), (-1, False), (101, False)])
def test_limit_percent_bounds(percent: int | None, ok: bool) -> None:
    problem = limit_percent_problem(percent)
    assert (problem is None) == ok
    if not ok:
        assert problem == f"must be between 0 and 100 (percent of the queue's nominal quota), got {percent}"


def test_team_namespaces() -> None:
    assert team_namespace_problem("default") is None
    assert team_namespace_problem("kueue-system") == (
        "must not be kube-system, kueue-system (the cluster's own and Kueue's: their jobs must never wait on "
        "Kueue), got 'kueue-system'"
    )
    assert unique_names_problem(["a", "b"]) is None
    assert unique_names_problem(["b", "a", "b", "a"]) == "must each be given once, got a, b more than once"


def test_a_flavor_selects_by_at_most_eight_labels() -> None:
    labels = {f"k{i}": "v" for i in range(8)}
    assert flavor_labels_problem(labels) is None
    labels["k8"] = "v"
    assert flavor_labels_problem(labels) == (
        "are 9 with the ones the stack adds; a Kueue ResourceFlavor selects nodes by at most 8: "
        "k0, k1, k2, k3, k4, k5, k6, k7, k8"
    )


# --------------------------------------------------------------------------------------------------
# Kubeflow Trainer runtimes


def _pod(runtime: dict[str, object], job: str) -> dict[str, object]:
    jobs = {j["name"]: j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]}  # type: ignore[index]
    return jobs[job]["template"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def test_torchrun_runtime_gives_each_node_pod_the_whole_efa_node() -> None:
    runtime = torchrun_runtime(P5, image="example/torch:1")
    assert runtime["metadata"]["name"] == "torchrun-efa-p5"
    # no processes per node in Trainer 2.3.0's runtime: torchrun's "auto" starts one per GPU the pod asks for
    assert runtime["spec"]["mlPolicy"] == {"numNodes": 2, "torch": {}}
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert job["template"]["metadata"]["labels"] == {
        TRAINER_STEP_LABEL: "trainer"
    }  # the TrainJob's image runs here
    pod = _pod(runtime, "node")
    assert pod["nodeSelector"] == {NODEGROUP_LABEL: "p5"}
    assert pod["tolerations"] == [GPU_TAINT.toleration()]
    (container,) = pod["containers"]  # type: ignore[misc]
    limits = {GPU_RESOURCE: 8, EFA_RESOURCE: 32, HUGEPAGES_RESOURCE: "5120Mi", "memory": "32000Mi"}
    assert container["resources"] == {"limits": limits, "requests": limits}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {
        "FI_PROVIDER": "efa",
        "NCCL_DEBUG": "INFO",
        "FI_EFA_USE_DEVICE_RDMA": "1",
    }  # p5: GPUDirect RDMA


def test_gpudirect_rdma_only_where_the_catalogue_says_so() -> None:
    g5 = FlavorCapacity(name="g5", instance_type=lookup("g5.48xlarge"), nodes=2, efa_interfaces=1)
    (container,) = _pod(torchrun_runtime(g5, image="x"), "node")["containers"]  # type: ignore[misc]
    assert {e["name"] for e in container["env"]} == {"FI_PROVIDER", "NCCL_DEBUG"}
    assert "tolerations" not in _pod(torchrun_runtime(g5, image="x"), "node")  # untainted group


def test_mpi_runtime_runs_sshd_on_the_nodes_and_the_command_on_a_launcher() -> None:
    runtime = mpi_runtime(P5, image="example/nccl:1")
    assert runtime["metadata"]["name"] == "mpi-efa-p5"
    assert runtime["spec"]["mlPolicy"] == {
        "numNodes": 2,
        "mpi": {
            "numProcPerNode": 8,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": MPI_SSH_PATH,
            "runLauncherAsNode": False,
        },
    }
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert [j["name"] for j in jobs] == ["node", "launcher"]
    assert jobs[1]["dependsOn"] == [{"name": "node", "status": "Ready"}]
    (node,) = _pod(runtime, "node")["containers"]  # type: ignore[misc]
    assert node["command"] == ["/usr/sbin/sshd", "-De"] and node["resources"]["limits"][EFA_RESOURCE] == 32
    (launcher,) = _pod(runtime, "launcher")["containers"]  # type: ignore[misc]
    assert "resources" not in launcher  # the launcher holds no GPU


def test_runtimes_only_for_efa_nodegroups() -> None:
    names = [m["metadata"]["name"] for m in runtime_manifests([P5, G5], torchrun_image="a", mpi_image="b")]
    assert names == ["torchrun-efa-p5", "mpi-efa-p5"]


# --------------------------------------------------------------------------------------------------
# topology-aware placement: what the pods ask Kueue for

PREFERRED = {"kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"}
REQUIRED = {"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3"}


def test_the_pod_set_annotation_names_the_instances_own_network_node() -> None:
    p5, g5 = lookup("p5.48xlarge"), lookup("g5.48xlarge")
    assert pod_set_topology(TopologyPlacement.PREFERRED, p5) == PREFERRED
    assert pod_set_topology(TopologyPlacement.REQUIRED, p5) == REQUIRED
    assert pod_set_topology(TopologyPlacement.OFF, p5) == {}
    # g5 is not among the types EC2 instance topology describes: its nodes carry no network-node labels
    assert (
        pod_set_topology(TopologyPlacement.PREFERRED, g5)
        == pod_set_topology(TopologyPlacement.REQUIRED, g5)
        == {}
    )
    # the level is one of the Topology's, the one above the node itself
    assert TOPOLOGY_LEVELS[-2:] == ("topology.k8s.aws/network-node-layer-3", "kubernetes.io/hostname")


def _template(runtime: dict[str, object], job: str) -> dict[str, object]:
    jobs = {j["name"]: j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]}  # type: ignore[index]
    return jobs[job]["template"]["spec"]["template"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("placement", "annotations"),
    [(TopologyPlacement.PREFERRED, PREFERRED), (TopologyPlacement.REQUIRED, REQUIRED)],
)
def test_runtime_node_pods_ask_for_the_network_node_and_the_launcher_does_not(
    placement: TopologyPlacement, annotations: dict[str, str]
) -> None:
    torchrun = torchrun_runtime(P5, image="x", topology=placement)
    assert _template(torchrun, "node")["metadata"] == {"annotations": annotations}
    mpi = mpi_runtime(P5, image="x", topology=placement)
    assert _template(mpi, "node")["metadata"] == {"annotations": annotations}
    assert "metadata" not in _template(mpi, "launcher")  # no GPU, no place to keep close
    # the default asks for it as a preference
    assert _template(torchrun_runtime(P5, image="x"), "node")["metadata"] == {"annotations": PREFERRED}


def test_no_topology_asked_when_off_or_where_the_type_reports_none() -> None:
    g5 = FlavorCapacity(name="g5", instance_type=lookup("g5.48xlarge"), nodes=2, efa_interfaces=1)
    # g5's flavor names no Topology: Kueue would refuse a pod set asking for one there
    for runtime in (torchrun_runtime(g5, image="x"), mpi_runtime(g5, image="x")):
        assert "metadata" not in _template(runtime, "node")
    for runtime in runtime_manifests([P5], torchrun_image="a", mpi_image="b", topology=TopologyPlacement.OFF):
        assert "metadata" not in _template(runtime, "node")
    assert "metadata" not in gang_job(name="g", capacity=G5, image="x")["spec"]["template"]


def test_gang_job_pods_ask_for_the_network_node_on_a_reporting_type() -> None:
    template = gang_job(name="g", capacity=P5, image="x")["spec"]["template"]
    assert template["metadata"] == {"annotations": PREFERRED}
    required = gang_job(name="g", capacity=P5, image="x", topology=TopologyPlacement.REQUIRED)
    assert required["spec"]["template"]["metadata"] == {"annotations": REQUIRED}
    off = gang_job(name="g", capacity=P5, image="x", topology=TopologyPlacement.OFF)
    assert "metadata" not in off["spec"]["template"]


def test_required_topology_needs_a_type_that_reports_it() -> None:
    message = (
        "must be preferred or off when no GPU node group's instance type reports EC2 network topology "
        "(p5, p5e, p5en, p6, trn2 and the like do; see DescribeInstanceTopology's supported types), got required"
    )
    assert required_topology_problem(TopologyPlacement.REQUIRED, []) == message
    assert required_topology_problem(TopologyPlacement.REQUIRED, ["p5.48xlarge"]) is None
    assert required_topology_problem(TopologyPlacement.PREFERRED, []) is None
    assert required_topology_problem(TopologyPlacement.OFF, []) is None
