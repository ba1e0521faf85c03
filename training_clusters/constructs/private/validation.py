"""Small helpers shared by the constructs' validation methods: the one boundary where props are checked."""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import math
import pathlib
import types
import typing
from datetime import UTC, date, datetime
from typing import Any, TypeVar

import aws_cdk as cdk
from constructs import IConstruct, Node

from training_clusters.catalog import InstanceType, lookup, lookup_hyperpod
from training_clusters.model.capacity import Capacity
from training_clusters.model.errors import ConfigurationError, exact_number_problem, typed
from training_clusters.model.options import Choice, RemovalPolicy
from training_clusters.rules.versions import TODAY_CONTEXT

C = TypeVar("C", bound=Choice)
T = TypeVar("T")


def is_unresolved(value: Any) -> bool:
    """True for CDK tokens, which are only known at deploy time and so cannot be checked here. A number
    JSON cannot carry (NaN, infinity) is no token, and never reaches jsii."""
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, str | int | float) and cdk.Token.is_unresolved(value)


def advise(scope: IConstruct, warning_id: str, advice: str | None) -> None:
    """A synth warning ``training-clusters:<warning_id>`` (acknowledgeable) with ``advice``, when there is any."""
    if advice is not None:
        cdk.Annotations.of(scope).add_warning_v2(f"training-clusters:{warning_id}", advice)


def advice_day(scope: IConstruct) -> date:
    """The day version advice is given for: the context value ``training-clusters:today`` (``YYYY-MM-DD``)
    when set, else today (UTC)."""
    chosen = scope.node.try_get_context(TODAY_CONTEXT)
    return date.fromisoformat(chosen) if chosen else datetime.now(UTC).date()


def prop_error(construct_path: str, field: str, message: str) -> ConfigurationError:
    """Build the error for a bad prop: ``<construct path>: <field> <message>``, on one line (a value with a
    line break in it stays on that line)."""
    return ConfigurationError(" ".join(f"{construct_path}: {field} {message}".splitlines()))


def raise_if_problem(scope: IConstruct | str, field: str, problem: str | None) -> None:
    """Raise :func:`fail` for ``field`` when a rule (a ``rules.*_problem`` function) found a ``problem``."""
    if problem:
        raise prop_error(_path(scope), field, problem)


def refuse_misplaced(scope: IConstruct, field: str, capacity: Capacity) -> None:
    """Refuse a ``capacity`` whose training plan or reservation group ARN is in another region or account
    than the stack of ``scope`` (a token region or account, as in an environment-agnostic stack, is skipped)."""
    stack = cdk.Stack.of(scope)
    misplaced = capacity.place_problem(stack.region, stack.account)
    if misplaced:
        raise prop_error(_path(scope), f"{field}.{misplaced[0]}", misplaced[1])


def refuse_alongside(
    scope: IConstruct | str,
    field: str,
    adopted: str,
    others: collections.abc.Mapping[str, object],
    why: str = "",
) -> None:
    """Refuse the props in ``others`` that were given (not None) together with ``field``, which excludes them.

    Bring your own, or let it be created: an adopted resource cannot also take the props that shape a new
    one. The message reads ``<field> <adopted>, so <given names> cannot also be given<why>``.
    """
    given = [name for name, value in others.items() if value is not None]
    if given:
        raise prop_error(_path(scope), field, f"{adopted}, so {', '.join(given)} cannot also be given{why}")


def catalog_entry(scope: IConstruct, name: str, field: str, *, hyperpod: bool = False) -> InstanceType:
    """The catalogue's facts about instance type ``name``: the constructs' one instance-type lookup.

    With ``hyperpod``, ``name`` must be SageMaker's ``ml.`` form of a type HyperPod offers.

    :raises ConfigurationError: ``<construct path>: <field>: ...`` naming the type and the known ones, and
        how to register a type newer than this release.
    """
    try:
        return lookup_hyperpod(name, field=field) if hyperpod else lookup(name, field=field)
    except ConfigurationError as error:
        raise ConfigurationError(f"{_path(scope)}: {error}") from None


def parse_option(scope: IConstruct | str, field: str, choice: type[C], value: Any) -> C:
    """``value`` as a member of ``choice``: the member itself, or its value or name as a string (any case).

    The constructs' one conversion point; the environment file uses the same :meth:`Choice.parse`.
    """
    try:
        return choice.parse(value)
    except ConfigurationError as error:
        raise prop_error(_path(scope), field, str(error)) from None


