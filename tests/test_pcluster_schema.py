"""Golden check: every configuration we emit passes AWS ParallelCluster 3.16's own schema, offline.

The schema runs in ``.venv-pcluster`` (``make bootstrap``); a missing environment fails these tests rather
than skipping them, so a green suite always means the schema was run.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager

from training_clusters.constructs.common.lustre import LustreDeploymentType
from training_clusters.constructs.parallelcluster.cluster import (
    ComputeResource,
    CustomActionScript,
    DirectoryService,
    HeadNode,
    LoginNodePool,
    ManagedLustre,
    OperatingSystem,
    QueuePlacement,
    SlurmQueue,
    SlurmSettings,
)
from training_clusters.constructs.slurm.accounting import SlurmAccountingDatabase
from training_clusters.model.capacity import Capacity
from training_clusters.stacks.parallelcluster import ParallelClusterEnvironment

from .conftest import CDK_CONTEXT, ROOT, EnvironmentGates, PinnedStack
from .constructs.test_parallelcluster import C5N, P5, T3, Parts
from .pcluster_schema import (
    PYTHON_ENV_VAR,
    SchemaUnavailable,
    schema_errors,
    schema_errors_many,
)

RESERVATION = "cr-0123456789abcdef0"
RESERVATION_GROUP = "arn:aws:resource-groups:us-east-1:111122223333:group/p5-reservations"


def _environment(file: str) -> Callable[[EnvironmentGates], dict[str, Any]]:
    def build(environments: EnvironmentGates) -> dict[str, Any]:
        stack, _ = environments.get(ROOT / "environments" / file)  # the session's own build of the file
        assert isinstance(stack, ParallelClusterEnvironment)
        return stack.cluster.concrete_configuration()

    return build


def _variant(**props: Any) -> Callable[[EnvironmentGates], dict[str, Any]]:
    def build(_: EnvironmentGates) -> dict[str, Any]:
        app = cdk.App(context=dict(CDK_CONTEXT))
        parts = Parts(PinnedStack(app, "Test", env=cdk.Environment(region="us-east-1")))
        resolved = {k: v(parts) if callable(v) else v for k, v in props.items()}
        return parts.cluster(**resolved).concrete_configuration()

    return build


def _script(parts: Parts, key: str = "pc/on-node-configured.sh") -> CustomActionScript:
    bucket = parts.stack.node.try_find_child("Scripts") or s3.Bucket.from_bucket_name(
        parts.stack, "Scripts", "my-scripts"
    )
    return CustomActionScript(bucket=bucket, key=key, args=["--verbose"])


EMITTED: dict[str, Callable[[EnvironmentGates], dict[str, Any]]] = {
    "environments/parallelcluster-c5n.yaml": _environment("parallelcluster-c5n.yaml"),
    "environments/parallelcluster-p5.yaml": _environment("parallelcluster-p5.yaml"),
    "environments/parallelcluster-p5-capacity-block.yaml": _environment(
        "parallelcluster-p5-capacity-block.yaml"
    ),
    "environments/parallelcluster-team.yaml": _environment("parallelcluster-team.yaml"),
    "reservations: targeted, open, resource group, per compute resource, gpu check off": _variant(
        queues=[
            SlurmQueue(name="odcr", compute_resources=[P5], capacity=Capacity.reservation(RESERVATION)),
            SlurmQueue(
                name="open",
                compute_resources=[P5],
                capacity=Capacity.reservation(RESERVATION, targeted=False),
            ),
            SlurmQueue(
                name="group",
                compute_resources=[P5],
                capacity=Capacity.reservation(resource_group_arn=RESERVATION_GROUP),
            ),
            SlurmQueue(
                name="mixed",
                compute_resources=[
                    ComputeResource(
                        name="p5",
                        instance_type="p5.48xlarge",
                        capacity=Capacity.reservation(RESERVATION),
                        gpu_health_check=False,
                    ),
                    C5N,
                ],
            ),
            SlurmQueue(
                name="block",
                compute_resources=[
                    ComputeResource(
                        name="p5",
                        instance_type="p5.48xlarge",
                        min_count=1,
                        max_count=1,
                        capacity=Capacity.capacity_block(RESERVATION),
                    )
                ],
            ),
        ]
    ),
    "gpu and cpu queues": _variant(
        queues=[
            SlurmQueue(name="gpu", compute_resources=[P5]),
            SlurmQueue(name="cpu", compute_resources=[T3], capacity=Capacity.spot()),
        ]
    ),
    "key pair and prefix list": _variant(head_node=HeadNode(key_name="ops", ssh_allowed_ips="pl-0123abcd")),
    "managed fsx persistent_2": _variant(
        file_system=None,
        managed_file_system=ManagedLustre(
            deployment_type=LustreDeploymentType.PERSISTENT_2,
            storage_capacity_gib=2400,
            per_unit_storage_throughput_mbps=500,
        ),
        mount_dir="/fsx",
    ),
    "managed placement, no storage, ubuntu, script": _variant(
        queues=[
            SlurmQueue(
                name="compute",
                compute_resources=[
                    C5N,
                    ComputeResource(
                        name="c5n18", instance_type="c5n.18xlarge", disable_simultaneous_multithreading=True
                    ),
                ],
                placement=QueuePlacement.MANAGED,
            )
        ],
        file_system=None,
        os=OperatingSystem.UBUNTU2404,
        on_node_configured=_script,
        tags={"team": "ml"},
    ),
    "team: accounting, login pool, action sequences, custom AMIs, exclusive queue, slurm settings": _variant(
        slurm_settings=lambda p: SlurmSettings(
            database=SlurmAccountingDatabase(p.stack, "Accounting", vpc=p.network.vpc),
            custom_slurm_settings=[
                {"PriorityType": "priority/multifactor"},
                {"PriorityWeightFairshare": "10000"},
            ],
        ),
        custom_ami="ami-0123456789abcdef0",
        on_node_configured=lambda p: [_script(p), _script(p, "pc/pyxis.sh")],
        head_node=lambda p: HeadNode(
            custom_ami="ami-0123456789abcdef1",
            on_node_start=[_script(p, "pc/head-start.sh")],
            on_node_configured=[_script(p, "pc/head-1.sh"), _script(p, "pc/head-2.sh")],
        ),
        queues=lambda p: [
            SlurmQueue(
                name="compute",
                compute_resources=[C5N],
                custom_ami="ami-0123456789abcdef2",
                job_exclusive_allocation=True,
                on_node_start=[_script(p, "pc/queue-start-1.sh"), _script(p, "pc/queue-start-2.sh")],
            )
        ],
        login_nodes=lambda p: [
            LoginNodePool(
                name="login",
                count=2,
                custom_ami="ami-0123456789abcdef3",
                gracetime_period_minutes=30,
                on_node_start=[_script(p, "pc/login-start.sh")],
            )
        ],
    ),
    "directory service instead of local users": _variant(
        directory_service=lambda p: DirectoryService(
            domain_name="corp.example.com",
            domain_addr="ldaps://corp.example.com",
            password_secret=secretsmanager.Secret(p.stack, "AdPassword"),
            domain_read_only_user="cn=ReadOnly,ou=Users,dc=corp,dc=example,dc=com",
            ldap_tls_ca_cert="/etc/openldap/cacerts/corp.pem",
            ldap_tls_req_cert="hard",
            ldap_access_filter="memberOf=cn=ml,ou=Groups,dc=corp,dc=example,dc=com",
            additional_sssd_configs={"debug_level": "0x1ff"},
        ),
    ),
}


def _broken(configuration: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(configuration)
    broken["Image"]["Os"] = "alinux2"
    broken["HeadNode"]["Networking"]["SubnetId"] = "${Token[TOKEN.123]}"
    broken["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["Efa"]["Enabled"] = "maybe"
    broken["HeadNode"]["KeyPair"] = "ops"
    return broken


BROKEN = "a broken copy of environments/parallelcluster-c5n.yaml"


@pytest.fixture(scope="module")
def schema_results(environment_gates: EnvironmentGates) -> dict[str, list[str]]:
    """Every emitted configuration and one broken on purpose, through the schema in one subprocess."""
    configurations = {name: build(environment_gates) for name, build in EMITTED.items()}
    configurations[BROKEN] = _broken(configurations["environments/parallelcluster-c5n.yaml"])
    results = schema_errors_many(list(configurations.values()))
    return dict(zip(configurations, results, strict=True))


def test_every_emitted_configuration_passes_parallelclusters_schema(
    schema_results: dict[str, list[str]],
) -> None:
    problems = {name: errors for name, errors in schema_results.items() if errors and name != BROKEN}
    assert problems == {}


def test_a_broken_configuration_fails_the_schema(schema_results: dict[str, list[str]]) -> None:
    assert sorted(schema_results[BROKEN]) == [
        "HeadNode.KeyPair: Unknown field.",
        "HeadNode.Networking.SubnetId: String does not match expected pattern.",
        "Image.Os: Must be one of: alinux2023, ubuntu2204, ubuntu2404, rhel8, rocky8, rhel9, rocky9.",
        "Scheduling.SlurmQueues.0.ComputeResources.0.Efa.Enabled: Not a valid boolean.",
    ]


def test_missing_schema_environment_is_a_failure_that_says_what_to_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(PYTHON_ENV_VAR, str(tmp_path / "missing" / "bin" / "python"))
    with pytest.raises(SchemaUnavailable) as error:
        schema_errors({"Image": {"Os": "alinux2023"}})
    assert "run `make bootstrap`" in str(error.value)
