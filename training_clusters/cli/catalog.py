"""``training-clusters catalog``: the instance types the catalogue knows."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from training_clusters.catalog import all_instance_types
from training_clusters.cli.common import EXIT_OK, print_json
from training_clusters.model.tables import text_table

if TYPE_CHECKING:
    pass


def catalog_command(args: argparse.Namespace, out: TextIO) -> int:
    types = all_instance_types()
    if args.output == "json":
        from training_clusters.catalog import to_row

        print_json(out, [to_row(t) for t in types])
        return EXIT_OK
    rows = [
        (
            t.name,
            str(t.vcpus),
            f"{t.memory_gib:g}",
            f"{t.accelerators.count} x {t.accelerators.model}" if t.accelerators else "-",
            str(t.max_efa_interfaces or "-"),
            str(t.max_network_cards),
            "yes" if t.gpudirect_rdma else "no",
            f"{t.network_gbps:g}",
            t.quota_family.value,
            t.hyperpod_name or "-",
        )
        for t in types
    ]
    header = (
        "type",
        "vCPUs",
        "GiB",
        "accelerators",
        "EFA",
        "cards",
        "GPUDirect",
        "Gbit/s",
        "quota",
        "HyperPod",
    )
    print(text_table(header, rows), file=out)
    return EXIT_OK
