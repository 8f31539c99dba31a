"""The images a GPU node runs for given chart values, derived here from the pinned chart's own files
as recorded from upstream (config/charts/gpu-operator-<version>/: values.yaml, Chart.yaml, the NFD
subchart's) and the DaemonSets the operator runs on a GPU node, read from its source below.

Independent of config/gpu_operator.py's derivation on purpose, per DaemonSet rather than per
operand: the tests compare the program's list (and what the node pulls) with this one. Shared with
it are only the reading of a recorded file (checked against its sha256) and Helm's merge of values.
test_image_prefetch.py and test_node_template.py import it as `gpu_operator_chart`.
"""

from __future__ import annotations

from typing import Any

from config.gpu_operator import CHARTS_DIR, merged, read_record
from config.versions import GPU_OPERATOR_VERSION

CHART_DIR = CHARTS_DIR / f"gpu-operator-{GPU_OPERATOR_VERSION}"
NFD = "node-feature-discovery"
CHART: dict[str, Any] = read_record(CHART_DIR / "Chart.yaml")
VALUES: dict[str, Any] = read_record(CHART_DIR / "values.yaml")
NFD_CHART: dict[str, Any] = read_record(CHART_DIR / "charts" / NFD / "Chart.yaml")
NFD_VALUES: dict[str, Any] = read_record(CHART_DIR / "charts" / NFD / "values.yaml")

# The DaemonSets the operator runs on a GPU node of the default workload configuration "container"
# (NVIDIA/gpu-operator tag v25.10.1, controllers/state_manager.go `gpuStateLabels`,
# `addGPUStateLabels`, `isStateEnabled`): (name, the values key whose `enabled` decides it or None
# for always, only on MIG-capable GPUs, the values keys of its containers' images, init containers
# first: assets/state-container-toolkit/0500_daemonset.yaml, state-operator-validation/0500,
# state-device-plugin/0500, state-dcgm/0400_dcgm.yml, state-dcgm-exporter/0800,
# gpu-feature-discovery/0500, state-mig-manager/0600, state-node-status-exporter/0700, their images
# filled in by controllers/object_controls.go: `*-validation` init containers run the validator's,
# config-manager containers the device plugin's).
GPU_NODE_DAEMONSETS: tuple[tuple[str, str | None, bool, tuple[str, ...]], ...] = (
    ("nvidia-driver-daemonset", "driver", False, ("driver",)),
    ("nvidia-container-toolkit-daemonset", "toolkit", False, ("validator", "toolkit")),
    ("nvidia-operator-validator", None, False, ("validator",)),
    ("nvidia-device-plugin-daemonset", "devicePlugin", False, ("validator", "devicePlugin")),
    ("nvidia-dcgm", "dcgm", False, ("validator", "dcgm")),
    ("nvidia-dcgm-exporter", "dcgmExporter", False, ("validator", "dcgmExporter")),
    ("gpu-feature-discovery", "gfd", False, ("validator", "devicePlugin", "gfd")),
    ("nvidia-mig-manager", "migManager", True, ("validator", "migManager")),
    ("nvidia-node-status-exporter", "nodeStatusExporter", False, ("nodeStatusExporter",)),
)


def image(values: dict[str, Any], key: str) -> str:
    """templates/clusterpolicy.yaml hands `repository`, `image`, `version` on (the validator's and
    node status exporter's version defaulting to the appVersion); api/nvidia/v1/clusterpolicy_types.go
    `imagePath` joins them, `@` before a sha256 digest."""
    spec = values[key]
    version = str(spec.get("version") or (CHART["appVersion"] if key in ("validator", "nodeStatusExporter") else ""))
    assert spec["repository"] and spec["image"] and version, f"{key} names no image"
    return f"{spec['repository']}/{spec['image']}{'@' if version.startswith('sha256:') else ':'}{version}"


def nfd_worker_image(values: dict[str, Any]) -> str | None:
    """The subchart, switched by Chart.yaml's `condition`, gets the parent's `node-feature-discovery`
    values over its own; templates/worker.yaml: `worker.enable`, `image.repository`:`image.tag`,
    the subchart's appVersion for no tag."""
    [dependency] = [d for d in CHART["dependencies"] if d["name"] == NFD]
    switch, field = dependency["condition"].split(".")
    subchart = merged(NFD_VALUES, values.get(NFD, {}))
    if not (values[switch][field] and subchart["worker"]["enable"]):
        return None
    return f"{subchart['image']['repository']}:{subchart['image'].get('tag') or NFD_CHART['appVersion']}"


def gpu_node_images(overrides: dict[str, Any], *, mig_capable: bool) -> set[str]:
    """Every image the DaemonSets on one GPU node run, for the chart installed with `overrides`."""
    values = merged(VALUES, overrides)
    found = {
        image(values, key)
        for _, switch, mig, keys in GPU_NODE_DAEMONSETS
        if not (mig and not mig_capable) and (switch is None or values[switch]["enabled"])
        for key in keys
    }
    return found | ({worker} if (worker := nfd_worker_image(values)) else set())
