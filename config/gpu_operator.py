"""The images the GPU Operator starts on a GPU node, derived at run time from our record of the
pinned chart release (config/charts/gpu-operator-<version>.yaml: the facts read from the chart's
values.yaml, Chart.yaml and NFD subchart, each group with its upstream file and that file's sha256;
`make verify-records` checks them against upstream) and the values a tenant's settings render
(components/tenant_documents.py `gpu_operator_values`). The one place that knows them: the node
template pulls exactly this list as the node's containerd starts (templates/node/main.tf,
`prefetch_script`). No image or version is written here.

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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

CHARTS_DIR = Path(__file__).with_name("charts")
CHART_NAME = "gpu-operator"
NFD = "node-feature-discovery"


class RecordError(Exception):
    """A chart record is not of the shape the derivation reads. A bug in config/charts/, not in a stack file."""


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

# The record's shape: per group (one upstream file), each fact the derivation reads, by its path in
# that file, and what its value may be. The values group also holds the subchart's switch, at the
# path the chart group's dependency `condition` names.
TEXT, FLAG, TEXT_OR_NULL, FLAG_OR_NULL = (str,), (bool,), (str, type(None)), (bool, type(None))
_IMAGE_FIELDS = {"enabled": FLAG_OR_NULL, "repository": TEXT, "image": TEXT, "version": TEXT_OR_NULL}
_IMAGE_KEYS = tuple(dict.fromkeys(key for operand in GPU_NODE_OPERANDS for key in (operand.key, *operand.images)))
RECORD_FACTS: dict[str, dict[tuple[str, ...], tuple[type, ...]]] = {
    "chart": {
        ("version",): TEXT,
        ("appVersion",): TEXT,
        ("dependencies", NFD, "version"): TEXT,
        ("dependencies", NFD, "condition"): TEXT,
    },
    "values": {
        ("driver", "enabled"): FLAG,
        **{(key, field): allowed for key in _IMAGE_KEYS for field, allowed in _IMAGE_FIELDS.items()},
    },
    "nfd-chart": {("version",): TEXT, ("appVersion",): TEXT},
    "nfd-values": {("image", "repository"): TEXT, ("image", "tag"): TEXT_OR_NULL, ("worker", "enable"): FLAG},
}
# Where each group was read from: raw.githubusercontent.com/<repo>/<commit>/<path> has the file
# (`member`: the file inside that archive), `sha256` its bytes'.
SOURCE_FIELDS: dict[str, re.Pattern[str]] = {
    "repo": re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+"),
    "ref": re.compile(r"(tag|branch) \S+"),
    "commit": re.compile(r"[0-9a-f]{40}"),
    "path": re.compile(r"[^/\s][^\s]*"),
    "url": re.compile(r"https://github\.com/\S+"),
    "sha256": re.compile(r"[0-9a-f]{64}"),
}
OPTIONAL_SOURCE_FIELDS = {"member": re.compile(r"[^/\s][^\s]*")}
_ALLOWED = {TEXT: "a string", FLAG: "true or false", TEXT_OR_NULL: "a string or null", FLAG_OR_NULL: "true, false or null"}


def dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


def fact_paths(facts: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every leaf of a group's facts, by its path."""
    found: dict[tuple[str, ...], Any] = {}
    for key, value in facts.items():
        path = (*prefix, str(key))
        found.update(fact_paths(value, path) if isinstance(value, Mapping) else {path: value})
    return found


def _source_problems(where: str, source: Any) -> list[str]:
    if not isinstance(source, Mapping):
        return [f"{where}: must be a mapping of {', '.join(SOURCE_FIELDS)} (and member for a file in an archive)"]
    problems = [f"{where}.{key}: unknown field" for key in source if key not in SOURCE_FIELDS and key not in OPTIONAL_SOURCE_FIELDS]
    for key, pattern in {**SOURCE_FIELDS, **OPTIONAL_SOURCE_FIELDS}.items():
        if key not in source:
            if key in SOURCE_FIELDS:
                problems.append(f"{where}.{key}: missing")
        elif not (isinstance(source[key], str) and pattern.fullmatch(source[key])):
            problems.append(f"{where}.{key}: {source[key]!r} does not match {pattern.pattern}")
    return problems


def _facts_problems(where: str, facts: Any, expected: Mapping[tuple[str, ...], tuple[type, ...]]) -> list[str]:
    if not isinstance(facts, Mapping):
        return [f"{where}: must be a mapping"]
    given = fact_paths(facts)
    problems = [f"{where}.{dotted(path)}: missing ({_ALLOWED[allowed]})" for path, allowed in expected.items() if path not in given]
    problems += [f"{where}.{dotted(path)}: not a fact config/gpu_operator.py reads" for path in given if path not in expected]
    problems += [
        f"{where}.{dotted(path)}: {value!r} is not {_ALLOWED[expected[path]]}"
        for path, value in given.items()
        if path in expected and type(value) not in expected[path]
    ]
    return problems


