"""Synth-time and test-suite benchmark: ``make benchmark`` (or ``.venv/bin/python benchmarks/synth.py``).

In one process (jsii starts once, as in the test suite) it times:
  * a bare stack holding one ``ec2.Vpc`` (the floor any CDK app pays), and
  * each environment in environments/ (our constructs + cdk-nag AwsSolutions),
each synthesized ``--repeat`` times (after one untimed warm-up) into a fresh cloud assembly, and prints
the median of each and the ratio environment / bare VPC (goal: <= 2.0 for the mean environment). The bare
VPC is timed again next to every environment and its median taken over all those samples, so a change
in the machine's load during the run moves both sides of the ratio alike. ``--suite`` also times the
whole test suite in its own process (goal: < 60 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2

import training_clusters  # noqa: F401  (before aws_cdk: puts this environment's Node 24 first on PATH)
from training_clusters.environments import add_environment, environment_files
from training_clusters.gates.compliance import add_compliance_checks, synth_with_checks

ROOT = Path(__file__).resolve().parent.parent


def bare_vpc(outdir: str) -> None:
    app = cdk.App(outdir=outdir)
    stack = cdk.Stack(app, "Bare", env=cdk.Environment(region="us-east-1"))
    ec2.Vpc(stack, "Vpc", max_azs=2)
    app.synth()


def resource_count(outdir: str) -> int:
    """Resources in every template of a cloud assembly (nested stacks included)."""
    return sum(
        len(json.loads(template.read_text()).get("Resources", {}))
        for template in Path(outdir).glob("*.template.json")
    )


def environment(path: Path, *, gated: bool) -> Callable[[str], None]:
    def run(outdir: str) -> None:
        app = cdk.App(outdir=outdir)
        add_environment(app, path)
        if gated:
            add_compliance_checks(app)
            assembly, findings = synth_with_checks(app)
            assert assembly is not None, findings
        else:
            app.synth()

    return run


def timed_samples(action: Callable[[str], None], repeat: int) -> tuple[list[float], int]:
    """Wall times of ``repeat`` runs of ``action`` after one untimed warm-up, each run writing a fresh
    cloud assembly (deleted after timing), and the resources in that assembly (counted untimed)."""
    samples = []
    resources = 0
    for run in range(repeat + 1):
        with tempfile.TemporaryDirectory(prefix="benchmark-") as outdir:
            start = time.perf_counter()
            action(outdir)
            if run:
                samples.append(time.perf_counter() - start)
            resources = resource_count(outdir)
    return samples, resources


def time_suite(extra: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--suite", action="store_true", help="also time the test suite")
    args = parser.parse_args()

    os.chdir(ROOT)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="benchmark-") as outdir:
        bare_vpc(outdir)  # jsii start-up, paid once per process
    print(f"jsii start-up + first synth: {time.perf_counter() - start:.2f} s")
    bare_samples: list[float] = []
    bare_resources = 0
    timings: dict[str, tuple[float, float, int]] = {}
    for path in environment_files(ROOT / "environments"):
        samples, bare_resources = timed_samples(bare_vpc, args.repeat)
        bare_samples += samples
        plain, resources = timed_samples(environment(path, gated=False), args.repeat)
        gated, _ = timed_samples(environment(path, gated=True), args.repeat)
        timings[path.stem] = (statistics.median(plain), statistics.median(gated), resources)
    bare = statistics.median(bare_samples)
    print(
        f"bare one-VPC stack: {bare:.3f} s, {bare_resources} resources "
        f"(median of {len(bare_samples)}, taken next to each environment)\n"
    )
    print(
        f"{'environment':24} {'synth s':>8} {'ratio':>6} {'+nag s':>8} {'ratio':>6} {'resources':>9} {'per res.':>8}"
    )
    for name, (plain_s, gated_s, resources) in timings.items():
        per_resource = (plain_s / resources) / (bare / bare_resources)
        print(
            f"{name:24} {plain_s:8.3f} {plain_s / bare:6.2f} {gated_s:8.3f} {gated_s / bare:6.2f} "
            f"{resources:9d} {per_resource:8.2f}"
        )
    mean_ratio = statistics.mean(plain_s / bare for plain_s, _, _ in timings.values())
    print(
        f"\nmean environment / bare VPC ratio: {mean_ratio:.2f} (goal <= 2.0: {'met' if mean_ratio <= 2 else 'NOT met'})"
    )
    if args.suite:
        suite = time_suite([])
        print(f"test suite: {suite:.1f} s (goal < 60 s: {'met' if suite < 60 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
