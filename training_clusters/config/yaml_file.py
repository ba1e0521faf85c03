"""Reading a YAML file that may be hostile: bounded time, memory and output, one clear line per mistake.

An environment file is untrusted input. :func:`read_yaml` refuses, before anything is built from it:

- anything but a regular file, or a symbolic link to one (:func:`regular_file_problem`): a pipe nobody
  writes to would block the read forever, a device such as ``/dev/zero`` never ends;
- a file larger than :data:`MAX_FILE_BYTES` (only that much is ever read, whatever the file is);
- a key given twice in one mapping: YAML forbids it (YAML 1.2, 3.2.1.1 "the content of a mapping node is
  an unordered set of key/value node pairs, with the restriction that each of the keys is unique") and
  PyYAML would keep the last silently, so a second ``network:`` section drops the first;
- a document of more than :data:`MAX_VALUES` values, or :data:`MAX_EXPANDED_CHARACTERS` of text, once
  its aliases (``*name``) are expanded. The composed node graph shares an anchored node between its
  aliases, so a few lines can stand for billions of values ("billion laughs"); whatever walks the loaded
  data later — validation, error messages — would expand them. The graph is walked once, each shared
  node counted once per use but visited once;
- an alias inside the node it refers to (a recursive document).

Every message is one line naming the file, the line and what is allowed. :func:`read_yaml_with_lines`
also keeps the line of every key (:class:`KeyLines`), so a problem the schema finds later can name it too.

:func:`read_json` reads the JSON files of a cloud assembly (``cdk.out``) with the same first two bounds.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from training_clusters.model.errors import ConfigurationError, excerpt

#: The largest file read: the shipped environments are 1-2 KiB; a commented one stays far below this,
#: and libyaml composes this much in well under a second and about 50 MB.
MAX_FILE_BYTES = 256 * 1024
#: The most values (scalars, lists, mappings and keys, aliases expanded) a document may hold; the shipped
#: environments hold 30-70.
MAX_VALUES = 10_000
#: The most text (characters of scalars, aliases expanded) a document may stand for: without aliases it is
#: at most the file's size; with them, a long value used many times would make every copy of the data —
#: an error message's excerpt of it, say — that long.
MAX_EXPANDED_CHARACTERS = 4 * MAX_FILE_BYTES
#: The largest JSON file of a cloud assembly read: CloudFormation takes templates of at most 1 MB; a
#: manifest, asset manifest or validation report of a large app stays well below this.
MAX_JSON_BYTES = 16 * 1024 * 1024

_MERGE_TAG = "tag:yaml.org,2002:merge"

if TYPE_CHECKING:
    _SafeLoader = yaml.SafeLoader
else:
    #: libyaml's safe loader when PyYAML was built with it (about ten times faster), else the pure-Python one.
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Refused(Exception):
    """A structural problem found while loading, at ``where`` (``LINE`` or ``LINE:COLUMN``); :func:`read_yaml`
    adds the file name in front, as compilers do (``environments/x.yaml:14: ...``)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where


class KeyLines:
    """Where the keys of a loaded document were written: the line of each, found by its field path.

    One entry per key of the file's mappings, so at most :data:`MAX_VALUES` (a mapping shared through
    aliases is loaded, and counted, once); each mapping is found again by its identity, and kept here so
    that identity stays its own.
    """

    __slots__ = ("_mappings",)

    def __init__(self) -> None:
        self._mappings: dict[int, tuple[dict[Any, Any], dict[Any, int]]] = {}

    def add(self, mapping: dict[Any, Any], lines: dict[Any, int]) -> None:
        """Record ``lines`` (key -> 1-based line) for ``mapping``, as loaded."""
        self._mappings[id(mapping)] = (mapping, lines)

    def line(self, document: Any, path: Sequence[str | int], *, whole: bool = False) -> int | None:
        """The line of the innermost key on ``path`` (``("storage", "lustre", "mount_dir")``) in ``document``.

        A path ending in a list index gives the line of that item's first key. A path that leaves the
        document (a field filled in by default, a tag of the validator) gives the innermost line it reached,
        or None with ``whole``.
        """
        line, node = None, document
        for part in path:
            lines = self._lines_of(node)
            if lines is not None:
                line = lines.get(part, line)
            in_mapping = isinstance(node, dict) and part in node
            in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
            if not (in_mapping or in_list):
                return None if whole else line
            node = node[part]
        lines = self._lines_of(node)
        if path and isinstance(path[-1], int) and lines:
            line = min(lines.values())
        return line

    def _lines_of(self, node: Any) -> dict[Any, int] | None:
        entry = self._mappings.get(id(node))
        return entry[1] if entry is not None and entry[0] is node else None


