from __future__ import annotations

import io
import json
import shlex
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

from training_clusters import cli
from training_clusters.config import parse_environment
from training_clusters.environments import add_environment_config
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.releases import MPI_OPERATOR_MANIFEST_URL
from training_clusters.stacks.eks import EksTrainingEnvironment
from training_clusters.workloads.scheduling import NODEGROUP_LABEL

from ..assertions import aws_managed, managed_policy_arns, manifest_objects
from ..conftest import ROOT, EnvironmentGates

EKS_FILES = sorted((ROOT / "environments").glob("eks-*.yaml"))


def test_the_six_eks_environments_exist() -> None:
    assert [p.name for p in EKS_FILES] == [
        "eks-g5-efa.yaml",
        "eks-gpu-monitoring.yaml",
        "eks-gpu-sharing.yaml",
        "eks-mig.yaml",
        "eks-p5-capacity-block.yaml",
        "eks-p5-efa.yaml",
    ]


@pytest.fixture
def g5(environment_gates: EnvironmentGates) -> tuple[EksTrainingEnvironment, dict[str, Any]]:
    """The shipped eks-g5-efa environment and its template, from the session's gated synth (no second synth)."""
    path = ROOT / "environments" / "eks-g5-efa.yaml"
    stack, _ = environment_gates.get(path)
    assert isinstance(stack, EksTrainingEnvironment)
    return stack, environment_gates.template(path)


def test_g5_environment_builds_the_nccl_job_and_names_the_command_that_writes_it(
    g5: tuple[EksTrainingEnvironment, dict[str, Any]], environment_gates: EnvironmentGates
) -> None:
    g5_stack, template = g5
    job = g5_stack.nccl_jobs["g5"]
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert (limits["nvidia.com/gpu"], limits["vpc.amazonaws.com/efa"]) == (1, 1)
    env = {e["name"] for e in worker["template"]["spec"]["containers"][0]["env"]}
    assert "FI_EFA_USE_DEVICE_RDMA" not in env  # g5 has no GPUDirect RDMA
    # synth writes no job files into the cloud assembly: `training-clusters acceptance` does
    _, gates = environment_gates.get(ROOT / "environments" / "eks-g5-efa.yaml")
    assert gates.assembly is not None
    assert not list(Path(gates.assembly.directory).glob("*nccl*"))
    output = template["Outputs"]["NcclTestG5"]
    # the stack installs the operator and applies the job: the output writes the check and gates the launcher
    assert output["Value"] == (
        "training-clusters acceptance environments/eks-g5-efa.yaml -d acceptance/eks-g5-efa"
        " && kubectl logs -f job/nccl-tests-g5-launcher | bash acceptance/eks-g5-efa/nccl-tests-g5-check.sh"
    )


