"""What a monitored EKS environment collects and shows, as data (no CDK): the DCGM metric list, the relabelling
that puts the node name on every series, the Grafana dashboards shipped with the stack and the CloudWatch data
source the FSx one reads."""
