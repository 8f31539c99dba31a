"""Generate policy/program_data.json and policy/stacks/<stack>.json: the facts the policy pack checks
against, taken from the data the program and the bootstrap use and from what they register under
the mock engine (every committed stack, the stacks as shipped, the coverage variants below and the
bootstrap: tools/program_inventory.py), so the pack can be published on its own (`pulumi policy
publish` uploads policy/ and nothing else) and still agree with them.

program_data.json holds what the program makes under any configuration (`inventory`) and the
data of the program and the bootstrap; each committed stack's record (its exact identities and
tenants) is a file of its own under policy/stacks/, so that adding a team adds one file and two
teams added on two branches merge without a conflict.

    make policy-data          # python -m tools.policy_data
    python -m tools.policy_data --check   # exit 1 when a generated file is stale

tests/test_policy_pack.py fails when the committed files differ from what this writes.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib.metadata
import itertools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pulumi

from components import loft_api
from components.platform_project import INSTANCE_VERBS, LOCAL_CLUSTER, MEMBER_ROLE
from components.tenant_network import HEALTH_CHECK_RANGES, IAP_RANGE
from components.vcluster_values import GPU_RESOURCE, GPU_TAINT
from config import capacity as cap
from config import node_properties as props
from config import yaml_io
from config.catalog import load_catalog
from config.environment import ENVIRONMENTS
from config.facts import project_namespace
from config.iam_grants import GRANTS_PATH, PREFIX_PLACEHOLDER, condition_templates, load_grants
from config.permissions import LEGACY_AUTO_NODES, PERMISSIONS_PATH, load_roles
from components.tenant_pod_security import ENFORCE_LABEL, FEATURE_NAMESPACES, POLICY_NAME, PRIVILEGED, PRIVILEGED_NAMESPACES, pod_security_objects
from config.errors import ConfigError
from config.stack_files import PROJECT_DIR, StackFileError, list_stacks, read_stack_values
from config.tenant_security import POD_SECURITY_STANDARDS, SETTINGS, STRICTER
from tools import program_inventory as inventory
from tools.policy_data_bootstrap import (
    BOOTSTRAP_DIR,
    BOOTSTRAP_ROLES,
    BOOTSTRAP_STACK,
    bootstrap_data,
    bootstrap_grants,
    bootstrap_inventory,
    project_name,
    run_bootstrap,
)
from tools.mock_engine import ProgramRun, run_program
from tools.policy_records import ENVIRONMENT_DECISIONS, environment_stack_of, recorded_resources, run_facts, stack_data, stack_entry  # noqa: F401
from tools.policy_check import P  # noqa: F401 - puts policy/ on sys.path, as the CLI runs the pack

from guardrails import recorded  # noqa: E402

OUTPUT = PROJECT_DIR / "policy" / "program_data.json"
RECORDS_DIR = PROJECT_DIR / "policy" / "stacks"  # one record per committed stack (policy/stack_records.py)
# The stacks as shipped, frozen (tests/data/shipped/): the program's runs of them and their variants
# feed the inventory whatever stacks this checkout holds, so a pack published by an adopter who
# replaced or deleted the examples still admits what the program makes in those configurations.
REFERENCE_DIR = PROJECT_DIR / "tests" / "data" / "shipped"
CATALOG = PROJECT_DIR / "config" / "catalog.yaml"
VALUE_PATHS = PROJECT_DIR / "components" / "vcluster_value_paths.yaml"

# Attributes a Workload Identity Federation principalSet may be restricted by: one repository.
# Never repository_owner (anyone in the organization, forks' owners included) or actor.
WIF_PRINCIPAL_SET_ATTRIBUTES = ["repository", "repository_id"]


def _program_grants() -> list[dict[str, Any]]:
    out = []
    for g in load_grants():
        optional = {
            "when": g.when,
            "target": g.target,
            "condition": g.condition,
            "ownProject": g.own_project or None,
            "notOnEnvironmentProject": g.not_on_environment_project or None,
        }
        out.append({"principal": g.principal, "member": g.member, "role": g.role, "scope": g.scope, **{k: v for k, v in optional.items() if v}})
    return out


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


# --- The runs the inventory is read from -------------------------------------------------------------

NS = "gpu-platform"


def _all_options(values: dict[str, Any]) -> dict[str, Any] | None:
    """Every option that adds resources, commands, chart values or in-tenant objects, at once: a
    license, single sign-on at publicHost behind the platform's LoadBalancer with TLS of its own,
    the hosted router on (with SSO, as prod allows it), monitoring's e-mail channel and cost view,
    and per project-mode tenant load balancers, SSH through IAP, the smoke test, no Pod Security."""
    platform = values.setdefault(f"{NS}:platform", {})
    platform.update(
        licenseTokenKey="policyDataLicense",
        publicHost="gpu.example.com",
        publicSourceRanges=["203.0.113.0/24"],
        tls=True,
        hostedRouter=True,
        sso={"issuerUrl": "https://accounts.example.com", "clientId": "gpu-platform", "groups": ["admins"], "groupsClaim": "groups"},
    )
    values[f"{NS}:policyDataLicense"] = "placeholder-license"
    # Monitoring's optional resources: an e-mail channel Pulumi creates and the showback cost view.
    project = values.get("gcp:project")
    monitoring = values.setdefault(f"{NS}:monitoring", {})
    monitoring.update(enabled=True, notificationChannels=[{"email": "oncall@example.com"}])
    monitoring.setdefault("showback", {})["billingExportTable"] = f"{project}.billing.gcp_billing_export_v1_000000_000000_000000"
    for tenant in values.get(f"{NS}:tenants") or []:
        tenant.update(smokeTest=True, podSecurityStandard="privileged")
        tenant.setdefault("network", {})["iapSsh"] = True
        # The DCGM exporter's ServiceMonitor, beside the exporter and the MIG manager (on by default).
        tenant.setdefault("gpuOperator", {}).update(serviceMonitor=True, dcgmExporter=True, migManager=True)
        if tenant.get("isolation") != "shared":
            tenant.update(loadBalancerServices=True, persistentDisks=True)
    platform["approvedTenantSecurity"] = {
        t["name"]: {"podSecurityStandard": "privileged", **({} if t.get("isolation") == "shared" else {"loadBalancerServices": True})}
        for t in values.get(f"{NS}:tenants") or []
    }
    return values


def _legacy(values: dict[str, Any]) -> dict[str, Any] | None:
    """The opt-in legacy mode (the official infrastructure template), which needs shared tenants;
    and, the other way than `_all_options`, every switch of the tenants' GPU Operator that an option
    turns: no monitoring (legacy mode's default), so no DCGM exporter, no ServiceMonitor, no MIG
    manager. The runs then see both values of each, and instance-charts-by-design pins only the
    switches the program writes one way under every configuration (tools/program_inventory.py
    fixed_switches)."""
    values.setdefault(f"{NS}:nodeProvider", {})["legacyInfrastructure"] = True
    platform = values.setdefault(f"{NS}:platform", {})
    platform.update(allowSharedIsolation=True, allowSharedWithProjectTenants=True)
    for tenant in values.get(f"{NS}:tenants") or []:
        tenant.pop("gcpProject", None)
        tenant.update(isolation="shared", persistentDisks=False, loadBalancerServices=False)
        tenant.setdefault("monitoring", {})["enabled"] = False
        tenant.setdefault("gpuOperator", {}).update(serviceMonitor=False, dcgmExporter=False, migManager=False)
    platform["approvedTenantSecurity"] = {t["name"]: {"isolation": "shared"} for t in values.get(f"{NS}:tenants") or []}
    return values


# Variants of each committed environment stack whose runs add to what the committed stacks alone
# register: the pack allows what the program makes under any configuration, not only the committed
# one. Between them each option that turns a value the program writes is on in one and off in the other.
COVERAGE_VARIANTS: dict[str, Callable[[dict[str, Any]], dict[str, Any] | None]] = {"all options": _all_options, "legacy mode": _legacy}


@dataclass
class Evaluated:
    """The committed stacks' runs by stack name, the runs of the stacks as shipped that differ from
    them and the variants' runs (the inventory's other runs), the bootstrap's run, and each committed
    stack's configuration."""

    stacks: dict[str, ProgramRun]
    variants: list[ProgramRun]
    bootstrap: ProgramRun
    values: dict[str, dict[str, Any]]


