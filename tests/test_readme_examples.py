"""Every ```python block of README.md runs as written and builds what its section says it builds.

Blocks are named by the heading they sit under. Each runs with ``exec`` in a fresh namespace, inside its own
temporary working directory (examples may write files), except a block preceded by
``<!-- continues the example above -->``: it runs after the python block before it, in that block's
namespace. A block that is deliberately not runnable is preceded by ``<!-- not-tested: reason -->``; at most
:data:`MAX_NOT_TESTED` may be.

A chain of blocks (an example and its continuations) is executed once and its app synthesized once: CDK
refuses to add constructs after a synth. Each block's section then has a check below that looks at the
result, mostly the template of the ``stack`` the example built.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_s3

from training_clusters.compliance import Finding, add_compliance_checks, synth_with_checks

README = Path(__file__).resolve().parent.parent / "README.md"
CONTINUES = "<!-- continues the example above -->"
NOT_TESTED = re.compile(r"^<!--\s*not-tested:\s*(?P<reason>.*?)\s*-->$")
MAX_NOT_TESTED = 2
ADMIN_ROLE = "arn:aws:iam::111122223333:role/Admin"


# --------------------------------------------------------------------------------------------------
# reading the README


@dataclass(frozen=True)
class Block:
    """One fenced python block of the README."""

    index: int
    line: int
    headings: tuple[str, ...]
    code: str
    continues: bool
    not_tested: str | None

    @property
    def heading(self) -> str:
        return self.headings[-1]

    @property
    def id(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.heading).strip("-")[:40]
        return f"{self.index:02d}-{slug}"


def read_readme(text: str) -> tuple[list[Block], list[tuple[str, ...]]]:
    """The python blocks and every heading path (outside code fences) of a Markdown text."""
    blocks: list[Block] = []
    headings: list[tuple[str, ...]] = []
    path: list[str] = []
    fence: tuple[int, str, str] | None = None  # (first line, language, marker line before it)
    body: list[str] = []
    previous = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is not None:
            if line.startswith("```"):
                start, language, marker = fence
                if language == "python":
                    found = NOT_TESTED.match(marker)
                    blocks.append(
                        Block(
                            index=len(blocks),
                            line=start + 1,
                            headings=tuple(path),
                            code="\n".join(body) + "\n",
                            continues=marker == CONTINUES,
                            not_tested=found["reason"] if found else None,
                        )
                    )
                fence, body = None, []
            else:
                body.append(line)
            continue
        if line.startswith("```"):
            fence = (number, line[3:].strip(), previous)
        elif heading := re.match(r"^(#{1,6}) (.+)$", line):
            level = len(heading[1])
            path = [*path[: level - 1], *[""] * (level - 1 - len(path)), heading[2].strip()]
            headings.append(tuple(path))
        if line.strip():
            previous = line.strip()
    return blocks, headings


BLOCKS, HEADINGS = read_readme(README.read_text())
TESTED = [b for b in BLOCKS if b.not_tested is None]


# --------------------------------------------------------------------------------------------------
# running examples


@dataclass
class Run:
    """What one block left behind: its namespace, working directory and (lazily) its stack's template."""

    block: Block
    namespace: dict[str, Any]
    workdir: Path
    examples: Examples
    findings: list[Finding] = field(default_factory=list)
    _template: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def stack(self) -> cdk.Stack:
        stack = self.namespace.get("stack")
        assert isinstance(stack, cdk.Stack), f"README.md:{self.block.line}: the example defines no `stack`"
        return stack

    @property
    def template(self) -> dict[str, Any]:
        """The stack's template, as its chain's synth wrote it into the app's cloud assembly."""
        if self._template is None:
            stage = cdk.Stage.of(self.stack)
            assert stage is not None
            path = Path(stage.outdir) / self.stack.template_file
            self._template = json.loads(path.read_text())
        return self._template

    def resolve(self, value: Any) -> Any:
        return self.stack.resolve(value)

    def ref(self, construct: Any) -> str:
        """The logical id of an L1, or of an L2's default child."""
        element = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
        logical_id: str = self.stack.resolve(self.stack.get_logical_id(element))
        return logical_id

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == kind}


@dataclass
class Chain:
    runs: dict[int, Run]
    failed: Block | None = None
    error: BaseException | None = None
    synth_error: BaseException | None = None


