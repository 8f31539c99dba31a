"""Offline plan: what a stack would deploy, without the Pulumi CLI, a cloud or credentials.

    python -m tools.plan                      # the dev stack
    python -m tools.plan --stack prod --out plan-out
    python -m tools.plan --all --quiet        # every Pulumi.*.yaml, one line each (CI)

For each stack it reads Pulumi.yaml and Pulumi.<stack>.yaml the way the CLI does (project defaults,
`secure:` values kept opaque and shown as [secret]), runs the real __main__.py under Pulumi's mock
engine (tools/mock_engine.py) and prints the resource tree, the documents that matter (NodeProvider
node types, GPU quota, tenants' pools), list-price cost ceilings and every warning. Values only the
cloud can compute come back as placeholders and are labelled as such.

A tenant stack needs its environment's outputs: from --environment-outputs FILE (the output of
`pulumi stack output --json` of the environment stack; secret outputs such as the kubeconfig may
stay `[secret]`, the plan reads none of them), or else from an offline evaluation of the
environment's stack file in this project, which the plan says.

The policy pack (policy/) runs over each planned stack as `pulumi preview --policy-pack policy`
would: every mandatory violation is printed in full, naming its resource, before the costs, and
fails the stack; advisory ones are warnings.

The stack is also compared with another version of itself (tools/plan_compare.py): with its stack
files as committed (tools/plan_committed.py) when they differ from the checkout, with the code of `--compare-to RELEASE` on
these stack files (the upgrade check), or with the code and stack files of `--compare-to GIT_REF`.
A deletion or replacement of a stateful resource is printed first, and again last, and fails the
plan unless $ALLOW_DESTROY declares it (tools/destroy_gate.py); not when the committed stack file
is the example as shipped.

Exit status: 0 when every stack planned, 1 when one did not (its configuration problems are printed,
all at once, without a traceback), the pack rejects it or it destroys undeclared, 2 for a wrong
command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import yaml

from components.templates import environment_template, kubernetes_template, node_template
from config import versions, yaml_io
from config.catalog import load_catalog
from config.errors import ConfigError
from config.permissions import AUTO_NODES, LEGACY_AUTO_NODES, load_roles
from config.stack import NS, EnvironmentStack, TenantStack, load_stack, secret_keys
from config.stack_files import PROJECT_DIR, SecureValue, StackFileError, list_stacks, read_stack_values, stack_file
from config.tenant_plan import TenantPlan
from tools import destroy_gate, plan_committed, plan_compare, plan_compare_text, policy_check, policy_data, policy_records
from tools.mock_engine import ProgramRun, config_strings, run_program
from tools.plan_costs import control_planes_of, environment_costs, tenant_stack_costs
from tools.plan_documents import write_documents
from tools.plan_json import summary
from tools.plan_model import NODE_PROVIDER_TYPE, SECRET, PlanError, StackPlan
from tools.plan_tenants import tenant_report
from tools.plan_text import render_quiet, render_text, render_violations
from tools.plan_values import explicit_keys, is_set, mask, normalise, ordered_metadata

__all__ = ["PlanError", "StackPlan", "main", "order_stacks", "plan_stack", "write_documents"]


# --- planning --------------------------------------------------------------------------------------


@dataclass
class EnvironmentOutputs:
    outputs: dict[str, Any]
    source: str
    # The environment's entry of the pack's per-stack data, as `make policy-data` would write it
    # from this evaluation (None from an outputs file): what its team stacks' entries start from.
    pack_entry: dict[str, Any] | None = None
    # Its run (None from an outputs file): the resources it makes for each team stack, which that
    # team stack's entry records (tools/policy_records.py `environmentResources`).
    run: ProgramRun | None = None


def plan_stack(
    stack: str,
    project_dir: Path = PROJECT_DIR,
    *,
    environment_outputs_file: Path | None = None,
    environment_cache: dict[str, EnvironmentOutputs] | None = None,
    policy_levels: dict[str, Any] | None = None,
) -> StackPlan:
    """Plan one stack. Raises PlanError for anything wrong with the stack file or its environment.
    `policy_levels`: enforcement levels by policy name (--policy-pack-config), else the pack's own.

    A stack planned before in this process from the same inputs (its project's stack files, the
    environment outputs file, the catalog, the pack's levels) is not evaluated again: the plan is
    a function of them, and the tests plan the shipped stacks many times over."""
    environment_cache = environment_cache if environment_cache is not None else {}
    key = _plan_key(stack, project_dir, environment_outputs_file, policy_levels)
    if key in _PLANS:
        earlier = _PLANS[key]
        if isinstance(earlier.loaded, EnvironmentStack):
            environment_cache[stack] = EnvironmentOutputs(
                earlier.run.outputs, f"placeholders from an offline evaluation of {earlier.stack_path.name}", earlier.pack_entry, earlier.run
            )
        return dataclasses.replace(earlier, written=[])
    plan = _plan_stack(stack, project_dir, environment_outputs_file, environment_cache, policy_levels)
    _PLANS[key] = plan
    return dataclasses.replace(plan, written=[])


# Plans made in this process, by the hash of everything they are made of (`_plan_key`).
_PLANS: dict[str, StackPlan] = {}


def _plan_key(stack: str, project_dir: Path, outputs_file: Path | None, policy_levels: dict[str, Any] | None) -> str:
    """The inputs of a plan besides the code: every stack file of the project (a tenant stack is
    checked against its environment's and the other team stacks), the outputs file, the catalog
    (its prices and shapes, as loaded), the pack's levels."""
    parts = [stack, str(project_dir.resolve()), repr(sorted((k, str(v)) for k, v in (policy_levels or {}).items())), repr(load_catalog())]
    for path in [project_dir / "Pulumi.yaml", *sorted(project_dir.glob("Pulumi.*.yaml"))]:
        parts.append(f"{path.name}\0{path.read_text() if path.exists() else ''}")
    if outputs_file is not None:
        parts.append(f"{outputs_file}\0{outputs_file.read_text() if outputs_file.is_file() else ''}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _plan_stack(
    stack: str,
    project_dir: Path,
    environment_outputs_file: Path | None,
    environment_cache: dict[str, EnvironmentOutputs],
    policy_levels: dict[str, Any] | None,
) -> StackPlan:
    try:
        values = read_stack_values(project_dir, stack)
    except StackFileError as e:
        if stack_file(project_dir, stack).exists():
            raise PlanError(str(e)) from None
        known = ", ".join(list_stacks(project_dir)) or "none"
        raise PlanError(f"{e}\n  stacks in {project_dir}: {known}") from None
    catalog = load_catalog()
    try:
        # What the program itself does first, with the values as the engine hands them over.
        loaded = load_stack(config_strings(values)[0], stack=stack, project_dir=project_dir, catalog=catalog)
    except ConfigError as e:
        raise PlanError(str(e)) from None

    kind = "environment" if isinstance(loaded, EnvironmentStack) else "tenant"
    stack_outputs, source, environment_entry, environment_run = None, None, None, None
    if isinstance(loaded, TenantStack):
        env = _environment_outputs(loaded, project_dir, environment_outputs_file, environment_cache)
        stack_outputs, source, environment_run = {loaded.environment_stack: env.outputs}, env.source, env.run
        environment_entry = env.pack_entry or policy_check.P.STACKS.get(loaded.environment_stack.split("/")[-1])
    elif environment_outputs_file is not None:
        raise PlanError(f"--environment-outputs is for tenant stacks; {stack} is an environment stack")

    run = _run(values, stack, project_dir, stack_outputs)
    secrets = secret_keys(values)
    explicit = explicit_keys(project_dir, stack)
    control_planes = control_planes_of(loaded, stack, project_dir)
    if isinstance(loaded, EnvironmentStack):
        costs = environment_costs(catalog, loaded, control_planes)
    else:
        costs = tenant_stack_costs(catalog, loaded, control_planes)
    plan = StackPlan(
        stack=stack,
        kind=kind,
        stack_path=stack_file(project_dir, stack),
        config={k: SECRET if k in secrets and is_set(v) else mask(v) for k, v in sorted(values.items())},
        config_from_defaults={k for k in values if k not in explicit},
        loaded=loaded,
        run=run,
        catalog=catalog,
        costs=costs,
        environment_outputs=source,
        versions=_versions(loaded),
    )
    plan.warnings += [("program", w) for w in run.warnings]
    plan.warnings += [
        (
            "plan",
            f"{key} is a secret given in plain text in {plan.stack_path.name}: whoever reads the repository reads it; encrypt it "
            f"with `pulumi config set --secret {key.split(':', 1)[1]} <value>` (shown here as {SECRET}, never as written)",
        )
        for key in sorted(secrets)
        if is_set(values.get(key)) and not isinstance(values[key], SecureValue)
    ]
    plan.warnings += [("plan", f"costs: {why}") for why in costs.unknown]
    _check_policy(plan, values, environment_entry, environment_run, policy_levels)
    if isinstance(loaded, EnvironmentStack):
        environment_cache[stack] = EnvironmentOutputs(run.outputs, f"placeholders from an offline evaluation of {plan.stack_path.name}", plan.pack_entry, run)
        _plan_environment(plan, loaded)
        tenant_plans: tuple[TenantPlan, ...] = loaded.tenants
    else:
        _plan_tenant_stack(plan, loaded)
        tenant_plans = (loaded.tenant,)
    plan.tenants = [tenant_report(run, t) for t in tenant_plans]
    for tenant in plan.tenants:
        if tenant.vcluster_yaml is None:
            plan.warnings.append(("plan", f"tenant {tenant.name}: no VirtualClusterInstance with rendered values was registered"))
    return plan


def _check_policy(
    plan: StackPlan, values: dict[str, Any], environment_entry: dict[str, Any] | None, environment_run: ProgramRun | None, levels: dict[str, Any] | None
) -> None:
    """The pack over the planned resources, as `pulumi preview --policy-pack policy` runs it once
    `make policy-data` has recorded the stack as it is now (policy/program_data.json `stacks`: the
    exact identities and tenants of each committed stack); a stack the file records otherwise, or
    not at all, is judged by what this run makes of it, and warned about: the pack in the file,
    and the published one, would judge it by the old record."""
    # An environment output an outputs file shows as [secret] (the kubeconfig) is, to the pack,
    # a value it cannot see: the policies that read it say they cannot run here.
    if plan.kind == "tenant" and environment_entry is None:
        plan.policy = policy_check.check(plan.run, levels, hidden=SECRET)  # no environment to start its entry from
    else:
        plan.pack_entry = policy_data.stack_entry(plan.stack, plan.run, values, environment_entry, environment_run)
        recorded = policy_check.P.STACKS.get(plan.stack)
        if plan.kind == "tenant" and environment_run is None and recorded is not None and "environmentResources" in recorded:
            # Without the environment's run (its outputs from a file) what it makes for this team is
            # not known here: the record's stands.
            plan.pack_entry["environmentResources"] = recorded["environmentResources"]
        if recorded != plan.pack_entry:
            differs = "is not recorded there" if recorded is None else "is recorded otherwise there"
            plan.warnings.append(
                (
                    "plan",
                    f"policy pack: stack {plan.stack} {differs} (policy/stacks/{plan.stack}.json), so the pack judges it by an old "
                    "record: its tenants, accounts and settings as this plan shows them need `make policy-data`, and the published "
                    "pack (make policy-publish) before `pulumi preview` passes; judged here as it will be then",
                )
            )
        judged = plan.pack_entry
        if plan.kind == "environment":  # what its team stacks bring, as their records will say (tools/policy_records.py)
            judged = {**judged, "teamStackResources": policy_records.team_stack_resources(plan.run, values)}
        with policy_check.judging_stacks({plan.stack: judged}):
            plan.policy = policy_check.check(plan.run, levels, hidden=SECRET)
    plan.warnings += [("policy", f"{v.policy} (advisory): {v.message}") for v in plan.policy if not v.mandatory]


def _run(values: dict[str, Any], stack: str, project_dir: Path, stack_outputs: dict[str, dict] | None) -> ProgramRun:
    try:
        return run_program(values, stack=stack, stack_outputs=stack_outputs, project_dir=project_dir)
    except (pulumi.RunError, ConfigError) as e:
        raise PlanError(str(e)) from None


def _environment_outputs(
    tenant: TenantStack, project_dir: Path, outputs_file: Path | None, cache: dict[str, EnvironmentOutputs]
) -> EnvironmentOutputs:
    if outputs_file is not None:
        return EnvironmentOutputs(_read_outputs_file(outputs_file, tenant.environment_stack), f"from {outputs_file}")
    env_stack = tenant.environment_stack.split("/")[-1]
    if env_stack not in cache:
        # The environment's own plan (so a plan of it made before in this process serves), which
        # fills the cache. load_stack already checked this stack file, so a failure is the program's.
        try:
            plan_stack(env_stack, project_dir, environment_cache=cache)
        except PlanError as e:
            raise PlanError(
                f"stack {tenant.stack}: its environment {tenant.environment_stack} could not be evaluated offline "
                f"from {stack_file(project_dir, env_stack).name}; pass --environment-outputs FILE.\n{e}"
            ) from None
    return cache[env_stack]


def _read_outputs_file(path: Path, reference: str) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        raise PlanError(f"--environment-outputs {path}: cannot read it ({e.strerror})") from None
    try:
        document = json.loads(text) if path.suffix == ".json" else yaml_io.load(text, source=str(path))
    except (ValueError, yaml.YAMLError) as e:
        raise PlanError(f"--environment-outputs {path}: neither JSON nor YAML ({e})") from None
    needed = ("environmentFacts", "kubeconfig")
    if not isinstance(document, dict):
        raise PlanError(f"--environment-outputs {path}: expected a mapping of output names to values")
    missing = [k for k in needed if k not in document]
    if missing:
        raise PlanError(
            f"--environment-outputs {path}: missing output(s) {', '.join(missing)}; expected the output of "
            f"`pulumi stack output --json --stack {reference}`"
        )
    return document


def _plan_environment(plan: StackPlan, env: EnvironmentStack) -> None:
    run = plan.run
    registered = run.of_type(NODE_PROVIDER_TYPE)
    if len(registered) != 1:
        plan.warnings.append(("plan", f"expected one NodeProvider to be registered, found {len(registered)}"))
    else:
        # Exactly what the program registered.
        inputs = registered[0].plain_inputs
        plan.node_provider = {
            "apiVersion": inputs.get("apiVersion"),
            "kind": inputs.get("kind"),
            "metadata": ordered_metadata(inputs.get("metadata") or {}),
            "spec": normalise(inputs.get("spec")),
        }

    if env.node_provider.legacy_infrastructure and not any("legacyInfrastructure" in m for _, m in plan.warnings):
        plan.warnings.append(("plan", _legacy_warning("nodeProvider.legacyInfrastructure: true")))
    if env.cluster.system_pool.min_nodes == 0:
        plan.warnings.append(("plan", "cluster.systemPool.minNodes is 0, but the platform keeps at least one system node running: always-on counts one"))


def _versions(loaded: EnvironmentStack | TenantStack) -> list[tuple[str, str]]:
    """The pinned version of everything the stack installs."""
    def digest(text: str) -> str:
        return "inline, sha256 " + hashlib.sha256(text.encode()).hexdigest()[:12]

    tenants = loaded.tenants if isinstance(loaded, EnvironmentStack) else (loaded.tenant,)
    operators = sorted({t.tenant.gpu_operator.version for t in tenants})
    rows: list[tuple[str, str]] = []
    if isinstance(loaded, EnvironmentStack):
        np = loaded.node_provider
        image = load_catalog().gpu_image
        zones = tuple(sorted({nt.zone for nt in loaded.offer.node_types}))
        rows += [
            ("platform chart", f"{versions.PLATFORM_CHART} {loaded.platform.chart_version} ({versions.PLATFORM_CHART_REPO})"),
            ("GKE release channel", str(loaded.cluster.release_channel)),
            ("node template", digest(node_template())),
            ("environment template", "official environment/infrastructure, " + versions.AUTO_NODES_GCP_TAG if np.legacy_infrastructure else digest(environment_template(loaded.environment))),
            ("kubernetes template", digest(kubernetes_template(zones))),
            ("cloud controller manager", versions.CCM_IMAGE),
            ("PD CSI driver", f"{versions.PD_CSI_DRIVER_IMAGE} (sidecars: config/versions.py)"),
            ("GPU node image", f"{image.project}/{np.gpu_image_family or image.family} (family: the newest image of it at VM creation)"),
        ]
        vcluster = loaded.platform.vcluster_version
    else:
        vcluster = loaded.facts.vcluster_version
    rows += [
        ("vCluster chart", f"{versions.VCLUSTER_CHART} {vcluster} ({versions.VCLUSTER_CHART_REPO})"),
        ("GPU Operator chart", f"{versions.GPU_OPERATOR_CHART} {', '.join(operators) or versions.GPU_OPERATOR_VERSION} ({versions.GPU_OPERATOR_CHART_REPO})"),
    ]
    return rows


def _plan_tenant_stack(plan: StackPlan, stack: TenantStack) -> None:
    if stack.facts.legacy_infrastructure and not any("legacyInfrastructure" in m for _, m in plan.warnings):
        plan.warnings.append(("plan", _legacy_warning(f"environment {stack.environment_stack} sets nodeProvider.legacyInfrastructure: true, which")))


def _legacy_warning(what: str) -> str:
    roles = load_roles()
    legacy, minimal = roles.roles[LEGACY_AUTO_NODES], roles.roles[AUTO_NODES]
    return (
        f"{what} gives the vCluster Platform's identity the broad legacy role ({len(legacy.permissions)} project-wide "
        f"permissions instead of {len(minimal.permissions)}: it creates networks, firewalls and service accounts itself) "
        "and lets the official infrastructure template build every tenant's network. Use it only to migrate; the default (false) "
        "keeps tenant networks and identities in Pulumi."
    )


def order_stacks(project_dir: Path) -> list[str]:
    """Every stack of the project, environment stacks first (tenant stacks use their outputs)."""
    environments, tenants = [], []
    for stack in list_stacks(project_dir):
        try:
            is_tenant = bool(read_stack_values(project_dir, stack).get(f"{NS}:environmentStack"))
        except StackFileError:
            is_tenant = False  # planned (and reported) with the environment stacks
        (tenants if is_tenant else environments).append(stack)
    return environments + tenants


# --- command line ----------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tools.plan",
        description="Offline plan of a stack: the real program under Pulumi's mock engine, no cloud and no credentials.",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--stack", default="dev", help="stack to plan, from Pulumi.<stack>.yaml (default: dev)")
    which.add_argument("--all", action="store_true", help="every Pulumi.*.yaml of the project, environment stacks first")
    p.add_argument("--out", type=Path, metavar="DIR", help="write each rendered document as YAML under DIR/<stack>/")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print a machine-readable summary (one object; with --all {\"stacks\": [...]})")
    output.add_argument("--quiet", action="store_true", help="one line per stack (CI); problems still go to stderr")
    p.add_argument("--node-types", action="store_true", help="list every node type by name (default: grouped by shape, zones in one column)")
    p.add_argument(
        "--environment-outputs",
        type=Path,
        metavar="FILE",
        help="tenant stacks: the environment stack's outputs, JSON or YAML (`pulumi stack output --json`; `[secret]` values are fine); "
        "default: an offline evaluation of the environment's stack file",
    )
    p.add_argument("--project-dir", type=Path, default=PROJECT_DIR, metavar="DIR", help="directory with Pulumi.yaml and the stack files (default: this repository)")
    p.add_argument(
        "--policy-pack-config",
        type=Path,
        metavar="FILE",
        help="the policy pack's configuration, as `pulumi preview --policy-pack-config FILE` takes it: "
        '{"<policy>": {"enforcementLevel": "advisory"}} or {"<policy>": "disabled"} (e.g. for legacy mode, docs/guardrails.md)',
    )
    p.add_argument(
        "--compare-to",
        metavar="REF",
        help="also plan the stack with another version and print what changes: created, deleted, replaced (e.g. a tenant moving to its own "
        "project), updated; a release (v0.1.0): its code on these stack files (the upgrade check); any other git ref: its code and stack files",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    project_dir = args.project_dir.resolve()
    if not (project_dir / "Pulumi.yaml").is_file():
        print(f"error: {project_dir} has no Pulumi.yaml", file=sys.stderr)
        return 2
    if args.all and args.environment_outputs is not None:
        print("error: --environment-outputs applies to one tenant stack (--stack), not to --all", file=sys.stderr)
        return 2
    stacks = order_stacks(project_dir) if args.all else [args.stack]
    if not stacks:
        print(f"error: no Pulumi.<stack>.yaml in {project_dir}", file=sys.stderr)
        return 1

    try:
        levels = policy_check.read_levels(args.policy_pack_config) if args.policy_pack_config else None
    except ValueError as e:
        print(f"error: --policy-pack-config {args.policy_pack_config}: {e}", file=sys.stderr)
        return 2
    cache: dict[str, EnvironmentOutputs] = {}
    summaries: list[dict[str, Any]] = []
    allowed = destroy_gate.declared(os.environ.get(destroy_gate.ENVIRONMENT_VARIABLE))
    failed = 0
    for i, stack in enumerate(stacks):
        try:
            plan = plan_stack(stack, project_dir, environment_outputs_file=args.environment_outputs, environment_cache=cache, policy_levels=levels)
            if args.out is not None:
                write_documents(plan, args.out)
            changes = plan_compare.compare_plan(plan, args.compare_to) if args.compare_to else plan_committed.committed_stack_files(plan)
        except (PlanError, plan_compare.CompareError) as e:
            failed += 1
            _report_failure(stack, str(e), args, summaries)
            continue
        except Exception:  # a bug in the program or the plan, not in the stack file: keep the traceback
            failed += 1
            _report_failure(stack, "internal error (a bug, not a problem of the stack file):\n" + traceback.format_exc(), args, summaries)
            continue
        # Deletions and replacements of what holds state come first (and again last, where make's
        # error follows), and fail the plan unless declared.
        destructions = changes.destructions() if changes else []
        banner, permitted = plan_compare_text.gate(stack, changes, allowed)
        violations = plan.mandatory_violations
        failed += bool(violations) or not permitted
        if args.json:
            destroys = [
                {"action": d.action, "type": d.type, "name": d.name, "declared": destroy_gate.covered(d, allowed), "gated": not changes.ungated}
                for d in destructions
            ]
            summaries.append({**summary(plan), **({"changes": changes.to_dict(), "destroys": destroys} if changes else {})})
            continue
        if i and not args.quiet:
            print("\n" + "=" * 100 + "\n")
        if banner:
            print(banner, flush=True)
        if args.quiet:
            print(render_quiet(plan), flush=True)
            if violations:
                print(render_violations(plan), file=sys.stderr, flush=True)
        else:
            print(render_text(plan, all_node_types=args.node_types), end="", flush=True)
            if violations:
                print(f"plan of stack {stack}: the policy pack rejects it ({len(violations)} mandatory violation(s), printed above the costs)", file=sys.stderr, flush=True)
        if changes:
            print(("\n" if not args.quiet else "") + plan_compare_text.render_changes(changes, plan.loaded.facts.project, plan.loaded.facts.environment), end="", flush=True)
        elif not args.compare_to and not args.quiet:
            print("\n" + plan_compare_text.no_comparison(), end="", flush=True)
        if banner:
            print("\n" + banner, end="", file=sys.stdout if permitted else sys.stderr, flush=True)
    if args.json:
        print(json.dumps(summaries[0] if not args.all else {"stacks": summaries}, indent=2, default=str))
    return 1 if failed else 0


def _report_failure(stack: str, message: str, args: argparse.Namespace, summaries: list[dict[str, Any]]) -> None:
    """The failure once: with --quiet its headline is the stack's line on stdout and the details
    (every problem) follow on stderr; otherwise all of it on stderr."""
    if args.json:
        summaries.append({"stack": stack, "ok": False, "error": message})
    elif args.quiet:
        headline, _, details = message.partition("\n")
        print(f"FAIL  {stack}: {headline}", flush=True)
        if details:
            print(details, file=sys.stderr, flush=True)
        return
    print(f"plan of stack {stack} failed:\n{message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
