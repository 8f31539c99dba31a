"""What the GPU Operator's DCGM exporter collects inside each tenant with monitoring on: its metric
file (which replaces the exporter's own list) and the XID count's window, handed to the GPU
Operator's chart as `dcgmExporter` values (components/tenant_documents.py). The collector that
scrapes the exporter is components/monitoring_documents.py.
"""

from __future__ import annotations

from typing import Any

from config.base import duration_seconds

# The ConfigMap the GPU Operator's chart creates from `dcgmExporter.config` and mounts into the
# exporter as dcgm-metrics.csv (gpu-operator tag v25.10.1, templates/dcgm_exporter_config.yaml,
# controllers/object_controls.go `TransformDCGMExporter`).
DCGM_METRICS_CONFIG_MAP = "gpu-platform-dcgm-metrics"

# What the DCGM exporter collects: (DCGM field, Prometheus type, help). Our file replaces the list
# the exporter would read, it does not add to it: the operator sets DCGM_EXPORTER_COLLECTORS to our
# file once `dcgmExporter.config` names it (gpu-operator tag v25.10.1, controllers/object_controls.go
# `TransformDCGMExporter`), where it otherwise points at the image's etc/dcp-metrics-included.csv
# (assets/state-dcgm-exporter/0800_daemonset.yaml). So the list starts with every field that file
# collects (NVIDIA/dcgm-exporter tag 4.4.2-4.7.0; tests/data/dcgm-exporter-4.4.2-4.7.0-metrics.yaml
# records them as `default: true`, and a test keeps the two equal). They are cheap:
# one series per GPU each, and its profiling fields (DCGM_FI_PROF_*) are the ones we need anyway.
DCGM_DEFAULT_METRICS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock in MHz."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock in MHz."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature in C."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature in C."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw in W."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Energy used since boot in mJ."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization in percent."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory bandwidth utilization in percent."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization in percent."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization in percent."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Code of the last XID error the GPU reported."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "GPU memory free in MiB."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "GPU memory used in MiB."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "GPU memory reserved in MiB."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "NVLink bandwidth counters of all lanes."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU license status."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped for uncorrectable errors."),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped for correctable errors."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping rows failed."),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver version."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Fraction of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Fraction of cycles the tensor pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Fraction of cycles device memory is busy."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "PCIe transmit rate in bytes per second."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "PCIe receive rate in bytes per second."),
)
# The exporter's windowed XID count: the number of XID errors of each code (label `xid`) in the last
# XID_COUNT_WINDOW, repeats of one code included; a line naming it in the metrics file switches it on
# (NVIDIA/dcgm-exporter tag 4.4.2-4.7.0, internal/pkg/collector/collector_factory.go,
# xid_collector.go, expcollector.go `getMetrics`). Its value falls again once the window has passed,
# so it is a gauge, as the tag's tests/integration/testdata/default-counters.csv types it (the
# commented-out example in etc/default-counters.csv says counter). The exporter prints whatever type
# the file gives (internal/pkg/counters/counter_config.go `ExtractCounters`), and the type matters:
# the collector turns a counter into a cumulative whose first sample only sets the baseline
# (GoogleCloudPlatform/prometheus tag v2.53.5-gmp.1, google/export/series_cache.go
# `getResetAdjusted`), which would hide the one sample a single XID produces.
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
# What the default list leaves out and the dashboards and alerts need.
DCGM_EXTRA_METRICS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "Fraction of cycles an SM has at least one warp assigned."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Double-bit volatile ECC errors."),
    (XID_COUNT, "gauge", "XID errors in the last window by code."),
)
DCGM_METRICS = DCGM_DEFAULT_METRICS + DCGM_EXTRA_METRICS
# The window of the XID count, which the error alert reads as "in the last 10 minutes": twice the
# longest scrape interval allowed (config/monitoring.py MAX_SCRAPE_SECONDS), so at least one scrape
# sees every XID. The exporter's default is 5 minutes; its --xid-count-window-size, in milliseconds,
# is read from DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE (pkg/cmd/app.go at 4.4.2-4.7.0).
XID_COUNT_WINDOW = "10m"
XID_COUNT_WINDOW_ENV = "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE"


def dcgm_metrics_csv() -> str:
    """The exporter's metrics file: `field, type, help` a line. The exporter reads it with Go's
    encoding/csv, which splits at every comma and, after the space we write there, takes a quote
    for an error rather than the start of a quoted field; then it wants exactly three fields a
    line (NVIDIA/dcgm-exporter tag 4.4.2-4.7.0, internal/pkg/counters/counter_config.go
    `ReadCSVFile`, `ExtractCounters`), or exits (pkg/cmd/app.go `getCounters`). So no value may
    hold a comma or a quote."""
    for row in DCGM_METRICS:
        if any(c in value for value in row for c in ',"\n'):
            raise ValueError(f"DCGM metric {row[0]}: a comma, quote or newline in {row!r} breaks the exporter's CSV reader")
    return "".join(f"{field}, {kind}, {help_text}\n" for field, kind, help_text in DCGM_METRICS)


def dcgm_exporter_values() -> dict[str, Any]:
    """What monitoring sets in `dcgmExporter` of the GPU Operator's values. `config`: the chart
    creates the ConfigMap, the operator points the exporter at it. `env`: the chart hands it to the
    ClusterPolicy (templates/clusterpolicy.yaml at v25.10.1; its own default is empty), and the
    operator sets each on the exporter's container after its own settings
    (controllers/object_controls.go `TransformDCGMExporter`)."""
    return {
        "config": {"name": DCGM_METRICS_CONFIG_MAP, "create": True, "data": dcgm_metrics_csv()},
        "env": [{"name": XID_COUNT_WINDOW_ENV, "value": str(duration_seconds(XID_COUNT_WINDOW) * 1000)}],
    }