class Examples:
    """Runs each chain of blocks once, in a working directory of its own, and remembers the result."""

    def __init__(self, tmp: pytest.TempPathFactory) -> None:
        self._tmp = tmp
        self._chains: dict[int, Chain] = {}
        self.apps: list[cdk.App] = []

    def run(self, block: Block) -> Run:
        head = chain_head(block)
        if head.index not in self._chains:
            self._chains[head.index] = self._execute(head)
        chain = self._chains[head.index]
        if chain.failed is not None and block.index >= chain.failed.index:
            if block is chain.failed:
                assert chain.error is not None
                raise chain.error
            pytest.fail(f"the example this block continues failed (README.md:{chain.failed.line})")
        if chain.synth_error is not None:
            raise chain.synth_error
        return chain.runs[block.index]

    def execute(self, code: str, namespace: dict[str, Any], workdir: Path, first_line: int = 1) -> None:
        """Run ``code`` as if it stood at ``first_line`` of README.md, so tracebacks point into the README."""
        with contextlib.chdir(workdir):
            exec(compile("\n" * (first_line - 1) + code, str(README), "exec"), namespace)
        app = namespace.get("app")
        if isinstance(app, cdk.App) and app not in self.apps:
            self.apps.append(app)

    def _execute(self, head: Block) -> Chain:
        workdir = self._tmp.mktemp(head.id)
        chain = Chain(runs={})
        namespace: dict[str, Any] = {"__name__": "readme_example"}
        for block in [head, *continuations_of(head)]:
            namespace = dict(namespace)
            try:
                self.execute(block.code, namespace, workdir, block.line)
            except Exception as error:
                chain.failed, chain.error = block, error
                break
            chain.runs[block.index] = Run(block, namespace, workdir, self)
        app = namespace.get("app")
        if isinstance(app, cdk.App):
            # Once, after the whole chain: the same cdk-nag gate as the environments (a no-op for an app the
            # example synthesized itself: its cached assembly is returned).
            add_compliance_checks(app)
            try:
                _, findings = synth_with_checks(app)
            except Exception as error:
                chain.synth_error = error
                return chain
            for run in chain.runs.values():
                run.findings = findings
        return chain

    def remove_outdirs(self) -> None:
        """Delete the temporary cloud assemblies the examples' ``cdk.App()`` wrote (and nothing else)."""
        temp = Path(tempfile.gettempdir()).resolve()
        for app in self.apps:
            outdir = Path(app.outdir).resolve()
            if outdir.parent == temp and outdir.name.startswith("cdk.out"):
                shutil.rmtree(outdir, ignore_errors=True)


def chain_head(block: Block) -> Block:
    while block.continues:
        assert block.index > 0, f"README.md:{block.line} continues, but no python block comes before it"
        block = BLOCKS[block.index - 1]
    return block


def continuations_of(head: Block) -> Iterator[Block]:
    for block in BLOCKS[head.index + 1 :]:
        if not block.continues:
            return
        yield block


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Examples]:
    runner = Examples(tmp_path_factory)
    yield runner
    runner.remove_outdirs()


# --------------------------------------------------------------------------------------------------
# what each section's example must have built

Check = Callable[[Run], None]
CHECKS: dict[str, Check] = {}


def check(heading_prefix: str) -> Callable[[Check], Check]:
    """Register the check of the blocks under the heading that starts with ``heading_prefix``."""

    def register(function: Check) -> Check:
        CHECKS[heading_prefix] = function
        return function

    return register


def checks_for(block: Block) -> list[str]:
    return [prefix for prefix in CHECKS if block.heading.startswith(prefix)]


def get_att(logical_id: str, attribute: str = "GroupId") -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, attribute]}


def allows(run: Run, target: Any, source: Any, port: int) -> bool:
    """Whether security group ``target`` admits ``source`` on TCP ``port`` (a separate ingress resource)."""
    wanted = (run.resolve(target.security_group_id), run.resolve(source.security_group_id))
    return any(
        (rule["Properties"]["GroupId"], rule["Properties"].get("SourceSecurityGroupId")) == wanted
        and rule["Properties"]["IpProtocol"] == "tcp"
        and rule["Properties"]["FromPort"] <= port <= rule["Properties"]["ToPort"]
        for rule in run.of_type("AWS::EC2::SecurityGroupIngress").values()
    )


