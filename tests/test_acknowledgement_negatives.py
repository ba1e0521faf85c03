"""Every accepted finding comes back when its cause is widened: the negative side of each acknowledgement.

An acknowledgement hides one finding id on one resource. Each case here builds the resource that carries it,
widens what the reason covers (or removes the condition the acknowledgement depends on) the way a one-line bug
would, and shows cdk-nag's AwsSolutions finding (or checkov's check) again on that resource; and each family's
resources carry exactly their acknowledgements (``ACKNOWLEDGED``: one applied where its condition does not
hold shows there). One synth per family of constructs (``_FAMILIES``), cases parametrised by acknowledgement.

Shown here: the HyperPod execution role's wildcards (this cluster's log groups and streams, this region's
interfaces, the lifecycle prefix, grant_read's read actions), the same lifecycle read on a role you pass
(``HyperPodCluster._grant_lifecycle_read``: the prefix, the read actions), the database's RDS10 (only when
deletion may be asked for) and the rotation's and user handler's ``IAM5[Resource::*]``, the log bucket's S1, the
EKS node, VPC CNI and EBS CSI roles' IAM4 (each named AWS-managed policy), the ``IAM5[Resource::*]`` of the FSx
CSI role, of the HyperPod EKS nodes' policy and of the release-manifest handler (the MPI Operator's); checkov's
CKV_AWS_18 (log bucket only). The interface endpoints' group acknowledges nothing: a source added to it shows
EC23 (the network case).

Elsewhere: ``SessionManagerPolicy``'s two IAM5 (``tests/constructs/test_session_manager.py``, a statement
added brings each back); SMG4 on slurmdbd's secret only while it does not rotate
(``test_the_rotated_secret_is_clean_because_it_rotates_not_because_of_an_acknowledgement``, and
``ACKNOWLEDGED["accounting"]`` here).

Not shown, by acknowledgement, and why:

* ``IAM5[Resource::*]`` (HyperPod's execution role, the rotation, the user handler, FSx CSI, HyperPod EKS
  nodes, the release-manifest handler, ParallelCluster's ``NetworkTopology``): cdk-nag names every statement
  on ``*`` by that one id, so a statement whose resource is widened to ``*`` hides behind it. The cases widen
  the actions instead (a new wildcard action is a new id); the resources are pinned by the exact statement
  tests (``tests/assertions.py``'s ``role_statements``) of those roles (``NetworkTopology``'s in
  ``tests/constructs/test_parallelcluster_topology.py``).
* Unconditional, no cause to widen in our code (true of every template): RDS6 (slurmdbd cannot use IAM
  tokens), RDS11 (MySQL's port), RDS14 (no backtrack on Aurora Serverless v2); SMG4 on the master user's
  secret and on ParallelCluster's plain-text copy; ``acknowledge_cdk_made`` (L1, SF1, SF2, IAM4, IAM5 on
  aws-cdk-lib's own provider functions, roles and state machines: BucketDeployment, Provider frameworks, the
  kubectl provider, AwsCustomResource; pinned in ``ACKNOWLEDGED`` for the accounting and EKS families);
  checkov's CKV_AWS_149 (secrets with the AWS-managed key), CKV_AWS_118 (no enhanced monitoring), CKV_AWS_162
  (no IAM database authentication), CKV_AWS_115 and CKV_AWS_116 (handlers' concurrency, dead-letter queue),
  CKV_AWS_173 on the rotation function (its environment), CKV_AWS_111 on a whole policy (checkov skips per
  resource and check; the exact statement tests guard what the policy holds).
* Conditional, but the condition only decides whether a skip is written where the check would pass anyway:
  CKV_AWS_117 (``in_vpc``), CKV_AWS_173 (``has_environment``) of ``accept_handler_findings`` and CKV_AWS_158 on
  the flow logs (a key given): dropping the condition writes a skip checkov never needs.
* ``CloudFormation-Validate::W3010`` on pinned subnets is CDK's own validation, off in the suite's synths.
* ``CloudFormation-Validate::F3006`` on each ``AWS::SageMaker::ComputeQuota`` (a type newer than the schemas
  aws-cdk-lib 2.275 bundles) is CDK's own validation too; cfn-lint's schema of the type is the gate instead
  (``tests/constructs/test_hyperpod_governance.py``).
* No checkov skip for a deleteable database: checkov 3.3.30 checks deletion protection for Terraform only
  (``checkov/terraform/checks/resource/aws/RDSDeletionProtection.py``); no CloudFormation check reads an
  ``AWS::RDS::DBCluster``'s ``DeletionProtection``, so a skip of CKV_AWS_139 would be written for a check that
  never runs. cdk-nag's RDS10 is the gate for it (its negative is above).
* EC23 on the interface endpoints' group: the acknowledgement it had for an adopted VPC (whose CIDR is a
  reference) is removed, because it could never apply: ``endpoint_only`` is refused with an adopted VPC
  (``tests/constructs/test_network.py``, ``test_an_adopted_vpc_cannot_be_endpoint_only_...``) and CDK's ``Vpc``
  refuses a token ``cidr`` (``MustBeCidrPropertyConcrete``), so the group always admits a literal CIDR. Were it
  reachable, an acknowledgement on the group would hide a second rule from anywhere: cdk-nag 3.0.2's EC23
  (cdklabs/cdk-nag, ``src/rules/ec2/EC2RestrictedInbound.ts``) reads a group's inline ingress rules in order and
  throws at the first whose CIDR is not a literal (``NagRules.resolveIfPrimitive``, ``src/nag-rules.ts``), which
  ``NagPack.applyRule`` (``src/nag-pack.ts``) reports as EC23 on the whole group; only the reference rule in a
  ``CfnSecurityGroupIngress`` of its own, acknowledged alone, would leave the group's other rules evaluated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_rds as rds
from aws_cdk import aws_s3 as s3

from training_clusters.constructs.common.bucket import SecureBucket
from training_clusters.constructs.common.lustre import SharedLustre
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.eks.addons import EbsCsiDriver, FsxCsiDriver
from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.constructs.hyperpod.cluster import HyperPodCluster
from training_clusters.constructs.hyperpod_eks.cluster import EksInstanceGroup, HyperPodEksCluster
from training_clusters.constructs.slurm.accounting import SlurmAccountingDatabase
from training_clusters.gates.compliance import (
    acknowledge,
    add_compliance_checks,
    nag_findings,
    synth_with_checks,
    wildcard_finding,
)

from .conftest import AZS, CDK_CONTEXT, REGION, CheckovRun, PinnedStack, gated_stack
from .constructs.test_hyperpod import CONTROLLER, WORKERS
from .constructs.test_hyperpod import build as build_hyperpod
from .constructs.test_session_manager import acknowledged_rules

#: (finding id, construct path) of each unacknowledged AwsSolutions finding of a family's stack.
Findings = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Case:
    """One acknowledgement's negative: ``finding`` returns on the resource at ``path`` (under ``/Test/``)."""

    family: str
    finding: str
    path: str


