"""Reading a CloudFormation template's values: resources, references, literals and deploy-time values, and the
facts the readers share (what a retained resource is called, HyperPod's lifecycle settings, manifests)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import yaml

from training_clusters.catalog import CATALOG, HYPERPOD_PREFIX
from training_clusters.diagram.graph import TIMES, Node, NodeRole
from training_clusters.diagram.scheduling import (
    INSTANCE_TYPE_LABEL,
    NodeGroupLabels,
    Taint,
)
from training_clusters.node_scripts.hyperpod.lib import cluster_config as lifecycle_files


def retained_logical_ids(template: Mapping[str, Any]) -> set[str]:
    """Resources whose ``DeletionPolicy`` is ``Retain`` (or ``RetainExceptOnCreate``)."""
    return {
        logical_id
        for logical_id, resource in _resources(template).items()
        if resource.get("DeletionPolicy") in _RETAIN_POLICIES
    }


# --------------------------------------------------------------------------------------------------
# reading template values

_RETAIN_POLICIES = ("Retain", "RetainExceptOnCreate")
_DEPLOY_TIME = "(deploy time)"
_CDK_HASH = re.compile(r"[0-9A-F]{8}$")


def _resources(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The template's resources by logical id; what is not a JSON object is no resource and is passed over
    (CloudFormation would refuse the template)."""
    resources = template.get("Resources", {})
    if not isinstance(resources, dict):
        return {}
    return {logical_id: resource for logical_id, resource in resources.items() if isinstance(resource, dict)}


def _target(value: Any) -> str | None:
    """The logical id a ``Ref`` or ``Fn::GetAtt`` points at."""
    if isinstance(value, dict) and len(value) == 1:
        if "Ref" in value and isinstance(value["Ref"], str):
            return value["Ref"]
        attribute = value.get("Fn::GetAtt")
        if isinstance(attribute, list) and attribute and isinstance(attribute[0], str):
            return attribute[0]
        if isinstance(attribute, str):
            return attribute.split(".", 1)[0]
    return None


def _targets(value: Any) -> Iterator[str]:
    """Every logical id referenced anywhere inside ``value``."""
    target = _target(value)
    if target is not None:
        yield target
    elif isinstance(value, dict):
        for item in value.values():
            yield from _targets(item)
    elif isinstance(value, list):
        for item in value:
            yield from _targets(item)


def _literal(value: Any) -> str | None:
    """``value`` as text when the template holds it literally."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _text(value: Any, placeholder: str = _DEPLOY_TIME) -> str:
    """``value`` as text: literals as they are, ``Fn::Join`` with its tokens as ``placeholder``."""
    literal = _literal(value)
    if literal is not None:
        return literal
    join = _list(_dict(value).get("Fn::Join"))
    separator, parts = (join[0], join[1]) if len(join) == 2 else (None, None)
    if isinstance(separator, str) and isinstance(parts, list):
        return separator.join(_text(part, placeholder) for part in parts)
    return placeholder


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _readable(logical_id: str) -> str:
    """A CDK logical id without its hash suffix: ``SharedStorageA8297BFB`` -> ``SharedStorage``."""
    stripped = _CDK_HASH.sub("", logical_id)
    return stripped or logical_id


def _count(desired: Any, low: Any, high: Any) -> str:
    """``2`` when fixed, ``0-4`` for a range, ``2 (1-4)`` when a desired size sits inside a range."""
    low_text, high_text = _literal(low), _literal(high)
    desired_text = _literal(desired)
    if low_text is not None and high_text is not None and low_text != high_text:
        span = f"{low_text}-{high_text}"
        return f"{desired_text} ({span})" if desired_text is not None else span
    return desired_text or high_text or low_text or _DEPLOY_TIME


def _catalog_efa(instance_type: str | None) -> int | None:
    if instance_type is None:
        return None
    found = CATALOG.get(instance_type.removeprefix(HYPERPOD_PREFIX))
    return found.max_efa_interfaces if found is not None else None


def _instance_facts(instance_type: str | None) -> list[str]:
    """The accelerators of a catalogued type: ``8 x H100`` (multiplication sign)."""
    found = CATALOG.get((instance_type or "").removeprefix(HYPERPOD_PREFIX))
    if found is None or found.accelerators is None:
        return []
    return [f"{found.accelerators.count} {TIMES} {found.accelerators.model}"]


def _efa_line(efa: int | None) -> list[str]:
    if efa is None:
        return ["EFA: not in the catalogue"]
    if efa == 0:
        return []
    return [f"{efa} EFA interface{'s' if efa != 1 else ''} per node"]


def _group_details(instance_type: str | None, count: str, efa: int | None) -> list[str]:
    """The first lines of a node group's box: ``p5.48xlarge x 2``, its accelerators, its EFA interfaces."""
    return [
        f"{instance_type or _DEPLOY_TIME} {TIMES} {count}",
        *_instance_facts(instance_type),
        *_efa_line(efa),
    ]