class _BoundedLoader(_SafeLoader):
    """The safe loader, checking the composed node graph before constructing any Python object from it."""

    #: Where the keys of the document being loaded are (set by :meth:`get_single_data`).
    key_lines: KeyLines

    def construct_mapping_with_lines(self, node: MappingNode) -> Iterator[dict[Any, Any]]:
        """PyYAML's mapping constructor, recording the line of each key (merged keys: where they are written)."""
        data: dict[Any, Any] = {}
        yield data
        data.update(self.construct_mapping(node))  # flattens merges (<<) into node.value first
        lines = {
            key.value: _line(key)
            for key, _ in node.value
            if isinstance(key, ScalarNode) and key.tag == "tag:yaml.org,2002:str"
        }
        self.key_lines.add(data, lines)

    def get_single_data(self) -> Any:
        self.key_lines = KeyLines()
        node = self.get_single_node()
        if node is None:
            return None
        _check_graph(node)
        return self.construct_document(node)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        """PyYAML's, with Python's own complaints about a value (a 5000-digit int, month 13) as ours."""
        try:
            return super().construct_object(node, deep)
        except (yaml.YAMLError, _Refused, RecursionError):
            raise
        except Exception as error:  # ValueError, KeyError (!!bool maybe), AttributeError (!!timestamp x) ...
            kind = str(node.tag).rpartition(":")[2] or "value"
            reason = _one_line(str(error).split(";")[0])[:100]
            detail = f" ({reason})" if type(error) is ValueError else ""
            raise _Refused(
                f"{_line(node)}:{node.start_mark.column + 1}",
                f"not valid YAML: {excerpt(node.value)} is not a valid {kind}{detail}",
            ) from None


_BoundedLoader.add_constructor("tag:yaml.org,2002:map", _BoundedLoader.construct_mapping_with_lines)


def read_yaml(path: Path) -> Any:
    """The one YAML document in environment file ``path``, safely loaded and checked as described above.

    :raises ConfigurationError: one line starting with ``path``.
    """
    return read_yaml_with_lines(path)[0]