def _hyperpod(stack: cdk.Stack) -> list[Case]:
    cluster = build_hyperpod(stack)
    all_clusters = f"arn:{cdk.Aws.PARTITION}:logs:{stack.region}:{cdk.Aws.ACCOUNT_ID}:log-group:/aws/sagemaker/Clusters/*"
    whole_bucket = cluster.bucket.arn_for_objects("*")
    cluster.role.add_to_policy(iam.PolicyStatement(actions=["logs:PutLogEvents"], resources=[all_clusters]))
    cluster.role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject*"], resources=[whole_bucket]))
    cluster.role.add_to_policy(
        iam.PolicyStatement(actions=["s3:Put*"], resources=[cluster.bucket.arn_for_objects("lifecycle/*")])
    )
    every_region = f"arn:{cdk.Aws.PARTITION}:ec2:*:{cdk.Aws.ACCOUNT_ID}:network-interface/*"
    cluster.role.add_to_policy(
        iam.PolicyStatement(actions=["ec2:DeleteNetworkInterface"], resources=[every_region])
    )
    policy = "HyperPod/ExecutionRole/DefaultPolicy/Resource"
    # a role you pass gets the lifecycle read in a policy of the cluster's, with the execution role's reasons
    network = stack.node.find_child("Network")
    assert isinstance(network, TrainingNetwork)
    passed = HyperPodCluster(
        stack,
        "PassedRoleHyperPod",
        cluster_name="passed-role",
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[CONTROLLER, WORKERS],
        role=iam.Role(stack, "PassedRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com")),
    )
    lifecycle_read = passed.node.find_child("LifecycleRead")
    assert isinstance(lifecycle_read, iam.Policy)
    passed_whole_bucket = passed.bucket.arn_for_objects("*")
    lifecycle_read.add_statements(
        iam.PolicyStatement(actions=["s3:GetObject*"], resources=[passed_whole_bucket]),
        iam.PolicyStatement(
            actions=["s3:Put*"], resources=[passed.bucket.arn_for_objects("lifecycle/passed-role/*")]
        ),
    )
    passed_policy = "PassedRoleHyperPod/LifecycleRead/Resource"
    return [
        # the interfaces' wildcard is this account's in this region: every region's is a new finding
        Case("hyperpod", wildcard_finding(stack, "Resource", every_region), policy),
        # the log-group wildcard is this cluster's name only: every cluster's groups is a new finding
        Case("hyperpod", wildcard_finding(stack, "Resource", all_clusters), policy),
        # the lifecycle read is the cluster's prefix only: the whole bucket is a new finding
        Case("hyperpod", wildcard_finding(stack, "Resource", whole_bucket), policy),
        # grant_read's read actions only: a write wildcard is a new finding
        Case("hyperpod", "AwsSolutions-IAM5[Action::s3:Put*]", policy),
        # the same two on a passed role's lifecycle read (HyperPodCluster._grant_lifecycle_read)
        Case("hyperpod", wildcard_finding(stack, "Resource", passed_whole_bucket), passed_policy),
        Case("hyperpod", "AwsSolutions-IAM5[Action::s3:Put*]", passed_policy),
    ]