def assert_closed_to_the_internet(run: Run) -> None:
    """README's security defaults: no ingress from 0.0.0.0/0 or ::/0, no subnet hands out public IPs."""
    rules = [r["Properties"] for r in run.of_type("AWS::EC2::SecurityGroupIngress").values()]
    for group in run.of_type("AWS::EC2::SecurityGroup").values():
        rules += group["Properties"].get("SecurityGroupIngress", [])
    open_rules = [r for r in rules if r.get("CidrIp") == "0.0.0.0/0" or r.get("CidrIpv6") == "::/0"]
    assert open_rules == []
    subnets = run.of_type("AWS::EC2::Subnet").values()
    assert not any(s["Properties"].get("MapPublicIpOnLaunch") for s in subnets)


@check("Gate your own app's CI on cdk-nag")
def _gate(run: Run) -> None:
    # The example's own app.synth() passed the gate; the cached assembly holds the network.
    assembly = run.namespace["app"].synth()
    assert run.of_type("AWS::EC2::VPC")
    report = json.loads((Path(assembly.directory) / "validation-report.json").read_text())
    assert [r for r in report["pluginReports"] if r.get("violations")] == []
    # The gate is real: the same app plus a bucket without access logs must fail its synth.
    broken = run.block.code.replace(
        "add_compliance_checks(app)", 'aws_s3.Bucket(stack, "Unlogged")\nadd_compliance_checks(app)', 1
    )
    assert broken != run.block.code
    namespace: dict[str, Any] = {"aws_s3": aws_s3}
    with pytest.raises(RuntimeError, match=r"ValidationFailed"):
        run.examples.execute(broken, namespace, run.workdir, run.block.line)


@check("TrainingNetwork")
def _network(run: Run) -> None:
    assert len(run.of_type("AWS::EC2::VPC")) == 1
    zones = sorted(s["Properties"]["AvailabilityZone"] for s in run.of_type("AWS::EC2::Subnet").values())
    assert zones == ["us-east-1a", "us-east-1a", "us-east-1b", "us-east-1b"]
    subnet = run.namespace["subnet"]
    assert run.resolve(subnet.availability_zone) == "us-east-1a"
    assert subnet.node.path in [s.node.path for s in run.namespace["network"].private_subnets]
    assert [f["Properties"]["TrafficType"] for f in run.of_type("AWS::EC2::FlowLog").values()] == ["ALL"]
    efa = get_att(run.ref(run.namespace["efa_group"]))
    ingress = [r["Properties"] for r in run.of_type("AWS::EC2::SecurityGroupIngress").values()]
    (rule,) = [r for r in ingress if r["GroupId"] == efa]  # all traffic, from members only
    assert (rule["IpProtocol"], rule["SourceSecurityGroupId"]) == ("-1", efa)


@check("SharedLustre")
def _lustre(run: Run) -> None:
    fs = run.namespace["fs"]
    (logical_id,) = run.of_type("AWS::FSx::FileSystem")
    assert logical_id == run.ref(fs.file_system)
    resource = run.template["Resources"][logical_id]
    assert resource["DeletionPolicy"] == "Delete"
    properties = resource["Properties"]
    assert properties["StorageCapacity"] == 1200
    assert properties["LustreConfiguration"]["DeploymentType"] == "SCRATCH_2"
    assert properties["SubnetIds"] == [run.resolve(run.namespace["network"].placement_subnet().subnet_id)]
    network = run.namespace["network"]
    for port in (988, 1018, 1023):
        assert allows(run, fs.security_group, network.efa_security_group, port)
    # "both directions": Lustre servers also connect back to their clients.
    egress = [r["Properties"] for r in run.of_type("AWS::EC2::SecurityGroupEgress").values()]
    back = (
        run.resolve(fs.security_group.security_group_id),
        run.resolve(network.efa_security_group.security_group_id),
    )
    assert sorted(
        r["FromPort"] for r in egress if (r["GroupId"], r.get("DestinationSecurityGroupId")) == back
    ) == [
        988,
        1018,
    ]
    device = json.dumps(run.resolve(run.namespace["device"]))
    assert (
        device.index(f'{{"Ref": "{logical_id}"}}') < device.index("@tcp:/") < device.index("LustreMountName")
    )


@check("TrainingPlacementGroup")
def _placement(run: Run) -> None:
    groups = run.of_type("AWS::EC2::PlacementGroup")
    assert [g["Properties"] for g in groups.values()] == [{"Strategy": "cluster"}]
    assert run.resolve(run.namespace["name"]) == get_att(next(iter(groups)), "GroupName")


