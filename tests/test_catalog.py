"""The instance-type catalogue: lookups, their error messages, and the facts other modules rely on."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from training_clusters import catalog as catalog_module
from training_clusters.catalog import (
    CATALOG,
    AcceleratorKind,
    Architecture,
    InstanceType,
    QuotaFamily,
    all_instance_types,
    from_row,
    lookup,
    lookup_hyperpod,
    to_row,
)
from training_clusters.model.errors import ConfigurationError

from .conftest import _await_up_front_synths

NOT_CATALOGUED = (
    "is not in the catalogue (`training-clusters catalog` lists its types); give its facts with "
    "training_clusters.catalog.register_instance_type(...) first"
)
NO_PREFIX = "instance_type: HyperPod instance types start with 'ml.', got "
NOT_ON_HYPERPOD = (
    "is not offered by SageMaker HyperPod (`training-clusters catalog` lists the types it offers)"
)

REQUIRED_TYPES = [
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p6-b200.48xlarge",
    "trn1.32xlarge",
    "trn1n.32xlarge",
    "trn2.48xlarge",
    "g6e.48xlarge",
    "g5.xlarge",
    "g5.2xlarge",
    "g5.8xlarge",
    "g5.12xlarge",
    "g5.48xlarge",
    "g6.8xlarge",
    "g4dn.xlarge",
    "g4dn.8xlarge",
    "c5n.9xlarge",
    "c5n.18xlarge",
    "c5.xlarge",
    "t3.medium",
    "t3.large",
    "m5.xlarge",
    "m5.2xlarge",
]
ALL_NAMES = sorted(CATALOG)


# --- lookup -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["p5.48xlarge", "ml.p5.48xlarge"])
def test_lookup_accepts_ec2_and_sagemaker_names(name: str) -> None:
    assert lookup(name) is CATALOG["p5.48xlarge"]


def test_lookup_accepts_the_ml_form_of_a_type_hyperpod_does_not_offer() -> None:
    assert lookup("ml.t3.small").name == "t3.small"


@pytest.mark.parametrize("name", REQUIRED_TYPES)
def test_every_required_type_is_catalogued(name: str) -> None:
    assert lookup(name).name == name


@pytest.mark.parametrize(
    ("name", "field", "message"),
    [
        ("p9.huge", "instance_type", "instance_type: 'p9.huge' " + NOT_CATALOGUED),
        ("ml.p9.huge", "instance_type", "instance_type: 'ml.p9.huge' " + NOT_CATALOGUED),
        (
            "P5.48XLARGE",
            "queues[0].instance_type",
            "queues[0].instance_type: 'P5.48XLARGE' " + NOT_CATALOGUED,
        ),
        ("", "head_node.instance_type", "head_node.instance_type: '' " + NOT_CATALOGUED),
    ],
)
def test_lookup_unknown_type_names_field_value_and_known_types(name: str, field: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        lookup(name, field=field)
    assert str(caught.value) == message


def test_unknown_type_message_fits_a_line_and_points_to_the_listing() -> None:
    """The message used to list every known type (663 columns); the listing is `training-clusters catalog`."""
    with pytest.raises(ConfigurationError) as caught:
        lookup("p9.huge")
    assert len(str(caught.value)) < 200
    assert "`training-clusters catalog`" in str(caught.value)


@pytest.mark.parametrize("value", [None, 5, ["p5.48xlarge"]])
def test_lookup_rejects_a_non_string(value: object) -> None:
    with pytest.raises(ConfigurationError) as caught:
        lookup(value, field="instance_type")  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"instance_type: expected an instance type name such as 'p5.48xlarge', got {value!r}"
    )


def test_configuration_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        lookup("p9.huge")


# --- lookup_hyperpod ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ml.p5.48xlarge", "ml.trn2.48xlarge", "ml.g4dn.xlarge", "ml.t3.medium"])
def test_lookup_hyperpod_returns_offered_types(name: str) -> None:
    assert lookup_hyperpod(name).hyperpod_name == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("p5.48xlarge", NO_PREFIX + "'p5.48xlarge' (did you mean 'ml.p5.48xlarge'?)"),
        ("t3.small", NO_PREFIX + "'t3.small'"),
        ("p9.huge", NO_PREFIX + "'p9.huge'"),
        (
            "ml.p9.huge",
            "instance_type: 'ml.p9.huge' " + NOT_CATALOGUED,
        ),
        ("ml.t3.small", "instance_type: 'ml.t3.small' " + NOT_ON_HYPERPOD),
    ],
)
def test_lookup_hyperpod_errors(name: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        lookup_hyperpod(name)
    assert str(caught.value) == message


def test_lookup_hyperpod_puts_the_field_first() -> None:
    with pytest.raises(ConfigurationError, match=r"^instance_groups\[1\]\.instance_type: HyperPod"):
        lookup_hyperpod("p5.48xlarge", field="instance_groups[1].instance_type")


def test_lookup_hyperpod_rejects_a_non_string() -> None:
    with pytest.raises(ConfigurationError, match=r"^instance_type: expected an instance type name"):
        lookup_hyperpod(None)  # type: ignore[arg-type]


# --- the catalogue as a whole -------------------------------------------------------------------------


def test_all_instance_types_is_sorted_by_name() -> None:
    names = [it.name for it in all_instance_types()]
    assert names == sorted(names) == ALL_NAMES


def test_catalog_is_read_only() -> None:
    with pytest.raises(TypeError):
        CATALOG["x1.huge"] = CATALOG["p5.48xlarge"]  # type: ignore[index]


def test_entries_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        CATALOG["p5.48xlarge"].max_efa_interfaces = 1  # type: ignore[misc]


def test_every_row_of_the_shipped_file_is_in_the_catalogue() -> None:
    names = [row["name"] for row in shipped_rows()]
    assert sorted(names) == ALL_NAMES


@pytest.mark.parametrize("name", ALL_NAMES)
def test_rows_round_trip(name: str) -> None:
    assert from_row(to_row(CATALOG[name])) == CATALOG[name]


# --- the shipped data file: every row checked at import ----------------------------------------------


def shipped_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(
        (resources.files("training_clusters.catalog") / catalog_module.DATA_FILE_NAME).read_text(
            encoding="utf-8"
        )
    )
    return rows


REMOVED: Any = object()
"""A value in a row change that removes the fact from the row."""


def broken_copy(tmp_path: Path, name: str, change: dict[str, Any]) -> Path:
    """The shipped file with ``change`` applied to ``name``'s row, written into ``tmp_path``."""
    rows = shipped_rows()
    for row in rows:
        if row["name"] == name:
            row.update(change)
            for fact in [fact for fact, value in change.items() if value is REMOVED]:
                del row[fact]
    target = tmp_path / "catalog_data.json"
    target.write_text(json.dumps(rows, indent=2))
    return target


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        (
            "p5.48xlarge",
            {"max_efa_interfaces": 33},
            "catalog_data.json: instance type 'p5.48xlarge': max_efa_interfaces must be between 0 and "
            "max_network_cards (32) (one EFA interface per network card at most), got 33",
        ),
        (
            "g5.xlarge",
            {"vcpus": "4"},
            "catalog_data.json: instance type 'g5.xlarge': vcpus must be a positive whole number, got '4'",
        ),
        (
            "t3.medium",
            {"hyperpod_name": "ml.t3.large"},
            "catalog_data.json: instance type 't3.medium': hyperpod_name must be 'ml.t3.medium' or None, "
            "got 'ml.t3.large'",
        ),
        (
            "trn2.48xlarge",
            {"quota_family": "Trainium"},
            "catalog_data.json: instance type 'trn2.48xlarge': 'Trainium' is not a valid QuotaFamily",
        ),
        ("c5.xlarge", {"source": REMOVED}, "catalog_data.json: instance type 'c5.xlarge': missing source"),
        ("c5.xlarge", {"gpus": 0}, "catalog_data.json: instance type 'c5.xlarge': unknown gpus"),
    ],
)
def test_a_broken_row_in_the_data_file_names_the_type_and_the_fact(
    tmp_path: Path, name: str, change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        catalog_module.read_catalog(broken_copy(tmp_path, name, change))
    assert str(caught.value).startswith(message)


def test_a_type_with_two_rows_in_the_data_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "catalog_data.json"
    target.write_text(json.dumps([*shipped_rows(), to_row(CATALOG["p5.48xlarge"])]))

    with pytest.raises(ConfigurationError) as caught:
        catalog_module.read_catalog(target)
    assert str(caught.value) == "catalog_data.json: instance type 'p5.48xlarge' has more than one row"


def test_a_data_file_that_is_not_a_list_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "catalog_data.json"
    target.write_text(json.dumps({"p5.48xlarge": to_row(CATALOG["p5.48xlarge"])}))

    with pytest.raises(ConfigurationError) as caught:
        catalog_module.read_catalog(target)
    assert str(caught.value) == "catalog_data.json: expected a list of instance types, got dict"


def test_a_broken_shipped_file_stops_the_import(tmp_path: Path) -> None:
    """The package as installed, with one figure broken in its data file: importing the catalogue fails."""
    package = tmp_path / "training_clusters"
    shipped = Path(catalog_module.__file__).parents[1]
    modules = ("__init__.py", "model/__init__.py", "model/errors.py", "catalog/__init__.py")
    for module in (*modules, "rules/__init__.py", "rules/instance_types.py"):
        (package / module).parent.mkdir(parents=True, exist_ok=True)
        (package / module).write_bytes((shipped / module).read_bytes())
    broken_copy(package / "catalog", "p5.48xlarge", {"max_efa_interfaces": 33})

    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import training_clusters.catalog",
        ],
        capture_output=True,
        text=True,
    )

    assert imported.returncode == 1
    assert imported.stderr.splitlines()[-1] == (
        "training_clusters.model.errors.ConfigurationError: catalog_data.json: instance type 'p5.48xlarge': "
        "max_efa_interfaces must be between 0 and max_network_cards (32) (one EFA interface per network card "
        "at most), got 33"
    )


