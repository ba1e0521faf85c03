"""Regenerate ``training_clusters/catalog/catalog_data.json`` from ``ec2:DescribeInstanceTypes``.

    python scripts/refresh_catalog.py [--region R] [--profile P] [--check]

Needs AWS credentials allowed ``ec2:DescribeInstanceTypes``. For every catalogued instance type the script
asks EC2 for the figures EC2 knows (vCPUs, memory, architecture, GPU or Trainium model and count and
memory, EFA interfaces, network cards, network bandwidth), keeps the figures EC2 does not know exactly as
they are in the file (GPUDirect RDMA, quota family, HyperPod name, MIG, source), rewrites the file in one
canonical layout and prints what changed. ``--check`` writes nothing and exits 1 when the file would
change, e.g. in a scheduled CI job.

To add an instance type, add its row to ``catalog_data.json`` by hand (with the hand-maintained figures and
a source) and run this script to fill in or confirm the rest. The file is read through the catalogue's own
checks (:func:`training_clusters.catalog.read_catalog`): a broken row stops the script, naming the type.

Exit codes: 0 done (or, with ``--check``, up to date), 1 ``--check`` found changes, 2 AWS call failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import boto3  # type: ignore[import-untyped,unused-ignore]
from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped,unused-ignore]

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a plain script from a checkout, without installing
    sys.path.insert(0, str(REPO_ROOT))

from training_clusters.catalog import (  # noqa: E402
    DATA_FILE_NAME,
    AcceleratorKind,
    Accelerators,
    Architecture,
    InstanceType,
    read_catalog,
    to_row,
)

DATA_FILE = REPO_ROOT / "training_clusters" / "catalog" / DATA_FILE_NAME
MAX_INSTANCE_TYPES_PER_CALL = 100
"""``DescribeInstanceTypes`` accepts at most 100 names in ``InstanceTypes``."""

_NETWORK_PERFORMANCE = re.compile(r"^(?:Up to )?(?:(\d+)x )?(\d+(?:\.\d+)?) Gigabit$")

InstanceTypeInfo = Mapping[str, Any]
"""One ``InstanceTypes`` element of a ``DescribeInstanceTypes`` response."""


class Ec2Client(Protocol):
    """The part of a boto3 EC2 client the refresh uses (so tests can pass a stubbed client)."""

    def get_paginator(self, operation_name: str) -> Any:
        """Return the paginator for ``operation_name``."""


@dataclass(frozen=True)
class Change:
    """One figure of one instance type that differs between the file and EC2."""

    instance_type: str
    field: str
    old: object
    new: object

    def __str__(self) -> str:
        return f"{self.instance_type}: {self.field} {self.old!r} -> {self.new!r}"


@dataclass(frozen=True)
class RefreshResult:
    """What a refresh would write, and why."""

    original_text: str
    text: str
    changes: tuple[Change, ...]
    warnings: tuple[str, ...]

    @property
    def changed(self) -> bool:
        """Whether writing :attr:`text` would change the file."""
        return self.text != self.original_text

    def summary(self) -> str:
        """Human-readable report: changed figures first, then warnings."""
        lines = [f"changed: {change}" for change in self.changes]
        lines += [f"warning: {warning}" for warning in self.warnings]
        if self.changed and not self.changes:
            lines.append("no figure changed, but the file's layout differs from the generated layout")
        if not self.changed:
            lines.append("catalogue is up to date")
        return "\n".join(lines)


# --- talking to EC2 -----------------------------------------------------------------------------------


def describe_instance_types(client: Ec2Client, names: Sequence[str]) -> dict[str, InstanceTypeInfo]:
    """``DescribeInstanceTypes`` for ``names``, following ``NextToken``, at most 100 names per call.

    Types not offered in the client's region are included (``IncludeUnsupportedInRegion``), so the
    figures do not depend on where the script runs.
    """
    paginator = client.get_paginator("describe_instance_types")
    found: dict[str, InstanceTypeInfo] = {}
    for chunk in _chunks(sorted(names), MAX_INSTANCE_TYPES_PER_CALL):
        for page in paginator.paginate(InstanceTypes=chunk, IncludeUnsupportedInRegion=True):
            for info in page.get("InstanceTypes", []):
                found[info["InstanceType"]] = info
    return found


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


# --- merging EC2's figures into the catalogue ---------------------------------------------------------


def parse_network_performance(text: str) -> float | None:
    """Gbit/s from EC2's ``NetworkPerformance``: ``"Up to 10 Gigabit"`` 10, ``"4x 100 Gigabit"`` 400.

    Returns ``None`` for the old qualitative ratings ("Moderate", "High" ...).
    """
    match = _NETWORK_PERFORMANCE.match(text.strip())
    if match is None:
        return None
    cards, gbps = match.groups()
    return float(gbps) * (int(cards) if cards else 1)


def merge(current: InstanceType, info: InstanceTypeInfo) -> tuple[InstanceType, list[str]]:
    """``current`` with the figures EC2 reports in ``info``; hand-maintained figures are kept.

    Returns the merged entry and warnings for figures that could not be taken from ``info``.
    """
    warnings: list[str] = []
    network = info.get("NetworkInfo", {})
    merged = dataclasses.replace(
        current,
        vcpus=int(info["VCpuInfo"]["DefaultVCpus"]),
        memory_gib=info["MemoryInfo"]["SizeInMiB"] / 1024,
        architecture=_architecture(current, info, warnings),
        accelerators=_accelerators(current, info, warnings),
        max_efa_interfaces=_efa_interfaces(network),
        max_network_cards=int(network.get("MaximumNetworkCards", 1)),
        network_gbps=_network_gbps(current, network, warnings),
    )
    if merged.gpudirect_rdma and not merged.efa_supported:
        warnings.append(f"{current.name}: gpudirect_rdma is True but EC2 reports no EFA; review it by hand")
    return merged, warnings


def _architecture(current: InstanceType, info: InstanceTypeInfo, warnings: list[str]) -> Architecture:
    reported = info.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    for architecture in (Architecture.ARM64, Architecture.X86_64):
        if architecture.value in reported:
            return architecture
    warnings.append(
        f"{current.name}: unsupported architectures {reported!r}; kept {current.architecture.value}"
    )
    return current.architecture


def _efa_interfaces(network: Mapping[str, Any]) -> int:
    if not network.get("EfaSupported", False):
        return 0
    return int(network.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0))


def _network_gbps(current: InstanceType, network: Mapping[str, Any], warnings: list[str]) -> float:
    reported = str(network.get("NetworkPerformance", ""))
    gbps = parse_network_performance(reported)
    if gbps is None:
        warnings.append(
            f"{current.name}: cannot read NetworkPerformance {reported!r}; kept {current.network_gbps}"
        )
        return current.network_gbps
    return gbps


def _accelerators(current: InstanceType, info: InstanceTypeInfo, warnings: list[str]) -> Accelerators | None:
    gpus = info.get("GpuInfo", {}).get("Gpus", [])
    neurons = info.get("NeuronInfo", {}).get("NeuronDevices", [])
    if gpus:
        return _device(current, gpus[0], _gpu_kind(gpus[0]), warnings)
    if neurons:
        return _device(current, neurons[0], _neuron_kind(neurons[0]), warnings)
    return None


def _gpu_kind(gpu: Mapping[str, Any]) -> AcceleratorKind | None:
    return AcceleratorKind.NVIDIA_GPU if gpu.get("Manufacturer") == "NVIDIA" else None


def _neuron_kind(device: Mapping[str, Any]) -> AcceleratorKind | None:
    return AcceleratorKind.TRAINIUM if str(device.get("Name", "")).startswith("Trainium") else None


def _device(
    current: InstanceType, device: Mapping[str, Any], kind: AcceleratorKind | None, warnings: list[str]
) -> Accelerators | None:
    name = f"{device.get('Manufacturer', '')} {device.get('Name', '')}".strip()
    if kind is None:
        warnings.append(
            f"{current.name}: accelerator {name!r} is not a kind the catalogue models; kept as is"
        )
        return current.accelerators
    count = int(device["Count"])
    return Accelerators(
        kind=kind,
        model=str(device["Name"]),
        count=count,
        memory_gib_each=_memory_gib_each(current, device, count, warnings),
        mig_capable=_mig_capable(current, str(device["Name"]), warnings),
        mig_profiles=_mig_profiles(current, str(device["Name"])),
    )


def _memory_gib_each(
    current: InstanceType, device: Mapping[str, Any], count: int, warnings: list[str]
) -> int:
    reported_gib = float(device.get("MemoryInfo", {}).get("SizeInMiB", 0)) / 1024
    known = current.accelerators.memory_gib_each if current.accelerators is not None else None
    # EC2 reports the whole instance's GPU memory as the per-GPU figure on some multi-GPU types
    # (g6e.12xlarge: 183105 MiB for 4 L40S of 45776 MiB each). Keep the per-GPU figure then.
    if known is not None and count > 1 and abs(reported_gib / count - known) < 1:
        warnings.append(
            f"{current.name}: EC2 reports {reported_gib:.0f} GiB per device, which is the instance total "
            f"for {count} devices; kept {known} GiB each"
        )
        return known
    return round(reported_gib)


def _mig_profiles(current: InstanceType, model: str) -> tuple[str, ...]:
    """Maintained by hand: kept while the model stays the same."""
    if current.accelerators is not None and current.accelerators.model == model:
        return current.accelerators.mig_profiles
    return ()


def _mig_capable(current: InstanceType, model: str, warnings: list[str]) -> bool:
    if current.accelerators is not None and current.accelerators.model == model:
        return current.accelerators.mig_capable
    warnings.append(
        f"{current.name}: accelerator model is now {model!r}; set mig_capable by hand (kept False)"
    )
    return False


def refresh(
    client: Ec2Client, current: Sequence[InstanceType]
) -> tuple[tuple[InstanceType, ...], tuple[str, ...]]:
    """The catalogue with EC2's figures merged in, and warnings, sorted by instance type name."""
    infos = describe_instance_types(client, [it.name for it in current])
    merged: list[InstanceType] = []
    warnings: list[str] = []
    for instance_type in sorted(current, key=lambda it: it.name):
        info = infos.get(instance_type.name)
        if info is None:
            warnings.append(f"{instance_type.name}: EC2 did not describe it; kept the current figures")
            merged.append(instance_type)
            continue
        updated, entry_warnings = merge(instance_type, info)
        merged.append(updated)
        warnings += entry_warnings
    return tuple(merged), tuple(warnings)


