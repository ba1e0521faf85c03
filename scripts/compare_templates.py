#!/usr/bin/env python3
"""Compare the CloudFormation templates of two cloud assemblies (``cdk.out`` folders).

::

    python scripts/compare_templates.py BEFORE_CDK_OUT AFTER_CDK_OUT [--ignore Outputs.NcclTest*] [--json]

Templates are matched by file name (``<stack>.template.json``, nested assemblies included). For each
template that differs the report lists the top-level keys that differ down to the entry that changed
(``Outputs.NcclTestG5``, ``Resources.EksClusterABC123.Properties``), with both values when they are short.
``--ignore`` takes glob patterns of such paths that are expected to differ; they are reported apart and do
not count. Exit status: 0 when nothing else differs, 1 otherwise, 2 for bad arguments.

Other files of the assemblies (assets, manifests, anything else written during synth) are listed as
added or removed only, so a stack that stops writing a file shows up.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Values longer than this (as JSON) are summarised instead of printed.
SHOWN_VALUE_CHARS = 240


@dataclass
class Comparison:
    """What differs between two assemblies."""

    only_before: list[str] = field(default_factory=list)
    """Template files only in the first assembly."""
    only_after: list[str] = field(default_factory=list)
    identical: list[str] = field(default_factory=list)
    differences: dict[str, list[tuple[str, Any, Any]]] = field(default_factory=dict)
    """Per template file: (path, before, after) of each unexpected difference."""
    expected: dict[str, list[tuple[str, Any, Any]]] = field(default_factory=dict)
    """Per template file: the differences matching an ``--ignore`` pattern."""
    other_files_only_before: list[str] = field(default_factory=list)
    other_files_only_after: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """No unexpected difference in the templates, and the same templates on both sides."""
        return not (self.only_before or self.only_after or self.differences)

    def as_dict(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "identical": self.identical,
            "only_before": self.only_before,
            "only_after": self.only_after,
            "differences": {k: [list(d) for d in v] for k, v in self.differences.items()},
            "expected": {k: [list(d) for d in v] for k, v in self.expected.items()},
            "other_files_only_before": self.other_files_only_before,
            "other_files_only_after": self.other_files_only_after,
        }


def templates(assembly: Path) -> dict[str, Path]:
    """Every ``*.template.json`` under ``assembly``, by its path relative to it."""
    return {path.relative_to(assembly).as_posix(): path for path in sorted(assembly.rglob("*.template.json"))}


def other_files(assembly: Path) -> set[str]:
    """Files that are not templates, relative to ``assembly`` (asset folders count as one entry each)."""
    names = set()
    for path in assembly.iterdir():
        if path.name.endswith(".template.json"):
            continue
        names.add(path.name + ("/" if path.is_dir() else ""))
    return names


def differences(before: Any, after: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, before, after) for each differing entry, descending into the top two levels of a template
    (``Resources.<id>.<attribute>``) and stopping there: deeper changes are reported on their parent."""
    depth = path.count(".") + 1 if path else 0
    if isinstance(before, dict) and isinstance(after, dict) and depth < 3:
        for key in sorted(set(before) | set(after), key=str):
            child = f"{path}.{key}" if path else str(key)
            if key not in before:
                yield child, _MISSING, after[key]
            elif key not in after:
                yield child, before[key], _MISSING
            else:
                yield from differences(before[key], after[key], child)
    elif before != after:
        yield path, before, after


class _Missing:
    def __repr__(self) -> str:
        return "<absent>"


_MISSING = _Missing()


def compare(before: Path, after: Path, ignore: Sequence[str] = ()) -> Comparison:
    """Compare the templates of two assemblies; differences matching ``ignore`` globs are expected."""
    result = Comparison()
    old, new = templates(before), templates(after)
    result.only_before = sorted(set(old) - set(new))
    result.only_after = sorted(set(new) - set(old))
    for name in sorted(set(old) & set(new)):
        left = json.loads(old[name].read_text())
        right = json.loads(new[name].read_text())
        if left == right:
            result.identical.append(name)
            continue
        for difference in differences(left, right):
            expected = any(fnmatch.fnmatchcase(difference[0], pattern) for pattern in ignore)
            (result.expected if expected else result.differences).setdefault(name, []).append(difference)
    before_files, after_files = other_files(before), other_files(after)
    result.other_files_only_before = sorted(before_files - after_files)
    result.other_files_only_after = sorted(after_files - before_files)
    return result


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "<absent>"
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= SHOWN_VALUE_CHARS else f"<{len(text)} characters of JSON>"


def report(result: Comparison) -> str:
    """The comparison as text for people."""
    lines = [f"identical templates: {len(result.identical)}"]
    lines += [f"only in the first assembly: {name}" for name in result.only_before]
    lines += [f"only in the second assembly: {name}" for name in result.only_after]
    for title, found in (("DIFFERS", result.differences), ("expected difference", result.expected)):
        for name, entries in found.items():
            lines.append(f"{title}: {name}")
            for path, left, right in entries:
                lines += [f"  {path}", f"    before: {_shown(left)}", f"    after:  {_shown(right)}"]
    lines += [f"other file only in the first assembly: {name}" for name in result.other_files_only_before]
    lines += [f"other file only in the second assembly: {name}" for name in result.other_files_only_after]
    lines.append("templates match" if result.clean else "templates DIFFER")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare the templates of two cloud assemblies.")
    parser.add_argument("before", type=Path, help="first cdk.out folder")
    parser.add_argument("after", type=Path, help="second cdk.out folder")
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="GLOB",
        help="path of an expected difference, e.g. 'Outputs.NcclTest*' (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args(argv)
    for folder in (args.before, args.after):
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder")
    result = compare(args.before, args.after, args.ignore)
    print(json.dumps(result.as_dict(), indent=2, default=repr) if args.json else report(result))
    return 0 if result.clean else 1


if __name__ == "__main__":
    sys.exit(main())
