"""Which node groups a Kubernetes add-on's pods may run on, from the scheduling its template sets.

A Helm chart's values (or an EKS add-on's configuration values) place its pods with ``nodeSelector``,
``affinity.nodeAffinity`` (required terms) and ``tolerations``, at the top level for the chart's main pods or
under a component (``manager``, ``controllerManager``, ``jobset.controller``, ``daemonsets``). Each JSON
object that holds any of them is one :class:`PodScope`; an add-on runs where any of its scopes may.

A node group offers its labels (the template's, plus the well-known ``node.kubernetes.io/instance-type``
its instances get from the kubelet) and its taints. A pod may run on a group when the group's labels match
its node selector and one of its required affinity terms, and it tolerates every ``NoSchedule`` and
``NoExecute`` taint, as the Kubernetes scheduler decides
(https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/,
https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/).

Labels set at run time (by an operator: ``nvidia.com/mig.config.state``, by NFD: ``feature.node.kubernetes.io/...``)
are not in the template. A key that no node group of the cluster sets in the template is therefore held
against none: an expression on it neither matches nor refuses.

>>> scope = scopes_in({"manager": {"nodeSelector": {"role": "system"}}})[0]
>>> system = NodeGroupLabels({"role": ("system",)}, ())
>>> gpu = NodeGroupLabels({"role": ()}, (Taint("nvidia.com/gpu", "true", "NoSchedule"),))
>>> may_schedule(scope, system, {"role"}), may_schedule(scope, gpu, {"role"})
(True, False)
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from training_clusters.workloads.tenancy import tolerates

__all__ = [
    "INSTANCE_TYPE_LABEL",
    "NodeGroupLabels",
    "PodScope",
    "Taint",
    "may_schedule",
    "scopes_in",
]

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""The well-known label the kubelet sets to the instance type (``ml.*`` on HyperPod nodes)."""

#: Taint effects that keep a pod off a node (PreferNoSchedule only discourages it).
_KEEPS_OFF = ("NoSchedule", "NoExecute")
#: The keys of a values object that place pods.
_SCHEDULING_KEYS = ("nodeSelector", "affinity", "tolerations", "supportedInstanceLabels")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str
    """``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute`` (Kubernetes' spelling)."""


@dataclass(frozen=True)
class NodeGroupLabels:
    """What a node group offers the scheduler: each label key with the values its nodes may have (several for a
    group of several instance types; none for a key the group does not set), and its taints."""

    labels: Mapping[str, tuple[str, ...]]
    taints: tuple[Taint, ...]


@dataclass(frozen=True)
class Expression:
    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class PodScope:
    """The scheduling one set of pods gets: all of ``node_selector``, one of ``terms`` (each all of its
    expressions; no terms: any node), ``tolerations`` as Kubernetes writes them."""

    path: str
    node_selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[tuple[Expression, ...], ...] = ()
    tolerations: tuple[Mapping[str, Any], ...] = ()


def scopes_in(values: Any, path: str = "") -> list[PodScope]:
    """Every object in ``values`` (Helm values, parsed) that places pods, outermost first."""
    found: list[PodScope] = []
    if isinstance(values, dict):
        if any(key in values for key in _SCHEDULING_KEYS):
            found.append(_scope(values, path or "."))
        for key, value in values.items():
            if key not in _SCHEDULING_KEYS:
                found += scopes_in(value, f"{path}.{key}")
    elif isinstance(values, list):
        for item in values:
            found += scopes_in(item, f"{path}[]")
    return found


def _scope(values: Mapping[str, Any], path: str) -> PodScope:
    selector = values.get("nodeSelector")
    node_selector = tuple(
        sorted((k, str(v)) for k, v in selector.items() if isinstance(k, str))
        if isinstance(selector, dict)
        else ()
    )
    terms = list(_affinity_terms(values.get("affinity")))
    supported = values.get("supportedInstanceLabels")
    if isinstance(supported, dict):  # aws-efa-k8s-device-plugin: one term per key, the key In the values
        listed = tuple(str(v) for v in _list(supported.get("values")))
        terms += [(Expression(str(key), "In", listed),) for key in _list(supported.get("keys"))]
    tolerations = tuple(t for t in _list(values.get("tolerations")) if isinstance(t, dict))
    return PodScope(path, node_selector, tuple(terms), tolerations)


def _affinity_terms(affinity: Any) -> Iterator[tuple[Expression, ...]]:
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, dict)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    for term in _list(terms):
        expressions = _list(term.get("matchExpressions")) if isinstance(term, dict) else []
        yield tuple(
            Expression(
                str(e.get("key")), str(e.get("operator")), tuple(str(v) for v in _list(e.get("values")))
            )
            for e in expressions
            if isinstance(e, dict)
        )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def may_schedule(scope: PodScope, group: NodeGroupLabels, known_keys: Collection[str]) -> bool:
    """Whether the pods of ``scope`` may run on ``group``'s nodes.

    :param known_keys: The label keys some node group of the cluster sets in the template (and
        :data:`INSTANCE_TYPE_LABEL`): an expression on any other key is not held against ``group``.
    """
    selected = all(_holds(Expression(k, "In", (v,)), group, known_keys) for k, v in scope.node_selector)
    affine = not scope.terms or any(all(_holds(e, group, known_keys) for e in term) for term in scope.terms)
    return selected and affine and all(_tolerated(t, scope.tolerations) for t in group.taints)


def _holds(expression: Expression, group: NodeGroupLabels, known_keys: Collection[str]) -> bool:
    if expression.key not in known_keys:
        return True  # set at run time, if at all: not the template's to decide
    values = group.labels.get(expression.key, ())
    present = bool(values)
    match expression.operator:
        case "In":
            return any(v in expression.values for v in values)
        case "NotIn":
            return not present or any(v not in expression.values for v in values)
        case "Exists":
            return present
        case "DoesNotExist":
            return not present
        case _:  # Gt, Lt: numeric comparisons on labels this drawing does not read
            return True


def _tolerated(taint: Taint, tolerations: Collection[Mapping[str, Any]]) -> bool:
    if taint.effect not in _KEEPS_OFF:
        return True
    return any(_tolerates(toleration, taint) for toleration in tolerations)


def _tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    return tolerates(toleration, {"key": taint.key, "value": taint.value, "effect": taint.effect})
