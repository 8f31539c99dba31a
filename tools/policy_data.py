"""Generate policy/program_data.json: the facts the policy pack checks against, taken from the data
the program and the bootstrap use, so the pack can be published on its own (`pulumi policy publish`
uploads policy/ and nothing else) and still agree with them.

    make policy-data          # python -m tools.policy_data
    python -m tools.policy_data --check   # exit 1 when the committed file is stale

tests/test_policy_data.py fails when the committed file differs from what this writes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from components.vcluster_values import GPU_RESOURCE, GPU_TAINT
from config import node_properties as props
from config import yaml_io
from config.catalog import load_catalog
from config.iam_grants import GRANTS_PATH, load_grants
from config.permissions import PERMISSIONS_PATH, load_roles
from config.stack_files import PROJECT_DIR

OUTPUT = PROJECT_DIR / "policy" / "program_data.json"
BOOTSTRAP_DIR = PROJECT_DIR / "bootstrap"
BOOTSTRAP_ROLES = BOOTSTRAP_DIR / "ci_roles.yaml"
CATALOG = PROJECT_DIR / "config" / "catalog.yaml"

# Attributes a Workload Identity Federation principalSet may be restricted by: one repository.
# Never repository_owner (anyone in the organization, forks' owners included) or actor.
WIF_PRINCIPAL_SET_ATTRIBUTES = ["repository", "repository_id"]


def _project_name(directory: Path) -> str:
    return yaml_io.load((directory / "Pulumi.yaml").read_text())["name"]


def _program_grants() -> list[dict[str, Any]]:
    return [
        {"principal": g.principal, "member": g.member, "role": g.role, "scope": g.scope, **({"when": g.when} if g.when else {})}
        for g in load_grants()
    ]


def _bootstrap_grants() -> list[dict[str, Any]]:
    """Each CI identity's roles on its scopes, and the Workload Identity Federation bindings that
    let GitHub jobs act as those identities (one subject each)."""
    data = yaml_io.load(BOOTSTRAP_ROLES.read_text())
    grants = []
    for identity, spec in data["identities"].items():
        for scope in ("project", "folder", "billingAccount"):
            for entry in spec.get(scope) or []:
                grants.append({"principal": identity, "member": "serviceAccount", "role": entry["role"], "scope": scope})
        grants.append({"principal": identity, "member": "principal", "role": "roles/iam.workloadIdentityUser", "scope": "serviceAccount"})
    return grants


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
            for p in (GRANTS_PATH, PERMISSIONS_PATH, BOOTSTRAP_ROLES, CATALOG, PROJECT_DIR / "config" / "node_properties.py")
        ],
        "projects": {"program": program, "bootstrap": bootstrap},
        "grants": {program: _program_grants(), bootstrap: _bootstrap_grants()},
        "customRoles": {
            "keys": sorted(k for k in roles.roles if k != "legacyAutoNodes"),
            "forbiddenInAnyRole": list(roles.forbidden_in_any_role),
            "forbiddenForPlatform": list(roles.forbidden_for_platform),
            "onlyInRoles": {p: list(keys) for p, keys in roles.only_in_roles.items()},
            "platformRoleKeys": _platform_role_keys(),
        },
        "workloadIdentityFederation": {"principalSetAttributes": WIF_PRINCIPAL_SET_ATTRIBUTES},
        "vclusterValues": {
            "gpuResource": GPU_RESOURCE,
            "gpuTaint": dict(GPU_TAINT),
            "acceleratorProperty": props.ACCELERATOR,
            "acceleratorCountProperty": props.ACCELERATOR_COUNT,
            "instanceTypeProperty": props.INSTANCE_TYPE,
            "noAccelerator": props.NO_ACCELERATOR,
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
