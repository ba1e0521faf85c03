"""The whole environment file: its sections together, their cross-checks, and loading a file with FILE:LINE errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from training_clusters.catalog import (
    use_declared_types,
)
from training_clusters.config.base import (
    _ACCOUNT,
    _NAME,
    COST_CENTRE_TAG,
    PROJECT_TAG,
    _FieldProblem,
    _FileChoice,
    _follows,
    _Model,
    _raise_at,
    _raise_if,
    _raise_if_crowded,
)
from training_clusters.config.capacity import CapacityConfig
from training_clusters.config.compute import (
    ComputeIntent,
    Ignorable,
    IntentFieldError,
    IntentProblems,
    Orchestrator,
    expand_intent,
)
from training_clusters.config.eks import EksConfig
from training_clusters.config.hyperpod import HyperPodConfig
from training_clusters.config.hyperpod_eks import HyperPodEksConfig
from training_clusters.config.instance_types import InstanceTypeFactsConfig, _declared_types, _DeclaredTypes
from training_clusters.config.network import NetworkConfig
from training_clusters.config.parallelcluster import ParallelClusterConfig
from training_clusters.config.pcs import PcsConfig
from training_clusters.config.storage import StorageConfig
from training_clusters.config.unknown_keys import allowed_keys, unknown_key_problem
from training_clusters.config.users import USER_ORCHESTRATORS, UserConfig, _users_consistent
from training_clusters.config.yaml_file import KeyLines, read_yaml_with_lines
from training_clusters.model.errors import ConfigurationError, bounded, excerpt
from training_clusters.orchestrators import ORCHESTRATORS, orchestrator_of
from training_clusters.rules import parallelcluster as pcluster_rules
from training_clusters.rules.lustre import (
    ROOT_WRITING_ORCHESTRATORS,
    root_squash_orchestrator_problem,
)
from training_clusters.rules.network import (
    nat_gateways_fit_problem,
    placement_zone_problem,
    vpc_cidr_problem,
)
from training_clusters.rules.regions import (
    availability_zone_problem,
    region_shape_problem,
    unknown_region_problem,
)
from training_clusters.rules.tags import MAX_TAG_VALUE, tag_key_problem, tag_value_problem

#: The sections that each make an environment's cluster; at most one per file.
ORCHESTRATOR_SECTIONS = tuple(ORCHESTRATORS)


class EnvironmentConfig(_Model):
    """A whole environment file."""

    name: str | None = Field(
        default=None, description="Environment name; the stack name derives from it. Default: the file name."
    )
    region: str = Field(
        description="AWS region, one the installed botocore lists (see allow_unknown_region)."
    )
    allow_unknown_region: bool = Field(
        default=False,
        description="Accept a region the installed botocore does not list yet (newer than it), as long as "
        "its name has the shape of a partition's regions. Default: false, so a typo such as us-central-1 "
        "is refused; upgrading botocore is the better fix.",
    )
    account: str | None = None
    availability_zones: Annotated[list[str], Field(min_length=1, max_length=3)] = Field(
        description="AZs of region: its name and a letter, e.g. us-east-1a (Local Zones are not used)."
    )
    cost_centre: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TAG_VALUE,
        description="Tagged as 'cost-centre' on every resource, with 'project' and 'environment'. Letters, "
        "numbers, spaces and _ . : / = + - @ only (what IAM, SageMaker, FSx and CloudWatch Logs accept).",
    )
    tags: dict[str, str] = Field(
        default_factory=dict,
        description="More tags for every resource. Keys 1-128 and values up to 256 letters, numbers, "
        "spaces and _ . : / = + - @ (what IAM, SageMaker, FSx and CloudWatch Logs accept); keys not "
        "starting with aws:.",
    )
    instance_types: Annotated[list[InstanceTypeFactsConfig], AfterValidator(_declared_types)] = Field(
        default_factory=list,
        description="Instance types the catalogue does not know, for nodes with accelerators or EFA (controller, "
        "login, head and system nodes take any type without): the facts EC2's DescribeInstanceTypes reports, "
        "checked like the catalogue's rows. Default: none.",
    )
    network: NetworkConfig = NetworkConfig()
    storage: StorageConfig = StorageConfig()
    hyperpod: HyperPodConfig | None = None
    parallelcluster: ParallelClusterConfig | None = None
    eks: EksConfig | None = None
    pcs: PcsConfig | None = None
    hyperpod_eks: HyperPodEksConfig | None = None
    orchestrator: Annotated[Orchestrator, _FileChoice(Orchestrator)] | None = Field(
        default=None,
        description="Who runs the nodes of compute: its section is written from compute (see "
        "training_clusters.config.compute). Default: none (give the orchestrator's own section instead).",
    )
    compute: ComputeIntent | None = Field(
        default=None,
        description="The nodes, stated once for any orchestrator; merged with that orchestrator's section, "
        "which adds what only it has. Needs orchestrator.",
    )
    ignore: list[Annotated[Ignorable, _FileChoice(Ignorable)]] = Field(
        default_factory=list,
        description="Parts this file states that its orchestrator cannot use, left out on purpose: "
        "compute.controller (pcs, eks and hyperpod-eks run their own), compute.login (eks and hyperpod-eks have "
        "no login nodes), users (created on parallelcluster and hyperpod nodes only) and the sections of the "
        "other orchestrators. Anything else such a file states is an error naming it, so nothing is dropped "
        "silently; an entry naming a part that is used, or absent, is an error too. Default: none.",
    )
    users: Annotated[list[UserConfig], AfterValidator(_users_consistent)] = Field(
        default_factory=list,
        description="The team's Linux users, created with the same ids on every node of a parallelcluster or "
        "hyperpod cluster, homes on the shared file system. Default: none.",
    )

    _region_shape = field_validator("region")(_follows(region_shape_problem))

    @model_validator(mode="after")
    def _region_known(self) -> EnvironmentConfig:
        if not self.allow_unknown_region:
            _raise_at("region", unknown_region_problem(self.region))
        return self

    @field_validator("account", mode="before")
    @classmethod
    def _account_quoted(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            raise ValueError(
                f"must be a 12-digit AWS account id in quotes, got the number {value} "
                "(unquoted, YAML reads digits as a number and drops leading zeros)"
            )
        return value

    @field_validator("account")
    @classmethod
    def _account_shape(cls, value: str | None) -> str | None:
        if value is not None and not _ACCOUNT.fullmatch(value):
            raise ValueError(f"must be a 12-digit AWS account id (quote it in YAML), got {excerpt(value)}")
        return value

    @field_validator("name")
    @classmethod
    def _name_shape(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.fullmatch(value):
            raise ValueError(
                "must start with a letter and hold only letters, digits and hyphens (max 63), "
                f"got {excerpt(value)}"
            )
        return value

    @field_validator("cost_centre")
    @classmethod
    def _cost_centre_is_a_tag_value(cls, value: str | None) -> str | None:
        if value is not None:
            _raise_if(tag_value_problem(value), excerpt(value))
        return value

    @field_validator("tags")
    @classmethod
    def _tags_allowed_by_every_service(cls, value: dict[str, str]) -> dict[str, str]:
        for key, tag in value.items():
            _raise_if(tag_key_problem(key), f"key {excerpt(key)}")
            if key in ("project", "environment", COST_CENTRE_TAG):
                raise ValueError(
                    f"'{key}' is set by the library (project, environment) or by cost_centre; remove it from tags"
                )
            _raise_if(tag_value_problem(tag), f"value {excerpt(tag)} of {excerpt(key)}")
        return value

    @model_validator(mode="after")
    def _zones_in_region(self) -> EnvironmentConfig:
        for zone in self.availability_zones:
            _raise_at("availability_zones", availability_zone_problem(zone, self.region))
        if len(set(self.availability_zones)) != len(self.availability_zones):
            raise _FieldProblem(
                "availability_zones", f"must not repeat a zone, got {self.availability_zones}"
            )
        chosen = self.network.placement_availability_zone
        if chosen is not None:
            _raise_at(
                "network.placement_availability_zone",
                placement_zone_problem(chosen, self.availability_zones, "availability_zones"),
            )
        return self

    @model_validator(mode="after")
    def _network_fits_the_zones(self) -> EnvironmentConfig:
        zones = len(self.availability_zones)
        _raise_at("network.cidr", vpc_cidr_problem(self.network.cidr, zones))
        nat_count = self.network.nat_gateways
        if nat_count is not None:
            _raise_at("network.nat_gateways", nat_gateways_fit_problem(nat_count, zones))
        return self

    @model_validator(mode="after")
    def _eks_nodes_fit_the_subnets(self) -> EnvironmentConfig:
        """EFA and reserved nodegroups live in the placement subnet; the others spread over every private one.
        (ParallelCluster and HyperPod check their own sections; a PCS cluster's size keeps it far below.)"""
        if self.eks is None:
            return self
        nodes = [
            *((f"eks.efa_nodegroups.{i}.size", g.size, True) for i, g in enumerate(self.eks.efa_nodegroups)),
            *(
                (f"eks.gpu_nodegroups.{i}.size", g.size, g.node_capacity().is_reserved)
                for i, g in enumerate(self.eks.gpu_nodegroups)
            ),
            ("eks.system_nodegroup.size", self.eks.system_nodegroup.size, False),
        ]
        _raise_if_crowded([(field, count) for field, count, placed in nodes if placed])
        _raise_if_crowded([(field, count) for field, count, _ in nodes], subnets=len(self.availability_zones))
        return self

    @model_validator(mode="after")
    def _eks_needs_a_way_out(self) -> EnvironmentConfig:
        orchestrator = orchestrator_of(self)
        section = orchestrator.section if orchestrator is not None and orchestrator.kubernetes else None
        if section is not None and self.network.endpoint_only:
            raise _FieldProblem(
                "network.endpoint_only",
                "true leaves the EKS cluster no route to its helm chart repositories and the MPI Operator "
                f"release; use nat_gateways: 1 (or more) with an {section} section",
            )
        return self

    @model_validator(mode="after")
    def _one_orchestrator(self) -> EnvironmentConfig:
        given = [name for name in ORCHESTRATOR_SECTIONS if getattr(self, name) is not None]
        if len(given) > 1:  # reported at the second one
            raise _FieldProblem(
                given[1],
                f"an environment has one orchestrator, got sections {', '.join(given)}; keep one of "
                f"{', '.join(ORCHESTRATOR_SECTIONS)} (or none, for network and storage only)",
            )
        return self

    @model_validator(mode="after")
    def _root_squash_where_no_node_writes_as_root(self) -> EnvironmentConfig:
        lustre = self.storage.lustre
        if lustre is None or not lustre.root_squash:
            return self
        intent = (
            None if self.orchestrator is None else str(getattr(self.orchestrator, "value", self.orchestrator))
        )
        for name in ROOT_WRITING_ORCHESTRATORS:
            if getattr(self, name) is not None or intent == name:
                problem = root_squash_orchestrator_problem(name)
                assert problem is not None
                raise _FieldProblem("storage.lustre.root_squash", problem)
        return self

    @model_validator(mode="after")
    def _what_parallelcluster_reserves(self) -> EnvironmentConfig:
        """ParallelCluster's own folders and tag prefix, refused in the storage and tags it is given."""
        if self.parallelcluster is None:
            return self
        if self.storage.lustre is not None:
            _raise_at(
                "storage.lustre.mount_dir", pcluster_rules.mount_dir_problem(self.storage.lustre.mount_dir)
            )
        # the environment tag's value (the environment's name) is checked as a tag value where it is chosen
        _raise_at("tags", pcluster_rules.cluster_tags_problem(self.resource_tags(self.name or "")))
        return self

    @model_validator(mode="after")
    def _users_need_slurm_nodes(self) -> EnvironmentConfig:
        if self.users and not any(getattr(self, name) is not None for name in USER_ORCHESTRATORS):
            raise _FieldProblem(
                "users",
                f"are created on the nodes of a {' or '.join(USER_ORCHESTRATORS)} cluster; add one of "
                "those sections or remove users",
            )
        return self

    @model_validator(mode="after")
    def _capacity_in_this_region_and_account(self) -> EnvironmentConfig:
        """A training plan or reservation group ARN of another region or account fails at deploy: refused here."""
        for field, section in self._stated_capacities():
            misplaced = section.to_capacity().place_problem(self.region, self.account)
            if misplaced:
                raise _FieldProblem(f"{field}.capacity.{misplaced[0]}", misplaced[1])
        return self

    def _stated_capacities(self) -> list[tuple[str, CapacityConfig]]:
        """(field, section) of every ``capacity`` the file states, in file order."""
        orchestrator = orchestrator_of(self)
        if orchestrator is None:
            return []
        found = getattr(self, orchestrator.section).stated_capacities()
        return [(field, section) for field, section in found if section is not None]

    def resource_tags(self, environment_name: str) -> dict[str, str]:
        """The tags every resource of the environment carries: project, environment, cost centre, ``tags``."""
        tags = {"project": PROJECT_TAG, "environment": environment_name}
        if self.cost_centre is not None:
            tags[COST_CENTRE_TAG] = self.cost_centre
        return {**tags, **self.tags}

    @property
    def placement_availability_zone(self) -> str:
        """The AZ of placement groups and FSx."""
        return self.network.placement_availability_zone or self.availability_zones[0]


def environment_name(config: EnvironmentConfig, path: Path | None) -> str:
    """The environment's name: ``name`` from the file, else the file's stem."""
    if config.name:
        return config.name
    if path is None:
        raise ConfigurationError("name: required when the environment does not come from a file")
    if not _NAME.fullmatch(path.stem):
        raise ConfigurationError(
            f"{path}: the file name '{path.stem}' names the environment and its stack, so it must start with "
            "a letter and hold only letters, digits and hyphens (max 63); rename the file or set name:"
        )
    return path.stem


#: Where in the file each top-level construct of a stack comes from (its id, or the prefix of ids such as
#: ``EfaNodegroup-<name>``): the sections a construct's error is looked up in, most specific first.
_CONSTRUCT_SECTIONS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Network": (("network",),),
    "PlacementGroup": (("network", "placement_group"),),
    "SharedStorage": (("storage", "lustre"), ("storage",)),
    "HyperPod": (("hyperpod",), ("hyperpod_eks",)),
    "ParallelCluster": (("parallelcluster",),),
    "AccountingDatabase": (("parallelcluster", "slurm", "accounting"), ("parallelcluster",)),
    "Actions": (("parallelcluster",),),
    "Pcs": (("pcs",),),
    "Eks": (("eks",), ("hyperpod_eks",)),
    "EfaNodegroup-": (("eks", "efa_nodegroups"),),
    "GpuNodegroup-": (("eks", "gpu_nodegroups"),),
    "NvidiaDevicePlugin": (("eks", "addons", "nvidia_device_plugin"), ("eks", "addons")),
    "EfaDevicePlugin": (("eks", "addons"),),
    "FsxCsiDriver": (("eks", "addons"), ("hyperpod_eks", "addons")),
    "GpuMonitoring": (("eks", "addons", "gpu_monitoring"), ("eks", "addons")),
    "TrainingRuntimes": (("eks", "addons"), ("hyperpod_eks", "addons")),
    "Queues": (("eks", "queues"), ("hyperpod_eks", "queues")),
}


