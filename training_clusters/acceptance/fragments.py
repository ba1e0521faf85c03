"""The bash the generated acceptance scripts are made of, and the settings block that parameterises it.

A generated script is a header of comments, ``set -euo pipefail``, a settings block of ``readonly NAME=...``
lines written here, then fragments of bash joined in order. The fragments are the files in ``bash/``
(package data, shellchecked as files by the tests): plain bash without interpolation, reading every
parameter from the settings block.

Each fragment file opens with a header (comment lines up to the first blank line) that says what the file
is and carries its shellcheck directives; :func:`fragment` drops it, so the scripts carry only the bodies.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path

from training_clusters.acceptance.expectations import Expectation, Transport, plain_number

#: The fragment files (package data).
FRAGMENT_DIR = Path(str(resources.files("training_clusters.acceptance") / "bash"))

#: What the NCCL gate wants in an EFA run's log besides the bandwidth (``transport`` in ``nccl_check.sh``).
NCCL_EFA_EVIDENCE = "NCCL's log shows the aws-ofi-nccl plugin on libfabric's efa provider ('NET/OFI Selected provider is efa')"
#: What the OSU gate wants in an EFA run's output besides the figure (``efa_evidence`` in ``osu_check_output.sh``).
OSU_EFA_EVIDENCE = "'fi_info -p efa -t FI_EP_RDM' lists libfabric's efa provider on both nodes"

#: What the gate prints after FAIL, by test and transport: where to look first.
FAIL_HINTS: dict[tuple[str, Transport], str] = {
    ("osu-bw", Transport.EFA): (
        "EFA is not delivering: check that both nodes share one cluster placement group, that the EFA "
        "security group allows all traffic to and from itself, and that 'fi_info -p efa' lists a device on "
        "each node."
    ),
    ("osu-bw", Transport.TCP): "The network itself is slow between these nodes: check their placement.",
    ("osu-latency", Transport.EFA): (
        "Latency this high means the nodes are far apart (no cluster placement group) or EFA is degraded."
    ),
    ("osu-latency", Transport.TCP): "The network itself is slow between these nodes: check their placement.",
    ("nccl-tests", Transport.EFA): (
        "NCCL is not getting EFA's bandwidth: check the aws-ofi-nccl plugin (NCCL INFO lines 'NET/OFI'), "
        "FI_PROVIDER=efa, the placement group and the EFA security group."
    ),
    ("nccl-tests", Transport.TCP): "NCCL's socket transport is slower than one TCP flow: check the network.",
}


@cache
def fragment(name: str) -> str:
    """The body of ``bash/<name>.sh``: the file without its header.

    :raises ValueError: the file has no header ending in a blank line.
    """
    text = (FRAGMENT_DIR / f"{name}.sh").read_text()
    header, blank_line, body = text.partition("\n\n")
    if not blank_line or not all(line.startswith("#") for line in header.splitlines()):
        raise ValueError(f"bash/{name}.sh must open with comment lines and a blank line before its body")
    return body


def comment_lines(text: str) -> list[str]:
    """``text`` as bash comment lines of at most 110 characters."""
    return textwrap.wrap(text, width=110, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False)


def readonly_lines(values: Iterable[tuple[str, str]]) -> list[str]:
    """``readonly NAME=VALUE`` for each pair, the value quoted for bash."""
    return [f"readonly {name}={shlex.quote(value)}" for name, value in values]


def gate_settings(expectation: Expectation, hint: str) -> list[tuple[str, str]]:
    """The settings ``common.sh``'s ``judge`` reads: the metric, its limit and the hint printed on failure."""
    return [
        ("METRIC", expectation.metric),
        ("METRIC_UNIT", expectation.unit),
        ("EXPECTED", "" if expectation.expected is None else plain_number(expectation.expected)),
        ("LIMIT", plain_number(expectation.limit)),
        ("HIGHER_IS_BETTER", "yes" if expectation.higher_is_better else "no"),
        ("FAIL_HINT", hint),
    ]
