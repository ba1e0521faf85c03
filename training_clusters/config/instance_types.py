"""``instance_types``: the facts of instance types the catalogue does not know yet."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from training_clusters.catalog import (
    AcceleratorKind,
    Accelerators,
    Architecture,
    InstanceType,
    QuotaFamily,
    declared_type_problem,
    instance_facts_problem,
)
from training_clusters.config.base import _FieldProblem, _follows, _Model, _raise_at, _raise_if
from training_clusters.rules.common import duplicates_problem
from training_clusters.rules.instance_types import (
    instance_type_name_problem,
)


class AcceleratorFactsConfig(_Model):
    """``instance_types[].accelerators``: the accelerators of a declared type, all of one model."""

    kind: Literal["nvidia-gpu", "trainium"] = Field(
        default="nvidia-gpu",
        description="nvidia-gpu, or trainium for AWS Trainium (Neuron devices). Default: nvidia-gpu.",
    )
    model: str = Field(
        min_length=1, description="As EC2 names it (GpuInfo / NeuronInfo): B200, Trainium2 ..."
    )
    count: int = Field(description="Devices per instance (GPUs, or Neuron devices).")
    memory_gib_each: int = Field(description="Memory of one device in GiB.")
    mig_capable: bool = Field(default=False, description="NVIDIA Multi-Instance GPU. Default: false.")
    mig_profiles: list[str] = Field(
        default_factory=list, description="MIG profiles such as 1g.23gb, as NVIDIA lists them. Default: none."
    )


class InstanceTypeFactsConfig(_Model):
    """``instance_types[]``: the facts of a type the catalogue does not know, in the shape of the catalogue's
    rows (``training-clusters catalog --output json``) and checked by the same rules; the figures are EC2
    ``DescribeInstanceTypes``' (``aws ec2 describe-instance-types --instance-types NAME``)."""

    name: str = Field(description="EC2 name, e.g. p6-b300.48xlarge.")
    vcpus: int = Field(description="VCpuInfo.DefaultVCpus.")
    memory_gib: float = Field(description="MemoryInfo.SizeInMiB / 1024.")
    architecture: Literal["x86_64", "arm64"] = Field(
        default="x86_64", description="ProcessorInfo.SupportedArchitectures. Default: x86_64."
    )
    accelerators: AcceleratorFactsConfig | None = Field(
        default=None, description="GpuInfo or NeuronInfo. Default: none (a CPU type)."
    )
    max_efa_interfaces: int = Field(
        default=0, description="NetworkInfo.EfaInfo.MaximumEfaInterfaces. Default: 0 (no EFA)."
    )
    max_network_cards: int | None = Field(
        default=None,
        description="NetworkInfo.MaximumNetworkCards. Default: max_efa_interfaces (at least 1).",
    )
    gpudirect_rdma: bool = Field(
        default=False,
        description="Whether FI_EFA_USE_DEVICE_RDMA=1 is safe (p4d and later, Trainium). Default: false.",
    )
    network_gbps: float = Field(description="NetworkInfo.NetworkPerformance in Gbit/s (the peak).")
    quota_family: Literal["P", "G and VT", "Standard", "Trn"] = Field(
        description="The EC2 vCPU quota it counts against: P, G and VT, Standard or Trn."
    )
    hyperpod_name: str | None = Field(
        default=None, description="ml.<name> where SageMaker HyperPod offers it. Default: not offered."
    )
    source: str = Field(min_length=1, description="Where the figures come from (a page, or the CLI call).")

    _name = field_validator("name")(_follows(instance_type_name_problem))

    def facts(self) -> InstanceType:
        """The declared type as the catalogue holds one."""
        accelerators = self.accelerators
        return InstanceType(
            name=self.name,
            vcpus=self.vcpus,
            memory_gib=self.memory_gib,
            architecture=Architecture(self.architecture),
            accelerators=None
            if accelerators is None
            else Accelerators(
                kind=AcceleratorKind(accelerators.kind),
                model=accelerators.model,
                count=accelerators.count,
                memory_gib_each=accelerators.memory_gib_each,
                mig_capable=accelerators.mig_capable,
                mig_profiles=tuple(accelerators.mig_profiles),
            ),
            max_efa_interfaces=self.max_efa_interfaces,
            max_network_cards=self.max_network_cards
            if self.max_network_cards is not None
            else max(1, self.max_efa_interfaces),
            gpudirect_rdma=self.gpudirect_rdma,
            network_gbps=self.network_gbps,
            quota_family=QuotaFamily(self.quota_family),
            hyperpod_name=self.hyperpod_name,
            source=self.source,
        )

    @model_validator(mode="after")
    def _consistent(self) -> InstanceTypeFactsConfig:
        """The catalogue's rules, reported at the fact each names first (``vcpus must be ...``)."""
        problem = instance_facts_problem(self.facts())
        if problem:
            fact, _, rest = problem.partition(" ")
            if fact.split(".")[0] in type(self).model_fields:
                raise _FieldProblem(fact, rest)
            raise ValueError(problem)
        return self


def _declared_types(value: list[InstanceTypeFactsConfig]) -> list[InstanceTypeFactsConfig]:
    """Each declared type once, none with other facts than the catalogue holds for it."""
    _raise_if(duplicates_problem(t.name for t in value), "names")
    for index, declared in enumerate(value):
        _raise_at(f"{index}", declared_type_problem(declared.facts()))
    return value


class _DeclaredTypes(BaseModel):
    """The ``instance_types`` of a document alone: read before the rest, which may use them."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    instance_types: Annotated[list[InstanceTypeFactsConfig], AfterValidator(_declared_types)] = []
