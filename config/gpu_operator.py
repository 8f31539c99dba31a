"""The images the GPU Operator starts on a GPU node, derived from the pinned chart's values and the
values a tenant's settings render (components/tenant_documents.py `gpu_operator_values`). The one
place that knows them: the node template pulls exactly this list as the node's containerd starts
(templates/node/main.tf, `prefetch_script`), and tests/test_image_prefetch.py derives the same set
from our record of the chart (tests/data/gpu-operator-v25.10.1-values.yaml).

Which pods the operator starts on a node (NVIDIA/gpu-operator at tag v25.10.1):
- controllers/state_manager.go `gpuStateLabels["container"]`: a GPU node of the default workload
  configuration gets the deploy labels of the driver, container toolkit, operator validator, device
  plugin, GPU feature discovery, DCGM, DCGM exporter and node status exporter; `addGPUStateLabels`
  adds the MIG manager's only where `hasMIGCapableGPU` (GPU feature discovery's
  `nvidia.com/mig.capable`, or an A100/H100/A30 product label). An operand whose `enabled` is false
  in the values gets no DaemonSet at all (`isStateEnabled`); the MPS control daemon runs the device
  plugin's image, and only where MPS sharing is configured;
- assets/state-*/0500_daemonset.yaml (state-dcgm/0400_dcgm.yml, 0600 MIG manager, 0700 node status
  exporter, 0800 DCGM exporter) and
  controllers/object_controls.go: every `*-validation` init container runs the validator image
  (`transformValidationInitContainer`), GPU feature discovery's `config-manager` containers the
  device plugin's image (`transformConfigManagerInitContainer`), each main container its own
  operand's image (`ImagePath`: `<repository>/<image>:<version>`, `@` for a sha256 version);
- deployments/gpu-operator/templates/clusterpolicy.yaml: the validator's (and the node status
  exporter's) version defaults to the chart's appVersion, which the published chart sets to its
  release (gpu-operator-v25.10.1.tgz `Chart.yaml` appVersion v25.10.1, NVIDIA/gpu-operator branch
  gh-pages `stable/` at commit 5d1bf54a53bf15ba4d4d4327cd19cea436e7e73a);
- Node Feature Discovery, a dependency of the chart (`nfd.enabled`), runs its worker on every node,
  tolerating the GPU taint (values.yaml `node-feature-discovery.worker.tolerations`), image
  `registry.k8s.io/nfd/node-feature-discovery` at the subchart's appVersion v0.18.2
  (charts/node-feature-discovery/values.yaml `image`, templates/worker.yaml).
The operator's own Deployment and NFD's master and garbage collector do not tolerate the GPU taint:
they run on the tenant's CPU node.

The driver is never started by the operator here (the node image has it; `driver.enabled: false`):
its image tag depends on the node's OS, known only at run time, so it could not be pulled ahead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Operand:
    """One entry of the chart's values that the operator turns into pods on a GPU node."""

    key: str  # the chart's values key (`toolkit`, `devicePlugin`, …)
    images: tuple[str, ...]  # values keys whose images its pods run (init containers first)
    mig_only: bool = False  # only on MIG-capable GPUs
    always: bool = False  # has no `enabled` switch (the validator DaemonSet)


# In the order the operator's states deploy them (controllers/state_manager.go `init`, its
# `addState` calls).
GPU_NODE_OPERANDS: tuple[Operand, ...] = (
    Operand("toolkit", ("validator", "toolkit")),
    Operand("validator", ("validator",), always=True),
    Operand("devicePlugin", ("validator", "devicePlugin")),
    Operand("dcgm", ("validator", "dcgm")),
    Operand("dcgmExporter", ("validator", "dcgmExporter")),
    Operand("gfd", ("validator", "devicePlugin", "gfd")),
    Operand("migManager", ("validator", "migManager"), mig_only=True),
    Operand("nodeStatusExporter", ("nodeStatusExporter",)),
)
NFD_WORKER = "node-feature-discovery"


@dataclass(frozen=True)
class ChartImages:
    """Our record of one chart release: each values key's `enabled` default and image, as the
    chart's values.yaml has them (the image with its default version already applied)."""

    version: str
    enabled: Mapping[str, bool]
    images: Mapping[str, str]


# NVIDIA/gpu-operator tag v25.10.1, deployments/gpu-operator/values.yaml (equal to the published
# chart's): `enabled`, `repository`, `image`, `version` of each key; versions left unset there
# default to the appVersion v25.10.1. `nfd.enabled` for the NFD worker.
CHARTS: dict[str, ChartImages] = {
    "v25.10.1": ChartImages(
        version="v25.10.1",
        enabled={
            "driver": True,
            "toolkit": True,
            "devicePlugin": True,
            "dcgm": False,
            "dcgmExporter": True,
            "gfd": True,
            "migManager": True,
            "nodeStatusExporter": False,
            NFD_WORKER: True,
        },
        images={
            "validator": "nvcr.io/nvidia/gpu-operator:v25.10.1",
            "toolkit": "nvcr.io/nvidia/k8s/container-toolkit:v1.18.1",
            "devicePlugin": "nvcr.io/nvidia/k8s-device-plugin:v0.18.1",
            "dcgm": "nvcr.io/nvidia/cloud-native/dcgm:4.4.2-1-ubuntu22.04",
            "dcgmExporter": "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.0-distroless",
            "gfd": "nvcr.io/nvidia/k8s-device-plugin:v0.18.1",
            "migManager": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.13.1",
            "nodeStatusExporter": "nvcr.io/nvidia/gpu-operator:v25.10.1",
            NFD_WORKER: "registry.k8s.io/nfd/node-feature-discovery:v0.18.2",
        },
    ),
}
# The values key that switches the NFD subchart (the chart's Chart.yaml `condition: nfd.enabled`).
NFD_SWITCH = "nfd"


def _enabled(chart: ChartImages, values: Mapping[str, Any], key: str) -> bool:
    switch = NFD_SWITCH if key == NFD_WORKER else key
    given = (values.get(switch) or {}).get("enabled")
    return chart.enabled[key] if given is None else bool(given)


def node_images(chart_version: str, values: Mapping[str, Any], *, mig_capable: bool) -> tuple[str, ...] | None:
    """Every image the operator of `chart_version`, installed with `values` (ours, merged over the
    chart's), starts on one GPU node, each once, in deploy order. None for a chart release whose
    images are not recorded here: nothing is pulled ahead then."""
    chart = CHARTS.get(chart_version)
    if chart is None:
        return None
    if _enabled(chart, values, "driver"):
        raise ValueError("the driver is enabled: its image depends on the node's OS and cannot be pulled ahead")
    images: dict[str, None] = {}
    for operand in GPU_NODE_OPERANDS:
        if (operand.mig_only and not mig_capable) or not (operand.always or _enabled(chart, values, operand.key)):
            continue
        images.update(dict.fromkeys(chart.images[key] for key in operand.images))
    if _enabled(chart, values, NFD_WORKER):
        images[chart.images[NFD_WORKER]] = None
    return tuple(images)