def test_the_nccl_output_command_writes_the_files_it_names(
    g5: tuple[EksTrainingEnvironment, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = g5[1]["Outputs"]["NcclTestG5"]["Value"]
    write, *rest = command.split(" && ")
    (tmp_path / "environments").symlink_to(ROOT / "environments")
    monkeypatch.chdir(tmp_path)
    program, *arguments = shlex.split(write)
    assert program == "training-clusters"
    assert cli.main(arguments, stdout=io.StringIO()) == 0
    named = [word for step in rest for word in shlex.split(step) if word.startswith("acceptance/")]
    assert named == ["acceptance/eks-g5-efa/nccl-tests-g5-check.sh"]
    assert all((tmp_path / path).is_file() for path in named)
    assert (tmp_path / "acceptance/eks-g5-efa/nccl-tests-g5.yaml").is_file()


def test_g5_environment_applies_the_job_after_the_operator_and_the_nodes(
    g5: tuple[EksTrainingEnvironment, dict[str, Any]],
) -> None:
    g5_stack, template = g5
    assert g5_stack.mpi_operator is not None
    (job_id,) = (
        k
        for k, v in template["Resources"].items()
        if v["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
        and "MPIJob" in {o["kind"] for o in manifest_objects(v)}
    )
    depends = set(template["Resources"][job_id]["DependsOn"])
    stack = cdk.Stack.of(g5_stack)
    operator_id = stack.get_logical_id(g5_stack.mpi_operator.resource.node.default_child)
    nodegroup_id = stack.get_logical_id(g5_stack.efa_nodegroups["g5"].nodegroup.node.default_child)
    assert {operator_id, nodegroup_id} <= depends


def test_without_the_operator_the_output_installs_it_and_applies_the_job(app: cdk.App) -> None:
    document = yaml.safe_load((ROOT / "environments" / "eks-g5-efa.yaml").read_text())
    document["eks"]["addons"]["mpi_operator"] = False
    document["eks"]["nccl_test"]["apply"] = False
    stack = add_environment_config(app, parse_environment(document), "g5-no-operator")
    assert isinstance(stack, EksTrainingEnvironment) and stack.mpi_operator is None
    template = Template.from_stack(stack).to_json()
    assert not [v for v in template["Resources"].values() if v["Type"] == "Custom::ReleaseManifest"]
    output = template["Outputs"]["NcclTestG5"]
    assert output["Value"] == (
        "training-clusters acceptance environments/g5-no-operator.yaml -d acceptance/g5-no-operator"
        f" && kubectl apply --server-side -f {MPI_OPERATOR_MANIFEST_URL}"
        " && kubectl apply -f acceptance/g5-no-operator/nccl-tests-g5.yaml"
        " && kubectl logs -f job/nccl-tests-g5-launcher | bash acceptance/g5-no-operator/nccl-tests-g5-check.sh"
    )


def test_a_nodegroup_the_acceptance_command_skips_gets_no_output(app: cdk.App) -> None:
    document = yaml.safe_load((ROOT / "environments" / "eks-g5-efa.yaml").read_text())
    document["eks"]["efa_nodegroups"][0]["size"] = 1
    stack = add_environment_config(app, parse_environment(document), "g5-one-node")
    assert isinstance(stack, EksTrainingEnvironment)
    assert set(stack.nccl_jobs) == {
        "g5"
    }  # still built (and applied): the output would name files never written
    assert "NcclTestG5" not in Template.from_stack(stack).to_json()["Outputs"]


def test_g5_environment_has_both_device_plugins_and_fsx_csi(
    g5: tuple[EksTrainingEnvironment, dict[str, Any]],
) -> None:
    g5_stack = g5[0]
    assert g5_stack.device_plugin is not None and g5_stack.efa_device_plugin is not None
    assert g5_stack.efa_device_plugin.values["supportedInstanceLabels"]["values"] == ["g5.8xlarge"]
    assert g5_stack.fsx_csi is not None
    assert g5_stack.efa_nodegroups["g5"].efa_interfaces == 1


# --------------------------------------------------------------------------------------------------
# invalid environment files: clear errors naming the field path


def _document(eks: dict[str, Any]) -> dict[str, Any]:
    return {"region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"], "eks": eks}


GPU = {"gpu_nodegroups": [{"name": "gpu", "instance_type": "g5.2xlarge", "size": 1}]}


@pytest.mark.parametrize(
    ("eks", "message"),
    [
        (
            {
                **GPU,
                "addons": {"nvidia_device_plugin": {"time_slicing": {"replicas": 4}, "mps": {"replicas": 4}}},
            },
            "eks.addons.nvidia_device_plugin: mps cannot be combined with time_slicing; choose one way of sharing GPUs",
        ),
        (
            {**GPU, "addons": {"nvidia_device_plugin": {"time_slicing": {"replicas": 0}}}},
            "eks.addons.nvidia_device_plugin: time_slicing.replicas must be 2 or more (pods per GPU), got 0",
        ),
        (
            {**GPU, "addons": {"nvidia_device_plugin": {"mig_strategy": "single"}}},
            "eks: addons.nvidia_device_plugin.mig_strategy must be NONE unless a GPU nodegroup sets mig (got "
            "SINGLE): nothing would partition the GPUs, and the device plugin would advertise whole GPUs without "
            "an error",
        ),
        (
            {
                "gpu_nodegroups": [
                    {"name": "gpu", "instance_type": "g5.2xlarge", "size": 1, "mig": "all-1g.10gb"}
                ],
                "addons": {"nvidia_device_plugin": {"mig_strategy": "mixed"}},
            },
            "eks.gpu_nodegroups.0: mig needs MIG-capable GPUs (A100, H100, H200, B200); 'g5.2xlarge' has A10G",
        ),
        (
            {
                "gpu_nodegroups": [
                    {"name": "gpu", "instance_type": "p5.48xlarge", "size": 1, "mig": "all-3g.40gb"}
                ]
            },
            "eks: addons.nvidia_device_plugin.mig_strategy must be SINGLE or MIXED when a nodegroup sets mig (got "
            "NONE; nodegroups with mig: gpu): MIXED advertises nvidia.com/mig-<profile>, SINGLE nvidia.com/gpu",
        ),
        (
            {
                "gpu_nodegroups": [
                    {"name": "gpu", "instance_type": "p5.48xlarge", "size": 1, "mig": "1g.10gb"}
                ]
            },
            "eks.gpu_nodegroups.0: mig must be 'all-<profile>' (e.g. all-1g.10gb), 'all-balanced' or a mapping of "
            "MIG profiles to instances per GPU (e.g. {3g.40gb: 1, 4g.40gb: 1}), got '1g.10gb'",
        ),
        (
            {"efa_nodegroups": [{"name": "g5", "instance_type": "g5.2xlarge", "size": 2}]},
            "eks.efa_nodegroups.0: instance_type 'g5.2xlarge' has no EFA; use an EFA-capable type such as "
            "g5.8xlarge or p5.48xlarge, or a GPU nodegroup for nodes without EFA",
        ),
        (
            {
                "efa_nodegroups": [
                    {
                        "name": "p5",
                        "instance_type": "p5.48xlarge",
                        "size": 2,
                        "capacity": {"type": "capacity-block"},
                    }
                ]
            },
            "eks.efa_nodegroups.0.capacity: capacity-block capacity needs reservation_id",
        ),
        (
            {"admin_role_arn": "arn:aws:iam::111122223333:role/A", "admin_role_name": "A"},
            "eks: admin_role_arn and admin_role_name name the same thing; give one of them",
        ),
        (
            {"gpu_nodegroups": [{"name": "a", "instance_type": "g5.2xlarge", "size": 1}] * 2},
            "eks: nodegroup names must be unique, got a more than once",
        ),
    ],
)
def test_bad_eks_sections_are_clear_errors(eks: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(_document(eks), source="x.yaml")
    lines = str(error.value).splitlines()
    assert lines[0] == "x.yaml: 1 problem(s)"
    assert lines[1].strip() == message


def test_unknown_instance_type_names_the_catalogue() -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(
            _document({"gpu_nodegroups": [{"name": "x", "instance_type": "g9.48xlarge", "size": 1}]})
        )
    assert "eks.gpu_nodegroups.0.instance_type: 'g9.48xlarge' is not in the catalogue" in str(error.value)
    assert "under instance_types:" in str(error.value)


def test_public_endpoint_open_to_the_world_is_refused_when_the_file_loads() -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(_document({**GPU, "public_access_cidrs": ["0.0.0.0/0"]}))
    assert str(error.value).splitlines()[1] == (
        "  eks.public_access_cidrs: must not open the API endpoint to the whole internet, got "
        "'0.0.0.0/0', wider than a /8; list your own ranges"
    )


def test_public_endpoint_open_to_the_world_is_refused_by_the_construct_too(app: cdk.App) -> None:
    config = parse_environment(_document({**GPU, "public_access_cidrs": ["203.0.113.0/24"]}))
    with pytest.raises(ConfigurationError) as error:
        EksTrainingEnvironment(
            app,
            "training-x",
            config=config.model_copy(
                update={"eks": config.eks.model_copy(update={"public_access_cidrs": ["0.0.0.0/0"]})}
            ),
            environment_name="x",
        )
    assert str(error.value) == (
        "training-x/Eks: public_access_cidrs must not open the API endpoint to the whole internet, got "
        "'0.0.0.0/0', wider than a /8; list your own ranges"
    )


def test_trainium_nodegroups_get_the_neuron_device_plugin_not_nvidias(app: cdk.App) -> None:
    document = yaml.safe_load((ROOT / "environments" / "eks-p5-efa.yaml").read_text())
    document["eks"]["efa_nodegroups"] = [{"name": "trn", "instance_type": "trn1.32xlarge", "size": 2}]
    document["eks"]["gpu_nodegroups"] = []
    # GPU queues: a Trainium-only cluster has nothing for them to queue for
    document["eks"].pop("queues", None)
    stack = add_environment_config(app, parse_environment(document), "trn")
    assert isinstance(stack, EksTrainingEnvironment)
    assert stack.neuron_device_plugin is not None
    assert stack.neuron_device_plugin.values["neuronInstances"] == ["trn1.32xlarge"]
    assert stack.device_plugin is None  # no NVIDIA GPUs
    assert stack.efa_device_plugin is not None
    assert stack.efa_device_plugin.values["supportedInstanceLabels"]["values"] == ["trn1.32xlarge"]


# --------------------------------------------------------------------------------------------------
# add-ons that work once deployed, credentials that stay on the node


def test_mps_environment_labels_its_gpu_nodes_for_the_mps_daemon(app: cdk.App) -> None:
    """Chart 0.19.0 runs its MPS control daemon only on nvidia.com/mps.capable=true nodes; without it the
    device plugin's health check fails and the node advertises no GPUs."""
    document = yaml.safe_load((ROOT / "environments" / "eks-gpu-sharing.yaml").read_text())
    document["eks"]["addons"]["nvidia_device_plugin"] = {"mps": {"replicas": 4}}
    document["eks"]["efa_nodegroups"] = [{"name": "trn", "instance_type": "trn1.32xlarge", "size": 1}]
    stack = add_environment_config(app, parse_environment(document), "mps")
    assert isinstance(stack, EksTrainingEnvironment) and stack.device_plugin is not None
    config = yaml.safe_load(stack.device_plugin.values["config"]["map"]["default"])
    assert config["sharing"] == {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}
    assert stack.device_plugin.values["gfd"] == {"enabled": False}
    labels = stack.resolve(stack.gpu_nodegroups["gpu"].nodegroup.node.default_child.labels)  # type: ignore[union-attr]
    # the nodegroup's name too: what its queue flavor selects
    assert labels == {
        "eks-node": "gpu",
        "training-clusters/nodegroup": "gpu",
        "nvidia.com/mps.capable": "true",
    }
    # Trainium nodes run no NVIDIA plugin: no MPS label there
    assert stack.efa_nodegroups["trn"].labels == {"training-clusters/nodegroup": "trn"}


def test_time_slicing_environment_adds_no_mps_label(environment_gates: EnvironmentGates) -> None:
    path = ROOT / "environments" / "eks-gpu-sharing.yaml"
    template = environment_gates.template(path)
    (nodegroup,) = (
        v["Properties"]
        for v in template["Resources"].values()
        if v["Type"] == "AWS::EKS::Nodegroup" and v["Properties"].get("Labels", {}).get("eks-node") == "gpu"
    )
    assert nodegroup["Labels"] == {"eks-node": "gpu", "training-clusters/nodegroup": "gpu"}


@pytest.mark.parametrize(
    ("plugin", "instance_type", "message"),
    [
        (
            {"mps": {"replicas": 64}},
            "g5.2xlarge",
            "training-x/NvidiaDevicePlugin: mps.replicas must be at most 48 (the clients one MPS control "
            "daemon serves per GPU), got 64",
        ),
    ],
)
def test_sharing_the_cluster_cannot_deliver_is_refused_when_the_stack_is_built(
    app: cdk.App, plugin: dict[str, Any], instance_type: str, message: str
) -> None:
    eks = {
        "gpu_nodegroups": [{"name": "gpu", "instance_type": instance_type, "size": 1}],
        "addons": {"nvidia_device_plugin": plugin},
    }
    config = parse_environment(_document(eks))
    with pytest.raises(ConfigurationError) as error:
        EksTrainingEnvironment(app, "training-x", config=config, environment_name="x")
    assert str(error.value) == message


@pytest.mark.parametrize("path", EKS_FILES, ids=lambda p: p.stem)
def test_eks_environment_keeps_node_credentials_on_the_node(
    environment_gates: EnvironmentGates, path: Any
) -> None:
    """Hop limit 1 on every launch template; the VPC CNI's policy on its own Pod Identity role only."""
    template = environment_gates.template(path)
    resources = template["Resources"]
    templates = [v["Properties"] for v in resources.values() if v["Type"] == "AWS::EC2::LaunchTemplate"]
    assert templates
    assert {t["LaunchTemplateData"]["MetadataOptions"]["HttpPutResponseHopLimit"] for t in templates} == {1}
    (association,) = (
        v["Properties"] for v in resources.values() if v["Type"] == "AWS::EKS::PodIdentityAssociation"
    )
    assert (association["Namespace"], association["ServiceAccount"]) == ("kube-system", "aws-node")
    with_cni_policy = {
        k for k, v in resources.items()
        if v["Type"] == "AWS::IAM::Role" and aws_managed("AmazonEKS_CNI_Policy") in managed_policy_arns(template, k)
    }  # fmt: skip
    assert with_cni_policy == {association["RoleArn"]["Fn::GetAtt"][0]}
    addons = sorted(
        v["Properties"]["AddonName"] for v in resources.values() if v["Type"] == "AWS::EKS::Addon"
    )
    # every add-on that calls AWS has a Pod Identity association; the agent is installed once; the node
    # monitoring agent only reads node logs and writes node conditions (the Kubernetes API); the VPC CNI's
    # association is the one above, made before any node (its add-on only configures it: network policy)
    assert addons.count("eks-pod-identity-agent") == addons.count("vpc-cni") == 1
    for addon in (v["Properties"] for v in resources.values() if v["Type"] == "AWS::EKS::Addon"):
        if addon["AddonName"] not in ("eks-pod-identity-agent", "eks-node-monitoring-agent", "vpc-cni"):
            assert addon["PodIdentityAssociations"], addon["AddonName"]
        if addon["AddonName"] == "vpc-cni":
            assert "PodIdentityAssociations" not in addon
            assert json.loads(addon["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}


def test_monitoring_environment_keeps_metrics_on_gp3_volumes(environment_gates: EnvironmentGates) -> None:
    path = ROOT / "environments" / "eks-gpu-monitoring.yaml"
    stack, gates = environment_gates.get(path)
    assert isinstance(stack, EksTrainingEnvironment) and stack.monitoring is not None
    assert stack.monitoring.ebs_csi_driver is not None
    values = stack.monitoring.prometheus_values
    assert values is not None
    claim = values["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == stack.monitoring.ebs_csi_driver.storage_class_name == "gp3"
    assert values["grafana"]["persistence"]["enabled"] is True
    template = environment_gates.template(path)
    addons = {
        v["Properties"]["AddonName"]: v["Properties"]
        for v in template["Resources"].values()
        if v["Type"] == "AWS::EKS::Addon"
    }
    (association,) = addons["aws-ebs-csi-driver"]["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "ebs-csi-controller-sa"
    # the driver, not CloudFormation, makes the volumes: the StorageClass tags them for `cleanup`
    (storage_class,) = (
        o
        for v in template["Resources"].values()
        if v["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
        for o in manifest_objects(v)
        if o["kind"] == "StorageClass" and o["provisioner"] == "ebs.csi.aws.com"
    )
    assert storage_class["reclaimPolicy"] == "Retain"  # a deleted claim keeps its volume, as the README says
    assert storage_class["parameters"] == {
        "type": "gp3",
        "encrypted": "true",
        "tagSpecification_1": "environment=eks-gpu-monitoring",
        "tagSpecification_2": "project=cdk-training-clusters",
    }
    gates.assert_clean()  # 0 cdk-nag findings, 0 cfn-lint errors with the new roles and add-ons


# --------------------------------------------------------------------------------------------------
# capacity and node health


def test_the_capacity_block_example_launches_into_the_block_outside_the_placement_group(
    environment_gates: EnvironmentGates,
) -> None:
    template = environment_gates.template(ROOT / "environments" / "eks-p5-capacity-block.yaml")
    resources = template["Resources"].values()
    (p5,) = (
        v["Properties"]["LaunchTemplateData"]
        for v in resources
        if v["Type"] == "AWS::EC2::LaunchTemplate"
        and v["Properties"]["LaunchTemplateData"]["InstanceType"] == "p5.48xlarge"
    )
    assert p5["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert p5["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
    }
    assert "Placement" not in p5  # a Capacity Block is already co-located (Capacity.keeps_placement_group)
    capacity_types = sorted(
        v["Properties"]["CapacityType"] for v in resources if v["Type"] == "AWS::EKS::Nodegroup"
    )
    assert capacity_types == ["CAPACITY_BLOCK", "ON_DEMAND"]


@pytest.mark.parametrize("path", EKS_FILES, ids=[p.stem for p in EKS_FILES])
def test_gpu_nodes_are_watched_and_repaired(environment_gates: EnvironmentGates, path: Path) -> None:
    resources = environment_gates.template(path)["Resources"].values()
    addons = [v["Properties"]["AddonName"] for v in resources if v["Type"] == "AWS::EKS::Addon"]
    assert addons.count("eks-node-monitoring-agent") == 1
    nodegroups = [v["Properties"] for v in resources if v["Type"] == "AWS::EKS::Nodegroup"]
    assert all(n["NodeRepairConfig"] == {"Enabled": True} for n in nodegroups)


def test_the_node_monitoring_agent_can_be_left_out_and_reserved_gpu_nodes_use_the_placement_subnet(
    app: cdk.App,
) -> None:
    document = yaml.safe_load((ROOT / "environments" / "eks-gpu-sharing.yaml").read_text())
    document["eks"]["addons"]["node_monitoring_agent"] = False
    document["eks"]["gpu_nodegroups"][0]["capacity"] = {
        "type": "reservation",
        "reservation_id": "cr-0123456789abcdef0",
    }
    stack = add_environment_config(app, parse_environment(document), "gpu-reserved")
    assert isinstance(stack, EksTrainingEnvironment) and stack.node_monitoring_agent is None
    resources = Template.from_stack(stack).to_json()["Resources"].values()
    assert "eks-node-monitoring-agent" not in [
        v["Properties"]["AddonName"] for v in resources if v["Type"] == "AWS::EKS::Addon"
    ]
    (gpu,) = stack.gpu_nodegroups.values()
    assert stack.resolve(gpu.nodegroup.node.default_child.subnets) == [  # type: ignore[union-attr]
        stack.resolve(stack.network.placement_subnet().subnet_id)
    ]


def test_mig_environment_partitions_exactly_the_nodegroups_that_ask(app: cdk.App) -> None:
    document = yaml.safe_load((ROOT / "environments" / "eks-mig.yaml").read_text())
    document["eks"]["gpu_nodegroups"] += [
        {"name": "whole", "instance_type": "p5.48xlarge", "size": 1},
        {"name": "small", "instance_type": "g5.2xlarge", "size": 1},
        {"name": "mixed", "instance_type": "p5.48xlarge", "size": 1, "mig": {"3g.40gb": 1, "4g.40gb": 1}},
    ]
    stack = add_environment_config(app, parse_environment(document), "mig-x")
    assert isinstance(stack, EksTrainingEnvironment)
    # every nodegroup also carries its name (what its queue flavor selects)
    assert all(group.labels[NODEGROUP_LABEL] == name for name, group in stack.gpu_nodegroups.items())
    labels = {
        name: {key: value for key, value in group.labels.items() if key != NODEGROUP_LABEL}
        for name, group in stack.gpu_nodegroups.items()
    }
    assert labels == {
        "notebooks": {"nvidia.com/mig.config": "all-1g.10gb"},
        "whole": {"nvidia.com/gpu.deploy.mig-manager": "false"},  # MIG-capable, asked for nothing
        "small": {},
        "mixed": {"nvidia.com/mig.config": "custom-mixed"},
    }
    assert stack.mig_layouts == {"all-1g.10gb": {"1g.10gb": 4}, "custom-mixed": {"3g.40gb": 1, "4g.40gb": 1}}
    assert stack.monitoring is not None
    operator = stack.monitoring.gpu_operator_values
    assert operator["migManager"]["enabled"] is True and operator["mig"] == {"strategy": "mixed"}
    assert stack.device_plugin is not None
    config = yaml.safe_load(stack.device_plugin.values["config"]["map"]["default"])
    assert config["flags"]["migStrategy"] == "mixed"
    # the queue holds what the partitioned GPUs advertise: each MIG instance, by its resource
    assert stack.queues is not None
    assert stack.queues.capacities["notebooks"].quota() == {"nvidia.com/mig-1g.10gb": 1 * 8 * 4}
    assert stack.queues.capacities["mixed"].quota() == {
        "nvidia.com/mig-3g.40gb": 8,
        "nvidia.com/mig-4g.40gb": 8,
    }
    assert stack.queues.capacities["whole"].quota() == {"nvidia.com/gpu": 8}


def test_mig_alone_brings_the_gpu_operator_without_prometheus(app: cdk.App) -> None:
    document = yaml.safe_load((ROOT / "environments" / "eks-mig.yaml").read_text())
    del document["eks"]["addons"]["gpu_monitoring"]
    stack = add_environment_config(app, parse_environment(document), "mig-alone")
    assert isinstance(stack, EksTrainingEnvironment) and stack.monitoring is not None
    assert stack.monitoring.prometheus is None and stack.monitoring.ebs_csi_driver is None
    assert stack.monitoring.gpu_operator_values["migManager"]["enabled"] is True


def test_without_mig_no_nodegroup_carries_mig_labels(environment_gates: EnvironmentGates) -> None:
    stack, _ = environment_gates.get(ROOT / "environments" / "eks-p5-efa.yaml")
    assert isinstance(stack, EksTrainingEnvironment) and stack.mig_layouts == {}
    for group in [*stack.efa_nodegroups.values(), *stack.gpu_nodegroups.values()]:
        assert not any(key.startswith("nvidia.com/mig") or "mig-manager" in key for key in group.labels)