def _efa_interfaces(launch_template_data: Mapping[str, Any]) -> int:
    """How many EFA (or EFA-only) interfaces a launch template gives each instance."""
    interfaces = _list(launch_template_data.get("NetworkInterfaces"))
    return sum(1 for i in interfaces if _dict(i).get("InterfaceType") in ("efa", "efa-only"))


#: EKS's spelling of taint effects (``AWS::EKS::Nodegroup`` ``Taints``) -> Kubernetes'.
_EKS_TAINT_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}


def _taint(value: Any, effects: Mapping[str, str] | None = None) -> Taint:
    """A taint as a template writes it (``Key``, ``Value``, ``Effect``); an effect not known is kept as it is."""
    taint = _dict(value)
    effect = _text(taint.get("Effect"), "NoSchedule")
    return Taint(
        _text(taint.get("Key"), ""), _text(taint.get("Value"), ""), (effects or {}).get(effect, effect)
    )


def _node_labels(
    labels: Mapping[str, Any], instance_types: list[str | None], taints: list[Taint]
) -> NodeGroupLabels:
    """A node group's labels (the template's, and the instance type label the kubelet sets) and taints."""
    found: dict[str, tuple[str, ...]] = {str(key): (_text(value),) for key, value in labels.items()}
    types = tuple(t for t in instance_types if t is not None)
    if types:
        found[INSTANCE_TYPE_LABEL] = types
    return NodeGroupLabels(found, tuple(taints))


def _json_values(value: Any) -> Any:
    """Helm values or EKS configuration values: an object, or JSON text of one (deploy-time values left as
    placeholders)."""
    if isinstance(value, dict):
        return value
    try:
        return json.loads(_text(value, "TOKEN")) if value is not None else None
    except ValueError:
        return None


def _set_order(key: tuple[str, tuple[str, ...] | None]) -> tuple[str, int, tuple[str, ...]]:
    """Sets of add-ons by cluster: those on some node groups, on none, then those placed by their defaults."""
    cluster, runs_on = key
    return cluster, 0 if runs_on else 1 if runs_on is not None else 2, runs_on or ()


ON_DEMAND = "on-demand"


def _capacity(market: Any, reservation: str | None = None) -> str:
    """How a group buys its instances, from its market (EKS ``CapacityType``, ParallelCluster ``CapacityType``,
    PCS ``PurchaseOption``) and the capacity reservation it targets: ``on-demand``, ``spot``, ``Capacity Block
    cr-...``, ``On-Demand Capacity Reservation cr-...``."""
    bought = (_literal(market) or "ONDEMAND").upper().replace("_", "").replace("-", "")
    if bought == "CAPACITYBLOCK":
        return f"Capacity Block {reservation}" if reservation else "Capacity Block"
    if bought == "SPOT":
        return "spot"
    if reservation:
        return f"On-Demand Capacity Reservation {reservation}"
    if bought == "ONDEMAND":
        return ON_DEMAND
    return bought.lower()


def _reservation(target: Any) -> str | None:
    """The reservation a ``CapacityReservationTarget`` names: its id, or its resource group's name."""
    target = _dict(target)
    if "CapacityReservationId" in target:
        return _text(target["CapacityReservationId"])
    if "CapacityReservationResourceGroupArn" in target:
        return "group " + _text(target["CapacityReservationResourceGroupArn"]).rsplit("/", 1)[-1]
    return None


def _launch_template_capacity(data: Mapping[str, Any], market: Any) -> str:
    """The capacity of a group launched from ``data`` (a launch template's data) in ``market``; a launch
    template's ``capacity-block`` market type makes a Capacity Block whatever ``market`` says."""
    reservation = _reservation(
        _dict(data.get("CapacityReservationSpecification")).get("CapacityReservationTarget")
    )
    if _dict(data.get("InstanceMarketOptions")).get("MarketType") == "capacity-block":
        market = "CAPACITY_BLOCK"
    return _capacity(market, reservation)


def _training_plan(arn: Any) -> str:
    """``training plan p5-plan, runs in the plan's reserved window`` (the window is the plan's, not the
    template's)."""
    name = _text(arn).rsplit("/", 1)[-1]
    return f"training plan {name}, runs in the plan's reserved window"


def _yaml(text: Any) -> dict[str, Any]:
    """A YAML document the template holds as text (a mig-parted or device-plugin configuration); ``{}`` when
    it is not one."""
    if not isinstance(text, str):
        return {}
    try:
        return _dict(yaml.safe_load(text))
    except yaml.YAMLError:
        return {}


def _gpu_count(instance_type: str | None) -> int:
    found = CATALOG.get((instance_type or "").removeprefix(HYPERPOD_PREFIX))
    return found.accelerators.count if found is not None and found.accelerators is not None else 0


