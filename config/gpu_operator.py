"""The images the GPU Operator starts on a GPU node, derived at run time from the pinned chart's own
files (config/charts/gpu-operator-<version>/, recorded byte for byte from upstream) and the values
a tenant's settings render (components/tenant_documents.py `gpu_operator_values`). The one place
that knows them: the node template pulls exactly this list as the node's containerd starts
(templates/node/main.tf, `prefetch_script`). No image or version is written here.

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
  operand's image;
- api/nvidia/v1/clusterpolicy_types.go `imagePath`: `<repository>/<image>:<version>`, `@` for a
  version starting `sha256:`, the image alone where repository and version are both empty;
- deployments/gpu-operator/templates/clusterpolicy.yaml: the values' `repository`, `image` and
  `version` of each operand go into the ClusterPolicy as they are, except that the validator's and
  the node status exporter's version default to the chart's appVersion;
- Node Feature Discovery, a dependency of the chart (Chart.yaml `dependencies`, its `condition`),
  runs its worker on every node, tolerating the GPU taint (values.yaml
  `node-feature-discovery.worker.tolerations`): the subchart's templates/worker.yaml, only
  `if .Values.worker.enable`, image `{{ .Values.image.repository }}:{{ .Values.image.tag | default
  .Chart.AppVersion }}` (kubernetes-sigs/node-feature-discovery chart as bundled in the release).
  Helm hands a subchart the parent's values under the subchart's name, merged over its own.
The operator's own Deployment and NFD's master and garbage collector do not tolerate the GPU taint:
they run on the tenant's CPU node.

The driver is never started by the operator here (the node image has it; `driver.enabled: false`):
its image tag depends on the node's OS, known only at run time, so it could not be pulled ahead.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

CHARTS_DIR = Path(__file__).with_name("charts")
CHART_NAME = "gpu-operator"
NFD = "node-feature-discovery"
# Each recorded file: a header of comment lines ending with this line, then the upstream bytes.
HEADER_END = b"# gpu-platform: end of header\n"
SHA256_LINE = b"# sha256: "


class RecordError(Exception):
    """A recorded chart file is not what its header says. A bug in config/charts/, not in a stack file."""


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
# The values keys whose version templates/clusterpolicy.yaml defaults to the chart's appVersion.
APP_VERSION_DEFAULTED = frozenset({"validator", "nodeStatusExporter"})


def read_record(path: Path) -> Any:
    """A recorded upstream YAML file, parsed, once its bytes are checked against its header's sha256."""
    data = path.read_bytes()
    header, end, body = data.partition(HEADER_END)
    claimed = [line[len(SHA256_LINE) :].decode() for line in header.splitlines() if line.startswith(SHA256_LINE)]
    if not end or len(claimed) != 1:
        raise RecordError(f"{path}: no header ending {HEADER_END.decode().strip()!r} with one {SHA256_LINE.decode().strip()!r} line")
    actual = hashlib.sha256(body).hexdigest()
    if actual != claimed[0]:
        raise RecordError(f"{path}: the upstream file's sha256 is {actual}, its header says {claimed[0]}")
    return yaml.safe_load(body)


def merged(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Values given to Helm over a chart's: maps merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in overrides.items():
        out[key] = merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) else value
    return out


@dataclass(frozen=True)
class Chart:
    """One recorded release of the chart: its values and appVersion, and its NFD subchart's."""

    version: str
    app_version: str
    values: Mapping[str, Any]
    nfd_condition: tuple[str, ...]  # the values path that switches the NFD subchart (`nfd.enabled`)
    nfd_app_version: str
    nfd_values: Mapping[str, Any]


def recorded_versions() -> frozenset[str]:
    """The chart releases recorded under config/charts/."""
    prefix = f"{CHART_NAME}-"
    return frozenset(p.name.removeprefix(prefix) for p in CHARTS_DIR.glob(f"{prefix}*") if p.is_dir())


@functools.cache
def recorded_chart(version: str) -> Chart | None:
    """The recorded chart of `version`, None if it is not recorded."""
    if version not in recorded_versions():
        return None
    directory = CHARTS_DIR / f"{CHART_NAME}-{version}"
    chart = read_record(directory / "Chart.yaml")
    if (chart["name"], chart["version"]) != (CHART_NAME, version):
        raise RecordError(f"{directory}/Chart.yaml is {chart['name']} {chart['version']}, not {CHART_NAME} {version}")
    [dependency] = [d for d in chart["dependencies"] if d["name"] == NFD]
    subchart = read_record(directory / "charts" / NFD / "Chart.yaml")
    # The dependency names the subchart's version with a leading v, the subchart itself without.
    if subchart["version"].removeprefix("v") != dependency["version"].removeprefix("v"):
        raise RecordError(f"{directory}: the recorded {NFD} is {subchart['version']}, Chart.yaml depends on {dependency['version']}")
    return Chart(
        version=version,
        app_version=str(chart["appVersion"]),
        values=read_record(directory / "values.yaml"),
        nfd_condition=tuple(dependency["condition"].split(".")),
        nfd_app_version=str(subchart["appVersion"]),
        nfd_values=read_record(directory / "charts" / NFD / "values.yaml"),
    )


def _operand_image(chart: Chart, values: Mapping[str, Any], key: str) -> str:
    spec = values[key]
    repository, image = spec.get("repository") or "", spec.get("image") or ""
    version = str(spec.get("version") or (chart.app_version if key in APP_VERSION_DEFAULTED else ""))
    if not repository and not version and image:
        return image
    if not (repository and image and version):
        raise ValueError(f"GPU Operator {chart.version}: {key} has no repository, image and version to name its image by")
    return f"{repository}/{image}{'@' if version.startswith('sha256:') else ':'}{version}"


def _nfd_worker_image(chart: Chart, values: Mapping[str, Any]) -> str | None:
    switch: Any = values
    for part in chart.nfd_condition:
        switch = (switch or {}).get(part)
    nfd = merged(chart.nfd_values, values.get(NFD) or {})
    if not (switch and nfd["worker"]["enable"]):
        return None
    return f"{nfd['image']['repository']}:{nfd['image'].get('tag') or chart.nfd_app_version}"


def node_images(chart_version: str, values: Mapping[str, Any], *, mig_capable: bool) -> tuple[str, ...] | None:
    """Every image the operator of `chart_version`, installed with `values` (ours, merged over the
    chart's), starts on one GPU node, each once, in deploy order. None for a chart release not
    recorded under config/charts/: nothing is pulled ahead then."""
    chart = recorded_chart(chart_version)
    if chart is None:
        return None
    given = merged(chart.values, values)
    if given["driver"]["enabled"]:
        raise ValueError("the driver is enabled: its image depends on the node's OS and cannot be pulled ahead")
    images: dict[str, None] = {}
    for operand in GPU_NODE_OPERANDS:
        if (operand.mig_only and not mig_capable) or not (operand.always or given[operand.key]["enabled"]):
            continue
        images.update(dict.fromkeys(_operand_image(chart, given, key) for key in operand.images))
    nfd_worker = _nfd_worker_image(chart, given)
    if nfd_worker:
        images[nfd_worker] = None
    return tuple(images)