def _run_all(project_dir: Path, given: dict[str, ProgramRun] | None) -> tuple[dict[str, ProgramRun], dict[str, dict[str, Any]]]:
    """Every stack of `project_dir` (environment stacks first: team stacks plan with their outputs)
    run, but those `given`; and each stack's configuration."""
    values = {stack: read_stack_values(project_dir, stack) for stack in list_stacks(project_dir)}
    ordered = sorted(values, key=lambda s: (environment_stack_of(values[s]) is not None, s))
    runs = dict(given or {})
    for stack in ordered:
        if stack in runs:
            continue
        env = environment_stack_of(values[stack])
        outputs = {values[stack][f"{NS}:environmentStack"]: runs[env].outputs} if env and env in runs else None
        runs[stack] = run_program(values[stack], stack=stack, stack_outputs=outputs, project_dir=project_dir)
    return {s: runs[s] for s in ordered}, values


def _variants(values: dict[str, dict[str, Any]], project_dir: Path) -> list[ProgramRun]:
    variants = []
    for stack, stack_values in values.items():
        if environment_stack_of(stack_values) is None:
            for variant in COVERAGE_VARIANTS.values():
                edited = variant(copy.deepcopy(stack_values))
                if edited is not None:
                    variants.append(run_program(edited, stack=stack, project_dir=project_dir))
    return variants


