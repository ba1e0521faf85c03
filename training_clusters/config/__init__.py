"""The environment file: one YAML document describing a whole training environment.

Loading validates the document with pydantic and turns every problem into a :class:`ConfigurationError`
naming the file, the line, the field path, the value received and what is allowed::

    environments/x.yaml: 1 problem(s)
      environments/x.yaml:12: storage.lustre: storage_capacity_gib must be 1200 or a multiple of 2400 ...
"""

from __future__ import annotations

from training_clusters.config.base import (
    COST_CENTRE_TAG as COST_CENTRE_TAG,
)
from training_clusters.config.base import (
    PROJECT_TAG as PROJECT_TAG,
)
from training_clusters.config.capacity import (
    CapacityConfig as CapacityConfig,
)
from training_clusters.config.capacity import (
    stated_capacity as stated_capacity,
)
from training_clusters.config.eks import (
    EksAddonsConfig as EksAddonsConfig,
)
from training_clusters.config.eks import (
    EksConfig as EksConfig,
)
from training_clusters.config.eks import (
    EksDevicePluginConfig as EksDevicePluginConfig,
)
from training_clusters.config.eks import (
    EksEfaNodegroupConfig as EksEfaNodegroupConfig,
)
from training_clusters.config.eks import (
    EksGpuNodegroupConfig as EksGpuNodegroupConfig,
)
from training_clusters.config.eks import (
    EksMonitoringConfig as EksMonitoringConfig,
)
from training_clusters.config.eks import (
    EksMpsConfig as EksMpsConfig,
)
from training_clusters.config.eks import (
    EksNcclTestConfig as EksNcclTestConfig,
)
from training_clusters.config.eks import (
    EksQueuesConfig as EksQueuesConfig,
)
from training_clusters.config.eks import (
    EksSystemNodegroupConfig as EksSystemNodegroupConfig,
)
from training_clusters.config.eks import (
    EksTimeSlicingConfig as EksTimeSlicingConfig,
)
from training_clusters.config.environment import (
    ORCHESTRATOR_SECTIONS as ORCHESTRATOR_SECTIONS,
)
from training_clusters.config.environment import (
    EnvironmentConfig as EnvironmentConfig,
)
from training_clusters.config.environment import (
    construct_error_line as construct_error_line,
)
from training_clusters.config.environment import (
    environment_name as environment_name,
)
from training_clusters.config.environment import (
    load_environment as load_environment,
)
from training_clusters.config.environment import (
    parse_environment as parse_environment,
)
from training_clusters.config.hyperpod import (
    HyperPodConfig as HyperPodConfig,
)
from training_clusters.config.hyperpod import (
    HyperPodInstanceGroupConfig as HyperPodInstanceGroupConfig,
)
from training_clusters.config.hyperpod_eks import (
    HyperPodEksAddonsConfig as HyperPodEksAddonsConfig,
)
from training_clusters.config.hyperpod_eks import (
    HyperPodEksConfig as HyperPodEksConfig,
)
from training_clusters.config.hyperpod_eks import (
    HyperPodEksInstanceGroupConfig as HyperPodEksInstanceGroupConfig,
)
from training_clusters.config.hyperpod_eks import (
    HyperPodEksNcclTestConfig as HyperPodEksNcclTestConfig,
)
from training_clusters.config.hyperpod_eks import (
    HyperPodEksTaintConfig as HyperPodEksTaintConfig,
)
from training_clusters.config.hyperpod_eks import (
    TaskGovernanceConfig as TaskGovernanceConfig,
)
from training_clusters.config.hyperpod_eks import (
    TaskGovernancePartitionConfig as TaskGovernancePartitionConfig,
)
from training_clusters.config.hyperpod_eks import (
    TaskGovernancePriorityClassConfig as TaskGovernancePriorityClassConfig,
)
from training_clusters.config.hyperpod_eks import (
    TaskGovernanceQuotaConfig as TaskGovernanceQuotaConfig,
)
from training_clusters.config.hyperpod_eks import (
    TaskGovernanceTeamConfig as TaskGovernanceTeamConfig,
)
from training_clusters.config.instance_types import (
    AcceleratorFactsConfig as AcceleratorFactsConfig,
)
from training_clusters.config.instance_types import (
    InstanceTypeFactsConfig as InstanceTypeFactsConfig,
)
from training_clusters.config.network import (
    NetworkConfig as NetworkConfig,
)
from training_clusters.config.network import (
    PlacementGroupConfig as PlacementGroupConfig,
)
from training_clusters.config.parallelcluster import (
    ParallelClusterConfig as ParallelClusterConfig,
)
from training_clusters.config.parallelcluster import (
    PclusterAccountingConfig as PclusterAccountingConfig,
)
from training_clusters.config.parallelcluster import (
    PclusterComputeResourceConfig as PclusterComputeResourceConfig,
)
from training_clusters.config.parallelcluster import (
    PclusterCustomActionConfig as PclusterCustomActionConfig,
)
from training_clusters.config.parallelcluster import (
    PclusterDirectoryServiceConfig as PclusterDirectoryServiceConfig,
)
from training_clusters.config.parallelcluster import (
    PclusterHeadNodeConfig as PclusterHeadNodeConfig,
)
from training_clusters.config.parallelcluster import (
    PclusterLoginPoolConfig as PclusterLoginPoolConfig,
)
from training_clusters.config.parallelcluster import (
    PclusterQueueConfig as PclusterQueueConfig,
)
from training_clusters.config.parallelcluster import (
    PclusterSlurmConfig as PclusterSlurmConfig,
)
from training_clusters.config.pcs import (
    PcsComputeNodeGroupConfig as PcsComputeNodeGroupConfig,
)
from training_clusters.config.pcs import (
    PcsConfig as PcsConfig,
)
from training_clusters.config.pcs import (
    PcsLoginNodesConfig as PcsLoginNodesConfig,
)
from training_clusters.config.pcs import (
    PcsQueueConfig as PcsQueueConfig,
)
from training_clusters.config.pcs import (
    PcsSlurmConfig as PcsSlurmConfig,
)
from training_clusters.config.storage import (
    DataRepositoryConfig as DataRepositoryConfig,
)
from training_clusters.config.storage import (
    LustreConfig as LustreConfig,
)
from training_clusters.config.storage import (
    StorageConfig as StorageConfig,
)
from training_clusters.config.users import (
    USER_ORCHESTRATORS as USER_ORCHESTRATORS,
)
from training_clusters.config.users import (
    UserConfig as UserConfig,
)
from training_clusters.config.users import (
    UserGroupConfig as UserGroupConfig,
)

