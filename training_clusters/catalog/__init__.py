"""Instance-type facts used across the library.

Launch templates read the EFA layout from here (how many interfaces, on how many network cards), the
ParallelCluster and HyperPod constructs validate instance types against it, preflight checks map a type
to its on-demand vCPU quota, and acceptance tests read the advertised bandwidth.

>>> from training_clusters.catalog import lookup
>>> p5 = lookup("p5.48xlarge")
>>> p5.max_efa_interfaces, p5.gpu_count, p5.hyperpod_name
(32, 8, 'ml.p5.48xlarge')

The figures live in ``catalog_data.json`` next to this module (package data), one row per type in the
shape of :class:`InstanceTypeRow`, read once at import and checked like a registered type. Those that EC2
reports (vcpus, memory_gib, architecture, the accelerators' kind, model, count and memory_gib_each,
max_efa_interfaces, max_network_cards, network_gbps) are regenerated from ``ec2:DescribeInstanceTypes`` by
``scripts/refresh_catalog.py``, which rewrites the whole file in one layout. The others (gpudirect_rdma,
quota_family, hyperpod_name, accelerators.mig_capable, source) are maintained by hand in the file and kept
by the script; each row's ``source`` names where its figures come from. To ship a new type, add its row to
the file and run the script.

A type launched after this release can be added from your own app, before you build constructs with it;
its facts are checked for consistency and every construct then accepts it::

    from training_clusters.catalog import register_instance_type
    register_instance_type({
        "name": "p6e-gb300.36xlarge", "vcpus": 144, "memory_gib": 960, "architecture": "arm64",
        "accelerators": {"kind": "nvidia-gpu", "model": "GB300", "count": 4, "memory_gib_each": 279,
                         "mig_capable": True},
        "max_efa_interfaces": 8, "max_network_cards": 8, "gpudirect_rdma": True, "network_gbps": 3200,
        "quota_family": "P", "hyperpod_name": None,
        "source": "aws ec2 describe-instance-types --instance-types p6e-gb300.36xlarge",
    })
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from importlib.resources.abc import Traversable
from types import MappingProxyType
from typing import Literal, NotRequired, TypedDict

from training_clusters.model.errors import ConfigurationError
from training_clusters.rules.instance_types import HYPERPOD_PREFIX

__all__ = [
    "CATALOG",
    "DATA_FILE_NAME",
    "HYPERPOD_PREFIX",
    "AcceleratorKind",
    "Accelerators",
    "AcceleratorsRow",
    "Architecture",
    "InstanceType",
    "InstanceTypeRow",
    "QuotaFamily",
    "all_instance_types",
    "architecture_of",
    "declared_type_problem",
    "from_row",
    "hyperpod_offer_problem",
    "instance_facts_problem",
    "instance_type_problem",
    "lookup",
    "lookup_hyperpod",
    "quota_family_of",
    "read_catalog",
    "register_instance_type",
    "to_row",
    "use_declared_types",
]


class Architecture(StrEnum):
    """CPU architecture, as EC2 spells it in ``ProcessorInfo.SupportedArchitectures``."""

    X86_64 = "x86_64"
    ARM64 = "arm64"


class AcceleratorKind(StrEnum):
    """The kind of accelerator an instance carries."""

    NVIDIA_GPU = "nvidia-gpu"
    TRAINIUM = "trainium"


class QuotaFamily(StrEnum):
    """EC2 on-demand vCPU quota family ("Running On-Demand <family> instances") an instance counts against."""

    P = "P"
    G_AND_VT = "G and VT"
    STANDARD = "Standard"
    TRN = "Trn"

    @property
    def quota_code(self) -> str:
        """Service Quotas code of the family's quota in service ``ec2``, e.g. ``L-417A185B`` for P."""
        return _QUOTAS[self][0]

    @property
    def quota_name(self) -> str:
        """Service Quotas name of the family's quota, e.g. ``Running On-Demand P instances``."""
        return _QUOTAS[self][1]

    @property
    def spot_quota_code(self) -> str:
        """Service Quotas code of the family's Spot vCPU quota, e.g. ``L-7212CCBC`` for P."""
        return _SPOT_QUOTAS[self][0]

    @property
    def spot_quota_name(self) -> str:
        """Service Quotas name of the family's Spot vCPU quota, e.g. ``All P Spot Instance Requests``."""
        return _SPOT_QUOTAS[self][1]