def _accounting(stack: cdk.Stack) -> list[Case]:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    db = SlurmAccountingDatabase(stack, "Accounting", vpc=network.vpc, slurmdbd_rotation_days=7)
    rotation = db.node.find_child("RotationRole")
    assert isinstance(rotation, iam.Role)
    rotation.add_to_policy(
        iam.PolicyStatement(actions=["secretsmanager:*"], resources=[db.secret.secret_arn])
    )
    db.user_handler.role.add_to_policy(iam.PolicyStatement(actions=["rds:*"], resources=["*"]))
    # deletion protection turned off without asking (RETAIN keeps it on): RDS10 is acknowledged only when asked
    cluster = db.cluster.node.default_child
    assert isinstance(cluster, rds.CfnDBCluster)
    cluster.deletion_protection = False
    return [
        Case(
            "accounting",
            "AwsSolutions-IAM5[Action::secretsmanager:*]",
            "Accounting/RotationRole/DefaultPolicy/Resource",
        ),
        Case(
            "accounting",
            "AwsSolutions-IAM5[Action::rds:*]",
            "Accounting/UserHandlerRole/DefaultPolicy/Resource",
        ),
        Case("accounting", "AwsSolutions-RDS10", "Accounting/Resource/Resource"),
    ]


def _bucket(stack: cdk.Stack) -> list[Case]:
    data = SecureBucket(stack, "Data")
    # S1 is acknowledged on the log bucket only: the data bucket without its access logs shows it
    resource = data.bucket.node.default_child
    assert isinstance(resource, s3.CfnBucket)
    resource.logging_configuration = None
    return [Case("bucket", "AwsSolutions-S1", "Data/Resource/Resource")]


def _network(stack: cdk.Stack) -> list[Case]:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS, endpoint_only=True)
    # EC23 is acknowledged nowhere: the group admits the VPC's literal CIDR, so any other source shows
    network.endpoint_security_group.add_ingress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "too wide")
    return [Case("network", "AwsSolutions-EC23", "Network/EndpointSecurityGroup/Resource")]


