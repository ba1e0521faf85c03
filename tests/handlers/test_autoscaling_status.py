"""The autoscaling-status waiter, run as Lambda would run it, offline: SageMaker's ``DescribeCluster`` through
botocore's Stubber (requests and responses checked against botocore's ``sagemaker`` model), a fake clock and sleep
for the bound. Its paths: InService (at once, after Creating), Failed (HyperPod's message), autoscaling off, out
of time, and Delete (no call)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber

from training_clusters.node_scripts.handlers.autoscaling_status import index
from training_clusters.node_scripts.handlers.autoscaling_status.index import (
    AutoscalingError,
    on_event,
    wait_in_service,
)

NAME = "autoscaling-eks-cluster"
ARN = f"arn:aws:sagemaker:us-east-1:111122223333:cluster/{'a1b2c3d4e5f6'}"


def described(status: str | None, mode: str = "Enable", message: str | None = None) -> dict[str, Any]:
    """A ``DescribeCluster`` response of a cluster that is InService, its autoscaler in ``status``."""
    response: dict[str, Any] = {
        "ClusterArn": ARN,
        "ClusterName": NAME,
        "ClusterStatus": "InService",
        "InstanceGroups": [],
    }
    if status is not None or mode != "Enable":
        autoscaling: dict[str, Any] = {"Mode": mode, "AutoScalerType": "Karpenter"}
        if status is not None:
            autoscaling["Status"] = status
        if message is not None:
            autoscaling["FailureMessage"] = message
        response["AutoScaling"] = autoscaling
    return response


class Clock:
    """A clock that moves only when the handler sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Context:
    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def sagemaker() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.session.Session(
        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="x", region_name="us-east-1"
    ).client("sagemaker")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def answer(stub: Stubber, *responses: dict[str, Any]) -> None:
    for response in responses:
        stub.add_response("describe_cluster", response, {"ClusterName": NAME})


def event(request: str = "Create", **props: Any) -> dict[str, Any]:
    return {"RequestType": request, "ResourceProperties": {"ClusterName": NAME, **props}}


def test_the_statuses_it_reads_are_the_models() -> None:
    model = botocore.session.get_session().get_service_model("sagemaker")
    shape = model.operation_model("DescribeCluster").output_shape.members["AutoScaling"]
    assert shape.members["Status"].enum == ["InService", "Failed", "Creating", "Deleting"]
    assert (index.IN_SERVICE, index.FAILED) == ("InService", "Failed")


def test_in_service_at_once_is_done_without_sleeping(sagemaker: tuple[Any, Stubber]) -> None:
    client, stub = sagemaker
    answer(stub, described("InService"))
    clock = Clock()
    result = on_event(event(), Context(900_000), client=client, sleep=clock.sleep, clock=clock)
    assert result == {"PhysicalResourceId": f"{NAME}-autoscaling", "Data": {"Status": "InService"}}
    assert clock.slept == []


def test_it_polls_while_creating_until_in_service(sagemaker: tuple[Any, Stubber]) -> None:
    client, stub = sagemaker
    answer(stub, described("Creating"), described("Creating"), described("Creating"), described("InService"))
    clock = Clock()
    result = on_event(
        event(PollSeconds="15"), Context(900_000), client=client, sleep=clock.sleep, clock=clock
    )
    assert result["Data"] == {"Status": "InService"}
    assert clock.slept == [15.0, 15.0, 15.0]


def test_failed_fails_the_deployment_with_hyperpods_message(sagemaker: tuple[Any, Stubber]) -> None:
    client, stub = sagemaker
    answer(stub, described("Creating"), described("Failed", message="ClusterRole cannot be assumed"))
    clock = Clock()
    with pytest.raises(AutoscalingError) as raised:
        on_event(event(), Context(900_000), client=client, sleep=clock.sleep, clock=clock)
    assert str(raised.value) == (
        f"cluster {NAME}: Karpenter autoscaling failed: ClusterRole cannot be assumed"
    )
    assert clock.slept == [20.0]


def test_failed_without_a_message_says_so(sagemaker: tuple[Any, Stubber]) -> None:
    client, stub = sagemaker
    answer(stub, described("Failed"))
    with pytest.raises(
        AutoscalingError, match=r"^cluster .*: Karpenter autoscaling failed: no FailureMessage$"
    ):
        wait_in_service(client, NAME, budget_seconds=100, poll_seconds=10, sleep=Clock().sleep)


@pytest.mark.parametrize("mode", ["Disable", None])
def test_autoscaling_off_is_an_error(sagemaker: tuple[Any, Stubber], mode: str | None) -> None:
    client, stub = sagemaker
    response = described(None)
    if mode is not None:  # the model requires Mode and Status
        response["AutoScaling"] = {"Mode": mode, "Status": "InService"}
    answer(stub, response)
    with pytest.raises(AutoscalingError) as raised:
        wait_in_service(client, NAME, budget_seconds=100, poll_seconds=10, sleep=Clock().sleep)
    assert str(raised.value).startswith(f"cluster {NAME} has no autoscaling enabled (AutoScaling: ")


def test_it_gives_up_when_the_invocation_runs_out_of_time(sagemaker: tuple[Any, Stubber]) -> None:
    # 140 s left, less the 30 s margin: 110 s of budget; polls at 0, 20, ... 80; at 100 the next poll (120) is late
    client, stub = sagemaker
    answer(stub, *(described("Creating") for _ in range(6)))
    clock = Clock()
    with pytest.raises(AutoscalingError) as raised:
        on_event(event(), Context(140_000), client=client, sleep=clock.sleep, clock=clock)
    assert str(raised.value) == (
        f"cluster {NAME}: AutoScaling.Status still Creating after 110 s; "
        f"aws sagemaker describe-cluster --cluster-name {NAME} --query AutoScaling"
    )
    assert clock.slept == [20.0] * 5
    assert clock.now - 1000.0 == 100.0 <= 110


def test_the_last_poll_fits_the_budget_exactly(sagemaker: tuple[Any, Stubber]) -> None:
    """The boundary: a poll that lands on the deadline still happens."""
    client, stub = sagemaker
    answer(stub, described("Creating"), described("InService"))
    clock = Clock()
    assert wait_in_service(
        client, NAME, budget_seconds=20, poll_seconds=20, sleep=clock.sleep, clock=clock
    ) == ("InService")
    assert clock.slept == [20.0]


def test_delete_makes_no_call(sagemaker: tuple[Any, Stubber]) -> None:
    client, _ = sagemaker
    request = event("Delete") | {"PhysicalResourceId": "kept-id"}
    assert on_event(request, Context(900_000), client=client) == {"PhysicalResourceId": "kept-id"}


def test_update_waits_again(sagemaker: tuple[Any, Stubber]) -> None:
    client, stub = sagemaker
    answer(stub, described("InService"))
    request = event("Update") | {"PhysicalResourceId": "kept-id"}
    assert on_event(request, Context(900_000), client=client, clock=Clock()) == {
        "PhysicalResourceId": "kept-id",
        "Data": {"Status": "InService"},
    }