#: Instance families whose every size EC2 instance topology describes (three network nodes), and the single
#: types of other families it describes. Source: Amazon EC2 User Guide, "Prerequisites for Amazon EC2
#: topology" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html).
NETWORK_TOPOLOGY_FAMILIES = frozenset(
    {"g6e", "g7e", "hpc6a", "hpc6id", "hpc7a", "hpc7g", "trn1", "trn1n", "trn2", "trn2u"}
)
_THREE_LAYER_TYPES = frozenset(
    {
        "p3dn.24xlarge",
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.48xlarge",
        "p5e.48xlarge",
        "p5en.48xlarge",
        "p6e-gb200.36xlarge",
    }
)
_FOUR_LAYER_TYPES = frozenset({"p6-b200.48xlarge", "p6-b300.48xlarge"})

_QUOTAS: Mapping[QuotaFamily, tuple[str, str]] = MappingProxyType(
    {
        QuotaFamily.STANDARD: (
            "L-1216C47A",
            "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
        ),
        QuotaFamily.G_AND_VT: ("L-DB2E81BA", "Running On-Demand G and VT instances"),
        QuotaFamily.P: ("L-417A185B", "Running On-Demand P instances"),
        QuotaFamily.TRN: ("L-2C3B7624", "Running On-Demand Trn instances"),
    }
)
"""Code and name of each family's "Running On-Demand ... instances" vCPU quota (service code ``ec2``)."""

_SPOT_QUOTAS: Mapping[QuotaFamily, tuple[str, str]] = MappingProxyType(
    {
        QuotaFamily.STANDARD: (
            "L-34B43A08",
            "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
        ),
        QuotaFamily.G_AND_VT: ("L-3819A6DF", "All G and VT Spot Instance Requests"),
        QuotaFamily.P: ("L-7212CCBC", "All P Spot Instance Requests"),
        QuotaFamily.TRN: ("L-6B0D517C", "All Trn Spot Instance Requests"),
    }
)
"""Code and name of each family's Spot vCPU quota (service code ``ec2``).

Source: Amazon EC2 User Guide, "Spot Instance quotas"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-limits.html), whose table links each quota
to its Service Quotas console page by code.
"""


@dataclass(frozen=True)
class Accelerators:
    """The accelerators of one instance: all of one model."""

    kind: AcceleratorKind
    model: str
    """Model as EC2 names it: ``H100``, ``A10G``, ``L40S``, ``Trainium2`` ..."""
    count: int
    """Devices per instance (GPUs, or Neuron devices i.e. Trainium chips)."""
    memory_gib_each: int
    """Memory of one device in GiB, rounded to a whole GiB from what EC2 reports in MiB."""
    mig_capable: bool
    """Whether the GPU supports NVIDIA Multi-Instance GPU (A100, H100, H200, B200)."""
    mig_profiles: tuple[str, ...] = ()
    """The GPU instance profiles MIG offers on this GPU and memory size (``1g.10gb``, ``3g.40gb`` ...), as
    NVIDIA's MIG User Guide lists them ("Supported MIG Profiles"); empty when not MIG-capable or not known."""

    @property
    def total_memory_gib(self) -> int:
        """Accelerator memory of the whole instance in GiB."""
        return self.count * self.memory_gib_each