def _mig(name: str, layout: Any, gpus: int) -> tuple[str, int | None]:
    """The MIG line of a group whose GPUs take the mig-parted layout ``name`` (``layout``: its entries, as
    the GPU operator's configuration writes them) and the slices one node yields."""
    if not isinstance(layout, list):
        return f"MIG {name} (the GPU operator's own layout)", None
    profiles: dict[str, int] = {}
    slices = 0
    for entry in layout:
        entry = _dict(entry)
        if entry.get("mig-enabled") is not True:
            continue
        devices = entry.get("devices")
        count = gpus if devices == "all" else len(devices) if isinstance(devices, list) else 0
        for profile, per_gpu in _dict(entry.get("mig-devices")).items():
            if isinstance(per_gpu, int):
                profiles[str(profile)] = profiles.get(str(profile), 0) + per_gpu
                slices += count * per_gpu
    per_gpu_text = " + ".join(f"{n} {TIMES} {profile}" for profile, n in profiles.items())
    return f"MIG {name}: {per_gpu_text} per GPU, {slices} slices per node", slices


def _sliced(node: Node, line: str, slices: int | None) -> Node:
    """``node`` with its GPU sharing ``line`` before its capacity line (after its GPUs and EFA)."""
    details = list(node.details)
    at = next((i for i, d in enumerate(details) if d.startswith("capacity: ")), len(details))
    details.insert(at, line)
    return replace(node, details=tuple(details), gpu_sharing=line, gpu_slices=slices)


# --------------------------------------------------------------------------------------------------
# the builder


#: What a resource type is called in a drawing.
_WHAT = {
    "AWS::Logs::LogGroup": "log group",
    "AWS::KMS::Key": "KMS key",
    "AWS::SecretsManager::Secret": "secret",
    "AWS::EC2::SecurityGroup": "security group",
    "AWS::EC2::Subnet": "subnet",
    "AWS::RDS::DBInstance": "DB instance",
    "AWS::RDS::DBSubnetGroup": "DB subnet group",
    "AWS::RDS::DBClusterParameterGroup": "DB parameter group",
    "AWS::RDS::DBParameterGroup": "DB parameter group",
    "AWS::S3::Bucket": "access-log bucket",
}


def _what(resource_type: str) -> str:
    """``AWS::Logs::LogGroup`` -> ``log group``; a type not named here as ``Logs LogGroup``."""
    return _WHAT.get(resource_type, resource_type.removeprefix("AWS::").replace("::", " "))


def _owner(readable: str, owners: Mapping[str, str]) -> str | None:
    """The drawn node whose readable logical id is the longest proper prefix of ``readable``."""
    found = [name for name in owners if readable.startswith(name) and readable != name]
    return owners[max(found, key=len)] if found else None


def _hyperpod_roles(
    parameters: Mapping[str, Any], orchestrator: str
) -> dict[str, tuple[NodeRole, str | None]]:
    """Instance group name -> (role, Slurm partition) from the provisioning parameters (none under EKS)."""
    roles: dict[str, tuple[NodeRole, str | None]] = {}
    if orchestrator == "EKS":
        return roles
    controller, login = parameters.get("controller_group"), parameters.get("login_group")
    if isinstance(controller, str):
        roles[controller] = (NodeRole.CONTROLLER, None)
    if isinstance(login, str):
        roles[login] = (NodeRole.LOGIN, None)
    for worker in _list(parameters.get("worker_groups")):
        name, partition = _dict(worker).get("instance_group_name"), _dict(worker).get("partition_name")
        if isinstance(name, str):
            roles[name] = (NodeRole.WORKER, partition if isinstance(partition, str) else None)
    return roles


def _manifest_objects(manifest: Any) -> list[dict[str, Any]]:
    """The Kubernetes objects of a manifest (its deploy-time values left as placeholders)."""
    try:
        document = json.loads(_text(manifest, "TOKEN"))
    except ValueError:
        return []
    return [_dict(o) for o in _list(document)]


#: Kubernetes kinds that run something: a manifest holding one is called by it.
_RUNNING_KINDS = ("MPIJob", "Job", "PyTorchJob", "DaemonSet", "Deployment", "StatefulSet", "CronJob", "Pod")


def _workload_lines(objects: list[dict[str, Any]]) -> tuple[str, tuple[str, ...]]:
    """A manifest's title (the object that runs something, else the first) and the rest counted by kind."""
    if not objects:
        return "manifest", ()
    kinds = [_text(o.get("kind"), "?") for o in objects]
    first = next((i for i, kind in enumerate(kinds) if kind in _RUNNING_KINDS), 0)
    rest: dict[str, int] = {}
    for index, kind in enumerate(kinds):
        if index != first:
            rest[kind] = rest.get(kind, 0) + 1
    summary = ", ".join(kind if n == 1 else f"{kind} {TIMES} {n}" for kind, n in rest.items())
    return f"{kinds[first]} {_namespaced(objects[first])}", (f"with {summary}",) if summary else ()


def _namespaced(kubernetes_object: Mapping[str, Any]) -> str:
    metadata = _dict(kubernetes_object.get("metadata"))
    name = _text(metadata.get("name"), "?")
    namespace = _literal(metadata.get("namespace"))
    return f"{namespace}/{name}" if namespace else name


LIFECYCLE_FILES = (lifecycle_files.PARAMETERS_FILE, lifecycle_files.SETTINGS_FILE)
"""The settings HyperPod lifecycle scripts read: node roles (HyperPod's reference keys) and the mount point."""
