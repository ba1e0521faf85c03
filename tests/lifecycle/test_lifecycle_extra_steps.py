"""Teams' own steps (training_clusters.json extra_steps): after ours, per role, same log and failure
contract as ours."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.lifecycle.sandbox import CONTROLLER_IP, Sandbox

# Records what the step saw: its role, its node, the controller, the FSx folder, its working directory.
RECORDING_STEP = """\
#!/bin/bash
set -euo pipefail
echo "hello from $(basename "$0") on the ${TC_ROLE}"
mkdir -p "${TC_ROOT}/var/lib/team"
printf '%s\\n' "$TC_ROLE" "$TC_GROUP" "$TC_PARTITION" "$TC_NODE_IP" "$TC_CONTROLLER_IPS" "$TC_FSX_MOUNT_DIR" \\
    "$(basename "$PWD")" >"${TC_ROOT}/var/lib/team/$(basename "$0" .sh).txt"
"""


def add_steps(sandbox: Sandbox, *steps: dict[str, Any], body: str = RECORDING_STEP) -> None:
    folder = sandbox.scripts / "user_steps"
    folder.mkdir(exist_ok=True)
    for step in steps:
        (folder / f"{step['name']}.sh").write_text(step.pop("body", body))
        step.setdefault("script", f"user_steps/{step['name']}.sh")
    sandbox.write_settings({**sandbox.settings(), "extra_steps": list(steps)})


def steps_started(log: str) -> list[str]:
    return re.findall(r"step '([a-z0-9_-]+)' started", log)


@pytest.mark.parametrize("role", ["controller", "login", "worker"])
def test_extra_steps_run_after_ours_on_the_roles_they_name(sandbox: Sandbox, role: str) -> None:
    add_steps(
        sandbox,
        {"name": "everywhere"},
        {"name": "workers-only", "roles": ["worker"]},
        {"name": "no-workers", "roles": ["controller", "login"]},
    )

    run = sandbox.as_role(role).run()

    assert run.returncode == 0, run.output
    expected = ["user-everywhere", *(["user-workers-only"] if role == "worker" else ["user-no-workers"])]
    started = steps_started(run.log)
    assert started[-len(expected) :] == expected
    assert started.index(f"slurm-{role}") < started.index("user-everywhere")
    skipped = "user-no-workers" if role == "worker" else "user-workers-only"
    assert re.search(rf"\[{skipped}\] step '{skipped}' skipped: runs on [a-z, ]+ nodes only", run.log)
    assert f"hello from everywhere.sh on the {role}" in run.log  # its output is in the log
    seen = sandbox.path("var/lib/team/everywhere.txt").read_text().splitlines()
    assert seen[0] == role
    assert seen[3:] == [sandbox.node_ip, CONTROLLER_IP, "/fsx", "lifecycle"]
    assert run.log.index("user-everywhere") < run.log.index("SUCCESS: node provisioned")


def test_a_failing_extra_step_fails_the_run_like_ours(sandbox: Sandbox) -> None:
    add_steps(
        sandbox,
        {"name": "broken", "body": "#!/bin/bash\necho 'cannot reach the license server' >&2\nexit 7\n"},
        {"name": "after"},
    )

    run = sandbox.run()

    assert run.returncode == 7
    assert "cannot reach the license server" in run.log
    assert run.output.count("FAILED step") == 1
    assert run.output.rstrip().splitlines()[-1].endswith("FAILED step 'user-broken' (exit 7)")
    assert "user-after" not in run.log and "SUCCESS" not in run.log


def test_extra_steps_see_no_fsx_folder_without_fsx(sandbox: Sandbox) -> None:
    sandbox.write_params(fsx_dns_name=None, fsx_mountname=None)
    add_steps(sandbox, {"name": "probe"})

    run = sandbox.run()

    assert run.returncode == 0, run.output
    assert sandbox.path("var/lib/team/probe.txt").read_text().splitlines()[5] == ""


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (
            {"name": "x", "roles": ["gpu"]},
            "extra_steps[0].roles must be a non-empty list of controller, login, worker",
        ),
        ({"name": "x", "roles": []}, "extra_steps[0].roles must be a non-empty list"),
        (
            {"name": "x", "script": "/etc/passwd"},
            "extra_steps[0].script must be a path relative to the lifecycle",
        ),
    ],
)
def test_bad_extra_steps_fail_before_anything_changes(
    sandbox: Sandbox, step: dict[str, Any], message: str
) -> None:
    add_steps(sandbox, step)

    run = sandbox.run()

    assert run.returncode == 2
    assert f"training_clusters.json: {message}" in run.output
    assert run.output.rstrip().endswith("FAILED step 'preflight' (exit 2)")
    assert run.calls == []


def test_two_steps_with_one_name_are_refused(sandbox: Sandbox) -> None:
    add_steps(sandbox, {"name": "twice"})
    sandbox.write_settings({**sandbox.settings(), "extra_steps": sandbox.settings()["extra_steps"] * 2})

    run = sandbox.run()

    assert run.returncode == 2
    assert "training_clusters.json: extra_steps[1].name 'twice' is used twice" in run.output
