"""State the compute once, pick the orchestrator: ``orchestrator`` + ``compute`` in an environment file.

An environment file may describe its nodes once, independently of who runs them::

    orchestrator: parallelcluster        # or hyperpod, pcs, eks, hyperpod-eks
    compute:
      controller: {instance_type: m5.xlarge}
      login: {instance_type: m5.xlarge, count: 1}
      node_groups:
        - name: gpu
          instance_type: g5.8xlarge
          count: 2                       # or min_count / max_count (ParallelCluster and PCS scale)

:func:`expand_intent` turns that into the orchestrator's own section (``parallelcluster.queues``,
``hyperpod.instance_groups``, ``pcs.compute_node_groups``, ``eks.efa_nodegroups`` ...), merged with an
orchestrator section the file also gives for what only that orchestrator has (``hyperpod: {node_recovery:
...}``, ``eks: {addons: ...}``). A value both state differently is an error naming both fields; a value
``compute`` only defaults (the HyperPod controller's type, the PCS AMI parameter) gives way to the section.

What each field becomes:

============================  ==================  ====================  ===================  ==================  ====================
compute                       parallelcluster     hyperpod              pcs                  eks                 hyperpod-eks
============================  ==================  ====================  ===================  ==================  ====================
cluster_name                  cluster_name        cluster_name          cluster_name         cluster_name        cluster_name
controller.instance_type      head_node           controller group      (managed: error)     (managed: error)    (managed: error)
login                         login_nodes pool    login group           login_nodes          (kubectl: error)    (kubectl: error)
node_groups[]                 one queue each      worker group each,    compute node group   efa_nodegroups /    instance group each,
                                                  partition = name      (+ its queue)        gpu_nodegroups      500 GiB volume
============================  ==================  ====================  ===================  ==================  ====================

Nothing is dropped silently: a part the orchestrator cannot use (the "error" cells above, ``users`` outside
parallelcluster and hyperpod, another orchestrator's section) is an error naming it and the orchestrator, all of
them reported together, unless ``ignore:`` lists it (:class:`Ignorable`). Controller and login nodes take any
type spelt as EC2 spells it; node groups a type the catalogue knows, or one the file declares under
``instance_types``.

Free of CDK: :mod:`training_clusters.config` calls it before validating the document.
"""

from __future__ import annotations

import copy
import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from training_clusters.catalog import (
    CATALOG,
    HYPERPOD_PREFIX,
    hyperpod_offer_problem,
    instance_type_problem,
    lookup_hyperpod,
)
from training_clusters.config.unknown_keys import allowed_keys, unknown_key_problem
from training_clusters.model.capacity import Capacity
from training_clusters.model.capacity import Orchestrator as CapacityOrchestrator
from training_clusters.model.errors import ConfigurationError, excerpt
from training_clusters.model.options import CapacityKind, Choice
from training_clusters.orchestrators import ORCHESTRATORS
from training_clusters.rules import hyperpod as hyperpod_rules
from training_clusters.rules import parallelcluster as pcluster_rules
from training_clusters.rules import pcs as pcs_rules
from training_clusters.rules.instance_types import instance_type_name_problem, undeclared_type_problem


class Orchestrator(Choice):
    """Who runs the nodes ``compute`` describes: the section :func:`expand_intent` writes."""

    PARALLELCLUSTER = "parallelcluster"
    HYPERPOD = "hyperpod"
    PCS = "pcs"
    EKS = "eks"
    HYPERPOD_EKS = "hyperpod-eks"

    @property
    def section(self) -> str:
        """The environment file's section this orchestrator builds (``hyperpod-eks`` writes ``hyperpod_eks``)."""
        return self.value.replace("-", "_")


class Ignorable(Choice):
    """What ``ignore:`` may list: a part the file states that its ``orchestrator`` cannot use, left out on
    purpose (a file switched between orchestrators keeps it for the next switch). Anything else the chosen
    orchestrator cannot use is an error naming it, so nothing is dropped silently."""

    CONTROLLER = "compute.controller"
    LOGIN = "compute.login"
    USERS = "users"
    HYPERPOD = "hyperpod"
    PARALLELCLUSTER = "parallelcluster"
    EKS = "eks"
    PCS = "pcs"
    HYPERPOD_EKS = "hyperpod_eks"

    @property
    def path(self) -> tuple[str, ...]:
        """Where the part is in the file: ``("compute", "login")``."""
        return tuple(self.value.split("."))


