"""``make diagrams``: ``python -m training_clusters.diagram [DIRECTORY]`` draws every shipped environment.

Writes ``DIRECTORY/<environment>.svg`` and ``.md`` (default ``docs/environments``) for each file in
``environments/``, synthesizing them in one app.
"""

from __future__ import annotations

import sys
from pathlib import Path

from training_clusters.diagram import make_directory, write_environment_diagrams
from training_clusters.environments import environment_files
from training_clusters.model.errors import ConfigurationError

DOCS = Path("docs/environments")


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    directory = Path(arguments[0]) if arguments else DOCS
    try:
        make_directory(directory)
        written = write_environment_diagrams(environment_files(), directory)
    except ConfigurationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
