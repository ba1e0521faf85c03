"""The EFA counter sidecar's script, run with a POSIX sh on a copy of EFA's sysfs layout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from training_clusters.monitoring.efa import EFA_COUNTERS_SCRIPT, EFA_METRICS, node_exporter_values


def _sysfs(root: Path) -> Path:
    """Two EFA devices as the efa driver lays them out (hw_counters under ports/1), plus an mlx5-like one."""
    for device, tx in (("rdmap16s27", 1000), ("rdmap32s27", 2000)):
        counters = root / "class" / "infiniband" / device / "ports" / "1" / "hw_counters"
        counters.mkdir(parents=True)
        for name, value in (("tx_bytes", tx), ("rx_bytes", tx + 1), ("rdma_read_bytes", 7), ("rx_drops", 3)):
            (counters / name).write_text(f"{value}\n")
    (root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters").mkdir(parents=True)
    return root


def _run(sys_root: Path, out: Path) -> str:
    env = {**os.environ, "EFA_SYS_ROOT": str(sys_root), "EFA_TEXTFILE_DIR": str(out), "EFA_ONCE": "1"}
    subprocess.run(["sh", "-c", EFA_COUNTERS_SCRIPT], env=env, check=True, timeout=30)
    return (out / "efa.prom").read_text()


def test_counters_become_prometheus_text_per_device(tmp_path: Path) -> None:
    text = _run(_sysfs(tmp_path / "sys"), tmp_path)
    samples = sorted(line for line in text.splitlines() if not line.startswith("#"))
    assert samples == [
        'node_efa_rdma_read_bytes_total{device="rdmap16s27",port="1"} 7',
        'node_efa_rdma_read_bytes_total{device="rdmap32s27",port="1"} 7',
        'node_efa_rx_bytes_total{device="rdmap16s27",port="1"} 1001',
        'node_efa_rx_bytes_total{device="rdmap32s27",port="1"} 2001',
        'node_efa_tx_bytes_total{device="rdmap16s27",port="1"} 1000',
        'node_efa_tx_bytes_total{device="rdmap32s27",port="1"} 2000',
    ]
    assert {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")} == EFA_METRICS
    assert not (tmp_path / "efa.prom.tmp").exists()  # written aside, then moved: never read half-written


def test_a_node_without_efa_writes_no_samples(tmp_path: Path) -> None:
    (tmp_path / "sys").mkdir()
    text = _run(tmp_path / "sys", tmp_path)
    assert [line for line in text.splitlines() if not line.startswith("#")] == []


def test_the_script_is_shellcheck_clean_as_posix_sh(tmp_path: Path, shellcheck: str) -> None:
    script = tmp_path / "efa.sh"
    script.write_text("#!/bin/sh\n" + EFA_COUNTERS_SCRIPT)
    done = subprocess.run(
        [shellcheck, "--severity=style", str(script)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout


def test_node_exporter_reads_the_sidecars_directory() -> None:
    values = node_exporter_values()
    assert "--collector.textfile.directory=/run/efa-textfile" in values["extraArgs"]
    assert values["sidecarVolumeMount"] == [
        {"name": "efa-textfile", "mountPath": "/run/efa-textfile", "readOnly": False}
    ]
    assert values["sidecarHostVolumeMounts"] == [
        {"name": "efa-host-sys", "hostPath": "/sys", "mountPath": "/host/sys", "readOnly": True}
    ]