def to_removal_policy(scope: IConstruct | str, field: str, value: Any) -> cdk.RemovalPolicy:
    """A ``cdk.RemovalPolicy``, a :class:`~training_clusters.model.options.RemovalPolicy` or its spelling."""
    if isinstance(value, cdk.RemovalPolicy):  # CDK's own enum: only its members that we offer
        value = value.name
    return cdk.RemovalPolicy[parse_option(scope, field, RemovalPolicy, value).name]


def _path(scope: IConstruct | str) -> str:
    return scope if isinstance(scope, str) else scope.node.path


# --------------------------------------------------------------------------------------------------
# props checked against their type hints, at the boundary


def checked_props(cls: type[T]) -> type[T]:
    """Check every keyword prop of ``cls`` against its ``__init__`` type hints before the construct runs.

    A wrong type (``storage_capacity_gib="1200"``, ``instance_groups=InstanceGroup(...)`` without a list,
    ``vpc="vpc-0abc"``) becomes a :class:`ConfigurationError` naming the construct path, the prop (down to
    ``instance_groups[1].instance_count`` inside props dataclasses), the value and what is allowed, instead
    of an ``AttributeError`` or a jsii trace from deep inside. Options (:class:`Choice`) accept their value
    as a string, in any case. CDK interface types (``ec2.IVpc`` ...) cannot be checked structurally in
    Python; a plain string, number or collection given for one is refused. A construct given from a stack in
    another account or region is refused too (:func:`check_environment`).
    """
    init: Any = cls.__init__
    hints: dict[str, Any] | None = None

    @functools.wraps(init)
    def __init__(self: Any, scope: Any, id: Any, *args: Any, **props: Any) -> None:
        nonlocal hints
        if hints is None:
            hints = typing.get_type_hints(init)
        path = _child_path(scope, id)
        for name, value in props.items():
            check_value(path, name, value, hints.get(name))
        for name, value in props.items():
            check_environment(scope, path, name, value)
        init(self, scope, id, *args, **props)

    setattr(cls, "__init__", __init__)  # noqa: B010  (mypy refuses assigning to a method)
    return cls


def check_value(path: str, field: str, value: Any, hint: Any) -> None:
    """Raise :class:`ConfigurationError` unless ``value`` fits ``hint`` (recursing into lists and dataclasses)."""
    problem = _mismatch(field, value, hint)
    if problem is not None:
        where, message = problem
        raise prop_error(path, where, message)


def check_environment(scope: IConstruct, path: str, field: str, value: Any) -> None:
    """Refuse a construct in ``value`` (itself, or inside a list, mapping or props dataclass), or a value taken
    from one (an attribute token such as ``fs.dns_name``, also inside ``Fn::`` functions or an f-string), whose
    stack is in another account or region than ``scope``'s stack: CloudFormation references another stack's
    resource only in its own account and region (CDK would wire a cross-region export reader to a VPC or file
    system no resource here could use). An environment-agnostic side (a token account or region) is not
    compared: CDK resolves it when deploying, into the deploying credentials' environment, the same for every
    stack of a ``cdk deploy``."""
    own = _stack_of(scope)
    if own is None:
        return
    for where, construct, taken in _constructs_in(field, value, own):
        refuse_other_environment(own, path, where, construct, taken=taken)


def refuse_other_environment(
    own: cdk.Stack, path: str, where: str, construct: IConstruct, *, taken: bool = False
) -> None:
    """Raise when ``construct`` (or, ``taken``, the resource a value of ``where`` came from) lives in a stack of
    another account or region than ``own``: both environments named."""
    other = _stack_of(construct)
    if other is None or other is own:
        return
    differs = [
        name
        for name, mine, theirs in (
            ("account", own.account, other.account),
            ("region", own.region, other.region),
        )
        if not (is_unresolved(mine) or is_unresolved(theirs)) and mine != theirs
    ]
    if differs:
        what = f"takes a value of {construct.node.path}, which is" if taken else "is"
        raise prop_error(
            path,
            where,
            f"{what} in stack {other.node.path} ({_environment(other)}), but this construct's stack "
            f"{own.node.path} is in {_environment(own)}: a stack cannot use a resource of another "
            f"{' or '.join(differs)}; build it in this stack's environment, or import it there "
            "(e.g. ec2.Vpc.from_lookup in this stack)",
        )


