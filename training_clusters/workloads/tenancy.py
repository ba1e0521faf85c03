"""What keeps a team inside its namespace on EKS, as plain Kubernetes objects (build side, free of CDK).

A team namespace (one ``eks.queues.namespaces`` or ``hyperpod_eks.queues.namespaces`` names) gets:

- Pod Security admission labels (https://kubernetes.io/docs/concepts/security/pod-security-admission/):
  ``enforce`` at the namespace's level (``baseline`` unless ``restricted`` is chosen), ``warn`` and ``audit`` at
  ``restricted``, each pinned to the cluster's Kubernetes version, so a privileged, hostPath or hostNetwork
  pod (the way to the node's role and every Pod Identity token on the node) is refused at creation;
- a ``RoleBinding`` of the ``edit`` ClusterRole to the team's Kubernetes group (:func:`team_group`) in the
  namespace only: pods, jobs, services, secrets of their namespace, no cluster-scoped rights, no RBAC or
  namespace changes (``edit`` grants neither; https://kubernetes.io/docs/reference/access-authn-authz/rbac/
  "User-facing roles"). The group reaches the cluster through an EKS access entry of the team's IAM role;
- a ``NetworkPolicy`` admitting ingress from the namespace's own pods only: other teams' pods cannot connect
  (enforced by the VPC CNI's network policy agent, which the stacks turn on);
- a ``NetworkPolicy`` refusing its pods' egress to the instance metadata service (``169.254.169.254``,
  ``fd00:ec2::254``), everything else allowed: a team pod never reads the node's role, whatever the node's
  metadata hop limit. Our EKS nodegroups answer metadata one hop away only (IMDSv2, hop limit 1), but HyperPod
  manages its instances and its API has no metadata setting (SageMaker's ``CreateCluster`` and
  ``AWS::SageMaker::Cluster`` instance groups: no metadata options), so on HyperPod EKS this policy is what keeps
  the execution role from the pods. The EKS Pod Identity agent (``169.254.170.23``, ``fd00:ec2::23``) stays
  reachable: pods get their own roles from it.

The system nodes, where the add-ons run with their EKS Pod Identity tokens, carry :data:`SYSTEM_NODE_TAINT`
(``CriticalAddonsOnly=true:NoSchedule``, the key Kubernetes' own add-ons tolerate: CoreDNS's Deployment does,
kubernetes/kubernetes ``cluster/addons/dns/coredns/coredns.yaml.base``):
a pod that does not tolerate it is never scheduled there. Every add-on meant for those nodes gets
:func:`system_placement` (the system nodes' labels and :data:`SYSTEM_TOLERATION`); a team's pods get
neither, and so run only on the accelerator nodes their jobs ask for. The EBS and FSx CSI controllers tolerate
``CriticalAddonsOnly`` by default and their node DaemonSets every taint (``controller.tolerations``,
``node.tolerateAllTaints`` in kubernetes-sigs/aws-ebs-csi-driver and aws-fsx-csi-driver
``charts/*/values.yaml``); tolerating is not being kept there, so their add-ons' configuration also selects the
system nodes (HyperPod's instance groups are untainted unless the file taints them). The Pod Identity agent and
the VPC CNI's ``aws-node`` tolerate every taint (aws/eks-charts ``stable/eks-pod-identity-agent``,
``stable/aws-vpc-cni``: ``operator: Exists``): node agents, they belong on every node.

>>> [o["kind"] for o in team_namespace_objects("vision", kubernetes_version="1.33")]
['Namespace', 'RoleBinding', 'NetworkPolicy', 'NetworkPolicy']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from training_clusters.model.options import PodSecurityLevel

#: Pod Security admission's namespace labels (``pod-security.kubernetes.io/<mode>`` and ``<mode>-version``).
POD_SECURITY_LABEL = "pod-security.kubernetes.io"
#: The ClusterRole every cluster ships for namespace-scoped read/write (RBAC "User-facing roles").
EDIT_CLUSTER_ROLE = "edit"
#: The names of the objects made in each team namespace.
TEAM_ROLE_BINDING = "training-clusters-team-edit"
TEAM_NETWORK_POLICY = "training-clusters-same-namespace-ingress"
TEAM_METADATA_POLICY = "training-clusters-no-instance-metadata"
#: The instance metadata service's addresses (IPv4, and IPv6 on Nitro instances): "Access instance metadata",
#: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html.
INSTANCE_METADATA_ADDRESSES = ("169.254.169.254/32", "fd00:ec2::254/128")

#: Labels of the system nodes: where controllers (add-ons, Kueue, Kubeflow Trainer) run.
SYSTEM_NODE_LABELS: Mapping[str, str] = {"training-clusters/role": "system"}
#: The system nodes' taint, as Kubernetes writes a node's taint (key, value, effect).
SYSTEM_NODE_TAINT: Mapping[str, str] = {"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}
#: What an add-on carries to run on the system nodes: the key with ``Exists``, any value and effect (as CoreDNS's
#: Deployment and the EBS and FSx CSI controllers tolerate it).
SYSTEM_TOLERATION: Mapping[str, str] = {"key": SYSTEM_NODE_TAINT["key"], "operator": "Exists"}


def system_placement() -> dict[str, Any]:
    """``nodeSelector`` and ``tolerations`` (fresh copies) that put a controller's pods on the system nodes."""
    return {"nodeSelector": dict(SYSTEM_NODE_LABELS), "tolerations": [dict(SYSTEM_TOLERATION)]}


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    """Whether one toleration matches one taint, by the rules of
    https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/: the effects match, or the
    toleration names none (it then matches every effect); and with ``operator: Exists`` the keys match, or the
    toleration names no key (it matches every taint); with ``Equal`` (the default) key and value both match.

    >>> tolerates(SYSTEM_TOLERATION, SYSTEM_NODE_TAINT)
    True
    >>> tolerates({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, SYSTEM_NODE_TAINT)
    False
    """
    effect = toleration.get("effect") or ""
    if effect and effect != taint["effect"]:
        return False
    key = toleration.get("key") or ""
    if (toleration.get("operator") or "Equal") == "Exists":
        return not key or key == taint["key"]
    return key == taint["key"] and str(toleration.get("value") or "") == taint.get("value", "")


