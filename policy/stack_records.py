"""The pack's record of each committed stack, one file per stack (stacks/<stack>.json, written by
`make policy-data`), and what the CI bootstrap derives from them: which stacks belong to an
environment (its CI teams' stack permissions, the policy group) and the existing team projects
of its tenants (its CI identities' roles there).

One file per stack, nothing listed by hand: two pull requests that each add a team add two files,
and merge without a conflict. Standard library only: the bootstrap loads this file by its path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RECORDS_DIR = Path(__file__).resolve().parent / "stacks"


def load_records(records_dir: Path = RECORDS_DIR) -> dict[str, dict[str, Any]]:
    """Every stack's record, by stack name (the file's name without `.json`)."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(records_dir.glob("*.json"))}


def stacks_of(records: Mapping[str, Mapping[str, Any]], environment: str) -> list[str]:
    """The stacks of `environment` (their gpu-platform:environment): its environment stacks and team stacks."""
    return sorted(stack for stack, record in records.items() if record["environment"] == environment)


def existing_team_projects(records: Mapping[str, Mapping[str, Any]], environment: str) -> list[str]:
    """The GCP projects that exist before the stacks do (`gcpProject: <id>`) and hold a tenant of
    `environment`, inline or in a team stack: not the environment's own project (shared tenants),
    not a project Pulumi creates (platform.tenantProjects, whose folder the bootstrap covers)."""
    return sorted(
        {
            tenant["project"]
            for record in records.values()
            if record["environment"] == environment
            for tenant in record["tenants"].values()
            if tenant["isolation"] == "project" and not tenant.get("projectCreated") and tenant["project"] != record["project"]
        }
    )
