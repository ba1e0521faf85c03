"""Grafana's CloudWatch data source on EKS: what it is provisioned as, what it may call, whose credentials it uses.

The FSx for Lustre dashboard (:func:`~training_clusters.monitoring.dashboards.fsx_throughput`) reads CloudWatch,
not Prometheus: FSx publishes its throughput, operations and capacity in the ``AWS/FSx`` namespace only.
kube-prometheus-stack's Grafana gets the data source from its values (``grafana.additionalDataSources``, written
into the chart's provisioning ConfigMap), and AWS credentials from EKS Pod Identity: a role for Grafana's service
account (:data:`GRAFANA_SERVICE_ACCOUNT`, named in the values so the association and the chart agree), allowed
:data:`CLOUDWATCH_READ_ACTIONS` only.

Why Pod Identity works here: the data source's ``authType: default`` loads the AWS SDK's default credential
chain with no override. kube-prometheus-stack 82.6.0 runs Grafana 12.4.0 (its Grafana subchart 11.2.2's
``appVersion``; the image tag defaults to it). Since Grafana 12.1 (github.com/grafana/grafana pull 107136, which
closed issue 107250; backported to 12.0.5 and 11.6.6) the CloudWatch data source builds its AWS configuration with
aws-sdk-go-v2 through grafana-aws-sdk's ``awsauth`` package, whose ``GetConfig`` passes nothing for
``default`` but region, endpoint and HTTP client to ``config.LoadDefaultConfig``
(``pkg/awsauth/auth.go``; every grafana-aws-sdk release with that package, v0.33.0 on, requires aws-sdk-go-v2
``config`` 1.29.4 or later). That chain
includes the container credential provider EKS Pod Identity uses (``AWS_CONTAINER_CREDENTIALS_FULL_URI``,
``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE``), supported by aws-sdk-go-v2 since release-2023-11-14
("Use pod identity with the AWS SDK", https://docs.aws.amazon.com/eks/latest/userguide/pod-id-minimum-sdk.html).
Before that the data source used aws-sdk-go v1 sessions, which users saw refuse the agent's address ("only
loopback hosts are allowed", github.com/grafana/grafana issue 100801): pin no older Grafana with this data source.

Not verified offline: a live query. Nothing here runs Grafana against AWS; the chain above is read from the
sources named, and the chart render shows the provisioned data source and the service account it runs as.
"""

from __future__ import annotations

from typing import Any

#: The data source's uid: the FSx dashboard's panels name it.
CLOUDWATCH_DATASOURCE_UID = "training-clusters-cloudwatch"
#: Grafana's service account: the name kube-prometheus-stack 82.6.0's Grafana chart gives it (its
#: ``grafana.serviceAccountName``: the release's full name, ``kube-prometheus-stack-grafana``), which the Pod
#: Identity association names. The chart render test checks the chart still renders this name.
GRAFANA_SERVICE_ACCOUNT = "kube-prometheus-stack-grafana"
#: What the data source calls for metrics: ``GetMetricData`` answers every panel query (metric math included);
#: ``ListMetrics`` lists metrics and dimensions for the query editor and the data source's health check.
#: Both on ``Resource: "*"``, as CloudWatch's permissions reference grants them: their only resource type in the
#: Service Authorization Reference is the optional CloudWatch ``dataset``, and no AWS document says which
#: dataset ARN a query of AWS-published metrics (``AWS/FSx``) is authorized against, so naming one could deny
#: the dashboard. No log, alarm or EC2 action: the health check's logs half reports an error, which changes no
#: dashboard.
CLOUDWATCH_READ_ACTIONS = ("cloudwatch:GetMetricData", "cloudwatch:ListMetrics")


def cloudwatch_datasource(region: str) -> dict[str, Any]:
    """Grafana's provisioning entry for the CloudWatch data source in ``region`` (``authType: default``: the
    AWS SDK's credential chain, which finds the pod's EKS Pod Identity credentials)."""
    return {
        "name": "CloudWatch",
        "type": "cloudwatch",
        "uid": CLOUDWATCH_DATASOURCE_UID,
        "access": "proxy",
        "editable": False,
        "jsonData": {"authType": "default", "defaultRegion": region},
    }
