"""The environment file model: defaults, and one exact message per rule."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from training_clusters.config import (
    EnvironmentConfig,
    environment_name,
    load_environment,
    parse_environment,
    yaml_file,
)
from training_clusters.config.yaml_file import _BoundedLoader as BoundedLoader
from training_clusters.environments import environment_files
from training_clusters.model.capacity import Capacity
from training_clusters.model.errors import ConfigurationError
from training_clusters.rules.regions import known_regions
from training_clusters.rules.tags import (
    MAX_TAG_KEY,
    MAX_TAG_VALUE,
    TAG_CHARACTERS,
    refused_characters,
    tag_value_problem,
    unicode_character_class,
)

from .conftest import ROOT

BASE: dict[str, Any] = {"region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"]}


def with_(**sections: Any) -> dict[str, Any]:
    return {**BASE, **sections}


def test_minimal_file_gets_the_documented_defaults() -> None:
    config = parse_environment(BASE)
    assert config.network.cidr == "10.0.0.0/16"
    assert config.network.nat_gateways is None
    assert config.storage.lustre is not None
    assert config.storage.lustre.storage_capacity_gib == 1200
    assert config.storage.lustre.mount_dir == "/fsx"
    assert config.placement_availability_zone == "us-east-1a"


@pytest.mark.parametrize(
    ("document", "line"),
    [
        (
            with_(netwrok={}),
            "  netwrok: unknown key (got value {}); did you mean network?",
        ),
        ({"availability_zones": ["us-east-1a"]}, "  region: required, but missing"),
        (with_(region="useast1"), "  region: must be an AWS region such as us-east-1, got 'useast1'"),
        (
            with_(account="1234"),
            "  account: must be a 12-digit AWS account id (quote it in YAML), got '1234'",
        ),
        (
            with_(availability_zones=["us-west-2a"]),
            "  availability_zones: 'us-west-2a' is not an AZ of region us-east-1 (expected e.g. us-east-1a)",
        ),
        (
            with_(storage={"lustre": {"storage_capacity_gib": 1000}}),
            "  storage.lustre: storage_capacity_gib must be 1200 or a multiple of 2400 for SCRATCH_2, got 1000",
        ),
        (
            with_(storage={"lustre": {"deployment_type": "PERSISTENT_2"}}),
            "  storage.lustre: per_unit_storage_throughput_mbps is required for PERSISTENT_2; allowed: 125, 250, 500, 1000",
        ),
        (
            with_(storage={"lustre": {"deployment_type": "SCRATCH_1"}}),
            "  storage.lustre.deployment_type: must be one of SCRATCH_2, PERSISTENT_2, got 'SCRATCH_1'",
        ),
        (
            with_(storage={"lustre": {"mount_dir": "fsx"}}),
            "  storage.lustre.mount_dir: must be an absolute directory such as /fsx, got 'fsx'",
        ),
        (
            with_(storage={"lustre": {"mount_dir": "/"}}),
            "  storage.lustre.mount_dir: must be an absolute directory such as /fsx, got '/'",
        ),
        (
            with_(storage={"lustre": {"mount_dir": "/etc"}}),
            "  storage.lustre.mount_dir: '/etc' is reserved by the operating system or Slurm; use e.g. /fsx or "
            "/shared",
        ),
        (
            with_(storage={"lustre": {"mount_dir": "/root"}}),
            "  storage.lustre.mount_dir: '/root' is reserved by the operating system or Slurm; use e.g. /fsx or "
            "/shared",
        ),
        (
            with_(storage={"lustre": {"mount_dir": "/opt/slurm"}}),
            "  storage.lustre.mount_dir: '/opt/slurm' is reserved by the operating system or Slurm; use e.g. /fsx "
            "or /shared",
        ),
        (
            with_(storage={"lustre": {"mount_dir": "/usr/local/data"}}),
            "  storage.lustre.mount_dir: '/usr/local/data' is reserved by the operating system or Slurm; use e.g. "
            "/fsx or /shared",
        ),
        (
            with_(storage={"lustre": {"mount_dir": "/shared/../etc"}}),
            "  storage.lustre.mount_dir: must not contain '.' or '..' segments, got '/shared/../etc'",
        ),
        (
            with_(network={"nat_gateways": 0}),
            "  network: nat_gateways is 0, which leaves private subnets without a way out; enable endpoint_only to "
            "reach AWS through VPC endpoints instead, or use 1 or more NAT gateways",
        ),
        (
            with_(network={"placement_availability_zone": "us-east-1c"}),
            "  network.placement_availability_zone: 'us-east-1c' must be one of availability_zones "
            "(us-east-1a, us-east-1b)",
        ),
        (
            with_(network={"flow_logs_retention_days": 10}),
            "  network.flow_logs_retention_days: must be one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, "
            "400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653, got 10",
        ),
        (
            with_(network={"placement_group": {"strategy": "clustered"}}),
            "  network.placement_group.strategy: must be one of cluster, partition, spread, got 'clustered'",
        ),
        (
            with_(network={"nat_gateways": "two"}),
            "  network.nat_gateways: Input should be a valid integer, unable to parse string as an integer, got 'two'",
        ),
        (
            with_(
                hyperpod={
                    "cluster_name": "x",
                    "instance_groups": [{"name": "c", "instance_type": "ml.c5.xlarge", "threads": 2}],
                }
            ),
            "  hyperpod.instance_groups.0.threads: unknown key (got value 2); did you mean threads_per_core?",
        ),
        (
            with_(
                hyperpod={
                    "cluster_name": "x",
                    "instance_groups": [{"name": "c", "instance_type": "ml.c5.xlarge", "role": "head"}],
                }
            ),
            "  hyperpod.instance_groups.0.role: must be one of controller, login, worker, got 'head'",
        ),
    ],
)
def test_bad_documents_name_the_field_the_value_and_what_is_allowed(
    document: dict[str, Any], line: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(document, source="env.yaml")
    lines = str(error.value).splitlines()
    assert lines[0].startswith("env.yaml: ")
    assert line in lines


def test_two_orchestrator_sections_are_a_clear_error() -> None:
    groups = [
        {"name": "c", "instance_type": "ml.c5.xlarge", "role": "controller"},
        {"name": "w", "instance_type": "ml.c5.xlarge", "partition": "dev"},
    ]
    hyperpod = {"cluster_name": "x", "instance_groups": groups}
    eks: dict[str, Any] = {}
    with pytest.raises(ConfigurationError) as error:
        parse_environment(with_(hyperpod=hyperpod, eks=eks), source="env.yaml")
    assert (
        "  eks: an environment has one orchestrator, got sections hyperpod, eks; keep one of "
        "hyperpod, parallelcluster, eks, pcs, hyperpod_eks (or none, for network and storage only)"
        in str(error.value).splitlines()
    )


def test_loading_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(with_(storage={"lustre": {"storag_capacity_gib": 1200}})))
    with pytest.raises(ConfigurationError) as error:
        load_environment(path)
    assert str(error.value).startswith(f"{path}: 1 problem(s)")
    assert "storage.lustre.storag_capacity_gib: unknown key" in str(error.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("region: [unclosed", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping of sections, got list"),
    ],
)
def test_unreadable_files_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=message):
        load_environment(path)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no such environment file"):
        load_environment(tmp_path / "nope.yaml")


# --------------------------------------------------------------------------------------------------
# tags: the strictest pattern of the services an environment tags


#: Tag texts every service accepts: Unicode letters, numbers and spaces, and _ . : / = + - @.
GOOD_TAG_TEXTS = [
    "ml-platform",
    "Équipe données",
    "東京 チーム",
    "team_a.b:c/d=e+f-g@h",
    "½ Ⅻ ٣",  # \p{N}: other and letter numbers, Arabic-Indic digits
    "no\u00a0break\u2003em",  # \p{Z}: no-break and em spaces
]
#: One refused character each; the message must name it.
BAD_TAG_CHARACTERS = ["&", ",", ";", "#", "!", '"', "'", "*", "(", "%", "\\", "|", "~", "\t", "\u200b", "🚀"]


@pytest.mark.parametrize("text", GOOD_TAG_TEXTS)
def test_tag_texts_of_any_script_are_accepted(text: str) -> None:
    config = parse_environment(with_(cost_centre=text, tags={text: text}))
    assert config.resource_tags("env")[text] == text
    assert config.resource_tags("env")["cost-centre"] == text


@pytest.mark.parametrize("character", BAD_TAG_CHARACTERS, ids=[repr(c) for c in BAD_TAG_CHARACTERS])
@pytest.mark.parametrize("where", ["cost_centre", "tag key", "tag value"])
def test_a_character_one_tagged_service_refuses_is_refused_everywhere_we_tag(
    character: str, where: str
) -> None:
    text = f"R{character}D"
    document = {
        "cost_centre": with_(cost_centre=text),
        "tag key": with_(tags={text: "research"}),
        "tag value": with_(tags={"team": text}),
    }[where]
    with pytest.raises(ConfigurationError) as error:
        parse_environment(document, source="env.yaml")
    line = str(error.value).splitlines()[1]
    field = {"cost_centre": "cost_centre: ", "tag key": "tags: key ", "tag value": "tags: value "}[where]
    assert line.startswith(f"  {field}")
    assert f"holds {character!r}, which IAM, SageMaker, FSx and CloudWatch Logs refuse in tags" in line
    assert line.endswith("allowed: letters, numbers, spaces and _ . : / = + - @")


@pytest.mark.parametrize(
    ("tags", "line"),
    [
        ({"": "x"}, "  tags: key '' must be 1-128 characters, got 0"),
        ({"k" * 129: "x"}, "must be 1-128 characters, got 129"),
        ({"AWS:team": "x"}, "  tags: key 'AWS:team' must not start with 'aws:' (reserved for AWS)"),
        ({"team": "v" * 257}, "must be at most 256 characters, got 257"),
        ({"environment": "prod"}, "  tags: 'environment' is set by the library (project, environment)"),
    ],
)
def test_tag_lengths_and_reserved_keys(tags: dict[str, str], line: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(with_(tags=tags), source="env.yaml")
    assert line in str(error.value)


def test_the_longest_tags_are_accepted() -> None:
    parse_environment(with_(tags={"k" * 128: "v" * 256, "empty": ""}, cost_centre="c" * 256))


def _character_class_of(pattern: str) -> str:
    """botocore writes the same class as ``[..]*``, ``([..]*)``, ``^([..]*)$`` or with ``+``: the class."""
    return pattern.removeprefix("^").removesuffix("$").removeprefix("(").removesuffix(")").rstrip("*+")


def _tag_shapes(service: str) -> list[tuple[str, dict[str, Any]]]:
    """(``key`` or ``value``, string shape) of every tag key and value shape of a service's model."""
    from botocore.loaders import create_loader

    shapes: dict[str, Any] = create_loader().load_service_model(service, "service-2")["shapes"]
    found = []
    for name, shape in shapes.items():
        if name.lower() == "tag" and shape["type"] == "structure":  # Tag {Key, Value}
            members = shape["members"]
            for role, member in (
                ("key", "Key"),
                ("value", "Value"),
                ("key", "TagKey"),
                ("value", "TagValue"),
            ):
                if member in members:
                    found.append((role, shapes[members[member]["shape"]]))
        # TagMap {key: value}; not Secrets Manager's SecretVersionsToStagesMapType (staging labels)
        elif "tag" in name.lower() and "stage" not in name.lower() and shape["type"] == "map":
            found += [("key", shapes[shape["key"]["shape"]]), ("value", shapes[shape["value"]["shape"]])]
    return found


