"""EKS tenancy: what a team namespace admits (the Pod Security Standards' controls, row by row), the objects
that make a namespace a team's, validated for the cluster's Kubernetes version, and every pod this library
creates in a team namespace admitted there.

No Kubernetes API server can run here, so Pod Security admission is judged by
:mod:`training_clusters.workloads.pod_security`, one control per row of
https://kubernetes.io/docs/concepts/security/pod-security-standards/; each case below names its row.
"""

from __future__ import annotations

import copy
import ipaddress
import json
from typing import Any

import pytest
import yaml

from training_clusters.acceptance.plan import acceptance_plan
from training_clusters.catalog import lookup
from training_clusters.config import load_environment, parse_environment
from training_clusters.constructs.eks.cluster import KUBERNETES_VERSION
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import PodSecurityLevel
from training_clusters.model.releases import DEFAULT_NCCL_TESTS_IMAGE, PYTORCH_EFA_IMAGE
from training_clusters.workloads.nccl import nccl_test_mpijob
from training_clusters.workloads.pod_security import CONTROLS, controls, pod_templates, violations
from training_clusters.workloads.scheduling import NODEGROUP_LABEL, FlavorCapacity, Taint, runtime_manifests
from training_clusters.workloads.tenancy import (
    monitoring_ingress,
    no_instance_metadata_egress,
    pod_security_labels,
    same_namespace_ingress,
    team_group,
    team_namespace_objects,
    team_role_binding,
)

from .conftest import ROOT, EnvironmentGates

BASELINE = PodSecurityLevel.BASELINE
RESTRICTED = PodSecurityLevel.RESTRICTED


def _pod(**spec: Any) -> dict[str, Any]:
    """A pod spec of one plain container, with ``spec`` on top (``container=`` merges into the container)."""
    container = {
        "name": "main",
        "image": "public.ecr.aws/docker/library/busybox:1.37",
        **spec.pop("container", {}),
    }
    return {"containers": [container], **spec}


#: A pod the restricted level admits: every control's passing side starts from it.
RESTRICTED_POD = _pod(
    securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    container={
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    },
)


# --------------------------------------------------------------------------------------------------
# the controls: the page's rows, in its order


def test_the_controls_are_the_rows_of_the_pod_security_standards_page() -> None:
    """Baseline's 11 rows and Restricted's 6 (Seccomp and Capabilities appear in both tables, stricter)."""
    assert [(c.name, c.level.value) for c in CONTROLS] == [
        ("HostProcess", "baseline"),
        ("Host Namespaces", "baseline"),
        ("Privileged Containers", "baseline"),
        ("Capabilities", "baseline"),
        ("HostPath Volumes", "baseline"),
        ("Host Ports", "baseline"),
        ("AppArmor", "baseline"),
        ("SELinux", "baseline"),
        ("/proc Mount Type", "baseline"),
        ("Seccomp", "baseline"),
        ("Sysctls", "baseline"),
        ("Volume Types", "restricted"),
        ("Privilege Escalation", "restricted"),
        ("Running as Non-root", "restricted"),
        ("Running as Non-root user", "restricted"),
        ("Seccomp (restricted)", "restricted"),
        ("Capabilities (restricted)", "restricted"),
    ]
    assert len(controls(BASELINE)) == 11
    assert controls(RESTRICTED) == CONTROLS