def _eks(stack: cdk.Stack) -> list[Case]:
    network = TrainingNetwork(stack, "Network", availability_zones=AZS)
    cluster = GpuEksCluster(stack, "Eks", vpc=network.vpc)
    storage = SharedLustre(stack, "Fsx", vpc=network.vpc, subnet=network.placement_subnet())
    fsx = FsxCsiDriver(stack, "FsxCsi", cluster=cluster, storage=storage, capacity_gib=1200)
    ebs = EbsCsiDriver(stack, "Ebs", cluster=cluster)
    # IAM4 is acknowledged per AWS-managed policy EKS documents for the role: any other one shows
    for role in (cluster.node_role, cluster.vpc_cni_role, ebs.role):
        role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name("AmazonS3ReadOnlyAccess"))
    # Resource::* covers fsx:DescribeFileSystems: a new wildcard action shows (a wider resource would not)
    fsx.role.add_to_policy(iam.PolicyStatement(actions=["fsx:*"], resources=["*"]))
    hyperpod = HyperPodEksCluster(
        stack,
        "HyperPod",
        cluster_name="ml-cluster",
        eks_cluster=cluster,
        vpc=network.vpc,
        subnet=network.placement_subnet(),
        instance_groups=[EksInstanceGroup(name="g5", instance_type="ml.g5.8xlarge", volume_gib=500)],
        kueue=False,
        kubeflow_trainer=False,
    )
    # Resource::* covers ecr:GetAuthorizationToken and the image pulls: a new wildcard action shows
    node_policy = hyperpod.node.find_child("NodePolicy")
    assert isinstance(node_policy, iam.Policy)
    node_policy.add_statements(iam.PolicyStatement(actions=["ecr:*"], resources=["*"]))
    # Resource::* covers the handler's VPC interface actions: a new wildcard action shows
    mpi_operator = hyperpod.dependencies.mpi_operator
    assert mpi_operator is not None
    mpi_operator.handler.add_to_role_policy(
        iam.PolicyStatement(actions=["eks:*"], resources=[cluster.cluster.cluster_arn])
    )
    s3_read_only = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonS3ReadOnlyAccess]"
    return [
        Case("eks", s3_read_only, "Eks/NodeRole/Resource"),
        Case("eks", s3_read_only, "Eks/VpcCniRole/Resource"),
        Case("eks", s3_read_only, "Ebs/Role/Resource"),
        Case("eks", "AwsSolutions-IAM5[Action::fsx:*]", "FsxCsi/Role/DefaultPolicy/Resource"),
        Case("eks", "AwsSolutions-IAM5[Action::ecr:*]", "HyperPod/NodePolicy/Resource"),
        Case(
            "eks",
            "AwsSolutions-IAM5[Action::eks:*]",
            "HyperPod/Dependencies/MpiOperator/HandlerRole/DefaultPolicy/Resource",
        ),
    ]


_FAMILIES: dict[str, Callable[[cdk.Stack], list[Case]]] = {
    "eks": _eks,
    "hyperpod": _hyperpod,
    "accounting": _accounting,
    "bucket": _bucket,
    "network": _network,
}


@functools.cache
def _synthesized(family: str) -> tuple[list[Case], Findings, dict[str, set[str]]]:
    """The family's cases, its stack's unacknowledged AwsSolutions findings and what each construct path
    acknowledges (one synth per family)."""
    import tempfile

    app = cdk.App(outdir=tempfile.mkdtemp(prefix=f"nag-{family}-"), context=dict(CDK_CONTEXT))
    stack = PinnedStack(app, "Test", env=cdk.Environment(region=REGION))
    cases = _FAMILIES[family](stack)
    add_compliance_checks(app, nist=False)
    _, findings = synth_with_checks(app)
    acknowledged = {
        path.removeprefix("/Test/"): rules
        for path, rules in acknowledged_rules(Path(app.outdir), "Test").items()
        if "Custom::" not in path  # aws-cdk-lib's stack-wide providers (acknowledge_cdk_made's)
    }
    return cases, frozenset((f.rule, f.construct_path) for f in nag_findings(findings)), acknowledged


def _cases() -> list[tuple[str, int]]:
    """(family, index) of every case; the families are built lazily, in the test that needs them."""
    counts = {"hyperpod": 6, "accounting": 3, "bucket": 1, "network": 1, "eks": 6}
    return [(family, index) for family, count in counts.items() for index in range(count)]


@pytest.mark.parametrize(("family", "index"), _cases(), ids=[f"{f}-{i}" for f, i in _cases()])
def test_a_widened_cause_brings_its_finding_back(family: str, index: int) -> None:
    cases, findings, _ = _synthesized(family)
    assert len(cases) == len([c for c in _cases() if c[0] == family])
    case = cases[index]
    assert (case.finding, f"Test/{case.path}") in findings, sorted(findings)


#: What each family's resources acknowledge, exactly (the other side: an acknowledgement applied where its
#: condition does not hold, or a default reason that would hide any new wildcard, shows here).
_LOGS = "arn:aws:logs:us-east-1:<AWS::AccountId>:log-group:/aws/sagemaker/Clusters/ml-cluster/*"


