"""SageMaker HyperPod: names the CreateCluster API accepts.

The patterns are the API's own (botocore's ``sagemaker`` model: ``ClusterName``, ``ClusterInstanceGroupName``
and ``ClusterPartitionName`` all use ``[a-zA-Z0-9](-*[a-zA-Z0-9])*``; see
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateCluster.html). Checked here so a bad
name fails at synth time instead of half-way through a deployment.
"""

from __future__ import annotations

import re

from training_clusters.rules.common import SYSTEM_MOUNT_DIRS, pattern_problem

#: Folders a shared file system must not hide: the system's and HyperPod's own (the instance groups' extra
#: EBS volume is mounted at ``/opt/sagemaker``).
RESERVED_MOUNT_DIRS = SYSTEM_MOUNT_DIRS | frozenset(("/opt/sagemaker",))

_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
NAME_MAX_LENGTH = 63
PARTITION_NAME_MAX_LENGTH = 1024
#: ``InstanceCount`` of an instance group: "Valid Range: Minimum value of 0. Maximum value of 6758" (SageMaker
#: API Reference, ClusterInstanceGroupSpecification:
#: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterInstanceGroupSpecification.html).
MAX_INSTANCE_COUNT = 6758


def _name_problem(name: str, maximum: int) -> str | None:
    requirement = f"must be 1-{maximum} letters, digits and hyphens, starting and ending with a letter or digit (no '_' or '.')"
    return pattern_problem(name, _NAME, requirement, max_length=maximum)


def cluster_name_problem(name: str) -> str | None:
    """``ClusterName``: 1-63 letters, digits and hyphens, starting and ending with a letter or digit."""
    return _name_problem(name, NAME_MAX_LENGTH)


def instance_group_name_problem(name: str) -> str | None:
    """``InstanceGroupName``: the same pattern as cluster names."""
    return _name_problem(name, NAME_MAX_LENGTH)


def partition_name_problem(name: str) -> str | None:
    """A Slurm partition (``SlurmConfig.PartitionNames``): the same pattern, so no ``_``."""
    return _name_problem(name, PARTITION_NAME_MAX_LENGTH)


def instance_count_problem(count: int) -> str | None:
    """``InstanceCount``: at most :data:`MAX_INSTANCE_COUNT` instances in one group."""
    if count <= MAX_INSTANCE_COUNT:
        return None
    return (
        f"must be at most {MAX_INSTANCE_COUNT} (the most instances HyperPod's API takes in one instance "
        f"group), got {count}"
    )


_AMI_ID = re.compile(r"^ami-[0-9a-f]{8,17}$")


def image_id_problem(image_id: str) -> str | None:
    """``ImageId`` of an instance group: a custom AMI's id."""
    return pattern_problem(image_id, _AMI_ID, "must be an AMI id such as 'ami-0123456789abcdef0'")
