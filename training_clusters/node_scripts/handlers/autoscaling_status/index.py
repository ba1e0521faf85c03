"""Custom-resource handler: wait, bounded, until a HyperPod cluster's Karpenter autoscaling is in service.

HyperPod installs its managed Karpenter (and the ``HyperpodNodeClass`` kind) after the cluster is created; a
``HyperpodNodeClass`` is not Ready before ``DescribeCluster`` reports ``AutoScaling.Status`` ``InService``
("Autoscaling on SageMaker HyperPod EKS", https://docs.aws.amazon.com/sagemaker/latest/dg/
sagemaker-hyperpod-eks-autoscaling.html). The stack applies its NodeClass and NodePool after this resource.

Invoked by CDK's Provider framework (``on_event``): return the physical id, raise to fail the deployment with
the message. Resource properties: ``ClusterName``; optional ``PollSeconds`` (default 20). Create / Update: poll
``DescribeCluster`` until ``AutoScaling.Status`` is ``InService`` (done), ``Failed`` (raise with HyperPod's
``FailureMessage``), autoscaling is off, or the time left in this invocation (Lambda's remaining time, less
:data:`MARGIN_SECONDS` to report) runs out (raise, naming the last status). Delete: nothing to undo.

The statuses are botocore's ``sagemaker`` model's (``ClusterAutoScalingStatus``: InService, Failed, Creating,
Deleting).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

IN_SERVICE = "InService"
FAILED = "Failed"
#: Seconds kept back from Lambda's remaining time to report the outcome to CloudFormation.
MARGIN_SECONDS = 30
DEFAULT_POLL_SECONDS = 20


class AutoscalingError(RuntimeError):
    """The autoscaler failed, is off, or did not reach InService in time."""


def on_event(
    event: dict[str, Any],
    context: Any,
    client: Any = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    props = event["ResourceProperties"]
    name = props["ClusterName"]
    physical_id = event.get("PhysicalResourceId") or f"{name}-autoscaling"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": physical_id}
    if client is None:
        import boto3

        client = boto3.client("sagemaker")
    poll = float(props.get("PollSeconds", DEFAULT_POLL_SECONDS))
    budget = context.get_remaining_time_in_millis() / 1000 - MARGIN_SECONDS
    status = wait_in_service(client, name, budget_seconds=budget, poll_seconds=poll, sleep=sleep, clock=clock)
    return {"PhysicalResourceId": physical_id, "Data": {"Status": status}}


def wait_in_service(
    client: Any,
    name: str,
    *,
    budget_seconds: float,
    poll_seconds: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Poll ``DescribeCluster`` until ``AutoScaling.Status`` is InService; raise :class:`AutoscalingError` when
    it is Failed, when autoscaling is not enabled, or after ``budget_seconds``."""
    deadline = clock() + budget_seconds
    last = "not reported"
    while True:
        autoscaling = client.describe_cluster(ClusterName=name).get("AutoScaling")
        if autoscaling is None or autoscaling.get("Mode") != "Enable":
            raise AutoscalingError(f"cluster {name} has no autoscaling enabled (AutoScaling: {autoscaling})")
        last = str(autoscaling.get("Status", "not reported"))
        LOG.info("cluster %s: AutoScaling.Status %s", name, last)
        if last == IN_SERVICE:
            return last
        if last == FAILED:
            reason = autoscaling.get("FailureMessage") or "no FailureMessage"
            raise AutoscalingError(f"cluster {name}: Karpenter autoscaling failed: {reason}")
        if clock() + poll_seconds > deadline:
            raise AutoscalingError(
                f"cluster {name}: AutoScaling.Status still {last} after {budget_seconds:.0f} s; "
                f"aws sagemaker describe-cluster --cluster-name {name} --query AutoScaling"
            )
        sleep(poll_seconds)