#: HyperPod's controller when ``compute.controller`` is omitted (HyperPod has no default of its own).
DEFAULT_HYPERPOD_CONTROLLER = "m5.xlarge"
#: The SSM parameter a PCS cluster reads its AMI from when the file names none (as environments/pcs-*.yaml).
DEFAULT_PCS_AMI_SSM_PARAMETER = "/training-clusters/pcs/ami"
#: HyperPod instance group names of the controller and login nodes (so node groups cannot take them).
HYPERPOD_CONTROLLER_GROUP, HYPERPOD_LOGIN_GROUP = "controller", "login"
#: The orchestrators that create ``users`` on their nodes (the others have no shared Slurm nodes to log in to).
USER_ORCHESTRATORS = tuple(Orchestrator(entry.kind) for entry in ORCHESTRATORS.values() if entry.team_users)
_EKS_NODEGROUP_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
_CAPACITY_KEYS = (
    "type",
    "reservation_id",
    "resource_group_arn",
    "targeted",
    "in_placement_group",
    "training_plan_arn",
)


class _Intent(BaseModel):
    """Strict: unknown keys are errors, ``true`` is not a count, ``"2"`` is not a number."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, str_strip_whitespace=True)


class ControllerIntent(_Intent):
    """``compute.controller``: the Slurm controller where the orchestrator runs one on your instance."""

    instance_type: str = Field(
        description="Any EC2 type, e.g. c7i.2xlarge. ParallelCluster: the head node; HyperPod: the controller "
        "group (ml. added); PCS, EKS and HyperPod on EKS run a managed controller: an error there unless "
        "ignore lists compute.controller."
    )


class LoginIntent(_Intent):
    """``compute.login``: where users log in and submit jobs."""

    instance_type: str = Field(description="Any EC2 type, e.g. m7i.xlarge (HyperPod's ml. form is added).")
    count: Annotated[int, Field(ge=1)] = Field(default=1, description="Default: 1.")


class NodeGroupIntent(_Intent):
    """``compute.node_groups[]``: instances of one type that run jobs (a Slurm partition, or a nodegroup)."""

    name: str = Field(description="The queue / partition / nodegroup name: lower-case letters, digits, '-'.")
    instance_type: str = Field(description="EC2 name, e.g. g5.8xlarge (HyperPod's ml. form is added).")
    count: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="A fixed number of nodes. Give count, or min_count and max_count."
    )
    min_count: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="Scaling from min to max nodes (parallelcluster and pcs only). Default: 0."
    )
    max_count: Annotated[int, Field(ge=1)] | None = Field(default=None, description="See min_count.")
    efa: bool | None = Field(default=None, description="Default: enabled where the instance type has EFA.")
    capacity: dict[str, Any] | None = Field(
        default=None,
        description="Where the instances come from, as hyperpod.instance_groups[].capacity: type on-demand, "
        "spot, reservation (reservation_id), capacity-block (reservation_id) or training-plan "
        "(training_plan_arn); each orchestrator accepts its own forms. Default: on-demand.",
    )


class ComputeIntent(_Intent):
    """``compute``: the nodes of the environment, stated once for whichever ``orchestrator`` runs them."""

    cluster_name: str | None = Field(
        default=None, description="The cluster's name. Default: the environment's name."
    )
    controller: ControllerIntent | None = Field(
        default=None,
        description="Default: the orchestrator's own (ParallelCluster's head node t3.medium; HyperPod "
        f"ml.{DEFAULT_HYPERPOD_CONTROLLER}).",
    )
    login: LoginIntent | None = Field(
        default=None,
        description="ParallelCluster: a login node pool; HyperPod: a login instance group; PCS: login_nodes; "
        "EKS and HyperPod on EKS have no login nodes (kubectl is the way in): an error there unless ignore lists "
        "compute.login. Default: the orchestrator's "
        "own (ParallelCluster and HyperPod: log in on the controller; PCS: one m5.xlarge login node).",
    )
    node_groups: Annotated[list[NodeGroupIntent], Field(min_length=1)]


def expand_intent(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with ``orchestrator`` + ``compute`` turned into the orchestrator's section.

    A document without either is returned unchanged. The input is not modified.

    :raises ConfigurationError: naming the field path (``compute.node_groups[0].instance_type``), the
        value received and what is allowed.
    """
    if "orchestrator" not in document and "compute" not in document:
        if document.get("ignore"):  # an empty list (a model dumped whole) ignores nothing
            raise IntentFieldError(
                ("ignore",),
                "lists what orchestrator: cannot use from compute and the other sections; it needs "
                "orchestrator and compute, or remove it",
            )
        return document
    try:
        return _expanded(document)
    except (IntentFieldError, IntentProblems):
        raise
    except ConfigurationError as error:
        raise _located(error) from None


