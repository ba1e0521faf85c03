"""A scripted sample of one-line bugs in the constructs and the node-side shell scripts, each run against the
tests that own that code: the kill rate of the suite where ``make mutation`` (CDK-free modules) cannot reach.

Each mutant replaces one exact piece of one line (it must occur once in its file), as a reviewer would plant a
bug: an IAM action removed, a resource widened to ``*``, a condition dropped, a security group rule dropped or
its port swapped, a secure default turned off, ``set -e`` removed, a failure swallowed with ``|| true``. The
script plants each in a copy of the repository of its own (the work tree is never changed; ``--jobs`` copies
test mutants side by side), runs its tests (``pytest -x``: the construct's mirror test file, narrowed with ``-k``
to the tests about that part, or the test modules that drive the script), and reports killed or survived.

    python benchmarks/construct_mutants.py                 # every mutant, two at a time
    python benchmarks/construct_mutants.py lustre imds     # the mutants whose name holds one of the words
    python benchmarks/construct_mutants.py --list

It refuses a mutant whose text is not in its file exactly once (the list is stale). Exits 1 when the kill rate
is below 90 %.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "training_clusters"
ACTIONS = "tests/parallelcluster_actions/test_actions.py"
RUNS = "tests/lifecycle/test_lifecycle_runs.py"
#: The failures these scripts' own test modules did not drive (a restart, useradd, the mount wait, a keys line).
FAILURES_MORE = "tests/lifecycle/test_lifecycle_command_failures.py"
#: The hyperpod tests that look at the execution role (its statements, its cdk-nag findings).
HYPERPOD_ROLE = "role or polic or gates"


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to training_clusters/
    old: str
    new: str
    tests: tuple[str, ...]


#: The tests of a construct's mirror file that are about the part a mutant changes (``pytest -k``): the gates
#: (cdk-nag, cfn-lint of a gated stack) are left out where a test asserts the part itself.
NARROWED = {
    "accounting-secret-read-widened": "secret or role",
    "pcs-register-widened": "instance_profile",
    "release-manifest-describe-cluster-widened": "mpi_operator_handler",
    "parallelcluster-s3-read-widened": "custom_action or polic",
    "lustre-server-self-ingress-dropped": "ports",
    "lustre-server-self-egress-dropped": "ports",
    "lustre-port-swapped": "ports",
    "lustre-client-ports-narrowed": "ports",
    "lustre-clients-reply-rule-dropped": "ports",
    "efa-self-egress-dropped": "efa_security_group",
    "endpoint-https-port-swapped": "endpoint",
    "endpoint-https-from-anywhere": "endpoint",
    "pcs-slurmd-port-swapped": "talk_slurm",
    "pcs-srun-ports-rule-dropped": "talk_slurm",
    "imdsv2-optional": "imdsv2",
    "imds-hop-limit-default-raised": "imdsv2 or hop_limit",
    "flow-logs-retention-default-changed": "flow_logs or default_network",
    "lustre-removal-default-destroy": "retained",
    "bucket-removal-default-destroy": "retained",
    "bucket-ssl-not-enforced": "private_encrypted",
    "accounting-key-rotation-off": "encrypted",
    "accounting-storage-unencrypted": "encrypted",
    "accounting-deletion-protection-inverted": "destroy or retained",
    "eks-secrets-key-rotation-off": "private_encrypted or cdk_nag",
}


#: Construct modules (or, ending in ``/``, folders) whose test file is named after the module's old flat name
#: (``constructs/<name>.py``).
MIRRORS = {
    "hyperpod/cluster.py": "hyperpod",
    "hyperpod_eks/cluster.py": "hyperpod_eks",
    "pcs/cluster.py": "pcs",
    "parallelcluster/cluster.py": "parallelcluster",
    "eks/cluster.py": "eks_gpu",
    "eks/addons/": "eks_addons",
    "eks/scheduling.py": "eks_jobs",
    "eks/release_manifest.py": "eks_release_manifest",
}


def _mirror(path: str) -> str:
    """The mirror test file of the construct module ``path`` (relative to ``constructs/``)."""
    for home, name in MIRRORS.items():
        if path == home or (home.endswith("/") and path.startswith(home)):
            return f"tests/constructs/test_{name}.py"
    return f"tests/constructs/test_{Path(path).stem}.py"


def _construct(name: str, path: str, old: str, new: str, *tests: str, k: str | None = None) -> Mutant:
    """A construct's mutant, run against its mirror test file (or ``tests``), narrowed to ``-k`` when given."""
    mirror = _mirror(path)
    k = k or NARROWED.get(name)
    return Mutant(name, f"constructs/{path}", old, new, (*(tests or (mirror,)), *(("-k", k) if k else ())))


