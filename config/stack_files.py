"""Reading Pulumi.yaml and Pulumi.<stack>.yaml the way the Pulumi CLI does, without the CLI.

Used by tenant stacks (to validate against their environment's stack file before registering
anything) and by the offline plan. Project-level defaults from Pulumi.yaml's `config:` block fill
keys the stack file lacks; `secure:` values stay opaque (`SecureValue`).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import yaml_io

PROJECT_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SecureValue:
    """An encrypted stack value; only the Pulumi CLI can decrypt it."""

    ciphertext: str

    def __str__(self) -> str:
        return "[secret]"


class StackFileError(ValueError):
    pass


def _load_file(path: Path) -> Any:
    return _load_cached(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _load_cached(path: Path, mtime_ns: int) -> Any:  # mtime_ns: a changed file is read again
    """The file as the Pulumi CLI reads it (config/yaml_io.py: YAML 1.2 scalars, duplicate keys and
    excessive aliasing refused)."""
    return yaml_io.load(path.read_text(), source=path.name)


# Quoted in PyYAML's messages, and no part of a value: one character (`'\\t'` as its repr) or a token.
_YAML_TOKEN = re.compile(r".?|\\.|<[a-z ]+>")


def yaml_problem(error: yaml.YAMLError) -> str:
    """What is wrong with a YAML file and where, without its text: PyYAML's own message quotes the
    lines around the error (and a bad alias or tag by name), and a stack file may hold a value in
    plain text that is a secret (a password, a token), which must not reach the plan's output or CI's
    logs. What stays quoted: YAML's own tokens (`','`, `'<block end>'`), one character, and the key
    of a duplicate key, which the strict loader names."""
    if isinstance(error, yaml_io.YamlError):
        return str(error).split(": ", 1)[-1]  # its message names the file, which the caller names too
    if not isinstance(error, yaml.MarkedYAMLError):
        return f"{type(error).__name__} (no position given)"
    parts = []
    for text, mark in ((error.context, error.context_mark), (error.problem, error.problem_mark)):
        if not text:
            continue
        if not text.startswith("duplicate key "):
            text = re.sub(r"'([^']*)'", lambda m: m.group(0) if _YAML_TOKEN.fullmatch(m.group(1)) else "…", text)
        parts.append(f"{text} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else text)
    if parts:
        return "; ".join(parts)
    mark = error.problem_mark
    return f"{type(error).__name__} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else type(error).__name__


def _project(project_dir: Path) -> dict[str, Any]:
    path = project_dir / "Pulumi.yaml"
    try:
        document = _load_file(path)
    except yaml.YAMLError as e:
        raise StackFileError(f"{path.name}: not valid YAML: {yaml_problem(e)}") from None
    if not isinstance(document, dict) or not isinstance(document.get("name"), str):
        raise StackFileError(f"{path.name}: expected a mapping with a `name:` key")
    return document


def project_name(project_dir: Path = PROJECT_DIR) -> str:
    return _project(project_dir)["name"]


def project_defaults(project_dir: Path = PROJECT_DIR) -> dict[str, Any]:
    """Full key → default value of every project config key that declares one."""
    project = _project(project_dir)
    name = project["name"]
    defaults = {}
    for key, spec in (project.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        # _decode copies: the parsed file is cached and must not be changed through a default.
        if isinstance(spec, dict) and ("default" in spec or "value" in spec):
            defaults[full] = _decode(spec.get("default", spec.get("value")))
        elif not isinstance(spec, dict):
            defaults[full] = _decode(spec)
    return defaults


def required_project_keys(project_dir: Path = PROJECT_DIR) -> list[str]:
    """Project keys without a default: the CLI refuses a stack that lacks one."""
    project = _project(project_dir)
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
        document = _load_file(path) or {}
    except yaml.YAMLError as e:
        raise StackFileError(f"{path.name}: not valid YAML: {yaml_problem(e)}") from None
    if not isinstance(document, dict):
        raise StackFileError(f"{path.name}: expected a mapping with a `config:` key")
    _check_top_level(path, document)
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


def structured(value: Any) -> Any:
    """Pulumi hands structured config to programs as JSON strings."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


# The top-level keys of a stack settings file (Pulumi.<stack>.yaml), as the CLI reads it:
# pulumi/pulumi sdk/go/common/workspace/project.go, `ProjectStack` (tag v3.259.0 and commit
# 1b5949891b3cefcb9974752b24a5ecef0acc86c8 alike).
STACK_FILE_KEYS = ("secretsprovider", "encryptedkey", "encryptionsalt", "config", "environment")


def _check_top_level(path: Path, document: dict) -> None:
    """Config keys written at the top level, without `config:` above them, are no configuration
    at all for the CLI: say so, instead of reporting the keys they hold as missing."""
    stray = [k for k in document if k not in STACK_FILE_KEYS]
    if not stray:
        return
    keys = ", ".join(map(str, stray))
    if all(":" in str(k) for k in stray):
        raise StackFileError(f"{path.name}: {keys} at the top level; configuration goes under a `config:` key, indented below it")
    raise StackFileError(f"{path.name}: unknown top-level key(s) {keys}; allowed: {', '.join(STACK_FILE_KEYS)}")
