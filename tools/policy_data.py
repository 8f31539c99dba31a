"""Generate policy/program_data.json: the facts the policy pack checks against, taken from the data
the program and the bootstrap use, so the pack can be published on its own (`pulumi policy publish`
uploads policy/ and nothing else) and still agree with them.

    make policy-data          # python -m tools.policy_data
    python -m tools.policy_data --check   # exit 1 when the committed file is stale

tests/test_policy_data.py fails when the committed file differs from what this writes.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from components import loft_api
from components.platform_project import INSTANCE_VERBS, MEMBER_ROLE
from components.tenant_network import HEALTH_CHECK_RANGES, IAP_RANGE
from components.vcluster_values import GPU_RESOURCE, GPU_TAINT
from config import node_properties as props
from config import yaml_io
from config.catalog import load_catalog
from config.environment import ENVIRONMENTS
from config.facts import project_namespace
from config.iam_grants import GRANTS_PATH, PREFIX_PLACEHOLDER, condition_templates, load_grants, member_patterns
from config.permissions import LEGACY_AUTO_NODES, PERMISSIONS_PATH, load_roles
from config.stack_files import PROJECT_DIR, read_stack_values

OUTPUT = PROJECT_DIR / "policy" / "program_data.json"
BOOTSTRAP_DIR = PROJECT_DIR / "bootstrap"
BOOTSTRAP_ROLES = BOOTSTRAP_DIR / "ci_roles.yaml"
BOOTSTRAP_STACK = BOOTSTRAP_DIR / "Pulumi.ci.yaml"
CATALOG = PROJECT_DIR / "config" / "catalog.yaml"
VALUE_PATHS = PROJECT_DIR / "components" / "vcluster_value_paths.yaml"
BOOTSTRAP_SCOPES = ("project", "teamProject", "folder", "billingAccount")

# Attributes a Workload Identity Federation principalSet may be restricted by: one repository.
# Never repository_owner (anyone in the organization, forks' owners included) or actor.
WIF_PRINCIPAL_SET_ATTRIBUTES = ["repository", "repository_id"]


def _project_name(directory: Path) -> str:
    return yaml_io.load((directory / "Pulumi.yaml").read_text())["name"]


def _program_grants() -> list[dict[str, Any]]:
    out = []
    for g in load_grants():
        optional = {"when": g.when, "target": g.target, "condition": g.condition, "ownProject": g.own_project or None}
        out.append({"principal": g.principal, "member": g.member, "role": g.role, "scope": g.scope, **{k: v for k, v in optional.items() if v}})
    return out


def _bootstrap_grants() -> list[dict[str, Any]]:
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
    """A pure module of bootstrap/ (its own Pulumi project, not a package of this one)."""
    spec = importlib.util.spec_from_file_location(f"bootstrap_{name}", BOOTSTRAP_DIR / f"{name}.py")
    assert spec and spec.loader
    if spec.name in sys.modules:
        return sys.modules[spec.name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _bootstrap() -> dict[str, Any]:
    """What the committed bootstrap configuration derives: the provider's condition, and per CI
    account its kind, token subject and where its roles are bound."""
    ci_config = _bootstrap_module("ci_config")
    namespace = _project_name(BOOTSTRAP_DIR) + ":"
    values = read_stack_values(BOOTSTRAP_DIR, "ci")
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
            "teamProjects": list(env.team_projects),
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


def _custom_role_permissions() -> dict[str, dict[str, list[str]]]:
    program = {k: list(r.permissions) for k, r in load_roles().roles.items() if k != LEGACY_AUTO_NODES}
    bootstrap = {k: list(spec["permissions"]) for k, spec in yaml_io.load(BOOTSTRAP_ROLES.read_text())["customRoles"].items()}
    return {"program": program, "bootstrap": bootstrap}


def _spec_fields(cls: type) -> list[str]:
    """The JSON field names of one of components/loft_api.py's dataclasses."""
    return [f.metadata.get("json", loft_api._camel(f.name)) for f in dataclasses.fields(cls)]