@dataclass(frozen=True)
class InstanceType:
    """What the library needs to know about one EC2 instance type."""

    name: str
    """EC2 name, e.g. ``p5.48xlarge``."""
    vcpus: int
    """Default vCPUs; this is also what the instance counts against its on-demand vCPU quota."""
    memory_gib: float
    architecture: Architecture
    accelerators: Accelerators | None
    """GPUs or Trainium chips; ``None`` for CPU-only types."""
    max_efa_interfaces: int
    """EC2 ``EfaInfo.MaximumEfaInterfaces``; 0 means the type has no EFA."""
    max_network_cards: int
    """EC2 ``NetworkInfo.MaximumNetworkCards``: one EFA interface per card at most."""
    gpudirect_rdma: bool
    """Whether ``FI_EFA_USE_DEVICE_RDMA=1`` is safe (p4d/p4de/p5*/p6/trn); on g5 it aborts."""
    network_gbps: float
    """Advertised network bandwidth in Gbit/s (the peak, for "Up to ..." types)."""
    quota_family: QuotaFamily
    hyperpod_name: str | None
    """``ml.`` name where SageMaker HyperPod offers the type, else ``None``."""
    source: str
    """Where the figures come from."""

    @property
    def efa_supported(self) -> bool:
        """Whether the type can carry at least one EFA interface."""
        return self.max_efa_interfaces > 0

    @property
    def is_gpu(self) -> bool:
        """Whether the type carries NVIDIA GPUs."""
        return self.accelerators is not None and self.accelerators.kind is AcceleratorKind.NVIDIA_GPU

    @property
    def is_trainium(self) -> bool:
        """Whether the type carries AWS Trainium chips (Neuron devices)."""
        return self.accelerators is not None and self.accelerators.kind is AcceleratorKind.TRAINIUM

    @property
    def gpu_count(self) -> int:
        """NVIDIA GPUs per instance; 0 for CPU-only and Trainium types."""
        return self.accelerators.count if self.is_gpu and self.accelerators is not None else 0

    @property
    def accelerator_count(self) -> int:
        """GPUs or Trainium chips per instance; 0 for CPU-only types."""
        return self.accelerators.count if self.accelerators is not None else 0

    @property
    def hyperpod_available(self) -> bool:
        """Whether SageMaker HyperPod offers the type."""
        return self.hyperpod_name is not None

    @property
    def network_node_layers(self) -> int:
        """How many network-node layers EC2 instance topology describes for the type (3 or 4), 0 for none.

        Where it describes them, EKS labels each node ``topology.k8s.aws/network-node-layer-1`` (farthest) to
        ``-3`` (nearest): what topology-aware placement reads. See :data:`NETWORK_TOPOLOGY_FAMILIES`.
        """
        if self.name in _FOUR_LAYER_TYPES:
            return 4
        family = self.name.split(".", 1)[0]
        return 3 if self.name in _THREE_LAYER_TYPES or family in NETWORK_TOPOLOGY_FAMILIES else 0


class AcceleratorsRow(TypedDict):
    """:class:`Accelerators` as plain data: the ``accelerators`` of a row of ``catalog_data.json``."""

    kind: Literal["nvidia-gpu", "trainium"]
    model: str
    count: int
    memory_gib_each: int
    mig_capable: bool
    mig_profiles: NotRequired[list[str]]


class InstanceTypeRow(TypedDict):
    """:class:`InstanceType` as plain data: a row of ``catalog_data.json``."""

    name: str
    vcpus: int
    memory_gib: float
    architecture: Literal["x86_64", "arm64"]
    accelerators: AcceleratorsRow | None
    max_efa_interfaces: int
    max_network_cards: int
    gpudirect_rdma: bool
    network_gbps: float
    quota_family: Literal["P", "G and VT", "Standard", "Trn"]
    hyperpod_name: str | None
    source: str


def from_row(row: InstanceTypeRow) -> InstanceType:
    """Build an :class:`InstanceType` from its plain-data form."""
    accelerators = row["accelerators"]
    return InstanceType(
        name=row["name"],
        vcpus=row["vcpus"],
        memory_gib=float(row["memory_gib"]),
        architecture=Architecture(row["architecture"]),
        accelerators=None if accelerators is None else _accelerators_from_row(accelerators),
        max_efa_interfaces=row["max_efa_interfaces"],
        max_network_cards=row["max_network_cards"],
        gpudirect_rdma=row["gpudirect_rdma"],
        network_gbps=float(row["network_gbps"]),
        quota_family=QuotaFamily(row["quota_family"]),
        hyperpod_name=row["hyperpod_name"],
        source=row["source"],
    )


