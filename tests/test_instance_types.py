"""Any instance type the services sell, from an environment file.

Controller, login, head and system nodes take any type spelt as the service spells it (``c7i.2xlarge``,
``ml.m7i.xlarge``): none of them is in the catalogue, and each stack synthesizes with it and passes the gates.
Accelerated or EFA nodes of a type the catalogue does not know take its facts from the file's
``instance_types:`` section, checked like the catalogue's rows: the launch template then carries as many EFA
interfaces as the file says the type has.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from training_clusters import catalog
from training_clusters.catalog import DATA_FILE_NAME, Architecture, architecture_of
from training_clusters.config import load_environment
from training_clusters.environments import add_environment
from training_clusters.model.errors import ConfigurationError
from training_clusters.workloads.scheduling import NODEGROUP_LABEL

from .conftest import CDK_CONTEXT, GateResult

NETWORK = """\
region: us-east-1
availability_zones: [us-east-1a, us-east-1b]
network:
  nat_gateways: 1
"""

#: A B300 type as a file user declares it: the figures ``aws ec2 describe-instance-types --instance-types
#: p6-b300.48xlarge`` reports (EfaInfo.MaximumEfaInterfaces 16).
P6_B300 = """\
instance_types:
  - name: p6-b300.48xlarge
    vcpus: 192
    memory_gib: 4096
    accelerators: {kind: nvidia-gpu, model: B300, count: 8, memory_gib_each: 268}
    max_efa_interfaces: 16
    gpudirect_rdma: true
    network_gbps: 6400
    quota_family: P
    source: aws ec2 describe-instance-types --instance-types p6-b300.48xlarge
"""

FILES = {
    "parallelcluster-c7i-head": NETWORK
    + """\
orchestrator: parallelcluster
compute:
  controller: {instance_type: c7i.2xlarge}
  login: {instance_type: m7i.xlarge}
  node_groups:
    - {name: gpu, instance_type: g5.8xlarge, count: 2}
""",
    "hyperpod-m7i-login": NETWORK
    + """\
orchestrator: hyperpod
compute:
  cluster_name: m7i-login
  controller: {instance_type: c7i.2xlarge}
  login: {instance_type: m7i.xlarge}
  node_groups:
    - {name: gpu, instance_type: g5.8xlarge, count: 2}
""",
    "pcs-m7i-login": NETWORK
    + """\
orchestrator: pcs
compute:
  login: {instance_type: m7i.xlarge}
  node_groups:
    - {name: gpu, instance_type: g5.8xlarge, count: 2}
""",
    "eks-p6-b300": NETWORK
    + P6_B300
    + """\
orchestrator: eks
compute:
  node_groups:
    - {name: b300, instance_type: p6-b300.48xlarge, count: 2}
eks:
  system_nodegroup: {instance_type: c7g.xlarge}
""",
}


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], GateResult]]:
    """Each file's resources and gate result (one synth each)."""
    built = {}
    for name, text in FILES.items():
        directory = tmp_path_factory.mktemp(name)
        path = directory / f"{name}.yaml"
        path.write_text(text)
        app = cdk.App(outdir=str(directory / "cdk.out"), context=dict(CDK_CONTEXT))
        stack = add_environment(app, path)
        result = GateResult(app)
        assert result.assembly is not None, "synth refused: " + "\n".join(map(str, result.findings))
        template = json.loads((Path(result.assembly.directory) / stack.template_file).read_text())
        built[name] = (template["Resources"], result)
    return built


def _one(resources: dict[str, Any], kind: str, **where: Any) -> dict[str, Any]:
    (found,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == kind and all(r["Properties"].get(k) == v for k, v in where.items())
    ]
    return found


def test_none_of_these_types_is_shipped_in_the_catalogue() -> None:
    shipped = {
        row["name"] for row in json.loads((Path(catalog.__file__).parent / DATA_FILE_NAME).read_text())
    }
    assert not {"c7i.2xlarge", "m7i.xlarge", "c7g.xlarge", "p6-b300.48xlarge"} & shipped


@pytest.mark.parametrize("name", list(FILES))
def test_each_file_passes_cdk_nag(synthesized: Any, name: str) -> None:
    _, result = synthesized[name]
    assert result.nag == [], "\n".join(map(str, result.nag))


