"""HyperPodTaskGovernance: SageMaker HyperPod task governance on a HyperPod cluster orchestrated by EKS.

Task governance is HyperPod's own Kueue, installed as the EKS add-on ``amazon-sagemaker-hyperpod-taskgovernance``
(v1.6 packages Kueue v0.19.2 and requires that no other Kueue is installed: build the cluster with
``HyperPodEksCluster(..., kueue=False)``), configured through two SageMaker resources: one cluster policy
(``AWS::SageMaker::ClusterSchedulerConfig``: priority classes with weights, fair share, idle resource sharing) and
one ``AWS::SageMaker::ComputeQuota`` per team (its quota by instance type, MIG partitions included, whether it
lends and borrows idle compute and how much, whether its tasks preempt its own lower-priority ones). HyperPod turns
them into Kueue objects and makes each team's namespace ``hyperpod-ns-<team>`` with the LocalQueue
``hyperpod-ns-<team>-localqueue`` ("SageMaker HyperPod task governance",
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance.html).

aws-cdk-lib 2.275 has ``CfnClusterSchedulerConfig`` but no ``CfnComputeQuota`` (it came in 2.276): the quotas are
``cdk.CfnResource`` of that type, their properties checked by cfn-lint's schema of the resource.

The tenancy of :mod:`training_clusters.workloads.tenancy` applies to each team's namespace once HyperPod has made it: Pod
Security admission labels (a patch on the namespace HyperPod owns, restored to unlabelled on delete), the team
group's ``edit`` RoleBinding and the same-namespace NetworkPolicy, and an EKS access entry for the team's role.

Example::

    HyperPodTaskGovernance(self, "TaskGovernance", eks_cluster=eks, hyperpod=hyperpod,
        priority_classes=[PriorityClass("inference", 100), PriorityClass("training", 50)],
        teams=[Team("vision", resources=[QuotaResource("ml.p5.48xlarge", count=1)], fair_share_weight=60)])
    # a job joins with kueue.x-k8s.io/queue-name: hyperpod-ns-vision-localqueue
    #                   kueue.x-k8s.io/priority-class: training-priority
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from training_clusters.catalog import lookup_hyperpod
from training_clusters.constructs.eks.cluster import GpuEksCluster
from training_clusters.constructs.hyperpod_eks.cluster import HyperPodEksCluster
from training_clusters.constructs.private.validation import (
    checked_props,
    parse_option,
    prop_error,
    raise_if_problem,
)
from training_clusters.model.options import PodSecurityLevel, ResourceSharingStrategy, TeamPreemption
from training_clusters.model.releases import HYPERPOD_TASK_GOVERNANCE_ADDON, HYPERPOD_TASK_GOVERNANCE_VERSION
from training_clusters.rules import hyperpod_governance as rules
from training_clusters.workloads.task_governance import (
    PriorityClass,
    QuotaResource,
    Team,
    compute_quota_config,
    compute_quota_target,
    scheduler_config,
)
from training_clusters.workloads.tenancy import (
    pod_security_labels,
    same_namespace_ingress,
    team_group,
    team_role_binding,
)

#: The CloudFormation type aws-cdk-lib 2.275 has no L1 for.
COMPUTE_QUOTA_TYPE = "AWS::SageMaker::ComputeQuota"


@checked_props
class HyperPodTaskGovernance(Construct):
    """The task governance add-on, the cluster policy and one compute quota per team, on ``hyperpod``.

    The add-on is installed once the system nodes are up (its Kueue controller runs there); the cluster policy
    once both the add-on and the HyperPod cluster are; each quota after the policy; each team's tenancy after its
    quota (HyperPod makes the namespace then). Everything is deleted in the reverse order.

    Attributes: ``addon`` (the ``CfnAddon``), ``scheduler_config`` (the ``CfnClusterSchedulerConfig``),
    ``quotas`` (team name -> ``CfnResource``), ``teams``, ``priority_classes``, ``team_access_entries``
    (team name -> ``CfnAccessEntry``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        eks_cluster: GpuEksCluster,
        hyperpod: HyperPodEksCluster,
        teams: Sequence[Team],
        priority_classes: Sequence[PriorityClass] = (),
        fair_share: bool = True,
        idle_resource_sharing: bool = True,
        addon_version: str = HYPERPOD_TASK_GOVERNANCE_VERSION,
        pod_security: Mapping[str, PodSecurityLevel | str] | None = None,
        team_roles: Mapping[str, iam.IRole] | None = None,
    ) -> None:
        """Create the add-on, the cluster policy, the quotas and each team's tenancy.

        :param eks_cluster: The EKS cluster HyperPod's nodes join.
        :param hyperpod: The HyperPod cluster (made with ``kueue=False``: the add-on brings its own).
        :param teams: The teams, each with its quota (:class:`~training_clusters.workloads.task_governance.Team`).
        :param priority_classes: At most 10. Default: none.
        :param fair_share: Teams borrow idle compute by their fair-share weight. Default: True.
        :param idle_resource_sharing: Compute no quota holds is lent to teams that borrow. Default: True.
        :param addon_version: Default: :data:`~training_clusters.model.releases.HYPERPOD_TASK_GOVERNANCE_VERSION`.
        :param pod_security: The Pod Security Standards level a team's namespace enforces, by team. Default:
            BASELINE for every team.
        :param team_roles: An IAM role per team whose sessions act as that team (an EKS access entry in the group
            ``training-clusters:team:hyperpod-ns-<team>``, bound to ``edit`` in the namespace only). Default: none.
        """
        super().__init__(scope, id)
        if hyperpod.dependencies.kueue is not None:
            raise prop_error(
                self.node.path,
                "hyperpod",
                "must be made with kueue=False: the task governance add-on runs HyperPod's own Kueue and requires "
                "that no other Kueue is installed",
            )
        self.teams = tuple(self._checked_team(i, t, hyperpod) for i, t in enumerate(teams))
        raise_if_problem(self, "teams", rules.teams_problem(len(self.teams)))
        raise_if_problem(self, "teams", rules.unique_problem([t.name for t in self.teams]))
        self.priority_classes = tuple(self._checked_classes(priority_classes))
        raise_if_problem(self, "addon_version", rules.addon_version_problem(addon_version))
        levels = {
            name: parse_option(self, f"pod_security[{name!r}]", PodSecurityLevel, level)
            for name, level in (pod_security or {}).items()
        }
        self._check_team_keys("pod_security", levels)
        self._check_team_keys("team_roles", team_roles or {})

        self.addon = eks.CfnAddon(
            self,
            "Addon",
            addon_name=HYPERPOD_TASK_GOVERNANCE_ADDON,
            addon_version=addon_version,
            cluster_name=eks_cluster.cluster_name,
            resolve_conflicts="OVERWRITE",
        )
        self.addon.node.add_dependency(eks_cluster.system_nodegroup)
        self.scheduler_config = sagemaker.CfnClusterSchedulerConfig(
            self,
            "SchedulerConfig",
            name=rules.entity_name(hyperpod.cluster_name, "policy"),
            cluster_arn=hyperpod.cluster_arn,
            scheduler_config=_scheduler_config_property(
                scheduler_config(
                    self.priority_classes, fair_share=fair_share, idle_resource_sharing=idle_resource_sharing
                )
            ),
        )
        self.scheduler_config.node.add_dependency(self.addon, hyperpod.cluster)
        self.quotas: dict[str, cdk.CfnResource] = {}
        self.team_access_entries: dict[str, eks.CfnAccessEntry] = {}
        for team in self.teams:
            quota = cdk.CfnResource(
                self,
                f"Quota-{team.name}",
                type=COMPUTE_QUOTA_TYPE,
                properties={
                    "Name": rules.entity_name(hyperpod.cluster_name, team.name),
                    "ClusterArn": hyperpod.cluster_arn,
                    "ActivationState": "Enabled",
                    "ComputeQuotaTarget": compute_quota_target(team),
                    "ComputeQuotaConfig": compute_quota_config(team),
                },
            )
            quota.node.add_dependency(self.scheduler_config)
            cdk.Validations.of(quota).acknowledge(
                cdk.Acknowledgment(
                    id="CloudFormation-Validate::F3006",
                    reason=f"{COMPUTE_QUOTA_TYPE} is newer than the resource schemas aws-cdk-lib 2.275 bundles; "
                    "cfn-lint's schema of the type checks it instead",
                )
            )
            self.quotas[team.name] = quota
            self._team_tenancy(
                eks_cluster, team, quota, levels.get(team.name, PodSecurityLevel.BASELINE), team_roles or {}
            )

    # ----------------------------------------------------------------------------------------------
    # validation, one rule per method

    def _checked_team(self, index: int, team: Team, hyperpod: HyperPodEksCluster) -> Team:
        where = f"teams[{index}]"
        if not isinstance(team, Team):
            raise prop_error(self.node.path, where, f"must be a Team, got {type(team).__name__}")
        raise_if_problem(self, f"{where}.name", rules.team_name_problem(team.name))
        raise_if_problem(self, f"{where}.fair_share_weight", rules.weight_problem(team.fair_share_weight))
        sharing = parse_option(self, f"{where}.sharing", ResourceSharingStrategy, team.sharing)
        preempt = parse_option(self, f"{where}.preempt_team_tasks", TeamPreemption, team.preempt_team_tasks)
        raise_if_problem(
            self, f"{where}.borrow_limit_percent", rules.borrow_limit_problem(team.borrow_limit_percent)
        )
        raise_if_problem(
            self,
            f"{where}.borrow_limit_percent",
            rules.borrow_limit_needs_borrowing_problem(sharing, team.borrow_limit_percent),
        )
        raise_if_problem(self, f"{where}.resources", rules.quota_resources_count_problem(len(team.resources)))
        cluster_types = [g.instance_type for g in hyperpod.instance_groups]
        for r, resource in enumerate(team.resources):
            self._check_resource(f"{where}.resources[{r}]", resource, cluster_types)
        return Team(
            name=team.name,
            resources=tuple(team.resources),
            fair_share_weight=team.fair_share_weight,
            sharing=sharing,
            borrow_limit_percent=team.borrow_limit_percent,
            preempt_team_tasks=preempt,
        )

    def _check_resource(self, where: str, resource: QuotaResource, cluster_types: Sequence[str]) -> None:
        if not isinstance(resource, QuotaResource):
            raise prop_error(self.node.path, where, f"must be a QuotaResource, got {type(resource).__name__}")
        raise_if_problem(
            self,
            f"{where}.instance_type",
            rules.quota_instance_type_problem(resource.instance_type, cluster_types),
        )
        for name in ("count", "accelerators", "vcpu", "memory_gib"):
            raise_if_problem(self, f"{where}.{name}", rules.amount_problem(getattr(resource, name)))
        raise_if_problem(
            self,
            where,
            rules.quota_amount_given_problem(
                count=resource.count,
                accelerators=resource.accelerators,
                vcpu=resource.vcpu,
                memory_gib=resource.memory_gib,
                partition_type=resource.partition_type,
            ),
        )
        instance_type = lookup_hyperpod(resource.instance_type)
        raise_if_problem(
            self, f"{where}.accelerators", rules.accelerators_problem(instance_type, resource.accelerators)
        )
        if resource.partition_type is not None:
            raise_if_problem(
                self,
                f"{where}.partition_type",
                rules.accelerator_partition_problem(instance_type, resource.partition_type),
            )
            raise_if_problem(
                self, f"{where}.partition_count", rules.partition_count_problem(resource.partition_count or 0)
            )

    def _checked_classes(self, classes: Sequence[PriorityClass]) -> list[PriorityClass]:
        raise_if_problem(self, "priority_classes", rules.priority_classes_count_problem(len(classes)))
        for index, priority_class in enumerate(classes):
            where = f"priority_classes[{index}]"
            if not isinstance(priority_class, PriorityClass):
                raise prop_error(
                    self.node.path, where, f"must be a PriorityClass, got {type(priority_class).__name__}"
                )
            raise_if_problem(self, f"{where}.name", rules.priority_class_name_problem(priority_class.name))
            raise_if_problem(self, f"{where}.weight", rules.weight_problem(priority_class.weight))
        raise_if_problem(self, "priority_classes", rules.unique_problem([c.name for c in classes]))
        return list(classes)

    def _check_team_keys(self, field: str, by_team: Mapping[str, Any]) -> None:
        names = [t.name for t in self.teams]
        for name in by_team:
            raise_if_problem(self, f"{field}[{name!r}]", rules.team_key_problem(name, names))

    # ----------------------------------------------------------------------------------------------
    # building

    def _team_tenancy(
        self,
        eks_cluster: GpuEksCluster,
        team: Team,
        quota: cdk.CfnResource,
        level: PodSecurityLevel,
        roles: Mapping[str, iam.IRole],
    ) -> None:
        """Pod Security labels on the namespace HyperPod made for ``team`` (a patch: the namespace is
        HyperPod's, so it is never deleted by us; on delete the labels go back to what an unlabelled namespace
        admits), then the team's RoleBinding and NetworkPolicy in it, and its role's access entry."""
        namespace = team.namespace
        security = pod_security_labels(level, eks_cluster.kubernetes_version)
        unlabelled = {key: "latest" if key.endswith("-version") else "privileged" for key in security}
        labels = eks.KubernetesPatch(
            self,
            f"NamespaceLabels-{team.name}",
            cluster=eks_cluster.cluster,
            resource_name=f"namespace/{namespace}",
            apply_patch={"metadata": {"labels": security}},
            restore_patch={"metadata": {"labels": unlabelled}},
        )
        labels.node.add_dependency(quota)
        objects = eks.KubernetesManifest(
            self,
            f"TeamAccess-{team.name}",
            cluster=eks_cluster.cluster,
            manifest=[team_role_binding(namespace), same_namespace_ingress(namespace)],
        )
        objects.node.add_dependency(labels)
        role = roles.get(team.name)
        if role is not None:
            entry = eks.CfnAccessEntry(
                self,
                f"TeamAccessEntry-{team.name}",
                cluster_name=eks_cluster.cluster_name,
                principal_arn=role.role_arn,
                kubernetes_groups=[team_group(namespace)],
                type="STANDARD",
            )
            entry.node.add_dependency(eks_cluster.cluster)
            self.team_access_entries[team.name] = entry


def _scheduler_config_property(
    config: dict[str, Any],
) -> sagemaker.CfnClusterSchedulerConfig.SchedulerConfigProperty:
    """:func:`~training_clusters.workloads.task_governance.scheduler_config` as the L1's struct."""
    return sagemaker.CfnClusterSchedulerConfig.SchedulerConfigProperty(
        priority_classes=[
            sagemaker.CfnClusterSchedulerConfig.PriorityClassProperty(name=c["Name"], weight=c["Weight"])
            for c in config["PriorityClasses"]
        ],
        fair_share=config["FairShare"],
        idle_resource_sharing=config["IdleResourceSharing"],
    )
