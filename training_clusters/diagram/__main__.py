"""``make diagrams``: ``python -m training_clusters.diagram [DIRECTORY]`` draws every shipped environment.

Writes ``DIRECTORY/<environment>.svg`` and ``.md`` (default ``docs/environments``) for each file in
``environments/``, synthesizing them in one app.
"""

from __future__ import annotations

import sys
from pathlib import Path

from training_clusters.diagram import write_environment_diagrams
from training_clusters.environments import environment_files
from training_clusters.errors import ConfigurationError

DOCS = Path("docs/environments")


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    directory = Path(arguments[0]) if arguments else DOCS
    try:
        _make_directory(directory)
        written = write_environment_diagrams(environment_files(), directory)
    except ConfigurationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


def _make_directory(directory: Path) -> None:
    """``directory`` and its parents, made where missing.

    :raises ConfigurationError: one line: it, or a folder above it, is a file, or cannot be made.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigurationError(f"{directory}: is a file, not a directory; give a directory") from None
    except NotADirectoryError:
        raise ConfigurationError(f"{directory}: a folder above it is a file, not a directory") from None
    except OSError as error:
        raise ConfigurationError(f"{directory}: cannot be made: {error.strerror}") from None


if __name__ == "__main__":
    sys.exit(main())
