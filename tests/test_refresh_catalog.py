"""scripts/refresh_catalog.py, offline: a real boto3 EC2 client whose calls a botocore Stubber answers.

The Stubber checks every request against EC2's service model and every canned response against the
response shape, so the responses here have the real structure of ``DescribeInstanceTypes`` output. Some
are records copied (trimmed) from an actual ``describe-instance-types`` dump.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped,unused-ignore]
import pytest
from botocore.stub import Stubber  # type: ignore[import-untyped,unused-ignore]

from tests.scripts import load_script
from training_clusters.catalog import (
    CATALOG,
    AcceleratorKind,
    InstanceType,
    InstanceTypeRow,
    all_instance_types,
    read_catalog,
)

ROOT = Path(__file__).resolve().parents[1]
DATA_FILE = ROOT / "training_clusters" / "catalog" / "catalog_data.json"


rc = load_script("scripts/refresh_catalog.py", "refresh_catalog")
ALL_NAMES = sorted(CATALOG)
G6E_WARNING = (
    "g6e.48xlarge: EC2 reports 358 GiB per device, which is the instance total for 8 devices; "
    "kept 45 GiB each"
)
"""Every full refresh warns about this: the snapshot record of g6e.48xlarge is among the answers."""


# --- realistic DescribeInstanceTypes records ----------------------------------------------------------


def api_info(it: InstanceType) -> dict[str, Any]:
    """The ``InstanceTypeInfo`` EC2 would return for a catalogue entry, in EC2's structure."""
    info: dict[str, Any] = {
        "InstanceType": it.name,
        "CurrentGeneration": True,
        "FreeTierEligible": False,
        "SupportedUsageClasses": ["on-demand", "spot"],
        "SupportedRootDeviceTypes": ["ebs"],
        "SupportedVirtualizationTypes": ["hvm"],
        "BareMetal": False,
        "Hypervisor": "nitro",
        "ProcessorInfo": {"SupportedArchitectures": [it.architecture.value], "Manufacturer": "Intel"},
        "VCpuInfo": {"DefaultVCpus": it.vcpus, "DefaultCores": it.vcpus // 2, "DefaultThreadsPerCore": 2},
        "MemoryInfo": {"SizeInMiB": round(it.memory_gib * 1024)},
        "NetworkInfo": _network_info(it),
        "SupportedInRegion": True,
    }
    accelerators = it.accelerators
    if accelerators is not None and accelerators.kind is AcceleratorKind.NVIDIA_GPU:
        memory = accelerators.memory_gib_each * 1024
        info["GpuInfo"] = {
            "Gpus": [
                {
                    "Name": accelerators.model,
                    "Manufacturer": "NVIDIA",
                    "Count": accelerators.count,
                    "MemoryInfo": {"SizeInMiB": memory},
                }
            ],
            "TotalGpuMemoryInMiB": memory * accelerators.count,
        }
    elif accelerators is not None:
        memory = accelerators.memory_gib_each * 1024
        info["NeuronInfo"] = {
            "NeuronDevices": [
                {
                    "Count": accelerators.count,
                    "Name": accelerators.model,
                    "CoreInfo": {"Count": 2, "Version": 2},
                    "MemoryInfo": {"SizeInMiB": memory},
                }
            ],
            "TotalNeuronDeviceMemoryInMiB": memory * accelerators.count,
        }
    return info


def _network_info(it: InstanceType) -> dict[str, Any]:
    cards = it.max_network_cards
    per_card = it.network_gbps / cards
    network: dict[str, Any] = {
        "NetworkPerformance": f"{cards}x {per_card:g} Gigabit" if cards > 1 else f"{per_card:g} Gigabit",
        "MaximumNetworkInterfaces": 2 * cards,
        "MaximumNetworkCards": cards,
        "DefaultNetworkCardIndex": 0,
        "NetworkCards": [
            {
                "NetworkCardIndex": index,
                "NetworkPerformance": f"{per_card:g} Gigabit",
                "MaximumNetworkInterfaces": 2,
                "BaselineBandwidthInGbps": per_card,
                "PeakBandwidthInGbps": per_card,
            }
            for index in range(cards)
        ],
        "EnaSupport": "required",
        "EfaSupported": it.efa_supported,
    }
    if it.efa_supported:
        network["EfaInfo"] = {"MaximumEfaInterfaces": it.max_efa_interfaces}
    return network


def _card(index: int, performance: str, gbps: float, interfaces: int) -> dict[str, Any]:
    return {
        "NetworkCardIndex": index,
        "NetworkPerformance": performance,
        "MaximumNetworkInterfaces": interfaces,
        "BaselineBandwidthInGbps": gbps,
        "PeakBandwidthInGbps": gbps,
    }


# Records from the describe-instance-types dump in aws-cdk (aws-ec2/data/instance-properties.json),
# trimmed to the parts the refresh reads plus some context.
SNAPSHOT: dict[str, dict[str, Any]] = {
    "c5.xlarge": {
        "InstanceType": "c5.xlarge",
        "ProcessorInfo": {
            "SupportedArchitectures": ["x86_64"],
            "SustainedClockSpeedInGhz": 3.4,
            "Manufacturer": "Intel",
        },
        "VCpuInfo": {"DefaultVCpus": 4, "DefaultCores": 2, "DefaultThreadsPerCore": 2},
        "MemoryInfo": {"SizeInMiB": 8192},
        "NetworkInfo": {
            "NetworkPerformance": "Up to 10 Gigabit",
            "MaximumNetworkInterfaces": 4,
            "MaximumNetworkCards": 1,
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": [_card(0, "Up to 10 Gigabit", 10.0, 4)],
            "EnaSupport": "required",
            "EfaSupported": False,
        },
    },
    "p4d.24xlarge": {
        "InstanceType": "p4d.24xlarge",
        "SupportedUsageClasses": ["capacity-block", "on-demand", "spot"],
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "Intel"},
        "VCpuInfo": {"DefaultVCpus": 96, "DefaultCores": 48, "DefaultThreadsPerCore": 2},
        "MemoryInfo": {"SizeInMiB": 1179648},
        "NetworkInfo": {
            "NetworkPerformance": "4x 100 Gigabit",
            "MaximumNetworkInterfaces": 60,
            "MaximumNetworkCards": 4,
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": [_card(index, "100 Gigabit", 100.0, 15) for index in range(4)],
            "EnaSupport": "required",
            "EfaSupported": True,
            "EfaInfo": {"MaximumEfaInterfaces": 4},
        },
        "GpuInfo": {
            "Gpus": [
                {"Name": "A100", "Manufacturer": "NVIDIA", "Count": 8, "MemoryInfo": {"SizeInMiB": 40960}}
            ],
            "TotalGpuMemoryInMiB": 327680,
        },
    },
    "p5.48xlarge": {
        "InstanceType": "p5.48xlarge",
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "AMD"},
        "VCpuInfo": {"DefaultVCpus": 192, "DefaultCores": 96, "DefaultThreadsPerCore": 2},
        "MemoryInfo": {"SizeInMiB": 2097152},
        "NetworkInfo": {
            "NetworkPerformance": "3200 Gigabit",
            "MaximumNetworkInterfaces": 64,
            "MaximumNetworkCards": 32,
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": [_card(index, "100 Gigabit", 100.0, 2) for index in range(32)],
            "EnaSupport": "required",
            "EfaSupported": True,
            "EfaInfo": {"MaximumEfaInterfaces": 32},
        },
        "GpuInfo": {
            "Gpus": [
                {"Name": "H100", "Manufacturer": "NVIDIA", "Count": 8, "MemoryInfo": {"SizeInMiB": 81920}}
            ],
            "TotalGpuMemoryInMiB": 655360,
        },
    },
    "g6e.48xlarge": {  # EC2 reports the 8 GPUs' total (8 x 45776 MiB) as the per-GPU figure here
        "InstanceType": "g6e.48xlarge",
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "AMD"},
        "VCpuInfo": {"DefaultVCpus": 192, "DefaultCores": 96, "DefaultThreadsPerCore": 2},
        "MemoryInfo": {"SizeInMiB": 1572864},
        "NetworkInfo": {
            "NetworkPerformance": "400 Gigabit",
            "MaximumNetworkInterfaces": 40,
            "MaximumNetworkCards": 4,
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": [_card(index, "400 Gigabit", 400.0, 10) for index in range(4)],
            "EnaSupport": "required",
            "EfaSupported": True,
            "EfaInfo": {"MaximumEfaInterfaces": 4},
        },
        "GpuInfo": {
            "Gpus": [
                {"Name": "L40S", "Manufacturer": "NVIDIA", "Count": 8, "MemoryInfo": {"SizeInMiB": 366211}}
            ],
            "TotalGpuMemoryInMiB": 2929688,
        },
    },
    "g6.8xlarge": {
        "InstanceType": "g6.8xlarge",
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "AMD"},
        "VCpuInfo": {"DefaultVCpus": 32, "DefaultCores": 16, "DefaultThreadsPerCore": 2},
        "MemoryInfo": {"SizeInMiB": 131072},
        "NetworkInfo": {
            "NetworkPerformance": "25 Gigabit",
            "MaximumNetworkInterfaces": 8,
            "MaximumNetworkCards": 1,
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": [_card(0, "25 Gigabit", 25.0, 8)],
            "EnaSupport": "required",
            "EfaSupported": True,
            "EfaInfo": {"MaximumEfaInterfaces": 1},
        },
        "GpuInfo": {
            "Gpus": [
                {"Name": "L4", "Manufacturer": "NVIDIA", "Count": 1, "MemoryInfo": {"SizeInMiB": 22888}}
            ],
            "TotalGpuMemoryInMiB": 22888,
        },
    },
    "trn1.32xlarge": {
        "InstanceType": "trn1.32xlarge",
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "Intel"},
        "VCpuInfo": {"DefaultVCpus": 128, "DefaultCores": 64, "DefaultThreadsPerCore": 2},
        "MemoryInfo": {"SizeInMiB": 524288},
        "NetworkInfo": {
            "NetworkPerformance": "8x 100 Gigabit",
            "MaximumNetworkInterfaces": 40,
            "MaximumNetworkCards": 8,
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": [_card(index, "100 Gigabit", 100.0, 5) for index in range(8)],
            "EnaSupport": "required",
            "EfaSupported": True,
            "EfaInfo": {"MaximumEfaInterfaces": 8},
        },
        "NeuronInfo": {
            "NeuronDevices": [
                {
                    "Count": 16,
                    "Name": "Trainium",
                    "CoreInfo": {"Count": 2, "Version": 2},
                    "MemoryInfo": {"SizeInMiB": 32768},
                }
            ],
            "TotalNeuronDeviceMemoryInMiB": 524288,
        },
    },
}


