"""The GPU Operator chart as our record of it has it (tests/data/gpu-operator-v25.10.1-values.yaml):
the images a GPU node runs for given values, derived from the record alone, the way Helm merges
values (maps merge key by key, anything else replaces) and the chart composes image references
(`<repository>/<image>:<version>`, `@` for a sha256 digest, the appVersion where no version is set).

Independent of config/gpu_operator.py on purpose: the tests compare the program's derivation with
this one. test_image_prefetch.py and test_node_template.py import it as `gpu_operator_chart`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

RECORD_PATH = Path(__file__).with_name("data") / "gpu-operator-v25.10.1-values.yaml"
RECORD: dict[str, Any] = yaml.safe_load(RECORD_PATH.read_text())
NFD = "node-feature-discovery"


def merged(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def image(values: dict[str, Any], key: str) -> str:
    if key == NFD:
        subchart = RECORD[NFD]
        return f"{subchart['image']['repository']}:{subchart.get('image', {}).get('tag') or subchart['appVersion']}"
    spec = values[key]
    version = str(spec.get("version") or RECORD["chart"]["appVersion"])
    return f"{spec['repository']}/{spec['image']}{'@' if version.startswith('sha256:') else ':'}{version}"


def gpu_node_images(overrides: dict[str, Any], *, mig_capable: bool) -> set[str]:
    """Every image the DaemonSets on one GPU node run, for the chart installed with `overrides`."""
    values = merged(RECORD["values"], overrides)
    found: set[str] = set()
    for daemonset in RECORD["gpuNodeDaemonSets"]:
        if daemonset.get("mig") and not mig_capable:
            continue
        if "switch" in daemonset and not values[daemonset["switch"]]["enabled"]:
            continue
        found |= {image(values, key) for key in daemonset["images"]}
    return found
