"""Reading Pulumi.yaml and Pulumi.<stack>.yaml the way the Pulumi CLI does, without the CLI.

Used by tenant stacks (to validate against their environment's stack file before registering
anything) and by the offline plan. Project-level defaults from Pulumi.yaml's `config:` block fill
keys the stack file lacks; `secure:` values stay opaque (`SecureValue`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PROJECT_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SecureValue:
    """An encrypted stack value; only the Pulumi CLI can decrypt it."""

    ciphertext: str

    def __str__(self) -> str:
        return "[secret]"


class StackFileError(ValueError):
    pass


def project_name(project_dir: Path = PROJECT_DIR) -> str:
    return yaml.safe_load((project_dir / "Pulumi.yaml").read_text())["name"]


def project_defaults(project_dir: Path = PROJECT_DIR) -> dict[str, Any]:
    """Full key → default value of every project config key that declares one."""
    project = yaml.safe_load((project_dir / "Pulumi.yaml").read_text())
    name = project["name"]
    defaults = {}
    for key, spec in (project.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        if isinstance(spec, dict) and ("default" in spec or "value" in spec):
            defaults[full] = spec.get("default", spec.get("value"))
        elif not isinstance(spec, dict):
            defaults[full] = spec
    return defaults


def required_project_keys(project_dir: Path = PROJECT_DIR) -> list[str]:
    """Project keys without a default: the CLI refuses a stack that lacks one."""
    project = yaml.safe_load((project_dir / "Pulumi.yaml").read_text())
    name = project["name"]
    return [
        f"{name}:{key}"
        for key, spec in (project.get("config") or {}).items()
        if ":" not in key and isinstance(spec, dict) and "default" not in spec and "value" not in spec
    ]


def stack_file(project_dir: Path, stack: str) -> Path:
    return project_dir / f"Pulumi.{stack}.yaml"


def list_stacks(project_dir: Path = PROJECT_DIR) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))


def read_stack_values(project_dir: Path, stack: str) -> dict[str, Any]:
    """The stack's configuration as the program will see it: project defaults, then stack values."""
    path = stack_file(project_dir, stack)
    if not path.exists():
        raise StackFileError(f"{path.name}: no such stack file in {project_dir}")
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise StackFileError(f"{path.name}: not valid YAML: {e}") from None
    if not isinstance(document, dict):
        raise StackFileError(f"{path.name}: expected a mapping with a `config:` key")
    name = project_name(project_dir)
    values = project_defaults(project_dir)
    for key, value in (document.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        values[full] = _decode(value)
    missing = [k for k in required_project_keys(project_dir) if k not in values]
    if missing:
        raise StackFileError(f"{path.name}: missing configuration value(s) {', '.join(missing)} (required by Pulumi.yaml)")
    return values


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return SecureValue(value["secure"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value