def test_parallelcluster_head_node_c7i_and_login_pool_m7i(synthesized: Any) -> None:
    resources, _ = synthesized["parallelcluster-c7i-head"]
    configuration = _one(resources, "Custom::PclusterCluster")["ClusterConfiguration"]
    assert configuration["HeadNode"]["InstanceType"] == "c7i.2xlarge"
    assert [(p["InstanceType"], p["Count"]) for p in configuration["LoginNodes"]["Pools"]] == [
        ("m7i.xlarge", 1)
    ]


def test_hyperpod_slurm_login_group_ml_m7i_and_controller_ml_c7i(synthesized: Any) -> None:
    resources, _ = synthesized["hyperpod-m7i-login"]
    cluster = _one(resources, "AWS::SageMaker::Cluster")
    groups = {
        g["InstanceGroupName"]: (g["InstanceType"], g["InstanceCount"], g.get("OnStartDeepHealthChecks"))
        for g in cluster["InstanceGroups"]
    }
    # types the catalogue does not know are CPU groups: no deep health checks on them
    assert groups == {
        "controller": ("ml.c7i.2xlarge", 1, None),
        "login": ("ml.m7i.xlarge", 1, None),
        "gpu": ("ml.g5.8xlarge", 2, ["InstanceStress", "InstanceConnectivity"]),
    }


def test_pcs_login_node_group_m7i(synthesized: Any) -> None:
    resources, _ = synthesized["pcs-m7i-login"]
    login = _one(resources, "AWS::PCS::ComputeNodeGroup", Name="login")
    assert login["InstanceConfigs"] == [{"InstanceType": "m7i.xlarge"}]


def test_a_file_declared_p6_b300_nodegroup_carries_its_16_efa_interfaces(synthesized: Any) -> None:
    resources, _ = synthesized["eks-p6-b300"]
    template = _one(
        resources,
        "AWS::EC2::LaunchTemplate",
        LaunchTemplateData={**_launch_data(resources, "p6-b300.48xlarge")},
    )["LaunchTemplateData"]
    interfaces = template["NetworkInterfaces"]
    assert len(interfaces) == 16
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in interfaces] == [
        (0, 0, "efa"),
        *((card, 1, "efa") for card in range(1, 16)),
    ]
    (nodegroup,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::EKS::Nodegroup" and r["Properties"]["Labels"].get(NODEGROUP_LABEL) == "b300"
    ]
    assert nodegroup["AmiType"] == "AL2023_x86_64_NVIDIA"
    assert nodegroup["ScalingConfig"]["DesiredSize"] == 2


def test_an_arm_system_node_the_catalogue_does_not_know_gets_the_arm_ami(synthesized: Any) -> None:
    resources, _ = synthesized["eks-p6-b300"]
    amis = {r["Properties"]["AmiType"] for r in resources.values() if r["Type"] == "AWS::EKS::Nodegroup"}
    assert amis == {"AL2023_x86_64_NVIDIA", "AL2023_ARM_64_STANDARD"}
    assert architecture_of("c7g.xlarge") is Architecture.ARM64