def _accelerators_from_row(row: AcceleratorsRow) -> Accelerators:
    return Accelerators(
        kind=AcceleratorKind(row["kind"]),
        model=row["model"],
        count=row["count"],
        memory_gib_each=row["memory_gib_each"],
        mig_capable=row["mig_capable"],
        mig_profiles=tuple(row.get("mig_profiles", ())),
    )


def to_row(instance_type: InstanceType) -> InstanceTypeRow:
    """The plain-data form of an :class:`InstanceType` (inverse of :func:`from_row`)."""
    accelerators = instance_type.accelerators
    return {
        "name": instance_type.name,
        "vcpus": instance_type.vcpus,
        "memory_gib": instance_type.memory_gib,
        "architecture": instance_type.architecture.value,
        "accelerators": None if accelerators is None else _accelerators_to_row(accelerators),
        "max_efa_interfaces": instance_type.max_efa_interfaces,
        "max_network_cards": instance_type.max_network_cards,
        "gpudirect_rdma": instance_type.gpudirect_rdma,
        "network_gbps": instance_type.network_gbps,
        "quota_family": instance_type.quota_family.value,
        "hyperpod_name": instance_type.hyperpod_name,
        "source": instance_type.source,
    }


def _accelerators_to_row(accelerators: Accelerators) -> AcceleratorsRow:
    row: AcceleratorsRow = {
        "kind": accelerators.kind.value,
        "model": accelerators.model,
        "count": accelerators.count,
        "memory_gib_each": accelerators.memory_gib_each,
        "mig_capable": accelerators.mig_capable,
    }
    if accelerators.mig_profiles:
        row["mig_profiles"] = list(accelerators.mig_profiles)
    return row


_NAME = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")
_MIG_PROFILE = re.compile(r"^[1-7]g\.[0-9]+gb$")

DATA_FILE_NAME = "catalog_data.json"
"""The shipped figures: package data next to this module, a JSON list of :class:`InstanceTypeRow`."""


def register_instance_type(facts: InstanceType | InstanceTypeRow) -> InstanceType:
    """Add an instance type the catalogue does not know yet (one launched after this release).

    ``facts`` is an :class:`InstanceType` or its plain-data form (:class:`InstanceTypeRow`, the shape of a
    row of ``catalog_data.json``). They are checked for consistency: a name like ``p6.48xlarge``, positive
    vCPUs and memory, EFA interfaces within the network cards, GPUDirect RDMA only with EFA and accelerators,
    a HyperPod name of ``ml.<name>`` or none. Registering the same facts again does nothing; different facts
    for a known type are refused (the shipped figures are not overridden).

    :raises ConfigurationError: naming the fact, the value and what is allowed.
    """
    instance = _checked(facts, label=lambda name: f"register_instance_type({name!r})")
    known = _TYPES.get(instance.name)
    if known is not None:
        if known == instance:
            return known
        raise ConfigurationError(
            f"register_instance_type({instance.name!r}): the catalogue already holds different facts for it "
            f"({known.source}); registering does not override shipped figures"
        )
    everything = sorted([*_TYPES.values(), instance], key=lambda it: it.name)
    _TYPES.clear()
    _TYPES.update((it.name, it) for it in everything)
    return instance


def read_catalog(file: Traversable) -> tuple[InstanceType, ...]:
    """The instance types of a data file shaped like ``catalog_data.json``, in the file's order.

    Every row is checked as :func:`register_instance_type` checks its facts, and each name appears once, so
    a broken figure in the file stops the import of this module rather than reaching a construct.

    :raises ConfigurationError: naming the file, the instance type and the fact that is wrong.
    """
    with file.open(encoding="utf-8") as stream:
        rows: list[InstanceTypeRow] = json.load(stream)
    if not isinstance(rows, list):
        raise ConfigurationError(f"{file.name}: expected a list of instance types, got {type(rows).__name__}")
    found: dict[str, InstanceType] = {}
    for row in rows:
        instance = _checked(row, label=lambda name: f"{file.name}: instance type {name!r}")
        if instance.name in found:
            raise ConfigurationError(f"{file.name}: instance type {instance.name!r} has more than one row")
        found[instance.name] = instance
    return tuple(found.values())


