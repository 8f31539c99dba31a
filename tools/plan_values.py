"""Config and input values as the offline plan shows and compares them: which keys a stack file
sets itself, secrets masked, registered inputs normalised (protobuf numbers, unset fields).
Split from tools/plan.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config import yaml_io
from config.stack_files import SecureValue, project_name, stack_file
from tools.plan_model import SECRET


def explicit_keys(project_dir: Path, stack: str) -> set[str]:
    path = stack_file(project_dir, stack)
    document = yaml_io.load(path.read_text(), source=path.name) or {}
    name = project_name(project_dir)
    return {k if ":" in k else f"{name}:{k}" for k in (document.get("config") or {})}


def is_set(value: Any) -> bool:
    return value is not None and value != ""  # a key left blank holds nothing


def mask(value: Any) -> Any:
    if isinstance(value, SecureValue):
        return SECRET
    if isinstance(value, dict):
        return {k: mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def normalise(value: Any) -> Any:
    """Registered inputs travel as protobuf Structs: every number comes back a float."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def ordered_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    ordered = {k: metadata[k] for k in ("name", "namespace") if k in metadata}
    ordered.update({k: dict(sorted(v.items())) if isinstance(v, dict) else v for k, v in sorted(metadata.items()) if k not in ordered})
    return ordered