@pytest.mark.parametrize("service", ["iam", "sagemaker", "fsx", "logs"])
def test_our_tag_characters_and_lengths_are_those_of_the_strictest_services(service: str) -> None:
    patterns = {(role, shape.get("pattern"), shape.get("max")) for role, shape in _tag_shapes(service)}
    assert {(role, _character_class_of(p), m) for role, p, m in patterns if p} == {
        ("key", TAG_CHARACTERS, MAX_TAG_KEY),
        ("value", TAG_CHARACTERS, MAX_TAG_VALUE),
    }


def test_no_service_an_environment_deploys_has_a_stricter_tag_pattern(environment_gates: Any) -> None:
    """Stack tags reach every resource of every (nested) template: each of their services' tag shapes has
    no pattern or ours, and lengths of at least ours (botocore names services as CloudFormation does)."""
    namespaces = set()
    for path in environment_files(ROOT / "environments"):
        stack, _ = environment_gates.get(path)
        for construct in stack.node.find_all():
            if cdk.CfnResource.is_cfn_resource(construct):
                kind = construct.cfn_resource_type
                if kind.startswith("AWS::"):
                    namespaces.add(kind.split("::")[1].lower())
    assert {"iam", "fsx", "logs", "sagemaker", "ec2", "eks", "lambda"} <= namespaces
    for service in sorted(namespaces):
        for role, shape in _tag_shapes(service):
            limit = MAX_TAG_KEY if role == "key" else MAX_TAG_VALUE
            assert shape.get("max", limit) >= limit, (service, role, shape)
            if "pattern" in shape:
                assert _character_class_of(shape["pattern"]) == TAG_CHARACTERS, (service, role, shape)