def _checked(facts: object, *, label: Callable[[object], str]) -> InstanceType:
    """``facts`` (an :class:`InstanceType` or its row) once consistent; errors start with ``label(name)``."""
    instance = facts if isinstance(facts, InstanceType) else _from_row_checked(facts, label)
    problem = instance_facts_problem(instance)
    if problem:
        raise ConfigurationError(f"{label(instance.name)}: {problem}")
    return instance


def _from_row_checked(row: object, label: Callable[[object], str]) -> InstanceType:
    if not isinstance(row, dict):
        raise ConfigurationError(
            f"{label('?')}: expected an InstanceType or a mapping of its facts, got {type(row).__name__}"
        )
    missing = sorted(set(InstanceTypeRow.__annotations__) - set(row))
    unknown = sorted(set(row) - set(InstanceTypeRow.__annotations__))
    if missing or unknown:
        raise ConfigurationError(
            f"{label(row.get('name', '?'))}: "
            + "; ".join(
                part
                for part in (
                    f"missing {', '.join(missing)}" if missing else "",
                    f"unknown {', '.join(unknown)}" if unknown else "",
                )
                if part
            )
            + f" (facts: {', '.join(InstanceTypeRow.__annotations__)})"
        )
    try:
        return from_row(row)  # type: ignore[arg-type]
    except (ValueError, KeyError, TypeError) as error:
        # every fact is present (checked above), the name among them
        raise ConfigurationError(f"{label(row['name'])}: {error}") from None


def instance_facts_problem(it: InstanceType) -> str | None:
    """The first inconsistency among an instance type's facts, or None: the rules every catalogue row, every
    registered type and every type an environment file declares (``instance_types:``) follows."""
    checks: list[tuple[bool, str]] = [
        (
            isinstance(it.name, str) and bool(_NAME.fullmatch(it.name)),
            f"name must look like 'p5.48xlarge', got {it.name!r}",
        ),
        (
            isinstance(it.vcpus, int) and it.vcpus > 0,
            f"vcpus must be a positive whole number, got {it.vcpus!r}",
        ),
        (it.memory_gib > 0, f"memory_gib must be positive, got {it.memory_gib!r}"),
        (
            isinstance(it.max_network_cards, int) and it.max_network_cards >= 1,
            f"max_network_cards must be 1 or more, got {it.max_network_cards!r}",
        ),
        (
            isinstance(it.max_efa_interfaces, int) and 0 <= it.max_efa_interfaces <= it.max_network_cards,
            f"max_efa_interfaces must be between 0 and max_network_cards ({it.max_network_cards}) "
            f"(one EFA interface per network card at most), got {it.max_efa_interfaces!r}",
        ),
        (
            not it.gpudirect_rdma or (it.max_efa_interfaces > 0 and it.accelerators is not None),
            "gpudirect_rdma needs EFA interfaces and accelerators",
        ),
        (it.network_gbps > 0, f"network_gbps must be positive, got {it.network_gbps!r}"),
        (
            it.hyperpod_name in (None, HYPERPOD_PREFIX + it.name),
            f"hyperpod_name must be {HYPERPOD_PREFIX + it.name!r} or None, got {it.hyperpod_name!r}",
        ),
        (
            it.accelerators is None or (it.accelerators.count > 0 and it.accelerators.memory_gib_each > 0),
            "accelerators.count and accelerators.memory_gib_each must be positive",
        ),
        (
            it.accelerators is None
            or not it.accelerators.mig_profiles
            or (
                it.accelerators.mig_capable
                and all(_MIG_PROFILE.fullmatch(p) for p in it.accelerators.mig_profiles)
            ),
            "accelerators.mig_profiles must be MIG profiles such as '1g.10gb' on a mig_capable GPU",
        ),
        (bool(it.source), "source must say where the figures come from"),
    ]
    return next((message for ok, message in checks if not ok), None)