def _script(name: str, path: str, old: str, new: str, *tests: str) -> Mutant:
    """A node-side script's mutant, run against the lifecycle test modules that drive it (or ``tests``)."""
    return Mutant(name, path, old, new, tests)


MUTANTS: tuple[Mutant, ...] = (
    # --- IAM: an action removed, a resource widened, a condition dropped
    _construct(
        "hyperpod-eni-delete-action-removed",
        "hyperpod/cluster.py",
        '                    "ec2:DeleteNetworkInterface",\n',
        "",
        k=HYPERPOD_ROLE,
    ),
    _construct(
        "hyperpod-eni-resources-widened",
        "hyperpod/cluster.py",
        "                resources=[\n                    eni_arn,\n",
        '                resources=[\n                    "*",\n',
        k=HYPERPOD_ROLE,
    ),
    _construct(
        "hyperpod-create-tags-condition-dropped",
        "hyperpod/cluster.py",
        '                conditions={"StringEquals": {"ec2:CreateAction": "CreateNetworkInterface"}},\n',
        "",
        k=HYPERPOD_ROLE,
    ),
    _construct(
        "hyperpod-metrics-namespace-condition-dropped",
        "hyperpod/cluster.py",
        '            conditions={"StringEquals": {"cloudwatch:namespace": CLUSTER_METRICS_NAMESPACE}},\n',
        "",
        k=HYPERPOD_ROLE,
    ),
    _construct(
        "hyperpod-log-streams-widened",
        "hyperpod/cluster.py",
        'resources=[f"{log_group}:log-stream:*"]',
        'resources=["*"]',
        k=HYPERPOD_ROLE,
    ),
    _construct(
        "hyperpod-lifecycle-read-widened-to-bucket",
        "hyperpod/cluster.py",
        'self.bucket.grant_read(role, f"{self.lifecycle_prefix}*")',
        "self.bucket.grant_read(role)",
        k=HYPERPOD_ROLE,
    ),
    _construct(
        "hyperpod-volume-key-create-grant-removed",
        "hyperpod/cluster.py",
        'actions=["kms:CreateGrant", "kms:DescribeKey"]',
        'actions=["kms:DescribeKey"]',
        k=HYPERPOD_ROLE,
    ),
    _construct(
        "accounting-secret-read-widened",
        "slurm/accounting.py",
        'iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[self.secret.secret_arn])',
        'iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=["*"])',
    ),
    _construct(
        "pcs-register-widened",
        "pcs/cluster.py",
        'actions=["pcs:RegisterComputeNodeGroupInstance"], resources=[self.cluster_arn]',
        'actions=["pcs:RegisterComputeNodeGroupInstance"], resources=["*"]',
    ),
    _construct(
        "release-manifest-describe-cluster-widened",
        "eks/release_manifest.py",
        'iam.PolicyStatement(actions=["eks:DescribeCluster"], resources=[eks_cluster.cluster_arn])',
        'iam.PolicyStatement(actions=["eks:DescribeCluster"], resources=["*"])',
        "tests/constructs/test_eks_addons.py",
        "tests/handlers/test_release_manifest.py",
    ),
    _construct(
        "fsx-csi-controller-actions-widened",
        "eks/addons/fsx_csi_driver.py",
        'iam.PolicyStatement(actions=["fsx:DescribeFileSystems"], resources=["*"])',
        'iam.PolicyStatement(actions=["fsx:Describe*"], resources=["*"])',
        k="fsx_csi",
    ),
    _construct(
        "csi-controllers-off-the-system-nodes",
        "eks/addons/managed_addon.py",
        '{"controller": system_placement()}',
        '{"controller": {}}',
        "tests/constructs/test_fsx_team_volumes.py",
        k="system_nodes",
    ),
    _construct(
        "parallelcluster-s3-read-widened",
        "parallelcluster/cluster.py",
        'statements=[iam.PolicyStatement(actions=["s3:GetObject"], resources=resources)]',
        'statements=[iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"])]',
    ),
    # --- security groups: a rule dropped, a port swapped, a peer widened
    _construct(
        "lustre-server-self-ingress-dropped",
        "common/lustre.py",
        '            group.add_ingress_rule(group, port, f"Lustre {what} between file servers")\n',
        "",
    ),
    _construct(
        "lustre-server-self-egress-dropped",
        "common/lustre.py",
        '            group.add_egress_rule(group, port, f"Lustre {what} between file servers")\n',
        "",
    ),
    _construct("lustre-port-swapped", "common/lustre.py", "ec2.Port.tcp(988)", "ec2.Port.tcp(989)"),
    _construct(
        "lustre-client-ports-narrowed",
        "common/lustre.py",
        "ec2.Port.tcp_range(1018, 1023)",
        "ec2.Port.tcp_range(1018, 1022)",
    ),
    _construct(
        "lustre-clients-reply-rule-dropped",
        "common/lustre.py",
        '            self.connections.allow_to(clients, port, f"Lustre {what} to clients")\n',
        "",
    ),
    _construct(
        "efa-self-egress-dropped",
        "private/security_groups.py",
        "        group.add_egress_rule(group, ec2.Port.all_traffic(), outbound)\n",
        "        pass\n",
        "tests/constructs/test_network.py",
    ),
    _construct(
        "endpoint-https-port-swapped",
        "common/network.py",
        '            ec2.Port.tcp(443),\n            "HTTPS from the VPC",',
        '            ec2.Port.tcp(80),\n            "HTTPS from the VPC",',
    ),
    _construct(
        "endpoint-https-from-anywhere",
        "common/network.py",
        "            ec2.Peer.ipv4(cidr),\n",
        "            ec2.Peer.any_ipv4(),\n",
    ),
    _construct(
        "pcs-slurmd-port-swapped",
        "pcs/cluster.py",
        'node_connections.allow_from(controller, ec2.Port.tcp(SLURMD_PORT), "slurmd from slurmctld")',
        'node_connections.allow_from(controller, ec2.Port.tcp(SLURMCTLD_PORT), "slurmd from slurmctld")',
    ),
    _construct(
        "pcs-srun-ports-rule-dropped",
        "pcs/cluster.py",
        'controller, ec2.Port.tcp_range(*SRUN_PORTS), "slurmctld to srun on the nodes (interactive steps)"',
        'controller, ec2.Port.tcp(SRUN_PORTS[0]), "slurmctld to srun on the nodes (interactive steps)"',
    ),
    # --- secure and data-keeping defaults
    _construct(
        "imdsv2-optional",
        "private/launch_template.py",
        'http_endpoint="enabled", http_tokens="required"',
        'http_endpoint="enabled", http_tokens="optional"',
        "tests/constructs/test_eks_gpu.py",
        "tests/constructs/test_pcs.py",
    ),
    _construct(
        "imds-hop-limit-default-raised",
        "private/launch_template.py",
        "IMDS_HOP_LIMIT = 1",
        "IMDS_HOP_LIMIT = 2",
        "tests/constructs/test_eks_gpu.py",
    ),
    _construct(
        "flow-logs-retention-default-changed",
        "common/network.py",
        "flow_logs_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,",
        "flow_logs_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,",
        "tests/constructs/test_network.py",
        "tests/constructs/test_documented_defaults.py",
    ),
    _construct(
        "lustre-removal-default-destroy",
        "common/lustre.py",
        "removal_policy: cdk.RemovalPolicy | RemovalPolicy | str = cdk.RemovalPolicy.RETAIN,",
        "removal_policy: cdk.RemovalPolicy | RemovalPolicy | str = cdk.RemovalPolicy.DESTROY,",
    ),
    _construct(
        "bucket-removal-default-destroy",
        "common/bucket.py",
        "removal_policy: cdk.RemovalPolicy | RemovalPolicy | str = cdk.RemovalPolicy.RETAIN,",
        "removal_policy: cdk.RemovalPolicy | RemovalPolicy | str = cdk.RemovalPolicy.DESTROY,",
    ),
    _construct(
        "bucket-ssl-not-enforced",
        "common/bucket.py",
        "            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,\n            enforce_ssl=True,\n            encryption=s3.BucketEncryption.KMS",
        "            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,\n            enforce_ssl=False,\n            encryption=s3.BucketEncryption.KMS",
    ),
    _construct(
        "accounting-key-rotation-off",
        "slurm/accounting.py",
        "            enable_key_rotation=True,",
        "            enable_key_rotation=False,",
    ),
    _construct(
        "accounting-storage-unencrypted",
        "slurm/accounting.py",
        "            storage_encrypted=True,",
        "            storage_encrypted=False,",
    ),
    _construct(
        "accounting-deletion-protection-inverted",
        "slurm/accounting.py",
        "protect = removal != cdk.RemovalPolicy.DESTROY if",
        "protect = removal == cdk.RemovalPolicy.DESTROY if",
    ),
    _construct(
        "eks-secrets-key-rotation-off",
        "eks/cluster.py",
        "            enable_key_rotation=True,",
        "            enable_key_rotation=False,",
    ),
    # --- lifecycle scripts (HyperPod): errexit, swallowed failures, a check inverted
    _script(
        "on-create-errexit-removed",
        "node_scripts/hyperpod/on_create.sh",
        "set -euo pipefail\n",
        "set -uo pipefail\n",
        RUNS,
    ),
    _script(
        "on-exit-reports-success",
        "node_scripts/hyperpod/lib/common.sh",
        '        tc_error "FAILED step \'${TC_CURRENT_STEP:-on_create}\' (exit ${rc})"\n    fi\n    exit "$rc"',
        "        tc_error \"FAILED step '${TC_CURRENT_STEP:-on_create}' (exit ${rc})\"\n    fi\n    exit 0",
        RUNS,
    ),
    _script(
        "apt-update-failure-swallowed",
        "node_scripts/hyperpod/lib/apt.sh",
        "tc_apt_update() {\n    apt_get update\n}",
        "tc_apt_update() {\n    apt_get update || true\n}",
        "tests/lifecycle/test_lifecycle_apt.py",
    ),
    _script(
        "mount-failure-swallowed",
        "node_scripts/hyperpod/lib/fsx.sh",
        '            mount -t lustre -o noatime,flock -- "$source" "$rooted"\n',
        '            mount -t lustre -o noatime,flock -- "$source" "$rooted" || true\n',
        "tests/lifecycle/test_lifecycle_node.py",
        RUNS,
    ),
    _script(
        "mount-not-waited-for",
        "node_scripts/hyperpod/lib/fsx.sh",
        '    tc_wait_writable "$rooted"\n}',
        '    tc_wait_writable "$rooted" || true\n}',
        "tests/lifecycle/test_lifecycle_node.py",
        RUNS,
        FAILURES_MORE,
    ),
    # --- the team's users (node_scripts/shared/users.sh, one script for both services): each account tool's
    # failure swallowed, killed on HyperPod's lifecycle (on_create.sh) and ParallelCluster's custom action alike
    _script(
        "groupadd-failure-swallowed",
        "node_scripts/shared/users.sh",
        '    groupadd --gid "$gid" "$name"\n',
        '    groupadd --gid "$gid" "$name" || true\n',
        FAILURES_MORE,
        ACTIONS,
    ),
    _script(
        "useradd-failure-swallowed",
        "node_scripts/shared/users.sh",
        '        --comment "training-clusters team user" "$name"\n',
        '        --comment "training-clusters team user" "$name" || true\n',
        FAILURES_MORE,
        ACTIONS,
    ),
    _script(
        "usermod-failure-swallowed",
        "node_scripts/shared/users.sh",
        '    usermod --append --groups "$group" "$name"\n',
        '    usermod --append --groups "$group" "$name" || true\n',
        FAILURES_MORE,
        ACTIONS,
    ),
    _script(
        "ssh-keygen-failure-swallowed",
        "node_scripts/shared/users.sh",
        '            die "could not generate the cluster key pair of ${name} in ${home}/.ssh as ${name}"\n',
        "            true\n",
        FAILURES_MORE,
        ACTIONS,
    ),
    _script(
        "existing-user-with-other-uid-accepted",
        "node_scripts/shared/users.sh",
        '        [[ $found_uid == "$uid" ]] ||\n',
        '        [[ $found_uid == "$uid" ]] || true ||\n',
        "tests/lifecycle/test_lifecycle_team.py",
        ACTIONS,
    ),
    _script(
        "unknown-role-accepted",
        "node_scripts/hyperpod/lib/slurm.sh",
        "            tc_error \"unknown role '${TC_ROLE}'\"\n            return 1",
        "            tc_error \"unknown role '${TC_ROLE}'\"\n            return 0",
        "tests/lifecycle/test_lifecycle_roles.py",
        "tests/lifecycle/test_lifecycle_slurm.py",
    ),
    _script(
        "slurmctld-restart-failure-swallowed",
        "node_scripts/hyperpod/lib/slurm.sh",
        "        systemctl restart slurmctld\n",
        "        systemctl restart slurmctld || true\n",
        "tests/lifecycle/test_lifecycle_slurm.py",
        FAILURES_MORE,
    ),
    _script(
        "imds-guard-reject-dropped",
        "node_scripts/shared/training-clusters-imds.sh",
        '    "$iptables" -w -A "$CHAIN" -j REJECT\n',
        "",
        "tests/lifecycle/test_lifecycle_team.py",
    ),
    _script(
        "slurm-keys-bad-line-accepted",
        "node_scripts/hyperpod/node/training-clusters-slurm-keys.sh",
        "got '${file} ${key} ${value}'\" >&2\n            exit 1",
        "got '${file} ${key} ${value}'\" >&2\n            continue",
        "tests/lifecycle/test_lifecycle_slurm.py",
        FAILURES_MORE,
    ),
    _script(
        "docker-data-root-check-swallowed",
        "node_scripts/hyperpod/lib/docker.sh",
        "    [[ -n $data_root ]] || return 1",
        "    [[ -n $data_root ]] || return 0",
        "tests/lifecycle/test_lifecycle_containers.py",
        FAILURES_MORE,
    ),
    # --- what mutmut 3 does not mutate (decorated functions: pydantic validators, properties), CDK-free
    Mutant(
        "config-lustre-backups-check-dropped",
        "config/storage.py",
        "        problem = lustre_backup_retention_problem(self.deployment_type, self.backup_retention_days)\n        if problem:",
        "        problem = lustre_backup_retention_problem(self.deployment_type, self.backup_retention_days)\n        if False:",
        ("tests/test_bad_inputs.py", "tests/test_config.py", "-k", "not build-"),
    ),
    Mutant(
        "config-pcluster-min-count-field-dropped",
        "config/parallelcluster.py",
        '_raise_if(pcluster_rules.min_count_problem(self.min_count, self.max_count), "min_count")',
        "_raise_if(pcluster_rules.min_count_problem(self.min_count, self.max_count))",
        ("tests/test_bad_inputs.py", "tests/test_config.py", "-k", "not build-"),
    ),
    Mutant(
        "config-hyperpod-nodes-not-counted",
        "config/hyperpod.py",
        '            [(f"instance_groups.{i}.count", g.count) for i, g in enumerate(self.instance_groups)]',
        '            [(f"instance_groups.{i}.count", 1) for i, g in enumerate(self.instance_groups)]',
        ("tests/test_bad_inputs.py", "tests/test_config.py", "-k", "not build-"),
    ),
    Mutant(
        "capacity-training-plan-not-reserved",
        "model/capacity.py",
        "            CapacityKind.CAPACITY_BLOCK,\n            CapacityKind.TRAINING_PLAN,\n        )",
        "            CapacityKind.CAPACITY_BLOCK,\n        )",
        ("tests/test_capacity.py", "tests/test_options_boundaries.py"),
    ),
    Mutant(
        "catalog-efa-from-zero-interfaces",
        "catalog/__init__.py",
        "        return self.max_efa_interfaces > 0",
        "        return self.max_efa_interfaces >= 0",
        ("tests/test_catalog.py",),
    ),
    # --- ParallelCluster custom actions
    _script(
        "users-errexit-removed",
        "node_scripts/shared/users.sh",
        "set -euo pipefail\n",
        "set -uo pipefail\n",
        FAILURES_MORE,
        ACTIONS,
    ),
    _script(
        "users-die-succeeds",
        "node_scripts/shared/users.sh",
        '    echo "users.sh: error: $*" >&2\n    exit 1',
        '    echo "users.sh: error: $*" >&2\n    exit 0',
        "tests/lifecycle/test_lifecycle_team.py",
        ACTIONS,
    ),
    _script(
        "pcluster-pyxis-die-succeeds",
        "node_scripts/parallelcluster/pyxis.sh",
        '    echo "pyxis.sh: error: $*" >&2\n    exit 1',
        '    echo "pyxis.sh: error: $*" >&2\n    exit 0',
        ACTIONS,
    ),
)