@pytest.mark.parametrize(
    ("pattern", "text", "refused"),
    [
        (TAG_CHARACTERS, "a-b_c 1", []),
        (TAG_CHARACTERS, "a&b,c&d", ["&", ","]),
        (r"[\p{N}\-]", "1-٣x", ["x"]),
        (r"[\p{L}]", "aé-", ["-"]),
    ],
)
def test_refused_characters_reports_each_once_in_order(pattern: str, text: str, refused: list[str]) -> None:
    assert refused_characters(text, pattern) == refused


@pytest.mark.parametrize("pattern", [r"[a-z]", r"[\p{Lu}]", r"\p{L}*", r"[\w]", r"[\d_]"])
def test_character_classes_we_cannot_read_exactly_are_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match="not a character class"):
        unicode_character_class(pattern)


@given(st.from_regex(r"[a-zA-Z][a-zA-Z0-9-]{0,62}", fullmatch=True))
@settings(max_examples=50, derandomize=True, database=None)
def test_every_environment_name_is_a_valid_tag_value(name: str) -> None:
    """The ``environment`` tag's value is the name (a name field or the file name): always taggable."""
    config = parse_environment(with_(name=name))
    assert tag_value_problem(environment_name(config, None)) is None


# --------------------------------------------------------------------------------------------------
# regions and availability zones, against botocore's partitions


def test_every_region_botocore_lists_is_accepted() -> None:
    from botocore.loaders import create_loader

    partitions = create_loader().load_data("partitions")["partitions"]
    regions = {r for p in partitions for r in p["regions"] if not r.endswith("-global")}
    assert {"us-east-1", "eu-central-1", "cn-north-1", "us-gov-west-1", "eusc-de-east-1"} <= regions
    assert known_regions() == regions
    for region in sorted(regions):
        parse_environment({"region": region, "availability_zones": [f"{region}a"]})