def changes_between(old: Sequence[InstanceType], new: Sequence[InstanceType]) -> tuple[Change, ...]:
    """Figure-by-figure differences between two versions of the catalogue, matched by name."""
    old_by_name = {it.name: _flatten(it) for it in old}
    changes: list[Change] = []
    for instance_type in new:
        before = old_by_name.get(instance_type.name, {})
        for field, value in _flatten(instance_type).items():
            if before.get(field) != value:
                changes.append(Change(instance_type.name, field, before.get(field), value))
    return tuple(changes)


def _flatten(instance_type: InstanceType) -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in to_row(instance_type).items():
        if isinstance(value, dict):
            flat.update({f"{key}.{inner}": inner_value for inner, inner_value in value.items()})
        else:
            flat[key] = value
    return flat


# --- reading and writing the data file ----------------------------------------------------------------


def render(instance_types: Sequence[InstanceType]) -> str:
    """Text of the data file for ``instance_types``: a JSON list of rows sorted by name, in one layout.

    Two spaces of indent, each row's keys in :class:`~training_clusters.catalog.InstanceTypeRow`'s order
    and a final newline: the same figures always give the same text.
    """
    rows = [to_row(it) for it in sorted(instance_types, key=lambda it: it.name)]
    return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"


def refresh_file(client: Ec2Client, path: Path = DATA_FILE) -> RefreshResult:
    """Merge EC2's figures into the data file at ``path``; returns what would be written, writes nothing."""
    original_text = path.read_text(encoding="utf-8")
    current = read_catalog(path)
    merged, warnings = refresh(client, current)
    return RefreshResult(original_text, render(merged), changes_between(current, merged), warnings)


# --- command line -------------------------------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--region", help="AWS region to ask (default: the profile's or environment's)")
    parser.add_argument("--profile", help="AWS named profile (default: the default credential chain)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the file would change")
    parser.add_argument("--data-file", type=Path, default=DATA_FILE, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def make_client(region: str | None, profile: str | None) -> Ec2Client:
    """A boto3 EC2 client for ``region`` and ``profile`` (``None``: boto3's defaults)."""
    return cast(Ec2Client, boto3.Session(profile_name=profile, region_name=region).client("ec2"))


def main(argv: Sequence[str] | None = None, *, client: Ec2Client | None = None) -> int:
    """Run the command line; ``client`` replaces the one built from ``--region``/``--profile``."""
    args = _parse_args(argv)
    try:
        result = refresh_file(client or make_client(args.region, args.profile), args.data_file)
    except (BotoCoreError, ClientError) as error:
        print(f"refresh_catalog: DescribeInstanceTypes failed: {error}", file=sys.stderr)
        return 2
    print(result.summary())
    if args.check:
        return 1 if result.changed else 0
    if result.changed:
        args.data_file.write_text(result.text, encoding="utf-8")
        print(f"wrote {args.data_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
