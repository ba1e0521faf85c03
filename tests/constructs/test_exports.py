"""``from training_clusters.constructs import X`` works for every advertised name, without loading jsii early."""

from __future__ import annotations

import subprocess
import sys

import pytest

import training_clusters.constructs as package


@pytest.mark.parametrize("name", package.__all__)
def test_every_advertised_name_resolves(name: str) -> None:
    assert getattr(package, name).__name__ == name


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'TrainingNetwork2'"):
        package.TrainingNetwork2  # noqa: B018


def test_importing_the_package_does_not_start_jsii() -> None:
    code = "import sys, training_clusters.constructs, training_clusters.config; print('jsii' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


#: Modules a construct loads only when it needs them: the other orchestrators, RDS, EKS and its kubectl layer,
#: Lambda and Step Functions (CDK's providers), cdk-nag (the apps that check), the environment file's model
#: (pydantic) and the stacks.
HEAVY = (
    "aws_cdk.aws_eks",
    "aws_cdk.aws_eks_v2",
    "aws_cdk.aws_rds",
    "aws_cdk.aws_sagemaker",
    "aws_cdk.aws_pcs",
    "aws_cdk.lambda_layer_kubectl_v35",
    "aws_cdk.aws_lambda",
    "aws_cdk.aws_stepfunctions",
    "cdk_nag",
    "pydantic",
    "training_clusters.config",
    "training_clusters.stacks",
    "training_clusters.constructs.slurm.accounting",
    "training_clusters.constructs.eks.cluster",
    "training_clusters.constructs.eks.addons",
    "training_clusters.constructs.hyperpod.cluster",
    "training_clusters.constructs.parallelcluster.cluster",
    "training_clusters.constructs.pcs.cluster",
)


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(result.stdout.split())


@pytest.mark.parametrize(
    ("statement", "needed"),
    [
        ("from training_clusters.constructs import TrainingNetwork", ()),
        ("from training_clusters.constructs import SharedLustre", ()),
        (
            "from training_clusters.constructs import PcsCluster",
            ("aws_cdk.aws_pcs", "training_clusters.constructs.pcs.cluster"),
        ),
    ],
    ids=["TrainingNetwork", "SharedLustre", "PcsCluster"],
)
def test_a_construct_loads_no_other_orchestrator_nor_rds_eks_or_pydantic(
    statement: str, needed: tuple[str, ...]
) -> None:
    loaded = _loaded_after(statement)
    assert {module for module in HEAVY if module in loaded} == set(needed)


def test_the_network_storage_stack_loads_no_orchestrator_nor_rds() -> None:
    statement = "from training_clusters.stacks.base import TrainingEnvironmentStack"
    loaded = _loaded_after(statement)
    allowed = {"pydantic", "training_clusters.config", "training_clusters.stacks"}  # the environment file
    assert {module for module in HEAVY if module in loaded} == allowed
