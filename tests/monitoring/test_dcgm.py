from __future__ import annotations

import csv
import io

from training_clusters.monitoring.dcgm import DCGM_METRICS, collected_metrics, dcgm_metrics_csv

#: The uncommented lines of dcgm-exporter 4.3.1-4.4.0's etc/dcp-metrics-included.csv (the list GPU Operator
#: v25.3.4 runs by default): ours keeps every one of them.
SHIPPED_DEFAULTS = {
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DRIVER_VERSION",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
}


def _rows(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return [[cell.strip() for cell in row] for row in csv.reader(io.StringIO("\n".join(lines)))]


def test_the_csv_is_what_dcgm_exporter_reads_field_type_help() -> None:
    rows = _rows(dcgm_metrics_csv())
    assert all(len(row) >= 3 for row in rows)
    assert [row[0] for row in rows] == [m.field for m in DCGM_METRICS]
    assert {row[1] for row in rows} <= {"gauge", "counter", "label"}
    assert len({row[0] for row in rows}) == len(rows)  # no field twice


def test_the_defaults_stay_and_the_straggler_metrics_are_added() -> None:
    fields = {row[0] for row in _rows(dcgm_metrics_csv())}
    assert fields >= SHIPPED_DEFAULTS
    assert fields - SHIPPED_DEFAULTS == {
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "DCGM_FI_DEV_POWER_VIOLATION",
        "DCGM_FI_DEV_THERMAL_VIOLATION",
    }


def test_label_fields_are_not_series() -> None:
    assert "DCGM_FI_DRIVER_VERSION" not in collected_metrics()
    assert "DCGM_FI_PROF_SM_ACTIVE" in collected_metrics()