@pytest.mark.parametrize(
    ("document", "line"),
    [
        (
            with_(region="us-central-1", availability_zones=["us-central-1a"]),
            "  region: 'us-central-1' is not a region botocore {version} knows; did you mean one "
            "of eu-central-1, mx-central-1, me-central-1? for a region newer than botocore, set "
            "allow_unknown_region: true",
        ),
        (
            with_(region="aws-global", availability_zones=["aws-globala"]),
            "  region: must be an AWS region such as us-east-1, got 'aws-global'",
        ),
        (
            with_(region="us-east", allow_unknown_region=True),
            "  region: must be an AWS region such as us-east-1, got 'us-east'",
        ),
        (
            with_(availability_zones=["us-east-1-bos-1a"]),
            "  availability_zones: 'us-east-1-bos-1a' is not an AZ of region us-east-1 "
            "(expected e.g. us-east-1a)",
        ),
        (with_(availability_zones=["us-east-11"]), "'us-east-11' is not an AZ of region us-east-1"),
        (with_(availability_zones=["us-east-1A"]), "'us-east-1A' is not an AZ of region us-east-1"),
    ],
)
def test_regions_and_zones_botocore_does_not_know_are_refused(document: dict[str, Any], line: str) -> None:
    import botocore

    with pytest.raises(ConfigurationError) as error:
        parse_environment(document, source="env.yaml")
    assert line.format(version=botocore.__version__) in str(error.value).splitlines()[1]


def test_a_region_newer_than_botocore_is_accepted_when_the_file_says_so() -> None:
    document = with_(region="us-central-1", availability_zones=["us-central-1a", "us-central-1b"])
    config = parse_environment({**document, "allow_unknown_region": True})
    assert config.region == "us-central-1"
    description = EnvironmentConfig.model_json_schema()["properties"]["allow_unknown_region"]["description"]
    assert "newer than" in description and "Default: false" in description


# --------------------------------------------------------------------------------------------------
# loading: repeated keys, aliases, bounded reports


def load_text(tmp_path: Path, text: str) -> str:
    """The error message of loading ``text`` (the file is env.yaml in ``tmp_path``)."""
    path = tmp_path / "env.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as error:
        load_environment(path)
    return str(error.value).removeprefix(f"{path}:")  # what follows is the line: "3: key 'region' ..."


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "region: us-east-1\navailability_zones: [us-east-1a]\nregion: us-west-2\n",
            "3: key 'region' is given twice (lines 1 and 3)",
        ),
        (
            "region: us-east-1\navailability_zones: [us-east-1a]\nstorage:\n  lustre: {mount_dir: /a, "
            "mount_dir: /b}\n",
            "4: storage.lustre: key 'mount_dir' is given twice (lines 4 and 4)",
        ),
        (
            "region: us-east-1\navailability_zones: [us-east-1a]\ntags:\n  a: x\n  'a': y\n",
            "5: tags: key 'a' is given twice (lines 4 and 5)",
        ),
    ],
)
def test_a_repeated_key_names_the_key_and_both_lines(tmp_path: Path, text: str, message: str) -> None:
    assert load_text(tmp_path, text) == (
        f"{message}; YAML allows a key once per mapping and the first would be ignored: merge them into one"
    )


def test_keys_that_differ_by_type_and_merge_key_overrides_are_not_repeats(tmp_path: Path) -> None:
    path = tmp_path / "env.yaml"
    path.write_text(
        "region: us-east-1\navailability_zones: [us-east-1a]\ntags: {'1': a, '2': b}\n"
        "x-base: &base {nat_gateways: 2, endpoint_only: false}\n"
    )
    assert "x-base: unknown key" in load_text(tmp_path, path.read_text())  # the file parses, then this
    path.write_text(
        "region: us-east-1\navailability_zones: [us-east-1a, us-east-1b]\n"
        "network:\n  <<: {nat_gateways: 2, cidr: 10.1.0.0/16}\n  nat_gateways: 1\n"
    )
    network = load_environment(path).network
    assert (network.nat_gateways, network.cidr) == (1, "10.1.0.0/16")


def test_shared_anchors_within_the_limit_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "env.yaml"
    path.write_text(
        "region: us-east-1\navailability_zones: &zones [us-east-1a, us-east-1b]\n"
        "network: {placement_availability_zone: us-east-1b}\ntags: &t {team: research}\n"
    )
    assert load_environment(path).availability_zones == ["us-east-1a", "us-east-1b"]