def _with(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``base`` with ``value`` set at a dotted path (``containers.0.securityContext.privileged``)."""
    pod = copy.deepcopy(base)
    *parents, last = path.split(".")
    node: Any = pod
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    node[int(last) if last.isdigit() else last] = value
    return pod


_C = "containers.0.securityContext"
#: (row, path, breaching value, the line it yields, an allowed value at the same path): both sides of each row.
BASELINE_CASES = [
    (
        "HostProcess",
        f"{_C}.windowsOptions",
        {"hostProcess": True},
        "containers[0].securityContext.windowsOptions.hostProcess is true",
        {"hostProcess": False},
    ),
    ("Host Namespaces", "hostNetwork", True, "hostNetwork is true", False),
    ("Host Namespaces", "hostPID", True, "hostPID is true", False),
    ("Host Namespaces", "hostIPC", True, "hostIPC is true", False),
    (
        "Privileged Containers",
        f"{_C}.privileged",
        True,
        "containers[0].securityContext.privileged is true",
        False,
    ),
    (
        "Capabilities",
        f"{_C}.capabilities",
        {"add": ["IPC_LOCK", "CHOWN"]},
        "containers[0].securityContext.capabilities.add has IPC_LOCK",
        {"add": ["CHOWN", "NET_BIND_SERVICE"]},
    ),
    (
        "HostPath Volumes",
        "volumes",
        [{"name": "root", "hostPath": {"path": "/"}}],
        "volumes[0].hostPath is set (root)",
        [{"name": "scratch", "emptyDir": {}}],
    ),
    (
        "Host Ports",
        "containers.0.ports",
        [{"containerPort": 22, "hostPort": 22}],
        "containers[0].ports[0].hostPort is 22",
        [{"containerPort": 22}],
    ),
    (
        "AppArmor",
        f"{_C}.appArmorProfile",
        {"type": "Unconfined"},
        "containers[0].securityContext.appArmorProfile.type is Unconfined",
        {"type": "RuntimeDefault"},
    ),
    (
        "SELinux",
        f"{_C}.seLinuxOptions",
        {"type": "spc_t"},
        "containers[0].securityContext.seLinuxOptions.type is spc_t",
        {"type": "container_t"},
    ),
    (
        "SELinux",
        "securityContext.seLinuxOptions",
        {"user": "system_u"},
        "securityContext.seLinuxOptions.user is system_u",
        {"level": "s0:c123,c456"},
    ),
    (
        "/proc Mount Type",
        f"{_C}.procMount",
        "Unmasked",
        "containers[0].securityContext.procMount is Unmasked",
        "Default",
    ),
    (
        "Seccomp",
        "securityContext.seccompProfile",
        {"type": "Unconfined"},
        "securityContext.seccompProfile.type is Unconfined",
        {"type": "RuntimeDefault"},
    ),
    (
        "Sysctls",
        "securityContext.sysctls",
        [{"name": "kernel.msgmax", "value": "65536"}],
        "securityContext.sysctls[0].name is kernel.msgmax",
        [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}],
    ),
]


@pytest.mark.parametrize("level", [BASELINE, RESTRICTED])
@pytest.mark.parametrize(("row", "path", "bad", "line", "good"), BASELINE_CASES)
def test_each_baseline_control_refuses_its_breach_and_admits_its_allowed_values(
    level: PodSecurityLevel, row: str, path: str, bad: Any, line: str, good: Any
) -> None:
    """At baseline exactly the row's line; at restricted the row's line too (a restricted row may add its own)."""
    bad_lines = violations(_with(RESTRICTED_POD, path, bad), level)
    good_lines = violations(_with(RESTRICTED_POD, path, good), level)
    if level is BASELINE:
        assert (bad_lines, good_lines) == ([f"{row}: {line}"], [])
    else:
        assert f"{row}: {line}" in bad_lines
        assert not [g for g in good_lines if g.startswith(f"{row}: ")]


def test_an_apparmor_annotation_other_than_the_runtime_default_or_a_local_profile_is_refused() -> None:
    key = "container.apparmor.security.beta.kubernetes.io/main"
    assert violations(RESTRICTED_POD, BASELINE, {key: "unconfined"}) == [
        f"AppArmor: metadata.annotations[{key}] is unconfined"
    ]
    for allowed in ("runtime/default", "localhost/team-profile"):
        assert violations(RESTRICTED_POD, BASELINE, {key: allowed}) == []


RESTRICTED_CASES = [
    (
        "Volume Types",
        "volumes",
        [{"name": "nfs", "nfs": {"server": "10.0.0.1", "path": "/"}}],
        "volumes[0] (nfs) is of type nfs",
        [{"name": "data", "persistentVolumeClaim": {"claimName": "fsx-lustre"}}],
    ),
    (
        "Privilege Escalation",
        f"{_C}.allowPrivilegeEscalation",
        True,
        "containers[0].securityContext.allowPrivilegeEscalation is not false",
        False,
    ),
    (
        "Running as Non-root",
        "securityContext.runAsNonRoot",
        False,
        "securityContext.runAsNonRoot is false",
        True,
    ),
    (
        "Running as Non-root user",
        f"{_C}.runAsUser",
        0,
        "containers[0].securityContext.runAsUser is 0",
        1000,
    ),
    (
        "Seccomp (restricted)",
        "securityContext.seccompProfile",
        {},
        "containers[0].securityContext.seccompProfile.type is unset (nor the pod's)",
        {"type": "Localhost", "localhostProfile": "profiles/team.json"},
    ),
    (
        "Capabilities (restricted)",
        f"{_C}.capabilities",
        {"drop": ["ALL"], "add": ["CHOWN"]},
        "containers[0].securityContext.capabilities.add has CHOWN",
        {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
    ),
]


@pytest.mark.parametrize(("row", "path", "bad", "line", "good"), RESTRICTED_CASES)
def test_each_restricted_control_refuses_at_restricted_only(
    row: str, path: str, bad: Any, line: str, good: Any
) -> None:
    breaching = _with(RESTRICTED_POD, path, bad)
    assert f"{row}: {line}" in violations(breaching, RESTRICTED)
    assert violations(_with(RESTRICTED_POD, path, good), RESTRICTED) == []
    assert violations(breaching, BASELINE) == []  # the baseline level does not look at it


def test_a_container_without_its_own_non_root_setting_falls_back_to_the_pod_s() -> None:
    without_pod_setting = _with(
        RESTRICTED_POD, "securityContext", {"seccompProfile": {"type": "RuntimeDefault"}}
    )
    assert violations(without_pod_setting, RESTRICTED) == [
        "Running as Non-root: containers[0].securityContext.runAsNonRoot is not true (nor the pod's)"
    ]
    own = _with(without_pod_setting, f"{_C}.runAsNonRoot", True)
    assert violations(own, RESTRICTED) == []


# --------------------------------------------------------------------------------------------------
# the attacks of issue "any pod can own a node": refused in a team namespace at either level

#: A team member's ways onto the node: its root, its network (IMDS, every pod's traffic), its files.
NODE_ESCAPES = {
    "privileged": (
        _pod(container={"securityContext": {"privileged": True}}),
        ["Privileged Containers: containers[0].securityContext.privileged is true"],
    ),
    "hostPath": (
        _pod(
            container={"volumeMounts": [{"name": "host", "mountPath": "/host"}]},
            volumes=[{"name": "host", "hostPath": {"path": "/"}}],
        ),
        ["HostPath Volumes: volumes[0].hostPath is set (host)"],
    ),
    "hostNetwork": (_pod(hostNetwork=True), ["Host Namespaces: hostNetwork is true"]),
}


@pytest.mark.parametrize("escape", sorted(NODE_ESCAPES))
@pytest.mark.parametrize("level", [BASELINE, RESTRICTED])
def test_a_privileged_hostpath_or_hostnetwork_pod_is_refused_in_a_team_namespace(
    escape: str, level: PodSecurityLevel
) -> None:
    spec, baseline_lines = NODE_ESCAPES[escape]
    (namespace,) = [
        o
        for o in team_namespace_objects("vision", kubernetes_version="1.33", level=level)
        if o["kind"] == "Namespace"
    ]
    enforced = namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    assert enforced == level.value
    found = violations(spec, enforced)
    assert found[: len(baseline_lines)] == baseline_lines  # restricted adds its own rows after baseline's
    assert violations(spec, "baseline") == baseline_lines


# --------------------------------------------------------------------------------------------------
# every pod we create in a team namespace is admitted


def _queued_environment() -> Any:
    """eks-p5-efa.yaml with queues in a team namespace (acceptance runs there) and the job layer's jobs."""
    document = yaml.safe_load((ROOT / "environments" / "eks-p5-efa.yaml").read_text())
    document["eks"]["queues"] = {"namespaces": ["vision", "speech"]}
    document["eks"]["gpu_nodegroups"] = [
        {"name": "a100", "instance_type": "p4d.24xlarge", "size": 1, "mig": "all-1g.5gb"}
    ]
    document["eks"]["addons"]["nvidia_device_plugin"]["mig_strategy"] = "mixed"
    return parse_environment(document, source="queued.yaml")


def _our_pods() -> list[tuple[str, str, dict[str, Any], dict[str, str]]]:
    """``(source, where, pod spec, annotations)`` of every pod the acceptance jobs of every EKS and HyperPod
    on EKS environment (and one queueing in team namespaces, with MIG) and the training runtimes create."""
    configs = [
        (path.stem, load_environment(path))
        for path in sorted((ROOT / "environments").glob("*.yaml"))
        if path.stem.startswith(("eks-", "hyperpod-eks-"))
    ]
    configs.append(("queued", _queued_environment()))
    pods = []
    for name, config in configs:
        for job in acceptance_plan(config, name).jobs:
            if not job.filename.endswith(".yaml"):
                continue
            for document in yaml.safe_load_all(job.content):
                for where, spec, notes in pod_templates(document):
                    pods.append((f"{name}/{job.filename}", where, dict(spec), dict(notes)))
    p5 = FlavorCapacity(
        name="p5",
        instance_type=lookup("p5.48xlarge"),
        nodes=2,
        efa_interfaces=32,
        labels={NODEGROUP_LABEL: "p5"},
        taints=(Taint("nvidia.com/gpu", "true", "NoSchedule"),),
    )
    runtimes = runtime_manifests([p5], torchrun_image=PYTORCH_EFA_IMAGE, mpi_image=DEFAULT_NCCL_TESTS_IMAGE)
    applied = nccl_test_mpijob(
        name="nccl-tests-p5", instance_type=lookup("p5.48xlarge"), workers=2, efa_interfaces=32
    )
    for manifest in [*runtimes, applied]:
        for where, spec, notes in pod_templates(manifest):
            pods.append(
                (f"{manifest['kind']}/{manifest['metadata']['name']}", where, dict(spec), dict(notes))
            )
    return pods


OUR_PODS = _our_pods()


def test_the_pods_judged_are_every_kind_of_job_we_create() -> None:
    """The NCCL MPIJob (launcher and workers), the TrainJob's runtimes, the DCGM, MIG and gang-test jobs."""
    sources = {source.split("/")[-1] for source, *_ in OUR_PODS}
    assert {"nccl-tests-p5.yaml", "dcgm-diag-p5.yaml", "mig-a100.yaml"} <= sources
    assert any(s.startswith("gang") for s in sources)
    assert {"torchrun-efa-p5", "mpi-efa-p5", "nccl-tests-p5"} <= sources
    wheres = {where for *_, where, _, _ in [(s, w, p, a) for s, w, p, a in OUR_PODS]}
    assert {
        "spec.mpiReplicaSpecs.Launcher.template",
        "spec.mpiReplicaSpecs.Worker.template",
        "spec.template",
    } <= wheres


@pytest.mark.parametrize(
    ("source", "where", "spec", "annotations"), OUR_PODS, ids=[f"{s}:{w}" for s, w, *_ in OUR_PODS]
)
def test_every_pod_we_create_in_a_team_namespace_is_admitted_at_baseline(
    source: str, where: str, spec: dict[str, Any], annotations: dict[str, str]
) -> None:
    """No EFA job needs a capability baseline forbids: EFA devices come from the EFA device plugin's
    ``vpc.amazonaws.com/efa`` resource and huge pages from ``hugepages-2Mi``, so no exception is needed."""
    assert violations(spec, BASELINE, annotations) == []


def test_at_restricted_our_root_images_are_refused_which_is_why_baseline_is_the_default() -> None:
    """The NCCL tests image and the MPI launcher run as root without dropping capabilities: a restricted
    namespace refuses them (warn and audit at restricted report them in a baseline one)."""
    refused = {
        source for source, _, spec, annotations in OUR_PODS if violations(spec, RESTRICTED, annotations)
    }
    assert refused == {source for source, *_ in OUR_PODS}


# --------------------------------------------------------------------------------------------------
# the team namespace's objects, validated for the cluster's Kubernetes version


def test_a_team_namespace_enforces_baseline_and_warns_and_audits_at_restricted() -> None:
    assert pod_security_labels("baseline", "1.33") == {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/enforce-version": "v1.33",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": "v1.33",
        "pod-security.kubernetes.io/audit": "restricted",
        "pod-security.kubernetes.io/audit-version": "v1.33",
    }
    assert pod_security_labels("restricted", "1.34")["pod-security.kubernetes.io/enforce"] == "restricted"
    with pytest.raises(ConfigurationError, match="must be one of baseline, restricted, got 'privileged'"):
        pod_security_labels("privileged", "1.33")


def test_the_team_group_holds_edit_in_its_namespace_only() -> None:
    binding = team_role_binding("vision")
    assert binding == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",  # not a ClusterRoleBinding: nothing outside the namespace
        "metadata": {"name": "training-clusters-team-edit", "namespace": "vision"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [
            {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Group",
                "name": "training-clusters:team:vision",
            }
        ],
    }
    assert team_group("speech") == "training-clusters:team:speech"


def test_a_team_s_pods_accept_connections_from_their_own_namespace_only() -> None:
    assert same_namespace_ingress("vision")["spec"] == {
        "podSelector": {},  # every pod of the namespace
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {}}]}],  # a podSelector alone: this namespace's pods
    }


