"""The catalogue's checks of an instance type's facts (training_clusters/catalog/__init__.py), each message whole and
each check at its boundary: what ``register_instance_type`` and the shipped data file refuse. Free of CDK."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import IO, Any

import pytest

from training_clusters import catalog
from training_clusters.model.errors import ConfigurationError

#: A type the catalogue does not know, consistent in every fact (the tests change one at a time).
ROW: dict[str, Any] = {
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
        "mig_profiles": ["1g.36gb", "7g.288gb"],
    },
    "max_efa_interfaces": 16,
    "max_network_cards": 16,
    "gpudirect_rdma": True,
    "network_gbps": 6400,
    "quota_family": "P",
    "hyperpod_name": "ml.p9.48xlarge",
    "source": "test data",
}
FACTS = (
    "name, vcpus, memory_gib, architecture, accelerators, max_efa_interfaces, max_network_cards, gpudirect_rdma, "
    "network_gbps, quota_family, hyperpod_name, source"
)
PREFIX = "register_instance_type('p9.48xlarge'): "


def _accelerators(**change: Any) -> dict[str, Any]:
    return {**ROW["accelerators"], **change}


def _refused(row: dict[str, Any]) -> str:
    """The message ``register_instance_type`` refuses ``row`` with; the catalogue is left as it was."""
    before = dict(catalog.CATALOG)
    with pytest.raises(ConfigurationError) as raised:
        catalog.register_instance_type(row)  # type: ignore[arg-type]
    assert dict(catalog.CATALOG) == before
    return str(raised.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"vcpus": 0}, "vcpus must be a positive whole number, got 0"),
        ({"vcpus": 1.5}, "vcpus must be a positive whole number, got 1.5"),
        ({"memory_gib": 0}, "memory_gib must be positive, got 0.0"),
        ({"max_network_cards": 0, "max_efa_interfaces": 0}, "max_network_cards must be 1 or more, got 0"),
        (
            {"max_efa_interfaces": 17},
            "max_efa_interfaces must be between 0 and max_network_cards (16) (one EFA interface per network card "
            "at most), got 17",
        ),
        (
            {"max_efa_interfaces": -1},
            "max_efa_interfaces must be between 0 and max_network_cards (16) (one EFA interface per network card "
            "at most), got -1",
        ),
        ({"max_efa_interfaces": 0}, "gpudirect_rdma needs EFA interfaces and accelerators"),
        ({"accelerators": None}, "gpudirect_rdma needs EFA interfaces and accelerators"),
        ({"network_gbps": 0}, "network_gbps must be positive, got 0.0"),
        ({"hyperpod_name": "ml.p9"}, "hyperpod_name must be 'ml.p9.48xlarge' or None, got 'ml.p9'"),
        (
            {"accelerators": _accelerators(count=0)},
            "accelerators.count and accelerators.memory_gib_each must be positive",
        ),
        (
            {"accelerators": _accelerators(memory_gib_each=0)},
            "accelerators.count and accelerators.memory_gib_each must be positive",
        ),
        (
            {"accelerators": _accelerators(mig_capable=False)},
            "accelerators.mig_profiles must be MIG profiles such as '1g.10gb' on a mig_capable GPU",
        ),
        (
            {"accelerators": _accelerators(mig_profiles=["8g.10gb"])},
            "accelerators.mig_profiles must be MIG profiles such as '1g.10gb' on a mig_capable GPU",
        ),
        ({"source": ""}, "source must say where the figures come from"),
        ({"architecture": "sparc"}, "'sparc' is not a valid Architecture"),
        ({"quota_family": "X"}, "'X' is not a valid QuotaFamily"),
    ],
)
def test_each_inconsistent_fact_is_refused_whole(change: dict[str, Any], message: str) -> None:
    assert _refused({**ROW, **change}) == PREFIX + message


@pytest.mark.parametrize(
    ("change", "ok"),
    [
        ({}, True),
        ({"max_efa_interfaces": 16}, True),  # as many as the network cards
        ({"max_efa_interfaces": 0, "gpudirect_rdma": False}, True),
        ({"max_network_cards": 1, "max_efa_interfaces": 1}, True),
        ({"vcpus": 1, "memory_gib": 0.5, "network_gbps": 0.1}, True),
        ({"hyperpod_name": None}, True),
        ({"accelerators": _accelerators(mig_profiles=[], mig_capable=False)}, True),
        ({"accelerators": None, "gpudirect_rdma": False}, True),
        (
            {"accelerators": _accelerators(count=1, memory_gib_each=1, mig_capable=False, mig_profiles=[])},
            True,
        ),
    ],
)
def test_the_last_consistent_facts_are_accepted(change: dict[str, Any], ok: bool, tmp_path: Path) -> None:
    """Read through a data file (the same checks as registering, without changing the shared catalogue,
    which the suite's up-front synths read meanwhile)."""
    row = {**ROW, **change}
    data = tmp_path / catalog.DATA_FILE_NAME
    data.write_text(json.dumps([row]), encoding="utf-8")
    (read,) = catalog.read_catalog(data)
    assert catalog.to_row(read) == {
        **row,
        "memory_gib": float(row["memory_gib"]),
        "network_gbps": float(row["network_gbps"]),
        "accelerators": _row_accelerators(row["accelerators"]),
    }


def _row_accelerators(accelerators: dict[str, Any] | None) -> dict[str, Any] | None:
    """What ``to_row`` writes: ``mig_profiles`` only when there are some."""
    if accelerators is None:
        return None
    return {k: v for k, v in accelerators.items() if k != "mig_profiles" or v}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            ["p9.48xlarge"],
            "register_instance_type('?'): expected an InstanceType or a mapping of its facts, got list",
        ),
        (
            {k: v for k, v in ROW.items() if k not in ("source", "vcpus")},
            f"{PREFIX}missing source, vcpus (facts: {FACTS})",
        ),
        ({**ROW, "gpus": 8, "cpus": 1}, f"{PREFIX}unknown cpus, gpus (facts: {FACTS})"),
        (
            {**{k: v for k, v in ROW.items() if k != "source"}, "gpus": 8},
            f"{PREFIX}missing source; unknown gpus (facts: {FACTS})",
        ),
        (
            {k: v for k, v in ROW.items() if k != "name"},
            f"register_instance_type('?'): missing name (facts: {FACTS})",
        ),
        ({**ROW, "accelerators": {"kind": "nvidia-gpu"}}, f"{PREFIX}'model'"),
    ],
)
def test_a_row_of_the_wrong_shape_is_refused_whole(row: Any, message: str) -> None:
    assert _refused(row) == message


