"""The OpenTofu templates shipped in templates/, read once per process and embedded inline in the
NodeProvider, so a change to a template is a diff of the NodeProvider in `pulumi preview`."""

from __future__ import annotations

import functools
from pathlib import Path

from config import versions
from config.facts import PROJECT_NAMESPACE_PREFIX

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
NODE_TEMPLATE = TEMPLATES_DIR / "node" / "main.tf"
ENVIRONMENT_TEMPLATE = TEMPLATES_DIR / "environment" / "main.tf"
KUBERNETES_TEMPLATE = TEMPLATES_DIR / "kubernetes" / "main.tf"


@functools.lru_cache(maxsize=None)
def read_template(path: Path) -> str:
    return path.read_text()


def node_template() -> str:
    return read_template(NODE_TEMPLATE)


ENVIRONMENT_PLACEHOLDER = "__GPU_PLATFORM_ENVIRONMENT__"
PROJECT_NAMESPACE_PREFIX_PLACEHOLDER = "__GPU_PLATFORM_PROJECT_NAMESPACE_PREFIX__"


def environment_template(environment: str) -> str:
    """The environment template for one environment: it derives each tenant's network and identity
    names from the environment and the vCluster's name, so it need not trust the properties, and
    checks the instance's namespace with the prefix the platform is configured with."""
    if not environment.isidentifier():
        raise ValueError(f"{environment!r} is not an environment name")
    return (
        read_template(ENVIRONMENT_TEMPLATE)
        .replace(ENVIRONMENT_PLACEHOLDER, environment)
        .replace(PROJECT_NAMESPACE_PREFIX_PLACEHOLDER, PROJECT_NAMESPACE_PREFIX)
    )


# Placeholders of templates/kubernetes/main.tf → the pinned images (config/versions.py).
KUBERNETES_IMAGES = {
    "__GPU_PLATFORM_CCM_IMAGE__": versions.CCM_IMAGE,
    "__GPU_PLATFORM_PD_CSI_DRIVER_IMAGE__": versions.PD_CSI_DRIVER_IMAGE,
    "__GPU_PLATFORM_CSI_PROVISIONER_IMAGE__": versions.CSI_PROVISIONER_IMAGE,
    "__GPU_PLATFORM_CSI_ATTACHER_IMAGE__": versions.CSI_ATTACHER_IMAGE,
    "__GPU_PLATFORM_CSI_RESIZER_IMAGE__": versions.CSI_RESIZER_IMAGE,
    "__GPU_PLATFORM_CSI_SNAPSHOTTER_IMAGE__": versions.CSI_SNAPSHOTTER_IMAGE,
    "__GPU_PLATFORM_CSI_NODE_REGISTRAR_IMAGE__": versions.CSI_NODE_REGISTRAR_IMAGE,
}
ZONES_PLACEHOLDER = "__GPU_PLATFORM_NODE_TYPE_ZONES__"


@functools.lru_cache(maxsize=None)
def kubernetes_template(zones: tuple[str, ...]) -> str:
    """The kubernetes environment template for a NodeProvider whose node types use `zones`: the
    cloud controller manager it installs must manage every one of them."""
    if not zones or any(not z or "," in z or '"' in z for z in zones):
        raise ValueError(f"{zones!r} is not a list of zone names")
    text = read_template(KUBERNETES_TEMPLATE).replace(ZONES_PLACEHOLDER, ",".join(sorted(set(zones))))
    for placeholder, image in KUBERNETES_IMAGES.items():
        text = text.replace(placeholder, image)
    return text
