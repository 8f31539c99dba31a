"""What the bootstrap reads from the policy pack beside it (../policy/): the version that checkout of
the pack publishes as (policy/pack_version.py), which the policy group enables, and the pack's
record of each committed stack (policy/stacks/, policy/stack_records.py), from which each
environment's stacks and existing team projects are derived: nothing about a team is listed by
hand in Pulumi.ci.yaml, so two pull requests that add a team each touch files of their own.

Both modules are loaded by their path: the bootstrap is a Pulumi project of its own, run with
bootstrap/ on sys.path, and the pack's modules use the standard library only.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

POLICY_DIR = Path(__file__).resolve().parent.parent / "policy"
# Where the records are read from; the tests point it at the records of the stacks as shipped.
RECORDS_DIR = POLICY_DIR / "stacks"


def _pack_module(name: str) -> ModuleType:
    qualified = f"gpu_platform_policy_{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, POLICY_DIR / f"{name}.py")
    assert spec and spec.loader, name
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module


def stack_records() -> dict[str, dict[str, Any]]:
    return _pack_module("stack_records").load_records(RECORDS_DIR)


def stacks_of(records: dict[str, dict[str, Any]], environment: str) -> list[str]:
    return _pack_module("stack_records").stacks_of(records, environment)


def existing_team_projects(records: dict[str, dict[str, Any]], environment: str) -> list[str]:
    return _pack_module("stack_records").existing_team_projects(records, environment)


def policy_pack_version() -> str:
    """The version policy/ as checked out publishes as (`make policy-publish`)."""
    return _pack_module("pack_version").pack_version(POLICY_DIR)
