"""Instance type names: what EC2 and SageMaker HyperPod accept as a type's spelling.

A controller, login, head or system node may be any type the service sells, so its name is checked for its
shape only (the catalogue's facts are needed where accelerators or EFA are used). EC2 spells a type
``<family>.<size>`` ("Amazon EC2 instance type naming conventions",
https://docs.aws.amazon.com/ec2/latest/instancetypes/instance-type-names.html): the family is everything
before the period (``c7i``, ``m7i-flex``, ``p6-b200``, ``u7i-12tb``), the size after it (``large``,
``2xlarge``, ``metal``, ``metal-24xl``). SageMaker spells the same types with ``ml.`` in front
(``ml.m7i.xlarge``; ``InstanceType`` of ``AWS::SageMaker::Cluster`` instance groups).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from training_clusters.model.errors import excerpt

if TYPE_CHECKING:  # the catalogue imports these rules: its class is only named here
    from training_clusters.catalog import InstanceType

HYPERPOD_PREFIX = "ml."
"""SageMaker spells instance types with this prefix: ``ml.p5.48xlarge``."""

_FAMILY = r"[a-z]+[0-9]*[a-z0-9]*(?:-[a-z0-9]+)*"
_SIZE = r"(?:nano|micro|small|medium|large|[0-9]*xlarge|metal(?:-[0-9]+xl)?)"
_EC2_NAME = re.compile(rf"^{_FAMILY}\.{_SIZE}$")


def instance_type_name_problem(name: object) -> str | None:
    """None when ``name`` is spelt as EC2 spells a type (``c7i.2xlarge``), else what is allowed.

    >>> instance_type_name_problem("c7i.2xlarge") is None
    True
    >>> instance_type_name_problem("c7i-2xlarge")
    "must be an EC2 instance type such as 'c7i.2xlarge' (family.size), got 'c7i-2xlarge'"
    """
    if isinstance(name, str) and name.startswith(HYPERPOD_PREFIX):
        return (
            f"must be the EC2 name such as 'c7i.2xlarge', got {excerpt(name)} "
            f"(did you mean {excerpt(name.removeprefix(HYPERPOD_PREFIX))}?)"
        )
    if isinstance(name, str) and _EC2_NAME.fullmatch(name) and len(name) <= 64:
        return None
    return f"must be an EC2 instance type such as 'c7i.2xlarge' (family.size), got {excerpt(name)}"


def hyperpod_instance_type_name_problem(name: object) -> str | None:
    """None when ``name`` is spelt as SageMaker HyperPod spells a type (``ml.m7i.xlarge``), else what is allowed.

    >>> hyperpod_instance_type_name_problem("m7i.xlarge")
    "HyperPod instance types start with 'ml.', got 'm7i.xlarge' (did you mean 'ml.m7i.xlarge'?)"
    """
    if not isinstance(name, str) or not name.startswith(HYPERPOD_PREFIX):
        hint = ""
        if isinstance(name, str) and instance_type_name_problem(name) is None:
            hint = f" (did you mean {HYPERPOD_PREFIX + name!r}?)"
        return f"HyperPod instance types start with {HYPERPOD_PREFIX!r}, got {excerpt(name)}{hint}"
    if _EC2_NAME.fullmatch(name.removeprefix(HYPERPOD_PREFIX)) and len(name) <= 67:
        return None
    return f"must be a HyperPod instance type such as 'ml.m7i.xlarge' (ml.family.size), got {excerpt(name)}"


def undeclared_type_problem(name: str) -> str:
    """What to say about a type an environment file uses for accelerated or EFA nodes that the catalogue does
    not know: the file declares its facts itself (``instance_types:``)."""
    return (
        f"{name!r} is not in the catalogue (`training-clusters catalog` lists its types); give its facts in "
        "this file under instance_types: (name, vcpus, memory_gib, accelerators, max_efa_interfaces, "
        "gpudirect_rdma, network_gbps, quota_family, source)"
    )


def efa_interfaces_problem(instance: InstanceType, wanted: int) -> str | None:
    """EFA interfaces per node (an EKS nodegroup's, a PCS node group's): one per network card, at most the
    instance's maximum (EC2 ``EfaInfo.MaximumEfaInterfaces``)."""
    maximum = min(instance.max_efa_interfaces, instance.max_network_cards)
    if 1 <= wanted <= maximum:
        return None
    return f"must be between 1 and {maximum} for {instance.name} (one per network card), got {wanted}"
