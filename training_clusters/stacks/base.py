"""TrainingEnvironmentStack: the network, placement group and shared file system every environment has."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from training_clusters.config import EnvironmentConfig
from training_clusters.constructs.common.lustre import DataRepository, SharedLustre
from training_clusters.constructs.common.network import TrainingNetwork
from training_clusters.constructs.common.placement import TrainingPlacementGroup
from training_clusters.model.options import RemovalPolicy
from training_clusters.rules.logs import CLOUDWATCH_RETENTION_DAYS

if TYPE_CHECKING:  # RDS is loaded only by the stacks that make a database, EKS only by the EKS stacks
    from training_clusters.config import EksQueuesConfig
    from training_clusters.constructs.eks.addons.fsx_csi_driver import FsxCsiDriver
    from training_clusters.constructs.eks.scheduling import TrainingQueues, TrainingRuntimes
    from training_clusters.constructs.slurm.accounting import SlurmAccountingDatabase

#: The steps of NextSteps that every Slurm environment shares (TrainingEnvironmentStack.next_steps).
SLURM_ACCEPTANCE_STEP = (
    "On your machine: `.venv/bin/training-clusters acceptance <environment file> -d acceptance/` writes the jobs; copy "
    "them into your home on the cluster (paste each file into the session, or scp through an SSM port "
    "forward to port 22 with a key)"
)
SLURM_RUN_STEP = (
    "On the cluster: sbatch each .sbatch file, then read <job name>-<job id>.out: its RESULT lines say PASS "
    "or FAIL against the figures acceptance printed"
)
DESTROY_STEP = (
    "Done: `.venv/bin/training-clusters destroy <environment file>`; what is kept (file system, database, "
    "buckets) keeps costing until you delete it: `.venv/bin/training-clusters cleanup <environment file> "
    "--dry-run` lists it with its monthly cost"
)
#: What a step says for the environment file when the stack was not built from one (in code).
ENVIRONMENT_FILE = "<environment file>"


def queue_step(
    queues: TrainingQueues | None, runtimes: TrainingRuntimes | None, *, fits_on: str
) -> list[str]:
    """The next step that says how a team queues a job (and the TrainJob runtimes), when the stack made the
    queues: none otherwise. ``fits_on`` ends "Kueue starts it when all of it fits": where it must fit."""
    if queues is None:
        return []
    namespaces = queues.namespaces
    where = f"namespace {namespaces[0]}" if len(namespaces) == 1 else f"namespaces {', '.join(namespaces)}"
    step = (
        f"Train: label a job kueue.x-k8s.io/queue-name: {queues.local_queue_name} in {where}; Kueue "
        f"starts it when all of it fits{fits_on} (kubectl get workloads shows what waits)"
    )
    if runtimes is not None:
        step += (
            f"; TrainJobs use the runtimes {', '.join(n for pair in runtimes.names.values() for n in pair)}"
        )
    return [step]


def team_roles(scope: Construct, queues: EksQueuesConfig) -> dict[str, iam.IRole]:
    """The file's team roles (``queues.team_roles``), imported by ARN under ``scope``, by namespace."""
    return {
        namespace: iam.Role.from_role_arn(scope, f"TeamRole-{namespace}", arn, mutable=False)
        for namespace, arn in queues.team_roles.items()
    }


def after_team_namespaces(fsx_csi: FsxCsiDriver, queues: TrainingQueues) -> None:
    """Apply the FSx CSI driver's team claims once the queues have made the team namespaces."""
    if queues.namespaces_resource is not None:
        fsx_csi.manifest.node.add_dependency(queues.namespaces_resource)


