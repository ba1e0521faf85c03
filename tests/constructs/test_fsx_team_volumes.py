"""Each team's data on FSx is its own directory: a PV/PVC per team namespace, never the file system's root
(issue 40, "each team's data on FSx as its own sub-directory PV/PVC").

The FSx CSI driver mounts ``<dnsname>@tcp:/<mountname>`` exactly as the PV's ``volumeAttributes`` give them
(kubernetes-sigs/aws-fsx-csi-driver ``pkg/driver/node.go``, ``NodePublishVolume``), so a sub-directory is
``mountname: <mount name>/<directory>``; the directory must exist (the driver's issue #247), and the Job that
makes it is run here by the real busybox ``sh`` on a temporary tree.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Annotations, Match, Template

from training_clusters.config import load_environment
from training_clusters.constructs.common.lustre import ExistingLustre, SharedLustre
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.eks.addons import (
    CSI_CONTROLLER_CONFIGURATION,
    TEAM_DIRECTORY_GID,
    EbsCsiDriver,
    FsxCsiDriver,
    lustre_volume_manifests,
    team_directory_commands,
    team_directory_manifests,
    team_directory_script,
    team_volume_manifests,
)
from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.environments import environment_files
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.releases import BUSYBOX_IMAGE
from training_clusters.workloads.tenancy import SYSTEM_NODE_LABELS, SYSTEM_TOLERATION

from ..assertions import manifest_objects, text
from ..charts.test_system_nodes import SYSTEM_NODE, NodeFacts, lands_on
from ..conftest import AZS, ROOT, EnvironmentGates

FS = {
    "file_system_id": "fs-0123456789abcdef0",
    "dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
    "mount_name": "abcdefgh",
    "capacity_gib": 1200,
}


def test_a_team_volume_is_its_directory_and_binds_only_its_teams_claim() -> None:
    storage_class, vision_pv, vision_pvc, nlp_pv, nlp_pvc = team_volume_manifests(
        **FS, namespaces=["vision", "nlp"]
    )
    assert storage_class["kind"] == "StorageClass"
    assert vision_pv["metadata"] == {"name": "fsx-lustre-vision"}
    assert vision_pv["spec"]["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": "fs-0123456789abcdef0::teams/vision",  # one handle per volume
        "volumeAttributes": {"dnsname": FS["dns_name"], "mountname": "abcdefgh/teams/vision"},
    }
    assert vision_pv["spec"]["claimRef"] == {"namespace": "vision", "name": "fsx-lustre"}
    assert vision_pvc["metadata"] == {"name": "fsx-lustre", "namespace": "vision"}
    assert vision_pvc["spec"]["volumeName"] == "fsx-lustre-vision"
    assert nlp_pv["spec"]["csi"]["volumeAttributes"]["mountname"] == "abcdefgh/teams/nlp"
    assert nlp_pv["spec"]["claimRef"] == {"namespace": "nlp", "name": "fsx-lustre"}
    assert nlp_pvc["metadata"]["namespace"] == "nlp"
    # no team volume is the root, and none is another team's
    mounts = [o["spec"]["csi"]["volumeAttributes"]["mountname"] for o in (vision_pv, nlp_pv)]
    assert "abcdefgh" not in mounts and len(set(mounts)) == 2


def test_the_root_volume_binds_only_the_claim_in_kube_system() -> None:
    volume, claim, job = team_directory_manifests(**FS, namespaces=["vision"])
    assert volume["spec"]["csi"]["volumeAttributes"]["mountname"] == "abcdefgh"
    assert volume["spec"]["claimRef"] == {"namespace": "kube-system", "name": "fsx-lustre-root"}
    assert claim["metadata"] == {"name": "fsx-lustre-root", "namespace": "kube-system"}
    assert job["metadata"]["namespace"] == "kube-system"
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == dict(SYSTEM_NODE_LABELS)
    assert pod["tolerations"] == [dict(SYSTEM_TOLERATION)]
    assert pod["volumes"] == [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-lustre-root"}}]
    (container,) = pod["containers"]
    assert container["image"] == BUSYBOX_IMAGE
    assert container["command"] == ["sh", "-c", team_directory_script(["vision"])]
    assert container["securityContext"] == {
        "runAsUser": 0,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
    }


def test_a_new_namespace_list_is_a_new_job() -> None:
    """A Job's pod template cannot be changed: another list of teams must be another Job."""
    name = lambda namespaces: team_directory_manifests(**FS, namespaces=namespaces)[2]["metadata"]["name"]  # noqa: E731
    assert name(["vision"]) == name(["vision"])
    assert name(["vision"]) != name(["vision", "nlp"])
    assert re.fullmatch(r"fsx-lustre-team-directories-[0-9a-f]{8}", name(["vision"]))