def _environment(stack: cdk.Stack) -> str:
    account = "any account" if is_unresolved(stack.account) else f"account {stack.account}"
    region = "any region" if is_unresolved(stack.region) else f"region {stack.region}"
    return f"{account}, {region}"


def _stack_of(construct: IConstruct) -> cdk.Stack | None:
    try:
        return cdk.Stack.of(construct)
    except RuntimeError:  # a construct outside any stack (an app, a stage)
        return None


def _constructs_in(
    field: str, value: Any, own: cdk.Stack
) -> collections.abc.Iterator[tuple[str, IConstruct, bool]]:
    """``(field path, construct, taken)`` for each construct ``value`` holds (``taken`` False: itself, list
    items, mapping values and the fields of a props dataclass, recursively) or whose attribute a token of it
    carries (``taken`` True)."""
    if isinstance(value, str | int | float) and not isinstance(value, bool) and is_unresolved(value):
        for target in referenced_resources(value, own):
            yield field, target, True
        return
    if value is None or isinstance(value, str | bytes | int | float | bool):
        return
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            yield from _constructs_in(f"{field}.{item.name}", getattr(value, item.name), own)
    elif isinstance(value, list | tuple):
        for index, element in enumerate(value):
            yield from _constructs_in(f"{field}[{index}]", element, own)
    elif isinstance(value, collections.abc.Mapping):
        for key, element in value.items():
            yield from _constructs_in(f"{field}[{key!r}]", element, own)
    elif isinstance(getattr(value, "node", None), Node):
        yield field, value, False


class _ReferenceRecorder(cdk.DefaultTokenResolver):
    """Resolves a value only to list the resources it references: each ``Reference`` (``Ref``, ``GetAtt``, a
    physical name) is recorded, not resolved; ``Fn::`` functions are walked into; anything else (a ``Lazy``,
    which may cache what it produces) is left unresolved."""

    def __init__(self) -> None:
        super().__init__(cdk.StringConcat())
        self.found: list[IConstruct] = []

    def resolve_token(
        self, t: cdk.IResolvable, context: cdk.IResolveContext, post_processor: cdk.IPostProcessor
    ) -> Any:
        if isinstance(t, cdk.Reference):
            self.found.append(t.target)
            return ""
        if isinstance(t, cdk.Intrinsic) or "Token[Fn::" in t.to_string():
            return super().resolve_token(t, context, post_processor)
        return ""


def referenced_resources(value: Any, scope: IConstruct) -> list[IConstruct]:
    """The constructs whose attributes ``value`` carries (a token, or a string or list with tokens in it)."""
    recorder = _ReferenceRecorder()
    cdk.Tokenization.resolve(value, scope=scope, resolver=recorder)
    return recorder.found


def _mismatch(field: str, value: Any, hint: Any) -> tuple[str, str] | None:
    """``(field path, sentence)`` when ``value`` does not fit ``hint``, else None."""
    if hint is None or hint is Any or is_unresolved(value):
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None if type(None) in args else (field, "is required, got None")
        arms = [a for a in args if a is not type(None)]
        results = [_mismatch(field, value, arm) for arm in arms]
        if any(r is None for r in results):
            return None
        deeper = [r for r in results if r is not None and r[0] != field]
        return deeper[0] if deeper else (field, f"must be {_describe_hint(hint)}, got {_got(value)}")
    if value is None:
        return field, f"must be {_describe_hint(hint)}, got None"
    if origin in (list, tuple, collections.abc.Sequence):
        if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
            return field, f"must be {_describe_hint(hint)}, got {typed(value)}"
        element = args[0] if args else Any
        for index, item in enumerate(value):
            found = _mismatch(f"{field}[{index}]", item, element)
            if found is not None:
                return found
        return None
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, collections.abc.Mapping):
            return field, f"must be {_describe_hint(hint)}, got {typed(value)}"
        key_hint, value_hint = args if len(args) == 2 else (Any, Any)
        for key, item in value.items():
            found = _mismatch(f"{field}[{key!r}]", key, key_hint) or _mismatch(
                f"{field}[{key!r}]", item, value_hint
            )
            if found is not None:
                return found
        return None
    if not isinstance(hint, type):
        return None  # Literal, TypeVar ...: not used by our props
    return _class_mismatch(field, value, hint)