def construct_error_line(document: Any, key_lines: KeyLines, message: str) -> int | None:
    """The line of the file a construct's error (``<stack>/<construct>...: <field> <problem>``) comes from.

    The constructs name their props (``instance_groups[1].threads_per_core``), which the file's sections spell
    alike: the line is that of the field in the construct's section when the file writes it, else in the
    storage or top-level settings the construct was given (``mount_dir``, ``tags``), else the section's own
    line; a section ``compute`` wrote gives the line of its node group or of ``compute``.
    """
    construct_path, _, rest = message.partition(": ")
    ids = construct_path.split("/")
    top = ids[1] if len(ids) > 1 else ""
    field = _field_parts(rest.split(" ", 1)[0])
    named = top.split("-", 1)[1] if "-" in top else None
    sections = next(
        (
            paths
            for key, paths in _CONSTRUCT_SECTIONS.items()
            if top == key or (key.endswith("-") and top.startswith(key))
        ),
        (),
    )
    candidates: list[tuple[str | int, ...]] = []
    for section in sections:
        here: tuple[str | int, ...] = section
        if named is not None:
            index = _index_named(document, section, named)
            here = (*section, index) if index is not None else section
        # the field, else the nearest part of it the file writes (the item of a missing key), within the section
        candidates += [(*here, *field[:end]) for end in range(len(field), 0, -1)]
    candidates += [("storage", "lustre", *field), tuple(field)]
    for candidate in candidates:
        if candidate and key_lines.line(document, candidate, whole=True):
            return key_lines.line(document, candidate, whole=True)
    for section in sections:
        line = key_lines.line(document, section, whole=True)
        if line:
            return line
    if named is not None:  # a node group compute states
        index = _index_named(document, ("compute", "node_groups"), named)
        if index is not None:
            return key_lines.line(document, ("compute", "node_groups", index))
    return key_lines.line(document, ("compute",), whole=True) or key_lines.line(
        document, ("orchestrator",), whole=True
    )