@pytest.mark.parametrize("loader", ["libyaml", "pure Python"])
def test_the_checks_hold_for_either_loader(
    loader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if loader == "pure Python":
        pure = type("PureBounded", (yaml.SafeLoader,), {"get_single_data": BoundedLoader.get_single_data})
        monkeypatch.setattr(yaml_file, "_BoundedLoader", pure)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcde", "bcdef", strict=True)
    )
    assert "aliases (*name) expand the document to more than 10000 values" in load_text(tmp_path, bomb)
    assert "key 'a' is given twice (lines 1 and 2)" in load_text(tmp_path, "a: 1\na: 2\n")
    assert "an alias refers to a section that contains it" in load_text(tmp_path, "a: &a [*a]\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("region: " + "1" * 5000, "1:9: not valid YAML: '1111"),
        (
            "region: 2024-13-45",
            "1:9: not valid YAML: '2024-13-45' is not a valid timestamp (month",
        ),
        ("region: !!bool 'maybe'", "1:9: not valid YAML: 'maybe' is not a valid bool"),
        ("region: !!timestamp 'x'", "1:9: not valid YAML: 'x' is not a valid timestamp"),
        ("region: !!int abc", "1:9: not valid YAML: 'abc' is not a valid int (invalid literal"),
    ],
)
def test_a_value_python_cannot_construct_is_one_line_naming_it(
    tmp_path: Path, text: str, message: str
) -> None:
    """Python's own errors while PyYAML builds a value (int digits limit, month 13) would be tracebacks."""
    line = load_text(tmp_path, text + "\n")
    assert line.startswith(message) and "\n" not in line and len(line) < 400


def test_a_yaml_syntax_error_is_one_line_with_where_and_what(tmp_path: Path) -> None:
    message = load_text(tmp_path, "region: us-east-1\navailability_zones: [us-east-1a\nnetwork: {}\n")
    assert message == (
        "3:8: not valid YAML: did not find expected ',' or ']' (while parsing a flow sequence "
        "at line 2, column 21)"
    )


def test_python_tags_are_refused_not_constructed(tmp_path: Path) -> None:
    message = load_text(tmp_path, "region: !!python/object/apply:os.system [echo hi]\n")
    assert "not valid YAML: could not determine a constructor for the tag" in message


def test_a_directory_is_not_an_environment_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="is a directory, not an environment file"):
        load_environment(tmp_path)


def test_a_report_lists_ten_problems_and_counts_the_rest() -> None:
    document = with_(**{f"unknown_{i}": "x" * 5000 for i in range(25)})
    with pytest.raises(ConfigurationError) as error:
        parse_environment(document, source="env.yaml")
    lines = str(error.value).splitlines()
    assert lines[0] == "env.yaml: 25 problem(s)" and lines[-1] == "  ... and 15 more"
    assert len(lines) == 12 and all(len(line) < 250 for line in lines)


def test_a_long_message_keeps_its_field_and_its_end() -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(with_(storage={"lustre": {"mount_dir": "/" + "d" * 4000 + "$"}}), source="env.yaml")
    line = str(error.value).splitlines()[1]
    assert line.startswith(
        "  storage.lustre.mount_dir: must be an absolute directory such as /fsx, got '/ddd"
    )
    assert line.endswith("... (4002 characters)") and len(line) < 250


# --------------------------------------------------------------------------------------------------
# where a problem is written, and what an unknown key was meant to be

PCLUSTER_FILE = """\
region: us-east-1
availability_zones: [us-east-1a, us-east-1b]
parallelcluster:
  queues:
    - name: compute
      compute_resources:
        - name: c5n
          instance_type: c5n.9xlarge
          max_cont: 2
"""