#: What a worker's copy of the repository holds: the package, the tests and what they read from the root.
COPIED = (
    "training_clusters",
    "tests",
    "environments",
    "docs",
    "cdk.json",
    "pyproject.toml",
    "package.json",
    "app.py",
)
#: Large or generated folders a copy links to instead.
LINKED = ("node_modules", ".venv-pcluster", ".venv-checkov", ".cache")


def make_copy(directory: Path) -> Path:
    """A copy of the repository to mutate in ``directory``: each worker plants its bugs in its own copy, so
    the work tree is never changed and workers do not see each other's bugs (``python -m pytest`` run from the
    copy imports the copy's package, first on ``sys.path``)."""
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, directory / name, ignore=shutil.ignore_patterns("__pycache__", "cdk.out"))
        elif source.exists():
            shutil.copy2(source, directory / name)
    for name in LINKED:
        if (ROOT / name).exists():
            (directory / name).symlink_to(ROOT / name)
    return directory


def run(mutant: Mutant, root: Path) -> tuple[bool, float, str]:
    """(killed, seconds, the last line pytest printed) of ``mutant`` planted in the copy at ``root``."""
    path = root / "training_clusters" / mutant.path
    original = path.read_text()
    path.write_text(original.replace(mutant.old, mutant.new))
    started = time.monotonic()
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutant.tests],
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as process:
            RUNNING.add(process)
            stdout, stderr = process.communicate()
            RUNNING.discard(process)
    finally:
        path.write_text(original)
    lines = [line for line in stdout.splitlines() if line.strip()]
    # 1: a test failed. Anything else but 0 (an error while collecting, no test run) is not a kill.
    return process.returncode == 1, time.monotonic() - started, lines[-1] if lines else stderr[-200:]


