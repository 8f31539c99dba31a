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


def environment_template() -> str:
    return read_template(ENVIRONMENT_TEMPLATE)