def _launch_data(resources: dict[str, Any], instance_type: str) -> dict[str, Any]:
    (data,) = [
        r["Properties"]["LaunchTemplateData"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::LaunchTemplate"
        and r["Properties"]["LaunchTemplateData"].get("InstanceType") == instance_type
    ]
    return data


# --- the declared facts are checked like the catalogue's rows, at their line


def _refused(tmp_path: Path, text: str) -> str:
    path = tmp_path / "declared.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as raised:
        add_environment(cdk.App(outdir=str(tmp_path / "cdk.out")), path)
    return str(raised.value).replace(str(path), "FILE")


EKS_B300 = P6_B300 + textwrap.dedent(
    """\
    orchestrator: eks
    compute:
      node_groups:
        - {name: b300, instance_type: p6-b300.48xlarge, count: 2}
    """
)


@pytest.mark.parametrize(
    ("change", "line", "message"),
    [
        (
            ("max_efa_interfaces: 16", "max_efa_interfaces: 16\n    max_network_cards: 8"),
            10,
            "instance_types.0.max_efa_interfaces: must be between 0 and max_network_cards (8) (one EFA interface "
            "per network card at most), got 16",
        ),
        (
            ("gpudirect_rdma: true", "gpudirect_rdma: true\n    efa_interfaces: 16"),
            12,
            "instance_types.0.efa_interfaces: unknown key (got value 16); did you mean max_efa_interfaces?",
        ),
        (
            ("vcpus: 192", "vcpus: 0"),
            7,
            "instance_types.0.vcpus: must be a positive whole number, got 0",
        ),
        (
            ("    source: aws ec2 describe-instance-types --instance-types p6-b300.48xlarge\n", ""),
            5,
            "instance_types.0.source: required, but missing",
        ),
        (
            ("name: p6-b300.48xlarge\n", "name: p6-b300\n"),
            6,
            "instance_types.0.name: must be an EC2 instance type such as 'c7i.2xlarge' (family.size), got 'p6-b300'",
        ),
        (
            ("memory_gib: 4096", "memory_gib: 4096\n    hyperpod_name: ml.p6-b200.48xlarge"),
            9,
            "instance_types.0.hyperpod_name: must be 'ml.p6-b300.48xlarge' or None, got 'ml.p6-b200.48xlarge'",
        ),
        (
            ("accelerators: {kind: nvidia-gpu,", "accelerators: {kind: inferentia,"),
            9,
            "instance_types.0.accelerators.kind: Input should be 'nvidia-gpu' or 'trainium', got 'inferentia'",
        ),
    ],
)
def test_declared_facts_are_checked_like_the_catalogues_rows(
    tmp_path: Path, change: tuple[str, str], line: int, message: str
) -> None:
    text = (NETWORK + EKS_B300).replace(*change)
    assert change[0] in NETWORK + EKS_B300
    refused = _refused(tmp_path, text)
    assert refused.splitlines()[0] == "FILE: 1 problem(s)"
    assert refused.splitlines()[1] == f"  FILE:{line}: {message}"


def test_a_catalogued_type_declared_with_other_facts_is_refused_at_its_item(tmp_path: Path) -> None:
    text = NETWORK + EKS_B300.replace("p6-b300", "p6-b200")
    refused = _refused(tmp_path, text)
    assert refused.splitlines() == [
        "FILE: 1 problem(s)",
        "  FILE:6: instance_types.0: 'p6-b200.48xlarge': the catalogue holds other facts for it "
        "(`training-clusters catalog` shows them); one set of facts per type: remove it here to use those, or "
        "make them equal",
    ]


def test_a_catalogued_type_declared_with_its_own_facts_is_accepted(tmp_path: Path) -> None:
    row = catalog.to_row(catalog.CATALOG["p6-b200.48xlarge"])
    declared = "instance_types:\n  - " + json.dumps(row) + "\n"
    path = tmp_path / "same.yaml"
    path.write_text(NETWORK + declared + EKS_B300.split("orchestrator:", 1)[1].join(["orchestrator:", ""]))
    path.write_text(path.read_text().replace("p6-b300", "p6-b200"))
    config = load_environment(path)
    assert [g.instance_type for g in config.eks.efa_nodegroups] == ["p6-b200.48xlarge"]


def test_a_type_one_file_declares_is_unknown_to_the_next(tmp_path: Path) -> None:
    """Each file sees the types it declares, not those of a file loaded before it (``cdk synth`` of a folder)."""
    declaring = tmp_path / "declaring.yaml"
    declaring.write_text(NETWORK + EKS_B300)
    config = load_environment(declaring)
    assert catalog.lookup("p6-b300.48xlarge").max_efa_interfaces == 16
    assert [g.instance_type for g in config.eks.efa_nodegroups] == ["p6-b300.48xlarge"]
    relying = tmp_path / "relying.yaml"
    relying.write_text(NETWORK + EKS_B300.split("orchestrator:", 1)[1].join(["orchestrator:", ""]))
    with pytest.raises(ConfigurationError) as raised:
        load_environment(relying)
    assert "'p6-b300.48xlarge' is not in the catalogue" in str(raised.value)
    assert "p6-b300.48xlarge" not in catalog.CATALOG