def all_infos() -> list[dict[str, Any]]:
    """One realistic record per catalogued type, snapshot records where we have them."""
    return [copy.deepcopy(SNAPSHOT.get(it.name) or api_info(it)) for it in all_instance_types()]


def request(names: list[str], next_token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"InstanceTypes": names, "IncludeUnsupportedInRegion": True}
    if next_token is not None:
        params["NextToken"] = next_token
    return params


# --- fixtures -----------------------------------------------------------------------------------------


@pytest.fixture
def ec2() -> Any:
    return boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


@pytest.fixture
def stubber(ec2: Any) -> Iterator[Stubber]:
    with Stubber(ec2) as stub:
        yield stub
        stub.assert_no_pending_responses()


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    """A copy of the committed data file; tests never touch the real one."""
    target = tmp_path / "catalog_data.json"
    shutil.copyfile(DATA_FILE, target)
    return target


def answer_with(stubber: Stubber, infos: list[dict[str, Any]]) -> None:
    stubber.add_response("describe_instance_types", {"InstanceTypes": infos}, request(ALL_NAMES))


def with_change(name: str, change: dict[str, Any]) -> list[dict[str, Any]]:
    """All records, with ``change`` merged into ``name``'s ``NetworkInfo`` / top level as given."""
    infos = all_infos()
    for info in infos:
        if info["InstanceType"] == name:
            for key, value in change.items():
                if isinstance(value, dict):
                    info.setdefault(key, {}).update(value)
                else:
                    info[key] = value
    return infos