# --- invariants every entry keeps ---------------------------------------------------------------------


def _expected_quota_family(name: str) -> QuotaFamily:
    family = name.split(".")[0]
    if family.startswith("trn"):
        return QuotaFamily.TRN
    if family.startswith("p"):
        return QuotaFamily.P
    if family.startswith(("g", "vt")):
        return QuotaFamily.G_AND_VT
    assert family[0] in "cmt", f"no quota rule for {name}"
    return QuotaFamily.STANDARD


@pytest.mark.parametrize("name", ALL_NAMES)
def test_efa_interfaces_fit_on_the_network_cards(name: str) -> None:
    it = CATALOG[name]
    assert it.max_network_cards >= 1
    if it.efa_supported:
        assert it.max_network_cards >= it.max_efa_interfaces


@pytest.mark.parametrize("name", ALL_NAMES)
def test_gpudirect_rdma_only_where_efa(name: str) -> None:
    it = CATALOG[name]
    assert not it.gpudirect_rdma or it.efa_supported


@pytest.mark.parametrize("name", ALL_NAMES)
def test_quota_family_matches_prefix(name: str) -> None:
    assert CATALOG[name].quota_family is _expected_quota_family(name)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_hyperpod_name_is_the_ml_form(name: str) -> None:
    it = CATALOG[name]
    assert it.hyperpod_name in (None, f"ml.{name}")
    assert it.hyperpod_available is (it.hyperpod_name is not None)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_every_entry_names_its_source(name: str) -> None:
    assert CATALOG[name].source.strip()


