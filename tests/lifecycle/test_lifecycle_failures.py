"""Each lifecycle step whose failure no other module drives, made to fail: the run exits non-zero with the
step's one line ``FAILED step '<name>' (exit N)``, last, and once. A step that swallowed its command's failure
(``... || true``) would end in SUCCESS here instead.

Where each other step is made to fail (the thing it waits for never comes, or the command it runs fails):

* HyperPod Slurm (``on_create.sh``): preflight and detect-role (``test_lifecycle_runs.py``,
  ``test_lifecycle_roles.py``, ``test_lifecycle_team.py``), apt-hotfix and apt-update (``test_lifecycle_apt.py``),
  lustre-client, mount-fsx and admin-home (``test_lifecycle_runs.py``, ``test_lifecycle_node.py``), users and
  imds-guard (``test_lifecycle_team.py``), enroot-pyxis (``test_lifecycle_containers.py``,
  ``test_lifecycle_downloads.py``), docker (``test_lifecycle_containers.py``), slurm-config
  (``test_lifecycle_roles.py``), accounting (``test_lifecycle_team.py``, ``test_lifecycle_accounting.py``),
  slurm-controller, slurm-worker and slurm-login (``test_lifecycle_slurm.py``), user-<name>
  (``test_lifecycle_extra_steps.py``).
* HyperPod Slurm, API-driven (``on_init_complete.sh``): preflight, fsx-mounted, slurm-keys and slurm-ready
  (``test_lifecycle_api.py``); the steps it shares with ``on_create.sh`` as above.
* HyperPod EKS (``lib/eks_node.sh``): volume and lustre-client (``test_lifecycle_eks.py``).
* ParallelCluster custom actions: ``users.sh`` and ``pyxis.sh`` (``tests/parallelcluster_actions/``).
* Here: controller-access, pam-slurm-adopt, observability; the EKS node's stop-runtime, move-<name> and
  start-runtime. eks-preflight cannot fail from ``on_create.sh``: it runs only once ``tc_workload_manager`` has
  read the same file as ``eks``, and a missing or broken file goes the Slurm way, whose preflight fails
  (shown here for an EKS node's broken file).
* PCS's one user-data part (the Lustre mount): ``test_mount_script_fails_the_node_when_the_file_system_never_
  mounts`` in ``tests/constructs/test_pcs.py`` (it imports the construct, so it lives with the constructs).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.lifecycle.sandbox import Run, Sandbox
from tests.lifecycle.test_lifecycle_eks import eks_node
from tests.lifecycle.test_lifecycle_team import SSHD_PAM, USERS

SLURM_SOURCE = "https://download.schedmd.com/slurm/slurm-24.11.1.tar.bz2"


def _controller_without_a_security_folder(sandbox: Sandbox) -> Sandbox:
    """The controller's pam_access file cannot be written: /etc/security is not a folder."""
    node = sandbox.as_role("controller")
    node.write_params(users=USERS)
    node.write("etc/pam.d/sshd", SSHD_PAM)
    node.write("etc/security", "not a folder")
    return node


def _worker_with_pam_slurm_adopt(sandbox: Sandbox) -> Sandbox:
    sandbox.write_params(enable_pam_slurm_adopt=True)
    sandbox.write("etc/pam.d/sshd", SSHD_PAM)
    return sandbox


def _observed(sandbox: Sandbox) -> Sandbox:
    sandbox.write_params(enable_observability=True)
    return sandbox


def _eks_node_with_broken_parameters(sandbox: Sandbox) -> Sandbox:
    node = eks_node(sandbox)
    params = node.scripts / "provisioning_parameters.json"
    params.write_text(params.read_text() + "\n{")  # the workload manager is read, the rest is not JSON
    return node


#: step -> (how the node is set up, what fails in the stubs, the exit status).
CASES: dict[str, tuple[Callable[[Sandbox], Sandbox], dict[str, str], int]] = {
    "controller-access": (_controller_without_a_security_folder, {}, 1),
    # the Slurm source pam_slurm_adopt is built from never downloads
    "pam-slurm-adopt": (_worker_with_pam_slurm_adopt, {"STUB_CURL_FAILS_FOR": SLURM_SOURCE}, 6),
    # the node exporter's service does not restart
    "observability": (_observed, {"STUB_SYSTEMCTL_FAIL": "restart prometheus-node-exporter"}, 5),
    # an EKS node's parameters that are not JSON: read as no workload manager, the preflight says what is wrong
    "preflight": (_eks_node_with_broken_parameters, {}, 2),
    # the kubelet does not stop, so its data cannot move
    "stop-runtime": (eks_node, {"STUB_SYSTEMCTL_FAIL": "stop kubelet.service"}, 5),
    # the bind mount of containerd's data onto the volume fails
    "move-containerd": (eks_node, {"STUB_MOUNT_FAIL": "1"}, 32),
    # containerd does not start again on the volume
    "start-runtime": (eks_node, {"STUB_SYSTEMCTL_FAIL": "start containerd.service"}, 5),
}


def assert_failed_step(run: Run, step: str, code: int) -> None:
    assert run.returncode == code, run.output
    assert run.output.count("FAILED step") == 1, run.output
    assert run.output.rstrip().splitlines()[-1].endswith(f"FAILED step '{step}' (exit {code})"), run.output
    assert "SUCCESS" not in run.log


@pytest.mark.parametrize("step", CASES)
def test_the_step_fails_with_its_one_line(sandbox: Sandbox, step: str) -> None:
    setup, failure, code = CASES[step]
    run = setup(sandbox).run(**failure)
    assert_failed_step(run, step, code)
