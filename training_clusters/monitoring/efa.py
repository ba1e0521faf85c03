"""EFA throughput per node, for Prometheus: a sidecar beside node-exporter that writes EFA's byte counters.

node-exporter's infiniband collector reads ``ports/<n>/counters/``, which EFA devices do not have: the EFA
driver puts its counters in ``/sys/class/infiniband/<device>/ports/<n>/hw_counters/`` (``tx_bytes``,
``rx_bytes``, ``rdma_read_bytes``, ``rdma_write_bytes``; Linux ``drivers/infiniband/hw/efa/efa_verbs.c``).
The sidecar (:data:`EFA_COUNTERS_SCRIPT`, POSIX sh in a pinned busybox image) copies them every 15 s into
node-exporter's textfile directory as ``node_efa_<counter>_total{device, port}`` counters; node-exporter serves
them with its own, scraped by kube-prometheus-stack's ServiceMonitor and relabelled with the node's name.
Nodes without EFA write an empty file: no series, no error.
"""

from __future__ import annotations

from typing import Any

from training_clusters.model.releases import BUSYBOX_IMAGE

#: The EFA hw_counters exported, each as ``node_efa_<name>_total``.
EFA_COUNTERS = ("tx_bytes", "rx_bytes", "rdma_read_bytes", "rdma_write_bytes")
EFA_METRICS = frozenset(f"node_efa_{name}_total" for name in EFA_COUNTERS)
#: Where the sidecar writes and node-exporter's textfile collector reads (an emptyDir shared by both).
TEXTFILE_DIRECTORY = "/run/efa-textfile"
#: Where the host's /sys is mounted in the sidecar.
HOST_SYS = "/host/sys"

EFA_COUNTERS_SCRIPT = f"""\
set -eu
sys=${{EFA_SYS_ROOT:-{HOST_SYS}}}/class/infiniband
out=${{EFA_TEXTFILE_DIR:-{TEXTFILE_DIRECTORY}}}/efa.prom
interval=${{EFA_INTERVAL_SECONDS:-15}}
write_counters() {{
    tmp="$out.tmp"
    : >"$tmp"
    for name in {" ".join(EFA_COUNTERS)}; do
        printf '# HELP node_efa_%s_total EFA %s from hw_counters.\\n# TYPE node_efa_%s_total counter\\n' \\
            "$name" "$name" "$name" >>"$tmp"
        for file in "$sys"/*/ports/*/hw_counters/"$name"; do
            [ -r "$file" ] || continue
            port_dir=${{file%/hw_counters/*}}
            port=${{port_dir##*/}}
            device_dir=${{port_dir%/ports/*}}
            device=${{device_dir##*/}}
            printf 'node_efa_%s_total{{device="%s",port="%s"}} %s\\n' "$name" "$device" "$port" "$(cat "$file")" >>"$tmp"
        done
    done
    mv "$tmp" "$out"
}}
while :; do
    write_counters
    [ "${{EFA_ONCE:-}}" = 1 ] && exit 0
    sleep "$interval"
done
"""

#: node-exporter's own arguments in kube-prometheus-stack 82.6.0's values (setting ``extraArgs`` replaces them).
_NODE_EXPORTER_CHART_ARGS = [
    "--collector.filesystem.mount-points-exclude=^/(dev|proc|sys|run/containerd/.+|var/lib/docker/.+|var/lib/kubelet/.+)($|/)",
    "--collector.filesystem.fs-types-exclude=^(autofs|binfmt_misc|bpf|cgroup2?|configfs|debugfs|devpts|devtmpfs|fusectl|hugetlbfs|iso9660|mqueue|nsfs|overlay|proc|procfs|pstore|rpc_pipefs|securityfs|selinuxfs|squashfs|sysfs|tracefs|erofs)$",
]


def node_exporter_values() -> dict[str, Any]:
    """kube-prometheus-stack's ``prometheus-node-exporter`` values: the EFA sidecar, the textfile collector
    reading it, and the node's name on every series (``node``)."""
    return {
        "extraArgs": [*_NODE_EXPORTER_CHART_ARGS, f"--collector.textfile.directory={TEXTFILE_DIRECTORY}"],
        "sidecars": [
            {
                "name": "efa-counters",
                "image": BUSYBOX_IMAGE,
                "command": ["sh", "-c", EFA_COUNTERS_SCRIPT],
                "resources": {"requests": {"cpu": "5m", "memory": "8Mi"}, "limits": {"memory": "32Mi"}},
            }
        ],
        "sidecarVolumeMount": [{"name": "efa-textfile", "mountPath": TEXTFILE_DIRECTORY, "readOnly": False}],
        "sidecarHostVolumeMounts": [
            {"name": "efa-host-sys", "hostPath": "/sys", "mountPath": HOST_SYS, "readOnly": True}
        ],
        "prometheus": {
            "monitor": {
                "relabelings": [
                    {
                        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                        "targetLabel": "node",
                        "action": "replace",
                    }
                ]
            }
        },
    }
