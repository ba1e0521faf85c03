"""The rules of API-driven HyperPod Slurm (``training_clusters.rules.hyperpod``): each message, both sides of
each boundary. The API's shapes: ClusterFsxLustreConfig and ClusterAccountingDatabase
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterFsxLustreConfig.html,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterAccountingDatabase.html)."""

from __future__ import annotations

import pytest

from training_clusters.rules.hyperpod import (
    accounting_database_name_problem,
    api_accounting_problem,
    continuous_slurm_problem,
    fsx_lustre_dns_name_problem,
    slurm_config_strategy_problem,
)

LEGACY_STRATEGY = (
    "applies to slurm_config api only (it governs the instance groups' SlurmConfig, which legacy clusters do "
    "not have), got Merge with slurm_config legacy"
)
CONTINUOUS_STRATEGY = (
    "must be left out with node_provisioning_mode Continuous: HyperPod rejects any SlurmConfigStrategy there "
    "and merges edits made on the controller, got Merge"
)


@pytest.mark.parametrize(
    ("strategy", "api", "continuous", "problem"),
    [
        (None, True, False, None),
        (None, True, True, None),
        (None, False, False, None),
        ("Merge", True, False, None),
        ("Merge", False, False, LEGACY_STRATEGY),
        ("Merge", False, True, LEGACY_STRATEGY),
        ("Merge", True, True, CONTINUOUS_STRATEGY),
    ],
)
def test_the_strategy_goes_with_api_and_without_continuous_provisioning(
    strategy: str | None, api: bool, continuous: bool, problem: str | None
) -> None:
    assert slurm_config_strategy_problem(strategy, api, continuous) == problem


@pytest.mark.parametrize(
    ("api", "continuous", "refused"),
    [(True, True, False), (True, False, False), (False, False, False), (False, True, True)],
)
def test_continuous_provisioning_needs_api(api: bool, continuous: bool, refused: bool) -> None:
    problem = continuous_slurm_problem(api, continuous)
    assert problem == (
        "Continuous needs slurm_config api: HyperPod's continuous provisioning on Slurm requires each instance "
        "group's SlurmConfig and cannot read provisioning_parameters.json, got slurm_config legacy"
        if refused
        else None
    )


@pytest.mark.parametrize(
    ("accounting", "api", "continuous", "refused"),
    [
        ("external", True, False, True),
        ("external", True, True, False),
        ("external", False, False, False),
        ("local", True, False, False),
        ("none", True, False, False),
    ],
)
def test_an_external_database_with_api_needs_continuous_provisioning(
    accounting: str, api: bool, continuous: bool, refused: bool
) -> None:
    problem = api_accounting_problem(accounting, api, continuous)
    assert (problem is not None) == refused
    if refused:
        assert problem == (
            "external with slurm_config api needs node_provisioning_mode continuous: HyperPod connects its slurmdbd "
            "to an external database (AccountingDatabase) only under continuous provisioning; set slurm_config "
            "legacy to keep the lifecycle scripts' slurmdbd on the controller, got external without continuous "
            "provisioning"
        )


FSX = (
    "must be an FSx for Lustre DNS name such as fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com (HyperPod's "
    "FsxLustreConfig.DnsName), got "
)


LONGEST = "fs-" + "0" * 19 + "." + "a" * 252  # 275 characters, the API's maximum


@pytest.mark.parametrize(
    ("dns_name", "problem"),
    [
        ("fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", None),
        ("fs-0123456789abcdef0.fsx.cn-north-1.amazonaws.com.cn", None),
        ("fci-01234567.fsxx", None),
        ("fs-01234567.fsxx", None),  # 8 hex digits, 4 characters after the dot: the shortest (16)
        ("fs-0123456.fsxx", FSX + "'fs-0123456.fsxx'"),  # 7 hex digits
        ("fs-01234567.fsx", FSX + "'fs-01234567.fsx'"),  # 3 characters after the dot
        ("fx-01234567.fsx", FSX + "'fx-01234567.fsx'"),
        ("lustre.example.com", FSX + "'lustre.example.com'"),
        (LONGEST, None),
    ],
)
def test_fsx_dns_names_hyperpod_takes(dns_name: str, problem: str | None) -> None:
    assert fsx_lustre_dns_name_problem(dns_name) == problem


def test_an_fsx_dns_name_one_past_the_maximum_is_refused() -> None:
    problem = fsx_lustre_dns_name_problem(LONGEST + "a")
    assert problem is not None
    assert problem.startswith(FSX)


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("slurm_acct_db", True),
        ("acct$db", True),
        ("a" * 64, True),
        ("a" * 65, False),
        ("", False),
        ("slurm-db", False),
    ],
)
def test_accounting_database_names(name: str, ok: bool) -> None:
    problem = accounting_database_name_problem(name)
    if ok:
        assert problem is None
    else:
        assert problem is not None
        assert problem.startswith(
            "must be 1-64 letters, digits, '$' or '_' (HyperPod's AccountingDatabase.Name), got "
        )