def _class_mismatch(field: str, value: Any, hint: type) -> tuple[str, str] | None:
    if issubclass(hint, Choice):
        try:
            hint.parse(value)
        except ConfigurationError as error:
            return field, str(error)
        return None
    if hint is bool:
        return None if isinstance(value, bool) else (field, f"must be true or false, got {typed(value)}")
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok:
            return field, f"must be a whole number, got {typed(value)}"
        problem = exact_number_problem(value)
        return None if problem is None else (field, problem)
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok:
            return field, f"must be a number, got {typed(value)}"
        problem = exact_number_problem(value)
        return None if problem is None else (field, problem)
    if hint is str:
        return None if isinstance(value, str) else (field, f"must be a string, got {typed(value)}")
    if hint is pathlib.Path:
        ok = isinstance(value, str | pathlib.PurePath)
        return None if ok else (field, f"must be a path, got {typed(value)}")
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            return field, f"must be {_describe_hint(hint)}, got {typed(value)}"
        field_hints = typing.get_type_hints(hint)
        for item in dataclasses.fields(hint):
            found = _mismatch(f"{field}.{item.name}", getattr(value, item.name), field_hints.get(item.name))
            if found is not None:
                return found
        return None
    is_member = issubclass(hint, enum.Enum) and isinstance(value, hint)  # a str enum's member is a str too
    if isinstance(value, str | bytes | int | float | bool | list | tuple | dict) and not is_member:
        return field, f"must be {_describe_hint(hint)}, got {typed(value)}"
    if getattr(hint, "_is_protocol", False):  # a jsii interface: what the value's classes define
        missing = _interface_members(hint) - _members_of(value)
        if not missing:
            return None
        lacks = ", ".join(sorted(missing)[:3]) + (", ..." if len(missing) > 3 else "")
        return field, f"must be {_describe_hint(hint)}, got {_got(value)}, which has no {lacks}"
    if isinstance(value, hint):
        return None
    return field, f"must be {_describe_hint(hint)}, got {_got(value)}"


def _got(value: Any) -> str:
    """The value received: as :func:`typed` shows it, or ``a TrainingNetwork`` for an object whose text
    would be its memory address."""
    if getattr(type(value), "__repr__", None) is object.__repr__:
        name = type(value).__name__
        return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
    return typed(value)


_MEMBERS: dict[type, frozenset[str]] = {}


def _interface_members(interface: type) -> frozenset[str]:
    """The public members a jsii interface (a typing Protocol) declares, its base interfaces' included."""
    if interface not in _MEMBERS:
        _MEMBERS[interface] = frozenset(
            name
            for base in interface.__mro__
            if getattr(base, "_is_protocol", False) and base.__module__ not in ("typing", "typing_extensions")
            for name in vars(base)
            if not name.startswith("_")
        )
    return _MEMBERS[interface]


def _members_of(value: Any) -> frozenset[str]:
    """What ``value``'s classes define (read from the classes: no jsii call). An object jsii made for a
    JavaScript one that implements several interfaces answers for all its delegates."""
    delegates = vars(value).get("_delegates") if hasattr(value, "__dict__") else None
    classes = [type(d) for d in delegates] if isinstance(delegates, list) else [type(value)]
    return frozenset().union(*(_class_members(c) for c in classes))


_DEFINED: dict[type, frozenset[str]] = {}


def _class_members(cls: type) -> frozenset[str]:
    if cls not in _DEFINED:
        _DEFINED[cls] = frozenset(name for klass in cls.__mro__ for name in vars(klass))
    return _DEFINED[cls]


def _describe_hint(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        arms = [_describe_hint(a) for a in args if a is not type(None)]
        text = " or ".join(dict.fromkeys(arms))
        return f"{text} (or None)" if type(None) in args else text
    if origin in (list, tuple, collections.abc.Sequence):
        element = args[0] if args else None
        plurals = {bool: "true/false values", int: "whole numbers", float: "numbers", str: "strings"}
        if element in plurals:
            return f"a list of {plurals[element]}"
        choices = [
            a for a in (element, *typing.get_args(element)) if isinstance(a, type) and issubclass(a, Choice)
        ]
        if choices:
            return f"a list of {choices[0].allowed()}"
        return f"a list of {getattr(element, '__name__', 'values')}"
    if origin in (dict, collections.abc.Mapping):
        return "a mapping"
    if isinstance(hint, type) and issubclass(hint, Choice):
        return f"one of {hint.allowed()}"
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
    if hint in names:
        return names[hint]
    name = getattr(hint, "__name__", str(hint))
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _child_path(scope: Any, id: Any) -> str:
    parent = getattr(getattr(scope, "node", None), "path", "")
    return f"{parent}/{id}" if parent else str(id)
