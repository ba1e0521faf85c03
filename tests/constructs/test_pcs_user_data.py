"""PCS user data as cloud-init reads it: the shipped environments' launch templates, parsed and handled by
cloud-init's own code.

What this proves, for every node group of ``pcs-c5n.yaml``, ``pcs-p5.yaml`` and ``training-any.yaml`` under
``orchestrator: pcs`` (each mounts FSx for Lustre from user data): the synthesized ``UserData`` (its
CloudFormation tokens replaced by values of the right shape) goes through cloud-init's ``UserDataProcessor``
(what a datasource's ``get_userdata`` runs) and its default part handlers (``stages.Init._consume_userdata``,
as on a node's first boot) into exactly two parts, with no part left unhandled and no warning logged:
first a ``text/cloud-boothook``, the metadata guard, which cloud-init's boothook handler writes (mode 0700)
and runs at once, while it consumes the user data (here the run is recorded, not made: it would change this
machine's netfilter rules); then a ``text/x-shellscript``, which cloud-init's shell-script handler writes,
mode 0700, into the instance's scripts folder, from which the ``scripts_user`` module runs it once per
instance (https://cloudinit.readthedocs.io/en/latest/reference/modules.html#scripts-user). Each file is the
script the construct meant, byte for byte, and passes ``bash -n`` and shellcheck. There is no
``text/cloud-config`` part, so nothing is merged into the instance's cloud-config; a cloud-config part, were
one added, would be validated with cloud-init's own schema (``cloudinit.config.schema``, strict), as the
control cases below show the harness does. What the guard does on a node is shown on a booted Debian node
(``tests/integration/test_pcs_guard_real.py``).

What it does not prove: how PCS merges this MIME document with its own user data (AWS's side, see
https://docs.aws.amazon.com/pcs/latest/userguide/working-with_ec2-user-data.html), or what the script does
on a node (``tests/constructs/test_pcs.py`` runs it with stubbed mount tools).

It needs cloud-init, run with the interpreter of the ``cloud-init`` command (its own ``#!`` line): on
Debian or Ubuntu, ``apt-get install --no-install-recommends cloud-init``. Without it every test here skips,
saying so. cloud-init works in a temporary folder (its cloud and run folders are set there, and checked to
be there before anything is written); nothing on the machine is touched.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml

from training_clusters.config import parse_environment
from training_clusters.constructs.pcs.cluster import (
    MIME_BOUNDARY,
    imds_guard_boothook,
    lustre_mount_script,
    node_user_data,
)
from training_clusters.environments import add_environment_config
from training_clusters.stacks.pcs import PcsEnvironment

from ..conftest import CDK_CONTEXT, ROOT, EnvironmentGates
from ..lifecycle.sandbox import shellcheck_path

SHIPPED = ["pcs-c5n.yaml", "pcs-p5.yaml"]
#: Values of the right shape for the tokens the user data holds (the file system's id, DNS suffix ...).
FILE_SYSTEM_ID = "fs-0123456789abcdef0"
MOUNT_NAME = "abcdefgh"
URL_SUFFIX = "amazonaws.com"

#: Run by cloud-init's own interpreter: argv = work folder, user-data file. Prints what cloud-init made of it.
_CLOUD_INIT_RUN = r"""
import json, logging, os, sys

import yaml
from cloudinit import distros, helpers, stages
from cloudinit.config import schema
from cloudinit.settings import PER_INSTANCE
from cloudinit.sources.DataSourceNone import DataSourceNone

work, user_data = sys.argv[1], open(sys.argv[2], "rb").read()
warnings = []