#: The field a problem of :func:`expand_intent` starts with: ``compute.node_groups[0].efa: ...`` or, naming
#: two fields, ``compute.node_groups (2 item(s)) and parallelcluster.queues ...``.
_LEADING_FIELD = re.compile(r"^([a-z_]+(?:(?:\.[a-z_]+)|\[\d+\])*)(?=: | \()")


def _located(error: ConfigurationError) -> ConfigurationError:
    """``error`` as a problem at the field its message starts with, so the file's line can be found."""
    text = str(error)
    found = _LEADING_FIELD.match(text)
    if found is None:
        return error
    located = _error(found.group(1), "")
    located.args = (text,)
    return located


def _expanded(document: dict[str, Any]) -> dict[str, Any]:
    orchestrator = _orchestrator(document)
    _compute(document)  # compute's own mistakes first, then what of it (and of the file) is not used
    document = _without_ignored(document, orchestrator)
    compute = _compute(document)
    generated, origins, defaults = ORCHESTRATORS[orchestrator.section].load("compute")(compute, document)
    given = document.get(orchestrator.section)
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise ConfigurationError(
            f"{orchestrator.section}: must be a section of key: value settings, got {excerpt(given)}"
        )
    section = _merge(generated, given, (orchestrator.section,), origins)
    _fill(section, defaults)
    expanded = dict(document)
    expanded[orchestrator.section] = section
    return expanded


# --- reading orchestrator and compute


def _orchestrator(document: dict[str, Any]) -> Orchestrator:
    if "orchestrator" not in document:
        raise ConfigurationError(
            f"orchestrator: required with compute; one of {Orchestrator.allowed()} (it picks who runs the nodes)"
        )
    if "compute" not in document:
        raise ConfigurationError(
            f"compute: required with orchestrator: {excerpt(document['orchestrator'])}; it states the nodes "
            "(node_groups, and optionally controller and login); or remove orchestrator and give the "
            "orchestrator's own section"
        )
    try:
        return Orchestrator.parse(document["orchestrator"])
    except ConfigurationError as error:
        raise ConfigurationError(f"orchestrator: {error}") from None


class IntentFieldError(ConfigurationError):
    """A problem with one field of ``compute``; ``path`` is where it is (``("compute", "node_groups", 0)``)."""

    def __init__(self, path: tuple[str | int, ...], problem: str) -> None:
        super().__init__(f"{_path(path)}: {problem}")
        self.path = path
        self.problem = problem


class IntentProblems(ConfigurationError):
    """Several problems found together (every part the orchestrator cannot use): ``problems`` lists each."""

    def __init__(self, problems: list[IntentFieldError]) -> None:
        super().__init__("\n".join(str(problem) for problem in problems))
        self.problems = problems


# --- parts the orchestrator cannot use: an error each, all at once, unless the file ignores them


def _unused_parts(document: dict[str, Any], orchestrator: Orchestrator) -> dict[Ignorable, str]:
    """Each part ``document`` states that ``orchestrator`` cannot use, with why (the error's words)."""
    compute = document.get("compute")
    compute = compute if isinstance(compute, dict) else {}
    unused: dict[Ignorable, str] = {}
    for other in Orchestrator:
        if other is not orchestrator and other.section in document:
            unused[Ignorable(other.section)] = (
                f"this file builds orchestrator: {orchestrator.value}, so a {other.section} section does not "
                f"apply; remove it, set orchestrator: {other.value}, or add {other.section} to ignore"
            )
    if "controller" in compute and orchestrator in _MANAGED_CONTROLLER:
        unused[Ignorable.CONTROLLER] = (
            f"orchestrator: {orchestrator.value} runs {_MANAGED_CONTROLLER[orchestrator]} itself, so no instance "
            "of yours is a controller and this would not be used; remove it, or add compute.controller to ignore"
        )
    if "login" in compute and orchestrator in _NO_LOGIN_NODES:
        unused[Ignorable.LOGIN] = (
            f"orchestrator: {orchestrator.value} has no login nodes (kubectl is the way in), so this would not be "
            "used; remove it, or add compute.login to ignore"
        )
    if "users" in document and orchestrator not in USER_ORCHESTRATORS:
        unused[Ignorable.USERS] = (
            f"are created on the nodes of a {' or '.join(o.value for o in USER_ORCHESTRATORS)} cluster, and "
            f"orchestrator: {orchestrator.value} has none; remove users, or add users to ignore"
        )
    return unused