def record_problems(record: Any, release: str) -> list[str]:
    """Everything that keeps `record` (parsed) from being the record of chart release `release`."""
    if not isinstance(record, Mapping):
        return ["must be a mapping with release and groups"]
    problems = [f"{key}: unknown field" for key in record if key not in ("release", "groups")]
    if record.get("release") != release:
        problems.append(f"release: {record.get('release')!r}, but the file is named for {release}")
    groups = record.get("groups")
    if not isinstance(groups, Mapping):
        return [*problems, f"groups: must be a mapping of {', '.join(RECORD_FACTS)}"]
    problems += [f"groups.{name}: unknown group (allowed: {', '.join(RECORD_FACTS)})" for name in groups if name not in RECORD_FACTS]
    problems += [f"groups.{name}: missing" for name in RECORD_FACTS if name not in groups]
    chart_group = groups.get("chart")
    chart_facts = chart_group.get("facts") if isinstance(chart_group, Mapping) else None
    condition = fact_paths(chart_facts).get(("dependencies", NFD, "condition")) if isinstance(chart_facts, Mapping) else None
    for name, expected in RECORD_FACTS.items():
        if name not in groups:
            continue
        group = groups[name]
        if not isinstance(group, Mapping) or set(group) != {"source", "facts"}:
            problems.append(f"groups.{name}: must have exactly source and facts")
            continue
        if name == "values" and isinstance(condition, str):
            expected = {**expected, tuple(condition.split(".")): FLAG}
        problems += _source_problems(f"groups.{name}.source", group["source"])
        problems += _facts_problems(f"groups.{name}.facts", group["facts"], expected)
    if problems:
        return problems
    chart, subchart = fact_paths(groups["chart"]["facts"]), groups["nfd-chart"]["facts"]
    if chart[("version",)] != release:
        problems.append(f"groups.chart.facts.version: {chart[('version',)]!r}, but the file is named for {release}")
    # The dependency names the subchart's version with a leading v, the subchart itself without.
    if chart[("dependencies", NFD, "version")].removeprefix("v") != subchart["version"].removeprefix("v"):
        problems.append(f"groups.nfd-chart.facts.version: {subchart['version']!r}, but the chart depends on {chart[('dependencies', NFD, 'version')]!r}")
    return problems


def record_path(version: str) -> Path:
    return CHARTS_DIR / f"{CHART_NAME}-{version}.yaml"


def shown_path(path: Path) -> str:
    """A path under the repository from its root (as a maintainer finds it), any other as it is."""
    root = CHARTS_DIR.parent.parent
    return path.resolve().relative_to(root).as_posix() if path.resolve().is_relative_to(root) else str(path)


def load_record(path: Path) -> dict[str, Any]:
    """A chart record, parsed, once its shape is checked (every problem at once)."""
    release = path.name.removeprefix(f"{CHART_NAME}-").removesuffix(".yaml")
    try:
        record = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise RecordError(f"{shown_path(path)}: not YAML: {error}") from None
    problems = record_problems(record, release)
    if problems:
        raise RecordError(f"{shown_path(path)} is not a GPU Operator chart record:\n" + "\n".join(f"  {p}" for p in problems))
    return record


def merged(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Values given to Helm over a chart's: maps merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in overrides.items():
        out[key] = merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) else value
    return out


@dataclass(frozen=True)
class Chart:
    """One recorded release of the chart: its values' defaults and appVersion, and its NFD subchart's."""

    version: str
    app_version: str
    values: Mapping[str, Any]
    nfd_condition: tuple[str, ...]  # the values path that switches the NFD subchart (`nfd.enabled`)
    nfd_app_version: str
    nfd_values: Mapping[str, Any]


def recorded_versions() -> frozenset[str]:
    """The chart releases recorded under config/charts/."""
    prefix = f"{CHART_NAME}-"
    return frozenset(p.name.removeprefix(prefix).removesuffix(".yaml") for p in CHARTS_DIR.glob(f"{prefix}*.yaml"))


@functools.cache
def recorded_chart(version: str) -> Chart | None:
    """The recorded chart of `version`, None if it is not recorded."""
    if version not in recorded_versions():
        return None
    groups = load_record(record_path(version))["groups"]
    chart = groups["chart"]["facts"]
    return Chart(
        version=version,
        app_version=chart["appVersion"],
        values=groups["values"]["facts"],
        nfd_condition=tuple(chart["dependencies"][NFD]["condition"].split(".")),
        nfd_app_version=groups["nfd-chart"]["facts"]["appVersion"],
        nfd_values=groups["nfd-values"]["facts"],
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