def _field_parts(field: str) -> list[str | int]:
    """``instance_groups[1].threads_per_core`` as ``["instance_groups", 1, "threads_per_core"]``."""
    parts: list[str | int] = []
    for part in field.replace("]", "").replace("[", ".").split("."):
        if part:
            parts.append(int(part) if part.isdigit() else part)
    return parts


def _index_named(document: Any, section: tuple[str, ...], name: str) -> int | None:
    node: Any = document
    for part in section:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, list):
        return None
    return next(
        (i for i, item in enumerate(node) if isinstance(item, dict) and item.get("name") == name), None
    )


def load_environment(path: str | Path) -> EnvironmentConfig:
    """Read and validate one environment file (bounded: see :mod:`training_clusters.config.yaml_file`)."""
    file = Path(path)
    document, key_lines = read_yaml_with_lines(file)
    return parse_environment(document, source=str(file), key_lines=key_lines)


def parse_environment(
    document: Any, *, source: str = "<environment>", key_lines: KeyLines | None = None
) -> EnvironmentConfig:
    """Validate an already-parsed environment document.

    :param key_lines: Where the document's keys are in file ``source``, to start each problem with
        ``source:LINE:``. Default: no lines.
    """
    use_declared_types(())  # no earlier file's declared types: this one declares its own
    first = _at(source, 1) if key_lines is not None else f"{source}: "  # a file's whole document: its line 1
    if document is None:
        raise ConfigurationError(
            f"{first}is empty; an environment needs at least region and availability_zones"
        )
    if not isinstance(document, dict):
        raise ConfigurationError(f"{first}must be a mapping of sections, got {type(document).__name__}")
    lines = key_lines or KeyLines()
    try:  # the types the file declares first: compute and every section may use them
        declared = _DeclaredTypes.model_validate(document).instance_types
    except ValidationError as error:
        use_declared_types(())
        raise ConfigurationError(_describe(error, source, lambda path: lines.line(document, path))) from None
    use_declared_types(t.facts() for t in declared)  # this file's, in place of an earlier file's
    try:
        expanded = expand_intent(document)
    except IntentProblems as error:
        raise ConfigurationError(
            "\n".join(
                [
                    f"{source}: {len(error.problems)} problem(s)",
                    *(
                        f"  {_at(source, line)}{problem}"
                        for line, problem in _in_file_order(error, document, lines)
                    ),
                ]
            )
        ) from None
    except ConfigurationError as error:
        line = lines.line(document, error.path) if isinstance(error, IntentFieldError) else None
        raise ConfigurationError(f"{source}: 1 problem(s)\n  {_at(source, line)}{error}") from None
    try:
        return EnvironmentConfig.model_validate(expanded)
    except ValidationError as error:
        # an intent's sections are written by expand_intent: only a path found whole in the file has a line
        whole = expanded is not document
        raise ConfigurationError(
            _describe(error, source, lambda path: lines.line(document, path, whole=whole))
        ) from None