def kubernetes_acceptance_step(
    *, mpijob: bool, trainjob: bool, dcgm: bool, mig: bool, gang: bool
) -> list[str]:
    """The next step that says which tests ``training-clusters acceptance`` writes for a Kubernetes
    environment, by kind (the stack knows which its groups get; ``tests/stacks/test_next_steps.py`` checks each
    shipped file's step against the files the command writes), or none when it writes nothing.

    :param mpijob: The NCCL test as an MPIJob (a GPU group with EFA and two nodes or more).
    :param trainjob: The NCCL test as a TrainJob (the same, with Kueue and Kubeflow Trainer).
    :param dcgm: DCGM diagnostics (a GPU group of whole GPUs).
    :param mig: A pod holding one MIG instance (a MIG-partitioned group).
    :param gang: Kueue's gang admission test (with Kueue, a group of whole GPUs).
    """
    tests = []
    if mpijob and trainjob:
        tests.append("NCCL over EFA as an MPIJob and as a TrainJob")
    elif mpijob or trainjob:
        tests.append(f"NCCL over EFA as {'an MPIJob' if mpijob else 'a TrainJob'}")
    if dcgm:
        tests.append("GPU health with DCGM diagnostics")
    if mig:
        tests.append("a MIG instance in a pod")
    if gang:
        tests.append("gang admission through Kueue")
    if not tests:
        return []
    return [
        f"Acceptance: `.venv/bin/training-clusters acceptance {ENVIRONMENT_FILE} -d acceptance/` writes this environment's "
        f"tests ({', '.join(tests)}), each with a -check.sh, and prints how to run each: apply it, pipe its log "
        "into its check, whose RESULT line says PASS or FAIL"
    ]