def loaded_catalogue(path: Path) -> dict[str, InstanceType]:
    return {it.name: it for it in read_catalog(path)}


# --- parsing ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "gbps"),
    [
        ("Up to 10 Gigabit", 10.0),
        ("Up to 12.5 Gigabit", 12.5),
        ("25 Gigabit", 25.0),
        ("18.75 Gigabit", 18.75),
        ("3200 Gigabit", 3200.0),
        ("4x 100 Gigabit", 400.0),
        ("16x 100 Gigabit", 1600.0),
        ("High", None),
        ("Low to Moderate", None),
        ("", None),
    ],
)
def test_parse_network_performance(text: str, gbps: float | None) -> None:
    assert rc.parse_network_performance(text) == gbps


@pytest.mark.parametrize("name", sorted(SNAPSHOT))
def test_snapshot_records_reproduce_the_catalogue(name: str) -> None:
    merged, warnings = rc.merge(CATALOG[name], SNAPSHOT[name])
    assert merged == CATALOG[name]
    assert all("instance total" in warning for warning in warnings)


def test_gpu_memory_reported_as_instance_total_keeps_the_per_gpu_figure() -> None:
    _, warnings = rc.merge(CATALOG["g6e.48xlarge"], SNAPSHOT["g6e.48xlarge"])
    assert warnings == [G6E_WARNING]


