"""The OpenTofu templates shipped in templates/, read once per process and embedded inline in the
NodeProvider, so a change to a template is a diff of the NodeProvider in `pulumi preview`."""

from __future__ import annotations

import functools
from pathlib import Path

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
NODE_TEMPLATE = TEMPLATES_DIR / "node" / "main.tf"
ENVIRONMENT_TEMPLATE = TEMPLATES_DIR / "environment" / "main.tf"


@functools.lru_cache(maxsize=None)
def read_template(path: Path) -> str:
    return path.read_text()


def node_template() -> str:
    return read_template(NODE_TEMPLATE)


ENVIRONMENT_PLACEHOLDER = "__GPU_PLATFORM_ENVIRONMENT__"


def environment_template(environment: str) -> str:
    """The environment template for one environment: it derives each tenant's network and identity
    names from the environment and the vCluster's name, so it need not trust the properties."""
    if not environment.isidentifier():
        raise ValueError(f"{environment!r} is not an environment name")
    return read_template(ENVIRONMENT_TEMPLATE).replace(ENVIRONMENT_PLACEHOLDER, environment)