def _platform_role_keys() -> list[str]:
    return sorted({g.custom_role_key for g in load_grants() if g.principal == "platform" and g.custom_role_key})


def _gpus_per_machine_type() -> dict[str, int | None]:
    """GPUs a VM of each machine type carries: fixed for built-in series, 0 for series that take
    none, unknown (None) for N1, whose guest GPUs are chosen per node type."""
    catalog = load_catalog(CATALOG)
    table: dict[str, int | None] = {}
    for name, machine in sorted(catalog.machines.items()):
        attach = catalog.series[machine.series]["gpuAttach"]
        table[name] = machine.gpu_count if attach == "builtin" else (0 if attach == "none" else None)
    return table


def build() -> dict[str, Any]:
    roles = load_roles()
    program, bootstrap = _project_name(PROJECT_DIR), _project_name(BOOTSTRAP_DIR)
    return {
        "_generated": "by `make policy-data` (python -m tools.policy_data); do not edit",
        "_sources": [
            str(p.relative_to(PROJECT_DIR))
            for p in (
                GRANTS_PATH,
                PERMISSIONS_PATH,
                BOOTSTRAP_ROLES,
                BOOTSTRAP_STACK,
                CATALOG,
                VALUE_PATHS,
                PROJECT_DIR / "config" / "node_properties.py",
                PROJECT_DIR / "components" / "platform_project.py",
                PROJECT_DIR / "components" / "tenant_network.py",
            )
        ],
        "projects": {"program": program, "bootstrap": bootstrap},
        "environments": list(ENVIRONMENTS),
        "grants": {program: _program_grants(), bootstrap: _bootstrap_grants()},
        "identities": member_patterns(),
        "conditions": {
            "prefixPlaceholder": PREFIX_PLACEHOLDER,
            "expressions": {name: c["expression"] for name, c in condition_templates().items()},
        },
        "bootstrap": _bootstrap(),
        "customRoles": {
            "keys": sorted(k for k in roles.roles if k != LEGACY_AUTO_NODES),
            "forbiddenInAnyRole": list(roles.forbidden_in_any_role),
            "forbiddenForPlatform": list(roles.forbidden_for_platform),
            "onlyInRoles": {p: list(keys) for p, keys in roles.only_in_roles.items()},
            "platformRoleKeys": _platform_role_keys(),
            "permissions": _custom_role_permissions(),
        },
        "workloadIdentityFederation": {"principalSetAttributes": WIF_PRINCIPAL_SET_ATTRIBUTES},
        "network": {"googleSourceRanges": [*HEALTH_CHECK_RANGES, IAP_RANGE]},
        "platformObjects": {
            "memberRole": MEMBER_ROLE,
            "memberKinds": ["User", "Team"],
            "instanceVerbs": list(INSTANCE_VERBS),
            "projectNamespacePrefix": project_namespace(""),
            "projectSpecFields": _spec_fields(loft_api.ProjectSpec),
            "instanceSpecFields": _spec_fields(loft_api.VirtualClusterInstanceSpec),
            "instanceTemplateFields": _spec_fields(loft_api.VirtualClusterTemplate),
        },
        "vclusterValues": {
            "gpuResource": GPU_RESOURCE,
            "gpuTaint": dict(GPU_TAINT),
            "acceleratorProperty": props.ACCELERATOR,
            "acceleratorCountProperty": props.ACCELERATOR_COUNT,
            "instanceTypeProperty": props.INSTANCE_TYPE,
            "noAccelerator": props.NO_ACCELERATOR,
            "allowedPaths": list(yaml_io.load(VALUE_PATHS.read_text())["paths"]),
        },
        "gpusPerMachineType": _gpus_per_machine_type(),
    }


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if policy/program_data.json is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT} is stale: run `make policy-data`", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