def team_group(namespace: str) -> str:
    """The Kubernetes group of a team namespace's users: what its access entries map the team's IAM roles to."""
    return f"training-clusters:team:{namespace}"


def pod_security_labels(level: PodSecurityLevel | str, kubernetes_version: str) -> dict[str, str]:
    """``enforce`` at ``level``; ``warn`` and ``audit`` at restricted; all pinned to ``v<kubernetes_version>``
    (a later control-plane upgrade does not change what is admitted until the labels are moved on)."""
    enforce = PodSecurityLevel.parse(level)
    version = f"v{kubernetes_version}"
    labels: dict[str, str] = {}
    for mode, mode_level in (
        ("enforce", enforce),
        ("warn", PodSecurityLevel.RESTRICTED),
        ("audit", PodSecurityLevel.RESTRICTED),
    ):
        labels[f"{POD_SECURITY_LABEL}/{mode}"] = mode_level.value
        labels[f"{POD_SECURITY_LABEL}/{mode}-version"] = version
    return labels


def team_role_binding(namespace: str) -> dict[str, Any]:
    """``edit`` for :func:`team_group` in ``namespace`` (a RoleBinding: nothing outside the namespace)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": TEAM_ROLE_BINDING, "namespace": namespace},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": EDIT_CLUSTER_ROLE,
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team_group(namespace)}
        ],
    }


def same_namespace_ingress(namespace: str, name: str = TEAM_NETWORK_POLICY) -> dict[str, Any]:
    """Every pod of ``namespace`` accepts connections from pods of ``namespace`` only."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]},
    }


def no_instance_metadata_egress(namespace: str, name: str = TEAM_METADATA_POLICY) -> dict[str, Any]:
    """Every pod of ``namespace`` may connect anywhere (any address, any pod of the cluster) except to the
    instance metadata service (:data:`INSTANCE_METADATA_ADDRESSES`)."""
    ipv4, ipv6 = INSTANCE_METADATA_ADDRESSES
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [
                        {"ipBlock": {"cidr": "0.0.0.0/0", "except": [ipv4]}},
                        {"ipBlock": {"cidr": "::/0", "except": [ipv6]}},
                        {"namespaceSelector": {}},
                    ]
                }
            ],
        },
    }


def team_namespace_objects(
    namespace: str,
    *,
    kubernetes_version: str,
    level: PodSecurityLevel | str = PodSecurityLevel.BASELINE,
    labels: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The namespace (unless ``default``, which exists: label it with :func:`pod_security_labels` instead) with
    ``labels`` and its Pod Security labels, then its RoleBinding and NetworkPolicies (ingress from the namespace
    only; egress anywhere but instance metadata)."""
    objects: list[dict[str, Any]] = []
    if namespace != "default":
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": namespace,
                    "labels": {**(labels or {}), **pod_security_labels(level, kubernetes_version)},
                },
            }
        )
    return [
        *objects,
        team_role_binding(namespace),
        same_namespace_ingress(namespace),
        no_instance_metadata_egress(namespace),
    ]


#: The pods of kube-prometheus-stack that serve what a tenant must not reach: Prometheus and Alertmanager (made
#: by the Prometheus Operator, labelled with their ``app.kubernetes.io/name``) and Grafana (the chart's).
MONITORING_SERVERS = ("alertmanager", "grafana", "prometheus")
MONITORING_NETWORK_POLICY = "training-clusters-monitoring-same-namespace-ingress"


def monitoring_ingress(namespace: str) -> dict[str, Any]:
    """Prometheus, Alertmanager and Grafana accept connections from their own namespace only (Grafana reads
    Prometheus, Prometheus sends to Alertmanager): no team pod queries metrics, silences alerts or reaches
    Grafana's login. The node's own address stays allowed (the VPC CNI's agent lets kubelet probes in), and
    ``kubectl port-forward`` enters the pod's own network namespace, so an admin still reaches Grafana that
    way. The stack's other pods (the operator's admission webhook, which the API server calls; the exporters)
    are not selected."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": MONITORING_NETWORK_POLICY, "namespace": namespace},
        "spec": {
            "podSelector": {
                "matchExpressions": [
                    {"key": "app.kubernetes.io/name", "operator": "In", "values": list(MONITORING_SERVERS)}
                ]
            },
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
        },
    }