class Keep(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            warnings.append(record.getMessage())


logging.getLogger("cloudinit").addHandler(Keep())
# A boothook runs at once (cloud-init's BootHookPartHandler calls subp.subp on the file it wrote): recorded here,
# never run on this machine.
from cloudinit.handlers import boot_hook

ran = []
boot_hook.subp.subp = lambda command, **kwargs: ran.append(list(command))
logging.getLogger("cloudinit").setLevel(logging.DEBUG)
paths = helpers.Paths({"cloud_dir": work + "/cloud", "run_dir": work + "/run", "templates_dir": work + "/t"})
cfg = {"datasource_list": ["None"], "datasource": {"None": {"userdata_raw": user_data}}}
distro = distros.fetch("debian")("debian", {}, paths)
datasource = DataSourceNone(cfg, distro, paths)
paths.datasource = datasource
for path in (paths.cloud_dir, paths.run_dir):
    assert path.startswith(work + "/"), path
assert datasource.get_data()
init = stages.Init(ds_deps=[])
init._cfg, init._paths, init._distro, init.datasource = cfg, paths, distro, datasource
scripts, cloud_config = paths.get_ipath_cur("scripts"), paths.get_ipath("cloud_config")
for path in (scripts, cloud_config):
    assert path.startswith(work + "/"), path
init._consume_userdata(PER_INSTANCE)

merged = open(cloud_config).read() if os.path.exists(cloud_config) else ""
schema_errors = []
if merged.strip():
    try:
        schema.validate_cloudconfig_schema(yaml.safe_load(merged), schema.get_schema(), strict=True)
    except schema.SchemaValidationError as error:
        schema_errors = [f"{path}: {message}" for path, message in error.schema_errors]
names = sorted(os.listdir(scripts)) if os.path.isdir(scripts) else []
boothooks = paths.get_ipath("boothooks")
assert boothooks.startswith(work + "/"), boothooks
hooks = sorted(os.listdir(boothooks)) if os.path.isdir(boothooks) else []
print(json.dumps({
    "parts": [
        [part.get_content_type(), part.get_filename()]
        for part in datasource.get_userdata(True).walk()
        if part.get_content_maintype() != "multipart"
    ],
    "scripts": {name: oct(os.stat(os.path.join(scripts, name)).st_mode & 0o777) for name in names},
    "scripts_dir": scripts,
    "boothooks": {name: oct(os.stat(os.path.join(boothooks, name)).st_mode & 0o777) for name in hooks},
    "boothooks_dir": boothooks,
    "ran": ran,
    "cloud_config": merged,
    "schema_errors": schema_errors,
    "warnings": warnings,
}))
"""


@cache
def _cloud_init_python() -> str | None:
    """The interpreter the ``cloud-init`` command runs with, when it can import cloud-init; else None."""
    command = shutil.which("cloud-init")
    if command is None:
        return None
    first_line = Path(command).read_text(errors="replace").splitlines()[0]
    interpreter = first_line[2:].strip().split()[0] if first_line.startswith("#!") else sys.executable
    found = subprocess.run(
        [interpreter, "-c", "import cloudinit.stages, cloudinit.user_data, cloudinit.config.schema"],
        capture_output=True,
        check=False,
    )
    return interpreter if found.returncode == 0 else None


@pytest.fixture
def cloud_init() -> str:
    python = _cloud_init_python()
    if python is None:
        pytest.skip(
            "cloud-init is not installed here (no `cloud-init` command whose interpreter imports it); on Debian "
            "or Ubuntu: apt-get install --no-install-recommends cloud-init"
        )
    return python


def _consume(python: str, user_data: str, work: Path) -> dict[str, Any]:
    """What cloud-init makes of ``user_data``: its parts, the scripts it writes, the merged cloud-config."""
    work.mkdir(parents=True)
    (work / "user-data").write_text(user_data)
    (work / "run.py").write_text(_CLOUD_INIT_RUN)
    done = subprocess.run(
        [python, str(work / "run.py"), str(work), str(work / "user-data")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _rendered(value: Any, tokens: dict[str, str]) -> str:
    """A CloudFormation string value with each ``Ref`` / ``Fn::GetAtt`` replaced from ``tokens``."""
    if isinstance(value, str):
        return value
    ((function, argument),) = value.items()
    if function == "Fn::Base64":
        return _rendered(argument, tokens)
    if function == "Fn::Join":
        separator, parts = argument
        return str(separator).join(_rendered(part, tokens) for part in parts)
    if function == "Ref":
        return tokens[argument]
    if function == "Fn::GetAtt":
        return tokens[".".join(argument)]
    raise AssertionError(f"unexpected intrinsic {function} in the user data")


def _tokens(template: dict[str, Any], region: str) -> dict[str, str]:
    (file_system,) = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::FSx::FileSystem"]
    return {
        "AWS::URLSuffix": URL_SUFFIX,
        "AWS::Region": region,
        file_system: FILE_SYSTEM_ID,
        f"{file_system}.LustreMountName": MOUNT_NAME,
        f"{file_system}.DNSName": f"{FILE_SYSTEM_ID}.fsx.{region}.{URL_SUFFIX}",
    }


def _environment(name: str, gates: EnvironmentGates, tmp_path: Path) -> tuple[PcsEnvironment, dict[str, Any]]:
    if name in SHIPPED:
        path = ROOT / "environments" / name
        stack, _ = gates.get(path)
        assert isinstance(stack, PcsEnvironment)
        return stack, gates.template(path)
    document = yaml.safe_load((ROOT / "environments" / "training-any.yaml").read_text())
    document["orchestrator"] = "pcs"
    document["ignore"] = ["compute.controller"]  # PCS runs the controller itself (the file's own advice)
    app = cdk.App(outdir=str(tmp_path / "cdk.out"), context=dict(CDK_CONTEXT))
    stack = add_environment_config(app, parse_environment(document), "training-any-pcs")
    assert isinstance(stack, PcsEnvironment)
    return stack, app.synth().get_stack_by_name(stack.stack_name).template


def _assert_clean_parts(result: dict[str, Any], expected_script: str | None) -> None:
    """The guard's boothook first (written and run), then, when there is one, the mount script."""
    expected_parts = [["text/cloud-boothook", "part-001"]]
    if expected_script is not None:
        expected_parts.append(["text/x-shellscript", "part-002"])
    assert result["parts"] == expected_parts
    assert result["warnings"] == []
    assert result["cloud_config"] == ""  # no cloud-config part: nothing merged, nothing to validate
    assert result["schema_errors"] == []
    hook = Path(result["boothooks_dir"]) / "part-001"
    assert result["boothooks"] == {"part-001": "0o700"}
    assert result["ran"] == [[str(hook)]]  # run at once, while cloud-init consumes the user data
    assert hook.read_text() == imds_guard_boothook()
    _assert_shell(hook)
    if expected_script is None:
        assert result["scripts"] == {}
        return
    assert result["scripts"] == {"part-002": "0o700"}
    script = Path(result["scripts_dir"]) / "part-002"
    assert script.read_text() == expected_script
    _assert_shell(script)


def _assert_shell(script: Path) -> None:
    syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert syntax.returncode == 0, syntax.stderr
    lint = subprocess.run(
        [shellcheck_path(), "--shell=bash", "--severity=style", "--format=gcc", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


def _one_part(content_type: str, body: str) -> str:
    return (
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\nMIME-Version: 1.0\n\n'
        f'--{MIME_BOUNDARY}\nContent-Type: {content_type}; charset="us-ascii"\n\n{body}\n--{MIME_BOUNDARY}--\n'
    )


@pytest.mark.parametrize("name", [*SHIPPED, "training-any.yaml as pcs"])
def test_every_node_groups_user_data_is_one_shell_script_cloud_init_writes_as_meant(
    cloud_init: str, environment_gates: EnvironmentGates, tmp_path: Path, name: str
) -> None:
    stack, template = _environment(name, environment_gates, tmp_path)
    assert stack.shared_storage is not None
    tokens = _tokens(template, stack.region)
    device = _rendered(stack.resolve(stack.shared_storage.mount_target()), tokens)
    assert device == f"{FILE_SYSTEM_ID}.fsx.{stack.region}.{URL_SUFFIX}@tcp:/{MOUNT_NAME}"
    expected_script = lustre_mount_script(device, stack.cluster.mount_dir)
    assert "login" in stack.cluster.launch_templates and len(stack.cluster.launch_templates) >= 2
    for group, launch_template in stack.cluster.launch_templates.items():
        data = template["Resources"][stack.get_logical_id(launch_template)]["Properties"][
            "LaunchTemplateData"
        ]
        user_data = _rendered(data["UserData"], tokens)
        result = _consume(cloud_init, user_data, tmp_path / group)
        _assert_clean_parts(result, expected_script)


def test_a_mount_target_and_folder_of_any_allowed_shape_stay_one_clean_script(
    cloud_init: str, tmp_path: Path
) -> None:
    device = "fs-0fedcba9876543210.fsx.eu-west-1.amazonaws.com@tcp:/zyxwvuts"
    mount_dir = "/scratch/team-a"
    result = _consume(cloud_init, node_user_data(device, mount_dir), tmp_path / "work")
    _assert_clean_parts(result, lustre_mount_script(device, mount_dir))


def test_without_a_file_system_the_guard_is_the_only_part(cloud_init: str, tmp_path: Path) -> None:
    result = _consume(cloud_init, node_user_data(None, "/fsx"), tmp_path / "work")
    _assert_clean_parts(result, None)


# --------------------------------------------------------------------------------------------------
# controls: the harness reports what cloud-init would drop or refuse


def test_a_part_of_a_type_cloud_init_does_not_know_is_reported(cloud_init: str, tmp_path: Path) -> None:
    script = lustre_mount_script("fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd", "/fsx")
    user_data = _one_part("text/x-shell-script", script)
    result = _consume(cloud_init, user_data, tmp_path / "work")
    assert result["parts"] == [["text/x-shell-script", "part-001"]]
    assert result["scripts"] == {}
    assert result["warnings"] == [
        "Unhandled unknown content-type (text/x-shell-script) userdata: 'b'#!/bin/bash'...'"
    ]


def test_user_data_without_a_mime_version_is_one_unhandled_blob(cloud_init: str, tmp_path: Path) -> None:
    script = lustre_mount_script("fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd", "/fsx")
    user_data = _one_part("text/x-shellscript", script).replace("MIME-Version: 1.0\n", "")
    result = _consume(cloud_init, user_data, tmp_path / "work")
    assert result["parts"] == [["text/x-not-multipart", "part-001"]]
    assert result["scripts"] == {}
    assert len(result["warnings"]) == 1
    assert result["warnings"][0].startswith("Unhandled non-multipart (text/x-not-multipart) userdata")


@pytest.mark.parametrize(
    ("cloud_config", "errors"),
    [
        ("runcmd: [[touch, /tmp/ok]]\n", []),
        ("runcmd: 5\n", ["runcmd: 5 is not of type 'array'"]),
    ],
)
def test_a_cloud_config_part_is_validated_with_cloud_inits_schema(
    cloud_init: str, tmp_path: Path, cloud_config: str, errors: list[str]
) -> None:
    user_data = (
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\nMIME-Version: 1.0\n\n'
        f'--{MIME_BOUNDARY}\nContent-Type: text/cloud-config; charset="us-ascii"\n\n'
        f"#cloud-config\n{cloud_config}\n--{MIME_BOUNDARY}--\n"
    )
    result = _consume(cloud_init, user_data, tmp_path / "work")
    assert result["parts"] == [["text/cloud-config", "part-001"]]
    assert result["warnings"] == []
    assert result["cloud_config"].startswith("#cloud-config\n")
    assert result["schema_errors"] == errors
