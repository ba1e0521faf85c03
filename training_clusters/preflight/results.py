"""What preflight reports and asks with: a check's row, the AWS clients, and the row helpers every check shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
    StubResponseError,
)

REQUIRED_IAM_ACTIONS = (
    "servicequotas:GetServiceQuota",
    "servicequotas:GetAWSDefaultServiceQuota",
    "servicequotas:ListServiceQuotas",
    "servicequotas:ListAWSDefaultServiceQuotas",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeCapacityReservations",
    "sagemaker:DescribeTrainingPlan",
    "sagemaker:DescribeCluster",
)
"""Every action preflight calls: all read-only."""

# SageMaker quota names, from the SageMaker Developer Guide, HyperPod prerequisites, "List of common service
# quotas" (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites.html): per type


_TIMES = "\N{MULTIPLICATION SIGN}"


_PAGE_SIZE = 100
"""Service Quotas' largest page."""


_ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"}


_BAD_CREDENTIALS = {
    "AuthFailure",
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidClientTokenId",
    "RequestExpired",
    "UnrecognizedClientException",
}


_THROTTLED = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException"}


@dataclass(frozen=True)
class Check:
    """One row of the preflight table."""

    check: str
    """What was checked, e.g. ``EC2 quota L-DB2E81BA Running On-Demand G and VT instances``."""
    needed: str
    """What the environment needs and which groups of the file need it, e.g. 32 vCPUs (g5.8xlarge,
    1 instance, in eks.efa_nodegroups[g5])."""
    available: str
    """What the account has, e.g. ``8 vCPUs``; starts with "skipped" or says "not found" when not verified."""
    passed: bool
    remedy: str
    """How to fix it (the exact quota-increase command, or the field to change); empty when passed."""
    warning: bool = False
    """Passed, but worth a look (a reservation ending within a day)."""

    @property
    def verdict(self) -> str:
        """``pass``, ``WARN`` (passed, with a warning) or ``FAIL``."""
        if not self.passed:
            return "FAIL"
        return "WARN" if self.warning else "pass"

    @property
    def message(self) -> str:
        """The row as one sentence."""
        verdict = self.verdict
        text = f"{verdict}: {self.check}: needed {self.needed}; available {self.available}"
        return f"{text}; fix: {self.remedy}" if self.remedy else text

    def as_dict(self) -> dict[str, object]:
        """The row as plain data (for JSON)."""
        return {
            "check": self.check,
            "needed": self.needed,
            "available": self.available,
            "passed": self.passed,
            "remedy": self.remedy,
            "warning": self.warning,
        }


@dataclass(frozen=True)
class AwsClients:
    """The boto3 clients preflight calls, all in the environment's region (tests pass Stubber-wrapped ones)."""

    service_quotas: Any
    ec2: Any
    sagemaker: Any = None
    """Asked about training plans, and about a HyperPod Slurm cluster of the file's name that exists already."""

    @classmethod
    def from_session(cls, session: boto3.session.Session, region: str) -> AwsClients:
        """Clients of ``session`` in ``region``, with standard retries for throttling."""
        config = Config(retries={"mode": "standard", "max_attempts": 5})
        return cls(
            service_quotas=session.client("service-quotas", region_name=region, config=config),
            ec2=session.client("ec2", region_name=region, config=config),
            sagemaker=session.client("sagemaker", region_name=region, config=config),
        )

    @property
    def region(self) -> str:
        """The region the clients call."""
        return str(self.ec2.meta.region_name)


@dataclass(frozen=True)
class _Quota:
    code: str
    name: str
    value: float
    adjustable: bool
    default_only: bool
    """True when the value is AWS's default because Service Quotas has no applied value for the account."""


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _amount(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _compare(
    check: str,
    needed: str,
    amount: int,
    quota: _Quota,
    unit: str,
    service_code: str,
    region: str,
    field: str,
) -> Check:
    passed = amount <= quota.value
    available = f"{_amount(quota.value)} {unit}" + (" (AWS default value)" if quota.default_only else "")
    if passed:
        remedy = ""
    elif quota.adjustable:
        remedy = (
            f"aws service-quotas request-service-quota-increase --service-code {service_code} "
            f"--quota-code {quota.code} --desired-value {amount} --region {region}"
        )
    else:
        remedy = f"the quota is not adjustable: lower {field} to fit {_amount(quota.value)} {unit}"
    return Check(check=check, needed=needed, available=available, passed=passed, remedy=remedy)


def _not_found(check: str, needed: str, service_code: str, region: str) -> Check:
    return Check(
        check=check,
        needed=needed,
        available=f"not found in Service Quotas ({service_code}, {region}): not verified",
        passed=True,
        remedy="",
    )


def _failed_call(check: str, needed: str, error: ClientError | BotoCoreError, client: Any) -> Check:
    if isinstance(error, ParamValidationError | StubResponseError):
        # Our call does not fit the service model (or a test's Stubber expected another): a bug, not an answer.
        raise error
    if isinstance(error, ClientError):
        code = _error_code(error) or "Error"
        action = f"{client.meta.service_model.signing_name}:{error.operation_name}"
        message = str(error.response.get("Error", {}).get("Message", "")) or str(error)
        available = f"unknown: {action} failed with {code}: {message}"
        remedy = _client_error_remedy(code, action)
    else:
        available = f"unknown: {error}"
        remedy = _sdk_error_remedy(error)
    return Check(check=check, needed=needed, available=available, passed=False, remedy=remedy)


def _client_error_remedy(code: str, action: str) -> str:
    if code in _ACCESS_DENIED:
        return f"allow {action} to the caller (preflight needs {', '.join(REQUIRED_IAM_ACTIONS)})"
    if code in _BAD_CREDENTIALS:
        return "refresh the credentials (e.g. aws sso login --profile P) and run preflight again"
    if code.startswith("InvalidInstanceType"):
        return (
            "EC2 does not know an instance type in this region: see the offering checks, choose another type"
        )
    if code in _THROTTLED:
        return "AWS throttled the call: run preflight again in a minute"
    return f"run preflight again; if {action} keeps failing, check the region and the account"


def _sdk_error_remedy(error: BotoCoreError) -> str:
    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return "configure credentials: --profile P, AWS_PROFILE, or aws configure"
    return "check the network and the region, then run preflight again"