def test_real_per_gpu_memory_change_is_taken() -> None:
    info = copy.deepcopy(SNAPSHOT["g6.8xlarge"])
    info["GpuInfo"]["Gpus"][0]["MemoryInfo"]["SizeInMiB"] = 24576

    merged, warnings = rc.merge(CATALOG["g6.8xlarge"], info)

    assert merged.accelerators is not None and merged.accelerators.memory_gib_each == 24
    assert warnings == []


@pytest.mark.parametrize("name", ALL_NAMES)
def test_records_built_from_the_catalogue_merge_back_unchanged(name: str) -> None:
    assert rc.merge(CATALOG[name], api_info(CATALOG[name])) == (CATALOG[name], [])


# --- the file and --check -----------------------------------------------------------------------------


def test_unchanged_figures_mean_no_diff_and_check_exits_0(
    ec2: Any, stubber: Stubber, data_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer_with(stubber, all_infos())
    before = data_file.read_text()

    assert rc.main(["--check", "--data-file", str(data_file)], client=ec2) == 0

    assert data_file.read_text() == before
    assert capsys.readouterr().out.splitlines()[-1] == "catalogue is up to date"


def test_changed_efa_count_is_reported_and_check_exits_1(
    ec2: Any, stubber: Stubber, data_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer_with(
        stubber, with_change("p5.48xlarge", {"NetworkInfo": {"EfaInfo": {"MaximumEfaInterfaces": 16}}})
    )
    before = data_file.read_text()

    assert rc.main(["--check", "--data-file", str(data_file)], client=ec2) == 1

    assert data_file.read_text() == before
    assert "changed: p5.48xlarge: max_efa_interfaces 32 -> 16" in capsys.readouterr().out.splitlines()


def test_changed_figure_is_written_and_the_file_reads_back(
    ec2: Any, stubber: Stubber, data_file: Path
) -> None:
    answer_with(
        stubber, with_change("p5.48xlarge", {"NetworkInfo": {"EfaInfo": {"MaximumEfaInterfaces": 16}}})
    )

    assert rc.main(["--data-file", str(data_file)], client=ec2) == 0

    regenerated = loaded_catalogue(data_file)
    assert regenerated["p5.48xlarge"] == dataclasses.replace(CATALOG["p5.48xlarge"], max_efa_interfaces=16)
    assert {name: it for name, it in regenerated.items() if name != "p5.48xlarge"} == {
        name: it for name, it in CATALOG.items() if name != "p5.48xlarge"
    }


def test_refresh_file_reports_each_changed_figure(ec2: Any, stubber: Stubber, data_file: Path) -> None:
    answer_with(
        stubber,
        with_change("g5.xlarge", {"VCpuInfo": {"DefaultVCpus": 8}, "MemoryInfo": {"SizeInMiB": 24576}}),
    )

    result = rc.refresh_file(ec2, data_file)

    assert result.changed
    assert [str(change) for change in result.changes] == [
        "g5.xlarge: vcpus 4 -> 8",
        "g5.xlarge: memory_gib 16.0 -> 24.0",
    ]


HAND_KEPT = {
    "gpudirect_rdma": False,
    "quota_family": "Standard",
    "hyperpod_name": None,
    "source": "kept by hand (test)",
}
"""Hand-maintained figures of p5.48xlarge, edited in the file to values no EC2 record could produce."""


def test_hand_maintained_figures_survive_regeneration(ec2: Any, stubber: Stubber, data_file: Path) -> None:
    rows = json.loads(data_file.read_text())
    for row in rows:
        if row["name"] == "p5.48xlarge":
            row.update(HAND_KEPT)
            row["accelerators"]["mig_profiles"] = ["1g.10gb", "7g.80gb"]  # no EC2 record carries them
    data_file.write_text(json.dumps(rows, indent=2) + "\n")
    answer_with(stubber, with_change("p5.48xlarge", {"VCpuInfo": {"DefaultVCpus": 96}}))

    assert rc.main(["--data-file", str(data_file)], client=ec2) == 0

    (p5,) = (row for row in json.loads(data_file.read_text()) if row["name"] == "p5.48xlarge")
    assert p5["vcpus"] == 96
    assert {field: p5[field] for field in HAND_KEPT} == HAND_KEPT
    assert p5["accelerators"]["mig_capable"] is True
    assert p5["accelerators"]["mig_profiles"] == ["1g.10gb", "7g.80gb"]


def test_generated_text_is_the_committed_file() -> None:
    assert rc.render(all_instance_types()) == DATA_FILE.read_text()


def test_generated_file_equals_the_catalogue(tmp_path: Path) -> None:
    target = tmp_path / "catalog_data.json"
    target.write_text(rc.render(reversed(all_instance_types())))

    assert loaded_catalogue(target) == dict(CATALOG)


def test_generated_file_is_json_rows_sorted_by_name_in_the_rows_key_order() -> None:
    rows = json.loads(rc.render(reversed(all_instance_types())))

    assert [row["name"] for row in rows] == sorted(CATALOG)
    assert all(list(row) == list(InstanceTypeRow.__annotations__) for row in rows)


def test_hand_written_source_text_survives_the_file(tmp_path: Path) -> None:
    source = 'the "EFA supported instance types" table \\ NVIDIA\u2019s H100 \u2013 ' + "word " * 60
    entries = [
        dataclasses.replace(it, source=source) if it.name == "c5.xlarge" else it for it in CATALOG.values()
    ]
    target = tmp_path / "catalog_data.json"
    target.write_text(rc.render(entries), encoding="utf-8")

    assert loaded_catalogue(target)["c5.xlarge"].source == source


def test_layout_only_difference_counts_as_a_change(
    ec2: Any, stubber: Stubber, data_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer_with(stubber, all_infos())
    data_file.write_text(data_file.read_text() + "\n")

    assert rc.main(["--check", "--data-file", str(data_file)], client=ec2) == 1

    assert "layout differs" in capsys.readouterr().out


# --- talking to EC2 -----------------------------------------------------------------------------------


def test_pagination_follows_next_token(ec2: Any, stubber: Stubber) -> None:
    infos = all_infos()
    stubber.add_response(
        "describe_instance_types", {"InstanceTypes": infos[:10], "NextToken": "page-2"}, request(ALL_NAMES)
    )
    stubber.add_response(
        "describe_instance_types", {"InstanceTypes": infos[10:]}, request(ALL_NAMES, "page-2")
    )

    described = rc.describe_instance_types(ec2, ALL_NAMES)

    assert sorted(described) == ALL_NAMES


def test_at_most_100_names_per_call(ec2: Any, stubber: Stubber) -> None:
    names = sorted(ec2.meta.service_model.shape_for("InstanceType").enum)[:150]
    stubber.add_response("describe_instance_types", {"InstanceTypes": []}, request(names[:100]))
    stubber.add_response("describe_instance_types", {"InstanceTypes": []}, request(names[100:]))

    assert rc.describe_instance_types(ec2, list(reversed(names))) == {}


def test_type_missing_from_the_response_is_kept_with_a_warning(ec2: Any, stubber: Stubber) -> None:
    answer_with(stubber, [info for info in all_infos() if info["InstanceType"] != "trn2.48xlarge"])

    merged, warnings = rc.refresh(ec2, list(CATALOG.values()))

    assert merged == all_instance_types()
    assert warnings == (G6E_WARNING, "trn2.48xlarge: EC2 did not describe it; kept the current figures")


def test_unreadable_network_performance_keeps_the_figure(ec2: Any, stubber: Stubber) -> None:
    answer_with(stubber, with_change("t3.medium", {"NetworkInfo": {"NetworkPerformance": "Low to Moderate"}}))

    merged, warnings = rc.refresh(ec2, list(CATALOG.values()))

    assert merged == all_instance_types()
    assert warnings == (G6E_WARNING, "t3.medium: cannot read NetworkPerformance 'Low to Moderate'; kept 5.0")


def test_efa_dropping_to_zero_flags_gpudirect_for_review(ec2: Any, stubber: Stubber) -> None:
    answer_with(stubber, with_change("p4d.24xlarge", {"NetworkInfo": {"EfaSupported": False}}))

    merged, warnings = rc.refresh(ec2, list(CATALOG.values()))

    assert {it.name: it for it in merged}["p4d.24xlarge"].max_efa_interfaces == 0
    assert warnings == (
        G6E_WARNING,
        "p4d.24xlarge: gpudirect_rdma is True but EC2 reports no EFA; review it by hand",
    )


def test_new_accelerator_model_asks_for_mig_by_hand() -> None:
    info = api_info(CATALOG["g5.xlarge"])
    info["GpuInfo"]["Gpus"][0]["Name"] = "A10"

    merged, warnings = rc.merge(CATALOG["g5.xlarge"], info)

    assert merged.accelerators is not None and merged.accelerators.model == "A10"
    assert warnings == ["g5.xlarge: accelerator model is now 'A10'; set mig_capable by hand (kept False)"]


def test_unmodelled_accelerator_is_kept_as_is() -> None:
    info = api_info(CATALOG["g5.xlarge"])
    info["GpuInfo"]["Gpus"][0].update(Name="Radeon Pro V520", Manufacturer="AMD")

    merged, warnings = rc.merge(CATALOG["g5.xlarge"], info)

    assert merged == CATALOG["g5.xlarge"]
    assert warnings == [
        "g5.xlarge: accelerator 'AMD Radeon Pro V520' is not a kind the catalogue models; kept as is"
    ]


def test_aws_error_exits_2_without_writing(
    ec2: Any, stubber: Stubber, data_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stubber.add_client_error("describe_instance_types", "UnauthorizedOperation", "not allowed", 403)
    before = data_file.read_text()

    assert rc.main(["--data-file", str(data_file)], client=ec2) == 2

    assert data_file.read_text() == before
    assert "DescribeInstanceTypes failed" in capsys.readouterr().err


def test_client_comes_from_region_and_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[tuple[dict[str, Any], str]] = []

    class FakeSession:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

        def client(self, service: str) -> str:
            created.append((self.kwargs, service))
            return "client"

    monkeypatch.setattr(rc.boto3, "Session", FakeSession)

    assert rc.make_client("eu-west-1", "training") == "client"
    assert created == [({"profile_name": "training", "region_name": "eu-west-1"}, "ec2")]