_TYPES: dict[str, InstanceType] = {
    it.name: it
    for it in sorted(
        read_catalog(resources.files("training_clusters.catalog") / DATA_FILE_NAME), key=lambda it: it.name
    )
}
#: The types the environment file loaded last in this context declares (``instance_types:``): seen through
#: :data:`CATALOG` by everything that file's stack, preflight and acceptance look up, and by nothing else (a
#: thread or a later file starts from its own).
_DECLARED: ContextVar[Mapping[str, InstanceType]] = ContextVar(
    "training_clusters_declared_instance_types", default=MappingProxyType({})
)


class _Catalogue(Mapping[str, InstanceType]):
    """The shipped and registered types, with the current environment file's declared ones."""

    def __getitem__(self, name: str) -> InstanceType:
        declared = _DECLARED.get()
        return declared[name] if name in declared else _TYPES[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({*_TYPES, *_DECLARED.get()}))

    def __len__(self) -> int:
        return len({*_TYPES, *_DECLARED.get()})


CATALOG: Mapping[str, InstanceType] = _Catalogue()
"""Every catalogued instance type by EC2 name, sorted by name, with any you registered and those the environment
file loaded last declares. Read-only."""


def all_instance_types() -> tuple[InstanceType, ...]:
    """Every catalogued instance type, sorted by name."""
    return tuple(CATALOG.values())


def lookup(name: str, *, field: str = "instance_type") -> InstanceType:
    """Facts about ``name``, given as ``p5.48xlarge`` or SageMaker's ``ml.p5.48xlarge``.

    ``field`` names the setting being validated; it starts the error message.

    :raises ConfigurationError: ``name`` is not in the catalogue.
    """
    _require_string(name, field)
    found = CATALOG.get(name.removeprefix(HYPERPOD_PREFIX))
    if found is None:
        raise ConfigurationError(f"{field}: {_not_catalogued(name)}")
    return found


def instance_type_problem(name: str) -> str | None:
    """Why ``name`` (an EC2 name such as ``p5.48xlarge``) is not usable here, or None when catalogued."""
    return None if name in CATALOG else _not_catalogued(name)


def _not_catalogued(name: str) -> str:
    return (
        f"{name!r} is not in the catalogue (`training-clusters catalog` lists its types); give its facts with "
        "training_clusters.catalog.register_instance_type(...) first"
    )


#: Who declared each type an environment file added (``instance_types:``): its file, for messages.
_DECLARED_BY: dict[str, str] = {}


def declared_type_problem(facts: InstanceType) -> str | None:
    """Why an environment file cannot declare ``facts`` (its ``instance_types:``), or None: the catalogue holds
    other facts for that type (shipped or registered ones are not overridden). The facts themselves follow
    :func:`instance_facts_problem`, checked by the caller."""
    known = _TYPES.get(facts.name)
    if known is None or known == facts:
        return None
    return (
        f"{facts.name!r}: the catalogue holds other facts for it (`training-clusters catalog` shows them); one set "
        "of facts per type: remove it here to use those, or make them equal"
    )


def use_declared_types(types: Iterable[InstanceType]) -> None:
    """Make ``types`` (an environment file's ``instance_types:``, each checked) the declared types
    :data:`CATALOG` shows in this context, in place of any an earlier file declared: each file sees its own."""
    _DECLARED.set(MappingProxyType({it.name: it for it in types}))


#: Processor letters of EC2 family names whose processors are AWS Graviton (Arm): the ``g`` in ``c7g``,
#: ``m7gd``, ``c6gn``, ``is4gen``, ``p6e-gb200`` ("Amazon EC2 instance type naming conventions",
#: https://docs.aws.amazon.com/ec2/latest/instancetypes/instance-type-names.html); ``a1`` predates it.
_ARM_FAMILY = re.compile(r"^(?:a1|[a-z]+[0-9]+[a-z]*g[a-z]*(?:-.*)?|[a-z]+[0-9]+[a-z]*-g.*)$")