def read_yaml_with_lines(path: Path) -> tuple[Any, KeyLines]:
    """:func:`read_yaml`, and where each key of the document was written.

    :raises ConfigurationError: one line starting with ``path``.
    """
    data = read_bounded(path, limit=MAX_FILE_BYTES, what="an environment file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ConfigurationError(f"{path}:{line}: not UTF-8 text; save the file as UTF-8") from None
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data(), loader.key_lines
    except _Refused as error:
        raise ConfigurationError(f"{path}:{error.where}: {error}") from None
    except yaml.MarkedYAMLError as error:
        raise ConfigurationError(f"{path}:{_yaml_problem(error)}") from None
    except yaml.YAMLError as error:
        raise ConfigurationError(f"{path}: not valid YAML: {_one_line(str(error))}") from None
    except RecursionError:  # the pure-Python loader; libyaml stops at 1000 levels by itself
        raise ConfigurationError(f"{path}: not valid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def regular_file_problem(path: Path, what: str = "a file") -> str | None:
    """Why ``path``, which should be ``what`` (``"an environment file"``), is not a regular file to read
    (after following symbolic links), or None.

    Asked before opening: opening a pipe nobody writes to blocks until someone does.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            return "is a symbolic link to a file that does not exist"
        return f"no such {what.partition(' ')[2] or what}"
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "is a symbolic link that loops (it cannot be resolved)"
        return f"cannot be read: {error.strerror}"
    if stat.S_ISDIR(mode):
        return f"is a directory, not {what}"
    if not stat.S_ISREG(mode):
        return "is not a regular file (a pipe, device or socket); give a file"
    return None


def read_bounded(path: Path, *, limit: int, what: str) -> bytes:
    """The bytes of regular file ``path``, which is ``what`` (``"an environment file"``): at most ``limit``.

    :raises ConfigurationError: one line starting with ``path``: not a regular file, unreadable, or larger.
    """
    problem = regular_file_problem(path, what)
    if problem is not None:
        raise ConfigurationError(f"{path}: {problem}")
    try:
        # O_NONBLOCK: should it have become a pipe since it was looked at, the open does not wait for a writer
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as stream:
            status = os.fstat(stream.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise ConfigurationError(
                    f"{path}: is not a regular file (a pipe, device or socket); give a file"
                )
            data = stream.read(limit + 1) if status.st_size <= limit else b""
    except OSError as error:
        raise ConfigurationError(f"{path}: cannot be read: {error.strerror}") from None
    if status.st_size > limit or len(data) > limit:
        size = max(status.st_size, len(data))
        raise ConfigurationError(
            f"{path}: is {size / 1024:,.0f} KiB, more than the {_size(limit)} {what} may be, so it is not "
            "read; is it the right file?"
        )
    return data


def read_json(path: Path, *, what: str, limit: int = MAX_JSON_BYTES) -> Any:
    """The JSON document in regular file ``path``, which is ``what`` (bounded as :func:`read_bounded`).

    :raises ConfigurationError: one line starting with ``path``, saying where the JSON is broken.
    """
    data = read_bounded(path, limit=limit, what=what)
    try:
        return json.loads(data)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        raise ConfigurationError(f"{path}: not valid JSON: {error.msg} ({where}); is it {what}?") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"{path}: not valid JSON: not UTF-8 text; is it {what}?") from None
    except ValueError as error:  # a number of more digits than Python converts
        raise ConfigurationError(f"{path}: not valid JSON: {_one_line(str(error))[:100]}") from None
    except RecursionError:
        raise ConfigurationError(f"{path}: not valid JSON: nested too deeply; is it {what}?") from None


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"


def _yaml_problem(error: yaml.MarkedYAMLError) -> str:
    """PyYAML's four-line report as one line: where (``LINE:COLUMN: ``), what, and what it was in the middle of."""
    mark = error.problem_mark or error.context_mark
    where = f"{mark.line + 1}:{mark.column + 1}: " if mark is not None else "1: "
    message = f"{where}not valid YAML: {error.problem or error.context}"
    if error.context and error.problem:
        message += f" ({error.context}"
        if error.context_mark is not None:
            message += f" at line {error.context_mark.line + 1}, column {error.context_mark.column + 1}"
        message += ")"
    return _one_line(message)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


class _Frame:
    """A node being walked: its remaining children, and the values and text counted so far."""

    __slots__ = ("characters", "children", "node", "part", "values")

    def __init__(self, node: Node, part: str) -> None:
        self.node, self.part, self.values = node, part, 1
        self.characters = len(node.value) if isinstance(node, ScalarNode) else 0
        self.children = _children(node)


def _check_graph(root: Node) -> None:
    """Refuse repeated keys, recursion and more than :data:`MAX_VALUES` values once aliases are expanded."""
    if not _plain_tree(root):
        _walk(root)


def _plain_tree(root: Node) -> bool:
    """Whether the graph is a tree (no aliases) of at most :data:`MAX_VALUES` nodes without repeated keys.

    The common case, checked at a third of :func:`_walk`'s cost; any doubt is left to :func:`_walk`.
    """
    seen: set[int] = set()
    pending = [root]
    while pending:
        node = pending.pop()
        if id(node) in seen or len(seen) >= MAX_VALUES:
            return False
        seen.add(id(node))
        if isinstance(node, MappingNode):
            keys = [key.value for key, _ in node.value if isinstance(key, ScalarNode)]
            if len(set(keys)) != len(keys):
                return False
            for key, value in node.value:
                pending.append(key)
                pending.append(value)
        elif isinstance(node, SequenceNode):
            pending.extend(node.value)
    return True


def _walk(root: Node) -> None:
    """:func:`_check_graph` for any graph, with the line and field path of what it refuses.

    Depth-first without recursion (libyaml allows 1000 levels of nesting): each node is entered once and
    its expanded size remembered for every further alias to it. Field paths are joined only for a message.
    """
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, characters) it stands for, expanded
    entered: set[int] = {id(root)}  # the nodes on the current path
    shared = False
    frames = [_Frame(root, "")]
    _refuse_repeated_keys(root, frames)
    while frames:
        frame = frames[-1]
        for child, part in frame.children:
            known = sizes.get(id(child))
            if known is not None:
                shared = True
                frame.values += known[0]
                frame.characters += known[1]
                _count(frame, shared)
            elif id(child) in entered:
                raise _Refused(
                    str(_line(child)),
                    f"{_path(frames, part) or 'the document'}: an alias refers to a section that contains it; "
                    "an environment cannot be recursive",
                )
            else:
                entered.add(id(child))
                frames.append(_Frame(child, part))
                _refuse_repeated_keys(child, frames)
                break
        else:
            frames.pop()
            entered.discard(id(frame.node))
            sizes[id(frame.node)] = (frame.values, frame.characters)
            if frames:
                frames[-1].values += frame.values
                frames[-1].characters += frame.characters
                _count(frames[-1], shared)


def _count(frame: _Frame, shared: bool) -> None:
    if frame.characters > MAX_EXPANDED_CHARACTERS:  # only with aliases: else at most the file's size
        raise _Refused(
            str(_line(frame.node)),
            f"aliases (*name) expand the document to more than {MAX_EXPANDED_CHARACTERS // 1024} KiB of text "
            "(an environment is a few KiB); write the repeated value out, or repeat it less",
        )
    if frame.values <= MAX_VALUES:
        return
    if shared:
        raise _Refused(
            str(_line(frame.node)),
            f"aliases (*name) expand the document to more than {MAX_VALUES} values (an environment holds a few "
            "hundred); repeat a section by writing it out, not by nesting aliases",
        )
    raise _Refused(
        str(_line(frame.node)),
        f"holds more than {MAX_VALUES} values (an environment holds a few hundred); is it the right file?",
    )


def _children(node: Node) -> Iterator[tuple[Node, str]]:
    """A node's children, each with its part of the field path (a key, or an index in a list)."""
    if isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            yield item, str(index)
    elif isinstance(node, MappingNode):
        for key, value in node.value:
            yield key, ""
            yield value, key.value if isinstance(key, ScalarNode) else "?"


def _refuse_repeated_keys(node: Node, frames: list[_Frame]) -> None:
    if not isinstance(node, MappingNode):
        return
    seen: dict[tuple[str, str], Node] = {}
    for key, _ in node.value:
        if not isinstance(key, ScalarNode) or key.tag == _MERGE_TAG:
            continue  # a merge key (<<) may be overridden; complex keys are refused later as not strings
        first = seen.setdefault((key.tag, key.value), key)
        if first is not key:
            path = _path(frames)
            raise _Refused(
                str(_line(key)),
                f"{path + ': ' if path else ''}key {excerpt(key.value)} is given twice (lines {_line(first)} "
                f"and {_line(key)}); YAML allows a key once per mapping and the first would be ignored: "
                "merge them into one",
            )


def _path(frames: list[_Frame], last: str = "") -> str:
    """The field path of the innermost frame (``storage.lustre``, ``eks.efa_nodegroups.0``), and ``last``."""
    parts = [frame.part for frame in frames[1:] if frame.part] + ([last] if last else [])
    return ".".join(part if len(part) <= 40 else part[:37] + "..." for part in parts)


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1
