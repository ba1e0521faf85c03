"""Rules are the one home of every "must be ..." message (CONTRIBUTING, "Where things go"): a construct raises
what a ``rules.*_problem`` function returns, so the environment-file model can apply the same rule and report
the mistake at FILE:LINE. These tests fail when a construct module gains a message written inline.

``WIRING`` lists the inline messages that stay: they are about how a Python caller wires constructs
together (an object of the wrong class, a construct made with another option, a resource of another
stack), which no environment file can express. ``NOT_YET_MOVED`` counts, per module, the messages still
waiting to move into ``rules/``; it may only go down.
"""

from __future__ import annotations

import functools

import pytest

from tests.inline_messages import InlineMessage, counts, inline_messages

#: (module, start of the message as written) -> why a file cannot make this mistake.
WIRING: dict[tuple[str, str], str] = {
    (
        "eks/cluster.py",
        'f"must be the version the add-on was made with',
    ): "vpc_cni is a construct the caller made",
    ("hyperpod/cluster.py", "f'must be an InstanceGroup, got"): "a Python object of the wrong class",
    ("hyperpod/cluster.py", "f'must be a list of {DeepHealthCheck.allowed()}, got the single string"): (
        "a Python str where a list goes; the file model types the list itself"
    ),
    ("hyperpod/cluster.py", "f'must be a LifecycleStep, got"): "a Python object of the wrong class",
    (
        "hyperpod/cluster.py",
        "f'exist only with an accounting database (accounting=SlurmAccountingDatabase)",
    ): ("the accounting construct is passed by the caller"),
    ("hyperpod/cluster.py", "'EXTERNAL needs the database itself: pass the SlurmAccountingDatabase"): (
        "the accounting construct is passed by the caller"
    ),
    ("hyperpod_eks/cluster.py", "f'must be an EksInstanceGroup, got"): "a Python object of the wrong class",
    ("hyperpod_eks/cluster.py", "f'must be a KubernetesTaint, got"): "a Python object of the wrong class",
    ("hyperpod_eks/cluster.py", '"must be known at synth (cdk.Environment(region=...))'): (
        "the stack's environment; a file always names its region"
    ),
    (
        "hyperpod_eks/governance.py",
        '"must be made with kueue=False',
    ): "the EKS cluster construct the caller made",
    ("hyperpod_eks/governance.py", "f'must be a Team, got"): "a Python object of the wrong class",
    ("hyperpod_eks/governance.py", "f'must be a QuotaResource, got"): "a Python object of the wrong class",
    ("hyperpod_eks/governance.py", "f'must be a PriorityClass, got"): "a Python object of the wrong class",
    ("parallelcluster/cluster.py", 'f"{self.node.path}: head_node_connections exists only'): (
        "head_node_connections is read by Python callers after construction"
    ),
    (
        "parallelcluster/cluster.py",
        "'apply only to the role the provider makes itself; with provider_lambda_role",
    ): ("provider_lambda_role is a role construct the caller passes"),
    ("parallelcluster/cluster.py", "'cannot be given together with file_system; mount our SharedLustre"): (
        "file_system is a SharedLustre construct the caller passes"
    ),
    ("parallelcluster/cluster.py", "'is a public subnet; cluster nodes live in private subnets"): (
        "a subnet construct the caller passes; a file's nodes always go in the private subnets its stack makes"
    ),
    (
        "pcs/cluster.py",
        "'is required: a compute node group uses EFA, which needs a cluster placement group'",
    ): ("the placement group construct the caller passes; a file's stack always makes one"),
    (
        "pcs/cluster.py",
        "'is required: a compute node group uses EFA, which needs a group allowing all traffic",
    ): ("the security group construct the caller passes; a file's stack always makes one"),
    ("pcs/cluster.py", "'is a public subnet; PCS nodes live in private subnets"): (
        "a subnet construct the caller passes; a file's nodes always go in the private subnets its stack makes"
    ),
    ("parallelcluster/rendering.py", "f'cannot render a reference to {key}"): (
        "render-pcluster's placeholders for a synthesized template, not a file value"
    ),
    ("parallelcluster/rendering.py", "f'cannot render {key} into a concrete value"): (
        "render-pcluster's placeholders for a synthesized template, not a file value"
    ),
    ("parallelcluster/rendering.py", "'no deployed value for '"): (
        "render-pcluster's deployed values, given on its command line, not in a file"
    ),
    ("private/validation.py", "f\"{adopted}, so {', '.join(given)} cannot also be given"): (
        "bring your own or let it be made: an adopted construct with the props of a new one"
    ),
    ("private/validation.py", 'f"{what} in stack {other.node.path}'): (
        "a construct of another stack's account or region; a file builds one environment"
    ),
    ("slurm/accounting.py", "'must be names known at synth time, got a token'"): (
        "a deploy-time token; a file's names are always known"
    ),
    ("slurm/accounting.py", 'f"is a plain-text copy made at deploy time'): (
        "the copy is asked for by the ParallelCluster stack's wiring, not by a file"
    ),
}

#: Inline messages per module still to move into ``rules/``. Lower a count when you move one; never raise it.
NOT_YET_MOVED: dict[str, int] = {}


@functools.cache
def _found() -> tuple[InlineMessage, ...]:
    """The constructs' inline messages, scanned once for the parametrized checks."""
    return tuple(inline_messages())


def _wiring(message: InlineMessage) -> bool:
    return any(module == message.module and message.text.startswith(start) for module, start in WIRING)


def test_constructs_gain_no_inline_message() -> None:
    """A new message goes into ``rules/<service>.py`` as a ``*_problem`` function; the construct raises what
    it returns with ``raise_if_problem(self, field, problem)``, and the file model applies it too."""
    waiting: dict[str, list[str]] = {}
    for message in inline_messages():
        if not _wiring(message):
            waiting.setdefault(message.module, []).append(f"line {message.line}: {message.text}")
    gained = {module: found for module, found in waiting.items() if len(found) > NOT_YET_MOVED.get(module, 0)}
    assert not gained, f"inline messages; write them as rules in training_clusters/rules/: {gained}"


def test_the_count_still_to_move_is_kept_exact() -> None:
    """Moving a message lowers its module's count here, so the ratchet never leaves room for a new one."""
    waiting = counts()
    for message in inline_messages():
        if _wiring(message):
            waiting[message.module] -= 1
    assert {module: n for module, n in waiting.items() if n} == NOT_YET_MOVED


@pytest.mark.parametrize(
    ("module", "start"), sorted(WIRING), ids=[f"{m}:{s[:30]}" for m, s in sorted(WIRING)]
)
def test_every_wiring_exception_still_exists(module: str, start: str) -> None:
    found = _found()
    """A wiring message that was moved or reworded leaves the list, so the list cannot excuse a newcomer."""
    assert any(m.module == module and m.text.startswith(start) for m in found)