def architecture_of(name: str) -> Architecture:
    """The CPU architecture of EC2 type ``name``: the catalogue's, else read from the family name as EC2 spells
    it (a ``g`` among the processor letters is AWS Graviton: ``c7g``, ``m7gd``, ``t4g``; else x86_64).

    >>> architecture_of("c7g.xlarge"), architecture_of("m7i.xlarge"), architecture_of("g5g.xlarge")
    (<Architecture.ARM64: 'arm64'>, <Architecture.X86_64: 'x86_64'>, <Architecture.ARM64: 'arm64'>)
    """
    known = CATALOG.get(name.removeprefix(HYPERPOD_PREFIX))
    if known is not None:
        return known.architecture
    family = name.removeprefix(HYPERPOD_PREFIX).split(".", 1)[0]
    return Architecture.ARM64 if _ARM_FAMILY.fullmatch(family) else Architecture.X86_64


def lookup_hyperpod(name: str, *, field: str = "instance_type") -> InstanceType:
    """Facts about a SageMaker HyperPod instance type, which must be given in its ``ml.`` form.

    :raises ConfigurationError: ``name`` lacks the ``ml.`` prefix, is not in the catalogue, or is not
        offered by HyperPod.
    """
    _require_string(name, field)
    if not name.startswith(HYPERPOD_PREFIX):
        raise ConfigurationError(_missing_prefix_message(name, field))
    found = CATALOG.get(name.removeprefix(HYPERPOD_PREFIX))
    if found is None:
        raise ConfigurationError(f"{field}: {_not_catalogued(name)}")
    if found.hyperpod_name is None:
        raise ConfigurationError(f"{field}: {hyperpod_offer_problem(name)}")
    return found


def hyperpod_offer_problem(name: str) -> str | None:
    """Why HyperPod type ``name`` (``ml.`` form) cannot be used for a controller or login group, or None: such a
    group may be any type HyperPod sells, so only a type the catalogue knows HyperPod not to offer is refused."""
    known = CATALOG.get(name.removeprefix(HYPERPOD_PREFIX))
    if known is None or known.hyperpod_name is not None:
        return None
    return f"{name!r} is not offered by SageMaker HyperPod (`training-clusters catalog` lists the types it offers)"


#: The letters before the generation digit of the EC2 families each vCPU quota covers, as the quotas' names
#: say ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "... G and VT ...", "... P ...",
#: "... Trn ..."). Other families (F, Inf, X, U, HPC, DL, Mac) have quotas of their own.
_QUOTA_FAMILY_LETTERS: Mapping[str, QuotaFamily] = MappingProxyType(
    {
        **{
            letters: QuotaFamily.STANDARD
            for letters in ("a", "c", "d", "h", "i", "im", "is", "m", "r", "t", "z")
        },
        **{letters: QuotaFamily.G_AND_VT for letters in ("g", "gr", "vt")},
        "p": QuotaFamily.P,
        "trn": QuotaFamily.TRN,
    }
)


def quota_family_of(name: str) -> QuotaFamily | None:
    """The vCPU quota family of EC2 type ``name``: the catalogue's, else read from its family's letters
    (``c7i`` Standard, ``g6e`` G and VT, ``p6-b300`` P, ``trn2`` Trn); None for a family with a quota of its own.

    >>> quota_family_of("c7i.2xlarge"), quota_family_of("x2iedn.xlarge")
    (<QuotaFamily.STANDARD: 'Standard'>, None)
    """
    known = CATALOG.get(name.removeprefix(HYPERPOD_PREFIX))
    if known is not None:
        return known.quota_family
    letters = re.match(r"[a-z]*", name.removeprefix(HYPERPOD_PREFIX))
    return _QUOTA_FAMILY_LETTERS.get(letters.group(0) if letters else "")


def _require_string(name: object, field: str) -> None:
    if not isinstance(name, str):
        raise ConfigurationError(
            f"{field}: expected an instance type name such as 'p5.48xlarge', got {name!r}"
        )


def _missing_prefix_message(name: str, field: str) -> str:
    message = f"{field}: HyperPod instance types start with {HYPERPOD_PREFIX!r}, got {name!r}"
    known = CATALOG.get(name)
    if known is not None and known.hyperpod_name is not None:
        message += f" (did you mean {known.hyperpod_name!r}?)"
    return message