@check("SecureBucket")
def _bucket(run: Run) -> None:
    buckets = run.of_type("AWS::S3::Bucket")
    assert len(buckets) == 2  # the bucket and its access-log bucket
    data = buckets[run.ref(run.namespace["bucket"])]
    properties = data["Properties"]
    assert data["DeletionPolicy"] == "Delete"
    assert properties["VersioningConfiguration"] == {"Status": "Enabled"}
    assert properties["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ["BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"], True
    )
    assert properties["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    logs_id = run.ref(run.namespace["scripts"].access_logs_bucket)
    assert properties["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": logs_id}
    name = properties["BucketName"]["Fn::Join"][1]
    assert name[0].startswith("sagemaker-")
    policy = next(
        p["Properties"]["PolicyDocument"]
        for p in run.of_type("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": run.ref(run.namespace["bucket"])}
    )
    assert any(
        s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["Statement"]
    )


@check("HyperPodCluster")
def _hyperpod(run: Run) -> None:
    cluster = run.namespace["cluster"]
    ((logical_id, resource),) = run.of_type("AWS::SageMaker::Cluster").items()
    assert logical_id == run.ref(cluster.cluster)
    properties = resource["Properties"]
    assert properties["ClusterName"] == "ml-cluster"
    assert properties["NodeRecovery"] == "Automatic"
    groups = {g["InstanceGroupName"]: g for g in properties["InstanceGroups"]}
    assert set(groups) == {"controller-machine", "worker-group-1"}
    worker, controller = groups["worker-group-1"], groups["controller-machine"]
    assert (worker["InstanceType"], worker["InstanceCount"]) == ("ml.p5.48xlarge", 2)
    assert worker["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert "OnStartDeepHealthChecks" not in controller
    assert worker["LifeCycleConfig"]["OnCreate"] == "on_create.sh"
    network = run.namespace["network"]
    assert get_att(run.ref(network.efa_security_group)) in properties["VpcConfig"]["SecurityGroupIds"]
    assert properties["VpcConfig"]["Subnets"] == [run.resolve(network.placement_subnet().subnet_id)]
    (upload,) = run.of_type("Custom::CDKBucketDeployment")
    assert upload in resource["DependsOn"]  # nodes never start before their scripts exist
    parameters = cluster.provisioning_parameters
    assert parameters["controller_group"] == "controller-machine"
    assert parameters["worker_groups"] == [{"instance_group_name": "worker-group-1", "partition_name": "gpu"}]
    assert cluster.lifecycle_settings["fsx_mount_dir"] == "/fsx"  # our own settings file, training_clusters.json
    assert allows(run, run.namespace["fs"].security_group, cluster.security_group, 988)


@check("ParallelCluster")
def _parallelcluster(run: Run) -> None:
    ns = run.namespace
    ((_, resource),) = run.of_type("Custom::PclusterCluster").items()
    properties = resource["Properties"]
    assert properties["ClusterName"] == "training"
    assert properties["DeletionPolicy"] == "Delete"  # ParallelCluster's default: deleted with the stack
    config = properties["ClusterConfiguration"]
    (queue,) = config["Scheduling"]["SlurmQueues"]
    assert queue["Name"] == "compute"
    assert queue["ComputeResources"] == [
        {
            "Name": "c5n",
            "InstanceType": "c5n.9xlarge",
            "MinCount": 0,
            "MaxCount": 2,
            "Efa": {"Enabled": True, "GdrSupport": False},
        }
    ]
    networking = queue["Networking"]
    group_name = get_att(run.ref(ns["placement"].placement_group), "GroupName")
    assert networking["PlacementGroup"] == {"Enabled": True, "Name": group_name}
    assert networking["AssignPublicIp"] is False
    assert networking["SubnetIds"] == [run.resolve(ns["network"].placement_subnet().subnet_id)]
    assert get_att(run.ref(ns["network"].efa_security_group)) in networking["AdditionalSecurityGroups"]
    (storage,) = config["SharedStorage"]
    assert storage["MountDir"] == "/shared"
    assert storage["FsxLustreSettings"] == {"FileSystemId": {"Ref": run.ref(ns["fsx"].file_system)}}
    assert config["HeadNode"]["Ssh"]["AllowedIps"] == get_att(run.ref(ns["network"].vpc), "CidrBlock")
    (provider,) = run.of_type("AWS::CloudFormation::Stack").values()
    assert "/parallelcluster/3.16.1/templates/custom_resource/cluster.yaml" in json.dumps(provider)
    assert allows(run, ns["fsx"].security_group, ns["cluster"].security_group, 988)


@check("Export for `pcluster create-cluster`")
def _pcluster_export(run: Run) -> None:
    text = (run.workdir / "cluster-config.yaml").read_text()
    assert not re.search(r"\bRef:|Fn::", text), "every CloudFormation reference is replaced"
    config = yaml.safe_load(text)
    # The logical id in the README is the placement subnet's: its value lands where the subnet is used.
    assert config["HeadNode"]["Networking"]["SubnetId"] == "subnet-0a1b2c3d4e5f67890"
    (queue,) = config["Scheduling"]["SlurmQueues"]
    assert queue["Networking"]["SubnetIds"] == ["subnet-0a1b2c3d4e5f67890"]
    assert config["SharedStorage"][0]["FsxLustreSettings"]["FileSystemId"].startswith("fs-")


@check("EKS for GPU training")
def _eks(run: Run) -> None:
    ns = run.namespace
    ((_, cluster),) = run.of_type("AWS::EKS::Cluster").items()
    properties = cluster["Properties"]
    assert properties["Version"] == "1.33"
    assert properties["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    assert properties["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True
    access = [e["Properties"]["PrincipalArn"] for e in run.of_type("AWS::EKS::AccessEntry").values()]
    # the admin role; the MPI Operator's handler (added further down the README) has its own entry
    assert [arn for arn in access if isinstance(arn, str)] == [ADMIN_ROLE]
    assert len(run.of_type("AWS::EKS::Nodegroup")) == 3  # system, P5, Gpu

    p5 = ns["p5"]
    data = run.template["Resources"][run.ref(p5.launch_template)]["Properties"]["LaunchTemplateData"]
    assert data["InstanceType"] == "p5.48xlarge"
    assert data["Placement"] == {
        "GroupName": get_att(run.ref(ns["placement_group"].placement_group), "GroupName")
    }
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert "SecurityGroupIds" not in data
    interfaces = data["NetworkInterfaces"]
    assert len(interfaces) == 32
    layout = [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in interfaces]
    assert layout == [(0, 0, "efa")] + [(card, 1, "efa") for card in range(1, 32)]
    efa = get_att(run.ref(ns["network"].efa_security_group))
    assert all(len(i["Groups"]) == 2 and efa in i["Groups"] and "SubnetId" not in i for i in interfaces)

    nodegroup = run.template["Resources"][run.ref(p5.nodegroup)]["Properties"]
    assert nodegroup["AmiType"] == "AL2023_x86_64_NVIDIA"
    assert "InstanceTypes" not in nodegroup
    assert nodegroup["ScalingConfig"] == {"DesiredSize": 2, "MinSize": 2, "MaxSize": 2}
    assert nodegroup["Subnets"] == [run.resolve(ns["network"].placement_subnet().subnet_id)]
    assert nodegroup["Taints"] == [{"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NO_SCHEDULE"}]
    labels = [n["Properties"].get("Labels") for n in run.of_type("AWS::EKS::Nodegroup").values()]
    assert {"eks-node": "gpu"} in labels


def helm_values(chart: dict[str, Any]) -> dict[str, Any]:
    values = chart["Values"]
    assert isinstance(values, str), "values hold no CloudFormation references"
    result: dict[str, Any] = json.loads(values)
    return result


@check("Add-ons")
def _addons(run: Run) -> None:
    ns = run.namespace
    charts = {
        c["Properties"]["Chart"]: c["Properties"]
        for c in run.of_type("Custom::AWSCDK-EKS-HelmChart").values()
    }
    # The versions README's add-on table says are pinned.
    assert {name: chart["Version"] for name, chart in charts.items()} == {
        "nvidia-device-plugin": "0.19.0",
        "aws-efa-k8s-device-plugin": "v0.5.20",
        "gpu-operator": "v25.3.4",
        "kube-prometheus-stack": "82.6.0",
    }
    nvidia = helm_values(charts["nvidia-device-plugin"])
    sharing = yaml.safe_load(nvidia["config"]["map"]["default"])["sharing"]["timeSlicing"]
    assert sharing["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    (term,) = nvidia["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"][0]["values"] == ["g5.2xlarge", "p5.48xlarge"]
    efa = helm_values(charts["aws-efa-k8s-device-plugin"])
    assert efa["supportedInstanceLabels"]["values"] == ["p5.48xlarge"]
    operator = helm_values(charts["gpu-operator"])
    assert operator["driver"]["enabled"] is False
    assert operator["dcgmExporter"] == {"enabled": True, "serviceMonitor": {"enabled": True}}

    addons = {a["Properties"]["AddonName"]: a["Properties"] for a in run.of_type("AWS::EKS::Addon").values()}
    assert set(addons) == {"aws-fsx-csi-driver", "eks-pod-identity-agent"}
    (association,) = addons["aws-fsx-csi-driver"]["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "fsx-csi-controller-sa"
    (volume,) = run.of_type("Custom::AWSCDK-EKS-KubernetesResource").values()
    manifest = json.dumps(volume["Properties"]["Manifest"])
    assert "PersistentVolumeClaim" in manifest and "fsx-lustre" in manifest
    assert run.ref(ns["fs"].file_system) in manifest
    assert allows(run, ns["fs"].security_group, ns["cluster"].cluster_security_group, 988)
    (operator,) = run.of_type("Custom::ReleaseManifest").values()
    assert operator["Properties"]["ManifestUrl"].endswith("/v0.7.0/deploy/v2beta1/mpi-operator.yaml")


@check("NCCL acceptance job")
def _nccl(run: Run) -> None:
    job = yaml.safe_load((run.workdir / "nccl-tests-p5.yaml").read_text())
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2  # one worker per node of the nodegroup
    (container,) = worker["template"]["spec"]["containers"]
    limits = container["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == 8
    assert limits["vpc.amazonaws.com/efa"] == 32
    assert limits["hugepages-2Mi"] == "5210Mi"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    (launcher,) = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    command = " ".join(launcher["command"])
    assert "-x LD_LIBRARY_PATH" in command and "-b 8 -e 16G" in command


@check("Instance catalogue")
def _catalogue(run: Run) -> None:
    p5 = run.namespace["p5"]
    assert (p5.max_efa_interfaces, p5.gpudirect_rdma, p5.quota_family.quota_code) == (32, True, "L-417A185B")
    assert run.namespace["lookup"]("ml.p5.48xlarge") == p5


# --------------------------------------------------------------------------------------------------
# tests


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(
            b, id=b.id, marks=[pytest.mark.skip(reason=f"not-tested: {b.not_tested}")] if b.not_tested else []
        )
        for b in BLOCKS
    ],
)
def test_readme_example_runs_and_builds_what_it_says(block: Block, examples: Examples) -> None:
    matching = checks_for(block)
    assert len(matching) == 1, (
        f"README.md:{block.line} under '{block.heading}' needs exactly one check in this file, found {matching}"
    )
    run = examples.run(block)
    CHECKS[matching[0]](run)
    if "stack" in run.namespace:
        assert_closed_to_the_internet(run)
        nag = [str(f) for f in run.findings if f.plugin.startswith("AwsSolutions")]
        assert nag == [], "unacknowledged cdk-nag findings"


def test_every_check_has_its_readme_example() -> None:
    unused = [prefix for prefix in CHECKS if not any(b.heading.startswith(prefix) for b in TESTED)]
    assert unused == [], "checks whose README example is gone"


def test_every_construct_section_has_a_tested_example() -> None:
    sections = [h[2] for h in HEADINGS if len(h) == 3 and h[1] == "Constructs"]
    assert len(sections) >= 7
    untested = [s for s in sections if not any(b.headings[1:3] == ("Constructs", s) for b in TESTED)]
    assert untested == []


def test_continuations_follow_a_tested_example() -> None:
    for block in BLOCKS:
        if block.continues:
            assert block.index > 0 and BLOCKS[block.index - 1].not_tested is None, f"README.md:{block.line}"


def test_at_most_two_blocks_are_not_tested_and_each_says_why() -> None:
    skipped = [b for b in BLOCKS if b.not_tested is not None]
    assert len(skipped) <= MAX_NOT_TESTED, [f"README.md:{b.line}" for b in skipped]
    assert all(b.not_tested for b in skipped)


def test_the_reader_finds_fences_and_markers() -> None:
    blocks, headings = read_readme(
        "# A\n## B\n```bash\n# not a heading\n```\n<!-- not-tested: needs credentials -->\n"
        "```python\nx = 1\n```\n### C\n```python\ny = 2\n```\n\n" + CONTINUES + "\n```python\nz = y\n```\n"
    )
    assert headings == [("A",), ("A", "B"), ("A", "B", "C")]
    assert [(b.headings, b.code, b.continues, b.not_tested) for b in blocks] == [
        (("A", "B"), "x = 1\n", False, "needs credentials"),
        (("A", "B", "C"), "y = 2\n", False, None),
        (("A", "B", "C"), "z = y\n", True, None),
    ]