def test_the_root_volume_is_unchanged_without_a_subdirectory() -> None:
    _, volume, _claim = lustre_volume_manifests(**FS)
    assert volume["spec"]["csi"]["volumeAttributes"]["mountname"] == "abcdefgh"
    assert volume["spec"]["csi"]["volumeHandle"] == "fs-0123456789abcdef0"
    assert volume["spec"]["claimRef"] == {"namespace": "default", "name": "fsx-lustre"}


# --------------------------------------------------------------------------------------------------
# the directory job's script, run by the real shells


def _shells() -> list[str]:
    found = [shell for shell in ("busybox", "dash") if shutil.which(shell)]
    if not found:
        pytest.skip("neither busybox nor dash is installed")
    return found


def _run(shell: str, script: str, root: Path) -> subprocess.CompletedProcess[str]:
    script = script.replace("/fsx", str(root))
    command = [shell, "sh", "-c", script] if shell == "busybox" else [shell, "-c", script]
    return subprocess.run(command, capture_output=True, text=True, check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to root's group 1000 needs root, as the job runs")
@pytest.mark.parametrize("shell", ["busybox", "dash"])
def test_the_script_makes_each_team_directory_owned_for_the_team(shell: str, tmp_path: Path) -> None:
    if shell not in _shells():
        pytest.skip(f"{shell} is not installed")
    script = team_directory_script(["vision", "nlp"])
    for _ in range(2):  # idempotent: the Job's retry and the next list's Job run it again
        result = _run(shell, script, tmp_path)
        assert result.returncode == 0, result.stderr
    teams = tmp_path / "teams"
    assert (teams.stat().st_uid, teams.stat().st_gid, oct(teams.stat().st_mode & 0o7777)) == (0, 0, "0o755")
    for name in ("vision", "nlp"):
        info = (teams / name).stat()
        assert (info.st_uid, info.st_gid, oct(info.st_mode & 0o7777)) == (0, TEAM_DIRECTORY_GID, "0o2770")
    assert sorted(p.name for p in teams.iterdir()) == ["nlp", "vision"]


@pytest.mark.skipif(os.geteuid() != 0, reason="runs as the job runs: root")
@pytest.mark.parametrize("shell", ["busybox", "dash"])
@pytest.mark.parametrize("planted", ["link", "file"])
def test_the_script_refuses_a_link_or_a_file_where_a_directory_goes(
    shell: str, planted: str, tmp_path: Path
) -> None:
    if shell not in _shells():
        pytest.skip(f"{shell} is not installed")
    (tmp_path / "teams").mkdir()
    victim = tmp_path / "etc-shadow"
    victim.write_text("secret")
    victim.chmod(0o600)
    if planted == "link":
        (tmp_path / "teams" / "vision").symlink_to(victim)
    else:
        (tmp_path / "teams" / "vision").write_text("x")
    result = _run(shell, team_directory_script(["vision"]), tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == f"refusing {tmp_path}/teams/vision: not a directory"
    assert (victim.stat().st_gid, oct(victim.stat().st_mode & 0o7777)) == (0, "0o600")  # not followed


# --------------------------------------------------------------------------------------------------
# the construct


def _driver(stack: cdk.Stack, **kwargs: Any) -> tuple[FsxCsiDriver, dict[str, Any]]:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    cluster = GpuEksCluster(stack, "Eks", vpc=network.vpc)
    squash = kwargs.pop("root_squash", False)
    storage = SharedLustre(stack, "Fsx", vpc=network.vpc, root_squash=squash)
    driver = FsxCsiDriver(stack, "FsxCsi", cluster=cluster, storage=storage, **kwargs)
    return driver, Template.from_stack(stack).to_json()


def _objects(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        obj
        for resource in template["Resources"].values()
        if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
        for obj in manifest_objects(resource)
    ]


def test_the_driver_gives_each_team_namespace_its_directory(stack: cdk.Stack) -> None:
    driver, template = _driver(stack, namespaces=["vision", "nlp"])
    objects = _objects(template)
    claims = {
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in objects
        if o["kind"] == "PersistentVolumeClaim"
    }
    assert claims == {("vision", "fsx-lustre"), ("nlp", "fsx-lustre"), ("kube-system", "fsx-lustre-root")}
    volumes = {
        o["metadata"]["name"]: o["spec"]["claimRef"]["namespace"]
        for o in objects
        if o["kind"] == "PersistentVolume"
    }
    assert volumes == {
        "fsx-lustre-vision": "vision",
        "fsx-lustre-nlp": "nlp",
        "fsx-lustre-root-pv": "kube-system",
    }
    (job,) = [o for o in objects if o["kind"] == "Job"]
    assert "teams/vision" in job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert driver.directories is not None and driver.namespaces == ["vision", "nlp"]


def test_the_driver_defaults_to_the_default_namespace(stack: cdk.Stack) -> None:
    _, template = _driver(stack)
    (pv,) = [
        o
        for o in _objects(template)
        if o["kind"] == "PersistentVolume" and o["metadata"]["name"] == "fsx-lustre-default"
    ]
    assert pv["spec"]["claimRef"] == {"namespace": "default", "name": "fsx-lustre"}


def test_with_root_squash_no_job_and_a_warning_names_the_commands(stack: cdk.Stack) -> None:
    driver, template = _driver(stack, namespaces=["vision"], root_squash=True)
    assert driver.directories is None
    assert not [o for o in _objects(template) if o["kind"] == "Job"]
    (warning,) = Annotations.from_stack(stack).find_warning(
        "/Test/FsxCsi", Match.string_like_regexp("training-clusters:fsx-team-directories")
    )
    assert warning.entry.data == (
        "root squash is on, so no job can make the team directories: from a client in root_squash_exempt_nids, "
        "with the file system mounted at /fsx, run once: "
        + team_directory_commands(["vision"])
        + " [ack: training-clusters:fsx-team-directories]"
    )
    assert team_directory_commands(["vision", "nlp"]) == (
        "mkdir -p /fsx/teams /fsx/teams/vision /fsx/teams/nlp && chown 0:0 /fsx/teams && chmod 0755 /fsx/teams && "
        "chown 0:1000 /fsx/teams/vision /fsx/teams/nlp && chmod 2770 /fsx/teams/vision /fsx/teams/nlp"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to group 1000 needs root, as the admin runs it")
def test_the_commands_for_an_exempt_client_make_what_the_job_makes(tmp_path: Path) -> None:
    by_job, by_hand = tmp_path / "job", tmp_path / "hand"
    for root, script in (
        (by_job, team_directory_script(["vision", "nlp"])),
        (by_hand, team_directory_commands(["vision", "nlp"])),
    ):
        root.mkdir()
        result = _run("dash" if "dash" in _shells() else "busybox", script, root)
        assert result.returncode == 0, result.stderr

    def tree(root: Path) -> list[tuple[str, int, int, int]]:
        return sorted(
            (str(p.relative_to(root)), p.stat().st_uid, p.stat().st_gid, p.stat().st_mode)
            for p in root.rglob("*")
        )

    assert tree(by_job) == tree(by_hand) and len(tree(by_job)) == 3


@pytest.mark.parametrize(
    ("namespaces", "message"),
    [
        ([], "namespaces must name at least one namespace, got none"),
        (["Vision"], "namespaces must be"),
        (["a;rm -rf /"], "namespaces must be"),
        (["vision", "vision"], "namespaces must each be given once, got vision more than once"),
    ],
)
def test_namespaces_are_checked(stack: cdk.Stack, namespaces: list[str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        _driver(stack, namespaces=namespaces)


def _adopted_driver(stack: cdk.Stack, known_gib: int | None, **kwargs: Any) -> FsxCsiDriver:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    cluster = GpuEksCluster(stack, "Eks", vpc=network.vpc)
    existing = ExistingLustre(
        file_system_id=FS["file_system_id"],
        dns_name=FS["dns_name"],
        mount_name=FS["mount_name"],
        security_group=ec2.SecurityGroup.from_security_group_id(stack, "FsxGroup", "sg-0123456789abcdef0"),
        storage_capacity_gib=known_gib,
    )
    storage = SharedLustre(stack, "Fsx", vpc=network.vpc, existing=existing)
    return FsxCsiDriver(stack, "FsxCsi", cluster=cluster, storage=storage, **kwargs)


@pytest.mark.parametrize(
    ("known_gib", "capacity_gib", "advertised"),
    [(2400, None, "2400Gi"), (2400, 2400, "2400Gi"), (None, 4800, "4800Gi")],
)
def test_the_volume_advertises_the_file_systems_capacity(
    stack: cdk.Stack, known_gib: int | None, capacity_gib: int | None, advertised: str
) -> None:
    _adopted_driver(stack, known_gib, capacity_gib=capacity_gib)
    volumes = [
        obj for obj in _objects(Template.from_stack(stack).to_json()) if obj["kind"] == "PersistentVolume"
    ]
    assert volumes and {volume["spec"]["capacity"]["storage"] for volume in volumes} == {advertised}


@pytest.mark.parametrize(
    ("known_gib", "capacity_gib", "message"),
    [
        (
            None,
            None,
            "Test/FsxCsi: capacity_gib is required for an adopted file system whose ExistingLustre gives no "
            "storage_capacity_gib",
        ),
        (
            2400,
            1200,
            "Test/FsxCsi: capacity_gib must match the file system's storage_capacity_gib (2400) or be omitted, "
            "got 1200",
        ),
    ],
)
def test_a_capacity_unknown_or_unlike_the_file_systems_is_refused(
    stack: cdk.Stack, known_gib: int | None, capacity_gib: int | None, message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        _adopted_driver(stack, known_gib, capacity_gib=capacity_gib)
    assert str(error.value) == message


@pytest.mark.parametrize("driver", ["fsx", "ebs"])
def test_a_csi_driver_pins_an_addon_version_in_eks_form_only(stack: cdk.Stack, driver: str) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    cluster = GpuEksCluster(stack, "Eks", vpc=network.vpc)

    def make(id: str, version: str) -> None:
        if driver == "fsx":
            storage = SharedLustre(stack, f"{id}Fsx", vpc=network.vpc)
            FsxCsiDriver(stack, id, cluster=cluster, storage=storage, addon_version=version)
        else:
            EbsCsiDriver(stack, id, cluster=cluster, addon_version=version)

    make("Pinned", "v1.6.0-eksbuild.1")
    addons = Template.from_stack(stack).find_resources("AWS::EKS::Addon")
    assert "v1.6.0-eksbuild.1" in {addon["Properties"].get("AddonVersion") for addon in addons.values()}
    with pytest.raises(ConfigurationError) as error:
        make("Bare", "1.6.0")
    assert str(error.value) == (
        "Test/Bare: addon_version must look like v1.6.0-eksbuild.1 (aws eks describe-addon-versions), got '1.6.0'"
    )


# --------------------------------------------------------------------------------------------------
# the CSI controllers on the system nodes


def test_the_csi_controllers_are_placed_on_the_system_nodes(stack: cdk.Stack) -> None:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    cluster = GpuEksCluster(stack, "Eks", vpc=network.vpc)
    storage = SharedLustre(stack, "Fsx", vpc=network.vpc)
    FsxCsiDriver(stack, "FsxCsi", cluster=cluster, storage=storage)
    EbsCsiDriver(stack, "EbsCsi", cluster=cluster)
    addons = {
        r["Properties"]["AddonName"]: r["Properties"]
        for r in Template.from_stack(stack).to_json()["Resources"].values()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"].endswith("csi-driver")
    }
    assert set(addons) == {"aws-fsx-csi-driver", "aws-ebs-csi-driver"}
    for properties in addons.values():
        assert json.loads(properties["ConfigurationValues"]) == {
            "controller": {
                "nodeSelector": {"training-clusters/role": "system"},
                "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
            }
        }
    assert {
        "controller": {"nodeSelector": dict(SYSTEM_NODE_LABELS), "tolerations": [dict(SYSTEM_TOLERATION)]}
    } == CSI_CONTROLLER_CONFIGURATION


# --------------------------------------------------------------------------------------------------
# every shipped EKS and HyperPod EKS environment with FSx


def _kubernetes_environments() -> list[Path]:
    return [
        p
        for p in environment_files(ROOT / "environments")
        if (config := load_environment(p)).storage.lustre is not None
        and (config.eks is not None or config.hyperpod_eks is not None)
    ]


@pytest.mark.parametrize("path", _kubernetes_environments(), ids=lambda p: p.stem)
def test_no_team_claim_of_a_shipped_environment_reaches_the_root_or_another_team(
    path: Path, environment_gates: EnvironmentGates
) -> None:
    config = load_environment(path)
    section = config.eks if config.eks is not None else config.hyperpod_eks
    assert section is not None
    template = environment_gates.template(path)
    resources = {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
    }
    objects = {logical_id: manifest_objects(resource) for logical_id, resource in resources.items()}
    volumes = [o for found in objects.values() for o in found if o["kind"] == "PersistentVolume"]
    (file_system,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::FSx::FileSystem"]
    mount = text(
        {
            "Fn::GetAtt": [
                next(k for k, r in template["Resources"].items() if r is file_system),
                "LustreMountName",
            ]
        }
    )
    bound = {
        (v["spec"]["claimRef"]["namespace"], v["spec"]["csi"]["volumeAttributes"]["mountname"])
        for v in volumes
    }
    assert bound == {("kube-system", mount)} | {(ns, f"{mount}/teams/{ns}") for ns in section.team_namespaces}
    # the claims wait for the namespaces the queues make
    (claims_id,) = [
        k
        for k, found in objects.items()
        if any(o["kind"] == "StorageClass" and o["provisioner"] == "fsx.csi.aws.com" for o in found)
    ]
    namespaces_ids = [
        k for k, found in objects.items() if found and all(o["kind"] == "Namespace" for o in found)
    ]
    assert set(namespaces_ids) <= set(resources[claims_id].get("DependsOn", []))
    if set(section.team_namespaces) != {"default"}:
        assert namespaces_ids


#: A HyperPod instance group's node as a file without taints makes it: untainted, labelled by HyperPod.
HYPERPOD_NODE = NodeFacts(
    {
        "node.kubernetes.io/instance-type": "ml.p5.48xlarge",
        "sagemaker.amazonaws.com/node-health-status": "Schedulable",
        "kubernetes.io/os": "linux",
    },
    (),
)


def test_the_csi_controllers_land_on_the_system_nodes_and_not_on_an_untainted_hyperpod_node() -> None:
    """Judged as the scheduler judges it (:func:`lands_on`): the add-on's own default, a ``CriticalAddonsOnly``
    toleration alone, would let the controller run on any untainted HyperPod node, beside the teams' pods."""
    controller = CSI_CONTROLLER_CONFIGURATION["controller"]
    assert lands_on(controller, SYSTEM_NODE)
    assert not lands_on(controller, HYPERPOD_NODE)
    chart_default = {"tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}]}
    assert lands_on(chart_default, HYPERPOD_NODE) and lands_on(chart_default, SYSTEM_NODE)