#: The pytest processes running now: ended when this script is (SIGTERM, Ctrl-C).
RUNNING: set[subprocess.Popen[str]] = set()


def _stop(*_: object) -> None:
    for process in list(RUNNING):
        process.kill()
    raise SystemExit(143)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("words", nargs="*", help="run only the mutants whose name holds one of these")
    parser.add_argument("--list", action="store_true", help="list the mutants and their tests")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once, each in its own copy")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.words or any(w in m.name for w in args.words)]
    for mutant in chosen:  # refuse a stale mutant before running anything
        text = (PACKAGE / mutant.path).read_text()
        if text.count(mutant.old) != 1:
            raise SystemExit(
                f"{mutant.name}: its text occurs {text.count(mutant.old)} times in {mutant.path}"
            )
    if args.list:
        for mutant in chosen:
            print(f"{mutant.name:<48} {mutant.path:<52} {' '.join(mutant.tests)}")
        return 0
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    started = time.monotonic()
    results: list[bool] = []
    with tempfile.TemporaryDirectory(prefix="construct-mutants-") as scratch:
        copies: queue.Queue[Path] = queue.Queue()
        for index in range(max(1, args.jobs)):
            copies.put(make_copy(Path(scratch) / str(index)))

        def test(mutant: Mutant) -> bool:
            root = copies.get()
            try:
                killed, seconds, last = run(mutant, root)
            finally:
                copies.put(root)
            print(
                f"{'killed  ' if killed else 'SURVIVED'} {mutant.name:<48} {seconds:6.1f} s  {last}",
                flush=True,
            )
            return killed

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(test, chosen))
    killed = sum(results)
    rate = 100.0 * killed / len(chosen) if chosen else 0.0
    print(f"{killed} of {len(chosen)} killed: {rate:.1f}% in {(time.monotonic() - started) / 60:.1f} min")
    return 0 if rate >= 90 else 1


if __name__ == "__main__":
    sys.exit(main())