@pytest.mark.parametrize("name", ["P9.48xlarge", "p9", "p9.", ".48xlarge", "p9.48xlarge "])
def test_a_name_not_shaped_like_ec2s_is_refused(name: str) -> None:
    assert _refused({**ROW, "name": name, "hyperpod_name": None}) == (
        f"register_instance_type({name!r}): name must look like 'p5.48xlarge', got {name!r}"
    )


def test_registering_a_known_instance_type_object_returns_it() -> None:
    p5 = catalog.lookup("p5.48xlarge")
    assert catalog.register_instance_type(p5) is p5
    assert catalog.register_instance_type(catalog.to_row(p5)) is p5


def test_the_shipped_file_is_read_in_its_order_whole(tmp_path: Path) -> None:
    shipped = resources.files("training_clusters.catalog") / catalog.DATA_FILE_NAME
    read = catalog.read_catalog(shipped)
    rows = json.loads(shipped.read_text(encoding="utf-8"))
    assert [it.name for it in read] == [row["name"] for row in rows]
    assert [catalog.to_row(it) for it in read] == [
        catalog.to_row(catalog.lookup(row["name"])) for row in rows
    ]
    copy = tmp_path / catalog.DATA_FILE_NAME
    copy.write_text(json.dumps(rows[:2]), encoding="utf-8")
    assert catalog.read_catalog(copy) == read[:2]
    copy.write_text(json.dumps([{**rows[0], "vcpus": -1}]), encoding="utf-8")
    with pytest.raises(ConfigurationError) as raised:
        catalog.read_catalog(copy)
    assert str(raised.value) == (
        f"{catalog.DATA_FILE_NAME}: instance type {rows[0]['name']!r}: vcpus must be a positive whole number, got -1"
    )


def test_lookup_starts_its_message_with_instance_type_unless_told_the_field() -> None:
    not_catalogued = (
        "'p0.nano' is not in the catalogue (`training-clusters catalog` lists its types); give its facts with "
        "training_clusters.catalog.register_instance_type(...) first"
    )
    with pytest.raises(ConfigurationError) as raised:
        catalog.lookup("p0.nano")
    assert str(raised.value) == f"instance_type: {not_catalogued}"
    with pytest.raises(ConfigurationError) as raised:
        catalog.lookup(5)  # type: ignore[arg-type]
    assert str(raised.value) == "instance_type: expected an instance type name such as 'p5.48xlarge', got 5"
    with pytest.raises(ConfigurationError) as raised:
        catalog.lookup("p0.nano", field="queues[0].instance_type")
    assert str(raised.value) == f"queues[0].instance_type: {not_catalogued}"


class _FileWhereTheDefaultIsCp1252:
    """A data file on a machine whose default text encoding is cp1252 (Windows' in Western Europe and the
    Americas): opened without naming an encoding, its bytes are decoded as cp1252."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name

    def open(self, mode: str = "r", *, encoding: str | None = None) -> IO[str]:
        return self.path.open(mode, encoding=encoding or "cp1252")


def test_the_data_file_is_read_as_utf_8_whatever_the_machines_default_encoding(tmp_path: Path) -> None:
    """A row's source may name its page in any language; the file is UTF-8 wherever it is read."""
    source = "Guide de l'utilisateur Amazon EC2 : types d'instances \u00e0 calcul acc\u00e9l\u00e9r\u00e9"
    data = tmp_path / catalog.DATA_FILE_NAME
    data.write_text(json.dumps([{**ROW, "source": source}], ensure_ascii=False), encoding="utf-8")
    (read,) = catalog.read_catalog(_FileWhereTheDefaultIsCp1252(data))  # type: ignore[arg-type]
    assert read.source == source