class TrainingEnvironmentStack(cdk.Stack):
    """Network + placement group + FSx for Lustre, built from an environment file.

    Orchestrator stacks extend it and add their cluster on top; on its own it is the
    ``network-storage`` environment.

    ``cdk destroy`` keeps the data and completes: a retained file system (``storage.lustre.removal_policy``,
    retain by default) keeps its security group, its subnet and the VPC (free to keep; the NAT gateway, its
    Elastic IP, routes and endpoints are deleted), and the flow log group is kept within its retention.
    What stays costs the file system's capacity per GiB-month until you delete it, plus CloudWatch Logs
    storage. Clusters are deleted (they hold no data). ``tests/test_destroy.py`` checks every shipped
    environment: no retained resource uses a deleted one.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: EnvironmentConfig,
        environment_name: str,
        environment_file: str | None = None,
    ) -> None:
        """Build the shared layer.

        :param config: The loaded environment file.
        :param environment_name: Names the stack's description and the ``environment`` tag.
        :param environment_file: The file as the user names it (``environments/x.yaml``), written into the
            commands ``NextSteps`` prints. Default: ``<environment file>`` there.
        """
        self.config = config
        self.environment_name = environment_name
        self.environment_file = environment_file
        super().__init__(
            scope,
            id,
            env=cdk.Environment(account=config.account, region=config.region),
            description=f"cdk-training-clusters environment '{environment_name}'",
            # Stack tags: CloudFormation puts them on every resource it creates that takes tags, nested
            # stacks included. (A tag aspect would write them into the templates too, at a third of an EKS
            # stack's synth time.) Instances launched by nodegroups get them from the launch templates.
            tags=config.resource_tags(environment_name),
        )
        self.network = TrainingNetwork(
            self,
            "Network",
            cidr=config.network.cidr,
            availability_zones=config.availability_zones,
            nat_gateways=config.network.nat_gateways,
            endpoint_only=config.network.endpoint_only,
            flow_logs_retention=_retention(config.network.flow_logs_retention_days),
            placement_availability_zone=config.placement_availability_zone,
        )
        placement = config.network.placement_group
        self.placement_group = TrainingPlacementGroup(
            self,
            "PlacementGroup",
            strategy=placement.strategy,
            partitions=placement.partitions,
            subnets=[self.network.placement_subnet()],
        )
        self.shared_storage = self._shared_storage()
        self.mount_dir = config.storage.lustre.mount_dir if config.storage.lustre else None
        self._add_base_outputs()

    def output(self, name: str, value: str, description: str) -> cdk.CfnOutput:
        """A stack output ``name`` (its id and logical id): the one way the environment stacks add outputs."""
        return cdk.CfnOutput(self, name, value=value, description=description)

    def next_steps(self, *steps: str) -> cdk.CfnOutput:
        """The ``NextSteps`` output, which `cdk deploy` prints last: what to do once deployed, in order. A step
        names another output in brackets (``[HeadNodeSsmCommand]``); each must exist, so add this last. A
        command to type on your own machine is in backquotes, with the environment file filled in
        (``tests/readme/test_commands_verbatim.py`` runs each as printed)."""
        for step in steps:
            for name in re.findall(r"\[(\w+)\]", step):
                if not isinstance(self.node.try_find_child(name), cdk.CfnOutput):
                    raise AssertionError(f"NextSteps names the output {name}, which this stack does not have")
        text = " ".join(f"{number}) {step}" for number, step in enumerate(steps, start=1))
        if self.environment_file is not None:  # commands in backquotes, runnable as printed
            text = text.replace(ENVIRONMENT_FILE, shlex.quote(self.environment_file))
        return self.output("NextSteps", text, "What to do now, in order (the outputs named in brackets)")

    @property
    def availability_zones(self) -> list[str]:
        """The AZs named in the environment file, so synth never has to look them up."""
        return list(self.config.availability_zones)

    def _retain_database_subnets(self, database: SlurmAccountingDatabase) -> None:
        """Keep ``database``'s subnets (and the VPC): a retained database keeps its network interfaces there."""
        for subnet in database.subnets:
            self.network.retain(subnet)

    def _shared_storage(self) -> SharedLustre | None:
        lustre = self.config.storage.lustre
        if lustre is None:
            return None
        repository = None
        if lustre.data_repository is not None:
            spec = lustre.data_repository
            repository = DataRepository(
                bucket=s3.Bucket.from_bucket_name(self, "DataRepositoryBucket", spec.bucket_name),
                prefix=spec.prefix,
                file_system_path=spec.file_system_path,
                auto_import=spec.auto_import,
                auto_export=spec.auto_export,
            )
        storage = SharedLustre(
            self,
            "SharedStorage",
            vpc=self.network.vpc,
            subnet=self.network.placement_subnet(),
            deployment_type=lustre.deployment_type,
            storage_capacity_gib=lustre.storage_capacity_gib,
            per_unit_storage_throughput_mbps=lustre.per_unit_storage_throughput_mbps,
            data_repository=repository,
            removal_policy=lustre.removal_policy,
            backup_retention_days=lustre.backup_retention_days,
            root_squash=lustre.root_squash,
            root_squash_exempt_nids=lustre.root_squash_exempt_nids,
        )
        storage.allow_clients_from(self.network)
        if lustre.removal_policy is RemovalPolicy.RETAIN:
            # The retained file system stays in its subnet: keep the subnet and the VPC so `cdk destroy`
            # completes (they cost nothing; the NAT gateway, endpoints and routes are still deleted).
            self.network.retain(self.network.placement_subnet())
        return storage

    def _add_base_outputs(self) -> None:
        self.output("VpcId", self.network.vpc.vpc_id, "The training VPC")
        self.output(
            "PlacementSubnetId",
            self.network.placement_subnet().subnet_id,
            "Private subnet (one AZ) shared by the placement group and FSx",
        )
        self.output(
            "PlacementGroupName",
            self.placement_group.placement_group_name,
            "EC2 placement group for compute instances",
        )
        self.output(
            "EfaSecurityGroupId",
            self.network.efa_security_group.security_group_id,
            "Security group allowing all traffic between EFA members",
        )
        if self.shared_storage is not None and self.mount_dir is not None:
            self.output(
                "SharedStorageMount",
                cdk.Fn.join("", [self.shared_storage.mount_target(), f" mounted at {self.mount_dir}"]),
                "FSx for Lustre device and mount point",
            )
            self.output(
                "SharedStorageMountCommand",
                cdk.Fn.join(
                    "",
                    [
                        f"sudo mkdir -p {self.mount_dir} && sudo mount -t lustre -o relatime,flock ",
                        self.shared_storage.mount_target(),
                        f" {self.mount_dir}",
                    ],
                ),
                "Mount the shared file system by hand on any client in the VPC",
            )
        if hasattr(self.network, "flow_log_group"):
            self.output(
                "FlowLogGroup",
                self.network.flow_log_group.log_group_name,
                "CloudWatch log group of the VPC flow logs",
            )
        if type(self) is TrainingEnvironmentStack:  # the network and storage alone: no cluster
            mount = (
                "Mount the shared file system on an instance in the VPC: [SharedStorageMountCommand]"
                if self.shared_storage is not None and self.mount_dir is not None
                else "Launch your instances into [PlacementSubnetId] with [EfaSecurityGroupId] and "
                "[PlacementGroupName]"
            )
            self.next_steps(
                mount,
                DESTROY_STEP,
            )


def _retention(days: int) -> logs.RetentionDays:
    return logs.RetentionDays[CLOUDWATCH_RETENTION_DAYS[days]]
