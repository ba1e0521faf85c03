"""``training-clusters connect FILE``: find a node of a deployed environment and open a shell on it through SSM.

What it looks up, read-only, per orchestrator (the stack's outputs first, ``cloudformation:DescribeStacks``):

- **HyperPod** (Slurm, and the instance groups of HyperPod on EKS): the cluster's nodes
  (``sagemaker:ListClusterNodes``); the SSM target of a node is
  ``sagemaker-cluster:<cluster-id>_<instance-group>-<instance-id>``, the cluster id being the last part of its
  ARN (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-run-jobs-slurm-access-nodes.html).
- **ParallelCluster**: running instances tagged ``parallelcluster:cluster-name`` and ``parallelcluster:node-type``
  (``HeadNode``, ``LoginNode``, ``Compute``), login pools by ``parallelcluster:login-nodes-pool-name`` and queues
  by ``parallelcluster:queue-name`` (the tags ParallelCluster puts on its instances: ``cli/src/pcluster/
  constants.py`` and ``templates/login_nodes_stack.py`` in github.com/aws/aws-parallelcluster)
  (``ec2:DescribeInstances``).
- **AWS PCS**: the compute node group's id by its name (``pcs:ListComputeNodeGroups``), then running instances
  tagged ``aws:pcs:compute-node-group-id`` with it, the tag PCS puts on the instances it launches (AWS PCS User
  Guide, "Finding compute node group instances in AWS PCS",
  https://docs.aws.amazon.com/pcs/latest/userguide/working-with_cng.html).
- **EKS**: the ``aws eks update-kubeconfig`` command of the stack's ``UpdateKubeconfigCommand`` output, and whether
  the API endpoint is public (``eks:DescribeCluster``), to say how to reach a private one.

The session itself is the AWS CLI's (``aws ssm start-session``, which needs the Session Manager plugin); with
``--print`` nothing is run and the exact command is printed instead. Everything here takes boto3 clients, so tests
drive it with botocore's Stubber against the real service models.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from training_clusters.config import EnvironmentConfig
from training_clusters.model.errors import ConfigurationError, excerpt
from training_clusters.model.tables import TABLE_WIDTH
from training_clusters.orchestrators import orchestrator_of

__all__ = [
    "CONNECT_IAM_ACTIONS",
    "ConnectClients",
    "Connection",
    "aws_reason",
    "connection",
    "hyperpod_ssm_target",
    "note_lines",
    "open_connection",
    "stack_outputs",
]

#: What ``connect`` calls (read-only), and what the AWS CLI then calls for the session or the kubeconfig.
CONNECT_IAM_ACTIONS = (
    "cloudformation:DescribeStacks",
    "sagemaker:ListClusterNodes",
    "ec2:DescribeInstances",
    "pcs:ListComputeNodeGroups",
    "eks:DescribeCluster",
    "ssm:StartSession",
)

#: ParallelCluster's instance tags (aws/aws-parallelcluster ``cli/src/pcluster/constants.py``).
PCLUSTER_CLUSTER_NAME_TAG = "parallelcluster:cluster-name"
PCLUSTER_NODE_TYPE_TAG = "parallelcluster:node-type"
PCLUSTER_QUEUE_NAME_TAG = "parallelcluster:queue-name"
PCLUSTER_LOGIN_POOL_TAG = "parallelcluster:login-nodes-pool-name"
#: The tag AWS PCS puts on the instances of a compute node group: the group's id.
PCS_NODE_GROUP_ID_TAG = "aws:pcs:compute-node-group-id"

HEAD, CONTROLLER, LOGIN = "head", "controller", "login"
#: An EC2 instance id (8 or 17 hexadecimal digits), which ``--node`` takes besides names.
INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")


@dataclass(frozen=True)
class ConnectClients:
    """The boto3 clients ``connect`` asks, in the environment's region."""

    cloudformation: Any
    sagemaker: Any
    ec2: Any
    pcs: Any
    eks: Any

    @classmethod
    def from_session(cls, session: Any, region: str) -> ConnectClients:
        return cls(**{name: session.client(name, region_name=region) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Connection:
    """What to run to reach a node (or, on EKS, to point kubectl at the cluster), and what to know first."""

    node: str
    """What it reaches: ``HyperPod controller (group controller, i-...)``, ``the EKS cluster training``."""
    command: tuple[str, ...]
    """The AWS CLI command, as arguments."""
    instance_id: str | None = None
    target: str | None = None
    notes: tuple[str, ...] = field(default=())
    """What to know (how to reach a private EKS endpoint), one sentence each."""

    @property
    def shell(self) -> str:
        """The command as one line to paste into a shell."""
        return shlex.join(self.command)

    @property
    def opens_session(self) -> bool:
        return self.command[:3] == ("aws", "ssm", "start-session")

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "instance_id": self.instance_id,
            "target": self.target,
            "command": list(self.command),
            "shell": self.shell,
            "notes": list(self.notes),
        }


def hyperpod_ssm_target(cluster_id: str, group: str, instance_id: str) -> str:
    """The SSM target of a HyperPod node: ``sagemaker-cluster:<cluster-id>_<group>-<instance-id>``."""
    return f"sagemaker-cluster:{cluster_id}_{group}-{instance_id}"


def connection(
    config: EnvironmentConfig,
    *,
    environment: str,
    stack: str,
    node: str | None,
    clients: ConnectClients,
    profile: str | None = None,
    file: str = "FILE",
) -> Connection:
    """How to reach ``node`` of the deployed ``stack`` (default: the node the stack's ``NextSteps`` names);
    ``file`` is how notes name the environment file.

    :raises ConfigurationError: the node is not one the file declares, the stack is not deployed, or no single
        running instance answers (none, or several: then the message lists them and ``--node i-...`` picks one).
    """
    finder = NodeFinder(
        config, environment=environment, stack=stack, clients=clients, profile=profile, file=file
    )
    return finder.find(node)


class NodeFinder:
    def __init__(
        self,
        config: EnvironmentConfig,
        *,
        environment: str,
        stack: str,
        clients: ConnectClients,
        profile: str | None,
        file: str,
    ) -> None:
        self.config = config
        self.environment = environment
        self.stack = stack
        self.region = config.region
        self.clients = clients
        self.profile = profile
        self.file = shlex.quote(file)
        self._outputs: dict[str, str] | None = None

    def find(self, node: str | None) -> Connection:
        orchestrator = orchestrator_of(self.config)
        if orchestrator is not None:
            connection: Connection = orchestrator.load("connect")(self, node)
            return connection
        raise ConfigurationError(
            f"{self.environment}: connect needs a cluster; this environment has only a network and storage"
        )

    # ----------------------------------------------------------------------------------------------
    # HyperPod

    def hyperpod(self, node: str | None) -> Connection:
        assert self.config.hyperpod is not None
        groups = [g.name for g in self.config.hyperpod.instance_groups]
        roles = {str(g.role): g.name for g in self.config.hyperpod.instance_groups if str(g.role) != "worker"}
        wanted = node or CONTROLLER
        if _is_instance_id(wanted):
            return self._hyperpod_instance(wanted)
        if wanted in roles:
            return self._hyperpod_group(roles[wanted], f"HyperPod {wanted}", single=wanted == CONTROLLER)
        if wanted in groups:
            return self._hyperpod_group(wanted, f"HyperPod group {wanted}", single=False)
        raise self._unknown(wanted, [*sorted(roles), *groups])

    def hyperpod_eks(self, node: str | None) -> Connection:
        assert self.config.hyperpod_eks is not None
        groups = [g.name for g in self.config.hyperpod_eks.instance_groups]
        if node is None:
            return self._kubeconfig(hyperpod_groups=groups)
        if _is_instance_id(node):
            return self._hyperpod_instance(node)
        if node in groups:
            return self._hyperpod_group(node, f"HyperPod group {node}", single=False)
        raise self._unknown(node, groups)

    def _hyperpod_group(self, group: str, what: str, *, single: bool) -> Connection:
        cluster_arn = self._output("ClusterArn")
        # the API matches names that contain the group's: keep the group's own nodes
        nodes = [n for n in self._cluster_nodes(cluster_arn, group) if n["InstanceGroupName"] == group]
        running = sorted(n["InstanceId"] for n in nodes if n["InstanceStatus"]["Status"] == "Running")
        statuses = [f"{n['InstanceId']} {n['InstanceStatus']['Status']}" for n in nodes]
        instance_id, notes = self._one(
            running, what=f"{what} (instance group {group})", seen=statuses, single=single
        )
        target = hyperpod_ssm_target(cluster_arn.split("/")[-1], group, instance_id)
        return Connection(
            f"{what} (group {group}, {instance_id})",
            self._start_session(target),
            instance_id=instance_id,
            target=target,
            notes=notes,
        )

    def _hyperpod_instance(self, instance_id: str) -> Connection:
        cluster_arn = self._output("ClusterArn")
        found = [n for n in self._cluster_nodes(cluster_arn, None) if n["InstanceId"] == instance_id]
        if not found:
            raise ConfigurationError(
                f"{self.stack}: HyperPod cluster {cluster_arn.split('/')[-1]} has no node {excerpt(instance_id)}"
            )
        group = found[0]["InstanceGroupName"]
        target = hyperpod_ssm_target(cluster_arn.split("/")[-1], group, instance_id)
        return Connection(
            f"HyperPod node {instance_id} (group {group})",
            self._start_session(target),
            instance_id=instance_id,
            target=target,
        )

    def _cluster_nodes(self, cluster_arn: str, group: str | None) -> list[dict[str, Any]]:
        request: dict[str, Any] = {"ClusterName": cluster_arn}
        if group is not None:
            request["InstanceGroupNameContains"] = group
        nodes: list[dict[str, Any]] = []
        for page in self.clients.sagemaker.get_paginator("list_cluster_nodes").paginate(**request):
            nodes += page["ClusterNodeSummaries"]
        return nodes

    # ----------------------------------------------------------------------------------------------
    # ParallelCluster and PCS: instances by their tags

    def parallelcluster(self, node: str | None) -> Connection:
        spec = self.config.parallelcluster
        assert spec is not None
        pools = [p.name for p in spec.login_nodes]
        queues = [q.name for q in spec.queues]
        wanted = node or HEAD
        tags: dict[str, str] = {}
        if wanted == HEAD:
            tags[PCLUSTER_NODE_TYPE_TAG] = "HeadNode"
            what, single = "ParallelCluster head node", True
        elif wanted == LOGIN and pools:
            tags[PCLUSTER_NODE_TYPE_TAG] = "LoginNode"
            what, single = "ParallelCluster login node", False
        elif wanted in pools:
            tags.update({PCLUSTER_NODE_TYPE_TAG: "LoginNode", PCLUSTER_LOGIN_POOL_TAG: wanted})
            what, single = f"ParallelCluster login pool {wanted}", False
        elif wanted in queues:
            tags.update({PCLUSTER_NODE_TYPE_TAG: "Compute", PCLUSTER_QUEUE_NAME_TAG: wanted})
            what, single = f"ParallelCluster queue {wanted}", False
        elif _is_instance_id(wanted):
            what, single = f"ParallelCluster node {wanted}", True
        else:
            raise self._unknown(wanted, [HEAD, *([LOGIN] if pools else []), *pools, *queues])
        tags = {PCLUSTER_CLUSTER_NAME_TAG: self._output("ClusterName"), **tags}  # the cluster's first
        instance_id = wanted if _is_instance_id(wanted) else None
        return self._ec2_instance(what, tags, single=single, instance_id=instance_id)

    def pcs(self, node: str | None) -> Connection:
        spec = self.config.pcs
        assert spec is not None
        login = spec.login_nodes.name if spec.login_nodes.count else None
        groups = [g.name for g in spec.compute_node_groups]
        wanted = node or LOGIN
        group = login if wanted == LOGIN else wanted
        if group is None and node is None:
            raise ConfigurationError(
                f"{self.environment}: this PCS cluster has no login nodes (pcs.login_nodes.count is 0); "
                f"give --node with a compute node group: {', '.join(groups)}"
            )
        if not _is_instance_id(wanted) and (
            group is None or group not in [*groups, *([login] if login else [])]
        ):
            raise self._unknown(wanted, [*([LOGIN] if login else []), *groups])
        cluster_id = self._output("ClusterId")
        ids = self._pcs_node_group_ids(cluster_id)
        if _is_instance_id(wanted):  # one of the cluster's instances: any of its groups' ids
            tags = {PCS_NODE_GROUP_ID_TAG: sorted(ids.values())}
            return self._ec2_instance(f"PCS node {wanted}", tags, single=True, instance_id=wanted)
        assert group is not None
        if group not in ids:
            raise ConfigurationError(
                f"{self.stack}: PCS cluster {cluster_id} has no compute node group {group} "
                f"(it has {', '.join(sorted(ids)) or 'none'}); is the deployed stack older than the file?"
            )
        what = "PCS login node" if group == login else f"PCS compute node group {group}"
        return self._ec2_instance(what, {PCS_NODE_GROUP_ID_TAG: [ids[group]]}, single=False)

    def _pcs_node_group_ids(self, cluster_id: str) -> dict[str, str]:
        """The ids of the cluster's compute node groups, by name."""
        ids: dict[str, str] = {}
        paginator = self.clients.pcs.get_paginator("list_compute_node_groups")
        for page in paginator.paginate(clusterIdentifier=cluster_id):
            ids.update({group["name"]: group["id"] for group in page["computeNodeGroups"]})
        return ids

    def _ec2_instance(
        self, what: str, tags: Mapping[str, str | list[str]], *, single: bool, instance_id: str | None = None
    ) -> Connection:
        """The running instance with these tags (a list: any of its values)."""
        filters = [
            {"Name": f"tag:{key}", "Values": value if isinstance(value, list) else [value]}
            for key, value in tags.items()
        ]
        filters.append({"Name": "instance-state-name", "Values": ["running"]})
        request: dict[str, Any] = {"Filters": filters}
        if instance_id is not None:
            request["InstanceIds"] = [instance_id]
        found: list[str] = []
        try:
            for page in self.clients.ec2.get_paginator("describe_instances").paginate(**request):
                found += [i["InstanceId"] for r in page["Reservations"] for i in r["Instances"]]
        except ClientError as error:
            if _code(error) not in ("InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"):
                raise
        chosen, notes = self._one(sorted(found), what=what, seen=[], single=single)
        return Connection(
            f"{what} ({chosen})", self._start_session(chosen), instance_id=chosen, target=chosen, notes=notes
        )

    # ----------------------------------------------------------------------------------------------
    # EKS

    def eks(self, node: str | None) -> Connection:
        if node is not None:
            raise ConfigurationError(
                f"{self.environment}: --node is for Slurm nodes and HyperPod instance groups; on EKS connect "
                "writes the kubeconfig (EKS nodes take no SSM sessions: their role carries only what the kubelet "
                "needs)"
            )
        return self._kubeconfig(hyperpod_groups=[])

    def _kubeconfig(self, *, hyperpod_groups: Sequence[str]) -> Connection:
        command = self._output("UpdateKubeconfigCommand")
        name = self._output("ClusterName")
        argv = shlex.split(command)
        if argv[:3] != ["aws", "eks", "update-kubeconfig"]:
            raise ConfigurationError(
                f"{self.stack}: output UpdateKubeconfigCommand is not an update-kubeconfig"
            )
        described = self.clients.eks.describe_cluster(name=name)["cluster"]
        vpc = described["resourcesVpcConfig"]
        notes: list[str] = []
        if vpc.get("endpointPublicAccess"):
            cidrs = ", ".join(vpc.get("publicAccessCidrs", []))
            notes.append(f"The API endpoint is public, open to {cidrs} only (public_access_cidrs).")
        else:
            section = "hyperpod_eks" if hyperpod_groups else "eks"
            notes.append(
                f"The API endpoint is private: kubectl reaches it only from inside VPC {vpc.get('vpcId', '?')}. "
                f"Run kubectl there, or set {section}.public_access_cidrs to your address range and deploy again."
            )
            if hyperpod_groups:
                notes.append(
                    f"A HyperPod node is in the VPC: training-clusters connect {self.file} --node "
                    f"{hyperpod_groups[0]} opens a shell there (install kubectl and run this command on it)."
                )
            else:
                notes.append(
                    "For kubectl in the VPC, use an instance of your own in the cluster's private subnets with the "
                    "SSM agent and Session Manager permissions (aws ssm start-session --target i-...): EKS nodes "
                    "take no sessions."
                )
        return Connection(f"the EKS cluster {name}", (*argv, *self._profile()), notes=tuple(notes))

    # ----------------------------------------------------------------------------------------------
    # plumbing

    def _start_session(self, target: str) -> tuple[str, ...]:
        return ("aws", "ssm", "start-session", "--region", self.region, "--target", target, *self._profile())

    def _profile(self) -> tuple[str, ...]:
        return ("--profile", self.profile) if self.profile else ()

    def _output(self, key: str) -> str:
        if self._outputs is None:
            self._outputs = stack_outputs(self.clients.cloudformation, self.stack, self.region)
        if key not in self._outputs:
            raise ConfigurationError(
                f"{self.stack} has no output {key}: deployed from another version of the file or the library? "
                "Deploy it again"
            )
        return self._outputs[key]

    def _one(
        self, running: Sequence[str], *, what: str, seen: Sequence[str], single: bool
    ) -> tuple[str, tuple[str, ...]]:
        """The instance to connect to, and a note naming the others when any of several will do."""
        if not running:
            listed = f" (its nodes: {', '.join(seen)})" if seen else ""
            raise ConfigurationError(f"{self.stack}: no running node in {what}{listed}")
        if len(running) == 1:
            return running[0], ()
        if single:
            raise ConfigurationError(
                f"{self.stack}: {what} should have one node and {len(running)} are running "
                f"({', '.join(running)}); pick one with --node INSTANCE-ID"
            )
        others = ", ".join(running[1:])
        return running[0], (f"{len(running)} nodes are running; for another: --node {others}",)

    def _unknown(self, wanted: str, allowed: Sequence[str]) -> ConfigurationError:
        return ConfigurationError(
            f"{self.environment}: --node {excerpt(wanted)} is not a node of this environment; give one of "
            f"{', '.join(dict.fromkeys(allowed))}, or an instance id (i-...)"
        )


def _is_instance_id(text: str) -> bool:
    return INSTANCE_ID.fullmatch(text) is not None


def stack_outputs(cloudformation: Any, stack: str, region: str) -> dict[str, str]:
    """``{OutputKey: OutputValue}`` of the deployed ``stack``.

    :raises ConfigurationError: the stack does not exist (deploy it first).
    """
    try:
        (found,) = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        if _code(error) == "ValidationError":
            raise ConfigurationError(f"{stack} is not deployed in {region}: deploy it first") from None
        raise
    return {o["OutputKey"]: o["OutputValue"] for o in found.get("Outputs", [])}


def _code(error: ClientError) -> str:
    code: str = error.response.get("Error", {}).get("Code", "")
    return code


def note_lines(connection: Connection, *, prefix: str = "") -> list[str]:
    """The connection's notes wrapped to the console's width, each line starting with ``prefix``."""
    width = TABLE_WIDTH - len(prefix)
    return [
        prefix + line
        for note in connection.notes
        for line in textwrap.wrap(note, width, break_on_hyphens=False, break_long_words=False)
    ]


def open_connection(
    connection: Connection,
    say: Callable[[str], None],
    *,
    run: Callable[[Sequence[str]], int] = subprocess.call,
    which: Callable[[str], str | None] = shutil.which,
) -> int:
    """Run the connection's AWS CLI command with the terminal attached; return its exit status.

    :raises ConfigurationError: the AWS CLI (or, for a session, its Session Manager plugin) is not on ``PATH``.
    """
    if which("aws") is None:
        raise ConfigurationError(
            "the AWS CLI (aws) is not on PATH: install it, or print the command with --print"
        )
    if connection.opens_session and which("session-manager-plugin") is None:
        raise ConfigurationError(
            "session-manager-plugin is not on PATH: install the AWS CLI's Session Manager plugin, or use --print"
        )
    say(f"{connection.node}:")
    say(connection.shell)
    status = run(list(connection.command))
    for line in note_lines(connection):
        say(line)
    return status


def aws_reason(error: Exception, width: int) -> str:
    """What AWS said, on one line of at most ``width`` characters: a service error's code and message."""
    if isinstance(error, ClientError):
        detail = error.response.get("Error", {})
        reason = f"{detail.get('Code', '?')}: {detail.get('Message', '')}".rstrip(": ")
    else:
        reason = str(error)
    reason = " ".join(reason.split())
    return reason if len(reason) <= width else reason[: width - 3] + "..."