def _cidr_holds(cidr: str, address: str) -> bool:
    network, host = ipaddress.ip_network(cidr), ipaddress.ip_address(address)
    return network.version == host.version and host in network


def _egress_allowed(policy: dict[str, Any], address: str) -> bool:
    """Whether a NetworkPolicy's egress rules admit a connection to ``address`` (an address outside the
    cluster's pods), as https://kubernetes.io/docs/concepts/services-networking/network-policies/ reads
    ``ipBlock``: inside ``cidr`` and in none of ``except``; rules and peers are ORed."""
    return any(
        _cidr_holds(peer["ipBlock"]["cidr"], address)
        and not any(_cidr_holds(e, address) for e in peer["ipBlock"].get("except", []))
        for rule in policy["spec"]["egress"]
        for peer in rule["to"]
        if "ipBlock" in peer
    )


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("169.254.169.254", False),  # instance metadata (IPv4)
        ("fd00:ec2::254", False),  # instance metadata (IPv6)
        ("169.254.170.23", True),  # the EKS Pod Identity agent: pods' own roles
        ("fd00:ec2::23", True),
        ("169.254.169.253", True),  # the VPC's DNS resolver
        ("10.0.1.6", True),  # the VPC: FSx, other nodes
        ("52.94.0.1", True),  # AWS APIs and the internet, through NAT
        ("169.254.169.255", True),  # both sides of the /32
    ],
)
def test_a_team_s_pods_reach_everything_but_instance_metadata(address: str, allowed: bool) -> None:
    policy = no_instance_metadata_egress("vision")
    assert policy["spec"]["podSelector"] == {} and policy["spec"]["policyTypes"] == ["Egress"]
    assert _egress_allowed(policy, address) is allowed
    # and every pod of the cluster (a namespaceSelector that selects every namespace)
    assert {"namespaceSelector": {}} in policy["spec"]["egress"][0]["to"]