@pytest.mark.parametrize("name", ALL_NAMES)
def test_figures_are_plausible(name: str) -> None:
    it = CATALOG[name]
    assert it.name == name
    assert it.vcpus > 0 and it.memory_gib > 0 and it.network_gbps > 0
    assert it.architecture is Architecture.X86_64  # every catalogued type today; arm64 is modelled
    if it.accelerators is not None:
        assert it.accelerators.count > 0 and it.accelerators.memory_gib_each > 0


@pytest.mark.parametrize("name", ALL_NAMES)
def test_accelerator_kind_matches_family(name: str) -> None:
    it = CATALOG[name]
    if name.startswith("trn"):
        assert it.accelerators is not None and it.accelerators.kind is AcceleratorKind.TRAINIUM
        assert (it.gpu_count, it.is_gpu) == (0, False)
    elif name.startswith(("p", "g")):
        assert it.is_gpu and it.gpu_count == it.accelerator_count > 0
    else:
        assert it.accelerators is None
        assert (it.gpu_count, it.accelerator_count, it.is_gpu) == (0, 0, False)


def test_hyperpod_names_are_sagemaker_cluster_instance_types() -> None:
    botocore_session = pytest.importorskip("botocore.session")
    model = botocore_session.get_session().get_service_model("sagemaker")
    offered = set(model.shape_for("ClusterInstanceType").enum)
    for it in all_instance_types():
        assert (it.hyperpod_name is not None) == (f"ml.{it.name}" in offered), it.name