def evaluate(
    stacks: dict[str, ProgramRun] | None = None,
    bootstrap: ProgramRun | None = None,
    project_dir: Path = PROJECT_DIR,
    reference: dict[str, ProgramRun] | None = None,
) -> Evaluated:
    """Run every committed stack (environment stacks first) unless given, the stacks as shipped
    (unless given as `reference`) where this checkout's differ, the variants of every environment
    stack of both, and the bootstrap."""
    runs, values = _run_all(project_dir, stacks)
    variants = _variants(values, project_dir)
    if REFERENCE_DIR.is_dir() and project_dir != REFERENCE_DIR:
        shipped = {stack: read_stack_values(REFERENCE_DIR, stack) for stack in list_stacks(REFERENCE_DIR)}
        differing = {stack: v for stack, v in shipped.items() if values.get(stack) != v}
        if differing:
            # The shipped stacks run beside each other (their team stacks read their environment's outputs).
            same = {stack: runs[stack] for stack in shipped if stack not in differing}
            reference_runs, _ = _run_all(REFERENCE_DIR, {**same, **(reference or {})})
            variants += [reference_runs[stack] for stack in differing]
            variants += _variants({s: v for s, v in differing.items()}, REFERENCE_DIR)
    if bootstrap is None:
        bootstrap = run_bootstrap(stack_data(runs, values))
    return Evaluated(runs, variants, bootstrap, values)




def provider_versions() -> dict[str, str]:
    """The version of each provider whose resource the pack judges, as its SDK registers it (the
    engine puts it into the provider's inputs): the installed, pinned SDK's."""
    return {
        recorded.GCP_PROVIDER: importlib.metadata.version("pulumi_gcp"),
        recorded.KUBERNETES_PROVIDER: importlib.metadata.version("pulumi_kubernetes"),
        recorded.COMMAND_PROVIDER: importlib.metadata.version("pulumi_command"),
    }


def _program(evaluated: Evaluated) -> dict[str, Any]:
    runs = [*evaluated.stacks.values(), *evaluated.variants]
    return {
        "resourceTypes": inventory.resource_types(runs, references=True),
        "commands": inventory.commands(runs),
        "helmReleases": inventory.helm_releases(runs),
        "helmReleaseInputs": inventory.helm_release_inputs(runs),
        "kubeconfigs": inventory.kubeconfigs(runs),
        "instanceCharts": inventory.instance_charts(runs),
        "instanceReleaseCharts": inventory.release_charts(runs),
        "tenantCharts": inventory.tenant_charts(runs),
        "tenantObjects": inventory.tenant_objects(runs),
        "tenantImages": inventory.tenant_images(runs),
        "tenantRbac": inventory.tenant_rbac(runs),
        "tenantWorkloads": inventory.tenant_workloads(runs),
        "kubernetesSecrets": inventory.kubernetes_secrets(runs),
    }