def problem_line(tmp_path: Path, text: str) -> str:
    """The one problem line of loading ``text`` from ``env.yaml`` in ``tmp_path``, without its indent."""
    path = tmp_path / "env.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as error:
        load_environment(path)
    head, line = str(error.value).splitlines()
    assert head == f"{path}: 1 problem(s)"
    return line.removeprefix("  ").replace(f"{path}:", "env.yaml:")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            PCLUSTER_FILE,
            "env.yaml:9: parallelcluster.queues.0.compute_resources.0.max_cont: unknown key (got value 2); did "
            "you mean max_count?",
        ),
        (
            PCLUSTER_FILE.replace("max_cont: 2", "max_count: 2\n          ssh: 2"),
            "env.yaml:10: parallelcluster.queues.0.compute_resources.0.ssh: unknown key (got value 2); allowed "
            "here: name, instance_type, min_count, max_count, efa, gdr_support, disable_simultaneous_"
            "multithreading, capacity, gpu_health_check",
        ),
        (
            PCLUSTER_FILE.replace("max_cont: 2", "max_count: 2") + "storage:\n  nat_gateways: 1\n",
            "env.yaml:11: storage.nat_gateways: unknown key (got value 1); allowed here: lustre",
        ),
        (
            PCLUSTER_FILE.replace("max_cont: 2", "max_count: 2") + "xyzzy: 1\n",
            "env.yaml:10: xyzzy: unknown key (got value 1); check the spelling against environments/schema.json",
        ),
        (
            "region: us-central-1\navailability_zones: [us-central-1a]\n",
            "env.yaml:1: region: 'us-central-1' is not a region botocore {version} knows; did you mean one of "
            "eu-central-1, mx-central-1, me-central-1? for a region newer than botocore, set "
            "allow_unknown_region: true",
        ),
        (
            "region: us-east-1\navailability_zones: [us-east-1a]\nnetwork:\n  cidr: 10.0.0.0/24\n",
            "env.yaml:4: network.cidr: '10.0.0.0/24' (256 addresses) cannot hold 1 private /18 and 1 public /24 "
            "subnets; use a larger range or a longer private_subnet_mask",
        ),
        (  # a problem of a list item: the line of its first key
            PCLUSTER_FILE.replace("max_cont: 2", "max_count: 2\n          min_count: 3"),
            "env.yaml:7: parallelcluster.queues.0.compute_resources.0: min_count 3 is greater than max_count 2",
        ),
        (  # a key written under an anchor and merged: the line where it is written
            "region: us-east-1\navailability_zones: [us-east-1a]\ntags: &tags {team: research}\nstorage:\n"
            "  lustre:\n    <<: *tags\n",
            # storage.lustre's nine keys are longer than a listing: the schema lists them
            "env.yaml:3: storage.lustre.team: unknown key (got value 'research'); check the spelling against "
            "environments/schema.json",
        ),
        (  # compute of an intent: checked before its orchestrator's section is written
            "region: us-east-1\navailability_zones: [us-east-1a]\norchestrator: parallelcluster\ncompute:\n"
            "  node_groups:\n    - name: gpu\n      instance_type: g5.8xlarge\n      max_cont: 3\n",
            "env.yaml:8: compute.node_groups[0].max_cont: unknown key (got value 3); did you mean max_count?",
        ),
        (  # a key of the older capacity form in an intent's node group: what to write instead
            "region: us-east-1\navailability_zones: [us-east-1a]\norchestrator: eks\ncompute:\n"
            "  node_groups:\n    - name: gpu\n      instance_type: p5.48xlarge\n      capacity_type: spot\n",
            "env.yaml:8: compute.node_groups[0].capacity_type: was replaced by capacity; write capacity: {{type: "
            "spot}} instead",  # doubled braces: the expected line goes through str.format
        ),
        (  # where no capacity is taken, an older capacity key is just unknown
            "region: us-east-1\navailability_zones: [us-east-1a]\nnetwork:\n  capacity_type: spot\n",
            "env.yaml:4: network.capacity_type: unknown key (got value 'spot'); allowed here: cidr, nat_gateways, "
            "endpoint_only, placement_availability_zone, flow_logs_retention_days, placement_group",
        ),
        (  # a section an intent wrote is not in the file: no line
            "region: us-east-1\navailability_zones: [us-east-1a]\norchestrator: parallelcluster\ncompute:\n"
            "  controller: {instance_type: t3.medium}\n  node_groups:\n    - name: gpu\n"
            "      instance_type: c5n.9xlarge\n      max_count: 200\n",
            "parallelcluster.head_node.instance_type: t3.medium has 4 GiB of memory, and ParallelCluster refuses "
            "a head node of less than 8.6 GiB for 200 compute nodes (max_count added up: 1 GiB per 25 nodes and "
            "0.6 for the system, at most 16); choose a larger head node or lower max_count",
        ),
    ],
    ids=[
        "did-you-mean",
        "allowed-keys",
        "misplaced-key",
        "schema",
        "region",
        "model-validator-field",
        "list-item",
        "merged-anchor",
        "intent-compute",
        "intent-older-capacity-key",
        "older-capacity-key-elsewhere",
        "intent-written-section",
    ],
)
def test_a_problem_names_its_line_and_an_unknown_key_what_was_meant(
    tmp_path: Path, text: str, line: str
) -> None:
    import botocore

    assert problem_line(tmp_path, text) == line.format(version=botocore.__version__)


def test_the_merged_key_s_own_line_is_named(tmp_path: Path) -> None:
    text = (
        "x-lustre: &lustre {deployment_type: SCRATCH_2, storage_capacity_gib: 1000}\n"
        "region: us-east-1\navailability_zones: [us-east-1a]\nstorage:\n  lustre:\n    <<: *lustre\n"
    )
    path = tmp_path / "env.yaml"
    path.write_text(text)
    document, lines = yaml_file.read_yaml_with_lines(path)
    assert lines.line(document, ("storage", "lustre", "storage_capacity_gib")) == 1
    assert lines.line(document, ("storage", "lustre")) == 5
    assert lines.line(document, ("storage", "lustre", "deployment_type", "x"), whole=True) is None


# --------------------------------------------------------------------------------------------------
# node counts: the subnet every node takes an address in, HyperPod's API, ParallelCluster's head node

C5N_RESOURCE = {"name": "c5n", "instance_type": "c5n.9xlarge"}
SUBNET_WHY = (
    "each node takes an address in the placement subnet, a private /18 of 16,379 usable addresses (AWS "
    "reserves 5 of every subnet's 16,384)"
)


def _pcluster(*counts: int, head_node: str = "m5.xlarge", login: int = 0) -> dict[str, Any]:
    resources = [{**C5N_RESOURCE, "name": f"c5n-{i}", "max_count": n} for i, n in enumerate(counts)]
    section: dict[str, Any] = {
        "head_node": {"instance_type": head_node},
        "queues": [{"name": "compute", "compute_resources": resources}],
    }
    if login:
        section["login_nodes"] = [{"count": login}]
    return with_(parallelcluster=section)


def _hyperpod(*counts: int) -> dict[str, Any]:
    groups = [
        {"name": f"workers-{i}", "instance_type": "ml.c5.xlarge", "partition": "dev", "count": n}
        for i, n in enumerate(counts)
    ]
    controller = {"name": "controller", "instance_type": "ml.m5.xlarge", "role": "controller"}
    return with_(hyperpod={"cluster_name": "x", "instance_groups": [controller, *groups]})


