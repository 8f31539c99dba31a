"""The CI bootstrap's part of the policy pack's data (tools/policy_data.py): its identities' grants,
the accounts its configuration derives, its run under the mock engine and what that run
registers. The bootstrap is a Pulumi project of its own (bootstrap/), loaded here as the CLI runs
it: with bootstrap/ on sys.path."""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from config import yaml_io
from config.stack_files import PROJECT_DIR, read_stack_values
from tools import program_inventory as inventory
from tools.mock_engine import ProgramRun, run_program

BOOTSTRAP_DIR = PROJECT_DIR / "bootstrap"
BOOTSTRAP_ROLES = BOOTSTRAP_DIR / "ci_roles.yaml"
BOOTSTRAP_STACK = BOOTSTRAP_DIR / "Pulumi.ci.yaml"
BOOTSTRAP_SCOPES = ("project", "teamProject", "folder", "billingAccount")


def project_name(directory: Path) -> str:
    return yaml_io.load((directory / "Pulumi.yaml").read_text())["name"]


def bootstrap_grants() -> list[dict[str, Any]]:
    """Each CI identity's roles on its scopes (`on`: the environment's project or a team project),
    and the Workload Identity Federation bindings that let GitHub jobs act as those identities."""
    data = yaml_io.load(BOOTSTRAP_ROLES.read_text())
    grants = []
    for identity, spec in data["identities"].items():
        for on in BOOTSTRAP_SCOPES:
            scope = "project" if on == "teamProject" else on
            for entry in spec.get(on) or []:
                grants.append({"principal": identity, "member": "serviceAccount", "role": entry["role"], "scope": scope, "on": on})
        grants.append({"principal": identity, "member": "principal", "role": "roles/iam.workloadIdentityUser", "scope": "serviceAccount"})
    return grants


def _bootstrap_module(name: str) -> ModuleType:
    """A pure module of bootstrap/ (its own Pulumi project, not a package of this one), whose own
    imports of its siblings find them as the CLI's run of it does (bootstrap/ on sys.path)."""
    spec = importlib.util.spec_from_file_location(f"bootstrap_{name}", BOOTSTRAP_DIR / f"{name}.py")
    assert spec and spec.loader
    if spec.name in sys.modules:
        return sys.modules[spec.name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    added = str(BOOTSTRAP_DIR) not in sys.path
    if added:
        sys.path.insert(0, str(BOOTSTRAP_DIR))
    try:
        spec.loader.exec_module(module)
    finally:
        if added:
            sys.path.remove(str(BOOTSTRAP_DIR))
    return module


def bootstrap_data(bootstrap_dir: Path = BOOTSTRAP_DIR) -> dict[str, Any]:
    """What the committed bootstrap configuration (`bootstrap_dir`/Pulumi.ci.yaml) derives: the
    provider's condition, and per CI account its kind, token subject and where its roles are bound."""
    ci_config = _bootstrap_module("ci_config")
    namespace = project_name(BOOTSTRAP_DIR) + ":"
    values = read_stack_values(bootstrap_dir, "ci")
    config = ci_config.parse(
        {key: values.get(namespace + key) for key in ("github", "environments", "pulumiCloud", "driftEnvironment", "roleIdPrefix")},
        values.get("gcp:project"),
    )
    accounts = {}
    for identity in config.identities():
        env = identity.environment
        accounts[identity.email] = {
            "environment": env.name,
            "kind": identity.kind,
            "subject": identity.subject,
            "project": env.project,
            # No team projects here: the pack derives them from the stack records, as the bootstrap
            # does (policy/stack_records.py), so a team's record is all that changes with it.
            "folder": env.tenant_projects.folder,
            "billingAccount": env.tenant_projects.billing_account,
        }
    return {
        "repository": config.repository,
        "attributeCondition": config.attribute_condition(),
        "poolId": ci_config.POOL_ID,
        "providerId": ci_config.PROVIDER_ID,
        "accounts": accounts,
    }


def run_bootstrap(records: dict[str, Any]) -> ProgramRun:
    """The bootstrap (its own Pulumi project) from its committed stack file, with the stack records
    this run writes (what it derives its stacks and team projects from, as after `make policy-data`).
    Its entry point imports its sibling modules top-level, as the CLI runs it with bootstrap/ on
    sys.path; so here."""
    added = str(BOOTSTRAP_DIR) not in sys.path
    if added:
        sys.path.insert(0, str(BOOTSTRAP_DIR))
    try:
        import from_policy

        with tempfile.TemporaryDirectory(prefix="gpu-platform-records-") as tmp:
            for stack, record in records.items():
                (Path(tmp) / f"{stack}.json").write_text(json.dumps(record))
            saved, from_policy.RECORDS_DIR = from_policy.RECORDS_DIR, Path(tmp)
            try:
                return run_program(read_stack_values(BOOTSTRAP_DIR, "ci"), stack="ci", main=BOOTSTRAP_DIR / "__main__.py", project=project_name(BOOTSTRAP_DIR))
            finally:
                from_policy.RECORDS_DIR = saved
    finally:
        if added:
            sys.path.remove(str(BOOTSTRAP_DIR))


def bootstrap_inventory(run: ProgramRun) -> dict[str, Any]:
    """What the pack lets the bootstrap register (program_data.json `inventory`): what a run of it registers."""
    return {"resourceTypes": inventory.resource_types([run]), "commands": inventory.commands([run])}
