"""MIG layouts: checked against the catalogue's profiles, turned into mig-parted's config and node labels."""

from __future__ import annotations

import pytest

from training_clusters.catalog import lookup
from training_clusters.model.errors import ConfigurationError
from training_clusters.model.options import MigLayout, MigStrategy
from training_clusters.rules.eks import mig_layout_problem, mig_strategy_problem
from training_clusters.workloads.mig import (
    mig_config_name,
    mig_devices,
    mig_node_labels,
    mig_parted_config,
    mig_resource,
    profile_slices,
)


@pytest.mark.parametrize(
    ("instance_type", "layout", "devices", "name"),
    [
        ("p4d.24xlarge", "all-1g.5gb", {"1g.5gb": 7}, "all-1g.5gb"),
        ("p4d.24xlarge", "all-1g.10gb", {"1g.10gb": 4}, "all-1g.10gb"),
        ("p5.48xlarge", "all-1g.10gb", {"1g.10gb": 7}, "all-1g.10gb"),
        ("p5.48xlarge", "all-1g.20gb", {"1g.20gb": 4}, "all-1g.20gb"),
        ("p5.48xlarge", "all-2g.20gb", {"2g.20gb": 3}, "all-2g.20gb"),
        ("p5.48xlarge", "all-3g.40gb", {"3g.40gb": 2}, "all-3g.40gb"),
        ("p5.48xlarge", "all-7g.80gb", {"7g.80gb": 1}, "all-7g.80gb"),
        ("p5en.48xlarge", "all-1g.18gb", {"1g.18gb": 7}, "all-1g.18gb"),
        ("p4d.24xlarge", "all-balanced", {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, "all-balanced-40gb"),
        ("p5.48xlarge", "all-balanced", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, "all-balanced-80gb"),
        ("p5en.48xlarge", "all-balanced", {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}, "all-balanced-141gb"),
        (
            "p6-b200.48xlarge",
            "all-balanced",
            {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
            "all-balanced-180gb",
        ),
        ("p5.48xlarge", {"4g.40gb": 1, "3g.40gb": 1}, {"3g.40gb": 1, "4g.40gb": 1}, "custom-notebooks"),
    ],
)
def test_layouts_become_the_instances_of_each_gpu(
    instance_type: str, layout: str | dict[str, int], devices: dict[str, int], name: str
) -> None:
    entry, parsed = lookup(instance_type), MigLayout.parse(layout)
    assert mig_layout_problem(entry, parsed) is None
    assert mig_devices(entry, parsed) == devices
    assert mig_config_name(entry, parsed, "notebooks") == name


def test_a_profile_takes_its_share_of_compute_and_memory() -> None:
    p5 = lookup("p5.48xlarge")
    assert [
        profile_slices(p5, p) for p in ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
    ] == [
        (1, 1),
        (1, 2),
        (2, 2),
        (3, 4),
        (4, 4),
        (7, 8),
    ]


@pytest.mark.parametrize(
    ("instance_type", "layout", "message"),
    [
        (
            "g5.2xlarge",
            "all-1g.10gb",
            "needs MIG-capable GPUs (A100, H100, H200, B200); 'g5.2xlarge' has A10G",
        ),
        (
            "m5.xlarge",
            "all-balanced",
            "needs MIG-capable GPUs (A100, H100, H200, B200); 'm5.xlarge' has no GPU",
        ),
        (
            "p4d.24xlarge",
            "all-3g.40gb",
            "'all-3g.40gb' is not a MIG profile of A100 40 GB (p4d.24xlarge); it offers 1g.5gb, 1g.10gb, "
            "2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb (and all-balanced)",
        ),
        (
            "p5en.48xlarge",
            {"1g.10gb": 7},
            "'1g.10gb' is not a MIG profile of H200 141 GB (p5en.48xlarge); it offers 1g.18gb, 1g.35gb, "
            "2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb (and all-balanced)",
        ),
        # first refused on each axis: one compute slice too many, one memory slice too many
        (
            "p5.48xlarge",
            {"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1},
            "{'1g.10gb': 1, '3g.40gb': 1, '4g.40gb': 1} does not fit one H100 GPU: it takes 8 of 7 compute and "
            "9 of 8 memory slices",
        ),
        (
            "p5.48xlarge",
            {"1g.20gb": 4, "1g.10gb": 1},
            "{'1g.10gb': 1, '1g.20gb': 4} does not fit one H100 GPU: it takes 5 of 7 compute and 9 of 8 memory "
            "slices",
        ),
    ],
)
def test_layouts_the_gpu_cannot_hold_are_refused(
    instance_type: str, layout: str | dict[str, int], message: str
) -> None:
    assert mig_layout_problem(lookup(instance_type), MigLayout.parse(layout)) == message


@pytest.mark.parametrize(
    "layout", [{"1g.20gb": 4}, {"1g.10gb": 7}, {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}, {"3g.40gb": 2}]
)
def test_layouts_that_fill_the_gpu_exactly_are_accepted(layout: dict[str, int]) -> None:
    """The last accepted: 7 compute or 8 memory slices."""
    assert mig_layout_problem(lookup("p5.48xlarge"), MigLayout.parse(layout)) is None


@pytest.mark.parametrize(
    "value", ["all-", "1g.10gb", {}, {"1g.10gb": 0}, {"1g.10gb": True}, 7, ["all-1g.10gb"]]
)
def test_a_layout_is_spelt_one_of_three_ways(value: object) -> None:
    with pytest.raises(ConfigurationError) as error:
        MigLayout.parse(value)
    assert str(error.value).startswith(
        "must be 'all-<profile>' (e.g. all-1g.10gb), 'all-balanced' or a mapping of MIG profiles to instances "
        "per GPU (e.g. {3g.40gb: 1, 4g.40gb: 1}), got "
    )


def test_the_mig_parted_config_holds_all_disabled_and_each_layout() -> None:
    config = mig_parted_config({"all-1g.10gb": {"1g.10gb": 7}, "custom-a": {"3g.40gb": 1, "4g.40gb": 1}})
    assert config == {
        "version": "v1",
        "mig-configs": {
            "all-disabled": [{"devices": "all", "mig-enabled": False}],
            "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
            "custom-a": [
                {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "4g.40gb": 1}}
            ],
        },
    }


def test_node_labels_put_the_mig_manager_exactly_where_asked() -> None:
    p5, g5 = lookup("p5.48xlarge"), lookup("g5.2xlarge")
    assert mig_node_labels(p5, "all-1g.10gb", mig_manager=True) == {"nvidia.com/mig.config": "all-1g.10gb"}
    assert mig_node_labels(p5, None, mig_manager=True) == {"nvidia.com/gpu.deploy.mig-manager": "false"}
    assert mig_node_labels(p5, None, mig_manager=False) == {}
    assert mig_node_labels(g5, None, mig_manager=True) == {}


def test_pods_ask_for_the_resource_the_strategy_advertises() -> None:
    assert mig_resource(MigStrategy.MIXED, "1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert mig_resource(MigStrategy.SINGLE, "1g.10gb") == "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("strategy", "layouts", "message"),
    [
        (MigStrategy.NONE, {}, None),
        (MigStrategy.MIXED, {"a": "all-balanced", "b": {"3g.40gb": 2}}, None),
        (MigStrategy.SINGLE, {"a": "all-1g.10gb", "b": "all-3g.40gb"}, None),
        (
            MigStrategy.NONE,
            {"b": "all-1g.10gb", "a": "all-balanced"},
            "must be SINGLE or MIXED when a nodegroup sets mig (got NONE; nodegroups with mig: a, b): MIXED "
            "advertises nvidia.com/mig-<profile>, SINGLE nvidia.com/gpu",
        ),
        (
            MigStrategy.MIXED,
            {},
            "must be NONE unless a GPU nodegroup sets mig (got MIXED): nothing would partition the GPUs, and the "
            "device plugin would advertise whole GPUs without an error",
        ),
        (
            MigStrategy.SINGLE,
            {"a": "all-1g.10gb", "b": "all-balanced", "c": {"7g.80gb": 1}},
            "SINGLE needs every GPU of a node split one way (mig: all-<profile>); nodegroups b, c mix profiles: "
            "use MIXED",
        ),
    ],
)
def test_the_device_plugins_strategy_matches_the_layouts(
    strategy: MigStrategy, layouts: dict[str, str | dict[str, int]], message: str | None
) -> None:
    parsed = {name: MigLayout.parse(layout) for name, layout in layouts.items()}
    assert mig_strategy_problem(strategy, parsed) == message