def _eks_sizes(efa: int = 0, gpu: int = 0, system: int = 2, reserved: bool = False) -> dict[str, Any]:
    section: dict[str, Any] = {"system_nodegroup": {"size": system}}
    if efa:
        section["efa_nodegroups"] = [{"name": "p5", "instance_type": "p5.48xlarge", "size": efa}]
    if gpu:
        group: dict[str, Any] = {"name": "g5", "instance_type": "g5.xlarge", "size": gpu}
        if reserved:
            group["capacity"] = {"type": "reservation", "reservation_id": "cr-0123456789abcdef0"}
        section["gpu_nodegroups"] = [group]
    return with_(eks=section)


@pytest.mark.parametrize(
    ("document", "line"),
    [
        (
            _pcluster(100_000),
            "  parallelcluster.queues.0.compute_resources.0.max_count: must be at most 16,378, got 100000: "
            f"{SUBNET_WHY}, and the other nodes there take 1",
        ),
        (
            _pcluster(10_000, 6_377, login=2),
            "  parallelcluster.queues.0.compute_resources.0.max_count: must be at most 9,999, got 10000: "
            f"{SUBNET_WHY}, and the other nodes there take 6,380",
        ),
        (
            _pcluster(200, head_node="t3.medium"),
            "  parallelcluster.head_node.instance_type: t3.medium has 4 GiB of memory, and ParallelCluster "
            "refuses a head node of less than 8.6 GiB for 200 compute nodes (max_count added up: 1 GiB per 25 "
            "nodes and 0.6 for the system, at most 16); choose a larger head node or lower max_count",
        ),
        (
            _hyperpod(100_000),
            "  hyperpod.instance_groups.1.count: must be at most 6758 (the most instances HyperPod's API takes "
            "in one instance group), got 100000",
        ),
        (
            _hyperpod(6_000, 6_000, 6_000),
            f"  hyperpod.instance_groups.1.count: must be at most 4,378, got 6000: {SUBNET_WHY}, and the other "
            "nodes there take 12,001",
        ),
        (
            _eks_sizes(efa=20_000),
            f"  eks.efa_nodegroups.0.size: must be at most 16,379, got 20000: {SUBNET_WHY}",
        ),
        (
            _eks_sizes(efa=10_000, gpu=7_000, reserved=True),
            f"  eks.efa_nodegroups.0.size: must be at most 9,379, got 10000: {SUBNET_WHY}, and the other nodes "
            "there take 7,000",
        ),
        (
            _eks_sizes(gpu=30_000, system=3_000),
            "  eks.gpu_nodegroups.0.size: must be at most 29,758, got 30000: each node takes an address in the 2 "
            "private subnets, /18s of 16,379 usable addresses each (AWS reserves 5 of every subnet's 16,384), "
            "and the other nodes there take 3,000",
        ),
    ],
    ids=[
        "pcluster-100000",
        "pcluster-together",
        "pcluster-head-node-memory",
        "hyperpod-api-maximum",
        "hyperpod-together",
        "eks-placement-subnet",
        "eks-placement-reserved",
        "eks-private-subnets",
    ],
)
def test_node_counts_beyond_what_the_network_or_the_service_allows_are_refused(
    document: dict[str, Any], line: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(document, source="env.yaml")
    assert str(error.value).splitlines() == ["env.yaml: 1 problem(s)", line]


@pytest.mark.parametrize(
    "document",
    [
        _pcluster(16_378),
        _pcluster(10_000, 6_376, login=1),
        _pcluster(375, head_node="m5.xlarge"),
        _pcluster(10, head_node="t3.medium"),
        _hyperpod(6_758),
        _eks_sizes(efa=16_379, system=1),
        _eks_sizes(gpu=16_000, system=2),
    ],
    ids=[
        "pcluster",
        "pcluster-together",
        "head-node-16-gib",
        "head-node-small",
        "hyperpod",
        "eks",
        "eks-spread",
    ],
)
def test_node_counts_at_the_bounds_are_accepted(document: dict[str, Any]) -> None:
    parse_environment(document)


# --------------------------------------------------------------------------------------------------
# capacity sections

BLOCK = "cr-0123456789abcdef0"
PLAN_ARN = "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"
P5_EFA = {"name": "p5", "instance_type": "p5.48xlarge", "size": 2}
P5_RESOURCE = {"name": "p5", "instance_type": "p5.48xlarge", "min_count": 2, "max_count": 2}
HYPERPOD_CONTROLLER = {"name": "controller", "instance_type": "ml.m5.xlarge", "role": "controller"}


def _eks(**group: Any) -> dict[str, Any]:
    return with_(eks={"efa_nodegroups": [{**P5_EFA, **group}]})


def _pcluster(queue: dict[str, Any] | None = None, **resource: Any) -> dict[str, Any]:
    return with_(
        parallelcluster={
            "queues": [{"name": "gpu", "compute_resources": [{**P5_RESOURCE, **resource}], **(queue or {})}]
        }
    )


def _hyperpod(capacity: dict[str, Any]) -> dict[str, Any]:
    worker = {"name": "gpu", "instance_type": "ml.p5.48xlarge", "partition": "gpu", "capacity": capacity}
    return with_(hyperpod={"cluster_name": "c", "instance_groups": [HYPERPOD_CONTROLLER, worker]})


def test_capacity_sections_become_the_capacity_model() -> None:
    eks = parse_environment(_eks(capacity={"type": "capacity_block", "reservation_id": BLOCK})).eks
    assert eks is not None and eks.efa_nodegroups[0].node_capacity() == Capacity.capacity_block(BLOCK)
    queue = {"capacity": {"type": "reservation", "reservation_id": BLOCK, "targeted": False}}
    pcluster = parse_environment(_pcluster(queue)).parallelcluster
    assert pcluster is not None
    assert pcluster.queues[0].queue_capacity() == Capacity.reservation(BLOCK, targeted=False)
    hyperpod = parse_environment(_hyperpod({"type": "training-plan", "training_plan_arn": PLAN_ARN})).hyperpod
    assert hyperpod is not None and hyperpod.instance_groups[1].capacity is not None
    assert hyperpod.instance_groups[1].capacity.to_capacity() == Capacity.training_plan(PLAN_ARN)


@pytest.mark.parametrize(
    ("document", "line"),
    [
        (
            _eks(capacity={"type": "training-plan", "training_plan_arn": PLAN_ARN}),
            "  eks.efa_nodegroups.0.capacity: training-plan is not supported by Amazon EKS managed nodegroups; "
            "use on-demand or spot or reservation or capacity-block",
        ),
        (
            _eks(capacity_type="spot", capacity={"type": "spot"}),
            "  eks.efa_nodegroups.0.capacity_type: was replaced by capacity; write capacity: {type: spot} instead",
        ),
        (
            _eks(capacity={"type": "capacity-block"}),
            "  eks.efa_nodegroups.0.capacity: capacity-block capacity needs reservation_id",
        ),
        (
            _eks(capacity={"type": "reservation", "reservation_id": "cr-1"}),
            "  eks.efa_nodegroups.0.capacity: reservation_id must look like cr-0123456789abcdef0, got 'cr-1'",
        ),
        (
            _hyperpod({"type": "spot"}),
            "  hyperpod.instance_groups.1.capacity: spot is not supported by SageMaker HyperPod; use on-demand or "
            "training-plan",
        ),
        (
            _pcluster(capacity={"type": "on-demand"}),
            "  parallelcluster.queues.0.compute_resources.0.capacity: of a compute resource must be a reservation "
            "or a capacity-block, got on-demand; on-demand and spot are the queue's capacity",
        ),
        (
            _pcluster({"capacity": {"type": "capacity-block", "reservation_id": BLOCK}}, min_count=0),
            f"  parallelcluster.queues.0: compute resource 'p5' uses Capacity Block {BLOCK}, whose nodes are all "
            "static: min_count must equal max_count and be 1 or more, got 0 and 2",
        ),
        (
            _pcluster({"capacity": {"type": "spot"}, "capacity_type": "SPOT"}),
            "  parallelcluster.queues.0.capacity_type: was replaced by capacity; write capacity: {type: spot} "
            "instead",
        ),
        (
            with_(
                parallelcluster={
                    "queues": [
                        {
                            "name": "cpu",
                            "compute_resources": [
                                {"name": "t3", "instance_type": "t3.medium", "gpu_health_check": True}
                            ],
                        }
                    ]
                }
            ),
            "  parallelcluster.queues.0.compute_resources.0: gpu_health_check applies to NVIDIA GPU instance types "
            "(it runs DCGM diagnostics), got t3.medium",
        ),
    ],
)
def test_bad_capacity_sections_name_the_field_and_what_is_allowed(
    document: dict[str, Any], line: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_environment(document, source="env.yaml")
    assert line in str(error.value).splitlines()


def test_a_reserved_queue_may_turn_its_placement_group_off_even_with_efa() -> None:
    queue = {"capacity": {"type": "reservation", "reservation_id": BLOCK}, "placement": "none"}
    assert parse_environment(_pcluster(queue)).parallelcluster is not None
    with pytest.raises(ConfigurationError, match="placement: is none, but compute resource 'p5' uses EFA"):
        parse_environment(_pcluster({"placement": "none"}))


def test_the_node_monitoring_agent_is_on_by_default() -> None:
    eks = parse_environment(_eks()).eks
    assert eks is not None and eks.addons.node_monitoring_agent is True


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"storage": {"lustre": {"mount_dir": "/" + "d" * 5000}}},
            "storage.lustre.mount_dir: String should have at most 4096 characters",
        ),
        (
            {"eks": {"nccl_test": {"image": "public.ecr.aws/hpc/nccl-tests:latest\nrm -rf /"}}},
            "eks.nccl_test.image: String should match pattern",
        ),
    ],
)
def test_free_text_that_reaches_nodes_has_a_bound(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        parse_environment(with_(**section), source="env.yaml")