#: What runs the controller where no instance of the file's is one.
_MANAGED_CONTROLLER = {
    Orchestrator.PCS: "the Slurm controller (managed by AWS PCS)",
    Orchestrator.EKS: "the Kubernetes control plane (managed by EKS)",
    Orchestrator.HYPERPOD_EKS: "the Kubernetes control plane (managed by EKS)",
}
_NO_LOGIN_NODES = (Orchestrator.EKS, Orchestrator.HYPERPOD_EKS)


def _ignored(document: dict[str, Any]) -> list[tuple[int, Ignorable]]:
    """(index, part) of each entry of ``ignore``."""
    entries = document.get("ignore", [])
    if not isinstance(entries, list):
        raise IntentFieldError(
            ("ignore",), f"must be a list of {Ignorable.allowed()}, got {excerpt(entries)}"
        )
    parsed = []
    for index, entry in enumerate(entries):
        try:
            parsed.append((index, Ignorable.parse(entry)))
        except ConfigurationError as error:
            raise IntentFieldError(("ignore", index), str(error)) from None
    return parsed


def _without_ignored(document: dict[str, Any], orchestrator: Orchestrator) -> dict[str, Any]:
    """``document`` without the parts ``ignore`` lists; every other unused part, and every ``ignore`` entry
    that names nothing unused, is a problem, all reported together.

    :raises IntentProblems: listing each problem with where it is.
    """
    unused = _unused_parts(document, orchestrator)
    ignored = _ignored(document)
    listed = {part for _, part in ignored}
    problems = [IntentFieldError(part.path, why) for part, why in unused.items() if part not in listed]
    for index, part in ignored:
        if part in unused:
            continue
        stated = _get(document, part.path) is not None
        problems.append(
            IntentFieldError(
                ("ignore", index),
                f"{part.value} is used by orchestrator: {orchestrator.value}; remove it from ignore"
                if stated
                else f"{part.value} is not in this file; remove it from ignore",
            )
        )
    if problems:
        raise IntentProblems(problems)
    if not listed:
        return document
    kept = {key: value for key, value in document.items() if (key,) not in {p.path for p in listed}}
    dropped_in_compute = [p.path[1] for p in listed if len(p.path) == 2]
    if dropped_in_compute and isinstance(kept.get("compute"), dict):
        kept["compute"] = {k: v for k, v in kept["compute"].items() if k not in dropped_in_compute}
    return kept