@pytest.mark.parametrize("namespace", ["vision", "default"])
@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_the_team_namespace_objects_are_valid_for_the_pinned_kubernetes_version(
    namespace: str, level: str
) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    objects = team_namespace_objects(
        namespace,
        kubernetes_version=KUBERNETES_VERSION,
        level=level,
        labels={"training-clusters/kueue-managed": "true"},
    )
    assert [o["kind"] for o in objects] == (["Namespace"] if namespace != "default" else []) + [
        "RoleBinding",
        "NetworkPolicy",
        "NetworkPolicy",
    ]
    for obj in [*objects, monitoring_ingress("monitoring")]:
        kubernetes_validate.validate(obj, f"{KUBERNETES_VERSION}.0", strict=True)
    with pytest.raises(kubernetes_validate.ValidationError):  # the validator does refuse: a field misspelt
        kubernetes_validate.validate(
            {**objects[-2], "spec": {**objects[-2]["spec"], "podSelectors": {}}},
            f"{KUBERNETES_VERSION}.0",
            strict=True,
        )


# --------------------------------------------------------------------------------------------------
# the file's fields


def _eks_document(queues: dict[str, Any]) -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "environments" / "eks-p5-efa.yaml").read_text())
    document["eks"]["queues"] = queues
    return document


def test_the_file_names_a_level_and_a_role_per_team() -> None:
    config = parse_environment(
        _eks_document(
            {
                "namespaces": ["vision"],
                "pod_security": "restricted",
                "team_roles": {"vision": "arn:aws:iam::111122223333:role/teams/Vision"},
            }
        )
    )
    assert config.eks is not None
    assert config.eks.queues.pod_security is RESTRICTED
    assert config.eks.queues.team_roles == {"vision": "arn:aws:iam::111122223333:role/teams/Vision"}
    assert parse_environment(_eks_document({})).eks.queues.pod_security is BASELINE  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("queues", "message"),
    [
        (
            {"namespaces": ["vision"], "team_roles": {"speech": "arn:aws:iam::111122223333:role/Speech"}},
            "eks.queues.team_roles.speech: must name one of the team namespaces (vision), got 'speech'",
        ),
        (
            {"namespaces": ["vision"], "team_roles": {"vision": "arn:aws:iam::111122223333:user/alice"}},
            "eks.queues.team_roles.vision: must be an IAM role ARN such as "
            "arn:aws:iam::111122223333:role/VisionTeam (the role whose sessions act as the team), got "
            "'arn:aws:iam::111122223333:user/alice'",
        ),
        (
            {"namespaces": ["vision"], "pod_security": "privileged"},
            "eks.queues.pod_security",
        ),
    ],
)
def test_a_team_role_of_no_team_or_not_a_role_is_refused(queues: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(_eks_document(queues), source="f.yaml")
    assert message in str(error.value)


def test_hyperpod_s_api_has_no_instance_metadata_setting_so_the_namespace_policy_is_what_guards_it() -> None:
    """HyperPod manages its instances: neither SageMaker's ``CreateCluster`` (botocore's model of the API) nor
    CloudFormation's ``AWS::SageMaker::Cluster`` (aws-cdk-lib's ``CfnCluster``) has a metadata option or hop
    limit for an instance group, unlike EC2's launch templates (``MetadataOptions``), which our EKS nodegroups
    set to one hop. A team pod on a HyperPod node is kept from the node's role by the namespace's egress
    policy instead (:func:`no_instance_metadata_egress`)."""
    botocore_session = pytest.importorskip("botocore.session")
    from aws_cdk import aws_sagemaker as sagemaker

    model = botocore_session.get_session().get_service_model("sagemaker")
    group = model.shape_for("ClusterInstanceGroupSpecification")
    assert "InstanceGroupName" in group.members  # the shape read is the instance group's

    def metadata_like(name: str) -> bool:
        return any(word in name.lower() for word in ("metadata", "imds", "hoplimit"))

    assert not [name for name in group.members if metadata_like(name)]
    create = model.operation_model("CreateCluster").input_shape
    assert not [name for name in create.members if metadata_like(name)]
    properties = [name for name in dir(sagemaker.CfnCluster) if name.endswith("Property")]
    assert "ClusterInstanceGroupProperty" in properties
    assert not [name for name in properties if metadata_like(name)]
    # an EC2 launch template does have it: the words would be found where the setting exists
    ec2 = botocore_session.get_session().get_service_model("ec2")
    assert "MetadataOptions" in ec2.shape_for("RequestLaunchTemplateData").members
    assert metadata_like("MetadataOptions")


def test_an_admin_role_named_by_name_is_the_deploying_account_s_role_of_that_name_without_a_path(
    environment_gates: EnvironmentGates,
) -> None:
    """``admin_role_name`` becomes ``arn:<partition>:iam::<the deploying account>:role/<name>`` in the admin access
    entry: no other account's role, and no path (a role with one needs ``admin_role_arn``). EKS keeps the role's
    unique id with the entry, so a role made again under the name later does not inherit it (Amazon EKS API
    reference, ``AccessEntry.principalArn``)."""
    path = ROOT / "environments" / "eks-g5-efa.yaml"
    name = load_environment(path).eks.admin_role_name  # type: ignore[union-attr]
    assert name is not None
    template = environment_gates.template(path)
    entries = [
        r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::EKS::AccessEntry"
    ]
    admin = [e for e in entries if "AmazonEKSClusterAdminPolicy" in json.dumps(e.get("AccessPolicies", []))]
    # the others are roles this stack makes (CDK's kubectl handler, the release-manifest handler): by GetAtt
    named = [e for e in admin if "Fn::GetAtt" not in e["PrincipalArn"]]
    assert len(named) == 1 and len(admin) > 1
    admin = named
    assert admin[0]["PrincipalArn"] == {
        "Fn::Join": [
            "",
            [
                "arn:aws:iam::",
                {"Ref": "AWS::AccountId"},
                f":role/{name}",
            ],  # the stack's region fixes the partition
        ]
    }


def test_the_team_namespaces_are_the_queues_or_default_without_queues() -> None:
    """What the FSx CSI driver gives a directory and a claim: the namespaces the queues make, else ``default``
    (no queues without Kueue or without a GPU group: nothing makes another namespace)."""
    with_queues = parse_environment(_eks_document({"namespaces": ["vision", "nlp"]})).eks
    assert with_queues is not None and with_queues.team_namespaces == ["vision", "nlp"]
    document = _eks_document({})
    del document["eks"]["queues"]
    document["eks"].setdefault("addons", {})["kueue"] = False
    without_kueue = parse_environment(document).eks
    assert without_kueue is not None and without_kueue.team_namespaces == ["default"]
    hyperpod = yaml.safe_load((ROOT / "environments" / "hyperpod-eks-p5.yaml").read_text())
    hyperpod["hyperpod_eks"]["queues"] = {"namespaces": ["vision"]}
    section = parse_environment(hyperpod).hyperpod_eks
    assert section is not None and section.team_namespaces == ["vision"]
    cpu_only = yaml.safe_load((ROOT / "environments" / "hyperpod-eks-p5.yaml").read_text())
    cpu_only["hyperpod_eks"].pop("queues", None)
    for group in cpu_only["hyperpod_eks"]["instance_groups"]:
        group["instance_type"] = "ml.c5n.18xlarge"
        group.pop("deep_health_checks", None)  # they test accelerators: refused on a CPU type
    section = parse_environment(cpu_only).hyperpod_eks
    assert section is not None and section.queue_groups == [] and section.team_namespaces == ["default"]
