"""The images a GPU node runs for given chart values, derived here from our record of the pinned
chart release (config/charts/gpu-operator-<version>.yaml: the values' defaults, appVersion and the
NFD subchart's, as read from upstream; tools/verify_chart_record.py checks them against upstream)
and the DaemonSets the operator runs on a GPU node, read from its source below.

Independent of config/gpu_operator.py's derivation on purpose, per DaemonSet rather than per
operand: the tests compare the program's list (and what the node pulls) with this one. Shared with
it are only the loading of the record (its shape checked) and Helm's merge of values.
test_image_prefetch.py and test_node_template_prefetch.py import it as `gpu_operator_chart`.
"""

from __future__ import annotations

from typing import Any

from config.gpu_operator import merged, recorded_chart
from config.versions import GPU_OPERATOR_VERSION

RECORD = recorded_chart(GPU_OPERATOR_VERSION)
NFD = "node-feature-discovery"
VALUES: dict[str, Any] = dict(RECORD.values)
NFD_VALUES: dict[str, Any] = dict(RECORD.nfd_values)

# The DaemonSets the operator runs on a GPU node of the default workload configuration "container"
# (NVIDIA/gpu-operator tag v25.10.1, controllers/state_manager.go `gpuStateLabels`,
# `addGPUStateLabels`, `isStateEnabled`): (name, the values key whose `enabled` decides it or None
# for always, only on MIG-capable GPUs, the values keys of its containers' images, init containers
# first: assets/state-container-toolkit/0500_daemonset.yaml, state-operator-validation/0500,
# state-device-plugin/0500, state-dcgm/0400_dcgm.yml, state-dcgm-exporter/0800,
# gpu-feature-discovery/0500, state-mig-manager/0600, state-node-status-exporter/0700, their images
# filled in by controllers/object_controls.go: `*-validation` init containers run the validator's,
# config-manager containers the device plugin's). The record has no driver image: the program
# refuses an enabled driver, which could not be pulled ahead.
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
    version = str(spec.get("version") or (RECORD.app_version if key in ("validator", "nodeStatusExporter") else ""))
    assert spec["repository"] and spec["image"] and version, f"{key} names no image"
    return f"{spec['repository']}/{spec['image']}{'@' if version.startswith('sha256:') else ':'}{version}"


def nfd_worker_image(values: dict[str, Any]) -> str | None:
    """The subchart, switched by Chart.yaml's dependency `condition`, gets the parent's
    `node-feature-discovery` values over its own; templates/worker.yaml: `worker.enable`,
    `image.repository`:`image.tag`, the subchart's appVersion for no tag."""
    switch, field = RECORD.nfd_condition
    subchart = merged(NFD_VALUES, values.get(NFD, {}))
    if not (values[switch][field] and subchart["worker"]["enable"]):
        return None
    return f"{subchart['image']['repository']}:{subchart['image'].get('tag') or RECORD.nfd_app_version}"


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
