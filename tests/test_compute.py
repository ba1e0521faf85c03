"""One file, five orchestrators: environments/training-any.yaml synthesized under each ``orchestrator``.

The network and the file system are the same resources whichever orchestrator runs the nodes; each stack
has the node group the file states (type x count, EFA) and passes cdk-nag. Then :func:`expand_intent`'s
translation, merge and every message.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml

from training_clusters.config import parse_environment
from training_clusters.config.compute import DEFAULT_PCS_AMI_SSM_PARAMETER, Orchestrator, expand_intent
from training_clusters.environments import add_environment_config
from training_clusters.model.errors import ConfigurationError

from .conftest import CDK_CONTEXT, ROOT, GateResult

FILE = ROOT / "environments" / "training-any.yaml"
DOCUMENT: dict[str, Any] = yaml.safe_load(FILE.read_text())
ORCHESTRATORS = [o.value for o in Orchestrator]
#: What the environment shares whichever orchestrator runs it: compared property by property.
SHARED_TYPES = (
    "AWS::EC2::VPC",
    "AWS::EC2::Subnet",
    "AWS::EC2::RouteTable",
    "AWS::EC2::Route",
    "AWS::EC2::NatGateway",
    "AWS::EC2::InternetGateway",
    "AWS::EC2::FlowLog",
    "AWS::EC2::PlacementGroup",
    "AWS::FSx::FileSystem",
)
EFA_SECURITY_GROUP = {"Fn::GetAtt": ["NetworkEfaSecurityGroup3744DDDC", "GroupId"]}


#: What training-any states that each orchestrator cannot use: its file says to ignore it, else it is an error.
UNUSED = {
    "pcs": ["compute.controller"],
    "eks": ["compute.controller", "compute.login"],
    "hyperpod-eks": ["compute.controller", "compute.login"],
}


def _as(orchestrator: str, document: dict[str, Any] = DOCUMENT) -> dict[str, Any]:
    """training-any under ``orchestrator``, ignoring what that orchestrator cannot use."""
    switched = {**copy.deepcopy(document), "orchestrator": orchestrator}
    if UNUSED.get(orchestrator):
        switched["ignore"] = list(UNUSED[orchestrator])
    return switched


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], GateResult]]:
    """training-any under each orchestrator: its resources and its gate result (one synth each)."""
    built = {}
    for orchestrator in ORCHESTRATORS:
        outdir = tmp_path_factory.mktemp(f"any-{orchestrator}") / "cdk.out"
        app = cdk.App(outdir=str(outdir), context=dict(CDK_CONTEXT))
        config = parse_environment(_as(orchestrator), source=f"{FILE} as {orchestrator}")
        stack = add_environment_config(app, config, FILE.stem)
        result = GateResult(app)
        assert result.assembly is not None, "synth refused: " + "\n".join(map(str, result.findings))
        template = json.loads((Path(result.assembly.directory) / stack.template_file).read_text())
        built[orchestrator] = (template["Resources"], result)
    return built


def _of_type(resources: dict[str, Any], kind: str) -> dict[str, Any]:
    return {key: r.get("Properties", {}) for key, r in resources.items() if r["Type"] == kind}


def _without_kubernetes_tags(properties: dict[str, Any]) -> dict[str, Any]:
    """``properties`` less the subnet tags EKS adds for load balancers to find them (kubernetes.io/...)."""
    tags = [t for t in properties.get("Tags", []) if not str(t["Key"]).startswith("kubernetes.io/")]
    return {**properties, "Tags": tags} if "Tags" in properties else properties


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS)
def test_the_one_file_passes_cdk_nag_under_each_orchestrator(synthesized: Any, orchestrator: str) -> None:
    _, result = synthesized[orchestrator]
    assert result.nag == [], "\n".join(map(str, result.nag))


def test_network_and_file_system_are_identical_under_all_five(synthesized: Any) -> None:
    shared = {
        o: {
            kind: {key: _without_kubernetes_tags(p) for key, p in _of_type(resources, kind).items()}
            for kind in SHARED_TYPES
        }
        for o, (resources, _) in synthesized.items()
    }
    reference = shared["parallelcluster"]
    (vpc,) = reference["AWS::EC2::VPC"].values()
    assert vpc["CidrBlock"] == "10.0.0.0/16"
    assert len(reference["AWS::EC2::Subnet"]) == 4
    (fsx,) = reference["AWS::FSx::FileSystem"].values()
    assert (fsx["StorageCapacity"], fsx["LustreConfiguration"]["DeploymentType"]) == (1200, "SCRATCH_2")
    for orchestrator in ORCHESTRATORS[1:]:
        for kind in SHARED_TYPES:
            assert shared[orchestrator][kind] == reference[kind], (orchestrator, kind)


def test_parallelcluster_queue_head_node_and_login_pool(synthesized: Any) -> None:
    resources, _ = synthesized["parallelcluster"]
    (cluster,) = _of_type(resources, "Custom::PclusterCluster").values()
    configuration = cluster["ClusterConfiguration"]
    (queue,) = configuration["Scheduling"]["SlurmQueues"]
    (resource,) = queue["ComputeResources"]
    assert (queue["Name"], resource["InstanceType"], resource["MinCount"], resource["MaxCount"]) == (
        "gpu",
        "g5.8xlarge",
        2,
        2,
    )
    assert resource["Efa"]["Enabled"] is True
    assert queue["Networking"]["PlacementGroup"]["Enabled"] is True
    assert EFA_SECURITY_GROUP in queue["Networking"]["AdditionalSecurityGroups"]
    assert configuration["HeadNode"]["InstanceType"] == "m5.xlarge"
    assert [(p["InstanceType"], p["Count"]) for p in configuration["LoginNodes"]["Pools"]] == [
        ("m5.xlarge", 1)
    ]


def test_hyperpod_instance_groups_in_ml_form_with_efa(synthesized: Any) -> None:
    resources, _ = synthesized["hyperpod"]
    (cluster,) = _of_type(resources, "AWS::SageMaker::Cluster").values()
    groups = {
        g["InstanceGroupName"]: (g["InstanceType"], g["InstanceCount"]) for g in cluster["InstanceGroups"]
    }
    assert groups == {
        "controller": ("ml.m5.xlarge", 1),
        "login": ("ml.m5.xlarge", 1),
        "gpu": ("ml.g5.8xlarge", 2),
    }
    # HyperPod attaches the EFA interface of an EFA type itself; the nodes sit in the EFA security group
    assert EFA_SECURITY_GROUP in cluster["VpcConfig"]["SecurityGroupIds"]


def test_hyperpod_eks_instance_groups_with_volumes_and_the_eks_orchestrator(synthesized: Any) -> None:
    resources, _ = synthesized["hyperpod-eks"]
    (cluster,) = _of_type(resources, "AWS::SageMaker::Cluster").values()
    groups = {
        g["InstanceGroupName"]: (g["InstanceType"], g["InstanceCount"], g["InstanceStorageConfigs"])
        for g in cluster["InstanceGroups"]
    }
    # no controller or login group: EKS's control plane runs the cluster and kubectl is the way in
    assert groups == {"gpu": ("ml.g5.8xlarge", 2, [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}])}
    assert set(cluster["Orchestrator"]["Eks"]) == {"ClusterArn"}
    assert EFA_SECURITY_GROUP in cluster["VpcConfig"]["SecurityGroupIds"]
    (eks,) = _of_type(resources, "AWS::EKS::Cluster").values()
    assert eks["AccessConfig"]["AuthenticationMode"] == "API_AND_CONFIG_MAP"


def test_hyperpod_eks_section_is_written_from_compute() -> None:
    section = expand_intent(_as("hyperpod-eks"))["hyperpod_eks"]
    assert section == {
        "cluster_name": "training-any",
        "instance_groups": [{"name": "gpu", "instance_type": "ml.g5.8xlarge", "count": 2, "volume_gib": 500}],
    }


def test_pcs_node_group_with_efa_and_login_nodes(synthesized: Any) -> None:
    resources, _ = synthesized["pcs"]
    groups = {g["Name"]: g for g in _of_type(resources, "AWS::PCS::ComputeNodeGroup").values()}
    assert set(groups) == {"gpu", "login"}
    gpu = groups["gpu"]
    assert gpu["InstanceConfigs"] == [{"InstanceType": "g5.8xlarge"}]
    assert gpu["ScalingConfiguration"] == {"MinInstanceCount": 2, "MaxInstanceCount": 2}
    template = resources[gpu["CustomLaunchTemplate"]["TemplateId"]["Ref"]]["Properties"]["LaunchTemplateData"]
    assert [i.get("InterfaceType") for i in template["NetworkInterfaces"]] == ["efa"]
    assert groups["login"]["InstanceConfigs"] == [{"InstanceType": "m5.xlarge"}]
    assert groups["login"]["ScalingConfiguration"] == {"MinInstanceCount": 1, "MaxInstanceCount": 1}


def test_eks_efa_nodegroup_and_system_nodegroup(synthesized: Any) -> None:
    resources, _ = synthesized["eks"]
    nodegroups = list(_of_type(resources, "AWS::EKS::Nodegroup").values())
    shapes = []
    for nodegroup in nodegroups:
        data = resources[nodegroup["LaunchTemplate"]["Id"]["Ref"]]["Properties"]["LaunchTemplateData"]
        efa = [i.get("InterfaceType") for i in data.get("NetworkInterfaces", [])]
        shapes.append((data["InstanceType"], nodegroup["ScalingConfig"]["DesiredSize"], efa))
    assert sorted(shapes) == [("g5.8xlarge", 2, ["efa"]), ("t3.large", 2, [])]


# --------------------------------------------------------------------------------------------------
# expand_intent: translation and merge


def test_a_file_without_intent_is_returned_unchanged() -> None:
    document = {"region": "us-east-1", "pcs": {"cluster_name": "x"}}
    assert expand_intent(document) is document


def test_the_input_document_is_not_modified() -> None:
    document = _as("hyperpod")
    before = copy.deepcopy(document)
    expand_intent(document)
    assert document == before


def test_the_orchestrators_section_adds_what_only_it_has() -> None:
    document = _as("hyperpod")
    document["hyperpod"] = {"node_recovery": "none", "enable_docker": True}
    config = parse_environment(document)
    assert config.hyperpod is not None
    assert (config.hyperpod.node_recovery.value, config.hyperpod.enable_docker) == ("None", True)
    assert [g.instance_type for g in config.hyperpod.instance_groups][-1] == "ml.g5.8xlarge"


def test_the_orchestrators_section_wins_over_what_compute_only_defaults() -> None:
    document = _as("pcs")
    document["pcs"] = {"ami_id": "ami-0123456789abcdef0"}
    assert "ami_ssm_parameter" not in expand_intent(document)["pcs"]
    assert expand_intent(_as("pcs"))["pcs"]["ami_ssm_parameter"] == DEFAULT_PCS_AMI_SSM_PARAMETER
    document = _as("parallelcluster")
    del document["compute"]["controller"]
    document["parallelcluster"] = {"head_node": {"instance_type": "t3.large", "key_name": "ops"}}
    assert expand_intent(document)["parallelcluster"]["head_node"] == {
        "instance_type": "t3.large",
        "key_name": "ops",
    }


def test_the_same_value_stated_twice_is_no_conflict() -> None:
    document = _as("parallelcluster")
    document["parallelcluster"] = {
        "head_node": {"instance_type": "m5.xlarge"},
        "cluster_name": "training-any",
    }
    assert expand_intent(document)["parallelcluster"]["head_node"] == {"instance_type": "m5.xlarge"}


def test_scaling_groups_scale_where_the_orchestrator_scales() -> None:
    document = _as("pcs")
    document["compute"]["node_groups"][0] = {"name": "gpu", "instance_type": "g5.8xlarge", "max_count": 4}
    (group,) = expand_intent(document)["pcs"]["compute_node_groups"]
    assert (group["min_count"], group["max_count"]) == (0, 4)


def test_a_capacity_block_reaches_a_pcs_node_group() -> None:
    block = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
    document = _as("pcs")
    document["compute"]["node_groups"][0]["capacity"] = block
    assert expand_intent(document)["pcs"]["compute_node_groups"][0]["capacity"] == block
    (group,) = parse_environment(document).pcs.compute_node_groups  # type: ignore[union-attr]
    assert group.node_capacity().pcs_purchase_option() == "CAPACITY_BLOCK"


def test_eks_puts_gpu_types_without_efa_in_gpu_nodegroups() -> None:
    document = _as("eks")
    document["compute"]["node_groups"].append(
        {"name": "notebooks", "instance_type": "g5.2xlarge", "count": 1}
    )
    eks = expand_intent(document)["eks"]
    assert [g["name"] for g in eks["efa_nodegroups"]] == ["gpu"]
    assert eks["gpu_nodegroups"] == [{"name": "notebooks", "instance_type": "g5.2xlarge", "size": 1}]


def test_capacity_reaches_each_orchestrators_own_form() -> None:
    reservation = {"type": "reservation", "reservation_id": "cr-0123456789abcdef0"}
    for orchestrator, where in (
        ("parallelcluster", lambda s: s["queues"][0]["capacity"]),
        ("eks", lambda s: s["efa_nodegroups"][0]["capacity"]),
        ("pcs", lambda s: s["compute_node_groups"][0]["capacity"]),
    ):
        document = _as(orchestrator)
        document["compute"]["node_groups"][0]["capacity"] = reservation
        assert where(expand_intent(document)[orchestrator]) == reservation, orchestrator
        parse_environment(document)


def _changed(orchestrator: str, change: Any) -> dict[str, Any]:
    document = _as(orchestrator)
    change(document)
    return document


def _group(**fields: Any) -> Any:
    return lambda d: d["compute"]["node_groups"][0].update(fields)


MESSAGES = [
    (
        "compute without orchestrator",
        _changed("eks", lambda d: d.pop("orchestrator")),
        "orchestrator: required with compute; one of parallelcluster, hyperpod, pcs, eks, hyperpod-eks",
    ),
    (
        "orchestrator without compute",
        _changed("eks", lambda d: d.pop("compute")),
        "compute: required with orchestrator: 'eks'",
    ),
    (
        "unknown orchestrator",
        _changed("slurm", lambda d: None),
        "orchestrator: must be one of parallelcluster, hyperpod, pcs, eks, hyperpod-eks, got 'slurm'",
    ),
    (
        "another orchestrator's section",
        _changed("pcs", lambda d: d.update(eks={"addons": {}})),
        "eks: this file builds orchestrator: pcs, so a eks section does not apply; remove it, set orchestrator: "
        "eks, or add eks to ignore",
    ),
    (
        "compute not a section",
        _changed("pcs", lambda d: d.update(compute=[1])),
        "compute: must be a section of key: value settings",
    ),
    (
        "no node groups",
        _changed("pcs", lambda d: d["compute"].update(node_groups=[])),
        "compute.node_groups: List should have at least 1 item",
    ),
    (
        "unknown key",
        _changed("pcs", _group(gpus=1)),
        "compute.node_groups[0].gpus: unknown key (got value 1)",
    ),
    (
        "count as a string",
        _changed("pcs", _group(count="2")),
        "compute.node_groups[0].count: Input should be a valid integer, got '2'",
    ),
    (
        "count true",
        _changed("pcs", _group(count=True)),
        "compute.node_groups[0].count: Input should be a valid integer, got True",
    ),
    (
        "not catalogued",
        _changed("pcs", _group(instance_type="g9.48xlarge")),
        "compute.node_groups[0].instance_type: 'g9.48xlarge' is not in the catalogue",
    ),
    (
        "not a type name",
        _changed("pcs", _group(instance_type="g9.huge")),
        "compute.node_groups[0].instance_type: must be an EC2 instance type such as 'c7i.2xlarge'",
    ),
    (
        "login not a type name",
        _changed("parallelcluster", lambda d: d["compute"]["login"].update(instance_type="m7i-xlarge")),
        "compute.login.instance_type: must be an EC2 instance type such as 'c7i.2xlarge' (family.size)",
    ),
    (
        "controller under eks",
        _changed("eks", lambda d: d["ignore"].remove("compute.controller")),
        "compute.controller: orchestrator: eks runs the Kubernetes control plane (managed by EKS) itself",
    ),
    (
        "controller under pcs",
        _changed("pcs", lambda d: d.pop("ignore")),
        "compute.controller: orchestrator: pcs runs the Slurm controller (managed by AWS PCS) itself",
    ),
    (
        "login under hyperpod-eks",
        _changed("hyperpod-eks", lambda d: d["ignore"].remove("compute.login")),
        "compute.login: orchestrator: hyperpod-eks has no login nodes",
    ),
    (
        "users under eks",
        _changed("eks", lambda d: d.update(users=[{"name": "alice", "uid": 2001}])),
        "users: are created on the nodes of a hyperpod or parallelcluster cluster, and orchestrator: eks has none",
    ),
    (
        "ignore what is used",
        _changed("parallelcluster", lambda d: d.update(ignore=["compute.login"])),
        "ignore[0]: compute.login is used by orchestrator: parallelcluster; remove it from ignore",
    ),
    (
        "ignore what is absent",
        _changed("eks", lambda d: d["ignore"].append("hyperpod")),
        "ignore[2]: hyperpod is not in this file; remove it from ignore",
    ),
    (
        "ignore something else",
        _changed("eks", lambda d: d["ignore"].append("network")),
        "ignore[2]: must be one of compute.controller, compute.login, users, hyperpod",
    ),
    (
        "ignore not a list",
        _changed("eks", lambda d: d.update(ignore="compute.login")),
        "ignore: must be a list of compute.controller, compute.login, users",
    ),
    (
        "ignore without orchestrator",
        _changed("eks", lambda d: [d.pop("orchestrator"), d.pop("compute")]),
        "ignore: lists what orchestrator: cannot use",
    ),
    (
        "ml. form",
        _changed("hyperpod", _group(instance_type="ml.g5.8xlarge")),
        "compute.node_groups[0].instance_type: give the EC2 name, got 'ml.g5.8xlarge' (did you mean 'g5.8xlarge'?",
    ),
    (
        "not on hyperpod",
        _changed("hyperpod", lambda d: d["compute"]["login"].update(instance_type="t3.small")),
        "compute.login.instance_type: 'ml.t3.small' is not offered by SageMaker HyperPod",
    ),
    (
        "count and max",
        _changed("pcs", _group(max_count=3)),
        "compute.node_groups[0]: count (2) and max_count both size the group",
    ),
    (
        "no size",
        _changed("pcs", _group(count=None)),
        "compute.node_groups[0]: give count (a fixed size) or max_count",
    ),
    (
        "min above max",
        _changed("pcs", _group(count=None, min_count=3, max_count=2)),
        "compute.node_groups[0].min_count: must not exceed max_count (2), got 3",
    ),
    (
        "scaling on hyperpod",
        _changed("hyperpod", _group(count=None, max_count=2)),
        "compute.node_groups[0]: min_count 0 and max_count 2 scale the group, but hyperpod keeps a fixed number",
    ),
    (
        "scaling on eks",
        _changed("eks", _group(count=None, max_count=2)),
        "but eks keeps a fixed number of nodes here",
    ),
    (
        "efa without efa",
        _changed("pcs", _group(instance_type="m5.xlarge", efa=True)),
        "compute.node_groups[0].efa: m5.xlarge has no EFA, got true",
    ),
    (
        "efa off on hyperpod",
        _changed("hyperpod", _group(efa=False)),
        "compute.node_groups[0].efa: HyperPod gives every ml.g5.8xlarge its EFA interfaces",
    ),
    (
        "cpu without efa on eks",
        _changed("eks", _group(instance_type="m5.xlarge")),
        "compute.node_groups[0].instance_type: on eks a node group without EFA needs GPUs",
    ),
    (
        "slurm queue name",
        _changed("parallelcluster", _group(name="GPU")),
        "compute.node_groups[0].name: must start with a lowercase letter",
    ),
    ("pcs name", _changed("pcs", _group(name="g")), "compute.node_groups[0].name: must be"),
    (
        "reserved hyperpod name",
        _changed("hyperpod", _group(name="login")),
        "compute.node_groups[0].name: 'login' is the name of the login instance group",
    ),
    (
        "repeated name",
        _changed("eks", lambda d: d["compute"]["node_groups"].append(dict(d["compute"]["node_groups"][0]))),
        "compute.node_groups[1].name: 'gpu' names an earlier node group too",
    ),
    (
        "capacity unknown key",
        _changed("eks", _group(capacity={"type": "spot", "id": "x"})),
        "compute.node_groups[0].capacity.id: unknown key",
    ),
    (
        "capacity without type",
        _changed("eks", _group(capacity={"reservation_id": "cr-0123456789abcdef0"})),
        "compute.node_groups[0].capacity.type: required",
    ),
    (
        "capacity wrong kind",
        _changed("eks", _group(capacity={"type": "reserved"})),
        "compute.node_groups[0].capacity: must be one of on-demand, spot, reservation, capacity-block, training-plan, got 'reserved'",
    ),
    (
        "spot on hyperpod",
        _changed("hyperpod", _group(capacity={"type": "spot"})),
        "compute.node_groups[0].capacity: spot is not supported by SageMaker HyperPod; use on-demand or training-plan",
    ),
    (
        "training plan on pcs",
        _changed(
            "pcs",
            _group(
                capacity={
                    "type": "training-plan",
                    "training_plan_arn": "arn:aws:sagemaker:us-east-1:111122223333:training-plan/plan",
                }
            ),
        ),
        "compute.node_groups[0].capacity: training-plan is not supported by AWS PCS; use on-demand or spot or "
        "reservation or capacity-block",
    ),
    (
        "hyperpod without a name",
        _changed("hyperpod", lambda d: d["compute"].pop("cluster_name")),
        "compute.cluster_name: required with orchestrator: hyperpod when the file sets no name:",
    ),
    (
        "conflict",
        _changed(
            "parallelcluster",
            lambda d: d.update(parallelcluster={"head_node": {"instance_type": "t3.large"}}),
        ),
        "compute.controller.instance_type ('m5.xlarge') and parallelcluster.head_node.instance_type ('t3.large') both state this; keep one of them",
    ),
    (
        "conflicting lists",
        _changed("hyperpod", lambda d: d.update(hyperpod={"instance_groups": []})),
        "compute.node_groups (3 item(s)) and hyperpod.instance_groups (0 item(s)) both state this",
    ),
    (
        "section not a mapping",
        _changed("eks", lambda d: d.update(eks=[])),
        "eks: must be a section of key: value settings, got []",
    ),
    (
        "spot on hyperpod-eks",
        _changed("hyperpod-eks", _group(capacity={"type": "spot"})),
        "compute.node_groups[0].capacity: spot is not supported by SageMaker HyperPod; use on-demand or training-plan",
    ),
    (
        "hyperpod_eks section under another orchestrator",
        _changed("eks", lambda d: d.update(hyperpod_eks={"cluster_name": "x"})),
        "hyperpod_eks: this file builds orchestrator: eks, so a hyperpod_eks section does not apply; remove it, "
        "set orchestrator: hyperpod-eks, or add hyperpod_eks to ignore",
    ),
    (
        "hyperpod-eks without a name",
        _changed("hyperpod-eks", lambda d: d["compute"].pop("cluster_name")),
        "compute.cluster_name: required with orchestrator: hyperpod-eks when the file sets no name:",
    ),
    (
        "efa false on hyperpod-eks",
        _changed("hyperpod-eks", _group(efa=False)),
        "compute.node_groups[0].efa: HyperPod gives every ml.g5.8xlarge its EFA interfaces",
    ),
]


@pytest.mark.parametrize(("document", "message"), [m[1:] for m in MESSAGES], ids=[m[0] for m in MESSAGES])
def test_every_message_names_the_field_the_value_and_what_is_allowed(document: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_environment(document, source="any.yaml")
    lines = str(raised.value).splitlines()
    assert lines[0] == "any.yaml: 1 problem(s)"
    assert message in lines[1], lines[1]