def _get(document: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = document
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _compute(document: dict[str, Any]) -> ComputeIntent:
    value = document["compute"]
    if not isinstance(value, dict):
        raise ConfigurationError(
            f"compute: must be a section of key: value settings (node_groups, controller, login, cluster_name), "
            f"got {excerpt(value)}"
        )
    try:
        return ComputeIntent.model_validate(value)
    except ValidationError as error:
        problem = error.errors(include_url=False, include_context=False)[0]
        raise IntentFieldError(("compute", *problem["loc"]), _message(problem)) from None


def _path(parts: tuple[Any, ...]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _message(problem: Any) -> str:
    kind, value = problem["type"], problem.get("input")
    if kind == "extra_forbidden":
        *section, key = problem["loc"]
        return unknown_key_problem(key, value, allowed_keys(ComputeIntent, section))
    if kind == "missing":
        return "required, but missing"
    return f"{str(problem['msg']).removeprefix('Value error, ')}, got {excerpt(value)}"


# --- node groups: checks every orchestrator shares


def _checked_type(field: str, name: str, *, any_type: bool = False) -> str:
    """``name`` once spelt as EC2 spells a type; unless ``any_type`` (a controller or login node), the
    catalogue (or the file's ``instance_types``) must know it too."""
    if name.startswith(HYPERPOD_PREFIX):
        raise _error(
            field,
            f"give the EC2 name, got {name!r} (did you mean {name.removeprefix(HYPERPOD_PREFIX)!r}? "
            "HyperPod's ml. form is added when orchestrator is hyperpod)",
        )
    problem = instance_type_name_problem(name)
    if problem is None and not any_type and instance_type_problem(name):
        problem = undeclared_type_problem(name)
    if problem:
        raise _error(field, problem)
    return name


def _error(field: str, problem: str) -> IntentFieldError:
    """A problem at ``field`` (``compute.node_groups[0].efa``), located in the file by its path."""
    parts: list[str | int] = []
    for name in field.replace("]", "").replace("[", ".").split("."):
        parts.append(int(name) if name.isdigit() else name)
    return IntentFieldError(tuple(parts), problem)


def _counts(
    field: str, group: NodeGroupIntent, *, scales: bool, orchestrator: Orchestrator
) -> tuple[int, int]:
    """(min, max) nodes of ``group``."""
    scaling = [key for key in ("min_count", "max_count") if getattr(group, key) is not None]
    if group.count is not None and scaling:
        raise ConfigurationError(
            f"{field}: count ({group.count}) and {' and '.join(scaling)} both size the group; give count (a "
            "fixed size) or min_count and max_count (scaling)"
        )
    if group.count is not None:
        return group.count, group.count
    if group.max_count is None:
        raise ConfigurationError(
            f"{field}: give count (a fixed size) or max_count (with min_count, default 0)"
        )
    low = 0 if group.min_count is None else group.min_count
    if low > group.max_count:
        raise ConfigurationError(
            f"{field}.min_count: must not exceed max_count ({group.max_count}), got {low}"
        )
    if low != group.max_count and not scales:
        raise ConfigurationError(
            f"{field}: min_count {low} and max_count {group.max_count} scale the group, but {orchestrator.value} "
            "keeps a fixed number of nodes here; give count, or pick parallelcluster or pcs"
        )
    return low, group.max_count


def _efa(field: str, group: NodeGroupIntent) -> bool:
    """Whether the group uses EFA: ``efa``, else whether its type has it."""
    instance = CATALOG[group.instance_type]
    if group.efa and not instance.efa_supported:
        raise ConfigurationError(
            f"{field}.efa: {group.instance_type} has no EFA, got true; use an EFA type (e.g. g5.8xlarge, "
            "c5n.18xlarge, p5.48xlarge) or omit efa"
        )
    return instance.efa_supported if group.efa is None else group.efa


def _capacity(
    field: str, group: NodeGroupIntent, orchestrator: CapacityOrchestrator | None
) -> Capacity | None:
    if group.capacity is None:
        return None
    unknown = sorted(set(group.capacity) - set(_CAPACITY_KEYS))
    if unknown:
        raise ConfigurationError(
            f"{field}.capacity.{unknown[0]}: unknown key; allowed: {', '.join(_CAPACITY_KEYS)}"
        )
    if "type" not in group.capacity:
        raise ConfigurationError(f"{field}.capacity.type: required, one of {CapacityKind.allowed()}")
    fields = {key: value for key, value in group.capacity.items() if key != "type"}
    try:
        capacity = Capacity(CapacityKind.parse(group.capacity["type"]), **fields)
        if orchestrator is not None:
            capacity.check_for(orchestrator, "")
    except (ConfigurationError, TypeError) as error:
        raise ConfigurationError(f"{field}.capacity: {str(error).strip()}") from None
    return capacity


def _add_capacity(
    target: dict[str, Any],
    field: str,
    group: NodeGroupIntent,
    orchestrator: CapacityOrchestrator,
    document: dict[str, Any],
) -> None:
    """Copy the group's ``capacity`` into ``target`` once it is checked for ``orchestrator`` and for the file's
    region and account (an ARN of another is refused here, at its line); none stated, none copied."""
    capacity = _capacity(field, group, orchestrator)
    if capacity is None:
        return
    region, account = document.get("region"), document.get("account")
    misplaced = capacity.place_problem(
        region if isinstance(region, str) else None, account if isinstance(account, str) else None
    )
    if misplaced:
        raise _error(f"{field}.capacity.{misplaced[0]}", misplaced[1])
    target["capacity"] = dict(group.capacity or {})


def _scaling_group(field: str, group: NodeGroupIntent, orchestrator: Orchestrator) -> dict[str, Any]:
    """The group as a scaling one (ParallelCluster's compute resource, PCS's node group): name to efa."""
    low, high = _counts(field, group, scales=True, orchestrator=orchestrator)
    return {
        "name": group.name,
        "instance_type": group.instance_type,
        "min_count": low,
        "max_count": high,
        "efa": _efa(field, group),
    }


def _names(groups: list[NodeGroupIntent], rule: Any, reserved: tuple[str, ...] = ()) -> None:
    seen: set[str] = set()
    for index, group in enumerate(groups):
        field = f"compute.node_groups[{index}].name"
        problem = rule(group.name)
        if problem:
            raise ConfigurationError(f"{field}: {problem}")
        if group.name in seen:
            raise ConfigurationError(
                f"{field}: '{group.name}' names an earlier node group too; names are unique"
            )
        if group.name in reserved:
            raise ConfigurationError(
                f"{field}: '{group.name}' is the name of the {group.name} instance group; pick another name"
            )
        seen.add(group.name)


def _groups(
    compute: ComputeIntent, name_rule: Any, reserved: tuple[str, ...] = ()
) -> list[tuple[str, NodeGroupIntent]]:
    """(field, group) of each node group, once their types and then their names (``name_rule``) are checked."""
    for index, group in enumerate(compute.node_groups):
        _checked_type(f"compute.node_groups[{index}].instance_type", group.instance_type)
    _names(compute.node_groups, name_rule, reserved)
    return [(f"compute.node_groups[{index}]", group) for index, group in enumerate(compute.node_groups)]


def _common(compute: ComputeIntent) -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """A translation's start: (section, origins) with what every orchestrator's section takes alike."""
    section: dict[str, Any] = {}
    origins: dict[tuple[str, ...], str] = {}
    if compute.cluster_name is not None:
        section["cluster_name"] = compute.cluster_name
        origins[("cluster_name",)] = "compute.cluster_name"
    return section, origins


# --- one translation per orchestrator: (stated section, where each stated part came from, defaults)

_Translation = tuple[dict[str, Any], dict[tuple[str, ...], str], dict[str, Any]]


def parallelcluster_section(compute: ComputeIntent, document: dict[str, Any]) -> _Translation:
    """``compute`` as a ``parallelcluster`` section: one queue per node group."""
    section, origins = _common(compute)
    if compute.controller is not None:
        section["head_node"] = {
            "instance_type": _checked_type(
                "compute.controller.instance_type", compute.controller.instance_type, any_type=True
            )
        }
        origins[("head_node", "instance_type")] = "compute.controller.instance_type"
    if compute.login is not None:
        login = _checked_type("compute.login.instance_type", compute.login.instance_type, any_type=True)
        section["login_nodes"] = [{"name": "login", "instance_type": login, "count": compute.login.count}]
        origins[("login_nodes",)] = "compute.login"
    groups = _groups(compute, pcluster_rules.slurm_name_problem)
    queues = []
    for field, group in groups:
        resource = _scaling_group(field, group, Orchestrator.PARALLELCLUSTER)
        queue: dict[str, Any] = {"name": group.name, "compute_resources": [resource]}
        _add_capacity(queue, field, group, CapacityOrchestrator.PARALLELCLUSTER, document)
        queues.append(queue)
    section["queues"] = queues
    origins[("queues",)] = "compute.node_groups"
    return section, origins, {}


def hyperpod_section(compute: ComputeIntent, document: dict[str, Any]) -> _Translation:
    """``compute`` as a ``hyperpod`` section: controller, login and one worker group per node group."""
    section, origins = _common(compute)
    controller = compute.controller.instance_type if compute.controller else DEFAULT_HYPERPOD_CONTROLLER
    field = "compute.controller.instance_type" if compute.controller else "the default controller"
    groups: list[dict[str, Any]] = [
        {
            "name": HYPERPOD_CONTROLLER_GROUP,
            "instance_type": _ml(field, controller, any_type=True),
            "count": 1,
            "role": "controller",
        }
    ]
    if compute.login is not None:
        groups.append(
            {
                "name": HYPERPOD_LOGIN_GROUP,
                "instance_type": _ml(
                    "compute.login.instance_type", compute.login.instance_type, any_type=True
                ),
                "count": compute.login.count,
                "role": "login",
            }
        )
    nodes = _groups(
        compute,
        hyperpod_rules.instance_group_name_problem,
        reserved=(HYPERPOD_CONTROLLER_GROUP, HYPERPOD_LOGIN_GROUP),
    )
    for field, group in nodes:
        _, count = _counts(field, group, scales=False, orchestrator=Orchestrator.HYPERPOD)
        instance = CATALOG[group.instance_type]
        if group.efa is False and instance.efa_supported:
            raise ConfigurationError(
                f"{field}.efa: HyperPod gives every {instance.hyperpod_name} its EFA interfaces, so false cannot "
                "be honoured; omit efa"
            )
        _efa(field, group)
        worker: dict[str, Any] = {
            "name": group.name,
            "instance_type": _ml(f"{field}.instance_type", group.instance_type),
            "count": count,
            "role": "worker",
            "partition": group.name,
        }
        _add_capacity(worker, field, group, CapacityOrchestrator.HYPERPOD, document)
        groups.append(worker)
    section["instance_groups"] = groups
    origins[("instance_groups",)] = "compute.node_groups"
    return section, origins, _hyperpod_cluster_name(compute, document, Orchestrator.HYPERPOD)


def _hyperpod_cluster_name(
    compute: ComputeIntent, document: dict[str, Any], orchestrator: Orchestrator
) -> dict[str, Any]:
    """The defaults of a HyperPod section: its cluster name from the file's ``name`` when nothing names it."""
    given = document.get(orchestrator.section)
    named = isinstance(given, dict) and "cluster_name" in given
    if compute.cluster_name is not None or named:
        return {}
    if not isinstance(document.get("name"), str):
        raise ConfigurationError(
            f"compute.cluster_name: required with orchestrator: {orchestrator.value} when the file sets no name: "
            f"(a HyperPod cluster is named in the file); set compute.cluster_name, name or "
            f"{orchestrator.section}.cluster_name"
        )
    return {"cluster_name": document["name"]}


#: The EBS volume (``volume_gib``) each instance group of ``orchestrator: hyperpod-eks`` gets: containerd's
#: images and the kubelet's pod volumes live there.
DEFAULT_HYPERPOD_EKS_VOLUME_GIB = 500


def hyperpod_eks_section(compute: ComputeIntent, document: dict[str, Any]) -> _Translation:
    """``compute`` as a ``hyperpod_eks`` section: one instance group per node group."""
    """HyperPod on EKS: each node group an instance group (``ml.`` type, an EBS volume); the controller is EKS's
    control plane and kubectl the way in, so ``controller`` and ``login`` are not used."""
    section, origins = _common(compute)
    groups = []
    for field, group in _groups(compute, hyperpod_rules.instance_group_name_problem):
        _, count = _counts(field, group, scales=False, orchestrator=Orchestrator.HYPERPOD_EKS)
        instance = CATALOG[group.instance_type]
        if group.efa is False and instance.efa_supported:
            raise ConfigurationError(
                f"{field}.efa: HyperPod gives every {instance.hyperpod_name} its EFA interfaces, so false cannot "
                "be honoured; omit efa"
            )
        _efa(field, group)
        instance_group: dict[str, Any] = {
            "name": group.name,
            "instance_type": _ml(f"{field}.instance_type", group.instance_type),
            "count": count,
            "volume_gib": DEFAULT_HYPERPOD_EKS_VOLUME_GIB,
        }
        _add_capacity(instance_group, field, group, CapacityOrchestrator.HYPERPOD, document)
        groups.append(instance_group)
    section["instance_groups"] = groups
    origins[("instance_groups",)] = "compute.node_groups"
    return section, origins, _hyperpod_cluster_name(compute, document, Orchestrator.HYPERPOD_EKS)


def _ml(field: str, name: str, *, any_type: bool = False) -> str:
    """``name`` in HyperPod's ``ml.`` form, refused when HyperPod does not offer it (``any_type``: a controller
    or login group, whose type is checked for its spelling only)."""
    _checked_type(field, name, any_type=any_type)
    if any_type:
        problem = hyperpod_offer_problem(HYPERPOD_PREFIX + name)
        if problem:
            raise _error(field, f"{problem} (orchestrator: hyperpod)")
        return HYPERPOD_PREFIX + name
    try:
        return lookup_hyperpod(HYPERPOD_PREFIX + name, field=field).hyperpod_name or ""
    except ConfigurationError as error:
        raise _error(field, f"{str(error).removeprefix(field + ': ')} (orchestrator: hyperpod)") from None


def pcs_section(compute: ComputeIntent, document: dict[str, Any]) -> _Translation:
    """``compute`` as a ``pcs`` section: one compute node group (and its queue) per node group."""
    section, origins = _common(compute)
    if compute.login is not None:
        section["login_nodes"] = {
            "instance_type": _checked_type(
                "compute.login.instance_type", compute.login.instance_type, any_type=True
            ),
            "count": compute.login.count,
        }
        origins[("login_nodes",)] = "compute.login"
    nodes = _groups(compute, pcs_rules.pcs_name_problem)
    groups = []
    for field, group in nodes:
        node_group = _scaling_group(field, group, Orchestrator.PCS)
        _add_capacity(node_group, field, group, CapacityOrchestrator.PCS, document)
        groups.append(node_group)
    section["compute_node_groups"] = groups
    origins[("compute_node_groups",)] = "compute.node_groups"
    given = document.get("pcs")
    has_ami = isinstance(given, dict) and ("ami_id" in given or "ami_ssm_parameter" in given)
    return section, origins, {} if has_ami else {"ami_ssm_parameter": DEFAULT_PCS_AMI_SSM_PARAMETER}


def eks_section(compute: ComputeIntent, document: dict[str, Any]) -> _Translation:
    """``compute`` as an ``eks`` section: an EFA or GPU nodegroup per node group."""
    section, origins = _common(compute)
    nodes = _groups(compute, _eks_name_problem)
    efa_groups, gpu_groups = [], []
    for field, group in nodes:
        _, size = _counts(field, group, scales=False, orchestrator=Orchestrator.EKS)
        nodegroup: dict[str, Any] = {"name": group.name, "instance_type": group.instance_type, "size": size}
        _add_capacity(nodegroup, field, group, CapacityOrchestrator.EKS, document)
        if _efa(field, group):
            efa_groups.append(nodegroup)
        elif CATALOG[group.instance_type].is_gpu:
            gpu_groups.append(nodegroup)
        else:
            raise ConfigurationError(
                f"{field}.instance_type: on eks a node group without EFA needs GPUs (a gpu nodegroup), got "
                f"{group.instance_type!r} with neither; use an EFA or GPU type"
            )
    for key, groups in (("efa_nodegroups", efa_groups), ("gpu_nodegroups", gpu_groups)):
        if groups:
            section[key] = groups
            origins[(key,)] = "compute.node_groups"
    return section, origins, {}


def _eks_name_problem(name: str) -> str | None:
    if _EKS_NODEGROUP_NAME.fullmatch(name):
        return None
    return f"must be a lower-case letter then up to 30 lower-case letters, digits and '-', got {name!r}"


# --- merging with the orchestrator's own section


def _merge(
    generated: dict[str, Any],
    given: dict[str, Any],
    path: tuple[str, ...],
    origins: dict[tuple[str, ...], str],
) -> dict[str, Any]:
    """``generated`` and ``given`` together; a key both set differently is an error naming both fields."""
    merged = copy.deepcopy(given)
    for key, value in generated.items():
        here = (*path, key)
        if key not in given:
            merged[key] = value
        elif isinstance(value, dict) and isinstance(given[key], dict):
            merged[key] = _merge(value, given[key], here, origins)
        elif given[key] != value:
            raise ConfigurationError(
                f"{_origin(here[1:], origins)} ({_shown(value)}) and {'.'.join(here)} ({_shown(given[key])}) "
                f"both state this; keep one of them (compute for what every orchestrator has, {path[0]} for what "
                f"only {path[0]} has)"
            )
    return merged


def _origin(path: tuple[str, ...], origins: dict[tuple[str, ...], str]) -> str:
    for length in range(len(path), 0, -1):
        if path[:length] in origins:
            return origins[path[:length]]
    return "compute"


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return f"{len(value)} item(s)"
    if isinstance(value, dict):
        return "a section"
    return excerpt(value)


def _fill(section: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Give ``section`` each default it lacks (a default never conflicts: the section wins)."""
    for key, value in defaults.items():
        section.setdefault(key, value)