def build(evaluated: Evaluated | None = None) -> dict[str, Any]:
    evaluated = evaluated or evaluate()
    roles = load_roles()
    program, bootstrap = project_name(PROJECT_DIR), project_name(BOOTSTRAP_DIR)
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
        "grants": {program: _program_grants(), bootstrap: bootstrap_grants()},
        "conditions": {
            "prefixPlaceholder": PREFIX_PLACEHOLDER,
            "expressions": {name: c["expression"] for name, c in condition_templates().items()},
        },
        "bootstrap": bootstrap_data(),
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
            "localCluster": LOCAL_CLUSTER,
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
        "providerVersions": provider_versions(),
        "tenantInstance": {
            **inventory.node_property_names(),
            # A tenant's slices of the environment's reservations (policy/guardrails/reservations.py).
            "capacityOptionProperty": props.CAPACITY_OPTION,
            "tenantProperty": props.TENANT,
            "reservedPrefix": cap.RESERVED_PREFIX,
            "enforceLabel": ENFORCE_LABEL,
            "podSecurityPolicy": POLICY_NAME,
            "privilegedNamespaces": sorted(PRIVILEGED_NAMESPACES),
            "podSecurityObjects": _pod_security_objects(),
        },
        "tenantSecurity": {"safe": {k: safe for k, (_, safe) in SETTINGS.items()}, "stricter": {k: list(v) for k, v in STRICTER.items()}},
        "inventory": {program: _program(evaluated), bootstrap: _bootstrap_inventory(evaluated)},
    }


def _pod_security_objects() -> list[list[dict[str, Any]]]:
    """Every set of Pod Security objects a tenant can have (components/tenant_pod_security.py),
    for each enforcing standard and each combination of features with a namespace of their own:
    the pack allows exactly these, so none is weakened (an exemption more, an audit-only binding,
    a policy that ignores its failures)."""
    features = sorted(set(FEATURE_NAMESPACES.values()))
    combinations = [frozenset(c) for n in range(len(features) + 1) for c in itertools.combinations(features, n)]
    return [pod_security_objects(standard, f) for standard in POD_SECURITY_STANDARDS if standard != PRIVILEGED for f in combinations]


def _bootstrap_inventory(evaluated: Evaluated) -> dict[str, Any]:
    return bootstrap_inventory(evaluated.bootstrap)


def render(evaluated: Evaluated | None = None) -> str:
    return json.dumps(build(evaluated), indent=2, sort_keys=False) + "\n"


def render_records(evaluated: Evaluated) -> dict[str, str]:
    """Each committed stack's record as the file policy/stacks/<stack>.json holds it, by file name."""
    return {f"{stack}.json": json.dumps(record, indent=2) + "\n" for stack, record in stack_data(evaluated.stacks, evaluated.values).items()}


def stale_files(evaluated: Evaluated, output: Path | None = None, records_dir: Path | None = None) -> list[str]:
    """The generated files that differ from what this writes (missing, changed, or a record of a
    stack this checkout no longer has), by path."""
    output, records_dir = output or OUTPUT, records_dir or RECORDS_DIR
    stale = [] if output.exists() and output.read_text() == render(evaluated) else [_shown(output)]
    records = render_records(evaluated)
    present = {p.name: p.read_text() for p in records_dir.glob("*.json")} if records_dir.is_dir() else {}
    return stale + [_shown(records_dir / name) for name in sorted(set(records) | set(present)) if records.get(name) != present.get(name)]


def _shown(path: Path) -> str:
    return str(path.relative_to(PROJECT_DIR)) if path.is_relative_to(PROJECT_DIR) else str(path)


def write(evaluated: Evaluated, output: Path | None = None, records_dir: Path | None = None) -> list[str]:
    """Writes program_data.json and the records (a stack's record removed with its stack file);
    returns the paths it changed."""
    output, records_dir = output or OUTPUT, records_dir or RECORDS_DIR
    changed = stale_files(evaluated, output, records_dir)
    output.write_text(render(evaluated))
    records_dir.mkdir(exist_ok=True)
    records = render_records(evaluated)
    for path in records_dir.glob("*.json"):
        if path.name not in records:
            path.unlink()
    for name, text in records.items():
        (records_dir / name).write_text(text)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if policy/program_data.json or a record of policy/stacks/ is stale")
    args = parser.parse_args(argv)
    try:
        evaluated = evaluate()
    except (pulumi.RunError, ConfigError, StackFileError) as e:
        # A stack or the bootstrap that does not evaluate says why (e.g. a bootstrap entry's
        # project that is no longer its stack's), with the key it names: no traceback.
        print(f"error: {str(e).strip()}\nnothing was written", file=sys.stderr)
        return 1
    if args.check:
        stale = stale_files(evaluated)
        for path in stale:
            print(f"{path} is stale: run `make policy-data`", file=sys.stderr)
        return 1 if stale else 0
    changed = write(evaluated)
    print(f"wrote {_shown(OUTPUT)} and {_shown(RECORDS_DIR)}/" + (f" ({len(changed)} changed: {', '.join(changed)})" if changed else " (unchanged)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