def _managed(name: str) -> str:
    return f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]"


def _lifecycle_read(bucket: str, cluster_name: str) -> set[str]:
    """grant_read's wildcards on a cluster's lifecycle prefix (``bucket``: the bucket's logical id)."""
    return {
        f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/lifecycle/{cluster_name}/*]",
        "AwsSolutions-IAM5[Action::s3:GetBucket*]",
        "AwsSolutions-IAM5[Action::s3:GetObject*]",
        "AwsSolutions-IAM5[Action::s3:List*]",
    }


def _execution_role(bucket: str) -> set[str]:
    """The wildcards of the execution role a cluster named ml-cluster makes (``bucket``: its lifecycle bucket)."""
    return {
        f"AwsSolutions-IAM5[Resource::{_LOGS}]",
        f"AwsSolutions-IAM5[Resource::{_LOGS}:log-stream:*]",
        "AwsSolutions-IAM5[Resource::arn:aws:ec2:us-east-1:<AWS::AccountId>:network-interface/*]",
        "AwsSolutions-IAM5[Resource::*]",
        *_lifecycle_read(bucket, "ml-cluster"),
    }


ACKNOWLEDGED: dict[str, dict[str, set[str]]] = {
    "hyperpod": {
        "HyperPod/LifecycleBucket/AccessLogs": {"AwsSolutions-S1"},
        "HyperPod/ExecutionRole/DefaultPolicy/Resource": _execution_role("HyperPodLifecycleBucket266C8849"),
        # a passed role: the lifecycle read's wildcards only, in the cluster's own policy (no key: no Decrypt)
        "PassedRoleHyperPod/LifecycleBucket/AccessLogs": {"AwsSolutions-S1"},
        "PassedRoleHyperPod/LifecycleRead/Resource": _lifecycle_read(
            "PassedRoleHyperPodLifecycleBucket69E770FE", "passed-role"
        ),
    },
    "accounting": {
        # rotating slurmdbd's secret: SMG4 on the master user's secret only; deletion protection on (no RDS10)
        "Accounting/Secret": {"AwsSolutions-SMG4"},
        "Accounting/Resource/Resource": {"AwsSolutions-RDS6", "AwsSolutions-RDS11", "AwsSolutions-RDS14"},
        "Accounting/UserHandlerRole/DefaultPolicy/Resource": {"AwsSolutions-IAM5[Resource::*]"},
        "Accounting/RotationRole/DefaultPolicy/Resource": {"AwsSolutions-IAM5[Resource::*]"},
        "Accounting/UserProvider/framework-onEvent/Resource": {"AwsSolutions-L1"},
        "Accounting/UserProvider/framework-onEvent/ServiceRole/Resource": {
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"
        },
        "Accounting/UserProvider/framework-onEvent/ServiceRole/DefaultPolicy/Resource": {
            "AwsSolutions-IAM5[Resource::<AccountingUserHandler9B094DD2.Arn>:*]"
        },
    },
    "bucket": {"Data/AccessLogs": {"AwsSolutions-S1"}},
    "network": {},  # the endpoints' group admits the VPC's literal CIDR: EC23 reads it, nothing to acknowledge
    "eks": {
        "Eks/NodeRole": {
            _managed("AmazonEC2ContainerRegistryReadOnly"),
            _managed("AmazonEKSWorkerNodePolicy"),
        },
        "Eks/VpcCniRole/Resource": {_managed("AmazonEKS_CNI_Policy")},
        "Eks/Resource/Role/Resource": {_managed("AmazonEKSClusterPolicy")},
        "Ebs/Role/Resource": {_managed("AmazonEBSCSIDriverPolicyV2")},
        "FsxCsi/Role/DefaultPolicy": {"AwsSolutions-IAM5[Resource::*]"},
        # HyperPod on this EKS cluster: the execution role as a Slurm cluster's, the nodes' image pulls and
        # Pod Identity, the MPI Operator's release-manifest handler (and aws-cdk-lib's Provider framework)
        "HyperPod/Resource/LifecycleBucket/AccessLogs": {"AwsSolutions-S1"},
        "HyperPod/Resource/ExecutionRole/DefaultPolicy/Resource": _execution_role(
            "HyperPodLifecycleBucketA7C83E82"
        ),
        "HyperPod/NodePolicy": {
            "AwsSolutions-IAM5[Resource::*]",  # ecr:GetAuthorizationToken
            "AwsSolutions-IAM5[Resource::arn:aws:ecr:us-east-1:602401143452:repository/*]",  # EKS's add-ons
            "AwsSolutions-IAM5[Resource::arn:aws:ecr:*:<AWS::AccountId>:repository/*]",  # the account's own
        },
        "HyperPod/Dependencies/MpiOperator/HandlerRole/DefaultPolicy/Resource": {
            "AwsSolutions-IAM5[Resource::*]"
        },
        "HyperPod/Dependencies/MpiOperator/Provider/framework-onEvent/Resource": {"AwsSolutions-L1"},
        "HyperPod/Dependencies/MpiOperator/Provider/framework-onEvent/ServiceRole/Resource": {
            _managed("service-role/AWSLambdaBasicExecutionRole")
        },
        "HyperPod/Dependencies/MpiOperator/Provider/framework-onEvent/ServiceRole/DefaultPolicy/Resource": {
            "AwsSolutions-IAM5[Resource::<HyperPodDependenciesMpiOperatorHandlerB9E526C2.Arn>:*]"
        },
        # aws-cdk-lib's kubectl provider (acknowledge_cdk_made)
        "Eks/Resource/KubectlProvider/Handler/Resource": {"AwsSolutions-L1"},
        "Eks/Resource/KubectlProvider/Handler/ServiceRole/Resource": {
            _managed("AmazonEC2ContainerRegistryReadOnly"),
            _managed("service-role/AWSLambdaBasicExecutionRole"),
            _managed("service-role/AWSLambdaVPCAccessExecutionRole"),
            'AwsSolutions-IAM4[Policy::{"Fn::If":["EksKubectlProviderHandlerHasEcrPublicE0324BD4",{"Fn::Join":["",'
            '["arn:",{"Ref":"AWS::Partition"},":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},'
            '{"Ref":"AWS::NoValue"}]}]',
        },
        "Eks/Resource/KubectlProvider/Provider/framework-onEvent/Resource": {"AwsSolutions-L1"},
        "Eks/Resource/KubectlProvider/Provider/framework-onEvent/ServiceRole/Resource": {
            _managed("service-role/AWSLambdaBasicExecutionRole"),
            _managed("service-role/AWSLambdaVPCAccessExecutionRole"),
        },
        "Eks/Resource/KubectlProvider/Provider/framework-onEvent/ServiceRole/DefaultPolicy/Resource": {
            "AwsSolutions-IAM5[Resource::<EksKubectlProviderHandlerFCD70AA3.Arn>:*]"
        },
    },
}


@pytest.mark.parametrize("family", ACKNOWLEDGED)
def test_each_resource_carries_exactly_its_acknowledgements(family: str) -> None:
    _, _, acknowledged = _synthesized(family)
    assert acknowledged == ACKNOWLEDGED[family]


# -- checkov: skips that depend on a condition ------------------------------------------------------------


#: check -> the logical id of the resource that must fail it in the stack below (set when it is built).
CHECKOV_NEGATIVES: dict[str, str] = {}


@gated_stack("checkov-acknowledgement-negatives")
def _checkov_negatives(stack: cdk.Stack) -> None:
    """A data bucket without its access logs: CKV_AWS_18 is skipped on the log bucket only. Its cdk-nag S1 (its
    negative is above) is acknowledged here, so the stack passes the nag gate and reaches checkov."""
    data = SecureBucket(stack, "Data")
    bucket = data.bucket.node.default_child
    assert isinstance(bucket, s3.CfnBucket)
    bucket.logging_configuration = None
    acknowledge(bucket, "AwsSolutions-S1", "checkov's negative probe: access logs removed on purpose")
    CHECKOV_NEGATIVES["CKV_AWS_18"] = stack.resolve(stack.get_logical_id(bucket))


@pytest.mark.parametrize("check", ["CKV_AWS_18"])
def test_a_widened_cause_fails_its_checkov_check_again(checkov_run: CheckovRun, check: str) -> None:
    results = checkov_run.results("checkov-acknowledgement-negatives")
    failed = {r.resource.split(".", 1)[-1] for r in results if r.failed and r.check_id == check}
    assert failed == {CHECKOV_NEGATIVES[check]}