__all__ = [
    "COST_CENTRE_TAG",
    "ORCHESTRATOR_SECTIONS",
    "PROJECT_TAG",
    "USER_ORCHESTRATORS",
    "AcceleratorFactsConfig",
    "CapacityConfig",
    "DataRepositoryConfig",
    "EksAddonsConfig",
    "EksConfig",
    "EksDevicePluginConfig",
    "EksEfaNodegroupConfig",
    "EksGpuNodegroupConfig",
    "EksMonitoringConfig",
    "EksMpsConfig",
    "EksNcclTestConfig",
    "EksQueuesConfig",
    "EksSystemNodegroupConfig",
    "EksTimeSlicingConfig",
    "EnvironmentConfig",
    "HyperPodConfig",
    "HyperPodEksAddonsConfig",
    "HyperPodEksConfig",
    "HyperPodEksInstanceGroupConfig",
    "HyperPodEksNcclTestConfig",
    "HyperPodEksTaintConfig",
    "HyperPodInstanceGroupConfig",
    "InstanceTypeFactsConfig",
    "LustreConfig",
    "NetworkConfig",
    "ParallelClusterConfig",
    "PclusterAccountingConfig",
    "PclusterComputeResourceConfig",
    "PclusterCustomActionConfig",
    "PclusterDirectoryServiceConfig",
    "PclusterHeadNodeConfig",
    "PclusterLoginPoolConfig",
    "PclusterQueueConfig",
    "PclusterSlurmConfig",
    "PcsComputeNodeGroupConfig",
    "PcsConfig",
    "PcsLoginNodesConfig",
    "PcsQueueConfig",
    "PcsSlurmConfig",
    "PlacementGroupConfig",
    "StorageConfig",
    "TaskGovernanceConfig",
    "TaskGovernancePartitionConfig",
    "TaskGovernancePriorityClassConfig",
    "TaskGovernanceQuotaConfig",
    "TaskGovernanceTeamConfig",
    "UserConfig",
    "UserGroupConfig",
    "construct_error_line",
    "environment_name",
    "load_environment",
    "parse_environment",
    "stated_capacity",
]