def _in_file_order(
    error: IntentProblems, document: Any, lines: KeyLines
) -> list[tuple[int | None, IntentFieldError]]:
    """Each problem of ``error`` with its line, in the order of the file."""
    found = [(lines.line(document, problem.path), problem) for problem in error.problems]
    return sorted(found, key=lambda pair: pair[0] or 0)


#: At most this many problems are listed, each on one line of at most this many characters (the longest
#: rule lists the allowed instance types: about 600): a file of ten thousand mistakes, or a pasted log in
#: a field, gives a report of a few KiB.
_MAX_PROBLEMS_SHOWN, _MAX_PROBLEM_LINE = 10, 1000


def _describe(
    error: ValidationError, source: str, line_of: Callable[[tuple[str | int, ...]], int | None]
) -> str:
    problems = error.errors(include_url=False)  # with the context: a _FieldProblem names its field
    lines = [f"{source}: {len(problems)} problem(s)"]
    for problem in problems[:_MAX_PROBLEMS_SHOWN]:
        location = _location(problem)
        where = _at(source, line_of(location))
        path = ".".join(str(part) for part in location) or "(document)"
        lines.append(
            bounded(f"  {where}{bounded(path, 120)}: {_message(problem, location)}", _MAX_PROBLEM_LINE)
        )
    if len(problems) > _MAX_PROBLEMS_SHOWN:
        lines.append(f"  ... and {len(problems) - _MAX_PROBLEMS_SHOWN} more")
    return "\n".join(lines)


def _at(source: str, line: int | None) -> str:
    """``environments/x.yaml:23: `` (as compilers say where), or nothing without a line."""
    return f"{bounded(source, 200)}:{line}: " if line else ""


def _location(problem: Any) -> tuple[str | int, ...]:
    """The field path of a problem: pydantic's, and the field a :class:`_FieldProblem` names within it."""
    cause = (problem.get("ctx") or {}).get("error")
    field = cause.field if isinstance(cause, _FieldProblem) else ()
    return (*problem["loc"], *field)


def _message(problem: Any, location: tuple[str | int, ...]) -> str:
    kind = problem["type"]
    value = problem.get("input")
    if kind == "extra_forbidden":
        *section, key = location
        return unknown_key_problem(key, value, allowed_keys(EnvironmentConfig, section))
    if kind == "missing":
        return "required, but missing"
    if kind == "model_type":
        hint = "; an empty section reads as null: fill it in or delete it" if value is None else ""
        return f"must be a section of key: value settings, got {excerpt(value)}{hint}"
    message = str(problem["msg"]).removeprefix("Value error, ")
    if kind == "value_error":  # a validator's own words (no validator here uses assert)
        return message
    return f"{message}, got {excerpt(value)}"