# --- EFA interfaces as AWS documents them (EFA supported instance types, in the Amazon EC2 User Guide) ---


@pytest.mark.parametrize(
    ("name", "efa_interfaces"),
    [
        ("p5.48xlarge", 32),
        ("p5e.48xlarge", 32),
        ("p5en.48xlarge", 16),
        ("p4d.24xlarge", 4),
        ("p4de.24xlarge", 4),
        ("p6-b200.48xlarge", 8),
        ("trn1.32xlarge", 8),
        ("trn1n.32xlarge", 16),
        ("trn2.48xlarge", 16),
        ("g6e.48xlarge", 4),
        ("g5.8xlarge", 1),
        ("g5.12xlarge", 1),
        ("g5.48xlarge", 1),
        ("g6.8xlarge", 1),
        ("g4dn.8xlarge", 1),
        ("c5n.9xlarge", 1),
        ("c5n.18xlarge", 1),
        ("g5.xlarge", 0),
        ("g5.2xlarge", 0),
        ("g4dn.xlarge", 0),
        ("c5.xlarge", 0),
        ("t3.medium", 0),
    ],
)
def test_efa_interfaces_as_aws_documents_them(name: str, efa_interfaces: int) -> None:
    it = CATALOG[name]
    assert it.max_efa_interfaces == efa_interfaces
    assert it.efa_supported is (efa_interfaces > 0)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_gpudirect_rdma_exactly_on_p4d_p4de_p5_p6_and_trn(name: str) -> None:
    expected = name.split(".")[0] in {"p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "trn1", "trn1n", "trn2"}
    assert CATALOG[name].gpudirect_rdma is expected


@pytest.mark.parametrize(
    ("name", "model", "count", "memory_gib_each", "mig"),
    [
        ("p5.48xlarge", "H100", 8, 80, True),
        ("p5e.48xlarge", "H200", 8, 141, True),
        ("p5en.48xlarge", "H200", 8, 141, True),
        ("p4d.24xlarge", "A100", 8, 40, True),
        ("p4de.24xlarge", "A100", 8, 80, True),
        ("p6-b200.48xlarge", "B200", 8, 179, True),
        ("g5.12xlarge", "A10G", 4, 24, False),
        ("g6.8xlarge", "L4", 1, 22, False),
        ("g6e.48xlarge", "L40S", 8, 45, False),
        ("g4dn.8xlarge", "T4", 1, 16, False),
        ("trn1.32xlarge", "Trainium", 16, 32, False),
        ("trn2.48xlarge", "Trainium2", 16, 96, False),
    ],
)
def test_accelerators(name: str, model: str, count: int, memory_gib_each: int, mig: bool) -> None:
    accelerators = CATALOG[name].accelerators
    assert accelerators is not None
    assert (accelerators.model, accelerators.count) == (model, count)
    assert (accelerators.memory_gib_each, accelerators.mig_capable) == (memory_gib_each, mig)
    assert accelerators.total_memory_gib == count * memory_gib_each


@pytest.mark.parametrize(
    ("name", "vcpus", "memory_gib", "network_gbps", "network_cards"),
    [
        ("p5.48xlarge", 192, 2048.0, 3200.0, 32),
        ("p4d.24xlarge", 96, 1152.0, 400.0, 4),
        ("trn1.32xlarge", 128, 512.0, 800.0, 8),
        ("trn1n.32xlarge", 128, 512.0, 1600.0, 16),
        ("g6e.48xlarge", 192, 1536.0, 400.0, 4),
        ("g5.48xlarge", 192, 768.0, 100.0, 1),
        ("c5n.18xlarge", 72, 192.0, 100.0, 1),
        ("t3.medium", 2, 4.0, 5.0, 1),
    ],
)
def test_size_and_network_figures(
    name: str, vcpus: int, memory_gib: float, network_gbps: float, network_cards: int
) -> None:
    it = CATALOG[name]
    assert (it.vcpus, it.memory_gib, it.network_gbps, it.max_network_cards) == (
        vcpus,
        memory_gib,
        network_gbps,
        network_cards,
    )


# --- quota families -----------------------------------------------------------------------------------

STANDARD_QUOTA_NAME = "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"


@pytest.mark.parametrize(
    ("family", "code", "quota_name"),
    [
        (QuotaFamily.P, "L-417A185B", "Running On-Demand P instances"),
        (QuotaFamily.G_AND_VT, "L-DB2E81BA", "Running On-Demand G and VT instances"),
        (QuotaFamily.STANDARD, "L-1216C47A", STANDARD_QUOTA_NAME),
        (QuotaFamily.TRN, "L-2C3B7624", "Running On-Demand Trn instances"),
    ],
)
def test_quota_codes_and_names(family: QuotaFamily, code: str, quota_name: str) -> None:
    assert (family.quota_code, family.quota_name) == (code, quota_name)


def test_enum_values_are_the_strings_aws_uses() -> None:
    assert [f.value for f in QuotaFamily] == ["P", "G and VT", "Standard", "Trn"]
    assert [a.value for a in Architecture] == ["x86_64", "arm64"]
    assert isinstance(Architecture.X86_64, str) and f"{Architecture.ARM64}" == "arm64"
    assert [k.value for k in AcceleratorKind] == ["nvidia-gpu", "trainium"]


def test_instance_type_is_a_plain_value_object() -> None:
    copy = dataclasses.replace(CATALOG["p5.48xlarge"])
    assert copy == CATALOG["p5.48xlarge"] and isinstance(copy, InstanceType)


@pytest.mark.parametrize(
    ("family", "code", "quota_name"),
    [
        (QuotaFamily.P, "L-7212CCBC", "All P Spot Instance Requests"),
        (QuotaFamily.G_AND_VT, "L-3819A6DF", "All G and VT Spot Instance Requests"),
        (
            QuotaFamily.STANDARD,
            "L-34B43A08",
            "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
        ),
        (QuotaFamily.TRN, "L-6B0D517C", "All Trn Spot Instance Requests"),
    ],
)
def test_spot_quota_codes_and_names(family: QuotaFamily, code: str, quota_name: str) -> None:
    assert (family.spot_quota_code, family.spot_quota_name) == (code, quota_name)


# --------------------------------------------------------------------------------------------------
# registering a type the catalogue does not know yet (a generation launched after this release)

NEW_TYPE = {
    "name": "p9.48xlarge",
    "vcpus": 192,
    "memory_gib": 2048,
    "architecture": "x86_64",
    "accelerators": {
        "kind": "nvidia-gpu",
        "model": "X900",
        "count": 8,
        "memory_gib_each": 288,
        "mig_capable": True,
    },
    "max_efa_interfaces": 16,
    "max_network_cards": 16,
    "gpudirect_rdma": True,
    "network_gbps": 6400,
    "quota_family": "P",
    "hyperpod_name": "ml.p9.48xlarge",
    "source": "aws ec2 describe-instance-types --instance-types p9.48xlarge (test data)",
}


@pytest.fixture
def restored_catalogue() -> Iterator[None]:
    """The catalogue as it was, after a test that registers types. This module runs beside the suite's
    up-front synths (a thread that looks types up), so it waits for them before changing the catalogue, and
    puts back only what changed: the shipped entries are never missing, not even for an instant."""
    _await_up_front_synths()
    saved = dict(catalog_module._TYPES)
    yield
    for name in set(catalog_module._TYPES) - set(saved):
        del catalog_module._TYPES[name]
    for name, entry in saved.items():
        if catalog_module._TYPES.get(name) is not entry:
            catalog_module._TYPES[name] = entry


def test_a_registered_type_is_accepted_everywhere_a_catalogued_one_is(restored_catalogue: None) -> None:
    with pytest.raises(ConfigurationError, match="register_instance_type"):
        lookup("p9.48xlarge")
    registered = catalog_module.register_instance_type(copy.deepcopy(NEW_TYPE))  # type: ignore[arg-type]
    assert lookup("p9.48xlarge") is registered
    assert lookup_hyperpod("ml.p9.48xlarge").max_efa_interfaces == 16
    assert list(CATALOG) == sorted(CATALOG)
    assert catalog_module.register_instance_type(copy.deepcopy(NEW_TYPE)) is registered  # type: ignore[arg-type]


def test_a_registered_type_builds_an_efa_nodegroup(restored_catalogue: None, stack: cdk.Stack) -> None:
    from training_clusters.constructs import (
        EfaNodegroup,
        GpuEksCluster,
        TrainingNetwork,
        TrainingPlacementGroup,
    )

    catalog_module.register_instance_type(copy.deepcopy(NEW_TYPE))  # type: ignore[arg-type]
    network = TrainingNetwork(stack, "Network", max_azs=2)
    cluster = GpuEksCluster(stack, "Eks", vpc=network.vpc, admin_role_arn="arn:aws:iam::111122223333:role/A")
    group = EfaNodegroup(
        stack,
        "New",
        cluster=cluster,
        instance_type="p9.48xlarge",
        subnet=network.placement_subnet(),
        placement_group=TrainingPlacementGroup(stack, "Pg"),
        efa_security_group=network.efa_security_group,
        desired_size=1,
    )
    assert group.efa_interfaces == 16


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "P9 big"}, "name must look like 'p5.48xlarge', got 'P9 big'"),
        ({"vcpus": 0}, "vcpus must be a positive whole number, got 0"),
        ({"max_efa_interfaces": 17}, "max_efa_interfaces must be between 0 and max_network_cards (16)"),
        ({"max_efa_interfaces": 0}, "gpudirect_rdma needs EFA interfaces and accelerators"),
        (
            {"hyperpod_name": "p9.48xlarge"},
            "hyperpod_name must be 'ml.p9.48xlarge' or None, got 'p9.48xlarge'",
        ),
        ({"quota_family": "X"}, "'X' is not a valid QuotaFamily"),
        ({"source": ""}, "source must say where the figures come from"),
        ({"gpus": 8}, "unknown gpus"),
    ],
)
def test_inconsistent_facts_are_refused(
    restored_catalogue: None, change: dict[str, object], message: str
) -> None:
    facts = {**copy.deepcopy(NEW_TYPE), **change}
    with pytest.raises(ConfigurationError) as error:
        catalog_module.register_instance_type(facts)  # type: ignore[arg-type]
    assert message in str(error.value)
    assert "p9.48xlarge" not in CATALOG


def test_shipped_figures_are_not_overridden(restored_catalogue: None) -> None:
    p5 = catalog_module.to_row(lookup("p5.48xlarge"))
    with pytest.raises(ConfigurationError, match="already holds different facts"):
        catalog_module.register_instance_type({**p5, "max_efa_interfaces": 4})
    assert lookup("p5.48xlarge").max_efa_interfaces == 32
