from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from training_clusters.constructs.common.bucket import SecureBucket
from training_clusters.model.errors import ConfigurationError

from ..conftest import GatedStacks, gated_stack


def test_bucket_is_private_encrypted_versioned_logged_and_retained(stack: cdk.Stack) -> None:
    scripts = SecureBucket(stack, "Scripts")
    template = Template.from_stack(stack)
    template.has_resource(
        "AWS::S3::Bucket",
        {
            "Properties": Match.object_like(
                {
                    "PublicAccessBlockConfiguration": {
                        "BlockPublicAcls": True,
                        "BlockPublicPolicy": True,
                        "IgnorePublicAcls": True,
                        "RestrictPublicBuckets": True,
                    },
                    "VersioningConfiguration": {"Status": "Enabled"},
                    "BucketEncryption": Match.any_value(),
                    "LoggingConfiguration": {
                        "DestinationBucketName": stack.resolve(scripts.access_logs_bucket.bucket_name),
                        "LogFilePrefix": "access-logs/",
                    },
                }
            ),
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )
    # SSL only, on both buckets
    policies = template.find_resources("AWS::S3::BucketPolicy")
    denies = [
        s
        for p in policies.values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Deny"
        and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
    ]
    assert len(denies) == 2


def test_sagemaker_prefix_names_the_bucket(stack: cdk.Stack) -> None:
    scripts = SecureBucket(stack, "Scripts", name_prefix="sagemaker-")
    name = stack.resolve(scripts.bucket.bucket_name)
    assert name["Ref"]
    bucket = next(
        iter(
            Template.from_stack(stack)
            .find_resources("AWS::S3::Bucket", {"Properties": {"BucketName": Match.any_value()}})
            .values()
        )
    )
    joined = bucket["Properties"]["BucketName"]["Fn::Join"][1]
    assert joined[0].startswith("sagemaker-")


@pytest.mark.parametrize("prefix", ["SageMaker-", "-x", "", "a" * 21, "under_score"])
def test_bad_name_prefix_is_a_clear_error(stack: cdk.Stack, prefix: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        SecureBucket(stack, "Scripts", name_prefix=prefix)
    assert str(error.value) == (
        "Test/Scripts: name_prefix must be 1-20 lowercase letters, digits or hyphens starting with a letter or "
        f"digit, got '{prefix}'"
    )


@gated_stack("bucket")
def _gated_bucket(stack: cdk.Stack) -> None:
    SecureBucket(stack, "Scripts", name_prefix="sagemaker-")


def test_bucket_passes_the_gates(gated_stacks: GatedStacks) -> None:
    gated_stacks.get("bucket").assert_clean()
